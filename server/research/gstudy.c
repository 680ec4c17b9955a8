/* gstudy.c — the general-preference study block. See gstudy.h. */
#include "gstudy.h"

#include "error.h"
#include "general.h"
#include "intransitive.h"
#include "model.h"
#include "policy.h"
#include "wire.h"

#include <jansson.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* Rule constants (printed in the report). */
#define G_MARGIN 0.01 /* smallest gap difference that counts */
#define G_AGREE 0.9   /* transitive data: the most probable responses agree this often */

/* The named grids: the cycle strengths and eps values, seeds, training
 * prompts, labels and evaluation prompts. */
static const struct {
    const char *name;
    double cycle[LP_GSTUDY_MAX_VALUES], eps[LP_GSTUDY_MAX_VALUES];
    int ncycle, neps, seeds;
    size_t prompts, labels, eval_prompts;
} GRIDS[] = {
    {"quick", {0, 4}, {1, INFINITY}, 2, 2, 4, 200, 4000, 200},
    {"default", {0, 1, 2, 4, 8}, {0.5, 1, 2, INFINITY}, 5, 4, 5, 500, 20000, 1000},
};

int lp_gstudy_grid_named(const char *name, lp_gstudy_grid *g)
{
    memset(g, 0, sizeof *g);
    for (size_t i = 0; i < sizeof GRIDS / sizeof GRIDS[0]; i++) {
        if (strcmp(name, GRIDS[i].name) != 0)
            continue;
        memcpy(g->cycle, GRIDS[i].cycle, sizeof g->cycle);
        memcpy(g->eps, GRIDS[i].eps, sizeof g->eps);
        g->ncycle = GRIDS[i].ncycle;
        g->neps = GRIDS[i].neps;
        g->seeds = GRIDS[i].seeds;
        g->prompts = GRIDS[i].prompts;
        g->labels = GRIDS[i].labels;
        g->eval_prompts = GRIDS[i].eval_prompts;
        g->d = 6;
        g->K = 4;
        g->rounds = LP_GP_DEFAULT_ROUNDS;
        g->rmax = 3.0;
        return LP_OK;
    }
    return LP_EINVALID_ARGUMENT;
}

/* ---- running ---- */

static int mixture_policy(void *ctx, const double *f, size_t K, size_t d, double *pi)
{
    const lp_gp_model *m = ctx;
    lp_sparse s[LP_GP_MAX_K];
    uint32_t idx[LP_GP_MAX_K * 8];
    if (d > 8)
        return LP_EINVALID_ARGUMENT;
    for (size_t a = 0; a < K; a++) {
        for (size_t j = 0; j < d; j++)
            idx[a * d + j] = (uint32_t)j;
        s[a] = (lp_sparse){.nnz = d, .cap = d, .idx = idx + a * d, .val = (double *)f + a * d};
    }
    return lp_gp_mixture(m, s, NULL, K, pi, NULL);
}

static double now_s(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec / 1e9;
}

static void write_row(FILE *out, const lp_gstudy_row *r)
{
    json_t *o = json_pack("{s:f, s:o, s:i, s:s, s:f, s:i, s:f, s:f, s:o, s:f, s:f}", "cycle",
                          r->cycle, "eps", lp_json_epsilon(r->eps), "seed", r->seed, "method",
                          r->general ? "general" : "square-chipo", "gap", r->gap, "rounds",
                          r->rounds, "beta", r->beta, "eta", r->eta, "cycle_share",
                          isfinite(r->cycle_share) ? json_real(r->cycle_share) : json_null(),
                          "top_agree", r->top_agree, "fit_seconds", r->fit_seconds);
    char *t = json_dumps(o, JSON_COMPACT | JSON_PRESERVE_ORDER | JSON_REAL_PRECISION(17));
    fprintf(out, "%s\n", t);
    free(t);
    json_decref(o);
}

static size_t argmax(const double *x, size_t K)
{
    size_t b = 0;
    for (size_t a = 1; a < K; a++)
        b = x[a] > x[b] ? a : b;
    return b;
}

/* Over the evaluation prompts, in one pass: each method's mean duality gap
 * under the true preference and the fraction of prompts where their most
 * probable responses agree. */
static int evaluate(const lp_gsim *t, const lp_gp_model *gm, const lp_model *bt, double *gap_g,
                    double *gap_b, double *agree)
{
    size_t K = (size_t)t->K, d = t->d, same = 0;
    double pm[LP_GP_MAX_K], pb[LP_GP_MAX_K], L[LP_GP_MAX_K * LP_GP_MAX_K];
    double sg = 0.0, sb = 0.0;
    int rc = LP_OK;
    for (size_t p = 0; p < t->prompts && rc == LP_OK; p++) {
        const double *f = t->f + p * K * d;
        for (size_t a = 0; a < K; a++)
            for (size_t b = 0; b < K; b++)
                L[a * K + b] = a == b ? 0.0 : lp_gsim_pref(t, f + a * d, f + b * d);
        rc = mixture_policy((void *)gm, f, K, d, pm);
        if (rc == LP_OK)
            rc = lp_gsim_reward_policy((void *)bt, f, K, d, pb);
        sg += lp_gp_duality_gap(L, pm, K);
        sb += lp_gp_duality_gap(L, pb, K);
        same += argmax(pm, K) == argmax(pb, K);
    }
    *gap_g = sg / (double)t->prompts;
    *gap_b = sb / (double)t->prompts;
    *agree = (double)same / (double)t->prompts;
    return rc;
}

/* One (S, eps, seed) cell: both methods on the same data and prompts. */
static int run_cell(const lp_gstudy_grid *g, double S, double eps, int seed, FILE *out)
{
    lp_gsim_opts o;
    lp_gsim_opts_init(&o);
    o.d = g->d;
    o.K = g->K;
    o.prompts = g->prompts;
    o.labels = g->labels;
    o.cycle = S;
    o.eps = eps;
    o.seed = (uint64_t)seed;
    lp_gsim *train = NULL, *eval = NULL;
    lp_gp_data *gd = NULL;
    lp_dataset *ds = NULL;
    int rc = lp_gsim_truth(&o, 0, &train);
    if (rc == LP_OK) {
        o.prompts = g->eval_prompts;
        rc = lp_gsim_truth(&o, 1, &eval);
    }
    if (rc == LP_OK)
        rc = lp_gsim_labels(&o, train, &gd, &ds);
    lp_gp_opts go;
    lp_gp_opts_init(&go);
    go.rounds = g->rounds;
    go.beta = g->beta;
    go.eta = g->eta;
    lp_gp_model *gm = NULL;
    double t0 = now_s();
    if (rc == LP_OK)
        rc = lp_gp_fit(gd, &go, &gm);
    double t1 = now_s();
    lp_model *bt = NULL;
    if (rc == LP_OK) {
        lp_objective_opts oo;
        lp_objective_opts_init(&oo, LP_LOSS_SQUARE_CHIPO);
        oo.loss.rmax = g->rmax;
        lp_fit_opts fo;
        lp_fit_opts_init(&fo, LP_OPT_LBFGS);
        rc = lp_model_fit(ds, &oo, &fo, gm->beta, &bt);
    }
    double t2 = now_s();
    lp_gstudy_row r = {.cycle = S, .eps = eps, .seed = seed};
    double gap_b = NAN;
    if (rc == LP_OK)
        rc = evaluate(eval, gm, bt, &r.gap, &gap_b, &r.top_agree);
    if (rc == LP_OK) {
        r.general = 1;
        r.beta = gm->beta;
        r.eta = gm->eta;
        r.rounds = gm->rounds;
        r.cycle_share = gm->cycle_share;
        r.fit_seconds = t1 - t0;
        write_row(out, &r);
        r.general = 0;
        r.cycle_share = NAN;
        r.fit_seconds = t2 - t1;
        r.gap = gap_b;
        write_row(out, &r);
    }
    lp_model_free(bt);
    lp_gp_model_free(gm);
    lp_gp_data_free(gd);
    lp_dataset_free(ds);
    lp_gsim_free(train);
    lp_gsim_free(eval);
    return rc;
}

int lp_gstudy_run(const lp_gstudy_grid *g, FILE *out, int progress, char *msg, size_t msglen)
{
    if (g->d > 8)
        return lp_fail(LP_EINVALID_ARGUMENT, msg, msglen, "the study uses d <= 8");
    int done = 0, total = g->ncycle * g->neps * g->seeds;
    for (int c = 0; c < g->ncycle; c++)
        for (int e = 0; e < g->neps; e++)
            for (int s = 0; s < g->seeds; s++) {
                int rc = run_cell(g, g->cycle[c], g->eps[e], s, out);
                if (rc != LP_OK)
                    return lp_fail(rc, msg, msglen, "cell S = %g, eps = %g, seed %d failed",
                                   g->cycle[c], g->eps[e], s);
                if (progress)
                    fprintf(stderr, "\rgeneral study: %d/%d cells", ++done, total);
            }
    if (progress)
        fputc('\n', stderr);
    return ferror(out) ? lp_fail(LP_EIO, msg, msglen, "write error") : LP_OK;
}

/* ---- loading and aggregation ---- */

void lp_gstudy_clear(lp_gstudy *s)
{
    free(s->rows);
    s->rows = NULL;
    s->n = 0;
}

/* One row of the JSONL (lp_study_load_rows). */
static int parse_row(const json_t *o, void *row)
{
    lp_gstudy_row *r = row;
    const char *m = json_string_value(json_object_get(o, "method"));
    if (m == NULL || lp_json_get_epsilon(o, "eps", &r->eps, NULL, 0) != LP_OK)
        return -1;
    r->cycle = json_number_value(json_object_get(o, "cycle"));
    r->seed = (int)json_integer_value(json_object_get(o, "seed"));
    r->general = strcmp(m, "general") == 0;
    r->gap = json_number_value(json_object_get(o, "gap"));
    r->beta = json_number_value(json_object_get(o, "beta"));
    r->eta = json_number_value(json_object_get(o, "eta"));
    r->rounds = (int)json_integer_value(json_object_get(o, "rounds"));
    const json_t *cs = json_object_get(o, "cycle_share");
    r->cycle_share = json_is_number(cs) ? json_number_value(cs) : NAN;
    r->fit_seconds = json_number_value(json_object_get(o, "fit_seconds"));
    r->top_agree = json_number_value(json_object_get(o, "top_agree"));
    return 0;
}

int lp_gstudy_load(const char *path, lp_gstudy *out, char *msg, size_t msglen)
{
    void *rows = NULL;
    int rc =
        lp_study_load_rows(path, sizeof(lp_gstudy_row), parse_row, &rows, &out->n, msg, msglen);
    out->rows = rows;
    return rc;
}

/* Values of the rows at (S, eps): the method's gap (which = 0/1), the
 * paired difference square-chipo - general (which = 2), by seed, or the
 * cell's top agreement (which = 3). */
static lp_study_stat collect(const lp_gstudy *s, double cycle, double eps, int which)
{
    double *v = malloc((s->n ? s->n : 1) * sizeof *v);
    size_t k = 0;
    for (size_t i = 0; v && i < s->n; i++) {
        const lp_gstudy_row *r = &s->rows[i];
        if (r->cycle != cycle || !lp_study_same_eps(r->eps, eps))
            continue;
        if (which < 2 && r->general == which)
            v[k++] = r->gap;
        if (which == 3 && r->general)
            v[k++] = r->top_agree;
        if (which == 2 && !r->general)
            for (size_t j = 0; j < s->n; j++) {
                const lp_gstudy_row *q = &s->rows[j];
                if (q->general && q->seed == r->seed && q->cycle == cycle &&
                    lp_study_same_eps(q->eps, eps))
                    v[k++] = r->gap - q->gap;
            }
    }
    lp_study_stat st = lp_study_stat_values(v, k);
    free(v);
    return st;
}

lp_study_stat lp_gstudy_advantage(const lp_gstudy *s, double cycle, double eps)
{
    return collect(s, cycle, eps, 2);
}

lp_study_stat lp_gstudy_gap(const lp_gstudy *s, double cycle, double eps, int general)
{
    return collect(s, cycle, eps, general ? 1 : 0);
}

lp_study_stat lp_gstudy_agreement(const lp_gstudy *s, double cycle, double eps)
{
    return collect(s, cycle, eps, 3);
}

/* Distinct values of cycle (which = 0) or eps (1), ascending (inf last). */
static int distinct(const lp_gstudy *s, int which, double *out)
{
    int k = 0;
    for (size_t i = 0; i < s->n; i++) {
        double x = which ? s->rows[i].eps : s->rows[i].cycle;
        int seen = 0;
        for (int j = 0; j < k && !seen; j++)
            seen = lp_study_same_eps(out[j], x);
        if (!seen && k < LP_GSTUDY_MAX_VALUES)
            out[k++] = x;
    }
    qsort(out, (size_t)k, sizeof *out, lp_study_cmp_double);
    return k;
}

void lp_gstudy_verdict(const lp_gstudy *s, lp_study_verdict *v)
{
    memset(v, 0, sizeof *v);
    double S[LP_GSTUDY_MAX_VALUES], E[LP_GSTUDY_MAX_VALUES];
    int ns = distinct(s, 0, S), ne = distinct(s, 1, E);
    if (ns < 2 || ne < 1 || S[0] != 0.0) {
        v->level = LP_VERDICT_NO_DATA;
        snprintf(v->text, sizeof v->text, "The block needs S = 0 and at least one S > 0.");
        return;
    }
    int wins = 0, grows = 0, agrees = 0;
    for (int e = 0; e < ne; e++) {
        lp_study_stat top = lp_gstudy_advantage(s, S[ns - 1], E[e]);
        lp_study_stat zero = lp_gstudy_advantage(s, 0.0, E[e]);
        lp_study_stat agree = lp_gstudy_agreement(s, 0.0, E[e]);
        int w = top.mean > fmax(LP_STUDY_K_SE * top.se, G_MARGIN);
        int g = top.mean - zero.mean >
                fmax(LP_STUDY_K_SE * sqrt(top.se * top.se + zero.se * zero.se), G_MARGIN);
        int a = agree.mean + LP_STUDY_K_SE * agree.se >= G_AGREE;
        wins += w;
        grows += g;
        agrees += a;
        char eb[32];
        if (isinf(E[e]))
            snprintf(eb, sizeof eb, "∞");
        else
            snprintf(eb, sizeof eb, "%g", E[e]);
        size_t len = strlen(v->text);
        snprintf(v->text + len, sizeof v->text - len,
                 "ε = %s: at S = %g Square χPO's gap exceeds the mixture's by %.4f ± %.4f (SE)%s, "
                 "at S = 0 by %.4f ± %.4f%s; at S = 0 the two prefer the same response on %.1f%% "
                 "of the prompts%s. ",
                 eb, S[ns - 1], top.mean, top.se, w ? "" : " (not significant)", zero.mean, zero.se,
                 g ? "" : " (the growth is not significant)", 100 * agree.mean,
                 a ? "" : " (below the agreement rule)");
    }
    if (wins == ne && grows == ne && agrees == ne)
        v->level = LP_VERDICT_SUPPORTED;
    else if (wins > 0 || grows > 0)
        v->level = LP_VERDICT_PARTLY;
    else
        v->level = LP_VERDICT_NOT_SUPPORTED;
}

void lp_gstudy_section(FILE *f, const lp_gstudy *s, const lp_study_verdict *v)
{
    double S[LP_GSTUDY_MAX_VALUES], E[LP_GSTUDY_MAX_VALUES];
    int ns = distinct(s, 0, S), ne = distinct(s, 1, E);
    fprintf(f,
            "\n## General preferences: Algorithm 3 against a reward model\n\n"
            "Paper 000, Algorithm 3 and Theorem 4.4: with a general (possibly intransitive) "
            "preference, iterative Square χPO's uniform mixture has a small duality gap; a "
            "reward-based policy cannot represent a cycle.\n\n**Verdict: %s.** %s\n\n",
            lp_verdict_name(v->level), v->text);
    fprintf(f, "Mean duality gap on fresh prompts (mean ± sd over seeds; lower is better; "
               "0 is a minimax winner, a pure response beaten by another has up to 2):\n\n"
               "| S | ε | Algorithm 3 mixture | Square χPO (BT) | difference (paired, ± SE) | "
               "same preferred response |\n|---|---|---|---|---|---|\n");
    for (int c = 0; c < ns; c++)
        for (int e = 0; e < ne; e++) {
            lp_study_stat g = lp_gstudy_gap(s, S[c], E[e], 1);
            lp_study_stat b = lp_gstudy_gap(s, S[c], E[e], 0);
            lp_study_stat d = lp_gstudy_advantage(s, S[c], E[e]);
            lp_study_stat ag = lp_gstudy_agreement(s, S[c], E[e]);
            char eb[32];
            if (isinf(E[e]))
                snprintf(eb, sizeof eb, "∞");
            else
                snprintf(eb, sizeof eb, "%g", E[e]);
            fprintf(f, "| %g | %s | %.4f ± %.4f | %.4f ± %.4f | %.4f ± %.4f | %.1f%% |\n", S[c], eb,
                    g.mean, g.sd, b.mean, b.sd, d.mean, d.se, 100 * ag.mean);
        }
    fprintf(f,
            "\nSet-up: `server/research/intransitive.c` (K = 4 candidates per prompt, d = 6, "
            "f ~ N(0, I); the quick grid has 200 training prompts, 4,000 labels, 200 fresh "
            "evaluation prompts, 4 seeds; the full one 500, 20,000, 1,000 and 5; "
            "l*(a, b) = tanh((θ*ᵀ(f_a − f_b) + S f_aᵀ W f_b)/2), ‖W‖_F = 1), labels "
            "privatized by RR at ε; Algorithm 3 with T = %d rounds, β = %g, η = %g (exact "
            "expectations over the candidates); Square χPO fitted "
            "to the same labels and turned into a policy with the same β (χ-mix link). The "
            "gap is exact on each evaluation prompt's candidates "
            "(docs/training.md, \"General preferences\").\n\n"
            "Rule: at every ε, (a) at the largest S the paired difference (Square χPO − "
            "mixture) exceeds max(%.0f SE, %.2f); (b) it exceeds the difference at S = 0 by "
            "max(%.0f SE, %.2f); (c) on transitive data (S = 0) the two methods agree: the "
            "mixture's most probable response is Square χPO's on at least %.0f%% of the "
            "prompts (within %.0f SE). At S = 0 the mixture's gap is larger than Square χPO's: "
            "it averages T iterates that start at the uniform reference, while a reward model "
            "of transitive data is nearly greedy on the right ranking. Supported: all three at "
            "every ε; partly: (a) or (b) at some ε; not supported: otherwise.\n",
            s->n ? s->rows[0].rounds : 0, s->n ? s->rows[0].beta : NAN, s->n ? s->rows[0].eta : NAN,
            LP_STUDY_K_SE, G_MARGIN, LP_STUDY_K_SE, G_MARGIN, 100 * G_AGREE, LP_STUDY_K_SE);
}
