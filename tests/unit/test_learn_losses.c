/*
 * test_learn_losses.c — the losses against the golden vectors in
 * tests/data/golden (docs/design.md §3.2), finite-difference gradient checks of
 * every loss (near the clip edges, tiny/huge/infinite eps), objective
 * gradients in theta space for every storage and kernel, and the L-BFGS
 * optima against the golden optima.
 *
 * Tolerances: the golden values are sums of n = 2000 double terms computed
 * in another order; the rounding difference is <= n u sum|terms| ~ 2e-13
 * relative, so 1e-9 (relative to max(1, |value|)) has ample margin yet
 * catches any formula error. Finite differences: central differences with
 * step h have truncation error <= h^2 M3 / 6 and rounding error
 * <= u (|f(m+h)| + |f(m-h)|) / (2h); the tolerance is 10x their sum with
 * M3 bounded by 4(1 + c)^2 (third derivatives of these losses are bounded
 * by the square of the target scale).
 */
#include "check.h"
#include "dataset.h"
#include "error.h"
#include "losses.h"
#include "objective.h"
#include "optimize.h"
#include "rr.h"

#include <float.h>
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *golden_dir(void)
{
    const char *g = getenv("LDPREF_GOLDEN");
    return g ? g : "tests/data/golden";
}

/* data.csv: df_0..df_15, y, z. Builds a float64 dataset with eps = 1. */
static lp_dataset *load_golden_data(size_t *d_out)
{
    char path[512];
    snprintf(path, sizeof path, "%s/data.csv", golden_dir());
    FILE *f = fopen(path, "r");
    if (f == NULL)
        return NULL;
    char line[8192];
    if (!fgets(line, sizeof line, f)) {
        fclose(f);
        return NULL;
    }
    size_t d = 16;
    lp_dataset *ds = lp_dataset_new(d, LP_STORE_F64);
    double x0[16] = {0}, x1[16];
    while (fgets(line, sizeof line, f)) {
        char *p = line;
        for (size_t j = 0; j < d; j++) {
            x1[j] = strtod(p, &p);
            p++;
        }
        int y = (int)strtol(p, &p, 10);
        p++;
        int z = (int)strtol(p, &p, 10);
        lp_dataset_add_dense(ds, x0, x1, z, 1.0, y, NULL, 0);
    }
    fclose(f);
    *d_out = d;
    return ds;
}

static double vec_maxabs(const double *v, size_t d)
{
    double m = 0;
    for (size_t j = 0; j < d; j++)
        m = fmax(m, fabs(v[j]));
    return m;
}

static void json_vec(const json_t *a, double *out, size_t d)
{
    for (size_t j = 0; j < d; j++)
        out[j] = json_number_value(json_array_get(a, j));
}

/* A golden case's objective and gradient at zero, theta* and the probe
 * point, to 1e-9 relative. */
static void golden_values_at_points(const char *key, const json_t *e, lp_objective *ob,
                                    const double *star, const double *probe, size_t d)
{
    double want[16], got[16];
    struct {
        const char *obj, *grad;
        const double *theta;
    } pts[3] = {{"obj_zero", "grad_zero", NULL},
                {"obj_star", "grad_star", star},
                {"obj_probe", "grad_probe", probe}};
    double zero[16] = {0};
    for (int p = 0; p < 3; p++) {
        double f0 = lp_objective_eval(ob, pts[p].theta ? pts[p].theta : zero, got);
        double fw = json_number_value(json_object_get(e, pts[p].obj));
        json_vec(json_object_get(e, pts[p].grad), want, d);
        double tol = 1e-9 * fmax(1.0, fabs(fw));
        check_record(fabs(f0 - fw) <= tol, __FILE__, __LINE__, "%s %s: %.17g vs %.17g", key,
                     pts[p].obj, f0, fw);
        double gtol = 1e-9 * fmax(1.0, vec_maxabs(want, d));
        for (size_t j = 0; j < d; j++)
            check_record(fabs(got[j] - want[j]) <= gtol, __FILE__, __LINE__,
                         "%s %s[%zu]: %.17g vs %.17g", key, pts[p].grad, j, got[j], want[j]);
    }
}

/* A golden case's fitted optimum against the golden one. */
static void golden_fitted_optimum(const char *key, const json_t *e, lp_objective *ob,
                                  lp_loss_kind kind, size_t d)
{
    double want[16], th[16];
    /* The fitted optimum. For the convex losses (dpo, rdpo, ipo) the
     * minimiser is unique: objectives agree to 1e-9 and theta to the
     * distance the golden optimum's own residual gradient allows.
     * chipo (flat outside the clip) and square-chipo (non-convex) may
     * stop at different stationary points: ours must be at least as
     * good (objective <= golden + 1e-9) and stationary. */
    lp_fit_opts fo;
    lp_fit_opts_init(&fo, LP_OPT_LBFGS);
    fo.gtol = 1e-10;
    fo.max_iter = 2000;
    lp_fit_result res;
    CHECK_ERR(lp_fit(ob, &fo, th, &res), LP_OK);
    double ow = json_number_value(json_object_get(e, "obj_hat"));
    int convex = kind == LP_LOSS_DPO || kind == LP_LOSS_RDPO || kind == LP_LOSS_IPO;
    if (convex)
        check_record(fabs(res.objective - ow) <= 1e-9 * fmax(1, fabs(ow)), __FILE__, __LINE__,
                     "%s obj_hat %.17g vs %.17g", key, res.objective, ow);
    else
        check_record(res.objective <= ow + 1e-8 * fmax(1, fabs(ow)), __FILE__, __LINE__,
                     "%s obj_hat %.17g (golden %.17g)", key, res.objective, ow);
    /* Where the golden optimum itself has a residual gradient (> 1e-6:
     * square-chipo with Rmax 1, whose minimiser sits on a clip kink)
     * only the objective is comparable: at a kink F changes to first
     * order, |g| ~ 1e-3 times the last line-search steps (<= 1e-6),
     * hence the 1e-8 relative objective tolerance above. */
    double gh = json_number_value(json_object_get(e, "maxabs_grad_hat"));
    if (gh < 1e-6)
        check_record(res.grad_norm < 1e-6, __FILE__, __LINE__, "%s grad at optimum %.3g", key,
                     res.grad_norm);
    if (convex) {
        json_vec(json_object_get(e, "theta_hat"), want, d);
        double dist = 0;
        for (size_t j = 0; j < d; j++)
            dist = fmax(dist, fabs(th[j] - want[j]));
        check_record(dist < 1e-4, __FILE__, __LINE__, "%s theta_hat max diff %.3g", key, dist);
    }
}

/* A golden case's accuracy bookkeeping. */
static void golden_accuracy_bookkeeping(const json_t *e, const lp_dataset *ds, const double *star,
                                        size_t d)
{
    double want[16];
    /* Accuracy of the golden theta_hat against theta* on the first 1000
     * rows: a check of our margin/accuracy bookkeeping. */
    json_vec(json_object_get(e, "theta_hat"), want, d);
    int agree = 0;
    for (size_t i = 0; i < 1000; i++)
        agree += (lp_dataset_row_dot(ds, i, want) > 0) == (lp_dataset_row_dot(ds, i, star) > 0);
    CHECK_NEAR(agree / 1000.0, json_number_value(json_object_get(e, "acc_first1000_vs_theta_star")),
               1e-12);
}

static void test_golden(void)
{
    size_t d = 0;
    lp_dataset *ds = load_golden_data(&d);
    CHECK(ds != NULL);
    if (ds == NULL)
        return;
    CHECK_INT(ds->n, 2000);
    char path[512];
    snprintf(path, sizeof path, "%s/losses.json", golden_dir());
    json_error_t err;
    json_t *root = json_load_file(path, 0, &err);
    CHECK(root != NULL);
    if (root == NULL) {
        lp_dataset_free(ds);
        return;
    }
    CHECK_NEAR(lp_rr_debias(1.0), json_number_value(json_object_get(root, "c_eps")), 1e-15);
    CHECK_NEAR(lp_rr_flip_prob(1.0), json_number_value(json_object_get(root, "q_eps")), 1e-15);
    double probe[16], star[16];
    json_vec(json_object_get(root, "theta_probe"), probe, d);
    snprintf(path, sizeof path, "%s/theta_star.csv", golden_dir());
    FILE *f = fopen(path, "r");
    for (size_t j = 0; f && j < d; j++)
        CHECK(fscanf(f, "%lf", &star[j]) == 1);
    if (f)
        fclose(f);
    const char *key;
    json_t *e;
    int cases = 0;
    json_object_foreach(json_object_get(root, "losses"), key, e)
    {
        lp_loss_kind kind;
        const char *lname = json_string_value(json_object_get(e, "loss"));
        CHECK_ERR(lp_loss_parse(lname, &kind), LP_OK);
        lp_objective_opts oo;
        lp_objective_opts_init(&oo, kind);
        oo.loss.rmax = json_number_value(json_object_get(e, "Rmax"));
        oo.l2 = json_number_value(json_object_get(e, "lam"));
        lp_objective *ob = lp_objective_new(ds, &oo);
        CHECK(ob != NULL);
        golden_values_at_points(key, e, ob, star, probe, d);
        golden_fitted_optimum(key, e, ob, kind, d);
        golden_accuracy_bookkeeping(e, ds, star, d);
        lp_objective_free(ob);
        cases++;
    }
    CHECK_INT(cases, 14);
    json_decref(root);
    lp_dataset_free(ds);
}

/* Derivative of every loss against central differences over margins. */
static void test_fd_margins(void)
{
    const double eps_list[] = {1e-4, 0.05, 0.5, 1.0, 8.0, 50.0, 800.0, INFINITY};
    const double ms[] = {-40.0, -5.0,  -2.001, -1.999, -0.3,  0.0,  0.7,
                         1.5,   1.999, 2.001,  5.9,    6.001, 12.0, 40.0};
    const double rmaxes[] = {1.0, 3.0};
    int n = 0;
    for (int kind = 0; kind < LP_LOSS_COUNT; kind++)
        for (int r = 0; r < 2; r++)
            for (size_t e = 0; e < sizeof eps_list / sizeof *eps_list; e++)
                for (size_t a = 0; a < sizeof ms / sizeof *ms; a++)
                    for (int zb = -1; zb <= 1; zb += 2) {
                        lp_loss_spec s;
                        lp_loss_spec_init(&s, (lp_loss_kind)kind);
                        s.rmax = rmaxes[r];
                        lp_label_consts k;
                        lp_label_consts_from_eps(eps_list[e], &k);
                        double m = ms[a], h = 1e-5 * fmax(1.0, fabs(m)), g, gp, gm;
                        double f = lp_loss_point(&s, m, zb, &k, &g);
                        double fp = lp_loss_point(&s, m + h, zb, &k, &gp);
                        double fm = lp_loss_point(&s, m - h, zb, &k, &gm);
                        double fd = (fp - fm) / (2 * h);
                        double M3 = 4.0 * (1.0 + k.c) * (1.0 + k.c);
                        double tol = 10.0 * (h * h * M3 / 6.0 +
                                             DBL_EPSILON * (fabs(fp) + fabs(fm)) / (2 * h));
                        int ok = isfinite(f) && isfinite(g) && fabs(g - fd) <= tol;
                        check_record(ok, __FILE__, __LINE__,
                                     "%s rmax %g eps %g m %g zbar %d: d %.12g fd %.12g tol %.3g",
                                     lp_loss_name((lp_loss_kind)kind), s.rmax, eps_list[e], m, zb,
                                     g, fd, tol);
                        n++;
                    }
    CHECK(n > 1000);
    /* Clip: exactly zero derivative outside, non-zero just inside. */
    lp_loss_spec s;
    lp_loss_spec_init(&s, LP_LOSS_SQUARE_CHIPO);
    lp_label_consts k;
    lp_label_consts_from_eps(1.0, &k);
    double g;
    lp_loss_point(&s, 2.0, 1, &k, &g);
    CHECK(g == 0.0);
    lp_loss_point(&s, nextafter(2.0, 0.0), 1, &k, &g);
    CHECK(g != 0.0);
    /* eps = inf reduces rdpo, rr-mle to the log-loss, square to Brier. */
    lp_label_consts_from_eps(INFINITY, &k);
    for (double m = -3; m <= 3; m += 0.5) {
        lp_loss_spec a, b;
        lp_loss_spec_init(&a, LP_LOSS_RDPO);
        lp_loss_spec_init(&b, LP_LOSS_DPO);
        double ga, gb;
        CHECK_NEAR(lp_loss_point(&a, m, -1, &k, &ga), lp_loss_point(&b, m, -1, &k, &gb), 1e-15);
        CHECK_NEAR(ga, gb, 1e-15);
        lp_loss_spec_init(&a, LP_LOSS_RR_MLE);
        CHECK_NEAR(lp_loss_point(&a, m, 1, &k, &ga), lp_loss_point(&b, m, 1, &k, &gb), 1e-15);
        CHECK_NEAR(ga, gb, 1e-15);
    }
    /* rr-mle is exactly -log(q + (1-2q) sigma(zbar m)) for moderate values. */
    lp_label_consts_from_eps(0.7, &k);
    lp_loss_spec a;
    lp_loss_spec_init(&a, LP_LOSS_RR_MLE);
    for (double m = -3; m <= 3; m += 0.75) {
        double ga;
        double want = -log(k.q + (1 - 2 * k.q) / (1 + exp(-m)));
        CHECK_NEAR(lp_loss_point(&a, m, 1, &k, &ga), want, 1e-14);
    }
}

/* Objective gradient in theta space by central differences, for every
 * loss, storage and kernel, with mixed eps (including +inf). */
static void test_fd_objective(void)
{
    const size_t n = 300, d = 7;
    const double eps_cycle[] = {0.3, 1.0, INFINITY, 5.0};
    lp_dataset *dd = lp_dataset_new(d, LP_STORE_F64);
    lp_dataset *df = lp_dataset_new(d, LP_STORE_F32);
    lp_dataset *dc = lp_dataset_new(d, LP_STORE_CSR);
    unsigned s = 12345;
    double x0[7], x1[7];
    for (size_t i = 0; i < n; i++) {
        lp_sparse f0 = {0}, f1 = {0};
        for (size_t j = 0; j < d; j++) {
            s = s * 1103515245u + 12345u;
            x1[j] = ((double)(s >> 8) / 16777216.0 - 0.5) * 0.5;
            x1[j] = (double)(float)x1[j]; /* exactly representable in float */
            x0[j] = 0.0;
        }
        int z = (int)(i % 3 == 0);
        double eps = eps_cycle[i % 4];
        lp_dataset_add_dense(dd, x0, x1, z, eps, -1, NULL, 0);
        lp_dataset_add_dense(df, x0, x1, z, eps, -1, NULL, 0);
        f1.idx = malloc(d * sizeof *f1.idx);
        f1.val = malloc(d * sizeof *f1.val);
        f1.cap = d;
        for (size_t j = 0; j < d; j++)
            if (x1[j] != 0) {
                f1.idx[f1.nnz] = (uint32_t)j;
                f1.val[f1.nnz++] = x1[j];
            }
        lp_dataset_add_sparse(dc, &f0, &f1, z, eps, -1, NULL, 0);
        lp_sparse_free(&f1);
    }
    double theta[7] = {0.4, -0.3, 0.9, 0.1, -1.2, 0.5, 0.05}, g[7], g2[7], tp[7];
    for (int kind = 0; kind < LP_LOSS_COUNT; kind++) {
        lp_objective_opts oo;
        lp_objective_opts_init(&oo, (lp_loss_kind)kind);
        oo.l2 = 0.3;
        lp_objective *ob = lp_objective_new(dd, &oo);
        double f = lp_objective_eval(ob, theta, g);
        for (size_t j = 0; j < d; j++) {
            double h = 1e-6;
            memcpy(tp, theta, sizeof tp);
            tp[j] += h;
            double fp = lp_objective_eval(ob, tp, NULL);
            tp[j] -= 2 * h;
            double fm = lp_objective_eval(ob, tp, NULL);
            /* Rows whose margin crosses a clip edge within +-h make the FD
             * differ by at most (jump-free: the losses are continuous)
             * O(h) * |kink| / (2h) per crossing row / n; with margins far
             * from the edges at this theta this does not occur. */
            double tol = 1e-7 * fmax(1.0, fabs(g[j]));
            check_record(fabs((fp - fm) / (2 * h) - g[j]) <= tol, __FILE__, __LINE__,
                         "%s theta-FD [%zu]: %.12g vs %.12g", lp_loss_name((lp_loss_kind)kind), j,
                         (fp - fm) / (2 * h), g[j]);
        }
        /* Same objective through the other storages and kernels. */
        lp_dataset *others[2] = {df, dc};
        for (int o = 0; o < 2; o++)
            for (int kern = 0; kern < 2; kern++) {
                oo.kernel = (lp_kernel)kern;
                lp_objective *ob2 = lp_objective_new(others[o], &oo);
                double f2 = lp_objective_eval(ob2, theta, g2);
                /* float32 BLAS accumulates in float inside a block:
                 * relative error <= d * 2^-24 per margin. */
                double tol = (o == 0 && kern == 1) ? 1e-5 : 1e-12;
                CHECK_NEAR(f2, f, tol * fmax(1, fabs(f)));
                for (size_t j = 0; j < d; j++)
                    CHECK_NEAR(g2[j], g[j], tol * fmax(1, fabs(g[j])));
                lp_objective_free(ob2);
            }
        lp_objective_free(ob);
    }
    lp_dataset_free(dd);
    lp_dataset_free(df);
    lp_dataset_free(dc);
}

/* Every fused dense kernel this CPU can run (portable, AVX2, AVX-512;
 * float32 and float64 storage) against a long-double reference of the same
 * objective, on shapes that exercise every code path (d = 263: 32-column
 * stripes, an 8-column step and a scalar tail; d = 40; chunks whose row
 * counts are not multiples of the kernels' blocks; margins both inside and
 * outside the clip band), for every loss, with 1, 2 and 3 threads.
 *
 * The data are exact in float32, so storage adds no error; what remains is
 * double rounding, bounded (Higham, u = 2^-53, g_k = k u / (1 - k u)) by:
 *   margin:  |dm_i| <= g_d A_i,  A_i = sum_j |x_ij theta_j|;
 *   per row: loss and derivative evaluation (libm vs the kernels' own tanh,
 *            < 4e-16 absolute on p) <= 64 u (1 + |loss_i| + |g_i|);
 *   sums:    g_n times the sum of absolute terms.
 * Hence, with H = 4 >= |d^2 loss / dm^2| for these losses at eps >= 1,
 *   |dF|      <= (1/n) sum_i [|g_i| g_d A_i + 64u(1+|l_i|+|g_i|) + g_n |l_i|]
 *   |dgrad_j| <= (1/n) sum_i [H g_d A_i + 64u(1+|g_i|) + g_n |g_i|] |x_ij|,
 * the tolerances used below (no fudge factor). Results must also be
 * bit-identical across thread counts (chunked, ordered reduction). */
/* The reference of one objective: long-double value and gradient, and the
 * rounding bounds of the comment above. Arrays of d values, owned. */
typedef struct kernel_reference {
    double f, ftol;
    double *g, *gtol, *gabs;
} kernel_reference;

/* Inputs exact in float32 (the same values in both storages), labels and
 * epsilons cycling, and a theta whose margins reach past the clip band. */
static void kernel_data_fill(lp_dataset *df, lp_dataset *dd, double *theta, size_t n, size_t d)
{
    const double eps_cycle[3] = {1.0, 2.0, INFINITY};
    unsigned s = 777;
    for (size_t k = 0; k < n * d; k++) {
        s = s * 1103515245u + 12345u;
        df->xf[k] = (float)((double)(s >> 8) / 8388608.0 - 1.0); /* [-1, 1), exact */
        dd->xd[k] = df->xf[k];
    }
    for (size_t i = 0; i < n; i++) {
        df->z[i] = dd->z[i] = (uint8_t)(i % 3 != 0);
        df->eps[i] = dd->eps[i] = eps_cycle[i % 3];
    }
    for (size_t j = 0; j < d; j++) { /* margin sd ~1.5: some rows clipped at |m| = 2 */
        s = s * 1103515245u + 12345u;
        double r = (double)(s >> 8) / 16777216.0 + 0.5; /* [0.5, 1.5) */
        theta[j] = ((j % 2) ? 1.5 : -1.5) * sqrt(3.0 / (double)d) * r / 1.08;
    }
}

static void kernel_reference_compute(lp_dataset *dd, const lp_objective_opts *oo,
                                     const double *theta, kernel_reference *ref)
{
    const double u = DBL_EPSILON / 2, H = 4.0;
    size_t n = dd->n, d = dd->d;
    double gd = (double)d * u / (1 - (double)d * u), gn = (double)n * u / (1 - (double)n * u);
    long double *gacc = calloc(d, sizeof *gacc);
    lp_objective *ob = lp_objective_new(dd, oo);
    const lp_label_consts *kc = lp_objective_consts(ob);
    long double fsum = 0;
    double ftol = 0;
    for (size_t j = 0; j < d; j++)
        ref->gtol[j] = 0, ref->gabs[j] = 0;
    for (size_t i = 0; i < n; i++) {
        const double *x = dd->xd + i * d;
        long double m = 0;
        double A = 0, gi;
        for (size_t j = 0; j < d; j++) {
            m += (long double)x[j] * theta[j];
            A += fabs(x[j] * theta[j]);
        }
        double li = lp_loss_point(&oo->loss, (double)m, dd->z[i] ? 1 : -1, &kc[i], &gi);
        fsum += li;
        ftol += fabs(gi) * gd * A + 64 * u * (1 + fabs(li) + fabs(gi)) + gn * fabs(li);
        for (size_t j = 0; j < d; j++) {
            gacc[j] += (long double)gi * x[j];
            ref->gabs[j] += fabs(gi * x[j]);
            ref->gtol[j] += (H * gd * A + 64 * u * (1 + fabs(gi)) + gn * fabs(gi)) * fabs(x[j]);
        }
    }
    double reg = 0;
    for (size_t j = 0; j < d; j++)
        reg += theta[j] * theta[j];
    ref->f = (double)((fsum + oo->l2 * reg) / n);
    for (size_t j = 0; j < d; j++)
        ref->g[j] = (double)((gacc[j] + 2 * oo->l2 * theta[j]) / n);
    ref->ftol = ftol / (double)n;
    lp_objective_free(ob);
    free(gacc);
}

/* Every SIMD level and storage with 1, 2 and 3 threads against ref; the
 * results must be bit-identical across thread counts. */
static void kernels_check_against(lp_dataset *df, lp_dataset *dd, lp_objective_opts oo,
                                  const double *theta, const kernel_reference *ref)
{
    const char *loss = lp_loss_name(oo.loss.kind);
    size_t n = dd->n, d = dd->d;
    double *g = malloc(d * sizeof *g), *g1 = malloc(d * sizeof *g1);
    for (int simd = LP_SIMD_NONE; simd <= (int)lp_objective_simd_best(); simd++)
        for (int st = 0; st < 2; st++) {
            oo.simd = (lp_simd)simd;
            double f1 = 0;
            for (int threads = 1; threads <= 3; threads++) {
                oo.threads = threads;
                lp_objective *ob = lp_objective_new(st ? dd : df, &oo);
                /* The level asked for is the level run (no silent fallback). */
                check_record(lp_objective_simd_used(ob) == (lp_simd)simd, __FILE__, __LINE__,
                             "simd %d asked, %d used", simd, (int)lp_objective_simd_used(ob));
                double f = lp_objective_eval(ob, theta, g);
                check_record(fabs(f - ref->f) <= ref->ftol, __FILE__, __LINE__,
                             "%s simd %d %s d=%zu: F %.17g vs ref %.17g (tol %.3g)", loss, simd,
                             st ? "f64" : "f32", d, f, ref->f, ref->ftol);
                /* The vector float32 kernels (AVX-512, AVX2) sum each
                 * block of 8 terms g_i x_ij in float: g_i rounded once
                 * (u_f), then 8 roundings of the running sum, so at most
                 * (gamma_8 + u_f) sum |g_i x_ij| <= 10 u_f sum |g_i x_ij|
                 * on top of the double bounds. */
                double blockf = simd >= LP_SIMD_AVX2 && !st ? 10 * (FLT_EPSILON / 2) : 0;
                int bad = 0;
                for (size_t j = 0; j < d; j++)
                    bad += !(fabs(g[j] - ref->g[j]) <=
                             (ref->gtol[j] + blockf * ref->gabs[j]) / (double)n);
                check_record(bad == 0, __FILE__, __LINE__,
                             "%s simd %d %s d=%zu: %d gradient values off the reference", loss,
                             simd, st ? "f64" : "f32", d, bad);
                if (threads == 1) {
                    f1 = f;
                    memcpy(g1, g, d * sizeof *g);
                } else {
                    CHECK(memcmp(&f, &f1, sizeof f) == 0 && memcmp(g, g1, d * sizeof *g) == 0);
                }
                lp_objective_free(ob);
            }
        }
    free(g);
    free(g1);
}

static void test_kernels_vs_reference(void)
{
    const size_t shapes[2][2] = {{2003, 263}, {5001, 40}};
    for (int sh = 0; sh < 2; sh++) {
        size_t n = shapes[sh][0], d = shapes[sh][1];
        lp_dataset *df = lp_dataset_new_dense(n, d, LP_STORE_F32);
        lp_dataset *dd = lp_dataset_new_dense(n, d, LP_STORE_F64);
        double *theta = malloc(d * sizeof *theta);
        kernel_reference ref = {.g = malloc(d * sizeof(double)),
                                .gtol = malloc(d * sizeof(double)),
                                .gabs = malloc(d * sizeof(double))};
        kernel_data_fill(df, dd, theta, n, d);
        for (int kind = 0; kind < LP_LOSS_COUNT; kind++) {
            lp_objective_opts oo;
            lp_objective_opts_init(&oo, (lp_loss_kind)kind);
            oo.l2 = 0.3;
            kernel_reference_compute(dd, &oo, theta, &ref);
            kernels_check_against(df, dd, oo, theta, &ref);
        }
        lp_dataset_free(df);
        lp_dataset_free(dd);
        free(theta);
        free(ref.g);
        free(ref.gtol);
        free(ref.gabs);
    }
    printf("# fused kernels checked at levels:");
    for (int simd = LP_SIMD_NONE; simd <= (int)lp_objective_simd_best(); simd++)
        printf(" %s", lp_simd_name((lp_simd)simd));
    printf("\n");
}

/* A per-label derivative beyond float's range (eps = 1e-40: c(eps) ~ 2e40)
 * must not pass through the AVX-512 kernel's float partial sums: every
 * kernel gives the portable kernel's finite gradient to double rounding. */
static void test_kernels_huge_derivative(void)
{
    size_t n = 64, d = 64;
    lp_dataset *ds = lp_dataset_new_dense(n, d, LP_STORE_F32);
    double theta[64], gref[64], g[64];
    for (size_t k = 0; k < n * d; k++)
        ds->xf[k] = (float)((double)((k * 37) % 101) / 50.0 - 1.0);
    for (size_t i = 0; i < n; i++) {
        ds->z[i] = (uint8_t)(i % 2);
        ds->eps[i] = 1e-40;
    }
    for (size_t j = 0; j < d; j++)
        theta[j] = 0.01 * (double)((int)j % 7 - 3);
    lp_objective_opts oo;
    lp_objective_opts_init(&oo, LP_LOSS_SQUARE_CHIPO);
    oo.simd = LP_SIMD_NONE;
    lp_objective *ob = lp_objective_new(ds, &oo);
    lp_objective_eval(ob, theta, gref);
    lp_objective_free(ob);
    for (int simd = LP_SIMD_AVX2; simd <= (int)lp_objective_simd_best(); simd++) {
        oo.simd = (lp_simd)simd;
        ob = lp_objective_new(ds, &oo);
        lp_objective_eval(ob, theta, g);
        lp_objective_free(ob);
        int bad = 0;
        for (size_t j = 0; j < d; j++)
            bad += !(isfinite(g[j]) && fabs(g[j] - gref[j]) <= 1e-12 * fabs(gref[j]) + 1e-300);
        check_record(bad == 0, __FILE__, __LINE__,
                     "simd %d, eps 1e-40: %d gradient values off the portable kernel", simd, bad);
    }
    lp_dataset_free(ds);
}

int main(void)
{
    test_golden();
    test_fd_margins();
    test_fd_objective();
    test_kernels_vs_reference();
    test_kernels_huge_derivative();
    return check_summary();
}
