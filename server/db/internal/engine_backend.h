/*
 * engine_backend.h — what the storage engine's core (engine.c: the job
 * queue, the writer thread with group commit, the read pool, the statement
 * caches, the statistics and the health state) asks of a database backend
 * (internal to server/db/): SQLite (engine_sqlite.c) for a file path,
 * PostgreSQL (engine_pg.c) for a libpq URI.
 *
 * A backend opens the writer connection (creating and migrating the
 * database), opens read connections, and does what is its own around the
 * core's transactions: the SQL that begins one, the check before a commit,
 * the commit itself, what follows it, the idle upkeep and the probe that
 * clears a failed commit. Every function runs on the thread the core calls
 * it from: open before the writer starts, reader_open on any thread (the
 * backend's state is read-only there), the others on the writer thread, and
 * close once the writer stopped.
 */
#ifndef LP_ENGINE_BACKEND_H
#define LP_ENGINE_BACKEND_H

#include "health.h"
#include "sql.h"
#include "store.h"

#include <stddef.h>
#include <stdint.h>

typedef struct lp_backend lp_backend; /* a backend's own state */

/* What commit returns besides LP_OK and LP_ESTORAGE: the transaction was
 * rolled back by a conflict with another writer (PostgreSQL SQLSTATE 40001
 * or 40P01) and the whole group may run again. */
#define LP_BACKEND_RETRY 1

typedef struct lp_backend_ops {
    const char *name; /* "sqlite", "postgresql" */
    /* The SQL that begins a write transaction (run as a cached statement). */
    const char *begin_sql;
    /* A query whose one value changes when another connection commits to
     * the database (SQLite: PRAGMA data_version), run as a cached
     * statement after BEGIN; NULL: others may always have committed (the
     * transaction cache's others hook runs every transaction). */
    const char *data_version_sql;
    /* Opens the database opts->path and the writer connection, migrated.
     * health is the core's (the backend reports its own checks there).
     * LP_OK with *out and *writer set, or an error with a message in err
     * (*out, when set, must still be closed). */
    int (*open)(const lp_store_opts *opts, lp_health *health, lp_backend **out, lp_conn **writer,
                char *err, size_t errlen);
    /* After the transaction cache was loaded: the open has succeeded. */
    void (*opened)(lp_backend *b);
    /* A new read-only connection (pooled or private). LP_OK or LP_ESTORAGE
     * with a message in err; *out is NULL on failure. */
    int (*reader_open)(lp_backend *b, lp_conn **out, char *err, size_t errlen);
    /* After a pooled read failed: LP_BACKEND_RETRY when the connection
     * was lost and is made again (the read then runs once more), LP_OK
     * when it was not lost, LP_ESTORAGE when it cannot be made again.
     * NULL: never lost. */
    int (*reader_check)(lp_conn *c);
    /* A statement kept for the connection's life (the statement cache). */
    lp_stmt *(*prepare_kept)(lp_conn *c, const char *sql);
    /* After a BEGIN failed: makes a lost writer connection again. LP_OK
     * when the BEGIN may be tried once more. NULL: never. */
    int (*reconnect)(lp_backend *b);
    /* After a job or the transaction cache's flush failed (the transaction
     * may be over): 1 when a statement of the transaction met a conflict
     * with another writer (PostgreSQL: SQLSTATE 40001 or 40P01), so that
     * the group runs again rather than failing; 0 otherwise. NULL: never. */
    int (*conflicted)(lp_backend *b);
    /* Right before the commit: LP_OK, or LP_ESTORAGE_UNHEALTHY to roll the
     * transaction back instead (SQLite: the files are no longer linked),
     * or LP_BACKEND_RETRY to roll it back and run the group again
     * (PostgreSQL: a statement met a conflict with another writer). */
    int (*before_commit)(lp_backend *b);
    /* Commits the open transaction: LP_OK, or LP_ESTORAGE or
     * LP_BACKEND_RETRY with the failure in why. NULL: the core runs COMMIT
     * as a cached statement. */
    int (*commit)(lp_backend *b, char *why, size_t whylen);
    /* After the group's transaction committed (ok) or did not. */
    void (*after_commit)(lp_backend *b, int ok);
    /* Between transactions, at most once a second; idle: no job waits,
     * and writes stopped idle_ns ago. */
    void (*upkeep)(lp_backend *b, int idle, int64_t idle_ns);
    /* After a failed commit: one small write transaction that changes
     * nothing. 1 when it committed; why gets the failure otherwise. */
    int (*probe)(lp_backend *b, char *why, size_t whylen);
    /* The file of the training lock (coord.h), or NULL when the backend
     * has none. */
    const char *(*train_lock_path)(lp_backend *b);
    /* Closes the writer connection (its cached statements are finalized)
     * and frees b. Accepts NULL. */
    void (*close)(lp_backend *b);
} lp_backend_ops;

extern const lp_backend_ops lp_backend_sqlite;
extern const lp_backend_ops lp_backend_pg;

/* The backend for a path: PostgreSQL for a libpq URI (postgresql:// or
 * postgres://), SQLite for anything else. */
const lp_backend_ops *lp_backend_for(const char *path);

#endif
