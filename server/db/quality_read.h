/*
 * quality_read.h — the reads behind label quality (GET /v1/quality): a
 * campaign's annotators and every label of the campaign with its epsilon,
 * its annotator, its task and the task's gold answer, in one snapshot.
 */
#ifndef LP_QUALITY_READ_H
#define LP_QUALITY_READ_H

#include "store.h"

#include <stddef.h>
#include <stdint.h>

typedef struct lp_quality_row {
    int64_t task;     /* task id */
    size_t annotator; /* index into lp_quality_data.annotators */
    int z_task;       /* the privatized answer in the task's orientation (1: response 1) */
    int gold;         /* the task's gold answer in the same orientation, or -1 none */
    double epsilon;   /* +INFINITY: not privatized */
} lp_quality_row;

typedef struct lp_quality_annotator {
    int64_t id;
    char pseudonym[LP_PSEUDONYM_MAX];
} lp_quality_annotator;

typedef struct lp_quality_data {
    lp_quality_annotator *annotators; /* every annotator of the campaign, by id */
    size_t n_annotators;
    lp_quality_row *rows; /* every label of the campaign, ordered by task, then annotator */
    size_t n_rows;
} lp_quality_data;

/* Reads campaign's annotators and labels on a connection of its own.
 * LP_OK with *out filled (lp_quality_data_clear), LP_ESTORAGE or
 * LP_ENO_MEMORY (*out cleared). */
int lp_store_quality_read(lp_store *s, int64_t campaign, lp_quality_data *out);
/* Frees the arrays; accepts NULL. */
void lp_quality_data_clear(lp_quality_data *d);

#endif
