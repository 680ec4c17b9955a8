/* optimize.c — L-BFGS (liblbfgs) and SGD/Adam fits. See optimize.h. */
#include "optimize.h"

#include "error.h"
#include "prng.h"

#include <assert.h>
#include <lbfgs.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define ACTIVE_FRACTION 0.99
#define MAX_RESTARTS 10

void lp_fit_opts_init(lp_fit_opts *o, lp_method method)
{
    memset(o, 0, sizeof *o);
    o->method = method;
    o->max_iter = 500;
    o->gtol = 1e-8;
    o->memory = 10;
    o->norm_bound = INFINITY;
    o->lr = method == LP_OPT_ADAM ? 0.01 : 0.5;
    o->batch = 1;
    o->epochs = 1;
}

static const char *const method_names[] = {"lbfgs", "sgd", "adam"};

const char *lp_method_name(lp_method m)
{
    return (unsigned)m < 3 ? method_names[m] : NULL;
}

int lp_method_parse(const char *name, lp_method *out)
{
    for (int k = 0; k < 3; k++)
        if (strcmp(name, method_names[k]) == 0) {
            *out = (lp_method)k;
            return LP_OK;
        }
    return LP_EINVALID_ARGUMENT;
}

static double norm2(const double *v, size_t d)
{
    double s = 0.0;
    for (size_t j = 0; j < d; j++)
        s += v[j] * v[j];
    return sqrt(s);
}

/* ---- L-BFGS ---------------------------------------------------------- */

typedef struct lb_ctx {
    lp_objective *ob;
    const lp_fit_opts *o;
    size_t d;
    double *theta, *gtheta; /* scratch: theta(u) and grad wrt theta */
    int evals;
    double last_f, last_gnorm;
    int last_k;
    int iters_before; /* iterations of earlier restarts */
    int cancelled;
} lb_ctx;

/* theta = B u / sqrt(1 + |u|^2) (identity when B is infinite). */
static void u_to_theta(const lb_ctx *c, const double *u, double *theta)
{
    size_t d = c->d;
    if (isinf(c->o->norm_bound)) {
        memcpy(theta, u, d * sizeof *theta);
        return;
    }
    double s = sqrt(1.0 + norm2(u, d) * norm2(u, d));
    for (size_t j = 0; j < d; j++)
        theta[j] = c->o->norm_bound * u[j] / s;
}

static lbfgsfloatval_t lb_evaluate(void *inst, const lbfgsfloatval_t *u, lbfgsfloatval_t *g,
                                   const int n, const lbfgsfloatval_t step)
{
    lb_ctx *c = inst;
    size_t d = c->d;
    assert((size_t)n == d);
    c->evals++;
    if (isinf(c->o->norm_bound)) {
        return lp_objective_eval(c->ob, u, g);
    }
    u_to_theta(c, u, c->theta);
    double f = lp_objective_eval(c->ob, c->theta, c->gtheta);
    double uu = 0.0, ug = 0.0;
    for (size_t j = 0; j < d; j++) {
        uu += u[j] * u[j];
        ug += u[j] * c->gtheta[j];
    }
    double s2 = 1.0 + uu, s = sqrt(s2), B = c->o->norm_bound;
    for (size_t j = 0; j < d; j++)
        g[j] = B / s * (c->gtheta[j] - u[j] * ug / s2);
    return f;
}

static int lb_progress(void *inst, const lbfgsfloatval_t *x, const lbfgsfloatval_t *g,
                       const lbfgsfloatval_t fx, const lbfgsfloatval_t xnorm,
                       const lbfgsfloatval_t gnorm, const lbfgsfloatval_t step, int n, int k,
                       int ls)
{
    lb_ctx *c = inst;
    c->last_f = fx;
    c->last_gnorm = gnorm;
    c->last_k = k;
    if (c->o->progress)
        fprintf(stderr, "\riter %5d  objective %.12g  |grad| %.3e  evals %d   ", k, fx, gnorm,
                c->evals);
    if (c->o->on_progress != NULL &&
        c->o->on_progress(c->o->progress_ctx, c->iters_before + k, c->evals, fx, gnorm) != 0) {
        c->cancelled = 1;
        return 1; /* liblbfgs stops and returns this value */
    }
    return 0;
}

static const char *lbfgs_status(int rc)
{
    switch (rc) {
    case LBFGS_SUCCESS:
        return "converged";
    case LBFGS_ALREADY_MINIMIZED:
        return "already_minimized";
    case LBFGSERR_MAXIMUMITERATION:
        return "max_iterations";
    case LBFGSERR_ROUNDING_ERROR:
        return "rounding_error";
    case LBFGSERR_MINIMUMSTEP:
        return "minimum_step";
    case LBFGSERR_MAXIMUMSTEP:
        return "maximum_step";
    case LBFGSERR_MAXIMUMLINESEARCH:
        return "max_linesearch";
    case LBFGSERR_INCREASEGRADIENT:
        return "increase_gradient";
    case LBFGSERR_OUTOFMEMORY:
        return "out_of_memory";
    default:
        return "lbfgs_error";
    }
}

static int fit_lbfgs(lp_objective *ob, const lp_fit_opts *o, double *theta, lp_fit_result *res)
{
    size_t d = lp_objective_data(ob)->d;
    lb_ctx c = {.ob = ob, .o = o, .d = d, .last_f = NAN};
    lbfgsfloatval_t *u = lbfgs_malloc((int)d);
    c.theta = malloc(d * sizeof *c.theta);
    c.gtheta = malloc(d * sizeof *c.gtheta);
    if (u == NULL || c.theta == NULL || c.gtheta == NULL) {
        lbfgs_free(u);
        free(c.theta);
        free(c.gtheta);
        return LP_ENO_MEMORY;
    }
    for (size_t j = 0; j < d; j++)
        u[j] = 0.0; /* theta = 0: required by the clipped losses */
    lbfgs_parameter_t p;
    lbfgs_parameter_init(&p);
    p.m = o->memory;
    p.epsilon = o->gtol;
    p.max_iterations = o->max_iter;
    p.past = 0;
    lbfgsfloatval_t fx = 0.0;
    /* A line-search failure usually means a kink (the clip edges of the
     * clipped losses) under an outdated curvature model: restart with an
     * empty history from the point reached, a few times, while that still
     * lowers the objective and iterations remain. */
    int rc = LBFGS_SUCCESS, iters = 0;
    double best = INFINITY;
    for (int restart = 0; restart <= MAX_RESTARTS; restart++) {
        p.max_iterations = o->max_iter - iters;
        if (p.max_iterations <= 0) {
            rc = LBFGSERR_MAXIMUMITERATION;
            break;
        }
        c.last_k = 0;
        c.iters_before = iters;
        rc = lbfgs((int)d, u, &fx, lb_evaluate, lb_progress, &c, &p);
        iters += c.last_k;
        if (c.cancelled)
            break;
        int linesearch_failure = rc == LBFGSERR_ROUNDING_ERROR || rc == LBFGSERR_MINIMUMSTEP ||
                                 rc == LBFGSERR_MAXIMUMSTEP || rc == LBFGSERR_MAXIMUMLINESEARCH ||
                                 rc == LBFGSERR_INCREASEGRADIENT;
        if (!linesearch_failure || !(fx < best))
            break;
        best = fx;
    }
    c.last_k = iters;
    if (o->progress)
        fputc('\n', stderr);
    u_to_theta(&c, u, theta);
    /* Report objective and gradient in theta space at the returned point. */
    res->objective = lp_objective_eval(ob, theta, c.gtheta);
    res->grad_norm = norm2(c.gtheta, d);
    /* No iteration was taken (already minimal, or the first line search
     * failed): the observer still sees the returned point once. */
    if (iters == 0 && !c.cancelled && o->on_progress != NULL)
        (void)o->on_progress(o->progress_ctx, 0, c.evals, res->objective, res->grad_norm);
    res->iterations = c.last_k;
    res->evaluations = c.evals;
    res->converged = rc == LBFGS_SUCCESS || rc == LBFGS_ALREADY_MINIMIZED;
    snprintf(res->status, sizeof res->status, "%s",
             isfinite(res->objective) ? lbfgs_status(rc) : "non_finite");
    lbfgs_free(u);
    free(c.theta);
    free(c.gtheta);
    if (c.cancelled)
        return LP_ECANCELLED;
    return rc == LBFGSERR_OUTOFMEMORY ? LP_ENO_MEMORY : LP_OK;
}

/* ---- SGD / Adam ------------------------------------------------------ */

/* grad += g * df_i */
static void row_axpy(const lp_dataset *ds, size_t i, double g, double *grad)
{
    size_t d = ds->d;
    switch (ds->storage) {
    case LP_STORE_F32:
        for (size_t j = 0; j < d; j++)
            grad[j] += g * (double)ds->xf[i * d + j];
        break;
    case LP_STORE_F64:
        for (size_t j = 0; j < d; j++)
            grad[j] += g * ds->xd[i * d + j];
        break;
    case LP_STORE_CSR:
        for (size_t k = ds->rowptr[i]; k < ds->rowptr[i + 1]; k++)
            grad[ds->col[k]] += g * ds->val[k];
        break;
    }
}

static void project(double *theta, size_t d, double B)
{
    if (isinf(B))
        return;
    double nrm = norm2(theta, d);
    if (nrm > B)
        for (size_t j = 0; j < d; j++)
            theta[j] *= B / nrm;
}

static int fit_stochastic(lp_objective *ob, const lp_fit_opts *o, double *theta, lp_fit_result *res)
{
    const lp_dataset *ds = lp_objective_data(ob);
    const lp_objective_opts *oo = lp_objective_options(ob);
    const lp_label_consts *k = lp_objective_consts(ob);
    size_t n = ds->n, d = ds->d, batch = (size_t)o->batch;
    size_t *perm = malloc(n * sizeof *perm);
    double *g = calloc(d, sizeof *g), *avg = calloc(d, sizeof *avg);
    double *m1 = calloc(d, sizeof *m1), *m2 = calloc(d, sizeof *m2);
    if (perm == NULL || g == NULL || avg == NULL || m1 == NULL || m2 == NULL) {
        free(perm);
        free(g);
        free(avg);
        free(m1);
        free(m2);
        return LP_ENO_MEMORY;
    }
    lp_prng rng;
    lp_prng_seed(&rng, o->seed);
    for (size_t i = 0; i < n; i++)
        perm[i] = i;
    memset(theta, 0, d * sizeof *theta);
    long t = 0;
    int cancelled = 0;
    const double b1 = 0.9, b2 = 0.999, ae = 1e-8;
    for (int ep = 0; ep < o->epochs && !cancelled; ep++) {
        double epoch_loss = 0.0;         /* sum of the losses seen on this pass */
        for (size_t i = n; i > 1; i--) { /* Fisher-Yates */
            size_t j = (size_t)lp_prng_below(&rng, i);
            size_t tmp = perm[i - 1];
            perm[i - 1] = perm[j];
            perm[j] = tmp;
        }
        for (size_t b0 = 0; b0 < n && !cancelled; b0 += batch) {
            size_t b1i = b0 + batch < n ? b0 + batch : n;
            memset(g, 0, d * sizeof *g);
            for (size_t r = b0; r < b1i; r++) {
                size_t i = perm[r];
                double m = lp_dataset_row_dot(ds, i, theta), gi;
                epoch_loss += lp_loss_point(&oo->loss, m, ds->z[i] ? 1 : -1, &k[i], &gi);
                if (gi != 0.0)
                    row_axpy(ds, i, gi, g);
            }
            double inv = 1.0 / (double)(b1i - b0);
            for (size_t j = 0; j < d; j++)
                g[j] = g[j] * inv + 2.0 * oo->l2 * theta[j] / (double)n;
            t++;
            if (o->method == LP_OPT_SGD) {
                double lr = o->lr / sqrt((double)t);
                for (size_t j = 0; j < d; j++)
                    theta[j] -= lr * g[j];
                project(theta, d, o->norm_bound);
                for (size_t j = 0; j < d; j++) /* Polyak-Ruppert average */
                    avg[j] += (theta[j] - avg[j]) / (double)t;
            } else {
                double c1 = 1.0 - pow(b1, (double)t), c2 = 1.0 - pow(b2, (double)t);
                for (size_t j = 0; j < d; j++) {
                    m1[j] = b1 * m1[j] + (1 - b1) * g[j];
                    m2[j] = b2 * m2[j] + (1 - b2) * g[j] * g[j];
                    theta[j] -= o->lr * (m1[j] / c1) / (sqrt(m2[j] / c2) + ae);
                }
                project(theta, d, o->norm_bound);
            }
            if (o->on_progress != NULL && t % 4096 == 0)
                cancelled =
                    o->on_progress(o->progress_ctx, (int)(t & 0x7fffffff), 0, NAN, NAN) != 0;
        }
        if (o->progress)
            fprintf(stderr, "\repoch %d/%d  steps %ld   ", ep + 1, o->epochs, t);
        if (!cancelled && o->on_progress != NULL) {
            /* the pass's mean loss at the iterates it visited, plus the L2
             * term at the end of the pass: an estimate of F, no extra pass */
            double reg = norm2(theta, d);
            double f = (epoch_loss + oo->l2 * reg * reg) / (double)n;
            cancelled = o->on_progress(o->progress_ctx, (int)(t & 0x7fffffff), 0, f, NAN) != 0;
        }
    }
    if (o->progress)
        fputc('\n', stderr);
    if (cancelled) {
        free(perm);
        free(g);
        free(avg);
        free(m1);
        free(m2);
        return LP_ECANCELLED;
    }
    if (o->method == LP_OPT_SGD)
        memcpy(theta, avg, d * sizeof *theta);
    res->objective = lp_objective_eval(ob, theta, g);
    res->grad_norm = norm2(g, d);
    res->iterations = (int)(t > 2147483647L ? 2147483647L : t);
    res->evaluations = 1;
    res->converged = 0;
    snprintf(res->status, sizeof res->status, "%s",
             isfinite(res->objective) ? "completed" : "non_finite");
    if (o->on_progress != NULL) /* the returned point; nothing is left to cancel */
        (void)o->on_progress(o->progress_ctx, res->iterations, 1, res->objective, res->grad_norm);
    free(perm);
    free(g);
    free(avg);
    free(m1);
    free(m2);
    return LP_OK;
}

int lp_fit(lp_objective *ob, const lp_fit_opts *o, double *theta, lp_fit_result *res)
{
    memset(res, 0, sizeof *res);
    if (o->max_iter < 0 || !(o->gtol >= 0.0) || o->memory < 1 || !(o->norm_bound > 0.0) ||
        !(o->lr > 0.0) || o->batch < 1 || o->epochs < 1)
        return LP_EINVALID_ARGUMENT;
    size_t d = lp_objective_data(ob)->d;
    int rc = o->method == LP_OPT_LBFGS ? fit_lbfgs(ob, o, theta, res)
                                       : fit_stochastic(ob, o, theta, res);
    if (rc != LP_OK)
        return rc;
    res->theta_norm = norm2(theta, d);
    res->bound_active = !isinf(o->norm_bound) && res->theta_norm >= ACTIVE_FRACTION * o->norm_bound;
    return LP_OK;
}
