/*
 * label_cursor.h — the received labels in id order, joined with their task,
 * annotator and campaign: what the export and the training snapshots read.
 *
 * A cursor reads on a read-only connection of its own, in one read
 * transaction, so it sees exactly the labels committed when it opened (up
 * to the cut-off); ingest goes on meanwhile.
 */
#ifndef LP_LABEL_CURSOR_H
#define LP_LABEL_CURSOR_H

#include "store.h"

#include <stddef.h>
#include <stdint.h>

/* One label. Strings and feature blobs are borrowed until the next
 * lp_label_cursor_next or close. */
typedef struct lp_label_row {
    int64_t label_id, task_id, campaign_id, timestamp_ms, received_ms, annotator_id;
    const char *campaign, *pseudonym, *prompt, *response0, *response1; /* campaign: its name */
    int z_task;              /* as received, in the task's order (1: response 1 preferred) */
    double epsilon;          /* +INFINITY when not privatized */
    int reference_preferred; /* the task's reference preference: 0, 1, or -1 none */
    /* the task's stored features: dim binary64 values each, maybe unaligned
     * (memcpy); NULL and dim 0 when the task has none */
    const void *features0, *features1;
    size_t dim;
} lp_label_row;

/* What the labels in range look like, for planning a read. */
typedef struct lp_label_summary {
    int64_t labels;
    int64_t without_features;                     /* labels whose task has no stored features */
    int64_t feature_bytes_min, feature_bytes_max; /* of features0 over the others */
} lp_label_summary;

/* The privacy of a set of labels: what a model trained on them carries
 * (schema/012_model_privacy.sql, docs/trust-model.md). */
typedef struct lp_label_privacy {
    int known; /* 0: not recorded (a model trained before the record existed) */
    int64_t labels, annotators;
    int64_t unprivatized;            /* labels sent with epsilon = infinity */
    double epsilon_min, epsilon_max; /* over the privatized labels; NAN when none */
    /* the largest sum of one annotator's label epsilons (basic composition);
     * INFINITY when any label was not privatized */
    double epsilon_per_annotator;
    /* 1: the model was not fitted on the labels but released from them by a
     * differentially private mechanism (schema/014; set by the learner and
     * read back from the registry, never by the cursor) */
    int released;
} lp_label_privacy;

/* 1 when the record is known and every label was privatized: only then is a
 * model trained on the labels post-processing of epsilon-LDP reports. */
int lp_label_privacy_all_privatized(const lp_label_privacy *p);
/* 1 when a model with this record may be served to anyone (--public-score):
 * every label privatized (post-processing of epsilon-LDP reports) or the
 * model a DP release (post-processing of the release, docs/trust-model.md). */
int lp_label_privacy_public(const lp_label_privacy *p);

typedef struct lp_label_cursor lp_label_cursor;

/* Opens a cursor over the labels of a campaign (0: every local campaign;
 * a central campaign's labels are read only when it is named) with
 * id <= cutoff (0: the newest label at open). LP_ESTORAGE, LP_ENO_MEMORY.
 * Close with lp_label_cursor_close. */
int lp_label_cursor_open(lp_store *s, int64_t campaign, int64_t cutoff, lp_label_cursor **out);
/* The cut-off the cursor reads up to (resolved at open; 0: no labels). */
int64_t lp_label_cursor_cutoff(const lp_label_cursor *c);
/* The summary of the cursor's whole range (in its read transaction; does
 * not move the cursor). LP_ESTORAGE. */
int lp_label_cursor_summary(lp_label_cursor *c, lp_label_summary *out);
/* The privacy of the cursor's whole range (in its read transaction, so of
 * exactly the labels it yields; does not move the cursor). LP_ESTORAGE. */
int lp_label_cursor_privacy(lp_label_cursor *c, lp_label_privacy *out);
/* 1 with *row filled, 0 at the end, -LP_ESTORAGE on error (logged). */
int lp_label_cursor_next(lp_label_cursor *c, lp_label_row *row);
/* Accepts NULL. */
void lp_label_cursor_close(lp_label_cursor *c);

#endif
