/*
 * policy.h — from implicit rewards r_k = theta^T f(x, a_k) over a
 * candidate set to policy probabilities (docs/design.md §3.4).
 *
 * chi-mix link (square-chipo, chipo): pi_k = pi_ref,k phi^{-1}((r_k - lambda)/beta)
 * with phi(u) = u + log u and lambda the unique normaliser, found by
 * bisection; phi^{-1} by Newton on e^y + y = v (y = log phi^{-1}(v)),
 * never forming e^v. Rewards are shifted by their maximum first, so lambda
 * is computed at the scale of beta and probabilities sum to 1 within a few
 * ulps even for rewards of +-1e6; candidates far below the best get
 * probabilities that underflow to 0 while their log-ratios stay exact.
 * KL link (DPO family): pi_k proportional to pi_ref,k exp(r_k / beta).
 * pi_ref is uniform unless log-probabilities are given (renormalised over
 * the candidate set).
 */
#ifndef LP_POLICY_H
#define LP_POLICY_H

#include "losses.h"

#include <stddef.h>

#define LP_POLICY_MAX_K 100000 /* cap on candidates per prompt */

/* y = log phi^{-1}(v): the solution of e^y + y = v (any finite v). */
double lp_phi_inv_log(double v);
/* phi^{-1}(v) = exp(lp_phi_inv_log(v)) (underflows to 0 for v << 0). */
double lp_phi_inv(double v);

/*
 * Policy over K candidates (1 <= K <= LP_POLICY_MAX_K): rewards r[K]
 * (finite), optional reference log-probabilities log_ref[K] (NULL:
 * uniform), beta > 0. Writes pi[K]; when non-NULL, logratio[K] =
 * log(pi_k/pi_ref,k) (finite even where pi_k underflows) and *lambda (the
 * chi-mix normaliser; for KL, beta times the log-partition). All arrays
 * are caller-owned. Returns 0 or LP_EINVALID_ARGUMENT.
 */
int lp_policy_probs(lp_link_kind link, const double *r, const double *log_ref, size_t K,
                    double beta, double *pi, double *logratio, double *lambda);

#endif
