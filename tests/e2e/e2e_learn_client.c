/*
 * e2e_learn_client.c — the learning endpoints through the real libldpref and
 * the real ldpref CLI against the real ldpref-server (127.0.0.1, port 0,
 * temporary SQLite database): no labels -> a failed run mapped to
 * LDPREF_ENO_LABELS; two annotators (one real, one with CTL simulation)
 * label OASST tasks; retrain -> wait -> models -> activate -> score (library
 * and CLI, both links) -> server-side corruption -> the corrupted export
 * view; cancellation, schedule, run lists, and server errors mapped to their
 * codes. Simulated labels reach the server as ordinary labels.
 */
#include "annotator_client.h"
#include "check.h"
#include "error.h"
#include "ldpref.h"
#include "operator_client.h"
#include "rr.h"
#include "server_proc.h"

#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define OASST "tests/data/oasst-en100/en_100.pairs.jsonl"
#define PER_ANNOTATOR 150

static server_proc srv;
static char env_server[128], env_token[256];

static int cli(char **out, const char *const *argv)
{
    const char *env[] = {env_server, env_token, NULL};
    return run_tool(argv, env, out);
}

static json_t *parse(const char *text)
{
    return text ? json_loads(text, JSON_DISABLE_EOF_CHECK, NULL) : NULL;
}

static int64_t int_field(const json_t *obj, const char *key)
{
    return json_integer_value(json_object_get(obj, key));
}

/* An enrolled annotator; alpha > 0 turns CTL simulation on. */
static ldpref_client *annotator(ldpref_client *op, const char *name, double alpha)
{
    char *json = NULL;
    CHECK_ERR(ldpref_admin_enrollment_tokens(op, NULL, 1, &json), LP_OK);
    json_t *j = parse(json);
    const char *token = json_string_value(json_array_get(json_object_get(j, "tokens"), 0));
    char key[400], file[128];
    snprintf(file, sizeof file, "%s.key", name);
    CHECK_ERR(annotator_key_ensure(srv.dir, file, key, sizeof key), LP_OK);
    ldpref_options o;
    ldpref_options_init(&o);
    o.server_url = srv.url;
    o.key_path = key;
    o.max_epsilon_total = 1000; /* 150 and more labels at epsilon 1 */
    o.simulate_ctl_alpha = alpha;
    o.simulate_ctl_strategy = "flip";
    o.simulate_ctl_seed = 2024;
    ldpref_client *c = NULL;
    CHECK_ERR(ldpref_client_open(&o, &c), LP_OK);
    if (c && token)
        CHECK_ERR(ldpref_enroll(c, token, NULL), LP_OK);
    json_decref(j);
    ldpref_free(json);
    return c;
}

/* Fetches and answers n tasks (true preference: the longer response). */
static void label(ldpref_client *c, int n, int expect_simulated)
{
    ldpref_task *tasks = NULL;
    size_t got = 0;
    CHECK_ERR(ldpref_next_tasks(c, n, &tasks, &got), LP_OK);
    CHECK_INT(got, n);
    ldpref_batch_item *items = calloc(got, sizeof *items);
    if (items == NULL)
        return;
    for (size_t i = 0; i < got; i++) {
        items[i].task = &tasks[i];
        items[i].choice = strlen(tasks[i].b) > strlen(tasks[i].a);
    }
    CHECK_ERR(ldpref_answer_batch(c, items, got), LP_OK);
    size_t ok = 0, marked = 0;
    for (size_t i = 0; i < got; i++) {
        ok += items[i].error == LDPREF_OK;
        marked += items[i].error == LDPREF_OK && items[i].receipt.simulated == expect_simulated;
    }
    CHECK_INT(ok, got);
    CHECK_INT(marked, got);
    free(items);
    ldpref_tasks_free(tasks, got);
}

struct progress_count {
    int calls, terminal_seen;
};

static void on_progress(void *ctx, const char *run_json)
{
    struct progress_count *p = ctx;
    json_t *j = parse(run_json);
    const char *status = json_string_value(json_object_get(j, "status"));
    p->calls++;
    p->terminal_seen += status && strcmp(status, "succeeded") == 0;
    json_decref(j);
}

/* Starts a run with request and waits; returns the model version (0 on failure). */
static int64_t train(ldpref_client *op, const char *request)
{
    char *json = NULL;
    CHECK_ERR(ldpref_admin_retrain(op, request, &json), LP_OK);
    json_t *run = parse(json);
    int64_t id = int_field(run, "run");
    CHECK(id >= 1);
    json_decref(run);
    ldpref_free(json);
    struct progress_count p = {0, 0};
    json = NULL;
    CHECK_ERR(ldpref_admin_run_wait(op, id, 20, on_progress, &p, &json), LP_OK);
    CHECK(p.calls >= 1);
    CHECK_INT(p.terminal_seen, 1); /* the final run object is shown too */
    run = parse(json);
    CHECK_STR(json_string_value(json_object_get(run, "status")), "succeeded");
    int64_t v = int_field(run, "model_version");
    CHECK(v >= 1);
    json_decref(run);
    ldpref_free(json);
    return v;
}

static int64_t active_version(ldpref_client *op)
{
    char *json = NULL;
    CHECK_ERR(ldpref_admin_models(op, &json), LP_OK);
    json_t *j = parse(json);
    int64_t v = int_field(j, "active_version");
    json_decref(j);
    ldpref_free(json);
    return v;
}

static void test_before_labels(ldpref_client *op)
{
    const char *texts[] = {"x", "y"};
    double r[2], p[2];
    int64_t v = 0;
    CHECK_ERR(ldpref_score_texts(op, "p", texts, 2, 0, r, p, &v), LP_ENO_ACTIVE_MODEL);
    const char *score[] = {"ldpref", "score", "--prompt", "p", "--candidate", "x", NULL};
    CHECK_INT(cli(NULL, score), LDPREF_ENO_ACTIVE_MODEL);
    CHECK_ERR(ldpref_admin_export_view(op, NULL, "corrupted", 0, stdout), LP_ENO_ACTIVE_MODEL);
    /* A run with nothing to learn from fails; wait maps its error name. */
    char *json = NULL;
    CHECK_ERR(ldpref_admin_retrain(op, NULL, &json), LP_OK);
    json_t *run = parse(json);
    int64_t id = int_field(run, "run");
    json_decref(run);
    ldpref_free(json);
    json = NULL;
    CHECK_ERR(ldpref_admin_run_wait(op, id, 20, NULL, NULL, &json), LP_ENO_LABELS);
    run = parse(json);
    CHECK_STR(json_string_value(json_object_get(run, "status")), "failed");
    CHECK_STR(json_string_value(json_object_get(json_object_get(run, "error"), "error")),
              "no_labels");
    json_decref(run);
    ldpref_free(json);
    CHECK(strstr(ldpref_errmsg(op), "no_labels") != NULL);
    /* The CLI's exit status is the run's error code. */
    const char *wait[] = {"ldpref", "admin", "retrain", "--max-iter", "5", "--wait", NULL};
    char *out = NULL;
    CHECK_INT(cli(&out, wait), LDPREF_ENO_LABELS);
    run = parse(out);
    CHECK_STR(json_string_value(json_object_get(run, "status")), "failed");
    json_decref(run);
    free(out);
}

static void test_server_errors(ldpref_client *op)
{
    char *json = NULL;
    CHECK_ERR(ldpref_admin_retrain(op, "{\"loss\": \"bogus\"}", &json), LP_EUNKNOWN_LOSS);
    CHECK(strstr(ldpref_errmsg(op), "unknown_loss") != NULL);
    CHECK_ERR(ldpref_admin_retrain(op, "{\"beta\": -1}", &json), LP_EBAD_HYPERPARAMETER);
    CHECK_ERR(ldpref_admin_retrain(op, "{\"campaign\": \"nope\"}", &json), LP_EUNKNOWN_CAMPAIGN);
    CHECK_ERR(ldpref_admin_retrain(op, "{\"colour\": 1}", &json), LP_EUNKNOWN_FIELD);
    CHECK_ERR(ldpref_admin_run_get(op, 999999, &json), LP_EUNKNOWN_RUN);
    CHECK_ERR(ldpref_admin_run_cancel(op, 999999, &json), LP_EUNKNOWN_RUN);
    CHECK_ERR(ldpref_admin_model_get(op, 999999, &json), LP_EUNKNOWN_MODEL);
    CHECK_ERR(ldpref_admin_model_activate(op, 999999, &json), LP_EUNKNOWN_MODEL);
    CHECK(json == NULL);
    const char *bad[] = {"ldpref", "admin", "retrain", "--loss", "bogus", NULL};
    CHECK_INT(cli(NULL, bad), LDPREF_EUNKNOWN_LOSS);
}

static void check_probs(const double *p, size_t k)
{
    double sum = 0;
    int in_range = 1;
    for (size_t i = 0; i < k; i++) {
        sum += p[i];
        in_range &= p[i] >= 0 && p[i] <= 1;
    }
    CHECK(in_range);
    CHECK_NEAR(sum, 1.0, 1e-9);
}

/* A square-chipo model (active) through the library and a DPO one (not
 * activated) through the CLI; the active model's record. Sets *v1, *v2. */
static void test_two_models_trained(ldpref_client *op, int64_t *v1_out, int64_t *v2_out)
{
    int64_t v1 = train(op, "{\"loss\": \"square-chipo\", \"max_iter\": 60, \"seed\": 1}");
    CHECK_INT(active_version(op), v1);
    /* A second model through the CLI, not activated. */
    const char *dpo[] = {"ldpref", "admin",  "retrain", "--loss",        "dpo",    "--max-iter",
                         "40",     "--seed", "2",       "--no-activate", "--wait", NULL};
    char *out = NULL;
    CHECK_INT(cli(&out, dpo), 0);
    json_t *run = parse(out);
    CHECK_STR(json_string_value(json_object_get(run, "status")), "succeeded");
    int64_t v2 = int_field(run, "model_version");
    CHECK(v2 > v1);
    json_decref(run);
    free(out);
    CHECK_INT(active_version(op), v1);

    char *json = NULL;
    CHECK_ERR(ldpref_admin_model_get(op, 0, &json), LP_OK);
    json_t *m = parse(json);
    CHECK_INT(int_field(m, "version"), v1);
    CHECK(json_is_object(json_object_get(m, "model")));
    CHECK_STR(json_string_value(json_object_get(m, "loss")), "square-chipo");
    json_decref(m);
    ldpref_free(json);
    *v1_out = v1;
    *v2_out = v2;
}

/* Roll forward to the DPO model and score with it (KL link) and with the
 * square-chipo model by version. */
static void test_activate_and_score(ldpref_client *op, int64_t v1, int64_t v2)
{
    char *json = NULL;
    CHECK_ERR(ldpref_admin_model_activate(op, v2, &json), LP_OK);
    CHECK(json != NULL);
    ldpref_free(json);
    CHECK_INT(active_version(op), v2);
    const char *texts[] = {"Wear sunglasses and take breaks from screens.", "No.",
                           "Blue light glasses may help a little; see an eye doctor."};
    double r[3] = {0}, p[3] = {0};
    int64_t v = 0;
    CHECK_ERR(ldpref_score_texts(op, "How to protect my eyes?", texts, 3, 0, r, p, &v), LP_OK);
    CHECK_INT(v, v2);
    check_probs(p, 3);
    double r1[3] = {0}, p1[3] = {0};
    CHECK_ERR(ldpref_score_texts(op, "How to protect my eyes?", texts, 3, v1, r1, p1, &v), LP_OK);
    CHECK_INT(v, v1);
    check_probs(p1, 3);
    /* Ranking by probability follows ranking by reward under either link. */
    CHECK((r1[0] - r1[1]) * (p1[0] - p1[1]) >= 0);
    CHECK_ERR(ldpref_score_texts(op, "q", texts, 2, 999999, r, p, &v), LP_EUNKNOWN_MODEL);
    CHECK_ERR(ldpref_score(op, "{\"task_ids\": [99999999]}", &json), LP_EUNKNOWN_TASK);
}

/* Roll back with the CLI; the CLI lists the models and shows the active one. */
static void test_cli_rollback(ldpref_client *op, int64_t v1)
{
    char *out = NULL;
    char ver[32];
    snprintf(ver, sizeof ver, "%lld", (long long)v1);
    const char *act[] = {"ldpref", "admin", "activate", ver, NULL};
    CHECK_INT(cli(NULL, act), 0);
    CHECK_INT(active_version(op), v1);
    const char *models[] = {"ldpref", "admin", "models", NULL};
    CHECK_INT(cli(&out, models), 0);
    json_t *ms = parse(out);
    CHECK(json_array_size(json_object_get(ms, "models")) >= 2);
    json_decref(ms);
    free(out);
    const char *model[] = {"ldpref", "admin", "model", "--active", NULL};
    CHECK_INT(cli(&out, model), 0);
    json_t *m = parse(out);
    CHECK_INT(int_field(m, "version"), v1);
    json_decref(m);
    free(out);
}

/* CLI score: the operator token of the environment goes with the request;
 * without one the request is anonymous, which a server without
 * --public-score refuses (docs/trust-model.md). */
static void test_cli_score(int64_t v1)
{
    char *out = NULL;
    const char *score[] = {"ldpref",      "score",
                           "--prompt",    "How to protect my eyes?",
                           "--candidate", "Wear sunglasses.",
                           "--candidate", "No.",
                           NULL};
    CHECK_INT(cli(&out, score), 0);
    json_t *s = parse(out);
    CHECK_INT(int_field(s, "model_version"), v1);
    CHECK_INT(json_array_size(json_object_get(s, "candidates")), 2);
    json_decref(s);
    free(out);
    const char *score_tasks[] = {"ldpref", "score", "--task", "1", "--task", "2", NULL};
    CHECK_INT(cli(&out, score_tasks), 0);
    s = parse(out);
    CHECK_INT(json_array_size(json_object_get(s, "tasks")), 2);
    CHECK_INT(json_array_size(
                  json_object_get(json_array_get(json_object_get(s, "tasks"), 0), "candidates")),
              2);
    json_decref(s);
    free(out);
    const char *score_bad[] = {"ldpref", "score", "--task", "1", "--version", "999999", NULL};
    CHECK_INT(cli(NULL, score_bad), LDPREF_EUNKNOWN_MODEL);
    const char *env_anonymous[] = {env_server, "LDPREF_OPERATOR_TOKEN=", NULL};
    CHECK_INT(run_tool(score, env_anonymous, NULL), LDPREF_EUNAUTHORIZED);
    CHECK_INT(run_tool(score_bad, env_anonymous, NULL), LDPREF_EUNAUTHORIZED);
}

static void test_models_and_score(ldpref_client *op, int64_t *v_square)
{
    int64_t v1 = 0, v2 = 0;
    test_two_models_trained(op, &v1, &v2);
    *v_square = v1;
    test_activate_and_score(op, v1, v2);
    test_cli_rollback(op, v1);
    test_cli_score(v1);
}

/* Counts lines and lines with "corrupted": true of an export file. */
static void export_counts(const char *path, long *lines, long *corrupted, long *marked,
                          long *foreign)
{
    *lines = *corrupted = *marked = *foreign = 0;
    FILE *f = fopen(path, "r");
    char *line = NULL;
    size_t cap = 0;
    while (f && getline(&line, &cap, f) > 0) {
        json_t *j = json_loads(line, 0, NULL);
        (*lines)++;
        json_t *c = json_object_get(j, "corrupted");
        *marked += json_is_boolean(c);
        *corrupted += json_is_true(c);
        const char *k;
        json_t *val;
        json_object_foreach(j, k, val) *foreign += strstr(k, "simul") != NULL || strstr(k, "ctl");
        json_decref(j);
    }
    free(line);
    if (f)
        fclose(f);
}

static void test_corruption(ldpref_client *op, long labels)
{
    ldpref_corruption s;
    ldpref_corruption_init(&s);
    s.alpha = 0.25;
    s.strategy = "flip";
    s.seed = 42;
    char *json = NULL;
    CHECK_ERR(ldpref_admin_corruption_set(op, &s, &json), LP_OK);
    json_t *j = parse(json);
    CHECK(int_field(j, "id") >= 1);
    json_decref(j);
    ldpref_free(json);
    json = NULL;
    CHECK_ERR(ldpref_admin_corruption_get(op, "default", &json), LP_OK);
    j = parse(json);
    CHECK_NEAR(json_real_value(json_object_get(j, "alpha")), 0.25, 1e-12);
    CHECK_STR(json_string_value(json_object_get(j, "strategy")), "flip");
    CHECK_INT(int_field(j, "seed"), 42);
    json_decref(j);
    ldpref_free(json);
    s.strategy = "backdoor"; /* no feature: refused locally */
    CHECK_ERR(ldpref_admin_corruption_set(op, &s, &json), LP_EBAD_CORRUPTION);
    const char *show[] = {"ldpref", "admin", "corruption", "default", NULL};
    char *out = NULL;
    CHECK_INT(cli(&out, show), 0);
    CHECK(out && strstr(out, "\"flip\"") != NULL);
    free(out);
    const char *unknown[] = {"ldpref", "admin", "corruption", "nope", "--alpha", "0.1", NULL};
    CHECK_INT(cli(NULL, unknown), LDPREF_EUNKNOWN_CAMPAIGN);

    /* A model trained on the corrupted view records it. */
    int64_t v3 = train(op, "{\"max_iter\": 30, \"activate\": false}");
    json = NULL;
    CHECK_ERR(ldpref_admin_model_get(op, v3, &json), LP_OK);
    j = parse(json);
    CHECK(json_array_size(json_object_get(j, "corruption")) >= 1);
    json_decref(j);
    ldpref_free(json);

    /* Its training view, exported: about alpha of the labels corrupted. */
    char path[400], clean[400];
    snprintf(path, sizeof path, "%s/corrupted.jsonl", srv.dir);
    snprintf(clean, sizeof clean, "%s/clean.jsonl", srv.dir);
    CHECK_ERR(ldpref_admin_export_view_path(op, NULL, "corrupted", v3, path), LP_OK);
    long lines, corrupted, marked, foreign;
    export_counts(path, &lines, &corrupted, &marked, &foreign);
    CHECK_INT(lines, labels);
    CHECK_INT(marked, labels);
    double sd = sqrt(labels * 0.25 * 0.75);
    check_record(fabs(corrupted - 0.25 * labels) <= 5 * sd, __FILE__, __LINE__,
                 "corrupted %ld of %ld, expected %.1f +- %.1f", corrupted, labels, 0.25 * labels,
                 5 * sd);
    /* The clean view: every label as received, no corruption marks, and no
     * trace of the client-side simulation. */
    CHECK_ERR(ldpref_admin_export_view_path(op, NULL, "clean", 0, clean), LP_OK);
    export_counts(clean, &lines, &corrupted, &marked, &foreign);
    CHECK_INT(lines, labels);
    CHECK_INT(marked, 0);
    CHECK_INT(foreign, 0);
    char ver[32];
    snprintf(ver, sizeof ver, "%lld", (long long)v3);
    const char *exp[] = {"ldpref",    "admin",     "export", "--view",
                         "corrupted", "--version", ver,      NULL};
    CHECK_INT(cli(&out, exp), 0);
    CHECK(out && strstr(out, "\"corrupted\"") != NULL);
    free(out);
    /* Switch it off again. */
    ldpref_corruption_init(&s);
    CHECK_ERR(ldpref_admin_corruption_set(op, &s, NULL), LP_OK);
}

static void test_runs_cancel_schedule(ldpref_client *op)
{
    char *json = NULL;
    CHECK_ERR(ldpref_admin_retrain(op, "{\"max_iter\": 100000, \"activate\": false}", &json),
              LP_OK);
    json_t *run = parse(json);
    int64_t id = int_field(run, "run");
    json_decref(run);
    ldpref_free(json);
    json = NULL;
    int crc = ldpref_admin_run_cancel(op, id, &json);
    CHECK(crc == LDPREF_OK || crc == LDPREF_ERUN_FINISHED);
    ldpref_free(json);
    json = NULL;
    int wrc = ldpref_admin_run_wait(op, id, 20, NULL, NULL, &json);
    /* Cancelled in time, or it had already ended by itself (a cancel that
     * races the end of the run may still be answered 200, see below). */
    CHECK(wrc == LDPREF_ECANCELLED || wrc == LDPREF_OK);
    if (crc == LDPREF_ERUN_FINISHED)
        CHECK_ERR(wrc, LP_OK);
    run = parse(json);
    CHECK_STR(json_string_value(json_object_get(run, "status")),
              wrc == LDPREF_ECANCELLED ? "cancelled" : "succeeded");
    if (wrc == LDPREF_ECANCELLED)
        CHECK_STR(json_string_value(json_object_get(json_object_get(run, "error"), "error")),
                  "cancelled");
    json_decref(run);
    ldpref_free(json);
    /* run_finished for a run that ended long ago (run 1: no labels). Not
     * for `id` right after the wait: the server keeps an ended run as its
     * current one until it is persisted, and a cancel in that window is
     * answered 200. */
    CHECK_ERR(ldpref_admin_run_cancel(op, 1, NULL), LP_ERUN_FINISHED);
    const char *cancel[] = {"ldpref", "admin", "cancel", "1", NULL};
    CHECK_INT(cli(NULL, cancel), LDPREF_ERUN_FINISHED);
    char ids[32];
    snprintf(ids, sizeof ids, "%lld", (long long)id);
    const char *show[] = {"ldpref", "admin", "run", ids, NULL};
    char *out = NULL;
    CHECK_INT(cli(&out, show), 0);
    run = parse(out);
    CHECK_INT(int_field(run, "run"), id);
    json_decref(run);
    free(out);

    json = NULL;
    CHECK_ERR(ldpref_admin_runs(op, 2, &json), LP_OK);
    json_t *runs = parse(json);
    CHECK_INT(json_array_size(json_object_get(runs, "runs")), 2);
    CHECK_INT(int_field(json_array_get(json_object_get(runs, "runs"), 0), "run"), id);
    json_decref(runs);
    ldpref_free(json);
    const char *list[] = {"ldpref", "admin", "runs", "--limit", "100", NULL};
    CHECK_INT(cli(&out, list), 0);
    runs = parse(out);
    CHECK(json_array_size(json_object_get(runs, "runs")) >= 5);
    json_decref(runs);
    free(out);

    /* Schedule: the CLI changes only what it is told. */
    const char *set[] = {"ldpref", "admin",  "schedule", "--every-labels",
                         "100000", "--loss", "ipo",      NULL};
    CHECK_INT(cli(NULL, set), 0);
    const char *set2[] = {"ldpref", "admin", "schedule", "--interval", "86400", NULL};
    CHECK_INT(cli(NULL, set2), 0);
    json = NULL;
    CHECK_ERR(ldpref_admin_schedule_get(op, &json), LP_OK);
    json_t *sch = parse(json);
    CHECK_INT(int_field(sch, "every_labels"), 100000);
    CHECK_INT(int_field(sch, "interval_s"), 86400);
    CHECK_STR(json_string_value(json_object_get(json_object_get(sch, "request"), "loss")), "ipo");
    json_decref(sch);
    ldpref_free(json);
    json = NULL;
    CHECK_ERR(ldpref_admin_schedule_set(op, "{\"interval_s\": 0, \"every_labels\": 0}", &json),
              LP_OK);
    sch = parse(json);
    CHECK_INT(int_field(sch, "every_labels"), 0);
    CHECK_INT(int_field(sch, "interval_s"), 0);
    json_decref(sch);
    ldpref_free(json);
}

int main(void)
{
    lp_rng_init();
    if (server_start(&srv, NULL) != 0) {
        check_record(0, __FILE__, __LINE__, "server starts");
        return check_summary();
    }
    snprintf(env_server, sizeof env_server, "LDPREF_SERVER=%s", srv.url);
    snprintf(env_token, sizeof env_token, "LDPREF_OPERATOR_TOKEN=%s", srv.token);
    ldpref_client *op = operator_client_open(&srv);
    if (op) {
        test_before_labels(op);
        CHECK_ERR(ldpref_admin_tasks_load(op, OASST, NULL, NULL), LP_OK);
        ldpref_client *real = annotator(op, "real", 0.0);
        ldpref_client *sim = annotator(op, "simulated", 0.3);
        if (real && sim) {
            label(real, PER_ANNOTATOR, 0);
            label(sim, PER_ANNOTATOR, 1);
            ldpref_budget b;
            CHECK_ERR(ldpref_budget_get(sim, &b), LP_OK);
            /* Every memo entry was drawn under simulation; near-duplicate
             * tasks of the sample (27 of these 150: responses that differ in
             * a preamble or in letter case) share one entry. */
            CHECK_INT(b.simulated, b.labels);
            CHECK(b.labels > PER_ANNOTATOR / 2 && b.labels <= PER_ANNOTATOR);
        }
        ldpref_client_close(real);
        ldpref_client_close(sim);
        test_server_errors(op);
        int64_t v = 0;
        test_models_and_score(op, &v);
        test_corruption(op, 2L * PER_ANNOTATOR);
        test_runs_cancel_schedule(op);
    }
    ldpref_client_close(op);
    CHECK_INT(server_stop(&srv), 0);
    server_cleanup(&srv);
    return check_summary();
}
