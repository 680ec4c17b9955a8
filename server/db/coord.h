/*
 * coord.h — what lets several servers share one database: the training
 * lock, the watcher that keeps each server's caches and served model in
 * step with the others, and the records of training runs that the
 * scheduler reads.
 *
 * Any number of servers (or stores opened in one process) may run on one
 * database. These promises hold among them (docs/server.md, "Several
 * servers on one database"):
 *
 *   - At most one store holds the training lock at a time. A learner holds
 *     it from the moment a run is queued until the run is final, so exactly
 *     one server trains at a time; a retrain asked of another server is
 *     refused with LP_ERETRAIN_IN_PROGRESS.
 *   - Runs are recorded only by the lock's holder. So what the newest runs
 *     say (lp_coord_runs_get), read while holding the lock, cannot change
 *     until the holder records a run itself: a scheduled run is due and
 *     claimed in one step that no other server can interleave, and the
 *     schedule fires once, not once per server.
 *   - The served model follows the registry's active version (registry.h,
 *     lp_registry_active_version): the learner polls it, and on PostgreSQL
 *     is woken by the activation's notification (lp_coord_on_activation).
 *   - A token or annotator key revoked on one server is refused by every
 *     server within LP_COORD_WATCH_MS plus one read (PostgreSQL: within a
 *     round trip of the revocation's commit, by its notification).
 *
 * The lock's backends. On SQLite (every server on one host, as SQLite's WAL
 * mode requires) the lock is flock(2) on a small file beside the database,
 * named after it with a leading dot and a ".train-lock" suffix
 * ("var/.ldpref.db.train-lock" for "var/ldpref.db"), opened by each store
 * for itself. On PostgreSQL it is pg_try_advisory_lock on a session the
 * store opens for it alone when first taken (a session-level advisory
 * lock, released by pg_advisory_unlock or when that session ends; TCP
 * keepalives on both ends, engine_pg.c), and lp_coord_train_lock_held a
 * query of pg_locks on that session. Either way nothing needs to expire:
 * when a holder dies — killed, crashed, its host lost — the operating
 * system closes its file or socket (the lock is free at once), or, when its
 * host is lost, PostgreSQL ends its session once the keepalives go
 * unanswered (about 20 s); a holder that is alive keeps it however long
 * its run takes, and can be asked to cancel. Runs a dead holder left
 * unfinished are marked failed by the next holder
 * (lp_registry_runs_interrupted, called with the lock held).
 *
 * The watcher. Each store runs one thread that, every LP_COORD_WATCH_MS,
 * reads three counts that only grow (operator token rows, revoked tokens,
 * revoked annotators) and drops the store's token set or key cache when
 * theirs changed — another server revoked, rotated or added one. On
 * PostgreSQL it also LISTENs, on a session of its own, on the channels
 * that revocations and activations notify inside their transactions
 * (delivered on commit): a revocation makes it read at once, an
 * activation calls the function lp_coord_on_activation set. A listening
 * session that was lost is opened again at the next period, and counts as
 * a revocation and an activation (it may have missed them).
 *
 * Thread safety: every function may be called from any thread.
 */
#ifndef LP_COORD_H
#define LP_COORD_H

#include "store.h"

#include <stdint.h>

/* Takes the training lock without waiting: LP_OK when this store holds it
 * now (also when it already did), LP_ERETRAIN_IN_PROGRESS while another
 * store holds it, LP_ESTORAGE when the lock cannot be reached (logged). */
int lp_coord_train_lock_try(lp_store *s);
/* Whether this store still holds the lock: 1 or 0. A holder checks it
 * before it records a result, so that a holder that lost its lock
 * (PostgreSQL: its session ended) records nothing. */
int lp_coord_train_lock_held(lp_store *s);
/* Lets the lock go (nothing when not held). lp_store_close does it too. */
void lp_coord_train_lock_release(lp_store *s);

/* The watcher's period (ms): the bound, besides one read, on how long a
 * revocation on another server stays unseen here. */
#define LP_COORD_WATCH_MS 1000

/* Sets the function the watcher calls (on its thread) when another
 * server's activation is announced (PostgreSQL), or clears it (fn NULL).
 * Once this returns, the old function is not running and not called
 * again. fn must be quick (wake a thread). */
void lp_coord_on_activation(lp_store *s, void (*fn)(void *ctx), void *ctx);

/* What the watcher did since the store opened. */
typedef struct lp_coord_watch_stats {
    int64_t checks;      /* reads of the counts */
    int64_t token_drops; /* times the token set was dropped */
    int64_t key_drops;   /* times the key cache was dropped */
    int64_t activations; /* activations announced to this store (PostgreSQL) */
    int64_t revocations; /* revocations announced to this store (PostgreSQL) */
} lp_coord_watch_stats;
void lp_coord_watch_stats_get(lp_store *s, lp_coord_watch_stats *out);

/* What the newest training runs say, for the scheduler. */
typedef struct lp_coord_runs {
    int64_t last_start_ms; /* Unix ms the newest run started (created, if it
                              never started); 0: no run */
    int64_t last_cutoff;   /* the cut-off of the newest run that has one; 0: none */
} lp_coord_runs;

/* Two indexed reads in one snapshot. LP_OK or LP_ESTORAGE. */
int lp_coord_runs_get(lp_store *s, lp_coord_runs *out);

#endif
