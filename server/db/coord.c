/* coord.c — the training lock and the runs the scheduler reads. See
 * coord.h. */
#include "coord.h"

#include "db.h"
#include "error.h"
#include "log.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <unistd.h>

/* ---- the training lock (SQLite: flock on a file beside the database) ---- */

struct lp_train_lock {
    pthread_mutex_t mu;
    int fd; /* open and locked while held; -1 otherwise */
    char path[];
};

struct lp_train_lock *lp_train_lock_new(const char *path)
{
    if (path == NULL)
        path = ""; /* no lock file: the backend's lock is to come */
    size_t len = strlen(path) + 1;
    struct lp_train_lock *t = malloc(sizeof *t + len);
    if (t == NULL)
        return NULL;
    pthread_mutex_init(&t->mu, NULL);
    t->fd = -1;
    memcpy(t->path, path, len);
    return t;
}

void lp_train_lock_free(struct lp_train_lock *t)
{
    if (t == NULL)
        return;
    if (t->fd >= 0)
        close(t->fd); /* lets the lock go */
    pthread_mutex_destroy(&t->mu);
    free(t);
}

int lp_coord_train_lock_try(lp_store *s)
{
    struct lp_train_lock *t = s->train_lock;
    pthread_mutex_lock(&t->mu);
    int rc = LP_OK;
    if (t->fd < 0 && t->path[0] == '\0') {
        lp_log(LP_LOG_ERROR, "storage_error", LP_LOG_STR("what", "training lock"),
               LP_LOG_STR("message", "this backend has no training lock yet"));
        rc = LP_ESTORAGE;
    } else if (t->fd < 0) {
        /* Each store opens the file for itself: flock locks belong to an
         * open file, so two stores of one process exclude each other too. */
        int fd = open(t->path, O_RDWR | O_CREAT | O_CLOEXEC, 0600);
        if (fd < 0) {
            lp_log(LP_LOG_ERROR, "storage_error", LP_LOG_STR("what", "training lock"),
                   LP_LOG_STR("path", t->path), LP_LOG_STR("message", strerror(errno)));
            rc = LP_ESTORAGE;
        } else if (flock(fd, LOCK_EX | LOCK_NB) != 0) {
            rc = errno == EWOULDBLOCK ? LP_ERETRAIN_IN_PROGRESS : LP_ESTORAGE;
            if (rc == LP_ESTORAGE)
                lp_log(LP_LOG_ERROR, "storage_error", LP_LOG_STR("what", "training lock"),
                       LP_LOG_STR("path", t->path), LP_LOG_STR("message", strerror(errno)));
            close(fd);
        } else {
            t->fd = fd;
        }
    }
    pthread_mutex_unlock(&t->mu);
    return rc;
}

int lp_coord_train_lock_held(lp_store *s)
{
    struct lp_train_lock *t = s->train_lock;
    pthread_mutex_lock(&t->mu);
    int held = t->fd >= 0; /* a flock lasts as long as its open file */
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
    pthread_mutex_unlock(&t->mu);
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
