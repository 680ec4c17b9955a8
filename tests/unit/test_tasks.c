/*
 * test_tasks.c — distribution in the tasks repository on real SQLite files:
 * the migration to schema 004 keeps existing rows (campaigns get one label
 * per task and no quota, assignments become leases, label counts are
 * filled from the labels already there); leases that expire; skips that
 * refuse a later label; the open-task cursor moving past complete tasks;
 * progress figures kept by the label triggers.
 */
#include "annotators.h"
#include "campaigns.h"
#include "check.h"
#include "clock.h"
#include "error.h"
#include "labels.h"
#include "schema_sql.h"
#include "store.h"
#include "tasks.h"
#include "tmpdir.h"

#include <sodium.h>
#include <sqlite3.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

static char dir[256];

static void make_item(lp_label_item *it, int64_t annot, int64_t task)
{
    memset(it, 0, sizeof *it);
    it->annotator = annot;
    it->msg.task_id = task;
    it->msg.z = 1;
    it->msg.epsilon = 1.0;
    randombytes_buf(it->msg.nonce, 16);
    randombytes_buf(it->msg.sig, 64);
    it->msg.timestamp_ms = lp_now_ms();
    it->window_ms = 300000;
}

/* Stores one label; returns its rc. */
static int label(lp_store *s, int64_t annot, int64_t task)
{
    lp_label_item it;
    make_item(&it, annot, task);
    int rc = lp_store_labels_submit(s, &it, 1);
    return rc != LP_OK ? rc : it.rc;
}

static int64_t enroll_new(lp_store *s, int64_t campaign)
{
    uint8_t h[LP_HASH_BYTES], key[LP_KEY_BYTES];
    randombytes_buf(h, sizeof h);
    randombytes_buf(key, sizeof key);
    CHECK_INT(lp_store_enroll_tokens_add(s, campaign, h, 1), LP_OK);
    lp_annotator a = {0};
    CHECK_INT(lp_store_enroll(s, key, h, &a), LP_OK);
    return a.id;
}

static long long scalar(const char *db_path, const char *sql)
{
    sqlite3 *db = NULL;
    sqlite3_stmt *st = NULL;
    long long v = -1;
    if (sqlite3_open_v2(db_path, &db, SQLITE_OPEN_READONLY, NULL) == SQLITE_OK &&
        sqlite3_prepare_v2(db, sql, -1, &st, NULL) == SQLITE_OK && sqlite3_step(st) == SQLITE_ROW)
        v = sqlite3_column_int64(st, 0);
    sqlite3_finalize(st);
    sqlite3_close(db);
    return v;
}

static void check_progress(lp_store *s, int64_t annot, int64_t total, int64_t complete,
                           int64_t labels, int64_t needed, int64_t own)
{
    lp_progress p;
    CHECK_INT(lp_store_progress(s, annot, &p), LP_OK);
    CHECK_INT(p.tasks_total, total);
    CHECK_INT(p.tasks_complete, complete);
    CHECK_INT(p.labels, labels);
    CHECK_INT(p.labels_needed, needed);
    CHECK_INT(p.annotator_labels, own);
}

/* The index of the migration that brings schema 004. */
static int migration_004(void)
{
    for (int i = 0; i < LP_MIGRATION_COUNT; i++)
        if (strstr(LP_MIGRATIONS[i], "004_campaign_progress.sql") != NULL)
            return i;
    return -1;
}

/* A database written by the server before schema 004, then opened by this
 * one. */
static void test_migration_keeps_rows(void)
{
    char db_path[300];
    snprintf(db_path, sizeof db_path, "%s/old.db", dir);
    int m = migration_004();
    CHECK(m >= 2);
    sqlite3 *db = NULL;
    CHECK_INT(sqlite3_open(db_path, &db), SQLITE_OK);
    for (int i = 0; i < m; i++)
        CHECK_INT(sqlite3_exec(db, LP_MIGRATIONS[i], NULL, NULL, NULL), SQLITE_OK);
    char sql[2048];
    long long now = (long long)lp_now_ms();
    snprintf(
        sql, sizeof sql,
        "PRAGMA user_version = %d;"
        "INSERT INTO campaigns (id, name, epsilon_min, epsilon_max, epsilon_budget, "
        " epsilon_default, created_ms) VALUES (2, 'old', 0.1, 5, 100, 1, 0);"
        "INSERT INTO tasks (id, campaign, source_id, prompt, response0, response1, created_ms) "
        " VALUES (1, 1, 's1', 'p', 'x', 'y', 0), (2, 1, 's2', 'p', 'x', 'y', 0),"
        " (3, 1, 's3', 'p', 'x', 'y', 0), (4, 2, 's4', 'p', 'x', 'y', 0),"
        " (5, 2, 's5', 'p', 'x', 'y', 0);"
        "INSERT INTO annotators (id, public_key, pseudonym, campaign, enrolled_ms) VALUES "
        " (1, zeroblob(32), 'ann-1', 1, 0), (2, randomblob(32), 'ann-2', 1, 0);"
        "INSERT INTO assignments (annotator, task, swapped, created_ms) VALUES "
        " (1, 1, 0, %lld), (1, 2, 1, %lld), (2, 1, 1, 0), (2, 3, 0, 0);"
        "INSERT INTO labels (annotator, task, z, z_task, epsilon, nonce, timestamp_ms, "
        " signature, received_ms) VALUES "
        " (1, 1, 1, 1, 1.0, randomblob(16), 0, randomblob(64), 0),"
        " (2, 1, 0, 1, 1.0, randomblob(16), 0, randomblob(64), 0);",
        m, now, now);
    CHECK_INT(sqlite3_exec(db, sql, NULL, NULL, NULL), SQLITE_OK);
    sqlite3_close(db);

    lp_store_opts o = {.path = db_path, .sync_full = 0, .read_conns = 1};
    lp_store *s = NULL;
    char err[256];
    CHECK_INT(lp_store_open(&o, &s, err, sizeof err), LP_OK);
    if (s == NULL)
        return;
    CHECK_INT(scalar(db_path, "PRAGMA user_version"), LP_MIGRATION_COUNT);
    /* every row is still there */
    CHECK_INT(scalar(db_path, "SELECT count(*) FROM tasks"), 5);
    CHECK_INT(scalar(db_path, "SELECT count(*) FROM labels"), 2);
    CHECK_INT(scalar(db_path, "SELECT count(*) FROM assignments"), 4);
    /* campaigns: one label per task, no quota */
    lp_campaign c;
    CHECK_INT(lp_store_campaign_by_name(s, "old", &c), LP_OK);
    CHECK_INT(c.labels_per_task, 1);
    CHECK_INT(c.annotator_quota, 0);
    CHECK(c.epsilon_budget == 100);
    /* counts filled from the existing labels */
    CHECK_INT(scalar(db_path, "SELECT labels FROM task_fill WHERE task = 1"), 2);
    CHECK_INT(scalar(db_path, "SELECT sum(labels) FROM task_fill"), 2);
    CHECK_INT(scalar(db_path, "SELECT tasks FROM campaign_fill WHERE campaign = 2"), 2);
    check_progress(s, 1, 3, 1, 2, 3, 1);
    check_progress(s, 2, 3, 1, 2, 3, 1);
    /* assignments are leases taken when they were created: ann 1's recent
     * one is pending (with its order), ann 2's ancient one on task 3 has
     * expired and task 3 is open again; task 1 is complete */
    lp_assignment as[4];
    size_t n = 0;
    CHECK_INT(lp_store_assign(s, 1, 4, as, &n), LP_OK);
    CHECK_INT(n, 2);
    CHECK_INT(as[0].task_id, 2);
    CHECK_INT(as[0].swapped, 1);
    CHECK_INT(as[1].task_id, 3);
    /* the triggers count new labels */
    CHECK_INT(label(s, 1, 2), LP_OK);
    check_progress(s, 2, 3, 2, 3, 3, 1);
    CHECK_INT(label(s, 1, 3), LP_OK);
    check_progress(s, 1, 3, 3, 4, 3, 3);
    CHECK_INT(lp_store_assign(s, 2, 1, as, &n), LP_ECAMPAIGN_COMPLETE);
    /* ann 2's expired lease on task 3 still takes a late label */
    CHECK_INT(label(s, 2, 3), LP_OK);
    CHECK_INT(scalar(db_path, "SELECT labels FROM task_fill WHERE task = 3"), 2);
    check_progress(s, 2, 3, 3, 5, 3, 2);
    lp_store_close(s);
}

/* Leases of 200 ms on a fresh database: expiry, renewal of one's own lease
 * with its order, skips, quotas and the open-task cursor. */
static void test_leases_and_skips(void)
{
    char db_path[300];
    snprintf(db_path, sizeof db_path, "%s/lease.db", dir);
    lp_store_opts o = {.path = db_path, .sync_full = 0, .read_conns = 1, .lease_ms = 200};
    lp_store *s = NULL;
    char err[256];
    CHECK_INT(lp_store_open(&o, &s, err, sizeof err), LP_OK);
    if (s == NULL)
        return;
    lp_campaign c = {.epsilon_min = 0.5,
                     .epsilon_max = 2,
                     .epsilon_budget = 100,
                     .epsilon_default = 1,
                     .labels_per_task = 2,
                     .annotator_quota = 3};
    snprintf(c.name, sizeof c.name, "two");
    CHECK_INT(lp_store_campaign_create(s, &c), LP_OK);
    lp_task_in tasks[4];
    char ids[4][8];
    for (int i = 0; i < 4; i++) {
        snprintf(ids[i], sizeof ids[i], "t%d", i);
        tasks[i] =
            (lp_task_in){ids[i], "prompt", "r0", "r1", -1, NULL, NULL, 0, NULL, 0, LP_GOLD_NONE};
    }
    size_t loaded, skipped;
    int64_t first, last;
    CHECK_INT(lp_store_tasks_load(s, c.id, tasks, 4, &loaded, &skipped, &first, &last), LP_OK);
    int64_t a = enroll_new(s, c.id), b = enroll_new(s, c.id), d = enroll_new(s, c.id);
    int64_t e = enroll_new(s, c.id), f = enroll_new(s, c.id);
    check_progress(s, a, 4, 0, 0, 8, 0);

    lp_assignment as[4], bs[4];
    size_t n = 0, nb = 0;
    CHECK_INT(lp_store_assign(s, a, 4, as, &n), LP_OK);
    CHECK_INT(n, 3); /* the quota */
    CHECK_INT(lp_store_assign(s, a, 4, as, &n), LP_OK);
    CHECK_INT(n, 3); /* the same three, pending */
    CHECK_INT(lp_store_assign(s, b, 4, bs, &nb), LP_OK);
    CHECK_INT(nb, 3); /* labels_per_task 2: a's leases leave room for one more each */
    CHECK_INT(lp_store_assign(s, d, 4, bs, &nb), LP_OK);
    CHECK_INT(nb, 1); /* only the fourth task has room */
    CHECK_INT(bs[0].task_id, first + 3);
    CHECK_INT(lp_store_assign(s, e, 4, bs, &nb), LP_OK);
    CHECK_INT(nb, 1);                                          /* the fourth task's second place */
    CHECK_INT(lp_store_assign(s, f, 4, bs, &nb), LP_ENO_TASK); /* everything leased */

    /* skip: counts nothing, refuses a later label, never offered again */
    CHECK_INT(lp_store_skip(s, a, as[0].task_id), LP_OK);
    CHECK_INT(lp_store_skip(s, a, as[0].task_id), LP_OK);
    CHECK_INT(label(s, a, as[0].task_id), LP_ENOT_ASSIGNED);
    CHECK_INT(lp_store_skip(s, a, last + 100), LP_EUNKNOWN_TASK);
    CHECK_INT(lp_store_skip(s, a, first + 3), LP_ENOT_ASSIGNED);
    CHECK_INT(lp_store_assign(s, f, 4, bs, &nb), LP_OK); /* a's skip freed a place */
    CHECK_INT(nb, 1);
    CHECK_INT(bs[0].task_id, as[0].task_id);
    CHECK_INT(label(s, a, as[1].task_id), LP_OK);
    CHECK_INT(lp_store_skip(s, a, as[1].task_id), LP_ECONFLICTING_LABEL);
    check_progress(s, a, 4, 0, 1, 8, 1);

    /* expiry: after 200 ms, every unlabelled lease is void */
    usleep(300 * 1000);
    CHECK_INT(lp_store_assign(s, a, 4, as, &n), LP_OK);
    /* a holds one label and may take two more: task 3 (its own expired
     * lease, renewed) and task 4 (d's lease expired); never its skip */
    CHECK_INT(n, 2);
    CHECK_INT(as[0].task_id, first + 2);
    CHECK_INT(as[1].task_id, first + 3);
    CHECK_INT(lp_store_assign(s, a, 4, bs, &nb), LP_OK);
    CHECK_INT(nb, 2); /* pending: the same two, and no room for more */

    /* fill tasks 1 and 2 with two labels each: the cursor moves past them */
    CHECK_INT(label(s, b, first), LP_OK); /* late labels on expired leases */
    CHECK_INT(label(s, f, first), LP_OK);
    CHECK_INT(label(s, b, first + 1), LP_OK);
    check_progress(s, b, 4, 2, 4, 8, 2);
    CHECK_INT(scalar(db_path, "SELECT open_from FROM campaign_fill WHERE campaign = 2"), 0);
    CHECK_INT(lp_store_assign(s, d, 4, bs, &nb), LP_OK);
    CHECK_INT(nb, 2);
    CHECK_INT(scalar(db_path, "SELECT open_from FROM campaign_fill WHERE campaign = 2"), first + 2);

    /* the quota counts labels: a's three labels leave a nothing */
    CHECK_INT(label(s, a, first + 2), LP_OK);
    CHECK_INT(label(s, a, first + 3), LP_OK);
    CHECK_INT(lp_store_assign(s, a, 4, bs, &nb), LP_EQUOTA_REACHED);
    check_progress(s, a, 4, 2, 6, 8, 3);
    lp_store_close(s);
}

int main(void)
{
    if (sodium_init() < 0 || tmpdir_create(dir, sizeof dir, "test-tasks") != 0)
        return 1;
    test_migration_keeps_rows();
    test_leases_and_skips();
    tmpdir_remove(dir);
    return check_summary();
}
