/* views.c — the operator's read views. See views.h. */
#include "views.h"

#include "buf.h"
#include "db.h"
#include "error.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MINUTE_MS 60000

static const char SQL_CAMPAIGN[] =
    "SELECT c.id, c.epsilon_min, c.epsilon_max, c.allow_infinite, c.epsilon_budget, "
    "c.epsilon_default, c.labels_per_task, coalesce(c.annotator_quota, 0), f.tasks, "
    "f.tasks_complete, f.labels, f.annotators, f.epsilon_spent, f.assignments "
    "FROM campaigns c JOIN campaign_fill f ON f.campaign = c.id WHERE c.name = ?1";
static const char SQL_SPENT[] = "SELECT epsilon_spent FROM annotators WHERE campaign = ?1";
static const char SQL_LAST_MINUTE[] = "SELECT max(minute) FROM label_minutes WHERE campaign = ?1";
static const char SQL_MINUTES[] = "SELECT minute, labels FROM label_minutes "
                                  "WHERE campaign = ?1 AND minute >= ?2 ORDER BY minute";
static const char SQL_FILL[] = "SELECT annotators, tasks FROM campaign_fill WHERE campaign = ?1";
static const char SQL_ANNOTATORS[] =
    "SELECT a.pseudonym, a.revoked, a.epsilon_spent, a.enrolled_ms, f.labels, f.skips, "
    "coalesce(f.last_label_ms, 0) FROM annotators a JOIN annotator_fill f ON f.annotator = a.id "
    "WHERE a.campaign = ?1 ORDER BY a.id LIMIT ?3 OFFSET ?2";
static const char SQL_TASKS[] =
    "SELECT t.id, substr(t.prompt, 1, CAST(?4 AS INTEGER)), f.labels, coalesce(t.gold, -1) FROM "
    "tasks t "
    "JOIN task_fill f ON f.task = t.id WHERE t.campaign = ?1 ORDER BY t.id LIMIT ?3 OFFSET ?2";
static const char SQL_TASK_ONE[] =
    "SELECT t.id, t.created_ms, c.name, t.source_id, t.prompt, t.response0, t.response1, "
    "f.labels, c.labels_per_task, (SELECT count(*) FROM assignments s "
    "WHERE s.task = t.id AND s.skipped = 1), coalesce(t.gold, -1) FROM tasks t "
    "JOIN campaigns c ON c.id = t.campaign "
    "JOIN task_fill f ON f.task = t.id WHERE t.id = ?1";

const char *const LP_VIEWS_SQL[] = {SQL_CAMPAIGN, SQL_SPENT,      SQL_LAST_MINUTE, SQL_MINUTES,
                                    SQL_FILL,     SQL_ANNOTATORS, SQL_TASKS,       SQL_TASK_ONE};
const size_t LP_VIEWS_SQL_COUNT = sizeof LP_VIEWS_SQL / sizeof LP_VIEWS_SQL[0];

/* ---- excerpts ---- */

char *lp_utf8_excerpt(const char *text, size_t len, size_t chars, int *truncated)
{
    size_t i = 0, n = 0;
    while (i < len && n < chars) {
        i++; /* past the lead byte, then its continuation bytes */
        while (i < len && ((unsigned char)text[i] & 0xC0) == 0x80)
            i++;
        n++;
    }
    *truncated = i < len;
    char *out = malloc(i + 1);
    if (out != NULL) {
        memcpy(out, text, i);
        out[i] = '\0';
    }
    return out;
}

/* ---- the campaign view ---- */

struct view_query {
    lp_engine *engine;
    const char *name;
    int64_t bucket_s, now_ms;
    lp_campaign_view *out;
};

static int view_campaign(struct view_query *q, lp_conn *db)
{
    lp_stmt *st = lp_engine_stmt(q->engine, db, SQL_CAMPAIGN);
    if (st == NULL)
        return LP_ESTORAGE;
    lp_stmt_bind_text(st, 1, q->name, -1);
    int step = lp_stmt_step(st);
    if (step == LP_SQL_ROW) {
        lp_campaign_view *v = q->out;
        lp_campaign *c = &v->campaign;
        c->id = lp_stmt_column_int64(st, 0);
        snprintf(c->name, sizeof c->name, "%s", q->name);
        c->epsilon_min = lp_stmt_column_double(st, 1);
        c->epsilon_max = lp_stmt_column_double(st, 2);
        c->allow_infinite = lp_stmt_column_int(st, 3);
        c->epsilon_budget = lp_stmt_column_double(st, 4);
        c->epsilon_default = lp_stmt_column_double(st, 5);
        c->labels_per_task = lp_stmt_column_int64(st, 6);
        c->annotator_quota = lp_stmt_column_int64(st, 7);
        v->tasks = lp_stmt_column_int64(st, 8);
        v->tasks_complete = lp_stmt_column_int64(st, 9);
        v->labels = lp_stmt_column_int64(st, 10);
        v->annotators = lp_stmt_column_int64(st, 11);
        v->epsilon_spent = lp_stmt_column_double(st, 12);
        v->assignments = lp_stmt_column_int64(st, 13);
        v->labels_needed = v->tasks * c->labels_per_task;
    }
    lp_stmt_reset(st);
    return step == LP_SQL_ROW    ? LP_OK
           : step == LP_SQL_DONE ? LP_EUNKNOWN_CAMPAIGN
                                 : lp_engine_fail(db, "campaign view");
}

/* The histogram of the annotators' spent epsilon and the exhausted count. */
static int view_budget(struct view_query *q, lp_conn *db)
{
    lp_campaign_view *v = q->out;
    lp_stmt *st = lp_engine_stmt(q->engine, db, SQL_SPENT);
    if (st == NULL)
        return LP_ESTORAGE;
    lp_stmt_bind_int64(st, 1, v->campaign.id);
    double budget = v->campaign.epsilon_budget;
    int step;
    while ((step = lp_stmt_step(st)) == LP_SQL_ROW) {
        double spent = lp_stmt_column_double(st, 0);
        int bin = spent > 0 ? (int)(spent / budget * LP_EPSILON_BINS) : 0;
        v->histogram[bin < LP_EPSILON_BINS ? bin : LP_EPSILON_BINS - 1]++;
        /* the ingest check (labels.c): spent + epsilon <= budget (1 + 1e-12) */
        if (spent + v->campaign.epsilon_min > budget * (1.0 + 1e-12))
            v->exhausted++;
    }
    lp_stmt_reset(st);
    return step == LP_SQL_DONE ? LP_OK : lp_engine_fail(db, "epsilon histogram");
}

/* Labels per bucket from label_minutes, newest LP_VIEW_POINTS_MAX buckets. */
static int view_points(struct view_query *q, lp_conn *db)
{
    lp_campaign_view *v = q->out;
    int64_t per = q->bucket_s / 60; /* minutes per bucket */
    lp_stmt *st = lp_engine_stmt(q->engine, db, SQL_LAST_MINUTE);
    if (st == NULL)
        return LP_ESTORAGE;
    lp_stmt_bind_int64(st, 1, v->campaign.id);
    int step = lp_stmt_step(st);
    int any = step == LP_SQL_ROW && !lp_stmt_column_is_null(st, 0);
    int64_t last_minute = any ? lp_stmt_column_int64(st, 0) : 0;
    lp_stmt_reset(st);
    if (step != LP_SQL_ROW)
        return lp_engine_fail(db, "newest label minute");
    v->bucket_s = q->bucket_s;
    v->earlier_labels = v->labels;
    if (!any)
        return LP_OK;
    if (q->now_ms / MINUTE_MS > last_minute)
        last_minute = q->now_ms / MINUTE_MS;
    int64_t last = last_minute / per, first_allowed = last - (LP_VIEW_POINTS_MAX - 1);
    if ((st = lp_engine_stmt(q->engine, db, SQL_MINUTES)) == NULL)
        return LP_ESTORAGE;
    lp_stmt_bind_int64(st, 1, v->campaign.id);
    lp_stmt_bind_int64(st, 2, first_allowed * per);
    int64_t first = -1;
    int rc = LP_OK;
    while ((step = lp_stmt_step(st)) == LP_SQL_ROW) {
        int64_t bucket = lp_stmt_column_int64(st, 0) / per;
        if (first < 0) { /* the window starts at the first bucket with labels */
            first = bucket;
            v->n_points = (size_t)(last - first + 1);
            v->points = calloc(v->n_points, sizeof *v->points);
            if (v->points == NULL) {
                rc = LP_ENO_MEMORY;
                break;
            }
            for (size_t k = 0; k < v->n_points; k++)
                v->points[k].t_ms = (first + (int64_t)k) * q->bucket_s * 1000;
        }
        int64_t n = lp_stmt_column_int64(st, 1);
        v->points[bucket - first].labels += n;
        v->earlier_labels -= n;
    }
    lp_stmt_reset(st);
    if (rc == LP_OK && step != LP_SQL_DONE)
        rc = lp_engine_fail(db, "labels over time");
    return rc;
}

static int view_fn(lp_conn *db, void *ctx)
{
    struct view_query *q = ctx;
    int rc = view_campaign(q, db);
    if (rc == LP_OK)
        rc = view_budget(q, db);
    if (rc == LP_OK)
        rc = view_points(q, db);
    return rc;
}

int lp_store_campaign_view(lp_store *s, const char *name, int64_t bucket_s, int64_t now_ms,
                           lp_campaign_view *out)
{
    memset(out, 0, sizeof *out);
    if (bucket_s < LP_BUCKET_S_MIN || bucket_s > LP_BUCKET_S_MAX || bucket_s % 60 != 0 ||
        now_ms < 0)
        return LP_EINVALID_ARGUMENT;
    struct view_query q = {s->engine, name, bucket_s, now_ms, out};
    int rc = lp_engine_read_snapshot(s->engine, view_fn, &q);
    if (rc != LP_OK)
        lp_campaign_view_clear(out);
    return rc;
}

void lp_campaign_view_clear(lp_campaign_view *v)
{
    if (v == NULL)
        return;
    free(v->points);
    v->points = NULL;
    v->n_points = 0;
}

/* ---- pages ---- */

struct page_kind;
struct page_query {
    lp_engine *engine;
    const struct page_kind *kind;
    int64_t campaign, offset, limit;
    void *rows; /* lp_annotator_row or lp_task_row */
    size_t n;
    int64_t total;
};

/* The campaign's counts (annotators, tasks); LP_EUNKNOWN_CAMPAIGN. */
static int page_total(struct page_query *q, lp_conn *db, int col)
{
    lp_stmt *st = lp_engine_stmt(q->engine, db, SQL_FILL);
    if (st == NULL)
        return LP_ESTORAGE;
    lp_stmt_bind_int64(st, 1, q->campaign);
    int step = lp_stmt_step(st);
    if (step == LP_SQL_ROW)
        q->total = lp_stmt_column_int64(st, col);
    lp_stmt_reset(st);
    return step == LP_SQL_ROW    ? LP_OK
           : step == LP_SQL_DONE ? LP_EUNKNOWN_CAMPAIGN
                                 : lp_engine_fail(db, "campaign counts");
}

/* One row of a page into rows[i]; LP_OK or LP_ENO_MEMORY. */
typedef int (*page_row_fn)(lp_stmt *st, void *rows, size_t i);

static int annotator_row(lp_stmt *st, void *rows, size_t i)
{
    lp_annotator_row *r = (lp_annotator_row *)rows + i;
    snprintf(r->pseudonym, sizeof r->pseudonym, "%s", lp_stmt_column_text(st, 0));
    r->revoked = lp_stmt_column_int(st, 1);
    r->epsilon_spent = lp_stmt_column_double(st, 2);
    r->enrolled_ms = lp_stmt_column_int64(st, 3);
    r->labels = lp_stmt_column_int64(st, 4);
    r->skips = lp_stmt_column_int64(st, 5);
    r->last_label_ms = lp_stmt_column_int64(st, 6);
    return LP_OK;
}

static int task_row(lp_stmt *st, void *rows, size_t i)
{
    lp_task_row *r = (lp_task_row *)rows + i;
    r->id = lp_stmt_column_int64(st, 0);
    r->labels = lp_stmt_column_int64(st, 2);
    r->gold = lp_stmt_column_int(st, 3);
    const char *p = lp_stmt_column_text(st, 1);
    r->prompt = lp_utf8_excerpt(p ? p : "", (size_t)lp_stmt_column_bytes(st, 1), LP_EXCERPT_CHARS,
                                &r->truncated);
    return r->prompt != NULL ? LP_OK : LP_ENO_MEMORY;
}

/* What a page is read with: its statement, the campaign_fill column of
 * its total, the size of a row and how to read one. */
static const struct page_kind {
    const char *sql;
    int total_col;
    size_t size;
    page_row_fn row;
} ANNOTATOR_PAGE = {SQL_ANNOTATORS, 0, sizeof(lp_annotator_row), annotator_row},
  TASK_PAGE = {SQL_TASKS, 1, sizeof(lp_task_row), task_row};

static int page_fn(lp_conn *db, void *ctx)
{
    struct page_query *q = ctx;
    int rc = page_total(q, db, q->kind->total_col);
    if (rc != LP_OK)
        return rc;
    lp_stmt *st = lp_engine_stmt(q->engine, db, q->kind->sql);
    if (st == NULL)
        return LP_ESTORAGE;
    lp_stmt_bind_int64(st, 1, q->campaign);
    lp_stmt_bind_int64(st, 2, q->offset);
    lp_stmt_bind_int64(st, 3, q->limit);
    if (q->kind == &TASK_PAGE) /* one character more tells whether it was cut */
        lp_stmt_bind_int64(st, 4, LP_EXCERPT_CHARS + 1);
    q->rows = calloc((size_t)q->limit, q->kind->size);
    rc = q->rows != NULL ? LP_OK : LP_ENO_MEMORY;
    int step = LP_SQL_DONE;
    while (rc == LP_OK && q->n < (size_t)q->limit && (step = lp_stmt_step(st)) == LP_SQL_ROW)
        rc = q->kind->row(st, q->rows, q->n++);
    lp_stmt_reset(st);
    if (rc == LP_OK && step != LP_SQL_DONE && step != LP_SQL_ROW)
        rc = lp_engine_fail(db, "page");
    return rc;
}

/* Reads a page of kind; on failure frees what was read. */
static int read_page(lp_store *s, const struct page_kind *kind, int64_t campaign, int64_t offset,
                     int64_t limit, void **out, size_t *n, int64_t *total)
{
    *out = NULL;
    *n = 0;
    *total = 0;
    if (offset < 0 || limit < 1 || limit > LP_PAGE_MAX)
        return LP_EINVALID_ARGUMENT;
    struct page_query q = {
        .engine = s->engine, .kind = kind, .campaign = campaign, .offset = offset, .limit = limit};
    int rc = lp_engine_read_snapshot(s->engine, page_fn, &q);
    if (rc != LP_OK) {
        if (kind == &TASK_PAGE)
            lp_task_rows_free(q.rows, q.n);
        else
            free(q.rows);
        return rc;
    }
    *out = q.rows;
    *n = q.n;
    *total = q.total;
    return LP_OK;
}

int lp_store_annotator_page(lp_store *s, int64_t campaign, int64_t offset, int64_t limit,
                            lp_annotator_row **out, size_t *n, int64_t *total)
{
    void *rows = NULL;
    int rc = read_page(s, &ANNOTATOR_PAGE, campaign, offset, limit, &rows, n, total);
    *out = rows;
    return rc;
}

int lp_store_task_page(lp_store *s, int64_t campaign, int64_t offset, int64_t limit,
                       lp_task_row **out, size_t *n, int64_t *total)
{
    void *rows = NULL;
    int rc = read_page(s, &TASK_PAGE, campaign, offset, limit, &rows, n, total);
    *out = rows;
    return rc;
}

void lp_task_rows_free(lp_task_row *rows, size_t n)
{
    for (size_t i = 0; rows != NULL && i < n; i++)
        free(rows[i].prompt);
    free(rows);
}

/* ---- one task ---- */

struct detail_query {
    lp_engine *engine;
    int64_t id;
    lp_task_detail *out;
};

static int detail_fn(lp_conn *db, void *ctx)
{
    struct detail_query *q = ctx;
    lp_stmt *st = lp_engine_stmt(q->engine, db, SQL_TASK_ONE);
    if (st == NULL)
        return LP_ESTORAGE;
    lp_stmt_bind_int64(st, 1, q->id);
    int step = lp_stmt_step(st), rc = LP_OK;
    if (step == LP_SQL_ROW) {
        lp_task_detail *t = q->out;
        t->id = lp_stmt_column_int64(st, 0);
        t->created_ms = lp_stmt_column_int64(st, 1);
        snprintf(t->campaign, sizeof t->campaign, "%s", lp_stmt_column_text(st, 2));
        t->source_id = lp_engine_column_dup(st, 3);
        t->prompt = lp_engine_column_dup(st, 4);
        t->response0 = lp_engine_column_dup(st, 5);
        t->response1 = lp_engine_column_dup(st, 6);
        t->labels = lp_stmt_column_int64(st, 7);
        t->labels_needed = lp_stmt_column_int64(st, 8);
        t->skips = lp_stmt_column_int64(st, 9);
        t->gold = lp_stmt_column_int(st, 10);
        if (!t->source_id || !t->prompt || !t->response0 || !t->response1)
            rc = LP_ENO_MEMORY;
    } else {
        rc = step == LP_SQL_DONE ? LP_EUNKNOWN_TASK : lp_engine_fail(db, "task detail");
    }
    lp_stmt_reset(st);
    return rc;
}

int lp_store_task_detail(lp_store *s, int64_t id, lp_task_detail *out)
{
    memset(out, 0, sizeof *out);
    struct detail_query q = {s->engine, id, out};
    int rc = lp_engine_read(s->engine, detail_fn, &q);
    if (rc != LP_OK)
        lp_task_detail_clear(out);
    return rc;
}

void lp_task_detail_clear(lp_task_detail *t)
{
    if (t == NULL)
        return;
    free(t->source_id);
    free(t->prompt);
    free(t->response0);
    free(t->response1);
    t->source_id = t->prompt = t->response0 = t->response1 = NULL;
}
