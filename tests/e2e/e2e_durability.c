/*
 * e2e_durability.c — no acknowledged label is ever lost. Several threads
 * stream signed labels at the real server (durable settings, the default);
 * the server is killed with SIGKILL mid-stream and restarted on the same
 * database. Every label whose receipt reached a client must be in the
 * export, and SQLite's integrity check must say "ok". After the restart a
 * resend gets its receipt again and a reused nonce is still refused (the
 * nonce index is rebuilt from what the database holds).
 */
#include "check.h"
#include "db_counters.h"
#include "clock.h"
#include "error.h"
#include "raw_annotator.h"
#include "rr.h"
#include "server_proc.h"

#include <jansson.h>
#include <pthread.h>
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define WRITERS 4
#define PER_WRITER 1000
#define KILL_AFTER 300 /* acknowledged labels before the kill */

static server_proc srv;
static int acked_so_far; /* atomic */

struct writer {
    raw_annotator ann;
    int64_t tasks[PER_WRITER];
    int ntasks;
    int64_t acked[PER_WRITER]; /* label ids whose receipt arrived */
    int nacked;
    int attempted;           /* tasks[0..attempted) were sent */
    lp_label_msg last_acked; /* the last label whose receipt arrived */
};

static void *stream(void *arg)
{
    struct writer *w = arg;
    for (int i = 0; i < w->ntasks; i++) {
        lp_label_msg m = raw_label(&w->ann, w->tasks[i], i & 1, 1.0);
        http_reply r;
        w->attempted = i + 1;
        long status = raw_post_label(srv.url, &m, &r);
        if (status == 201) {
            w->last_acked = m;
            json_t *j = json_loads(r.body, 0, NULL);
            w->acked[w->nacked++] = json_integer_value(json_object_get(j, "label_id"));
            __atomic_add_fetch(&acked_so_far, 1, __ATOMIC_SEQ_CST);
            json_decref(j);
        }
        http_reply_free(&r);
        if (status == 0) /* the server is gone */
            break;
    }
    return NULL;
}

static int cmp_i64(const void *a, const void *b)
{
    int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
    return (x > y) - (x < y);
}

static struct writer w[WRITERS];
static char op_token[160];

/* Campaign "dur" with WRITERS * PER_WRITER tasks; WRITERS annotators, each
 * with PER_WRITER tasks assigned. */
static void test_setup_writers(void)
{
    http_reply r;
    json_t *camp = json_pack("{s:s, s:f, s:f, s:b, s:f, s:f}", "name", "dur", "epsilon_min", 0.1,
                             "epsilon_max", 5.0, "allow_infinite", 0, "epsilon_budget", 1e6,
                             "epsilon_default", 1.0);
    CHECK_INT(raw_post_json(srv.url, "/v1/campaigns", camp, op_token, &r), 201);
    json_decref(camp);
    http_reply_free(&r);

    size_t cap = WRITERS * PER_WRITER * 80, len = 0;
    char *jsonl = malloc(cap);
    for (int i = 0; i < WRITERS * PER_WRITER; i++)
        len += (size_t)snprintf(
            jsonl + len, cap - len,
            "{\"id\":\"d%d\",\"prompt\":\"p%d\",\"responses\":[\"a\",\"b%d\"]}\n", i, i, i);
    char url[256];
    snprintf(url, sizeof url, "%s/v1/tasks?campaign=dur", srv.url);
    http_raw("POST", url, jsonl, len, op_token, &r);
    CHECK_INT(r.status, 200);
    http_reply_free(&r);
    free(jsonl);

    json_t *tb = json_pack("{s:s, s:i}", "campaign", "dur", "count", WRITERS);
    raw_post_json(srv.url, "/v1/enrollment-tokens", tb, op_token, &r);
    json_decref(tb);
    json_t *toks = json_loads(r.body, 0, NULL);
    http_reply_free(&r);

    for (int i = 0; i < WRITERS; i++) {
        const char *t =
            json_string_value(json_array_get(json_object_get(toks, "tokens"), (size_t)i));
        CHECK_INT(raw_enroll(&w[i].ann, srv.url, t ? t : ""), 201);
        json_t *tasks;
        CHECK_INT(raw_next(&w[i].ann, PER_WRITER, &tasks), 200);
        w[i].ntasks = (int)json_array_size(tasks);
        for (int k = 0; k < w[i].ntasks; k++)
            w[i].tasks[k] =
                json_integer_value(json_object_get(json_array_get(tasks, (size_t)k), "task_id"));
        json_decref(tasks);
    }
    json_decref(toks);
}

/* The writers stream until KILL_AFTER labels are acknowledged, then the
 * server gets SIGKILL. Returns the number acknowledged. */
static int test_kill_mid_stream(void)
{
    pthread_t tid[WRITERS];
    for (int i = 0; i < WRITERS; i++)
        pthread_create(&tid[i], NULL, stream, &w[i]);
    for (int waited = 0;
         waited < 60000 && __atomic_load_n(&acked_so_far, __ATOMIC_SEQ_CST) < KILL_AFTER; waited++)
        usleep(1000);
    server_kill(&srv); /* SIGKILL mid-stream */
    int acked = 0;
    for (int i = 0; i < WRITERS; i++) {
        pthread_join(tid[i], NULL);
        acked += w[i].nacked;
    }
    check_record(acked > 0 && acked < WRITERS * PER_WRITER, __FILE__, __LINE__,
                 "the kill landed mid-stream (%d of %d acknowledged)", acked, WRITERS * PER_WRITER);
    return acked;
}

/* After a restart every acknowledged label is in the export. */
/* The error name of a reply, "" if none. */
static void reply_error(const http_reply *r, char *out, size_t outlen)
{
    json_t *j = json_loads(r->body ? r->body : "", 0, NULL);
    const char *e = json_string_value(json_object_get(j, "error"));
    snprintf(out, outlen, "%s", e ? e : "");
    json_decref(j);
}

/* After the restart, the nonce index rebuilt from what survived: a resend
 * of an acknowledged label gets its receipt again, and its nonce on a task
 * never sent before is refused as replayed. */
static void test_nonces_after_restart(void)
{
    struct writer *wr = NULL;
    for (int i = 0; i < WRITERS && wr == NULL; i++)
        if (w[i].nacked > 0 && w[i].attempted < w[i].ntasks)
            wr = &w[i];
    CHECK(wr != NULL);
    if (wr == NULL)
        return;
    http_reply r;
    CHECK_INT(raw_post_label(srv.url, &wr->last_acked, &r), 200);
    json_t *j = json_loads(r.body, 0, NULL);
    CHECK_INT(json_integer_value(json_object_get(j, "label_id")), wr->acked[wr->nacked - 1]);
    json_decref(j);
    http_reply_free(&r);

    lp_label_msg m = raw_label(&wr->ann, wr->tasks[wr->attempted], 1, 1.0);
    memcpy(m.nonce, wr->last_acked.nonce, sizeof m.nonce);
    raw_resign(&wr->ann, &m);
    char err[64];
    raw_post_label(srv.url, &m, &r);
    reply_error(&r, err, sizeof err);
    CHECK_STR(err, "replayed_nonce");
    http_reply_free(&r);
    m = raw_label(&wr->ann, wr->tasks[wr->attempted], 1, 1.0); /* a fresh nonce */
    CHECK_INT(raw_post_label(srv.url, &m, &r), 201);
    http_reply_free(&r);
}

static void test_acknowledged_labels_survive(int acked)
{
    http_reply r;
    CHECK_INT(server_restart(&srv, NULL), 0);
    CHECK_INT(raw_get(srv.url, "/v1/export?campaign=dur", op_token, &r), 200);
    int64_t *stored = malloc(sizeof *stored * WRITERS * PER_WRITER + 8);
    int nstored = 0;
    for (char *line = r.body; line && *line;) {
        char *nl = strchr(line, '\n');
        json_t *j = json_loadb(line, nl ? (size_t)(nl - line) : strlen(line), 0, NULL);
        if (j && nstored < WRITERS * PER_WRITER)
            stored[nstored++] = json_integer_value(json_object_get(j, "label_id"));
        json_decref(j);
        line = nl ? nl + 1 : NULL;
    }
    http_reply_free(&r);
    qsort(stored, (size_t)nstored, sizeof *stored, cmp_i64);
    int missing = 0;
    for (int i = 0; i < WRITERS; i++)
        for (int k = 0; k < w[i].nacked; k++)
            missing +=
                bsearch(&w[i].acked[k], stored, (size_t)nstored, sizeof *stored, cmp_i64) == NULL;
    check_record(missing == 0, __FILE__, __LINE__,
                 "%d of %d acknowledged labels missing after kill -9 (%d stored)", missing, acked,
                 nstored);
    free(stored);
    /* the counters and spends of the labels that survived, as SQL recomputes
     * them, while the restarted server has the file open */
    CHECK_INT(db_counters_mismatch(srv.db), 0);
    test_nonces_after_restart();
    CHECK_INT(server_stop(&srv), 0);
}

/* SQLite's integrity check of the database after all this. */
static void test_database_integrity(void)
{
    if (server_skip_on_postgresql("the SQLite integrity check",
                                  "PostgreSQL checks its pages itself (data checksums)")) {
        CHECK_INT(db_counters_mismatch(srv.db), 0);
        return;
    }
    sqlite3 *db;
    CHECK_INT(sqlite3_open(srv.db, &db), SQLITE_OK);
    sqlite3_stmt *st;
    const char *res = NULL;
    if (sqlite3_prepare_v2(db, "PRAGMA integrity_check", -1, &st, NULL) == SQLITE_OK &&
        sqlite3_step(st) == SQLITE_ROW)
        res = (const char *)sqlite3_column_text(st, 0);
    CHECK_STR(res, "ok");
    sqlite3_finalize(st);
    sqlite3_close(db);
    CHECK_INT(db_counters_mismatch(srv.db), 0);
}

int main(void)
{
    lp_rng_init();
    if (server_start(&srv, NULL) != 0) {
        check_record(0, __FILE__, __LINE__, "server starts");
        return check_summary();
    }
    snprintf(op_token, sizeof op_token, "%s", srv.token);
    test_setup_writers();
    int acked = test_kill_mid_stream();
    test_acknowledged_labels_survive(acked);
    test_database_integrity();
    server_cleanup(&srv);
    return check_summary();
}
