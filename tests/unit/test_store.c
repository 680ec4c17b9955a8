/*
 * test_store.c — the SQLite store on a real file: migrations, the embedded
 * schema matching schema/00N_*.sql, group commit under many threads,
 * budget checks that concurrent submissions cannot both pass, the nonce
 * index exact under racing submissions and rebuilt after a restart,
 * append-only labels, and integrity after all of it; the label checks on
 * PostgreSQL too.
 */
#include "annotators.h"
#include "campaigns.h"
#include "check.h"
#include "clock.h"
#include "db_counters.h"
#include "error.h"
#include "labels.h"
#include "pg.h"
#include "schema_sql.h"
#include "stats.h"
#include "store.h"
#include "tasks.h"

#include <pthread.h>
#include <sodium.h>
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define THREADS 8
#define PER_THREAD 150

static char dir[] = "/tmp/ldpref-test-store-XXXXXX";
static char path[256];
static lp_store *s;

static int64_t enroll_new(int64_t campaign, uint8_t key[32])
{
    uint8_t h[LP_HASH_BYTES];
    randombytes_buf(h, sizeof h);
    randombytes_buf(key, 32);
    CHECK_INT(lp_store_enroll_tokens_add(s, campaign, h, 1), LP_OK);
    lp_annotator a;
    CHECK_INT(lp_store_enroll(s, key, h, &a), LP_OK);
    return a.id;
}

static void make_item(lp_label_item *it, int64_t annot, int64_t task, double eps)
{
    memset(it, 0, sizeof *it);
    it->annotator = annot;
    it->msg.task_id = task;
    it->msg.z = 1;
    it->msg.epsilon = eps;
    randombytes_buf(it->msg.nonce, 16);
    randombytes_buf(it->msg.sig, 64);
    it->msg.timestamp_ms = lp_now_ms();
    it->window_ms = 300000;
}

struct worker {
    int64_t annot;
    lp_assignment as[PER_THREAD];
    int ok;
};

static void *worker_main(void *arg)
{
    struct worker *w = arg;
    for (int i = 0; i < PER_THREAD; i++) {
        lp_label_item it;
        make_item(&it, w->annot, w->as[i].task_id, 0.5);
        if (lp_store_labels_submit(s, &it, 1) == LP_OK && it.rc == LP_OK)
            w->ok++;
    }
    return NULL;
}

/* Every schema/00N_*.sql file is embedded byte for byte, in order. */
static void test_schema_files(void)
{
    static const char *const files[] = {"schema/001_init.sql",
                                        "schema/002_learn.sql",
                                        "schema/003_typed_provenance.sql",
                                        "schema/004_campaign_progress.sql",
                                        "schema/005_conversations.sql",
                                        "schema/006_operator_views.sql",
                                        "schema/007_training_curve.sql",
                                        "schema/008_gold.sql",
                                        "schema/009_l2_auto.sql",
                                        "schema/010_operator_tokens.sql",
                                        "schema/011_audit.sql",
                                        "schema/012_model_privacy.sql",
                                        "schema/013_labels_append.sql",
                                        "schema/014_central_campaigns.sql",
                                        "schema/015_counters_in_writer.sql",
                                        "schema/016_task_count_in_upload.sql"};
    CHECK_INT(LP_MIGRATION_COUNT, (int)(sizeof files / sizeof files[0]));
    for (size_t i = 0; i < sizeof files / sizeof files[0]; i++) {
        FILE *f = fopen(files[i], "rb");
        CHECK(f != NULL);
        if (!f)
            continue;
        static char buf[1 << 16];
        size_t n = fread(buf, 1, sizeof buf - 1, f);
        buf[n] = 0;
        fclose(f);
        CHECK(strcmp(buf, LP_MIGRATIONS[i]) == 0); /* embedded copy is in sync */
    }
}

/* The writer's label checks, on a database of their own (a SQLite file, or
 * the PostgreSQL database at uri): protocol order with the insert-first
 * fast path, a resend and a conflict in the same group, epsilon spends
 * written back, a revocation between label jobs. */
static void test_label_checks(const char *uri)
{
    char err[256], cpath[600];
    if (uri != NULL)
        snprintf(cpath, sizeof cpath, "%s", uri);
    else
        snprintf(cpath, sizeof cpath, "%s/checks.db", dir);
    lp_store_opts o = {.path = cpath, .sync_full = 1, .read_conns = 1};
    CHECK_INT(lp_store_open(&o, &s, err, sizeof err), LP_OK);
    lp_campaign c = {
        .epsilon_min = 0.5, .epsilon_max = 2, .epsilon_budget = 4, .epsilon_default = 1};
    snprintf(c.name, sizeof c.name, "checks");
    CHECK_INT(lp_store_campaign_create(s, &c), LP_OK);
    static lp_task_in tasks[8];
    static char ids[8][16];
    for (int i = 0; i < 8; i++) {
        snprintf(ids[i], sizeof ids[i], "c%d", i);
        tasks[i] =
            (lp_task_in){ids[i], "prompt", "r0", "r1", 0, NULL, NULL, 0, NULL, 0, LP_GOLD_NONE};
    }
    size_t loaded, skipped;
    int64_t first, last;
    CHECK_INT(lp_store_tasks_load(s, c.id, tasks, 8, &loaded, &skipped, &first, &last), LP_OK);
    uint8_t key[32];
    int64_t annot = enroll_new(c.id, key);
    lp_assignment as[8];
    size_t n;
    CHECK_INT(lp_store_assign(s, annot, 7, as, &n), LP_OK); /* the last task stays unassigned */
    CHECK_INT(n, 7);

    lp_label_item it[8];
    make_item(&it[0], annot, as[0].task_id, 1.0);
    it[1] = it[0];                                /* identical resend in the same job */
    make_item(&it[2], annot, as[0].task_id, 1.0); /* different label, same task */
    make_item(&it[3], annot, as[1].task_id, 5.0); /* reused nonce, and out of range */
    memcpy(it[3].msg.nonce, it[0].msg.nonce, 16);
    make_item(&it[4], annot, as[2].task_id, 5.0); /* out of range */
    make_item(&it[5], annot, last, 1.0);          /* not assigned */
    make_item(&it[6], annot, last + 1000, 1.0);   /* no such task */
    make_item(&it[7], annot, as[3].task_id, 1.0);
    it[7].msg.timestamp_ms -= 400000; /* outside the window */
    CHECK_INT(lp_store_labels_submit(s, it, 8), LP_OK);
    CHECK_INT(it[0].rc, LP_OK);
    CHECK_INT(it[0].existing, 0);
    CHECK_INT(it[1].rc, LP_OK);
    CHECK_INT(it[1].existing, 1);
    CHECK_INT(it[1].receipt.label_id, it[0].receipt.label_id);
    CHECK_INT(it[1].receipt.received_ms, it[0].receipt.received_ms);
    CHECK_INT(it[2].rc, LP_ECONFLICTING_LABEL);
    CHECK_INT(it[3].rc, LP_EREPLAYED_NONCE);
    CHECK_INT(it[4].rc, LP_EEPSILON_OUT_OF_RANGE);
    CHECK_INT(it[5].rc, LP_ENOT_ASSIGNED);
    CHECK_INT(it[6].rc, LP_EUNKNOWN_TASK);
    CHECK_INT(it[7].rc, LP_ESTALE_TIMESTAMP);

    /* budget 4, 1 spent: 2 then 1 fit, the next 1 does not, across jobs */
    make_item(&it[0], annot, as[1].task_id, 2.0);
    CHECK_INT(lp_store_labels_submit(s, it, 1), LP_OK);
    CHECK_INT(it[0].rc, LP_OK);
    make_item(&it[0], annot, as[2].task_id, 1.0);
    make_item(&it[1], annot, as[3].task_id, 1.0);
    CHECK_INT(lp_store_labels_submit(s, it, 2), LP_OK);
    CHECK_INT(it[0].rc, LP_OK);
    CHECK_INT(it[1].rc, LP_EBUDGET_EXCEEDED);

    CHECK_INT(db_counters_mismatch(cpath), 0);

    /* the spend is in the database, as seen by the read pool */
    lp_stats st;
    CHECK_INT(lp_store_stats(s, &st), LP_OK);
    CHECK_INT(st.labels, 3);
    CHECK(st.epsilon_spent == 4.0);
    lp_stats_clear(&st);

    /* a revocation between label jobs is seen by the next one */
    CHECK_INT(lp_store_revoke(s, key), LP_OK);
    make_item(&it[0], annot, as[4].task_id, 0.5);
    CHECK_INT(lp_store_labels_submit(s, it, 1), LP_OK);
    CHECK_INT(it[0].rc, LP_EREVOKED_KEY);

    /* one transaction far larger than one write of the WAL buffer (walbuf.c
     * writes in 64 KiB pieces; the unix VFS cannot take 128 KiB at once) */
    static lp_task_in big[600];
    static char big_ids[600][16];
    static char prompt[2048];
    memset(prompt, 'p', sizeof prompt - 1);
    for (int i = 0; i < 600; i++) {
        snprintf(big_ids[i], sizeof big_ids[i], "big%d", i);
        big[i] =
            (lp_task_in){big_ids[i], prompt, "r0", "r1", 0, NULL, NULL, 0, NULL, 0, LP_GOLD_NONE};
    }
    CHECK_INT(lp_store_tasks_load(s, c.id, big, 600, &loaded, &skipped, &first, &last), LP_OK);
    CHECK_INT(loaded, 600);
    lp_task t;
    CHECK_INT(lp_store_task_get(s, last, &t), LP_OK);
    CHECK(t.prompt != NULL && strcmp(t.prompt, prompt) == 0);
    lp_task_clear(&t);

    lp_store_close(s);

    /* after a reopen: the same spend, and the same answers */
    CHECK_INT(lp_store_open(&o, &s, err, sizeof err), LP_OK);
    CHECK_INT(lp_store_stats(s, &st), LP_OK);
    CHECK(st.epsilon_spent == 4.0);
    CHECK_INT(st.tasks, 608);
    lp_stats_clear(&st);
    CHECK_INT(db_counters_mismatch(cpath), 0);
    lp_store_close(s);
    s = NULL;
    if (uri != NULL)
        return;
    sqlite3 *db;
    CHECK_INT(sqlite3_open(cpath, &db), SQLITE_OK);
    sqlite3_stmt *q;
    sqlite3_prepare_v2(db, "PRAGMA integrity_check", -1, &q, NULL);
    CHECK(sqlite3_step(q) == SQLITE_ROW &&
          strcmp((const char *)sqlite3_column_text(q, 0), "ok") == 0);
    sqlite3_finalize(q);
    sqlite3_close(db);
}

/* The counters of a database as text, one row per line, for comparing two
 * states of it. */
static void counters_dump(const char *dbpath, char *out, size_t outlen)
{
    static const char *const sql[] = {
        "SELECT task, campaign, labels FROM task_fill ORDER BY task",
        "SELECT campaign, tasks, tasks_complete, labels, open_from, annotators, epsilon_spent, "
        "assignments FROM campaign_fill ORDER BY campaign",
        "SELECT annotator, labels, skips, last_label_ms FROM annotator_fill ORDER BY annotator",
        "SELECT campaign, minute, labels FROM label_minutes ORDER BY campaign, minute",
        "SELECT id, epsilon_spent FROM annotators ORDER BY id",
    };
    sqlite3 *db;
    size_t len = 0;
    out[0] = '\0';
    CHECK_INT(sqlite3_open(dbpath, &db), SQLITE_OK);
    for (size_t i = 0; i < sizeof sql / sizeof sql[0]; i++) {
        sqlite3_stmt *q;
        CHECK_INT(sqlite3_prepare_v2(db, sql[i], -1, &q, NULL), SQLITE_OK);
        while (sqlite3_step(q) == SQLITE_ROW && len < outlen)
            for (int c = 0; c < sqlite3_column_count(q) && len < outlen; c++)
                len += (size_t)snprintf(out + len, outlen - len, "%s%c",
                                        (const char *)sqlite3_column_text(q, c),
                                        c + 1 < sqlite3_column_count(q) ? ' ' : '\n');
        sqlite3_finalize(q);
    }
    CHECK(len < outlen);
    sqlite3_close(db);
}

/* Migration 015 on a schema-14 database: the counters the triggers kept are
 * unchanged, the triggers on labels are the two append-only ones, and the
 * label writer keeps the counters exact from then on, across a reopen. */
static void test_migration_015(void)
{
    char err[256], opath[300];
    snprintf(opath, sizeof opath, "%s/v14.db", dir);
    sqlite3 *db = NULL;
    CHECK_INT(sqlite3_open(opath, &db), SQLITE_OK);
    for (int i = 0; i < 14; i++)
        CHECK_INT(sqlite3_exec(db, LP_MIGRATIONS[i], NULL, NULL, NULL), SQLITE_OK);
    char sql[2048];
    long long now = (long long)lp_now_ms();
    snprintf(sql, sizeof sql,
             "PRAGMA user_version = 14;"
             "UPDATE campaigns SET labels_per_task = 2 WHERE id = 1;"
             "INSERT INTO tasks (id, campaign, source_id, prompt, response0, response1, "
             " created_ms) VALUES (1, 1, 's1', 'p', 'x', 'y', 0), (2, 1, 's2', 'p', 'x', 'y', 0);"
             "INSERT INTO annotators (id, public_key, pseudonym, campaign, enrolled_ms) VALUES "
             " (1, zeroblob(32), 'ann-1', 1, 0), (2, randomblob(32), 'ann-2', 1, 0);"
             "INSERT INTO assignments (annotator, task, swapped, created_ms, leased_ms) VALUES "
             " (1, 1, 0, %lld, %lld), (1, 2, 0, %lld, %lld), (2, 1, 0, %lld, %lld),"
             " (2, 2, 0, %lld, %lld);"
             "INSERT INTO labels (annotator, task, z, z_task, epsilon, nonce, timestamp_ms, "
             " signature, received_ms) VALUES "
             " (1, 1, 1, 1, 1.5, randomblob(16), 0, randomblob(64), 60000),"
             " (2, 1, 0, 0, 0.5, randomblob(16), 0, randomblob(64), 180000);"
             "UPDATE annotators SET epsilon_spent = 1.5 WHERE id = 1;"
             "UPDATE annotators SET epsilon_spent = 0.5 WHERE id = 2;",
             now, now, now, now, now, now, now, now);
    CHECK_INT(sqlite3_exec(db, sql, NULL, NULL, NULL), SQLITE_OK);
    sqlite3_close(db);
    CHECK_INT(db_counters_mismatch(opath), 0); /* the triggers of 004/006 kept them */
    static char before[4096], after[4096];
    counters_dump(opath, before, sizeof before);

    lp_store_opts o = {.path = opath, .sync_full = 1, .read_conns = 1};
    CHECK_INT(lp_store_open(&o, &s, err, sizeof err), LP_OK);
    lp_store_close(s);
    counters_dump(opath, after, sizeof after);
    CHECK_STR(after, before); /* the migration changes no counter */
    CHECK_INT(db_scalar(opath, "PRAGMA user_version"), LP_MIGRATION_COUNT);
    CHECK_INT(db_scalar(opath, "SELECT count(*) FROM sqlite_master WHERE type = 'trigger' AND "
                               "name IN ('labels_fill', 'labels_views', 'annotators_spend')"),
              0);

    /* labels through the writer: task 2 gets its two in one commit (task 1
     * had its two before), then a reopen */
    CHECK_INT(lp_store_open(&o, &s, err, sizeof err), LP_OK);
    lp_label_item it[2];
    make_item(&it[0], 1, 2, 1.0);
    make_item(&it[1], 2, 2, 1.0);
    CHECK_INT(lp_store_labels_submit(s, it, 2), LP_OK);
    CHECK_INT(it[0].rc, LP_OK);
    CHECK_INT(it[1].rc, LP_OK);
    CHECK_INT(db_counters_mismatch(opath), 0);
    lp_store_close(s);
    CHECK_INT(lp_store_open(&o, &s, err, sizeof err), LP_OK);
    CHECK_INT(db_scalar(opath, "SELECT tasks_complete FROM campaign_fill WHERE campaign = 1"), 2);
    make_item(&it[0], 1, 1, 1.0); /* annotator 1 already labelled task 1 */
    CHECK_INT(lp_store_labels_submit(s, it, 1), LP_OK);
    CHECK_INT(it[0].rc, LP_ECONFLICTING_LABEL);
    CHECK_INT(db_counters_mismatch(opath), 0);
    CHECK_INT(db_scalar(opath, "SELECT labels FROM campaign_fill WHERE campaign = 1"), 4);
    CHECK(db_scalar(opath, "SELECT epsilon_spent = 4.0 FROM campaign_fill WHERE campaign = 1") ==
          1);
    lp_store_close(s);
    s = NULL;
}

/* ---- the nonce index (labels.c): exact under racing submissions,
 * consistent with the table, rebuilt after a restart ---- */

#define RACERS 8
#define RACE_ROUNDS 6

struct racer {
    pthread_barrier_t *go;
    lp_label_item item;
};

static void *racer_main(void *arg)
{
    struct racer *r = arg;
    pthread_barrier_wait(r->go);
    CHECK_INT(lp_store_labels_submit(s, &r->item, 1), LP_OK);
    return NULL;
}

/* Submits the RACERS items from as many threads at once. */
static void race(struct racer *r)
{
    pthread_barrier_t go;
    pthread_barrier_init(&go, NULL, RACERS);
    pthread_t th[RACERS];
    for (int t = 0; t < RACERS; t++) {
        r[t].go = &go;
        pthread_create(&th[t], NULL, racer_main, &r[t]);
    }
    for (int t = 0; t < RACERS; t++)
        pthread_join(th[t], NULL);
    pthread_barrier_destroy(&go);
}

/* How many of the RACERS items ended with rc. */
static int count_rc(const struct racer *r, int rc)
{
    int n = 0;
    for (int t = 0; t < RACERS; t++)
        n += r[t].item.rc == rc;
    return n;
}

static void check_index(size_t rows)
{
    lp_label_index_check ic;
    CHECK_INT(lp_store_labels_check_index(s, &ic), LP_OK);
    CHECK_INT(ic.rows, rows);
    CHECK_INT(ic.missing, 0);
    CHECK(ic.slots >= ic.rows && ic.slots * 4 <= ic.capacity * 3);
}

static void test_nonce_index(void)
{
    char err[256], npath[300];
    snprintf(npath, sizeof npath, "%s/nonces.db", dir);
    lp_store_opts o = {.path = npath, .sync_full = 1, .read_conns = 2};
    CHECK_INT(lp_store_open(&o, &s, err, sizeof err), LP_OK);
    check_index(0);
    lp_campaign c = {.epsilon_min = 0.1,
                     .epsilon_max = 2,
                     .epsilon_budget = 1000,
                     .epsilon_default = 1,
                     .labels_per_task = 2};
    snprintf(c.name, sizeof c.name, "nonces");
    CHECK_INT(lp_store_campaign_create(s, &c), LP_OK);
    enum { NTASKS = RACERS * RACE_ROUNDS + 2 * RACE_ROUNDS + 2 };
    static lp_task_in tasks[NTASKS];
    static char ids[NTASKS][16];
    for (int i = 0; i < NTASKS; i++) {
        snprintf(ids[i], sizeof ids[i], "n%d", i);
        tasks[i] =
            (lp_task_in){ids[i], "prompt", "r0", "r1", 0, NULL, NULL, 0, NULL, 0, LP_GOLD_NONE};
    }
    size_t loaded, skipped, n;
    int64_t first, last;
    CHECK_INT(lp_store_tasks_load(s, c.id, tasks, NTASKS, &loaded, &skipped, &first, &last), LP_OK);
    uint8_t key1[32], key2[32];
    int64_t a1 = enroll_new(c.id, key1), a2 = enroll_new(c.id, key2);
    static lp_assignment as1[NTASKS], as2[NTASKS];
    CHECK_INT(lp_store_assign(s, a1, NTASKS, as1, &n), LP_OK);
    CHECK_INT(n, NTASKS);
    CHECK_INT(lp_store_assign(s, a2, NTASKS, as2, &n), LP_OK);
    CHECK_INT(n, NTASKS);
    size_t stored = 0, next = 0;
    struct racer r[RACERS];
    for (int round = 0; round < RACE_ROUNDS; round++) {
        /* one nonce on RACERS different tasks: exactly one wins */
        for (int t = 0; t < RACERS; t++) {
            make_item(&r[t].item, a1, as1[next++].task_id, 1.0);
            memcpy(r[t].item.msg.nonce, r[0].item.msg.nonce, 16);
        }
        race(r);
        CHECK_INT(count_rc(r, LP_OK), 1);
        CHECK_INT(count_rc(r, LP_EREPLAYED_NONCE), RACERS - 1);
        stored += 1;
        /* RACERS different labels for one task: exactly one wins */
        int64_t task = as1[next++].task_id;
        for (int t = 0; t < RACERS; t++)
            make_item(&r[t].item, a1, task, 1.0);
        race(r);
        CHECK_INT(count_rc(r, LP_OK), 1);
        CHECK_INT(count_rc(r, LP_ECONFLICTING_LABEL), RACERS - 1);
        stored += 1;
        /* the same label RACERS times: stored once, one receipt for all */
        make_item(&r[0].item, a1, as1[next++].task_id, 1.0);
        for (int t = 1; t < RACERS; t++)
            r[t].item = r[0].item;
        race(r);
        int fresh = 0;
        for (int t = 0; t < RACERS; t++) {
            CHECK_INT(r[t].item.rc, LP_OK);
            fresh += !r[t].item.existing;
            CHECK_INT(r[t].item.receipt.label_id, r[0].item.receipt.label_id);
        }
        CHECK_INT(fresh, 1);
        stored += 1;
    }
    check_index(stored);

    /* a nonce is the annotator's own: another annotator may carry it */
    lp_label_item it[2];
    make_item(&it[0], a1, as1[next].task_id, 1.0);
    make_item(&it[1], a2, as2[next].task_id, 1.0);
    memcpy(it[1].msg.nonce, it[0].msg.nonce, 16);
    CHECK_INT(lp_store_labels_submit(s, it, 2), LP_OK);
    CHECK_INT(it[0].rc, LP_OK);
    CHECK_INT(it[1].rc, LP_OK);
    stored += 2;
    lp_label_item before = it[0];
    check_index(stored);
    lp_store_close(s);

    /* rebuilt from the table after a restart: the same answers */
    CHECK_INT(lp_store_open(&o, &s, err, sizeof err), LP_OK);
    check_index(stored);
    make_item(&it[0], a1, as1[next + 1].task_id, 1.0);
    memcpy(it[0].msg.nonce, before.msg.nonce, 16); /* reused nonce, fresh task */
    it[1] = before;                                /* a resend of a stored label */
    CHECK_INT(lp_store_labels_submit(s, it, 2), LP_OK);
    CHECK_INT(it[0].rc, LP_EREPLAYED_NONCE);
    CHECK_INT(it[1].rc, LP_OK);
    CHECK_INT(it[1].existing, 1);
    CHECK_INT(it[1].receipt.label_id, before.receipt.label_id);
    CHECK_INT(it[1].receipt.received_ms, before.receipt.received_ms);
    make_item(&it[0], a1, as1[next + 1].task_id, 1.0); /* a fresh nonce passes */
    CHECK_INT(lp_store_labels_submit(s, it, 1), LP_OK);
    CHECK_INT(it[0].rc, LP_OK);
    check_index(stored + 1);
    lp_store_close(s);
    s = NULL;
}

/* A database of schema 12 with labels: migrated (labels rebuilt without
 * the (annotator, nonce) index, rows and triggers kept), and its nonces in
 * the index. */
static void test_migration_013(void)
{
    char err[256], opath[300];
    snprintf(opath, sizeof opath, "%s/v12.db", dir);
    sqlite3 *db = NULL;
    CHECK_INT(sqlite3_open(opath, &db), SQLITE_OK);
    for (int i = 0; i < 12; i++)
        CHECK_INT(sqlite3_exec(db, LP_MIGRATIONS[i], NULL, NULL, NULL), SQLITE_OK);
    char sql[2048];
    long long now = (long long)lp_now_ms();
    snprintf(sql, sizeof sql,
             "PRAGMA user_version = 12;"
             "INSERT INTO tasks (id, campaign, source_id, prompt, response0, response1, "
             " created_ms) VALUES (1, 1, 's1', 'p', 'x', 'y', 0), (2, 1, 's2', 'p', 'x', 'y', 0);"
             "INSERT INTO annotators (id, public_key, pseudonym, campaign, enrolled_ms) VALUES "
             " (1, zeroblob(32), 'ann-1', 1, 0);"
             "INSERT INTO assignments (annotator, task, swapped, created_ms, leased_ms) VALUES "
             " (1, 1, 0, %lld, %lld), (1, 2, 0, %lld, %lld);"
             "INSERT INTO labels (annotator, task, z, z_task, epsilon, nonce, timestamp_ms, "
             " signature, received_ms) VALUES "
             " (1, 1, 1, 1, 1.0, zeroblob(16), 0, randomblob(64), 0);",
             now, now, now, now);
    CHECK_INT(sqlite3_exec(db, sql, NULL, NULL, NULL), SQLITE_OK);
    sqlite3_close(db);

    lp_store_opts o = {.path = opath, .sync_full = 1, .read_conns = 1};
    CHECK_INT(lp_store_open(&o, &s, err, sizeof err), LP_OK);
    check_index(1);
    lp_label_item it;
    make_item(&it, 1, 2, 1.0);
    memset(it.msg.nonce, 0, 16); /* the migrated label's nonce */
    CHECK_INT(lp_store_labels_submit(s, &it, 1), LP_OK);
    CHECK_INT(it.rc, LP_EREPLAYED_NONCE);
    make_item(&it, 1, 2, 1.0);
    CHECK_INT(lp_store_labels_submit(s, &it, 1), LP_OK);
    CHECK_INT(it.rc, LP_OK);
    check_index(2);
    lp_store_close(s);
    s = NULL;

    CHECK_INT(sqlite3_open(opath, &db), SQLITE_OK);
    static const char *const checks[][2] = {
        {"SELECT count(*) FROM labels", "2"},
        {"SELECT count(*) FROM pragma_index_list('labels')", "1"}, /* (annotator, task) */
        /* append-only; the counters' triggers are gone since 015 */
        {"SELECT count(*) FROM sqlite_master WHERE type = 'trigger' AND tbl_name = 'labels'", "2"},
        {"SELECT labels FROM task_fill WHERE task = 2", "1"}, /* the label writer */
        {"SELECT labels FROM annotator_fill WHERE annotator = 1", "2"},
        {"PRAGMA integrity_check", "ok"},
    };
    for (size_t i = 0; i < sizeof checks / sizeof checks[0]; i++) {
        sqlite3_stmt *q;
        CHECK_INT(sqlite3_prepare_v2(db, checks[i][0], -1, &q, NULL), SQLITE_OK);
        CHECK(sqlite3_step(q) == SQLITE_ROW);
        CHECK_STR((const char *)sqlite3_column_text(q, 0), checks[i][1]);
        sqlite3_finalize(q);
    }
    CHECK(sqlite3_exec(db, "DELETE FROM labels", NULL, NULL, NULL) != SQLITE_OK);
    sqlite3_close(db);
}

/* Growth of the nonce index: the table that grows keeps answering while its
 * slots move a few per insert (no insert rehashes the whole table), reused
 * nonces of labels still in the old table are refused, and the index is
 * consistent with the table all along and after a reopen. */
#define GROW_TASKS 1100
#define GROW_FIRST 780 /* past 3/4 of the first table (1024 slots) */
#define GROW_REPLAYS 20

/* Opens the store s on dir/name.db with one campaign of n tasks (budget
 * large enough for all) and one annotator assigned every task: it gets
 * label items it[0..n) for them, of epsilon eps. Returns the annotator. */
static int64_t one_annotator_store(const char *name, int n, lp_label_item *it, double eps,
                                   char *dbpath, size_t dbpath_len)
{
    char err[256];
    snprintf(dbpath, dbpath_len, "%s/%s.db", dir, name);
    lp_store_opts o = {.path = dbpath, .sync_full = 0, .read_conns = 1};
    CHECK_INT(lp_store_open(&o, &s, err, sizeof err), LP_OK);
    lp_campaign c = {
        .epsilon_min = 0.1, .epsilon_max = 2, .epsilon_budget = 1e6, .epsilon_default = 1};
    snprintf(c.name, sizeof c.name, "%s", name);
    CHECK_INT(lp_store_campaign_create(s, &c), LP_OK);
    lp_task_in *tasks = calloc((size_t)n, sizeof *tasks);
    char(*ids)[16] = calloc((size_t)n, sizeof *ids);
    lp_assignment *as = calloc((size_t)n, sizeof *as);
    for (int i = 0; i < n; i++) {
        snprintf(ids[i], sizeof ids[i], "%c%d", name[0], i);
        tasks[i] =
            (lp_task_in){ids[i], "prompt", "r0", "r1", 0, NULL, NULL, 0, NULL, 0, LP_GOLD_NONE};
    }
    size_t loaded, skipped, got;
    int64_t first, last;
    CHECK_INT(lp_store_tasks_load(s, c.id, tasks, (size_t)n, &loaded, &skipped, &first, &last),
              LP_OK);
    uint8_t key[32];
    int64_t annot = enroll_new(c.id, key);
    CHECK_INT(lp_store_assign(s, annot, (uint32_t)n, as, &got), LP_OK);
    CHECK_INT(got, n);
    for (int i = 0; i < n; i++)
        make_item(&it[i], annot, as[i].task_id, eps);
    free(tasks);
    free(ids);
    free(as);
    return annot;
}

static void submit_labels(lp_label_item *it, size_t n)
{
    for (size_t i = 0; i < n; i += 10) {
        size_t k = n - i < 10 ? n - i : 10;
        CHECK_INT(lp_store_labels_submit(s, it + i, k), LP_OK);
        for (size_t j = 0; j < k; j++)
            CHECK_INT(it[i + j].rc, LP_OK);
    }
}

static void test_nonce_growth(void)
{
    char err[256], gpath[300];
    static lp_label_item it[GROW_TASKS];
    int64_t annot = one_annotator_store("growth", GROW_TASKS, it, 0.5, gpath, sizeof gpath);
    lp_store_opts o = {.path = gpath, .sync_full = 0, .read_conns = 1};

    submit_labels(it, GROW_FIRST);
    lp_label_index_check ic;
    CHECK_INT(lp_store_labels_check_index(s, &ic), LP_OK);
    CHECK_INT(ic.capacity, 2048);
    CHECK(ic.moving > 0 && ic.moving < 1024); /* moving, a few slots per insert */
    CHECK_INT(ic.missing, 0);
    /* the first labels' nonces on tasks not labelled yet: all refused,
     * wherever their slots are */
    lp_label_item replay[GROW_REPLAYS];
    for (int i = 0; i < GROW_REPLAYS; i++) {
        make_item(&replay[i], annot, it[GROW_FIRST + i].msg.task_id, 0.5);
        memcpy(replay[i].msg.nonce, it[i].msg.nonce, 16);
    }
    CHECK_INT(lp_store_labels_submit(s, replay, GROW_REPLAYS), LP_OK);
    for (int i = 0; i < GROW_REPLAYS; i++)
        CHECK_INT(replay[i].rc, LP_EREPLAYED_NONCE);

    submit_labels(it + GROW_FIRST, GROW_TASKS - GROW_FIRST);
    check_index(GROW_TASKS);
    CHECK_INT(lp_store_labels_check_index(s, &ic), LP_OK);
    CHECK_INT(ic.moving, 0); /* the old table is gone */
    lp_store_close(s);
    CHECK_INT(lp_store_open(&o, &s, err, sizeof err), LP_OK);
    check_index(GROW_TASKS); /* rebuilt in one table */
    CHECK_INT(lp_store_labels_check_index(s, &ic), LP_OK);
    CHECK_INT(ic.moving, 0);
    CHECK_INT(db_counters_mismatch(gpath), 0);
    lp_store_close(s);
    s = NULL;
}

/* One job with more tasks than the writer's task counters hold (4096): the
 * counters are written out mid-job and again at the commit, and stay exact;
 * labels_per_task 1, so every task completes and the campaign with them. */
#define BIG_JOB 4200

static void test_counters_big_job(void)
{
    char bpath[300];
    static lp_label_item it[BIG_JOB];
    one_annotator_store("bigjob", BIG_JOB, it, 0.25, bpath, sizeof bpath);
    CHECK_INT(lp_store_labels_submit(s, it, BIG_JOB), LP_OK);
    int ok = 0;
    for (int i = 0; i < BIG_JOB; i++)
        ok += it[i].rc == LP_OK;
    CHECK_INT(ok, BIG_JOB);
    CHECK_INT(db_counters_mismatch(bpath), 0);
    CHECK_INT(db_scalar(bpath, "SELECT tasks_complete FROM campaign_fill f JOIN campaigns c "
                               "ON c.id = f.campaign WHERE c.name = 'bigjob'"),
              BIG_JOB);
    lp_store_close(s);
    s = NULL;
}

/* Two stores on one database file: a nonce stored through one is refused
 * through the other (each writer's nonce index catches up with the labels
 * the other committed), and both indexes match the table. */
static void test_two_writers_nonce(void)
{
    char err[256], tpath[300];
    static lp_label_item it[6];
    one_annotator_store("twononce", 6, it, 0.5, tpath, sizeof tpath);
    lp_store *a = s, *b = NULL;
    lp_store_opts o = {.path = tpath, .sync_full = 0, .read_conns = 1};
    CHECK_INT(lp_store_open(&o, &b, err, sizeof err), LP_OK);
    CHECK_INT(lp_store_labels_submit(a, &it[0], 1), LP_OK);
    CHECK_INT(it[0].rc, LP_OK);
    memcpy(it[1].msg.nonce, it[0].msg.nonce, sizeof it[1].msg.nonce);
    CHECK_INT(lp_store_labels_submit(b, &it[1], 1), LP_OK);
    CHECK_INT(it[1].rc, LP_EREPLAYED_NONCE);
    CHECK_INT(lp_store_labels_submit(b, &it[2], 1), LP_OK);
    CHECK_INT(it[2].rc, LP_OK);
    CHECK_INT(lp_store_labels_submit(b, &it[3], 1), LP_OK); /* b commits twice in a row */
    CHECK_INT(it[3].rc, LP_OK);
    memcpy(it[4].msg.nonce, it[2].msg.nonce, sizeof it[4].msg.nonce);
    memcpy(it[5].msg.nonce, it[3].msg.nonce, sizeof it[5].msg.nonce);
    CHECK_INT(lp_store_labels_submit(a, &it[4], 2), LP_OK);
    CHECK_INT(it[4].rc, LP_EREPLAYED_NONCE);
    CHECK_INT(it[5].rc, LP_EREPLAYED_NONCE);
    lp_store *both[2] = {a, b};
    for (int i = 0; i < 2; i++) {
        lp_label_index_check ic;
        CHECK_INT(lp_store_labels_check_index(both[i], &ic), LP_OK);
        CHECK_INT(ic.rows, 3);
        CHECK_INT(ic.missing, 0);
        CHECK_INT(ic.slots, 3); /* each label once, whichever writer stored it */
    }
    lp_store_close(b);
    lp_store_close(a);
    s = NULL;
}

/* Two stores on one database file (as two servers on one database): each
 * writer's cached ε spent is read again once the other has committed, so
 * the budget holds across them and the counters stay exact. */
static void test_two_writers_budget(void)
{
    char err[256], tpath[300];
    static lp_label_item it[4];
    int64_t annot = one_annotator_store("twowriters", 4, it, 1.0, tpath, sizeof tpath);
    lp_store *a = s, *b = NULL;
    lp_store_opts o = {.path = tpath, .sync_full = 0, .read_conns = 1};
    CHECK_INT(lp_store_open(&o, &b, err, sizeof err), LP_OK);
    /* a budget of 3: 1 through a, 1 through b, then 1.5 through a exceeds it */
    sqlite3 *db;
    CHECK_INT(sqlite3_open(tpath, &db), SQLITE_OK);
    CHECK_INT(sqlite3_exec(db,
                           "PRAGMA busy_timeout = 10000; UPDATE campaigns SET epsilon_budget = 3 "
                           "WHERE name = 'twowriters'",
                           NULL, NULL, NULL),
              SQLITE_OK);
    sqlite3_close(db);
    it[2].msg.epsilon = 1.5;
    CHECK_INT(lp_store_labels_submit(a, &it[0], 1), LP_OK);
    CHECK_INT(it[0].rc, LP_OK);
    CHECK_INT(lp_store_labels_submit(b, &it[1], 1), LP_OK);
    CHECK_INT(it[1].rc, LP_OK);
    CHECK_INT(lp_store_labels_submit(a, &it[2], 1), LP_OK);
    CHECK_INT(it[2].rc, LP_EBUDGET_EXCEEDED);
    it[3].msg.epsilon = 0.5;
    CHECK_INT(lp_store_labels_submit(a, &it[3], 1), LP_OK);
    CHECK_INT(it[3].rc, LP_OK);
    char sql[128];
    snprintf(sql, sizeof sql, "SELECT epsilon_spent * 10 FROM annotators WHERE id = %lld",
             (long long)annot);
    CHECK_INT(db_scalar(tpath, sql), 25);
    CHECK_INT(db_counters_mismatch(tpath), 0);
    lp_store_close(b);
    lp_store_close(a);
    s = NULL;
}

int main(void)
{
    char err[256];
    if (sodium_init() < 0 || mkdtemp(dir) == NULL)
        return 1;
    snprintf(path, sizeof path, "%s/s.db", dir);
    test_schema_files();
    test_nonce_index();
    test_nonce_growth();
    test_counters_big_job();
    test_two_writers_budget();
    test_two_writers_nonce();
    test_migration_013();
    test_migration_015();
    lp_store_opts o = {.path = path, .sync_full = 1, .read_conns = 3};
    CHECK_INT(lp_store_open(&o, &s, err, sizeof err), LP_OK);
    lp_store_close(s);
    CHECK_INT(lp_store_open(&o, &s, err, sizeof err), LP_OK); /* reopen: no re-migration */
    lp_campaign c;
    CHECK_INT(lp_store_campaign_by_name(s, "default", &c), LP_OK);
    CHECK_INT(c.allow_infinite, 0);
    CHECK_INT(lp_store_campaign_by_name(s, "nope", &c), LP_EUNKNOWN_CAMPAIGN);

    /* tasks */
    static lp_task_in tasks[PER_THREAD];
    static char ids[PER_THREAD][16];
    for (int i = 0; i < PER_THREAD; i++) {
        snprintf(ids[i], sizeof ids[i], "t%d", i);
        tasks[i] =
            (lp_task_in){ids[i], "prompt", "r0", "r1", 0, NULL, NULL, 0, NULL, 0, LP_GOLD_NONE};
    }
    /* every annotator labels every task: a campaign that asks THREADS labels of each */
    lp_campaign crowd = {.epsilon_min = 0.01,
                         .epsilon_max = 10,
                         .epsilon_budget = 1000,
                         .epsilon_default = 1,
                         .labels_per_task = THREADS};
    snprintf(crowd.name, sizeof crowd.name, "crowd");
    CHECK_INT(lp_store_campaign_create(s, &crowd), LP_OK);
    size_t loaded, skipped;
    int64_t first, last;
    CHECK_INT(lp_store_tasks_load(s, crowd.id, tasks, PER_THREAD, &loaded, &skipped, &first, &last),
              LP_OK);
    CHECK_INT(loaded, PER_THREAD);
    CHECK_INT(last - first + 1, PER_THREAD);
    CHECK_INT(lp_store_tasks_load(s, 99, tasks, 1, &loaded, &skipped, &first, &last),
              LP_EUNKNOWN_CAMPAIGN);

    /* group commit: THREADS annotators submitting concurrently */
    struct worker w[THREADS];
    pthread_t th[THREADS];
    lp_store_writer_stats before, after;
    for (int t = 0; t < THREADS; t++) {
        uint8_t key[32];
        memset(&w[t], 0, sizeof w[t]);
        w[t].annot = enroll_new(crowd.id, key);
        size_t n;
        CHECK_INT(lp_store_assign(s, w[t].annot, PER_THREAD, w[t].as, &n), LP_OK);
        CHECK_INT(n, PER_THREAD);
        lp_annotator a;
        CHECK_INT(lp_store_annotator_by_key(s, key, &a), LP_OK);
        CHECK_INT(a.id, w[t].annot);
    }
    lp_store_writer_stats_get(s, &before);
    for (int t = 0; t < THREADS; t++)
        pthread_create(&th[t], NULL, worker_main, &w[t]);
    for (int t = 0; t < THREADS; t++)
        pthread_join(th[t], NULL);
    lp_store_writer_stats_get(s, &after);
    int total = 0;
    for (int t = 0; t < THREADS; t++)
        total += w[t].ok;
    CHECK_INT(total, THREADS * PER_THREAD);
    CHECK(after.commits - before.commits < (uint64_t)(THREADS * PER_THREAD)); /* grouped */
    fprintf(stderr, "group commit: %d labels in %llu commits\n", total,
            (unsigned long long)(after.commits - before.commits));
    CHECK_INT(db_counters_mismatch(path), 0); /* every commit of the race kept them exact */

    /* budget: 10 concurrent labels of 1.0 against a budget of 3.0 in one batch
     * and across batches: exactly 3 pass */
    lp_campaign small = {
        .epsilon_min = 0.1, .epsilon_max = 5, .epsilon_budget = 3, .epsilon_default = 1};
    snprintf(small.name, sizeof small.name, "small");
    CHECK_INT(lp_store_campaign_create(s, &small), LP_OK);
    CHECK_INT(lp_store_campaign_create(s, &small), LP_ECAMPAIGN_EXISTS);
    CHECK_INT(lp_store_tasks_load(s, small.id, tasks, 10, &loaded, &skipped, &first, &last), LP_OK);
    uint8_t key[32];
    int64_t annot = enroll_new(small.id, key);
    lp_assignment as[10];
    size_t n;
    CHECK_INT(lp_store_assign(s, annot, 10, as, &n), LP_OK);
    CHECK_INT(n, 10);
    lp_assignment as2[10];
    CHECK_INT(lp_store_assign(s, annot, 10, as2, &n), LP_OK); /* same, pending */
    CHECK_INT(as2[9].task_id, as[9].task_id);
    CHECK_INT(as2[9].swapped, as[9].swapped);
    lp_label_item items[10];
    for (int i = 0; i < 10; i++)
        make_item(&items[i], annot, as[i].task_id, 1.0);
    CHECK_INT(lp_store_labels_submit(s, items, 10), LP_OK);
    int passed = 0, over = 0;
    for (int i = 0; i < 10; i++) {
        passed += items[i].rc == LP_OK;
        over += items[i].rc == LP_EBUDGET_EXCEEDED;
    }
    CHECK_INT(passed, 3);
    CHECK_INT(over, 7);
    CHECK_INT(items[0].receipt.label_id + 1, items[1].receipt.label_id); /* ids increase */
    CHECK_INT(lp_store_revoke(s, key), LP_OK);
    CHECK_INT(lp_store_revoke(s, (uint8_t[32]){0}), LP_EUNKNOWN_KEY);
    lp_annotator a;
    CHECK_INT(lp_store_annotator_by_key(s, key, &a), LP_OK);
    CHECK_INT(a.revoked, 1);
    make_item(&items[0], annot, as[5].task_id, 1.0);
    CHECK_INT(lp_store_labels_submit(s, items, 1), LP_OK);
    CHECK_INT(items[0].rc, LP_EREVOKED_KEY);
    CHECK_INT(lp_store_assign(s, annot, 1, as, &n), LP_EREVOKED_KEY);

    lp_stats st;
    CHECK_INT(lp_store_stats(s, &st), LP_OK);
    CHECK_INT(st.labels, THREADS * PER_THREAD + 3);
    CHECK_INT(st.n_campaigns, 3); /* default, crowd, small */
    CHECK_STR(st.campaigns[1].name, "crowd");
    CHECK_INT(st.campaigns[1].labels_per_task, THREADS);
    CHECK_INT(st.campaigns[1].tasks_complete, PER_THREAD);
    CHECK_INT(st.campaigns[1].labels_needed, THREADS * PER_THREAD);
    CHECK_INT(st.campaigns[1].annotator_quota, 0);
    lp_stats_clear(&st);
    lp_store_close(s);

    /* append-only and integrity, through a separate connection */
    sqlite3 *db;
    CHECK_INT(sqlite3_open(path, &db), SQLITE_OK);
    CHECK(sqlite3_exec(db, "UPDATE labels SET z = 1 - z", NULL, NULL, NULL) != SQLITE_OK);
    CHECK(sqlite3_exec(db, "DELETE FROM labels", NULL, NULL, NULL) != SQLITE_OK);
    sqlite3_stmt *q;
    sqlite3_prepare_v2(db, "PRAGMA integrity_check", -1, &q, NULL);
    CHECK(sqlite3_step(q) == SQLITE_ROW &&
          strcmp((const char *)sqlite3_column_text(q, 0), "ok") == 0);
    sqlite3_finalize(q);
    sqlite3_prepare_v2(db, "PRAGMA user_version", -1, &q, NULL);
    CHECK(sqlite3_step(q) == SQLITE_ROW && sqlite3_column_int(q, 0) == LP_MIGRATION_COUNT);
    sqlite3_finalize(q);
    sqlite3_prepare_v2(db, "SELECT count(*) FROM labels", -1, &q, NULL);
    CHECK(sqlite3_step(q) == SQLITE_ROW && sqlite3_column_int(q, 0) == THREADS * PER_THREAD + 3);
    sqlite3_finalize(q);
    sqlite3_close(db);

    test_label_checks(NULL);
    pg_cluster pgc;
    if (pg_cluster_start_for(&pgc, "test_store (PostgreSQL)")) {
        char uri[512];
        CHECK_INT(pg_cluster_create_db(&pgc, "label_checks", uri, sizeof uri), 0);
        test_label_checks(uri);
        pg_cluster_stop(&pgc);
    }

    char cmd[512];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    if (system(cmd) != 0)
        fprintf(stderr, "could not remove %s\n", dir);
    return check_summary();
}
