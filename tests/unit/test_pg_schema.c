/*
 * test_pg_schema.c — schema/postgresql/ on a real PostgreSQL (tests/support/
 * pg.h) against the SQLite schema the server's own migrations create.
 *
 * The server's migration of a PostgreSQL database (schema_pg.h: the
 * embedded schema/postgresql/ files) brings a fresh database to its
 * version (schema_version), which says how many SQLite migrations to apply
 * to a fresh SQLite file. Then: the same tables, the same columns in the same
 * order with matching types, nullability, defaults and primary keys; every
 * SQLite uniqueness also in PostgreSQL, plus the ones several servers rely
 * on; the same counters after the same writes (the triggers); the refusals
 * of the append-only triggers as constraint failures (SQLSTATE class 23);
 * the campaign-completion notification, delivered on commit only; races
 * between connections, as between servers (a token taken once, a second
 * label for one (annotator, task) refused after waiting on the first, a
 * budget spent by conditional increments from four connections to exactly
 * its limit); and the migration itself: three servers at once apply each file once, again
 * is a no-op, a newer database is refused and left alone.
 */
#include "check.h"
#include "error.h"
#include "pg.h"
#include "schema_pg.h"
#include "schema_sql.h"
#include "sql_pg.h"
#include "tmpdir.h"

#include <libpq-fe.h>
#include <math.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* ---- helpers ---- */

static int pg_ok(PGconn *pg, const char *sql)
{
    PGresult *r = PQexec(pg, sql);
    int st = PQresultStatus(r);
    int ok = st == PGRES_COMMAND_OK || st == PGRES_TUPLES_OK;
    if (!ok)
        fprintf(stderr, "pg: %.120s: %s", sql, PQerrorMessage(pg));
    PQclear(r);
    return ok;
}

/* The SQLSTATE of sql's failure ("" when it succeeded). */
static void pg_sqlstate(PGconn *pg, const char *sql, char *out, size_t outlen)
{
    PGresult *r = PQexec(pg, sql);
    const char *s = PQresultErrorField(r, PG_DIAG_SQLSTATE);
    snprintf(out, outlen, "%s", s ? s : "");
    PQclear(r);
}

/* Rows of a query as text, "a|b|c\n" per row; malloc'd. */
static char *pg_rows(PGconn *pg, const char *sql)
{
    PGresult *r = PQexec(pg, sql);
    size_t cap = 256, len = 0;
    char *out = calloc(1, cap);
    if (PQresultStatus(r) != PGRES_TUPLES_OK)
        fprintf(stderr, "pg: %s: %s", sql, PQerrorMessage(pg));
    for (int i = 0; PQresultStatus(r) == PGRES_TUPLES_OK && i < PQntuples(r); i++)
        for (int j = 0; j < PQnfields(r); j++) {
            const char *v = PQgetisnull(r, i, j) ? "NULL" : PQgetvalue(r, i, j);
            size_t need = len + strlen(v) + 2;
            if (need >= cap) {
                cap = need * 2;
                out = realloc(out, cap);
            }
            len += (size_t)sprintf(out + len, "%s%c", v, j + 1 < PQnfields(r) ? '|' : '\n');
        }
    PQclear(r);
    return out;
}

static char *sqlite_rows(sqlite3 *db, const char *sql)
{
    sqlite3_stmt *st = NULL;
    size_t cap = 256, len = 0;
    char *out = calloc(1, cap);
    if (sqlite3_prepare_v2(db, sql, -1, &st, NULL) != SQLITE_OK)
        fprintf(stderr, "sqlite: %s: %s\n", sql, sqlite3_errmsg(db));
    while (st != NULL && sqlite3_step(st) == SQLITE_ROW)
        for (int j = 0; j < sqlite3_column_count(st); j++) {
            const char *v = sqlite3_column_type(st, j) == SQLITE_NULL
                                ? "NULL"
                                : (const char *)sqlite3_column_text(st, j);
            size_t need = len + strlen(v) + 2;
            if (need >= cap) {
                cap = need * 2;
                out = realloc(out, cap);
            }
            len += (size_t)sprintf(out + len, "%s%c", v,
                                   j + 1 < sqlite3_column_count(st) ? '|' : '\n');
        }
    sqlite3_finalize(st);
    return out;
}

/* Checks two row dumps equal, cell by cell; numbers compare as numbers
 * (SQLite prints 1.0 where PostgreSQL prints 1). */
static void check_same_rows(const char *what, const char *a, const char *b)
{
    int same = 1;
    while (same && *a && *b) {
        size_t na = strcspn(a, "|\n"), nb = strcspn(b, "|\n");
        char *ea, *eb;
        double da = strtod(a, &ea), db = strtod(b, &eb);
        if (ea == a + na && eb == b + nb && na > 0 && nb > 0)
            same = da == db;
        else
            same = na == nb && memcmp(a, b, na) == 0;
        same = same && a[na] == b[nb];
        a += na + (a[na] != 0);
        b += nb + (b[nb] != 0);
    }
    same = same && *a == 0 && *b == 0;
    check_record(same, __FILE__, __LINE__, "%s: the same rows in SQLite and PostgreSQL", what);
}

/* ---- applying the schemas ---- */

/* The embedded files (schema/postgresql/), counted. */
static int64_t schema_files(void)
{
    int64_t n = 0;
    while (lp_pg_schema_files[n].name != NULL)
        n++;
    return n;
}

struct migration {
    const char *uri;
    int rc;
    int64_t version;
    char err[256];
};

/* One server's start: its own connection, lp_pg_migrate. */
static void *migrate_thread(void *arg)
{
    struct migration *m = arg;
    lp_conn *c = NULL;
    m->rc = lp_sql_pg_open(m->uri, &c, m->err, sizeof m->err);
    if (m->rc == LP_OK)
        m->rc = lp_pg_migrate(c, &m->version, m->err, sizeof m->err);
    lp_conn_close(c);
    return NULL;
}

/* Migrations: several servers at once apply each file once; again is a
 * no-op; a database newer than the files is refused and left alone. */
static void test_migrate(pg_cluster *pgc)
{
    char uri[512];
    CHECK_INT(pg_cluster_create_db(pgc, "migrate_test", uri, sizeof uri), 0);
    struct migration m[3];
    pthread_t t[3];
    for (int k = 0; k < 3; k++) {
        m[k] = (struct migration){.uri = uri};
        CHECK_INT(pthread_create(&t[k], NULL, migrate_thread, &m[k]), 0);
    }
    for (int k = 0; k < 3; k++) {
        pthread_join(t[k], NULL);
        check_record(m[k].rc == LP_OK, __FILE__, __LINE__, "migration %d: %s", k, m[k].err);
        CHECK_INT(m[k].version, lp_pg_schema_newest());
    }
    PGconn *pg = PQconnectdb(uri);
    char *rows = pg_rows(pg, "SELECT count(*), max(version) FROM schema_version");
    char want[64];
    snprintf(want, sizeof want, "%lld|%lld\n", (long long)schema_files(),
             (long long)lp_pg_schema_newest());
    CHECK_STR(rows, want);
    free(rows);

    struct migration again = {.uri = uri};
    migrate_thread(&again);
    CHECK_INT(again.rc, LP_OK);
    CHECK_INT(again.version, lp_pg_schema_newest());

    CHECK(pg_ok(pg, "INSERT INTO schema_version (version) VALUES (9999)"));
    struct migration newer = {.uri = uri};
    migrate_thread(&newer);
    CHECK_INT(newer.rc, LP_ESTORAGE);
    CHECK(strstr(newer.err, "newer than this server") != NULL);
    rows = pg_rows(pg, "SELECT count(*) FROM schema_version");
    snprintf(want, sizeof want, "%lld\n", (long long)schema_files() + 1);
    CHECK_STR(rows, want);
    free(rows);
    PQfinish(pg);
}

static int apply_sqlite_migrations(sqlite3 *db, int version)
{
    for (int v = 0; v < version && v < LP_MIGRATION_COUNT; v++) {
        char *err = NULL;
        if (sqlite3_exec(db, LP_MIGRATIONS[v], NULL, NULL, &err) != SQLITE_OK) {
            fprintf(stderr, "migration %d: %s\n", v + 1, err ? err : "?");
            sqlite3_free(err);
            return -1;
        }
    }
    return 0;
}

/* ---- tables and columns ---- */

/* ---- races between servers: what the constraints decide ---- */

struct racer {
    lp_conn *c;
    const char *sql;
    int64_t a, b;
    double d, budget;
    int tries;
    int rc;          /* the last step's result */
    int64_t changed; /* rows changed, added over the tries */
};

/* Runs sql (?1 = a, ?2 = b or d, ?3 = budget) tries times, autocommit. */
static void *race(void *arg)
{
    struct racer *r = arg;
    lp_stmt *st = lp_stmt_prepare(r->c, r->sql);
    for (int k = 0; st != NULL && k < r->tries; k++) {
        lp_stmt_reset(st);
        lp_stmt_bind_int64(st, 1, r->a);
        if (r->budget > 0) {
            lp_stmt_bind_double(st, 2, r->d);
            lp_stmt_bind_double(st, 3, r->budget);
        } else {
            lp_stmt_bind_int64(st, 2, r->b);
        }
        r->rc = lp_stmt_step(st);
        if (r->rc == LP_SQL_DONE)
            r->changed += lp_conn_changes(r->c);
    }
    lp_stmt_finalize(st);
    return NULL;
}

/* Waits (10 s at most) until a session of the database waits on a lock;
 * 1 when one does. */
static int wait_blocked(lp_conn *c)
{
    lp_stmt *st = lp_stmt_prepare(c, "SELECT count(*) FROM pg_stat_activity WHERE "
                                     "wait_event_type = 'Lock' AND datname = current_database()");
    int blocked = 0;
    for (int waited_ms = 0; st != NULL && waited_ms < 10000 && !blocked; waited_ms += 10) {
        lp_stmt_reset(st);
        blocked = lp_stmt_step(st) == LP_SQL_ROW && lp_stmt_column_int64(st, 0) > 0;
        if (!blocked)
            poll(NULL, 0, 10);
    }
    lp_stmt_finalize(st);
    return blocked;
}

/* Several connections (as several servers would) racing for one token, one
 * (annotator, task) label and one budget: the database decides, once. */
static void test_races(const char *uri)
{
    enum { RACERS = 4 };
    lp_conn *c[RACERS] = {0};
    char err[256];
    for (int k = 0; k < RACERS; k++)
        CHECK_INT(lp_sql_pg_open(uri, &c[k], err, sizeof err), LP_OK);
    if (c[RACERS - 1] == NULL)
        return;

    /* an enrollment token: used by the first, the others change nothing,
     * also while the first one's transaction is still open */
    CHECK_INT(lp_conn_exec(c[0], "INSERT INTO enrollment_tokens (hash, campaign, created_ms) "
                                 "VALUES (decode(repeat('7a', 32), 'hex'), 2, 1)"),
              LP_SQL_DONE);
    CHECK_INT(lp_conn_exec(c[0], "BEGIN"), LP_SQL_DONE);
    CHECK_INT(lp_conn_exec(c[0], "UPDATE enrollment_tokens SET used_by = 2 WHERE hash = "
                                 "decode(repeat('7a', 32), 'hex') AND used_by IS NULL"),
              LP_SQL_DONE);
    CHECK_INT(lp_conn_changes(c[0]), 1);
    struct racer tok = {.c = c[1],
                        .sql = "UPDATE enrollment_tokens SET used_by = ?2 WHERE "
                               "hash = decode(repeat('7a', 32), 'hex') AND used_by IS NULL "
                               "AND ?1 > 0",
                        .a = 1,
                        .b = 3,
                        .tries = 1};
    pthread_t t;
    CHECK_INT(pthread_create(&t, NULL, race, &tok), 0);
    CHECK(wait_blocked(c[2])); /* the racer waits on the row */
    CHECK_INT(lp_conn_exec(c[0], "COMMIT"), LP_SQL_DONE);
    pthread_join(t, NULL);
    CHECK_INT(tok.rc, LP_SQL_DONE);
    CHECK_INT(tok.changed, 0);

    /* one label per (annotator, task): the second waits, then is refused */
    CHECK_INT(lp_conn_exec(c[0], "BEGIN"), LP_SQL_DONE);
    CHECK_INT(lp_conn_exec(c[0], "INSERT INTO labels (annotator, task, z, z_task, nonce, "
                                 "timestamp_ms, signature, received_ms) VALUES (2, 2, 1, 1, "
                                 "decode(repeat('c1', 16), 'hex'), 1, "
                                 "decode(repeat('00', 64), 'hex'), 1)"),
              LP_SQL_DONE);
    struct racer dup = {.c = c[1],
                        .sql = "INSERT INTO labels (annotator, task, z, z_task, nonce, "
                               "timestamp_ms, signature, received_ms) VALUES (?1, ?2, 0, 0, "
                               "decode(repeat('c2', 16), 'hex'), 1, "
                               "decode(repeat('00', 64), 'hex'), 1)",
                        .a = 2,
                        .b = 2,
                        .tries = 1};
    CHECK_INT(pthread_create(&t, NULL, race, &dup), 0);
    CHECK(wait_blocked(c[2])); /* on the first one's uncommitted key */
    CHECK_INT(lp_conn_exec(c[0], "COMMIT"), LP_SQL_DONE);
    pthread_join(t, NULL);
    CHECK_INT(dup.rc, LP_SQL_UNIQUE);

    /* a budget spent by conditional increments from four connections at
     * once: exactly as many spends as fit, never more */
    struct racer spend[RACERS];
    pthread_t ts[RACERS];
    for (int k = 0; k < RACERS; k++) {
        spend[k] = (struct racer){.c = c[k],
                                  .sql = "UPDATE annotators SET epsilon_spent = epsilon_spent + ?2 "
                                         "WHERE id = ?1 AND epsilon_spent + ?2 <= ?3",
                                  .a = 3,
                                  .d = 0.25,
                                  .budget = 5.0,
                                  .tries = 15};
        CHECK_INT(pthread_create(&ts[k], NULL, race, &spend[k]), 0);
    }
    int64_t spent = 0;
    for (int k = 0; k < RACERS; k++) {
        pthread_join(ts[k], NULL);
        CHECK_INT(spend[k].rc, LP_SQL_DONE);
        spent += spend[k].changed;
    }
    CHECK_INT(spent, 20); /* 5.0 / 0.25 of 60 tries */
    lp_stmt *st = lp_stmt_prepare(c[0], "SELECT epsilon_spent FROM annotators WHERE id = 3");
    CHECK(st != NULL && lp_stmt_step(st) == LP_SQL_ROW);
    CHECK(st != NULL && lp_stmt_column_double(st, 0) == 5.0);
    lp_stmt_finalize(st);
    for (int k = 0; k < RACERS; k++)
        lp_conn_close(c[k]);
}

/* SQLite's declared type as PostgreSQL's information_schema names it. */
static const char *pg_type_of(const char *sqlite_type)
{
    if (strcmp(sqlite_type, "INTEGER") == 0)
        return "bigint";
    if (strcmp(sqlite_type, "REAL") == 0)
        return "double precision";
    if (strcmp(sqlite_type, "TEXT") == 0)
        return "text";
    if (strcmp(sqlite_type, "BLOB") == 0)
        return "bytea";
    return "?";
}

/* One line per column: name type null|notnull default pk-position. */
static char *sqlite_columns(sqlite3 *db, const char *table)
{
    char sql[256];
    snprintf(sql, sizeof sql,
             "SELECT name, type, \"notnull\" OR pk > 0, coalesce(dflt_value, ''), pk "
             "FROM pragma_table_info('%s') ORDER BY cid",
             table);
    sqlite3_stmt *st = NULL;
    sqlite3_prepare_v2(db, sql, -1, &st, NULL);
    size_t cap = 4096, len = 0;
    char *out = calloc(1, cap);
    while (st != NULL && sqlite3_step(st) == SQLITE_ROW && len + 512 < cap)
        len += (size_t)snprintf(out + len, cap - len, "%s %s %s [%s] pk%d\n",
                                sqlite3_column_text(st, 0),
                                pg_type_of((const char *)sqlite3_column_text(st, 1)),
                                sqlite3_column_int(st, 2) ? "notnull" : "null",
                                sqlite3_column_text(st, 3), sqlite3_column_int(st, 4));
    sqlite3_finalize(st);
    return out;
}

static char *pg_columns(PGconn *pg, const char *table)
{
    const char *params[1] = {table};
    PGresult *r = PQexecParams(
        pg,
        "SELECT c.column_name, c.data_type, c.is_nullable = 'NO', "
        "       coalesce(replace(c.column_default, '::text', ''), ''), "
        "       coalesce((SELECT k.ordinal_position FROM information_schema.key_column_usage k "
        "                 JOIN information_schema.table_constraints t "
        "                   ON t.constraint_name = k.constraint_name "
        "                  AND t.table_name = k.table_name "
        "                WHERE t.constraint_type = 'PRIMARY KEY' AND k.table_name = c.table_name "
        "                  AND k.column_name = c.column_name AND k.table_schema = 'public'), 0) "
        "FROM information_schema.columns c "
        "WHERE c.table_schema = 'public' AND c.table_name = $1 ORDER BY c.ordinal_position",
        1, NULL, params, NULL, NULL, 0);
    size_t cap = 4096, len = 0;
    char *out = calloc(1, cap);
    if (PQresultStatus(r) != PGRES_TUPLES_OK)
        fprintf(stderr, "pg columns: %s", PQerrorMessage(pg));
    for (int i = 0; PQresultStatus(r) == PGRES_TUPLES_OK && i < PQntuples(r) && len + 512 < cap;
         i++)
        len += (size_t)snprintf(out + len, cap - len, "%s %s %s [%s] pk%s\n", PQgetvalue(r, i, 0),
                                PQgetvalue(r, i, 1),
                                strcmp(PQgetvalue(r, i, 2), "t") == 0 ? "notnull" : "null",
                                PQgetvalue(r, i, 3), PQgetvalue(r, i, 4));
    PQclear(r);
    return out;
}

/* ---- uniqueness ---- */

/* Each unique column set of the SQLite schema as "table(a,b)" lines. */
static char *sqlite_uniques(sqlite3 *db)
{
    return sqlite_rows(
        db, "SELECT m.name || '(' || (SELECT group_concat(name, ',') FROM "
            "  (SELECT ii.name FROM pragma_index_info(il.name) ii ORDER BY ii.seqno)) || ')' "
            "FROM sqlite_master m, pragma_index_list(m.name) il "
            "WHERE m.type = 'table' AND il.\"unique\" = 1 "
            "UNION SELECT m.name || '(' || (SELECT group_concat(name, ',') FROM "
            "  (SELECT p.name FROM pragma_table_info(m.name) p WHERE p.pk > 0 ORDER BY p.pk)) "
            "  || ')' FROM sqlite_master m WHERE m.type = 'table' "
            "  AND EXISTS (SELECT 1 FROM pragma_table_info(m.name) p WHERE p.pk > 0) "
            "ORDER BY 1");
}

static char *pg_uniques(PGconn *pg)
{
    return pg_rows(pg, "SELECT t.relname || '(' || "
                       "  (SELECT string_agg(a.attname, ',' ORDER BY k.n) "
                       "     FROM unnest(i.indkey) WITH ORDINALITY k(attnum, n) "
                       "     JOIN pg_attribute a ON a.attrelid = t.oid AND a.attnum = k.attnum) "
                       "  || ')' "
                       "FROM pg_index i JOIN pg_class t ON t.oid = i.indrelid "
                       "JOIN pg_namespace s ON s.oid = t.relnamespace "
                       "WHERE i.indisunique AND s.nspname = 'public' ORDER BY 1");
}

static int has_line(const char *text, const char *line)
{
    size_t n = strlen(line);
    for (const char *p = text; (p = strstr(p, line)) != NULL; p++)
        if ((p == text || p[-1] == '\n') && (p[n] == '\n' || p[n] == 0))
            return 1;
    return 0;
}

/* ---- the same writes on both ---- */

/* Writes valid in both dialects once blobs are spelled: B(x) is a blob of
 * byte x repeated (32 or 16 or 64 times by the width letter). */
static const char *const SCENARIO[] = {
    "INSERT INTO campaigns (name, epsilon_min, epsilon_max, epsilon_budget, epsilon_default, "
    "created_ms, labels_per_task) VALUES ('two', 0.5, 2, 10, 1, 5, 2)",
    "INSERT INTO tasks (campaign, source_id, prompt, response0, response1, created_ms) "
    "VALUES (2, 't1', 'p', 'a', 'b', 10), (2, 't2', 'p', 'a', 'b', 11), "
    "(1, 'd1', 'p', 'a', 'b', 12)",
    /* since 016 the upload, not a trigger, adds its tasks to the count */
    "UPDATE campaign_fill SET tasks = tasks + 2 WHERE campaign = 2",
    "UPDATE campaign_fill SET tasks = tasks + 1 WHERE campaign = 1",
    "INSERT INTO annotators (public_key, pseudonym, campaign, epsilon_spent, enrolled_ms) "
    "VALUES (K32(01), 'ann-1', 2, 0.25, 20), (K32(02), 'ann-2', 2, 0, 21), "
    "(K32(03), 'ann-3', 1, 0, 22)",
    "INSERT INTO assignments (annotator, task, swapped, created_ms, leased_ms) "
    "VALUES (1, 1, 0, 30, 30), (2, 1, 1, 31, 31), (1, 2, 0, 32, 32), (3, 3, 0, 33, 33)",
    "UPDATE assignments SET skipped = 1 WHERE annotator = 1 AND task = 2",
    "UPDATE annotators SET epsilon_spent = epsilon_spent + 1.5 WHERE id IN (1, 2)",
    "INSERT INTO labels (annotator, task, z, z_task, epsilon, nonce, timestamp_ms, signature, "
    "received_ms) VALUES (1, 1, 1, 1, 0.5, K16(a1), 40, K64(00), 60000), "
    "(2, 1, 0, 1, NULL, K16(a2), 41, K64(00), 119999), "
    "(3, 3, 1, 0, 1.5, K16(a3), 42, K64(00), 120000)",
    /* since 015 the label writer, not a trigger, writes the labels'
     * counters once per commit: these are its writes for the three labels */
    "UPDATE task_fill SET labels = labels + 1 WHERE task IN (1, 3)",
    "UPDATE task_fill SET labels = labels + 1 WHERE task = 1",
    "UPDATE annotator_fill SET labels = labels + 1, last_label_ms = 60000 WHERE annotator = 1",
    "UPDATE annotator_fill SET labels = labels + 1, last_label_ms = 119999 WHERE annotator = 2",
    "UPDATE annotator_fill SET labels = labels + 1, last_label_ms = 120000 WHERE annotator = 3",
    "INSERT INTO label_minutes (campaign, minute, labels) VALUES (2, 1, 2), (1, 2, 1)",
    "UPDATE campaign_fill SET labels = labels + 2, tasks_complete = tasks_complete + 1, "
    "epsilon_spent = epsilon_spent + 3 WHERE campaign = 2",
    "UPDATE campaign_fill SET labels = labels + 1, tasks_complete = tasks_complete + 1 "
    "WHERE campaign = 1",
};

/* The scenario's SQL for one dialect: K<width>(xx) becomes X'xx...'
 * (SQLite) or '\xxx...'::bytea (PostgreSQL). */
static char *spell(const char *sql, int pg)
{
    size_t cap = strlen(sql) * 4 + 1024, len = 0;
    char *out = malloc(cap);
    for (const char *p = sql; *p;) {
        int width;
        char byte[3];
        if (sscanf(p, "K%d(%2[0-9a-f])", &width, byte) == 2) {
            len += (size_t)sprintf(out + len, pg ? "'\\x" : "X'");
            for (int i = 0; i < width; i++)
                len += (size_t)sprintf(out + len, "%s", byte);
            len += (size_t)sprintf(out + len, pg ? "'::bytea" : "'");
            p = strchr(p, ')') + 1;
        } else {
            out[len++] = *p++;
        }
    }
    out[len] = 0;
    return out;
}

static const char *const COUNTERS[] = {
    "SELECT * FROM campaign_fill ORDER BY campaign",
    "SELECT * FROM task_fill ORDER BY task",
    "SELECT * FROM annotator_fill ORDER BY annotator",
    "SELECT * FROM label_minutes ORDER BY campaign, minute",
    "SELECT * FROM campaigns ORDER BY id",
};

int main(void)
{
    pg_cluster pgc;
    if (!pg_cluster_start_for(&pgc, "test_pg_schema"))
        return check_summary();
    char uri[512];
    CHECK_INT(pg_cluster_create_db(&pgc, "schema_test", uri, sizeof uri), 0);
    PGconn *pg = PQconnectdb(uri);
    CHECK_INT(PQstatus(pg), CONNECTION_OK);
    pg_ok(pg, "SET client_min_messages = warning");

    lp_conn *conn = NULL;
    char err[256];
    int64_t migrated = 0;
    CHECK_INT(lp_sql_pg_open(uri, &conn, err, sizeof err), LP_OK);
    int rc = conn ? lp_pg_migrate(conn, &migrated, err, sizeof err) : LP_ESTORAGE;
    check_record(rc == LP_OK, __FILE__, __LINE__, "migrate: %s", err);
    lp_conn_close(conn);
    CHECK(schema_files() >= 1);
    CHECK_STR(lp_pg_schema_files[0].name, "014_init.sql");
    char *vtext = pg_rows(pg, "SELECT max(version) FROM schema_version");
    int version = atoi(vtext);
    free(vtext);
    CHECK_INT(version, migrated);
    CHECK(version >= 14 && version <= LP_MIGRATION_COUNT);
    if (version < LP_MIGRATION_COUNT)
        printf("note: SQLite has %d migrations, schema/postgresql/ reaches %d\n",
               LP_MIGRATION_COUNT, version);
    /* applying again is refused: the version row exists */
    char state[8];
    pg_sqlstate(pg, "INSERT INTO schema_version (version) VALUES (14)", state, sizeof state);
    CHECK_STR(state, "23505");

    char dir[256];
    CHECK_INT(tmpdir_create(dir, sizeof dir, "pgschema"), 0);
    char path[300];
    snprintf(path, sizeof path, "%s/sqlite.db", dir);
    sqlite3 *db = NULL;
    CHECK_INT(sqlite3_open(path, &db), SQLITE_OK);
    CHECK_INT(apply_sqlite_migrations(db, version), 0);

    /* tables */
    char *lite_tables = sqlite_rows(db, "SELECT name FROM sqlite_master WHERE type = 'table' "
                                        "AND name NOT LIKE 'sqlite_%' ORDER BY name");
    char *pg_tables = pg_rows(pg, "SELECT table_name::text FROM information_schema.tables "
                                  "WHERE table_schema = 'public' AND table_name <> "
                                  "'schema_version' ORDER BY 1");
    CHECK_STR(pg_tables, lite_tables);
    CHECK(strstr(lite_tables, "labels\n") != NULL);

    /* columns, table by table */
    for (char *t = lite_tables, *nl; *t; t = nl + 1) {
        nl = strchr(t, '\n');
        *nl = 0;
        char *a = sqlite_columns(db, t), *b = pg_columns(pg, t);
        check_record(strcmp(a, b) == 0, __FILE__, __LINE__,
                     "columns of %s:\nSQLite:\n%sPostgreSQL:\n%s", t, a, b);
        free(a);
        free(b);
        *nl = '\n';
    }

    /* uniqueness: SQLite's, and those several servers rely on */
    char *lite_u = sqlite_uniques(db), *pg_u = pg_uniques(pg);
    for (char *u = lite_u, *nl; *u; u = nl + 1) {
        nl = strchr(u, '\n');
        *nl = 0;
        check_record(has_line(pg_u, u), __FILE__, __LINE__, "unique %s in PostgreSQL", u);
        *nl = '\n';
    }
    CHECK(has_line(lite_u, "labels(annotator,task)"));
    const char *required[] = {
        "labels(annotator,task)",     "labels(annotator,nonce)",        "enrollment_tokens(hash)",
        "enrollment_tokens(used_by)", "annotators(public_key)",         "annotators(pseudonym)",
        "operator_tokens(hash)",      "assignments(annotator,task)",    "campaigns(name)",
        "tasks(campaign,source_id)",  "label_minutes(campaign,minute)", "model_privacy(model)",
        "schema_version(version)"};
    for (size_t i = 0; i < sizeof required / sizeof required[0]; i++)
        check_record(has_line(pg_u, required[i]), __FILE__, __LINE__, "unique %s", required[i]);
    free(lite_u);
    free(pg_u);

    /* the triggers: the same writes give the same counters */
    PGconn *listener = PQconnectdb(uri);
    CHECK(pg_ok(listener, "LISTEN ldpref_campaign_complete"));
    CHECK(pg_ok(pg, "BEGIN"));
    for (size_t i = 0; i < sizeof SCENARIO / sizeof SCENARIO[0]; i++) {
        char *a = spell(SCENARIO[i], 0), *b = spell(SCENARIO[i], 1);
        char *lite_err = NULL;
        check_record(sqlite3_exec(db, a, NULL, NULL, &lite_err) == SQLITE_OK, __FILE__, __LINE__,
                     "sqlite: %s: %s", a, lite_err ? lite_err : "");
        sqlite3_free(lite_err);
        check_record(pg_ok(pg, b), __FILE__, __LINE__, "pg: %s", b);
        free(a);
        free(b);
    }
    /* campaign 1 (one task, one label per task) is complete: not yet told */
    PQconsumeInput(listener);
    PGnotify *early = PQnotifies(listener);
    CHECK(early == NULL);
    PQfreemem(early);
    CHECK(pg_ok(pg, "COMMIT"));
    PGnotify *note = NULL;
    for (int waited_ms = 0; waited_ms < 10000 && note == NULL; waited_ms += 10) {
        PQconsumeInput(listener);
        note = PQnotifies(listener);
        if (note == NULL) {
            struct pollfd in = {.fd = PQsocket(listener), .events = POLLIN};
            poll(&in, 1, 10);
        }
    }
    CHECK(note != NULL);
    if (note != NULL) {
        CHECK_STR(note->relname, "ldpref_campaign_complete");
        CHECK(strstr(note->extra, "\"name\" : \"default\"") != NULL);
        CHECK(strstr(note->extra, "\"tasks\" : 1") != NULL);
        CHECK_INT(note->be_pid, PQbackendPID(pg));
        PQfreemem(note);
    }
    /* campaign 2 has 2 tasks needing 2 labels: not complete, no second note */
    PQconsumeInput(listener);
    note = PQnotifies(listener);
    CHECK(note == NULL);
    PQfreemem(note);
    PQfinish(listener);

    for (size_t i = 0; i < sizeof COUNTERS / sizeof COUNTERS[0]; i++) {
        char *a = sqlite_rows(db, COUNTERS[i]), *b = pg_rows(pg, COUNTERS[i]);
        check_same_rows(COUNTERS[i], a, b);
        if (strcmp(COUNTERS[i], "SELECT * FROM label_minutes ORDER BY campaign, minute") == 0)
            CHECK_STR(b, "1|2|1\n2|1|2\n");
        free(a);
        free(b);
    }

    /* uniqueness and refusals, as SQLSTATEs */
    pg_sqlstate(pg,
                "INSERT INTO labels (annotator, task, z, z_task, nonce, timestamp_ms, signature, "
                "received_ms) VALUES (1, 1, 0, 0, '\\x00000000000000000000000000000001'::bytea, "
                "1, decode(repeat('00', 64), 'hex'), 1)",
                state, sizeof state);
    CHECK_STR(state, "23505"); /* (annotator, task) */
    pg_sqlstate(pg,
                "INSERT INTO labels (annotator, task, z, z_task, nonce, timestamp_ms, signature, "
                "received_ms) VALUES (1, 2, 0, 0, decode(repeat('a1', 16), 'hex'), 1, "
                "decode(repeat('00', 64), 'hex'), 1)",
                state, sizeof state);
    CHECK_STR(state, "23505"); /* (annotator, nonce) */
    pg_sqlstate(pg, "UPDATE labels SET z = 0 WHERE id = 1", state, sizeof state);
    CHECK_STR(state, "23000");
    pg_sqlstate(pg, "DELETE FROM labels", state, sizeof state);
    CHECK_STR(state, "23000");
    pg_sqlstate(pg,
                "INSERT INTO labels (annotator, task, z, z_task, nonce, timestamp_ms, "
                "signature, received_ms) VALUES (1, 2, 2, 0, decode(repeat('b1', 16), 'hex'), "
                "1, decode(repeat('00', 64), 'hex'), 1)",
                state, sizeof state);
    CHECK_STR(state, "23514"); /* CHECK (z IN (0, 1)) */
    pg_sqlstate(pg,
                "INSERT INTO assignments (annotator, task, swapped, created_ms) "
                "VALUES (99, 1, 0, 1)",
                state, sizeof state);
    CHECK_STR(state, "23503"); /* foreign key */
    CHECK(pg_ok(pg, "INSERT INTO enrollment_tokens (hash, campaign, created_ms, used_by) "
                    "VALUES (decode(repeat('e1', 32), 'hex'), 2, 1, 1), "
                    "(decode(repeat('e2', 32), 'hex'), 2, 1, NULL), "
                    "(decode(repeat('e3', 32), 'hex'), 2, 1, NULL)"));
    pg_sqlstate(pg,
                "UPDATE enrollment_tokens SET used_by = 1 WHERE hash = "
                "decode(repeat('e2', 32), 'hex')",
                state, sizeof state);
    CHECK_STR(state, "23505"); /* one annotator per token */
    CHECK(pg_ok(pg, "INSERT INTO operator_tokens (hash, name, scopes, created_ms) "
                    "VALUES (decode(repeat('0f', 32), 'hex'), 'ops', 7, 1)"));
    CHECK(pg_ok(pg, "UPDATE operator_tokens SET revoked_ms = 5"));
    pg_sqlstate(pg, "UPDATE operator_tokens SET revoked_ms = 6", state, sizeof state);
    CHECK_STR(state, "23000"); /* revoked once */
    pg_sqlstate(pg, "UPDATE operator_tokens SET name = 'x'", state, sizeof state);
    CHECK_STR(state, "23000");
    pg_sqlstate(pg, "DELETE FROM operator_tokens", state, sizeof state);
    CHECK_STR(state, "23000");

    test_races(uri);
    test_migrate(&pgc);

    free(lite_tables);
    free(pg_tables);
    sqlite3_close(db);
    tmpdir_remove(dir);
    PQfinish(pg);
    char cluster_dir[256];
    snprintf(cluster_dir, sizeof cluster_dir, "%s", pgc.dir);
    pid_t postmaster = pgc.pid;
    pg_cluster_stop(&pgc);
    CHECK(access(cluster_dir, F_OK) != 0); /* torn down */
    CHECK(kill(postmaster, 0) != 0);
    return check_summary();
}
