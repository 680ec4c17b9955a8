/*
 * db.h — what a database handle (lp_store) is made of, for the repositories
 * (internal to server/db/): the engine and the in-memory state that two
 * repositories keep beside it.
 *
 *   engine  connections, writer, read pool (engine.h)
 *   keys    annotators.c: the key -> annotator cache of committed rows
 *   tokens  tokens.c: the live operator tokens as committed
 *   labels  labels.c: the writer's per-transaction annotator copy; it is
 *           the engine's transaction cache
 *   train_lock  coord.c: the training lock this store holds or not
 *
 * store.c builds and frees the five; the repositories only use them.
 */
#ifndef LP_DB_H
#define LP_DB_H

#include "engine.h"

struct lp_keys;
struct lp_tokens;
struct lp_label_writer;
struct lp_train_lock;

struct lp_store {
    lp_engine *engine;
    struct lp_keys *keys;
    struct lp_tokens *tokens;
    struct lp_label_writer *labels;
    struct lp_train_lock *train_lock;
    int64_t lease_ms; /* tasks.c: the lease of an assignment (> 0) */
};

/* annotators.c. NULL when out of memory; free accepts NULL. */
struct lp_keys *lp_keys_new(void);
void lp_keys_free(struct lp_keys *k);

/* tokens.c. NULL when out of memory; free accepts NULL. */
struct lp_tokens *lp_tokens_new(void);
void lp_tokens_free(struct lp_tokens *t);

/* coord.c: the training lock on the file at path (created when first
 * taken; lp_engine_train_lock_path). path NULL: a backend without a lock
 * file (PostgreSQL, whose advisory lock is to come): taking it fails with
 * LP_ESTORAGE. NULL when out of memory; free accepts NULL and lets a held
 * lock go. */
struct lp_train_lock *lp_train_lock_new(const char *path);
void lp_train_lock_free(struct lp_train_lock *t);

/* labels.c. The writer's state for label jobs; *cache gets the hooks to
 * hand to lp_engine_open, and lp_label_writer_attach the engine once open.
 * NULL when out of memory; free accepts NULL (call it after the engine is
 * closed). */
struct lp_label_writer *lp_label_writer_new(lp_txn_cache *cache);
void lp_label_writer_attach(struct lp_label_writer *w, lp_engine *e);
void lp_label_writer_free(struct lp_label_writer *w);

/* Every statement of views.c and stats.c, for the query-plan test
 * (tests/unit/test_views.c): each must reach its rows through an index. */
extern const char *const LP_VIEWS_SQL[];
extern const size_t LP_VIEWS_SQL_COUNT;
extern const char *const LP_STATS_SQL[];
extern const size_t LP_STATS_SQL_COUNT;

#endif
