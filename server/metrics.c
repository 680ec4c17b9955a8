/* metrics.c — atomic counters and their Prometheus rendering. See metrics.h. */
#include "metrics.h"

#include "error.h"

#include <math.h>
#include <stdatomic.h>

static atomic_uint_least64_t requests[LP_ROUTE_COUNT];
static atomic_uint_least64_t rejects[LP_ERROR_COUNT];
static atomic_uint_least64_t labels_total;
static atomic_uint_least64_t epsilon_micro; /* spent epsilon in units of 1e-6 */

static const char *const ROUTE_NAMES[LP_ROUTE_COUNT] = {
    "healthz", "campaigns", "enrollment_tokens", "annotators", "revoke", "tasks", "tasks_next",
    "labels",  "labels_batch", "stats",          "export",     "metrics", "other",
};

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

void lp_metrics_label(double epsilon)
{
    atomic_fetch_add_explicit(&labels_total, 1, memory_order_relaxed);
    if (isfinite(epsilon) && epsilon > 0)
        atomic_fetch_add_explicit(&epsilon_micro, (uint64_t)llround(epsilon * 1e6),
                                  memory_order_relaxed);
}

void lp_metrics_render(lp_buf *b, const lp_store_writer_stats *ws, double uptime_s)
{
    lp_buf_puts(b, "# HELP ldpref_labels_total Labels stored since start.\n"
                   "# TYPE ldpref_labels_total counter\n");
    lp_buf_printf(b, "ldpref_labels_total %llu\n",
                  (unsigned long long)atomic_load(&labels_total));
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
    lp_buf_puts(b, "# HELP ldpref_uptime_seconds Seconds since the server started.\n"
                   "# TYPE ldpref_uptime_seconds gauge\n");
    lp_buf_printf(b, "ldpref_uptime_seconds %.3f\n", uptime_s);
}
