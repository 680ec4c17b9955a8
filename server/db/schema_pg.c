/* schema_pg.c — migrating a PostgreSQL database. See schema_pg.h. */
#include "schema_pg.h"

#include "error.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The advisory lock every migrating server takes: "ldpref" and 1. */
#define MIGRATION_LOCK "SELECT pg_advisory_xact_lock(7234315233945600001)"

static int64_t file_version(const lp_pg_schema_file *f)
{
    return strtoll(f->name, NULL, 10);
}

int64_t lp_pg_schema_newest(void)
{
    int64_t newest = 0;
    for (const lp_pg_schema_file *f = lp_pg_schema_files; f->name != NULL; f++)
        if (file_version(f) > newest)
            newest = file_version(f);
    return newest;
}

/* The database's version inside the current transaction, or -1. */
static int64_t current_version(lp_conn *c)
{
    lp_stmt *st = lp_stmt_prepare(c, "SELECT CASE WHEN to_regclass('schema_version') IS NULL "
                                     "THEN 0 ELSE -1 END");
    int64_t v = -1;
    if (st != NULL && lp_stmt_step(st) == LP_SQL_ROW)
        v = lp_stmt_column_int64(st, 0);
    lp_stmt_finalize(st);
    if (v != -1)
        return v;
    /* the table exists: prepared only now, as it names the table */
    st = lp_stmt_prepare(c, "SELECT coalesce(max(version), 0) FROM schema_version");
    if (st != NULL && lp_stmt_step(st) == LP_SQL_ROW)
        v = lp_stmt_column_int64(st, 0);
    lp_stmt_finalize(st);
    return v;
}

/* Applies f unless the database already has it. LP_OK or LP_ESTORAGE. */
static int apply(lp_conn *c, const lp_pg_schema_file *f, int64_t *version, char *err, size_t errlen)
{
    char *sql = malloc(f->len + 1);
    if (sql == NULL) {
        snprintf(err, errlen, "out of memory");
        return LP_ESTORAGE;
    }
    memcpy(sql, f->sql, f->len);
    sql[f->len] = 0;
    int rc = LP_ESTORAGE;
    if (lp_conn_exec(c, "BEGIN") != LP_SQL_DONE || lp_conn_exec(c, MIGRATION_LOCK) != LP_SQL_DONE) {
        snprintf(err, errlen, "cannot lock the schema: %s", lp_conn_errmsg(c));
    } else if ((*version = current_version(c)) < 0) {
        snprintf(err, errlen, "cannot read the schema version: %s", lp_conn_errmsg(c));
    } else if (*version > lp_pg_schema_newest()) {
        snprintf(err, errlen, "database schema version %lld is newer than this server (%lld)",
                 (long long)*version, (long long)lp_pg_schema_newest());
    } else if (*version >= file_version(f)) {
        rc = LP_OK; /* another server applied it */
    } else if (lp_conn_exec(c, sql) != LP_SQL_DONE) {
        snprintf(err, errlen, "schema/postgresql/%s: %s", f->name, lp_conn_errmsg(c));
    } else {
        *version = file_version(f);
        rc = LP_OK;
    }
    if (rc != LP_OK && lp_conn_in_txn(c)) {
        lp_conn_exec(c, "ROLLBACK");
    } else if (rc == LP_OK && lp_conn_exec(c, "COMMIT") != LP_SQL_DONE) {
        snprintf(err, errlen, "schema/postgresql/%s: the commit failed: %s", f->name,
                 lp_conn_errmsg(c));
        rc = LP_ESTORAGE;
    }
    free(sql);
    return rc;
}

int lp_pg_migrate(lp_conn *c, int64_t *version, char *err, size_t errlen)
{
    *version = 0;
    if (lp_pg_schema_files[0].name == NULL) {
        snprintf(err, errlen, "no PostgreSQL schema files are built in");
        return LP_ESTORAGE;
    }
    for (const lp_pg_schema_file *f = lp_pg_schema_files; f->name != NULL; f++)
        if (apply(c, f, version, err, errlen) != LP_OK)
            return LP_ESTORAGE;
    return LP_OK;
}
