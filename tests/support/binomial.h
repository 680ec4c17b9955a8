/*
 * binomial.h — tolerances of statistical tests: quantiles of the binomial
 * distribution of a count (how many intervals covered, how many runs
 * flagged), so that a check fails by chance with a known probability.
 */
#ifndef LP_BINOMIAL_H
#define LP_BINOMIAL_H

/* The largest k with P(X < k) <= tail for X ~ Binomial(n, p): a count below
 * it happens with probability at most tail. */
int binom_lower(int n, double p, double tail);
/* The smallest k with P(X > k) <= tail for X ~ Binomial(n, p). */
int binom_upper(int n, double p, double tail);

#endif
