/*
 * prng.h — the project's seeded pseudo-random generator for simulation.
 *
 * xoshiro256** seeded through splitmix64: fast, 2^256-1 period, and the
 * same sequence on every platform for a given seed, so that synthetic data,
 * simulated corruption, fold splits and SGD shuffles are reproducible.
 * NEVER used for an annotator's real label: real randomized response uses
 * the OS CSPRNG (common/rr.h). Bernoulli draws go through
 * lp_bernoulli_from() so that probabilities are honoured exactly.
 */
#ifndef LP_PRNG_H
#define LP_PRNG_H

#include <stdint.h>

typedef struct lp_prng {
    uint64_t s[4];
} lp_prng;

/* Seeds the state from a 64-bit seed (any value, including 0). */
void lp_prng_seed(lp_prng *g, uint64_t seed);
/* Next 64 random bits. */
uint64_t lp_prng_next(lp_prng *g);
/* Adapter for lp_bernoulli_from(): state is an lp_prng*. */
uint64_t lp_prng_next64(void *state);
/* Uniform double in [0,1) with 53 random bits. */
double lp_prng_uniform(lp_prng *g);
/* Uniform integer in [0, bound), bound > 0, without modulo bias. */
uint64_t lp_prng_below(lp_prng *g, uint64_t bound);
/* Standard normal variate (Marsaglia polar method; deterministic). */
double lp_prng_normal(lp_prng *g);
/* Bernoulli(p) with exact comparison (common/rr.h); p in [0,1]. */
int lp_prng_bernoulli(lp_prng *g, double p);

#endif
