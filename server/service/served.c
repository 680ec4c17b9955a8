/* served.c — models that answer score requests. See served.h. */
#include "served.h"

#include "confidence.h"
#include "error.h"
#include "policy.h"
#include "wire.h"

#include <jansson.h>
#include <math.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#define FZ_POOL 8

struct lp_served {
    atomic_int refs;
    int64_t version;
    lp_label_privacy privacy;
    lp_model *model;
    lp_conf *conf;           /* the factored confidence record, or NULL */
    pthread_mutex_t fz_lock; /* guards the featurizer pool */
    lp_featurizer *fz_pool[FZ_POOL];
    int fz_free;
};

int lp_served_new(int64_t version, const char *model_json, const lp_label_privacy *privacy,
                  lp_served **out, char *msg, size_t msglen)
{
    *out = NULL;
    json_error_t jerr;
    json_t *root = json_loads(model_json, JSON_REJECT_DUPLICATES, &jerr);
    if (root == NULL)
        return lp_fail(LP_EMALFORMED_JSON, msg, msglen, "model %lld: %s", (long long)version,
                       jerr.text);
    lp_model *m = NULL;
    char what[64];
    snprintf(what, sizeof what, "model %lld", (long long)version);
    int rc = lp_model_from_json(root, what, &m, msg, msglen);
    json_decref(root);
    if (rc != LP_OK)
        return rc;
    lp_conf *conf = NULL; /* factored once here, not per request */
    if (m->confidence != NULL && m->general == NULL &&
        (rc = lp_conf_prepare(m->confidence, m->d, &conf, msg, msglen)) != LP_OK) {
        lp_model_free(m);
        return rc;
    }
    lp_served *sv = calloc(1, sizeof *sv);
    if (sv == NULL) {
        lp_conf_free(conf);
        lp_model_free(m);
        return lp_fail(LP_ENO_MEMORY, msg, msglen, "out of memory");
    }
    atomic_init(&sv->refs, 1);
    sv->version = version;
    if (privacy != NULL)
        sv->privacy = *privacy; /* else known = 0 */
    sv->model = m;
    sv->conf = conf;
    pthread_mutex_init(&sv->fz_lock, NULL);
    *out = sv;
    return LP_OK;
}

void lp_served_ref(lp_served *sv)
{
    atomic_fetch_add(&sv->refs, 1);
}

void lp_served_unref(lp_served *sv)
{
    if (sv == NULL || atomic_fetch_sub(&sv->refs, 1) != 1)
        return;
    for (int i = 0; i < sv->fz_free; i++)
        lp_featurizer_free(sv->fz_pool[i]);
    pthread_mutex_destroy(&sv->fz_lock);
    lp_conf_free(sv->conf);
    lp_model_free(sv->model);
    free(sv);
}

int64_t lp_served_version(const lp_served *sv)
{
    return sv->version;
}

const lp_label_privacy *lp_served_privacy(const lp_served *sv)
{
    return &sv->privacy;
}

const lp_model *lp_served_model(const lp_served *sv)
{
    return sv->model;
}

static lp_featurizer *fz_take(lp_served *sv)
{
    lp_featurizer *fz = NULL;
    pthread_mutex_lock(&sv->fz_lock);
    if (sv->fz_free > 0)
        fz = sv->fz_pool[--sv->fz_free];
    pthread_mutex_unlock(&sv->fz_lock);
    return fz != NULL ? fz : lp_featurizer_new(&sv->model->feat);
}

static void fz_give(lp_served *sv, lp_featurizer *fz)
{
    pthread_mutex_lock(&sv->fz_lock);
    if (sv->fz_free < FZ_POOL) {
        sv->fz_pool[sv->fz_free++] = fz;
        fz = NULL;
    }
    pthread_mutex_unlock(&sv->fz_lock);
    lp_featurizer_free(fz);
}

int lp_served_features(lp_served *sv, const char *prompt, const char *text, const double *dense,
                       size_t dim, lp_sparse *out)
{
    const lp_model *m = sv->model;
    out->nnz = 0;
    if (m->text) {
        if (text == NULL || text[0] == '\0')
            return LP_EEMPTY_TEXT;
        lp_featurizer *fz = fz_take(sv);
        if (fz == NULL)
            return LP_ENO_MEMORY;
        int rc = lp_featurize(fz, prompt ? prompt : "", text, out);
        fz_give(sv, fz);
        return rc;
    }
    if (dense == NULL)
        return LP_EFEATURES_REQUIRED;
    if (dim != m->d)
        return LP_EDIMENSION_MISMATCH;
    if (out->cap < dim) {
        uint32_t *idx = realloc(out->idx, dim * sizeof *idx);
        if (idx != NULL)
            out->idx = idx;
        double *val = realloc(out->val, dim * sizeof *val);
        if (val != NULL)
            out->val = val;
        if (idx == NULL || val == NULL)
            return LP_ENO_MEMORY;
        out->cap = dim;
    }
    for (size_t j = 0; j < dim; j++) {
        if (!isfinite(dense[j]))
            return LP_EWRONG_TYPE;
        if (dense[j] != 0.0) {
            out->idx[out->nnz] = (uint32_t)j;
            out->val[out->nnz++] = dense[j];
        }
    }
    return LP_OK;
}

double lp_served_reward(const lp_served *sv, const lp_sparse *f)
{
    double r = 0.0;
    for (size_t k = 0; k < f->nnz; k++)
        if (f->idx[k] < sv->model->d)
            r += sv->model->theta[f->idx[k]] * f->val[k];
    return r;
}

int lp_served_policy(const lp_served *sv, const double *rewards, const double *log_ref, size_t K,
                     double *pi, double *log_ratio)
{
    return lp_policy_probs(sv->model->link, rewards, log_ref, K, sv->model->beta, pi, log_ratio,
                           NULL);
}

int lp_served_has_confidence(const lp_served *sv)
{
    return sv->conf != NULL;
}

int lp_served_pessimism(const lp_served *sv, const lp_sparse *f, const double *r,
                        const double *log_ref, size_t K, double gamma, double *lower, double *pess)
{
    if (sv->conf == NULL)
        return LP_ENO_CONFIDENCE;
    int rc = lp_conf_lower(sv->conf, f, r, log_ref, K, gamma, lower, NULL);
    return rc != LP_OK ? rc : lp_served_policy(sv, lower, log_ref, K, pess, NULL);
}

int lp_served_is_general(const lp_served *sv)
{
    return sv->model->general != NULL;
}

int lp_served_mixture(const lp_served *sv, const lp_sparse *f, const double *log_ref, size_t K,
                      double *pi, double *win)
{
    if (sv->model->general == NULL)
        return LP_EINVALID_ARGUMENT;
    return lp_gp_mixture(sv->model->general, f, log_ref, K, pi, win);
}

/* ---- the slot ---- */

void lp_serving_init(lp_serving *sl)
{
    pthread_mutex_init(&sl->lock, NULL);
    sl->current = NULL;
}

void lp_serving_destroy(lp_serving *sl)
{
    lp_served_unref(sl->current);
    sl->current = NULL;
    pthread_mutex_destroy(&sl->lock);
}

lp_served *lp_serving_acquire(lp_serving *sl)
{
    pthread_mutex_lock(&sl->lock);
    lp_served *sv = sl->current;
    if (sv != NULL)
        lp_served_ref(sv);
    pthread_mutex_unlock(&sl->lock);
    return sv;
}

void lp_serving_swap(lp_serving *sl, lp_served *sv)
{
    if (sv != NULL)
        lp_served_ref(sv);
    pthread_mutex_lock(&sl->lock);
    lp_served *old = sl->current;
    sl->current = sv;
    pthread_mutex_unlock(&sl->lock);
    lp_served_unref(old);
}
