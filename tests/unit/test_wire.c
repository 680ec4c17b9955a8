/*
 * test_wire.c — the JSON wire codecs, data-driven: every file in
 * tests/wire/label/valid must decode and round-trip; every file in
 * tests/wire/label/invalid is named "<error_name>--<case>.json" and must fail
 * with exactly that error. Every error the label decoder can return is
 * covered by at least one invalid case.
 */
#include "check.h"
#include "error.h"
#include "files.h"
#include "rr.h"
#include "wire.h"

#include <dirent.h>
#include <math.h>
#include <sodium.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define CASES "tests/wire/label"

/* Parses and decodes a label: the whole path a server runs on a body. */
static int decode_text(const char *text, size_t len, lp_label_msg *out, char *msg)
{
    json_t *root;
    int rc = lp_json_parse(text, len, LP_JSON_DEPTH_MAX, &root, msg, LP_MSG_MAX);
    if (rc != LP_OK)
        return rc;
    rc = lp_wire_label_decode(root, out, msg, LP_MSG_MAX);
    json_decref(root);
    return rc;
}

static int same_label(const lp_label_msg *a, const lp_label_msg *b)
{
    return memcmp(a->key, b->key, LP_KEY_BYTES) == 0 && a->task_id == b->task_id && a->z == b->z &&
           (a->epsilon == b->epsilon) && memcmp(a->nonce, b->nonce, LP_NONCE_BYTES) == 0 &&
           a->timestamp_ms == b->timestamp_ms && memcmp(a->sig, b->sig, LP_SIG_BYTES) == 0;
}

static void run_valid(void)
{
    DIR *d = opendir(CASES "/valid");
    CHECK(d != NULL);
    if (d == NULL)
        return;
    int seen = 0;
    struct dirent *e;
    while ((e = readdir(d)) != NULL) {
        if (e->d_name[0] == '.')
            continue;
        char path[512], msg[LP_MSG_MAX] = "";
        snprintf(path, sizeof path, CASES "/valid/%s", e->d_name);
        size_t len;
        char *text = file_read_all(path, &len);
        lp_label_msg m, back;
        int rc = decode_text(text, len, &m, msg);
        check_record(rc == LP_OK, __FILE__, __LINE__, "valid case %s: %s (%s)", e->d_name,
                     lp_error_name(rc), msg);
        json_t *enc = lp_wire_label_encode(&m);
        char *out = json_dumps(enc, JSON_COMPACT);
        check_record(decode_text(out, strlen(out), &back, msg) == LP_OK && same_label(&m, &back),
                     __FILE__, __LINE__, "round trip of %s", e->d_name);
        free(out);
        json_decref(enc);
        free(text);
        seen++;
    }
    closedir(d);
    CHECK(seen >= 5);
}

static void run_invalid(void)
{
    static const char *const must_cover[] = {"malformed_json", "json_too_deep", "wrong_type",
                                             "missing_field",  "unknown_field", "bad_label",
                                             "bad_epsilon",    "field_too_long"};
    int covered[8] = {0};
    DIR *d = opendir(CASES "/invalid");
    CHECK(d != NULL);
    if (d == NULL)
        return;
    struct dirent *e;
    while ((e = readdir(d)) != NULL) {
        if (e->d_name[0] == '.')
            continue;
        char want[64] = "";
        const char *sep = strstr(e->d_name, "--");
        if (sep == NULL || (size_t)(sep - e->d_name) >= sizeof want) {
            check_record(0, __FILE__, __LINE__, "badly named case %s", e->d_name);
            continue;
        }
        memcpy(want, e->d_name, (size_t)(sep - e->d_name));
        int want_code = lp_error_from_name(want);
        check_record(want_code > 0, __FILE__, __LINE__, "case %s names no error", e->d_name);
        char path[512], msg[LP_MSG_MAX] = "";
        snprintf(path, sizeof path, CASES "/invalid/%s", e->d_name);
        size_t len;
        char *text = file_read_all(path, &len);
        lp_label_msg m;
        int rc = decode_text(text, len, &m, msg);
        check_record(rc == want_code, __FILE__, __LINE__, "invalid case %s: got %s (%s)", e->d_name,
                     lp_error_name(rc), msg);
        check_record(rc == LP_OK || msg[0] != 0, __FILE__, __LINE__, "case %s has a message",
                     e->d_name);
        for (int i = 0; i < 8; i++)
            covered[i] |= strcmp(want, must_cover[i]) == 0;
        free(text);
    }
    closedir(d);
    for (int i = 0; i < 8; i++)
        check_record(covered[i], __FILE__, __LINE__, "error %s covered by a case", must_cover[i]);
}

static void test_epsilon_wire(void)
{
    json_t *inf = lp_json_epsilon(INFINITY), *one = lp_json_epsilon(1.5);
    CHECK(json_is_null(inf));
    CHECK(json_is_real(one) && json_real_value(one) == 1.5);
    json_decref(inf);
    json_decref(one);
}

static void test_enroll_next_codecs(void)
{
    lp_enroll_msg e = {0}, e2;
    memset(e.key, 5, sizeof e.key);
    strcpy(e.token, "et_abc");
    memset(e.sig, 6, sizeof e.sig);
    json_t *j = lp_wire_enroll_encode(&e);
    char msg[LP_MSG_MAX];
    CHECK_ERR(lp_wire_enroll_decode(j, &e2, msg, sizeof msg), LP_OK);
    CHECK(memcmp(&e, &e2, sizeof e) == 0);
    json_object_set_new(j, "token",
                        json_string_nocheck("xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx"
                                            "xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx"
                                            "xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx"
                                            "xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx"));
    CHECK_ERR(lp_wire_enroll_decode(j, &e2, msg, sizeof msg), LP_ETOO_LONG);
    json_decref(j);

    lp_next_msg n = {0}, n2;
    memset(n.key, 1, sizeof n.key);
    n.count = 10;
    n.timestamp_ms = 99;
    j = lp_wire_next_encode(&n);
    CHECK_ERR(lp_wire_next_decode(j, &n2, msg, sizeof msg), LP_OK);
    CHECK(memcmp(&n, &n2, sizeof n) == 0);
    json_object_set_new(j, "count", json_integer(1001));
    CHECK_ERR(lp_wire_next_decode(j, &n2, msg, sizeof msg), LP_EWRONG_TYPE);
    json_decref(j);
}

static void test_skip_progress_codecs(void)
{
    char msg[LP_MSG_MAX];
    lp_skip_msg s = {.task_id = 7, .timestamp_ms = 99}, s2;
    memset(s.key, 2, sizeof s.key);
    memset(s.sig, 3, sizeof s.sig);
    json_t *j = lp_wire_skip_encode(&s);
    CHECK_ERR(lp_wire_skip_decode(j, &s2, msg, sizeof msg), LP_OK);
    CHECK(memcmp(&s, &s2, sizeof s) == 0);
    json_object_set_new(j, "task_id", json_integer(0));
    CHECK_ERR(lp_wire_skip_decode(j, &s2, msg, sizeof msg), LP_EWRONG_TYPE);
    json_object_del(j, "task_id");
    CHECK_ERR(lp_wire_skip_decode(j, &s2, msg, sizeof msg), LP_EMISSING_FIELD);
    json_object_set_new(j, "task_id", json_integer(7));
    json_object_set_new(j, "z", json_integer(1)); /* a skip carries no answer */
    CHECK_ERR(lp_wire_skip_decode(j, &s2, msg, sizeof msg), LP_EUNKNOWN_FIELD);
    json_decref(j);

    lp_progress_msg p = {.timestamp_ms = 5}, p2;
    memset(p.key, 4, sizeof p.key);
    memset(p.sig, 5, sizeof p.sig);
    j = lp_wire_progress_encode(&p);
    CHECK_ERR(lp_wire_progress_decode(j, &p2, msg, sizeof msg), LP_OK);
    CHECK(memcmp(&p, &p2, sizeof p) == 0);
    json_object_set_new(j, "timestamp", json_string("5"));
    CHECK_ERR(lp_wire_progress_decode(j, &p2, msg, sizeof msg), LP_EWRONG_TYPE);
    json_object_set_new(j, "signature", json_string("short"));
    json_object_set_new(j, "timestamp", json_integer(5));
    CHECK_ERR(lp_wire_progress_decode(j, &p2, msg, sizeof msg), LP_EWRONG_TYPE);
    json_decref(j);
    CHECK_ERR(lp_wire_progress_decode(NULL, &p2, msg, sizeof msg), LP_EWRONG_TYPE);
}

/* Campaign names: the server's naming rule, which the client also applies
 * to names in answers (no control characters reach a terminal). */
static void test_campaign_names(void)
{
    CHECK(lp_campaign_name_valid("default", 64));
    CHECK(lp_campaign_name_valid("oasst-en_100.v2", 64));
    CHECK(lp_campaign_name_valid("a", 1));
    CHECK(!lp_campaign_name_valid("ab", 1));
    CHECK(!lp_campaign_name_valid("", 64));
    CHECK(!lp_campaign_name_valid(NULL, 64));
    CHECK(!lp_campaign_name_valid("x\x1b]0;owned\x07", 64));
    CHECK(!lp_campaign_name_valid("x\x1b[2J", 64));
    CHECK(!lp_campaign_name_valid("two words", 64));
    CHECK(!lp_campaign_name_valid("caf\xc3\xa9", 64));
}

static void test_depth(void)
{
    CHECK_INT(lp_json_depth("{\"a\":[1,{\"b\":2}]}", 17), 3);
    CHECK_INT(lp_json_depth("\"[[[[\"", 6), 0); /* brackets inside strings */
    CHECK_INT(lp_json_depth("\"\\\"[[\"", 6), 0);
    /* The values bound: 1 + each , : [ { outside strings. */
    size_t values = 0;
    int depth = -1;
    lp_json_shape("{\"a\":[1,{\"b\":2}],\"c\":\"x,y:[\"}", 29, &depth, &values);
    CHECK_INT(depth, 3);
    CHECK_INT(values, 9); /* the object, "a", the list, 1, the object, "b", 2, "c", "x,y:[" */
    lp_json_shape("0", 1, NULL, &values);
    CHECK_INT(values, 1);
}

/* The fast path must agree with the full parser: a body it accepts decodes
 * to the same message; an invalid body it never accepts. Checked on every
 * case file, then on many random mutations of valid labels and batches. */
static int scan_agrees(const char *text, size_t len)
{
    lp_label_msg fast, full;
    char msg[LP_MSG_MAX];
    if (lp_wire_label_scan(text, len, &fast, NULL) != 1)
        return -1; /* not taken: nothing to compare */
    return decode_text(text, len, &full, msg) == LP_OK && same_label(&fast, &full);
}

static int batch_agrees(const char *text, size_t len)
{
    lp_label_msg fast[8];
    char msg[LP_MSG_MAX];
    size_t n = lp_wire_batch_scan(text, len, fast, 8);
    if (n == 0)
        return -1;
    json_t *root;
    if (lp_json_parse(text, len, LP_JSON_DEPTH_MAX, &root, msg, sizeof msg) != LP_OK)
        return 0;
    const json_t *list = json_object_get(root, "labels");
    int ok = json_object_size(root) == 1 && json_is_array(list) && json_array_size(list) == n;
    for (size_t i = 0; ok && i < n; i++) {
        lp_label_msg full;
        ok = lp_wire_label_decode(json_array_get(list, i), &full, msg, sizeof msg) == LP_OK &&
             same_label(&fast[i], &full);
    }
    json_decref(root);
    return ok;
}

static void test_scan_cases(void)
{
    static const char *const dirs[] = {CASES "/valid", CASES "/invalid"};
    int taken = 0;
    for (int v = 0; v < 2; v++) {
        DIR *d = opendir(dirs[v]);
        CHECK(d != NULL);
        if (d == NULL)
            continue;
        struct dirent *e;
        while ((e = readdir(d)) != NULL) {
            if (e->d_name[0] == '.')
                continue;
            char path[512];
            snprintf(path, sizeof path, "%s/%s", dirs[v], e->d_name);
            size_t len;
            char *text = file_read_all(path, &len);
            int r = scan_agrees(text, len);
            if (v == 0) {
                check_record(r != 0, __FILE__, __LINE__, "fast path disagrees on %s", e->d_name);
                taken += r == 1;
            } else {
                check_record(r == -1, __FILE__, __LINE__, "fast path took invalid %s", e->d_name);
            }
            free(text);
        }
        closedir(d);
    }
    CHECK(taken >= 5); /* the plain forms do take the fast path */
}

static void test_scan_mutations(void)
{
    static const char alphabet[] = "{}[]\",:.-+eE0123456789 \t\nnulAZaz_=\\";
    lp_label_msg m = {0};
    randombytes_buf(m.key, sizeof m.key);
    randombytes_buf(m.nonce, sizeof m.nonce);
    randombytes_buf(m.sig, sizeof m.sig);
    m.task_id = 1234567;
    m.z = 1;
    m.timestamp_ms = 1763730000123;
    int disagree = 0, taken = 0;
    uint32_t seed = 12345;
    for (int round = 0; round < 40000; round++) {
        m.epsilon = round % 3 == 0 ? INFINITY : round % 3 == 1 ? 0.5 : 7.0;
        json_t *o = lp_wire_label_encode(&m);
        char *one = json_dumps(o, JSON_COMPACT | (round % 2 ? JSON_INDENT(1) : 0));
        json_decref(o);
        char text[2048];
        int batch = round % 4 == 3;
        int len = batch ? snprintf(text, sizeof text, "{\"labels\": [%s,%s]}", one, one)
                        : snprintf(text, sizeof text, "%s", one);
        free(one);
        int edits = 1 + (int)((seed = seed * 1103515245u + 12345u) >> 16) % 3;
        for (int k = 0; k < edits && round > 0; k++) {
            seed = seed * 1103515245u + 12345u;
            int pos = (int)((seed >> 8) % (uint32_t)len);
            seed = seed * 1103515245u + 12345u;
            int op = (int)((seed >> 8) % 3);
            char c = alphabet[(seed >> 16) % (sizeof alphabet - 1)];
            if (op == 0) {
                text[pos] = c;
            } else if (op == 1 && len > 1) {
                memmove(text + pos, text + pos + 1, (size_t)(len - pos));
                len--;
            } else if (len + 1 < (int)sizeof text) {
                memmove(text + pos + 1, text + pos, (size_t)(len - pos + 1));
                text[pos] = c;
                len++;
            }
        }
        int r = batch ? batch_agrees(text, (size_t)len) : scan_agrees(text, (size_t)len);
        if (r == 0 && disagree++ < 5)
            fprintf(stderr, "fast path disagrees on: %.*s\n", len, text);
        taken += r == 1;
    }
    CHECK_INT(disagree, 0);
    CHECK(taken > 1000);

    /* integers: 18 digits are scanned, 19 go to the full parser */
    m.epsilon = 1.0;
    m.task_id = 123456789012345678;
    json_t *o = lp_wire_label_encode(&m);
    char *t = json_dumps(o, JSON_COMPACT);
    CHECK_INT(scan_agrees(t, strlen(t)), 1);
    free(t);
    json_decref(o);
    m.task_id = INT64_MAX;
    o = lp_wire_label_encode(&m);
    t = json_dumps(o, JSON_COMPACT);
    CHECK_INT(scan_agrees(t, strlen(t)), -1);
    free(t);
    json_decref(o);
}

int main(void)
{
    lp_rng_init();
    run_valid();
    run_invalid();
    test_epsilon_wire();
    test_enroll_next_codecs();
    test_skip_progress_codecs();
    test_campaign_names();
    test_depth();
    test_scan_cases();
    test_scan_mutations();
    return check_summary();
}
