/*
 * model.h — the model file: one JSON document describing a fit completely.
 *
 *   {"format": "ldpref-model", "format_version": 1,
 *    "loss": "square-chipo", "link": "chimix", "beta": 1,
 *    "hyper": {"rmax", "tau", "l2", "l2_auto", "norm_bound" (null: none), "optimizer",
 *              "max_iter", "gtol", "memory", "lr", "batch", "epochs",
 *              "seed", "threads", "kernel", "precision"},
 *    "features": {"kind": "dense", "dim": d} |
 *                {"kind": "text", "dim", "hash": "fnv1a64-v1", "hash_dim",
 *                 "bigrams", "cross_prompt", "cross_max", "length"},
 *    "data": {"source", "n", "n_z1", "epsilon_histogram": [{"epsilon": 1|null,
 *             "count"}], "epsilon_other"},
 *    "metrics": {"rewards/chosen", "rewards/rejected", "rewards/margins",
 *                "rewards/accuracies", "objective", "grad_norm", "theta_norm",
 *                "iterations", "evaluations", "status", "converged",
 *                "norm_bound_active", "eval/accuracy_debiased",
 *                "eval/accuracy_debiased_se", "eval/rewards/accuracies",
 *                "eval/brier_debiased", "eval/brier_debiased_se",
 *                "eval/labels" (null without cross-validation)},
 *    "validation": {"method": "kfold_by_prompt", "folds", "groups",
 *                   "seed", "criterion": "brier_debiased", "l2_auto",
 *                   "unit", "chosen_l2", "grid": [{"l2", "brier_debiased",
 *                   "brier_debiased_se", "accuracy_debiased",
 *                   "accuracy_debiased_se", "accuracy_raw",
 *                   "not_converged"}]} | null,
 *    "release": {"mechanism", "epsilon", "delta", ...} (absent: a plain fit),
 *    "confidence": {"form", "lambda", "weighting", "labels", "weight_sum", "dim",
 *                   "encoding", "sigma"} (confidence.h; absent: not recorded),
 *    "theta": [d numbers, in feature order]}
 *
 * A general-preference model (Algorithm 3) also has "method": "general"
 * after format_version and a "general" object before theta (general.h:
 * rounds, beta, eta, the preference weights and the T iterates).
 *
 * Rewards are the linear implicit rewards r = theta^T f (for the chi-mix
 * class r = beta phi(pi/pi_ref) + lambda(x); lambda cancels in margins);
 * "chosen" is the response the observed label z prefers. Numbers are
 * written with 17 significant digits and keys in a fixed order, so equal
 * fits give byte-identical files (no timestamps are written).
 *
 * Ownership: lp_model_read returns a caller-owned model freed with
 * lp_model_free (NULL ok); theta is owned by the model.
 */
#ifndef LP_MODEL_H
#define LP_MODEL_H

#include "crossval.h"
#include "dataset.h"
#include "featurize.h"
#include "general.h"
#include "losses.h"
#include "objective.h"
#include "optimize.h"

#include <jansson.h>

#define LP_MODEL_FORMAT_VERSION 1
#define LP_MODEL_EPS_BINS 16

typedef struct lp_model {
    lp_loss_spec loss;
    lp_link_kind link;
    double beta;
    double l2;
    lp_fit_opts fit;
    int threads;
    lp_kernel kernel;
    const char *precision; /* "float32" / "float64" / "csr"; static string */
    int text;              /* features: 0 dense, 1 text */
    lp_feat_spec feat;
    size_t d;
    /* data summary */
    char source[256];
    size_t n, n_z1, n_eps_other, n_bins;
    lp_eps_bin bins[LP_MODEL_EPS_BINS];
    /* metrics */
    lp_fit_result res;
    int have_rewards; /* rewards/chosen and /rejected known */
    double rw_chosen, rw_rejected, rw_margins, rw_accuracy;
    /* held-out figures (crossval.h): have_cv = 0 when no cross-validation
     * ran (lp_model_fit, or fewer than 2 prompts); cv.pt[cv.chosen] holds
     * the model's penalty */
    int have_cv;
    lp_cv_result cv;
    double *theta; /* d values, owned */
    /* "method": "general" (Algorithm 3): the preference model and the
     * mixture's iterates (owned; NULL for the reward-based losses). theta
     * then holds the preference's transitive part (its first d weights). */
    lp_gp_model *general;
    /* "release": how a differentially private release chose theta (the
     * mechanism, its epsilon and delta, the candidate set or the noise
     * calibration; see docs/privacy-mechanisms.md), owned, NULL when theta
     * is a plain fit. "confidence": what confidence bounds on rewards need
     * (the regularizer and the weighted feature covariance), owned, NULL
     * when not recorded. Both are written verbatim after "validation" and
     * read back as they were. */
    json_t *release;
    json_t *confidence;
} lp_model;

/*
 * Fits ds (borrowed) with the objective and fit options and returns a new
 * model holding theta, those options (progress reporting not recorded),
 * beta, the loss's default link, the storage precision, the data summary
 * and the TRL metrics. Source and text features are left for the caller.
 * Returns 0, LP_ENO_MEMORY, or the error of lp_objective_new / lp_fit
 * (LP_EINVALID_ARGUMENT, LP_ECANCELLED).
 */
int lp_model_fit(const lp_dataset *ds, const lp_objective_opts *oo, const lp_fit_opts *fo,
                 double beta, lp_model **out);
/*
 * As lp_model_fit, with K-fold cross-validation grouped by prompt
 * (crossval.h): with co->auto_l2 the folds run first and the penalty is the
 * grid's best (oo->l2 is ignored); else the penalty is oo->l2 and the folds
 * run after the fit (so fo's progress reports the model's own fit first). The final fit uses every
 * label, from theta = 0, so the model equals lp_model_fit's at the chosen penalty plus the held-out
 * record. With fewer prompts than co->folds the folds are fewer; with
 * fewer than 2 prompts no cross-validation runs (have_cv = 0) and auto
 * falls back to l2 = 0. Errors as lp_model_fit.
 */
int lp_model_fit_cv(const lp_dataset *ds, const lp_objective_opts *oo, const lp_fit_opts *fo,
                    double beta, const lp_cv_opts *co, lp_model **out);

/*
 * Runs Algorithm 3 (general.h) on g and returns a model with "method":
 * "general": the link chi-mix, beta and l2 of the fit, theta the
 * preference's transitive part, the data summary and metrics of ds (the
 * same labels as feature differences; borrowed). The loss recorded is
 * square-chipo (each round is a Square chi-PO regression). Errors as
 * lp_gp_fit.
 */
int lp_model_fit_general(const lp_gp_data *g, const lp_dataset *ds, const lp_gp_opts *o,
                         lp_model **out);
/* Fills the data summary and the TRL metrics of m (theta set) from ds. */
void lp_model_summarize(lp_model *m, const lp_dataset *ds);

/* The model as a JSON object (new reference), or NULL on no memory. */
json_t *lp_model_to_json(const lp_model *m);
/* The model file's "features" object for a feature plan: dense (d features)
 * or text (feat, d = lp_feat_dim(feat)); new reference. */
json_t *lp_model_features_json(int text, const lp_feat_spec *feat, size_t d);
/* Dump flags that give byte-identical text for equal models. */
#define LP_MODEL_JSON_FLAGS (JSON_INDENT(1) | JSON_PRESERVE_ORDER | JSON_REAL_PRECISION(17))
/* Writes the model as JSON to path ("-" = stdout). Returns 0, LP_EIO or
 * LP_ENO_MEMORY. */
int lp_model_write(const lp_model *m, const char *path);

/* Reads a model file (or any JSON with a top-level "theta" array, e.g. the
 * simulator's theta* file: other fields then take defaults). Returns 0,
 * LP_EIO, LP_EMALFORMED_JSON, LP_EWRONG_TYPE or LP_EMISSING_FIELD. */
int lp_model_read(const char *path, lp_model **out, char *msg, size_t msglen);

/* As lp_model_read, from a parsed document (borrowed); what names it in
 * messages. */
int lp_model_from_json(const json_t *root, const char *what, lp_model **out, char *msg,
                       size_t msglen);
void lp_model_free(lp_model *m);

#endif
