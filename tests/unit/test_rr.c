/*
 * test_rr.c — the randomized-response mechanism: constants and their limits,
 * the exact Bernoulli comparison, and statistical tests of the CSPRNG-driven
 * mechanism.
 *
 * Statistical tolerances: a count k of N Bernoulli(q) draws is checked
 * against N*q +- Z*sqrt(N*q*(1-q)) with Z = 5.5 (two-sided false-alarm
 * probability ~4e-8 per check under the normal approximation, which is
 * accurate here since N*q*(1-q) > 1000 in every case). The same bounds are
 * applied to a seeded generator (reproducible) and to the real CSPRNG path
 * (which cannot be seeded, so its bound must make a false alarm negligible).
 */
#include "check.h"
#include "error.h"
#include "rr.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

#define Z_BOUND 5.5
#define DRAWS 200000

static uint64_t splitmix64(void *state)
{
    uint64_t *s = state;
    uint64_t z = (*s += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

struct scripted {
    const uint64_t *words;
    int next;
};

static uint64_t scripted_next(void *state)
{
    struct scripted *s = state;
    return s->words[s->next++];
}

static void test_constants(void)
{
    CHECK_NEAR(lp_rr_flip_prob(1.0), 1.0 / (1.0 + exp(1.0)), 1e-16);
    CHECK_NEAR(lp_rr_flip_prob(1e-12), 0.5, 1e-12);
    CHECK(lp_rr_flip_prob(800.0) == 0.0);
    CHECK(lp_rr_flip_prob(INFINITY) == 0.0);
    CHECK(lp_rr_flip_prob(50.0) > 0.0); /* tiny but not flushed to zero */
    CHECK_NEAR(lp_rr_flip_prob(50.0) / exp(-50.0), 1.0, 1e-12);

    CHECK_NEAR(lp_rr_debias(1.0), (exp(1.0) + 1) / (exp(1.0) - 1), 1e-14);
    /* Small eps: c ~ 2/eps + eps/6; the naive form loses ~all digits here. */
    CHECK_NEAR(lp_rr_debias(1e-9) * 1e-9 / 2.0, 1.0, 1e-12);
    CHECK(lp_rr_debias(800.0) == 1.0); /* naive (e^eps+1)/(e^eps-1) is NaN */
    CHECK(lp_rr_debias(INFINITY) == 1.0);
    CHECK(!isnan(lp_rr_debias(1e300)));

    /* E[c * zbar] identity: c(eps) * (1 - 2q(eps)) = 1. */
    const double eps_list[] = {1e-6, 0.1, 0.5, 1, 2, 5, 30, 700};
    for (size_t i = 0; i < sizeof eps_list / sizeof eps_list[0]; i++)
        CHECK_NEAR(lp_rr_debias(eps_list[i]) * (1 - 2 * lp_rr_flip_prob(eps_list[i])), 1.0, 1e-9);
}

static void test_epsilon_check(void)
{
    CHECK_ERR(lp_epsilon_check(1.0, 0), LP_OK);
    CHECK_ERR(lp_epsilon_check(1e-300, 0), LP_OK);
    CHECK_ERR(lp_epsilon_check(0.0, 1), LP_EBAD_EPSILON);
    CHECK_ERR(lp_epsilon_check(-1.0, 1), LP_EBAD_EPSILON);
    CHECK_ERR(lp_epsilon_check(NAN, 1), LP_EBAD_EPSILON);
    CHECK_ERR(lp_epsilon_check(-INFINITY, 1), LP_EBAD_EPSILON);
    CHECK_ERR(lp_epsilon_check(INFINITY, 0), LP_EBAD_EPSILON);
    CHECK_ERR(lp_epsilon_check(INFINITY, 1), LP_OK);
    int z;
    CHECK_ERR(lp_rr_privatize(2, 1.0, &z), LP_EBAD_LABEL);
    CHECK_ERR(lp_rr_privatize(1, -1.0, &z), LP_EBAD_EPSILON);
    CHECK_ERR(lp_rr_privatize(1, INFINITY, &z), LP_OK);
    CHECK_INT(z, 1);
}

/* The comparison is exact: decided word by word against p's expansion. */
static void test_bernoulli_exact(void)
{
    int out;
    /* p = 1/2: expansion 0x8000.... */
    uint64_t below[] = {0x7FFFFFFFFFFFFFFFull};
    struct scripted s = {below, 0};
    CHECK_ERR(lp_bernoulli_from(0.5, scripted_next, &s, &out), LP_OK);
    CHECK_INT(out, 1);
    uint64_t equal[] = {0x8000000000000000ull, 0};
    s = (struct scripted){equal, 0};
    lp_bernoulli_from(0.5, scripted_next, &s, &out);
    CHECK_INT(out, 0); /* U >= p */
    CHECK(s.next <= 2);

    /* p = 2^-70: the first word of p is zero; the second holds its bit. */
    double tiny = ldexp(1.0, -70);
    uint64_t w1[] = {0, 0x03FFFFFFFFFFFFFFull}; /* U < 2^-70 */
    s = (struct scripted){w1, 0};
    lp_bernoulli_from(tiny, scripted_next, &s, &out);
    CHECK_INT(out, 1);
    uint64_t w2[] = {0, 0x0400000000000000ull, 0}; /* U == p */
    s = (struct scripted){w2, 0};
    lp_bernoulli_from(tiny, scripted_next, &s, &out);
    CHECK_INT(out, 0);
    uint64_t w3[] = {1}; /* U > p from the first word */
    s = (struct scripted){w3, 0};
    lp_bernoulli_from(tiny, scripted_next, &s, &out);
    CHECK_INT(out, 0);
    CHECK_INT(s.next, 1);

    /* Smallest subnormal 2^-1074: 1 only if U's first 1074 bits are zero,
     * decided in word 16 (bits 1025..1088). */
    uint64_t zeros[20] = {0};
    s = (struct scripted){zeros, 0};
    lp_bernoulli_from(4.9406564584124654e-324, scripted_next, &s, &out);
    CHECK_INT(out, 1);
    CHECK_INT(s.next, 17);
    uint64_t one_bit[] = {0, 1};
    s = (struct scripted){one_bit, 0};
    lp_bernoulli_from(4.9406564584124654e-324, scripted_next, &s, &out);
    CHECK_INT(out, 0);

    CHECK_ERR(lp_bernoulli_from(NAN, scripted_next, &s, &out), LP_EINVALID_ARGUMENT);
    lp_bernoulli_from(0.0, scripted_next, &s, &out);
    CHECK_INT(out, 0);
    lp_bernoulli_from(1.0, scripted_next, &s, &out);
    CHECK_INT(out, 1);
}

static void check_binomial(const char *what, double eps, long k, long n, double p)
{
    double mean = n * p, sd = sqrt(n * p * (1 - p));
    int ok = fabs(k - mean) <= Z_BOUND * sd;
    check_record(ok, __FILE__, __LINE__, "%s eps=%g: %ld of %ld, expected %.1f +- %.1f", what, eps,
                 k, n, mean, Z_BOUND * sd);
}

static void test_flip_rate(void)
{
    const double eps_list[] = {0.1, 1.0, 5.0};
    for (size_t e = 0; e < 3; e++) {
        double eps = eps_list[e], q = lp_rr_flip_prob(eps);
        /* Seeded: reproducible. */
        uint64_t seed = 12345 + e;
        long flips = 0;
        for (long i = 0; i < DRAWS; i++) {
            int f;
            lp_bernoulli_from(q, splitmix64, &seed, &f);
            flips += f;
        }
        check_binomial("seeded flip rate", eps, flips, DRAWS, q);

        /* The real mechanism: CSPRNG, both true labels. */
        long csprng_flips = 0;
        for (long i = 0; i < DRAWS; i++) {
            int y = (int)(i & 1), z;
            lp_rr_privatize(y, eps, &z);
            csprng_flips += z != y;
        }
        check_binomial("CSPRNG flip rate", eps, csprng_flips, DRAWS, q);
    }
}

/*
 * Debiasing: with 70% of true labels 1, E[c * (2z-1)] = 0.4 exactly. Each
 * term has variance c^2 * 4q(1-q) given y, so the sample mean's standard
 * error is c*sqrt(4q(1-q)/N); accept within Z_BOUND standard errors. The
 * un-debiased mean is off by 0.4*(1 - 1/c), which this bound must detect
 * (checked, so the test cannot pass vacuously).
 */
static void test_debiased_mean(void)
{
    const double eps_list[] = {0.1, 1.0, 5.0};
    for (size_t e = 0; e < 3; e++) {
        double eps = eps_list[e], q = lp_rr_flip_prob(eps), c = lp_rr_debias(eps);
        double sum = 0, raw = 0;
        for (long i = 0; i < DRAWS; i++) {
            int y = (i % 10) < 7, z;
            lp_rr_privatize(y, eps, &z);
            sum += c * (2 * z - 1);
            raw += 2 * z - 1;
        }
        double se = c * sqrt(4 * q * (1 - q) / DRAWS);
        double mean = sum / DRAWS;
        check_record(fabs(mean - 0.4) <= Z_BOUND * se, __FILE__, __LINE__,
                     "debiased mean eps=%g: %.5f vs 0.4 (bound %.5f)", eps, mean, Z_BOUND * se);
        if (0.4 * (1 - 1 / c) > 2 * Z_BOUND * se)
            check_record(fabs(raw / DRAWS - 0.4) > Z_BOUND * se / c, __FILE__, __LINE__,
                         "raw mean eps=%g is biased: %.5f", eps, raw / DRAWS);
    }
}

int main(void)
{
    if (lp_rng_init() != LP_OK) {
        fprintf(stderr, "libsodium init failed\n");
        return 1;
    }
    test_constants();
    test_epsilon_check();
    test_bernoulli_exact();
    test_flip_rate();
    test_debiased_mean();
    return check_summary();
}
