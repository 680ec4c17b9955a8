/*
 * workers.c — see workers.h. One mutex-protected FIFO (a singly linked
 * list) and a condition variable per pool.
 */
#include "workers.h"

#include <pthread.h>
#include <stdlib.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

struct lp_workers {
    pthread_mutex_t lock;
    pthread_cond_t wake;
    lp_job *head, *tail;

    int stopping;
    lp_workers_opts o;
    int n_threads;
    pthread_t *threads;
};

/* Waits while other work is in flight, wait_max_ms at most. */
static void yield_to_others(const lp_workers *w)
{
    if (w->o.busy == NULL)
        return;
    struct timespec poll = {w->o.poll_ms / 1000, (long)(w->o.poll_ms % 1000) * 1000000L};
    for (int waited = 0; waited < w->o.wait_max_ms && w->o.busy(w->o.busy_ctx);
         waited += w->o.poll_ms)
        nanosleep(&poll, NULL);
}

static void *worker_main(void *arg)
{
    lp_workers *w = arg;
    if (w->o.name != NULL)
        pthread_setname_np(pthread_self(), w->o.name);
    if (w->o.nice != 0) /* Linux: PRIO_PROCESS with a thread id sets that thread only */
        setpriority(PRIO_PROCESS, (id_t)syscall(SYS_gettid), w->o.nice);
    pthread_mutex_lock(&w->lock);
    for (;;) {
        while (w->head == NULL && !w->stopping)
            pthread_cond_wait(&w->wake, &w->lock);
        lp_job *j = w->head;
        if (j == NULL) /* stopping and drained */
            break;
        w->head = j->next;
        if (w->head == NULL)
            w->tail = NULL;
        pthread_mutex_unlock(&w->lock);
        yield_to_others(w);
        j->fn(j->ctx); /* may free j */
        pthread_mutex_lock(&w->lock);
    }
    pthread_mutex_unlock(&w->lock);
    return NULL;
}

lp_workers *lp_workers_new(const lp_workers_opts *opts)
{
    lp_workers *w = calloc(1, sizeof *w);
    if (w == NULL)
        return NULL;
    w->threads = calloc((size_t)opts->threads, sizeof *w->threads);
    if (w->threads == NULL) {
        free(w);
        return NULL;
    }
    pthread_mutex_init(&w->lock, NULL);
    pthread_cond_init(&w->wake, NULL);
    w->o = *opts;
    if (w->o.poll_ms < 1)
        w->o.poll_ms = 1;
    for (int i = 0; i < opts->threads; i++) {
        if (pthread_create(&w->threads[i], NULL, worker_main, w) != 0)
            break;
        w->n_threads++;
    }
    if (w->n_threads < opts->threads) {
        lp_workers_free(w);
        return NULL;
    }
    return w;
}

void lp_workers_submit(lp_workers *w, lp_job *j)
{
    j->next = NULL;
    pthread_mutex_lock(&w->lock);
    if (w->tail != NULL)
        w->tail->next = j;
    else
        w->head = j;
    w->tail = j;
    pthread_cond_signal(&w->wake);
    pthread_mutex_unlock(&w->lock);
}

void lp_workers_free(lp_workers *w)
{
    if (w == NULL)
        return;
    pthread_mutex_lock(&w->lock);
    w->stopping = 1;
    pthread_cond_broadcast(&w->wake);
    pthread_mutex_unlock(&w->lock);
    for (int i = 0; i < w->n_threads; i++)
        pthread_join(w->threads[i], NULL);
    pthread_mutex_destroy(&w->lock);
    pthread_cond_destroy(&w->wake);
    free(w->threads);
    free(w);
}
