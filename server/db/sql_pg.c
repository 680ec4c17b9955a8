/* sql_pg.c — the statement API (sql.h) on PostgreSQL through libpq. See sql_pg.h. */
#include "sql_pg.h"

#include "error.h"
#include "log.h"

#include <ctype.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#ifndef LIBPQ_HAS_PIPELINING
#error "libpq 14 or newer is needed (pipeline mode)"
#endif

/* Type OIDs of the built-in types (pg_type.oid; fixed since PostgreSQL 7). */
#define OID_BOOL 16
#define OID_BYTEA 17
#define OID_INT8 20
#define OID_TEXT 25
#define OID_FLOAT8 701

#define SAVEPOINT_SQL "SAVEPOINT lp_stmt"
#define RELEASE_SQL "RELEASE SAVEPOINT lp_stmt"
#define UNDO_SQL "ROLLBACK TO SAVEPOINT lp_stmt; RELEASE SAVEPOINT lp_stmt"

typedef struct pg_stmt pg_stmt;

typedef struct pg_conn {
    struct lp_conn base;
    PGconn *pg;
    int64_t changes;
    unsigned long next_name; /* statement names: lp1, lp2, ... */
    int savepoints;          /* per-statement savepoints inside transactions */
    pg_stmt *stmts;          /* every statement of the connection, for close */
    pg_stmt *lastval;        /* SELECT lastval(), made on first use */
    uint64_t conflicts;      /* failures with SQLSTATE 40001 or 40P01 (lp_sql_pg_conflicts) */
    int txn_lost;            /* a failure ended the caller's transaction: only BEGIN, COMMIT or
                              * ROLLBACK run until one has (see sql_pg.h) */
    char err[512];
    char lost_why[512]; /* the failure that ended it */
} pg_conn;

enum { P_NULL, P_INT, P_DOUBLE, P_TEXT, P_BLOB };

struct param {
    int kind;
    int64_t i;
    double d;
    const char *p; /* text or blob as bound (not owned) */
    int len;       /* its bytes; text: -1 up to its NUL */
    char *buf;     /* owned: the NUL-terminated or hex text sent */
    size_t cap;
    unsigned char bin[8]; /* an int8 or float8 in network order */
};

/* A column's bytes decoded from bytea's hex text, for one row. */
struct column {
    int row; /* the row decoded, -1 none */
    unsigned char *buf;
    size_t cap;
    int len;
};

struct pg_stmt {
    struct lp_stmt base;
    pg_conn *c;
    pg_stmt *next, *prev; /* in c->stmts */
    char *sql;            /* with $N */
    int wrap;             /* 0: transaction control, never inside a savepoint */
    int boundary;         /* begins or ends a transaction (BEGIN, COMMIT, ROLLBACK...) */
    int unguarded;        /* never inside a savepoint (lp_stmt_set_unguarded) */
    int nparams;
    struct param *params;
    unsigned char *used; /* used[k]: ?k+1 appears in the SQL (numbers may be skipped) */
    Oid *types;          /* the types it was prepared with (0: the server's choice) */
    int stream;          /* rows one at a time (lp_sql_pg_stream) */
    int streaming;       /* a streamed run has rows pending on the connection */
    int stream_in_txn;
    int fixed;     /* prepared with the server's types for good (ensure_prepared) */
    char name[32]; /* "" until prepared */
    /* the current run */
    PGresult *res;
    int state; /* 0 not run since reset, 1 rows (or done), else the error result */
    int row;
    struct column *cols;
    int ncols;
    /* scratch for PQexecPrepared */
    const char **values;
    int *lengths, *formats;
};

static const lp_sql_driver PG_DRIVER;

static void set_err(pg_conn *c, const char *msg)
{
    snprintf(c->err, sizeof c->err, "%s", msg ? msg : "unknown PostgreSQL failure");
    size_t n = strlen(c->err);
    while (n > 0 && (c->err[n - 1] == '\n' || c->err[n - 1] == ' '))
        c->err[--n] = 0;
}

/* The result of a failed statement: SQLSTATE class 23 are constraints. */
static int fail_result(pg_conn *c, const PGresult *r)
{
    const char *msg = r ? PQresultErrorMessage(r) : NULL;
    set_err(c, msg && *msg ? msg : PQerrorMessage(c->pg));
    const char *state = r ? PQresultErrorField(r, PG_DIAG_SQLSTATE) : NULL;
    if (state != NULL && (strcmp(state, "40001") == 0 || strcmp(state, "40P01") == 0))
        c->conflicts++;
    if (state == NULL || strncmp(state, "23", 2) != 0)
        return LP_SQL_ERROR;
    if (strcmp(state, "23505") == 0)
        return LP_SQL_UNIQUE;
    if (strcmp(state, "23503") == 0)
        return LP_SQL_FOREIGN_KEY;
    return LP_SQL_CONSTRAINT;
}

static int ok_status(const PGresult *r)
{
    ExecStatusType s = PQresultStatus(r);
    return s == PGRES_COMMAND_OK || s == PGRES_TUPLES_OK;
}

/* The rows changed, when r is an INSERT, UPDATE, DELETE or MERGE. */
static void note_changes(pg_conn *c, PGresult *r)
{
    const char *tag = PQcmdStatus(r);
    if (tag != NULL && (strncmp(tag, "INSERT ", 7) == 0 || strncmp(tag, "UPDATE ", 7) == 0 ||
                        strncmp(tag, "DELETE ", 7) == 0 || strncmp(tag, "MERGE ", 6) == 0))
        c->changes = strtoll(PQcmdTuples(r), NULL, 10);
}

static int in_txn_status(PGconn *pg)
{
    PGTransactionStatusType t = PQtransactionStatus(pg);
    return t == PQTRANS_INTRANS || t == PQTRANS_INERROR || t == PQTRANS_ACTIVE;
}

/* After a failure inside a transaction that could not be undone alone:
 * ends the transaction (sql.h: lp_conn_in_txn then says 0). */
static void end_failed_txn(pg_conn *c)
{
    if (in_txn_status(c->pg))
        PQclear(PQexec(c->pg, "ROLLBACK"));
    c->txn_lost = 1;
    memcpy(c->lost_why, c->err, sizeof c->lost_why);
}

/* The result of a failure rc that happened while the connection was (or
 * was not) in a transaction: when the transaction is aborted it is ended,
 * and a transaction that ended with the failure makes it LP_SQL_ERROR,
 * whatever the cause (sql.h: a constraint result changed nothing else). */
static int settle_failure(pg_conn *c, int rc, int was_in_txn)
{
    if (PQtransactionStatus(c->pg) == PQTRANS_INERROR)
        end_failed_txn(c);
    if (!was_in_txn || in_txn_status(c->pg))
        return rc;
    size_t n = strlen(c->err);
    snprintf(c->err + n, sizeof c->err - n, " (the transaction was rolled back)");
    if (!c->txn_lost)
        memcpy(c->lost_why, c->err, sizeof c->lost_why);
    c->txn_lost = 1;
    return LP_SQL_ERROR;
}

/* ---- SQL text ---- */

/* Rewrites ?N as $N outside quotes and comments; *nparams gets the largest
 * N, and used[N - 1] is set for each N written (used may be NULL; it holds
 * *nparams entries). NULL (with the reason in c->err) for a bare ?, or out
 * of memory. */
static char *rewrite(pg_conn *c, const char *sql, int *nparams, unsigned char *used)
{
    size_t n = strlen(sql);
    char *out = malloc(n + 1);
    if (out == NULL) {
        set_err(c, "out of memory");
        return NULL;
    }
    size_t o = 0;
    int max = 0;
    for (size_t i = 0; i < n;) {
        char ch = sql[i];
        if (ch == '\'' || ch == '"') { /* a literal or quoted name; doubled quotes stay inside */
            size_t j = i + 1;
            while (j < n && !(sql[j] == ch && sql[j + 1] != ch))
                j += sql[j] == ch ? 2 : 1;
            j = j < n ? j + 1 : n;
            memcpy(out + o, sql + i, j - i);
            o += j - i;
            i = j;
        } else if (ch == '-' && sql[i + 1] == '-') {
            size_t j = i;
            while (j < n && sql[j] != '\n')
                j++;
            memcpy(out + o, sql + i, j - i);
            o += j - i;
            i = j;
        } else if (ch == '/' && sql[i + 1] == '*') {
            const char *end = strstr(sql + i + 2, "*/");
            size_t j = end ? (size_t)(end - sql) + 2 : n;
            memcpy(out + o, sql + i, j - i);
            o += j - i;
            i = j;
        } else if (ch == '?') {
            size_t j = i + 1;
            long v = 0;
            while (j < n && isdigit((unsigned char)sql[j]) && v < 100000)
                v = v * 10 + (sql[j++] - '0');
            if (j == i + 1 || v < 1 || v > 65535) {
                set_err(c, "a parameter must be written ?N (N from 1 to 65535)");
                free(out);
                return NULL;
            }
            out[o++] = '$';
            memcpy(out + o, sql + i + 1, j - i - 1);
            o += j - i - 1;
            if (v > max)
                max = (int)v;
            if (used != NULL)
                used[v - 1] = 1;
            i = j;
        } else {
            out[o++] = sql[i++];
        }
    }
    out[o] = 0;
    *nparams = max;
    return out;
}

/* The transaction control commands, by the word they begin with; the
 * first TXN_BOUNDARY begin or end a transaction. */
static const char *const TXN_WORDS[] = {"BEGIN", "START",    "COMMIT",    "END",
                                        "ABORT", "ROLLBACK", "SAVEPOINT", "RELEASE"};
#define TXN_BOUNDARY 6
#define TXN_ROLLBACK 5

/* The index in TXN_WORDS of sql's first word, -1 when none. */
static int txn_word(const char *sql)
{
    while (isspace((unsigned char)*sql))
        sql++;
    for (size_t k = 0; k < sizeof TXN_WORDS / sizeof TXN_WORDS[0]; k++) {
        size_t n = strlen(TXN_WORDS[k]);
        if (strncasecmp(sql, TXN_WORDS[k], n) == 0 && !isalnum((unsigned char)sql[n]))
            return (int)k;
    }
    return -1;
}

/* Transaction control runs as it is, never inside a statement savepoint. */
static int is_txn_control(const char *sql)
{
    return txn_word(sql) >= 0;
}

/* Begins or ends a transaction: BEGIN, START, COMMIT, END, ABORT or
 * ROLLBACK, but not ROLLBACK [WORK | TRANSACTION] TO a savepoint. */
static int is_txn_boundary(const char *sql)
{
    int k = txn_word(sql);
    if (k == TXN_ROLLBACK)
        for (const char *p = strcasestr(sql, "ROLLBACK") + 8; *p && *p != ';'; p++)
            if (strncasecmp(p, "TO", 2) == 0 && isspace((unsigned char)p[-1]) &&
                (p[2] == 0 || isspace((unsigned char)p[2])))
                return 0;
    return k >= 0 && k < TXN_BOUNDARY;
}

/* After a failure ended the caller's transaction, refuses sql until a
 * statement that begins or ends a transaction runs (it clears the mark):
 * run now, sql would commit on its own, outside the transaction its caller
 * believes open. 0 when sql may run. */
static int refused_after_loss(pg_conn *c, int boundary)
{
    if (!c->txn_lost)
        return 0;
    if (boundary) {
        c->txn_lost = 0;
        return 0;
    }
    snprintf(c->err, sizeof c->err,
             "the transaction was rolled back by an earlier failure (%.400s); it must be ended "
             "(ROLLBACK) before anything else runs",
             c->lost_why);
    return 1;
}

/* ---- statements ---- */

static void deallocate(pg_stmt *st);
static PGresult *prepare_as(pg_stmt *st);
static int types_failed(const PGresult *r);

static void stream_abandon(pg_stmt *st);

static void stmt_clear_run(pg_stmt *st)
{
    if (st->streaming)
        stream_abandon(st);
    PQclear(st->res);
    st->res = NULL;
    st->state = 0;
    st->row = -1;
    for (int k = 0; k < st->ncols; k++)
        st->cols[k].row = -1;
}

static void pg_finalize(lp_stmt *base)
{
    pg_stmt *st = (pg_stmt *)base;
    pg_conn *c = st->c;
    stmt_clear_run(st);
    deallocate(st);
    if (st->prev)
        st->prev->next = st->next;
    else
        c->stmts = st->next;
    if (st->next)
        st->next->prev = st->prev;
    for (int k = 0; k < st->nparams; k++)
        free(st->params[k].buf);
    for (int k = 0; k < st->ncols; k++)
        free(st->cols[k].buf);
    free(st->params);
    free(st->used);
    free(st->types);
    free(st->cols);
    free(st->values);
    free(st->lengths);
    free(st->formats);
    free(st->sql);
    free(st);
}

static lp_stmt *pg_prepare(lp_conn *base, const char *sql)
{
    pg_conn *c = (pg_conn *)base;
    pg_stmt *st = calloc(1, sizeof *st);
    if (st == NULL) {
        set_err(c, "out of memory");
        return NULL;
    }
    st->base.drv = &PG_DRIVER;
    st->c = c;
    st->row = -1;
    st->sql = rewrite(c, sql, &st->nparams, NULL);
    int n = st->nparams > 0 ? st->nparams : 1;
    st->used = calloc((size_t)n, 1);
    if (st->sql != NULL && st->used != NULL) { /* again, to mark the numbers written */
        free(st->sql);
        st->sql = rewrite(c, sql, &st->nparams, st->used);
    }
    st->params = calloc((size_t)n, sizeof *st->params);
    st->types = calloc((size_t)n, sizeof *st->types);
    st->values = calloc((size_t)n, sizeof *st->values);
    st->lengths = calloc((size_t)n, sizeof *st->lengths);
    st->formats = calloc((size_t)n, sizeof *st->formats);
    st->next = c->stmts;
    if (c->stmts)
        c->stmts->prev = st;
    c->stmts = st;
    if (st->sql == NULL || !st->used || !st->params || !st->types || !st->values || !st->lengths ||
        !st->formats) {
        if (st->sql != NULL)
            set_err(c, "out of memory");
        pg_finalize(&st->base);
        return NULL;
    }
    st->wrap = !is_txn_control(st->sql);
    st->boundary = is_txn_boundary(st->sql);
    /* prepared now with the server's types, so that a wrong statement fails
     * here; one whose types only the bindings can decide waits for them */
    PGresult *r = prepare_as(st);
    if (r != NULL) {
        int types_later = types_failed(r);
        if (!types_later)
            fail_result(c, r);
        PQclear(r);
        deallocate(st);
        if (!types_later) {
            pg_finalize(&st->base);
            return NULL;
        }
    }
    return &st->base;
}

static struct param *param_at(pg_stmt *st, int i)
{
    if (i < 1 || i > st->nparams) {
        snprintf(st->c->err, sizeof st->c->err, "parameter %d of a statement with %d", i,
                 st->nparams);
        return NULL;
    }
    return &st->params[i - 1];
}

static int pg_bind_int64(lp_stmt *base, int i, int64_t v)
{
    struct param *p = param_at((pg_stmt *)base, i);
    if (p == NULL)
        return LP_SQL_ERROR;
    p->kind = P_INT;
    p->i = v;
    return 0;
}

static int pg_bind_double(lp_stmt *base, int i, double v)
{
    struct param *p = param_at((pg_stmt *)base, i);
    if (p == NULL)
        return LP_SQL_ERROR;
    p->kind = P_DOUBLE;
    p->d = v;
    return 0;
}

static int pg_bind_null(lp_stmt *base, int i)
{
    struct param *p = param_at((pg_stmt *)base, i);
    if (p == NULL)
        return LP_SQL_ERROR;
    p->kind = P_NULL;
    return 0;
}

static int pg_bind_text(lp_stmt *base, int i, const char *v, int bytes)
{
    struct param *p = param_at((pg_stmt *)base, i);
    if (p == NULL)
        return LP_SQL_ERROR;
    p->kind = v ? P_TEXT : P_NULL;
    p->p = v;
    p->len = bytes;
    return 0;
}

static int pg_bind_blob(lp_stmt *base, int i, const void *v, int bytes)
{
    struct param *p = param_at((pg_stmt *)base, i);
    if (p == NULL)
        return LP_SQL_ERROR;
    p->kind = v ? P_BLOB : P_NULL;
    p->p = v;
    p->len = bytes < 0 ? 0 : bytes;
    return 0;
}

static void pg_set_unguarded(lp_stmt *base)
{
    ((pg_stmt *)base)->unguarded = 1;
}

static void pg_clear_bindings(lp_stmt *base)
{
    pg_stmt *st = (pg_stmt *)base;
    for (int k = 0; k < st->nparams; k++)
        st->params[k].kind = P_NULL;
}

static void pg_reset(lp_stmt *base)
{
    stmt_clear_run((pg_stmt *)base);
}

/* The type a binding asks the statement to be prepared with. */
static Oid kind_type(int kind)
{
    return kind == P_INT      ? OID_INT8
           : kind == P_DOUBLE ? OID_FLOAT8
           : kind == P_BLOB   ? OID_BYTEA
                              : 0;
}

static int grow(struct param *p, size_t need)
{
    if (need <= p->cap)
        return 0;
    char *b = realloc(p->buf, need);
    if (b == NULL)
        return -1;
    p->buf = b;
    p->cap = need;
    return 0;
}

static void put_be64(unsigned char *out, uint64_t v)
{
    for (int k = 7; k >= 0; k--, v >>= 8)
        out[k] = (unsigned char)v;
}

/* Fills values/lengths/formats for a run with the types st was prepared
 * with. -1 with c->err set when a value cannot be sent. */
static int marshal(pg_stmt *st)
{
    static const char hexdigits[] = "0123456789abcdef";
    for (int k = 0; k < st->nparams; k++) {
        struct param *p = &st->params[k];
        int binary = p->kind != P_NULL && st->types[k] == kind_type(p->kind) && st->types[k];
        st->formats[k] = binary;
        st->lengths[k] = 0;
        switch (p->kind) {
        case P_NULL:
            st->values[k] = NULL;
            break;
        case P_INT:
            if (binary) {
                put_be64(p->bin, (uint64_t)p->i);
            } else {
                if (grow(p, 24) != 0)
                    goto oom;
                snprintf(p->buf, p->cap, "%" PRId64, p->i);
            }
            break;
        case P_DOUBLE:
            if (binary) {
                uint64_t u;
                memcpy(&u, &p->d, sizeof u);
                put_be64(p->bin, u);
            } else {
                if (grow(p, 32) != 0)
                    goto oom;
                if (isnan(p->d))
                    snprintf(p->buf, p->cap, "NaN");
                else if (isinf(p->d))
                    snprintf(p->buf, p->cap, "%sInfinity", p->d < 0 ? "-" : "");
                else
                    snprintf(p->buf, p->cap, "%.17g", p->d);
            }
            break;
        case P_TEXT: {
            size_t n = p->len < 0 ? strlen(p->p) : (size_t)p->len;
            if (memchr(p->p, 0, n) != NULL) {
                set_err(st->c, "text holds a NUL byte (PostgreSQL text cannot)");
                return -1;
            }
            if (p->len >= 0) { /* not necessarily NUL-terminated: a copy */
                if (grow(p, n + 1) != 0)
                    goto oom;
                memcpy(p->buf, p->p, n);
                p->buf[n] = 0;
            }
            break;
        }
        case P_BLOB:
            if (!binary) { /* the server chose the type: bytea's hex text */
                size_t n = (size_t)p->len;
                if (grow(p, 2 * n + 3) != 0)
                    goto oom;
                p->buf[0] = '\\';
                p->buf[1] = 'x';
                for (size_t b = 0; b < n; b++) {
                    p->buf[2 + 2 * b] = hexdigits[((const unsigned char *)p->p)[b] >> 4];
                    p->buf[3 + 2 * b] = hexdigits[((const unsigned char *)p->p)[b] & 15];
                }
                p->buf[2 + 2 * n] = 0;
            }
            break;
        }
        if (p->kind == P_NULL)
            continue;
        if (binary) {
            st->values[k] = p->kind == P_BLOB ? p->p : (const char *)p->bin;
            st->lengths[k] = p->kind == P_BLOB ? p->len : 8;
        } else {
            st->values[k] = p->kind == P_TEXT && p->len < 0 ? p->p : p->buf;
        }
    }
    return 0;
oom:
    set_err(st->c, "out of memory");
    return -1;
}

/* PQprepare, inside a savepoint when in a transaction (a failed prepare
 * would end it; prepared statements outlive a rollback). */
static PGresult *prepare_guarded(pg_conn *c, const char *name, const char *sql, int n,
                                 const Oid *types)
{
    int txn = PQtransactionStatus(c->pg) == PQTRANS_INTRANS;
    if (txn)
        PQclear(PQexec(c->pg, SAVEPOINT_SQL));
    PGresult *r = PQprepare(c->pg, name, sql, n, types);
    if (txn) {
        PGresult *end = PQexec(c->pg, ok_status(r) ? RELEASE_SQL : UNDO_SQL);
        if (!ok_status(end))
            end_failed_txn(c);
        PQclear(end);
    }
    return r;
}

/* The failure is about the parameters' types (an operator or function for
 * them does not exist, is ambiguous, or a type cannot be decided), not
 * about the statement. */
static int types_failed(const PGresult *r)
{
    static const char *const states[] = {"42883", "42804", "42725", "42P18", "42P08"};
    const char *state = PQresultErrorField(r, PG_DIAG_SQLSTATE);
    for (size_t k = 0; state != NULL && k < sizeof states / sizeof states[0]; k++)
        if (strcmp(state, states[k]) == 0)
            return 1;
    return 0;
}

static void deallocate(pg_stmt *st)
{
    if (st->name[0] && PQstatus(st->c->pg) == CONNECTION_OK) {
        char sql[48];
        snprintf(sql, sizeof sql, "DEALLOCATE %s", st->name);
        PQclear(PQexec(st->c->pg, sql)); /* not transactional; fails only for an unknown name */
    }
    st->name[0] = 0;
}

/* Prepares st under a new name with st->types (0: the server's choice)
 * and learns the types the server chose. NULL, or the failed result
 * (the caller clears it). */
static PGresult *prepare_as(pg_stmt *st)
{
    pg_conn *c = st->c;
    for (int k = 0; k < st->nparams; k++)
        if (!st->used[k]) /* a number the SQL skips: any type, the value is not read */
            st->types[k] = OID_TEXT;
    char name[32];
    snprintf(name, sizeof name, "lp%lu", ++c->next_name);
    PGresult *r = prepare_guarded(c, name, st->sql, st->nparams, st->types);
    if (!ok_status(r))
        return r;
    PQclear(r);
    snprintf(st->name, sizeof st->name, "%s", name);
    r = PQdescribePrepared(c->pg, name);
    if (!ok_status(r) || PQnparams(r) != st->nparams)
        return r;
    for (int k = 0; k < st->nparams; k++)
        st->types[k] = PQparamtype(r, k);
    PQclear(r);
    return NULL;
}

/* After a prepare that failed because the server could not decide a
 * parameter's type (?1 IS NULL with ?1 bound to NULL), prepares again with
 * text for each parameter left to the server. Returns the result to use. */
static PGresult *prepare_untyped_as_text(pg_stmt *st, PGresult *r)
{
    const char *state = r ? PQresultErrorField(r, PG_DIAG_SQLSTATE) : NULL;
    if (state == NULL || strcmp(state, "42P18") != 0)
        return r;
    PQclear(r);
    deallocate(st);
    for (int k = 0; k < st->nparams; k++)
        if (st->types[k] == 0)
            st->types[k] = OID_TEXT;
    return prepare_as(st);
}

/* Prepares st again when a binding's type is not the one the statement was
 * prepared with (an int64 where the server chose integer or text...): with
 * the bindings' types, or, when the server has no operator for those, its
 * own choice for good (st->fixed; values are then sent as text). 0, or an
 * error result. */
static int ensure_prepared(pg_stmt *st)
{
    int again = st->name[0] == 0;
    for (int k = 0; k < st->nparams && !again && !st->fixed; k++) {
        Oid want = kind_type(st->params[k].kind);
        again = want != 0 && st->used[k] && st->types[k] != want;
    }
    if (!again)
        return 0;
    deallocate(st);
    for (int k = 0; k < st->nparams; k++)
        st->types[k] = st->fixed ? 0 : kind_type(st->params[k].kind);
    PGresult *r = prepare_untyped_as_text(st, prepare_as(st));
    if (r != NULL && types_failed(r) && !st->fixed) {
        PQclear(r);
        deallocate(st);
        st->fixed = 1;
        memset(st->types, 0, (size_t)st->nparams * sizeof *st->types);
        r = prepare_untyped_as_text(st, prepare_as(st));
    }
    int rc = r == NULL ? 0 : fail_result(st->c, r);
    PQclear(r);
    if (rc != 0)
        deallocate(st);
    return rc;
}

/* The first result of the next query in a pipeline; its end (NULL) read. */
static PGresult *next_result(PGconn *pg)
{
    PGresult *r = PQgetResult(pg);
    if (r != NULL && PQresultStatus(r) != PGRES_PIPELINE_SYNC) {
        PGresult *more;
        while ((more = PQgetResult(pg)) != NULL)
            PQclear(more);
    }
    return r;
}

/* Runs st inside a savepoint: SAVEPOINT, the statement and RELEASE in one
 * round trip; after a failure the savepoint is rolled back (a second round
 * trip). The statement's result, or NULL with c->err set. */
static PGresult *run_in_savepoint(pg_stmt *st)
{
    pg_conn *c = st->c;
    PGconn *pg = c->pg;
    if (!PQenterPipelineMode(pg)) {
        set_err(c, PQerrorMessage(pg));
        return NULL;
    }
    int sent =
        PQsendQueryParams(pg, SAVEPOINT_SQL, 0, NULL, NULL, NULL, NULL, 0) &&
        PQsendQueryPrepared(pg, st->name, st->nparams, st->values, st->lengths, st->formats, 0) &&
        PQsendQueryParams(pg, RELEASE_SQL, 0, NULL, NULL, NULL, NULL, 0) && PQpipelineSync(pg);
    PGresult *save = NULL, *res = NULL, *release = NULL, *sync = NULL;
    if (sent) {
        save = next_result(pg);
        res = next_result(pg);
        release = next_result(pg);
        sync = PQgetResult(pg);
    }
    int synced = sync != NULL && PQresultStatus(sync) == PGRES_PIPELINE_SYNC;
    int saved = save != NULL && ok_status(save);
    int released = release != NULL && ok_status(release);
    if (!sent || !synced)
        set_err(c, PQerrorMessage(pg));
    else if (!saved)
        fail_result(c, save);
    PQclear(save);
    PQclear(release);
    PQclear(sync);
    PQexitPipelineMode(pg);
    if (!sent || !synced || !saved) {
        PQclear(res);
        end_failed_txn(c);
        return NULL;
    }
    if (!released && res != NULL && ok_status(res)) {
        set_err(c, "the statement's savepoint could not be released");
        PQclear(res);
        end_failed_txn(c);
        return NULL;
    }
    if (res != NULL && !ok_status(res)) { /* undo the statement, keep the transaction */
        PGresult *undo = PQexec(pg, UNDO_SQL);
        if (!ok_status(undo))
            end_failed_txn(c);
        PQclear(undo);
    }
    return res;
}

/* Makes r (a successful result) the statement's current one. 1, or
 * LP_SQL_ERROR when out of memory. */
static int take_result(pg_stmt *st, PGresult *r)
{
    pg_conn *c = st->c;
    note_changes(c, r);
    PQclear(st->res);
    st->res = r;
    int nf = PQnfields(r);
    if (nf > st->ncols) {
        struct column *cols = realloc(st->cols, (size_t)nf * sizeof *cols);
        if (cols == NULL) {
            set_err(c, "out of memory");
            return LP_SQL_ERROR;
        }
        memset(cols + st->ncols, 0, (size_t)(nf - st->ncols) * sizeof *cols);
        st->cols = cols;
        st->ncols = nf;
    }
    for (int k = 0; k < st->ncols; k++)
        st->cols[k].row = -1;
    return 1;
}

/* Reads and drops what is left of a streamed run. */
static void drain(PGconn *pg)
{
    PGresult *r;
    while ((r = PQgetResult(pg)) != NULL)
        PQclear(r);
}

/* A streamed run left before its end: cancelled (outside a transaction)
 * or read to its end (inside one, whose snapshot a cancel would end). */
static void stream_abandon(pg_stmt *st)
{
    PGconn *pg = st->c->pg;
    PGcancel *cancel = st->stream_in_txn ? NULL : PQgetCancel(pg);
    if (cancel != NULL) {
        char why[256];
        PQcancel(cancel, why, sizeof why);
        PQfreeCancel(cancel);
    }
    drain(pg);
    st->streaming = 0;
    if (PQtransactionStatus(pg) == PQTRANS_INERROR)
        end_failed_txn(st->c);
}

/* Starts a streamed run: the rows come one at a time (single-row mode). */
static int run_streamed(pg_stmt *st)
{
    pg_conn *c = st->c;
    st->stream_in_txn = PQtransactionStatus(c->pg) == PQTRANS_INTRANS;
    if (!PQsendQueryPrepared(c->pg, st->name, st->nparams, st->values, st->lengths, st->formats,
                             0)) {
        set_err(c, PQerrorMessage(c->pg));
        return LP_SQL_ERROR;
    }
    st->streaming = 1;
    if (!PQsetSingleRowMode(c->pg)) {
        set_err(c, "cannot read rows one at a time");
        stream_abandon(st);
        return LP_SQL_ERROR;
    }
    return 1;
}

/* The next row of a streamed run. */
static int stream_next(pg_stmt *st)
{
    pg_conn *c = st->c;
    PGresult *r = PQgetResult(c->pg);
    if (PQresultStatus(r) == PGRES_SINGLE_TUPLE) {
        int rc = take_result(st, r);
        if (rc != 1) {
            stream_abandon(st);
            return st->state = rc;
        }
        st->row = 0;
        return LP_SQL_ROW;
    }
    drain(c->pg);
    st->streaming = 0;
    PQclear(st->res);
    st->res = NULL;
    if (r != NULL && ok_status(r)) {
        note_changes(c, r);
        PQclear(r);
        return LP_SQL_DONE;
    }
    int rc = r != NULL ? fail_result(c, r) : LP_SQL_ERROR;
    if (r == NULL)
        set_err(c, PQerrorMessage(c->pg));
    PQclear(r);
    return st->state = settle_failure(c, rc, st->stream_in_txn);
}

/* Runs the statement; st->state becomes 1 or the error result. */
static int run(pg_stmt *st)
{
    pg_conn *c = st->c;
    if (st->sql == NULL || refused_after_loss(c, st->boundary))
        return LP_SQL_ERROR;
    int rc = ensure_prepared(st);
    if (rc == 0 && marshal(st) != 0)
        rc = LP_SQL_ERROR;
    if (rc != 0)
        return rc;
    if (st->stream)
        return run_streamed(st);
    int in_txn = PQtransactionStatus(c->pg) == PQTRANS_INTRANS;
    PGresult *r;
    if (in_txn && st->wrap && c->savepoints && !st->unguarded)
        r = run_in_savepoint(st);
    else
        r = PQexecPrepared(c->pg, st->name, st->nparams, st->values, st->lengths, st->formats, 0);
    if (r == NULL)
        return settle_failure(c, LP_SQL_ERROR, in_txn);
    if (!ok_status(r)) {
        rc = fail_result(c, r);
        PQclear(r);
        return settle_failure(c, rc, in_txn);
    }
    return take_result(st, r);
}

static int pg_step(lp_stmt *base)
{
    pg_stmt *st = (pg_stmt *)base;
    if (st->state == 0)
        st->state = run(st);
    if (st->state != 1)
        return st->state;
    if (st->streaming)
        return stream_next(st);
    if (PQresultStatus(st->res) != PGRES_TUPLES_OK)
        return LP_SQL_DONE;
    if (st->row < PQntuples(st->res))
        st->row++;
    return st->row < PQntuples(st->res) ? LP_SQL_ROW : LP_SQL_DONE;
}

/* ---- columns ---- */

/* The current row's value of col, NULL when there is none or it is NULL. */
static const char *value_at(pg_stmt *st, int col)
{
    if (st->state != 1 || st->res == NULL || st->row < 0 || st->row >= PQntuples(st->res) ||
        col < 0 || col >= PQnfields(st->res) || PQgetisnull(st->res, st->row, col))
        return NULL;
    return PQgetvalue(st->res, st->row, col);
}

static int hexval(char h)
{
    return h >= '0' && h <= '9' ? h - '0' : h >= 'a' && h <= 'f' ? h - 'a' + 10 : h - 'A' + 10;
}

/* A bytea column's bytes (hex output), NUL-terminated; NULL when out of
 * memory. */
static struct column *decoded(pg_stmt *st, int col, const char *v)
{
    struct column *d = &st->cols[col];
    if (d->row == st->row)
        return d;
    size_t n = strlen(v);
    size_t bytes = n >= 2 ? (n - 2) / 2 : 0;
    if (bytes + 1 > d->cap) {
        unsigned char *b = realloc(d->buf, bytes + 1);
        if (b == NULL)
            return NULL;
        d->buf = b;
        d->cap = bytes + 1;
    }
    for (size_t k = 0; k < bytes; k++)
        d->buf[k] = (unsigned char)(hexval(v[2 + 2 * k]) << 4 | hexval(v[3 + 2 * k]));
    d->buf[bytes] = 0;
    d->len = (int)bytes;
    d->row = st->row;
    return d;
}

static int is_type(pg_stmt *st, int col, unsigned oid)
{
    return PQftype(st->res, col) == oid;
}

static int pg_column_is_null(lp_stmt *base, int col)
{
    return value_at((pg_stmt *)base, col) == NULL;
}

static int64_t pg_column_int64(lp_stmt *base, int col)
{
    pg_stmt *st = (pg_stmt *)base;
    const char *v = value_at(st, col);
    if (v == NULL)
        return 0;
    if (is_type(st, col, OID_BOOL))
        return v[0] == 't';
    char *end;
    long long i = strtoll(v, &end, 10);
    if (*end != 0) { /* numeric or floating text: truncated, as SQLite casts */
        double d = strtod(v, NULL);
        return isnan(d) ? 0 : d >= 0x1p63 ? INT64_MAX : d < -0x1p63 ? INT64_MIN : (int64_t)d;
    }
    return i;
}

static double pg_column_double(lp_stmt *base, int col)
{
    pg_stmt *st = (pg_stmt *)base;
    const char *v = value_at(st, col);
    if (v == NULL)
        return 0.0;
    if (is_type(st, col, OID_BOOL))
        return v[0] == 't' ? 1.0 : 0.0;
    return strtod(v, NULL);
}

static const char *pg_column_text(lp_stmt *base, int col)
{
    pg_stmt *st = (pg_stmt *)base;
    const char *v = value_at(st, col);
    if (v == NULL)
        return NULL;
    if (is_type(st, col, OID_BOOL))
        return v[0] == 't' ? "1" : "0";
    if (is_type(st, col, OID_BYTEA)) {
        struct column *d = decoded(st, col, v);
        return d ? (const char *)d->buf : NULL;
    }
    return v;
}

static const void *pg_column_blob(lp_stmt *base, int col)
{
    return pg_column_text(base, col);
}

static int pg_column_bytes(lp_stmt *base, int col)
{
    pg_stmt *st = (pg_stmt *)base;
    const char *v = value_at(st, col);
    if (v == NULL)
        return 0;
    if (is_type(st, col, OID_BOOL))
        return 1;
    if (is_type(st, col, OID_BYTEA)) {
        struct column *d = decoded(st, col, v);
        return d ? d->len : 0;
    }
    return PQgetlength(st->res, st->row, col);
}

/* ---- connections ---- */

static int pg_exec(lp_conn *base, const char *sql)
{
    pg_conn *c = (pg_conn *)base;
    if (refused_after_loss(c, is_txn_boundary(sql)))
        return LP_SQL_ERROR;
    int in_txn = in_txn_status(c->pg);
    PGresult *r = PQexec(c->pg, sql);
    if (ok_status(r)) {
        note_changes(c, r);
        PQclear(r);
        return LP_SQL_DONE;
    }
    int rc = fail_result(c, r);
    PQclear(r);
    return settle_failure(c, rc, in_txn);
}

static int pg_begin_read(lp_conn *c)
{
    return pg_exec(c, "BEGIN ISOLATION LEVEL REPEATABLE READ, READ ONLY") == LP_SQL_DONE
               ? LP_SQL_DONE
               : LP_SQL_ERROR;
}

static int pg_end_read(lp_conn *c)
{
    return pg_exec(c, "COMMIT") == LP_SQL_DONE ? LP_SQL_DONE : LP_SQL_ERROR;
}

static int64_t pg_changes(lp_conn *base)
{
    return ((pg_conn *)base)->changes;
}

static int64_t pg_last_insert_id(lp_conn *base)
{
    pg_conn *c = (pg_conn *)base;
    if (c->lastval == NULL)
        c->lastval = (pg_stmt *)pg_prepare(base, "SELECT lastval()");
    if (c->lastval == NULL)
        return 0;
    int64_t saved = c->changes;
    int64_t id =
        pg_step(&c->lastval->base) == LP_SQL_ROW ? pg_column_int64(&c->lastval->base, 0) : 0;
    pg_reset(&c->lastval->base);
    c->changes = saved;
    return id;
}

static int pg_in_txn(lp_conn *base)
{
    return in_txn_status(((pg_conn *)base)->pg);
}

static const char *pg_errmsg(lp_conn *base)
{
    return ((pg_conn *)base)->err;
}

static void pg_close(lp_conn *base)
{
    pg_conn *c = (pg_conn *)base;
    PQfinish(c->pg); /* the server forgets the prepared statements with the session */
    c->pg = NULL;
    while (c->stmts != NULL) {
        pg_stmt *st = c->stmts;
        st->name[0] = 0;
        pg_finalize(&st->base);
    }
    free(c);
}

static const lp_sql_driver PG_DRIVER = {
    .name = "postgresql",
    .dialect = LP_SQL_POSTGRESQL,
    .bind_int64 = pg_bind_int64,
    .bind_double = pg_bind_double,
    .bind_text = pg_bind_text,
    .bind_blob = pg_bind_blob,
    .bind_null = pg_bind_null,
    .step = pg_step,
    .column_int64 = pg_column_int64,
    .column_double = pg_column_double,
    .column_text = pg_column_text,
    .column_blob = pg_column_blob,
    .column_bytes = pg_column_bytes,
    .column_is_null = pg_column_is_null,
    .reset = pg_reset,
    .clear_bindings = pg_clear_bindings,
    .finalize = pg_finalize,
    .set_unguarded = pg_set_unguarded,
    .prepare = pg_prepare,
    .exec = pg_exec,
    .begin_read = pg_begin_read,
    .end_read = pg_end_read,
    .changes = pg_changes,
    .last_insert_id = pg_last_insert_id,
    .in_txn = pg_in_txn,
    .errmsg = pg_errmsg,
    .close = pg_close,
};

/* Session settings every connection needs (see sql_pg.h). */
static const char SESSION_SQL[] =
    "SET client_encoding = 'UTF8'; SET bytea_output = 'hex'; SET extra_float_digits = 3; "
    "SET standard_conforming_strings = on; SET client_min_messages = warning";

/* The server's warnings go to the log, not to stderr. */
static void log_notice(void *arg, const PGresult *r)
{
    (void)arg;
    const char *msg = PQresultErrorField(r, PG_DIAG_MESSAGE_PRIMARY);
    const char *severity = PQresultErrorField(r, PG_DIAG_SEVERITY_NONLOCALIZED);
    lp_log(LP_LOG_WARN, "postgresql_notice", LP_LOG_STR("severity", severity ? severity : ""),
           LP_LOG_STR("message", msg ? msg : ""));
}

/* The session settings of a new connection (see sql_pg.h). 0 or -1. */
static int session_setup(pg_conn *c, char *err, size_t errlen)
{
    PGresult *r = PQexec(c->pg, SESSION_SQL);
    int ok = ok_status(r);
    PQclear(r);
    if (ok) {
        r = PQexec(c->pg, "SELECT current_setting('synchronous_commit')");
        const char *sync = ok_status(r) && PQntuples(r) == 1 ? PQgetvalue(r, 0, 0) : NULL;
        ok = sync != NULL && (strcmp(sync, "off") != 0 ||
                              pg_exec(&c->base, "SET synchronous_commit = on") == LP_SQL_DONE);
        PQclear(r);
    }
    if (!ok)
        snprintf(err, errlen, "cannot set up the PostgreSQL session: %s", PQerrorMessage(c->pg));
    return ok ? 0 : -1;
}

static void connect_failed(pg_conn *c, char *err, size_t errlen)
{
    snprintf(err, errlen, "cannot connect to PostgreSQL: %s",
             c->pg ? PQerrorMessage(c->pg) : "out of memory");
    size_t n = strlen(err);
    if (n > 0 && err[n - 1] == '\n')
        err[n - 1] = 0;
}

int lp_sql_pg_open(const char *conninfo, lp_conn **out, char *err, size_t errlen)
{
    *out = NULL;
    pg_conn *c = calloc(1, sizeof *c);
    if (c == NULL) {
        snprintf(err, errlen, "out of memory");
        return LP_ENO_MEMORY;
    }
    c->base.drv = &PG_DRIVER;
    c->savepoints = 1;
    const char *keys[] = {"dbname", "fallback_application_name", NULL};
    const char *vals[] = {conninfo, "ldpref-server", NULL};
    c->pg = PQconnectdbParams(keys, vals, 1);
    int ok = c->pg != NULL && PQstatus(c->pg) == CONNECTION_OK;
    if (!ok)
        connect_failed(c, err, errlen);
    else
        PQsetNoticeReceiver(c->pg, log_notice, NULL);
    if (!ok || session_setup(c, err, errlen) != 0) {
        PQfinish(c->pg);
        free(c);
        return LP_ESTORAGE;
    }
    *out = &c->base;
    return LP_OK;
}

int lp_sql_pg_connected(lp_conn *c)
{
    return PQstatus(((pg_conn *)c)->pg) == CONNECTION_OK;
}

int lp_sql_pg_reconnect(lp_conn *base, char *err, size_t errlen)
{
    pg_conn *c = (pg_conn *)base;
    for (pg_stmt *st = c->stmts; st != NULL; st = st->next) {
        stmt_clear_run(st);
        st->name[0] = 0; /* the new session has none */
        st->fixed = 0;
    }
    PQreset(c->pg);
    c->txn_lost = 0; /* the caller knows: its transaction is gone with the session */
    if (PQstatus(c->pg) != CONNECTION_OK) {
        connect_failed(c, err, errlen);
        return LP_ESTORAGE;
    }
    return session_setup(c, err, errlen) == 0 ? LP_OK : LP_ESTORAGE;
}

PGconn *lp_sql_pg_conn(lp_conn *c)
{
    return ((pg_conn *)c)->pg;
}

void lp_sql_pg_stream(lp_stmt *st, int on)
{
    ((pg_stmt *)st)->stream = on != 0;
}

void lp_sql_pg_statement_savepoints(lp_conn *c, int on)
{
    ((pg_conn *)c)->savepoints = on != 0;
}

uint64_t lp_sql_pg_conflicts(lp_conn *c)
{
    return ((pg_conn *)c)->conflicts;
}
