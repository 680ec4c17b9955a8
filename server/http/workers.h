/*
 * workers.h — a pool of threads running queued jobs in arrival order.
 *
 * The HTTP layer reads requests in its event loop and hands the blocking
 * part of each (signature verification, handlers, database reads) to a
 * pool. A background pool yields to other work: its threads run at a
 * lower CPU priority (a nice value, per thread), and before each job a
 * thread waits while other work is in flight (polling every poll_ms, for
 * wait_max_ms at most, so its jobs still run, slowly, under sustained
 * load): a low priority alone is not enough where vCPUs share a physical
 * core, since a busy thread on one slows the other.
 */
#ifndef LP_WORKERS_H
#define LP_WORKERS_H

#include <stddef.h>

typedef struct lp_workers lp_workers;

typedef void (*lp_job_fn)(void *ctx);

/* A queued job; the caller owns its storage (e.g. inside the request it
 * serves), which must stay valid until fn has been called. */
typedef struct lp_job {
    lp_job_fn fn;
    void *ctx;
    struct lp_job *next; /* the pool's */
} lp_job;

typedef struct lp_workers_opts {
    const char *name; /* the threads' name (at most 15 bytes; NULL: unnamed) */
    int threads;      /* >= 1 */
    int nice;         /* added to each thread's nice value (0: none) */
    /* Background pools: nonzero while other work is in flight (NULL:
     * never), how often to look, and the longest wait before a job. */
    int (*busy)(void *ctx);
    void *busy_ctx;
    int poll_ms, wait_max_ms;
} lp_workers_opts;

/* Starts the threads. NULL when out of memory or threads cannot start. */
lp_workers *lp_workers_new(const lp_workers_opts *opts);

/* Queues job (its fn and ctx set). */
void lp_workers_submit(lp_workers *w, lp_job *job);

/* Runs every queued job, stops the threads and frees. Accepts NULL. */
void lp_workers_free(lp_workers *w);

#endif
