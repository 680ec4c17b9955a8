/*
 * e2e_attack_ratelimit.c — rate limits against a real server, each attacker
 * on a client address of its own (Linux loopback answers for all of 127/8):
 *
 *  1. Enrollment-token guessing from one address: the first `burst`
 *     guesses are looked up (403 bad_enrollment_token), every later one is
 *     refused with 429 rate_limited and a Retry-After that covers the
 *     bucket's refill time. A refused guess costs no lookup: the server's
 *     bad_enrollment_token count grows by exactly the guesses answered 403,
 *     a refused body is not even parsed (malformed JSON gets 429, not 400),
 *     and a valid token refused from the throttled address is still unused
 *     (it enrolls from another address, which is not throttled).
 *  2. tasks/next: one annotator's flood is stopped at its key's burst; a
 *     second annotator on the same address and a third elsewhere keep
 *     getting tasks; a flood spread over many keys from one address stops
 *     at the address's share (rate-address-factor times a key's).
 *  3. /v1/score: a flood from one address (callers with score tokens of
 *     their own: an anonymous one is refused 401 from its headers) stops at
 *     the address's share while another address is served; per operator
 *     token, the token's own burst applies.
 *  4. The defaults are in force: a server started without enrollment rate
 *     flags throttles a guesser after --enroll-burst (30) guesses, within
 *     what --enroll-rate (1/s) refills while the test runs, and Retry-After
 *     is honest: after it has passed, a guess is looked up again.
 *  5. The client library waits out a 429 as Retry-After asks: an annotator
 *     fetching tasks faster than its key's rate gets every answer.
 *
 * The first server refills at 0.001 tokens a second (one per 1000 s), so
 * every count in 1-3 is exact however slowly the machine runs. The
 * /metrics counters ldpref_rate_limited_total{class} are checked against
 * the 429s the test saw.
 */
#include "annotator_client.h"
#include "canon.h"
#include "check.h"
#include "clock.h"
#include "error.h"
#include "http_raw.h"
#include "operator_client.h"
#include "raw_annotator.h"
#include "rr.h"
#include "server_proc.h"
#include "wire.h"

#include <curl/curl.h>
#include <jansson.h>
#include <math.h>
#include <sodium.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define BURST 20
#define FACTOR 3
#define SLOW_RATE "0.001" /* one token per 1000 s: no refill during the test */

static server_proc srv;

/* POSTs body (stolen) to path from address source; reply in *r. */
static long post_from(const server_proc *s, const char *source, const char *path, json_t *body,
                      const char *bearer, http_reply *r)
{
    char url[256];
    snprintf(url, sizeof url, "%s%s", s->url, path);
    char *text = body ? json_dumps(body, JSON_COMPACT) : NULL;
    json_decref(body);
    http_raw_opts o = {.bearer = bearer, .source = source};
    http_raw_ex("POST", url, text ? text : "", text ? strlen(text) : 0, &o, r);
    free(text);
    return r->status;
}

/* An enrollment with token (a guess or a real one) under a new key. */
static long enroll_from(const server_proc *s, const char *source, const char *token, http_reply *r)
{
    uint8_t pk[LP_KEY_BYTES], sk[LP_SECRET_BYTES];
    crypto_sign_keypair(pk, sk);
    lp_enroll_msg m = {0};
    memcpy(m.key, pk, LP_KEY_BYTES);
    snprintf(m.token, sizeof m.token, "%s", token);
    lp_sign_enroll(&m, sk);
    sodium_memzero(sk, sizeof sk);
    return post_from(s, source, "/v1/annotators", lp_wire_enroll_encode(&m), NULL, r);
}

/* A token of the real format that nobody minted. */
static void guess_token(char out[64])
{
    uint8_t raw[32];
    randombytes_buf(raw, sizeof raw);
    memcpy(out, "et_", 3);
    sodium_bin2base64(out + 3, 61, raw, sizeof raw, sodium_base64_VARIANT_URLSAFE_NO_PADDING);
}

static long next_from(const raw_annotator *a, const char *source, http_reply *r)
{
    lp_next_msg m = {0};
    memcpy(m.key, a->pk, LP_KEY_BYTES);
    m.count = 1;
    m.timestamp_ms = lp_now_ms();
    lp_sign_next(&m, a->sk);
    return post_from(&srv, source, "/v1/tasks/next", lp_wire_next_encode(&m), NULL, r);
}

static long score_from(const server_proc *s, const char *source, const char *bearer, http_reply *r)
{
    return post_from(s, source, "/v1/score", json_pack("{s:[{s:s}]}", "candidates", "text", "a"),
                     bearer, r);
}

/* A counter of s's /metrics: the value on the line "<series> N" (0 when
 * absent). */
static double metric(const server_proc *s, const char *series)
{
    http_reply r;
    raw_get(s->url, "/metrics", s->token, &r);
    double v = 0;
    size_t n = strlen(series);
    for (const char *p = r.body; p && *p; p = strchr(p, '\n') ? strchr(p, '\n') + 1 : NULL)
        if (strncmp(p, series, n) == 0 && p[n] == ' ')
            v = strtod(p + n + 1, NULL);
    http_reply_free(&r);
    return v;
}

/* The Retry-After of a 429, in seconds (-1 when absent or not a number). */
static long retry_after(const http_reply *r)
{
    char *end = NULL;
    long v = strtol(r->retry_after, &end, 10);
    return r->retry_after[0] && end && *end == '\0' ? v : -1;
}

/* 1 if r is a 429 rate_limited whose message names the kind of key. */
static int limited(const http_reply *r, const char *kind)
{
    char name[64];
    http_error_name(r, name, sizeof name);
    return r->status == 429 && strcmp(name, "rate_limited") == 0 && r->body &&
           strstr(r->body, kind) != NULL;
}

static char *enrollment_token(const server_proc *s, const char *campaign)
{
    char body[128];
    snprintf(body, sizeof body, "{\"campaign\":\"%s\",\"count\":1}", campaign);
    long st = 0;
    json_t *j = operator_call(s, "POST", "/v1/enrollment-tokens", body, &st);
    CHECK_INT(st, 201);
    char *text = j ? json_dumps(j, 0) : NULL;
    char *t = text ? first_enrollment_token(text) : NULL;
    free(text);
    json_decref(j);
    return t;
}

/* Loads n tasks into campaign of s (its path's query, "" for default). */
static void load_tasks(const server_proc *s, const char *query, int n)
{
    char jsonl[16384];
    size_t len = 0;
    for (int i = 0; i < n && len < sizeof jsonl; i++)
        len += (size_t)snprintf(jsonl + len, sizeof jsonl - len,
                                "{\"id\":\"t%d\",\"prompt\":\"p%d\",\"responses\":[\"a\",\"b\"]}\n",
                                i, i);
    char path[128];
    snprintf(path, sizeof path, "/v1/tasks%s", query);
    long st = 0;
    json_decref(operator_call(s, "POST", path, jsonl, &st));
    CHECK_INT(st, 200);
}

static void setup_campaign(void)
{
    long st = 0;
    json_decref(operator_call(&srv, "POST", "/v1/campaigns",
                              "{\"name\":\"rl\",\"epsilon_min\":0.1,\"epsilon_max\":10,"
                              "\"labels_per_task\":10}",
                              &st));
    CHECK_INT(st, 201);
    load_tasks(&srv, "?campaign=rl", 100);
}

static void test_enrollment_guessing(void)
{
    const char *attacker = "127.0.0.2", *elsewhere = "127.0.0.3";
    double looked_up0 = metric(&srv, "ldpref_rejects_total{error=\"bad_enrollment_token\"}");
    double limited0 = metric(&srv, "ldpref_rate_limited_total{class=\"enrollment\"}");
    int n403 = 0, n429 = 0, other = 0, first_429 = -1;
    long first_retry = -1;
    for (int i = 0; i < 3 * BURST; i++) {
        char t[64];
        guess_token(t);
        http_reply r;
        long st = enroll_from(&srv, attacker, t, &r);
        char name[64];
        http_error_name(&r, name, sizeof name);
        if (st == 403 && strcmp(name, "bad_enrollment_token") == 0) {
            n403++;
        } else if (limited(&r, "from this address")) {
            if (first_429 < 0) {
                first_429 = i;
                first_retry = retry_after(&r);
            }
            n429++;
        } else {
            other++;
        }
        http_reply_free(&r);
    }
    /* the burst is looked up, everything after it is refused */
    CHECK_INT(n403, BURST);
    CHECK_INT(first_429, BURST);
    CHECK_INT(n429, 2 * BURST);
    CHECK_INT(other, 0);
    /* Retry-After: the time one token takes at the address's rate (1000 s) */
    check_record(first_retry >= 990 && first_retry <= 1000, __FILE__, __LINE__,
                 "Retry-After of the first refusal is %ld s (expected 990..1000)", first_retry);

    /* A refused body is never parsed: garbage gets 429, not malformed_json. */
    http_reply r;
    char url[256];
    snprintf(url, sizeof url, "%s/v1/annotators", srv.url);
    http_raw_opts o = {.source = attacker};
    http_raw_ex("POST", url, "{not json", 9, &o, &r);
    CHECK(limited(&r, "from this address"));
    http_reply_free(&r);

    /* A real token from the throttled address is refused unseen ... */
    char *token = enrollment_token(&srv, "rl");
    CHECK(token != NULL);
    CHECK_INT(enroll_from(&srv, attacker, token ? token : "", &r), 429);
    http_reply_free(&r);
    /* ... so it is still unused: it enrolls from another address, which
     * the flood did not touch. */
    CHECK_INT(enroll_from(&srv, elsewhere, token ? token : "", &r), 201);
    http_reply_free(&r);
    free(token);
    for (int i = 0; i < 3; i++) {
        char t[64];
        guess_token(t);
        CHECK_INT(enroll_from(&srv, elsewhere, t, &r), 403);
        http_reply_free(&r);
    }
    /* Lookups counted by the server: exactly the 20 guesses answered 403
     * from the attacker and the 3 from elsewhere; the 41 refusals (and the
     * refused real token) reached no lookup. */
    double looked_up = metric(&srv, "ldpref_rejects_total{error=\"bad_enrollment_token\"}");
    CHECK_NEAR(looked_up - looked_up0, BURST + 3, 0);
    double refused = metric(&srv, "ldpref_rate_limited_total{class=\"enrollment\"}");
    CHECK_NEAR(refused - limited0, 2 * BURST + 2, 0);
    printf("enrollment guessing: %d guesses looked up, %d refused with 429 (Retry-After %ld s); "
           "another address unaffected\n",
           n403, n429, first_retry);
}

static void test_next_flood(void)
{
    raw_annotator flooder, neighbour, elsewhere, many[FACTOR * BURST / BURST + 2];
    raw_annotator *enrolled[] = {&flooder, &neighbour, &elsewhere};
    for (size_t i = 0; i < sizeof enrolled / sizeof *enrolled; i++) {
        char *t = enrollment_token(&srv, "rl");
        CHECK_INT(raw_enroll(enrolled[i], srv.url, t ? t : ""), 201);
        free(t);
    }
    const char *shared = "127.0.0.4", *other = "127.0.0.5";
    http_reply r;
    /* one key floods: its burst is served, then its key is refused */
    int ok = 0, refused = 0;
    for (int i = 0; i < BURST + 10; i++) {
        long st = next_from(&flooder, shared, &r);
        ok += st == 200;
        refused += limited(&r, "with this credential");
        http_reply_free(&r);
    }
    CHECK_INT(ok, BURST);
    CHECK_INT(refused, 10);
    /* the neighbour on the same address and an annotator elsewhere: served */
    CHECK_INT(next_from(&neighbour, shared, &r), 200);
    http_reply_free(&r);
    CHECK_INT(next_from(&elsewhere, other, &r), 200);
    http_reply_free(&r);
    printf("tasks/next flood: %d served, %d refused for the key; the neighbour and another "
           "address still served\n",
           ok, refused);

    /* Many keys from one address: the address's share (FACTOR x BURST
     * tokens; BURST + 11 are spent above) is the ceiling. */
    int budget = FACTOR * BURST - (BURST + 10 + 1);
    size_t n_many = sizeof many / sizeof *many;
    for (size_t k = 0; k < n_many; k++) {
        char *t = enrollment_token(&srv, "rl");
        CHECK_INT(raw_enroll(&many[k], srv.url, t ? t : ""), 201);
        free(t);
    }
    int served = 0, by_address = 0;
    for (size_t k = 0; k < n_many; k++)
        for (int i = 0; i < BURST; i++) {
            long st = next_from(&many[k], shared, &r);
            served += st == 200;
            by_address += limited(&r, "from this address");
            http_reply_free(&r);
        }
    CHECK_INT(served, budget);
    CHECK_INT(by_address, (int)n_many * BURST - budget);
    /* the address is spent for every key on it, not for anyone elsewhere */
    CHECK(next_from(&neighbour, shared, &r) == 429 && limited(&r, "from this address"));
    http_reply_free(&r);
    CHECK_INT(next_from(&elsewhere, other, &r), 200);
    http_reply_free(&r);
}

static void test_score_flood(void)
{
    double limited0 = metric(&srv, "ldpref_rate_limited_total{class=\"score\"}");
    http_reply r;
    /* /v1/score needs a token with the score scope: an anonymous caller is
     * refused 401 from its headers, before any bucket or body matters. The
     * address's share is reached by callers with FACTOR + 1 tokens of their
     * own, each kept under its own burst, from one address: its share, then
     * 429. */
    score_from(&srv, "127.0.0.6", NULL, &r);
    CHECK_INT(r.status, 401);
    http_reply_free(&r);
    char tokens[FACTOR + 1][128];
    for (int k = 0; k <= FACTOR; k++) {
        long st = 0;
        json_t *t = operator_call(&srv, "POST", "/v1/tokens",
                                  "{\"name\": \"flood\", \"scopes\": [\"score\"]}", &st);
        CHECK_INT(st, 201);
        snprintf(tokens[k], sizeof tokens[k], "%s",
                 json_string_value(json_object_get(t, "token")) ?: "");
        json_decref(t);
    }
    int passed = 0, refused = 0;
    for (int i = 0; i < FACTOR * BURST + 15; i++) {
        score_from(&srv, "127.0.0.6", tokens[i % (FACTOR + 1)], &r);
        if (limited(&r, "from this address"))
            refused++;
        else
            passed++;
        http_reply_free(&r);
    }
    CHECK_INT(passed, FACTOR * BURST);
    CHECK_INT(refused, 15);
    CHECK(score_from(&srv, "127.0.0.7", tokens[0], &r) != 429);
    http_reply_free(&r);
    double seen = metric(&srv, "ldpref_rate_limited_total{class=\"score\"}");
    CHECK_NEAR(seen - limited0, 15, 0);
    printf("score flood from one address: %d passed, %d refused\n", passed, refused);

    /* Per operator token: where /v1/score takes a token, the token's own
     * burst applies whatever the address. */
    score_from(&srv, "127.0.0.8", NULL, &r);
    int needs_token = r.status == 401;
    http_reply_free(&r);
    if (!needs_token) {
        printf("SKIP score per token: /v1/score needs no token on this build, so there is no "
               "credential to count\n");
        return;
    }
    passed = refused = 0;
    const char *sources[] = {"127.0.0.9", "127.0.0.10", "127.0.0.11"};
    for (int i = 0; i < BURST + 9; i++) { /* spread over addresses: the token is the limit */
        score_from(&srv, sources[i % 3], srv.token, &r);
        if (limited(&r, "with this credential"))
            refused++;
        else
            passed++;
        http_reply_free(&r);
    }
    CHECK_INT(passed, BURST);
    CHECK_INT(refused, 9);
}

/* The client library waits as Retry-After asks and sends again: a key
 * fetching tasks faster than --next-rate (20/s after a burst of 5) gets
 * every answer, and the server did refuse some on the way. */
static void test_library_waits(server_proc *d)
{
    load_tasks(d, "", 40);
    char key[400];
    ldpref_options o;
    CHECK_ERR(annotator_key_ensure(d->dir, "waits.key", key, sizeof key), LDPREF_OK);
    annotator_options_init(&o, d->url, key, 1.0, 1000);
    ldpref_client *c = NULL;
    CHECK_ERR(ldpref_client_open(&o, &c), LDPREF_OK);
    char *token = enrollment_token(d, "default");
    CHECK_ERR(ldpref_enroll(c, token ? token : "", NULL), LDPREF_OK);
    free(token);
    double refused0 = metric(d, "ldpref_rate_limited_total{class=\"tasks_next\"}");
    int ok = 0;
    for (int i = 0; i < 25; i++) {
        ldpref_task *t = NULL;
        size_t n = 0;
        ok += ldpref_next_tasks(c, 1, &t, &n) == LDPREF_OK && n == 1;
        ldpref_tasks_free(t, n);
    }
    CHECK_INT(ok, 25);
    double refused = metric(d, "ldpref_rate_limited_total{class=\"tasks_next\"}") - refused0;
    CHECK(refused >= 1);
    printf("the library fetched 25 tasks at --next-rate 20/s after a burst of 5: %.0f 429s "
           "waited out\n",
           refused);
    ldpref_client_close(c);
}

/* A server with the documented enrollment defaults (--enroll-rate 1,
 * --enroll-burst 30): the guesser is throttled after the burst plus what
 * refilled while it guessed, and Retry-After is honest. */
static void test_defaults(void)
{
    server_proc d;
    const char *args[] = {"--next-rate", "20", "--next-burst", "5", NULL};
    if (server_start(&d, args) != 0) {
        check_record(0, __FILE__, __LINE__, "the default server did not start");
        return;
    }
    const int burst = 30;
    int looked_up = 0, first_429 = -1;
    long retry = -1;
    int64_t t0 = lp_mono_ns();
    http_reply r;
    for (int i = 0; i < 400 && first_429 < 0; i++) {
        char t[64];
        guess_token(t);
        long st = enroll_from(&d, "127.0.0.12", t, &r);
        if (st == 403)
            looked_up++;
        if (st == 429) {
            first_429 = i;
            retry = retry_after(&r);
        }
        http_reply_free(&r);
    }
    double elapsed = (double)(lp_mono_ns() - t0) / 1e9;
    /* a full bucket, plus one token per second of guessing */
    check_record(first_429 >= 0 && looked_up >= burst &&
                     looked_up <= burst + (int)ceil(elapsed * 1.0) + 1,
                 __FILE__, __LINE__,
                 "defaults: %d guesses looked up in %.2f s before a 429 (expected %d..%d)",
                 looked_up, elapsed, burst, burst + (int)ceil(elapsed) + 1);
    CHECK_INT(retry, 1); /* under a second to the next token: rounded up */
    /* after Retry-After the bucket holds a token again */
    usleep((useconds_t)(retry > 0 ? retry : 1) * 1000000u + 50000u);
    char t[64];
    guess_token(t);
    CHECK_INT(enroll_from(&d, "127.0.0.12", t, &r), 403);
    http_reply_free(&r);
    printf("defaults: %d guesses looked up in %.2f s, then 429 with Retry-After %ld s\n", looked_up,
           elapsed, retry);
    test_library_waits(&d);
    server_cleanup(&d);
}

int main(void)
{
    curl_global_init(CURL_GLOBAL_DEFAULT);
    lp_rng_init();
    const char *args[] = {"--enroll-rate",
                          SLOW_RATE,
                          "--enroll-burst",
                          "20",
                          "--next-rate",
                          SLOW_RATE,
                          "--next-burst",
                          "20",
                          "--score-rate",
                          SLOW_RATE,
                          "--score-burst",
                          "20",
                          "--rate-address-factor",
                          "3",
                          NULL};
    if (server_start(&srv, args) != 0) {
        check_record(0, __FILE__, __LINE__, "server did not start");
        return check_summary();
    }
    setup_campaign();
    test_enrollment_guessing();
    test_next_flood();
    test_score_flood();
    server_cleanup(&srv);
    test_defaults();
    return check_summary();
}
