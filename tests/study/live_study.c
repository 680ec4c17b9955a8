/*
 * live_study.c — the live-service variant of the privacy/robustness study
 * (make reproduce-live, tests/study/live.sh).
 *
 * For every setting (epsilon, alpha, order, adversary) it starts the
 * real ldpref-server on 127.0.0.1 (port 0, fresh temporary database) and
 *   1. loads synthetic tasks: pairs of candidates with dense features
 *      f0, f1 ~ N(0, I_d), one campaign per simulated annotator (the server
 *      assigns an annotator the tasks of its campaign from the first one, and
 *      takes one label per (annotator, task)), campaign epsilon proposal =
 *      the setting's epsilon (null for infinity). Tasks are uploaded in the
 *      pairs format with chosen = the truly better candidate (the sign of
 *      theta*^T (f1 - f0)), so the task's reference preference is the truth;
 *   2. runs the annotators through the real libldpref from a pool of worker
 *      threads: each enrolls, fetches its tasks (ldpref_next_tasks), and
 *      answers them (ldpref_answer_batch) with its TRUE label
 *      y ~ Bernoulli(sigma(theta*^T (f1 - f0))), drawn per task from the
 *      seeded project PRNG. CTL flip: the library applies the corruption
 *      (simulate_ctl_*, flip: 1 - y). CTL anti: the annotator itself is the
 *      adversary and answers, with probability alpha (seeded project PRNG),
 *      the label opposing the truth sign (the library's CTL `anti` opposes
 *      the annotator's sampled y, i.e. equals flip, so it is not the offline
 *      study's anti). The library then applies randomized response with the
 *      OS CSPRNG at the setting's epsilon;
 *   3. for LTC, stores server-side corruption (PUT /v1/corruption: the
 *      setting's strategy, alpha) on every campaign: `anti` opposes the
 *      task's reference (= the truth: the offline study's LTC anti);
 *      `flip` flips the privatized label the server received, which is not
 *      the offline study's (mask-scheme) LTC flip: that row is compared with
 *      an offline model of the server's flip;
 *   4. retrains over HTTP with the offline study's settings (square-chipo,
 *      rmax 3, norm bound 3 ||theta*||, l2 0, L-BFGS 500 iterations), waits
 *      for the run, fetches the model's theta (GET /v1/models?version=V) and
 *      evaluates it against theta* in-process (lp_evaluate_truth);
 *   5. exports the model's training view and counts the labels that differ
 *      from the annotators' true labels and from the truth sign (the
 *      observed flip rates).
 * Then it runs the offline pipeline (lp_simulate + lp_fit +
 * lp_evaluate_truth) on the same settings over many data seeds, with the
 * same theta* and the same evaluation draws, and compares: a live metric
 * agrees when |live - mean| <= 3 sd sqrt(1 + 1/S) (sd over the S offline
 * seeds: the sampling error of one run; the factor covers the error of the
 * mean). Writes a Markdown report, prints it on stdout, progress on stderr.
 *
 * Exit status: 0 when every compared metric agrees, 1 when one does not,
 * 2 when the study could not run.
 */
#include "error.h"
#include "evaluate.h"
#include "ldpref.h"
#include "losses.h"
#include "objective.h"
#include "optimize.h"
#include "prng.h"
#include "rr.h"
#include "server_proc.h"
#include "simulate.h"

#include <jansson.h>
#include <math.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define D 16
#define MARGIN_SD 2.0
#define RMAX 3.0
#define BOUND_RATIO 3.0
#define MAX_ITER 500
#define EVAL_PAIRS 20000
#define EVAL_PROMPTS 4000
#define EVAL_K 4
#define BETA 1.0
#define Z_MAX 3.0
#define NMETRICS 4

static const char *const metric_names[NMETRICS] = {"accuracy", "cosine", "norm ratio",
                                                   "suboptimality"};

/* Which data-generating process an offline reference simulates. */
typedef enum ref_kind {
    REF_STUDY = 0,      /* lp_simulate at the setting (the offline study's definition) */
    REF_SERVER_LTC = 1, /* RR by lp_simulate, then the server's flip: z -> 1 - z w.p. alpha */
} ref_kind;

/* A study setting: the adversary is the offline study's (lp_simulate) and
 * the live one's (CTL flip: the library; CTL anti: the simulated annotator;
 * LTC: the server's strategy of that name); `ref` is the offline reference
 * the verdict compares with. */
typedef struct setting {
    const char *name;
    double eps, alpha;
    lp_order order;
    lp_adversary adv;
    ref_kind ref;
} setting;

static const setting settings[] = {
    {"eps=1, alpha=0", 1.0, 0.0, LP_ORDER_CTL, LP_ADV_FLIP, REF_STUDY},
    {"eps=inf, alpha=0", INFINITY, 0.0, LP_ORDER_CTL, LP_ADV_FLIP, REF_STUDY},
    {"eps=1, alpha=0.2, CTL flip (library)", 1.0, 0.2, LP_ORDER_CTL, LP_ADV_FLIP, REF_STUDY},
    {"eps=1, alpha=0.2, CTL anti (annotator)", 1.0, 0.2, LP_ORDER_CTL, LP_ADV_ANTI, REF_STUDY},
    {"eps=1, alpha=0.2, LTC anti (server, vs reference)", 1.0, 0.2, LP_ORDER_LTC, LP_ADV_ANTI,
     REF_STUDY},
    {"eps=1, alpha=0.2, LTC server flip (flips what it receives)", 1.0, 0.2, LP_ORDER_LTC,
     LP_ADV_FLIP, REF_SERVER_LTC},
};
#define NSETTINGS (sizeof settings / sizeof settings[0])

/* Options (flags). */
static int n_annot = 200, n_tasks = 100, n_workers = 8, n_seeds = 30;
static uint64_t base_seed = 1;
static const char *out_path = NULL;

static double theta_star[D], bound;

static double now_s(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

static double sigmoid(double m)
{
    return m >= 0 ? 1.0 / (1.0 + exp(-m)) : exp(m) / (1.0 + exp(m));
}

static int eval_theta(const double *theta, double out[NMETRICS])
{
    lp_eval_opts eo;
    lp_eval_opts_init(&eo);
    eo.pairs = EVAL_PAIRS;
    eo.prompts = EVAL_PROMPTS;
    eo.K = EVAL_K;
    eo.beta = BETA;
    eo.link = lp_loss_default_link(LP_LOSS_SQUARE_CHIPO);
    eo.seed = base_seed; /* the same fresh draws for live and offline fits */
    lp_eval_result r;
    int rc = lp_evaluate_truth(theta, theta_star, D, &eo, &r);
    if (rc != LP_OK)
        return rc;
    out[0] = r.accuracy;
    out[1] = r.cosine;
    out[2] = r.norm_ratio;
    out[3] = r.suboptimality;
    return LP_OK;
}

/* ------------------------------------------------------------------ */
/* live: one setting against one server                               */

typedef struct live_run {
    const setting *s;
    int index;
    server_proc srv;
    double *f;          /* n x 2 x D features: task t's f0 at f[2tD], f1 at f[(2t+1)D] */
    uint8_t *y;         /* n true labels (1: response 1 preferred) */
    uint8_t *truth;     /* n truth signs (1: theta*^T (f1 - f0) > 0) */
    double sbar;        /* mean over tasks of sigma(|margin|) = P(y = truth) */
    atomic_int next;    /* next annotator to run */
    atomic_long labels; /* labels acknowledged */
    atomic_long sent_flips;
    atomic_int failed;
    pthread_mutex_t msg_lock;
    char msg[512];
    /* results */
    double metrics[NMETRICS];
    long view_labels, view_flips, view_wrong; /* view vs y; view vs the truth sign */
    double train_s, collect_s;
    char status[64];
    int64_t version;
} live_run;

static void live_fail(live_run *r, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void live_fail(live_run *r, const char *fmt, ...)
{
    pthread_mutex_lock(&r->msg_lock);
    if (!atomic_exchange(&r->failed, 1)) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(r->msg, sizeof r->msg, fmt, ap);
        va_end(ap);
    }
    pthread_mutex_unlock(&r->msg_lock);
}

static ldpref_client *operator_open(live_run *r)
{
    ldpref_options o;
    ldpref_options_init(&o);
    o.server_url = r->srv.url;
    o.operator_token = r->srv.token;
    o.timeout_ms = 600000;
    ldpref_client *c = NULL;
    if (ldpref_client_open(&o, &c) != LDPREF_OK)
        return NULL;
    return c;
}

static void campaign_name(const live_run *r, int k, char *out, size_t len)
{
    snprintf(out, len, "s%d-a%d", r->index, k);
}

/* Creates annotator k's campaign, loads its tasks and returns an enrollment
 * token (into token). Runs on a worker thread with its own operator handle. */
static int setup_annotator(live_run *r, ldpref_client *op, int k, char *token, size_t toklen)
{
    char name[64], path[400];
    campaign_name(r, k, name, sizeof name);
    ldpref_campaign spec;
    ldpref_campaign_init(&spec);
    spec.name = name;
    spec.allow_infinite = 1;
    spec.epsilon_default = r->s->eps;
    spec.epsilon_budget = 1000;
    int rc = ldpref_admin_campaign_create(op, &spec, NULL);
    if (rc != LDPREF_OK) {
        live_fail(r, "campaign %s: %s", name, ldpref_errmsg(op));
        return rc;
    }
    snprintf(path, sizeof path, "%s/tasks-%d.jsonl", r->srv.dir, k);
    FILE *f = fopen(path, "w");
    if (f == NULL) {
        live_fail(r, "cannot write %s", path);
        return LDPREF_EIO;
    }
    /* pairs format: chosen = the truly better candidate (reference_preferred
     * 0 on the server), so the reference preference is the truth sign */
    for (int j = 0; j < n_tasks; j++) {
        long t = (long)k * n_tasks + j;
        int better = r->truth[t];
        fprintf(f,
                "{\"id\": \"t%ld\", \"prompt\": \"live s%d t%ld\", \"chosen\": \"t%ld r%d\", "
                "\"rejected\": \"t%ld r%d\"",
                t, r->index, t, t, better, t, 1 - better);
        for (int c = 0; c < 2; c++) {
            const double *x = r->f + ((size_t)2 * t + (c == 0 ? better : 1 - better)) * D;
            fprintf(f, ", \"%s_features\": [", c == 0 ? "chosen" : "rejected");
            for (int i = 0; i < D; i++)
                fprintf(f, "%s%.17g", i ? ", " : "", x[i]);
            fputc(']', f);
        }
        fputs("}\n", f);
    }
    if (fclose(f) != 0) {
        live_fail(r, "cannot write %s", path);
        return LDPREF_EIO;
    }
    char *json = NULL;
    rc = ldpref_admin_tasks_load(op, path, name, &json);
    ldpref_free(json);
    unlink(path);
    if (rc != LDPREF_OK) {
        live_fail(r, "tasks for %s: %s", name, ldpref_errmsg(op));
        return rc;
    }
    json = NULL;
    rc = ldpref_admin_enrollment_tokens(op, name, 1, &json);
    json_t *j = rc == LDPREF_OK ? json_loads(json, 0, NULL) : NULL;
    const char *tok = json_string_value(json_array_get(json_object_get(j, "tokens"), 0));
    if (tok != NULL)
        snprintf(token, toklen, "%s", tok);
    json_decref(j);
    ldpref_free(json);
    if (tok == NULL) {
        live_fail(r, "enrollment token for %s: %s", name, ldpref_errmsg(op));
        return rc ? rc : LDPREF_EPROTOCOL;
    }
    return LDPREF_OK;
}

/* The task index and response number named by a response text "t<idx> r<c>". */
static int parse_response(const char *text, long *t, int *c)
{
    return sscanf(text, "t%ld r%d", t, c) == 2 ? 0 : -1;
}

/* Annotator k: enroll, fetch its tasks, answer them with the true labels. */
static void run_annotator(live_run *r, int k, const char *token)
{
    char key[400];
    snprintf(key, sizeof key, "%s/a%d.key", r->srv.dir, k);
    if (ldpref_keygen(key, NULL) != LDPREF_OK) {
        live_fail(r, "keygen %s", key);
        return;
    }
    ldpref_options o;
    ldpref_options_init(&o);
    o.server_url = r->srv.url;
    o.key_path = key;
    o.timeout_ms = 120000;
    o.max_epsilon_per_label = r->s->eps;
    if (isinf(r->s->eps))
        o.max_epsilon_total = INFINITY;
    if (r->s->order == LP_ORDER_CTL && r->s->alpha > 0 && r->s->adv == LP_ADV_FLIP) {
        o.simulate_ctl_alpha = r->s->alpha;
        o.simulate_ctl_strategy = "flip";
        o.simulate_ctl_seed = base_seed * 1000003u + (uint64_t)r->index * 1000u + (uint64_t)k;
    }
    ldpref_client *c = NULL;
    if (ldpref_client_open(&o, &c) != LDPREF_OK) {
        live_fail(r, "annotator %d: cannot open a client", k);
        return;
    }
    ldpref_task *tasks = NULL;
    size_t got = 0;
    ldpref_batch_item *items = NULL;
    int rc = ldpref_enroll(c, token, NULL);
    if (rc != LDPREF_OK) {
        live_fail(r, "annotator %d: enroll: %s", k, ldpref_errmsg(c));
        goto done;
    }
    rc = ldpref_next_tasks(c, n_tasks, &tasks, &got);
    if (rc != LDPREF_OK || got != (size_t)n_tasks) {
        live_fail(r, "annotator %d: %zu tasks (%s)", k, got, ldpref_errmsg(c));
        goto done;
    }
    items = calloc(got, sizeof *items);
    int *a_is_r1 = calloc(got, sizeof *a_is_r1);
    long *idx = calloc(got, sizeof *idx);
    if (items == NULL || a_is_r1 == NULL || idx == NULL) {
        live_fail(r, "out of memory");
        free(a_is_r1);
        free(idx);
        goto done;
    }
    /* CTL anti: the annotator is the adversary (Huber coins from its own
     * seeded stream); it answers the label opposing the truth sign */
    int ctl_anti = r->s->order == LP_ORDER_CTL && r->s->alpha > 0 && r->s->adv == LP_ADV_ANTI;
    lp_prng hg;
    lp_prng_seed(&hg,
                 (base_seed * 1000003u + (uint64_t)r->index * 1000u + (uint64_t)k) ^ 0x616e7469ULL);
    for (size_t i = 0; i < got; i++) {
        long ta, tb;
        int ca, cb;
        if (parse_response(tasks[i].a, &ta, &ca) || parse_response(tasks[i].b, &tb, &cb) ||
            ta != tb || ca == cb || ta < (long)k * n_tasks || ta >= (long)(k + 1) * n_tasks) {
            live_fail(r, "annotator %d: unexpected task texts \"%s\" / \"%s\"", k, tasks[i].a,
                      tasks[i].b);
            free(a_is_r1);
            free(idx);
            goto done;
        }
        /* The TRUE preference in the presented order: b is better iff b is
         * the truly preferred response. */
        idx[i] = ta;
        a_is_r1[i] = ca == 1;
        items[i].task = &tasks[i];
        int answer = r->y[ta]; /* task orientation: 1 = response 1 */
        if (ctl_anti && lp_prng_bernoulli(&hg, r->s->alpha))
            answer = 1 - r->truth[ta];
        items[i].choice = a_is_r1[i] ? !answer : answer;
    }
    rc = ldpref_answer_batch(c, items, got);
    if (rc != LDPREF_OK) {
        live_fail(r, "annotator %d: answer_batch: %s", k, ldpref_errmsg(c));
    } else {
        long ok = 0, flips = 0;
        for (size_t i = 0; i < got; i++) {
            if (items[i].error != LDPREF_OK) {
                live_fail(r, "annotator %d: label %zu: %s", k, i, items[i].message);
                continue;
            }
            int z_task = a_is_r1[i] ? !items[i].receipt.z : items[i].receipt.z;
            flips += z_task != r->y[idx[i]];
            ok++;
        }
        atomic_fetch_add(&r->labels, ok);
        atomic_fetch_add(&r->sent_flips, flips);
    }
    free(a_is_r1);
    free(idx);
done:
    free(items);
    ldpref_tasks_free(tasks, got);
    ldpref_client_close(c);
}

static void *worker(void *arg)
{
    live_run *r = arg;
    ldpref_client *op = operator_open(r);
    if (op == NULL) {
        live_fail(r, "cannot open an operator client");
        return NULL;
    }
    int k;
    while (!atomic_load(&r->failed) && (k = atomic_fetch_add(&r->next, 1)) < n_annot) {
        char token[256];
        if (setup_annotator(r, op, k, token, sizeof token) != LDPREF_OK)
            break;
        run_annotator(r, k, token);
        if ((k + 1) % 50 == 0)
            fprintf(stderr, "  [%s] %d/%d annotators, %ld labels\n", r->s->name, k + 1, n_annot,
                    atomic_load(&r->labels));
    }
    ldpref_client_close(op);
    return NULL;
}

static void on_run_progress(void *ctx, const char *run_json)
{
    live_run *r = ctx;
    json_t *j = json_loads(run_json, 0, NULL);
    const char *st = json_string_value(json_object_get(j, "status"));
    if (st && strcmp(st, r->status) != 0) {
        snprintf(r->status, sizeof r->status, "%s", st);
        fprintf(stderr, "  [%s] run: %s\n", r->s->name, st);
    }
    json_decref(j);
}

/* Counts the labels of model version's training view that differ from the
 * annotators' true labels. */
static int count_view_flips(live_run *r, ldpref_client *op)
{
    char *buf = NULL;
    size_t len = 0;
    FILE *mem = open_memstream(&buf, &len);
    if (mem == NULL)
        return LDPREF_ENO_MEMORY;
    int rc = ldpref_admin_export_view(op, NULL, "corrupted", r->version, mem);
    fclose(mem);
    r->view_labels = r->view_flips = r->view_wrong = 0;
    for (char *line = buf, *end; rc == LDPREF_OK && line && *line; line = end) {
        end = strchr(line, '\n');
        if (end)
            *end++ = 0;
        json_t *j = json_loads(line, 0, NULL);
        const char *prompt = json_string_value(json_object_get(j, "prompt"));
        const char *chosen = json_string_value(json_object_get(j, "chosen"));
        int si;
        long t;
        long tc;
        int cc;
        if (prompt == NULL || chosen == NULL || sscanf(prompt, "live s%d t%ld", &si, &t) != 2 ||
            parse_response(chosen, &tc, &cc) || tc != t || t < 0 || t >= (long)n_annot * n_tasks) {
            fprintf(stderr, "unexpected export line: %.200s\n", line);
            rc = LDPREF_EPROTOCOL;
        } else {
            r->view_labels++;
            r->view_flips += cc != r->y[t];     /* the view's preferred response vs y */
            r->view_wrong += cc != r->truth[t]; /* ... vs the truth sign */
        }
        json_decref(j);
    }
    free(buf);
    return rc;
}

static int live_setting(live_run *r)
{
    size_t n = (size_t)n_annot * n_tasks;
    r->f = malloc(n * 2 * D * sizeof *r->f);
    r->y = malloc(n);
    r->truth = malloc(n);
    pthread_mutex_init(&r->msg_lock, NULL);
    if (r->f == NULL || r->y == NULL || r->truth == NULL)
        return LDPREF_ENO_MEMORY;
    /* Tasks and true labels: the project PRNG, a stream of its own per setting. */
    lp_prng g;
    lp_prng_seed(&g, (base_seed << 8) ^ 0x6c697665ULL ^ (uint64_t)(r->index + 1));
    for (size_t t = 0; t < n; t++) {
        double m = 0;
        for (int i = 0; i < D; i++) {
            double x0 = lp_prng_normal(&g), x1 = lp_prng_normal(&g);
            r->f[(2 * t) * D + i] = x0;
            r->f[(2 * t + 1) * D + i] = x1;
            m += theta_star[i] * (x1 - x0);
        }
        r->y[t] = (uint8_t)lp_prng_bernoulli(&g, sigmoid(m));
        r->truth[t] = m > 0.0; /* as lp_simulate's anti adversary sees it */
        r->sbar += sigmoid(fabs(m)) / (double)n;
    }

    const char *args[] = {"--train-threads", "1", SERVER_NO_RATE_LIMITS, NULL};
    if (server_start(&r->srv, args) != 0) {
        snprintf(r->msg, sizeof r->msg, "the server did not start");
        return LDPREF_EUNAVAILABLE;
    }
    fprintf(stderr, "[%s] server %s (%s), %d annotators x %d tasks\n", r->s->name, r->srv.url,
            r->srv.dir, n_annot, n_tasks);
    double t0 = now_s();
    pthread_t workers[64];
    int nw = n_workers < 64 ? n_workers : 64;
    for (int w = 0; w < nw; w++)
        pthread_create(&workers[w], NULL, worker, r);
    for (int w = 0; w < nw; w++)
        pthread_join(workers[w], NULL);
    r->collect_s = now_s() - t0;
    if (atomic_load(&r->failed))
        return LDPREF_EINTERNAL;
    fprintf(stderr, "[%s] %ld labels in %.1f s\n", r->s->name, atomic_load(&r->labels),
            r->collect_s);
    if (atomic_load(&r->labels) != (long)n) {
        snprintf(r->msg, sizeof r->msg, "%ld labels acknowledged, expected %zu",
                 atomic_load(&r->labels), n);
        return LDPREF_EINTERNAL;
    }

    ldpref_client *op = operator_open(r);
    if (op == NULL)
        return LDPREF_EINTERNAL;
    int rc = LDPREF_OK;
    char *json = NULL;
    json_t *j = NULL;
    if (r->s->order == LP_ORDER_LTC && r->s->alpha > 0) {
        for (int k = 0; k < n_annot && rc == LDPREF_OK; k++) {
            char name[64];
            campaign_name(r, k, name, sizeof name);
            ldpref_corruption c;
            ldpref_corruption_init(&c);
            c.campaign = name;
            c.alpha = r->s->alpha;
            c.strategy = lp_adversary_name(r->s->adv);
            c.seed = base_seed * 1000u + (uint64_t)k;
            rc = ldpref_admin_corruption_set(op, &c, NULL);
        }
        if (rc != LDPREF_OK) {
            snprintf(r->msg, sizeof r->msg, "corruption: %s", ldpref_errmsg(op));
            goto out;
        }
    }
    char req[512];
    snprintf(req, sizeof req,
             "{\"loss\": \"square-chipo\", \"rmax\": %.17g, \"norm_bound\": %.17g, \"l2\": 0, "
             "\"max_iter\": %d, \"features\": \"dense\", \"threads\": 1, \"seed\": 0}",
             RMAX, bound, MAX_ITER);
    t0 = now_s();
    if ((rc = ldpref_admin_retrain(op, req, &json)) != LDPREF_OK) {
        snprintf(r->msg, sizeof r->msg, "retrain: %s", ldpref_errmsg(op));
        goto out;
    }
    j = json_loads(json, 0, NULL);
    int64_t run = json_integer_value(json_object_get(j, "run"));
    json_decref(j);
    ldpref_free(json);
    json = NULL;
    rc = ldpref_admin_run_wait(op, run, 100, on_run_progress, r, &json);
    r->train_s = now_s() - t0;
    if (rc != LDPREF_OK) {
        snprintf(r->msg, sizeof r->msg, "run %lld: %s", (long long)run, ldpref_errmsg(op));
        goto out;
    }
    j = json_loads(json, 0, NULL);
    r->version = json_integer_value(json_object_get(j, "model_version"));
    int64_t run_labels = json_integer_value(json_object_get(j, "labels"));
    json_decref(j);
    ldpref_free(json);
    json = NULL;
    if (run_labels != (int64_t)n) {
        snprintf(r->msg, sizeof r->msg, "the run trained on %lld labels, expected %zu",
                 (long long)run_labels, n);
        rc = LDPREF_EINTERNAL;
        goto out;
    }
    if ((rc = ldpref_admin_model_get(op, r->version, &json)) != LDPREF_OK) {
        snprintf(r->msg, sizeof r->msg, "model %lld: %s", (long long)r->version, ldpref_errmsg(op));
        goto out;
    }
    j = json_loads(json, 0, NULL);
    json_t *theta = json_object_get(json_object_get(j, "model"), "theta");
    double th[D];
    if (json_array_size(theta) != D) {
        snprintf(r->msg, sizeof r->msg, "model %lld: theta has %zu values, expected %d",
                 (long long)r->version, json_array_size(theta), D);
        rc = LDPREF_EPROTOCOL;
        goto out;
    }
    for (int i = 0; i < D; i++)
        th[i] = json_number_value(json_array_get(theta, i));
    fprintf(stderr, "[%s] model v%lld trained in %.1f s\n", r->s->name, (long long)r->version,
            r->train_s);
    if ((rc = eval_theta(th, r->metrics)) != LP_OK) {
        snprintf(r->msg, sizeof r->msg, "evaluation failed (%d)", rc);
        goto out;
    }
    if ((rc = count_view_flips(r, op)) != LDPREF_OK)
        snprintf(r->msg, sizeof r->msg, "export of the training view: %s", ldpref_errmsg(op));
    else if (r->view_labels != (long)n) {
        snprintf(r->msg, sizeof r->msg, "training view has %ld labels, expected %zu",
                 r->view_labels, n);
        rc = LDPREF_EINTERNAL;
    }
out:
    json_decref(j);
    ldpref_free(json);
    ldpref_client_close(op);
    return rc;
}

/* ------------------------------------------------------------------ */
/* offline reference                                                  */

typedef struct offline_ref {
    const setting *s;
    ref_kind kind;
    double *vals;  /* n_seeds x NMETRICS */
    double *flips; /* n_seeds observed flip rates (z != y) */
    double *wrong; /* n_seeds observed rates of z != the truth sign */
    double mean[NMETRICS], sd[NMETRICS], flip_mean, wrong_mean;
    atomic_int next;
    atomic_int rc;
} offline_ref;

static int offline_one(offline_ref *o, int s)
{
    size_t n = (size_t)n_annot * n_tasks;
    lp_sim_opts so;
    lp_sim_opts_init(&so);
    so.n = n;
    so.d = D;
    so.eps = o->s->eps;
    so.alpha = o->kind == REF_STUDY ? o->s->alpha : 0.0;
    so.order = o->s->order;
    so.adv = o->s->adv;
    so.margin_sd = MARGIN_SD;
    so.seed = base_seed + 1 + (uint64_t)s;
    so.storage = LP_STORE_F64;
    lp_dataset *ds = NULL;
    int rc = lp_simulate(&so, theta_star, &ds);
    if (rc != LP_OK)
        return rc;
    if (o->kind == REF_SERVER_LTC) {
        lp_prng g;
        lp_prng_seed(&g, so.seed ^ 0x6c7463ULL);
        for (size_t i = 0; i < ds->n; i++)
            if (lp_prng_bernoulli(&g, o->s->alpha))
                ds->z[i] = (uint8_t)(1 - ds->z[i]);
    }
    size_t flips = 0, wrong = 0;
    for (size_t i = 0; i < ds->n; i++) {
        flips += ds->z[i] != (uint8_t)ds->y[i];
        wrong += ds->z[i] != (lp_dataset_row_dot(ds, i, theta_star) > 0.0);
    }
    o->flips[s] = (double)flips / (double)n;
    o->wrong[s] = (double)wrong / (double)n;
    lp_objective_opts oo;
    lp_objective_opts_init(&oo, LP_LOSS_SQUARE_CHIPO);
    oo.loss.rmax = RMAX;
    oo.l2 = 0;
    oo.threads = 1;
    lp_fit_opts fo;
    lp_fit_opts_init(&fo, LP_OPT_LBFGS);
    fo.max_iter = MAX_ITER;
    fo.norm_bound = bound;
    fo.seed = so.seed;
    lp_objective *ob = lp_objective_new(ds, &oo);
    double th[D] = {0};
    lp_fit_result fr;
    rc = ob ? lp_fit(ob, &fo, th, &fr) : LP_ENO_MEMORY;
    lp_objective_free(ob);
    lp_dataset_free(ds);
    if (rc == LP_OK)
        rc = eval_theta(th, o->vals + (size_t)s * NMETRICS);
    return rc;
}

static void *offline_worker(void *arg)
{
    offline_ref *refs = arg;
    /* refs is a NULL-setting-terminated array; work items are (ref, seed). */
    for (offline_ref *o = refs; o->s != NULL; o++) {
        int s;
        while ((s = atomic_fetch_add(&o->next, 1)) < n_seeds) {
            int rc = offline_one(o, s);
            if (rc != LP_OK)
                atomic_store(&o->rc, rc);
        }
    }
    return NULL;
}

static void summarize(offline_ref *o)
{
    for (int m = 0; m < NMETRICS; m++) {
        double sum = 0, ss = 0;
        for (int s = 0; s < n_seeds; s++)
            sum += o->vals[s * NMETRICS + m];
        double mean = sum / n_seeds;
        for (int s = 0; s < n_seeds; s++) {
            double e = o->vals[s * NMETRICS + m] - mean;
            ss += e * e;
        }
        o->mean[m] = mean;
        o->sd[m] = n_seeds > 1 ? sqrt(ss / (n_seeds - 1)) : NAN;
    }
    double f = 0, w = 0;
    for (int s = 0; s < n_seeds; s++) {
        f += o->flips[s];
        w += o->wrong[s];
    }
    o->flip_mean = f / n_seeds;
    o->wrong_mean = w / n_seeds;
}

/* ------------------------------------------------------------------ */
/* report                                                             */

static double zscore(double live, const offline_ref *o, int m)
{
    double se = o->sd[m] * sqrt(1.0 + 1.0 / n_seeds);
    return se > 0 ? (live - o->mean[m]) / se : (live == o->mean[m] ? 0 : INFINITY);
}

/* The offline reference a setting's verdict uses. */
static const offline_ref *ref_of(size_t i, const offline_ref *study, const offline_ref *server_ltc)
{
    return settings[i].ref == REF_SERVER_LTC ? &server_ltc[i] : &study[i];
}

/* Expected rates of z != y (the annotator's sampled label) and of z != the
 * truth sign, given q = 1/(1+e^eps) and sbar = P(y = truth) averaged over
 * the tasks. The adversary's label a, on a corrupted label: flip (CTL, and
 * the server's LTC flip) flips the label it acts on; the mask-scheme LTC
 * flip writes 1 - y; anti writes 1 - truth. */
static void expected_rates(const setting *s, ref_kind kind, double sbar, double *vs_y,
                           double *vs_truth)
{
    double q = lp_rr_flip_prob(s->eps), a = s->alpha;
    double w0 = q * sbar + (1 - q) * (1 - sbar); /* RR only: P(z != truth) */
    double cy, ct;                               /* corrupted labels: vs y, vs truth */
    if (s->adv == LP_ADV_ANTI && s->order == LP_ORDER_LTC) {
        cy = sbar, ct = 1;
    } else if (s->adv == LP_ADV_ANTI) { /* 1 - truth, then RR */
        cy = (1 - q) * sbar + q * (1 - sbar), ct = 1 - q;
    } else if (s->order == LP_ORDER_LTC && kind == REF_STUDY) { /* 1 - y after RR */
        cy = 1, ct = sbar;
    } else { /* a flip of the label, before or after RR */
        cy = 1 - q, ct = 1 - w0;
    }
    *vs_y = (1 - a) * q + a * cy;
    *vs_truth = (1 - a) * w0 + a * ct;
}

static size_t find_setting(double eps, double alpha, lp_order order, lp_adversary adv, ref_kind ref)
{
    for (size_t i = 0; i < NSETTINGS; i++)
        if (settings[i].eps == eps && settings[i].alpha == alpha && settings[i].order == order &&
            settings[i].adv == adv && settings[i].ref == ref)
            return i;
    return NSETTINGS;
}

static const char *live_mechanism(const setting *s)
{
    if (s->alpha <= 0)
        return "no corruption; RR by the library";
    if (s->order == LP_ORDER_CTL && s->adv == LP_ADV_FLIP)
        return "the library's CTL `flip` (1 - y), then RR by the library";
    if (s->order == LP_ORDER_CTL && s->adv == LP_ADV_ANTI)
        return "the simulated annotator answers 1 - (truth sign) with probability alpha, then RR "
               "by the library";
    if (s->adv == LP_ADV_ANTI)
        return "RR by the library, then the server's LTC `anti` against the task's reference "
               "(= the truth sign)";
    return "RR by the library, then the server's LTC `flip` (1 - z, the label it received)";
}

static const char *offline_reference(const setting *s)
{
    if (s->ref == REF_SERVER_LTC)
        return "RR by `lp_simulate`, then z -> 1 - z with probability alpha (the server's flip)";
    if (s->alpha <= 0)
        return "`lp_simulate`, alpha = 0";
    return s->adv == LP_ADV_ANTI
               ? (s->order == LP_ORDER_CTL ? "`lp_simulate` CTL anti (1 - truth sign, then RR)"
                                           : "`lp_simulate` LTC anti (RR, then 1 - truth sign)")
               : "`lp_simulate` CTL flip (1 - y, then RR)";
}

/* One LTC-vs-CTL comparison table (live and offline, all metrics). */
static void compare_pair(FILE *f, const live_run *runs, const offline_ref *study,
                         const offline_ref *server_ltc, size_t l, size_t c)
{
    const offline_ref *ol = ref_of(l, study, server_ltc), *oc = ref_of(c, study, server_ltc);
    fprintf(f, "| metric | live LTC | live CTL | live LTC - CTL | offline LTC | offline CTL | "
               "offline LTC - CTL | one-run sd of the difference |\n");
    fprintf(f, "|---|---:|---:|---:|---:|---:|---:|---:|\n");
    for (int m = 0; m < NMETRICS; m++)
        fprintf(f, "| %s | %.4f | %.4f | %+.4f | %.4f | %.4f | %+.4f | %.4f |\n", metric_names[m],
                runs[l].metrics[m], runs[c].metrics[m], runs[l].metrics[m] - runs[c].metrics[m],
                ol->mean[m], oc->mean[m], ol->mean[m] - oc->mean[m],
                sqrt(ol->sd[m] * ol->sd[m] + oc->sd[m] * oc->sd[m]));
    fprintf(f, "\n");
}

static int report(FILE *f, live_run *runs, offline_ref *study, offline_ref *server_ltc,
                  double wall_s)
{
    size_t n = (size_t)n_annot * n_tasks;
    int disagree = 0;
    fprintf(f, "# Live-service study: the served model against the offline study\n\n");
    fprintf(f,
            "Generated by `make reproduce-live` (`tests/study/live.sh`, "
            "`tests/study/live_study.c`); wall time %.0f s.\n\n",
            wall_s);
    fprintf(f,
            "Every **live** number comes from the real service: per setting a fresh "
            "`ldpref-server` on 127.0.0.1, %d simulated annotators (one campaign each, %d tasks "
            "each, n = %zu labels) driven by %d worker threads through the real `libldpref` "
            "(enroll, `ldpref_next_tasks`, `ldpref_answer_batch`: randomized response with the "
            "OS CSPRNG), LTC corruption by the server (`PUT /v1/corruption` per campaign), a "
            "retrain over HTTP (`POST /v1/retrain`: square-chipo, rmax = %g, norm_bound = "
            "%g ||theta*|| = %.4f, l2 = 0, L-BFGS max_iter = %d, dense features) and the served "
            "model's theta (`GET /v1/models?version=V`) evaluated in-process against theta*.\n\n",
            n_annot, n_tasks, n, n_workers, RMAX, BOUND_RATIO, bound, MAX_ITER);
    fprintf(f,
            "Task features f0, f1 ~ N(0, I_%d); theta* = `lp_sim_theta_star(d = %d, "
            "margin_sd = %g, seed = %llu)`; each annotator's true label y ~ "
            "Bernoulli(sigma(theta*^T (f1 - f0))) from the seeded project PRNG. Tasks are "
            "uploaded in the pairs format with `chosen` = the truly better candidate (the sign "
            "of theta*^T (f1 - f0)) and `chosen_features`/`rejected_features`, so each task's "
            "reference preference is the truth. The **offline** reference runs the offline "
            "study's pipeline (`lp_simulate` with the same n, d, epsilon, alpha, order and "
            "adversary, then `lp_fit` with the same objective and fit options) on the same "
            "theta* over S = %d data seeds. Both are evaluated by `lp_evaluate_truth` on the "
            "same fresh draws (K = %d, beta = %g, %d pairs, %d prompts, seed %llu): accuracy of "
            "the margin's sign, cosine(theta_hat, theta*), ||theta_hat|| / ||theta*||, and the "
            "policy suboptimality J(pi*) - J(pi_hat).\n\n",
            D, D, MARGIN_SD, (unsigned long long)base_seed, n_seeds, EVAL_K, BETA, EVAL_PAIRS,
            EVAL_PROMPTS, (unsigned long long)base_seed);
    fprintf(f, "| setting | live corruption | offline reference |\n|---|---|---|\n");
    for (size_t i = 0; i < NSETTINGS; i++)
        fprintf(f, "| %s | %s | %s |\n", settings[i].name, live_mechanism(&settings[i]),
                offline_reference(&settings[i]));
    fprintf(f, "\nThe library's CTL `anti` opposes the annotator's own sampled label, i.e. it is "
               "the same as CTL `flip` (1 - y); the offline study's CTL anti writes 1 - (truth "
               "sign). So the CTL anti row lets the simulated annotator be the adversary (it "
               "answers the anti label itself; the library only privatizes).\n\n");
    fprintf(f,
            "**Agreement rule:** a live metric agrees when |z| <= %g, z = (live - mean) / "
            "(sd sqrt(1 + 1/S)), mean and sd over the offline seeds (sd: the sampling error of "
            "one run of n labels; the factor adds the error of the mean). The live run is one "
            "draw and %zu settings x %d metrics are tested: for normally distributed metrics a "
            "correct service fails a given test with probability about 0.3%% (a little more "
            "with few seeds), and one of the %zu tests with at most about %.0f%%.\n\n",
            Z_MAX, NSETTINGS, NMETRICS, NSETTINGS * NMETRICS,
            100.0 * NSETTINGS * NMETRICS * erfc(Z_MAX / sqrt(2.0)));
    fprintf(f, "| setting | metric | live | offline mean ± sd (S = %d) | z | verdict |\n", n_seeds);
    fprintf(f, "|---|---|---:|---:|---:|---|\n");
    for (size_t i = 0; i < NSETTINGS; i++) {
        const offline_ref *o = ref_of(i, study, server_ltc);
        for (int m = 0; m < NMETRICS; m++) {
            double z = zscore(runs[i].metrics[m], o, m);
            int ok = fabs(z) <= Z_MAX;
            disagree += !ok;
            fprintf(f, "| %s | %s | %.4f | %.4f ± %.4f | %+.2f | %s |\n", settings[i].name,
                    metric_names[m], runs[i].metrics[m], o->mean[m], o->sd[m], z,
                    ok ? "agrees" : "**DISAGREES**");
        }
    }
    fprintf(f, "\n**Overall: %s** (%d of %zu comparisons outside %g sd).\n\n",
            disagree ? "the live service DISAGREES with the offline study"
                     : "the live service agrees with the offline study",
            disagree, NSETTINGS * NMETRICS, Z_MAX);

    /* Claim 4 with anti: both orders against the truth sign. */
    size_t la = find_setting(1.0, 0.2, LP_ORDER_LTC, LP_ADV_ANTI, REF_STUDY);
    size_t ca = find_setting(1.0, 0.2, LP_ORDER_CTL, LP_ADV_ANTI, REF_STUDY);
    if (la < NSETTINGS && ca < NSETTINGS) {
        const offline_ref *ol = &study[la], *oc = &study[ca];
        double d = runs[la].metrics[3] - runs[ca].metrics[3];
        double sd = sqrt(ol->sd[3] * ol->sd[3] + oc->sd[3] * oc->sd[3]);
        fprintf(f, "## LTC vs CTL (the study's claim 4), anti adversary, eps = 1, alpha = 0.2\n\n");
        fprintf(f,
                "Both adversaries write the label opposing the truth sign on a fraction alpha of "
                "the labels; CTL's label then goes through RR (so a fraction q of it is "
                "righted again), LTC's does not. Live: CTL by the simulated annotator, LTC by "
                "the server's `anti` against the task's reference.\n\n");
        compare_pair(f, runs, study, server_ltc, la, ca);
        fprintf(f,
                "**Live reading:** LTC anti's suboptimality is %s CTL anti's by %.4f "
                "(%.1f one-run sd of the difference; offline: %+.4f). %s\n\n",
                d > 0 ? "above (worse than)" : "below (better than)", fabs(d), sd > 0 ? d / sd : 0,
                ol->mean[3] - oc->mean[3],
                d > 0 && d > 2 * sd
                    ? "The live service shows LTC worse than CTL, as the offline study does."
                : d > 0 ? "The live difference has the offline sign but is within 2 sd of zero."
                        : "The live service does NOT show LTC worse than CTL.");
    }
    /* The flip pair: the server's flip is CTL in distribution. */
    size_t lf = find_setting(1.0, 0.2, LP_ORDER_LTC, LP_ADV_FLIP, REF_SERVER_LTC);
    size_t cf = find_setting(1.0, 0.2, LP_ORDER_CTL, LP_ADV_FLIP, REF_STUDY);
    if (lf < NSETTINGS && cf < NSETTINGS) {
        const offline_ref *mask = &study[lf];
        double q = lp_rr_flip_prob(1.0);
        fprintf(f, "## The server's `flip` is not the papers' LTC flip\n\n");
        fprintf(f,
                "The papers' mask scheme sets the final label to the wrong answer relative to "
                "the annotator's true label after RR; a server never sees that label, only the "
                "privatized one, so its `flip` can only write 1 - z, which has flip rate q + "
                "alpha (1 - 2q) = %.4f, the same data distribution as CTL flip, instead of q + "
                "alpha (1 - q) = %.4f. Given a reference preference, `anti` is the server's "
                "live equivalent of the mask scheme's wrong-vs-truth label (the LTC anti row "
                "above). Server flip vs CTL flip (same distribution, so no LTC gap is "
                "expected):\n\n",
                q + 0.2 * (1 - 2 * q), q + 0.2 * (1 - q));
        compare_pair(f, runs, study, server_ltc, lf, cf);
        fprintf(f,
                "For reference, the live server-flip numbers against the offline study's "
                "mask-scheme LTC flip (`lp_simulate` LTC flip; not part of the verdict, S = %d, "
                "flip rate %.4f):\n\n",
                n_seeds, mask->flip_mean);
        fprintf(f,
                "| metric | live (server flip) | offline mask-scheme LTC flip mean ± sd | z |\n");
        fprintf(f, "|---|---:|---:|---:|\n");
        for (int m = 0; m < NMETRICS; m++)
            fprintf(f, "| %s | %.4f | %.4f ± %.4f | %+.2f |\n", metric_names[m],
                    runs[lf].metrics[m], mask->mean[m], mask->sd[m],
                    zscore(runs[lf].metrics[m], mask, m));
        fprintf(f, "\n");
    }

    fprintf(f, "## Observed label flip rates\n\n");
    fprintf(f, "Fraction of the training labels (the model's training view, exported with "
               "`GET /v1/export?view=corrupted&version=V`) whose preferred response differs from "
               "the annotator's sampled label y and from the truth sign (and, vs y, the labels as "
               "the clients sent them, from their receipts), against the expectation (q = "
               "1/(1+e^eps), sbar = P(y = truth) averaged over the live tasks) and the offline "
               "reference's mean. z: binomial, sqrt(p(1-p)/n).\n\n");
    fprintf(f, "| setting | sent vs y | view vs y | expected | offline | z | view vs truth | "
               "expected | offline | z |\n");
    fprintf(f, "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n");
    for (size_t i = 0; i < NSETTINGS; i++) {
        const offline_ref *o = ref_of(i, study, server_ltc);
        double ey, et;
        expected_rates(&settings[i], settings[i].ref, runs[i].sbar, &ey, &et);
        double ly = (double)runs[i].view_flips / (double)runs[i].view_labels;
        double lt = (double)runs[i].view_wrong / (double)runs[i].view_labels;
        double sent = (double)atomic_load(&runs[i].sent_flips) / (double)n;
        double zy =
            ey > 0 ? (ly - ey) / sqrt(ey * (1 - ey) / (double)n) : (ly == ey ? 0 : INFINITY);
        double zt = et > 0 && et < 1 ? (lt - et) / sqrt(et * (1 - et) / (double)n)
                                     : (lt == et ? 0 : INFINITY);
        fprintf(f, "| %s | %.4f | %.4f | %.4f | %.4f | %+.2f | %.4f | %.4f | %.4f | %+.2f |\n",
                settings[i].name, sent, ly, ey, o->flip_mean, zy, lt, et, o->wrong_mean, zt);
    }
    fprintf(f, "\n");

    fprintf(f, "## Timing\n\n| setting | label collection (s) | retrain over HTTP (s) |\n");
    fprintf(f, "|---|---:|---:|\n");
    for (size_t i = 0; i < NSETTINGS; i++)
        fprintf(f, "| %s | %.1f | %.1f |\n", settings[i].name, runs[i].collect_s, runs[i].train_s);
    return disagree;
}

/* ------------------------------------------------------------------ */

static void usage(void)
{
    fprintf(stderr, "usage: live_study [--out FILE] [--annotators A] [--tasks T] [--workers W]\n"
                    "                  [--seeds S] [--seed BASE]\n"
                    "  A annotators x T tasks = n labels per setting (default 200 x 100);\n"
                    "  W annotator worker threads (default 8); S offline seeds (default 30).\n");
}

int main(int argc, char **argv)
{
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (v && strcmp(a, "--out") == 0)
            out_path = v;
        else if (v && strcmp(a, "--annotators") == 0)
            n_annot = atoi(v);
        else if (v && strcmp(a, "--tasks") == 0)
            n_tasks = atoi(v);
        else if (v && strcmp(a, "--workers") == 0)
            n_workers = atoi(v);
        else if (v && strcmp(a, "--seeds") == 0)
            n_seeds = atoi(v);
        else if (v && strcmp(a, "--seed") == 0)
            base_seed = strtoull(v, NULL, 10);
        else {
            usage();
            return 2;
        }
        i++;
    }
    if (n_annot < 1 || n_tasks < 1 || n_tasks > 1000 || n_workers < 1 || n_seeds < 2) {
        usage();
        return 2;
    }
    if (lp_rng_init() != 0) {
        fprintf(stderr, "no OS randomness\n");
        return 2;
    }
    double t_start = now_s();
    lp_sim_theta_star(D, MARGIN_SD, base_seed, theta_star);
    double tn = 0;
    for (int i = 0; i < D; i++)
        tn += theta_star[i] * theta_star[i];
    bound = BOUND_RATIO * sqrt(tn);

    live_run runs[NSETTINGS];
    memset(runs, 0, sizeof runs);
    int rc = 0;
    for (size_t i = 0; i < NSETTINGS && rc == 0; i++) {
        runs[i].s = &settings[i];
        runs[i].index = (int)i;
        if (live_setting(&runs[i]) != LDPREF_OK) {
            fprintf(stderr, "[%s] FAILED: %s\n", settings[i].name, runs[i].msg);
            rc = 2;
        }
        if (server_stop(&runs[i].srv) != 0 && rc == 0) {
            fprintf(stderr, "[%s] the server did not exit cleanly\n", settings[i].name);
            rc = 2;
        }
        server_cleanup(&runs[i].srv);
        free(runs[i].f);
        free(runs[i].y);
        free(runs[i].truth);
        pthread_mutex_destroy(&runs[i].msg_lock);
    }
    if (rc != 0)
        return rc;

    /* Offline references: the study's definition for every setting (for the
     * server-flip row: the papers' mask-scheme LTC flip, shown for reference),
     * and the server's flip where a setting's verdict uses it; 2 threads. */
    fprintf(stderr, "[offline] %zu settings x %d seeds\n", NSETTINGS, n_seeds);
    double t_off = now_s();
    offline_ref refs[2 * NSETTINGS + 1];
    memset(refs, 0, sizeof refs);
    size_t nref = 0;
    offline_ref *study = refs, *server_ltc = refs + NSETTINGS;
    for (size_t i = 0; i < NSETTINGS; i++) {
        study[i].s = &settings[i];
        study[i].kind = REF_STUDY;
        server_ltc[i].s = &settings[i];
        server_ltc[i].kind = REF_SERVER_LTC;
    }
    for (size_t i = 0; i < 2 * NSETTINGS; i++) {
        refs[i].vals = calloc((size_t)n_seeds * NMETRICS, sizeof(double));
        refs[i].flips = calloc((size_t)n_seeds, sizeof(double));
        if (refs[i].vals == NULL || refs[i].flips == NULL)
            return 2;
        refs[i].wrong = calloc((size_t)n_seeds, sizeof(double));
        if (refs[i].wrong == NULL)
            return 2;
        /* The server's flip reference only for the settings that use it. */
        if (i >= NSETTINGS && refs[i].s->ref != REF_SERVER_LTC)
            atomic_store(&refs[i].next, n_seeds);
        nref++;
    }
    pthread_t th[2];
    for (int w = 0; w < 2; w++)
        pthread_create(&th[w], NULL, offline_worker, refs);
    for (int w = 0; w < 2; w++)
        pthread_join(th[w], NULL);
    for (size_t i = 0; i < nref; i++) {
        if (i >= NSETTINGS && refs[i].s->ref != REF_SERVER_LTC)
            continue;
        if (atomic_load(&refs[i].rc) != 0) {
            fprintf(stderr, "[offline] %s: error %d\n", refs[i].s->name, atomic_load(&refs[i].rc));
            return 2;
        }
        summarize(&refs[i]);
    }
    fprintf(stderr, "[offline] done in %.1f s\n", now_s() - t_off);

    double wall = now_s() - t_start;
    int disagree = report(stdout, runs, study, server_ltc, wall);
    if (out_path != NULL) {
        FILE *f = fopen(out_path, "w");
        if (f == NULL) {
            perror(out_path);
            return 2;
        }
        report(f, runs, study, server_ltc, wall);
        if (fclose(f) != 0) {
            perror(out_path);
            return 2;
        }
    }
    for (size_t i = 0; i < 2 * NSETTINGS; i++) {
        free(refs[i].vals);
        free(refs[i].flips);
        free(refs[i].wrong);
    }
    return disagree ? 1 : 0;
}
