/*
 * learn.c — the learning calls of libldpref (docs/protocol.md "Learning
 * endpoints"): training runs (start, get, list, cancel, wait), models (list,
 * get, activate), the retraining schedule, server-side corruption settings,
 * and scoring. Operator calls carry the bearer token; scoring carries it
 * when the options have one (a token with the score scope is enough) and
 * goes out anonymously otherwise, which only a server started with
 * --public-score answers (docs/trust-model.md).
 *
 * Requests given as JSON text are checked here before anything is sent
 * (size cap, JSON, nesting depth, an object); the fields themselves are the
 * server's to validate, and its error names come back as codes
 * (lpc_call_json). JSON answers are handed to the caller as text freed
 * with ldpref_free().
 */
#include "internal.h"

#include "adversary.h"
#include "error.h"
#include "wire.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define LPC_TEXT_MAX 65536 /* prompt / candidate text, bytes (protocol cap) */
#define LPC_CORRUPTION_SEED_MAX (UINT64_C(1) << 53)
#define LPC_FEATURE_MAX (INT64_C(1) << 24) /* text featurizer dim cap */
#define LPC_POLL_DEFAULT_MS 500

static void clear_out(char **json_out)
{
    if (json_out)
        *json_out = NULL;
}

/* Parses caller-supplied JSON text that must be an object. what names it
 * in messages. On success *out is a new reference. */
static int parse_object(ldpref_client *c, const char *text, const char *what, json_t **out)
{
    *out = NULL;
    size_t len = strnlen(text, (size_t)LDPREF_REQUEST_MAX + 1);
    if (len > LDPREF_REQUEST_MAX)
        return lpc_fail(c, LDPREF_EBODY_TOO_LARGE, "%s is longer than %d bytes", what,
                        LDPREF_REQUEST_MAX);
    char msg[LP_MSG_MAX];
    int rc = lp_json_parse(text, len, LP_JSON_DEPTH_MAX, out, msg, sizeof msg);
    if (rc != LP_OK)
        return lpc_fail(c, rc, "%s: %s", what, msg);
    if (!json_is_object(*out)) {
        json_decref(*out);
        *out = NULL;
        return lpc_fail(c, LDPREF_EWRONG_TYPE, "%s must be a JSON object", what);
    }
    return LDPREF_OK;
}

/* One operator (bearer) or public exchange whose answer goes to json_out. */
static int exchange(ldpref_client *c, const char *method, const char *path, const json_t *req,
                    int bearer, size_t cap, char **json_out)
{
    json_t *resp = NULL;
    long status = 0;
    int rc = lpc_call_json(c, method, path, req, bearer, cap, &resp, &status);
    if (rc == LDPREF_OK && !json_is_object(resp)) {
        json_decref(resp);
        return lpc_fail(c, LDPREF_EPROTOCOL, "the answer to %s %s is not a JSON object", method,
                        path);
    }
    return rc != LDPREF_OK ? rc : lpc_give_json(c, resp, json_out);
}

/* Parses text (a JSON object from the caller) and sends it as the body. */
static int send_text(ldpref_client *c, const char *method, const char *path, const char *text,
                     const char *what, int bearer, size_t cap, char **json_out)
{
    json_t *req = NULL;
    int rc = parse_object(c, text, what, &req);
    if (rc != LDPREF_OK)
        return rc;
    rc = exchange(c, method, path, req, bearer, cap, json_out);
    json_decref(req);
    return rc;
}

static int check_id(ldpref_client *c, int64_t id, const char *what)
{
    if (id < 1)
        return lpc_fail(c, LDPREF_EINVALID_ARGUMENT, "%s must be >= 1, not %lld", what,
                        (long long)id);
    return LDPREF_OK;
}

int ldpref_admin_retrain(ldpref_client *c, const char *request_json, char **json_out)
{
    clear_out(json_out);
    if (c == NULL)
        return LDPREF_EINVALID_ARGUMENT;
    return send_text(c, "POST", "/v1/retrain", request_json ? request_json : "{}",
                     "the retrain request", 1, LPC_RESP_CAP_SMALL, json_out);
}

int ldpref_admin_run_get(ldpref_client *c, int64_t run, char **json_out)
{
    clear_out(json_out);
    if (c == NULL)
        return LDPREF_EINVALID_ARGUMENT;
    int rc = check_id(c, run, "run");
    if (rc != LDPREF_OK)
        return rc;
    char path[64];
    snprintf(path, sizeof path, "/v1/retrain?run=%lld", (long long)run);
    return exchange(c, "GET", path, NULL, 1, LPC_RESP_CAP_SMALL, json_out);
}

int ldpref_admin_runs(ldpref_client *c, int limit, char **json_out)
{
    clear_out(json_out);
    if (c == NULL)
        return LDPREF_EINVALID_ARGUMENT;
    if (limit < 0 || limit > 1000)
        return lpc_fail(c, LDPREF_EINVALID_ARGUMENT, "limit must be 1..1000 (0: default), not %d",
                        limit);
    char path[64] = "/v1/retrain";
    if (limit > 0)
        snprintf(path, sizeof path, "/v1/retrain?limit=%d", limit);
    return exchange(c, "GET", path, NULL, 1, LPC_RESP_CAP_LARGE, json_out);
}

/* POSTs {"<key>": id} (id >= 1) to an operator path. */
static int post_id(ldpref_client *c, const char *path, const char *key, int64_t id, char **json_out)
{
    clear_out(json_out);
    if (c == NULL)
        return LDPREF_EINVALID_ARGUMENT;
    int rc = check_id(c, id, key);
    if (rc != LDPREF_OK)
        return rc;
    json_t *req = json_pack("{s:I}", key, (json_int_t)id);
    if (req == NULL)
        return lpc_fail(c, LDPREF_ENO_MEMORY, "out of memory");
    rc = exchange(c, "POST", path, req, 1, LPC_RESP_CAP_SMALL, json_out);
    json_decref(req);
    return rc;
}

int ldpref_admin_run_cancel(ldpref_client *c, int64_t run, char **json_out)
{
    return post_id(c, "/v1/retrain/cancel", "run", run, json_out);
}

/* The code a finished run reports: LDPREF_OK when it succeeded, else the
 * code its "error" names, else fallback. Sets the handle's message. */
static int run_outcome(ldpref_client *c, int64_t run, const char *status, const json_t *obj)
{
    if (strcmp(status, "succeeded") == 0)
        return LDPREF_OK;
    int fallback = strcmp(status, "cancelled") == 0 ? LDPREF_ECANCELLED : LDPREF_ETRAINING_FAILED;
    const json_t *err = json_object_get(obj, "error");
    const char *name = json_string_value(json_object_get(err, "error"));
    const char *message = json_string_value(json_object_get(err, "message"));
    int code = name ? lp_error_from_name(name) : -1;
    if (code <= 0)
        code = fallback;
    return lpc_fail(c, code, "run %lld %s: %.64s: %.300s", (long long)run, status,
                    name ? name : lp_error_name(code), message ? message : "");
}

int ldpref_admin_run_wait(ldpref_client *c, int64_t run, long poll_ms,
                          void (*on_progress)(void *ctx, const char *run_json), void *ctx,
                          char **json_out)
{
    clear_out(json_out);
    if (c == NULL)
        return LDPREF_EINVALID_ARGUMENT;
    int rc = check_id(c, run, "run");
    if (rc != LDPREF_OK)
        return rc;
    if (poll_ms == 0)
        poll_ms = LPC_POLL_DEFAULT_MS;
    if (poll_ms < 10 || poll_ms > 3600000)
        return lpc_fail(c, LDPREF_EINVALID_ARGUMENT, "poll_ms must be 10..3600000 (0: %d)",
                        LPC_POLL_DEFAULT_MS);
    for (;;) {
        char *text = NULL;
        if ((rc = ldpref_admin_run_get(c, run, &text)) != LDPREF_OK)
            return rc;
        json_t *obj = NULL;
        const char *status = NULL;
        if (lp_json_parse(text, strlen(text), LP_JSON_DEPTH_MAX, &obj, NULL, 0) != LP_OK ||
            lp_json_get_string(obj, "status", 32, &status, NULL, 0) != LP_OK) {
            json_decref(obj);
            ldpref_free(text);
            return lpc_fail(c, LDPREF_EPROTOCOL, "the run object has no \"status\"");
        }
        if (on_progress)
            on_progress(ctx, text);
        int done = strcmp(status, "succeeded") == 0 || strcmp(status, "failed") == 0 ||
                   strcmp(status, "cancelled") == 0;
        int known = done || strcmp(status, "queued") == 0 || strcmp(status, "snapshot") == 0 ||
                    strcmp(status, "training") == 0 || strcmp(status, "storing") == 0;
        if (!known) {
            rc = lpc_fail(c, LDPREF_EPROTOCOL, "run %lld has an unknown status \"%.32s\"",
                          (long long)run, status);
        } else if (done) {
            rc = run_outcome(c, run, status, obj);
            if (json_out) {
                *json_out = text;
                text = NULL;
            }
        }
        json_decref(obj);
        ldpref_free(text);
        if (!known || done)
            return rc;
        struct timespec ts = {.tv_sec = poll_ms / 1000, .tv_nsec = (poll_ms % 1000) * 1000000L};
        while (nanosleep(&ts, &ts) != 0)
            ;
    }
}

int ldpref_admin_models(ldpref_client *c, char **json_out)
{
    clear_out(json_out);
    if (c == NULL)
        return LDPREF_EINVALID_ARGUMENT;
    return exchange(c, "GET", "/v1/models", NULL, 1, LPC_RESP_CAP_LARGE, json_out);
}

int ldpref_admin_model_get(ldpref_client *c, int64_t version, char **json_out)
{
    clear_out(json_out);
    if (c == NULL)
        return LDPREF_EINVALID_ARGUMENT;
    if (version < 0)
        return lpc_fail(c, LDPREF_EINVALID_ARGUMENT, "version must be >= 1 (0: the active model)");
    char path[64] = "/v1/models?active=1";
    if (version > 0)
        snprintf(path, sizeof path, "/v1/models?version=%lld", (long long)version);
    return exchange(c, "GET", path, NULL, 1, LPC_RESP_CAP_LARGE, json_out);
}

int ldpref_admin_model_activate(ldpref_client *c, int64_t version, char **json_out)
{
    return post_id(c, "/v1/models/activate", "version", version, json_out);
}

int ldpref_admin_schedule_get(ldpref_client *c, char **json_out)
{
    clear_out(json_out);
    if (c == NULL)
        return LDPREF_EINVALID_ARGUMENT;
    return exchange(c, "GET", "/v1/retrain/schedule", NULL, 1, LPC_RESP_CAP_SMALL, json_out);
}

int ldpref_admin_schedule_set(ldpref_client *c, const char *schedule_json, char **json_out)
{
    clear_out(json_out);
    if (c == NULL || schedule_json == NULL)
        return lpc_fail(c, LDPREF_EINVALID_ARGUMENT, "a schedule object is required");
    return send_text(c, "PUT", "/v1/retrain/schedule", schedule_json, "the schedule", 1,
                     LPC_RESP_CAP_SMALL, json_out);
}

void ldpref_corruption_init(ldpref_corruption *s)
{
    memset(s, 0, sizeof *s);
    s->strategy = "flip";
    s->feature = -1;
}

int ldpref_admin_corruption_set(ldpref_client *c, const ldpref_corruption *s, char **json_out)
{
    clear_out(json_out);
    if (c == NULL || s == NULL)
        return lpc_fail(c, LDPREF_EINVALID_ARGUMENT, "corruption settings are required");
    const char *campaign = s->campaign ? s->campaign : "default";
    if (campaign[0] == '\0' || strlen(campaign) > 128)
        return lpc_fail(c, LDPREF_EINVALID_ARGUMENT, "campaign name must be 1..128 bytes");
    if (!(s->alpha >= 0.0 && s->alpha <= 0.5))
        return lpc_fail(c, LDPREF_EBAD_CORRUPTION, "alpha must be in [0, 0.5]");
    lp_adversary strategy;
    if (s->strategy == NULL || lp_adversary_parse(s->strategy, &strategy) != LP_OK)
        return lpc_fail(c, LDPREF_EBAD_CORRUPTION,
                        "strategy must be flip, constant0, constant1, random, anti or backdoor");
    if (s->seed > LPC_CORRUPTION_SEED_MAX)
        return lpc_fail(c, LDPREF_EBAD_CORRUPTION, "seed must be in [0, 2^53]");
    int backdoor = strategy == LP_ADV_BACKDOOR;
    if (s->feature < -1 || s->feature >= LPC_FEATURE_MAX || (backdoor && s->feature < 0))
        return lpc_fail(c, LDPREF_EBAD_CORRUPTION,
                        "feature must be a feature index in [0, 2^24) (backdoor needs one), or -1");
    json_t *req = json_pack("{s:s, s:f, s:s, s:I}", "campaign", campaign, "alpha", s->alpha,
                            "strategy", s->strategy, "seed", (json_int_t)s->seed);
    if (req && s->feature >= 0 &&
        json_object_set_new(req, "feature", json_integer((json_int_t)s->feature)) != 0) {
        json_decref(req);
        req = NULL;
    }
    if (req == NULL)
        return lpc_fail(c, LDPREF_ENO_MEMORY, "out of memory");
    int rc = exchange(c, "PUT", "/v1/corruption", req, 1, LPC_RESP_CAP_SMALL, json_out);
    json_decref(req);
    return rc;
}

int ldpref_admin_corruption_get(ldpref_client *c, const char *campaign, char **json_out)
{
    clear_out(json_out);
    if (c == NULL)
        return LDPREF_EINVALID_ARGUMENT;
    char path[512];
    int rc = lpc_campaign_query(c, "/v1/corruption", campaign, path, sizeof path);
    return rc != LDPREF_OK ? rc : exchange(c, "GET", path, NULL, 1, LPC_RESP_CAP_SMALL, json_out);
}

int ldpref_score(ldpref_client *c, const char *request_json, char **json_out)
{
    clear_out(json_out);
    if (c == NULL || request_json == NULL)
        return lpc_fail(c, LDPREF_EINVALID_ARGUMENT, "a score request object is required");
    return send_text(c, "POST", "/v1/score", request_json, "the score request", LPC_TOKEN_IF_SET,
                     LPC_RESP_CAP_LARGE, json_out);
}

int ldpref_score_batch(ldpref_client *c, const char *body, size_t len, int64_t version, FILE *out)
{
    if (c == NULL || body == NULL || out == NULL)
        return lpc_fail(c, LDPREF_EINVALID_ARGUMENT, "a batch body and an output are required");
    if (len == 0)
        return lpc_fail(c, LDPREF_EINVALID_ARGUMENT, "the batch is empty");
    if (version < 0)
        return lpc_fail(c, LDPREF_EINVALID_ARGUMENT, "version must be >= 1 (0: the active model)");
    char url[LPC_SERVER_MAX + 64];
    int n = snprintf(url, sizeof url, "%s/v1/score/batch", c->server);
    if (version > 0)
        snprintf(url + n, sizeof url - (size_t)n, "?version=%lld", (long long)version);
    lpc_http_req req = {.method = "POST",
                        .url = url,
                        .content_type = "application/x-ndjson",
                        .body = body,
                        .body_len = len,
                        .bearer = c->operator_token[0] ? c->operator_token : NULL,
                        .sink = out,
                        .resp_cap = LPC_RESP_CAP_SMALL};
    long status = 0;
    char *err = NULL;
    size_t err_len = 0;
    int rc = lpc_http_do(c->http, &req, &status, &err, &err_len, c->errmsg, sizeof c->errmsg);
    if (rc == LP_OK && (status < 200 || status >= 300))
        rc = lpc_server_error(c, status, err, err_len);
    free(err);
    if (rc == LDPREF_OK && fflush(out) != 0)
        rc = lpc_fail(c, LDPREF_EIO, "writing the scores: %s", strerror(errno));
    return rc;
}

/* Builds {"prompt", "candidates": [{"text"}...], "version"?}. */
static int score_request(ldpref_client *c, const char *prompt, const char *const *texts, size_t k,
                         int64_t version, json_t **out)
{
    *out = NULL;
    if (prompt == NULL || texts == NULL)
        return lpc_fail(c, LDPREF_EINVALID_ARGUMENT, "prompt and texts are required");
    if (k < 1)
        return lpc_fail(c, LDPREF_EINVALID_ARGUMENT, "at least one candidate is needed");
    if (k > LDPREF_SCORE_CANDIDATES_MAX)
        return lpc_fail(c, LDPREF_ETOO_MANY_CANDIDATES, "at most %d candidates, not %zu",
                        LDPREF_SCORE_CANDIDATES_MAX, k);
    if (version < 0)
        return lpc_fail(c, LDPREF_EINVALID_ARGUMENT, "version must be >= 1 (0: the active model)");
    if (strnlen(prompt, LPC_TEXT_MAX + 1) > LPC_TEXT_MAX)
        return lpc_fail(c, LDPREF_ETOO_LONG, "the prompt is longer than %d bytes", LPC_TEXT_MAX);
    for (size_t i = 0; i < k; i++) {
        if (texts[i] == NULL)
            return lpc_fail(c, LDPREF_EINVALID_ARGUMENT, "texts[%zu] is NULL", i);
        if (strnlen(texts[i], LPC_TEXT_MAX + 1) > LPC_TEXT_MAX)
            return lpc_fail(c, LDPREF_ETOO_LONG, "texts[%zu] is longer than %d bytes", i,
                            LPC_TEXT_MAX);
    }
    json_t *cands = json_array(), *req = json_object();
    int bad = cands == NULL || req == NULL;
    for (size_t i = 0; i < k && !bad; i++) {
        json_t *s = json_string(texts[i]);
        if (s == NULL) {
            json_decref(cands);
            json_decref(req);
            return lpc_fail(c, LDPREF_EINVALID_ARGUMENT, "texts[%zu] is not valid UTF-8", i);
        }
        bad = json_array_append_new(cands, json_pack("{s:o}", "text", s)) != 0;
    }
    json_t *p = bad ? NULL : json_string(prompt);
    if (!bad && p == NULL) {
        json_decref(cands);
        json_decref(req);
        return lpc_fail(c, LDPREF_EINVALID_ARGUMENT, "the prompt is not valid UTF-8");
    }
    if (!bad)
        bad = json_object_set_new(req, "prompt", p) != 0 ||
              json_object_set(req, "candidates", cands) != 0 ||
              (version > 0 &&
               json_object_set_new(req, "version", json_integer((json_int_t)version)) != 0);
    json_decref(cands);
    if (bad) {
        json_decref(req);
        return lpc_fail(c, LDPREF_ENO_MEMORY, "out of memory");
    }
    *out = req;
    return LDPREF_OK;
}

int ldpref_score_texts(ldpref_client *c, const char *prompt, const char *const *texts, size_t k,
                       int64_t version, double *rewards_out, double *probs_out,
                       int64_t *version_out)
{
    if (c == NULL)
        return LDPREF_EINVALID_ARGUMENT;
    json_t *req = NULL, *resp = NULL;
    int rc = score_request(c, prompt, texts, k, version, &req);
    if (rc != LDPREF_OK)
        return rc;
    long status = 0;
    rc = lpc_call_json(c, "POST", "/v1/score", req, LPC_TOKEN_IF_SET, LPC_RESP_CAP_LARGE, &resp,
                       &status);
    json_decref(req);
    if (rc != LDPREF_OK)
        return rc;
    int64_t v = 0;
    const json_t *cands = json_object_get(resp, "candidates");
    if (lp_json_get_int(resp, "model_version", 1, INT64_MAX, &v, NULL, 0) != LP_OK ||
        !json_is_array(cands) || json_array_size(cands) != k) {
        json_decref(resp);
        return lpc_fail(c, LDPREF_EPROTOCOL,
                        "the score answer lacks model_version or %zu candidates", k);
    }
    if (version > 0 && v != version) {
        json_decref(resp);
        return lpc_fail(c, LDPREF_EPROTOCOL, "asked for model %lld, answered by %lld",
                        (long long)version, (long long)v);
    }
    for (size_t i = 0; i < k; i++) {
        const json_t *o = json_array_get(cands, i);
        const json_t *r = json_object_get(o, "reward"), *pr = json_object_get(o, "probability");
        int no_reward = json_is_null(r); /* a general-preference mixture has none */
        if ((!no_reward && (!json_is_number(r) || !isfinite(json_number_value(r)))) ||
            !json_is_number(pr) ||
            !(json_number_value(pr) >= 0.0 && json_number_value(pr) <= 1.0)) {
            json_decref(resp);
            return lpc_fail(c, LDPREF_EPROTOCOL,
                            "candidate %zu of the answer lacks a reward or a probability", i);
        }
    }
    /* Only now that the whole answer is valid, write the outputs. */
    for (size_t i = 0; i < k; i++) {
        const json_t *o = json_array_get(cands, i);
        const json_t *r = json_object_get(o, "reward");
        if (rewards_out)
            rewards_out[i] = json_is_null(r) ? NAN : json_number_value(r);
        if (probs_out)
            probs_out[i] = json_number_value(json_object_get(o, "probability"));
    }
    if (version_out)
        *version_out = v;
    json_decref(resp);
    return LDPREF_OK;
}
