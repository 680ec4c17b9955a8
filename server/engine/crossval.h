/*
 * crossval.h — K-fold cross-validation grouped by prompt: the L2 penalty
 * chosen on a grid ("l2": "auto"), and the held-out quality of a fit,
 * debiased for privatized labels (docs/training.md, "Automatic L2 and the
 * held-out estimate").
 *
 * Folds: every label has a group key (the hash of its prompt; for records
 * without a prompt, a hash of its feature difference with its sign fixed,
 * so that a label's A/B orientation does not change it). The distinct keys
 * are ordered by a seeded hash and dealt round-robin into K folds, so a
 * prompt's pairs never straddle training and validation and the folds do
 * not depend on the order in which labels arrived.
 *
 * Held-out figures of a label i with observed z_i, eps_i (q_i, c_i as in
 * losses.h) and out-of-fold margin m_i:
 *   accuracy  a_i = c_i (agree_i - q_i), agree_i = 1{zbar_i m_i > 0}
 *             (1/2 on a tie): E[a_i] = P(the model agrees with the clean
 *             label), since P(agree) = q + (1 - 2q) acc and 1 - 2q = 1/c;
 *   Brier     b_i = p_i^2 - 2 p_i yhat_i + yhat_i, p_i = sigma(m_i) (m
 *             clipped at 2 Rmax for the clipped losses), yhat_i = c_i (z_i -
 *             q_i): E[b_i] = (p_i - y_i)^2, the clean Brier score.
 * Each figure is a mean over labels with the standard error sd/sqrt(n).
 * The penalty minimises the held-out Brier score (accuracy cannot see
 * theta's scale, which the penalty mostly sets).
 *
 * The grid: l2 = u0 10^x, x = lo, lo + 0.5, ..., hi (default -4 ... 2),
 * u0 = n S / min(n, d), S the mean squared norm of a feature difference:
 * the penalty whose curvature 2 l2 / n matches the data term's along a
 * typical direction is about u0 / 4. Each fold fits the grid from the
 * largest penalty down, each fit started from the previous one's theta.
 */
#ifndef LP_CROSSVAL_H
#define LP_CROSSVAL_H

#include "dataset.h"
#include "objective.h"
#include "optimize.h"

#include <stddef.h>
#include <stdint.h>

#define LP_CV_MAX_GRID 32

typedef struct lp_cv_opts {
    int folds;     /* K >= 2 (default 5) */
    int auto_l2;   /* 1: choose on the grid; 0: estimate at the objective's l2 */
    double lo, hi; /* grid exponents, step 0.5 (default -4, 2) */
    uint64_t seed; /* fold assignment (default 0) */
    int threads;   /* folds fitted at once (default 1) */
    /* Optional: called between fold fits' iterations, never concurrently;
     * nonzero cancels (LP_ECANCELLED). */
    int (*step)(void *ctx);
    void *step_ctx;
    /* Optional (NULL: none): n x (grid points) values, the out-of-fold
     * margin of label i at grid point t in oof[t * n + i] (NAN where a fold
     * stopped early). */
    double *oof;
} lp_cv_opts;

void lp_cv_opts_init(lp_cv_opts *o);

/* Held-out figures at one penalty. */
typedef struct lp_cv_point {
    double l2;
    double brier, brier_se;       /* debiased Brier score of sigma(m) */
    double accuracy, accuracy_se; /* debiased agreement with the clean label */
    double raw_accuracy;          /* agreement with the privatized label */
    int not_converged;            /* fold fits that stopped before their test */
} lp_cv_point;

typedef struct lp_cv_result {
    int folds, auto_l2;
    uint64_t seed;
    size_t n, groups;
    double unit; /* u0 */
    size_t npoints, chosen;
    lp_cv_point pt[LP_CV_MAX_GRID];
    double seconds; /* wall time of the fold fits */
} lp_cv_result;

/* The group key of every label (n values into key). */
void lp_cv_group_keys(const lp_dataset *ds, uint64_t *key);

/* fold_of[i] in [0, K) for every label; *groups gets the number of distinct
 * keys. LP_EINVALID_ARGUMENT when there are fewer groups than folds,
 * LP_ENO_MEMORY. */
int lp_cv_folds(const lp_dataset *ds, int K, uint64_t seed, int *fold_of, size_t *groups);

/*
 * Runs the cross-validation of fitting ds with oo and fo. Returns 0,
 * LP_EINVALID_ARGUMENT (options, or fewer groups than folds),
 * LP_ECANCELLED, LP_ENO_MEMORY. The chosen penalty is out->pt[out->chosen].l2.
 */
int lp_cv_run(const lp_dataset *ds, const lp_objective_opts *oo, const lp_fit_opts *fo,
              const lp_cv_opts *co, lp_cv_result *out);

#endif
