/* campaigns.c — the campaigns repository. See campaigns.h. */
#include "campaigns.h"

#include "buf.h"
#include "clock.h"
#include "db.h"
#include "error.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define CAMPAIGN_COLS                                                                              \
    "SELECT id, name, epsilon_min, epsilon_max, allow_infinite, epsilon_budget, "                  \
    "epsilon_default, labels_per_task, coalesce(annotator_quota, 0), trust = 'central', "          \
    "coalesce(release_epsilon, 0), coalesce(release_delta, 0), coalesce(contribution_cap, 0) "     \
    "FROM campaigns "

static const char SQL_EXISTS[] = "SELECT 1 FROM campaigns WHERE name = ?1";
static const char SQL_INSERT[] = "INSERT INTO campaigns (name, epsilon_min, epsilon_max, "
                                 "allow_infinite, epsilon_budget, epsilon_default, created_ms, "
                                 "labels_per_task, annotator_quota, trust, release_epsilon, "
                                 "release_delta, contribution_cap) "
                                 "VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13) "
                                 "RETURNING id";
static const char SQL_SET_BUDGET[] =
    "UPDATE campaigns SET release_epsilon = ?2, release_delta = ?3 WHERE name = ?1";
static const char SQL_SPENT[] =
    "SELECT coalesce(sum(p.release_epsilon), 0), coalesce(sum(p.release_delta), 0) "
    "FROM model_privacy p JOIN models m ON m.version = p.model "
    "WHERE m.campaign = ?1 AND p.mechanism IS NOT NULL";
static const char SQL_BY_NAME[] = CAMPAIGN_COLS "WHERE name = ?1";
static const char SQL_BY_ID[] = CAMPAIGN_COLS "WHERE id = ?1";
static const char SQL_LIST[] = CAMPAIGN_COLS "ORDER BY id";
static const char SQL_PROGRESS[] =
    "SELECT c.name, f.tasks, f.tasks_complete, f.labels, f.tasks * c.labels_per_task, "
    "(SELECT count(*) FROM labels l WHERE l.annotator = a.id), coalesce(c.annotator_quota, 0) "
    "FROM annotators a JOIN campaigns c ON c.id = a.campaign "
    "JOIN campaign_fill f ON f.campaign = a.campaign WHERE a.id = ?1";

struct create_job {
    lp_engine *engine;
    lp_campaign *c;
};

static int create_fn(lp_conn *db, void *ctx)
{
    struct create_job *j = ctx;
    lp_campaign *c = j->c;
    lp_stmt *st = lp_engine_stmt(j->engine, db, SQL_EXISTS);
    if (st == NULL)
        return LP_ESTORAGE;
    lp_stmt_bind_text(st, 1, c->name, -1);
    int step = lp_stmt_step(st);
    lp_stmt_reset(st);
    if (step == LP_SQL_ROW)
        return LP_ECAMPAIGN_EXISTS;
    if ((st = lp_engine_stmt(j->engine, db, SQL_INSERT)) == NULL)
        return LP_ESTORAGE;
    lp_stmt_bind_text(st, 1, c->name, -1);
    lp_stmt_bind_double(st, 2, c->epsilon_min);
    lp_stmt_bind_double(st, 3, c->epsilon_max);
    lp_stmt_bind_int64(st, 4, c->allow_infinite ? 1 : 0);
    lp_stmt_bind_double(st, 5, c->epsilon_budget);
    lp_stmt_bind_double(st, 6, c->epsilon_default);
    lp_stmt_bind_int64(st, 7, lp_now_ms());
    if (c->labels_per_task < 1)
        c->labels_per_task = 1;
    lp_stmt_bind_int64(st, 8, c->labels_per_task);
    if (c->annotator_quota > 0)
        lp_stmt_bind_int64(st, 9, c->annotator_quota);
    lp_stmt_bind_text(st, 10, c->central ? "central" : "local", -1);
    if (c->release_epsilon > 0)
        lp_stmt_bind_double(st, 11, c->release_epsilon);
    if (c->release_delta > 0)
        lp_stmt_bind_double(st, 12, c->release_delta);
    if (c->contribution_cap > 0)
        lp_stmt_bind_int64(st, 13, c->contribution_cap);
    if (lp_engine_step_id(st, &c->id) != LP_SQL_DONE)
        return lp_engine_fail(db, "campaign insert");
    return LP_OK;
}

int lp_store_campaign_create(lp_store *s, lp_campaign *c)
{
    struct create_job j = {s->engine, c};
    return lp_engine_write(s->engine, create_fn, &j, 1, 0);
}

static void read_campaign(lp_stmt *st, lp_campaign *c)
{
    memset(c, 0, sizeof *c);
    c->id = lp_stmt_column_int64(st, 0);
    snprintf(c->name, sizeof c->name, "%s", lp_stmt_column_text(st, 1));
    c->epsilon_min = lp_stmt_column_double(st, 2);
    c->epsilon_max = lp_stmt_column_double(st, 3);
    c->allow_infinite = lp_stmt_column_int(st, 4);
    c->epsilon_budget = lp_stmt_column_double(st, 5);
    c->epsilon_default = lp_stmt_column_double(st, 6);
    c->labels_per_task = lp_stmt_column_int64(st, 7);
    c->annotator_quota = lp_stmt_column_int64(st, 8);
    c->central = lp_stmt_column_int(st, 9);
    c->release_epsilon = lp_stmt_column_double(st, 10);
    c->release_delta = lp_stmt_column_double(st, 11);
    c->contribution_cap = lp_stmt_column_int64(st, 12);
}

struct budget_job {
    lp_engine *engine;
    lp_campaign *c;
};

static int set_budget_fn(lp_conn *db, void *ctx)
{
    struct budget_job *j = ctx;
    lp_stmt *st = lp_engine_stmt(j->engine, db, SQL_SET_BUDGET);
    if (st == NULL)
        return LP_ESTORAGE;
    lp_stmt_bind_text(st, 1, j->c->name, -1);
    if (j->c->release_epsilon > 0)
        lp_stmt_bind_double(st, 2, j->c->release_epsilon);
    else
        lp_stmt_bind_null(st, 2);
    if (j->c->release_delta > 0)
        lp_stmt_bind_double(st, 3, j->c->release_delta);
    else
        lp_stmt_bind_null(st, 3);
    int step = lp_stmt_step(st);
    lp_stmt_reset(st);
    if (step != LP_SQL_DONE)
        return lp_engine_fail(db, "campaign budget");
    return lp_conn_changes(db) == 1 ? LP_OK : LP_EUNKNOWN_CAMPAIGN;
}

int lp_store_campaign_set_budget(lp_store *s, lp_campaign *c)
{
    struct budget_job j = {s->engine, c};
    int rc = lp_engine_write(s->engine, set_budget_fn, &j, 1, 0);
    return rc == LP_OK ? lp_store_campaign_by_name(s, c->name, c) : rc;
}

struct spent_query {
    lp_engine *engine;
    int64_t campaign;
    double epsilon, delta;
};

static int spent_fn(lp_conn *db, void *ctx)
{
    struct spent_query *q = ctx;
    lp_stmt *st = lp_engine_stmt(q->engine, db, SQL_SPENT);
    if (st == NULL)
        return LP_ESTORAGE;
    lp_stmt_bind_int64(st, 1, q->campaign);
    int rc = LP_ESTORAGE;
    if (lp_stmt_step(st) == LP_SQL_ROW) {
        q->epsilon = lp_stmt_column_double(st, 0);
        q->delta = lp_stmt_column_double(st, 1);
        rc = LP_OK;
    }
    lp_stmt_reset(st);
    return rc;
}

int lp_store_release_spent(lp_store *s, int64_t campaign, double *epsilon, double *delta)
{
    struct spent_query q = {.engine = s->engine, .campaign = campaign};
    int rc = lp_engine_read(s->engine, spent_fn, &q);
    *epsilon = q.epsilon;
    *delta = q.delta;
    return rc;
}

struct get_query {
    lp_engine *engine;
    const char *name; /* or */
    int64_t id;
    lp_campaign *out;
};

static int get_fn(lp_conn *db, void *ctx)
{
    struct get_query *q = ctx;
    lp_stmt *st = lp_engine_stmt(q->engine, db, q->name ? SQL_BY_NAME : SQL_BY_ID);
    if (st == NULL)
        return LP_ESTORAGE;
    if (q->name)
        lp_stmt_bind_text(st, 1, q->name, -1);
    else
        lp_stmt_bind_int64(st, 1, q->id);
    int rc = LP_ESTORAGE, step = lp_stmt_step(st);
    if (step == LP_SQL_ROW) {
        read_campaign(st, q->out);
        rc = LP_OK;
    } else if (step == LP_SQL_DONE) {
        rc = LP_EUNKNOWN_CAMPAIGN;
    }
    lp_stmt_reset(st);
    return rc;
}

int lp_store_campaign_by_name(lp_store *s, const char *name, lp_campaign *out)
{
    struct get_query q = {.engine = s->engine, .name = name, .out = out};
    return lp_engine_read(s->engine, get_fn, &q);
}

int lp_store_campaign_by_id(lp_store *s, int64_t id, lp_campaign *out)
{
    struct get_query q = {.engine = s->engine, .id = id, .out = out};
    return lp_engine_read(s->engine, get_fn, &q);
}

struct list_query {
    lp_engine *engine;
    lp_campaign *items;
    size_t n;
};

static int list_fn(lp_conn *db, void *ctx)
{
    struct list_query *q = ctx;
    lp_stmt *st = lp_engine_stmt(q->engine, db, SQL_LIST);
    if (st == NULL)
        return LP_ESTORAGE;
    int rc = LP_OK, step;
    size_t cap = 0;
    while ((step = lp_stmt_step(st)) == LP_SQL_ROW) {
        if ((rc = lp_array_reserve((void **)&q->items, &cap, q->n, sizeof *q->items, 8)) != LP_OK)
            break;
        read_campaign(st, &q->items[q->n++]);
    }
    if (rc == LP_OK && step != LP_SQL_DONE)
        rc = LP_ESTORAGE;
    lp_stmt_reset(st);
    return rc;
}

int lp_store_campaign_list(lp_store *s, lp_campaign **out, size_t *n)
{
    struct list_query q = {.engine = s->engine};
    int rc = lp_engine_read(s->engine, list_fn, &q);
    if (rc != LP_OK) {
        free(q.items);
        q.items = NULL;
        q.n = 0;
    }
    *out = q.items;
    *n = q.n;
    return rc;
}

struct progress_query {
    lp_engine *engine;
    int64_t annotator;
    lp_progress *out;
};

static int progress_fn(lp_conn *db, void *ctx)
{
    struct progress_query *q = ctx;
    lp_stmt *st = lp_engine_stmt(q->engine, db, SQL_PROGRESS);
    if (st == NULL)
        return LP_ESTORAGE;
    lp_stmt_bind_int64(st, 1, q->annotator);
    int rc = LP_ESTORAGE, step = lp_stmt_step(st);
    if (step == LP_SQL_ROW) {
        lp_progress *p = q->out;
        snprintf(p->campaign, sizeof p->campaign, "%s", lp_stmt_column_text(st, 0));
        p->tasks_total = lp_stmt_column_int64(st, 1);
        p->tasks_complete = lp_stmt_column_int64(st, 2);
        p->labels = lp_stmt_column_int64(st, 3);
        p->labels_needed = lp_stmt_column_int64(st, 4);
        p->annotator_labels = lp_stmt_column_int64(st, 5);
        p->annotator_quota = lp_stmt_column_int64(st, 6);
        rc = LP_OK;
    } else if (step == LP_SQL_DONE) {
        rc = LP_EUNKNOWN_KEY;
    }
    lp_stmt_reset(st);
    return rc;
}

int lp_store_progress(lp_store *s, int64_t annotator, lp_progress *out)
{
    memset(out, 0, sizeof *out);
    struct progress_query q = {s->engine, annotator, out};
    return lp_engine_read(s->engine, progress_fn, &q);
}
