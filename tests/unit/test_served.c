/*
 * test_served.c — served models (server/service/served.h): a model loaded
 * from its stored record answers with theta^T f for dense and text
 * features, bad input gets named errors, and the serving slot's swaps are
 * safe under concurrent readers (each reader sees one whole model, and a
 * model outlives the slot while someone holds it); who may score with which
 * model, by its privacy record, through the API (handler and the headers-
 * only pre-authentication).
 */
#include "api.h"
#include "auth.h"
#include "check.h"
#include "error.h"
#include "model.h"
#include "registry.h"
#include "retrain.h"
#include "served.h"
#include "store.h"
#include "store_fixture.h"

#include <math.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

/* A dense model file: d = 3, theta = scale * (1, -2, 0.5). */
static char *dense_model(double scale, const char *loss, const char *link)
{
    json_t *doc =
        json_pack("{s:s, s:i, s:s, s:s, s:f, s:{s:s, s:i}, s:[f, f, f]}", "format", "ldpref-model",
                  "format_version", 1, "loss", loss, "link", link, "beta", 1.0, "features", "kind",
                  "dense", "dim", 3, "theta", scale * 1.0, scale * -2.0, scale * 0.5);
    char *text = json_dumps(doc, JSON_COMPACT);
    json_decref(doc);
    return text;
}

/* A text model file over spec with theta_j = (j % 7) / 7 - 0.5. */
static char *text_model(const lp_feat_spec *spec)
{
    json_t *theta = json_array();
    for (size_t j = 0; j < lp_feat_dim(spec); j++)
        json_array_append_new(theta, json_real((double)(j % 7) / 7.0 - 0.5));
    json_t *doc = json_pack("{s:s, s:s, s:s, s:f, s:{s:s, s:I, s:I, s:b, s:b, s:i, s:b}, s:o}",
                            "format", "ldpref-model", "loss", "dpo", "link", "kl", "beta", 0.5,
                            "features", "kind", "text", "dim", (json_int_t)lp_feat_dim(spec),
                            "hash_dim", (json_int_t)spec->hash_dim, "bigrams", spec->bigrams,
                            "cross_prompt", spec->cross_prompt, "cross_max", spec->cross_max,
                            "length", spec->length, "theta", theta);
    char *text = json_dumps(doc, JSON_COMPACT);
    json_decref(doc);
    return text;
}

static void test_dense(void)
{
    char *text = dense_model(1.0, "square-chipo", "chimix"), msg[256];
    lp_served *sv = NULL;
    CHECK_INT(lp_served_new(4, text, NULL, &sv, msg, sizeof msg), LP_OK);
    free(text);
    if (sv == NULL)
        return;
    CHECK_INT(lp_served_version(sv), 4);
    CHECK_INT(lp_served_model(sv)->d, 3);
    lp_sparse f = {0};
    const double x[3] = {2.0, 0.0, -4.0}, y[3] = {1.0, 1.0, 1.0};
    CHECK_INT(lp_served_features(sv, NULL, NULL, x, 3, &f), LP_OK);
    CHECK_INT(f.nnz, 2); /* zeros dropped */
    double rx = lp_served_reward(sv, &f);
    CHECK_NEAR(rx, 2.0 - 2.0, 1e-15);
    CHECK_INT(lp_served_features(sv, "ignored", "ignored", y, 3, &f), LP_OK);
    double ry = lp_served_reward(sv, &f);
    CHECK_NEAR(ry, 1.0 - 2.0 + 0.5, 1e-15);
    /* the policy over two candidates prefers the higher reward and sums to one */
    double r[2] = {rx, ry}, pi[2], ratio[2];
    CHECK_INT(lp_served_policy(sv, r, NULL, 2, pi, ratio), LP_OK);
    CHECK_NEAR(pi[0] + pi[1], 1.0, 1e-12);
    CHECK(pi[0] > pi[1]);
    /* bad input: named errors */
    const double bad[3] = {1.0, NAN, 0.0};
    CHECK_ERR(lp_served_features(sv, NULL, "text", NULL, 0, &f), LP_EFEATURES_REQUIRED);
    CHECK_ERR(lp_served_features(sv, NULL, NULL, x, 2, &f), LP_EDIMENSION_MISMATCH);
    CHECK_ERR(lp_served_features(sv, NULL, NULL, bad, 3, &f), LP_EWRONG_TYPE);
    lp_sparse_free(&f);
    lp_served_unref(sv);
    lp_served_unref(NULL);

    CHECK_ERR(lp_served_new(1, "{not json", NULL, &sv, msg, sizeof msg), LP_EMALFORMED_JSON);
    CHECK(sv == NULL);
    CHECK_ERR(lp_served_new(1, "{\"loss\": \"dpo\"}", NULL, &sv, msg, sizeof msg),
              LP_EMISSING_FIELD);
    CHECK(strstr(msg, "model 1") != NULL);
    CHECK_ERR(lp_served_new(1, "{\"theta\": [1, \"x\"]}", NULL, &sv, msg, sizeof msg),
              LP_EWRONG_TYPE);
}

static void test_text(void)
{
    lp_feat_spec spec;
    lp_feat_spec_init(&spec);
    spec.hash_dim = 32;
    spec.cross_prompt = 1;
    char *text = text_model(&spec), msg[256];
    lp_served *sv = NULL;
    CHECK_INT(lp_served_new(9, text, NULL, &sv, msg, sizeof msg), LP_OK);
    free(text);
    if (sv == NULL)
        return;
    const lp_model *m = lp_served_model(sv);
    CHECK_INT(m->text, 1);
    CHECK_INT(m->d, lp_feat_dim(&spec));
    CHECK_INT(m->feat.hash_dim, 32);
    CHECK_INT(m->feat.cross_prompt, 1);
    /* the served features are the featurizer's under the model's spec */
    lp_featurizer *fz = lp_featurizer_new(&spec);
    lp_sparse want = {0}, got = {0};
    CHECK_INT(lp_featurize(fz, "a prompt", "the quick brown fox", &want), LP_OK);
    for (int rep = 0; rep < 3; rep++) { /* pooled featurizers give the same answer */
        CHECK_INT(lp_served_features(sv, "a prompt", "the quick brown fox", NULL, 0, &got), LP_OK);
        CHECK_INT(got.nnz, want.nnz);
    }
    double expect = 0;
    for (size_t k = 0; k < want.nnz; k++)
        expect += ((double)(want.idx[k] % 7) / 7.0 - 0.5) * want.val[k];
    CHECK_NEAR(lp_served_reward(sv, &got), expect, 1e-12);
    CHECK_ERR(lp_served_features(sv, "p", "", NULL, 0, &got), LP_EEMPTY_TEXT);
    CHECK_ERR(lp_served_features(sv, "p", NULL, NULL, 0, &got), LP_EEMPTY_TEXT);
    lp_sparse_free(&want);
    lp_sparse_free(&got);
    lp_featurizer_free(fz);
    lp_served_unref(sv);
}

/* A stored run for models to name. */
static lp_run stored_run(lp_store *s)
{
    lp_run run = {0};
    snprintf(run.trigger, sizeof run.trigger, "manual");
    snprintf(run.settings.loss, sizeof run.settings.loss, "dpo");
    snprintf(run.settings.optimizer, sizeof run.settings.optimizer, "lbfgs");
    snprintf(run.settings.features, sizeof run.settings.features, "dense");
    run.settings.text_dim = 4096;
    run.settings.threads = 1;
    CHECK_INT(lp_registry_run_create(s, &run), LP_OK);
    return run;
}

/* A model stored in the registry is served through the learner by version. */
static void test_from_record(void)
{
    store_fixture fx;
    CHECK_INT(store_fixture_open(&fx, "test-served", 1), LP_OK);
    lp_store *s = fx.store;
    if (s == NULL)
        return;
    char err[256];
    lp_run run = stored_run(s);
    char *text = dense_model(2.0, "dpo", "kl");
    lp_model_record rec = {.run = run.id, .dim = 3, .summary = "{}", .model = text};
    snprintf(rec.loss, sizeof rec.loss, "dpo");
    snprintf(rec.features, sizeof rec.features, "dense");
    CHECK_INT(lp_registry_model_add(s, &rec, 0), LP_OK);
    /* a second model with its privacy record: 5 labels of 2 annotators, one
     * unprivatized */
    lp_model_record rec2 = rec;
    rec2.privacy = (lp_label_privacy){.known = 1,
                                      .labels = 5,
                                      .annotators = 2,
                                      .unprivatized = 1,
                                      .epsilon_min = 0.5,
                                      .epsilon_max = 2.0,
                                      .epsilon_per_annotator = INFINITY};
    CHECK_INT(lp_registry_model_add(s, &rec2, 0), LP_OK);
    free(text);

    lp_learner_opts lo = {.threads = 1};
    lp_learner *l = NULL;
    CHECK_INT(lp_learner_new(s, &lo, &l, err, sizeof err), LP_OK);
    if (l != NULL) {
        CHECK(lp_learner_served(l) == NULL); /* stored, never activated */
        lp_served *sv = NULL;
        CHECK_INT(lp_learner_model(l, rec.version, &sv), LP_OK);
        if (sv != NULL) {
            CHECK_INT(lp_served_version(sv), rec.version);
            CHECK_INT(lp_served_model(sv)->link, LP_LINK_KL);
            lp_sparse f = {0};
            const double x[3] = {1, 1, 1};
            CHECK_INT(lp_served_features(sv, NULL, NULL, x, 3, &f), LP_OK);
            CHECK_NEAR(lp_served_reward(sv, &f), 2.0 * (1.0 - 2.0 + 0.5), 1e-15);
            lp_sparse_free(&f);
            /* stored without a record: unknown, so not privatized */
            CHECK_INT(lp_served_privacy(sv)->known, 0);
            CHECK_INT(lp_label_privacy_all_privatized(lp_served_privacy(sv)), 0);
        }
        lp_served_unref(sv);
        CHECK_INT(lp_learner_model(l, rec2.version, &sv), LP_OK);
        if (sv != NULL) {
            const lp_label_privacy *p = lp_served_privacy(sv);
            CHECK_INT(p->known, 1);
            CHECK_INT(p->labels, 5);
            CHECK_INT(p->annotators, 2);
            CHECK_INT(p->unprivatized, 1);
            CHECK_NEAR(p->epsilon_min, 0.5, 0);
            CHECK_NEAR(p->epsilon_max, 2.0, 0);
            CHECK(isinf(p->epsilon_per_annotator)); /* stored as NULL, read back as infinity */
            CHECK_INT(lp_label_privacy_all_privatized(p), 0);
        }
        lp_served_unref(sv);
        sv = NULL;
        CHECK_ERR(lp_learner_model(l, rec2.version + 1, &sv), LP_EUNKNOWN_MODEL);
        CHECK_INT(lp_learner_activate(l, rec.version), LP_OK);
        sv = lp_learner_served(l);
        CHECK(sv != NULL && lp_served_version(sv) == rec.version);
        lp_served_unref(sv);
    }
    lp_learner_free(l);
    store_fixture_close(&fx);
}

/* ---- who may score with which model (docs/trust-model.md) ---- */

/* A stored dense model with the given privacy record (known 0: none). */
static int64_t store_model(lp_store *s, int64_t run, const lp_label_privacy *privacy)
{
    char *text = dense_model(1.0, "dpo", "kl");
    lp_model_record rec = {.run = run, .dim = 3, .summary = "{}", .model = text};
    snprintf(rec.loss, sizeof rec.loss, "dpo");
    snprintf(rec.features, sizeof rec.features, "dense");
    rec.privacy = *privacy;
    CHECK_INT(lp_registry_model_add(s, &rec, 0), LP_OK);
    free(text);
    return rec.version;
}

/* POST /v1/score {"candidates": [...], "version"?} through lp_api_handle;
 * the status (or the error's status) and the error code (0: none). The
 * pre-authentication from the headers alone must agree with it whenever it
 * refuses. */
static int score_status(lp_api *api, const char *bearer, int64_t version, int *error)
{
    char body[160], v[40] = "";
    if (version > 0)
        snprintf(v, sizeof v, ",\"version\":%lld", (long long)version);
    snprintf(body, sizeof body, "{\"candidates\":[{\"features\":[1,1,1]}]%s}", v);
    lp_request req = {.method = "POST",
                      .path = "/v1/score",
                      .body = body,
                      .body_len = strlen(body),
                      .bearer = bearer};
    lp_response pre, resp;
    int pre_rc = lp_api_preauth(api, &req, &pre);
    lp_api_handle(api, &req, &resp);
    *error = resp.error;
    int status = resp.error ? lp_error_http_status(resp.error) : resp.status;
    if (pre_rc != LP_OK)
        CHECK_INT(pre_rc, resp.error); /* refused from the headers: the same answer */
    lp_response_clear(&pre);
    lp_response_clear(&resp);
    return status;
}

static void test_score_access(void)
{
    store_fixture fx;
    CHECK_INT(store_fixture_open(&fx, "test-score-access", 1), LP_OK);
    lp_store *s = fx.store;
    if (s == NULL)
        return;
    char token[LP_AUTH_TOKEN_MAX], score_only[LP_AUTH_TOKEN_MAX], admin_only[LP_AUTH_TOKEN_MAX],
        err[256];
    CHECK_INT(lp_auth_operator_mint(s, "all", LP_SCOPE_ALL, token, NULL), LP_OK);
    CHECK_INT(lp_auth_operator_mint(s, "researcher", LP_SCOPE_SCORE, score_only, NULL), LP_OK);
    CHECK_INT(lp_auth_operator_mint(s, "operator", LP_SCOPE_ADMIN, admin_only, NULL), LP_OK);
    lp_run run = stored_run(s);
    const lp_label_privacy privatized = {.known = 1,
                                         .labels = 10,
                                         .annotators = 2,
                                         .epsilon_min = 1,
                                         .epsilon_max = 1,
                                         .epsilon_per_annotator = 5};
    lp_label_privacy raw = privatized, unknown = {0};
    raw.unprivatized = 1;
    raw.epsilon_per_annotator = INFINITY;
    int64_t v_priv = store_model(s, run.id, &privatized), v_raw = store_model(s, run.id, &raw),
            v_unknown = store_model(s, run.id, &unknown);

    lp_learner_opts lo = {.threads = 1};
    lp_learner *l = NULL;
    CHECK_INT(lp_learner_new(s, &lo, &l, err, sizeof err), LP_OK);
    lp_api_opts closed = {.body_max = 65536, .batch_body_max = 65536}, open = closed;
    open.public_score = 1;
    lp_api *api_closed = lp_api_new(s, &closed), *api_open = lp_api_new(s, &open);
    if (l == NULL || api_closed == NULL || api_open == NULL) {
        CHECK(0);
    } else {
        lp_api_set_learner(api_closed, l);
        lp_api_set_learner(api_open, l);
        int e;
        /* nothing served: anonymous callers are told so from the headers */
        CHECK_INT(score_status(api_open, NULL, 0, &e), 409);
        CHECK_INT(e, LP_ENO_ACTIVE_MODEL);
        const int64_t actives[] = {v_priv, v_raw, v_unknown};
        for (size_t k = 0; k < 3; k++) {
            CHECK_INT(lp_learner_activate(l, actives[k]), LP_OK);
            int public = actives[k] == v_priv;
            /* without --public-score: a token, always */
            CHECK_INT(score_status(api_closed, NULL, 0, &e), 401);
            CHECK_INT(score_status(api_closed, "op_wrong", 0, &e), 401);
            CHECK_INT(score_status(api_closed, token, 0, &e), 200);
            /* with it: the active model if privatized, nothing else */
            CHECK_INT(score_status(api_open, NULL, 0, &e), public ? 200 : 403);
            CHECK_INT(e, public ? 0 : LP_EMODEL_NOT_PUBLIC);
            CHECK_INT(score_status(api_open, NULL, actives[k], &e), public ? 200 : 403);
            for (size_t j = 0; j < 3; j++) {
                if (j == k)
                    continue;
                CHECK_INT(score_status(api_open, NULL, actives[j], &e), 403);
                CHECK_INT(e, public ? LP_EMODEL_NOT_ACTIVE : LP_EMODEL_NOT_PUBLIC);
                CHECK_INT(score_status(api_open, token, actives[j], &e), 200); /* admin scope */
                CHECK_INT(score_status(api_open, score_only, actives[j], &e), 403);
                CHECK_INT(e, LP_EMODEL_NOT_ACTIVE);
            }
            /* the researcher's score scope: the served model, whatever its labels */
            CHECK_INT(score_status(api_closed, score_only, 0, &e), 200);
            CHECK_INT(score_status(api_open, score_only, actives[k], &e), 200);
            CHECK_INT(score_status(api_open, score_only, v_unknown + 1, &e), 403);
            CHECK_INT(score_status(api_open, admin_only, 0, &e), 403); /* no score scope */
            CHECK_INT(e, LP_EINSUFFICIENT_SCOPE);
            CHECK_INT(score_status(api_open, NULL, v_unknown + 1, &e), 403); /* no oracle */
            CHECK_INT(score_status(api_open, token, v_unknown + 1, &e), 404);
            CHECK_INT(score_status(api_open, "op_wrong", 0, &e), 401);
            CHECK_INT(score_status(api_open, token, 0, &e), 200);
        }
    }
    lp_api_free(api_closed);
    lp_api_free(api_open);
    lp_learner_free(l);
    store_fixture_close(&fx);
}

/* ---- swaps under concurrent readers ---- */

#define READERS 4
#define SWAPS 3000

static lp_serving slot;
static atomic_int stop;
static atomic_long total_reads; /* by every reader */

struct reader {
    long reads, empty, torn;
};

/* Model v has theta = v * (1, -2, 0.5): the reward of (1, 1, 1) is -0.5 v. */
static void *reader_main(void *arg)
{
    struct reader *r = arg;
    lp_sparse f = {0};
    const double x[3] = {1, 1, 1};
    while (!atomic_load(&stop)) {
        lp_served *sv = lp_serving_acquire(&slot);
        if (sv == NULL) {
            r->empty++;
            continue;
        }
        int64_t v = lp_served_version(sv);
        double reward =
            lp_served_features(sv, NULL, NULL, x, 3, &f) == LP_OK ? lp_served_reward(sv, &f) : NAN;
        r->torn += !(fabs(reward + 0.5 * (double)v) < 1e-12);
        r->reads++;
        atomic_fetch_add(&total_reads, 1);
        lp_served_unref(sv);
    }
    lp_sparse_free(&f);
    return NULL;
}

static void test_swaps(void)
{
    lp_served *models[3] = {NULL, NULL, NULL};
    char msg[256];
    for (int v = 1; v <= 3; v++) {
        char *text = dense_model((double)v, "square-chipo", "chimix");
        CHECK_INT(lp_served_new(v, text, NULL, &models[v - 1], msg, sizeof msg), LP_OK);
        free(text);
        if (models[v - 1] == NULL)
            return;
    }
    lp_serving_init(&slot);
    lp_serving_swap(&slot, models[0]);
    pthread_t th[READERS];
    struct reader rd[READERS];
    memset(rd, 0, sizeof rd);
    atomic_store(&stop, 0);
    for (int i = 0; i < READERS; i++)
        pthread_create(&th[i], NULL, reader_main, &rd[i]);
    /* the readers are running before the swaps start, and keep reading
     * through them: at least SWAPS swaps and SWAPS reads during them (at
     * most 30 s) */
    for (int waited = 0; waited < 30000 && atomic_load(&total_reads) < 100; waited++)
        usleep(1000);
    long before = atomic_load(&total_reads);
    time_t t0 = time(NULL);
    for (int k = 0;
         k < SWAPS || (atomic_load(&total_reads) - before < SWAPS && time(NULL) - t0 < 30); k++)
        lp_serving_swap(&slot, k % 50 == 49 ? NULL : models[k % 3]);
    CHECK(atomic_load(&total_reads) - before >= SWAPS);
    /* the slot's models are dropped: only our references keep them */
    lp_serving_swap(&slot, models[1]);
    for (int v = 0; v < 3; v++) {
        lp_served_unref(models[v]);
        models[v] = NULL;
    }
    lp_served *held = lp_serving_acquire(&slot);
    atomic_store(&stop, 1);
    long reads = 0, torn = 0;
    for (int i = 0; i < READERS; i++) {
        pthread_join(th[i], NULL);
        reads += rd[i].reads;
        torn += rd[i].torn;
    }
    CHECK(reads > 0);
    CHECK_INT(torn, 0);
    lp_serving_destroy(&slot); /* drops the slot's reference; ours remains */
    CHECK(held != NULL);
    if (held != NULL) {
        lp_sparse f = {0};
        const double x[3] = {1, 1, 1};
        CHECK_INT(lp_served_features(held, NULL, NULL, x, 3, &f), LP_OK);
        CHECK_NEAR(lp_served_reward(held, &f), -1.0, 1e-12); /* version 2 */
        CHECK_INT(lp_served_version(held), 2);
        lp_sparse_free(&f);
    }
    lp_served_unref(held);
}

int main(void)
{
    test_dense();
    test_text();
    test_from_record();
    test_score_access();
    test_swaps();
    return check_summary();
}
