/*
 * test_confidence.c — the confidence record and pessimistic scores
 * (server/engine/confidence.h, server/service/served.h): the recorded
 * covariance equals sum_i tanh(eps_i/2)^2 x_i x_i^T computed here
 * independently, survives the model file's write and read bit for bit, the
 * bound equals the reward at Gamma = 0, widens along a direction the data
 * covers poorly exactly as (Sigma + lambda I)^-1 says, the pessimistic
 * policy sums to 1 and moves away from the uncertain candidate; the
 * diagonal form of large dimensions, the cap, and the rejection of
 * malformed records.
 */
#include "check.h"
#include "confidence.h"
#include "dataset.h"
#include "error.h"
#include "model.h"
#include "prng.h"
#include "served.h"
#include "tmpdir.h"

#include <jansson.h>
#include <math.h>
#include <sodium.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define D 3
#define N 400
#define POOR_SCALE 0.02 /* feature 2 barely varies in the training pairs */

/* N rows: x ~ N(0, 1) in features 0, 1 and N(0, POOR_SCALE^2) in feature 2;
 * eps alternates 1 and +inf. */
static lp_dataset *poor_data(lp_storage storage)
{
    lp_dataset *ds = lp_dataset_new_dense(N, D, storage);
    lp_prng g;
    lp_prng_seed(&g, 14);
    for (size_t i = 0; ds && i < N; i++) {
        for (size_t j = 0; j < D; j++) {
            double x = lp_prng_normal(&g) * (j == 2 ? POOR_SCALE : 1.0);
            if (storage == LP_STORE_F64)
                ds->xd[i * D + j] = x;
            else
                ds->xf[i * D + j] = (float)x;
        }
        ds->z[i] = (uint8_t)(i % 3 == 0);
        ds->eps[i] = i % 2 ? 1.0 : INFINITY;
    }
    return ds;
}

/* sum_i w_i x_i x_i^T by plain loops. */
static void naive_sigma(const lp_dataset *ds, double *s)
{
    size_t d = ds->d;
    memset(s, 0, d * d * sizeof *s);
    for (size_t i = 0; i < ds->n; i++) {
        double w = isinf(ds->eps[i]) ? 1.0 : pow((exp(ds->eps[i]) - 1) / (exp(ds->eps[i]) + 1), 2);
        for (size_t a = 0; a < d; a++)
            for (size_t b = 0; b < d; b++) {
                double xa = ds->storage == LP_STORE_F64 ? ds->xd[i * d + a] : ds->xf[i * d + a];
                double xb = ds->storage == LP_STORE_F64 ? ds->xd[i * d + b] : ds->xf[i * d + b];
                s[a * d + b] += w * xa * xb;
            }
    }
}

/* v^T (S + lambda I)^-1 v by Gauss-Jordan elimination on a copy (d <= 8). */
static double naive_width(const double *s, size_t d, double lambda, const double *v)
{
    double a[8][9];
    for (size_t i = 0; i < d; i++) {
        for (size_t j = 0; j < d; j++)
            a[i][j] = s[i * d + j] + (i == j ? lambda : 0.0);
        a[i][d] = v[i];
    }
    for (size_t c = 0; c < d; c++)
        for (size_t r = 0; r < d; r++) {
            if (r == c)
                continue;
            double f = a[r][c] / a[c][c];
            for (size_t k = c; k <= d; k++)
                a[r][k] -= f * a[c][k];
        }
    double q = 0.0;
    for (size_t i = 0; i < d; i++)
        q += v[i] * a[i][d] / a[i][i];
    return sqrt(q);
}

static void test_weight(void)
{
    CHECK(lp_conf_weight(INFINITY) == 1.0);
    /* 1/c(eps)^2 with c = (e^eps + 1)/(e^eps - 1) */
    for (double eps = 0.1; eps < 8; eps *= 2) {
        double c = (exp(eps) + 1) / (exp(eps) - 1);
        CHECK_NEAR(lp_conf_weight(eps), 1 / (c * c), 1e-14);
    }
}

static void test_record(void)
{
    lp_dataset *ds = poor_data(LP_STORE_F64);
    json_t *rec = NULL;
    CHECK_ERR(lp_conf_record(ds, LP_CONF_LAMBDA, &rec), LP_OK);
    CHECK(rec != NULL);
    if (rec == NULL || ds == NULL) {
        lp_dataset_free(ds);
        return;
    }
    CHECK_STR(json_string_value(json_object_get(rec, "form")), "full");
    CHECK_INT(json_integer_value(json_object_get(rec, "dim")), D);
    CHECK_INT(json_integer_value(json_object_get(rec, "labels")), N);
    CHECK(json_number_value(json_object_get(rec, "lambda")) == LP_CONF_LAMBDA);
    double t = tanh(0.5);
    CHECK_NEAR(json_number_value(json_object_get(rec, "weight_sum")), N / 2 + N / 2 * t * t, 1e-9);
    double got[D * D], want[D * D];
    int diag = -1;
    char msg[256];
    CHECK_ERR(lp_conf_decode(rec, D, got, &diag, msg, sizeof msg), LP_OK);
    CHECK_INT(diag, 0);
    naive_sigma(ds, want);
    for (size_t k = 0; k < D * D; k++)
        CHECK_NEAR(got[k], want[k], 1e-10 * fabs(want[k]) + 1e-12);
    for (size_t a = 0; a < D; a++) /* symmetric, both triangles filled */
        for (size_t b = 0; b < D; b++)
            CHECK(got[a * D + b] == got[b * D + a]);
    /* float32 storage gives the same matrix of its (rounded) rows */
    lp_dataset *f32 = poor_data(LP_STORE_F32);
    json_t *r32 = NULL;
    CHECK_ERR(lp_conf_record(f32, LP_CONF_LAMBDA, &r32), LP_OK);
    naive_sigma(f32, want);
    CHECK_ERR(lp_conf_decode(r32, D, got, NULL, msg, sizeof msg), LP_OK);
    for (size_t k = 0; k < D * D; k++)
        CHECK_NEAR(got[k], want[k], 1e-10 * fabs(want[k]) + 1e-12);
    json_decref(r32);
    lp_dataset_free(f32);
    json_decref(rec);
    lp_dataset_free(ds);
}

/* A Square chi-PO model of dimension D with theta = (t0, 0, t2) and no
 * record; NULL (a failed check) on no memory. */
static lp_model *small_model(double t0, double t2)
{
    lp_model *m = calloc(1, sizeof *m);
    double *theta = calloc(D, sizeof *theta);
    CHECK(m != NULL && theta != NULL);
    if (m == NULL || theta == NULL) {
        free(m);
        free(theta);
        return NULL;
    }
    m->d = D;
    m->beta = 1;
    m->theta = theta;
    m->theta[0] = t0;
    m->theta[2] = t2;
    m->precision = "float64";
    m->loss.kind = LP_LOSS_SQUARE_CHIPO;
    return m;
}

/* The record goes through lp_model_write and lp_model_read bit for bit. */
static void test_exact_round_trip(void)
{
    char dir[256];
    CHECK(tmpdir_create(dir, sizeof dir, "conf") == 0);
    lp_dataset *ds = poor_data(LP_STORE_F64);
    lp_model *m = small_model(1.0 / 3.0, 0.0);
    if (ds == NULL || m == NULL) {
        lp_model_free(m);
        lp_dataset_free(ds);
        return;
    }
    CHECK_ERR(lp_conf_attach(m, ds), LP_OK);
    char path[512], msg[256];
    snprintf(path, sizeof path, "%s/m.json", dir);
    CHECK_ERR(lp_model_write(m, path), LP_OK);
    lp_model *back = NULL;
    CHECK_ERR(lp_model_read(path, &back, msg, sizeof msg), LP_OK);
    double a[D * D], b[D * D];
    CHECK(back != NULL && back->confidence != NULL);
    if (back != NULL && back->confidence != NULL) {
        CHECK_ERR(lp_conf_decode(m->confidence, D, a, NULL, msg, sizeof msg), LP_OK);
        CHECK_ERR(lp_conf_decode(back->confidence, D, b, NULL, msg, sizeof msg), LP_OK);
        CHECK(memcmp(a, b, sizeof a) == 0); /* bitwise */
        CHECK(json_equal(m->confidence, back->confidence));
        /* the text holds the packed triangle: d(d+1)/2 doubles in base64 */
        const char *s = json_string_value(json_object_get(back->confidence, "sigma"));
        CHECK_INT(strlen(s), 4 * ((D * (D + 1) / 2 * 8 + 2) / 3));
    }
    lp_model_free(back);
    lp_model_free(m);
    lp_dataset_free(ds);
    tmpdir_remove(dir);
}

static lp_sparse dense_sparse(double *v, uint32_t *idx)
{
    for (uint32_t j = 0; j < D; j++)
        idx[j] = j;
    return (lp_sparse){.nnz = D, .cap = D, .idx = idx, .val = v};
}

static void test_bounds(void)
{
    lp_dataset *ds = poor_data(LP_STORE_F64);
    json_t *rec = NULL;
    CHECK_ERR(lp_conf_record(ds, LP_CONF_LAMBDA, &rec), LP_OK);
    lp_conf *c = NULL;
    char msg[256];
    CHECK_ERR(lp_conf_prepare(rec, D, &c, msg, sizeof msg), LP_OK);
    if (c == NULL) {
        json_decref(rec);
        lp_dataset_free(ds);
        return;
    }
    double s[D * D], work[D];
    naive_sigma(ds, s);
    /* widths along the axes: the poorly covered one is far wider, and every
     * width is the one (Sigma + lambda I)^-1 gives */
    double w[D];
    for (size_t j = 0; j < D; j++) {
        double e[D] = {0, 0, 0};
        e[j] = 1.0;
        w[j] = lp_conf_width(c, e, work);
        CHECK_NEAR(w[j], naive_width(s, D, LP_CONF_LAMBDA, e), 1e-12);
    }
    /* Sigma_22 ~ N * weight * POOR_SCALE^2 ~ 0.1: width ~ 1/sqrt(1.1) against
     * ~ 1/sqrt(300) along the covered features */
    CHECK(w[2] > 10 * w[0] && w[2] > 10 * w[1]);
    double mixed[D] = {0.3, -0.7, 0.2};
    CHECK_NEAR(lp_conf_width(c, mixed, work), naive_width(s, D, LP_CONF_LAMBDA, mixed), 1e-12);

    /* Three candidates: 0 and 1 differ along a covered feature, 2 along
     * the poor one; rewards equal. */
    double f[3][D] = {{0, 0, 0}, {0.5, 0, 0}, {0, 0, 0.5}}, r[3] = {0.2, 0.2, 0.2};
    uint32_t idx[3][D];
    lp_sparse sp[3] = {dense_sparse(f[0], idx[0]), dense_sparse(f[1], idx[1]),
                       dense_sparse(f[2], idx[2])};
    double lower[3], width[3];
    CHECK_ERR(lp_conf_lower(c, sp, r, NULL, 3, 0.0, lower, width), LP_OK);
    for (int k = 0; k < 3; k++)
        CHECK(lower[k] == r[k]); /* Gamma = 0: exactly the reward */
    CHECK_ERR(lp_conf_lower(c, sp, r, NULL, 3, 2.0, lower, width), LP_OK);
    for (int k = 0; k < 3; k++) {
        double v[D]; /* f_k minus the candidates' mean */
        for (size_t j = 0; j < D; j++)
            v[j] = f[k][j] - (f[0][j] + f[1][j] + f[2][j]) / 3;
        CHECK_NEAR(width[k], naive_width(s, D, LP_CONF_LAMBDA, v), 1e-12);
        CHECK_NEAR(lower[k], r[k] - 2.0 * width[k], 1e-15);
    }
    CHECK(width[2] > 1.5 * width[1]); /* both share the mean's poor component */
    /* a reference putting all its weight on candidate 0 measures from f_0 */
    double lref[3] = {0, -800, -800};
    CHECK_ERR(lp_conf_lower(c, sp, r, lref, 3, 1.0, lower, width), LP_OK);
    CHECK_NEAR(width[0], 0.0, 1e-12);
    CHECK_NEAR(width[2], naive_width(s, D, LP_CONF_LAMBDA, f[2]), 1e-12);
    CHECK(width[2] > 10 * width[1]); /* the same step along the poor feature */
    /* more candidates than one solve's block: each width as lp_conf_width's */
    enum { MANY = 600 };
    double *fm = malloc(MANY * D * sizeof *fm), *rm = calloc(MANY, sizeof *rm);
    double *lm = malloc(MANY * sizeof *lm), *wm = malloc(MANY * sizeof *wm);
    uint32_t *im = malloc(MANY * D * sizeof *im);
    lp_sparse *sm = malloc(MANY * sizeof *sm);
    if (fm && rm && lm && wm && im && sm) {
        lp_prng g;
        lp_prng_seed(&g, 7);
        double mean[D] = {0, 0, 0};
        for (size_t k = 0; k < MANY; k++) {
            for (size_t j = 0; j < D; j++) {
                fm[k * D + j] = lp_prng_normal(&g);
                mean[j] += fm[k * D + j] / MANY;
            }
            sm[k] = dense_sparse(fm + k * D, im + k * D);
        }
        CHECK_ERR(lp_conf_lower(c, sm, rm, NULL, MANY, 1.0, lm, wm), LP_OK);
        int agree = 1;
        for (size_t k = 0; k < MANY; k++) {
            double v[D];
            for (size_t j = 0; j < D; j++)
                v[j] = fm[k * D + j] - mean[j];
            agree &= fabs(wm[k] - lp_conf_width(c, v, work)) <= 1e-12 * (1 + wm[k]);
        }
        CHECK(agree);
    }
    free(fm);
    free(rm);
    free(lm);
    free(wm);
    free(im);
    free(sm);
    CHECK_ERR(lp_conf_lower(c, sp, r, NULL, 3, -1.0, lower, width), LP_EINVALID_ARGUMENT);
    CHECK_ERR(lp_conf_lower(c, sp, r, NULL, 3, NAN, lower, width), LP_EINVALID_ARGUMENT);
    lp_conf_free(c);
    json_decref(rec);
    lp_dataset_free(ds);
}

/* A served model with the record: the pessimistic policy sums to 1 and
 * moves probability away from the uncertain candidate. */
static void test_served(void)
{
    lp_dataset *ds = poor_data(LP_STORE_F64);
    lp_model *m = small_model(0.5, 0.5);
    if (ds == NULL || m == NULL) {
        lp_model_free(m);
        lp_dataset_free(ds);
        return;
    }
    char *plain = NULL, *with = NULL;
    json_t *j = lp_model_to_json(m);
    plain = json_dumps(j, JSON_COMPACT);
    json_decref(j);
    CHECK_ERR(lp_conf_attach(m, ds), LP_OK);
    j = lp_model_to_json(m);
    with = json_dumps(j, JSON_COMPACT);
    json_decref(j);
    lp_served *a = NULL, *b = NULL;
    char msg[256];
    CHECK_ERR(lp_served_new(1, plain, NULL, &a, msg, sizeof msg), LP_OK);
    CHECK_ERR(lp_served_new(2, with, NULL, &b, msg, sizeof msg), LP_OK);
    double f[3][D] = {{0, 0, 0}, {0.5, 0, 0}, {0, 0, 0.5}}, r[3], lower[3], pess[3], pi[3];
    uint32_t idx[3][D];
    lp_sparse sp[3] = {dense_sparse(f[0], idx[0]), dense_sparse(f[1], idx[1]),
                       dense_sparse(f[2], idx[2])};
    if (a != NULL && b != NULL) {
        CHECK(!lp_served_has_confidence(a) && lp_served_has_confidence(b));
        for (int k = 0; k < 3; k++)
            r[k] = lp_served_reward(b, &sp[k]);
        CHECK_ERR(lp_served_pessimism(a, sp, r, NULL, 3, 1.0, lower, pess), LP_ENO_CONFIDENCE);
        CHECK_ERR(lp_served_policy(b, r, NULL, 3, pi, NULL), LP_OK);
        CHECK_ERR(lp_served_pessimism(b, sp, r, NULL, 3, 0.0, lower, pess), LP_OK);
        for (int k = 0; k < 3; k++) {
            CHECK(lower[k] == r[k]);
            CHECK(pess[k] == pi[k]); /* Gamma = 0: the policy itself */
        }
        CHECK_ERR(lp_served_pessimism(b, sp, r, NULL, 3, LP_CONF_DEFAULT_GAMMA, lower, pess),
                  LP_OK);
        CHECK_NEAR(pess[0] + pess[1] + pess[2], 1.0, 1e-12);
        /* candidates 1 and 2 have the same reward; 2 is uncertain */
        CHECK(r[1] == r[2]);
        CHECK(pess[2] < pi[2] && pess[2] < pess[1]);
        CHECK(pess[1] / pi[1] > pess[2] / pi[2]);
    }
    /* a record that does not fit the model is refused at load */
    json_t *bad = json_loads(with, 0, NULL);
    json_object_set_new(json_object_get(bad, "confidence"), "dim", json_integer(4));
    char *bad_text = json_dumps(bad, JSON_COMPACT);
    lp_served *c = NULL;
    CHECK_ERR(lp_served_new(3, bad_text, NULL, &c, msg, sizeof msg), LP_EWRONG_TYPE);
    CHECK(c == NULL);
    free(bad_text);
    json_decref(bad);
    lp_served_unref(a);
    lp_served_unref(b);
    free(plain);
    free(with);
    lp_model_free(m);
    lp_dataset_free(ds);
}

/* Dimensions above LP_CONF_FULL_MAX keep the diagonal; above
 * LP_CONF_DIAG_MAX nothing. */
static void test_large(void)
{
    size_t d = LP_CONF_FULL_MAX + 1;
    lp_dataset *ds = lp_dataset_new_dense(5, d, LP_STORE_F64);
    for (size_t i = 0; ds && i < 5; i++) {
        for (size_t j = 0; j < d; j++)
            ds->xd[i * d + j] = (double)((i + 1) * (j % 5)) / 7.0;
        ds->z[i] = 1;
        ds->eps[i] = 2.0;
    }
    json_t *rec = NULL;
    CHECK_ERR(lp_conf_record(ds, 0.5, &rec), LP_OK);
    CHECK_STR(json_string_value(json_object_get(rec, "form")), "diagonal");
    double *diag = malloc(d * sizeof *diag), work[1];
    char msg[256];
    int isdiag = 0;
    CHECK_ERR(lp_conf_decode(rec, d, diag, &isdiag, msg, sizeof msg), LP_OK);
    CHECK_INT(isdiag, 1);
    double w = lp_conf_weight(2.0), want = 0;
    for (size_t i = 0; i < 5; i++)
        want += w * pow((double)((i + 1) * 3) / 7.0, 2);
    CHECK_NEAR(diag[3], want, 1e-12);
    lp_conf *c = NULL;
    CHECK_ERR(lp_conf_prepare(rec, d, &c, msg, sizeof msg), LP_OK);
    double *e = calloc(d, sizeof *e);
    if (c != NULL && e != NULL) {
        e[3] = 1.0;
        CHECK_NEAR(lp_conf_width(c, e, work), 1 / sqrt(want + 0.5), 1e-12);
    }
    free(e);
    lp_conf_free(c);
    json_decref(rec);
    free(diag);
    lp_dataset_free(ds);

    lp_dataset *big = lp_dataset_new_dense(1, LP_CONF_DIAG_MAX + 1, LP_STORE_F32);
    if (big != NULL) {
        memset(big->xf, 0, (LP_CONF_DIAG_MAX + 1) * sizeof(float));
        big->z[0] = 0;
        big->eps[0] = 1;
    }
    rec = (json_t *)1;
    CHECK_ERR(lp_conf_record(big, LP_CONF_LAMBDA, &rec), LP_OK);
    CHECK(rec == NULL);
    lp_dataset_free(big);
}

static void test_malformed(void)
{
    lp_dataset *ds = poor_data(LP_STORE_F64);
    json_t *rec = NULL;
    CHECK_ERR(lp_conf_record(ds, LP_CONF_LAMBDA, &rec), LP_OK);
    lp_dataset_free(ds);
    if (rec == NULL)
        return;
    char msg[256];
    lp_conf *c = NULL;
    CHECK_ERR(lp_conf_prepare(rec, D + 1, &c, msg, sizeof msg), LP_EWRONG_TYPE);
    json_t *x = json_deep_copy(rec);
    json_object_set_new(x, "sigma", json_string("not base64!"));
    CHECK_ERR(lp_conf_prepare(x, D, &c, msg, sizeof msg), LP_EMALFORMED_JSON);
    json_object_set_new(x, "sigma", json_string("AAAA")); /* 3 bytes, not 6 doubles */
    CHECK_ERR(lp_conf_prepare(x, D, &c, msg, sizeof msg), LP_EMALFORMED_JSON);
    json_decref(x);
    x = json_deep_copy(rec);
    json_object_set_new(x, "lambda", json_real(-1));
    CHECK_ERR(lp_conf_prepare(x, D, &c, msg, sizeof msg), LP_EWRONG_TYPE);
    json_object_set_new(x, "lambda", json_real(1));
    json_object_set_new(x, "form", json_string("sparse"));
    CHECK_ERR(lp_conf_prepare(x, D, &c, msg, sizeof msg), LP_EWRONG_TYPE);
    json_decref(x);
    /* a matrix that is not positive definite: -100 I */
    double neg[6] = {-100, 0, 0, -100, 0, -100};
    uint8_t bytes[48];
    memcpy(bytes, neg, sizeof bytes); /* little-endian host */
    char b64[128];
    sodium_bin2base64(b64, sizeof b64, bytes, sizeof bytes, sodium_base64_VARIANT_ORIGINAL);
    x = json_deep_copy(rec);
    json_object_set_new(x, "sigma", json_string(b64));
    CHECK_ERR(lp_conf_prepare(x, D, &c, msg, sizeof msg), LP_EWRONG_TYPE);
    CHECK(strstr(msg, "positive definite") != NULL);
    CHECK(c == NULL);
    json_decref(x);
    json_decref(rec);
}

int main(void)
{
    test_weight();
    test_record();
    test_exact_round_trip();
    test_bounds();
    test_served();
    test_large();
    test_malformed();
    return check_summary();
}
