/*
 * test_audit.c — the audit log: the chain's hash against an independent
 * encoding of audit.h's definition, appends (serial and from many threads)
 * on a real SQLite file, the append-only triggers, verification of copies
 * tampered with through SQLite (edited, deleted, reordered, inserted rows,
 * altered triggers) and of the two rewrites the chain alone cannot see
 * (a forged tail, a cut tail: the head differs), and what the router
 * records: secrets redacted, uploads as size and hash, the params cap,
 * which routes, console sign-in and sign-out, pre-authentication refusals
 * and the rate of unauthenticated ones.
 */
#include "api.h"
#include "audit.h"
#include "auth.h"
#include "check.h"
#include "clock.h"
#include "error.h"
#include "log.h"
#include "store.h"
#include "store_fixture.h"

#include <jansson.h>
#include <pthread.h>
#include <sodium.h>
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static store_fixture fx;

/* ---- the hash ---- */

static void be64(unsigned char *p, uint64_t v)
{
    for (int i = 7; i >= 0; i--, v >>= 8)
        p[i] = (unsigned char)(v & 0xff);
}

/* The encoding of audit.h, written out byte by byte. */
static void reference_hash(const uint8_t prev[32], const lp_audit_row *r, uint8_t out[32])
{
    unsigned char buf[4096];
    size_t n = 0;
    memcpy(buf, prev, 32);
    n = 32;
    const char *tag = "ldpref-audit-v1";
    const char *texts[] = {tag, r->action, r->params, r->error};
    int64_t ints[] = {r->id, r->at_ms, r->token_id};
    /* tag, id, at_ms, token_id, action, params, status, error */
    be64(buf + n, strlen(tag)), n += 8;
    memcpy(buf + n, tag, strlen(tag)), n += strlen(tag);
    for (int i = 0; i < 3; i++)
        be64(buf + n, (uint64_t)ints[i]), n += 8;
    for (int i = 1; i < 3; i++) {
        be64(buf + n, strlen(texts[i])), n += 8;
        memcpy(buf + n, texts[i], strlen(texts[i])), n += strlen(texts[i]);
    }
    be64(buf + n, (uint64_t)r->status), n += 8;
    be64(buf + n, strlen(texts[3])), n += 8;
    memcpy(buf + n, texts[3], strlen(texts[3])), n += strlen(texts[3]);
    crypto_generichash(out, 32, buf, n, NULL, 0);
}

static void test_hash(void)
{
    uint8_t prev[32], a[32], b[32];
    randombytes_buf(prev, sizeof prev);
    lp_audit_row r = {.id = 7,
                      .at_ms = 1795530500808,
                      .token_id = 3,
                      .action = "POST /v1/campaigns",
                      .params = "{\"body\":{\"name\":\"x\"}}",
                      .status = 201,
                      .error = ""};
    lp_audit_hash(prev, &r, a);
    reference_hash(prev, &r, b);
    CHECK(memcmp(a, b, 32) == 0);
    /* Moving bytes between adjacent texts changes the hash. */
    lp_audit_row s = r;
    s.action = "POST /v1/campaigns{";
    s.params = "\"body\":{\"name\":\"x\"}}";
    lp_audit_hash(prev, &s, b);
    CHECK(memcmp(a, b, 32) != 0);
    /* Every field, and the previous hash, is covered. */
    int64_t *ints[] = {&s.id, &s.at_ms, &s.token_id, &s.status};
    for (int i = 0; i < 4; i++) {
        s = r;
        *ints[i] += 1;
        lp_audit_hash(prev, &s, b);
        CHECK(memcmp(a, b, 32) != 0);
    }
    s = r;
    s.error = "x";
    lp_audit_hash(prev, &s, b);
    CHECK(memcmp(a, b, 32) != 0);
    prev[31] ^= 1;
    lp_audit_hash(prev, &r, b);
    CHECK(memcmp(a, b, 32) != 0);
}

/* ---- appends ---- */

static lp_audit_check verify(const char *path)
{
    lp_audit_check c;
    char err[256] = "";
    int rc = lp_audit_verify_file(path, &c, err, sizeof err);
    CHECK_ERR(rc, LP_OK);
    if (rc != LP_OK)
        fprintf(stderr, "verify %s: %s\n", path, err);
    return c;
}

static void test_append_and_page(void)
{
    lp_audit_head head, h;
    for (int i = 1; i <= 5; i++) {
        char params[32];
        snprintf(params, sizeof params, "{\"i\":%d}", i);
        CHECK_ERR(
            lp_store_audit_append(fx.store, i, "POST /v1/x", params, 200 + i, "", 1000 + i, &head),
            LP_OK);
        CHECK_INT(head.id, i);
    }
    lp_audit_row *rows = NULL;
    size_t n = 0;
    CHECK_ERR(lp_store_audit_page(fx.store, 0, 100, &rows, &n, &h), LP_OK);
    CHECK_INT(n, 5);
    CHECK_INT(h.id, 5);
    CHECK(memcmp(h.hash, head.hash, 32) == 0);
    uint8_t prev[32] = {0}, want[32];
    for (size_t i = 0; i < n; i++) {
        CHECK_INT(rows[i].id, (int64_t)i + 1);
        CHECK_INT(rows[i].token_id, (int64_t)i + 1);
        CHECK_INT(rows[i].status, 201 + (int64_t)i);
        CHECK(memcmp(rows[i].prev_hash, prev, 32) == 0);
        reference_hash(prev, &rows[i], want);
        CHECK(memcmp(rows[i].hash, want, 32) == 0);
        memcpy(prev, rows[i].hash, 32);
    }
    lp_audit_rows_free(rows, n);
    CHECK_ERR(lp_store_audit_page(fx.store, 2, 2, &rows, &n, &h), LP_OK);
    CHECK_INT(n, 2);
    CHECK_INT(n > 0 ? rows[0].id : 0, 3);
    CHECK_INT(n > 1 ? rows[1].id : 0, 4);
    lp_audit_rows_free(rows, n);
    /* Over the caps: refused, nothing stored. */
    char big[LP_AUDIT_PARAMS_MAX + 2];
    memset(big, 'x', sizeof big - 1);
    big[sizeof big - 1] = '\0';
    CHECK_ERR(lp_store_audit_append(fx.store, 0, "POST /v1/x", big, 200, "", 0, NULL),
              LP_EINVALID_ARGUMENT);
    CHECK_ERR(lp_store_audit_append(fx.store, -1, "POST /v1/x", "{}", 200, "", 0, NULL),
              LP_EINVALID_ARGUMENT);
    lp_audit_check c = verify(fx.path);
    CHECK(c.intact);
    CHECK_INT(c.rows, 5);
    CHECK(memcmp(c.head.hash, head.hash, 32) == 0);
}

#define THREADS 8
#define PER_THREAD 40

static void *appender(void *arg)
{
    intptr_t t = (intptr_t)arg;
    for (int i = 0; i < PER_THREAD; i++)
        if (lp_store_audit_append(fx.store, t, "PUT /v1/y", "{}", 200, "", lp_now_ms(), NULL) !=
            LP_OK)
            return (void *)1;
    return NULL;
}

/* Appends from many threads serialize: one chain, no gap, no fork. */
static void test_concurrent_appends(void)
{
    lp_audit_check before = verify(fx.path);
    pthread_t th[THREADS];
    for (intptr_t t = 0; t < THREADS; t++)
        pthread_create(&th[t], NULL, appender, (void *)t);
    int failed = 0;
    for (int t = 0; t < THREADS; t++) {
        void *r;
        pthread_join(th[t], &r);
        failed += r != NULL;
    }
    CHECK_INT(failed, 0);
    lp_audit_check c = verify(fx.path);
    CHECK(c.intact);
    CHECK_INT(c.rows, before.rows + THREADS * PER_THREAD);
    CHECK_INT(c.head.id, c.rows);
}

/* ---- tampering ---- */

static int exec_sql(const char *path, const char *sql)
{
    sqlite3 *db = NULL;
    int rc = sqlite3_open(path, &db);
    if (rc == SQLITE_OK)
        rc = sqlite3_exec(db, sql, NULL, NULL, NULL);
    sqlite3_close(db);
    return rc;
}

/* A copy of the fixture's database at dir/name (VACUUM INTO). */
static void copy_db(const char *name, char *out, size_t outlen)
{
    snprintf(out, outlen, "%s/%s", fx.dir, name);
    char sql[700];
    snprintf(sql, sizeof sql, "VACUUM INTO '%s'", out);
    CHECK_INT(exec_sql(fx.path, sql), SQLITE_OK);
}

static void expect_broken(const char *name, const char *tamper, int64_t bad_id, const char *word)
{
    char path[400];
    copy_db(name, path, sizeof path);
    CHECK_INT(exec_sql(path, tamper), SQLITE_OK);
    lp_audit_check c = verify(path);
    check_record(!c.intact && c.bad_id == bad_id && strstr(c.problem, word) != NULL, __FILE__,
                 __LINE__, "%s: intact %d, bad row %lld (want %lld), \"%s\" (want \"%s\")", name,
                 c.intact, (long long)c.bad_id, (long long)bad_id, c.problem, word);
}

static void test_tampering(void)
{
    /* The triggers refuse edits and deletions. */
    CHECK_INT(exec_sql(fx.path, "UPDATE audit SET params = '{}' WHERE id = 2"), SQLITE_CONSTRAINT);
    CHECK_INT(exec_sql(fx.path, "DELETE FROM audit WHERE id = 2"), SQLITE_CONSTRAINT);
    CHECK_INT(exec_sql(fx.path, "DELETE FROM audit"), SQLITE_CONSTRAINT);
    lp_audit_check good = verify(fx.path);
    CHECK(good.intact);
    CHECK(good.rows >= 10);

    expect_broken("edit.db",
                  "DROP TRIGGER audit_no_update; UPDATE audit SET params = '{\"i\":9}' "
                  "WHERE id = 3",
                  3, "edited");
    expect_broken("status.db",
                  "DROP TRIGGER audit_no_update; UPDATE audit SET status = 200 "
                  "WHERE id = 4",
                  4, "edited");
    expect_broken("delete.db", "DROP TRIGGER audit_no_delete; DELETE FROM audit WHERE id = 3", 4,
                  "missing");
    expect_broken("first.db", "DROP TRIGGER audit_no_delete; DELETE FROM audit WHERE id = 1", 2,
                  "missing");
    /* Rows 3 and 4 trade places (ids swapped): row 3 no longer chains. */
    expect_broken("swap.db",
                  "DROP TRIGGER audit_no_update; UPDATE audit SET id = -3 WHERE id = 3; "
                  "UPDATE audit SET id = 3 WHERE id = 4; UPDATE audit SET id = 4 WHERE id = -3",
                  3, "does not chain");
    /* A row inserted in the middle: later ids shift up by one, the new row
     * 3 chains to row 2 and matches its own hash, but the old row 3 (now
     * 4) still points at row 2. */
    {
        char path[400];
        copy_db("insert.db", path, sizeof path);
        lp_audit_row r = {.id = 3,
                          .at_ms = 5,
                          .token_id = 9,
                          .action = "POST /v1/forged",
                          .params = "{}",
                          .status = 200,
                          .error = ""};
        lp_audit_row *rows = NULL;
        size_t n = 0;
        lp_audit_head h;
        CHECK_ERR(lp_store_audit_page(fx.store, 1, 1, &rows, &n, &h), LP_OK);
        uint8_t hash[32];
        lp_audit_hash(n ? rows[0].hash : hash, &r, hash);
        char sql[1024], hp[65], hh[65];
        sodium_bin2hex(hp, sizeof hp, n ? rows[0].hash : hash, 32);
        sodium_bin2hex(hh, sizeof hh, hash, 32);
        lp_audit_rows_free(rows, n);
        snprintf(sql, sizeof sql,
                 "DROP TRIGGER audit_no_update; UPDATE audit SET id = -id WHERE id >= 3; "
                 "UPDATE audit SET id = 1 - id WHERE id < 0; "
                 "INSERT INTO audit VALUES (3, 5, 9, 'POST /v1/forged', '{}', 200, '', "
                 "x'%s', x'%s')",
                 hp, hh);
        CHECK_INT(exec_sql(path, sql), SQLITE_OK);
        lp_audit_check c = verify(path);
        CHECK(!c.intact);
        CHECK_INT(c.bad_id, 4);
        CHECK(strstr(c.problem, "does not chain") != NULL);
    }
    /* A forged row at the end with a made-up hash. */
    expect_broken("forged.db",
                  "INSERT INTO audit SELECT id + 1, 0, 0, 'POST /v1/x', '{}', 200, '', hash, "
                  "randomblob(32) FROM audit ORDER BY id DESC LIMIT 1",
                  good.head.id + 1, "edited");
    /* An altered trigger: the rows chain, the table is not protected. */
    expect_broken("trigger.db",
                  "DROP TRIGGER audit_no_delete; CREATE TRIGGER audit_no_delete BEFORE DELETE "
                  "ON audit WHEN 0 BEGIN SELECT 1; END",
                  0, "audit_no_delete");

    /* What the chain alone cannot see: the last row cut off. The chain is
     * intact, but its head is no longer the one logged at the append. */
    char path[400];
    copy_db("cut.db", path, sizeof path);
    char sql[200];
    snprintf(sql, sizeof sql,
             "DROP TRIGGER audit_no_delete; DELETE FROM audit WHERE id = %lld; CREATE TRIGGER "
             "audit_no_delete BEFORE DELETE ON audit\nBEGIN\n    SELECT RAISE(ABORT, 'audit rows "
             "are append-only');\nEND",
             (long long)good.head.id);
    CHECK_INT(exec_sql(path, sql), SQLITE_OK);
    lp_audit_check c = verify(path);
    CHECK(c.intact);
    CHECK_INT(c.rows, good.rows - 1);
    CHECK(memcmp(c.head.hash, good.head.hash, 32) != 0);

    /* Unreadable: no such file, no audit table. */
    lp_audit_check none;
    char err[256];
    snprintf(path, sizeof path, "%s/missing.db", fx.dir);
    CHECK_ERR(lp_audit_verify_file(path, &none, err, sizeof err), LP_ESTORAGE);
    CHECK(access(path, F_OK) != 0); /* not created */
    snprintf(path, sizeof path, "%s/other.db", fx.dir);
    CHECK_INT(exec_sql(path, "CREATE TABLE t (x)"), SQLITE_OK);
    CHECK_ERR(lp_audit_verify_file(path, &none, err, sizeof err), LP_ESTORAGE);
    CHECK(strstr(err, "no audit table") != NULL);
}

/* ---- what the router records ---- */

static lp_api *api;
static char optok[LP_AUTH_TOKEN_MAX];

static int handle(const char *method, const char *path, const lp_param *params, size_t np,
                  const char *body, const char *bearer, const char *cookie, const char *csrf,
                  lp_response *keep)
{
    lp_request req = {.method = method,
                      .path = path,
                      .params = params,
                      .n_params = np,
                      .body = body,
                      .body_len = body ? strlen(body) : 0,
                      .bearer = bearer,
                      .cookie = cookie,
                      .csrf = csrf};
    lp_response resp;
    lp_api_handle(api, &req, &resp);
    int status = resp.error ? lp_error_http_status(resp.error) : resp.status;
    if (keep)
        *keep = resp;
    else
        lp_response_clear(&resp);
    return status;
}

/* The rows after id `after` as parsed JSON (GET /v1/audit); *head_id gets
 * the head's id. */
static json_t *rows_after(int64_t after, int64_t *head_id)
{
    char a[32];
    snprintf(a, sizeof a, "%lld", (long long)after);
    lp_param p[] = {{"after_id", a}, {"limit", "1000"}};
    lp_response resp;
    CHECK_INT(handle("GET", "/v1/audit", p, 2, NULL, optok, NULL, NULL, &resp), 200);
    json_t *j = resp.body ? json_loadb(resp.body, resp.body_len, 0, NULL) : NULL;
    lp_response_clear(&resp);
    if (head_id)
        *head_id = json_integer_value(json_object_get(j, "head_id"));
    json_t *e = json_incref(json_object_get(j, "entries"));
    json_decref(j);
    return e ? e : json_array();
}

static int64_t head_now(void)
{
    int64_t id = 0;
    json_decref(rows_after(0, &id));
    return id;
}

static const char *jstr(const json_t *o, const char *k)
{
    return json_string_value(json_object_get(o, k));
}

static void test_recorded(void)
{
    int64_t h0 = head_now();
    /* A campaign with a secret in its body (refused as an unknown field,
     * recorded redacted), then a good one. */
    const char *campaign = "{\"name\":\"aud\",\"epsilon_min\":0.5,\"epsilon_max\":2,"
                           "\"epsilon_budget\":10,\"epsilon_default\":1}";
    CHECK_INT(handle("POST", "/v1/campaigns", NULL, 0,
                     "{\"name\":\"aud\",\"nested\":{\"enrollment_token\":\"et_SECRET1\"},"
                     "\"token\":\"op_SECRET2\"}",
                     optok, NULL, NULL, NULL),
              400);
    CHECK_INT(handle("POST", "/v1/campaigns", NULL, 0, campaign, optok, NULL, NULL, NULL), 201);
    /* Reads are not recorded; the export is. */
    CHECK_INT(handle("GET", "/v1/stats", NULL, 0, NULL, optok, NULL, NULL, NULL), 200);
    CHECK_INT(handle("GET", "/v1/campaigns", NULL, 0, NULL, optok, NULL, NULL, NULL), 200);
    CHECK(handle("POST", "/v1/score", NULL, 0, "{}", optok, NULL, NULL, NULL) >= 400);
    lp_param exp[] = {{"campaign", "aud"}, {"token", "op_SECRET3"}};
    CHECK_INT(handle("GET", "/v1/export", exp, 2, NULL, optok, NULL, NULL, NULL), 200);
    /* A task upload: size and hash, never the text. */
    const char *tasks = "{\"prompt\":\"SECRET_PROMPT\",\"responses\":[\"a\",\"b\"]}\n";
    lp_param tc = {"campaign", "aud"};
    CHECK_INT(handle("POST", "/v1/tasks", &tc, 1, tasks, optok, NULL, NULL, NULL), 200);
    /* Refused: no token. */
    CHECK_INT(
        handle("POST", "/v1/enrollment-tokens", NULL, 0, "{\"count\":1}", NULL, NULL, NULL, NULL),
        401);
    /* A body over the params cap. */
    char *big = malloc(20000);
    int n = snprintf(big, 20000, "{\"name\":\"");
    memset(big + n, 'z', 12000);
    snprintf(big + n + 12000, 20000 - (size_t)n - 12000, "\",\"token\":\"op_SECRET4\"}");
    CHECK_INT(handle("POST", "/v1/campaigns", NULL, 0, big, optok, NULL, NULL, NULL), 400);

    int64_t head = 0;
    json_t *rows = rows_after(h0, &head);
    CHECK_INT(json_array_size(rows), 6);
    CHECK_INT(head, h0 + 6);
    char *all = json_dumps(rows, 0);
    CHECK(all && strstr(all, "SECRET") == NULL); /* no secret, no task text */
    free(all);
    const char *want_action[] = {
        "POST /v1/campaigns", "POST /v1/campaigns",         "GET /v1/export",
        "POST /v1/tasks",     "POST /v1/enrollment-tokens", "POST /v1/campaigns"};
    const int want_status[] = {400, 201, 200, 200, 401, 400};
    for (size_t i = 0; i < json_array_size(rows) && i < 6; i++) {
        json_t *r = json_array_get(rows, i);
        CHECK_STR(jstr(r, "action"), want_action[i]);
        CHECK_INT(json_integer_value(json_object_get(r, "status")), want_status[i]);
    }
    json_t *r0 = json_array_get(rows, 0),
           *body0 = json_object_get(json_object_get(r0, "params"), "body");
    CHECK_STR(jstr(r0, "error"), "unknown_field");
    CHECK_STR(jstr(body0, "token"), "[redacted]");
    CHECK_STR(jstr(json_object_get(body0, "nested"), "enrollment_token"), "[redacted]");
    CHECK_STR(jstr(body0, "name"), "aud");
    json_t *q2 = json_object_get(json_object_get(json_array_get(rows, 2), "params"), "query");
    CHECK_STR(jstr(q2, "campaign"), "aud");
    CHECK_STR(jstr(q2, "token"), "[redacted]");
    json_t *up = json_object_get(json_object_get(json_array_get(rows, 3), "params"), "body");
    CHECK_INT(json_integer_value(json_object_get(up, "bytes")), strlen(tasks));
    uint8_t h[32];
    char hex[65];
    crypto_generichash(h, 32, (const unsigned char *)tasks, strlen(tasks), NULL, 0);
    sodium_bin2hex(hex, sizeof hex, h, 32);
    CHECK_STR(jstr(up, "blake2b"), hex);
    json_t *r4 = json_array_get(rows, 4);
    CHECK_INT(json_integer_value(json_object_get(r4, "token_id")), 0);
    CHECK_STR(jstr(r4, "error"), "unauthorized");
    json_t *p5 = json_object_get(json_array_get(rows, 5), "params");
    CHECK(json_is_true(json_object_get(p5, "truncated")));
    CHECK(json_integer_value(json_object_get(p5, "bytes")) > 12000);
    CHECK(strlen(jstr(p5, "prefix") ? jstr(p5, "prefix") : "") <= 1024);
    char *p5t = json_dumps(p5, JSON_COMPACT);
    CHECK(p5t && strlen(p5t) <= LP_AUDIT_PARAMS_MAX);
    free(p5t);
    json_decref(rows);
    free(big);
}

/* The session id out of a Set-Cookie value. */
static void cookie_of(const char *set_cookie, char *out, size_t outlen)
{
    const char *semi = set_cookie ? strchr(set_cookie, ';') : NULL;
    size_t n = semi ? (size_t)(semi - set_cookie) : 0;
    snprintf(out, outlen, "%.*s", (int)n, set_cookie ? set_cookie : "");
}

static void test_console_and_preauth(void)
{
    int64_t h0 = head_now();
    char body[200];
    snprintf(body, sizeof body, "{\"token\":\"%s\"}", optok);
    lp_response resp;
    CHECK_INT(handle("POST", "/v1/console/session", NULL, 0, body, NULL, NULL, NULL, &resp), 201);
    char cookie[200];
    cookie_of(resp.set_cookie, cookie, sizeof cookie);
    json_t *j = resp.body ? json_loadb(resp.body, resp.body_len, 0, NULL) : NULL;
    char csrf[200];
    snprintf(csrf, sizeof csrf, "%s", j ? jstr(j, "csrf_token") : "");
    json_decref(j);
    lp_response_clear(&resp);
    CHECK_INT(handle("POST", "/v1/console/session", NULL, 0, "{\"token\":\"op_wrong\"}", NULL, NULL,
                     NULL, NULL),
              401);
    CHECK_INT(handle("GET", "/v1/console/session", NULL, 0, NULL, NULL, cookie, NULL, NULL), 200);
    CHECK_INT(handle("DELETE", "/v1/console/session", NULL, 0, NULL, NULL, cookie, csrf, NULL),
              200);
    /* Refused by the headers-only check: recorded without a body. */
    lp_request req = {.method = "POST", .path = "/v1/retrain", .bearer = "op_nope"};
    CHECK_ERR(lp_api_preauth(api, &req, &resp), LP_EUNAUTHORIZED);
    lp_response_clear(&resp);
    req.bearer = optok;
    CHECK_ERR(lp_api_preauth(api, &req, &resp), LP_OK);
    lp_response_clear(&resp);

    json_t *rows = rows_after(h0, NULL);
    CHECK_INT(json_array_size(rows), 4);
    const char *want[] = {"POST /v1/console/session", "POST /v1/console/session",
                          "DELETE /v1/console/session", "POST /v1/retrain"};
    const int status[] = {201, 401, 200, 401};
    for (size_t i = 0; i < json_array_size(rows) && i < 4; i++) {
        CHECK_STR(jstr(json_array_get(rows, i), "action"), want[i]);
        CHECK_INT(json_integer_value(json_object_get(json_array_get(rows, i), "status")),
                  status[i]);
    }
    json_t *p0 = json_object_get(json_object_get(json_array_get(rows, 0), "params"), "body");
    CHECK_STR(jstr(p0, "token"), "[redacted]");
    CHECK(json_object_get(json_object_get(json_array_get(rows, 3), "params"), "body") == NULL);
    char *all = json_dumps(rows, 0);
    CHECK(all && strstr(all, optok) == NULL && strstr(all, csrf) == NULL);
    free(all);
    json_decref(rows);
}

/* Unauthenticated refusals: a burst of 60 recorded (less the 3 of the
 * tests before, plus one a second), the rest counted into the next
 * recorded one. */
static void test_refusal_rate(void)
{
    int64_t h0 = head_now();
    const int tries = 150;
    int64_t t0 = lp_now_ms();
    for (int i = 0; i < tries; i++)
        handle("PUT", "/v1/corruption", NULL, 0, "{}", "op_guess", NULL, NULL, NULL);
    int64_t elapsed_s = (lp_now_ms() - t0) / 1000;
    int64_t recorded = head_now() - h0;
    check_record(recorded >= 57 && recorded <= 61 + elapsed_s, __FILE__, __LINE__,
                 "%lld refusals recorded of %d in %lld s", (long long)recorded, tries,
                 (long long)elapsed_s);
    usleep(1100 * 1000);
    handle("PUT", "/v1/corruption", NULL, 0, "{}", NULL, NULL, NULL, NULL);
    json_t *rows = rows_after(h0 + recorded, NULL);
    CHECK_INT(json_array_size(rows), 1);
    json_t *p = json_object_get(json_array_get(rows, 0), "params");
    CHECK_INT(json_integer_value(json_object_get(p, "suppressed_refusals")), tries - recorded);
    json_decref(rows);
    /* An authenticated caller is never held back. */
    int64_t h1 = head_now();
    for (int i = 0; i < 5; i++)
        handle("PUT", "/v1/corruption", NULL, 0, "{\"alpha\":7}", optok, NULL, NULL, NULL);
    CHECK_INT(head_now() - h1, 5);
    lp_audit_check c = verify(fx.path);
    CHECK(c.intact);
}

int main(void)
{
    lp_log_configure(LP_LOG_WARN, LP_LOG_TEXT); /* not a line per append */
    if (sodium_init() < 0 || store_fixture_open(&fx, "audit", 2) != LP_OK)
        return 1;
    test_hash();
    test_append_and_page();
    test_concurrent_appends();
    test_tampering();
    lp_api_opts o = {.body_max = 65536,
                     .batch_body_max = 1 << 20,
                     .upload_max = 1 << 20,
                     .json_depth = 32,
                     .batch_max = 100,
                     .timestamp_window_ms = 300000};
    api = lp_api_new(fx.store, &o);
    CHECK(api != NULL);
    CHECK_ERR(lp_auth_operator_mint(fx.store, "operator", LP_SCOPE_ALL, optok, NULL), LP_OK);
    if (api != NULL) {
        test_recorded();
        test_console_and_preauth();
        test_refusal_rate();
    }
    lp_api_free(api);
    store_fixture_close(&fx);
    return check_summary();
}
