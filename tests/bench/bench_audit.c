/*
 * bench_audit.c — what the audit log costs (make bench-audit), on a real
 * SQLite file with synchronous=FULL, the server's own store.
 *
 *  - one append at a time (an operator acting alone): its latency, beside
 *    the same number of campaign inserts (a one-row write of the same
 *    engine, the peer), in alternating blocks;
 *  - appends from 8 threads at once: the rate, beside campaign inserts
 *    from 8 threads (both share group commits);
 *  - --verify-audit's walk: rows per second over a chain of 20,000 rows.
 *
 * Prints "BENCH <name> <value> <unit>" lines; decides nothing.
 */
#include "audit.h"
#include "campaigns.h"
#include "clock.h"
#include "error.h"
#include "store.h"
#include "tmpdir.h"

#include <pthread.h>
#include <sodium.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define BLOCKS 6
#define PER_BLOCK 50
#define THREADS 8
#define PER_THREAD 100
#define CHAIN_ROWS 20000

static lp_store *store;
static int campaign_seq;
static pthread_mutex_t seq_lock = PTHREAD_MUTEX_INITIALIZER;

static void die(const char *what)
{
    fprintf(stderr, "bench_audit: %s\n", what);
    exit(1);
}

static int append_one(void)
{
    return lp_store_audit_append(store, 1, "PUT /v1/corruption",
                                 "{\"body\":{\"campaign\":\"default\",\"alpha\":0.1}}", 200, "",
                                 lp_now_ms(), NULL);
}

static int insert_one(void)
{
    lp_campaign c = {.epsilon_min = 0.1,
                     .epsilon_max = 1,
                     .epsilon_budget = 10,
                     .epsilon_default = 1,
                     .labels_per_task = 1};
    pthread_mutex_lock(&seq_lock);
    snprintf(c.name, sizeof c.name, "bench-%d", campaign_seq++);
    pthread_mutex_unlock(&seq_lock);
    return lp_store_campaign_create(store, &c);
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* Mean, p50 and p99 of n latencies (ms). */
static void report(const char *name, double *ms, int n)
{
    double sum = 0;
    for (int i = 0; i < n; i++)
        sum += ms[i];
    qsort(ms, (size_t)n, sizeof *ms, cmp_double);
    printf("BENCH %s_mean %.3f ms\n", name, sum / n);
    printf("BENCH %s_p50 %.3f ms\n", name, ms[n / 2]);
    printf("BENCH %s_p99 %.3f ms\n", name, ms[(n * 99) / 100]);
}

static void serial(void)
{
    static double append_ms[BLOCKS * PER_BLOCK], insert_ms[BLOCKS * PER_BLOCK];
    int na = 0, ni = 0;
    for (int b = 0; b < BLOCKS; b++)
        for (int i = 0; i < PER_BLOCK; i++) {
            int64_t t0 = lp_mono_ns();
            if ((b % 2 ? insert_one() : append_one()) != LP_OK)
                die("write failed");
            double ms = (double)(lp_mono_ns() - t0) / 1e6;
            if (b % 2)
                insert_ms[ni++] = ms;
            else
                append_ms[na++] = ms;
        }
    report("audit_append_serial", append_ms, na);
    report("audit_peer_campaign_insert_serial", insert_ms, ni);
}

static void *worker(void *arg)
{
    int (*fn)(void) = (int (*)(void))arg;
    for (int i = 0; i < PER_THREAD; i++)
        if (fn() != LP_OK)
            die("write failed");
    return NULL;
}

static double parallel_rate(int (*fn)(void))
{
    pthread_t th[THREADS];
    int64_t t0 = lp_mono_ns();
    for (int t = 0; t < THREADS; t++)
        pthread_create(&th[t], NULL, worker, (void *)fn);
    for (int t = 0; t < THREADS; t++)
        pthread_join(th[t], NULL);
    return THREADS * PER_THREAD / ((double)(lp_mono_ns() - t0) / 1e9);
}

int main(void)
{
    if (sodium_init() < 0)
        die("libsodium");
    char dir[256], path[300], err[256];
    if (tmpdir_create(dir, sizeof dir, "bench-audit") != 0)
        die("no temporary directory");
    snprintf(path, sizeof path, "%s/audit.db", dir);
    lp_store_opts o = {.path = path, .sync_full = 1, .read_conns = 2};
    if (lp_store_open(&o, &store, err, sizeof err) != LP_OK)
        die(err);
    serial();
    double a1 = parallel_rate(append_one), i1 = parallel_rate(insert_one);
    double a2 = parallel_rate(append_one), i2 = parallel_rate(insert_one);
    printf("BENCH audit_append_8_threads %.0f appends/s\n", (a1 + a2) / 2);
    printf("BENCH audit_peer_campaign_insert_8_threads %.0f inserts/s\n", (i1 + i2) / 2);
    /* Grow the chain to CHAIN_ROWS rows (group commits from many threads). */
    lp_audit_check c;
    if (lp_audit_verify_file(path, &c, err, sizeof err) != LP_OK)
        die(err);
    for (int64_t rows = c.rows; rows < CHAIN_ROWS; rows += THREADS * PER_THREAD)
        parallel_rate(append_one);
    int64_t t0 = lp_mono_ns();
    if (lp_audit_verify_file(path, &c, err, sizeof err) != LP_OK || !c.intact)
        die("the chain does not verify");
    double s = (double)(lp_mono_ns() - t0) / 1e9;
    printf("BENCH audit_verify %.0f rows/s\n", (double)c.rows / s);
    printf("BENCH audit_verify_rows %lld rows\n", (long long)c.rows);
    lp_store_close(store);
    tmpdir_remove(dir);
    return 0;
}
