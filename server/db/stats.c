/* stats.c — database counts. See stats.h. */
#include "stats.h"

#include "buf.h"
#include "db.h"
#include "error.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Totals and per-campaign figures, all from campaign_fill (schema/004 and
 * 008: counters kept by triggers): O(campaigns) whatever the labels. */
static const char SQL_TOTALS[] =
    "SELECT coalesce(sum(tasks), 0), coalesce(sum(annotators), 0), coalesce(sum(labels), 0), "
    "coalesce(sum(assignments), 0), coalesce(sum(epsilon_spent), 0) FROM campaign_fill";
static const char SQL_PER_CAMPAIGN[] =
    "SELECT c.name, f.tasks, f.annotators, f.labels, f.epsilon_spent, c.labels_per_task, "
    "coalesce(c.annotator_quota, 0), f.tasks_complete, f.tasks * c.labels_per_task "
    "FROM campaigns c JOIN campaign_fill f ON f.campaign = c.id ORDER BY c.id";

const char *const LP_STATS_SQL[] = {SQL_TOTALS, SQL_PER_CAMPAIGN};
const size_t LP_STATS_SQL_COUNT = sizeof LP_STATS_SQL / sizeof LP_STATS_SQL[0];

struct stats_query {
    lp_engine *engine;
    lp_stats *out;
};

static int totals(struct stats_query *q, lp_conn *db)
{
    lp_stmt *st = lp_engine_stmt(q->engine, db, SQL_TOTALS);
    if (st == NULL)
        return LP_ESTORAGE;
    int step = lp_stmt_step(st);
    if (step == LP_SQL_ROW) {
        q->out->tasks = lp_stmt_column_int64(st, 0);
        q->out->annotators = lp_stmt_column_int64(st, 1);
        q->out->labels = lp_stmt_column_int64(st, 2);
        q->out->assignments = lp_stmt_column_int64(st, 3);
        q->out->epsilon_spent = lp_stmt_column_double(st, 4);
    }
    lp_stmt_reset(st);
    return step == LP_SQL_ROW ? LP_OK : lp_engine_fail(db, "stats totals");
}

static int per_campaign(struct stats_query *q, lp_conn *db)
{
    lp_stmt *st = lp_engine_stmt(q->engine, db, SQL_PER_CAMPAIGN);
    if (st == NULL)
        return LP_ESTORAGE;
    lp_stats *out = q->out;
    size_t cap = 0;
    int rc = LP_OK, step;
    while ((step = lp_stmt_step(st)) == LP_SQL_ROW) {
        if ((rc = lp_array_reserve((void **)&out->campaigns, &cap, out->n_campaigns,
                                   sizeof *out->campaigns, 8)) != LP_OK)
            break;
        lp_campaign_count *cc = &out->campaigns[out->n_campaigns++];
        snprintf(cc->name, sizeof cc->name, "%s", lp_stmt_column_text(st, 0));
        cc->tasks = lp_stmt_column_int64(st, 1);
        cc->annotators = lp_stmt_column_int64(st, 2);
        cc->labels = lp_stmt_column_int64(st, 3);
        cc->epsilon_spent = lp_stmt_column_double(st, 4);
        cc->labels_per_task = lp_stmt_column_int64(st, 5);
        cc->annotator_quota = lp_stmt_column_int64(st, 6);
        cc->tasks_complete = lp_stmt_column_int64(st, 7);
        cc->labels_needed = lp_stmt_column_int64(st, 8);
    }
    lp_stmt_reset(st);
    if (rc == LP_OK && step != LP_SQL_DONE)
        rc = lp_engine_fail(db, "stats per campaign");
    return rc;
}

static int stats_fn(lp_conn *db, void *ctx)
{
    struct stats_query *q = ctx;
    int rc = totals(q, db);
    return rc == LP_OK ? per_campaign(q, db) : rc;
}

int lp_store_stats(lp_store *s, lp_stats *out)
{
    memset(out, 0, sizeof *out);
    struct stats_query q = {s->engine, out};
    int rc = lp_engine_read_snapshot(s->engine, stats_fn, &q);
    if (rc != LP_OK)
        lp_stats_clear(out);
    return rc;
}

void lp_stats_clear(lp_stats *st)
{
    if (st == NULL)
        return;
    free(st->campaigns);
    st->campaigns = NULL;
    st->n_campaigns = 0;
}
