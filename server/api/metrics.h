/*
 * metrics.h — process-wide counters for /metrics and /v1/stats.
 *
 * Lock-free atomics, safe from any thread. The HTTP-independent handlers
 * count requests per route, rejects per error code, accepted labels and the
 * epsilon they spent; rendering adds the store's commit statistics.
 */
#ifndef LP_METRICS_H
#define LP_METRICS_H

#include "buf.h"
#include "ratelimit.h"
#include "retrain.h"
#include "stats.h"

#include <stdint.h>

typedef enum lp_route {
    LP_ROUTE_HEALTHZ,
    LP_ROUTE_CAMPAIGNS,
    LP_ROUTE_ENROLL_TOKENS,
    LP_ROUTE_ANNOTATORS,
    LP_ROUTE_REVOKE,
    LP_ROUTE_TASKS,
    LP_ROUTE_TASKS_NEXT,
    LP_ROUTE_LABELS,
    LP_ROUTE_LABELS_BATCH,
    LP_ROUTE_STATS,
    LP_ROUTE_EXPORT,
    LP_ROUTE_METRICS,
    LP_ROUTE_RETRAIN,
    LP_ROUTE_MODELS,
    LP_ROUTE_SCORE,
    LP_ROUTE_CORRUPTION,
    LP_ROUTE_TASKS_SKIP,
    LP_ROUTE_PROGRESS,
    LP_ROUTE_QUALITY,
    LP_ROUTE_CONSOLE,
    LP_ROUTE_ANNOTATOR_LIST,
    LP_ROUTE_TASK_LIST,
    LP_ROUTE_TOKENS,
    LP_ROUTE_AUDIT,
    LP_ROUTE_SCORE_BATCH,
    LP_ROUTE_OTHER,
    LP_ROUTE_COUNT
} lp_route;

/* The route's label value in metrics ("labels_batch"). */
const char *lp_route_name(lp_route r);

void lp_metrics_request(lp_route r);
void lp_metrics_reject(int code);
void lp_metrics_label(double epsilon); /* a newly stored label (+inf adds no epsilon) */
uint64_t lp_metrics_rejects(int code);
/* A request refused by a rate limit of class cls. */
void lp_metrics_rate_limited(lp_rate_class cls);
uint64_t lp_metrics_rate_limited_count(lp_rate_class cls);

/* Requests so far on the latency-sensitive routes (labels, next tasks,
 * score): background work compares two readings to see whether users are
 * waiting. */
uint64_t lp_metrics_activity(void);
/* A successful score request took this long. */
void lp_metrics_score(double seconds);
#define LP_SCORE_BUCKETS 13
typedef struct lp_score_latency {
    uint64_t hist[LP_SCORE_BUCKETS]; /* counts per bucket (not cumulative) */
    double bounds[LP_SCORE_BUCKETS]; /* upper bounds, seconds; the last is +inf */
    uint64_t count;
    double sum_s;
} lp_score_latency;
void lp_metrics_score_get(lp_score_latency *out);
/* The bucket upper bound that contains quantile q (NAN without data). */
double lp_score_latency_quantile(const lp_score_latency *l, double q);
/* Appends per-campaign gauges (st may be NULL), score latency and the
 * learner's counters (ls may be NULL). */
void lp_metrics_render_learning(lp_buf *b, const lp_stats *st, const lp_learner_stats *ls);
/* Appends the Prometheus text exposition. */
void lp_metrics_render(lp_buf *b, const lp_store_writer_stats *ws, double uptime_s);
/* Appends the storage's health (store.h): healthy or not, each reason, the
 * free bytes and the WAL's size. */
void lp_metrics_render_storage(lp_buf *b, const lp_store_health *h);

#endif
