/* coord.c — the training lock, the watcher that keeps a store's caches and
 * served model in step with other servers, and the runs the scheduler
 * reads. See coord.h. */
#include "coord.h"

#include "clock.h"
#include "db.h"
#include "error.h"
#include "log.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <unistd.h>

/* ---- the training lock ---- */

/* The advisory lock's key on PostgreSQL: "ldpref" and 2 (the migrations
 * take "ldpref" and 1, as a transaction-level lock: schema_pg.c). */
#define TRAIN_LOCK_KEY "7234315233945600002"

struct lp_train_lock {
    pthread_mutex_t mu;
    lp_engine *engine;
    int fd;           /* SQLite: open and locked while held; -1 otherwise */
    lp_conn *session; /* PostgreSQL: the lock's own session, opened when first taken */
    int held;         /* PostgreSQL: granted on session */
    char path[];      /* SQLite: the lock's file; "" on PostgreSQL */
};

struct lp_train_lock *lp_train_lock_new(lp_engine *e)
{
    const char *path = lp_engine_train_lock_path(e);
    if (path == NULL)
        path = "";
    size_t len = strlen(path) + 1;
    struct lp_train_lock *t = calloc(1, sizeof *t + len);
    if (t == NULL)
        return NULL;
    pthread_mutex_init(&t->mu, NULL);
    t->engine = e;
    t->fd = -1;
    memcpy(t->path, path, len);
    return t;
}

void lp_train_lock_free(struct lp_train_lock *t)
{
    if (t == NULL)
        return;
    if (t->fd >= 0)
        close(t->fd);          /* lets the lock go */
    lp_conn_close(t->session); /* ends the session, and the lock with it */
    pthread_mutex_destroy(&t->mu);
    free(t);
}

static void lock_fail(const char *message)
{
    lp_log(LP_LOG_ERROR, "storage_error", LP_LOG_STR("what", "training lock"),
           LP_LOG_STR("message", message));
}

/* Runs a one-value query on the lock's session: the value (>= 0), or -1
 * when it failed; a lost session is closed (its lock went with it). */
static int64_t session_value(struct lp_train_lock *t, const char *sql)
{
    lp_stmt *st = lp_stmt_prepare(t->session, sql);
    int64_t v = st != NULL && lp_stmt_step(st) == LP_SQL_ROW ? lp_stmt_column_int64(st, 0) : -1;
    lp_stmt_finalize(st);
    if (v < 0) {
        lock_fail(lp_conn_errmsg(t->session));
        lp_conn_close(t->session);
        t->session = NULL;
        t->held = 0;
    }
    return v;
}

/* PostgreSQL: pg_try_advisory_lock on the lock's session. */
static int pg_lock_try(struct lp_train_lock *t)
{
    if (t->held)
        return LP_OK;
    if (t->session == NULL && lp_engine_session_open(t->engine, &t->session) != LP_OK)
        return LP_ESTORAGE; /* logged */
    int64_t got = session_value(t, "SELECT pg_try_advisory_lock(" TRAIN_LOCK_KEY ")::int");
    if (got < 0)
        return LP_ESTORAGE;
    t->held = got == 1;
    return t->held ? LP_OK : LP_ERETRAIN_IN_PROGRESS;
}

/* SQLite: flock on the file beside the database. Each store opens the
 * file for itself: flock locks belong to an open file, so two stores of
 * one process exclude each other too. */
static int file_lock_try(struct lp_train_lock *t)
{
    if (t->fd >= 0)
        return LP_OK;
    int fd = open(t->path, O_RDWR | O_CREAT | O_CLOEXEC, 0600);
    if (fd < 0) {
        lock_fail(strerror(errno));
        return LP_ESTORAGE;
    }
    if (flock(fd, LOCK_EX | LOCK_NB) != 0) {
        int rc = errno == EWOULDBLOCK ? LP_ERETRAIN_IN_PROGRESS : LP_ESTORAGE;
        if (rc == LP_ESTORAGE)
            lock_fail(strerror(errno));
        close(fd);
        return rc;
    }
    t->fd = fd;
    return LP_OK;
}

int lp_coord_train_lock_try(lp_store *s)
{
    struct lp_train_lock *t = s->train_lock;
    pthread_mutex_lock(&t->mu);
    int rc = t->path[0] != '\0' ? file_lock_try(t) : pg_lock_try(t);
    pthread_mutex_unlock(&t->mu);
    return rc;
}

int lp_coord_train_lock_held(lp_store *s)
{
    struct lp_train_lock *t = s->train_lock;
    pthread_mutex_lock(&t->mu);
    int held = t->fd >= 0; /* a flock lasts as long as its open file */
    if (t->held)           /* an advisory lock, as long as its session */
        held = session_value(t, "SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' "
                                "AND pid = pg_backend_pid() AND granted AND objsubid = 1 AND "
                                "(classid::bigint << 32 | objid::bigint) = " TRAIN_LOCK_KEY) == 1;
    t->held = t->held && held;
    pthread_mutex_unlock(&t->mu);
    return held;
}

void lp_coord_train_lock_release(lp_store *s)
{
    struct lp_train_lock *t = s->train_lock;
    pthread_mutex_lock(&t->mu);
    if (t->fd >= 0) {
        close(t->fd);
        t->fd = -1;
    }
    if (t->held) /* a failure closes the session, which lets the lock go */
        session_value(t, "SELECT pg_advisory_unlock(" TRAIN_LOCK_KEY ")::int");
    t->held = 0;
    pthread_mutex_unlock(&t->mu);
}

/* ---- notifications (PostgreSQL) ---- */

int lp_coord_notify(lp_conn *c, const char *channel)
{
    if (lp_conn_dialect(c) != LP_SQL_POSTGRESQL)
        return LP_OK; /* SQLite: the watchers' poll alone */
    lp_stmt *st = lp_stmt_prepare(c, "SELECT pg_notify(?1, '')");
    if (st != NULL)
        lp_stmt_bind_text(st, 1, channel, -1);
    int step = st != NULL ? lp_stmt_step(st) : LP_SQL_ERROR;
    lp_stmt_finalize(st);
    return step == LP_SQL_ROW ? LP_OK : lp_engine_fail(c, "notify");
}

/* ---- the watcher ---- */

/* What changes when a token is added, revoked or rotated, or an annotator
 * revoked, on any server: counts that only grow (token rows are never
 * deleted, revocations never undone). */
static const char SQL_VERSIONS[] = "SELECT (SELECT count(*) FROM operator_tokens), "
                                   "(SELECT count(revoked_ms) FROM operator_tokens), "
                                   "(SELECT count(*) FROM annotators WHERE revoked = 1)";

struct versions {
    int64_t tokens, tokens_revoked, keys_revoked;
};

struct lp_coord_watch {
    lp_store *s;
    pthread_t thread;
    int started;
    int wake[2];      /* a byte written to wake[1] stops the thread */
    lp_conn *session; /* PostgreSQL: LISTENs on the channels */
    int sessions_opened;
    int check_now; /* thread only: a revocation was announced */

    pthread_mutex_t mu; /* guards what follows */
    void (*on_activation)(void *ctx);
    void *ctx;
    struct versions seen;
    int have_seen;
    lp_coord_watch_stats stats;
};

struct versions_query {
    lp_engine *engine;
    struct versions v;
};

static int versions_fn(lp_conn *db, void *ctx)
{
    struct versions_query *q = ctx;
    lp_stmt *st = lp_engine_stmt(q->engine, db, SQL_VERSIONS);
    if (st == NULL)
        return LP_ESTORAGE;
    int step = lp_stmt_step(st);
    if (step == LP_SQL_ROW) {
        q->v.tokens = lp_stmt_column_int64(st, 0);
        q->v.tokens_revoked = lp_stmt_column_int64(st, 1);
        q->v.keys_revoked = lp_stmt_column_int64(st, 2);
    }
    lp_stmt_reset(st);
    return step == LP_SQL_ROW ? LP_OK : lp_engine_fail(db, "coordination versions");
}

/* Reads the versions and drops each cache whose version changed (all of
 * them on the first read: what they hold may predate it). */
static void watch_check(struct lp_coord_watch *w)
{
    struct versions_query q = {.engine = w->s->engine};
    if (lp_engine_read(w->s->engine, versions_fn, &q) != LP_OK)
        return; /* logged; the next check tries again */
    struct versions v = q.v;
    pthread_mutex_lock(&w->mu);
    int first = !w->have_seen;
    int tokens = first || v.tokens != w->seen.tokens || v.tokens_revoked != w->seen.tokens_revoked;
    int keys = first || v.keys_revoked != w->seen.keys_revoked;
    w->seen = v;
    w->have_seen = 1;
    w->stats.checks++;
    w->stats.token_drops += tokens;
    w->stats.key_drops += keys;
    pthread_mutex_unlock(&w->mu);
    if (tokens)
        lp_tokens_drop(w->s->tokens);
    if (keys)
        lp_keys_drop(w->s->keys);
}

static void watch_activation(struct lp_coord_watch *w)
{
    pthread_mutex_lock(&w->mu);
    w->stats.activations++;
    if (w->on_activation != NULL)
        w->on_activation(w->ctx);
    pthread_mutex_unlock(&w->mu);
}

static void on_notify(const char *channel, void *ctx)
{
    struct lp_coord_watch *w = ctx;
    if (strcmp(channel, LP_COORD_ACTIVATED) == 0)
        watch_activation(w);
    else if (strcmp(channel, LP_COORD_REVOKED) == 0) {
        w->check_now = 1;
        pthread_mutex_lock(&w->mu);
        w->stats.revocations++;
        pthread_mutex_unlock(&w->mu);
    }
}

/* PostgreSQL: a listening session, opened again after a loss; a new one
 * may have missed notifications, so it counts as one of each. */
static void watch_listen(struct lp_coord_watch *w)
{
    if (w->session != NULL || lp_engine_session_open(w->s->engine, &w->session) != LP_OK)
        return; /* logged; tried again at the next period */
    if (lp_conn_exec(w->session, "LISTEN " LP_COORD_ACTIVATED "; LISTEN " LP_COORD_REVOKED) !=
        LP_SQL_DONE) {
        lp_engine_fail(w->session, "listen");
        lp_conn_close(w->session);
        w->session = NULL;
        return;
    }
    if (w->sessions_opened++ > 0) {
        w->check_now = 1;
        watch_activation(w);
    }
}

/* Waits until the deadline (monotonic ns), a notification or the stop;
 * 1 when stopping. */
static int watch_wait(struct lp_coord_watch *w, int64_t deadline_ns)
{
    int64_t left_ns = deadline_ns - lp_mono_ns();
    int ms = left_ns > 0 ? (int)((left_ns + 999999) / 1000000) : 0;
    if (w->session != NULL) {
        if (lp_engine_session_wait(w->s->engine, w->session, w->wake[0], ms, on_notify, w) !=
            LP_OK) {
            lp_log(LP_LOG_ERROR, "storage_error", LP_LOG_STR("what", "coordination session"),
                   LP_LOG_STR("message", "the listening session was lost"));
            lp_conn_close(w->session);
            w->session = NULL;
        }
    } else {
        struct pollfd p = {.fd = w->wake[0], .events = POLLIN};
        poll(&p, 1, ms);
    }
    struct pollfd p = {.fd = w->wake[0], .events = POLLIN};
    return poll(&p, 1, 0) > 0;
}

static void *watch_main(void *arg)
{
    struct lp_coord_watch *w = arg;
    pthread_setname_np(pthread_self(), "ldpref-watch");
    int pg = lp_engine_dialect(w->s->engine) == LP_SQL_POSTGRESQL;
    int64_t next_ns = lp_mono_ns();
    for (;;) {
        if (pg)
            watch_listen(w);
        int64_t now = lp_mono_ns();
        if (w->check_now || now >= next_ns) {
            w->check_now = 0;
            watch_check(w);
            if (now >= next_ns)
                next_ns = now + (int64_t)LP_COORD_WATCH_MS * 1000000;
        }
        if (watch_wait(w, next_ns))
            break;
    }
    return NULL;
}

struct lp_coord_watch *lp_coord_watch_start(lp_store *s)
{
    struct lp_coord_watch *w = calloc(1, sizeof *w);
    if (w == NULL)
        return NULL;
    w->s = s;
    pthread_mutex_init(&w->mu, NULL);
    if (pipe2(w->wake, O_CLOEXEC) != 0) {
        pthread_mutex_destroy(&w->mu);
        free(w);
        return NULL;
    }
    w->started = pthread_create(&w->thread, NULL, watch_main, w) == 0;
    if (!w->started) {
        lp_coord_watch_stop(w);
        return NULL;
    }
    return w;
}

void lp_coord_watch_stop(struct lp_coord_watch *w)
{
    if (w == NULL)
        return;
    if (w->started) {
        char b = 1;
        if (write(w->wake[1], &b, 1) != 1)
            lp_log(LP_LOG_ERROR, "internal_error", LP_LOG_STR("what", "coordination stop"));
        pthread_join(w->thread, NULL);
    }
    lp_conn_close(w->session);
    close(w->wake[0]);
    close(w->wake[1]);
    pthread_mutex_destroy(&w->mu);
    free(w);
}

void lp_coord_on_activation(lp_store *s, void (*fn)(void *ctx), void *ctx)
{
    struct lp_coord_watch *w = s->watch;
    pthread_mutex_lock(&w->mu);
    w->on_activation = fn;
    w->ctx = ctx;
    pthread_mutex_unlock(&w->mu);
}

void lp_coord_watch_stats_get(lp_store *s, lp_coord_watch_stats *out)
{
    struct lp_coord_watch *w = s->watch;
    pthread_mutex_lock(&w->mu);
    *out = w->stats;
    pthread_mutex_unlock(&w->mu);
}

/* ---- the runs the scheduler reads ---- */

/* The newest run's start (its creation if it never started) and the newest
 * known cut-off; both walk training_runs backwards from its newest row. */
static const char SQL_RUNS[] =
    "SELECT (SELECT COALESCE(started_ms, created_ms) FROM training_runs ORDER BY id DESC LIMIT 1), "
    "(SELECT cutoff FROM training_runs WHERE cutoff > 0 ORDER BY id DESC LIMIT 1)";

struct runs_query {
    lp_engine *engine;
    lp_coord_runs *out;
};

static int runs_fn(lp_conn *db, void *ctx)
{
    struct runs_query *q = ctx;
    lp_stmt *st = lp_engine_stmt(q->engine, db, SQL_RUNS);
    if (st == NULL)
        return LP_ESTORAGE;
    int step = lp_stmt_step(st);
    if (step == LP_SQL_ROW) {
        q->out->last_start_ms = lp_stmt_column_int64(st, 0); /* NULL reads as 0 */
        q->out->last_cutoff = lp_stmt_column_int64(st, 1);
    }
    lp_stmt_reset(st);
    return step == LP_SQL_ROW ? LP_OK : lp_engine_fail(db, "coordination read");
}

int lp_coord_runs_get(lp_store *s, lp_coord_runs *out)
{
    memset(out, 0, sizeof *out);
    struct runs_query q = {s->engine, out};
    return lp_engine_read(s->engine, runs_fn, &q);
}
