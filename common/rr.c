/* rr.c — randomized response over the libsodium CSPRNG. See rr.h. */
#include "rr.h"

#include "error.h"

#include <math.h>
#include <sodium.h>

int lp_rng_init(void)
{
    return sodium_init() < 0 ? LP_ERNG : LP_OK;
}

double lp_rr_flip_prob(double eps)
{
    if (isinf(eps) && eps > 0)
        return 0.0;
    /* exp(eps) overflows to +inf above ~709 and 1/inf = 0: the right limit. */
    return 1.0 / (1.0 + exp(eps));
}

double lp_rr_debias(double eps)
{
    if (isinf(eps) && eps > 0)
        return 1.0;
    return 1.0 / tanh(eps / 2.0);
}

int lp_epsilon_check(double eps, int allow_infinite)
{
    if (isnan(eps) || eps <= 0.0)
        return LP_EBAD_EPSILON;
    if (isinf(eps))
        return allow_infinite ? LP_OK : LP_EBAD_EPSILON;
    return LP_OK;
}

/*
 * Bits 64k+1 .. 64k+64 after the binary point of p = mant * 2^(exp2 - 53),
 * as one 64-bit word (most significant bit first).
 */
static uint64_t expansion_word(uint64_t mant, int exp2, int k)
{
    int shift = exp2 - 53 + 64 * (k + 1);
    if (shift >= 64 || shift <= -64)
        return 0;
    return shift >= 0 ? mant << shift : mant >> -shift;
}

int lp_bernoulli_from(double p, uint64_t (*next64)(void *state), void *state, int *out)
{
    if (isnan(p))
        return LP_EINVALID_ARGUMENT;
    if (p <= 0.0) {
        *out = 0;
        return LP_OK;
    }
    if (p >= 1.0) {
        *out = 1;
        return LP_OK;
    }
    int exp2;
    double frac = frexp(p, &exp2); /* p = frac * 2^exp2, frac in [0.5, 1) */
    uint64_t mant = (uint64_t)ldexp(frac, 53);
    /* U < p is decided by the first word where U and p differ. Past the last
     * word holding bits of p, p's expansion is all zeros, so U >= p. */
    int words = (53 - exp2) / 64 + 1;
    for (int k = 0; k < words; k++) {
        uint64_t u = next64(state);
        uint64_t w = expansion_word(mant, exp2, k);
        if (u != w) {
            *out = u < w;
            return LP_OK;
        }
    }
    *out = 0;
    return LP_OK;
}

uint64_t lp_csprng_next64(void *state)
{
    (void)state;
    uint64_t v;
    randombytes_buf(&v, sizeof v);
    return v;
}

int lp_bernoulli(double p, int *out)
{
    return lp_bernoulli_from(p, lp_csprng_next64, NULL, out);
}

int lp_rr_privatize(int y, double eps, int *z)
{
    if (y != 0 && y != 1)
        return LP_EBAD_LABEL;
    int rc = lp_epsilon_check(eps, 1);
    if (rc != LP_OK)
        return rc;
    int flip;
    rc = lp_bernoulli(lp_rr_flip_prob(eps), &flip);
    if (rc != LP_OK)
        return rc;
    *z = y ^ flip;
    return LP_OK;
}
