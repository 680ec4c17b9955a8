/*
 * e2e_central.c — trusted-curator (central) campaigns and user-level
 * accounting, through the real client library, the ldpref CLI and a real
 * server (started with --public-score):
 *
 *  1. Campaign settings are checked against each other: a central campaign
 *     needs a finite release budget; a release budget needs a central
 *     campaign; a contribution cap is the quota and, in a local campaign,
 *     proposes the user-level budget / m per label; conflicts are named.
 *  2. In a central campaign an annotator who opted in (per-label cap
 *     infinite) sends true labels: recorded on the wire, epsilon null and
 *     z equal to the true answer; the client says so before answering.
 *     The same opted-in handle in a local campaign still randomizes
 *     (finite epsilon on the wire): a campaign's setting alone never
 *     makes a client send raw labels.
 *  3. A retrain of the central campaign needs a mechanism; the exponential
 *     release stores a model with its record (mechanism, epsilon, the
 *     candidate set), spends the budget, and a release that does not fit
 *     is refused before any run starts. Releases fired concurrently from
 *     many threads never spend more than the budget.
 *  4. The central campaign's labels are never served: export (API and
 *     CLI), the model's training view and label quality are refused, and
 *     an export or retrain of all campaigns leaves them out.
 *  5. A released model is public (--public-score); `ldpref admin models`
 *     shows the release; a local model records its user-level epsilon.
 *  6. The operator console (headless Chromium) shows the campaign's trust
 *     and release budget, the model's release, and no label quality of the
 *     central campaign; screenshots console-central-*.png.
 */
#include "annotator_client.h"
#include "cdp.h"
#include "check.h"
#include "console_page.h"
#include "error.h"
#include "http_raw.h"
#include "ldpref.h"
#include "operator_client.h"
#include "server_proc.h"
#include "tcp_proxy.h"

#include <jansson.h>
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define N_CENTRAL 60 /* labels of the central campaign */

static server_proc srv;
/* The operator's CLI environment (set in main). */
static char env_token[300], env_server[128];
static const char *operator_env[] = {env_token, env_server, NULL};

/* The error name of a reply, "" when none. */
static const char *error_name(const json_t *j)
{
    const char *e = json_string_value(json_object_get(j, "error"));
    return e ? e : "";
}

/* A request that must fail with the error named like code. */
static void expect_error(const char *method, const char *path, const char *body, int code)
{
    long st = 0;
    json_t *j = operator_call(&srv, method, path, body, &st);
    CHECK_STR(error_name(j), lp_error_name(code));
    CHECK_INT(st, lp_error_http_status(code));
    json_decref(j);
}

/* Tasks "<tag><k>" of campaign with dense features (d = 2). */
static void load_tasks(ldpref_client *op, const char *campaign, const char *tag, int n)
{
    char path[400];
    snprintf(path, sizeof path, "%s/%s.jsonl", srv.dir, tag);
    FILE *f = fopen(path, "w");
    for (int k = 0; k < n; k++)
        fprintf(f,
                "{\"id\":\"%s%d\",\"prompt\":\"%s prompt %d\",\"responses\":[\"short %d\","
                "\"longer answer %d\"],\"features\":[[%d,1],[0,%d]]}\n",
                tag, k, tag, k, k, k, k % 3, 1 + k % 2);
    fclose(f);
    CHECK_ERR(ldpref_admin_tasks_load(op, path, campaign, NULL), LP_OK);
}

static ldpref_client *annotator(ldpref_client *op, const char *campaign, const char *name,
                                const char *url, double cap)
{
    char key[400], file[128];
    snprintf(file, sizeof file, "%s.key", name);
    if (annotator_key_ensure(srv.dir, file, key, sizeof key) != LDPREF_OK)
        return NULL;
    ldpref_options o;
    annotator_options_init(&o, url, key, cap, INFINITY);
    ldpref_client *c = NULL;
    if (ldpref_client_open(&o, &c) != LDPREF_OK)
        return NULL;
    char *json = NULL;
    CHECK_ERR(ldpref_admin_enrollment_tokens(op, campaign, 1, &json), LP_OK);
    char *t = first_enrollment_token(json);
    ldpref_free(json);
    CHECK_ERR(ldpref_enroll(c, t, NULL), LP_OK);
    free(t);
    return c;
}

/* The campaign object of GET /v1/campaigns named name (new reference). */
static json_t *campaign_get(const char *name)
{
    long st = 0;
    json_t *j = operator_call(&srv, "GET", "/v1/campaigns", NULL, &st), *found = NULL;
    size_t i;
    json_t *c;
    json_array_foreach(json_object_get(j, "campaigns"), i, c)
    {
        if (strcmp(json_string_value(json_object_get(c, "name")), name) == 0)
            found = json_incref(c);
    }
    json_decref(j);
    return found;
}

static void test_settings(void)
{
    long st = 0;
    expect_error("POST", "/v1/campaigns", "{\"name\":\"c0\",\"trust\":\"central\"}",
                 LP_EBAD_CAMPAIGN_SETTINGS);
    expect_error("POST", "/v1/campaigns", "{\"name\":\"c0\",\"trust\":\"cloud\"}",
                 LP_EBAD_CAMPAIGN_SETTINGS);
    expect_error("POST", "/v1/campaigns",
                 "{\"name\":\"c0\",\"trust\":\"central\",\"release_epsilon\":null}",
                 LP_EBAD_CAMPAIGN_SETTINGS);
    expect_error("POST", "/v1/campaigns", "{\"name\":\"c0\",\"release_epsilon\":2}",
                 LP_EBAD_CAMPAIGN_SETTINGS);
    expect_error("POST", "/v1/campaigns",
                 "{\"name\":\"c0\",\"trust\":\"central\",\"release_epsilon\":2,"
                 "\"epsilon_default\":1}",
                 LP_EBAD_CAMPAIGN_SETTINGS);
    expect_error("POST", "/v1/campaigns",
                 "{\"name\":\"c0\",\"epsilon_budget\":10,\"contribution_cap\":20,"
                 "\"epsilon_default\":1}",
                 LP_EBAD_CAMPAIGN_SETTINGS);
    expect_error("POST", "/v1/campaigns",
                 "{\"name\":\"c0\",\"contribution_cap\":20,\"annotator_quota\":5}",
                 LP_EBAD_CAMPAIGN_SETTINGS);
    expect_error("POST", "/v1/campaigns", /* 1000 / 2 per label is above epsilon_max 10 */
                 "{\"name\":\"c0\",\"contribution_cap\":2}", LP_EBAD_CAMPAIGN_SETTINGS);
    CHECK(campaign_get("c0") == NULL); /* nothing stored from a rejected request */

    /* the CLI: a central campaign and a capped local one */
    const char *central[] = {"ldpref",  "admin",   "campaign-create",   "central1",
                             "--trust", "central", "--release-epsilon", "2.5",
                             NULL};
    const char *capped[] = {"ldpref",   "admin", "campaign-create",    "capped",
                            "--budget", "1.5",   "--contribution-cap", "3",
                            NULL};
    char *out = NULL;
    CHECK_INT(run_tool(central, operator_env, &out), 0);
    free(out);
    out = NULL;
    CHECK_INT(run_tool(capped, operator_env, &out), 0);
    free(out);
    json_t *c = campaign_get("central1");
    CHECK_STR(json_string_value(json_object_get(c, "trust")), "central");
    CHECK_NEAR(json_number_value(json_object_get(c, "release_epsilon")), 2.5, 0);
    CHECK_NEAR(json_number_value(json_object_get(c, "release_epsilon_spent")), 0, 0);
    CHECK(json_is_null(json_object_get(c, "epsilon_default"))); /* true answers */
    CHECK(json_is_true(json_object_get(c, "allow_infinite")));
    json_decref(c);
    c = campaign_get("capped");
    CHECK_STR(json_string_value(json_object_get(c, "trust")), "local");
    CHECK_INT(json_integer_value(json_object_get(c, "contribution_cap")), 3);
    CHECK_INT(json_integer_value(json_object_get(c, "annotator_quota")), 3);
    CHECK_NEAR(json_number_value(json_object_get(c, "epsilon_default")), 0.5, 1e-12);
    json_decref(c);
    json_decref(operator_call(&srv, "POST", "/v1/campaigns",
                              "{\"name\":\"race\",\"trust\":\"central\",\"release_epsilon\":2}",
                              &st));
    CHECK_INT(st, 201);
    /* the budget update: only central campaigns, never below what was spent */
    expect_error("POST", "/v1/campaigns/update", "{\"name\":\"capped\",\"release_epsilon\":3}",
                 LP_EBAD_CAMPAIGN_SETTINGS);
    json_t *u = operator_call(&srv, "POST", "/v1/campaigns/update",
                              "{\"name\":\"central1\",\"release_epsilon\":3}", &st);
    CHECK_INT(st, 200);
    CHECK_NEAR(json_number_value(json_object_get(u, "release_epsilon")), 3, 0);
    json_decref(u);
}

/* Central: true answers on the wire, the client's notice. */
static void test_central_labels(ldpref_client *op)
{
    tcp_proxy proxy;
    CHECK(tcp_proxy_start(&proxy, srv.port) == 0);
    char url[64];
    snprintf(url, sizeof url, "http://127.0.0.1:%d", proxy.port);
    ldpref_client *c = annotator(op, "central1", "true-answers", url, INFINITY);
    CHECK(c != NULL);
    if (c == NULL)
        return;
    ldpref_task *tasks = NULL;
    size_t n = 0;
    CHECK_ERR(ldpref_next_tasks(c, N_CENTRAL, &tasks, &n), LP_OK);
    CHECK_INT(n, N_CENTRAL);
    int central = 0, raw = 0;
    for (size_t i = 0; i < n; i++) {
        central += ldpref_task_central(c, &tasks[i]);
        raw += ldpref_task_sends_true_answer(c, &tasks[i]);
        ldpref_receipt r;
        /* the true answer: the longer response */
        int b_longer = strncmp(tasks[i].b, "longer", 6) == 0;
        CHECK_ERR(ldpref_answer(c, &tasks[i], b_longer, &r), LP_OK);
    }
    CHECK_INT(central, N_CENTRAL);
    CHECK_INT(raw, N_CENTRAL);
    ldpref_tasks_free(tasks, n);
    ldpref_client_close(c);
    json_t *bodies = tcp_proxy_bodies(&proxy, "POST /v1/labels ");
    CHECK_INT(json_array_size(bodies), N_CENTRAL);
    size_t i;
    json_t *b;
    int unrandomized = 0;
    json_array_foreach(bodies, i, b)
    {
        unrandomized += json_is_null(json_object_get(b, "epsilon"));
    }
    CHECK_INT(unrandomized, N_CENTRAL);
    json_decref(bodies);
    tcp_proxy_stop(&proxy);
    /* every stored label is the true answer: z names the longer response */
    CHECK_INT(server_db_scalar(&srv,
                               "SELECT count(*) FROM labels l JOIN tasks t ON t.id = l.task "
                               "JOIN campaigns c ON c.id = t.campaign WHERE c.name = ?1 AND "
                               "l.epsilon IS NULL AND l.z_task = 1",
                               "central1"),
              N_CENTRAL);
}

/* The same opted-in handle settings in a local campaign still randomize. */
static void test_local_still_randomizes(ldpref_client *op)
{
    tcp_proxy proxy;
    CHECK(tcp_proxy_start(&proxy, srv.port) == 0);
    char url[64];
    snprintf(url, sizeof url, "http://127.0.0.1:%d", proxy.port);
    ldpref_client *c = annotator(op, NULL, "local-opted-in", url, INFINITY);
    CHECK(c != NULL);
    if (c == NULL)
        return;
    ldpref_task *tasks = NULL;
    size_t n = 0;
    CHECK_ERR(ldpref_next_tasks(c, 10, &tasks, &n), LP_OK);
    CHECK_INT(n, 10);
    for (size_t i = 0; i < n; i++) {
        CHECK_INT(ldpref_task_central(c, &tasks[i]), 0);
        CHECK_INT(ldpref_task_sends_true_answer(c, &tasks[i]), 0);
        ldpref_receipt r;
        CHECK_ERR(ldpref_answer(c, &tasks[i], 1, &r), LP_OK);
    }
    ldpref_tasks_free(tasks, n);
    ldpref_client_close(c);
    json_t *bodies = tcp_proxy_bodies(&proxy, "POST /v1/labels ");
    CHECK_INT(json_array_size(bodies), 10);
    size_t i;
    json_t *b;
    int finite = 0;
    json_array_foreach(bodies, i, b)
    {
        const json_t *e = json_object_get(b, "epsilon");
        finite += json_is_number(e) && isfinite(json_number_value(e)) && json_number_value(e) <= 1;
    }
    CHECK_INT(finite, 10);
    json_decref(bodies);
    tcp_proxy_stop(&proxy);
}

/* Starts a retrain; the run id, or 0 (the reply's error into err). */
static int64_t retrain(const char *body, char *err, size_t errlen)
{
    long st = 0;
    json_t *j = operator_call(&srv, "POST", "/v1/retrain", body, &st);
    int64_t run = json_integer_value(json_object_get(j, "run"));
    if (err != NULL)
        snprintf(err, errlen, "%s", error_name(j));
    json_decref(j);
    return st == 202 ? run : 0;
}

/* The model version of a run that must succeed. */
static int64_t run_model(int64_t run)
{
    json_t *r = operator_run_wait(&srv, run, 120);
    const char *status = json_string_value(json_object_get(r, "status"));
    CHECK_STR(status ? status : "", "succeeded");
    int64_t v = json_integer_value(json_object_get(r, "model_version"));
    if (v == 0)
        fprintf(stderr, "run %lld: %s\n", (long long)run,
                json_dumps(r, JSON_COMPACT) ? "see above" : "");
    json_decref(r);
    return v;
}

static json_t *model_get(int64_t v)
{
    char path[64];
    snprintf(path, sizeof path, "/v1/models?version=%lld", (long long)v);
    long st = 0;
    json_t *j = operator_call(&srv, "GET", path, NULL, &st);
    CHECK_INT(st, 200);
    return j;
}

static int64_t test_release(void)
{
    expect_error("POST", "/v1/retrain", "{\"campaign\":\"central1\"}", LP_ECENTRAL_NEEDS_MECHANISM);
    expect_error("POST", "/v1/retrain",
                 "{\"campaign\":\"capped\",\"mechanism\":\"exponential\",\"epsilon\":1}",
                 LP_EMECHANISM_NEEDS_CENTRAL);
    expect_error("POST", "/v1/retrain", "{\"mechanism\":\"exponential\",\"epsilon\":1}",
                 LP_EMECHANISM_NEEDS_CENTRAL);
    expect_error("POST", "/v1/retrain",
                 "{\"campaign\":\"central1\",\"mechanism\":\"exponential\",\"epsilon\":null}",
                 LP_EBAD_EPSILON);
    expect_error("POST", "/v1/retrain",
                 "{\"campaign\":\"central1\",\"mechanism\":\"aup\",\"epsilon\":1}",
                 LP_EBAD_HYPERPARAMETER);
    expect_error("POST", "/v1/retrain",
                 "{\"campaign\":\"central1\",\"mechanism\":\"laplace\",\"epsilon\":1}",
                 LP_EBAD_HYPERPARAMETER);
    expect_error("POST", "/v1/retrain", /* 3.5 > the budget of 3 */
                 "{\"campaign\":\"central1\",\"mechanism\":\"exponential\",\"epsilon\":3.5}",
                 LP_ERELEASE_BUDGET_EXHAUSTED);
    long long runs = server_db_count(&srv, "training_runs");
    CHECK_INT(runs, 0); /* refused before any work */

    int64_t run = retrain("{\"campaign\":\"central1\",\"mechanism\":\"exponential\","
                          "\"epsilon\":2,\"candidates\":\"grid:9\",\"norm_bound\":2}",
                          NULL, 0);
    CHECK(run > 0);
    int64_t v = run > 0 ? run_model(run) : 0;
    CHECK(v > 0);
    json_t *m = model_get(v);
    json_t *p = json_object_get(m, "privacy");
    CHECK_STR(json_string_value(json_object_get(p, "mechanism")), "exponential");
    CHECK_NEAR(json_number_value(json_object_get(p, "release_epsilon")), 2, 0);
    CHECK_NEAR(json_number_value(json_object_get(p, "release_delta")), 0, 0);
    CHECK(json_is_true(json_object_get(p, "public")));
    CHECK(json_is_false(json_object_get(p, "privatized"))); /* its labels were true answers */
    CHECK_INT(json_integer_value(json_object_get(p, "unprivatized_labels")), N_CENTRAL);
    json_t *rel = json_object_get(m, "release");
    CHECK_STR(json_string_value(json_object_get(rel, "mechanism")), "exponential");
    CHECK(json_is_object(json_object_get(rel, "candidates"))); /* the set's definition */
    json_decref(m);
    json_t *c = campaign_get("central1");
    CHECK_NEAR(json_number_value(json_object_get(c, "release_epsilon_spent")), 2, 1e-12);
    json_decref(c);
    /* 1.5 more does not fit 3 - 2: refused, no run */
    char err[64];
    CHECK_INT(retrain("{\"campaign\":\"central1\",\"mechanism\":\"exponential\",\"epsilon\":1.5}",
                      err, sizeof err),
              0);
    CHECK_STR(err, "release_budget_exhausted");
    CHECK_INT(server_db_count(&srv, "training_runs"), 1);
    /* exactly the rest fits */
    run = retrain("{\"campaign\":\"central1\",\"mechanism\":\"exponential\",\"epsilon\":1,"
                  "\"activate\":false}",
                  NULL, 0);
    CHECK(run > 0);
    if (run > 0)
        CHECK(run_model(run) > 0);
    expect_error("POST", "/v1/retrain",
                 "{\"campaign\":\"central1\",\"mechanism\":\"exponential\",\"epsilon\":0.01}",
                 LP_ERELEASE_BUDGET_EXHAUSTED);
    expect_error("POST", "/v1/campaigns/update", "{\"name\":\"central1\",\"release_epsilon\":2}",
                 LP_EBAD_CAMPAIGN_SETTINGS); /* below the 3 spent */
    return v;
}

/* Threads asking for releases of 0.5 from the "race" campaign (budget 2)
 * until the budget is refused. */
#define RACERS 6
static void *racer(void *arg)
{
    int *refused = arg;
    for (int tries = 0; tries < 2000 && !*refused; tries++) {
        char err[64];
        int64_t run = retrain("{\"campaign\":\"race\",\"mechanism\":\"exponential\","
                              "\"epsilon\":0.5,\"activate\":false}",
                              err, sizeof err);
        if (run > 0)
            json_decref(operator_run_wait(&srv, run, 120));
        else if (strcmp(err, "release_budget_exhausted") == 0)
            *refused = 1;
        else
            usleep(20000); /* another run is active */
    }
    return NULL;
}

static void test_concurrent_releases(ldpref_client *op)
{
    load_tasks(op, "race", "r", 20);
    ldpref_client *c = annotator(op, "race", "racer", srv.url, INFINITY);
    ldpref_task *tasks = NULL;
    size_t n = 0;
    CHECK_ERR(ldpref_next_tasks(c, 20, &tasks, &n), LP_OK);
    for (size_t i = 0; i < n; i++) {
        ldpref_receipt r;
        CHECK_ERR(ldpref_answer(c, &tasks[i], (int)(i % 2), &r), LP_OK);
    }
    ldpref_tasks_free(tasks, n);
    ldpref_client_close(c);
    pthread_t th[RACERS];
    int refused[RACERS] = {0};
    for (int k = 0; k < RACERS; k++)
        pthread_create(&th[k], NULL, racer, &refused[k]);
    for (int k = 0; k < RACERS; k++)
        pthread_join(th[k], NULL);
    int all_refused = 0;
    for (int k = 0; k < RACERS; k++)
        all_refused += refused[k];
    CHECK_INT(all_refused, RACERS);
    CHECK_INT(server_db_scalar(&srv,
                               "SELECT count(*) FROM models m JOIN campaigns c ON "
                               "c.id = m.campaign WHERE c.name = ?1",
                               "race"),
              4);
    json_t *cj = campaign_get("race");
    CHECK_NEAR(json_number_value(json_object_get(cj, "release_epsilon_spent")), 2, 1e-12);
    json_decref(cj);
}

static void test_never_served(int64_t central_model)
{
    expect_error("GET", "/v1/export?campaign=central1", NULL, LP_ECENTRAL_LABELS_PRIVATE);
    expect_error("GET", "/v1/quality?campaign=central1", NULL, LP_ECENTRAL_LABELS_PRIVATE);
    char path[128];
    snprintf(path, sizeof path, "/v1/export?view=corrupted&version=%lld", (long long)central_model);
    expect_error("GET", path, NULL, LP_ECENTRAL_LABELS_PRIVATE);
    /* the export of every campaign leaves the central ones out */
    const char *argv[] = {"ldpref", "admin", "export", NULL};
    char *out = NULL;
    CHECK_INT(run_tool(argv, operator_env, &out), 0);
    CHECK(out != NULL && strstr(out, "\"campaign\":\"default\"") != NULL);
    CHECK(out != NULL && strstr(out, "central1") == NULL && strstr(out, "race") == NULL);
    free(out);
    out = NULL;
    const char *refused[] = {"ldpref", "admin", "export", "--campaign", "central1", NULL};
    CHECK_INT(run_tool(refused, operator_env, &out), LP_ECENTRAL_LABELS_PRIVATE);
    CHECK(out == NULL || strstr(out, "longer answer") == NULL);
    free(out);
    /* a retrain of every campaign reads the local labels only */
    int64_t run = retrain("{\"activate\":false,\"l2\":0.1}", NULL, 0);
    int64_t v = run > 0 ? run_model(run) : 0;
    json_t *m = model_get(v);
    json_t *p = json_object_get(m, "privacy");
    CHECK_INT(json_integer_value(json_object_get(p, "unprivatized_labels")), 0);
    CHECK_INT(json_integer_value(json_object_get(m, "labels")),
              server_db_scalar(&srv,
                               "SELECT count(*) FROM labels l JOIN tasks t ON t.id = l.task "
                               "JOIN campaigns c ON c.id = t.campaign WHERE c.trust = ?1",
                               "local"));
    json_decref(m);
}

/* AUP-RLHF: user-level (epsilon, delta) releases of a campaign with a
 * contribution cap. Its calibration needs enough annotators: a release over
 * too few fails and spends nothing; with enough it stores a model whose
 * record spends epsilon and delta; delta is then the limit. */
#define AUP_ANNOTATORS 240 /* about 236 needed at epsilon 8, delta 0.1, 100 steps */
#define AUP_FIRST 100

static void aup_annotators(ldpref_client *op, int from, int to)
{
    for (int k = from; k < to; k++) {
        char name[32];
        snprintf(name, sizeof name, "aup-%d", k);
        ldpref_client *c = annotator(op, "aupc", name, srv.url, INFINITY);
        ldpref_task *tasks = NULL;
        size_t n = 0;
        if (c != NULL && ldpref_next_tasks(c, 2, &tasks, &n) == LDPREF_OK)
            for (size_t i = 0; i < n; i++) {
                ldpref_receipt r;
                CHECK_ERR(ldpref_answer(c, &tasks[i], strncmp(tasks[i].b, "longer", 6) == 0, &r),
                          LP_OK);
            }
        ldpref_tasks_free(tasks, n);
        ldpref_client_close(c);
    }
}

static void test_aup_release(ldpref_client *op)
{
    long st = 0;
    json_decref(operator_call(&srv, "POST", "/v1/campaigns",
                              "{\"name\":\"aupc\",\"trust\":\"central\",\"release_epsilon\":20,"
                              "\"release_delta\":0.2,\"contribution_cap\":2,"
                              "\"labels_per_task\":240}",
                              &st));
    CHECK_INT(st, 201);
    load_tasks(op, "aupc", "aup", 4);
    aup_annotators(op, 0, AUP_FIRST);
    const char *req = "{\"campaign\":\"aupc\",\"mechanism\":\"aup\",\"epsilon\":8,"
                      "\"delta\":0.1,\"activate\":false}";
    int64_t run = retrain(req, NULL, 0);
    json_t *r = run > 0 ? operator_run_wait(&srv, run, 300) : NULL;
    CHECK_STR(json_string_value(json_object_get(r, "status")), "failed");
    const char *why = json_string_value(json_object_get(json_object_get(r, "error"), "message"));
    fprintf(stderr, "the release over %d annotators: %s\n", AUP_FIRST, why ? why : "");
    check_record(why != NULL && strstr(why, "too few") != NULL, __FILE__, __LINE__,
                 "a release over too few annotators says why: %s", why ? why : "(none)");
    json_decref(r);
    json_t *c = campaign_get("aupc");
    CHECK_NEAR(json_number_value(json_object_get(c, "release_delta_spent")), 0, 0);
    json_decref(c);

    aup_annotators(op, AUP_FIRST, AUP_ANNOTATORS);
    run = retrain(req, NULL, 0);
    int64_t v = run > 0 ? run_model(run) : 0;
    CHECK(v > 0);
    json_t *m = model_get(v);
    json_t *p = json_object_get(m, "privacy");
    CHECK_STR(json_string_value(json_object_get(p, "mechanism")), "aup");
    CHECK_NEAR(json_number_value(json_object_get(p, "release_epsilon")), 8, 0);
    CHECK_NEAR(json_number_value(json_object_get(p, "release_delta")), 0.1, 0);
    CHECK_INT(json_integer_value(json_object_get(p, "annotators")), AUP_ANNOTATORS);
    CHECK_STR(json_string_value(json_object_get(json_object_get(m, "release"), "mechanism")),
              "aup");
    json_decref(m);
    c = campaign_get("aupc");
    CHECK_NEAR(json_number_value(json_object_get(c, "release_epsilon_spent")), 8, 1e-12);
    CHECK_NEAR(json_number_value(json_object_get(c, "release_delta_spent")), 0.1, 1e-12);
    json_decref(c);
    /* epsilon would fit (16 of 20) but delta does not (0.1 + 0.15 > 0.2) */
    expect_error("POST", "/v1/retrain",
                 "{\"campaign\":\"aupc\",\"mechanism\":\"aup\",\"epsilon\":8,"
                 "\"delta\":0.15}",
                 LP_ERELEASE_BUDGET_EXHAUSTED);
    /* a pure release spends no delta and still fits */
    run = retrain("{\"campaign\":\"aupc\",\"mechanism\":\"exponential\",\"epsilon\":4,"
                  "\"activate\":false}",
                  NULL, 0);
    CHECK(run > 0 && run_model(run) > 0);
}

/* A released model is public; the CLI lists its release. */
static void test_public_and_listed(int64_t central_model)
{
    char url[128];
    snprintf(url, sizeof url, "/v1/models/activate");
    char body[64];
    snprintf(body, sizeof body, "{\"version\":%lld}", (long long)central_model);
    long st = 0;
    json_decref(operator_call(&srv, "POST", url, body, &st));
    CHECK_INT(st, 200);
    /* anonymous: no token at all */
    char score_url[128];
    snprintf(score_url, sizeof score_url, "%s/v1/score", srv.url);
    const char *req = "{\"candidates\":[{\"features\":[1,2]},{\"features\":[0,1]}]}";
    http_reply r;
    http_raw("POST", score_url, req, strlen(req), NULL, &r);
    CHECK_INT(r.status, 200);
    http_reply_free(&r);
    char *out = NULL;
    const char *models[] = {"ldpref", "--format", "json", "admin", "models", NULL};
    out = NULL;
    CHECK_INT(run_tool(models, operator_env, &out), 0);
    CHECK(out != NULL && strstr(out, "\"mechanism\":\"exponential\"") != NULL);
    CHECK(out != NULL && strstr(out, "\"user_level_epsilon\"") != NULL);
    free(out);
}

/* A capped local campaign: 3 labels at 0.5 each; the model's user-level
 * epsilon is what the annotator spent on them. */
static void test_user_level(ldpref_client *op)
{
    load_tasks(op, "capped", "u", 6);
    ldpref_client *c = annotator(op, "capped", "capped-annotator", srv.url, 1.0);
    ldpref_task *tasks = NULL;
    size_t n = 0;
    CHECK_ERR(ldpref_next_tasks(c, 6, &tasks, &n), LP_OK);
    CHECK_INT(n, 3); /* the cap is the quota */
    for (size_t i = 0; i < n; i++) {
        ldpref_receipt r;
        CHECK_ERR(ldpref_answer(c, &tasks[i], 1, &r), LP_OK);
        CHECK_NEAR(r.epsilon, 0.5, 1e-12);
    }
    ldpref_tasks_free(tasks, n);
    ldpref_client_close(c);
    int64_t run = retrain("{\"campaign\":\"capped\",\"activate\":false,\"l2\":0.1}", NULL, 0);
    int64_t v = run > 0 ? run_model(run) : 0;
    json_t *m = model_get(v);
    json_t *p = json_object_get(m, "privacy");
    CHECK_NEAR(json_number_value(json_object_get(p, "user_level_epsilon")), 1.5, 1e-12);
    CHECK(json_is_null(json_object_get(p, "mechanism")));
    json_decref(m);
}

/* Picks campaign name in the console's selector and waits for the page. */
static int pick_campaign(cdp *b, const char *name, const char *page)
{
    char expr[300];
    snprintf(expr, sizeof expr,
             "(() => { const s = document.getElementById('campaign'); s.value = '%s'; "
             "s.dispatchEvent(new Event('change')); return true; })()",
             name);
    json_decref(cdp_eval(b, expr));
    return page_wait(b, page);
}

static void test_console(int64_t central_model)
{
    cdp *b = cdp_start(1280, 900);
    CHECK(b != NULL);
    if (b == NULL)
        return;
    char url[160], expr[400];
    snprintf(url, sizeof url, "%s/", srv.url);
    CHECK_INT(cdp_navigate(b, url), 0);
    CHECK(cdp_wait_true(b, "!document.getElementById('signin').hidden", 10000));
    CHECK(page_sign_in(b, srv.token));
    CHECK(page_wait(b, "campaigns"));
    page_check_cell(b, "campaign-table", "central1", 9, "central");
    page_check_cell(b, "campaign-table", "central1", 10, "3 / 3");
    page_check_cell(b, "campaign-table", "race", 10, "2 / 2");
    page_check_cell(b, "campaign-table", "capped", 9, "local");
    page_check_cell(b, "campaign-table", "capped", 10, "—");
    CHECK(pick_campaign(b, "central1", "campaigns"));
    CHECK(cdp_wait_true(b, "document.getElementById('releases') !== null", 10000));
    page_check_fact(b, "releases", "Release budget ε (pure DP)", "3 spent of 3");
    page_screenshot(b, "central-campaign", "#releases");

    CHECK(page_go(b, "models"));
    snprintf(expr, sizeof expr, "%lld", (long long)central_model);
    char *privacy = page_cell(b, "model-table", expr, 10);
    check_record(strncmp(privacy, "released: exponential ε 2", 25) == 0, __FILE__, __LINE__,
                 "the model's privacy cell: %s", privacy);
    free(privacy);
    snprintf(expr, sizeof expr,
             "(() => { for (const a of document.querySelectorAll('a.model-link')) "
             "if (a.textContent === '%lld') { a.click(); return true; } return false; })()",
             (long long)central_model);
    CHECK(page_true(b, expr));
    CHECK(cdp_wait_true(b, "document.getElementById('model-detail') !== null", 10000));
    CHECK(page_true(b, "/released by the exponential mechanism/.test(document.getElementById("
                       "'model-detail').textContent)"));
    CHECK(page_true(b, "/candidates/.test(document.getElementById('model-detail').textContent)"));
    page_screenshot(b, "central-models", "#model-detail");

    CHECK(page_go(b, "annotators"));
    CHECK(cdp_wait_true(b, "document.getElementById('central-quality') !== null", 10000));
    CHECK(page_true(b, "document.getElementById('quality') === null"));
    page_screenshot(b, "central-annotators", NULL);
    cdp_close(b);
}

int main(void)
{
    const char *args[] = {"--public-score", SERVER_NO_RATE_LIMITS, NULL};
    if (server_start(&srv, args) != 0) {
        check_record(0, __FILE__, __LINE__, "server starts");
        return check_summary();
    }
    snprintf(env_token, sizeof env_token, "LDPREF_OPERATOR_TOKEN=%s", srv.token);
    snprintf(env_server, sizeof env_server, "LDPREF_SERVER=%s", srv.url);
    ldpref_client *op = operator_client_open(&srv);
    test_settings();
    load_tasks(op, NULL, "loc", 20);
    load_tasks(op, "central1", "cen", N_CENTRAL);
    test_central_labels(op);
    test_local_still_randomizes(op);
    int64_t v = test_release();
    test_never_served(v);
    test_concurrent_releases(op);
    test_public_and_listed(v);
    test_user_level(op);
    test_aup_release(op);
    test_console(v);
    ldpref_client_close(op);
    server_cleanup(&srv);
    return check_summary();
}
