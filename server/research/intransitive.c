/* intransitive.c — synthetic general preferences. See intransitive.h. */
#include "intransitive.h"

#include "error.h"
#include "policy.h"
#include "prng.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

void lp_gsim_opts_init(lp_gsim_opts *o)
{
    memset(o, 0, sizeof *o);
    o->prompts = 200;
    o->labels = 4000;
    o->d = 8;
    o->K = 4;
    o->cycle = 0.0;
    o->margin_sd = 2.0;
    o->eps = INFINITY;
    o->order = LP_ORDER_CTL;
    o->adv = LP_ADV_FLIP;
}

void lp_gsim_free(lp_gsim *s)
{
    if (s == NULL)
        return;
    free(s->theta);
    free(s->W);
    free(s->f);
    free(s);
}

double lp_gsim_pref(const lp_gsim *s, const double *fa, const double *fb)
{
    size_t d = s->d;
    double u = 0.0;
    for (size_t j = 0; j < d; j++) {
        u += s->theta[j] * (fa[j] - fb[j]);
        double row = 0.0;
        for (size_t k = 0; k < d; k++)
            row += s->W[j * d + k] * fb[k];
        u += s->cycle * fa[j] * row;
    }
    return tanh(0.5 * u);
}

int lp_gsim_truth(const lp_gsim_opts *o, uint64_t stream, lp_gsim **out)
{
    *out = NULL;
    if (o->d < 2 || o->prompts < 1 || o->K < 2 || o->K > LP_GP_MAX_K || !(o->cycle >= 0.0) ||
        !(o->margin_sd > 0.0))
        return LP_EINVALID_ARGUMENT;
    size_t d = o->d;
    lp_gsim *s = calloc(1, sizeof *s);
    if (s == NULL)
        return LP_ENO_MEMORY;
    s->d = d;
    s->prompts = o->prompts;
    s->K = o->K;
    s->cycle = o->cycle;
    s->theta = malloc(d * sizeof *s->theta);
    s->W = malloc(d * d * sizeof *s->W);
    s->f = malloc(o->prompts * (size_t)o->K * d * sizeof *s->f);
    if (!s->theta || !s->W || !s->f) {
        lp_gsim_free(s);
        return LP_ENO_MEMORY;
    }
    lp_sim_theta_star(d, o->margin_sd, o->seed, s->theta);
    lp_prng g;
    lp_prng_seed(&g, o->seed ^ 0x6379636c65ULL); /* its own stream: "cycle" */
    double fro = 0.0;
    for (size_t j = 0; j < d; j++) {
        s->W[j * d + j] = 0.0;
        for (size_t k = j + 1; k < d; k++) {
            double x = lp_prng_normal(&g);
            s->W[j * d + k] = x;
            s->W[k * d + j] = -x;
            fro += 2.0 * x * x;
        }
    }
    for (size_t j = 0; j < d * d; j++)
        s->W[j] /= sqrt(fro);
    lp_prng_seed(&g, o->seed ^ (0x63616e64ULL + stream * 0x9e3779b97f4a7c15ULL)); /* "cand" */
    for (size_t j = 0; j < o->prompts * (size_t)o->K * d; j++)
        s->f[j] = lp_prng_normal(&g);
    *out = s;
    return LP_OK;
}

int lp_gsim_labels(const lp_gsim_opts *o, const lp_gsim *t, lp_gp_data **gp, lp_dataset **ds)
{
    if (gp)
        *gp = NULL;
    if (ds)
        *ds = NULL;
    if (o->labels < 1 || !(o->eps > 0.0) || !(o->alpha >= 0.0) || o->alpha > 0.5)
        return LP_EINVALID_ARGUMENT;
    size_t d = t->d, K = (size_t)t->K;
    lp_gp_data *G = gp ? lp_gp_data_new(d) : NULL;
    lp_dataset *D = ds ? lp_dataset_new(d, LP_STORE_F64) : NULL;
    int rc = (gp && !G) || (ds && !D) ? LP_ENO_MEMORY : LP_OK;
    lp_prng g;
    lp_prng_seed(&g, o->seed ^ 0x6c6162656c73ULL); /* "labels" */
    for (size_t i = 0; i < o->labels && rc == LP_OK; i++) {
        size_t p = (size_t)lp_prng_below(&g, t->prompts);
        size_t a0 = (size_t)lp_prng_below(&g, K), a1 = (size_t)lp_prng_below(&g, K - 1);
        a1 += a1 >= a0;
        const double *f0 = t->f + (p * K + a0) * d, *f1 = t->f + (p * K + a1) * d;
        double l = lp_gsim_pref(t, f1, f0);
        int y = lp_prng_bernoulli(&g, 0.5 * (1.0 + l));
        lp_adv_view v = {.truth = l > 0.0, .backdoor = f1[0] > f0[0]};
        int z = lp_corrupt_label(&g, y, o->eps, o->alpha, o->order, o->adv, &v);
        if (G)
            rc = lp_gp_data_add_dense(G, (uint64_t)p, f0, f1, z, o->eps);
        if (rc == LP_OK && D)
            rc = lp_dataset_add_dense(D, f0, f1, z, o->eps, y, NULL, 0);
        if (rc == LP_OK && o->on_pair)
            o->on_pair(o->on_pair_ctx, p, f0, f1, d, y, z, o->eps);
    }
    if (rc != LP_OK) {
        lp_gp_data_free(G);
        lp_dataset_free(D);
        return rc;
    }
    if (gp)
        *gp = G;
    if (ds)
        *ds = D;
    return LP_OK;
}

int lp_gsim_reward_policy(void *model, const double *f, size_t K, size_t d, double *pi)
{
    const lp_model *m = model;
    double r[LP_GP_MAX_K];
    if (K > LP_GP_MAX_K || d != m->d)
        return LP_EINVALID_ARGUMENT;
    for (size_t a = 0; a < K; a++) {
        r[a] = 0.0;
        for (size_t j = 0; j < d; j++)
            r[a] += m->theta[j] * f[a * d + j];
    }
    return lp_policy_probs(LP_LINK_CHIMIX, r, NULL, K, m->beta, pi, NULL, NULL);
}

int lp_gsim_mean_gap(const lp_gsim *t,
                     int (*policy)(void *ctx, const double *f, size_t K, size_t d, double *pi),
                     void *ctx, double *gap)
{
    size_t K = (size_t)t->K, d = t->d;
    double *L = malloc(K * K * sizeof *L), *pi = malloc(K * sizeof *pi);
    int rc = L && pi ? LP_OK : LP_ENO_MEMORY;
    double sum = 0.0;
    for (size_t p = 0; p < t->prompts && rc == LP_OK; p++) {
        const double *f = t->f + p * K * d;
        for (size_t a = 0; a < K; a++)
            for (size_t b = 0; b < K; b++)
                L[a * K + b] = a == b ? 0.0 : lp_gsim_pref(t, f + a * d, f + b * d);
        rc = policy(ctx, f, K, d, pi);
        if (rc == LP_OK)
            sum += lp_gp_duality_gap(L, pi, K);
    }
    free(L);
    free(pi);
    *gap = sum / (double)t->prompts;
    return rc;
}
