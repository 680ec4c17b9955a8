/* simulate.c — synthetic Bradley-Terry data and label corruption. See simulate.h. */
#include "simulate.h"

#include "error.h"
#include "losses.h"
#include "rr.h"

#include <assert.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

const char *lp_order_name(lp_order o)
{
    return o == LP_ORDER_CTL ? "CTL" : o == LP_ORDER_LTC ? "LTC" : o == LP_ORDER_CLC ? "CLC" : NULL;
}

int lp_order_parse(const char *name, lp_order *out)
{
    if (strcasecmp(name, "ctl") == 0)
        *out = LP_ORDER_CTL;
    else if (strcasecmp(name, "ltc") == 0)
        *out = LP_ORDER_LTC;
    else if (strcasecmp(name, "clc") == 0)
        *out = LP_ORDER_CLC;
    else
        return LP_EINVALID_ARGUMENT;
    return LP_OK;
}

static int adversary(lp_adversary adv, int y, int coin, const lp_adv_view *v)
{
    switch (adv) {
    case LP_ADV_FLIP:
        return 1 - y; /* wrong w.r.t. the clean label in both orders (mask scheme) */
    case LP_ADV_ANTI:
        return 1 - v->truth;
    case LP_ADV_BACKDOOR:
        return v->backdoor;
    case LP_ADV_CONSTANT0:
        return 0;
    case LP_ADV_CONSTANT1:
        return 1;
    case LP_ADV_RANDOM:
        return coin;
    default:
        assert(0);
        return y;
    }
}

int lp_corrupt_label(lp_prng *g, int y, double eps, double alpha, lp_order order, lp_adversary adv,
                     const lp_adv_view *view)
{
    assert(y == 0 || y == 1);
    double a1 = order == LP_ORDER_CLC ? alpha / 2 : alpha;
    int huber = lp_prng_bernoulli(g, a1);
    int flip = lp_prng_bernoulli(g, lp_rr_flip_prob(eps));
    int coin = lp_prng_bernoulli(g, 0.5);
    int l = y;
    if (order == LP_ORDER_CTL || order == LP_ORDER_CLC) {
        if (huber)
            l = adversary(adv, y, coin, view);
        if (flip)
            l = 1 - l;
        if (order == LP_ORDER_CLC && lp_prng_bernoulli(g, alpha / 2))
            l = adversary(adv, y, coin, view);
    } else {
        if (flip)
            l = 1 - l;
        if (huber)
            l = adversary(adv, y, coin, view);
    }
    return l;
}

void lp_sim_opts_init(lp_sim_opts *o)
{
    memset(o, 0, sizeof *o);
    o->n = 1000;
    o->d = 16;
    o->K = 4;
    o->eps = INFINITY;
    o->alpha = 0.0;
    o->order = LP_ORDER_CTL;
    o->adv = LP_ADV_FLIP;
    o->margin_sd = 2.0;
    o->storage = LP_STORE_F64;
}

void lp_sim_theta_star(size_t d, double margin_sd, uint64_t seed, double *theta)
{
    lp_prng g;
    lp_prng_seed(&g, seed ^ 0x7468657461ULL); /* its own stream: "theta" */
    double s = 0.0;
    for (size_t j = 0; j < d; j++) {
        theta[j] = lp_prng_normal(&g);
        s += theta[j] * theta[j];
    }
    double scale = margin_sd / sqrt(2.0) / sqrt(s);
    for (size_t j = 0; j < d; j++)
        theta[j] *= scale;
}

int lp_simulate(const lp_sim_opts *o, const double *theta_star, lp_dataset **out)
{
    *out = NULL;
    if (o->n < 1 || o->d < 1 || o->K < 2 || !(o->eps > 0.0) || !(o->alpha >= 0.0) ||
        o->alpha > 0.5 || (o->adv == LP_ADV_BACKDOOR && o->backdoor_k >= o->d) ||
        o->storage == LP_STORE_CSR)
        return LP_EINVALID_ARGUMENT;
    size_t n = o->n, d = o->d;
    lp_dataset *ds = lp_dataset_new(d, o->storage);
    double *f = malloc(2 * d * sizeof *f);
    if (ds == NULL || f == NULL) {
        lp_dataset_free(ds);
        free(f);
        return LP_ENO_MEMORY;
    }
    lp_prng g;
    lp_prng_seed(&g, o->seed);
    int rc = LP_OK;
    for (size_t i = 0; i < n && rc == LP_OK; i++) {
        double *f0 = f, *f1 = f + d, m = 0.0;
        for (size_t j = 0; j < d; j++) {
            f0[j] = lp_prng_normal(&g);
            f1[j] = lp_prng_normal(&g);
        }
        if (o->unit_features) {
            double n0 = 0.0, n1 = 0.0;
            for (size_t j = 0; j < d; j++) {
                n0 += f0[j] * f0[j];
                n1 += f1[j] * f1[j];
            }
            for (size_t j = 0; j < d; j++) {
                f0[j] /= sqrt(n0);
                f1[j] /= sqrt(n1);
            }
        }
        for (size_t j = 0; j < d; j++) {
            if (o->storage == LP_STORE_F32) { /* the stored values are the truth */
                f0[j] = (double)(float)f0[j];
                f1[j] = (double)(float)f1[j];
            }
        }
        for (size_t j = 0; j < d; j++)
            m += theta_star[j] * (f1[j] - f0[j]);
        int y = lp_prng_bernoulli(&g, lp_sigmoid(m));
        lp_adv_view v = {.truth = m > 0.0,
                         .backdoor =
                             o->adv == LP_ADV_BACKDOOR && f1[o->backdoor_k] > f0[o->backdoor_k]};
        int z = lp_corrupt_label(&g, y, o->eps, o->alpha, o->order, o->adv, &v);
        rc = lp_dataset_add_dense(ds, f0, f1, z, o->eps, y, NULL, 0);
        if (rc == LP_OK && o->on_pair != NULL)
            o->on_pair(o->on_pair_ctx, f0, f1, d, y, z, o->eps);
    }
    free(f);
    if (rc == LP_OK && o->user_labels > 0) {
        if ((ds->user = malloc(n * sizeof *ds->user)) == NULL)
            rc = LP_ENO_MEMORY;
        for (size_t i = 0; rc == LP_OK && i < n; i++)
            ds->user[i] = (int64_t)(i / o->user_labels);
    }
    if (rc != LP_OK) {
        lp_dataset_free(ds);
        return rc;
    }
    *out = ds;
    return LP_OK;
}
