/*
 * api.c — routing, response helpers, healthz, and the synchronous wrapper.
 * See api.h. Handlers live in api_labels.c (annotator endpoints: labels,
 * next, enrollment), api_progress.c (annotator endpoints: skip, progress),
 * api_admin.c (operator endpoints), api_views.c (the operator's read views),
 * api_quality.c (label quality) and api_audit.c (the audit log: what the
 * router records of each operator action, and GET /v1/audit).
 */
#include "api_internal.h"

#include "auth.h"
#include "console.h"
#include "error.h"
#include "retrain.h"
#include "tasks.h"
#include "wire.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "clock.h"

/* ---- responses ---- */

void lp_response_clear(lp_response *r)
{
    if (r == NULL)
        return;
    free(r->body);
    free(r->set_cookie);
    if (r->stream.free)
        r->stream.free(r->stream.ctx);
    memset(r, 0, sizeof *r);
}

int lp_api_error(lp_response *resp, int code, const char *msg)
{
    lp_response_clear(resp);
    lp_metrics_reject(code);
    json_t *o = json_pack("{s:s, s:s}", "error", lp_error_name(code), "message",
                          msg && *msg ? msg : lp_error_message(code));
    char *text = o ? json_dumps(o, JSON_COMPACT) : NULL;
    json_decref(o);
    resp->error = code;
    resp->content_type = LP_CT_JSON;
    if (text == NULL) { /* a message that is not valid UTF-8, or no memory */
        lp_buf b = {0};
        lp_buf_printf(&b, "{\"error\":\"%s\",\"message\":\"%s\"}", lp_error_name(code),
                      lp_error_message(code));
        text = lp_buf_take(&b, NULL);
    }
    resp->body = text;
    resp->body_len = text ? strlen(text) : 0;
    return LP_API_DONE;
}

int lp_api_json(lp_response *resp, int status, json_t *obj)
{
    char *text = obj ? json_dumps(obj, JSON_COMPACT) : NULL;
    json_decref(obj);
    if (text == NULL)
        return lp_api_error(resp, LP_ENO_MEMORY, NULL);
    lp_response_clear(resp);
    resp->status = status;
    resp->content_type = LP_CT_JSON;
    resp->body = text;
    resp->body_len = strlen(text);
    return LP_API_DONE;
}

int lp_api_buf(lp_response *resp, int status, const char *content_type, lp_buf *b)
{
    size_t len = 0;
    char *text = lp_buf_take(b, &len);
    if (text == NULL)
        return lp_api_error(resp, LP_ENO_MEMORY, NULL);
    lp_response_clear(resp);
    resp->status = status;
    resp->content_type = content_type;
    resp->body = text;
    resp->body_len = len;
    return LP_API_DONE;
}

int lp_api_parse_body(lp_api *api, const lp_request *req, json_t **out, lp_response *resp)
{
    char msg[LP_MSG_MAX];
    *out = NULL;
    if (req->body == NULL || req->body_len == 0)
        return lp_api_error(resp, LP_EMALFORMED_JSON, "the request body is empty");
    int rc = lp_json_parse(req->body, req->body_len, api->opts.json_depth, out, msg, sizeof msg);
    if (rc != LP_OK) {
        lp_api_error(resp, rc, msg);
        return rc;
    }
    return LP_OK;
}

const char *lp_api_param(const lp_request *req, const char *key)
{
    for (size_t i = 0; i < req->n_params; i++)
        if (req->params[i].key && strcmp(req->params[i].key, key) == 0)
            return req->params[i].value;
    return NULL;
}

void lp_api_receipt(lp_buf *b, const lp_receipt *r, int with_status, int status)
{
    lp_buf_printf(b, "{\"label_id\":%lld,\"task_id\":%lld,\"z\":%d,\"epsilon\":",
                  (long long)r->label_id, (long long)r->task_id, r->z);
    lp_buf_double(b, r->epsilon);
    lp_buf_printf(b, ",\"received_at\":%lld", (long long)r->received_ms);
    if (with_status)
        lp_buf_printf(b, ",\"status\":%d", status);
    lp_buf_puts(b, "}");
}

int lp_api_context(lp_api *api, int64_t task_id, json_t **out)
{
    *out = NULL;
    lp_turn *turns = NULL;
    size_t n = 0;
    int rc = lp_store_task_context(api->store, task_id, &turns, &n);
    if (rc != LP_OK)
        return rc;
    json_t *arr = json_array();
    for (size_t i = 0; i < n && arr != NULL; i++)
        if (json_array_append_new(arr, json_pack("{s:s, s:s}", "role", turns[i].role, "content",
                                                 turns[i].content)) != 0) {
            json_decref(arr);
            arr = NULL;
        }
    lp_turns_free(turns);
    *out = arr;
    return arr != NULL ? LP_OK : LP_ENO_MEMORY;
}

/* ---- routing ---- */

typedef int (*handler_fn)(lp_api *, const lp_request *, lp_response *);

enum cap_kind { CAP_BODY, CAP_BATCH, CAP_UPLOAD };

typedef struct route {
    const char *method, *path;
    lp_route id;
    handler_fn fn;  /* NULL for the asynchronous label routes */
    unsigned scope; /* LP_SCOPE_* an operator credential needs (LP_SCOPE_ANY_TOKEN: any
                       live one); 0: none */
    enum cap_kind cap;
} route;

/* The storage's state for /v1/healthz (store.h). */
static json_t *storage_json(const lp_store_health *h)
{
    json_t *reasons = json_array();
    if (h->unlinked)
        json_array_append_new(reasons, json_string("db_unlinked"));
    if (h->commit_failed)
        json_array_append_new(reasons, json_string("commit_failed"));
    if (h->disk_low)
        json_array_append_new(reasons, json_string("disk_low"));
    json_t *o = json_pack("{s:s, s:s, s:o, s:I, s:I, s:I, s:I, s:I}", "state", h->reason, "backend",
                          h->backend ? h->backend : "sqlite", "reasons", reasons, "free_bytes",
                          (json_int_t)h->free_bytes, "free_min", (json_int_t)h->free_min,
                          "wal_bytes", (json_int_t)h->wal_bytes, "checked_at",
                          (json_int_t)h->checked_ms, "truncated_at", (json_int_t)h->truncated_ms);
    if (o != NULL && h->failed_ms > 0)
        json_object_set_new(o, "commit_failed_at", json_integer(h->failed_ms));
    if (o != NULL && h->commit_failed)
        json_object_set_new(o, "failure", json_string(h->failure));
    return o;
}

/* 200 with the version and the storage's state; 503 unavailable while
 * draining; 503 storage_unhealthy with the reason while the storage refuses
 * writes (store.h). */
static int healthz(lp_api *api, const lp_request *req, lp_response *resp)
{
    if (atomic_load(&api->draining))
        return lp_api_error(resp, LP_EUNAVAILABLE, NULL);
    lp_store_health h;
    lp_store_health_get(api->store, &h);
    json_t *storage = storage_json(&h);
    if (h.unlinked || h.commit_failed || h.disk_low) {
        char msg[LP_MSG_MAX];
        snprintf(msg, sizeof msg, "%s: %s", h.reason, lp_error_message(LP_ESTORAGE_UNHEALTHY));
        lp_api_error(resp, LP_ESTORAGE_UNHEALTHY, msg);
        json_t *o = json_pack("{s:s, s:s, s:s, s:s, s:o*}", "error",
                              lp_error_name(LP_ESTORAGE_UNHEALTHY), "message", msg, "reason",
                              h.reason, "version", LDPREF_VERSION, "storage", storage);
        char *text = o ? json_dumps(o, JSON_COMPACT) : NULL;
        json_decref(o);
        if (text != NULL) {
            free(resp->body);
            resp->body = text;
            resp->body_len = strlen(text);
        }
        return LP_API_DONE;
    }
    return lp_api_json(resp, 200,
                       json_pack("{s:s, s:s, s:o*}", "status", "ok", "version", LDPREF_VERSION,
                                 "storage", storage));
}

static const route ROUTES[] = {
    {"GET", "/v1/healthz", LP_ROUTE_HEALTHZ, healthz, 0, CAP_BODY},
    {"POST", "/v1/campaigns", LP_ROUTE_CAMPAIGNS, lp_api_campaign_create, LP_SCOPE_ADMIN, CAP_BODY},
    {"GET", "/v1/campaigns", LP_ROUTE_CAMPAIGNS, lp_api_campaign_list, LP_SCOPE_ADMIN, CAP_BODY},
    {"POST", "/v1/campaigns/update", LP_ROUTE_CAMPAIGNS, lp_api_campaign_update, LP_SCOPE_ADMIN,
     CAP_BODY},
    {"GET", "/v1/campaigns/view", LP_ROUTE_CAMPAIGNS, lp_api_campaign_view, LP_SCOPE_ADMIN,
     CAP_BODY},
    {"POST", "/v1/enrollment-tokens", LP_ROUTE_ENROLL_TOKENS, lp_api_enroll_tokens, LP_SCOPE_ADMIN,
     CAP_BODY},
    {"POST", "/v1/annotators", LP_ROUTE_ANNOTATORS, lp_api_enroll, 0, CAP_BODY},
    {"GET", "/v1/annotators", LP_ROUTE_ANNOTATOR_LIST, lp_api_annotator_list, LP_SCOPE_ADMIN,
     CAP_BODY},
    {"POST", "/v1/annotators/revoke", LP_ROUTE_REVOKE, lp_api_revoke, LP_SCOPE_ADMIN, CAP_BODY},
    {"POST", "/v1/tokens", LP_ROUTE_TOKENS, lp_api_token_create, LP_SCOPE_ADMIN, CAP_BODY},
    {"GET", "/v1/tokens", LP_ROUTE_TOKENS, lp_api_token_list, LP_SCOPE_ADMIN, CAP_BODY},
    {"POST", "/v1/tokens/revoke", LP_ROUTE_TOKENS, lp_api_token_revoke, LP_SCOPE_ADMIN, CAP_BODY},
    {"POST", "/v1/tokens/rotate", LP_ROUTE_TOKENS, lp_api_token_rotate, LP_SCOPE_ADMIN, CAP_BODY},
    {"POST", "/v1/tasks", LP_ROUTE_TASKS, lp_api_tasks_load, LP_SCOPE_ADMIN, CAP_UPLOAD},
    {"GET", "/v1/tasks", LP_ROUTE_TASK_LIST, lp_api_task_list, LP_SCOPE_ADMIN, CAP_BODY},
    {"GET", "/v1/tasks/one", LP_ROUTE_TASK_LIST, lp_api_task_one, LP_SCOPE_ADMIN, CAP_BODY},
    {"POST", "/v1/tasks/next", LP_ROUTE_TASKS_NEXT, lp_api_next, 0, CAP_BODY},
    {"POST", "/v1/tasks/skip", LP_ROUTE_TASKS_SKIP, lp_api_skip, 0, CAP_BODY},
    {"POST", "/v1/progress", LP_ROUTE_PROGRESS, lp_api_progress, 0, CAP_BODY},
    {"POST", "/v1/labels", LP_ROUTE_LABELS, NULL, 0, CAP_BODY},
    {"POST", "/v1/labels/batch", LP_ROUTE_LABELS_BATCH, NULL, 0, CAP_BATCH},
    {"GET", "/v1/stats", LP_ROUTE_STATS, lp_api_stats, LP_SCOPE_ADMIN, CAP_BODY},
    {"GET", "/v1/export", LP_ROUTE_EXPORT, lp_api_export, LP_SCOPE_EXPORT, CAP_BODY},
    {"GET", "/metrics", LP_ROUTE_METRICS, lp_api_metrics, LP_SCOPE_ANY_TOKEN, CAP_BODY},
    {"POST", "/v1/retrain", LP_ROUTE_RETRAIN, lp_api_retrain_start, LP_SCOPE_ADMIN, CAP_BODY},
    {"GET", "/v1/retrain", LP_ROUTE_RETRAIN, lp_api_retrain_get, LP_SCOPE_ADMIN, CAP_BODY},
    {"POST", "/v1/retrain/cancel", LP_ROUTE_RETRAIN, lp_api_retrain_cancel, LP_SCOPE_ADMIN,
     CAP_BODY},
    {"GET", "/v1/retrain/schedule", LP_ROUTE_RETRAIN, lp_api_schedule_get, LP_SCOPE_ADMIN,
     CAP_BODY},
    {"PUT", "/v1/retrain/schedule", LP_ROUTE_RETRAIN, lp_api_schedule_put, LP_SCOPE_ADMIN,
     CAP_BODY},
    {"GET", "/v1/models", LP_ROUTE_MODELS, lp_api_models_get, LP_SCOPE_ADMIN, CAP_BODY},
    {"POST", "/v1/models/activate", LP_ROUTE_MODELS, lp_api_models_activate, LP_SCOPE_ADMIN,
     CAP_BODY},
    {"POST", "/v1/score", LP_ROUTE_SCORE, lp_api_score, LP_SCOPE_SCORE, CAP_BATCH},
    {"POST", "/v1/score/batch", LP_ROUTE_SCORE_BATCH, lp_api_score_batch, LP_SCOPE_SCORE,
     CAP_UPLOAD},
    {"GET", "/v1/corruption", LP_ROUTE_CORRUPTION, lp_api_corruption_get, LP_SCOPE_ADMIN, CAP_BODY},
    {"PUT", "/v1/corruption", LP_ROUTE_CORRUPTION, lp_api_corruption_put, LP_SCOPE_ADMIN, CAP_BODY},
    {"GET", "/", LP_ROUTE_CONSOLE, lp_console_page, 0, CAP_BODY},
    {"GET", "/console/*", LP_ROUTE_CONSOLE, lp_console_file, 0, CAP_BODY},
    {"POST", "/v1/console/session", LP_ROUTE_CONSOLE, lp_console_sign_in, 0, CAP_BODY},
    {"GET", "/v1/console/session", LP_ROUTE_CONSOLE, lp_console_session_get, 0, CAP_BODY},
    {"DELETE", "/v1/console/session", LP_ROUTE_CONSOLE, lp_console_sign_out, 0, CAP_BODY},
    {"GET", "/v1/quality", LP_ROUTE_QUALITY, lp_api_quality, LP_SCOPE_ADMIN, CAP_BODY},
    {"GET", "/v1/audit", LP_ROUTE_AUDIT, lp_api_audit_list, LP_SCOPE_ADMIN, CAP_BODY},
};
#define N_ROUTES (sizeof ROUTES / sizeof ROUTES[0])

/* 1 if path matches the route's path: exactly, or, for a route path ending
 * in a slash and a star, any path below that folder. */
static int path_matches(const char *pattern, const char *path)
{
    size_t n = strlen(pattern);
    if (n >= 2 && strcmp(pattern + n - 2, "/*") == 0)
        return strncmp(pattern, path, n - 1) == 0 && path[n - 1] != '\0';
    return strcmp(pattern, path) == 0;
}

/* The route for (method, path); *path_known tells 404 from 405. */
static const route *find_route(const char *method, const char *path, int *path_known)
{
    *path_known = 0;
    if (method == NULL || path == NULL)
        return NULL;
    for (size_t i = 0; i < N_ROUTES; i++) {
        if (!path_matches(ROUTES[i].path, path))
            continue;
        *path_known = 1;
        if (strcmp(ROUTES[i].method, method) == 0 ||
            (strcmp(method, "HEAD") == 0 && strcmp(ROUTES[i].method, "GET") == 0))
            return &ROUTES[i];
    }
    return NULL;
}

/* The body size cap of route r (NULL: an unknown route's). A single
 * request anyone may send (a signed annotator message, a console sign-in,
 * an unknown route) is under 2 KiB: it gets ANON_BODY_MAX, so that what is
 * read before anything is verified stays small. */
#define ANON_BODY_MAX (16 * 1024)
static size_t route_cap(const lp_api *api, const route *r)
{
    size_t single = api->opts.body_max;
    if ((r == NULL || r->scope == 0) && single > ANON_BODY_MAX)
        single = ANON_BODY_MAX;
    if (r == NULL)
        return single;
    return r->cap == CAP_UPLOAD  ? api->opts.upload_max
           : r->cap == CAP_BATCH ? api->opts.batch_body_max
                                 : single;
}

const char *lp_api_route_name(const lp_api *api, const char *method, const char *path,
                              size_t *body_cap)
{
    int known;
    const route *r = find_route(method, path, &known);
    if (body_cap != NULL)
        *body_cap = route_cap(api, r);
    return r ? r->path : NULL;
}

size_t lp_api_body_cap(const lp_api *api, const char *method, const char *path)
{
    int known;
    return route_cap(api, find_route(method, path, &known));
}

int lp_api_route_at(size_t i, const char **method, const char **path, unsigned *scope)
{
    if (i >= N_ROUTES)
        return 0;
    *method = ROUTES[i].method;
    *path = ROUTES[i].path;
    *scope = ROUTES[i].scope;
    return 1;
}

/* 1 when the server was started to serve route r to callers without a
 * credential (a caller that presents one is still checked). */
static int route_public(const lp_api *api, const route *r)
{
    return (r->id == LP_ROUTE_METRICS && api->opts.public_metrics) ||
           (r->id == LP_ROUTE_SCORE && api->opts.public_score);
}

/* ---- rate limits ---- */

int lp_api_rate_limit(lp_api *api, lp_rate_class cls, lp_rate_key kind, const void *key, size_t len,
                      int take, lp_response *resp)
{
    int64_t wait_ns = 0;
    if (lp_ratelimit_take(api->limits, cls, kind, key, len, take, lp_mono_ns(), &wait_ns))
        return LP_OK;
    int64_t secs = (wait_ns + 999999999) / 1000000000;
    char msg[LP_MSG_MAX];
    snprintf(
        msg, sizeof msg, "too many %s requests %s; retry after %lld s", lp_rate_class_name(cls),
        kind == LP_RATE_ADDRESS ? "from this address" : "with this credential", (long long)secs);
    lp_metrics_rate_limited(cls);
    lp_api_error(resp, LP_ERATE_LIMITED, msg);
    resp->retry_after = secs > INT32_MAX ? INT32_MAX : secs < 1 ? 1 : (int)secs;
    return LP_ERATE_LIMITED;
}

/* The rate-limit class of route r, or -1 when it has none. */
static int route_rate_class(const route *r)
{
    switch (r->id) {
    case LP_ROUTE_SCORE:
    case LP_ROUTE_SCORE_BATCH:
        return LP_RATE_SCORE;
    case LP_ROUTE_ANNOTATORS: /* POST /v1/annotators, enrollment */
        return LP_RATE_ENROLL;
    case LP_ROUTE_TASKS_NEXT:
        return LP_RATE_NEXT;
    default:
        return -1;
    }
}

/* The client address's bucket of class cls (see lp_api_rate_limit). */
static int rate_limit_address(lp_api *api, int cls, const lp_request *req, int take,
                              lp_response *resp)
{
    uint8_t key[LP_RATELIMIT_ADDRESS_KEY_MAX];
    size_t len = lp_ratelimit_address_key(req->client_addr, key);
    return lp_api_rate_limit(api, (lp_rate_class)cls, LP_RATE_ADDRESS, key, len, take, resp);
}

/* The operator credential's bucket of class cls, when there is one. */
static int rate_limit_principal(lp_api *api, int cls, const lp_principal *who, int take,
                                lp_response *resp)
{
    if (who == NULL)
        return LP_OK;
    return lp_api_rate_limit(api, (lp_rate_class)cls, LP_RATE_CREDENTIAL, &who->token_id,
                             sizeof who->token_id, take, resp);
}

/* What an anonymous score request may get (--public-score): LP_OK when the
 * served model was trained on privatized labels only (the handler checks
 * again, with the model it uses), else why not. Without a learner the
 * handler answers. */
static int public_model(lp_api *api)
{
    if (api->learner == NULL)
        return LP_OK;
    lp_served *sv = lp_learner_served(api->learner);
    int rc = sv == NULL                                       ? LP_ENO_ACTIVE_MODEL
             : lp_label_privacy_public(lp_served_privacy(sv)) ? LP_OK
                                                              : LP_EMODEL_NOT_PUBLIC;
    lp_served_unref(sv);
    return rc;
}

/* Authenticates an operator request for route r: a bearer token, or else
 * the console's session cookie, holding the route's scope. LP_OK with *who
 * filled (and *anonymous set for a public route's caller without a
 * credential), or the refusal's code with resp filled. An anonymous score
 * request (--public-score) is refused from its headers alone while the
 * served model is not public; otherwise the handler decides what it may
 * see (score_model in api_learn.c). */
static int authorize(lp_api *api, const route *r, const lp_request *req, lp_principal *who,
                     int *anonymous, lp_response *resp)
{
    *anonymous = req->bearer == NULL && req->cookie == NULL && route_public(api, r);
    if (*anonymous) {
        *who = (lp_principal){0};
        int rc = r->id == LP_ROUTE_SCORE ? public_model(api) : LP_OK;
        if (rc != LP_OK)
            lp_api_error(resp, rc, NULL);
        return rc;
    }
    int rc = req->bearer != NULL || req->cookie == NULL
                 ? lp_auth_operator_check(api->store, req->bearer, who)
                 : lp_console_authorize(api, req, who);
    unsigned need = r->scope & LP_SCOPE_ALL;
    if (rc == LP_OK && (who->scopes & need) != need)
        rc = LP_EINSUFFICIENT_SCOPE;
    if (rc == LP_OK)
        return LP_OK;
    int refusal = rc == LP_EUNAUTHORIZED || rc == LP_ECROSS_SITE || rc == LP_ECSRF_FAILED ||
                  rc == LP_EINSUFFICIENT_SCOPE;
    lp_api_error(resp, refusal ? rc : LP_ESTORAGE, NULL);
    return resp->error;
}

lp_api *lp_api_new(lp_store *store, const lp_api_opts *opts)
{
    lp_api *api = calloc(1, sizeof *api);
    if (api == NULL)
        return NULL;
    api->store = store;
    api->quality_cache = lp_quality_cache_new(api);
    api->opts = *opts;
    if (api->opts.json_depth <= 0)
        api->opts.json_depth = LP_JSON_DEPTH_MAX;
    atomic_init(&api->draining, 0);
    api->started_ms = lp_now_ms();
    api->sessions_opts = (lp_sessions_opts){
        .lifetime_ms = (opts->console_lifetime_s > 0 ? opts->console_lifetime_s : 8 * 3600) * 1000,
        .idle_ms = (opts->console_idle_s > 0 ? opts->console_idle_s : 30 * 60) * 1000,
        .max_live = opts->console_sessions_max > 0 ? opts->console_sessions_max : 32};
    api->sessions = lp_sessions_new(&api->sessions_opts);
    double f = opts->rate_address_factor >= 1 ? opts->rate_address_factor : 1;
    lp_ratelimit_opts ro = {
        .rates = {[LP_RATE_SCORE] = {{opts->score_rate, opts->score_burst},
                                     {opts->score_rate * f, opts->score_burst * f}},
                  [LP_RATE_NEXT] = {{opts->next_rate, opts->next_burst},
                                    {opts->next_rate * f, opts->next_burst * f}},
                  /* enrollment has no credential yet: by address alone */
                  [LP_RATE_ENROLL] = {{0, 0}, {opts->enroll_rate, opts->enroll_burst}}},
        .buckets = opts->rate_buckets};
    api->limits = lp_ratelimit_new(&ro);
    api->audit_gate = lp_audit_gate_new();
    if (api->sessions == NULL || api->limits == NULL || api->audit_gate == NULL) {
        lp_api_free(api);
        return NULL;
    }
    return api;
}

void lp_api_free(lp_api *api)
{
    if (api == NULL)
        return;
    lp_sessions_free(api->sessions);
    lp_ratelimit_free(api->limits);
    lp_quality_cache_free(api->quality_cache);
    lp_audit_gate_free(api->audit_gate);
    free(api);
}

void lp_api_set_learner(lp_api *api, struct lp_learner *learner)
{
    api->learner = learner;
}

void lp_api_set_draining(lp_api *api)
{
    atomic_store(&api->draining, 1);
}

static int audit_kind(const route *r)
{
    return lp_api_audit_kind(r->method, r->path, r->id, r->scope);
}

/* Who a refused operator request was: the token's holder when only the
 * scope was missing, else nobody. */
static const lp_principal *refused_as(int rc, const lp_principal *who)
{
    return rc == LP_EINSUFFICIENT_SCOPE ? who : NULL;
}

/* Runs route r for req; *actor gets the authenticated principal (who) or
 * stays NULL. */
static int run_route(lp_api *api, const route *r, const lp_request *req, const lp_async *async,
                     lp_response *resp, lp_pending **pending, lp_principal *who,
                     const lp_principal **actor)
{
    size_t cap = route_cap(api, r);
    if (req->body_len > cap)
        return lp_api_error(resp, LP_EBODY_TOO_LARGE, NULL);
    /* Rate limits come before any work: the address's bucket first (before
     * the credential is even looked up), then the credential's. The
     * annotator key of tasks/next is in the signed body: lp_api_next takes
     * its token once the signature verifies. */
    int cls = route_rate_class(r);
    if (cls >= 0 && rate_limit_address(api, cls, req, 1, resp) != LP_OK)
        return LP_API_DONE;
    int anonymous = 1;
    if (r->scope != 0) {
        int rc = authorize(api, r, req, who, &anonymous, resp);
        *actor = rc == LP_OK ? (anonymous ? NULL : who) : refused_as(rc, who);
        if (rc != LP_OK)
            return LP_API_DONE;
    }
    lp_request authed = *req;
    authed.principal = anonymous ? NULL : who;
    if (cls >= 0 && rate_limit_principal(api, cls, authed.principal, 1, resp) != LP_OK)
        return LP_API_DONE;
    if (r->fn != NULL)
        return r->fn(api, &authed, resp);
    return lp_api_labels_begin(api, &authed, async, resp, pending, r->id == LP_ROUTE_LABELS_BATCH);
}

int lp_api_begin(lp_api *api, const lp_request *req, const lp_async *async, lp_response *resp,
                 lp_pending **pending)
{
    memset(resp, 0, sizeof *resp);
    *pending = NULL;
    int known;
    const route *r = find_route(req->method, req->path, &known);
    lp_metrics_request(r ? r->id : LP_ROUTE_OTHER);
    if (r == NULL)
        return lp_api_error(resp, known ? LP_EMETHOD_NOT_ALLOWED : LP_ENOT_FOUND, NULL);
    lp_principal who = {0};
    const lp_principal *actor = NULL;
    int kind = audit_kind(r);
    /* A sign-out's session is gone once it has answered. */
    if (kind == LP_AUDIT_SIGN_OUT && lp_console_authorize(api, req, &who) == LP_OK)
        actor = &who;
    int rc = run_route(api, r, req, async, resp, pending, &who, &actor);
    /* Recorded routes are never pending (only the label routes are). */
    if (kind != LP_AUDIT_NONE && rc == LP_API_DONE)
        lp_api_audit_record(api, kind, r->method, r->path, req, 1, r->cap == CAP_UPLOAD, actor,
                            resp);
    return rc;
}

int lp_api_preauth(lp_api *api, const lp_request *req, lp_response *resp)
{
    memset(resp, 0, sizeof *resp);
    int known;
    const route *r = find_route(req->method, req->path, &known);
    lp_principal who;
    if (r == NULL)
        return LP_OK;
    /* The same order as lp_api_begin, looking at the buckets without
     * spending: lp_api_begin takes the tokens. */
    int cls = route_rate_class(r);
    if (cls >= 0 && rate_limit_address(api, cls, req, 0, resp) != LP_OK)
        return resp->error;
    if (r->scope == 0)
        return LP_OK;
    int anonymous;
    if (authorize(api, r, req, &who, &anonymous, resp) != LP_OK) {
        /* lp_api_begin never sees this request: it is recorded here */
        lp_api_audit_record(api, audit_kind(r), r->method, r->path, req, 0, r->cap == CAP_UPLOAD,
                            refused_as(resp->error, &who), resp);
        return resp->error;
    }
    if (cls >= 0 && rate_limit_principal(api, cls, anonymous ? NULL : &who, 0, resp) != LP_OK)
        return resp->error;
    return LP_OK;
}

void lp_api_finish(lp_api *api, lp_pending *pending, lp_response *resp)
{
    memset(resp, 0, sizeof *resp);
    lp_api_labels_finish(api, pending, resp);
}

void lp_api_pending_free(lp_pending *pending)
{
    lp_api_labels_pending_free(pending);
}

/* ---- the synchronous wrapper ---- */

struct sync_wait {
    pthread_mutex_t m;
    pthread_cond_t c;
    int done;
};

static void sync_suspend(void *ctx)
{
    (void)ctx;
}

static void sync_resume(void *ctx)
{
    struct sync_wait *w = ctx;
    pthread_mutex_lock(&w->m);
    w->done = 1;
    pthread_cond_signal(&w->c);
    pthread_mutex_unlock(&w->m);
}

void lp_api_handle(lp_api *api, const lp_request *req, lp_response *resp)
{
    struct sync_wait w = {.done = 0};
    pthread_mutex_init(&w.m, NULL);
    pthread_cond_init(&w.c, NULL);
    lp_async async = {sync_suspend, sync_resume, &w};
    lp_pending *p = NULL;
    if (lp_api_begin(api, req, &async, resp, &p) == LP_API_PENDING) {
        pthread_mutex_lock(&w.m);
        while (!w.done)
            pthread_cond_wait(&w.c, &w.m);
        pthread_mutex_unlock(&w.m);
        lp_api_finish(api, p, resp);
    }
    pthread_cond_destroy(&w.c);
    pthread_mutex_destroy(&w.m);
}

/* See api_internal.h. */
int lp_api_signed_annotator(lp_api *api, const uint8_t key[LP_KEY_BYTES],
                            int (*verify)(const void *msg), const void *msg, int64_t timestamp_ms,
                            lp_annotator *a)
{
    int rc = lp_store_annotator_by_key(api->store, key, a);
    if (rc != LP_OK)
        return rc;
    if (a->revoked)
        return LP_EREVOKED_KEY;
    if (verify(msg) != LP_OK)
        return LP_EBAD_SIGNATURE;
    int64_t skew = timestamp_ms - lp_now_ms();
    if (skew > api->opts.timestamp_window_ms || skew < -api->opts.timestamp_window_ms)
        return LP_ESTALE_TIMESTAMP;
    return LP_OK;
}
