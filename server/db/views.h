/*
 * views.h — the operator's read views: a campaign's progress, labels over
 * time and the privacy budget its annotators spent; its annotators; its
 * tasks, one page at a time; one task in full.
 *
 * Every figure comes from the counters of schema/008 (campaign_fill,
 * annotator_fill, task_fill, label_minutes) or through an index: no view
 * reads the labels table. Each call reads one snapshot.
 */
#ifndef LP_VIEWS_H
#define LP_VIEWS_H

#include "campaigns.h"
#include "store.h"

#include <stddef.h>
#include <stdint.h>

/* Labels over time: buckets are whole minutes (bucket_s a multiple of 60
 * in [LP_BUCKET_S_MIN, LP_BUCKET_S_MAX]); at most LP_VIEW_POINTS_MAX
 * buckets, the newest ones. */
#define LP_BUCKET_S_MIN 60
#define LP_BUCKET_S_MAX (30 * 86400)
#define LP_VIEW_POINTS_MAX 2000
/* The epsilon histogram: equal bins from 0 to the campaign's budget (the
 * last one closed). */
#define LP_EPSILON_BINS 10

typedef struct lp_label_point {
    int64_t t_ms;   /* start of the bucket (ms since the epoch) */
    int64_t labels; /* labels received in [t_ms, t_ms + bucket_s) */
} lp_label_point;

typedef struct lp_campaign_view {
    lp_campaign campaign;
    int64_t tasks, tasks_complete, labels, labels_needed, annotators, assignments;
    double epsilon_spent; /* the sum over the campaign's annotators */
    /* labels over time: dense from the first bucket with labels to the
     * bucket holding now_ms (or the newest label, if later) */
    int64_t bucket_s;
    lp_label_point *points; /* owned; lp_campaign_view_clear frees */
    size_t n_points;
    int64_t earlier_labels; /* labels before the first point (outside the window) */
    /* annotators per epsilon bin [k*B/BINS, (k+1)*B/BINS), and those whose
     * remaining budget is below epsilon_min: no privatized label fits */
    int64_t histogram[LP_EPSILON_BINS];
    int64_t exhausted;
} lp_campaign_view;

/* The view of campaign `name` at now_ms with buckets of bucket_s seconds
 * (valid, see above: LP_EINVALID_ARGUMENT otherwise). LP_EUNKNOWN_CAMPAIGN,
 * LP_ESTORAGE, LP_ENO_MEMORY (*out cleared). */
int lp_store_campaign_view(lp_store *s, const char *name, int64_t bucket_s, int64_t now_ms,
                           lp_campaign_view *out);
/* Frees the points; accepts NULL. */
void lp_campaign_view_clear(lp_campaign_view *v);

/* One page of a listing: rows offset..offset+limit-1 in id order, limit in
 * 1..LP_PAGE_MAX. */
#define LP_PAGE_MAX 1000

typedef struct lp_annotator_row {
    char pseudonym[LP_PSEUDONYM_MAX];
    int revoked;
    double epsilon_spent;
    int64_t labels, skips, enrolled_ms;
    int64_t last_label_ms; /* received time of its newest label; 0: none */
} lp_annotator_row;

/* A page of the campaign's annotators (by enrollment order) into *out
 * (caller frees with free()); *total gets how many it has. */
int lp_store_annotator_page(lp_store *s, int64_t campaign, int64_t offset, int64_t limit,
                            lp_annotator_row **out, size_t *n, int64_t *total);

/* The prompt excerpt of a task row: at most LP_EXCERPT_CHARS characters
 * (UTF-8 code points), cut on a character boundary. */
#define LP_EXCERPT_CHARS 200

typedef struct lp_task_row {
    int64_t id, labels;
    char *prompt;  /* the excerpt, owned */
    int truncated; /* 1 when the prompt is longer than the excerpt */
    int gold;      /* the gold answer: 0, 1 (response 0 or 1), or -1 none */
} lp_task_row;

/* A page of the campaign's tasks (by id) into *out (free with
 * lp_task_rows_free); *total gets how many it has. */
int lp_store_task_page(lp_store *s, int64_t campaign, int64_t offset, int64_t limit,
                       lp_task_row **out, size_t *n, int64_t *total);
/* Accepts NULL. */
void lp_task_rows_free(lp_task_row *rows, size_t n);

/* One task with what the operator sees of it (the context turns come from
 * lp_store_task_context). */
typedef struct lp_task_detail {
    int64_t id, created_ms;
    char campaign[LP_CAMPAIGN_NAME_MAX + 1];
    char *source_id, *prompt, *response0, *response1; /* owned */
    int64_t labels, labels_needed; /* labels_needed: the campaign's labels_per_task */
    int64_t skips;                 /* assignments of the task that were skipped */
    int gold;                      /* the gold answer: 0, 1 (response 0 or 1), or -1 none */
} lp_task_detail;

/* LP_EUNKNOWN_TASK, LP_ESTORAGE, LP_ENO_MEMORY. */
int lp_store_task_detail(lp_store *s, int64_t id, lp_task_detail *out);
/* Frees the strings; accepts NULL. */
void lp_task_detail_clear(lp_task_detail *t);

/* The first `chars` UTF-8 characters of text (a new string, NULL when out
 * of memory); *truncated tells whether anything was cut. */
char *lp_utf8_excerpt(const char *text, size_t len, size_t chars, int *truncated);

#endif
