/*
 * test_views.c — the views repository (server/db/views.h) and the counters
 * of schema/006_operator_views.sql on a real SQLite file:
 *   - every statement of views.c and stats.c reaches its rows through an
 *     index (EXPLAIN QUERY PLAN): no scan of a table that grows with the
 *     labels, tasks or annotators;
 *   - a database written before 008 (labels, skips, assignments and spends
 *     of two campaigns) gets counters equal to the rows they count when the
 *     store migrates it;
 *   - prompt excerpts are cut on a UTF-8 character boundary.
 */
#include "check.h"
#include "db.h"
#include "error.h"
#include "schema_sql.h"
#include "stats.h"
#include "store.h"
#include "tmpdir.h"
#include "views.h"

#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static char dir[256];

/* sqlite3_exec without a callback. */
#define exec(db, sql) sqlite3_exec(db, sql, NULL, NULL, NULL)

static long long scalar(sqlite3 *db, const char *sql)
{
    sqlite3_stmt *st = NULL;
    long long v = -1;
    if (sqlite3_prepare_v2(db, sql, -1, &st, NULL) == SQLITE_OK && sqlite3_step(st) == SQLITE_ROW)
        v = sqlite3_column_int64(st, 0);
    else
        fprintf(stderr, "sql: %s: %s\n", sql, sqlite3_errmsg(db));
    sqlite3_finalize(st);
    return v;
}

/* A database at the version before 008 (every earlier migration) with two
 * campaigns: "a" (labels_per_task 2) with 3 tasks and 3 annotators, "b"
 * with 2 tasks and 1 annotator; labels over two minutes, a skip. */
static void build_before(const char *path)
{
    sqlite3 *db;
    CHECK_INT(sqlite3_open(path, &db), SQLITE_OK);
    CHECK_INT(exec(db, "PRAGMA foreign_keys=ON"), SQLITE_OK);
    int before = 0; /* the migrations before the operator views */
    while (before < LP_MIGRATION_COUNT &&
           strncmp(LP_MIGRATIONS[before], "-- 006_operator_views", 21) != 0)
        before++;
    CHECK(before < LP_MIGRATION_COUNT);
    for (int v = 0; v < before; v++)
        CHECK_INT(exec(db, LP_MIGRATIONS[v]), SQLITE_OK);
    char sql[64];
    snprintf(sql, sizeof sql, "PRAGMA user_version = %d", before);
    CHECK_INT(exec(db, sql), SQLITE_OK);
    CHECK_INT(
        exec(db,
             "INSERT INTO campaigns (id, name, epsilon_min, epsilon_max, epsilon_budget, "
             "epsilon_default, created_ms, labels_per_task) VALUES (2, 'a', 0.5, 2, 4, 1, 0, 2),"
             " (3, 'b', 0.5, 2, 4, 1, 0, 1);"
             "INSERT INTO tasks (id, campaign, source_id, prompt, response0, response1, "
             "created_ms) VALUES (1, 2, 't1', 'p', 'x', 'y', 0), (2, 2, 't2', 'p', 'x', 'y', 0),"
             " (3, 2, 't3', 'p', 'x', 'y', 0), (4, 3, 'u1', 'p', 'x', 'y', 0),"
             " (5, 3, 'u2', 'p', 'x', 'y', 0);"
             "INSERT INTO annotators (id, public_key, pseudonym, campaign, epsilon_spent, "
             "enrolled_ms) VALUES (1, randomblob(32), 'ann-1', 2, 2.0, 1),"
             " (2, randomblob(32), 'ann-2', 2, 1.5, 2), (3, randomblob(32), 'ann-3', 2, 0, 3),"
             " (4, randomblob(32), 'ann-4', 3, 1.0, 4);"
             "INSERT INTO assignments (annotator, task, swapped, created_ms, leased_ms, skipped) "
             "VALUES (1, 1, 0, 0, 0, 0), (1, 2, 0, 0, 0, 0), (2, 1, 1, 0, 0, 0),"
             " (2, 3, 0, 0, 0, 0), (3, 2, 0, 0, 0, 1), (4, 4, 0, 0, 0, 0);"
             "INSERT INTO labels (annotator, task, z, z_task, epsilon, nonce, timestamp_ms, "
             "signature, received_ms) VALUES"
             " (1, 1, 0, 0, 1, randomblob(16), 0, randomblob(64), 60000),"
             " (1, 2, 1, 1, 1, randomblob(16), 0, randomblob(64), 119999),"
             " (2, 1, 0, 1, 0.5, randomblob(16), 0, randomblob(64), 120000),"
             " (2, 3, 1, 1, 1, randomblob(16), 0, randomblob(64), 180001),"
             " (4, 4, 1, 1, 1, randomblob(16), 0, randomblob(64), 60001);"),
        SQLITE_OK);
    sqlite3_close(db);
}

static void test_migration_backfill(void)
{
    char path[300];
    snprintf(path, sizeof path, "%s/before.db", dir);
    build_before(path);
    lp_store_opts o = {.path = path, .sync_full = 0, .read_conns = 1};
    lp_store *s = NULL;
    char err[256];
    CHECK_INT(lp_store_open(&o, &s, err, sizeof err), LP_OK);
    sqlite3 *db;
    CHECK_INT(sqlite3_open_v2(path, &db, SQLITE_OPEN_READONLY, NULL), SQLITE_OK);
    /* every counter equals what it counts */
    CHECK_INT(scalar(db, "SELECT count(*) FROM annotator_fill f JOIN annotators a ON a.id = "
                         "f.annotator WHERE f.labels = (SELECT count(*) FROM labels l WHERE "
                         "l.annotator = a.id) AND f.skips = (SELECT count(*) FROM assignments s "
                         "WHERE s.annotator = a.id AND s.skipped = 1) AND f.last_label_ms IS "
                         "(SELECT max(received_ms) FROM labels l WHERE l.annotator = a.id)"),
              4);
    CHECK_INT(scalar(db, "SELECT skips FROM annotator_fill WHERE annotator = 3"), 1);
    CHECK_INT(scalar(db, "SELECT last_label_ms FROM annotator_fill WHERE annotator = 2"), 180001);
    CHECK_INT(scalar(db, "SELECT annotators * 10 + assignments FROM campaign_fill WHERE "
                         "campaign = 2"),
              3 * 10 + 5);
    CHECK_INT(scalar(db, "SELECT annotators * 10 + assignments FROM campaign_fill WHERE "
                         "campaign = 3"),
              1 * 10 + 1);
    CHECK_INT(scalar(db, "SELECT epsilon_spent * 10 FROM campaign_fill WHERE campaign = 2"), 35);
    /* labels per minute: a's minutes 1, 1, 2, 3; b's minute 1 */
    CHECK_INT(scalar(db, "SELECT group_concat(minute || ':' || labels) = '1:2,2:1,3:1' FROM "
                         "label_minutes WHERE campaign = 2 ORDER BY minute"),
              1);
    CHECK_INT(scalar(db, "SELECT labels FROM label_minutes WHERE campaign = 3 AND minute = 1"), 1);
    sqlite3_close(db);

    /* the views read the backfilled counters */
    lp_campaign_view v;
    CHECK_INT(lp_store_campaign_view(s, "a", 60, 4 * 60000, &v), LP_OK);
    CHECK_INT(v.labels, 4);
    CHECK_INT(v.tasks_complete, 1); /* task 1 has its two labels */
    CHECK_INT(v.annotators, 3);
    CHECK_INT(v.n_points, 4); /* minutes 1..4 (now) */
    int64_t sum = 0;
    for (size_t i = 0; i < v.n_points; i++)
        sum += v.points[i].labels;
    CHECK_INT(sum, 4);
    CHECK_INT(v.points[0].t_ms, 60000);
    CHECK_INT(v.points[0].labels, 2);
    CHECK_INT(v.points[3].labels, 0);
    CHECK_INT(v.histogram[0] + v.histogram[3] + v.histogram[5], 3); /* 0, 1.5, 2 of 4 */
    CHECK_INT(v.histogram[5], 1);
    lp_campaign_view_clear(&v);
    /* a window of 2000 hour buckets ending now holds them all; one of
     * 2000 minutes ending far later holds none */
    CHECK_INT(lp_store_campaign_view(s, "a", 3600, 4 * 60000, &v), LP_OK);
    CHECK_INT(v.n_points, 1);
    CHECK_INT(v.earlier_labels, 0);
    lp_campaign_view_clear(&v);
    CHECK_INT(lp_store_campaign_view(s, "a", 60, 3000 * (int64_t)60000, &v), LP_OK);
    CHECK_INT(v.n_points, 0);
    CHECK_INT(v.earlier_labels, 4);
    lp_campaign_view_clear(&v);
    CHECK_INT(lp_store_campaign_view(s, "a", 90, 0, &v), LP_EINVALID_ARGUMENT);
    CHECK_INT(lp_store_campaign_view(s, "zz", 60, 0, &v), LP_EUNKNOWN_CAMPAIGN);

    /* new rows move the counters through the triggers */
    lp_stats st;
    CHECK_INT(lp_store_stats(s, &st), LP_OK);
    CHECK_INT(st.labels, 5);
    CHECK_INT(st.annotators, 4);
    CHECK_INT(st.assignments, 6);
    CHECK_INT(st.tasks, 5);
    lp_stats_clear(&st);
    lp_store_close(s);
}

/* Each view statement's plan: SEARCH (through an index) everywhere; the
 * stats statements may also scan the one-row-per-campaign tables. */
static void check_plans(sqlite3 *db, const char *const *sqls, size_t n, int campaign_scans_ok)
{
    for (size_t i = 0; i < n; i++) {
        char *sql = sqlite3_mprintf("EXPLAIN QUERY PLAN %s", sqls[i]);
        sqlite3_stmt *st = NULL;
        CHECK_INT(sqlite3_prepare_v2(db, sql, -1, &st, NULL), SQLITE_OK);
        int rows = 0;
        while (st && sqlite3_step(st) == SQLITE_ROW) {
            const char *detail = (const char *)sqlite3_column_text(st, 3);
            rows++;
            int scan = strncmp(detail, "SCAN", 4) == 0;
            int allowed = campaign_scans_ok && (strcmp(detail, "SCAN campaign_fill") == 0 ||
                                                strcmp(detail, "SCAN c") == 0);
            check_record(!scan || allowed, __FILE__, __LINE__, "plan of \"%s\": %s", sqls[i],
                         detail);
            check_record(strstr(detail, "labels") == NULL || strstr(detail, "label_minutes"),
                         __FILE__, __LINE__, "\"%s\" reads labels: %s", sqls[i], detail);
        }
        CHECK(rows > 0);
        sqlite3_finalize(st);
        sqlite3_free(sql);
    }
}

static void test_query_plans(void)
{
    char path[300], err[256];
    snprintf(path, sizeof path, "%s/plans.db", dir);
    lp_store_opts o = {.path = path, .sync_full = 0, .read_conns = 1};
    lp_store *s = NULL;
    CHECK_INT(lp_store_open(&o, &s, err, sizeof err), LP_OK);
    lp_store_close(s);
    sqlite3 *db;
    CHECK_INT(sqlite3_open_v2(path, &db, SQLITE_OPEN_READONLY, NULL), SQLITE_OK);
    check_plans(db, LP_VIEWS_SQL, LP_VIEWS_SQL_COUNT, 0);
    check_plans(db, LP_STATS_SQL, LP_STATS_SQL_COUNT, 1);
    sqlite3_close(db);
}

static void test_excerpt(void)
{
    int cut = -1;
    char *e = lp_utf8_excerpt("hello", 5, 3, &cut);
    CHECK_STR(e, "hel");
    CHECK_INT(cut, 1);
    free(e);
    e = lp_utf8_excerpt("hello", 5, 5, &cut);
    CHECK_STR(e, "hello");
    CHECK_INT(cut, 0);
    free(e);
    e = lp_utf8_excerpt("", 0, 5, &cut);
    CHECK_STR(e, "");
    CHECK_INT(cut, 0);
    free(e);
    /* two-, three- and four-byte characters are kept whole */
    const char *mixed = "\xc3\xa9\xe2\x82\xac\xf0\x9f\x98\x80z"; /* é € 😀 z */
    e = lp_utf8_excerpt(mixed, strlen(mixed), 3, &cut);
    CHECK_STR(e, "\xc3\xa9\xe2\x82\xac\xf0\x9f\x98\x80");
    CHECK_INT(cut, 1);
    free(e);
    e = lp_utf8_excerpt(mixed, strlen(mixed), 1, &cut);
    CHECK_STR(e, "\xc3\xa9");
    free(e);
}

int main(void)
{
    if (tmpdir_create(dir, sizeof dir, "views") != 0) {
        check_record(0, __FILE__, __LINE__, "temporary directory");
        return check_summary();
    }
    test_excerpt();
    test_query_plans();
    test_migration_backfill();
    tmpdir_remove(dir);
    return check_summary();
}
