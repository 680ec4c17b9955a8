/*
 * copy_pg.c — COPY IN and COPY OUT on a PostgreSQL connection of the
 * statement API (copy_pg.h), with libpq's copy functions (blocking mode).
 */
#include "copy_pg.h"

#include "error.h"
#include "sql_pg.h"

#include <stdio.h>
#include <stdlib.h>

static int fail(PGconn *pg, const char *what, char *err, size_t errlen)
{
    snprintf(err, errlen, "%s: %s", what, PQerrorMessage(pg));
    return LP_ESTORAGE;
}

/* Reads the results left on the connection; the last failure's message
 * goes to err (when err is not NULL). LP_OK when every result succeeded. */
static int drain(PGconn *pg, int64_t *rows, char *err, size_t errlen)
{
    int rc = LP_OK;
    PGresult *r;
    while ((r = PQgetResult(pg)) != NULL) {
        ExecStatusType st = PQresultStatus(r);
        if (st == PGRES_COMMAND_OK) {
            if (rows != NULL)
                *rows = strtoll(PQcmdTuples(r), NULL, 10);
        } else {
            if (err != NULL)
                snprintf(err, errlen, "%s", PQresultErrorMessage(r));
            rc = LP_ESTORAGE;
        }
        PQclear(r);
    }
    return rc;
}

int lp_pg_copy_in_start(lp_conn *c, const char *sql, char *err, size_t errlen)
{
    PGconn *pg = lp_sql_pg_conn(c);
    PGresult *r = PQexec(pg, sql);
    ExecStatusType st = PQresultStatus(r);
    if (st == PGRES_COPY_IN) {
        PQclear(r);
        return LP_OK;
    }
    snprintf(err, errlen, "%s", PQresultErrorMessage(r));
    PQclear(r);
    drain(pg, NULL, NULL, 0);
    return LP_ESTORAGE;
}

int lp_pg_copy_in_put(lp_conn *c, const void *data, size_t len, char *err, size_t errlen)
{
    PGconn *pg = lp_sql_pg_conn(c);
    /* PQputCopyData takes an int length: send large pieces in parts */
    const char *p = data;
    while (len > 0) {
        int n = len > (1u << 30) ? 1 << 30 : (int)len;
        if (PQputCopyData(pg, p, n) != 1)
            return fail(pg, "COPY data", err, errlen);
        p += n;
        len -= (size_t)n;
    }
    return LP_OK;
}

int lp_pg_copy_in_end(lp_conn *c, int64_t *rows, char *err, size_t errlen)
{
    PGconn *pg = lp_sql_pg_conn(c);
    *rows = -1;
    if (PQputCopyEnd(pg, NULL) != 1)
        return fail(pg, "COPY end", err, errlen);
    return drain(pg, rows, err, errlen);
}

void lp_pg_copy_in_abort(lp_conn *c, const char *why)
{
    PGconn *pg = lp_sql_pg_conn(c);
    if (PQputCopyEnd(pg, why) == 1)
        drain(pg, NULL, NULL, 0);
}

int lp_pg_copy_out(lp_conn *c, const char *sql, lp_pg_copy_sink sink, void *ctx, char *err,
                   size_t errlen)
{
    PGconn *pg = lp_sql_pg_conn(c);
    PGresult *r = PQexec(pg, sql);
    if (PQresultStatus(r) != PGRES_COPY_OUT) {
        snprintf(err, errlen, "%s", PQresultErrorMessage(r));
        PQclear(r);
        drain(pg, NULL, NULL, 0);
        return LP_ESTORAGE;
    }
    PQclear(r);
    char *buf;
    int n;
    while ((n = PQgetCopyData(pg, &buf, 0)) > 0) {
        sink(ctx, buf, (size_t)n);
        PQfreemem(buf);
    }
    if (n == -2) {
        fail(pg, "COPY OUT", err, errlen);
        drain(pg, NULL, NULL, 0);
        return LP_ESTORAGE;
    }
    return drain(pg, NULL, err, errlen);
}
