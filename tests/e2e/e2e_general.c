/*
 * e2e_general.c — general preferences through the real service: the real
 * ldpref-server on 127.0.0.1 with a temporary database file, a dense
 * campaign of rock-paper-scissors tasks (three candidates per prompt, one-
 * hot features) loaded through the real client library, simulated
 * annotators answering through libldpref with a known intransitive
 * preference (P(rock > scissors) = 0.9, P(scissors > paper) = 0.7,
 * P(paper > rock) = 0.8), a retrain with "method": "general" over HTTP, and
 * /v1/score serving the mixture: no rewards, probabilities that sum to 1,
 * win probabilities against the mixture, the same mixture as the engine
 * recomputes from the stored model file, and a duality gap under the true
 * preference below every pure response's. Also the run's stored settings,
 * the stored model and the errors of bad general requests.
 */
#include "annotator_client.h"
#include "check.h"
#include "error.h"
#include "general.h"
#include "ldpref.h"
#include "operator_client.h"
#include "prng.h"
#include "server_proc.h"

#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define PROMPTS 30
#define ANNOTATORS 12

static server_proc srv;
static ldpref_client *op;

static const char *const NAMES[3] = {"rock", "scissors", "paper"};
/* l*(a, b) = 2 P(a > b) - 1 in NAMES order: rock > scissors 0.9,
 * scissors > paper 0.7, paper > rock 0.8. */
static const double LSTAR[9] = {0, 0.8, -0.6, -0.8, 0, 0.4, 0.6, -0.4, 0};

static int name_index(const char *s)
{
    for (int k = 0; k < 3; k++)
        if (strcmp(s, NAMES[k]) == 0)
            return k;
    return -1;
}

static void load_tasks(void)
{
    ldpref_campaign spec;
    ldpref_campaign_init(&spec);
    spec.name = "rps";
    spec.allow_infinite = 1;
    spec.epsilon_max = INFINITY;
    spec.epsilon_budget = 1e6;
    spec.epsilon_default = INFINITY;
    spec.labels_per_task = ANNOTATORS;
    CHECK_ERR(ldpref_admin_campaign_create(op, &spec, NULL), LP_OK);
    char path[512];
    snprintf(path, sizeof path, "%s/rps.jsonl", srv.dir);
    FILE *f = fopen(path, "w");
    CHECK(f != NULL);
    if (f == NULL)
        return;
    static const char *const FEAT[3] = {"[1,0,0]", "[0,1,0]", "[0,0,1]"};
    for (int p = 0; p < PROMPTS; p++)
        for (int a = 0; a < 3; a++) {
            int b = (a + 1) % 3;
            fprintf(f,
                    "{\"id\":\"t%d-%d\",\"prompt\":\"round %d\",\"responses\":[\"%s\",\"%s\"],"
                    "\"features\":[%s,%s]}\n",
                    p, a, p, NAMES[a], NAMES[b], FEAT[a], FEAT[b]);
        }
    fclose(f);
    CHECK_ERR(ldpref_admin_tasks_load(op, path, "rps", NULL), LP_OK);
}

/* One annotator answers every task with a draw from the true preference. */
static void annotate(int k, lp_prng *g)
{
    char name[32];
    snprintf(name, sizeof name, "a%d", k);
    ldpref_client *c = annotator_enrolled(&srv, op, "rps", name, INFINITY, INFINITY);
    if (c == NULL)
        return;
    ldpref_task *tasks = NULL;
    size_t n = 0;
    CHECK_ERR(ldpref_next_tasks(c, 1000, &tasks, &n), LP_OK);
    CHECK_INT(n, 3 * PROMPTS);
    ldpref_batch_item *items = calloc(n ? n : 1, sizeof *items);
    for (size_t i = 0; i < n; i++) {
        int a = name_index(tasks[i].a), b = name_index(tasks[i].b);
        CHECK(a >= 0 && b >= 0);
        items[i].task = &tasks[i];
        /* choice 1: b preferred, with probability P(b > a) */
        items[i].choice = a >= 0 && b >= 0 && lp_prng_bernoulli(g, 0.5 * (1 + LSTAR[b * 3 + a]));
    }
    CHECK_ERR(ldpref_answer_batch(c, items, n), LP_OK);
    free(items);
    ldpref_tasks_free(tasks, n);
    ldpref_client_close(c);
}

static json_t *parse(char *text)
{
    json_t *j = text ? json_loads(text, 0, NULL) : NULL;
    free(text);
    return j;
}

/* Retrains with body and waits; returns the final run object. */
static json_t *retrain(const char *body, int want)
{
    char *out = NULL;
    CHECK_ERR(ldpref_admin_retrain(op, body, &out), LP_OK);
    json_t *run = parse(out);
    int64_t id = json_integer_value(json_object_get(run, "run"));
    json_decref(run);
    CHECK_ERR(ldpref_admin_run_wait(op, id, 50, NULL, NULL, &out), want);
    return parse(out);
}

static void test_general_model(void)
{
    json_t *run = retrain("{\"method\":\"general\",\"campaign\":\"rps\",\"l2\":0.01}", LP_OK);
    const json_t *settings = json_object_get(run, "request");
    CHECK_STR(json_string_value(json_object_get(settings, "method")), "general");
    int64_t v = json_integer_value(json_object_get(run, "model_version"));
    CHECK(v > 0);
    json_decref(run);
    char *out = NULL;
    CHECK_ERR(ldpref_admin_model_get(op, v, &out), LP_OK);
    json_t *mv = parse(out);
    const json_t *model = json_object_get(mv, "model");
    CHECK_STR(json_string_value(json_object_get(model, "method")), "general");
    const json_t *gen = json_object_get(model, "general");
    int T = (int)json_integer_value(json_object_get(gen, "rounds"));
    CHECK_INT(T, LP_GP_DEFAULT_ROUNDS);
    CHECK(json_number_value(json_object_get(gen, "beta")) > 0 && T > 0);
    json_t *gen_copy = json_deep_copy(gen);
    json_decref(mv);

    /* The mixture over rock, scissors, paper. */
    char req[256];
    snprintf(req, sizeof req,
             "{\"version\":%lld,\"prompt\":\"round 0\",\"candidates\":[{\"features\":[1,0,0]},"
             "{\"features\":[0,1,0]},{\"features\":[0,0,1]}]}",
             (long long)v);
    CHECK_ERR(ldpref_score(op, req, &out), LP_OK);
    json_t *sc = parse(out);
    CHECK_STR(json_string_value(json_object_get(sc, "method")), "general");
    const json_t *cands = json_object_get(sc, "candidates");
    CHECK_INT(json_array_size(cands), 3);
    double pi[3] = {0, 0, 0}, win[3] = {0, 0, 0}, sum = 0;
    for (size_t k = 0; k < 3 && k < json_array_size(cands); k++) {
        const json_t *c = json_array_get(cands, k);
        CHECK(json_is_null(json_object_get(c, "reward")));
        pi[k] = json_number_value(json_object_get(c, "probability"));
        win[k] = json_number_value(json_object_get(c, "win_probability"));
        CHECK(pi[k] > 0 && pi[k] < 1 && win[k] > 0 && win[k] < 1);
        CHECK_NEAR(json_number_value(json_object_get(c, "log_ratio")), log(3 * pi[k]), 1e-9);
        sum += pi[k];
    }
    json_decref(sc);
    CHECK_NEAR(sum, 1.0, 1e-12);
    /* The served mixture is the self-play of the stored preference model on
     * these candidates (recomputed here from the model file), and it is a
     * better answer to the cycle than any single response: its duality gap
     * under the true preference is below every pure response's (>= 0.8). */
    lp_gp_model *gm = NULL;
    char why[256];
    CHECK_ERR(lp_gp_model_from_json(gen_copy, 3, &gm, why, sizeof why), LP_OK);
    json_decref(gen_copy);
    double pi_off[3] = {0, 0, 0};
    lp_sparse f[3];
    uint32_t idx[3] = {0, 1, 2};
    double one = 1.0;
    for (int k = 0; k < 3; k++)
        f[k] = (lp_sparse){.nnz = 1, .cap = 1, .idx = &idx[k], .val = &one};
    if (gm != NULL)
        CHECK_ERR(lp_gp_mixture(gm, f, NULL, 3, pi_off, NULL), LP_OK);
    for (int k = 0; k < 3; k++)
        CHECK_NEAR(pi[k], pi_off[k], 1e-12);
    lp_gp_model_free(gm);
    double gap = lp_gp_duality_gap(LSTAR, pi, 3);
    fprintf(stderr, "served mixture (%.3f %.3f %.3f), win (%.3f %.3f %.3f), gap %.4f\n", pi[0],
            pi[1], pi[2], win[0], win[1], win[2], gap);
    CHECK(gap >= 0.0 && gap < 0.8);

    /* Rewards are not defined: the client library reports NAN. */
    double r[2], p2[2];
    const char *texts[2] = {"rock", "paper"};
    /* text candidates cannot be scored by a dense model */
    CHECK_ERR(ldpref_score_texts(op, "round 0", texts, 2, v, r, p2, NULL), LP_EFEATURES_REQUIRED);
    /* Scoring stored tasks works for the mixture too. */
    CHECK_ERR(ldpref_score(op, "{\"task_ids\":[1]}", &out), LP_OK);
    json_t *st = parse(out);
    const json_t *tc =
        json_object_get(json_array_get(json_object_get(st, "tasks"), 0), "candidates");
    CHECK_INT(json_array_size(tc), 2);
    CHECK(json_is_null(json_object_get(json_array_get(tc, 0), "reward")));
    json_decref(st);
}

static void test_bad_requests(void)
{
    char *out = NULL;
    CHECK_ERR(ldpref_admin_retrain(op, "{\"method\":\"bogus\"}", &out), LP_EBAD_HYPERPARAMETER);
    free(out);
    out = NULL;
    CHECK_ERR(ldpref_admin_retrain(op, "{\"method\":\"general\",\"loss\":\"dpo\"}", &out),
              LP_EBAD_HYPERPARAMETER);
    free(out);
    out = NULL;
    CHECK_ERR(ldpref_admin_retrain(op, "{\"method\":7}", &out), LP_EWRONG_TYPE);
    free(out);
}

int main(void)
{
    const char *args[] = {"--train-threads", "1", NULL};
    if (server_start(&srv, args) != 0) {
        check_record(0, __FILE__, __LINE__, "server starts");
        return check_summary();
    }
    op = operator_client_open(&srv);
    if (op != NULL) {
        load_tasks();
        lp_prng g;
        lp_prng_seed(&g, 2026);
        for (int k = 0; k < ANNOTATORS; k++)
            annotate(k, &g);
        test_general_model();
        test_bad_requests();
        ldpref_client_close(op);
    }
    CHECK_INT(server_stop(&srv), 0);
    server_cleanup(&srv);
    return check_summary();
}
