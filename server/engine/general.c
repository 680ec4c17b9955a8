/* general.c — iterative Square chi-PO for general preferences. See general.h. */
#include "general.h"

#include "dataset.h"
#include "error.h"
#include "losses.h"
#include "model.h"
#include "policy.h"
#include "wire.h"

#include <stdio.h>

#include <math.h>
#include <stdlib.h>
#include <string.h>

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

int lp_gp_dense_features(const double *x, size_t d, lp_sparse *out)
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
    int rc = lp_gp_dense_features(x0, g->d, &s0);
    if (rc == LP_OK)
        rc = lp_gp_dense_features(x1, g->d, &s1);
    if (rc == LP_OK)
        rc = lp_gp_data_add(g, prompt, &s0, &s1, z, eps);
    lp_sparse_free(&s0);
    lp_sparse_free(&s1);
    return rc;
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

/* The clipped preference matrix of K candidates (L[a*K+b] = l(a, b)). */
static int preference_matrix(const lp_gp_model *m, const lp_sparse *f, size_t K, double *L)
{
    lp_sparse dg = {0};
    int rc = LP_OK;
    for (size_t a = 0; a < K && rc == LP_OK; a++) {
        L[a * K + a] = 0.0;
        for (size_t b = a + 1; b < K && rc == LP_OK; b++) {
            rc = lp_gp_pair_features(m->d, &f[a], &f[b], &dg);
            double l = rc == LP_OK ? clip(sparse_dot(&dg, m->w), 1.0) : 0.0;
            L[a * K + b] = l;
            L[b * K + a] = -l;
        }
    }
    lp_sparse_free(&dg);
    return rc;
}

int lp_gp_fit(const lp_gp_data *g, const lp_gp_opts *o, lp_gp_model **out)
{
    *out = NULL;
    if (o->rounds < 1 || o->rounds > LP_GP_MAX_ROUNDS || !(o->beta >= 0.0) || !(o->eta >= 0.0) ||
        isinf(o->beta) || isinf(o->eta) || !(o->l2 >= 0.0) || g->n == 0)
        return LP_EINVALID_ARGUMENT;
    size_t np = lp_gp_data_playable(g);
    if (np == 0)
        return LP_ENO_LABELS;
    lp_gp_model *m = calloc(1, sizeof *m);
    if (m == NULL)
        return LP_ENO_MEMORY;
    m->d = g->d;
    m->pdim = lp_gp_pair_dim(g->d);
    m->rounds = o->rounds;
    m->beta = o->beta > 0.0 ? o->beta : LP_GP_DEFAULT_BETA;
    m->eta = o->eta > 0.0 ? o->eta : LP_GP_DEFAULT_ETA;
    m->l2 = o->l2;
    m->n_labels = g->n;
    m->n_prompts = g->n_prompts;
    m->n_playable = np;
    int rc = fit_preference(g, o, m);
    /* Self-play on every training prompt's candidates: the mean duality gap
     * under the fitted preference (a diagnostic; serving replays it). */
    lp_sparse f[LP_GP_MAX_K];
    double *L = malloc(LP_GP_MAX_K * LP_GP_MAX_K * sizeof *L), pi[LP_GP_MAX_K], gap = 0.0;
    if (rc == LP_OK && L == NULL)
        rc = LP_ENO_MEMORY;
    size_t done = 0;
    for (size_t p = 0; p < g->n_prompts && rc == LP_OK; p++) {
        const gp_prompt *pr = &g->prompts[p];
        if (pr->K < 2)
            continue;
        for (size_t a = 0; a < pr->K; a++)
            f[a] = g->resp[pr->cand[a]];
        rc = preference_matrix(m, f, pr->K, L);
        if (rc == LP_OK)
            rc = lp_gp_selfplay(L, NULL, pr->K, m->rounds, m->beta, m->eta, pi);
        if (rc == LP_OK) {
            gap += lp_gp_duality_gap(L, pi, pr->K);
            m->n_pairs += pr->K * (pr->K - 1) / 2;
            done++;
            if (o->on_round && (done & 63) == 0 &&
                o->on_round(o->round_ctx, (int)done, gap / (double)done))
                rc = LP_ECANCELLED;
        }
    }
    free(L);
    m->train_gap = done ? gap / (double)done : NAN;
    if (rc != LP_OK) {
        lp_gp_model_free(m);
        return rc;
    }
    *out = m;
    return LP_OK;
}

/* ------------------------------------------------------------------ */
/* serving and evaluation                                              */

int lp_gp_mixture(const lp_gp_model *m, const lp_sparse *f, const double *log_ref, size_t K,
                  double *pi, double *win)
{
    if (K < 1 || K > LP_GP_SERVE_MAX_K)
        return LP_EINVALID_ARGUMENT;
    for (size_t a = 0; a < K; a++)
        for (size_t k = 0; k < f[a].nnz; k++)
            if (f[a].idx[k] >= m->d)
                return LP_EINVALID_ARGUMENT;
    double *L = malloc(K * K * sizeof *L);
    if (L == NULL)
        return LP_ENO_MEMORY;
    int rc = preference_matrix(m, f, K, L);
    if (rc == LP_OK)
        rc = lp_gp_selfplay(L, log_ref, K, m->rounds, m->beta, m->eta, pi);
    for (size_t a = 0; a < K && rc == LP_OK && win != NULL; a++) {
        double e = 0.0;
        for (size_t b = 0; b < K; b++)
            e += L[a * K + b] * pi[b];
        win[a] = 0.5 * (1.0 + e);
    }
    free(L);
    return rc;
}

int lp_gp_selfplay(const double *L, const double *log_ref, size_t K, int T, double beta, double eta,
                   double *pi_mix)
{
    if (K < 1 || K > LP_POLICY_MAX_K || T < 1 || !(beta > 0) || !(eta > 0))
        return LP_EINVALID_ARGUMENT;
    double *s = calloc(K, sizeof *s), *pi = malloc(K * sizeof *pi), *r = malloc(K * sizeof *r);
    int rc = s && pi && r ? LP_OK : LP_ENO_MEMORY;
    memset(pi_mix, 0, K * sizeof *pi_mix);
    for (int t = 0; t < T && rc == LP_OK; t++) {
        rc = lp_policy_probs(LP_LINK_CHIMIX, s, log_ref, K, beta, pi, NULL, NULL);
        for (size_t a = 0; a < K && rc == LP_OK; a++) {
            pi_mix[a] += pi[a] / (double)T;
            r[a] = 0.0;
            for (size_t b = 0; b < K; b++)
                r[a] += L[a * K + b] * pi[b];
        }
        /* the round's regression, solved exactly: s <- (s + eta r)/(1 + eta) */
        for (size_t a = 0; a < K; a++)
            s[a] = (s[a] + eta * r[a]) / (1.0 + eta);
    }
    free(s);
    free(pi);
    free(r);
    return rc;
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

static double max_divergence(size_t K)
{
    return 0.5 * (double)(K - 1) + log((double)K);
}

double lp_gp_gap_bound(size_t K, int T, double beta, double eta)
{
    return 2.0 * (beta * (1.0 + 1.0 / (eta * T)) * max_divergence(K) + eta / (2.0 * beta));
}

double lp_gp_bound_eta(size_t K, int T, double beta)
{
    return beta * sqrt(2.0 * max_divergence(K) / (double)T);
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
    return json_pack(
        "{s:i, s:f, s:f, s:f, s:{s:s, s:I, s:I}, s:{s:I, s:I, s:I, s:I, s:f, s:s, s:f, s:o}, "
        "s:o}",
        "rounds", m->rounds, "beta", m->beta, "eta", m->eta, "l2", m->l2, "pair_features", "kind",
        m->d <= LP_GP_EXACT_MAX ? "exact" : "hashed-v1", "dim", (json_int_t)m->pdim, "cross_hash",
        (json_int_t)(m->d <= LP_GP_EXACT_MAX ? 0 : LP_GP_CROSS_HASH), "fit", "labels",
        (json_int_t)m->n_labels, "prompts", (json_int_t)m->n_prompts, "playable_prompts",
        (json_int_t)m->n_playable, "candidate_pairs", (json_int_t)m->n_pairs,
        "preference_objective", m->pref_objective, "preference_status", m->pref_status,
        "cycle_share", m->cycle_share, "training_gap",
        isfinite(m->train_gap) ? json_real(m->train_gap) : json_null(), "preference",
        num_array(m->w, m->pdim));
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
    const json_t *T = json_object_get(obj, "rounds"), *b = json_object_get(obj, "beta");
    const json_t *e = json_object_get(obj, "eta");
    if (!json_is_integer(T) || json_integer_value(T) < 1 ||
        json_integer_value(T) > LP_GP_MAX_ROUNDS || !json_is_number(b) ||
        !(json_number_value(b) > 0.0) || !isfinite(json_number_value(b)) || !json_is_number(e) ||
        !(json_number_value(e) > 0.0) || !isfinite(json_number_value(e)))
        return lp_fail(LP_EWRONG_TYPE, msg, msglen,
                       "\"general\" needs rounds in [1, %d], finite beta > 0 and eta > 0",
                       LP_GP_MAX_ROUNDS);
    lp_gp_model *m = calloc(1, sizeof *m);
    if (m == NULL)
        return lp_fail(LP_ENO_MEMORY, msg, msglen, "out of memory");
    m->d = d;
    m->pdim = lp_gp_pair_dim(d);
    m->rounds = (int)json_integer_value(T);
    m->beta = json_number_value(b);
    m->eta = json_number_value(e);
    m->train_gap = NAN;
    m->w = malloc(m->pdim * sizeof *m->w);
    int rc = m->w ? read_numbers(json_object_get(obj, "preference"), m->pdim, m->w) : LP_ENO_MEMORY;
    if (rc != LP_OK) {
        lp_gp_model_free(m);
        return rc == LP_ENO_MEMORY ? lp_fail(rc, msg, msglen, "out of memory")
                                   : lp_fail(rc, msg, msglen,
                                             "\"general\": preference must have %zu finite numbers",
                                             lp_gp_pair_dim(d));
    }
    *out = m;
    return LP_OK;
}
