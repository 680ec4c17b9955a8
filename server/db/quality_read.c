/* quality_read.c — the reads behind label quality. See quality_read.h. */
#include "quality_read.h"

#include "buf.h"
#include "db.h"
#include "error.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char SQL_ANNOTATORS[] =
    "SELECT id, pseudonym FROM annotators WHERE campaign = ?1 ORDER BY id";
/* an annotator's labels are all on its campaign's tasks */
static const char SQL_LABELS[] =
    "SELECT l.task, l.annotator, l.z_task, l.epsilon, t.gold FROM annotators a "
    "JOIN labels l ON l.annotator = a.id JOIN tasks t ON t.id = l.task "
    "WHERE a.campaign = ?1 ORDER BY l.task, l.annotator";

/* The index of annotator id in the sorted array, or SIZE_MAX. */
static size_t annotator_index(const lp_quality_data *d, int64_t id)
{
    size_t lo = 0, hi = d->n_annotators;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (d->annotators[mid].id < id)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo < d->n_annotators && d->annotators[lo].id == id ? lo : SIZE_MAX;
}

static int read_annotators(lp_conn *db, int64_t campaign, lp_quality_data *d)
{
    lp_stmt *st = NULL;
    if ((st = lp_stmt_prepare(db, SQL_ANNOTATORS)) == NULL) {
        lp_stmt_finalize(st);
        return lp_engine_fail(db, "quality: annotators");
    }
    lp_stmt_bind_int64(st, 1, campaign);
    size_t cap = 0;
    int rc = LP_OK, step;
    while (rc == LP_OK && (step = lp_stmt_step(st)) == LP_SQL_ROW) {
        rc = lp_array_reserve((void **)&d->annotators, &cap, d->n_annotators, sizeof *d->annotators,
                              16);
        if (rc != LP_OK)
            break;
        lp_quality_annotator *a = &d->annotators[d->n_annotators++];
        a->id = lp_stmt_column_int64(st, 0);
        const char *p = lp_stmt_column_text(st, 1);
        snprintf(a->pseudonym, sizeof a->pseudonym, "%s", p ? p : "");
    }
    if (rc == LP_OK && step != LP_SQL_DONE)
        rc = lp_engine_fail(db, "quality: annotators");
    lp_stmt_finalize(st);
    return rc;
}

static int read_labels(lp_conn *db, int64_t campaign, lp_quality_data *d)
{
    lp_stmt *st = NULL;
    if ((st = lp_stmt_prepare(db, SQL_LABELS)) == NULL) {
        lp_stmt_finalize(st);
        return lp_engine_fail(db, "quality: labels");
    }
    lp_stmt_bind_int64(st, 1, campaign);
    size_t cap = 0;
    int rc = LP_OK, step;
    while (rc == LP_OK && (step = lp_stmt_step(st)) == LP_SQL_ROW) {
        size_t who = annotator_index(d, lp_stmt_column_int64(st, 1));
        if (who == SIZE_MAX)
            continue; /* enrolled after the annotators were read: not in this snapshot */
        rc = lp_array_reserve((void **)&d->rows, &cap, d->n_rows, sizeof *d->rows, 256);
        if (rc != LP_OK)
            break;
        lp_quality_row *r = &d->rows[d->n_rows++];
        r->task = lp_stmt_column_int64(st, 0);
        r->annotator = who;
        r->z_task = lp_stmt_column_int(st, 2) != 0;
        r->epsilon = lp_stmt_column_is_null(st, 3) ? INFINITY : lp_stmt_column_double(st, 3);
        r->gold = lp_stmt_column_is_null(st, 4) ? -1 : lp_stmt_column_int(st, 4) != 0;
    }
    if (rc == LP_OK && step != LP_SQL_DONE)
        rc = lp_engine_fail(db, "quality: labels");
    lp_stmt_finalize(st);
    return rc;
}

int lp_store_quality_read(lp_store *s, int64_t campaign, lp_quality_data *out)
{
    memset(out, 0, sizeof *out);
    lp_conn *db = NULL;
    int rc = lp_engine_reader_open(s->engine, &db);
    if (rc == LP_OK && lp_conn_begin_read(db) != LP_SQL_DONE)
        rc = lp_engine_fail(db, "quality: begin"); /* one snapshot for both reads */
    if (rc == LP_OK)
        rc = read_annotators(db, campaign, out);
    if (rc == LP_OK)
        rc = read_labels(db, campaign, out);
    if (db != NULL) {
        lp_conn_end_read(db);
        lp_conn_close(db);
    }
    if (rc != LP_OK)
        lp_quality_data_clear(out);
    return rc;
}

void lp_quality_data_clear(lp_quality_data *d)
{
    if (d == NULL)
        return;
    free(d->annotators);
    free(d->rows);
    memset(d, 0, sizeof *d);
}
