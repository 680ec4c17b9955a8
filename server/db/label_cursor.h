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
    int64_t label_id, task_id, campaign_id, timestamp_ms, received_ms;
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

typedef struct lp_label_cursor lp_label_cursor;

/* Opens a cursor over the labels of a campaign (0: every campaign) with
 * id <= cutoff (0: the newest label at open). LP_ESTORAGE, LP_ENO_MEMORY.
 * Close with lp_label_cursor_close. */
int lp_label_cursor_open(lp_store *s, int64_t campaign, int64_t cutoff, lp_label_cursor **out);
/* The cut-off the cursor reads up to (resolved at open; 0: no labels). */
int64_t lp_label_cursor_cutoff(const lp_label_cursor *c);
/* The summary of the cursor's whole range (in its read transaction; does
 * not move the cursor). LP_ESTORAGE. */
int lp_label_cursor_summary(lp_label_cursor *c, lp_label_summary *out);
/* 1 with *row filled, 0 at the end, -LP_ESTORAGE on error (logged). */
int lp_label_cursor_next(lp_label_cursor *c, lp_label_row *row);
/* Accepts NULL. */
void lp_label_cursor_close(lp_label_cursor *c);

#endif
