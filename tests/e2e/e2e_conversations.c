/*
 * e2e_conversations.c — conversations end to end: the real ldpref-server on
 * 127.0.0.1 with a temporary database, the real libldpref and ldpref CLI.
 *
 * - the bundled OpenAssistant pairs: the 316 follow-up tasks come back from
 *   POST /v1/tasks/next with their earlier turns, turn by turn as in the
 *   file, through the library and through `ldpref next` (every task carries
 *   "context", [] when it has none); a remembered follow-up is answered by
 *   id, and its memo entry is the one of its whole conversation;
 * - TRL's conversational format: uploaded, labelled, exported in the
 *   conversational format and compared turn by turn with the upload; the
 *   standard export keeps exactly its fields, and ?format=standard is the
 *   default byte for byte; a model's training view (view=corrupted) in the
 *   conversational format;
 * - every malformed conversation is refused with bad_task and stores
 *   nothing (row counts from the database file).
 */
#include "check.h"
#include "error.h"
#include "http_raw.h"
#include "internal.h"
#include "ldpref.h"
#include "operator_client.h"
#include "server_proc.h"

#include <jansson.h>
#include <sodium.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define OASST "tests/data/oasst-en100/en_100.pairs.jsonl"
#define OASST_TASKS 732

static server_proc srv;
static char env_server[128], env_token[256];

/* The OASST file's lines, in order (task ids follow the same order). */
static json_t *oasst[OASST_TASKS];
static int64_t oasst_first_id;

static int cli(char **out, const char *const *argv)
{
    const char *env[] = {env_server, env_token, NULL};
    return run_tool(argv, env, out);
}

static void load_oasst_file(void)
{
    FILE *f = fopen(OASST, "r");
    CHECK(f != NULL);
    if (f == NULL)
        return;
    static char line[1 << 17];
    size_t n = 0;
    while (n < OASST_TASKS && fgets(line, sizeof line, f))
        oasst[n++] = json_loads(line, 0, NULL);
    fclose(f);
    CHECK_INT(n, OASST_TASKS);
}

/* The earlier turns the file gives for line i: its context without the last
 * turn, which is the prompt itself. */
static size_t expected_turns(size_t i)
{
    size_t n = json_array_size(json_object_get(oasst[i], "context"));
    return n > 0 ? n - 1 : 0;
}

static const char *expected_field(size_t i, size_t k, const char *field)
{
    return json_string_value(
        json_object_get(json_array_get(json_object_get(oasst[i], "context"), k), field));
}

static const char *line_text(size_t i, const char *field)
{
    return json_string_value(json_object_get(oasst[i], field));
}

static char *new_token(ldpref_client *op, const char *campaign)
{
    char *json = NULL;
    CHECK_ERR(ldpref_admin_enrollment_tokens(op, campaign, 1, &json), LP_OK);
    char *tok = json ? first_enrollment_token(json) : NULL;
    ldpref_free(json);
    return tok;
}

/* A new annotator of campaign enrolled through the library. */
static ldpref_client *annotator(ldpref_client *op, const char *name, const char *campaign)
{
    char key[400];
    snprintf(key, sizeof key, "%s/%s.key", srv.dir, name);
    CHECK_ERR(ldpref_keygen(key, NULL), LP_OK);
    ldpref_options o;
    ldpref_options_init(&o);
    o.server_url = srv.url;
    o.key_path = key;
    ldpref_client *c = NULL;
    CHECK_ERR(ldpref_client_open(&o, &c), LP_OK);
    char *token = new_token(op, campaign);
    if (c != NULL)
        CHECK_ERR(ldpref_enroll(c, token ? token : "x", NULL), LP_OK);
    free(token);
    return c;
}

static int64_t labels_budget(ldpref_client *c)
{
    ldpref_budget b;
    CHECK_ERR(ldpref_budget_get(c, &b), LP_OK);
    return b.labels;
}

/* The file's 732 pairs into campaign "oasst", through the library. Two
 * annotators (library and CLI) each see every task: two labels per task. */
static void test_oasst_upload(ldpref_client *op)
{
    ldpref_campaign spec;
    ldpref_campaign_init(&spec);
    spec.name = "oasst";
    spec.labels_per_task = 2;
    CHECK_ERR(ldpref_admin_campaign_create(op, &spec, NULL), LP_OK);
    char *json = NULL;
    CHECK_ERR(ldpref_admin_tasks_load(op, OASST, "oasst", &json), LP_OK);
    json_t *j = json ? json_loads(json, 0, NULL) : NULL;
    CHECK_INT(json_integer_value(json_object_get(j, "loaded")), OASST_TASKS);
    oasst_first_id = json_integer_value(json_array_get(json_object_get(j, "task_ids"), 0));
    CHECK(oasst_first_id > 0);
    json_decref(j);
    ldpref_free(json);
    long long turns = 0;
    for (size_t i = 0; i < OASST_TASKS; i++)
        turns += (long long)expected_turns(i);
    CHECK_INT(turns, 640); /* 312 tasks after 2 turns, 4 after 4 */
    CHECK_INT(server_db_count(&srv, "task_turns"), turns);
}

/* Every task through ldpref_next_tasks: its earlier turns as in the file. */
static void test_oasst_context_through_library(ldpref_client *op)
{
    ldpref_client *c = annotator(op, "lib", "oasst");
    if (c == NULL)
        return;
    ldpref_task *tasks = NULL;
    size_t n = 0;
    CHECK_ERR(ldpref_next_tasks(c, 1000, &tasks, &n), LP_OK);
    CHECK_INT(n, OASST_TASKS);
    size_t followups = 0, matching = 0;
    const ldpref_task *followup = NULL;
    for (size_t k = 0; k < n; k++) {
        const ldpref_task *t = &tasks[k];
        size_t i = (size_t)(t->task_id - oasst_first_id);
        if (i >= OASST_TASKS)
            continue;
        int ok = t->n_context == expected_turns(i) && (t->n_context == 0) == (t->context == NULL);
        for (size_t j = 0; ok && j < t->n_context; j++)
            ok = strcmp(t->context[j].role, expected_field(i, j, "role")) == 0 &&
                 strcmp(t->context[j].content, expected_field(i, j, "content")) == 0;
        const char *chosen = line_text(i, "chosen"), *rejected = line_text(i, "rejected");
        ok = ok && strcmp(t->prompt, line_text(i, "prompt")) == 0 &&
             ((strcmp(t->a, chosen) == 0 && strcmp(t->b, rejected) == 0) ||
              (strcmp(t->a, rejected) == 0 && strcmp(t->b, chosen) == 0));
        matching += ok;
        followups += t->n_context > 0;
        if (t->n_context >= 4 && followup == NULL)
            followup = t;
    }
    CHECK_INT(matching, OASST_TASKS);
    CHECK_INT(followups, 316);
    CHECK(followup != NULL);
    if (followup != NULL) {
        /* Answered by id from the ledger's memory of the task... */
        ldpref_receipt r;
        long long before = server_db_count(&srv, "labels");
        CHECK_ERR(ldpref_answer_id(c, followup->task_id, 1, &r), LP_OK);
        CHECK_INT(r.task_id, followup->task_id);
        CHECK_INT(server_db_count(&srv, "labels"), before + 1);
        CHECK_INT(labels_budget(c), 1);
        /* ...under the memo key of the whole conversation: the same
         * conversation under another id reuses it, with one turn changed it
         * is another comparison. */
        ldpref_task copy = *followup;
        copy.task_id = followup->task_id + 100000;
        lp_label_msg m;
        int existed = -1;
        CHECK_ERR(lpc_answer_prepare(c, &copy, 0, &m, &existed, NULL), LP_OK);
        CHECK_INT(existed, 0);
        CHECK_INT(m.z, r.z);
        CHECK_INT(labels_budget(c), 1);
        ldpref_turn turns[8];
        memcpy(turns, followup->context, followup->n_context * sizeof turns[0]);
        turns[1].content = "A different earlier reply.";
        copy.context = turns;
        copy.task_id++;
        CHECK_ERR(lpc_answer_prepare(c, &copy, 0, &m, &existed, NULL), LP_OK);
        CHECK_INT(labels_budget(c), 2);
    }
    ldpref_tasks_free(tasks, n);
    ldpref_client_close(c);
}

/* `ldpref next` prints "context" on every task, the turns as in the file. */
static void test_oasst_context_through_cli(ldpref_client *op)
{
    char *token = new_token(op, "oasst");
    char key[400], keyarg[420];
    snprintf(key, sizeof key, "%s/cli.key", srv.dir);
    snprintf(keyarg, sizeof keyarg, "--key=%s", key);
    const char *keygen[] = {"ldpref", keyarg, "keygen", NULL};
    CHECK_INT(cli(NULL, keygen), 0);
    const char *enroll[] = {"ldpref", keyarg, "enroll", token ? token : "x", NULL};
    CHECK_INT(cli(NULL, enroll), 0);
    free(token);
    char *out = NULL;
    const char *next[] = {"ldpref", keyarg, "next", "--count", "1000", NULL};
    CHECK_INT(cli(&out, next), 0);
    size_t lines = 0, with_context = 0, matching = 0;
    long long followup_id = 0;
    for (char *p = out; p != NULL && *p != '\0';) {
        char *nl = strchr(p, '\n');
        if (nl)
            *nl = '\0';
        json_t *t = json_loads(p, 0, NULL);
        lines++;
        long long id = json_integer_value(json_object_get(t, "task_id"));
        size_t i = (size_t)(id - oasst_first_id);
        const json_t *ctx = json_object_get(t, "context");
        int ok = json_is_array(ctx) && i < OASST_TASKS && json_array_size(ctx) == expected_turns(i);
        for (size_t k = 0; ok && k < json_array_size(ctx); k++) {
            const json_t *turn = json_array_get(ctx, k);
            ok = json_object_size(turn) == 2 &&
                 strcmp(json_string_value(json_object_get(turn, "role")),
                        expected_field(i, k, "role")) == 0 &&
                 strcmp(json_string_value(json_object_get(turn, "content")),
                        expected_field(i, k, "content")) == 0;
        }
        matching += ok;
        with_context += json_array_size(ctx) > 0;
        if (json_array_size(ctx) > 0 && followup_id == 0)
            followup_id = id;
        json_decref(t);
        p = nl ? nl + 1 : NULL;
    }
    free(out);
    CHECK_INT(lines, OASST_TASKS);
    CHECK_INT(matching, OASST_TASKS);
    CHECK_INT(with_context, 316);
    /* A follow-up answered through the CLI (the ledger remembers it). */
    char id[32];
    snprintf(id, sizeof id, "%lld", followup_id);
    long long before = server_db_count(&srv, "labels");
    const char *answer[] = {"ldpref", keyarg, "answer", id, "b", NULL};
    CHECK_INT(cli(&out, answer), 0);
    free(out);
    CHECK_INT(server_db_count(&srv, "labels"), before + 1);
}

/* ---- TRL conversational round trip ---- */

static const char CONVERSATIONAL[] =
    "{\"prompt\": [{\"role\": \"user\", \"content\": \"What is 2+2?\"}], \"chosen\": "
    "[{\"role\": \"assistant\", \"content\": \"4\"}], \"rejected\": [{\"role\": \"assistant\", "
    "\"content\": \"5\"}]}\n"
    "{\"prompt\": [{\"role\": \"system\", \"content\": \"You are terse.\"}, {\"role\": "
    "\"user\", \"content\": \"Name a colour.\"}, {\"role\": \"assistant\", \"content\": "
    "\"Blue.\"}, {\"role\": \"user\", \"content\": \"Another one, \\\"please\\\".\"}], "
    "\"chosen\": [{\"role\": \"assistant\", \"content\": \"Red.\"}], \"rejected\": [{\"role\": "
    "\"assistant\", \"content\": \"Blue.\"}]}\n"
    "{\"prompt\": [{\"role\": \"user\", \"content\": \"Line one\\nline two\"}, {\"role\": "
    "\"assistant\", \"content\": \"\"}, {\"role\": \"user\", \"content\": \"Und jetzt? "
    "\\u00e4\\u00f6\\u00fc \\u2713\"}], \"chosen\": [{\"role\": \"assistant\", \"content\": "
    "\"Jetzt: <b>fertig</b>.\"}], \"rejected\": [{\"role\": \"assistant\", \"content\": "
    "\"Nein.\"}]}\n"
    "{\"prompt\": [{\"role\": \"system\", \"content\": \"Be kind.\"}, {\"role\": \"user\", "
    "\"content\": \"Hi\"}], \"chosen\": [{\"role\": \"assistant\", \"content\": \"Hello!\"}], "
    "\"rejected\": [{\"role\": \"assistant\", \"content\": \"What?\"}]}\n";
#define CONV_TASKS 4

static json_t *uploaded[CONV_TASKS];
static int64_t conv_first_id;

/* The standard export's fields, in order: today's, nothing added. */
static const char *const STANDARD_FIELDS[] = {"prompt",  "chosen",    "rejected",    "label_id",
                                              "task_id", "campaign",  "annotator",   "epsilon",
                                              "z",       "timestamp", "received_at", NULL};

static char *export_text(ldpref_client *op, const char *format)
{
    char *text = NULL;
    size_t len = 0;
    FILE *m = open_memstream(&text, &len);
    CHECK(m != NULL);
    if (m == NULL)
        return NULL;
    CHECK_ERR(ldpref_admin_export_format(op, "conv", NULL, 0, format, m), LP_OK);
    fclose(m);
    return text;
}

/* Splits JSONL text into parsed lines (at most max). */
static size_t parse_lines(char *text, json_t **out, size_t max)
{
    size_t n = 0;
    for (char *p = text; p != NULL && *p != '\0' && n < max;) {
        char *nl = strchr(p, '\n');
        if (nl)
            *nl = '\0';
        out[n++] = json_loads(p, JSON_DISABLE_EOF_CHECK, NULL);
        if (nl)
            *nl = '\n';
        p = nl ? nl + 1 : NULL;
    }
    return n;
}

static int turns_equal(const json_t *a, const json_t *b)
{
    if (!json_is_array(a) || !json_is_array(b) || json_array_size(a) != json_array_size(b))
        return 0;
    for (size_t k = 0; k < json_array_size(a); k++) {
        const json_t *x = json_array_get(a, k), *y = json_array_get(b, k);
        if (json_object_size(x) != 2 || json_object_size(y) != 2 ||
            !json_equal(json_object_get(x, "role"), json_object_get(y, "role")) ||
            !json_equal(json_object_get(x, "content"), json_object_get(y, "content")))
            return 0;
    }
    return 1;
}

static void test_conversational_upload(ldpref_client *op)
{
    ldpref_campaign spec;
    ldpref_campaign_init(&spec);
    spec.name = "conv";
    CHECK_ERR(ldpref_admin_campaign_create(op, &spec, NULL), LP_OK);
    char path[400];
    snprintf(path, sizeof path, "%s/conversational.jsonl", srv.dir);
    FILE *f = fopen(path, "w");
    CHECK(f != NULL);
    if (f == NULL)
        return;
    fputs(CONVERSATIONAL, f);
    fclose(f);
    char *copy = strdup(CONVERSATIONAL);
    CHECK_INT(parse_lines(copy, uploaded, CONV_TASKS), CONV_TASKS);
    free(copy);
    /* Uploaded with the CLI. */
    char *out = NULL;
    const char *load[] = {"ldpref", "admin", "tasks-load", path, "--campaign", "conv", NULL};
    CHECK_INT(cli(&out, load), 0);
    json_t *j = out ? json_loads(out, 0, NULL) : NULL;
    CHECK_INT(json_integer_value(json_object_get(j, "loaded")), CONV_TASKS);
    conv_first_id = json_integer_value(json_array_get(json_object_get(j, "task_ids"), 0));
    json_decref(j);
    free(out);
}

/* Labelled through the library, exported conversational, compared turn by
 * turn with the upload. */
static void test_conversational_round_trip(ldpref_client *op)
{
    ldpref_client *c = annotator(op, "conv", "conv");
    if (c == NULL)
        return;
    ldpref_task *tasks = NULL;
    size_t n = 0;
    CHECK_ERR(ldpref_next_tasks(c, 10, &tasks, &n), LP_OK);
    CHECK_INT(n, CONV_TASKS);
    for (size_t k = 0; k < n; k++) {
        size_t i = (size_t)(tasks[k].task_id - conv_first_id);
        const json_t *prompt = i < CONV_TASKS ? json_object_get(uploaded[i], "prompt") : NULL;
        CHECK_INT(tasks[k].n_context + 1, json_array_size(prompt));
        ldpref_receipt r;
        CHECK_ERR(ldpref_answer(c, &tasks[k], (int)(k & 1), &r), LP_OK);
    }
    ldpref_tasks_free(tasks, n);
    ldpref_client_close(c);

    char *conv = export_text(op, LDPREF_EXPORT_CONVERSATIONAL);
    char *standard = export_text(op, NULL);
    char *standard_named = export_text(op, LDPREF_EXPORT_STANDARD);
    json_t *cl[CONV_TASKS + 1] = {0}, *sl[CONV_TASKS + 1] = {0};
    CHECK_INT(parse_lines(conv, cl, CONV_TASKS + 1), CONV_TASKS);
    CHECK_INT(parse_lines(standard, sl, CONV_TASKS + 1), CONV_TASKS);
    CHECK(standard && standard_named && strcmp(standard, standard_named) == 0);
    size_t round_trips = 0, standard_ok = 0;
    for (size_t k = 0; k < CONV_TASKS; k++) {
        json_t *c1 = cl[k], *s1 = sl[k];
        size_t i = (size_t)(json_integer_value(json_object_get(c1, "task_id")) - conv_first_id);
        if (i >= CONV_TASKS)
            continue;
        const json_t *up = uploaded[i];
        int z = (int)json_integer_value(json_object_get(c1, "z"));
        const json_t *want_chosen = json_object_get(up, z ? "rejected" : "chosen");
        const json_t *want_rejected = json_object_get(up, z ? "chosen" : "rejected");
        round_trips += turns_equal(json_object_get(c1, "prompt"), json_object_get(up, "prompt")) &&
                       turns_equal(json_object_get(c1, "chosen"), want_chosen) &&
                       turns_equal(json_object_get(c1, "rejected"), want_rejected);
        /* The standard line: today's fields in today's order, the same
         * values, texts where the conversational line has turns. */
        int ok = json_object_size(s1) == json_object_size(c1);
        size_t f = 0;
        for (void *it = json_object_iter(s1); ok && it; it = json_object_iter_next(s1, it), f++)
            ok = STANDARD_FIELDS[f] != NULL &&
                 strcmp(json_object_iter_key(it), STANDARD_FIELDS[f]) == 0;
        ok = ok && STANDARD_FIELDS[f] == NULL;
        f = 0;
        for (void *it = json_object_iter(c1); ok && it; it = json_object_iter_next(c1, it), f++)
            ok = strcmp(json_object_iter_key(it), STANDARD_FIELDS[f]) == 0;
        for (size_t k2 = 3; ok && STANDARD_FIELDS[k2] != NULL; k2++)
            ok = json_equal(json_object_get(s1, STANDARD_FIELDS[k2]),
                            json_object_get(c1, STANDARD_FIELDS[k2]));
        const json_t *cp = json_object_get(c1, "prompt");
        ok = ok &&
             json_equal(json_object_get(s1, "prompt"),
                        json_object_get(json_array_get(cp, json_array_size(cp) - 1), "content"));
        ok = ok && json_equal(json_object_get(s1, "chosen"),
                              json_object_get(json_array_get(want_chosen, 0), "content"));
        ok = ok && json_equal(json_object_get(s1, "rejected"),
                              json_object_get(json_array_get(want_rejected, 0), "content"));
        standard_ok += ok;
    }
    CHECK_INT(round_trips, CONV_TASKS);
    CHECK_INT(standard_ok, CONV_TASKS);

    /* The CLI writes the same bytes; the server takes ?format=standard as
     * its default and refuses an unknown format. */
    char *out = NULL;
    const char *exp[] = {"ldpref", "admin",    "export",         "--campaign",
                         "conv",   "--format", "conversational", NULL};
    CHECK_INT(cli(&out, exp), 0);
    CHECK(out && conv && strcmp(out, conv) == 0);
    free(out);
    const char *bad[] = {"ldpref", "admin", "export", "--format", "html", NULL};
    CHECK_INT(cli(NULL, bad), LDPREF_EINVALID_ARGUMENT);
    char url[256];
    snprintf(url, sizeof url, "%s/v1/export?campaign=conv&format=standard", srv.url);
    http_reply r;
    CHECK_INT(http_raw("GET", url, NULL, 0, srv.token, &r), 0);
    CHECK_INT(r.status, 200);
    CHECK(r.body && standard && strcmp(r.body, standard) == 0);
    http_reply_free(&r);
    snprintf(url, sizeof url, "%s/v1/export?format=chat", srv.url);
    CHECK_INT(http_raw("GET", url, NULL, 0, srv.token, &r), 0);
    char name[64];
    http_error_name(&r, name, sizeof name);
    CHECK_INT(r.status, 400);
    CHECK_STR(name, "bad_request");
    http_reply_free(&r);
    CHECK_ERR(ldpref_admin_export_format(op, NULL, NULL, 0, "chat", stdout),
              LDPREF_EINVALID_ARGUMENT);

    for (size_t k = 0; k <= CONV_TASKS; k++) {
        json_decref(cl[k]);
        json_decref(sl[k]);
    }
    free(conv);
    free(standard);
    free(standard_named);
}

/* A model's training view in the conversational format: the same turns,
 * oriented by the view's label, with the view's own fields. */
static void test_corrupted_view_conversational(ldpref_client *op)
{
    char *json = NULL;
    CHECK_ERR(ldpref_admin_retrain(op, "{\"campaign\": \"conv\", \"max_iter\": 5}", &json), LP_OK);
    json_t *run = json ? json_loads(json, 0, NULL) : NULL;
    int64_t id = json_integer_value(json_object_get(run, "run"));
    json_decref(run);
    ldpref_free(json);
    json = NULL;
    CHECK_ERR(ldpref_admin_run_wait(op, id, 20, NULL, NULL, &json), LP_OK);
    run = json ? json_loads(json, 0, NULL) : NULL;
    int64_t version = json_integer_value(json_object_get(run, "model_version"));
    json_decref(run);
    ldpref_free(json);
    CHECK(version >= 1);
    char *text = NULL;
    size_t len = 0;
    FILE *m = open_memstream(&text, &len);
    if (m == NULL)
        return;
    CHECK_ERR(
        ldpref_admin_export_format(op, NULL, "corrupted", version, LDPREF_EXPORT_CONVERSATIONAL, m),
        LP_OK);
    fclose(m);
    json_t *lines[CONV_TASKS + 1] = {0};
    CHECK_INT(parse_lines(text, lines, CONV_TASKS + 1), CONV_TASKS);
    size_t ok = 0;
    for (size_t k = 0; k < CONV_TASKS; k++) {
        const json_t *l = lines[k];
        size_t i = (size_t)(json_integer_value(json_object_get(l, "task_id")) - conv_first_id);
        if (i >= CONV_TASKS)
            continue;
        int z = (int)json_integer_value(json_object_get(l, "z"));
        ok += turns_equal(json_object_get(l, "prompt"), json_object_get(uploaded[i], "prompt")) &&
              turns_equal(json_object_get(l, "chosen"),
                          json_object_get(uploaded[i], z ? "rejected" : "chosen")) &&
              json_is_boolean(json_object_get(l, "corrupted")) &&
              json_object_get(l, "z_received") != NULL;
        json_decref(lines[k]);
    }
    CHECK_INT(ok, CONV_TASKS);
    free(text);
}

/* ---- refusals ---- */

/* Each upload: a good first line, then a malformed conversation. */
static void test_malformed_conversations_store_nothing(ldpref_client *op)
{
#define GOOD "{\"prompt\":\"fine\",\"chosen\":\"a\",\"rejected\":\"b\"}\n"
#define TURN "{\"role\":\"user\",\"content\":\"q\"}"
#define REPLY "[{\"role\":\"assistant\",\"content\":\"c\"}]"
    static const struct {
        const char *body, *why;
    } cases[] = {
        {GOOD "{\"prompt\":\"p\",\"responses\":[\"a\",\"b\"],\"context\":\"earlier\"}",
         "\"context\" must be an array of turns"},
        {GOOD "{\"prompt\":\"p\",\"responses\":[\"a\",\"b\"],\"context\":[{\"role\":\"tool\","
              "\"content\":\"x\"}]}",
         "role must be system, user or assistant"},
        {GOOD "{\"prompt\":\"p\",\"responses\":[\"a\",\"b\"],\"context\":[{\"role\":\"user\"}]}",
         "missing field \"content\""},
        {GOOD "{\"prompt\":\"p\",\"responses\":[\"a\",\"b\"],\"context\":[{\"role\":\"user\","
              "\"content\":\"x\",\"name\":\"n\"}]}",
         "unknown field \"name\""},
        {GOOD "{\"prompt\":[],\"chosen\":" REPLY ",\"rejected\":" REPLY "}",
         "the last turn of \"prompt\" must be the user turn being answered"},
        {GOOD "{\"prompt\":[" TURN ",{\"role\":\"assistant\",\"content\":\"a\"}],\"chosen\":" REPLY
              ",\"rejected\":" REPLY "}",
         "the last turn of \"prompt\" must be the user turn being answered"},
        {GOOD "{\"prompt\":[" TURN "],\"chosen\":\"c\",\"rejected\":" REPLY "}",
         "\"chosen\" must be a list of one assistant turn"},
        {GOOD "{\"prompt\":[" TURN "],\"chosen\":" REPLY ",\"rejected\":[" TURN "]}",
         "\"rejected\"[0] must be an assistant turn, not user"},
        {GOOD "{\"prompt\":[" TURN "],\"context\":[],\"chosen\":" REPLY ",\"rejected\":" REPLY "}",
         "no \"context\" or \"responses\" beside it"},
    };
#undef GOOD
#undef TURN
#undef REPLY
    long long tasks = server_db_count(&srv, "tasks"), turns = server_db_count(&srv, "task_turns");
    char path[400];
    snprintf(path, sizeof path, "%s/bad.jsonl", srv.dir);
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        FILE *f = fopen(path, "w");
        if (f == NULL)
            continue;
        fputs(cases[i].body, f);
        fclose(f);
        int rc = ldpref_admin_tasks_load(op, path, "conv", NULL);
        check_record(rc == LDPREF_EBAD_TASK && strcmp(ldpref_error_name(rc), "bad_task") == 0 &&
                         strstr(ldpref_errmsg(op), "line 2: ") != NULL &&
                         strstr(ldpref_errmsg(op), cases[i].why) != NULL,
                     __FILE__, __LINE__, "case %zu: %s (%s)", i, ldpref_error_name(rc),
                     ldpref_errmsg(op));
    }
    /* The caps, through the wire: 33 turns before the prompt. */
    FILE *f = fopen(path, "w");
    if (f != NULL) {
        fputs("{\"prompt\":\"p\",\"responses\":[\"a\",\"b\"],\"context\":[", f);
        for (int k = 0; k < 33; k++)
            fprintf(f, "%s{\"role\":\"user\",\"content\":\"t%d\"}", k ? "," : "", k);
        fputs("]}\n", f);
        fclose(f);
        CHECK_ERR(ldpref_admin_tasks_load(op, path, "conv", NULL), LDPREF_EBAD_TASK);
        CHECK(strstr(ldpref_errmsg(op), "more than 32 turns before the prompt") != NULL);
    }
    CHECK_INT(server_db_count(&srv, "tasks"), tasks);
    CHECK_INT(server_db_count(&srv, "task_turns"), turns);
}

int main(void)
{
    if (sodium_init() < 0)
        return 1;
    load_oasst_file();
    if (server_start(&srv, NULL) != 0) {
        CHECK(!"server started");
        return check_summary();
    }
    snprintf(env_server, sizeof env_server, "LDPREF_SERVER=%s", srv.url);
    snprintf(env_token, sizeof env_token, "LDPREF_OPERATOR_TOKEN=%s", srv.token);
    ldpref_client *op = operator_client_open(&srv);
    if (op != NULL) {
        test_oasst_upload(op);
        test_oasst_context_through_library(op);
        test_oasst_context_through_cli(op);
        test_conversational_upload(op);
        test_conversational_round_trip(op);
        test_corrupted_view_conversational(op);
        test_malformed_conversations_store_nothing(op);
    }
    ldpref_client_close(op);
    server_cleanup(&srv);
    for (size_t i = 0; i < OASST_TASKS; i++)
        json_decref(oasst[i]);
    for (size_t i = 0; i < CONV_TASKS; i++)
        json_decref(uploaded[i]);
    return check_summary();
}
