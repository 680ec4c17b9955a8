/*
 * test_train_main.c — the real `ldpref-train fit` on data files written
 * here (fixed seed):
 * - the loss defaults to square-chipo (the server's default);
 * - ill-conditioned features (columns at scales 1e6, 1e-6, 1) make L-BFGS
 *   stop before its gradient test: the fit still exits 0 and writes the
 *   model, and stderr carries a warning naming the model's recorded status
 *   and final gradient norm, also under --quiet;
 * - a well-conditioned fit converges and prints no warning;
 * - --l2 auto (the default) records the chosen penalty, the validation
 *   table and the held-out estimate; a number fixes the penalty;
 * - --help states the default loss and the exit rule; a missing --out is a
 *   usage error (2);
 * - general preferences: `simulate --preference intransitive` writes labels
 *   grouped by prompt and the truth (theta*, W, S); `fit --method general`
 *   writes a model with "method": "general" and its rounds; `score` answers
 *   with mixture probabilities that sum to 1, win probabilities and no
 *   rewards; bad general options are usage errors.
 * - central DP releases: `fit --mechanism exponential` writes a model whose
 *   theta is a candidate of the recorded set, with the release record and
 *   no label count; --research --seed reproduces a release byte for byte,
 *   the CSPRNG draws a fresh net seed; around:K is centered on --center's
 *   theta; epsilon = inf, randomized labels and a missing spec are refused.
 */
#include "check.h"
#include "error.h"
#include "server_proc.h"
#include "tmpdir.h"

#include <jansson.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

static char dir[64];

static uint64_t splitmix64(uint64_t *s)
{
    uint64_t z = (*s += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

/* Uniform in [-1, 1). */
static double uniform(uint64_t *s)
{
    return (double)(splitmix64(s) >> 11) * 0x1.0p-52 - 1.0;
}

/* 200 dense labels with 3 features at the given column scales; z follows
 * feature 2 plus noise. */
static void write_data(const char *path, const double scale[3], uint64_t seed)
{
    FILE *f = fopen(path, "w");
    if (f == NULL)
        return;
    for (int i = 0; i < 200; i++) {
        double x0[3], x1[3];
        for (int j = 0; j < 3; j++) {
            x0[j] = uniform(&seed) * scale[j];
            x1[j] = uniform(&seed) * scale[j];
        }
        int z = x1[2] - x0[2] + 0.5 * uniform(&seed) > 0;
        fprintf(f,
                "{\"x0\": [%.17g, %.17g, %.17g], \"x1\": [%.17g, %.17g, %.17g], \"z\": %d, "
                "\"epsilon\": 1.0}\n",
                x0[0], x0[1], x0[2], x1[0], x1[1], x1[2], z);
    }
    fclose(f);
}

/* Runs ldpref-train with args; stdout and stderr into *out (malloc'd).
 * Returns the exit status. */
static int train(const char *args, char **out)
{
    char bin[512], cmd[2048];
    server_bin_path("ldpref-train", bin, sizeof bin);
    snprintf(cmd, sizeof cmd, "%s %s 2>&1", bin, args);
    FILE *p = popen(cmd, "r");
    *out = NULL;
    if (p == NULL)
        return -1;
    size_t cap = 1 << 16, len = 0, got;
    char *buf = calloc(1, cap);
    while (buf && len + 1 < cap && (got = fread(buf + len, 1, cap - 1 - len, p)) > 0)
        len += got;
    int st = pclose(p);
    *out = buf;
    return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

/* The model's loss, status and final gradient norm. */
static int read_model(const char *path, char *loss, char *status, size_t len, double *grad_norm)
{
    json_t *m = json_load_file(path, 0, NULL);
    const json_t *metrics = json_object_get(m, "metrics");
    const char *l = json_string_value(json_object_get(m, "loss"));
    const char *s = json_string_value(json_object_get(metrics, "status"));
    const json_t *g = json_object_get(metrics, "grad_norm");
    int ok = l && s && json_is_number(g);
    if (ok) {
        snprintf(loss, len, "%s", l);
        snprintf(status, len, "%s", s);
        *grad_norm = json_number_value(g);
    }
    json_decref(m);
    return ok ? 0 : -1;
}

static void test_early_stop(void)
{
    char data[128], model[128], args[512], *out = NULL;
    const double ill[3] = {1e6, 1e-6, 1.0};
    snprintf(data, sizeof data, "%s/ill.jsonl", dir);
    snprintf(model, sizeof model, "%s/ill.json", dir);
    write_data(data, ill, 1);

    for (int quiet = 0; quiet <= 1; quiet++) {
        unlink(model);
        snprintf(args, sizeof args, "fit --data %s --out %s --threads 1%s", data, model,
                 quiet ? " --quiet" : "");
        CHECK_INT(train(args, &out), 0);
        char loss[64] = "", status[64] = "", want[160];
        double g = NAN;
        CHECK_INT(read_model(model, loss, status, sizeof loss, &g), 0);
        CHECK_STR(loss, "square-chipo"); /* the default */
        check_record(strcmp(status, "converged") != 0 && strcmp(status, "already_minimized") != 0,
                     __FILE__, __LINE__, "ill-conditioned data stops L-BFGS early (status %s)",
                     status);
        CHECK(isfinite(g) && g > 0);
        snprintf(want, sizeof want,
                 "warning: L-BFGS stopped before its gradient test: %s, "
                 "final |grad| %.3g",
                 status, g);
        check_record(out && strstr(out, want) != NULL, __FILE__, __LINE__,
                     "quiet=%d: stderr has \"%s\": %s", quiet, want, out ? out : "");
        /* The summary is the one thing --quiet removes. */
        CHECK((out && strstr(out, "fit: square-chipo on 200 labels") != NULL) == !quiet);
        free(out);
    }
}

static void test_converged(void)
{
    char data[128], model[128], args[512], *out = NULL;
    const double plain[3] = {1.0, 1.0, 1.0};
    snprintf(data, sizeof data, "%s/plain.jsonl", dir);
    snprintf(model, sizeof model, "%s/plain.json", dir);
    write_data(data, plain, 2);
    snprintf(args, sizeof args, "fit --data %s --out %s --loss dpo --threads 1", data, model);
    CHECK_INT(train(args, &out), 0);
    char loss[64] = "", status[64] = "";
    double g = NAN;
    CHECK_INT(read_model(model, loss, status, sizeof loss, &g), 0);
    CHECK_STR(loss, "dpo");
    CHECK_STR(status, "converged");
    check_record(out && strstr(out, "warning") == NULL, __FILE__, __LINE__,
                 "no warning for a converged fit: %s", out ? out : "");
    CHECK(out && strstr(out, "status converged") != NULL);
    free(out);
}

/* --l2 auto is the default: the model records the chosen penalty, the
 * cross-validation table and the held-out estimate; a number fixes it (one
 * grid point); --folds 0 drops the estimate; a bad --l2 is refused. */
static void test_l2_auto(void)
{
    char data[128], model[128], args[512], *out = NULL;
    snprintf(data, sizeof data, "%s/plain.jsonl", dir);
    snprintf(model, sizeof model, "%s/auto.json", dir);
    snprintf(args, sizeof args, "fit --data %s --out %s --threads 2", data, model);
    CHECK_INT(train(args, &out), 0);
    CHECK(out && strstr(out, "fit: l2 auto: ") != NULL);
    CHECK(out && strstr(out, "held-out accuracy (debiased)") != NULL);
    free(out);
    json_t *m = json_load_file(model, 0, NULL);
    json_t *hyper = json_object_get(m, "hyper"), *val = json_object_get(m, "validation");
    json_t *metrics = json_object_get(m, "metrics");
    CHECK(json_is_true(json_object_get(hyper, "l2_auto")));
    CHECK(json_number_value(json_object_get(hyper, "l2")) > 0);
    CHECK(json_number_value(json_object_get(hyper, "l2")) ==
          json_number_value(json_object_get(val, "chosen_l2")));
    CHECK_INT(json_array_size(json_object_get(val, "grid")), 13);
    CHECK_INT(json_integer_value(json_object_get(val, "groups")), 200); /* no prompts: per label */
    double acc = json_number_value(json_object_get(metrics, "eval/accuracy_debiased"));
    double se = json_number_value(json_object_get(metrics, "eval/accuracy_debiased_se"));
    CHECK(acc > 0.5 && se > 0 && se < 0.2); /* z follows feature 2: well above chance */
    json_decref(m);

    snprintf(args, sizeof args, "fit --data %s --out %s --l2 0.5 --quiet", data, model);
    CHECK_INT(train(args, &out), 0);
    free(out);
    m = json_load_file(model, 0, NULL);
    CHECK(json_is_false(json_object_get(json_object_get(m, "hyper"), "l2_auto")));
    CHECK_INT(json_array_size(json_object_get(json_object_get(m, "validation"), "grid")), 1);
    json_decref(m);

    snprintf(args, sizeof args, "fit --data %s --out %s --l2 0.5 --folds 0 --quiet", data, model);
    CHECK_INT(train(args, &out), 0);
    free(out);
    m = json_load_file(model, 0, NULL);
    CHECK(json_is_null(json_object_get(m, "validation")));
    CHECK(json_is_null(json_object_get(json_object_get(m, "metrics"), "eval/accuracy_debiased")));
    json_decref(m);

    snprintf(args, sizeof args, "fit --data %s --out %s --l2 lots", data, model);
    CHECK(train(args, &out) != 0);
    CHECK(out && strstr(out, "--l2 auto or >= 0") != NULL);
    free(out);
}

static void test_usage(void)
{
    char *out = NULL;
    CHECK_INT(train("fit --help", &out), 0);
    CHECK(out && strstr(out, "square-chipo (default)") != NULL);
    CHECK(out && strstr(out, "defaults to square-chipo") != NULL);
    CHECK(out && strstr(out, "Exit status 0 whenever the model was written") != NULL);
    CHECK(out && strstr(out, "--loss NAME]") != NULL); /* optional in the synopsis */
    free(out);
    char args[256];
    snprintf(args, sizeof args, "fit --data %s/plain.jsonl", dir);
    CHECK_INT(train(args, &out), 2);
    CHECK(out && strstr(out, "--data and --out are required") != NULL);
    free(out);
}

static void test_general(void)
{
    char args[1024], data[128], truth[128], model[128], cands[128], *out = NULL;
    snprintf(data, sizeof data, "%s/cyc.jsonl", dir);
    snprintf(truth, sizeof truth, "%s/cyc_truth.json", dir);
    snprintf(model, sizeof model, "%s/cyc_model.json", dir);
    snprintf(cands, sizeof cands, "%s/cyc_cands.jsonl", dir);
    snprintf(args, sizeof args,
             "simulate --preference intransitive --cycle-strength 4 --n 2000 --d 4 --K 3 "
             "--prompts 40 --eps 1 --seed 5 --out %s --theta-out %s",
             data, truth);
    CHECK_INT(train(args, &out), 0);
    free(out);
    FILE *f = fopen(data, "r");
    char line[4096] = "";
    CHECK(f != NULL && fgets(line, sizeof line, f) != NULL);
    CHECK(strncmp(line, "{\"prompt\":\"p", 12) == 0);
    if (f)
        fclose(f);
    json_t *t = json_load_file(truth, 0, NULL);
    CHECK_STR(json_string_value(json_object_get(t, "kind")), "general_truth");
    CHECK_INT(json_array_size(json_object_get(t, "W")), 16);
    CHECK(json_number_value(json_object_get(t, "cycle_strength")) == 4.0);
    json_decref(t);

    snprintf(args, sizeof args, "fit --method general --data %s --out %s --rounds 30 --threads 1",
             data, model);
    CHECK_INT(train(args, &out), 0);
    CHECK(out && strstr(out, "fit: general (Algorithm 3) on 2000 labels, 40 prompts") != NULL);
    free(out);
    json_t *m = json_load_file(model, 0, NULL);
    CHECK_STR(json_string_value(json_object_get(m, "method")), "general");
    const json_t *g = json_object_get(m, "general");
    CHECK_INT(json_integer_value(json_object_get(g, "rounds")), 30);
    /* d = 4: 4 linear + 6 cross weights */
    CHECK_INT(json_array_size(json_object_get(g, "preference")), 10);
    json_decref(m);

    f = fopen(cands, "w");
    if (f) {
        fputs("{\"features\":[[1,0,0,0],[0,1,0,0],[0,0,1,1]]}\n", f);
        fclose(f);
    }
    snprintf(args, sizeof args, "score --model %s --candidates %s", model, cands);
    CHECK_INT(train(args, &out), 0);
    json_t *r = out ? json_loads(out, 0, NULL) : NULL;
    CHECK(json_is_null(json_object_get(r, "rewards")));
    const json_t *probs = json_object_get(r, "probs"),
                 *win = json_object_get(r, "win_probabilities");
    double sum = 0;
    for (size_t k = 0; k < json_array_size(probs); k++)
        sum += json_number_value(json_array_get(probs, k));
    CHECK_INT(json_array_size(probs), 3);
    CHECK_INT(json_array_size(win), 3);
    CHECK_NEAR(sum, 1.0, 1e-12);
    json_decref(r);
    free(out);

    snprintf(args, sizeof args, "fit --method general --data %s --out %s --rounds 0", data, model);
    CHECK_INT(train(args, &out), 2);
    free(out);
    snprintf(args, sizeof args, "fit --method bogus --data %s --out %s", data, model);
    CHECK_INT(train(args, &out), 2);
    free(out);
    CHECK_INT(train("simulate --preference cyclic --out x --theta-out y", &out), 2);
    free(out);
}

/* simulate --user-labels / --user-epsilon and fit --mechanism aup. */
static void test_aup(void)
{
    char args[1024], data[128], truth[128], model[128], *out = NULL;
    snprintf(data, sizeof data, "%s/users.jsonl", dir);
    snprintf(truth, sizeof truth, "%s/users_truth.json", dir);
    snprintf(model, sizeof model, "%s/users_model.json", dir);
    snprintf(args, sizeof args,
             "simulate --n 3000 --d 3 --user-labels 3 --user-epsilon 6 --seed 2 --out %s "
             "--theta-out %s",
             data, truth);
    CHECK_INT(train(args, &out), 0);
    free(out);
    FILE *f = fopen(data, "r");
    char line[4096] = "";
    int lines = 0, last_annotator = -1;
    while (f && fgets(line, sizeof line, f) != NULL) {
        json_t *o = json_loads(line, 0, NULL);
        last_annotator = (int)json_integer_value(json_object_get(o, "annotator"));
        if (lines == 0)
            CHECK_NEAR(json_number_value(json_object_get(o, "epsilon")), 2.0, 1e-12);
        json_decref(o);
        lines++;
    }
    if (f)
        fclose(f);
    CHECK_INT(lines, 3000);
    CHECK_INT(last_annotator, 999);

    snprintf(args, sizeof args,
             "fit --mechanism aup --epsilon 8 --delta 1e-5 --user-cap 2 --steps 5 --research "
             "--seed 3 --data %s --out %s",
             data, model);
    CHECK_INT(train(args, &out), 0);
    CHECK(out && strstr(out, "fit: aup (user-level epsilon 8, delta 1e-05, SEEDED") != NULL);
    CHECK(out && strstr(out, "on 1000 annotators, 2000 labels used (cap 2)") != NULL);
    free(out);
    json_t *m = json_load_file(model, 0, NULL);
    const json_t *r = json_object_get(m, "release");
    CHECK_STR(json_string_value(json_object_get(r, "mechanism")), "aup");
    CHECK_INT(json_integer_value(json_object_get(r, "steps_run")), 5);
    CHECK(json_is_null(json_object_get(json_object_get(m, "data"), "n_z1")));
    CHECK_INT(json_array_size(json_object_get(m, "theta")), 3);
    json_decref(m);

    snprintf(args, sizeof args, "fit --mechanism aup --epsilon 8 --data %s --out %s", data, model);
    CHECK_INT(train(args, &out), 2); /* no --delta */
    free(out);
    snprintf(args, sizeof args, "fit --mechanism aup --epsilon inf --delta 1e-5 --data %s --out %s",
             data, model);
    CHECK_INT(train(args, &out), 1);
    CHECK(out && strstr(out, "invalid_argument") != NULL);
    free(out);
}

/* A release's record from a model file (new reference) or NULL. */
static json_t *release_of(const char *path, json_t **doc)
{
    *doc = json_load_file(path, 0, NULL);
    return json_object_get(*doc, "release");
}

static void test_release(void)
{
    char args[1024], data[128], model[128], again[128], around[128], *out = NULL;
    snprintf(data, sizeof data, "%s/raw.jsonl", dir);
    snprintf(model, sizeof model, "%s/rel.json", dir);
    snprintf(again, sizeof again, "%s/rel2.json", dir);
    snprintf(around, sizeof around, "%s/rel3.json", dir);
    snprintf(args, sizeof args, "simulate --n 400 --d 2 --seed 1 --out %s --theta-out %s/t.json",
             data, dir);
    CHECK_INT(train(args, &out), 0);
    free(out);
    snprintf(args, sizeof args,
             "fit --mechanism exponential --epsilon 2 --candidates grid:11 --radius 3 --data %s "
             "--out %s",
             data, model);
    CHECK_INT(train(args, &out), 0);
    CHECK(out && strstr(out, "exponential mechanism (epsilon 2, CSPRNG") != NULL);
    free(out);
    json_t *doc, *r = release_of(model, &doc);
    CHECK_STR(json_string_value(json_object_get(r, "mechanism")), "exponential");
    CHECK_STR(json_string_value(json_object_get(r, "random_source")), "csprng");
    json_t *cs = json_object_get(r, "candidates");
    CHECK_STR(json_string_value(json_object_get(cs, "kind")), "grid");
    CHECK(json_is_null(json_object_get(json_object_get(doc, "data"), "n_z1")));
    /* theta is a grid point: coordinates -3 + 0.6 j. */
    for (size_t j = 0; j < 2; j++) {
        double t = json_number_value(json_array_get(json_object_get(doc, "theta"), j));
        double steps = (t + 3.0) / 0.6;
        CHECK(fabs(steps - round(steps)) < 1e-9);
    }
    json_decref(doc);

    /* Research mode: the same seed, the same release, recorded as seeded. */
    for (int i = 0; i < 2; i++) {
        snprintf(args, sizeof args,
                 "fit --mechanism exponential --epsilon 1 --candidates net:64 --radius 2 --seed 5 "
                 "--research --quiet --data %s --out %s",
                 data, i ? again : model);
        CHECK_INT(train(args, &out), 0);
        free(out);
    }
    char *a = NULL, *b = NULL;
    json_t *da = json_load_file(model, 0, NULL), *db = json_load_file(again, 0, NULL);
    a = json_dumps(da, JSON_SORT_KEYS);
    b = json_dumps(db, JSON_SORT_KEYS);
    CHECK(a && b && strcmp(a, b) == 0);
    CHECK_STR(json_string_value(json_object_get(json_object_get(da, "release"), "random_source")),
              "seeded");
    CHECK_INT(json_integer_value(json_object_get(
                  json_object_get(json_object_get(da, "release"), "candidates"), "seed")),
              5);
    free(a);
    free(b);
    json_decref(da);
    json_decref(db);

    /* Without --seed the net's seed comes from the CSPRNG: two releases differ in it. */
    json_int_t seeds[2];
    for (int i = 0; i < 2; i++) {
        snprintf(args, sizeof args,
                 "fit --mechanism exponential --epsilon 1 --candidates net:16 --quiet --data %s "
                 "--out %s",
                 data, again);
        CHECK_INT(train(args, &out), 0);
        free(out);
        r = release_of(again, &doc);
        seeds[i] = json_integer_value(json_object_get(json_object_get(r, "candidates"), "seed"));
        json_decref(doc);
    }
    CHECK(seeds[0] != seeds[1]);

    /* around:K on the first release's theta. */
    snprintf(args, sizeof args,
             "fit --mechanism exponential --epsilon 1 --candidates around:32:seed=3 --radius 0.5 "
             "--center %s --quiet --data %s --out %s",
             model, data, around);
    CHECK_INT(train(args, &out), 0);
    free(out);
    json_t *dc = json_load_file(model, 0, NULL);
    r = release_of(around, &doc);
    json_t *center = json_object_get(json_object_get(r, "candidates"), "center");
    CHECK(json_equal(center, json_object_get(dc, "theta")));
    json_decref(doc);
    json_decref(dc);

    /* Refusals. */
    snprintf(args, sizeof args,
             "fit --mechanism exponential --epsilon inf --candidates grid:5 --data %s --out %s",
             data, again);
    CHECK_INT(train(args, &out), 1);
    CHECK(out && strstr(out, "finite epsilon") != NULL);
    free(out);
    snprintf(args, sizeof args, "fit --mechanism exponential --epsilon 1 --data %s --out %s", data,
             again);
    CHECK_INT(train(args, &out), 2);
    free(out);
    snprintf(args, sizeof args,
             "fit --mechanism exponential --epsilon 1 --candidates grid:5 --data %s/plain.jsonl "
             "--out %s",
             dir, again);
    CHECK_INT(train(args, &out), 1);
    CHECK(out && strstr(out, "unrandomized labels") != NULL);
    free(out);
    snprintf(args, sizeof args,
             "fit --mechanism laplace --epsilon 1 --candidates grid:5 --data %s --out %s", data,
             again);
    CHECK_INT(train(args, &out), 2);
    free(out);
}

/* fit records the confidence record; score --pessimism adds the bounds
 * and the pessimistic policy; a model without a record is refused. */
static void test_pessimism(void)
{
    char data[128], model[128], cands[128], args[1024], *out = NULL;
    snprintf(data, sizeof data, "%s/poor.jsonl", dir);
    snprintf(model, sizeof model, "%s/poor.json", dir);
    snprintf(cands, sizeof cands, "%s/poor_cands.jsonl", dir);
    const double scale[3] = {1, 1, 0.01}; /* feature 2 barely varies */
    write_data(data, scale, 11);
    snprintf(args, sizeof args, "fit --data %s --out %s --l2 0.5 --folds 0 --quiet", data, model);
    CHECK_INT(train(args, &out), 0);
    free(out);
    json_t *m = json_load_file(model, 0, NULL);
    const json_t *c = json_object_get(m, "confidence");
    CHECK_STR(json_string_value(json_object_get(c, "form")), "full");
    CHECK_INT(json_integer_value(json_object_get(c, "labels")), 200);
    CHECK_NEAR(json_number_value(json_object_get(c, "weight_sum")), 200 * pow(tanh(0.5), 2), 1e-9);
    json_decref(m);
    FILE *f;
    /* line 1 steps along a covered feature, line 2 along the poor one */
    f = fopen(cands, "w");
    if (f) {
        fputs("{\"features\":[[0,0,0],[1,0,0]]}\n{\"features\":[[0,0,0],[0,0,1]]}\n", f);
        fclose(f);
    }
    double gap[2][2][2]; /* [gamma][line][candidate] */
    const char *gammas[2] = {"0", "2"};
    for (int g = 0; g < 2; g++) {
        snprintf(args, sizeof args, "score --model %s --candidates %s --pessimism %s", model, cands,
                 gammas[g]);
        CHECK_INT(train(args, &out), 0);
        const char *line = out;
        for (int l = 0; l < 2; l++) {
            json_t *r = line ? json_loads(line, JSON_DISABLE_EOF_CHECK, NULL) : NULL;
            const json_t *rw = json_object_get(r, "rewards"), *lo = json_object_get(r, "lower"),
                         *pi = json_object_get(r, "probs"), *pe = json_object_get(r, "pessimistic");
            CHECK_INT(json_array_size(lo), 2);
            double sum = 0;
            for (size_t k = 0; k < 2; k++) {
                gap[g][l][k] = json_number_value(json_array_get(rw, k)) -
                               json_number_value(json_array_get(lo, k));
                sum += json_number_value(json_array_get(pe, k));
                if (g == 0)
                    CHECK(json_number_value(json_array_get(pe, k)) ==
                          json_number_value(json_array_get(pi, k)));
            }
            CHECK_NEAR(sum, 1.0, 1e-12);
            json_decref(r);
            line = line ? strchr(line, '\n') : NULL;
            line = line ? line + 1 : NULL;
        }
        free(out);
    }
    for (int l = 0; l < 2; l++)
        CHECK(gap[0][l][0] == 0 && gap[0][l][1] == 0);          /* Gamma 0: the rewards */
    CHECK(gap[1][0][1] > 0 && gap[1][1][1] > 5 * gap[1][0][1]); /* the poor feature */
    snprintf(args, sizeof args, "score --model %s --candidates %s --pessimism -1", model, cands);
    CHECK_INT(train(args, &out), 2);
    free(out);
    /* a model file without the record (the simulator's theta* file) */
    char truth[128];
    snprintf(truth, sizeof truth, "%s/theta3.json", dir);
    f = fopen(truth, "w");
    if (f) {
        fputs("{\"theta\": [1, 0, 0]}\n", f);
        fclose(f);
    }
    snprintf(args, sizeof args, "score --model %s --candidates %s --pessimism 1", truth, cands);
    CHECK_INT(train(args, &out), 1);
    CHECK(out && strstr(out, "no confidence record") != NULL);
    free(out);
}

int main(void)
{
    if (tmpdir_create(dir, sizeof dir, "train") != 0) {
        check_record(0, __FILE__, __LINE__, "mkdtemp");
        return check_summary();
    }
    test_early_stop();
    test_converged();
    test_l2_auto();
    test_usage();
    test_general();
    test_aup();
    test_release();
    test_pessimism();
    if (tmpdir_remove(dir) != 0)
        check_record(0, __FILE__, __LINE__, "cleanup %s", dir);
    return check_summary();
}
