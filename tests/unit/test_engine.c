/*
 * test_engine.c — the storage engine's job API on both backends, a real
 * SQLite file and a real PostgreSQL server (tests/support/pg.h):
 * synchronous jobs from many threads each get their own result and share
 * commits; a group of queued jobs commits together; a failing job rolls
 * back only itself; asynchronous completion runs once per job; a failed
 * commit fails the whole group and refuses writes until a probe commit
 * works; the transaction cache is flushed before every commit; reads see
 * commits; the statement cache; everything is there after a reopen.
 * PostgreSQL also: a reopen does not migrate again, two engines opening
 * one new database at once migrate it once, a writer or reader whose
 * connection the server ended connects again, a campaign completed by a
 * committed job is logged once, by the engine that completed it, a
 * group that a serialization failure rolled back runs again and commits,
 * and so does a group whose transaction cache's flush met a deadlock (the
 * flush's statement under the driver's savepoint or unguarded).
 */
#include "check.h"
#include "engine.h"
#include "error.h"
#include "log.h"
#include "pg.h"
#include "schema_pg.h"
#include "sql_pg.h"
#include "tmpdir.h"

#include <fcntl.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define THREADS 8
#define PER_THREAD 60
#define QUEUED 100

static char dir[64];
static lp_engine *e;
static int on_pg; /* the suite runs on PostgreSQL */

/* ---- jobs ---- */

static const char SQL_INSERT[] = "INSERT INTO t (k, v) VALUES (?1, ?2)";
static const char SQL_GET[] = "SELECT v FROM t WHERE k = ?1";

static int create_fn(lp_conn *db, void *ctx)
{
    return lp_conn_exec(db, "CREATE TABLE IF NOT EXISTS t (k INTEGER PRIMARY KEY, "
                            "v INTEGER NOT NULL CHECK (v >= 0))") == LP_SQL_DONE
               ? LP_OK
               : LP_ESTORAGE;
}

/* Inserts (k, v); then fails with the code the key asks for: keys that are
 * multiples of 7 answer LP_EINVALID_ARGUMENT (after their insert), keys that
 * are multiples of 11 insert a negative value (a constraint failure). */
static int expected_rc(int64_t k)
{
    if (k % 7 == 0)
        return LP_EINVALID_ARGUMENT;
    if (k % 11 == 0)
        return LP_ESTORAGE;
    return LP_OK;
}

/* The insert of insert_fn on the engine en. */
static int insert_on(lp_engine *en, lp_conn *db, int64_t k)
{
    lp_stmt *st = lp_engine_stmt(en, db, SQL_INSERT);
    if (st == NULL)
        return LP_ESTORAGE;
    lp_stmt_bind_int64(st, 1, k);
    lp_stmt_bind_int64(st, 2, k % 11 == 0 && k % 7 != 0 ? -1 : k * 10);
    int step = lp_stmt_step(st);
    lp_stmt_reset(st);
    if (step != LP_SQL_DONE)
        return LP_ESTORAGE;
    return k % 7 == 0 ? LP_EINVALID_ARGUMENT : LP_OK;
}

static int insert_fn(lp_conn *db, void *ctx)
{
    return insert_on(e, db, *(int64_t *)ctx);
}

struct get_query {
    int64_t k, v;
};

static int get_fn(lp_conn *db, void *ctx)
{
    struct get_query *q = ctx;
    lp_stmt *st = lp_engine_stmt(e, db, SQL_GET);
    if (st == NULL)
        return LP_ESTORAGE;
    lp_stmt_bind_int64(st, 1, q->k);
    int step = lp_stmt_step(st);
    q->v = step == LP_SQL_ROW ? lp_stmt_column_int64(st, 0) : -1;
    lp_stmt_reset(st);
    return step == LP_SQL_ROW ? LP_OK : step == LP_SQL_DONE ? LP_ENOT_FOUND : LP_ESTORAGE;
}

static int64_t value_of(int64_t k)
{
    struct get_query q = {.k = k};
    int rc = lp_engine_read(e, get_fn, &q);
    return rc == LP_OK ? q.v : -rc;
}

/* ---- the transaction cache ---- */

static atomic_int flushes, clears, flush_fails;

static int cache_flush(lp_conn *db, void *ctx)
{
    atomic_fetch_add(&flushes, 1);
    return atomic_load(&flush_fails) ? LP_ESTORAGE : LP_OK;
}

static void cache_clear(void *ctx)
{
    atomic_fetch_add(&clears, 1);
}

/* ---- many threads, synchronous jobs ---- */

struct worker {
    int first;
    int wrong;
};

static void *worker_main(void *arg)
{
    struct worker *w = arg;
    for (int i = 0; i < PER_THREAD; i++) {
        int64_t k = w->first + i;
        int rc = lp_engine_write(e, insert_fn, &k, 1, 0);
        w->wrong += rc != expected_rc(k);
    }
    return NULL;
}

static void test_threads(void)
{
    struct worker w[THREADS];
    pthread_t th[THREADS];
    lp_store_writer_stats before, after;
    lp_engine_stats(e, &before);
    for (int t = 0; t < THREADS; t++) {
        w[t] = (struct worker){.first = 1 + t * PER_THREAD};
        pthread_create(&th[t], NULL, worker_main, &w[t]);
    }
    int wrong = 0;
    for (int t = 0; t < THREADS; t++) {
        pthread_join(th[t], NULL);
        wrong += w[t].wrong;
    }
    lp_engine_stats(e, &after);
    CHECK_INT(wrong, 0); /* each job got its own result */
    CHECK_INT(after.items - before.items, THREADS * PER_THREAD);
    /* concurrent writers share commits */
    CHECK(after.commits - before.commits < (uint64_t)(THREADS * PER_THREAD));
    int present = 0, right = 1;
    for (int64_t k = 1; k <= THREADS * PER_THREAD; k++) {
        int64_t v = value_of(k);
        if (expected_rc(k) == LP_OK) {
            present += v == k * 10;
            right &= v == k * 10;
        } else {
            right &= v == -LP_ENOT_FOUND; /* rolled back, and only that job */
        }
    }
    int ok = 0;
    for (int64_t k = 1; k <= THREADS * PER_THREAD; k++)
        ok += expected_rc(k) == LP_OK;
    CHECK_INT(present, ok);
    CHECK(right);
}

/* ---- one group of queued asynchronous jobs ---- */

static atomic_int gate_entered, gate_open;

static int gate_fn(lp_conn *db, void *ctx)
{
    atomic_store(&gate_entered, 1);
    while (!atomic_load(&gate_open)) {
        struct timespec ts = {0, 1000000};
        nanosleep(&ts, NULL);
    }
    return LP_OK;
}

struct async_job {
    lp_job job; /* first: done gets &job */
    int64_t k;
    atomic_int calls;
    int rc;
};

static atomic_int done_total;

static void async_done(lp_job *j)
{
    struct async_job *a = (struct async_job *)j;
    a->rc = j->rc;
    atomic_fetch_add(&a->calls, 1);
    atomic_fetch_add(&done_total, 1);
}

static void test_group(void)
{
    static struct async_job jobs[QUEUED];
    lp_store_writer_stats before, after;
    lp_engine_stats(e, &before);
    int flushes_before = atomic_load(&flushes);

    /* the writer is held inside a job while QUEUED jobs queue up */
    lp_job gate = {.fn = gate_fn, .items = 1, .done = async_done};
    struct async_job gate_job = {.job = gate};
    CHECK_INT(lp_engine_write_async(e, &gate_job.job), LP_OK);
    while (!atomic_load(&gate_entered)) {
        struct timespec ts = {0, 1000000};
        nanosleep(&ts, NULL);
    }
    for (int i = 0; i < QUEUED; i++) {
        jobs[i].k = 10000 + i;
        atomic_store(&jobs[i].calls, 0);
        jobs[i].job = (lp_job){.fn = insert_fn, .ctx = &jobs[i].k, .items = 1, .done = async_done};
        CHECK_INT(lp_engine_write_async(e, &jobs[i].job), LP_OK);
    }
    atomic_store(&gate_open, 1);
    while (atomic_load(&done_total) < QUEUED + 1) {
        struct timespec ts = {0, 1000000};
        nanosleep(&ts, NULL);
    }
    usleep(20000); /* a second completion would show up now */
    lp_engine_stats(e, &after);

    CHECK_INT(atomic_load(&done_total), QUEUED + 1);
    CHECK_INT(atomic_load(&gate_job.calls), 1);
    int once = 1, rcs = 1, rows = 1;
    for (int i = 0; i < QUEUED; i++) {
        once &= atomic_load(&jobs[i].calls) == 1;
        rcs &= jobs[i].rc == expected_rc(jobs[i].k);
        int64_t v = value_of(jobs[i].k);
        rows &= expected_rc(jobs[i].k) == LP_OK ? v == jobs[i].k * 10 : v == -LP_ENOT_FOUND;
    }
    CHECK(once);
    CHECK(rcs);
    CHECK(rows);
    /* two transactions: the gate alone, then every queued job together */
    CHECK_INT(after.commits - before.commits, 2);
    CHECK_INT(after.items - before.items, QUEUED + 1);
    CHECK_INT(after.hist[7] - before.hist[7], 1);       /* 64 < 100 <= 128 */
    CHECK(atomic_load(&flushes) - flushes_before >= 2); /* before each commit */
}

/* ---- a failed commit fails the whole group ---- */

static void test_failed_commit(void)
{
    int clears_before = atomic_load(&clears);
    atomic_store(&flush_fails, 1);
    int64_t k = 20001;
    CHECK_INT(lp_engine_write(e, insert_fn, &k, 1, 0), LP_ESTORAGE);
    lp_store_health h;
    lp_engine_health(e, &h);
    CHECK(h.commit_failed && h.failed_ms > 0);
    CHECK_STR(h.reason, "commit_failed");
    /* until a probe commit works, writes are refused without running */
    int64_t kb = 20002;
    CHECK_INT(lp_engine_write(e, insert_fn, &kb, 1, LP_JOB_BARE), LP_ESTORAGE_UNHEALTHY);
    atomic_store(&flush_fails, 0);
    CHECK_INT(value_of(20001), -LP_ENOT_FOUND);
    CHECK_INT(value_of(20002), -LP_ENOT_FOUND);
    CHECK(atomic_load(&clears) > clears_before); /* the cache was dropped */

    /* the writer probes once a second: healthy again within a few */
    for (int waited = 0; waited < 5000; waited += 50) {
        lp_engine_health(e, &h);
        if (!h.commit_failed)
            break;
        usleep(50 * 1000);
    }
    CHECK_STR(h.reason, "ok");
    /* and the engine goes on */
    CHECK_INT(lp_engine_write(e, insert_fn, &k, 1, 0), LP_OK);
    CHECK_INT(value_of(20001), 200010);
    /* a bare job has no savepoint: its own successful writes stay even
     * when it reports an error */
    int64_t k7 = 20006; /* a multiple of 7 */
    int clears_bare = atomic_load(&clears);
    CHECK_INT(lp_engine_write(e, insert_fn, &k7, 1, LP_JOB_BARE), LP_EINVALID_ARGUMENT);
    CHECK_INT(value_of(20006), 200060);
    /* the cache stays for bare jobs; PostgreSQL, which cannot tell whether
     * another server committed, drops it once at the transaction's start */
    CHECK_INT(atomic_load(&clears) - clears_bare, on_pg);
}

/* ---- the statement cache ---- */

struct stmt_probe {
    lp_stmt *a, *b, *c;
};

static int stmt_fn(lp_conn *db, void *ctx)
{
    struct stmt_probe *p = ctx;
    p->a = lp_engine_stmt(e, db, SQL_GET);
    p->b = lp_engine_stmt(e, db, SQL_GET);
    p->c = lp_engine_stmt(e, db, "SELECT nonsense FROM nowhere");
    return LP_OK;
}

static void test_stmt_cache(void)
{
    struct stmt_probe p = {0};
    CHECK_INT(lp_engine_write(e, stmt_fn, &p, 1, 0), LP_OK);
    CHECK(p.a != NULL && p.a == p.b); /* prepared once per connection */
    CHECK(p.c == NULL);               /* a bad statement is an error, not a crash */
    struct stmt_probe r = {0};
    CHECK_INT(lp_engine_read(e, stmt_fn, &r), LP_OK);
    CHECK(r.a != NULL && r.a == r.b && r.a != p.a); /* each connection its own */
}

/* The suite on the database at where (a file path or a libpq URI). */
static void test_backend(const char *where)
{
    char err[256];
    lp_store_opts o = {.path = where, .sync_full = 1, .read_conns = 1};
    lp_txn_cache cache = {.flush = cache_flush, .clear = cache_clear};
    on_pg = strncmp(where, "postgres", 8) == 0;
    atomic_store(&gate_entered, 0);
    atomic_store(&gate_open, 0);
    atomic_store(&done_total, 0);
    CHECK_INT(lp_engine_open(&o, &cache, &e, err, sizeof err), LP_OK);
    if (e == NULL) {
        fprintf(stderr, "%s: %s\n", where, err);
        return;
    }
    CHECK_INT(lp_engine_write(e, create_fn, NULL, 1, 0), LP_OK);

    test_threads();
    test_group();
    test_failed_commit();
    test_stmt_cache();

    lp_engine_close(e);
    CHECK_INT(lp_engine_open(&o, NULL, &e, err, sizeof err), LP_OK);
    CHECK_INT(value_of(PER_THREAD + 1), (PER_THREAD + 1) * 10); /* durable */
    CHECK_INT(value_of(10001), 100010);
    CHECK_INT(value_of(10003), -LP_ENOT_FOUND); /* 7 x 1429 */
    lp_engine_close(e);
    lp_engine_close(NULL);
}

/* ---- PostgreSQL's own ---- */

static const char SQL_VERSIONS[] = "SELECT count(*), max(version), "
                                   "CAST(max(extract(epoch FROM applied_at) * 1e6) AS bigint) "
                                   "FROM schema_version";

struct versions {
    int64_t rows, newest, applied_us;
};

static int versions_fn(lp_conn *db, void *ctx)
{
    struct versions *v = ctx;
    lp_stmt *st = lp_engine_stmt(e, db, SQL_VERSIONS);
    if (st == NULL || lp_stmt_step(st) != LP_SQL_ROW)
        return LP_ESTORAGE;
    *v = (struct versions){lp_stmt_column_int64(st, 0), lp_stmt_column_int64(st, 1),
                           lp_stmt_column_int64(st, 2)};
    lp_stmt_reset(st);
    return LP_OK;
}

static struct versions versions_of(lp_engine *en)
{
    struct versions v = {-1, -1, -1};
    lp_engine *saved = e;
    e = en;
    CHECK_INT(lp_engine_read(en, versions_fn, &v), LP_OK);
    e = saved;
    return v;
}

struct opener {
    const char *uri;
    lp_engine *engine;
    int rc;
};

static void *opener_main(void *arg)
{
    struct opener *op = arg;
    char err[256];
    lp_store_opts o = {.path = op->uri, .sync_full = 1, .read_conns = 1};
    op->rc = lp_engine_open(&o, NULL, &op->engine, err, sizeof err);
    if (op->rc != LP_OK)
        fprintf(stderr, "open %s: %s\n", op->uri, err);
    return NULL;
}

/* Two engines open one new database at once: both open, one migrates. A
 * reopen finds it migrated and applies nothing. */
static void test_pg_migrate_once(const char *uri)
{
    struct opener ops[2] = {{.uri = uri}, {.uri = uri}};
    pthread_t th[2];
    for (int k = 0; k < 2; k++)
        pthread_create(&th[k], NULL, opener_main, &ops[k]);
    for (int k = 0; k < 2; k++)
        pthread_join(th[k], NULL);
    CHECK_INT(ops[0].rc, LP_OK);
    CHECK_INT(ops[1].rc, LP_OK);
    if (ops[0].rc != LP_OK || ops[1].rc != LP_OK) {
        lp_engine_close(ops[0].engine);
        lp_engine_close(ops[1].engine);
        return;
    }
    struct versions v0 = versions_of(ops[0].engine), v1 = versions_of(ops[1].engine);
    int files = 0;
    while (lp_pg_schema_files[files].name != NULL)
        files++;
    CHECK_INT(v0.rows, files); /* each file applied, once */
    CHECK_INT(v0.newest, lp_pg_schema_newest());
    CHECK_INT(v1.rows, v0.rows);
    lp_engine_close(ops[0].engine);
    lp_engine_close(ops[1].engine);

    /* a restart: the same database, nothing applied again */
    struct opener again = {.uri = uri};
    opener_main(&again);
    CHECK_INT(again.rc, LP_OK);
    if (again.rc == LP_OK) {
        struct versions v2 = versions_of(again.engine);
        CHECK_INT(v2.rows, v0.rows);
        CHECK_INT(v2.newest, v0.newest);
        CHECK_INT(v2.applied_us, v0.applied_us);
        lp_engine_close(again.engine);
    }
}

static int pid_fn(lp_conn *db, void *ctx)
{
    lp_stmt *st = lp_engine_stmt(e, db, "SELECT pg_backend_pid()");
    if (st == NULL || lp_stmt_step(st) != LP_SQL_ROW)
        return LP_ESTORAGE;
    *(int64_t *)ctx = lp_stmt_column_int64(st, 0);
    lp_stmt_reset(st);
    return LP_OK;
}

/* The server ends the sessions of the writer and of the pooled reader (as
 * a restart or a failover would): the next write and the next read go
 * through on new connections. */
static void test_pg_reconnect(const char *uri)
{
    char err[256];
    lp_store_opts o = {.path = uri, .sync_full = 1, .read_conns = 1};
    CHECK_INT(lp_engine_open(&o, NULL, &e, err, sizeof err), LP_OK);
    lp_conn *admin = NULL;
    CHECK_INT(lp_sql_pg_open(uri, &admin, err, sizeof err), LP_OK);
    if (e == NULL || admin == NULL) {
        lp_engine_close(e);
        lp_conn_close(admin);
        return;
    }
    int64_t wpid = 0, rpid = 0, wpid2 = 0, rpid2 = 0;
    CHECK_INT(lp_engine_write(e, pid_fn, &wpid, 1, 0), LP_OK);
    CHECK_INT(lp_engine_read(e, pid_fn, &rpid), LP_OK);
    char sql[160];
    snprintf(sql, sizeof sql, "SELECT pg_terminate_backend(%lld), pg_terminate_backend(%lld)",
             (long long)wpid, (long long)rpid);
    CHECK_INT(lp_conn_exec(admin, sql), LP_SQL_DONE);
    usleep(100 * 1000); /* the sessions end */

    int64_t k = 30001;
    CHECK_INT(lp_engine_write(e, insert_fn, &k, 1, 0), LP_OK);
    CHECK_INT(value_of(30001), 300010);
    CHECK_INT(lp_engine_write(e, pid_fn, &wpid2, 1, 0), LP_OK);
    CHECK_INT(lp_engine_read(e, pid_fn, &rpid2), LP_OK);
    CHECK(wpid2 != wpid && wpid2 > 0); /* new sessions */
    CHECK(rpid2 != rpid && rpid2 > 0);
    lp_store_health h;
    lp_engine_health(e, &h);
    CHECK_STR(h.reason, "ok");
    lp_conn_close(admin);
    lp_engine_close(e);
}

/* Creates campaign name and marks all of its 2 tasks complete; fails
 * afterwards (its savepoint rolled back) when ctx's fail is set. */
struct complete_job {
    const char *name;
    int fail;
};

static int complete_fn(lp_conn *db, void *ctx)
{
    struct complete_job *c = ctx;
    lp_stmt *ins =
        lp_engine_stmt(e, db,
                       "INSERT INTO campaigns (name, epsilon_min, epsilon_max, epsilon_budget, "
                       "epsilon_default, created_ms) VALUES (?1, 1, 1, 10, 1, 0) RETURNING id");
    if (ins == NULL)
        return LP_ESTORAGE;
    lp_stmt_bind_text(ins, 1, c->name, -1);
    int64_t id = lp_stmt_step(ins) == LP_SQL_ROW ? lp_stmt_column_int64(ins, 0) : 0;
    lp_stmt_reset(ins);
    lp_stmt *up = lp_engine_stmt(
        e, db, "UPDATE campaign_fill SET tasks = 2, tasks_complete = 2 WHERE campaign = ?1");
    if (up == NULL || id == 0)
        return LP_ESTORAGE;
    lp_stmt_bind_int64(up, 1, id);
    int step = lp_stmt_step(up);
    lp_stmt_reset(up);
    if (step != LP_SQL_DONE || lp_conn_changes(db) != 1)
        return LP_ESTORAGE;
    return c->fail ? LP_EINVALID_ARGUMENT : LP_OK;
}

/* Lines of the log file at path holding every one of the words. */
static int log_lines(const char *path, const char *a, const char *b)
{
    FILE *f = fopen(path, "r");
    char line[LP_LOG_LINE_MAX];
    int n = 0;
    while (f != NULL && fgets(line, sizeof line, f) != NULL)
        n += strstr(line, a) != NULL && strstr(line, b) != NULL;
    if (f != NULL)
        fclose(f);
    return n;
}

/* Two engines (two servers) on one database, the log in a file: a
 * completion is logged once, after its commit, by the engine whose job
 * made it; a job rolled back after completing a campaign logs nothing. */
static void test_pg_completion(const char *uri)
{
    char err[256], logpath[300];
    snprintf(logpath, sizeof logpath, "%s/completion.log", dir);
    int fd = open(logpath, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    CHECK(fd >= 0);
    lp_store_opts o = {.path = uri, .sync_full = 1, .read_conns = 1};
    lp_engine *other = NULL;
    CHECK_INT(lp_engine_open(&o, NULL, &e, err, sizeof err), LP_OK);
    CHECK_INT(lp_engine_open(&o, NULL, &other, err, sizeof err), LP_OK);
    if (e == NULL || other == NULL || fd < 0) {
        lp_engine_close(e);
        lp_engine_close(other);
        return;
    }
    lp_log_set_fd(fd);
    struct complete_job done = {"finished", 0}, undone = {"rolled-back", 1};
    CHECK_INT(lp_engine_write(e, complete_fn, &done, 1, 0), LP_OK);
    CHECK_INT(lp_engine_write(e, complete_fn, &undone, 1, 0), LP_EINVALID_ARGUMENT);
    usleep(2500 * 1000); /* both writers' idle upkeep reads notifications */
    lp_log_set_fd(2);
    close(fd);
    CHECK_INT(log_lines(logpath, "campaign_complete", "campaign=finished"), 1);
    CHECK_INT(log_lines(logpath, "campaign_complete", "tasks=2"), 1);
    CHECK_INT(log_lines(logpath, "campaign_complete", "rolled-back"), 0);
    lp_engine_close(other);
    lp_engine_close(e);
}

/* Write skew between two engines on a SERIALIZABLE database: each job
 * reads the key the other inserts, both wait until both have read, then
 * each inserts its own key. PostgreSQL rolls one transaction back with
 * SQLSTATE 40001; its group runs again (the second run does not wait) and
 * commits. */
struct skew_job {
    lp_engine *engine;
    int64_t read_k, write_k;
    atomic_int runs, *mine, *theirs;
};

static int skew_fn(lp_conn *db, void *ctx)
{
    struct skew_job *j = ctx;
    int first = atomic_fetch_add(&j->runs, 1) == 0;
    lp_stmt *st = lp_engine_stmt(j->engine, db, SQL_GET);
    if (st == NULL)
        return LP_ESTORAGE;
    lp_stmt_bind_int64(st, 1, j->read_k);
    int step = lp_stmt_step(st);
    lp_stmt_reset(st);
    if (step != LP_SQL_DONE && step != LP_SQL_ROW) /* a run again sees the other's row */
        return LP_ESTORAGE;
    atomic_store(j->mine, 1);
    for (int waited = 0; first && !atomic_load(j->theirs) && waited < 5000; waited++)
        usleep(1000);
    return insert_on(j->engine, db, j->write_k);
}

struct skew_writer {
    lp_engine *engine;
    struct skew_job *job;
    int rc;
};

static void *skew_main(void *arg)
{
    struct skew_writer *w = arg;
    w->rc = lp_engine_write(w->engine, skew_fn, w->job, 1, 0);
    return NULL;
}

static void test_pg_retry(const char *uri)
{
    char err[256];
    lp_store_opts o = {.path = uri, .sync_full = 1, .read_conns = 1};
    lp_engine *a = NULL, *b = NULL;
    CHECK_INT(lp_engine_open(&o, NULL, &a, err, sizeof err), LP_OK);
    CHECK_INT(lp_engine_open(&o, NULL, &b, err, sizeof err), LP_OK);
    if (a == NULL || b == NULL) {
        lp_engine_close(a);
        lp_engine_close(b);
        return;
    }
    e = a;
    CHECK_INT(lp_engine_write(a, create_fn, NULL, 1, 0), LP_OK);
    static atomic_int read_a, read_b;
    static struct skew_job ja = {.read_k = 43, .write_k = 41, .mine = &read_a, .theirs = &read_b};
    static struct skew_job jb = {.read_k = 41, .write_k = 43, .mine = &read_b, .theirs = &read_a};
    ja.engine = a;
    jb.engine = b;
    struct skew_writer wa = {a, &ja, -1}, wb = {b, &jb, -1};
    pthread_t ta, tb;
    pthread_create(&ta, NULL, skew_main, &wa);
    pthread_create(&tb, NULL, skew_main, &wb);
    pthread_join(ta, NULL);
    pthread_join(tb, NULL);
    CHECK_INT(wa.rc, LP_OK);
    CHECK_INT(wb.rc, LP_OK);
    CHECK(atomic_load(&ja.runs) + atomic_load(&jb.runs) >= 3); /* one group ran again */
    CHECK_INT(value_of(41), 410);
    CHECK_INT(value_of(43), 430);
    lp_engine_close(b);
    lp_engine_close(a);
    e = NULL;
}

/* ---- a deadlock in the transaction cache's flush ----
 * Two engines on one database, each with a cache whose flush adds its
 * job's count to two counter rows, in opposite orders; each engine's first
 * flush of a round waits, holding its first row, until the other holds its
 * own: PostgreSQL finds the deadlock (deadlock_timeout 50 ms on this
 * database) and fails one flush with 40P01. That group runs again and
 * commits: both jobs succeed, each row gets both counts, the storage stays
 * healthy. The flush statements of one engine run under the driver's
 * savepoint (the statement alone rolled back), the other's unguarded (the
 * transaction rolled back); the two swap each round. */

#define DEADLOCK_ROUNDS 4

static const char SQL_COUNTERS[] =
    "CREATE TABLE counters (id bigint PRIMARY KEY, n bigint NOT NULL); "
    "INSERT INTO counters VALUES (1, 0), (2, 0)";
static const char SQL_BUMP[] = "UPDATE counters SET n = n + ?2 WHERE id = ?1";

struct bump_cache {
    lp_engine *engine;
    int64_t first, second; /* the rows, in this cache's order */
    int64_t pending;       /* added by the jobs of the open transaction */
    int unguarded;         /* the flush's statement runs without a savepoint */
    int must_wait;         /* this round's first flush waits for the other's */
    atomic_int holds, *other_holds;
    atomic_int flushes; /* flushes that wrote */
};

static int bump_row(struct bump_cache *bc, lp_conn *db, int64_t row)
{
    lp_stmt *st = lp_engine_stmt(bc->engine, db, SQL_BUMP);
    if (st == NULL)
        return LP_ESTORAGE;
    if (bc->unguarded)
        lp_stmt_set_unguarded(st);
    lp_stmt_bind_int64(st, 1, row);
    lp_stmt_bind_int64(st, 2, bc->pending);
    int step = lp_stmt_step(st);
    lp_stmt_reset(st);
    return step == LP_SQL_DONE ? LP_OK : lp_engine_fail(db, "counter");
}

static int bump_flush(lp_conn *db, void *ctx)
{
    struct bump_cache *bc = ctx;
    if (bc->pending == 0)
        return LP_OK;
    atomic_fetch_add(&bc->flushes, 1);
    if (bump_row(bc, db, bc->first) != LP_OK)
        return LP_ESTORAGE;
    atomic_store(&bc->holds, 1);
    for (int waited = 0; bc->must_wait && !atomic_load(bc->other_holds) && waited < 5000; waited++)
        usleep(1000);
    bc->must_wait = 0;
    if (bump_row(bc, db, bc->second) != LP_OK)
        return LP_ESTORAGE;
    bc->pending = 0;
    return LP_OK;
}

static void bump_clear(void *ctx)
{
    ((struct bump_cache *)ctx)->pending = 0;
}

static int bump_fn(lp_conn *db, void *ctx)
{
    (void)db;
    ((struct bump_cache *)ctx)->pending++;
    return LP_OK;
}

static int counters_fn(lp_conn *db, void *ctx)
{
    (void)ctx;
    return lp_conn_exec(db, SQL_COUNTERS) == LP_SQL_DONE ? LP_OK : lp_engine_fail(db, "create");
}

struct bump_writer {
    lp_engine *engine;
    struct bump_cache *cache;
    int rc;
};

static void *bump_main(void *arg)
{
    struct bump_writer *w = arg;
    w->rc = lp_engine_write(w->engine, bump_fn, w->cache, 1, LP_JOB_BARE);
    return NULL;
}

static const char SQL_COUNTER[] = "SELECT n FROM counters WHERE id = ?1";

struct counter_query {
    lp_engine *engine;
    int64_t row, n;
};

static int counter_fn(lp_conn *db, void *ctx)
{
    struct counter_query *q = ctx;
    lp_stmt *st = lp_engine_stmt(q->engine, db, SQL_COUNTER);
    if (st == NULL)
        return LP_ESTORAGE;
    lp_stmt_bind_int64(st, 1, q->row);
    int step = lp_stmt_step(st);
    q->n = step == LP_SQL_ROW ? lp_stmt_column_int64(st, 0) : -1;
    lp_stmt_reset(st);
    return step == LP_SQL_ROW ? LP_OK : LP_ESTORAGE;
}

static int64_t counter_of(lp_engine *en, int64_t row)
{
    struct counter_query q = {en, row, -1};
    return lp_engine_read(en, counter_fn, &q) == LP_OK ? q.n : -1;
}

static void test_pg_flush_deadlock(const char *uri)
{
    static struct bump_cache ca = {.first = 1, .second = 2}, cb = {.first = 2, .second = 1};
    ca.other_holds = &cb.holds;
    cb.other_holds = &ca.holds;
    lp_txn_cache cache_a = {.flush = bump_flush, .clear = bump_clear, .ctx = &ca};
    lp_txn_cache cache_b = {.flush = bump_flush, .clear = bump_clear, .ctx = &cb};
    char err[256];
    lp_store_opts o = {.path = uri, .sync_full = 1, .read_conns = 1};
    lp_engine *a = NULL, *b = NULL;
    CHECK_INT(lp_engine_open(&o, &cache_a, &a, err, sizeof err), LP_OK);
    CHECK_INT(lp_engine_open(&o, &cache_b, &b, err, sizeof err), LP_OK);
    if (a == NULL || b == NULL) {
        lp_engine_close(a);
        lp_engine_close(b);
        return;
    }
    ca.engine = a;
    cb.engine = b;
    CHECK_INT(lp_engine_write(a, counters_fn, NULL, 1, 0), LP_OK);
    int failed = 0;
    for (int r = 0; r < DEADLOCK_ROUNDS; r++) {
        ca.unguarded = r % 2;
        cb.unguarded = !ca.unguarded;
        ca.must_wait = cb.must_wait = 1;
        atomic_store(&ca.holds, 0);
        atomic_store(&cb.holds, 0);
        struct bump_writer wa = {a, &ca, -1}, wb = {b, &cb, -1};
        pthread_t ta, tb;
        pthread_create(&ta, NULL, bump_main, &wa);
        pthread_create(&tb, NULL, bump_main, &wb);
        pthread_join(ta, NULL);
        pthread_join(tb, NULL);
        CHECK_ERR(wa.rc, LP_OK);
        CHECK_ERR(wb.rc, LP_OK);
        failed += wa.rc != LP_OK || wb.rc != LP_OK;
    }
    /* every round one flush met the deadlock and ran again */
    int writes = atomic_load(&ca.flushes) + atomic_load(&cb.flushes);
    CHECK(writes >= 3 * DEADLOCK_ROUNDS);
    fprintf(stderr, "flush deadlocks: %d flushes for %d rounds of two groups\n", writes,
            DEADLOCK_ROUNDS);
    CHECK_INT(counter_of(a, 1), 2 * DEADLOCK_ROUNDS - failed);
    CHECK_INT(counter_of(b, 2), 2 * DEADLOCK_ROUNDS - failed);
    lp_store_health h;
    lp_engine_health(a, &h);
    CHECK_INT(h.commit_failed, 0);
    lp_engine_health(b, &h);
    CHECK_INT(h.commit_failed, 0);
    lp_engine_close(b);
    lp_engine_close(a);
}

static void test_pg(void)
{
    pg_cluster pgc;
    if (!pg_cluster_start_for(&pgc, "test_engine (PostgreSQL)"))
        return;
    char uri[512], uri2[512], uri3[512], uri4[512];
    CHECK_INT(pg_cluster_create_db(&pgc, "engine_test", uri, sizeof uri), 0);
    CHECK_INT(pg_cluster_create_db(&pgc, "engine_migrate", uri2, sizeof uri2), 0);
    CHECK_INT(pg_cluster_create_db(&pgc, "engine_ssi", uri3, sizeof uri3), 0);
    CHECK_INT(pg_cluster_create_db(&pgc, "engine_deadlock", uri4, sizeof uri4), 0);
    CHECK(strncmp(uri, "postgresql://", 13) == 0 || strncmp(uri, "postgres://", 11) == 0);
    test_backend(uri);
    test_pg_migrate_once(uri2);
    test_pg_reconnect(uri);
    test_pg_completion(uri);
    lp_conn *admin = NULL;
    char err0[256];
    CHECK_INT(lp_sql_pg_open(pgc.admin_uri, &admin, err0, sizeof err0), LP_OK);
    if (admin != NULL) {
        CHECK_INT(lp_conn_exec(admin, "ALTER DATABASE engine_ssi "
                                      "SET default_transaction_isolation = 'serializable'"),
                  LP_SQL_DONE);
        test_pg_retry(uri3);
        CHECK_INT(lp_conn_exec(admin, "ALTER DATABASE engine_deadlock "
                                      "SET deadlock_timeout = '50ms'"),
                  LP_SQL_DONE);
        lp_conn_close(admin);
        test_pg_flush_deadlock(uri4);
    }

    /* a server that cannot be reached: a clear error, nothing left */
    char err[256];
    lp_store_opts ob = {.path = "postgresql://nobody@/none?host=/nonexistent", .read_conns = 1};
    lp_engine *none = NULL;
    CHECK_INT(lp_engine_open(&ob, NULL, &none, err, sizeof err), LP_ESTORAGE);
    CHECK(none == NULL && strstr(err, "cannot connect") != NULL);
    pg_cluster_stop(&pgc);
}

int main(void)
{
    char err[256];
    if (tmpdir_create(dir, sizeof dir, "test-engine") != 0)
        return 1;
    char path[256];
    snprintf(path, sizeof path, "%s/e.db", dir);
    test_backend(path);

    char bad[300];
    snprintf(bad, sizeof bad, "%s/missing/dir/x.db", dir);
    lp_store_opts ob = {.path = bad, .sync_full = 1, .read_conns = 1};
    lp_engine *none = NULL;
    CHECK_INT(lp_engine_open(&ob, NULL, &none, err, sizeof err), LP_ESTORAGE);
    CHECK(none == NULL && err[0] != '\0');

    test_pg();
    tmpdir_remove(dir);
    return check_summary();
}
