/*
 * e2e_cluster3.c — three real ldpref-server processes on one database (a
 * SQLite file, or one PostgreSQL database under LDPREF_TEST_DB=postgresql)
 * (docs/server.md, "Several servers on one database"; docs/postgresql.md,
 * "Label ingest on several servers"), driven through the real client
 * library and signed labels sent over HTTP.
 *
 * Checks, with requests spread across the three servers and released
 * together (one thread per server, a barrier):
 * - conflicting labels for one (annotator, task): exactly one accepted
 *   (201), the others `conflicting_label`; a resend of the winner through
 *   every server gets the original receipt (200, the same body);
 * - the same label through the three at once: one 201, two 200, one
 *   receipt;
 * - one nonce on three tasks: one accepted, the others `replayed_nonce`;
 * - budget spends of one annotator through all three: exactly as many
 *   labels accepted as the budget holds, the rest `budget_exceeded`; the
 *   annotator's stored ε spent equals its labels' ε sum and stays within
 *   the budget; every accepted label is stored;
 * - a retrain on one server and the activation served (the scores' model
 *   version) by all three within the poll period plus a load allowance;
 * - a label-count schedule firing exactly once across the three;
 * - kill -9 of one server while labels stream into all three: the other
 *   two keep accepting every label, and every acknowledged label (the
 *   killed server's too) is stored exactly once; the counters equal what
 *   the labels give.
 */
#include "annotator_client.h"
#include "check.h"
#include "clock.h"
#include "db_counters.h"
#include "error.h"
#include "http_raw.h"
#include "ldpref.h"
#include "operator_client.h"
#include "raw_annotator.h"
#include "rr.h"
#include "server_proc.h"

#include <jansson.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define SERVERS 3
#define ROUNDS 12    /* conflict and nonce rounds */
#define SPENDERS 4   /* annotators spending a small budget */
#define SPEND_EACH 4 /* labels each server sends per spender */
#define BUDGET 3.0   /* ... of ε 0.7: four fit (2.8), a fifth does not */
#define SPEND_EPS 0.7
#define TRAIN_TASKS 80         /* default campaign, labelled for training */
#define EVERY_LABELS 20        /* the schedule's label trigger */
#define STREAM_WRITERS 2       /* per server */
#define STREAM_TASKS 250       /* per writer */
#define KILL_AFTER 40          /* labels each server acknowledged before the kill */
#define AFTER_KILL 50          /* labels per writer the other servers take after it */
#define VICTIM (SERVERS - 1)   /* the server killed */
#define POLL_MS 1000           /* the servers' active-version poll (docs/server.md) */
#define LOAD_ALLOWANCE_MS 4000 /* loading a model on a loaded shared machine */

static server_proc srv[SERVERS];
static ldpref_client *op[SERVERS];

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

/* ---- a campaign of signed-label annotators ---- */

/* Creates campaign name (budget per annotator) with ntasks tasks. */
static void campaign_create(const char *name, double budget, int ntasks)
{
    char body[256];
    snprintf(body, sizeof body,
             "{\"name\": \"%s\", \"epsilon_min\": 0.1, \"epsilon_max\": 5, \"allow_infinite\": "
             "false, \"epsilon_budget\": %g, \"epsilon_default\": 0.7}",
             name, budget);
    long status = 0;
    json_decref(operator_call(&srv[0], "POST", "/v1/campaigns", body, &status));
    CHECK_INT(status, 201);
    size_t cap = (size_t)ntasks * 64 + 1, len = 0;
    char *jsonl = malloc(cap);
    for (int i = 0; i < ntasks; i++)
        len += (size_t)snprintf(
            jsonl + len, cap - len,
            "{\"id\":\"%s%d\",\"prompt\":\"p%d\",\"responses\":[\"a\",\"b\"]}\n", name, i, i);
    char url[256];
    snprintf(url, sizeof url, "%s/v1/tasks?campaign=%s", srv[1].url, name);
    http_reply r;
    http_raw("POST", url, jsonl, len, srv[1].token, &r);
    CHECK_INT(r.status, 200);
    http_reply_free(&r);
    free(jsonl);
}

/* An annotator of campaign enrolled through server s, holding up to ntasks
 * task ids (assigned through the next server): how many it holds. */
static int annotator_with_tasks(raw_annotator *a, const char *campaign, int s, int64_t *tasks,
                                int ntasks)
{
    char body[128];
    snprintf(body, sizeof body, "{\"campaign\": \"%s\", \"count\": 1}", campaign);
    long status = 0;
    json_t *reply = operator_call(&srv[s], "POST", "/v1/enrollment-tokens", body, &status);
    const char *token = json_string_value(json_array_get(json_object_get(reply, "tokens"), 0));
    CHECK_INT(raw_enroll(a, srv[s].url, token ? token : ""), 201);
    json_decref(reply);
    a->url = srv[(s + 1) % SERVERS].url;
    json_t *list = NULL;
    CHECK_INT(raw_next(a, ntasks, &list), 200);
    int n = (int)json_array_size(list);
    for (int k = 0; k < n; k++)
        tasks[k] = json_integer_value(json_object_get(json_array_get(list, (size_t)k), "task_id"));
    json_decref(list);
    CHECK_INT(n, ntasks);
    return n;
}

/* ---- labels sent through all three servers at once ---- */

struct sent {
    lp_label_msg m[SPEND_EACH];
    int n;      /* labels to send, in order */
    int server; /* the server they go to */
    long status[SPEND_EACH];
    char error[SPEND_EACH][48];
    char *body[SPEND_EACH]; /* the replies (malloc'd) */
};

static pthread_barrier_t together;

static void *send_labels(void *arg)
{
    struct sent *s = arg;
    pthread_barrier_wait(&together);
    for (int i = 0; i < s->n; i++) {
        http_reply r;
        s->status[i] = raw_post_label(srv[s->server].url, &s->m[i], &r);
        http_error_name(&r, s->error[i], sizeof s->error[i]);
        s->body[i] = r.body;
        r.body = NULL;
        http_reply_free(&r);
    }
    return NULL;
}

/* Sends each server's labels from a thread of its own, all released at
 * once; the replies are in out. */
static void send_together(struct sent out[SERVERS])
{
    pthread_t tid[SERVERS];
    pthread_barrier_init(&together, NULL, SERVERS);
    for (int i = 0; i < SERVERS; i++) {
        out[i].server = i;
        pthread_create(&tid[i], NULL, send_labels, &out[i]);
    }
    for (int i = 0; i < SERVERS; i++)
        pthread_join(tid[i], NULL);
    pthread_barrier_destroy(&together);
}

static void sent_free(struct sent out[SERVERS])
{
    for (int i = 0; i < SERVERS; i++)
        for (int k = 0; k < out[i].n; k++)
            free(out[i].body[k]);
}

static int64_t label_id_of(const char *body)
{
    json_t *j = json_loads(body ? body : "", 0, NULL);
    int64_t id = json_integer_value(json_object_get(j, "label_id"));
    json_decref(j);
    return id;
}

/* Of one round's single labels: the index of the one accepted (-1 unless
 * exactly one was), the others checked refused with refusal. */
static int one_winner(struct sent out[SERVERS], const char *refusal, int round)
{
    int winner = -1, accepted = 0, refused = 0;
    for (int i = 0; i < SERVERS; i++) {
        if (out[i].status[0] == 201) {
            accepted++;
            winner = i;
        } else if (out[i].status[0] == 409 && strcmp(out[i].error[0], refusal) == 0) {
            refused++;
        }
    }
    check_record(accepted == 1 && refused == SERVERS - 1, __FILE__, __LINE__,
                 "round %d: %d accepted, %d refused as %s (of %d)", round, accepted, refused,
                 refusal, SERVERS);
    return accepted == 1 ? winner : -1;
}

/* Conflicting labels for one (annotator, task) through the three servers:
 * one winner; its resend through every server gets its receipt again. */
static void test_conflicts(raw_annotator *a, const int64_t *tasks)
{
    int resent_ok = 0;
    for (int round = 0; round < ROUNDS; round++) {
        struct sent out[SERVERS] = {0};
        for (int i = 0; i < SERVERS; i++) {
            out[i].m[0] = raw_label(a, tasks[round], i & 1, 1.0);
            out[i].n = 1;
        }
        send_together(out);
        int w = one_winner(out, "conflicting_label", round);
        if (w >= 0) {
            json_t *receipt = json_loads(out[w].body[0], 0, NULL);
            for (int s = 0; s < SERVERS; s++) {
                http_reply r;
                long status = raw_post_label(srv[s].url, &out[w].m[0], &r);
                json_t *again = json_loads(r.body ? r.body : "", 0, NULL);
                resent_ok += status == 200 && receipt != NULL && json_equal(receipt, again);
                json_decref(again);
                http_reply_free(&r);
            }
            json_decref(receipt);
        }
        sent_free(out);
    }
    check_record(resent_ok == ROUNDS * SERVERS, __FILE__, __LINE__,
                 "%d of %d resends of the winners answered 200 with the original receipt",
                 resent_ok, ROUNDS * SERVERS);
}

/* The same label sent through the three servers at once: one 201, and the
 * other two its receipt (200, the same body). */
static void test_same_label(raw_annotator *a, const int64_t *tasks)
{
    int receipts = 0;
    for (int round = 0; round < ROUNDS; round++) {
        struct sent out[SERVERS] = {0};
        out[0].m[0] = raw_label(a, tasks[round], round & 1, 1.0);
        for (int i = 0; i < SERVERS; i++) {
            out[i].m[0] = out[0].m[0];
            out[i].n = 1;
        }
        send_together(out);
        int created = 0;
        json_t *first = NULL;
        for (int i = 0; i < SERVERS; i++) {
            json_t *j = json_loads(out[i].body[0] ? out[i].body[0] : "", 0, NULL);
            created += out[i].status[0] == 201;
            if (first == NULL && j != NULL)
                first = json_incref(j);
            receipts += (out[i].status[0] == 201 || out[i].status[0] == 200) && first != NULL &&
                        json_equal(first, j) &&
                        json_integer_value(json_object_get(j, "label_id")) > 0;
            json_decref(j);
        }
        json_decref(first);
        check_record(created == 1, __FILE__, __LINE__,
                     "round %d: the same label sent through three servers created %d", round,
                     created);
        sent_free(out);
    }
    check_record(receipts == ROUNDS * SERVERS, __FILE__, __LINE__,
                 "%d of %d answers to the same label were one and the same receipt", receipts,
                 ROUNDS * SERVERS);
}

/* One nonce on three tasks through the three servers: one accepted, the
 * others replayed_nonce. */
static void test_nonce_reuse(raw_annotator *a, const int64_t *tasks)
{
    for (int round = 0; round < ROUNDS; round++) {
        struct sent out[SERVERS] = {0};
        for (int i = 0; i < SERVERS; i++) {
            out[i].m[0] = raw_label(a, tasks[round * SERVERS + i], 1, 1.0);
            memcpy(out[i].m[0].nonce, out[0].m[0].nonce, sizeof out[0].m[0].nonce);
            raw_resign(a, &out[i].m[0]);
            out[i].n = 1;
        }
        send_together(out);
        one_winner(out, "replayed_nonce", round);
        sent_free(out);
    }
}

/* One number of the database for the label with id label_id (its text),
 * scaled by 1000 and rounded: sql has ?1 for the label's annotator. */
static long long per_mille(const char *sql, int64_t label_id)
{
    char full[512], arg[32];
    snprintf(full, sizeof full,
             "SELECT round(1000 * (%s)) FROM annotators a WHERE a.id = "
             "(SELECT annotator FROM labels WHERE id = ?1)",
             sql);
    snprintf(arg, sizeof arg, "%lld", (long long)label_id);
    return server_db_scalar(&srv[0], full, arg);
}

/* Budget spends of each spender through the three servers at once (every
 * label on a task of its own): the budget is spent to the last label that
 * fits and not beyond; the stored spend is the stored labels' sum. */
static void test_budget(void)
{
    campaign_create("spend", BUDGET, SPENDERS * SERVERS * SPEND_EACH);
    const int fit = (int)(BUDGET / SPEND_EPS); /* 4 */
    for (int p = 0; p < SPENDERS; p++) {
        raw_annotator a;
        int64_t tasks[SERVERS * SPEND_EACH];
        if (annotator_with_tasks(&a, "spend", p % SERVERS, tasks, SERVERS * SPEND_EACH) !=
            SERVERS * SPEND_EACH)
            continue;
        struct sent out[SERVERS] = {0};
        for (int i = 0; i < SERVERS; i++) {
            for (int k = 0; k < SPEND_EACH; k++)
                out[i].m[k] = raw_label(&a, tasks[i * SPEND_EACH + k], k & 1, SPEND_EPS);
            out[i].n = SPEND_EACH;
        }
        send_together(out);
        int accepted = 0, over = 0, stored = 0;
        int64_t any = 0;
        for (int i = 0; i < SERVERS; i++)
            for (int k = 0; k < SPEND_EACH; k++) {
                if (out[i].status[k] == 201) {
                    char arg[32];
                    any = label_id_of(out[i].body[k]);
                    snprintf(arg, sizeof arg, "%lld", (long long)any);
                    accepted++;
                    stored += server_db_scalar(&srv[0], "SELECT count(*) FROM labels WHERE id = ?1",
                                               arg) == 1;
                } else {
                    over +=
                        out[i].status[k] == 403 && strcmp(out[i].error[k], "budget_exceeded") == 0;
                }
            }
        check_record(accepted == fit && over == SERVERS * SPEND_EACH - fit, __FILE__, __LINE__,
                     "spender %d: %d accepted (budget fits %d), %d budget_exceeded", p, accepted,
                     fit, over);
        CHECK_INT(stored, accepted);
        long long spent = per_mille("a.epsilon_spent", any);
        long long sum = per_mille("SELECT sum(epsilon) FROM labels WHERE annotator = a.id", any);
        long long count = per_mille("SELECT count(*) FROM labels WHERE annotator = a.id", any);
        check_record(spent == sum && spent <= (long long)(BUDGET * 1000) &&
                         count == 1000LL * accepted,
                     __FILE__, __LINE__,
                     "spender %d: ε spent %lld‰, its labels' sum %lld‰ (budget %g), %lld‰ labels "
                     "for %d accepted",
                     p, spent, sum, BUDGET, count, accepted);
        sent_free(out);
    }
}

static void test_labels_across_servers(void)
{
    const int ntasks = ROUNDS * (2 + SERVERS);
    campaign_create("race", 1000, ntasks);
    raw_annotator a;
    int64_t tasks[ROUNDS * (2 + SERVERS)];
    if (annotator_with_tasks(&a, "race", 0, tasks, ntasks) != ntasks)
        return;
    test_conflicts(&a, tasks);
    test_same_label(&a, tasks + ROUNDS);
    test_nonce_reuse(&a, tasks + 2 * ROUNDS);
    test_budget();
    CHECK_INT(db_counters_mismatch(srv[0].db), 0);
}

/* ---- the default campaign, labelled through the client library ---- */

/* Loads n tasks with two features into the default campaign (response b
 * longer and preferred on odd tasks). */
static void default_tasks_load(int first, int n)
{
    char path[512];
    snprintf(path, sizeof path, "%s/tasks-%d.jsonl", srv[0].dir, first);
    FILE *f = fopen(path, "w");
    CHECK(f != NULL);
    if (f == NULL)
        return;
    for (int k = first; k < first + n; k++)
        fprintf(f,
                "{\"id\":\"t%d\",\"prompt\":\"q %d\",\"responses\":[\"no %d\","
                "\"longer yes %d\"],\"features\":[[%d,1],[%d,0]]}\n",
                k, k, k, k, k % 2, 1 - k % 2);
    fclose(f);
    CHECK_ERR(ldpref_admin_tasks_load(op[0], path, NULL, NULL), LP_OK);
}

/* A new annotator of the default campaign on server s answers n tasks in
 * one batch (the longer response): the first task's id, 0 on failure. */
static int64_t answered_on(int s, const char *name, int n)
{
    ldpref_client *c = annotator_enrolled(&srv[s], op[s], NULL, name, 1.0, 1000.0);
    ldpref_task *got = NULL;
    size_t have = 0;
    int64_t first = 0;
    if (c != NULL && ldpref_next_tasks(c, n, &got, &have) == LDPREF_OK && have == (size_t)n) {
        ldpref_batch_item *items = calloc(have, sizeof *items);
        for (size_t i = 0; i < have; i++) {
            items[i].task = &got[i];
            items[i].choice = strstr(got[i].b, "longer") ? LDPREF_CHOICE_B : LDPREF_CHOICE_A;
        }
        if (ldpref_answer_batch(c, items, have) == LDPREF_OK)
            first = got[0].task_id;
        free(items);
    }
    check_record(first > 0, __FILE__, __LINE__, "%s answered %d tasks through server %d", name, n,
                 s);
    ldpref_tasks_free(got, have);
    ldpref_client_close(c);
    return first;
}

/* ---- retrain on one, served by all three ---- */

/* A retrain through server s that succeeds: its model version (0 if not). */
static int64_t retrained_on(int s, const char *body)
{
    char *out = NULL;
    CHECK_ERR(ldpref_admin_retrain(op[s], body, &out), LP_OK);
    json_t *run = parsed(out);
    int64_t id = json_integer_value(json_object_get(run, "run"));
    json_decref(run);
    out = NULL;
    CHECK_ERR(ldpref_admin_run_wait(op[s], id, 30, NULL, NULL, &out), LP_OK);
    run = parsed(out);
    int64_t version = json_integer_value(json_object_get(run, "model_version"));
    json_decref(run);
    CHECK(version > 0);
    return version;
}

/* The model version server s scores task with (-1 if it does not). */
static int64_t scored_by(int s, int64_t task)
{
    char body[64];
    snprintf(body, sizeof body, "{\"task_ids\": [%lld]}", (long long)task);
    long status = 0;
    json_t *j = operator_call(&srv[s], "POST", "/v1/score", body, &status);
    int64_t v = status == 200 ? json_integer_value(json_object_get(j, "model_version")) : -1;
    json_decref(j);
    return v;
}

/* Milliseconds from since until every server scores with version (the
 * slowest), or -1 past POLL_MS + LOAD_ALLOWANCE_MS. */
static int64_t all_serve(int64_t version, int64_t task, int64_t since)
{
    int seen[SERVERS] = {0}, left = SERVERS;
    for (;;) {
        int64_t waited = now_ms() - since;
        for (int s = 0; s < SERVERS; s++)
            if (!seen[s] && scored_by(s, task) == version) {
                seen[s] = 1;
                left--;
            }
        if (left == 0)
            return waited;
        if (waited > POLL_MS + LOAD_ALLOWANCE_MS)
            return -1;
        nap_ms(10);
    }
}

static void test_activation_seen_by_all(int64_t task)
{
    int64_t v1 = retrained_on(1, "{\"seed\": 1, \"l2\": 0.01}");
    int64_t d1 = all_serve(v1, task, now_ms());
    int64_t v2 = retrained_on(2, "{\"seed\": 2, \"l2\": 0.01}");
    int64_t d2 = all_serve(v2, task, now_ms());
    printf("activation on one server scored with by all three after %lld, %lld ms (bound %d "
           "ms)\n",
           (long long)d1, (long long)d2, POLL_MS + LOAD_ALLOWANCE_MS);
    check_record(d1 >= 0 && d2 >= 0 && v1 != v2, __FILE__, __LINE__,
                 "versions %lld and %lld served by all three (%lld, %lld ms)", (long long)v1,
                 (long long)v2, (long long)d1, (long long)d2);
}

/* ---- the schedule fires once ---- */

/* Runs triggered by the label count, as server s lists them; *busy set
 * when one has not ended. */
static int label_runs(int s, int *busy)
{
    char *out = NULL;
    *busy = 1;
    if (ldpref_admin_runs(op[s], 1000, &out) != LDPREF_OK)
        return -1;
    json_t *j = parsed(out), *r;
    size_t i;
    int n = 0;
    *busy = 0;
    json_array_foreach(json_object_get(j, "runs"), i, r)
    {
        const char *st = json_string_value(json_object_get(r, "status"));
        *busy |= st == NULL ||
                 (strcmp(st, "succeeded") && strcmp(st, "failed") && strcmp(st, "cancelled"));
        n += strcmp(json_string_value(json_object_get(r, "trigger")), "labels") == 0;
    }
    json_decref(j);
    return n;
}

/* Every server checks the schedule every second: with EVERY_LABELS new
 * labels committed at once, all three find it due at their next check. */
static void test_schedule_fires_once(void)
{
    char body[128];
    snprintf(body, sizeof body,
             "{\"every_labels\": %d, \"request\": {\"l2\": 0.01, \"activate\": false}}",
             EVERY_LABELS);
    CHECK_ERR(ldpref_admin_schedule_set(op[0], body, NULL), LP_OK);
    int busy = 0;
    nap_ms(1500); /* every server checked: nothing is due yet */
    CHECK_INT(label_runs(1, &busy), 0);
    default_tasks_load(TRAIN_TASKS, EVERY_LABELS);
    answered_on(2, "scheduled", EVERY_LABELS);
    int64_t deadline = now_ms() + 30000;
    while (label_runs(1, &busy) == 0 && now_ms() < deadline)
        nap_ms(50);
    for (deadline = now_ms() + 60000; label_runs(1, &busy) >= 0 && busy && now_ms() < deadline;)
        nap_ms(50);
    nap_ms(2500); /* every server checked again, twice, after the run ended */
    int runs = label_runs(0, &busy);
    check_record(runs == 1 && !busy, __FILE__, __LINE__,
                 "the label schedule fired %d times across %d servers", runs, SERVERS);
    CHECK_ERR(ldpref_admin_schedule_set(op[0], "{\"every_labels\": 0}", NULL), LP_OK);
}

/* ---- kill -9 of one server while labels stream into all three ---- */

struct writer {
    raw_annotator a;
    int server;
    int64_t tasks[STREAM_TASKS];
    int ntasks;
    int64_t acked[STREAM_TASKS]; /* ids of the labels acknowledged (201) */
    int nacked;
    int failed; /* answers other than 201 from a live server */
};

static struct writer writers[SERVERS * STREAM_WRITERS];
static int acked_by[SERVERS]; /* atomic: labels acknowledged by each server */
static int killed;            /* atomic: the victim has been killed */

/* 1 once every server has acknowledged KILL_AFTER labels (the numbers
 * read into at, if not NULL). */
static int kill_due(int at[SERVERS])
{
    int low = KILL_AFTER;
    for (int s = 0; s < SERVERS; s++) {
        int n = __atomic_load_n(&acked_by[s], __ATOMIC_SEQ_CST);
        low = n < low ? n : low;
        if (at != NULL)
            at[s] = n;
    }
    return low >= KILL_AFTER;
}

/* Holds a writer at its last AFTER_KILL labels (SQLite's writers may run
 * far ahead of one another): one to the victim until the kill is due, one
 * to a server that stays until the kill. */
static void hold(const struct writer *w)
{
    for (int64_t deadline = now_ms() + 60000;
         (w->server == VICTIM ? !kill_due(NULL) : !__atomic_load_n(&killed, __ATOMIC_SEQ_CST)) &&
         now_ms() < deadline;)
        nap_ms(1);
}

static void *stream(void *arg)
{
    struct writer *w = arg;
    for (int i = 0; i < w->ntasks; i++) {
        if (i == w->ntasks - AFTER_KILL)
            hold(w);
        lp_label_msg m = raw_label(&w->a, w->tasks[i], i & 1, 1.0);
        http_reply r;
        long status = raw_post_label(srv[w->server].url, &m, &r);
        if (status == 201) {
            w->acked[w->nacked++] = label_id_of(r.body);
            __atomic_add_fetch(&acked_by[w->server], 1, __ATOMIC_SEQ_CST);
        }
        http_reply_free(&r);
        if (status == 0) /* the server is gone */
            break;
        w->failed += status != 201;
    }
    return NULL;
}

static int cmp_i64(const void *x, const void *y)
{
    int64_t a = *(const int64_t *)x, b = *(const int64_t *)y;
    return (a > b) - (a < b);
}

/* The label ids of campaign's export through server s, sorted: how many
 * (-1 if the export failed); *ids malloc'd. */
static int exported_ids(int s, const char *campaign, int64_t **ids)
{
    char path[128];
    snprintf(path, sizeof path, "/v1/export?campaign=%s", campaign);
    http_reply r;
    int n = 0, cap = 1024;
    *ids = malloc(sizeof **ids * (size_t)cap);
    if (raw_get(srv[s].url, path, srv[s].token, &r) != 200) {
        http_reply_free(&r);
        return -1;
    }
    for (char *line = r.body; line && *line;) {
        char *nl = strchr(line, '\n');
        json_t *j = json_loadb(line, nl ? (size_t)(nl - line) : strlen(line), 0, NULL);
        if (j != NULL) {
            if (n == cap)
                *ids = realloc(*ids, sizeof **ids * (size_t)(cap *= 2));
            (*ids)[n++] = json_integer_value(json_object_get(j, "label_id"));
        }
        json_decref(j);
        line = nl ? nl + 1 : NULL;
    }
    http_reply_free(&r);
    qsort(*ids, (size_t)n, sizeof **ids, cmp_i64);
    return n;
}

static void test_kill_mid_stream(void)
{
    const int victim = VICTIM, nw = SERVERS * STREAM_WRITERS;
    campaign_create("stream", 1e6, nw * STREAM_TASKS);
    for (int i = 0; i < nw; i++) {
        writers[i].server = i % SERVERS;
        writers[i].ntasks = annotator_with_tasks(&writers[i].a, "stream", i % SERVERS,
                                                 writers[i].tasks, STREAM_TASKS);
    }
    pthread_t tid[SERVERS * STREAM_WRITERS];
    for (int i = 0; i < nw; i++)
        pthread_create(&tid[i], NULL, stream, &writers[i]);
    /* the kill comes once every server has acknowledged KILL_AFTER labels */
    int at_kill[SERVERS] = {0};
    for (int64_t deadline = now_ms() + 60000; !kill_due(at_kill) && now_ms() < deadline;)
        nap_ms(1);
    server_kill(&srv[victim]); /* SIGKILL mid-stream */
    __atomic_store_n(&killed, 1, __ATOMIC_SEQ_CST);
    int acked = 0, survivors_at_kill = 0, survivors_short = 0, failed = 0;
    for (int i = 0; i < nw; i++) {
        pthread_join(tid[i], NULL);
        acked += writers[i].nacked;
        if (writers[i].server != victim) {
            survivors_short += writers[i].ntasks - writers[i].nacked;
            failed += writers[i].failed;
        }
    }
    for (int s = 0; s < SERVERS; s++)
        survivors_at_kill += s == victim ? 0 : at_kill[s];
    int victim_acked = acked_by[victim], survivors = acked - victim_acked;
    printf("stream: acknowledged by server 1, 2, 3 before the kill of 3: %d, %d, %d; in all %d, "
           "%d, %d\n",
           at_kill[0], at_kill[1], at_kill[2], acked_by[0], acked_by[1], acked_by[2]);
    check_record(victim_acked >= KILL_AFTER && victim_acked < STREAM_WRITERS * STREAM_TASKS,
                 __FILE__, __LINE__,
                 "the kill landed mid-stream (%d of the killed server's %d labels acknowledged)",
                 victim_acked, STREAM_WRITERS * STREAM_TASKS);
    check_record(survivors_short == 0 && failed == 0 &&
                     survivors - survivors_at_kill >= (SERVERS - 1) * STREAM_WRITERS * AFTER_KILL,
                 __FILE__, __LINE__,
                 "the other servers accepted every label, %d of them after the kill: %d short, %d "
                 "refused",
                 survivors - survivors_at_kill, survivors_short, failed);

    int64_t *ids = NULL;
    int n = exported_ids(0, "stream", &ids);
    int missing = 0, twice = 0;
    for (int k = 1; k < n; k++)
        twice += ids[k] == ids[k - 1];
    for (int i = 0; i < nw; i++)
        for (int k = 0; k < writers[i].nacked; k++)
            missing += n < 0 ||
                       bsearch(&writers[i].acked[k], ids, (size_t)n, sizeof *ids, cmp_i64) == NULL;
    free(ids);
    long long stored = server_db_scalar(
        &srv[0],
        "SELECT count(*) FROM labels l JOIN annotators a ON a.id = l.annotator JOIN campaigns c "
        "ON c.id = a.campaign WHERE c.name = ?1",
        "stream");
    /* at most one label per killed writer was stored but never acknowledged */
    check_record(missing == 0 && twice == 0 && n == stored && stored >= acked &&
                     stored <= acked + STREAM_WRITERS,
                 __FILE__, __LINE__,
                 "%d of %d acknowledged labels missing, %d exported twice; %d exported, %lld "
                 "stored",
                 missing, acked, twice, n, stored);
    CHECK_INT(db_counters_mismatch(srv[0].db), 0);
}

int main(void)
{
    lp_rng_init();
    const char *args[] = {"--train-threads", "1", SERVER_NO_RATE_LIMITS, NULL};
    int started = server_start(&srv[0], args) == 0;
    for (int s = 1; started && s < SERVERS; s++) {
        started = server_prepare(&srv[s]) == 0;
        snprintf(srv[s].db, sizeof srv[s].db, "%s", srv[0].db); /* the same database */
        started = started && server_restart(&srv[s], args) == 0;
        snprintf(srv[s].token, sizeof srv[s].token, "%s", srv[0].token);
    }
    check_record(started, __FILE__, __LINE__, "three servers start on one database (%s)",
                 server_uses_postgresql() ? "PostgreSQL" : "SQLite");
    for (int s = 0; started && s < SERVERS; s++)
        started = (op[s] = operator_client_open(&srv[s])) != NULL;
    if (started) {
        test_labels_across_servers();
        default_tasks_load(0, TRAIN_TASKS);
        int64_t task = answered_on(0, "trainer", TRAIN_TASKS);
        test_activation_seen_by_all(task);
        test_schedule_fires_once();
        test_kill_mid_stream();
        for (int s = 0; s < SERVERS - 1; s++) /* a clean stop: ASan checks for leaks */
            CHECK_INT(server_stop(&srv[s]), 0);
    }
    for (int s = 0; s < SERVERS; s++) {
        ldpref_client_close(op[s]);
        server_cleanup(&srv[s]);
    }
    return check_summary();
}
