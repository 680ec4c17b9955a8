/*
 * campaigns.h — the campaigns repository: a campaign's name, its privacy
 * parameters (the epsilon range, default and per-annotator budget), how
 * many labels each task needs and the per-annotator quota, and the
 * campaign's progress.
 */
#ifndef LP_CAMPAIGNS_H
#define LP_CAMPAIGNS_H

#include "store.h"

#include <stddef.h>
#include <stdint.h>

typedef struct lp_campaign {
    int64_t id;
    char name[LP_CAMPAIGN_NAME_MAX + 1];
    double epsilon_min, epsilon_max, epsilon_budget, epsilon_default;
    int allow_infinite;
    int64_t labels_per_task; /* >= 1; 0 on create: 1 */
    int64_t annotator_quota; /* labels + open leases per annotator; 0: none */
    /* schema/014: central (1): annotators send true labels and models leave
     * only through a private release; the release budget (pure epsilon,
     * 0: none; total delta of approximate releases, 0: none) and the
     * per-annotator contribution cap m (0: none) */
    int central;
    double release_epsilon, release_delta;
    int64_t contribution_cap;
} lp_campaign;

/* Creates c (id is filled in). LP_ECAMPAIGN_EXISTS if the name is taken. */
int lp_store_campaign_create(lp_store *s, lp_campaign *c);
/* Replaces the release budget (release_epsilon, release_delta) of the
 * campaign c->name; the other fields of c are read back. LP_EUNKNOWN_CAMPAIGN. */
int lp_store_campaign_set_budget(lp_store *s, lp_campaign *c);
/* What a campaign's releases spent so far (basic composition: the sums of
 * its models' release epsilons and deltas). */
int lp_store_release_spent(lp_store *s, int64_t campaign, double *epsilon, double *delta);
/* LP_EUNKNOWN_CAMPAIGN if there is no such campaign. */
int lp_store_campaign_by_name(lp_store *s, const char *name, lp_campaign *out);
int lp_store_campaign_by_id(lp_store *s, int64_t id, lp_campaign *out);
/* All campaigns by id; *out is caller-owned (free()). */
int lp_store_campaign_list(lp_store *s, lp_campaign **out, size_t *n);

/* Where an annotator's campaign stands, read in one snapshot. */
typedef struct lp_progress {
    char campaign[LP_CAMPAIGN_NAME_MAX + 1];
    int64_t tasks_total;
    int64_t tasks_complete; /* tasks with >= labels_per_task labels */
    int64_t labels;         /* labels stored in the campaign */
    int64_t labels_needed;  /* tasks_total * labels_per_task */
    int64_t annotator_labels;
    int64_t annotator_quota; /* 0: none */
} lp_progress;

/* The progress of annotator's campaign. LP_EUNKNOWN_KEY if no such
 * annotator. */
int lp_store_progress(lp_store *s, int64_t annotator, lp_progress *out);

#endif
