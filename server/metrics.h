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
#include "store.h"

#include <stdint.h>

typedef enum lp_route {
    LP_ROUTE_HEALTHZ, LP_ROUTE_CAMPAIGNS, LP_ROUTE_ENROLL_TOKENS, LP_ROUTE_ANNOTATORS,
    LP_ROUTE_REVOKE, LP_ROUTE_TASKS, LP_ROUTE_TASKS_NEXT, LP_ROUTE_LABELS, LP_ROUTE_LABELS_BATCH,
    LP_ROUTE_STATS, LP_ROUTE_EXPORT, LP_ROUTE_METRICS, LP_ROUTE_OTHER,
    LP_ROUTE_COUNT
} lp_route;

/* The route's label value in metrics ("labels_batch"). */
const char *lp_route_name(lp_route r);

void lp_metrics_request(lp_route r);
void lp_metrics_reject(int code);
void lp_metrics_label(double epsilon); /* a newly stored label (+inf adds no epsilon) */
uint64_t lp_metrics_rejects(int code);

/* Appends the Prometheus text exposition. */
void lp_metrics_render(lp_buf *b, const lp_store_writer_stats *ws, double uptime_s);

#endif
