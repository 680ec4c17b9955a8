/* store.c — a database handle: the engine and the repositories' in-memory
 * state, built and torn down together. See store.h and internal/db.h. */
#include "store.h"

#include "db.h"
#include "error.h"

#include <sodium.h>
#include <stdio.h>
#include <stdlib.h>

int lp_store_open(const lp_store_opts *opts, lp_store **out, char *err, size_t errlen)
{
    *out = NULL;
    if (sodium_init() < 0) {
        snprintf(err, errlen, "libsodium failed to initialize");
        return LP_ERNG;
    }
    lp_store *s = calloc(1, sizeof *s);
    lp_txn_cache cache = {0};
    if (s == NULL || (s->keys = lp_keys_new()) == NULL || (s->tokens = lp_tokens_new()) == NULL ||
        (s->labels = lp_label_writer_new(&cache)) == NULL) {
        snprintf(err, errlen, "out of memory");
        lp_store_close(s);
        return LP_ENO_MEMORY;
    }
    int rc = lp_engine_open(opts, &cache, &s->engine, err, errlen);
    if (rc != LP_OK) {
        lp_store_close(s);
        return rc;
    }
    lp_label_writer_attach(s->labels, s->engine);
    if ((s->train_lock = lp_train_lock_new(s->engine)) == NULL) {
        snprintf(err, errlen, "out of memory");
        lp_store_close(s);
        return LP_ENO_MEMORY;
    }
    s->lease_ms = opts->lease_ms > 0 ? opts->lease_ms : LP_LEASE_DEFAULT_MS;
    if ((s->watch = lp_coord_watch_start(s)) == NULL) {
        snprintf(err, errlen, "cannot start the coordination thread");
        lp_store_close(s);
        return LP_ENO_MEMORY;
    }
    *out = s;
    return LP_OK;
}

void lp_store_close(lp_store *s)
{
    if (s == NULL)
        return;
    lp_coord_watch_stop(s->watch); /* first: it reads through the engine */
    lp_engine_close(s->engine);    /* then: the writer uses the label state */
    lp_label_writer_free(s->labels);
    lp_train_lock_free(s->train_lock);
    lp_keys_free(s->keys);
    lp_tokens_free(s->tokens);
    free(s);
}

void lp_store_writer_stats_get(lp_store *s, lp_store_writer_stats *out)
{
    lp_engine_stats(s->engine, out);
}

void lp_store_health_get(lp_store *s, lp_store_health *out)
{
    lp_engine_health(s->engine, out);
}
