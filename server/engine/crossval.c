/* crossval.c — K-fold cross-validation grouped by prompt. See crossval.h. */
#include "crossval.h"

#include "error.h"
#include "losses.h"

#include <math.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define GRID_STEP 0.5
#define WORSE_STOP 3 /* grid points past a fold's best before it stops */

void lp_cv_opts_init(lp_cv_opts *o)
{
    memset(o, 0, sizeof *o);
    o->folds = 5;
    o->auto_l2 = 1;
    o->lo = -4.0;
    o->hi = 2.0;
    o->threads = 1;
}

static uint64_t mix64(uint64_t x) /* splitmix64's finalizer */
{
    x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
    x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
    return x ^ (x >> 31);
}

static uint64_t fnv_bytes(uint64_t h, const void *p, size_t len)
{
    const unsigned char *b = p;
    for (size_t k = 0; k < len; k++)
        h = (h ^ b[k]) * 0x100000001b3ULL;
    return h;
}

/* Calls f(ctx, j, v) for every nonzero value v of row i's difference. */
static void row_foreach(const lp_dataset *ds, size_t i, void (*f)(void *, uint32_t, double),
                        void *ctx)
{
    size_t d = ds->d;
    switch (ds->storage) {
    case LP_STORE_F32:
        for (size_t j = 0; j < d; j++)
            if (ds->xf[i * d + j] != 0.0f)
                f(ctx, (uint32_t)j, (double)ds->xf[i * d + j]);
        break;
    case LP_STORE_F64:
        for (size_t j = 0; j < d; j++)
            if (ds->xd[i * d + j] != 0.0)
                f(ctx, (uint32_t)j, ds->xd[i * d + j]);
        break;
    case LP_STORE_CSR:
        for (size_t k = ds->rowptr[i]; k < ds->rowptr[i + 1]; k++)
            if (ds->val[k] != 0.0)
                f(ctx, ds->col[k], ds->val[k]);
        break;
    }
}

typedef struct row_hash {
    uint64_t h;
    int sign; /* 0 until the first nonzero value fixes it */
} row_hash;

static void hash_value(void *ctx, uint32_t j, double v)
{
    row_hash *r = ctx;
    if (r->sign == 0)
        r->sign = v > 0 ? 1 : -1;
    double w = r->sign * v;
    r->h = fnv_bytes(r->h, &j, sizeof j);
    r->h = fnv_bytes(r->h, &w, sizeof w);
}

static void add_square(void *ctx, uint32_t j, double v)
{
    (void)j;
    *(double *)ctx += v * v;
}

void lp_cv_group_keys(const lp_dataset *ds, uint64_t *key)
{
    for (size_t i = 0; i < ds->n; i++) {
        if (ds->group != NULL && ds->group[i] != 0) {
            key[i] = ds->group[i];
            continue;
        }
        row_hash r = {0xcbf29ce484222325ULL, 0};
        row_foreach(ds, i, hash_value, &r);
        key[i] = r.h;
    }
}

typedef struct keyed_row {
    uint64_t order, key;
    size_t row;
} keyed_row;

static int keyed_cmp(const void *a, const void *b)
{
    const keyed_row *x = a, *y = b;
    if (x->order != y->order)
        return x->order < y->order ? -1 : 1;
    if (x->key != y->key)
        return x->key < y->key ? -1 : 1;
    return x->row < y->row ? -1 : x->row > y->row;
}

int lp_cv_folds(const lp_dataset *ds, int K, uint64_t seed, int *fold_of, size_t *groups)
{
    size_t n = ds->n;
    *groups = 0;
    if (K < 2)
        return LP_EINVALID_ARGUMENT;
    uint64_t *key = malloc((n ? n : 1) * sizeof *key);
    keyed_row *kr = malloc((n ? n : 1) * sizeof *kr);
    if (key == NULL || kr == NULL) {
        free(key);
        free(kr);
        return LP_ENO_MEMORY;
    }
    lp_cv_group_keys(ds, key);
    uint64_t salt = mix64(seed + 0x9e3779b97f4a7c15ULL);
    for (size_t i = 0; i < n; i++)
        kr[i] = (keyed_row){mix64(key[i] ^ salt), key[i], i};
    qsort(kr, n, sizeof *kr, keyed_cmp);
    size_t g = 0;
    for (size_t t = 0; t < n; t++) {
        if (t > 0 && kr[t].key != kr[t - 1].key)
            g++;
        fold_of[kr[t].row] = (int)(g % (size_t)K);
    }
    *groups = n ? g + 1 : 0;
    free(key);
    free(kr);
    return *groups < (size_t)K ? LP_EINVALID_ARGUMENT : LP_OK;
}

/* ---- the fold fits ----------------------------------------------------- */

typedef struct acc {
    double sa, saa, sb, sbb, sraw;
    size_t n;
    int not_converged;
    int done; /* the fold was fitted at this penalty */
} acc;

typedef struct cv_job {
    const lp_dataset *ds;
    const lp_objective_opts *oo;
    const lp_fit_opts *fo;
    const lp_cv_opts *co;
    const int *fold_of;
    const double *l2; /* npoints penalties, ascending */
    size_t npoints;
    int fold_threads;
    acc *acc; /* folds x npoints */
    pthread_mutex_t lock;
    int next_fold, cancelled, rc;
} cv_job;

static int fold_progress(void *ctx, int iteration, int evaluations, double objective,
                         double grad_norm)
{
    (void)iteration;
    (void)evaluations;
    (void)objective;
    (void)grad_norm;
    cv_job *j = ctx;
    pthread_mutex_lock(&j->lock);
    if (!j->cancelled && j->co->step != NULL && j->co->step(j->co->step_ctx) != 0)
        j->cancelled = 1;
    int stop = j->cancelled;
    pthread_mutex_unlock(&j->lock);
    return stop;
}

/* Adds label i of ds with margin m to a. */
static void score_label(const lp_dataset *ds, const lp_loss_spec *loss, size_t i, double m, acc *a)
{
    lp_label_consts k;
    lp_label_consts_from_eps(ds->eps[i], &k);
    double zbar = ds->z[i] ? 1.0 : -1.0, u = zbar * m;
    double agree = u > 0 ? 1.0 : u == 0 ? 0.5 : 0.0;
    double ai = k.c * (agree - k.q);
    double mc = m;
    if (loss->kind == LP_LOSS_SQUARE_CHIPO || loss->kind == LP_LOSS_CHIPO) {
        double r = 2.0 * loss->rmax;
        mc = m > r ? r : m < -r ? -r : m;
    }
    double p = lp_sigmoid(mc), yhat = k.c * ((double)ds->z[i] - k.q);
    double bi = p * p - 2.0 * p * yhat + yhat;
    a->sa += ai;
    a->saa += ai * ai;
    a->sb += bi;
    a->sbb += bi * bi;
    a->sraw += agree;
    a->n++;
}

/* Fits fold f along the grid (largest penalty first, warm starts). */
static int run_fold(cv_job *j, int f)
{
    const lp_dataset *ds = j->ds;
    size_t n = ds->n, d = ds->d, ntrain = 0;
    size_t *idx = malloc((n ? n : 1) * sizeof *idx);
    double *theta = calloc(d, sizeof *theta);
    if (idx == NULL || theta == NULL) {
        free(idx);
        free(theta);
        return LP_ENO_MEMORY;
    }
    for (size_t i = 0; i < n; i++)
        if (j->fold_of[i] != f)
            idx[ntrain++] = i;
    lp_dataset *train = lp_dataset_subset(ds, idx, ntrain);
    int rc = train ? LP_OK : LP_ENO_MEMORY;
    double best = INFINITY;
    int worse = 0;
    lp_fit_opts fo = *j->fo;
    fo.progress = 0;
    fo.on_progress = fold_progress;
    fo.progress_ctx = j;
    for (size_t t = j->npoints; t-- > 0 && rc == LP_OK;) {
        lp_objective_opts oo = *j->oo;
        oo.l2 = j->l2[t];
        oo.threads = j->fold_threads;
        lp_objective *ob = lp_objective_new(train, &oo);
        lp_fit_result res;
        fo.warm_start = t + 1 < j->npoints; /* from the next larger penalty's theta */
        rc = ob ? lp_fit(ob, &fo, theta, &res) : LP_ENO_MEMORY;
        lp_objective_free(ob);
        if (rc != LP_OK)
            break;
        acc *a = &j->acc[(size_t)f * j->npoints + t];
        a->not_converged += !res.converged;
        for (size_t i = 0; i < n; i++)
            if (j->fold_of[i] == f) {
                double m = lp_dataset_row_dot(ds, i, theta);
                score_label(ds, &oo.loss, i, m, a);
                if (j->co->oof != NULL)
                    j->co->oof[t * n + i] = m;
            }
        a->done = 1;
        /* Past the fold's own best by WORSE_STOP points: smaller penalties
         * (the slowest fits) would not be chosen. */
        double brier = a->n ? a->sb / (double)a->n : NAN;
        if (t + 1 == j->npoints || brier < best) {
            best = brier;
            worse = 0;
        } else if (++worse >= WORSE_STOP)
            break;
    }
    lp_dataset_free(train);
    free(idx);
    free(theta);
    return rc;
}

static void *fold_worker(void *arg)
{
    cv_job *j = arg;
    for (;;) {
        pthread_mutex_lock(&j->lock);
        int f =
            j->rc == LP_OK && !j->cancelled && j->next_fold < j->co->folds ? j->next_fold++ : -1;
        pthread_mutex_unlock(&j->lock);
        if (f < 0)
            return NULL;
        int rc = run_fold(j, f);
        if (rc != LP_OK) {
            pthread_mutex_lock(&j->lock);
            if (j->rc == LP_OK)
                j->rc = rc;
            pthread_mutex_unlock(&j->lock);
        }
    }
}

static double seconds_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* Mean and standard error from a sum and a sum of squares over n. */
static void mean_se(double s, double ss, size_t n, double *mean, double *se)
{
    double nn = (double)n;
    *mean = n ? s / nn : NAN;
    double var = n > 1 ? (ss - s * s / nn) / (nn - 1.0) : NAN;
    *se = n > 1 ? sqrt(var > 0 ? var : 0.0) / sqrt(nn) : NAN;
}

int lp_cv_run(const lp_dataset *ds, const lp_objective_opts *oo, const lp_fit_opts *fo,
              const lp_cv_opts *co, lp_cv_result *out)
{
    memset(out, 0, sizeof *out);
    size_t n = ds->n;
    if (co->folds < 2 || co->threads < 1 || !(co->lo <= co->hi) ||
        (co->auto_l2 && (co->hi - co->lo) / GRID_STEP + 1.0 > LP_CV_MAX_GRID))
        return LP_EINVALID_ARGUMENT;
    double t0 = seconds_now();
    out->folds = co->folds;
    out->auto_l2 = co->auto_l2;
    out->seed = co->seed;
    out->n = n;
    double s2 = 0.0;
    for (size_t i = 0; i < n; i++)
        row_foreach(ds, i, add_square, &s2);
    size_t p = n < ds->d ? n : ds->d;
    out->unit = n ? s2 / (double)p : 0.0; /* n S / min(n, d), S = s2 / n */
    double l2[LP_CV_MAX_GRID];
    if (co->auto_l2) {
        out->npoints = (size_t)floor((co->hi - co->lo) / GRID_STEP + 1e-9) + 1;
        for (size_t t = 0; t < out->npoints; t++)
            l2[t] = out->unit * pow(10.0, co->lo + GRID_STEP * (double)t);
    } else {
        out->npoints = 1;
        l2[0] = oo->l2;
    }
    int *fold_of = malloc((n ? n : 1) * sizeof *fold_of);
    if (fold_of == NULL)
        return LP_ENO_MEMORY;
    for (size_t i = 0; co->oof != NULL && i < n * out->npoints; i++)
        co->oof[i] = NAN;
    int rc = lp_cv_folds(ds, co->folds, co->seed, fold_of, &out->groups);
    if (rc != LP_OK) {
        free(fold_of);
        return rc;
    }
    int workers = co->threads < co->folds ? co->threads : co->folds;
    cv_job j = {.ds = ds,
                .oo = oo,
                .fo = fo,
                .co = co,
                .fold_of = fold_of,
                .l2 = l2,
                .npoints = out->npoints,
                .fold_threads = co->threads / workers > 0 ? co->threads / workers : 1,
                .acc = calloc((size_t)co->folds * out->npoints, sizeof(acc))};
    if (j.acc == NULL) {
        free(fold_of);
        return LP_ENO_MEMORY;
    }
    pthread_mutex_init(&j.lock, NULL);
    pthread_t th[64];
    int started = 0;
    for (int w = 1; w < workers && w < 64; w++)
        if (pthread_create(&th[started], NULL, fold_worker, &j) == 0)
            started++;
    fold_worker(&j);
    for (int w = 0; w < started; w++)
        pthread_join(th[w], NULL);
    pthread_mutex_destroy(&j.lock);
    rc = j.cancelled ? LP_ECANCELLED : j.rc;
    int have_choice = 0;
    for (size_t t = 0; t < out->npoints && rc == LP_OK; t++) {
        acc a = {0};
        int complete = 1;
        for (int f = 0; f < co->folds; f++) { /* in fold order: deterministic sums */
            const acc *b = &j.acc[(size_t)f * out->npoints + t];
            complete = complete && b->done;
            a.sa += b->sa;
            a.saa += b->saa;
            a.sb += b->sb;
            a.sbb += b->sbb;
            a.sraw += b->sraw;
            a.n += b->n;
            a.not_converged += b->not_converged;
        }
        lp_cv_point *pt = &out->pt[t];
        pt->l2 = l2[t];
        pt->not_converged = a.not_converged;
        if (!complete) { /* some fold stopped above this penalty: not compared */
            pt->accuracy = pt->accuracy_se = pt->brier = pt->brier_se = pt->raw_accuracy = NAN;
            continue;
        }
        mean_se(a.sa, a.saa, a.n, &pt->accuracy, &pt->accuracy_se);
        mean_se(a.sb, a.sbb, a.n, &pt->brier, &pt->brier_se);
        pt->raw_accuracy = a.n ? a.sraw / (double)a.n : NAN;
        /* the smallest Brier score; a tie goes to the larger penalty */
        if (!have_choice || !(pt->brier > out->pt[out->chosen].brier)) {
            out->chosen = t;
            have_choice = 1;
        }
    }
    free(j.acc);
    free(fold_of);
    out->seconds = seconds_now() - t0;
    return rc;
}
