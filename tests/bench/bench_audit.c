/*
 * bench_audit.c — what the audit log costs (make bench-audit), on a real
 * SQLite file with synchronous=FULL, the server's own store.
 *
 *  - one append at a time (an operator acting alone): its latency, beside
 *    the same number of campaign inserts (a one-row write of the same
 *    engine, the peer), in alternating blocks;
 *  - appends from 8 threads at once: the rate, beside campaign inserts
 *    from 8 threads (both share group commits);
 *  - label ingest (16 annotators submitting single labels at once, the
 *    writer's group commits) alone and with an operator appending an audit
 *    row every 10 ms beside it (100 actions/s, far above what people do),
 *    in alternating phases: the rate each time;
 *  - --verify-audit's walk: rows per second over a chain of 20,000 rows.
 *
 * Prints "BENCH <name> <value> <unit>" lines; decides nothing.
 */
#include "annotators.h"
#include "audit.h"
#include "campaigns.h"
#include "labels.h"
#include "tasks.h"
#include "clock.h"
#include "error.h"
#include "store.h"
#include "tmpdir.h"

#include <pthread.h>
#include <sodium.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define BLOCKS 6
#define PER_BLOCK 50
#define THREADS 8
#define PER_THREAD 100
#define CHAIN_ROWS 20000
#define INGEST_ANNOTATORS 16
#define INGEST_PHASES 11     /* alternating: alone, with audit, alone, ..., alone */
#define INGEST_PER_PHASE 300 /* labels per annotator and phase */
#define INGEST_TASKS (INGEST_PHASES * INGEST_PER_PHASE)

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

/* ---- ingest beside the audit log ---- */

static int64_t ingest_annotator[INGEST_ANNOTATORS];
static lp_assignment ingest_tasks[INGEST_ANNOTATORS][INGEST_TASKS];
static int ingest_phase;
static atomic_int ingest_running;

static void ingest_setup(void)
{
    lp_campaign c = {.epsilon_min = 0.01,
                     .epsilon_max = 10,
                     .epsilon_budget = 1e9,
                     .epsilon_default = 1,
                     .labels_per_task = INGEST_ANNOTATORS};
    snprintf(c.name, sizeof c.name, "ingest");
    static lp_task_in tasks[INGEST_TASKS];
    static char ids[INGEST_TASKS][16];
    for (int i = 0; i < INGEST_TASKS; i++) {
        snprintf(ids[i], sizeof ids[i], "t%d", i);
        tasks[i] = (lp_task_in){.source_id = ids[i],
                                .prompt = "prompt",
                                .response0 = "r0",
                                .response1 = "r1",
                                .reference_preferred = -1,
                                .gold = LP_GOLD_NONE};
    }
    size_t loaded, skipped, n;
    int64_t first, last;
    if (lp_store_campaign_create(store, &c) != LP_OK ||
        lp_store_tasks_load(store, c.id, tasks, INGEST_TASKS, &loaded, &skipped, &first, &last) !=
            LP_OK)
        die("ingest set-up");
    for (int a = 0; a < INGEST_ANNOTATORS; a++) {
        uint8_t key[32], h[LP_HASH_BYTES];
        lp_annotator ann;
        randombytes_buf(key, sizeof key);
        randombytes_buf(h, sizeof h);
        if (lp_store_enroll_tokens_add(store, c.id, h, 1) != LP_OK ||
            lp_store_enroll(store, key, h, &ann) != LP_OK ||
            lp_store_assign(store, ann.id, INGEST_TASKS, ingest_tasks[a], &n) != LP_OK ||
            n != INGEST_TASKS)
            die("ingest enrollment");
        ingest_annotator[a] = ann.id;
    }
}

/* One annotator's labels of the current phase, one request at a time. The
 * signature is not checked by the store (the API verifies it before). */
static void *ingest_worker(void *arg)
{
    intptr_t a = (intptr_t)arg;
    for (int i = 0; i < INGEST_PER_PHASE; i++) {
        lp_label_item it = {.annotator = ingest_annotator[a], .window_ms = 300000};
        it.msg.task_id = ingest_tasks[a][ingest_phase * INGEST_PER_PHASE + i].task_id;
        it.msg.z = i % 2;
        it.msg.epsilon = 1;
        it.msg.timestamp_ms = lp_now_ms();
        randombytes_buf(it.msg.nonce, sizeof it.msg.nonce);
        if (lp_store_labels_submit(store, &it, 1) != LP_OK || it.rc != LP_OK)
            die("a label was refused");
    }
    return NULL;
}

static void *operator_worker(void *arg)
{
    int *appended = arg;
    while (atomic_load(&ingest_running)) {
        if (append_one() != LP_OK)
            die("append failed");
        (*appended)++;
        usleep(10000);
    }
    return NULL;
}

/* One phase: labels/s, with an operator appending beside it or not. */
static double ingest_phase_rate(int with_audit, int *appended)
{
    pthread_t th[INGEST_ANNOTATORS], op;
    atomic_store(&ingest_running, 1);
    if (with_audit)
        pthread_create(&op, NULL, operator_worker, appended);
    int64_t t0 = lp_mono_ns();
    for (intptr_t a = 0; a < INGEST_ANNOTATORS; a++)
        pthread_create(&th[a], NULL, ingest_worker, (void *)a);
    for (int a = 0; a < INGEST_ANNOTATORS; a++)
        pthread_join(th[a], NULL);
    double s = (double)(lp_mono_ns() - t0) / 1e9;
    atomic_store(&ingest_running, 0);
    if (with_audit)
        pthread_join(op, NULL);
    ingest_phase++;
    return INGEST_ANNOTATORS * INGEST_PER_PHASE / s;
}

static void ingest(void)
{
    ingest_setup();
    double rate[INGEST_PHASES], ratio[INGEST_PHASES / 2];
    int appended = 0;
    for (int p = 0; p < INGEST_PHASES; p++) {
        rate[p] = ingest_phase_rate(p % 2, &appended);
        printf("BENCH ingest_phase%d_%s %.0f labels/s\n", p, p % 2 ? "with_audit" : "alone",
               rate[p]);
    }
    /* Each phase with the operator beside it against the mean of the two
     * phases without around it (the machine's speed drifts). */
    double alone = 0, beside = 0;
    for (int p = 0; p < INGEST_PHASES; p++)
        if (p % 2) {
            ratio[p / 2] = rate[p] / ((rate[p - 1] + rate[p + 1]) / 2);
            beside += rate[p] / (INGEST_PHASES / 2);
        } else {
            alone += rate[p] / (INGEST_PHASES / 2 + 1);
        }
    qsort(ratio, INGEST_PHASES / 2, sizeof ratio[0], cmp_double);
    printf("BENCH ingest_alone %.0f labels/s\n", alone);
    printf("BENCH ingest_with_audit_100_per_s %.0f labels/s\n", beside);
    printf("BENCH ingest_with_audit_vs_alone_median %.3f ratio\n", ratio[INGEST_PHASES / 4]);
    printf("BENCH ingest_with_audit_vs_alone_min %.3f ratio\n", ratio[0]);
    printf("BENCH ingest_with_audit_vs_alone_max %.3f ratio\n", ratio[INGEST_PHASES / 2 - 1]);
    printf("BENCH ingest_audit_rows_beside %d rows\n", appended);
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
    ingest();
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
