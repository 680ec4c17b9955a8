/* policy.c — chi-mix and KL links. See policy.h. */
#include "policy.h"

#include "error.h"

#include <assert.h>
#include <float.h>
#include <math.h>
#include <stdlib.h>

double lp_phi_inv_log(double v)
{
    assert(isfinite(v));
    /* f(y) = e^y + y - v is increasing and convex, and f(y0) >= 0 at both
     * starts (y0 = v for v < 1: f = e^v > 0; y0 = log v for v >= 1:
     * f = log v >= 0), so Newton decreases monotonically to the root. */
    double y = v < 1.0 ? v : log(v);
    for (int it = 0; it < 200; it++) {
        double e = exp(y);
        double step = (e + y - v) / (e + 1.0);
        if (!(step > 0.0)) /* at the root, or rounding turned the sign */
            break;
        y -= step;
        if (step <= 2.0 * DBL_EPSILON * fmax(1.0, fabs(y)))
            break;
    }
    return y;
}

double lp_phi_inv(double v)
{
    return exp(lp_phi_inv_log(v));
}

/* Normalised log pi_ref into lr[K] (uniform when log_ref is NULL). */
static int ref_logs(const double *log_ref, size_t K, double *lr)
{
    if (log_ref == NULL) {
        for (size_t k = 0; k < K; k++)
            lr[k] = -log((double)K);
        return LP_OK;
    }
    double mx = -INFINITY;
    for (size_t k = 0; k < K; k++) {
        if (!isfinite(log_ref[k]))
            return LP_EINVALID_ARGUMENT;
        mx = fmax(mx, log_ref[k]);
    }
    double s = 0.0;
    for (size_t k = 0; k < K; k++)
        s += exp(log_ref[k] - mx);
    double lz = mx + log(s);
    for (size_t k = 0; k < K; k++)
        lr[k] = log_ref[k] - lz;
    return LP_OK;
}

/* sum_k pi_ref,k phi^{-1}((r_k - lam)/beta) with r already shifted, and
 * its derivative in lam into *slope (phi(y) = e^y + y, so dy/dlam =
 * -1 / (beta (e^y + 1))). */
static double chimix_mass(const double *r, const double *lr, size_t K, double beta, double lam,
                          double *slope)
{
    double s = 0.0, d = 0.0;
    for (size_t k = 0; k < K; k++) {
        double y = lp_phi_inv_log((r[k] - lam) / beta);
        double p = exp(lr[k] + y);
        s += p;
        d -= p / (beta * (exp(y) + 1.0));
    }
    *slope = d;
    return s;
}

int lp_policy_probs(lp_link_kind link, const double *r, const double *log_ref, size_t K,
                    double beta, double *pi, double *logratio, double *lambda)
{
    if (K < 1 || K > LP_POLICY_MAX_K || !(beta > 0.0) || !isfinite(beta))
        return LP_EINVALID_ARGUMENT;
    double rmax = -INFINITY, rmin = INFINITY;
    for (size_t k = 0; k < K; k++) {
        if (!isfinite(r[k]))
            return LP_EINVALID_ARGUMENT;
        rmax = fmax(rmax, r[k]);
        rmin = fmin(rmin, r[k]);
    }
    double *lr = malloc(2 * K * sizeof *lr);
    if (lr == NULL)
        return LP_ENO_MEMORY;
    double *rs = lr + K;
    int rc = ref_logs(log_ref, K, lr);
    if (rc != LP_OK) {
        free(lr);
        return rc;
    }
    for (size_t k = 0; k < K; k++)
        rs[k] = r[k] - rmax; /* <= 0, max exactly 0 */
    double lam_shifted, s = 0.0;
    if (link == LP_LINK_KL) {
        for (size_t k = 0; k < K; k++)
            s += exp(lr[k] + rs[k] / beta);
        double lz = log(s); /* finite: the max term is exp(lr) > 0 */
        for (size_t k = 0; k < K; k++) {
            double y = rs[k] / beta - lz;
            pi[k] = exp(lr[k] + y);
            if (logratio)
                logratio[k] = y;
        }
        lam_shifted = beta * lz;
    } else {
        /* Bracket: at lo every argument is >= 1 (mass >= 1); at hi every
         * argument is <= 1 (mass <= 1). The mass is decreasing and convex
         * in lam: Newton steps, kept inside the shrinking bracket (a step
         * that leaves it bisects instead), until the step is within
         * rounding or the bracket has no double left inside. */
        double lo = (rmin - rmax) - beta, hi = -beta, lam = 0.5 * (lo + hi);
        for (int it = 0; it < 2000; it++) {
            double slope, g = chimix_mass(rs, lr, K, beta, lam, &slope) - 1.0;
            if (g == 0.0)
                break;
            if (g > 0.0)
                lo = lam;
            else
                hi = lam;
            double next = slope < 0.0 ? lam - g / slope : NAN;
            if (!(next > lo && next < hi))
                next = 0.5 * (lo + hi);
            if (!(next > lo && next < hi))
                break;
            double step = fabs(next - lam);
            lam = next;
            if (step <= 4.0 * DBL_EPSILON * fmax(1.0, fabs(lam)))
                break;
        }
        lam_shifted = lam;
        for (size_t k = 0; k < K; k++) {
            double y = lp_phi_inv_log((rs[k] - lam_shifted) / beta);
            pi[k] = exp(lr[k] + y);
            s += pi[k];
            if (logratio)
                logratio[k] = y;
        }
        /* Remove the last ulps of mass error (|s - 1| ~ 1e-16 K). */
        for (size_t k = 0; k < K; k++)
            pi[k] /= s;
    }
    if (lambda)
        *lambda = lam_shifted + rmax;
    free(lr);
    return LP_OK;
}
