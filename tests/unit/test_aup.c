/*
 * test_aup.c — AUP-RLHF (aup.h): the noise calibration equals the formulas
 * of docs/privacy-mechanisms.md recomputed here; the keep probability, the
 * concentration score, the friend counts, outlier removal and AboveThreshold
 * on constructed inputs (frequencies within binomial bounds); the samplers'
 * moments; the contribution cap (labels past the first m of an annotator do
 * not matter); determinism with a seed; eps = inf refused; with a huge eps
 * the release approaches the non-private fit; an empirical privacy audit on
 * neighbouring datasets (one annotator's labels all flipped); the labels
 * file's annotator field.
 */
#include "aup.h"
#include "binomial.h"
#include "check.h"
#include "error.h"
#include "mechanism.h"
#include "model.h"
#include "prng.h"
#include "simulate.h"
#include "tmpdir.h"
#include "userlevelstudy.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The calibration recomputed from the documented formulas. */
static void test_calibration_formula(void)
{
    const double eps_v[] = {1, 2, 8};
    const size_t n_v[] = {20000, 50000};
    const int t_v[] = {1, 50, 200};
    for (size_t a = 0; a < 3; a++)
        for (size_t b = 0; b < 2; b++)
            for (size_t c = 0; c < 3; c++) {
                double eps = eps_v[a], delta = 1e-6, tau = 0.7;
                size_t n = n_v[b];
                int T = t_v[c];
                lp_aup_calib k;
                char msg[256];
                CHECK_ERR(lp_aup_calibrate(eps, delta, n, T, tau, &k, msg, sizeof msg), LP_OK);
                /* z_max: the least z with T e^-6 (6e/(z+1))^(z+1) <= delta/4 */
                int z = 0;
                for (;; z++) {
                    double kk = z + 1.0;
                    double tail = kk <= 6 ? 1 : exp(-6) * pow(6 * M_E / kk, kk);
                    if (T * tail <= delta / 4)
                        break;
                }
                CHECK_INT(k.z_max, z);
                double amin = ceil(2.0 * n / 3.0) - 1 - z;
                CHECK_NEAR(k.a_min, amin, 0);
                double sens = 4 * tau * (2 + z) / amin;
                CHECK_NEAR(k.sensitivity, sens, 1e-12 * sens);
                double L = log(2 / delta);
                double rho = pow(sqrt(L + eps / 2) - sqrt(L), 2);
                CHECK_NEAR(k.rho + 2 * sqrt(k.rho * L), eps / 2, 1e-9);
                CHECK_NEAR(k.rho, rho, 1e-12);
                CHECK_NEAR(k.sigma, sens * sqrt(T / (2 * rho)), 1e-9 * k.sigma);
                CHECK_NEAR(k.b_threshold, 8 / eps, 1e-12);
                CHECK_NEAR(k.b_query, 16 / eps, 1e-12);
                CHECK_NEAR(k.threshold, 0.8 * n, 1e-9);
                double gap = 2.0 * n / 15;
                CHECK(T * 0.5 * exp(-gap * eps / 32) + 0.5 * exp(-gap * eps / 16) <= delta / 4);
            }
    /* sigma is linear in tau, grows with T, falls with eps */
    lp_aup_calib a, b;
    char msg[256];
    lp_aup_calibrate(2, 1e-5, 10000, 50, 1, &a, msg, sizeof msg);
    lp_aup_calibrate(2, 1e-5, 10000, 50, 3, &b, msg, sizeof msg);
    CHECK_NEAR(b.sigma, 3 * a.sigma, 1e-12 * b.sigma);
    lp_aup_calibrate(2, 1e-5, 10000, 200, 1, &b, msg, sizeof msg);
    CHECK(b.sigma > 1.9 * a.sigma);
    lp_aup_calibrate(4, 1e-5, 10000, 50, 1, &b, msg, sizeof msg);
    CHECK(b.sigma < a.sigma);
    printf("calibration: eps 2, delta 1e-5, n 10000, T 50, tau 1: z_max %d, sensitivity %.4g, "
           "sigma %.4g\n",
           a.z_max, a.sensitivity, a.sigma);
    /* refusals */
    CHECK_ERR(lp_aup_calibrate(INFINITY, 1e-5, 10000, 50, 1, &a, msg, sizeof msg),
              LP_EINVALID_ARGUMENT);
    CHECK(strstr(msg, "infinity") != NULL);
    CHECK_ERR(lp_aup_calibrate(1, 0, 10000, 50, 1, &a, msg, sizeof msg), LP_EINVALID_ARGUMENT);
    CHECK_ERR(lp_aup_calibrate(1, 1, 10000, 50, 1, &a, msg, sizeof msg), LP_EINVALID_ARGUMENT);
    CHECK_ERR(lp_aup_calibrate(1, 1e-5, 100, 50, 1, &a, msg, sizeof msg), LP_EINVALID_ARGUMENT);
    CHECK(strstr(msg, "too few") != NULL);
}

static void test_keep_prob(void)
{
    CHECK_NEAR(lp_aup_keep_prob(0, 60), 0, 0);
    CHECK_NEAR(lp_aup_keep_prob(29, 60), 0, 0);
    CHECK_NEAR(lp_aup_keep_prob(30, 60), 0, 0);
    CHECK_NEAR(lp_aup_keep_prob(35, 60), 0.5, 1e-15);
    CHECK_NEAR(lp_aup_keep_prob(39, 60), 0.9, 1e-15);
    CHECK_NEAR(lp_aup_keep_prob(40, 60), 1, 0);
    CHECK_NEAR(lp_aup_keep_prob(60, 60), 1, 0);
}

/* 10 points: 8 within 0.1 of the origin, 2 far apart from everything. */
static void test_concentration_and_outliers(void)
{
    enum { N = 10, D = 2 };
    double g[N * D] = {0}, work[(1 + LP_AUP_BLOCK) * N];
    for (int i = 0; i < 8; i++)
        g[i * D] = 0.01 * i;
    g[8 * D] = 5;
    g[9 * D + 1] = -5;
    size_t near[N], f[N];
    lp_aup_neighbours(g, N, D, 0.045, near, f, work);
    size_t pairs = 0; /* tau 0.045: |i - j| <= 4 within the cluster */
    for (int i = 0; i < 8; i++)
        for (int j = 0; j < 8; j++)
            pairs += abs(i - j) <= 4;
    CHECK_NEAR(lp_aup_concentration(near, N), (pairs + 2) / 10.0, 1e-12);
    for (int i = 0; i < 8; i++)
        CHECK_INT(f[i], 8); /* 2 tau = 0.1: the whole cluster */
    CHECK_INT(f[8], 1);
    CHECK_INT(f[9], 1);
    CHECK_INT(near[8], 1);
    /* blocks: 700 random points (3 blocks) against direct distances */
    {
        enum { P = 700, Q = 3 };
        double *x = malloc(P * Q * sizeof *x), *w = malloc((1 + LP_AUP_BLOCK) * P * sizeof *w);
        size_t *nr = malloc(P * sizeof *nr), *fr = malloc(P * sizeof *fr);
        lp_prng xg;
        lp_prng_seed(&xg, 17);
        for (int k = 0; k < P * Q; k++)
            x[k] = lp_prng_normal(&xg);
        lp_aup_neighbours(x, P, Q, 1.0, nr, fr, w);
        int same = 1;
        for (int i = 0; i < P; i++) {
            size_t c1 = 0, c2 = 0;
            for (int j = 0; j < P; j++) {
                double s2 = 0;
                for (int k = 0; k < Q; k++)
                    s2 += (x[i * Q + k] - x[j * Q + k]) * (x[i * Q + k] - x[j * Q + k]);
                c1 += s2 <= 1.0;
                c2 += s2 <= 4.0;
            }
            same &= nr[i] == c1 && fr[i] == c2;
        }
        CHECK(same);
        free(x);
        free(w);
        free(nr);
        free(fr);
    }
    lp_prng pg;
    lp_prng_seed(&pg, 7);
    unsigned char keep[N];
    CHECK_INT(lp_aup_remove_outliers(f, N, keep, lp_prng_next64, &pg), 8);
    CHECK(!keep[8] && !keep[9]);
    /* friends on the ramp: kept with probability (f - n/2)/(n/6) */
    enum { M = 60, RUNS = 20000 };
    size_t fr[M];
    for (int i = 0; i < M; i++)
        fr[i] = 30 + (size_t)(i % 11); /* 30 .. 40 */
    long kept[M] = {0};
    unsigned char kp[M];
    for (int r = 0; r < RUNS; r++) {
        lp_aup_remove_outliers(fr, M, kp, lp_prng_next64, &pg);
        for (int i = 0; i < M; i++)
            kept[i] += kp[i];
    }
    for (int i = 0; i < 11; i++) {
        double p = lp_aup_keep_prob(fr[i], M);
        long c = kept[i];
        if (p == 0 || p == 1) {
            CHECK_INT(c, p * RUNS);
            continue;
        }
        CHECK(c >= binom_lower(RUNS, p, 1e-6) && c <= binom_upper(RUNS, p, 1e-6));
    }
}

static void test_above_threshold(void)
{
    lp_prng g;
    lp_prng_seed(&g, 11);
    lp_above_threshold at;
    lp_above_threshold_init(&at, 10, 1e-12, 1e-12, lp_prng_next64, &g);
    CHECK(lp_above_threshold_test(&at, 10.5, lp_prng_next64, &g));
    CHECK(!lp_above_threshold_test(&at, 9.5, lp_prng_next64, &g));
    /* exact threshold, query noise b = 2: P(TOP at q = th - 3) = e^-1.5 / 2 */
    lp_above_threshold_init(&at, 10, 1e-12, 2, lp_prng_next64, &g);
    const int runs = 50000;
    int top = 0;
    for (int r = 0; r < runs; r++)
        top += lp_above_threshold_test(&at, 7, lp_prng_next64, &g);
    double p = 0.5 * exp(-1.5);
    CHECK(top >= binom_lower(runs, p, 1e-6) && top <= binom_upper(runs, p, 1e-6));
    /* the threshold noise is drawn once: with a large threshold scale and
     * tiny query noise, repeated tests of one query all agree */
    lp_above_threshold_init(&at, 10, 3, 1e-12, lp_prng_next64, &g);
    int first = lp_above_threshold_test(&at, 10, lp_prng_next64, &g), same = 1;
    for (int r = 0; r < 100; r++)
        same &= lp_above_threshold_test(&at, 10, lp_prng_next64, &g) == first;
    CHECK(same);
}

static void test_samplers(void)
{
    lp_prng g;
    lp_prng_seed(&g, 3);
    const int n = 400000;
    double s = 0, s2 = 0, s4 = 0, la = 0, lneg = 0;
    int in_range = 1;
    for (int i = 0; i < n; i++) {
        double z = lp_aup_normal(lp_prng_next64, &g);
        s += z;
        s2 += z * z;
        s4 += z * z * z * z;
        double l = lp_aup_laplace(2, lp_prng_next64, &g);
        la += fabs(l);
        lneg += l < 0;
        double u = lp_aup_uniform(lp_prng_next64, &g);
        in_range &= u > 0 && u <= 1;
    }
    CHECK(in_range);
    /* standard errors: mean 1/sqrt(n), variance sqrt(2/n), fourth moment sqrt(96/n) */
    CHECK_NEAR(s / n, 0, 5 / sqrt(n));
    CHECK_NEAR(s2 / n, 1, 5 * sqrt(2.0 / n));
    CHECK_NEAR(s4 / n, 3, 5 * sqrt(96.0 / n));
    CHECK_NEAR(la / n, 2, 5 * 2 / sqrt(n)); /* |Lap(2)| ~ Exp(mean 2, sd 2) */
    CHECK(lneg >= binom_lower(n, 0.5, 1e-6) && lneg <= binom_upper(n, 0.5, 1e-6));
}

/* n annotators with m labels each (unit features, d = 4, eps = inf). */
static lp_dataset *make_data(size_t n, size_t m, uint64_t seed)
{
    lp_sim_opts so;
    lp_sim_opts_init(&so);
    so.n = n * m;
    so.d = 4;
    so.user_labels = m;
    so.unit_features = 1;
    so.seed = seed;
    double th[4];
    lp_sim_theta_star(so.d, so.margin_sd, seed, th);
    lp_dataset *ds = NULL;
    CHECK_ERR(lp_simulate(&so, th, &ds), LP_OK);
    return ds;
}

static lp_model *release(const lp_dataset *ds, const int64_t *user, double eps, double delta,
                         size_t cap, int steps, uint64_t seed, int *rc)
{
    lp_prng g;
    lp_prng_seed(&g, seed);
    lp_aup_opts o;
    lp_aup_opts_init(&o);
    o.epsilon = eps;
    o.delta = delta;
    o.user_cap = cap;
    o.steps = steps;
    o.lr = 0.3;
    o.rand64 = lp_prng_next64;
    o.rand_state = &g;
    lp_model *m = NULL;
    char msg[256];
    *rc = lp_aup_release(ds, user, &o, &m, msg, sizeof msg);
    if (*rc != LP_OK)
        printf("release: %s\n", msg);
    return m;
}

static void test_determinism_and_cap(void)
{
    lp_dataset *ds = make_data(1500, 4, 5);
    int rc;
    lp_model *a = release(ds, ds->user, 4, 1e-5, 3, 20, 99, &rc);
    lp_model *b = release(ds, ds->user, 4, 1e-5, 3, 20, 99, &rc);
    lp_model *c = release(ds, ds->user, 4, 1e-5, 3, 20, 100, &rc);
    CHECK(a && b && c);
    if (a && b && c) {
        CHECK(memcmp(a->theta, b->theta, 4 * sizeof(double)) == 0);
        CHECK(memcmp(a->theta, c->theta, 4 * sizeof(double)) != 0);
        CHECK_INT(json_integer_value(json_object_get(a->release, "labels_used")), 1500 * 3);
        CHECK_INT(json_integer_value(json_object_get(a->release, "annotators")), 1500);
        CHECK_STR(json_string_value(json_object_get(a->release, "mechanism")), "aup");
        CHECK(json_is_null(json_object_get(a->release, "halted_at")));
    }
    /* the 4th label of every annotator is past the cap: flipping it changes nothing */
    for (size_t i = 3; i < ds->n; i += 4)
        ds->z[i] ^= 1;
    lp_model *d = release(ds, ds->user, 4, 1e-5, 3, 20, 99, &rc);
    CHECK(d && a && memcmp(a->theta, d->theta, 4 * sizeof(double)) == 0);
    /* ... while flipping a first label does */
    ds->z[0] ^= 1;
    lp_model *e = release(ds, ds->user, 4, 1e-5, 3, 20, 99, &rc);
    CHECK(e && a && memcmp(a->theta, e->theta, 4 * sizeof(double)) != 0);
    /* rows in dataset order: a user's rows need not be contiguous */
    lp_model_free(a);
    lp_model_free(b);
    lp_model_free(c);
    lp_model_free(d);
    lp_model_free(e);
    lp_dataset_free(ds);
}

static void test_refusals(void)
{
    lp_dataset *ds = make_data(100, 2, 1);
    int rc;
    lp_model *m = release(ds, ds->user, INFINITY, 1e-5, 0, 10, 1, &rc);
    CHECK_ERR(rc, LP_EINVALID_ARGUMENT);
    CHECK(m == NULL);
    m = release(ds, ds->user, 1, 1e-5, 0, 10, 1, &rc); /* 100 annotators: too few */
    CHECK_ERR(rc, LP_EINVALID_ARGUMENT);
    lp_release_opts ro;
    lp_release_opts_init(&ro, LP_MECH_AUP, INFINITY);
    ro.delta = 1e-5;
    char msg[256];
    CHECK_ERR(lp_release_fit(ds, ds->user, &ro, &m, msg, sizeof msg), LP_EINVALID_ARGUMENT);
    lp_release_opts_init(&ro, LP_MECH_AUP, 1);
    ro.delta = 0;
    CHECK_ERR(lp_release_fit(ds, ds->user, &ro, &m, msg, sizeof msg), LP_EINVALID_ARGUMENT);
    lp_dataset_free(ds);
}

static double cosine(const double *a, const double *b, size_t d)
{
    double ab = 0, aa = 0, bb = 0;
    for (size_t j = 0; j < d; j++) {
        ab += a[j] * b[j];
        aa += a[j] * a[j];
        bb += b[j] * b[j];
    }
    return ab / sqrt(aa * bb);
}

/* With a huge eps the noise vanishes and the release is the projected
 * gradient descent of the non-private objective. */
static void test_huge_epsilon(void)
{
    lp_dataset *ds = make_data(1000, 5, 8);
    lp_objective_opts oo;
    lp_objective_opts_init(&oo, LP_LOSS_SQUARE_CHIPO);
    oo.l2 = 0;
    oo.threads = 1;
    lp_fit_opts fo;
    lp_fit_opts_init(&fo, LP_OPT_LBFGS);
    lp_model *np = NULL;
    CHECK_ERR(lp_model_fit(ds, &oo, &fo, 1.0, &np), LP_OK);
    int rc;
    lp_model *big = release(ds, ds->user, 1e4, 1e-5, 0, 200, 4, &rc);
    lp_model *small = release(ds, ds->user, 8, 1e-5, 0, 200, 4, &rc);
    CHECK(np && big && small);
    if (np && big && small) {
        double cb = cosine(np->theta, big->theta, 4), cs = cosine(np->theta, small->theta, 4);
        printf("huge eps: cosine to the non-private fit %.5f (eps = 8: %.5f)\n", cb, cs);
        CHECK(cb > 0.995);
        CHECK(cb > cs);
    }
    lp_model_free(np);
    lp_model_free(big);
    lp_model_free(small);
    lp_dataset_free(ds);
}

/* Empirical audit: D and D' differ in every label of annotator 0. The 1-d
 * statistic theta[0] of many seeded releases on each, in bins; for every bin
 * P_D <= e^eps P_D' + delta (and back) must hold within sampling error
 * (one-sided normal bounds, z = 4.5, per bin and direction). */
static void test_privacy_audit(void)
{
    const size_t n = 1200, m = 2, bins = 12;
    const double eps = 2, delta = 1e-3;
    const int runs = 1000;
    lp_dataset *d1 = make_data(n, m, 21);
    size_t *idx = malloc(d1->n * sizeof *idx);
    for (size_t i = 0; i < d1->n; i++)
        idx[i] = i;
    lp_dataset *d2 = lp_dataset_subset(d1, idx, d1->n);
    free(idx);
    for (size_t i = 0; i < m; i++)
        d2->z[i] ^= 1; /* annotator 0's labels */
    double *s1 = malloc(runs * sizeof *s1), *s2 = malloc(runs * sizeof *s2);
    int ok = 1;
    for (int r = 0; r < runs && ok; r++) {
        int rc1, rc2;
        lp_model *a = release(d1, d1->user, eps, delta, 0, 3, 1000 + r, &rc1);
        lp_model *b = release(d2, d2->user, eps, delta, 0, 3, 500000 + r, &rc2);
        ok = a && b;
        if (ok) {
            s1[r] = a->theta[0];
            s2[r] = b->theta[0];
        }
        lp_model_free(a);
        lp_model_free(b);
    }
    CHECK(ok);
    double lo = INFINITY, hi = -INFINITY;
    for (int r = 0; r < runs; r++) {
        lo = fmin(lo, fmin(s1[r], s2[r]));
        hi = fmax(hi, fmax(s1[r], s2[r]));
    }
    int c1[12] = {0}, c2[12] = {0};
    for (int r = 0; r < runs; r++) {
        size_t k1 = (size_t)((s1[r] - lo) / (hi - lo) * bins),
               k2 = (size_t)((s2[r] - lo) / (hi - lo) * bins);
        c1[k1 < bins ? k1 : bins - 1]++;
        c2[k2 < bins ? k2 : bins - 1]++;
    }
    double worst = 0;
    for (size_t k = 0; k < bins; k++)
        for (int dir = 0; dir < 2; dir++) {
            int a = dir ? c2[k] : c1[k], b = dir ? c1[k] : c2[k];
            /* one-sided normal bounds at z = 4.5 (plus a count of slack):
             * a lower bound of P(a-bin) and an upper bound of P(b-bin) */
            double fa = (double)a / runs, fb = (double)b / runs;
            double pa = fa - 4.5 * sqrt(fa * (1 - fa) / runs) - 1.0 / runs;
            double pb = fb + 4.5 * sqrt(fb * (1 - fb) / runs) + 1.0 / runs;
            CHECK(pa <= exp(eps) * pb + delta);
            if (b > 0)
                worst = fmax(worst, (double)a / b);
        }
    printf("audit: %d releases each, %zu bins, largest bin ratio %.3f (e^eps = %.3f)\n", runs, bins,
           worst, exp(eps));
    free(s1);
    free(s2);
    lp_dataset_free(d1);
    lp_dataset_free(d2);
}

/* The labels file's annotator field: integers and strings, all or none. */
static void test_annotator_field(void)
{
    char dir[256], path[300];
    CHECK(tmpdir_create(dir, sizeof dir, "aup") == 0);
    snprintf(path, sizeof path, "%s/a.jsonl", dir);
    FILE *f = fopen(path, "w");
    fputs("{\"x0\":[0],\"x1\":[1],\"z\":1,\"epsilon\":null,\"annotator\":7}\n"
          "{\"x0\":[0],\"x1\":[1],\"z\":0,\"epsilon\":null,\"annotator\":\"ann-x\"}\n"
          "{\"x0\":[0],\"x1\":[1],\"z\":0,\"epsilon\":null,\"user\":7}\n",
          f);
    fclose(f);
    lp_load_opts lo = {0};
    lp_dataset *ds = NULL;
    char msg[256];
    CHECK_ERR(lp_dataset_load(path, &lo, &ds, NULL, msg, sizeof msg), LP_OK);
    CHECK(ds && ds->user);
    if (ds && ds->user) {
        CHECK_INT(ds->user[0], 7);
        CHECK_INT(ds->user[2], 7);
        CHECK(ds->user[1] >= 0 && ds->user[1] != 7);
    }
    lp_dataset_free(ds);
    f = fopen(path, "w");
    fputs("{\"x0\":[0],\"x1\":[1],\"z\":1,\"epsilon\":null,\"annotator\":7}\n"
          "{\"x0\":[0],\"x1\":[1],\"z\":0,\"epsilon\":null}\n",
          f);
    fclose(f);
    CHECK_ERR(lp_dataset_load(path, &lo, &ds, NULL, msg, sizeof msg), LP_EINVALID_ARGUMENT);
    CHECK(strstr(msg, "line 2") != NULL);
    f = fopen(path, "w");
    fputs("{\"x0\":[0],\"x1\":[1],\"z\":1,\"epsilon\":null,\"annotator\":-1}\n", f);
    fclose(f);
    CHECK_ERR(lp_dataset_load(path, &lo, &ds, NULL, msg, sizeof msg), LP_EWRONG_TYPE);
    f = fopen(path, "w");
    fputs("{\"x0\":[0],\"x1\":[1],\"z\":1,\"epsilon\":null}\n", f);
    fclose(f);
    CHECK_ERR(lp_dataset_load(path, &lo, &ds, NULL, msg, sizeof msg), LP_OK);
    CHECK(ds && ds->user == NULL);
    lp_dataset_free(ds);
    tmpdir_remove(dir);
}

/* Hand-made study rows: error(m) per method at two m, 4 seeds with a
 * small spread; AUP-RLHF's error at the largest m given (NAN: refused). */
static int verdict_of(const char *dir, double rr_lo, double rr_hi, double aup_lo, double aup_hi)
{
    char path[300];
    snprintf(path, sizeof path, "%s/ul.jsonl", dir);
    FILE *f = fopen(path, "w");
    for (int seed = 0; seed < 4; seed++)
        for (int k = 0; k < 2; k++)
            for (int aup = 0; aup < 2; aup++) {
                double e = aup ? (k ? aup_hi : aup_lo) : (k ? rr_hi : rr_lo);
                e += 0.01 * (seed - 1.5);
                if (isnan(e))
                    fprintf(f,
                            "{\"part\":\"fixed_total\",\"method\":\"aup\",\"eps\":8,\"m\":%d,"
                            "\"n\":%d,\"seed\":%d,\"refused\":true,\"error\":null,"
                            "\"cosine\":null,\"sigma\":null,\"steps_run\":0}\n",
                            k ? 16 : 1, k ? 100 : 1600, seed);
                else
                    fprintf(f,
                            "{\"part\":\"fixed_total\",\"method\":\"%s\",\"eps\":8,\"m\":%d,"
                            "\"n\":%d,\"seed\":%d,\"refused\":false,\"error\":%g,"
                            "\"cosine\":0.9,\"sigma\":null,\"steps_run\":20}\n",
                            aup ? "aup" : "rr", k ? 16 : 1, k ? 100 : 1600, seed, e);
            }
    fclose(f);
    lp_ul_study us;
    char msg[256];
    int rc = lp_ul_load(path, &us, msg, sizeof msg);
    CHECK_ERR(rc, LP_OK);
    lp_study_verdict v;
    lp_ul_verdict(&us, &v);
    lp_ul_clear(&us);
    return rc == LP_OK ? (int)v.level : -1;
}

static void test_study_verdict(void)
{
    char dir[256];
    CHECK(tmpdir_create(dir, sizeof dir, "aupstudy") == 0);
    /* RR grows, AUP-RLHF flat and better at m_hi: supported */
    CHECK_INT(verdict_of(dir, 0.1, 0.5, 0.2, 0.25), LP_VERDICT_SUPPORTED);
    /* AUP-RLHF grows less but stays worse: partly */
    CHECK_INT(verdict_of(dir, 0.1, 0.5, 0.9, 1.0), LP_VERDICT_PARTLY);
    /* RR does not grow: not supported */
    CHECK_INT(verdict_of(dir, 0.1, 0.12, 0.2, 0.1), LP_VERDICT_NOT_SUPPORTED);
    /* AUP-RLHF refused at m_hi: (b) and (c) fail */
    CHECK_INT(verdict_of(dir, 0.1, 0.5, 0.2, NAN), LP_VERDICT_NOT_SUPPORTED);
    tmpdir_remove(dir);
}

int main(void)
{
    test_calibration_formula();
    test_keep_prob();
    test_concentration_and_outliers();
    test_above_threshold();
    test_samplers();
    test_determinism_and_cap();
    test_refusals();
    test_huge_epsilon();
    test_privacy_audit();
    test_annotator_field();
    test_study_verdict();
    return check_summary();
}
