/*
 * general.h — general (possibly intransitive) preferences: iterative Square
 * chi-PO with self-play mirror descent (docs/training.md, "General
 * preferences").
 *
 * Preference model. A skew-symmetric linear model over pair features,
 *   l(x,a,b) = clip_1( w^T dg(a,b) ),  dg(a,b) = g(a,b) - g(b,a) = -dg(b,a),
 * with dg = [ f_a - f_b ; cross(a,b) ] where cross has, for every feature
 * pair j < k, f_a,j f_b,k - f_a,k f_b,j (exact when d <= LP_GP_EXACT_MAX,
 * else signed-hashed into LP_GP_CROSS_HASH buckets). The first block is the
 * Bradley-Terry (transitive) part, the second a skew bilinear form
 * f_a^T W f_b that can express cycles. w is the least-squares fit of
 * l(x, a1, a0) on c(eps_i) zbar_i (per-label eps, ridge l2), the unbiased
 * target of the clean label 2y - 1.
 *
 * Policy. On a finite candidate set A (a prompt's candidates: in training
 * the distinct responses its labels compare; when serving, the request's),
 * self-play mirror descent over the class of all distributions on A, with
 * pi_ref uniform (or given): pi^1 = pi_ref and round t solves Algorithm 3's
 * Square chi-PO regression
 *   clip_4( (1 + 1/eta) beta h_pi(a, b) - (beta/eta) h_{pi^t}(a, b) )
 *   onto rhat_t(a) - rhat_t(b),   rhat_t(a) = sum_b' pi^t(b') l(a, b'),
 * h_pi(a, b) = phi(pi(a)/pi_ref(a)) - phi(pi(b)/pi_ref(b)), over every pair
 * of A, with the expectation over pi^t exact. The class contains a zero-
 * residual solution (|rhat differences| <= 2 < 4, so the clip is inactive):
 * implicit rewards s = beta phi(pi/pi_ref) follow s <- (s + eta rhat)/(1 +
 * eta) and pi^{t+1} is the chi-mix policy of s (policy.h). The output is
 * the uniform mixture of pi^1..pi^T. A model is therefore the preference
 * weights w with (T, beta, eta): the mixture on any candidate set is a
 * deterministic function of them (docs/training.md derives it and bounds
 * its duality gap).
 *
 * Ownership: lp_gp_data and lp_gp_model are caller-owned (free functions
 * accept NULL). Everything is deterministic for fixed inputs.
 */
#ifndef LP_GENERAL_H
#define LP_GENERAL_H

#include "featurize.h"

#include <jansson.h>
#include <stddef.h>
#include <stdint.h>

#define LP_GP_EXACT_MAX 64     /* d up to this: exact cross features */
#define LP_GP_CROSS_HASH 4096u /* hashed cross buckets above it */
#define LP_GP_MAX_K 64         /* distinct candidates per prompt */
#define LP_GP_MAX_ROUNDS 10000
#define LP_GP_DEFAULT_ROUNDS 100 /* also the server's */
#define LP_GP_DEFAULT_BETA 0.05
#define LP_GP_DEFAULT_ETA 0.5
#define LP_GP_SERVE_MAX_K 256 /* candidates one mixture may be asked for */

/* Dimension of dg for response features of dimension d. */
size_t lp_gp_pair_dim(size_t d);
/* dg(a, b) into *out (sparse, replaced). Returns 0 or LP_ENO_MEMORY. */
int lp_gp_pair_features(size_t d, const lp_sparse *fa, const lp_sparse *fb, lp_sparse *out);

/* A dense vector (d values) as a sparse one (its nonzeros) into *out
 * (replaced). Returns 0 or LP_ENO_MEMORY. */
int lp_gp_dense_features(const double *x, size_t d, lp_sparse *out);

/* ---- data: prompts, their candidates, and the labelled pairs ---- */

typedef struct lp_gp_data lp_gp_data;

/* Empty data for responses of d features. NULL on no memory. */
lp_gp_data *lp_gp_data_new(size_t d);
void lp_gp_data_free(lp_gp_data *g);
/* Adds one label: prompt key, the features of response 0 and 1 (borrowed),
 * observed z (1: response 1 preferred) and its eps (> 0 or INFINITY).
 * Responses with equal features under one prompt are one candidate.
 * Returns 0, LP_EINVALID_ARGUMENT (bad label, or a prompt would exceed
 * LP_GP_MAX_K candidates) or LP_ENO_MEMORY. */
int lp_gp_data_add(lp_gp_data *g, uint64_t prompt, const lp_sparse *f0, const lp_sparse *f1, int z,
                   double eps);
/* Dense convenience form (d values each). */
int lp_gp_data_add_dense(lp_gp_data *g, uint64_t prompt, const double *x0, const double *x1, int z,
                         double eps);
size_t lp_gp_data_labels(const lp_gp_data *g);
size_t lp_gp_data_dim(const lp_gp_data *g);
size_t lp_gp_data_prompts(const lp_gp_data *g);
/* Prompts with at least two candidates (the ones self-play learns from). */
size_t lp_gp_data_playable(const lp_gp_data *g);

/* ---- fitting ---- */

typedef struct lp_gp_opts {
    int rounds;   /* T (default LP_GP_DEFAULT_ROUNDS) */
    double beta;  /* > 0 (default LP_GP_DEFAULT_BETA when 0) */
    double eta;   /* > 0 (default LP_GP_DEFAULT_ETA when 0) */
    double l2;    /* ridge of the preference fit and of each policy round (>= 0) */
    int max_iter; /* L-BFGS iterations per regression (default 200) */
    int threads;  /* for the preference fit (default 1) */
    /* Optional observer every 64 training prompts played (count, mean gap
     * so far); nonzero cancels. */
    int (*on_round)(void *ctx, int prompts, double mean_gap);
    void *round_ctx;
} lp_gp_opts;

void lp_gp_opts_init(lp_gp_opts *o);

typedef struct lp_gp_model {
    size_t d;    /* response features */
    size_t pdim; /* lp_gp_pair_dim(d) */
    double *w;   /* pdim preference weights */
    int rounds;  /* T */
    double beta, eta, l2;
    double *theta; /* T x d: the iterates theta_1 (= 0) .. theta_T */
    /* fit summary */
    size_t n_labels, n_prompts, n_playable, n_pairs;
    double pref_objective; /* the preference fit's objective */
    char pref_status[64];  /* its L-BFGS status */
    double cycle_share;    /* ||w_cross||^2 / ||w||^2: the intransitive share */
    double train_gap;      /* mean duality gap under w of the mixtures on the
                              training prompts' candidates (NAN when read) */
} lp_gp_model;

/* Runs Algorithm 3 on g. *out is a new model. Returns 0,
 * LP_ENO_LABELS (no prompt has two candidates), LP_EINVALID_ARGUMENT,
 * LP_ECANCELLED, LP_ENO_MEMORY. */
int lp_gp_fit(const lp_gp_data *g, const lp_gp_opts *o, lp_gp_model **out);
void lp_gp_model_free(lp_gp_model *m);

/* The fitted preference l(x, a, b) in [-1, 1]. */
double lp_gp_preference(const lp_gp_model *m, const lp_sparse *fa, const lp_sparse *fb);

/*
 * The mixture over K <= LP_GP_SERVE_MAX_K candidates (features f[K],
 * borrowed; log_ref[K] reference log-probabilities normalised over the
 * candidates, NULL: uniform): self-play under the fitted preference, pi[K]
 * the mixture probabilities (1/T) sum_t pi^t, and, when non-NULL, win[K]
 * = (1 + sum_b pi(b) l(a, b)) / 2, the preference model's probability that
 * a beats a response drawn from the mixture. Returns 0,
 * LP_EINVALID_ARGUMENT or LP_ENO_MEMORY.
 */
int lp_gp_mixture(const lp_gp_model *m, const lp_sparse *f, const double *log_ref, size_t K,
                  double *pi, double *win);

/*
 * Self-play over one candidate set with the policy class of all
 * distributions on it: T rounds from pi^1 = pi_ref, each round's
 * regression solved exactly (implicit rewards s <- (s + eta rhat)/(1 +
 * eta)), pi_mix[K] the uniform mixture of pi^1..pi^T. L[K*K] skew, in
 * [-1, 1]; log_ref as lp_gp_mixture. 0, LP_EINVALID_ARGUMENT or
 * LP_ENO_MEMORY.
 */
int lp_gp_selfplay(const double *L, const double *log_ref, size_t K, int T, double beta, double eta,
                   double *pi_mix);

/*
 * Duality gap of a policy pi[K] under a skew-symmetric preference matrix
 * L[K*K] (L[a*K+b] = l(a, b)): max_p l(p, pi) - min_p l(pi, p)
 * = 2 max_a sum_b L[a][b] pi[b] (exact over the candidates).
 */
double lp_gp_duality_gap(const double *L, const double *pi, size_t K);

/*
 * The duality-gap bound of docs/training.md for the exact-expectation
 * self-play over K candidates with a uniform reference, when each round's
 * regression is solved exactly: 2 [beta (1 + 1/(eta T)) F_K + eta/(2 beta)]
 * with F_K = (K-1)/2 + log K, the largest chi-mix divergence from uniform.
 * It bounds the gap under the fitted preference; under the true one add
 * 2 max |lhat - l*|.
 */
double lp_gp_gap_bound(size_t K, int T, double beta, double eta);
/* The eta that minimises that bound for K, T, beta: beta sqrt(2 F_K / T). */
double lp_gp_bound_eta(size_t K, int T, double beta);

/* The model's "general" block as JSON (new reference) and back. */
json_t *lp_gp_model_to_json(const lp_gp_model *m);
int lp_gp_model_from_json(const json_t *obj, size_t d, lp_gp_model **out, char *msg, size_t msglen);

#endif
