/*
 * served.h — a trained model ready to answer score requests, and the slot
 * that holds the model being served.
 *
 * An lp_served is immutable after creation and reference counted: a score
 * request takes a reference from the slot, uses that one model throughout,
 * and drops it. Swapping the slot's model is one pointer exchange under a
 * mutex, so a request sees either the old or the new model, never a mix,
 * and the old model is freed when its last user is done.
 *
 * Features: a dense model takes the candidate's feature vector (exactly d
 * numbers); a text model featurizes (prompt, response) with the spec stored
 * in the model file. Featurizers are reused from a small pool, so
 * concurrent requests never share one.
 */
#ifndef LP_SERVED_H
#define LP_SERVED_H

#include "featurize.h"
#include "label_cursor.h"
#include "model.h"

#include <pthread.h>
#include <stddef.h>
#include <stdint.h>

typedef struct lp_served lp_served;

/* Parses a model file (JSON text) for version, with the privacy of the
 * labels it was trained on (copied; NULL: unknown). Returns LP_OK with *out
 * (one reference), or an error with msg. */
int lp_served_new(int64_t version, const char *model_json, const lp_label_privacy *privacy,
                  lp_served **out, char *msg, size_t msglen);
void lp_served_ref(lp_served *sv);
/* Drops a reference (NULL ok); the last one frees the model. */
void lp_served_unref(lp_served *sv);

int64_t lp_served_version(const lp_served *sv);
/* The privacy record the model was created with (known 0: unknown). */
const lp_label_privacy *lp_served_privacy(const lp_served *sv);
const lp_model *lp_served_model(const lp_served *sv);

/* Features of one response under the model's specification, as a sparse
 * vector (*out replaced; caller frees with lp_sparse_free). dense (dim
 * values, may be NULL) is used by dense models, (prompt, text) by text
 * models. Errors: LP_EFEATURES_REQUIRED (dense model, no vector),
 * LP_EDIMENSION_MISMATCH (dim != d), LP_EEMPTY_TEXT (text model, NULL or
 * empty text), LP_EWRONG_TYPE (a non-finite number), LP_ENO_MEMORY. */
int lp_served_features(lp_served *sv, const char *prompt, const char *text, const double *dense,
                       size_t dim, lp_sparse *out);
/* The implicit reward theta^T f of a feature vector of this model. */
double lp_served_reward(const lp_served *sv, const lp_sparse *f);

/* Policy over K candidate rewards (see policy.h), with the model's link and
 * beta. log_ref may be NULL (uniform reference). */
int lp_served_policy(const lp_served *sv, const double *rewards, const double *log_ref, size_t K,
                     double *pi, double *log_ratio);

/* Whether the model can give pessimistic scores: a reward model whose file
 * has a confidence record (confidence.h), factored when the model was
 * loaded. */
int lp_served_has_confidence(const lp_served *sv);
/* Pessimistic scores of K candidates: features f[K], rewards r[K] (from
 * lp_served_reward), reference log-probabilities log_ref[K] (NULL: uniform)
 * and Gamma >= 0 give each candidate's lower bound lower[K] and the
 * pessimistic policy pess[K] (the model's link and beta over the bounds).
 * Returns 0, LP_ENO_CONFIDENCE, LP_EINVALID_ARGUMENT or LP_ENO_MEMORY. */
int lp_served_pessimism(const lp_served *sv, const lp_sparse *f, const double *r,
                        const double *log_ref, size_t K, double gamma, double *lower, double *pess);

/* Whether the model is a general-preference mixture (Algorithm 3): it has
 * no rewards; lp_served_mixture scores its candidates. */
int lp_served_is_general(const lp_served *sv);
/* The mixture's probabilities pi[K] and each candidate's win probability
 * against the mixture win[K] (general.h, lp_gp_mixture) from the
 * candidates' features f[K]. LP_EINVALID_ARGUMENT for a reward model. */
int lp_served_mixture(const lp_served *sv, const lp_sparse *f, const double *log_ref, size_t K,
                      double *pi, double *win);

/* ---- the serving slot ---- */

typedef struct lp_serving {
    pthread_mutex_t lock;
    lp_served *current; /* NULL: nothing served */
} lp_serving;

void lp_serving_init(lp_serving *sl);
void lp_serving_destroy(lp_serving *sl); /* drops the current model */
/* A new reference to the served model, or NULL if none. */
lp_served *lp_serving_acquire(lp_serving *sl);
/* Serves sv (a reference is taken; NULL stops serving); the previous model
 * loses the slot's reference. */
void lp_serving_swap(lp_serving *sl, lp_served *sv);

#endif
