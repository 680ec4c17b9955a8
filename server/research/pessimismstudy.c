/* pessimismstudy.c — the pessimistic-scores study block. See pessimismstudy.h. */
#include "pessimismstudy.h"

#include "confidence.h"
#include "error.h"
#include "model.h"
#include "prng.h"
#include "rr.h"
#include "wire.h"

#include <errno.h>
#include <jansson.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

/* Rule constants, fixed before the first run (printed in the report). */
#define P_NOMINAL 0.95 /* the coverage the default Gamma must reach */
#define P_MARGIN 0.01  /* smallest suboptimality difference that counts */
#define P_LOW_EPS 1.0  /* pessimism must win at every eps <= this */
#define P_MAX_K 16

static const struct {
    const char *name;
    double eps[LP_PSTUDY_MAX_EPS];
    int neps, seeds;
    size_t labels, prompts;
} GRIDS[] = {
    {"quick", {1, INFINITY}, 2, 4, 2000, 300},
    {"full", {0.5, 1, 2, INFINITY}, 4, 10, 4000, 1000},
};

static const double GAMMAS[] = {0, 0.5, 1, 2, 3, 4, 5, 6, 7, 8};

int lp_pstudy_grid_named(const char *name, lp_pstudy_grid *g)
{
    memset(g, 0, sizeof *g);
    for (size_t i = 0; i < sizeof GRIDS / sizeof GRIDS[0]; i++) {
        if (strcmp(name, GRIDS[i].name) != 0)
            continue;
        memcpy(g->eps, GRIDS[i].eps, sizeof g->eps);
        g->neps = GRIDS[i].neps;
        g->seeds = GRIDS[i].seeds;
        g->labels = GRIDS[i].labels;
        g->prompts = GRIDS[i].prompts;
        g->ngamma = (int)(sizeof GAMMAS / sizeof GAMMAS[0]);
        memcpy(g->gamma, GAMMAS, sizeof GAMMAS);
        g->d = 8;
        g->poor = 2;
        g->rho = 0.1;
        g->theta_norm = 1.5;
        g->K = 8;
        g->K_novel = 4;
        g->l2 = 1.0;
        g->rmax = 3.0;
        return LP_OK;
    }
    return LP_EINVALID_ARGUMENT;
}

/* ---- running ---- */

static double now_s(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec / 1e9;
}

/* One response's features: N(0, 1) per coordinate, the poor ones scaled by
 * scale_poor. */
static void draw_features(lp_prng *r, const lp_pstudy_grid *g, double scale_poor, double *f)
{
    for (size_t j = 0; j < g->d; j++)
        f[j] = lp_prng_normal(r) * (j >= g->d - g->poor ? scale_poor : 1.0);
}

/* theta* and the training labels of seed s at eps (the pairs and coins
 * depend on the seed only, so eps cells are paired). */
static int make_data(const lp_pstudy_grid *g, int seed, double eps, double *theta, lp_dataset **out)
{
    lp_prng r;
    lp_prng_seed(&r, 0x5e551u * 1000003u + (uint64_t)seed);
    double nrm = 0.0;
    for (size_t j = 0; j < g->d; j++) {
        theta[j] = lp_prng_normal(&r);
        nrm += theta[j] * theta[j];
    }
    for (size_t j = 0; j < g->d; j++)
        theta[j] *= g->theta_norm / sqrt(nrm);
    lp_dataset *ds = lp_dataset_new_dense(g->labels, g->d, LP_STORE_F64);
    double *f0 = malloc(2 * g->d * sizeof *f0), *f1 = f0 ? f0 + g->d : NULL;
    if (ds == NULL || f0 == NULL) {
        lp_dataset_free(ds);
        free(f0);
        return LP_ENO_MEMORY;
    }
    for (size_t i = 0; i < g->labels; i++) {
        draw_features(&r, g, g->rho, f0);
        draw_features(&r, g, g->rho, f1);
        double m = 0.0;
        for (size_t j = 0; j < g->d; j++) {
            ds->xd[i * g->d + j] = f1[j] - f0[j];
            m += theta[j] * (f1[j] - f0[j]);
        }
        /* the coins are drawn for every eps so that cells share them */
        double u = lp_prng_uniform(&r), v = lp_prng_uniform(&r);
        int y = u < 1.0 / (1.0 + exp(-m));
        int flip = v < lp_rr_flip_prob(eps);
        ds->z[i] = (uint8_t)(flip ? 1 - y : y);
        ds->eps[i] = eps;
    }
    free(f0);
    *out = ds;
    return LP_OK;
}

static void write_row(FILE *out, const lp_pstudy_row *r)
{
    json_t *ga = json_array(), *sa = json_array(), *ca = json_array();
    for (int j = 0; j < r->ngamma; j++) {
        json_array_append_new(ga, json_real(r->gamma[j]));
        json_array_append_new(sa, json_real(r->subopt[j]));
        json_array_append_new(ca, json_real(r->coverage[j]));
    }
    json_t *o =
        json_pack("{s:o, s:i, s:o, s:o, s:o, s:f, s:f, s:f, s:f, s:f}", "eps",
                  lp_json_epsilon(r->eps), "seed", r->seed, "gamma", ga, "subopt", sa, "coverage",
                  ca, "width_good", r->width_good, "width_poor", r->width_poor, "err_good",
                  r->err_good, "err_poor", r->err_poor, "fit_seconds", r->fit_seconds);
    char *t = json_dumps(o, JSON_COMPACT | JSON_PRESERVE_ORDER | JSON_REAL_PRECISION(17));
    fprintf(out, "%s\n", t);
    free(t);
    json_decref(o);
}

/* Over the evaluation prompts of seed s: for each Gamma, the mean
 * suboptimality of the candidate with the largest lower bound and the share
 * of candidates whose bound on theta*^T (f_k - f_ref) holds. */
static int evaluate(const lp_pstudy_grid *g, int seed, const lp_model *m, const lp_conf *c,
                    const double *theta, lp_pstudy_row *row)
{
    size_t d = g->d, K = (size_t)g->K;
    lp_prng r;
    lp_prng_seed(&r, 0xe7a1u * 1000003u + (uint64_t)seed);
    double f[P_MAX_K * 16], rhat[P_MAX_K], rstar[P_MAX_K], lower[P_MAX_K], width[P_MAX_K];
    uint32_t idx[P_MAX_K * 16];
    lp_sparse sp[P_MAX_K];
    for (size_t k = 0; k < K; k++) {
        for (size_t j = 0; j < d; j++)
            idx[k * d + j] = (uint32_t)j;
        sp[k] = (lp_sparse){.nnz = d, .cap = d, .idx = idx + k * d, .val = f + k * d};
    }
    double sub[LP_PSTUDY_MAX_GAMMA] = {0}, cov[LP_PSTUDY_MAX_GAMMA] = {0};
    for (size_t p = 0; p < g->prompts; p++) {
        double best = -INFINITY, mean_star = 0.0, mean_hat = 0.0;
        for (size_t k = 0; k < K; k++) {
            /* the first K_novel candidates vary along the poor directions
             * as much as along the others: unlike anything in training */
            draw_features(&r, g, k < (size_t)g->K_novel ? 1.0 : g->rho, f + k * d);
            rhat[k] = rstar[k] = 0.0;
            for (size_t j = 0; j < d; j++) {
                rhat[k] += m->theta[j] * f[k * d + j];
                rstar[k] += theta[j] * f[k * d + j];
            }
            best = fmax(best, rstar[k]);
            mean_star += rstar[k] / (double)K;
            mean_hat += rhat[k] / (double)K;
        }
        int rc = lp_conf_lower(c, sp, rhat, NULL, K, 1.0, lower, width);
        if (rc != LP_OK)
            return rc;
        for (int j = 0; j < g->ngamma; j++) {
            size_t pick = 0;
            double top = -INFINITY;
            for (size_t k = 0; k < K; k++) {
                double lo = rhat[k] - g->gamma[j] * width[k];
                if (lo > top) {
                    top = lo;
                    pick = k;
                }
                /* the bound on the difference to the reference (uniform) */
                cov[j] += (rstar[k] - mean_star >= rhat[k] - mean_hat - g->gamma[j] * width[k]);
            }
            sub[j] += best - rstar[pick];
        }
    }
    for (int j = 0; j < g->ngamma; j++) {
        row->subopt[j] = sub[j] / (double)g->prompts;
        row->coverage[j] = cov[j] / (double)(g->prompts * K);
    }
    /* widths along the coordinate axes, and the estimation errors */
    double e[16], work[16], wg = 0, wp = 0, eg = 0, ep = 0;
    for (size_t j = 0; j < d; j++) {
        memset(e, 0, sizeof e);
        e[j] = 1.0;
        double w = lp_conf_width(c, e, work), err = m->theta[j] - theta[j];
        if (j >= d - g->poor) {
            wp += w / (double)g->poor;
            ep += err * err;
        } else {
            wg += w / (double)(d - g->poor);
            eg += err * err;
        }
    }
    row->width_good = wg;
    row->width_poor = wp;
    row->err_good = sqrt(eg);
    row->err_poor = sqrt(ep);
    return LP_OK;
}

/* One (eps, seed) cell: fit, record, bounds. */
static int run_cell(const lp_pstudy_grid *g, double eps, int seed, FILE *out)
{
    double theta[16];
    lp_dataset *ds = NULL;
    int rc = make_data(g, seed, eps, theta, &ds);
    lp_objective_opts oo;
    lp_objective_opts_init(&oo, LP_LOSS_SQUARE_CHIPO);
    oo.loss.rmax = g->rmax;
    oo.l2 = g->l2;
    lp_fit_opts fo;
    lp_fit_opts_init(&fo, LP_OPT_LBFGS);
    lp_model *m = NULL;
    lp_conf *c = NULL;
    double t0 = now_s();
    if (rc == LP_OK)
        rc = lp_model_fit(ds, &oo, &fo, 1.0, &m);
    if (rc == LP_OK)
        rc = lp_conf_attach(m, ds);
    char msg[256];
    if (rc == LP_OK)
        rc = lp_conf_prepare(m->confidence, m->d, &c, msg, sizeof msg);
    lp_pstudy_row row = {.eps = eps, .seed = seed, .ngamma = g->ngamma};
    row.fit_seconds = now_s() - t0;
    memcpy(row.gamma, g->gamma, sizeof row.gamma);
    if (rc == LP_OK)
        rc = evaluate(g, seed, m, c, theta, &row);
    if (rc == LP_OK)
        write_row(out, &row);
    lp_conf_free(c);
    lp_model_free(m);
    lp_dataset_free(ds);
    return rc;
}

int lp_pstudy_run(const lp_pstudy_grid *g, FILE *out, int progress, char *msg, size_t msglen)
{
    if (g->d > 16 || g->K > P_MAX_K || g->poor >= g->d || g->ngamma < 1 || g->gamma[0] != 0.0)
        return lp_fail(LP_EINVALID_ARGUMENT, msg, msglen,
                       "the study uses d <= 16, K <= %d and a Gamma grid from 0", P_MAX_K);
    int done = 0, total = g->neps * g->seeds;
    for (int e = 0; e < g->neps; e++)
        for (int s = 0; s < g->seeds; s++) {
            int rc = run_cell(g, g->eps[e], g->first_seed + s, out);
            if (rc != LP_OK)
                return lp_fail(rc, msg, msglen, "cell eps = %g, seed %d failed", g->eps[e], s);
            if (progress)
                fprintf(stderr, "\rpessimism study: %d/%d cells", ++done, total);
        }
    if (progress)
        fputc('\n', stderr);
    return ferror(out) ? lp_fail(LP_EIO, msg, msglen, "write error") : LP_OK;
}

/* ---- loading and aggregation ---- */

void lp_pstudy_clear(lp_pstudy *s)
{
    free(s->rows);
    s->rows = NULL;
    s->n = 0;
}

static int read_array(const json_t *o, const char *key, double *v, int *n)
{
    const json_t *a = json_object_get(o, key);
    if (!json_is_array(a) || json_array_size(a) == 0 || json_array_size(a) > LP_PSTUDY_MAX_GAMMA)
        return 0;
    for (size_t j = 0; j < json_array_size(a); j++)
        v[j] = json_number_value(json_array_get(a, j));
    if (*n >= 0 && *n != (int)json_array_size(a))
        return 0;
    *n = (int)json_array_size(a);
    return 1;
}

/* One row of the JSONL (lp_study_load_rows). */
static int parse_row(const json_t *o, void *row)
{
    lp_pstudy_row *r = row;
    memset(r, 0, sizeof *r);
    int ng = -1;
    r->ngamma = -1;
    if (lp_json_get_epsilon(o, "eps", &r->eps, NULL, 0) != LP_OK ||
        !read_array(o, "gamma", r->gamma, &r->ngamma) || !read_array(o, "subopt", r->subopt, &ng) ||
        ng != r->ngamma || !read_array(o, "coverage", r->coverage, &ng))
        return -1;
    r->seed = (int)json_integer_value(json_object_get(o, "seed"));
    r->width_good = json_number_value(json_object_get(o, "width_good"));
    r->width_poor = json_number_value(json_object_get(o, "width_poor"));
    r->err_good = json_number_value(json_object_get(o, "err_good"));
    r->err_poor = json_number_value(json_object_get(o, "err_poor"));
    r->fit_seconds = json_number_value(json_object_get(o, "fit_seconds"));
    return 0;
}

int lp_pstudy_load(const char *path, lp_pstudy *out, char *msg, size_t msglen)
{
    void *rows = NULL;
    int rc =
        lp_study_load_rows(path, sizeof(lp_pstudy_row), parse_row, &rows, &out->n, msg, msglen);
    out->rows = rows;
    if (rc == LP_OK && out->n == 0)
        rc = lp_fail(LP_EMALFORMED_JSON, msg, msglen, "%s has no rows", path);
    for (size_t i = 1; rc == LP_OK && i < out->n; i++)
        if (out->rows[i].ngamma != out->rows[0].ngamma ||
            memcmp(out->rows[i].gamma, out->rows[0].gamma,
                   (size_t)out->rows[0].ngamma * sizeof(double)) != 0)
            rc = lp_fail(LP_EMALFORMED_JSON, msg, msglen, "%s: rows with different Gamma grids",
                         path);
    if (rc != LP_OK)
        lp_pstudy_clear(out);
    return rc;
}

/* Over the rows at eps: subopt[0] - subopt[j] (which 0), coverage[j] (1),
 * subopt[j] (2), width_poor / width_good (3), err_good (4), err_poor (5). */
static lp_study_stat collect(const lp_pstudy *s, double eps, int j, int which)
{
    double *v = malloc((s->n ? s->n : 1) * sizeof *v);
    size_t k = 0;
    for (size_t i = 0; v && i < s->n; i++) {
        const lp_pstudy_row *r = &s->rows[i];
        if (!lp_study_same_eps(r->eps, eps) || j < 0 || j >= r->ngamma)
            continue;
        double x[] = {r->subopt[0] - r->subopt[j],   r->coverage[j], r->subopt[j],
                      r->width_poor / r->width_good, r->err_good,    r->err_poor};
        v[k++] = x[which];
    }
    lp_study_stat st = lp_study_stat_values(v, k);
    free(v);
    return st;
}

lp_study_stat lp_pstudy_advantage(const lp_pstudy *s, double eps, int j)
{
    return collect(s, eps, j, 0);
}

lp_study_stat lp_pstudy_coverage(const lp_pstudy *s, double eps, int j)
{
    return collect(s, eps, j, 1);
}

/* Distinct eps values, ascending (inf last). */
static int distinct_eps(const lp_pstudy *s, double *out)
{
    int k = 0;
    for (size_t i = 0; i < s->n; i++) {
        int seen = 0;
        for (int j = 0; j < k && !seen; j++)
            seen = lp_study_same_eps(out[j], s->rows[i].eps);
        if (!seen && k < LP_PSTUDY_MAX_EPS)
            out[k++] = s->rows[i].eps;
    }
    qsort(out, (size_t)k, sizeof *out, lp_study_cmp_double);
    return k;
}

/* The index of Gamma g in the rows' grid, or -1. */
static int gamma_index(const lp_pstudy *s, double g)
{
    for (int j = 0; s->n && j < s->rows[0].ngamma; j++)
        if (s->rows[0].gamma[j] == g)
            return j;
    return -1;
}

double lp_pstudy_calibrated_gamma(const lp_pstudy *s)
{
    double E[LP_PSTUDY_MAX_EPS];
    int ne = distinct_eps(s, E);
    for (int j = 0; s->n && j < s->rows[0].ngamma; j++) {
        int ok = ne > 0;
        for (int e = 0; e < ne && ok; e++)
            ok = lp_pstudy_coverage(s, E[e], j).mean >= P_NOMINAL;
        if (ok)
            return s->rows[0].gamma[j];
    }
    return NAN;
}

/*
 * Rule (fixed before the first run): with Gamma = LP_CONF_DEFAULT_GAMMA,
 * (a) at every eps <= P_LOW_EPS the pessimistic choice's mean suboptimality
 * is below the greedy one's by more than max(2 SE, P_MARGIN), paired by
 * seed; (b) at every eps the bound's coverage is at least P_NOMINAL within
 * 2 SE. Supported: (a) and (b) everywhere; partly: one of them everywhere,
 * or (a) somewhere; not supported: otherwise.
 */
void lp_pstudy_verdict(const lp_pstudy *s, lp_study_verdict *v)
{
    memset(v, 0, sizeof *v);
    double E[LP_PSTUDY_MAX_EPS];
    int ne = distinct_eps(s, E), j = gamma_index(s, LP_CONF_DEFAULT_GAMMA), nlow = 0;
    for (int e = 0; e < ne; e++)
        nlow += E[e] <= P_LOW_EPS;
    if (ne < 1 || nlow < 1 || j < 0) {
        v->level = LP_VERDICT_NO_DATA;
        snprintf(v->text, sizeof v->text,
                 "The block needs an ε ≤ %g and Γ = %g (the default) in its grid.", P_LOW_EPS,
                 (double)LP_CONF_DEFAULT_GAMMA);
        return;
    }
    int wins = 0, covers = 0;
    for (int e = 0; e < ne; e++) {
        lp_study_stat a = lp_pstudy_advantage(s, E[e], j), c = lp_pstudy_coverage(s, E[e], j);
        int w = E[e] <= P_LOW_EPS && a.mean > fmax(LP_STUDY_K_SE * a.se, P_MARGIN);
        int ok = c.mean + LP_STUDY_K_SE * c.se >= P_NOMINAL;
        int worse = a.mean < -fmax(LP_STUDY_K_SE * a.se, P_MARGIN);
        wins += w;
        covers += ok;
        char eb[32];
        size_t len = strlen(v->text);
        snprintf(v->text + len, sizeof v->text - len,
                 "ε = %s: greedy − pessimistic suboptimality %.4f ± %.4f (SE)%s; coverage "
                 "%.1f%%%s. ",
                 lp_study_eps_str(E[e], eb, sizeof eb), a.mean, a.se,
                 E[e] > P_LOW_EPS ? " (no rule)"
                 : w              ? ""
                 : worse          ? " (pessimism is worse)"
                                  : " (not significant)",
                 100 * c.mean, ok ? "" : " (below the nominal level)");
    }
    if (wins == nlow && covers == ne)
        v->level = LP_VERDICT_SUPPORTED;
    else if (wins == nlow || covers == ne || wins > 0)
        v->level = LP_VERDICT_PARTLY;
    else
        v->level = LP_VERDICT_NOT_SUPPORTED;
}

static int write_plot(const char *dir, const lp_pstudy *s, char *msg, size_t msglen)
{
    char path[1024];
    snprintf(path, sizeof path, "%s/gp", dir);
    if (mkdir(path, 0755) != 0 && errno != EEXIST)
        return lp_fail(LP_EIO, msg, msglen, "cannot create %s", path);
    snprintf(path, sizeof path, "%s/gp/pessimism.gp", dir);
    FILE *f = fopen(path, "w");
    if (f == NULL)
        return lp_fail(LP_EIO, msg, msglen, "cannot write %s", path);
    double E[LP_PSTUDY_MAX_EPS];
    int ne = distinct_eps(s, E), ng = s->rows[0].ngamma;
    fprintf(f, "# pessimism.gp — generated by ldpref-train report; run from the results "
               "directory:\n#   gnuplot gp/pessimism.gp   (writes pessimism.svg)\n"
               "set terminal svg size 1100,500 dynamic noenhanced font 'sans,13' background "
               "rgb 'white'\nset output 'pessimism.svg'\nset grid lc rgb '#dddddd'\n"
               "set key top right font 'sans,11' box\nset bars small\nset xlabel 'Γ'\n"
               "set multiplot layout 1,2 title 'Pessimistic scores: mean ± sd over seeds' "
               "font 'sans,15'\n");
    for (int e = 0; e < ne; e++) {
        fprintf(f, "$d%d << EOD\n", e);
        for (int j = 0; j < ng; j++) {
            lp_study_stat sub = collect(s, E[e], j, 2), cov = collect(s, E[e], j, 1);
            fprintf(f, "%g %.6g %.6g %.6g %.6g\n", s->rows[0].gamma[j], sub.mean, sub.sd, cov.mean,
                    cov.sd);
        }
        fprintf(f, "EOD\n");
    }
    for (int panel = 0; panel < 2; panel++) {
        fprintf(f, "set key %s\nset title '%s'\nset ylabel '%s'\nplot ",
                panel ? "bottom right" : "top left",
                panel ? "Coverage of the lower bound"
                      : "Suboptimality of the choice (Γ = 0: greedy)",
                panel ? "share of candidates" : "suboptimality");
        for (int e = 0; e < ne; e++) {
            char eb[32];
            fprintf(f, "%s$d%d u 1:%d:%d w yerrorlines lw 2 pt 7 ps 0.6 title 'ε = %s'",
                    e ? ", " : "", e, panel ? 4 : 2, panel ? 5 : 3,
                    lp_study_eps_str(E[e], eb, sizeof eb));
        }
        if (panel)
            fprintf(f, ", %g w l lw 1 dt 2 lc rgb 'black' title 'nominal'", P_NOMINAL);
        fputc('\n', f);
    }
    fprintf(f, "unset multiplot\n");
    return fclose(f) == 0 ? LP_OK : lp_fail(LP_EIO, msg, msglen, "cannot write %s", path);
}

int lp_pstudy_section(FILE *f, const char *dir, const lp_pstudy *s, const lp_study_verdict *v,
                      char *msg, size_t msglen)
{
    int rc = s->n ? write_plot(dir, s, msg, msglen) : LP_OK;
    if (rc != LP_OK)
        return rc;
    double E[LP_PSTUDY_MAX_EPS];
    int ne = distinct_eps(s, E), j = gamma_index(s, LP_CONF_DEFAULT_GAMMA);
    double cal = lp_pstudy_calibrated_gamma(s);
    char cb[32] = "none";
    if (!isnan(cal))
        snprintf(cb, sizeof cb, "%g", cal);
    fprintf(f,
            "\n## Pessimistic scores: lower confidence bounds against greedy choice\n\n"
            "Paper 001, Algorithm 2 with η = 1, and paper 002's pessimistic policy: choosing "
            "by a lower confidence bound θ̂ᵀv − Γ‖v‖_{(Σ̂+λI)⁻¹} avoids candidates whose "
            "reward the (privatized) data cannot tell, where the greedy choice by θ̂ᵀv is "
            "fooled by noise.\n\n**Verdict: %s.** %s\n\n",
            lp_verdict_name(v->level), v->text);
    fprintf(f,
            "At the default Γ = %g (`LP_CONF_DEFAULT_GAMMA`); the smallest Γ of the grid whose "
            "mean coverage reaches %.0f%% at every ε in this run is %s. Mean ± SE over "
            "seeds:\n\n| ε | greedy suboptimality | pessimistic suboptimality | difference "
            "(paired) | coverage | width poor / good | ‖θ̂ − θ*‖ good | ‖θ̂ − θ*‖ poor |\n"
            "|---|---|---|---|---|---|---|---|\n",
            (double)LP_CONF_DEFAULT_GAMMA, 100 * P_NOMINAL, cb);
    for (int e = 0; e < ne && j >= 0; e++) {
        char eb[32];
        lp_study_stat g = collect(s, E[e], 0, 2), p = collect(s, E[e], j, 2);
        lp_study_stat a = collect(s, E[e], j, 0), c = collect(s, E[e], j, 1);
        lp_study_stat w = collect(s, E[e], j, 3), eg = collect(s, E[e], j, 4),
                      ep = collect(s, E[e], j, 5);
        fprintf(f,
                "| %s | %.4f ± %.4f | %.4f ± %.4f | %.4f ± %.4f | %.1f%% ± %.1f | %.1f | %.3f | "
                "%.3f |\n",
                lp_study_eps_str(E[e], eb, sizeof eb), g.mean, g.se, p.mean, p.se, a.mean, a.se,
                100 * c.mean, 100 * c.se, w.mean, eg.mean, ep.mean);
    }
    fprintf(f, "\nThe Γ of the grid with the smallest mean suboptimality (data, not a rule):");
    for (int e = 0; e < ne; e++) {
        int best = 0;
        for (int k = 1; k < s->rows[0].ngamma; k++)
            best = collect(s, E[e], k, 2).mean < collect(s, E[e], best, 2).mean ? k : best;
        char eb[32];
        fprintf(f, "%s ε = %s: Γ = %g (%.4f against greedy %.4f)", e ? ";" : "",
                lp_study_eps_str(E[e], eb, sizeof eb), s->rows[0].gamma[best],
                collect(s, E[e], best, 2).mean, collect(s, E[e], 0, 2).mean);
    }
    fprintf(f, ".\n\n![suboptimality and coverage against Γ](pessimism.svg)\n\n");
    lp_pstudy_grid g;
    lp_pstudy_grid_named("full", &g);
    fprintf(f,
            "Set-up: `server/research/pessimismstudy.c`. d = %zu features; θ* ~ N(0, I) "
            "scaled to ‖θ*‖ = %g; training pairs f(a₀), f(a₁) ~ N(0, I) except the last %zu "
            "coordinates, scaled by %g (poorly covered); labels Bradley-Terry in θ*ᵀ(f₁ − "
            "f₀), randomized at ε; Square χPO fitted with l2 = %g, R_max = %g; the confidence "
            "record as served (λ = %g, weights tanh(ε/2)²). Each evaluation prompt has K = %d "
            "candidates, %d of them novel (N(0, 1) along every coordinate), the others like "
            "the training responses. Suboptimality: max_k θ*ᵀf_k − θ*ᵀf_chosen; the choice "
            "is the largest lower bound (Γ = 0: the largest estimated reward). Coverage: the "
            "share of candidates with θ*ᵀ(f_k − f̄) ≥ θ̂ᵀ(f_k − f̄) − Γ‖f_k − f̄‖_{M⁻¹}, f̄ the "
            "candidates' mean (the uniform reference). The quick grid has 2,000 labels, 300 "
            "prompts, 4 seeds; the full one 4,000, 1,000 and 10.\n\n"
            "Rule (fixed before the first run): with the default Γ, (a) at every ε ≤ %g the "
            "pessimistic choice's suboptimality is below the greedy one's by more than "
            "max(%.0f SE, %.2f), paired by seed; (b) at every ε the bound's coverage is at "
            "least %.0f%% within %.0f SE. Supported: (a) and (b) everywhere; partly: one of "
            "them everywhere, or (a) somewhere; not supported: otherwise. Above ε = %g no "
            "rule applies: with little noise the greedy estimate is good enough and "
            "pessimism may cost a little.\n",
            g.d, g.theta_norm, g.poor, g.rho, g.l2, g.rmax, LP_CONF_LAMBDA, g.K, g.K_novel,
            P_LOW_EPS, LP_STUDY_K_SE, P_MARGIN, 100 * P_NOMINAL, LP_STUDY_K_SE, P_LOW_EPS);
    return LP_OK;
}

int lp_pstudy_report(FILE *f, const char *dir, const char *path, char *msg, size_t msglen)
{
    lp_pstudy s;
    lp_study_verdict v;
    int rc = lp_pstudy_load(path, &s, msg, msglen);
    if (rc != LP_OK)
        return rc;
    lp_pstudy_verdict(&s, &v);
    rc = lp_pstudy_section(f, dir, &s, &v, msg, msglen);
    lp_pstudy_clear(&s);
    return rc;
}

int lp_pstudy_verdict_file(const char *path, lp_study_verdict *v)
{
    lp_pstudy s;
    char msg[256];
    int rc = lp_pstudy_load(path, &s, msg, sizeof msg);
    if (rc == LP_OK)
        lp_pstudy_verdict(&s, v);
    lp_pstudy_clear(&s);
    return rc;
}
