/*
 * api_learn.c — the learning endpoints: retrain runs, schedule, models,
 * activation, score, corruption settings, and the corrupted export view
 * (docs/protocol.md, "Learning endpoints"). The router (api.c) has checked
 * the operator token where one is required (score: see score_model); every handler answers
 * `unavailable` when the server runs without a learner.
 */
#include "api_internal.h"

#include "auth.h"
#include "campaigns.h"
#include "clock.h"
#include "confidence.h"
#include "error.h"
#include "log.h"
#include "retrain.h"
#include "score_parse.h"
#include "taskfile.h"
#include "tasks.h"
#include "train_request.h"
#include "wire.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define SCORE_TASKS_MAX 1000
#define RUNS_LIST_MAX 1000

static int no_learner(lp_response *resp)
{
    return lp_api_error(resp, LP_EUNAVAILABLE, "this server runs without a learner");
}

static json_t *int_or_null(int64_t v)
{
    return v ? json_integer((json_int_t)v) : json_null();
}

static json_t *real_or_null(double v)
{
    return isfinite(v) ? json_real(v) : json_null();
}

/* Parses a stored model artifact (JSON text); an empty object if it does
 * not parse. */
static json_t *artifact_json(const char *text)
{
    json_t *j = text ? json_loads(text, 0, NULL) : NULL;
    return j ? j : json_object();
}

/* A stored request as its normalized JSON; an empty object if the record
 * cannot be read. */
static json_t *settings_json(const lp_train_settings *t)
{
    lp_train_request r;
    json_t *j = lp_train_request_from_settings(t, &r) == LP_OK ? lp_train_request_json(&r) : NULL;
    return j ? j : json_object();
}

/* A query parameter as a positive integer; 0 if absent; -1 if malformed. */
static int64_t param_id(const lp_request *req, const char *key)
{
    const char *v = lp_api_param(req, key);
    if (v == NULL)
        return 0;
    char *end;
    long long x = strtoll(v, &end, 10);
    return *v != '\0' && *end == '\0' && x > 0 ? (int64_t)x : -1;
}

int64_t lp_api_param_id(const lp_request *req, const char *key)
{
    return param_id(req, key);
}

/* ---- runs ---- */

/* A training curve: [{"iteration", "evaluations", "objective", "grad_norm",
 * "t_ms"}] (grad_norm null where the optimizer reports none). */
static json_t *curve_json(const lp_curve_point *pts, size_t n)
{
    json_t *arr = json_array();
    for (size_t k = 0; k < n && arr != NULL; k++)
        json_array_append_new(arr, json_pack("{s:i, s:i, s:f, s:o, s:I}", "iteration",
                                             pts[k].iteration, "evaluations", pts[k].evaluations,
                                             "objective", pts[k].objective, "grad_norm",
                                             real_or_null(pts[k].grad_norm), "t_ms",
                                             (json_int_t)pts[k].t_ms));
    return arr;
}

static json_t *run_json(const lp_run *r)
{
    json_t *err = json_null();
    if (r->error != 0)
        err = json_pack("{s:s, s:s}", "error", lp_error_name(r->error), "message",
                        r->message[0] ? r->message : lp_error_message(r->error));
    return json_pack("{s:I, s:s, s:s, s:o, s:I, s:o, s:o, s:o, s:I, "
                     "s:{s:i, s:i, s:o, s:o}, s:o, s:o}",
                     "run", (json_int_t)r->id, "status", lp_run_status_name(r->status), "trigger",
                     r->trigger, "request", settings_json(&r->settings), "created_at",
                     (json_int_t)r->created_ms, "started_at", int_or_null(r->started_ms),
                     "finished_at", int_or_null(r->finished_ms), "cutoff", int_or_null(r->cutoff),
                     "labels", (json_int_t)r->labels, "progress", "iteration", r->iterations,
                     "evaluations", r->evaluations, "objective", real_or_null(r->objective),
                     "grad_norm", real_or_null(r->grad_norm), "model_version",
                     int_or_null(r->model_version), "error", err);
}

int lp_api_retrain_start(lp_api *api, const lp_request *req, lp_response *resp)
{
    if (api->learner == NULL)
        return no_learner(resp);
    json_t *root = NULL;
    if (req->body_len > 0 && lp_api_parse_body(api, req, &root, resp) != LP_OK)
        return LP_API_DONE;
    lp_train_request tr;
    char msg[LP_MSG_MAX];
    int rc =
        lp_train_request_parse(api->store, root, api->opts.train_threads, &tr, msg, sizeof msg);
    json_decref(root);
    if (rc != LP_OK)
        return lp_api_error(resp, rc, msg);
    lp_run run;
    if ((rc = lp_learner_start(api->learner, &tr, "manual", &run)) != LP_OK)
        return lp_api_error(resp, rc, NULL);
    lp_log(LP_LOG_INFO, "retrain_queued", LP_LOG_STR("request_id", req->request_id),
           LP_LOG_INT("run", run.id), LP_LOG_STR("trigger", run.trigger));
    return lp_api_json(resp, 202, run_json(&run));
}

int lp_api_retrain_get(lp_api *api, const lp_request *req, lp_response *resp)
{
    if (api->learner == NULL)
        return no_learner(resp);
    int64_t id = param_id(req, "run");
    if (id < 0)
        return lp_api_error(resp, LP_EBAD_REQUEST, "run must be a positive integer");
    lp_run run;
    int rc;
    if (id > 0) { /* one run, with its curve */
        lp_curve_point *pts;
        size_t n;
        if ((rc = lp_learner_run_curve(api->learner, id, &run, &pts, &n)) != LP_OK)
            return lp_api_error(resp, rc, NULL);
        json_t *j = run_json(&run);
        if (j != NULL)
            json_object_set_new(j, "curve", curve_json(pts, n));
        free(pts);
        return lp_api_json(resp, 200, j);
    }
    int64_t limit = param_id(req, "limit");
    if (limit < 0 || limit > RUNS_LIST_MAX)
        return lp_api_error(resp, LP_EBAD_REQUEST, "limit must be 1..1000");
    lp_run *runs;
    size_t n;
    if ((rc = lp_registry_run_list(api->store, limit ? (size_t)limit : 20, &runs, &n)) != LP_OK)
        return lp_api_error(resp, rc, NULL);
    json_t *arr = json_array();
    for (size_t i = 0; i < n; i++) {
        /* the active run's live progress is in memory */
        if (!lp_run_status_final(runs[i].status) &&
            lp_learner_run_get(api->learner, runs[i].id, &run) == LP_OK)
            json_array_append_new(arr, run_json(&run));
        else
            json_array_append_new(arr, run_json(&runs[i]));
    }
    free(runs);
    return lp_api_json(resp, 200, json_pack("{s:o}", "runs", arr));
}

/* Parses a body {"<key>": positive integer} with no other field. */
static int body_id(lp_api *api, const lp_request *req, const char *key, int64_t *id,
                   lp_response *resp)
{
    json_t *root = NULL;
    if (lp_api_parse_body(api, req, &root, resp) != LP_OK)
        return -1;
    const char *const fields[] = {key, NULL};
    char msg[LP_MSG_MAX];
    int rc = json_is_object(root) ? LP_OK
                                  : lp_fail(LP_EWRONG_TYPE, msg, sizeof msg, "expected an object");
    if (rc == LP_OK)
        rc = lp_json_only_fields(root, fields, msg, sizeof msg);
    if (rc == LP_OK)
        rc = lp_json_get_int(root, key, 1, INT64_MAX, id, msg, sizeof msg);
    json_decref(root);
    if (rc != LP_OK) {
        lp_api_error(resp, rc, msg);
        return -1;
    }
    return 0;
}

int lp_api_retrain_cancel(lp_api *api, const lp_request *req, lp_response *resp)
{
    if (api->learner == NULL)
        return no_learner(resp);
    int64_t id;
    if (body_id(api, req, "run", &id, resp) != 0)
        return LP_API_DONE;
    lp_run run;
    int rc = lp_learner_cancel(api->learner, id, &run);
    if (rc != LP_OK)
        return lp_api_error(
            resp, rc,
            rc == LP_ERETRAIN_IN_PROGRESS
                ? "the run trains on another server of this database: cancel it there"
                : NULL);
    return lp_api_json(resp, 200, run_json(&run));
}

/* ---- schedule ---- */

static int schedule_reply(lp_api *api, lp_response *resp)
{
    lp_schedule sc;
    int rc = lp_registry_schedule_get(api->store, &sc);
    if (rc != LP_OK)
        return lp_api_error(resp, rc, NULL);
    /* a scheduled run always trains up to the newest label; its campaign is
     * shown when it has one */
    json_t *request = sc.has_settings ? settings_json(&sc.settings) : json_object();
    json_object_del(request, "cutoff");
    if (sc.settings.campaign == 0)
        json_object_del(request, "campaign");
    return lp_api_json(resp, 200,
                       json_pack("{s:I, s:I, s:o}", "interval_s", (json_int_t)sc.interval_s,
                                 "every_labels", (json_int_t)sc.every_labels, "request", request));
}

int lp_api_schedule_get(lp_api *api, const lp_request *req, lp_response *resp)
{
    if (api->learner == NULL)
        return no_learner(resp);
    return schedule_reply(api, resp);
}

int lp_api_schedule_put(lp_api *api, const lp_request *req, lp_response *resp)
{
    if (api->learner == NULL)
        return no_learner(resp);
    static const char *const fields[] = {"interval_s", "every_labels", "request", NULL};
    json_t *root = NULL;
    if (lp_api_parse_body(api, req, &root, resp) != LP_OK)
        return LP_API_DONE;
    char msg[LP_MSG_MAX];
    lp_schedule sc = {0};
    int rc = json_is_object(root) ? LP_OK
                                  : lp_fail(LP_EWRONG_TYPE, msg, sizeof msg, "expected an object");
    if (rc == LP_OK)
        rc = lp_json_only_fields(root, fields, msg, sizeof msg);
    if (rc == LP_OK && json_object_get(root, "interval_s") != NULL)
        rc = lp_json_get_int(root, "interval_s", 0, 365LL * 86400, &sc.interval_s, msg, sizeof msg);
    if (rc == LP_OK && json_object_get(root, "every_labels") != NULL)
        rc =
            lp_json_get_int(root, "every_labels", 0, 1000000000, &sc.every_labels, msg, sizeof msg);
    const json_t *rq = json_object_get(root, "request");
    lp_train_request tr;
    if (rc == LP_OK && rq != NULL && json_is_object(rq) && json_object_get(rq, "cutoff") != NULL)
        rc = lp_fail(LP_EBAD_HYPERPARAMETER, msg, sizeof msg,
                     "a scheduled run always trains up to the newest label: no \"cutoff\"");
    if (rc == LP_OK)
        rc = lp_train_request_parse(api->store, rq, api->opts.train_threads, &tr, msg, sizeof msg);
    if (rc == LP_OK) {
        sc.has_settings = 1;
        lp_train_settings_from_request(&tr, &sc.settings);
        rc = lp_registry_schedule_set(api->store, &sc);
    }
    json_decref(root);
    if (rc != LP_OK)
        return lp_api_error(resp, rc, msg[0] ? msg : NULL);
    lp_learner_schedule_changed(api->learner);
    return schedule_reply(api, resp);
}

/* ---- models ---- */

/* ---- corruption settings ---- */

/* One corruption settings record. recorded_in NULL: the settings in force
 * (GET/PUT /v1/corruption: feature only for backdoor; id 0 is "none in
 * force"); else as recorded with that model (feature always, and for anti
 * the model it asked). */
static json_t *corruption_json(const lp_corruption *c, const char *campaign,
                               const lp_model_view *recorded_in)
{
    if (c->id == 0 && recorded_in == NULL)
        return json_pack("{s:n, s:s, s:f, s:n, s:n, s:n}", "id", "campaign", campaign, "alpha", 0.0,
                         "strategy", "seed", "feature");
    int with_feature = recorded_in != NULL || c->strategy == LP_ADV_BACKDOOR;
    json_t *o = json_pack("{s:I, s:s, s:f, s:s, s:I, s:o, s:I}", "id", (json_int_t)c->id,
                          "campaign", campaign, "alpha", c->alpha, "strategy",
                          lp_adversary_name(c->strategy), "seed", (json_int_t)c->seed, "feature",
                          with_feature ? json_integer(c->feature) : json_null(), "created_at",
                          (json_int_t)c->created_ms);
    if (o != NULL && recorded_in != NULL && c->strategy == LP_ADV_ANTI)
        json_object_set_new(o, "anti_model", int_or_null(recorded_in->anti_model));
    return o;
}

/* ---- models ---- */

/* A field of a model's summary (new reference), null if it is missing. */
static json_t *summary_field(const json_t *summary, const char *key)
{
    json_t *v = json_object_get(summary, key);
    return v ? json_incref(v) : json_null();
}

/* The privacy of a model's training labels: null when unknown (a model
 * trained before the record existed: never served anonymously); epsilons
 * null where there is none (bounds) or infinite (per annotator), as a
 * label's unprivatized epsilon is null. */
static json_t *privacy_json(const lp_model_view *m)
{
    const lp_label_privacy *p = &m->privacy;
    if (!p->known)
        return json_null();
    /* user_level_epsilon: what the labels cost the annotator who spent the
     * most on them (basic composition); a release's own guarantee is in
     * "release" */
    return json_pack(
        "{s:I, s:I, s:I, s:b, s:o, s:o, s:o, s:o, s:b, s:o, s:o, s:o}", "labels",
        (json_int_t)p->labels, "annotators", (json_int_t)p->annotators, "unprivatized_labels",
        (json_int_t)p->unprivatized, "privatized", lp_label_privacy_all_privatized(p),
        "epsilon_min", real_or_null(p->epsilon_min), "epsilon_max", real_or_null(p->epsilon_max),
        "epsilon_per_annotator", real_or_null(p->epsilon_per_annotator), "user_level_epsilon",
        real_or_null(p->epsilon_per_annotator), "public", lp_label_privacy_public(p), "mechanism",
        m->mechanism[0] ? json_string(m->mechanism) : json_null(), "release_epsilon",
        m->mechanism[0] ? json_real(m->release_epsilon) : json_null(), "release_delta",
        m->mechanism[0] ? json_real(m->release_delta) : json_null());
}

/* A model object: its provenance (campaign, cut-off, feature plan,
 * corruption) from the view; link, beta, hyper and metrics from the model
 * artifact. */
static json_t *model_json(const lp_model_view *m, int64_t active, int with_model)
{
    json_t *summary = artifact_json(m->summary), *corruption = json_array();
    for (size_t k = 0; k < m->n_corruption; k++)
        json_array_append_new(
            corruption, corruption_json(&m->corruption[k], m->corruption[k].campaign_name, m));
    json_t *o =
        json_pack("{s:I, s:I, s:I, s:s, s:o, s:o, s:o, s:I, s:I, s:o, s:o, s:o, "
                  "s:o, s:I, s:b}",
                  "version", (json_int_t)m->version, "created_at", (json_int_t)m->created_ms, "run",
                  (json_int_t)m->run, "loss", lp_loss_name(m->loss), "link",
                  summary_field(summary, "link"), "beta", summary_field(summary, "beta"),
                  "campaign", m->campaign ? json_string(m->campaign_name) : json_null(), "cutoff",
                  (json_int_t)m->cutoff, "labels", (json_int_t)m->labels, "features",
                  lp_model_features_json(m->features == LP_FEATURES_TEXT, &m->text, m->dim),
                  "hyper", summary_field(summary, "hyper"), "corruption", corruption, "metrics",
                  summary_field(summary, "metrics"), "duration_ms", (json_int_t)m->duration_ms,
                  "active", m->version == active);
    if (o != NULL) {
        json_object_set_new(o, "validation", summary_field(summary, "validation"));
        json_object_set_new(o, "privacy", privacy_json(m));
        json_object_set_new(o, "release", summary_field(summary, "release"));
    }
    json_decref(summary);
    if (o != NULL && with_model)
        json_object_set_new(o, "model", artifact_json(m->model));
    return o;
}

static int64_t active_version(lp_api *api)
{
    lp_served *sv = lp_learner_served(api->learner);
    int64_t v = sv ? lp_served_version(sv) : 0;
    lp_served_unref(sv);
    return v;
}

int lp_api_models_get(lp_api *api, const lp_request *req, lp_response *resp)
{
    if (api->learner == NULL)
        return no_learner(resp);
    int64_t active = active_version(api);
    int64_t version = param_id(req, "version");
    const char *want_active = lp_api_param(req, "active");
    if (version < 0)
        return lp_api_error(resp, LP_EBAD_REQUEST, "version must be a positive integer");
    if (want_active != NULL && strcmp(want_active, "1") == 0) {
        if (active == 0)
            return lp_api_error(resp, LP_ENO_ACTIVE_MODEL, NULL);
        version = active;
    }
    int rc;
    if (version > 0) {
        lp_model_view m;
        if ((rc = lp_learner_model_get(api->learner, version, &m)) != LP_OK)
            return lp_api_error(resp, rc, NULL);
        lp_curve_point *pts;
        size_t n;
        rc = lp_registry_curve_get(api->store, m.run, &pts, &n);
        json_t *j = rc == LP_OK ? model_json(&m, active, 1) : NULL;
        lp_model_view_clear(&m);
        if (rc != LP_OK)
            return lp_api_error(resp, rc, NULL);
        if (j != NULL)
            json_object_set_new(j, "curve", curve_json(pts, n)); /* of the run that trained it */
        free(pts);
        return lp_api_json(resp, 200, j);
    }
    lp_model_view *ms;
    size_t n;
    if ((rc = lp_learner_model_list(api->learner, &ms, &n)) != LP_OK)
        return lp_api_error(resp, rc, NULL);
    json_t *arr = json_array();
    for (size_t i = 0; i < n; i++) {
        json_array_append_new(arr, model_json(&ms[i], active, 0));
        lp_model_view_clear(&ms[i]);
    }
    free(ms);
    return lp_api_json(
        resp, 200, json_pack("{s:o, s:o}", "models", arr, "active_version", int_or_null(active)));
}

int lp_api_models_activate(lp_api *api, const lp_request *req, lp_response *resp)
{
    if (api->learner == NULL)
        return no_learner(resp);
    int64_t version;
    if (body_id(api, req, "version", &version, resp) != 0)
        return LP_API_DONE;
    lp_served *was = lp_learner_served(api->learner);
    int64_t previous = was ? lp_served_version(was) : 0;
    lp_served_unref(was);
    int rc = lp_learner_activate(api->learner, version);
    if (rc != LP_OK)
        return lp_api_error(resp, rc, NULL);
    /* who: the request (its line has the client); nothing of the credential */
    lp_log(LP_LOG_INFO, "model_activated", LP_LOG_INT("version", version),
           LP_LOG_INT("previous", previous), LP_LOG_STR("by", "operator"),
           LP_LOG_STR("request_id", req->request_id));
    lp_model_view m;
    if ((rc = lp_learner_model_get(api->learner, version, &m)) != LP_OK)
        return lp_api_error(resp, rc, NULL);
    json_t *j = model_json(&m, version, 0);
    lp_model_view_clear(&m);
    return lp_api_json(resp, 200, j);
}

/* ---- score ---- */

typedef struct score_item {
    const char *prompt, *text;
    double *dense; /* owned */
    size_t dim;
    double log_ref;
    int has_ref;
} score_item;

/* A candidate object: {"text"?, "features"?, "ref_logprob"?}. */
static int parse_candidate(const json_t *c, size_t i, score_item *it, char *msg, size_t msglen)
{
    static const char *const fields[] = {"text", "features", "ref_logprob", NULL};
    if (!json_is_object(c))
        return lp_fail(LP_EWRONG_TYPE, msg, msglen, "candidates[%zu] must be an object", i);
    int rc = lp_json_only_fields(c, fields, msg, msglen);
    if (rc != LP_OK)
        return rc;
    const json_t *t = json_object_get(c, "text");
    if (t != NULL && !json_is_string(t))
        return lp_fail(LP_EWRONG_TYPE, msg, msglen, "candidates[%zu].text must be a string", i);
    if (t != NULL && json_string_length(t) > LP_TASK_TEXT_MAX)
        return lp_fail(LP_ETOO_LONG, msg, msglen, "candidates[%zu].text is too long", i);
    it->text = t ? json_string_value(t) : NULL;
    const json_t *f = json_object_get(c, "features");
    if (f != NULL) {
        if (!json_is_array(f) || json_array_size(f) > LP_FEATURES_MAX)
            return lp_fail(LP_EWRONG_TYPE, msg, msglen,
                           "candidates[%zu].features must be an array of at most %d numbers", i,
                           LP_FEATURES_MAX);
        it->dim = json_array_size(f);
        it->dense = malloc((it->dim ? it->dim : 1) * sizeof *it->dense);
        if (it->dense == NULL)
            return lp_fail(LP_ENO_MEMORY, msg, msglen, "out of memory");
        for (size_t j = 0; j < it->dim; j++) {
            const json_t *x = json_array_get(f, j);
            if (!json_is_number(x) || !isfinite(json_number_value(x)))
                return lp_fail(LP_EWRONG_TYPE, msg, msglen,
                               "candidates[%zu].features[%zu] must be a finite number", i, j);
            it->dense[j] = json_number_value(x);
        }
    }
    const json_t *r = json_object_get(c, "ref_logprob");
    if (r != NULL) {
        if (!json_is_number(r) || !isfinite(json_number_value(r)))
            return lp_fail(LP_EWRONG_TYPE, msg, msglen,
                           "candidates[%zu].ref_logprob must be a finite number", i);
        it->log_ref = json_number_value(r);
        it->has_ref = 1;
    }
    return LP_OK;
}

/* log(pi_k / pi_ref,k) as JSON: null where pi_k underflowed to 0. */
static json_t *log_ratio_json(double pi, double log_ref)
{
    double x = log(pi) - log_ref;
    return isfinite(x) ? json_real(x) : json_null();
}

/* A general model's mixture over K items (features f[K]), appended to arr:
 * no rewards; probability, log_ratio, win_probability. */
static int score_mixture(lp_served *sv, const score_item *items, const lp_sparse *f, size_t K,
                         json_t *arr, char *msg, size_t msglen)
{
    double *lr = calloc(K, sizeof *lr), *pi = calloc(K, sizeof *pi), *win = calloc(K, sizeof *win);
    int rc = lr && pi && win ? LP_OK : lp_fail(LP_ENO_MEMORY, msg, msglen, "out of memory");
    int all_ref = 1;
    double mx = -INFINITY, z = 0.0;
    for (size_t k = 0; k < K; k++) {
        all_ref &= items[k].has_ref;
        mx = fmax(mx, items[k].log_ref);
    }
    for (size_t k = 0; k < K && lr; k++)
        z += exp(items[k].log_ref - mx);
    for (size_t k = 0; k < K && lr; k++) /* normalized over the candidates */
        lr[k] = all_ref ? items[k].log_ref - mx - log(z) : -log((double)K);
    if (rc == LP_OK && lp_served_mixture(sv, f, all_ref ? lr : NULL, K, pi, win) != LP_OK)
        rc = lp_fail(LP_EINTERNAL, msg, msglen, "the mixture could not be computed");
    for (size_t k = 0; k < K && rc == LP_OK; k++)
        json_array_append_new(arr, json_pack("{s:n, s:f, s:o, s:f}", "reward", "probability", pi[k],
                                             "log_ratio", log_ratio_json(pi[k], lr[k]),
                                             "win_probability", win[k]));
    free(lr);
    free(pi);
    free(win);
    return rc;
}

/* Pessimistic scores (gamma >= 0) added to the K candidate objects of arr:
 * each one's lower bound and the pessimistic policy's probability. */
static int score_pessimism(lp_served *sv, const lp_sparse *f, const double *r, const double *lr,
                           size_t K, double gamma, json_t *arr, char *msg, size_t msglen)
{
    double *lower = calloc(K, sizeof *lower), *pess = calloc(K, sizeof *pess);
    int rc =
        lower && pess ? lp_served_pessimism(sv, f, r, lr, K, gamma, lower, pess) : LP_ENO_MEMORY;
    for (size_t k = 0; rc == LP_OK && k < K; k++) {
        json_t *c = json_array_get(arr, json_array_size(arr) - K + k);
        json_object_set_new(c, "lower", json_real(lower[k]));
        json_object_set_new(c, "pessimistic", json_real(pess[k]));
    }
    free(lower);
    free(pess);
    return rc == LP_OK || rc == LP_ENO_MEMORY
               ? rc
               : lp_fail(LP_EINTERNAL, msg, msglen, "the bounds could not be computed");
}

/* Rewards and policy of K items under sv, appended to arr; with gamma >= 0
 * (not NAN) also the pessimistic scores. */
static int score_items(lp_served *sv, const score_item *items, size_t K, double gamma, json_t *arr,
                       char *msg, size_t msglen)
{
    int general = lp_served_is_general(sv), keep = general || !isnan(gamma);
    double *r = calloc(K, sizeof *r), *lr = calloc(K, sizeof *lr);
    double *pi = calloc(K, sizeof *pi), *ratio = calloc(K, sizeof *ratio);
    lp_sparse *f = calloc(keep ? K : 1, sizeof *f);
    int rc = r && lr && pi && ratio && f ? LP_OK : LP_ENO_MEMORY;
    int all_ref = 1;
    for (size_t k = 0; k < K && rc == LP_OK; k++) {
        lp_sparse *fk = &f[keep ? k : 0];
        rc = lp_served_features(sv, items[k].prompt, items[k].text, items[k].dense, items[k].dim,
                                fk);
        if (rc == LP_EDIMENSION_MISMATCH)
            lp_fail(rc, msg, msglen, "candidate %zu has %zu features, the model %zu", k,
                    items[k].dim, lp_served_model(sv)->d);
        else if (rc != LP_OK)
            lp_fail(rc, msg, msglen, "candidate %zu: %s", k, lp_error_message(rc));
        r[k] = rc == LP_OK ? lp_served_reward(sv, fk) : 0.0;
        lr[k] = items[k].log_ref;
        all_ref &= items[k].has_ref;
    }
    if (rc == LP_OK && general)
        rc = score_mixture(sv, items, f, K, arr, msg, msglen);
    else if (rc == LP_OK && lp_served_policy(sv, r, all_ref ? lr : NULL, K, pi, ratio) != LP_OK)
        rc = lp_fail(LP_EINTERNAL, msg, msglen, "the policy could not be computed");
    for (size_t k = 0; k < K && rc == LP_OK && !general; k++)
        json_array_append_new(arr, json_pack("{s:f, s:f, s:f}", "reward", r[k], "probability",
                                             pi[k], "log_ratio", ratio[k]));
    if (rc == LP_OK && !general && !isnan(gamma))
        rc = score_pessimism(sv, f, r, all_ref ? lr : NULL, K, gamma, arr, msg, msglen);
    for (size_t k = 0; f && k < (keep ? K : 1); k++)
        lp_sparse_free(&f[k]);
    free(f);
    free(r);
    free(lr);
    free(pi);
    free(ratio);
    return rc;
}

/* Reads a task's prompt, responses and stored features for scoring. */
static int task_items(lp_api *api, int64_t id, score_item items[2], lp_task *t)
{
    int rc = lp_store_task_get(api->store, id, t);
    if (rc != LP_OK)
        return rc;
    items[0].prompt = items[1].prompt = t->prompt;
    items[0].text = t->response0;
    items[1].text = t->response1;
    rc = lp_registry_task_features(api->store, id, &items[0].dense, &items[1].dense, &items[0].dim);
    items[1].dim = items[0].dim;
    return rc;
}

static void free_items(score_item *items, size_t n)
{
    for (size_t i = 0; i < n; i++)
        free(items[i].dense);
    free(items);
}

static int score_tasks(lp_api *api, lp_served *sv, const json_t *ids, double gamma, json_t *out,
                       char *msg, size_t msglen)
{
    if (!json_is_array(ids) || json_array_size(ids) == 0)
        return lp_fail(LP_EWRONG_TYPE, msg, msglen, "task_ids must be a non-empty array");
    if (json_array_size(ids) > SCORE_TASKS_MAX)
        return lp_fail(LP_ETOO_MANY_CANDIDATES, msg, msglen, "at most %d task ids",
                       SCORE_TASKS_MAX);
    json_t *tasks = json_array();
    json_object_set_new(out, "tasks", tasks);
    for (size_t i = 0; i < json_array_size(ids); i++) {
        const json_t *x = json_array_get(ids, i);
        if (!json_is_integer(x) || json_integer_value(x) < 1)
            return lp_fail(LP_EWRONG_TYPE, msg, msglen, "task_ids[%zu] must be a positive id", i);
        int64_t id = json_integer_value(x);
        score_item *items = calloc(2, sizeof *items);
        lp_task t = {0};
        int rc = items ? task_items(api, id, items, &t) : LP_ENO_MEMORY;
        json_t *cands = json_array();
        char why[LP_MSG_MAX] = "";
        if (rc == LP_OK)
            rc = score_items(sv, items, 2, gamma, cands, why, sizeof why);
        if (rc != LP_OK)
            lp_fail(rc, msg, msglen, "task %lld: %s", (long long)id,
                    why[0] ? why : lp_error_message(rc));
        lp_task_clear(&t);
        free_items(items, 2);
        if (rc != LP_OK) {
            json_decref(cands);
            return rc;
        }
        json_array_append_new(
            tasks, json_pack("{s:I, s:o}", "task_id", (json_int_t)id, "candidates", cands));
    }
    return LP_OK;
}

/* LP_OK when sv may score K candidates in one request. */
static int check_count(lp_served *sv, size_t K, char *msg, size_t msglen)
{
    if (K > SCORE_CANDIDATES_MAX)
        return lp_fail(LP_ETOO_MANY_CANDIDATES, msg, msglen, "at most %d candidates",
                       SCORE_CANDIDATES_MAX);
    if (lp_served_is_general(sv) && K > LP_GP_SERVE_MAX_K) /* self-play costs K^2 per round */
        return lp_fail(LP_ETOO_MANY_CANDIDATES, msg, msglen,
                       "at most %d candidates for a general-preference model", LP_GP_SERVE_MAX_K);
    return LP_OK;
}

/* Scores K (>= 1) parsed candidates under sv: "candidates" into out. */
static int score_candidates(lp_served *sv, const score_item *items, size_t K, double gamma,
                            json_t *out, char *msg, size_t msglen)
{
    int rc = check_count(sv, K, msg, msglen);
    if (rc != LP_OK)
        return rc;
    json_t *arr = json_array();
    rc = arr ? score_items(sv, items, K, gamma, arr, msg, msglen) : LP_ENO_MEMORY;
    if (rc == LP_OK)
        json_object_set_new(out, "candidates", arr);
    else
        json_decref(arr);
    return rc;
}

static int score_prompt(lp_served *sv, const json_t *root, double gamma, json_t *out, char *msg,
                        size_t msglen)
{
    const char *prompt = "";
    int rc = LP_OK;
    if (json_object_get(root, "prompt") != NULL)
        rc = lp_json_get_string(root, "prompt", LP_TASK_TEXT_MAX, &prompt, msg, msglen);
    const json_t *cands = json_object_get(root, "candidates");
    if (rc != LP_OK)
        return rc;
    if (cands == NULL)
        return lp_fail(LP_EMISSING_FIELD, msg, msglen, "candidates or task_ids is required");
    if (!json_is_array(cands) || json_array_size(cands) == 0)
        return lp_fail(LP_EWRONG_TYPE, msg, msglen, "candidates must be a non-empty array");
    size_t K = json_array_size(cands);
    if ((rc = check_count(sv, K, msg, msglen)) != LP_OK)
        return rc;
    score_item *items = calloc(K, sizeof *items);
    if (items == NULL)
        return lp_fail(LP_ENO_MEMORY, msg, msglen, "out of memory");
    for (size_t k = 0; k < K && rc == LP_OK; k++) {
        items[k].prompt = prompt;
        rc = parse_candidate(json_array_get(cands, k), k, &items[k], msg, msglen);
    }
    if (rc == LP_OK)
        rc = score_candidates(sv, items, K, gamma, out, msg, msglen);
    free_items(items, K);
    return rc;
}

/* The fast reader's candidates as score items (features borrowed from the
 * reader's arena), scored under sv into out. */
static int score_parsed(lp_served *sv, const lp_score_req *q, json_t *out, char *msg, size_t msglen)
{
    score_item stack[8];
    score_item *items = q->k <= 8 ? stack : calloc(q->k, sizeof *items);
    if (items == NULL)
        return lp_fail(LP_ENO_MEMORY, msg, msglen, "out of memory");
    for (size_t k = 0; k < q->k; k++) {
        const lp_score_cand *c = &q->cands[k];
        items[k] = (score_item){.prompt = q->prompt ? q->prompt : "",
                                .text = c->text,
                                .dense = (double *)c->features,
                                .dim = c->dim,
                                .log_ref = c->ref_logprob,
                                .has_ref = c->has_ref};
    }
    int rc = score_candidates(sv, items, q->k, NAN, out, msg, msglen);
    if (items != stack)
        free(items);
    return rc;
}

int lp_api_score_fast_parse(const lp_api *api, const char *body, size_t len, lp_score_arena *a,
                            lp_score_req *q)
{
    static const lp_score_caps caps = {SCORE_CANDIDATES_MAX, LP_FEATURES_MAX, LP_TASK_TEXT_MAX};
    if (api->opts.json_depth < 4) /* the general reader would refuse the nesting */
        return 0;
    return lp_score_parse(body, len, &caps, a, q);
}

int lp_api_score_item(lp_served *sv, const lp_score_req *parsed, const json_t *root, json_t *out,
                      char *msg, size_t msglen)
{
    static const char *const fields[] = {"prompt", "candidates", NULL};
    if (parsed != NULL)
        return score_parsed(sv, parsed, out, msg, msglen);
    if (!json_is_object(root))
        return lp_fail(LP_EWRONG_TYPE, msg, msglen, "expected an object");
    int rc = lp_json_only_fields(root, fields, msg, msglen);
    return rc == LP_OK ? score_prompt(sv, root, NAN, out, msg, msglen) : rc;
}

/* The request's pessimism: "gamma" (a number in [0, LP_CONF_GAMMA_MAX]) or
 * "pessimism": true (gamma: the default) asks for it; *gamma stays NAN
 * otherwise ("pessimism": false without gamma). */
static int score_gamma(const json_t *root, double *gamma, char *msg, size_t msglen)
{
    const json_t *p = json_object_get(root, "pessimism"), *g = json_object_get(root, "gamma");
    if (p != NULL && !json_is_boolean(p))
        return lp_fail(LP_EWRONG_TYPE, msg, msglen, "pessimism must be true or false");
    if (g != NULL && (!json_is_number(g) || !(json_number_value(g) >= 0.0) ||
                      !(json_number_value(g) <= LP_CONF_GAMMA_MAX)))
        return lp_fail(LP_EWRONG_TYPE, msg, msglen, "gamma must be a number from 0 to %g",
                       LP_CONF_GAMMA_MAX);
    if (g != NULL && p != NULL && !json_is_true(p))
        return lp_fail(LP_EBAD_REQUEST, msg, msglen,
                       "gamma asks for pessimism: drop \"pessimism\": false");
    if (g != NULL)
        *gamma = json_number_value(g);
    else if (json_is_true(p))
        *gamma = LP_CONF_DEFAULT_GAMMA;
    return LP_OK;
}

/* The model a score request may use (docs/trust-model.md): the served one
 * (version 0 or its own version) for every caller the router let through,
 * except that an anonymous caller (who NULL: --public-score) gets it only
 * when every label it was trained on was privatized; any other version
 * needs the admin scope, and without it the answer does not tell whether
 * the version exists. */
int lp_api_score_model(lp_api *api, const lp_principal *who, int64_t version, lp_served **out)
{
    *out = NULL;
    lp_served *active = lp_learner_served(api->learner);
    if (version > 0 && (active == NULL || lp_served_version(active) != version)) {
        lp_served_unref(active);
        if (who == NULL || (who->scopes & LP_SCOPE_ADMIN) == 0)
            return LP_EMODEL_NOT_ACTIVE;
        return lp_learner_model(api->learner, version, out);
    }
    if (active == NULL)
        return LP_ENO_ACTIVE_MODEL;
    if (who == NULL && !lp_label_privacy_public(lp_served_privacy(active))) {
        lp_served_unref(active);
        return LP_EMODEL_NOT_PUBLIC;
    }
    *out = active;
    return LP_OK;
}

int lp_api_score_is_light(const char *body, size_t len)
{
    return body != NULL && memchr(body, '\\', len) == NULL &&
           memmem(body, len, "task_ids", 8) == NULL;
}

json_t *lp_api_score_header(lp_served *sv)
{
    const lp_model *m = lp_served_model(sv);
    return json_pack(
        "{s:I, s:s, s:s, s:s, s:f}", "model_version", (json_int_t)lp_served_version(sv), "method",
        lp_served_is_general(sv) ? "general" : "reward", "loss", lp_loss_name(m->loss.kind), "link",
        m->link == LP_LINK_KL ? "kl" : "chimix", "beta", m->beta);
}

int lp_api_score(lp_api *api, const lp_request *req, lp_response *resp)
{
    if (api->learner == NULL)
        return no_learner(resp);
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    static const char *const fields[] = {"prompt", "candidates", "task_ids", "version",
                                         "gamma",  "pessimism",  NULL};
    char msg[LP_MSG_MAX] = "";
    int rc = LP_OK;
    int64_t version = 0;
    /* the common request by the single-pass reader; anything it declines
     * by jansson and the checks below */
    lp_score_arena arena = {0};
    lp_score_req fast;
    int parsed = req->body != NULL && req->body_len > 0 &&
                 lp_api_score_fast_parse(api, req->body, req->body_len, &arena, &fast) == 1;
    json_t *root = NULL;
    if (parsed) {
        version = fast.version;
    } else {
        if (lp_api_parse_body(api, req, &root, resp) != LP_OK) {
            lp_score_arena_free(&arena);
            return LP_API_DONE;
        }
        rc = json_is_object(root) ? LP_OK
                                  : lp_fail(LP_EWRONG_TYPE, msg, sizeof msg, "expected an object");
        if (rc == LP_OK)
            rc = lp_json_only_fields(root, fields, msg, sizeof msg);
        if (rc == LP_OK && json_object_get(root, "version") != NULL)
            rc = lp_json_get_int(root, "version", 1, INT64_MAX, &version, msg, sizeof msg);
        if (rc == LP_OK && json_object_get(root, "task_ids") != NULL &&
            json_object_get(root, "candidates") != NULL)
            rc = lp_fail(LP_EBAD_REQUEST, msg, sizeof msg, "give candidates or task_ids, not both");
    }
    double gamma = NAN; /* NAN: no pessimistic scores (the fast reader declines gamma) */
    if (rc == LP_OK && root != NULL)
        rc = score_gamma(root, &gamma, msg, sizeof msg);
    lp_served *sv = NULL;
    if (rc == LP_OK && (rc = lp_api_score_model(api, req->principal, version, &sv)) != LP_OK)
        msg[0] = '\0';
    if (rc == LP_OK && !isnan(gamma) && !lp_served_has_confidence(sv))
        rc = lp_fail(LP_ENO_CONFIDENCE, msg, sizeof msg, "model %lld has no confidence record%s",
                     (long long)lp_served_version(sv),
                     lp_served_is_general(sv) ? " (a general-preference model has no rewards)"
                                              : "; retrain to score pessimistically");
    json_t *out = NULL;
    if (rc == LP_OK) {
        out = lp_api_score_header(sv);
        const json_t *ids = root ? json_object_get(root, "task_ids") : NULL;
        rc = out == NULL ? LP_ENO_MEMORY
             : parsed    ? score_parsed(sv, &fast, out, msg, sizeof msg)
             : ids       ? score_tasks(api, sv, ids, gamma, out, msg, sizeof msg)
                         : score_prompt(sv, root, gamma, out, msg, sizeof msg);
        if (rc == LP_OK && !isnan(gamma))
            json_object_set_new(out, "gamma", json_real(gamma));
    }
    lp_served_unref(sv);
    json_decref(root);
    lp_score_arena_free(&arena);
    if (rc != LP_OK) {
        json_decref(out);
        return lp_api_error(resp, rc, msg[0] ? msg : NULL);
    }
    clock_gettime(CLOCK_MONOTONIC, &t1);
    lp_metrics_score((double)(t1.tv_sec - t0.tv_sec) + (double)(t1.tv_nsec - t0.tv_nsec) / 1e9);
    return lp_api_json(resp, 200, out);
}

/* ---- corruption settings endpoints ---- */

int lp_api_corruption_get(lp_api *api, const lp_request *req, lp_response *resp)
{
    if (api->learner == NULL)
        return no_learner(resp);
    const char *name = lp_api_param(req, "campaign");
    lp_campaign c;
    int rc = lp_store_campaign_by_name(api->store, name ? name : "default", &c);
    lp_corruption cs;
    if (rc == LP_OK)
        rc = lp_registry_corruption_current(api->store, c.id, &cs);
    if (rc != LP_OK)
        return lp_api_error(resp, rc, NULL);
    return lp_api_json(resp, 200, corruption_json(&cs, c.name, NULL));
}

int lp_api_corruption_put(lp_api *api, const lp_request *req, lp_response *resp)
{
    if (api->learner == NULL)
        return no_learner(resp);
    static const char *const fields[] = {"campaign", "alpha", "strategy", "seed", "feature", NULL};
    json_t *root = NULL;
    if (lp_api_parse_body(api, req, &root, resp) != LP_OK)
        return LP_API_DONE;
    char msg[LP_MSG_MAX] = "";
    lp_corruption cs = {0};
    lp_campaign c;
    const char *name = "default", *strategy = "flip";
    int rc = json_is_object(root) ? LP_OK
                                  : lp_fail(LP_EWRONG_TYPE, msg, sizeof msg, "expected an object");
    if (rc == LP_OK)
        rc = lp_json_only_fields(root, fields, msg, sizeof msg);
    if (rc == LP_OK && json_object_get(root, "campaign") != NULL)
        rc = lp_json_get_string(root, "campaign", LP_CAMPAIGN_NAME_MAX, &name, msg, sizeof msg);
    if (rc == LP_OK && json_object_get(root, "strategy") != NULL)
        rc = lp_json_get_string(root, "strategy", 32, &strategy, msg, sizeof msg);
    const json_t *alpha = json_object_get(root, "alpha");
    if (rc == LP_OK && alpha == NULL)
        rc = lp_fail(LP_EMISSING_FIELD, msg, sizeof msg, "field \"alpha\" is required");
    if (rc == LP_OK && (!json_is_number(alpha) || !(json_number_value(alpha) >= 0.0) ||
                        !(json_number_value(alpha) <= 0.5)))
        rc = lp_fail(LP_EBAD_CORRUPTION, msg, sizeof msg, "\"alpha\" must be a number in [0, 0.5]");
    if (rc == LP_OK && lp_adversary_parse(strategy, &cs.strategy) != LP_OK)
        rc = lp_fail(LP_EBAD_CORRUPTION, msg, sizeof msg,
                     "\"strategy\" must be flip, constant0, constant1, random, anti or backdoor");
    int64_t seed = 0, feature = 0;
    if (rc == LP_OK && json_object_get(root, "seed") != NULL &&
        lp_json_get_int(root, "seed", 0, (int64_t)LP_CORRUPT_SEED_MAX, &seed, msg, sizeof msg) !=
            LP_OK)
        rc = lp_fail(LP_EBAD_CORRUPTION, msg, sizeof msg,
                     "\"seed\" must be an integer in [0, 2^53]");
    if (rc == LP_OK && json_object_get(root, "feature") != NULL &&
        lp_json_get_int(root, "feature", 0, LP_FEAT_HASH_MAX, &feature, msg, sizeof msg) != LP_OK)
        rc = lp_fail(LP_EBAD_CORRUPTION, msg, sizeof msg,
                     "\"feature\" must be a feature index >= 0");
    if (rc == LP_OK && (rc = lp_store_campaign_by_name(api->store, name, &c)) != LP_OK)
        msg[0] = '\0';
    if (rc == LP_OK) {
        cs.campaign = c.id;
        cs.alpha = json_number_value(alpha);
        cs.seed = (uint64_t)seed;
        cs.feature = feature;
        rc = lp_registry_corruption_add(api->store, &cs);
    }
    json_decref(root);
    if (rc != LP_OK)
        return lp_api_error(resp, rc, msg[0] ? msg : NULL);
    return lp_api_json(resp, 200, corruption_json(&cs, c.name, NULL));
}

/* ---- the corrupted export view ---- */

/* The view spec a model was trained on: its cut-off, campaign, feature plan
 * and the corruption settings recorded with it. */
int lp_api_model_view(lp_api *api, int64_t version, lp_view_spec *spec, lp_corruption **settings,
                      lp_served **anti, char *msg, size_t msglen)
{
    memset(spec, 0, sizeof *spec);
    *settings = NULL;
    *anti = NULL;
    if (api->learner == NULL)
        return lp_fail(LP_EUNAVAILABLE, msg, msglen, "this server runs without a learner");
    lp_model_view m;
    int rc = lp_learner_model_get(api->learner, version, &m);
    if (rc == LP_EUNKNOWN_MODEL)
        return lp_fail(rc, msg, msglen, "no model version %lld", (long long)version);
    if (rc != LP_OK)
        return lp_fail(rc, msg, msglen, "model %lld: unreadable record", (long long)version);
    for (size_t k = 0; k < m.n_corruption && *anti == NULL && rc == LP_OK; k++)
        if (m.corruption[k].strategy == LP_ADV_ANTI && m.anti_model > 0 &&
            (rc = lp_learner_model(api->learner, m.anti_model, anti)) != LP_OK)
            lp_fail(rc, msg, msglen, "the anti model %lld is unavailable", (long long)m.anti_model);
    if (rc == LP_OK) {
        spec->campaign = m.campaign;
        spec->cutoff = m.cutoff;
        spec->features = m.features;
        spec->text = m.text;
        spec->settings = *settings = m.corruption;
        spec->n_settings = m.n_corruption;
        spec->anti_model = *anti;
        m.corruption = NULL; /* now the caller's */
    }
    lp_model_view_clear(&m);
    return rc;
}
