/*
 * e2e_learn.c — the server learns, end to end: the real ldpref-server on
 * 127.0.0.1 (port 0, temporary SQLite file), OASST tasks loaded over HTTP,
 * simulated annotators whose true preference is the human choice labelling
 * through the real libldpref at epsilon = 1 and epsilon = infinity, retrains
 * over HTTP, the served policy scored on held-out tasks, rollback, server-
 * side (LTC) corruption, ingest and scoring concurrent with training and
 * model swaps, reproducibility, and the exact errors of bad input.
 */
#include "annotator_client.h"
#include "check.h"
#include "error.h"
#include "ldpref.h"
#include "operator_client.h"
#include "raw_annotator.h"
#include "rr.h"
#include "server_proc.h"

#include <jansson.h>
#include <math.h>
#include <pthread.h>
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define OASST "tests/data/oasst-en100/en_100.pairs.jsonl"
#define N_INF 1  /* annotators per half answering without privatization */
#define N_EPS1 2 /* annotators per half at epsilon = 1 */

static server_proc srv;

/* ---- small HTTP helpers ---- */

static json_t *call(const char *method, const char *path, const char *body, long *status)
{
    return operator_call(&srv, method, path, body, status);
}

/* Expects the JSON error `want` (name and status) from a call. */
static void expect_error(const char *method, const char *path, const char *body, int want)
{
    long st;
    json_t *j = call(method, path, body, &st);
    const char *name = j ? json_string_value(json_object_get(j, "error")) : NULL;
    check_record(name && strcmp(name, lp_error_name(want)) == 0 && st == lp_error_http_status(want),
                 __FILE__, __LINE__, "%s %s %s: want %s/%d, got %ld %s", method, path,
                 body ? body : "", lp_error_name(want), lp_error_http_status(want), st,
                 name ? name : "(none)");
    json_decref(j);
}

/* Starts a retrain; returns the run id (0 on failure). */
static int64_t retrain(const char *body)
{
    long st;
    json_t *j = call("POST", "/v1/retrain", body, &st);
    int64_t id = st == 202 ? json_integer_value(json_object_get(j, "run")) : 0;
    check_record(id > 0, __FILE__, __LINE__, "retrain %s: status %ld", body, st);
    /* a queued run has no figures yet: objective and grad_norm are null */
    const json_t *prog = json_object_get(j, "progress");
    if (id > 0)
        check_record(json_is_null(json_object_get(prog, "objective")) &&
                         json_is_null(json_object_get(prog, "grad_norm")),
                     __FILE__, __LINE__, "retrain %s: a queued run's progress has figures", body);
    json_decref(j);
    return id;
}

static json_t *run_get(int64_t run)
{
    char path[64];
    snprintf(path, sizeof path, "/v1/retrain?run=%lld", (long long)run);
    long st;
    return call("GET", path, NULL, &st);
}

/* Waits for a run to end (at most 120 s); returns the final run object. */
static json_t *run_wait(int64_t run)
{
    return operator_run_wait(&srv, run, 120);
}

/* Retrains and waits for success; returns the model version (0 if not). */
static int64_t retrain_ok(const char *body, json_t **run_out)
{
    int64_t id = retrain(body);
    json_t *run = id ? run_wait(id) : NULL;
    const char *s = run ? json_string_value(json_object_get(run, "status")) : NULL;
    check_record(
        s && strcmp(s, "succeeded") == 0, __FILE__, __LINE__, "run %s: %s %s", body, s ? s : "?",
        run ? json_string_value(json_object_get(json_object_get(run, "error"), "message")) : "");
    int64_t v = run ? json_integer_value(json_object_get(run, "model_version")) : 0;
    if (run_out)
        *run_out = run;
    else
        json_decref(run);
    return v;
}

static json_t *model_get(int64_t version)
{
    char path[64];
    snprintf(path, sizeof path, "/v1/models?version=%lld", (long long)version);
    long st;
    json_t *j = call("GET", path, NULL, &st);
    CHECK_INT(st, 200);
    return j;
}

/* ---- data ---- */

typedef struct pair {
    char *prompt, *chosen, *rejected;
    int half;
} pair;

static pair *pairs;
static size_t n_pairs;

/* Two halves split by prompt (pairs of one prompt share responses, so a
 * pair-level split would leak them): each half's model is evaluated on the
 * other half (cross-fitting), so every pair is held out once. */
static int half_of(const char *prompt)
{
    uint64_t h = 1469598103934665603ULL;
    for (const unsigned char *p = (const unsigned char *)prompt; *p; p++)
        h = (h ^ *p) * 1099511628211ULL;
    return (int)(h % 2);
}

static void load_pairs(void)
{
    FILE *f = fopen(OASST, "r");
    CHECK(f != NULL);
    if (f == NULL)
        return;
    char *line = NULL;
    size_t cap = 0;
    size_t room = 0;
    while (getline(&line, &cap, f) > 0) {
        json_t *j = json_loads(line, 0, NULL);
        if (j == NULL)
            continue;
        if (n_pairs == room) {
            room = room ? room * 2 : 256;
            pairs = realloc(pairs, room * sizeof *pairs);
        }
        pair *p = &pairs[n_pairs++];
        p->prompt = strdup(json_string_value(json_object_get(j, "prompt")));
        p->chosen = strdup(json_string_value(json_object_get(j, "chosen")));
        p->rejected = strdup(json_string_value(json_object_get(j, "rejected")));
        p->half = half_of(p->prompt);
        json_decref(j);
    }
    free(line);
    fclose(f);
}

/* Uploads the pairs of one half as TRL lines to a campaign. */
static void upload(const char *campaign, int half, int64_t *first, int64_t *last)
{
    size_t cap = 1 << 20, len = 0;
    char *body = malloc(cap);
    for (size_t i = 0; i < n_pairs; i++) {
        if (pairs[i].half != half)
            continue;
        json_t *o = json_pack("{s:s, s:s, s:s}", "prompt", pairs[i].prompt, "chosen",
                              pairs[i].chosen, "rejected", pairs[i].rejected);
        char *t = json_dumps(o, JSON_COMPACT);
        json_decref(o);
        size_t tl = strlen(t);
        while (len + tl + 2 > cap)
            body = realloc(body, cap *= 2);
        memcpy(body + len, t, tl);
        len += tl;
        body[len++] = '\n';
        free(t);
    }
    char url[256];
    snprintf(url, sizeof url, "%s/v1/tasks?campaign=%s", srv.url, campaign);
    http_reply r;
    http_raw("POST", url, body, len, srv.token, &r);
    CHECK_INT(r.status, 200);
    json_t *j = r.body ? json_loads(r.body, 0, NULL) : NULL;
    json_t *ids = json_object_get(j, "task_ids");
    *first = json_integer_value(json_array_get(ids, 0));
    *last = json_integer_value(json_array_get(ids, 1));
    json_decref(j);
    http_reply_free(&r);
    free(body);
}

/* Every annotator of a campaign labels all its tasks: more labels per task
 * than annotators in any campaign of this test. */
#define LABELS_PER_TASK 16

static void create_campaign(const char *name)
{
    char body[256];
    snprintf(body, sizeof body,
             "{\"name\":\"%s\",\"epsilon_min\":0.5,\"epsilon_max\":10,\"allow_infinite\":true,"
             "\"epsilon_budget\":1000000,\"epsilon_default\":null,\"labels_per_task\":%d}",
             name, LABELS_PER_TASK);
    long st;
    json_decref(call("POST", "/v1/campaigns", body, &st));
    CHECK_INT(st, 201);
}

/* The human choice for a presented task: 1 if b is the chosen response. */
static int human_prefers_b(const ldpref_task *t)
{
    for (size_t i = 0; i < n_pairs; i++)
        if (strcmp(pairs[i].prompt, t->prompt) == 0) {
            if (strcmp(pairs[i].chosen, t->b) == 0 && strcmp(pairs[i].rejected, t->a) == 0)
                return 1;
            if (strcmp(pairs[i].chosen, t->a) == 0 && strcmp(pairs[i].rejected, t->b) == 0)
                return 0;
        }
    return -1;
}

/* A new enrolled annotator for campaign with its own caps. */
static ldpref_client *annotator(const char *campaign, const char *name, double eps_cap)
{
    char body[128];
    snprintf(body, sizeof body, "{\"campaign\":\"%s\",\"count\":1}", campaign);
    long st;
    json_t *j = call("POST", "/v1/enrollment-tokens", body, &st);
    const char *token = json_string_value(json_array_get(json_object_get(j, "tokens"), 0));
    char key[512], file[128];
    snprintf(file, sizeof file, "%s.key", name);
    CHECK_ERR(annotator_key_ensure(srv.dir, file, key, sizeof key), LP_OK);
    ldpref_options o;
    annotator_options_init(&o, srv.url, key, eps_cap, isinf(eps_cap) ? INFINITY : 1e6);
    ldpref_client *c = NULL;
    CHECK_ERR(ldpref_client_open(&o, &c), LP_OK);
    ldpref_enrollment en;
    CHECK_ERR(ldpref_enroll(c, token, &en), LP_OK);
    json_decref(j);
    return c;
}

/* Labels every task of the annotator's campaign. With shuffle_seed != 0 the
 * true answers are coins drawn from the seed, one per task in the order the
 * tasks come (task ids ascending), applied in the task's own orientation
 * (undoing the presentation order the server drew): labels that carry no
 * information about the content and are the same in every run, so the
 * shuffled-label model, and the baseline it sets, is reproducible. Returns
 * the count. */
static size_t label_all(ldpref_client *c, uint64_t shuffle_seed)
{
    ldpref_task *tasks = NULL;
    size_t n = 0;
    CHECK_ERR(ldpref_next_tasks(c, 1000, &tasks, &n), LP_OK);
    ldpref_batch_item *items = calloc(n ? n : 1, sizeof *items);
    int *prefs = calloc(n ? n : 1, sizeof *prefs);
    for (size_t i = 0; i < n; i++) {
        prefs[i] = human_prefers_b(&tasks[i]);
        CHECK(prefs[i] >= 0);
    }
    uint64_t s = shuffle_seed;
    for (size_t i = 0; shuffle_seed && i < n; i++) { /* xorshift64 coins */
        s ^= s << 13, s ^= s >> 7, s ^= s << 17;
        /* prefs[i] is 1 exactly when the presented order is swapped (the
         * human choice is response 0): coin 1 = "response 1 is better" */
        prefs[i] ^= (int)(s >> 63);
    }
    for (size_t i = 0; i < n; i++) {
        items[i].task = &tasks[i];
        items[i].choice = prefs[i];
    }
    CHECK_ERR(ldpref_answer_batch(c, items, n), LP_OK);
    size_t ok = 0;
    for (size_t i = 0; i < n; i++)
        ok += items[i].error == LDPREF_OK;
    CHECK_INT(ok, n);
    free(items);
    free(prefs);
    ldpref_tasks_free(tasks, n);
    return ok;
}

/* Labels every task of the annotator's campaign preferring the response
 * whose text is `want` (dense test campaign). */
static void label_prefer(ldpref_client *c, const char *want)
{
    ldpref_task *tasks = NULL;
    size_t n = 0;
    CHECK_ERR(ldpref_next_tasks(c, 1000, &tasks, &n), LP_OK);
    for (size_t i = 0; i < n; i++) {
        ldpref_receipt rc;
        CHECK_ERR(ldpref_answer(c, &tasks[i], strcmp(tasks[i].b, want) == 0, &rc), LP_OK);
    }
    ldpref_tasks_free(tasks, n);
}

/* Labels of one campaign stored in the database file. */
static long long campaign_labels(const char *campaign)
{
    return server_db_scalar(&srv,
                            "SELECT count(*) FROM labels l JOIN tasks t ON t.id = l.task "
                            "JOIN campaigns c ON c.id = t.campaign WHERE c.name = ?1",
                            campaign);
}

/* ---- scoring ---- */

/* Rewards of responses 0 and 1 of each task under version (0: active);
 * returns the answering version. */
static int64_t score_tasks(int64_t first, int64_t last, int64_t version, double *r0, double *r1)
{
    json_t *ids = json_array();
    for (int64_t t = first; t <= last; t++)
        json_array_append_new(ids, json_integer(t));
    json_t *req = json_pack("{s:o}", "task_ids", ids);
    if (version)
        json_object_set_new(req, "version", json_integer(version));
    char *body = json_dumps(req, JSON_COMPACT);
    json_decref(req);
    long st;
    json_t *j = call("POST", "/v1/score", body, &st);
    free(body);
    CHECK_INT(st, 200);
    json_t *tasks = json_object_get(j, "tasks");
    for (size_t i = 0; i < json_array_size(tasks); i++) {
        json_t *c = json_object_get(json_array_get(tasks, i), "candidates");
        r0[i] = json_real_value(json_object_get(json_array_get(c, 0), "reward"));
        r1[i] = json_real_value(json_object_get(json_array_get(c, 1), "reward"));
        double p0 = json_real_value(json_object_get(json_array_get(c, 0), "probability"));
        double p1 = json_real_value(json_object_get(json_array_get(c, 1), "probability"));
        CHECK(fabs(p0 + p1 - 1.0) < 1e-12);
        CHECK((r0[i] > r1[i]) == (p0 > p1) || r0[i] == r1[i]);
    }
    int64_t v = json_integer_value(json_object_get(j, "model_version"));
    json_decref(j);
    return v;
}

/* Per held-out task (of first..last): 1 if the model prefers response 0,
 * the human choice, 1/2 for a tie, else 0; into out[0..m). */
static void heldout_correct(int64_t first, int64_t last, int64_t version, double *out)
{
    size_t m = (size_t)(last - first + 1);
    double *r0 = calloc(m, sizeof *r0), *r1 = calloc(m, sizeof *r1);
    score_tasks(first, last, version, r0, r1);
    for (size_t i = 0; i < m; i++)
        out[i] = r0[i] > r1[i] ? 1.0 : r0[i] == r1[i] ? 0.5 : 0.0;
    free(r0);
    free(r1);
}

/* ---- concurrency: scoring while models are swapped ---- */

struct scorer {
    int64_t t, va, vb;
    double ra[2], rb[2]; /* rewards of task t under va and vb */
    int requests, failures, mixed;
    volatile int stop;
};

static void *score_loop(void *arg)
{
    struct scorer *s = arg;
    while (!s->stop) {
        double r0[2], r1[2];
        json_t *req = json_pack("{s:[I,I]}", "task_ids", (json_int_t)s->t, (json_int_t)s->t);
        char *body = json_dumps(req, JSON_COMPACT);
        json_decref(req);
        long st;
        json_t *j = call("POST", "/v1/score", body, &st);
        free(body);
        s->requests++;
        if (st != 200 || j == NULL) {
            s->failures++;
            json_decref(j);
            continue;
        }
        int64_t v = json_integer_value(json_object_get(j, "model_version"));
        json_t *tasks = json_object_get(j, "tasks");
        for (size_t i = 0; i < 2; i++) {
            json_t *c = json_object_get(json_array_get(tasks, i), "candidates");
            r0[i] = json_real_value(json_object_get(json_array_get(c, 0), "reward"));
            r1[i] = json_real_value(json_object_get(json_array_get(c, 1), "reward"));
        }
        const double *want = v == s->va ? s->ra : v == s->vb ? s->rb : NULL;
        for (size_t i = 0; i < 2; i++)
            if (want == NULL || r0[i] != want[0] || r1[i] != want[1])
                s->mixed++;
        json_decref(j);
    }
    return NULL;
}

static void activate(int64_t v)
{
    char body[64];
    snprintf(body, sizeof body, "{\"version\":%lld}", (long long)v);
    long st;
    json_decref(call("POST", "/v1/models/activate", body, &st));
    CHECK_INT(st, 200);
}

/* ---- the tests ---- */

static void activate(int64_t v);

/* task ids: half h of the human-labelled campaigns, then its shuffled copy */
static int64_t half_first[2], half_last[2], shuf_first[2], shuf_last[2], dense_first;

static void test_learning_and_rollback(int64_t *v_real, int64_t *v_shuf)
{
    int64_t va[2], vs[2];
    /* per held-out pair: correct under the human-label and the shuffled
     * model, and the pair's prompt */
    double *real = calloc(n_pairs, sizeof *real), *shuf = calloc(n_pairs, sizeof *shuf);
    const char **prompt = calloc(n_pairs, sizeof *prompt);
    size_t m = 0;
    for (int h = 0; h < 2; h++) {
        char body[128];
        json_t *run;
        snprintf(body, sizeof body, "{\"campaign\":\"half%d\",\"l2\":1,\"seed\":1}", h);
        va[h] = retrain_ok(body, &run);
        CHECK(va[h] > 0);
        CHECK_STR(json_string_value(json_object_get(json_object_get(run, "request"), "loss")),
                  "square-chipo");
        snprintf(body, sizeof body, "half%d", h);
        CHECK_INT(json_integer_value(json_object_get(run, "labels")), campaign_labels(body));
        json_decref(run);
        snprintf(body, sizeof body, "{\"campaign\":\"shuf%d\",\"l2\":1,\"seed\":1}", h);
        vs[h] = retrain_ok(body, NULL);
        CHECK(vs[h] > va[h]); /* versions increase */
        /* each half's models score the other half */
        int o = 1 - h;
        size_t k = (size_t)(half_last[o] - half_first[o] + 1);
        activate(va[h]); /* through the served model */
        heldout_correct(half_first[o], half_last[o], 0, real + m);
        heldout_correct(half_first[o], half_last[o], vs[h], shuf + m);
        for (size_t i = 0, j = 0; i < n_pairs && j < k; i++)
            if (pairs[i].half == o)
                prompt[m + j++] = pairs[i].prompt;
        m += k;
    }
    /* Every pair is held out once. The test statistic is the paired
     * difference of accuracies, human-label model minus shuffled-label model.
     * Pairs of one prompt share responses, so outcomes are correlated within
     * a prompt: its standard error is the cluster-robust one, with prompts as
     * clusters, se^2 = sum_c (sum_{i in c} (d_i - dbar))^2 / m^2. Demand a
     * difference above 3 se (one-sided, about 0.1% under the null of no
     * difference), and accuracy above chance by 3 cluster-robust se too. */
    double mr = 0, ms = 0;
    for (size_t i = 0; i < m; i++)
        mr += real[i] / (double)m, ms += shuf[i] / (double)m;
    double dbar = mr - ms, var_d = 0, var_r = 0;
    for (size_t i = 0; i < m; i++) {
        if (prompt[i] == NULL)
            continue;
        double sd = 0, sr = 0; /* sums over the cluster of i (first occurrence) */
        for (size_t j = i; j < m; j++)
            if (prompt[j] != NULL && strcmp(prompt[j], prompt[i]) == 0) {
                sd += (real[j] - shuf[j]) - dbar;
                sr += real[j] - mr;
                if (j > i)
                    prompt[j] = NULL;
            }
        var_d += sd * sd;
        var_r += sr * sr;
    }
    double se_d = sqrt(var_d) / (double)m, se_r = sqrt(var_r) / (double)m;
    fprintf(stderr,
            "held-out accuracy on %zu tasks: human labels %.3f (se %.3f), shuffled %.3f; "
            "difference %.3f (se %.3f)\n",
            m, mr, se_r, ms, dbar, se_d);
    check_record(mr > 0.5 + 3 * se_r, __FILE__, __LINE__, "accuracy %.3f above chance + 3 se", mr);
    check_record(dbar > 3 * se_d, __FILE__, __LINE__,
                 "human-label model beats the shuffled one by %.3f > 3 se = %.3f", dbar, 3 * se_d);
    free(real);
    free(shuf);
    free(prompt);

    /* The last activation is served; rolling back changes scores. */
    double r0[1], r1[1], q0[1], q1[1];
    int64_t t = half_first[1];
    CHECK_INT(score_tasks(t, t, 0, r0, r1), va[1]);
    activate(va[0]); /* roll back */
    CHECK_INT(score_tasks(t, t, 0, q0, q1), va[0]);
    CHECK(r0[0] != q0[0] || r1[0] != q1[0]);
    long st;
    json_t *list = call("GET", "/v1/models", NULL, &st);
    CHECK_INT(json_integer_value(json_object_get(list, "active_version")), va[0]);
    CHECK_INT(json_array_size(json_object_get(list, "models")), 4);
    json_decref(list);
    *v_real = va[0];
    *v_shuf = vs[1];
}

static void test_reproducible(int64_t va)
{
    json_t *ma = model_get(va);
    int64_t cutoff = json_integer_value(json_object_get(ma, "cutoff"));
    char body[160];
    snprintf(body, sizeof body,
             "{\"campaign\":\"half0\",\"l2\":1,\"seed\":1,\"cutoff\":%lld,\"activate\":false}",
             (long long)cutoff);
    int64_t v1 = retrain_ok(body, NULL), v2 = retrain_ok(body, NULL);
    json_t *m1 = model_get(v1), *m2 = model_get(v2);
    char *t0 = json_dumps(json_object_get(ma, "model"), JSON_SORT_KEYS);
    char *t1 = json_dumps(json_object_get(m1, "model"), JSON_SORT_KEYS);
    char *t2 = json_dumps(json_object_get(m2, "model"), JSON_SORT_KEYS);
    CHECK(t1 && t2 && strcmp(t1, t2) == 0);
    CHECK(t0 && t1 && strcmp(t0, t1) == 0); /* same data as the first run */
    CHECK(!json_is_true(json_object_get(m1, "active")));
    free(t0);
    free(t1);
    free(t2);
    json_decref(ma);
    json_decref(m1);
    json_decref(m2);
}

/* Counts over the corrupted export view of model v (one line per label). */
struct view_counts {
    long long rows, changed;
    long long flip_consistent; /* changed rows with z = 1 - z_received, others z = z_received */
    long long zeros;           /* rows received as z = 0 */
    long long to_one;          /* changed rows that went from 0 to 1 */
};

static struct view_counts export_view(int64_t v)
{
    struct view_counts k = {0};
    char url[256];
    snprintf(url, sizeof url, "%s/v1/export?view=corrupted&version=%lld", srv.url, (long long)v);
    http_reply r;
    http_raw("GET", url, NULL, 0, srv.token, &r);
    CHECK_INT(r.status, 200);
    for (char *line = r.body, *nl; line && *line; line = nl + 1) {
        nl = strchr(line, '\n');
        if (nl == NULL)
            break;
        *nl = 0;
        json_t *o = json_loads(line, 0, NULL);
        int corrupted = json_is_true(json_object_get(o, "corrupted"));
        int z = (int)json_integer_value(json_object_get(o, "z"));
        int zr = (int)json_integer_value(json_object_get(o, "z_received"));
        k.rows++;
        k.changed += corrupted;
        k.flip_consistent += corrupted ? z == 1 - zr : z == zr;
        k.zeros += zr == 0;
        k.to_one += corrupted && z == 1 && zr == 0;
        json_decref(o);
    }
    http_reply_free(&r);
    return k;
}

static void test_corruption(void)
{
    long st;
    json_t *c =
        call("PUT", "/v1/corruption",
             "{\"campaign\":\"half0\",\"alpha\":0.2,\"strategy\":\"flip\",\"seed\":7}", &st);
    CHECK_INT(st, 200);
    int64_t cid = json_integer_value(json_object_get(c, "id"));
    json_decref(c);
    long long labels_before = server_db_count(&srv, "labels");
    int64_t v = retrain_ok("{\"campaign\":\"half0\",\"l2\":1,\"activate\":false}", NULL);
    json_t *m = model_get(v);
    json_t *cs = json_object_get(m, "corruption");
    CHECK_INT(json_array_size(cs), 1);
    json_t *c0 = json_array_get(cs, 0);
    CHECK_INT(json_integer_value(json_object_get(c0, "id")), cid);
    CHECK_STR(json_string_value(json_object_get(c0, "strategy")), "flip");
    CHECK_STR(json_string_value(json_object_get(c0, "campaign")), "half0");
    CHECK(fabs(json_number_value(json_object_get(c0, "alpha")) - 0.2) < 1e-15);
    CHECK_INT(json_integer_value(json_object_get(c0, "seed")), 7);
    int64_t n = json_integer_value(json_object_get(m, "labels"));
    json_decref(m);

    /* The corrupted view is exportable; the received labels are unchanged. */
    struct view_counts k = export_view(v);
    long long rows = k.rows, flipped = k.changed;
    CHECK_INT(rows, n);
    CHECK_INT(k.flip_consistent, rows);
    /* Huber coins are Bernoulli(0.2): the flipped fraction lies within 5
     * binomial standard deviations of 0.2. */
    double frac = rows ? (double)flipped / (double)rows : 0, sd = sqrt(0.2 * 0.8 / (double)rows);
    check_record(fabs(frac - 0.2) < 5 * sd, __FILE__, __LINE__, "flipped fraction %.4f", frac);
    CHECK_INT(server_db_count(&srv, "labels"), labels_before);

    /* The same view again: deterministic. */
    CHECK_INT(export_view(v).changed, flipped);

    /* anti against the reference: OASST tasks were uploaded as chosen/
     * rejected (reference 0), so anti sets z = 1 on exactly the changed rows,
     * and only received zeros can change: a fraction 0.2 of them. */
    c = call("PUT", "/v1/corruption",
             "{\"campaign\":\"half0\",\"alpha\":0.2,\"strategy\":\"anti\",\"seed\":11}", &st);
    CHECK_INT(st, 200);
    json_decref(c);
    v = retrain_ok("{\"campaign\":\"half0\",\"l2\":1,\"activate\":false}", NULL);
    m = model_get(v);
    CHECK_STR(json_string_value(
                  json_object_get(json_array_get(json_object_get(m, "corruption"), 0), "strategy")),
              "anti");
    json_decref(m);
    k = export_view(v);
    long long zeros = k.zeros, changed = k.changed;
    CHECK_INT(k.rows, n);
    CHECK_INT(k.to_one, changed);
    sd = sqrt(0.2 * 0.8 * (double)zeros);
    check_record(fabs((double)changed - 0.2 * (double)zeros) < 5 * sd, __FILE__, __LINE__,
                 "anti changed %lld of %lld received zeros", changed, zeros);
    json_decref(call("PUT", "/v1/corruption", "{\"campaign\":\"half0\",\"alpha\":0}", &st));
    CHECK_INT(st, 200);
}

/* Labels acknowledged while a run is in its training phase must be
 * excluded from its snapshot and included in the next one. The run is long
 * (SGD, 1000 epochs) and yields to ingest, so it is still training while a
 * few dozen labels arrive; it is cancelled afterwards. */
static void test_ingest_during_training(int64_t *served_before)
{
    ldpref_client *c = annotator("half0", "late", 1.0);
    ldpref_task *tasks = NULL;
    size_t n = 0;
    CHECK_ERR(ldpref_next_tasks(c, 40, &tasks, &n), LP_OK);
    int64_t run = retrain("{\"campaign\":\"half0\",\"optimizer\":\"sgd\",\"epochs\":1000,"
                          "\"l2\":1,\"activate\":false}");
    json_t *r = NULL;
    const char *s = NULL;
    for (int k = 0; k < 6000; k++) { /* until the snapshot is taken (60 s at most) */
        json_decref(r);
        r = run_get(run);
        s = json_string_value(json_object_get(r, "status"));
        if (s == NULL || (strcmp(s, "queued") != 0 && strcmp(s, "snapshot") != 0))
            break;
        usleep(10000);
    }
    CHECK_STR(s ? s : "", "training");
    int64_t cutoff = json_integer_value(json_object_get(r, "cutoff"));
    int64_t in_run = json_integer_value(json_object_get(r, "labels"));
    json_decref(r);
    CHECK(cutoff > 0);
    CHECK_INT(in_run, campaign_labels("half0"));
    int during = 0;
    int64_t max_during = 0;
    for (size_t i = 0; i < n; i++) {
        ldpref_receipt rc;
        CHECK_ERR(ldpref_answer(c, &tasks[i], human_prefers_b(&tasks[i]), &rc), LP_OK);
        json_t *after = run_get(run);
        const char *s1 = json_string_value(json_object_get(after, "status"));
        int training = s1 && strcmp(s1, "training") == 0;
        json_decref(after);
        if (!training)
            break;
        during++; /* acknowledged between two observations of "training" */
        if (rc.label_id > max_during)
            max_during = rc.label_id;
    }
    fprintf(stderr, "labels acknowledged during training: %d\n", during);
    CHECK(during > 0);
    CHECK(max_during > cutoff); /* excluded from that snapshot */
    char body[64];
    snprintf(body, sizeof body, "{\"run\":%lld}", (long long)run);
    long st;
    json_decref(call("POST", "/v1/retrain/cancel", body, &st));
    json_decref(run_wait(run));
    /* the next run includes them: every label of the campaign */
    json_t *next;
    retrain_ok("{\"campaign\":\"half0\",\"l2\":1,\"activate\":false}", &next);
    CHECK(json_integer_value(json_object_get(next, "cutoff")) >= max_during);
    CHECK_INT(json_integer_value(json_object_get(next, "labels")), campaign_labels("half0"));
    CHECK(json_integer_value(json_object_get(next, "labels")) >= in_run + during);
    json_decref(next);
    ldpref_tasks_free(tasks, n);
    ldpref_client_close(c);
    json_t *list = call("GET", "/v1/models", NULL, &st);
    *served_before = json_integer_value(json_object_get(list, "active_version"));
    json_decref(list);
}

static void test_cancel(int64_t served)
{
    long long models_before = server_db_count(&srv, "models");
    int64_t run = retrain("{\"campaign\":\"half0\",\"optimizer\":\"sgd\",\"epochs\":1000}");
    /* one run at a time */
    expect_error("POST", "/v1/retrain", "{}", LP_ERETRAIN_IN_PROGRESS);
    char body[64];
    snprintf(body, sizeof body, "{\"run\":%lld}", (long long)run);
    long st;
    json_decref(call("POST", "/v1/retrain/cancel", body, &st));
    CHECK_INT(st, 200);
    json_t *done = run_wait(run);
    CHECK_STR(json_string_value(json_object_get(done, "status")), "cancelled");
    CHECK_STR(json_string_value(json_object_get(json_object_get(done, "error"), "error")),
              "cancelled");
    CHECK(json_is_null(json_object_get(done, "model_version")));
    json_decref(done);
    CHECK_INT(server_db_count(&srv, "models"), models_before);
    json_t *list = call("GET", "/v1/models", NULL, &st);
    CHECK_INT(json_integer_value(json_object_get(list, "active_version")), served);
    json_decref(list);
    expect_error("POST", "/v1/retrain/cancel", body, LP_ERUN_FINISHED);
}

static void test_swap_while_scoring(int64_t va, int64_t vb)
{
    struct scorer s = {.t = half_first[1], .va = va, .vb = vb};
    double r0[1], r1[1];
    score_tasks(s.t, s.t, va, r0, r1);
    s.ra[0] = r0[0], s.ra[1] = r1[0];
    score_tasks(s.t, s.t, vb, r0, r1);
    s.rb[0] = r0[0], s.rb[1] = r1[0];
    pthread_t th;
    pthread_create(&th, NULL, score_loop, &s);
    for (int k = 0; k < 60; k++)
        activate(k % 2 ? va : vb);
    s.stop = 1;
    pthread_join(th, NULL);
    fprintf(stderr, "score requests during swaps: %d\n", s.requests);
    CHECK(s.requests > 0);
    CHECK_INT(s.failures, 0);
    CHECK_INT(s.mixed, 0);
}

/* A small dense campaign (features f = (len0, len1-ish, 1, k)), labelled
 * and trained: the model is dense. Returns its version. */
static int64_t test_dense_campaign_model(void)
{
    long st;
    json_decref(call("POST", "/v1/campaigns",
                     "{\"name\":\"dense\",\"allow_infinite\":true,\"epsilon_default\":null,"
                     "\"labels_per_task\":2}",
                     &st));
    CHECK_INT(st, 201);
    char body[8192];
    size_t len = 0;
    for (int k = 0; k < 40; k++)
        len += (size_t)snprintf(body + len, sizeof body - len,
                                "{\"id\":\"d%d\",\"prompt\":\"p%d\",\"responses\":[\"x\",\"y\"],"
                                "\"features\":[[%d,1,0],[0,1,%d]]}\n",
                                k, k, k + 1, k % 3);
    char url[256];
    snprintf(url, sizeof url, "%s/v1/tasks?campaign=dense", srv.url);
    http_reply r;
    http_raw("POST", url, body, len, srv.token, &r);
    CHECK_INT(r.status, 200);
    json_t *j = json_loads(r.body, 0, NULL);
    dense_first = json_integer_value(json_array_get(json_object_get(j, "task_ids"), 0));
    json_decref(j);
    http_reply_free(&r);
    ldpref_client *c = annotator("dense", "dense", INFINITY);
    label_prefer(c, "y");
    ldpref_client_close(c);
    int64_t vd = retrain_ok("{\"campaign\":\"dense\",\"activate\":false,\"l2\":0.1}", NULL);
    json_t *md = model_get(vd);
    CHECK_STR(json_string_value(json_object_get(json_object_get(md, "features"), "kind")), "dense");
    json_decref(md);
    return vd;
}

/* Score requests that do not fit the model or the limits. */
static void test_bad_score_requests(int64_t vd)
{
    char req[256];
    snprintf(req, sizeof req, "{\"version\":%lld,\"candidates\":[{\"features\":[1,2]}]}",
             (long long)vd);
    expect_error("POST", "/v1/score", req, LP_EDIMENSION_MISMATCH);
    snprintf(req, sizeof req, "{\"version\":%lld,\"candidates\":[{\"text\":\"a\"}]}",
             (long long)vd);
    expect_error("POST", "/v1/score", req, LP_EFEATURES_REQUIRED);
    expect_error("POST", "/v1/score", "{\"candidates\":[{\"text\":\"\"}]}", LP_EEMPTY_TEXT);
    expect_error("POST", "/v1/score", "{\"task_ids\":[99999999]}", LP_EUNKNOWN_TASK);
    expect_error("POST", "/v1/score", "{\"version\":99999,\"candidates\":[{\"text\":\"a\"}]}",
                 LP_EUNKNOWN_MODEL);
    expect_error("POST", "/v1/score", "{\"candidates\":[{\"text\":1}]}", LP_EWRONG_TYPE);
    expect_error("POST", "/v1/score", "{\"prompt\":\"x\"}", LP_EMISSING_FIELD);
    expect_error("POST", "/v1/score", "{\"candidates\":[{\"txt\":\"a\"}]}", LP_EUNKNOWN_FIELD);
    size_t big = 2 + 1025 * 15 + 64;
    char *many = malloc(big);
    size_t off = (size_t)snprintf(many, big, "{\"candidates\":[");
    for (int k = 0; k < 1025; k++)
        off += (size_t)snprintf(many + off, big - off, "%s{\"text\":\"a\"}", k ? "," : "");
    snprintf(many + off, big - off, "]}");
    expect_error("POST", "/v1/score", many, LP_ETOO_MANY_CANDIDATES);
    free(many);
}

/* Bad training, model, run, corruption and schedule requests. */
static void test_bad_learning_requests(void)
{
    expect_error("POST", "/v1/retrain", "{\"loss\":\"nope\"}", LP_EUNKNOWN_LOSS);
    expect_error("POST", "/v1/retrain", "{\"rmax\":-1}", LP_EBAD_HYPERPARAMETER);
    expect_error("POST", "/v1/retrain", "{\"max_iter\":0}", LP_EBAD_HYPERPARAMETER);
    expect_error("POST", "/v1/retrain", "{\"beta\":0}", LP_EBAD_HYPERPARAMETER);
    expect_error("POST", "/v1/retrain", "{\"l2\":-0.5}", LP_EBAD_HYPERPARAMETER);
    expect_error("POST", "/v1/retrain", "{\"threads\":65}", LP_EBAD_HYPERPARAMETER);
    expect_error("POST", "/v1/retrain", "{\"text\":{\"dim\":0}}", LP_EBAD_HYPERPARAMETER);
    expect_error("POST", "/v1/retrain", "{\"l2\":\"x\"}", LP_EWRONG_TYPE);
    expect_error("POST", "/v1/retrain", "{\"bogus\":1}", LP_EUNKNOWN_FIELD);
    expect_error("POST", "/v1/retrain", "{\"campaign\":\"nope\"}", LP_EUNKNOWN_CAMPAIGN);
    expect_error("POST", "/v1/retrain", "{\"loss\":", LP_EMALFORMED_JSON);
    expect_error("GET", "/v1/models?version=99999", NULL, LP_EUNKNOWN_MODEL);
    expect_error("POST", "/v1/models/activate", "{\"version\":99999}", LP_EUNKNOWN_MODEL);
    expect_error("POST", "/v1/models/activate", "{\"version\":\"1\"}", LP_EWRONG_TYPE);
    expect_error("GET", "/v1/retrain?run=99999", NULL, LP_EUNKNOWN_RUN);
    expect_error("POST", "/v1/retrain/cancel", "{\"run\":99999}", LP_EUNKNOWN_RUN);
    expect_error("PUT", "/v1/corruption", "{\"alpha\":0.7}", LP_EBAD_CORRUPTION);
    expect_error("PUT", "/v1/corruption", "{\"alpha\":0.1,\"strategy\":\"nope\"}",
                 LP_EBAD_CORRUPTION);
    expect_error("PUT", "/v1/corruption", "{\"alpha\":0.1,\"campaign\":\"nope\"}",
                 LP_EUNKNOWN_CAMPAIGN);
    expect_error("PUT", "/v1/retrain/schedule", "{\"request\":{\"cutoff\":3}}",
                 LP_EBAD_HYPERPARAMETER);
}

/* The learning endpoints require the operator token. */
static void test_operator_token_required(void)
{
    http_reply r;
    char url2[256];
    snprintf(url2, sizeof url2, "%s/v1/retrain", srv.url);
    http_raw("POST", url2, "{}", 2, NULL, &r);
    CHECK_INT(r.status, 401);
    http_reply_free(&r);
    http_raw("POST", url2, "{}", 2, "op_wrong", &r);
    char name[64];
    http_error_name(&r, name, sizeof name);
    CHECK_STR(name, "unauthorized");
    http_reply_free(&r);
}

/* Bad input of every kind stores nothing: no run, model, corruption
 * setting or activation. */
static void test_dense_and_bad_input(void)
{
    int64_t vd = test_dense_campaign_model();
    long long runs = server_db_count(&srv, "training_runs"),
              models = server_db_count(&srv, "models");
    long long corr = server_db_count(&srv, "corruption_settings"),
              acts = server_db_count(&srv, "activations");
    test_bad_score_requests(vd);
    test_bad_learning_requests();
    test_operator_token_required();
    CHECK_INT(server_db_count(&srv, "training_runs"), runs);
    CHECK_INT(server_db_count(&srv, "models"), models);
    CHECK_INT(server_db_count(&srv, "corruption_settings"), corr);
    CHECK_INT(server_db_count(&srv, "activations"), acts);
}

static void test_schedule(void)
{
    long st;
    long long runs = server_db_count(&srv, "training_runs");
    json_t *s = call("PUT", "/v1/retrain/schedule",
                     "{\"every_labels\":1,\"request\":{\"campaign\":\"dense\",\"l2\":0.1,"
                     "\"activate\":false}}",
                     &st);
    CHECK_INT(st, 200);
    CHECK_INT(json_integer_value(json_object_get(s, "every_labels")), 1);
    json_decref(s);
    /* a new label in the campaign triggers a run within a few scheduler ticks */
    ldpref_client *c = annotator("dense", "dense2", INFINITY);
    ldpref_task *tasks = NULL;
    size_t n = 0;
    CHECK_ERR(ldpref_next_tasks(c, 1, &tasks, &n), LP_OK);
    ldpref_receipt rc;
    CHECK_ERR(ldpref_answer(c, &tasks[0], 1, &rc), LP_OK);
    ldpref_tasks_free(tasks, n);
    ldpref_client_close(c);
    int started = 0;
    for (int i = 0; i < 1000 && !started; i++) {
        usleep(10000);
        started = server_db_count(&srv, "training_runs") > runs;
    }
    CHECK(started);
    json_decref(call("PUT", "/v1/retrain/schedule", "{\"every_labels\":0,\"interval_s\":0}", &st));
    CHECK_INT(st, 200);
    json_t *list = call("GET", "/v1/retrain?limit=1", NULL, &st);
    json_t *run = json_array_get(json_object_get(list, "runs"), 0);
    CHECK_STR(json_string_value(json_object_get(run, "trigger")), "labels");
    int64_t id = json_integer_value(json_object_get(run, "run"));
    json_decref(list);
    json_decref(run_wait(id));
}

/* A number field of a JSON object, NAN if it is not a number. */
static double num_field(const json_t *o, const char *key)
{
    const json_t *v = json_object_get(o, key);
    return json_is_number(v) ? json_number_value(v) : NAN;
}

/* The default request chooses l2 by cross-validation; every model carries
 * its held-out estimate, in /v1/models and in `ldpref admin models`. */
static void test_heldout_estimate(int64_t fixed_version)
{
    json_t *run = NULL;
    int64_t v = retrain_ok("{\"campaign\":\"half0\",\"activate\":false}", &run);
    CHECK_STR(json_string_value(json_object_get(json_object_get(run, "request"), "l2")), "auto");
    json_decref(run);
    json_t *m = model_get(v);
    json_t *hyper = json_object_get(m, "hyper"), *metrics = json_object_get(m, "metrics");
    json_t *val = json_object_get(m, "validation");
    CHECK(json_is_true(json_object_get(hyper, "l2_auto")));
    double l2 = num_field(hyper, "l2");
    CHECK(l2 > 0);
    CHECK_NEAR(num_field(val, "chosen_l2"), l2, 1e-12 * l2);
    CHECK_INT(json_array_size(json_object_get(val, "grid")), 13);
    CHECK_STR(json_string_value(json_object_get(val, "method")), "kfold_by_prompt");
    CHECK_INT(json_integer_value(json_object_get(val, "folds")), 5);
    size_t prompts = 0; /* folds are grouped by prompt: one group per distinct prompt */
    for (size_t i = 0; i < n_pairs; i++) {
        int first = pairs[i].half == 0;
        for (size_t j = 0; j < i && first; j++)
            first = !(pairs[j].half == 0 && strcmp(pairs[j].prompt, pairs[i].prompt) == 0);
        prompts += first;
    }
    CHECK_INT(json_integer_value(json_object_get(val, "groups")), prompts);
    CHECK(prompts < (size_t)json_integer_value(json_object_get(m, "labels")));
    double acc = num_field(metrics, "eval/accuracy_debiased");
    double se = num_field(metrics, "eval/accuracy_debiased_se");
    double raw = num_field(metrics, "eval/rewards/accuracies");
    fprintf(stderr, "l2 auto on half0: %.4g; held-out accuracy (debiased) %.3f +- %.3f, raw %.3f\n",
            l2, acc, se, raw);
    CHECK(acc > 0 && acc < 1.2 && se > 0 && se < 0.2 && raw >= 0 && raw <= 1);
    CHECK_INT(json_integer_value(json_object_get(metrics, "eval/labels")),
              json_integer_value(json_object_get(m, "labels")));
    json_decref(m);
    /* A fixed penalty: the estimate at that penalty only. */
    m = model_get(fixed_version);
    val = json_object_get(m, "validation");
    CHECK(!json_is_true(json_object_get(json_object_get(m, "hyper"), "l2_auto")));
    CHECK_INT(json_array_size(json_object_get(val, "grid")), 1);
    CHECK_NEAR(num_field(val, "chosen_l2"), 1.0, 0);
    CHECK(num_field(json_object_get(m, "metrics"), "eval/accuracy_debiased_se") > 0);
    json_decref(m);
    /* The list carries it too, and so does the CLI. */
    long st;
    json_t *list = call("GET", "/v1/models", NULL, &st), *e;
    size_t k;
    int seen = 0;
    json_array_foreach(json_object_get(list, "models"), k,
                       e) if (json_integer_value(json_object_get(e, "version")) == v)
    {
        seen = 1;
        CHECK_NEAR(num_field(json_object_get(e, "metrics"), "eval/accuracy_debiased"), acc, 0);
    }
    CHECK(seen);
    json_decref(list);
    char *out = NULL, env_server[128], env_token[256];
    snprintf(env_server, sizeof env_server, "LDPREF_SERVER=%s", srv.url);
    snprintf(env_token, sizeof env_token, "LDPREF_OPERATOR_TOKEN=%s", srv.token);
    const char *env[] = {env_server, env_token, NULL},
               *argv[] = {"ldpref", "admin", "models", NULL};
    CHECK_INT(run_tool(argv, env, &out), 0);
    CHECK(out && strstr(out, "eval/accuracy_debiased") != NULL);
    free(out);
}

static void test_observability(int64_t active)
{
    long st;
    json_t *stats = call("GET", "/v1/stats", NULL, &st);
    json_t *learning = json_object_get(stats, "learning");
    CHECK(json_integer_value(json_object_get(json_object_get(learning, "retrains"), "succeeded")) >=
          10);
    CHECK(json_integer_value(json_object_get(json_object_get(learning, "retrains"), "cancelled")) >=
          1);
    CHECK_INT(json_integer_value(json_object_get(learning, "active_model_version")), active);
    CHECK(json_integer_value(json_object_get(json_object_get(learning, "score"), "requests")) > 0);
    json_decref(stats);
    http_reply r;
    raw_get(srv.url, "/metrics", srv.token, &r);
    CHECK_INT(r.status, 200);
    char want[128];
    snprintf(want, sizeof want, "ldpref_active_model_version %lld\n", (long long)active);
    CHECK(r.body && strstr(r.body, want) != NULL);
    CHECK(r.body && strstr(r.body, "ldpref_campaign_labels{campaign=\"half0\"}") != NULL);
    CHECK(r.body && strstr(r.body, "ldpref_campaign_epsilon_spent{campaign=\"half0\"}") != NULL);
    CHECK(r.body && strstr(r.body, "ldpref_retrain_runs_total{status=\"succeeded\"}") != NULL);
    CHECK(r.body && strstr(r.body, "ldpref_score_seconds_count") != NULL);
    http_reply_free(&r);
}

int main(void)
{
    lp_rng_init();
    /* the scorer of test_swap_while_scoring is a stress test from one
     * address: no score rate limit */
    const char *args[] = {"--train-threads", "1", "--score-rate", "0", NULL};
    if (server_start(&srv, args) != 0) {
        check_record(0, __FILE__, __LINE__, "server starts");
        return check_summary();
    }
    load_pairs();
    CHECK(n_pairs > 500);
    for (int h = 0; h < 2; h++) {
        char name[32];
        snprintf(name, sizeof name, "half%d", h);
        create_campaign(name);
        upload(name, h, &half_first[h], &half_last[h]);
        snprintf(name, sizeof name, "shuf%d", h);
        create_campaign(name);
        upload(name, h, &shuf_first[h], &shuf_last[h]);
    }
    long st;
    expect_error("POST", "/v1/score", "{\"candidates\":[{\"text\":\"a\"}]}", LP_ENO_ACTIVE_MODEL);
    for (int h = 0; h < 2; h++)
        for (int k = 0; k < N_INF + N_EPS1; k++) {
            char campaign[32], name[32];
            snprintf(campaign, sizeof campaign, "half%d", h);
            snprintf(name, sizeof name, "a%d-%d", h, k);
            ldpref_client *c = annotator(campaign, name, k < N_INF ? INFINITY : 1.0);
            label_all(c, 0);
            ldpref_client_close(c);
            if (k >= N_INF)
                continue;
            snprintf(campaign, sizeof campaign, "shuf%d", h);
            snprintf(name, sizeof name, "s%d-%d", h, k);
            c = annotator(campaign, name, INFINITY);
            label_all(c, 0x9e3779b97f4a7c15ULL + (uint64_t)(2 * h + k));
            ldpref_client_close(c);
        }
    json_t *stats = call("GET", "/v1/stats", NULL, &st);
    fprintf(stderr, "labels: %lld\n",
            (long long)json_integer_value(json_object_get(stats, "labels")));
    json_decref(stats);

    int64_t va = 0, vs = 0, served = 0;
    test_learning_and_rollback(&va, &vs);
    test_reproducible(va);
    test_corruption();
    test_ingest_during_training(&served);
    test_cancel(served);
    test_swap_while_scoring(va, vs);
    test_dense_and_bad_input();
    test_schedule();
    test_heldout_estimate(va);
    long long active_now;
    json_t *list = call("GET", "/v1/models", NULL, &st);
    active_now = json_integer_value(json_object_get(list, "active_version"));
    json_decref(list);
    test_observability(active_now);

    CHECK_INT(server_stop(&srv), 0);
    /* restart: the served model is the last activation */
    char token[sizeof srv.token];
    memcpy(token, srv.token, sizeof token);
    CHECK_INT(server_restart(&srv, args), 0);
    memcpy(srv.token, token, sizeof token);
    list = call("GET", "/v1/models", NULL, &st);
    CHECK_INT(json_integer_value(json_object_get(list, "active_version")), active_now);
    json_decref(list);
    CHECK_INT(server_stop(&srv), 0);
    server_cleanup(&srv);
    for (size_t i = 0; i < n_pairs; i++) {
        free(pairs[i].prompt);
        free(pairs[i].chosen);
        free(pairs[i].rejected);
    }
    free(pairs);
    return check_summary();
}
