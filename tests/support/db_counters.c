/*
 * db_counters.c — see db_counters.h.
 */
#include "db_counters.h"

#include <libpq-fe.h>
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Each query counts the rows of one counter that disagree with the rows it
 * counts (tasks_complete counts tasks at or beyond their campaign's
 * labels_per_task; every task has its task_fill row); each runs on SQLite
 * and on PostgreSQL. */
static const char *const CHECKS[][2] = {
    {"task_fill rows",
     "SELECT count(*) FROM tasks t WHERE NOT EXISTS "
     "(SELECT 1 FROM task_fill f WHERE f.task = t.id AND f.campaign = t.campaign)"},
    {"campaign_fill.tasks", "SELECT count(*) FROM campaign_fill c WHERE c.tasks <> "
                            "(SELECT count(*) FROM tasks t WHERE t.campaign = c.campaign)"},
    {"task_fill.labels", "SELECT count(*) FROM task_fill f WHERE f.labels <> "
                         "(SELECT count(*) FROM labels l WHERE l.task = f.task)"},
    {"annotator_fill.labels", "SELECT count(*) FROM annotator_fill f WHERE f.labels <> "
                              "(SELECT count(*) FROM labels l WHERE l.annotator = f.annotator)"},
    {"annotator_fill.last_label_ms",
     "SELECT count(*) FROM annotator_fill f WHERE f.last_label_ms IS DISTINCT FROM "
     "(SELECT max(received_ms) FROM labels l WHERE l.annotator = f.annotator)"},
    {"annotators.epsilon_spent",
     "SELECT count(*) FROM annotators a WHERE abs(a.epsilon_spent - "
     "(SELECT coalesce(sum(epsilon), 0) FROM labels l WHERE l.annotator = a.id)) > "
     "1e-9 * (1 + a.epsilon_spent)"},
    {"campaign_fill.labels",
     "SELECT count(*) FROM campaign_fill c WHERE c.labels <> "
     "(SELECT count(*) FROM labels l JOIN tasks t ON t.id = l.task WHERE t.campaign = c.campaign)"},
    {"campaign_fill.tasks_complete",
     "SELECT count(*) FROM campaign_fill c JOIN campaigns p ON p.id = c.campaign "
     "WHERE c.tasks_complete <> (SELECT count(*) FROM tasks t WHERE t.campaign = c.campaign "
     "AND (SELECT count(*) FROM labels l WHERE l.task = t.id) >= p.labels_per_task)"},
    {"campaign_fill.epsilon_spent",
     "SELECT count(*) FROM campaign_fill c WHERE abs(c.epsilon_spent - "
     "(SELECT coalesce(sum(l.epsilon), 0) FROM labels l JOIN annotators a ON a.id = l.annotator "
     "WHERE a.campaign = c.campaign)) > 1e-9 * (1 + c.epsilon_spent)"},
    {"label_minutes",
     "SELECT count(*) FROM (SELECT t.campaign AS campaign, l.received_ms / 60000 AS minute, "
     "count(*) AS n FROM labels l JOIN tasks t ON t.id = l.task GROUP BY 1, 2) g "
     "FULL JOIN label_minutes m ON m.campaign = g.campaign AND m.minute = g.minute "
     "WHERE g.n IS DISTINCT FROM m.labels"},
};

static int is_pg_uri(const char *path)
{
    return strncmp(path, "postgresql://", 13) == 0 || strncmp(path, "postgres://", 11) == 0;
}

/* The first column of the first row of sql on the PostgreSQL database at
 * uri (a fresh session), as an integer; -1 on failure (said on stderr). */
static long long pg_scalar(const char *uri, const char *sql)
{
    PGconn *conn = PQconnectdb(uri);
    long long v = -1;
    if (PQstatus(conn) == CONNECTION_OK) {
        PGresult *r = PQexec(conn, sql);
        if (PQresultStatus(r) == PGRES_TUPLES_OK && PQntuples(r) > 0 && !PQgetisnull(r, 0, 0))
            v = strtoll(PQgetvalue(r, 0, 0), NULL, 10);
        else if (PQresultStatus(r) != PGRES_TUPLES_OK)
            fprintf(stderr, "db_counters: %s", PQerrorMessage(conn));
        PQclear(r);
    } else {
        fprintf(stderr, "db_counters: %s", PQerrorMessage(conn));
    }
    PQfinish(conn);
    return v;
}

static int pg_counters_mismatch(const char *uri)
{
    int total = 0;
    for (size_t i = 0; i < sizeof CHECKS / sizeof CHECKS[0] && total >= 0; i++) {
        long long n = pg_scalar(uri, CHECKS[i][1]);
        if (n < 0)
            total = -1;
        else if (n > 0)
            fprintf(stderr, "db_counters: %lld rows of %s differ from the rows counted\n", n,
                    CHECKS[i][0]);
        if (n > 0)
            total += (int)n;
    }
    return total;
}

int db_counters_mismatch(const char *path)
{
    if (is_pg_uri(path))
        return pg_counters_mismatch(path);
    sqlite3 *db = NULL;
    if (sqlite3_open_v2(path, &db, SQLITE_OPEN_READONLY, NULL) != SQLITE_OK) {
        sqlite3_close(db);
        return -1;
    }
    sqlite3_busy_timeout(db, 10000);
    int total = 0;
    for (size_t i = 0; i < sizeof CHECKS / sizeof CHECKS[0] && total >= 0; i++) {
        sqlite3_stmt *st = NULL;
        if (sqlite3_prepare_v2(db, CHECKS[i][1], -1, &st, NULL) != SQLITE_OK ||
            sqlite3_step(st) != SQLITE_ROW) {
            fprintf(stderr, "db_counters: %s: %s\n", CHECKS[i][0], sqlite3_errmsg(db));
            total = -1;
        } else if (sqlite3_column_int(st, 0) != 0) {
            fprintf(stderr, "db_counters: %d rows of %s differ from the rows counted\n",
                    sqlite3_column_int(st, 0), CHECKS[i][0]);
            total += sqlite3_column_int(st, 0);
        }
        sqlite3_finalize(st);
    }
    sqlite3_close(db);
    return total;
}

long long db_scalar(const char *path, const char *sql)
{
    if (is_pg_uri(path))
        return pg_scalar(path, sql);
    sqlite3 *db = NULL;
    sqlite3_stmt *st = NULL;
    long long v = -1;
    if (sqlite3_open_v2(path, &db, SQLITE_OPEN_READONLY, NULL) == SQLITE_OK &&
        sqlite3_prepare_v2(db, sql, -1, &st, NULL) == SQLITE_OK && sqlite3_step(st) == SQLITE_ROW)
        v = sqlite3_column_int64(st, 0);
    sqlite3_finalize(st);
    sqlite3_close(db);
    return v;
}
