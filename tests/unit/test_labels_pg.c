/*
 * test_labels_pg.c — label ingest with three stores on one PostgreSQL
 * database (three servers' writers, in one process): the checks that
 * concurrent requests must not both pass hold across the stores.
 *
 * Rounds in lock step: in each round one thread per store submits one
 * label of the same annotator at the same moment —
 *   a conflict round: a label, the identical label (a resend) and another
 *   label for the same task;
 *   a nonce round: two labels for two tasks carrying the same nonce, and a
 *   resend of the annotator's first stored label.
 * Each round has exactly one winner while the budget lasts (the others get
 * the original receipt, already_labeled, or the replayed nonce's error);
 * afterwards every label is budget_exceeded. Then free running: threads on
 * every store spend the budgets of a second campaign's annotators at
 * random, several annotators per job (locks taken in different orders, so
 * the stores' transactions may deadlock and run again): every
 * acknowledged label is stored, no annotator spends more than its budget,
 * each spends all of it when it tried enough tasks. At the end every
 * stored label resent through every store gets its original receipt, and
 * the counters equal what the labels table gives. A revocation through one
 * store is authoritative in the others' next job.
 */
#include "annotators.h"
#include "campaigns.h"
#include "check.h"
#include "clock.h"
#include "db_counters.h"
#include "error.h"
#include "labels.h"
#include "pg.h"
#include "store.h"
#include "tasks.h"

#include <libpq-fe.h>
#include <math.h>
#include <pthread.h>
#include <sodium.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define STORES 3
#define ANNOTS 3       /* lock-step annotators */
#define ROUNDS 12      /* per lock-step annotator: conflict and nonce rounds alternate */
#define BUDGET 6       /* ε per lock-step annotator; each label spends 1 */
#define FREE_ANNOTS 4  /* free-running annotators */
#define FREE_TASKS 30  /* tasks each of them is assigned */
#define FREE_BUDGET 10 /* ε each; each label spends 0.5: 20 labels */
#define FREE_THREADS 2 /* per store */
#define FREE_JOBS 30   /* per thread, FREE_PER_JOB labels each */
#define FREE_PER_JOB 2
#define ORDER_ANNOTS 8 /* one annotator per job */
#define ORDER_TASKS 40
#define ORDER_THREADS 4 /* per store */
#define ORDER_JOBS 40   /* per thread, one label each */
#define GROUP_ANNOTS 10 /* one group: each labels GROUP_TASKS tasks, 100 labels */
#define GROUP_TASKS 10
#define GROUP_RUNS 5

static lp_store *st[STORES];
static char uri[512];

static uint8_t keys[ANNOTS + FREE_ANNOTS + ORDER_ANNOTS + GROUP_ANNOTS]
                   [32]; /* the annotators' keys, in enrollment order */
static int n_keys;
static int64_t revoked; /* the annotator revoked after the lock step */

static int64_t enroll_new(int64_t campaign)
{
    uint8_t h[LP_HASH_BYTES], *key = keys[n_keys++];
    randombytes_buf(h, sizeof h);
    randombytes_buf(key, 32);
    CHECK_INT(lp_store_enroll_tokens_add(st[0], campaign, h, 1), LP_OK);
    lp_annotator a;
    CHECK_INT(lp_store_enroll(st[0], key, h, &a), LP_OK);
    return a.id;
}

static void make_item(lp_label_item *it, int64_t annot, int64_t task, double eps)
{
    memset(it, 0, sizeof *it);
    it->annotator = annot;
    it->msg.task_id = task;
    it->msg.z = (int)randombytes_uniform(2);
    it->msg.epsilon = eps;
    randombytes_buf(it->msg.nonce, sizeof it->msg.nonce);
    randombytes_buf(it->msg.sig, sizeof it->msg.sig);
    it->msg.timestamp_ms = lp_now_ms();
    it->window_ms = 300000;
}

/* A campaign of n tasks (labels_per_task: every annotator may label each)
 * and k annotators, each assigned every task: tasks[a][i]. */
static int64_t campaign_with(const char *name, double budget, int n, int k, int64_t *annots,
                             int64_t *tasks)
{
    lp_campaign c = {.epsilon_min = 0.1,
                     .epsilon_max = 2,
                     .epsilon_budget = budget,
                     .epsilon_default = 1,
                     .labels_per_task = k};
    snprintf(c.name, sizeof c.name, "%s", name);
    CHECK_INT(lp_store_campaign_create(st[0], &c), LP_OK);
    lp_task_in *in = calloc((size_t)n, sizeof *in);
    char(*ids)[16] = calloc((size_t)n, sizeof *ids);
    lp_assignment *as = calloc((size_t)n, sizeof *as);
    for (int i = 0; i < n; i++) {
        snprintf(ids[i], sizeof ids[i], "%s%d", name, i);
        in[i] = (lp_task_in){ids[i], "prompt", "r0", "r1", 0, NULL, NULL, 0, NULL, 0, LP_GOLD_NONE};
    }
    size_t loaded, skipped, got;
    int64_t first, last;
    CHECK_INT(lp_store_tasks_load(st[0], c.id, in, (size_t)n, &loaded, &skipped, &first, &last),
              LP_OK);
    CHECK_INT(loaded, n);
    for (int a = 0; a < k; a++) {
        annots[a] = enroll_new(c.id);
        CHECK_INT(lp_store_assign(st[0], annots[a], (uint32_t)n, as, &got), LP_OK);
        CHECK_INT(got, n);
        for (int i = 0; i < n; i++)
            tasks[a * n + i] = as[i].task_id;
    }
    free(in);
    free(ids);
    free(as);
    return c.id;
}

static int same_receipt(const lp_receipt *a, const lp_receipt *b)
{
    return a->label_id == b->label_id && a->task_id == b->task_id && a->z == b->z &&
           a->epsilon == b->epsilon && a->received_ms == b->received_ms;
}

/* ---- lock step ---- */

struct stored {
    lp_label_item item; /* as sent */
    lp_receipt receipt; /* as first answered */
};

static struct stored kept[ANNOTS * ROUNDS + FREE_ANNOTS * FREE_TASKS + ORDER_ANNOTS * ORDER_TASKS +
                          GROUP_ANNOTS * GROUP_TASKS * GROUP_RUNS];
static size_t n_kept;

static lp_label_item round_items[STORES];
static pthread_barrier_t go, done;
static int stop;

static void *lockstep_main(void *arg)
{
    int k = (int)(intptr_t)arg;
    for (;;) {
        pthread_barrier_wait(&go);
        if (stop)
            return NULL;
        if (lp_store_labels_submit(st[k], &round_items[k], 1) != LP_OK)
            round_items[k].rc = -1;
        pthread_barrier_wait(&done);
    }
}

static void keep(const lp_label_item *it)
{
    kept[n_kept++] = (struct stored){*it, it->receipt};
}

/* The winner among items[from..to) (rc OK, not a resend): its index, or -1;
 * *winners counts them. */
static int winner_of(int from, int to, int *winners)
{
    int w = -1;
    *winners = 0;
    for (int k = from; k < to; k++)
        if (round_items[k].rc == LP_OK && !round_items[k].existing) {
            w = k;
            ++*winners;
        }
    return w;
}

static void test_lockstep(void)
{
    int64_t annots[ANNOTS], tasks[ANNOTS * 2 * ROUNDS];
    campaign_with("step", BUDGET, 2 * ROUNDS, ANNOTS, annots, tasks);
    pthread_t th[STORES];
    pthread_barrier_init(&go, NULL, STORES + 1);
    pthread_barrier_init(&done, NULL, STORES + 1);
    for (int k = 0; k < STORES; k++)
        pthread_create(&th[k], NULL, lockstep_main, (void *)(intptr_t)k);
    int spent[ANNOTS] = {0}, won_by[STORES] = {0}, resends = 0;
    for (int r = 0; r < ANNOTS * ROUNDS; r++) {
        int a = r % ANNOTS, i = r / ANNOTS;
        int64_t annot = annots[a], task = tasks[a * 2 * ROUNDS + i];
        const struct stored *first = NULL; /* the annotator's first stored label */
        for (size_t j = 0; j < n_kept && first == NULL; j++)
            if (kept[j].item.annotator == annot)
                first = &kept[j];
        int conflict = i % 2 == 0;
        /* the stores take turns at each role */
        lp_label_item *x = &round_items[r % STORES], *y = &round_items[(r + 1) % STORES],
                      *z = &round_items[(r + 2) % STORES];
        make_item(x, annot, task, 1.0);
        if (conflict) {
            *y = *x;
            make_item(z, annot, task, 1.0);
        } else {
            make_item(y, annot, tasks[a * 2 * ROUNDS + ROUNDS + i], 1.0);
            memcpy(y->msg.nonce, x->msg.nonce, sizeof y->msg.nonce);
            CHECK(first != NULL);
            if (first != NULL)
                *z = first->item;
        }
        pthread_barrier_wait(&go);
        pthread_barrier_wait(&done);

        int winners, w = winner_of(0, STORES, &winners);
        if (spent[a] + 1 > BUDGET) { /* every new label is over the budget */
            CHECK_INT(winners, 0);
            CHECK_ERR(x->rc, LP_EBUDGET_EXCEEDED);
            CHECK_ERR(y->rc, LP_EBUDGET_EXCEEDED);
            if (conflict)
                CHECK_ERR(z->rc, LP_EBUDGET_EXCEEDED);
        } else {
            CHECK_INT(winners, 1);
            if (w < 0)
                continue;
            lp_label_item *win = &round_items[w];
            keep(win);
            spent[a]++;
            won_by[w]++;
            if (conflict && win != z) { /* the label won: its copy is a resend */
                lp_label_item *copy = win == x ? y : x;
                CHECK_ERR(copy->rc, LP_OK);
                CHECK_INT(copy->existing, 1);
                CHECK(same_receipt(&copy->receipt, &win->receipt));
                CHECK_ERR(z->rc, LP_ECONFLICTING_LABEL);
            } else if (conflict) { /* the other label won */
                CHECK_ERR(x->rc, LP_ECONFLICTING_LABEL);
                CHECK_ERR(y->rc, LP_ECONFLICTING_LABEL);
            } else { /* one of the two nonce holders won */
                CHECK(win == x || win == y);
                CHECK_ERR((win == x ? y : x)->rc, LP_EREPLAYED_NONCE);
            }
        }
        if (!conflict && first != NULL) { /* the resend of the first label */
            CHECK_ERR(z->rc, LP_OK);
            CHECK_INT(z->existing, 1);
            CHECK(same_receipt(&z->receipt, &first->receipt));
            resends++;
        }
    }
    stop = 1;
    pthread_barrier_wait(&go);
    for (int k = 0; k < STORES; k++)
        pthread_join(th[k], NULL);
    pthread_barrier_destroy(&go);
    pthread_barrier_destroy(&done);
    for (int a = 0; a < ANNOTS; a++)
        CHECK_INT(spent[a], BUDGET); /* every budget spent, through every store */
    fprintf(stderr, "lock step: %zu labels stored, won through the stores %d/%d/%d, %d resends\n",
            n_kept, won_by[0], won_by[1], won_by[2], resends);
    char sql[200];
    for (int a = 0; a < ANNOTS; a++) {
        snprintf(sql, sizeof sql,
                 "SELECT round(epsilon_spent * 1000) FROM annotators WHERE id = %lld",
                 (long long)annots[a]);
        CHECK_INT(db_scalar(uri, sql), BUDGET * 1000);
    }

    /* a revocation through one store is seen by the others' next job: a
     * new label and a resend both get revoked_key */
    CHECK_ERR(lp_store_revoke(st[1], keys[0]), LP_OK);
    revoked = annots[0];
    for (int k = 0; k < STORES; k += 2) {
        lp_label_item it[2];
        make_item(&it[0], annots[0], tasks[2 * ROUNDS - 1], 1.0);
        for (size_t j = 0; j < n_kept; j++)
            if (kept[j].item.annotator == annots[0])
                it[1] = kept[j].item;
        CHECK_ERR(lp_store_labels_submit(st[k], it, 2), LP_OK);
        CHECK_ERR(it[0].rc, LP_EREVOKED_KEY);
        CHECK_ERR(it[1].rc, LP_EREVOKED_KEY);
    }
}

/* ---- free running ---- */

struct attempt {
    lp_label_item item[FREE_PER_JOB];
    int job_rc;
};

struct free_worker {
    int store;
    const int64_t *annots, *tasks;
    struct attempt *at; /* FREE_JOBS */
};

static void *free_main(void *arg)
{
    struct free_worker *fw = arg;
    for (int j = 0; j < FREE_JOBS; j++) {
        struct attempt *at = &fw->at[j];
        for (int i = 0; i < FREE_PER_JOB; i++) {
            int a = (int)randombytes_uniform(FREE_ANNOTS);
            int t = (int)randombytes_uniform(FREE_TASKS);
            make_item(&at->item[i], fw->annots[a], fw->tasks[a * FREE_TASKS + t], 0.5);
        }
        at->job_rc = lp_store_labels_submit(st[fw->store], at->item, FREE_PER_JOB);
    }
    return NULL;
}

static void test_free_running(void)
{
    int64_t annots[FREE_ANNOTS], tasks[FREE_ANNOTS * FREE_TASKS];
    campaign_with("free", FREE_BUDGET, FREE_TASKS, FREE_ANNOTS, annots, tasks);
    static struct attempt at[STORES * FREE_THREADS][FREE_JOBS];
    struct free_worker fw[STORES * FREE_THREADS];
    pthread_t th[STORES * FREE_THREADS];
    for (int k = 0; k < STORES * FREE_THREADS; k++) {
        fw[k] = (struct free_worker){k % STORES, annots, tasks, at[k]};
        pthread_create(&th[k], NULL, free_main, &fw[k]);
    }
    for (int k = 0; k < STORES * FREE_THREADS; k++)
        pthread_join(th[k], NULL);

    /* per annotator: the tasks tried and the labels acknowledged */
    int tried[FREE_ANNOTS][FREE_TASKS] = {{0}}, stored[FREE_ANNOTS] = {0};
    int over[FREE_ANNOTS] = {0}, bad = 0;
    for (int k = 0; k < STORES * FREE_THREADS; k++)
        for (int j = 0; j < FREE_JOBS; j++) {
            CHECK_ERR(at[k][j].job_rc, LP_OK);
            for (int i = 0; i < FREE_PER_JOB; i++) {
                const lp_label_item *it = &at[k][j].item[i];
                int a = 0;
                while (a < FREE_ANNOTS && annots[a] != it->annotator)
                    a++;
                int t = 0;
                while (t < FREE_TASKS && tasks[a * FREE_TASKS + t] != it->msg.task_id)
                    t++;
                tried[a][t] = 1;
                if (it->rc == LP_OK && !it->existing) {
                    stored[a]++;
                    keep(it);
                } else if (it->rc == LP_EBUDGET_EXCEEDED) {
                    over[a]++;
                } else if (it->rc != LP_ECONFLICTING_LABEL) {
                    bad++;
                    fprintf(stderr, "free running: %s\n", lp_error_name(it->rc));
                }
            }
        }
    CHECK_INT(bad, 0);
    for (int a = 0; a < FREE_ANNOTS; a++) {
        int n_tried = 0;
        for (int t = 0; t < FREE_TASKS; t++)
            n_tried += tried[a][t];
        int cap = (int)(FREE_BUDGET / 0.5);
        /* the budget holds, and is spent whenever enough tasks were tried */
        CHECK_INT(stored[a], n_tried < cap ? n_tried : cap);
        CHECK(over[a] == 0 || stored[a] == cap);
        char sql[200];
        snprintf(sql, sizeof sql, "SELECT count(*) FROM labels WHERE annotator = %lld",
                 (long long)annots[a]);
        CHECK_INT(db_scalar(uri, sql), stored[a]); /* every acknowledged label, no more */
        snprintf(sql, sizeof sql,
                 "SELECT round(epsilon_spent * 1000) FROM annotators WHERE id = %lld",
                 (long long)annots[a]);
        CHECK_INT(db_scalar(uri, sql), stored[a] * 500);
    }
    fprintf(stderr, "free running: stored %d/%d/%d/%d labels\n", stored[0], stored[1], stored[2],
            stored[3]);
}

/* ---- one annotator per job: one lock order ----
 * Jobs of one annotator each (single labels, an annotator's own batch),
 * submitted from several threads per store so that groups of several jobs
 * form: the engine runs a group's jobs in annotator order, so the stores
 * lock annotator rows in one order and never deadlock; every conflict
 * would be counted in the writers' statistics. */
struct order_worker {
    int store;
    const int64_t *annots, *tasks;
    lp_label_item item[ORDER_JOBS];
    int failed;
};

static void *order_main(void *arg)
{
    struct order_worker *ow = arg;
    for (int j = 0; j < ORDER_JOBS; j++) {
        int a = (int)randombytes_uniform(ORDER_ANNOTS);
        int t = (int)randombytes_uniform(ORDER_TASKS);
        lp_label_item *it = &ow->item[j];
        make_item(it, ow->annots[a], ow->tasks[a * ORDER_TASKS + t], 0.5);
        int rc = lp_store_labels_submit(st[ow->store], it, 1);
        ow->failed += rc != LP_OK || (it->rc != LP_OK && it->rc != LP_ECONFLICTING_LABEL);
    }
    return NULL;
}

static uint64_t conflicts(void)
{
    uint64_t n = 0;
    for (int k = 0; k < STORES; k++) {
        lp_store_writer_stats ws;
        lp_store_writer_stats_get(st[k], &ws);
        n += ws.conflicts;
    }
    return n;
}

static void test_one_lock_order(void)
{
    int64_t annots[ORDER_ANNOTS], tasks[ORDER_ANNOTS * ORDER_TASKS];
    campaign_with("order", 1e6, ORDER_TASKS, ORDER_ANNOTS, annots, tasks);
    uint64_t before = conflicts();
    static struct order_worker ow[STORES * ORDER_THREADS];
    pthread_t th[STORES * ORDER_THREADS];
    for (int k = 0; k < STORES * ORDER_THREADS; k++) {
        ow[k] = (struct order_worker){.store = k % STORES, .annots = annots, .tasks = tasks};
        pthread_create(&th[k], NULL, order_main, &ow[k]);
    }
    int failed = 0;
    for (int k = 0; k < STORES * ORDER_THREADS; k++) {
        pthread_join(th[k], NULL);
        failed += ow[k].failed;
        for (int j = 0; j < ORDER_JOBS; j++)
            if (ow[k].item[j].rc == LP_OK && !ow[k].item[j].existing)
                keep(&ow[k].item[j]); /* resent at the end */
    }
    CHECK_INT(failed, 0);
    CHECK_INT((long long)(conflicts() - before), 0);
}

/* ---- one group of 100 labels ---- */

/* The next transaction id to be assigned, drawing one (its own). */
static long long next_xid(void)
{
    return db_scalar(uri, "SELECT pg_current_xact_id()::text::bigint");
}

/*
 * A group of 100 labels (10 annotators, 10 tasks each, every counter row
 * written) through one store: its transaction draws one transaction id and
 * almost no subtransaction ids. PostgreSQL keeps 64 subtransaction ids per
 * session in shared memory; past that every other session's snapshot reads
 * pg_subtrans. The ids drawn between two pg_current_xact_id() calls on a
 * database nobody else writes are the group's top-level id plus one per
 * subtransaction that wrote (a background ANALYZE may add one or two). The
 * time of each group is printed (a figure, not a check).
 */
static void test_group_subxacts(void)
{
    int64_t annots[GROUP_ANNOTS], tasks[GROUP_ANNOTS * GROUP_TASKS * GROUP_RUNS];
    campaign_with("group", GROUP_TASKS * GROUP_RUNS, GROUP_TASKS * GROUP_RUNS, GROUP_ANNOTS, annots,
                  tasks);
    lp_label_item items[GROUP_ANNOTS * GROUP_TASKS];
    long long max_sub = 0;
    for (int r = 0; r < GROUP_RUNS; r++) {
        for (int a = 0; a < GROUP_ANNOTS; a++)
            for (int i = 0; i < GROUP_TASKS; i++)
                make_item(&items[a * GROUP_TASKS + i], annots[a],
                          tasks[a * GROUP_TASKS * GROUP_RUNS + r * GROUP_TASKS + i], 1.0);
        long long before = next_xid();
        int64_t t0 = lp_mono_ns();
        CHECK_ERR(lp_store_labels_submit(st[r % STORES], items, GROUP_ANNOTS * GROUP_TASKS), LP_OK);
        int64_t t1 = lp_mono_ns();
        long long sub = next_xid() - before - 2; /* less before's own id and the group's */
        int ok = 0;
        for (size_t k = 0; k < sizeof items / sizeof items[0]; k++) {
            ok += items[k].rc == LP_OK && !items[k].existing;
            if (items[k].rc == LP_OK)
                keep(&items[k]);
        }
        CHECK_INT(ok, GROUP_ANNOTS * GROUP_TASKS);
        CHECK(sub >= 0);
        max_sub = sub > max_sub ? sub : max_sub;
        fprintf(stderr, "group of %d labels: %.2f ms, %lld subtransaction ids\n", ok,
                (double)(t1 - t0) / 1e6, sub);
    }
    CHECK(max_sub <= 4);
}

/* Every stored label resent through every store: its original receipt
 * (revoked_key for the revoked annotator's). */
static void test_resends(void)
{
    int same = 0, refused = 0, of_revoked = 0;
    for (size_t j = 0; j < n_kept; j++) {
        of_revoked += kept[j].item.annotator == revoked;
        for (int k = 0; k < STORES; k++) {
            lp_label_item it = kept[j].item;
            CHECK_ERR(lp_store_labels_submit(st[k], &it, 1), LP_OK);
            same += it.rc == LP_OK && it.existing && same_receipt(&it.receipt, &kept[j].receipt);
            refused += it.rc == LP_EREVOKED_KEY && it.annotator == revoked;
        }
    }
    CHECK_INT(of_revoked, BUDGET);
    CHECK_INT(refused, of_revoked * STORES);
    CHECK_INT(same, ((int)n_kept - of_revoked) * STORES);
    CHECK_INT(db_scalar(uri, "SELECT count(*) FROM labels"), (long long)n_kept);
    /* no nonce index on PostgreSQL: its check reads the rows only */
    lp_label_index_check ic;
    CHECK_ERR(lp_store_labels_check_index(st[2], &ic), LP_OK);
    CHECK_INT(ic.rows, n_kept);
    CHECK_INT(ic.missing + ic.slots + ic.capacity + ic.moving, 0);
}

int main(void)
{
    if (sodium_init() < 0)
        return 1;
    pg_cluster pgc;
    if (!pg_cluster_start_for(&pgc, "test_labels_pg"))
        return check_summary();
    CHECK_INT(pg_cluster_create_db(&pgc, "labels_pg", uri, sizeof uri), 0);
    /* deadlocks between the stores are found in 50 ms rather than 1 s (a
     * setting of the server's; the default is 1 s) */
    PGconn *admin = PQconnectdb(pgc.admin_uri);
    PGresult *r = PQexec(admin, "ALTER DATABASE labels_pg SET deadlock_timeout = '50ms'");
    CHECK_INT(PQresultStatus(r), PGRES_COMMAND_OK);
    PQclear(r);
    PQfinish(admin);
    char err[256];
    int opened = 0;
    for (int k = 0; k < STORES; k++) {
        lp_store_opts o = {.path = uri, .sync_full = 1, .read_conns = 1};
        CHECK_INT(lp_store_open(&o, &st[k], err, sizeof err), LP_OK);
        opened += st[k] != NULL;
    }
    if (opened == STORES) {
        test_lockstep();
        test_free_running();
        test_one_lock_order();
        test_group_subxacts();
        test_resends();
        CHECK_INT(db_counters_mismatch(uri), 0);
    }
    for (int k = STORES - 1; k >= 0; k--)
        lp_store_close(st[k]);
    pg_cluster_stop(&pgc);
    return check_summary();
}
