/*
 * aup.h — AUP-RLHF: user-level label differential privacy for the reward
 * model (paper 004, Algorithms 2 and 3; docs/privacy-mechanisms.md, "AUP-RLHF
 * (user level)", states the theorem, the constants and the errata resolved).
 *
 * The privacy unit is the annotator: two datasets are neighbours when the
 * labels of one annotator differ (any number of them); features and who
 * labelled which pair are public. Each annotator's labels are truncated to
 * the first user_cap rows in dataset order (arrival order), and training is
 * projected gradient descent on the per-annotator averaged gradient of a
 * per-label loss (losses.h: square-chipo, chipo or dpo), each step through
 * the private mean oracle:
 *   1. concentration score s = (1/n) #{ordered pairs (i,i'): |g_i - g_i'| <= tau}
 *      tested by one AboveThreshold instance across all steps (eps/2); the
 *      first failure halts training;
 *   2. randomized outlier removal: f_i = #{i': |g_i - g_i'| <= 2 tau}, user i
 *      kept with probability 0 (f_i < n/2), 1 (f_i >= 2n/3), else
 *      (f_i - n/2)/(n/6);
 *   3. the mean of the kept gradients plus N(0, sigma^2 I), sigma scaled to
 *      tau by lp_aup_calibrate.
 * The output is the average of the iterates (those run before a halt).
 * Memory is linear in the batch: distances are counted block by block.
 *
 * Randomness comes from the caller's 64-bit source: the OS CSPRNG in the
 * product (lp_csprng_next64), a seeded lp_prng in research and tests.
 */
#ifndef LP_AUP_H
#define LP_AUP_H

#include "dataset.h"
#include "losses.h"
#include "mechanism.h"
#include "model.h"

#include <jansson.h>
#include <stddef.h>
#include <stdint.h>

/* Samplers driven by 64 random bits at a time. Uniform in (0, 1] with 53
 * bits; Laplace with scale b (the sign from a bit independent of the
 * magnitude's); standard normal by Box-Muller from two such uniforms. */
double lp_aup_uniform(lp_rand64 r, void *st);
double lp_aup_laplace(double b, lp_rand64 r, void *st);
double lp_aup_normal(lp_rand64 r, void *st);

/* The noise calibration of one release (docs/privacy-mechanisms.md). */
typedef struct lp_aup_calib {
    double epsilon, delta;
    size_t n;             /* annotators per step (the batch) */
    int steps;            /* T */
    double tau;           /* concentration radius */
    double mu;            /* 6: bound on the expected count of other kept-status changes */
    int z_max;            /* tail bound on that count, failure <= delta_tail */
    double a_min;         /* ceil(2n/3) - 1 - z_max: common kept users */
    double sensitivity;   /* 4 tau (2 + z_max) / a_min: one step's mean */
    double rho;           /* zCDP of the T Gaussian steps together */
    double sigma;         /* Gaussian std per coordinate per step */
    double threshold;     /* 4n/5 */
    double score_sens;    /* 2: the concentration score's sensitivity */
    double b_threshold;   /* Laplace scale of the threshold noise, 2*2/(eps/2) */
    double b_query;       /* Laplace scale of each query's noise, 4*2/(eps/2) */
    double delta_fail;    /* delta / 2: failure events in all */
    double delta_tail;    /* failure bound spent on z_max */
    double delta_gap;     /* failure bound of a pass on unconcentrated data */
    double delta_convert; /* delta / 2: zCDP to (eps, delta) */
} lp_aup_calib;

/*
 * Calibrates a release of T steps over batches of n annotators at (eps,
 * delta) with radius tau. Returns 0, or LP_EINVALID_ARGUMENT (msg says
 * why): eps not finite and > 0, delta not in (0, 1), tau <= 0, T < 1, or
 * n too small for the failure budget (the message names the least n).
 */
int lp_aup_calibrate(double eps, double delta, size_t n, int steps, double tau, lp_aup_calib *out,
                     char *msg, size_t msglen);

/* Keep probability of a user with f friends within 2 tau among n. */
double lp_aup_keep_prob(size_t f, size_t n);

/* Rows of the distance computation per block (its memory: LP_AUP_BLOCK n). */
#define LP_AUP_BLOCK 256
/* Neighbour counts of n points (rows of g, n x d), each point counting
 * itself: near[i] = #{j: |g_i - g_j| <= tau}, far[i] = #{j: |g_i - g_j| <=
 * 2 tau} (the friend counts f). work holds (1 + LP_AUP_BLOCK) n doubles;
 * distances come from |a|^2 + |b|^2 - 2 a.b, in blocks through GEMM. */
void lp_aup_neighbours(const double *g, size_t n, size_t d, double tau, size_t *near, size_t *far,
                       double *work);
/* The concentration score (1/n) sum_i near[i]: ordered pairs within tau,
 * self pairs included. */
double lp_aup_concentration(const size_t *near, size_t n);

/* One AboveThreshold (sparse vector) instance across the steps; the
 * threshold noise is drawn once by lp_above_threshold_init. */
typedef struct lp_above_threshold {
    double noisy_threshold, b_query;
} lp_above_threshold;
void lp_above_threshold_init(lp_above_threshold *at, double threshold, double b_threshold,
                             double b_query, lp_rand64 r, void *st);
/* 1 (TOP: continue) when q + Lap(b_query) >= the noisy threshold, else 0. */
int lp_above_threshold_test(const lp_above_threshold *at, double q, lp_rand64 r, void *st);

/* Randomized outlier removal: keep[i] = 1 with probability
 * lp_aup_keep_prob(f[i], n). Returns the number kept. */
size_t lp_aup_remove_outliers(const size_t *f, size_t n, unsigned char *keep, lp_rand64 r,
                              void *st);

typedef struct lp_aup_opts {
    double epsilon, delta;
    size_t user_cap;   /* m: the first m labels of each annotator (0: all) */
    lp_loss_spec loss; /* square-chipo (default), chipo or dpo */
    double beta;       /* the model's policy temperature (default 1) */
    int steps;         /* T (default 100) */
    double lr;         /* step size (default 1) */
    double norm_bound; /* projection radius of theta (default 10) */
    double tau;        /* concentration radius; 0: tau_scale G / sqrt(m), G the
                          loss's largest slope times the root mean square
                          feature-difference norm, m the fewest labels an
                          annotator contributes (public quantities) */
    double tau_scale;  /* default 2 */
    size_t batch;      /* annotators per step, uniform without replacement
                          (0: all, the default) */
    lp_rand64 rand64;
    void *rand_state;
} lp_aup_opts;

void lp_aup_opts_init(lp_aup_opts *o);

/*
 * Releases a model from ds (borrowed) with labels grouped by user[i]
 * (annotator ids parallel to the rows; NULL: one label per annotator).
 * The model has theta, the data summary (of the labels used) and
 * m->release = the calibration and the run (steps run, halt). Returns 0,
 * LP_EINVALID_ARGUMENT (msg says why; also eps = INFINITY), LP_ENO_MEMORY.
 */
int lp_aup_release(const lp_dataset *ds, const int64_t *user, const lp_aup_opts *o, lp_model **out,
                   char *msg, size_t msglen);
/* The same from a release's options (mechanism.h; square-chipo at o->rmax). */
int lp_aup_release_from(const lp_dataset *ds, const int64_t *user, const lp_release_opts *o,
                        lp_model **out, char *msg, size_t msglen);

#endif
