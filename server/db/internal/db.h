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
 *   watch   coord.c: the thread that keeps keys, tokens and the served
 *           model in step with other servers on the database
 *
 * store.c builds and frees the six; the repositories only use them.
 */
#ifndef LP_DB_H
#define LP_DB_H

#include "engine.h"

struct lp_keys;
struct lp_tokens;
struct lp_label_writer;
struct lp_train_lock;
struct lp_coord_watch;

struct lp_store {
    lp_engine *engine;
    struct lp_keys *keys;
    struct lp_tokens *tokens;
    struct lp_label_writer *labels;
    struct lp_train_lock *train_lock;
    struct lp_coord_watch *watch;
    int64_t lease_ms; /* tasks.c: the lease of an assignment (> 0) */
};

/* annotators.c. NULL when out of memory; free accepts NULL. drop forgets
 * every cached key (another server revoked one, coord.c); a read that began
 * before it is not cached. */
struct lp_keys *lp_keys_new(void);
void lp_keys_free(struct lp_keys *k);
void lp_keys_drop(struct lp_keys *k);

/* tokens.c. NULL when out of memory; free accepts NULL. drop forgets the
 * live set (another server changed it, coord.c), as a local write does. */
struct lp_tokens *lp_tokens_new(void);
void lp_tokens_free(struct lp_tokens *t);
void lp_tokens_drop(struct lp_tokens *t);

/* coord.c: the training lock of e's database: SQLite, flock on the file
 * lp_engine_train_lock_path (created when first taken); PostgreSQL, an
 * advisory lock on a session of its own (lp_engine_session_open, opened
 * when first taken). NULL when out of memory; free accepts NULL and lets
 * a held lock go. */
struct lp_train_lock *lp_train_lock_new(lp_engine *e);
void lp_train_lock_free(struct lp_train_lock *t);

/* coord.c: the watcher (coord.h), started once the store is complete and
 * stopped before anything of it is freed. NULL when it cannot start;
 * stop accepts NULL. */
struct lp_coord_watch *lp_coord_watch_start(lp_store *s);
void lp_coord_watch_stop(struct lp_coord_watch *w);

/* coord.c: the channels other servers' watchers LISTEN on (PostgreSQL). */
#define LP_COORD_ACTIVATED "ldpref_model_active" /* a model was activated */
#define LP_COORD_REVOKED "ldpref_revoked"        /* a token or key was revoked */
/* Notifies channel from inside a write job on c (delivered to every
 * server when the transaction commits, not at all if it rolls back).
 * Nothing on SQLite, where the watchers poll. LP_OK or LP_ESTORAGE. */
int lp_coord_notify(lp_conn *c, const char *channel);

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
