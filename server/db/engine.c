/*
 * engine.c — connections, migrations, the read pool, the writer thread with
 * group commit, and the statement cache. See internal/engine.h.
 *
 * Invariants: only the writer thread touches e->wdb (and its statements)
 * after open; a job is owned by whoever enqueued it and the writer never
 * touches a job after completing it; every write happens inside the
 * writer's transaction; no transaction commits while the storage is
 * unhealthy or its files are no longer linked (store.h).
 */
#include "engine.h"

#include "clock.h"
#include "dbfiles.h"
#include "error.h"
#include "health.h"
#include "log.h"
#include "schema_sql.h"
#include "sql_sqlite.h"
#include "walbuf.h"

#include <pthread.h>
#include <sodium.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* ------------------------------------------------------------------ */
/* statement cache: one per connection, keyed by the SQL text's address */

#define SC_SLOTS 128u /* power of two; more than the statements of all repositories */

struct stmt_cache {
    const char *key[SC_SLOTS];
    lp_stmt *st[SC_SLOTS];
};

static uint32_t sc_hash(const char *sql)
{
    uint64_t h = (uint64_t)(uintptr_t)sql * 0x9E3779B97F4A7C15ull;
    return (uint32_t)(h >> 40) & (SC_SLOTS - 1);
}

static lp_stmt *sc_get(struct stmt_cache *c, lp_conn *conn, const char *sql)
{
    uint32_t h = sc_hash(sql);
    for (uint32_t probe = 0; probe < SC_SLOTS; probe++, h = (h + 1) & (SC_SLOTS - 1)) {
        if (c->key[h] == sql) {
            lp_stmt *st = c->st[h];
            lp_stmt_reset(st);
            lp_stmt_clear_bindings(st);
            return st;
        }
        if (c->key[h] == NULL) {
            if ((c->st[h] = lp_sqlite_prepare_persistent(conn, sql)) == NULL) {
                lp_log(LP_LOG_ERROR, "storage_error", LP_LOG_STR("what", "prepare"),
                       LP_LOG_STR("message", lp_conn_errmsg(conn)), LP_LOG_STR("sql", sql));
                return NULL;
            }
            c->key[h] = sql;
            return c->st[h];
        }
    }
    lp_log(LP_LOG_ERROR, "storage_error", LP_LOG_STR("what", "statement cache full"),
           LP_LOG_STR("sql", sql));
    return NULL;
}

static void sc_clear(struct stmt_cache *c)
{
    for (uint32_t i = 0; i < SC_SLOTS; i++) {
        lp_stmt_finalize(c->st[i]);
        c->st[i] = NULL;
        c->key[i] = NULL;
    }
}

/* ------------------------------------------------------------------ */
/* types                                                               */

#define COMPLETED_MAX 16 /* completions logged per transaction; more are rare */

struct rconn {
    lp_conn *conn;
    struct stmt_cache cache;
    struct rconn *next_free;
};

struct lp_engine {
    lp_conn *wconn;           /* the writer's connection */
    sqlite3 *wdb;             /* its handle */
    struct stmt_cache wcache; /* writer thread only */
    lp_txn_cache txn;         /* all NULL when none */
    pthread_t writer;
    int writer_started;
    pthread_mutex_t qlock;
    pthread_cond_t qcond;
    lp_job *qhead, *qtail;
    int stopping;

    struct rconn *rconns;
    int n_rconns;
    struct rconn *rfree;
    pthread_mutex_t rlock;
    pthread_cond_t rcond;

    pthread_mutex_t stats_lock;
    lp_store_writer_stats wstats;
    char path[4096];

    lp_dbfiles files;
    lp_health health;
    /* the writer's upkeep (writer thread only; monotonic ns) */
    int64_t next_upkeep_ns, last_commit_ns;
    int wal_dirty;      /* commits since the WAL was last truncated */
    char probe_sql[64]; /* a write that changes nothing (see probe) */

    /* campaigns the current transaction completed (writer thread only),
     * logged once it commits */
    struct completed {
        int64_t campaign, tasks, labels;
        char name[LP_CAMPAIGN_NAME_MAX + 1];
    } completed[COMPLETED_MAX];
    int n_completed;
};

/* ------------------------------------------------------------------ */
/* connections and migrations                                          */

static int exec_sql(sqlite3 *db, const char *sql, char *err, size_t errlen)
{
    char *e = NULL;
    if (sqlite3_exec(db, sql, NULL, NULL, &e) != SQLITE_OK) {
        if (err)
            snprintf(err, errlen, "%s", e ? e : sqlite3_errmsg(db));
        sqlite3_free(e);
        return LP_ESTORAGE;
    }
    return LP_OK;
}

int lp_engine_fail(lp_conn *c, const char *what)
{
    lp_log(LP_LOG_ERROR, "storage_error", LP_LOG_STR("what", what),
           LP_LOG_STR("message", lp_conn_errmsg(c)),
           LP_LOG_INT("code", sqlite3_extended_errcode(lp_sqlite_db(c))));
    return LP_ESTORAGE;
}

#define BUSY_TIMEOUT_MS 10000

/* Opens the file at path with flags and vfs (NULL: the default) as a
 * connection of the statement API. */
static int open_file(const char *path, int flags, const char *vfs, lp_conn **out, char *err,
                     size_t errlen)
{
    sqlite3 *db = NULL;
    *out = NULL;
    if (sqlite3_open_v2(path, &db, flags, vfs) != SQLITE_OK ||
        (*out = lp_sqlite_conn(db)) == NULL) {
        snprintf(err, errlen, "cannot open %s: %s", path,
                 db && sqlite3_errcode(db) != SQLITE_OK ? sqlite3_errmsg(db) : "out of memory");
        sqlite3_close(db);
        return LP_ESTORAGE;
    }
    return LP_OK;
}

/* Opens a connection with the shared pragmas. *out is set even on failure
 * (close it). The writer with sync_full uses the walbuf VFS (walbuf.h: one
 * write per commit to the WAL; it needs synchronous=FULL and one writer). */
static int open_conn(const char *path, int sync_full, int readonly, lp_conn **out, char *err,
                     size_t errlen)
{
    int flags = SQLITE_OPEN_READWRITE | SQLITE_OPEN_NOMUTEX | (readonly ? 0 : SQLITE_OPEN_CREATE);
    const char *vfs = !readonly && sync_full ? lp_walbuf_vfs() : NULL;
    if (open_file(path, flags, vfs, out, err, errlen) != LP_OK)
        return LP_ESTORAGE;
    sqlite3 *db = lp_sqlite_db(*out);
    sqlite3_busy_timeout(db, BUSY_TIMEOUT_MS);
    char sql[256];
    snprintf(sql, sizeof sql,
             "PRAGMA journal_mode=WAL; PRAGMA synchronous=%s; PRAGMA foreign_keys=ON; %s",
             sync_full ? "FULL" : "NORMAL", readonly ? "PRAGMA query_only=1;" : "");
    return exec_sql(db, sql, err, errlen);
}

int lp_engine_file_open(const char *path, lp_conn **out, char *err, size_t errlen)
{
    if (open_file(path, SQLITE_OPEN_READONLY, NULL, out, err, errlen) != LP_OK)
        return LP_ESTORAGE;
    sqlite3_busy_timeout(lp_sqlite_db(*out), 5000);
    return LP_OK;
}

/* The writer connection only. A bigger page cache keeps the indexes that
 * every label touches (labels, assignments, annotators) in memory across
 * transactions. Under load, checkpoints run in the writer at commit, every
 * 1000 WAL pages (4 MiB), and journal_size_limit truncates the WAL file
 * back to that size when it restarts; once writes stop the writer folds the
 * whole WAL in and truncates it to nothing (upkeep). Durability is
 * unchanged: the WAL is synced at every commit. */
#define WRITER_PRAGMAS                                                                             \
    "PRAGMA cache_size=-65536; PRAGMA wal_autocheckpoint=1000; "                                   \
    "PRAGMA journal_size_limit=4194304;"

static int migrate(sqlite3 *db, char *err, size_t errlen)
{
    sqlite3_stmt *st = NULL;
    int version = -1;
    if (sqlite3_prepare_v2(db, "PRAGMA user_version", -1, &st, NULL) == SQLITE_OK &&
        sqlite3_step(st) == SQLITE_ROW)
        version = sqlite3_column_int(st, 0);
    sqlite3_finalize(st);
    if (version < 0) {
        snprintf(err, errlen, "cannot read user_version: %s", sqlite3_errmsg(db));
        return LP_ESTORAGE;
    }
    if (version > LP_MIGRATION_COUNT) {
        snprintf(err, errlen, "database schema version %d is newer than this server (%d)", version,
                 LP_MIGRATION_COUNT);
        return LP_ESTORAGE;
    }
    for (int v = version; v < LP_MIGRATION_COUNT; v++) {
        char sql[64];
        snprintf(sql, sizeof sql, "PRAGMA user_version = %d", v + 1);
        if (exec_sql(db, "BEGIN IMMEDIATE", err, errlen) != LP_OK)
            return LP_ESTORAGE;
        if (exec_sql(db, LP_MIGRATIONS[v], err, errlen) != LP_OK ||
            exec_sql(db, sql, err, errlen) != LP_OK ||
            exec_sql(db, "COMMIT", err, errlen) != LP_OK) {
            exec_sql(db, "ROLLBACK", NULL, 0);
            return LP_ESTORAGE;
        }
    }
    return LP_OK;
}

/*
 * Campaign completion: a campaign is complete when every task has its
 * labels (campaign_fill.tasks_complete reaches tasks, schema/004). A TEMP
 * trigger, on the writer connection only (nothing in the schema), calls
 * back when the count crosses over; the engine logs the event after the
 * transaction commits. It costs a comparison per label.
 */
static const char COMPLETION_TRIGGER[] =
    "CREATE TEMP TRIGGER lp_campaign_completed AFTER UPDATE OF tasks_complete "
    "ON main.campaign_fill WHEN NEW.tasks > 0 AND NEW.tasks_complete >= NEW.tasks "
    "AND OLD.tasks_complete < NEW.tasks BEGIN "
    "SELECT lp_campaign_completed(NEW.campaign, "
    "(SELECT name FROM main.campaigns WHERE id = NEW.campaign), NEW.tasks, NEW.labels); END;";

static void campaign_completed_fn(sqlite3_context *ctx, int argc, sqlite3_value **argv)
{
    lp_engine *e = sqlite3_user_data(ctx);
    if (argc != 4 || e->n_completed >= COMPLETED_MAX)
        return;
    struct completed *c = &e->completed[e->n_completed++];
    const unsigned char *name = sqlite3_value_text(argv[1]);
    c->campaign = sqlite3_value_int64(argv[0]);
    snprintf(c->name, sizeof c->name, "%s", name ? (const char *)name : "");
    c->tasks = sqlite3_value_int64(argv[2]);
    c->labels = sqlite3_value_int64(argv[3]);
}

static int completion_watch(lp_engine *e, char *err, size_t errlen)
{
    if (sqlite3_create_function_v2(e->wdb, "lp_campaign_completed", 4,
                                   SQLITE_UTF8 | SQLITE_DIRECTONLY, e, campaign_completed_fn, NULL,
                                   NULL, NULL) != SQLITE_OK) {
        snprintf(err, errlen, "cannot register a function: %s", sqlite3_errmsg(e->wdb));
        return LP_ESTORAGE;
    }
    return exec_sql(e->wdb, COMPLETION_TRIGGER, err, errlen);
}

/* After a commit (ok) the completions are logged; otherwise forgotten. */
static void completions_flush(lp_engine *e, int ok)
{
    for (int k = 0; ok && k < e->n_completed; k++) {
        const struct completed *c = &e->completed[k];
        lp_log(LP_LOG_INFO, "campaign_complete", LP_LOG_STR("campaign", c->name),
               LP_LOG_INT("campaign_id", c->campaign), LP_LOG_INT("tasks", c->tasks),
               LP_LOG_INT("labels", c->labels));
    }
    e->n_completed = 0;
}

char *lp_engine_column_dup(lp_stmt *st, int col)
{
    const char *t = lp_stmt_column_text(st, col);
    size_t n = (size_t)lp_stmt_column_bytes(st, col);
    char *out = malloc(n + 1);
    if (out != NULL) {
        if (n)
            memcpy(out, t, n);
        out[n] = '\0';
    }
    return out;
}

lp_stmt *lp_engine_stmt(lp_engine *e, lp_conn *c, const char *sql)
{
    if (c == e->wconn)
        return sc_get(&e->wcache, c, sql);
    for (int i = 0; i < e->n_rconns; i++)
        if (e->rconns[i].conn == c)
            return sc_get(&e->rconns[i].cache, c, sql);
    lp_log(LP_LOG_ERROR, "storage_error",
           LP_LOG_STR("what", "statement for a connection the engine does not own"),
           LP_LOG_STR("sql", sql));
    return NULL;
}

/* ------------------------------------------------------------------ */
/* read pool                                                           */

int lp_engine_read(lp_engine *e, lp_job_fn fn, void *ctx)
{
    pthread_mutex_lock(&e->rlock);
    while (e->rfree == NULL)
        pthread_cond_wait(&e->rcond, &e->rlock);
    struct rconn *c = e->rfree;
    e->rfree = c->next_free;
    pthread_mutex_unlock(&e->rlock);

    int rc = fn(c->conn, ctx);

    pthread_mutex_lock(&e->rlock);
    c->next_free = e->rfree;
    e->rfree = c;
    pthread_cond_signal(&e->rcond);
    pthread_mutex_unlock(&e->rlock);
    return rc;
}

struct snapshot {
    lp_job_fn fn;
    void *ctx;
};

static int snapshot_fn(lp_conn *c, void *ctx)
{
    struct snapshot *s = ctx;
    if (lp_conn_begin_read(c) != LP_SQL_DONE)
        return lp_engine_fail(c, "read snapshot");
    int rc = s->fn(c, s->ctx);
    lp_conn_end_read(c);
    return rc;
}

int lp_engine_read_snapshot(lp_engine *e, lp_job_fn fn, void *ctx)
{
    struct snapshot s = {fn, ctx};
    return lp_engine_read(e, snapshot_fn, &s);
}

int lp_engine_reader_open(lp_engine *e, lp_conn **out)
{
    char err[256];
    *out = NULL;
    if (open_conn(e->path, 0, 1, out, err, sizeof err) != LP_OK) {
        lp_log(LP_LOG_ERROR, "storage_error", LP_LOG_STR("what", "reader open"),
               LP_LOG_STR("message", err));
        lp_conn_close(*out);
        *out = NULL;
        return LP_ESTORAGE;
    }
    return LP_OK;
}

/* ------------------------------------------------------------------ */
/* the writer                                                          */

static const char SQL_BEGIN[] = "BEGIN IMMEDIATE", SQL_COMMIT[] = "COMMIT",
                  SQL_ROLLBACK[] = "ROLLBACK", SQL_SP[] = "SAVEPOINT job",
                  SQL_SP_RELEASE[] = "RELEASE job", SQL_SP_ROLLBACK[] = "ROLLBACK TO job";

static int w_exec(lp_engine *e, const char *sql)
{
    lp_stmt *st = sc_get(&e->wcache, e->wconn, sql);
    if (st == NULL)
        return LP_ESTORAGE;
    int rc = lp_stmt_step(st);
    lp_stmt_reset(st);
    if (rc != LP_SQL_DONE && rc != LP_SQL_ROW)
        return lp_engine_fail(e->wconn, sql);
    return LP_OK;
}

static int txn_flush(lp_engine *e)
{
    return e->txn.flush ? e->txn.flush(e->wconn, e->txn.ctx) : LP_OK;
}

static void txn_clear(lp_engine *e)
{
    if (e->txn.clear)
        e->txn.clear(e->txn.ctx);
}

/* Runs one job inside the open transaction; sets j->rc. Returns LP_ESTORAGE
 * when the transaction is lost (nothing of the group may be reported as
 * stored). */
static int run_job(lp_engine *e, lp_job *j)
{
    if (j->flags & LP_JOB_BARE) {
        j->rc = j->fn(e->wconn, j->ctx);
    } else {
        /* the cached rows may be changed by the job: write them back now
         * (outside the job's savepoint) and re-read them afterwards */
        if (txn_flush(e) != LP_OK)
            return LP_ESTORAGE;
        txn_clear(e);
        if (w_exec(e, SQL_SP) != LP_OK) {
            j->rc = LP_ESTORAGE;
        } else {
            j->rc = j->fn(e->wconn, j->ctx);
            if (j->rc != LP_OK)
                w_exec(e, SQL_SP_ROLLBACK);
            if (w_exec(e, SQL_SP_RELEASE) != LP_OK && j->rc == LP_OK)
                j->rc = LP_ESTORAGE;
        }
        txn_clear(e);
    }
    /* SQLite rolls a transaction back by itself on some errors (disk full,
     * I/O) */
    return sqlite3_get_autocommit(e->wdb) ? LP_ESTORAGE : LP_OK;
}

static void count_commit(lp_engine *e, size_t items)
{
    pthread_mutex_lock(&e->stats_lock);
    e->wstats.commits++;
    e->wstats.items += items;
    int b = 0;
    while (b < LP_STORE_HIST - 1 && ((size_t)1 << b) < items)
        b++;
    e->wstats.hist[b]++;
    pthread_mutex_unlock(&e->stats_lock);
}

/* ---- upkeep: health checks, the idle checkpoint, the probe ---- */

#define UPKEEP_INTERVAL_NS (1000 * (int64_t)1000000) /* checks at most once a second */
#define CHECKPOINT_IDLE_NS (1000 * (int64_t)1000000) /* writes stopped this long: truncate */

/* Folds the whole WAL into the database and truncates it to nothing. It
 * never waits for readers (busy timeout 0): frames a long read still needs
 * stay, and the next upkeep tries again. */
static void checkpoint_truncate(lp_engine *e)
{
    sqlite3_busy_timeout(e->wdb, 0);
    int rc = sqlite3_wal_checkpoint_v2(e->wdb, NULL, SQLITE_CHECKPOINT_TRUNCATE, NULL, NULL);
    sqlite3_busy_timeout(e->wdb, BUSY_TIMEOUT_MS);
    if (rc == SQLITE_OK) {
        e->wal_dirty = 0;
        lp_health_truncated(&e->health);
    } else if (rc != SQLITE_BUSY) {
        lp_log(LP_LOG_DEBUG, "storage_error", LP_LOG_STR("what", "checkpoint"),
               LP_LOG_STR("message", sqlite3_errmsg(e->wdb)));
    }
}

/* After a failed commit: one small transaction that rewrites the schema's
 * user_version with its own value, so writes resume only once a commit
 * works again. */
static void probe(lp_engine *e)
{
    int ok = sqlite3_exec(e->wdb, "BEGIN IMMEDIATE", NULL, NULL, NULL) == SQLITE_OK &&
             sqlite3_exec(e->wdb, e->probe_sql, NULL, NULL, NULL) == SQLITE_OK &&
             sqlite3_exec(e->wdb, "COMMIT", NULL, NULL, NULL) == SQLITE_OK;
    char why[128];
    snprintf(why, sizeof why, "%s", sqlite3_errmsg(e->wdb));
    if (!sqlite3_get_autocommit(e->wdb))
        sqlite3_exec(e->wdb, "ROLLBACK", NULL, NULL, NULL);
    if (ok)
        e->wal_dirty = 1;
    lp_health_committed(&e->health, ok, why);
}

/* Once per UPKEEP_INTERVAL_NS, between transactions: checks the files and
 * the free space; when idle (no jobs waiting), truncates the WAL once
 * writes have stopped for CHECKPOINT_IDLE_NS, and probes after a failed
 * commit. */
static void upkeep(lp_engine *e, int idle)
{
    int64_t now = lp_mono_ns();
    if (now < e->next_upkeep_ns)
        return;
    e->next_upkeep_ns = now + UPKEEP_INTERVAL_NS;
    if (idle && e->wal_dirty && now - e->last_commit_ns >= CHECKPOINT_IDLE_NS)
        checkpoint_truncate(e);
    lp_health_checked(&e->health, lp_dbfiles_linked(&e->files, 1), lp_dbfiles_free_bytes(&e->files),
                      lp_dbfiles_wal_bytes(&e->files));
    if (idle && lp_health_wants_probe(&e->health))
        probe(e);
}

/* Waits for jobs (qlock held) until the next upkeep is due. */
static void wait_for_jobs(lp_engine *e)
{
    while (e->qhead == NULL && !e->stopping) {
        int64_t due = e->next_upkeep_ns;
        if (lp_mono_ns() >= due)
            return;
        struct timespec ts = {.tv_sec = (time_t)(due / 1000000000), .tv_nsec = due % 1000000000};
        pthread_cond_timedwait(&e->qcond, &e->qlock, &ts);
    }
}

/* Runs a group of jobs in one transaction and completes them. Nothing is
 * committed while the storage is unhealthy, nor once the database's files
 * are no longer linked (checked right before the commit): the jobs then
 * get LP_ESTORAGE_UNHEALTHY; a failed transaction gives LP_ESTORAGE. */
static void run_group(lp_engine *e, lp_job *batch)
{
    size_t items = 0;
    int refusal = lp_health_refusal(&e->health);
    int ok = refusal == LP_OK && w_exec(e, SQL_BEGIN) == LP_OK;
    for (lp_job *j = batch; j != NULL; j = j->next) {
        items += j->items;
        if (ok && run_job(e, j) != LP_OK)
            ok = 0;
    }
    if (ok && txn_flush(e) != LP_OK)
        ok = 0;
    if (ok && !lp_dbfiles_linked(&e->files, 0)) {
        lp_health_checked(&e->health, 0, lp_dbfiles_free_bytes(&e->files),
                          lp_dbfiles_wal_bytes(&e->files));
        refusal = LP_ESTORAGE_UNHEALTHY;
        ok = 0;
    }
    if (ok && w_exec(e, SQL_COMMIT) != LP_OK)
        ok = 0;
    if (refusal == LP_OK) {
        lp_health_committed(&e->health, ok, ok ? NULL : sqlite3_errmsg(e->wdb));
        count_commit(e, items);
    }
    if (!ok) {
        if (!sqlite3_get_autocommit(e->wdb))
            w_exec(e, SQL_ROLLBACK);
        txn_clear(e); /* it held uncommitted rows */
    } else {
        e->wal_dirty = 1;
        e->last_commit_ns = lp_mono_ns();
    }
    completions_flush(e, ok);
    for (lp_job *j = batch, *next; j != NULL; j = next) {
        next = j->next; /* j may be gone once done */
        if (!ok)
            j->rc = refusal != LP_OK ? refusal : LP_ESTORAGE;
        j->done(j);
    }
}

/* Group commit: while one transaction commits (its fsync takes 1.5-5 ms on
 * the benchmark VM), new jobs queue; the next transaction takes all of them.
 * There is no timed wait for more: measured with a thread per connection, a
 * wait of up to 1 ms per cycle only lengthened every request (single-label
 * ingest 9.8-10.3K labels/s with it, 11.4-14.4K without) and saved no CPU.
 * The writer wakes once a second without jobs for its upkeep. */
static void *writer_main(void *arg)
{
    lp_engine *e = arg;
    for (;;) {
        pthread_mutex_lock(&e->qlock);
        wait_for_jobs(e);
        lp_job *batch = e->qhead;
        int stopping = e->stopping;
        e->qhead = e->qtail = NULL;
        pthread_mutex_unlock(&e->qlock);
        if (batch == NULL && stopping)
            break; /* nothing left */
        upkeep(e, batch == NULL);
        if (batch != NULL)
            run_group(e, batch);
    }
    return NULL;
}

int lp_engine_write_async(lp_engine *e, lp_job *j)
{
    j->next = NULL;
    j->rc = LP_OK;
    pthread_mutex_lock(&e->qlock);
    if (e->stopping) {
        pthread_mutex_unlock(&e->qlock);
        return LP_EUNAVAILABLE;
    }
    if (e->qtail)
        e->qtail->next = j;
    else
        e->qhead = j;
    e->qtail = j;
    pthread_cond_signal(&e->qcond);
    pthread_mutex_unlock(&e->qlock);
    return LP_OK;
}

struct waiter {
    lp_job job; /* first: done gets &job */
    pthread_mutex_t m;
    pthread_cond_t c;
    int done;
};

static void waiter_done(lp_job *j)
{
    struct waiter *w = (struct waiter *)j;
    pthread_mutex_lock(&w->m);
    w->done = 1;
    pthread_cond_signal(&w->c);
    pthread_mutex_unlock(&w->m);
}

int lp_engine_write(lp_engine *e, lp_job_fn fn, void *ctx, size_t items, unsigned flags)
{
    struct waiter w = {
        .job = {.fn = fn, .ctx = ctx, .items = items, .flags = flags, .done = waiter_done}};
    pthread_mutex_init(&w.m, NULL);
    pthread_cond_init(&w.c, NULL);
    int rc = lp_engine_write_async(e, &w.job);
    if (rc == LP_OK) {
        pthread_mutex_lock(&w.m);
        while (!w.done)
            pthread_cond_wait(&w.c, &w.m);
        pthread_mutex_unlock(&w.m);
        rc = w.job.rc;
    }
    pthread_cond_destroy(&w.c);
    pthread_mutex_destroy(&w.m);
    return rc;
}

/* ------------------------------------------------------------------ */
/* open / close                                                        */

int lp_engine_open(const lp_store_opts *opts, const lp_txn_cache *cache, lp_engine **out, char *err,
                   size_t errlen)
{
    *out = NULL;
    lp_engine *e = calloc(1, sizeof *e);
    if (e == NULL) {
        snprintf(err, errlen, "out of memory");
        return LP_ENO_MEMORY;
    }
    snprintf(e->path, sizeof e->path, "%s", opts->path);
    snprintf(e->probe_sql, sizeof e->probe_sql, "PRAGMA user_version = %d", LP_MIGRATION_COUNT);
    e->files.db_fd = e->files.wal_fd = -1;
    lp_health_init(&e->health, opts->disk_free_min);
    if (cache != NULL)
        e->txn = *cache;
    pthread_mutex_init(&e->qlock, NULL);
    pthread_condattr_t ca; /* the writer's timed waits use the monotonic clock */
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    pthread_cond_init(&e->qcond, &ca);
    pthread_condattr_destroy(&ca);
    pthread_mutex_init(&e->rlock, NULL);
    pthread_cond_init(&e->rcond, NULL);
    pthread_mutex_init(&e->stats_lock, NULL);
    int n_read = opts->read_conns < 1 ? 1 : opts->read_conns;
    e->rconns = calloc((size_t)n_read, sizeof *e->rconns);
    if (e->rconns == NULL) {
        snprintf(err, errlen, "out of memory");
        goto fail;
    }
    if (lp_dbfiles_open(&e->files, opts->path, opts->must_exist, opts->marker, err, errlen) !=
            LP_OK ||
        open_conn(opts->path, opts->sync_full, 0, &e->wconn, err, errlen) != LP_OK)
        goto fail;
    e->wdb = lp_sqlite_db(e->wconn);
    if (migrate(e->wdb, err, errlen) != LP_OK ||
        exec_sql(e->wdb, WRITER_PRAGMAS, err, errlen) != LP_OK ||
        completion_watch(e, err, errlen) != LP_OK)
        goto fail;
    int load_rc = e->txn.load != NULL ? e->txn.load(e->wconn, e->txn.ctx) : LP_OK;
    if (load_rc != LP_OK) {
        snprintf(err, errlen, "cannot build the writer's in-memory state: %s",
                 load_rc == LP_ENO_MEMORY ? "out of memory" : sqlite3_errmsg(e->wdb));
        goto fail;
    }
    lp_dbfiles_opened(&e->files, opts->marker);
    e->wal_dirty = 1; /* what an earlier run left in the WAL goes at the first idle upkeep */
    for (int i = 0; i < n_read; i++) {
        e->n_rconns++;
        if (open_conn(opts->path, opts->sync_full, 1, &e->rconns[i].conn, err, errlen) != LP_OK)
            goto fail;
        e->rconns[i].next_free = e->rfree;
        e->rfree = &e->rconns[i];
    }
    if (pthread_create(&e->writer, NULL, writer_main, e) != 0) {
        snprintf(err, errlen, "cannot start the writer thread");
        goto fail;
    }
    e->writer_started = 1;
    *out = e;
    return LP_OK;
fail:
    lp_engine_close(e);
    return LP_ESTORAGE;
}

void lp_engine_close(lp_engine *e)
{
    if (e == NULL)
        return;
    if (e->writer_started) {
        pthread_mutex_lock(&e->qlock);
        e->stopping = 1;
        pthread_cond_broadcast(&e->qcond);
        pthread_mutex_unlock(&e->qlock);
        pthread_join(e->writer, NULL);
    }
    for (int i = 0; i < e->n_rconns; i++) {
        sc_clear(&e->rconns[i].cache);
        lp_conn_close(e->rconns[i].conn);
    }
    sc_clear(&e->wcache);
    if (e->wconn) {
        e->wdb = lp_sqlite_db(e->wconn);
        lp_store_health h;
        lp_health_get(&e->health, &h);
        if (h.unlinked || !lp_dbfiles_linked(&e->files, 0)) {
            /* the files now at the paths are not this database's: SQLite
             * must not delete a WAL or shm file by name on close */
            int persist = 1;
            sqlite3_file_control(e->wdb, "main", SQLITE_FCNTL_PERSIST_WAL, &persist);
        } else {
            /* fold the WAL back into the database on a clean shutdown */
            sqlite3_exec(e->wdb, "PRAGMA wal_checkpoint(TRUNCATE)", NULL, NULL, NULL);
        }
    }
    lp_conn_close(e->wconn);
    lp_dbfiles_close(&e->files); /* after SQLite closed: see dbfiles.h */
    lp_health_destroy(&e->health);
    free(e->rconns);
    pthread_mutex_destroy(&e->qlock);
    pthread_cond_destroy(&e->qcond);
    pthread_mutex_destroy(&e->rlock);
    pthread_cond_destroy(&e->rcond);
    pthread_mutex_destroy(&e->stats_lock);
    free(e);
}

const char *lp_engine_train_lock_path(lp_engine *e)
{
    return e->files.train_lock;
}

void lp_engine_health(lp_engine *e, lp_store_health *out)
{
    lp_health_get(&e->health, out);
}

void lp_engine_stats(lp_engine *e, lp_store_writer_stats *out)
{
    pthread_mutex_lock(&e->stats_lock);
    *out = e->wstats;
    pthread_mutex_unlock(&e->stats_lock);
}
