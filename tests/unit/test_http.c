/*
 * test_http.c — the HTTP layer (server/http) in front of a real lp_api over
 * a real store on a temporary file, listening on 127.0.0.1 port 0, driven
 * byte for byte over plain sockets (tests/support/http_wire.h) and, for
 * annotators, through raw_annotator (libcurl).
 *
 * Both threading models run the same cases, each on its own server: the
 * event loop with workers, and a thread per connection. Covered: GET/HEAD/POST/PUT, query
 * parameters (decoded), bearer extraction, keep-alive and pipelining, a streamed export larger than
 * one stream block, the body cap of each route (413 body_too_large before the body is read, for
 * Content-Length and chunked bodies, nothing stored), 404 not_found and 405 method_not_allowed,
 * malformed requests, the JSON error body with its status, and graceful stop: a request in flight
 * is finished, new connections are refused, and a request that never completes is given up after
 * the grace period.
 */
#include "http.h"

#include "api.h"
#include "auth.h"
#include "campaigns.h"
#include "check.h"
#include "error.h"
#include "http_wire.h"
#include "raw_annotator.h"
#include "stats.h"
#include "store.h"
#include "store_fixture.h"

#include <jansson.h>
#include <pthread.h>
#include <stdatomic.h>
#include <sodium.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define BODY_MAX 2048
#define BATCH_BODY_MAX 8192
#define UPLOAD_MAX (512 * 1024)
#define TIMEOUT_MS 10000
#define EXPORT_LABELS 40
#define EXPORT_PROMPT 4000 /* bytes: 40 labels make an export of several stream blocks */

typedef struct server {
    const char *model; /* "thread per connection" or "event-loop pool" */
    lp_api *api;
    lp_http *h;
    int port;
    char url[64];
} server;

static store_fixture fx;
static char optok[LP_AUTH_TOKEN_MAX];

static double now_ms(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec * 1e3 + t.tv_nsec / 1e6;
}

/* A server with its own api over the shared store, in the given threading
 * model (connection_threads 0: the event loop and workers) and with at most
 * connections_max connections. Returns 0 or -1. */
static int server_up_limited(server *s, const char *model, int connection_threads,
                             int connections_max)
{
    memset(s, 0, sizeof *s);
    s->model = model;
    lp_api_opts ao = {.body_max = BODY_MAX,
                      .batch_body_max = BATCH_BODY_MAX,
                      .upload_max = UPLOAD_MAX,
                      .train_threads = 1,
                      .json_depth = 32,
                      .batch_max = 100,
                      .timestamp_window_ms = 300000};
    s->api = lp_api_new(fx.store, &ao);
    lp_http_opts ho = {.host = "127.0.0.1",
                       .port = 0,
                       .threads = 2,
                       .workers = 4,
                       .connection_threads = connection_threads,
                       .connection_timeout = 30,
                       .connections_max = connections_max,
                       .connections_per_address = 64,
                       .body_budget = 16 << 20};
    char err[256] = "";
    int rc = s->api ? lp_http_start(s->api, &ho, &s->h, &s->port, err, sizeof err) : -1;
    check_record(rc == 0 && s->port > 0, __FILE__, __LINE__, "%s: server starts (%s)", model, err);
    snprintf(s->url, sizeof s->url, "http://127.0.0.1:%d", s->port);
    if (rc != 0) {
        lp_api_free(s->api);
        s->api = NULL;
    }
    return rc;
}

static int server_up(server *s, const char *model, int connection_threads)
{
    return server_up_limited(s, model, connection_threads, 256);
}

/* Graceful stop (lp_http_stop with grace_ms), then the api is freed. */
static void server_down(server *s, int grace_ms)
{
    lp_http_stop(s->h, grace_ms);
    s->h = NULL;
    lp_api_free(s->api);
    s->api = NULL;
}

/* "METHOD target HTTP/1.1" with Host, an optional bearer, Content-Length
 * when body is given, and Connection: close unless keep_alive. */
static void format_request(char *out, size_t cap, const char *method, const char *target,
                           const char *bearer, size_t body_len, int with_body, int keep_alive)
{
    int n = snprintf(out, cap, "%s %s HTTP/1.1\r\nHost: 127.0.0.1\r\n", method, target);
    if (bearer)
        n += snprintf(out + n, cap - (size_t)n, "Authorization: Bearer %s\r\n", bearer);
    if (with_body)
        n += snprintf(out + n, cap - (size_t)n, "Content-Length: %zu\r\n", body_len);
    snprintf(out + n, cap - (size_t)n, "%s\r\n", keep_alive ? "" : "Connection: close\r\n");
}

/* One request on a fresh connection; the reply in *r (free it). */
static int roundtrip(const server *s, const char *method, const char *target, const char *bearer,
                     const char *body, size_t len, wire_reply *r)
{
    memset(r, 0, sizeof *r);
    int fd = wire_connect(s->port, TIMEOUT_MS);
    if (fd < 0)
        return -1;
    char head[1024];
    format_request(head, sizeof head, method, target, bearer, len, body != NULL, 0);
    int rc = wire_send_str(fd, head);
    if (rc == 0 && body != NULL)
        rc = wire_send(fd, body, len);
    if (rc == 0)
        rc = wire_read_reply(fd, method, r);
    close(fd);
    return rc;
}

static json_t *reply_json(const wire_reply *r)
{
    return r->body ? json_loadb(r->body, r->len, 0, NULL) : NULL;
}

/* The reply is the JSON error {"error": name, "message": text} of code,
 * with the status of the error table. */
static void check_error_reply(const char *what, const wire_reply *r, int code)
{
    char ct[128];
    wire_header(r, "Content-Type", ct, sizeof ct);
    json_t *j = reply_json(r);
    const char *name = json_string_value(json_object_get(j, "error"));
    const char *message = json_string_value(json_object_get(j, "message"));
    check_record(r->status == lp_error_http_status(code), __FILE__, __LINE__,
                 "%s: status %d, want %d", what, r->status, lp_error_http_status(code));
    check_record(name != NULL && strcmp(name, lp_error_name(code)) == 0, __FILE__, __LINE__,
                 "%s: error %s, want %s (body %s)", what, name ? name : "(none)",
                 lp_error_name(code), r->body ? r->body : "");
    check_record(message != NULL && message[0] != 0 && json_object_size(j) == 2, __FILE__, __LINE__,
                 "%s: body is not {\"error\",\"message\"}: %s", what, r->body ? r->body : "");
    check_record(strcmp(ct, "application/json") == 0, __FILE__, __LINE__, "%s: content type \"%s\"",
                 what, ct);
    json_decref(j);
}

static void expect_error(const server *s, const char *method, const char *target,
                         const char *bearer, const char *body, int code)
{
    wire_reply r;
    char what[256];
    snprintf(what, sizeof what, "%s: %s %s", s->model, method, target);
    int rc = roundtrip(s, method, target, bearer, body, body ? strlen(body) : 0, &r);
    check_record(rc == 0, __FILE__, __LINE__, "%s: no reply", what);
    check_error_reply(what, &r, code);
    wire_reply_free(&r);
}

/* Rows in the store: labels, or tasks. */
enum row_kind { LABEL_ROWS, TASK_ROWS };
static int64_t stored_rows(enum row_kind kind)
{
    lp_stats st;
    if (lp_store_stats(fx.store, &st) != LP_OK)
        return -1;
    int64_t n = kind == LABEL_ROWS ? st.labels : st.tasks;
    lp_stats_clear(&st);
    return n;
}

static int campaign_exists(const char *name)
{
    lp_campaign c;
    return lp_store_campaign_by_name(fx.store, name, &c) == LP_OK;
}

/* ---- request lifecycle ---- */

static void test_get_and_head(const server *s)
{
    wire_reply r;
    CHECK_INT(roundtrip(s, "GET", "/v1/healthz", NULL, NULL, 0, &r), 0);
    CHECK_INT(r.status, 200);
    char ct[64];
    CHECK(wire_header(&r, "Content-Type", ct, sizeof ct) && strcmp(ct, "application/json") == 0);
    json_t *j = reply_json(&r);
    CHECK_STR(json_string_value(json_object_get(j, "status")), "ok");
    CHECK_STR(json_string_value(json_object_get(j, "version")), LDPREF_VERSION);
    json_decref(j);
    size_t get_len = r.len;
    wire_reply_free(&r);
    /* HEAD: the GET's headers, no body. */
    CHECK_INT(roundtrip(s, "HEAD", "/v1/healthz", NULL, NULL, 0, &r), 0);
    CHECK_INT(r.status, 200);
    char cl[32];
    CHECK(wire_header(&r, "Content-Length", cl, sizeof cl) && (size_t)atol(cl) == get_len);
    CHECK_INT(r.len, 0);
    wire_reply_free(&r);
}

static void test_post_and_put(const server *s, const char *campaign)
{
    char body[128];
    snprintf(body, sizeof body, "{\"name\":\"%s\"}", campaign);
    wire_reply r;
    CHECK_INT(roundtrip(s, "POST", "/v1/campaigns", optok, body, strlen(body), &r), 0);
    CHECK_INT(r.status, 201);
    wire_reply_free(&r);
    CHECK(campaign_exists(campaign));
    expect_error(s, "POST", "/v1/campaigns", optok, body, LP_ECAMPAIGN_EXISTS);
    /* PUT reaches its handler (no learner attached here: unavailable). */
    expect_error(s, "PUT", "/v1/retrain/schedule", optok, "{}", LP_EUNAVAILABLE);
}

static void test_unknown_route_and_wrong_method(const server *s)
{
    expect_error(s, "GET", "/v1/nope", NULL, NULL, LP_ENOT_FOUND);
    expect_error(s, "POST", "/nope", NULL, "{}", LP_ENOT_FOUND);
    expect_error(s, "POST", "/", NULL, "{}", LP_EMETHOD_NOT_ALLOWED); /* the console's page */
    expect_error(s, "GET", "/console/", NULL, NULL, LP_ENOT_FOUND);
    expect_error(s, "GET", "/console/none.js", NULL, NULL, LP_ENOT_FOUND);
    expect_error(s, "GET", "/v1/healthz/", NULL, NULL, LP_ENOT_FOUND);
    expect_error(s, "GET", "/V1/HEALTHZ", NULL, NULL, LP_ENOT_FOUND);
    expect_error(s, "DELETE", "/v1/labels", NULL, NULL, LP_EMETHOD_NOT_ALLOWED);
    expect_error(s, "GET", "/v1/labels", NULL, NULL, LP_EMETHOD_NOT_ALLOWED);
    expect_error(s, "POST", "/v1/healthz", NULL, "{}", LP_EMETHOD_NOT_ALLOWED);
    expect_error(s, "PUT", "/v1/campaigns", optok, "{}", LP_EMETHOD_NOT_ALLOWED);
}

/* The token of "Authorization: Bearer <token>" (scheme in any case, extra
 * spaces skipped); any other header is no token. */
static void test_bearer_extraction(const server *s)
{
    static const char *const accepted[] = {"Bearer %s", "bearer %s", "BEARER %s", "Bearer    %s"};
    static const char *const refused[] = {"Basic %s", "Bearer",     "Bearer ", "Bearer  ",
                                          "%s",       "Bearer x%s", "Token %s"};
    for (int pass = 0; pass < 2; pass++) {
        const char *const *forms = pass == 0 ? accepted : refused;
        size_t n =
            pass == 0 ? sizeof accepted / sizeof *accepted : sizeof refused / sizeof *refused;
        for (size_t i = 0; i < n; i++) {
            char auth[256], req[512];
            snprintf(auth, sizeof auth, forms[i], optok);
            snprintf(req, sizeof req,
                     "GET /v1/stats HTTP/1.1\r\nHost: x\r\nAuthorization: %s\r\n"
                     "Connection: close\r\n\r\n",
                     auth);
            int fd = wire_connect(s->port, TIMEOUT_MS);
            wire_reply r = {0};
            int rc = fd >= 0 && wire_send_str(fd, req) == 0 ? wire_read_reply(fd, "GET", &r) : -1;
            if (fd >= 0)
                close(fd);
            check_record(rc == 0 && r.status == (pass == 0 ? 200 : 401), __FILE__, __LINE__,
                         "%s: Authorization \"%.20s...\" gives %d", s->model, auth, r.status);
            if (pass == 1)
                check_error_reply("refused bearer", &r, LP_EUNAUTHORIZED);
            wire_reply_free(&r);
        }
    }
    expect_error(s, "GET", "/v1/stats", NULL, NULL, LP_EUNAUTHORIZED);
}

/* Query parameters reach the handler decoded; the path excludes them. */
static void test_query_parameters(const server *s, const char *campaign)
{
    char target[256], encoded[128] = "";
    for (const char *c = campaign; *c; c++) /* every character percent-encoded */
        snprintf(encoded + strlen(encoded), sizeof encoded - strlen(encoded), "%%%02X",
                 (unsigned char)*c);
    snprintf(target, sizeof target, "/v1/export?campaign=%s", encoded);
    wire_reply r;
    CHECK_INT(roundtrip(s, "GET", target, optok, NULL, 0, &r), 0);
    CHECK_INT(r.status, 200);
    wire_reply_free(&r);
    expect_error(s, "GET", "/v1/export?campaign=no-such-campaign", optok, NULL,
                 LP_EUNKNOWN_CAMPAIGN);
    expect_error(s, "GET", "/v1/export?view=dirty", optok, NULL, LP_EBAD_REQUEST);
    expect_error(s, "GET", "/v1/export?campaign=x&view=corrupted&version=1", optok, NULL,
                 LP_EBAD_REQUEST);
    /* A query string on a route that takes none changes nothing. */
    CHECK_INT(roundtrip(s, "GET", "/v1/healthz?x=1&y", NULL, NULL, 0, &r), 0);
    CHECK_INT(r.status, 200);
    wire_reply_free(&r);
}

/* Several requests on one connection, one after the other and pipelined. */
static void test_keep_alive(const server *s)
{
    int fd = wire_connect(s->port, TIMEOUT_MS);
    CHECK(fd >= 0);
    if (fd < 0)
        return;
    char req[512];
    format_request(req, sizeof req, "GET", "/v1/healthz", NULL, 0, 0, 1);
    for (int i = 0; i < 3; i++) {
        wire_reply r;
        CHECK(wire_send_str(fd, req) == 0);
        CHECK_INT(wire_read_reply(fd, "GET", &r), 0);
        CHECK_INT(r.status, 200);
        wire_reply_free(&r);
    }
    /* Pipelined: three requests in one write, three answers in order. */
    char stats[512], pipelined[2048];
    format_request(stats, sizeof stats, "GET", "/v1/stats", optok, 0, 0, 1);
    snprintf(pipelined, sizeof pipelined, "%s%s%s", req, stats,
             "GET /v1/nope HTTP/1.1\r\nHost: x\r\n\r\n");
    CHECK(wire_send_str(fd, pipelined) == 0);
    static const int want[] = {200, 200, 404};
    for (int i = 0; i < 3; i++) {
        wire_reply r;
        CHECK_INT(wire_read_reply(fd, "GET", &r), 0);
        check_record(r.status == want[i], __FILE__, __LINE__, "%s: pipelined reply %d is %d",
                     s->model, i, r.status);
        wire_reply_free(&r);
    }
    /* An error does not close the connection: one more request works. */
    wire_reply r;
    CHECK(wire_send_str(fd, req) == 0);
    CHECK_INT(wire_read_reply(fd, "GET", &r), 0);
    CHECK_INT(r.status, 200);
    wire_reply_free(&r);
    close(fd);
}

/* Tasks with long prompts in campaign, labelled through the real label
 * path, then exported: the answer is streamed (chunked) over several
 * blocks and holds every label once. */
static void test_streaming_export(const server *s, const char *campaign)
{
    char body[128];
    wire_reply r;
    snprintf(body, sizeof body, "{\"name\":\"%s\"}", campaign);
    CHECK_INT(roundtrip(s, "POST", "/v1/campaigns", optok, body, strlen(body), &r), 0);
    CHECK_INT(r.status, 201);
    wire_reply_free(&r);
    size_t cap = EXPORT_LABELS * (EXPORT_PROMPT + 128);
    char *upload = malloc(cap), *prompt = malloc(EXPORT_PROMPT + 1);
    memset(prompt, 'q', EXPORT_PROMPT);
    prompt[EXPORT_PROMPT] = 0;
    size_t n = 0;
    for (int i = 0; i < EXPORT_LABELS; i++)
        n += (size_t)snprintf(upload + n, cap - n,
                              "{\"id\":\"%s-%d\",\"prompt\":\"%s\",\"chosen\":\"a\",\"rejected\":"
                              "\"b\"}\n",
                              campaign, i, prompt);
    char target[128];
    snprintf(target, sizeof target, "/v1/tasks?campaign=%s", campaign);
    CHECK_INT(roundtrip(s, "POST", target, optok, upload, n, &r), 0);
    CHECK_INT(r.status, 200);
    wire_reply_free(&r);
    free(upload);
    free(prompt);

    snprintf(body, sizeof body, "{\"campaign\":\"%s\",\"count\":1}", campaign);
    CHECK_INT(roundtrip(s, "POST", "/v1/enrollment-tokens", optok, body, strlen(body), &r), 0);
    json_t *j = reply_json(&r);
    const char *token = json_string_value(json_array_get(json_object_get(j, "tokens"), 0));
    raw_annotator a;
    CHECK_INT(token ? raw_enroll(&a, s->url, token) : 0, 201);
    json_decref(j);
    wire_reply_free(&r);
    json_t *tasks = NULL;
    CHECK_INT(raw_next(&a, EXPORT_LABELS, &tasks), 200);
    CHECK_INT(json_array_size(tasks), EXPORT_LABELS);
    int64_t before = stored_rows(LABEL_ROWS);
    for (size_t i = 0; i < json_array_size(tasks); i++) {
        int64_t id = json_integer_value(json_object_get(json_array_get(tasks, i), "task_id"));
        lp_label_msg m = raw_label(&a, id, (int)(i % 2), 1.0);
        http_reply hr;
        CHECK_INT(raw_post_label(s->url, &m, &hr), 201);
        http_reply_free(&hr);
    }
    json_decref(tasks);
    CHECK_INT(stored_rows(LABEL_ROWS), before + EXPORT_LABELS);

    snprintf(target, sizeof target, "/v1/export?campaign=%s", campaign);
    CHECK_INT(roundtrip(s, "GET", target, optok, NULL, 0, &r), 0);
    CHECK_INT(r.status, 200);
    CHECK(r.chunked); /* streamed: the length is not known in advance */
    CHECK(r.len > 2 * 64 * 1024);
    char ct[64];
    wire_header(&r, "Content-Type", ct, sizeof ct);
    CHECK_STR(ct, "application/x-ndjson");
    int lines = 0, bad = 0;
    for (char *line = r.body; line && *line;) {
        char *nl = strchr(line, '\n');
        json_t *row = json_loadb(line, nl ? (size_t)(nl - line) : strlen(line), 0, NULL);
        const char *c = json_string_value(json_object_get(row, "campaign"));
        bad += c == NULL || strcmp(c, campaign) != 0;
        json_decref(row);
        lines++;
        line = nl ? nl + 1 : NULL;
    }
    CHECK_INT(lines, EXPORT_LABELS);
    CHECK_INT(bad, 0);
    wire_reply_free(&r);
}

/* ---- body caps ---- */

/* A body of len bytes of 'x' sent to target with Content-Length. */
static void send_sized(const server *s, const char *target, size_t len, wire_reply *r)
{
    char *body = malloc(len + 1);
    memset(body, 'x', len);
    body[len] = 0;
    CHECK_INT(roundtrip(s, "POST", target, optok, body, len, r), 0);
    free(body);
}

/* Only the headers of a request announcing len bytes: the answer must come
 * without the body (the server may close before reading it). */
static void send_headers_only(const server *s, const char *target, size_t len, wire_reply *r)
{
    char head[1024];
    format_request(head, sizeof head, "POST", target, optok, len, 1, 0);
    int fd = wire_connect(s->port, TIMEOUT_MS);
    CHECK(fd >= 0);
    CHECK_INT(fd >= 0 && wire_send_str(fd, head) == 0 ? wire_read_reply(fd, "POST", r) : -1, 0);
    if (fd >= 0)
        close(fd);
}

static void test_body_caps_per_route(const server *s)
{
    int64_t labels = stored_rows(LABEL_ROWS), tasks = stored_rows(TASK_ROWS);
    static const struct {
        const char *target;
        size_t cap;
    } routes[] = {{"/v1/labels", BODY_MAX},
                  {"/v1/campaigns", BODY_MAX},
                  {"/v1/labels/batch", BATCH_BODY_MAX},
                  {"/v1/tasks", UPLOAD_MAX}};
    for (size_t i = 0; i < sizeof routes / sizeof routes[0]; i++) {
        wire_reply r;
        char what[128];
        snprintf(what, sizeof what, "%s: %s, one byte over", s->model, routes[i].target);
        send_headers_only(s, routes[i].target, routes[i].cap + 1, &r);
        check_error_reply(what, &r, LP_EBODY_TOO_LARGE);
        wire_reply_free(&r);
        /* At the cap the body is read and judged on its content. */
        send_sized(s, routes[i].target, routes[i].cap, &r);
        check_record(r.status == 400, __FILE__, __LINE__, "%s: %s at the cap gives %d (%s)",
                     s->model, routes[i].target, r.status, r.body ? r.body : "");
        wire_reply_free(&r);
    }
    CHECK_INT(stored_rows(LABEL_ROWS), labels);
    CHECK_INT(stored_rows(TASK_ROWS), tasks);
}

/* A Content-Length over the cap is answered from the headers alone: the
 * body is never sent, and the answer still comes. */
static void test_body_cap_before_reading(const server *s)
{
    int fd = wire_connect(s->port, TIMEOUT_MS);
    CHECK(fd >= 0);
    if (fd < 0)
        return;
    CHECK(wire_send_str(fd, "POST /v1/labels HTTP/1.1\r\nHost: x\r\n"
                            "Content-Length: 1000000000\r\n\r\n") == 0);
    double t0 = now_ms();
    wire_reply r;
    CHECK_INT(wire_read_reply(fd, "POST", &r), 0);
    check_error_reply("huge Content-Length", &r, LP_EBODY_TOO_LARGE);
    check_record(now_ms() - t0 < TIMEOUT_MS / 2, __FILE__, __LINE__, "%s: 413 took %.0f ms",
                 s->model, now_ms() - t0);
    wire_reply_free(&r);
    close(fd);
}

/* An operator route without credentials: 401 from the headers alone, the
 * (declared, never sent) body not waited for; a wrong token the same. */
static void test_credentials_before_body(const server *s)
{
    const char *heads[] = {"POST /v1/tasks?campaign=x HTTP/1.1\r\nHost: x\r\n"
                           "Content-Length: 400000\r\n\r\n",
                           "POST /v1/tasks?campaign=x HTTP/1.1\r\nHost: x\r\n"
                           "Authorization: Bearer op_wrong\r\nContent-Length: 400000\r\n\r\n"};
    for (int i = 0; i < 2; i++) {
        int fd = wire_connect(s->port, TIMEOUT_MS);
        CHECK(fd >= 0);
        if (fd < 0)
            return;
        CHECK(wire_send_str(fd, heads[i]) == 0);
        double t0 = now_ms();
        wire_reply r;
        CHECK_INT(wire_read_reply(fd, "POST", &r), 0);
        check_error_reply(i ? "a wrong token, body unsent" : "no token, body unsent", &r,
                          LP_EUNAUTHORIZED);
        check_record(now_ms() - t0 < TIMEOUT_MS / 2, __FILE__, __LINE__, "%s: 401 took %.0f ms",
                     s->model, now_ms() - t0);
        wire_reply_free(&r);
        close(fd);
    }
}

/* More concurrent score requests than are admitted at once (4 per score
 * worker): the others wait and every one is answered (this api has no
 * learner: 503 unavailable). */
#define SCORE_CLIENTS 12
static void test_score_requests_wait_their_turn(const server *s)
{
    int fds[SCORE_CLIENTS];
    char req[LP_AUTH_TOKEN_MAX + 128]; /* with a token: /v1/score needs the score scope */
    snprintf(req, sizeof req,
             "POST /v1/score HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer %s\r\n"
             "Content-Length: 2\r\n\r\n{}",
             optok);
    for (int i = 0; i < SCORE_CLIENTS; i++) {
        fds[i] = wire_connect(s->port, TIMEOUT_MS);
        CHECK(fds[i] >= 0 && wire_send_str(fds[i], req) == 0);
    }
    int answered = 0;
    for (int i = 0; i < SCORE_CLIENTS; i++) {
        wire_reply r;
        if (fds[i] >= 0 && wire_read_reply(fds[i], "POST", &r) == 0 && r.status == 503)
            answered++;
        wire_reply_free(&r);
        if (fds[i] >= 0)
            close(fds[i]);
    }
    check_record(answered == SCORE_CLIENTS, __FILE__, __LINE__,
                 "%s: %d of %d concurrent score requests answered", s->model, answered,
                 SCORE_CLIENTS);
}

/* Chunked bodies: the cap applies to what arrives; under it the request is
 * handled normally. */
static void test_chunked_bodies(const server *s, const char *campaign)
{
    int64_t labels = stored_rows(LABEL_ROWS);
    int fd = wire_connect(s->port, TIMEOUT_MS);
    CHECK(fd >= 0);
    if (fd < 0)
        return;
    char chunk[1100];
    memset(chunk, 0, sizeof chunk);
    int n = snprintf(chunk, sizeof chunk, "3e8\r\n");
    memset(chunk + n, 'x', 1000);
    memcpy(chunk + n + 1000, "\r\n", 2);
    CHECK(wire_send_str(fd, "POST /v1/labels HTTP/1.1\r\nHost: x\r\n"
                            "Transfer-Encoding: chunked\r\nConnection: close\r\n\r\n") == 0);
    for (int i = 0; i < 3; i++) /* 3000 bytes > BODY_MAX */
        wire_send(fd, chunk, (size_t)n + 1002);
    wire_send_str(fd, "0\r\n\r\n");
    wire_reply r;
    CHECK_INT(wire_read_reply(fd, "POST", &r), 0);
    check_error_reply("chunked body over the cap", &r, LP_EBODY_TOO_LARGE);
    wire_reply_free(&r);
    close(fd);
    CHECK_INT(stored_rows(LABEL_ROWS), labels);

    char body[128], req[1024];
    int len = snprintf(body, sizeof body, "{\"name\":\"%s\"}", campaign);
    int half = len / 2;
    snprintf(req, sizeof req,
             "POST /v1/campaigns HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer %s\r\n"
             "Transfer-Encoding: chunked\r\nConnection: close\r\n\r\n"
             "%x\r\n%.*s\r\n%x\r\n%s\r\n0\r\n\r\n",
             optok, half, half, body, len - half, body + half);
    fd = wire_connect(s->port, TIMEOUT_MS);
    CHECK(fd >= 0 && wire_send_str(fd, req) == 0);
    CHECK_INT(wire_read_reply(fd, "POST", &r), 0);
    CHECK_INT(r.status, 201);
    CHECK(campaign_exists(campaign));
    wire_reply_free(&r);
    close(fd);
}

/* ---- malformed requests ---- */

static void expect_raw_status(const server *s, const char *what, const char *bytes, int status)
{
    int fd = wire_connect(s->port, TIMEOUT_MS);
    CHECK(fd >= 0);
    if (fd < 0)
        return;
    wire_reply r;
    int rc = wire_send_str(fd, bytes) == 0 ? wire_read_reply(fd, "GET", &r) : -1;
    check_record(rc == 0 && r.status == status, __FILE__, __LINE__, "%s: %s gives %d, want %d",
                 s->model, what, rc == 0 ? r.status : -1, status);
    wire_reply_free(&r);
    close(fd);
}

static void test_malformed_requests(const server *s)
{
    expect_raw_status(s, "bad Content-Length",
                      "POST /v1/campaigns HTTP/1.1\r\nHost: x\r\nContent-Length: abc\r\n\r\n", 400);
    expect_raw_status(s, "unknown HTTP version", "GET /v1/healthz HTTP/9.9\r\nHost: x\r\n\r\n",
                      505);
    /* A request line that is not HTTP at all: an error status or a close,
     * never a crash; the server keeps serving. */
    int fd = wire_connect(s->port, TIMEOUT_MS);
    if (fd >= 0) {
        wire_reply r;
        wire_send_str(fd, "HELLO\r\n\r\n");
        int rc = wire_read_reply(fd, "GET", &r);
        check_record(rc != 0 || r.status >= 400, __FILE__, __LINE__, "%s: garbage gives %d",
                     s->model, r.status);
        wire_reply_free(&r);
        close(fd);
    }
    /* Bodies the handlers refuse, as JSON errors. */
    expect_error(s, "POST", "/v1/campaigns", optok, "{\"name\":", LP_EMALFORMED_JSON);
    expect_error(s, "POST", "/v1/labels", NULL, "{\"z\":", LP_EMALFORMED_JSON);
    expect_error(s, "POST", "/v1/campaigns", optok,
                 "[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]",
                 LP_ETOO_DEEP);
    wire_reply r;
    CHECK_INT(roundtrip(s, "GET", "/v1/healthz", NULL, NULL, 0, &r), 0);
    CHECK_INT(r.status, 200);
    wire_reply_free(&r);
}

/* ---- graceful stop ---- */

/* Connects and sends the headers of a POST announcing len bytes with
 * "Expect: 100-continue"; the server's "100 Continue" shows that the
 * request has begun (it is in flight). Returns the socket or -1. */
static int begin_request(const server *s, const char *target, size_t len)
{
    char head[1024];
    format_request(head, sizeof head, "POST", target, optok, len, 1, 0);
    head[strlen(head) - 2] = 0; /* reopen the header block */
    strcat(head, "Expect: 100-continue\r\n\r\n");
    int fd = wire_connect(s->port, TIMEOUT_MS);
    wire_reply r = {0};
    int ok = fd >= 0 && wire_send_str(fd, head) == 0 && wire_read_reply(fd, "POST", &r) == 0 &&
             r.status == 100;
    check_record(ok, __FILE__, __LINE__, "%s: no 100 Continue (status %d)", s->model, r.status);
    wire_reply_free(&r);
    if (!ok && fd >= 0) {
        close(fd);
        fd = -1;
    }
    return fd;
}

typedef struct stopper {
    server *s;
    int grace_ms;
    double took_ms;
} stopper;

static void *stop_in_thread(void *arg)
{
    stopper *st = arg;
    double t0 = now_ms();
    server_down(st->s, st->grace_ms);
    st->took_ms = now_ms() - t0;
    return NULL;
}

/* While a stop is under way, a new request on a new connection is answered
 * 503 unavailable before its body is read, and its connection closes. 1 when
 * that answer came (within about 3 s), 0 otherwise. */
static int refused_while_stopping(const server *s, int port, const char *campaign)
{
    for (int i = 0; i < 100; i++) {
        char name[96], body[128];
        snprintf(name, sizeof name, "%s-late-%d", campaign, i);
        int len = snprintf(body, sizeof body, "{\"name\":\"%s\"}", name);
        int fd = wire_connect(port, 1000);
        if (fd < 0)
            return 0;
        char head[1024];
        format_request(head, sizeof head, "POST", "/v1/campaigns", optok, (size_t)len, 1, 1);
        wire_reply r = {0};
        int rc = wire_send_str(fd, head);
        if (rc == 0)
            rc = wire_send(fd, body, (size_t)len);
        if (rc == 0)
            rc = wire_read_reply(fd, "POST", &r);
        int refused = rc == 0 && r.status == 503;
        if (refused) {
            char what[128];
            snprintf(what, sizeof what, "%s: a request while stopping", s->model);
            check_error_reply(what, &r, LP_EUNAVAILABLE);
            check_record(wire_closed(fd, 2000), __FILE__, __LINE__,
                         "%s: the connection stays open after the refusal", s->model);
            check_record(!campaign_exists(name), __FILE__, __LINE__,
                         "%s: a refused request stored its campaign", s->model);
        } else {
            CHECK_INT(r.status, 201); /* the stop had not begun */
        }
        wire_reply_free(&r);
        close(fd);
        if (refused)
            return 1;
        usleep(30 * 1000);
    }
    return 0;
}

/* A request whose body is still arriving when the stop begins is finished
 * and answered; meanwhile new requests are refused with 503 unavailable. */
static void test_stop_finishes_request_in_flight(server *s, const char *campaign)
{
    char body[128];
    int len = snprintf(body, sizeof body, "{\"name\":\"%s\"}", campaign);
    int fd = begin_request(s, "/v1/campaigns", (size_t)len);
    if (fd < 0) {
        server_down(s, 0);
        return;
    }
    CHECK(wire_send(fd, body, 4) == 0);
    int port = s->port;
    stopper st = {s, 8000, 0};
    pthread_t t;
    pthread_create(&t, NULL, stop_in_thread, &st);
    check_record(refused_while_stopping(s, port, campaign), __FILE__, __LINE__,
                 "%s: no request was refused while stopping", s->model);
    wire_reply r = {0};
    CHECK(wire_send(fd, body + 4, (size_t)len - 4) == 0);
    CHECK_INT(wire_read_reply(fd, "POST", &r), 0);
    CHECK_INT(r.status, 201);
    wire_reply_free(&r);
    close(fd);
    pthread_join(t, NULL);
    CHECK(campaign_exists(campaign));
    check_record(st.took_ms < 6000, __FILE__, __LINE__,
                 "%s: stop waited %.0f ms for a request that had finished", s->model, st.took_ms);
}

typedef struct churn {
    int port;
    _Atomic int run;
    int opened;
} churn;

/* Opens connections as fast as the server takes them, holding each open
 * briefly, so that the server's threads keep reaching their connection
 * limit and falling below it. */
static void *churn_connections(void *arg)
{
    churn *c = arg;
    int held[8];
    for (int i = 0; i < 8; i++)
        held[i] = -1;
    for (unsigned n = 0; atomic_load(&c->run); n++) {
        int slot = (int)(n % 8);
        if (held[slot] >= 0)
            close(held[slot]);
        held[slot] = wire_connect(c->port, 200);
        c->opened += held[slot] >= 0;
    }
    for (int i = 0; i < 8; i++)
        if (held[i] >= 0)
            close(held[i]);
    return NULL;
}

/* Stopping a server whose threads are at their connection limit, or are
 * taking and dropping connections as the stop begins, ends cleanly. */
static void test_stop_at_connection_limit(const char *model, int connection_threads)
{
    enum { CYCLES = 40 };
    int stopped = 0, opened = 0;
    for (int i = 0; i < CYCLES; i++) {
        server s;
        if (server_up_limited(&s, model, connection_threads, 4) != 0)
            return;
        churn c = {.port = s.port};
        atomic_init(&c.run, 1);
        pthread_t t;
        pthread_create(&t, NULL, churn_connections, &c);
        usleep((useconds_t)(2000 + 500 * (i % 8)));
        server_down(&s, i % 2 ? 50 : 0);
        atomic_store(&c.run, 0);
        pthread_join(t, NULL);
        opened += c.opened;
        stopped++;
    }
    CHECK_INT(stopped, CYCLES);
    check_record(opened >= CYCLES * 4, __FILE__, __LINE__,
                 "%s: only %d connections were opened against the limit", model, opened);
}

/* A request that never completes holds the stop for the grace period only,
 * and stores nothing. */
static void test_stop_gives_up_after_grace(server *s, const char *campaign)
{
    int fd = begin_request(s, "/v1/campaigns", 100);
    if (fd < 0) {
        server_down(s, 0);
        return;
    }
    CHECK(wire_send_str(fd, "{\"name\":\"") == 0 && wire_send_str(fd, campaign) == 0);
    stopper st = {s, 400, 0};
    stop_in_thread(&st);
    check_record(st.took_ms >= 350 && st.took_ms < 5000, __FILE__, __LINE__,
                 "%s: stop with a stuck request took %.0f ms (grace 400)", s->model, st.took_ms);
    CHECK(wire_closed(fd, 2000));
    close(fd);
    CHECK(!campaign_exists(campaign));
}

static void test_stop_when_idle_is_quick(server *s)
{
    stopper st = {s, 5000, 0};
    stop_in_thread(&st);
    check_record(st.took_ms < 2000, __FILE__, __LINE__, "%s: idle stop took %.0f ms", s->model,
                 st.took_ms);
}

/* Every case against one threading model; tag keeps campaign names apart. */
static void run_model(const char *model, int connection_threads, const char *tag)
{
    char c1[64], c2[64], c3[64], c4[64], c5[64];
    snprintf(c1, sizeof c1, "%s-post", tag);
    snprintf(c2, sizeof c2, "%s-export", tag);
    snprintf(c3, sizeof c3, "%s-chunked", tag);
    snprintf(c4, sizeof c4, "%s-in-flight", tag);
    snprintf(c5, sizeof c5, "%s-stuck", tag);
    server s;
    if (server_up(&s, model, connection_threads) != 0)
        return;
    test_get_and_head(&s);
    test_post_and_put(&s, c1);
    test_unknown_route_and_wrong_method(&s);
    test_bearer_extraction(&s);
    test_keep_alive(&s);
    test_streaming_export(&s, c2);
    test_query_parameters(&s, c2);
    test_body_caps_per_route(&s);
    test_body_cap_before_reading(&s);
    test_credentials_before_body(&s);
    if (connection_threads == 0) /* admission is the event loop's */
        test_score_requests_wait_their_turn(&s);
    test_chunked_bodies(&s, c3);
    test_malformed_requests(&s);
    test_stop_finishes_request_in_flight(&s, c4);
    if (server_up(&s, model, connection_threads) != 0)
        return;
    test_stop_gives_up_after_grace(&s, c5);
    if (server_up(&s, model, connection_threads) != 0)
        return;
    test_stop_when_idle_is_quick(&s);
    test_stop_at_connection_limit(model, connection_threads);
}

int main(void)
{
    int opened = store_fixture_open(&fx, "test-http", 2);
    CHECK_INT(opened, LP_OK);
    if (opened != LP_OK)
        return check_summary();
    int created = 0;
    CHECK_ERR(lp_auth_bootstrap(fx.store, optok, &created), LP_OK);
    run_model("event loop and workers", 0, "pool");
    run_model("thread per connection", 8, "tpc");
    lp_http_stop(NULL, 0); /* accepts NULL */
    store_fixture_close(&fx);
    sodium_memzero(optok, sizeof optok);
    return check_summary();
}
