/*
 * test_cluster.c — several servers on one database (server/db/coord.h,
 * docs/server.md "Several servers on one database"), on a SQLite file and
 * then on a real PostgreSQL server (tests/support/pg.h): three stores
 * opened on one database in this process, each with its own learner, and
 * a holder of the training lock in a child process that is killed.
 *
 * Checks that one store at a time holds the training lock, that a holder's
 * death frees it (SQLite: at once; PostgreSQL: once the server ends the
 * dead session) and the next holder marks the dead holder's run failed,
 * that a holder whose session was ended (PostgreSQL) knows it lost the lock
 * and another store takes it, that a retrain asked of one server while
 * another holds the lock is refused with retrain_in_progress (and so is
 * cancelling a run the other server trains), that a model activated (or
 * rolled back) through one learner is served by the other within the poll
 * period plus the time to load it (PostgreSQL: with the poll at a minute,
 * by the activation's notification alone), that an operator token and an
 * annotator key revoked through one store are refused by another within
 * the watcher's period (PostgreSQL: announced by notification), that the
 * scheduler reads the newest run's start and cut-off whichever store
 * recorded them, and that the stored schedule fires once across three
 * learners, not once per learner.
 */
#include "annotators.h"
#include "campaigns.h"
#include "check.h"
#include "clock.h"
#include "coord.h"
#include "error.h"
#include "pg.h"
#include "registry.h"
#include "retrain.h"
#include "store.h"
#include "store_fixture.h"
#include "tokens.h"

#include <libpq-fe.h>
#include <sodium.h>

#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define POLL_MS 200
/* How long past POLL_MS a follower may take to load a model on a loaded
 * shared machine before the test calls it a failure. */
#define LOAD_SLACK_MS 3000
#define SCHEDULE_INTERVAL_S 2
/* PostgreSQL: the learners' poll while the notification alone must carry
 * an activation to the other server. */
#define NOTIFY_ONLY_POLL_MS 60000
#define PATH_MAX_ 512

static void sleep_ms(int ms)
{
    struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
}

static lp_store *open_store(const char *path)
{
    char err[256] = "";
    lp_store_opts so = {.path = path, .sync_full = 0, .read_conns = 2};
    lp_store *s = NULL;
    if (lp_store_open(&so, &s, err, sizeof err) != LP_OK)
        fprintf(stderr, "store: %s\n", err);
    return s;
}

/* A request the learner can replay: a plain dense L-BFGS fit. */
static lp_train_request replayable_request(void)
{
    lp_train_request req;
    memset(&req, 0, sizeof req);
    lp_loss_spec_init(&req.loss, LP_LOSS_DPO);
    lp_fit_opts_init(&req.fit, LP_OPT_LBFGS);
    lp_feat_spec_init(&req.text);
    req.features = LP_FEATURES_DENSE;
    req.beta = 1.0;
    req.threads = 1;
    return req;
}

/* A queued run record, as a server records one. */
static lp_run run_record(lp_store *s, const char *trigger)
{
    lp_train_request req = replayable_request();
    lp_run run = {0};
    snprintf(run.trigger, sizeof run.trigger, "%s", trigger);
    lp_train_settings_from_request(&req, &run.settings);
    CHECK_INT(lp_registry_run_create(s, &run), LP_OK);
    return run;
}

/* ---- a holder in another process ---- */

/* The child: opens the database, takes the lock, records a queued run,
 * reports, and waits to be killed. */
static void child_holder(int from_parent, int to_parent)
{
    char path[PATH_MAX_] = "";
    ssize_t n = read(from_parent, path, sizeof path - 1);
    lp_store *s = n > 0 ? open_store(path) : NULL;
    char rc = s != NULL && lp_coord_train_lock_try(s) == LP_OK ? 'L' : 'x';
    if (rc == 'L')
        run_record(s, "manual"); /* the run its death leaves unfinished */
    if (write(to_parent, &rc, 1) != 1)
        _exit(1);
    for (;;)
        pause();
}

typedef struct holder {
    pid_t pid;
    int in, out;
} holder;

/* Forks a holder before this process starts any thread. */
static holder fork_holder(void)
{
    holder h = {-1, -1, -1};
    int down[2], up[2];
    if (pipe(down) != 0 || pipe(up) != 0)
        return h;
    h.pid = fork();
    if (h.pid == 0) {
        close(down[1]);
        close(up[0]);
        child_holder(down[0], up[1]);
    }
    close(down[0]);
    close(up[1]);
    h.in = down[1];
    h.out = up[0];
    return h;
}

/* Tries the lock on s for up to ms: LP_OK once taken, else the last code. */
static int lock_within(lp_store *s, int ms, int *waited)
{
    int rc = lp_coord_train_lock_try(s);
    for (*waited = 0; rc != LP_OK && *waited < ms; *waited += 5) {
        sleep_ms(5);
        rc = lp_coord_train_lock_try(s);
    }
    return rc;
}

/* PostgreSQL: ends the session that holds the training lock, as a server
 * whose host is lost has it ended (the keepalives unanswered). */
static void end_lock_session(const char *uri)
{
    PGconn *pg = PQconnectdb(uri);
    PGresult *r = PQexec(pg, "SELECT count(pg_terminate_backend(pid)) FROM pg_locks "
                             "WHERE locktype = 'advisory' AND objsubid = 1 AND granted");
    CHECK(PQresultStatus(r) == PGRES_TUPLES_OK && strcmp(PQgetvalue(r, 0, 0), "1") == 0);
    PQclear(r);
    PQfinish(pg);
}

/* The lock between two stores of this process, and a holder that dies. */
static void test_lock(lp_store *a, lp_store *b, const char *path, holder *h, int pg)
{
    CHECK_INT(lp_coord_train_lock_held(a), 0);
    CHECK_INT(lp_coord_train_lock_try(a), LP_OK);
    CHECK_INT(lp_coord_train_lock_try(a), LP_OK); /* already held: still held */
    CHECK_ERR(lp_coord_train_lock_try(b), LP_ERETRAIN_IN_PROGRESS);
    CHECK_INT(lp_coord_train_lock_held(a), 1);
    CHECK_INT(lp_coord_train_lock_held(b), 0);
    lp_coord_train_lock_release(a);
    CHECK_INT(lp_coord_train_lock_held(a), 0);
    CHECK_INT(lp_coord_train_lock_try(b), LP_OK);
    CHECK_ERR(lp_coord_train_lock_try(a), LP_ERETRAIN_IN_PROGRESS);
    lp_coord_train_lock_release(b);

    int waited = 0;
    if (pg) { /* a holder whose session ended knows it, and holds nothing */
        CHECK_INT(lp_coord_train_lock_try(a), LP_OK);
        end_lock_session(path);
        CHECK_INT(lock_within(b, 5000, &waited), LP_OK);
        CHECK_INT(lp_coord_train_lock_held(a), 0);
        CHECK_ERR(lp_coord_train_lock_try(a), LP_ERETRAIN_IN_PROGRESS); /* a new session */
        lp_coord_train_lock_release(b);
        CHECK_INT(lp_coord_train_lock_try(a), LP_OK);
        lp_coord_train_lock_release(a);
    }

    /* a holder in another process, killed: the lock is free */
    CHECK(h->pid > 0);
    if (h->pid <= 0)
        return;
    char got = 0;
    CHECK(write(h->in, path, strlen(path)) == (ssize_t)strlen(path));
    CHECK_INT(read(h->out, &got, 1), 1);
    CHECK_INT(got, 'L');
    CHECK_ERR(lp_coord_train_lock_try(a), LP_ERETRAIN_IN_PROGRESS);
    CHECK_ERR(lp_coord_train_lock_try(b), LP_ERETRAIN_IN_PROGRESS);
    kill(h->pid, SIGKILL);
    int status = 0;
    CHECK_INT(waitpid(h->pid, &status, 0), h->pid);
    CHECK(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL);
    h->pid = -1;
    /* SQLite: the kernel drops the flock with the process; PostgreSQL: the
     * server sees the closed socket and ends the session */
    CHECK_INT(lock_within(a, pg ? 5000 : 0, &waited), LP_OK);
    printf("%s: the killed holder's lock taken %d ms after its death\n",
           pg ? "postgresql" : "sqlite", waited);
    lp_coord_train_lock_release(a);
}

/* ---- one trainer at a time ---- */

static lp_run wait_final(lp_learner *l, int64_t id)
{
    lp_run r = {0};
    for (int waited = 0; waited < 60000; waited += 10) {
        if (lp_learner_run_get(l, id, &r) != LP_OK || lp_run_status_final(r.status))
            break;
        sleep_ms(10);
    }
    CHECK(lp_run_status_final(r.status));
    return r;
}

/* A retrain on B while A holds the lock is refused; the dead holder's run
 * is marked failed by the next holder. */
static void test_one_trainer(lp_store *a, lp_learner *lb, int64_t dead_run)
{
    lp_train_request req = replayable_request();
    lp_run run;
    CHECK_INT(lp_coord_train_lock_try(a), LP_OK);
    CHECK_ERR(lp_learner_start(lb, &req, "manual", &run), LP_ERETRAIN_IN_PROGRESS);
    /* a run A trains cannot be cancelled through B */
    lp_run elsewhere = run_record(a, "manual"), got;
    CHECK_ERR(lp_learner_cancel(lb, elsewhere.id, &got), LP_ERETRAIN_IN_PROGRESS);
    lp_coord_train_lock_release(a);
    CHECK_INT(lp_learner_start(lb, &req, "manual", &run), LP_OK);
    /* B holds the lock from queuing until the run is final */
    lp_learner_stats st;
    lp_learner_stats_get(lb, &st);
    if (st.running != 0)
        CHECK_ERR(lp_coord_train_lock_try(a), LP_ERETRAIN_IN_PROGRESS);
    lp_run fin = wait_final(lb, run.id);
    CHECK_INT(fin.status, LP_RUN_FAILED); /* no labels to train on */
    for (int waited = 0; waited < 5000 && lp_coord_train_lock_try(a) != LP_OK; waited += 10)
        sleep_ms(10);
    CHECK_INT(lp_coord_train_lock_held(a), 1);
    lp_coord_train_lock_release(a);

    lp_run dead;
    CHECK_INT(lp_registry_run_get(a, dead_run, &dead), LP_OK);
    CHECK_INT(dead.status, LP_RUN_FAILED);
    CHECK(strstr(dead.message, "interrupted") != NULL);
    CHECK_INT(lp_registry_run_get(a, elsewhere.id, &dead), LP_OK);
    CHECK_INT(dead.status, LP_RUN_FAILED); /* A "died" holding it */
    CHECK_ERR(lp_learner_cancel(lb, elsewhere.id, &got), LP_ERUN_FINISHED);
}

/* What the scheduler reads: the newest run's start, the newest known
 * cut-off (a newer run without one does not hide it). */
static void test_runs_read(lp_store *a, lp_store *b)
{
    lp_run with_cutoff = run_record(a, "labels");
    with_cutoff.status = LP_RUN_SUCCEEDED;
    with_cutoff.cutoff = 42;
    with_cutoff.started_ms = with_cutoff.created_ms + 5;
    with_cutoff.finished_ms = with_cutoff.created_ms + 9;
    CHECK_INT(lp_registry_run_update(a, &with_cutoff), LP_OK);
    lp_coord_runs r;
    CHECK_INT(lp_coord_runs_get(b, &r), LP_OK);
    CHECK_INT(r.last_cutoff, 42);
    CHECK_INT(r.last_start_ms, with_cutoff.started_ms);
    lp_run newer = run_record(a, "manual"); /* queued: not started, no cut-off */
    CHECK_INT(lp_coord_runs_get(b, &r), LP_OK);
    CHECK_INT(r.last_cutoff, 42);
    CHECK_INT(r.last_start_ms, newer.created_ms);
    newer.status = LP_RUN_CANCELLED;
    newer.error = LP_ECANCELLED;
    CHECK_INT(lp_registry_run_update(a, &newer), LP_OK);
}

/* ---- the served model follows the registry ---- */

static const char MODEL_TEXT[] =
    "{\"format\":\"ldpref-model\",\"format_version\":1,\"loss\":\"dpo\",\"link\":\"kl\","
    "\"beta\":1.0,\"features\":{\"kind\":\"dense\",\"dim\":2},\"theta\":[1.0,-1.0]}";

static int64_t stored_model(lp_store *s, int64_t run)
{
    lp_model_record rec = {.run = run, .dim = 2, .summary = "{}", .model = (char *)MODEL_TEXT};
    snprintf(rec.loss, sizeof rec.loss, "dpo");
    snprintf(rec.features, sizeof rec.features, "dense");
    CHECK_INT(lp_registry_model_add(s, &rec, 0), LP_OK);
    return rec.version;
}

static int64_t served_version(lp_learner *l)
{
    lp_served *sv = lp_learner_served(l);
    int64_t v = sv ? lp_served_version(sv) : 0;
    lp_served_unref(sv);
    return v;
}

/* Activates version through `by` and returns how long (ms) `other` took to
 * serve it, or -1 if it did not within POLL_MS + LOAD_SLACK_MS. */
static int64_t activate_and_follow(lp_learner *by, lp_learner *other, int64_t version)
{
    CHECK_INT(lp_learner_activate(by, version), LP_OK);
    int64_t t0 = lp_mono_ns();
    CHECK_INT(served_version(by), version); /* its own activation: at once */
    for (;;) {
        int64_t ms = (lp_mono_ns() - t0) / 1000000;
        if (served_version(other) == version)
            return ms;
        if (ms > POLL_MS + LOAD_SLACK_MS)
            return -1;
        sleep_ms(2);
    }
}

static void test_follow(lp_store *a, lp_learner *la, lp_learner *lb)
{
    lp_run run = run_record(a, "manual");
    int64_t v1 = stored_model(a, run.id), v2 = stored_model(a, run.id);
    CHECK_INT(served_version(la), 0);
    CHECK_INT(served_version(lb), 0);
    int64_t d1 = activate_and_follow(la, lb, v1); /* A activates, B follows */
    int64_t d2 = activate_and_follow(lb, la, v2); /* B activates, A follows */
    int64_t d3 = activate_and_follow(la, lb, v1); /* a rollback through A */
    printf("follow delays: %lld, %lld, %lld ms\n", (long long)d1, (long long)d2, (long long)d3);
    CHECK(d1 >= 0);
    CHECK(d2 >= 0);
    CHECK(d3 >= 0);
    CHECK_INT(served_version(la), v1);
    CHECK_INT(served_version(lb), v1);
}

/* ---- caches: revocations reach every server ---- */

/* Polls until refused() says 1: the ms it took, or -1 past limit_ms. */
static int64_t ms_until(int (*refused)(lp_store *, const void *), lp_store *s, const void *arg,
                        int limit_ms)
{
    int64_t t0 = lp_mono_ns();
    for (;;) {
        int64_t ms = (lp_mono_ns() - t0) / 1000000;
        if (refused(s, arg))
            return ms;
        if (ms > limit_ms)
            return -1;
        sleep_ms(2);
    }
}

static int token_refused(lp_store *s, const void *hash)
{
    int64_t id;
    unsigned scopes;
    return lp_store_op_token_match(s, hash, &id, &scopes) == LP_EUNAUTHORIZED;
}

static int token_accepted(lp_store *s, const void *hash)
{
    return !token_refused(s, hash);
}

static int key_revoked(lp_store *s, const void *key)
{
    lp_annotator a;
    return lp_store_annotator_by_key(s, key, &a) == LP_OK && a.revoked;
}

/* A token and an annotator key revoked through a are refused by b within
 * the watcher's period (plus one read); on PostgreSQL b was told. */
static void test_caches(lp_store *a, lp_store *b, int pg)
{
    const int limit = LP_COORD_WATCH_MS + LOAD_SLACK_MS;
    uint8_t hash[LP_HASH_BYTES], key[LP_KEY_BYTES], etoken[LP_HASH_BYTES];
    randombytes_buf(hash, sizeof hash);
    randombytes_buf(key, sizeof key);
    randombytes_buf(etoken, sizeof etoken);
    lp_op_token row;
    CHECK_INT(lp_store_op_token_add(a, hash, "cluster", 1u, lp_now_ms(), &row), LP_OK);
    CHECK(ms_until(token_accepted, b, hash, limit) >= 0); /* b reads it when it misses */
    lp_campaign c;
    lp_annotator ann, seen;
    CHECK_INT(lp_store_campaign_by_name(a, "default", &c), LP_OK);
    CHECK_INT(lp_store_enroll_tokens_add(a, c.id, etoken, 1), LP_OK);
    CHECK_INT(lp_store_enroll(a, key, etoken, &ann), LP_OK);
    CHECK_INT(lp_store_annotator_by_key(b, key, &seen), LP_OK); /* now in b's cache */
    CHECK_INT(seen.revoked, 0);

    lp_coord_watch_stats before, after;
    lp_coord_watch_stats_get(b, &before);
    CHECK_INT(lp_store_op_token_revoke(a, row.id, 0, lp_now_ms(), NULL), LP_OK);
    int64_t token_ms = ms_until(token_refused, b, hash, limit);
    unsigned scopes;
    CHECK_ERR(lp_store_op_token_live(b, row.id, &scopes), LP_EUNAUTHORIZED);
    CHECK_INT(lp_store_revoke(a, key), LP_OK);
    int64_t key_ms = ms_until(key_revoked, b, key, limit);
    lp_coord_watch_stats_get(b, &after);
    printf("%s: revocation refused by the other store after: token %lld ms, key %lld ms "
           "(watcher period %d ms)\n",
           pg ? "postgresql" : "sqlite", (long long)token_ms, (long long)key_ms, LP_COORD_WATCH_MS);
    CHECK(token_ms >= 0);
    CHECK(key_ms >= 0);
    CHECK(after.token_drops > before.token_drops);
    CHECK(after.key_drops > before.key_drops);
    if (pg) /* both revocations were announced to b's watcher */
        CHECK(after.revocations >= before.revocations + 2);
    else
        CHECK_INT(after.revocations, 0);
}

/* ---- the schedule fires once ---- */

/* Scheduled ("interval") runs that started (or were created) before
 * `before` (Unix ms); *first gets the start of the oldest of them. */
static size_t scheduled_runs(lp_store *s, int64_t before, int64_t *first)
{
    lp_run *runs = NULL;
    size_t n = 0, count = 0;
    CHECK_INT(lp_registry_run_list(s, 1000, &runs, &n), LP_OK);
    for (size_t i = 0; i < n; i++) { /* newest first */
        int64_t started = runs[i].started_ms ? runs[i].started_ms : runs[i].created_ms;
        if (strcmp(runs[i].trigger, "interval") == 0 && started < before) {
            count++;
            *first = started;
        }
    }
    free(runs);
    return count;
}

/* Every learner checks the schedule every POLL_MS. The next firing is due
 * SCHEDULE_INTERVAL_S after the first scheduled run started: any other
 * scheduled run that started before then is a firing per server. */
static void test_schedule_once(lp_store *a, lp_learner **l, size_t n)
{
    lp_train_request req = replayable_request();
    lp_schedule sc = {.interval_s = SCHEDULE_INTERVAL_S, .has_settings = 1};
    lp_train_settings_from_request(&req, &sc.settings);
    CHECK_INT(lp_registry_schedule_set(a, &sc), LP_OK);
    for (size_t i = 0; i < n; i++)
        lp_learner_schedule_changed(l[i]);
    int64_t first = 0;
    for (int waited = 0; waited < 30000 && scheduled_runs(a, INT64_MAX, &first) == 0; waited += 20)
        sleep_ms(20);
    CHECK_INT(scheduled_runs(a, INT64_MAX, &first), 1);
    int64_t next_due = first + SCHEDULE_INTERVAL_S * 1000;
    while (lp_now_ms() < next_due) /* every learner has ticked several times */
        sleep_ms(20);
    CHECK_INT(scheduled_runs(a, next_due, &first), 1);
    lp_schedule off = {.has_settings = 1, .settings = sc.settings};
    CHECK_INT(lp_registry_schedule_set(a, &off), LP_OK);
}

/* ---- the suite, on one database ---- */

static lp_learner *learner(lp_store *s, int poll_ms)
{
    char err[256] = "";
    lp_learner_opts lo = {.threads = 1, .scheduler = 1, .poll_ms = poll_ms};
    lp_learner *l = NULL;
    CHECK_INT(lp_learner_new(s, &lo, &l, err, sizeof err), LP_OK);
    if (l == NULL)
        fprintf(stderr, "learner: %s\n", err);
    return l;
}

static void suite(const char *path, holder *h, int pg)
{
    lp_store *st[3] = {open_store(path), open_store(path), open_store(path)};
    lp_store *a = st[0], *b = st[1];
    CHECK(st[0] != NULL && st[1] != NULL && st[2] != NULL);
    if (st[0] == NULL || st[1] == NULL || st[2] == NULL)
        goto out;
    test_lock(a, b, path, h, pg);
    /* the holder's queued run: the newest run now */
    lp_run *runs = NULL;
    size_t n = 0;
    CHECK_INT(lp_registry_run_list(a, 1, &runs, &n), LP_OK);
    int64_t dead_run = n == 1 && runs[0].status == LP_RUN_QUEUED ? runs[0].id : 0;
    CHECK(dead_run != 0);
    free(runs);

    /* on PostgreSQL the activation's notification, not the poll, must
     * carry an activation to the other learner */
    lp_learner *la = learner(a, pg ? NOTIFY_ONLY_POLL_MS : POLL_MS);
    lp_learner *lb = learner(b, pg ? NOTIFY_ONLY_POLL_MS : POLL_MS);
    if (la != NULL && lb != NULL) {
        test_one_trainer(a, lb, dead_run);
        test_runs_read(a, b);
        test_follow(a, la, lb);
    }
    lp_learner_free(la);
    lp_learner_free(lb);

    test_caches(a, b, pg);

    lp_learner *l[3] = {learner(st[0], POLL_MS), learner(st[1], POLL_MS), learner(st[2], POLL_MS)};
    if (l[0] != NULL && l[1] != NULL && l[2] != NULL)
        test_schedule_once(a, l, 3);
    for (size_t i = 0; i < 3; i++)
        lp_learner_free(l[i]);
out:
    for (size_t i = 0; i < 3; i++)
        lp_store_close(st[i]);
}

int main(void)
{
    holder on_file = fork_holder(), on_pg = fork_holder(); /* before any thread */
    store_fixture fx;
    if (store_fixture_open(&fx, "test-cluster", 2) != LP_OK)
        return 1;
    char path[PATH_MAX_];
    snprintf(path, sizeof path, "%s", fx.path);
    lp_store_close(fx.store); /* the suite opens its own stores */
    fx.store = NULL;
    printf("-- SQLite: %s\n", path);
    suite(path, &on_file, 0);
    store_fixture_close(&fx);

    pg_cluster pgc;
    if (pg_cluster_start_for(&pgc, "test_cluster (PostgreSQL)")) {
        char uri[PATH_MAX_];
        CHECK_INT(pg_cluster_create_db(&pgc, "cluster", uri, sizeof uri), 0);
        printf("-- PostgreSQL: %s\n", uri);
        suite(uri, &on_pg, 1);
        pg_cluster_stop(&pgc);
    }
    if (on_pg.pid > 0) { /* not used: PostgreSQL is not installed */
        kill(on_pg.pid, SIGKILL);
        waitpid(on_pg.pid, NULL, 0);
    }
    return check_summary();
}
