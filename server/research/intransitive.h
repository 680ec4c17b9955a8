/*
 * intransitive.h — synthetic general preferences with a controllable
 * cycle, for research and tests only (seeded project PRNG).
 *
 * Prompts have K candidates with features f ~ N(0, I_d). The true
 * preference is
 *   l*(a, b) = 2 P(a > b) - 1 = tanh( (theta*^T (f_a - f_b) + S f_a^T W f_b) / 2 )
 * with theta* the Bradley-Terry part of simulate.h (margin sd margin_sd) and
 * W a random skew-symmetric matrix with ||W||_F = 1, so that the cycle
 * term f_a^T W f_b has standard deviation 1 and S (the cycle strength)
 * scales it: S = 0 is Bradley-Terry (transitive), large S is dominated by
 * rock-paper-scissors-like cycles. l* is skew-symmetric. A label compares
 * two distinct candidates of a uniformly drawn prompt in random order,
 * y ~ Bernoulli((1 + l*(a1, a0)) / 2), then Huber corruption and RR as in
 * simulate.h.
 */
#ifndef LP_INTRANSITIVE_H
#define LP_INTRANSITIVE_H

#include "dataset.h"
#include "general.h"
#include "model.h"
#include "simulate.h"

#include <stddef.h>
#include <stdint.h>

typedef struct lp_gsim_opts {
    size_t prompts, labels, d;
    int K;        /* candidates per prompt, 2..LP_GP_MAX_K */
    double cycle; /* S >= 0 */
    double margin_sd;
    double eps, alpha;
    lp_order order;
    lp_adversary adv;
    uint64_t seed;
    /* Optional observer of every label: prompt index, features of
     * response 0 and 1, clean y, observed z, eps. */
    void (*on_pair)(void *ctx, size_t prompt, const double *f0, const double *f1, size_t d, int y,
                    int z, double eps);
    void *on_pair_ctx;
} lp_gsim_opts;

void lp_gsim_opts_init(lp_gsim_opts *o);

/* The truth: parameters and the candidates of every prompt. */
typedef struct lp_gsim {
    size_t d, prompts;
    int K;
    double cycle;
    double *theta; /* d */
    double *W;     /* d*d, skew */
    double *f;     /* prompts*K*d candidate features */
} lp_gsim;

void lp_gsim_free(lp_gsim *s);
/* l*(a, b) for two feature vectors. */
double lp_gsim_pref(const lp_gsim *s, const double *fa, const double *fb);
/* Prompts (with K candidates each) drawn from the seed's truth: the
 * training prompts use stream 0, evaluation prompts another stream. */
int lp_gsim_truth(const lp_gsim_opts *o, uint64_t stream, lp_gsim **out);

/*
 * Labels on the truth's prompts: *gp (for Algorithm 3) and *ds (the same
 * pairs as feature differences, for the Bradley-Terry losses); either may
 * be NULL. Returns 0, LP_EINVALID_ARGUMENT or LP_ENO_MEMORY.
 */
int lp_gsim_labels(const lp_gsim_opts *o, const lp_gsim *truth, lp_gp_data **gp, lp_dataset **ds);

/* The chi-mix policy (beta of the model) of a reward model's theta^T f over
 * K dense candidates f[K*d]: the policy argument of lp_gsim_mean_gap with
 * ctx an lp_model. */
int lp_gsim_reward_policy(void *model, const double *f, size_t K, size_t d, double *pi);

/* The mean duality gap over the truth's prompts of a policy given per
 * prompt by policy(ctx, features K*d, K, pi) (returns 0 or an error). */
int lp_gsim_mean_gap(const lp_gsim *truth,
                     int (*policy)(void *ctx, const double *f, size_t K, size_t d, double *pi),
                     void *ctx, double *gap);

#endif
