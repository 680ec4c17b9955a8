/*
 * test_curve.c — training curves: the recorder's cap and even thinning
 * (server/service/curve.h) and the registry's curve rows on a real file,
 * written in batches the way the learner writes them: after every batch
 * the stored rows are exactly the recorder's kept points, and the finished
 * curve survives a reopen.
 */
#include "check.h"
#include "curve.h"
#include "error.h"
#include "registry.h"
#include "store.h"
#include "tmpdir.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static char dir[64];
static char path[256];
static lp_store *s;

static void open_store(void)
{
    char err[256];
    lp_store_opts o = {.path = path, .sync_full = 0, .read_conns = 1};
    CHECK_INT(lp_store_open(&o, &s, err, sizeof err), LP_OK);
}

static int64_t new_run(void)
{
    lp_run r = {.objective = NAN,
                .grad_norm = NAN,
                .settings = {.beta = 1,
                             .rmax = 1,
                             .tau = 0.5,
                             .norm_bound = INFINITY,
                             .max_iter = 500,
                             .epochs = 1,
                             .lr = 0.5,
                             .batch = 1,
                             .text_dim = 4096,
                             .threads = 1}};
    snprintf(r.trigger, sizeof r.trigger, "manual");
    snprintf(r.settings.loss, sizeof r.settings.loss, "square-chipo");
    snprintf(r.settings.optimizer, sizeof r.settings.optimizer, "lbfgs");
    snprintf(r.settings.features, sizeof r.settings.features, "auto");
    CHECK_INT(lp_registry_run_create(s, &r), LP_OK);
    return r.id;
}

/* The objective of observation k: a decreasing curve, distinct values. */
static double objective_of(int64_t k)
{
    return 1.0 / (1.0 + (double)k);
}

/* Two curves agree point for point. */
static int same_points(const lp_curve_point *a, size_t na, const lp_curve_point *b, size_t nb)
{
    if (na != nb)
        return 0;
    for (size_t k = 0; k < na; k++)
        if (a[k].seq != b[k].seq || a[k].iteration != b[k].iteration ||
            a[k].evaluations != b[k].evaluations || a[k].objective != b[k].objective ||
            a[k].t_ms != b[k].t_ms ||
            !(a[k].grad_norm == b[k].grad_norm || (isnan(a[k].grad_norm) && isnan(b[k].grad_norm))))
            return 0;
    return 1;
}

/* The recorder alone: under the cap every observation is kept; past it the
 * stride doubles, the kept points stay evenly spaced from the first one,
 * their number stays within (max/2, max], and finish keeps the newest. */
static void test_thinning(void)
{
    lp_curve c;
    lp_curve_init(&c, 8);
    CHECK_INT(lp_curve_add(&c, 1, 2, NAN, NAN, 0), LP_OK); /* a cancellation check: ignored */
    CHECK_INT(c.next_seq, 0);
    for (int k = 0; k < 8; k++)
        CHECK_INT(lp_curve_add(&c, k + 1, k + 2, objective_of(k), 0.5, k), LP_OK);
    CHECK_INT(c.n, 8);
    CHECK_INT(c.stride, 1);
    for (int k = 8; k < 37; k++)
        CHECK_INT(lp_curve_add(&c, k + 1, k + 2, objective_of(k), NAN, k), LP_OK);
    /* 37 observations: stride 8 keeps seq 0, 8, 16, 24, 32 */
    CHECK_INT(c.stride, 8);
    CHECK_INT(c.n, 5);
    int even = 1;
    for (size_t k = 0; k < c.n; k++)
        even &= c.pts[k].seq == (int64_t)k * 8 && c.pts[k].iteration == (int)(k * 8 + 1);
    CHECK(even);
    lp_curve_point *copy;
    size_t n;
    CHECK_INT(lp_curve_copy(&c, &copy, &n), LP_OK); /* live: the newest follows */
    CHECK_INT(n, 6);
    CHECK_INT(copy[5].seq, 36);
    CHECK(copy[5].objective == objective_of(36));
    CHECK(isnan(copy[5].grad_norm));
    free(copy);
    CHECK_INT(lp_curve_finish(&c), LP_OK);
    CHECK_INT(c.n, 6);
    CHECK_INT(c.pts[5].seq, 36);
    CHECK_INT(lp_curve_finish(&c), LP_OK); /* once */
    CHECK_INT(c.n, 6);
    /* a long curve: between max/2 and max points, the first and last kept */
    lp_curve_clear(&c);
    lp_curve_init(&c, LP_CURVE_MAX_POINTS);
    int within = 1;
    for (int k = 0; k < 100000; k++) {
        lp_curve_add(&c, k + 1, k + 1, objective_of(k), 1.0, k / 10);
        within &= c.n <= LP_CURVE_MAX_POINTS &&
                  (k < LP_CURVE_MAX_POINTS || c.n > LP_CURVE_MAX_POINTS / 2);
    }
    CHECK(within);
    lp_curve_finish(&c);
    CHECK_INT(c.pts[0].seq, 0);
    CHECK_INT(c.pts[c.n - 1].seq, 99999);
    fprintf(stderr, "100000 observations: %zu points, stride %lld\n", c.n, (long long)c.stride);
    lp_curve_clear(&c);
}

/* Batches as the learner writes them: after each, the stored rows are the
 * kept points; the commits are one per batch, not one per point. */
static void test_store_batches(int64_t run, lp_curve *c, int observations, int batch)
{
    lp_curve_init(c, 64);
    lp_store_writer_stats before, after;
    lp_store_writer_stats_get(s, &before);
    int writes = 0, agree = 1;
    for (int k = 0; k < observations; k++) {
        lp_curve_add(c, k + 1, 2 * k + 1, objective_of(k), k % 3 ? 0.25 / (k + 1) : NAN, 3 * k);
        int final = k == observations - 1;
        if (final)
            lp_curve_finish(c);
        int64_t stride;
        const lp_curve_point *pend;
        size_t n = lp_curve_pending(c, &stride, &pend);
        if (!final && n < (size_t)batch)
            continue;
        CHECK_INT(lp_registry_curve_append(s, run, stride, pend, n), LP_OK);
        lp_curve_stored(c);
        writes++;
        lp_curve_point *got;
        size_t ng;
        CHECK_INT(lp_registry_curve_get(s, run, &got, &ng), LP_OK);
        agree &= same_points(got, ng, c->pts, c->n);
        free(got);
    }
    CHECK(agree);
    lp_store_writer_stats_get(s, &after);
    CHECK_INT(after.commits - before.commits, writes);
    CHECK(writes <= observations / batch + 1);
}

int main(void)
{
    if (tmpdir_create(dir, sizeof dir, "test-curve") != 0)
        return 1;
    snprintf(path, sizeof path, "%s/c.db", dir);
    test_thinning();

    open_store();
    int64_t run1 = new_run(), run2 = new_run();
    lp_curve c1, c2;
    test_store_batches(run1, &c1, 1000, 16); /* thinned several times */
    test_store_batches(run2, &c2, 10, 4);    /* never thinned */
    CHECK(c1.stride > 1);
    CHECK_INT(c2.n, 10);
    lp_curve_point *got;
    size_t n;
    CHECK_INT(lp_registry_curve_get(s, run2 + 1000, &got, &n), LP_OK); /* no such run */
    CHECK_INT(n, 0);
    CHECK(got == NULL);
    /* a non-finite objective is refused and nothing is written */
    lp_curve_point bad = {.seq = 99, .objective = INFINITY};
    CHECK_ERR(lp_registry_curve_append(s, run2, 1, &bad, 1), LP_EINVALID_ARGUMENT);

    lp_store_close(s); /* durable: the same rows after a reopen */
    open_store();
    CHECK_INT(lp_registry_curve_get(s, run1, &got, &n), LP_OK);
    CHECK(same_points(got, n, c1.pts, c1.n));
    CHECK_INT(got[n - 1].seq, 999);
    CHECK(got[n - 1].objective == objective_of(999));
    free(got);
    CHECK_INT(lp_registry_curve_get(s, run2, &got, &n), LP_OK);
    CHECK(same_points(got, n, c2.pts, c2.n));
    CHECK(isnan(got[0].grad_norm) && got[1].grad_norm == 0.25 / 2);
    free(got);
    lp_curve_clear(&c1);
    lp_curve_clear(&c2);
    lp_store_close(s);
    tmpdir_remove(dir);
    return check_summary();
}
