/*
 * http.c — libmicrohttpd glue. See http.h.
 *
 * Per-request state (struct req_state) is allocated on the first callback
 * of a request into *req_cls and freed in the completion callback, whatever
 * happened in between. Lifecycle of a request, all callbacks in the event
 * loop: headers (credentials, cap and budget checked; a refusal is queued
 * at once; a score request past the admitted few is suspended as WAITING
 * until one ends, then ADMITTED) -> ACCUMULATE (body chunks, each growth of
 * the buffer reserved against the body budget) -> QUEUED (connection suspended, the job on a
 * worker; a single label is verified and queued for the writer in the
 * event loop itself, run_here) -> READY (the worker answered, or the writer
 * committed its labels; connection resumed) -> response queued.
 *
 * Every request is logged once, in the completion callback (common/log.h):
 * its id, method, route, status, duration and client address, never a
 * header value other than X-Request-Id, the query string or the body. The
 * id is the client's X-Request-Id when valid (1-64 of [A-Za-z0-9._-]),
 * otherwise 16 hex digits: SipHash (crypto_shorthash) of a counter under a
 * random key of the process, unique and unpredictable without a syscall,
 * and telling nothing of how many requests came before. Every response
 * carries it back.
 */
#include "http.h"

#include "error.h"
#include "listener.h"
#include "log.h"
#include "workers.h"

#include <arpa/inet.h>
#include <errno.h>
#include <microhttpd.h>
#include <netdb.h>
#include <pthread.h>
#include <sodium.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#define PARAMS_MAX 16
#define STREAM_BLOCK (64 * 1024)
/* Per-connection memory of libmicrohttpd (headers, read and write buffers;
 * bodies reach the handler in chunks of at most about half of it). MHD
 * zero-fills the whole area before every request of a keep-alive
 * connection, so its default of 32 KiB cost a 32 KiB memset per label. */
#define CONNECTION_MEMORY (16 * 1024)
/* GnuTLS priorities of HTTPS: TLS 1.2 and 1.3 only, AEAD ciphers only, and
 * no static-RSA key exchange (every session has forward secrecy). */
#define LP_TLS_PRIORITIES                                                                          \
    "SECURE128:-VERS-ALL:+VERS-TLS1.3:+VERS-TLS1.2:-CIPHER-ALL:+AES-256-GCM:+AES-128-GCM:"         \
    "+CHACHA20-POLY1305:-RSA:-VERS-DTLS-ALL"
#define REQUEST_ID_MAX 64
#define PATH_LOG_MAX 64 /* an unknown path is logged up to this many bytes */
/* Score requests run on their own pool: a quarter of the workers (at
 * least one) at this nice value. At most this many per score worker are
 * admitted (their bodies read, queued or running) at once; the others wait,
 * suspended before their body is read, in arrival order. */
#define SCORE_NICE 10
#define SCORE_ADMITTED_PER_WORKER 4
/* A score job starts when no other request is in flight (looking every
 * SCORE_POLL_MS), or after SCORE_WAIT_MAX_MS (workers.h). */
#define SCORE_POLL_MS 2
#define SCORE_WAIT_MAX_MS 200
/* A score request of at most this many body bytes is answered on the event
 * loop itself, without a hand-off, when no other request is in flight and
 * it reads nothing from the database (lp_api_score_is_light): it costs tens
 * of microseconds there, less than the hand-off to a worker. */
#define SCORE_INLINE_MAX (64 * 1024)
#define BUSY_RETRY_S 1 /* Retry-After of 503 server_busy */
#define LISTEN_BACKLOG 1024

struct lp_http {
    struct MHD_Daemon *d;
    lp_listener *listener; /* accepts for d, which spreads connections over its threads */
    lp_api *api;
    int per_connection;  /* a thread per connection runs its own handlers (no workers) */
    lp_workers *workers; /* every handler but scoring */
    lp_workers *scoring; /* /v1/score, at a lower CPU priority */
    /* admission of score requests, under lock */
    int score_slots, score_admitted;
    struct req_state *waiting_head, *waiting_tail;
    size_t body_budget;            /* 0: no cap */
    _Atomic long others_in_flight; /* requests on h->workers until answered: h->scoring yields */
    _Atomic size_t body_held;
    /* set by lp_http_stop: new requests are answered 503 unavailable and
     * every answer closes its connection */
    _Atomic int stopping;
    pthread_mutex_t lock;
    pthread_cond_t idle;
    long in_flight;
    uint8_t id_key[crypto_shorthash_KEYBYTES]; /* request ids */
    _Atomic uint64_t id_counter;
};

enum phase { WAITING, ADMITTED, ACCUMULATE, QUEUED, READY };
enum scoring { SCORE_NONE, SCORE_ONE, SCORE_BATCH };

struct req_state {
    lp_http *h;
    struct MHD_Connection *conn;
    char *body;
    size_t len, cap, limit;
    size_t declared;  /* Content-Length, 0 when absent */
    size_t reserved;  /* bytes of h->body_budget this request holds */
    int refusal;      /* LP_EBODY_TOO_LARGE or LP_ESERVER_BUSY found while reading */
    int scoring;      /* the route runs on h->scoring (SCORE_ONE or SCORE_BATCH) */
    int single_label; /* POST /v1/labels: verified in the event loop (run_here) */
    int admitted;     /* holds one of h->score_slots */
    int in_flight;    /* counted in h->others_in_flight */
    struct req_state *waiting_next;
    _Atomic int phase;
    _Atomic int holds; /* a pending label request resumes when both the worker and
                          the writer are done with it */
    lp_job job;
    lp_request req;
    lp_response resp; /* the worker's answer when pending == NULL */
    lp_pending *pending;
    lp_param params[PARAMS_MAX];
    size_t n_params;
    /* for the request's log line */
    char request_id[REQUEST_ID_MAX + 1];
    char client_addr[INET6_ADDRSTRLEN];
    char route[PATH_LOG_MAX + 1]; /* the matched route, or the path cut */
    char method[16];
    int64_t started_ns;
    unsigned int status; /* 0 until a response is queued */
    int error;           /* LP_E* code of an error response */
    uint64_t bytes;      /* response body bytes queued or streamed */
};

/* ---- responses ---- */

struct stream_box {
    lp_stream s;
    uint64_t *bytes; /* the request's count; MHD reads no more after completion */
};

static ssize_t stream_reader(void *cls, uint64_t pos, char *buf, size_t max)
{
    (void)pos;
    struct stream_box *b = cls;
    ssize_t n = b->s.read(b->s.ctx, buf, max);
    if (n < 0)
        return MHD_CONTENT_READER_END_WITH_ERROR;
    if (n == 0)
        return MHD_CONTENT_READER_END_OF_STREAM;
    *b->bytes += (uint64_t)n;
    return n;
}

static void stream_free(void *cls)
{
    struct stream_box *b = cls;
    if (b->s.free)
        b->s.free(b->s.ctx);
    free(b);
}

/* Queues resp (taking what it owns) on the request's connection. */
static enum MHD_Result send_response(struct req_state *st, lp_response *resp)
{
    struct MHD_Response *r = NULL;
    const char *ct = resp->content_type ? resp->content_type : "application/json";
    unsigned int status = resp->error ? (unsigned)lp_error_http_status(resp->error)
                                      : (unsigned)(resp->status ? resp->status : 200);
    if (resp->stream.read != NULL) {
        struct stream_box *b = malloc(sizeof *b);
        if (b != NULL) {
            b->s = resp->stream;
            b->bytes = &st->bytes;
            r = MHD_create_response_from_callback(MHD_SIZE_UNKNOWN, STREAM_BLOCK, stream_reader, b,
                                                  stream_free);
            if (r == NULL)
                free(b);
            else
                memset(&resp->stream, 0, sizeof resp->stream); /* now MHD's */
        }
    } else {
        r = MHD_create_response_from_buffer(resp->body_len, resp->body ? resp->body : (void *)"",
                                            resp->body ? MHD_RESPMEM_MUST_FREE
                                                       : MHD_RESPMEM_PERSISTENT);
        if (r != NULL) {
            resp->body = NULL; /* now MHD's */
            st->bytes = resp->body_len;
        }
    }
    st->error = resp->error;
    if (r != NULL) { /* MHD copies header values */
        MHD_add_response_header(r, MHD_HTTP_HEADER_CONTENT_TYPE,
                                status >= 400 ? "application/json" : ct);
        MHD_add_response_header(r, "X-Request-Id", st->request_id);
#define ADD_HEADER(name, value) MHD_add_response_header(r, name, value);
        LP_SECURITY_HEADERS(ADD_HEADER)
#undef ADD_HEADER
        if (resp->set_cookie != NULL)
            MHD_add_response_header(r, MHD_HTTP_HEADER_SET_COOKIE, resp->set_cookie);
        if (atomic_load_explicit(&st->h->stopping, memory_order_relaxed))
            MHD_add_response_header(r, MHD_HTTP_HEADER_CONNECTION, "close");
        if (resp->retry_after > 0) {
            char secs[16];
            snprintf(secs, sizeof secs, "%d", resp->retry_after);
            MHD_add_response_header(r, MHD_HTTP_HEADER_RETRY_AFTER, secs);
        }
    }
    lp_response_clear(resp);
    if (r == NULL)
        return MHD_NO;
    st->status = status;
    enum MHD_Result ret = MHD_queue_response(st->conn, status, r);
    MHD_destroy_response(r);
    return ret;
}

static enum MHD_Result send_error(struct req_state *st, int code)
{
    char body[256];
    int n = snprintf(body, sizeof body, "{\"error\":\"%s\",\"message\":\"%s\"}",
                     lp_error_name(code), lp_error_message(code));
    lp_response resp = {.error = code, .content_type = "application/json"};
    resp.body = malloc((size_t)n + 1);
    if (resp.body == NULL)
        return MHD_NO;
    memcpy(resp.body, body, (size_t)n + 1);
    resp.body_len = (size_t)n;
    return send_response(st, &resp);
}

/* ---- request state ---- */

/* ---- the body budget ---- */

/* Takes n bytes of the budget: 1, or 0 (nothing taken) when they do not fit. */
static int budget_take(lp_http *h, size_t n)
{
    if (h->body_budget == 0)
        return 1;
    size_t held = atomic_load(&h->body_held);
    do
        if (n > h->body_budget - held)
            return 0;
    while (!atomic_compare_exchange_weak(&h->body_held, &held, held + n));
    return 1;
}

static void budget_give(lp_http *h, size_t n)
{
    if (h->body_budget != 0 && n > 0)
        atomic_fetch_sub(&h->body_held, n);
}

/* Room for n more body bytes (and a NUL): the buffer doubles (up to the
 * declared length), and each growth is reserved against the budget.
 * LP_OK, LP_EBUSY (budget spent) or LP_ENO_MEMORY. */
static int body_reserve(struct req_state *st, size_t n)
{
    size_t need = st->len + n + 1;
    if (need <= st->cap)
        return LP_OK;
    size_t cap = st->cap ? st->cap : 1024;
    while (cap < need)
        cap *= 2;
    if (st->declared > 0 && cap > st->declared + 1 && need <= st->declared + 1)
        cap = st->declared + 1;
    if (cap > st->reserved) {
        if (!budget_take(st->h, cap - st->reserved))
            return LP_EBUSY;
        st->reserved = cap;
    }
    char *b = realloc(st->body, cap);
    if (b == NULL)
        return LP_ENO_MEMORY;
    st->body = b;
    st->cap = cap;
    return LP_OK;
}

/* Frees the body and gives its reservation back. */
static void body_release(struct req_state *st)
{
    free(st->body);
    st->body = NULL;
    st->len = st->cap = 0;
    budget_give(st->h, st->reserved);
    st->reserved = 0;
}

static void state_free(struct req_state *st)
{
    if (st == NULL)
        return;
    lp_api_pending_free(st->pending);
    lp_response_clear(&st->resp);
    body_release(st);
    free(st);
}

static enum MHD_Result collect_param(void *cls, enum MHD_ValueKind kind, const char *key,
                                     const char *value)
{
    (void)kind;
    struct req_state *st = cls;
    if (st->n_params >= PARAMS_MAX)
        return MHD_NO;
    st->params[st->n_params].key = key;
    st->params[st->n_params].value = value ? value : "";
    st->n_params++;
    return MHD_YES;
}

static const char *header(struct MHD_Connection *conn, const char *name)
{
    return MHD_lookup_connection_value(conn, MHD_HEADER_KIND, name);
}

static const char *bearer_token(struct MHD_Connection *conn)
{
    const char *v = header(conn, MHD_HTTP_HEADER_AUTHORIZATION);
    if (v == NULL || strncasecmp(v, "Bearer ", 7) != 0)
        return NULL;
    v += 7;
    while (*v == ' ')
        v++;
    return *v ? v : NULL;
}

/* The client's X-Request-Id when it is 1-64 of [A-Za-z0-9._-], otherwise a
 * new one (16 hex digits), into st->request_id. */
static void request_id(struct req_state *st)
{
    const char *v = header(st->conn, "X-Request-Id");
    size_t n = 0;
    if (v != NULL)
        for (; n <= REQUEST_ID_MAX && v[n] != '\0'; n++) {
            char c = v[n];
            if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                  c == '.' || c == '_' || c == '-'))
                break;
        }
    if (v != NULL && n > 0 && n <= REQUEST_ID_MAX && v[n] == '\0') {
        memcpy(st->request_id, v, n + 1);
        return;
    }
    uint64_t n_id = atomic_fetch_add_explicit(&st->h->id_counter, 1, memory_order_relaxed);
    uint8_t raw[crypto_shorthash_BYTES];
    crypto_shorthash(raw, (const uint8_t *)&n_id, sizeof n_id, st->h->id_key);
    sodium_bin2hex(st->request_id, sizeof st->request_id, raw, sizeof raw);
}

/* The peer's numeric address into st->client_addr ("" when unknown). */
static void client_addr(struct req_state *st)
{
    const union MHD_ConnectionInfo *ci =
        MHD_get_connection_info(st->conn, MHD_CONNECTION_INFO_CLIENT_ADDRESS);
    const struct sockaddr *sa = ci ? ci->client_addr : NULL;
    st->client_addr[0] = '\0';
    if (sa != NULL && sa->sa_family == AF_INET)
        inet_ntop(AF_INET, &((const struct sockaddr_in *)sa)->sin_addr, st->client_addr,
                  sizeof st->client_addr);
    else if (sa != NULL && sa->sa_family == AF_INET6)
        inet_ntop(AF_INET6, &((const struct sockaddr_in6 *)sa)->sin6_addr, st->client_addr,
                  sizeof st->client_addr);
}

static int64_t mono_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

/* ---- handing a request to the workers ---- */

/* Resumes the connection: the event loop calls on_request again, which
 * sends the answer. */
static void ready(struct req_state *st)
{
    atomic_store(&st->phase, READY);
    MHD_resume_connection(st->conn);
}

static void on_suspend(void *ctx)
{
    (void)ctx; /* the connection was suspended when the job was queued */
}

static void on_resume(void *ctx) /* writer thread, or the worker on a failed submit */
{
    struct req_state *st = ctx;
    if (atomic_fetch_sub(&st->holds, 1) == 1)
        ready(st);
}

/* A worker runs the handler. A label write is pending on the writer: it
 * is resumed by whichever of this thread and the writer is done last, so
 * that st->pending is set before on_request reads it. */
static void run_job(void *ctx)
{
    struct req_state *st = ctx;
    lp_async async = {on_suspend, on_resume, st};
    atomic_store(&st->holds, 2);
    if (lp_api_begin(st->h->api, &st->req, &async, &st->resp, &st->pending) == LP_API_PENDING)
        on_resume(st);
    else
        ready(st);
}

/*
 * A single label runs in the event loop itself: its decoding, key lookup
 * and one verification (about 50 µs) cost less than handing it to a worker
 * and waking that worker (the hand-off's wake-up waited for a vCPU for
 * hundreds of µs under load). The label is then queued for the writer and
 * the connection suspended, as from a worker; a rejection is answered at
 * once. Batches, whose verifications add up, stay on the workers.
 */
static enum MHD_Result run_here(struct req_state *st)
{
    lp_http *h = st->h;
    lp_async async = {on_suspend, on_resume, st};
    st->in_flight = 1;
    atomic_fetch_add_explicit(&h->others_in_flight, 1, memory_order_relaxed);
    atomic_store(&st->holds, 2);
    atomic_store(&st->phase, QUEUED);
    lp_response resp;
    if (lp_api_begin(h->api, &st->req, &async, &resp, &st->pending) != LP_API_PENDING) {
        body_release(st);
        return send_response(st, &resp);
    }
    /* the writer may already have let go of its hold; it never resumes a
     * connection this thread has not yet suspended */
    MHD_suspend_connection(st->conn);
    on_resume(st);
    return MHD_YES;
}

/* The request's headers as the api sees them (body not yet attached). */
static void fill_request(struct req_state *st, const char *method, const char *url)
{
    struct MHD_Connection *conn = st->conn;
    st->req = (lp_request){.method = method,
                           .path = url,
                           .params = st->params,
                           .bearer = bearer_token(conn),
                           .host = header(conn, MHD_HTTP_HEADER_HOST),
                           .cookie = header(conn, MHD_HTTP_HEADER_COOKIE),
                           .csrf = header(conn, "X-CSRF-Token"),
                           .origin = header(conn, MHD_HTTP_HEADER_ORIGIN),
                           .fetch_site = header(conn, "Sec-Fetch-Site"),
                           .request_id = st->request_id,
                           .client_addr = st->client_addr};
}

/* ---- admission of score requests ---- */

/* Admits a score request now (1), or puts it in the waiting line (0). */
static int score_admit(struct req_state *st)
{
    lp_http *h = st->h;
    pthread_mutex_lock(&h->lock);
    int now = h->score_admitted < h->score_slots;
    if (now) {
        h->score_admitted++;
        st->admitted = 1;
    } else {
        atomic_store(&st->phase, WAITING);
        if (h->waiting_tail != NULL)
            h->waiting_tail->waiting_next = st;
        else
            h->waiting_head = st;
        h->waiting_tail = st;
    }
    pthread_mutex_unlock(&h->lock);
    return now;
}

/* A request ends: its slot goes to the first waiting request, which is
 * resumed; a request that ends while waiting (shutdown) leaves the line. */
static void score_release(struct req_state *st)
{
    lp_http *h = st->h;
    struct req_state *next = NULL;
    pthread_mutex_lock(&h->lock);
    if (st->admitted) {
        next = h->waiting_head;
        if (next != NULL) {
            h->waiting_head = next->waiting_next;
            if (h->waiting_head == NULL)
                h->waiting_tail = NULL;
            next->admitted = 1;
        } else {
            h->score_admitted--;
        }
        st->admitted = 0;
    } else if (atomic_load(&st->phase) == WAITING) {
        struct req_state **p = &h->waiting_head, *prev = NULL;
        while (*p != NULL && *p != st)
            prev = *p, p = &(*p)->waiting_next;
        if (*p == st) {
            *p = st->waiting_next;
            if (h->waiting_tail == st)
                h->waiting_tail = prev;
        }
    }
    pthread_mutex_unlock(&h->lock);
    if (next != NULL) {
        atomic_store(&next->phase, ADMITTED);
        MHD_resume_connection(next->conn);
    }
}

/* ---- the access handler ---- */

static enum MHD_Result send_busy(struct req_state *st)
{
    char body[256];
    int n = snprintf(body, sizeof body, "{\"error\":\"%s\",\"message\":\"%s\"}",
                     lp_error_name(LP_EBUSY), lp_error_message(LP_EBUSY));
    lp_response resp = {.error = LP_EBUSY, .retry_after = BUSY_RETRY_S};
    resp.body = strdup(body);
    resp.body_len = resp.body ? (size_t)n : 0;
    return send_response(st, &resp);
}

static enum MHD_Result send_refusal(struct req_state *st, int code)
{
    return code == LP_EBUSY ? send_busy(st) : send_error(st, code);
}

/* First call, headers only: refuses what must not be read (credentials,
 * size, budget, a full scoring queue). The body is read only if this
 * queues no response. */
static enum MHD_Result on_headers(lp_http *h, struct MHD_Connection *conn, const char *url,
                                  const char *method, void **req_cls)
{
    struct req_state *st = calloc(1, sizeof *st);
    if (st == NULL)
        return MHD_NO;
    st->h = h;
    st->conn = conn;
    st->started_ns = mono_ns();
    snprintf(st->method, sizeof st->method, "%s", method);
    const char *route = lp_api_route_name(h->api, method, url, &st->limit);
    snprintf(st->route, sizeof st->route, "%s", route ? route : url);
    st->scoring = route == NULL                           ? SCORE_NONE
                  : strcmp(route, "/v1/score") == 0       ? SCORE_ONE
                  : strcmp(route, "/v1/score/batch") == 0 ? SCORE_BATCH
                                                          : SCORE_NONE;
    st->single_label = route != NULL && strcmp(route, "/v1/labels") == 0;
    request_id(st);
    client_addr(st);
    atomic_init(&st->phase, ACCUMULATE);
    atomic_init(&st->holds, 0);
    *req_cls = st;
    pthread_mutex_lock(&h->lock);
    h->in_flight++;
    pthread_mutex_unlock(&h->lock);
    fill_request(st, method, url);
    if (atomic_load_explicit(&h->stopping, memory_order_relaxed))
        return send_error(st, LP_EUNAVAILABLE); /* body unread: the connection closes */
    const char *cl = header(conn, MHD_HTTP_HEADER_CONTENT_LENGTH);
    unsigned long long declared = cl ? strtoull(cl, NULL, 10) : 0;
    int body_coming = declared > 0 || header(conn, MHD_HTTP_HEADER_TRANSFER_ENCODING) != NULL;
    if (body_coming) { /* refuse an unauthenticated body before reading it */
        lp_response resp;
        if (lp_api_preauth(h->api, &st->req, &resp) != LP_OK)
            return send_response(st, &resp);
        lp_response_clear(&resp);
    }
    if (declared > st->limit)
        return send_error(st, LP_EBODY_TOO_LARGE);
    st->declared = (size_t)declared;
    if (h->body_budget != 0 && declared > h->body_budget - atomic_load(&h->body_held))
        return send_busy(st); /* would not fit now */
    if (st->scoring && !h->per_connection && !score_admit(st))
        MHD_suspend_connection(conn); /* resumed by score_release, body unread */
    return MHD_YES;
}

/* A chunk of the body. Past the cap or the budget, the rest is read and
 * dropped, and the refusal answered once the request is complete. */
static void on_body(struct req_state *st, const char *data, size_t n)
{
    if (st->refusal)
        return;
    int rc = n > st->limit - st->len ? LP_EBODY_TOO_LARGE : body_reserve(st, n);
    if (rc != LP_OK) {
        st->refusal = rc == LP_ENO_MEMORY ? LP_EBUSY : rc;
        body_release(st);
        return;
    }
    memcpy(st->body + st->len, data, n);
    st->len += n;
    st->body[st->len] = '\0';
}

static enum MHD_Result on_request(void *cls, struct MHD_Connection *conn, const char *url,
                                  const char *method, const char *version, const char *upload_data,
                                  size_t *upload_data_size, void **req_cls)
{
    (void)version;
    lp_http *h = cls;
    struct req_state *st = *req_cls;
    if (st == NULL)
        return on_headers(h, conn, url, method, req_cls);
    if (*upload_data_size > 0) {
        atomic_store(&st->phase, ACCUMULATE);
        on_body(st, upload_data, *upload_data_size);
        *upload_data_size = 0;
        return MHD_YES;
    }
    int phase = atomic_load(&st->phase);
    if (phase == READY) {
        lp_response resp;
        if (st->pending != NULL) {
            lp_pending *p = st->pending;
            st->pending = NULL;
            lp_api_finish(h->api, p, &resp);
        } else {
            resp = st->resp;
            memset(&st->resp, 0, sizeof st->resp);
        }
        body_release(st);
        return send_response(st, &resp);
    }
    if (phase == QUEUED || phase == WAITING) /* spurious call while suspended */
        return MHD_YES;
    if (phase == ADMITTED) { /* resumed from the line: libmicrohttpd repeats the headers call */
        atomic_store(&st->phase, ACCUMULATE);
        return MHD_YES;
    }
    if (st->refusal)
        return send_refusal(st, st->refusal);
    MHD_get_connection_values(conn, MHD_GET_ARGUMENT_KIND, collect_param, st);
    st->req.n_params = st->n_params;
    st->req.body = st->body;
    st->req.body_len = st->len;
    if (h->per_connection || /* this thread is the connection's own: it waits here */
        (st->scoring == SCORE_ONE && st->len <= SCORE_INLINE_MAX &&
         atomic_load_explicit(&h->others_in_flight, memory_order_relaxed) == 0 &&
         lp_api_score_is_light(st->body, st->len))) {
        lp_response resp;
        lp_api_handle(h->api, &st->req, &resp);
        body_release(st);
        return send_response(st, &resp);
    }
    if (st->single_label)
        return run_here(st);
    st->job = (lp_job){.fn = run_job, .ctx = st};
    atomic_store(&st->phase, QUEUED);
    MHD_suspend_connection(conn);
    if (!st->scoring) {
        st->in_flight = 1;
        atomic_fetch_add_explicit(&h->others_in_flight, 1, memory_order_relaxed);
    }
    lp_workers_submit(st->scoring ? h->scoring : h->workers, &st->job);
    return MHD_YES;
}

/* Why a request ended without its response sent whole (NULL: it was). */
static const char *termination_name(enum MHD_RequestTerminationCode toe)
{
    switch (toe) {
    case MHD_REQUEST_TERMINATED_COMPLETED_OK:
        return NULL;
    case MHD_REQUEST_TERMINATED_WITH_ERROR:
        return "error";
    case MHD_REQUEST_TERMINATED_TIMEOUT_REACHED:
        return "timeout";
    case MHD_REQUEST_TERMINATED_DAEMON_SHUTDOWN:
        return "shutdown";
    case MHD_REQUEST_TERMINATED_READ_ERROR:
        return "read_error";
    case MHD_REQUEST_TERMINATED_CLIENT_ABORT:
        return "client_abort";
    default:
        return "other";
    }
}

/* The request's one log line. */
static void log_request(const struct req_state *st, enum MHD_RequestTerminationCode toe)
{
    lp_log_level level = st->status >= 500 || st->status == 0 ? LP_LOG_WARN : LP_LOG_INFO;
    if (!lp_log_enabled(level))
        return;
    lp_log(level, "request", LP_LOG_STR("request_id", st->request_id),
           LP_LOG_STR("method", st->method), LP_LOG_STR("route", st->route),
           LP_LOG_INT("status", st->status), LP_LOG_MS("duration_ms", mono_ns() - st->started_ns),
           LP_LOG_STR("client", st->client_addr), LP_LOG_INT("bytes", st->bytes),
           st->error ? LP_LOG_STR("error", lp_error_name(st->error)) : (lp_log_field){0},
           toe != MHD_REQUEST_TERMINATED_COMPLETED_OK
               ? LP_LOG_STR("termination", termination_name(toe))
               : (lp_log_field){0});
}

static void on_completed(void *cls, struct MHD_Connection *conn, void **req_cls,
                         enum MHD_RequestTerminationCode toe)
{
    (void)conn;
    lp_http *h = cls;
    struct req_state *st = *req_cls;
    if (st == NULL)
        return;
    log_request(st, toe);
    if (st->scoring)
        score_release(st);
    if (st->in_flight)
        atomic_fetch_sub_explicit(&h->others_in_flight, 1, memory_order_relaxed);
    state_free(st);
    *req_cls = NULL;
    pthread_mutex_lock(&h->lock);
    if (--h->in_flight == 0)
        pthread_cond_broadcast(&h->idle);
    pthread_mutex_unlock(&h->lock);
}

/* libmicrohttpd's own messages (a refused connection, a malformed request),
 * one line each. */
static void log_mhd(void *cls, const char *fmt, va_list ap)
{
    (void)cls;
    if (!lp_log_enabled(LP_LOG_WARN))
        return;
    char msg[512];
    vsnprintf(msg, sizeof msg, fmt, ap);
    size_t n = strlen(msg);
    while (n > 0 && (msg[n - 1] == '\n' || msg[n - 1] == '\r'))
        msg[--n] = '\0';
    lp_log(LP_LOG_WARN, "http_error", LP_LOG_STR("message", msg));
}

static int others_busy(void *ctx)
{
    lp_http *h = ctx;
    return atomic_load_explicit(&h->others_in_flight, memory_order_relaxed) > 0;
}

int lp_http_start(lp_api *api, const lp_http_opts *opts, lp_http **out, int *bound_port, char *err,
                  size_t errlen)
{
    *out = NULL;
    struct addrinfo hints = {.ai_family = AF_UNSPEC,
                             .ai_socktype = SOCK_STREAM,
                             .ai_flags = AI_PASSIVE | AI_NUMERICSERV};
    struct addrinfo *ai = NULL;
    char port[16];
    snprintf(port, sizeof port, "%d", opts->port);
    int gai = getaddrinfo(opts->host, port, &hints, &ai);
    if (gai != 0) {
        snprintf(err, errlen, "cannot resolve %s: %s", opts->host, gai_strerror(gai));
        return -1;
    }
    lp_http *h = calloc(1, sizeof *h);
    if (h == NULL) {
        freeaddrinfo(ai);
        snprintf(err, errlen, "out of memory");
        return -1;
    }
    h->api = api;
    randombytes_buf(h->id_key, sizeof h->id_key);
    atomic_init(&h->id_counter, 0);
    pthread_mutex_init(&h->lock, NULL);
    pthread_cond_init(&h->idle, NULL);
    h->body_budget = opts->body_budget;
    atomic_init(&h->body_held, 0);
    atomic_init(&h->others_in_flight, 0);
    atomic_init(&h->stopping, 0);
    int score_threads = opts->workers / 4 > 1 ? opts->workers / 4 : 1;
    lp_workers_opts wo = {.name = "ldpref-worker", .threads = opts->workers};
    lp_workers_opts so = {.name = "ldpref-score",
                          .threads = score_threads,
                          .nice = SCORE_NICE,
                          .busy = others_busy,
                          .busy_ctx = h,
                          .poll_ms = SCORE_POLL_MS,
                          .wait_max_ms = SCORE_WAIT_MAX_MS};
    h->score_slots = score_threads * SCORE_ADMITTED_PER_WORKER;
    h->per_connection = opts->connection_threads > 0;
    if (!h->per_connection) {
        h->workers = lp_workers_new(&wo);
        h->scoring = h->workers ? lp_workers_new(&so) : NULL;
    }
    int started = h->per_connection || h->scoring != NULL;
    /* the listener accepts; the daemon only serves what it is given */
    unsigned int flags = MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_AUTO | MHD_USE_ERROR_LOG |
                         MHD_USE_NO_LISTEN_SOCKET | MHD_USE_ITC;
    /* the listener caps open connections (a thread per connection: at
     * most that many threads) */
    int cap = h->per_connection && opts->connection_threads < opts->connections_max
                  ? opts->connection_threads
                  : opts->connections_max;
    char listen_err[128] = "";
    int listening = lp_listener_open(ai->ai_addr, ai->ai_addrlen, LISTEN_BACKLOG, (unsigned)cap,
                                     &h->listener, bound_port, listen_err, sizeof listen_err) == 0;
    freeaddrinfo(ai);
    /* the daemon's own connection limit stays out of reach (listener.h); a
     * per-address limit of 0 is none. The event loop is a pool of threads;
     * a thread per connection must not be given the pool's size. */
    unsigned daemon_cap =
        listening ? lp_listener_daemon_cap(h->listener, h->per_connection ? 1 : opts->threads) : 1;
    struct MHD_OptionItem model[] = {
        {MHD_OPTION_CONNECTION_LIMIT, daemon_cap, NULL},
        {MHD_OPTION_PER_IP_CONNECTION_LIMIT, opts->connections_per_address, NULL},
        {MHD_OPTION_NOTIFY_CONNECTION, (intptr_t)lp_listener_notify, h->listener},
        {MHD_OPTION_THREAD_POOL_SIZE, opts->threads, NULL},
        {MHD_OPTION_END, 0, NULL},
    };
    if (h->per_connection) {
        flags |= MHD_USE_THREAD_PER_CONNECTION;
        model[3] = model[4];
    } else {
        flags |= MHD_ALLOW_SUSPEND_RESUME;
    }
    /* HTTPS when given a certificate and key (borrowed: see http.h). */
    int tls = opts->tls_cert != NULL && opts->tls_key != NULL;
    struct MHD_OptionItem tls_options[] = {
        {MHD_OPTION_HTTPS_MEM_CERT, 0, (void *)opts->tls_cert},
        {MHD_OPTION_HTTPS_MEM_KEY, 0, (void *)opts->tls_key},
        {MHD_OPTION_HTTPS_PRIORITIES, 0, (void *)LP_TLS_PRIORITIES},
        {MHD_OPTION_END, 0, NULL},
    };
    int tls_ok = !tls || MHD_is_feature_supported(MHD_FEATURE_TLS) == MHD_YES;
    if (tls)
        flags |= MHD_USE_TLS;
    else
        tls_options[0] = (struct MHD_OptionItem){MHD_OPTION_END, 0, NULL};
    if (started && tls_ok && listening)
        h->d =
            MHD_start_daemon(flags, 0, NULL, NULL, on_request, h, MHD_OPTION_EXTERNAL_LOGGER,
                             log_mhd, NULL, MHD_OPTION_ARRAY, model, MHD_OPTION_ARRAY, tls_options,
                             MHD_OPTION_CONNECTION_TIMEOUT, (unsigned int)opts->connection_timeout,
                             MHD_OPTION_CONNECTION_MEMORY_LIMIT, (size_t)CONNECTION_MEMORY,
                             MHD_OPTION_NOTIFY_COMPLETED, on_completed, h, MHD_OPTION_END);
    if (h->d != NULL && lp_listener_start(h->listener, h->d) != 0) {
        MHD_stop_daemon(h->d);
        h->d = NULL;
        started = 0;
    }
    if (h->d == NULL) {
        if (!started)
            snprintf(err, errlen, "cannot start the worker threads");
        else if (!tls_ok)
            snprintf(err, errlen, "this libmicrohttpd was built without TLS (GnuTLS)");
        else if (!listening)
            snprintf(err, errlen, "cannot listen on %s:%d: %s", opts->host, opts->port, listen_err);
        else
            snprintf(err, errlen, "cannot start serving on %s:%d%s", opts->host, opts->port,
                     tls ? " (the TLS certificate and key are not a matching PEM pair: see the "
                           "http_error lines above)"
                         : "");
        lp_listener_free(h->listener);
        lp_workers_free(h->scoring);
        lp_workers_free(h->workers);
        pthread_mutex_destroy(&h->lock);
        pthread_cond_destroy(&h->idle);
        free(h);
        return -1;
    }
    *out = h;
    return 0;
}

void lp_http_stop(lp_http *h, int grace_ms)
{
    if (h == NULL)
        return;
    /* The listener keeps accepting until the daemon stops: new requests
     * are refused (503) meanwhile, as clients expect of a draining server. */
    atomic_store(&h->stopping, 1);
    lp_api_set_draining(h->api);
    struct timespec deadline;
    clock_gettime(CLOCK_REALTIME, &deadline);
    deadline.tv_sec += grace_ms / 1000;
    deadline.tv_nsec += (long)(grace_ms % 1000) * 1000000L;
    if (deadline.tv_nsec >= 1000000000L) {
        deadline.tv_sec++;
        deadline.tv_nsec -= 1000000000L;
    }
    pthread_mutex_lock(&h->lock);
    while (h->in_flight > 0)
        if (pthread_cond_timedwait(&h->idle, &h->lock, &deadline) == ETIMEDOUT)
            break;
    if (h->in_flight > 0)
        lp_log(LP_LOG_WARN, "shutdown_in_flight", LP_LOG_INT("requests", h->in_flight));
    pthread_mutex_unlock(&h->lock);
    /* Queued jobs run (and resume their connections) before the daemon
     * closes what is left. */
    lp_workers_free(h->scoring);
    lp_workers_free(h->workers);
    lp_listener_stop(h->listener); /* before the daemon it hands connections to */
    MHD_stop_daemon(h->d);
    lp_listener_free(h->listener); /* after: the daemon reports closes to it */
    pthread_mutex_destroy(&h->lock);
    pthread_cond_destroy(&h->idle);
    free(h);
}
