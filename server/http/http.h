/*
 * http.h — the HTTP layer: libmicrohttpd in front of the handlers of api.h.
 *
 * Connections are read in libmicrohttpd's event loop (`threads` epoll
 * threads), so a slow or idle connection costs a socket and its buffer,
 * never a thread. When a request's headers have arrived, credentials are
 * checked (lp_api_preauth) and the body's size is checked against its
 * route's cap and the global body budget: a refusal (401, 403, 413, 503) is
 * answered at once and the body is never read. A complete request is
 * suspended (MHD_suspend_connection) and queued to a pool of `workers`
 * threads, which run the handler (verification, database reads); label
 * writes stay suspended until the store's writer has committed them, so no
 * thread waits for a commit. Scoring runs on its own small pool at a lower
 * CPU priority that yields to every other request, and only a few score
 * requests are admitted at once (the others wait, suspended, with their
 * body unread), so a flood of score requests cannot take the CPU from label
 * ingest.
 *
 * connection_threads > 0 selects the previous model instead: a thread per
 * connection, at most that many connections, each thread running its
 * handlers and waiting for the commit. It is not safe against slow clients
 * (that many slow connections hold every thread) and does not put scoring
 * behind ingest; it is kept for comparison.
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
    int port;                    /* 0: ephemeral */
    int threads;                 /* event-loop threads, >= 1 */
    int workers;                 /* threads for blocking work, >= 1 */
    int connection_threads;      /* > 0: a thread per connection instead (see above) */
    int connection_timeout;      /* seconds without traffic before a connection is closed */
    int connections_max;         /* open connections at most, >= 1 */
    int connections_per_address; /* open connections per client address; 0: no cap */
    size_t body_budget;          /* bytes of request bodies held at once, all requests; 0: no cap */
    /* HTTPS: the PEM certificate chain and private key (text, not paths;
     * borrowed until lp_http_stop, see tls.h). Both NULL: plain HTTP. */
    const char *tls_cert, *tls_key;
} lp_http_opts;

/* Binds and starts serving api (borrowed; must outlive the server). On
 * success *bound_port is the real port. Returns 0, or -1 with err set. */
int lp_http_start(lp_api *api, const lp_http_opts *opts, lp_http **out, int *bound_port, char *err,
                  size_t errlen);

/* Graceful stop: new requests are answered 503 unavailable (before any body
 * is read) and every answer from then on closes its connection; requests in
 * flight get up to grace_ms to finish; then the workers stop, the listening
 * socket closes with the daemon, and h is freed. Accepts NULL. */
void lp_http_stop(lp_http *h, int grace_ms);

#endif
