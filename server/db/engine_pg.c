/*
 * engine_pg.c — the storage engine's PostgreSQL backend (engine_backend.h)
 * for a libpq URI (postgresql://... or postgres://...).
 *
 * The writer is one connection (sql_pg.h: synchronous_commit on, checked
 * here) whose transactions are plain BEGIN ... COMMIT (the database's
 * default isolation, READ COMMITTED unless set otherwise); a transaction
 * in which a statement or the COMMIT met a conflict with another writer
 * (SQLSTATE 40001, 40P01) is rolled back and its group runs again
 * (engine.c). Readers are connections
 * whose sessions are read-only (default_transaction_read_only); a read
 * snapshot is the driver's REPEATABLE READ, READ ONLY transaction.
 *
 * Opening migrates the database to the newest schema/postgresql/ file
 * (schema_pg.h: under an advisory lock, so servers starting at once
 * migrate once). The campaign-completed event is the schema's trigger
 * notification (channel ldpref_campaign_complete, delivered on commit):
 * the writer LISTENs and logs the notifications its own session sent.
 *
 * A failure of a job or of the transaction cache's flush that a conflict
 * caused (a deadlock in the flush's counter updates, a serialization
 * failure) runs the group again too (conflicted), whether the statement's
 * savepoint kept the transaction going or an unguarded statement ended it.
 *
 * A lost connection: the writer's next BEGIN fails, the connection is made
 * again and the BEGIN tried once more, so a server that restarted is
 * reached by the next group; a transaction the loss cut short fails its
 * group (LP_ESTORAGE) and marks the storage unhealthy (commit_failed) until
 * the probe, once a second, commits again (it reconnects too). A read that
 * failed on a pooled reader found lost runs once more on a new connection. Files, WAL and
 * free space are the PostgreSQL server's (db_unlinked and disk_low do not
 * apply); there is no training-lock file.
 */
#include "engine_backend.h"

#include "error.h"
#include "log.h"
#include "schema_pg.h"
#include "sql_pg.h"

#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define COMPLETED_CHANNEL "ldpref_campaign_complete"

struct lp_backend {
    lp_conn *wconn;
    uint64_t conflicts; /* lp_sql_pg_conflicts when the transaction began */
    char uri[4096];
};

/* ---- the writer's session ---- */

/* LISTEN on the completion channel and check durability; on a new or
 * reconnected writer session. LP_OK or LP_ESTORAGE with err set. */
static int writer_session(lp_conn *c, char *err, size_t errlen)
{
    if (lp_conn_exec(c, "LISTEN " COMPLETED_CHANNEL) != LP_SQL_DONE) {
        snprintf(err, errlen, "cannot listen for campaign completions: %s", lp_conn_errmsg(c));
        return LP_ESTORAGE;
    }
    lp_stmt *st = lp_stmt_prepare(c, "SELECT current_setting('synchronous_commit') <> 'off'");
    int durable = st != NULL && lp_stmt_step(st) == LP_SQL_ROW && lp_stmt_column_int64(st, 0) == 1;
    lp_stmt_finalize(st);
    if (!durable) {
        snprintf(err, errlen, "synchronous_commit is off on the writer's session: refused");
        return LP_ESTORAGE;
    }
    return LP_OK;
}

/* Makes a lost connection again (a writer's with its session). LP_OK when
 * the connection is up. */
static int ensure_connected(lp_conn *c, int writer)
{
    if (lp_sql_pg_connected(c))
        return LP_OK;
    char err[256];
    int rc = lp_sql_pg_reconnect(c, err, sizeof err);
    if (rc == LP_OK)
        rc = writer ? writer_session(c, err, sizeof err)
             : lp_conn_exec(c, "SET default_transaction_read_only = on") == LP_SQL_DONE
                 ? LP_OK
                 : LP_ESTORAGE;
    lp_log(rc == LP_OK ? LP_LOG_INFO : LP_LOG_ERROR, "storage_reconnect",
           LP_LOG_STR("connection", writer ? "writer" : "reader"),
           LP_LOG_STR("result", rc == LP_OK ? "connected" : err));
    return rc;
}

/* Logs the completions this session's commits notified; drops those of
 * other servers (each logs its own). */
static void completions_drain(lp_backend *b)
{
    PGconn *pg = lp_sql_pg_conn(b->wconn);
    PQconsumeInput(pg);
    int own = PQbackendPID(pg);
    for (PGnotify *n; (n = PQnotifies(pg)) != NULL; PQfreemem(n)) {
        if (n->be_pid != own || strcmp(n->relname, COMPLETED_CHANNEL) != 0)
            continue;
        json_t *j = json_loads(n->extra, 0, NULL);
        const char *name = json_string_value(json_object_get(j, "name"));
        lp_log(LP_LOG_INFO, "campaign_complete", LP_LOG_STR("campaign", name ? name : ""),
               LP_LOG_INT("campaign_id", json_integer_value(json_object_get(j, "campaign"))),
               LP_LOG_INT("tasks", json_integer_value(json_object_get(j, "tasks"))),
               LP_LOG_INT("labels", json_integer_value(json_object_get(j, "labels"))));
        json_decref(j);
    }
}

/* ---- the backend ---- */

static int pgb_open(const lp_store_opts *opts, lp_health *health, lp_backend **out,
                    lp_conn **writer, char *err, size_t errlen)
{
    (void)health; /* nothing of the files to report */
    lp_backend *b = calloc(1, sizeof *b);
    *out = b;
    if (b == NULL) {
        snprintf(err, errlen, "out of memory");
        return LP_ENO_MEMORY;
    }
    snprintf(b->uri, sizeof b->uri, "%s", opts->path);
    int64_t version = 0;
    if (lp_sql_pg_open(b->uri, &b->wconn, err, errlen) != LP_OK ||
        lp_pg_migrate(b->wconn, &version, err, errlen) != LP_OK ||
        writer_session(b->wconn, err, errlen) != LP_OK)
        return LP_ESTORAGE;
    *writer = b->wconn;
    return LP_OK;
}

static int pgb_reader_open(lp_backend *b, lp_conn **out, char *err, size_t errlen)
{
    if (lp_sql_pg_open(b->uri, out, err, errlen) != LP_OK)
        return LP_ESTORAGE;
    if (lp_conn_exec(*out, "SET default_transaction_read_only = on") == LP_SQL_DONE)
        return LP_OK;
    snprintf(err, errlen, "cannot make the session read-only: %s", lp_conn_errmsg(*out));
    lp_conn_close(*out);
    *out = NULL;
    return LP_ESTORAGE;
}

static int pgb_reader_check(lp_conn *c)
{
    if (lp_sql_pg_connected(c))
        return LP_OK;
    return ensure_connected(c, 0) == LP_OK ? LP_BACKEND_RETRY : LP_ESTORAGE;
}

static lp_stmt *pgb_prepare_kept(lp_conn *c, const char *sql)
{
    return lp_stmt_prepare(c, sql);
}

static int pgb_reconnect(lp_backend *b)
{
    return lp_sql_pg_connected(b->wconn) ? LP_ESTORAGE : ensure_connected(b->wconn, 1);
}

/* A statement of the open transaction met a conflict with another writer:
 * the driver counted it since the transaction began. */
static int pgb_conflicted(lp_backend *b)
{
    return lp_sql_pg_conflicts(b->wconn) != b->conflicts;
}

/* A statement of the transaction met a conflict with another writer (its
 * job may have failed, or gone on): the whole transaction runs again. */
static int pgb_before_commit(lp_backend *b)
{
    return pgb_conflicted(b) ? LP_BACKEND_RETRY : LP_OK;
}

/* COMMIT, told apart: a conflict with another writer may be retried; a
 * COMMIT of a transaction already aborted answers ROLLBACK, a failure. */
static int pgb_commit(lp_backend *b, char *why, size_t whylen)
{
    PGconn *pg = lp_sql_pg_conn(b->wconn);
    PGresult *r = PQexec(pg, "COMMIT");
    int rc = LP_OK;
    if (PQresultStatus(r) != PGRES_COMMAND_OK) {
        const char *state = PQresultErrorField(r, PG_DIAG_SQLSTATE);
        rc = state && (strcmp(state, "40001") == 0 || strcmp(state, "40P01") == 0)
                 ? LP_BACKEND_RETRY
                 : LP_ESTORAGE;
        snprintf(why, whylen, "%s", PQerrorMessage(pg));
    } else if (strcmp(PQcmdStatus(r), "COMMIT") != 0) {
        rc = LP_ESTORAGE;
        snprintf(why, whylen, "the transaction was rolled back");
    }
    PQclear(r);
    return rc;
}

static void pgb_after_commit(lp_backend *b, int ok)
{
    (void)ok; /* a notification arrives only when its transaction committed */
    completions_drain(b);
    b->conflicts = lp_sql_pg_conflicts(b->wconn); /* the next transaction's start */
}

static void pgb_upkeep(lp_backend *b, int idle, int64_t idle_ns)
{
    (void)idle;
    (void)idle_ns;
    completions_drain(b); /* other servers' completions, dropped */
}

/* One small transaction that rewrites the schema's version with its own
 * value; reconnects first when the connection is lost. */
static int pgb_probe(lp_backend *b, char *why, size_t whylen)
{
    int ok = ensure_connected(b->wconn, 1) == LP_OK &&
             lp_conn_exec(b->wconn, "BEGIN") == LP_SQL_DONE &&
             lp_conn_exec(b->wconn, "UPDATE schema_version SET version = version WHERE version = "
                                    "(SELECT max(version) FROM schema_version)") == LP_SQL_DONE &&
             lp_conn_exec(b->wconn, "COMMIT") == LP_SQL_DONE;
    snprintf(why, whylen, "%s", lp_conn_errmsg(b->wconn));
    if (lp_sql_pg_connected(b->wconn) && lp_conn_in_txn(b->wconn))
        lp_conn_exec(b->wconn, "ROLLBACK");
    b->conflicts = lp_sql_pg_conflicts(b->wconn);
    return ok;
}

static const char *pgb_train_lock_path(lp_backend *b)
{
    (void)b;
    return NULL;
}

static void pgb_close(lp_backend *b)
{
    if (b == NULL)
        return;
    lp_conn_close(b->wconn);
    free(b);
}

const lp_backend_ops lp_backend_pg = {
    .name = "postgresql",
    .begin_sql = "BEGIN",
    .open = pgb_open,
    .reader_open = pgb_reader_open,
    .reader_check = pgb_reader_check,
    .prepare_kept = pgb_prepare_kept,
    .reconnect = pgb_reconnect,
    .conflicted = pgb_conflicted,
    .before_commit = pgb_before_commit,
    .commit = pgb_commit,
    .after_commit = pgb_after_commit,
    .upkeep = pgb_upkeep,
    .probe = pgb_probe,
    .train_lock_path = pgb_train_lock_path,
    .close = pgb_close,
};
