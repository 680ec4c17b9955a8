/*
 * test_cluster.c — several servers on one database (server/db/coord.h,
 * docs/server.md "Several servers on one database"): two stores opened on
 * one SQLite file in this process, each with its own learner, and a third
 * holder in a child process that is killed.
 *
 * Checks that one store at a time holds the training lock, that a holder's
 * death frees it at once and the next holder marks the dead holder's run
 * failed, that a retrain asked of one server while the other holds the lock
 * is refused with retrain_in_progress (and so is cancelling a run the other
 * server trains), that a model activated (or rolled
 * back) through one learner is served by the other within the poll period
 * plus the time to load it, that the scheduler reads the newest run's start
 * and cut-off whichever store recorded them, and that the stored schedule
 * fires once across both learners, not once per learner.
 */
#include "check.h"
#include "clock.h"
#include "coord.h"
#include "error.h"
#include "registry.h"
#include "retrain.h"
#include "store.h"
#include "store_fixture.h"

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

static void sleep_ms(int ms)
{
    struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
}

static lp_store *open_second(const char *path)
{
    char err[256] = "";
    lp_store_opts so = {.path = path, .sync_full = 0, .read_conns = 2};
    lp_store *s = NULL;
    if (lp_store_open(&so, &s, err, sizeof err) != LP_OK)
        fprintf(stderr, "second store: %s\n", err);
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
    char path[300] = "";
    ssize_t n = read(from_parent, path, sizeof path - 1);
    lp_store *s = n > 0 ? open_second(path) : NULL;
    char rc = s != NULL && lp_coord_train_lock_try(s) == LP_OK ? 'L' : 'x';
    if (rc == 'L')
        run_record(s, "manual"); /* the run its death leaves unfinished */
    if (write(to_parent, &rc, 1) != 1)
        _exit(1);
    for (;;)
        pause();
}

static pid_t holder_pid = -1;
static int holder_in = -1, holder_out = -1;

/* Forks the holder before this process starts any thread. */
static void fork_holder(void)
{
    int down[2], up[2];
    if (pipe(down) != 0 || pipe(up) != 0)
        return;
    holder_pid = fork();
    if (holder_pid == 0) {
        close(down[1]);
        close(up[0]);
        child_holder(down[0], up[1]);
    }
    close(down[0]);
    close(up[1]);
    holder_in = down[1];
    holder_out = up[0];
}

/* The lock between two stores of this process, and a holder that dies. */
static void test_lock(lp_store *a, lp_store *b, const char *path)
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

    /* a holder in another process, killed: the lock is free at once */
    CHECK(holder_pid > 0);
    if (holder_pid <= 0)
        return;
    char got = 0;
    CHECK(write(holder_in, path, strlen(path)) == (ssize_t)strlen(path));
    CHECK_INT(read(holder_out, &got, 1), 1);
    CHECK_INT(got, 'L');
    CHECK_ERR(lp_coord_train_lock_try(a), LP_ERETRAIN_IN_PROGRESS);
    CHECK_ERR(lp_coord_train_lock_try(b), LP_ERETRAIN_IN_PROGRESS);
    kill(holder_pid, SIGKILL);
    int status = 0;
    CHECK_INT(waitpid(holder_pid, &status, 0), holder_pid);
    CHECK(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL);
    CHECK_INT(lp_coord_train_lock_try(a), LP_OK);
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
    printf("follow delays (poll %d ms): %lld, %lld, %lld ms\n", POLL_MS, (long long)d1,
           (long long)d2, (long long)d3);
    CHECK(d1 >= 0);
    CHECK(d2 >= 0);
    CHECK(d3 >= 0);
    CHECK_INT(served_version(la), v1);
    CHECK_INT(served_version(lb), v1);
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

/* Both learners check the schedule every POLL_MS. The next firing is due
 * SCHEDULE_INTERVAL_S after the first scheduled run started: any other
 * scheduled run that started before then is a firing per server. */
static void test_schedule_once(lp_store *a, lp_learner *la, lp_learner *lb)
{
    lp_train_request req = replayable_request();
    lp_schedule sc = {.interval_s = SCHEDULE_INTERVAL_S, .has_settings = 1};
    lp_train_settings_from_request(&req, &sc.settings);
    CHECK_INT(lp_registry_schedule_set(a, &sc), LP_OK);
    lp_learner_schedule_changed(la);
    lp_learner_schedule_changed(lb);
    int64_t first = 0;
    for (int waited = 0; waited < 30000 && scheduled_runs(a, INT64_MAX, &first) == 0; waited += 20)
        sleep_ms(20);
    CHECK_INT(scheduled_runs(a, INT64_MAX, &first), 1);
    int64_t next_due = first + SCHEDULE_INTERVAL_S * 1000;
    while (lp_now_ms() < next_due) /* both learners have ticked several times */
        sleep_ms(20);
    CHECK_INT(scheduled_runs(a, next_due, &first), 1);
    lp_schedule off = {.has_settings = 1, .settings = sc.settings};
    CHECK_INT(lp_registry_schedule_set(a, &off), LP_OK);
}

int main(void)
{
    fork_holder(); /* before any thread */
    store_fixture fx;
    if (store_fixture_open(&fx, "test-cluster", 2) != LP_OK)
        return 1;
    lp_store *a = fx.store, *b = open_second(fx.path);
    CHECK(b != NULL);
    if (b != NULL) {
        test_lock(a, b, fx.path);
        /* the holder's queued run: the newest run now */
        lp_run *runs = NULL;
        size_t n = 0;
        CHECK_INT(lp_registry_run_list(a, 1, &runs, &n), LP_OK);
        int64_t dead_run = n == 1 && runs[0].status == LP_RUN_QUEUED ? runs[0].id : 0;
        CHECK(dead_run != 0);
        free(runs);

        char err[256];
        lp_learner_opts lo = {.threads = 1, .scheduler = 1, .poll_ms = POLL_MS};
        lp_learner *la = NULL, *lb = NULL;
        CHECK_INT(lp_learner_new(a, &lo, &la, err, sizeof err), LP_OK);
        CHECK_INT(lp_learner_new(b, &lo, &lb, err, sizeof err), LP_OK);
        if (la != NULL && lb != NULL) {
            test_one_trainer(a, lb, dead_run);
            test_runs_read(a, b);
            test_follow(a, la, lb);
            test_schedule_once(a, la, lb);
        }
        lp_learner_free(la);
        lp_learner_free(lb);
    }
    lp_store_close(b);
    store_fixture_close(&fx);
    return check_summary();
}
