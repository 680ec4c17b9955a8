/*
 * e2e_curve.c — training curves and the CLI's readable output, end to end:
 * the real ldpref-server (port 0, temporary SQLite file), a campaign set up
 * and labelled through the real `ldpref` CLI, retrains over HTTP.
 *
 * Curves: an L-BFGS run records every iteration (iterations increasing, the
 * last point's objective equal to the stored model's final objective), in
 * the database as in the answer; a long SGD run (text features of 2^20
 * dimensions, so each epoch takes a while) shows its curve growing while it
 * trains, and the rows reach the database in batches before it ends; the
 * cancelled run keeps its curve; lists carry no curves.
 *
 * Output: through a pipe the default is the server's compact JSON exactly
 * as received; jsonl parses line by line; --format table prints aligned
 * columns with rounded floats; LDPREF_FORMAT does not apply to a pipe; on a
 * terminal (tmux) the default is a table for lists and for a run with its
 * curve, indented JSON for single objects, and tables fit a narrow terminal
 * with ellipses.
 */
#include "check.h"
#include "error.h"
#include "http_raw.h"
#include "operator_client.h"
#include "server_proc.h"
#include "terminal.h"

#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define TASKS 120
#define WAIT_MS 20000

static server_proc srv;
static char env_server[128], env_token[256];

/* ---- HTTP ---- */

static char *get_text(const char *path, long *status)
{
    char url[512];
    snprintf(url, sizeof url, "%s%s", srv.url, path);
    http_reply r;
    http_raw("GET", url, NULL, 0, srv.token, &r);
    *status = r.status;
    return r.body; /* the caller frees */
}

static json_t *call(const char *method, const char *path, const char *body)
{
    long st;
    return operator_call(&srv, method, path, body, &st);
}

static json_t *run_get(int64_t run)
{
    char path[64];
    snprintf(path, sizeof path, "/v1/retrain?run=%lld", (long long)run);
    return call("GET", path, NULL);
}

static const char *status_of(const json_t *run)
{
    const char *s = json_string_value(json_object_get(run, "status"));
    return s ? s : "";
}

static int is_final(const json_t *run)
{
    const char *s = status_of(run);
    return !strcmp(s, "succeeded") || !strcmp(s, "failed") || !strcmp(s, "cancelled");
}

static json_t *run_wait(int64_t run)
{
    return operator_run_wait(&srv, run, 120);
}

static int64_t retrain(const char *body)
{
    json_t *j = call("POST", "/v1/retrain", body);
    int64_t id = json_integer_value(json_object_get(j, "run"));
    check_record(id > 0, __FILE__, __LINE__, "retrain %s starts", body);
    json_decref(j);
    return id;
}

static long long curve_rows(int64_t run)
{
    char arg[32];
    snprintf(arg, sizeof arg, "%lld", (long long)run);
    return server_db_scalar(
        &srv, "SELECT count(*) FROM training_curve WHERE run = CAST(?1 AS INTEGER)", arg);
}

/* ---- the CLI ---- */

/* Runs `ldpref ARGS...` with the server and token in the environment (and
 * extra, may be NULL); its stdout into *out. Returns the exit status. */
static int cli(char **out, const char *extra, const char *const *args)
{
    const char *argv[16] = {"ldpref"};
    int n = 1;
    for (; args[n - 1] && n < 15; n++)
        argv[n] = args[n - 1];
    argv[n] = NULL;
    const char *env[] = {env_server, env_token, extra, NULL};
    return run_tool(argv, env, out);
}

/* Sets up the campaign through the CLI: TASKS tasks with features, one
 * annotator enrolled with a token, every task answered by a fixed rule
 * (randomized at the default epsilon by the client). */
static void set_up_campaign(void)
{
    char *out = NULL;
    const char *create[] = {"admin", "campaign-create", "curve", NULL};
    CHECK_INT(cli(&out, NULL, create), 0);
    free(out);
    char path[400];
    snprintf(path, sizeof path, "%s/tasks.jsonl", srv.dir);
    FILE *f = fopen(path, "w");
    uint64_t s = 0x2545F4914F6CDD1DULL;
    for (int k = 0; f && k < TASKS; k++) {
        double x[2][4];
        for (int r = 0; r < 2; r++)
            for (int j = 0; j < 4; j++) { /* xorshift64: fixed values */
                s ^= s << 13, s ^= s >> 7, s ^= s << 17;
                x[r][j] = (double)(s >> 11) / 9007199254740992.0;
            }
        fprintf(f,
                "{\"id\":\"t%d\",\"prompt\":\"question %d about topic %d\",\"responses\":"
                "[\"answer %d alpha\",\"answer %d beta\"],\"features\":[[%.6f,%.6f,%.6f,%.6f],"
                "[%.6f,%.6f,%.6f,%.6f]]}\n",
                k, k, k % 7, k, k, x[0][0], x[0][1], x[0][2], x[0][3], x[1][0], x[1][1], x[1][2],
                x[1][3]);
    }
    if (f)
        fclose(f);
    const char *load[] = {"admin", "tasks-load", path, "--campaign", "curve", NULL};
    CHECK_INT(cli(&out, NULL, load), 0);
    free(out);
    const char *tok[] = {"admin", "enroll-token", "--campaign", "curve", NULL};
    CHECK_INT(cli(&out, NULL, tok), 0);
    char *first = first_enrollment_token(out), token[200];
    snprintf(token, sizeof token, "%s", first ? first : "");
    free(first);
    free(out);
    char env_key[512];
    snprintf(env_key, sizeof env_key, "LDPREF_KEY=%s/ann.key", srv.dir);
    const char *keygen[] = {"keygen", NULL}, *enroll[] = {"enroll", token, NULL};
    CHECK_INT(cli(&out, env_key, keygen), 0);
    free(out);
    CHECK_INT(cli(&out, env_key, enroll), 0);
    free(out);
    char count[16];
    snprintf(count, sizeof count, "%d", TASKS);
    const char *next[] = {"next", "--count", count, NULL};
    CHECK_INT(cli(&out, env_key, next), 0);
    snprintf(path, sizeof path, "%s/answers.jsonl", srv.dir);
    f = fopen(path, "w");
    int answered = 0;
    for (char *line = out ? strtok(out, "\n") : NULL; line && f; line = strtok(NULL, "\n")) {
        json_t *t = json_loads(line, 0, NULL);
        long long id = json_integer_value(json_object_get(t, "task_id"));
        fprintf(f, "{\"task_id\":%lld,\"choice\":\"%s\"}\n", id, id % 3 ? "a" : "b");
        answered++;
        json_decref(t);
    }
    if (f)
        fclose(f);
    free(out);
    CHECK_INT(answered, TASKS);
    /* 120 labels at epsilon 1: above the default total cap of 100. */
    const char *batch[] = {"answer-batch", path, "--epsilon-total-cap", "1000", NULL};
    CHECK_INT(cli(&out, env_key, batch), 0);
    free(out);
    CHECK_INT(server_db_count(&srv, "labels"), TASKS);
}

/* ---- curves ---- */

/* Checks a curve's shape; returns its length. */
static size_t check_curve(const json_t *curve, int strictly)
{
    size_t n = json_array_size(curve), i;
    json_t *p;
    int increasing = 1, complete = 1;
    long long prev_it = -1, prev_t = -1;
    json_array_foreach(curve, i, p)
    {
        long long it = json_integer_value(json_object_get(p, "iteration"));
        long long t = json_integer_value(json_object_get(p, "t_ms"));
        increasing &= strictly ? it > prev_it : it >= prev_it;
        increasing &= t >= prev_t;
        complete &= json_is_real(json_object_get(p, "objective")) &&
                    json_is_integer(json_object_get(p, "evaluations")) &&
                    json_object_get(p, "grad_norm") != NULL && json_object_size(p) == 5;
        prev_it = it, prev_t = t;
    }
    CHECK(increasing);
    CHECK(complete);
    return n;
}

static int64_t test_lbfgs_curve(int64_t *run_out)
{
    int64_t run = retrain("{\"campaign\":\"curve\",\"l2\":0.01,\"features\":\"dense\"}");
    json_t *fin = run_wait(run);
    CHECK_STR(status_of(fin), "succeeded");
    json_t *curve = json_object_get(fin, "curve");
    size_t n = check_curve(curve, 1);
    long long iters =
        json_integer_value(json_object_get(json_object_get(fin, "progress"), "iteration"));
    fprintf(stderr, "L-BFGS run %lld: %lld iterations, %zu curve points\n", (long long)run, iters,
            n);
    CHECK(n >= 3);
    CHECK_INT(n, iters); /* every iteration, under the cap */
    CHECK_INT(curve_rows(run), n);
    int64_t version = json_integer_value(json_object_get(fin, "model_version"));
    char path[64];
    snprintf(path, sizeof path, "/v1/models?version=%lld", (long long)version);
    json_t *model = call("GET", path, NULL);
    double final = json_real_value(json_object_get(json_object_get(model, "metrics"), "objective"));
    double last = json_real_value(json_object_get(json_array_get(curve, n - 1), "objective"));
    CHECK(final > 0);
    CHECK_NEAR(last, final, 1e-12 * final);
    /* the model's answer carries its run's curve; lists carry none */
    CHECK(json_equal(json_object_get(model, "curve"), curve));
    json_decref(model);
    json_t *list = call("GET", "/v1/models", NULL);
    CHECK(json_array_size(json_object_get(list, "models")) == 1);
    CHECK(json_object_get(json_array_get(json_object_get(list, "models"), 0), "curve") == NULL);
    json_decref(list);
    list = call("GET", "/v1/retrain", NULL);
    CHECK(json_object_get(json_array_get(json_object_get(list, "runs"), 0), "curve") == NULL);
    json_decref(list);
    json_decref(fin);
    *run_out = run;
    return version;
}

/* A long SGD run: its curve grows while it trains; rows reach the database
 * before the run ends (in batches: fewer writes than points); cancelled,
 * it keeps the curve it had. */
static void test_live_curve(void)
{
    /* a fixed penalty: the run fits the model first (its curve is live), the
     * held-out folds after it; "auto" would run the folds first */
    int64_t run = retrain("{\"campaign\":\"curve\",\"optimizer\":\"sgd\",\"epochs\":1000,\"l2\":0,"
                          "\"features\":\"text\",\"text\":{\"dim\":1048576},\"activate\":false}");
    size_t seen = 0, grew = 0;
    long long rows_live = 0;
    int training = 0;
    /* up to 10 minutes: the run trains at idle priority, so a busy machine
     * slows it, but 1000 epochs take far longer than three */
    for (int k = 0; k < 30000 && (grew < 2 || rows_live == 0); k++) {
        json_t *r = run_get(run);
        if (strcmp(status_of(r), "training") == 0) {
            training = 1;
            size_t n = check_curve(json_object_get(r, "curve"), 0);
            if (n > seen && seen > 0)
                grew++;
            seen = n > seen ? n : seen;
            long long rows = curve_rows(run);
            json_t *again = run_get(run);
            if (rows > 0 && strcmp(status_of(again), "training") == 0)
                rows_live = rows; /* stored while the run still trained */
            json_decref(again);
        }
        int done = is_final(r);
        json_decref(r);
        if (done)
            break;
        usleep(20000);
    }
    fprintf(stderr, "SGD run %lld: %zu points seen live, grew %zu times, %lld rows stored live\n",
            (long long)run, seen, grew, rows_live);
    CHECK(training);
    CHECK(grew >= 2);
    CHECK(rows_live > 0);
    char body[64];
    snprintf(body, sizeof body, "{\"run\":%lld}", (long long)run);
    json_decref(call("POST", "/v1/retrain/cancel", body));
    json_t *fin = run_wait(run);
    CHECK_STR(status_of(fin), "cancelled");
    size_t n = check_curve(json_object_get(fin, "curve"), 0);
    CHECK(n >= seen);
    CHECK_INT(curve_rows(run), n);
    json_decref(fin);
}

/* ---- the CLI's output ---- */

static int count_lines(const char *s)
{
    int n = 0;
    for (; s && *s; s++)
        n += *s == '\n';
    return n;
}

static void test_pipe_output(int64_t run, int64_t version)
{
    long st;
    char *wire = get_text("/v1/retrain", &st);
    CHECK_INT(st, 200);
    char *out = NULL;
    /* default through a pipe: the answer exactly as received, one line */
    const char *runs[] = {"admin", "runs", NULL};
    CHECK_INT(cli(&out, NULL, runs), 0);
    size_t wl = wire ? strlen(wire) : 0;
    while (wl > 0 && wire[wl - 1] == '\n')
        wire[--wl] = 0;
    CHECK(out && wire && strncmp(out, wire, wl) == 0 && strcmp(out + wl, "\n") == 0);
    free(out);
    /* the variable does not apply to a pipe; the flag does */
    CHECK_INT(cli(&out, "LDPREF_FORMAT=table", runs), 0);
    CHECK(out && strncmp(out, wire, wl) == 0);
    free(out);
    const char *runs_json[] = {"admin", "runs", "--format", "json", NULL};
    CHECK_INT(cli(&out, NULL, runs_json), 0);
    CHECK(out && strncmp(out, wire, wl) == 0);
    free(out);
    /* jsonl: one run object per line */
    const char *runs_jsonl[] = {"--format=jsonl", "admin", "runs", NULL};
    CHECK_INT(cli(&out, NULL, runs_jsonl), 0);
    CHECK_INT(count_lines(out), 2);
    int parsed = 0;
    for (char *line = out ? strtok(out, "\n") : NULL; line; line = strtok(NULL, "\n")) {
        json_t *j = json_loads(line, 0, NULL);
        parsed += json_is_integer(json_object_get(j, "run")) && json_object_get(j, "status");
        json_decref(j);
    }
    CHECK_INT(parsed, 2);
    free(out);
    /* a single object in jsonl: one line, full precision */
    char id[32];
    snprintf(id, sizeof id, "%lld", (long long)run);
    const char *one[] = {"admin", "run", id, "--format", "jsonl", NULL};
    CHECK_INT(cli(&out, NULL, one), 0);
    CHECK_INT(count_lines(out), 1);
    json_t *j = out ? json_loads(out, 0, NULL) : NULL;
    json_t *curve = json_object_get(j, "curve");
    CHECK(json_array_size(curve) >= 3);
    double last = json_real_value(
        json_object_get(json_array_get(curve, json_array_size(curve) - 1), "objective"));
    json_decref(j);
    free(out);
    /* a table on request: aligned columns, the command's choice, 6 digits */
    const char *models_table[] = {"admin", "models", "--format", "table", NULL};
    CHECK_INT(cli(&out, "LC_ALL=C", models_table), 0); /* ASCII marks outside UTF-8 */
    CHECK(out && strstr(out, "\n-------  ------  ") && strstr(out, "\u2500") == NULL);
    free(out);
    CHECK_INT(cli(&out, "LC_ALL=C.UTF-8", models_table), 0);
    CHECK(out && strstr(out, "\u2500\u2500"));
    fprintf(stderr, "admin models --format table:\n%s", out ? out : "");
    char want[64];
    snprintf(want, sizeof want, "%.6g", last);
    CHECK(out && strstr(out, "objective") && strstr(out, "duration_ms") && strstr(out, want));
    CHECK(out && strchr(out, '{') == NULL);
    snprintf(want, sizeof want, "%.17g", last);
    CHECK(out && strstr(out, want) == NULL); /* not the wire's 17 digits */
    free(out);
    const char *bad[] = {"admin", "runs", "--format", "yaml", NULL};
    CHECK_INT(cli(&out, NULL, bad), LP_EINVALID_ARGUMENT);
    free(out);
    const char *annotator[] = {"budget", "--format", "table", NULL};
    CHECK_INT(cli(&out, NULL, annotator), LP_EINVALID_ARGUMENT);
    free(out);
    (void)version;
    free(wire);
}

/* Runs `ldpref ARGS` in a cols x rows tmux terminal until it exits; the
 * screen (malloc'd) or NULL. */
static char *on_terminal(int cols, int rows, const char *const *args)
{
    char bin[512];
    server_bin_path("ldpref", bin, sizeof bin);
    const char *argv[16] = {bin};
    int n = 1;
    for (; args[n - 1] && n < 15; n++)
        argv[n] = args[n - 1];
    argv[n] = NULL;
    const char *env[] = {env_server, env_token, "LANG=C.UTF-8", NULL};
    static int sessions;
    char dir[400];
    snprintf(dir, sizeof dir, "%s/term%d", srv.dir, sessions++); /* a tmux socket of its own */
    mkdir(dir, 0700);
    term_session t;
    if (term_start(&t, dir, cols, rows, env, argv) != 0) {
        check_record(0, __FILE__, __LINE__, "tmux starts");
        return NULL;
    }
    int found;
    char *screen = term_wait_for(&t, "[exited with status 0]", WAIT_MS, &found);
    check_record(found, __FILE__, __LINE__, "ldpref %s exits 0 on a terminal:\n%s", args[1],
                 screen ? screen : "");
    term_stop(&t);
    return screen;
}

/* Saves a screen as build/test-output/e2e_curve-NAME.txt. */
static void save_screen(const char *screen, const char *name)
{
    const char *build = getenv("LDPREF_BUILD") ? getenv("LDPREF_BUILD") : "build";
    char dir[512], path[700];
    snprintf(dir, sizeof dir, "%s/test-output", build);
    mkdir(dir, 0755);
    snprintf(path, sizeof path, "%s/e2e_curve-%s.txt", dir, name);
    if (screen)
        CHECK_INT(term_save(screen, path), 0);
}

static void test_terminal_output(int64_t run)
{
    if (!term_available()) {
        check_record(0, __FILE__, __LINE__, "tmux is installed (deploy/install-deps.sh)");
        return;
    }
    /* a list: a table with a rule under the header */
    const char *runs[] = {"admin", "runs", NULL};
    char *s = on_terminal(160, 20, runs);
    save_screen(s, "runs");
    CHECK(s && strstr(s, "run") && strstr(s, "status") && strstr(s, "optimizer") &&
          strstr(s, "\u2500\u2500") && strstr(s, "succeeded") && strstr(s, "cancelled"));
    CHECK(s && strchr(s, '{') == NULL);
    free(s);
    /* a narrow terminal: every line fits, long cells end in an ellipsis */
    s = on_terminal(60, 20, runs);
    save_screen(s, "runs-narrow");
    CHECK(s && strstr(s, "\u2026"));
    /* no line wrapped: the header, its rule and the two rows are lines 1-4 */
    const char *line = s;
    int lines_ok = 1;
    const char *const starts[] = {"run ", "\u2500\u2500\u2500 ", "  2 ", "  1 "};
    for (int k = 0; k < 4 && line; k++) {
        lines_ok &= strncmp(line, starts[k], strlen(starts[k])) == 0;
        line = strchr(line, '\n');
        line = line ? line + 1 : NULL;
    }
    CHECK(lines_ok);
    CHECK(s && strstr(s, "more columns"));
    free(s);
    /* a run with its curve: key-value lines, then the curve as a table */
    char id[32];
    snprintf(id, sizeof id, "%lld", (long long)run);
    const char *one[] = {"admin", "run", id, NULL};
    s = on_terminal(120, 200, one);
    save_screen(s, "run");
    CHECK(s && strstr(s, "succeeded") && strstr(s, "progress.objective"));
    const char *head = s ? strstr(s, "curve (") : NULL;
    head = head ? strchr(head, '\n') : NULL;
    char h[5][32] = {""};
    int words =
        head ? sscanf(head + 1, "%31s %31s %31s %31s %31s", h[0], h[1], h[2], h[3], h[4]) : 0;
    CHECK_INT(words, 5);
    CHECK(!strcmp(h[0], "iteration") && !strcmp(h[1], "evaluations") &&
          !strcmp(h[2], "objective") && !strcmp(h[3], "grad_norm") && !strcmp(h[4], "t_ms"));
    free(s);
    /* a single object: indented JSON */
    const char *schedule[] = {"admin", "schedule", NULL};
    s = on_terminal(100, 30, schedule);
    save_screen(s, "schedule");
    CHECK(s && strncmp(s, "{\n  \"", 5) == 0);
    free(s);
    /* asked for: jsonl on a terminal is still one line per run */
    const char *jsonl[] = {"admin", "runs", "--format", "jsonl", NULL};
    s = on_terminal(400, 10, jsonl);
    CHECK(s && strncmp(s, "{\"run\":", 7) == 0);
    free(s);
}

int main(void)
{
    const char *args[] = {"--train-threads", "1", NULL};
    if (server_start(&srv, args) != 0) {
        check_record(0, __FILE__, __LINE__, "server starts");
        return check_summary();
    }
    snprintf(env_server, sizeof env_server, "LDPREF_SERVER=%s", srv.url);
    snprintf(env_token, sizeof env_token, "LDPREF_OPERATOR_TOKEN=%s", srv.token);
    set_up_campaign();
    int64_t run = 0;
    int64_t version = test_lbfgs_curve(&run);
    test_live_curve();
    test_pipe_output(run, version);
    test_terminal_output(run);
    CHECK_INT(server_stop(&srv), 0);
    server_cleanup(&srv);
    return check_summary();
}
