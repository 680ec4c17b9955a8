/* evaluate.c — accuracy, cosine, norm ratio, suboptimality. See evaluate.h. */
#include "evaluate.h"

#include "error.h"
#include "policy.h"
#include "prng.h"

#include <math.h>
#include <stdlib.h>

void lp_eval_opts_init(lp_eval_opts *o)
{
    o->pairs = 20000;
    o->prompts = 2000;
    o->K = 4;
    o->beta = 1.0;
    o->link = LP_LINK_CHIMIX;
    o->seed = 1;
}

int lp_evaluate_truth(const double *th, const double *ts, size_t d, const lp_eval_opts *o,
                      lp_eval_result *res)
{
    if (d < 1 || o->K < 2 || !(o->beta > 0.0))
        return LP_EINVALID_ARGUMENT;
    double hh = 0, ss = 0, hs = 0;
    for (size_t j = 0; j < d; j++) {
        hh += th[j] * th[j];
        ss += ts[j] * ts[j];
        hs += th[j] * ts[j];
    }
    res->cosine = hh > 0 && ss > 0 ? hs / sqrt(hh * ss) : 0.0;
    res->norm_ratio = ss > 0 ? sqrt(hh / ss) : NAN;
    size_t K = (size_t)o->K;
    double *rs = malloc(4 * K * sizeof *rs);
    if (rs == NULL)
        return LP_ENO_MEMORY;
    double *rh = rs + K, *ps = rs + 2 * K, *ph = rs + 3 * K;
    lp_prng g;
    lp_prng_seed(&g, o->seed ^ 0x6576616cULL);
    size_t agree = 0;
    for (size_t i = 0; i < o->pairs; i++) {
        double mt = 0, mh = 0;
        for (size_t j = 0; j < d; j++) {
            double x = lp_prng_normal(&g) - lp_prng_normal(&g);
            mt += ts[j] * x;
            mh += th[j] * x;
        }
        agree += (mt > 0) == (mh > 0);
    }
    res->accuracy = o->pairs ? (double)agree / (double)o->pairs : NAN;
    double js = 0, jh = 0;
    int rc = LP_OK;
    for (size_t p = 0; p < o->prompts && rc == LP_OK; p++) {
        for (size_t k = 0; k < K; k++) {
            double a = 0, b = 0;
            for (size_t j = 0; j < d; j++) {
                double x = lp_prng_normal(&g);
                a += ts[j] * x;
                b += th[j] * x;
            }
            rs[k] = a;
            rh[k] = b;
        }
        rc = lp_policy_probs(o->link, rs, NULL, K, o->beta, ps, NULL, NULL);
        if (rc == LP_OK)
            rc = lp_policy_probs(o->link, rh, NULL, K, o->beta, ph, NULL, NULL);
        for (size_t k = 0; k < K && rc == LP_OK; k++) {
            js += ps[k] * rs[k];
            jh += ph[k] * rs[k];
        }
    }
    free(rs);
    if (rc != LP_OK)
        return rc;
    double np = o->prompts ? (double)o->prompts : NAN;
    res->j_star = js / np;
    res->j_hat = jh / np;
    res->suboptimality = res->j_star - res->j_hat;
    return LP_OK;
}

double lp_evaluate_accuracy(const lp_dataset *ds, const double *theta)
{
    if (ds->n == 0)
        return NAN;
    double s = 0;
    for (size_t i = 0; i < ds->n; i++) {
        double m = lp_dataset_row_dot(ds, i, theta);
        double u = ds->z[i] ? m : -m;
        s += u > 0 ? 1.0 : u == 0 ? 0.5 : 0.0;
    }
    return s / (double)ds->n;
}
