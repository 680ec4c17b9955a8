/* curve.c — a run's curve, capped and thinned evenly. See curve.h. */
#include "curve.h"

#include "buf.h"
#include "error.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

void lp_curve_init(lp_curve *c, size_t max_points)
{
    memset(c, 0, sizeof *c);
    c->max_points = max_points < 2 ? 2 : max_points & ~(size_t)1;
    c->stride = 1;
    c->stored_stride = 1;
}

void lp_curve_clear(lp_curve *c)
{
    size_t max_points = c->max_points;
    free(c->pts);
    lp_curve_init(c, max_points);
}

/* Doubles the stride and drops the kept points off it, keeping the count of
 * stored points among the survivors. */
static void thin(lp_curve *c)
{
    c->stride *= 2;
    size_t w = 0, stored = 0;
    for (size_t r = 0; r < c->n; r++) {
        if (c->pts[r].seq % c->stride != 0)
            continue;
        if (r < c->stored)
            stored++;
        c->pts[w++] = c->pts[r];
    }
    c->n = w;
    c->stored = stored;
}

int lp_curve_add(lp_curve *c, int iteration, int evaluations, double objective, double grad_norm,
                 int64_t t_ms)
{
    if (!isfinite(objective))
        return LP_OK;
    lp_curve_point p = {.seq = c->next_seq++,
                        .iteration = iteration < 0 ? 0 : iteration,
                        .evaluations = evaluations < 0 ? 0 : evaluations,
                        .objective = objective,
                        .grad_norm = isfinite(grad_norm) ? grad_norm : NAN,
                        .t_ms = t_ms < 0 ? 0 : t_ms};
    c->newest = p;
    c->newest_kept = 0;
    if (p.seq % c->stride != 0)
        return LP_OK;
    if (c->n == c->max_points) {
        thin(c);
        if (p.seq % c->stride != 0)
            return LP_OK;
    }
    if (lp_array_reserve((void **)&c->pts, &c->cap, c->n, sizeof *c->pts, 64) != LP_OK)
        return LP_ENO_MEMORY;
    c->pts[c->n++] = p;
    c->newest_kept = 1;
    return LP_OK;
}

int lp_curve_finish(lp_curve *c)
{
    if (c->next_seq == 0 || c->newest_kept)
        return LP_OK;
    if (lp_array_reserve((void **)&c->pts, &c->cap, c->n, sizeof *c->pts, 64) != LP_OK)
        return LP_ENO_MEMORY;
    c->pts[c->n++] = c->newest;
    c->newest_kept = 1;
    return LP_OK;
}

int lp_curve_copy(const lp_curve *c, lp_curve_point **out, size_t *n)
{
    *out = NULL;
    *n = 0;
    size_t total = c->n + (c->next_seq > 0 && !c->newest_kept);
    if (total == 0)
        return LP_OK;
    lp_curve_point *p = malloc(total * sizeof *p);
    if (p == NULL)
        return LP_ENO_MEMORY;
    if (c->n > 0)
        memcpy(p, c->pts, c->n * sizeof *p);
    if (total > c->n)
        p[c->n] = c->newest;
    *out = p;
    *n = total;
    return LP_OK;
}

size_t lp_curve_pending(const lp_curve *c, int64_t *thin_stride, const lp_curve_point **pts)
{
    *thin_stride = c->stride != c->stored_stride ? c->stride : 1;
    *pts = c->pts + c->stored;
    return c->n - c->stored;
}

void lp_curve_stored(lp_curve *c)
{
    c->stored = c->n;
    c->stored_stride = c->stride;
}
