/* general.c — iterative Square chi-PO for general preferences. See general.h. */
#include "general.h"

#include "dataset.h"
#include "error.h"
#include "losses.h"
#include "model.h"
#include "policy.h"
#include "wire.h"

#include <stdio.h>

#include <lbfgs.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#define CLIP_F 4.0 /* clip_4 of the policy regression (Algorithm 3) */

/* ------------------------------------------------------------------ */
/* pair features                                                       */

size_t lp_gp_pair_dim(size_t d)
{
    return d <= LP_GP_EXACT_MAX ? d + d * (d - 1) / 2 : d + LP_GP_CROSS_HASH;
}

static uint64_t mix64(uint64_t x)
{
    x ^= x >> 30;
    x *= 0xbf58476d1ce4e5b9ULL;
    x ^= x >> 27;
    x *= 0x94d049bb133111ebULL;
    return x ^ (x >> 31);
}

/* Slot and sign of the cross feature of the unordered pair j < k. */
static size_t cross_slot(size_t d, size_t j, size_t k, double *sign)
{
    if (d <= LP_GP_EXACT_MAX) {
        *sign = 1.0;
        return d + j * (2 * d - j - 1) / 2 + (k - j - 1);
    }
    uint64_t h = mix64(((uint64_t)j << 32) ^ (uint64_t)k ^ 0x7061697273ULL);
    *sign = (h >> 63) ? -1.0 : 1.0;
    return d + (size_t)(h % LP_GP_CROSS_HASH);
}

static int sparse_reserve(lp_sparse *v, size_t n)
{
    if (v->cap >= n)
        return LP_OK;
    uint32_t *idx = realloc(v->idx, n * sizeof *idx);
    if (idx != NULL)
        v->idx = idx;
    double *val = realloc(v->val, n * sizeof *val);
    if (val != NULL)
        v->val = val;
    if (idx == NULL || val == NULL)
        return LP_ENO_MEMORY;
    v->cap = n;
    return LP_OK;
}

int lp_gp_pair_features(size_t d, const lp_sparse *fa, const lp_sparse *fb, lp_sparse *out)
{
    size_t p = lp_gp_pair_dim(d);
    double *acc = calloc(p, sizeof *acc);
    if (acc == NULL)
        return LP_ENO_MEMORY;
    for (size_t i = 0; i < fa->nnz; i++)
        acc[fa->idx[i]] += fa->val[i];
    for (size_t i = 0; i < fb->nnz; i++)
        acc[fb->idx[i]] -= fb->val[i];
    /* pair {u < v}: f_a,u f_b,v - f_a,v f_b,u; a term f_a,j f_b,k is the
     * first of {j, k} when j < k and the second when j > k. */
    for (size_t i = 0; i < fa->nnz; i++)
        for (size_t k = 0; k < fb->nnz; k++) {
            size_t ja = fa->idx[i], kb = fb->idx[k];
            if (ja == kb)
                continue;
            double s, x = fa->val[i] * fb->val[k];
            size_t slot = ja < kb ? cross_slot(d, ja, kb, &s) : cross_slot(d, kb, ja, &s);
            acc[slot] += ja < kb ? s * x : -s * x;
        }
    size_t nnz = 0;
    for (size_t j = 0; j < p; j++)
        nnz += acc[j] != 0.0;
    int rc = sparse_reserve(out, nnz ? nnz : 1);
    out->nnz = 0;
    for (size_t j = 0; j < p && rc == LP_OK; j++)
        if (acc[j] != 0.0) {
            out->idx[out->nnz] = (uint32_t)j;
            out->val[out->nnz++] = acc[j];
        }
    free(acc);
    return rc;
}

static double sparse_dot(const lp_sparse *f, const double *w)
{
    double s = 0.0;
    for (size_t k = 0; k < f->nnz; k++)
        s += w[f->idx[k]] * f->val[k];
    return s;
}

static double clip(double x, double r)
{
    return x > r ? r : x < -r ? -r : x;
}

/* ------------------------------------------------------------------ */
/* data                                                                */

typedef struct gp_prompt {
    uint64_t key;
    size_t K;
    size_t cand[LP_GP_MAX_K]; /* response indices */
} gp_prompt;

struct lp_gp_data {
    size_t d;
    lp_sparse *resp; /* responses */
    uint64_t *resp_hash;
    size_t n_resp, cap_resp;
    gp_prompt *prompts;
    size_t n_prompts, cap_prompts;
    size_t *table; /* open addressing: prompt index + 1, 0 empty */
    size_t table_size;
    size_t *a1, *a0; /* labels: response indices */
    uint8_t *z;
    double *eps;
    size_t n, cap;
};

lp_gp_data *lp_gp_data_new(size_t d)
{
    if (d < 1)
        return NULL;
    lp_gp_data *g = calloc(1, sizeof *g);
    if (g != NULL)
        g->d = d;
    return g;
}

void lp_gp_data_free(lp_gp_data *g)
{
    if (g == NULL)
        return;
    for (size_t i = 0; i < g->n_resp; i++)
        lp_sparse_free(&g->resp[i]);
    free(g->resp);
    free(g->resp_hash);
    free(g->prompts);
    free(g->table);
    free(g->a1);
    free(g->a0);
    free(g->z);
    free(g->eps);
    free(g);
}

size_t lp_gp_data_labels(const lp_gp_data *g)
{
    return g->n;
}

size_t lp_gp_data_dim(const lp_gp_data *g)
{
    return g->d;
}

size_t lp_gp_data_prompts(const lp_gp_data *g)
{
    return g->n_prompts;
}

size_t lp_gp_data_playable(const lp_gp_data *g)
{
    size_t k = 0;
    for (size_t p = 0; p < g->n_prompts; p++)
        k += g->prompts[p].K >= 2;
    return k;
}

static int grow(void **buf, size_t *cap, size_t need, size_t elem)
{
    if (need <= *cap)
        return LP_OK;
    size_t nc = *cap ? 2 * *cap : 64;
    while (nc < need)
        nc *= 2;
    void *b = realloc(*buf, nc * elem);
    if (b == NULL)
        return LP_ENO_MEMORY;
    *buf = b;
    *cap = nc;
    return LP_OK;
}

/* The index of the prompt with key, created when new; SIZE_MAX on no memory. */
static size_t prompt_index(lp_gp_data *g, uint64_t key)
{
    if (2 * (g->n_prompts + 1) > g->table_size) { /* rehash at half load */
        size_t ns = g->table_size ? 2 * g->table_size : 256;
        size_t *t = calloc(ns, sizeof *t);
        if (t == NULL)
            return SIZE_MAX;
        for (size_t p = 0; p < g->n_prompts; p++) {
            size_t h = (size_t)mix64(g->prompts[p].key) & (ns - 1);
            while (t[h] != 0)
                h = (h + 1) & (ns - 1);
            t[h] = p + 1;
        }
        free(g->table);
        g->table = t;
        g->table_size = ns;
    }
    size_t h = (size_t)mix64(key) & (g->table_size - 1);
    while (g->table[h] != 0) {
        if (g->prompts[g->table[h] - 1].key == key)
            return g->table[h] - 1;
        h = (h + 1) & (g->table_size - 1);
    }
    size_t cap = g->cap_prompts;
    if (grow((void **)&g->prompts, &cap, g->n_prompts + 1, sizeof *g->prompts) != LP_OK)
        return SIZE_MAX;
    g->cap_prompts = cap;
    g->prompts[g->n_prompts].key = key;
    g->prompts[g->n_prompts].K = 0;
    g->table[h] = ++g->n_prompts;
    return g->n_prompts - 1;
}

static uint64_t sparse_hash(const lp_sparse *f)
{
    uint64_t h = 0xcbf29ce484222325ULL;
    for (size_t k = 0; k < f->nnz; k++) {
        uint64_t bits;
        memcpy(&bits, &f->val[k], sizeof bits);
        h = mix64(h ^ f->idx[k]) ^ bits;
    }
    return mix64(h);
}

static int sparse_equal(const lp_sparse *a, const lp_sparse *b)
{
    return a->nnz == b->nnz && memcmp(a->idx, b->idx, a->nnz * sizeof *a->idx) == 0 &&
           memcmp(a->val, b->val, a->nnz * sizeof *a->val) == 0;
}

/* The candidate of prompt p with features f (added when new). */
static int candidate(lp_gp_data *g, size_t p, const lp_sparse *f, size_t *out)
{
    gp_prompt *pr = &g->prompts[p];
    uint64_t h = sparse_hash(f);
    for (size_t k = 0; k < pr->K; k++) {
        size_t r = pr->cand[k];
        if (g->resp_hash[r] == h && sparse_equal(&g->resp[r], f)) {
            *out = r;
            return LP_OK;
        }
    }
    if (pr->K >= LP_GP_MAX_K)
        return LP_EINVALID_ARGUMENT;
    size_t cap = g->cap_resp;
    if (grow((void **)&g->resp, &cap, g->n_resp + 1, sizeof *g->resp) != LP_OK)
        return LP_ENO_MEMORY;
    size_t cap2 = g->cap_resp;
    if (grow((void **)&g->resp_hash, &cap2, g->n_resp + 1, sizeof *g->resp_hash) != LP_OK)
        return LP_ENO_MEMORY;
    g->cap_resp = cap < cap2 ? cap : cap2;
    lp_sparse *c = &g->resp[g->n_resp];
    memset(c, 0, sizeof *c);
    if (sparse_reserve(c, f->nnz ? f->nnz : 1) != LP_OK)
        return LP_ENO_MEMORY;
    memcpy(c->idx, f->idx, f->nnz * sizeof *c->idx);
    memcpy(c->val, f->val, f->nnz * sizeof *c->val);
    c->nnz = f->nnz;
    g->resp_hash[g->n_resp] = h;
    pr->cand[pr->K++] = g->n_resp;
    *out = g->n_resp++;
    return LP_OK;
}

int lp_gp_data_add(lp_gp_data *g, uint64_t prompt, const lp_sparse *f0, const lp_sparse *f1, int z,
                   double eps)
{
    if ((z != 0 && z != 1) || !(eps > 0.0))
        return LP_EINVALID_ARGUMENT;
    for (size_t k = 0; k < f0->nnz; k++)
        if (f0->idx[k] >= g->d || !isfinite(f0->val[k]))
            return LP_EINVALID_ARGUMENT;
    for (size_t k = 0; k < f1->nnz; k++)
        if (f1->idx[k] >= g->d || !isfinite(f1->val[k]))
            return LP_EINVALID_ARGUMENT;
    size_t p = prompt_index(g, prompt);
    if (p == SIZE_MAX)
        return LP_ENO_MEMORY;
    size_t r0, r1;
    int rc = candidate(g, p, f0, &r0);
    if (rc == LP_OK)
        rc = candidate(g, p, f1, &r1);
    if (rc != LP_OK)
        return rc;
    size_t c1 = g->cap, c2 = g->cap, c3 = g->cap, c4 = g->cap;
    if (grow((void **)&g->a1, &c1, g->n + 1, sizeof *g->a1) != LP_OK ||
        grow((void **)&g->a0, &c2, g->n + 1, sizeof *g->a0) != LP_OK ||
        grow((void **)&g->z, &c3, g->n + 1, sizeof *g->z) != LP_OK ||
        grow((void **)&g->eps, &c4, g->n + 1, sizeof *g->eps) != LP_OK)
        return LP_ENO_MEMORY;
    g->cap = c1;
    g->a1[g->n] = r1;
    g->a0[g->n] = r0;
    g->z[g->n] = (uint8_t)z;
    g->eps[g->n] = eps;
    g->n++;
    return LP_OK;
}

/* Dense vector as sparse (nonzeros only) into *out. */
static int dense_to_sparse(const double *x, size_t d, lp_sparse *out)
{
    if (sparse_reserve(out, d) != LP_OK)
        return LP_ENO_MEMORY;
    out->nnz = 0;
    for (size_t j = 0; j < d; j++)
        if (x[j] != 0.0) {
            out->idx[out->nnz] = (uint32_t)j;
            out->val[out->nnz++] = x[j];
        }
    return LP_OK;
}

int lp_gp_data_add_dense(lp_gp_data *g, uint64_t prompt, const double *x0, const double *x1, int z,
                         double eps)
{
    lp_sparse s0 = {0}, s1 = {0};
    int rc = dense_to_sparse(x0, g->d, &s0);
    if (rc == LP_OK)
        rc = dense_to_sparse(x1, g->d, &s1);
    if (rc == LP_OK)
        rc = lp_gp_data_add(g, prompt, &s0, &s1, z, eps);
    lp_sparse_free(&s0);
    lp_sparse_free(&s1);
    return rc;
}

/* ------------------------------------------------------------------ */
/* the policy regression of one round                                 */

typedef struct round_rows {
    size_t n, d;
    const lp_dataset *df; /* rows f_a - f_b (CSR) */
    const double *base;   /* theta_t^T df */
    const double *target; /* rhat(a) - rhat(b) */
    const double *theta_t;
    double kappa, l2;
} round_rows;

/* G(u) = (1/n) sum (clip_4(base + u^T df) - y)^2 + (l2/n) ||theta_t + u/kappa||^2. */
static lbfgsfloatval_t round_eval(void *inst, const lbfgsfloatval_t *u, lbfgsfloatval_t *grad,
                                  const int n, const lbfgsfloatval_t step)
{
    (void)step;
    const round_rows *R = inst;
    const lp_dataset *ds = R->df;
    double f = 0.0, inv = 1.0 / (double)R->n;
    memset(grad, 0, (size_t)n * sizeof *grad);
    for (size_t i = 0; i < R->n; i++) {
        double m = R->base[i];
        for (size_t k = ds->rowptr[i]; k < ds->rowptr[i + 1]; k++)
            m += u[ds->col[k]] * ds->val[k];
        double c = clip(m, CLIP_F), r = c - R->target[i];
        f += r * r;
        if (fabs(m) < CLIP_F)
            for (size_t k = ds->rowptr[i]; k < ds->rowptr[i + 1]; k++)
                grad[ds->col[k]] += 2.0 * r * ds->val[k] * inv;
    }
    f *= inv;
    for (size_t j = 0; j < R->d; j++) {
        double th = R->theta_t[j] + u[j] / R->kappa;
        f += R->l2 * inv * th * th;
        grad[j] += 2.0 * R->l2 * inv * th / R->kappa;
    }
    return f;
}

/* Solves one round; theta_next = theta_t + u / kappa. Returns the mean
 * squared residual (without the ridge term) or NAN on no memory. */
static double solve_round(const round_rows *R, int max_iter, double *theta_next)
{
    lbfgsfloatval_t *u = lbfgs_malloc((int)R->d);
    if (u == NULL)
        return NAN;
    memset(u, 0, R->d * sizeof *u);
    lbfgs_parameter_t p;
    lbfgs_parameter_init(&p);
    p.max_iterations = max_iter;
    p.epsilon = 1e-10;
    lbfgsfloatval_t fx = 0.0;
    lbfgs((int)R->d, u, &fx, round_eval, NULL, (void *)R, &p);
    for (size_t j = 0; j < R->d; j++)
        theta_next[j] = R->theta_t[j] + u[j] / R->kappa;
    double res = 0.0;
    const lp_dataset *ds = R->df;
    for (size_t i = 0; i < R->n; i++) {
        double m = R->base[i];
        for (size_t k = ds->rowptr[i]; k < ds->rowptr[i + 1]; k++)
            m += u[ds->col[k]] * ds->val[k];
        double r = clip(m, CLIP_F) - R->target[i];
        res += r * r;
    }
    lbfgs_free(u);
    return res / (double)R->n;
}

/* ------------------------------------------------------------------ */
/* fitting                                                             */

void lp_gp_opts_init(lp_gp_opts *o)
{
    memset(o, 0, sizeof *o);
    o->rounds = LP_GP_DEFAULT_ROUNDS;
    o->max_iter = 200;
    o->threads = 1;
}

void lp_gp_model_free(lp_gp_model *m)
{
    if (m == NULL)
        return;
    free(m->w);
    free(m->theta);
    free(m);
}

double lp_gp_preference(const lp_gp_model *m, const lp_sparse *fa, const lp_sparse *fb)
{
    lp_sparse dg = {0};
    double l = 0.0;
    if (lp_gp_pair_features(m->d, fa, fb, &dg) == LP_OK)
        l = clip(sparse_dot(&dg, m->w), 1.0);
    lp_sparse_free(&dg);
    return l;
}

/* The preference fit: least squares of w^T dg(a1, a0) on c(eps) zbar. */
static int fit_preference(const lp_gp_data *g, const lp_gp_opts *o, lp_gp_model *m)
{
    lp_dataset *ds = lp_dataset_new(m->pdim, LP_STORE_CSR);
    lp_sparse dg = {0}, none = {0};
    int rc = ds ? LP_OK : LP_ENO_MEMORY;
    for (size_t i = 0; i < g->n && rc == LP_OK; i++) {
        rc = lp_gp_pair_features(g->d, &g->resp[g->a1[i]], &g->resp[g->a0[i]], &dg);
        if (rc == LP_OK)
            rc = lp_dataset_add_sparse(ds, &none, &dg, g->z[i], g->eps[i], -1, NULL, 0);
    }
    lp_sparse_free(&dg);
    lp_model *fit = NULL;
    if (rc == LP_OK) {
        lp_objective_opts oo;
        lp_objective_opts_init(&oo, LP_LOSS_IPO);
        lp_loss_spec_init(&oo.loss, LP_LOSS_IPO);
        oo.loss.tau = 0.5; /* (m - c zbar)^2: least squares on c(eps) zbar */
        oo.l2 = o->l2;
        oo.threads = o->threads;
        lp_fit_opts fo;
        lp_fit_opts_init(&fo, LP_OPT_LBFGS);
        rc = lp_model_fit(ds, &oo, &fo, 1.0, &fit);
    }
    if (rc == LP_OK) {
        m->w = fit->theta;
        fit->theta = NULL;
        m->pref_objective = fit->res.objective;
        snprintf(m->pref_status, sizeof m->pref_status, "%s", fit->res.status);
        double all = 0.0, cross = 0.0;
        for (size_t j = 0; j < m->pdim; j++) {
            all += m->w[j] * m->w[j];
            cross += j >= m->d ? m->w[j] * m->w[j] : 0.0;
        }
        m->cycle_share = all > 0.0 ? cross / all : 0.0;
    }
    lp_model_free(fit);
    lp_dataset_free(ds);
    return rc;
}

/* Per playable prompt: the clipped preference matrix over its candidates. */
typedef struct play {
    size_t prompt, K, row0; /* first regression row */
    double *L;              /* K*K */
} play;

int lp_gp_fit(const lp_gp_data *g, const lp_gp_opts *o, lp_gp_model **out)
{
    *out = NULL;
    if (o->rounds < 1 || o->rounds > LP_GP_MAX_ROUNDS || o->beta < 0.0 || o->eta < 0.0 ||
        !(o->l2 >= 0.0) || g->n == 0)
        return LP_EINVALID_ARGUMENT;
    size_t np = lp_gp_data_playable(g);
    if (np == 0)
        return LP_ENO_LABELS;
    lp_gp_model *m = calloc(1, sizeof *m);
    if (m == NULL)
        return LP_ENO_MEMORY;
    size_t d = g->d, T = (size_t)o->rounds;
    m->d = d;
    m->pdim = lp_gp_pair_dim(d);
    m->rounds = o->rounds;
    m->beta = o->beta > 0.0 ? o->beta : 1.0 / sqrt((double)T);
    m->eta = o->eta > 0.0 ? o->eta : 1.0 / (double)T;
    m->l2 = o->l2;
    m->n_labels = g->n;
    m->n_prompts = g->n_prompts;
    m->n_playable = np;
    int rc = fit_preference(g, o, m);
    if (rc != LP_OK) {
        lp_gp_model_free(m);
        return rc;
    }
    m->theta = calloc(T * d, sizeof *m->theta);
    play *pl = calloc(np, sizeof *pl);
    lp_dataset *rows = lp_dataset_new(d, LP_STORE_CSR);
    rc = m->theta && pl && rows ? LP_OK : LP_ENO_MEMORY;
    size_t k = 0;
    for (size_t p = 0; p < g->n_prompts && rc == LP_OK; p++) {
        const gp_prompt *pr = &g->prompts[p];
        if (pr->K < 2)
            continue;
        play *q = &pl[k++];
        q->prompt = p;
        q->K = pr->K;
        q->row0 = rows->n;
        q->L = malloc(pr->K * pr->K * sizeof *q->L);
        if (q->L == NULL) {
            rc = LP_ENO_MEMORY;
            break;
        }
        for (size_t a = 0; a < pr->K; a++) {
            q->L[a * pr->K + a] = 0.0;
            for (size_t b = a + 1; b < pr->K && rc == LP_OK; b++) {
                double l = lp_gp_preference(m, &g->resp[pr->cand[a]], &g->resp[pr->cand[b]]);
                q->L[a * pr->K + b] = l;
                q->L[b * pr->K + a] = -l;
                rc = lp_dataset_add_sparse(rows, &g->resp[pr->cand[b]], &g->resp[pr->cand[a]], 1,
                                           INFINITY, -1, NULL, 0);
            }
        }
    }
    size_t N = rows ? rows->n : 0;
    m->n_pairs = N;
    double *base = malloc((N ? N : 1) * sizeof *base),
           *target = malloc((N ? N : 1) * sizeof *target);
    double *s = malloc(LP_GP_MAX_K * sizeof *s), *pi = malloc(LP_GP_MAX_K * sizeof *pi);
    double *r = malloc(LP_GP_MAX_K * sizeof *r);
    if (rc == LP_OK && (!base || !target || !s || !pi || !r))
        rc = LP_ENO_MEMORY;
    for (size_t t = 0; t + 1 < T && rc == LP_OK; t++) {
        const double *th = m->theta + t * d;
        for (size_t q = 0; q < np && rc == LP_OK; q++) {
            const gp_prompt *pr = &g->prompts[pl[q].prompt];
            size_t K = pl[q].K, row = pl[q].row0;
            for (size_t a = 0; a < K; a++)
                s[a] = sparse_dot(&g->resp[pr->cand[a]], th);
            rc = lp_policy_probs(LP_LINK_CHIMIX, s, NULL, K, m->beta, pi, NULL, NULL);
            for (size_t a = 0; a < K; a++) {
                r[a] = 0.0;
                for (size_t b = 0; b < K; b++)
                    r[a] += pl[q].L[a * K + b] * pi[b];
            }
            for (size_t a = 0; a < K; a++)
                for (size_t b = a + 1; b < K; b++, row++) {
                    base[row] = s[a] - s[b];
                    target[row] = r[a] - r[b];
                }
        }
        if (rc != LP_OK)
            break;
        round_rows R = {.n = N,
                        .d = d,
                        .df = rows,
                        .base = base,
                        .target = target,
                        .theta_t = th,
                        .kappa = 1.0 + 1.0 / m->eta,
                        .l2 = m->l2};
        m->last_residual =
            solve_round(&R, o->max_iter > 0 ? o->max_iter : 200, m->theta + (t + 1) * d);
        if (isnan(m->last_residual))
            rc = LP_ENO_MEMORY;
        else if (o->on_round && o->on_round(o->round_ctx, (int)t + 2, m->last_residual))
            rc = LP_ECANCELLED;
    }
    for (size_t q = 0; q < np && pl; q++)
        free(pl[q].L);
    free(pl);
    free(base);
    free(target);
    free(s);
    free(pi);
    free(r);
    lp_dataset_free(rows);
    if (rc != LP_OK) {
        lp_gp_model_free(m);
        return rc;
    }
    *out = m;
    return LP_OK;
}

/* ------------------------------------------------------------------ */
/* serving and evaluation                                              */

int lp_gp_iterate_policy(const lp_gp_model *m, int t, const lp_sparse *f, const double *log_ref,
                         size_t K, double *pi)
{
    if (t < 0 || t >= m->rounds || K < 1 || K > LP_POLICY_MAX_K)
        return LP_EINVALID_ARGUMENT;
    double *s = malloc(K * sizeof *s);
    if (s == NULL)
        return LP_ENO_MEMORY;
    for (size_t a = 0; a < K; a++)
        s[a] = sparse_dot(&f[a], m->theta + (size_t)t * m->d);
    int rc = lp_policy_probs(LP_LINK_CHIMIX, s, log_ref, K, m->beta, pi, NULL, NULL);
    free(s);
    return rc;
}

int lp_gp_mixture(const lp_gp_model *m, const lp_sparse *f, const double *log_ref, size_t K,
                  double *pi, double *win)
{
    if (K < 1 || K > LP_POLICY_MAX_K)
        return LP_EINVALID_ARGUMENT;
    for (size_t a = 0; a < K; a++)
        for (size_t k = 0; k < f[a].nnz; k++)
            if (f[a].idx[k] >= m->d)
                return LP_EINVALID_ARGUMENT;
    double *one = malloc(K * sizeof *one);
    if (one == NULL)
        return LP_ENO_MEMORY;
    memset(pi, 0, K * sizeof *pi);
    int rc = LP_OK;
    for (int t = 0; t < m->rounds && rc == LP_OK; t++) {
        rc = lp_gp_iterate_policy(m, t, f, log_ref, K, one);
        for (size_t a = 0; a < K && rc == LP_OK; a++)
            pi[a] += one[a] / (double)m->rounds;
    }
    free(one);
    if (rc != LP_OK || win == NULL)
        return rc;
    for (size_t a = 0; a < K; a++) {
        double e = 0.0;
        for (size_t b = 0; b < K; b++)
            if (b != a)
                e += pi[b] * lp_gp_preference(m, &f[a], &f[b]);
        win[a] = 0.5 * (1.0 + e);
    }
    return LP_OK;
}

double lp_gp_duality_gap(const double *L, const double *pi, size_t K)
{
    double best = -INFINITY;
    for (size_t a = 0; a < K; a++) {
        double e = 0.0;
        for (size_t b = 0; b < K; b++)
            e += L[a * K + b] * pi[b];
        best = e > best ? e : best;
    }
    return 2.0 * best;
}

double lp_gp_gap_bound(size_t K, int T, double beta, double eta)
{
    double F = 0.5 * (double)(K - 1) + log((double)K);
    return 2.0 * (beta * (1.0 + 1.0 / (eta * T)) * F + eta / (2.0 * beta));
}

/* ------------------------------------------------------------------ */
/* JSON                                                                */

static json_t *num_array(const double *x, size_t n)
{
    json_t *a = json_array();
    for (size_t j = 0; j < n && a != NULL; j++)
        json_array_append_new(a, json_real(x[j]));
    return a;
}

json_t *lp_gp_model_to_json(const lp_gp_model *m)
{
    json_t *it = json_array();
    for (int t = 0; t < m->rounds && it != NULL; t++)
        json_array_append_new(it, num_array(m->theta + (size_t)t * m->d, m->d));
    return json_pack(
        "{s:i, s:f, s:f, s:f, s:{s:s, s:I, s:I}, s:{s:I, s:I, s:I, s:I, s:f, s:s, s:f, s:f}, "
        "s:o, s:o}",
        "rounds", m->rounds, "beta", m->beta, "eta", m->eta, "l2", m->l2, "pair_features", "kind",
        m->d <= LP_GP_EXACT_MAX ? "exact" : "hashed-v1", "dim", (json_int_t)m->pdim, "cross_hash",
        (json_int_t)(m->d <= LP_GP_EXACT_MAX ? 0 : LP_GP_CROSS_HASH), "fit", "labels",
        (json_int_t)m->n_labels, "prompts", (json_int_t)m->n_prompts, "playable_prompts",
        (json_int_t)m->n_playable, "candidate_pairs", (json_int_t)m->n_pairs,
        "preference_objective", m->pref_objective, "preference_status", m->pref_status,
        "cycle_share", m->cycle_share, "last_round_residual", m->last_residual, "preference",
        num_array(m->w, m->pdim), "iterates", it);
}

static int read_numbers(const json_t *a, size_t n, double *out)
{
    if (!json_is_array(a) || json_array_size(a) != n)
        return LP_EWRONG_TYPE;
    for (size_t j = 0; j < n; j++) {
        const json_t *v = json_array_get(a, j);
        if (!json_is_number(v) || !isfinite(json_number_value(v)))
            return LP_EWRONG_TYPE;
        out[j] = json_number_value(v);
    }
    return LP_OK;
}

int lp_gp_model_from_json(const json_t *obj, size_t d, lp_gp_model **out, char *msg, size_t msglen)
{
    *out = NULL;
    if (!json_is_object(obj) || d < 1)
        return lp_fail(LP_EWRONG_TYPE, msg, msglen, "\"general\" must be an object");
    const json_t *it = json_object_get(obj, "iterates"), *w = json_object_get(obj, "preference");
    const json_t *b = json_object_get(obj, "beta"), *e = json_object_get(obj, "eta");
    if (!json_is_array(it) || json_array_size(it) < 1 || json_array_size(it) > LP_GP_MAX_ROUNDS ||
        !json_is_number(b) || !(json_number_value(b) > 0.0) || !json_is_number(e) ||
        !(json_number_value(e) > 0.0))
        return lp_fail(LP_EWRONG_TYPE, msg, msglen,
                       "\"general\" needs iterates (1..%d arrays), beta > 0 and eta > 0",
                       LP_GP_MAX_ROUNDS);
    lp_gp_model *m = calloc(1, sizeof *m);
    if (m == NULL)
        return lp_fail(LP_ENO_MEMORY, msg, msglen, "out of memory");
    m->d = d;
    m->pdim = lp_gp_pair_dim(d);
    m->rounds = (int)json_array_size(it);
    m->beta = json_number_value(b);
    m->eta = json_number_value(e);
    m->w = malloc(m->pdim * sizeof *m->w);
    m->theta = malloc((size_t)m->rounds * d * sizeof *m->theta);
    int rc = m->w && m->theta ? read_numbers(w, m->pdim, m->w) : LP_ENO_MEMORY;
    for (int t = 0; t < m->rounds && rc == LP_OK; t++)
        rc = read_numbers(json_array_get(it, (size_t)t), d, m->theta + (size_t)t * d);
    if (rc != LP_OK) {
        lp_gp_model_free(m);
        return rc == LP_ENO_MEMORY
                   ? lp_fail(rc, msg, msglen, "out of memory")
                   : lp_fail(rc, msg, msglen,
                             "\"general\": preference must have %zu finite numbers and each "
                             "iterate %zu",
                             lp_gp_pair_dim(d), d);
    }
    *out = m;
    return LP_OK;
}
