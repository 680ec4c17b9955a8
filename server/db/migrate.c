/*
 * migrate.c — a SQLite database copied into PostgreSQL (migrate.h).
 *
 * The tables and their columns come from the target's catalog (the
 * server's PostgreSQL schema) and are checked against the source's (and
 * every source value's type against its column). In the target's
 * transaction: every table locked, found empty (the schema's default
 * campaign aside, then deleted), its foreign keys, keys and indexes
 * dropped and its triggers disabled; each table copied with COPY in
 * PostgreSQL's binary format, from the source's rows in key order; the
 * indexes, keys and foreign keys made again (which checks every row
 * against them), the triggers enabled, the identity sequences set; each
 * table read back with COPY in the same order and format, whose checksum
 * must equal the checksum of what was sent; commit. Building the indexes
 * and constraints after the data, as pg_restore does, builds each index
 * once, and copies the one cycle of the schema (training_runs and models
 * refer to each other).
 */
#include "migrate.h"

#include "copy_pg.h"
#include "engine.h"
#include "error.h"
#include "schema_pg.h"
#include "schema_sql.h"
#include "sql_pg.h"

#include <sodium.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_COLS 64
#define NAME_MAX_LEN 63
#define SQL_MAX 4096                 /* a column list or an order */
#define STMT_MAX (3 * SQL_MAX + 256) /* a statement built from them */
#define COPY_CHUNK (256 * 1024)

/* One table as the copy needs it. */
typedef struct table_def {
    char name[NAME_MAX_LEN + 1];
    int ncols;
    char types[MAX_COLS];            /* 'i' bigint, 'd' double, 't' text, 'b' bytea */
    char cols[SQL_MAX];              /* "a, b, c" */
    char order_sqlite[SQL_MAX];      /* the key order, as SQLite writes it */
    char order_pg[SQL_MAX];          /* the same order in PostgreSQL */
    char identity[NAME_MAX_LEN + 1]; /* its identity column, "" when none */
    char col_names[MAX_COLS][NAME_MAX_LEN + 1];
} table_def;

/* An index or constraint, dropped for the copy and made again after. */
enum { REBUILT_INDEX = 1, REBUILT_KEY = 2, REBUILT_FOREIGN_KEY = 3 }; /* the order made */
typedef struct rebuilt {
    int kind;
    char table[NAME_MAX_LEN + 1];
    char name[NAME_MAX_LEN + 1];
    char *def; /* pg_get_indexdef (a whole statement) or pg_get_constraintdef */
} rebuilt;

typedef struct migration {
    lp_conn *src, *pg;
    table_def *tables;
    int ntables;
    rebuilt *rebuilt;
    int nrebuilt;
    char *err;
    size_t errlen;
} migration;

/* The rows the schema itself creates, which an empty target holds
 * (schema/postgresql/014_init.sql: the default campaign). */
static const struct {
    const char *table;
    const char *where;
} SEEDED[] = {
    {"campaigns", "id = 1 AND name = 'default'"},
    {"campaign_fill", "campaign = 1"},
};

static int failf(migration *m, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(m->err, m->errlen, fmt, ap);
    va_end(ap);
    return LP_ESTORAGE;
}

/* Names are put into SQL unquoted: only plain lowercase names pass. */
static int plain_name(const char *s)
{
    size_t n = strlen(s);
    if (n == 0 || n > NAME_MAX_LEN)
        return 0;
    for (size_t i = 0; i < n; i++)
        if (!((s[i] >= 'a' && s[i] <= 'z') || (s[i] >= '0' && s[i] <= '9') || s[i] == '_'))
            return 0;
    return 1;
}

/* Appends to buf (of SQL_MAX bytes); -1 when it does not fit. */
static int appendf(char *buf, const char *fmt, ...)
{
    size_t len = strlen(buf);
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(buf + len, SQL_MAX - len, fmt, ap);
    va_end(ap);
    return n < 0 || (size_t)n >= SQL_MAX - len ? -1 : 0;
}

static int exec(migration *m, lp_conn *c, const char *sql)
{
    if (lp_conn_exec(c, sql) != LP_SQL_DONE)
        return failf(m, "%.200s: %s", sql, lp_conn_errmsg(c));
    return LP_OK;
}

/* The single int64 a query returns (bound to text arg when not NULL). */
static int query_int64(migration *m, lp_conn *c, const char *sql, const char *arg, int64_t *out)
{
    lp_stmt *st = lp_stmt_prepare(c, sql);
    if (st == NULL)
        return failf(m, "%.200s: %s", sql, lp_conn_errmsg(c));
    if (arg != NULL)
        lp_stmt_bind_text(st, 1, arg, -1);
    int rc = lp_stmt_step(st);
    if (rc == LP_SQL_ROW)
        *out = lp_stmt_column_int64(st, 0);
    else
        failf(m, "%.200s: %s", sql, rc == LP_SQL_DONE ? "no row" : lp_conn_errmsg(c));
    lp_stmt_finalize(st);
    return rc == LP_SQL_ROW ? LP_OK : LP_ESTORAGE;
}

static table_def *find_table(migration *m, const char *name)
{
    for (int i = 0; i < m->ntables; i++)
        if (strcmp(m->tables[i].name, name) == 0)
            return &m->tables[i];
    return NULL;
}

/* ---- the schema ---- */

static char type_code(const char *pg_type)
{
    if (strcmp(pg_type, "bigint") == 0)
        return 'i';
    if (strcmp(pg_type, "double precision") == 0)
        return 'd';
    if (strcmp(pg_type, "text") == 0)
        return 't';
    if (strcmp(pg_type, "bytea") == 0)
        return 'b';
    return 0;
}

static int load_columns(migration *m, table_def *t)
{
    static const char SQL_COLS[] =
        "SELECT column_name, data_type, is_identity FROM information_schema.columns "
        "WHERE table_schema = current_schema() AND table_name = ?1 ORDER BY ordinal_position";
    lp_stmt *st = lp_stmt_prepare(m->pg, SQL_COLS);
    if (st == NULL)
        return failf(m, "columns: %s", lp_conn_errmsg(m->pg));
    lp_stmt_bind_text(st, 1, t->name, -1);
    int rc, ok = LP_OK;
    while (ok == LP_OK && (rc = lp_stmt_step(st)) == LP_SQL_ROW) {
        const char *col = lp_stmt_column_text(st, 0);
        const char *type = lp_stmt_column_text(st, 1);
        const char *identity = lp_stmt_column_text(st, 2);
        if (t->ncols == MAX_COLS || !plain_name(col))
            ok = failf(m, "table %s: column \"%.64s\" cannot be copied", t->name, col);
        else if ((t->types[t->ncols] = type_code(type)) == 0)
            ok = failf(m, "table %s: column %s has type %.64s, which the copy does not know",
                       t->name, col, type);
        else {
            snprintf(t->col_names[t->ncols], sizeof t->col_names[0], "%s", col);
            if (strcmp(identity, "YES") == 0)
                snprintf(t->identity, sizeof t->identity, "%s", col);
            if (appendf(t->cols, "%s%s", t->ncols ? ", " : "", col) != 0)
                ok = failf(m, "table %s: too many columns", t->name);
            t->ncols++;
        }
    }
    if (ok == LP_OK && rc != LP_SQL_DONE)
        ok = failf(m, "columns of %s: %s", t->name, lp_conn_errmsg(m->pg));
    lp_stmt_finalize(st);
    return ok;
}

static int col_index(const table_def *t, const char *col)
{
    for (int i = 0; i < t->ncols; i++)
        if (strcmp(t->col_names[i], col) == 0)
            return i;
    return -1;
}

static int add_order(table_def *t, int i)
{
    int text = t->types[i] == 't';
    const char *sep = t->order_pg[0] ? ", " : "";
    if (appendf(t->order_sqlite, "%s%s%s ASC NULLS FIRST", sep, t->col_names[i],
                text ? " COLLATE BINARY" : "") != 0 ||
        appendf(t->order_pg, "%s%s%s ASC NULLS FIRST", sep, t->col_names[i],
                text ? " COLLATE \"C\"" : "") != 0)
        return -1;
    return 0;
}

/* The copy's order: the primary key, or every column for a table without. */
static int load_order(migration *m, table_def *t)
{
    static const char SQL_PK[] =
        "SELECT a.attname FROM pg_index i JOIN pg_attribute a ON a.attrelid = i.indrelid "
        "AND a.attnum = ANY (i.indkey) WHERE i.indrelid = to_regclass(?1) AND i.indisprimary "
        "ORDER BY array_position(CAST(i.indkey AS int2[]), a.attnum)";
    lp_stmt *st = lp_stmt_prepare(m->pg, SQL_PK);
    if (st == NULL)
        return failf(m, "primary key: %s", lp_conn_errmsg(m->pg));
    lp_stmt_bind_text(st, 1, t->name, -1);
    int rc, ok = LP_OK;
    while (ok == LP_OK && (rc = lp_stmt_step(st)) == LP_SQL_ROW) {
        int i = col_index(t, lp_stmt_column_text(st, 0));
        if (i < 0 || add_order(t, i) != 0)
            ok = failf(m, "table %s: its primary key cannot be read", t->name);
    }
    if (ok == LP_OK && rc != LP_SQL_DONE)
        ok = failf(m, "primary key of %s: %s", t->name, lp_conn_errmsg(m->pg));
    lp_stmt_finalize(st);
    for (int i = 0; ok == LP_OK && t->order_pg[0] == '\0' && i < t->ncols; i++)
        if (add_order(t, i) != 0)
            ok = failf(m, "table %s: too many columns", t->name);
    return ok;
}

static int load_target_tables(migration *m)
{
    static const char SQL_TABLES[] =
        "SELECT relname FROM pg_class WHERE relnamespace = CAST(current_schema() AS regnamespace) "
        "AND relkind = 'r' AND relname <> 'schema_version' ORDER BY oid";
    lp_stmt *st = lp_stmt_prepare(m->pg, SQL_TABLES);
    if (st == NULL)
        return failf(m, "tables: %s", lp_conn_errmsg(m->pg));
    int rc, ok = LP_OK;
    while (ok == LP_OK && (rc = lp_stmt_step(st)) == LP_SQL_ROW) {
        const char *name = lp_stmt_column_text(st, 0);
        if (m->ntables == LP_MIGRATE_MAX_TABLES || !plain_name(name)) {
            ok = failf(m, "table \"%.64s\" cannot be copied", name);
            break;
        }
        table_def *t = &m->tables[m->ntables++];
        memset(t, 0, sizeof *t);
        snprintf(t->name, sizeof t->name, "%s", name);
    }
    if (ok == LP_OK && rc != LP_SQL_DONE)
        ok = failf(m, "tables: %s", lp_conn_errmsg(m->pg));
    lp_stmt_finalize(st);
    for (int i = 0; ok == LP_OK && i < m->ntables; i++)
        if ((ok = load_columns(m, &m->tables[i])) == LP_OK)
            ok = load_order(m, &m->tables[i]);
    return ok;
}

/* The source's columns of t, in order, must be the target's. */
static int check_source_columns(migration *m, const table_def *t)
{
    lp_stmt *st = lp_stmt_prepare(m->src, "SELECT name FROM pragma_table_info(?1) ORDER BY cid");
    if (st == NULL)
        return failf(m, "source columns: %s", lp_conn_errmsg(m->src));
    lp_stmt_bind_text(st, 1, t->name, -1);
    int n = 0, rc, ok = LP_OK;
    while (ok == LP_OK && (rc = lp_stmt_step(st)) == LP_SQL_ROW) {
        const char *col = lp_stmt_column_text(st, 0);
        if (n >= t->ncols || strcmp(col, t->col_names[n]) != 0)
            ok = failf(m, "table %s: column %d is \"%.64s\" in the source and %s in the target",
                       t->name, n + 1, col, n < t->ncols ? t->col_names[n] : "missing");
        n++;
    }
    if (ok == LP_OK && rc != LP_SQL_DONE)
        ok = failf(m, "source columns of %s: %s", t->name, lp_conn_errmsg(m->src));
    if (ok == LP_OK && n != t->ncols)
        ok = failf(m, "table %s: %d columns in the source, %d in the target", t->name, n, t->ncols);
    lp_stmt_finalize(st);
    return ok;
}

/* The SQLite types a column of the target's type may hold (typeof). */
static const char *source_types(char type)
{
    switch (type) {
    case 'i':
        return "'integer', 'null'";
    case 'd':
        return "'real', 'integer', 'null'";
    case 't':
        return "'text', 'null'";
    default:
        return "'blob', 'null'";
    }
}

/* SQLite stores any value in any column: a value whose type does not fit
 * its column in the target would be copied wrong, so none may exist. */
static int check_source_types(migration *m, const table_def *t)
{
    char sql[STMT_MAX];
    snprintf(sql, sizeof sql, "SELECT count(*) FROM %s WHERE", t->name);
    for (int i = 0; i < t->ncols; i++) {
        size_t len = strlen(sql);
        snprintf(sql + len, sizeof sql - len, "%s typeof(%s) NOT IN (%s)", i ? " OR" : "",
                 t->col_names[i], source_types(t->types[i]));
    }
    int64_t bad = 0;
    if (query_int64(m, m->src, sql, NULL, &bad) != LP_OK)
        return LP_ESTORAGE;
    if (bad > 0)
        return failf(m,
                     "table %s: %lld rows of the source hold a value whose type does not "
                     "fit its column (SQLite's typeof)",
                     t->name, (long long)bad);
    return LP_OK;
}

/* Same tables on both sides, column for column. */
static int check_source_tables(migration *m)
{
    lp_stmt *st = lp_stmt_prepare(m->src, "SELECT name FROM sqlite_master WHERE type = 'table' "
                                          "AND name NOT LIKE 'sqlite!_%' ESCAPE '!'");
    if (st == NULL)
        return failf(m, "source tables: %s", lp_conn_errmsg(m->src));
    int n = 0, rc, ok = LP_OK;
    while (ok == LP_OK && (rc = lp_stmt_step(st)) == LP_SQL_ROW) {
        const char *name = lp_stmt_column_text(st, 0);
        if (find_table(m, name) == NULL)
            ok = failf(m, "table %.64s of the source has no twin in the target's schema", name);
        n++;
    }
    if (ok == LP_OK && rc != LP_SQL_DONE)
        ok = failf(m, "source tables: %s", lp_conn_errmsg(m->src));
    lp_stmt_finalize(st);
    if (ok == LP_OK && n != m->ntables)
        for (int i = 0; i < m->ntables; i++) {
            int64_t found = 0;
            if (query_int64(m, m->src,
                            "SELECT count(*) FROM sqlite_master WHERE type = 'table' AND name = ?1",
                            m->tables[i].name, &found) != LP_OK)
                return LP_ESTORAGE;
            if (found == 0)
                return failf(m, "table %s of the target's schema is not in the source",
                             m->tables[i].name);
        }
    for (int i = 0; ok == LP_OK && i < m->ntables; i++)
        if ((ok = check_source_columns(m, &m->tables[i])) == LP_OK)
            ok = check_source_types(m, &m->tables[i]);
    return ok;
}

/* ---- the target's preparation ---- */

static int lock_and_check_empty(migration *m)
{
    char sql[SQL_MAX] = "LOCK TABLE ";
    for (int i = 0; i < m->ntables; i++)
        if (appendf(sql, "%s%s", i ? ", " : "", m->tables[i].name) != 0)
            return failf(m, "too many tables");
    if (appendf(sql, " IN ACCESS EXCLUSIVE MODE") != 0 || exec(m, m->pg, sql) != LP_OK)
        return LP_ESTORAGE;
    for (int i = 0; i < m->ntables; i++) {
        const table_def *t = &m->tables[i];
        snprintf(sql, sizeof sql, "SELECT count(*) FROM %s", t->name);
        for (size_t k = 0; k < sizeof SEEDED / sizeof SEEDED[0]; k++)
            if (strcmp(SEEDED[k].table, t->name) == 0)
                appendf(sql, " WHERE NOT (%s)", SEEDED[k].where);
        int64_t rows = 0;
        if (query_int64(m, m->pg, sql, NULL, &rows) != LP_OK)
            return LP_ESTORAGE;
        if (rows > 0)
            return failf(m,
                         "the target database is not empty (table %s has %lld rows): "
                         "migrate into a new database (createdb)",
                         t->name, (long long)rows);
    }
    return LP_OK;
}

/* The indexes (but those of constraints), the primary keys and unique
 * constraints, and the foreign keys of the schema, in the order they are
 * made again. */
static int load_rebuilt(migration *m)
{
    static const char SQL_REBUILT[] =
        "SELECT kind, tab, name, def FROM ("
        " SELECT CASE contype WHEN 'f' THEN 3 ELSE 2 END AS kind,"
        "  CAST(CAST(conrelid AS regclass) AS text) AS tab, conname AS name,"
        "  pg_get_constraintdef(oid) AS def, oid FROM pg_constraint"
        "  WHERE contype IN ('p', 'u', 'f')"
        "  AND connamespace = CAST(current_schema() AS regnamespace)"
        " UNION ALL"
        " SELECT 1, CAST(CAST(i.indrelid AS regclass) AS text),"
        "  CAST(CAST(i.indexrelid AS regclass) AS text), pg_get_indexdef(i.indexrelid),"
        "  i.indexrelid FROM pg_index i JOIN pg_class c ON c.oid = i.indexrelid"
        "  WHERE c.relnamespace = CAST(current_schema() AS regnamespace)"
        "  AND NOT EXISTS (SELECT 1 FROM pg_constraint k WHERE k.conindid = i.indexrelid"
        "   AND k.contype IN ('p', 'u', 'x'))"
        ") AS all_of_them ORDER BY kind, oid";
    lp_stmt *st = lp_stmt_prepare(m->pg, SQL_REBUILT);
    if (st == NULL)
        return failf(m, "indexes and constraints: %s", lp_conn_errmsg(m->pg));
    int rc, ok = LP_OK, cap = 0;
    while (ok == LP_OK && (rc = lp_stmt_step(st)) == LP_SQL_ROW) {
        const char *table = lp_stmt_column_text(st, 1), *name = lp_stmt_column_text(st, 2);
        if (!plain_name(table) || !plain_name(name)) {
            ok = failf(m, "index or constraint \"%.64s\" cannot be copied", name);
            break;
        }
        if (m->nrebuilt == cap) {
            cap = cap ? cap * 2 : 64;
            rebuilt *more = realloc(m->rebuilt, (size_t)cap * sizeof *more);
            if (more == NULL) {
                ok = failf(m, "out of memory");
                break;
            }
            m->rebuilt = more;
        }
        rebuilt *r = &m->rebuilt[m->nrebuilt];
        r->kind = lp_stmt_column_int(st, 0);
        snprintf(r->table, sizeof r->table, "%s", table);
        snprintf(r->name, sizeof r->name, "%s", name);
        if ((r->def = lp_engine_column_dup(st, 3)) == NULL)
            ok = failf(m, "out of memory");
        else
            m->nrebuilt++;
    }
    if (ok == LP_OK && rc != LP_SQL_DONE)
        ok = failf(m, "indexes and constraints: %s", lp_conn_errmsg(m->pg));
    lp_stmt_finalize(st);
    return ok;
}

/* Drops the foreign keys, then the keys, then the indexes (so that the
 * rows are copied into bare tables and each index is built once, after),
 * disables the triggers, empties the tables. */
static int prepare_target(migration *m)
{
    char sql[STMT_MAX];
    for (int i = m->nrebuilt - 1; i >= 0; i--) {
        const rebuilt *r = &m->rebuilt[i];
        if (r->kind == REBUILT_INDEX)
            snprintf(sql, sizeof sql, "DROP INDEX %s", r->name);
        else
            snprintf(sql, sizeof sql, "ALTER TABLE %s DROP CONSTRAINT %s", r->table, r->name);
        if (exec(m, m->pg, sql) != LP_OK)
            return LP_ESTORAGE;
    }
    for (int i = 0; i < m->ntables; i++) {
        snprintf(sql, sizeof sql, "ALTER TABLE %s DISABLE TRIGGER USER; DELETE FROM %s",
                 m->tables[i].name, m->tables[i].name);
        if (exec(m, m->pg, sql) != LP_OK)
            return LP_ESTORAGE;
    }
    return LP_OK;
}

/* Makes the indexes, keys and foreign keys again (PostgreSQL checks
 * every row against each unique key and foreign key), enables the
 * triggers, sets each identity sequence to the largest id copied. */
static int finish_target(migration *m)
{
    char sql[STMT_MAX];
    for (int i = 0; i < m->nrebuilt; i++) {
        const rebuilt *r = &m->rebuilt[i];
        if (r->kind == REBUILT_INDEX)
            snprintf(sql, sizeof sql, "%s", r->def);
        else
            snprintf(sql, sizeof sql, "ALTER TABLE %s ADD CONSTRAINT %s %s", r->table, r->name,
                     r->def);
        if (exec(m, m->pg, sql) != LP_OK)
            return LP_ESTORAGE;
    }
    for (int i = 0; i < m->ntables; i++) {
        const table_def *t = &m->tables[i];
        snprintf(sql, sizeof sql, "ALTER TABLE %s ENABLE TRIGGER USER", t->name);
        if (exec(m, m->pg, sql) != LP_OK)
            return LP_ESTORAGE;
        if (t->identity[0] == '\0')
            continue;
        snprintf(sql, sizeof sql,
                 "SELECT setval(pg_get_serial_sequence('%s', '%s'), max(%s)) FROM %s "
                 "HAVING max(%s) IS NOT NULL",
                 t->name, t->identity, t->identity, t->name, t->identity);
        if (exec(m, m->pg, sql) != LP_OK)
            return LP_ESTORAGE;
    }
    return LP_OK;
}

/* ---- the copy ---- */

/* COPY's binary format: the header, then per row a field count and per
 * field its length (-1: NULL) and bytes (integers big-endian), then -1. */
static const unsigned char COPY_HEADER[19] = {'P', 'G', 'C', 'O', 'P', 'Y', '\n', 0xff, '\r', '\n',
                                              0,   0,   0,   0,   0,   0,   0,    0,    0};

typedef struct copy_out {
    migration *m;
    crypto_generichash_state hash;
    unsigned char *buf;
    size_t len;
    int failed;
} copy_out;

static int flush(copy_out *o)
{
    crypto_generichash_update(&o->hash, o->buf, o->len);
    int rc = lp_pg_copy_in_put(o->m->pg, o->buf, o->len, o->m->err, o->m->errlen);
    o->len = 0;
    return rc;
}

static int put(copy_out *o, const void *data, size_t n)
{
    if (o->len + n > COPY_CHUNK && o->len > 0 && flush(o) != LP_OK)
        return LP_ESTORAGE;
    if (n > COPY_CHUNK) { /* a value larger than the buffer goes on its own */
        crypto_generichash_update(&o->hash, data, n);
        return lp_pg_copy_in_put(o->m->pg, data, n, o->m->err, o->m->errlen);
    }
    memcpy(o->buf + o->len, data, n);
    o->len += n;
    return LP_OK;
}

static int put_be(copy_out *o, uint64_t v, int bytes)
{
    unsigned char b[8];
    for (int i = 0; i < bytes; i++)
        b[i] = (unsigned char)(v >> (8 * (bytes - 1 - i)));
    return put(o, b, (size_t)bytes);
}

static int put_field(copy_out *o, lp_stmt *st, int col, char type)
{
    if (lp_stmt_column_is_null(st, col))
        return put_be(o, (uint32_t)-1, 4);
    if (type == 'i' || type == 'd') {
        uint64_t v;
        if (type == 'i') {
            v = (uint64_t)lp_stmt_column_int64(st, col);
        } else {
            double d = lp_stmt_column_double(st, col);
            memcpy(&v, &d, sizeof v);
        }
        return put_be(o, 8, 4) == LP_OK ? put_be(o, v, 8) : LP_ESTORAGE;
    }
    const void *p =
        type == 't' ? (const void *)lp_stmt_column_text(st, col) : lp_stmt_column_blob(st, col);
    int n = lp_stmt_column_bytes(st, col);
    if (put_be(o, (uint32_t)n, 4) != LP_OK)
        return LP_ESTORAGE;
    return n > 0 ? put(o, p, (size_t)n) : LP_OK;
}

static void hex(const unsigned char *h, size_t n, char *out)
{
    for (size_t i = 0; i < n; i++)
        sprintf(out + 2 * i, "%02x", h[i]);
}

/* Streams t's source rows into the target; the checksum of what was sent
 * into sum. */
static int copy_table(migration *m, const table_def *t, int64_t *rows, unsigned char sum[32])
{
    char sql[STMT_MAX];
    snprintf(sql, sizeof sql, "SELECT %s FROM %s ORDER BY %s", t->cols, t->name, t->order_sqlite);
    lp_stmt *st = lp_stmt_prepare(m->src, sql);
    if (st == NULL)
        return failf(m, "reading %s: %s", t->name, lp_conn_errmsg(m->src));
    copy_out o = {.m = m, .buf = malloc(COPY_CHUNK)};
    crypto_generichash_init(&o.hash, NULL, 0, 32);
    snprintf(sql, sizeof sql, "COPY %s (%s) FROM STDIN (FORMAT binary)", t->name, t->cols);
    int rc = o.buf == NULL ? failf(m, "out of memory")
                           : lp_pg_copy_in_start(m->pg, sql, m->err, m->errlen);
    if (rc != LP_OK) {
        free(o.buf);
        lp_stmt_finalize(st);
        return rc;
    }
    int64_t sent = 0;
    int step = LP_SQL_DONE;
    rc = put(&o, COPY_HEADER, sizeof COPY_HEADER);
    while (rc == LP_OK && (step = lp_stmt_step(st)) == LP_SQL_ROW) {
        rc = put_be(&o, (uint64_t)t->ncols, 2);
        for (int i = 0; rc == LP_OK && i < t->ncols; i++)
            rc = put_field(&o, st, i, t->types[i]);
        sent++;
    }
    if (rc == LP_OK && step != LP_SQL_DONE)
        rc = failf(m, "reading %s: %s", t->name, lp_conn_errmsg(m->src));
    lp_stmt_finalize(st);
    if (rc == LP_OK)
        rc = put_be(&o, (uint16_t)-1, 2);
    if (rc == LP_OK)
        rc = flush(&o);
    free(o.buf);
    if (rc != LP_OK) {
        lp_pg_copy_in_abort(m->pg, "the copy from SQLite failed");
        return rc;
    }
    char why[512];
    if (lp_pg_copy_in_end(m->pg, rows, why, sizeof why) != LP_OK)
        return failf(m, "copying %s: %s", t->name, why);
    if (*rows != sent)
        return failf(m, "table %s: %lld rows read, %lld written", t->name, (long long)sent,
                     (long long)*rows);
    crypto_generichash_final(&o.hash, sum, 32);
    return LP_OK;
}

static void hash_sink(void *ctx, const void *data, size_t len)
{
    crypto_generichash_update(ctx, data, len);
}

/* The checksum of t's rows in the target, read back in the copy's order
 * and format. */
static int read_back(migration *m, const table_def *t, unsigned char sum[32])
{
    char sql[STMT_MAX];
    snprintf(sql, sizeof sql, "COPY (SELECT %s FROM %s ORDER BY %s) TO STDOUT (FORMAT binary)",
             t->cols, t->name, t->order_pg);
    crypto_generichash_state h;
    crypto_generichash_init(&h, NULL, 0, 32);
    char why[512];
    if (lp_pg_copy_out(m->pg, sql, hash_sink, &h, why, sizeof why) != LP_OK)
        return failf(m, "reading back %s: %s", t->name, why);
    crypto_generichash_final(&h, sum, 32);
    return LP_OK;
}

static int source_version(migration *m)
{
    int64_t v = 0;
    if (query_int64(m, m->src, "PRAGMA user_version", NULL, &v) != LP_OK)
        return LP_ESTORAGE;
    if (v != LP_MIGRATION_COUNT)
        return failf(m,
                     "the source database is at schema version %lld, this server's is %d: "
                     "start this ldpref-server on it once (it migrates the file), then migrate",
                     (long long)v, LP_MIGRATION_COUNT);
    if (lp_pg_schema_newest() != LP_MIGRATION_COUNT)
        return failf(m, "this server's PostgreSQL schema stops at version %lld, its SQLite at %d",
                     (long long)lp_pg_schema_newest(), LP_MIGRATION_COUNT);
    return LP_OK;
}

static int run(migration *m, lp_migrate_report *rep, lp_migrate_progress progress, void *ctx)
{
    int rc = LP_OK;
    unsigned char *sums = calloc((size_t)m->ntables, 32);
    if (sums == NULL)
        return failf(m, "out of memory");
    if ((rc = exec(m, m->pg, "BEGIN")) != LP_OK)
        goto out;
    if ((rc = lock_and_check_empty(m)) != LP_OK || (rc = load_rebuilt(m)) != LP_OK ||
        (rc = prepare_target(m)) != LP_OK)
        goto out;
    for (int i = 0; i < m->ntables; i++) {
        lp_migrate_table *r = &rep->table[i];
        snprintf(r->name, sizeof r->name, "%s", m->tables[i].name);
        if ((rc = copy_table(m, &m->tables[i], &r->rows, sums + 32 * i)) != LP_OK)
            goto out;
        hex(sums + 32 * i, 32, r->checksum);
        rep->tables = i + 1;
        rep->rows += r->rows;
        if (progress != NULL)
            progress(r, ctx);
    }
    if ((rc = finish_target(m)) != LP_OK)
        goto out;
    for (int i = 0; i < m->ntables; i++) {
        unsigned char back[32];
        if ((rc = read_back(m, &m->tables[i], back)) != LP_OK)
            goto out;
        if (memcmp(back, sums + 32 * i, 32) != 0) {
            rc = failf(m, "table %s: the rows read back from the target differ from the copy",
                       m->tables[i].name);
            goto out;
        }
    }
    rc = exec(m, m->pg, "COMMIT");
out:
    free(sums);
    if (rc != LP_OK && lp_conn_in_txn(m->pg))
        lp_conn_exec(m->pg, "ROLLBACK");
    return rc;
}

int lp_migrate_to_pg(const char *sqlite_path, const char *pg_uri, lp_migrate_report *rep,
                     lp_migrate_progress progress, void *ctx, char *err, size_t errlen)
{
    memset(rep, 0, sizeof *rep);
    migration m = {.err = err, .errlen = errlen};
    char why[512];
    int rc;
    if (lp_engine_file_open(sqlite_path, &m.src, why, sizeof why) != LP_OK)
        return failf(&m, "the source %s: %s", sqlite_path, why);
    if ((rc = source_version(&m)) != LP_OK)
        goto out;
    if (lp_sql_pg_open(pg_uri, &m.pg, why, sizeof why) != LP_OK) {
        rc = failf(&m, "the target: %s", why);
        goto out;
    }
    if (lp_pg_migrate(m.pg, &rep->version, why, sizeof why) != LP_OK) {
        rc = failf(&m, "the target's schema: %s", why);
        goto out;
    }
    lp_sql_pg_statement_savepoints(m.pg, 0);
    m.tables = malloc(LP_MIGRATE_MAX_TABLES * sizeof *m.tables);
    if (m.tables == NULL) {
        rc = failf(&m, "out of memory");
        goto out;
    }
    /* one snapshot of the source for the whole copy */
    if (lp_conn_begin_read(m.src) != LP_SQL_DONE) {
        rc = failf(&m, "the source: %s", lp_conn_errmsg(m.src));
        goto out;
    }
    if ((rc = load_target_tables(&m)) == LP_OK && (rc = check_source_tables(&m)) == LP_OK)
        rc = run(&m, rep, progress, ctx);
    lp_conn_end_read(m.src);
out:
    for (int i = 0; i < m.nrebuilt; i++)
        free(m.rebuilt[i].def);
    free(m.rebuilt);
    free(m.tables);
    lp_conn_close(m.pg);
    lp_conn_close(m.src);
    return rc;
}
