/* audit.c — the audit log repository. See audit.h. */
#include "audit.h"

#include "db.h"
#include "error.h"
#include "log.h"
#include "schema_pg.h"
#include "schema_sql.h"

#include <sodium.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define AUDIT_TAG "ldpref-audit-v1"

static const char SQL_HEAD[] = "SELECT id, hash FROM audit ORDER BY id DESC LIMIT 1";
static const char SQL_INSERT[] =
    "INSERT INTO audit (id, at_ms, token_id, action, params, status, error, prev_hash, hash) "
    "VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9)";
#define ROW_COLS "SELECT id, at_ms, token_id, action, params, status, error, prev_hash, hash "
static const char SQL_PAGE[] = ROW_COLS "FROM audit WHERE id > ?1 ORDER BY id LIMIT ?2";
static const char SQL_WALK[] = ROW_COLS "FROM audit ORDER BY id";
static const char SQL_HAS_TABLE[] =
    "SELECT count(*) FROM sqlite_master WHERE type = 'table' AND name = 'audit'";
static const char SQL_HAS_TABLE_PG[] =
    "SELECT count(*) FROM pg_tables "
    "WHERE schemaname = current_schema() AND tablename = 'audit'";
/* PostgreSQL: the trigger's definition, whether it is enabled ('D': not),
 * and the source of the function it runs */
static const char SQL_TRIGGER_PG[] =
    "SELECT pg_get_triggerdef(t.oid), t.tgenabled, p.prosrc FROM pg_trigger t "
    "JOIN pg_proc p ON p.oid = t.tgfoid JOIN pg_class c ON c.oid = t.tgrelid "
    "JOIN pg_namespace n ON n.oid = c.relnamespace WHERE t.tgname = ?1 "
    "AND c.relname = 'audit' AND n.nspname = current_schema()";
static const char SQL_TRIGGER[] =
    "SELECT sql FROM sqlite_master WHERE type = 'trigger' AND name = ?1 AND tbl_name = 'audit'";

/* ---- the hash ---- */

static void put_int(crypto_generichash_state *h, int64_t v)
{
    uint64_t u = (uint64_t)v;
    unsigned char b[8];
    for (int i = 7; i >= 0; i--, u >>= 8)
        b[i] = (unsigned char)(u & 0xff);
    crypto_generichash_update(h, b, sizeof b);
}

static void put_text(crypto_generichash_state *h, const char *s)
{
    size_t n = s ? strlen(s) : 0;
    put_int(h, (int64_t)n);
    if (n > 0)
        crypto_generichash_update(h, (const unsigned char *)s, n);
}

void lp_audit_hash(const uint8_t prev[LP_HASH_BYTES], const lp_audit_row *r,
                   uint8_t out[LP_HASH_BYTES])
{
    crypto_generichash_state h;
    crypto_generichash_init(&h, NULL, 0, LP_HASH_BYTES);
    crypto_generichash_update(&h, prev, LP_HASH_BYTES);
    put_text(&h, AUDIT_TAG);
    put_int(&h, r->id);
    put_int(&h, r->at_ms);
    put_int(&h, r->token_id);
    put_text(&h, r->action);
    put_text(&h, r->params);
    put_int(&h, r->status);
    put_text(&h, r->error);
    crypto_generichash_final(&h, out, LP_HASH_BYTES);
}

/* ---- append ---- */

struct append_job {
    lp_engine *engine;
    lp_audit_row row;
};

/* Reads the head and inserts the row after it, on the writer: one job,
 * so no other append can come between the read and the insert. */
/* Several servers (PostgreSQL): the chain's transaction-level advisory
 * lock (the training lock's key plus one; coord.c), taken before the head
 * is read and held until commit, so that servers append one at a time, in
 * the order they asked, and never read the same head. */
static const char SQL_CHAIN_LOCK_PG[] = "SELECT pg_advisory_xact_lock(7234315233945600003)";

static int append_fn(lp_conn *db, void *ctx)
{
    struct append_job *j = ctx;
    lp_audit_row *r = &j->row;
    lp_stmt *st;
    if (lp_conn_dialect(db) == LP_SQL_POSTGRESQL) {
        if ((st = lp_engine_stmt(j->engine, db, SQL_CHAIN_LOCK_PG)) == NULL)
            return LP_ESTORAGE;
        int locked = lp_stmt_step(st);
        lp_stmt_reset(st);
        if (locked != LP_SQL_ROW)
            return lp_engine_fail(db, "audit chain lock");
    }
    st = lp_engine_stmt(j->engine, db, SQL_HEAD);
    if (st == NULL)
        return LP_ESTORAGE;
    memset(r->prev_hash, 0, sizeof r->prev_hash);
    r->id = 1;
    int step = lp_stmt_step(st);
    if (step == LP_SQL_ROW && lp_stmt_column_bytes(st, 1) == LP_HASH_BYTES) {
        r->id = lp_stmt_column_int64(st, 0) + 1;
        memcpy(r->prev_hash, lp_stmt_column_blob(st, 1), LP_HASH_BYTES);
    } else if (step != LP_SQL_DONE) {
        lp_stmt_reset(st);
        return lp_engine_fail(db, "audit head");
    }
    lp_stmt_reset(st);
    lp_audit_hash(r->prev_hash, r, r->hash);
    if ((st = lp_engine_stmt(j->engine, db, SQL_INSERT)) == NULL)
        return LP_ESTORAGE;
    lp_stmt_bind_int64(st, 1, r->id);
    lp_stmt_bind_int64(st, 2, r->at_ms);
    lp_stmt_bind_int64(st, 3, r->token_id);
    lp_stmt_bind_text(st, 4, r->action, -1);
    lp_stmt_bind_text(st, 5, r->params, -1);
    lp_stmt_bind_int64(st, 6, r->status);
    lp_stmt_bind_text(st, 7, r->error, -1);
    lp_stmt_bind_blob(st, 8, r->prev_hash, LP_HASH_BYTES);
    lp_stmt_bind_blob(st, 9, r->hash, LP_HASH_BYTES);
    step = lp_stmt_step(st);
    lp_stmt_reset(st);
    return step == LP_SQL_DONE ? LP_OK : lp_engine_fail(db, "audit insert");
}

int lp_store_audit_append(lp_store *s, int64_t token_id, const char *action, const char *params,
                          int64_t status, const char *error, int64_t at_ms, lp_audit_head *head)
{
    if (action == NULL || params == NULL || error == NULL || token_id < 0 ||
        strlen(action) > LP_AUDIT_ACTION_MAX || strlen(params) > LP_AUDIT_PARAMS_MAX ||
        strlen(error) > LP_AUDIT_ERROR_MAX)
        return LP_EINVALID_ARGUMENT;
    struct append_job j = {.engine = s->engine,
                           .row = {.at_ms = at_ms,
                                   .token_id = token_id,
                                   .action = (char *)action,
                                   .params = (char *)params,
                                   .error = (char *)error,
                                   .status = status}};
    /* Bare: its one write is a single INSERT into a table label ingest
     * never reads, so the label writer's cached rows stay valid and are
     * not flushed early for it. */
    int rc = lp_engine_write(s->engine, append_fn, &j, 1, LP_JOB_BARE);
    if (rc != LP_OK) {
        lp_log(LP_LOG_ERROR, "audit_append_failed", LP_LOG_STR("action", action),
               LP_LOG_INT("status", status), LP_LOG_INT("token_id", token_id),
               LP_LOG_STR("error", lp_error_name(rc)));
        return rc;
    }
    char hex[LP_AUDIT_HEX];
    sodium_bin2hex(hex, sizeof hex, j.row.hash, LP_HASH_BYTES);
    lp_log(LP_LOG_INFO, "audit_append", LP_LOG_INT("id", j.row.id), LP_LOG_STR("head", hex),
           LP_LOG_STR("action", action), LP_LOG_INT("status", status),
           LP_LOG_INT("token_id", token_id));
    if (head != NULL) {
        head->id = j.row.id;
        memcpy(head->hash, j.row.hash, LP_HASH_BYTES);
    }
    return LP_OK;
}

/* ---- reads ---- */

/* The row at st's cursor into r (strings copied). LP_ENO_MEMORY, or
 * LP_ESTORAGE when a field is NULL or a hash is not 32 bytes. */
static int read_row(lp_stmt *st, lp_audit_row *r)
{
    memset(r, 0, sizeof *r);
    r->id = lp_stmt_column_int64(st, 0);
    r->at_ms = lp_stmt_column_int64(st, 1);
    r->token_id = lp_stmt_column_int64(st, 2);
    r->status = lp_stmt_column_int64(st, 5);
    for (int c = 0; c < 9; c++)
        if (lp_stmt_column_is_null(st, c))
            return LP_ESTORAGE;
    if (lp_stmt_column_bytes(st, 7) != LP_HASH_BYTES ||
        lp_stmt_column_bytes(st, 8) != LP_HASH_BYTES)
        return LP_ESTORAGE;
    memcpy(r->prev_hash, lp_stmt_column_blob(st, 7), LP_HASH_BYTES);
    memcpy(r->hash, lp_stmt_column_blob(st, 8), LP_HASH_BYTES);
    r->action = lp_engine_column_dup(st, 3);
    r->params = lp_engine_column_dup(st, 4);
    r->error = lp_engine_column_dup(st, 6);
    return r->action && r->params && r->error ? LP_OK : LP_ENO_MEMORY;
}

static void row_clear(lp_audit_row *r)
{
    free(r->action);
    free(r->params);
    free(r->error);
    r->action = r->params = r->error = NULL;
}

void lp_audit_rows_free(lp_audit_row *rows, size_t n)
{
    for (size_t i = 0; rows != NULL && i < n; i++)
        row_clear(&rows[i]);
    free(rows);
}

/* The head from st (SQL_HEAD, prepared on the caller's connection). */
static int read_head(lp_stmt *st, lp_audit_head *head)
{
    memset(head, 0, sizeof *head);
    int step = lp_stmt_step(st), rc = LP_OK;
    if (step == LP_SQL_ROW && lp_stmt_column_bytes(st, 1) == LP_HASH_BYTES) {
        head->id = lp_stmt_column_int64(st, 0);
        memcpy(head->hash, lp_stmt_column_blob(st, 1), LP_HASH_BYTES);
    } else if (step != LP_SQL_DONE) {
        rc = LP_ESTORAGE;
    }
    lp_stmt_reset(st);
    return rc;
}

struct page_query {
    lp_engine *engine;
    int64_t after_id, limit;
    lp_audit_row *rows;
    size_t n;
    lp_audit_head *head;
};

static int page_fn(lp_conn *db, void *ctx)
{
    struct page_query *q = ctx;
    lp_stmt *st = lp_engine_stmt(q->engine, db, SQL_HEAD);
    if (st == NULL || read_head(st, q->head) != LP_OK)
        return st ? lp_engine_fail(db, "audit head") : LP_ESTORAGE;
    if ((st = lp_engine_stmt(q->engine, db, SQL_PAGE)) == NULL)
        return LP_ESTORAGE;
    lp_stmt_bind_int64(st, 1, q->after_id);
    lp_stmt_bind_int64(st, 2, q->limit);
    q->rows = calloc((size_t)q->limit, sizeof *q->rows);
    int rc = q->rows ? LP_OK : LP_ENO_MEMORY, step;
    while (rc == LP_OK && (step = lp_stmt_step(st)) == LP_SQL_ROW) {
        rc = read_row(st, &q->rows[q->n]);
        q->n++;
    }
    if (rc == LP_OK && step != LP_SQL_DONE)
        rc = lp_engine_fail(db, "audit page");
    lp_stmt_reset(st);
    return rc;
}

int lp_store_audit_page(lp_store *s, int64_t after_id, int64_t limit, lp_audit_row **rows,
                        size_t *n, lp_audit_head *head)
{
    *rows = NULL;
    *n = 0;
    if (after_id < 0 || limit < 1 || limit > 100000)
        return LP_EINVALID_ARGUMENT;
    struct page_query q = {.engine = s->engine, .after_id = after_id, .limit = limit, .head = head};
    int rc = lp_engine_read_snapshot(s->engine, page_fn, &q);
    if (rc != LP_OK) {
        lp_audit_rows_free(q.rows, q.n);
        return rc;
    }
    *rows = q.rows;
    *n = q.n;
    return LP_OK;
}

/* ---- verification ---- */

/* The migration that creates the audit table: its triggers are compared
 * with the database's. */
static const char *audit_migration(void)
{
    for (int i = 0; i < LP_MIGRATION_COUNT; i++)
        if (strstr(LP_MIGRATIONS[i], "CREATE TABLE audit (") != NULL)
            return LP_MIGRATIONS[i];
    return NULL;
}

/* s with every run of white space one blank and "ON <schema>." as "ON "
 * (how pg_get_triggerdef names the table), into out. */
static void normalize_sql(const char *s, size_t n, char *out, size_t len)
{
    size_t o = 0;
    for (size_t i = 0; i < n && o + 1 < len; i++) {
        int space = s[i] == ' ' || s[i] == '\n' || s[i] == '\t' || s[i] == '\r';
        if (space && (o == 0 || out[o - 1] == ' '))
            continue;
        out[o++] = space ? ' ' : s[i];
    }
    while (o > 0 && out[o - 1] == ' ')
        o--;
    out[o] = 0;
    char *on = strstr(out, " ON ");
    char *dot = on ? strchr(on + 4, '.') : NULL;
    if (dot != NULL && memchr(on + 4, ' ', (size_t)(dot - on - 4)) == NULL)
        memmove(on + 4, dot + 1, strlen(dot + 1) + 1);
}

/* 1 when text (len bytes) of one of the PostgreSQL schema files holds
 * needle; with trigger, compares the "CREATE TRIGGER name ...;" statement
 * of the files with needle instead (both normalized). */
static int pg_schema_has(const char *needle, const char *trigger)
{
    char want[1024], have[1024], head[128];
    snprintf(head, sizeof head, "CREATE TRIGGER %s ", trigger ? trigger : "");
    if (trigger)
        normalize_sql(needle, strlen(needle), want, sizeof want);
    for (const lp_pg_schema_file *f = lp_pg_schema_files; f->name != NULL; f++) {
        const char *text = (const char *)f->sql, *end = text + f->len;
        if (!trigger) {
            if (memmem(text, f->len, needle, strlen(needle)) != NULL)
                return 1;
            continue;
        }
        const char *p = memmem(text, f->len, head, strlen(head));
        const char *semi = p ? memchr(p, ';', (size_t)(end - p)) : NULL;
        if (semi == NULL)
            continue;
        normalize_sql(p, (size_t)(semi - p), have, sizeof have);
        if (strcmp(have, want) == 0)
            return 1;
    }
    return 0;
}

/* PostgreSQL: trigger name on audit exists, is enabled, is defined as in
 * schema/postgresql/, and its function's source is the schema's. */
static int trigger_intact_pg(lp_conn *db, const char *name)
{
    lp_stmt *st = lp_stmt_prepare(db, SQL_TRIGGER_PG);
    int ok = 0;
    if (st != NULL) {
        lp_stmt_bind_text(st, 1, name, -1);
        if (lp_stmt_step(st) == LP_SQL_ROW) {
            const char *def = lp_stmt_column_text(st, 0), *on = lp_stmt_column_text(st, 1);
            const char *src = lp_stmt_column_text(st, 2);
            ok = def && on && src && strcmp(on, "D") != 0 && pg_schema_has(def, name) &&
                 pg_schema_has(src, NULL);
        }
    }
    lp_stmt_finalize(st);
    return ok;
}

/* 1 when trigger name exists and its text is the schema's own. */
static int trigger_intact(lp_conn *db, const char *name)
{
    if (lp_conn_dialect(db) == LP_SQL_POSTGRESQL)
        return trigger_intact_pg(db, name);
    lp_stmt *st = NULL;
    int ok = 0;
    const char *schema = audit_migration();
    if (schema && (st = lp_stmt_prepare(db, SQL_TRIGGER)) != NULL) {
        lp_stmt_bind_text(st, 1, name, -1);
        if (lp_stmt_step(st) == LP_SQL_ROW) {
            const char *sql = lp_stmt_column_text(st, 0);
            ok = sql != NULL && strstr(schema, sql) != NULL;
        }
    }
    lp_stmt_finalize(st);
    return ok;
}

static int broken(lp_audit_check *out, int64_t id, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static int broken(lp_audit_check *out, int64_t id, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(out->problem, sizeof out->problem, fmt, ap);
    va_end(ap);
    out->intact = 0;
    out->bad_id = id;
    return 1;
}

/* Checks row r against the row before it (prev_id 0: none); 1 and out
 * filled when it breaks the chain. */
static int check_row(const lp_audit_row *r, int64_t prev_id, const uint8_t prev[LP_HASH_BYTES],
                     lp_audit_check *out)
{
    static const uint8_t zero[LP_HASH_BYTES];
    uint8_t h[LP_HASH_BYTES];
    if (prev_id == 0 && r->id != 1)
        return broken(out, r->id, "row %lld is the first row: rows 1..%lld are missing (deleted)",
                      (long long)r->id, (long long)r->id - 1);
    if (prev_id != 0 && r->id != prev_id + 1)
        return broken(out, r->id, "row %lld follows row %lld: %lld row(s) missing (deleted)",
                      (long long)r->id, (long long)prev_id, (long long)(r->id - prev_id - 1));
    if (sodium_memcmp(r->prev_hash, prev_id ? prev : zero, LP_HASH_BYTES) != 0)
        return prev_id == 0 ? broken(out, r->id,
                                     "row 1's prev_hash is not zero (rows before it "
                                     "were deleted, or it was replaced)")
                            : broken(out, r->id,
                                     "row %lld does not chain to row %lld: its prev_hash is not "
                                     "row %lld's hash (a row was deleted, inserted or reordered)",
                                     (long long)r->id, (long long)prev_id, (long long)prev_id);
    lp_audit_hash(r->prev_hash, r, h);
    if (sodium_memcmp(h, r->hash, LP_HASH_BYTES) != 0)
        return broken(out, r->id, "row %lld was edited: its fields do not match its hash",
                      (long long)r->id);
    return 0;
}

static int walk(lp_conn *db, lp_audit_check *out)
{
    lp_stmt *st = NULL;
    if ((st = lp_stmt_prepare(db, SQL_WALK)) == NULL)
        return LP_ESTORAGE;
    int rc = LP_OK, step, stop = 0;
    lp_audit_row r;
    while (!stop && (step = lp_stmt_step(st)) == LP_SQL_ROW) {
        int64_t prev_id = out->head.id;
        int read = read_row(st, &r);
        if (read == LP_ENO_MEMORY) {
            rc = read;
        } else if (read != LP_OK) {
            stop = broken(out, r.id, "row %lld has a NULL field or a hash that is not 32 bytes",
                          (long long)r.id);
        } else if (!(stop = check_row(&r, prev_id, out->head.hash, out))) {
            out->rows++;
            out->head.id = r.id;
            memcpy(out->head.hash, r.hash, LP_HASH_BYTES);
        }
        row_clear(&r);
        stop |= rc != LP_OK;
    }
    if (rc == LP_OK && !stop && step != LP_SQL_DONE)
        rc = LP_ESTORAGE;
    lp_stmt_finalize(st);
    return rc;
}

int lp_audit_verify_file(const char *path, lp_audit_check *out, char *err, size_t errlen)
{
    memset(out, 0, sizeof *out);
    out->intact = 1;
    lp_conn *db = NULL;
    lp_stmt *st = NULL;
    int rc = LP_ESTORAGE, tables = 0;
    if (sodium_init() < 0) {
        snprintf(err, errlen, "libsodium failed to initialize");
        return LP_ERNG;
    }
    if (lp_engine_file_open(path, &db, err, errlen) != LP_OK)
        return LP_ESTORAGE;
    if (lp_conn_begin_read(db) != LP_SQL_DONE ||
        (st = lp_stmt_prepare(db, lp_conn_dialect(db) == LP_SQL_POSTGRESQL ? SQL_HAS_TABLE_PG
                                                                           : SQL_HAS_TABLE)) ==
            NULL ||
        lp_stmt_step(st) != LP_SQL_ROW) {
        snprintf(err, errlen, "cannot read %s: %s", path, lp_conn_errmsg(db));
        goto done;
    }
    tables = lp_stmt_column_int(st, 0);
    if (tables != 1) {
        snprintf(err, errlen, "%s has no audit table (a database of an older server?)", path);
        goto done;
    }
    if ((rc = walk(db, out)) != LP_OK) {
        snprintf(err, errlen, "cannot read the audit rows of %s: %s", path, lp_conn_errmsg(db));
        goto done;
    }
    static const char *const triggers[] = {"audit_no_update", "audit_no_delete"};
    for (size_t i = 0; out->intact && i < sizeof triggers / sizeof triggers[0]; i++)
        if (!trigger_intact(db, triggers[i]))
            broken(out, 0,
                   "the append-only trigger %s is missing or altered: rows may have been "
                   "rewritten",
                   triggers[i]);
done:
    lp_stmt_finalize(st);
    lp_conn_end_read(db);
    lp_conn_close(db);
    return rc;
}
