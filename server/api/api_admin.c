/*
 * api_admin.c — operator endpoints: campaigns, enrollment tokens,
 * revocation, task upload, stats, export, metrics. The router (api.c) has
 * already checked the operator token where one is required.
 */
#include "api_internal.h"

#include "annotators.h"
#include "auth.h"
#include "budget.h"
#include "campaigns.h"
#include "clock.h"
#include "error.h"
#include "log.h"
#include "label_cursor.h"
#include "retrain.h"
#include "snapshot.h"
#include "stats.h"
#include "taskfile.h"
#include "tasks.h"
#include "wire.h"

#include <math.h>
#include <sodium.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define ENROLL_TOKENS_MAX 1000

/* ---- campaigns ---- */

static json_t *positive_or_null(double v)
{
    return v > 0 ? json_real(v) : json_null();
}

/* A campaign as on the wire; a central one with what its releases spent
 * (read from s; NULL: left out). */
static json_t *campaign_json(lp_store *s, const lp_campaign *c)
{
    json_t *o = json_pack(
        "{s:I, s:s, s:f, s:f, s:b, s:f, s:o, s:I, s:o, s:s, s:o, s:o, s:o}", "id",
        (json_int_t)c->id, "name", c->name, "epsilon_min", c->epsilon_min, "epsilon_max",
        c->epsilon_max, "allow_infinite", c->allow_infinite, "epsilon_budget", c->epsilon_budget,
        "epsilon_default", lp_json_epsilon(c->epsilon_default), "labels_per_task",
        (json_int_t)c->labels_per_task, "annotator_quota",
        c->annotator_quota > 0 ? json_integer(c->annotator_quota) : json_null(), "trust",
        c->central ? "central" : "local", "release_epsilon", positive_or_null(c->release_epsilon),
        "release_delta", positive_or_null(c->release_delta), "contribution_cap",
        c->contribution_cap > 0 ? json_integer(c->contribution_cap) : json_null());
    double eps = 0, delta = 0;
    if (o != NULL && c->central && s != NULL &&
        lp_store_release_spent(s, c->id, &eps, &delta) == LP_OK) {
        json_object_set_new(o, "release_epsilon_spent", json_real(eps));
        json_object_set_new(o, "release_delta_spent", json_real(delta));
    }
    return o;
}

/* The largest labels_per_task and annotator_quota accepted. */
#define LABELS_PER_TASK_MAX 1000000
#define ANNOTATOR_QUOTA_MAX ((int64_t)1 << 40)

/* labels_per_task (integer >= 1) and annotator_quota (integer >= 1 or
 * null), both optional; LP_EWRONG_TYPE otherwise. */
static int opt_distribution(const json_t *o, lp_campaign *c, char *msg, size_t ml)
{
    int rc = LP_OK;
    if (json_object_get(o, "labels_per_task") != NULL &&
        (rc = lp_json_get_int(o, "labels_per_task", 1, LABELS_PER_TASK_MAX, &c->labels_per_task,
                              msg, ml)) != LP_OK)
        return rc;
    const json_t *q = json_object_get(o, "annotator_quota");
    if (q != NULL && !json_is_null(q))
        rc = lp_json_get_int(o, "annotator_quota", 1, ANNOTATOR_QUOTA_MAX, &c->annotator_quota, msg,
                             ml);
    return rc;
}

/* The largest contribution cap accepted. */
#define CONTRIBUTION_CAP_MAX 1000000

/* release_epsilon (finite > 0) and release_delta (in [0, 1)), each
 * optional, into c; LP_EBAD_CAMPAIGN_SETTINGS otherwise. */
static int opt_release_budget(const json_t *o, lp_campaign *c, char *msg, size_t ml)
{
    const json_t *e = json_object_get(o, "release_epsilon"),
                 *d = json_object_get(o, "release_delta");
    if (e != NULL &&
        (!json_is_number(e) || !isfinite(json_number_value(e)) || !(json_number_value(e) > 0)))
        return lp_fail(LP_EBAD_CAMPAIGN_SETTINGS, msg, ml,
                       "field \"release_epsilon\" must be a finite number > 0");
    if (d != NULL &&
        (!json_is_number(d) || !(json_number_value(d) >= 0) || !(json_number_value(d) < 1)))
        return lp_fail(LP_EBAD_CAMPAIGN_SETTINGS, msg, ml,
                       "field \"release_delta\" must be a number in [0, 1)");
    if (e != NULL)
        c->release_epsilon = json_number_value(e);
    if (d != NULL)
        c->release_delta = json_number_value(d);
    return LP_OK;
}

/* trust, release_epsilon, release_delta and contribution_cap, checked
 * against each other and against the epsilon fields (already in c; given:
 * whether epsilon_default and allow_infinite were in the request).
 * LP_EBAD_CAMPAIGN_SETTINGS names the conflict. */
static int opt_trust(const json_t *o, lp_campaign *c, int default_given, int infinite_given,
                     char *msg, size_t ml)
{
    const json_t *t = json_object_get(o, "trust");
    if (t != NULL && (!json_is_string(t) || (strcmp(json_string_value(t), "local") != 0 &&
                                             strcmp(json_string_value(t), "central") != 0)))
        return lp_fail(LP_EBAD_CAMPAIGN_SETTINGS, msg, ml,
                       "field \"trust\" must be \"local\" or \"central\"");
    c->central = t != NULL && strcmp(json_string_value(t), "central") == 0;
    const json_t *e = json_object_get(o, "release_epsilon"),
                 *d = json_object_get(o, "release_delta");
    c->release_epsilon = c->release_delta = 0;
    int rc = opt_release_budget(o, c, msg, ml);
    if (rc != LP_OK)
        return rc;
    if (json_object_get(o, "contribution_cap") != NULL &&
        (rc = lp_json_get_int(o, "contribution_cap", 1, CONTRIBUTION_CAP_MAX, &c->contribution_cap,
                              msg, ml)) != LP_OK)
        return rc;
    if (c->contribution_cap > 0) { /* the cap is the quota */
        if (c->annotator_quota > 0 && c->annotator_quota != c->contribution_cap)
            return lp_fail(LP_EBAD_CAMPAIGN_SETTINGS, msg, ml,
                           "contribution_cap %lld is the annotator quota: annotator_quota must be "
                           "absent or equal",
                           (long long)c->contribution_cap);
        c->annotator_quota = c->contribution_cap;
    }
    if (c->central) {
        if (!(c->release_epsilon > 0))
            return lp_fail(LP_EBAD_CAMPAIGN_SETTINGS, msg, ml,
                           "a central campaign needs \"release_epsilon\": the finite budget its "
                           "model releases spend");
        if ((default_given && !isinf(c->epsilon_default)) || (infinite_given && !c->allow_infinite))
            return lp_fail(LP_EBAD_CAMPAIGN_SETTINGS, msg, ml,
                           "a central campaign takes true labels: epsilon_default must be null "
                           "or absent and allow_infinite true or absent");
        c->epsilon_default = INFINITY;
        c->allow_infinite = 1;
        return LP_OK;
    }
    if (e != NULL || d != NULL)
        return lp_fail(LP_EBAD_CAMPAIGN_SETTINGS, msg, ml,
                       "release_epsilon and release_delta are the budget of a central campaign's "
                       "model releases: set \"trust\": \"central\"");
    if (c->contribution_cap > 0) { /* the user-level budget spread over m labels */
        double per_label = lp_budget_per_label(c->epsilon_budget, c->contribution_cap);
        if (default_given && !(fabs(c->epsilon_default - per_label) <= LP_BUDGET_SLACK * per_label))
            return lp_fail(LP_EBAD_CAMPAIGN_SETTINGS, msg, ml,
                           "with contribution_cap %lld and epsilon_budget %g the proposed "
                           "epsilon is %g per label: epsilon_default must be absent or equal",
                           (long long)c->contribution_cap, c->epsilon_budget, per_label);
        if (per_label < c->epsilon_min || per_label > c->epsilon_max)
            return lp_fail(LP_EBAD_CAMPAIGN_SETTINGS, msg, ml,
                           "epsilon_budget / contribution_cap = %g per label lies outside "
                           "[epsilon_min, epsilon_max] = [%g, %g]",
                           per_label, c->epsilon_min, c->epsilon_max);
        c->epsilon_default = per_label;
    }
    return LP_OK;
}

/* An optional positive finite number field; LP_EBAD_EPSILON otherwise. */
static int opt_positive(const json_t *o, const char *key, double *v, char *msg, size_t ml)
{
    const json_t *x = json_object_get(o, key);
    if (x == NULL)
        return LP_OK;
    if (!json_is_number(x) || !isfinite(json_number_value(x)) || json_number_value(x) <= 0)
        return lp_fail(LP_EBAD_EPSILON, msg, ml, "field \"%s\" must be a finite number > 0", key);
    *v = json_number_value(x);
    return LP_OK;
}

/* epsilon_default: a positive finite number, or null (+inf: propose no
 * privatization; valid only with allow_infinite, checked by the caller). */
static int opt_default(const json_t *o, double *v, char *msg, size_t ml)
{
    const json_t *x = json_object_get(o, "epsilon_default");
    if (x != NULL && json_is_null(x)) {
        *v = INFINITY;
        return LP_OK;
    }
    return opt_positive(o, "epsilon_default", v, msg, ml);
}

int lp_api_campaign_create(lp_api *api, const lp_request *req, lp_response *resp)
{
    static const char *const fields[] = {"name",
                                         "epsilon_min",
                                         "epsilon_max",
                                         "allow_infinite",
                                         "epsilon_budget",
                                         "epsilon_default",
                                         "labels_per_task",
                                         "annotator_quota",
                                         "trust",
                                         "release_epsilon",
                                         "release_delta",
                                         "contribution_cap",
                                         NULL};
    char msg[LP_MSG_MAX];
    json_t *root = NULL;
    if (lp_api_parse_body(api, req, &root, resp) != LP_OK)
        return LP_API_DONE;
    lp_campaign c = {.epsilon_min = 0.01,
                     .epsilon_max = 10,
                     .epsilon_budget = 1000,
                     .epsilon_default = 1,
                     .labels_per_task = 1};
    const char *name = NULL;
    int rc = LP_OK;
    if (!json_is_object(root))
        rc = lp_fail(LP_EWRONG_TYPE, msg, sizeof msg, "expected a JSON object");
    if (rc == LP_OK)
        rc = lp_json_only_fields(root, fields, msg, sizeof msg);
    if (rc == LP_OK)
        rc = lp_json_get_string(root, "name", LP_CAMPAIGN_NAME_MAX, &name, msg, sizeof msg);
    if (rc == LP_OK && !lp_campaign_name_valid(name, LP_CAMPAIGN_NAME_MAX))
        rc = lp_fail(LP_EWRONG_TYPE, msg, sizeof msg,
                     "field \"name\" must be 1..%d of [A-Za-z0-9._-]", LP_CAMPAIGN_NAME_MAX);
    if (rc == LP_OK &&
        (rc = opt_positive(root, "epsilon_min", &c.epsilon_min, msg, sizeof msg)) == LP_OK &&
        (rc = opt_positive(root, "epsilon_max", &c.epsilon_max, msg, sizeof msg)) == LP_OK &&
        (rc = opt_positive(root, "epsilon_budget", &c.epsilon_budget, msg, sizeof msg)) == LP_OK &&
        (rc = opt_default(root, &c.epsilon_default, msg, sizeof msg)) == LP_OK) {
        const json_t *ai = json_object_get(root, "allow_infinite");
        if (ai != NULL && !json_is_boolean(ai))
            rc = lp_fail(LP_EWRONG_TYPE, msg, sizeof msg,
                         "field \"allow_infinite\" must be a boolean");
        const json_t *trust = json_object_get(root, "trust"); /* central: true by default */
        c.allow_infinite =
            ai != NULL ? json_is_true(ai)
                       : json_is_string(trust) && strcmp(json_string_value(trust), "central") == 0;
        if (rc == LP_OK && isinf(c.epsilon_default) && !c.allow_infinite)
            rc = lp_fail(LP_EBAD_EPSILON, msg, sizeof msg,
                         "epsilon_default may be null (no privatization) only when "
                         "allow_infinite is true");
        if (rc == LP_OK && (c.epsilon_min > c.epsilon_max || c.epsilon_default < c.epsilon_min ||
                            (c.epsilon_default > c.epsilon_max && !isinf(c.epsilon_default))))
            rc = lp_fail(LP_EBAD_EPSILON, msg, sizeof msg,
                         "need epsilon_min <= epsilon_default <= epsilon_max");
    }
    if (rc == LP_OK)
        rc = opt_distribution(root, &c, msg, sizeof msg);
    if (rc == LP_OK)
        rc = opt_trust(root, &c, json_object_get(root, "epsilon_default") != NULL,
                       json_object_get(root, "allow_infinite") != NULL, msg, sizeof msg);
    if (rc == LP_OK)
        snprintf(c.name, sizeof c.name, "%s", name);
    json_decref(root);
    if (rc != LP_OK)
        return lp_api_error(resp, rc, msg);
    if ((rc = lp_store_campaign_create(api->store, &c)) != LP_OK)
        return lp_api_error(resp, rc, NULL);
    return lp_api_json(resp, 201, campaign_json(api->store, &c));
}

int lp_api_campaign_update(lp_api *api, const lp_request *req, lp_response *resp)
{
    static const char *const fields[] = {"name", "release_epsilon", "release_delta", NULL};
    char msg[LP_MSG_MAX] = "";
    json_t *root = NULL;
    if (lp_api_parse_body(api, req, &root, resp) != LP_OK)
        return LP_API_DONE;
    const char *name = NULL;
    lp_campaign c;
    int rc = json_is_object(root)
                 ? LP_OK
                 : lp_fail(LP_EWRONG_TYPE, msg, sizeof msg, "expected a JSON object");
    if (rc == LP_OK)
        rc = lp_json_only_fields(root, fields, msg, sizeof msg);
    if (rc == LP_OK)
        rc = lp_json_get_string(root, "name", LP_CAMPAIGN_NAME_MAX, &name, msg, sizeof msg);
    if (rc == LP_OK && (rc = lp_store_campaign_by_name(api->store, name, &c)) != LP_OK)
        snprintf(msg, sizeof msg, "no campaign named \"%.64s\"", name);
    if (rc == LP_OK && !c.central)
        rc = lp_fail(LP_EBAD_CAMPAIGN_SETTINGS, msg, sizeof msg,
                     "campaign \"%s\" is local: only a central campaign has a release budget",
                     c.name);
    if (rc == LP_OK)
        rc = opt_release_budget(root, &c, msg, sizeof msg);
    double spent_eps = 0, spent_delta = 0;
    if (rc == LP_OK)
        rc = lp_store_release_spent(api->store, c.id, &spent_eps, &spent_delta);
    if (rc == LP_OK) {
        if (c.release_epsilon * (1 + LP_BUDGET_SLACK) < spent_eps ||
            c.release_delta * (1 + LP_BUDGET_SLACK) < spent_delta)
            rc = lp_fail(LP_EBAD_CAMPAIGN_SETTINGS, msg, sizeof msg,
                         "the releases of \"%s\" already spent epsilon %g, delta %g: a budget "
                         "cannot be set below what was spent",
                         c.name, spent_eps, spent_delta);
    }
    json_decref(root);
    if (rc == LP_OK)
        rc = lp_store_campaign_set_budget(api->store, &c);
    if (rc != LP_OK)
        return lp_api_error(resp, rc, msg[0] ? msg : NULL);
    return lp_api_json(resp, 200, campaign_json(api->store, &c));
}

int lp_api_campaign_list(lp_api *api, const lp_request *req, lp_response *resp)
{
    lp_campaign *cs = NULL;
    size_t n = 0;
    int rc = lp_store_campaign_list(api->store, &cs, &n);
    if (rc != LP_OK)
        return lp_api_error(resp, rc, NULL);
    json_t *arr = json_array();
    for (size_t i = 0; i < n && arr; i++)
        json_array_append_new(arr, campaign_json(api->store, &cs[i]));
    free(cs);
    return lp_api_json(resp, 200, json_pack("{s:o}", "campaigns", arr));
}

/* ---- enrollment tokens and revocation ---- */

int lp_api_enroll_tokens(lp_api *api, const lp_request *req, lp_response *resp)
{
    static const char *const fields[] = {"campaign", "count", NULL};
    char msg[LP_MSG_MAX];
    json_t *root = NULL;
    if (lp_api_parse_body(api, req, &root, resp) != LP_OK)
        return LP_API_DONE;
    const char *name = "default";
    int64_t count = 1;
    int rc = json_is_object(root)
                 ? lp_json_only_fields(root, fields, msg, sizeof msg)
                 : lp_fail(LP_EWRONG_TYPE, msg, sizeof msg, "expected a JSON object");
    if (rc == LP_OK && json_object_get(root, "campaign"))
        rc = lp_json_get_string(root, "campaign", LP_CAMPAIGN_NAME_MAX, &name, msg, sizeof msg);
    if (rc == LP_OK && json_object_get(root, "count"))
        rc = lp_json_get_int(root, "count", 1, ENROLL_TOKENS_MAX, &count, msg, sizeof msg);
    lp_campaign c;
    if (rc == LP_OK && (rc = lp_store_campaign_by_name(api->store, name, &c)) != LP_OK)
        snprintf(msg, sizeof msg, "no campaign named \"%.64s\"", name);
    json_decref(root);
    if (rc != LP_OK)
        return lp_api_error(resp, rc, msg);
    char(*tokens)[LP_AUTH_TOKEN_MAX] = calloc((size_t)count, LP_AUTH_TOKEN_MAX);
    uint8_t *hashes = calloc((size_t)count, LP_HASH_BYTES);
    if (tokens == NULL || hashes == NULL) {
        free(tokens);
        free(hashes);
        return lp_api_error(resp, LP_ENO_MEMORY, NULL);
    }
    for (int64_t i = 0; i < count && rc == LP_OK; i++)
        rc = lp_auth_token_new("et_", tokens[i], hashes + i * LP_HASH_BYTES);
    if (rc == LP_OK)
        rc = lp_store_enroll_tokens_add(api->store, c.id, hashes, (size_t)count);
    if (rc == LP_OK) {
        lp_buf b = {0};
        lp_buf_puts(&b, "{\"tokens\":[");
        for (int64_t i = 0; i < count; i++)
            lp_buf_printf(&b, "%s\"%s\"", i ? "," : "", tokens[i]); /* base64url: no escaping */
        lp_buf_puts(&b, "]}");
        lp_api_buf(resp, 201, LP_CT_JSON, &b);
    } else {
        lp_api_error(resp, rc, NULL);
    }
    sodium_memzero(tokens, (size_t)count * LP_AUTH_TOKEN_MAX);
    free(tokens);
    free(hashes);
    return LP_API_DONE;
}

/* {"key": base64url} or {"pseudonym": "ann-..."}: the annotator as its
 * device or as the operator's views name it. */
int lp_api_revoke(lp_api *api, const lp_request *req, lp_response *resp)
{
    static const char *const fields[] = {"key", "pseudonym", NULL};
    char msg[LP_MSG_MAX];
    json_t *root = NULL;
    if (lp_api_parse_body(api, req, &root, resp) != LP_OK)
        return LP_API_DONE;
    uint8_t key[LP_KEY_BYTES];
    const char *pseudonym = NULL;
    int by_key = json_object_get(root, "key") != NULL;
    int rc = json_is_object(root)
                 ? lp_json_only_fields(root, fields, msg, sizeof msg)
                 : lp_fail(LP_EWRONG_TYPE, msg, sizeof msg, "expected a JSON object");
    if (rc == LP_OK && by_key == (json_object_get(root, "pseudonym") != NULL))
        rc = lp_fail(LP_EBAD_REQUEST, msg, sizeof msg,
                     "give the annotator's \"key\" or its \"pseudonym\", not both");
    if (rc == LP_OK)
        rc = by_key ? lp_json_get_bytes(root, "key", key, LP_KEY_BYTES, msg, sizeof msg)
                    : lp_json_get_string(root, "pseudonym", LP_PSEUDONYM_MAX - 1, &pseudonym, msg,
                                         sizeof msg);
    if (rc == LP_OK)
        rc = by_key ? lp_store_revoke(api->store, key)
                    : lp_store_revoke_pseudonym(api->store, pseudonym, key);
    if (rc == LP_EUNKNOWN_KEY && !by_key)
        snprintf(msg, sizeof msg, "no annotator has this pseudonym");
    else if (rc == LP_EUNKNOWN_KEY || rc == LP_ESTORAGE)
        msg[0] = '\0';
    json_decref(root);
    if (rc != LP_OK)
        return lp_api_error(resp, rc, msg);
    lp_annotator a;
    char b64[LP_B64_MAX];
    lp_b64_encode(key, LP_KEY_BYTES, b64);
    if (lp_store_annotator_by_key(api->store, key, &a) != LP_OK)
        a.pseudonym[0] = '\0';
    return lp_api_json(
        resp, 200,
        json_pack("{s:s, s:s, s:b}", "key", b64, "pseudonym", a.pseudonym, "revoked", 1));
}

/* ---- tasks ---- */

int lp_api_tasks_load(lp_api *api, const lp_request *req, lp_response *resp)
{
    char msg[LP_MSG_MAX];
    const char *name = lp_api_param(req, "campaign");
    if (name == NULL)
        name = "default";
    lp_campaign c;
    int rc = lp_store_campaign_by_name(api->store, name, &c);
    if (rc != LP_OK)
        return lp_api_error(resp, rc, NULL);
    lp_taskfile tf;
    rc = lp_taskfile_parse(req->body ? req->body : "", req->body_len, api->opts.json_depth, &tf,
                           msg, sizeof msg);
    if (rc != LP_OK)
        return lp_api_error(resp, rc, msg);
    size_t loaded, skipped;
    int64_t first, last;
    rc = lp_store_tasks_load(api->store, c.id, tf.tasks, tf.n, &loaded, &skipped, &first, &last);
    lp_taskfile_free(&tf);
    if (rc != LP_OK)
        return lp_api_error(resp, rc, NULL);
    json_t *ids = loaded ? json_pack("[I, I]", (json_int_t)first, (json_int_t)last) : json_array();
    return lp_api_json(resp, 200,
                       json_pack("{s:I, s:o, s:I}", "loaded", (json_int_t)loaded, "task_ids", ids,
                                 "skipped_duplicates", (json_int_t)skipped));
}

/* ---- stats and metrics ---- */

/* Retrain counts and durations, the served version, score latency. */
static json_t *learning_json(lp_api *api)
{
    lp_score_latency sl;
    lp_metrics_score_get(&sl);
    double p50 = lp_score_latency_quantile(&sl, 0.5), p99 = lp_score_latency_quantile(&sl, 0.99);
    json_t *score = json_pack("{s:I, s:o, s:o, s:o}", "requests", (json_int_t)sl.count, "mean_s",
                              sl.count ? json_real(sl.sum_s / (double)sl.count) : json_null(),
                              "p50_le_s", isfinite(p50) ? json_real(p50) : json_null(), "p99_le_s",
                              isfinite(p99) ? json_real(p99) : json_null());
    if (api->learner == NULL)
        return json_pack("{s:b, s:o}", "enabled", 0, "score", score);
    lp_learner_stats ls;
    lp_learner_stats_get(api->learner, &ls);
    return json_pack(
        "{s:b, s:{s:I, s:I, s:I}, s:f, s:o, s:o, s:o, s:o}", "enabled", 1, "retrains", "succeeded",
        (json_int_t)ls.runs[LP_RUN_SUCCEEDED], "failed", (json_int_t)ls.runs[LP_RUN_FAILED],
        "cancelled", (json_int_t)ls.runs[LP_RUN_CANCELLED], "retrain_seconds_total",
        ls.train_seconds_total, "last_retrain_seconds",
        isfinite(ls.last_duration_s) ? json_real(ls.last_duration_s) : json_null(),
        "active_model_version", ls.active_version ? json_integer(ls.active_version) : json_null(),
        "running_run", ls.running > 0 ? json_integer(ls.running) : json_null(), "score", score);
}

int lp_api_stats(lp_api *api, const lp_request *req, lp_response *resp)
{
    lp_stats st;
    int rc = lp_store_stats(api->store, &st);
    if (rc != LP_OK)
        return lp_api_error(resp, rc, NULL);
    json_t *per = json_array(), *rej = json_object();
    for (size_t i = 0; i < st.n_campaigns && per; i++) {
        const lp_campaign_count *cc = &st.campaigns[i];
        json_array_append_new(
            per,
            json_pack("{s:s, s:I, s:I, s:I, s:f, s:I, s:o, s:I, s:I}", "name", cc->name, "tasks",
                      (json_int_t)cc->tasks, "annotators", (json_int_t)cc->annotators, "labels",
                      (json_int_t)cc->labels, "epsilon_spent", cc->epsilon_spent, "labels_per_task",
                      (json_int_t)cc->labels_per_task, "annotator_quota",
                      cc->annotator_quota > 0 ? json_integer(cc->annotator_quota) : json_null(),
                      "tasks_complete", (json_int_t)cc->tasks_complete, "labels_needed",
                      (json_int_t)cc->labels_needed));
    }
    for (int code = 1; code < LP_ERROR_COUNT && rej; code++) {
        uint64_t n = lp_metrics_rejects(code);
        if (n)
            json_object_set_new(rej, lp_error_name(code), json_integer((json_int_t)n));
    }
    json_t *o = json_pack("{s:I, s:I, s:I, s:I, s:f, s:o, s:o, s:f}", "tasks", (json_int_t)st.tasks,
                          "annotators", (json_int_t)st.annotators, "labels", (json_int_t)st.labels,
                          "assignments", (json_int_t)st.assignments, "epsilon_spent",
                          st.epsilon_spent, "campaigns", per, "rejects", rej, "uptime_s",
                          (double)(lp_now_ms() - api->started_ms) / 1000.0);
    lp_stats_clear(&st);
    if (o != NULL)
        json_object_set_new(o, "learning", learning_json(api));
    return lp_api_json(resp, 200, o);
}

int lp_api_metrics(lp_api *api, const lp_request *req, lp_response *resp)
{
    lp_store_writer_stats ws;
    lp_store_writer_stats_get(api->store, &ws);
    lp_buf b = {0};
    lp_metrics_render(&b, &ws, (double)(lp_now_ms() - api->started_ms) / 1000.0);
    lp_store_health health;
    lp_store_health_get(api->store, &health);
    lp_metrics_render_storage(&b, &health);
    lp_stats st;
    int have_stats = lp_store_stats(api->store, &st) == LP_OK;
    lp_learner_stats ls;
    if (api->learner != NULL)
        lp_learner_stats_get(api->learner, &ls);
    lp_metrics_render_learning(&b, have_stats ? &st : NULL, api->learner ? &ls : NULL);
    lp_api_quality_metrics(api, &b);
    if (have_stats)
        lp_stats_clear(&st);
    return lp_api_buf(resp, 200, LP_CT_TEXT, &b);
}

/* ---- export (streamed) ---- */

struct export_stream {
    lp_api *api;
    int conversational;      /* format=conversational: turns instead of texts */
    lp_label_cursor *cur;    /* the received labels, or */
    lp_view *view;           /* a model's training view (view=corrupted) */
    lp_corruption *settings; /* the view's, owned */
    lp_served *anti;         /* the view's anti model, owned */
    lp_buf line;
    size_t off; /* bytes of line already handed out */
    int done;
};

static json_t *features_json(const void *blob, size_t dim)
{
    json_t *arr = json_array();
    for (size_t i = 0; i < dim && arr; i++) {
        double v;
        memcpy(&v, (const char *)blob + i * sizeof v, sizeof v);
        json_array_append_new(arr, json_real(v));
    }
    return arr;
}

/* A turn {"role", "content"}. */
static json_t *turn(const char *role, const char *content)
{
    return json_pack("{s:s, s:s}", "role", role, "content", content);
}

/* TRL's conversational form of a row: "prompt" becomes the context turns
 * and the user's prompt, "chosen" and "rejected" one assistant turn each. */
static int conversational(struct export_stream *es, json_t *o, const lp_label_row *r)
{
    json_t *prompt = NULL;
    if (lp_api_context(es->api, r->task_id, &prompt) != LP_OK)
        return -1;
    if (json_array_append_new(prompt, turn(LP_ROLE_USER, r->prompt ? r->prompt : "")) != 0 ||
        json_object_set_new(o, "prompt", prompt) != 0)
        return -1;
    const char *keys[2] = {"chosen", "rejected"};
    for (int k = 0; k < 2; k++) {
        json_t *text = json_object_get(o, keys[k]);
        json_t *list = json_pack("[o]", turn(LP_ROLE_ASSISTANT, json_string_value(text)));
        if (json_object_set_new(o, keys[k], list) != 0)
            return -1;
    }
    return 0;
}

/* The next row of the model view as an export row (oriented by the view's
 * label); *vr keeps the view's own fields. */
static int view_row(struct export_stream *es, lp_label_row *r, lp_view_row *vr)
{
    char msg[LP_MSG_MAX];
    int got = lp_view_next(es->view, vr, msg, sizeof msg);
    if (got < 0)
        lp_log(LP_LOG_ERROR, "export_failed", LP_LOG_STR("message", msg));
    if (got <= 0)
        return got < 0 ? -1 : 0;
    *r = (lp_label_row){.label_id = vr->label_id,
                        .task_id = vr->task_id,
                        .timestamp_ms = vr->timestamp_ms,
                        .received_ms = vr->received_ms,
                        .campaign = vr->campaign_name,
                        .pseudonym = vr->pseudonym,
                        .prompt = vr->prompt,
                        .response0 = vr->response0,
                        .response1 = vr->response1,
                        .z_task = vr->z_view,
                        .epsilon = vr->epsilon,
                        .features0 = vr->blob0,
                        .features1 = vr->blob1,
                        .dim = vr->blob_dim};
    return 1;
}

/* Formats the next row into es->line; 0 at the end, -1 on error. */
static int export_fill(struct export_stream *es)
{
    lp_label_row r;
    lp_view_row vr;
    int got = es->view ? view_row(es, &r, &vr) : lp_label_cursor_next(es->cur, &r);
    if (got <= 0)
        return got < 0 ? -1 : 0;
    /* chosen/rejected follow the privatized label: z_task = 1 means
     * response 1 was reported preferred */
    const char *chosen = r.z_task ? r.response1 : r.response0;
    const char *rejected = r.z_task ? r.response0 : r.response1;
    json_t *o = json_pack("{s:s, s:s, s:s, s:I, s:I, s:s, s:s, s:o, s:i, s:I, s:I}", "prompt",
                          r.prompt ? r.prompt : "", "chosen", chosen ? chosen : "", "rejected",
                          rejected ? rejected : "", "label_id", (json_int_t)r.label_id, "task_id",
                          (json_int_t)r.task_id, "campaign", r.campaign ? r.campaign : "",
                          "annotator", r.pseudonym ? r.pseudonym : "", "epsilon",
                          lp_json_epsilon(r.epsilon), "z", r.z_task, "timestamp",
                          (json_int_t)r.timestamp_ms, "received_at", (json_int_t)r.received_ms);
    if (o != NULL && r.dim > 0) {
        json_object_set_new(o, "chosen_features",
                            features_json(r.z_task ? r.features1 : r.features0, r.dim));
        json_object_set_new(o, "rejected_features",
                            features_json(r.z_task ? r.features0 : r.features1, r.dim));
    }
    if (o != NULL && es->view != NULL) {
        json_object_set_new(o, "corrupted", json_boolean(vr.corrupted));
        json_object_set_new(o, "z_received", json_integer(vr.z));
        json_object_set_new(o, "corruption_id",
                            vr.corruption_id ? json_integer(vr.corruption_id) : json_null());
    }
    if (o != NULL && es->conversational && conversational(es, o, &r) != 0) {
        json_decref(o);
        o = NULL;
    }
    char *text = o ? json_dumps(o, JSON_COMPACT) : NULL;
    json_decref(o);
    if (text == NULL)
        return -1;
    es->line.len = 0;
    lp_buf_puts(&es->line, text);
    lp_buf_puts(&es->line, "\n");
    free(text);
    es->off = 0;
    return es->line.oom ? -1 : 1;
}

static ssize_t export_read(void *ctx, char *buf, size_t max)
{
    struct export_stream *es = ctx;
    size_t n = 0;
    while (n < max) {
        if (es->off == es->line.len) {
            if (es->done)
                break;
            int rc = export_fill(es);
            if (rc < 0)
                return n > 0 ? (ssize_t)n : -1;
            if (rc == 0) {
                es->done = 1;
                break;
            }
        }
        size_t k = es->line.len - es->off;
        if (k > max - n)
            k = max - n;
        memcpy(buf + n, es->line.data + es->off, k);
        es->off += k;
        n += k;
    }
    return (ssize_t)n;
}

static void export_free(void *ctx)
{
    struct export_stream *es = ctx;
    if (es == NULL)
        return;
    lp_label_cursor_close(es->cur);
    lp_view_close(es->view);
    free(es->settings);
    lp_served_unref(es->anti);
    lp_buf_free(&es->line);
    free(es);
}

/* LP_ECENTRAL_LABELS_PRIVATE (msg) when campaign id is a central one: its
 * labels are true answers and never leave the server. */
int lp_api_labels_servable(lp_store *s, int64_t id, char *msg, size_t ml)
{
    lp_campaign c;
    if (id == 0 || lp_store_campaign_by_id(s, id, &c) != LP_OK || !c.central)
        return LP_OK;
    return lp_fail(LP_ECENTRAL_LABELS_PRIVATE, msg, ml,
                   "campaign \"%s\" is central: its labels are the annotators' true answers and "
                   "are never exported or served; only its released models leave the server",
                   c.name);
}

/* The received labels of a campaign (NULL: every local one).
 * LP_EUNKNOWN_CAMPAIGN, LP_ECENTRAL_LABELS_PRIVATE. */
static int export_open(lp_store *s, const char *campaign, lp_label_cursor **out, char *msg,
                       size_t ml)
{
    lp_campaign c = {.id = 0};
    int rc = campaign != NULL ? lp_store_campaign_by_name(s, campaign, &c) : LP_OK;
    if (rc == LP_OK)
        rc = lp_api_labels_servable(s, c.id, msg, ml);
    return rc == LP_OK ? lp_label_cursor_open(s, c.id, 0, out) : rc;
}

int lp_api_export(lp_api *api, const lp_request *req, lp_response *resp)
{
    const char *view = lp_api_param(req, "view"), *version = lp_api_param(req, "version");
    const char *format = lp_api_param(req, "format");
    int corrupted = view != NULL && strcmp(view, "corrupted") == 0;
    int conversational = format != NULL && strcmp(format, "conversational") == 0;
    if (view != NULL && !corrupted && strcmp(view, "clean") != 0)
        return lp_api_error(resp, LP_EBAD_REQUEST, "view must be clean or corrupted");
    if (format != NULL && !conversational && strcmp(format, "standard") != 0)
        return lp_api_error(resp, LP_EBAD_REQUEST, "format must be standard or conversational");
    char *end = NULL;
    long long v = version ? strtoll(version, &end, 10) : 0;
    if (corrupted && (version == NULL || *end != '\0' || v < 1))
        return lp_api_error(resp, LP_EBAD_REQUEST,
                            "view=corrupted needs version=V: the model whose training view to "
                            "export");
    if (corrupted && lp_api_param(req, "campaign") != NULL)
        return lp_api_error(resp, LP_EBAD_REQUEST,
                            "view=corrupted exports the model's own campaign selection");
    struct export_stream *es = calloc(1, sizeof *es);
    if (es == NULL)
        return lp_api_error(resp, LP_ENO_MEMORY, NULL);
    es->api = api;
    es->conversational = conversational;
    int rc;
    char msg[LP_MSG_MAX] = "";
    if (corrupted) {
        lp_view_spec spec;
        rc = lp_api_model_view(api, v, &spec, &es->settings, &es->anti, msg, sizeof msg);
        if (rc == LP_OK)
            rc = lp_api_labels_servable(api->store, spec.campaign, msg, sizeof msg);
        if (rc == LP_OK)
            rc = lp_view_open(api->store, &spec, &es->view, NULL, NULL, msg, sizeof msg);
    } else {
        rc = export_open(api->store, lp_api_param(req, "campaign"), &es->cur, msg, sizeof msg);
    }
    if (rc != LP_OK) {
        export_free(es);
        return lp_api_error(resp, rc, msg[0] ? msg : NULL);
    }
    lp_response_clear(resp);
    resp->status = 200;
    resp->content_type = LP_CT_JSONL;
    resp->stream.read = export_read;
    resp->stream.free = export_free;
    resp->stream.ctx = es;
    return LP_API_DONE;
}
