/*
 * e2e_cluster.c — two real ldpref-server processes on one database (a
 * SQLite file, or PostgreSQL under LDPREF_TEST_DB=postgresql)
 * (docs/server.md, "Several servers on one database"), driven through the
 * real client library: tasks and labels go in through the first server,
 * the operator works on both.
 *
 * Checks that a retrain is refused on both servers with retrain_in_progress
 * while the database's training lock (the documented file beside it, or
 * PostgreSQL's documented advisory lock when the harness runs the servers
 * on PostgreSQL) is held by someone else; that a model trained and activated on one server is
 * served by the other within the poll period (1 s) plus a load allowance,
 * in both directions and for a rollback; that a stored schedule fires once
 * across both servers, not once per server; and that when a server is
 * killed while it trains, the other trains at once and records the killed
 * run as failed ("interrupted"); and that an operator token and an
 * annotator key revoked through one server are refused by the other within
 * the servers' watcher period (1 s) plus an allowance.
 */
#include "annotator_client.h"
#include "check.h"
#include "clock.h"
#include "error.h"
#include "ldpref.h"
#include "operator_client.h"
#include "server_proc.h"

#include <fcntl.h>
#include <jansson.h>
#include <libpq-fe.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <time.h>
#include <unistd.h>

#define TASKS 80
#define POLL_MS 1000           /* the servers' active-version poll (docs/server.md) */
#define LOAD_ALLOWANCE_MS 4000 /* loading a model on a loaded shared machine */
#define INTERVAL_S 3

static server_proc one, two;
static ldpref_client *op_one, *op_two;

/* milliseconds on the monotonic clock */
static int64_t now_ms(void)
{
    return lp_mono_ns() / 1000000;
}

static void nap_ms(int ms)
{
    struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
}

static json_t *parsed(char *text)
{
    json_t *j = text ? json_loads(text, 0, NULL) : NULL;
    free(text);
    return j;
}

/* ---- a labelled campaign (through the first server) ---- */

static void label_campaign(void)
{
    char path[512];
    snprintf(path, sizeof path, "%s/cluster-tasks.jsonl", one.dir);
    FILE *f = fopen(path, "w");
    CHECK(f != NULL);
    if (f == NULL)
        return;
    for (int k = 0; k < TASKS; k++) /* response b is longer on odd tasks */
        fprintf(f,
                "{\"id\":\"c%d\",\"prompt\":\"prompt %d\",\"responses\":[\"short %d\","
                "\"longer answer %d\"],\"features\":[[%d,1],[%d,0]]}\n",
                k, k, k, k, k % 2, 1 - k % 2);
    fclose(f);
    CHECK_ERR(ldpref_admin_tasks_load(op_one, path, NULL, NULL), LP_OK);
    ldpref_client *ann = annotator_enrolled(&one, op_one, NULL, "clusterann", 1.0, 1000.0);
    if (ann == NULL)
        return;
    ldpref_task *tasks = NULL;
    size_t n = 0;
    CHECK_ERR(ldpref_next_tasks(ann, TASKS, &tasks, &n), LP_OK);
    CHECK_INT(n, TASKS);
    ldpref_batch_item *items = calloc(n ? n : 1, sizeof *items);
    for (size_t i = 0; items != NULL && i < n; i++) {
        items[i].task = &tasks[i];
        items[i].choice = strstr(tasks[i].b, "longer") ? LDPREF_CHOICE_B : LDPREF_CHOICE_A;
    }
    if (items != NULL)
        CHECK_ERR(ldpref_answer_batch(ann, items, n), LP_OK);
    free(items);
    ldpref_tasks_free(tasks, n);
    ldpref_client_close(ann);
}

/* ---- retrains and the served model ---- */

/* A retrain through op that succeeds: its model version (0 on failure). */
static int64_t trained_version(ldpref_client *op, const char *body)
{
    char *out = NULL;
    CHECK_ERR(ldpref_admin_retrain(op, body, &out), LP_OK);
    json_t *run = parsed(out);
    int64_t id = json_integer_value(json_object_get(run, "run"));
    json_decref(run);
    out = NULL;
    CHECK_ERR(ldpref_admin_run_wait(op, id, 20, NULL, NULL, &out), LP_OK);
    run = parsed(out);
    int64_t version = json_integer_value(json_object_get(run, "model_version"));
    json_decref(run);
    CHECK(version > 0);
    return version;
}

static int64_t served_by(ldpref_client *op)
{
    char *out = NULL;
    if (ldpref_admin_models(op, &out) != LDPREF_OK)
        return -1;
    json_t *j = parsed(out);
    int64_t v = json_integer_value(json_object_get(j, "active_version"));
    json_decref(j);
    return v;
}

/* Milliseconds until op serves version, or -1 past POLL_MS + LOAD_ALLOWANCE_MS. */
static int64_t follow_delay(ldpref_client *op, int64_t version, int64_t since)
{
    for (;;) {
        int64_t waited = now_ms() - since;
        if (served_by(op) == version)
            return waited;
        if (waited > POLL_MS + LOAD_ALLOWANCE_MS)
            return -1;
        nap_ms(10);
    }
}

static void test_activation_followed(void)
{
    int64_t v1 = trained_version(op_two, "{\"seed\": 1, \"l2\": 0.01}");
    int64_t t1 = now_ms();
    CHECK_INT(served_by(op_two), v1); /* its own model: at once */
    int64_t d1 = follow_delay(op_one, v1, t1);
    int64_t v2 = trained_version(op_one, "{\"seed\": 2, \"l2\": 0.01}");
    int64_t t2 = now_ms();
    CHECK_INT(served_by(op_one), v2);
    int64_t d2 = follow_delay(op_two, v2, t2);
    CHECK_ERR(ldpref_admin_model_activate(op_two, v1, NULL), LP_OK); /* roll back on two */
    int64_t t3 = now_ms();
    CHECK_INT(served_by(op_two), v1);
    int64_t d3 = follow_delay(op_one, v1, t3);
    printf("activation seen by the other server after %lld, %lld, %lld ms (poll %d ms)\n",
           (long long)d1, (long long)d2, (long long)d3, POLL_MS);
    CHECK(d1 >= 0);
    CHECK(d2 >= 0);
    CHECK(d3 >= 0);
}

/* ---- revocations reach every server ---- */

#define WATCH_MS 1000 /* the servers' watcher period (server/db/coord.h) */

/* Milliseconds until call(c) returns want, or -1 past WATCH_MS +
 * LOAD_ALLOWANCE_MS. */
static int64_t until_result(int (*call)(ldpref_client *), ldpref_client *c, int want)
{
    int64_t since = now_ms();
    for (;;) {
        int64_t waited = now_ms() - since;
        if (call(c) == want)
            return waited;
        if (waited > WATCH_MS + LOAD_ALLOWANCE_MS)
            return -1;
        nap_ms(5);
    }
}

static int models_call(ldpref_client *c)
{
    char *out = NULL;
    int rc = ldpref_admin_models(c, &out);
    free(out);
    return rc;
}

/* /v1/progress trusts the server's key cache alone (tasks and labels
 * re-check revocation in the database) */
static int progress_call(ldpref_client *c)
{
    ldpref_progress p;
    return ldpref_progress_get(c, &p);
}

static void test_revocations_reach_both(void)
{
    char *out = NULL;
    CHECK_ERR(ldpref_admin_token_create(op_one, "cluster", "admin", &out), LP_OK);
    json_t *tok = parsed(out);
    const char *id = json_string_value(json_object_get(tok, "id"));
    const char *secret = json_string_value(json_object_get(tok, "token"));
    CHECK(id != NULL && secret != NULL);
    if (id == NULL || secret == NULL) {
        json_decref(tok);
        return;
    }
    server_proc with_new = two; /* server two, the new token */
    snprintf(with_new.token, sizeof with_new.token, "%s", secret);
    ldpref_client *op_new = operator_client_open(&with_new);
    CHECK(until_result(models_call, op_new, LDPREF_OK) >= 0); /* created on one, works on two */
    out = NULL;
    CHECK_ERR(ldpref_admin_token_revoke(op_one, id, &out), LP_OK);
    free(out);
    int64_t token_ms = until_result(models_call, op_new, LDPREF_EUNAUTHORIZED);
    ldpref_client_close(op_new);
    json_decref(tok);

    ldpref_client *ann = annotator_enrolled(&two, op_two, NULL, "revokedann", 1.0, 1000.0);
    CHECK(ann != NULL);
    if (ann == NULL)
        return;
    CHECK_ERR(progress_call(ann), LP_OK); /* its key, found live, is in two's cache now */
    char key[LDPREF_KEY_B64_SIZE];
    CHECK_ERR(ldpref_public_key(ann, key), LP_OK);
    CHECK_ERR(ldpref_admin_revoke(op_one, key), LP_OK);
    int64_t key_ms = until_result(progress_call, ann, LDPREF_EREVOKED_KEY);
    ldpref_client_close(ann);
    printf(
        "revoked through one, refused by two after: token %lld ms, key %lld ms (watcher %d ms)\n",
        (long long)token_ms, (long long)key_ms, WATCH_MS);
    CHECK(token_ms >= 0);
    CHECK(key_ms >= 0);
}

/* ---- the training lock ---- */

/* Takes the database's training lock as a server would (docs/server.md):
 * the file beside a SQLite database, or PostgreSQL's advisory lock on a
 * session of this test. 1 when held; release with lock_drop. */
struct held_lock {
    int fd;
    PGconn *pg;
};

static int lock_take(struct held_lock *h)
{
    h->fd = -1;
    h->pg = NULL;
    if (strncmp(one.db, "postgresql://", 13) == 0) {
        h->pg = PQconnectdb(one.db);
        PGresult *r = PQexec(h->pg, "SELECT pg_try_advisory_lock(7234315233945600002)");
        int ok = PQresultStatus(r) == PGRES_TUPLES_OK && strcmp(PQgetvalue(r, 0, 0), "t") == 0;
        PQclear(r);
        return ok;
    }
    char path[512];
    snprintf(path, sizeof path, "%s/.ldpref.db.train-lock", one.dir);
    h->fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0600);
    return h->fd >= 0 && flock(h->fd, LOCK_EX | LOCK_NB) == 0;
}

static void lock_drop(struct held_lock *h)
{
    if (h->fd >= 0)
        close(h->fd);
    PQfinish(h->pg); /* the session ends: the advisory lock goes with it */
}

static void test_lock_refuses(void)
{
    struct held_lock h;
    CHECK(lock_take(&h)); /* free: nothing trains */
    char *out = NULL;
    CHECK_ERR(ldpref_admin_retrain(op_one, "{\"l2\": 0.01}", &out), LP_ERETRAIN_IN_PROGRESS);
    free(out);
    out = NULL;
    CHECK_ERR(ldpref_admin_retrain(op_two, "{\"l2\": 0.01}", &out), LP_ERETRAIN_IN_PROGRESS);
    free(out);
    lock_drop(&h);
    trained_version(op_two, "{\"seed\": 4, \"l2\": 0.01, \"activate\": false}");
}

/* ---- the schedule ---- */

/* Runs the schedule started (or created) before `before` (Unix ms);
 * *first gets the start of the oldest of them. */
static int scheduled_runs(int64_t before, int64_t *first)
{
    char *out = NULL;
    if (ldpref_admin_runs(op_two, 1000, &out) != LDPREF_OK)
        return -1;
    json_t *j = parsed(out), *runs = json_object_get(j, "runs"), *r;
    size_t i;
    int n = 0;
    json_array_foreach(runs, i, r) /* newest first */
    {
        json_t *at = json_object_get(r, "started_at");
        int64_t started = json_is_integer(at)
                              ? json_integer_value(at)
                              : json_integer_value(json_object_get(r, "created_at"));
        if (strcmp(json_string_value(json_object_get(r, "trigger")), "interval") == 0 &&
            started < before) {
            n++;
            *first = started;
        }
    }
    json_decref(j);
    return n;
}

/* Both servers check the schedule every second. The next firing is due
 * INTERVAL_S after the first scheduled run started: any other scheduled run
 * that started before then is a firing per server. */
static void test_schedule_fires_once(void)
{
    char body[128];
    snprintf(body, sizeof body,
             "{\"interval_s\": %d, \"request\": {\"l2\": 0.01, \"activate\": false}}", INTERVAL_S);
    CHECK_ERR(ldpref_admin_schedule_set(op_one, body, NULL), LP_OK);
    int64_t first = 0, deadline = now_ms() + 30000;
    while (scheduled_runs(INT64_MAX, &first) == 0 && now_ms() < deadline)
        nap_ms(50);
    CHECK_INT(scheduled_runs(INT64_MAX, &first), 1);
    int64_t next_due = first + INTERVAL_S * 1000;
    while (lp_now_ms() < next_due) /* both servers have checked several times */
        nap_ms(50);
    CHECK_INT(scheduled_runs(next_due, &first), 1);
    CHECK_ERR(ldpref_admin_schedule_set(op_one, "{\"interval_s\": 0}", NULL), LP_OK);
    /* a firing due at next_due may have started: let every run end */
    int busy = 1;
    for (deadline = now_ms() + 60000; busy && now_ms() < deadline; nap_ms(50)) {
        char *out = NULL;
        busy = ldpref_admin_runs(op_one, 5, &out) != LDPREF_OK;
        json_t *j = parsed(out), *r;
        size_t i;
        json_array_foreach(json_object_get(j, "runs"), i, r)
        {
            const char *st = json_string_value(json_object_get(r, "status"));
            busy |= st == NULL ||
                    (strcmp(st, "succeeded") && strcmp(st, "failed") && strcmp(st, "cancelled"));
        }
        json_decref(j);
    }
    CHECK(!busy);
}

/* ---- a holder killed mid-run ---- */

static json_t *run_on(ldpref_client *op, int64_t id)
{
    char *out = NULL;
    return ldpref_admin_run_get(op, id, &out) == LDPREF_OK ? parsed(out) : parsed(NULL);
}

static const char *status_of(const json_t *run)
{
    const char *st = json_string_value(json_object_get(run, "status"));
    return st ? st : "";
}

/* The second server is killed (SIGKILL) while it trains: the first can
 * train at once, and its next run marks the killed one failed. */
static void test_holder_killed(void)
{
    char *out = NULL;
    CHECK_ERR(ldpref_admin_retrain(op_two,
                                   "{\"optimizer\": \"sgd\", \"epochs\": 1000, \"l2\": 0, "
                                   "\"features\": \"text\", \"text\": {\"dim\": 1048576}, "
                                   "\"activate\": false}",
                                   &out),
              LP_OK);
    json_t *run = parsed(out);
    int64_t id = json_integer_value(json_object_get(run, "run"));
    json_decref(run);
    int64_t deadline = now_ms() + 30000;
    int training = 0;
    while (!training && now_ms() < deadline) {
        run = run_on(op_two, id);
        training = strcmp(status_of(run), "training") == 0;
        json_decref(run);
        nap_ms(20);
    }
    CHECK(training);
    out = NULL;
    CHECK_ERR(ldpref_admin_retrain(op_one, "{\"l2\": 0.01}", &out), LP_ERETRAIN_IN_PROGRESS);
    free(out);
    server_kill(&two);
    /* SQLite: the kernel dropped the lock with the process; PostgreSQL:
     * the server ends the dead session once it reads the closed socket */
    struct held_lock h;
    int free_now = 0;
    for (deadline = now_ms() + 5000; !free_now && now_ms() < deadline; nap_ms(5)) {
        free_now = lock_take(&h);
        lock_drop(&h);
    }
    CHECK(free_now);
    trained_version(op_one, "{\"seed\": 5, \"l2\": 0.01, \"activate\": false}");
    run = run_on(op_one, id);
    CHECK_STR(status_of(run), "failed");
    const char *message =
        json_string_value(json_object_get(json_object_get(run, "error"), "message"));
    CHECK(message != NULL && strstr(message, "interrupted") != NULL);
    json_decref(run);
}

int main(void)
{
    const char *args[] = {"--train-threads", "1", NULL};
    if (server_start(&one, args) != 0 || server_prepare(&two) != 0) {
        check_record(0, __FILE__, __LINE__, "the first server starts");
        server_cleanup(&one);
        return check_summary();
    }
    snprintf(two.db, sizeof two.db, "%s", one.db); /* the same database */
    if (server_restart(&two, args) != 0) {
        check_record(0, __FILE__, __LINE__, "the second server starts on the same database");
    } else {
        snprintf(two.token, sizeof two.token, "%s", one.token);
        op_one = operator_client_open(&one);
        op_two = operator_client_open(&two);
        if (op_one != NULL && op_two != NULL) {
            label_campaign();
            test_lock_refuses();
            test_activation_followed();
            test_schedule_fires_once();
            test_revocations_reach_both();
            CHECK_INT(server_stop(&two), 0); /* a clean stop: the ASan build checks for leaks */
            CHECK_INT(server_restart(&two, args), 0);
            snprintf(two.token, sizeof two.token, "%s", one.token);
            ldpref_client_close(op_two);
            if ((op_two = operator_client_open(&two)) != NULL)
                test_holder_killed();
        }
        ldpref_client_close(op_one);
        ldpref_client_close(op_two);
    }
    CHECK_INT(server_stop(&one), 0);
    server_cleanup(&two);
    server_cleanup(&one);
    return check_summary();
}
