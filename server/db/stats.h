/*
 * stats.h — counts over the whole database and per campaign, read in one
 * snapshot (for /metrics and the operator's /stats) from counters that
 * triggers keep (schema/004, 008): the cost grows with the campaigns, not
 * the labels.
 */
#ifndef LP_STATS_H
#define LP_STATS_H

#include "store.h"

#include <stddef.h>
#include <stdint.h>

typedef struct lp_campaign_count {
    char name[LP_CAMPAIGN_NAME_MAX + 1];
    int64_t tasks, annotators, labels;
    double epsilon_spent;
    int64_t labels_per_task, annotator_quota; /* quota 0: none */
    int64_t tasks_complete, labels_needed;    /* see lp_progress (campaigns.h) */
} lp_campaign_count;

typedef struct lp_stats {
    int64_t tasks, annotators, labels, assignments;
    double epsilon_spent;
    lp_campaign_count *campaigns; /* owned; lp_stats_clear frees */
    size_t n_campaigns;
} lp_stats;

/* LP_OK with *out filled (lp_stats_clear), or LP_ESTORAGE (*out cleared). */
int lp_store_stats(lp_store *s, lp_stats *out);
/* Frees the campaign counts; accepts NULL. */
void lp_stats_clear(lp_stats *st);

#endif
