/*
 * e2e_pessimism.c — pessimistic scores through the real service: the real
 * ldpref-server on 127.0.0.1 with a temporary database file, a dense
 * campaign (d = 3) whose third feature barely varies between the two
 * responses of any task, annotators answering through libldpref with RR at
 * eps = 1, a retrain over HTTP, and then:
 *   - the stored model's confidence record equals sum_i tanh(1/2)^2 x_i x_i^T
 *     recomputed here from the campaign's export;
 *   - POST /v1/score without pessimism answers as before (no new fields);
 *     with "gamma": 0 the bounds equal the rewards and the pessimistic
 *     policy the policy; with "pessimism": true the default Gamma is used,
 *     every bound is theta^T f_k - Gamma ||f_k - f_ref|| with the width the
 *     engine computes from the stored record, the bounds widen along the
 *     poorly covered feature, and the pessimistic policy sums to 1 and moves
 *     away from the uncertain candidate;
 *   - `ldpref score --gamma G` and `--pessimism` (the real CLI) send the
 *     fields; bad gamma values and a general-preference model (no record)
 *     get named errors.
 */
#include "annotator_client.h"
#include "check.h"
#include "confidence.h"
#include "error.h"
#include "ldpref.h"
#include "operator_client.h"
#include "prng.h"
#include "server_proc.h"

#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define D 3
#define TASKS 40
#define ANNOTATORS 8

static server_proc srv;
static ldpref_client *op;
static char env_server[128], env_token[256];
static double feat[TASKS][2][D]; /* the tasks' responses' features */
static const double THETA_STAR[D] = {1.0, -1.0, 0.0};

static json_t *parse(char *text)
{
    json_t *j = text ? json_loads(text, JSON_DISABLE_EOF_CHECK, NULL) : NULL;
    free(text);
    return j;
}

static void load_tasks(lp_prng *g)
{
    ldpref_campaign spec;
    ldpref_campaign_init(&spec);
    spec.name = "pess";
    spec.epsilon_max = 1;
    spec.epsilon_default = 1;
    spec.epsilon_budget = 1e6;
    spec.labels_per_task = ANNOTATORS;
    CHECK_ERR(ldpref_admin_campaign_create(op, &spec, NULL), LP_OK);
    char path[512];
    snprintf(path, sizeof path, "%s/pess.jsonl", srv.dir);
    FILE *f = fopen(path, "w");
    CHECK(f != NULL);
    if (f == NULL)
        return;
    for (int t = 0; t < TASKS; t++) {
        for (int a = 0; a < 2; a++) {
            feat[t][a][0] = lp_prng_normal(g);
            feat[t][a][1] = lp_prng_normal(g);
            feat[t][a][2] = 0.5 + 0.01 * lp_prng_normal(g); /* nearly constant */
        }
        fprintf(f,
                "{\"id\":\"t%d\",\"prompt\":\"prompt %d\",\"responses\":[\"r%d-0\",\"r%d-1\"],"
                "\"features\":[[%.17g,%.17g,%.17g],[%.17g,%.17g,%.17g]]}\n",
                t, t, t, t, feat[t][0][0], feat[t][0][1], feat[t][0][2], feat[t][1][0],
                feat[t][1][1], feat[t][1][2]);
    }
    fclose(f);
    CHECK_ERR(ldpref_admin_tasks_load(op, path, "pess", NULL), LP_OK);
}

/* The features of response text "r<t>-<a>". */
static const double *features_of(const char *text)
{
    int t = -1, a = -1;
    if (sscanf(text, "r%d-%d", &t, &a) != 2 || t < 0 || t >= TASKS || a < 0 || a > 1)
        return NULL;
    return feat[t][a];
}

/* One annotator answers every task from the Bradley-Terry model in
 * THETA_STAR; the library randomizes each answer at eps = 1. */
static void annotate(int k, lp_prng *g)
{
    char name[32];
    snprintf(name, sizeof name, "a%d", k);
    ldpref_client *c = annotator_enrolled(&srv, op, "pess", name, 1.0, 1000.0);
    if (c == NULL)
        return;
    ldpref_task *tasks = NULL;
    size_t n = 0;
    CHECK_ERR(ldpref_next_tasks(c, 1000, &tasks, &n), LP_OK);
    CHECK_INT(n, TASKS);
    ldpref_batch_item *items = calloc(n ? n : 1, sizeof *items);
    for (size_t i = 0; items && i < n; i++) {
        const double *fa = features_of(tasks[i].a), *fb = features_of(tasks[i].b);
        CHECK(fa != NULL && fb != NULL);
        double m = 0;
        for (int j = 0; fa && fb && j < D; j++)
            m += THETA_STAR[j] * (fb[j] - fa[j]);
        items[i].task = &tasks[i];
        items[i].choice = lp_prng_bernoulli(g, 1 / (1 + exp(-m))); /* 1: b preferred */
    }
    CHECK_ERR(ldpref_answer_batch(c, items, n), LP_OK);
    free(items);
    ldpref_tasks_free(tasks, n);
    ldpref_client_close(c);
}

static json_t *retrain(const char *body)
{
    char *out = NULL;
    CHECK_ERR(ldpref_admin_retrain(op, body, &out), LP_OK);
    json_t *run = parse(out);
    int64_t id = json_integer_value(json_object_get(run, "run"));
    json_decref(run);
    out = NULL;
    CHECK_ERR(ldpref_admin_run_wait(op, id, 50, NULL, NULL, &out), LP_OK);
    return parse(out);
}

/* The record against the export: sum over labels of w x x^T. */
static void check_confidence(const json_t *rec, size_t labels)
{
    CHECK_STR(json_string_value(json_object_get(rec, "form")), "full");
    CHECK_INT(json_integer_value(json_object_get(rec, "dim")), D);
    CHECK_INT(json_integer_value(json_object_get(rec, "labels")), labels);
    double t = tanh(0.5);
    CHECK_NEAR(json_number_value(json_object_get(rec, "weight_sum")), labels * t * t, 1e-9);
    double got[D * D], want[D * D] = {0};
    char msg[256];
    CHECK_ERR(lp_conf_decode(rec, D, got, NULL, msg, sizeof msg), LP_OK);
    char path[512];
    snprintf(path, sizeof path, "%s/export.jsonl", srv.dir);
    CHECK_ERR(ldpref_admin_export_path(op, "pess", path), LP_OK);
    FILE *f = fopen(path, "r");
    char line[8192];
    size_t rows = 0;
    while (f && fgets(line, sizeof line, f)) {
        json_t *o = json_loads(line, 0, NULL);
        const json_t *c = json_object_get(o, "chosen_features"),
                     *r = json_object_get(o, "rejected_features");
        double x[D];
        for (int j = 0; j < D; j++)
            x[j] =
                json_number_value(json_array_get(c, j)) - json_number_value(json_array_get(r, j));
        double w = lp_conf_weight(json_number_value(json_object_get(o, "epsilon")));
        for (int a = 0; a < D; a++)
            for (int b = 0; b < D; b++)
                want[a * D + b] += w * x[a] * x[b];
        rows += json_array_size(c) == D;
        json_decref(o);
    }
    if (f)
        fclose(f);
    CHECK_INT(rows, labels);
    for (int k = 0; k < D * D; k++)
        CHECK_NEAR(got[k], want[k], 1e-9 * fabs(want[k]) + 1e-12);
    /* the poorly covered feature: its variance is far below the others' */
    CHECK(got[8] < 0.01 * got[0] && got[8] < 0.01 * got[4]);
}

/* POST /v1/score with candidates (K dense vectors) and extra fields. */
static json_t *score(const double (*f)[D], int K, const char *extra, int want)
{
    char req[2048];
    int n = snprintf(req, sizeof req, "{\"prompt\":\"p\",%s\"candidates\":[", extra);
    for (int k = 0; k < K; k++)
        n += snprintf(req + n, sizeof req - (size_t)n, "%s{\"features\":[%.17g,%.17g,%.17g]}",
                      k ? "," : "", f[k][0], f[k][1], f[k][2]);
    snprintf(req + n, sizeof req - (size_t)n, "]}");
    char *out = NULL;
    CHECK_ERR(ldpref_score(op, req, &out), want);
    return parse(out);
}

static double cand(const json_t *sc, int k, const char *key)
{
    const json_t *c = json_array_get(json_object_get(sc, "candidates"), (size_t)k);
    const json_t *v = json_object_get(c, key);
    return json_is_number(v) ? json_number_value(v) : NAN;
}

static void test_scores(const json_t *rec)
{
    char msg[256];
    lp_conf *conf = NULL;
    CHECK_ERR(lp_conf_prepare(rec, D, &conf, msg, sizeof msg), LP_OK);
    if (conf == NULL)
        return;
    /* candidates 1 and 2 step away from 0 by 0.5 along a covered feature
     * and along the poorly covered one */
    const double f[3][D] = {{0, 0, 0.5}, {0.5, 0, 0.5}, {0, 0, 1.0}};
    json_t *plain = score(f, 3, "", LP_OK);
    const json_t *c0 = json_array_get(json_object_get(plain, "candidates"), 0);
    CHECK(json_object_get(c0, "lower") == NULL && json_object_get(c0, "pessimistic") == NULL);
    CHECK(json_object_get(plain, "gamma") == NULL);
    CHECK_INT(json_object_size(c0), 3); /* reward, probability, log_ratio: unchanged */

    json_t *zero = score(f, 3, "\"gamma\":0,", LP_OK);
    CHECK(json_number_value(json_object_get(zero, "gamma")) == 0.0);
    for (int k = 0; k < 3; k++) {
        CHECK(cand(zero, k, "lower") == cand(zero, k, "reward"));
        CHECK(cand(zero, k, "pessimistic") == cand(zero, k, "probability"));
        CHECK(cand(zero, k, "reward") == cand(plain, k, "reward"));
    }

    json_t *pess = score(f, 3, "\"pessimism\":true,", LP_OK);
    double gamma = json_number_value(json_object_get(pess, "gamma")), sum = 0, work[D];
    CHECK(gamma == LP_CONF_DEFAULT_GAMMA);
    double width[3];
    for (int k = 0; k < 3; k++) {
        double v[D];
        for (int j = 0; j < D; j++)
            v[j] = f[k][j] - (f[0][j] + f[1][j] + f[2][j]) / 3;
        width[k] = lp_conf_width(conf, v, work);
        double r = cand(pess, k, "reward");
        CHECK_NEAR(cand(pess, k, "lower"), r - gamma * width[k], 1e-9 * (1 + fabs(r)));
        sum += cand(pess, k, "pessimistic");
    }
    CHECK_NEAR(sum, 1.0, 1e-12);
    /* the step along the poor feature is far less certain */
    json_t *pair_cov = score((const double(*)[D])f, 2, "\"gamma\":1,", LP_OK);
    const double g2[2][D] = {{0, 0, 0.5}, {0, 0, 1.0}};
    json_t *pair_poor = score(g2, 2, "\"gamma\":1,", LP_OK);
    double gap_cov = cand(pair_cov, 1, "reward") - cand(pair_cov, 1, "lower");
    double gap_poor = cand(pair_poor, 1, "reward") - cand(pair_poor, 1, "lower");
    fprintf(stderr, "bound widths at Gamma = 1: covered step %.4f, poorly covered step %.4f\n",
            gap_cov, gap_poor);
    CHECK(gap_cov > 0 && gap_poor > 10 * gap_cov);
    /* the pessimistic policy moves away from the uncertain candidate 2 */
    double ratio[3];
    for (int k = 0; k < 3; k++)
        ratio[k] = cand(pess, k, "pessimistic") / cand(pess, k, "probability");
    CHECK(width[2] > width[0] && width[2] > width[1]);
    CHECK(ratio[2] < 1 && ratio[2] < ratio[0] && ratio[2] < ratio[1]);

    /* stored tasks too: both candidates get the fields */
    char *out = NULL;
    CHECK_ERR(ldpref_score(op, "{\"task_ids\":[1],\"gamma\":2}", &out), LP_OK);
    json_t *st = parse(out);
    const json_t *tc =
        json_object_get(json_array_get(json_object_get(st, "tasks"), 0), "candidates");
    CHECK_INT(json_array_size(tc), 2);
    for (size_t k = 0; k < 2; k++)
        CHECK(json_is_number(json_object_get(json_array_get(tc, k), "lower")));
    json_decref(st);

    /* bad values are refused by name */
    const char *bad[] = {"\"gamma\":-1,",    "\"gamma\":\"2\",", "\"gamma\":1e7,",
                         "\"pessimism\":1,", "\"gamma\":null,",  NULL};
    for (int i = 0; bad[i]; i++)
        json_decref(score(f, 3, bad[i], LP_EWRONG_TYPE));
    json_decref(score(f, 3, "\"pessimism\":false,\"gamma\":1,", LP_EBAD_REQUEST));
    json_t *off = score(f, 3, "\"pessimism\":false,", LP_OK);
    CHECK(json_object_get(json_array_get(json_object_get(off, "candidates"), 0), "lower") == NULL);
    json_decref(off);
    json_decref(plain);
    json_decref(zero);
    json_decref(pess);
    json_decref(pair_cov);
    json_decref(pair_poor);
    lp_conf_free(conf);
}

/* The CLI sends --gamma and --pessimism. */
static void test_cli(void)
{
    char path[512];
    snprintf(path, sizeof path, "%s/req.json", srv.dir);
    FILE *f = fopen(path, "w");
    if (f != NULL) {
        fprintf(f, "{\"candidates\":[{\"features\":[0,0,0.5]},{\"features\":[0,0,1]}]}\n");
        fclose(f);
    }
    const char *env[] = {env_server, env_token, NULL};
    const char *g0[] = {"ldpref", "--format", "json", "score", "--request",
                        path,     "--gamma",  "0",    NULL};
    char *out = NULL;
    CHECK_INT(run_tool(g0, env, &out), 0);
    json_t *j = parse(out);
    CHECK(json_number_value(json_object_get(j, "gamma")) == 0.0);
    CHECK(cand(j, 1, "lower") == cand(j, 1, "reward"));
    json_decref(j);
    const char *pd[] = {"ldpref",    "--format", "json",        "score",
                        "--request", path,       "--pessimism", NULL};
    out = NULL;
    CHECK_INT(run_tool(pd, env, &out), 0);
    j = parse(out);
    CHECK(json_number_value(json_object_get(j, "gamma")) == LP_CONF_DEFAULT_GAMMA);
    CHECK(cand(j, 1, "lower") < cand(j, 1, "reward"));
    json_decref(j);
    /* the table shows the new columns */
    const char *tb[] = {"ldpref", "--format", "table", "score", "--request",
                        path,     "--gamma",  "1",     NULL};
    out = NULL;
    CHECK_INT(run_tool(tb, env, &out), 0);
    CHECK(out != NULL && strstr(out, "lower") != NULL && strstr(out, "pessimistic") != NULL);
    free(out);
    const char *bad[] = {"ldpref", "score", "--request", path, "--gamma", "-2", NULL};
    CHECK_INT(run_tool(bad, env, NULL), LDPREF_EINVALID_ARGUMENT);
}

/* A general-preference model has no record: no_confidence. */
static void test_no_record(int64_t reward_version)
{
    json_t *run = retrain("{\"method\":\"general\",\"campaign\":\"pess\",\"l2\":0.01}");
    json_decref(run);
    const double f[2][D] = {{0, 0, 0.5}, {1, 0, 0.5}};
    json_t *e = score(f, 2, "\"gamma\":1,", LP_ENO_CONFIDENCE);
    json_decref(e);
    json_decref(score(f, 2, "", LP_OK)); /* plain scores still work */
    char *out = NULL;
    CHECK_ERR(ldpref_admin_model_activate(op, reward_version, &out), LP_OK);
    free(out);
    json_decref(score(f, 2, "\"gamma\":1,", LP_OK));
}

int main(void)
{
    const char *args[] = {"--train-threads", "1", NULL};
    if (server_start(&srv, args) != 0) {
        check_record(0, __FILE__, __LINE__, "server starts");
        return check_summary();
    }
    snprintf(env_server, sizeof env_server, "LDPREF_SERVER=%s", srv.url);
    snprintf(env_token, sizeof env_token, "LDPREF_OPERATOR_TOKEN=%s", srv.token);
    op = operator_client_open(&srv);
    if (op != NULL) {
        lp_prng g;
        lp_prng_seed(&g, 1414);
        load_tasks(&g);
        for (int k = 0; k < ANNOTATORS; k++)
            annotate(k, &g);
        json_t *run = retrain("{\"campaign\":\"pess\",\"l2\":1}");
        int64_t v = json_integer_value(json_object_get(run, "model_version"));
        CHECK(v > 0);
        json_decref(run);
        char *out = NULL;
        CHECK_ERR(ldpref_admin_model_get(op, v, &out), LP_OK);
        json_t *mv = parse(out);
        const json_t *rec = json_object_get(json_object_get(mv, "model"), "confidence");
        CHECK(json_is_object(rec));
        if (json_is_object(rec)) {
            check_confidence(rec, TASKS * ANNOTATORS);
            test_scores(rec);
        }
        json_decref(mv);
        test_cli();
        test_no_record(v);
        ldpref_client_close(op);
    }
    CHECK_INT(server_stop(&srv), 0);
    server_cleanup(&srv);
    return check_summary();
}
