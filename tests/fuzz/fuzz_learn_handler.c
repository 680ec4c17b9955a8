/*
 * fuzz_learn_handler.c — libFuzzer target for the learning endpoints: the
 * first byte of the input picks a route, the remaining bytes are its body
 * (or one query parameter's value), handled by lp_api_handle with the
 * operator token over a real store in a temporary directory and a real
 * learner (scheduler off). No sockets.
 *
 *   byte0 % 11   route (corpus files start with the letter B + index: B..L)
 *   0            POST /v1/retrain              body
 *   1            POST /v1/retrain/cancel       body
 *   2            PUT  /v1/retrain/schedule     body
 *   3            POST /v1/models/activate      body
 *   4            POST /v1/score                body
 *   5            PUT  /v1/corruption           body
 *   6            GET  /v1/models?version=      value (none: the list)
 *   7            GET  /v1/retrain?run=         value
 *   8            GET  /v1/retrain?limit=       value (none: the list)
 *   9            GET  /v1/corruption?campaign= value
 *   10           GET  /v1/export?view=corrupted&version= value (streamed to the end)
 *
 * Set-up loads tasks 1..4 (1 and 2 with 3 dense features each, 3 and 4
 * text only) but no labels, so every retrain fails fast with no_labels and
 * never trains. It stores two models directly in the registry, so score,
 * models and activate have something to work on: version 1, a text model
 * (dpo, KL link, 64 hash buckets with bigrams, prompt crosses and length),
 * and version 2, a dense square-chipo model of dimension 3, served.
 *
 * Determinism: after every input the target waits until the learner has
 * no queued or active run, so no background run outlives an iteration.
 * The store keeps what inputs add (runs, schedules, corruption settings,
 * activations), as the label target keeps labels.
 *
 * LDPREF_FUZZ_VERBOSE=1 prints each request and its answer to stderr (for
 * checking what a corpus file reaches).
 */
#include "api.h"
#include "auth.h"
#include "error.h"
#include "model.h"
#include "registry.h"
#include "retrain.h"
#include "store.h"
#include "store_fixture.h"
#include "tasks.h"
#include "train_request.h"

#include <jansson.h>
#include <sodium.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static lp_store *store;
static lp_learner *learner;
static lp_api *api;
static store_fixture fx;
static char token[LP_AUTH_TOKEN_MAX];

static void cleanup(void)
{
    lp_api_free(api);
    lp_learner_free(learner);
    store_fixture_close(&fx);
    api = NULL;
    learner = NULL;
    store = NULL;
    sodium_memzero(token, sizeof token);
}

/* Stores the model described by doc (stolen) as a new version, the way the
 * learner does: the full model file, and the same without theta as the
 * summary. Returns 0 or -1. */
static int add_model(json_t *doc, const char *loss, int activate)
{
    char msg[256];
    lp_model *m = NULL;
    int rc = doc ? lp_model_from_json(doc, "fuzz model", &m, msg, sizeof msg) : LP_ENO_MEMORY;
    json_decref(doc);
    if (rc != LP_OK) {
        fprintf(stderr, "fuzz_learn_handler: %s\n", msg);
        return -1;
    }
    json_t *mj = lp_model_to_json(m);
    lp_model_record rec = {.cutoff = 0,
                           .labels = 0,
                           .duration_ms = 1,
                           .dim = (int64_t)m->d,
                           .text_dim = m->text ? m->feat.hash_dim : 0,
                           .text_bigrams = m->text && m->feat.bigrams,
                           .text_cross_prompt = m->text && m->feat.cross_prompt,
                           .text_cross_max = m->text ? m->feat.cross_max : 0,
                           .text_length = m->text && m->feat.length};
    snprintf(rec.features, sizeof rec.features, "%s", m->text ? "text" : "dense");
    snprintf(rec.loss, sizeof rec.loss, "%s", loss);
    lp_model_free(m);
    char *model_text = mj ? json_dumps(mj, LP_MODEL_JSON_FLAGS) : NULL;
    if (mj != NULL)
        json_object_del(mj, "theta");
    char *summary_text = mj ? json_dumps(mj, JSON_COMPACT | JSON_PRESERVE_ORDER) : NULL;
    json_decref(mj);
    /* the run: the default request for this loss */
    lp_run run = {.objective = 0.0, .grad_norm = 0.0};
    snprintf(run.trigger, sizeof run.trigger, "manual");
    json_t *req = json_pack("{s:s}", "loss", loss);
    lp_train_request tr;
    rc = lp_train_request_parse(store, req, 1, &tr, msg, sizeof msg);
    json_decref(req);
    lp_train_settings_from_request(&tr, &run.settings);
    if (rc == LP_OK)
        rc = model_text && summary_text ? lp_registry_run_create(store, &run) : LP_ENO_MEMORY;
    rec.run = run.id;
    rec.summary = summary_text;
    rec.model = model_text;
    if (rc == LP_OK)
        rc = lp_registry_model_add(store, &rec, activate);
    if (rc == LP_OK) {
        run.status = LP_RUN_SUCCEEDED;
        run.model_version = rec.version;
        run.started_ms = run.finished_ms = run.created_ms;
        rc = lp_registry_run_update(store, &run);
    }
    free(model_text);
    free(summary_text);
    return rc == LP_OK ? 0 : -1;
}

static int add_models(void)
{
    lp_feat_spec fs;
    lp_feat_spec_init(&fs);
    fs.hash_dim = 64;
    fs.bigrams = 1;
    fs.cross_prompt = 1;
    fs.length = 1;
    size_t d = lp_feat_dim(&fs);
    json_t *theta = json_array();
    for (size_t j = 0; j < d; j++)
        json_array_append_new(theta, json_real((double)((j * 7) % 11) / 10.0 - 0.5));
    json_t *text = json_pack("{s:s, s:i, s:s, s:s, s:f, s:{s:s, s:I, s:I, s:b, s:b, s:i, s:b}, "
                             "s:o}",
                             "format", "ldpref-model", "format_version", 1, "loss", "dpo", "link",
                             "kl", "beta", 0.5, "features", "kind", "text", "dim", (json_int_t)d,
                             "hash_dim", (json_int_t)fs.hash_dim, "bigrams", 1, "cross_prompt", 1,
                             "cross_max", fs.cross_max, "length", 1, "theta", theta);
    json_t *dense =
        json_pack("{s:s, s:i, s:s, s:s, s:f, s:{s:s, s:i}, s:[f, f, f]}", "format", "ldpref-model",
                  "format_version", 1, "loss", "square-chipo", "link", "chimix", "beta", 1.0,
                  "features", "kind", "dense", "dim", 3, "theta", 0.5, -0.25, 1.0);
    return add_model(text, "dpo", 0) == 0 && add_model(dense, "square-chipo", 1) == 0 ? 0 : -1;
}

static int setup(void)
{
    char err[256];
    if (store_fixture_open(&fx, "fuzz", 1) != LP_OK)
        return -1;
    atexit(cleanup);
    store = fx.store;
    static const double f[4][3] = {{1, 0, 2}, {0, 1, -1}, {0.5, 0.5, 0}, {-2, 3, 1e3}};
    lp_task_in tasks[4] = {
        {"d1", "prompt one", "first answer", "second answer", 0, f[0], f[1], 3, NULL, 0,
         LP_GOLD_NONE},
        {"d2", "prompt two", "yes", "no", 1, f[2], f[3], 3, NULL, 0, LP_GOLD_NONE},
        {"t3", "what is the capital of France?", "Paris", "Lyon", -1, NULL, NULL, 0, NULL, 0,
         LP_GOLD_NONE},
        {"t4", "", "", "only one side has text", -1, NULL, NULL, 0, NULL, 0, LP_GOLD_NONE},
    };
    size_t loaded, skipped;
    int64_t first, last;
    if (lp_store_tasks_load(store, 1, tasks, 4, &loaded, &skipped, &first, &last) != LP_OK ||
        lp_auth_operator_mint(store, "fuzz", LP_SCOPE_ALL, token, NULL) != LP_OK ||
        add_models() != 0)
        return -1;
    lp_learner_opts lo = {.threads = 1, .scheduler = 0};
    if (lp_learner_new(store, &lo, &learner, err, sizeof err) != LP_OK) {
        fprintf(stderr, "fuzz_learn_handler: %s\n", err);
        return -1;
    }
    lp_api_opts ao = {.body_max = 65536,
                      .batch_body_max = 4 << 20,
                      .upload_max = 1 << 20,
                      .train_threads = 1,
                      .json_depth = 32,
                      .batch_max = 1000,
                      .timestamp_window_ms = 300000};
    api = lp_api_new(store, &ao);
    if (api == NULL)
        return -1;
    lp_api_set_learner(api, learner);
    return 0;
}

/* Waits until no run is queued or active, so that a run started by this
 * input ends inside this input. */
static void wait_idle(void)
{
    for (int i = 0;; i++) {
        lp_learner_stats ls;
        lp_learner_stats_get(learner, &ls);
        if (ls.running == 0)
            return;
        if (i == 30000) { /* 30 s: a run that does not end is a bug */
            fprintf(stderr, "fuzz_learn_handler: run %lld does not end\n", (long long)ls.running);
            abort();
        }
        struct timespec ts = {0, 1000000L};
        nanosleep(&ts, NULL);
    }
}

typedef struct fuzz_route {
    const char *method, *path;
    const char *param; /* NULL: the bytes are the body */
} fuzz_route;

static const fuzz_route ROUTES[] = {
    {"POST", "/v1/retrain", NULL},         {"POST", "/v1/retrain/cancel", NULL},
    {"PUT", "/v1/retrain/schedule", NULL}, {"POST", "/v1/models/activate", NULL},
    {"POST", "/v1/score", NULL},           {"PUT", "/v1/corruption", NULL},
    {"GET", "/v1/models", "version"},      {"GET", "/v1/retrain", "run"},
    {"GET", "/v1/retrain", "limit"},       {"GET", "/v1/corruption", "campaign"},
    {"GET", "/v1/export", "version"},
};
#define N_ROUTES (sizeof ROUTES / sizeof ROUTES[0])

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static int ready = 0;
    if (!ready) {
        if (setup() != 0)
            abort();
        ready = 1;
    }
    if (size == 0)
        return 0;
    const fuzz_route *r = &ROUTES[data[0] % N_ROUTES];
    const char *rest = (const char *)data + 1;
    size_t n = size - 1;
    char *value = NULL;
    lp_param params[2];
    lp_request req = {.method = r->method, .path = r->path, .bearer = token};
    if (r->param != NULL && n == 0 && strcmp(r->path, "/v1/export") != 0) {
        /* no value: the parameter is absent (the list forms) */
    } else if (r->param != NULL) {
        value = malloc(n + 1); /* a query value is a C string: NUL ends it */
        if (value == NULL)
            return 0;
        memcpy(value, rest, n);
        value[n] = '\0';
        params[0] = (lp_param){r->param, value};
        req.params = params;
        req.n_params = 1;
        if (strcmp(r->path, "/v1/export") == 0) {
            params[1] = (lp_param){"view", "corrupted"};
            req.n_params = 2;
        }
    } else {
        req.body = rest;
        req.body_len = n;
    }
    lp_response resp;
    lp_api_handle(api, &req, &resp);
    if (resp.error == 0 && resp.status != 200 && resp.status != 202)
        abort(); /* a success must carry a success status */
    if (resp.error != 0 && resp.body == NULL)
        abort(); /* every error has a body */
    if (resp.error == 0 && resp.body == NULL && resp.stream.read == NULL)
        abort(); /* every answer has a body */
    static int verbose = -1;
    if (verbose < 0)
        verbose = getenv("LDPREF_FUZZ_VERBOSE") != NULL;
    if (verbose)
        fprintf(stderr, "%s %s%s%s -> %d %.*s\n", r->method, r->path, r->param ? "?" : "",
                r->param ? r->param : "", resp.error ? resp.error : resp.status,
                resp.body ? (int)(resp.body_len > 300 ? 300 : resp.body_len) : 0,
                resp.body ? resp.body : "");
    if (resp.stream.read != NULL) {
        char buf[4096];
        ssize_t got;
        while ((got = resp.stream.read(resp.stream.ctx, buf, sizeof buf)) > 0)
            if (verbose)
                fprintf(stderr, "%.*s", (int)got, buf);
    }
    lp_response_clear(&resp);
    free(value);
    wait_idle();
    return 0;
}
