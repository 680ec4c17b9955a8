/*
 * e2e_attack_rawlabels.c — raw labels must not leak through /v1/score.
 *
 * The attack: a campaign allows unprivatized labels (epsilon = infinity);
 * real annotators answer 300 tasks through the real client library with
 * answers the test knows; the operator trains and activates a model. Each
 * task's responses have one-hot features of their own, so the model's
 * reward margin r(response 1) - r(response 0) on a task is the label it
 * saw: an attacker who reads sign(margin) over the campaign's task ids reads
 * the raw labels back.
 *
 * What the server must do (docs/trust-model.md):
 *   - by default /v1/score needs a token with the score scope: the attacker
 *     without one is refused (401); a trusted researcher with one is served
 *     (and does recover the labels: what the refusal protects is real);
 *   - with --public-score an anonymous caller is served only the active
 *     model and only when every label it saw was privatized: the raw model
 *     is refused (403 model_not_public; while no public model is served,
 *     every anonymous request is, from its headers), a model that is not
 *     active is refused by version (403 model_not_active, whether or not it
 *     exists), and a model trained on labels privatized at epsilon = 1 is served, with
 *     a recovery rate no better than epsilon-LDP allows: at most
 *     e^eps / (1 + e^eps) per label, plus the binomial tolerance of n labels;
 *   - a model whose privacy record is unknown (trained before the record
 *     existed: the row removed from the database file while the server is
 *     stopped) is never served anonymously, nor is a model trained on
 *     privatized labels through a view that consulted the raw model
 *     (corruption strategy "anti").
 * The true answers come from a fixed seed; the randomized response of the
 * client draws from the OS CSPRNG, so the epsilon = 1 bound is checked with
 * a tail probability of 1e-6.
 */
#include "annotator_client.h"
#include "binomial.h"
#include "check.h"
#include "error.h"
#include "http_raw.h"
#include "ldpref.h"
#include "operator_client.h"
#include "prng.h"
#include "server_proc.h"

#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define TASKS 300     /* per campaign */
#define ANNOTATORS 3  /* per campaign, TASKS / ANNOTATORS labels each */
#define TAIL 1e-6     /* chance that a statistical check fails by chance */
#define EPS_PRIVATE 1 /* the privatized campaign's epsilon */

static server_proc srv;
static ldpref_client *op;

/* One campaign of the attack: its tasks' ids and true answers (1: response
 * 1 is better), by task number. */
typedef struct campaign {
    const char *name;
    double epsilon; /* of every label: INFINITY or EPS_PRIVATE */
    int64_t id[TASKS];
    int truth[TASKS];
} campaign;

static campaign raw = {.name = "raw", .epsilon = INFINITY};
static campaign ldp = {.name = "ldp", .epsilon = EPS_PRIVATE};

/* Creates the campaign and uploads its tasks: task i has prompt "q<i>",
 * response 0 with features 0 and response 1 with the unit vector e_i. */
static void load(campaign *c, uint64_t seed)
{
    ldpref_campaign spec;
    ldpref_campaign_init(&spec);
    spec.name = c->name;
    spec.epsilon_min = isinf(c->epsilon) ? 0.5 : c->epsilon;
    spec.epsilon_max = c->epsilon;
    spec.allow_infinite = isinf(c->epsilon);
    spec.epsilon_default = c->epsilon;
    spec.epsilon_budget = 1e6;
    CHECK_ERR(ldpref_admin_campaign_create(op, &spec, NULL), LP_OK);
    lp_prng g;
    lp_prng_seed(&g, seed);
    char path[512];
    snprintf(path, sizeof path, "%s/%s.jsonl", srv.dir, c->name);
    FILE *f = fopen(path, "w");
    CHECK(f != NULL);
    if (f == NULL)
        return;
    for (int i = 0; i < TASKS; i++) {
        c->truth[i] = lp_prng_bernoulli(&g, 0.5);
        fprintf(f,
                "{\"id\":\"%s-%d\",\"prompt\":\"q%d\",\"responses\":[\"%s %d first\",\"%s %d "
                "second\"],\"features\":[[",
                c->name, i, i, c->name, i, c->name, i);
        for (int k = 0; k < TASKS; k++)
            fprintf(f, "%s0", k ? "," : "");
        fputs("],[", f);
        for (int k = 0; k < TASKS; k++)
            fprintf(f, "%s%d", k ? "," : "", k == i);
        fputs("]]}\n", f);
    }
    fclose(f);
    CHECK_ERR(ldpref_admin_tasks_load(op, path, c->name, NULL), LP_OK);
}

/* Annotator k of the campaign enrolls and answers TASKS / ANNOTATORS tasks
 * truthfully through the real client (which privatizes at the campaign's
 * epsilon); records the ids of the tasks by number. */
static void annotate(campaign *c, int k)
{
    char *json = NULL;
    CHECK_ERR(ldpref_admin_enrollment_tokens(op, c->name, 1, &json), LP_OK);
    char *token = json ? first_enrollment_token(json) : NULL;
    free(json);
    char key[512], file[64];
    snprintf(file, sizeof file, "%s%d.key", c->name, k);
    CHECK_ERR(annotator_key_ensure(srv.dir, file, key, sizeof key), LP_OK);
    ldpref_options o;
    annotator_options_init(&o, srv.url, key, c->epsilon, INFINITY);
    ldpref_client *a = NULL;
    CHECK_ERR(ldpref_client_open(&o, &a), LP_OK);
    CHECK_ERR(a && token ? ldpref_enroll(a, token, NULL) : LP_EINVALID_ARGUMENT, LP_OK);
    free(token);
    ldpref_task *tasks = NULL;
    size_t n = 0;
    CHECK_ERR(ldpref_next_tasks(a, TASKS / ANNOTATORS, &tasks, &n), LP_OK);
    CHECK_INT(n, TASKS / ANNOTATORS);
    ldpref_batch_item *items = calloc(n ? n : 1, sizeof *items);
    for (size_t j = 0; j < n && items; j++) {
        int i = atoi(tasks[j].prompt + 1);
        CHECK(i >= 0 && i < TASKS);
        if (i < 0 || i >= TASKS)
            continue;
        c->id[i] = tasks[j].task_id;
        /* b is response 1 unless the server swapped the presentation */
        int b_is_second = strstr(tasks[j].b, " second") != NULL;
        items[j].task = &tasks[j];
        items[j].choice = b_is_second ? c->truth[i] : !c->truth[i];
    }
    CHECK_ERR(items ? ldpref_answer_batch(a, items, n) : LP_ENO_MEMORY, LP_OK);
    free(items);
    ldpref_tasks_free(tasks, n);
    ldpref_client_close(a);
}

static json_t *parse(char *text)
{
    json_t *j = text ? json_loads(text, 0, NULL) : NULL;
    ldpref_free(text);
    return j;
}

/* Trains on the campaign; returns the model version (0 on failure). */
static int64_t train(const campaign *c, int activate)
{
    char body[200], *out = NULL;
    snprintf(body, sizeof body, "{\"campaign\":\"%s\",\"l2\":0.001,\"seed\":1,\"activate\":%s}",
             c->name, activate ? "true" : "false");
    CHECK_ERR(ldpref_admin_retrain(op, body, &out), LP_OK);
    json_t *run = parse(out);
    int64_t id = json_integer_value(json_object_get(run, "run"));
    json_decref(run);
    CHECK_ERR(ldpref_admin_run_wait(op, id, 50, NULL, NULL, &out), LP_OK);
    run = parse(out);
    int64_t v = json_integer_value(json_object_get(run, "model_version"));
    json_decref(run);
    CHECK(v > 0);
    return v;
}

/* The score request for the campaign's task ids (version 0: none given). */
static char *score_request(const campaign *c, int64_t version)
{
    json_t *ids = json_array();
    for (int i = 0; i < TASKS; i++)
        json_array_append_new(ids, json_integer(c->id[i]));
    json_t *req = json_pack("{s:o}", "task_ids", ids);
    if (version > 0)
        json_object_set_new(req, "version", json_integer(version));
    char *text = json_dumps(req, JSON_COMPACT);
    json_decref(req);
    return text;
}

/* The attack through the library with handle h (anonymous when it has no
 * token): how many labels sign(r1 - r0) recovers, or -1 when the server
 * refused; *rc gets the library's code. */
static int recover(ldpref_client *h, const campaign *c, int64_t version, int *rc)
{
    char *req = score_request(c, version), *out = NULL;
    *rc = ldpref_score(h, req, &out);
    free(req);
    json_t *ans = parse(out);
    if (*rc != LDPREF_OK) {
        json_decref(ans);
        return -1;
    }
    int right = 0, seen = 0;
    json_t *tasks = json_object_get(ans, "tasks");
    for (size_t k = 0; k < json_array_size(tasks); k++) {
        json_t *t = json_array_get(tasks, k), *cands = json_object_get(t, "candidates");
        int64_t id = json_integer_value(json_object_get(t, "task_id"));
        double r0 = json_number_value(json_object_get(json_array_get(cands, 0), "reward"));
        double r1 = json_number_value(json_object_get(json_array_get(cands, 1), "reward"));
        for (int i = 0; i < TASKS; i++)
            if (c->id[i] == id) {
                right += (r1 > r0) == c->truth[i];
                seen++;
            }
    }
    CHECK_INT(seen, TASKS);
    json_decref(ans);
    return right;
}

/* The same request over raw HTTP (bearer may be NULL): the answer's status
 * and error name must be want_status / want_error ("" for a success). */
static void expect_http(const campaign *c, int64_t version, const char *bearer, long want_status,
                        const char *want_error, int line)
{
    char url[128], *req = score_request(c, version), name[64];
    snprintf(url, sizeof url, "%s/v1/score", srv.url);
    http_reply r = {0};
    http_raw("POST", url, req, strlen(req), bearer, &r);
    free(req);
    http_error_name(&r, name, sizeof name);
    check_record(r.status == want_status && strcmp(name, want_error) == 0, __FILE__, line,
                 "POST /v1/score version %lld %s: want %ld %s, got %ld %s", (long long)version,
                 bearer ? "with a token" : "anonymous", want_status, want_error, r.status, name);
    http_reply_free(&r);
}

/* A handle on the server with token (NULL: anonymous). */
static ldpref_client *client_with(const char *token)
{
    ldpref_options o;
    ldpref_options_init(&o);
    o.server_url = srv.url;
    o.operator_token = token;
    ldpref_client *h = NULL;
    CHECK_ERR(ldpref_client_open(&o, &h), LP_OK);
    return h;
}

static ldpref_client *anonymous_client(void)
{
    return client_with(NULL);
}

/* The trusted researcher: a token with the score scope only. */
static char score_token[160];
static ldpref_client *researcher;

static void make_researcher(void)
{
    char *out = NULL;
    CHECK_ERR(ldpref_admin_token_create(op, "researcher", "score", &out), LP_OK);
    json_t *j = parse(out);
    snprintf(score_token, sizeof score_token, "%s",
             json_string_value(json_object_get(j, "token")) ?: "");
    json_decref(j);
    researcher = client_with(score_token);
}

/* Restarts the server on its database (a new port) with args; the
 * operator's and the attacker's handles follow it. While it is stopped, the
 * privacy record of model version `forget` (0: none) is removed from the
 * database file: what a model trained before the record existed looks like. */
static void restart(const char *const *args, ldpref_client **anon, int64_t forget)
{
    CHECK_INT(server_stop(&srv), 0);
    if (forget > 0) {
        char sql[128];
        snprintf(sql, sizeof sql, "DELETE FROM model_privacy WHERE model = %lld",
                 (long long)forget);
        CHECK_INT(server_db_exec(&srv, sql), 1);
    }
    char token[sizeof srv.token];
    memcpy(token, srv.token, sizeof token);
    CHECK_INT(server_restart(&srv, args), 0);
    memcpy(srv.token, token, sizeof token); /* still valid: the same database */
    ldpref_client_close(op);
    ldpref_client_close(*anon);
    ldpref_client_close(researcher);
    op = operator_client_open(&srv);
    *anon = anonymous_client();
    researcher = client_with(score_token);
}

/* The model's privacy record from GET /v1/models?version= (new reference). */
static json_t *privacy_of(int64_t version)
{
    char *out = NULL;
    CHECK_ERR(ldpref_admin_model_get(op, version, &out), LP_OK);
    json_t *m = parse(out), *p = json_incref(json_object_get(m, "privacy"));
    json_decref(m);
    return p;
}

static double rate(int right)
{
    return (double)right / TASKS;
}

int main(void)
{
    if (server_start(&srv, NULL) != 0) {
        CHECK(0);
        return check_summary();
    }
    op = operator_client_open(&srv);
    make_researcher();
    load(&raw, 11);
    load(&ldp, 12);
    for (int k = 0; k < ANNOTATORS; k++) {
        annotate(&raw, k);
        annotate(&ldp, k);
    }
    int64_t v_raw = train(&raw, 1); /* served */
    int64_t v_ldp = train(&ldp, 0); /* stored, not activated */
    CHECK(v_raw > 0 && v_ldp > v_raw);
    /* The privatized labels again, through a view whose corruption strategy
     * "anti" asks the served model (the raw one) about every task: the new
     * model depends on the raw labels too. */
    ldpref_corruption anti;
    ldpref_corruption_init(&anti);
    anti.campaign = ldp.name;
    anti.alpha = 0.5;
    anti.strategy = "anti";
    CHECK_ERR(ldpref_admin_corruption_set(op, &anti, NULL), LP_OK);
    int64_t v_anti = train(&ldp, 0);
    anti.alpha = 0;
    CHECK_ERR(ldpref_admin_corruption_set(op, &anti, NULL), LP_OK);

    /* The privacy each model carries. */
    json_t *p = privacy_of(v_raw);
    CHECK_INT(json_integer_value(json_object_get(p, "labels")), TASKS);
    CHECK_INT(json_integer_value(json_object_get(p, "unprivatized_labels")), TASKS);
    CHECK_INT(json_integer_value(json_object_get(p, "annotators")), ANNOTATORS);
    CHECK(json_is_false(json_object_get(p, "privatized")));
    CHECK(json_is_null(json_object_get(p, "epsilon_min")));
    CHECK(json_is_null(json_object_get(p, "epsilon_per_annotator"))); /* infinite */
    json_decref(p);
    p = privacy_of(v_ldp);
    CHECK_INT(json_integer_value(json_object_get(p, "unprivatized_labels")), 0);
    CHECK(json_is_true(json_object_get(p, "privatized")));
    CHECK(json_number_value(json_object_get(p, "epsilon_min")) == EPS_PRIVATE);
    CHECK(json_number_value(json_object_get(p, "epsilon_max")) == EPS_PRIVATE);
    CHECK(json_number_value(json_object_get(p, "epsilon_per_annotator")) ==
          (double)EPS_PRIVATE * TASKS / ANNOTATORS);
    json_decref(p);
    p = privacy_of(v_anti); /* its own labels and the consulted model's */
    CHECK_INT(json_integer_value(json_object_get(p, "labels")), 2 * TASKS);
    CHECK_INT(json_integer_value(json_object_get(p, "unprivatized_labels")), TASKS);
    CHECK(json_is_false(json_object_get(p, "privatized")));
    CHECK(json_is_null(json_object_get(p, "epsilon_per_annotator")));
    json_decref(p);

    /* The operator sees the records in `ldpref admin models`. */
    char env_server[128], env_token[256], *table = NULL;
    snprintf(env_server, sizeof env_server, "LDPREF_SERVER=%s", srv.url);
    snprintf(env_token, sizeof env_token, "LDPREF_OPERATOR_TOKEN=%s", srv.token);
    const char *const env[] = {env_server, env_token, "LC_ALL=C", NULL};
    const char *const models[] = {"ldpref", "admin", "models", "--format", "table", NULL};
    CHECK_INT(run_tool(models, env, &table), 0);
    CHECK(table && strstr(table, "privatized") && strstr(table, "unprivatized_labels") &&
          strstr(table, "user_level_epsilon"));
    free(table);

    /* Default: the attacker without a token is refused, whatever the version. */
    ldpref_client *anon = anonymous_client();
    int rc;
    CHECK_INT(recover(anon, &raw, 0, &rc), -1);
    CHECK_ERR(rc, LDPREF_EUNAUTHORIZED);
    expect_http(&raw, 0, NULL, 401, "unauthorized", __LINE__);
    expect_http(&raw, v_ldp, NULL, 401, "unauthorized", __LINE__);
    expect_http(&raw, 0, "not-a-token", 401, "unauthorized", __LINE__);
    /* The trusted researcher's token is served, and the labels are there to
     * read: far above chance (what the refusals protect). */
    int right_raw = recover(researcher, &raw, 0, &rc);
    CHECK_ERR(rc, LDPREF_OK);
    int chance_max = binom_upper(TASKS, 0.5, TAIL);
    check_record(right_raw > chance_max, __FILE__, __LINE__,
                 "the token holder recovers %d of %d raw labels (chance: <= %d)", right_raw, TASKS,
                 chance_max);
    /* a model that is not served: the admin scope only */
    expect_http(&raw, v_ldp, score_token, 403, "model_not_active", __LINE__);
    expect_http(&raw, v_ldp, srv.token, 200, "", __LINE__);
    fprintf(
        stderr,
        "ε = ∞ model, score-scope token (the researcher): %d of %d raw labels recovered (%.3f)\n",
        right_raw, TASKS, rate(right_raw));

    /* --public-score: anonymous callers get privatized active models only. */
    const char *const public_score[] = {"--public-score", NULL};
    restart(public_score, &anon, 0);
    CHECK_INT(recover(anon, &raw, 0, &rc), -1);
    CHECK_ERR(rc, LDPREF_EMODEL_NOT_PUBLIC);
    expect_http(&raw, 0, NULL, 403, "model_not_public", __LINE__);
    expect_http(&raw, v_raw, NULL, 403, "model_not_public", __LINE__);
    /* no public model is served: every anonymous request is refused, from
     * its headers (lp_api_preauth answers the same) */
    CHECK_INT(recover(anon, &ldp, v_ldp, &rc), -1);
    CHECK_ERR(rc, LDPREF_EMODEL_NOT_PUBLIC);
    expect_http(&ldp, v_ldp, NULL, 403, "model_not_public", __LINE__);
    /* a credential presented is checked as usual */
    expect_http(&raw, 0, "not-a-token", 401, "unauthorized", __LINE__);
    CHECK_INT(recover(researcher, &raw, 0, &rc), right_raw); /* the researcher: the same model */
    CHECK_ERR(rc, LDPREF_OK);

    /* The privatized model, activated, is served to anyone; what it gives
     * away is bounded by epsilon-LDP. */
    CHECK_ERR(ldpref_admin_model_activate(op, v_ldp, NULL), LP_OK);
    int right_ldp = recover(anon, &ldp, 0, &rc);
    CHECK_ERR(rc, LDPREF_OK);
    double p_max = exp(EPS_PRIVATE) / (1 + exp(EPS_PRIVATE));
    int ldp_max = binom_upper(TASKS, p_max, TAIL);
    check_record(right_ldp >= 0 && right_ldp <= ldp_max, __FILE__, __LINE__,
                 "anonymous recovery at epsilon %d: %d of %d, bound %d (e^eps/(1+e^eps) = %.3f)",
                 EPS_PRIVATE, right_ldp, TASKS, ldp_max, p_max);
    fprintf(stderr,
            "ε = %d model, anonymous with --public-score: %d of %d labels recovered (%.3f; "
            "bound %.3f, with tolerance %d)\n",
            EPS_PRIVATE, right_ldp, TASKS, rate(right_ldp), p_max, ldp_max);
    /* a model that is not served: refused by version, existing or not */
    CHECK_INT(recover(anon, &raw, v_raw, &rc), -1);
    CHECK_ERR(rc, LDPREF_EMODEL_NOT_ACTIVE);
    expect_http(&raw, v_raw, NULL, 403, "model_not_active", __LINE__);
    expect_http(&ldp, v_anti, NULL, 403, "model_not_active", __LINE__);
    expect_http(&ldp, v_anti + 1000, NULL, 403, "model_not_active", __LINE__);

    /* A model trained before the privacy record existed: never public. */
    restart(public_score, &anon, v_ldp);
    CHECK_INT(recover(anon, &ldp, 0, &rc), -1);
    CHECK_ERR(rc, LDPREF_EMODEL_NOT_PUBLIC);
    p = privacy_of(v_ldp);
    CHECK(json_is_null(p)); /* unknown */
    json_decref(p);
    CHECK(recover(researcher, &ldp, 0, &rc) >= 0); /* the researcher still is served */
    CHECK_ERR(rc, LDPREF_OK);
    /* A model that consulted the raw one is not public either. */
    CHECK_ERR(ldpref_admin_model_activate(op, v_anti, NULL), LP_OK);
    CHECK_INT(recover(anon, &ldp, 0, &rc), -1);
    CHECK_ERR(rc, LDPREF_EMODEL_NOT_PUBLIC);

    ldpref_client_close(anon);
    ldpref_client_close(researcher);
    ldpref_client_close(op);
    server_cleanup(&srv);
    return check_summary();
}
