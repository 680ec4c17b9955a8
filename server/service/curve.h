/*
 * curve.h — a training run's curve while it is recorded: the optimizer's
 * observations (lp_curve_point, registry.h), capped and thinned evenly, and
 * the bookkeeping of what the store already holds.
 *
 * The cap: every observation is kept until max_points are; then the stride
 * doubles (an observation is kept when its seq is a multiple of the stride)
 * and the kept points off the new stride are dropped. A curve of any length
 * therefore holds between max_points/2 and max_points evenly spaced points,
 * from the first observation on, plus its newest observation, which
 * lp_curve_finish keeps.
 *
 * Not thread-safe: the learner guards a curve with its lock; one thread
 * (the run's) adds and stores, others copy.
 */
#ifndef LP_CURVE_H
#define LP_CURVE_H

#include "registry.h"

#include <stddef.h>
#include <stdint.h>

#define LP_CURVE_MAX_POINTS 2048

typedef struct lp_curve {
    lp_curve_point *pts; /* the kept points, by seq */
    size_t n, cap;
    size_t max_points;
    int64_t stride;   /* 1, 2, 4, ... */
    int64_t next_seq; /* observations so far */
    lp_curve_point newest;
    int newest_kept;       /* newest is pts[n - 1] */
    size_t stored;         /* pts[0, stored) are in the store */
    int64_t stored_stride; /* the stride the stored rows were thinned to */
} lp_curve;

/* An empty curve keeping at most max_points (even, >= 2) points. */
void lp_curve_init(lp_curve *c, size_t max_points);
/* Frees the points; the curve is empty again (same cap). */
void lp_curve_clear(lp_curve *c);
/* Records an observation. A non-finite objective (the optimizer's
 * cancellation checks) is not an observation: ignored. LP_ENO_MEMORY. */
int lp_curve_add(lp_curve *c, int iteration, int evaluations, double objective, double grad_norm,
                 int64_t t_ms);
/* The run ended: keeps the newest observation if the stride dropped it.
 * LP_ENO_MEMORY. */
int lp_curve_finish(lp_curve *c);
/* The curve as it stands: the kept points, then the newest observation
 * when it is not one of them. *out new (free()), NULL when empty. */
int lp_curve_copy(const lp_curve *c, lp_curve_point **out, size_t *n);
/* What the store lacks: *thin_stride (the stride the stored rows must be
 * thinned to; 1: none) and the kept points not stored yet (*pts borrowed,
 * valid until the next add); returns how many. */
size_t lp_curve_pending(const lp_curve *c, int64_t *thin_stride, const lp_curve_point **pts);
/* The pending points and thinning were stored. */
void lp_curve_stored(lp_curve *c);

#endif
