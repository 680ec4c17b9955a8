/*
 * sql_sqlite.c — the statement API (sql.h) over SQLite. See
 * internal/sql_sqlite.h.
 *
 * Each function is one SQLite call: the ingest path runs a dozen of them per
 * label. SQL text is SQLite's own (?N is its placeholder syntax); text and
 * blobs are bound SQLITE_STATIC, which is sql.h's lifetime rule.
 */
#include "sql_sqlite.h"

#include <stdlib.h>

struct sq_conn {
    lp_conn base; /* first */
    sqlite3 *db;
    int nomem; /* the last failure was a wrapper's allocation */
};

struct sq_stmt {
    lp_stmt base; /* first */
    sqlite3_stmt *st;
};

#define SQ_CONN(c) ((struct sq_conn *)(c))
#define SQ_ST(s) (((struct sq_stmt *)(s))->st)

static int bind_rc(int rc)
{
    return rc == SQLITE_OK ? 0 : LP_SQL_ERROR;
}

static int sq_bind_int64(lp_stmt *s, int i, int64_t v)
{
    return bind_rc(sqlite3_bind_int64(SQ_ST(s), i, v));
}

static int sq_bind_double(lp_stmt *s, int i, double v)
{
    return bind_rc(sqlite3_bind_double(SQ_ST(s), i, v));
}

static int sq_bind_text(lp_stmt *s, int i, const char *v, int bytes)
{
    return bind_rc(sqlite3_bind_text(SQ_ST(s), i, v, bytes, SQLITE_STATIC));
}

static int sq_bind_blob(lp_stmt *s, int i, const void *v, int bytes)
{
    return bind_rc(sqlite3_bind_blob(SQ_ST(s), i, v, bytes, SQLITE_STATIC));
}

static int sq_bind_null(lp_stmt *s, int i)
{
    return bind_rc(sqlite3_bind_null(SQ_ST(s), i));
}

/* The step result of a failure: which constraint refused the write, if
 * one did. */
static int step_failure(sqlite3_stmt *st, int rc)
{
    if ((rc & 0xff) != SQLITE_CONSTRAINT)
        return LP_SQL_ERROR;
    switch (sqlite3_extended_errcode(sqlite3_db_handle(st))) {
    case SQLITE_CONSTRAINT_UNIQUE:
    case SQLITE_CONSTRAINT_PRIMARYKEY:
    case SQLITE_CONSTRAINT_ROWID:
        return LP_SQL_UNIQUE;
    case SQLITE_CONSTRAINT_FOREIGNKEY:
        return LP_SQL_FOREIGN_KEY;
    default:
        return LP_SQL_CONSTRAINT;
    }
}

static int sq_step(lp_stmt *s)
{
    int rc = sqlite3_step(SQ_ST(s));
    if (rc == SQLITE_ROW)
        return LP_SQL_ROW;
    if (rc == SQLITE_DONE)
        return LP_SQL_DONE;
    return step_failure(SQ_ST(s), rc);
}

static int64_t sq_column_int64(lp_stmt *s, int col)
{
    return sqlite3_column_int64(SQ_ST(s), col);
}

static double sq_column_double(lp_stmt *s, int col)
{
    return sqlite3_column_double(SQ_ST(s), col);
}

static const char *sq_column_text(lp_stmt *s, int col)
{
    return (const char *)sqlite3_column_text(SQ_ST(s), col);
}

static const void *sq_column_blob(lp_stmt *s, int col)
{
    return sqlite3_column_blob(SQ_ST(s), col);
}

static int sq_column_bytes(lp_stmt *s, int col)
{
    return sqlite3_column_bytes(SQ_ST(s), col);
}

static int sq_column_is_null(lp_stmt *s, int col)
{
    return sqlite3_column_type(SQ_ST(s), col) == SQLITE_NULL;
}

static void sq_reset(lp_stmt *s)
{
    sqlite3_reset(SQ_ST(s));
}

static void sq_clear_bindings(lp_stmt *s)
{
    sqlite3_clear_bindings(SQ_ST(s));
}

static void sq_finalize(lp_stmt *s)
{
    sqlite3_finalize(SQ_ST(s));
    free(s);
}

static const lp_sql_driver sq_driver;

static lp_stmt *prepare(lp_conn *c, const char *sql, unsigned flags)
{
    struct sq_conn *sc = SQ_CONN(c);
    sqlite3_stmt *st = NULL;
    sc->nomem = 0;
    if (sqlite3_prepare_v3(sc->db, sql, -1, flags, &st, NULL) != SQLITE_OK) {
        sqlite3_finalize(st);
        return NULL;
    }
    struct sq_stmt *s = malloc(sizeof *s);
    if (s == NULL) {
        sqlite3_finalize(st);
        sc->nomem = 1;
        return NULL;
    }
    *s = (struct sq_stmt){{&sq_driver}, st};
    return &s->base;
}

static lp_stmt *sq_prepare(lp_conn *c, const char *sql)
{
    return prepare(c, sql, 0);
}

lp_stmt *lp_sqlite_prepare_persistent(lp_conn *c, const char *sql)
{
    return prepare(c, sql, SQLITE_PREPARE_PERSISTENT);
}

static int sq_exec(lp_conn *c, const char *sql)
{
    SQ_CONN(c)->nomem = 0;
    int rc = sqlite3_exec(SQ_CONN(c)->db, sql, NULL, NULL, NULL);
    return rc == SQLITE_OK ? LP_SQL_DONE : LP_SQL_ERROR;
}

/* A deferred transaction's snapshot starts at its first read and lasts
 * until it ends. */
static int sq_begin_read(lp_conn *c)
{
    return sq_exec(c, "BEGIN");
}

static int sq_end_read(lp_conn *c)
{
    return sq_exec(c, "COMMIT");
}

static int64_t sq_changes(lp_conn *c)
{
    return sqlite3_changes64(SQ_CONN(c)->db);
}

static int64_t sq_last_insert_id(lp_conn *c)
{
    return sqlite3_last_insert_rowid(SQ_CONN(c)->db);
}

static int sq_in_txn(lp_conn *c)
{
    return !sqlite3_get_autocommit(SQ_CONN(c)->db);
}

static const char *sq_errmsg(lp_conn *c)
{
    return SQ_CONN(c)->nomem ? "out of memory" : sqlite3_errmsg(SQ_CONN(c)->db);
}

static void sq_close(lp_conn *c)
{
    sqlite3_close(SQ_CONN(c)->db);
    free(c);
}

static const lp_sql_driver sq_driver = {
    .name = "sqlite",
    .dialect = LP_SQL_SQLITE,
    .bind_int64 = sq_bind_int64,
    .bind_double = sq_bind_double,
    .bind_text = sq_bind_text,
    .bind_blob = sq_bind_blob,
    .bind_null = sq_bind_null,
    .step = sq_step,
    .column_int64 = sq_column_int64,
    .column_double = sq_column_double,
    .column_text = sq_column_text,
    .column_blob = sq_column_blob,
    .column_bytes = sq_column_bytes,
    .column_is_null = sq_column_is_null,
    .reset = sq_reset,
    .clear_bindings = sq_clear_bindings,
    .finalize = sq_finalize,
    .prepare = sq_prepare,
    .exec = sq_exec,
    .begin_read = sq_begin_read,
    .end_read = sq_end_read,
    .changes = sq_changes,
    .last_insert_id = sq_last_insert_id,
    .in_txn = sq_in_txn,
    .errmsg = sq_errmsg,
    .close = sq_close,
};

lp_conn *lp_sqlite_conn(sqlite3 *db)
{
    struct sq_conn *c = malloc(sizeof *c);
    if (c == NULL)
        return NULL;
    *c = (struct sq_conn){{&sq_driver}, db, 0};
    return &c->base;
}

sqlite3 *lp_sqlite_db(lp_conn *c)
{
    return SQ_CONN(c)->db;
}
