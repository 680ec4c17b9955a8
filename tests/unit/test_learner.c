/*
 * test_learner.c — the learner (server/service/retrain.h) on a real store in
 * a temporary file: labels go in through the store's writer, runs train in
 * the learner's worker thread. Checks a run's stored model and its typed
 * provenance (request settings, cut-off, feature plan, the corruption
 * settings in force and the anti model), that the model learned the
 * labellers' preference, that a failed or cancelled run stores no model and
 * leaves the served one, that the activity callback is consulted and pauses
 * the worker, and that a new learner serves the stored active model.
 */
#include "annotators.h"
#include "campaigns.h"
#include "check.h"
#include "clock.h"
#include "error.h"
#include "labels.h"
#include "registry.h"
#include "retrain.h"
#include "store.h"
#include "store_fixture.h"
#include "tasks.h"
#include "train_request.h"

#include <math.h>
#include <sodium.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define N_TASKS 240
#define N_ANNOTATORS 3
#define DIM 3

static store_fixture fx;
static lp_store *s;
static double feats[N_TASKS][2][DIM];
static int truth[N_TASKS]; /* 1: response 1 is better */
static const double THETA_STAR[DIM] = {1.5, -1.0, 0.5};

/* The activity callback: counts its calls; in mode BUSY_FOR it reports a
 * new request on each of its first `busy_calls` calls of the phase. */
static atomic_long activity_calls;
static atomic_long busy_calls;

static uint64_t activity(void *ctx)
{
    (void)ctx;
    long n = atomic_fetch_add(&activity_calls, 1) + 1;
    return n <= atomic_load(&busy_calls) ? (uint64_t)n : 0;
}

static uint64_t next_rand(uint64_t *x) /* splitmix64: a fixed, seeded sequence */
{
    uint64_t z = (*x += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
}

static double uniform(uint64_t *x)
{
    return (double)(next_rand(x) >> 11) / 9007199254740992.0 * 2.0 - 1.0;
}

/* Tasks with dense features; the truth prefers the higher theta*^T f. */
static void load_tasks(void)
{
    uint64_t seed = 42;
    static char ids[N_TASKS][16];
    lp_task_in in[N_TASKS];
    for (int i = 0; i < N_TASKS; i++) {
        double margin = 0;
        for (int j = 0; j < DIM; j++) {
            feats[i][0][j] = uniform(&seed);
            feats[i][1][j] = uniform(&seed);
            margin += THETA_STAR[j] * (feats[i][1][j] - feats[i][0][j]);
        }
        truth[i] = margin > 0;
        snprintf(ids[i], sizeof ids[i], "t%d", i);
        in[i] = (lp_task_in){ids[i], "a prompt",  "first response", "second response",
                             -1,     feats[i][0], feats[i][1],      DIM,
                             NULL,   0,           LP_GOLD_NONE};
    }
    size_t loaded, skipped;
    int64_t first, last;
    CHECK_INT(lp_store_tasks_load(s, 1, in, N_TASKS, &loaded, &skipped, &first, &last), LP_OK);
    CHECK_INT(loaded, N_TASKS);
    CHECK_INT(first, 1);
}

/* Every annotator labels N_TASKS / N_ANNOTATORS tasks with the truth. */
static int64_t label_tasks(void)
{
    int64_t newest = 0;
    for (int a = 0; a < N_ANNOTATORS; a++) {
        uint8_t hash[LP_HASH_BYTES], key[LP_KEY_BYTES];
        randombytes_buf(hash, sizeof hash);
        randombytes_buf(key, sizeof key);
        lp_annotator an;
        CHECK_INT(lp_store_enroll_tokens_add(s, 1, hash, 1), LP_OK);
        CHECK_INT(lp_store_enroll(s, key, hash, &an), LP_OK);
        lp_assignment as[N_TASKS / N_ANNOTATORS];
        size_t n = 0;
        CHECK_INT(lp_store_assign(s, an.id, N_TASKS / N_ANNOTATORS, as, &n), LP_OK);
        CHECK_INT(n, N_TASKS / N_ANNOTATORS);
        lp_label_item items[N_TASKS / N_ANNOTATORS];
        for (size_t i = 0; i < n; i++) {
            memset(&items[i], 0, sizeof items[i]);
            int z = truth[as[i].task_id - 1];
            items[i].annotator = an.id;
            items[i].msg.task_id = as[i].task_id;
            items[i].msg.z = as[i].swapped ? 1 - z : z; /* as presented */
            items[i].msg.epsilon = 5.0;
            randombytes_buf(items[i].msg.nonce, sizeof items[i].msg.nonce);
            items[i].msg.timestamp_ms = lp_now_ms();
            items[i].window_ms = 300000;
        }
        CHECK_INT(lp_store_labels_submit(s, items, n), LP_OK);
        for (size_t i = 0; i < n; i++) {
            CHECK_INT(items[i].rc, LP_OK);
            if (items[i].receipt.label_id > newest)
                newest = items[i].receipt.label_id;
        }
    }
    return newest;
}

static int parse_request(const char *json, lp_train_request *r)
{
    json_t *obj = json ? json_loads(json, 0, NULL) : NULL;
    char msg[256] = "";
    int rc = lp_train_request_parse(s, obj, 1, r, msg, sizeof msg);
    json_decref(obj);
    if (rc != LP_OK)
        fprintf(stderr, "request %s: %s\n", json ? json : "{}", msg);
    return rc;
}

static void sleep_ms(int ms)
{
    struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
}

/* Waits (up to 120 s) until run id is final; returns it. */
static lp_run wait_run(lp_learner *l, int64_t id)
{
    lp_run r = {0};
    for (int waited = 0; waited < 120000; waited += 10) {
        if (lp_learner_run_get(l, id, &r) != LP_OK || lp_run_status_final(r.status))
            break;
        sleep_ms(10);
    }
    CHECK(lp_run_status_final(r.status));
    return r;
}

static int64_t served_version(lp_learner *l)
{
    lp_served *sv = lp_learner_served(l);
    int64_t v = sv ? lp_served_version(sv) : 0;
    lp_served_unref(sv);
    return v;
}

static size_t model_count(lp_learner *l)
{
    lp_model_view *ms = NULL;
    size_t n = 0;
    CHECK_INT(lp_learner_model_list(l, &ms, &n), LP_OK);
    for (size_t i = 0; i < n; i++)
        lp_model_view_clear(&ms[i]);
    free(ms);
    return n;
}

/* Fraction of tasks whose truth the model's rewards agree with. */
static double agreement(lp_served *sv)
{
    int agree = 0;
    lp_sparse f = {0};
    for (int i = 0; i < N_TASKS; i++) {
        double r[2];
        for (int k = 0; k < 2; k++) {
            CHECK_INT(lp_served_features(sv, NULL, NULL, feats[i][k], DIM, &f), LP_OK);
            r[k] = lp_served_reward(sv, &f);
        }
        agree += (r[1] > r[0]) == truth[i];
    }
    lp_sparse_free(&f);
    return (double)agree / N_TASKS;
}

/* A plain run: the stored model, its typed provenance, and what it learned. */
static void test_run(lp_learner *l, int64_t newest)
{
    lp_train_request req;
    CHECK_INT(parse_request("{\"seed\": 7, \"max_iter\": 200, \"l2\": 0.001}", &req), LP_OK);
    lp_run run;
    atomic_store(&activity_calls, 0);
    CHECK_INT(lp_learner_start(l, &req, "manual", &run), LP_OK);
    CHECK_INT(run.status, LP_RUN_QUEUED);
    CHECK_STR(run.settings.loss, "square-chipo");
    CHECK_INT(run.settings.seed, 7);
    lp_run again;
    CHECK_ERR(lp_learner_start(l, &req, "manual", &again), LP_ERETRAIN_IN_PROGRESS);
    run = wait_run(l, run.id);
    CHECK_INT(run.status, LP_RUN_SUCCEEDED);
    CHECK_INT(run.error, 0);
    CHECK_INT(run.cutoff, newest);
    CHECK_INT(run.labels, N_TASKS);
    CHECK(run.model_version > 0);
    CHECK(isfinite(run.objective));
    CHECK(atomic_load(&activity_calls) > 0); /* the worker checked for requests */
    CHECK_INT(served_version(l), run.model_version);

    /* the stored run, read back from the registry */
    lp_run stored;
    CHECK_INT(lp_registry_run_get(s, run.id, &stored), LP_OK);
    CHECK_INT(stored.status, LP_RUN_SUCCEEDED);
    CHECK_INT(stored.model_version, run.model_version);
    CHECK_STR(stored.settings.optimizer, "lbfgs");
    CHECK_STR(stored.settings.features, "auto");
    CHECK_INT(stored.settings.max_iter, 200);
    CHECK(stored.settings.l2 == 0.001);
    CHECK(isinf(stored.settings.norm_bound));
    CHECK_INT(stored.settings.cutoff, 0); /* asked: the newest label at start */

    lp_model_view m;
    CHECK_INT(lp_learner_model_get(l, run.model_version, &m), LP_OK);
    CHECK_INT(m.run, run.id);
    CHECK_INT(m.loss, LP_LOSS_SQUARE_CHIPO);
    CHECK_INT(m.campaign, 0);
    CHECK_INT(m.cutoff, newest);
    CHECK_INT(m.labels, N_TASKS);
    CHECK_INT(m.features, LP_FEATURES_DENSE);
    CHECK_INT(m.dim, DIM);
    CHECK_INT(m.request.fit.seed, 7);
    CHECK_INT(m.request.fit.max_iter, 200);
    CHECK_INT(m.request.activate, 1);
    CHECK_INT(m.n_corruption, 0);
    CHECK_INT(m.anti_model, 0);
    CHECK(m.summary != NULL && strstr(m.summary, "\"theta\"") == NULL);
    CHECK(m.model != NULL && strstr(m.model, "\"theta\"") != NULL);
    lp_model_view_clear(&m);
    lp_model_view_clear(&m); /* idempotent */

    lp_served *sv = NULL;
    CHECK_INT(lp_learner_model(l, run.model_version, &sv), LP_OK);
    double acc = sv ? agreement(sv) : 0;
    CHECK(acc >= 0.9); /* noiseless labels of a linear preference */
    if (acc < 0.9)
        fprintf(stderr, "agreement with the truth: %.3f\n", acc);
    lp_served_unref(sv);
}

/* A text run under corruption settings (anti asks the served model), not
 * activated; the activity callback reports requests for a while, and the
 * worker pauses meanwhile. */
static void test_corrupted_text_run(lp_learner *l)
{
    int64_t served = served_version(l);
    lp_corruption cs = {.campaign = 1, .alpha = 0.2, .strategy = LP_ADV_ANTI, .seed = 3};
    CHECK_INT(lp_registry_corruption_add(s, &cs), LP_OK);
    lp_train_request req;
    CHECK_INT(parse_request("{\"features\": \"text\", \"text\": {\"dim\": 64, \"bigrams\": false}, "
                            "\"campaign\": \"default\", \"activate\": false, \"max_iter\": 50}",
                            &req),
              LP_OK);
    atomic_store(&activity_calls, 0);
    atomic_store(&busy_calls, 20);
    lp_run run;
    CHECK_INT(lp_learner_start(l, &req, "labels", &run), LP_OK);
    run = wait_run(l, run.id);
    atomic_store(&busy_calls, 0);
    CHECK_INT(run.status, LP_RUN_SUCCEEDED);
    /* 20 changing answers: the worker slept at least 19 quiet windows of 5 ms */
    CHECK(atomic_load(&activity_calls) >= 20);
    CHECK(run.finished_ms - run.started_ms >= 95);
    CHECK_STR(run.trigger, "labels");
    CHECK_INT(served_version(l), served); /* activate: false */

    lp_model_view m;
    CHECK_INT(lp_learner_model_get(l, run.model_version, &m), LP_OK);
    CHECK_INT(m.campaign, 1);
    CHECK_STR(m.campaign_name, "default");
    CHECK_INT(m.features, LP_FEATURES_TEXT);
    CHECK_INT(m.text.hash_dim, 64);
    CHECK_INT(m.text.bigrams, 0);
    CHECK_INT(m.text.length, 1);
    CHECK_INT(m.dim, 66);
    CHECK_INT(m.request.features, LP_FEATURES_TEXT);
    CHECK_INT(m.request.activate, 0);
    CHECK_INT(m.request.campaign, 1);
    CHECK_INT(m.n_corruption, 1);
    if (m.n_corruption == 1) {
        CHECK_INT(m.corruption[0].id, cs.id);
        CHECK_INT(m.corruption[0].strategy, LP_ADV_ANTI);
        CHECK(m.corruption[0].alpha == 0.2);
        CHECK_INT(m.corruption[0].seed, 3);
        CHECK_STR(m.corruption[0].campaign_name, "default");
    }
    CHECK_INT(m.anti_model, served); /* the model anti asked */
    lp_model_view_clear(&m);

    /* settings with alpha 0 are no longer in force for later runs */
    lp_corruption off = {.campaign = 1, .alpha = 0.0, .strategy = LP_ADV_FLIP};
    CHECK_INT(lp_registry_corruption_add(s, &off), LP_OK);
}

/* A failed run and a cancelled one store no model and keep the served one. */
static void test_failed_and_cancelled(lp_learner *l)
{
    int64_t served = served_version(l);
    size_t models = model_count(l);
    lp_campaign empty = {0};
    snprintf(empty.name, sizeof empty.name, "empty");
    empty.epsilon_min = 0.1;
    empty.epsilon_max = 1;
    empty.epsilon_budget = 10;
    empty.epsilon_default = 1;
    CHECK_INT(lp_store_campaign_create(s, &empty), LP_OK);
    lp_train_request req;
    CHECK_INT(parse_request("{\"campaign\": \"empty\"}", &req), LP_OK);
    lp_run run;
    CHECK_INT(lp_learner_start(l, &req, "manual", &run), LP_OK);
    run = wait_run(l, run.id);
    CHECK_INT(run.status, LP_RUN_FAILED);
    CHECK_ERR(run.error, LP_ENO_LABELS);
    CHECK_INT(run.model_version, 0);
    CHECK_INT(served_version(l), served);
    CHECK_INT(model_count(l), models);

    /* cancelled while the worker pauses for requests that keep coming */
    CHECK_INT(parse_request("{\"max_iter\": 100000, \"l2\": 0}", &req), LP_OK);
    atomic_store(&activity_calls, 0);
    atomic_store(&busy_calls, 1L << 40);
    CHECK_INT(lp_learner_start(l, &req, "manual", &run), LP_OK);
    for (int waited = 0; waited < 30000 && atomic_load(&activity_calls) < 10; waited += 5)
        sleep_ms(5);
    CHECK(atomic_load(&activity_calls) >= 10);
    lp_run now;
    CHECK_INT(lp_learner_run_get(l, run.id, &now), LP_OK);
    CHECK(!lp_run_status_final(now.status)); /* paused, not finished */
    CHECK_INT(lp_learner_cancel(l, run.id, &now), LP_OK);
    run = wait_run(l, run.id);
    atomic_store(&busy_calls, 0);
    CHECK_INT(run.status, LP_RUN_CANCELLED);
    CHECK_ERR(run.error, LP_ECANCELLED);
    CHECK_INT(run.model_version, 0);
    CHECK_ERR(lp_learner_cancel(l, run.id, &now), LP_ERUN_FINISHED);
    CHECK_ERR(lp_learner_cancel(l, 99999, &now), LP_EUNKNOWN_RUN);
    CHECK_INT(served_version(l), served);
    CHECK_INT(model_count(l), models);
    lp_model_view m;
    CHECK_ERR(lp_learner_model_get(l, 99999, &m), LP_EUNKNOWN_MODEL);
    CHECK_ERR(lp_learner_activate(l, 99999), LP_EUNKNOWN_MODEL);
}

/* The schedule's settings round-trip through their typed record. */
static void test_schedule_settings(void)
{
    lp_schedule none;
    CHECK_INT(lp_registry_schedule_get(s, &none), LP_OK);
    CHECK_INT(none.has_settings, 0);
    CHECK_INT(none.interval_s, 0);
    lp_train_request req, back;
    CHECK_INT(parse_request("{\"loss\": \"rr-sgd\", \"campaign\": \"empty\", \"norm_bound\": 4, "
                            "\"lr\": 0.25, \"epochs\": 3, \"batch\": 8, \"threads\": 2, \"seed\": "
                            "9007199254740992, \"text\": {\"cross_prompt\": true}}",
                            &req),
              LP_OK);
    lp_schedule sc = {.interval_s = 60, .every_labels = 5, .has_settings = 1};
    lp_train_settings_from_request(&req, &sc.settings);
    CHECK_INT(lp_registry_schedule_set(s, &sc), LP_OK);
    lp_schedule got;
    CHECK_INT(lp_registry_schedule_get(s, &got), LP_OK);
    CHECK_INT(got.has_settings, 1);
    CHECK_INT(got.interval_s, 60);
    CHECK_INT(got.every_labels, 5);
    CHECK_INT(lp_train_request_from_settings(&got.settings, &back), LP_OK);
    json_t *a = lp_train_request_json(&req), *b = lp_train_request_json(&back);
    char *ta = json_dumps(a, JSON_COMPACT), *tb = json_dumps(b, JSON_COMPACT);
    CHECK_STR(ta, tb);
    CHECK(strstr(tb, "\"campaign\":\"empty\"") != NULL && strstr(tb, "\"optimizer\":\"sgd\""));
    free(ta);
    free(tb);
    json_decref(a);
    json_decref(b);
    lp_train_settings bad = got.settings;
    snprintf(bad.loss, sizeof bad.loss, "nope");
    CHECK_ERR(lp_train_request_from_settings(&bad, &back), LP_EINVALID_ARGUMENT);
}

int main(void)
{
    if (store_fixture_open(&fx, "test-learner", 2) != LP_OK)
        return 1;
    s = fx.store;
    char err[256];
    load_tasks();
    int64_t newest = label_tasks();
    lp_learner_opts lo = {.threads = 1, .scheduler = 0, .activity = activity};
    lp_learner *l = NULL;
    CHECK_INT(lp_learner_new(s, &lo, &l, err, sizeof err), LP_OK);
    CHECK_INT(served_version(l), 0);
    if (l != NULL) {
        test_run(l, newest);
        test_corrupted_text_run(l);
        test_failed_and_cancelled(l);
    }
    int64_t served = l ? served_version(l) : -1;
    lp_learner_free(l);
    lp_learner_free(NULL);
    test_schedule_settings();

    /* a new learner serves the stored active model */
    CHECK_INT(lp_learner_new(s, &lo, &l, err, sizeof err), LP_OK);
    CHECK_INT(served_version(l), served);
    lp_learner_free(l);

    store_fixture_close(&fx);
    return check_summary();
}
