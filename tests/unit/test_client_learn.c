/*
 * test_client_learn.c — the learning calls of libldpref and their CLI
 * commands, without a server: argument validation happens before anything
 * is sent. The handle points at a closed 127.0.0.1 port, so a call that
 * passes validation ends with network_error, and one that is refused
 * locally with its own code (and, for calls with json_out, *json_out NULL).
 * Also: the new symbols are exported under the LDPREF_0.2 version node, and
 * the CLI refuses bad arguments with the error table's exit codes, prints
 * the SIMULATION warning and marks its outputs when CTL simulation is on.
 */
#include "ldpref.h"

#include "check.h"
#include "error.h"
#include "ports.h"
#include "server_proc.h"
#include "tmpdir.h"

#include <dlfcn.h>
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

static char dir[64];
static char url[64];
static char *const SENTINEL = (char *)"sentinel";

static ldpref_client *open_client(const char *token)
{
    ldpref_options o;
    ldpref_options_init(&o);
    o.server_url = url;
    o.operator_token = token;
    o.connect_timeout_ms = 2000;
    o.timeout_ms = 4000;
    ldpref_client *c = NULL;
    CHECK_ERR(ldpref_client_open(&o, &c), LP_OK);
    return c;
}

/* A call's result, that *json_out was cleared, and that a refusal left a message. */
#define EXPECT(call, want)                                                                         \
    do {                                                                                           \
        json = SENTINEL;                                                                           \
        int got_ = (call);                                                                         \
        CHECK_ERR(got_, want);                                                                     \
        CHECK(json == NULL);                                                                       \
        if (got_ != LP_OK)                                                                         \
            CHECK(ldpref_errmsg(c)[0] != '\0');                                                    \
    } while (0)

/* As EXPECT for a call on a NULL handle (no handle to carry a message). */
#define EXPECT_NOHANDLE(call, want)                                                                \
    do {                                                                                           \
        json = SENTINEL;                                                                           \
        CHECK_ERR((call), want);                                                                   \
        CHECK(json == NULL);                                                                       \
    } while (0)

static void test_runs_models(ldpref_client *c, ldpref_client *anon)
{
    char *json;
    /* NULL handles. */
    EXPECT_NOHANDLE(ldpref_admin_retrain(NULL, NULL, &json), LP_EINVALID_ARGUMENT);
    EXPECT_NOHANDLE(ldpref_admin_run_get(NULL, 1, &json), LP_EINVALID_ARGUMENT);
    EXPECT_NOHANDLE(ldpref_admin_runs(NULL, 1, &json), LP_EINVALID_ARGUMENT);
    EXPECT_NOHANDLE(ldpref_admin_run_cancel(NULL, 1, &json), LP_EINVALID_ARGUMENT);
    EXPECT_NOHANDLE(ldpref_admin_run_wait(NULL, 1, 0, NULL, NULL, &json), LP_EINVALID_ARGUMENT);
    EXPECT_NOHANDLE(ldpref_admin_models(NULL, &json), LP_EINVALID_ARGUMENT);
    EXPECT_NOHANDLE(ldpref_admin_model_get(NULL, 0, &json), LP_EINVALID_ARGUMENT);
    EXPECT_NOHANDLE(ldpref_admin_model_activate(NULL, 1, &json), LP_EINVALID_ARGUMENT);
    EXPECT_NOHANDLE(ldpref_admin_schedule_get(NULL, &json), LP_EINVALID_ARGUMENT);
    EXPECT_NOHANDLE(ldpref_admin_schedule_set(NULL, "{}", &json), LP_EINVALID_ARGUMENT);
    EXPECT_NOHANDLE(ldpref_admin_corruption_get(NULL, NULL, &json), LP_EINVALID_ARGUMENT);
    EXPECT_NOHANDLE(ldpref_score(NULL, "{}", &json), LP_EINVALID_ARGUMENT);

    /* Retrain requests: text checked before sending. */
    EXPECT(ldpref_admin_retrain(c, "{\"loss\": ", &json), LP_EMALFORMED_JSON);
    EXPECT(ldpref_admin_retrain(c, "[1, 2]", &json), LP_EWRONG_TYPE);
    EXPECT(ldpref_admin_retrain(c, "\"square-chipo\"", &json), LP_EWRONG_TYPE);
    EXPECT(ldpref_admin_retrain(c, "{\"loss\": \"dpo\", \"loss\": \"ipo\"}", &json),
           LP_EMALFORMED_JSON);
    char deep[200] = "{\"a\":";
    for (int i = 0; i < 40; i++)
        strcat(deep, "[");
    for (int i = 0; i < 40; i++)
        strcat(deep, "]");
    strcat(deep, "}");
    EXPECT(ldpref_admin_retrain(c, deep, &json), LP_ETOO_DEEP);
    char *big = malloc(LDPREF_REQUEST_MAX + 64);
    if (big) {
        memset(big, ' ', LDPREF_REQUEST_MAX + 63);
        big[0] = '{';
        big[LDPREF_REQUEST_MAX + 61] = '}';
        big[LDPREF_REQUEST_MAX + 63] = '\0';
        EXPECT(ldpref_admin_retrain(c, big, &json), LP_EBODY_TOO_LARGE);
        free(big);
    }
    EXPECT(ldpref_admin_retrain(c, NULL, &json), LP_ENETWORK); /* NULL = {} */
    EXPECT(ldpref_admin_retrain(c, "{\"loss\": \"dpo\", \"seed\": 3}", &json), LP_ENETWORK);
    CHECK_ERR(ldpref_admin_retrain(c, NULL, NULL), LP_ENETWORK); /* json_out may be NULL */
    /* Operator calls need the token; nothing is sent without it. */
    EXPECT(ldpref_admin_retrain(anon, NULL, &json), LP_EUNAUTHORIZED);
    EXPECT(ldpref_admin_models(anon, &json), LP_EUNAUTHORIZED);
    EXPECT(ldpref_admin_runs(anon, 5, &json), LP_EUNAUTHORIZED);

    /* Ids and ranges. */
    EXPECT(ldpref_admin_run_get(c, 0, &json), LP_EINVALID_ARGUMENT);
    EXPECT(ldpref_admin_run_get(c, -3, &json), LP_EINVALID_ARGUMENT);
    CHECK(strstr(ldpref_errmsg(c), "run") != NULL);
    EXPECT(ldpref_admin_run_get(c, 1, &json), LP_ENETWORK);
    EXPECT(ldpref_admin_runs(c, -1, &json), LP_EINVALID_ARGUMENT);
    EXPECT(ldpref_admin_runs(c, 1001, &json), LP_EINVALID_ARGUMENT);
    EXPECT(ldpref_admin_runs(c, 0, &json), LP_ENETWORK);
    EXPECT(ldpref_admin_runs(c, 1000, &json), LP_ENETWORK);
    EXPECT(ldpref_admin_run_cancel(c, 0, &json), LP_EINVALID_ARGUMENT);
    EXPECT(ldpref_admin_run_cancel(c, 2, &json), LP_ENETWORK);
    EXPECT(ldpref_admin_run_wait(c, 0, 100, NULL, NULL, &json), LP_EINVALID_ARGUMENT);
    EXPECT(ldpref_admin_run_wait(c, 1, 9, NULL, NULL, &json), LP_EINVALID_ARGUMENT);
    EXPECT(ldpref_admin_run_wait(c, 1, -5, NULL, NULL, &json), LP_EINVALID_ARGUMENT);
    EXPECT(ldpref_admin_run_wait(c, 1, 3600001, NULL, NULL, &json), LP_EINVALID_ARGUMENT);
    EXPECT(ldpref_admin_run_wait(c, 1, 10, NULL, NULL, &json), LP_ENETWORK);
    EXPECT(ldpref_admin_model_get(c, -1, &json), LP_EINVALID_ARGUMENT);
    EXPECT(ldpref_admin_model_get(c, 0, &json), LP_ENETWORK);
    EXPECT(ldpref_admin_model_get(c, 4, &json), LP_ENETWORK);
    EXPECT(ldpref_admin_model_activate(c, 0, &json), LP_EINVALID_ARGUMENT);
    EXPECT(ldpref_admin_model_activate(c, 1, &json), LP_ENETWORK);

    /* Schedules. */
    EXPECT(ldpref_admin_schedule_set(c, NULL, &json), LP_EINVALID_ARGUMENT);
    EXPECT(ldpref_admin_schedule_set(c, "interval", &json), LP_EMALFORMED_JSON);
    EXPECT(ldpref_admin_schedule_set(c, "3600", &json), LP_EWRONG_TYPE);
    EXPECT(ldpref_admin_schedule_set(c, "{\"interval_s\": 60}", &json), LP_ENETWORK);
    EXPECT(ldpref_admin_schedule_get(c, &json), LP_ENETWORK);
}

static void test_corruption(ldpref_client *c)
{
    char *json;
    ldpref_corruption s;
    memset(&s, 0x7f, sizeof s);
    ldpref_corruption_init(&s);
    CHECK(s.campaign == NULL);
    CHECK(s.alpha == 0.0);
    CHECK_STR(s.strategy, "flip");
    CHECK_INT(s.seed, 0);
    CHECK_INT(s.feature, -1);
    EXPECT(ldpref_admin_corruption_set(c, NULL, &json), LP_EINVALID_ARGUMENT);
    EXPECT_NOHANDLE(ldpref_admin_corruption_set(NULL, &s, &json), LP_EINVALID_ARGUMENT);
    EXPECT(ldpref_admin_corruption_set(c, &s, &json), LP_ENETWORK); /* defaults are valid */
    const double bad_alpha[] = {-0.001, 0.50001, 1, NAN, INFINITY};
    for (size_t i = 0; i < sizeof bad_alpha / sizeof *bad_alpha; i++) {
        ldpref_corruption_init(&s);
        s.alpha = bad_alpha[i];
        EXPECT(ldpref_admin_corruption_set(c, &s, &json), LP_EBAD_CORRUPTION);
        CHECK(strstr(ldpref_errmsg(c), "alpha") != NULL);
    }
    ldpref_corruption_init(&s);
    s.alpha = 0.5;
    EXPECT(ldpref_admin_corruption_set(c, &s, &json), LP_ENETWORK);
    const char *bad_strategy[] = {"bogus", "", "FLIP", NULL};
    for (size_t i = 0; i < 4; i++) {
        ldpref_corruption_init(&s);
        s.strategy = bad_strategy[i];
        EXPECT(ldpref_admin_corruption_set(c, &s, &json), LP_EBAD_CORRUPTION);
        CHECK(strstr(ldpref_errmsg(c), "strategy") != NULL);
    }
    const char *good[] = {"flip", "constant0", "constant1", "random", "anti"};
    for (size_t i = 0; i < 5; i++) {
        ldpref_corruption_init(&s);
        s.alpha = 0.1;
        s.strategy = good[i];
        EXPECT(ldpref_admin_corruption_set(c, &s, &json), LP_ENETWORK);
    }
    ldpref_corruption_init(&s);
    s.seed = (UINT64_C(1) << 53) + 1;
    EXPECT(ldpref_admin_corruption_set(c, &s, &json), LP_EBAD_CORRUPTION);
    s.seed = UINT64_C(1) << 53;
    EXPECT(ldpref_admin_corruption_set(c, &s, &json), LP_ENETWORK);
    ldpref_corruption_init(&s);
    s.strategy = "backdoor"; /* needs a feature */
    EXPECT(ldpref_admin_corruption_set(c, &s, &json), LP_EBAD_CORRUPTION);
    CHECK(strstr(ldpref_errmsg(c), "feature") != NULL);
    s.feature = 3;
    EXPECT(ldpref_admin_corruption_set(c, &s, &json), LP_ENETWORK);
    s.feature = -2;
    EXPECT(ldpref_admin_corruption_set(c, &s, &json), LP_EBAD_CORRUPTION);
    s.feature = INT64_C(1) << 24;
    EXPECT(ldpref_admin_corruption_set(c, &s, &json), LP_EBAD_CORRUPTION);
    ldpref_corruption_init(&s);
    s.campaign = "";
    EXPECT(ldpref_admin_corruption_set(c, &s, &json), LP_EINVALID_ARGUMENT);
    char longname[200];
    memset(longname, 'c', 129);
    longname[129] = '\0';
    s.campaign = longname;
    EXPECT(ldpref_admin_corruption_set(c, &s, &json), LP_EINVALID_ARGUMENT);
    EXPECT(ldpref_admin_corruption_get(c, "", &json), LP_EINVALID_ARGUMENT);
    EXPECT(ldpref_admin_corruption_get(c, longname, &json), LP_EINVALID_ARGUMENT);
    EXPECT(ldpref_admin_corruption_get(c, "c1 with spaces&more", &json), LP_ENETWORK);
    EXPECT(ldpref_admin_corruption_get(c, NULL, &json), LP_ENETWORK);

    /* Export views; the path variant creates no file for a bad view. */
    char path[128];
    snprintf(path, sizeof path, "%s/export.jsonl", dir);
    CHECK_ERR(ldpref_admin_export_view(c, NULL, "dirty", 0, stdout), LP_EINVALID_ARGUMENT);
    CHECK_ERR(ldpref_admin_export_view(c, NULL, "corrupted", 0, NULL), LP_EINVALID_ARGUMENT);
    CHECK_ERR(ldpref_admin_export_view(NULL, NULL, "corrupted", 0, stdout), LP_EINVALID_ARGUMENT);
    /* The corrupted view is a model's: no campaign; a version only with it. */
    CHECK_ERR(ldpref_admin_export_view(c, "default", "corrupted", 1, stdout), LP_EINVALID_ARGUMENT);
    CHECK_ERR(ldpref_admin_export_view(c, NULL, "corrupted", -1, stdout), LP_EINVALID_ARGUMENT);
    CHECK_ERR(ldpref_admin_export_view(c, NULL, "clean", 2, stdout), LP_EINVALID_ARGUMENT);
    CHECK_ERR(ldpref_admin_export_view(c, NULL, NULL, 2, stdout), LP_EINVALID_ARGUMENT);
    CHECK_ERR(ldpref_admin_export_view_path(c, NULL, "Corrupted", 0, path), LP_EINVALID_ARGUMENT);
    CHECK_ERR(ldpref_admin_export_view_path(c, "default", "corrupted", 0, path),
              LP_EINVALID_ARGUMENT);
    CHECK(access(path, F_OK) != 0);
    CHECK_ERR(ldpref_admin_export_view_path(c, NULL, "corrupted", 3, path), LP_ENETWORK);
    struct stat st;
    CHECK(stat(path, &st) == 0 && (st.st_mode & 0777) == 0600);
    CHECK_ERR(ldpref_admin_export_view(c, NULL, "corrupted", 0, stdout), LP_ENETWORK);
    CHECK_ERR(ldpref_admin_export_view(c, "default", "clean", 0, stdout), LP_ENETWORK);
    CHECK_ERR(ldpref_admin_export_view(c, NULL, NULL, 0, stdout), LP_ENETWORK);
}

static void test_score(ldpref_client *c, ldpref_client *anon)
{
    char *json;
    EXPECT(ldpref_score(c, NULL, &json), LP_EINVALID_ARGUMENT);
    EXPECT(ldpref_score(c, "not json", &json), LP_EMALFORMED_JSON);
    EXPECT(ldpref_score(c, "[]", &json), LP_EWRONG_TYPE);
    /* No operator token needed: the public handle gets as far as the network. */
    c = anon;
    EXPECT(ldpref_score(anon, "{\"task_ids\": [1]}", &json), LP_ENETWORK);
    const char *texts[] = {"one", "two", NULL};
    double r[3] = {7, 7, 7}, p[3] = {7, 7, 7};
    int64_t v = 99;
    CHECK_ERR(ldpref_score_texts(NULL, "p", texts, 2, 0, r, p, &v), LP_EINVALID_ARGUMENT);
    CHECK_ERR(ldpref_score_texts(anon, NULL, texts, 2, 0, r, p, &v), LP_EINVALID_ARGUMENT);
    CHECK_ERR(ldpref_score_texts(anon, "p", NULL, 2, 0, r, p, &v), LP_EINVALID_ARGUMENT);
    CHECK_ERR(ldpref_score_texts(anon, "p", texts, 0, 0, r, p, &v), LP_EINVALID_ARGUMENT);
    CHECK_ERR(ldpref_score_texts(anon, "p", texts, 3, 0, r, p, &v), LP_EINVALID_ARGUMENT);
    CHECK(strstr(ldpref_errmsg(anon), "texts[2]") != NULL);
    CHECK_ERR(ldpref_score_texts(anon, "p", texts, LDPREF_SCORE_CANDIDATES_MAX + 1, 0, r, p, &v),
              LP_ETOO_MANY_CANDIDATES);
    CHECK_ERR(ldpref_score_texts(anon, "p", texts, 2, -1, r, p, &v), LP_EINVALID_ARGUMENT);
    const char *bad_utf8[] = {"ok", "\xff\xfe"};
    CHECK_ERR(ldpref_score_texts(anon, "p", bad_utf8, 2, 0, r, p, &v), LP_EINVALID_ARGUMENT);
    char *huge = malloc(65538);
    if (huge) {
        memset(huge, 'x', 65537);
        huge[65537] = '\0';
        const char *one[] = {huge};
        CHECK_ERR(ldpref_score_texts(anon, "p", one, 1, 0, r, p, &v), LP_ETOO_LONG);
        CHECK_ERR(ldpref_score_texts(anon, huge, texts, 2, 0, r, p, &v), LP_ETOO_LONG);
        free(huge);
    }
    CHECK_ERR(ldpref_score_texts(anon, "p", texts, 2, 3, r, p, &v), LP_ENETWORK);
    CHECK_ERR(ldpref_score_texts(anon, "", texts, 2, 0, NULL, NULL, NULL), LP_ENETWORK);
    /* Outputs untouched by failures. */
    CHECK(r[0] == 7 && r[1] == 7 && p[0] == 7 && v == 99);
}

/* New symbols are exported from the shared library under LDPREF_0.2. */
static void test_symbols(void)
{
    char so[512];
    const char *build = getenv("LDPREF_BUILD");
    snprintf(so, sizeof so, "%s/libldpref.so", build ? build : "build");
    void *h = dlopen(so, RTLD_NOW | RTLD_LOCAL);
    CHECK(h != NULL);
    if (h == NULL)
        return;
    static const char *const added[] = {
        "ldpref_admin_export_view",    "ldpref_admin_export_view_path",
        "ldpref_admin_retrain",        "ldpref_admin_run_get",
        "ldpref_admin_runs",           "ldpref_admin_run_cancel",
        "ldpref_admin_run_wait",       "ldpref_admin_models",
        "ldpref_admin_model_get",      "ldpref_admin_model_activate",
        "ldpref_admin_schedule_get",   "ldpref_admin_schedule_set",
        "ldpref_corruption_init",      "ldpref_admin_corruption_set",
        "ldpref_admin_corruption_get", "ldpref_score",
        "ldpref_score_texts",          NULL};
    int found = 0, n = 0;
    for (int i = 0; added[i]; i++, n++)
        found += dlvsym(h, added[i], "LDPREF_0.2") != NULL;
    CHECK_INT(found, n);
    CHECK(dlvsym(h, "ldpref_admin_stats", "LDPREF_0") != NULL);
    CHECK(dlsym(h, "lpc_ctl_apply") == NULL); /* internals stay local */
    CHECK(dlsym(h, "lpc_call_json") == NULL);
    dlclose(h);
}

/* Runs the CLI with stderr merged into stdout; returns the exit code. */
static int cli(const char *args, char **out)
{
    char bin[512], cmd[2048];
    server_bin_path("ldpref", bin, sizeof bin);
    snprintf(cmd, sizeof cmd, "LDPREF_OPERATOR_TOKEN= LDPREF_SERVER=%s %s %s 2>&1", url, bin, args);
    FILE *p = popen(cmd, "r");
    if (p == NULL)
        return -1;
    size_t cap = 1 << 16, len = 0;
    char *buf = calloc(1, cap);
    size_t got;
    while (buf && len + 1 < cap && (got = fread(buf + len, 1, cap - 1 - len, p)) > 0)
        len += got;
    int st = pclose(p);
    *out = buf;
    return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

#define CLI_EXPECT(args, code, needle)                                                             \
    do {                                                                                           \
        char *o_ = NULL;                                                                           \
        int rc_ = cli(args, &o_);                                                                  \
        check_record(rc_ == (code), __FILE__, __LINE__, "ldpref %s: exit %d, want %d: %s", args,   \
                     rc_, code, o_ ? o_ : "");                                                     \
        check_record(o_ &&strstr(o_, needle) != NULL, __FILE__, __LINE__,                          \
                     "ldpref %s: output has \"%s\": %s", args, needle, o_ ? o_ : "");              \
        free(o_);                                                                                  \
    } while (0)

static void test_cli(void)
{
    static const char *const helps[] = {
        "admin retrain",    "admin runs",  "admin run",      "admin cancel",
        "admin models",     "admin model", "admin activate", "admin schedule",
        "admin corruption", "score",       "admin export",   "answer",
        "answer-batch",     NULL};
    for (int i = 0; helps[i]; i++) {
        char args[128];
        snprintf(args, sizeof args, "%s --help", helps[i]);
        CLI_EXPECT(args, 0, "usage: ldpref");
    }
    CLI_EXPECT("admin retrain --help", 0, "--no-activate");
    CLI_EXPECT("answer --help", 0, "--simulate-ctl-alpha");
    CLI_EXPECT("admin export --help", 0, "--view");
    /* Operator commands without a token: 25 unauthorized, nothing sent. */
    CLI_EXPECT("admin models", LDPREF_EUNAUTHORIZED, "operator token");
    /* Argument validation: 1 invalid_argument. */
    CLI_EXPECT("--token t admin run 0", LDPREF_EINVALID_ARGUMENT, "RUN");
    CLI_EXPECT("--token t admin run abc", LDPREF_EINVALID_ARGUMENT, "RUN");
    CLI_EXPECT("--token t admin cancel", LDPREF_EINVALID_ARGUMENT, "usage");
    CLI_EXPECT("--token t admin activate -2", LDPREF_EINVALID_ARGUMENT, "VERSION");
    CLI_EXPECT("--token t admin model 3 --active", LDPREF_EINVALID_ARGUMENT, "not both");
    CLI_EXPECT("--token t admin runs --limit 0", LDPREF_EINVALID_ARGUMENT, "--limit");
    CLI_EXPECT("--token t admin retrain --max-iter 0", LDPREF_EINVALID_ARGUMENT, "--max-iter");
    CLI_EXPECT("--token t admin retrain --features sparse", LDPREF_EINVALID_ARGUMENT, "--features");
    CLI_EXPECT("--token t admin retrain --beta x", LDPREF_EINVALID_ARGUMENT, "--beta");
    CLI_EXPECT("--token t admin retrain --cutoff 0", LDPREF_EINVALID_ARGUMENT, "--cutoff");
    CLI_EXPECT("--token t admin retrain --poll-ms 1 --wait", LDPREF_EINVALID_ARGUMENT, "--poll-ms");
    CLI_EXPECT("--token t admin retrain --request /nonexistent.json", LDPREF_EINVALID_ARGUMENT,
               "nonexistent");
    CLI_EXPECT("--token t admin retrain --bogus", LDPREF_EINVALID_ARGUMENT, "unknown option");
    CLI_EXPECT("--token t admin corruption", LDPREF_EINVALID_ARGUMENT, "usage");
    CLI_EXPECT("--token t admin corruption default --alpha 0.6", LDPREF_EINVALID_ARGUMENT,
               "--alpha");
    CLI_EXPECT("--token t admin corruption default --feature -1", LDPREF_EINVALID_ARGUMENT,
               "--feature");
    CLI_EXPECT("--token t admin corruption default --alpha 0.1 --strategy bogus",
               LDPREF_EBAD_CORRUPTION, "strategy");
    CLI_EXPECT("--token t admin export --view dirty", LDPREF_EINVALID_ARGUMENT, "--view");
    CLI_EXPECT("--token t admin export --version 2", LDPREF_EINVALID_ARGUMENT, "--view corrupted");
    CLI_EXPECT("--token t admin export --view corrupted --campaign default",
               LDPREF_EINVALID_ARGUMENT, "--campaign");
    CLI_EXPECT("score", LDPREF_EINVALID_ARGUMENT, "exactly one");
    CLI_EXPECT("score --prompt p", LDPREF_EINVALID_ARGUMENT, "--candidate");
    CLI_EXPECT("score --candidate x", LDPREF_EINVALID_ARGUMENT, "--prompt");
    CLI_EXPECT("score --prompt p --candidate x --task 3", LDPREF_EINVALID_ARGUMENT, "exactly one");
    CLI_EXPECT("score --task 0", LDPREF_EINVALID_ARGUMENT, "--task");
    CLI_EXPECT("score --task 1 --version 0", LDPREF_EINVALID_ARGUMENT, "--version");
    /* Valid requests get as far as the network (35), the public one without a token. */
    CLI_EXPECT("score --prompt p --candidate x --candidate y", LDPREF_ENETWORK, "network_error");
    CLI_EXPECT("--token t admin retrain --loss dpo --seed 3 --no-activate", LDPREF_ENETWORK,
               "network_error");
    CLI_EXPECT("--token t admin corruption default", LDPREF_ENETWORK, "network_error");
}

/* CLI simulation flags: validation, the warning, the marks, the ledger. */
static void test_cli_simulation(void)
{
    char args[1024], key[128];
    snprintf(key, sizeof key, "%s/clikey", dir);
    snprintf(args, sizeof args, "--key %s keygen", key);
    CLI_EXPECT(args, 0, "\"key\"");
    snprintf(args, sizeof args, "--key %s answer 1 a --simulate-ctl-alpha 0.7", key);
    CLI_EXPECT(args, LDPREF_EINVALID_ARGUMENT, "[0, 0.5]");
    snprintf(args, sizeof args,
             "--key %s answer 1 a --simulate-ctl-alpha 0.1 --simulate-ctl-strategy backdoor", key);
    CLI_EXPECT(args, LDPREF_EINVALID_ARGUMENT, "feature vectors");
    snprintf(args, sizeof args,
             "--key %s answer 1 a --simulate-ctl-alpha 0.1 --simulate-ctl-strategy bogus", key);
    CLI_EXPECT(args, LDPREF_EINVALID_ARGUMENT, "unknown --simulate-ctl-strategy");
    snprintf(args, sizeof args,
             "--key %s answer 1 a --simulate-ctl-alpha 0.1 --simulate-ctl-seed -4", key);
    CLI_EXPECT(args, LDPREF_EINVALID_ARGUMENT, "--simulate-ctl-seed");
    /* Valid: the warning on stderr, then the task is unknown to this ledger (20). */
    snprintf(args, sizeof args,
             "--key %s answer 1 a --simulate-ctl-alpha 0.2 --simulate-ctl-strategy random "
             "--simulate-ctl-seed 5",
             key);
    CLI_EXPECT(args, LDPREF_EUNKNOWN_TASK, "SIMULATION");
    /* Off: no warning. */
    char *o = NULL;
    snprintf(args, sizeof args, "--key %s answer 1 a", key);
    CHECK_INT(cli(args, &o), LDPREF_EUNKNOWN_TASK);
    CHECK(o && strstr(o, "SIMULATION") == NULL);
    free(o);
    /* answer-batch: per-item outputs carry the "simulation" object. */
    char batch[160];
    snprintf(batch, sizeof batch, "%s/batch.jsonl", dir);
    FILE *f = fopen(batch, "w");
    if (f) {
        fputs("{\"task_id\": 5, \"choice\": \"b\"}\n", f);
        fclose(f);
    }
    snprintf(args, sizeof args,
             "--key %s answer-batch %s --simulate-ctl-alpha 0.3 --simulate-ctl-strategy anti", key,
             batch);
    o = NULL;
    int rc = cli(args, &o);
    CHECK_INT(rc, LDPREF_EUNKNOWN_TASK);
    json_t *line = NULL;
    for (char *s = o ? strtok(o, "\n") : NULL; s; s = strtok(NULL, "\n"))
        if (s[0] == '{' && line == NULL)
            line = json_loads(s, 0, NULL);
    json_t *ctl = json_object_get(json_object_get(line, "simulation"), "ctl");
    CHECK(ctl != NULL);
    CHECK_STR(json_string_value(json_object_get(ctl, "strategy")), "anti");
    CHECK(json_real_value(json_object_get(ctl, "alpha")) == 0.3);
    CHECK_STR(json_string_value(json_object_get(line, "error")), "unknown_task");
    json_decref(line);
    free(o);
    /* budget reports simulated answers (none here: nothing was answered). */
    snprintf(args, sizeof args, "--key %s budget", key);
    CLI_EXPECT(args, 0, "\"simulated\":0");
}

int main(void)
{
    if (tmpdir_create_shm(dir, sizeof dir, "learn") != 0)
        return 1;
    snprintf(url, sizeof url, "http://127.0.0.1:%d", closed_port());
    ldpref_client *c = open_client("operator-token");
    ldpref_client *anon = open_client(NULL);
    if (c && anon) {
        test_runs_models(c, anon);
        test_corruption(c);
        test_score(c, anon);
    }
    ldpref_client_close(c);
    ldpref_client_close(anon);
    test_symbols();
    test_cli();
    test_cli_simulation();
    tmpdir_remove(dir);
    return check_summary();
}
