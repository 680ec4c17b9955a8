/* label_cursor.c — labels in id order. See label_cursor.h. */
#include "label_cursor.h"

#include "db.h"
#include "error.h"
#include "log.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

struct lp_label_cursor {
    lp_conn *db;
    lp_stmt *rows;
    int in_txn;
    int64_t campaign, cutoff;
};

/* ?2 campaign, or 0: every local campaign (a central campaign's true labels
 * are read only when it is named) */
#define CAMPAIGN_MATCH                                                                             \
    "(t.campaign = ?2 OR (?2 = 0 AND t.campaign NOT IN "                                           \
    "(SELECT id FROM campaigns WHERE trust = 'central')))"
/* ?1 cut-off, ?2 campaign */
#define RANGE "FROM labels l JOIN tasks t ON t.id = l.task WHERE l.id <= ?1 AND " CAMPAIGN_MATCH

static const char SQL_NEWEST[] = "SELECT COALESCE(MAX(l.id), 0) FROM labels l "
                                 "JOIN tasks t ON t.id = l.task WHERE " CAMPAIGN_MATCH;
static const char SQL_SUMMARY[] = "SELECT COUNT(*), COUNT(*) - COUNT(t.features0), "
                                  "MIN(length(t.features0)), MAX(length(t.features0)) " RANGE;
/* Per annotator: its labels, its unprivatized ones (epsilon NULL), the
 * smallest and largest privatized epsilon and their sum; then over
 * annotators. */
static const char SQL_PRIVACY[] =
    "SELECT COUNT(*), COALESCE(SUM(n), 0), COALESCE(SUM(inf), 0), MIN(emin), MAX(emax), "
    "MAX(total) FROM (SELECT COUNT(*) AS n, COUNT(*) - COUNT(l.epsilon) AS inf, "
    "MIN(l.epsilon) AS emin, MAX(l.epsilon) AS emax, SUM(l.epsilon) AS total " RANGE
    " GROUP BY l.annotator) AS per_annotator";
static const char SQL_ROWS[] =
    "SELECT l.id, l.task, t.campaign, l.timestamp_ms, l.received_ms, c.name, a.pseudonym, "
    "t.prompt, t.response0, t.response1, l.z_task, l.epsilon, t.features0, t.features1, "
    "t.reference_preferred, l.annotator "
    "FROM labels l JOIN tasks t ON t.id = l.task JOIN annotators a ON a.id = l.annotator "
    "JOIN campaigns c ON c.id = t.campaign "
    "WHERE l.id <= ?1 AND " CAMPAIGN_MATCH " ORDER BY l.id";

/* PostgreSQL: the newest label and the snapshot it was read in; then how
 * many of the transactions running at that snapshot still run. */
static const char SQL_NEWEST_PG[] =
    "SELECT COALESCE(MAX(l.id), 0), CAST(pg_current_snapshot() AS text) FROM labels l "
    "JOIN tasks t ON t.id = l.task WHERE " CAMPAIGN_MATCH;
static const char SQL_RUNNING_PG[] =
    "SELECT count(*) FROM pg_snapshot_xip(CAST(?1 AS pg_snapshot)) AS x "
    "WHERE pg_xact_status(x) = 'in progress'";
#define SETTLE_WAIT_MS 10000

/* Prepares sql with the range bound (?1 cut-off, ?2 campaign). */
static lp_stmt *range_stmt(lp_label_cursor *c, const char *sql)
{
    lp_stmt *st = NULL;
    if ((st = lp_stmt_prepare(c->db, sql)) == NULL) {
        lp_engine_fail(c->db, "label cursor");
        lp_stmt_finalize(st);
        return NULL;
    }
    lp_stmt_bind_int64(st, 1, c->cutoff);
    lp_stmt_bind_int64(st, 2, c->campaign);
    return st;
}

/* PostgreSQL, several servers: a label's id is drawn before its
 * transaction commits, so when the newest visible label is N a label with
 * a smaller id may still be on its way. Each such label's transaction began
 * before N's committed, so it runs in the snapshot that saw N: the cut-off
 * is N once those transactions have ended (within SETTLE_WAIT_MS; a
 * transaction still open then is logged and the cursor goes on). The read
 * that follows then sees every label up to N that will ever exist, so a
 * cut-off means the same set of labels whenever it is read. */
static int settle_cutoff_pg(lp_label_cursor *c)
{
    lp_stmt *st = lp_stmt_prepare(c->db, SQL_NEWEST_PG), *running = NULL;
    char *snapshot = NULL;
    int rc = LP_ESTORAGE;
    if (st != NULL) {
        lp_stmt_bind_int64(st, 2, c->campaign);
        if (lp_stmt_step(st) == LP_SQL_ROW) {
            c->cutoff = lp_stmt_column_int64(st, 0);
            snapshot = lp_engine_column_dup(st, 1);
        }
    }
    lp_stmt_finalize(st);
    if (snapshot == NULL || (running = lp_stmt_prepare(c->db, SQL_RUNNING_PG)) == NULL) {
        free(snapshot);
        return lp_engine_fail(c->db, "label cursor: newest label");
    }
    lp_stmt_bind_text(running, 1, snapshot, -1);
    for (int waited_ms = 0;; waited_ms++) {
        int step = lp_stmt_step(running);
        int64_t n = step == LP_SQL_ROW ? lp_stmt_column_int64(running, 0) : -1;
        lp_stmt_reset(running);
        if (n < 0) {
            rc = lp_engine_fail(c->db, "label cursor: running transactions");
            break;
        }
        if (n == 0 || waited_ms >= SETTLE_WAIT_MS) {
            if (n > 0)
                lp_log(LP_LOG_WARN, "label_cutoff_unsettled", LP_LOG_INT("cutoff", c->cutoff),
                       LP_LOG_INT("transactions", n));
            rc = LP_OK;
            break;
        }
        nanosleep(&(struct timespec){0, 1000000}, NULL);
    }
    lp_stmt_finalize(running);
    free(snapshot);
    return rc;
}

int lp_label_cursor_open(lp_store *s, int64_t campaign, int64_t cutoff, lp_label_cursor **out)
{
    *out = NULL;
    lp_label_cursor *c = calloc(1, sizeof *c);
    if (c == NULL)
        return LP_ENO_MEMORY;
    c->campaign = campaign;
    c->cutoff = cutoff;
    int rc = lp_engine_reader_open(s->engine, &c->db);
    if (rc == LP_OK && c->cutoff <= 0 && lp_conn_dialect(c->db) == LP_SQL_POSTGRESQL)
        rc = settle_cutoff_pg(c);
    if (rc == LP_OK && lp_conn_begin_read(c->db) != LP_SQL_DONE)
        rc = lp_engine_fail(c->db, "label cursor: begin");
    c->in_txn = rc == LP_OK;
    if (rc == LP_OK && c->cutoff <= 0) {
        lp_stmt *st = range_stmt(c, SQL_NEWEST);
        if (st != NULL && lp_stmt_step(st) == LP_SQL_ROW)
            c->cutoff = lp_stmt_column_int64(st, 0);
        else
            rc = lp_engine_fail(c->db, "label cursor: newest label");
        lp_stmt_finalize(st);
    }
    if (rc == LP_OK && (c->rows = range_stmt(c, SQL_ROWS)) == NULL)
        rc = LP_ESTORAGE;
    if (rc != LP_OK) {
        lp_label_cursor_close(c);
        return rc;
    }
    *out = c;
    return LP_OK;
}

int64_t lp_label_cursor_cutoff(const lp_label_cursor *c)
{
    return c->cutoff;
}

int lp_label_cursor_summary(lp_label_cursor *c, lp_label_summary *out)
{
    memset(out, 0, sizeof *out);
    lp_stmt *st = range_stmt(c, SQL_SUMMARY);
    int rc = LP_ESTORAGE;
    if (st != NULL && lp_stmt_step(st) == LP_SQL_ROW) {
        out->labels = lp_stmt_column_int64(st, 0);
        out->without_features = lp_stmt_column_int64(st, 1);
        out->feature_bytes_min = lp_stmt_column_int64(st, 2);
        out->feature_bytes_max = lp_stmt_column_int64(st, 3);
        rc = LP_OK;
    } else if (st != NULL) {
        lp_engine_fail(c->db, "label cursor: summary");
    }
    lp_stmt_finalize(st);
    return rc;
}

int lp_label_privacy_all_privatized(const lp_label_privacy *p)
{
    return p->known && p->labels > 0 && p->unprivatized == 0;
}

int lp_label_privacy_public(const lp_label_privacy *p)
{
    return p->known && p->labels > 0 && (p->released || p->unprivatized == 0);
}

static double column_or_nan(lp_stmt *st, int col)
{
    return lp_stmt_column_is_null(st, col) ? NAN : lp_stmt_column_double(st, col);
}

int lp_label_cursor_privacy(lp_label_cursor *c, lp_label_privacy *out)
{
    memset(out, 0, sizeof *out);
    lp_stmt *st = range_stmt(c, SQL_PRIVACY);
    int rc = LP_ESTORAGE;
    if (st != NULL && lp_stmt_step(st) == LP_SQL_ROW) {
        out->known = 1;
        out->annotators = lp_stmt_column_int64(st, 0);
        out->labels = lp_stmt_column_int64(st, 1);
        out->unprivatized = lp_stmt_column_int64(st, 2);
        out->epsilon_min = column_or_nan(st, 3);
        out->epsilon_max = column_or_nan(st, 4);
        out->epsilon_per_annotator = out->unprivatized > 0 ? INFINITY : column_or_nan(st, 5);
        rc = LP_OK;
    } else if (st != NULL) {
        lp_engine_fail(c->db, "label cursor: privacy");
    }
    lp_stmt_finalize(st);
    return rc;
}

int lp_label_cursor_next(lp_label_cursor *c, lp_label_row *row)
{
    lp_stmt *st = c->rows;
    int step = lp_stmt_step(st);
    if (step == LP_SQL_DONE)
        return 0;
    if (step != LP_SQL_ROW)
        return -lp_engine_fail(c->db, "reading labels");
    memset(row, 0, sizeof *row);
    row->label_id = lp_stmt_column_int64(st, 0);
    row->task_id = lp_stmt_column_int64(st, 1);
    row->campaign_id = lp_stmt_column_int64(st, 2);
    row->timestamp_ms = lp_stmt_column_int64(st, 3);
    row->received_ms = lp_stmt_column_int64(st, 4);
    row->campaign = lp_stmt_column_text(st, 5);
    row->pseudonym = lp_stmt_column_text(st, 6);
    row->prompt = lp_stmt_column_text(st, 7);
    row->response0 = lp_stmt_column_text(st, 8);
    row->response1 = lp_stmt_column_text(st, 9);
    row->z_task = lp_stmt_column_int(st, 10);
    row->epsilon = lp_stmt_column_is_null(st, 11) ? INFINITY : lp_stmt_column_double(st, 11);
    int b0 = lp_stmt_column_bytes(st, 12), b1 = lp_stmt_column_bytes(st, 13);
    if (b0 > 0 && b0 == b1 && b0 % (int)sizeof(double) == 0) {
        row->features0 = lp_stmt_column_blob(st, 12);
        row->features1 = lp_stmt_column_blob(st, 13);
        row->dim = (size_t)b0 / sizeof(double);
    }
    row->reference_preferred = lp_stmt_column_is_null(st, 14) ? -1 : lp_stmt_column_int(st, 14);
    row->annotator_id = lp_stmt_column_int64(st, 15);
    return 1;
}

void lp_label_cursor_close(lp_label_cursor *c)
{
    if (c == NULL)
        return;
    lp_stmt_finalize(c->rows);
    if (c->in_txn)
        lp_conn_end_read(c->db);
    lp_conn_close(c->db);
    free(c);
}
