/*
 * sweep.h — a grid of simulation studies run in-process: for every
 * (setting, seed), simulate Bradley-Terry labels under RR and Huber
 * corruption (simulate.h), fit each loss (objective.h, optimize.h) and
 * evaluate the fit against the known theta* (evaluate.h). One result row
 * per (setting, seed, loss), written as one JSON line with every metric,
 * so that the study can be re-plotted without re-running it.
 *
 * A grid is a list of named blocks; a block is the cross product
 * n x eps x alpha x order x adversary ("data cells"), and every loss of
 * the block is fitted to each data set it generates.
 *
 * Seeds: theta*, the data and the fresh evaluation draws of seed index s
 * depend only on (base seed + s), so every setting of one seed shares them
 * (common random numbers; the simulator also draws CTL and LTC coins in
 * the same order): comparisons within a seed are paired.
 *
 * Parallelism: data cells are taken by `jobs` worker threads, each fit
 * runs single-threaded, and rows are emitted in grid order, so every row
 * is bit-identical whatever `jobs` is (fit_seconds aside).
 */
#ifndef LP_SWEEP_H
#define LP_SWEEP_H

#include "evaluate.h"
#include "losses.h"
#include "optimize.h"
#include "simulate.h"

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#define LP_SWEEP_MAX_VALUES 16 /* values per axis of a block */
#define LP_SWEEP_MAX_BLOCKS 12
#define LP_SWEEP_NAME_MAX 32

typedef struct lp_sweep_block {
    char name[LP_SWEEP_NAME_MAX];
    size_t n[LP_SWEEP_MAX_VALUES];
    double eps[LP_SWEEP_MAX_VALUES];   /* > 0 or INFINITY */
    double alpha[LP_SWEEP_MAX_VALUES]; /* [0, 1/2] */
    lp_order order[LP_ORDER_COUNT];
    lp_adversary adv[LP_ADV_COUNT];
    lp_loss_kind loss[LP_LOSS_COUNT];
    int nn, neps, nalpha, norder, nadv, nloss;
    /* Per-block overrides of the options (0: the option's value). */
    double theta_norm;  /* ||theta*|| (instead of margin_sd / sqrt 2) */
    double bound_ratio; /* norm bound B = bound_ratio ||theta*|| */
    int unit_features;  /* features normalised to norm 1 (L = 1) */
} lp_sweep_block;

typedef struct lp_sweep_grid {
    lp_sweep_block block[LP_SWEEP_MAX_BLOCKS];
    int nblocks;
} lp_sweep_grid;

typedef struct lp_sweep_opts {
    size_t d;            /* feature dimension (default 16) */
    int seeds;           /* seed indices 0..seeds-1 (default 5) */
    uint64_t seed;       /* base seed (default 0) */
    double margin_sd;    /* sd of the true margin (default 2: ||theta*|| = sqrt 2) */
    size_t backdoor_k;   /* backdoor feature (default 0) */
    double rmax;         /* clip at 2 rmax (default 3: 3 sd of the true margin) */
    double l2;           /* default 0 */
    double bound_ratio;  /* norm bound B = bound_ratio ||theta*|| (default 3; inf: none) */
    int max_iter;        /* L-BFGS iterations (default 500) */
    int K;               /* candidates per evaluation prompt (default 4) */
    double beta;         /* policy temperature (default 1) */
    size_t eval_pairs;   /* fresh pairs for accuracy (default 20000) */
    size_t eval_prompts; /* fresh prompts for suboptimality (default 4000) */
    int jobs;            /* worker threads (default 2) */
    int progress;        /* progress lines on stderr */
} lp_sweep_opts;

/* One fit's result. Strings point at static names. */
typedef struct lp_sweep_row {
    char block[LP_SWEEP_NAME_MAX];
    size_t n, d;
    int K, seed;
    double beta, eps, c_eps, alpha;
    lp_order order;
    lp_adversary adv;
    lp_loss_kind loss;
    lp_link_kind link;
    int unit_features; /* "features": "unit" (norm 1) or "gauss" */
    double rmax, l2, norm_bound;
    double lr;        /* SGD step constant (rr-sgd, rr-sgd-last); NAN for L-BFGS */
    double flip_rate; /* observed fraction of labels with z != y */
    double accuracy, cosine, norm_ratio, est_error; /* est_error = |th - th*| / |th*| */
    double suboptimality, j_star, j_hat;
    double objective, grad_norm, theta_norm;
    int iterations, evaluations, bound_active, converged;
    char status[64];
    double fit_seconds;
} lp_sweep_row;

void lp_sweep_opts_init(lp_sweep_opts *o);

/* The built-in grids: "default" (the full study, docs/results) and
 * "quick" (a reduced grid for make test). Returns 0 or
 * LP_EINVALID_ARGUMENT for an unknown name. */
int lp_sweep_grid_named(const char *name, lp_sweep_grid *g);

/*
 * Parses one block "NAME:key=v,v;key=v,..." with keys n, eps (inf allowed),
 * alpha, order (CTL, LTC, CLC), adv, loss; a missing key takes one default
 * value (n 20000, eps inf, alpha 0, CTL, flip, square-chipo). Single-valued
 * keys override the options for the block: theta (||theta*||), bound (norm
 * bound ratio), features (gauss or unit). Returns 0 or LP_EINVALID_ARGUMENT
 * (msg says why).
 *
 * rr-sgd-last gets paper 002's step constant lr = 1/(gamma kappa) with
 * gamma = 1/(2 + e^{-2LB} + e^{2LB}), B the norm bound, kappa the smallest
 * eigenvalue of the population covariance of f1 - f0 (2 for N(0, I)
 * features, 2/d for unit ones) and L = 1 for unit features, sqrt(d) (the
 * root mean square norm) for Gaussian ones.
 */
int lp_sweep_block_parse(const char *spec, lp_sweep_block *b, char *msg, size_t msglen);

/* Number of rows the grid produces with o->seeds seeds. */
size_t lp_sweep_rows(const lp_sweep_grid *g, const lp_sweep_opts *o);

/* Called once per row, in grid order, from the calling thread. A non-zero
 * return stops the sweep and is returned by lp_sweep_run. */
typedef int (*lp_sweep_sink)(void *ctx, const lp_sweep_row *row);

/* Runs the grid. Returns 0, LP_EINVALID_ARGUMENT (bad grid or options;
 * msg says which), LP_ENO_MEMORY or the sink's code. */
int lp_sweep_run(const lp_sweep_grid *g, const lp_sweep_opts *o, lp_sweep_sink sink, void *ctx,
                 char *msg, size_t msglen);

/* Writes the row as one JSON line (17 significant digits, eps = inf as
 * null, fixed key order). Returns 0 or LP_EIO. */
int lp_sweep_row_write(FILE *f, const lp_sweep_row *r);

/* Parses a line written by lp_sweep_row_write. Returns 0 or an error code. */
int lp_sweep_row_parse(const char *line, lp_sweep_row *r, char *msg, size_t msglen);

/* A numeric metric by its JSON key ("accuracy", "n", "eps", ...); NAN for
 * an unknown key. */
double lp_sweep_row_metric(const lp_sweep_row *r, const char *key);

#endif
