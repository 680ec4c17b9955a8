/*
 * confidence.h — confidence bounds on a linear model's rewards (pessimism):
 * the record a model file keeps in its "confidence" object, and the bound
 * it gives once prepared.
 *
 * The record holds the regularizer lambda and the privacy-weighted
 * covariance of the training margins (feature differences x_i),
 *
 *   Sigma = sum_i w_i x_i x_i^T,   w_i = 1 / c(eps_i)^2 = tanh(eps_i / 2)^2
 *
 * (w = 1 for an unprivatized label): a label randomized at eps carries
 * c(eps)^2 times the variance of a clean one once debiased, so it counts for
 * 1/c(eps)^2 of a clean label (docs/training.md, "Pessimistic scores").
 * Sigma depends on the features and the budgets only, never on a label.
 *
 *   {"form": "full" | "diagonal", "lambda": 1, "weighting": "tanh2",
 *    "labels": n, "weight_sum": sum_i w_i, "dim": d,
 *    "encoding": "base64-f64le", "sigma": "..."}
 *
 * "sigma" is the base64 (RFC 4648, padded) of little-endian binary64
 * values, so a read gives back the computed bits exactly: the full form
 * packs the upper triangle row by row (d(d+1)/2 values, d <=
 * LP_CONF_FULL_MAX), the diagonal form only the diagonal (d values, d <=
 * LP_CONF_DIAG_MAX; correlations between features are then ignored). A
 * larger d records nothing (the model file has no "confidence").
 *
 * With M = Sigma + lambda I, the bound on candidate k's reward over a
 * candidate set with reference weights pi_ref is
 *
 *   lower_k = theta^T f_k - Gamma ||f_k - f_ref||_{M^-1},
 *   f_ref   = sum_j pi_ref,j f_j,
 *
 * since the data only measure reward differences (paper 001, Algorithm 2
 * with eta = 1, per candidate). Gamma = 0 gives lower_k = theta^T f_k.
 *
 * Ownership: lp_conf_prepare returns a caller-owned lp_conf freed with
 * lp_conf_free (NULL ok); it is immutable and may be shared by threads.
 */
#ifndef LP_CONFIDENCE_H
#define LP_CONFIDENCE_H

#include "dataset.h"
#include "featurize.h"
#include "model.h"

#include <jansson.h>
#include <stddef.h>

#define LP_CONF_FULL_MAX 256    /* full covariance up to this dimension */
#define LP_CONF_DIAG_MAX 65536  /* diagonal form up to this dimension */
#define LP_CONF_LAMBDA 1.0      /* the regularizer recorded by default */
#define LP_CONF_DEFAULT_GAMMA 7 /* default Gamma (calibrated: docs/training.md) */
#define LP_CONF_GAMMA_MAX 1e6   /* largest Gamma a request may ask for */

/* The weight of a label with budget eps (> 0, or +INFINITY): tanh(eps/2)^2. */
double lp_conf_weight(double eps);

/*
 * The confidence record of a model fitted on ds (borrowed) with regularizer
 * lambda (> 0): *out a new object, or NULL when ds->d > LP_CONF_DIAG_MAX.
 * Returns 0, LP_EINVALID_ARGUMENT or LP_ENO_MEMORY.
 */
int lp_conf_record(const lp_dataset *ds, double lambda, json_t **out);

/* Sets m->confidence (replacing any) to the record of ds with lambda =
 * LP_CONF_LAMBDA; a general-preference model or d > LP_CONF_DIAG_MAX
 * records nothing. 0 or an error of lp_conf_record. */
int lp_conf_attach(lp_model *m, const lp_dataset *ds);

/*
 * Decodes a record's sigma for dimension d into the caller's array: d*d
 * values (full form, both triangles filled) or d values (diagonal form);
 * *diagonal says which. Returns 0 or LP_EMALFORMED_JSON / LP_EWRONG_TYPE
 * (msg says why). sigma may be NULL to validate only.
 */
int lp_conf_decode(const json_t *rec, size_t d, double *sigma, int *diagonal, char *msg,
                   size_t msglen);

typedef struct lp_conf lp_conf;

/* Validates rec for dimension d and factors M = Sigma + lambda I once
 * (Cholesky, LAPACK dpotrf). 0, LP_ENO_MEMORY, or a decode error. */
int lp_conf_prepare(const json_t *rec, size_t d, lp_conf **out, char *msg, size_t msglen);
void lp_conf_free(lp_conf *c);

/* ||v||_{M^-1} of a dense vector v (d values); work holds d doubles. */
double lp_conf_width(const lp_conf *c, const double *v, double *work);

/*
 * Lower bounds of K candidates (features f[K], sparse, indices < d),
 * rewards r[K], reference log-probabilities log_ref[K] (NULL: uniform),
 * Gamma >= 0: writes lower[K] and, when non-NULL, width[K] =
 * ||f_k - f_ref||_{M^-1}. Returns 0, LP_EINVALID_ARGUMENT or LP_ENO_MEMORY.
 */
int lp_conf_lower(const lp_conf *c, const lp_sparse *f, const double *r, const double *log_ref,
                  size_t K, double gamma, double *lower, double *width);

#endif
