/*
 * test_migrate.c — a SQLite database copied into PostgreSQL (migrate.h,
 * ldpref-server --migrate-to) on a real PostgreSQL server (tests/support/
 * pg.h).
 *
 * The source is a real server database (the store's own migrations) with
 * rows in every table, edge values included (NULLs, int64 extremes,
 * doubles such as -0.0, subnormals and 1e308, UTF-8 text, blobs of every
 * byte value) and a few thousand labels. Checked: the copy succeeds; every
 * table of the source holds rows (so a table added to the schema without
 * rows here fails this test) and is in the report; each table is equal row
 * by row, read independently of the copier (sqlite3 and libpq, every
 * column compared by its SQLite type); the identity sequences continue past
 * the largest ids; the target's triggers are enabled and its constraints
 * and indexes are those of a fresh database. Refusals, each leaving the target as it
 * was: a target that is not empty, a copy that fails midway (a constraint
 * the target adds refuses a late table's row: all or nothing), a source
 * older than the server, a source with a table the target's schema lacks
 * or lacking one of its tables, a value whose SQLite type does not fit its
 * column, a missing file.
 * And the backup of docs/postgresql.md: pg_dump of the migrated database,
 * pg_restore into a new one, equal table by table, which the engine opens.
 */
#include "check.h"
#include "error.h"
#include "migrate.h"
#include "pg.h"
#include "schema_pg.h"
#include "sql_pg.h"
#include "store.h"
#include "tmpdir.h"

#include <libpq-fe.h>
#include <math.h>
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define LABELS 3000

static char dir[256];

/* Rows in every table of the schema, through SQL as the server stores them
 * (its triggers fill the counters of campaigns, tasks and annotators). */
static const char POPULATE[] =
    "INSERT INTO campaigns (id, name, epsilon_min, epsilon_max, allow_infinite, epsilon_budget,"
    "  epsilon_default, created_ms, labels_per_task, annotator_quota, trust, release_epsilon,"
    "  release_delta, contribution_cap)"
    " VALUES (7, 'étude ✓', 5e-324, 1e308, 1, 4.9406564584124654e-324, 0.1, -9223372036854775808,"
    "  3, NULL, 'central', 0.5, 0.0, 9223372036854775807);"
    "INSERT INTO tasks (id, campaign, source_id, prompt, response0, response1, features0,"
    "  features1, reference_preferred, created_ms, gold)"
    " SELECT 100 + n, CASE WHEN n % 2 = 0 THEN 1 ELSE 7 END, 's' || n, 'prompt ' || n || ' «»',"
    "  'a', 'b', CASE WHEN n % 3 = 0 THEN NULL ELSE randomblob(24) END, x'00ff00', n % 2,"
    "  n, CASE WHEN n % 5 = 0 THEN NULL ELSE 1 END"
    " FROM (WITH RECURSIVE c(n) AS (SELECT 0 UNION ALL SELECT n + 1 FROM c WHERE n < 59)"
    "       SELECT n FROM c);"
    "INSERT INTO annotators (id, public_key, pseudonym, campaign, revoked, epsilon_spent,"
    "  enrolled_ms)"
    " SELECT 10 + n, randomblob(32), 'p' || n, 1, n = 3, -0.0, n"
    " FROM (WITH RECURSIVE c(n) AS (SELECT 0 UNION ALL SELECT n + 1 FROM c WHERE n < 49)"
    "       SELECT n FROM c);"
    "INSERT INTO enrollment_tokens VALUES (randomblob(32), 1, 5, 10), (randomblob(32), 7, 6, NULL);"
    "INSERT INTO operator_tokens VALUES (3, randomblob(32), 'admin', 7, 1, NULL),"
    "  (9, randomblob(32), 'old', 0, 2, 3);"
    "INSERT INTO assignments SELECT 10 + n % 50, 100 + n % 60, n % 2, n, 0, n % 7 = 0"
    " FROM (WITH RECURSIVE c(n) AS (SELECT 0 UNION ALL SELECT n + 1 FROM c WHERE n < 299)"
    "       SELECT n FROM c);"
    "INSERT INTO labels (id, annotator, task, z, z_task, epsilon, nonce, timestamp_ms, signature,"
    "  received_ms)"
    " SELECT 5 + n, 10 + n / 60, 100 + n % 60, n % 2, (n / 2) % 2,"
    "  CASE WHEN n % 7 = 0 THEN NULL ELSE 0.5 + n / 1000.0 END, randomblob(16), n,"
    "  randomblob(64), 1000 + n"
    " FROM (WITH RECURSIVE c(n) AS (SELECT 0 UNION ALL SELECT n + 1 FROM c WHERE n < 2999)"
    "       SELECT n FROM c);"
    "UPDATE campaign_fill SET tasks = (SELECT count(*) FROM tasks t"
    "  WHERE t.campaign = campaign_fill.campaign);"
    "UPDATE campaign_fill SET labels = 3000, tasks_complete = 2, open_from = 4,"
    "  epsilon_spent = 1.25 WHERE campaign = 1;"
    "UPDATE task_fill SET labels = 50;"
    "UPDATE annotator_fill SET labels = 60, last_label_ms = 99;"
    "INSERT INTO label_minutes VALUES (1, 28000000, 2999), (7, 28000001, 1);"
    "INSERT INTO corruption_settings VALUES (4, 1, 0.25, 'flip', -1, 0, 7);"
    "INSERT INTO train_settings (id, loss, campaign, cutoff, seed, beta, rmax, tau, l2,"
    "  norm_bound, optimizer, max_iter, epochs, lr, batch, features, text_dim, text_bigrams,"
    "  text_cross_prompt, text_length, threads, activate, l2_auto, mechanism, release_epsilon,"
    "  release_delta, candidates)"
    " VALUES (2, 'square_chipo', NULL, 3004, 0, 0.1, 1, 1, 1e-6, NULL, 'lbfgs', 100, 1, 0.01,"
    "  32, 'text', 4096, 1, 0, 1, 1, 1, 0, 'aup', 1.5, 1e-9, '[1e-3, 1e-2]');"
    "INSERT INTO training_runs (id, trigger_kind, status, cutoff, labels, iterations,"
    "  evaluations, objective, grad_norm, error, message, model_version, created_ms,"
    "  started_ms, finished_ms, settings)"
    " VALUES (5, 'manual', 'succeeded', 3004, 3000, 17, 20, 0.6931471805599453, 2.2e-16,"
    "  NULL, NULL, 6, 10, 11, 12, 2),"
    "  (8, 'labels', 'failed', NULL, 0, 0, 0, NULL, NULL, 'train_error', 'a\nmessage', NULL,"
    "  13, NULL, NULL, NULL);"
    "INSERT INTO models (version, run, loss, campaign, cutoff, labels, duration_ms, summary,"
    "  model, created_ms, features, dim, text_dim, text_bigrams, text_cross_prompt,"
    "  text_cross_max, text_length)"
    " VALUES (6, 5, 'square_chipo', 1, 3004, 3000, 812, '{\"loss\": \"square_chipo\"}',"
    "  'ldpref-model 1\ntheta ...', 14, 'text', 4096, 4096, 1, 0, 16, 1);"
    "INSERT INTO activations VALUES (1, 6, 15);"
    "INSERT INTO retrain_schedule VALUES (1, 3600, 500, 16, 2);"
    "INSERT INTO model_corruption VALUES (6, 4, NULL);"
    "INSERT INTO training_curve VALUES (5, 0, 0, 1, 0.6931471805599453, NULL, 0),"
    "  (5, 1, 1, 3, 0.5, 0.125, 4);"
    "INSERT INTO task_turns VALUES (100, 0, 'system', 'be kind'), (100, 1, 'user', '');"
    "INSERT INTO audit VALUES (1, 17, 3, 'POST /v1/campaigns', '{}', 201, '', zeroblob(32),"
    "  randomblob(32));"
    "INSERT INTO model_privacy VALUES (6, 3000, 50, 429, 0.5, 3.5, 60.0, 'aup', 1.5, 1e-9);";

/* ---- the independent comparison ---- */

static int hexval(char ch)
{
    return ch <= '9' ? ch - '0' : (ch | 32) - 'a' + 10;
}

/* One SQLite value against PostgreSQL's text of the same column. */
static int same_value(sqlite3_stmt *st, int col, PGresult *r, int row)
{
    int type = sqlite3_column_type(st, col);
    if (type == SQLITE_NULL)
        return PQgetisnull(r, row, col);
    if (PQgetisnull(r, row, col))
        return 0;
    const char *pg = PQgetvalue(r, row, col);
    switch (type) {
    case SQLITE_INTEGER:
        return strtoll(pg, NULL, 10) == sqlite3_column_int64(st, col);
    case SQLITE_FLOAT: {
        double a = sqlite3_column_double(st, col), b = strtod(pg, NULL);
        return memcmp(&a, &b, sizeof a) == 0;
    }
    case SQLITE_TEXT:
        return strcmp(pg, (const char *)sqlite3_column_text(st, col)) == 0;
    default: { /* a blob: PostgreSQL's hex text "\x..." */
        const unsigned char *b = sqlite3_column_blob(st, col);
        int n = sqlite3_column_bytes(st, col);
        if (strncmp(pg, "\\x", 2) != 0 || (int)strlen(pg) != 2 + 2 * n)
            return 0;
        for (int i = 0; i < n; i++)
            if (hexval(pg[2 + 2 * i]) * 16 + hexval(pg[3 + 2 * i]) != b[i])
                return 0;
        return 1;
    }
    }
}

/* Every row of table, in the same order on both sides, equal column by
 * column; returns the number of rows compared (-1 on a difference). */
static long compare_table(sqlite3 *db, PGconn *pg, const char *table)
{
    char cols[2048] = "", order_s[4096] = "", order_p[4096] = "", sql[8192];
    sqlite3_stmt *info;
    snprintf(sql, sizeof sql, "SELECT name, type FROM pragma_table_info('%s') ORDER BY cid", table);
    sqlite3_prepare_v2(db, sql, -1, &info, NULL);
    while (sqlite3_step(info) == SQLITE_ROW) {
        const char *c = (const char *)sqlite3_column_text(info, 0);
        int text = strcmp((const char *)sqlite3_column_text(info, 1), "TEXT") == 0;
        const char *sep = cols[0] ? ", " : "";
        size_t n = strlen(cols), ns = strlen(order_s), np = strlen(order_p);
        snprintf(cols + n, sizeof cols - n, "%s%s", sep, c);
        snprintf(order_s + ns, sizeof order_s - ns, "%s%s NULLS FIRST", sep, c);
        snprintf(order_p + np, sizeof order_p - np, "%s%s%s NULLS FIRST", sep, c,
                 text ? " COLLATE \"C\"" : "");
    }
    sqlite3_finalize(info);
    snprintf(sql, sizeof sql, "SELECT %s FROM %s ORDER BY %s", cols, table, order_p);
    PGresult *r = PQexec(pg, sql);
    if (PQresultStatus(r) != PGRES_TUPLES_OK) {
        fprintf(stderr, "%s: %s", table, PQerrorMessage(pg));
        PQclear(r);
        return -1;
    }
    snprintf(sql, sizeof sql, "SELECT %s FROM %s ORDER BY %s", cols, table, order_s);
    sqlite3_stmt *st;
    sqlite3_prepare_v2(db, sql, -1, &st, NULL);
    long rows = 0;
    int ok = 1;
    while (ok && sqlite3_step(st) == SQLITE_ROW) {
        if (rows >= PQntuples(r) || sqlite3_column_count(st) != PQnfields(r)) {
            ok = 0;
            break;
        }
        for (int c = 0; ok && c < PQnfields(r); c++)
            if (!same_value(st, c, r, (int)rows)) {
                fprintf(stderr, "%s row %ld column %s: SQLite %s, PostgreSQL %s\n", table, rows,
                        PQfname(r, c), sqlite3_column_text(st, c), PQgetvalue(r, (int)rows, c));
                ok = 0;
            }
        rows++;
    }
    if (ok && rows != PQntuples(r))
        ok = 0;
    sqlite3_finalize(st);
    PQclear(r);
    return ok ? rows : -1;
}

static long pg_long(PGconn *pg, const char *sql)
{
    PGresult *r = PQexec(pg, sql);
    long v = PQresultStatus(r) == PGRES_TUPLES_OK && PQntuples(r) == 1
                 ? strtol(PQgetvalue(r, 0, 0), NULL, 10)
                 : -999;
    if (v == -999)
        fprintf(stderr, "%s: %s", sql, PQerrorMessage(pg));
    PQclear(r);
    return v;
}

static char *pg_text(PGconn *pg, const char *sql)
{
    PGresult *r = PQexec(pg, sql);
    size_t cap = 1, len = 0;
    char *out = calloc(1, 1);
    for (int i = 0; PQresultStatus(r) == PGRES_TUPLES_OK && i < PQntuples(r); i++) {
        const char *v = PQgetvalue(r, i, 0);
        cap = len + strlen(v) + 2;
        out = realloc(out, cap);
        len += (size_t)sprintf(out + len, "%s\n", v);
    }
    PQclear(r);
    return out;
}

/* Rows in the target outside what a fresh database holds. */
static long target_rows(PGconn *pg)
{
    return pg_long(pg, "SELECT (SELECT count(*) FROM labels) + (SELECT count(*) FROM tasks)"
                       " + (SELECT count(*) FROM annotators) + (SELECT count(*) FROM models)"
                       " + (SELECT count(*) FROM campaigns WHERE id <> 1)");
}

/* The constraints and indexes of the schema, as text. */
static const char SCHEMA_OBJECTS[] =
    "SELECT conrelid::regclass || ' ' || conname || ' ' || "
    "pg_get_constraintdef(oid) FROM pg_constraint "
    "WHERE connamespace = 'public'::regnamespace "
    "UNION ALL SELECT indexdef FROM pg_indexes WHERE schemaname = 'public' "
    "ORDER BY 1";
static const char TRIGGERS_ENABLED[] =
    "SELECT count(*) FROM pg_trigger WHERE NOT tgisinternal AND tgenabled = 'O'";

static void make_source(const char *path)
{
    lp_store_opts o = {.path = path, .sync_full = 1, .read_conns = 1};
    lp_store *s = NULL;
    char err[256];
    CHECK_INT(lp_store_open(&o, &s, err, sizeof err), LP_OK);
    lp_store_close(s);
    sqlite3 *db;
    CHECK_INT(sqlite3_open(path, &db), SQLITE_OK);
    char *msg = NULL;
    CHECK_INT(sqlite3_exec(db, POPULATE, NULL, NULL, &msg), SQLITE_OK);
    if (msg)
        fprintf(stderr, "populate: %s\n", msg);
    sqlite3_free(msg);
    sqlite3_close(db);
}

/* Copies src into a new database, whose URI goes to uri. */
static void test_copy(pg_cluster *pgc, const char *src, char *uri, size_t urilen)
{
    char fresh_uri[512];
    CHECK_INT(pg_cluster_create_db(pgc, "migrated", uri, urilen), 0);
    CHECK_INT(pg_cluster_create_db(pgc, "fresh", fresh_uri, sizeof fresh_uri), 0);
    lp_migrate_report rep;
    char err[1024] = "";
    int rc = lp_migrate_to_pg(src, uri, &rep, NULL, NULL, err, sizeof err);
    CHECK_INT(rc, LP_OK);
    if (rc != LP_OK)
        fprintf(stderr, "migrate: %s\n", err);
    CHECK_INT(rep.version, lp_pg_schema_newest());

    sqlite3 *db;
    CHECK_INT(sqlite3_open_v2(src, &db, SQLITE_OPEN_READONLY, NULL), SQLITE_OK);
    PGconn *pg = PQconnectdb(uri);
    CHECK_INT(PQstatus(pg), CONNECTION_OK);
    PQclear(PQexec(pg, "SET extra_float_digits = 3"));

    /* every table of the source has rows, was copied and is equal */
    sqlite3_stmt *t;
    sqlite3_prepare_v2(db,
                       "SELECT name FROM sqlite_master WHERE type = 'table' "
                       "AND name NOT LIKE 'sqlite!_%' ESCAPE '!' ORDER BY name",
                       -1, &t, NULL);
    int tables = 0;
    long total = 0;
    while (sqlite3_step(t) == SQLITE_ROW) {
        const char *name = (const char *)sqlite3_column_text(t, 0);
        tables++;
        long rows = compare_table(db, pg, name);
        if (rows <= 0)
            fprintf(stderr, "table %s: %ld rows compared (a table needs rows here)\n", name, rows);
        CHECK(rows > 0);
        int reported = 0;
        for (int i = 0; i < rep.tables; i++)
            if (strcmp(rep.table[i].name, name) == 0) {
                reported = 1;
                CHECK_INT(rep.table[i].rows, rows);
                CHECK_INT(strlen(rep.table[i].checksum), 64);
            }
        CHECK(reported);
        total += rows > 0 ? rows : 0;
    }
    sqlite3_finalize(t);
    CHECK_INT(rep.tables, tables);
    CHECK_INT(rep.rows, total);
    CHECK_INT(pg_long(pg, "SELECT count(*) FROM labels"), LABELS);

    /* sequences continue past the copied ids */
    CHECK_INT(pg_long(pg, "SELECT nextval(pg_get_serial_sequence('labels', 'id'))"), 5 + LABELS);
    CHECK_INT(pg_long(pg, "SELECT nextval(pg_get_serial_sequence('tasks', 'id'))"), 160);
    CHECK_INT(pg_long(pg, "SELECT nextval(pg_get_serial_sequence('models', 'version'))"), 7);
    CHECK_INT(pg_long(pg, "SELECT nextval(pg_get_serial_sequence('campaigns', 'id'))"), 8);
    /* triggers on, the constraints and indexes of a fresh database */
    PGconn *fresh = PQconnectdb(fresh_uri);
    lp_conn *fc = NULL;
    char e2[256];
    CHECK_INT(lp_sql_pg_open(fresh_uri, &fc, e2, sizeof e2), LP_OK);
    int64_t v;
    CHECK_INT(lp_pg_migrate(fc, &v, e2, sizeof e2), LP_OK);
    lp_conn_close(fc);
    CHECK(pg_long(pg, TRIGGERS_ENABLED) > 10);
    CHECK_INT(pg_long(pg, TRIGGERS_ENABLED), pg_long(fresh, TRIGGERS_ENABLED));
    char *fk_a = pg_text(pg, SCHEMA_OBJECTS), *fk_b = pg_text(fresh, SCHEMA_OBJECTS);
    CHECK(strlen(fk_a) > 100);
    CHECK_STR(fk_a, fk_b);
    free(fk_a);
    free(fk_b);
    /* the counts copied as they were; the counter triggers work again: a
     * new task gets its task_fill row (its count is the upload's, 016) */
    CHECK_INT(pg_long(pg, "SELECT tasks FROM campaign_fill WHERE campaign = 7"), 30);
    PGresult *ins = PQexec(pg, "INSERT INTO tasks (campaign, source_id, prompt, response0,"
                               " response1, created_ms) VALUES (7, 'new', 'p', 'a', 'b', 1)");
    CHECK(PQresultStatus(ins) == PGRES_COMMAND_OK);
    PQclear(ins);
    CHECK_INT(pg_long(pg, "SELECT count(*) FROM task_fill f JOIN tasks t ON t.id = f.task "
                          "WHERE t.source_id = 'new' AND f.campaign = 7"),
              1);
    CHECK_INT(pg_long(pg, "SELECT tasks FROM campaign_fill WHERE campaign = 7"), 30);

    /* a second copy into the same database: refused, nothing changed */
    long before = target_rows(pg);
    rc = lp_migrate_to_pg(src, uri, &rep, NULL, NULL, err, sizeof err);
    CHECK_INT(rc, LP_ESTORAGE);
    CHECK(strstr(err, "not empty") != NULL);
    CHECK_INT(target_rows(pg), before);
    PQfinish(fresh);
    PQfinish(pg);
    sqlite3_close(db);
}

/* A copy that fails at a late table leaves the target empty, with its
 * triggers, constraints and indexes. */
static void test_all_or_nothing(pg_cluster *pgc, const char *src)
{
    char uri[512], err[1024];
    CHECK_INT(pg_cluster_create_db(pgc, "halfway", uri, sizeof uri), 0);
    lp_conn *c = NULL;
    int64_t v;
    CHECK_INT(lp_sql_pg_open(uri, &c, err, sizeof err), LP_OK);
    CHECK_INT(lp_pg_migrate(c, &v, err, sizeof err), LP_OK);
    CHECK_INT(lp_conn_exec(c, "ALTER TABLE model_privacy ADD CONSTRAINT few CHECK (labels < 10)"),
              LP_SQL_DONE);
    lp_conn_close(c);
    PGconn *pg = PQconnectdb(uri);
    char *fk_before = pg_text(pg, SCHEMA_OBJECTS);
    long trig_before = pg_long(pg, TRIGGERS_ENABLED);
    lp_migrate_report rep;
    CHECK_INT(lp_migrate_to_pg(src, uri, &rep, NULL, NULL, err, sizeof err), LP_ESTORAGE);
    CHECK(strstr(err, "model_privacy") != NULL);
    CHECK(rep.tables > 5); /* it failed after copying several tables */
    CHECK_INT(target_rows(pg), 0);
    CHECK_INT(pg_long(pg, "SELECT count(*) FROM campaigns"), 1);
    CHECK_INT(pg_long(pg, TRIGGERS_ENABLED), trig_before);
    char *fk_after = pg_text(pg, SCHEMA_OBJECTS);
    CHECK_STR(fk_after, fk_before);
    free(fk_before);
    free(fk_after);
    /* without the constraint the same target takes the copy */
    PQclear(PQexec(pg, "ALTER TABLE model_privacy DROP CONSTRAINT few"));
    CHECK_INT(lp_migrate_to_pg(src, uri, &rep, NULL, NULL, err, sizeof err), LP_OK);
    CHECK_INT(pg_long(pg, "SELECT count(*) FROM labels"), LABELS);
    PQfinish(pg);
}

/* A copy of src changed by sql, in the temporary directory. */
static void altered_copy(const char *src, const char *name, const char *sql, char *out,
                         size_t outlen)
{
    snprintf(out, outlen, "%s/%s", dir, name);
    char cmd[1024];
    snprintf(cmd, sizeof cmd, "cp '%s' '%s'", src, out);
    CHECK_INT(system(cmd), 0);
    sqlite3 *db;
    CHECK_INT(sqlite3_open(out, &db), SQLITE_OK);
    CHECK_INT(sqlite3_exec(db, sql, NULL, NULL, NULL), SQLITE_OK);
    sqlite3_close(db);
}

static void test_refusals(pg_cluster *pgc, const char *src)
{
    char uri[512], err[1024], path[400];
    lp_migrate_report rep;
    CHECK_INT(pg_cluster_create_db(pgc, "refusals", uri, sizeof uri), 0);
    PGconn *pg = PQconnectdb(uri);

    altered_copy(src, "old.db", "PRAGMA user_version = 14", path, sizeof path);
    CHECK_INT(lp_migrate_to_pg(path, uri, &rep, NULL, NULL, err, sizeof err), LP_ESTORAGE);
    CHECK(strstr(err, "schema version 14") != NULL);

    altered_copy(src, "extra.db", "CREATE TABLE extra (x INTEGER); INSERT INTO extra VALUES (1)",
                 path, sizeof path);
    CHECK_INT(lp_migrate_to_pg(path, uri, &rep, NULL, NULL, err, sizeof err), LP_ESTORAGE);
    CHECK(strstr(err, "table extra of the source has no twin") != NULL);
    CHECK_INT(target_rows(pg), 0);

    altered_copy(src, "lacking.db", "DROP TABLE model_privacy", path, sizeof path);
    CHECK_INT(lp_migrate_to_pg(path, uri, &rep, NULL, NULL, err, sizeof err), LP_ESTORAGE);
    CHECK(strstr(err, "model_privacy") != NULL);
    CHECK_INT(target_rows(pg), 0);

    altered_copy(src, "typed.db", "UPDATE tasks SET created_ms = 'soon' WHERE id = 100", path,
                 sizeof path);
    CHECK_INT(lp_migrate_to_pg(path, uri, &rep, NULL, NULL, err, sizeof err), LP_ESTORAGE);
    CHECK(strstr(err, "table tasks: 1 rows of the source hold a value whose type") != NULL);
    CHECK_INT(target_rows(pg), 0);

    snprintf(path, sizeof path, "%s/missing.db", dir);
    CHECK_INT(lp_migrate_to_pg(path, uri, &rep, NULL, NULL, err, sizeof err), LP_ESTORAGE);
    CHECK(strstr(err, "missing.db") != NULL);

    /* the untouched target still takes the copy */
    CHECK_INT(lp_migrate_to_pg(src, uri, &rep, NULL, NULL, err, sizeof err), LP_OK);
    PQfinish(pg);
}

/* Every table of two PostgreSQL databases, equal as text, row by row in
 * the order of all their columns; 1 when equal. */
static int same_databases(PGconn *a, PGconn *b)
{
    PGresult *tables = PQexec(a, "SELECT relname FROM pg_class WHERE relkind = 'r' AND "
                                 "relnamespace = 'public'::regnamespace ORDER BY 1");
    int ok = PQresultStatus(tables) == PGRES_TUPLES_OK && PQntuples(tables) > 20;
    for (int i = 0; ok && i < PQntuples(tables); i++) {
        char sql[256];
        snprintf(sql, sizeof sql,
                 "SELECT string_agg(ordinal_position::text, ', ') FROM information_schema.columns "
                 "WHERE table_name = '%s'",
                 PQgetvalue(tables, i, 0));
        PGresult *cols = PQexec(a, sql);
        snprintf(sql, sizeof sql, "SELECT * FROM %s ORDER BY %s", PQgetvalue(tables, i, 0),
                 PQgetvalue(cols, 0, 0));
        PQclear(cols);
        PGresult *ra = PQexec(a, sql), *rb = PQexec(b, sql);
        ok = PQresultStatus(ra) == PGRES_TUPLES_OK && PQresultStatus(rb) == PGRES_TUPLES_OK &&
             PQntuples(ra) == PQntuples(rb) && PQnfields(ra) == PQnfields(rb);
        for (int r = 0; ok && r < PQntuples(ra); r++)
            for (int c = 0; ok && c < PQnfields(ra); c++)
                ok = PQgetisnull(ra, r, c) == PQgetisnull(rb, r, c) &&
                     strcmp(PQgetvalue(ra, r, c), PQgetvalue(rb, r, c)) == 0;
        if (!ok)
            fprintf(stderr, "table %s differs\n", PQgetvalue(tables, i, 0));
        PQclear(ra);
        PQclear(rb);
    }
    PQclear(tables);
    return ok;
}

/* docs/postgresql.md "Back up" and "Restore": pg_dump of the migrated
 * database, pg_restore into a new one: the same rows, sequences, triggers
 * constraints and indexes, and the server's engine opens it without migrating. */
static void test_backup_restore(pg_cluster *pgc, const char *uri)
{
    char restored_uri[512], cmd[2048], dump[400];
    CHECK_INT(pg_cluster_create_db(pgc, "restored", restored_uri, sizeof restored_uri), 0);
    snprintf(dump, sizeof dump, "%s/ldpref.dump", dir);
    snprintf(cmd, sizeof cmd, "'%s/pg_dump' --format=custom --file='%s' '%s'", pgc->bin, dump, uri);
    CHECK_INT(system(cmd), 0);
    snprintf(cmd, sizeof cmd,
             "'%s/pg_restore' --exit-on-error --single-transaction --no-owner --dbname='%s' '%s'",
             pgc->bin, restored_uri, dump);
    CHECK_INT(system(cmd), 0);
    PGconn *a = PQconnectdb(uri), *b = PQconnectdb(restored_uri);
    CHECK(same_databases(a, b));
    CHECK_INT(pg_long(b, "SELECT count(*) FROM labels"), LABELS);
    CHECK_INT(pg_long(b, TRIGGERS_ENABLED), pg_long(a, TRIGGERS_ENABLED));
    char *fk_a = pg_text(a, SCHEMA_OBJECTS), *fk_b = pg_text(b, SCHEMA_OBJECTS);
    CHECK_STR(fk_b, fk_a);
    free(fk_a);
    free(fk_b);
    CHECK_INT(pg_long(b, "SELECT nextval(pg_get_serial_sequence('labels', 'id'))"),
              pg_long(a, "SELECT nextval(pg_get_serial_sequence('labels', 'id'))"));
    /* the engine opens it as it is: nothing to migrate */
    long versions = pg_long(b, "SELECT count(*) FROM schema_version");
    lp_store_opts o = {.path = restored_uri, .sync_full = 1, .read_conns = 1};
    lp_store *s = NULL;
    char err[256];
    CHECK_INT(lp_store_open(&o, &s, err, sizeof err), LP_OK);
    lp_store_close(s);
    CHECK_INT(pg_long(b, "SELECT count(*) FROM schema_version"), versions);
    PQfinish(a);
    PQfinish(b);
}

int main(void)
{
    pg_cluster pgc;
    if (tmpdir_create(dir, sizeof dir, "test-migrate") != 0)
        return 1;
    if (pg_cluster_start_for(&pgc, "test_migrate")) {
        char src[300];
        snprintf(src, sizeof src, "%s/source.db", dir);
        make_source(src);
        char uri[512];
        test_copy(&pgc, src, uri, sizeof uri);
        test_backup_restore(&pgc, uri);
        test_all_or_nothing(&pgc, src);
        test_refusals(&pgc, src);
        pg_cluster_stop(&pgc);
    }
    tmpdir_remove(dir);
    return check_summary();
}
