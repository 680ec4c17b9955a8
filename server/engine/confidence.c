/* confidence.c — the confidence record and its bounds. See confidence.h. */
#include "confidence.h"

#include "error.h"
#include "wire.h"

#include <cblas.h>
#include <math.h>
#include <sodium.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* LAPACK's Cholesky factorization (exported by OpenBLAS; column-major). */
extern void dpotrf_(const char *uplo, const int *n, double *a, const int *lda, int *info);

#define ROW_BLOCK 256  /* rows scaled and accumulated per dsyrk call */
#define CAND_BLOCK 256 /* candidates solved per dtrsm call */

struct lp_conf {
    size_t d;
    int diagonal;
    double lambda;
    double *u; /* full: the upper Cholesky factor U (M = U^T U), d*d row-major;
                  diagonal: 1 / (Sigma_jj + lambda) */
};

double lp_conf_weight(double eps)
{
    if (isinf(eps))
        return 1.0;
    double t = tanh(eps / 2.0);
    return t * t;
}

/* Row i of ds as dense doubles (d values). */
static void row_dense(const lp_dataset *ds, size_t i, double *out)
{
    size_t d = ds->d;
    if (ds->storage == LP_STORE_F64) {
        memcpy(out, ds->xd + i * d, d * sizeof *out);
    } else if (ds->storage == LP_STORE_F32) {
        for (size_t j = 0; j < d; j++)
            out[j] = ds->xf[i * d + j];
    } else {
        memset(out, 0, d * sizeof *out);
        for (size_t k = ds->rowptr[i]; k < ds->rowptr[i + 1]; k++)
            out[ds->col[k]] += ds->val[k];
    }
}

/* Sigma's upper triangle (full, d*d row-major) by blocks of weighted rows. */
static int sigma_full(const lp_dataset *ds, double *sigma)
{
    size_t d = ds->d;
    double *a = malloc(ROW_BLOCK * d * sizeof *a);
    if (a == NULL)
        return LP_ENO_MEMORY;
    memset(sigma, 0, d * d * sizeof *sigma);
    for (size_t i0 = 0; i0 < ds->n; i0 += ROW_BLOCK) {
        size_t b = ds->n - i0 < ROW_BLOCK ? ds->n - i0 : ROW_BLOCK;
        for (size_t r = 0; r < b; r++) {
            double s = sqrt(lp_conf_weight(ds->eps[i0 + r]));
            row_dense(ds, i0 + r, a + r * d);
            for (size_t j = 0; j < d; j++)
                a[r * d + j] *= s;
        }
        cblas_dsyrk(CblasRowMajor, CblasUpper, CblasTrans, (int)d, (int)b, 1.0, a, (int)d, 1.0,
                    sigma, (int)d);
    }
    free(a);
    return LP_OK;
}

/* Sigma's diagonal (d values). */
static void sigma_diag(const lp_dataset *ds, double *diag)
{
    size_t d = ds->d;
    memset(diag, 0, d * sizeof *diag);
    for (size_t i = 0; i < ds->n; i++) {
        double w = lp_conf_weight(ds->eps[i]);
        if (ds->storage == LP_STORE_CSR) {
            for (size_t k = ds->rowptr[i]; k < ds->rowptr[i + 1]; k++)
                diag[ds->col[k]] += w * ds->val[k] * ds->val[k];
        } else {
            for (size_t j = 0; j < d; j++) {
                double x = ds->storage == LP_STORE_F64 ? ds->xd[i * d + j] : ds->xf[i * d + j];
                diag[j] += w * x * x;
            }
        }
    }
}

/* base64 of v[0..k) as little-endian binary64. */
static json_t *encode(const double *v, size_t k)
{
    uint8_t *bytes = malloc(k * 8 + 1);
    size_t blen = sodium_base64_encoded_len(k * 8, sodium_base64_VARIANT_ORIGINAL);
    char *b64 = malloc(blen);
    json_t *s = NULL;
    if (bytes != NULL && b64 != NULL) {
        for (size_t i = 0; i < k; i++) {
            uint64_t u;
            memcpy(&u, &v[i], 8);
            for (int b = 0; b < 8; b++)
                bytes[i * 8 + (size_t)b] = (uint8_t)(u >> (8 * b));
        }
        sodium_bin2base64(b64, blen, bytes, k * 8, sodium_base64_VARIANT_ORIGINAL);
        s = json_string(b64);
    }
    free(bytes);
    free(b64);
    return s;
}

int lp_conf_record(const lp_dataset *ds, double lambda, json_t **out)
{
    *out = NULL;
    if (ds == NULL || ds->n == 0 || !(lambda > 0.0) || !isfinite(lambda))
        return LP_EINVALID_ARGUMENT;
    size_t d = ds->d;
    if (d > LP_CONF_DIAG_MAX)
        return LP_OK;
    int full = d <= LP_CONF_FULL_MAX;
    double *sigma = malloc((full ? d * d : d) * sizeof *sigma);
    if (sigma == NULL)
        return LP_ENO_MEMORY;
    int rc = LP_OK;
    if (full)
        rc = sigma_full(ds, sigma);
    else
        sigma_diag(ds, sigma);
    size_t k = 0;
    if (full) /* pack the upper triangle row by row */
        for (size_t i = 0; i < d; i++)
            for (size_t j = i; j < d; j++)
                sigma[k++] = sigma[i * d + j];
    else
        k = d;
    double wsum = 0.0;
    for (size_t i = 0; i < ds->n; i++)
        wsum += lp_conf_weight(ds->eps[i]);
    json_t *blob = rc == LP_OK ? encode(sigma, k) : NULL;
    free(sigma);
    if (blob == NULL)
        return rc != LP_OK ? rc : LP_ENO_MEMORY;
    *out =
        json_pack("{s:s, s:f, s:s, s:I, s:f, s:I, s:s, s:o}", "form", full ? "full" : "diagonal",
                  "lambda", lambda, "weighting", "tanh2", "labels", (json_int_t)ds->n, "weight_sum",
                  wsum, "dim", (json_int_t)d, "encoding", "base64-f64le", "sigma", blob);
    return *out != NULL ? LP_OK : LP_ENO_MEMORY;
}

int lp_conf_attach(lp_model *m, const lp_dataset *ds)
{
    json_t *rec = NULL;
    int rc = m->general != NULL ? LP_OK : lp_conf_record(ds, LP_CONF_LAMBDA, &rec);
    if (rc != LP_OK)
        return rc;
    json_decref(m->confidence);
    m->confidence = rec;
    return LP_OK;
}

int lp_conf_decode(const json_t *rec, size_t d, double *sigma, int *diagonal, char *msg,
                   size_t msglen)
{
    const char *form = json_string_value(json_object_get(rec, "form"));
    const char *enc = json_string_value(json_object_get(rec, "encoding"));
    const char *b64 = json_string_value(json_object_get(rec, "sigma"));
    const json_t *dim = json_object_get(rec, "dim");
    if (!json_is_object(rec) || form == NULL || enc == NULL || b64 == NULL || !json_is_integer(dim))
        return lp_fail(LP_EWRONG_TYPE, msg, msglen,
                       "confidence needs form, dim, encoding and sigma");
    int diag = strcmp(form, "diagonal") == 0;
    if ((!diag && strcmp(form, "full") != 0) || strcmp(enc, "base64-f64le") != 0)
        return lp_fail(LP_EWRONG_TYPE, msg, msglen, "confidence: unknown form or encoding");
    if (json_integer_value(dim) != (json_int_t)d || d == 0 ||
        d > (diag ? LP_CONF_DIAG_MAX : LP_CONF_FULL_MAX))
        return lp_fail(LP_EWRONG_TYPE, msg, msglen, "confidence: dim does not fit the model");
    size_t k = diag ? d : d * (d + 1) / 2;
    uint8_t *bytes = malloc(k * 8 + 1);
    if (bytes == NULL)
        return lp_fail(LP_ENO_MEMORY, msg, msglen, "out of memory");
    size_t blen = 0;
    int bad = sodium_base642bin(bytes, k * 8 + 1, b64, strlen(b64), NULL, &blen, NULL,
                                sodium_base64_VARIANT_ORIGINAL) != 0 ||
              blen != k * 8;
    for (size_t i = 0; !bad && sigma != NULL && i < k; i++) {
        uint64_t u = 0;
        for (int b = 0; b < 8; b++)
            u |= (uint64_t)bytes[i * 8 + (size_t)b] << (8 * b);
        double x;
        memcpy(&x, &u, 8);
        sigma[i] = x;
    }
    free(bytes);
    if (bad)
        return lp_fail(LP_EMALFORMED_JSON, msg, msglen,
                       "confidence: sigma is not base64 of %zu doubles", k);
    if (sigma != NULL && !diag) { /* unpack the upper triangle into both */
        double *packed = malloc(k * sizeof *packed);
        if (packed == NULL)
            return lp_fail(LP_ENO_MEMORY, msg, msglen, "out of memory");
        memcpy(packed, sigma, k * sizeof *packed);
        size_t p = 0;
        for (size_t i = 0; i < d; i++)
            for (size_t j = i; j < d; j++, p++)
                sigma[i * d + j] = sigma[j * d + i] = packed[p];
        free(packed);
    }
    for (size_t i = 0; sigma != NULL && i < (diag ? d : d * d); i++)
        if (!isfinite(sigma[i]))
            return lp_fail(LP_EWRONG_TYPE, msg, msglen, "confidence: sigma is not finite");
    if (diagonal != NULL)
        *diagonal = diag;
    return LP_OK;
}

void lp_conf_free(lp_conf *c)
{
    if (c == NULL)
        return;
    free(c->u);
    free(c);
}

int lp_conf_prepare(const json_t *rec, size_t d, lp_conf **out, char *msg, size_t msglen)
{
    *out = NULL;
    const json_t *lam = json_object_get(rec, "lambda");
    if (!json_is_number(lam) || !(json_number_value(lam) > 0.0) ||
        !isfinite(json_number_value(lam)))
        return lp_fail(LP_EWRONG_TYPE, msg, msglen, "confidence: lambda must be a number > 0");
    int diag = 0;
    int rc = lp_conf_decode(rec, d, NULL, &diag, msg, msglen);
    if (rc != LP_OK)
        return rc;
    lp_conf *c = calloc(1, sizeof *c);
    if (c != NULL)
        c->u = malloc((diag ? d : d * d) * sizeof *c->u);
    if (c == NULL || c->u == NULL) {
        lp_conf_free(c);
        return lp_fail(LP_ENO_MEMORY, msg, msglen, "out of memory");
    }
    c->d = d;
    c->diagonal = diag;
    c->lambda = json_number_value(lam);
    rc = lp_conf_decode(rec, d, c->u, NULL, msg, msglen);
    for (size_t j = 0; rc == LP_OK && j < d; j++)
        c->u[diag ? j : j * d + j] += c->lambda;
    if (rc == LP_OK && diag) {
        for (size_t j = 0; j < d; j++)
            c->u[j] = 1.0 / c->u[j];
    } else if (rc == LP_OK) {
        /* Row-major upper = column-major lower: ask LAPACK for "L". */
        int n = (int)d, info = 0;
        dpotrf_("L", &n, c->u, &n, &info);
        if (info != 0)
            rc = lp_fail(LP_EWRONG_TYPE, msg, msglen,
                         "confidence: sigma + lambda I is not positive definite");
        for (size_t i = 0; rc == LP_OK && i < d; i++) /* clear the unused triangle */
            for (size_t j = 0; j < i; j++)
                c->u[i * d + j] = 0.0;
    }
    if (rc != LP_OK) {
        lp_conf_free(c);
        return rc;
    }
    *out = c;
    return LP_OK;
}

double lp_conf_width(const lp_conf *c, const double *v, double *work)
{
    double s = 0.0;
    if (c->diagonal) {
        for (size_t j = 0; j < c->d; j++)
            s += v[j] * v[j] * c->u[j];
        return sqrt(s);
    }
    /* v^T M^-1 v = ||U^-T v||^2 */
    memcpy(work, v, c->d * sizeof *work);
    cblas_dtrsv(CblasRowMajor, CblasUpper, CblasTrans, CblasNonUnit, (int)c->d, c->u, (int)c->d,
                work, 1);
    for (size_t j = 0; j < c->d; j++)
        s += work[j] * work[j];
    return sqrt(s);
}

/* Candidate k's difference to the reference as dense values (d). */
static void difference(const lp_sparse *fk, const double *ref, size_t d, double *v)
{
    for (size_t j = 0; j < d; j++)
        v[j] = -ref[j];
    for (size_t t = 0; t < fk->nnz; t++)
        if (fk->idx[t] < d)
            v[fk->idx[t]] += fk->val[t];
}

int lp_conf_lower(const lp_conf *c, const lp_sparse *f, const double *r, const double *log_ref,
                  size_t K, double gamma, double *lower, double *width)
{
    if (K == 0 || !(gamma >= 0.0) || !isfinite(gamma))
        return LP_EINVALID_ARGUMENT;
    size_t d = c->d, rows = c->diagonal ? 1 : CAND_BLOCK;
    double *w = malloc(K * sizeof *w), *ref = calloc(d, sizeof *ref);
    double *v = malloc(rows * d * sizeof *v);
    int rc = w && ref && v ? LP_OK : LP_ENO_MEMORY;
    double mx = -INFINITY, z = 0.0;
    for (size_t k = 0; rc == LP_OK && k < K; k++)
        mx = fmax(mx, log_ref ? log_ref[k] : 0.0);
    for (size_t k = 0; rc == LP_OK && k < K; k++)
        z += w[k] = exp((log_ref ? log_ref[k] : 0.0) - mx);
    for (size_t k = 0; rc == LP_OK && k < K; k++) /* f_ref = sum_k pi_ref,k f_k */
        for (size_t t = 0; t < f[k].nnz; t++)
            if (f[k].idx[t] < d)
                ref[f[k].idx[t]] += w[k] / z * f[k].val[t];
    for (size_t k0 = 0; rc == LP_OK && k0 < K; k0 += rows) {
        size_t b = K - k0 < rows ? K - k0 : rows;
        for (size_t i = 0; i < b; i++)
            difference(&f[k0 + i], ref, d, v + i * d);
        /* full: the rows of V U^-1 are (U^-T v_k)^T, one BLAS-3 solve per block */
        if (!c->diagonal)
            cblas_dtrsm(CblasRowMajor, CblasRight, CblasUpper, CblasNoTrans, CblasNonUnit, (int)b,
                        (int)d, 1.0, c->u, (int)d, v, (int)d);
        for (size_t i = 0; i < b; i++) {
            double q = 0.0;
            for (size_t j = 0; j < d; j++)
                q += v[i * d + j] * v[i * d + j] * (c->diagonal ? c->u[j] : 1.0);
            size_t k = k0 + i;
            lower[k] = gamma == 0.0 ? r[k] : r[k] - gamma * sqrt(q);
            if (width != NULL)
                width[k] = sqrt(q);
        }
    }
    free(w);
    free(ref);
    free(v);
    return rc;
}
