/*
 * test_taskfile.c — JSONL task uploads (server/api/taskfile): every accepted
 * line format with and without dense features and what each yields, the
 * content-derived id, blank lines, CRLF, conversations (context turns and
 * TRL's conversational form, their caps), and every refusal (bad_task with
 * the 1-based line and the problem in the message, nothing left to free).
 * The parsed tasks are also loaded into a real store on a temporary file and
 * read back.
 */
#include "taskfile.h"

#include "check.h"
#include "error.h"
#include "store.h"
#include "store_fixture.h"
#include "tasks.h"

#include <sodium.h>
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define DEPTH 32

static char msg[512];

static int parse(const char *body, lp_taskfile *tf)
{
    msg[0] = 0;
    return lp_taskfile_parse(body, strlen(body), DEPTH, tf, msg, sizeof msg);
}

/* The content-derived id of taskfile.h, recomputed: "h:" + hex BLAKE2b-128
 * of prompt, response 0 and response 1, each with its NUL. */
static void content_id(const char *prompt, const char *r0, const char *r1, char out[35])
{
    crypto_generichash_state st;
    uint8_t h[16];
    crypto_generichash_init(&st, NULL, 0, sizeof h);
    const char *parts[3] = {prompt, r0, r1};
    for (int k = 0; k < 3; k++)
        crypto_generichash_update(&st, (const uint8_t *)parts[k], strlen(parts[k]) + 1);
    crypto_generichash_final(&st, h, sizeof h);
    memcpy(out, "h:", 2);
    sodium_bin2hex(out + 2, 33, h, sizeof h);
}

/* Parses body, which must fail with bad_task naming `line` and containing
 * `why`; the output must be left empty. */
static void expect_refusal(const char *what, const char *body, size_t len, int line,
                           const char *why)
{
    lp_taskfile tf;
    memset(&tf, 0x5a, sizeof tf);
    msg[0] = 0;
    int rc = lp_taskfile_parse(body, len, DEPTH, &tf, msg, sizeof msg);
    char want_line[32];
    snprintf(want_line, sizeof want_line, "line %d: ", line);
    check_record(rc == LP_EBAD_TASK, __FILE__, __LINE__, "%s: got %s (%s)", what, lp_error_name(rc),
                 msg);
    check_record(line == 0 || strncmp(msg, want_line, strlen(want_line)) == 0, __FILE__, __LINE__,
                 "%s: message \"%s\" does not start with \"%s\"", what, msg, want_line);
    check_record(strstr(msg, why) != NULL, __FILE__, __LINE__,
                 "%s: message \"%s\" does not say \"%s\"", what, msg, why);
    check_record(tf.tasks == NULL && tf.n == 0 && tf.priv == NULL, __FILE__, __LINE__,
                 "%s: output not cleared", what);
    if (rc == LP_OK)
        lp_taskfile_free(&tf);
}

static void refuse(const char *what, const char *body, int line, const char *why)
{
    expect_refusal(what, body, strlen(body), line, why);
}

/* A refusal case: the upload, the line it names, what the message says. */
typedef struct refusal {
    const char *what, *body;
    int line;
    const char *why;
} refusal;

static void refuse_all(const refusal *cases, size_t n)
{
    for (size_t i = 0; i < n; i++)
        refuse(cases[i].what, cases[i].body, cases[i].line, cases[i].why);
}

/* ---- accepted formats ---- */

static void test_pairs_format_with_context(void)
{
    const char *body =
        "{\"id\": \"oasst:a>b\", \"source\": \"x\", \"context\": [{\"role\": \"user\", "
        "\"content\": \"Hi?\"}], \"prompt\": \"Hi?\", \"chosen\": \"Hello.\", \"rejected\": "
        "\"Go away.\", \"extra\": {\"nested\": [1, 2]}}\n";
    lp_taskfile tf;
    CHECK_ERR(parse(body, &tf), LP_OK);
    CHECK_INT(tf.n, 1);
    if (tf.n == 1) {
        const lp_task_in *t = &tf.tasks[0];
        CHECK_STR(t->source_id, "oasst:a>b");
        CHECK_STR(t->prompt, "Hi?");
        CHECK_STR(t->response0, "Hello.");
        CHECK_STR(t->response1, "Go away.");
        CHECK_INT(t->reference_preferred, 0); /* chosen is response 0 */
        CHECK(t->features0 == NULL && t->features1 == NULL);
        CHECK_INT(t->dim, 0);
        CHECK_INT(t->n_context, 0); /* the one turn is the prompt itself */
    }
    lp_taskfile_free(&tf);
    CHECK(tf.tasks == NULL && tf.n == 0 && tf.priv == NULL);
}

static void test_trl_format_gets_content_id(void)
{
    lp_taskfile tf;
    CHECK_ERR(parse("{\"prompt\": \"2+2?\", \"chosen\": \"4\", \"rejected\": \"5\"}", &tf), LP_OK);
    CHECK_INT(tf.n, 1);
    char want[35];
    content_id("2+2?", "4", "5", want);
    if (tf.n == 1) {
        CHECK_STR(tf.tasks[0].source_id, want);
        CHECK_INT(strlen(tf.tasks[0].source_id), 34);
        CHECK_STR(tf.tasks[0].response0, "4");
        CHECK_STR(tf.tasks[0].response1, "5");
        CHECK_INT(tf.tasks[0].reference_preferred, 0);
    }
    lp_taskfile_free(&tf);
    /* "id": null is the same as no id. */
    CHECK_ERR(
        parse("{\"id\": null, \"prompt\": \"2+2?\", \"chosen\": \"4\", \"rejected\": \"5\"}", &tf),
        LP_OK);
    if (tf.n == 1)
        CHECK_STR(tf.tasks[0].source_id, want);
    lp_taskfile_free(&tf);
}

static void test_generic_format(void)
{
    lp_taskfile tf;
    const char *body = "{\"id\": \"g1\", \"prompt\": \"p\", \"responses\": [\"r0\", \"r1\"]}\n"
                       "{\"prompt\": \"p\", \"responses\": [\"r0\", \"r1\"]}\n"
                       "{\"id\": 42, \"prompt\": \"q\", \"responses\": [\"\", \"only one\"]}\n"
                       "{\"id\": -7, \"prompt\": \"\", \"responses\": [\"a\", \"b\"]}\n";
    CHECK_ERR(parse(body, &tf), LP_OK);
    CHECK_INT(tf.n, 4);
    if (tf.n == 4) {
        CHECK_STR(tf.tasks[0].source_id, "g1");
        CHECK_STR(tf.tasks[0].response0, "r0");
        CHECK_STR(tf.tasks[0].response1, "r1");
        CHECK_INT(tf.tasks[0].reference_preferred, -1); /* no reference answer */
        char want[35];
        content_id("p", "r0", "r1", want);
        CHECK_STR(tf.tasks[1].source_id, want);
        CHECK_STR(tf.tasks[2].source_id, "42"); /* integer ids become decimal text */
        CHECK_STR(tf.tasks[2].response0, "");
        CHECK_STR(tf.tasks[3].source_id, "-7");
        CHECK_STR(tf.tasks[3].prompt, "");
        for (int i = 0; i < 4; i++)
            CHECK(tf.tasks[i].features0 == NULL && tf.tasks[i].dim == 0);
    }
    lp_taskfile_free(&tf);
}

/* The same comparison in TRL and generic form has the same content id, and
 * the id depends on every part, with the boundaries between them. */
static void test_content_id_covers_every_part(void)
{
    lp_taskfile tf;
    const char *body = "{\"prompt\": \"ab\", \"chosen\": \"c\", \"rejected\": \"d\"}\n"
                       "{\"prompt\": \"ab\", \"responses\": [\"c\", \"d\"]}\n"
                       "{\"prompt\": \"a\", \"responses\": [\"bc\", \"d\"]}\n"
                       "{\"prompt\": \"ab\", \"responses\": [\"d\", \"c\"]}\n"
                       "{\"prompt\": \"ab\", \"responses\": [\"c\", \"e\"]}\n";
    CHECK_ERR(parse(body, &tf), LP_OK);
    CHECK_INT(tf.n, 5);
    if (tf.n == 5) {
        CHECK_STR(tf.tasks[0].source_id, tf.tasks[1].source_id);
        for (int i = 1; i < 5; i++)
            for (int j = i + 1; j < 5; j++)
                check_record(strcmp(tf.tasks[i].source_id, tf.tasks[j].source_id) != 0, __FILE__,
                             __LINE__, "lines %d and %d share id %s", i + 1, j + 1,
                             tf.tasks[i].source_id);
    }
    lp_taskfile_free(&tf);
}

static void test_dense_features(void)
{
    lp_taskfile tf;
    const char *body =
        "{\"id\": \"d1\", \"prompt\": \"p\", \"responses\": [\"a\", \"b\"], "
        "\"features\": [[1, -2.5, 0], [0.25, 3, 1e300]]}\n"
        "{\"id\": \"d2\", \"prompt\": \"p\", \"chosen\": \"a\", \"rejected\": \"b\", "
        "\"chosen_features\": [7], \"rejected_features\": [-7]}\n"
        "{\"prompt\": \"p\", \"chosen\": \"a\", \"rejected\": \"b\", "
        "\"chosen_features\": [0.5, 0.5], \"rejected_features\": [1, 2]}\n";
    CHECK_ERR(parse(body, &tf), LP_OK);
    CHECK_INT(tf.n, 3);
    if (tf.n == 3) {
        const lp_task_in *t = &tf.tasks[0];
        CHECK_INT(t->dim, 3);
        CHECK(t->features0 && t->features1);
        if (t->features0 && t->features1) {
            CHECK(t->features0[0] == 1 && t->features0[1] == -2.5 && t->features0[2] == 0);
            CHECK(t->features1[0] == 0.25 && t->features1[1] == 3 && t->features1[2] == 1e300);
        }
        CHECK_INT(t->reference_preferred, -1);
        t = &tf.tasks[1];
        CHECK_INT(t->dim, 1);
        CHECK(t->features0 && t->features0[0] == 7 && t->features1 && t->features1[0] == -7);
        CHECK_INT(t->reference_preferred, 0);
        t = &tf.tasks[2];
        CHECK_INT(t->dim, 2);
        CHECK(t->features1 && t->features1[1] == 2);
        char want[35];
        content_id("p", "a", "b", want); /* features are not part of the id */
        CHECK_STR(t->source_id, want);
    }
    lp_taskfile_free(&tf);
    /* Exactly LP_FEATURES_MAX values is accepted. */
    size_t cap = 64 + 2 * 2 * LP_FEATURES_MAX + 128;
    char *big = malloc(cap);
    size_t n =
        (size_t)snprintf(big, cap, "{\"prompt\":\"p\",\"responses\":[\"a\",\"b\"],\"features\":[");
    for (int v = 0; v < 2; v++) {
        big[n++] = '[';
        for (int i = 0; i < LP_FEATURES_MAX; i++) {
            big[n++] = '1';
            big[n++] = i + 1 < LP_FEATURES_MAX ? ',' : ']';
        }
        big[n++] = v == 0 ? ',' : ']';
    }
    big[n++] = '}';
    CHECK_ERR(lp_taskfile_parse(big, n, DEPTH, &tf, msg, sizeof msg), LP_OK);
    CHECK_INT(tf.n == 1 ? tf.tasks[0].dim : 0, LP_FEATURES_MAX);
    lp_taskfile_free(&tf);
    free(big);
}

static void test_blank_lines_crlf_and_whitespace(void)
{
    lp_taskfile tf;
    const char *body =
        "\n"
        "   \t \r\n"
        "  {\"id\": \"a\", \"prompt\": \"p\", \"chosen\": \"x\", \"rejected\": \"y\"} \t\r\n"
        "\r\n"
        "{\"id\": \"b\", \"prompt\": \"line\\r\\nbreak\", \"chosen\": \"x\", "
        "\"rejected\": \"y\"}\r\n"
        "\n"
        "{\"id\": \"c\", \"prompt\": \"p\", \"chosen\": \"x\", \"rejected\": \"y\"}";
    CHECK_ERR(parse(body, &tf), LP_OK); /* the last line needs no newline */
    CHECK_INT(tf.n, 3);
    if (tf.n == 3) {
        CHECK_STR(tf.tasks[0].source_id, "a");
        CHECK_STR(tf.tasks[1].source_id, "b");
        CHECK_STR(tf.tasks[1].prompt, "line\r\nbreak"); /* escapes inside strings are kept */
        CHECK_STR(tf.tasks[2].source_id, "c");
        CHECK_STR(tf.tasks[2].response1, "y");
    }
    lp_taskfile_free(&tf);
}

/* Limits are inclusive: 65536-byte texts (UTF-8 bytes, not characters) and
 * a 128-byte id are accepted. */
static void test_limits_accepted(void)
{
    size_t cap = 3 * LP_TASK_TEXT_MAX + 1024;
    char *body = malloc(cap);
    char *text = malloc(LP_TASK_TEXT_MAX + 1), id[LP_TASK_ID_MAX + 1];
    memset(text, 't', LP_TASK_TEXT_MAX);
    text[LP_TASK_TEXT_MAX] = 0;
    memset(id, 'i', LP_TASK_ID_MAX);
    id[LP_TASK_ID_MAX] = 0;
    snprintf(body, cap, "{\"id\":\"%s\",\"prompt\":\"%s\",\"chosen\":\"%s\",\"rejected\":\"%s\"}",
             id, text, text, text);
    lp_taskfile tf;
    CHECK_ERR(parse(body, &tf), LP_OK);
    CHECK_INT(tf.n == 1 ? strlen(tf.tasks[0].prompt) : 0, LP_TASK_TEXT_MAX);
    CHECK_INT(tf.n == 1 ? strlen(tf.tasks[0].source_id) : 0, LP_TASK_ID_MAX);
    lp_taskfile_free(&tf);
    /* Two-byte characters: 32768 of them are 65536 bytes. */
    size_t n = (size_t)snprintf(body, cap, "{\"prompt\":\"");
    for (int i = 0; i < LP_TASK_TEXT_MAX / 2; i++) {
        body[n++] = (char)0xc3;
        body[n++] = (char)0xa9;
    }
    n += (size_t)snprintf(body + n, cap - n, "\",\"responses\":[\"a\",\"b\"]}");
    CHECK_ERR(lp_taskfile_parse(body, n, DEPTH, &tf, msg, sizeof msg), LP_OK);
    lp_taskfile_free(&tf);
    free(text);
    free(body);
}

/* Many lines: the tasks stay in order and every id points at its own line
 * after the arrays have grown. */
static void test_many_lines_keep_order(void)
{
    enum { LINES = 1000 };
    size_t cap = (size_t)LINES * 96;
    char *body = malloc(cap);
    size_t n = 0;
    for (int i = 0; i < LINES; i++)
        n += (size_t)snprintf(body + n, cap - n,
                              "{\"id\": %d, \"prompt\": \"p%d\", \"responses\": [\"a\", \"b\"]}\n",
                              i, i);
    lp_taskfile tf;
    CHECK_ERR(lp_taskfile_parse(body, n, DEPTH, &tf, msg, sizeof msg), LP_OK);
    CHECK_INT(tf.n, LINES);
    int bad = 0;
    for (size_t i = 0; i < tf.n; i++) {
        char want[32];
        snprintf(want, sizeof want, "%zu", i);
        bad +=
            strcmp(tf.tasks[i].source_id, want) != 0 || strcmp(tf.tasks[i].prompt + 1, want) != 0;
    }
    CHECK_INT(bad, 0);
    lp_taskfile_free(&tf);
    free(body);
}

/* ---- refusals ---- */

static void test_refuses_empty_uploads(void)
{
    refuse("empty body", "", 0, "the upload holds no tasks");
    refuse("blank lines only", "\n\n  \t\r\n\r\n", 0, "the upload holds no tasks");
    lp_taskfile tf;
    memset(&tf, 0x5a, sizeof tf);
    CHECK_ERR(lp_taskfile_parse(NULL, 0, DEPTH, &tf, msg, sizeof msg), LP_EBAD_TASK);
    CHECK(tf.tasks == NULL && tf.n == 0);
}

static void test_refuses_bad_json(void)
{
    static const refusal cases[] = {
        {"truncated", "{\"prompt\": \"p\", \"chosen\": ", 1, "line 1 column"},
        {"not JSON", "prompt=p&chosen=a", 1, "line 1 column"},
        {"trailing garbage", "{\"prompt\":\"p\",\"responses\":[\"a\",\"b\"]} x", 1, "column"},
        {"duplicate key", "{\"prompt\":\"p\",\"prompt\":\"q\",\"responses\":[\"a\",\"b\"]}", 1,
         "duplicate"},
        {"object over two lines", "{\"prompt\":\"p\",\n\"responses\":[\"a\",\"b\"]}", 1, "column"},
        {"number overflow",
         "{\"prompt\":\"p\",\"responses\":[\"a\",\"b\"],\"features\":[[1e999],[1]]}", 1, "column"},
        {"too deep",
         "{\"prompt\":\"p\",\"responses\":[\"a\",\"b\"],\"x\":[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[["
         "]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]}",
         1, "nesting deeper than 32"},
    };
    refuse_all(cases, sizeof cases / sizeof cases[0]);
    /* Invalid UTF-8 and a raw NUL byte inside a string. */
    refuse("invalid UTF-8", "{\"prompt\":\"caf\xc3\",\"responses\":[\"a\",\"b\"]}", 1,
           "unable to decode byte 0xc3");
    refuse("overlong UTF-8", "{\"prompt\":\"\xc0\xaf\",\"responses\":[\"a\",\"b\"]}", 1,
           "unable to decode byte 0xc0");
    static const char nul_line[] = "{\"prompt\":\"p\0q\",\"responses\":[\"a\",\"b\"]}\n";
    expect_refusal("raw NUL byte", nul_line, sizeof nul_line - 1, 1, "line 1 column");
}

static void test_refuses_wrong_shapes(void)
{
    static const refusal cases[] = {
        {"array", "[\"p\", \"a\", \"b\"]", 1, "not a JSON object"},
        {"string", "\"p\"", 1, "not a JSON object"},
        {"number", "42", 1, "not a JSON object"},
        {"null", "null", 1, "not a JSON object"},
        {"no prompt", "{\"chosen\":\"a\",\"rejected\":\"b\"}", 1, "missing field \"prompt\""},
        {"prompt a number", "{\"prompt\":1,\"chosen\":\"a\",\"rejected\":\"b\"}", 1,
         "field \"prompt\" must be a string"},
        {"prompt null", "{\"prompt\":null,\"responses\":[\"a\",\"b\"]}", 1,
         "field \"prompt\" must be a string"},
        {"no responses at all", "{\"prompt\":\"p\"}", 1, "missing field \"chosen\""},
        {"no rejected", "{\"prompt\":\"p\",\"chosen\":\"a\"}", 1, "missing field \"rejected\""},
        {"chosen an array", "{\"prompt\":\"p\",\"chosen\":[\"a\"],\"rejected\":\"b\"}", 1,
         "field \"chosen\" must be a string"},
        {"rejected a number", "{\"prompt\":\"p\",\"chosen\":\"a\",\"rejected\":0}", 1,
         "field \"rejected\" must be a string"},
        {"responses an object", "{\"prompt\":\"p\",\"responses\":{\"0\":\"a\"}}", 1,
         "\"responses\" must be two strings"},
        {"one response", "{\"prompt\":\"p\",\"responses\":[\"a\"]}", 1,
         "\"responses\" must be two strings"},
        {"three responses", "{\"prompt\":\"p\",\"responses\":[\"a\",\"b\",\"c\"]}", 1,
         "\"responses\" must be two strings"},
        {"a response a number", "{\"prompt\":\"p\",\"responses\":[\"a\",2]}", 1,
         "\"responses\" must be two strings"},
        {"responses null", "{\"prompt\":\"p\",\"responses\":null}", 1,
         "\"responses\" must be two strings"},
    };
    refuse_all(cases, sizeof cases / sizeof cases[0]);
}

static void test_refuses_bad_ids(void)
{
    refuse("empty id", "{\"id\":\"\",\"prompt\":\"p\",\"responses\":[\"a\",\"b\"]}", 1,
           "\"id\" must be 1..128 bytes");
    char body[512], id[LP_TASK_ID_MAX + 2];
    memset(id, 'i', LP_TASK_ID_MAX + 1);
    id[LP_TASK_ID_MAX + 1] = 0;
    snprintf(body, sizeof body, "{\"id\":\"%s\",\"prompt\":\"p\",\"responses\":[\"a\",\"b\"]}", id);
    refuse("id of 129 bytes", body, 1, "\"id\" must be 1..128 bytes");
    static const refusal cases[] = {
        {"real id", "{\"id\":1.5,\"prompt\":\"p\",\"responses\":[\"a\",\"b\"]}", 1,
         "\"id\" must be a string or an integer"},
        {"boolean id", "{\"id\":true,\"prompt\":\"p\",\"responses\":[\"a\",\"b\"]}", 1,
         "\"id\" must be a string or an integer"},
        {"array id", "{\"id\":[1],\"prompt\":\"p\",\"responses\":[\"a\",\"b\"]}", 1,
         "\"id\" must be a string or an integer"},
    };
    refuse_all(cases, sizeof cases / sizeof cases[0]);
}

static void test_refuses_oversize_and_nul_texts(void)
{
    size_t cap = LP_TASK_TEXT_MAX + 256;
    char *body = malloc(cap), *text = malloc(LP_TASK_TEXT_MAX + 2);
    memset(text, 't', LP_TASK_TEXT_MAX + 1);
    text[LP_TASK_TEXT_MAX + 1] = 0;
    snprintf(body, cap, "{\"prompt\":\"%s\",\"chosen\":\"a\",\"rejected\":\"b\"}", text);
    refuse("prompt of 65537 bytes", body, 1, "field \"prompt\" is longer than 65536 bytes");
    snprintf(body, cap, "{\"prompt\":\"p\",\"chosen\":\"%s\",\"rejected\":\"b\"}", text);
    refuse("chosen of 65537 bytes", body, 1, "field \"chosen\" is longer than 65536 bytes");
    snprintf(body, cap, "{\"prompt\":\"p\",\"chosen\":\"a\",\"rejected\":\"%s\"}", text);
    refuse("rejected of 65537 bytes", body, 1, "field \"rejected\" is longer than 65536 bytes");
    snprintf(body, cap, "{\"prompt\":\"p\",\"responses\":[\"a\",\"%s\"]}", text);
    refuse("response 1 of 65537 bytes", body, 1, "response 1 is too long or has NUL");
    free(text);
    free(body);
    /* An escaped NUL is refused by the JSON parser already, in any field. */
    static const char *const nul_fields[] = {
        "{\"id\":\"a\\u0000b\",\"prompt\":\"p\",\"responses\":[\"a\",\"b\"]}",
        "{\"prompt\":\"p\\u0000\",\"chosen\":\"a\",\"rejected\":\"b\"}",
        "{\"prompt\":\"p\",\"chosen\":\"\\u0000\",\"rejected\":\"b\"}",
        "{\"prompt\":\"p\",\"responses\":[\"a\\u0000\",\"b\"]}",
    };
    for (size_t i = 0; i < sizeof nul_fields / sizeof nul_fields[0]; i++)
        refuse(nul_fields[i], nul_fields[i], 1, "\\u0000 is not allowed");
}

static void test_refuses_bad_features(void)
{
#define GENERIC "{\"prompt\":\"p\",\"responses\":[\"a\",\"b\"],\"features\":"
#define PAIRED "{\"prompt\":\"p\",\"chosen\":\"a\",\"rejected\":\"b\","
    static const refusal cases[] = {
        {"features not an array", GENERIC "{}}", 1, "\"features\" must be [[...], [...]]"},
        {"one vector", GENERIC "[[1]]}", 1, "\"features\" must be [[...], [...]]"},
        {"three vectors", GENERIC "[[1],[2],[3]]}", 1, "\"features\" must be [[...], [...]]"},
        {"flat vector", GENERIC "[1,2]}", 1, "\"features 0\" must be an array of 1..4096 numbers"},
        {"empty vector", GENERIC "[[1],[]]}", 1,
         "\"features 1\" must be an array of 1..4096 numbers"},
        {"string value", GENERIC "[[1,\"2\"],[1,2]]}", 1,
         "\"features 0\"[1] is not a finite number"},
        {"null value", GENERIC "[[1,2],[null,2]]}", 1, "\"features 1\"[0] is not a finite number"},
        {"lengths differ", GENERIC "[[1,2],[1,2,3]]}", 1,
         "feature vectors differ in length (2, 3)"},
        {"chosen_features alone", PAIRED "\"chosen_features\":[1]}", 1,
         "\"chosen_features\" and \"rejected_features\" go together"},
        {"rejected_features alone", PAIRED "\"rejected_features\":[1]}", 1,
         "\"chosen_features\" and \"rejected_features\" go together"},
        {"paired lengths differ", PAIRED "\"chosen_features\":[1],\"rejected_features\":[1,2]}", 1,
         "feature vectors differ in length (1, 2)"},
        {"paired not arrays", PAIRED "\"chosen_features\":1,\"rejected_features\":2}", 1,
         "\"features 0\" must be an array"},
    };
    refuse_all(cases, sizeof cases / sizeof cases[0]);
#undef GENERIC
#undef PAIRED
    /* One value over the cap. */
    size_t cap = 2 * 2 * (LP_FEATURES_MAX + 1) + 128;
    char *big = malloc(cap);
    size_t n =
        (size_t)snprintf(big, cap, "{\"prompt\":\"p\",\"responses\":[\"a\",\"b\"],\"features\":[[");
    for (int i = 0; i <= LP_FEATURES_MAX; i++) {
        big[n++] = '0';
        big[n++] = i < LP_FEATURES_MAX ? ',' : ']';
    }
    n += (size_t)snprintf(big + n, cap - n, ",[1]]}");
    expect_refusal("4097 features", big, n, 1,
                   "\"features 0\" must be an array of 1..4096 numbers");
    free(big);
}

/* The first bad line fails the whole upload, and its number counts blank
 * lines and CRLF lines. */
static void test_refusal_names_the_line(void)
{
    static const refusal cases[] = {
        {"third line bad",
         "{\"prompt\":\"p\",\"responses\":[\"a\",\"b\"]}\n"
         "{\"prompt\":\"q\",\"responses\":[\"a\",\"b\"]}\n"
         "{\"prompt\":\"r\"}\n"
         "{\"prompt\":\"s\",\"responses\":[\"a\",\"b\"]}\n",
         3, "missing field \"chosen\""},
        {"blank lines counted", "\n\r\n \n{\"prompt\":\"p\",\"responses\":[\"a\"]}", 4,
         "\"responses\" must be two strings"},
        {"only the first bad line is named",
         "{\"prompt\":\"p\",\"responses\":[\"a\",\"b\"]}\r\n[]\r\n{\r\n", 2, "not a JSON object"},
    };
    refuse_all(cases, sizeof cases / sizeof cases[0]);
}

/* Freeing: NULL and a freed (zeroed) file are fine. */
static void test_free_accepts_null_and_twice(void)
{
    lp_taskfile_free(NULL);
    lp_taskfile tf;
    CHECK_ERR(parse("{\"prompt\":\"p\",\"responses\":[\"a\",\"b\"]}", &tf), LP_OK);
    lp_taskfile_free(&tf);
    lp_taskfile_free(&tf);
    CHECK(tf.tasks == NULL && tf.priv == NULL);
}

/* What a parsed upload stores: the texts of each task, once per source id
 * (a re-upload of the same file loads nothing new). */
static void test_parsed_tasks_load_into_store(void)
{
    store_fixture fx;
    int opened = store_fixture_open(&fx, "test-taskfile", 1);
    CHECK_INT(opened, LP_OK);
    if (opened != LP_OK)
        return;
    const char *body = "{\"id\": \"x1\", \"prompt\": \"Hi?\", \"chosen\": \"Hello.\", "
                       "\"rejected\": \"Go away.\", \"context\": []}\n"
                       "{\"prompt\": \"p\", \"responses\": [\"r0\", \"r1\"], "
                       "\"features\": [[1, 2], [3, 4]]}\n"
                       "{\"prompt\": \"p\", \"chosen\": \"r0\", \"rejected\": \"r1\"}\n";
    for (int round = 0; round < 2; round++) {
        lp_taskfile tf;
        CHECK_ERR(parse(body, &tf), LP_OK);
        size_t loaded = 9, skipped = 9;
        int64_t first = -1, last = -1;
        CHECK_ERR(
            lp_store_tasks_load(fx.store, 1, tf.tasks, tf.n, &loaded, &skipped, &first, &last),
            LP_OK);
        /* Lines 2 and 3 are the same comparison: one task. */
        CHECK_INT(loaded, round == 0 ? 2 : 0);
        CHECK_INT(skipped, round == 0 ? 1 : 3);
        if (round == 0) {
            CHECK_INT(last - first, 1);
            lp_task t;
            CHECK_ERR(lp_store_task_get(fx.store, first, &t), LP_OK);
            CHECK_STR(t.prompt, "Hi?");
            CHECK_STR(t.response0, "Hello.");
            CHECK_STR(t.response1, "Go away.");
            lp_task_clear(&t);
            CHECK_ERR(lp_store_task_get(fx.store, last, &t), LP_OK);
            CHECK_STR(t.prompt, "p");
            CHECK_STR(t.response0, "r0");
            CHECK_STR(t.response1, "r1");
            lp_task_clear(&t);
        }
        lp_taskfile_free(&tf);
    }
    store_fixture_close(&fx);
}

/* ---- conversations ---- */

/* The content id of a task with context turns: content_id's parts, then
 * each turn's role and content, each with its NUL. */
static void conversation_id(const char *prompt, const char *r0, const char *r1,
                            const char *const *turns, size_t n, char out[35])
{
    crypto_generichash_state st;
    uint8_t h[16];
    crypto_generichash_init(&st, NULL, 0, sizeof h);
    const char *parts[3] = {prompt, r0, r1};
    for (int k = 0; k < 3; k++)
        crypto_generichash_update(&st, (const uint8_t *)parts[k], strlen(parts[k]) + 1);
    for (size_t k = 0; k < 2 * n; k++)
        crypto_generichash_update(&st, (const uint8_t *)turns[k], strlen(turns[k]) + 1);
    crypto_generichash_final(&st, h, sizeof h);
    memcpy(out, "h:", 2);
    sodium_bin2hex(out + 2, 33, h, sizeof h);
}

/* t's context is exactly turns (role, content pairs). */
static void check_turns(const lp_task_in *t, const char *const *turns, size_t n)
{
    CHECK_INT(t->n_context, n);
    if (t->n_context != n)
        return;
    CHECK(n == 0 ? t->context == NULL : t->context != NULL);
    for (size_t k = 0; k < n; k++) {
        CHECK_STR(t->context[k].role, turns[2 * k]);
        CHECK_STR(t->context[k].content, turns[2 * k + 1]);
    }
}

/* pairs.jsonl and generic lines keep their context; a last user turn equal
 * to the prompt is the prompt itself. */
static void test_context_turns_kept(void)
{
    const char *body =
        "{\"context\": [{\"role\": \"user\", \"content\": \"Q1\"}, {\"role\": \"assistant\", "
        "\"content\": \"A1\"}, {\"role\": \"user\", \"content\": \"Q2\"}], \"prompt\": \"Q2\", "
        "\"chosen\": \"c\", \"rejected\": \"r\"}\n"
        "{\"context\": [{\"role\": \"system\", \"content\": \"Be brief.\"}], \"prompt\": \"p\", "
        "\"responses\": [\"r0\", \"r1\"]}\n"
        "{\"context\": [{\"role\": \"user\", \"content\": \"earlier\"}], \"prompt\": \"p\", "
        "\"responses\": [\"r0\", \"r1\"]}\n"
        "{\"context\": null, \"prompt\": \"p\", \"responses\": [\"r0\", \"r1\"]}\n"
        "{\"context\": [{\"role\": \"user\", \"content\": \"p\"}], \"prompt\": \"p\", "
        "\"responses\": [\"r0\", \"r1\"]}\n"
        "{\"context\": [{\"role\": \"assistant\", \"content\": \"p\"}], \"prompt\": \"p\", "
        "\"responses\": [\"r0\", \"r1\"]}\n";
    lp_taskfile tf;
    CHECK_ERR(parse(body, &tf), LP_OK);
    CHECK_INT(tf.n, 6);
    if (tf.n != 6) {
        lp_taskfile_free(&tf);
        return;
    }
    static const char *const t0[] = {"user", "Q1", "assistant", "A1"};
    static const char *const t1[] = {"system", "Be brief."};
    static const char *const t2[] = {"user", "earlier"};
    static const char *const t5[] = {"assistant", "p"};
    check_turns(&tf.tasks[0], t0, 2);
    CHECK_STR(tf.tasks[0].prompt, "Q2");
    check_turns(&tf.tasks[1], t1, 1);
    check_turns(&tf.tasks[2], t2, 1); /* a user turn that is not the prompt stays */
    check_turns(&tf.tasks[3], NULL, 0);
    check_turns(&tf.tasks[4], NULL, 0); /* only the prompt itself */
    check_turns(&tf.tasks[5], t5, 1);   /* an assistant turn is never the prompt */
    /* The content id covers the turns; without them it is the old one. */
    char want[35];
    conversation_id("Q2", "c", "r", t0, 2, want);
    CHECK_STR(tf.tasks[0].source_id, want);
    conversation_id("p", "r0", "r1", t2, 1, want);
    CHECK_STR(tf.tasks[2].source_id, want);
    content_id("p", "r0", "r1", want);
    CHECK_STR(tf.tasks[3].source_id, want);
    CHECK_STR(tf.tasks[4].source_id, want);
    for (int i = 0; i < 6; i++)
        for (int j = i + 1; j < 6; j++)
            check_record((strcmp(tf.tasks[i].source_id, tf.tasks[j].source_id) == 0) ==
                             (i == 3 && j == 4),
                         __FILE__, __LINE__, "lines %d and %d: ids %s, %s", i + 1, j + 1,
                         tf.tasks[i].source_id, tf.tasks[j].source_id);
    lp_taskfile_free(&tf);
}

/* TRL's conversational form: the prompt list's earlier turns are context,
 * its last (the user's) the prompt; the same conversation in pairs.jsonl
 * form is the same task (same content id). */
static void test_conversational_format(void)
{
    const char *body =
        "{\"prompt\": [{\"role\": \"system\", \"content\": \"Be kind.\"}, {\"role\": \"user\", "
        "\"content\": \"Hi\"}, {\"role\": \"assistant\", \"content\": \"Hello!\"}, {\"role\": "
        "\"user\", \"content\": \"2+2?\"}], \"chosen\": [{\"role\": \"assistant\", \"content\": "
        "\"4\"}], \"rejected\": [{\"role\": \"assistant\", \"content\": \"5\"}]}\n"
        "{\"context\": [{\"role\": \"system\", \"content\": \"Be kind.\"}, {\"role\": \"user\", "
        "\"content\": \"Hi\"}, {\"role\": \"assistant\", \"content\": \"Hello!\"}, {\"role\": "
        "\"user\", \"content\": \"2+2?\"}], \"prompt\": \"2+2?\", \"chosen\": \"4\", "
        "\"rejected\": \"5\"}\n"
        "{\"id\": \"c3\", \"prompt\": [{\"role\": \"user\", \"content\": \"alone\"}], "
        "\"chosen\": [{\"role\": \"assistant\", \"content\": \"x\"}], \"rejected\": [{\"role\": "
        "\"assistant\", \"content\": \"y\"}], \"chosen_features\": [1], "
        "\"rejected_features\": [2]}\n";
    lp_taskfile tf;
    CHECK_ERR(parse(body, &tf), LP_OK);
    CHECK_INT(tf.n, 3);
    if (tf.n != 3) {
        lp_taskfile_free(&tf);
        return;
    }
    static const char *const turns[] = {"system", "Be kind.", "user", "Hi", "assistant", "Hello!"};
    for (int i = 0; i < 2; i++) {
        const lp_task_in *t = &tf.tasks[i];
        check_turns(t, turns, 3);
        CHECK_STR(t->prompt, "2+2?");
        CHECK_STR(t->response0, "4");
        CHECK_STR(t->response1, "5");
        CHECK_INT(t->reference_preferred, 0);
    }
    char want[35];
    conversation_id("2+2?", "4", "5", turns, 3, want);
    CHECK_STR(tf.tasks[0].source_id, want);
    CHECK_STR(tf.tasks[1].source_id, want);
    const lp_task_in *t = &tf.tasks[2];
    CHECK_STR(t->source_id, "c3");
    check_turns(t, NULL, 0);
    CHECK_STR(t->prompt, "alone");
    CHECK_STR(t->response0, "x");
    CHECK_INT(t->dim, 1);
    CHECK(t->features1 && t->features1[0] == 2);
    lp_taskfile_free(&tf);
}

/* The caps are inclusive: 32 turns before the prompt, each of 65536 bytes
 * up to 131072 bytes in all. */
static void test_context_limits_accepted(void)
{
    size_t cap = 2 * LP_TASK_TEXT_MAX + 64 * LP_TASK_TURNS_MAX + 256;
    char *body = malloc(cap), *text = malloc(LP_TASK_TEXT_MAX + 1);
    memset(text, 'w', LP_TASK_TEXT_MAX);
    text[LP_TASK_TEXT_MAX] = 0;
    size_t n = (size_t)snprintf(body, cap, "{\"context\": [");
    for (int k = 0; k < LP_TASK_TURNS_MAX; k++)
        n += (size_t)snprintf(body + n, cap - n, "%s{\"role\":\"%s\",\"content\":\"%s\"}",
                              k ? "," : "", k % 2 ? "assistant" : "user", k < 2 ? text : "");
    n +=
        (size_t)snprintf(body + n, cap - n, "], \"prompt\": \"p\", \"responses\": [\"a\", \"b\"]}");
    lp_taskfile tf;
    CHECK_ERR(lp_taskfile_parse(body, n, DEPTH, &tf, msg, sizeof msg), LP_OK);
    CHECK_INT(tf.n == 1 ? tf.tasks[0].n_context : 0, LP_TASK_TURNS_MAX);
    lp_taskfile_free(&tf);
    free(text);
    free(body);
}

/* Every malformed conversation: bad_task naming the line and the problem. */
static void test_refuses_malformed_conversations(void)
{
#define CTX(turns) "{\"prompt\":\"p\",\"responses\":[\"a\",\"b\"],\"context\":" turns "}"
#define CONV(prompt, chosen)                                                                       \
    "{\"prompt\":" prompt ",\"chosen\":" chosen ",\"rejected\":["                                  \
    "{\"role\":\"assistant\",\"content\":\"r\"}]}"
#define USER "{\"role\":\"user\",\"content\":\"q\"}"
#define ASSISTANT "[{\"role\":\"assistant\",\"content\":\"c\"}]"
    static const refusal cases[] = {
        {"context an object", CTX("{\"role\":\"user\",\"content\":\"q\"}"), 1,
         "\"context\" must be an array of turns"},
        {"context a string", CTX("\"earlier\""), 1, "\"context\" must be an array of turns"},
        {"turn a string", CTX("[\"hello\"]"), 1,
         "\"context\"[0] must be a {\"role\", \"content\"} object"},
        {"unknown role", CTX("[{\"role\":\"tool\",\"content\":\"x\"}]"), 1,
         "\"context\"[0]: role must be system, user or assistant, not \"tool\""},
        {"role a number", CTX("[" USER ",{\"role\":1,\"content\":\"x\"}]"), 1,
         "\"context\"[1]: field \"role\" must be a string"},
        {"no content", CTX("[{\"role\":\"user\"}]"), 1,
         "\"context\"[0]: missing field \"content\""},
        {"content null", CTX("[{\"role\":\"user\",\"content\":null}]"), 1,
         "\"context\"[0]: field \"content\" must be a string"},
        {"content a list of parts",
         CTX("[{\"role\":\"user\",\"content\":[{\"type\":\"text\",\"text\":\"x\"}]}]"), 1,
         "\"context\"[0]: field \"content\" must be a string"},
        {"extra field in a turn", CTX("[{\"role\":\"user\",\"content\":\"x\",\"name\":\"n\"}]"), 1,
         "\"context\"[0]: unknown field \"name\""},
        {"NUL in a turn", CTX("[{\"role\":\"user\",\"content\":\"a\\u0000b\"}]"), 1,
         "\\u0000 is not allowed"},
        {"empty prompt list", CONV("[]", ASSISTANT), 1,
         "the last turn of \"prompt\" must be the user turn being answered"},
        {"prompt list ends with the assistant",
         CONV("[" USER ",{\"role\":\"assistant\",\"content\":\"a\"}]", ASSISTANT), 1,
         "the last turn of \"prompt\" must be the user turn being answered"},
        {"bad turn in the prompt list",
         CONV("[{\"role\":\"bot\",\"content\":\"a\"}," USER "]", ASSISTANT), 1,
         "\"prompt\"[0]: role must be system, user or assistant, not \"bot\""},
        {"chosen a string", CONV("[" USER "]", "\"c\""), 1,
         "\"chosen\" must be a list of one assistant turn when \"prompt\" is a list"},
        {"chosen empty", CONV("[" USER "]", "[]"), 1,
         "\"chosen\" must be a list of one assistant turn"},
        {"chosen two turns",
         CONV("[" USER "]", "[" USER ",{\"role\":\"assistant\",\"content\":\"c\"}]"), 1,
         "\"chosen\" must be a list of one assistant turn"},
        {"chosen by the user", CONV("[" USER "]", "[" USER "]"), 1,
         "\"chosen\"[0] must be an assistant turn, not user"},
        {"rejected missing", "{\"prompt\":[" USER "],\"chosen\":" ASSISTANT "}", 1,
         "\"rejected\" must be a list of one assistant turn"},
        {"context beside a prompt list",
         "{\"prompt\":[" USER "],\"context\":[],\"chosen\":" ASSISTANT ",\"rejected\":" ASSISTANT
         "}",
         1, "no \"context\" or \"responses\" beside it"},
        {"responses beside a prompt list", "{\"prompt\":[" USER "],\"responses\":[\"a\",\"b\"]}", 1,
         "no \"context\" or \"responses\" beside it"},
        {"second line bad", CTX("[" USER "]") "\n" CTX("[{\"role\":\"user\",\"content\":5}]"), 2,
         "\"context\"[0]: field \"content\" must be a string"},
    };
    refuse_all(cases, sizeof cases / sizeof cases[0]);
#undef CTX
#undef CONV
#undef USER
#undef ASSISTANT
    /* The caps: one turn too many, one turn too long, too much in all. */
    size_t cap = 3 * LP_TASK_TEXT_MAX + 64 * (LP_TASK_TURNS_MAX + 2) + 256;
    char *body = malloc(cap), *text = malloc(LP_TASK_TEXT_MAX + 2);
    memset(text, 'w', LP_TASK_TEXT_MAX + 1);
    text[LP_TASK_TEXT_MAX + 1] = 0;
    size_t n = (size_t)snprintf(body, cap, "{\"context\": [");
    for (int k = 0; k <= LP_TASK_TURNS_MAX; k++)
        n += (size_t)snprintf(body + n, cap - n, "%s{\"role\":\"user\",\"content\":\"t\"}",
                              k ? "," : "");
    snprintf(body + n, cap - n, "], \"prompt\": \"p\", \"responses\": [\"a\", \"b\"]}");
    refuse("33 turns before the prompt", body, 1, "more than 32 turns before the prompt");
    n = (size_t)snprintf(body, cap, "{\"prompt\": [");
    for (int k = 0; k <= LP_TASK_TURNS_MAX + 1; k++)
        n += (size_t)snprintf(body + n, cap - n, "%s{\"role\":\"user\",\"content\":\"t\"}",
                              k ? "," : "");
    snprintf(body + n, cap - n,
             "], \"chosen\": [{\"role\":\"assistant\",\"content\":\"c\"}], \"rejected\": "
             "[{\"role\":\"assistant\",\"content\":\"r\"}]}");
    refuse("a prompt list of 34 turns", body, 1, "\"prompt\" has more than 33 turns");
    snprintf(body, cap,
             "{\"context\": [{\"role\":\"user\",\"content\":\"%s\"}], \"prompt\": \"p\", "
             "\"responses\": [\"a\", \"b\"]}",
             text);
    refuse("a turn of 65537 bytes", body, 1,
           "\"context\"[0]: field \"content\" is longer than 65536 bytes");
    text[LP_TASK_TEXT_MAX] = 0;
    snprintf(body, cap,
             "{\"prompt\": [{\"role\":\"user\",\"content\":\"%s\"},{\"role\":\"assistant\","
             "\"content\":\"%s\"},{\"role\":\"user\",\"content\":\"x\"},{\"role\":\"user\","
             "\"content\":\"p\"}], \"chosen\": [{\"role\":\"assistant\",\"content\":\"c\"}], "
             "\"rejected\": [{\"role\":\"assistant\",\"content\":\"r\"}]}",
             text, text);
    refuse("131073 bytes before the prompt", body, 1,
           "the turns before the prompt hold more than 131072 bytes in all");
    free(text);
    free(body);
}

/* Opens a fixture store (tag) and loads body into campaign 1, which must
 * give n tasks; their first id into *first. 0 on success; on failure the
 * checks have failed and nothing is left open. */
static int load_into_fixture(store_fixture *fx, const char *tag, const char *body, size_t n,
                             int64_t *first)
{
    int opened = store_fixture_open(fx, tag, 1);
    CHECK_INT(opened, LP_OK);
    if (opened != LP_OK)
        return -1;
    lp_taskfile tf;
    CHECK_ERR(parse(body, &tf), LP_OK);
    size_t loaded = 0, skipped = 0;
    int64_t last = 0;
    CHECK_ERR(lp_store_tasks_load(fx->store, 1, tf.tasks, tf.n, &loaded, &skipped, first, &last),
              LP_OK);
    CHECK_INT(loaded, n);
    lp_taskfile_free(&tf);
    return 0;
}

/* Loaded tasks keep their turns in order; a task without context has none. */
static void test_context_loads_into_store(void)
{
    store_fixture fx;
    const char *body =
        "{\"id\": \"conv\", \"prompt\": [{\"role\": \"system\", \"content\": \"Be kind.\"}, "
        "{\"role\": \"user\", \"content\": \"Hi \\u00e9\"}, {\"role\": \"assistant\", "
        "\"content\": \"\"}, {\"role\": \"user\", \"content\": \"2+2?\"}], \"chosen\": "
        "[{\"role\": \"assistant\", \"content\": \"4\"}], \"rejected\": [{\"role\": "
        "\"assistant\", \"content\": \"5\"}]}\n"
        "{\"id\": \"plain\", \"prompt\": \"p\", \"chosen\": \"a\", \"rejected\": \"b\"}\n";
    int64_t first = 0, last;
    if (load_into_fixture(&fx, "test-taskfile-context", body, 2, &first) != 0)
        return;
    last = first + 1;
    lp_turn *turns = NULL;
    size_t n = 9;
    CHECK_ERR(lp_store_task_context(fx.store, first, &turns, &n), LP_OK);
    CHECK_INT(n, 3);
    if (n == 3 && turns != NULL) {
        CHECK_STR(turns[0].role, "system");
        CHECK_STR(turns[0].content, "Be kind.");
        CHECK_STR(turns[1].role, "user");
        CHECK_STR(turns[1].content, "Hi \xc3\xa9");
        CHECK_STR(turns[2].role, "assistant");
        CHECK_STR(turns[2].content, "");
    }
    lp_turns_free(turns);
    CHECK_ERR(lp_store_task_context(fx.store, last, &turns, &n), LP_OK);
    CHECK(turns == NULL && n == 0);
    CHECK_ERR(lp_store_task_context(fx.store, last + 100, &turns, &n), LP_OK);
    CHECK(turns == NULL && n == 0);
    lp_turns_free(NULL);
    store_fixture_close(&fx);
}

/* ---- gold answers ---- */

/* Every spelling of "gold" in every format, in the task's orientation. */
static void test_gold_accepted(void)
{
    const char *body =
        "{\"prompt\": \"p1\", \"responses\": [\"x\", \"y\"], \"gold\": \"a\"}\n"
        "{\"prompt\": \"p2\", \"responses\": [\"x\", \"y\"], \"gold\": \"b\"}\n"
        "{\"prompt\": \"p3\", \"responses\": [\"x\", \"y\"], \"gold\": 0}\n"
        "{\"prompt\": \"p4\", \"responses\": [\"x\", \"y\"], \"gold\": 1}\n"
        "{\"prompt\": \"p5\", \"chosen\": \"x\", \"rejected\": \"y\", \"gold\": \"chosen\"}\n"
        "{\"prompt\": \"p6\", \"chosen\": \"x\", \"rejected\": \"y\", \"gold\": \"rejected\"}\n"
        "{\"prompt\": [{\"role\": \"user\", \"content\": \"p7\"}], \"chosen\": [{\"role\": "
        "\"assistant\", \"content\": \"x\"}], \"rejected\": [{\"role\": \"assistant\", "
        "\"content\": \"y\"}], \"gold\": \"b\"}\n"
        "{\"prompt\": \"p8\", \"responses\": [\"x\", \"y\"], \"gold\": null}\n"
        "{\"prompt\": \"p9\", \"responses\": [\"x\", \"y\"]}\n";
    static const lp_gold want[] = {LP_GOLD_RESPONSE0, LP_GOLD_RESPONSE1, LP_GOLD_RESPONSE0,
                                   LP_GOLD_RESPONSE1, LP_GOLD_RESPONSE0, LP_GOLD_RESPONSE1,
                                   LP_GOLD_RESPONSE1, LP_GOLD_NONE,      LP_GOLD_NONE};
    lp_taskfile tf;
    CHECK_ERR(parse(body, &tf), LP_OK);
    CHECK_INT(tf.n, 9);
    for (size_t i = 0; i < tf.n && i < 9; i++)
        check_record(tf.tasks[i].gold == want[i], __FILE__, __LINE__, "line %zu: gold %d, want %d",
                     i + 1, (int)tf.tasks[i].gold, (int)want[i]);
    /* the content-derived id does not depend on gold */
    char id[35];
    content_id("p1", "x", "y", id);
    if (tf.n > 0)
        CHECK_STR(tf.tasks[0].source_id, id);
    lp_taskfile_free(&tf);
}

/* A bad gold field fails the whole file with bad_gold naming the line. */
static void test_gold_refused(void)
{
    static const char *const bodies[] = {
        "{\"prompt\": \"p\", \"responses\": [\"x\", \"y\"], \"gold\": \"c\"}",
        "{\"prompt\": \"p\", \"responses\": [\"x\", \"y\"], \"gold\": 2}",
        "{\"prompt\": \"p\", \"responses\": [\"x\", \"y\"], \"gold\": 1.0}",
        "{\"prompt\": \"p\", \"responses\": [\"x\", \"y\"], \"gold\": true}",
        "{\"prompt\": \"p\", \"responses\": [\"x\", \"y\"], \"gold\": \"chosen\"}",
        "{\"prompt\": \"p\", \"responses\": [\"x\", \"y\"], \"gold\": \"A\"}",
        "{\"prompt\": \"p\", \"chosen\": \"x\", \"rejected\": \"y\", \"gold\": [0]}",
        "{\"prompt\": \"p\", \"chosen\": \"x\", \"rejected\": \"y\", \"gold\": -1}",
    };
    for (size_t i = 0; i < sizeof bodies / sizeof bodies[0]; i++) {
        char body[512];
        snprintf(body, sizeof body,
                 "{\"prompt\": \"ok\", \"responses\": [\"x\", \"y\"], \"gold\": \"a\"}\n%s\n",
                 bodies[i]);
        lp_taskfile tf;
        memset(&tf, 0x5a, sizeof tf);
        int rc = parse(body, &tf);
        check_record(rc == LP_EBAD_GOLD, __FILE__, __LINE__, "case %zu: got %s (%s)", i,
                     lp_error_name(rc), msg);
        check_record(strncmp(msg, "line 2: ", 8) == 0 && strstr(msg, "\"gold\"") != NULL, __FILE__,
                     __LINE__, "case %zu: message \"%s\"", i, msg);
        CHECK(tf.tasks == NULL && tf.n == 0 && tf.priv == NULL);
    }
}

/* Gold answers reach the tasks table in the task's orientation. */
static void test_gold_stored(void)
{
    store_fixture fx;
    const char *body =
        "{\"id\": \"g0\", \"prompt\": \"p\", \"responses\": [\"x\", \"y\"], \"gold\": \"a\"}\n"
        "{\"id\": \"g1\", \"prompt\": \"p\", \"chosen\": \"x\", \"rejected\": \"y\", "
        "\"gold\": \"rejected\"}\n"
        "{\"id\": \"none\", \"prompt\": \"p\", \"responses\": [\"x\", \"y\"]}\n";
    int64_t first = 0;
    if (load_into_fixture(&fx, "test-taskfile-gold", body, 3, &first) != 0)
        return;
    sqlite3 *db = NULL;
    CHECK(sqlite3_open_v2(fx.path, &db, SQLITE_OPEN_READONLY, NULL) == SQLITE_OK);
    sqlite3_stmt *st = NULL;
    CHECK(sqlite3_prepare_v2(db, "SELECT source_id, coalesce(gold, -1) FROM tasks ORDER BY id", -1,
                             &st, NULL) == SQLITE_OK);
    static const char *const ids[] = {"g0", "g1", "none"};
    static const int gold[] = {0, 1, -1};
    for (int i = 0; i < 3; i++) {
        CHECK(sqlite3_step(st) == SQLITE_ROW);
        CHECK_STR((const char *)sqlite3_column_text(st, 0), ids[i]);
        CHECK_INT(sqlite3_column_int(st, 1), gold[i]);
    }
    CHECK(sqlite3_step(st) == SQLITE_DONE);
    sqlite3_finalize(st);
    sqlite3_close(db);
    store_fixture_close(&fx);
}

int main(void)
{
    if (sodium_init() < 0)
        return 1;
    test_pairs_format_with_context();
    test_trl_format_gets_content_id();
    test_generic_format();
    test_content_id_covers_every_part();
    test_dense_features();
    test_blank_lines_crlf_and_whitespace();
    test_limits_accepted();
    test_many_lines_keep_order();
    test_refuses_empty_uploads();
    test_refuses_bad_json();
    test_refuses_wrong_shapes();
    test_refuses_bad_ids();
    test_refuses_oversize_and_nul_texts();
    test_refuses_bad_features();
    test_refusal_names_the_line();
    test_free_accepts_null_and_twice();
    test_parsed_tasks_load_into_store();
    test_context_turns_kept();
    test_conversational_format();
    test_context_limits_accepted();
    test_refuses_malformed_conversations();
    test_context_loads_into_store();
    test_gold_accepted();
    test_gold_refused();
    test_gold_stored();
    return check_summary();
}
