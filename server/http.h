/*
 * http.h — the HTTP layer: libmicrohttpd in front of the handlers of api.h.
 *
 * A pool of worker threads (epoll where available) accepts connections,
 * accumulates request bodies under per-route caps (an oversized body is
 * answered 413 body_too_large and never processed), extracts the bearer
 * token and query parameters, and calls the handlers. Requests whose work is
 * queued for the store's writer are suspended (MHD_suspend_connection) so
 * that no worker blocks on a commit; they resume when it is durable. This is
 * the only module that maps error codes to HTTP statuses.
 */
#ifndef LP_HTTP_H
#define LP_HTTP_H

#include "api.h"

#include <stddef.h>

typedef struct lp_http lp_http;

typedef struct lp_http_opts {
    const char *host;
    int port;               /* 0: ephemeral */
    int threads;            /* worker pool size, >= 1 */
    int connection_timeout; /* seconds */
} lp_http_opts;

/* Binds and starts serving api (borrowed; must outlive the server). On
 * success *bound_port is the real port. Returns 0, or -1 with err set. */
int lp_http_start(lp_api *api, const lp_http_opts *opts, lp_http **out, int *bound_port,
                  char *err, size_t errlen);

/* Graceful stop: stop accepting, let in-flight requests finish (up to
 * grace_ms), then stop the workers and free. Accepts NULL. */
void lp_http_stop(lp_http *h, int grace_ms);

#endif
