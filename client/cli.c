/*
 * cli.c — `ldpref`, the command-line front end of libldpref for annotators
 * and operators. Every command is a thin wrapper over the public API in
 * ldpref.h (this file includes nothing else from the project), prints JSON
 * (one object per line) on stdout, human messages on stderr, and exits with
 * the library's error code number (0 on success).
 *
 * Global options come from one table (name, environment variable, help),
 * with precedence defaults < environment < flags; they may appear before or
 * after the command. `ldpref --help` and `ldpref CMD --help` print help.
 */
#include "ldpref.h"

#include <errno.h>
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

/* ---- global options ---------------------------------------------------- */

enum { G_SERVER, G_KEY, G_LEDGER, G_EPS_CAP, G_EPS_TOTAL, G_TOKEN, G_TIMEOUT, G_CA, G_COUNT };

static const struct gopt {
    const char *flag, *env, *arg, *help;
} GOPTS[G_COUNT] = {
    [G_SERVER] = {"--server", "LDPREF_SERVER", "URL", "server URL (default http://127.0.0.1:8080)"},
    [G_KEY] = {"--key", "LDPREF_KEY", "PATH", "secret key file (default ~/.config/ldpref/key)"},
    [G_LEDGER] = {"--ledger", "LDPREF_LEDGER", "PATH", "local ledger (default KEY.ledger)"},
    [G_EPS_CAP] = {"--epsilon-cap", "LDPREF_EPSILON_CAP", "X",
                   "own cap on one label's epsilon (default 1; 'inf' allows unprivatized)"},
    [G_EPS_TOTAL] = {"--epsilon-total-cap", "LDPREF_EPSILON_TOTAL_CAP", "X",
                     "own cap on the total epsilon spent on this device (default 1000)"},
    [G_TOKEN] = {"--token", "LDPREF_OPERATOR_TOKEN", "TOKEN",
                 "operator bearer token (prefer the environment: flags show in ps)"},
    [G_TIMEOUT] = {"--timeout", "LDPREF_TIMEOUT", "SECONDS", "request timeout (default 30)"},
    [G_CA] = {"--ca-file", "LDPREF_CA_FILE", "PATH", "CA bundle for https servers"},
};

/* A command's own flags: name, takes a value, help. */
struct cflag {
    const char *flag, *arg, *help;
};

struct cmd;
typedef int (*cmd_fn)(const struct cmd *cmd, ldpref_client *c, char **pos, int npos);

struct cmd {
    const char *name, *usage, *summary;
    int min_pos, max_pos;
    int needs; /* 0: nothing, 1: key (annotator), 2: operator */
    const struct cflag *flags;
    cmd_fn run;
};

static const char *g_val[G_COUNT];
/* Command flags seen: parallel to cmd->flags. */
static const char *c_val[8];
static int c_seen[8];

static int fail(int code, ldpref_client *c, const char *what)
{
    fprintf(stderr, "ldpref: %s: %s: %s\n", what, ldpref_error_name(code),
            c && ldpref_errmsg(c)[0] ? ldpref_errmsg(c) : ldpref_strerror(code));
    return code;
}

static int usage_error(const char *fmt, const char *arg)
{
    fprintf(stderr, "ldpref: ");
    fprintf(stderr, fmt, arg);
    fprintf(stderr, " (see ldpref --help)\n");
    return LDPREF_EINVALID_ARGUMENT;
}

/* Prints a JSON value as one line. Takes the reference. */
static void print_json(json_t *v)
{
    char *s = json_dumps(v, JSON_COMPACT | JSON_ENCODE_ANY);
    if (s)
        puts(s);
    free(s);
    json_decref(v);
}

static json_t *eps_json(double e)
{
    return isinf(e) ? json_null() : json_real(e);
}

static int parse_double(const char *s, double *out)
{
    char *end;
    errno = 0;
    double v = strtod(s, &end);
    if (errno != 0 || end == s || *end != '\0' || isnan(v))
        return -1;
    *out = v;
    return 0;
}

static int parse_long(const char *s, long lo, long hi, long *out)
{
    char *end;
    errno = 0;
    long v = strtol(s, &end, 10);
    if (errno != 0 || end == s || *end != '\0' || v < lo || v > hi)
        return -1;
    *out = v;
    return 0;
}

static const char *cflag_value(const struct cmd *cmd, const char *name)
{
    for (int i = 0; cmd->flags && cmd->flags[i].flag; i++)
        if (strcmp(cmd->flags[i].flag, name) == 0)
            return c_seen[i] ? c_val[i] : NULL;
    return NULL;
}

/* ---- annotator commands -------------------------------------------------- */

static int make_parent_dir(const char *path)
{
    char dir[LDPREF_PATH_MAX + 1];
    snprintf(dir, sizeof dir, "%s", path);
    for (char *p = dir + 1; *p; p++) {
        if (*p != '/')
            continue;
        *p = '\0';
        if (mkdir(dir, 0700) != 0 && errno != EEXIST)
            return -1;
        *p = '/';
    }
    return 0;
}

static int cmd_keygen(const struct cmd *cmd, ldpref_client *c, char **pos, int npos)
{
    char pub[LDPREF_KEY_B64_SIZE];
    const char *key = g_val[G_KEY];
    if (make_parent_dir(key) != 0)
        fprintf(stderr, "ldpref: cannot create the directory of %s: %s\n", key, strerror(errno));
    int rc = ldpref_keygen(key, pub);
    if (rc != LDPREF_OK) {
        fprintf(stderr, "ldpref: keygen: %s: %s (an existing key is never overwritten)\n",
                ldpref_error_name(rc), key);
        return rc;
    }
    print_json(json_pack("{s:s, s:s}", "key", pub, "path", key));
    return 0;
}

static int cmd_pubkey(const struct cmd *cmd, ldpref_client *c, char **pos, int npos)
{
    char pub[LDPREF_KEY_B64_SIZE];
    int rc = ldpref_public_key(c, pub);
    if (rc != LDPREF_OK)
        return fail(rc, c, "pubkey");
    puts(pub);
    return 0;
}

static int cmd_enroll(const struct cmd *cmd, ldpref_client *c, char **pos, int npos)
{
    ldpref_enrollment e;
    int rc = ldpref_enroll(c, pos[0], &e);
    if (rc != LDPREF_OK)
        return fail(rc, c, "enroll");
    print_json(json_pack("{s:I, s:s, s:s, s:o}", "annotator_id", (json_int_t)e.annotator_id,
                         "pseudonym", e.pseudonym, "campaign", e.campaign, "epsilon_budget",
                         eps_json(e.epsilon_budget)));
    return 0;
}

static int cmd_next(const struct cmd *cmd, ldpref_client *c, char **pos, int npos)
{
    long count = 1;
    const char *v = cflag_value(cmd, "--count");
    if (v && parse_long(v, 1, 1000, &count) != 0)
        return usage_error("--count must be 1..1000, not %s", v);
    ldpref_task *tasks = NULL;
    size_t n = 0;
    int rc = ldpref_next_tasks(c, (int)count, &tasks, &n);
    if (rc != LDPREF_OK)
        return fail(rc, c, "next");
    for (size_t i = 0; i < n; i++) {
        const ldpref_task *t = &tasks[i];
        print_json(json_pack("{s:I, s:s, s:s, s:s, s:s, s:o, s:o, s:o}", "task_id",
                             (json_int_t)t->task_id, "campaign", t->campaign, "prompt", t->prompt,
                             "a", t->a, "b", t->b, "epsilon", eps_json(t->epsilon_proposed),
                             "epsilon_min", eps_json(t->epsilon_min), "epsilon_max",
                             eps_json(t->epsilon_max)));
    }
    ldpref_tasks_free(tasks, n);
    return 0;
}

static json_t *receipt_json(const ldpref_receipt *r)
{
    return json_pack("{s:I, s:I, s:i, s:o, s:I, s:b}", "label_id", (json_int_t)r->label_id,
                     "task_id", (json_int_t)r->task_id, "z", r->z, "epsilon", eps_json(r->epsilon),
                     "received_at", (json_int_t)r->received_at, "resent", r->resent);
}

static int parse_choice(const char *s)
{
    if (strcmp(s, "a") == 0 || strcmp(s, "A") == 0)
        return 0;
    if (strcmp(s, "b") == 0 || strcmp(s, "B") == 0)
        return 1;
    return -1;
}

static int cmd_answer(const struct cmd *cmd, ldpref_client *c, char **pos, int npos)
{
    long id;
    if (parse_long(pos[0], 1, __LONG_MAX__, &id) != 0)
        return usage_error("TASK_ID must be a positive integer, not %s", pos[0]);
    int prefer_b = parse_choice(pos[1]);
    if (prefer_b < 0)
        return usage_error("the choice must be a or b, not %s", pos[1]);
    ldpref_receipt r;
    int rc = ldpref_answer_id(c, id, prefer_b, &r);
    if (rc != LDPREF_OK)
        return fail(rc, c, "answer");
    print_json(receipt_json(&r));
    return 0;
}

#define CLI_BATCH_MAX 100000

static int cmd_answer_batch(const struct cmd *cmd, ldpref_client *c, char **pos, int npos)
{
    FILE *f = strcmp(pos[0], "-") == 0 ? stdin : fopen(pos[0], "r");
    if (f == NULL) {
        fprintf(stderr, "ldpref: %s: %s\n", pos[0], strerror(errno));
        return LDPREF_EIO;
    }
    ldpref_batch_item *items = NULL;
    size_t n = 0, cap = 0, lineno = 0;
    char *line = NULL;
    size_t lcap = 0;
    int rc = LDPREF_OK;
    while (getline(&line, &lcap, f) > 0) {
        lineno++;
        if (strspn(line, " \t\r\n") == strlen(line))
            continue;
        json_error_t jerr;
        json_t *j = json_loads(line, JSON_REJECT_DUPLICATES, &jerr);
        json_t *id = json_object_get(j, "task_id");
        const char *choice = json_string_value(json_object_get(j, "choice"));
        int prefer_b = choice ? parse_choice(choice) : -1;
        if (!json_is_integer(id) || json_integer_value(id) < 1 || prefer_b < 0 ||
            json_object_size(j) != 2) {
            fprintf(stderr,
                    "ldpref: %s line %zu: expected {\"task_id\": N, \"choice\": \"a\"|\"b\"}\n",
                    pos[0], lineno);
            json_decref(j);
            rc = LDPREF_EINVALID_ARGUMENT;
            break;
        }
        if (n == cap) {
            if (n >= CLI_BATCH_MAX) {
                fprintf(stderr, "ldpref: more than %d lines\n", CLI_BATCH_MAX);
                json_decref(j);
                rc = LDPREF_EBATCH_TOO_LARGE;
                break;
            }
            cap = cap ? 2 * cap : 64;
            ldpref_batch_item *grown = realloc(items, cap * sizeof *items);
            if (grown == NULL) {
                json_decref(j);
                rc = LDPREF_ENO_MEMORY;
                break;
            }
            items = grown;
        }
        memset(&items[n], 0, sizeof items[n]);
        items[n].task_id = json_integer_value(id);
        items[n].prefer_b = prefer_b;
        n++;
        json_decref(j);
    }
    free(line);
    if (f != stdin)
        fclose(f);
    if (rc == LDPREF_OK)
        rc = ldpref_answer_batch(c, items, n);
    int first_item_error = LDPREF_OK;
    if (rc == LDPREF_OK || rc == LDPREF_ENETWORK) {
        for (size_t i = 0; i < n; i++) {
            if (items[i].error == LDPREF_OK) {
                print_json(receipt_json(&items[i].receipt));
                continue;
            }
            if (first_item_error == LDPREF_OK)
                first_item_error = items[i].error;
            print_json(json_pack("{s:I, s:s, s:s}", "task_id", (json_int_t)items[i].task_id,
                                 "error", ldpref_error_name(items[i].error), "message",
                                 items[i].message));
        }
    }
    free(items);
    if (rc != LDPREF_OK)
        return rc == LDPREF_EINVALID_ARGUMENT ? rc : fail(rc, c, "answer-batch");
    return first_item_error;
}

static int cmd_resend(const struct cmd *cmd, ldpref_client *c, char **pos, int npos)
{
    size_t sent = 0, pending = 0;
    int rc = ldpref_resend_pending(c, &sent, &pending);
    print_json(json_pack("{s:I, s:I}", "sent", (json_int_t)sent, "pending", (json_int_t)pending));
    return rc == LDPREF_OK ? 0 : fail(rc, c, "resend");
}

static int cmd_budget(const struct cmd *cmd, ldpref_client *c, char **pos, int npos)
{
    ldpref_budget b;
    int rc = ldpref_budget_get(c, &b);
    if (rc != LDPREF_OK)
        return fail(rc, c, "budget");
    double left = b.max_epsilon_total - b.spent;
    print_json(json_pack("{s:o, s:o, s:o, s:o, s:I, s:I}", "spent", eps_json(b.spent),
                         "max_epsilon_total", eps_json(b.max_epsilon_total),
                         "max_epsilon_per_label", eps_json(b.max_epsilon_per_label), "remaining",
                         isnan(left) ? json_null() : eps_json(left > 0 ? left : 0), "labels",
                         (json_int_t)b.labels, "pending", (json_int_t)b.pending));
    return 0;
}

/* ---- operator commands ------------------------------------------------------ */

static int print_text(int rc, ldpref_client *c, char *json, const char *what)
{
    if (rc != LDPREF_OK)
        return fail(rc, c, what);
    if (json)
        puts(json);
    ldpref_free(json);
    return 0;
}

static int cmd_tasks_load(const struct cmd *cmd, ldpref_client *c, char **pos, int npos)
{
    char *json = NULL;
    int rc = ldpref_admin_tasks_load(c, pos[0], cflag_value(cmd, "--campaign"), &json);
    return print_text(rc, c, json, "admin tasks-load");
}

static int cmd_enroll_token(const struct cmd *cmd, ldpref_client *c, char **pos, int npos)
{
    long count = 1;
    const char *v = cflag_value(cmd, "--count");
    if (v && parse_long(v, 1, 1000, &count) != 0)
        return usage_error("--count must be 1..1000, not %s", v);
    char *json = NULL;
    int rc = ldpref_admin_enrollment_tokens(c, cflag_value(cmd, "--campaign"), (int)count, &json);
    return print_text(rc, c, json, "admin enroll-token");
}

static int cmd_campaign_create(const struct cmd *cmd, ldpref_client *c, char **pos, int npos)
{
    ldpref_campaign s;
    ldpref_campaign_init(&s);
    s.name = pos[0];
    static const struct {
        const char *flag;
        size_t off;
    } nums[] = {{"--epsilon-min", offsetof(ldpref_campaign, epsilon_min)},
                {"--epsilon-max", offsetof(ldpref_campaign, epsilon_max)},
                {"--budget", offsetof(ldpref_campaign, epsilon_budget)},
                {"--epsilon-default", offsetof(ldpref_campaign, epsilon_default)}};
    for (size_t i = 0; i < sizeof nums / sizeof nums[0]; i++) {
        const char *v = cflag_value(cmd, nums[i].flag);
        if (v && parse_double(v, (double *)((char *)&s + nums[i].off)) != 0)
            return usage_error("not a number: %s", v);
    }
    s.allow_infinite = cflag_value(cmd, "--allow-infinite") != NULL;
    char *json = NULL;
    int rc = ldpref_admin_campaign_create(c, &s, &json);
    return print_text(rc, c, json, "admin campaign-create");
}

static int cmd_revoke(const struct cmd *cmd, ldpref_client *c, char **pos, int npos)
{
    int rc = ldpref_admin_revoke(c, pos[0]);
    if (rc != LDPREF_OK)
        return fail(rc, c, "admin revoke");
    print_json(json_pack("{s:s, s:b}", "key", pos[0], "revoked", 1));
    return 0;
}

static int cmd_stats(const struct cmd *cmd, ldpref_client *c, char **pos, int npos)
{
    char *json = NULL;
    int rc = ldpref_admin_stats(c, &json);
    return print_text(rc, c, json, "admin stats");
}

static int cmd_export(const struct cmd *cmd, ldpref_client *c, char **pos, int npos)
{
    const char *out = cflag_value(cmd, "--out"), *campaign = cflag_value(cmd, "--campaign");
    int rc = out && strcmp(out, "-") != 0 ? ldpref_admin_export_path(c, campaign, out)
                                          : ldpref_admin_export(c, campaign, stdout);
    return rc == LDPREF_OK ? 0 : fail(rc, c, "admin export");
}

/* ---- command table ------------------------------------------------------------ */

static const struct cflag F_COUNT[] = {{"--count", "N", "how many (1..1000, default 1)"},
                                       {NULL, NULL, NULL}};
static const struct cflag F_CAMPAIGN[] = {{"--campaign", "NAME", "campaign (default: default)"},
                                          {NULL, NULL, NULL}};
static const struct cflag F_TOKENS[] = {{"--count", "N", "how many tokens (1..1000, default 1)"},
                                        {"--campaign", "NAME", "campaign (default: default)"},
                                        {NULL, NULL, NULL}};
static const struct cflag F_CAMPAIGN_CREATE[] = {
    {"--epsilon-min", "X", "smallest epsilon accepted (default 0.01)"},
    {"--epsilon-max", "X", "largest epsilon accepted (default 10; 'inf' for none)"},
    {"--allow-infinite", NULL, "accept unprivatized labels (epsilon = null)"},
    {"--budget", "X", "total epsilon one annotator may spend (default 1000)"},
    {"--epsilon-default", "X", "epsilon proposed to clients (default 1)"},
    {NULL, NULL, NULL}};
static const struct cflag F_EXPORT[] = {
    {"--out", "FILE", "write here (mode 0600) instead of stdout"},
    {"--campaign", "NAME", "only this campaign"},
    {NULL, NULL, NULL}};

static const struct cmd CMDS[] = {
    {"keygen", "keygen", "create a key pair at --key (mode 0600; never overwrites)", 0, 0, 0, NULL,
     cmd_keygen},
    {"pubkey", "pubkey", "print this device's public key (base64url)", 0, 0, 1, NULL, cmd_pubkey},
    {"enroll", "enroll TOKEN", "enroll the key with a one-time token from an operator", 1, 1, 1,
     NULL, cmd_enroll},
    {"next", "next [--count N]", "fetch tasks; prints one JSON task per line", 0, 0, 1, F_COUNT,
     cmd_next},
    {"answer", "answer TASK_ID a|b",
     "answer a fetched task with your TRUE preference; only a randomized answer is sent", 2, 2, 1,
     NULL, cmd_answer},
    {"answer-batch", "answer-batch FILE.jsonl",
     "answer many: lines {\"task_id\": N, \"choice\": \"a\"|\"b\"}; prints one result per line", 1,
     1, 1, NULL, cmd_answer_batch},
    {"resend", "resend", "resend signed labels that have no receipt yet", 0, 0, 1, NULL,
     cmd_resend},
    {"budget", "budget", "show the epsilon spent on this device and the caps", 0, 0, 1, NULL,
     cmd_budget},
    {"admin tasks-load", "admin tasks-load FILE [--campaign C]",
     "upload a JSONL task file (operator)", 1, 1, 2, F_CAMPAIGN, cmd_tasks_load},
    {"admin enroll-token", "admin enroll-token [--count N] [--campaign C]",
     "create one-time enrollment tokens (operator)", 0, 0, 2, F_TOKENS, cmd_enroll_token},
    {"admin campaign-create", "admin campaign-create NAME [options]",
     "create a campaign (operator)", 1, 1, 2, F_CAMPAIGN_CREATE, cmd_campaign_create},
    {"admin revoke", "admin revoke KEY", "revoke an annotator key (operator)", 1, 1, 2, NULL,
     cmd_revoke},
    {"admin stats", "admin stats", "server statistics (operator)", 0, 0, 2, NULL, cmd_stats},
    {"admin export", "admin export [--out FILE] [--campaign C]",
     "export labels as JSONL (operator)", 0, 0, 2, F_EXPORT, cmd_export},
};
#define NCMDS (sizeof CMDS / sizeof CMDS[0])

static void print_globals(FILE *out)
{
    fprintf(out, "\nGlobal options (flag, environment variable):\n");
    for (int i = 0; i < G_COUNT; i++) {
        char left[64];
        snprintf(left, sizeof left, "%s %s", GOPTS[i].flag, GOPTS[i].arg);
        fprintf(out, "  %-26s %-26s %s\n", left, GOPTS[i].env, GOPTS[i].help);
    }
    fprintf(out, "\nExit status: 0 on success, otherwise the error code number "
                 "(e.g. 24 local_budget_exceeded, 35 network_error).\n");
}

static void main_help(FILE *out)
{
    fprintf(out, "usage: ldpref [global options] COMMAND [args]\n\n"
                 "Private pairwise preference labels: your true answer is randomized on this\n"
                 "device (randomized response) before anything is sent.\n\nCommands:\n");
    for (size_t i = 0; i < NCMDS; i++)
        fprintf(out, "  %-44s %s\n", CMDS[i].usage, CMDS[i].summary);
    fprintf(out, "  %-44s %s\n", "version", "print the version");
    fprintf(out, "\nRun `ldpref COMMAND --help` for a command's options.\n");
    print_globals(out);
}

static void cmd_help(const struct cmd *cmd)
{
    printf("usage: ldpref [global options] %s\n\n%s\n", cmd->usage, cmd->summary);
    if (cmd->flags) {
        printf("\nOptions:\n");
        for (int i = 0; cmd->flags[i].flag; i++) {
            char left[64];
            snprintf(left, sizeof left, "%s%s%s", cmd->flags[i].flag, cmd->flags[i].arg ? " " : "",
                     cmd->flags[i].arg ? cmd->flags[i].arg : "");
            printf("  %-26s %s\n", left, cmd->flags[i].help);
        }
    }
    if (strcmp(cmd->name, "answer") == 0)
        printf("\nThe task must have been fetched with `ldpref next` using the same ledger.\n"
               "Answering the same comparison again (any task id, either order) reuses the\n"
               "first randomized answer and spends no new epsilon.\n");
    print_globals(stdout);
}

/* Matches "--flag=value" or "--flag value"; returns the value or NULL.
 * *consumed is the number of argv entries used. */
static int match_flag(const char *flag, int has_arg, char **argv, int i, int argc, const char **val,
                      int *consumed)
{
    size_t fl = strlen(flag);
    if (strncmp(argv[i], flag, fl) != 0)
        return 0;
    if (argv[i][fl] == '\0') {
        if (!has_arg) {
            *val = "";
            *consumed = 1;
            return 1;
        }
        if (i + 1 >= argc)
            return -1;
        *val = argv[i + 1];
        *consumed = 2;
        return 1;
    }
    if (argv[i][fl] == '=' && has_arg) {
        *val = argv[i] + fl + 1;
        *consumed = 1;
        return 1;
    }
    return 0;
}

int main(int argc, char **argv)
{
    static char default_key[LDPREF_PATH_MAX];
    const char *home = getenv("HOME");
    snprintf(default_key, sizeof default_key, "%s/.config/ldpref/key", home ? home : ".");
    for (int i = 0; i < G_COUNT; i++)
        g_val[i] = getenv(GOPTS[i].env);

    /* First pass: consume global options anywhere; keep the other words. */
    char **words = calloc((size_t)argc + 1, sizeof *words);
    if (words == NULL)
        return LDPREF_ENO_MEMORY;
    int nwords = 0, help = 0, rc = LDPREF_OK;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0) {
            help = 1;
            continue;
        }
        int used = 0, matched = 0;
        for (int g = 0; g < G_COUNT && !matched; g++) {
            const char *v;
            int m = match_flag(GOPTS[g].flag, 1, argv, i, argc, &v, &used);
            if (m < 0) {
                free(words);
                return usage_error("%s needs a value", GOPTS[g].flag);
            }
            if (m > 0) {
                g_val[g] = v;
                matched = 1;
            }
        }
        if (matched) {
            i += used - 1;
            continue;
        }
        words[nwords++] = argv[i];
    }
    if (nwords == 0 || strcmp(words[0], "help") == 0) {
        main_help(stdout);
        free(words);
        return help || nwords > 0 ? 0 : LDPREF_EINVALID_ARGUMENT;
    }
    if (strcmp(words[0], "version") == 0) {
        printf("ldpref %s\n", ldpref_version());
        free(words);
        return 0;
    }
    /* Find the command: "admin X" is two words. */
    const struct cmd *cmd = NULL;
    int skip = 1;
    char name[64];
    if (strcmp(words[0], "admin") == 0) {
        if (nwords < 2) {
            main_help(help ? stdout : stderr);
            free(words);
            return help ? 0 : LDPREF_EINVALID_ARGUMENT;
        }
        snprintf(name, sizeof name, "admin %s", words[1]);
        skip = 2;
    } else {
        snprintf(name, sizeof name, "%s", words[0]);
    }
    for (size_t i = 0; i < NCMDS; i++)
        if (strcmp(CMDS[i].name, name) == 0)
            cmd = &CMDS[i];
    if (cmd == NULL) {
        free(words);
        return usage_error("unknown command \"%s\"", name);
    }
    if (help) {
        cmd_help(cmd);
        free(words);
        return 0;
    }
    /* Second pass over the remaining words: command flags and positionals. */
    char **pos = words + skip;
    int npos = 0, rest = nwords - skip;
    for (int i = 0; i < rest; i++) {
        int matched = 0, used = 0;
        for (int f = 0; cmd->flags && cmd->flags[f].flag && !matched; f++) {
            const char *v;
            int m =
                match_flag(cmd->flags[f].flag, cmd->flags[f].arg != NULL, pos, i, rest, &v, &used);
            if (m < 0) {
                free(words);
                return usage_error("%s needs a value", cmd->flags[f].flag);
            }
            if (m > 0) {
                c_val[f] = v;
                c_seen[f] = 1;
                matched = 1;
            }
        }
        if (matched) {
            i += used - 1;
            continue;
        }
        if (strncmp(pos[i], "--", 2) == 0 && pos[i][2] != '\0') {
            rc = usage_error("unknown option %s", pos[i]);
            free(words);
            return rc;
        }
        pos[npos++] = pos[i];
    }
    if (npos < cmd->min_pos || npos > cmd->max_pos) {
        fprintf(stderr, "usage: ldpref %s\n", cmd->usage);
        free(words);
        return LDPREF_EINVALID_ARGUMENT;
    }

    ldpref_options o;
    ldpref_options_init(&o);
    if (g_val[G_SERVER])
        o.server_url = g_val[G_SERVER];
    if (g_val[G_KEY] == NULL)
        g_val[G_KEY] = default_key;
    if (cmd->needs == 1)
        o.key_path = g_val[G_KEY];
    o.ledger_path = g_val[G_LEDGER];
    o.operator_token = g_val[G_TOKEN];
    o.ca_file = g_val[G_CA];
    if (g_val[G_EPS_CAP] && parse_double(g_val[G_EPS_CAP], &o.max_epsilon_per_label) != 0)
        rc = usage_error("--epsilon-cap: not a number: %s", g_val[G_EPS_CAP]);
    if (g_val[G_EPS_TOTAL] && parse_double(g_val[G_EPS_TOTAL], &o.max_epsilon_total) != 0)
        rc = usage_error("--epsilon-total-cap: not a number: %s", g_val[G_EPS_TOTAL]);
    if (g_val[G_TIMEOUT]) {
        double secs;
        if (parse_double(g_val[G_TIMEOUT], &secs) != 0 || !(secs > 0) || secs > 86400)
            rc = usage_error("--timeout: seconds in (0, 86400], not %s", g_val[G_TIMEOUT]);
        else
            o.timeout_ms = (long)ceil(secs * 1000);
    }
    if (rc != LDPREF_OK) {
        free(words);
        return rc;
    }
    if (cmd->needs == 2 && o.operator_token == NULL) {
        free(words);
        fprintf(stderr, "ldpref: %s needs an operator token (LDPREF_OPERATOR_TOKEN or --token)\n",
                cmd->name);
        return LDPREF_EUNAUTHORIZED;
    }
    ldpref_client *c = NULL;
    if (cmd->needs != 0) {
        rc = ldpref_client_open(&o, &c);
        if (rc != LDPREF_OK) {
            free(words);
            if (rc == LDPREF_EKEY_FILE)
                fprintf(stderr,
                        "ldpref: key_file: cannot use the key %s (missing, malformed, or "
                        "readable by others; create one with `ldpref keygen`)\n",
                        o.key_path);
            else
                fprintf(stderr, "ldpref: %s: %s\n", ldpref_error_name(rc), ldpref_strerror(rc));
            return rc;
        }
    }
    rc = cmd->run(cmd, c, pos, npos);
    ldpref_client_close(c);
    free(words);
    fflush(stdout);
    return rc;
}
