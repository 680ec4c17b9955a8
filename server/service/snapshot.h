/*
 * snapshot.h — the training data of a run: the received labels up to a
 * cut-off, in their (possibly corrupted) view, as a learner's dataset.
 *
 * A view reads labels through the label cursor (label_cursor.h): in id
 * order, in one read transaction of its own, so it sees exactly the labels
 * committed when it started (up to the cut-off); ingest goes on meanwhile.
 * The export reads the same cursor. Each row carries the
 * received label in the task's orientation (z = 1: response 1 preferred),
 * the view's label after the corruption settings in force for the task's
 * campaign (corrupt.h), and the features of both responses under the
 * view's feature plan:
 *   dense  the task's stored feature vectors (all of one dimension d);
 *   text   the built-in featurizer over (prompt, response) with a spec.
 * The `anti` strategy opposes the task's reference preference when it has
 * one (tasks uploaded as chosen/rejected) and asks a served model for its
 * preference otherwise; `backdoor` compares feature k of the two responses
 * under the plan.
 */
#ifndef LP_SNAPSHOT_H
#define LP_SNAPSHOT_H

#include "corrupt.h"
#include "dataset.h"
#include "general.h"
#include "label_cursor.h"
#include "served.h"
#include "store.h"

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

typedef enum lp_feature_mode {
    LP_FEATURES_AUTO = 0,
    LP_FEATURES_DENSE = 1,
    LP_FEATURES_TEXT = 2
} lp_feature_mode;

typedef struct lp_view_spec {
    int64_t campaign;              /* 0: every campaign */
    int64_t cutoff;                /* newest label id included; 0: newest at open */
    lp_feature_mode features;      /* AUTO resolves at open (see lp_view_open) */
    lp_feat_spec text;             /* for TEXT */
    const lp_corruption *settings; /* in force, one per campaign; borrowed */
    size_t n_settings;
    lp_served *anti_model;    /* for strategy anti on tasks without a reference preference;
                                 borrowed; may be NULL */
    const atomic_int *cancel; /* optional: nonzero stops reading (LP_ECANCELLED) */
    void (*pause)(void *ctx); /* optional: called every 1024 rows (may sleep) */
    void *pause_ctx;
    int general; /* lp_snapshot_build: also group the labels by prompt for
                    Algorithm 3 (lp_snapshot.general) */
    int users;   /* lp_snapshot_build: also keep each label's annotator
                    (lp_snapshot.user), for user-level releases */
} lp_view_spec;

typedef struct lp_view_row {
    int64_t label_id, task_id, campaign, timestamp_ms, received_ms, annotator;
    const char *campaign_name, *pseudonym, *prompt, *response0, *response1;
    int z;                   /* as received, task orientation */
    int z_view;              /* after corruption */
    int corrupted;           /* z_view != z */
    int64_t corruption_id;   /* settings that applied to the row's campaign; 0: none */
    int reference_preferred; /* the task's reference preference: 0, 1, or -1 none */
    double epsilon;
    const double *x0, *x1;     /* dense plan: the d features of response 0 and 1 */
    const lp_sparse *f0, *f1;  /* text plan: the features of response 0 and 1 */
    const void *blob0, *blob1; /* stored dense features (binary64), may be NULL */
    size_t blob_dim;
} lp_view_row; /* everything borrowed until the next lp_view_next */

typedef struct lp_view lp_view;

/*
 * Opens a view. AUTO chooses dense when every task in range has stored
 * features of one dimension, text (spec->text) otherwise; *mode_out and
 * *dim_out (either may be NULL) get the plan. Errors: LP_EBAD_CORRUPTION
 * (backdoor feature >= d; msg), LP_EINVALID_ARGUMENT (DENSE asked but tasks
 * lack features; msg), LP_ESTORAGE, LP_ENO_MEMORY.
 */
int lp_view_open(lp_store *s, const lp_view_spec *spec, lp_view **out, lp_feature_mode *mode_out,
                 size_t *dim_out, char *msg, size_t msglen);
/* 1 with *row set, 0 at the end, or a negative LP_E* code (msg set);
 * -LP_ENO_ACTIVE_MODEL at the first row under `anti` whose task has no
 * reference preference when spec->anti_model is NULL. */
int lp_view_next(lp_view *v, lp_view_row *row, char *msg, size_t msglen);
/* The cut-off the view reads up to (resolved at open). */
int64_t lp_view_cutoff(const lp_view *v);
/* The privacy of the labels the view reads (label_cursor.h). LP_ESTORAGE. */
int lp_view_privacy(lp_view *v, lp_label_privacy *out);
void lp_view_close(lp_view *v);

/* A training snapshot built from a view. */
typedef struct lp_snapshot {
    lp_dataset *ds; /* owned */
    int64_t cutoff;
    lp_feature_mode mode; /* DENSE or TEXT */
    size_t d;
    size_t corrupted;         /* labels whose view differs from the received label */
    lp_gp_data *general;      /* owned; the same labels by prompt when spec->general */
    lp_label_privacy privacy; /* of exactly the labels in ds */
    int64_t *user;            /* owned; with spec->users: the annotator of row i */
} lp_snapshot;

/* Reads the whole view into a dataset. LP_ENO_LABELS if it is empty;
 * LP_ETRAINING_FAILED when spec->general and a prompt has more than
 * LP_GP_MAX_K distinct responses; other errors as lp_view_open /
 * lp_view_next. */
int lp_snapshot_build(lp_store *s, const lp_view_spec *spec, lp_snapshot *out, char *msg,
                      size_t msglen);
void lp_snapshot_clear(lp_snapshot *sn);

#endif
