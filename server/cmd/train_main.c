/*
 * train_main.c — ldpref-train: the offline trainer CLI.
 *
 *   ldpref-train fit       --data FILE --out MODEL.json [--loss NAME] [options]
 *   ldpref-train simulate  --out DATA.jsonl --theta-out THETA.json [options]
 *   ldpref-train evaluate  --model MODEL.json (--truth THETA.json | --data FILE)
 *   ldpref-train score     --model MODEL.json --candidates FILE
 *   ldpref-train cv        --data FILE [grid options]   (k-fold table)
 *   ldpref-train sweep     [--grid default|quick | --block SPEC] --out FILE.jsonl
 *   ldpref-train report    --in FILE.jsonl --dir DIR   (the study's Markdown + gnuplot)
 *
 * Each subcommand's options come from one table that also prints --help.
 * Progress lines go to stderr only when it is a terminal (or --progress).
 * Exit status: 0 success, 1 runtime failure, 2 usage error. fit succeeds
 * whenever it wrote the model, also when the optimizer stopped before its
 * convergence test (a warning on stderr names the reason; FIT_NOTE).
 */
#include "centralstudy.h"
#include "confidence.h"
#include "dataset.h"
#include "error.h"
#include "evaluate.h"
#include "featurize.h"
#include "general.h"
#include "gstudy.h"
#include "intransitive.h"
#include "losses.h"
#include "mechanism.h"
#include "model.h"
#include "objective.h"
#include "pessimismstudy.h"
#include "optimize.h"
#include "policy.h"
#include "prng.h"
#include "rr.h"
#include "simulate.h"
#include "study.h"
#include "userlevelstudy.h"
#include "sweep.h"
#include "wire.h"

#include <cblas.h>
#include <jansson.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* ---- option tables ---------------------------------------------------- */

typedef enum opt_type { O_STR, O_DBL, O_INT, O_U64, O_FLAG, O_NOFLAG } opt_type;

typedef struct opt {
    const char *name, *arg, *help;
    opt_type type;
    void *ptr;
} opt;

/* Set by the hidden --man: --help prints the manual page's records
 * (deploy/manpage.awk) instead of text; man_summary is the command's line. */
static int man_mode;
static const char *man_summary = "";

static void print_help(const char *cmd, const char *synopsis, const opt *t)
{
    if (man_mode)
        printf("@ss\tldpref-train %s %s\n@tx\t%s\n", cmd, synopsis, man_summary);
    else
        printf("usage: ldpref-train %s %s\n\noptions:\n", cmd, synopsis);
    for (; t->name; t++) {
        char lhs[64];
        snprintf(lhs, sizeof lhs, "--%s%s%s", t->name, t->arg ? " " : "", t->arg ? t->arg : "");
        printf(man_mode ? "@op\t%s\t%s\n" : "  %-26s %s\n", lhs, t->help);
    }
    printf(man_mode ? "@op\t%s\t%s\n" : "  %-26s %s\n", "--help", "show this help");
}

static double parse_double(const char *s, int *ok)
{
    if (strcmp(s, "inf") == 0 || strcmp(s, "null") == 0 || strcmp(s, "none") == 0)
        return INFINITY;
    char *end;
    double v = strtod(s, &end);
    *ok = *s != '\0' && *end == '\0' && !isnan(v);
    return v;
}

/* Parses argv against t. Returns 0, 1 for --help, 2 on error. */
static int parse_opts(int argc, char **argv, const opt *t, const char *cmd, const char *syn)
{
    for (int i = 0; i < argc; i++) {
        const char *a = argv[i];
        if (strcmp(a, "--help") == 0 || strcmp(a, "-h") == 0) {
            print_help(cmd, syn, t);
            return 1;
        }
        if (strncmp(a, "--", 2) != 0) {
            fprintf(stderr, "ldpref-train %s: unexpected argument '%s'\n", cmd, a);
            return 2;
        }
        const opt *o = t;
        while (o->name && strcmp(o->name, a + 2) != 0)
            o++;
        if (o->name == NULL) {
            fprintf(stderr, "ldpref-train %s: unknown option '%s' (see --help)\n", cmd, a);
            return 2;
        }
        if (o->type == O_FLAG || o->type == O_NOFLAG) {
            *(int *)o->ptr = o->type == O_FLAG;
            continue;
        }
        if (i + 1 >= argc) {
            fprintf(stderr, "ldpref-train %s: %s needs a value\n", cmd, a);
            return 2;
        }
        const char *v = argv[++i];
        int ok = 1;
        switch (o->type) {
        case O_STR:
            *(const char **)o->ptr = v;
            break;
        case O_DBL:
            *(double *)o->ptr = parse_double(v, &ok);
            break;
        case O_INT: {
            char *end;
            long x = strtol(v, &end, 10);
            ok = *v && !*end && x >= -2147483647L && x <= 2147483647L;
            *(int *)o->ptr = (int)x;
            break;
        }
        case O_U64: {
            char *end;
            unsigned long long x = strtoull(v, &end, 10);
            ok = *v && !*end && *v != '-';
            *(uint64_t *)o->ptr = (uint64_t)x;
            break;
        }
        default:
            break;
        }
        if (!ok) {
            fprintf(stderr, "ldpref-train %s: bad value '%s' for %s\n", cmd, v, a);
            return 2;
        }
    }
    return 0;
}

static int fail(const char *cmd, int code, const char *msg)
{
    fprintf(stderr, "ldpref-train %s: %s: %s\n", cmd, lp_error_name(code),
            msg && *msg ? msg : lp_error_message(code));
    return 1;
}

/* Shared featurizer options. */
typedef struct feat_cli {
    int hash_dim, no_bigrams, cross, cross_max, no_length;
} feat_cli;

#define FEAT_OPTS(F)                                                                               \
    {"hash-dim", "N", "text: hashed buckets (default 4096)", O_INT, &(F).hash_dim},                \
        {"no-bigrams", NULL, "text: unigrams only", O_FLAG, &(F).no_bigrams},                      \
        {"cross-prompt", NULL, "text: cross prompt words with response words", O_FLAG,             \
         &(F).cross},                                                                              \
        {"cross-max", "N", "text: prompt words used for crossing (default 32)", O_INT,             \
         &(F).cross_max},                                                                          \
    {                                                                                              \
        "no-length", NULL, "text: omit the two length features", O_FLAG, &(F).no_length            \
    }

static void feat_cli_init(feat_cli *f)
{
    f->hash_dim = 4096;
    f->no_bigrams = 0;
    f->cross = 0;
    f->cross_max = 32;
    f->no_length = 0;
}

static void feat_from_cli(const feat_cli *f, lp_feat_spec *s)
{
    lp_feat_spec_init(s);
    s->hash_dim = f->hash_dim > 0 ? (uint32_t)f->hash_dim : 0;
    s->bigrams = !f->no_bigrams;
    s->cross_prompt = f->cross;
    s->cross_max = f->cross_max;
    s->length = !f->no_length;
}

static int precision_pref(const char *p, int *out)
{
    if (strcmp(p, "auto") == 0)
        *out = -1;
    else if (strcmp(p, "float") == 0 || strcmp(p, "float32") == 0)
        *out = 1;
    else if (strcmp(p, "double") == 0 || strcmp(p, "float64") == 0)
        *out = 0;
    else
        return 0;
    return 1;
}

/* ---- fit -------------------------------------------------------------- */

#define FIT_NOTE                                                                                   \
    "\nThe loss defaults to square-chipo, as on the server.\n"                                     \
    "Exit status 0 whenever the model was written. When L-BFGS stops before its gradient\n"        \
    "test (rounding_error, minimum_step, max_linesearch, max_iterations, ...), the model holds\n"  \
    "the best point reached and a warning on stderr names the reason and the final |grad|\n"       \
    "(also with --quiet); the model records it as \"status\". A diverging objective is\n"          \
    "reported the same way. Exit 1: the data could not be read or the fit failed to run.\n"

typedef struct fit_cli {
    const char *data, *loss, *out, *optimizer, *kernel, *precision, *link, *l2, *method;
    double rmax, tau, bound, gtol, lr, beta, eta;
    int max_iter, memory, batch, epochs, threads, progress, quiet, folds, rounds;
    /* a DP release (--mechanism): its budget, candidate set and center */
    const char *mechanism, *candidates, *center;
    double epsilon, radius;
    int research;
    /* aup: delta, the contribution cap and the optimizer */
    double delta, concentration;
    int user_cap, steps, user_batch;
    uint64_t seed;
    feat_cli feat;
} fit_cli;

/*
 * Runs one fit on ds with the CLI settings into a new model (theta owned
 * by the model). Returns 0 or an error code (msg filled).
 */
static int run_fit(const fit_cli *c, lp_dataset *ds, lp_model **out, char *msg, size_t msglen)
{
    lp_loss_kind kind;
    if (lp_loss_parse(c->loss, &kind) != LP_OK)
        return lp_fail(
            LP_EINVALID_ARGUMENT, msg, msglen,
            "unknown loss '%s' (square-chipo, chipo, dpo, rdpo, rr-mle, rr-sgd, ipo, rr-sgd-last)",
            c->loss);
    lp_method method = lp_loss_fit_method(kind);
    if (c->optimizer && lp_method_parse(c->optimizer, &method) != LP_OK)
        return lp_fail(LP_EINVALID_ARGUMENT, msg, msglen, "unknown optimizer '%s'", c->optimizer);
    lp_objective_opts oo;
    lp_objective_opts_init(&oo, kind);
    oo.loss.rmax = c->rmax;
    oo.loss.tau = c->tau;
    lp_cv_opts co;
    lp_cv_opts_init(&co);
    co.auto_l2 = strcmp(c->l2, "auto") == 0;
    co.folds = c->folds;
    co.threads = c->threads;
    int l2_ok = 1;
    oo.l2 = co.auto_l2 ? 0.0 : parse_double(c->l2, &l2_ok);
    oo.threads = c->threads;
    oo.kernel = c->kernel && strcmp(c->kernel, "blas") == 0 ? LP_KERNEL_BLAS : LP_KERNEL_FUSED;
    double beta = isnan(c->beta) ? 1.0 : c->beta; /* the reward losses' default */
    if (!(c->rmax > 0) || !(c->tau > 0) || !l2_ok || !(oo.l2 >= 0) || isinf(oo.l2) ||
        c->threads < 1 || !(beta > 0) || isinf(beta) || c->folds < 0 || c->folds == 1 ||
        (co.auto_l2 && c->folds == 0))
        return lp_fail(LP_EINVALID_ARGUMENT, msg, msglen,
                       "need --rmax > 0, --tau > 0, --l2 auto or >= 0, --threads >= 1, finite "
                       "--beta > 0, --folds 0 (none, with a numeric --l2) or >= 2");
    lp_fit_opts fo;
    lp_fit_opts_init(&fo, method);
    fo.max_iter = c->max_iter;
    fo.gtol = c->gtol;
    fo.memory = c->memory;
    fo.norm_bound = c->bound;
    if (c->lr > 0)
        fo.lr = c->lr;
    fo.batch = c->batch;
    fo.epochs = c->epochs;
    fo.seed = c->seed == UINT64_MAX ? 0 : c->seed;
    fo.progress = c->progress;
    lp_model *m = NULL;
    int rc = c->folds == 0 ? lp_model_fit(ds, &oo, &fo, beta, &m)
                           : lp_model_fit_cv(ds, &oo, &fo, beta, &co, &m);
    if (rc != LP_OK)
        return rc == LP_ENO_MEMORY
                   ? lp_fail(rc, msg, msglen, "out of memory")
                   : lp_fail(rc, msg, msglen, "fit failed (check the optimizer options)");
    if (c->link)
        m->link = strcmp(c->link, "kl") == 0 ? LP_LINK_KL : LP_LINK_CHIMIX;
    snprintf(m->source, sizeof m->source, "%s", c->data ? c->data : "");
    *out = m;
    return LP_OK;
}

/* The cross-validation summary of a fit on stderr. */
static void print_validation(const lp_model *m)
{
    if (!m->have_cv) {
        fprintf(stderr, "fit: no held-out estimate (%s)\n",
                m->cv.auto_l2 ? "fewer than 2 prompts; l2 auto fell back to 0" : "--folds 0");
        return;
    }
    const lp_cv_result *cv = &m->cv;
    const lp_cv_point *p = &cv->pt[cv->chosen];
    if (cv->auto_l2)
        fprintf(stderr, "fit: l2 auto: %.4g (grid %.3g ... %.3g, %zu points)", p->l2, cv->pt[0].l2,
                cv->pt[cv->npoints - 1].l2, cv->npoints);
    else
        fprintf(stderr, "fit: l2 %.4g", p->l2);
    fprintf(stderr,
            "; %d folds by prompt over %zu prompts, %.2f s: held-out accuracy (debiased) %.4f "
            "+- %.4f, raw agreement with the privatized labels %.4f, Brier (debiased) %.4f\n",
            cv->folds, cv->groups, cv->seconds, p->accuracy, p->accuracy_se, p->raw_accuracy,
            p->brier);
}

/* The warnings of FIT_NOTE, on stderr whatever --quiet says. */
static void warn_early_stop(const lp_model *m)
{
    const lp_fit_result *r = &m->res;
    if (!isfinite(r->objective))
        fprintf(stderr, "fit: the objective diverged; use --norm-bound or --l2\n");
    else if (m->fit.method == LP_OPT_LBFGS && !r->converged)
        fprintf(stderr,
                "ldpref-train fit: warning: L-BFGS stopped before its gradient test: %s, "
                "final |grad| %.3g after %d iterations (--gtol %g); the model holds the best "
                "point reached\n",
                r->status, r->grad_norm, r->iterations, m->fit.gtol);
}

static void fit_cli_init(fit_cli *c)
{
    memset(c, 0, sizeof *c);
    c->loss = "square-chipo"; /* the server's default */
    c->precision = "auto";
    c->rmax = 1.0;
    c->tau = 0.5;
    c->l2 = "auto";
    c->folds = 5;
    c->bound = INFINITY;
    c->gtol = 1e-7;
    c->lr = 0.0;
    c->beta = NAN; /* 1 for the reward losses, LP_GP_DEFAULT_BETA for general */
    c->method = "reward";
    c->rounds = LP_GP_DEFAULT_ROUNDS;
    c->eta = 0.0;
    c->max_iter = 500;
    c->memory = 10;
    c->batch = 1;
    c->epochs = 1;
    c->threads = 2;
    c->progress = isatty(2);
    c->seed = UINT64_MAX; /* not given: 0 for SGD, the CSPRNG for a release's net */
    c->mechanism = "none";
    c->epsilon = NAN;
    c->radius = 1.0;
    c->delta = NAN;
    feat_cli_init(&c->feat);
}

/* Collects the loaded labels for Algorithm 3 (the data is made on the
 * first label, when d is known). */
static int collect_pair(void *ctx, uint64_t group, const double *x0, const double *x1,
                        const lp_sparse *f0, const lp_sparse *f1, size_t d, int z, double eps)
{
    lp_gp_data **g = ctx;
    if (*g == NULL && (*g = lp_gp_data_new(d)) == NULL)
        return LP_ENO_MEMORY;
    return x0 ? lp_gp_data_add_dense(*g, group, x0, x1, z, eps)
              : lp_gp_data_add(*g, group, f0, f1, z, eps);
}

/* fit --method general: Algorithm 3 (general.h). */
static int fit_general(const fit_cli *c)
{
    int l2_ok = 1; /* no cross-validation here: auto is no penalty */
    double l2 = strcmp(c->l2, "auto") == 0 ? 0.0 : parse_double(c->l2, &l2_ok);
    if (c->rounds < 1 || c->rounds > LP_GP_MAX_ROUNDS || !(c->eta >= 0) || !(c->beta >= 0) ||
        isinf(c->beta) || !l2_ok || !(l2 >= 0) || isinf(l2) || c->threads < 1) {
        fprintf(stderr,
                "ldpref-train fit: general needs --rounds in [1, %d], --eta >= 0, finite "
                "--beta >= 0, --l2 >= 0\n",
                LP_GP_MAX_ROUNDS);
        return 2;
    }
    lp_feat_spec fs;
    feat_from_cli(&c->feat, &fs);
    lp_featurizer *fz = lp_featurizer_new(&fs);
    if (fz == NULL)
        return fail("fit", LP_EINVALID_ARGUMENT, "bad featurizer options");
    lp_gp_data *g = NULL;
    lp_load_opts lo = {.fz = fz, .prefer_f32 = 0, .on_pair = collect_pair, .on_pair_ctx = &g};
    char msg[512] = "";
    lp_dataset *ds = NULL;
    int rc = lp_dataset_load(c->data, &lo, &ds, NULL, msg, sizeof msg);
    if (rc == LP_EINVALID_ARGUMENT && g != NULL)
        snprintf(msg + strlen(msg), sizeof msg - strlen(msg),
                 " (a prompt may have at most %d distinct responses; dense records are grouped "
                 "by their \"prompt\" field)",
                 LP_GP_MAX_K);
    lp_gp_opts go;
    lp_gp_opts_init(&go);
    go.rounds = c->rounds;
    go.beta = c->beta;
    go.eta = c->eta;
    go.l2 = l2;
    go.threads = c->threads;
    lp_model *m = NULL;
    if (rc == LP_OK) {
        rc = lp_model_fit_general(g, ds, &go, &m);
        if (rc == LP_ENO_LABELS)
            snprintf(msg, sizeof msg,
                     "no prompt has two distinct responses to play against "
                     "each other");
    }
    if (rc == LP_OK) {
        m->text = ds->storage == LP_STORE_CSR;
        m->feat = fs;
        snprintf(m->source, sizeof m->source, "%s", c->data);
        rc = lp_model_write(m, c->out);
        if (rc != LP_OK)
            snprintf(msg, sizeof msg, "cannot write %s", c->out);
    }
    if (rc == LP_OK && !c->quiet) {
        const lp_gp_model *gm = m->general;
        fprintf(
            stderr,
            "fit: general (Algorithm 3) on %zu labels, %zu prompts (%zu with two or more "
            "candidates, %zu candidate pairs): preference least squares %s (objective "
            "%.6g), cycle share %.3f; self-play %d rounds, beta %.4g, eta %.4g: mean duality gap "
            "under the fitted preference on the training prompts %.4f\n",
            gm->n_labels, gm->n_prompts, gm->n_playable, gm->n_pairs, gm->pref_status,
            gm->pref_objective, gm->cycle_share, gm->rounds, gm->beta, gm->eta, gm->train_gap);
    }
    lp_model_free(m);
    lp_dataset_free(ds);
    lp_gp_data_free(g);
    lp_featurizer_free(fz);
    return rc == LP_OK ? 0 : fail("fit", rc, msg);
}

/* The summary of an AUP-RLHF release on stderr. */
static void print_aup_release(const json_t *r, int research)
{
    const json_t *h = json_object_get(r, "halted_at");
    fprintf(stderr,
            "fit: aup (user-level epsilon %g, delta %g, %s randomness) on %lld annotators, %lld "
            "labels used (cap %lld): %lld of %lld steps%s, tau %.4g, noise sigma %.4g per "
            "coordinate\n",
            json_number_value(json_object_get(r, "epsilon")),
            json_number_value(json_object_get(r, "delta")),
            research ? "SEEDED (research, not private)" : "CSPRNG",
            json_integer_value(json_object_get(r, "annotators")),
            json_integer_value(json_object_get(r, "labels_used")),
            json_integer_value(json_object_get(r, "user_cap")),
            json_integer_value(json_object_get(r, "steps_run")),
            json_integer_value(json_object_get(r, "steps")),
            json_is_integer(h) ? " (the concentration test halted training)" : "",
            json_number_value(json_object_get(r, "tau")),
            json_number_value(json_object_get(r, "sigma")));
}

/* fit --mechanism exponential|aup: a DP release (mechanism.h). */
static int fit_release(const fit_cli *c)
{
    lp_release_opts ro;
    lp_mechanism mech;
    if (lp_mechanism_parse(c->mechanism, &mech) != LP_OK || mech == LP_MECH_NONE) {
        fprintf(stderr, "ldpref-train fit: --mechanism must be none, exponential or aup\n");
        return 2;
    }
    int aup = mech == LP_MECH_AUP;
    if (isnan(c->epsilon) || (!aup && c->candidates == NULL) || (aup && isnan(c->delta)) ||
        c->user_cap < 0 || c->steps < 0 || c->user_batch < 0) {
        fprintf(stderr, "ldpref-train fit: a release needs --epsilon and --candidates "
                        "(exponential) or --delta (aup); --user-cap, --steps, --user-batch >= 0\n");
        return 2;
    }
    if (c->research && c->seed == UINT64_MAX) {
        fprintf(stderr, "ldpref-train fit: --research needs --seed\n");
        return 2;
    }
    lp_release_opts_init(&ro, mech, c->epsilon);
    ro.beta = isnan(c->beta) ? 1.0 : c->beta;
    ro.rmax = c->rmax;
    ro.radius = c->radius;
    ro.delta = aup ? c->delta : 0.0;
    ro.user_cap = (size_t)c->user_cap;
    ro.steps = c->steps;
    ro.lr = c->lr;
    ro.norm_bound = isinf(c->bound) ? 0.0 : c->bound;
    ro.tau = c->concentration;
    ro.batch = (size_t)c->user_batch;
    char spec[128], msg[512] = "";
    /* --seed fixes the net unless the spec has its own seed. */
    const char *cands = c->candidates ? c->candidates : "";
    snprintf(spec, sizeof spec, "%s%s", cands,
             c->seed != UINT64_MAX && !aup && strstr(cands, ":seed=") == NULL ? ":seed=" : "");
    if (c->seed != UINT64_MAX && !aup && strstr(cands, ":seed=") == NULL)
        snprintf(spec + strlen(spec), sizeof spec - strlen(spec), "%llu",
                 (unsigned long long)c->seed);
    ro.candidates = spec;
    lp_prng g;
    if (c->research) {
        lp_prng_seed(&g, c->seed);
        ro.rand64 = lp_prng_next64;
        ro.rand_state = &g;
    } else if (lp_rng_init() != LP_OK) {
        return fail("fit", LP_ERNG, "the OS random source is unavailable");
    }
    lp_model *center = NULL;
    int rc = c->center ? lp_model_read(c->center, &center, msg, sizeof msg) : LP_OK;
    if (rc != LP_OK)
        return fail("fit", rc, msg);
    lp_load_opts lo = {0};
    if (!precision_pref(c->precision, &lo.prefer_f32)) {
        lp_model_free(center);
        fprintf(stderr, "ldpref-train fit: --precision must be auto, float or double\n");
        return 2;
    }
    openblas_set_num_threads(c->threads);
    lp_feat_spec fs;
    feat_from_cli(&c->feat, &fs);
    lp_featurizer *fz = lp_featurizer_new(&fs);
    lo.fz = fz;
    lp_dataset *ds = NULL;
    lp_model *m = NULL;
    rc = fz ? lp_dataset_load(c->data, &lo, &ds, NULL, msg, sizeof msg) : LP_EINVALID_ARGUMENT;
    if (fz == NULL)
        snprintf(msg, sizeof msg, "bad featurizer options");
    if (rc == LP_OK && center != NULL && center->d != ds->d)
        rc = lp_fail(LP_EINVALID_ARGUMENT, msg, sizeof msg,
                     "--center has %zu features, the data %zu", center->d, ds->d);
    ro.center = center ? center->theta : NULL;
    if (rc == LP_OK)
        rc = lp_release_fit(ds, ds->user, &ro, &m, msg, sizeof msg);
    if (rc == LP_OK) {
        m->text = ds->storage == LP_STORE_CSR;
        m->feat = fs;
        snprintf(m->source, sizeof m->source, "%s", c->data);
        if (c->link)
            m->link = strcmp(c->link, "kl") == 0 ? LP_LINK_KL : LP_LINK_CHIMIX;
        if ((rc = lp_model_write(m, c->out)) != LP_OK)
            snprintf(msg, sizeof msg, "cannot write %s", c->out);
    }
    if (rc == LP_OK && !c->quiet && aup)
        print_aup_release(m->release, c->research);
    else if (rc == LP_OK && !c->quiet) {
        const json_t *cs = json_object_get(m->release, "candidates");
        fprintf(stderr,
                "fit: exponential mechanism (epsilon %g, %s randomness) on %zu labels x %zu "
                "features: candidate %lld of %lld (%s, radius %g, seed %lld), |theta| %.4g\n",
                c->epsilon, c->research ? "SEEDED (research, not private)" : "CSPRNG", ds->n, ds->d,
                json_integer_value(json_object_get(m->release, "selected")),
                json_integer_value(json_object_get(cs, "size")),
                json_string_value(json_object_get(cs, "kind")), c->radius,
                json_integer_value(json_object_get(cs, "seed")), m->res.theta_norm);
    }
    lp_model_free(m);
    lp_model_free(center);
    lp_dataset_free(ds);
    lp_featurizer_free(fz);
    return rc == LP_OK ? 0 : fail("fit", rc, msg);
}

static int cmd_fit(int argc, char **argv)
{
    fit_cli c;
    fit_cli_init(&c);
    const opt t[] = {
        {"data", "FILE", "training data, JSONL (dense, server export, or text pairs)", O_STR,
         &c.data},
        {"loss", "NAME", "square-chipo (default)|chipo|dpo|rdpo|rr-mle|rr-sgd|ipo", O_STR, &c.loss},
        {"out", "MODEL.json", "where to write the model", O_STR, &c.out},
        {"rmax", "R", "clip margins at 2R for square-chipo/chipo (default 1)", O_DBL, &c.rmax},
        {"tau", "T", "ipo: target c(eps) zbar/(2T) (default 0.5)", O_DBL, &c.tau},
        {"l2", "L",
         "objective (1/n)[sum loss + L ||theta||^2]; auto (default): chosen by "
         "cross-validation grouped by prompt",
         O_STR, &c.l2},
        {"folds", "K",
         "cross-validation folds (default 5); 0: none (numeric --l2 only, no "
         "held-out estimate)",
         O_INT, &c.folds},
        {"norm-bound", "B", "constrain ||theta|| <= B (default none); reported when active", O_DBL,
         &c.bound},
        {"optimizer", "NAME",
         "lbfgs|sgd|adam|sgd-last (default lbfgs; sgd for rr-sgd, sgd-last for rr-sgd-last)", O_STR,
         &c.optimizer},
        {"max-iter", "N", "L-BFGS iterations (default 500)", O_INT, &c.max_iter},
        {"gtol", "G", "L-BFGS: stop at |grad| <= G max(1,|theta|) max(1,|F|) (default 1e-7)", O_DBL,
         &c.gtol},
        {"memory", "M", "L-BFGS history (default 10)", O_INT, &c.memory},
        {"lr", "ETA", "SGD step lr/sqrt(t), sgd-last lr/t (default 0.5) / Adam step (0.01)", O_DBL,
         &c.lr},
        {"batch", "N", "SGD/Adam minibatch (default 1)", O_INT, &c.batch},
        {"epochs", "N", "SGD/Adam passes (default 1)", O_INT, &c.epochs},
        {"seed", "S",
         "seed for SGD/Adam order (default 0); a release: the random net's seed (default: "
         "from the CSPRNG), with --research also the selection's",
         O_U64, &c.seed},
        {"threads", "T", "threads for the loss/gradient pass (default 2)", O_INT, &c.threads},
        {"mechanism", "M",
         "none (default: a plain fit), exponential (a central-DP release, Algorithm 2) or aup "
         "(user-level DP, AUP-RLHF)",
         O_STR, &c.mechanism},
        {"delta", "D", "aup: the release's delta, in (0, 1)", O_DBL, &c.delta},
        {"user-cap", "M",
         "aup: use each annotator's first M labels (default 0: all); annotators come from the "
         "labels' \"annotator\" field (none: each label its own)",
         O_INT, &c.user_cap},
        {"steps", "T", "aup: gradient steps (default 100)", O_INT, &c.steps},
        {"concentration", "TAU",
         "aup: the concentration radius (default 2 G/sqrt(m), G the largest label gradient)", O_DBL,
         &c.concentration},
        {"user-batch", "N", "aup: annotators per step (default 0: all)", O_INT, &c.user_batch},
        {"epsilon", "E", "release: the model's privacy budget, finite and > 0", O_DBL, &c.epsilon},
        {"candidates", "SPEC",
         "release: grid:G (small d), net:K, around:K (needs --center), optionally :seed=S", O_STR,
         &c.candidates},
        {"radius", "R", "release: the candidates' norm ball radius (default 1)", O_DBL, &c.radius},
        {"center", "MODEL.json", "release: the model whose theta centers around:K", O_STR,
         &c.center},
        {"research", NULL,
         "release: draw the selection from --seed instead of the CSPRNG (not private: research "
         "only; recorded)",
         O_FLAG, &c.research},
        {"kernel", "K", "dense kernel: fused (default) or blas", O_STR, &c.kernel},
        {"precision", "P", "dense storage: auto|float|double (auto: double up to 2^24 values)",
         O_STR, &c.precision},
        {"beta", "B", "policy temperature (default 1; general: 0.05)", O_DBL, &c.beta},
        {"method", "M", "reward (default: a reward-based --loss) or general (Algorithm 3)", O_STR,
         &c.method},
        {"rounds", "T", "general: self-play rounds, the mixture's size (default 100)", O_INT,
         &c.rounds},
        {"eta", "E", "general: mirror-descent step (default 0.5)", O_DBL, &c.eta},
        {"link", "L", "chimix|kl (default: the loss family's)", O_STR, &c.link},
        {"progress", NULL, "progress lines on stderr even when not a terminal", O_FLAG,
         &c.progress},
        {"quiet", NULL, "no progress and no summary (warnings still shown)", O_FLAG, &c.quiet},
        FEAT_OPTS(c.feat),
        {NULL, NULL, NULL, O_STR, NULL}};
    const char *syn = "--data FILE --out MODEL.json [--loss NAME] [options]";
    int p = parse_opts(argc, argv, t, "fit", syn);
    if (p == 1)
        printf(FIT_NOTE);
    if (p)
        return p == 1 ? 0 : 2;
    if (!c.data || !c.out) {
        fprintf(stderr, "ldpref-train fit: --data and --out are required (see --help)\n");
        return 2;
    }
    if (c.quiet)
        c.progress = 0;
    int general = strcmp(c.method, "general") == 0;
    if (!general && strcmp(c.method, "reward") != 0) {
        fprintf(stderr, "ldpref-train fit: --method must be reward or general\n");
        return 2;
    }
    if (isnan(c.beta))
        c.beta = general ? 0.0 : 1.0;
    if (general)
        return fit_general(&c);
    if (strcmp(c.mechanism, "none") != 0)
        return fit_release(&c);
    lp_load_opts lo = {0};
    if (!precision_pref(c.precision, &lo.prefer_f32)) {
        fprintf(stderr, "ldpref-train fit: --precision must be auto, float or double\n");
        return 2;
    }
    openblas_set_num_threads(c.threads);
    lp_feat_spec fs;
    feat_from_cli(&c.feat, &fs);
    lp_featurizer *fz = lp_featurizer_new(&fs);
    if (fz == NULL)
        return fail("fit", LP_EINVALID_ARGUMENT, "bad featurizer options");
    lo.fz = fz;
    char msg[512] = "";
    lp_dataset *ds = NULL;
    int rc = lp_dataset_load(c.data, &lo, &ds, NULL, msg, sizeof msg);
    if (rc != LP_OK) {
        lp_featurizer_free(fz);
        return fail("fit", rc, msg);
    }
    lp_model *m = NULL;
    rc = run_fit(&c, ds, &m, msg, sizeof msg);
    if (rc == LP_OK && (rc = lp_conf_attach(m, ds)) != LP_OK)
        snprintf(msg, sizeof msg, "the confidence record could not be computed");
    if (rc == LP_OK) {
        m->text = ds->storage == LP_STORE_CSR;
        m->feat = fs;
        rc = lp_model_write(m, c.out);
        if (rc != LP_OK)
            snprintf(msg, sizeof msg, "cannot write %s", c.out);
    }
    if (rc == LP_OK && !c.quiet) {
        fprintf(stderr,
                "fit: %s on %zu labels x %zu features (%s): objective %.10g, |grad| %.3g, "
                "%d iterations, %d evaluations, status %s, |theta| %.4g\n",
                lp_loss_name(m->loss.kind), ds->n, ds->d, lp_storage_name(ds->storage),
                m->res.objective, m->res.grad_norm, m->res.iterations, m->res.evaluations,
                m->res.status, m->res.theta_norm);
        if (m->res.bound_active)
            fprintf(stderr, "fit: the norm bound is ACTIVE: |theta| = %.6g at B = %g\n",
                    m->res.theta_norm, m->fit.norm_bound);
        print_validation(m);
    }
    if (rc == LP_OK)
        warn_early_stop(m);
    lp_model_free(m);
    lp_dataset_free(ds);
    lp_featurizer_free(fz);
    return rc == LP_OK ? 0 : fail("fit", rc, msg);
}

/* ---- simulate --------------------------------------------------------- */

/* A dense label's fields after the opening brace. */
static void write_pair_fields(FILE *f, const double *f0, const double *f1, size_t d, int y, int z,
                              double eps)
{
    fputs("\"x0\":[", f);
    for (size_t j = 0; j < d; j++)
        fprintf(f, j ? ",%.17g" : "%.17g", f0[j]);
    fputs("],\"x1\":[", f);
    for (size_t j = 0; j < d; j++)
        fprintf(f, j ? ",%.17g" : "%.17g", f1[j]);
    if (isinf(eps))
        fprintf(f, "],\"z\":%d,\"epsilon\":null,\"y\":%d}\n", z, y);
    else
        fprintf(f, "],\"z\":%d,\"epsilon\":%.17g,\"y\":%d}\n", z, eps, y);
}

/* The simulator's JSONL output; with user_labels > 0 each record names its
 * annotator (label i: annotator i / user_labels). */
typedef struct pair_out {
    FILE *f;
    size_t count, user_labels;
} pair_out;

static void write_pair(void *ctx, const double *f0, const double *f1, size_t d, int y, int z,
                       double eps)
{
    pair_out *po = ctx;
    fputc('{', po->f);
    if (po->user_labels > 0)
        fprintf(po->f, "\"annotator\":%zu,", po->count / po->user_labels);
    po->count++;
    write_pair_fields(po->f, f0, f1, d, y, z, eps);
}

static int write_theta(const char *path, const double *th, size_t d, const lp_sim_opts *o)
{
    json_t *r = json_object();
    json_object_set_new(r, "kind", json_string("theta_star"));
    json_object_set_new(r, "margin_sd", json_real(o->margin_sd));
    json_object_set_new(r, "seed", json_integer((json_int_t)o->seed));
    json_t *a = json_array();
    for (size_t j = 0; j < d; j++)
        json_array_append_new(a, json_real(th[j]));
    json_object_set_new(r, "theta", a);
    int rc = json_dump_file(r, path, JSON_PRESERVE_ORDER | JSON_REAL_PRECISION(17)) == 0 ? LP_OK
                                                                                         : LP_EIO;
    json_decref(r);
    return rc;
}

static void write_prompt_pair(void *ctx, size_t prompt, const double *f0, const double *f1,
                              size_t d, int y, int z, double eps)
{
    fprintf(ctx, "{\"prompt\":\"p%zu\",", prompt);
    write_pair_fields(ctx, f0, f1, d, y, z, eps);
}

/* The truth of an intransitive simulation: theta*, W and S. */
static int write_general_truth(const char *path, const lp_gsim *t, const lp_gsim_opts *o)
{
    json_t *r = json_object(), *a = json_array(), *w = json_array();
    json_object_set_new(r, "kind", json_string("general_truth"));
    json_object_set_new(r, "margin_sd", json_real(o->margin_sd));
    json_object_set_new(r, "cycle_strength", json_real(o->cycle));
    json_object_set_new(r, "seed", json_integer((json_int_t)o->seed));
    for (size_t j = 0; j < t->d; j++)
        json_array_append_new(a, json_real(t->theta[j]));
    for (size_t j = 0; j < t->d * t->d; j++)
        json_array_append_new(w, json_real(t->W[j]));
    json_object_set_new(r, "theta", a);
    json_object_set_new(r, "W", w);
    int rc = json_dump_file(r, path, JSON_PRESERVE_ORDER | JSON_REAL_PRECISION(17)) == 0 ? LP_OK
                                                                                         : LP_EIO;
    json_decref(r);
    return rc;
}

/* simulate --preference intransitive (intransitive.h). */
static int simulate_general(const lp_sim_opts *so, int prompts, double cycle, const char *out,
                            const char *theta_out)
{
    lp_gsim_opts o;
    lp_gsim_opts_init(&o);
    o.prompts = (size_t)prompts;
    o.labels = so->n;
    o.d = so->d;
    o.K = so->K;
    o.cycle = cycle;
    o.margin_sd = so->margin_sd;
    o.eps = so->eps;
    o.alpha = so->alpha;
    o.order = so->order;
    o.adv = so->adv;
    o.seed = so->seed;
    lp_gsim *t = NULL;
    int rc = lp_gsim_truth(&o, 0, &t);
    if (rc != LP_OK)
        return fail("simulate", rc,
                    "need --d >= 2, --K in [2, 64], --prompts >= 1, --cycle-strength >= 0");
    FILE *f = strcmp(out, "-") == 0 ? stdout : fopen(out, "w");
    if (f == NULL) {
        lp_gsim_free(t);
        return fail("simulate", LP_EIO, out);
    }
    o.on_pair = write_prompt_pair;
    o.on_pair_ctx = f;
    rc = lp_gsim_labels(&o, t, NULL, NULL);
    if (f != stdout && fclose(f) != 0 && rc == LP_OK)
        rc = LP_EIO;
    if (rc == LP_OK)
        rc = write_general_truth(theta_out, t, &o);
    lp_gsim_free(t);
    return rc == LP_OK ? 0 : fail("simulate", rc, "simulation failed (check eps > 0, alpha)");
}

static int cmd_simulate(int argc, char **argv)
{
    const char *out = NULL, *theta_out = NULL, *order = "CTL", *adv = "flip", *pref = "bt";
    int n = 1000, d = 16, K = 4, bk = 0, prompts = 200, user_labels = 0;
    double eps = INFINITY, alpha = 0.0, sd = 2.0, cycle = 1.0, user_eps = NAN;
    uint64_t seed = 0;
    const opt t[] = {
        {"out", "DATA.jsonl", "write dense JSONL labels here (\"-\": stdout)", O_STR, &out},
        {"theta-out", "THETA.json", "write theta* here ({\"theta\": [...]})", O_STR, &theta_out},
        {"n", "N", "labels (default 1000)", O_INT, &n},
        {"d", "D", "feature dimension (default 16)", O_INT, &d},
        {"K", "K", "candidates per prompt (default 4)", O_INT, &K},
        {"eps", "E", "RR budget per label, or inf (default inf)", O_DBL, &eps},
        {"alpha", "A", "Huber corruption rate in [0, 0.5] (default 0)", O_DBL, &alpha},
        {"order", "O", "CTL (corrupt, then RR) or LTC (RR, then corrupt) (default CTL)", O_STR,
         &order},
        {"adversary", "S", "flip|anti|backdoor|constant0|constant1|random (default flip)", O_STR,
         &adv},
        {"backdoor-k", "K", "feature index for the backdoor adversary (default 0)", O_INT, &bk},
        {"margin-sd", "S", "standard deviation of the true margin (default 2)", O_DBL, &sd},
        {"seed", "S", "PRNG seed (default 0)", O_U64, &seed},
        {"preference", "P",
         "bt (Bradley-Terry, default) or intransitive (BT plus a cycle; labels carry a prompt)",
         O_STR, &pref},
        {"cycle-strength", "S", "intransitive: scale of the skew term f_a^T W f_b (default 1)",
         O_DBL, &cycle},
        {"prompts", "P", "intransitive: prompts with K candidates each (default 200)", O_INT,
         &prompts},
        {"user-labels", "M",
         "annotators that each give M consecutive labels (records carry \"annotator\"; "
         "default 0: none)",
         O_INT, &user_labels},
        {"user-epsilon", "E",
         "with --user-labels: an annotator's budget; each label gets RR at E/M (group privacy)",
         O_DBL, &user_eps},
        {NULL, NULL, NULL, O_STR, NULL}};
    int p =
        parse_opts(argc, argv, t, "simulate", "--out DATA.jsonl --theta-out THETA.json [options]");
    if (p)
        return p == 1 ? 0 : 2;
    lp_sim_opts o;
    lp_sim_opts_init(&o);
    if (user_labels < 0 || (!isnan(user_eps) && (user_labels < 1 || !(user_eps > 0)))) {
        fprintf(stderr, "ldpref-train simulate: --user-labels must be >= 0; --user-epsilon needs "
                        "--user-labels >= 1 and a value > 0\n");
        return 2;
    }
    if (!isnan(user_eps))
        eps = user_eps / user_labels;
    if (!out || !theta_out || n < 1 || d < 1 || K < 2 || bk < 0 ||
        lp_order_parse(order, &o.order) || lp_adversary_parse(adv, &o.adv)) {
        fprintf(stderr, "ldpref-train simulate: need --out, --theta-out, n,d >= 1, K >= 2, a "
                        "known --order and --adversary (see --help)\n");
        return 2;
    }
    o.n = (size_t)n;
    o.d = (size_t)d;
    o.K = K;
    o.eps = eps;
    o.alpha = alpha;
    o.backdoor_k = (size_t)bk;
    o.margin_sd = sd;
    o.seed = seed;
    if (strcmp(pref, "intransitive") == 0)
        return simulate_general(&o, prompts, cycle, out, theta_out);
    if (strcmp(pref, "bt") != 0) {
        fprintf(stderr, "ldpref-train simulate: --preference must be bt or intransitive\n");
        return 2;
    }
    double *th = calloc((size_t)d, sizeof *th);
    if (th == NULL)
        return fail("simulate", LP_ENO_MEMORY, NULL);
    lp_sim_theta_star(o.d, sd, seed, th);
    FILE *f = strcmp(out, "-") == 0 ? stdout : fopen(out, "w");
    if (f == NULL) {
        free(th);
        return fail("simulate", LP_EIO, out);
    }
    pair_out po = {.f = f, .user_labels = (size_t)user_labels};
    o.user_labels = (size_t)user_labels;
    o.on_pair = write_pair;
    o.on_pair_ctx = &po;
    lp_dataset *ds = NULL;
    int rc = lp_simulate(&o, th, &ds);
    if (f != stdout && fclose(f) != 0 && rc == LP_OK)
        rc = LP_EIO;
    if (rc == LP_OK)
        rc = write_theta(theta_out, th, o.d, &o);
    lp_dataset_free(ds);
    free(th);
    return rc == LP_OK
               ? 0
               : fail("simulate", rc,
                      "simulation failed (check eps > 0, alpha in [0,0.5], backdoor-k < d)");
}

/* ---- evaluate --------------------------------------------------------- */

static int cmd_evaluate(int argc, char **argv)
{
    const char *model = NULL, *truth = NULL, *data = NULL, *link = NULL;
    int pairs = 20000, prompts = 2000, K = 4;
    double beta = NAN;
    uint64_t seed = 1;
    feat_cli fc;
    feat_cli_init(&fc);
    const opt t[] = {
        {"model", "MODEL.json", "the fitted model", O_STR, &model},
        {"truth", "THETA.json", "theta* from simulate: accuracy, cosine, norm ratio, subopt", O_STR,
         &truth},
        {"data", "FILE", "labelled data: held-out accuracy", O_STR, &data},
        {"pairs", "N", "fresh pairs for accuracy (default 20000)", O_INT, &pairs},
        {"prompts", "N", "fresh prompts for suboptimality (default 2000)", O_INT, &prompts},
        {"K", "K", "candidates per prompt (default 4)", O_INT, &K},
        {"beta", "B", "policy temperature (default: the model's)", O_DBL, &beta},
        {"link", "L", "chimix|kl (default: the model's)", O_STR, &link},
        {"seed", "S", "seed of the fresh draws (default 1)", O_U64, &seed},
        {NULL, NULL, NULL, O_STR, NULL}};
    int p = parse_opts(argc, argv, t, "evaluate",
                       "--model MODEL.json (--truth THETA.json | --data FILE)");
    if (p)
        return p == 1 ? 0 : 2;
    if (!model || (!truth && !data) || pairs < 0 || prompts < 0 || K < 2) {
        fprintf(stderr, "ldpref-train evaluate: need --model and --truth or --data\n");
        return 2;
    }
    char msg[512] = "";
    lp_model *m = NULL, *ts = NULL;
    int rc = lp_model_read(model, &m, msg, sizeof msg);
    if (rc != LP_OK)
        return fail("evaluate", rc, msg);
    json_t *outj = json_object();
    if (truth) {
        rc = lp_model_read(truth, &ts, msg, sizeof msg);
        if (rc == LP_OK && ts->d != m->d)
            rc = lp_fail(LP_EINVALID_ARGUMENT, msg, sizeof msg,
                         "theta* has %zu values, the model %zu", ts->d, m->d);
        if (rc == LP_OK) {
            lp_eval_opts eo;
            lp_eval_opts_init(&eo);
            eo.pairs = (size_t)pairs;
            eo.prompts = (size_t)prompts;
            eo.K = K;
            eo.beta = isnan(beta) ? m->beta : beta;
            eo.link = link ? (strcmp(link, "kl") == 0 ? LP_LINK_KL : LP_LINK_CHIMIX) : m->link;
            eo.seed = seed;
            lp_eval_result r;
            rc = lp_evaluate_truth(m->theta, ts->theta, m->d, &eo, &r);
            if (rc == LP_OK) {
                json_object_set_new(outj, "accuracy", json_real(r.accuracy));
                json_object_set_new(outj, "cosine", json_real(r.cosine));
                json_object_set_new(outj, "norm_ratio", json_real(r.norm_ratio));
                json_object_set_new(outj, "suboptimality", json_real(r.suboptimality));
                json_object_set_new(outj, "J_star", json_real(r.j_star));
                json_object_set_new(outj, "J_hat", json_real(r.j_hat));
                json_object_set_new(outj, "beta", json_real(eo.beta));
                json_object_set_new(outj, "K", json_integer(K));
            }
        }
    }
    if (rc == LP_OK && data) {
        lp_feat_spec fs = m->feat;
        lp_featurizer *fz = m->text ? lp_featurizer_new(&fs) : NULL;
        lp_load_opts lo = {.fz = fz, .prefer_f32 = 0};
        lp_dataset *ds = NULL;
        rc = lp_dataset_load(data, &lo, &ds, NULL, msg, sizeof msg);
        if (rc == LP_OK && ds->d != m->d)
            rc = lp_fail(LP_EINVALID_ARGUMENT, msg, sizeof msg,
                         "data has %zu features, the model %zu", ds->d, m->d);
        if (rc == LP_OK) {
            json_object_set_new(outj, "heldout_accuracy",
                                json_real(lp_evaluate_accuracy(ds, m->theta)));
            json_object_set_new(outj, "n", json_integer((json_int_t)ds->n));
        }
        lp_dataset_free(ds);
        lp_featurizer_free(fz);
    }
    if (rc == LP_OK) {
        json_dumpf(outj, stdout, JSON_PRESERVE_ORDER | JSON_REAL_PRECISION(10));
        putchar('\n');
    }
    json_decref(outj);
    lp_model_free(m);
    lp_model_free(ts);
    return rc == LP_OK ? 0 : fail("evaluate", rc, msg);
}

/* ---- score ------------------------------------------------------------ */

/* "lower" (confidence.h) and "pessimistic" (the link's policy over the
 * lower bounds) of K candidates, added to res. */
static int score_pessimism(const lp_conf *conf, const lp_sparse *f, const double *r,
                           const double *lref, size_t K, double beta, lp_link_kind link,
                           double gamma, json_t *res)
{
    double *lo = calloc(2 * K, sizeof *lo), *pi = lo + K;
    int rc = lo ? lp_conf_lower(conf, f, r, lref, K, gamma, lo, NULL) : LP_ENO_MEMORY;
    if (rc == LP_OK)
        rc = lp_policy_probs(link, lo, lref, K, beta, pi, NULL, NULL);
    json_t *la = json_array(), *pa = json_array();
    for (size_t k = 0; rc == LP_OK && k < K; k++) {
        json_array_append_new(la, json_real(lo[k]));
        json_array_append_new(pa, json_real(pi[k]));
    }
    json_object_set_new(res, "gamma", json_real(gamma));
    json_object_set_new(res, "lower", la);
    json_object_set_new(res, "pessimistic", pa);
    free(lo);
    return rc;
}

/* With pessimism (conf non-NULL), each candidate's lower bound at gamma and
 * the pessimistic policy (the same link over the bounds) are added. */
static int score_line(const lp_model *m, lp_featurizer *fz, json_t *o, double beta,
                      lp_link_kind link, const lp_conf *conf, double gamma, char *msg,
                      size_t msglen)
{
    const json_t *feats = json_object_get(o, "features");
    const json_t *resp = json_object_get(o, "responses");
    const json_t *arr = feats ? feats : resp;
    if (arr == NULL || !json_is_array(arr) || json_array_size(arr) == 0 ||
        json_array_size(arr) > LP_POLICY_MAX_K)
        return lp_fail(LP_EMISSING_FIELD, msg, msglen,
                       "need \"features\" (arrays of numbers) or \"responses\" (strings)");
    size_t K = json_array_size(arr);
    double *r = calloc(3 * K, sizeof *r), *pi = r + K, *lref = r + 2 * K;
    if (r == NULL)
        return lp_fail(LP_ENO_MEMORY, msg, msglen, "out of memory");
    int rc = LP_OK;
    const char *prompt = NULL;
    if (resp && !feats) {
        const json_t *pj = json_object_get(o, "prompt");
        prompt = pj && json_is_string(pj) ? json_string_value(pj) : "";
        if (fz == NULL)
            rc = lp_fail(LP_EWRONG_TYPE, msg, msglen, "the model has dense features");
    }
    /* a general model keeps every candidate's features for its mixture,
     * pessimism for the bounds */
    int keep = m->general != NULL || conf != NULL;
    lp_sparse *sv = calloc(keep ? K : 1, sizeof *sv);
    if (sv == NULL)
        rc = lp_fail(LP_ENO_MEMORY, msg, msglen, "out of memory");
    for (size_t k = 0; k < K && rc == LP_OK; k++) {
        const json_t *v = json_array_get(arr, k);
        lp_sparse *fk = &sv[keep ? k : 0];
        if (feats) {
            if (!json_is_array(v) || json_array_size(v) != m->d) {
                rc = lp_fail(LP_EWRONG_TYPE, msg, msglen, "features[%zu] must have %zu numbers", k,
                             m->d);
                break;
            }
            double *x = calloc(m->d, sizeof *x);
            for (size_t j = 0; x && j < m->d; j++) {
                const json_t *xj = json_array_get(v, j);
                if (!json_is_number(xj) || !isfinite(json_number_value(xj))) {
                    rc = lp_fail(LP_EWRONG_TYPE, msg, msglen, "features[%zu][%zu] is not a number",
                                 k, j);
                    break;
                }
                x[j] = json_number_value(xj);
            }
            if (x == NULL || (rc == LP_OK && lp_gp_dense_features(x, m->d, fk) != LP_OK))
                rc = lp_fail(LP_ENO_MEMORY, msg, msglen, "out of memory");
            free(x);
        } else {
            if (!json_is_string(v)) {
                rc = lp_fail(LP_EWRONG_TYPE, msg, msglen, "responses[%zu] must be a string", k);
                break;
            }
            rc = lp_featurize(fz, prompt, json_string_value(v), fk);
        }
        for (size_t t = 0; rc == LP_OK && t < fk->nnz; t++)
            r[k] += m->theta[fk->idx[t]] * fk->val[t];
    }
    const json_t *lr = json_object_get(o, "ref_logprobs");
    if (rc == LP_OK && lr != NULL) {
        if (!json_is_array(lr) || json_array_size(lr) != K)
            rc = lp_fail(LP_EWRONG_TYPE, msg, msglen, "ref_logprobs must have %zu numbers", K);
        for (size_t k = 0; rc == LP_OK && k < K; k++)
            lref[k] = json_number_value(json_array_get(lr, k));
    }
    double lambda = 0;
    if (rc == LP_OK && m->general != NULL) { /* no rewards: the mixture and win probabilities */
        double *win = calloc(K, sizeof *win);
        rc = win ? lp_gp_mixture(m->general, sv, lr ? lref : NULL, K, pi, win) : LP_ENO_MEMORY;
        json_t *res = json_object(), *pa = json_array(), *wa = json_array();
        for (size_t k = 0; rc == LP_OK && k < K; k++) {
            json_array_append_new(pa, json_real(pi[k]));
            json_array_append_new(wa, json_real(win[k]));
        }
        json_object_set_new(res, "rewards", json_null());
        json_object_set_new(res, "probs", pa);
        json_object_set_new(res, "win_probabilities", wa);
        if (rc == LP_OK) {
            json_dumpf(res, stdout, JSON_COMPACT | JSON_PRESERVE_ORDER | JSON_REAL_PRECISION(17));
            putchar('\n');
        } else
            lp_fail(rc, msg, msglen, "the mixture could not be computed (at most %d candidates)",
                    LP_GP_SERVE_MAX_K);
        json_decref(res);
        free(win);
    } else if (rc == LP_OK)
        rc = lp_policy_probs(link, r, lr ? lref : NULL, K, beta, pi, NULL, &lambda);
    if (rc == LP_OK && m->general == NULL) {
        json_t *res = json_object(), *ra = json_array(), *pa = json_array();
        for (size_t k = 0; k < K; k++) {
            json_array_append_new(ra, json_real(r[k]));
            json_array_append_new(pa, json_real(pi[k]));
        }
        json_object_set_new(res, "rewards", ra);
        json_object_set_new(res, "probs", pa);
        json_object_set_new(res, "lambda", json_real(lambda));
        if (conf != NULL && (rc = score_pessimism(conf, sv, r, lr ? lref : NULL, K, beta, link,
                                                  gamma, res)) != LP_OK)
            lp_fail(rc, msg, msglen, "the bounds could not be computed");
        json_dumpf(res, stdout, JSON_COMPACT | JSON_PRESERVE_ORDER | JSON_REAL_PRECISION(17));
        putchar('\n');
        json_decref(res);
    }
    for (size_t k = 0; sv && k < (keep ? K : 1); k++)
        lp_sparse_free(&sv[k]);
    free(sv);
    free(r);
    return rc;
}

static int cmd_score(int argc, char **argv)
{
    const char *model = NULL, *cand = NULL, *link = NULL;
    double beta = NAN, gamma = NAN;
    const opt t[] = {
        {"model", "MODEL.json", "the fitted model", O_STR, &model},
        {"candidates", "FILE",
         "JSONL: {\"features\": [[...], ...]} or {\"prompt\": s, \"responses\": [s, ...]}, "
         "optional \"ref_logprobs\"",
         O_STR, &cand},
        {"beta", "B", "policy temperature (default: the model's)", O_DBL, &beta},
        {"link", "L", "chimix|kl (default: the model's)", O_STR, &link},
        {"pessimism", "GAMMA",
         "add each candidate's lower confidence bound at GAMMA >= 0 (\"lower\") and the "
         "pessimistic policy (\"pessimistic\"); the model needs its confidence record",
         O_DBL, &gamma},
        {NULL, NULL, NULL, O_STR, NULL}};
    int p = parse_opts(argc, argv, t, "score", "--model MODEL.json --candidates FILE");
    if (p)
        return p == 1 ? 0 : 2;
    if (!model || !cand || (!isnan(gamma) && !(gamma >= 0 && gamma <= LP_CONF_GAMMA_MAX))) {
        fprintf(stderr, "ldpref-train score: need --model and --candidates (--pessimism: "
                        "0 <= GAMMA <= 1e6)\n");
        return 2;
    }
    char msg[512] = "";
    lp_model *m = NULL;
    lp_conf *conf = NULL;
    int rc = lp_model_read(model, &m, msg, sizeof msg);
    if (rc == LP_OK && !isnan(gamma) && (m->confidence == NULL || m->general != NULL))
        rc = lp_fail(LP_ENO_CONFIDENCE, msg, sizeof msg,
                     "%s has no confidence record (refit it with this version)", model);
    else if (rc == LP_OK && !isnan(gamma))
        rc = lp_conf_prepare(m->confidence, m->d, &conf, msg, sizeof msg);
    if (rc != LP_OK) {
        lp_model_free(m);
        return fail("score", rc, msg);
    }
    lp_featurizer *fz = m->text ? lp_featurizer_new(&m->feat) : NULL;
    FILE *f = strcmp(cand, "-") == 0 ? stdin : fopen(cand, "r");
    if (f == NULL) {
        lp_model_free(m);
        lp_conf_free(conf);
        lp_featurizer_free(fz);
        return fail("score", LP_EIO, cand);
    }
    char *line = NULL, m2[LP_MSG_MAX];
    size_t cap = 0, lineno = 0;
    lp_link_kind lk = link ? (strcmp(link, "kl") == 0 ? LP_LINK_KL : LP_LINK_CHIMIX) : m->link;
    while (rc == LP_OK && getline(&line, &cap, f) >= 0) {
        lineno++;
        json_error_t err;
        json_t *o = json_loads(line, 0, &err);
        if (o == NULL || !json_is_object(o))
            rc = lp_fail(LP_EMALFORMED_JSON, msg, sizeof msg, "line %zu: %s", lineno,
                         o ? "not an object" : err.text);
        else if ((rc = score_line(m, fz, o, isnan(beta) ? m->beta : beta, lk, conf, gamma, m2,
                                  sizeof m2)))
            lp_fail(rc, msg, sizeof msg, "line %zu: %s", lineno, m2);
        json_decref(o);
    }
    free(line);
    if (f != stdin)
        fclose(f);
    lp_featurizer_free(fz);
    lp_conf_free(conf);
    lp_model_free(m);
    return rc == LP_OK ? 0 : fail("score", rc, msg);
}

/* ---- cv --------------------------------------------------------------- */

/* Splits a comma list into up to max items (in place). */
static int split_list(char *s, char **items, int max)
{
    int n = 0;
    for (char *tok = strtok(s, ","); tok && n < max; tok = strtok(NULL, ","))
        items[n++] = tok;
    return n;
}

/*
 * k-fold cross-validation of several losses under simulated privatisation
 * and corruption of the *training* labels. Pairs are randomly oriented
 * (a1 is the human-chosen response with probability 1/2, as the server
 * randomises positions), the clean label y is the human choice, and the
 * test metric is the fraction of held-out pairs where the model prefers
 * the human-chosen response (ties 1/2). Each cell averages folds x seeds.
 */
static int cmd_cv(int argc, char **argv)
{
    fit_cli c;
    fit_cli_init(&c);
    c.loss = "square-chipo";
    c.progress = 0;
    c.l2 = "1";
    const char *losses_s = "square-chipo,chipo,rdpo", *eps_s = "1,inf", *alpha_s = "0,0.1",
               *orders_s = "CTL,LTC", *adv = "flip";
    int folds = 5, seeds = 3;
    uint64_t seed0 = 0;
    const opt t[] = {
        {"data", "FILE", "labelled pairs (text or dense JSONL)", O_STR, &c.data},
        {"losses", "LIST", "comma list (default square-chipo,chipo,rdpo)", O_STR, &losses_s},
        {"eps", "LIST", "RR budgets, inf = none (default 1,inf)", O_STR, &eps_s},
        {"alpha", "LIST", "Huber rates (default 0,0.1)", O_STR, &alpha_s},
        {"orders", "LIST", "CTL,LTC (default both)", O_STR, &orders_s},
        {"adversary", "S", "corruption strategy (default flip)", O_STR, &adv},
        {"folds", "K", "folds (default 5)", O_INT, &folds},
        {"seeds", "S", "RR/corruption repetitions per fold (default 3)", O_INT, &seeds},
        {"seed", "S", "base seed (default 0)", O_U64, &seed0},
        {"l2", "L",
         "L2 weight (default 1); auto: chosen by an inner cross-validation on each "
         "training fold",
         O_STR, &c.l2},
        {"rmax", "R", "clip for square-chipo/chipo (default 1)", O_DBL, &c.rmax},
        {"norm-bound", "B", "norm bound (default none)", O_DBL, &c.bound},
        {"max-iter", "N", "L-BFGS iterations (default 500)", O_INT, &c.max_iter},
        {"threads", "T", "threads (default 2)", O_INT, &c.threads},
        FEAT_OPTS(c.feat),
        {NULL, NULL, NULL, O_STR, NULL}};
    int p = parse_opts(argc, argv, t, "cv", "--data FILE [options]");
    if (p)
        return p == 1 ? 0 : 2;
    c.folds = strcmp(c.l2, "auto") == 0 ? 5 : 0; /* the inner cross-validation */
    lp_adversary av;
    if (!c.data || folds < 2 || seeds < 1 || lp_adversary_parse(adv, &av)) {
        fprintf(stderr,
                "ldpref-train cv: need --data, --folds >= 2, --seeds >= 1, a known --adversary\n");
        return 2;
    }
    char lbuf[256], ebuf[256], abuf[256], obuf[64];
    snprintf(lbuf, sizeof lbuf, "%s", losses_s);
    snprintf(ebuf, sizeof ebuf, "%s", eps_s);
    snprintf(abuf, sizeof abuf, "%s", alpha_s);
    snprintf(obuf, sizeof obuf, "%s", orders_s);
    char *L[8], *E[8], *A[8], *O[2];
    int nl = split_list(lbuf, L, 8), ne = split_list(ebuf, E, 8), na = split_list(abuf, A, 8),
        no = split_list(obuf, O, 2);
    lp_feat_spec fs;
    feat_from_cli(&c.feat, &fs);
    lp_featurizer *fz = lp_featurizer_new(&fs);
    lp_load_opts lo = {.fz = fz, .prefer_f32 = 0};
    char msg[512] = "";
    lp_dataset *all = NULL;
    int rc = fz ? lp_dataset_load(c.data, &lo, &all, NULL, msg, sizeof msg) : LP_EINVALID_ARGUMENT;
    if (rc != LP_OK) {
        lp_featurizer_free(fz);
        return fail("cv", rc, msg);
    }
    openblas_set_num_threads(c.threads);
    size_t n = all->n;
    /* Orientation: y_i = 1 means a1 is the human-chosen response. */
    lp_prng g;
    lp_prng_seed(&g, seed0 ^ 0x6f7269656e74ULL);
    int *fold_of = NULL;
    int8_t *human = malloc(n);
    size_t *perm = malloc(n * sizeof *perm), *tr = malloc(n * sizeof *tr),
           *te = malloc(n * sizeof *te);
    if (!human || !perm || !tr || !te) {
        rc = LP_ENO_MEMORY;
        goto out;
    }
    for (size_t i = 0; i < n; i++) {
        int h = all->z[i]; /* the file's preference */
        if (lp_prng_bernoulli(&g, 0.5)) {
            /* swap a0/a1: negate the difference row */
            if (all->storage == LP_STORE_CSR)
                for (size_t k = all->rowptr[i]; k < all->rowptr[i + 1]; k++)
                    all->val[k] = -all->val[k];
            else
                for (size_t j = 0; j < all->d; j++)
                    all->xd[i * all->d + j] = -all->xd[i * all->d + j];
            h = 1 - h;
        }
        human[i] = (int8_t)h;
        perm[i] = i;
    }
    /* Folds split by prompt (group key), never inside a prompt's ranking:
     * pairs of one prompt share responses, which would leak across folds.
     * Each group goes to fold (position of its first pair in a seeded
     * shuffle) mod k. */
    for (size_t i = n; i > 1; i--) {
        size_t j = (size_t)lp_prng_below(&g, i), tmp = perm[i - 1];
        perm[i - 1] = perm[j];
        perm[j] = tmp;
    }
    fold_of = malloc(n * sizeof *fold_of);
    if (fold_of == NULL) {
        rc = LP_ENO_MEMORY;
        goto out;
    }
    {
        size_t ngroups = 0;
        for (size_t r = 0; r < n; r++) {
            size_t i = perm[r];
            fold_of[i] = -1;
            for (size_t q = 0; q < r && all->group; q++) /* n is small (cv is for small sets) */
                if (all->group[perm[q]] == all->group[i] && all->group[i] != 0) {
                    fold_of[i] = fold_of[perm[q]];
                    break;
                }
            if (fold_of[i] < 0)
                fold_of[i] = (int)(ngroups++ % (size_t)folds);
        }
    }
    printf(
        "| loss | eps | alpha | order | held-out accuracy (mean ± sd over %d folds × %d seeds) |\n"
        "|---|---|---|---|---|\n",
        folds, seeds);
    for (int li = 0; li < nl && rc == LP_OK; li++)
        for (int ei = 0; ei < ne && rc == LP_OK; ei++)
            for (int ai = 0; ai < na && rc == LP_OK; ai++)
                for (int oi = 0; oi < no && rc == LP_OK; oi++) {
                    int ok = 1;
                    double eps = parse_double(E[ei], &ok), alpha = parse_double(A[ai], &ok);
                    lp_order ord;
                    if (!ok || lp_order_parse(O[oi], &ord) || !(eps > 0) || alpha < 0 ||
                        alpha > 0.5) {
                        rc = lp_fail(LP_EINVALID_ARGUMENT, msg, sizeof msg, "bad grid value");
                        break;
                    }
                    double s1 = 0, s2 = 0;
                    int cnt = 0;
                    for (int f = 0; f < folds && rc == LP_OK; f++) {
                        size_t ntr = 0, nte = 0;
                        for (size_t r = 0; r < n; r++) {
                            size_t i = perm[r];
                            if (fold_of[i] == f)
                                te[nte++] = i;
                            else
                                tr[ntr++] = i;
                        }
                        for (int s = 0; s < seeds && rc == LP_OK; s++) {
                            lp_dataset *dtr = lp_dataset_subset(all, tr, ntr);
                            lp_dataset *dte = lp_dataset_subset(all, te, nte);
                            if (!dtr || !dte) {
                                lp_dataset_free(dtr);
                                lp_dataset_free(dte);
                                rc = LP_ENO_MEMORY;
                                break;
                            }
                            /* The same noise for every loss and order: the
                             * stream depends on (seed, fold, s) only. */
                            lp_prng_seed(&g,
                                         seed0 * 1000003ULL + (uint64_t)f * 1009ULL + (uint64_t)s);
                            for (size_t k = 0; k < ntr; k++) {
                                int y = human[tr[k]];
                                lp_adv_view v = {.truth = y, .backdoor = 0};
                                dtr->z[k] =
                                    (uint8_t)lp_corrupt_label(&g, y, eps, alpha, ord, av, &v);
                                dtr->eps[k] = eps;
                            }
                            for (size_t k = 0; k < nte; k++) {
                                dte->z[k] = (uint8_t)human[te[k]];
                                dte->eps[k] = INFINITY;
                            }
                            c.loss = L[li];
                            lp_model *m = NULL;
                            rc = run_fit(&c, dtr, &m, msg, sizeof msg);
                            if (rc == LP_OK) {
                                double acc = lp_evaluate_accuracy(dte, m->theta);
                                s1 += acc;
                                s2 += acc * acc;
                                cnt++;
                            }
                            lp_model_free(m);
                            lp_dataset_free(dtr);
                            lp_dataset_free(dte);
                        }
                    }
                    if (rc != LP_OK)
                        break;
                    double mean = s1 / cnt, var = s2 / cnt - mean * mean;
                    printf("| %s | %s | %s | %s | %.3f ± %.3f |\n", L[li], E[ei], A[ai],
                           isinf(eps) && alpha == 0 ? "–" : lp_order_name(ord), mean,
                           sqrt(var > 0 ? var : 0));
                    fflush(stdout);
                }
out:
    free(fold_of);
    free(human);
    free(perm);
    free(tr);
    free(te);
    lp_dataset_free(all);
    lp_featurizer_free(fz);
    return rc == LP_OK ? 0 : fail("cv", rc, msg);
}

/* ---- sweep ------------------------------------------------------------ */

static int sweep_sink(void *ctx, const lp_sweep_row *row)
{
    FILE *f = ctx;
    int rc = lp_sweep_row_write(f, row);
    fflush(f);
    return rc;
}

/* Runs a grid of simulate/fit/evaluate (sweep.h) and writes JSONL rows. */
static int cmd_sweep(int argc, char **argv)
{
    lp_sweep_opts o;
    lp_sweep_opts_init(&o);
    o.progress = isatty(2);
    const char *grid = "default", *block = NULL, *out = "-";
    int d = (int)o.d, bk = 0, pairs = (int)o.eval_pairs, prompts = (int)o.eval_prompts, dry = 0;
    const opt t[] = {
        {"grid", "NAME", "built-in grid: default (the study) or quick (make test)", O_STR, &grid},
        {"block", "SPEC",
         "one custom block instead: "
         "NAME:n=..;eps=..;alpha=..;order=..;adv=..;loss=..[;theta=..;bound=..;features=unit]",
         O_STR, &block},
        {"out", "FILE", "JSONL, one line per (setting, seed, loss) (default stdout)", O_STR, &out},
        {"seeds", "S", "seeds per setting (default 5)", O_INT, &o.seeds},
        {"seed", "S", "base seed (default 0)", O_U64, &o.seed},
        {"jobs", "J", "worker threads; results do not depend on it (default 2)", O_INT, &o.jobs},
        {"d", "D", "feature dimension (default 16)", O_INT, &d},
        {"margin-sd", "S", "sd of the true margin (default 2)", O_DBL, &o.margin_sd},
        {"backdoor-k", "K", "backdoor feature (default 0)", O_INT, &bk},
        {"rmax", "R", "clip margins at 2R (default 3)", O_DBL, &o.rmax},
        {"l2", "L", "L2 weight (default 0)", O_DBL, &o.l2},
        {"bound-ratio", "R", "norm bound B = R |theta*| (default 3; inf: none)", O_DBL,
         &o.bound_ratio},
        {"max-iter", "N", "L-BFGS iterations (default 500)", O_INT, &o.max_iter},
        {"K", "K", "candidates per evaluation prompt (default 4)", O_INT, &o.K},
        {"beta", "B", "policy temperature (default 1)", O_DBL, &o.beta},
        {"pairs", "N", "fresh pairs for accuracy (default 20000)", O_INT, &pairs},
        {"prompts", "N", "fresh prompts for suboptimality (default 4000)", O_INT, &prompts},
        {"progress", NULL, "progress lines on stderr even when not a terminal", O_FLAG,
         &o.progress},
        {"count", NULL, "print the number of rows the grid would produce and exit", O_FLAG, &dry},
        {NULL, NULL, NULL, O_STR, NULL}};
    int p =
        parse_opts(argc, argv, t, "sweep", "[--grid NAME | --block SPEC] [--out FILE] [options]");
    if (p)
        return p == 1 ? 0 : 2;
    char msg[512] = "";
    lp_sweep_grid g;
    memset(&g, 0, sizeof g);
    int rc = LP_OK;
    if (block) {
        g.nblocks = 1;
        rc = lp_sweep_block_parse(block, &g.block[0], msg, sizeof msg);
    } else if (lp_sweep_grid_named(grid, &g) != LP_OK) {
        rc = lp_fail(LP_EINVALID_ARGUMENT, msg, sizeof msg, "unknown grid '%s'", grid);
    }
    if (rc != LP_OK || d < 1 || bk < 0 || pairs < 1 || prompts < 1) {
        fprintf(stderr, "ldpref-train sweep: %s\n", *msg ? msg : "need d, pairs, prompts >= 1");
        return 2;
    }
    o.d = (size_t)d;
    o.backdoor_k = (size_t)bk;
    o.eval_pairs = (size_t)pairs;
    o.eval_prompts = (size_t)prompts;
    if (dry) {
        printf("%zu\n", lp_sweep_rows(&g, &o));
        return 0;
    }
    openblas_set_num_threads(1);
    FILE *f = strcmp(out, "-") == 0 ? stdout : fopen(out, "w");
    if (f == NULL)
        return fail("sweep", LP_EIO, out);
    rc = lp_sweep_run(&g, &o, sweep_sink, f, msg, sizeof msg);
    if (f != stdout && fclose(f) != 0 && rc == LP_OK)
        rc = lp_fail(LP_EIO, msg, sizeof msg, "cannot write %s", out);
    return rc == LP_OK ? 0 : fail("sweep", rc, msg);
}

/* The pessimism block's verdict on stdout. */
static int print_pessimism_verdict(const char *path, char *msg, size_t msglen)
{
    lp_pstudy ps;
    lp_study_verdict v;
    int rc = lp_pstudy_load(path, &ps, msg, msglen);
    if (rc == LP_OK) {
        lp_pstudy_verdict(&ps, &v);
        printf("pessimism: %s: %s\n", lp_verdict_name(v.level), v.text);
        lp_pstudy_clear(&ps);
    }
    return rc;
}

/* The pessimistic-scores study block (pessimismstudy.h). */
static int cmd_pessimism_study(int argc, char **argv)
{
    const char *grid = "full", *out = NULL;
    int seeds = 0, progress = 0, first = 0;
    const opt t[] = {
        {"grid", "NAME", "full (the study) or quick", O_STR, &grid},
        {"seeds", "S", "seeds (default: the grid's)", O_INT, &seeds},
        {"first-seed", "S",
         "the first seed (default 0; the default Gamma was calibrated on "
         "seeds from 1000)",
         O_INT, &first},
        {"out", "FILE.jsonl", "one JSON row per (eps, seed), every Gamma of the grid", O_STR, &out},
        {"progress", NULL, "progress on stderr", O_FLAG, &progress},
        {NULL, NULL, NULL, O_STR, NULL}};
    int p = parse_opts(argc, argv, t, "pessimism-study", "--out FILE.jsonl [--grid NAME]");
    if (p)
        return p == 1 ? 0 : 2;
    lp_pstudy_grid g;
    if (out == NULL || lp_pstudy_grid_named(grid, &g) != LP_OK || seeds < 0 || first < 0) {
        fprintf(stderr, "ldpref-train pessimism-study: need --out and --grid full|quick\n");
        return 2;
    }
    if (seeds > 0)
        g.seeds = seeds;
    g.first_seed = first;
    FILE *f = fopen(out, "w");
    if (f == NULL)
        return fail("pessimism-study", LP_EIO, out);
    char msg[512] = "";
    int rc = lp_pstudy_run(&g, f, progress, msg, sizeof msg);
    if (fclose(f) != 0 && rc == LP_OK)
        rc = lp_fail(LP_EIO, msg, sizeof msg, "cannot write %s", out);
    return rc == LP_OK ? 0 : fail("pessimism-study", rc, msg);
}

/* The user-level block's verdict on stdout (the report checked the file). */
static void print_userlevel_verdict(const char *path)
{
    lp_ul_study us;
    lp_study_verdict v;
    char msg[256];
    if (lp_ul_load(path, &us, msg, sizeof msg) == LP_OK) {
        lp_ul_verdict(&us, &v);
        printf("userlevel: %s: %s\n", lp_verdict_name(v.level), v.text);
        lp_ul_clear(&us);
    }
}

/* Writes the study report (study.h) for a sweep's JSONL. */
/* The central-model block's verdicts on stdout (centralstudy.h). */
static int print_central_verdicts(const char *path, char *msg, size_t msglen)
{
    lp_cstudy cs;
    lp_study_verdict v;
    int rc = lp_cstudy_load(path, &cs, msg, msglen);
    if (rc != LP_OK)
        return rc;
    lp_cstudy_verdict_excess(&cs, &v);
    printf("central-excess: %s: %s\n", lp_verdict_name(v.level), v.text);
    lp_cstudy_verdict_match(&cs, &v);
    printf("central-local: %s: %s\n", lp_verdict_name(v.level), v.text);
    lp_cstudy_clear(&cs);
    return LP_OK;
}

static int cmd_report(int argc, char **argv)
{
    lp_study_report_opts ro = {.sweep_seconds = NAN, .total_seconds = NAN};
    const char *in = NULL;
    const opt t[] = {
        {"in", "FILE", "the sweep's JSONL", O_STR, &in},
        {"dir", "DIR", "output directory: README.md and gp/*.gp (run gnuplot from DIR)", O_STR,
         &ro.dir},
        {"name", "TEXT", "how the report refers to the JSONL (default: --in)", O_STR,
         &ro.sweep_name},
        {"cv-table", "FILE", "Markdown table from `ldpref-train cv` to include", O_STR,
         &ro.cv_table},
        {"command", "TEXT", "the command that produced the run", O_STR, &ro.command},
        {"sweep-seconds", "S", "wall time of the sweep", O_DBL, &ro.sweep_seconds},
        {"total-seconds", "S", "wall time of the whole reproduction", O_DBL, &ro.total_seconds},
        {"machine", "TEXT", "a sentence about the machine and its load", O_STR, &ro.machine},
        {"compare", "FILE", "verdicts.json of the full report: say whether each verdict agrees",
         O_STR, &ro.compare},
        {"general", "FILE", "JSONL of `ldpref-train general-study` to include", O_STR, &ro.general},
        {"userlevel", "FILE", "JSONL of `ldpref-train userlevel-study` to include", O_STR,
         &ro.userlevel},
        {"central", "FILE", "JSONL of `ldpref-train central-study` to include", O_STR, &ro.central},
        {"pessimism", "FILE", "JSONL of `ldpref-train pessimism-study` to include", O_STR,
         &ro.pessimism},
        {NULL, NULL, NULL, O_STR, NULL}};
    int p = parse_opts(argc, argv, t, "report", "--in FILE.jsonl --dir DIR [options]");
    if (p)
        return p == 1 ? 0 : 2;
    if (!in || !ro.dir) {
        fprintf(stderr, "ldpref-train report: need --in and --dir\n");
        return 2;
    }
    if (ro.sweep_name == NULL)
        ro.sweep_name = in;
    char msg[512] = "";
    lp_study *s = NULL;
    int rc = lp_study_load(in, &s, msg, sizeof msg);
    if (rc == LP_OK)
        rc = lp_study_report(s, &ro, msg, sizeof msg);
    if (rc == LP_OK) {
        lp_study_verdict v;
        void (*claims[4])(const lp_study *, lp_study_verdict *) = {
            lp_study_claim1, lp_study_claim2, lp_study_claim3, lp_study_claim4};
        for (int i = 0; i < 4; i++) {
            claims[i](s, &v);
            printf("claim %d: %s\n", i + 1, v.text);
        }
    }
    if (rc == LP_OK && ro.general != NULL) {
        lp_gstudy gs;
        lp_study_verdict v;
        if ((rc = lp_gstudy_load(ro.general, &gs, msg, sizeof msg)) == LP_OK) {
            lp_gstudy_verdict(&gs, &v);
            printf("general: %s: %s\n", lp_verdict_name(v.level), v.text);
            lp_gstudy_clear(&gs);
        }
    }
    if (rc == LP_OK && ro.userlevel != NULL)
        print_userlevel_verdict(ro.userlevel);
    if (rc == LP_OK && ro.central != NULL)
        rc = print_central_verdicts(ro.central, msg, sizeof msg);
    if (rc == LP_OK && ro.pessimism != NULL)
        rc = print_pessimism_verdict(ro.pessimism, msg, sizeof msg);
    lp_study_free(s);
    return rc == LP_OK ? 0 : fail("report", rc, msg);
}

/* The user-level study block (userlevelstudy.h). */
static int cmd_userlevel_study(int argc, char **argv)
{
    const char *grid = "default", *out = NULL;
    int seeds = 0, progress = 0;
    const opt t[] = {
        {"grid", "NAME", "default (the full study) or quick", O_STR, &grid},
        {"seeds", "S", "seeds (default: the grid's)", O_INT, &seeds},
        {"out", "FILE.jsonl", "one JSON row per (part, eps, m, n, seed, method)", O_STR, &out},
        {"progress", NULL, "progress on stderr", O_FLAG, &progress},
        {NULL, NULL, NULL, O_STR, NULL}};
    int p = parse_opts(argc, argv, t, "userlevel-study", "--out FILE.jsonl [--grid NAME]");
    if (p)
        return p == 1 ? 0 : 2;
    lp_ul_grid g;
    if (out == NULL || lp_ul_grid_named(grid, &g) != LP_OK || seeds < 0) {
        fprintf(stderr, "ldpref-train userlevel-study: need --out and --grid default|quick\n");
        return 2;
    }
    if (seeds > 0)
        g.seeds = seeds;
    FILE *f = fopen(out, "w");
    if (f == NULL)
        return fail("userlevel-study", LP_EIO, out);
    char msg[512] = "";
    int rc = lp_ul_run(&g, f, progress, msg, sizeof msg);
    if (fclose(f) != 0 && rc == LP_OK)
        rc = lp_fail(LP_EIO, msg, sizeof msg, "cannot write %s", out);
    return rc == LP_OK ? 0 : fail("userlevel-study", rc, msg);
}

/* The general-preference study block (gstudy.h). */
static int cmd_general_study(int argc, char **argv)
{
    const char *grid = "default", *out = NULL;
    int seeds = 0, progress = 0, rounds = 0;
    double beta = 0, eta = 0;
    const opt t[] = {
        {"grid", "NAME", "default (the full study) or quick", O_STR, &grid},
        {"rounds", "T", "self-play rounds (default 100)", O_INT, &rounds},
        {"beta", "B", "both methods' policy regularization (default 0.05)", O_DBL, &beta},
        {"eta", "E", "mirror-descent step (default 0.5)", O_DBL, &eta},
        {"seeds", "S", "seeds (default: the grid's)", O_INT, &seeds},
        {"out", "FILE.jsonl", "one JSON row per (S, eps, seed, method)", O_STR, &out},
        {"progress", NULL, "progress on stderr", O_FLAG, &progress},
        {NULL, NULL, NULL, O_STR, NULL}};
    int p = parse_opts(argc, argv, t, "general-study", "--out FILE.jsonl [--grid NAME]");
    if (p)
        return p == 1 ? 0 : 2;
    lp_gstudy_grid g;
    if (out == NULL || lp_gstudy_grid_named(grid, &g) != LP_OK || seeds < 0 || rounds < 0 ||
        rounds > LP_GP_MAX_ROUNDS || !(beta >= 0) || !(eta >= 0) || isinf(beta) || isinf(eta)) {
        fprintf(stderr, "ldpref-train general-study: need --out and --grid default|quick\n");
        return 2;
    }
    if (seeds > 0)
        g.seeds = seeds;
    if (rounds > 0)
        g.rounds = rounds;
    g.beta = beta;
    g.eta = eta;
    FILE *f = fopen(out, "w");
    if (f == NULL)
        return fail("general-study", LP_EIO, out);
    char msg[512] = "";
    int rc = lp_gstudy_run(&g, f, progress, msg, sizeof msg);
    if (fclose(f) != 0 && rc == LP_OK)
        rc = lp_fail(LP_EIO, msg, sizeof msg, "cannot write %s", out);
    return rc == LP_OK ? 0 : fail("general-study", rc, msg);
}

/* The central-model study block (centralstudy.h). */
static int cmd_central_study(int argc, char **argv)
{
    const char *grid = "default", *out = NULL;
    int seeds = 0, progress = 0;
    const opt t[] = {{"grid", "NAME", "default (the full study) or quick", O_STR, &grid},
                     {"seeds", "S", "seeds (default: the grid's)", O_INT, &seeds},
                     {"out", "FILE.jsonl", "one JSON row per cell and seed", O_STR, &out},
                     {"progress", NULL, "progress on stderr", O_FLAG, &progress},
                     {NULL, NULL, NULL, O_STR, NULL}};
    int p = parse_opts(argc, argv, t, "central-study", "--out FILE.jsonl [--grid NAME]");
    if (p)
        return p == 1 ? 0 : 2;
    lp_cstudy_grid g;
    if (out == NULL || lp_cstudy_grid_named(grid, &g) != LP_OK || seeds < 0) {
        fprintf(stderr, "ldpref-train central-study: need --out and --grid default|quick\n");
        return 2;
    }
    if (seeds > 0)
        g.seeds = seeds;
    openblas_set_num_threads(1);
    FILE *f = fopen(out, "w");
    if (f == NULL)
        return fail("central-study", LP_EIO, out);
    char msg[512] = "";
    int rc = lp_cstudy_run(&g, f, progress, msg, sizeof msg);
    if (fclose(f) != 0 && rc == LP_OK)
        rc = lp_fail(LP_EIO, msg, sizeof msg, "cannot write %s", out);
    return rc == LP_OK ? 0 : fail("central-study", rc, msg);
}

/* ---- main ------------------------------------------------------------- */

static void usage(FILE *f)
{
    fprintf(f, "usage: ldpref-train COMMAND [options]   (ldpref-train COMMAND --help)\n\n"
               "commands:\n"
               "  fit       fit a model: --data FILE --out MODEL.json [--loss NAME]\n"
               "  simulate  synthetic Bradley-Terry labels with RR and corruption (research)\n"
               "  evaluate  a model against theta* (simulation) or labelled data\n"
               "  score     rewards and policy probabilities over candidate sets\n"
               "  cv        k-fold table: losses x eps x alpha x order on one data set\n"
               "  sweep     simulate/fit/evaluate over a grid of settings and seeds, JSONL rows\n"
               "  report    the study report (Markdown, gnuplot scripts) from a sweep's JSONL\n"
               "  general-study  duality gaps of Algorithm 3 vs Square chi-PO on cyclic data\n"
               "  userlevel-study  error vs m at fixed n*m: RR at eps/m vs AUP-RLHF, JSONL rows\n"
               "  central-study  the exponential mechanism's excess loss; central vs local\n"
               "  pessimism-study  pessimistic vs greedy choice, coverage of the bounds\n"
               "  version   print the version\n");
}

/* The hidden --man: the manual page's records. The commands and their
 * summaries are read from usage(); each command's section is its own
 * --help, run through main in man_mode, so the page comes from the same
 * tables and dispatch as --help. */
int main(int argc, char **argv);
static int man_page(void)
{
    char *text = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&text, &len);
    if (f == NULL)
        return 1;
    usage(f);
    if (fclose(f) != 0)
        return 1;
    printf("@th\tldpref-train\tfit, evaluate and study preference models offline\n"
           "@synopsis\tldpref-train COMMAND [options]\n"
           "@synopsis\tldpref-train COMMAND --help\n"
           "@synopsis\tldpref-train --version\n"
           "@sh\tDESCRIPTION\n"
           "@tx\tThe offline side of ldpref: the server's training engine on files, the "
           "simulations and the privacy/robustness study. docs/training.md of the source tree "
           "describes the losses, data formats and the study.\n"
           "@sh\tCOMMANDS\n");
    fflush(stdout);
    man_mode = 1;
    int rc = 0;
    char *save = NULL;
    for (char *line = strtok_r(text, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
        char name[64];
        int at = 0;
        if (strncmp(line, "  ", 2) != 0 || sscanf(line, " %63s %n", name, &at) != 1)
            continue; /* not a command line of usage() */
        if (strcmp(name, "version") == 0) {
            printf("@ss\tldpref-train version, ldpref-train --version\n@tx\t%s\n", line + at);
            continue;
        }
        char prog[] = "ldpref-train", help[] = "--help", *args[] = {prog, name, help, NULL};
        man_summary = line + at;
        rc |= main(3, args);
        fflush(stdout);
    }
    printf("@sh\tEXIT STATUS\n@tx\t0 success, 1 runtime failure, 2 usage error.\n"
           "@sh\tSEE ALSO\n@tx\tldpref(1), ldpref-server(1)\n");
    free(text);
    return rc;
}

int main(int argc, char **argv)
{
    if (argc == 2 && strcmp(argv[1], "--man") == 0)
        return man_page();
    if (argc < 2) {
        usage(stderr);
        return 2;
    }
    const char *cmd = argv[1];
    if (strcmp(cmd, "--help") == 0 || strcmp(cmd, "-h") == 0 || strcmp(cmd, "help") == 0) {
        usage(stdout);
        return 0;
    }
    if (strcmp(cmd, "version") == 0 || strcmp(cmd, "--version") == 0) {
        printf("ldpref-train %s\n", LDPREF_VERSION);
        return 0;
    }
    if (strcmp(cmd, "fit") == 0)
        return cmd_fit(argc - 2, argv + 2);
    if (strcmp(cmd, "simulate") == 0)
        return cmd_simulate(argc - 2, argv + 2);
    if (strcmp(cmd, "evaluate") == 0)
        return cmd_evaluate(argc - 2, argv + 2);
    if (strcmp(cmd, "score") == 0)
        return cmd_score(argc - 2, argv + 2);
    if (strcmp(cmd, "cv") == 0)
        return cmd_cv(argc - 2, argv + 2);
    if (strcmp(cmd, "sweep") == 0)
        return cmd_sweep(argc - 2, argv + 2);
    if (strcmp(cmd, "report") == 0)
        return cmd_report(argc - 2, argv + 2);
    if (strcmp(cmd, "general-study") == 0)
        return cmd_general_study(argc - 2, argv + 2);
    if (strcmp(cmd, "userlevel-study") == 0)
        return cmd_userlevel_study(argc - 2, argv + 2);
    if (strcmp(cmd, "central-study") == 0)
        return cmd_central_study(argc - 2, argv + 2);
    if (strcmp(cmd, "pessimism-study") == 0)
        return cmd_pessimism_study(argc - 2, argv + 2);
    fprintf(stderr, "ldpref-train: unknown command '%s'\n", cmd);
    usage(stderr);
    return 2;
}
