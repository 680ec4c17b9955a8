/*
 * rr.h — the randomized-response (RR) mechanism and its constants.
 *
 * A label y in {0,1} is released as z = y with probability e^eps/(1+e^eps)
 * and as 1-y otherwise: eps-local differential privacy for the label. The
 * flip probability is q(eps) = 1/(1+e^eps); the debiasing factor is
 * c(eps) = (e^eps+1)/(e^eps-1) = 1/tanh(eps/2), so that E[c*(2z-1)] =
 * 2P(y=1)-1. eps = +INFINITY means "not privatized" (q = 0, c = 1).
 *
 * Randomness comes only from the OS CSPRNG through libsodium; lp_rng_init()
 * must succeed before any draw, and a failure is an error, never a fallback.
 */
#ifndef LP_RR_H
#define LP_RR_H

#include <stdint.h>

/* Initializes libsodium. Returns LP_OK or LP_ERNG. Safe to call repeatedly. */
int lp_rng_init(void);

/* Flip probability q(eps) = 1/(1+e^eps); 0 for eps = +inf. eps must be > 0. */
double lp_rr_flip_prob(double eps);

/* Debiasing factor c(eps) = 1/tanh(eps/2) (>= 1); 1 for eps = +inf. */
double lp_rr_debias(double eps);

/*
 * Validates a privacy parameter: finite and > 0, or +inf when allow_infinite.
 * Returns LP_OK or LP_EBAD_EPSILON.
 */
int lp_epsilon_check(double eps, int allow_infinite);

/*
 * Draws a Bernoulli(p) bit with exact (infinite-precision) comparison of a
 * uniform variate against the binary expansion of p, 64 CSPRNG bits at a
 * time: every double p in [0,1] is honoured exactly, however small.
 * Writes 0 or 1 to *out. Returns LP_OK or LP_EINVALID_ARGUMENT (p NaN).
 */
int lp_bernoulli(double p, int *out);

/*
 * Bernoulli(p) driven by a caller-supplied 64-bit source instead of the
 * CSPRNG. Only for reproducible simulation and for testing the comparison;
 * never used on an annotator's real label.
 */
int lp_bernoulli_from(double p, uint64_t (*next64)(void *state), void *state, int *out);

/*
 * 64 bits from the OS CSPRNG (libsodium randombytes; lp_rng_init first).
 * The state is ignored (NULL): the product's random source wherever an
 * lp_prng-style callback is taken (e.g. a differentially private release).
 */
uint64_t lp_csprng_next64(void *state);

/* Randomized response: *z = y flipped with probability q(eps). y in {0,1}. */
int lp_rr_privatize(int y, double eps, int *z);

#endif
