/*
 * test_learn_fit.c — end-to-end properties of the trainer library:
 * recovery of theta* on synthetic Bradley-Terry data, the debiasing
 * predictions at eps = 1, the norm bound, determinism (byte-identical model
 * files), the simulator's corruption rates, the featurizer, and rejection
 * of bad input with a message naming the line.
 *
 * Recovery tolerances are derived, not guessed: for an M-estimator the
 * sampling covariance is H^{-1} G H^{-1} / n (H the Hessian of the mean
 * loss, G the mean outer product of per-label gradients) evaluated at the
 * estimate; the standard error of ||theta_hat||/||theta*|| is
 * sqrt(u^T Cov u)/||theta*||, u = theta_hat/||theta_hat||, and we allow 4
 * standard errors (two-sided normal tail 6e-5; the seed is fixed anyway).
 */
#include "check.h"
#include "dataset.h"
#include "error.h"
#include "evaluate.h"
#include "featurize.h"
#include "files.h"
#include "losses.h"
#include "model.h"
#include "objective.h"
#include "optimize.h"
#include "rr.h"
#include "simulate.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define D 16

/* Solves A x = b (A symmetric positive definite, D x D) by Cholesky. */
static int chol_solve(const double *A, const double *b, double *x)
{
    double L[D * D] = {0}, y[D];
    for (int i = 0; i < D; i++)
        for (int j = 0; j <= i; j++) {
            double s = A[i * D + j];
            for (int k = 0; k < j; k++)
                s -= L[i * D + k] * L[j * D + k];
            if (i == j) {
                if (s <= 0)
                    return -1;
                L[i * D + i] = sqrt(s);
            } else
                L[i * D + j] = s / L[j * D + j];
        }
    for (int i = 0; i < D; i++) {
        double s = b[i];
        for (int k = 0; k < i; k++)
            s -= L[i * D + k] * y[k];
        y[i] = s / L[i * D + i];
    }
    for (int i = D - 1; i >= 0; i--) {
        double s = y[i];
        for (int k = i + 1; k < D; k++)
            s -= L[k * D + i] * x[k];
        x[i] = s / L[i * D + i];
    }
    return 0;
}

/* Sandwich standard error of ||theta||/||theta*|| at theta. */
static double norm_ratio_se(lp_objective *ob, const double *theta, double star_norm)
{
    const lp_dataset *ds = lp_objective_data(ob);
    const lp_label_consts *k = lp_objective_consts(ob);
    const lp_loss_spec *ls = &lp_objective_options(ob)->loss;
    double H[D * D], G[D * D] = {0}, tp[D], gp[D], gm[D];
    for (int j = 0; j < D; j++) { /* Hessian by central differences of the gradient */
        double h = 1e-5;
        memcpy(tp, theta, sizeof tp);
        tp[j] += h;
        lp_objective_eval(ob, tp, gp);
        tp[j] -= 2 * h;
        lp_objective_eval(ob, tp, gm);
        for (int i = 0; i < D; i++)
            H[i * D + j] = (gp[i] - gm[i]) / (2 * h);
    }
    for (int i = 0; i < D; i++) /* symmetrise */
        for (int j = 0; j < i; j++)
            H[i * D + j] = H[j * D + i] = 0.5 * (H[i * D + j] + H[j * D + i]);
    for (size_t r = 0; r < ds->n; r++) {
        double m = lp_dataset_row_dot(ds, r, theta), g;
        lp_loss_point(ls, m, ds->z[r] ? 1 : -1, &k[r], &g);
        const double *x = ds->xd + r * D;
        for (int i = 0; i < D; i++)
            for (int j = 0; j < D; j++)
                G[i * D + j] += g * g * x[i] * x[j];
    }
    for (int i = 0; i < D * D; i++)
        G[i] /= (double)ds->n;
    double u[D], nrm = 0, w[D], Gw[D], v[D];
    for (int j = 0; j < D; j++)
        nrm += theta[j] * theta[j];
    nrm = sqrt(nrm);
    for (int j = 0; j < D; j++)
        u[j] = theta[j] / nrm;
    if (chol_solve(H, u, w) != 0) /* w = H^{-1} u */
        return INFINITY;
    for (int i = 0; i < D; i++) {
        Gw[i] = 0;
        for (int j = 0; j < D; j++)
            Gw[i] += G[i * D + j] * w[j];
    }
    double var = 0;
    for (int i = 0; i < D; i++)
        var += w[i] * Gw[i];
    (void)v;
    return sqrt(var / (double)ds->n) / star_norm;
}

static lp_dataset *sim(size_t n, double eps, double alpha, lp_order order, lp_adversary adv,
                       uint64_t seed, double *star)
{
    lp_sim_opts o;
    lp_sim_opts_init(&o);
    o.n = n;
    o.d = D;
    o.eps = eps;
    o.alpha = alpha;
    o.order = order;
    o.adv = adv;
    o.seed = seed;
    lp_sim_theta_star(D, 2.0, seed, star);
    lp_dataset *ds = NULL;
    CHECK_ERR(lp_simulate(&o, star, &ds), LP_OK);
    return ds;
}

static void fit_one(lp_dataset *ds, lp_loss_kind kind, double rmax, double *theta,
                    lp_fit_result *res, lp_objective **keep)
{
    lp_objective_opts oo;
    lp_objective_opts_init(&oo, kind);
    oo.loss.rmax = rmax;
    lp_objective *ob = lp_objective_new(ds, &oo);
    lp_fit_opts fo;
    lp_fit_opts_init(&fo, kind == LP_LOSS_RR_SGD ? LP_OPT_SGD : LP_OPT_LBFGS);
    CHECK_ERR(lp_fit(ob, &fo, theta, res), LP_OK);
    if (keep)
        *keep = ob;
    else
        lp_objective_free(ob);
}

static void test_recovery(void)
{
    double star[D], th[D];
    lp_fit_result res;
    lp_eval_opts eo;
    lp_eval_opts_init(&eo);
    eo.prompts = 200;
    /* eps = inf, no corruption: every loss recovers the direction. */
    lp_dataset *ds = sim(20000, INFINITY, 0.0, LP_ORDER_CTL, LP_ADV_FLIP, 11, star);
    for (int k = 0; k < LP_LOSS_COUNT; k++) {
        fit_one(ds, (lp_loss_kind)k, 1.0, th, &res, NULL);
        lp_eval_result er;
        CHECK_ERR(lp_evaluate_truth(th, star, D, &eo, &er), LP_OK);
        check_record(er.cosine > 0.99, __FILE__, __LINE__, "%s eps=inf cosine %.5f",
                     lp_loss_name((lp_loss_kind)k), er.cosine);
    }
    lp_dataset_free(ds);

    /* eps = 1: square-chipo and rdpo are debiased (their population
     * minimiser is theta*: rdpo's score is unbiased; square-chipo's target
     * E[c zbar|x] = tanh(m_star / 2) is attained inside the clip, with Rmax = 5
     * so that the clip at |m| = 10 = 5 sd of the margin is immaterial), so
     * the norm ratio is 1 within 4 sandwich standard errors. chipo fits
     * the attenuated P(z=1|m) = q + (1-2q) sigma(m): its slope at 0 is
     * (1-2q) = 0.46 times sigma's, so its norm shrinks; we require it
     * below 1 - 4 SE and below 0.8. */
    ds = sim(20000, 1.0, 0.0, LP_ORDER_CTL, LP_ADV_FLIP, 12, star);
    double sn = 0;
    for (int j = 0; j < D; j++)
        sn += star[j] * star[j];
    sn = sqrt(sn);
    lp_loss_kind debiased[2] = {LP_LOSS_SQUARE_CHIPO, LP_LOSS_RDPO};
    for (int t = 0; t < 2; t++) {
        lp_objective *ob;
        fit_one(ds, debiased[t], 5.0, th, &res, &ob);
        double se = norm_ratio_se(ob, th, sn), ratio = res.theta_norm / sn;
        check_record(fabs(ratio - 1.0) <= 4 * se && se < 0.1, __FILE__, __LINE__,
                     "%s eps=1 norm ratio %.4f, SE %.4f", lp_loss_name(debiased[t]), ratio, se);
        lp_objective_free(ob);
    }
    lp_objective *ob;
    fit_one(ds, LP_LOSS_CHIPO, 5.0, th, &res, &ob);
    double se = norm_ratio_se(ob, th, sn), ratio = res.theta_norm / sn;
    check_record(ratio < 1.0 - 4 * se && ratio < 0.8, __FILE__, __LINE__,
                 "chipo eps=1 norm ratio %.4f (SE %.4f) should shrink", ratio, se);
    lp_objective_free(ob);
    lp_dataset_free(ds);
}

/* The norm bound binds and is reported; L2 keeps rdpo finite. */
static void test_bound(void)
{
    double star[D], th[D];
    lp_dataset *ds = sim(300, 0.5, 0.0, LP_ORDER_CTL, LP_ADV_FLIP, 5, star);
    lp_objective_opts oo;
    lp_objective_opts_init(&oo, LP_LOSS_RDPO);
    lp_objective *ob = lp_objective_new(ds, &oo);
    lp_fit_opts fo;
    lp_fit_opts_init(&fo, LP_OPT_LBFGS);
    fo.norm_bound = 0.5;
    lp_fit_result res;
    CHECK_ERR(lp_fit(ob, &fo, th, &res), LP_OK);
    CHECK(res.bound_active);
    CHECK(res.theta_norm <= 0.5 * (1 + 1e-12));
    fo.norm_bound = 1e3;
    CHECK_ERR(lp_fit(ob, &fo, th, &res), LP_OK);
    CHECK(res.theta_norm <= 1e3);
    lp_objective_free(ob);
    /* SGD projects. */
    lp_fit_opts_init(&fo, LP_OPT_SGD);
    fo.norm_bound = 0.3;
    fo.epochs = 3;
    ob = lp_objective_new(ds, &oo);
    CHECK_ERR(lp_fit(ob, &fo, th, &res), LP_OK);
    CHECK(res.theta_norm <= 0.3 * (1 + 1e-12));
    lp_objective_free(ob);
    lp_dataset_free(ds);
}

static void write_model(lp_dataset *ds, lp_loss_kind kind, lp_method meth, const char *path)
{
    lp_objective_opts oo;
    lp_objective_opts_init(&oo, kind);
    oo.threads = 2;
    lp_objective *ob = lp_objective_new(ds, &oo);
    lp_fit_opts fo;
    lp_fit_opts_init(&fo, meth);
    fo.seed = 99;
    lp_model m = {0};
    m.theta = calloc(ds->d, sizeof *m.theta);
    CHECK_ERR(lp_fit(ob, &fo, m.theta, &m.res), LP_OK);
    m.loss = oo.loss;
    m.link = lp_loss_default_link(kind);
    m.beta = 1;
    m.fit = fo;
    m.threads = 2;
    m.d = ds->d;
    lp_model_summarize(&m, ds);
    CHECK_ERR(lp_model_write(&m, path), LP_OK);
    free(m.theta);
    lp_objective_free(ob);
}

static void test_determinism(void)
{
    double s1[D], s2[D];
    lp_dataset *a = sim(3000, 1.0, 0.1, LP_ORDER_LTC, LP_ADV_RANDOM, 21, s1);
    lp_dataset *b = sim(3000, 1.0, 0.1, LP_ORDER_LTC, LP_ADV_RANDOM, 21, s2);
    CHECK(memcmp(s1, s2, sizeof s1) == 0);
    CHECK(memcmp(a->xd, b->xd, a->n * D * sizeof(double)) == 0 && memcmp(a->z, b->z, a->n) == 0);
    char p1[] = "/tmp/lp_det_XXXXXX", p2[] = "/tmp/lp_det_XXXXXX";
    close(mkstemp(p1));
    close(mkstemp(p2));
    lp_method meths[2] = {LP_OPT_LBFGS, LP_OPT_SGD};
    lp_loss_kind kinds[2] = {LP_LOSS_SQUARE_CHIPO, LP_LOSS_RR_SGD};
    for (int t = 0; t < 2; t++) {
        write_model(a, kinds[t], meths[t], p1);
        write_model(b, kinds[t], meths[t], p2);
        size_t n1 = 0, n2 = 0;
        char *x = file_read_all(p1, &n1), *y = file_read_all(p2, &n2);
        CHECK(x && y && n1 == n2 && n1 > 100 && memcmp(x, y, n1) == 0);
        /* and it reads back */
        lp_model *m = NULL;
        char msg[256];
        CHECK_ERR(lp_model_read(p1, &m, msg, sizeof msg), LP_OK);
        CHECK(m && m->d == D && m->loss.kind == kinds[t]);
        lp_model_free(m);
        free(x);
        free(y);
    }
    unlink(p1);
    unlink(p2);
    lp_dataset_free(a);
    lp_dataset_free(b);
}

/* Flip rates of the mask scheme: CTL q + alpha(1-2q), LTC q + alpha(1-q).
 * With n = 200000 the binomial SD is <= sqrt(0.25/n) = 0.0011; 5 SD. */
static void test_corruption_rates(void)
{
    lp_prng g;
    lp_prng_seed(&g, 4);
    double eps = 0.5, alpha = 0.1, q = lp_rr_flip_prob(eps);
    size_t n = 200000, fc = 0, fl = 0, c1 = 0;
    lp_adv_view v = {.truth = 1, .backdoor = 1};
    for (size_t i = 0; i < n; i++) {
        fc += lp_corrupt_label(&g, 1, eps, alpha, LP_ORDER_CTL, LP_ADV_FLIP, &v) == 0;
        fl += lp_corrupt_label(&g, 1, eps, alpha, LP_ORDER_LTC, LP_ADV_FLIP, &v) == 0;
        c1 += lp_corrupt_label(&g, 0, INFINITY, alpha, LP_ORDER_LTC, LP_ADV_CONSTANT1, &v);
    }
    double tol = 5 * sqrt(0.25 / n);
    CHECK_NEAR(fc / (double)n, q + alpha * (1 - 2 * q), tol);
    CHECK_NEAR(fl / (double)n, q + alpha * (1 - q), tol);
    CHECK_NEAR(c1 / (double)n, alpha, tol);
}

static void test_featurizer(void)
{
    lp_feat_spec s;
    lp_feat_spec_init(&s);
    s.hash_dim = 64;
    lp_featurizer *fz = lp_featurizer_new(&s);
    lp_sparse a = {0}, b = {0};
    CHECK_ERR(lp_featurize(fz, "p", "Hello, World! hello world", &a), LP_OK);
    CHECK_ERR(lp_featurize(fz, "p", "hello world HELLO WORLD", &b), LP_OK);
    CHECK(a.nnz == b.nnz && memcmp(a.idx, b.idx, a.nnz * sizeof *a.idx) == 0);
    int inc = 1;
    double ss = 0;
    for (size_t k = 0; k < a.nnz; k++) {
        if (k)
            inc &= a.idx[k] > a.idx[k - 1];
        CHECK(a.idx[k] < lp_feat_dim(&s));
        if (a.idx[k] < s.hash_dim)
            ss += a.val[k] * a.val[k];
    }
    CHECK(inc);
    CHECK_NEAR(ss, 1.0, 1e-12); /* the hashed block is L2-normalised */
    CHECK_ERR(lp_featurize(fz, NULL, "", &a), LP_OK);
    CHECK_INT(a.nnz, 2); /* only the length features */
    lp_sparse_free(&a);
    lp_sparse_free(&b);
    lp_featurizer_free(fz);
}

/* Bad input: each case rejected with a message naming the line. */
static void test_bad_input(void)
{
    struct {
        const char *text;
        int code;
        const char *needle;
    } cases[] = {
        {"{\"x0\":[1,2],\"x1\":[3,4],\"z\":1,\"epsilon\":1}\n"
         "{\"x0\":[1,2],\"x1\":[3],\"z\":1,\"epsilon\":1}\n",
         LP_EINVALID_ARGUMENT, "line 2"},
        {"{\"x0\":[1,2],\"x1\":[3,4],\"z\":1,\"epsilon\":1}\n"
         "{\"x0\":[1,2,5],\"x1\":[3,4,5],\"z\":1,\"epsilon\":1}\n",
         LP_EINVALID_ARGUMENT, "line 2"},
        {"{\"x0\":[NaN,2],\"x1\":[3,4],\"z\":1,\"epsilon\":1}\n", LP_EMALFORMED_JSON, "line 1"},
        {"{\"x0\":[1e400,2],\"x1\":[3,4],\"z\":1,\"epsilon\":1}\n", LP_EMALFORMED_JSON, "line 1"},
        {"{\"x0\":[1,2],\"x1\":[3,4],\"z\":2,\"epsilon\":1}\n", LP_EBAD_LABEL, "line 1"},
        {"\n{\"x0\":[1,2],\"x1\":[3,4],\"z\":1,\"epsilon\":0}\n", LP_EBAD_EPSILON, "line 2"},
        {"{\"x0\":[1,2],\"x1\":[3,4],\"z\":1,\"epsilon\":-1}\n", LP_EBAD_EPSILON, "line 1"},
        {"{\"x0\":[1,2],\"x1\":[3,4],\"z\":1}\n", LP_EMISSING_FIELD, "line 1"},
        {"{\"x0\":[1,\"a\"],\"x1\":[3,4],\"z\":1,\"epsilon\":1}\n", LP_EWRONG_TYPE, "line 1"},
        {"{\"x0\":[1,2],\"x1\":[3,4],\"z\":1,\"epsilon\":1,\"w\":1}\n", LP_EUNKNOWN_FIELD,
         "line 1"},
        {"{\"x0\":[1,2],\"x1\":[3,4],\"z\":1,\"epsilon\":null}\n{oops\n", LP_EMALFORMED_JSON,
         "line 2"},
        {"", LP_EINVALID_ARGUMENT, "empty"},
        {"\n\n", LP_EINVALID_ARGUMENT, "empty"},
        {"{\"prompt\":\"p\",\"chosen\":\"a\"}\n", LP_EMISSING_FIELD, "line 1"},
    };
    char path[] = "/tmp/lp_bad_XXXXXX";
    int fd = mkstemp(path);
    close(fd);
    lp_feat_spec s;
    lp_feat_spec_init(&s);
    lp_featurizer *fz = lp_featurizer_new(&s);
    for (size_t c = 0; c < sizeof cases / sizeof *cases; c++) {
        FILE *f = fopen(path, "w");
        fputs(cases[c].text, f);
        fclose(f);
        lp_load_opts lo = {.fz = fz, .prefer_f32 = -1};
        lp_dataset *ds = (lp_dataset *)1;
        char msg[256] = "";
        int rc = lp_dataset_load(path, &lo, &ds, NULL, msg, sizeof msg);
        check_record(rc == cases[c].code && ds == NULL && strstr(msg, cases[c].needle), __FILE__,
                     __LINE__, "case %zu: got %s \"%s\", want %s mentioning \"%s\"", c,
                     lp_error_name(rc), msg, lp_error_name(cases[c].code), cases[c].needle);
    }
    /* Good input in all three formats. */
    const char *good[] = {
        "{\"x0\":[1,2],\"x1\":[3,4],\"z\":1,\"epsilon\":null}\n{\"x0\":[0,0],\"x1\":[1,1],\"z\":0,"
        "\"epsilon\":2.5,\"y\":1}\n",
        "{\"prompt\":\"p\",\"chosen\":\"good "
        "answer\",\"rejected\":\"bad\",\"label_id\":1,\"epsilon\":1,\"z\":1}\n",
        "{\"prompt\":\"p\",\"chosen\":\"a b\",\"rejected\":\"c\",\"chosen_rank\":0}\n",
        "{\"prompt\":\"p\",\"chosen\":\"x\",\"rejected\":\"y\",\"epsilon\":null,\"chosen_"
        "features\":[1,2,3],\"rejected_features\":[0,0,0]}\n"};
    lp_data_format want[] = {LP_FMT_DENSE, LP_FMT_EXPORT, LP_FMT_PAIRS, LP_FMT_EXPORT};
    for (int c = 0; c < 4; c++) {
        FILE *f = fopen(path, "w");
        fputs(good[c], f);
        fclose(f);
        lp_load_opts lo = {.fz = fz, .prefer_f32 = -1};
        lp_dataset *ds = NULL;
        lp_data_format fmt;
        char msg[256] = "";
        CHECK_ERR(lp_dataset_load(path, &lo, &ds, &fmt, msg, sizeof msg), LP_OK);
        CHECK(ds != NULL && fmt == want[c]);
        if (ds && c == 0) {
            CHECK_INT(ds->n, 2);
            CHECK(isinf(ds->eps[0]) && ds->eps[1] == 2.5 && ds->xd[0] == 2.0);
        }
        if (ds && c == 3)
            CHECK(ds->storage == LP_STORE_F64 && ds->d == 3 && ds->xd[2] == 3.0);
        lp_dataset_free(ds);
    }
    lp_featurizer_free(fz);
    unlink(path);
}

/* What the progress observer sees: the calls it gets, as the curve of a run. */
struct observed {
    int calls, finite, last_iteration, increasing, evaluations_last;
    double last_objective, last_grad;
};

static int observe(void *ctx, int iteration, int evaluations, double objective, double grad_norm)
{
    struct observed *o = ctx;
    o->calls++;
    if (!isfinite(objective))
        return 0;
    if (o->finite > 0 && iteration <= o->last_iteration)
        o->increasing = 0;
    o->finite++;
    o->last_iteration = iteration;
    o->evaluations_last = evaluations;
    o->last_objective = objective;
    o->last_grad = grad_norm;
    return 0;
}

/* L-BFGS reports every iteration, the last at the returned point; SGD
 * reports each epoch's estimate, then F at the returned (averaged) theta. */
static void test_observer(void)
{
    double star[D], th[D];
    lp_dataset *ds = sim(2000, 1.0, 0.0, LP_ORDER_CTL, LP_ADV_FLIP, 21, star);
    lp_objective_opts oo;
    lp_objective_opts_init(&oo, LP_LOSS_SQUARE_CHIPO);
    oo.l2 = 0.5;
    lp_objective *ob = lp_objective_new(ds, &oo);
    lp_fit_opts fo;
    lp_fit_opts_init(&fo, LP_OPT_LBFGS);
    struct observed seen = {.increasing = 1};
    fo.on_progress = observe;
    fo.progress_ctx = &seen;
    lp_fit_result res;
    CHECK_ERR(lp_fit(ob, &fo, th, &res), LP_OK);
    CHECK_INT(seen.finite, res.iterations);
    CHECK(seen.increasing);
    CHECK_INT(seen.last_iteration, res.iterations);
    CHECK_NEAR(seen.last_objective, res.objective, 1e-12 * fabs(res.objective));
    CHECK_NEAR(seen.last_grad, res.grad_norm, 1e-9);
    lp_fit_opts_init(&fo, LP_OPT_SGD);
    fo.epochs = 5;
    fo.on_progress = observe;
    fo.progress_ctx = &seen;
    memset(&seen, 0, sizeof seen);
    CHECK_ERR(lp_fit(ob, &fo, th, &res), LP_OK);
    CHECK_INT(seen.finite, fo.epochs + 1); /* each epoch, then the result */
    CHECK_INT(seen.evaluations_last, 1);
    CHECK_INT(seen.last_iteration, res.iterations);
    CHECK(seen.last_objective == res.objective);
    CHECK(seen.last_grad == res.grad_norm);
    lp_objective_free(ob);
    lp_dataset_free(ds);
}

int main(void)
{
    test_observer();
    test_featurizer();
    test_bad_input();
    test_corruption_rates();
    test_bound();
    test_determinism();
    test_recovery();
    return check_summary();
}
