/*
 * proc_threads.h — a running process's threads as /proc shows them: each
 * thread's id, name (what `top -H` shows) and CPU time.
 */
#ifndef LP_PROC_THREADS_H
#define LP_PROC_THREADS_H

#include <sys/types.h>

typedef struct proc_thread {
    long tid;
    char name[16];    /* /proc/<pid>/task/<tid>/comm, without the newline */
    long long cpu_ns; /* time on a CPU (schedstat), in nanoseconds */
} proc_thread;

/* The threads of pid, at most max of them, into out; returns how many
 * (0 when pid has no /proc entry). */
int proc_threads(pid_t pid, proc_thread *out, int max);

/* How many of the n threads are named name, or (with a trailing '*') have
 * a name starting with what precedes it. */
int proc_threads_named(const proc_thread *t, int n, const char *name);

#endif
