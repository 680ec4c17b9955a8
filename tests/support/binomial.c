/* binomial.c — binomial tolerances. See binomial.h. */
#include "binomial.h"

#include <math.h>

static double binom_pmf(int n, int k, double p)
{
    return exp(lgamma(n + 1.0) - lgamma(k + 1.0) - lgamma(n - k + 1.0) + k * log(p) +
               (n - k) * log1p(-p));
}

int binom_lower(int n, double p, double tail)
{
    double cdf = 0;
    for (int k = 0; k <= n; k++) {
        double pk = binom_pmf(n, k, p);
        if (cdf + pk > tail)
            return k;
        cdf += pk;
    }
    return n;
}

int binom_upper(int n, double p, double tail)
{
    double sf = 0;
    for (int k = n; k >= 0; k--) {
        double pk = binom_pmf(n, k, p);
        if (sf + pk > tail)
            return k;
        sf += pk;
    }
    return 0;
}
