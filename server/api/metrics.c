/* metrics.c — atomic counters and their Prometheus rendering. See metrics.h. */
#include "metrics.h"

#include "error.h"

#include <math.h>
#include <stddef.h>
#include <stdatomic.h>

static atomic_uint_least64_t requests[LP_ROUTE_COUNT];
static atomic_uint_least64_t rejects[LP_ERROR_COUNT];
static atomic_uint_least64_t rate_limited[LP_RATE_CLASSES];
static atomic_uint_least64_t labels_total;
static atomic_uint_least64_t epsilon_micro; /* spent epsilon in units of 1e-6 */

static const char *const ROUTE_NAMES[LP_ROUTE_COUNT] = {
    "healthz",     "campaigns",  "enrollment_tokens",
    "annotators",  "revoke",     "tasks",
    "tasks_next",  "labels",     "labels_batch",
    "stats",       "export",     "metrics",
    "retrain",     "models",     "score",
    "corruption",  "tasks_skip", "progress",
    "quality",     "console",    "annotator_list",
    "task_list",   "tokens",     "audit",
    "score_batch", "other",
};

/* Score latency histogram: upper bounds in seconds, then +Inf. */
static const double SCORE_BOUNDS[LP_SCORE_BUCKETS - 1] = {
    0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 1.0};
static atomic_uint_least64_t score_hist[LP_SCORE_BUCKETS];
static atomic_uint_least64_t score_ns_total;

const char *lp_route_name(lp_route r)
{
    return r < LP_ROUTE_COUNT ? ROUTE_NAMES[r] : "other";
}

void lp_metrics_request(lp_route r)
{
    if (r < LP_ROUTE_COUNT)
        atomic_fetch_add_explicit(&requests[r], 1, memory_order_relaxed);
}

void lp_metrics_reject(int code)
{
    if (code > 0 && code < LP_ERROR_COUNT)
        atomic_fetch_add_explicit(&rejects[code], 1, memory_order_relaxed);
}

uint64_t lp_metrics_rejects(int code)
{
    return code > 0 && code < LP_ERROR_COUNT
               ? atomic_load_explicit(&rejects[code], memory_order_relaxed)
               : 0;
}

void lp_metrics_rate_limited(lp_rate_class cls)
{
    if ((unsigned)cls < LP_RATE_CLASSES)
        atomic_fetch_add_explicit(&rate_limited[cls], 1, memory_order_relaxed);
}

uint64_t lp_metrics_rate_limited_count(lp_rate_class cls)
{
    return (unsigned)cls < LP_RATE_CLASSES
               ? atomic_load_explicit(&rate_limited[cls], memory_order_relaxed)
               : 0;
}

void lp_metrics_label(double epsilon)
{
    atomic_fetch_add_explicit(&labels_total, 1, memory_order_relaxed);
    if (isfinite(epsilon) && epsilon > 0)
        atomic_fetch_add_explicit(&epsilon_micro, (uint64_t)llround(epsilon * 1e6),
                                  memory_order_relaxed);
}

uint64_t lp_metrics_activity(void)
{
    static const lp_route busy[] = {LP_ROUTE_LABELS, LP_ROUTE_LABELS_BATCH, LP_ROUTE_TASKS_NEXT,
                                    LP_ROUTE_SCORE};
    uint64_t n = 0;
    for (size_t k = 0; k < sizeof busy / sizeof busy[0]; k++)
        n += atomic_load_explicit(&requests[busy[k]], memory_order_relaxed);
    return n;
}

void lp_metrics_score(double seconds)
{
    int i = 0;
    while (i < LP_SCORE_BUCKETS - 1 && seconds > SCORE_BOUNDS[i])
        i++;
    atomic_fetch_add_explicit(&score_hist[i], 1, memory_order_relaxed);
    atomic_fetch_add_explicit(&score_ns_total, (uint64_t)llround(seconds * 1e9),
                              memory_order_relaxed);
}

void lp_metrics_score_get(lp_score_latency *out)
{
    out->count = 0;
    for (int i = 0; i < LP_SCORE_BUCKETS; i++) {
        out->hist[i] = atomic_load_explicit(&score_hist[i], memory_order_relaxed);
        out->count += out->hist[i];
        out->bounds[i] = i < LP_SCORE_BUCKETS - 1 ? SCORE_BOUNDS[i] : INFINITY;
    }
    out->sum_s = (double)atomic_load_explicit(&score_ns_total, memory_order_relaxed) / 1e9;
}

double lp_score_latency_quantile(const lp_score_latency *l, double q)
{
    if (l->count == 0)
        return NAN;
    uint64_t want = (uint64_t)ceil(q * (double)l->count), cum = 0;
    for (int i = 0; i < LP_SCORE_BUCKETS; i++) {
        cum += l->hist[i];
        if (cum >= want)
            return l->bounds[i];
    }
    return INFINITY;
}

/* The per-campaign gauges: a field of lp_campaign_count each (integer, or
 * the double epsilon_spent). */
static const struct campaign_gauge {
    const char *name, *help;
    size_t off;
    int real;
} CAMPAIGN_GAUGES[] = {
    {"tasks", "Tasks loaded per campaign.", offsetof(lp_campaign_count, tasks), 0},
    {"tasks_complete", "Tasks with all their labels per campaign.",
     offsetof(lp_campaign_count, tasks_complete), 0},
    {"labels", "Labels stored per campaign.", offsetof(lp_campaign_count, labels), 0},
    {"labels_needed", "Labels a campaign needs (tasks times labels per task).",
     offsetof(lp_campaign_count, labels_needed), 0},
    {"annotators", "Annotators enrolled per campaign.", offsetof(lp_campaign_count, annotators), 0},
    {"epsilon_spent", "Privacy budget spent per campaign (sum over its annotators).",
     offsetof(lp_campaign_count, epsilon_spent), 1},
};

void lp_metrics_render_learning(lp_buf *b, const lp_stats *st, const lp_learner_stats *ls)
{
    for (size_t g = 0; g < sizeof CAMPAIGN_GAUGES / sizeof CAMPAIGN_GAUGES[0]; g++) {
        const struct campaign_gauge *cg = &CAMPAIGN_GAUGES[g];
        lp_buf_printf(b, "# HELP ldpref_campaign_%s %s\n# TYPE ldpref_campaign_%s gauge\n",
                      cg->name, cg->help, cg->name);
        for (size_t i = 0; st && i < st->n_campaigns; i++) {
            const char *field = (const char *)&st->campaigns[i] + cg->off;
            lp_buf_printf(b, "ldpref_campaign_%s{campaign=\"%s\"} ", cg->name,
                          st->campaigns[i].name);
            if (cg->real)
                lp_buf_printf(b, "%.6f\n", *(const double *)(const void *)field);
            else
                lp_buf_printf(b, "%lld\n", (long long)*(const int64_t *)(const void *)field);
        }
    }
    lp_score_latency sl;
    lp_metrics_score_get(&sl);
    lp_buf_puts(b, "# HELP ldpref_score_seconds Latency of successful score requests.\n"
                   "# TYPE ldpref_score_seconds histogram\n");
    uint64_t cum = 0;
    for (int i = 0; i < LP_SCORE_BUCKETS; i++) {
        cum += sl.hist[i];
        if (i == LP_SCORE_BUCKETS - 1)
            lp_buf_printf(b, "ldpref_score_seconds_bucket{le=\"+Inf\"} %llu\n",
                          (unsigned long long)cum);
        else
            lp_buf_printf(b, "ldpref_score_seconds_bucket{le=\"%g\"} %llu\n", sl.bounds[i],
                          (unsigned long long)cum);
    }
    lp_buf_printf(b, "ldpref_score_seconds_sum %.9f\nldpref_score_seconds_count %llu\n", sl.sum_s,
                  (unsigned long long)sl.count);
    if (ls == NULL)
        return;
    lp_buf_puts(b, "# HELP ldpref_retrain_runs_total Finished training runs by status.\n"
                   "# TYPE ldpref_retrain_runs_total counter\n");
    static const lp_run_status finals[] = {LP_RUN_SUCCEEDED, LP_RUN_FAILED, LP_RUN_CANCELLED};
    for (size_t k = 0; k < 3; k++)
        lp_buf_printf(b, "ldpref_retrain_runs_total{status=\"%s\"} %llu\n",
                      lp_run_status_name(finals[k]), (unsigned long long)ls->runs[finals[k]]);
    lp_buf_printf(b,
                  "# HELP ldpref_retrain_seconds_total Wall time of finished training runs.\n"
                  "# TYPE ldpref_retrain_seconds_total counter\n"
                  "ldpref_retrain_seconds_total %.3f\n"
                  "# HELP ldpref_retrain_last_duration_seconds Training time of the last "
                  "successful run.\n# TYPE ldpref_retrain_last_duration_seconds gauge\n"
                  "ldpref_retrain_last_duration_seconds %.3f\n"
                  "# HELP ldpref_retrain_running 1 while a training run is queued or active.\n"
                  "# TYPE ldpref_retrain_running gauge\nldpref_retrain_running %d\n"
                  "# HELP ldpref_active_model_version The served model version (0: none).\n"
                  "# TYPE ldpref_active_model_version gauge\n"
                  "ldpref_active_model_version %lld\n",
                  ls->train_seconds_total,
                  isfinite(ls->last_duration_s) ? ls->last_duration_s : 0.0, ls->running != 0,
                  (long long)ls->active_version);
}

void lp_metrics_render(lp_buf *b, const lp_store_writer_stats *ws, double uptime_s)
{
    lp_buf_puts(b, "# HELP ldpref_labels_total Labels stored since start.\n"
                   "# TYPE ldpref_labels_total counter\n");
    lp_buf_printf(b, "ldpref_labels_total %llu\n", (unsigned long long)atomic_load(&labels_total));
    lp_buf_puts(b, "# HELP ldpref_epsilon_spent_total Privacy budget spent by stored labels "
                   "since start.\n# TYPE ldpref_epsilon_spent_total counter\n");
    lp_buf_printf(b, "ldpref_epsilon_spent_total %.6f\n",
                  (double)atomic_load(&epsilon_micro) / 1e6);
    lp_buf_puts(b, "# HELP ldpref_rejects_total Rejected requests and batch items by error.\n"
                   "# TYPE ldpref_rejects_total counter\n");
    for (int c = 1; c < LP_ERROR_COUNT; c++) {
        uint64_t n = atomic_load(&rejects[c]);
        if (n)
            lp_buf_printf(b, "ldpref_rejects_total{error=\"%s\"} %llu\n", lp_error_name(c),
                          (unsigned long long)n);
    }
    lp_buf_puts(b, "# HELP ldpref_rate_limited_total Requests refused by a rate limit, by "
                   "class.\n# TYPE ldpref_rate_limited_total counter\n");
    for (int c = 0; c < LP_RATE_CLASSES; c++)
        lp_buf_printf(b, "ldpref_rate_limited_total{class=\"%s\"} %llu\n",
                      lp_rate_class_name((lp_rate_class)c),
                      (unsigned long long)lp_metrics_rate_limited_count((lp_rate_class)c));
    lp_buf_puts(b, "# HELP ldpref_requests_total HTTP requests by route.\n"
                   "# TYPE ldpref_requests_total counter\n");
    for (int r = 0; r < LP_ROUTE_COUNT; r++)
        lp_buf_printf(b, "ldpref_requests_total{route=\"%s\"} %llu\n", ROUTE_NAMES[r],
                      (unsigned long long)atomic_load(&requests[r]));
    lp_buf_puts(b, "# HELP ldpref_commit_batch_size Jobs (labels) per group commit.\n"
                   "# TYPE ldpref_commit_batch_size histogram\n");
    uint64_t cum = 0;
    for (int i = 0; i < LP_STORE_HIST; i++) {
        cum += ws->hist[i];
        if (i == LP_STORE_HIST - 1)
            lp_buf_printf(b, "ldpref_commit_batch_size_bucket{le=\"+Inf\"} %llu\n",
                          (unsigned long long)cum);
        else
            lp_buf_printf(b, "ldpref_commit_batch_size_bucket{le=\"%d\"} %llu\n", 1 << i,
                          (unsigned long long)cum);
    }
    lp_buf_printf(b, "ldpref_commit_batch_size_sum %llu\n", (unsigned long long)ws->items);
    lp_buf_printf(b, "ldpref_commit_batch_size_count %llu\n", (unsigned long long)ws->commits);
    lp_buf_puts(b, "# HELP ldpref_storage_conflicts_total Transactions rolled back by a conflict "
                   "with another server's (serialization failure, deadlock) and run again.\n"
                   "# TYPE ldpref_storage_conflicts_total counter\n");
    lp_buf_printf(b, "ldpref_storage_conflicts_total %llu\n", (unsigned long long)ws->conflicts);
    lp_buf_puts(b, "# HELP ldpref_uptime_seconds Seconds since the server started.\n"
                   "# TYPE ldpref_uptime_seconds gauge\n");
    lp_buf_printf(b, "ldpref_uptime_seconds %.3f\n", uptime_s);
}

void lp_metrics_render_storage(lp_buf *b, const lp_store_health *h)
{
    int healthy = !h->unlinked && !h->commit_failed && !h->disk_low;
    lp_buf_puts(b, "# HELP ldpref_storage_healthy 1 while the database takes writes; 0 while "
                   "they are refused (storage_unhealthy).\n"
                   "# TYPE ldpref_storage_healthy gauge\n");
    lp_buf_printf(b, "ldpref_storage_healthy %d\n", healthy);
    lp_buf_puts(b, "# HELP ldpref_storage_backend The database the server stores in (1 for it).\n"
                   "# TYPE ldpref_storage_backend gauge\n");
    lp_buf_printf(b, "ldpref_storage_backend{backend=\"%s\"} 1\n",
                  h->backend ? h->backend : "sqlite");
    lp_buf_puts(b, "# HELP ldpref_storage_unhealthy Whether each reason to refuse writes holds.\n"
                   "# TYPE ldpref_storage_unhealthy gauge\n");
    lp_buf_printf(b,
                  "ldpref_storage_unhealthy{reason=\"db_unlinked\"} %d\n"
                  "ldpref_storage_unhealthy{reason=\"commit_failed\"} %d\n"
                  "ldpref_storage_unhealthy{reason=\"disk_low\"} %d\n",
                  h->unlinked, h->commit_failed, h->disk_low);
    lp_buf_puts(b, "# HELP ldpref_storage_free_bytes Free bytes on the database's filesystem at "
                   "the last check (-1 unknown).\n"
                   "# TYPE ldpref_storage_free_bytes gauge\n");
    lp_buf_printf(b, "ldpref_storage_free_bytes %lld\n", (long long)h->free_bytes);
    lp_buf_puts(b, "# HELP ldpref_storage_wal_bytes Size of the WAL file at the last check (-1 "
                   "unknown).\n"
                   "# TYPE ldpref_storage_wal_bytes gauge\n");
    lp_buf_printf(b, "ldpref_storage_wal_bytes %lld\n", (long long)h->wal_bytes);
}
