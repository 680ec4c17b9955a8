/* prng.c — xoshiro256** for reproducible simulation. See prng.h. */
#include "prng.h"

#include "rr.h"

#include <assert.h>
#include <math.h>

static uint64_t splitmix64(uint64_t *x)
{
    uint64_t z = (*x += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
}

void lp_prng_seed(lp_prng *g, uint64_t seed)
{
    uint64_t x = seed;
    for (int i = 0; i < 4; i++)
        g->s[i] = splitmix64(&x);
}

static uint64_t rotl(uint64_t x, int k)
{
    return (x << k) | (x >> (64 - k));
}

uint64_t lp_prng_next(lp_prng *g)
{
    uint64_t *s = g->s;
    uint64_t result = rotl(s[1] * 5, 7) * 9;
    uint64_t t = s[1] << 17;
    s[2] ^= s[0];
    s[3] ^= s[1];
    s[1] ^= s[2];
    s[0] ^= s[3];
    s[2] ^= t;
    s[3] = rotl(s[3], 45);
    return result;
}

uint64_t lp_prng_next64(void *state)
{
    return lp_prng_next((lp_prng *)state);
}

double lp_prng_uniform(lp_prng *g)
{
    return (double)(lp_prng_next(g) >> 11) * 0x1.0p-53;
}

uint64_t lp_prng_below(lp_prng *g, uint64_t bound)
{
    assert(bound > 0);
    uint64_t limit = UINT64_MAX - UINT64_MAX % bound;
    uint64_t r;
    do
        r = lp_prng_next(g);
    while (r >= limit);
    return r % bound;
}

double lp_prng_normal(lp_prng *g)
{
    for (;;) {
        double u = 2.0 * lp_prng_uniform(g) - 1.0;
        double v = 2.0 * lp_prng_uniform(g) - 1.0;
        double s = u * u + v * v;
        if (s > 0.0 && s < 1.0)
            return u * sqrt(-2.0 * log(s) / s);
    }
}

int lp_prng_bernoulli(lp_prng *g, double p)
{
    int out = 0;
    int rc = lp_bernoulli_from(p, lp_prng_next64, g, &out);
    assert(rc == 0);
    (void)rc;
    return out;
}
