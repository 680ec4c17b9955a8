/*
 * test_api.c — the server's handlers driven directly (no sockets) over a
 * real SQLite file in a temporary directory, with real Ed25519 keys.
 *
 * Covers every error of the label check order in docs/protocol.md, the
 * idempotent resend, batches with mixed items, enrollment, next tasks, task
 * upload formats (including the OASST pairs file), export orientation,
 * that a rejected request stores nothing (row counts before and after),
 * and the rate limits of enrollment, score and tasks/next.
 */
#include "api.h"
#include "auth.h"
#include "canon.h"
#include "check.h"
#include "clock.h"
#include "error.h"
#include "files.h"
#include "metrics.h"
#include "store.h"
#include "store_fixture.h"
#include "tasks.h"
#include "wire.h"

#include <math.h>
#include <sodium.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define PAIRS "tests/data/oasst-en100/en_100.pairs.jsonl"

static lp_store *store;
static lp_api *api;
static char optok[LP_AUTH_TOKEN_MAX];
static store_fixture fx;

typedef struct annot {
    uint8_t pk[32], sk[64];
    int64_t tasks[16];
    int swapped[16];
    size_t n_tasks;
} annot;

/* Calls the handler; returns the parsed JSON body (NULL for non-JSON) and
 * the HTTP status the server would send. */
static json_t *call(const char *method, const char *path, const char *body, size_t len,
                    const char *bearer, const char *campaign, int *status, lp_response *keep)
{
    lp_param p = {"campaign", campaign};
    lp_request req = {.method = method,
                      .path = path,
                      .params = campaign ? &p : NULL,
                      .n_params = campaign ? 1 : 0,
                      .body = body,
                      .body_len = len,
                      .bearer = bearer};
    lp_response resp;
    lp_api_handle(api, &req, &resp);
    *status = resp.error ? lp_error_http_status(resp.error) : resp.status;
    json_t *j = NULL;
    if (resp.body && strcmp(resp.content_type, "application/json") == 0)
        j = json_loadb(resp.body, resp.body_len, 0, NULL);
    if (keep)
        *keep = resp;
    else
        lp_response_clear(&resp);
    return j;
}

static json_t *post(const char *path, const char *body, const char *bearer, int *status)
{
    return call("POST", path, body, body ? strlen(body) : 0, bearer, NULL, status, NULL);
}

static const char *err_name(json_t *j)
{
    return j ? json_string_value(json_object_get(j, "error")) : NULL;
}

static int64_t stat_of(const char *key)
{
    int st;
    json_t *j = call("GET", "/v1/stats", NULL, 0, optok, NULL, &st, NULL);
    int64_t v = j ? json_integer_value(json_object_get(j, key)) : -1;
    json_decref(j);
    return v;
}

static void enroll_token(const char *campaign, char *out)
{
    char body[128];
    int st;
    snprintf(body, sizeof body, "{\"campaign\":\"%s\",\"count\":1}", campaign);
    json_t *j = post("/v1/enrollment-tokens", body, optok, &st);
    CHECK_INT(st, 201);
    snprintf(out, 128, "%s", json_string_value(json_array_get(json_object_get(j, "tokens"), 0)));
    json_decref(j);
}

static json_t *enroll(annot *a, const char *token, int tamper, int *st)
{
    lp_enroll_msg m = {0};
    memcpy(m.key, a->pk, 32);
    snprintf(m.token, sizeof m.token, "%s", token);
    lp_sign_enroll(&m, a->sk);
    if (tamper)
        m.sig[0] ^= 1;
    json_t *o = lp_wire_enroll_encode(&m);
    char *s = json_dumps(o, JSON_COMPACT);
    json_t *j = post("/v1/annotators", s, NULL, st);
    free(s);
    json_decref(o);
    return j;
}

static void new_annot(annot *a, const char *campaign)
{
    memset(a, 0, sizeof *a);
    crypto_sign_keypair(a->pk, a->sk);
    char tok[128];
    int st;
    enroll_token(campaign, tok);
    json_decref(enroll(a, tok, 0, &st));
    CHECK_INT(st, 201);
}

static void next_tasks(annot *a, uint32_t count)
{
    lp_next_msg m = {0};
    memcpy(m.key, a->pk, 32);
    m.count = count;
    m.timestamp_ms = lp_now_ms();
    lp_sign_next(&m, a->sk);
    json_t *o = lp_wire_next_encode(&m);
    char *s = json_dumps(o, JSON_COMPACT);
    int st;
    json_t *j = post("/v1/tasks/next", s, NULL, &st);
    CHECK_INT(st, 200);
    json_t *tasks = json_object_get(j, "tasks");
    a->n_tasks = 0;
    for (size_t i = 0; i < json_array_size(tasks) && i < 16; i++) {
        a->tasks[i] = json_integer_value(json_object_get(json_array_get(tasks, i), "task_id"));
        a->n_tasks++;
    }
    free(s);
    json_decref(o);
    json_decref(j);
}

/* A signed label as JSON text (caller frees). */
static char *label_json(const annot *a, int64_t task, int z, double eps, const uint8_t *nonce,
                        int64_t ts, int tamper)
{
    lp_label_msg m = {0};
    memcpy(m.key, a->pk, 32);
    m.task_id = task;
    m.z = z;
    m.epsilon = eps;
    if (nonce)
        memcpy(m.nonce, nonce, 16);
    else
        randombytes_buf(m.nonce, 16);
    m.timestamp_ms = ts ? ts : lp_now_ms();
    lp_sign_label(&m, a->sk);
    if (tamper)
        m.z ^= 1;
    json_t *o = lp_wire_label_encode(&m);
    char *s = json_dumps(o, JSON_COMPACT);
    json_decref(o);
    return s;
}

/* Submits a label; checks the error name (NULL = success) and that the
 * label count moved only on a new success. Returns the body text. */
static char *submit(const char *body, const char *want, int want_status, int line)
{
    int64_t before = stat_of("labels");
    lp_response resp;
    int st;
    json_t *j = call("POST", "/v1/labels", body, strlen(body), NULL, NULL, &st, &resp);
    const char *got = err_name(j);
    check_record(want ? (got && strcmp(got, want) == 0) : got == NULL, __FILE__, line,
                 "label error: want %s got %s", want ? want : "(none)", got ? got : "(none)");
    check_record(st == want_status, __FILE__, line, "status want %d got %d", want_status, st);
    int64_t after = stat_of("labels");
    check_record(after == before + (want_status == 201), __FILE__, line, "labels %lld -> %lld",
                 (long long)before, (long long)after);
    char *text = resp.body ? strdup(resp.body) : NULL;
    lp_response_clear(&resp);
    json_decref(j);
    return text;
}
#define SUBMIT(body, want, st) free(submit(body, want, st, __LINE__))

static void test_tasks_upload(void)
{
    size_t len = 0;
    char *pairs = file_read_all(PAIRS, &len);
    CHECK(pairs != NULL);
    if (!pairs)
        return;
    int st;
    json_t *j = call("POST", "/v1/tasks", pairs, len, optok, NULL, &st, NULL);
    CHECK_INT(st, 200);
    CHECK_INT(json_integer_value(json_object_get(j, "loaded")), 732);
    CHECK_INT(json_integer_value(json_array_get(json_object_get(j, "task_ids"), 0)), 1);
    CHECK_INT(json_integer_value(json_array_get(json_object_get(j, "task_ids"), 1)), 732);
    json_decref(j);
    j = call("POST", "/v1/tasks", pairs, len, optok, NULL, &st, NULL);
    CHECK_INT(json_integer_value(json_object_get(j, "loaded")), 0);
    CHECK_INT(json_integer_value(json_object_get(j, "skipped_duplicates")), 732);
    json_decref(j);
    free(pairs);
    CHECK_INT(stat_of("tasks"), 732);

    /* TRL, generic with features, blank line: one upload into campaign c2 */
    const char *mixed = "{\"prompt\":\"p1\",\"chosen\":\"c\",\"rejected\":\"r\"}\n"
                        "\n"
                        "{\"id\":\"g1\",\"prompt\":\"p2\",\"responses\":[\"x\",\"y\"],"
                        "\"features\":[[1,2,3],[4,5,6]]}\r\n"
                        "{\"id\":7,\"prompt\":\"p3\",\"chosen\":\"c\",\"rejected\":\"r\","
                        "\"chosen_features\":[0.5],\"rejected_features\":[-0.5]}\n";
    j = call("POST", "/v1/tasks", mixed, strlen(mixed), optok, "c2", &st, NULL);
    CHECK_INT(st, 200);
    CHECK_INT(json_integer_value(json_object_get(j, "loaded")), 3);
    json_decref(j);

    /* malformed line 3: nothing stored, message names the line */
    const char *bad = "{\"prompt\":\"q1\",\"chosen\":\"c\",\"rejected\":\"r\"}\n"
                      "{\"prompt\":\"q2\",\"responses\":[\"a\",\"b\"]}\n"
                      "{\"prompt\":\"q3\",\"responses\":[\"a\"]}\n";
    int64_t before = stat_of("tasks");
    j = call("POST", "/v1/tasks", bad, strlen(bad), optok, "c2", &st, NULL);
    CHECK_STR(err_name(j), "bad_task");
    CHECK(strstr(json_string_value(json_object_get(j, "message")), "line 3") != NULL);
    json_decref(j);
    const char *notjson = "{\"prompt\":\"q1\",\"chosen\":\"c\",\"rejected\":\"r\"}\n{oops\n";
    j = call("POST", "/v1/tasks", notjson, strlen(notjson), optok, "c2", &st, NULL);
    CHECK_STR(err_name(j), "bad_task");
    json_decref(j);
    j = call("POST", "/v1/tasks", mixed, strlen(mixed), optok, "nope", &st, NULL);
    CHECK_STR(err_name(j), "unknown_campaign");
    json_decref(j);
    j = call("POST", "/v1/tasks", mixed, strlen(mixed), "op_wrong", "c2", &st, NULL);
    CHECK_STR(err_name(j), "unauthorized");
    CHECK_INT(st, 401);
    json_decref(j);
    CHECK_INT(stat_of("tasks"), before);
}

static void test_enroll(void)
{
    annot a;
    memset(&a, 0, sizeof a);
    crypto_sign_keypair(a.pk, a.sk);
    char tok[128];
    int st;
    enroll_token("default", tok);
    json_t *j = enroll(&a, tok, 1, &st);
    CHECK_STR(err_name(j), "bad_signature");
    json_decref(j);
    j = enroll(&a, "et_unknown", 0, &st);
    CHECK_STR(err_name(j), "bad_enrollment_token");
    json_decref(j);
    CHECK_INT(stat_of("annotators"), 0);
    j = enroll(&a, tok, 0, &st); /* the rejected attempts did not consume it */
    CHECK_INT(st, 201);
    CHECK(strncmp(json_string_value(json_object_get(j, "pseudonym")), "ann-", 4) == 0);
    CHECK_STR(json_string_value(json_object_get(j, "campaign")), "default");
    json_decref(j);
    j = enroll(&a, tok, 0, &st);
    CHECK_STR(err_name(j), "already_enrolled");
    json_decref(j);
    annot b;
    memset(&b, 0, sizeof b);
    crypto_sign_keypair(b.pk, b.sk);
    j = enroll(&b, tok, 0, &st);
    CHECK_STR(err_name(j), "bad_enrollment_token");
    json_decref(j);
    CHECK_INT(stat_of("annotators"), 1);
}

/* The annotators of the label cases: a, other and gone (revoked) in
 * "default", small in "small". */
static annot a, other, gone, small;

/* Campaign "small" with three tasks; annotators a, other, gone (revoked)
 * in "default" and small in "small"; assignments come back in order. */
static void test_labels_setup(void)
{
    int st;
    json_t *j = post("/v1/campaigns",
                     "{\"name\":\"small\",\"epsilon_min\":0.5,\"epsilon_max\":2,"
                     "\"epsilon_budget\":2.5,\"epsilon_default\":1}",
                     optok, &st);
    CHECK_INT(st, 201);
    json_decref(j);
    j = post("/v1/campaigns", "{\"name\":\"small\"}", optok, &st);
    CHECK_STR(err_name(j), "campaign_exists");
    json_decref(j);
    const char *t = "{\"prompt\":\"p\",\"chosen\":\"C\",\"rejected\":\"R\"}\n"
                    "{\"prompt\":\"q\",\"chosen\":\"C2\",\"rejected\":\"R2\"}\n"
                    "{\"prompt\":\"r\",\"chosen\":\"C3\",\"rejected\":\"R3\"}\n";
    json_decref(call("POST", "/v1/tasks", t, strlen(t), optok, "small", &st, NULL));

    new_annot(&a, "default");
    new_annot(&other, "default");
    new_annot(&gone, "default");
    new_annot(&small, "small");
    next_tasks(&a, 5);
    CHECK_INT(a.n_tasks, 5);
    annot again = a;
    next_tasks(&again, 3); /* pending assignments come back first, same order */
    CHECK_INT(again.tasks[0], a.tasks[0]);
    CHECK_INT(again.tasks[2], a.tasks[2]);
    next_tasks(&gone, 1);

    /* revoke "gone" */
    char kb[LP_B64_MAX], body[256];
    lp_b64_encode(gone.pk, 32, kb);
    snprintf(body, sizeof body, "{\"key\":\"%s\"}", kb);
    json_decref(post("/v1/annotators/revoke", body, optok, &st));
    CHECK_INT(st, 200);
}

/* Bodies that do not decode into a label. */
static void test_label_decoding_errors(void)
{
    SUBMIT("{\"key\":", "malformed_json", 400);
    SUBMIT("[1,2]", "wrong_type", 400);
    SUBMIT("{\"key\":\"x\"}", "wrong_type", 400);
    char *ok = label_json(&a, a.tasks[0], 1, 1.0, NULL, 0, 0);
    json_t *o = json_loads(ok, 0, NULL);
    json_object_del(o, "nonce");
    char *s1 = json_dumps(o, JSON_COMPACT);
    SUBMIT(s1, "missing_field", 400);
    free(s1);
    json_object_set_new(o, "nonce", json_string("AAAAAAAAAAAAAAAAAAAAAA"));
    json_object_set_new(o, "extra", json_true());
    s1 = json_dumps(o, JSON_COMPACT);
    SUBMIT(s1, "unknown_field", 400);
    free(s1);
    json_object_del(o, "extra");
    json_object_set_new(o, "z", json_integer(2));
    s1 = json_dumps(o, JSON_COMPACT);
    SUBMIT(s1, "bad_label", 400);
    free(s1);
    json_object_set_new(o, "z", json_integer(1));
    json_object_set_new(o, "epsilon", json_real(-1));
    s1 = json_dumps(o, JSON_COMPACT);
    SUBMIT(s1, "bad_epsilon", 400);
    free(s1);
    json_decref(o);
    char deep[200];
    memset(deep, '[', 100);
    memset(deep + 100, ']', 100);
    deep[199] = 0;
    deep[99] = ']';
    SUBMIT(deep, "json_too_deep", 400);

    free(ok);
}

/* The key is checked first, then the signature, then the task. */
static void test_label_key_checked_before_signature(void)
{
    annot stranger;
    crypto_sign_keypair(stranger.pk, stranger.sk);
    char *x = label_json(&stranger, a.tasks[0], 1, 1.0, NULL, 0, 0);
    SUBMIT(x, "unknown_key", 401);
    free(x);
    x = label_json(&gone, gone.tasks[0], 1, 1.0, NULL, 0, 1); /* revoked beats bad sig */
    SUBMIT(x, "revoked_key", 403);
    free(x);
    x = label_json(&a, 999999, 1, 1.0, NULL, 0, 1); /* bad sig beats unknown task */
    SUBMIT(x, "bad_signature", 401);
    free(x);
}

/* A label is stored (201); the identical resend answers 200 with the same receipt. */
static void test_label_accepted_and_resent(void)
{
    char *ok = label_json(&a, a.tasks[0], 1, 1.0, NULL, 0, 0);
    char *r1 = submit(ok, NULL, 201, __LINE__);
    char *r2 = submit(ok, NULL, 200, __LINE__);
    CHECK(r1 && r2 && strcmp(r1, r2) == 0);
    CHECK(r1 && strstr(r1, "\"epsilon\":1.0") != NULL);
    free(r1);
    free(r2);
    free(ok);
}

/* Refusals after the signature, in the documented order. */
static void test_label_refusals_in_check_order(void)
{
    char *x;
    /* conflicting label beats a stale timestamp */
    x = label_json(&a, a.tasks[0], 0, 1.0, NULL, lp_now_ms() - 3600 * 1000, 0);
    SUBMIT(x, "conflicting_label", 409);
    free(x);
    x = label_json(&a, a.tasks[1], 0, 1.0, NULL, lp_now_ms() - 3600 * 1000, 0);
    SUBMIT(x, "stale_timestamp", 400);
    free(x);
    x = label_json(&a, a.tasks[1], 0, 1.0, NULL, lp_now_ms() + 3600 * 1000, 0);
    SUBMIT(x, "stale_timestamp", 400);
    free(x);
    x = label_json(&a, 999999, 0, 1.0, NULL, 0, 0);
    SUBMIT(x, "unknown_task", 404);
    free(x);
    x = label_json(&other, a.tasks[1], 0, 1.0, NULL, 0, 0);
    SUBMIT(x, "task_not_assigned", 409);
    free(x);
    uint8_t nonce[16];
    randombytes_buf(nonce, 16);
    x = label_json(&a, a.tasks[1], 0, 1.0, nonce, 0, 0);
    SUBMIT(x, NULL, 201);
    free(x);
    x = label_json(&a, a.tasks[2], 0, 1.0, nonce, 0, 0);
    SUBMIT(x, "replayed_nonce", 409);
    free(x);
    x = label_json(&a, a.tasks[2], 0, 20.0, NULL, 0, 0);
    SUBMIT(x, "epsilon_out_of_range", 422);
    free(x);
    x = label_json(&a, a.tasks[2], 0, INFINITY, NULL, 0, 0);
    SUBMIT(x, "bad_epsilon", 400);
    free(x);
}

/* The campaign "small" allows 2.5 in total. */
static void test_label_budget(void)
{
    char *x;
    next_tasks(&small, 3);
    CHECK_INT(small.n_tasks, 3);
    x = label_json(&small, small.tasks[0], 1, 2.0, NULL, 0, 0);
    SUBMIT(x, NULL, 201);
    free(x);
    x = label_json(&small, small.tasks[1], 1, 1.0, NULL, 0, 0);
    SUBMIT(x, "budget_exceeded", 403);
    free(x);
    x = label_json(&small, small.tasks[1], 1, 0.5, NULL, 0, 0);
    SUBMIT(x, NULL, 201);
    free(x);
}

/* Batches: per-item results, nothing stored twice, item and body errors. */
static void test_label_batch(void)
{
    int st;
    json_t *j;
    /* batch: valid, bad signature, unknown task, resend of a stored one */
    char *b1 = label_json(&a, a.tasks[2], 1, 1.0, NULL, 0, 0);
    char *b2 = label_json(&a, a.tasks[3], 1, 1.0, NULL, 0, 1);
    char *b3 = label_json(&a, 888888, 1, 1.0, NULL, 0, 0);
    char *b4 = label_json(&a, a.tasks[2], 1, 1.0, NULL, 0, 0); /* conflicts with b1 */
    size_t blen = strlen(b1) + strlen(b2) + strlen(b3) + strlen(b4) + 64;
    char *batch = malloc(blen);
    snprintf(batch, blen, "{\"labels\":[%s,%s,%s,%s]}", b1, b2, b3, b4);
    int64_t before = stat_of("labels");
    j = post("/v1/labels/batch", batch, NULL, &st);
    CHECK_INT(st, 200);
    json_t *res = json_object_get(j, "results");
    CHECK_INT(json_array_size(res), 4);
    CHECK_INT(json_integer_value(json_object_get(json_array_get(res, 0), "status")), 201);
    CHECK_STR(err_name(json_array_get(res, 1)), "bad_signature");
    CHECK_INT(json_integer_value(json_object_get(json_array_get(res, 1), "status")), 401);
    CHECK_STR(err_name(json_array_get(res, 2)), "unknown_task");
    CHECK_STR(err_name(json_array_get(res, 3)), "conflicting_label");
    CHECK_INT(stat_of("labels"), before + 1);
    json_decref(j);
    j = post("/v1/labels/batch", batch, NULL, &st); /* resend: b1 now 200 */
    res = json_object_get(j, "results");
    CHECK_INT(json_integer_value(json_object_get(json_array_get(res, 0), "status")), 200);
    CHECK_INT(stat_of("labels"), before + 1);
    json_decref(j);
    free(batch);
    free(b1);
    free(b2);
    free(b3);
    free(b4);
    j = post("/v1/labels/batch", "{\"labels\":[]}", NULL, &st);
    CHECK_STR(err_name(j), "wrong_type");
    json_decref(j);
    j = post("/v1/labels/batch", "{\"labels\":[1],\"x\":1}", NULL, &st);
    CHECK_STR(err_name(j), "unknown_field");
    json_decref(j);
    j = post("/v1/labels/batch", "{\"labels\":[1]}", NULL, &st);
    CHECK_STR(err_name(json_array_get(json_object_get(j, "results"), 0)), "wrong_type");
    json_decref(j);
}

/* Export: orientation follows z mapped through the presentation order. */
static void test_export_orientation(void)
{
    int st;
    json_t *j;
    lp_response resp;
    j = call("GET", "/v1/export", NULL, 0, optok, "default", &st, &resp);
    CHECK_INT(st, 200);
    CHECK(resp.stream.read != NULL);
    char buf[1 << 16];
    size_t total = 0;
    ssize_t n;
    while (resp.stream.read &&
           (n = resp.stream.read(resp.stream.ctx, buf + total, sizeof buf - 1 - total)) > 0)
        total += (size_t)n;
    buf[total] = 0;
    lp_response_clear(&resp);
    int lines = 0;
    for (char *line = strtok(buf, "\n"); line; line = strtok(NULL, "\n")) {
        json_t *e = json_loads(line, 0, NULL);
        CHECK(e != NULL);
        lines++;
        if (lines == 1) {
            /* the first label: a.tasks[0], z = 1 ("b" preferred) */
            lp_task task;
            CHECK_INT(lp_store_task_get(store, a.tasks[0], &task), LP_OK);
            int zt = (int)json_integer_value(json_object_get(e, "z"));
            CHECK_STR(json_string_value(json_object_get(e, "chosen")),
                      zt ? task.response1 : task.response0);
            CHECK(strncmp(json_string_value(json_object_get(e, "annotator")), "ann-", 4) == 0);
            lp_task_clear(&task);
        }
        json_decref(e);
    }
    CHECK_INT(lines, 3);
    json_decref(j);
}

/* Metrics, unknown routes and methods, and the per-route body caps. */
static void test_metrics_and_routing(void)
{
    int st;
    lp_response resp;
    json_t *j = call("GET", "/metrics", NULL, 0, NULL, NULL, &st, NULL);
    CHECK_STR(err_name(j), "unauthorized"); /* any operator token, not none */
    json_decref(j);
    j = call("GET", "/metrics", NULL, 0, optok, NULL, &st, &resp);
    CHECK(resp.body && strstr(resp.body, "ldpref_labels_total") != NULL);
    CHECK(resp.body && strstr(resp.body, "ldpref_rejects_total{error=\"bad_signature\"}"));
    lp_response_clear(&resp);
    j = call("GET", "/v1/nothing", NULL, 0, NULL, NULL, &st, NULL);
    CHECK_STR(err_name(j), "not_found");
    json_decref(j);
    j = call("DELETE", "/v1/labels", NULL, 0, NULL, NULL, &st, NULL);
    CHECK_STR(err_name(j), "method_not_allowed");
    json_decref(j);
    CHECK(lp_api_body_cap(api, "POST", "/v1/labels/batch") >
          lp_api_body_cap(api, "POST", "/v1/labels"));
}

/* One request from address addr to a (rate-limited) api: the error code
 * of the answer (0: success), and its Retry-After in *retry (may be NULL). */
static int from(lp_api *limited, const char *addr, const char *method, const char *path,
                const char *body, int *retry)
{
    lp_request req = {.method = method,
                      .path = path,
                      .body = body,
                      .body_len = body ? strlen(body) : 0,
                      .client_addr = addr};
    lp_response resp;
    lp_api_handle(limited, &req, &resp);
    if (retry)
        *retry = resp.retry_after;
    int code = resp.error;
    lp_response_clear(&resp);
    return code;
}

/* lp_api_preauth of the same request: its code, nothing spent. */
static int preauth_from(lp_api *limited, const char *addr, const char *path, int *retry)
{
    lp_request req = {.method = "POST", .path = path, .client_addr = addr};
    lp_response resp;
    int rc = lp_api_preauth(limited, &req, &resp);
    if (retry)
        *retry = resp.retry_after;
    lp_response_clear(&resp);
    return rc;
}

/* Rate limits in lp_api_begin and lp_api_preauth: the address's bucket
 * before the body is parsed, looking without spending in the pre-check,
 * IPv6 by /64, the label routes never limited, refusals counted. */
static void test_rate_limits(void)
{
    lp_api_opts ao = {.body_max = 65536,
                      .batch_body_max = 4 << 20,
                      .json_depth = 32,
                      .batch_max = 1000,
                      .timestamp_window_ms = 300000,
                      .enroll_rate = 0.001,
                      .enroll_burst = 3,
                      .score_rate = 0.001,
                      .score_burst = 2,
                      .next_rate = 0.001,
                      .next_burst = 2,
                      .rate_address_factor = 2};
    lp_api *limited = lp_api_new(store, &ao);
    uint64_t refused0 = lp_metrics_rate_limited_count(LP_RATE_ENROLL);
    for (int i = 0; i < 10; i++) /* the pre-check spends nothing */
        CHECK_INT(preauth_from(limited, "10.0.0.1", "/v1/annotators", NULL), LP_OK);
    for (int i = 0; i < 3; i++) /* the burst reaches the parser */
        CHECK_ERR(from(limited, "10.0.0.1", "POST", "/v1/annotators", "{", NULL),
                  LP_EMALFORMED_JSON);
    int retry = 0;
    CHECK_ERR(from(limited, "10.0.0.1", "POST", "/v1/annotators", "{", &retry), LP_ERATE_LIMITED);
    CHECK(retry >= 999 && retry <= 1000);
    retry = 0;
    CHECK_ERR(preauth_from(limited, "10.0.0.1", "/v1/annotators", &retry), LP_ERATE_LIMITED);
    CHECK(retry >= 999 && retry <= 1000);
    CHECK_INT(lp_metrics_rate_limited_count(LP_RATE_ENROLL) - refused0, 2);
    /* another address; labels from the throttled one */
    CHECK_ERR(from(limited, "10.0.0.2", "POST", "/v1/annotators", "{", NULL), LP_EMALFORMED_JSON);
    for (int i = 0; i < 20; i++)
        CHECK_ERR(from(limited, "10.0.0.1", "POST", "/v1/labels", "{", NULL), LP_EMALFORMED_JSON);
    /* one IPv6 /64 is one client */
    for (int i = 0; i < 3; i++)
        CHECK_ERR(from(limited, "2001:db8::1", "POST", "/v1/annotators", "{", NULL),
                  LP_EMALFORMED_JSON);
    CHECK_ERR(from(limited, "2001:db8::ff:2", "POST", "/v1/annotators", "{", NULL),
              LP_ERATE_LIMITED);
    CHECK_ERR(from(limited, "2001:db8:0:1::1", "POST", "/v1/annotators", "{", NULL),
              LP_EMALFORMED_JSON);
    /* score and tasks/next: the address gets factor x burst (2 x 2) */
    for (int i = 0; i < 4; i++) {
        /* no token: refused (the score scope) once past the address's limit */
        CHECK_ERR(from(limited, "10.0.0.3", "POST", "/v1/score", "{", NULL), LP_EUNAUTHORIZED);
        CHECK_ERR(from(limited, "10.0.0.3", "POST", "/v1/tasks/next", "{", NULL),
                  LP_EMALFORMED_JSON);
    }
    CHECK_ERR(from(limited, "10.0.0.3", "POST", "/v1/score", "{", NULL), LP_ERATE_LIMITED);
    CHECK_ERR(from(limited, "10.0.0.3", "POST", "/v1/tasks/next", "{", NULL), LP_ERATE_LIMITED);
    /* /metrics has a line per class */
    lp_request req = {.method = "GET", .path = "/metrics", .bearer = optok};
    lp_response resp;
    lp_api_handle(limited, &req, &resp);
    CHECK(resp.body && strstr(resp.body, "ldpref_rate_limited_total{class=\"enrollment\"}"));
    CHECK(resp.body && strstr(resp.body, "ldpref_rate_limited_total{class=\"tasks_next\"}"));
    lp_response_clear(&resp);
    lp_api_free(limited);
}

int main(void)
{
    int opened = store_fixture_open(&fx, "test-api", 2);
    CHECK_INT(opened, LP_OK);
    if (opened != LP_OK)
        return check_summary();
    store = fx.store;
    int created = 0;
    CHECK_INT(lp_auth_bootstrap(store, optok, &created), LP_OK);
    CHECK_INT(created, 1);
    lp_api_opts ao = {.body_max = 65536,
                      .batch_body_max = 4 << 20,
                      .upload_max = 64 << 20,
                      .json_depth = 32,
                      .batch_max = 1000,
                      .timestamp_window_ms = 300000};
    api = lp_api_new(store, &ao);
    int st;
    json_t *j = call("GET", "/v1/healthz", NULL, 0, NULL, NULL, &st, NULL);
    CHECK_INT(st, 200);
    json_t *storage = json_object_get(j, "storage");
    CHECK_STR(json_string_value(json_object_get(storage, "state")), "ok");
    CHECK(json_integer_value(json_object_get(storage, "free_bytes")) > 0);
    CHECK_INT(json_array_size(json_object_get(storage, "reasons")), 0);
    json_decref(j);
    json_decref(post("/v1/campaigns", "{\"name\":\"c2\"}", optok, &st));
    CHECK_INT(st, 201);
    test_tasks_upload();
    test_enroll();
    test_labels_setup();
    test_label_decoding_errors();
    test_label_key_checked_before_signature();
    test_label_accepted_and_resent();
    test_label_refusals_in_check_order();
    test_label_budget();
    test_label_batch();
    test_export_orientation();
    test_metrics_and_routing();
    test_rate_limits();
    lp_api_set_draining(api);
    j = call("GET", "/v1/healthz", NULL, 0, NULL, NULL, &st, NULL);
    CHECK_INT(st, 503);
    json_decref(j);
    lp_api_free(api);
    store_fixture_close(&fx);
    return check_summary();
}
