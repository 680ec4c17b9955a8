/*
 * test_workers.c — the HTTP layer's worker pools (server/http/workers.h):
 * every queued job runs exactly once, on the pool's threads, in arrival
 * order on a one-thread pool; freeing a pool runs what is still queued; a
 * background pool waits while other work is busy, at most wait_max_ms, and
 * runs at once when nothing is.
 */
#include "workers.h"

#include "check.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <time.h>
#include <unistd.h>

#define JOBS 1000

static _Atomic int ran[JOBS];
static int order[JOBS], n_order;
static pthread_mutex_t order_lock = PTHREAD_MUTEX_INITIALIZER;
static lp_job jobs[JOBS];
static int ids[JOBS];

static void job(void *ctx)
{
    int id = *(int *)ctx;
    atomic_fetch_add(&ran[id], 1);
    pthread_mutex_lock(&order_lock);
    order[n_order++] = id;
    pthread_mutex_unlock(&order_lock);
}

static double now_ms(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec * 1e3 + t.tv_nsec / 1e6;
}

static void run_all(int threads)
{
    n_order = 0;
    for (int i = 0; i < JOBS; i++) {
        atomic_store(&ran[i], 0);
        ids[i] = i;
        jobs[i] = (lp_job){.fn = job, .ctx = &ids[i]};
    }
    lp_workers_opts o = {.threads = threads};
    lp_workers *w = lp_workers_new(&o);
    CHECK(w != NULL);
    if (w == NULL)
        return;
    for (int i = 0; i < JOBS; i++)
        lp_workers_submit(w, &jobs[i]);
    lp_workers_free(w); /* runs what is still queued */
    int once = 0;
    for (int i = 0; i < JOBS; i++)
        once += atomic_load(&ran[i]) == 1;
    check_record(once == JOBS, __FILE__, __LINE__, "%d threads: %d of %d jobs ran exactly once",
                 threads, once, JOBS);
    if (threads == 1) {
        int in_order = 1;
        for (int i = 0; i < n_order; i++)
            in_order &= order[i] == i;
        CHECK(in_order && n_order == JOBS);
    }
}

static _Atomic int busy_flag;
static int is_busy(void *ctx)
{
    (void)ctx;
    return atomic_load(&busy_flag);
}

static _Atomic int done;
static double done_ms;
static void mark_done(void *ctx)
{
    (void)ctx;
    done_ms = now_ms();
    atomic_store(&done, 1);
}

/* A background job waits while others are busy (at most wait_max_ms) and
 * starts at once when they are not. */
static void background_waits(int busy, double min_ms, double max_ms)
{
    atomic_store(&busy_flag, busy);
    atomic_store(&done, 0);
    lp_workers_opts o = {
        .threads = 1, .nice = 5, .busy = is_busy, .poll_ms = 2, .wait_max_ms = 300};
    lp_workers *w = lp_workers_new(&o);
    CHECK(w != NULL);
    if (w == NULL)
        return;
    lp_job j = {.fn = mark_done};
    double t0 = now_ms();
    lp_workers_submit(w, &j);
    while (!atomic_load(&done))
        usleep(1000);
    double took = done_ms - t0;
    check_record(took >= min_ms && took <= max_ms, __FILE__, __LINE__,
                 "background job with others %s started after %.1f ms (want %.0f..%.0f)",
                 busy ? "busy" : "idle", took, min_ms, max_ms);
    lp_workers_free(w);
}

int main(void)
{
    run_all(1);
    run_all(4);
    background_waits(0, 0, 150);
    background_waits(1, 250, 2000);
    lp_workers_free(NULL);
    return check_summary();
}
