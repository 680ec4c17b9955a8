/*
 * health.h — the storage's health as the writer last saw it (internal to
 * server/db/; the reasons are described in store.h). The writer reports
 * what it checked and how its commits went; anyone may read the state.
 * Changes of state are logged (storage_unhealthy, storage_healthy).
 *
 * Thread safety: every function may be called from any thread.
 */
#ifndef LP_HEALTH_H
#define LP_HEALTH_H

#include "store.h"

#include <pthread.h>
#include <stdint.h>

typedef struct lp_health {
    pthread_mutex_t lock;
    lp_store_health state; /* under lock */
} lp_health;

void lp_health_init(lp_health *h, int64_t free_min);
void lp_health_destroy(lp_health *h);

/* The result of a check of the files: still linked, free bytes (-1
 * unknown), the WAL's size (-1 unknown). Unlinked stays for good. */
void lp_health_checked(lp_health *h, int linked, int64_t free_bytes, int64_t wal_bytes);
/* A commit, or a probe write, succeeded (ok) or failed with message. */
void lp_health_committed(lp_health *h, int ok, const char *message);
/* The WAL was folded into the database and truncated. */
void lp_health_truncated(lp_health *h);

/* LP_OK when writes may go on, else LP_ESTORAGE_UNHEALTHY. */
int lp_health_refusal(lp_health *h);
/* 1 when only a failed commit stands in the way of writes (time to probe). */
int lp_health_wants_probe(lp_health *h);

void lp_health_get(lp_health *h, lp_store_health *out);

#endif
