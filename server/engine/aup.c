/* aup.c — AUP-RLHF, user-level label DP training. See aup.h and
 * docs/privacy-mechanisms.md. */
#include "aup.h"

#include "error.h"
#include "rr.h"
#include "wire.h"

#include <cblas.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

/* ---- samplers ----------------------------------------------------------- */

double lp_aup_uniform(lp_rand64 r, void *st)
{
    return (double)((r(st) >> 11) + 1) * 0x1p-53; /* (0, 1]: log() is finite */
}

double lp_aup_laplace(double b, lp_rand64 r, void *st)
{
    uint64_t x = r(st);
    double u = (double)((x >> 11) + 1) * 0x1p-53;
    return (x & 1 ? -b : b) * -log(u);
}

double lp_aup_normal(lp_rand64 r, void *st)
{
    double u1 = lp_aup_uniform(r, st), u2 = lp_aup_uniform(r, st);
    return sqrt(-2.0 * log(u1)) * cos(2.0 * M_PI * u2);
}

/* ---- calibration ---------------------------------------------------------- */

/* Chernoff: P(Z >= k) <= e^-mu (e mu / k)^k for a sum of independent
 * Bernoullis with mean <= mu < k (1 otherwise). */
static double tail_bound(double mu, int k)
{
    if (k <= mu)
        return 1.0;
    return exp(-mu + k * (1.0 + log(mu / k)));
}

/* Failure probability of a pass on data whose score is below 2n/3: the
 * noises must close a gap of 2n/15 (query noise on T steps, threshold
 * noise once). */
static double gap_failure(size_t n, int steps, double b_threshold, double b_query)
{
    double gap = 2.0 * (double)n / 15.0;
    return steps * 0.5 * exp(-gap / (2 * b_query)) + 0.5 * exp(-gap / (2 * b_threshold));
}

int lp_aup_calibrate(double eps, double delta, size_t n, int steps, double tau, lp_aup_calib *c,
                     char *msg, size_t msglen)
{
    memset(c, 0, sizeof *c);
    if (!(eps > 0) || !isfinite(eps))
        return lp_fail(LP_EINVALID_ARGUMENT, msg, msglen,
                       "aup needs a finite epsilon > 0 (a release with epsilon = infinity "
                       "would have no privacy guarantee)");
    if (!(delta > 0) || !(delta < 1))
        return lp_fail(LP_EINVALID_ARGUMENT, msg, msglen, "aup needs delta in (0, 1)");
    if (!(tau > 0) || !isfinite(tau) || steps < 1)
        return lp_fail(LP_EINVALID_ARGUMENT, msg, msglen, "aup needs tau > 0 and steps >= 1");
    c->epsilon = eps;
    c->delta = delta;
    c->n = n;
    c->steps = steps;
    c->tau = tau;
    c->mu = 6.0;
    c->score_sens = 2.0;
    c->b_threshold = 2.0 * c->score_sens / (eps / 2);
    c->b_query = 4.0 * c->score_sens / (eps / 2);
    c->threshold = 0.8 * (double)n;
    c->delta_convert = delta / 2;
    c->delta_fail = delta / 2;
    c->delta_tail = delta / 4;
    c->delta_gap = gap_failure(n, steps, c->b_threshold, c->b_query);
    if (c->delta_gap > c->delta_fail / 2 || n < 3) {
        size_t need = n < 3 ? 3 : n;
        while (gap_failure(need, steps, c->b_threshold, c->b_query) > c->delta_fail / 2)
            need += need / 8 + 1;
        return lp_fail(LP_EINVALID_ARGUMENT, msg, msglen,
                       "aup: %zu annotators per step are too few for epsilon %g, delta %g and "
                       "%d steps (the concentration test needs about %zu)",
                       n, eps, delta, steps, need);
    }
    int z = 0;
    while (steps * tail_bound(c->mu, z + 1) > c->delta_tail)
        z++;
    c->z_max = z;
    c->a_min = ceil(2.0 * (double)n / 3.0) - 1.0 - z;
    if (c->a_min < 1)
        return lp_fail(LP_EINVALID_ARGUMENT, msg, msglen,
                       "aup: %zu annotators per step are too few (need more than %d)", n,
                       3 * (z + 2));
    c->sensitivity = 4.0 * tau * (2.0 + z) / c->a_min;
    double L = log(1.0 / c->delta_convert), s = sqrt(L + eps / 2) - sqrt(L);
    c->rho = s * s;
    c->sigma = c->sensitivity * sqrt((double)steps / (2.0 * c->rho));
    return LP_OK;
}

/* ---- the oracle's parts --------------------------------------------------- */

double lp_aup_keep_prob(size_t f, size_t n)
{
    double x = (double)f, h = (double)n / 2.0;
    if (x < h)
        return 0.0;
    if (x >= 2.0 * (double)n / 3.0)
        return 1.0;
    return (x - h) / ((double)n / 6.0);
}

void lp_aup_neighbours(const double *g, size_t n, size_t d, double tau, size_t *near, size_t *far,
                       double *work)
{
    double *sq = work, *dot = work + n, t1 = tau * tau, t2 = 4.0 * tau * tau;
    for (size_t i = 0; i < n; i++)
        sq[i] = cblas_ddot((int)d, g + i * d, 1, g + i * d, 1);
    for (size_t r = 0; r < n; r += LP_AUP_BLOCK) {
        size_t b = n - r < LP_AUP_BLOCK ? n - r : LP_AUP_BLOCK;
        cblas_dgemm(CblasRowMajor, CblasNoTrans, CblasTrans, (int)b, (int)n, (int)d, 1.0, g + r * d,
                    (int)d, g, (int)d, 0.0, dot, (int)n);
        for (size_t i = 0; i < b; i++) {
            size_t c1 = 0, c2 = 0;
            for (size_t j = 0; j < n; j++) {
                double v = r + i == j ? 0.0 : sq[r + i] + sq[j] - 2.0 * dot[i * n + j];
                c1 += v <= t1;
                c2 += v <= t2;
            }
            near[r + i] = c1;
            far[r + i] = c2;
        }
    }
}

double lp_aup_concentration(const size_t *near, size_t n)
{
    size_t c = 0;
    for (size_t i = 0; i < n; i++)
        c += near[i];
    return (double)c / (double)n;
}

void lp_above_threshold_init(lp_above_threshold *at, double threshold, double b_threshold,
                             double b_query, lp_rand64 r, void *st)
{
    at->noisy_threshold = threshold - lp_aup_laplace(b_threshold, r, st);
    at->b_query = b_query;
}

int lp_above_threshold_test(const lp_above_threshold *at, double q, lp_rand64 r, void *st)
{
    return q + lp_aup_laplace(at->b_query, r, st) >= at->noisy_threshold;
}

size_t lp_aup_remove_outliers(const size_t *f, size_t n, unsigned char *keep, lp_rand64 r, void *st)
{
    size_t kept = 0;
    for (size_t i = 0; i < n; i++) {
        int b = 0;
        lp_bernoulli_from(lp_aup_keep_prob(f[i], n), r, st, &b);
        keep[i] = (unsigned char)b;
        kept += (size_t)b;
    }
    return kept;
}

/* ---- training --------------------------------------------------------- */

void lp_aup_opts_init(lp_aup_opts *o)
{
    memset(o, 0, sizeof *o);
    lp_loss_spec_init(&o->loss, LP_LOSS_SQUARE_CHIPO);
    o->beta = 1.0;
    o->steps = 100;
    o->lr = 1.0;
    o->norm_bound = 10.0;
    o->tau_scale = 2.0;
}

/* Rows grouped by annotator: users ordered by id, each user's rows in
 * dataset order and cut to the first cap. */
typedef struct groups {
    size_t nu, used, *rows, *start; /* start[nu+1] offsets into rows */
} groups;

typedef struct keyed_row {
    int64_t user;
    size_t row;
} keyed_row;

static int cmp_row(const void *a, const void *b)
{
    const keyed_row *x = a, *y = b;
    if (x->user != y->user)
        return x->user < y->user ? -1 : 1;
    return (x->row > y->row) - (x->row < y->row);
}

static int group_rows(const lp_dataset *ds, const int64_t *user, size_t cap, groups *g)
{
    size_t n = ds->n;
    keyed_row *kr = malloc((n ? n : 1) * sizeof *kr);
    g->rows = malloc((n ? n : 1) * sizeof *g->rows);
    g->start = malloc((n + 1) * sizeof *g->start);
    if (kr == NULL || g->rows == NULL || g->start == NULL) {
        free(kr);
        return LP_ENO_MEMORY;
    }
    for (size_t i = 0; i < n; i++)
        kr[i] = (keyed_row){user ? user[i] : (int64_t)i, i};
    if (user != NULL)
        qsort(kr, n, sizeof *kr, cmp_row);
    size_t w = 0, nu = 0;
    for (size_t i = 0; i < n;) {
        size_t j = i + 1;
        while (j < n && kr[j].user == kr[i].user)
            j++;
        size_t take = cap && j - i > cap ? cap : j - i;
        g->start[nu++] = w;
        for (size_t k = 0; k < take; k++)
            g->rows[w++] = kr[i + k].row;
        i = j;
    }
    g->start[nu] = w;
    g->nu = nu;
    g->used = w;
    free(kr);
    return LP_OK;
}

/* out += a * df_i. */
static void row_axpy(const lp_dataset *ds, size_t i, double a, double *out)
{
    size_t d = ds->d;
    if (ds->storage == LP_STORE_F32)
        for (size_t j = 0; j < d; j++)
            out[j] += a * (double)ds->xf[i * d + j];
    else if (ds->storage == LP_STORE_F64)
        for (size_t j = 0; j < d; j++)
            out[j] += a * ds->xd[i * d + j];
    else
        for (size_t k = ds->rowptr[i]; k < ds->rowptr[i + 1]; k++)
            out[ds->col[k]] += a * ds->val[k];
}

static double row_norm(const lp_dataset *ds, size_t i)
{
    double s = 0;
    size_t d = ds->d;
    if (ds->storage == LP_STORE_F32)
        for (size_t j = 0; j < d; j++)
            s += (double)ds->xf[i * d + j] * ds->xf[i * d + j];
    else if (ds->storage == LP_STORE_F64)
        for (size_t j = 0; j < d; j++)
            s += ds->xd[i * d + j] * ds->xd[i * d + j];
    else
        for (size_t k = ds->rowptr[i]; k < ds->rowptr[i + 1]; k++)
            s += ds->val[k] * ds->val[k];
    return sqrt(s);
}

/* Bound on |dloss/dmargin| over margins and both labels (a scan; the
 * losses' derivatives are smooth and bounded). */
static double loss_slope_bound(const lp_loss_spec *s, double eps)
{
    lp_label_consts k;
    lp_label_consts_from_eps(eps, &k);
    double best = 0;
    for (int t = -4000; t <= 4000; t++)
        for (int z = -1; z <= 1; z += 2) {
            double dl;
            lp_loss_point(s, t * 0.005, z, &k, &dl);
            best = fmax(best, fabs(dl));
        }
    return best * 1.01;
}

/* The mean of user u's label gradients at theta into g. */
static void user_gradient(const lp_dataset *ds, const groups *gr, size_t u, const lp_loss_spec *s,
                          const double *theta, double *g)
{
    memset(g, 0, ds->d * sizeof *g);
    size_t a = gr->start[u], b = gr->start[u + 1];
    for (size_t k = a; k < b; k++) {
        size_t i = gr->rows[k];
        lp_label_consts c;
        lp_label_consts_from_eps(ds->eps[i], &c);
        double dl;
        lp_loss_point(s, lp_dataset_row_dot(ds, i, theta), 2 * ds->z[i] - 1, &c, &dl);
        row_axpy(ds, i, dl / (double)(b - a), g);
    }
}

/* Draws k of n indices uniformly without replacement into the front of
 * perm (a partial Fisher-Yates shuffle; perm holds a permutation). */
static void sample_users(size_t *perm, size_t n, size_t k, lp_rand64 r, void *st)
{
    for (size_t i = 0; i < k; i++) {
        uint64_t span = n - i, lim = UINT64_MAX - UINT64_MAX % span, x;
        do
            x = r(st);
        while (x >= lim);
        size_t j = i + (size_t)(x % span), t = perm[i];
        perm[i] = perm[j];
        perm[j] = t;
    }
}

typedef struct run_state {
    const lp_dataset *ds;
    const lp_aup_opts *o;
    groups gr;
    lp_aup_calib cal;
    size_t nb;    /* users per step */
    double *G;    /* nb x d user gradients */
    double *work; /* nb + LP_AUP_BLOCK nb */
    size_t *near, *f, *perm;
    unsigned char *keep;
    double *theta, *avg, *step;
    int steps_run, halted_at;
    size_t kept_min, kept_max;
} run_state;

static int run_steps(run_state *s)
{
    const lp_aup_opts *o = s->o;
    size_t d = s->ds->d, nb = s->nb;
    lp_above_threshold at;
    lp_above_threshold_init(&at, s->cal.threshold, s->cal.b_threshold, s->cal.b_query, o->rand64,
                            o->rand_state);
    s->kept_min = SIZE_MAX;
    for (int t = 1; t <= o->steps; t++) {
        if (nb < s->gr.nu)
            sample_users(s->perm, s->gr.nu, nb, o->rand64, o->rand_state);
        for (size_t b = 0; b < nb; b++)
            user_gradient(s->ds, &s->gr, s->perm[b], &o->loss, s->theta, s->G + b * d);
        lp_aup_neighbours(s->G, nb, d, s->cal.tau, s->near, s->f, s->work);
        double score = lp_aup_concentration(s->near, nb);
        if (!lp_above_threshold_test(&at, score, o->rand64, o->rand_state)) {
            s->halted_at = t;
            break;
        }
        size_t kept = lp_aup_remove_outliers(s->f, nb, s->keep, o->rand64, o->rand_state);
        s->kept_min = kept < s->kept_min ? kept : s->kept_min;
        s->kept_max = kept > s->kept_max ? kept : s->kept_max;
        memset(s->step, 0, d * sizeof *s->step);
        for (size_t b = 0; kept && b < nb; b++)
            if (s->keep[b])
                for (size_t j = 0; j < d; j++)
                    s->step[j] += s->G[b * d + j] / (double)kept;
        double norm = 0;
        for (size_t j = 0; j < d; j++) {
            s->theta[j] -=
                o->lr * (s->step[j] + s->cal.sigma * lp_aup_normal(o->rand64, o->rand_state));
            norm += s->theta[j] * s->theta[j];
        }
        norm = sqrt(norm);
        for (size_t j = 0; norm > o->norm_bound && j < d; j++)
            s->theta[j] *= o->norm_bound / norm;
        for (size_t j = 0; j < d; j++)
            s->avg[j] += s->theta[j];
        s->steps_run = t;
    }
    for (size_t j = 0; s->steps_run && j < d; j++)
        s->avg[j] /= s->steps_run;
    if (s->kept_min == SIZE_MAX)
        s->kept_min = 0;
    return LP_OK;
}

static json_t *release_json(const run_state *s, size_t m_eff, double G)
{
    const lp_aup_calib *c = &s->cal;
    const lp_aup_opts *o = s->o;
    json_t *r = json_object();
    json_object_set_new(r, "mechanism", json_string("aup"));
    json_object_set_new(r, "epsilon", json_real(c->epsilon));
    json_object_set_new(r, "delta", json_real(c->delta));
    json_object_set_new(r, "randomness",
                        json_string(o->rand64 == lp_csprng_next64
                                        ? "os-csprng"
                                        : "caller-supplied (seeded: research, "
                                          "not private)"));
    json_object_set_new(r, "unit", json_string("annotator"));
    json_object_set_new(r, "neighbours", json_string("one annotator's labels changed"));
    json_object_set_new(r, "user_cap", json_integer((json_int_t)o->user_cap));
    json_object_set_new(r, "annotators", json_integer((json_int_t)s->gr.nu));
    json_object_set_new(r, "labels_used", json_integer((json_int_t)s->gr.used));
    json_object_set_new(r, "loss", json_string(lp_loss_name(o->loss.kind)));
    json_object_set_new(r, "steps", json_integer(o->steps));
    json_object_set_new(r, "steps_run", json_integer(s->steps_run));
    json_object_set_new(r, "halted_at", s->halted_at ? json_integer(s->halted_at) : json_null());
    json_object_set_new(r, "batch", json_integer((json_int_t)s->nb));
    json_object_set_new(r, "lr", json_real(o->lr));
    json_object_set_new(r, "norm_bound", json_real(o->norm_bound));
    json_object_set_new(r, "tau", json_real(c->tau));
    json_object_set_new(r, "tau_m", json_integer((json_int_t)m_eff));
    json_object_set_new(r, "label_gradient_scale", json_real(G));
    json_object_set_new(r, "threshold", json_real(c->threshold));
    json_object_set_new(r, "laplace_threshold_scale", json_real(c->b_threshold));
    json_object_set_new(r, "laplace_query_scale", json_real(c->b_query));
    json_object_set_new(r, "z_max", json_integer(c->z_max));
    json_object_set_new(r, "a_min", json_real(c->a_min));
    json_object_set_new(r, "sensitivity", json_real(c->sensitivity));
    json_object_set_new(r, "rho", json_real(c->rho));
    json_object_set_new(r, "sigma", json_real(c->sigma));
    json_object_set_new(r, "failure_delta", json_real(c->delta_fail));
    json_object_set_new(r, "calibration",
                        json_string("docs/privacy-mechanisms.md#aup-rlhf-user-level"));
    return r;
}

static void run_free(run_state *s)
{
    free(s->gr.rows);
    free(s->gr.start);
    free(s->G);
    free(s->work);
    free(s->near);
    free(s->f);
    free(s->perm);
    free(s->keep);
    free(s->theta);
    free(s->step);
    free(s->avg);
}

/* The model around theta: options, the data summary without the
 * label-dependent statistics (they are not covered by the release). */
static lp_model *new_model(const run_state *s, json_t *release)
{
    lp_model *m = calloc(1, sizeof *m);
    if (m == NULL)
        return NULL;
    const lp_aup_opts *o = s->o;
    m->loss = o->loss;
    m->link = lp_loss_default_link(o->loss.kind);
    m->beta = o->beta;
    lp_fit_opts_init(&m->fit, LP_OPT_SGD);
    m->fit.lr = o->lr;
    m->fit.epochs = o->steps;
    m->fit.norm_bound = o->norm_bound;
    m->threads = 1;
    m->precision = lp_storage_name(s->ds->storage);
    m->d = s->ds->d;
    m->theta = s->avg;
    m->n = s->ds->n;
    m->n_bins = lp_dataset_eps_hist(s->ds, m->bins, LP_MODEL_EPS_BINS, &m->n_eps_other);
    m->rw_margins = m->rw_accuracy = NAN;
    m->res.objective = m->res.grad_norm = NAN;
    double nn = 0;
    for (size_t j = 0; j < m->d; j++)
        nn += m->theta[j] * m->theta[j];
    m->res.theta_norm = sqrt(nn);
    m->res.iterations = s->steps_run;
    m->res.bound_active = m->res.theta_norm >= 0.99 * o->norm_bound;
    snprintf(m->res.status, sizeof m->res.status, "%s", s->halted_at ? "halted" : "completed");
    m->release = release;
    return m;
}

int lp_aup_release(const lp_dataset *ds, const int64_t *user, const lp_aup_opts *o, lp_model **out,
                   char *msg, size_t msglen)
{
    *out = NULL;
    lp_loss_kind k = o->loss.kind;
    if (k != LP_LOSS_SQUARE_CHIPO && k != LP_LOSS_CHIPO && k != LP_LOSS_DPO)
        return lp_fail(LP_EINVALID_ARGUMENT, msg, msglen,
                       "aup trains square-chipo, chipo or dpo (got %s)", lp_loss_name(k));
    if (o->rand64 == NULL || o->steps < 1 || !(o->lr > 0) || !(o->norm_bound > 0) ||
        !(o->tau >= 0) || !(o->tau_scale > 0) || ds == NULL || ds->n == 0)
        return lp_fail(LP_EINVALID_ARGUMENT, msg, msglen,
                       "aup needs data, a random source, steps >= 1, lr > 0, norm bound > 0, "
                       "tau >= 0 and tau scale > 0");
    if (!(o->epsilon > 0) || !isfinite(o->epsilon))
        return lp_aup_calibrate(o->epsilon, o->delta, 0, 1, 1, &(lp_aup_calib){0}, msg, msglen);
    run_state s = {.ds = ds, .o = o};
    size_t d = ds->d;
    int rc = group_rows(ds, user, o->user_cap, &s.gr);
    if (rc != LP_OK) {
        run_free(&s);
        return lp_fail(rc, msg, msglen, "out of memory");
    }
    /* tau from public quantities: the feature norms (their root mean
     * square), the loss's slope, the fewest labels an annotator gives */
    double x2 = 0, eps_min = INFINITY;
    for (size_t i = 0; i < ds->n; i++) {
        double r = row_norm(ds, i);
        x2 += r * r;
        eps_min = fmin(eps_min, ds->eps[i]);
    }
    size_t m_eff = SIZE_MAX;
    for (size_t u = 0; u < s.gr.nu; u++)
        if (s.gr.start[u + 1] - s.gr.start[u] < m_eff)
            m_eff = s.gr.start[u + 1] - s.gr.start[u];
    double G = loss_slope_bound(&o->loss, eps_min) * sqrt(x2 / (double)ds->n);
    double tau = o->tau > 0 ? o->tau : o->tau_scale * G / sqrt((double)m_eff);
    if (!(tau > 0))
        tau = 1e-12; /* all-zero features: any radius */
    s.nb = o->batch && o->batch < s.gr.nu ? o->batch : s.gr.nu;
    rc = lp_aup_calibrate(o->epsilon, o->delta, s.nb, o->steps, tau, &s.cal, msg, msglen);
    if (rc != LP_OK) {
        run_free(&s);
        return rc;
    }
    s.G = malloc(s.nb * d * sizeof *s.G);
    s.work = malloc((1 + LP_AUP_BLOCK) * s.nb * sizeof *s.work);
    s.near = malloc(s.nb * sizeof *s.near);
    s.f = malloc(s.nb * sizeof *s.f);
    s.keep = malloc(s.nb);
    s.perm = malloc(s.gr.nu * sizeof *s.perm);
    s.theta = calloc(d, sizeof *s.theta);
    s.step = calloc(d, sizeof *s.step);
    s.avg = calloc(d, sizeof *s.avg);
    if (!s.G || !s.work || !s.near || !s.f || !s.keep || !s.perm || !s.theta || !s.step || !s.avg) {
        run_free(&s);
        return lp_fail(LP_ENO_MEMORY, msg, msglen, "out of memory");
    }
    for (size_t u = 0; u < s.gr.nu; u++)
        s.perm[u] = u;
    run_steps(&s);
    json_t *rel = release_json(&s, m_eff, G);
    lp_model *m = rel ? new_model(&s, rel) : NULL;
    if (m == NULL) {
        json_decref(rel);
        run_free(&s);
        return lp_fail(LP_ENO_MEMORY, msg, msglen, "out of memory");
    }
    s.avg = NULL; /* owned by the model */
    run_free(&s);
    *out = m;
    return LP_OK;
}

int lp_aup_release_from(const lp_dataset *ds, const int64_t *user, const lp_release_opts *o,
                        lp_model **out, char *msg, size_t msglen)
{
    if (o->rand64 == lp_csprng_next64 && lp_rng_init() != LP_OK)
        return lp_fail(LP_ERNG, msg, msglen, "the OS random source is unavailable");
    lp_aup_opts ao;
    lp_aup_opts_init(&ao);
    ao.epsilon = o->epsilon;
    ao.delta = o->delta;
    ao.user_cap = o->user_cap;
    ao.loss.rmax = o->rmax;
    ao.beta = o->beta;
    ao.rand64 = o->rand64;
    ao.rand_state = o->rand_state;
    if (o->steps > 0)
        ao.steps = o->steps;
    if (o->lr > 0)
        ao.lr = o->lr;
    if (o->norm_bound > 0)
        ao.norm_bound = o->norm_bound;
    if (o->tau > 0)
        ao.tau = o->tau;
    ao.batch = o->batch;
    return lp_aup_release(ds, user, &ao, out, msg, msglen);
}
