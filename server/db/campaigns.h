/*
 * campaigns.h — the campaigns repository: a campaign's name and its privacy
 * parameters (the epsilon range, default and per-annotator budget).
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
} lp_campaign;

/* Creates c (id is filled in). LP_ECAMPAIGN_EXISTS if the name is taken. */
int lp_store_campaign_create(lp_store *s, lp_campaign *c);
/* LP_EUNKNOWN_CAMPAIGN if there is no such campaign. */
int lp_store_campaign_by_name(lp_store *s, const char *name, lp_campaign *out);
int lp_store_campaign_by_id(lp_store *s, int64_t id, lp_campaign *out);
/* All campaigns by id; *out is caller-owned (free()). */
int lp_store_campaign_list(lp_store *s, lp_campaign **out, size_t *n);

#endif
