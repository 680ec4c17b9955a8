/*
 * optimize.h — fitting theta by minimising an objective (objective.h).
 *
 * Full batch: L-BFGS from Debian's liblbfgs, started at theta = 0 (the
 * clipped losses have zero gradient deep in their flat regions, so a zero
 * start is required). Streaming: minibatch SGD (step lr/sqrt(t), Polyak
 * averaged iterate returned) or Adam (last iterate), in an order shuffled
 * by the seeded project PRNG, for rr-sgd (paper 002's one-pass estimator).
 *
 * Norm bound ||theta|| <= B (the bounded class the theory assumes):
 * SGD/Adam project onto the ball after each step; L-BFGS optimises an
 * unconstrained u with theta = B u / sqrt(1 + ||u||^2), a diffeomorphism of
 * R^d onto the open ball (critical points are preserved, the boundary is
 * approached only asymptotically). The result says whether the bound is
 * active (||theta|| >= 0.99 B): then the unconstrained problem wanted a
 * larger norm (e.g. rdpo on separable noisy labels, square-chipo drifting
 * in its flat clip region).
 *
 * Deterministic: a fixed seed and thread count give bit-identical theta.
 */
#ifndef LP_OPTIMIZE_H
#define LP_OPTIMIZE_H

#include "objective.h"

#include <stdint.h>

typedef enum lp_method { LP_OPT_LBFGS = 0, LP_OPT_SGD = 1, LP_OPT_ADAM = 2 } lp_method;

typedef struct lp_fit_opts {
    lp_method method;
    int max_iter;      /* L-BFGS iterations (default 500) */
    double gtol;       /* L-BFGS: stop at ||grad|| < gtol max(1, ||x||) (default 1e-9) */
    int memory;        /* L-BFGS history (default 10) */
    double norm_bound; /* B > 0, or INFINITY (default) */
    double lr;         /* SGD/Adam step (default 0.5 SGD, 0.01 Adam) */
    int batch;         /* minibatch size (default 1) */
    int epochs;        /* passes over the data (default 1: one pass) */
    uint64_t seed;     /* shuffling seed (default 0) */
    int progress;      /* print progress lines on stderr */
    /* Optional observer (NULL: none), called on the fitting thread:
     * - L-BFGS: after every iteration with the objective and gradient norm
     *   (of the unconstrained parametrization when norm-bounded) at the
     *   accepted point; the last call is at the returned point (once, at
     *   iteration 0, when no iteration was taken);
     * - SGD/Adam: every 4096 steps (objective and grad_norm NAN), after each
     *   epoch (objective: the epoch's mean loss at the iterates it visited
     *   plus the L2 term at its end, an estimate costing no extra pass;
     *   grad_norm NAN), and once at the end with F and ||grad F|| at the
     *   returned theta (evaluations 1).
     * A nonzero return cancels the fit (except from the final calls): lp_fit
     * then returns LP_ECANCELLED and theta is unspecified. */
    int (*on_progress)(void *ctx, int iteration, int evaluations, double objective,
                       double grad_norm);
    void *progress_ctx;
} lp_fit_opts;

/* Defaults for a method. */
void lp_fit_opts_init(lp_fit_opts *o, lp_method method);
/* "lbfgs", "sgd", "adam". */
const char *lp_method_name(lp_method m);
int lp_method_parse(const char *name, lp_method *out);

typedef struct lp_fit_result {
    double objective; /* F(theta_hat), including the L2 term */
    double grad_norm; /* ||grad F(theta_hat)|| (unconstrained gradient) */
    double theta_norm;
    int iterations;   /* L-BFGS iterations, or SGD/Adam steps */
    int evaluations;  /* full objective evaluations */
    int bound_active; /* norm bound binds (||theta|| >= 0.99 B) */
    int converged;    /* L-BFGS met its gradient test; SGD: always 0 */
    char status[64];  /* e.g. "converged", "max_iterations", "rounding_error" */
} lp_fit_result;

/*
 * Minimises the objective. theta (d values, caller-owned) receives the
 * estimate. Returns 0, LP_EINVALID_ARGUMENT (bad options), LP_ECANCELLED
 * (on_progress asked to stop) or LP_ENO_MEMORY;
 * a non-finite objective (e.g. rdpo diverging without a bound) is reported
 * through res->status = "non_finite" with the last finite theta.
 */
int lp_fit(lp_objective *ob, const lp_fit_opts *o, double *theta, lp_fit_result *res);

#endif
