/* snapshot.c — label views and training snapshots, read through the label
 * cursor (server/db/label_cursor.h). See snapshot.h. */
#include "snapshot.h"

#include "buf.h"
#include "error.h"
#include "label_cursor.h"
#include "wire.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct lp_view {
    lp_label_cursor *cur;
    lp_view_spec spec;
    lp_feature_mode mode; /* DENSE or TEXT */
    size_t d;
    int64_t cutoff;
    int64_t labels;    /* in range */
    lp_featurizer *fz; /* TEXT plan */
    lp_sparse f0, f1;  /* TEXT plan: current row */
    double *x0, *x1;   /* DENSE plan: current row, d each */
    lp_sparse a0, a1;  /* anti: the model's features of the two responses */
    double *ax0, *ax1; /* anti, text plan: the stored dense features, decoded */
    size_t ax_cap;
    size_t rows;
};

/* Resolves the feature plan over the cursor's range. */
static int plan(lp_view *v, char *msg, size_t msglen)
{
    lp_label_summary sum;
    int rc = lp_label_cursor_summary(v->cur, &sum);
    if (rc != LP_OK)
        return lp_fail(rc, msg, msglen, "cannot inspect the features");
    int64_t count = sum.labels, nulls = sum.without_features;
    int64_t lmin = sum.feature_bytes_min, lmax = sum.feature_bytes_max;
    v->labels = count;
    int dense_ok =
        count > 0 && nulls == 0 && lmin == lmax && lmin > 0 && lmin % (int64_t)sizeof(double) == 0;
    if (v->spec.features == LP_FEATURES_DENSE && count > 0 && !dense_ok)
        return lp_fail(LP_EINVALID_ARGUMENT, msg, msglen,
                       "features \"dense\": some tasks have no stored features of one dimension");
    if (v->spec.features == LP_FEATURES_DENSE ||
        (v->spec.features == LP_FEATURES_AUTO && dense_ok)) {
        v->mode = LP_FEATURES_DENSE;
        v->d = dense_ok ? (size_t)lmin / sizeof(double) : 1;
        v->x0 = calloc(v->d, sizeof *v->x0);
        v->x1 = calloc(v->d, sizeof *v->x1);
        if (v->x0 == NULL || v->x1 == NULL)
            return lp_fail(LP_ENO_MEMORY, msg, msglen, "out of memory");
    } else {
        v->mode = LP_FEATURES_TEXT;
        v->d = lp_feat_dim(&v->spec.text);
        v->fz = lp_featurizer_new(&v->spec.text);
        if (v->fz == NULL)
            return lp_fail(LP_EINVALID_ARGUMENT, msg, msglen, "bad text feature settings");
    }
    for (size_t k = 0; k < v->spec.n_settings; k++) {
        const lp_corruption *c = &v->spec.settings[k];
        if (c->alpha <= 0.0)
            continue;
        if (c->strategy == LP_ADV_BACKDOOR && (c->feature < 0 || (size_t)c->feature >= v->d))
            return lp_fail(LP_EBAD_CORRUPTION, msg, msglen,
                           "backdoor feature %lld of campaign %s is outside the %zu features",
                           (long long)c->feature, c->campaign_name, v->d);
    }
    return LP_OK;
}

int lp_view_open(lp_store *s, const lp_view_spec *spec, lp_view **out, lp_feature_mode *mode_out,
                 size_t *dim_out, char *msg, size_t msglen)
{
    *out = NULL;
    lp_view *v = calloc(1, sizeof *v);
    if (v == NULL)
        return lp_fail(LP_ENO_MEMORY, msg, msglen, "out of memory");
    v->spec = *spec;
    int rc = lp_label_cursor_open(s, spec->campaign, spec->cutoff, &v->cur);
    if (rc != LP_OK) {
        lp_view_close(v);
        return lp_fail(rc, msg, msglen, "cannot read labels");
    }
    v->cutoff = lp_label_cursor_cutoff(v->cur);
    if ((rc = plan(v, msg, msglen)) != LP_OK) {
        lp_view_close(v);
        return rc;
    }
    if (mode_out)
        *mode_out = v->mode;
    if (dim_out)
        *dim_out = v->d;
    *out = v;
    return LP_OK;
}

int64_t lp_view_cutoff(const lp_view *v)
{
    return v->cutoff;
}

int lp_view_privacy(lp_view *v, lp_label_privacy *out)
{
    return lp_label_cursor_privacy(v->cur, out);
}

void lp_view_close(lp_view *v)
{
    if (v == NULL)
        return;
    lp_label_cursor_close(v->cur);
    lp_featurizer_free(v->fz);
    lp_sparse_free(&v->f0);
    lp_sparse_free(&v->f1);
    lp_sparse_free(&v->a0);
    lp_sparse_free(&v->a1);
    free(v->x0);
    free(v->x1);
    free(v->ax0);
    free(v->ax1);
    free(v);
}

static const lp_corruption *settings_for(const lp_view *v, int64_t campaign)
{
    for (size_t k = 0; k < v->spec.n_settings; k++)
        if (v->spec.settings[k].campaign == campaign && v->spec.settings[k].alpha > 0.0)
            return &v->spec.settings[k];
    return NULL;
}

/* Feature k of a sparse vector (indices increasing). */
static double sparse_at(const lp_sparse *f, size_t k)
{
    size_t lo = 0, hi = f->nnz;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (f->idx[mid] < k)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo < f->nnz && f->idx[lo] == k ? f->val[lo] : 0.0;
}

/* The anti model's margin r(response1) - r(response0) for the row. The
 * model reads the task's own stored features (if any): decoded already
 * under the dense plan, decoded here (into scratch kept by the view)
 * otherwise. */
static int anti_margin(lp_view *v, const lp_view_row *row, double *margin, char *msg, size_t msglen)
{
    lp_served *m = v->spec.anti_model;
    size_t dim = row->blob_dim;
    const double *x0 = row->x0, *x1 = row->x1;
    if (x0 == NULL && dim > 0) {
        if (dim > v->ax_cap) {
            double *a = realloc(v->ax0, dim * sizeof *a);
            if (a != NULL)
                v->ax0 = a;
            double *b = a ? realloc(v->ax1, dim * sizeof *b) : NULL;
            if (b != NULL)
                v->ax1 = b;
            if (a == NULL || b == NULL)
                return lp_fail(LP_ENO_MEMORY, msg, msglen, "out of memory");
            v->ax_cap = dim;
        }
        memcpy(v->ax0, row->blob0, dim * sizeof *v->ax0); /* blobs may be unaligned */
        memcpy(v->ax1, row->blob1, dim * sizeof *v->ax1);
        x0 = v->ax0;
        x1 = v->ax1;
    }
    int rc = lp_served_features(m, row->prompt, row->response0, x0, dim, &v->a0);
    if (rc == LP_OK)
        rc = lp_served_features(m, row->prompt, row->response1, x1, dim, &v->a1);
    if (rc != LP_OK)
        return lp_fail(rc, msg, msglen,
                       "the served model (version %lld) cannot score task %lld for \"anti\"",
                       (long long)lp_served_version(m), (long long)row->task_id);
    *margin = lp_served_reward(m, &v->a1) - lp_served_reward(m, &v->a0);
    return LP_OK;
}

int lp_view_next(lp_view *v, lp_view_row *row, char *msg, size_t msglen)
{
    if ((v->rows & 1023) == 0 && v->rows > 0 && v->spec.pause != NULL)
        v->spec.pause(v->spec.pause_ctx);
    if (v->spec.cancel != NULL && (v->rows & 1023) == 0 && atomic_load(v->spec.cancel))
        return -LP_ECANCELLED;
    lp_label_row r;
    int got = lp_label_cursor_next(v->cur, &r);
    if (got == 0)
        return 0;
    if (got < 0)
        return -lp_fail(-got, msg, msglen, "reading labels");
    *row = (lp_view_row){.label_id = r.label_id,
                         .task_id = r.task_id,
                         .campaign = r.campaign_id,
                         .annotator = r.annotator_id,
                         .timestamp_ms = r.timestamp_ms,
                         .received_ms = r.received_ms,
                         .campaign_name = r.campaign,
                         .pseudonym = r.pseudonym,
                         .prompt = r.prompt,
                         .response0 = r.response0,
                         .response1 = r.response1,
                         .z = r.z_task,
                         .epsilon = r.epsilon,
                         .blob0 = r.features0,
                         .blob1 = r.features1,
                         .blob_dim = r.dim,
                         .reference_preferred = r.reference_preferred};
    v->rows++;

    int rc = LP_OK;
    if (v->mode == LP_FEATURES_DENSE) {
        if (row->blob_dim != v->d)
            return -lp_fail(LP_EINVALID_ARGUMENT, msg, msglen,
                            "task %lld has %zu features, the snapshot %zu", (long long)row->task_id,
                            row->blob_dim, v->d);
        memcpy(v->x0, row->blob0, v->d * sizeof(double)); /* blobs may be unaligned */
        memcpy(v->x1, row->blob1, v->d * sizeof(double));
        row->x0 = v->x0;
        row->x1 = v->x1;
    } else {
        const char *p = row->prompt ? row->prompt : "";
        rc = lp_featurize(v->fz, p, row->response0 ? row->response0 : "", &v->f0);
        if (rc == LP_OK)
            rc = lp_featurize(v->fz, p, row->response1 ? row->response1 : "", &v->f1);
        if (rc != LP_OK)
            return -lp_fail(rc, msg, msglen, "featurizing task %lld", (long long)row->task_id);
        row->f0 = &v->f0;
        row->f1 = &v->f1;
    }

    lp_corrupt_input in = {.label_id = row->label_id, .z = row->z};
    const lp_corruption *c = settings_for(v, row->campaign);
    if (c != NULL) {
        row->corruption_id = c->id;
        if (c->strategy == LP_ADV_BACKDOOR) {
            size_t k = (size_t)c->feature;
            in.feature0 = v->mode == LP_FEATURES_DENSE ? v->x0[k] : sparse_at(&v->f0, k);
            in.feature1 = v->mode == LP_FEATURES_DENSE ? v->x1[k] : sparse_at(&v->f1, k);
        } else if (c->strategy == LP_ADV_ANTI && row->reference_preferred >= 0) {
            /* the task's reference preference wins over any model */
            in.has_reference = 1;
            in.reference = row->reference_preferred;
        } else if (c->strategy == LP_ADV_ANTI) {
            if (v->spec.anti_model == NULL)
                return -lp_fail(LP_ENO_ACTIVE_MODEL, msg, msglen,
                                "corruption \"anti\" of campaign %s needs a served model: "
                                "task %lld has no reference preference",
                                c->campaign_name, (long long)row->task_id);
            rc = anti_margin(v, row, &in.model_margin, msg, msglen);
            if (rc != LP_OK)
                return -rc;
        }
    }
    row->z_view = lp_corrupt_view(c, &in, &row->corrupted);
    return 1;
}

/* ---- snapshots ---- */

void lp_snapshot_clear(lp_snapshot *sn)
{
    if (sn == NULL)
        return;
    lp_dataset_free(sn->ds);
    lp_gp_data_free(sn->general);
    free(sn->user);
    memset(sn, 0, sizeof *sn);
}

/* One label into the per-prompt data of Algorithm 3 (prompt key: FNV-1a of
 * its text). */
static int add_general(lp_gp_data *g, const lp_view_row *row)
{
    uint64_t h = 0xcbf29ce484222325ULL;
    for (const char *p = row->prompt ? row->prompt : ""; *p; p++)
        h = (h ^ (uint8_t)*p) * 0x100000001b3ULL;
    return row->x0 != NULL ? lp_gp_data_add_dense(g, h, row->x0, row->x1, row->z_view, row->epsilon)
                           : lp_gp_data_add(g, h, row->f0, row->f1, row->z_view, row->epsilon);
}

int lp_snapshot_build(lp_store *s, const lp_view_spec *spec, lp_snapshot *out, char *msg,
                      size_t msglen)
{
    memset(out, 0, sizeof *out);
    lp_view *v;
    int rc = lp_view_open(s, spec, &v, &out->mode, &out->d, msg, msglen);
    if (rc != LP_OK)
        return rc;
    out->cutoff = lp_view_cutoff(v);
    if ((rc = lp_view_privacy(v, &out->privacy)) != LP_OK) {
        lp_view_close(v);
        return lp_fail(rc, msg, msglen, "cannot read the labels' privacy");
    }
    /* Dense data in float64 up to 2^24 values (exact), float32 above (half
     * the memory traffic; accumulation stays double). */
    lp_storage storage = LP_STORE_CSR;
    if (out->mode == LP_FEATURES_DENSE)
        storage = (double)v->labels * (double)out->d <= 16777216.0 ? LP_STORE_F64 : LP_STORE_F32;
    out->ds = lp_dataset_new(out->d, storage);
    if (spec->general)
        out->general = lp_gp_data_new(out->d);
    if (out->ds == NULL || (spec->general && out->general == NULL)) {
        lp_view_close(v);
        lp_snapshot_clear(out);
        return lp_fail(LP_ENO_MEMORY, msg, msglen, "out of memory");
    }
    lp_view_row row;
    int got;
    char why[200];
    size_t user_cap = 0;
    while ((got = lp_view_next(v, &row, msg, msglen)) == 1) {
        if (spec->users) {
            if (lp_array_reserve((void **)&out->user, &user_cap, out->ds->n, sizeof *out->user,
                                 1024) != LP_OK) {
                got = -lp_fail(LP_ENO_MEMORY, msg, msglen, "out of memory");
                break;
            }
            out->user[out->ds->n] = row.annotator;
        }
        rc = out->mode == LP_FEATURES_DENSE
                 ? lp_dataset_add_dense(out->ds, row.x0, row.x1, row.z_view, row.epsilon, -1, why,
                                        sizeof why)
                 : lp_dataset_add_sparse(out->ds, row.f0, row.f1, row.z_view, row.epsilon, -1, why,
                                         sizeof why);
        if (rc != LP_OK) {
            got = -lp_fail(rc, msg, msglen, "label %lld: %s", (long long)row.label_id, why);
            break;
        }
        if (row.prompt != NULL) /* the cross-validation's folds group by prompt */
            out->ds->group[out->ds->n - 1] = lp_dataset_prompt_key(row.prompt);
        if (out->general != NULL && (rc = add_general(out->general, &row)) != LP_OK) {
            got = -(rc == LP_ENO_MEMORY
                        ? lp_fail(rc, msg, msglen, "out of memory")
                        : lp_fail(LP_ETRAINING_FAILED, msg, msglen,
                                  "label %lld: a prompt has more than %d distinct responses (the "
                                  "general method plays each prompt's candidates against each "
                                  "other)",
                                  (long long)row.label_id, LP_GP_MAX_K));
            break;
        }
        out->corrupted += (size_t)row.corrupted;
    }
    lp_view_close(v);
    if (got < 0) {
        lp_snapshot_clear(out);
        return -got;
    }
    if (out->ds->n == 0) {
        lp_snapshot_clear(out);
        return lp_fail(LP_ENO_LABELS, msg, msglen, "no labels up to the cut-off");
    }
    if (out->privacy.labels != (int64_t)out->ds->n) { /* one read transaction: never */
        lp_snapshot_clear(out);
        return lp_fail(LP_EINTERNAL, msg, msglen, "the privacy record counts other labels");
    }
    return LP_OK;
}
