/*
 * coord.h — what lets several servers share one database: the training
 * lock, and the records of training runs that the scheduler reads.
 *
 * Any number of servers (or stores opened in one process) may run on one
 * database. Three promises hold among them (docs/server.md, "Several
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
 *     lp_registry_active_version): one indexed read that every server polls.
 *
 * The lock's backends. On SQLite (every server on one host, as SQLite's WAL
 * mode requires) the lock is flock(2) on a small file beside the database,
 * named after it with a leading dot and a ".train-lock" suffix
 * ("var/.ldpref.db.train-lock" for "var/ldpref.db"), opened by each store
 * for itself. On PostgreSQL it is to be pg_try_advisory_lock on a
 * connection the store keeps for it alone (a session-level advisory lock,
 * released by pg_advisory_unlock or when that session ends), and
 * lp_coord_train_lock_held a query on that connection. Either way nothing
 * needs to expire: when a holder dies — killed, crashed, its host lost —
 * the operating system closes its file (the lock is free at once), or
 * PostgreSQL ends its session once it notices the connection is gone; a
 * holder that is alive keeps it however long its run takes, and can be
 * asked to cancel. Runs a dead holder left
 * unfinished are marked failed by the next holder
 * (lp_registry_runs_interrupted, called with the lock held).
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

/* What the newest training runs say, for the scheduler. */
typedef struct lp_coord_runs {
    int64_t last_start_ms; /* Unix ms the newest run started (created, if it
                              never started); 0: no run */
    int64_t last_cutoff;   /* the cut-off of the newest run that has one; 0: none */
} lp_coord_runs;

/* Two indexed reads in one snapshot. LP_OK or LP_ESTORAGE. */
int lp_coord_runs_get(lp_store *s, lp_coord_runs *out);

#endif
