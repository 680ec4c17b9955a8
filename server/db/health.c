/* health.c — the storage's health state. See internal/health.h. */
#include "health.h"

#include "clock.h"
#include "error.h"
#include "log.h"

#include <stdio.h>
#include <string.h>

static const char *reason_of(const lp_store_health *s)
{
    return s->unlinked        ? "db_unlinked"
           : s->commit_failed ? "commit_failed"
           : s->disk_low      ? "disk_low"
                              : "ok";
}

/* Updates the reason and logs a change of it (lock held). */
static void settle(lp_health *h)
{
    lp_store_health *s = &h->state;
    const char *before = s->reason;
    s->reason = reason_of(s);
    if (strcmp(before, s->reason) == 0)
        return;
    if (strcmp(s->reason, "ok") == 0)
        lp_log(LP_LOG_INFO, "storage_healthy", LP_LOG_STR("was", before),
               LP_LOG_INT("free_bytes", s->free_bytes));
    else
        lp_log(LP_LOG_ERROR, "storage_unhealthy", LP_LOG_STR("reason", s->reason),
               LP_LOG_INT("free_bytes", s->free_bytes), LP_LOG_INT("free_min", s->free_min),
               s->commit_failed ? LP_LOG_STR("failure", s->failure) : (lp_log_field){0});
}

void lp_health_init(lp_health *h, int64_t free_min)
{
    pthread_mutex_init(&h->lock, NULL);
    h->state = (lp_store_health){
        .reason = "ok", .free_bytes = -1, .free_min = free_min > 0 ? free_min : 0, .wal_bytes = -1};
}

void lp_health_destroy(lp_health *h)
{
    pthread_mutex_destroy(&h->lock);
}

void lp_health_checked(lp_health *h, int linked, int64_t free_bytes, int64_t wal_bytes)
{
    pthread_mutex_lock(&h->lock);
    lp_store_health *s = &h->state;
    s->unlinked |= !linked;
    s->free_bytes = free_bytes;
    s->wal_bytes = wal_bytes;
    s->disk_low = free_bytes >= 0 && free_bytes < s->free_min;
    s->checked_ms = lp_now_ms();
    settle(h);
    pthread_mutex_unlock(&h->lock);
}

void lp_health_committed(lp_health *h, int ok, const char *message)
{
    pthread_mutex_lock(&h->lock);
    lp_store_health *s = &h->state;
    if (ok) {
        s->commit_failed = 0;
    } else {
        s->commit_failed = 1;
        s->failed_ms = lp_now_ms();
        snprintf(s->failure, sizeof s->failure, "%s", message ? message : "");
    }
    settle(h);
    pthread_mutex_unlock(&h->lock);
}

void lp_health_truncated(lp_health *h)
{
    pthread_mutex_lock(&h->lock);
    h->state.truncated_ms = lp_now_ms();
    pthread_mutex_unlock(&h->lock);
}

int lp_health_refusal(lp_health *h)
{
    pthread_mutex_lock(&h->lock);
    const lp_store_health *s = &h->state;
    int ok = !s->unlinked && !s->commit_failed && !s->disk_low;
    pthread_mutex_unlock(&h->lock);
    return ok ? LP_OK : LP_ESTORAGE_UNHEALTHY;
}

int lp_health_wants_probe(lp_health *h)
{
    pthread_mutex_lock(&h->lock);
    const lp_store_health *s = &h->state;
    int wants = s->commit_failed && !s->unlinked && !s->disk_low;
    pthread_mutex_unlock(&h->lock);
    return wants;
}

void lp_health_get(lp_health *h, lp_store_health *out)
{
    pthread_mutex_lock(&h->lock);
    *out = h->state;
    pthread_mutex_unlock(&h->lock);
}
