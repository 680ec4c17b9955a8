/* dataset.c — labelled pair storage and the JSONL loaders. See dataset.h. */
#include "dataset.h"

#include "buf.h"
#include "error.h"
#include "wire.h"

#include <assert.h>
#include <float.h>
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define DEFAULT_MAX_LINE ((size_t)64 << 20)
#define AUTO_F64_LIMIT ((size_t)1 << 24)

static void *aligned_alloc64(size_t bytes)
{
    void *p = NULL;
    if (posix_memalign(&p, 64, bytes ? bytes : 64) != 0)
        return NULL;
    return p;
}

/* Grows an aligned array from old_n to new_n elements of size sz. */
static void *aligned_grow(void *old, size_t old_n, size_t new_n, size_t sz)
{
    void *p = aligned_alloc64(new_n * sz);
    if (p == NULL)
        return NULL;
    if (old != NULL && old_n > 0)
        memcpy(p, old, old_n * sz);
    free(old);
    return p;
}

const char *lp_storage_name(lp_storage s)
{
    return s == LP_STORE_F32 ? "float32" : s == LP_STORE_F64 ? "float64" : "csr";
}

lp_dataset *lp_dataset_new(size_t d, lp_storage storage)
{
    if (d < 1 || storage > LP_STORE_CSR)
        return NULL;
    lp_dataset *ds = calloc(1, sizeof *ds);
    if (ds == NULL)
        return NULL;
    ds->d = d;
    ds->storage = storage;
    ds->sum_chosen = calloc(d, sizeof(double));
    ds->sum_rejected = calloc(d, sizeof(double));
    if (storage == LP_STORE_CSR)
        ds->rowptr = calloc(1, sizeof(size_t));
    if (ds->sum_chosen == NULL || ds->sum_rejected == NULL ||
        (storage == LP_STORE_CSR && ds->rowptr == NULL)) {
        lp_dataset_free(ds);
        return NULL;
    }
    return ds;
}

lp_dataset *lp_dataset_new_dense(size_t n, size_t d, lp_storage storage)
{
    if (d < 1 || storage == LP_STORE_CSR || n > SIZE_MAX / d / 8)
        return NULL;
    lp_dataset *ds = calloc(1, sizeof *ds);
    if (ds == NULL)
        return NULL;
    ds->n = ds->cap = n;
    ds->d = d;
    ds->storage = storage;
    if (storage == LP_STORE_F32)
        ds->xf = aligned_alloc64(n * d * sizeof(float));
    else
        ds->xd = aligned_alloc64(n * d * sizeof(double));
    ds->z = malloc(n ? n : 1);
    ds->eps = malloc((n ? n : 1) * sizeof(double));
    if ((ds->xf == NULL && ds->xd == NULL) || ds->z == NULL || ds->eps == NULL) {
        lp_dataset_free(ds);
        return NULL;
    }
    return ds;
}

void lp_dataset_free(lp_dataset *ds)
{
    if (ds == NULL)
        return;
    free(ds->xf);
    free(ds->xd);
    free(ds->rowptr);
    free(ds->col);
    free(ds->val);
    free(ds->z);
    free(ds->eps);
    free(ds->y);
    free(ds->group);
    free(ds->sum_chosen);
    free(ds->sum_rejected);
    free(ds->user);
    free(ds);
}

/* Makes room for one more row (and, for CSR, extra nonzeros). The row
 * arrays share ds->cap, the nonzero arrays ds->nnz_cap (buf.h's doubling
 * rule); the dense matrix keeps its 64-byte alignment. */
static int reserve_row(lp_dataset *ds, size_t extra_nnz)
{
    if (ds->n == ds->cap) {
        size_t nc = lp_grow_cap(ds->cap, ds->n + 1, 64);
        if (nc == 0)
            return LP_ENO_MEMORY;
        if (ds->storage == LP_STORE_F32) {
            float *x = aligned_grow(ds->xf, ds->n * ds->d, nc * ds->d, sizeof(float));
            if (x == NULL)
                return LP_ENO_MEMORY;
            ds->xf = x;
        } else if (ds->storage == LP_STORE_F64) {
            double *x = aligned_grow(ds->xd, ds->n * ds->d, nc * ds->d, sizeof(double));
            if (x == NULL)
                return LP_ENO_MEMORY;
            ds->xd = x;
        } else if (lp_array_resize((void **)&ds->rowptr, nc + 1, sizeof *ds->rowptr) != LP_OK) {
            return LP_ENO_MEMORY;
        }
        if (lp_array_resize((void **)&ds->z, nc, sizeof *ds->z) != LP_OK ||
            lp_array_resize((void **)&ds->eps, nc, sizeof *ds->eps) != LP_OK ||
            lp_array_resize((void **)&ds->y, nc, sizeof *ds->y) != LP_OK ||
            lp_array_resize((void **)&ds->group, nc, sizeof *ds->group) != LP_OK)
            return LP_ENO_MEMORY;
        ds->cap = nc;
    }
    if (ds->storage == LP_STORE_CSR && ds->nnz + extra_nnz > ds->nnz_cap) {
        size_t nc = lp_grow_cap(ds->nnz_cap, ds->nnz + extra_nnz, 1024);
        if (nc == 0 || lp_array_resize((void **)&ds->col, nc, sizeof *ds->col) != LP_OK ||
            lp_array_resize((void **)&ds->val, nc, sizeof *ds->val) != LP_OK)
            return LP_ENO_MEMORY;
        ds->nnz_cap = nc;
    }
    return LP_OK;
}

static int check_label(int z, double eps, int y, char *msg, size_t msglen)
{
    if (z != 0 && z != 1)
        return lp_fail(LP_EBAD_LABEL, msg, msglen, "z must be 0 or 1 (got %d)", z);
    if (y < -1 || y > 1)
        return lp_fail(LP_EBAD_LABEL, msg, msglen, "y must be 0 or 1 (got %d)", y);
    if (isnan(eps) || eps <= 0.0 || (isinf(eps) && eps < 0))
        return lp_fail(LP_EBAD_EPSILON, msg, msglen, "epsilon must be > 0 or null (got %g)", eps);
    return LP_OK;
}

int lp_dataset_add_dense(lp_dataset *ds, const double *x0, const double *x1, int z, double eps,
                         int y, char *msg, size_t msglen)
{
    assert(ds->storage != LP_STORE_CSR);
    int rc = check_label(z, eps, y, msg, msglen);
    if (rc != LP_OK)
        return rc;
    size_t d = ds->d;
    for (size_t j = 0; j < d; j++) {
        double diff = x1[j] - x0[j];
        if (!isfinite(x0[j]) || !isfinite(x1[j]) || !isfinite(diff))
            return lp_fail(LP_EINVALID_ARGUMENT, msg, msglen,
                           "feature %zu is not finite (or its difference overflows)", j);
        if (ds->storage == LP_STORE_F32 && fabs(diff) > FLT_MAX)
            return lp_fail(LP_EINVALID_ARGUMENT, msg, msglen,
                           "feature %zu difference %g is not representable in float32", j, diff);
    }
    if ((rc = reserve_row(ds, 0)) != LP_OK)
        return lp_fail(rc, msg, msglen, "out of memory");
    size_t i = ds->n;
    for (size_t j = 0; j < d; j++) {
        double diff = x1[j] - x0[j];
        if (ds->storage == LP_STORE_F32)
            ds->xf[i * d + j] = (float)diff;
        else
            ds->xd[i * d + j] = diff;
        ds->sum_chosen[j] += z ? x1[j] : x0[j];
        ds->sum_rejected[j] += z ? x0[j] : x1[j];
    }
    ds->z[i] = (uint8_t)z;
    ds->eps[i] = eps;
    ds->y[i] = (int8_t)y;
    ds->group[i] = 0;
    ds->n++;
    return LP_OK;
}

int lp_dataset_add_sparse(lp_dataset *ds, const lp_sparse *f0, const lp_sparse *f1, int z,
                          double eps, int y, char *msg, size_t msglen)
{
    assert(ds->storage == LP_STORE_CSR);
    int rc = check_label(z, eps, y, msg, msglen);
    if (rc != LP_OK)
        return rc;
    lp_sparse df = {0};
    if (lp_sparse_sub(f1, f0, &df) != LP_OK || reserve_row(ds, df.nnz) != LP_OK) {
        lp_sparse_free(&df);
        return lp_fail(LP_ENO_MEMORY, msg, msglen, "out of memory");
    }
    for (size_t k = 0; k < df.nnz; k++) {
        assert(df.idx[k] < ds->d);
        ds->col[ds->nnz + k] = df.idx[k];
        ds->val[ds->nnz + k] = df.val[k];
    }
    const lp_sparse *ch = z ? f1 : f0, *rj = z ? f0 : f1;
    for (size_t k = 0; k < ch->nnz; k++)
        ds->sum_chosen[ch->idx[k]] += ch->val[k];
    for (size_t k = 0; k < rj->nnz; k++)
        ds->sum_rejected[rj->idx[k]] += rj->val[k];
    ds->nnz += df.nnz;
    ds->rowptr[ds->n + 1] = ds->nnz;
    ds->z[ds->n] = (uint8_t)z;
    ds->eps[ds->n] = eps;
    ds->y[ds->n] = (int8_t)y;
    ds->group[ds->n] = 0;
    ds->n++;
    lp_sparse_free(&df);
    return LP_OK;
}

/* Reads a JSON array of numbers into a (grown) double buffer. *len is set
 * to its length. */
static int read_vector(const json_t *obj, const char *key, double **buf, size_t *cap, size_t *len,
                       char *msg, size_t msglen)
{
    const json_t *a = json_object_get(obj, key);
    if (a == NULL)
        return lp_fail(LP_EMISSING_FIELD, msg, msglen, "missing field \"%s\"", key);
    if (!json_is_array(a))
        return lp_fail(LP_EWRONG_TYPE, msg, msglen, "\"%s\" must be an array of numbers", key);
    size_t n = json_array_size(a);
    if (n > *cap) {
        double *b = realloc(*buf, n * sizeof *b);
        if (b == NULL)
            return lp_fail(LP_ENO_MEMORY, msg, msglen, "out of memory");
        *buf = b;
        *cap = n;
    }
    for (size_t j = 0; j < n; j++) {
        const json_t *v = json_array_get(a, j);
        if (!json_is_number(v))
            return lp_fail(LP_EWRONG_TYPE, msg, msglen, "\"%s\"[%zu] is not a number", key, j);
        double x = json_number_value(v);
        if (!isfinite(x))
            return lp_fail(LP_EWRONG_TYPE, msg, msglen, "\"%s\"[%zu] is not finite", key, j);
        (*buf)[j] = x;
    }
    *len = n;
    return LP_OK;
}

static int get_text(const json_t *obj, const char *key, const char **out, char *msg, size_t msglen)
{
    const json_t *v = json_object_get(obj, key);
    if (v == NULL)
        return lp_fail(LP_EMISSING_FIELD, msg, msglen, "missing field \"%s\"", key);
    if (!json_is_string(v))
        return lp_fail(LP_EWRONG_TYPE, msg, msglen, "\"%s\" must be a string", key);
    *out = json_string_value(v);
    return LP_OK;
}

/* Parsed view of one record (borrowed from the JSON object). */
typedef struct record {
    int dense;
    int z, y;
    double eps;
    const char *prompt, *a0, *a1;
    int has_user;
    int64_t user;
} record;

static int classify(const json_t *o, lp_data_format *fmt)
{
    if (json_object_get(o, "x0") != NULL || json_object_get(o, "x1") != NULL)
        *fmt = LP_FMT_DENSE;
    else if (json_object_get(o, "epsilon") != NULL || json_object_get(o, "label_id") != NULL)
        *fmt = LP_FMT_EXPORT;
    else
        *fmt = LP_FMT_PAIRS;
    return LP_OK;
}

typedef struct loader {
    const lp_load_opts *opts;
    lp_dataset *ds;
    lp_data_format fmt;
    int text;
    double *v0, *v1;
    size_t c0, c1;
    lp_sparse f0, f1;
    int64_t *user; /* annotator ids of the rows so far (when the first record had one) */
    size_t user_cap;
} loader;

/* The optional annotator field: "annotator" or "user", an integer >= 0 or a
 * string (hashed). */
static int read_user(const json_t *o, record *r, char *msg, size_t msglen)
{
    const json_t *a = json_object_get(o, "annotator"), *u = json_object_get(o, "user");
    if (a != NULL && u != NULL)
        return lp_fail(LP_EINVALID_ARGUMENT, msg, msglen,
                       "give \"annotator\" or \"user\", not both");
    const json_t *v = a ? a : u;
    if (v == NULL)
        return LP_OK;
    if (json_is_integer(v) && json_integer_value(v) >= 0)
        r->user = (int64_t)json_integer_value(v);
    else if (json_is_string(v))
        r->user = (int64_t)(lp_dataset_prompt_key(json_string_value(v)) & (uint64_t)INT64_MAX);
    else
        return lp_fail(LP_EWRONG_TYPE, msg, msglen, "\"%s\" must be an integer >= 0 or a string",
                       a ? "annotator" : "user");
    r->has_user = 1;
    return LP_OK;
}

/* Records the row's annotator; all records or none must have one. */
static int keep_user(loader *L, const record *r, char *msg, size_t msglen)
{
    size_t i = L->ds->n - 1;
    if (r->has_user != (i == 0 ? r->has_user : L->user != NULL))
        return lp_fail(LP_EINVALID_ARGUMENT, msg, msglen,
                       "an annotator is given on some records but not on others");
    if (!r->has_user)
        return LP_OK;
    if (i >= L->user_cap) {
        size_t nc = lp_grow_cap(L->user_cap, i + 1, 64);
        if (nc == 0 || lp_array_resize((void **)&L->user, nc, sizeof *L->user) != LP_OK)
            return lp_fail(LP_ENO_MEMORY, msg, msglen, "out of memory");
        L->user_cap = nc;
    }
    L->user[i] = r->user;
    return LP_OK;
}

/* Handles one parsed record. */
static int load_record(loader *L, const json_t *o, size_t lineno, char *msg, size_t msglen)
{
    char m[LP_MSG_MAX] = "";
    int rc;
    lp_data_format f;
    classify(o, &f);
    if (L->ds != NULL && f != L->fmt)
        return lp_fail(LP_EINVALID_ARGUMENT, msg, msglen,
                       "line %zu: record format differs from the first record's", lineno);
    L->fmt = f;
    record r = {.y = -1};
    size_t n0 = 0, n1 = 0;
    if (f == LP_FMT_DENSE) {
        static const char *const allowed[] = {"x0", "x1",     "z",    "epsilon",   "id",
                                              "y",  "prompt", "user", "annotator", NULL};
        if ((rc = lp_json_only_fields(o, allowed, m, sizeof m)) != LP_OK)
            goto fail;
        if ((rc = read_vector(o, "x0", &L->v0, &L->c0, &n0, m, sizeof m)) != LP_OK ||
            (rc = read_vector(o, "x1", &L->v1, &L->c1, &n1, m, sizeof m)) != LP_OK)
            goto fail;
        r.dense = 1;
        const json_t *zv = json_object_get(o, "z");
        if (zv == NULL) {
            rc = lp_fail(LP_EMISSING_FIELD, m, sizeof m, "missing field \"z\"");
            goto fail;
        }
        if (!json_is_integer(zv) || json_integer_value(zv) < 0 || json_integer_value(zv) > 1) {
            rc = lp_fail(LP_EBAD_LABEL, m, sizeof m, "\"z\" must be 0 or 1");
            goto fail;
        }
        r.z = (int)json_integer_value(zv);
        const json_t *yv = json_object_get(o, "y");
        if (yv != NULL) {
            if (!json_is_integer(yv) || json_integer_value(yv) < 0 || json_integer_value(yv) > 1) {
                rc = lp_fail(LP_EBAD_LABEL, m, sizeof m, "\"y\" must be 0 or 1");
                goto fail;
            }
            r.y = (int)json_integer_value(yv);
        }
        if ((rc = lp_json_get_epsilon(o, "epsilon", &r.eps, m, sizeof m)) != LP_OK)
            goto fail;
        if (json_object_get(o, "prompt") != NULL &&
            (rc = get_text(o, "prompt", &r.prompt, m, sizeof m)) != LP_OK)
            goto fail;
    } else {
        if ((rc = get_text(o, "prompt", &r.prompt, m, sizeof m)) != LP_OK ||
            (rc = get_text(o, "chosen", &r.a1, m, sizeof m)) != LP_OK ||
            (rc = get_text(o, "rejected", &r.a0, m, sizeof m)) != LP_OK)
            goto fail;
        r.z = 1;
        r.eps = INFINITY;
        if (f == LP_FMT_EXPORT) {
            if ((rc = lp_json_get_epsilon(o, "epsilon", &r.eps, m, sizeof m)) != LP_OK)
                goto fail;
            if (json_object_get(o, "chosen_features") != NULL &&
                json_object_get(o, "rejected_features") != NULL) {
                if ((rc = read_vector(o, "chosen_features", &L->v1, &L->c1, &n1, m, sizeof m)) !=
                        LP_OK ||
                    (rc = read_vector(o, "rejected_features", &L->v0, &L->c0, &n0, m, sizeof m)) !=
                        LP_OK)
                    goto fail;
                r.dense = 1;
            }
        }
    }
    if ((rc = read_user(o, &r, m, sizeof m)) != LP_OK)
        goto fail;
    if (r.dense && n0 != n1) {
        rc = lp_fail(LP_EINVALID_ARGUMENT, m, sizeof m,
                     "ragged vectors: %zu features for response 0, %zu for response 1", n0, n1);
        goto fail;
    }
    if (r.dense && n0 == 0) {
        rc = lp_fail(LP_EINVALID_ARGUMENT, m, sizeof m, "empty feature vectors");
        goto fail;
    }
    if (L->ds == NULL) {
        L->text = !r.dense;
        if (L->text && L->opts->fz == NULL) {
            rc = lp_fail(LP_EINVALID_ARGUMENT, m, sizeof m,
                         "text records need a featurizer (no feature vectors given)");
            goto fail;
        }
        if (L->text)
            L->ds = lp_dataset_new(lp_feat_dim(lp_featurizer_spec(L->opts->fz)), LP_STORE_CSR);
        else
            L->ds = lp_dataset_new(n0, L->opts->prefer_f32 == 1 ? LP_STORE_F32 : LP_STORE_F64);
        if (L->ds == NULL) {
            rc = lp_fail(LP_ENO_MEMORY, m, sizeof m, "out of memory");
            goto fail;
        }
    }
    if (r.dense != !L->text) {
        rc = lp_fail(LP_EINVALID_ARGUMENT, m, sizeof m,
                     "mixes records with and without feature vectors");
        goto fail;
    }
    if (r.dense) {
        if (n0 != L->ds->d) {
            rc = lp_fail(LP_EINVALID_ARGUMENT, m, sizeof m,
                         "ragged vectors: %zu features, the first record had %zu", n0, L->ds->d);
            goto fail;
        }
        rc = lp_dataset_add_dense(L->ds, L->v0, L->v1, r.z, r.eps, r.y, m, sizeof m);
    } else {
        if ((rc = lp_featurize(L->opts->fz, r.prompt, r.a0, &L->f0)) != LP_OK ||
            (rc = lp_featurize(L->opts->fz, r.prompt, r.a1, &L->f1)) != LP_OK) {
            lp_fail(rc, m, sizeof m, "featurizer failed");
            goto fail;
        }
        rc = lp_dataset_add_sparse(L->ds, &L->f0, &L->f1, r.z, r.eps, r.y, m, sizeof m);
    }
    if (rc == LP_OK && (rc = keep_user(L, &r, m, sizeof m)) != LP_OK)
        goto fail;
    if (rc == LP_OK) {
        if (r.prompt != NULL)
            L->ds->group[L->ds->n - 1] = lp_dataset_prompt_key(r.prompt);
        if (L->opts->on_pair != NULL) {
            rc = L->opts->on_pair(L->opts->on_pair_ctx, L->ds->group[L->ds->n - 1],
                                  r.dense ? L->v0 : NULL, r.dense ? L->v1 : NULL,
                                  r.dense ? NULL : &L->f0, r.dense ? NULL : &L->f1, L->ds->d, r.z,
                                  r.eps);
            if (rc != LP_OK) {
                lp_fail(rc, m, sizeof m, "%s", lp_error_message(rc));
                goto fail;
            }
        }
        return LP_OK;
    }
fail:
    return lp_fail(rc, msg, msglen, "line %zu: %s", lineno, m);
}

/* Converts a float64 dense dataset to float32 in place (new buffer). */
static int to_f32(lp_dataset *ds, char *msg, size_t msglen)
{
    size_t nd = ds->n * ds->d;
    for (size_t k = 0; k < nd; k++)
        if (fabs(ds->xd[k]) > FLT_MAX)
            return lp_fail(LP_EINVALID_ARGUMENT, msg, msglen,
                           "line %zu: feature %zu is not representable in float32", k / ds->d + 1,
                           k % ds->d);
    float *x = aligned_alloc64(nd * sizeof(float));
    if (x == NULL)
        return lp_fail(LP_ENO_MEMORY, msg, msglen, "out of memory");
    for (size_t k = 0; k < nd; k++)
        x[k] = (float)ds->xd[k];
    free(ds->xd);
    ds->xd = NULL;
    ds->xf = x;
    ds->storage = LP_STORE_F32;
    return LP_OK;
}

int lp_dataset_load(const char *path, const lp_load_opts *opts, lp_dataset **out,
                    lp_data_format *fmt, char *msg, size_t msglen)
{
    *out = NULL;
    FILE *f = strcmp(path, "-") == 0 ? stdin : fopen(path, "r");
    if (f == NULL)
        return lp_fail(LP_EIO, msg, msglen, "cannot open %s", path);
    loader L = {.opts = opts};
    size_t max_line = opts->max_line ? opts->max_line : DEFAULT_MAX_LINE;
    char *line = NULL;
    size_t cap = 0, lineno = 0;
    ssize_t len;
    int rc = LP_OK;
    while ((len = getline(&line, &cap, f)) >= 0) {
        lineno++;
        if ((size_t)len > max_line) {
            rc = lp_fail(LP_ETOO_LONG, msg, msglen, "line %zu: longer than %zu bytes", lineno,
                         max_line);
            goto done;
        }
        size_t k = 0;
        while (k < (size_t)len &&
               (line[k] == ' ' || line[k] == '\t' || line[k] == '\r' || line[k] == '\n'))
            k++;
        if (k == (size_t)len)
            continue; /* blank line */
        json_error_t err;
        json_t *o = json_loadb(line, (size_t)len, JSON_REJECT_DUPLICATES, &err);
        if (o == NULL || !json_is_object(o)) {
            rc = lp_fail(LP_EMALFORMED_JSON, msg, msglen, "line %zu: %s", lineno,
                         o == NULL ? err.text : "not a JSON object");
            json_decref(o);
            goto done;
        }
        rc = load_record(&L, o, lineno, msg, msglen);
        json_decref(o);
        if (rc != LP_OK)
            goto done;
    }
    if (ferror(f)) {
        rc = lp_fail(LP_EIO, msg, msglen, "read error on %s", path);
        goto done;
    }
    if (L.ds == NULL || L.ds->n == 0) {
        rc = lp_fail(LP_EINVALID_ARGUMENT, msg, msglen, "%s: no labels (empty data)", path);
        goto done;
    }
    if (L.ds->storage == LP_STORE_F64 && opts->prefer_f32 == -1 &&
        L.ds->n * L.ds->d > AUTO_F64_LIMIT)
        rc = to_f32(L.ds, msg, msglen);
done:
    free(line);
    free(L.v0);
    free(L.v1);
    if (rc == LP_OK && L.ds != NULL) {
        L.ds->user = L.user;
        L.user = NULL;
    }
    free(L.user);
    lp_sparse_free(&L.f0);
    lp_sparse_free(&L.f1);
    if (f != stdin)
        fclose(f);
    if (rc != LP_OK) {
        lp_dataset_free(L.ds);
        return rc;
    }
    if (fmt != NULL)
        *fmt = L.fmt;
    *out = L.ds;
    return LP_OK;
}

static int copy_users(lp_dataset *s, const lp_dataset *ds, const size_t *idx, size_t k)
{
    if (ds->user == NULL)
        return LP_OK;
    if ((s->user = malloc((k ? k : 1) * sizeof *s->user)) == NULL)
        return LP_ENO_MEMORY;
    for (size_t t = 0; t < k; t++)
        s->user[t] = ds->user[idx[t]];
    return LP_OK;
}

lp_dataset *lp_dataset_subset(const lp_dataset *ds, const size_t *idx, size_t k)
{
    lp_dataset *s;
    size_t d = ds->d;
    if (ds->storage == LP_STORE_CSR) {
        s = lp_dataset_new(d, LP_STORE_CSR);
        if (s == NULL)
            return NULL;
        for (size_t t = 0; t < k; t++) {
            size_t i = idx[t], a = ds->rowptr[i], b = ds->rowptr[i + 1];
            if (reserve_row(s, b - a) != LP_OK) {
                lp_dataset_free(s);
                return NULL;
            }
            memcpy(s->col + s->nnz, ds->col + a, (b - a) * sizeof *s->col);
            memcpy(s->val + s->nnz, ds->val + a, (b - a) * sizeof *s->val);
            s->nnz += b - a;
            s->rowptr[s->n + 1] = s->nnz;
            s->z[s->n] = ds->z[i];
            s->eps[s->n] = ds->eps[i];
            s->y[s->n] = ds->y ? ds->y[i] : -1;
            s->group[s->n] = ds->group ? ds->group[i] : 0;
            s->n++;
        }
        if (copy_users(s, ds, idx, k) != LP_OK) {
            lp_dataset_free(s);
            return NULL;
        }
        free(s->sum_chosen); /* not tracked for subsets */
        free(s->sum_rejected);
        s->sum_chosen = s->sum_rejected = NULL;
        return s;
    }
    s = lp_dataset_new_dense(k, d, ds->storage);
    if (s == NULL)
        return NULL;
    s->y = malloc(k ? k : 1);
    if (ds->group != NULL && s->group == NULL)
        s->group = malloc((k ? k : 1) * sizeof *s->group);
    if (s->y == NULL || (ds->group != NULL && s->group == NULL)) {
        lp_dataset_free(s);
        return NULL;
    }
    for (size_t t = 0; t < k; t++) {
        size_t i = idx[t];
        if (s->group != NULL)
            s->group[t] = ds->group ? ds->group[i] : 0;
        if (ds->storage == LP_STORE_F32)
            memcpy(s->xf + t * d, ds->xf + i * d, d * sizeof(float));
        else
            memcpy(s->xd + t * d, ds->xd + i * d, d * sizeof(double));
        s->z[t] = ds->z[i];
        s->eps[t] = ds->eps[i];
        s->y[t] = ds->y ? ds->y[i] : -1;
    }
    if (copy_users(s, ds, idx, k) != LP_OK) {
        lp_dataset_free(s);
        return NULL;
    }
    return s;
}

uint64_t lp_dataset_prompt_key(const char *prompt)
{
    uint64_t h = 0xcbf29ce484222325ULL;
    for (const char *p = prompt; *p; p++)
        h = (h ^ (uint8_t)*p) * 0x100000001b3ULL;
    return h ? h : 1;
}

double lp_dataset_row_dot(const lp_dataset *ds, size_t i, const double *theta)
{
    double s = 0.0;
    size_t d = ds->d;
    switch (ds->storage) {
    case LP_STORE_F32:
        for (size_t j = 0; j < d; j++)
            s += (double)ds->xf[i * d + j] * theta[j];
        break;
    case LP_STORE_F64:
        for (size_t j = 0; j < d; j++)
            s += ds->xd[i * d + j] * theta[j];
        break;
    case LP_STORE_CSR:
        for (size_t k = ds->rowptr[i]; k < ds->rowptr[i + 1]; k++)
            s += ds->val[k] * theta[ds->col[k]];
        break;
    }
    return s;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

size_t lp_dataset_eps_hist(const lp_dataset *ds, lp_eps_bin *bins, size_t max_bins, size_t *n_other)
{
    size_t nb = 0, other = 0;
    for (size_t i = 0; i < ds->n; i++) {
        size_t b = 0;
        while (b < nb && bins[b].eps != ds->eps[i])
            b++;
        if (b < nb)
            bins[b].count++;
        else if (nb < max_bins) {
            bins[nb].eps = ds->eps[i];
            bins[nb++].count = 1;
        } else
            other++;
    }
    /* sort bins by eps (struct starts with eps; sort pairs manually) */
    for (size_t a = 1; a < nb; a++)
        for (size_t b = a; b > 0 && cmp_double(&bins[b - 1].eps, &bins[b].eps) > 0; b--) {
            lp_eps_bin t = bins[b];
            bins[b] = bins[b - 1];
            bins[b - 1] = t;
        }
    if (n_other != NULL)
        *n_other = other;
    return nb;
}
