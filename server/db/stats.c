/* stats.c — database counts. See stats.h. */
#include "stats.h"

#include "buf.h"
#include "db.h"
#include "error.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int64_t scalar_int(sqlite3 *db, const char *sql, int *ok)
{
    sqlite3_stmt *st = NULL;
    int64_t v = 0;
    if (sqlite3_prepare_v2(db, sql, -1, &st, NULL) == SQLITE_OK && sqlite3_step(st) == SQLITE_ROW)
        v = sqlite3_column_int64(st, 0);
    else
        *ok = 0;
    sqlite3_finalize(st);
    return v;
}

static int stats_fn(sqlite3 *db, void *ctx)
{
    lp_stats *out = ctx;
    int ok = 1;
    sqlite3_exec(db, "BEGIN", NULL, NULL, NULL); /* one snapshot for all counts */
    out->tasks = scalar_int(db, "SELECT count(*) FROM tasks", &ok);
    out->annotators = scalar_int(db, "SELECT count(*) FROM annotators", &ok);
    out->labels = scalar_int(db, "SELECT max(id) FROM labels", &ok); /* append-only ids */
    out->assignments = scalar_int(db, "SELECT count(*) FROM assignments", &ok);
    sqlite3_stmt *st = NULL;
    if (sqlite3_prepare_v2(db, "SELECT coalesce(sum(epsilon_spent), 0) FROM annotators", -1, &st,
                           NULL) == SQLITE_OK &&
        sqlite3_step(st) == SQLITE_ROW)
        out->epsilon_spent = sqlite3_column_double(st, 0);
    else
        ok = 0;
    sqlite3_finalize(st);
    st = NULL;
    static const char per[] =
        "SELECT c.name, "
        "(SELECT count(*) FROM tasks t WHERE t.campaign = c.id), "
        "(SELECT count(*) FROM annotators a WHERE a.campaign = c.id), "
        "(SELECT count(*) FROM labels l JOIN annotators a ON a.id = l.annotator "
        " WHERE a.campaign = c.id), "
        "(SELECT coalesce(sum(epsilon_spent), 0) FROM annotators a WHERE a.campaign = c.id), "
        "c.labels_per_task, coalesce(c.annotator_quota, 0), f.tasks_complete, "
        "f.tasks * c.labels_per_task "
        "FROM campaigns c JOIN campaign_fill f ON f.campaign = c.id ORDER BY c.id";
    if (ok && sqlite3_prepare_v2(db, per, -1, &st, NULL) == SQLITE_OK) {
        size_t cap = 0;
        while (sqlite3_step(st) == SQLITE_ROW) {
            if (lp_array_reserve((void **)&out->campaigns, &cap, out->n_campaigns,
                                 sizeof *out->campaigns, 8) != LP_OK) {
                ok = 0;
                break;
            }
            lp_campaign_count *cc = &out->campaigns[out->n_campaigns++];
            snprintf(cc->name, sizeof cc->name, "%s", (const char *)sqlite3_column_text(st, 0));
            cc->tasks = sqlite3_column_int64(st, 1);
            cc->annotators = sqlite3_column_int64(st, 2);
            cc->labels = sqlite3_column_int64(st, 3);
            cc->epsilon_spent = sqlite3_column_double(st, 4);
            cc->labels_per_task = sqlite3_column_int64(st, 5);
            cc->annotator_quota = sqlite3_column_int64(st, 6);
            cc->tasks_complete = sqlite3_column_int64(st, 7);
            cc->labels_needed = sqlite3_column_int64(st, 8);
        }
    } else {
        ok = 0;
    }
    sqlite3_finalize(st);
    sqlite3_exec(db, "COMMIT", NULL, NULL, NULL);
    return ok ? LP_OK : LP_ESTORAGE;
}

int lp_store_stats(lp_store *s, lp_stats *out)
{
    memset(out, 0, sizeof *out);
    int rc = lp_engine_read(s->engine, stats_fn, out);
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
