/*
 * http.h — the HTTP layer: libmicrohttpd in front of the handlers of api.h.
 *
 * libmicrohttpd accumulates request bodies under per-route caps (an
 * oversized body is answered 413 body_too_large and never processed); this
 * module extracts the bearer token and query parameters and calls the
 * handlers. Two threading models:
 *
 * - a thread per connection (the default): the connection's thread runs the
 *   handler, verification included, and simply blocks until the store's
 *   writer has committed its labels. The kernel spreads the verification of
 *   all connections over all cores, and a request costs no suspend/resume.
 * - an event-loop pool (connection_threads = 0): `threads` epoll threads
 *   share the connections; a request whose work is queued for the writer is
 *   suspended (MHD_suspend_connection) so that no thread blocks on a commit,
 *   and resumed when it is durable. For many mostly idle connections.
 *
 * With a certificate and key it speaks HTTPS only (libmicrohttpd over
 * GnuTLS; TLS 1.2 and 1.3 with AEAD ciphers and forward secrecy,
 * LP_TLS_PRIORITIES).
 *
 * This is the only module that maps error codes to HTTP statuses.
 */
#ifndef LP_HTTP_H
#define LP_HTTP_H

#include "api.h"

#include <stddef.h>

typedef struct lp_http lp_http;

typedef struct lp_http_opts {
    const char *host;
    int port;               /* 0: ephemeral */
    int threads;            /* event-loop pool size, >= 1 (connection_threads == 0) */
    int connection_threads; /* > 0: a thread per connection, at most this many */
    int connection_timeout; /* seconds */
    /* HTTPS: the PEM certificate chain and private key (text, not paths;
     * borrowed until lp_http_stop, see tls.h). Both NULL: plain HTTP. */
    const char *tls_cert, *tls_key;
} lp_http_opts;

/* Binds and starts serving api (borrowed; must outlive the server). On
 * success *bound_port is the real port. Returns 0, or -1 with err set. */
int lp_http_start(lp_api *api, const lp_http_opts *opts, lp_http **out, int *bound_port, char *err,
                  size_t errlen);

/* Graceful stop: stop accepting, let in-flight requests finish (up to
 * grace_ms), then stop the workers and free. Accepts NULL. */
void lp_http_stop(lp_http *h, int grace_ms);

#endif
