/*
 * test_learn_policy.c — the chi-mix and KL links against the golden
 * vectors, and their invariants: probabilities sum to 1 within 1e-12,
 * beta phi(pi/pi_ref) = r - lambda within 1e-9 (relative to max(1, |r -
 * lambda|), the scale at which r - lambda itself is rounded), monotone in
 * r, and finite for rewards up to +-1e6.
 *
 * Golden tolerance: the reference computed the same quantities in double
 * with its own root finders; both solve to ~1e-15, so 1e-12 absolute on
 * probabilities (which are <= 1) is conservative.
 */
#include "check.h"
#include "error.h"
#include "policy.h"

#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void test_golden(void)
{
    const char *dir = getenv("LDPREF_GOLDEN") ? getenv("LDPREF_GOLDEN") : "tests/data/golden";
    char path[512];
    snprintf(path, sizeof path, "%s/policy.json", dir);
    json_error_t err;
    json_t *root = json_load_file(path, 0, &err);
    CHECK(root != NULL);
    if (root == NULL)
        return;
    const json_t *R = json_object_get(root, "rewards");
    const double betas[2] = {1.0, 0.5};
    const char *names[2][3] = {{"chimix_beta=1", "Z_beta=1", "kl_beta=1"},
                               {"chimix_beta=0.5", "Z_beta=0.5", "kl_beta=0.5"}};
    for (size_t c = 0; c < json_array_size(R); c++) {
        double r[4], pi[4], lam;
        for (size_t k = 0; k < 4; k++)
            r[k] = json_number_value(json_array_get(json_array_get(R, c), k));
        for (int b = 0; b < 2; b++) {
            CHECK_ERR(lp_policy_probs(LP_LINK_CHIMIX, r, NULL, 4, betas[b], pi, NULL, &lam), LP_OK);
            const json_t *want = json_array_get(json_object_get(root, names[b][0]), c);
            for (size_t k = 0; k < 4; k++)
                CHECK_NEAR(pi[k], json_number_value(json_array_get(want, k)), 1e-12);
            CHECK_NEAR(lam,
                       json_number_value(json_array_get(json_object_get(root, names[b][1]), c)),
                       1e-10);
            CHECK_ERR(lp_policy_probs(LP_LINK_KL, r, NULL, 4, betas[b], pi, NULL, NULL), LP_OK);
            want = json_array_get(json_object_get(root, names[b][2]), c);
            for (size_t k = 0; k < 4; k++)
                CHECK_NEAR(pi[k], json_number_value(json_array_get(want, k)), 1e-12);
        }
    }
    const char *key;
    json_t *v;
    json_object_foreach(json_object_get(root, "phi_inv"), key, v)
    {
        double x = atof(key), want = json_number_value(v);
        CHECK_NEAR(lp_phi_inv(x), want, 1e-13 * fmax(1.0, want));
        /* and it inverts phi: w + log w = x */
        double w = lp_phi_inv(x);
        if (w > 0)
            CHECK_NEAR(w + log(w), x, 1e-12 * fmax(1.0, fabs(x)));
    }
    json_decref(root);
}

/* Invariants over random and extreme reward vectors. */
static void test_invariants(void)
{
    unsigned s = 7;
    double scales[] = {1e-3, 1.0, 30.0, 1e3, 1e6};
    double betas[] = {0.05, 0.5, 1.0, 4.0};
    for (int trial = 0; trial < 400; trial++) {
        size_t K = 2 + (size_t)(trial % 9);
        double r[10], lref[10], pi[10], y[10], lam;
        double sc = scales[trial % 5], beta = betas[(trial / 5) % 4];
        for (size_t k = 0; k < K; k++) {
            s = s * 1103515245u + 12345u;
            r[k] = sc * (2.0 * ((s >> 8) / 16777216.0) - 1.0);
            s = s * 1103515245u + 12345u;
            lref[k] = -3.0 * ((s >> 8) / 16777216.0);
        }
        const double *ref = (trial & 1) ? lref : NULL;
        for (int link = 0; link < 2; link++) {
            CHECK_ERR(lp_policy_probs((lp_link_kind)link, r, ref, K, beta, pi, y, &lam), LP_OK);
            double sum = 0;
            int finite = 1;
            for (size_t k = 0; k < K; k++) {
                sum += pi[k];
                finite &= isfinite(pi[k]) && isfinite(y[k]) && pi[k] >= 0;
            }
            CHECK(finite);
            CHECK_NEAR(sum, 1.0, 1e-12);
            if (link == LP_LINK_CHIMIX)
                for (size_t k = 0; k < K; k++) {
                    /* beta phi(pi/pi_ref) with log(pi/pi_ref) = y kept exact */
                    double lhs = beta * (exp(y[k]) + y[k]), rhs = r[k] - lam;
                    check_record(fabs(lhs - rhs) <= 1e-9 * fmax(1.0, fabs(rhs)), __FILE__, __LINE__,
                                 "identity K=%zu beta=%g scale=%g: %.17g vs %.17g", K, beta, sc,
                                 lhs, rhs);
                }
            /* monotone: a larger reward never gets a smaller pi/pi_ref */
            for (size_t a = 0; a < K; a++)
                for (size_t b = 0; b < K; b++)
                    if (r[a] > r[b])
                        CHECK(y[a] >= y[b]);
        }
    }
    /* Extreme rewards: +-1e6 in one set. */
    double r[4] = {1e6, -1e6, 0.0, 1e6 - 1.0}, pi[4], y[4], lam;
    for (int link = 0; link < 2; link++) {
        CHECK_ERR(lp_policy_probs((lp_link_kind)link, r, NULL, 4, 1.0, pi, y, &lam), LP_OK);
        CHECK(isfinite(lam));
        CHECK_NEAR(pi[0] + pi[1] + pi[2] + pi[3], 1.0, 1e-12);
        CHECK(pi[1] == 0.0 && isfinite(y[1]) && y[1] < -1e5);
        CHECK(pi[0] > pi[3] && pi[3] > 0.0);
    }
    /* Raising one reward raises its probability (strictly, in the interior). */
    double base[3] = {0.1, 0.2, 0.3}, p0[3], p1[3];
    lp_policy_probs(LP_LINK_CHIMIX, base, NULL, 3, 1.0, p0, NULL, NULL);
    base[0] += 0.01;
    lp_policy_probs(LP_LINK_CHIMIX, base, NULL, 3, 1.0, p1, NULL, NULL);
    CHECK(p1[0] > p0[0] && p1[1] < p0[1]);
    /* phi^{-1} for large and very negative arguments never forms e^v. */
    CHECK(isfinite(lp_phi_inv_log(1e300)));
    CHECK_NEAR(lp_phi_inv_log(-1e6), -1e6, 1e-9);
    CHECK_NEAR(lp_phi_inv(1e6) + log(lp_phi_inv(1e6)), 1e6, 1e-9 * 1e6);
    /* Bad arguments. */
    CHECK_ERR(lp_policy_probs(LP_LINK_CHIMIX, r, NULL, 0, 1.0, pi, NULL, NULL),
              LP_EINVALID_ARGUMENT);
    CHECK_ERR(lp_policy_probs(LP_LINK_CHIMIX, r, NULL, 4, 0.0, pi, NULL, NULL),
              LP_EINVALID_ARGUMENT);
    double bad[2] = {NAN, 0};
    CHECK_ERR(lp_policy_probs(LP_LINK_KL, bad, NULL, 2, 1.0, pi, NULL, NULL), LP_EINVALID_ARGUMENT);
}

int main(void)
{
    test_golden();
    test_invariants();
    return check_summary();
}
