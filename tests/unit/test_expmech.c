/*
 * test_expmech.c — the exponential mechanism of Algorithm 2 (expmech.h,
 * mechanism.h): candidate sets, the loss (GEMM against a plain loop), the
 * sensitivity bound, the output distribution, an empirical privacy audit on
 * neighbouring datasets, and the refusals.
 *
 * Statistical tolerances (all draws from seeded lp_prng streams, so every
 * run is the same; the bounds say how often a correct mechanism would fail
 * by chance):
 * - Frequencies: Pearson's X^2 = sum (O_k - N p_k)^2 / (N p_k) over K
 *   outcomes with every N p_k >= 5 (checked) is chi-square with K-1 degrees
 *   of freedom; the bound is its upper quantile at tail 1e-6 by the
 *   Wilson-Hilferty approximation (z = 4.753). The same statistic against a
 *   wrong temperature must exceed the bound (the test has power).
 * - Audit (the per-outcome test of Google's DP stochastic tester): with
 *   counts c, c' of an outcome in N runs on D and D', the mechanism is
 *   declared to violate eps-DP when the lower confidence bound of p exceeds
 *   e^eps times the upper bound of p' (normal bounds p^ +- Z sqrt(p^(1-p^)/N)
 *   + 1/N, Z = 5: each bound fails with probability < 3e-7). A correct
 *   mechanism passes; one at twice the privacy loss (temperature eps/4) is
 *   caught.
 */
#include "centralstudy.h"
#include "check.h"
#include "error.h"
#include "expmech.h"
#include "mechanism.h"
#include "prng.h"
#include "rr.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define CHI2_Z 4.753
#define AUDIT_Z 5.0

/* Upper chi-square quantile (Wilson-Hilferty) for df degrees of freedom. */
static double chi2_bound(int df)
{
    double a = 2.0 / (9.0 * df);
    double t = 1.0 - a + CHI2_Z * sqrt(a);
    return df * t * t * t;
}

/* n dense rows x0 = 0, x1 ~ N(0, I_d), labels from a logistic model. */
static lp_dataset *random_data(size_t n, size_t d, lp_storage st, uint64_t seed)
{
    lp_dataset *ds = lp_dataset_new(d, st);
    lp_prng g;
    lp_prng_seed(&g, seed);
    double x0[16] = {0}, x1[16];
    char msg[128];
    for (size_t i = 0; i < n; i++) {
        double m = 0.0;
        for (size_t j = 0; j < d; j++) {
            x1[j] = lp_prng_normal(&g);
            m += (j % 2 ? -1.0 : 1.5) * x1[j];
        }
        int z = lp_prng_bernoulli(&g, 1.0 / (1.0 + exp(-m)));
        CHECK_ERR(lp_dataset_add_dense(ds, x0, x1, z, INFINITY, z, msg, sizeof msg), LP_OK);
    }
    return ds;
}

/* The same data in CSR storage (every value stored). */
static lp_dataset *as_csr(const lp_dataset *dense)
{
    lp_dataset *ds = lp_dataset_new(dense->d, LP_STORE_CSR);
    uint32_t idx[16];
    double v0[16] = {0}, v1[16];
    for (size_t j = 0; j < dense->d; j++)
        idx[j] = (uint32_t)j;
    char msg[128];
    for (size_t i = 0; i < dense->n; i++) {
        for (size_t j = 0; j < dense->d; j++)
            v1[j] = dense->xd[i * dense->d + j];
        lp_sparse f0 = {.nnz = 0, .idx = idx, .val = v0},
                  f1 = {.nnz = dense->d, .idx = idx, .val = v1};
        CHECK_ERR(lp_dataset_add_sparse(ds, &f0, &f1, dense->z[i], INFINITY, -1, msg, sizeof msg),
                  LP_OK);
    }
    return ds;
}

static lp_candset *build(const char *spec, size_t d, double r, const double *center)
{
    lp_cand_kind kind;
    size_t param;
    uint64_t seed;
    int has_seed;
    char msg[256];
    lp_candset *c = NULL;
    if (lp_candset_parse(spec, &kind, &param, &seed, &has_seed, msg, sizeof msg) != LP_OK ||
        lp_candset_build(kind, param, d, r, seed, center, &c, msg, sizeof msg) != LP_OK)
        fprintf(stderr, "build %s: %s\n", spec, msg);
    return c;
}

static void test_parse(void)
{
    lp_cand_kind kind;
    size_t param;
    uint64_t seed;
    int has;
    char msg[256];
    CHECK_ERR(lp_candset_parse("net:500", &kind, &param, &seed, &has, msg, sizeof msg), LP_OK);
    CHECK(kind == LP_CAND_NET && param == 500 && !has);
    CHECK_ERR(lp_candset_parse("around:7:seed=42", &kind, &param, &seed, &has, msg, sizeof msg),
              LP_OK);
    CHECK(kind == LP_CAND_AROUND && param == 7 && has && seed == 42);
    CHECK_ERR(lp_candset_parse("grid:9", &kind, &param, &seed, &has, msg, sizeof msg), LP_OK);
    CHECK(kind == LP_CAND_GRID && param == 9);
    const char *bad[] = {"net",
                         "net:",
                         "net:0",
                         "net:-3",
                         "ball:5",
                         "net:5:seed=",
                         "net:5:seed=-1",
                         "net:5:salt",
                         "net:5x",
                         "grid:2000000",
                         "net:5:seed=9007199254740992",
                         "net: 5",
                         "net:+5",
                         NULL};
    for (int i = 0; bad[i]; i++) {
        msg[0] = '\0';
        CHECK_ERR(lp_candset_parse(bad[i], &kind, &param, &seed, &has, msg, sizeof msg),
                  LP_EINVALID_ARGUMENT);
        CHECK(strlen(msg) > 0);
    }
    CHECK_ERR(lp_candset_parse(NULL, &kind, &param, &seed, &has, msg, sizeof msg),
              LP_EINVALID_ARGUMENT);
}

static void test_candidate_sets(void)
{
    /* grid:5 over radius 1 in d = 2: the 13 points of {-1,-.5,0,.5,1}^2 in the disk. */
    lp_candset *g = build("grid:5", 2, 1.0, NULL);
    CHECK(g != NULL && g->k == 13);
    for (size_t i = 0; g && i < g->k; i++)
        CHECK(hypot(g->theta[2 * i], g->theta[2 * i + 1]) <= 1.0 + 1e-12);
    lp_candset_free(g);
    char msg[256];
    lp_candset *big = NULL;
    CHECK_ERR(lp_candset_build(LP_CAND_GRID, 11, 8, 1.0, 0, NULL, &big, msg, sizeof msg),
              LP_EINVALID_ARGUMENT); /* 11^8 points */
    CHECK_ERR(lp_candset_build(LP_CAND_NET, 10, 3, 0.0, 0, NULL, &big, msg, sizeof msg),
              LP_EINVALID_ARGUMENT);
    CHECK_ERR(lp_candset_build(LP_CAND_NET, 10, 3, INFINITY, 0, NULL, &big, msg, sizeof msg),
              LP_EINVALID_ARGUMENT);
    CHECK_ERR(lp_candset_build(LP_CAND_AROUND, 10, 3, 1.0, 0, NULL, &big, msg, sizeof msg),
              LP_EINVALID_ARGUMENT);
    CHECK_ERR(lp_candset_build(LP_CAND_NET, 1 << 20, 64, 1.0, 0, NULL, &big, msg, sizeof msg),
              LP_EINVALID_ARGUMENT); /* 2^26 values */
    CHECK(big == NULL);

    /* net: the origin first, every point in the ball, radii spread as
     * R U^(1/d): the mean of (|theta|/R)^d is 1/2. */
    lp_candset *n = build("net:4001:seed=9", 3, 2.0, NULL);
    CHECK(n != NULL && n->k == 4001 && n->seed == 9);
    double mean = 0.0;
    for (size_t i = 0; n && i < n->k; i++) {
        const double *t = n->theta + 3 * i;
        double r = sqrt(t[0] * t[0] + t[1] * t[1] + t[2] * t[2]);
        CHECK(r <= 2.0 + 1e-12);
        if (i == 0)
            CHECK(r == 0.0);
        else
            mean += pow(r / 2.0, 3) / 4000.0;
    }
    /* U(0,1) mean over 4000 points: sd 0.29/sqrt(4000) = 0.0046; 6 sd. */
    CHECK_NEAR(mean, 0.5, 0.028);
    lp_candset_free(n);

    /* around: the center first, the rest within R of it; the definition
     * rebuilds the same set bit for bit, and a wrong center is caught. */
    double center[3] = {0.5, -1.25, 3.0};
    lp_candset *a = build("around:50:seed=77", 3, 0.25, center);
    CHECK(a != NULL && memcmp(a->theta, center, sizeof center) == 0);
    for (size_t i = 1; a && i < a->k; i++) {
        double s = 0.0;
        for (int j = 0; j < 3; j++)
            s += pow(a->theta[3 * i + j] - center[j], 2);
        CHECK(sqrt(s) <= 0.25 + 1e-12);
    }
    json_t *def = lp_candset_to_json(a);
    lp_candset *b = NULL;
    CHECK_ERR(lp_candset_from_json(def, 3, NULL, &b, msg, sizeof msg), LP_OK);
    CHECK(b != NULL && b->k == a->k && memcmp(a->theta, b->theta, a->k * 3 * sizeof(double)) == 0);
    lp_candset_free(b);
    /* Only the hash: the center must be supplied, and must match. */
    json_object_del(def, "center");
    CHECK_ERR(lp_candset_from_json(def, 3, center, &b, msg, sizeof msg), LP_OK);
    CHECK(b != NULL && memcmp(a->theta, b->theta, a->k * 3 * sizeof(double)) == 0);
    lp_candset_free(b);
    b = NULL;
    double other[3] = {0.5, -1.25, 3.0000001};
    CHECK_ERR(lp_candset_from_json(def, 3, other, &b, msg, sizeof msg), LP_EINVALID_ARGUMENT);
    CHECK(b == NULL && strstr(msg, "center") != NULL);
    json_decref(def);
    lp_candset_free(a);
}

/* GEMM losses equal the plain loop, in every storage, over several blocks;
 * no clip (rmax = inf), so every margin's value counts. */
static void test_gemm_matches_loop(void)
{
    lp_dataset *d64 = random_data(5000, 4, LP_STORE_F64, 3);
    lp_dataset *d32 = random_data(5000, 4, LP_STORE_F32, 3);
    lp_dataset *csr = as_csr(d64);
    /* 1000 candidates x 5000 rows: more than one block of margins. */
    lp_candset *c = build("net:1000:seed=1", 4, 3.0, NULL);
    double *l64 = malloc(c->k * sizeof *l64), *l32 = malloc(c->k * sizeof *l32),
           *lcsr = malloc(c->k * sizeof *lcsr);
    CHECK_ERR(lp_expmech_losses(d64, c, INFINITY, l64), LP_OK);
    CHECK_ERR(lp_expmech_losses(d32, c, INFINITY, l32), LP_OK);
    CHECK_ERR(lp_expmech_losses(csr, c, INFINITY, lcsr), LP_OK);
    double worst64 = 0, worst32 = 0, worstcsr = 0;
    for (size_t k = 0; k < c->k; k++) {
        double ref = lp_expmech_loss_naive(d64, c->theta + 4 * k, INFINITY);
        double ref32 = lp_expmech_loss_naive(d32, c->theta + 4 * k, INFINITY);
        CHECK(l64[k] >= 0.0 && l64[k] <= 4.0 * 5000);
        worst64 = fmax(worst64, fabs(l64[k] - ref));
        worstcsr = fmax(worstcsr, fabs(lcsr[k] - ref));
        worst32 = fmax(worst32, fabs(l32[k] - ref32));
    }
    /* double: rounding of 5000 terms; float: margins rounded to float
     * (relative 6e-8 of |theta||x| <~ 30, slope <= 1/2 times |2 err| <= 4). */
    CHECK(worst64 < 1e-8);
    CHECK(worstcsr < 1e-8);
    CHECK(worst32 < 5000 * 4 * 30 * 6e-8);
    printf("gemm vs loop: max |diff| float64 %.3g, csr %.3g, float32 %.3g\n", worst64, worstcsr,
           worst32);
    free(l64);
    free(l32);
    free(lcsr);
    lp_candset_free(c);
    lp_dataset_free(d64);
    lp_dataset_free(d32);
    lp_dataset_free(csr);
}

/* Changing one label changes every candidate's L by at most 4: all 2^8
 * label vectors of an 8-row set and each of their 8 neighbours. */
static void test_sensitivity_exhaustive(void)
{
    const size_t n = 8, d = 2;
    lp_dataset *ds = random_data(n, d, LP_STORE_F64, 11);
    /* Large margins with rmax = inf make terms near 0 and 4: the bound is
     * approached, so an off-by-constant loss would be caught. */
    lp_candset *c = build("grid:7", d, 40.0, NULL);
    double *l = malloc(c->k * sizeof *l), *l2 = malloc(c->k * sizeof *l2);
    double worst = 0.0;
    int fine = 1;
    for (unsigned mask = 0; mask < 1u << n; mask++) {
        for (size_t i = 0; i < n; i++)
            ds->z[i] = (mask >> i) & 1;
        lp_expmech_losses(ds, c, INFINITY, l);
        for (size_t i = 0; i < n; i++) {
            ds->z[i] ^= 1;
            lp_expmech_losses(ds, c, INFINITY, l2);
            ds->z[i] ^= 1;
            for (size_t k = 0; k < c->k; k++) {
                double diff = fabs(l[k] - l2[k]);
                worst = fmax(worst, diff);
                fine &= diff <= 4.0 + 1e-12 && l[k] >= 0.0 && l[k] <= 4.0 * n;
            }
        }
    }
    CHECK(fine);
    /* 4 up to the rounding of a sum of 8 doubles */
    CHECK(worst <= 4.0 + 1e-12 && worst > 3.99);
    printf("sensitivity, exhaustive: max |L(D) - L(D')| = %.6f over %zu candidates\n", worst, c->k);
    free(l);
    free(l2);
    lp_candset_free(c);
    lp_dataset_free(ds);
}

/* Random data: one whole row replaced (features and label) at a time. */
static void test_sensitivity_random(void)
{
    const size_t n = 300, d = 5;
    lp_dataset *ds = random_data(n, d, LP_STORE_F64, 21);
    lp_candset *c = build("net:200:seed=5", d, 4.0, NULL);
    double *l = malloc(c->k * sizeof *l), *l2 = malloc(c->k * sizeof *l2);
    lp_expmech_losses(ds, c, 1.0, l);
    lp_prng g;
    lp_prng_seed(&g, 99);
    double worst = 0.0, saved[5];
    for (int t = 0; t < 200; t++) {
        size_t i = (size_t)lp_prng_below(&g, n);
        int z = ds->z[i];
        memcpy(saved, ds->xd + i * d, sizeof saved);
        for (size_t j = 0; j < d; j++)
            ds->xd[i * d + j] = 10.0 * lp_prng_normal(&g);
        ds->z[i] = (uint8_t)lp_prng_below(&g, 2);
        lp_expmech_losses(ds, c, 1.0, l2);
        for (size_t k = 0; k < c->k; k++)
            worst = fmax(worst, fabs(l[k] - l2[k]));
        ds->z[i] = (uint8_t)z;
        memcpy(ds->xd + i * d, saved, sizeof saved);
    }
    /* with rmax = 1 each term is within [(1 - tanh 1)^2, (1 + tanh 1)^2]. */
    double span = pow(1 + tanh(1.0), 2) - pow(1 - tanh(1.0), 2);
    CHECK(worst <= span + 1e-12 && span < 4.0);
    CHECK(worst > 0.9 * span);
    printf("sensitivity, random rows: max |L(D) - L(D')| = %.6f (bound 4; clip at 2: %.6f)\n",
           worst, span);
    free(l);
    free(l2);
    lp_candset_free(c);
    lp_dataset_free(ds);
}

/* Pearson's X^2 of counts against probabilities. */
static double chi2(const long *count, const double *p, size_t k, long draws)
{
    double x = 0.0;
    for (size_t i = 0; i < k; i++) {
        double e = (double)draws * p[i];
        x += (count[i] - e) * (count[i] - e) / e;
    }
    return x;
}

static void test_frequencies(void)
{
    const long draws = 200000;
    lp_dataset *ds = random_data(12, 2, LP_STORE_F64, 5);
    lp_candset *c = build("net:8:seed=3", 2, 2.0, NULL);
    double loss[8], p[8], wrong[8];
    lp_expmech_losses(ds, c, 1.0, loss);
    double eps_list[] = {0.5, 2.0};
    for (int e = 0; e < 2; e++) {
        double eps = eps_list[e];
        lp_expmech_probs(loss, c->k, eps / 8.0, p);
        lp_expmech_probs(loss, c->k, eps / 4.0, wrong);
        double minexp = INFINITY;
        for (size_t k = 0; k < c->k; k++)
            minexp = fmin(minexp, p[k] * draws);
        CHECK(minexp >= 5.0); /* the chi-square approximation holds */
        long count[8] = {0};
        lp_prng g;
        lp_prng_seed(&g, 1000 + (uint64_t)e);
        for (long t = 0; t < draws; t++)
            count[lp_expmech_select(loss, c->k, eps / 8.0, lp_prng_next64, &g)]++;
        double x = chi2(count, p, c->k, draws), xw = chi2(count, wrong, c->k, draws);
        double bound = chi2_bound((int)c->k - 1);
        printf("frequencies eps=%g: X^2 = %.2f (bound %.2f, df %zu); against exp(-eps L/4): "
               "%.1f\n",
               eps, x, bound, c->k - 1, xw);
        CHECK(x <= bound);
        CHECK(xw > bound);
    }
    lp_candset_free(c);
    lp_dataset_free(ds);
}

/* Counts of each outcome over runs of a selection at scale on losses. */
static void outcome_counts(const double *loss, size_t k, double scale, long runs, uint64_t seed,
                           long *count)
{
    lp_prng g;
    lp_prng_seed(&g, seed);
    memset(count, 0, k * sizeof *count);
    for (long t = 0; t < runs; t++)
        count[lp_expmech_select(loss, k, scale, lp_prng_next64, &g)]++;
}

/* The per-outcome test: 1 when some outcome shows a ratio beyond e^eps in
 * either direction beyond sampling error. *ratio gets the largest point
 * estimate of the ratio. */
static int audit_violation(const long *c1, const long *c2, size_t k, long runs, double eps,
                           double *ratio)
{
    int bad = 0;
    *ratio = 0.0;
    for (size_t i = 0; i < k; i++)
        for (int dir = 0; dir < 2; dir++) {
            double a = (double)(dir ? c2[i] : c1[i]) / runs,
                   b = (double)(dir ? c1[i] : c2[i]) / runs;
            double lo = a - AUDIT_Z * sqrt(a * (1 - a) / runs) - 1.0 / runs;
            double hi = b + AUDIT_Z * sqrt(b * (1 - b) / runs) + 1.0 / runs;
            if (b > 0)
                *ratio = fmax(*ratio, a / b);
            bad |= lo > exp(eps) * hi;
        }
    return bad;
}

/* Neighbouring datasets near the worst case: d = 1, every row x = 1, two
 * candidates +-20 (rmax = inf: terms ~0 or ~4). D has 1 label 1 and 7
 * labels 0; D' changes the label 1 to 0. The odds of +20 move by nearly
 * e^eps. */
static void test_privacy_audit(void)
{
    const long runs = 200000;
    const double eps = 1.0;
    lp_dataset *ds = lp_dataset_new(1, LP_STORE_F64);
    char msg[256];
    double x0 = 0.0, x1 = 1.0;
    for (int i = 0; i < 8; i++)
        lp_dataset_add_dense(ds, &x0, &x1, i == 0, INFINITY, -1, msg, sizeof msg);
    lp_candset *c = build("grid:2", 1, 20.0, NULL);
    double l1[2], l2[2];
    lp_expmech_losses(ds, c, INFINITY, l1);
    ds->z[0] = 0;
    lp_expmech_losses(ds, c, INFINITY, l2);
    long c1[2], c2[2];
    double ratio;
    /* The product's path: releases through lp_release_fit, seeded. */
    lp_release_opts o;
    lp_release_opts_init(&o, LP_MECH_EXPONENTIAL, eps);
    o.candidates = "grid:2";
    o.radius = 20.0;
    o.rmax = INFINITY;
    o.rand64 = lp_prng_next64;
    const long release_runs = 100000;
    for (int side = 0; side < 2; side++) {
        ds->z[0] = side == 0;
        lp_prng g;
        lp_prng_seed(&g, 500 + (uint64_t)side);
        o.rand_state = &g;
        long *cnt = side ? c2 : c1;
        cnt[0] = cnt[1] = 0;
        for (long t = 0; t < release_runs; t++) {
            lp_model *m = NULL;
            if (lp_release_fit(ds, NULL, &o, &m, msg, sizeof msg) != LP_OK)
                break;
            cnt[m->theta[0] > 0]++;
            lp_model_free(m);
        }
    }
    CHECK(c1[0] + c1[1] == release_runs && c2[0] + c2[1] == release_runs);
    CHECK(!audit_violation(c1, c2, 2, release_runs, eps, &ratio));
    printf("audit (releases, eps=%g): largest ratio %.3f (e^eps = %.3f)\n", eps, ratio, exp(eps));
    /* The same test through the selection alone, with many more runs. */
    outcome_counts(l1, 2, eps / 8.0, runs, 7, c1);
    outcome_counts(l2, 2, eps / 8.0, runs, 8, c2);
    CHECK(!audit_violation(c1, c2, 2, runs, eps, &ratio));
    CHECK(ratio > exp(0.8 * eps)); /* near the worst case: the audit is not vacuous */
    printf("audit (selection, eps=%g): largest ratio %.3f\n", eps, ratio);
    /* A mechanism at temperature eps/4 (twice the privacy loss) is caught. */
    outcome_counts(l1, 2, eps / 4.0, runs, 9, c1);
    outcome_counts(l2, 2, eps / 4.0, runs, 10, c2);
    CHECK(audit_violation(c1, c2, 2, runs, eps, &ratio));
    printf("audit (temperature eps/4): largest ratio %.3f: violation detected\n", ratio);
    lp_candset_free(c);
    lp_dataset_free(ds);

    /* Random data, a random net: every outcome within e^eps. */
    lp_dataset *rd = random_data(40, 3, LP_STORE_F64, 31);
    lp_candset *net = build("net:6:seed=4", 3, 3.0, NULL);
    double a[6], b[6];
    long n1[6], n2[6];
    lp_expmech_losses(rd, net, 1.0, a);
    rd->z[17] ^= 1;
    lp_expmech_losses(rd, net, 1.0, b);
    outcome_counts(a, 6, eps / 8.0, runs, 11, n1);
    outcome_counts(b, 6, eps / 8.0, runs, 12, n2);
    CHECK(!audit_violation(n1, n2, 6, runs, eps, &ratio));
    printf("audit (random data, net:6): largest ratio %.3f\n", ratio);
    lp_candset_free(net);
    lp_dataset_free(rd);
}

/* The release equals losses + selection on the same stream; user caps keep
 * each user's first m rows and divide the temperature by m. */
static void test_release(void)
{
    lp_dataset *ds = random_data(60, 3, LP_STORE_F64, 41);
    lp_release_opts o;
    lp_release_opts_init(&o, LP_MECH_EXPONENTIAL, 2.0);
    o.candidates = "net:64:seed=8";
    o.radius = 3.0;
    o.rand64 = lp_prng_next64;
    lp_prng g, h;
    lp_prng_seed(&g, 1);
    lp_prng_seed(&h, 1);
    o.rand_state = &g;
    lp_model *m = NULL;
    char msg[256];
    CHECK_ERR(lp_release_fit(ds, NULL, &o, &m, msg, sizeof msg), LP_OK);
    lp_candset *c = build("net:64:seed=8", 3, 3.0, NULL);
    double loss[64];
    lp_expmech_losses(ds, c, 1.0, loss);
    size_t want = lp_expmech_select(loss, 64, 2.0 / 8.0, lp_prng_next64, &h);
    CHECK(m != NULL && memcmp(m->theta, c->theta + 3 * want, 3 * sizeof(double)) == 0);
    CHECK(m && json_integer_value(json_object_get(m->release, "selected")) == (json_int_t)want);
    CHECK_STR(json_string_value(json_object_get(m->release, "mechanism")), "exponential");
    CHECK_STR(json_string_value(json_object_get(m->release, "random_source")), "seeded");
    /* The model file carries the release and no label count. */
    json_t *doc = lp_model_to_json(m);
    CHECK(json_is_null(json_object_get(json_object_get(doc, "data"), "n_z1")));
    lp_candset *back = NULL;
    CHECK_ERR(lp_candset_from_json(json_object_get(json_object_get(doc, "release"), "candidates"),
                                   3, NULL, &back, msg, sizeof msg),
              LP_OK);
    CHECK(back && memcmp(back->theta, c->theta, 64 * 3 * sizeof(double)) == 0);
    lp_candset_free(back);
    json_decref(doc);
    lp_model_free(m);

    /* Users 0..9, six rows each, cap 2: the rows that count are each user's first two. */
    int64_t user[60];
    for (int i = 0; i < 60; i++)
        user[i] = (i * 7) % 10;
    o.user_cap = 2;
    lp_prng_seed(&g, 2);
    lp_prng_seed(&h, 2);
    CHECK_ERR(lp_release_fit(ds, user, &o, &m, msg, sizeof msg), LP_OK);
    size_t keep[20], nk = 0, seen[10] = {0};
    for (size_t i = 0; i < 60; i++)
        if (seen[user[i]]++ < 2)
            keep[nk++] = i;
    lp_dataset *sub = lp_dataset_subset(ds, keep, nk);
    lp_expmech_losses(sub, c, 1.0, loss);
    want = lp_expmech_select(loss, 64, 2.0 / 16.0, lp_prng_next64, &h);
    CHECK(m && memcmp(m->theta, c->theta + 3 * want, 3 * sizeof(double)) == 0);
    CHECK_STR(json_string_value(json_object_get(m->release, "unit")), "user");
    lp_model_free(m);
    lp_dataset_free(sub);
    lp_candset_free(c);

    /* A net without a seed gets one from the CSPRNG, recorded. */
    o.user_cap = 0;
    o.candidates = "net:4";
    o.rand64 = lp_csprng_next64;
    o.rand_state = NULL;
    CHECK_ERR(lp_release_fit(ds, NULL, &o, &m, msg, sizeof msg), LP_OK);
    json_t *cs = m ? json_object_get(m->release, "candidates") : NULL;
    CHECK(json_is_integer(json_object_get(cs, "seed")));
    CHECK(json_integer_value(json_object_get(cs, "seed")) >= 0);
    CHECK_STR(json_string_value(json_object_get(m ? m->release : NULL, "random_source")), "csprng");
    lp_model_free(m);
    lp_dataset_free(ds);
}

static void test_refusals(void)
{
    lp_dataset *ds = random_data(10, 2, LP_STORE_F64, 51);
    lp_release_opts o;
    lp_release_opts_init(&o, LP_MECH_EXPONENTIAL, INFINITY);
    o.candidates = "grid:3";
    lp_model *m = NULL;
    char msg[256] = "";
    double bad_eps[] = {INFINITY, NAN, 0.0, -1.0, -INFINITY};
    for (int i = 0; i < 5; i++) {
        o.epsilon = bad_eps[i];
        CHECK_ERR(lp_release_fit(ds, NULL, &o, &m, msg, sizeof msg), LP_EINVALID_ARGUMENT);
        CHECK(m == NULL && strstr(msg, "epsilon") != NULL);
    }
    o.epsilon = 1.0;
    o.delta = 1e-6;
    CHECK_ERR(lp_release_fit(ds, NULL, &o, &m, msg, sizeof msg), LP_EINVALID_ARGUMENT);
    o.delta = 0.0;
    o.candidates = "around:5";
    CHECK_ERR(lp_release_fit(ds, NULL, &o, &m, msg, sizeof msg), LP_EINVALID_ARGUMENT);
    CHECK(strstr(msg, "center") != NULL);
    o.candidates = "cube:5";
    CHECK_ERR(lp_release_fit(ds, NULL, &o, &m, msg, sizeof msg), LP_EINVALID_ARGUMENT);
    o.candidates = "grid:3";
    o.mechanism = LP_MECH_AUP;
    CHECK_ERR(lp_release_fit(ds, NULL, &o, &m, msg, sizeof msg), LP_EINVALID_ARGUMENT);
    o.mechanism = LP_MECH_NONE;
    CHECK_ERR(lp_release_fit(ds, NULL, &o, &m, msg, sizeof msg), LP_EINVALID_ARGUMENT);
    /* Randomized labels are not the mechanism's input. */
    o.mechanism = LP_MECH_EXPONENTIAL;
    ds->eps[3] = 1.0;
    CHECK_ERR(lp_release_fit(ds, NULL, &o, &m, msg, sizeof msg), LP_EINVALID_ARGUMENT);
    CHECK(strstr(msg, "label 4") != NULL);
    CHECK(m == NULL);
    lp_dataset_free(ds);

    lp_mechanism mech;
    CHECK_ERR(lp_mechanism_parse("exponential", &mech), LP_OK);
    CHECK(mech == LP_MECH_EXPONENTIAL);
    CHECK_ERR(lp_mechanism_parse("aup", &mech), LP_OK);
    CHECK(mech == LP_MECH_AUP);
    CHECK_ERR(lp_mechanism_parse("laplace", &mech), LP_EINVALID_ARGUMENT);
    CHECK_STR(lp_mechanism_name(LP_MECH_NONE), "none");
    CHECK(lp_mechanism_name((lp_mechanism)9) == NULL);
}

/* The study's verdict rules on hand-made rows: excess falling as 1/n and
 * in eps with the bound kept is supported; one cell over the bound is not;
 * local worse than central at every eps with a 4x label ratio at the
 * smallest eps is supported, local better everywhere is not. */
static void test_study_rules(void)
{
    lp_cstudy_row rows[64];
    lp_cstudy s = {rows, 0};
    const size_t ns[] = {100, 400, 1600};
    const double es[] = {0.5, 4};
    for (int seed = 0; seed < 3; seed++)
        for (int i = 0; i < 3; i++)
            for (int e = 0; e < 2; e++)
                rows[s.n++] = (lp_cstudy_row){.part = LP_CSTUDY_EXCESS,
                                              .n = ns[i],
                                              .k = 100,
                                              .eps = es[e],
                                              .seed = seed,
                                              .excess = 1.0,
                                              .expected_excess = (8.0 + seed) / es[e],
                                              .tail = 1e-4,
                                              .bound = 8.0 / es[e] * log(100 / 0.05)};
    lp_study_verdict v;
    lp_cstudy_verdict_excess(&s, &v);
    CHECK_INT(v.level, LP_VERDICT_SUPPORTED);
    rows[4].tail = 0.06;
    lp_cstudy_verdict_excess(&s, &v);
    CHECK_INT(v.level, LP_VERDICT_NOT_SUPPORTED);
    CHECK(strstr(v.text, "fails") != NULL);

    s.n = 0;
    for (int seed = 0; seed < 3; seed++)
        for (int e = 0; e < 2; e++) {
            double central = 0.3 + 0.01 * seed;
            rows[s.n++] = (lp_cstudy_row){
                .part = LP_CSTUDY_CENTRAL, .n = 100, .eps = es[e], .seed = seed, .error = central};
            for (int j = 0; j < 4; j++)
                /* local's error halves with each doubling from 2x central's */
                rows[s.n++] = (lp_cstudy_row){.part = LP_CSTUDY_LOCAL,
                                              .n = (size_t)100 << j,
                                              .eps = es[e],
                                              .seed = seed,
                                              .error = (e ? 1.5 : 2.0) * central / (1 << j)};
        }
    lp_cstudy_verdict_match(&s, &v);
    CHECK_INT(v.level, LP_VERDICT_SUPPORTED);
    for (size_t i = 0; i < s.n; i++)
        if (rows[i].part == LP_CSTUDY_LOCAL)
            rows[i].error = 0.1;
    lp_cstudy_verdict_match(&s, &v);
    CHECK_INT(v.level, LP_VERDICT_NOT_SUPPORTED);
}

int main(void)
{
    if (lp_rng_init() != LP_OK)
        return 1;
    test_parse();
    test_candidate_sets();
    test_gemm_matches_loop();
    test_sensitivity_exhaustive();
    test_sensitivity_random();
    test_frequencies();
    test_privacy_audit();
    test_release();
    test_refusals();
    test_study_rules();
    return check_summary();
}
