/*
 * api.h — the endpoint handlers, independent of any HTTP library.
 *
 * A handler takes a parsed request (method, path, query parameters, body,
 * bearer token) and produces a response (success status or error code,
 * content type, body or stream). Nothing here knows sockets or
 * libmicrohttpd, so tests and fuzzers call the handlers directly. Error codes
 * are mapped to HTTP statuses by the HTTP layer (server/http/http.c).
 *
 * Label submissions are asynchronous so that no HTTP worker thread blocks
 * on the group commit: lp_api_begin verifies the signatures in the calling
 * thread, calls async->suspend, queues the labels for the writer, and
 * returns LP_API_PENDING; when they are durable, async->resume is called
 * from the writer thread and the caller finishes with lp_api_finish.
 * lp_api_handle wraps this into one blocking call.
 */
#ifndef LP_API_H
#define LP_API_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

typedef struct lp_store lp_store; /* server/db/store.h */
typedef struct lp_api lp_api;

typedef struct lp_api_opts {
    size_t body_max, batch_body_max, upload_max;
    int train_threads; /* default threads of a training run (>= 1) */
    int json_depth;
    size_t batch_max;
    int64_t timestamp_window_ms;
    /* The console's sessions: absolute lifetime, idle timeout (seconds)
     * and how many are held at once; 0 for the defaults (8 h, 30 min, 32). */
    int64_t console_lifetime_s, console_idle_s;
    size_t console_sessions_max;
    /* 1: /v1/score also answers requests that carry no credential at all
     * (req->principal NULL), with the active model only and only when every
     * label it was trained on was privatized (docs/trust-model.md). */
    int public_score;
    /* Rate limits (docs/server.md#rate-limits), per second and burst; a rate
     * of 0 is no limit. Score: per operator token; next: per annotator key;
     * a client address gets rate_address_factor (>= 1) times those.
     * Enrollment: per client address. rate_buckets: 0 for the default. */
    double score_rate, score_burst, next_rate, next_burst, enroll_rate, enroll_burst;
    double rate_address_factor;
    size_t rate_buckets;
    int tls;            /* the server speaks HTTPS: the console's cookie is Secure */
    int public_metrics; /* 1: GET /metrics needs no credential */
} lp_api_opts;

typedef struct lp_param {
    const char *key, *value;
} lp_param;

typedef struct lp_request {
    const char *method;     /* "GET", "POST", ... */
    const char *path;       /* without the query string */
    const lp_param *params; /* decoded query parameters */
    size_t n_params;
    const char *body; /* may be NULL when body_len == 0 */
    size_t body_len;
    const char *bearer; /* token of "Authorization: Bearer", or NULL */
    /* Headers the console and the request log use; NULL when absent. */
    const char *host;        /* "Host" */
    const char *cookie;      /* "Cookie" */
    const char *csrf;        /* "X-CSRF-Token" */
    const char *origin;      /* "Origin" */
    const char *fetch_site;  /* "Sec-Fetch-Site" */
    const char *request_id;  /* the request's id (as accepted or made by the HTTP layer) */
    const char *client_addr; /* numeric address of the peer, e.g. "127.0.0.1" */
    /* Set by lp_api_begin for the handler: the operator credential the
     * request was authenticated with (server/service/auth.h), or NULL. */
    const struct lp_principal *principal;
} lp_request; /* everything borrowed for the duration of the call */

/* A body produced piece by piece (export). read returns the number of bytes
 * written into buf (<= max), 0 at the end, -1 on error; free releases ctx. */
typedef struct lp_stream {
    ssize_t (*read)(void *ctx, char *buf, size_t max);
    void (*free)(void *ctx);
    void *ctx;
} lp_stream;

typedef struct lp_response {
    int status;               /* success status (200, 201) when error == 0 */
    int error;                /* LP_E* code, 0 on success */
    const char *content_type; /* static string */
    char *body;               /* owned (free); for errors {"error","message"} */
    size_t body_len;
    lp_stream stream; /* used instead of body when stream.read != NULL */
    char *set_cookie; /* owned: the value of a Set-Cookie header, or NULL */
    int retry_after;  /* > 0: a Retry-After header, seconds (429, 503) */
} lp_response;

/* Every response also carries the console's security headers
 * (LP_SECURITY_HEADERS, added by the HTTP layer): a strict
 * Content-Security-Policy, nosniff, no referrer, and no caching (the API
 * answers hold operator data; the console's files are small and must
 * match the server's API after an upgrade). */
#define LP_CSP                                                                                     \
    "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; "              \
    "connect-src 'self'; frame-ancestors 'none'; base-uri 'none'; form-action 'self'"
#define LP_SECURITY_HEADERS(X)                                                                     \
    X("Content-Security-Policy", LP_CSP)                                                           \
    X("X-Content-Type-Options", "nosniff")                                                         \
    X("Referrer-Policy", "no-referrer")                                                            \
    X("Cache-Control", "no-store")

/* Frees the body, the stream (if still owned) and the cookie. Accepts NULL. */
void lp_response_clear(lp_response *r);

typedef struct lp_async {
    void (*suspend)(void *ctx); /* called before work is queued */
    void (*resume)(void *ctx);  /* called (any thread) when the work is done */
    void *ctx;
} lp_async;

typedef struct lp_pending lp_pending;

#define LP_API_DONE 0
#define LP_API_PENDING 1

/* Creates the handler set over a store (borrowed; must outlive the api). */
lp_api *lp_api_new(lp_store *store, const lp_api_opts *opts);
void lp_api_free(lp_api *api);
/* Attaches the learner (borrowed; must outlive the api) that serves the
 * learning endpoints; without one they answer 503 unavailable. */
struct lp_learner;
void lp_api_set_learner(lp_api *api, struct lp_learner *learner);

/* From now on /v1/healthz answers 503 unavailable. */
void lp_api_set_draining(lp_api *api);

/* 1 when a POST /v1/score body of len bytes can only be a request scored
 * from its own candidates (no "task_ids", so no database reads, and no
 * escape that could spell one): the HTTP layer may answer it on the event
 * loop. */
int lp_api_score_is_light(const char *body, size_t len);

/* The route (method, path) matches, as its path ("/v1/labels"; a static
 * string), or NULL when none does: the request log's route name. When
 * body_cap is not NULL it gets the route's body size cap, so the HTTP layer
 * can refuse early (one route lookup for both). */
const char *lp_api_route_name(const lp_api *api, const char *method, const char *path,
                              size_t *body_cap);

/* Route i of the route table (0 past the end), for tests and
 * documentation checks: its method, path (a path ending in "/\*" matches every file below)
 * and the scope an operator credential needs (server/service/auth.h:
 * the LP_SCOPE_ bits, LP_SCOPE_ANY_TOKEN, or 0: none). Returns 1. */
int lp_api_route_at(size_t i, const char **method, const char **path, unsigned *scope);

/* The body size cap for a route. */
size_t lp_api_body_cap(const lp_api *api, const char *method, const char *path);

/* Checks a request's credentials from its headers alone (req->body is not
 * looked at), before its body is read: LP_OK to go on, or the refusal's
 * code with resp filled (401, 403). The HTTP layer calls this when the
 * headers have arrived, so an unauthenticated body is never buffered;
 * lp_api_begin checks again. A refusal of a route the audit log records
 * is recorded here (docs/operators.md "Audit log"). */
int lp_api_preauth(lp_api *api, const lp_request *req, lp_response *resp);

/* Starts handling req. LP_API_DONE: resp is filled. LP_API_PENDING: *pending
 * is set, async->suspend has been called, and async->resume will be called
 * exactly once; then call lp_api_finish. async may be NULL only via
 * lp_api_handle. An operator action (a state-changing operator request,
 * an export, a console sign-in or sign-out) is appended to the audit log
 * before this returns, whatever its outcome. */
int lp_api_begin(lp_api *api, const lp_request *req, const lp_async *async, lp_response *resp,
                 lp_pending **pending);
/* Completes a pending request (after resume) and frees pending. */
void lp_api_finish(lp_api *api, lp_pending *pending, lp_response *resp);
/* Frees a pending request whose response is no longer wanted (after
 * resume). Accepts NULL. */
void lp_api_pending_free(lp_pending *pending);

/* Handles req synchronously (tests, fuzzing). */
void lp_api_handle(lp_api *api, const lp_request *req, lp_response *resp);

#endif
