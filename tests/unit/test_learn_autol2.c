/*
 * test_learn_autol2.c — the L2 penalty chosen by cross-validation and the
 * held-out estimate debiased for privatized labels (engine/crossval).
 *
 *  - folds are grouped by prompt, balanced in prompts, and do not depend on
 *    the labels' order or A/B orientation;
 *  - "l2": "auto" picks a larger penalty per label (l2/n, the weight of the
 *    penalty against the mean loss) for fewer labels, and a larger penalty
 *    for a smaller eps (square-chipo, synthetic Bradley-Terry data, paired
 *    by seed; the claim must hold by 2 standard errors of the seed-to-seed
 *    spread of the log10 difference);
 *  - the debiased held-out accuracy covers its target at the nominal rate:
 *    over 60 seeds, the target is the expected agreement of the out-of-fold
 *    predictions with the clean Bradley-Terry label, mean_i P(y_i = sign
 *    m_i) = sigma(|theta*^T df_i|) or its complement, which the simulation
 *    knows. Within 1.96 SE in a binomial tolerance of 95%, within 1 SE in a
 *    tolerance of 68.3% (so an inflated SE fails too);
 *  - model order independence on the OASST pairs: the same labels in three
 *    arrival orders with random A/B orientation give the same chosen
 *    penalty and held-out figures within 0.005, and the same accuracy on a
 *    fixed test split of prompts within 0.01.
 */
#include "check.h"
#include "crossval.h"
#include "dataset.h"
#include "evaluate.h"
#include "featurize.h"
#include "losses.h"
#include "model.h"
#include "objective.h"
#include "optimize.h"
#include "prng.h"
#include "simulate.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define D 16

/* A synthetic square-chipo problem (server defaults: Rmax 1, no bound). */
static lp_dataset *simulate(size_t n, double eps, uint64_t seed, double *theta_star)
{
    lp_sim_theta_star(D, 2.0, seed, theta_star);
    lp_sim_opts so;
    lp_sim_opts_init(&so);
    so.n = n;
    so.d = D;
    so.eps = eps;
    so.seed = seed;
    so.storage = LP_STORE_F64;
    lp_dataset *ds = NULL;
    CHECK(lp_simulate(&so, theta_star, &ds) == 0);
    return ds;
}

static int cv_auto(const lp_dataset *ds, lp_cv_result *res, double *oof)
{
    lp_objective_opts oo;
    lp_objective_opts_init(&oo, LP_LOSS_SQUARE_CHIPO);
    lp_fit_opts fo;
    lp_fit_opts_init(&fo, LP_OPT_LBFGS);
    lp_cv_opts co;
    lp_cv_opts_init(&co);
    co.threads = 2;
    co.oof = oof;
    return lp_cv_run(ds, &oo, &fo, &co, res);
}

/* ---- folds ---------------------------------------------------------------- */

static void test_folds_by_prompt(void)
{
    /* 300 labels over 37 prompts of 1..15 labels, rows interleaved. */
    const size_t n = 300, G = 37;
    lp_dataset *ds = lp_dataset_new(D, LP_STORE_F64);
    lp_prng g;
    lp_prng_seed(&g, 5);
    double x0[D], x1[D];
    char prompt[32];
    size_t *prompt_of = malloc(n * sizeof *prompt_of);
    for (size_t i = 0; i < n; i++) {
        prompt_of[i] = (i * 7 + i / 13) % G;
        for (int j = 0; j < D; j++) {
            x0[j] = lp_prng_normal(&g);
            x1[j] = lp_prng_normal(&g);
        }
        char msg[128];
        CHECK(lp_dataset_add_dense(ds, x0, x1, (int)(i % 2), 1.0, -1, msg, sizeof msg) == 0);
        snprintf(prompt, sizeof prompt, "prompt %zu", prompt_of[i]);
        ds->group[i] = lp_dataset_prompt_key(prompt);
    }
    int *fold = malloc(n * sizeof *fold), *fold2 = malloc(n * sizeof *fold2);
    size_t groups = 0;
    CHECK(lp_cv_folds(ds, 5, 0, fold, &groups) == 0);
    CHECK_INT(groups, G);
    int straddle = 0, per_fold[5] = {0};
    for (size_t p = 0; p < G; p++) {
        int f = -1;
        for (size_t i = 0; i < n; i++)
            if (prompt_of[i] == p) {
                straddle += f >= 0 && fold[i] != f;
                f = fold[i];
            }
        if (f >= 0)
            per_fold[f]++;
    }
    CHECK_INT(straddle, 0);
    for (int f = 0; f < 5; f++) /* 37 prompts dealt into 5 folds: 7 or 8 each */
        check_record(per_fold[f] == 7 || per_fold[f] == 8, __FILE__, __LINE__,
                     "fold %d has %d prompts", f, per_fold[f]);

    /* Reversed arrival order and flipped orientation: the same folds. */
    size_t *rev = malloc(n * sizeof *rev);
    for (size_t i = 0; i < n; i++)
        rev[i] = n - 1 - i;
    lp_dataset *r = lp_dataset_subset(ds, rev, n);
    for (size_t i = 0; i < n; i++) {
        if (i % 3 == 0) {
            for (int j = 0; j < D; j++)
                r->xd[i * D + j] = -r->xd[i * D + j];
            r->z[i] = 1 - r->z[i];
        }
    }
    CHECK(lp_cv_folds(r, 5, 0, fold2, &groups) == 0);
    int moved = 0;
    for (size_t i = 0; i < n; i++)
        moved += fold2[n - 1 - i] != fold[i];
    CHECK_INT(moved, 0);

    /* Without prompts each label is its own group, keyed by its content with
     * the sign fixed: the orientation does not move it either. */
    memset(ds->group, 0, n * sizeof *ds->group);
    memset(r->group, 0, n * sizeof *r->group);
    CHECK(lp_cv_folds(ds, 5, 0, fold, &groups) == 0);
    CHECK_INT(groups, n);
    CHECK(lp_cv_folds(r, 5, 0, fold2, &groups) == 0);
    moved = 0;
    for (size_t i = 0; i < n; i++)
        moved += fold2[n - 1 - i] != fold[i];
    CHECK_INT(moved, 0);
    /* Fewer groups than folds is refused. */
    for (size_t i = 0; i < n; i++)
        ds->group[i] = i % 3 + 1;
    CHECK(lp_cv_folds(ds, 5, 0, fold, &groups) != 0);
    CHECK_INT(groups, 3);
    lp_dataset_free(r);
    lp_dataset_free(ds);
    free(rev);
    free(fold);
    free(fold2);
    free(prompt_of);
}

/* ---- the penalty ---------------------------------------------------------- */

static double chosen_l2(size_t n, double eps, uint64_t seed)
{
    double ts[D];
    lp_dataset *ds = simulate(n, eps, seed, ts);
    lp_cv_result res;
    CHECK(cv_auto(ds, &res, NULL) == 0);
    lp_dataset_free(ds);
    return res.pt[res.chosen].l2;
}

/* Checks that mean(diff) exceeds 2 standard errors of the seed spread. */
static void check_larger(const char *what, const double *diff, int S)
{
    double m = 0, v = 0;
    for (int s = 0; s < S; s++)
        m += diff[s] / S;
    for (int s = 0; s < S; s++)
        v += (diff[s] - m) * (diff[s] - m) / (S - 1);
    double se = sqrt(v / S);
    printf("# %s: mean log10 ratio %.3f, se %.3f over %d seeds\n", what, m, se, S);
    check_record(m > 0 && m - 2.0 * se > 0, __FILE__, __LINE__,
                 "%s: mean log10 ratio %.3f > 2 se %.3f", what, m, se);
}

static void test_penalty_monotone(void)
{
    enum { S = 5 };
    double dn[S], de[S];
    for (int s = 0; s < S; s++) {
        /* per label: l2/n at n = 400 vs n = 4000 (eps = 1) */
        dn[s] =
            log10(chosen_l2(400, 1.0, 100 + s) / 400) - log10(chosen_l2(4000, 1.0, 100 + s) / 4000);
        /* at n = 2000: eps = 0.5 vs eps = 4 */
        de[s] = log10(chosen_l2(2000, 0.5, 200 + s)) - log10(chosen_l2(2000, 4.0, 200 + s));
    }
    check_larger("l2/n, 400 vs 4000 labels", dn, S);
    check_larger("l2, eps 0.5 vs 4", de, S);
}

/* ---- coverage of the held-out estimate ------------------------------------ */

static void test_coverage(void)
{
    enum { S = 60 };
    const size_t n = 600;
    int within196 = 0, within1 = 0;
    double *oof = malloc(n * LP_CV_MAX_GRID * sizeof *oof);
    for (int s = 0; s < S; s++) {
        double ts[D];
        lp_dataset *ds = simulate(n, 1.0, 1000 + s, ts);
        lp_cv_result res;
        CHECK(cv_auto(ds, &res, oof) == 0);
        const lp_cv_point *p = &res.pt[res.chosen];
        double target = 0;
        for (size_t i = 0; i < n; i++) {
            double m = oof[res.chosen * n + i], pstar = lp_sigmoid(lp_dataset_row_dot(ds, i, ts));
            target += (m > 0 ? pstar : m < 0 ? 1 - pstar : 0.5) / (double)n;
        }
        double z = fabs(p->accuracy - target) / p->accuracy_se;
        within196 += z <= 1.96;
        within1 += z <= 1.0;
        lp_dataset_free(ds);
    }
    free(oof);
    /* Binomial tolerances: 3 sd of the count around S p. */
    double sd95 = sqrt(S * 0.95 * 0.05), sd68 = sqrt(S * 0.6827 * 0.3173);
    printf("# coverage over %d seeds: %d within 1.96 se (expect %.1f), %d within 1 se (expect "
           "%.1f)\n",
           S, within196, S * 0.95, within1, S * 0.6827);
    check_record(within196 >= S * 0.95 - 3 * sd95, __FILE__, __LINE__, "%d of %d within 1.96 se",
                 within196, S);
    check_record(fabs(within1 - S * 0.6827) <= 3 * sd68, __FILE__, __LINE__, "%d of %d within 1 se",
                 within1, S);
}

/* ---- order independence on real pairs --------------------------------------- */

#define OASST "tests/data/oasst-en100/en_100.pairs.jsonl"

static void test_order_independence(void)
{
    lp_feat_spec fs;
    lp_feat_spec_init(&fs);
    lp_featurizer *fz = lp_featurizer_new(&fs);
    lp_load_opts lo = {.fz = fz, .prefer_f32 = -1};
    lp_dataset *all = NULL;
    char msg[256];
    CHECK(lp_dataset_load(OASST, &lo, &all, NULL, msg, sizeof msg) == 0);
    if (all == NULL) {
        lp_featurizer_free(fz);
        return;
    }
    /* A fixed test split: a fifth of the prompts (fold 0 of a seeded split). */
    size_t n = all->n, ntr = 0, nte = 0;
    int *fold = malloc(n * sizeof *fold);
    size_t *tr = malloc(n * sizeof *tr), *te = malloc(n * sizeof *te), groups;
    CHECK(lp_cv_folds(all, 5, 77, fold, &groups) == 0);
    for (size_t i = 0; i < n; i++) {
        if (fold[i] == 0)
            te[nte++] = i;
        else
            tr[ntr++] = i;
    }
    lp_dataset *test = lp_dataset_subset(all, te, nte);
    double acc[3], ho[3], l2[3];
    lp_prng g;
    lp_prng_seed(&g, 9);
    for (int r = 0; r < 3; r++) {
        size_t *perm = malloc(ntr * sizeof *perm);
        memcpy(perm, tr, ntr * sizeof *perm);
        for (size_t i = ntr; r > 0 && i > 1; i--) { /* run 0: the file's order */
            size_t j = (size_t)lp_prng_below(&g, i), t = perm[i - 1];
            perm[i - 1] = perm[j];
            perm[j] = t;
        }
        lp_dataset *ds = lp_dataset_subset(all, perm, ntr);
        for (size_t i = 0; r > 0 && i < ds->n; i++)
            if (lp_prng_below(&g, 2)) { /* the other orientation */
                for (size_t k = ds->rowptr[i]; k < ds->rowptr[i + 1]; k++)
                    ds->val[k] = -ds->val[k];
                ds->z[i] = 1 - ds->z[i];
            }
        lp_objective_opts oo;
        lp_objective_opts_init(&oo, LP_LOSS_SQUARE_CHIPO);
        oo.threads = 2;
        lp_fit_opts fo;
        lp_fit_opts_init(&fo, LP_OPT_LBFGS);
        lp_cv_opts co;
        lp_cv_opts_init(&co);
        co.threads = 2;
        lp_model *m = NULL;
        CHECK(lp_model_fit_cv(ds, &oo, &fo, 1.0, &co, &m) == 0);
        if (m != NULL) {
            acc[r] = lp_evaluate_accuracy(test, m->theta);
            ho[r] = m->cv.pt[m->cv.chosen].accuracy;
            l2[r] = m->l2;
            printf("# order %d: l2 %.4g, held-out (debiased) %.4f +- %.4f, test split %.4f\n", r,
                   l2[r], ho[r], m->cv.pt[m->cv.chosen].accuracy_se, acc[r]);
        }
        lp_model_free(m);
        lp_dataset_free(ds);
        free(perm);
    }
    for (int r = 1; r < 3; r++) {
        CHECK_NEAR(l2[r], l2[0], 1e-9 * l2[0]);
        CHECK_NEAR(ho[r], ho[0], 0.005);
        CHECK_NEAR(acc[r], acc[0], 0.01);
    }
    lp_dataset_free(test);
    lp_dataset_free(all);
    lp_featurizer_free(fz);
    free(fold);
    free(tr);
    free(te);
}

int main(void)
{
    test_folds_by_prompt();
    test_penalty_monotone();
    test_coverage();
    test_order_independence();
    return check_summary();
}
