/*
 * engine.h — the storage engine under the repositories (internal to
 * server/db/). Its interface speaks the statement API (sql.h): the
 * repositories that use it know nothing of the database. The path selects
 * the backend (engine_backend.h): a libpq URI (postgresql://...,
 * postgres://...) is PostgreSQL (engine_pg.c), anything else a SQLite file
 * (engine_sqlite.c).
 *
 * Connections: one writer connection, used only by the writer thread; a pool
 * of read-only connections; private read-only connections for long reads
 * (cursors). SQLite: all in WAL mode; the writer with sync_full writes
 * through the walbuf VFS (walbuf.h); opening creates the file and applies
 * the migrations (schema_sql.h), and refuses a database that must exist (or
 * whose marker says it existed) when its file is missing (dbfiles.h).
 * PostgreSQL: opening applies schema/postgresql/ (schema_pg.h), readers'
 * sessions are read-only, see engine_pg.c.
 *
 * The writer watches the storage's health (store.h, health.h): it commits
 * nothing while the storage is unhealthy, and between transactions, at most
 * once a second, runs the backend's checks (SQLite: the files and the free
 * space, and truncates the WAL once writes have stopped), and probes after
 * a failed commit.
 *
 * Writes are jobs: (fn, ctx, items). The writer drains every queued job into
 * one transaction (group commit: the jobs that queued while the previous
 * transaction was committing share the next fsync), runs fn(c, ctx) for
 * each on the writer connection, commits, then completes the jobs. A job
 * runs inside its own SAVEPOINT, rolled back when fn returns nonzero, so a
 * failing job leaves the others intact; a job flagged LP_JOB_BARE runs
 * without one (each of its writes must be a single statement, which leaves
 * nothing when it fails). When the commit fails, every job of the group gets
 * LP_ESTORAGE. fn must use only c and must not block, and must depend only
 * on the database and ctx: on PostgreSQL a group runs again whole when a
 * conflict with another writer (a deadlock, a serialization failure) rolled
 * it back at its commit or failed any of its statements, a job's or the
 * transaction cache's flush's.
 *
 * The transaction cache: one repository (label ingest) may keep rows in
 * memory for the length of a group transaction. The engine flushes it (its
 * writes join the transaction) before every commit and before any job not
 * flagged LP_JOB_BARE, and clears it after such a job and after a failed
 * transaction. Bare jobs keep it consistent themselves.
 *
 * Thread safety: every function may be called from any thread, except
 * lp_engine_close (once, when no other call is running); lp_engine_stmt only
 * on a connection the caller is running on (inside fn).
 */
#ifndef LP_ENGINE_H
#define LP_ENGINE_H

#include "sql.h"
#include "store.h"

#include <stddef.h>

typedef struct lp_engine lp_engine;

/* Work on one connection: returns LP_OK or an LP_E* code. */
typedef int (*lp_job_fn)(lp_conn *c, void *ctx);

/* The transaction cache (see above); flush and clear run on the writer
 * thread. flush returns LP_OK or an error (LP_ESTORAGE, LP_ENO_MEMORY: the
 * transaction then fails).
 * load, if set, is called once by lp_engine_open on the writer connection,
 * after the migrations and before the writer thread starts (no
 * transaction, nothing else running; whatever the storage's health); it
 * returns LP_OK or an error, which fails the open. */
typedef struct lp_txn_cache {
    int (*flush)(lp_conn *c, void *ctx);
    void (*clear)(void *ctx);
    int (*load)(lp_conn *c, void *ctx);
    /* others, if set, is called on the writer thread at the start of a
     * transaction (the write lock held, after clear) when another
     * connection has committed to the database since the writer's last
     * transaction (another server on the same file; on PostgreSQL, which
     * does not tell, at the start of every transaction); it returns LP_OK
     * or an error, which fails the transaction */
    int (*others)(lp_conn *c, void *ctx);
    void *ctx;
} lp_txn_cache;

/* Opens the database (creating and migrating as needed) and starts the
 * writer. cache may be NULL. LP_OK with *out set (lp_engine_close), or
 * LP_ESTORAGE / LP_ENO_MEMORY with a message in err. */
int lp_engine_open(const lp_store_opts *opts, const lp_txn_cache *cache, lp_engine **out, char *err,
                   size_t errlen);
/* Finishes every queued job, stops the writer, finalizes every cached
 * statement and closes all connections. Accepts NULL. */
void lp_engine_close(lp_engine *e);

#define LP_JOB_BARE 1u /* no savepoint; the transaction cache stays */

/* A write job. The caller owns it; the engine uses it from enqueueing until
 * done is called (asynchronous) or lp_engine_write returns. */
typedef struct lp_job {
    lp_job_fn fn;
    void *ctx;
    size_t items;   /* for the commit-size statistics */
    unsigned flags; /* LP_JOB_BARE or 0 */
    /* asynchronous jobs: called once, from the writer thread, after the
     * commit (rc set); the job may be freed inside */
    void (*done)(struct lp_job *j);
    /* Where the job's row locks fall in one order shared by every server
     * (label jobs: their smallest annotator id; 0: none). On a database
     * with several writers (PostgreSQL) the engine runs a group's jobs in
     * increasing lock_order, the others first in their queue order, so
     * that two servers' groups lock the same rows in the same order and
     * wait for each other rather than deadlock. */
    int64_t lock_order;
    int rc;              /* out: fn's result, LP_ESTORAGE if the commit failed,
                          * LP_ESTORAGE_UNHEALTHY if it was refused */
    struct lp_job *next; /* the engine's */
} lp_job;

/* Runs fn(c, ctx) as a job and returns its rc once the transaction holding
 * it has committed (or failed). LP_EUNAVAILABLE when closing. */
int lp_engine_write(lp_engine *e, lp_job_fn fn, void *ctx, size_t items, unsigned flags);
/* As lp_engine_write, for a job with a lock_order (lp_job). */
int lp_engine_write_ordered(lp_engine *e, lp_job_fn fn, void *ctx, size_t items, unsigned flags,
                            int64_t lock_order);
/* Enqueues j (fn, ctx, items, flags and done set) and returns at once: LP_OK,
 * or an error and done is never called. */
int lp_engine_write_async(lp_engine *e, lp_job *j);

/* Runs fn(c, ctx) on a pooled read-only connection; returns fn's code.
 * Keep it short: the pool is shared with request handlers. */
int lp_engine_read(lp_engine *e, lp_job_fn fn, void *ctx);
/* As lp_engine_read, with every read of fn in one transaction (one
 * snapshot of the database). */
int lp_engine_read_snapshot(lp_engine *e, lp_job_fn fn, void *ctx);

/* A new read-only connection of its own (for long reads); close it with
 * lp_conn_close. LP_ESTORAGE on failure (logged). */
int lp_engine_reader_open(lp_engine *e, lp_conn **out);
/* The database file at path opened read-only, outside any engine (a tool
 * checking a file), or the PostgreSQL database of a URI (read through
 * lp_conn_begin_read, which is read-only there); close it with
 * lp_conn_close. LP_OK, or LP_ESTORAGE
 * with a message in err. */
int lp_engine_file_open(const char *path, lp_conn **out, char *err, size_t errlen);

/* The statement for sql on c (the writer's or a pooled connection the
 * caller is running on), prepared on first use and kept until close, reset
 * and unbound. sql must have static storage: its address is the key. NULL
 * on failure (logged). */
lp_stmt *lp_engine_stmt(lp_engine *e, lp_conn *c, const char *sql);

/* A new copy (free()) of text column col of the current row, by its length
 * ("" for NULL); NULL only when out of memory. */
char *lp_engine_column_dup(lp_stmt *st, int col);

/* Runs st, an INSERT ... RETURNING id (both backends; the portable form of
 * a last insert id), and resets it. LP_SQL_DONE with *id the new row's id,
 * or 0 when the statement inserted nothing (ON CONFLICT DO NOTHING);
 * otherwise the failed step's result (*id 0). */
int lp_engine_step_id(lp_stmt *st, int64_t *id);

/* Logs what failed with c's message; returns LP_ESTORAGE. */
int lp_engine_fail(lp_conn *c, const char *what);

/* The file of the training lock beside the database (coord.h); NULL on
 * PostgreSQL. */
const char *lp_engine_train_lock_path(lp_engine *e);

/* The SQL dialect of the engine's database. */
lp_sql_dialect lp_engine_dialect(lp_engine *e);

/* A session of its own (engine_backend.h, session_open): a read-write
 * connection outside the writer and the pool, for what lives in a session
 * (coord.c on PostgreSQL: the training lock, LISTEN). Close it with
 * lp_conn_close. LP_OK, LP_ESTORAGE (logged), or LP_EINVALID_ARGUMENT when
 * the backend has none (SQLite). */
int lp_engine_session_open(lp_engine *e, lp_conn **out);
/* Waits on session c (from lp_engine_session_open) until a notification
 * arrives, wake_fd is readable or timeout_ms passed; on_notify(channel,
 * ctx) is called for each notification. LP_OK, or LP_ESTORAGE when the
 * session is lost (close it and open another). */
int lp_engine_session_wait(lp_engine *e, lp_conn *c, int wake_fd, int timeout_ms,
                           void (*on_notify)(const char *channel, void *ctx), void *ctx);

/* Writer statistics since open. */
void lp_engine_stats(lp_engine *e, lp_store_writer_stats *out);

/* The storage's health as the writer last saw it (store.h). */
void lp_engine_health(lp_engine *e, lp_store_health *out);

#endif
