/* quality.c — label quality under randomized response. See quality.h. */
#include "quality.h"

#include "error.h"
#include "prng.h"
#include "rr.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* u(e) = c(e)q(e) = 1/(e^e - 1): what a debiased gold term subtracts. */
static double rr_offset(double epsilon)
{
    return isinf(epsilon) ? 0.0 : 1.0 / expm1(epsilon);
}

/* k(e) = u(u + 1) = (c^2 - 1)/4: the variance randomized response adds to
 * one gold term. */
static double rr_extra_variance(double epsilon)
{
    double u = rr_offset(epsilon);
    return u * (u + 1.0);
}

static double clamp01(double x)
{
    return x < 0 ? 0 : x > 1 ? 1 : x;
}

/* P(Z <= z) for a standard normal Z. */
static double normal_cdf(double z)
{
    return 0.5 * erfc(-z / M_SQRT2);
}

static lp_quality_estimate no_estimate(void)
{
    return (lp_quality_estimate){0, NAN, NAN, NAN, NAN};
}

/* An estimate of n terms without its interval (yet). */
static lp_quality_estimate point_estimate(size_t n, double estimate)
{
    return (lp_quality_estimate){n, estimate, NAN, NAN, NAN};
}

void lp_quality_score_interval(double mean, double k, size_t n, double *low, double *high)
{
    /* (mean - a)^2 <= t (a - a^2 + k), t = z^2/n: a quadratic in a whose
     * discriminant is t^2 + 4t(mean(1 - mean) + k(1 + t)) > 0 (mean >= -u
     * and k >= u(u + 1) by Jensen). */
    double t = LP_QUALITY_Z * LP_QUALITY_Z / (double)n;
    double b = 2.0 * mean + t, disc = t * t + 4.0 * t * (mean * (1.0 - mean) + k * (1.0 + t));
    double root = sqrt(disc > 0 ? disc : 0);
    *low = clamp01((b - root) / (2.0 * (1.0 + t)));
    *high = clamp01((b + root) / (2.0 * (1.0 + t)));
}

/* Running sums of gold terms: their sum, and the sums of k(e) and c(e). */
typedef struct gold_sums {
    size_t n;
    double sum, k, c;
} gold_sums;

static lp_quality_estimate gold_estimate(const gold_sums *g)
{
    if (g->n == 0)
        return no_estimate();
    lp_quality_estimate e = {.n = g->n, .estimate = g->sum / (double)g->n};
    double k = g->k / (double)g->n, a = clamp01(e.estimate);
    lp_quality_score_interval(e.estimate, k, g->n, &e.low, &e.high);
    e.se = sqrt((a * (1.0 - a) + k) / (double)g->n);
    return e;
}

/* ---- agreement ---- */

/* One label of a task with two labels or more: its annotator and the sum of
 * its pairs' terms with the task's other labels (each pair counted once per
 * label it holds). */
typedef struct shared_label {
    size_t annotator;
    double pair_sum;
    double pair_noise; /* sum of its pairs' privacy variances, see pair_noise */
} shared_label;

/* The labels of tasks with two labels or more, grouped by task. */
typedef struct shared_tasks {
    shared_label *labels;
    size_t n_labels;
    size_t *start; /* task t holds labels start[t] .. start[t+1]-1 */
    size_t n_tasks;
} shared_tasks;

static void shared_free(shared_tasks *s)
{
    free(s->labels);
    free(s->start);
}

/* (1 + c1 c2 (2z1 - 1)(2z2 - 1)) / 2 */
static double pair_term(const lp_quality_row *x, const lp_quality_row *y)
{
    double sign = x->z_task == y->z_task ? 1.0 : -1.0;
    return 0.5 * (1.0 + lp_rr_debias(x->epsilon) * lp_rr_debias(y->epsilon) * sign);
}

/* The variance that randomized response alone adds to a pair's term:
 * (c1^2 c2^2 - (2 rho - 1)^2) / 4 >= (c1^2 c2^2 - 1) / 4, whatever the true
 * agreement rho. Zero when neither label was privatized. */
static double pair_noise(const lp_quality_row *x, const lp_quality_row *y)
{
    double cc = lp_rr_debias(x->epsilon) * lp_rr_debias(y->epsilon);
    return 0.25 * (cc * cc - 1.0);
}

static int shared_build(const lp_quality_row *rows, size_t n_rows, shared_tasks *s)
{
    memset(s, 0, sizeof *s);
    size_t n_labels = 0, n_tasks = 0;
    for (size_t i = 0, j; i < n_rows; i = j) {
        for (j = i; j < n_rows && rows[j].task == rows[i].task; j++)
            ;
        if (j - i >= 2) {
            n_labels += j - i;
            n_tasks++;
        }
    }
    s->labels = malloc((n_labels ? n_labels : 1) * sizeof *s->labels);
    s->start = malloc((n_tasks + 1) * sizeof *s->start);
    if (s->labels == NULL || s->start == NULL) {
        shared_free(s);
        return LP_ENO_MEMORY;
    }
    for (size_t i = 0, j; i < n_rows; i = j) {
        for (j = i; j < n_rows && rows[j].task == rows[i].task; j++)
            ;
        if (j - i < 2)
            continue;
        s->start[s->n_tasks++] = s->n_labels;
        for (size_t a = i; a < j; a++) {
            shared_label *l = &s->labels[s->n_labels++];
            l->annotator = rows[a].annotator;
            l->pair_sum = l->pair_noise = 0;
            for (size_t b = i; b < j; b++)
                if (b != a) {
                    l->pair_sum += pair_term(&rows[a], &rows[b]);
                    l->pair_noise += pair_noise(&rows[a], &rows[b]);
                }
        }
    }
    s->start[s->n_tasks] = s->n_labels;
    return LP_OK;
}

/* Sums over a selection of tasks: the campaign's (each pair twice, once per
 * label) and each annotator's (its own pairs). */
typedef struct agreement_sums {
    double sum, count;
    double *own_sum, *own_count; /* per annotator */
} agreement_sums;

static void sums_reset(agreement_sums *a, size_t n_annotators)
{
    a->sum = a->count = 0;
    memset(a->own_sum, 0, n_annotators * sizeof *a->own_sum);
    memset(a->own_count, 0, n_annotators * sizeof *a->own_count);
}

static void sums_add_task(agreement_sums *a, const shared_tasks *s, size_t t)
{
    size_t k = s->start[t + 1] - s->start[t];
    for (size_t i = s->start[t]; i < s->start[t + 1]; i++) {
        const shared_label *l = &s->labels[i];
        a->sum += l->pair_sum;
        a->count += (double)(k - 1);
        a->own_sum[l->annotator] += l->pair_sum;
        a->own_count[l->annotator] += (double)(k - 1);
    }
}

/* The annotator's agreement with the others minus the others' agreement
 * among themselves (NaN when either has no pair). A pair of j with another
 * is counted once in own_sum and once in the other's: removing j's pairs
 * from the campaign's double count removes them twice. */
static double own_minus_others(const agreement_sums *a, size_t j)
{
    double oc = a->count - 2.0 * a->own_count[j];
    if (a->own_count[j] <= 0 || oc <= 0)
        return NAN;
    return a->own_sum[j] / a->own_count[j] - (a->sum - 2.0 * a->own_sum[j]) / oc;
}

static int cmp_double(const void *x, const void *y)
{
    double a = *(const double *)x, b = *(const double *)y;
    return (a > b) - (a < b);
}

/* The q-quantile of v[0..n) (sorted in place; NaNs dropped), by linear
 * interpolation; NaN when empty. */
static double quantile(double *v, size_t n, double q)
{
    size_t m = 0;
    for (size_t i = 0; i < n; i++)
        if (!isnan(v[i]))
            v[m++] = v[i];
    if (m == 0)
        return NAN;
    qsort(v, m, sizeof *v, cmp_double);
    double pos = q * (double)(m - 1);
    size_t lo = (size_t)floor(pos);
    size_t hi = lo + 1 < m ? lo + 1 : lo;
    return v[lo] + (pos - (double)lo) * (v[hi] - v[lo]);
}

/* The standard deviation of v[0..n), NaNs dropped; NaN with fewer than 2. */
static double stddev(const double *v, size_t n)
{
    double s = 0, ss = 0;
    size_t m = 0;
    for (size_t i = 0; i < n; i++)
        if (!isnan(v[i])) {
            s += v[i];
            m++;
        }
    if (m < 2)
        return NAN;
    double mean = s / (double)m;
    for (size_t i = 0; i < n; i++)
        if (!isnan(v[i]))
            ss += (v[i] - mean) * (v[i] - mean);
    return sqrt(ss / (double)(m - 1));
}

static void set_interval(lp_quality_estimate *e, double *draws, size_t b)
{
    double alpha = 1.0 - LP_QUALITY_CONFIDENCE;
    e->se = stddev(draws, b);
    e->low = clamp01(quantile(draws, b, alpha / 2));
    e->high = clamp01(quantile(draws, b, 1.0 - alpha / 2));
}

/* Campaign and per-annotator agreement, with their bootstrap intervals, and
 * each annotator's difference to the others with its bootstrap standard
 * error into diff_se. */
/* The normal interval estimate +- z se, clipped to [0, 1]. */
static void set_normal_interval(lp_quality_estimate *e, double se)
{
    e->se = se;
    e->low = clamp01(e->estimate - LP_QUALITY_Z * se);
    e->high = clamp01(e->estimate + LP_QUALITY_Z * se);
}

/* The task sums S_t (each pair twice) and C_t (pairs, twice) of task t. */
static void task_sums(const shared_tasks *s, size_t t, double *S, double *C)
{
    size_t k = s->start[t + 1] - s->start[t];
    *S = 0;
    for (size_t i = s->start[t]; i < s->start[t + 1]; i++)
        *S += s->labels[i].pair_sum;
    *C = (double)(k * (k - 1));
}

/*
 * Campaigns too large to resample: normal intervals with the linearized
 * (cluster-robust) variances over tasks, the delta method applied to the
 * same ratios the bootstrap resamples. With S_t, C_t a task's sums, the
 * campaign's A = S/C has Var ~ f sum_t (S_t - A C_t)^2 / C^2, f = T/(T-1);
 * an annotator's A_j = S_j/C_j the same over its tasks; its difference
 * d_j = A_j - M_j to the others' M_j = (S - 2S_j)/(C - 2C_j) has the
 * influence per task (s_jt - A_j c_jt)/C_j - ((S_t - 2s_jt) - M_j(C_t -
 * 2c_jt))/D_j, D_j = C - 2C_j, summed in squares over every task: over the
 * tasks without j through the totals of S_t^2, S_t C_t and C_t^2.
 */
static int linearized(const shared_tasks *s, size_t n_annotators, const agreement_sums *a,
                      lp_quality_report *r, double *diff_se)
{
    size_t na = n_annotators ? n_annotators : 1, T = s->n_tasks;
    double *own_sq = calloc(na, sizeof *own_sq), *in_sq = calloc(na, sizeof *in_sq);
    double *out_sq = calloc(na, sizeof *out_sq), *tasks = calloc(na, sizeof *tasks);
    int rc = own_sq && in_sq && out_sq && tasks ? LP_OK : LP_ENO_MEMORY;
    double A = a->sum / a->count, camp_sq = 0, SS = 0, SC = 0, CC = 0;
    for (size_t t = 0; rc == LP_OK && t < T; t++) {
        double St, Ct;
        task_sums(s, t, &St, &Ct);
        camp_sq += (St - A * Ct) * (St - A * Ct);
        SS += St * St;
        SC += St * Ct;
        CC += Ct * Ct;
        double c = (double)(s->start[t + 1] - s->start[t] - 1);
        for (size_t i = s->start[t]; i < s->start[t + 1]; i++) {
            size_t j = s->labels[i].annotator;
            double sj = s->labels[i].pair_sum, Aj = a->own_sum[j] / a->own_count[j];
            double Dj = a->count - 2.0 * a->own_count[j];
            tasks[j] += 1;
            own_sq[j] += (sj - Aj * c) * (sj - Aj * c);
            if (Dj > 0) {
                double Mj = (a->sum - 2.0 * a->own_sum[j]) / Dj;
                double psi =
                    (sj - Aj * c) / a->own_count[j] - ((St - 2 * sj) - Mj * (Ct - 2 * c)) / Dj;
                in_sq[j] += psi * psi;
                out_sq[j] += (St - Mj * Ct) * (St - Mj * Ct);
            }
        }
    }
    if (rc == LP_OK) {
        double f = T > 1 ? (double)T / (double)(T - 1) : NAN;
        set_normal_interval(&r->agreement, sqrt(f * camp_sq) / a->count);
        for (size_t j = 0; j < n_annotators; j++) {
            if (a->own_count[j] <= 0)
                continue;
            double fj = tasks[j] > 1 ? tasks[j] / (tasks[j] - 1) : NAN;
            set_normal_interval(&r->annotators[j].agreement,
                                sqrt(fj * own_sq[j]) / a->own_count[j]);
            double Dj = a->count - 2.0 * a->own_count[j];
            if (Dj <= 0)
                continue;
            double Mj = (a->sum - 2.0 * a->own_sum[j]) / Dj;
            double rest = SS - 2 * Mj * SC + Mj * Mj * CC - out_sq[j]; /* tasks without j */
            diff_se[j] = sqrt(f * (in_sq[j] + fmax(rest, 0) / (Dj * Dj)));
        }
    }
    free(own_sq);
    free(in_sq);
    free(out_sq);
    free(tasks);
    return rc;
}

/*
 * The privacy floor of the agreement intervals. On few shared tasks the
 * resampled (or linearized) spread can be near zero — three pairs that all
 * agree resample to the same mean — although randomized response alone
 * makes each pair's term vary by pair_noise. The standard error is never
 * taken below that of the mean of the pairs' privacy noise, sqrt(sum v_p)/n
 * (pairs as if independent); when the floor is the larger, the interval is
 * the normal one with it.
 */
static void privacy_floor(const shared_tasks *s, size_t n_annotators, const agreement_sums *a,
                          lp_quality_report *r)
{
    double all = 0;
    double *own = calloc(n_annotators ? n_annotators : 1, sizeof *own);
    if (own == NULL)
        return; /* the intervals stay as they are */
    for (size_t i = 0; i < s->n_labels; i++) {
        all += s->labels[i].pair_noise; /* each pair twice */
        own[s->labels[i].annotator] += s->labels[i].pair_noise;
    }
    double floor = sqrt(all / 2.0) / (a->count / 2.0);
    if (!(r->agreement.se >= floor))
        set_normal_interval(&r->agreement, floor);
    for (size_t j = 0; j < n_annotators; j++) {
        lp_quality_estimate *e = &r->annotators[j].agreement;
        if (e->n == 0 || a->own_count[j] <= 0)
            continue;
        double fj = sqrt(own[j]) / a->own_count[j];
        if (!(e->se >= fj))
            set_normal_interval(e, fj);
    }
    free(own);
}

/* Campaign and per-annotator agreement with their intervals (bootstrap,
 * or linearized on campaigns too large to resample), and each annotator's
 * difference to the others with its standard error into diff, diff_se. */
static int agreement(const shared_tasks *s, size_t n_annotators, size_t bootstrap, uint64_t seed,
                     lp_quality_report *r, double *diff, double *diff_se)
{
    for (size_t j = 0; j < n_annotators; j++)
        diff[j] = diff_se[j] = NAN;
    if (s->n_tasks == 0)
        return LP_OK;
    size_t na = n_annotators ? n_annotators : 1;
    /* fewer resamples when the work or the per-annotator draws would grow
     * too large; below LP_QUALITY_BOOTSTRAP_MIN, none: linearized */
    double b_max = fmin(LP_QUALITY_BOOTSTRAP_WORK / (double)s->n_labels,
                        LP_QUALITY_BOOTSTRAP_DRAWS / (double)na);
    size_t B = (double)bootstrap > b_max ? (size_t)b_max : bootstrap;
    int linear = bootstrap > 0 && B < LP_QUALITY_BOOTSTRAP_MIN;
    if (linear)
        B = 0;
    agreement_sums a = {.own_sum = calloc(na, sizeof(double)),
                        .own_count = calloc(na, sizeof(double))};
    size_t Bs = B ? B : 1;
    double *campaign = malloc(Bs * sizeof *campaign);
    double *own = malloc(Bs * na * sizeof *own), *dd = malloc(Bs * na * sizeof *dd);
    int rc = a.own_sum && a.own_count && campaign && own && dd ? LP_OK : LP_ENO_MEMORY;
    if (rc == LP_OK) {
        sums_reset(&a, n_annotators);
        for (size_t t = 0; t < s->n_tasks; t++)
            sums_add_task(&a, s, t);
        r->agreement = point_estimate((size_t)(a.count / 2), a.sum / a.count);
        for (size_t j = 0; j < n_annotators; j++) {
            lp_annotator_quality *q = &r->annotators[j];
            q->agreement = no_estimate();
            if (a.own_count[j] > 0)
                q->agreement =
                    point_estimate((size_t)a.own_count[j], a.own_sum[j] / a.own_count[j]);
            diff[j] = own_minus_others(&a, j);
        }
        if (linear)
            rc = linearized(s, n_annotators, &a, r, diff_se);
        lp_prng g;
        lp_prng_seed(&g, seed);
        for (size_t b = 0; b < B; b++) {
            sums_reset(&a, n_annotators);
            for (size_t t = 0; t < s->n_tasks; t++)
                sums_add_task(&a, s, (size_t)lp_prng_below(&g, s->n_tasks));
            campaign[b] = a.sum / a.count;
            for (size_t j = 0; j < n_annotators; j++) {
                own[j * B + b] = a.own_count[j] > 0 ? a.own_sum[j] / a.own_count[j] : NAN;
                dd[j * B + b] = own_minus_others(&a, j);
            }
        }
        if (B > 0)
            set_interval(&r->agreement, campaign, B);
        for (size_t j = 0; B > 0 && j < n_annotators; j++) {
            if (r->annotators[j].agreement.n > 0)
                set_interval(&r->annotators[j].agreement, own + j * B, B);
            diff_se[j] = stddev(dd + j * B, B);
        }
        if (bootstrap > 0) {              /* intervals asked for: floor them */
            sums_reset(&a, n_annotators); /* the full sample's sums again */
            for (size_t t = 0; t < s->n_tasks; t++)
                sums_add_task(&a, s, t);
            privacy_floor(s, n_annotators, &a, r);
        }
        r->tasks_shared = s->n_tasks;
        r->bootstrap = B;
    }
    free(a.own_sum);
    free(a.own_count);
    free(campaign);
    free(own);
    free(dd);
    return rc;
}

/* ---- the outlier test ---- */

static int cmp_p(const void *x, const void *y, void *ctx)
{
    const lp_annotator_quality *q = ctx;
    double a = q[*(const size_t *)x].p_value, b = q[*(const size_t *)y].p_value;
    return (a > b) - (a < b);
}

/* Gold test of annotator j against the pooled gold terms of the others:
 * the two-sample z-test with both variances taken at the null (the pooled
 * accuracy a0 of every gold label) and a continuity correction of half a
 * step of each mean (one label more or less equal to gold moves a mean of n
 * terms by about c/n):
 *   z = (a_j - a_o + (c_j/n_j + c_o/n_o)/2) / sqrt(V_j(a0) + V_o(a0)). */
static void gold_test(lp_annotator_quality *q, const gold_sums *own, const gold_sums *all)
{
    gold_sums others = {all->n - own->n, all->sum - own->sum, all->k - own->k, all->c - own->c};
    if (own->n < LP_QUALITY_MIN_LABELS || others.n < LP_QUALITY_MIN_LABELS)
        return;
    double nj = (double)own->n, no = (double)others.n;
    double a0 = clamp01(all->sum / (double)all->n), a_o = others.sum / no;
    double v_o = (a0 * (1.0 - a0) + others.k / no) / no;
    double v_j = (a0 * (1.0 - a0) + own->k / nj) / nj;
    if (!(v_o + v_j > 0))
        return;
    double half_step = 0.5 * (own->c / (nj * nj) + others.c / (no * no));
    q->basis = LP_QUALITY_BY_GOLD;
    q->reference = a_o;
    q->z = (own->sum / nj - a_o + half_step) / sqrt(v_j + v_o);
    q->p_value = normal_cdf(q->z);
}

/* Agreement test: the difference to the others' agreement among themselves
 * over its bootstrap standard error. */
static void agreement_test(lp_annotator_quality *q, double diff, double se,
                           const lp_quality_report *r)
{
    if (q->agreement.n < LP_QUALITY_MIN_LABELS ||
        r->agreement.n < q->agreement.n + LP_QUALITY_MIN_LABELS || isnan(diff) || !(se > 0))
        return;
    q->basis = LP_QUALITY_BY_AGREEMENT;
    q->reference = q->agreement.estimate - diff;
    q->z = diff / se;
    q->p_value = normal_cdf(q->z);
}

/* Holm's step-down over the tested annotators: family-wise level alpha. */
static int holm(lp_quality_report *r)
{
    size_t m = 0;
    size_t *order = malloc((r->n_annotators ? r->n_annotators : 1) * sizeof *order);
    if (order == NULL)
        return LP_ENO_MEMORY;
    for (size_t j = 0; j < r->n_annotators; j++)
        if (r->annotators[j].basis != LP_QUALITY_UNTESTED)
            order[m++] = j;
    qsort_r(order, m, sizeof *order, cmp_p, r->annotators);
    for (size_t k = 0; k < m; k++) {
        lp_annotator_quality *q = &r->annotators[order[k]];
        if (!(q->p_value <= LP_QUALITY_ALPHA / (double)(m - k)))
            break;
        q->flagged = 1;
    }
    free(order);
    return LP_OK;
}

/* ---- the report ---- */

static int check_rows(const lp_quality_row *rows, size_t n_rows, size_t n_annotators)
{
    for (size_t i = 0; i < n_rows; i++) {
        if (rows[i].annotator >= n_annotators || !(rows[i].epsilon > 0) ||
            (i > 0 && rows[i].task < rows[i - 1].task))
            return LP_EINVALID_ARGUMENT;
    }
    return LP_OK;
}

int lp_quality_compute(const lp_quality_row *rows, size_t n_rows, size_t n_annotators,
                       size_t bootstrap, uint64_t seed, lp_quality_report *out)
{
    memset(out, 0, sizeof *out);
    out->gold = out->agreement = no_estimate();
    int rc = check_rows(rows, n_rows, n_annotators);
    if (rc != LP_OK)
        return rc;
    size_t na = n_annotators ? n_annotators : 1;
    gold_sums *own = calloc(na, sizeof *own), all = {0};
    double *diff = malloc(na * sizeof *diff), *diff_se = malloc(na * sizeof *diff_se);
    out->annotators = calloc(na, sizeof *out->annotators);
    out->n_annotators = n_annotators;
    shared_tasks s = {0};
    rc = own && diff && diff_se && out->annotators ? shared_build(rows, n_rows, &s) : LP_ENO_MEMORY;
    for (size_t i = 0; rc == LP_OK && i < n_rows; i++) {
        const lp_quality_row *l = &rows[i];
        if (l->gold < 0)
            continue;
        double term = lp_rr_debias(l->epsilon) * (l->z_task == l->gold) - rr_offset(l->epsilon);
        double k = rr_extra_variance(l->epsilon), c = lp_rr_debias(l->epsilon);
        gold_sums *g[2] = {&own[l->annotator], &all};
        for (int x = 0; x < 2; x++) {
            g[x]->n++;
            g[x]->sum += term;
            g[x]->k += k;
            g[x]->c += c;
        }
    }
    if (rc == LP_OK) {
        out->gold = gold_estimate(&all);
        for (size_t j = 0; j < n_annotators; j++) {
            lp_annotator_quality *q = &out->annotators[j];
            *q = (lp_annotator_quality){.gold = gold_estimate(&own[j]),
                                        .agreement = no_estimate(),
                                        .reference = NAN,
                                        .z = NAN,
                                        .p_value = NAN};
        }
        rc = agreement(&s, n_annotators, bootstrap, seed, out, diff, diff_se);
    }
    for (size_t j = 0; rc == LP_OK && j < n_annotators; j++) {
        gold_test(&out->annotators[j], &own[j], &all);
        if (out->annotators[j].basis == LP_QUALITY_UNTESTED)
            agreement_test(&out->annotators[j], diff[j], diff_se[j], out);
    }
    if (rc == LP_OK)
        rc = holm(out);
    shared_free(&s);
    free(own);
    free(diff);
    free(diff_se);
    if (rc != LP_OK)
        lp_quality_report_clear(out);
    return rc;
}

void lp_quality_report_clear(lp_quality_report *r)
{
    if (r == NULL)
        return;
    free(r->annotators);
    memset(r, 0, sizeof *r);
}

/* ---- planning ---- */

double lp_quality_pairs_needed(double epsilon, double width, double agreement)
{
    double c2 = lp_rr_debias(epsilon) * lp_rr_debias(epsilon);
    double rho = isnan(agreement) ? 0.0 : 2.0 * clamp01(agreement) - 1.0;
    return ceil(LP_QUALITY_Z * LP_QUALITY_Z * (c2 * c2 - rho * rho) / (4.0 * width * width));
}

double lp_quality_gold_needed(double epsilon, double width, double accuracy)
{
    double a = isnan(accuracy) ? 0.5 : clamp01(accuracy);
    return ceil(LP_QUALITY_Z * LP_QUALITY_Z * (a * (1.0 - a) + rr_extra_variance(epsilon)) /
                (width * width));
}
