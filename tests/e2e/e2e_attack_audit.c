/*
 * e2e_attack_audit.c — the audit log against someone who edits the
 * database behind the server's back, end to end: the real ldpref-server on
 * 127.0.0.1 with a real database file, operator actions through the real
 * ldpref CLI (campaign create, task upload, enrollment tokens, a retrain
 * and an activation, a corruption setting, a revocation, an export, a
 * request with a wrong token) and an annotator enrolling and labelling
 * through it too.
 *
 * Checked: one audit row per action, in order, with who (the token's id;
 * 0 for the refused request), what (action, params: the campaign's name,
 * the upload's size and BLAKE2b hash, the key revoked), the outcome; no
 * secret anywhere in the log (operator token, enrollment tokens, task
 * text); annotator requests are not recorded; `ldpref admin audit` in
 * json, jsonl and table form and its paging; the head the API reports is
 * the last one the server logged; `ldpref-server --verify-audit` on the
 * live database. Then the server is stopped and copies of its file are
 * tampered with through the sqlite3 shell: triggers dropped and a row's
 * params edited, a row deleted, two rows reordered, a row forged at the
 * end; --verify-audit exits 1 naming the first broken row of each, 0 on
 * the untouched copy. A restarted server goes on with the same chain.
 */
#include "check.h"
#include "ldpref.h"
#include "server_proc.h"

#include <jansson.h>
#include <sodium.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#define CAMPAIGN "audited"
#define N_TASKS 8
#define TASK_MARK "TASK-TEXT-SENTINEL"

static server_proc srv;
static char env_server[128], env_token[256];

/* The ldpref CLI with the server and the operator token (or another
 * token) in its environment; stdout into *out (may be NULL). */
static int cli_as(const char *token_env, char **out, const char *const *argv)
{
    const char *env[] = {env_server, token_env, NULL};
    return run_tool(argv, env, out);
}

static int cli(char **out, const char *const *argv)
{
    return cli_as(env_token, out, argv);
}

static json_t *cli_json(const char *const *argv)
{
    char *out = NULL;
    int rc = cli(&out, argv);
    json_t *j = out ? json_loads(out, 0, NULL) : NULL;
    check_record(rc == 0 && j != NULL, __FILE__, __LINE__, "ldpref %s %s: exit %d", argv[1],
                 argv[2], rc);
    free(out);
    return j;
}

/* Runs the sqlite3 shell on db with one SQL text; its exit status. */
static int sqlite_shell(const char *db, const char *sql)
{
    pid_t pid = fork();
    if (pid == 0) {
        execlp("sqlite3", "sqlite3", "-bail", db, sql, (char *)NULL);
        _exit(127);
    }
    int st = 0;
    if (pid < 0 || waitpid(pid, &st, 0) < 0 || !WIFEXITED(st))
        return -1;
    return WEXITSTATUS(st);
}

/* ldpref-server --verify-audit --db path: its exit status, stdout in out. */
static int verify(const char *path, char *out, size_t outlen)
{
    char dbarg[400];
    snprintf(dbarg, sizeof dbarg, "--db=%s", path);
    const char *argv[] = {"ldpref-server", "--verify-audit", dbarg, NULL};
    char *text = NULL;
    int rc = run_tool(argv, NULL, &text);
    snprintf(out, outlen, "%s", text ? text : "");
    free(text);
    return rc;
}

static const char *jstr(const json_t *o, const char *k)
{
    return json_string_value(json_object_get(o, k));
}

static int64_t jint(const json_t *o, const char *k)
{
    return json_integer_value(json_object_get(o, k));
}

static char *slurp(const char *path, size_t *len)
{
    FILE *f = fopen(path, "rb");
    if (f == NULL)
        return NULL;
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *b = malloc((size_t)n + 1);
    if (b && fread(b, 1, (size_t)n, f) != (size_t)n) {
        free(b);
        b = NULL;
    }
    if (b)
        b[n] = '\0';
    fclose(f);
    if (len)
        *len = (size_t)n;
    return b;
}

/* ---- the operator's actions ---- */

static char tasks_path[400], key_path[400], key_arg[420], export_path[400];
static char *enroll_tokens[2];
static char pubkey[128];
static int64_t model_version;

static void write_tasks(void)
{
    snprintf(tasks_path, sizeof tasks_path, "%s/tasks.jsonl", srv.dir);
    FILE *f = fopen(tasks_path, "w");
    for (int i = 0; f && i < N_TASKS; i++)
        fprintf(f,
                "{\"id\":\"t%d\",\"prompt\":\"%s %d\",\"responses\":[\"first\",\"second\"],"
                "\"features\":[[1,%d,0.5],[0,%d,0.25]]}\n",
                i, TASK_MARK, i, i % 3, (i + 1) % 3);
    if (f)
        fclose(f);
}

/* An annotator enrolls with the first token and labels every task. */
static void annotate(void)
{
    snprintf(key_path, sizeof key_path, "%s/annotator.key", srv.dir);
    snprintf(key_arg, sizeof key_arg, "--key=%s", key_path);
    const char *keygen[] = {"ldpref", key_arg, "keygen", NULL};
    CHECK_INT(cli(NULL, keygen), 0);
    const char *enroll[] = {"ldpref", key_arg, "enroll", enroll_tokens[0], NULL};
    CHECK_INT(cli(NULL, enroll), 0);
    const char *pk[] = {"ldpref", key_arg, "pubkey", NULL};
    char *out = NULL;
    CHECK_INT(cli(&out, pk), 0);
    snprintf(pubkey, sizeof pubkey, "%s", out ? out : "");
    pubkey[strcspn(pubkey, "\r\n")] = '\0';
    free(out);
    const char *next[] = {"ldpref", key_arg, "next", "--count", "8", NULL};
    CHECK_INT(cli(&out, next), 0);
    int answered = 0;
    for (char *line = out ? strtok(out, "\n") : NULL; line; line = strtok(NULL, "\n")) {
        json_t *t = json_loads(line, 0, NULL);
        char id[32];
        snprintf(id, sizeof id, "%lld", (long long)jint(t, "task_id"));
        json_decref(t);
        const char *answer[] = {"ldpref", key_arg, "answer", id, answered % 2 ? "a" : "b", NULL};
        answered += cli(NULL, answer) == 0;
    }
    free(out);
    CHECK_INT(answered, N_TASKS);
}

/* The actions, in order; the audit rows they must leave (action, status). */
static const struct expect {
    const char *action;
    int status;
} EXPECTED[] = {
    {"POST /v1/campaigns", 201},         {"POST /v1/tasks", 200},
    {"POST /v1/enrollment-tokens", 201}, {"POST /v1/retrain", 202},
    {"POST /v1/models/activate", 200},   {"PUT /v1/corruption", 200},
    {"POST /v1/annotators/revoke", 200}, {"GET /v1/export", 200},
    {"POST /v1/campaigns", 401},
};
#define N_EXPECTED (sizeof EXPECTED / sizeof EXPECTED[0])

static void operator_actions(void)
{
    const char *create[] = {"ldpref", "admin", "campaign-create", CAMPAIGN, "--epsilon-max",
                            "4",      NULL};
    json_decref(cli_json(create));
    write_tasks();
    const char *load[] = {"ldpref",     "admin",  "tasks-load", tasks_path,
                          "--campaign", CAMPAIGN, NULL};
    json_decref(cli_json(load));
    const char *tokens[] = {"ldpref", "admin",      "enroll-token", "--count",
                            "2",      "--campaign", CAMPAIGN,       NULL};
    json_t *t = cli_json(tokens);
    for (int i = 0; i < 2; i++) {
        const char *s = json_string_value(json_array_get(json_object_get(t, "tokens"), (size_t)i));
        enroll_tokens[i] = strdup(s ? s : "missing");
    }
    json_decref(t);
    annotate();
    const char *retrain[] = {"ldpref", "admin",      "retrain", "--campaign",    CAMPAIGN, "--l2",
                             "1",      "--features", "dense",   "--no-activate", "--wait", NULL};
    json_t *run = cli_json(retrain);
    model_version = jint(run, "model_version");
    CHECK(model_version > 0);
    json_decref(run);
    char v[32];
    snprintf(v, sizeof v, "%lld", (long long)model_version);
    const char *activate[] = {"ldpref", "admin", "activate", v, NULL};
    json_decref(cli_json(activate));
    const char *corruption[] = {"ldpref",  "admin", "corruption", CAMPAIGN,
                                "--alpha", "0.125", NULL};
    json_decref(cli_json(corruption));
    const char *revoke[] = {"ldpref", "admin", "revoke", pubkey, NULL};
    json_decref(cli_json(revoke));
    snprintf(export_path, sizeof export_path, "%s/export.jsonl", srv.dir);
    const char *export[] = {"ldpref", "admin", "export",    "--campaign",
                            CAMPAIGN, "--out", export_path, NULL};
    CHECK_INT(cli(NULL, export), 0);
    /* A wrong token: refused, recorded as nobody's. */
    const char *again[] = {"ldpref", "admin", "campaign-create", "other", NULL};
    CHECK_INT(cli_as("LDPREF_OPERATOR_TOKEN=op_not-a-real-token", NULL, again),
              LDPREF_EUNAUTHORIZED);
}

/* ---- the log as the API and the CLI show it ---- */

static int64_t first_row; /* the first row of the actions (after the bootstrap token's) */
static json_t *audit;     /* admin audit --format json */

static void check_rows(void)
{
    const char *all[] = {"ldpref", "--format", "json", "admin", "audit", NULL};
    audit = cli_json(all);
    json_t *rows = json_object_get(audit, "entries");
    /* Row 1: the first operator token, minted when the database was made. */
    CHECK_STR(jstr(json_array_get(rows, 0), "action"), "ldpref-server first operator token");
    first_row = 2;
    CHECK_INT(json_array_size(rows), 1 + N_EXPECTED);
    CHECK_INT(jint(audit, "head_id"), 1 + (int64_t)N_EXPECTED);
    int64_t who = jint(json_array_get(rows, 1), "token_id");
    for (size_t i = 0; i < N_EXPECTED; i++) {
        json_t *r = json_array_get(rows, i + 1);
        CHECK_STR(jstr(r, "action"), EXPECTED[i].action);
        CHECK_INT(jint(r, "status"), EXPECTED[i].status);
        CHECK_INT(jint(r, "id"), (int64_t)i + 2);
        /* Every accepted action was the one token's; the refused one nobody's. */
        CHECK_INT(jint(r, "token_id"), EXPECTED[i].status == 401 ? 0 : who);
        CHECK(EXPECTED[i].status == 401 ? strcmp(jstr(r, "error"), "unauthorized") == 0
                                        : json_is_null(json_object_get(r, "error")));
        /* Each row names the one before it. */
        CHECK_STR(jstr(r, "prev_hash"), jstr(json_array_get(rows, i), "hash"));
    }
    CHECK_STR(jstr(audit, "head_hash"), jstr(json_array_get(rows, N_EXPECTED), "hash"));
    /* What was done, without secrets. */
    json_t *p = json_object_get(json_array_get(rows, 1), "params");
    CHECK_STR(jstr(json_object_get(p, "body"), "name"), CAMPAIGN);
    p = json_object_get(json_array_get(rows, 2), "params");
    size_t len = 0;
    char *file = slurp(tasks_path, &len);
    uint8_t h[32];
    char hex[65];
    crypto_generichash(h, 32, (const unsigned char *)file, len, NULL, 0);
    sodium_bin2hex(hex, sizeof hex, h, 32);
    free(file);
    CHECK_INT(jint(json_object_get(p, "body"), "bytes"), (int64_t)len);
    CHECK_STR(jstr(json_object_get(p, "body"), "blake2b"), hex);
    CHECK_STR(jstr(json_object_get(p, "query"), "campaign"), CAMPAIGN);
    p = json_object_get(json_array_get(rows, 3), "params");
    CHECK_INT(jint(json_object_get(p, "body"), "count"), 2);
    p = json_object_get(json_array_get(rows, 5), "params");
    CHECK_INT(jint(json_object_get(p, "body"), "version"), model_version);
    p = json_object_get(json_array_get(rows, 6), "params");
    CHECK(json_real_value(json_object_get(json_object_get(p, "body"), "alpha")) == 0.125);
    p = json_object_get(json_array_get(rows, 7), "params");
    CHECK_STR(jstr(json_object_get(p, "body"), "key"), pubkey);
    p = json_object_get(json_array_get(rows, 8), "params");
    CHECK_STR(jstr(json_object_get(p, "query"), "campaign"), CAMPAIGN);
    char *text = json_dumps(audit, 0);
    const char *op = srv.token;
    CHECK(text && strstr(text, op) == NULL);
    CHECK(text && strstr(text, enroll_tokens[0]) == NULL && strstr(text, enroll_tokens[1]) == NULL);
    CHECK(text && strstr(text, TASK_MARK) == NULL);
    /* The annotator's enrollment, tasks and labels are not operator actions. */
    CHECK(text && strstr(text, "/v1/labels") == NULL && strstr(text, "/v1/annotators\"") == NULL &&
          strstr(text, "/v1/tasks/next") == NULL);
    free(text);

    /* The server logged each new head: the last one is the API's head. */
    char *log = slurp(srv.log, NULL);
    char want[120];
    snprintf(want, sizeof want, "id=%lld head=%s", (long long)jint(audit, "head_id"),
             jstr(audit, "head_hash"));
    CHECK(log && strstr(log, want) != NULL);
    CHECK(log && strstr(log, op) == NULL && strstr(log, enroll_tokens[0]) == NULL);
    free(log);
}

static void check_cli_forms(void)
{
    /* jsonl: one row per line. */
    const char *jsonl[] = {"ldpref", "--format", "jsonl", "admin", "audit", NULL};
    char *out = NULL;
    CHECK_INT(cli(&out, jsonl), 0);
    int lines = 0;
    for (char *p = out; p && *p; p++)
        lines += *p == '\n';
    CHECK_INT(lines, 1 + (int)N_EXPECTED);
    CHECK(out && strncmp(out, "{\"id\":1,", 8) == 0);
    free(out);
    /* A table with the chosen columns. */
    const char *table[] = {"ldpref", "--format", "table", "admin", "audit", NULL};
    CHECK_INT(cli(&out, table), 0);
    CHECK(out && strstr(out, "action") && strstr(out, "token_id") && strstr(out, "status"));
    CHECK(out && strstr(out, "POST /v1/annotators/revoke") && strstr(out, "unauthorized"));
    free(out);
    /* Paging. */
    const char *page[] = {"ldpref", "admin", "audit", "--after", "3", "--limit", "2", NULL};
    json_t *j = cli_json(page);
    json_t *rows = json_object_get(j, "entries");
    CHECK_INT(json_array_size(rows), 2);
    CHECK_INT(jint(json_array_get(rows, 0), "id"), 4);
    CHECK_INT(jint(json_array_get(rows, 1), "id"), 5);
    json_decref(j);
    const char *bad[] = {"ldpref", "admin", "audit", "--limit", "0", NULL};
    CHECK(cli(NULL, bad) != 0);
}

/* ---- tampering ---- */

static void tampered(const char *name, const char *sql, int64_t bad_row, const char *word)
{
    char path[400], out[1024];
    snprintf(path, sizeof path, "%s/%s", srv.dir, name);
    char backup[500];
    snprintf(backup, sizeof backup, ".backup '%s'", path);
    CHECK_INT(sqlite_shell(srv.db, backup), 0);
    CHECK_INT(sqlite_shell(path, sql), 0);
    int rc = verify(path, out, sizeof out);
    char want[64];
    snprintf(want, sizeof want, "audit chain broken at row %lld:", (long long)bad_row);
    check_record(rc == 1 && strstr(out, want) != NULL && strstr(out, word) != NULL, __FILE__,
                 __LINE__, "%s: exit %d, \"%s\" (want \"%s\" ... \"%s\")", name, rc, out, want,
                 word);
}

static void check_tampering(void)
{
    char out[1024], want[200];
    snprintf(want, sizeof want, "audit chain intact: %lld rows, head %s\n",
             (long long)jint(audit, "head_id"), jstr(audit, "head_hash"));
    /* Live, while the server runs. */
    CHECK_INT(verify(srv.db, out, sizeof out), 0);
    CHECK_STR(out, want);
    /* The triggers hold against the shell too. */
    CHECK(sqlite_shell(srv.db, "DELETE FROM audit WHERE id = 3") != 0);
    CHECK(server_stop(&srv) == 0);

    /* The campaign's name changed in its row (the triggers dropped first). */
    tampered("edited.db",
             "DROP TRIGGER audit_no_update; DROP TRIGGER audit_no_delete; "
             "UPDATE audit SET params = replace(params, '" CAMPAIGN "', 'innocent') WHERE id = 2",
             2, "edited");
    /* The task upload's row deleted. */
    tampered("deleted.db", "DROP TRIGGER audit_no_delete; DELETE FROM audit WHERE id = 3", 4,
             "missing");
    /* The retrain and the activation trade places. */
    tampered("reordered.db",
             "DROP TRIGGER audit_no_update; UPDATE audit SET id = -5 WHERE id = 5; "
             "UPDATE audit SET id = 5 WHERE id = 6; UPDATE audit SET id = 6 WHERE id = -5",
             5, "does not chain");
    /* A forged action appended after the head, chained to it, its hash
     * made up. */
    char forged[400];
    snprintf(forged, sizeof forged,
             "INSERT INTO audit SELECT id + 1, at_ms, 0, 'POST /v1/campaigns', '{}', 201, '', "
             "hash, zeroblob(32) FROM audit WHERE id = %lld",
             (long long)jint(audit, "head_id"));
    tampered("inserted.db", forged, jint(audit, "head_id") + 1, "edited");
    /* A copy nobody touched. */
    char path[400], backup[500];
    snprintf(path, sizeof path, "%s/untouched.db", srv.dir);
    snprintf(backup, sizeof backup, ".backup '%s'", path);
    CHECK_INT(sqlite_shell(srv.db, backup), 0);
    CHECK_INT(verify(path, out, sizeof out), 0);
    CHECK_STR(out, want);
    CHECK_INT(verify(srv.db, out, sizeof out), 0);
    CHECK_STR(out, want);
    /* No database: unreadable, and not created. */
    snprintf(path, sizeof path, "%s/none.db", srv.dir);
    CHECK_INT(verify(path, out, sizeof out), 2);
    struct stat st;
    CHECK(stat(path, &st) != 0);
}

/* The same on PostgreSQL, where the database is no file to copy: each
 * tampering is made on the database itself and undone again. */
#define EDIT_ROW_2(from, to)                                                                       \
    "ALTER TABLE audit DISABLE TRIGGER audit_no_update; "                                          \
    "UPDATE audit SET params = replace(params, '" from "', '" to "') WHERE id = 2; "               \
    "ALTER TABLE audit ENABLE TRIGGER audit_no_update"

static void verify_broken(const char *what, const char *want)
{
    char out[1024];
    int rc = verify(srv.db, out, sizeof out);
    check_record(rc == 1 && strstr(out, want) != NULL, __FILE__, __LINE__,
                 "%s: exit %d, \"%s\" (want \"%s\")", what, rc, out, want);
}

static void check_tampering_pg(void)
{
    char out[1024], want[200];
    snprintf(want, sizeof want, "audit chain intact: %lld rows, head %s\n",
             (long long)jint(audit, "head_id"), jstr(audit, "head_hash"));
    CHECK_INT(verify(srv.db, out, sizeof out), 0);
    CHECK_STR(out, want);
    /* the triggers refuse another client too */
    CHECK(server_db_exec(&srv, "DELETE FROM audit WHERE id = 3") < 0);
    CHECK(server_db_exec(&srv, "UPDATE audit SET status = 200 WHERE id = 3") < 0);
    CHECK(server_stop(&srv) == 0);
    /* a row edited behind disabled triggers, then put back */
    CHECK_INT(server_db_exec(&srv, EDIT_ROW_2(CAMPAIGN, "innocent")), 0);
    verify_broken("edited", "audit chain broken at row 2:");
    CHECK_INT(server_db_exec(&srv, EDIT_ROW_2("innocent", CAMPAIGN)), 0);
    CHECK_INT(verify(srv.db, out, sizeof out), 0);
    /* a trigger left disabled */
    CHECK_INT(server_db_exec(&srv, "ALTER TABLE audit DISABLE TRIGGER audit_no_delete"), 0);
    verify_broken("disabled", "trigger audit_no_delete is missing or altered");
    CHECK_INT(server_db_exec(&srv, "ALTER TABLE audit ENABLE TRIGGER audit_no_delete"), 0);
    /* the triggers' function made to let every change through */
    CHECK_INT(server_db_exec(&srv, "CREATE OR REPLACE FUNCTION lp_refuse() RETURNS trigger "
                                   "LANGUAGE plpgsql AS $$ BEGIN RETURN NEW; END; $$"),
              0);
    verify_broken("function replaced", "trigger audit_no_update is missing or altered");
    CHECK_INT(server_db_exec(&srv, "CREATE OR REPLACE FUNCTION lp_refuse() RETURNS trigger "
                                   "LANGUAGE plpgsql AS $$\nBEGIN\n    RAISE EXCEPTION '%', "
                                   "TG_ARGV[0] USING ERRCODE = 'integrity_constraint_violation';"
                                   "\nEND;\n$$"),
              0);
    /* a trigger dropped and made again differently (after instead of before) */
    CHECK_INT(server_db_exec(&srv, "DROP TRIGGER audit_no_update ON audit; CREATE TRIGGER "
                                   "audit_no_update AFTER UPDATE ON audit FOR EACH ROW EXECUTE "
                                   "FUNCTION lp_refuse('audit rows are append-only')"),
              0);
    verify_broken("redefined", "trigger audit_no_update is missing or altered");
    CHECK_INT(server_db_exec(&srv, "DROP TRIGGER audit_no_update ON audit; CREATE TRIGGER "
                                   "audit_no_update BEFORE UPDATE ON audit FOR EACH ROW EXECUTE "
                                   "FUNCTION lp_refuse('audit rows are append-only')"),
              0);
    CHECK_INT(verify(srv.db, out, sizeof out), 0);
    CHECK_STR(out, want);
    /* no such database: unreadable */
    char none[sizeof srv.db + 8];
    snprintf(none, sizeof none, "%s", srv.db);
    char *name = strstr(none, "/e2e_");
    if (name != NULL)
        memcpy(name + 1, "none", 4);
    CHECK_INT(verify(none, out, sizeof out), 2);
}

/* A restarted server appends after the same head. */
static void check_restart(void)
{
    CHECK(server_restart(&srv, NULL) == 0);
    snprintf(env_server, sizeof env_server, "LDPREF_SERVER=%s", srv.url);
    const char *create[] = {"ldpref", "admin", "campaign-create", "after-restart", NULL};
    json_decref(cli_json(create));
    char after[32];
    snprintf(after, sizeof after, "%lld", (long long)jint(audit, "head_id"));
    const char *page[] = {"ldpref", "admin", "audit", "--after", after, NULL};
    json_t *j = cli_json(page);
    json_t *r = json_array_get(json_object_get(j, "entries"), 0);
    CHECK_INT(json_array_size(json_object_get(j, "entries")), 1);
    CHECK_INT(jint(r, "id"), jint(audit, "head_id") + 1);
    CHECK_STR(jstr(r, "prev_hash"), jstr(audit, "head_hash"));
    json_decref(j);
    CHECK(server_stop(&srv) == 0);
    char out[1024];
    CHECK_INT(verify(srv.db, out, sizeof out), 0);
}

int main(void)
{
    if (sodium_init() < 0 || server_start(&srv, NULL) != 0) {
        CHECK(!"server started");
        return check_summary();
    }
    snprintf(env_server, sizeof env_server, "LDPREF_SERVER=%s", srv.url);
    snprintf(env_token, sizeof env_token, "LDPREF_OPERATOR_TOKEN=%s", srv.token);
    operator_actions();
    check_rows();
    check_cli_forms();
    if (server_db_is_postgresql(&srv))
        check_tampering_pg();
    else
        check_tampering();
    check_restart();
    json_decref(audit);
    free(enroll_tokens[0]);
    free(enroll_tokens[1]);
    server_cleanup(&srv);
    return check_summary();
}
