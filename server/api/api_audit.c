/*
 * api_audit.c — what the audit log records of each operator action, and
 * GET /v1/audit. The router calls lp_api_audit_record once a recorded
 * route has answered (or been refused); see api_internal.h for which
 * routes, and server/db/audit.h for the chain.
 */
#include "api_internal.h"

#include "audit.h"
#include "clock.h"
#include "error.h"
#include "views.h"
#include "wire.h"

#include <pthread.h>
#include <sodium.h>
#include <stdlib.h>
#include <string.h>

#define AUDIT_PAGE_DEFAULT 100
#define PREFIX_MAX 1024 /* bytes of params text kept when it is over the cap */
#define REDACTED "[redacted]"
/* Unauthenticated refusals recorded: a burst of GATE_BURST, then one per
 * GATE_INTERVAL_MS; the rest are counted into the next recorded one. */
#define GATE_BURST 60.0
#define GATE_INTERVAL_MS 1000.0

struct lp_audit_gate {
    pthread_mutex_t m;
    double tokens;
    int64_t last_ms; /* monotonic */
    int64_t suppressed;
};

lp_audit_gate *lp_audit_gate_new(void)
{
    lp_audit_gate *g = calloc(1, sizeof *g);
    if (g == NULL)
        return NULL;
    pthread_mutex_init(&g->m, NULL);
    g->tokens = GATE_BURST;
    g->last_ms = lp_mono_ns() / 1000000;
    return g;
}

void lp_audit_gate_free(lp_audit_gate *g)
{
    if (g == NULL)
        return;
    pthread_mutex_destroy(&g->m);
    free(g);
}

/* 1 to record a refusal now, with *suppressed the number
 * not recorded since the last one; 0 to drop it (counted). */
static int gate_pass(lp_audit_gate *g, int64_t now_ms, int64_t *suppressed)
{
    pthread_mutex_lock(&g->m);
    double refill = (double)(now_ms - g->last_ms) / GATE_INTERVAL_MS;
    g->tokens = refill > 0 ? (g->tokens + refill > GATE_BURST ? GATE_BURST : g->tokens + refill)
                           : g->tokens;
    g->last_ms = now_ms > g->last_ms ? now_ms : g->last_ms;
    int pass = g->tokens >= 1.0;
    if (pass) {
        g->tokens -= 1.0;
        *suppressed = g->suppressed;
        g->suppressed = 0;
    } else {
        g->suppressed++;
    }
    pthread_mutex_unlock(&g->m);
    return pass;
}

/* ---- which requests ---- */

int lp_api_audit_kind(const char *method, const char *path, lp_route id, unsigned scope)
{
    if (id == LP_ROUTE_EXPORT)
        return LP_AUDIT_ACTION; /* a read that releases the data */
    if (strcmp(path, "/v1/console/session") == 0)
        return strcmp(method, "POST") == 0     ? LP_AUDIT_SIGN_IN
               : strcmp(method, "DELETE") == 0 ? LP_AUDIT_SIGN_OUT
                                               : LP_AUDIT_NONE;
    /* /v1/score and /v1/score/batch are POSTs that only read. */
    if (scope != 0 && id != LP_ROUTE_SCORE && id != LP_ROUTE_SCORE_BATCH &&
        strcmp(method, "GET") != 0)
        return LP_AUDIT_ACTION;
    return LP_AUDIT_NONE;
}

/* ---- params ---- */

/* 1 for a key whose value is a credential: never recorded. */
static int secret_key(const char *key)
{
    static const char *const exact[] = {"token", "tokens", "secret", "password"};
    static const char *const suffix[] = {"_token", "_tokens", "_secret", "_password"};
    for (size_t i = 0; i < sizeof exact / sizeof exact[0]; i++)
        if (strcmp(key, exact[i]) == 0)
            return 1;
    size_t n = strlen(key);
    for (size_t i = 0; i < sizeof suffix / sizeof suffix[0]; i++) {
        size_t m = strlen(suffix[i]);
        if (n > m && strcmp(key + n - m, suffix[i]) == 0)
            return 1;
    }
    return 0;
}

/* Replaces the value of every secret key, at any depth, by REDACTED. */
static void redact(json_t *v)
{
    if (json_is_array(v)) {
        size_t i;
        json_t *x;
        json_array_foreach(v, i, x) redact(x);
    } else if (json_is_object(v)) {
        const char *k;
        json_t *x;
        json_object_foreach(v, k, x)
        {
            if (secret_key(k))
                json_object_set_new(v, k, json_string(REDACTED));
            else
                redact(x);
        }
    }
}

static void hex_hash(const void *data, size_t len, char out[LP_AUDIT_HEX])
{
    uint8_t h[LP_HASH_BYTES];
    crypto_generichash(h, sizeof h, data, len, NULL, 0);
    sodium_bin2hex(out, LP_AUDIT_HEX, h, sizeof h);
}

/* {"bytes": n, "blake2b": hex} of data. */
static json_t *size_and_hash(const void *data, size_t len)
{
    char hex[LP_AUDIT_HEX];
    hex_hash(data, len, hex);
    return json_pack("{s:I, s:s}", "bytes", (json_int_t)len, "blake2b", hex);
}

/* The request's query parameters and body as a params object: "query"
 * (secret keys redacted), "body" (the JSON with secret keys redacted; an
 * upload's, a body over the JSON cap or one that is not JSON as its size
 * and hash). */
static json_t *params_object(lp_api *api, const lp_request *req, int body_read, int upload)
{
    json_t *o = json_object();
    if (o == NULL)
        return NULL;
    if (req->n_params > 0) {
        json_t *q = json_object();
        for (size_t i = 0; q && i < req->n_params; i++) {
            const char *k = req->params[i].key, *v = req->params[i].value;
            if (k == NULL)
                continue;
            json_t *jv = secret_key(k) ? json_string(REDACTED) : v ? json_string(v) : json_null();
            if (jv == NULL && v != NULL) /* not UTF-8 */
                jv = size_and_hash(v, strlen(v));
            json_object_set_new(q, k, jv);
        }
        json_object_set_new(o, "query", q ? q : json_null());
    }
    if (!body_read || req->body == NULL || req->body_len == 0)
        return o;
    json_t *body = NULL;
    char msg[LP_MSG_MAX];
    int parse = !upload && req->body_len <= api->opts.body_max;
    if (!parse || lp_json_parse(req->body, req->body_len, api->opts.json_depth, &body, msg,
                                sizeof msg) != LP_OK) {
        json_decref(body);
        body = size_and_hash(req->body, req->body_len);
        if (parse && body) /* it was not JSON */
            json_object_set_new(body, "json", json_false());
    } else {
        redact(body);
    }
    json_object_set_new(o, "body", body ? body : json_null());
    return o;
}

/* The params text of o (stolen), at most LP_AUDIT_PARAMS_MAX bytes: over
 * the cap, {"truncated": true, "bytes", "blake2b" (of the whole text),
 * "prefix": its first bytes}. NULL when out of memory. */
static char *params_text(json_t *o)
{
    char *text = o ? json_dumps(o, JSON_COMPACT) : NULL;
    json_decref(o);
    if (text == NULL || strlen(text) <= LP_AUDIT_PARAMS_MAX)
        return text;
    size_t len = strlen(text), cut = PREFIX_MAX;
    while (cut > 0 && ((unsigned char)text[cut] & 0xC0) == 0x80)
        cut--; /* on a UTF-8 character boundary */
    json_t *t = size_and_hash(text, len);
    text[cut] = '\0';
    if (t != NULL) {
        json_object_set_new(t, "truncated", json_true());
        json_object_set_new(t, "prefix", json_string(text));
    }
    free(text);
    text = t ? json_dumps(t, JSON_COMPACT) : NULL;
    json_decref(t);
    return text;
}

/* ---- the record ---- */

/* The principal of a successful sign-in: the token its body carried. */
static int sign_in_principal(lp_api *api, const lp_request *req, lp_principal *who)
{
    json_t *body = NULL;
    char msg[LP_MSG_MAX];
    if (lp_json_parse(req->body, req->body_len, api->opts.json_depth, &body, msg, sizeof msg) !=
        LP_OK)
        return LP_EUNAUTHORIZED;
    const char *token = json_string_value(json_object_get(body, "token"));
    int rc = token ? lp_auth_operator_check(api->store, token, who) : LP_EUNAUTHORIZED;
    json_decref(body);
    return rc;
}

void lp_api_audit_record(lp_api *api, int kind, const char *method, const char *path,
                         const lp_request *req, int body_read, int upload, const lp_principal *who,
                         const lp_response *resp)
{
    lp_principal signed_in;
    if (kind == LP_AUDIT_NONE)
        return;
    if (kind == LP_AUDIT_SIGN_IN && resp->error == 0 && body_read &&
        sign_in_principal(api, req, &signed_in) == LP_OK)
        who = &signed_in;
    /* Refusals from the credential check (no credential, a bad one, or one
     * without the route's scope) are written from the event loop, before
     * the body: the gate bounds how often any caller makes it wait for an
     * audit commit. */
    int refused = who == NULL || resp->error == LP_EINSUFFICIENT_SCOPE;
    int64_t now = lp_now_ms(), suppressed = 0;
    if (refused && !gate_pass(api->audit_gate, lp_mono_ns() / 1000000, &suppressed))
        return;
    json_t *o = params_object(api, req, body_read, upload);
    if (o != NULL && suppressed > 0)
        json_object_set_new(o, "suppressed_refusals", json_integer(suppressed));
    char *params = params_text(o);
    char action[LP_AUDIT_ACTION_MAX + 1];
    snprintf(action, sizeof action, "%s %s", method, path);
    int status = resp->error ? lp_error_http_status(resp->error) : resp->status;
    lp_store_audit_append(api->store, who ? who->token_id : 0, action, params ? params : "{}",
                          status, resp->error ? lp_error_name(resp->error) : "", now, NULL);
    free(params);
}

/* ---- GET /v1/audit ---- */

static json_t *hex_json(const uint8_t h[LP_HASH_BYTES])
{
    char hex[LP_AUDIT_HEX];
    sodium_bin2hex(hex, sizeof hex, h, LP_HASH_BYTES);
    return json_string(hex);
}

static json_t *row_json(const lp_audit_row *r)
{
    json_t *params = json_loads(r->params, 0, NULL);
    return json_pack("{s:I, s:I, s:I, s:s, s:o, s:I, s:o, s:o, s:o}", "id", (json_int_t)r->id,
                     "at_ms", (json_int_t)r->at_ms, "token_id", (json_int_t)r->token_id, "action",
                     r->action, "params", params ? params : json_string(r->params), "status",
                     (json_int_t)r->status, "error",
                     r->error[0] ? json_string(r->error) : json_null(), "prev_hash",
                     hex_json(r->prev_hash), "hash", hex_json(r->hash));
}

int lp_api_audit_list(lp_api *api, const lp_request *req, lp_response *resp)
{
    char msg[LP_MSG_MAX] = "";
    int64_t after = 0, limit = AUDIT_PAGE_DEFAULT;
    int rc = lp_api_int_param(req, "after_id", 0, INT64_C(999999999999999999), &after, LP_EBAD_PAGE,
                              msg, sizeof msg);
    if (rc == LP_OK)
        rc = lp_api_int_param(req, "limit", 1, LP_PAGE_MAX, &limit, LP_EBAD_PAGE, msg, sizeof msg);
    if (rc != LP_OK)
        return lp_api_error(resp, rc, msg);
    lp_audit_row *rows = NULL;
    size_t n = 0;
    lp_audit_head head;
    if ((rc = lp_store_audit_page(api->store, after, limit, &rows, &n, &head)) != LP_OK)
        return lp_api_error(resp, rc, NULL);
    json_t *arr = json_array();
    for (size_t i = 0; i < n && arr != NULL; i++)
        if (json_array_append_new(arr, row_json(&rows[i])) != 0) {
            json_decref(arr);
            arr = NULL;
        }
    lp_audit_rows_free(rows, n);
    if (arr == NULL)
        return lp_api_error(resp, LP_ENO_MEMORY, NULL);
    return lp_api_json(resp, 200,
                       json_pack("{s:o, s:I, s:o, s:I, s:I}", "entries", arr, "head_id",
                                 (json_int_t)head.id, "head_hash", hex_json(head.hash), "after_id",
                                 (json_int_t)after, "limit", (json_int_t)limit));
}
