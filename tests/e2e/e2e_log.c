/*
 * e2e_log.c — what the server logs, end to end: the real ldpref-server with
 * --log-format json, its stderr in a file, driven through a whole campaign
 * over real HTTP with real signatures: campaign, enrollment tokens, a task
 * upload, enrollment, task assignment, labels one by one and in batches
 * (the campaign completes), rejected requests, a retrain, an activation, a
 * score and an export. Then the log, line by line:
 *
 *  - every line is a JSON object with time, level and event;
 *  - exactly one "request" line per HTTP request the test made, each with
 *    the id the reply carried in X-Request-Id, the reply's status, and
 *    only the fields of the request schema (none could carry a label);
 *    a valid X-Request-Id sent by the test is kept, an invalid one
 *    replaced by a new id; an export's line counts the bytes streamed;
 *  - the events: server start and stop, enrollment (pseudonym and
 *    campaign), the campaign's completion (once, when its last label
 *    lands), retrain queued/start/end, activation by the run and by the
 *    operator;
 *  - no secret and no body: the operator token, every enrollment token,
 *    every annotator key, label signature and nonce, the task and score
 *    texts and the query strings appear nowhere in the log.
 *
 * And, while the server runs, its threads carry the names `top -H` and
 * `perf` show: one ldpref-writer, one ldpref-accept, the workers, the score
 * workers, the retrain worker and scheduler, libmicrohttpd's event loop
 * (MHD-*).
 */
#include "check.h"
#include "clock.h"
#include "proc_threads.h"
#include "raw_annotator.h"
#include "server_proc.h"
#include "wire.h"

#include <jansson.h>
#include <sodium.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define CAMPAIGN "log-campaign"
#define TASKS 20
#define PROMPT_MARK "PROMPT-SENTINEL-7Q"
#define SCORE_MARK "SCORE-SENTINEL-4K"
#define QUERY_MARK "QUERY-SENTINEL-9Z"

static server_proc srv;

/* ---- every request the test makes, and what it saw ---- */

#define SENT_MAX 256
static struct sent {
    char method[8];
    char request_id[80]; /* from the reply's X-Request-Id */
    long status;
} sent[SENT_MAX];
static int n_sent;

/* ---- the strings that must never be logged ---- */

#define SECRETS_MAX 512
static char *secrets[SECRETS_MAX];
static int n_secrets;

static void secret(const char *s)
{
    if (n_secrets < SECRETS_MAX && s != NULL && *s)
        secrets[n_secrets++] = strdup(s);
}

static void secret_bytes(const uint8_t *b, size_t n)
{
    char b64[LP_B64_MAX];
    lp_b64_encode(b, n, b64);
    secret(b64);
    char hex[2 * 128 + 1];
    if (n <= 128) {
        sodium_bin2hex(hex, sizeof hex, b, n);
        secret(hex);
    }
}

/* One request: counted, recorded, its reply in *r (free it). */
static long request(const char *method, const char *path, const char *body, const char *bearer,
                    const char *request_id, http_reply *r)
{
    char url[512];
    snprintf(url, sizeof url, "%s%s", srv.url, path);
    http_raw_id(method, url, body, body ? strlen(body) : 0, bearer, request_id, r);
    if (n_sent < SENT_MAX) {
        struct sent *s = &sent[n_sent];
        snprintf(s->method, sizeof s->method, "%s", method);
        snprintf(s->request_id, sizeof s->request_id, "%s", r->request_id);
        s->status = r->status;
    }
    n_sent++;
    return r->status;
}

/* An operator request expecting want; returns the JSON reply (or NULL). */
static json_t *op(const char *method, const char *path, const char *body, long want)
{
    http_reply r;
    long st = request(method, path, body, srv.token, NULL, &r);
    check_record(st == want, __FILE__, __LINE__, "%s %s: want %ld, got %ld %s", method, path, want,
                 st, r.body ? r.body : "");
    json_t *j = r.body ? json_loads(r.body, 0, NULL) : NULL;
    http_reply_free(&r);
    return j;
}

/* An annotator's signed message as a POST (no bearer). */
static json_t *post_signed(const char *path, json_t *body, long want)
{
    char *text = json_dumps(body, JSON_COMPACT);
    json_decref(body);
    http_reply r;
    long st = request("POST", path, text, NULL, NULL, &r);
    check_record(st == want, __FILE__, __LINE__, "POST %s: want %ld, got %ld %s", path, want, st,
                 r.body ? r.body : "");
    free(text);
    json_t *j = r.body ? json_loads(r.body, 0, NULL) : NULL;
    http_reply_free(&r);
    return j;
}

static void enroll(raw_annotator *a, const char *token)
{
    a->url = srv.url;
    crypto_sign_keypair(a->pk, a->sk);
    secret_bytes(a->pk, LP_KEY_BYTES);
    lp_enroll_msg m = {0};
    memcpy(m.key, a->pk, LP_KEY_BYTES);
    snprintf(m.token, sizeof m.token, "%s", token);
    lp_sign_enroll(&m, a->sk);
    secret_bytes(m.sig, LP_SIG_BYTES);
    json_decref(post_signed("/v1/annotators", lp_wire_enroll_encode(&m), 201));
}

/* Task ids assigned to a (at most max). */
static int next_tasks(raw_annotator *a, int count, int64_t *ids, int max)
{
    lp_next_msg m = {0};
    memcpy(m.key, a->pk, LP_KEY_BYTES);
    m.count = (uint32_t)count;
    m.timestamp_ms = lp_now_ms();
    lp_sign_next(&m, a->sk);
    secret_bytes(m.sig, LP_SIG_BYTES);
    json_t *j = post_signed("/v1/tasks/next", lp_wire_next_encode(&m), 200);
    json_t *tasks = json_object_get(j, "tasks");
    int n = 0;
    for (size_t i = 0; i < json_array_size(tasks) && n < max; i++)
        ids[n++] = json_integer_value(json_object_get(json_array_get(tasks, i), "task_id"));
    json_decref(j);
    return n;
}

static lp_label_msg label(const raw_annotator *a, int64_t task, int z)
{
    lp_label_msg m = raw_label(a, task, z, 1.0);
    secret_bytes(m.sig, LP_SIG_BYTES);
    secret_bytes(m.nonce, LP_NONCE_BYTES);
    return m;
}

static void post_batch(const raw_annotator *a, const int64_t *tasks, int n, long want)
{
    json_t *arr = json_array();
    for (int i = 0; i < n; i++) {
        lp_label_msg m = label(a, tasks[i], i & 1);
        json_array_append_new(arr, lp_wire_label_encode(&m));
    }
    json_decref(post_signed("/v1/labels/batch", json_pack("{s:o}", "labels", arr), want));
}

/* ---- the flow ---- */

static void upload_tasks(void)
{
    char *body = malloc(TASKS * 256);
    size_t len = 0;
    for (int i = 0; i < TASKS; i++)
        len += (size_t)sprintf(body + len,
                               "{\"prompt\":\"" PROMPT_MARK " question %d\",\"chosen\":\"a "
                               "careful answer %d\",\"rejected\":\"a sloppy reply %d\"}\n",
                               i, i, i);
    http_reply r;
    request("POST", "/v1/tasks?campaign=" CAMPAIGN, body, srv.token, NULL, &r);
    CHECK_INT(r.status, 200);
    http_reply_free(&r);
    free(body);
    secret(PROMPT_MARK);
    secret("careful answer");
}

static int64_t run_wait(int64_t run)
{
    char path[64];
    snprintf(path, sizeof path, "/v1/retrain?run=%lld", (long long)run);
    for (int i = 0; i < 6000; i++) {
        json_t *j = op("GET", path, NULL, 200);
        const char *s = json_string_value(json_object_get(j, "status"));
        if (s && (!strcmp(s, "succeeded") || !strcmp(s, "failed") || !strcmp(s, "cancelled"))) {
            CHECK_STR(s, "succeeded");
            int64_t v = json_integer_value(json_object_get(j, "model_version"));
            json_decref(j);
            return v;
        }
        json_decref(j);
        usleep(20000);
    }
    CHECK(0 && "the run did not finish");
    return 0;
}

/* Request ids the test chose, and what came back for each. */
static const char OWN_ID[] = "e2e-log.request_1";
static const char *const BAD_IDS[] = {
    "has space", "semi;colon", "x\"quote",
    "0123456789012345678901234567890123456789012345678901234567890123456789"};
static char bad_id_replies[4][80];
static size_t export_bytes; /* the export's body as the client received it */

static void flow(void)
{
    json_decref(op("POST", "/v1/campaigns",
                   "{\"name\":\"" CAMPAIGN "\",\"epsilon_min\":0.5,\"epsilon_max\":4,"
                   "\"epsilon_budget\":1000,\"labels_per_task\":1}",
                   201));
    json_t *tok =
        op("POST", "/v1/enrollment-tokens", "{\"campaign\":\"" CAMPAIGN "\",\"count\":2}", 201);
    const char *t0 = json_string_value(json_array_get(json_object_get(tok, "tokens"), 0));
    const char *t1 = json_string_value(json_array_get(json_object_get(tok, "tokens"), 1));
    CHECK(t0 != NULL && t1 != NULL);
    secret(t0);
    secret(t1);
    upload_tasks();

    raw_annotator a, b;
    enroll(&a, t0 ? t0 : "");
    enroll(&b, t1 ? t1 : "");
    json_decref(tok);
    int64_t ta[TASKS], tb[TASKS];
    int na = next_tasks(&a, TASKS / 2, ta, TASKS);
    int nb = next_tasks(&b, TASKS / 2, tb, TASKS);
    CHECK_INT(na, TASKS / 2);
    CHECK_INT(nb, TASKS / 2);

    /* a: half one by one, with a request id of the test's own on the first */
    for (int i = 0; i < na / 2; i++) {
        lp_label_msg m = label(&a, ta[i], i & 1);
        json_t *body = lp_wire_label_encode(&m);
        char *text = json_dumps(body, JSON_COMPACT);
        json_decref(body);
        http_reply r;
        request("POST", "/v1/labels", text, NULL, i == 0 ? OWN_ID : NULL, &r);
        CHECK_INT(r.status, 201);
        if (i == 0)
            CHECK_STR(r.request_id, OWN_ID);
        else
            CHECK(strlen(r.request_id) == 16); /* a new id, 16 hex digits */
        http_reply_free(&r);
        free(text);
    }
    /* rejected: a forged signature, a replayed nonce, no token, bad JSON,
     * an unknown path with a query string */
    lp_label_msg forged = label(&a, ta[na / 2], 1);
    forged.sig[0] ^= 1;
    secret_bytes(forged.sig, LP_SIG_BYTES);
    json_decref(post_signed("/v1/labels", lp_wire_label_encode(&forged), 401));
    lp_label_msg once = label(&a, ta[na / 2], 0);
    json_decref(post_signed("/v1/labels", lp_wire_label_encode(&once), 201));
    json_decref(post_signed("/v1/labels", lp_wire_label_encode(&once), 200)); /* idempotent */
    lp_label_msg replay = label(&a, ta[na / 2 + 1], 1);
    memcpy(replay.nonce, once.nonce, LP_NONCE_BYTES);
    raw_resign(&a, &replay);
    secret_bytes(replay.sig, LP_SIG_BYTES);
    json_decref(post_signed("/v1/labels", lp_wire_label_encode(&replay), 409));
    http_reply r;
    request("GET", "/v1/stats", NULL, NULL, NULL, &r);
    CHECK_INT(r.status, 401);
    http_reply_free(&r);
    json_decref(op("POST", "/v1/campaigns", "{\"name\":", 400));
    /* refused before its body is read: still a line, still an id */
    size_t big_len = 128 * 1024;
    char *big = malloc(big_len + 1);
    memset(big, ' ', big_len);
    big[big_len] = '\0';
    request("POST", "/v1/labels", big, NULL, "too-large.1", &r);
    CHECK_INT(r.status, 413);
    CHECK_STR(r.request_id, "too-large.1");
    http_reply_free(&r);
    free(big);
    request("GET", "/nope?q=" QUERY_MARK, NULL, NULL, NULL, &r);
    CHECK_INT(r.status, 404);
    http_reply_free(&r);
    secret(QUERY_MARK);
    /* invalid request ids are replaced */
    for (int k = 0; k < 4; k++) {
        request("GET", "/v1/healthz", NULL, NULL, BAD_IDS[k], &r);
        CHECK_INT(r.status, 200);
        snprintf(bad_id_replies[k], sizeof bad_id_replies[k], "%s", r.request_id);
        CHECK(strlen(r.request_id) == 16 && strcmp(r.request_id, BAD_IDS[k]) != 0);
        http_reply_free(&r);
    }

    /* the rest in batches: a's remainder, then all of b's (the last label
     * completes the campaign) */
    post_batch(&a, ta + na / 2 + 1, na - na / 2 - 1, 200);
    post_batch(&b, tb, nb, 200);
    json_t *progress = op("GET", "/v1/stats", NULL, 200);
    json_decref(progress);

    /* learn, activate, score, export */
    json_t *run = op("POST", "/v1/retrain", "{\"campaign\":\"" CAMPAIGN "\"}", 202);
    int64_t run_id = json_integer_value(json_object_get(run, "run"));
    json_decref(run);
    CHECK(run_id > 0);
    int64_t version = run_id > 0 ? run_wait(run_id) : 0;
    CHECK(version > 0);
    char body[128];
    snprintf(body, sizeof body, "{\"version\":%lld}", (long long)version);
    json_decref(op("POST", "/v1/models/activate", body, 200));
    json_t *score = op("POST", "/v1/score",
                       "{\"prompt\":\"" SCORE_MARK " what is it?\",\"candidates\":[{\"text\":\""
                       "one " SCORE_MARK "\"},{\"text\":\"two\"}]}",
                       200);
    CHECK(json_object_get(score, "scores") != NULL || json_object_get(score, "candidates"));
    json_decref(score);
    secret(SCORE_MARK);
    request("GET", "/v1/export?campaign=" CAMPAIGN, NULL, srv.token, NULL, &r);
    CHECK_INT(r.status, 200);
    CHECK(r.len > 0);
    export_bytes = r.len;
    http_reply_free(&r);
    secret(srv.token);
}

/* ---- reading the log ---- */

static const char *const REQUEST_FIELDS[] = {
    "time",        "level",  "event", "request_id", "method",      "route", "status",
    "duration_ms", "client", "bytes", "error",      "termination", NULL};

static int allowed_request_field(const char *key)
{
    for (int k = 0; REQUEST_FIELDS[k]; k++)
        if (strcmp(key, REQUEST_FIELDS[k]) == 0)
            return 1;
    return 0;
}

static int count_event(json_t *lines, const char *event)
{
    int n = 0;
    size_t i;
    json_t *l;
    json_array_foreach(lines, i, l)
    {
        const char *e = json_string_value(json_object_get(l, "event"));
        n += e && strcmp(e, event) == 0;
    }
    return n;
}

static json_t *find_event(json_t *lines, const char *event, const char *key, const char *value)
{
    size_t i;
    json_t *l;
    json_array_foreach(lines, i, l)
    {
        const char *e = json_string_value(json_object_get(l, "event"));
        const char *v = key ? json_string_value(json_object_get(l, key)) : NULL;
        if (e && strcmp(e, event) == 0 && (key == NULL || (v && strcmp(v, value) == 0)))
            return l;
    }
    return NULL;
}

static void check_log(const char *text)
{
    json_t *lines = json_array();
    int bad = 0, n_lines = 0;
    char *copy = strdup(text);
    for (char *save = NULL, *ln = strtok_r(copy, "\n", &save); ln;
         ln = strtok_r(NULL, "\n", &save)) {
        n_lines++;
        json_t *j = json_loads(ln, 0, NULL);
        if (!json_is_object(j) || !json_is_string(json_object_get(j, "time")) ||
            !json_is_string(json_object_get(j, "level")) ||
            !json_is_string(json_object_get(j, "event"))) {
            if (bad++ < 3)
                fprintf(stderr, "not a log line: %.200s\n", ln);
            json_decref(j);
            continue;
        }
        json_array_append_new(lines, j);
    }
    free(copy);
    CHECK(n_lines > n_sent);
    CHECK_INT(bad, 0);

    /* one request line per request, matched by id, with the same status */
    CHECK_INT(count_event(lines, "request"), n_sent);
    int matched = 0, schema_bad = 0;
    for (int k = 0; k < n_sent && k < SENT_MAX; k++) {
        int found = 0;
        size_t i;
        json_t *l;
        json_array_foreach(lines, i, l)
        {
            const char *e = json_string_value(json_object_get(l, "event"));
            const char *id = json_string_value(json_object_get(l, "request_id"));
            if (strcmp(e, "request") != 0 || id == NULL || strcmp(id, sent[k].request_id) != 0)
                continue;
            found++;
            const char *method = json_string_value(json_object_get(l, "method"));
            const char *route = json_string_value(json_object_get(l, "route"));
            if (json_integer_value(json_object_get(l, "status")) != sent[k].status ||
                method == NULL || strcmp(method, sent[k].method) != 0 || route == NULL ||
                strchr(route, '?') != NULL)
                schema_bad++;
            const char *key;
            json_t *v;
            json_object_foreach(l, key, v) schema_bad += !allowed_request_field(key);
            CHECK_STR(json_string_value(json_object_get(l, "client")), "127.0.0.1");
            CHECK(json_is_number(json_object_get(l, "duration_ms")));
            if (route && strcmp(route, "/v1/export") == 0)
                CHECK_INT(json_integer_value(json_object_get(l, "bytes")), export_bytes);
        }
        matched += found == 1;
    }
    CHECK_INT(matched, n_sent);
    CHECK_INT(schema_bad, 0);
    json_t *own = find_event(lines, "request", "request_id", OWN_ID);
    CHECK(own != NULL);
    CHECK_STR(json_string_value(json_object_get(own, "route")), "/v1/labels");
    for (int k = 0; k < 4; k++) {
        CHECK(find_event(lines, "request", "request_id", bad_id_replies[k]) != NULL);
        CHECK(strstr(text, BAD_IDS[k]) == NULL);
    }
    json_t *rejected = find_event(lines, "request", "error", "bad_signature");
    CHECK(rejected != NULL);
    CHECK_INT(json_integer_value(json_object_get(rejected, "status")), 401);
    CHECK(find_event(lines, "request", "error", "replayed_nonce") != NULL);
    CHECK(find_event(lines, "request", "route", "/nope") != NULL);
    json_t *large = find_event(lines, "request", "request_id", "too-large.1");
    CHECK_STR(json_string_value(json_object_get(large, "error")), "body_too_large");

    /* the events */
    CHECK_INT(count_event(lines, "server_start"), 1);
    CHECK_INT(count_event(lines, "server_stop"), 1);
    CHECK_INT(count_event(lines, "enrollment"), 2);
    json_t *en = find_event(lines, "enrollment", "campaign", CAMPAIGN);
    const char *pseudonym = json_string_value(json_object_get(en, "pseudonym"));
    CHECK(pseudonym != NULL && strncmp(pseudonym, "ann-", 4) == 0);
    /* an event inside a request names it: the line of that request */
    const char *en_id = json_string_value(json_object_get(en, "request_id"));
    json_t *en_req = en_id ? find_event(lines, "request", "request_id", en_id) : NULL;
    CHECK(en_req != NULL);
    CHECK_STR(json_string_value(json_object_get(en_req, "route")), "/v1/annotators");
    CHECK_INT(count_event(lines, "campaign_complete"), 1);
    json_t *done = find_event(lines, "campaign_complete", "campaign", CAMPAIGN);
    CHECK_INT(json_integer_value(json_object_get(done, "tasks")), TASKS);
    CHECK_INT(json_integer_value(json_object_get(done, "labels")), TASKS);
    CHECK_INT(count_event(lines, "retrain_queued"), 1);
    CHECK_INT(count_event(lines, "retrain_start"), 1);
    json_t *end = find_event(lines, "retrain_end", "status", "succeeded");
    CHECK(end != NULL);
    CHECK_INT(json_integer_value(json_object_get(end, "labels")), TASKS);
    CHECK(json_is_number(json_object_get(end, "objective")));
    CHECK(json_integer_value(json_object_get(end, "duration_ms")) >= 0);
    CHECK(find_event(lines, "model_activated", "by", "retrain") != NULL);
    json_t *act = find_event(lines, "model_activated", "by", "operator");
    CHECK(act != NULL && json_is_string(json_object_get(act, "request_id")));
    CHECK_INT(count_event(lines, "storage_error"), 0);

    /* nothing secret, no body, no label under any name */
    int leaks = 0;
    for (int k = 0; k < n_secrets; k++)
        if (strstr(text, secrets[k]) != NULL) {
            leaks++;
            fprintf(stderr, "logged: %s\n", secrets[k]);
        }
    CHECK_INT(leaks, 0);
    CHECK(n_secrets > 4 * TASKS); /* every label's signature and nonce, at least */
    static const char *const NEVER[] = {
        "\"z\":",     "\"label\":", "\"choice\":", "\"signature\":", "\"key\":", "\"token\":",
        "\"nonce\":", "Bearer",     NULL};
    for (int k = 0; NEVER[k]; k++)
        check_record(strstr(text, NEVER[k]) == NULL, __FILE__, __LINE__, "the log holds %s",
                     NEVER[k]);
    json_decref(lines);
}

static char *read_file(const char *path, size_t *len)
{
    FILE *f = fopen(path, "r");
    if (f == NULL)
        return NULL;
    size_t cap = 1 << 16, n = 0;
    char *buf = malloc(cap);
    size_t got;
    while ((got = fread(buf + n, 1, cap - n - 1, f)) > 0) {
        n += got;
        if (n + 1 >= cap)
            buf = realloc(buf, cap *= 2);
    }
    fclose(f);
    buf[n] = '\0';
    *len = n;
    return buf;
}

static void check_thread_names(pid_t pid)
{
    long cores = sysconf(_SC_NPROCESSORS_ONLN);
    int workers = 2 * cores < 4 ? 4 : (int)(2 * cores); /* --workers 0 */
    proc_thread t[256];
    int n = proc_threads(pid, t, 256);
    CHECK_INT(proc_threads_named(t, n, "ldpref-writer"), 1);
    CHECK_INT(proc_threads_named(t, n, "ldpref-accept"), 1);
    CHECK_INT(proc_threads_named(t, n, "ldpref-worker"), workers);
    CHECK_INT(proc_threads_named(t, n, "ldpref-score"), workers / 4 > 1 ? workers / 4 : 1);
    CHECK_INT(proc_threads_named(t, n, "ldpref-retrain"), 1);
    CHECK_INT(proc_threads_named(t, n, "ldpref-schedule"), 1);
    CHECK(proc_threads_named(t, n, "MHD-*") >= 1);
}

int main(void)
{
    if (sodium_init() < 0)
        return 1;
    const char *args[] = {"--log-format", "json", "--log-level", "info", NULL};
    if (server_start(&srv, args) != 0) {
        CHECK(0 && "server_start");
        return check_summary();
    }
    flow();
    check_thread_names(srv.pid);
    CHECK_INT(server_stop(&srv), 0);
    size_t len = 0;
    char *log = read_file(srv.log, &len);
    CHECK(log != NULL && len > 0);
    if (log != NULL)
        check_log(log);
    free(log);
    for (int k = 0; k < n_secrets; k++)
        free(secrets[k]);
    server_cleanup(&srv);
    return check_summary();
}
