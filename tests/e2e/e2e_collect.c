/*
 * e2e_collect.c — the collection service end to end: the real ldpref-server
 * on 127.0.0.1 (port 0, temporary SQLite database), driven through the real
 * ldpref CLI, the real libldpref, and a raw protocol annotator for the
 * inputs a well-behaved client never sends. Every rejected request must get
 * its exact error name and store nothing (row counts read from the database
 * file itself).
 */
#include "check.h"
#include "error.h"
#include "ldpref.h"
#include "operator_client.h"
#include "raw_annotator.h"
#include "rr.h"
#include "server_proc.h"
#include "wire.h"

#include <errno.h>
#include <fcntl.h>
#include <float.h>
#include <jansson.h>
#include <math.h>
#include <pty.h>
#include <sodium.h>
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#define OASST "tests/data/oasst-en100/en_100.pairs.jsonl"

static server_proc srv;
static char env_server[128], env_token[256];

/* Runs the CLI with the server and operator token in its environment. */
static int cli(char **out, const char *const *argv)
{
    const char *env[] = {env_server, env_token, NULL};
    return run_tool(argv, env, out);
}

/* Runs the CLI as cli() does, stdout discarded, its stderr a terminal
 * (on_tty) or a pipe, read into *err (malloc'd). Returns the exit code or -1. */
static int cli_stderr(const char *const *argv, int on_tty, char **err)
{
    char bin[512];
    server_bin_path(argv[0], bin, sizeof bin);
    int fds[2] = {-1, -1}, master = -1;
    pid_t pid;
    *err = NULL;
    if (on_tty) {
        pid = forkpty(&master, NULL, NULL, NULL);
    } else {
        if (pipe(fds) != 0)
            return -1;
        pid = fork();
    }
    if (pid < 0)
        return -1;
    if (pid == 0) {
        int null = open("/dev/null", O_RDWR);
        dup2(null, 1);
        if (!on_tty) {
            dup2(null, 0);
            dup2(fds[1], 2);
            close(fds[0]);
        }
        putenv(env_server);
        putenv(env_token);
        execv(bin, (char *const *)argv);
        _exit(127);
    }
    int in = on_tty ? master : fds[0];
    if (!on_tty)
        close(fds[1]);
    size_t len = 0, cap = 4096;
    char *buf = malloc(cap);
    ssize_t n;
    while (buf && (n = read(in, buf + len, cap - len - 1)) != 0) {
        if (n < 0) {
            if (errno == EINTR)
                continue;
            break; /* EIO: the terminal's last user is gone */
        }
        len += (size_t)n;
        if (cap - len < 2) {
            char *grown = realloc(buf, cap *= 2);
            if (grown == NULL)
                break;
            buf = grown;
        }
    }
    if (buf)
        buf[len] = '\0';
    close(in);
    int status = 0;
    while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
    }
    *err = buf;
    return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

/* Checks that a reply is the JSON error `want` with its table status. */
static void check_error_reply(const char *what, const http_reply *r, int want)
{
    char name[64];
    http_error_name(r, name, sizeof name);
    check_record(strcmp(name, lp_error_name(want)) == 0 && r->status == lp_error_http_status(want),
                 __FILE__, __LINE__, "%s: want %s/%d, got %ld %s", what, lp_error_name(want),
                 lp_error_http_status(want), r->status, r->body ? r->body : "");
}

static char *new_token(ldpref_client *op, const char *campaign)
{
    char *json = NULL;
    CHECK_ERR(ldpref_admin_enrollment_tokens(op, campaign, 1, &json), LP_OK);
    char *tok = json ? first_enrollment_token(json) : NULL;
    ldpref_free(json);
    return tok;
}

/* Operator loads OASST tasks with the CLI; annotator keygen/enroll/answer
 * with the CLI; the library sees the same ledger. */
static void test_cli_flow(void)
{
    char *out = NULL;
    const char *load[] = {"ldpref", "admin", "tasks-load", OASST, NULL};
    CHECK_INT(cli(&out, load), 0);
    json_t *j = out ? json_loads(out, 0, NULL) : NULL;
    CHECK_INT(json_integer_value(json_object_get(j, "loaded")), 732);
    json_decref(j);
    free(out);
    CHECK_INT(server_db_count(&srv, "tasks"), 732);

    /* Same file again: duplicates skipped, nothing new. */
    CHECK_INT(cli(&out, load), 0);
    j = out ? json_loads(out, 0, NULL) : NULL;
    CHECK_INT(json_integer_value(json_object_get(j, "loaded")), 0);
    CHECK_INT(json_integer_value(json_object_get(j, "skipped_duplicates")), 732);
    json_decref(j);
    free(out);
    CHECK_INT(server_db_count(&srv, "tasks"), 732);

    const char *tok_cmd[] = {"ldpref", "admin", "enroll-token", NULL};
    CHECK_INT(cli(&out, tok_cmd), 0);
    char *token = out ? first_enrollment_token(out) : NULL;
    CHECK(token != NULL);
    free(out);

    char key[400], keyarg[420];
    snprintf(key, sizeof key, "%s/cli.key", srv.dir);
    snprintf(keyarg, sizeof keyarg, "--key=%s", key);
    const char *keygen[] = {"ldpref", keyarg, "keygen", NULL};
    CHECK_INT(cli(NULL, keygen), 0);
    struct stat st;
    CHECK(stat(key, &st) == 0 && (st.st_mode & 0777) == 0600);
    CHECK_INT(cli(NULL, keygen), LP_EKEY_FILE); /* never overwrites */

    const char *enroll[] = {"ldpref", keyarg, "enroll", token ? token : "x", NULL};
    CHECK_INT(cli(NULL, enroll), 0);
    CHECK_INT(cli(NULL, enroll), LP_EALREADY_ENROLLED);
    free(token);

    const char *next[] = {"ldpref", keyarg, "next", "--count", "3", NULL};
    CHECK_INT(cli(&out, next), 0);
    long long first_id = 0;
    if (out) {
        json_t *t = json_loads(out, JSON_DISABLE_EOF_CHECK, NULL);
        first_id = json_integer_value(json_object_get(t, "task_id"));
        json_decref(t);
    }
    free(out);
    CHECK(first_id > 0);
    char id[32];
    snprintf(id, sizeof id, "%lld", first_id);
    const char *answer[] = {"ldpref", keyarg, "answer", id, "b", NULL};
    CHECK_INT(cli(&out, answer), 0);
    json_t *first = out ? json_loads(out, 0, NULL) : NULL;
    free(out);
    CHECK_INT(server_db_count(&srv, "labels"), 1);
    /* Answering the task id again, with any choice: exit 60
     * already_answered, the first receipt on stdout, still one label. */
    const char *answer_a[] = {"ldpref", keyarg, "answer", id, "a", NULL};
    const char *answer_t[] = {"ldpref", keyarg, "answer", id, "t", NULL};
    const char *const *repeats[] = {answer, answer_a, answer_t};
    for (int i = 0; i < 3; i++) {
        CHECK_INT(cli(&out, repeats[i]), LP_EALREADY_ANSWERED);
        json_t *again = out ? json_loads(out, 0, NULL) : NULL;
        CHECK(again != NULL &&
              json_equal(json_object_get(again, "label_id"), json_object_get(first, "label_id")));
        CHECK(again != NULL &&
              json_equal(json_object_get(again, "z"), json_object_get(first, "z")));
        json_decref(again);
        free(out);
    }
    json_decref(first);
    CHECK_INT(server_db_count(&srv, "labels"), 1);
    const char *answer_x[] = {"ldpref", keyarg, "answer", id, "c", NULL};
    CHECK_INT(cli(NULL, answer_x), LP_EINVALID_ARGUMENT);

    /* What the annotator reads: on a terminal, that z is the randomized
     * answer; on a repeat, why it cannot be changed. */
    const char *next1[] = {"ldpref", keyarg, "next", NULL};
    CHECK_INT(cli(&out, next1), 0);
    json_t *t2 = out ? json_loads(out, JSON_DISABLE_EOF_CHECK, NULL) : NULL;
    snprintf(id, sizeof id, "%lld", (long long)json_integer_value(json_object_get(t2, "task_id")));
    json_decref(t2);
    free(out);
    const char *answer_t2[] = {"ldpref", keyarg, "answer", id, "t", NULL};
    char *err = NULL;
    CHECK_INT(cli_stderr(answer_t2, 1, &err), 0);
    CHECK(err && strstr(err, "is the randomized answer that was sent") != NULL);
    free(err);
    CHECK_INT(cli_stderr(answer_t2, 0, &err), LP_EALREADY_ANSWERED);
    CHECK(err && strstr(err, "already answered; a randomized answer can never be changed, or "
                             "repeated questions would reveal your true preference") != NULL);
    CHECK(err && strstr(err, "randomized answer that was sent") == NULL);
    free(err);
    CHECK_INT(server_db_count(&srv, "labels"), 2);

    const char *help[] = {"ldpref", "answer", "--help", NULL};
    CHECK_INT(cli(&out, help), 0);
    CHECK(out && strstr(out, "answer") != NULL);
    free(out);
}

/* Library flow: enroll, next, answer, resend returns the original receipt. */
static void test_library_flow(ldpref_client *op)
{
    char *token = new_token(op, NULL);
    char key[400];
    snprintf(key, sizeof key, "%s/lib.key", srv.dir);
    CHECK_ERR(ldpref_keygen(key, NULL), LP_OK);
    ldpref_options o;
    ldpref_options_init(&o);
    o.server_url = srv.url;
    o.key_path = key;
    ldpref_client *c = NULL;
    CHECK_ERR(ldpref_client_open(&o, &c), LP_OK);
    ldpref_enrollment en;
    CHECK_ERR(ldpref_enroll(c, token, &en), LP_OK);
    CHECK(strncmp(en.pseudonym, "ann-", 4) == 0);
    free(token);

    ldpref_task *tasks = NULL;
    size_t n = 0;
    CHECK_ERR(ldpref_next_tasks(c, 5, &tasks, &n), LP_OK);
    CHECK_INT(n, 5);
    long long before = server_db_count(&srv, "labels");
    ldpref_receipt r1, r2;
    CHECK_ERR(ldpref_answer(c, &tasks[0], 1, &r1), LP_OK);
    CHECK_INT(r1.resent, 0);
    /* A repeat of the task id, with the same or another choice: already
     * answered, with the stored receipt; nothing new is sent. */
    for (int choice = LDPREF_CHOICE_A; choice <= LDPREF_CHOICE_CANT_TELL; choice++) {
        memset(&r2, 0, sizeof r2);
        CHECK_ERR(ldpref_answer(c, &tasks[0], choice, &r2), LP_EALREADY_ANSWERED);
        CHECK_INT(r2.resent, 1);
        CHECK_INT(r2.label_id, r1.label_id);
        CHECK_INT(r2.received_at, r1.received_at);
        CHECK_INT(r2.z, r1.z);
    }
    CHECK_ERR(ldpref_answer_id(c, tasks[0].task_id, 0, &r2), LP_EALREADY_ANSWERED);
    CHECK_INT(r2.label_id, r1.label_id);
    CHECK_INT(server_db_count(&srv, "labels"), before + 1);

    /* Batch through the library. */
    ldpref_batch_item items[4];
    memset(items, 0, sizeof items);
    for (int i = 0; i < 4; i++) {
        items[i].task = &tasks[i + 1];
        items[i].choice = i & 1;
    }
    CHECK_ERR(ldpref_answer_batch(c, items, 4), LP_OK);
    for (int i = 0; i < 4; i++)
        CHECK_ERR(items[i].error, LP_OK);
    CHECK_INT(server_db_count(&srv, "labels"), before + 5);

    /* The same items again: each already answered, with its receipt. */
    ldpref_batch_item again[4];
    memcpy(again, items, sizeof again);
    again[0].choice = LDPREF_CHOICE_CANT_TELL;
    CHECK_ERR(ldpref_answer_batch(c, again, 4), LP_OK);
    for (int i = 0; i < 4; i++) {
        CHECK_ERR(again[i].error, LP_EALREADY_ANSWERED);
        CHECK_INT(again[i].receipt.label_id, items[i].receipt.label_id);
        CHECK_INT(again[i].receipt.z, items[i].receipt.z);
    }
    CHECK_INT(server_db_count(&srv, "labels"), before + 5);

    /* A task id twice in one batch: sent once, the repeat already answered
     * with the same receipt. */
    ldpref_task *more = NULL;
    size_t n_more = 0;
    CHECK_ERR(ldpref_next_tasks(c, 1, &more, &n_more), LP_OK);
    if (n_more == 1) {
        ldpref_batch_item twice[2];
        memset(twice, 0, sizeof twice);
        twice[0].task = twice[1].task = &more[0];
        twice[0].choice = LDPREF_CHOICE_CANT_TELL;
        twice[1].choice = LDPREF_CHOICE_B;
        CHECK_ERR(ldpref_answer_batch(c, twice, 2), LP_OK);
        CHECK_ERR(twice[0].error, LP_OK);
        CHECK_ERR(twice[1].error, LP_EALREADY_ANSWERED);
        CHECK(twice[0].receipt.label_id > 0);
        CHECK_INT(twice[1].receipt.label_id, twice[0].receipt.label_id);
        CHECK_INT(twice[1].receipt.z, twice[0].receipt.z);
        CHECK_INT(server_db_count(&srv, "labels"), before + 6);
    }
    ldpref_tasks_free(more, n_more);

    /* Asking again returns no new task for labeled ones. */
    ldpref_tasks_free(tasks, n);
    ldpref_client_close(c);
}

/* The annotator of campaign "tight", its six tasks, and its first stored
 * label (whose nonce the replay case reuses). */
static raw_annotator tight;
static int64_t tight_tasks[6];
static lp_label_msg tight_first;

/* A campaign with a small budget and a narrow epsilon range, six tasks, and
 * an annotator enrolled with a one-time token who fetches all six. */
static void test_tight_campaign_setup(ldpref_client *op)
{
    ldpref_campaign spec;
    ldpref_campaign_init(&spec);
    spec.name = "tight";
    spec.epsilon_min = 0.5;
    spec.epsilon_max = 2;
    spec.epsilon_budget = 2.5;
    CHECK_ERR(ldpref_admin_campaign_create(op, &spec, NULL), LP_OK);
    CHECK_ERR(ldpref_admin_campaign_create(op, &spec, NULL), LP_ECAMPAIGN_EXISTS);
    char path[400];
    snprintf(path, sizeof path, "%s/tight.jsonl", srv.dir);
    FILE *f = fopen(path, "w");
    for (int i = 0; i < 6; i++)
        fprintf(f, "{\"id\":\"t%d\",\"prompt\":\"p%d\",\"responses\":[\"x%d\",\"y%d\"]}\n", i, i, i,
                i);
    fclose(f);
    CHECK_ERR(ldpref_admin_tasks_load(op, path, "tight", NULL), LP_OK);

    char *token = new_token(op, "tight");
    raw_annotator other;
    CHECK_INT(raw_enroll(&tight, srv.url, token ? token : ""), 201);
    CHECK_INT(raw_enroll(&other, srv.url, token ? token : ""), 403); /* token is one-time */
    free(token);
    json_t *tasks;
    CHECK_INT(raw_next(&tight, 6, &tasks), 200);
    CHECK_INT(json_array_size(tasks), 6);
    for (int i = 0; i < 6; i++)
        tight_tasks[i] =
            json_integer_value(json_object_get(json_array_get(tasks, (size_t)i), "task_id"));
    json_decref(tasks);
}

/* A label is stored; its identical resend gets the original receipt. */
static void test_label_accepted_and_resent(void)
{
    http_reply r;
    long long labels = server_db_count(&srv, "labels");
    tight_first = raw_label(&tight, tight_tasks[0], 1, 1.0);
    CHECK_INT(raw_post_label(srv.url, &tight_first, &r), 201);
    http_reply_free(&r);
    labels++;
    /* Identical resend: original receipt. */
    CHECK_INT(raw_post_label(srv.url, &tight_first, &r), 200);
    http_reply_free(&r);
    CHECK_INT(server_db_count(&srv, "labels"), labels);
}

/* Every bad label gets its exact error and stores nothing. */
static void test_bad_labels_store_nothing(void)
{
    raw_annotator *a = &tight;
    http_reply r;
    long long labels = server_db_count(&srv, "labels");
    struct bad_case {
        const char *what;
        lp_label_msg m;
        int want;
    } cases[12];
    int nc = 0;
    lp_label_msg m;

    m = raw_label(a, tight_tasks[0], 0, 1.0);
    cases[nc++] = (struct bad_case){"different second label", m, LP_ECONFLICTING_LABEL};
    m = raw_label(a, tight_tasks[1], 1, 1.0);
    m.sig[5] ^= 1;
    cases[nc++] = (struct bad_case){"bad signature", m, LP_EBAD_SIGNATURE};
    m = raw_label(a, tight_tasks[1], 1, 1.0);
    memcpy(m.nonce, tight_first.nonce, LP_NONCE_BYTES);
    raw_resign(a, &m);
    cases[nc++] = (struct bad_case){"replayed nonce", m, LP_EREPLAYED_NONCE};
    m = raw_label(a, tight_tasks[1], 1, 1.0);
    m.timestamp_ms -= 3600 * 1000;
    raw_resign(a, &m);
    cases[nc++] = (struct bad_case){"stale timestamp", m, LP_ESTALE_TIMESTAMP};
    m = raw_label(a, tight_tasks[1], 1, 1.0);
    m.timestamp_ms += 3600 * 1000;
    raw_resign(a, &m);
    cases[nc++] = (struct bad_case){"future timestamp", m, LP_ESTALE_TIMESTAMP};
    m = raw_label(a, 999999, 1, 1.0);
    cases[nc++] = (struct bad_case){"unknown task", m, LP_EUNKNOWN_TASK};
    m = raw_label(a, 1, 1, 1.0); /* an OASST task never assigned to a */
    cases[nc++] = (struct bad_case){"unassigned task", m, LP_ENOT_ASSIGNED};
    m = raw_label(a, tight_tasks[1], 1, 5.0);
    cases[nc++] = (struct bad_case){"epsilon above campaign max", m, LP_EEPSILON_OUT_OF_RANGE};
    m = raw_label(a, tight_tasks[1], 1, INFINITY);
    cases[nc++] = (struct bad_case){"infinite epsilon not allowed", m, LP_EBAD_EPSILON};
    raw_annotator stranger;
    stranger.url = srv.url;
    crypto_sign_keypair(stranger.pk, stranger.sk);
    m = raw_label(&stranger, tight_tasks[1], 1, 1.0);
    cases[nc++] = (struct bad_case){"unenrolled key", m, LP_EUNKNOWN_KEY};

    for (int i = 0; i < nc; i++) {
        raw_post_label(srv.url, &cases[i].m, &r);
        check_error_reply(cases[i].what, &r, cases[i].want);
        http_reply_free(&r);
        check_record(server_db_count(&srv, "labels") == labels, __FILE__, __LINE__,
                     "%s stored nothing", cases[i].what);
    }
}

/* Budget 2.5: labels of 1.0 on t1, then 1.0 on t2 would reach 3.0. */
static void test_budget_exceeded(void)
{
    raw_annotator *a = &tight;
    http_reply r;
    long long labels = server_db_count(&srv, "labels");
    lp_label_msg m = raw_label(a, tight_tasks[1], 1, 1.0);
    CHECK_INT(raw_post_label(srv.url, &m, &r), 201);
    http_reply_free(&r);
    labels++;
    m = raw_label(a, tight_tasks[2], 1, 1.0);
    raw_post_label(srv.url, &m, &r);
    check_error_reply("over budget", &r, LP_EBUDGET_EXCEEDED);
    http_reply_free(&r);
    m = raw_label(a, tight_tasks[2], 1, 0.5); /* 2.5 fits exactly */
    CHECK_INT(raw_post_label(srv.url, &m, &r), 201);
    http_reply_free(&r);
    labels++;
    CHECK_INT(server_db_count(&srv, "labels"), labels);
}

/* Revoked keys are refused. */
static void test_revoked_key_refused(ldpref_client *op)
{
    raw_annotator *a = &tight;
    http_reply r;
    long long labels = server_db_count(&srv, "labels");
    char keyb64[LP_B64_MAX];
    lp_b64_encode(a->pk, LP_KEY_BYTES, keyb64);
    CHECK_ERR(ldpref_admin_revoke(op, keyb64), LP_OK);
    lp_label_msg m = raw_label(a, tight_tasks[3], 1, 0.5);
    raw_post_label(srv.url, &m, &r);
    check_error_reply("revoked key", &r, LP_EREVOKED_KEY);
    http_reply_free(&r);
    CHECK_INT(server_db_count(&srv, "labels"), labels);
}

/* Malformed bodies, wrong types, oversize bodies, missing operator token. */
static void test_bad_requests(void)
{
    long long labels = server_db_count(&srv, "labels"), tasks = server_db_count(&srv, "tasks");
    char url[256];
    snprintf(url, sizeof url, "%s/v1/labels", srv.url);
    http_reply r;
    const struct {
        const char *what, *body;
        int want;
    } cases[] = {
        {"malformed JSON", "{\"key\": ", LP_EMALFORMED_JSON},
        {"not an object", "[1,2,3]", LP_EWRONG_TYPE},
        {"wrong type",
         "{\"key\":1,\"task_id\":1,\"z\":1,\"epsilon\":1,\"nonce\":\"a\","
         "\"timestamp\":1,\"signature\":\"b\"}",
         LP_EWRONG_TYPE},
        {"missing fields", "{}", LP_EMISSING_FIELD},
        {"too deep",
         "[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[]]]]]"
         "]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]",
         LP_ETOO_DEEP},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        http_raw("POST", url, cases[i].body, strlen(cases[i].body), NULL, &r);
        check_error_reply(cases[i].what, &r, cases[i].want);
        http_reply_free(&r);
    }
    /* Data-driven wire cases, sent over HTTP: same names as the decoder. */
    const char *files[] = {"bad_epsilon--negative",     "bad_epsilon--zero",
                           "bad_epsilon--string-inf",   "bad_label--two",
                           "unknown_field--true-label", "malformed_json--overflow"};
    for (size_t i = 0; i < sizeof files / sizeof files[0]; i++) {
        char path[256], body[4096];
        snprintf(path, sizeof path, "tests/wire/label/invalid/%s.json", files[i]);
        FILE *f = fopen(path, "r");
        size_t n = f ? fread(body, 1, sizeof body - 1, f) : 0;
        if (f)
            fclose(f);
        body[n] = 0;
        http_raw("POST", url, body, n, NULL, &r);
        char want[64];
        snprintf(want, sizeof want, "%.*s", (int)(strstr(files[i], "--") - files[i]), files[i]);
        check_error_reply(files[i], &r, lp_error_from_name(want));
        http_reply_free(&r);
    }

    size_t big = 8 << 20;
    char *huge = malloc(big);
    memset(huge, ' ', big);
    huge[0] = '{';
    huge[big - 1] = '}';
    http_raw("POST", url, huge, big, NULL, &r);
    check_error_reply("oversize body", &r, LP_EBODY_TOO_LARGE);
    http_reply_free(&r);
    free(huge);

    /* Operator endpoints need the token. */
    const char *op_paths[] = {"/v1/stats", "/v1/export"};
    for (int i = 0; i < 2; i++) {
        raw_get(srv.url, op_paths[i], NULL, &r);
        check_error_reply("missing operator token", &r, LP_EUNAUTHORIZED);
        http_reply_free(&r);
        raw_get(srv.url, op_paths[i], "op_wrong", &r);
        check_error_reply("wrong operator token", &r, LP_EUNAUTHORIZED);
        http_reply_free(&r);
    }
    snprintf(url, sizeof url, "%s/v1/tasks", srv.url);
    const char *line = "{\"prompt\":\"p\",\"responses\":[\"a\",\"b\"]}\n";
    http_raw("POST", url, line, strlen(line), NULL, &r);
    check_error_reply("task upload without token", &r, LP_EUNAUTHORIZED);
    http_reply_free(&r);
    /* A malformed line rejects the whole upload. */
    const char *mixed = "{\"prompt\":\"p1\",\"responses\":[\"a\",\"b\"]}\n{\"prompt\":\"p2\"}\n";
    http_raw("POST", url, mixed, strlen(mixed), srv.token, &r);
    check_error_reply("task upload with a bad line", &r, LP_EBAD_TASK);
    CHECK(r.body && strstr(r.body, "line 2") != NULL);
    http_reply_free(&r);
    raw_get(srv.url, "/v1/nowhere", NULL, &r);
    check_error_reply("unknown route", &r, LP_ENOT_FOUND);
    http_reply_free(&r);

    CHECK_INT(server_db_count(&srv, "labels"), labels);
    CHECK_INT(server_db_count(&srv, "tasks"), tasks);
}

/* Export: one line per stored label, oriented by the privatized label. */
static void test_export(void)
{
    char path[400], arg[420];
    snprintf(path, sizeof path, "%s/export.jsonl", srv.dir);
    snprintf(arg, sizeof arg, "--out=%s", path);
    const char *cmd[] = {"ldpref", "admin", "export", arg, NULL};
    CHECK_INT(cli(NULL, cmd), 0);
    FILE *f = fopen(path, "r");
    CHECK(f != NULL);
    if (f == NULL)
        return;
    char *line = NULL;
    size_t cap = 0;
    long long n = 0, well_formed = 0;
    while (getline(&line, &cap, f) > 0) {
        n++;
        json_t *j = json_loads(line, 0, NULL);
        const char *chosen = json_string_value(json_object_get(j, "chosen"));
        const char *rejected = json_string_value(json_object_get(j, "rejected"));
        json_t *eps = json_object_get(j, "epsilon");
        well_formed +=
            chosen && rejected && json_is_string(json_object_get(j, "prompt")) &&
            json_is_integer(json_object_get(j, "label_id")) &&
            (json_is_number(eps) || json_is_null(eps)) &&
            strncmp(json_string_value(json_object_get(j, "annotator")) ?: "", "ann-", 4) == 0 &&
            json_is_integer(json_object_get(j, "received_at"));
        json_decref(j);
    }
    free(line);
    fclose(f);
    CHECK_INT(n, server_db_count(&srv, "labels"));
    CHECK_INT(well_formed, n);
}

/* Runs the CLI and parses its single JSON output line (NULL on failure);
 * *rc gets the exit status. */
static json_t *cli_json(const char *const *argv, int *rc)
{
    char *out = NULL;
    *rc = cli(&out, argv);
    json_t *j = out ? json_loads(out, JSON_DISABLE_EOF_CHECK, NULL) : NULL;
    free(out);
    return j;
}

/* `admin campaign-create --epsilon-max inf` (documented in --help): no upper
 * bound, sent as the protocol's largest finite epsilon_max with infinity
 * allowed. Its annotators' labels with a large finite epsilon (above the
 * default maximum 10) and with epsilon = infinity (unprivatized) are both
 * accepted, through the CLI. */
static void test_unbounded_campaign(ldpref_client *op)
{
    /* The library: +inf is the unbounded form; -inf and NaN are refused locally. */
    ldpref_campaign spec;
    ldpref_campaign_init(&spec);
    spec.name = "open-lib";
    const double bad[] = {-INFINITY, NAN};
    for (int i = 0; i < 2; i++) {
        spec.epsilon_max = bad[i];
        CHECK_ERR(ldpref_admin_campaign_create(op, &spec, NULL), LP_EBAD_EPSILON);
    }
    spec.epsilon_max = INFINITY;
    char *text = NULL;
    CHECK_ERR(ldpref_admin_campaign_create(op, &spec, &text), LP_OK);
    json_t *lib = text ? json_loads(text, 0, NULL) : NULL;
    CHECK(json_is_true(json_object_get(lib, "allow_infinite")));
    CHECK(json_number_value(json_object_get(lib, "epsilon_max")) == DBL_MAX);
    CHECK(json_number_value(json_object_get(lib, "epsilon_default")) == 1.0);
    json_decref(lib);
    ldpref_free(text);

    const char *create[] = {
        "ldpref", "admin", "campaign-create", "open", "--epsilon-max", "inf", "--epsilon-default",
        "inf",    NULL};
    int rc;
    json_t *c = cli_json(create, &rc);
    CHECK_INT(rc, 0);
    CHECK(json_is_true(json_object_get(c, "allow_infinite")));
    CHECK(json_number_value(json_object_get(c, "epsilon_max")) == DBL_MAX);
    CHECK(json_is_null(json_object_get(c, "epsilon_default")));
    json_decref(c);
    /* The flags keep their meaning with a finite maximum. */
    const char *finite[] = {"ldpref", "admin", "campaign-create", "closed", "--epsilon-max",
                            "20",     NULL};
    c = cli_json(finite, &rc);
    CHECK_INT(rc, 0);
    CHECK(json_is_false(json_object_get(c, "allow_infinite")));
    CHECK(json_number_value(json_object_get(c, "epsilon_max")) == 20.0);
    json_decref(c);

    char path[400];
    snprintf(path, sizeof path, "%s/open.jsonl", srv.dir);
    FILE *f = fopen(path, "w");
    for (int i = 0; f && i < 2; i++)
        fprintf(f, "{\"id\":\"o%d\",\"prompt\":\"q%d\",\"responses\":[\"u%d\",\"v%d\"]}\n", i, i, i,
                i);
    if (f)
        fclose(f);
    const char *load[] = {"ldpref", "admin", "tasks-load", path, "--campaign", "open", NULL};
    CHECK_INT(cli(NULL, load), 0);

    /* One annotator per epsilon: a cap of 50, and no cap at all (the local
     * total cap counts infinity too, so it is lifted as well). */
    long long labels = server_db_count(&srv, "labels");
    const char *caps[] = {"50", "inf"};
    for (int k = 0; k < 2; k++) {
        const char *tok_cmd[] = {"ldpref", "admin", "enroll-token", "--campaign", "open", NULL};
        char *out = NULL;
        CHECK_INT(cli(&out, tok_cmd), 0);
        char *token = out ? first_enrollment_token(out) : NULL;
        free(out);
        char key[400], keyarg[420], caparg[64], totalarg[64];
        snprintf(key, sizeof key, "%s/open%d.key", srv.dir, k);
        snprintf(keyarg, sizeof keyarg, "--key=%s", key);
        snprintf(caparg, sizeof caparg, "--epsilon-cap=%s", caps[k]);
        snprintf(totalarg, sizeof totalarg, "--epsilon-total-cap=%s", k ? "inf" : "1000");
        const char *keygen[] = {"ldpref", keyarg, "keygen", NULL};
        CHECK_INT(cli(NULL, keygen), 0);
        const char *enroll[] = {"ldpref", keyarg, "enroll", token ? token : "x", NULL};
        CHECK_INT(cli(NULL, enroll), 0);
        free(token);
        const char *next[] = {"ldpref", keyarg, caparg, "next", NULL};
        json_t *t = cli_json(next, &rc);
        CHECK_INT(rc, 0);
        CHECK(json_is_null(json_object_get(t, "epsilon"))); /* the proposal: infinity */
        CHECK(json_number_value(json_object_get(t, "epsilon_max")) == DBL_MAX);
        char id[32];
        snprintf(id, sizeof id, "%lld",
                 (long long)json_integer_value(json_object_get(t, "task_id")));
        json_decref(t);
        const char *answer[] = {"ldpref", keyarg, caparg, totalarg, "answer", id, "a", NULL};
        json_t *r = cli_json(answer, &rc);
        CHECK_INT(rc, 0);
        const json_t *eps = json_object_get(r, "epsilon");
        if (k == 0)
            CHECK(json_number_value(eps) == 50.0);
        else
            CHECK(json_is_null(eps));
        CHECK(json_integer_value(json_object_get(r, "label_id")) > 0);
        json_decref(r);
    }
    CHECK_INT(server_db_count(&srv, "labels"), labels + 2);
}

int main(void)
{
    lp_rng_init();
    if (server_start(&srv, NULL) != 0) {
        check_record(0, __FILE__, __LINE__, "server starts");
        return check_summary();
    }
    CHECK(srv.token[0] != 0);
    snprintf(env_server, sizeof env_server, "LDPREF_SERVER=%s", srv.url);
    snprintf(env_token, sizeof env_token, "LDPREF_OPERATOR_TOKEN=%s", srv.token);

    /* the storage's backend, as the health check and the metrics say */
    const char *backend = server_db_is_postgresql(&srv) ? "postgresql" : "sqlite";
    http_reply r;
    CHECK_INT(raw_get(srv.url, "/v1/healthz", NULL, &r), 200);
    json_t *health = r.body ? json_loads(r.body, 0, NULL) : NULL;
    CHECK_STR(json_string_value(json_object_get(json_object_get(health, "storage"), "backend")),
              backend);
    json_decref(health);
    http_reply_free(&r);
    CHECK_INT(raw_get(srv.url, "/metrics", srv.token, &r), 200);
    char metric[80];
    snprintf(metric, sizeof metric, "\nldpref_storage_backend{backend=\"%s\"} 1\n", backend);
    CHECK(r.body && strstr(r.body, metric) != NULL);
    http_reply_free(&r);

    ldpref_client *op = operator_client_open(&srv);
    test_cli_flow();
    test_library_flow(op);
    test_tight_campaign_setup(op);
    test_label_accepted_and_resent();
    test_bad_labels_store_nothing();
    test_budget_exceeded();
    test_revoked_key_refused(op);
    test_bad_requests();
    test_export();
    test_unbounded_campaign(op);
    ldpref_client_close(op);

    CHECK_INT(server_stop(&srv), 0); /* graceful SIGTERM exit */
    server_cleanup(&srv);
    return check_summary();
}
