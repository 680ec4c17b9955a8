/*
 * engine_sqlite.c — the storage engine's SQLite backend (engine_backend.h):
 * a database file in WAL mode, its migrations (PRAGMA user_version), the
 * walbuf VFS for the writer, the files' health, the idle checkpoint, and
 * the campaign-completed event. Also lp_sqlite_file_open (lp_engine_file_open's on SQLite).
 */
#include "engine.h"
#include "engine_backend.h"

#include "clock.h"
#include "dbfiles.h"
#include "error.h"
#include "log.h"
#include "schema_sql.h"
#include "sql_sqlite.h"
#include "walbuf.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define COMPLETED_MAX 16 /* completions logged per transaction; more are rare */
#define BUSY_TIMEOUT_MS 10000

struct lp_backend {
    lp_conn *wconn;
    sqlite3 *wdb; /* its handle */
    lp_health *health;
    lp_dbfiles files;
    int sync_full, marker;
    int wal_dirty;      /* commits since the WAL was last truncated */
    char probe_sql[64]; /* a write that changes nothing (see sq_probe) */
    char path[4096];

    /* campaigns the current transaction completed (writer thread only),
     * logged once it commits */
    struct completed {
        int64_t campaign, tasks, labels;
        char name[LP_CAMPAIGN_NAME_MAX + 1];
    } completed[COMPLETED_MAX];
    int n_completed;
};

/* ---- connections and migrations ---- */

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

int lp_sqlite_file_open(const char *path, lp_conn **out, char *err, size_t errlen)
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
    lp_backend *b = sqlite3_user_data(ctx);
    if (argc != 4 || b->n_completed >= COMPLETED_MAX)
        return;
    struct completed *c = &b->completed[b->n_completed++];
    const unsigned char *name = sqlite3_value_text(argv[1]);
    c->campaign = sqlite3_value_int64(argv[0]);
    snprintf(c->name, sizeof c->name, "%s", name ? (const char *)name : "");
    c->tasks = sqlite3_value_int64(argv[2]);
    c->labels = sqlite3_value_int64(argv[3]);
}

static int completion_watch(lp_backend *b, char *err, size_t errlen)
{
    if (sqlite3_create_function_v2(b->wdb, "lp_campaign_completed", 4,
                                   SQLITE_UTF8 | SQLITE_DIRECTONLY, b, campaign_completed_fn, NULL,
                                   NULL, NULL) != SQLITE_OK) {
        snprintf(err, errlen, "cannot register a function: %s", sqlite3_errmsg(b->wdb));
        return LP_ESTORAGE;
    }
    return exec_sql(b->wdb, COMPLETION_TRIGGER, err, errlen);
}

/* ---- the backend ---- */

static void sq_close(lp_backend *b);

static int sq_open(const lp_store_opts *opts, lp_health *health, lp_backend **out, lp_conn **writer,
                   char *err, size_t errlen)
{
    lp_backend *b = calloc(1, sizeof *b);
    *out = b;
    if (b == NULL) {
        snprintf(err, errlen, "out of memory");
        return LP_ENO_MEMORY;
    }
    snprintf(b->path, sizeof b->path, "%s", opts->path);
    snprintf(b->probe_sql, sizeof b->probe_sql, "PRAGMA user_version = %d", LP_MIGRATION_COUNT);
    b->health = health;
    b->sync_full = opts->sync_full;
    b->marker = opts->marker;
    b->files.db_fd = b->files.wal_fd = -1;
    if (lp_dbfiles_open(&b->files, opts->path, opts->must_exist, opts->marker, err, errlen) !=
            LP_OK ||
        open_conn(opts->path, opts->sync_full, 0, &b->wconn, err, errlen) != LP_OK)
        return LP_ESTORAGE;
    b->wdb = lp_sqlite_db(b->wconn);
    if (migrate(b->wdb, err, errlen) != LP_OK ||
        exec_sql(b->wdb, WRITER_PRAGMAS, err, errlen) != LP_OK ||
        completion_watch(b, err, errlen) != LP_OK)
        return LP_ESTORAGE;
    *writer = b->wconn;
    return LP_OK;
}

static void sq_opened(lp_backend *b)
{
    lp_dbfiles_opened(&b->files, b->marker);
    b->wal_dirty = 1; /* what an earlier run left in the WAL goes at the first idle upkeep */
}

static int sq_reader_open(lp_backend *b, lp_conn **out, char *err, size_t errlen)
{
    if (open_conn(b->path, b->sync_full, 1, out, err, errlen) == LP_OK)
        return LP_OK;
    lp_conn_close(*out);
    *out = NULL;
    return LP_ESTORAGE;
}

static int sq_before_commit(lp_backend *b)
{
    if (lp_dbfiles_linked(&b->files, 0))
        return LP_OK;
    lp_health_checked(b->health, 0, lp_dbfiles_free_bytes(&b->files),
                      lp_dbfiles_wal_bytes(&b->files));
    return LP_ESTORAGE_UNHEALTHY;
}

/* After a commit (ok) the completions are logged; otherwise forgotten. */
static void sq_after_commit(lp_backend *b, int ok)
{
    for (int k = 0; ok && k < b->n_completed; k++) {
        const struct completed *c = &b->completed[k];
        lp_log(LP_LOG_INFO, "campaign_complete", LP_LOG_STR("campaign", c->name),
               LP_LOG_INT("campaign_id", c->campaign), LP_LOG_INT("tasks", c->tasks),
               LP_LOG_INT("labels", c->labels));
    }
    b->n_completed = 0;
    if (ok)
        b->wal_dirty = 1;
}

#define CHECKPOINT_IDLE_NS (1000 * (int64_t)1000000) /* writes stopped this long: truncate */

/* Folds the whole WAL into the database and truncates it to nothing. It
 * never waits for readers (busy timeout 0): frames a long read still needs
 * stay, and the next upkeep tries again. */
static void checkpoint_truncate(lp_backend *b)
{
    sqlite3_busy_timeout(b->wdb, 0);
    int rc = sqlite3_wal_checkpoint_v2(b->wdb, NULL, SQLITE_CHECKPOINT_TRUNCATE, NULL, NULL);
    sqlite3_busy_timeout(b->wdb, BUSY_TIMEOUT_MS);
    if (rc == SQLITE_OK) {
        b->wal_dirty = 0;
        lp_health_truncated(b->health);
    } else if (rc != SQLITE_BUSY) {
        lp_log(LP_LOG_DEBUG, "storage_error", LP_LOG_STR("what", "checkpoint"),
               LP_LOG_STR("message", sqlite3_errmsg(b->wdb)));
    }
}

/* Checks the files and the free space; when idle, truncates the WAL once
 * writes have stopped for CHECKPOINT_IDLE_NS. */
static void sq_upkeep(lp_backend *b, int idle, int64_t idle_ns)
{
    if (idle && b->wal_dirty && idle_ns >= CHECKPOINT_IDLE_NS)
        checkpoint_truncate(b);
    lp_health_checked(b->health, lp_dbfiles_linked(&b->files, 1), lp_dbfiles_free_bytes(&b->files),
                      lp_dbfiles_wal_bytes(&b->files));
}

/* One small transaction that rewrites the schema's user_version with its
 * own value. */
static int sq_probe(lp_backend *b, char *why, size_t whylen)
{
    int ok = sqlite3_exec(b->wdb, "BEGIN IMMEDIATE", NULL, NULL, NULL) == SQLITE_OK &&
             sqlite3_exec(b->wdb, b->probe_sql, NULL, NULL, NULL) == SQLITE_OK &&
             sqlite3_exec(b->wdb, "COMMIT", NULL, NULL, NULL) == SQLITE_OK;
    snprintf(why, whylen, "%s", sqlite3_errmsg(b->wdb));
    if (!sqlite3_get_autocommit(b->wdb))
        sqlite3_exec(b->wdb, "ROLLBACK", NULL, NULL, NULL);
    if (ok)
        b->wal_dirty = 1;
    return ok;
}

static const char *sq_train_lock_path(lp_backend *b)
{
    return b->files.train_lock;
}

static void sq_close(lp_backend *b)
{
    if (b == NULL)
        return;
    if (b->wconn) {
        lp_store_health h;
        lp_health_get(b->health, &h);
        if (h.unlinked || !lp_dbfiles_linked(&b->files, 0)) {
            /* the files now at the paths are not this database's: SQLite
             * must not delete a WAL or shm file by name on close */
            int persist = 1;
            sqlite3_file_control(b->wdb, "main", SQLITE_FCNTL_PERSIST_WAL, &persist);
        } else {
            /* fold the WAL back into the database on a clean shutdown */
            sqlite3_exec(b->wdb, "PRAGMA wal_checkpoint(TRUNCATE)", NULL, NULL, NULL);
        }
    }
    lp_conn_close(b->wconn);
    lp_dbfiles_close(&b->files); /* after SQLite closed: see dbfiles.h */
    free(b);
}

const lp_backend_ops lp_backend_sqlite = {
    .name = "sqlite",
    .dialect = LP_SQL_SQLITE,
    .begin_sql = "BEGIN IMMEDIATE",
    .data_version_sql = "PRAGMA data_version",
    .open = sq_open,
    .opened = sq_opened,
    .reader_open = sq_reader_open,
    .prepare_kept = lp_sqlite_prepare_persistent,
    .before_commit = sq_before_commit,
    .after_commit = sq_after_commit,
    .upkeep = sq_upkeep,
    .probe = sq_probe,
    .train_lock_path = sq_train_lock_path,
    .close = sq_close,
};
