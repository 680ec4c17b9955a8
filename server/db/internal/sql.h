/*
 * sql.h — the statement API the repositories speak (internal to server/db/).
 *
 * A connection (lp_conn) runs statements (lp_stmt) on one database. The
 * repositories use only this header and the engine's (engine.h); a driver
 * implements it for one database: SQLite (sql_sqlite.c) or PostgreSQL
 * (sql_pg.c). Both can live in one program: every connection and statement
 * begins with its driver's table of functions, and the calls below go
 * through it.
 *
 * SQL text: parameters are written ?1, ?2, ... (1-based, each number may
 * appear several times); a driver rewrites them as its database needs
 * (PostgreSQL: $1, $2, ...). A boolean expression reads as an integer, 1 or
 * 0. New code that needs the id of an inserted row asks for it with
 * `INSERT ... RETURNING id` (SQLite >= 3.35; Debian 12 ships 3.40) and reads
 * it as a row, rather than lp_conn_last_insert_id.
 *
 * A statement's life: bind its parameters, step it until LP_SQL_DONE (each
 * LP_SQL_ROW makes a row readable through the column functions), reset it,
 * bind again. Unbound parameters are NULL. Statements come from the
 * engine's cache (lp_engine_stmt, owned by the engine) or from
 * lp_stmt_prepare (owned by the caller: lp_stmt_finalize).
 *
 * A statement that fails leaves nothing of its own effects and does not end
 * the surrounding transaction (SQLite's ABORT); a driver whose database
 * aborts the whole transaction on an error must restore that (PostgreSQL:
 * a savepoint around the statement), or report LP_SQL_ERROR and leave the
 * transaction ended (lp_conn_in_txn then says 0). A statement marked
 * unguarded (lp_stmt_set_unguarded) may end the transaction that way.
 *
 * Thread safety: a connection and its statements are used by one thread at
 * a time.
 */
#ifndef LP_SQL_H
#define LP_SQL_H

#include <stddef.h>
#include <stdint.h>

typedef struct lp_conn lp_conn;
typedef struct lp_stmt lp_stmt;
typedef struct lp_sql_driver lp_sql_driver;

/* What lp_stmt_step and lp_conn_exec return. The constraint results mean
 * the database refused the statement and it changed nothing (PostgreSQL:
 * SQLSTATE class 23, which is also what a trigger that refuses a write
 * must raise); every other failure (I/O, corruption, busy, syntax, out of
 * memory...) is LP_SQL_ERROR. */
enum {
    LP_SQL_DONE = 0,         /* the statement has run to completion */
    LP_SQL_ROW = 1,          /* a row is ready for the column functions */
    LP_SQL_ERROR = -1,       /* a failure of the storage (lp_conn_errmsg says which) */
    LP_SQL_UNIQUE = -2,      /* a UNIQUE or PRIMARY KEY constraint refused a write */
    LP_SQL_FOREIGN_KEY = -3, /* a FOREIGN KEY constraint refused a write */
    LP_SQL_CONSTRAINT = -4,  /* any other constraint: CHECK, NOT NULL, a trigger's refusal */
};

/* 1 for the three constraint results above, 0 otherwise. */
static inline int lp_sql_is_constraint(int step)
{
    return step <= LP_SQL_UNIQUE;
}

/* A driver's functions; the repositories call the wrappers below. Every
 * driver's connection and statement structs begin with the member `drv`
 * (struct lp_conn / struct lp_stmt) and are otherwise private to it. */
/* The SQL dialect of a connection, for the few statements and steps that
 * differ between the databases (lp_conn_dialect). */
typedef enum lp_sql_dialect { LP_SQL_SQLITE = 0, LP_SQL_POSTGRESQL = 1 } lp_sql_dialect;

struct lp_sql_driver {
    const char *name; /* "sqlite", "postgresql" */
    lp_sql_dialect dialect;
    /* statements */
    int (*bind_int64)(lp_stmt *st, int i, int64_t v);
    int (*bind_double)(lp_stmt *st, int i, double v);
    int (*bind_text)(lp_stmt *st, int i, const char *v, int bytes);
    int (*bind_blob)(lp_stmt *st, int i, const void *v, int bytes);
    int (*bind_null)(lp_stmt *st, int i);
    int (*step)(lp_stmt *st);
    int64_t (*column_int64)(lp_stmt *st, int col);
    double (*column_double)(lp_stmt *st, int col);
    const char *(*column_text)(lp_stmt *st, int col);
    const void *(*column_blob)(lp_stmt *st, int col);
    int (*column_bytes)(lp_stmt *st, int col);
    int (*column_is_null)(lp_stmt *st, int col);
    void (*reset)(lp_stmt *st);
    void (*clear_bindings)(lp_stmt *st);
    void (*finalize)(lp_stmt *st);
    void (*set_unguarded)(lp_stmt *st); /* NULL: statements need no guard */
    /* connections */
    lp_stmt *(*prepare)(lp_conn *c, const char *sql);
    int (*exec)(lp_conn *c, const char *sql);
    int (*begin_read)(lp_conn *c);
    int (*end_read)(lp_conn *c);
    int64_t (*changes)(lp_conn *c);
    int64_t (*last_insert_id)(lp_conn *c);
    int (*in_txn)(lp_conn *c);
    const char *(*errmsg)(lp_conn *c);
    void (*close)(lp_conn *c);
};

struct lp_conn {
    const lp_sql_driver *drv;
};
struct lp_stmt {
    const lp_sql_driver *drv;
};

/* ---- binding (i: 1-based parameter number) ----
 * Each returns 0, or LP_SQL_ERROR when i is out of range (nothing is
 * bound) or memory ran out (the parameter is then NULL). Text and blobs
 * are not copied: the memory must stay valid and unchanged until the last
 * lp_stmt_step that uses it (a reset keeps the bindings). bytes < 0 for
 * text: up to its NUL. */
static inline int lp_stmt_bind_int64(lp_stmt *st, int i, int64_t v)
{
    return st->drv->bind_int64(st, i, v);
}
static inline int lp_stmt_bind_double(lp_stmt *st, int i, double v)
{
    return st->drv->bind_double(st, i, v);
}
static inline int lp_stmt_bind_text(lp_stmt *st, int i, const char *v, int bytes)
{
    return st->drv->bind_text(st, i, v, bytes);
}
static inline int lp_stmt_bind_blob(lp_stmt *st, int i, const void *v, int bytes)
{
    return st->drv->bind_blob(st, i, v, bytes);
}
static inline int lp_stmt_bind_null(lp_stmt *st, int i)
{
    return st->drv->bind_null(st, i);
}

/* Runs the statement to its next row: LP_SQL_ROW, LP_SQL_DONE, or an error
 * result (see above); after an error, reset before anything else. */
static inline int lp_stmt_step(lp_stmt *st)
{
    return st->drv->step(st);
}

/* ---- columns of the current row (col: 0-based) ----
 * Valid only after lp_stmt_step returned LP_SQL_ROW. NULL reads as 0, 0.0,
 * NULL text and NULL blob. Text is UTF-8 and NUL-terminated; a returned
 * pointer stays valid until the next step, reset or finalize of the
 * statement, or the next read of the same column as another type.
 * lp_stmt_column_bytes: the length in bytes of the blob or text in col (no
 * NUL counted), 0 for NULL; for a blob it may be asked before or after
 * lp_stmt_column_blob, for text ask after lp_stmt_column_text. */
static inline int64_t lp_stmt_column_int64(lp_stmt *st, int col)
{
    return st->drv->column_int64(st, col);
}
static inline int lp_stmt_column_int(lp_stmt *st, int col) /* the int64, truncated */
{
    return (int)st->drv->column_int64(st, col);
}
static inline double lp_stmt_column_double(lp_stmt *st, int col)
{
    return st->drv->column_double(st, col);
}
static inline const char *lp_stmt_column_text(lp_stmt *st, int col)
{
    return st->drv->column_text(st, col);
}
static inline const void *lp_stmt_column_blob(lp_stmt *st, int col)
{
    return st->drv->column_blob(st, col);
}
static inline int lp_stmt_column_bytes(lp_stmt *st, int col)
{
    return st->drv->column_bytes(st, col);
}
static inline int lp_stmt_column_is_null(lp_stmt *st, int col) /* 1 or 0 */
{
    return st->drv->column_is_null(st, col);
}

/* Makes the statement ready to run again from its start; the bindings
 * stay. Ends a statement left mid-rows (a read's transaction may hold its
 * snapshot until then). */
static inline void lp_stmt_reset(lp_stmt *st)
{
    st->drv->reset(st);
}
/* Sets every parameter to NULL. */
static inline void lp_stmt_clear_bindings(lp_stmt *st)
{
    st->drv->clear_bindings(st);
}

/* A statement of the caller's for sql on c (one statement, no trailing
 * SQL): finalize it. NULL on failure (lp_conn_errmsg says why). Cached
 * statements (lp_engine_stmt) are cheaper for SQL run more than once. */
static inline lp_stmt *lp_stmt_prepare(lp_conn *c, const char *sql)
{
    return c->drv->prepare(c, sql);
}
/* Marks st as a statement that no constraint or trigger can refuse (a
 * SELECT, an INSERT ... ON CONFLICT DO NOTHING, an UPDATE of counters):
 * it fails only when the storage does or when it meets a conflict with
 * another writer, and the caller then abandons the transaction. A driver
 * that guards each statement of a transaction so that its failure leaves
 * the transaction going (PostgreSQL: a savepoint, one of the 64
 * subtransactions a session keeps in shared memory) runs it unguarded: its
 * failure inside a transaction ends the transaction (LP_SQL_ERROR,
 * lp_conn_in_txn says 0). SQLite: no effect. For the statement's life. */
static inline void lp_stmt_set_unguarded(lp_stmt *st)
{
    if (st->drv->set_unguarded != NULL)
        st->drv->set_unguarded(st);
}
/* Frees a statement from lp_stmt_prepare; accepts NULL. */
static inline void lp_stmt_finalize(lp_stmt *st)
{
    if (st != NULL)
        st->drv->finalize(st);
}

/* Runs sql (one or more statements without parameters; rows are thrown
 * away): LP_SQL_DONE or an error result. */
static inline int lp_conn_exec(lp_conn *c, const char *sql)
{
    return c->drv->exec(c, sql);
}
/* A read transaction: every statement until lp_conn_end_read sees one
 * snapshot of the database. LP_SQL_DONE or LP_SQL_ERROR. */
static inline int lp_conn_begin_read(lp_conn *c)
{
    return c->drv->begin_read(c);
}
static inline int lp_conn_end_read(lp_conn *c)
{
    return c->drv->end_read(c);
}

/* Rows inserted, updated or deleted by the most recent INSERT, UPDATE or
 * DELETE that ran to completion on c (not counting the work of triggers). */
static inline int64_t lp_conn_changes(lp_conn *c)
{
    return c->drv->changes(c);
}
/* The id of the row inserted by the most recent successful INSERT on c
 * into a table with an integer id (SQLite's rowid). Prefer RETURNING id. */
static inline int64_t lp_conn_last_insert_id(lp_conn *c)
{
    return c->drv->last_insert_id(c);
}
/* The database c speaks to. */
static inline lp_sql_dialect lp_conn_dialect(const lp_conn *c)
{
    return c->drv->dialect;
}
/* 1 while c is inside a transaction, 0 otherwise. */
static inline int lp_conn_in_txn(lp_conn *c)
{
    return c->drv->in_txn(c);
}
/* The message of the most recent failure on c (static or owned by c; valid
 * until the next call on c). */
static inline const char *lp_conn_errmsg(lp_conn *c)
{
    return c->drv->errmsg(c);
}
/* Closes c, finalizing what it still holds; accepts NULL. Only for
 * connections the caller opened (lp_engine_reader_open). */
static inline void lp_conn_close(lp_conn *c)
{
    if (c != NULL)
        c->drv->close(c);
}

#endif
