/* expmech.c — the exponential mechanism over a finite candidate set. See expmech.h. */
#include "expmech.h"

#include "error.h"
#include "prng.h"
#include "rr.h"

#include <cblas.h>
#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <sodium.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The center's values are written into the definition up to this dimension. */
#define CENTER_VALUES_MAX_DIM 4096
/* Margins computed per GEMM: candidates x rows of one block. */
#define BLOCK_VALUES ((size_t)1 << 22)

static const char *const kind_names[] = {"grid", "net", "around"};

const char *lp_cand_kind_name(lp_cand_kind kind)
{
    return (unsigned)kind < 3 ? kind_names[kind] : NULL;
}

int lp_candset_parse(const char *spec, lp_cand_kind *kind, size_t *param, uint64_t *seed,
                     int *has_seed, char *msg, size_t msglen)
{
    *has_seed = 0;
    *seed = 0;
    const char *colon = spec ? strchr(spec, ':') : NULL;
    int found = 0;
    for (int k = 0; colon != NULL && k < 3; k++)
        if ((size_t)(colon - spec) == strlen(kind_names[k]) &&
            strncmp(spec, kind_names[k], (size_t)(colon - spec)) == 0) {
            *kind = (lp_cand_kind)k;
            found = 1;
        }
    if (!found) {
        snprintf(msg, msglen,
                 "candidates \"%s\": expected grid:G, net:K or around:K (optionally :seed=S)",
                 spec ? spec : "");
        return LP_EINVALID_ARGUMENT;
    }
    char *end;
    errno = 0;
    unsigned long long v = strtoull(colon + 1, &end, 10);
    if (errno != 0 || colon[1] < '0' || colon[1] > '9' || v == 0 || v > LP_EXPMECH_MAX_CANDIDATES) {
        snprintf(msg, msglen, "candidates \"%s\": the count must be an integer in [1, %zu]", spec,
                 LP_EXPMECH_MAX_CANDIDATES);
        return LP_EINVALID_ARGUMENT;
    }
    *param = (size_t)v;
    if (*end == '\0')
        return LP_OK;
    const char *s = end;
    if (strncmp(s, ":seed=", 6) == 0 && s[6] >= '0' && s[6] <= '9') {
        errno = 0;
        unsigned long long sv = strtoull(s + 6, &end, 10);
        if (errno == 0 && *end == '\0' && sv < LP_EXPMECH_SEED_LIMIT) {
            *seed = sv;
            *has_seed = 1;
            return LP_OK;
        }
    }
    snprintf(msg, msglen,
             "candidates \"%s\": expected \":seed=S\" with 0 <= S < 2^53 after the count", spec);
    return LP_EINVALID_ARGUMENT;
}

void lp_candset_free(lp_candset *c)
{
    if (c == NULL)
        return;
    free(c->theta);
    free(c->center);
    free(c);
}

/* A point uniform in the ball of radius r around c (NULL = origin). */
static void ball_point(lp_prng *g, size_t d, double r, const double *c, double *out)
{
    double nn = 0.0;
    do {
        nn = 0.0;
        for (size_t j = 0; j < d; j++) {
            out[j] = lp_prng_normal(g);
            nn += out[j] * out[j];
        }
    } while (nn == 0.0);
    double scale = r * pow(lp_prng_uniform(g), 1.0 / (double)d) / sqrt(nn);
    for (size_t j = 0; j < d; j++)
        out[j] = out[j] * scale + (c ? c[j] : 0.0);
}

/* The grid's points inside the ball: G^d <= the candidate cap (checked). */
static size_t build_grid(size_t g, size_t d, double r, double *theta)
{
    size_t total = 1, k = 0;
    for (size_t j = 0; j < d; j++)
        total *= g;
    double limit = r * r * (1.0 + 1e-12);
    for (size_t t = 0; t < total; t++) {
        double *row = theta + k * d, nn = 0.0;
        size_t rest = t;
        for (size_t j = 0; j < d; j++) {
            row[j] = -r + 2.0 * r * (double)(rest % g) / (double)(g - 1);
            nn += row[j] * row[j];
            rest /= g;
        }
        if (nn <= limit)
            k++;
    }
    return k;
}

int lp_candset_build(lp_cand_kind kind, size_t param, size_t d, double radius, uint64_t seed,
                     const double *center, lp_candset **out, char *msg, size_t msglen)
{
    *out = NULL;
    if (!isfinite(radius) || radius <= 0.0) {
        snprintf(msg, msglen, "the candidates' radius must be finite and > 0 (got %g)", radius);
        return LP_EINVALID_ARGUMENT;
    }
    if (d == 0 || param == 0 || param > LP_EXPMECH_MAX_CANDIDATES) {
        snprintf(msg, msglen, "candidate count %zu or dimension %zu out of range", param, d);
        return LP_EINVALID_ARGUMENT;
    }
    size_t k = param;
    if (kind == LP_CAND_GRID) {
        if (param < 2) {
            snprintf(msg, msglen, "a grid needs at least 2 points per axis");
            return LP_EINVALID_ARGUMENT;
        }
        k = 1;
        for (size_t j = 0; j < d && k <= LP_EXPMECH_MAX_CANDIDATES; j++)
            k *= param;
        if (k > LP_EXPMECH_MAX_CANDIDATES) {
            snprintf(msg, msglen,
                     "grid:%zu in dimension %zu has more than %zu points: use net:K or around:K",
                     param, d, LP_EXPMECH_MAX_CANDIDATES);
            return LP_EINVALID_ARGUMENT;
        }
    }
    if (kind == LP_CAND_AROUND && center == NULL) {
        snprintf(msg, msglen, "around:K needs a center (d values, e.g. an earlier model)");
        return LP_EINVALID_ARGUMENT;
    }
    if (k > LP_EXPMECH_MAX_VALUES / d) {
        snprintf(msg, msglen, "%zu candidates of dimension %zu exceed %zu stored values", k, d,
                 LP_EXPMECH_MAX_VALUES);
        return LP_EINVALID_ARGUMENT;
    }
    lp_candset *c = calloc(1, sizeof *c);
    if (c == NULL || (c->theta = malloc(k * d * sizeof *c->theta)) == NULL ||
        (kind == LP_CAND_AROUND && (c->center = malloc(d * sizeof *c->center)) == NULL)) {
        lp_candset_free(c);
        return LP_ENO_MEMORY;
    }
    c->kind = kind;
    c->param = param;
    c->d = d;
    c->radius = radius;
    if (kind == LP_CAND_GRID) {
        c->k = build_grid(param, d, radius, c->theta);
    } else {
        c->seed = seed;
        c->k = k;
        if (c->center)
            memcpy(c->center, center, d * sizeof *center);
        /* Candidate 0 is the origin (theta = 0: the reference policy) or
         * the center; the rest uniform in the ball around it. */
        for (size_t j = 0; j < d; j++)
            c->theta[j] = c->center ? c->center[j] : 0.0;
        lp_prng g;
        lp_prng_seed(&g, seed);
        for (size_t i = 1; i < k; i++)
            ball_point(&g, d, radius, c->center, c->theta + i * d);
    }
    *out = c;
    return LP_OK;
}

/* SHA-256 of the center's d doubles (IEEE 754, little-endian) as hex. */
static void center_hash(const double *center, size_t d, char hex[2 * crypto_hash_sha256_BYTES + 1])
{
    crypto_hash_sha256_state st;
    crypto_hash_sha256_init(&st);
    for (size_t j = 0; j < d; j++) {
        uint64_t bits;
        memcpy(&bits, &center[j], sizeof bits);
        unsigned char le[8];
        for (int b = 0; b < 8; b++)
            le[b] = (unsigned char)(bits >> (8 * b));
        crypto_hash_sha256_update(&st, le, sizeof le);
    }
    unsigned char h[crypto_hash_sha256_BYTES];
    crypto_hash_sha256_final(&st, h);
    sodium_bin2hex(hex, 2 * crypto_hash_sha256_BYTES + 1, h, sizeof h);
}

json_t *lp_candset_to_json(const lp_candset *c)
{
    json_t *o = json_object();
    json_object_set_new(o, "kind", json_string(lp_cand_kind_name(c->kind)));
    json_object_set_new(o, "count", json_integer((json_int_t)c->param));
    json_object_set_new(o, "size", json_integer((json_int_t)c->k));
    json_object_set_new(o, "radius", json_real(c->radius));
    if (c->kind != LP_CAND_GRID)
        json_object_set_new(o, "seed", json_integer((json_int_t)c->seed));
    if (c->center != NULL) {
        char hex[2 * crypto_hash_sha256_BYTES + 1];
        center_hash(c->center, c->d, hex);
        json_object_set_new(o, "center_sha256", json_string(hex));
        if (c->d <= CENTER_VALUES_MAX_DIM) {
            json_t *a = json_array();
            for (size_t j = 0; j < c->d; j++)
                json_array_append_new(a, json_real(c->center[j]));
            json_object_set_new(o, "center", a);
        }
    }
    return o;
}

int lp_candset_from_json(const json_t *def, size_t d, const double *center, lp_candset **out,
                         char *msg, size_t msglen)
{
    *out = NULL;
    const char *kname = json_string_value(json_object_get(def, "kind"));
    json_t *count = json_object_get(def, "count"), *radius = json_object_get(def, "radius");
    int kind = -1;
    for (int k = 0; kname != NULL && k < 3; k++)
        if (strcmp(kname, kind_names[k]) == 0)
            kind = k;
    if (kind < 0 || !json_is_integer(count) || json_integer_value(count) <= 0 ||
        !json_is_number(radius)) {
        snprintf(msg, msglen, "candidate set definition: kind, count and radius are required");
        return LP_EINVALID_ARGUMENT;
    }
    json_t *js = json_object_get(def, "seed");
    uint64_t seed = json_is_integer(js) ? (uint64_t)json_integer_value(js) : 0;
    double *vals = NULL;
    const json_t *ca = json_object_get(def, "center");
    if (kind == LP_CAND_AROUND && json_is_array(ca)) {
        if (json_array_size(ca) != d || (vals = malloc(d * sizeof *vals)) == NULL) {
            snprintf(msg, msglen, "candidate set definition: center has %zu values, not %zu",
                     json_array_size(ca), d);
            return vals ? LP_EINVALID_ARGUMENT : LP_ENO_MEMORY;
        }
        for (size_t j = 0; j < d; j++)
            vals[j] = json_number_value(json_array_get(ca, j));
        center = vals;
    }
    lp_candset *c = NULL;
    int rc = lp_candset_build((lp_cand_kind)kind, (size_t)json_integer_value(count), d,
                              json_number_value(radius), seed, center, &c, msg, msglen);
    free(vals);
    if (rc != LP_OK)
        return rc;
    const char *want = json_string_value(json_object_get(def, "center_sha256"));
    json_t *size = json_object_get(def, "size");
    char hex[2 * crypto_hash_sha256_BYTES + 1] = "";
    if (c->center != NULL)
        center_hash(c->center, d, hex);
    if ((want != NULL && strcmp(want, hex) != 0) ||
        (json_is_integer(size) && (size_t)json_integer_value(size) != c->k)) {
        snprintf(msg, msglen, "candidate set definition: the rebuilt set differs (%s)",
                 want != NULL && strcmp(want, hex) != 0 ? "center hash" : "size");
        lp_candset_free(c);
        return LP_EINVALID_ARGUMENT;
    }
    *out = c;
    return LP_OK;
}

double lp_expmech_term(double margin, int z, double rmax)
{
    if (isnan(margin))
        margin = 0.0;
    double r = 2.0 * rmax;
    double v = margin > r ? r : margin < -r ? -r : margin;
    double e = tanh(v / 2.0) - (z ? 1.0 : -1.0);
    return e * e;
}

double lp_expmech_loss_naive(const lp_dataset *ds, const double *theta, double rmax)
{
    double l = 0.0;
    for (size_t i = 0; i < ds->n; i++)
        l += lp_expmech_term(lp_dataset_row_dot(ds, i, theta), ds->z[i], rmax);
    return l;
}

/* Margins of all candidates on rows [r0, r0 + b): out is b x k (row i's k
 * margins contiguous). One GEMM for dense data: out = X_b C^T. */
static void block_margins(const lp_dataset *ds, const lp_candset *c, const float *cf,
                          const double *ct, size_t r0, size_t b, double *out, float *outf)
{
    size_t k = c->k, d = c->d;
    if (ds->storage == LP_STORE_F32) {
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, (int)b, (int)k, (int)d, 1.0f,
                    ds->xf + r0 * d, (int)d, cf, (int)d, 0.0f, outf, (int)k);
        for (size_t t = 0; t < b * k; t++)
            out[t] = outf[t];
    } else if (ds->storage == LP_STORE_F64) {
        cblas_dgemm(CblasRowMajor, CblasNoTrans, CblasTrans, (int)b, (int)k, (int)d, 1.0,
                    ds->xd + r0 * d, (int)d, c->theta, (int)d, 0.0, out, (int)k);
    } else {
        memset(out, 0, b * k * sizeof *out);
        for (size_t i = 0; i < b; i++)
            for (size_t p = ds->rowptr[r0 + i]; p < ds->rowptr[r0 + i + 1]; p++)
                cblas_daxpy((int)k, ds->val[p], ct + (size_t)ds->col[p] * k, 1, out + i * k, 1);
    }
}

/* As lp_expmech_losses over the rows keep[0..nk) (NULL: all rows). */
static int losses_rows(const lp_dataset *ds, const lp_candset *c, double rmax, const size_t *keep,
                       size_t nk, double *loss)
{
    size_t k = c->k, d = c->d, n = keep ? nk : ds->n;
    size_t b = BLOCK_VALUES / k;
    if (b == 0)
        b = 1;
    if (b > ds->n)
        b = ds->n ? ds->n : 1;
    float *cf = NULL, *outf = NULL;
    double *ct = NULL, *out = malloc(b * k * sizeof *out);
    int ok = out != NULL;
    if (ok && ds->storage == LP_STORE_F32) {
        cf = malloc(k * d * sizeof *cf);
        outf = malloc(b * k * sizeof *outf);
        ok = cf && outf;
        for (size_t t = 0; ok && t < k * d; t++)
            cf[t] = (float)c->theta[t];
    } else if (ok && ds->storage == LP_STORE_CSR) {
        ok = (ct = malloc(k * d * sizeof *ct)) != NULL;
        for (size_t i = 0; ok && i < k; i++)
            for (size_t j = 0; j < d; j++)
                ct[j * k + i] = c->theta[i * d + j];
    }
    if (!ok) {
        free(cf);
        free(outf);
        free(ct);
        free(out);
        return LP_ENO_MEMORY;
    }
    for (size_t i = 0; i < k; i++)
        loss[i] = 0.0;
    /* Blocks of consecutive rows; kept rows are a subset of them. */
    size_t next = 0;
    for (size_t r0 = 0; r0 < ds->n && next < n; r0 += b) {
        size_t len = ds->n - r0 < b ? ds->n - r0 : b;
        if (keep && keep[next] >= r0 + len)
            continue;
        block_margins(ds, c, cf, ct, r0, len, out, outf);
        for (size_t r = r0; r < r0 + len; r++) {
            if (keep) {
                if (next >= n || keep[next] != r)
                    continue;
                next++;
            }
            const double *m = out + (r - r0) * k;
            int z = ds->z[r];
            for (size_t i = 0; i < k; i++)
                loss[i] += lp_expmech_term(m[i], z, rmax);
        }
        if (!keep)
            next = r0 + len;
    }
    free(cf);
    free(outf);
    free(ct);
    free(out);
    return LP_OK;
}

int lp_expmech_losses(const lp_dataset *ds, const lp_candset *c, double rmax, double *loss)
{
    return losses_rows(ds, c, rmax, NULL, 0, loss);
}

static double gumbel(lp_rand64 rand64, void *st)
{
    /* u in (0, 1): 53 bits and a half step, never 0 or 1. */
    double u = ((double)(rand64(st) >> 11) + 0.5) * 0x1p-53;
    return -log(-log(u));
}

size_t lp_expmech_select(const double *loss, size_t k, double scale, lp_rand64 rand64,
                         void *rand_state)
{
    size_t best = 0;
    double top = -INFINITY;
    for (size_t i = 0; i < k; i++) {
        double s = -scale * loss[i] + gumbel(rand64, rand_state);
        if (s > top) {
            top = s;
            best = i;
        }
    }
    return best;
}

void lp_expmech_probs(const double *loss, size_t k, double scale, double *p)
{
    double lo = INFINITY, z = 0.0;
    for (size_t i = 0; i < k; i++)
        lo = loss[i] < lo ? loss[i] : lo;
    for (size_t i = 0; i < k; i++)
        z += p[i] = exp(-scale * (loss[i] - lo));
    for (size_t i = 0; i < k; i++)
        p[i] /= z;
}

typedef struct user_row {
    int64_t user;
    size_t row;
} user_row;

static int by_user_then_row(const void *a, const void *b)
{
    const user_row *x = a, *y = b;
    if (x->user != y->user)
        return x->user < y->user ? -1 : 1;
    return x->row < y->row ? -1 : x->row > y->row;
}

static int by_index(const void *a, const void *b)
{
    size_t x = *(const size_t *)a, y = *(const size_t *)b;
    return x < y ? -1 : x > y;
}

/* The rows that count under a contribution cap m: each user's first m rows
 * (in row order), returned in row order. NULL on no memory. */
static size_t *capped_rows(const int64_t *user, size_t n, size_t m, size_t *nk)
{
    user_row *ur = malloc((n ? n : 1) * sizeof *ur);
    size_t *keep = malloc((n ? n : 1) * sizeof *keep);
    if (ur == NULL || keep == NULL) {
        free(ur);
        free(keep);
        return NULL;
    }
    for (size_t i = 0; i < n; i++)
        ur[i] = (user_row){user[i], i};
    qsort(ur, n, sizeof *ur, by_user_then_row);
    size_t k = 0, run = 0;
    for (size_t i = 0; i < n; i++) {
        run = (i > 0 && ur[i].user == ur[i - 1].user) ? run + 1 : 0;
        if (run < m)
            keep[k++] = ur[i].row;
    }
    free(ur);
    qsort(keep, k, sizeof *keep, by_index);
    *nk = k;
    return keep;
}

/* The model of a release: theta and what may be shown of the data. */
static lp_model *release_model(const lp_dataset *ds, const lp_release_opts *o, const double *theta)
{
    lp_model *m = calloc(1, sizeof *m);
    if (m == NULL || (m->theta = malloc(ds->d * sizeof *m->theta)) == NULL) {
        free(m);
        return NULL;
    }
    memcpy(m->theta, theta, ds->d * sizeof *theta);
    lp_loss_spec_init(&m->loss, LP_LOSS_SQUARE_CHIPO);
    m->loss.rmax = o->rmax;
    m->link = LP_LINK_CHIMIX;
    m->beta = o->beta;
    lp_fit_opts_init(&m->fit, LP_OPT_LBFGS);
    m->threads = 1;
    m->precision = lp_storage_name(ds->storage);
    m->d = ds->d;
    m->n = ds->n;
    m->n_bins = lp_dataset_eps_hist(ds, m->bins, LP_MODEL_EPS_BINS, &m->n_eps_other);
    /* No statistic of the labels (fitted metrics, label counts): the release
     * is the only thing computed from them. */
    double nn = 0.0;
    for (size_t j = 0; j < ds->d; j++)
        nn += theta[j] * theta[j];
    m->rw_margins = m->rw_accuracy = NAN;
    m->res.objective = m->res.grad_norm = NAN;
    m->res.theta_norm = sqrt(nn);
    snprintf(m->res.status, sizeof m->res.status, "released");
    return m;
}

int lp_expmech_release(const lp_dataset *ds, const int64_t *user, const lp_release_opts *o,
                       lp_model **out, char *msg, size_t msglen)
{
    *out = NULL;
    if (!isfinite(o->epsilon) || o->epsilon <= 0.0 || o->delta != 0.0 || !(o->rmax > 0.0) ||
        !(o->beta > 0.0) || o->rand64 == NULL) {
        snprintf(msg, msglen,
                 "the exponential mechanism needs a finite epsilon > 0, delta = 0, rmax > 0, "
                 "beta > 0 and a random source");
        return LP_EINVALID_ARGUMENT;
    }
    if (ds->n == 0) {
        snprintf(msg, msglen, "a release needs at least one label");
        return LP_EINVALID_ARGUMENT;
    }
    for (size_t i = 0; i < ds->n; i++)
        if (!isinf(ds->eps[i])) {
            snprintf(msg, msglen,
                     "the exponential mechanism takes unrandomized labels (epsilon = inf); "
                     "label %zu has epsilon %g",
                     i + 1, ds->eps[i]);
            return LP_EINVALID_ARGUMENT;
        }
    lp_cand_kind kind;
    size_t param;
    uint64_t seed;
    int has_seed;
    int rc = lp_candset_parse(o->candidates, &kind, &param, &seed, &has_seed, msg, msglen);
    if (rc != LP_OK)
        return rc;
    if (!has_seed && kind != LP_CAND_GRID) {
        if ((rc = lp_rng_init()) != LP_OK) {
            snprintf(msg, msglen, "the OS random source is unavailable");
            return rc;
        }
        seed = lp_csprng_next64(NULL) % LP_EXPMECH_SEED_LIMIT;
    }
    lp_candset *c = NULL;
    if ((rc = lp_candset_build(kind, param, ds->d, o->radius, seed, o->center, &c, msg, msglen)) !=
        LP_OK)
        return rc;
    size_t cap = user != NULL ? o->user_cap : 0, nk = 0;
    size_t *keep = cap > 0 ? capped_rows(user, ds->n, cap, &nk) : NULL;
    double *loss = malloc(c->k * sizeof *loss);
    if ((cap > 0 && keep == NULL) || loss == NULL ||
        losses_rows(ds, c, o->rmax, keep, nk, loss) != LP_OK) {
        free(keep);
        free(loss);
        lp_candset_free(c);
        return LP_ENO_MEMORY;
    }
    free(keep);
    double scale = o->epsilon / (2.0 * LP_EXPMECH_SENSITIVITY * (double)(cap > 0 ? cap : 1));
    size_t pick = lp_expmech_select(loss, c->k, scale, o->rand64, o->rand_state);
    free(loss);
    lp_model *m = release_model(ds, o, c->theta + pick * c->d);
    json_t *r = json_object();
    if (m == NULL || r == NULL) {
        lp_model_free(m);
        json_decref(r);
        lp_candset_free(c);
        return LP_ENO_MEMORY;
    }
    json_object_set_new(r, "mechanism", json_string("exponential"));
    json_object_set_new(r, "epsilon", json_real(o->epsilon));
    json_object_set_new(r, "delta", json_real(0.0));
    json_object_set_new(r, "unit", json_string(cap > 0 ? "user" : "label"));
    json_object_set_new(r, "user_cap", cap > 0 ? json_integer((json_int_t)cap) : json_null());
    json_object_set_new(r, "sensitivity",
                        json_real(LP_EXPMECH_SENSITIVITY * (double)(cap ? cap : 1)));
    json_object_set_new(r, "scale", json_real(scale));
    json_object_set_new(r, "rmax", isfinite(o->rmax) ? json_real(o->rmax) : json_null());
    json_object_set_new(r, "sampler", json_string("gumbel-max"));
    json_object_set_new(r, "random_source",
                        json_string(o->rand64 == lp_csprng_next64 ? "csprng" : "seeded"));
    json_object_set_new(r, "candidates", lp_candset_to_json(c));
    json_object_set_new(r, "selected", json_integer((json_int_t)pick));
    m->release = r;
    lp_candset_free(c);
    *out = m;
    return LP_OK;
}
