/*
 * simulate.h — synthetic Bradley-Terry data with a known theta*, and the
 * label corruption of docs/design.md §2, for research and tests only. Every
 * draw comes from the seeded project PRNG (prng.h): the same options give
 * the same data. Never used on a real annotator's label.
 *
 * Model: features f(x,a) ~ N(0, I_d) per candidate, reward r = theta*^T f,
 * theta* ~ N(0, I) rescaled so that the true margin theta*^T(f1 - f0) has
 * standard deviation margin_sd (default 2): ||theta*|| = margin_sd/sqrt(2).
 * A pair compares two distinct candidates of a prompt with K i.i.d.
 * candidates (distributionally the same as two fresh draws);
 * y ~ Bernoulli(sigma(margin)).
 *
 * Corruption, per label, with probability alpha (Huber), in one of three orders:
 *   CTL  y -> adversary -> RR(eps) -> z     (the annotator is the adversary)
 *   LTC  y -> RR(eps) -> adversary -> z     (the pipeline is the adversary)
 *   CLC  y -> adversary(alpha/2) -> RR(eps) -> adversary(alpha/2) -> z
 *
 * Features: N(0, I_d) by default; with unit_features each candidate's
 * vector is normalised to ||f|| = 1 (the bounded features, L = 1, that
 * paper 002's Assumption 2.1 requires).
 * Adversaries: flip (the wrong label 1-y: the papers' mask scheme),
 * anti (the label opposing the ground-truth preference sign), backdoor
 * (prefer the response whose feature k is larger), constant0, constant1,
 * random (a fair coin). The three coins (Huber, RR, random) are drawn for
 * every label in a fixed order, so CTL and LTC runs with one seed share
 * them (common random numbers); CLC draws its second Huber coin after
 * those three, so CLC at alpha with no second corruption would equal CTL.
 */
#ifndef LP_SIMULATE_H
#define LP_SIMULATE_H

#include "adversary.h"
#include "dataset.h"
#include "prng.h"

#include <stddef.h>
#include <stdint.h>

/* CLC (paper 001, Remark 3.5): Huber at rate alpha/2 before RR and again at
 * alpha/2 after it, so the corruption budget alpha is split evenly. */
typedef enum lp_order { LP_ORDER_CTL = 0, LP_ORDER_LTC = 1, LP_ORDER_CLC = 2 } lp_order;
#define LP_ORDER_COUNT 3

const char *lp_order_name(lp_order o);
int lp_order_parse(const char *name, lp_order *out);

/* What an adversary may look at for one label. */
typedef struct lp_adv_view {
    int truth;    /* 1 if a1 is truly better (margin > 0), else 0 */
    int backdoor; /* 1 if a1's backdoor feature is larger, else 0 */
} lp_adv_view;

/* One label through Huber corruption and RR in the given order. */
int lp_corrupt_label(lp_prng *g, int y, double eps, double alpha, lp_order order, lp_adversary adv,
                     const lp_adv_view *view);

typedef struct lp_sim_opts {
    size_t n, d;
    int K;        /* candidates per prompt (>= 2) */
    double eps;   /* > 0 or INFINITY */
    double alpha; /* [0, 1/2] */
    lp_order order;
    lp_adversary adv;
    size_t backdoor_k; /* feature index for the backdoor adversary */
    int unit_features; /* normalise every candidate's features to norm 1 */
    double margin_sd;  /* > 0 */
    uint64_t seed;
    lp_storage storage; /* F32 or F64 */
    /* Annotators: each contributes user_labels consecutive labels (label i
     * is annotator i / user_labels; the dataset's user[] is set); 0: none. */
    size_t user_labels;
    /* Optional observer of every generated pair (e.g. to write JSONL):
     * raw features f0, f1 (d values, borrowed for the call), clean y,
     * observed z. May be NULL. */
    void (*on_pair)(void *ctx, const double *f0, const double *f1, size_t d, int y, int z,
                    double eps);
    void *on_pair_ctx;
} lp_sim_opts;

void lp_sim_opts_init(lp_sim_opts *o);

/* theta* (d values, caller-owned) for a seed: N(0,I) rescaled to
 * ||theta*|| = margin_sd / sqrt(2). */
void lp_sim_theta_star(size_t d, double margin_sd, uint64_t seed, double *theta);

/*
 * Generates n labelled pairs under theta* (borrowed). *out is a new
 * dataset (with y = clean labels). Returns 0, LP_EINVALID_ARGUMENT or
 * LP_ENO_MEMORY.
 */
int lp_simulate(const lp_sim_opts *o, const double *theta_star, lp_dataset **out);

#endif
