/*
 * test_task_count.c — a campaign's task count (campaign_fill.tasks), which
 * the upload adds once per file since schema 016, on a real SQLite file and
 * on a real PostgreSQL database (tests/support/pg.h), through the tasks
 * repository as the server calls it:
 *   - uploads with duplicates skipped (inside one file and against tasks
 *     already stored), two in a row, one of duplicates only, one refused
 *     (nothing counted), one into an unknown campaign, one into another
 *     campaign: the count equals the campaign's rows after each, and after
 *     a reopen;
 *   - two stores on one database (two servers) uploading overlapping files
 *     at once, in opposite orders: every task stored once, counted once;
 *   - the tasks_fill trigger gives each task its task_fill row and no longer
 *     writes campaign_fill;
 *   - a database at schema 015, whose trigger counted each task row,
 *     migrated to 016: its counts kept, the next upload counted once.
 */
#include "check.h"
#include "db_counters.h"
#include "error.h"
#include "pg.h"
#include "schema_pg.h"
#include "schema_sql.h"
#include "store.h"
#include "tasks.h"
#include "campaigns.h"
#include "tmpdir.h"

#include <libpq-fe.h>
#include <pthread.h>
#include <sodium.h>
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static char dir[256];

static int is_pg(const char *db)
{
    return strncmp(db, "postgresql://", 13) == 0;
}

static long long counted(const char *db, int64_t campaign)
{
    char sql[128];
    snprintf(sql, sizeof sql, "SELECT tasks FROM campaign_fill WHERE campaign = %lld",
             (long long)campaign);
    return db_scalar(db, sql);
}

static long long stored(const char *db, int64_t campaign)
{
    char sql[128];
    snprintf(sql, sizeof sql, "SELECT count(*) FROM tasks WHERE campaign = %lld",
             (long long)campaign);
    return db_scalar(db, sql);
}

/* The campaign's count and rows: both equal to want. */
#define CHECK_COUNT(db, campaign, want)                                                            \
    do {                                                                                           \
        CHECK_INT(stored(db, campaign), want);                                                     \
        CHECK_INT(counted(db, campaign), want);                                                    \
    } while (0)

static const lp_turn TURN[1] = {{LP_ROLE_USER, "earlier"}};

/* Uploads the tasks named ids[0..n) (one context turn each) through the
 * repository; the outcome, with *loaded and *skipped. */
static int upload(lp_store *s, int64_t campaign, const char *const *ids, size_t n, size_t *loaded,
                  size_t *skipped)
{
    lp_task_in *tasks = calloc(n, sizeof *tasks);
    if (tasks == NULL)
        return LP_ENO_MEMORY;
    for (size_t i = 0; i < n; i++)
        tasks[i] = (lp_task_in){.source_id = ids[i],
                                .prompt = "prompt",
                                .response0 = "r0",
                                .response1 = "r1",
                                .reference_preferred = -1,
                                .context = TURN,
                                .n_context = 1,
                                .gold = LP_GOLD_NONE};
    int64_t first, last;
    int rc = lp_store_tasks_load(s, campaign, tasks, n, loaded, skipped, &first, &last);
    free(tasks);
    return rc;
}

static int64_t campaign_new(lp_store *s, const char *name)
{
    lp_campaign c = {
        .epsilon_min = 0.5, .epsilon_max = 2, .epsilon_budget = 4, .epsilon_default = 1};
    snprintf(c.name, sizeof c.name, "%s", name);
    CHECK_INT(lp_store_campaign_create(s, &c), LP_OK);
    return c.id;
}

static lp_store *store_open(const char *db)
{
    char err[256];
    lp_store_opts o = {.path = db, .sync_full = 0, .read_conns = 1};
    lp_store *s = NULL;
    int rc = lp_store_open(&o, &s, err, sizeof err);
    check_record(rc == LP_OK, __FILE__, __LINE__, "open %s: %s", db, err);
    return rc == LP_OK ? s : NULL;
}

/* Whether the tasks_fill trigger's text mentions campaign_fill (-1 when it
 * is missing). */
static long long trigger_counts(const char *db)
{
    if (is_pg(db))
        return db_scalar(db, "SELECT CASE WHEN count(*) = 0 THEN -1 ELSE "
                             "max((prosrc LIKE '%campaign_fill%')::int) END "
                             "FROM pg_proc p JOIN pg_trigger t ON t.tgfoid = p.oid "
                             "WHERE t.tgname = 'tasks_fill' AND NOT t.tgisinternal");
    return db_scalar(db, "SELECT CASE WHEN count(*) = 0 THEN -1 ELSE "
                         "max(sql LIKE '%campaign_fill%') END FROM sqlite_master "
                         "WHERE type = 'trigger' AND name = 'tasks_fill'");
}

/* ---- uploads through one store ---- */

static void test_uploads(const char *db)
{
    lp_store *s = store_open(db);
    if (s == NULL)
        return;
    int64_t c = campaign_new(s, "counted"), other = campaign_new(s, "other");
    size_t loaded, skipped;

    const char *const first[] = {"a", "b", "c", "b", "d"}; /* b twice in one file */
    CHECK_INT(upload(s, c, first, 5, &loaded, &skipped), LP_OK);
    CHECK_INT(loaded, 4);
    CHECK_INT(skipped, 1);
    CHECK_COUNT(db, c, 4);

    const char *const second[] = {"c", "e", "d", "f"}; /* c and d already stored */
    CHECK_INT(upload(s, c, second, 4, &loaded, &skipped), LP_OK);
    CHECK_INT(loaded, 2);
    CHECK_INT(skipped, 2);
    CHECK_COUNT(db, c, 6);

    const char *const again[] = {"a", "f"}; /* nothing new */
    CHECK_INT(upload(s, c, again, 2, &loaded, &skipped), LP_OK);
    CHECK_INT(loaded, 0);
    CHECK_INT(skipped, 2);
    CHECK_COUNT(db, c, 6);

    const char *const refused[] = {"g", "h\xff"}; /* not UTF-8: the whole file refused */
    CHECK_INT(upload(s, c, refused, 2, &loaded, &skipped), LP_EBAD_TASK);
    CHECK_COUNT(db, c, 6);
    const char *const lost[] = {"g"};
    CHECK_INT(upload(s, 999999, lost, 1, &loaded, &skipped), LP_EUNKNOWN_CAMPAIGN);
    CHECK_INT(db_scalar(db, "SELECT count(*) FROM campaign_fill WHERE campaign = 999999"), 0);

    /* the same source ids in another campaign are its own tasks */
    CHECK_INT(upload(s, other, first, 5, &loaded, &skipped), LP_OK);
    CHECK_INT(loaded, 4);
    CHECK_COUNT(db, other, 4);
    CHECK_COUNT(db, c, 6);
    CHECK_COUNT(db, 1, 0); /* the default campaign */

    lp_store_close(s);
    s = store_open(db); /* what was committed, read again */
    CHECK_COUNT(db, c, 6);
    CHECK_COUNT(db, other, 4);
    CHECK_INT(db_counters_mismatch(db), 0);
    CHECK_INT(trigger_counts(db), 0);
    lp_store_close(s);
}

/* ---- two stores at once ---- */

#define RACE_N 300

struct racer {
    lp_store *s;
    int64_t campaign;
    const char *ids[RACE_N];
    size_t loaded, skipped;
    int rc;
};

static void *race(void *arg)
{
    struct racer *r = arg;
    r->rc = upload(r->s, r->campaign, r->ids, RACE_N, &r->loaded, &r->skipped);
    return NULL;
}

/* Two stores (two servers) upload files that share half their tasks, in
 * opposite orders, at once: on PostgreSQL each may wait on the other's
 * uncommitted rows, and a deadlock runs one transaction again; on SQLite
 * one writes at a time. */
static void test_two_stores(const char *db)
{
    static char names[RACE_N * 3 / 2][16];
    for (int i = 0; i < RACE_N * 3 / 2; i++)
        snprintf(names[i], sizeof names[i], "race%d", i);
    struct racer r[2] = {{.s = store_open(db)}, {.s = store_open(db)}};
    if (r[0].s == NULL || r[1].s == NULL) {
        lp_store_close(r[0].s);
        lp_store_close(r[1].s);
        return;
    }
    r[0].campaign = r[1].campaign = campaign_new(r[0].s, "raced");
    for (int i = 0; i < RACE_N; i++) {
        r[0].ids[i] = names[i];                      /* 0 .. 299 */
        r[1].ids[i] = names[RACE_N * 3 / 2 - 1 - i]; /* 449 .. 150 */
    }
    pthread_t t[2];
    for (int k = 0; k < 2; k++)
        CHECK_INT(pthread_create(&t[k], NULL, race, &r[k]), 0);
    for (int k = 0; k < 2; k++)
        pthread_join(t[k], NULL);
    CHECK_INT(r[0].rc, LP_OK);
    CHECK_INT(r[1].rc, LP_OK);
    CHECK_INT(r[0].loaded + r[1].loaded, RACE_N * 3 / 2);
    CHECK_INT(r[0].skipped + r[1].skipped, RACE_N / 2);
    CHECK_COUNT(db, r[0].campaign, RACE_N * 3 / 2);
    CHECK_INT(db_counters_mismatch(db), 0);
    lp_store_close(r[0].s);
    lp_store_close(r[1].s);
}

/* ---- a database at schema 015 ---- */

/* Rows written at schema 015 (its trigger counts each task), valid SQL in
 * both dialects: campaign 2 is the first after the schema's default one. */
static const char AT_015[] =
    "INSERT INTO campaigns (name, epsilon_min, epsilon_max, epsilon_budget, epsilon_default, "
    "created_ms) VALUES ('old', 0.1, 5, 100, 1, 0);"
    "INSERT INTO tasks (campaign, source_id, prompt, response0, response1, created_ms) VALUES "
    "(1, 's1', 'p', 'x', 'y', 0), (1, 's2', 'p', 'x', 'y', 0), (1, 's3', 'p', 'x', 'y', 0), "
    "(2, 's1', 'p', 'x', 'y', 0), (2, 's4', 'p', 'x', 'y', 0);";

static int sqlite_at_015(const char *path)
{
    sqlite3 *db = NULL;
    int ok = sqlite3_open(path, &db) == SQLITE_OK;
    for (int i = 0; ok && i < 15; i++)
        ok = sqlite3_exec(db, LP_MIGRATIONS[i], NULL, NULL, NULL) == SQLITE_OK;
    ok = ok && sqlite3_exec(db, "PRAGMA user_version = 15", NULL, NULL, NULL) == SQLITE_OK &&
         sqlite3_exec(db, AT_015, NULL, NULL, NULL) == SQLITE_OK;
    if (!ok)
        fprintf(stderr, "sqlite_at_015: %s\n", sqlite3_errmsg(db));
    sqlite3_close(db);
    return ok;
}

static int pg_exec(PGconn *pg, const char *sql)
{
    PGresult *r = PQexec(pg, sql);
    int ok = PQresultStatus(r) == PGRES_COMMAND_OK;
    if (!ok)
        fprintf(stderr, "pg_at_015: %s", PQerrorMessage(pg));
    PQclear(r);
    return ok;
}

/* The schema/postgresql/ files up to 015, each in its transaction, as a
 * server of that version applied them; then the rows. */
static int pg_at_015(const char *uri)
{
    PGconn *pg = PQconnectdb(uri);
    int ok = PQstatus(pg) == CONNECTION_OK && pg_exec(pg, "SET client_min_messages = warning");
    int files = 0;
    for (const lp_pg_schema_file *f = lp_pg_schema_files; ok && f->name != NULL; f++) {
        if (strtol(f->name, NULL, 10) > 15)
            continue;
        char *sql = malloc(f->len + 1);
        ok = sql != NULL;
        if (ok) {
            memcpy(sql, f->sql, f->len);
            sql[f->len] = 0;
            ok = pg_exec(pg, "BEGIN") && pg_exec(pg, sql) && pg_exec(pg, "COMMIT");
            files++;
        }
        free(sql);
    }
    ok = ok && files == 2 && pg_exec(pg, AT_015);
    PQfinish(pg);
    return ok;
}

static void test_migration_016(const char *db)
{
    CHECK_INT(db_scalar(db, is_pg(db) ? "SELECT max(version) FROM schema_version"
                                      : "PRAGMA user_version"),
              15);
    CHECK_INT(trigger_counts(db), 1);
    CHECK_COUNT(db, 1, 3); /* counted by the trigger of 004 */
    CHECK_COUNT(db, 2, 2);
    lp_store *s = store_open(db); /* migrates */
    if (s == NULL)
        return;
    CHECK_INT(db_scalar(db, is_pg(db) ? "SELECT max(version) FROM schema_version"
                                      : "PRAGMA user_version"),
              16);
    CHECK_INT(trigger_counts(db), 0);
    CHECK_COUNT(db, 1, 3);
    CHECK_COUNT(db, 2, 2);
    size_t loaded, skipped;
    const char *const more[] = {"s1", "s5", "s6"};
    CHECK_INT(upload(s, 2, more, 3, &loaded, &skipped), LP_OK);
    CHECK_INT(loaded, 2);
    CHECK_INT(skipped, 1);
    CHECK_COUNT(db, 2, 4); /* once: the trigger no longer counts */
    CHECK_COUNT(db, 1, 3);
    CHECK_INT(db_counters_mismatch(db), 0);
    lp_store_close(s);
}

int main(void)
{
    if (sodium_init() < 0 || tmpdir_create(dir, sizeof dir, "task-count") != 0)
        return 1;
    char path[300];
    snprintf(path, sizeof path, "%s/uploads.db", dir);
    test_uploads(path);
    test_two_stores(path);
    snprintf(path, sizeof path, "%s/v15.db", dir);
    CHECK(sqlite_at_015(path));
    test_migration_016(path);

    pg_cluster pgc;
    if (pg_cluster_start_for(&pgc, "test_task_count (PostgreSQL)")) {
        char uri[512];
        CHECK_INT(pg_cluster_create_db(&pgc, "uploads", uri, sizeof uri), 0);
        test_uploads(uri);
        test_two_stores(uri);
        CHECK_INT(pg_cluster_create_db(&pgc, "at015", uri, sizeof uri), 0);
        CHECK(pg_at_015(uri));
        test_migration_016(uri);
        pg_cluster_stop(&pgc);
    }
    tmpdir_remove(dir);
    return check_summary();
}
