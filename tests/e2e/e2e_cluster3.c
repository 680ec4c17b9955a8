/*
 * e2e_cluster3.c — three real ldpref-server processes on one PostgreSQL
 * database (docs/server.md "Several servers on one database",
 * docs/postgresql.md), driven over HTTP: signed labels sent directly
 * (raw_annotator, label_stream) and the operator's client library. The
 * database is the harness's (LDPREF_TEST_DB=postgresql) or, in the SQLite
 * pass, a private PostgreSQL server of this test (tests/support/pg.h).
 *
 * Checks that labels for one (annotator, task) sent to the three servers at
 * once are stored once: one new label, every other reply either its receipt
 * (the same label sent again) or conflicting_label, and a resend through
 * any server gets the original receipt; that a nonce reused on another
 * task through another server is refused as replayed; that an annotator's
 * ε budget spent through the three servers at once is never overspent
 * (exactly as many labels acknowledged as the budget allows, the others
 * budget_exceeded, the stored spend equal to the acknowledged labels');
 * that when one server is killed with SIGKILL while labels stream into it,
 * every label it acknowledged is in the export of another; that a model
 * trained and activated on one server is served by the other two within
 * the poll period plus a load allowance (the notification makes it
 * quicker: the delays are printed); and that a stored schedule fires once
 * across the three servers.
 */
#include "check.h"
#include "error.h"
#include "label_stream.h"
#include "ldpref.h"
#include "operator_client.h"
#include "pg.h"
#include "raw_annotator.h"
#include "server_proc.h"

#include <jansson.h>
#include <libpq-fe.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define SERVERS 3
#define CONFLICT_TASKS 6 /* tasks raced three ways */
#define BUDGET_LABELS 4  /* labels the budget annotator's ε budget allows */
#define STREAM_TASKS 120 /* per label_stream writer */
#define POLL_MS 1000     /* the servers' active-version poll */
#define LOAD_ALLOWANCE_MS 4000
#define INTERVAL_S 3

static server_proc srv[SERVERS];
static ldpref_client *op[SERVERS];
static char op_token[160];
static char db_uri[300];

static int64_t now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static int64_t wall_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
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

/* A one-number query on the database (libpq), or -1. */
static double db_number(const char *sql)
{
    PGconn *pg = PQconnectdb(db_uri);
    PGresult *r = PQexec(pg, sql);
    double v = PQresultStatus(r) == PGRES_TUPLES_OK && PQntuples(r) == 1 && !PQgetisnull(r, 0, 0)
                   ? atof(PQgetvalue(r, 0, 0))
                   : -1;
    PQclear(r);
    PQfinish(pg);
    return v;
}

/* The error name of a reply, "" if none. */
static void reply_error(const http_reply *r, char *out, size_t outlen)
{
    json_t *j = json_loads(r->body ? r->body : "", 0, NULL);
    const char *e = json_string_value(json_object_get(j, "error"));
    snprintf(out, outlen, "%s", e ? e : "");
    json_decref(j);
}

static int64_t reply_label_id(const http_reply *r)
{
    json_t *j = json_loads(r->body ? r->body : "", 0, NULL);
    int64_t id = json_integer_value(json_object_get(j, "label_id"));
    json_decref(j);
    return id;
}

/* A campaign with n tasks, an enrolled raw annotator with its tasks. */
static void campaign_with_annotator(const char *name, int n, double budget, raw_annotator *ann,
                                    int64_t *tasks)
{
    http_reply r;
    json_t *camp =
        json_pack("{s:s, s:f, s:f, s:b, s:f, s:f}", "name", name, "epsilon_min", 0.1, "epsilon_max",
                  5.0, "allow_infinite", 0, "epsilon_budget", budget, "epsilon_default", 1.0);
    CHECK_INT(raw_post_json(srv[0].url, "/v1/campaigns", camp, op_token, &r), 201);
    json_decref(camp);
    http_reply_free(&r);
    char jsonl[64 * 64] = "", url[256];
    size_t len = 0;
    for (int i = 0; i < n; i++)
        len += (size_t)snprintf(
            jsonl + len, sizeof jsonl - len,
            "{\"id\":\"%s%d\",\"prompt\":\"p%d\",\"responses\":[\"a\",\"b\"]}\n", name, i, i);
    snprintf(url, sizeof url, "%s/v1/tasks?campaign=%s", srv[1].url, name);
    http_raw("POST", url, jsonl, len, op_token, &r);
    CHECK_INT(r.status, 200);
    http_reply_free(&r);
    json_t *tb = json_pack("{s:s, s:i}", "campaign", name, "count", 1);
    raw_post_json(srv[2].url, "/v1/enrollment-tokens", tb, op_token, &r);
    json_decref(tb);
    json_t *toks = json_loads(r.body ? r.body : "", 0, NULL);
    http_reply_free(&r);
    const char *t = json_string_value(json_array_get(json_object_get(toks, "tokens"), 0));
    CHECK_INT(raw_enroll(ann, srv[0].url, t ? t : ""), 201);
    json_decref(toks);
    json_t *got = NULL;
    CHECK_INT(raw_next(ann, n, &got), 200);
    CHECK_INT(json_array_size(got), (size_t)n);
    for (int k = 0; k < n && k < (int)json_array_size(got); k++)
        tasks[k] = json_integer_value(json_object_get(json_array_get(got, (size_t)k), "task_id"));
    json_decref(got);
}

/* ---- labels sent to the three servers at once ---- */

struct send {
    const char *url;
    lp_label_msg m;
    http_reply r;
    long status;
};

static void *send_main(void *arg)
{
    struct send *s = arg;
    s->status = raw_post_label(s->url, &s->m, &s->r);
    return NULL;
}

/* Sends n messages at once (each to its url); waits for every reply. */
static void send_all(struct send *s, int n)
{
    pthread_t t[SERVERS * BUDGET_LABELS * 2];
    for (int i = 0; i < n; i++)
        pthread_create(&t[i], NULL, send_main, &s[i]);
    for (int i = 0; i < n; i++)
        pthread_join(t[i], NULL);
}

static void test_conflicts_and_resends(void)
{
    raw_annotator ann;
    int64_t tasks[CONFLICT_TASKS + SERVERS]; /* the last ones for the nonces */
    campaign_with_annotator("race", CONFLICT_TASKS + SERVERS, 1000.0, &ann, tasks);
    int stored_once = 0, receipts_agree = 0, refusals_named = 0;
    lp_label_msg winner_of_first = {0};
    for (int k = 0; k < CONFLICT_TASKS; k++) {
        /* z = 0 to one server, z = 1 to the next, the first again to the third */
        struct send s[SERVERS];
        memset(s, 0, sizeof s);
        s[0].m = raw_label(&ann, tasks[k], 0, 1.0);
        s[1].m = raw_label(&ann, tasks[k], 1, 1.0);
        s[2].m = s[0].m;
        for (int i = 0; i < SERVERS; i++)
            s[i].url = srv[(i + k) % SERVERS].url;
        send_all(s, SERVERS);
        int created = 0, agree = 1, named = 1, win = -1;
        int64_t id = 0;
        for (int i = 0; i < SERVERS; i++) {
            char err[48];
            reply_error(&s[i].r, err, sizeof err);
            if (s[i].status == 201 && !created++)
                win = i;
            if (s[i].status == 200 || s[i].status == 201) {
                int64_t got = reply_label_id(&s[i].r);
                agree &= id == 0 || got == id;
                id = got;
            } else {
                named &= s[i].status == 409 && strcmp(err, "conflicting_label") == 0;
                if (!named)
                    fprintf(stderr, "task %lld: reply %ld %s\n", (long long)tasks[k], s[i].status,
                            err);
            }
        }
        char sql[160];
        snprintf(sql, sizeof sql, "SELECT count(*) FROM labels WHERE task = %lld",
                 (long long)tasks[k]);
        stored_once += created == 1 && db_number(sql) == 1;
        receipts_agree += agree && id > 0;
        refusals_named += named;
        /* the winner sent again through every server: its receipt */
        for (int i = 0; win >= 0 && i < SERVERS; i++) {
            http_reply r;
            long st = raw_post_label(srv[i].url, &s[win].m, &r);
            CHECK(st == 200 || st == 201);
            CHECK_INT(reply_label_id(&r), id);
            http_reply_free(&r);
        }
        if (k == 0 && win >= 0)
            winner_of_first = s[win].m;
        for (int i = 0; i < SERVERS; i++)
            http_reply_free(&s[i].r);
    }
    CHECK_INT(stored_once, CONFLICT_TASKS);
    CHECK_INT(receipts_agree, CONFLICT_TASKS);
    CHECK_INT(refusals_named, CONFLICT_TASKS);
    CHECK_INT((int)db_number("SELECT count(*) FROM labels l JOIN tasks t ON t.id = l.task "
                             "JOIN campaigns c ON c.id = t.campaign WHERE c.name = 'race'"),
              CONFLICT_TASKS);

    /* the first winner's nonce on tasks never labelled, through each
     * server: refused as replayed, nothing stored */
    for (int i = 0; i < SERVERS; i++) {
        lp_label_msg m = raw_label(&ann, tasks[CONFLICT_TASKS + i], 1, 1.0);
        memcpy(m.nonce, winner_of_first.nonce, sizeof m.nonce);
        raw_resign(&ann, &m);
        http_reply r;
        char err[48];
        CHECK_INT(raw_post_label(srv[i].url, &m, &r), 409);
        reply_error(&r, err, sizeof err);
        CHECK_STR(err, "replayed_nonce");
        http_reply_free(&r);
        char sql[160];
        snprintf(sql, sizeof sql, "SELECT count(*) FROM labels WHERE task = %lld",
                 (long long)m.task_id);
        CHECK_INT((int)db_number(sql), 0);
    }
}

/* ---- one budget, three servers ---- */

static void test_budget_across_servers(void)
{
    raw_annotator ann;
    enum { N = SERVERS * BUDGET_LABELS * 2 };
    int64_t tasks[N];
    campaign_with_annotator("budget", N, (double)BUDGET_LABELS, &ann, tasks);
    struct send s[N];
    memset(s, 0, sizeof s);
    for (int i = 0; i < N; i++) {
        s[i].m = raw_label(&ann, tasks[i], i % 2, 1.0);
        s[i].url = srv[i % SERVERS].url;
    }
    send_all(s, N);
    int acked = 0, exceeded = 0;
    for (int i = 0; i < N; i++) {
        char err[48];
        reply_error(&s[i].r, err, sizeof err);
        acked += s[i].status == 201;
        exceeded += s[i].status == 403 && strcmp(err, "budget_exceeded") == 0;
        http_reply_free(&s[i].r);
    }
    printf("budget of %d labels spent through %d servers at once: %d acknowledged, %d "
           "budget_exceeded\n",
           BUDGET_LABELS, SERVERS, acked, exceeded);
    CHECK_INT(acked, BUDGET_LABELS);
    CHECK_INT(exceeded, N - BUDGET_LABELS);
    CHECK_INT((int)db_number("SELECT count(*) FROM labels l JOIN tasks t ON t.id = l.task "
                             "JOIN campaigns c ON c.id = t.campaign WHERE c.name = 'budget'"),
              BUDGET_LABELS);
    double spent = db_number("SELECT sum(a.epsilon_spent) FROM annotators a JOIN campaigns c "
                             "ON c.id = a.campaign WHERE c.name = 'budget'");
    CHECK(spent > BUDGET_LABELS - 1e-9 && spent < BUDGET_LABELS + 1e-9);
}

/* ---- a server killed mid-stream ---- */

struct stream_run {
    label_stream *ls;
    int acked;
};

static void *stream_main(void *arg)
{
    struct stream_run *r = arg;
    r->acked = label_stream_run(r->ls, STREAM_TASKS, 1);
    return NULL;
}

static void test_kill_mid_stream(void)
{
    label_stream ls;
    snprintf(srv[2].token, sizeof srv[2].token, "%s", op_token);
    if (label_stream_setup(&ls, &srv[2], "stream", STREAM_TASKS) != 0)
        return;
    struct stream_run run = {&ls, 0};
    pthread_t t;
    pthread_create(&t, NULL, stream_main, &run);
    /* labels go in for a while, then the server dies */
    int64_t deadline = now_ms() + 30000;
    while (now_ms() < deadline &&
           db_number("SELECT count(*) FROM labels l JOIN tasks t ON t.id = l.task "
                     "JOIN campaigns c ON c.id = t.campaign WHERE c.name = 'stream'") <
               STREAM_TASKS)
        nap_ms(20);
    server_kill(&srv[2]);
    pthread_join(t, NULL);
    int acked = label_stream_acked(&ls);
    check_record(acked > 0 && acked < LABEL_STREAM_WRITERS * STREAM_TASKS, __FILE__, __LINE__,
                 "the kill landed mid-stream (%d of %d acknowledged)", acked,
                 LABEL_STREAM_WRITERS * STREAM_TASKS);
    ls.srv = &srv[0]; /* the export from a server that lives */
    int stored = 0;
    CHECK_INT(label_stream_missing(&ls, &stored), 0);
    printf("killed mid-stream: %d acknowledged, %d stored, every acknowledged one among them\n",
           acked, stored);
    CHECK(stored >= acked);
    label_stream_free(&ls);
    const char *args[] = {"--train-threads", "1", NULL};
    CHECK_INT(server_restart(&srv[2], args), 0);
    ldpref_client_close(op[2]);
    snprintf(srv[2].token, sizeof srv[2].token, "%s", op_token);
    op[2] = operator_client_open(&srv[2]);
}

/* ---- retrain on one, served by all ---- */

static int64_t trained_version(ldpref_client *c, const char *body)
{
    char *out = NULL;
    CHECK_ERR(ldpref_admin_retrain(c, body, &out), LP_OK);
    json_t *run = parsed(out);
    int64_t id = json_integer_value(json_object_get(run, "run"));
    json_decref(run);
    out = NULL;
    CHECK_ERR(ldpref_admin_run_wait(c, id, 60, NULL, NULL, &out), LP_OK);
    run = parsed(out);
    int64_t version = json_integer_value(json_object_get(run, "model_version"));
    json_decref(run);
    CHECK(version > 0);
    return version;
}

static int64_t served_by(ldpref_client *c)
{
    char *out = NULL;
    if (ldpref_admin_models(c, &out) != LDPREF_OK)
        return -1;
    json_t *j = parsed(out);
    int64_t v = json_integer_value(json_object_get(j, "active_version"));
    json_decref(j);
    return v;
}

static void test_activation_seen_by_all(void)
{
    int64_t v = trained_version(op[1], "{\"seed\": 1, \"l2\": 0.01, \"campaign\": \"stream\"}");
    if (v <= 0)
        return;
    int64_t t0 = now_ms(), delay[SERVERS] = {0};
    CHECK_INT(served_by(op[1]), v);
    for (int i = 0; i < SERVERS; i++) {
        while (served_by(op[i]) != v && now_ms() - t0 <= POLL_MS + LOAD_ALLOWANCE_MS)
            nap_ms(2);
        delay[i] = served_by(op[i]) == v ? now_ms() - t0 : -1;
        CHECK(delay[i] >= 0);
    }
    printf("activation on server 2 served by servers 1 and 3 after %lld and %lld ms (poll %d "
           "ms)\n",
           (long long)delay[0], (long long)delay[2], POLL_MS);
}

/* ---- the schedule ---- */

static int scheduled_runs(int64_t before, int64_t *first)
{
    char *out = NULL;
    if (ldpref_admin_runs(op[2], 1000, &out) != LDPREF_OK)
        return -1;
    json_t *j = parsed(out), *r;
    size_t i;
    int n = 0;
    json_array_foreach(json_object_get(j, "runs"), i, r) /* newest first */
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

/* Every server checks the schedule every second: the next firing is due
 * INTERVAL_S after the first scheduled run started, and any other that
 * started before then is a firing per server. */
static void test_schedule_fires_once(void)
{
    char body[160];
    snprintf(body, sizeof body,
             "{\"interval_s\": %d, \"request\": {\"l2\": 0.01, \"activate\": false, "
             "\"campaign\": \"stream\"}}",
             INTERVAL_S);
    CHECK_ERR(ldpref_admin_schedule_set(op[0], body, NULL), LP_OK);
    int64_t first = 0, deadline = now_ms() + 30000;
    while (scheduled_runs(INT64_MAX, &first) == 0 && now_ms() < deadline)
        nap_ms(50);
    CHECK_INT(scheduled_runs(INT64_MAX, &first), 1);
    int64_t next_due = first + INTERVAL_S * 1000;
    while (wall_ms() < next_due) /* every server has checked several times */
        nap_ms(50);
    CHECK_INT(scheduled_runs(next_due, &first), 1);
    CHECK_ERR(ldpref_admin_schedule_set(op[0], "{\"interval_s\": 0}", NULL), LP_OK);
}

int main(void)
{
    const char *args[] = {"--train-threads", "1", SERVER_NO_RATE_LIMITS, NULL};
    pg_cluster pgc = {0};
    if (server_prepare(&srv[0]) != 0) {
        check_record(0, __FILE__, __LINE__, "a temporary directory");
        return check_summary();
    }
    if (strncmp(srv[0].db, "postgresql://", 13) == 0) { /* the harness's database */
        snprintf(db_uri, sizeof db_uri, "%s", srv[0].db);
    } else { /* a private PostgreSQL server */
        if (!pg_cluster_start_for(&pgc, "e2e_cluster3")) {
            server_cleanup(&srv[0]);
            return check_summary();
        }
        CHECK_INT(pg_cluster_create_db(&pgc, "cluster3", db_uri, sizeof db_uri), 0);
    }
    int up = 0;
    for (int i = 0; i < SERVERS; i++) {
        if (i > 0 && server_prepare(&srv[i]) != 0)
            break;
        snprintf(srv[i].db, sizeof srv[i].db, "%s", db_uri);
        if (server_restart(&srv[i], args) != 0)
            break;
        if (i == 0)
            snprintf(op_token, sizeof op_token, "%s", srv[0].token);
        snprintf(srv[i].token, sizeof srv[i].token, "%s", op_token);
        op[i] = operator_client_open(&srv[i]);
        up += op[i] != NULL;
    }
    check_record(up == SERVERS, __FILE__, __LINE__, "three servers on one PostgreSQL database");
    if (up == SERVERS) {
        printf("-- three servers on %s\n", db_uri);
        test_conflicts_and_resends();
        test_budget_across_servers();
        test_kill_mid_stream();
        test_activation_seen_by_all();
        test_schedule_fires_once();
    }
    for (int i = 0; i < SERVERS; i++) {
        ldpref_client_close(op[i]);
        if (srv[i].pid > 0)
            CHECK_INT(server_stop(&srv[i]), 0);
        server_cleanup(&srv[i]);
    }
    if (pgc.pid > 0)
        pg_cluster_stop(&pgc);
    return check_summary();
}
