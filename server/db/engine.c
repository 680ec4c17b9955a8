/*
 * engine.c — the storage engine's core, the same for every backend: the
 * read pool, the writer thread with group commit, the statement cache, the
 * statistics and the health state. What is the database's own (opening,
 * migrations, the commit's checks, upkeep, the probe) is the backend's
 * (engine_backend.h). See internal/engine.h.
 *
 * Invariants: only the writer thread touches e->wconn (and its statements)
 * after open; a job is owned by whoever enqueued it and the writer never
 * touches a job after completing it; every write happens inside the
 * writer's transaction; no transaction commits while the storage is
 * unhealthy or the backend refuses it (store.h).
 */
#include "engine.h"
#include "engine_backend.h"
#include "sql_pg.h"

#include "clock.h"
#include "error.h"
#include "health.h"
#include "log.h"

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

static lp_stmt *sc_get(const lp_backend_ops *ops, struct stmt_cache *c, lp_conn *conn,
                       const char *sql)
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
            if ((c->st[h] = ops->prepare_kept(conn, sql)) == NULL) {
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

struct rconn {
    lp_conn *conn;
    struct stmt_cache cache;
    struct rconn *next_free;
};

struct lp_engine {
    const lp_backend_ops *ops;
    lp_backend *be;           /* the backend's state */
    lp_conn *wconn;           /* the writer's connection (the backend's) */
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

    lp_health health;
    char commit_failure[128]; /* the backend's commit's, "" if none (writer thread) */
    /* the writer's upkeep (writer thread only; monotonic ns) */
    int64_t next_upkeep_ns, last_commit_ns;
    int64_t data_version; /* the backend's count of commits by others, at the last check */
};

/* ------------------------------------------------------------------ */
/* statements                                                          */

int lp_engine_fail(lp_conn *c, const char *what)
{
    lp_log(LP_LOG_ERROR, "storage_error", LP_LOG_STR("what", what),
           LP_LOG_STR("message", lp_conn_errmsg(c)));
    return LP_ESTORAGE;
}

int lp_engine_step_id(lp_stmt *st, int64_t *id)
{
    int step = lp_stmt_step(st);
    *id = step == LP_SQL_ROW ? lp_stmt_column_int64(st, 0) : 0;
    lp_stmt_reset(st);
    return step == LP_SQL_ROW ? LP_SQL_DONE : step;
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
        return sc_get(e->ops, &e->wcache, c, sql);
    for (int i = 0; i < e->n_rconns; i++)
        if (e->rconns[i].conn == c)
            return sc_get(e->ops, &e->rconns[i].cache, c, sql);
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
    /* a read that failed on a connection found lost runs once more on the
     * connection made again (reads change nothing) */
    if (rc == LP_ESTORAGE && e->ops->reader_check != NULL &&
        e->ops->reader_check(c->conn) == LP_BACKEND_RETRY)
        rc = fn(c->conn, ctx);

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
    if (e->ops->reader_open(e->be, out, err, sizeof err) != LP_OK) {
        lp_log(LP_LOG_ERROR, "storage_error", LP_LOG_STR("what", "reader open"),
               LP_LOG_STR("message", err));
        return LP_ESTORAGE;
    }
    return LP_OK;
}

/* ------------------------------------------------------------------ */
/* the writer                                                          */

static const char SQL_COMMIT[] = "COMMIT", SQL_ROLLBACK[] = "ROLLBACK", SQL_SP[] = "SAVEPOINT job",
                  SQL_SP_RELEASE[] = "RELEASE job", SQL_SP_ROLLBACK[] = "ROLLBACK TO job";

static int w_exec(lp_engine *e, const char *sql)
{
    lp_stmt *st = sc_get(e->ops, &e->wcache, e->wconn, sql);
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
    /* the database may have rolled the transaction back by itself (SQLite
     * on a full disk or an I/O error; PostgreSQL on a lost connection) */
    return lp_conn_in_txn(e->wconn) ? LP_OK : LP_ESTORAGE;
}

/* The backend's count of commits by other connections to the database
 * (other servers or stores on it); -1 when it has none or it cannot be
 * read (then others may have committed). */
static int64_t data_version(lp_engine *e)
{
    if (e->ops->data_version_sql == NULL)
        return -1;
    lp_stmt *st = sc_get(e->ops, &e->wcache, e->wconn, e->ops->data_version_sql);
    int64_t v = st != NULL && lp_stmt_step(st) == LP_SQL_ROW ? lp_stmt_column_int64(st, 0) : -1;
    if (st != NULL)
        lp_stmt_reset(st);
    return v;
}

/* Right after BEGIN (SQLite: the write lock held): when another
 * connection has committed since the writer's last transaction, the
 * transaction cache may hold rows it changed (an annotator's ε spent), so
 * it is dropped and read again inside this transaction, and the cache's
 * others hook catches up with the rows added. LP_OK or the hook's error. */
static int txn_check_others(lp_engine *e)
{
    int64_t v = data_version(e);
    if (v >= 0 && v == e->data_version)
        return LP_OK;
    txn_clear(e);
    int rc = e->txn.others ? e->txn.others(e->wconn, e->txn.ctx) : LP_OK;
    if (rc == LP_OK) /* else the next transaction tries again */
        e->data_version = v;
    return rc;
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

/* ---- upkeep: the backend's checks, the probe ---- */

#define UPKEEP_INTERVAL_NS (1000 * (int64_t)1000000) /* checks at most once a second */

/* After a failed commit: the backend's probe, a write that changes
 * nothing, so writes resume only once a commit works again. */
static void probe(lp_engine *e)
{
    char why[128] = "";
    lp_health_committed(&e->health, e->ops->probe(e->be, why, sizeof why), why);
}

/* Once per UPKEEP_INTERVAL_NS, between transactions: the backend's checks
 * (and, when idle, its maintenance); when idle (no jobs waiting), probes
 * after a failed commit. */
static void upkeep(lp_engine *e, int idle)
{
    int64_t now = lp_mono_ns();
    if (now < e->next_upkeep_ns)
        return;
    e->next_upkeep_ns = now + UPKEEP_INTERVAL_NS;
    e->ops->upkeep(e->be, idle, now - e->last_commit_ns);
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

/* Begins the group's transaction; once more after the backend made a
 * lost connection again. */
static int begin(lp_engine *e)
{
    if (w_exec(e, e->ops->begin_sql) == LP_OK)
        return LP_OK;
    if (e->ops->reconnect == NULL || e->ops->reconnect(e->be) != LP_OK)
        return LP_ESTORAGE;
    return w_exec(e, e->ops->begin_sql);
}

/* Runs the jobs of a group in one transaction: LP_OK once committed,
 * LP_BACKEND_RETRY when a conflict with another writer rolled it back (or
 * the backend rolls it back for one),
 * else LP_ESTORAGE or the backend's refusal (LP_ESTORAGE_UNHEALTHY). Adds
 * the group's items to *items. */
static int run_txn(lp_engine *e, lp_job *batch, size_t *items)
{
    int rc = begin(e);
    if (rc == LP_OK && txn_check_others(e) != LP_OK)
        rc = LP_ESTORAGE;
    for (lp_job *j = batch; j != NULL; j = j->next) {
        *items += j->items;
        if (rc == LP_OK && run_job(e, j) != LP_OK)
            rc = LP_ESTORAGE;
    }
    if (rc == LP_OK && txn_flush(e) != LP_OK)
        rc = LP_ESTORAGE;
    /* a failure caused by a conflict with another writer (a deadlock in a
     * job or in the flush) is not the storage's: the group runs again */
    if (rc == LP_ESTORAGE && e->ops->conflicted != NULL && e->ops->conflicted(e->be))
        rc = LP_BACKEND_RETRY;
    if (rc == LP_OK && e->ops->before_commit != NULL)
        rc = e->ops->before_commit(e->be);
    e->commit_failure[0] = '\0';
    if (rc == LP_OK)
        rc = e->ops->commit != NULL
                 ? e->ops->commit(e->be, e->commit_failure, sizeof e->commit_failure)
                 : w_exec(e, SQL_COMMIT);
    if (rc != LP_OK) {
        if (lp_conn_in_txn(e->wconn))
            w_exec(e, SQL_ROLLBACK);
        txn_clear(e); /* it held uncommitted rows */
    }
    return rc;
}

#define GROUP_TRIES 5 /* a group rolled back by conflicts runs at most this often */

/* Before a group runs again: the conflicting transaction is most likely
 * still open, so a pause of 5-15 ms, doubled at each try (at most about
 * 0.2 s in all), random so that two servers do not meet again in step. */
static void retry_pause(int tries)
{
    int64_t ns = (int64_t)(5000 + randombytes_uniform(10000)) * 1000 << tries;
    struct timespec ts = {.tv_sec = (time_t)(ns / 1000000000), .tv_nsec = ns % 1000000000};
    nanosleep(&ts, NULL);
}

/* Runs a group of jobs in one transaction and completes them. Nothing is
 * committed while the storage is unhealthy, nor when the backend refuses
 * it right before the commit: the jobs then get LP_ESTORAGE_UNHEALTHY; a
 * failed transaction gives LP_ESTORAGE. A transaction rolled back by a
 * conflict with another writer runs again whole (every job's fn depends
 * only on the database and its ctx). */
static void run_group(lp_engine *e, lp_job *batch)
{
    size_t items = 0;
    int refusal = lp_health_refusal(&e->health);
    int rc = refusal;
    for (int tries = 0; refusal == LP_OK && tries < GROUP_TRIES; tries++) {
        items = 0;
        rc = run_txn(e, batch, &items);
        e->ops->after_commit(e->be, rc == LP_OK);
        if (rc != LP_BACKEND_RETRY)
            break;
        pthread_mutex_lock(&e->stats_lock);
        e->wstats.conflicts++;
        pthread_mutex_unlock(&e->stats_lock);
        lp_log(LP_LOG_WARN, "storage_retry",
               LP_LOG_STR("message",
                          e->commit_failure[0] ? e->commit_failure : lp_conn_errmsg(e->wconn)),
               LP_LOG_INT("try", tries + 1));
        if (tries + 1 < GROUP_TRIES)
            retry_pause(tries);
    }
    int ok = rc == LP_OK;
    if (rc == LP_ESTORAGE_UNHEALTHY)
        refusal = rc;
    if (refusal == LP_OK) {
        lp_health_committed(&e->health, ok,
                            ok                     ? NULL
                            : e->commit_failure[0] ? e->commit_failure
                                                   : lp_conn_errmsg(e->wconn));
        count_commit(e, items);
    }
    if (ok)
        e->last_commit_ns = lp_mono_ns();
    for (lp_job *j = batch, *next; j != NULL; j = next) {
        next = j->next; /* j may be gone once done */
        if (!ok)
            j->rc = refusal != LP_OK ? refusal : LP_ESTORAGE;
        j->done(j);
    }
}

struct ranked_job {
    lp_job *job;
    size_t queued; /* its place in the queue: ties keep it */
};

static int cmp_ranked(const void *a, const void *b)
{
    const struct ranked_job *x = a, *y = b;
    if (x->job->lock_order != y->job->lock_order)
        return x->job->lock_order < y->job->lock_order ? -1 : 1;
    return (x->queued > y->queued) - (x->queued < y->queued);
}

/* The group in increasing lock_order (lp_job), queue order among equals;
 * as it came when it has one job or memory runs out (a deadlock is then
 * possible, and the group runs again after it). */
static lp_job *order_group(lp_job *batch)
{
    size_t n = 0;
    for (lp_job *j = batch; j != NULL; j = j->next)
        n++;
    struct ranked_job *r = n > 1 ? malloc(n * sizeof *r) : NULL;
    if (r == NULL)
        return batch;
    n = 0;
    for (lp_job *j = batch; j != NULL; j = j->next, n++)
        r[n] = (struct ranked_job){j, n};
    qsort(r, n, sizeof *r, cmp_ranked);
    for (size_t i = 0; i + 1 < n; i++)
        r[i].job->next = r[i + 1].job;
    r[n - 1].job->next = NULL;
    batch = r[0].job;
    free(r);
    return batch;
}

/* Group commit: while one transaction commits (its fdatasync takes about
 * 0.2 ms of wall time and 80 us of CPU on the benchmark VM), new jobs queue;
 * the next transaction takes all of them. There is no timed wait for more:
 * a wait of up to 1 ms per cycle (thread per connection), of 150-300 us, or
 * for labels still in verification only lengthened requests or left cores
 * idle, and moved single-label ingest by no more than the machine's spread
 * (docs/server.md). The writer wakes once a second without jobs for its
 * upkeep. */
static void *writer_main(void *arg)
{
    lp_engine *e = arg;
    pthread_setname_np(pthread_self(), "ldpref-writer");
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
        if (batch != NULL && e->ops->dialect == LP_SQL_POSTGRESQL)
            batch = order_group(batch); /* several writers: one lock order */
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
    return lp_engine_write_ordered(e, fn, ctx, items, flags, 0);
}

int lp_engine_write_ordered(lp_engine *e, lp_job_fn fn, void *ctx, size_t items, unsigned flags,
                            int64_t lock_order)
{
    struct waiter w = {.job = {.fn = fn,
                               .ctx = ctx,
                               .items = items,
                               .flags = flags,
                               .lock_order = lock_order,
                               .done = waiter_done}};
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
    e->ops = lp_backend_for(opts->path);
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
    if (e->ops->open(opts, &e->health, &e->be, &e->wconn, err, errlen) != LP_OK)
        goto fail;
    int load_rc = e->txn.load != NULL ? e->txn.load(e->wconn, e->txn.ctx) : LP_OK;
    if (load_rc != LP_OK) {
        snprintf(err, errlen, "cannot build the writer's in-memory state: %s",
                 load_rc == LP_ENO_MEMORY ? "out of memory" : lp_conn_errmsg(e->wconn));
        goto fail;
    }
    if (e->ops->opened != NULL)
        e->ops->opened(e->be);
    for (int i = 0; i < n_read; i++) {
        e->n_rconns++;
        if (e->ops->reader_open(e->be, &e->rconns[i].conn, err, errlen) != LP_OK)
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
    e->ops->close(e->be); /* the writer's connection with it */
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
    return e->ops->train_lock_path(e->be);
}

int lp_engine_file_open(const char *path, lp_conn **out, char *err, size_t errlen)
{
    if (lp_backend_for(path) == &lp_backend_pg) /* reads run READ ONLY (lp_conn_begin_read) */
        return lp_sql_pg_open(path, out, err, errlen) == LP_OK ? LP_OK : LP_ESTORAGE;
    return lp_sqlite_file_open(path, out, err, errlen);
}

const lp_backend_ops *lp_backend_for(const char *path)
{
    if (strncmp(path, "postgresql://", 13) == 0 || strncmp(path, "postgres://", 11) == 0)
        return &lp_backend_pg;
    return &lp_backend_sqlite;
}

void lp_engine_health(lp_engine *e, lp_store_health *out)
{
    lp_health_get(&e->health, out);
    out->backend = e->ops->name;
}

void lp_engine_stats(lp_engine *e, lp_store_writer_stats *out)
{
    pthread_mutex_lock(&e->stats_lock);
    *out = e->wstats;
    pthread_mutex_unlock(&e->stats_lock);
}

lp_sql_dialect lp_engine_dialect(lp_engine *e)
{
    return e->ops->dialect;
}

int lp_engine_session_open(lp_engine *e, lp_conn **out)
{
    *out = NULL;
    if (e->ops->session_open == NULL)
        return LP_EINVALID_ARGUMENT;
    char err[256] = "";
    int rc = e->ops->session_open(e->be, out, err, sizeof err);
    if (rc != LP_OK)
        lp_log(LP_LOG_ERROR, "storage_error", LP_LOG_STR("what", "session open"),
               LP_LOG_STR("message", err));
    return rc;
}

int lp_engine_session_wait(lp_engine *e, lp_conn *c, int wake_fd, int timeout_ms,
                           void (*on_notify)(const char *channel, void *ctx), void *ctx)
{
    return e->ops->session_wait(c, wake_fd, timeout_ms, on_notify, ctx);
}
