/* model.c — model files in JSON. See model.h. */
#include "model.h"

#include "error.h"
#include "wire.h"

#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int lp_model_fit_general(const lp_gp_data *g, const lp_dataset *ds, const lp_gp_opts *o,
                         lp_model **out)
{
    *out = NULL;
    if (ds->d != lp_gp_data_dim(g))
        return LP_EINVALID_ARGUMENT;
    lp_gp_model *gm = NULL;
    int rc = lp_gp_fit(g, o, &gm);
    if (rc != LP_OK)
        return rc;
    lp_model *m = calloc(1, sizeof *m);
    double *theta = malloc(ds->d * sizeof *theta);
    if (m == NULL || theta == NULL) {
        lp_gp_model_free(gm);
        free(m);
        free(theta);
        return LP_ENO_MEMORY;
    }
    memcpy(theta, gm->w, ds->d * sizeof *theta);
    lp_loss_spec_init(&m->loss, LP_LOSS_SQUARE_CHIPO);
    m->link = LP_LINK_CHIMIX;
    m->beta = gm->beta;
    m->l2 = gm->l2;
    lp_fit_opts_init(&m->fit, LP_OPT_LBFGS);
    m->fit.max_iter = o->max_iter;
    m->threads = o->threads;
    m->precision = lp_storage_name(ds->storage);
    m->d = ds->d;
    m->theta = theta;
    m->general = gm;
    m->res.objective = gm->pref_objective;
    m->res.grad_norm = NAN;
    m->res.theta_norm = NAN;
    m->res.iterations = gm->rounds;
    snprintf(m->res.status, sizeof m->res.status, "%s", gm->pref_status);
    m->res.converged = strcmp(gm->pref_status, "converged") == 0;
    lp_model_summarize(m, ds);
    *out = m;
    return LP_OK;
}

void lp_model_summarize(lp_model *m, const lp_dataset *ds)
{
    m->n = ds->n;
    m->n_z1 = 0;
    for (size_t i = 0; i < ds->n; i++)
        m->n_z1 += ds->z[i];
    m->n_bins = lp_dataset_eps_hist(ds, m->bins, LP_MODEL_EPS_BINS, &m->n_eps_other);
    double margins = 0.0, acc = 0.0;
    for (size_t i = 0; i < ds->n; i++) {
        double mm = lp_dataset_row_dot(ds, i, m->theta);
        double u = ds->z[i] ? mm : -mm;
        margins += u;
        acc += u > 0.0;
    }
    m->rw_margins = margins / (double)ds->n;
    m->rw_accuracy = acc / (double)ds->n;
    m->have_rewards = ds->sum_chosen != NULL && ds->sum_rejected != NULL;
    if (m->have_rewards) {
        double c = 0, r = 0;
        for (size_t j = 0; j < ds->d; j++) {
            c += m->theta[j] * ds->sum_chosen[j];
            r += m->theta[j] * ds->sum_rejected[j];
        }
        m->rw_chosen = c / (double)ds->n;
        m->rw_rejected = r / (double)ds->n;
    }
}

int lp_model_fit(const lp_dataset *ds, const lp_objective_opts *oo, const lp_fit_opts *fo,
                 double beta, lp_model **out)
{
    *out = NULL;
    lp_objective *ob = lp_objective_new(ds, oo);
    lp_model *m = calloc(1, sizeof *m);
    double *theta = calloc(ds->d, sizeof *theta);
    if (ob == NULL || m == NULL || theta == NULL) {
        lp_objective_free(ob);
        free(m);
        free(theta);
        return LP_ENO_MEMORY;
    }
    int rc = lp_fit(ob, fo, theta, &m->res);
    lp_objective_free(ob);
    if (rc != LP_OK) {
        free(m);
        free(theta);
        return rc;
    }
    m->loss = oo->loss;
    m->link = lp_loss_default_link(oo->loss.kind);
    m->beta = beta;
    m->l2 = oo->l2;
    m->fit = *fo;
    m->fit.progress = 0;
    m->fit.on_progress = NULL;
    m->fit.progress_ctx = NULL;
    m->threads = oo->threads;
    m->kernel = oo->kernel;
    m->precision = lp_storage_name(ds->storage);
    m->d = ds->d;
    m->theta = theta;
    lp_model_summarize(m, ds);
    *out = m;
    return LP_OK;
}

static json_t *num_or_null(double v)
{
    return isfinite(v) ? json_real(v) : json_null();
}

int lp_model_fit_cv(const lp_dataset *ds, const lp_objective_opts *oo, const lp_fit_opts *fo,
                    double beta, const lp_cv_opts *co, lp_model **out)
{
    *out = NULL;
    int *fold_of = malloc((ds->n ? ds->n : 1) * sizeof *fold_of);
    if (fold_of == NULL)
        return LP_ENO_MEMORY;
    size_t groups = 0;
    int rc = lp_cv_folds(ds, 2, co->seed, fold_of, &groups);
    free(fold_of);
    if (rc == LP_ENO_MEMORY)
        return rc;
    lp_objective_opts final = *oo;
    lp_cv_result cv;
    int have_cv = groups >= 2;
    lp_cv_opts c = *co;
    if ((size_t)c.folds > groups)
        c.folds = (int)groups;
    /* auto: the folds choose the penalty first; fixed: the model is fitted
     * first (its progress is the run's), the folds estimate afterwards */
    if (have_cv && co->auto_l2) {
        if ((rc = lp_cv_run(ds, oo, fo, &c, &cv)) != LP_OK)
            return rc;
        final.l2 = cv.pt[cv.chosen].l2;
    } else if (co->auto_l2)
        final.l2 = 0.0;
    lp_model *m = NULL;
    if ((rc = lp_model_fit(ds, &final, fo, beta, &m)) != LP_OK)
        return rc;
    if (have_cv && !co->auto_l2 && (rc = lp_cv_run(ds, oo, fo, &c, &cv)) != LP_OK) {
        lp_model_free(m);
        return rc;
    }
    m->have_cv = have_cv;
    if (have_cv)
        m->cv = cv;
    m->cv.auto_l2 = co->auto_l2;
    *out = m;
    return LP_OK;
}

/* The cross-validation record of the model file; null without one. */
static json_t *validation_json(const lp_model *m)
{
    if (!m->have_cv)
        return json_null();
    const lp_cv_result *cv = &m->cv;
    json_t *v = json_object(), *grid = json_array();
    json_object_set_new(v, "method", json_string("kfold_by_prompt"));
    json_object_set_new(v, "folds", json_integer(cv->folds));
    json_object_set_new(v, "groups", json_integer((json_int_t)cv->groups));
    json_object_set_new(v, "seed", json_integer((json_int_t)cv->seed));
    json_object_set_new(v, "criterion", json_string("brier_debiased"));
    json_object_set_new(v, "l2_auto", json_boolean(cv->auto_l2));
    json_object_set_new(v, "unit", num_or_null(cv->unit));
    json_object_set_new(v, "chosen_l2", num_or_null(cv->pt[cv->chosen].l2));
    for (size_t t = 0; t < cv->npoints; t++) {
        const lp_cv_point *p = &cv->pt[t];
        json_t *e = json_object();
        json_object_set_new(e, "l2", num_or_null(p->l2));
        json_object_set_new(e, "brier_debiased", num_or_null(p->brier));
        json_object_set_new(e, "brier_debiased_se", num_or_null(p->brier_se));
        json_object_set_new(e, "accuracy_debiased", num_or_null(p->accuracy));
        json_object_set_new(e, "accuracy_debiased_se", num_or_null(p->accuracy_se));
        json_object_set_new(e, "accuracy_raw", num_or_null(p->raw_accuracy));
        json_object_set_new(e, "not_converged", json_integer(p->not_converged));
        json_array_append_new(grid, e);
    }
    json_object_set_new(v, "grid", grid);
    return v;
}

json_t *lp_model_features_json(int text, const lp_feat_spec *feat, size_t d)
{
    json_t *f = json_object();
    json_object_set_new(f, "kind", json_string(text ? "text" : "dense"));
    json_object_set_new(f, "dim", json_integer((json_int_t)d));
    if (text) {
        json_object_set_new(f, "hash", json_string("fnv1a64-v1"));
        json_object_set_new(f, "hash_dim", json_integer(feat->hash_dim));
        json_object_set_new(f, "bigrams", json_boolean(feat->bigrams));
        json_object_set_new(f, "cross_prompt", json_boolean(feat->cross_prompt));
        json_object_set_new(f, "cross_max", json_integer(feat->cross_max));
        json_object_set_new(f, "length", json_boolean(feat->length));
    }
    return f;
}

json_t *lp_model_to_json(const lp_model *m)
{
    json_t *root = json_object();
    json_object_set_new(root, "format", json_string("ldpref-model"));
    json_object_set_new(root, "format_version", json_integer(LP_MODEL_FORMAT_VERSION));
    if (m->general != NULL)
        json_object_set_new(root, "method", json_string("general"));
    json_object_set_new(root, "loss", json_string(lp_loss_name(m->loss.kind)));
    json_object_set_new(root, "link", json_string(m->link == LP_LINK_KL ? "kl" : "chimix"));
    json_object_set_new(root, "beta", json_real(m->beta));
    json_t *h = json_object();
    json_object_set_new(h, "rmax", num_or_null(m->loss.rmax));
    json_object_set_new(h, "tau", json_real(m->loss.tau));
    json_object_set_new(h, "l2", json_real(m->l2));
    json_object_set_new(h, "l2_auto", json_boolean(m->cv.auto_l2));
    json_object_set_new(h, "norm_bound", num_or_null(m->fit.norm_bound));
    json_object_set_new(h, "optimizer", json_string(lp_method_name(m->fit.method)));
    json_object_set_new(h, "max_iter", json_integer(m->fit.max_iter));
    json_object_set_new(h, "gtol", json_real(m->fit.gtol));
    json_object_set_new(h, "memory", json_integer(m->fit.memory));
    json_object_set_new(h, "lr", json_real(m->fit.lr));
    json_object_set_new(h, "batch", json_integer(m->fit.batch));
    json_object_set_new(h, "epochs", json_integer(m->fit.epochs));
    json_object_set_new(h, "seed", json_integer((json_int_t)m->fit.seed));
    json_object_set_new(h, "threads", json_integer(m->threads));
    json_object_set_new(h, "kernel", json_string(m->kernel == LP_KERNEL_BLAS ? "blas" : "fused"));
    json_object_set_new(h, "precision", json_string(m->precision ? m->precision : "float64"));
    json_object_set_new(root, "hyper", h);
    json_object_set_new(root, "features", lp_model_features_json(m->text, &m->feat, m->d));
    json_t *dsum = json_object();
    json_object_set_new(dsum, "source", json_string(m->source));
    json_object_set_new(dsum, "n", json_integer((json_int_t)m->n));
    /* A DP release shows no count of the labels it was computed from. */
    json_object_set_new(dsum, "n_z1", m->release ? json_null() : json_integer((json_int_t)m->n_z1));
    json_t *hist = json_array();
    for (size_t b = 0; b < m->n_bins; b++) {
        json_t *e = json_object();
        json_object_set_new(e, "epsilon", lp_json_epsilon(m->bins[b].eps));
        json_object_set_new(e, "count", json_integer((json_int_t)m->bins[b].count));
        json_array_append_new(hist, e);
    }
    json_object_set_new(dsum, "epsilon_histogram", hist);
    json_object_set_new(dsum, "epsilon_other", json_integer((json_int_t)m->n_eps_other));
    json_object_set_new(root, "data", dsum);
    json_t *mt = json_object();
    json_object_set_new(mt, "rewards/chosen",
                        m->have_rewards ? num_or_null(m->rw_chosen) : json_null());
    json_object_set_new(mt, "rewards/rejected",
                        m->have_rewards ? num_or_null(m->rw_rejected) : json_null());
    json_object_set_new(mt, "rewards/margins", num_or_null(m->rw_margins));
    json_object_set_new(mt, "rewards/accuracies", num_or_null(m->rw_accuracy));
    json_object_set_new(mt, "objective", num_or_null(m->res.objective));
    json_object_set_new(mt, "grad_norm", num_or_null(m->res.grad_norm));
    json_object_set_new(mt, "theta_norm", num_or_null(m->res.theta_norm));
    json_object_set_new(mt, "iterations", json_integer(m->res.iterations));
    json_object_set_new(mt, "evaluations", json_integer(m->res.evaluations));
    json_object_set_new(mt, "status", json_string(m->res.status));
    json_object_set_new(mt, "converged", json_boolean(m->res.converged));
    json_object_set_new(mt, "norm_bound_active", json_boolean(m->res.bound_active));
    const lp_cv_point *ho = m->have_cv ? &m->cv.pt[m->cv.chosen] : NULL;
    json_object_set_new(mt, "eval/accuracy_debiased", ho ? num_or_null(ho->accuracy) : json_null());
    json_object_set_new(mt, "eval/accuracy_debiased_se",
                        ho ? num_or_null(ho->accuracy_se) : json_null());
    json_object_set_new(mt, "eval/rewards/accuracies",
                        ho ? num_or_null(ho->raw_accuracy) : json_null());
    json_object_set_new(mt, "eval/brier_debiased", ho ? num_or_null(ho->brier) : json_null());
    json_object_set_new(mt, "eval/brier_debiased_se", ho ? num_or_null(ho->brier_se) : json_null());
    json_object_set_new(mt, "eval/labels", ho ? json_integer((json_int_t)m->cv.n) : json_null());
    json_object_set_new(root, "metrics", mt);
    if (m->general != NULL)
        json_object_set_new(root, "general", lp_gp_model_to_json(m->general));
    json_object_set_new(root, "validation", validation_json(m));
    if (m->release != NULL)
        json_object_set(root, "release", m->release);
    if (m->confidence != NULL)
        json_object_set(root, "confidence", m->confidence);
    json_t *th = json_array();
    for (size_t j = 0; j < m->d; j++)
        json_array_append_new(th, json_real(m->theta[j]));
    json_object_set_new(root, "theta", th);
    return root;
}

int lp_model_write(const lp_model *m, const char *path)
{
    json_t *root = lp_model_to_json(m);
    if (root == NULL)
        return LP_ENO_MEMORY;
    int rc = LP_OK;
    size_t flags = LP_MODEL_JSON_FLAGS;
    if (strcmp(path, "-") == 0) {
        if (json_dumpf(root, stdout, flags) != 0 || fputc('\n', stdout) == EOF)
            rc = LP_EIO;
    } else {
        FILE *fp = fopen(path, "w");
        if (fp == NULL)
            rc = LP_EIO;
        else {
            if (json_dumpf(root, fp, flags) != 0 || fputc('\n', fp) == EOF)
                rc = LP_EIO;
            if (fclose(fp) != 0)
                rc = LP_EIO;
        }
    }
    json_decref(root);
    return rc;
}

void lp_model_free(lp_model *m)
{
    if (m == NULL)
        return;
    free(m->theta);
    lp_gp_model_free(m->general);
    json_decref(m->release);
    json_decref(m->confidence);
    free(m);
}

static double get_num(const json_t *o, const char *k, double dflt)
{
    const json_t *v = o ? json_object_get(o, k) : NULL;
    if (v != NULL && json_is_null(v))
        return INFINITY;
    return v && json_is_number(v) ? json_number_value(v) : dflt;
}

int lp_model_read(const char *path, lp_model **out, char *msg, size_t msglen)
{
    *out = NULL;
    json_error_t err;
    json_t *root = json_load_file(path, JSON_REJECT_DUPLICATES, &err);
    if (root == NULL)
        return lp_fail(err.line <= 0 ? LP_EIO : LP_EMALFORMED_JSON, msg, msglen, "%s: %s", path,
                       err.text);
    int rc = lp_model_from_json(root, path, out, msg, msglen);
    json_decref(root);
    return rc;
}

int lp_model_from_json(const json_t *root, const char *path, lp_model **out, char *msg,
                       size_t msglen)
{
    *out = NULL;
    int rc = LP_OK;
    lp_model *m = calloc(1, sizeof *m);
    const json_t *th = json_object_get(root, "theta");
    if (m == NULL) {
        rc = lp_fail(LP_ENO_MEMORY, msg, msglen, "out of memory");
        goto done;
    }
    if (th == NULL || !json_is_array(th) || json_array_size(th) == 0) {
        rc = lp_fail(LP_EMISSING_FIELD, msg, msglen, "%s: no \"theta\" array", path);
        goto done;
    }
    const json_t *ver = json_object_get(root, "format_version");
    if (ver != NULL &&
        (!json_is_integer(ver) || json_integer_value(ver) > LP_MODEL_FORMAT_VERSION)) {
        rc = lp_fail(LP_EWRONG_TYPE, msg, msglen, "%s: unsupported format_version", path);
        goto done;
    }
    m->d = json_array_size(th);
    m->theta = malloc(m->d * sizeof *m->theta);
    if (m->theta == NULL) {
        rc = lp_fail(LP_ENO_MEMORY, msg, msglen, "out of memory");
        goto done;
    }
    for (size_t j = 0; j < m->d; j++) {
        const json_t *v = json_array_get(th, j);
        if (!json_is_number(v) || !isfinite(json_number_value(v))) {
            rc = lp_fail(LP_EWRONG_TYPE, msg, msglen, "%s: theta[%zu] is not a finite number", path,
                         j);
            goto done;
        }
        m->theta[j] = json_number_value(v);
    }
    lp_loss_kind kind = LP_LOSS_SQUARE_CHIPO;
    const json_t *ls = json_object_get(root, "loss");
    if (ls != NULL && (!json_is_string(ls) || lp_loss_parse(json_string_value(ls), &kind))) {
        rc = lp_fail(LP_EWRONG_TYPE, msg, msglen, "%s: unknown loss", path);
        goto done;
    }
    lp_loss_spec_init(&m->loss, kind);
    const json_t *h = json_object_get(root, "hyper");
    m->loss.rmax = get_num(h, "rmax", 1.0);
    m->loss.tau = get_num(h, "tau", 0.5);
    m->l2 = get_num(h, "l2", 0.0);
    m->beta = get_num(root, "beta", 1.0);
    const json_t *lk = json_object_get(root, "link");
    m->link = lk && json_is_string(lk)
                  ? (strcmp(json_string_value(lk), "kl") == 0 ? LP_LINK_KL : LP_LINK_CHIMIX)
                  : lp_loss_default_link(kind);
    lp_feat_spec_init(&m->feat);
    const json_t *f = json_object_get(root, "features");
    const json_t *kd = f ? json_object_get(f, "kind") : NULL;
    if (kd && json_is_string(kd) && strcmp(json_string_value(kd), "text") == 0) {
        m->text = 1;
        m->feat.hash_dim = (uint32_t)get_num(f, "hash_dim", 4096);
        m->feat.bigrams = json_is_true(json_object_get(f, "bigrams"));
        m->feat.cross_prompt = json_is_true(json_object_get(f, "cross_prompt"));
        m->feat.cross_max = (int)get_num(f, "cross_max", 32);
        m->feat.length = json_is_true(json_object_get(f, "length"));
        if (lp_feat_dim(&m->feat) != m->d) {
            rc = lp_fail(LP_EWRONG_TYPE, msg, msglen,
                         "%s: theta has %zu values, the text features %zu", path, m->d,
                         lp_feat_dim(&m->feat));
            goto done;
        }
    }
    const json_t *method = json_object_get(root, "method");
    if (method != NULL &&
        !(json_is_string(method) && (strcmp(json_string_value(method), "general") == 0 ||
                                     strcmp(json_string_value(method), "reward") == 0))) {
        rc = lp_fail(LP_EWRONG_TYPE, msg, msglen, "%s: unknown method (general or reward)", path);
        goto done;
    }
    if (method != NULL && strcmp(json_string_value(method), "general") == 0) {
        char why[200] = "";
        rc = lp_gp_model_from_json(json_object_get(root, "general"), m->d, &m->general, why,
                                   sizeof why);
        if (rc != LP_OK)
            lp_fail(rc, msg, msglen, "%s: %s", path, why);
    }
    const char *kept[] = {"release", "confidence"};
    for (size_t k = 0; k < 2 && rc == LP_OK; k++) {
        json_t *v = json_object_get(root, kept[k]);
        if (v != NULL && !json_is_object(v))
            rc = lp_fail(LP_EWRONG_TYPE, msg, msglen, "%s: \"%s\" is not an object", path, kept[k]);
        else if (v != NULL)
            *(k == 0 ? &m->release : &m->confidence) = json_incref(v);
    }
done:
    if (rc != LP_OK) {
        lp_model_free(m);
        return rc;
    }
    *out = m;
    return LP_OK;
}
