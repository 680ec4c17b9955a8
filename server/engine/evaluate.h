/*
 * evaluate.h — how good a fitted theta is.
 *
 * Against a known theta* (simulation): accuracy of the sign of the margin
 * on fresh clean pairs, cosine(theta_hat, theta*), the norm ratio
 * ||theta_hat||/||theta*||, and the policy suboptimality
 * J(pi*_beta) - J(pi_hat), J(pi) = E_x sum_k pi(a_k|x) r*(x,a_k), over fresh
 * prompts with K candidates (features N(0, I)), where pi*_beta is the
 * link's policy for the true reward and pi_hat the same link applied to
 * theta_hat's rewards (uniform pi_ref). Fresh draws come from the seeded
 * project PRNG.
 *
 * On a dataset: held-out accuracy, the fraction of labels whose observed
 * preference the model shares (zbar m > 0; a tie m = 0 counts 1/2).
 */
#ifndef LP_EVALUATE_H
#define LP_EVALUATE_H

#include "dataset.h"
#include "losses.h"

#include <stddef.h>
#include <stdint.h>

typedef struct lp_eval_opts {
    size_t pairs;   /* fresh pairs for accuracy (default 20000) */
    size_t prompts; /* fresh prompts for suboptimality (default 2000) */
    int K;          /* candidates per prompt (default 4) */
    double beta;    /* policy temperature (default 1) */
    lp_link_kind link;
    uint64_t seed;
} lp_eval_opts;

typedef struct lp_eval_result {
    double accuracy, cosine, norm_ratio;
    double j_star, j_hat, suboptimality;
} lp_eval_result;

void lp_eval_opts_init(lp_eval_opts *o);

/* Returns 0, LP_EINVALID_ARGUMENT or LP_ENO_MEMORY. */
int lp_evaluate_truth(const double *theta_hat, const double *theta_star, size_t d,
                      const lp_eval_opts *o, lp_eval_result *res);

/* Held-out accuracy on ds (see above); NAN for an empty dataset. */
double lp_evaluate_accuracy(const lp_dataset *ds, const double *theta);

#endif
