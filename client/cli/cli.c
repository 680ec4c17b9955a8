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
#include "ui.h"

#include "format.h"
#include "label.h"

#include <assert.h>
#include <errno.h>
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <termios.h>
#include <unistd.h>

/* ---- global options ---------------------------------------------------- */

enum {
    G_SERVER,
    G_KEY,
    G_LEDGER,
    G_EPS_CAP,
    G_EPS_TOTAL,
    G_TOKEN,
    G_TIMEOUT,
    G_CA,
    G_FORMAT,
    G_MAX_TASK,
    G_COUNT
};

static const struct gopt {
    const char *flag, *env, *arg, *help;
} GOPTS[G_COUNT] = {
    [G_SERVER] = {"--server", "LDPREF_SERVER", "URL", "server URL (default http://127.0.0.1:8080)"},
    [G_KEY] = {"--key", "LDPREF_KEY", "PATH", "secret key file (default ~/.config/ldpref/key)"},
    [G_LEDGER] = {"--ledger", "LDPREF_LEDGER", "PATH", "local ledger (default KEY.ledger)"},
    [G_EPS_CAP] = {"--epsilon-cap", "LDPREF_EPSILON_CAP", "X",
                   "own cap on one label's epsilon (default 1; 'inf' allows unprivatized)"},
    [G_EPS_TOTAL] = {"--epsilon-total-cap", "LDPREF_EPSILON_TOTAL_CAP", "X",
                     "own cap on the total epsilon spent on this device (default 100)"},
    [G_TOKEN] = {"--token", "LDPREF_OPERATOR_TOKEN", "TOKEN",
                 "operator bearer token (prefer the environment: flags show in ps)"},
    [G_TIMEOUT] = {"--timeout", "LDPREF_TIMEOUT", "SECONDS", "request timeout (default 30)"},
    [G_CA] = {"--ca-file", "LDPREF_CA_FILE", "PATH", "CA bundle for https servers"},
    [G_FORMAT] = {"--format", "LDPREF_FORMAT", "F",
                  "admin/score output: table, json, jsonl (default: table or indented JSON on "
                  "a terminal, compact JSON otherwise; the variable applies on a terminal only)"},
    [G_MAX_TASK] = {"--max-task-bytes", "LDPREF_MAX_TASK_BYTES", "N",
                    "largest task accepted from the server, bytes (default 1048576); a "
                    "larger answer is refused as it arrives"},
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
    int needs; /* 0: nothing, 1: key (annotator), 2: operator, 3: a handle, token optional */
    const struct cflag *flags;
    cmd_fn run;
};

#define CLI_FLAGS_MAX 32
static const char *g_val[G_COUNT];
/* The output format of answers (format.h). */
static cli_format g_format = FORMAT_AUTO;
/* Command flags seen: parallel to cmd->flags. c_val is the last value, c_all
 * every value of a flag given more than once (--candidate, --task). */
static const char *c_val[CLI_FLAGS_MAX];
static int c_seen[CLI_FLAGS_MAX];
static const char **c_all[CLI_FLAGS_MAX];
/* The CTL simulation settings in force ({"ctl": {...}}), or NULL: added to
 * every JSON output of answer/answer-batch. */
static json_t *g_simulation;

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

/* Every value given for a repeatable flag; *n gets how many. */
static const char **cflag_values(const struct cmd *cmd, const char *name, int *n)
{
    *n = 0;
    for (int i = 0; cmd->flags && cmd->flags[i].flag; i++)
        if (strcmp(cmd->flags[i].flag, name) == 0) {
            *n = c_seen[i];
            return c_all[i];
        }
    return NULL;
}

/* 1 if any of the command's flags was given. */
static int any_flag(const struct cmd *cmd)
{
    for (int i = 0; cmd->flags && cmd->flags[i].flag; i++)
        if (c_seen[i])
            return 1;
    return 0;
}

static int parse_u64(const char *s, uint64_t *out)
{
    char *end;
    errno = 0;
    if (s[0] == '-' || s[0] == '\0')
        return -1;
    unsigned long long v = strtoull(s, &end, 10);
    if (errno != 0 || end == s || *end != '\0')
        return -1;
    *out = v;
    return 0;
}

/* Reads a JSON object from a file (at most 64 KiB). New reference or NULL
 * (message printed). */
static json_t *read_json_object(const char *path)
{
    json_error_t jerr;
    struct stat st;
    if (stat(path, &st) == 0 && st.st_size > LDPREF_REQUEST_MAX) {
        fprintf(stderr, "ldpref: %s is larger than %d bytes\n", path, LDPREF_REQUEST_MAX);
        return NULL;
    }
    json_t *j = json_load_file(path, JSON_REJECT_DUPLICATES, &jerr);
    if (j == NULL) {
        fprintf(stderr, "ldpref: %s: line %d: %s\n", path, jerr.line, jerr.text);
        return NULL;
    }
    if (!json_is_object(j)) {
        fprintf(stderr, "ldpref: %s must hold a JSON object\n", path);
        json_decref(j);
        return NULL;
    }
    return j;
}

/* Compact JSON text of v (reference kept); NULL when out of memory. */
static char *json_text(const json_t *v)
{
    return json_dumps(v, JSON_COMPACT);
}

/* ---- annotator commands -------------------------------------------------- */

static int cmd_ui(const struct cmd *cmd, ldpref_client *c, char **pos, int npos)
{
    return cli_ui(c, cflag_value(cmd, "--port"), cflag_value(cmd, "--no-browser") != NULL);
}

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

/* The earlier turns of a task's conversation: [{"role", "content"}, ...]. */
static json_t *context_json(const ldpref_task *t)
{
    json_t *arr = json_array();
    for (size_t k = 0; k < t->n_context && arr != NULL; k++)
        json_array_append_new(arr, json_pack("{s:s, s:s}", "role", t->context[k].role, "content",
                                             t->context[k].content));
    return arr;
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
        int central = ldpref_task_central(c, t), raw = ldpref_task_sends_true_answer(c, t);
        if (central)
            fprintf(stderr, "task %lld: %s\n", (long long)t->task_id, cli_central_notice(raw));
        print_json(json_pack("{s:I, s:s, s:o, s:s, s:s, s:s, s:o, s:o, s:o, s:s, s:b}", "task_id",
                             (json_int_t)t->task_id, "campaign", t->campaign, "context",
                             context_json(t), "prompt", t->prompt, "a", t->a, "b", t->b, "epsilon",
                             eps_json(t->epsilon_proposed), "epsilon_min", eps_json(t->epsilon_min),
                             "epsilon_max", eps_json(t->epsilon_max), "trust",
                             central ? "central" : "local", "sends_true_answer", raw));
    }
    ldpref_tasks_free(tasks, n);
    return 0;
}

static int cmd_skip(const struct cmd *cmd, ldpref_client *c, char **pos, int npos)
{
    long id;
    if (parse_long(pos[0], 1, __LONG_MAX__, &id) != 0)
        return usage_error("TASK_ID must be a positive integer, not %s", pos[0]);
    int rc = ldpref_skip(c, id);
    if (rc != LDPREF_OK)
        return fail(rc, c, "skip");
    print_json(json_pack("{s:I, s:b}", "task_id", (json_int_t)id, "skipped", 1));
    return 0;
}

static int cmd_progress(const struct cmd *cmd, ldpref_client *c, char **pos, int npos)
{
    ldpref_progress p;
    int rc = ldpref_progress_get(c, &p);
    if (rc != LDPREF_OK)
        return fail(rc, c, "progress");
    print_json(json_pack("{s:s, s:I, s:I, s:I, s:I, s:I, s:o}", "campaign", p.campaign,
                         "tasks_total", (json_int_t)p.tasks_total, "tasks_complete",
                         (json_int_t)p.tasks_complete, "labels", (json_int_t)p.labels,
                         "labels_needed", (json_int_t)p.labels_needed, "annotator_labels",
                         (json_int_t)p.annotator_labels, "annotator_quota",
                         p.annotator_quota ? json_integer(p.annotator_quota) : json_null()));
    return 0;
}

/* Adds the simulation marks to an output object (reference kept). */
static json_t *mark_simulation(json_t *obj, int simulated)
{
    if (obj && simulated)
        json_object_set_new(obj, "simulated", json_true());
    if (obj && g_simulation)
        json_object_set(obj, "simulation", g_simulation);
    return obj;
}

static json_t *receipt_json(const ldpref_receipt *r)
{
    return mark_simulation(json_pack("{s:I, s:I, s:i, s:o, s:I, s:b}", "label_id",
                                     (json_int_t)r->label_id, "task_id", (json_int_t)r->task_id,
                                     "z", r->z, "epsilon", eps_json(r->epsilon), "received_at",
                                     (json_int_t)r->received_at, "resent", r->resent),
                           r->simulated);
}

/* a, b or t / tie (can't tell), either case: LDPREF_CHOICE_*; -1 otherwise. */
static int parse_choice(const char *s)
{
    if (strcasecmp(s, "a") == 0)
        return LDPREF_CHOICE_A;
    if (strcasecmp(s, "b") == 0)
        return LDPREF_CHOICE_B;
    if (strcasecmp(s, "t") == 0 || strcasecmp(s, "tie") == 0)
        return LDPREF_CHOICE_CANT_TELL;
    return -1;
}

/* The choice from the first line of stdin (white space around it ignored),
 * so that it is never in argv, where any local user reads it
 * (/proc/PID/cmdline). On a terminal the line is not echoed. The line is
 * wiped after use. -1 if there is none or it is not a choice. */
static int read_choice_stdin(void)
{
    struct termios saved;
    int tty = isatty(STDIN_FILENO) && tcgetattr(STDIN_FILENO, &saved) == 0;
    if (tty) {
        struct termios quiet = saved;
        quiet.c_lflag &= ~(tcflag_t)ECHO;
        tcsetattr(STDIN_FILENO, TCSAFLUSH, &quiet);
        fputs("Your TRUE choice (a, b or t; not shown): ", stderr);
    }
    char line[64];
    int choice = -1;
    if (fgets(line, sizeof line, stdin) != NULL) {
        char *p = line + strspn(line, " \t");
        size_t n = strcspn(p, " \t\r\n");
        p[n] = '\0';
        choice = parse_choice(p);
    }
    explicit_bzero(line, sizeof line);
    if (tty) {
        tcsetattr(STDIN_FILENO, TCSAFLUSH, &saved);
        fputc('\n', stderr);
    }
    return choice;
}

#define CLI_ALREADY_ANSWERED                                                                       \
    "already answered; a randomized answer can never be changed, or repeated questions would "     \
    "reveal your true preference"

static int cmd_answer(const struct cmd *cmd, ldpref_client *c, char **pos, int npos)
{
    long id;
    if (parse_long(pos[0], 1, __LONG_MAX__, &id) != 0)
        return usage_error("TASK_ID must be a positive integer, not %s", pos[0]);
    int from_stdin = strcmp(pos[1], "-") == 0;
    int choice = from_stdin ? read_choice_stdin() : parse_choice(pos[1]);
    if (choice < 0 && from_stdin)
        return usage_error("%s", "stdin must hold a line with the choice a, b or t (can't tell)");
    if (choice < 0)
        return usage_error("the choice must be a, b or t (can't tell), or - to read it from "
                           "stdin, not %s",
                           pos[1]);
    ldpref_receipt r;
    memset(&r, 0, sizeof r);
    int rc = ldpref_answer_id(c, id, choice, &r);
    if (rc == LDPREF_EALREADY_ANSWERED) {
        if (r.label_id > 0)
            print_json(receipt_json(&r));
        fprintf(stderr, "ldpref: answer: task %ld: " CLI_ALREADY_ANSWERED "\n", id);
        return rc;
    }
    if (rc != LDPREF_OK)
        return fail(rc, c, "answer");
    print_json(receipt_json(&r));
    if (isatty(STDERR_FILENO))
        fprintf(stderr,
                "z = %d (\"%s\") is the randomized answer that was sent, not necessarily your "
                "choice: it was drawn on this device, so the server may have received the other "
                "choice; that is how your privacy is protected.\n",
                r.z, r.z ? "b" : "a");
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
        int parsed = choice ? parse_choice(choice) : -1;
        if (!json_is_integer(id) || json_integer_value(id) < 1 || parsed < 0 ||
            json_object_size(j) != 2) {
            fprintf(stderr,
                    "ldpref: %s line %zu: expected {\"task_id\": N, \"choice\": "
                    "\"a\"|\"b\"|\"t\"}\n",
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
        items[n].choice = parsed;
        n++;
        json_decref(j);
    }
    free(line);
    if (f != stdin)
        fclose(f);
    if (rc == LDPREF_OK)
        rc = ldpref_answer_batch(c, items, n);
    int first_item_error = LDPREF_OK;
    if (rc == LDPREF_OK || rc == LDPREF_ENETWORK || rc == LDPREF_ECERTIFICATE_UNTRUSTED ||
        rc == LDPREF_ETLS_FAILED) {
        for (size_t i = 0; i < n; i++) {
            if (items[i].error == LDPREF_OK) {
                print_json(receipt_json(&items[i].receipt));
                continue;
            }
            if (first_item_error == LDPREF_OK)
                first_item_error = items[i].error;
            print_json(mark_simulation(
                json_pack("{s:I, s:s, s:s}", "task_id", (json_int_t)items[i].task_id, "error",
                          ldpref_error_name(items[i].error), "message", items[i].message),
                0));
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

static int cmd_label(const struct cmd *cmd, ldpref_client *c, char **pos, int npos)
{
    return label_session(c, cflag_value(cmd, "--campaign"));
}

static int cmd_budget(const struct cmd *cmd, ldpref_client *c, char **pos, int npos)
{
    ldpref_budget b;
    int rc = ldpref_budget_get(c, &b);
    if (rc != LDPREF_OK)
        return fail(rc, c, "budget");
    double left = b.max_epsilon_total - b.spent;
    print_json(json_pack("{s:o, s:o, s:o, s:o, s:I, s:I, s:I}", "spent", eps_json(b.spent),
                         "max_epsilon_total", eps_json(b.max_epsilon_total),
                         "max_epsilon_per_label", eps_json(b.max_epsilon_per_label), "remaining",
                         isnan(left) ? json_null() : eps_json(left > 0 ? left : 0), "labels",
                         (json_int_t)b.labels, "pending", (json_int_t)b.pending, "simulated",
                         (json_int_t)b.simulated));
    return 0;
}

/* ---- operator commands ------------------------------------------------------ */

/* Prints a command's answer (JSON text from the library, freed here) in
 * the chosen format. */
static int print_text(int rc, ldpref_client *c, char *json, const char *what)
{
    if (rc != LDPREF_OK)
        return fail(rc, c, what);
    if (json)
        cli_print_answer(what, json, g_format);
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
    long k = 0, q = 0;
    const char *v = cflag_value(cmd, "--labels-per-task");
    if (v && parse_long(v, 1, 1000000, &k) != 0)
        return usage_error("--labels-per-task must be an integer in 1..1000000, not %s", v);
    if ((v = cflag_value(cmd, "--quota")) != NULL && parse_long(v, 1, __LONG_MAX__, &q) != 0)
        return usage_error("--quota must be an integer >= 1, not %s", v);
    s.labels_per_task = (int)k;
    s.annotator_quota = q;
    /* central campaigns and contribution caps (docs/operators.md) */
    json_t *extra = json_object();
    const char *trust = cflag_value(cmd, "--trust");
    if (extra != NULL && trust != NULL) {
        json_object_set_new(extra, "trust", json_string(trust));
        if (strcmp(trust, "central") == 0) { /* true answers, unless the flags say otherwise */
            if (cflag_value(cmd, "--epsilon-default") == NULL)
                s.epsilon_default = INFINITY;
            s.allow_infinite = 1;
        }
    }
    static const char *const reals[] = {"--release-epsilon", "release_epsilon", "--release-delta",
                                        "release_delta", NULL};
    for (int i = 0; extra != NULL && reals[i]; i += 2) {
        double x;
        if ((v = cflag_value(cmd, reals[i])) == NULL)
            continue;
        if (parse_double(v, &x) != 0) {
            json_decref(extra);
            return usage_error("not a number: %s", v);
        }
        json_object_set_new(extra, reals[i + 1], json_real(x));
    }
    if (extra != NULL && (v = cflag_value(cmd, "--contribution-cap")) != NULL) {
        long m;
        if (parse_long(v, 1, 1000000, &m) != 0) {
            json_decref(extra);
            return usage_error("--contribution-cap must be an integer in 1..1000000, not %s", v);
        }
        json_object_set_new(extra, "contribution_cap", json_integer(m));
        /* a local campaign proposes the user-level budget over m labels
         * (the server checks it is exactly that) */
        if (cflag_value(cmd, "--epsilon-default") == NULL && !isinf(s.epsilon_default))
            s.epsilon_default = s.epsilon_budget / (double)m;
    }
    char *extra_text = extra ? json_dumps(extra, JSON_COMPACT) : NULL;
    json_decref(extra);
    if (extra_text == NULL)
        return fail(LDPREF_ENO_MEMORY, c, "admin campaign-create");
    char *json = NULL;
    int rc = ldpref_admin_campaign_create_with(c, &s, extra_text, &json);
    free(extra_text);
    return print_text(rc, c, json, "admin campaign-create");
}

static int cmd_campaign_update(const struct cmd *cmd, ldpref_client *c, char **pos, int npos)
{
    double eps = NAN, delta = NAN;
    const char *v;
    if ((v = cflag_value(cmd, "--release-epsilon")) != NULL && parse_double(v, &eps) != 0)
        return usage_error("--release-epsilon: not a number: %s", v);
    if ((v = cflag_value(cmd, "--release-delta")) != NULL && parse_double(v, &delta) != 0)
        return usage_error("--release-delta: not a number: %s", v);
    char *json = NULL;
    int rc = ldpref_admin_campaign_update(c, pos[0], eps, delta, &json);
    return print_text(rc, c, json, "admin campaign-update");
}

static int cmd_revoke(const struct cmd *cmd, ldpref_client *c, char **pos, int npos)
{
    int rc = ldpref_admin_revoke(c, pos[0]);
    if (rc != LDPREF_OK)
        return fail(rc, c, "admin revoke");
    json_t *answer = json_pack("{s:s, s:b}", strncmp(pos[0], "ann-", 4) == 0 ? "pseudonym" : "key",
                               pos[0], "revoked", 1);
    char *text = answer ? json_text(answer) : NULL;
    json_decref(answer);
    if (text)
        cli_print_answer("admin revoke", text, g_format);
    free(text);
    return 0;
}

static int cmd_token_create(const struct cmd *cmd, ldpref_client *c, char **pos, int npos)
{
    const char *name = cflag_value(cmd, "--name"), *scopes = cflag_value(cmd, "--scope");
    if (name == NULL || scopes == NULL)
        return usage_error("%s needs --name N and --scope S (admin,export,score or none)",
                           cmd->name);
    char *json = NULL;
    int rc = ldpref_admin_token_create(c, name, scopes, &json);
    return print_text(rc, c, json, cmd->name);
}

static int cmd_token_list(const struct cmd *cmd, ldpref_client *c, char **pos, int npos)
{
    char *json = NULL;
    int rc = ldpref_admin_tokens(c, &json);
    return print_text(rc, c, json, cmd->name);
}

/* admin token revoke ID and admin token rotate ID. */
static int cmd_token_change(const struct cmd *cmd, ldpref_client *c, char **pos, int npos)
{
    char *json = NULL;
    int rc = strcmp(cmd->name, "admin token rotate") == 0
                 ? ldpref_admin_token_rotate(c, pos[0], &json)
                 : ldpref_admin_token_revoke(c, pos[0], &json);
    return print_text(rc, c, json, cmd->name);
}

static int cmd_stats(const struct cmd *cmd, ldpref_client *c, char **pos, int npos)
{
    char *json = NULL;
    int rc = ldpref_admin_stats(c, &json);
    return print_text(rc, c, json, "admin stats");
}

static int cmd_quality(const struct cmd *cmd, ldpref_client *c, char **pos, int npos)
{
    char *json = NULL;
    int rc = ldpref_admin_quality(c, cflag_value(cmd, "--campaign"), &json);
    return print_text(rc, c, json, "admin quality");
}

static int parse_id(const char *s, const char *what, int64_t *out);

static int cmd_campaign_view(const struct cmd *cmd, ldpref_client *c, char **pos, int npos)
{
    long bucket = 0;
    const char *v = cflag_value(cmd, "--bucket-s");
    if (v && parse_long(v, 60, 2592000, &bucket) != 0)
        return usage_error("--bucket-s must be seconds in 60..2592000, not %s", v);
    char *json = NULL;
    int rc = ldpref_admin_campaign(c, pos[0], bucket, &json);
    return print_text(rc, c, json, "admin campaign");
}

/* admin annotators and admin tasks: a page of the campaign's rows
 * (--offset, --limit; 0: the server's default). */
static int cmd_page(const struct cmd *cmd, ldpref_client *c, char **pos, int npos)
{
    long offset = 0, limit = 0;
    const char *s = cflag_value(cmd, "--offset");
    if (s && parse_long(s, 0, __LONG_MAX__, &offset) != 0)
        return usage_error("--offset must be an integer >= 0, not %s", s);
    if ((s = cflag_value(cmd, "--limit")) != NULL && parse_long(s, 1, 1000, &limit) != 0)
        return usage_error("--limit must be an integer in 1..1000, not %s", s);
    int (*page)(ldpref_client *, const char *, int64_t, int64_t, char **) =
        strcmp(cmd->name, "admin tasks") == 0 ? ldpref_admin_tasks : ldpref_admin_annotators;
    char *json = NULL;
    int rc = page(c, cflag_value(cmd, "--campaign"), offset, limit, &json);
    return print_text(rc, c, json, cmd->name);
}

/* admin audit: a page of the audit log (--after ID, --limit N). */
static int cmd_audit(const struct cmd *cmd, ldpref_client *c, char **pos, int npos)
{
    long after = 0, limit = 0;
    const char *s = cflag_value(cmd, "--after");
    if (s && parse_long(s, 0, __LONG_MAX__, &after) != 0)
        return usage_error("--after must be a row id >= 0, not %s", s);
    if ((s = cflag_value(cmd, "--limit")) != NULL && parse_long(s, 1, 1000, &limit) != 0)
        return usage_error("--limit must be an integer in 1..1000, not %s", s);
    char *json = NULL;
    int rc = ldpref_admin_audit(c, after, limit, &json);
    return print_text(rc, c, json, "admin audit");
}

static int cmd_task(const struct cmd *cmd, ldpref_client *c, char **pos, int npos)
{
    int64_t id;
    int rc = parse_id(pos[0], "TASK_ID", &id);
    if (rc != 0)
        return rc;
    char *json = NULL;
    rc = ldpref_admin_task(c, id, &json);
    return print_text(rc, c, json, "admin task");
}

static int cmd_export(const struct cmd *cmd, ldpref_client *c, char **pos, int npos)
{
    const char *out = cflag_value(cmd, "--out"), *campaign = cflag_value(cmd, "--campaign");
    const char *view = cflag_value(cmd, "--view"), *v = cflag_value(cmd, "--version");
    const char *format = cflag_value(cmd, "--format");
    if (view && strcmp(view, "clean") != 0 && strcmp(view, "corrupted") != 0)
        return usage_error("--view must be clean or corrupted, not %s", view);
    if (format && strcmp(format, LDPREF_EXPORT_STANDARD) != 0 &&
        strcmp(format, LDPREF_EXPORT_CONVERSATIONAL) != 0)
        return usage_error("--format must be standard or conversational, not %s", format);
    int64_t version = 0;
    if (v && (view == NULL || strcmp(view, "corrupted") != 0))
        return usage_error("--version %s needs --view corrupted", v);
    if (v && parse_id(v, "--version", &version) != 0)
        return LDPREF_EINVALID_ARGUMENT;
    if (view && strcmp(view, "corrupted") == 0 && campaign)
        return usage_error("--view corrupted exports the model's own campaign selection: drop "
                           "--campaign %s",
                           campaign);
    const char *hf = cflag_value(cmd, "--hf"), *license = cflag_value(cmd, "--license");
    if (hf && out)
        return usage_error("--hf DIR writes a dataset directory: drop --out %s", out);
    if (license && !hf)
        return usage_error("--license %s needs --hf DIR", license);
    if (hf) {
        ldpref_hf_options o;
        ldpref_hf_options_init(&o);
        o.campaign = campaign, o.view = view, o.version = version, o.format = format;
        o.license = license;
        char *json = NULL;
        int rc = ldpref_admin_export_hf(c, hf, &o, &json);
        return print_text(rc, c, json, "admin export");
    }
    int rc = out && strcmp(out, "-") != 0
                 ? ldpref_admin_export_format_path(c, campaign, view, version, format, out)
                 : ldpref_admin_export_format(c, campaign, view, version, format, stdout);
    return rc == LDPREF_OK ? 0 : fail(rc, c, "admin export");
}

/* ---- learning commands ------------------------------------------------------ */

/*
 * Sets the retrain-request fields given as flags on req (an object). Flags
 * the command does not have are simply absent. Returns 0 or an exit code
 * (message printed).
 */
static int train_flags(const struct cmd *cmd, json_t *req)
{
    static const char *const strings[] = {"--loss",       "loss",        "--campaign",
                                          "campaign",     "--mechanism", "mechanism",
                                          "--candidates", "candidates",  NULL};
    static const char *const reals[] = {
        "--beta",     "beta",      "--rmax",  "rmax",    "--l2",  "l2", "--norm-bound",
        "norm_bound", "--epsilon", "epsilon", "--delta", "delta", NULL};
    const char *v;
    for (int i = 0; strings[i]; i += 2)
        if ((v = cflag_value(cmd, strings[i])) != NULL)
            json_object_set_new(req, strings[i + 1], json_string(v));
    for (int i = 0; reals[i]; i += 2) {
        double x;
        if ((v = cflag_value(cmd, reals[i])) == NULL)
            continue;
        if (strcmp(reals[i], "--l2") == 0 && strcmp(v, "auto") == 0) {
            json_object_set_new(req, "l2", json_string("auto"));
            continue;
        }
        if (parse_double(v, &x) != 0 || !isfinite(x)) {
            fprintf(stderr, "ldpref: %s: not a finite number: %s\n", reals[i], v);
            return LDPREF_EINVALID_ARGUMENT;
        }
        json_object_set_new(req, reals[i + 1], json_real(x));
    }
    long n;
    if ((v = cflag_value(cmd, "--cutoff")) != NULL) {
        if (parse_long(v, 1, __LONG_MAX__, &n) != 0)
            return usage_error("--cutoff must be a label id >= 1, not %s", v);
        json_object_set_new(req, "cutoff", json_integer(n));
    }
    if ((v = cflag_value(cmd, "--seed")) != NULL) {
        if (parse_long(v, 0, 9007199254740992L, &n) != 0)
            return usage_error("--seed must be an integer in [0, 2^53], not %s", v);
        json_object_set_new(req, "seed", json_integer(n));
    }
    if ((v = cflag_value(cmd, "--max-iter")) != NULL) {
        if (parse_long(v, 1, 100000, &n) != 0)
            return usage_error("--max-iter must be 1..100000, not %s", v);
        json_object_set_new(req, "max_iter", json_integer(n));
    }
    if ((v = cflag_value(cmd, "--features")) != NULL) {
        if (strcmp(v, "auto") != 0 && strcmp(v, "dense") != 0 && strcmp(v, "text") != 0)
            return usage_error("--features must be auto, dense or text, not %s", v);
        json_object_set_new(req, "features", json_string(v));
    }
    if (cflag_value(cmd, "--no-activate"))
        json_object_set_new(req, "activate", json_false());
    return 0;
}

/* The retrain request: --request FILE (or {}) with the flags on top. */
static int train_request(const struct cmd *cmd, json_t *base, json_t **out)
{
    const char *file = cflag_value(cmd, "--request");
    json_t *req = file ? read_json_object(file) : base ? json_deep_copy(base) : json_object();
    *out = NULL;
    if (req == NULL)
        return file ? LDPREF_EINVALID_ARGUMENT : LDPREF_ENO_MEMORY;
    int rc = train_flags(cmd, req);
    if (rc != 0) {
        json_decref(req);
        return rc;
    }
    *out = req;
    return 0;
}

struct progress {
    int64_t iteration;
    char status[32];
};

/* run_wait callback: one stderr line per new status or iteration. */
static void show_progress(void *ctx, const char *run_json)
{
    struct progress *p = ctx;
    json_t *run = json_loads(run_json, 0, NULL);
    const char *status = json_string_value(json_object_get(run, "status"));
    json_t *prog = json_object_get(run, "progress");
    json_t *it = json_object_get(prog, "iteration");
    int64_t iter = json_is_integer(it) ? json_integer_value(it) : -1;
    if (status && (strcmp(status, p->status) != 0 || iter != p->iteration)) {
        /* objective and grad_norm are null until the optimizer reports them */
        json_t *obj = json_object_get(prog, "objective"), *g = json_object_get(prog, "grad_norm");
        long long id = (long long)json_integer_value(json_object_get(run, "run"));
        if (json_is_number(obj) && json_is_number(g))
            fprintf(stderr, "run %lld %-9s iteration %lld objective %.9g grad_norm %.3g\n", id,
                    status, (long long)iter, json_number_value(obj), json_number_value(g));
        else
            fprintf(stderr, "run %lld %-9s iteration %lld\n", id, status, (long long)iter);
        snprintf(p->status, sizeof p->status, "%s", status);
        p->iteration = iter;
    }
    json_decref(run);
}

static int wait_poll_ms(const struct cmd *cmd, long *ms)
{
    const char *v = cflag_value(cmd, "--poll-ms");
    *ms = 500;
    if (v && parse_long(v, 10, 3600000, ms) != 0)
        return usage_error("--poll-ms must be 10..3600000, not %s", v);
    return 0;
}

static int wait_run(const struct cmd *cmd, ldpref_client *c, int64_t run, const char *what)
{
    long poll;
    int rc = wait_poll_ms(cmd, &poll);
    if (rc != 0)
        return rc;
    struct progress p = {.iteration = -2};
    char *json = NULL;
    rc = ldpref_admin_run_wait(c, run, poll, isatty(STDERR_FILENO) ? show_progress : NULL, &p,
                               &json);
    if (json) /* the run ended: its final object, whatever the outcome */
        cli_print_answer(what, json, g_format);
    ldpref_free(json);
    return rc == LDPREF_OK ? 0 : fail(rc, c, what);
}

static int cmd_retrain(const struct cmd *cmd, ldpref_client *c, char **pos, int npos)
{
    json_t *req = NULL;
    long poll;
    int rc = wait_poll_ms(cmd, &poll);
    if (rc == 0)
        rc = train_request(cmd, NULL, &req);
    if (rc != 0)
        return rc;
    char *text = json_text(req), *json = NULL;
    json_decref(req);
    if (text == NULL)
        return LDPREF_ENO_MEMORY;
    rc = ldpref_admin_retrain(c, text, &json);
    free(text);
    if (rc != LDPREF_OK || cflag_value(cmd, "--wait") == NULL)
        return print_text(rc, c, json, "admin retrain");
    json_t *run = json_loads(json, 0, NULL);
    json_t *id = json_object_get(run, "run");
    int64_t run_id = json_is_integer(id) ? json_integer_value(id) : 0;
    json_decref(run);
    if (run_id < 1) {
        fprintf(stderr, "ldpref: admin retrain: the answer has no run id: %s\n", json);
        ldpref_free(json);
        return LDPREF_EPROTOCOL;
    }
    ldpref_free(json);
    return wait_run(cmd, c, run_id, "admin retrain");
}

static int parse_id(const char *s, const char *what, int64_t *out)
{
    long v;
    if (parse_long(s, 1, __LONG_MAX__, &v) != 0) {
        fprintf(stderr, "ldpref: %s must be an integer >= 1, not %s (see ldpref --help)\n", what,
                s);
        return LDPREF_EINVALID_ARGUMENT;
    }
    *out = v;
    return 0;
}

static int cmd_runs(const struct cmd *cmd, ldpref_client *c, char **pos, int npos)
{
    long limit = 0;
    const char *v = cflag_value(cmd, "--limit");
    if (v && parse_long(v, 1, 1000, &limit) != 0)
        return usage_error("--limit must be 1..1000, not %s", v);
    char *json = NULL;
    int rc = ldpref_admin_runs(c, (int)limit, &json);
    return print_text(rc, c, json, "admin runs");
}

static int cmd_run(const struct cmd *cmd, ldpref_client *c, char **pos, int npos)
{
    int64_t run;
    int rc = parse_id(pos[0], "RUN", &run);
    if (rc != 0)
        return rc;
    if (cflag_value(cmd, "--wait"))
        return wait_run(cmd, c, run, "admin run");
    char *json = NULL;
    rc = ldpref_admin_run_get(c, run, &json);
    return print_text(rc, c, json, "admin run");
}

static int cmd_cancel(const struct cmd *cmd, ldpref_client *c, char **pos, int npos)
{
    int64_t run;
    int rc = parse_id(pos[0], "RUN", &run);
    if (rc != 0)
        return rc;
    char *json = NULL;
    rc = ldpref_admin_run_cancel(c, run, &json);
    return print_text(rc, c, json, "admin cancel");
}

static int cmd_models(const struct cmd *cmd, ldpref_client *c, char **pos, int npos)
{
    char *json = NULL;
    int rc = ldpref_admin_models(c, &json);
    return print_text(rc, c, json, "admin models");
}

static int cmd_model(const struct cmd *cmd, ldpref_client *c, char **pos, int npos)
{
    int64_t version = 0;
    if (npos == 1 && cflag_value(cmd, "--active"))
        return usage_error("give a VERSION or --active, not both (%s)", pos[0]);
    int rc = npos == 1 ? parse_id(pos[0], "VERSION", &version) : 0;
    if (rc != 0)
        return rc;
    char *json = NULL;
    rc = ldpref_admin_model_get(c, version, &json);
    return print_text(rc, c, json, "admin model");
}

static int cmd_activate(const struct cmd *cmd, ldpref_client *c, char **pos, int npos)
{
    int64_t version;
    int rc = parse_id(pos[0], "VERSION", &version);
    if (rc != 0)
        return rc;
    char *json = NULL;
    rc = ldpref_admin_model_activate(c, version, &json);
    return print_text(rc, c, json, "admin activate");
}

/* No flags: show. Otherwise read the stored schedule, change what the
 * flags say, store it. */
static int cmd_schedule(const struct cmd *cmd, ldpref_client *c, char **pos, int npos)
{
    char *json = NULL;
    int rc = ldpref_admin_schedule_get(c, &json);
    if (rc != LDPREF_OK || !any_flag(cmd))
        return print_text(rc, c, json, "admin schedule");
    json_t *sched = json_loads(json, 0, NULL);
    ldpref_free(json);
    json = NULL;
    if (!json_is_object(sched)) {
        json_decref(sched);
        fprintf(stderr, "ldpref: admin schedule: the stored schedule is not an object\n");
        return LDPREF_EPROTOCOL;
    }
    static const char *const ints[] = {"--interval", "interval_s", "--every-labels", "every_labels",
                                       NULL};
    for (int i = 0; ints[i]; i += 2) {
        const char *v = cflag_value(cmd, ints[i]);
        long n;
        if (v == NULL)
            continue;
        if (parse_long(v, 0, __LONG_MAX__, &n) != 0) {
            json_decref(sched);
            return usage_error("expected an integer >= 0 (0 disables), not %s", v);
        }
        json_object_set_new(sched, ints[i + 1], json_integer(n));
    }
    json_t *stored = json_object_get(sched, "request"), *req = NULL;
    rc = train_request(cmd, json_is_object(stored) ? stored : NULL, &req);
    if (rc != 0) {
        json_decref(sched);
        return rc;
    }
    json_object_set_new(sched, "request", req);
    char *text = json_text(sched);
    json_decref(sched);
    if (text == NULL)
        return LDPREF_ENO_MEMORY;
    rc = ldpref_admin_schedule_set(c, text, &json);
    free(text);
    return print_text(rc, c, json, "admin schedule");
}

/* No flags: show. Otherwise store new settings; flags not given take the
 * defaults (strategy flip, seed 0, no feature), not the stored values. */
static int cmd_corruption(const struct cmd *cmd, ldpref_client *c, char **pos, int npos)
{
    char *json = NULL;
    if (!any_flag(cmd)) {
        int rc = ldpref_admin_corruption_get(c, pos[0], &json);
        return print_text(rc, c, json, "admin corruption");
    }
    ldpref_corruption s;
    ldpref_corruption_init(&s);
    s.campaign = pos[0];
    const char *v;
    if ((v = cflag_value(cmd, "--alpha")) != NULL &&
        (parse_double(v, &s.alpha) != 0 || !(s.alpha >= 0 && s.alpha <= 0.5)))
        return usage_error("--alpha must be in [0, 0.5], not %s", v);
    if ((v = cflag_value(cmd, "--strategy")) != NULL)
        s.strategy = v;
    if ((v = cflag_value(cmd, "--seed")) != NULL &&
        (parse_u64(v, &s.seed) != 0 || s.seed > (UINT64_C(1) << 53)))
        return usage_error("--seed must be an integer in [0, 2^53], not %s", v);
    long feature;
    if ((v = cflag_value(cmd, "--feature")) != NULL) {
        if (parse_long(v, 0, (1L << 24) - 1, &feature) != 0)
            return usage_error("--feature must be a feature index in [0, 2^24), not %s", v);
        s.feature = feature;
    }
    int rc = ldpref_admin_corruption_set(c, &s, &json);
    return print_text(rc, c, json, "admin corruption");
}

/* ldpref score --batch FILE: the file's items scored in one request, the
 * answer's lines to stdout as they arrive. */
static int score_batch(ldpref_client *c, const char *path, const char *v)
{
    int64_t version = 0;
    int rc = v ? parse_id(v, "--version", &version) : 0;
    if (rc != 0)
        return rc;
    FILE *f = fopen(path, "rb");
    if (f == NULL) {
        fprintf(stderr, "ldpref: %s: %s\n", path, strerror(errno));
        return LDPREF_EIO;
    }
    char *body = NULL;
    size_t len = 0, cap = 0, got;
    do {
        if (len + 65536 > cap) {
            char *b = realloc(body, cap = (cap ? cap * 2 : 65536) + 65536);
            if (b == NULL) {
                free(body);
                fclose(f);
                return LDPREF_ENO_MEMORY;
            }
            body = b;
        }
        got = fread(body + len, 1, cap - len, f);
        len += got;
    } while (got > 0);
    int bad = ferror(f);
    fclose(f);
    if (bad) {
        free(body);
        fprintf(stderr, "ldpref: %s: cannot read\n", path);
        return LDPREF_EIO;
    }
    rc = ldpref_score_batch(c, body ? body : "", len, version, stdout);
    free(body);
    return rc != LDPREF_OK ? fail(rc, c, "score") : 0;
}

static int cmd_score(const struct cmd *cmd, ldpref_client *c, char **pos, int npos)
{
    int ncand = 0, ntask = 0;
    const char **cands = cflag_values(cmd, "--candidate", &ncand);
    const char **tasks = cflag_values(cmd, "--task", &ntask);
    const char *prompt = cflag_value(cmd, "--prompt"), *file = cflag_value(cmd, "--request");
    const char *v = cflag_value(cmd, "--version"), *batch = cflag_value(cmd, "--batch");
    int modes = (prompt || ncand > 0) + (ntask > 0) + (file != NULL) + (batch != NULL);
    if (modes != 1) {
        fprintf(stderr, "ldpref: score needs exactly one of --prompt with --candidate, --task, "
                        "--request or --batch (see ldpref score --help)\n");
        return LDPREF_EINVALID_ARGUMENT;
    }
    if (batch != NULL)
        return score_batch(c, batch, v);
    if ((prompt == NULL) != (ncand == 0)) {
        fprintf(stderr, "ldpref: score: --prompt needs at least one --candidate, and "
                        "--candidate needs --prompt\n");
        return LDPREF_EINVALID_ARGUMENT;
    }
    if (ncand > LDPREF_SCORE_CANDIDATES_MAX) {
        fprintf(stderr, "ldpref: score: at most %d candidates\n", LDPREF_SCORE_CANDIDATES_MAX);
        return LDPREF_ETOO_MANY_CANDIDATES;
    }
    if (ntask > 1000) {
        fprintf(stderr, "ldpref: score: at most 1000 tasks\n");
        return LDPREF_ETOO_MANY_CANDIDATES;
    }
    json_t *req = file ? read_json_object(file) : json_object();
    if (req == NULL)
        return file ? LDPREF_EINVALID_ARGUMENT : LDPREF_ENO_MEMORY;
    int rc = 0;
    if (prompt) {
        json_t *arr = json_array();
        for (int i = 0; i < ncand && rc == 0; i++) {
            json_t *t = json_string(cands[i]);
            if (t == NULL)
                rc = usage_error("--candidate is not valid UTF-8: %s", cands[i]);
            else
                json_array_append_new(arr, json_pack("{s:o}", "text", t));
        }
        json_t *p = json_string(prompt);
        if (p == NULL && rc == 0)
            rc = usage_error("--prompt is not valid UTF-8: %s", prompt);
        json_object_set_new(req, "prompt", p ? p : json_null());
        json_object_set_new(req, "candidates", arr);
    } else if (ntask > 0) {
        json_t *arr = json_array();
        for (int i = 0; i < ntask && rc == 0; i++) {
            int64_t id;
            if ((rc = parse_id(tasks[i], "--task", &id)) == 0)
                json_array_append_new(arr, json_integer(id));
        }
        json_object_set_new(req, "task_ids", arr);
    }
    int64_t version;
    if (rc == 0 && v) {
        if ((rc = parse_id(v, "--version", &version)) == 0)
            json_object_set_new(req, "version", json_integer(version));
    }
    const char *g = cflag_value(cmd, "--gamma");
    double gamma;
    if (rc == 0 && g && (parse_double(g, &gamma) != 0 || !(gamma >= 0) || !isfinite(gamma)))
        rc = usage_error("--gamma must be a finite number >= 0, not %s", g);
    if (rc == 0 && g)
        json_object_set_new(req, "gamma", json_real(gamma));
    if (rc == 0 && cflag_value(cmd, "--pessimism") && !g)
        json_object_set_new(req, "pessimism", json_true());
    char *text = rc == 0 ? json_text(req) : NULL, *json = NULL;
    json_decref(req);
    if (rc != 0)
        return rc;
    if (text == NULL)
        return LDPREF_ENO_MEMORY;
    rc = ldpref_score(c, text, &json);
    free(text);
    return print_text(rc, c, json, "score");
}

/* ---- command table ------------------------------------------------------------ */

static const struct cflag F_COUNT[] = {{"--count", "N", "how many (1..1000, default 1)"},
                                       {NULL, NULL, NULL}};
static const struct cflag F_CAMPAIGN[] = {{"--campaign", "NAME", "campaign (default: default)"},
                                          {NULL, NULL, NULL}};
static const struct cflag F_LABEL[] = {
    {"--campaign", "NAME", "the campaign you mean to label (checked against your enrollment)"},
    {NULL, NULL, NULL}};
static const struct cflag F_TOKENS[] = {{"--count", "N", "how many tokens (1..1000, default 1)"},
                                        {"--campaign", "NAME", "campaign (default: default)"},
                                        {NULL, NULL, NULL}};
static const struct cflag F_CAMPAIGN_CREATE[] = {
    {"--epsilon-min", "X", "smallest epsilon accepted (default 0.01)"},
    {"--epsilon-max", "X",
     "largest epsilon accepted (default 10; 'inf': no limit, unprivatized labels included, "
     "as with --allow-infinite)"},
    {"--allow-infinite", NULL, "accept unprivatized labels (epsilon = null)"},
    {"--budget", "X", "total epsilon one annotator may spend (default 1000)"},
    {"--epsilon-default", "X", "epsilon proposed to clients (default 1)"},
    {"--labels-per-task", "K", "labels each task needs, from different annotators (default 1)"},
    {"--quota", "Q", "at most Q labels per annotator (default: no quota)"},
    {"--trust", "T",
     "local (default: labels randomized on the device) or central (annotators send true "
     "labels; only released models are private)"},
    {"--release-epsilon", "E", "central: the model-release budget (pure DP epsilon, required)"},
    {"--release-delta", "D", "central: the total delta approximate (aup) releases may spend"},
    {"--contribution-cap", "M",
     "at most M labels per annotator (the quota); local: proposes budget / M per label"},
    {NULL, NULL, NULL}};
static const struct cflag F_CAMPAIGN_UPDATE[] = {
    {"--release-epsilon", "E", "the new model-release budget (not below what was spent)"},
    {"--release-delta", "D", "the new delta total"},
    {NULL, NULL, NULL}};
static const struct cflag F_CAMPAIGN_VIEW[] = {
    {"--bucket-s", "S",
     "labels over time in buckets of S seconds, a multiple of 60 (default 3600)"},
    {NULL, NULL, NULL}};
static const struct cflag F_PAGE[] = {{"--campaign", "NAME", "campaign (default: default)"},
                                      {"--offset", "N", "skip the first N (default 0)"},
                                      {"--limit", "N", "at most N, 1..1000"},
                                      {NULL, NULL, NULL}};
static const struct cflag F_EXPORT[] = {
    {"--out", "FILE", "write here (mode 0600) instead of stdout"},
    {"--campaign", "NAME", "only this campaign"},
    {"--view", "VIEW",
     "clean (default: labels as received) or corrupted (a model's training view)"},
    {"--version", "V", "with --view corrupted: the model (default: the active one)"},
    {"--format", "F",
     "standard (default: TRL's text prompt/chosen/rejected) or conversational (turn lists)"},
    {"--hf", "DIR",
     "write a Hugging Face dataset directory (new or empty): a config per epsilon, a dataset "
     "card with the privacy model"},
    {"--license", "ID", "with --hf: the dataset card's licence id (default unknown)"},
    {NULL, NULL, NULL}};
static const struct cflag F_SIM[] = {
    {"--simulate-ctl-alpha", "A",
     "SIMULATION ONLY: replace the true answer with probability A in [0, 0.5] before "
     "randomized response (default 0: off)"},
    {"--simulate-ctl-strategy", "S",
     "flip (default), anti, constant0 (\"a\"), constant1 (\"b\"), random"},
    {"--simulate-ctl-seed", "N", "seed of the corruption coins (default 0)"},
    {NULL, NULL, NULL}};
#define TRAIN_FLAGS                                                                                \
    {"--loss", "L", "square-chipo (default), chipo, dpo, rdpo, rr-mle, rr-sgd, ipo, rr-sgd-last"}, \
        {"--campaign", "C", "train on this campaign only (default: all)"},                         \
        {"--seed", "S", "integer in [0, 2^53] (default 0)"},                                       \
        {"--beta", "B", "policy temperature (default 1)"},                                         \
        {"--rmax", "R", "reward clip of the chi-PO losses (default 1)"},                           \
        {"--l2", "X", "L2 penalty, or auto (default): cross-validated"},                           \
        {"--norm-bound", "B", "bound on the parameter norm (default none)"},                       \
        {"--max-iter", "N", "optimizer iterations, 1..100000 (default 500)"},                      \
        {"--features", "F", "auto (default), dense or text"},                                      \
        {"--no-activate", NULL, "do not serve the model when the run succeeds"},                   \
        {"--mechanism", "M", "central campaigns: release by exponential or aup (required there)"}, \
        {"--epsilon", "E", "with --mechanism: the release's epsilon (finite, > 0)"},               \
        {"--delta", "D", "with --mechanism aup: the release's delta in (0, 1)"},                   \
        {"--candidates", "SPEC", "exponential: grid:G, net:K or around:K (default net:256)"},      \
    {                                                                                              \
        "--request", "FILE.json", "start from this retrain request object; flags override it"      \
    }
static const struct cflag F_RETRAIN[] = {
    TRAIN_FLAGS,
    {"--cutoff", "ID", "train on labels with id <= ID (default: the newest at start)"},
    {"--wait", NULL, "wait for the run to end; exit status = the run's error code"},
    {"--poll-ms", "MS", "polling interval with --wait (default 500)"},
    {NULL, NULL, NULL}};
static const struct cflag F_SCHEDULE[] = {
    {"--interval", "S", "start a run when S seconds passed since the last start (0: off)"},
    {"--every-labels", "N", "start a run when N labels arrived since the last cutoff (0: off)"},
    TRAIN_FLAGS,
    {NULL, NULL, NULL}};
static const struct cflag F_RUNS[] = {{"--limit", "N", "newest N runs, 1..1000 (default 20)"},
                                      {NULL, NULL, NULL}};
static const struct cflag F_RUN[] = {
    {"--wait", NULL, "wait for the run to end; exit status = the run's error code"},
    {"--poll-ms", "MS", "polling interval with --wait (default 500)"},
    {NULL, NULL, NULL}};
static const struct cflag F_MODEL[] = {{"--active", NULL, "the model being served (default)"},
                                       {NULL, NULL, NULL}};
static const struct cflag F_CORRUPTION[] = {
    {"--alpha", "A", "corruption fraction in [0, 0.5] (0 disables; default 0)"},
    {"--strategy", "S", "flip (default), constant0, constant1, random, anti, backdoor"},
    {"--seed", "N", "integer in [0, 2^53] (default 0)"},
    {"--feature", "K", "backdoor: prefer the response whose feature K is larger"},
    {NULL, NULL, NULL}};
static const struct cflag F_SCORE[] = {
    {"--prompt", "TEXT", "the prompt (with --candidate)"},
    {"--candidate", "TEXT", "a candidate response (repeat, up to 1024)"},
    {"--task", "ID", "score a task's two responses (repeat, up to 1000)"},
    {"--request", "FILE.json", "send this score request object (features, ref_logprob, ...)"},
    {"--batch", "FILE",
     "score many prompts: JSON lines of {prompt, candidates} (or {items: [...]}); "
     "one answer line per item to stdout"},
    {"--version", "V", "model version (default: the active model)"},
    {"--pessimism", NULL,
     "add each candidate's lower confidence bound (lower) and the pessimistic policy "
     "(pessimistic) at the server's default Gamma"},
    {"--gamma", "G", "the same at Gamma = G >= 0 (0: the bounds equal the rewards)"},
    {NULL, NULL, NULL}};

static const struct cflag F_TOKEN_CREATE[] = {
    {"--name", "N", "a name for people: who or what uses the token (1..64 bytes)"},
    {"--scope", "S", "admin, export, score separated by commas, or none (reads /metrics only)"},
    {NULL, NULL, NULL}};

static const struct cflag F_AUDIT[] = {
    {"--after", "ID", "rows after this id (default 0: from the first)"},
    {"--limit", "N", "at most N rows, 1..1000 (default 100)"},
    {NULL, NULL, NULL}};

static const struct cflag F_UI[] = {{"--port", "N", "port on 127.0.0.1 (default: a free one)"},
                                    {"--no-browser", NULL, "print the address only"},
                                    {NULL, NULL, NULL}};

static const struct cmd CMDS[] = {
    {"keygen", "keygen", "create a key pair at --key (mode 0600; never overwrites)", 0, 0, 0, NULL,
     cmd_keygen},
    {"pubkey", "pubkey", "print this device's public key (base64url)", 0, 0, 1, NULL, cmd_pubkey},
    {"enroll", "enroll TOKEN", "enroll the key with a one-time token from an operator", 1, 1, 1,
     NULL, cmd_enroll},
    {"next", "next [--count N]", "fetch tasks; prints one JSON task per line", 0, 0, 1, F_COUNT,
     cmd_next},
    {"answer", "answer TASK_ID -|a|b|t",
     "answer a fetched task with your TRUE choice read from stdin (-: a line a, b or t) or "
     "given (t: can't tell); only a randomized answer is sent",
     2, 2, 1, F_SIM, cmd_answer},
    {"answer-batch", "answer-batch FILE.jsonl",
     "answer many: lines {\"task_id\": N, \"choice\": \"a\"|\"b\"|\"t\"}; prints one result "
     "per line",
     1, 1, 1, F_SIM, cmd_answer_batch},
    {"skip", "skip TASK_ID", "skip a fetched task: nothing is sent but that you skipped it", 1, 1,
     1, NULL, cmd_skip},
    {"progress", "progress", "show the progress of your campaign", 0, 0, 1, NULL, cmd_progress},
    {"ui", "ui [--port N] [--no-browser]",
     "label in your browser: a page served on 127.0.0.1 by this program", 0, 0, 1, F_UI, cmd_ui},
    {"resend", "resend", "resend signed labels that have no receipt yet", 0, 0, 1, NULL,
     cmd_resend},
    {"budget", "budget", "show the epsilon spent on this device and the caps", 0, 0, 1, NULL,
     cmd_budget},
    {"label", "label [--campaign C]",
     "label interactively: the conversation, both responses, one key per answer", 0, 0, 1, F_LABEL,
     cmd_label},
    {"admin tasks-load", "admin tasks-load FILE [--campaign C]",
     "upload a JSONL task file (operator)", 1, 1, 2, F_CAMPAIGN, cmd_tasks_load},
    {"admin enroll-token", "admin enroll-token [--count N] [--campaign C]",
     "create one-time enrollment tokens (operator)", 0, 0, 2, F_TOKENS, cmd_enroll_token},
    {"admin campaign-create", "admin campaign-create NAME [options]",
     "create a campaign (operator)", 1, 1, 2, F_CAMPAIGN_CREATE, cmd_campaign_create},
    {"admin campaign-update",
     "admin campaign-update NAME [--release-epsilon E] [--release-delta D]",
     "change a central campaign's model-release budget (operator)", 1, 1, 2, F_CAMPAIGN_UPDATE,
     cmd_campaign_update},
    {"admin revoke", "admin revoke KEY|PSEUDONYM",
     "revoke an annotator by its key or its pseudonym ann-... (operator)", 1, 1, 2, NULL,
     cmd_revoke},
    {"admin token create", "admin token create --name N --scope S",
     "create an operator token; S: admin,export,score (any of them) or none; the token is "
     "printed once (admin)",
     0, 0, 2, F_TOKEN_CREATE, cmd_token_create},
    {"admin token list", "admin token list",
     "list operator tokens: id, name, scopes, created, revoked; never a secret (admin)", 0, 0, 2,
     NULL, cmd_token_list},
    {"admin token revoke", "admin token revoke ID",
     "revoke operator token ID (tok-N) at once; the last admin token stays (admin)", 1, 1, 2, NULL,
     cmd_token_change},
    {"admin token rotate", "admin token rotate ID",
     "replace token ID by a new secret with the same name and scopes, printed once; the old one "
     "is revoked (admin)",
     1, 1, 2, NULL, cmd_token_change},
    {"admin stats", "admin stats", "server statistics (operator)", 0, 0, 2, NULL, cmd_stats},
    {"admin campaign", "admin campaign NAME [--bucket-s S]",
     "a campaign's progress, labels over time and epsilon spent (operator)", 1, 1, 2,
     F_CAMPAIGN_VIEW, cmd_campaign_view},
    {"admin annotators", "admin annotators [--campaign C] [--offset N] [--limit N]",
     "a campaign's annotators: labels, epsilon spent, skips (operator)", 0, 0, 2, F_PAGE, cmd_page},
    {"admin tasks", "admin tasks [--campaign C] [--offset N] [--limit N]",
     "a campaign's tasks with their label counts (default limit 100) (operator)", 0, 0, 2, F_PAGE,
     cmd_page},
    {"admin task", "admin task TASK_ID",
     "one task in full: context, prompt, responses, labels, skips (operator)", 1, 1, 2, NULL,
     cmd_task},
    {"admin quality", "admin quality [--campaign C]",
     "label quality under privacy: debiased gold accuracy, agreement, flags (operator)", 0, 0, 2,
     F_CAMPAIGN, cmd_quality},
    {"admin audit", "admin audit [--after ID] [--limit N]",
     "the audit log of operator actions, with each row's hash (operator)", 0, 0, 2, F_AUDIT,
     cmd_audit},
    {"admin export",
     "admin export [--out FILE | --hf DIR [--license ID]] [--campaign C | --view corrupted "
     "[--version V]] [--format F]",
     "export labels as JSONL (operator)", 0, 0, 2, F_EXPORT, cmd_export},
    {"admin retrain", "admin retrain [options] [--wait]",
     "start a training run; prints the run (with --wait: the final run) (operator)", 0, 0, 2,
     F_RETRAIN, cmd_retrain},
    {"admin runs", "admin runs [--limit N]", "list training runs, newest first (operator)", 0, 0, 2,
     F_RUNS, cmd_runs},
    {"admin run", "admin run RUN [--wait]", "show a training run (operator)", 1, 1, 2, F_RUN,
     cmd_run},
    {"admin cancel", "admin cancel RUN", "cancel a queued or running training run (operator)", 1, 1,
     2, NULL, cmd_cancel},
    {"admin models", "admin models", "list models, newest first, and the active version (operator)",
     0, 0, 2, NULL, cmd_models},
    {"admin model", "admin model [VERSION|--active]",
     "show a model with its parameters (default: the active one) (operator)", 0, 1, 2, F_MODEL,
     cmd_model},
    {"admin activate", "admin activate VERSION",
     "serve model VERSION (roll back or forward) (operator)", 1, 1, 2, NULL, cmd_activate},
    {"admin schedule", "admin schedule [--interval S] [--every-labels N] [retrain options]",
     "show (no options) or change the periodic retraining schedule (operator)", 0, 0, 2, F_SCHEDULE,
     cmd_schedule},
    {"admin corruption", "admin corruption CAMPAIGN [--alpha A --strategy S --seed N --feature K]",
     "show (no options) or set server-side corruption for experiments (operator)", 1, 1, 2,
     F_CORRUPTION, cmd_corruption},
    {"score",
     "score (--prompt P --candidate T... | --task ID... | --request F | --batch F) [--version V] "
     "[--pessimism | --gamma G]",
     "score candidates with the served (or a given) model", 0, 0, 3, F_SCORE, cmd_score},
};
#define NCMDS (sizeof CMDS / sizeof CMDS[0])

/* man: the manual page's records (deploy/manpage.awk) instead of --help text. */
static void print_globals(FILE *out, int man)
{
    fprintf(out, man ? "@sh\tGLOBAL OPTIONS\n@tx\tEach has an environment variable; flags win "
                       "over the environment.\n"
                     : "\nGlobal options (flag, environment variable):\n");
    for (int i = 0; i < G_COUNT; i++) {
        char left[64];
        snprintf(left, sizeof left, "%s %s", GOPTS[i].flag, GOPTS[i].arg);
        if (man)
            fprintf(out, "@op\t%s\t%s (environment: %s)\n", left, GOPTS[i].help, GOPTS[i].env);
        else
            fprintf(out, "  %-26s %-26s %s\n", left, GOPTS[i].env, GOPTS[i].help);
    }
    fprintf(out, man ? "@sh\tEXIT STATUS\n@tx\t" : "\nExit status: ");
    fprintf(out, "0 on success, otherwise the error code number "
                 "(e.g. 24 local_budget_exceeded, 35 network_error).\n");
}

static void main_help(FILE *out)
{
    fprintf(out, "usage: ldpref [global options] COMMAND [args]\n\n"
                 "Private pairwise preference labels: your true answer is randomized on this\n"
                 "device (randomized response) before anything is sent.\n\nCommands:\n");
    for (size_t i = 0; i < NCMDS; i++)
        fprintf(out, "  %-44s %s\n", CMDS[i].usage, CMDS[i].summary);
    fprintf(out, "  %-44s %s\n", "version, --version", "print the library version");
    fprintf(out, "\nRun `ldpref COMMAND --help` for a command's options.\n");
    print_globals(out, 0);
}

/* A command's --help, or with man its manual page subsection (records). */
static void cmd_help(const struct cmd *cmd, int man)
{
    if (man)
        printf("@ss\tldpref %s\n@tx\t%s\n", cmd->usage, cmd->summary);
    else
        printf("usage: ldpref [global options] %s\n\n%s\n", cmd->usage, cmd->summary);
    if (cmd->flags) {
        if (!man)
            printf("\nOptions:\n");
        for (int i = 0; cmd->flags[i].flag; i++) {
            char left[64];
            snprintf(left, sizeof left, "%s%s%s", cmd->flags[i].flag, cmd->flags[i].arg ? " " : "",
                     cmd->flags[i].arg ? cmd->flags[i].arg : "");
            if (man)
                printf("@op\t%s\t%s\n", left, cmd->flags[i].help);
            else
                printf("  %-26s %s\n", left, cmd->flags[i].help);
        }
    }
    if (strcmp(cmd->name, "answer") == 0 || strcmp(cmd->name, "answer-batch") == 0)
        printf(
            "\nThe task must have been fetched with `ldpref next` using the same ledger.\n"
            "t (can't tell) is sent as a fair coin and spends epsilon like any answer.\n"
            "The output's z is the RANDOMIZED answer that was sent (1 = b), drawn on this\n"
            "device: it may differ from your choice, which never leaves the device.\n"
            "The same comparison under another task id (either order, or a near-duplicate:\n"
            "other spacing, punctuation, invisible characters, small edits) reuses the\n"
            "first randomized answer and spends no new epsilon. Answering a task id again\n"
            "exits 60 already_answered: a randomized answer can never be changed or repeated.\n");
    if (strcmp(cmd->name, "answer") == 0)
        printf("\nScripts should pass the choice on stdin (`echo b | ldpref answer 12 -`): a\n"
               "choice given as an argument is visible to every local user in\n"
               "/proc/PID/cmdline while the request runs, and stays in shell history.\n");
    if (cmd->flags == F_UI)
        printf("\nPrints exactly one line, \"ldpref ui: http://127.0.0.1:PORT/?token=TOKEN\", and\n"
               "opens it with $BROWSER or xdg-open through a private file that redirects to it\n"
               "(the token is on no command line). The page is served on this computer only;\n"
               "the browser sends your TRUE answer to this process, which randomizes it before\n"
               "anything is sent, exactly as `ldpref answer` does. The token works once: the\n"
               "browser that opens it first gets the session. Ctrl-C stops the page.\n");
    if (cmd->flags == F_SIM)
        printf("\n--simulate-ctl-* are for SIMULATED annotators in experiments only (CTL:\n"
               "corruption, then LDP). The corruption coins are deterministic from the seed and\n"
               "the comparison; randomized response still uses the OS CSPRNG; nothing of the\n"
               "simulation is sent. constant0/constant1 mean \"a\"/\"b\" as presented (the\n"
               "client cannot know the task's own order); anti opposes the annotator's own true\n"
               "preference, which for one simulated annotator is the same as flip. Outputs carry\n"
               "\"simulation\" and stderr a SIMULATION warning.\n");
    if (cmd->flags == F_RETRAIN || cmd->flags == F_RUN)
        printf("\nWith --wait, progress lines (iteration objective grad_norm) go to stderr when\n"
               "it is a terminal; the final run object goes to stdout; the exit status is 0 if\n"
               "the run succeeded, else its error code (55 cancelled, 54 no_labels, 57\n"
               "training_failed, ...).\n");
    if (cmd->flags == F_SCHEDULE)
        printf("\nChanges only what the options say: the stored schedule is read, the options\n"
               "are applied (retrain options to its \"request\"; --request FILE replaces it), and\n"
               "the result is stored.\n");
    if (cmd->flags == F_CORRUPTION)
        printf("\nThis is LTC corruption, applied by the server to privatized labels when a\n"
               "training snapshot is built; received labels are never changed. Setting stores a\n"
               "new record: options not given take their defaults, not the previous values.\n");
    if (cmd->flags == F_LABEL)
        printf(
            "\nKeys: 1 or a: A is better; 2 or b: B is better; t: can't tell; s: skip; q: quit;\n"
            "?: help; arrows, j/k, PgUp/PgDn, space, Home/End: scroll. Your answer is\n"
            "randomized on this device before it is sent. When stdin or stdout is not a\n"
            "terminal, each task is printed as text and one choice is read per line.\n"
            "Exits 0 when you quit or nothing is left (campaign complete, quota reached,\n"
            "no task available).\n");
    if (cmd->flags == F_SCORE)
        printf("\nSends the operator token (LDPREF_OPERATOR_TOKEN or --token; one with the score\n"
               "scope is enough; --version of a model that is not served needs the admin\n"
               "scope). Without one the request is anonymous, which only a server started\n"
               "with --public-score answers, and only with a model trained on privatized labels.\n"
               "Prints the server's answer: model_version, loss,\n"
               "link, beta and per candidate reward, probability and log_ratio (for --task,\n"
               "\"tasks\": [{\"task_id\", \"candidates\"}]).\n");
    if (!man)
        print_globals(stdout, 0);
}

/* The hidden --man: the manual page's records, from the tables --help prints. */
static void man_page(void)
{
    printf("@th\tldpref\tprivate pairwise preference labels: the annotator's and operator's "
           "client\n"
           "@synopsis\tldpref [global options] COMMAND [args]\n"
           "@synopsis\tldpref COMMAND --help\n"
           "@synopsis\tldpref --version\n"
           "@sh\tDESCRIPTION\n"
           "@tx\tYour true answer is randomized on this device (randomized response) before "
           "anything is sent. The library behind this command, libldpref, is described in "
           "docs/client.md of the source tree.\n");
    print_globals(stdout, 1);
    printf("@sh\tCOMMANDS\n");
    for (size_t i = 0; i < NCMDS; i++)
        cmd_help(&CMDS[i], 1);
    printf("@ss\tldpref version, ldpref --version\n@tx\tprint the library version\n"
           "@sh\tSEE ALSO\n@tx\tldpref-server(1), ldpref-train(1)\n");
}

/* The --simulate-ctl-* flags into the options (answer, answer-batch). */
static int simulation_options(const struct cmd *cmd, ldpref_options *o)
{
    const char *a = cflag_value(cmd, "--simulate-ctl-alpha");
    const char *s = cflag_value(cmd, "--simulate-ctl-strategy");
    const char *n = cflag_value(cmd, "--simulate-ctl-seed");
    if (a && (parse_double(a, &o->simulate_ctl_alpha) != 0 ||
              !(o->simulate_ctl_alpha >= 0 && o->simulate_ctl_alpha <= 0.5)))
        return usage_error("--simulate-ctl-alpha must be in [0, 0.5], not %s", a);
    if (n && parse_u64(n, &o->simulate_ctl_seed) != 0)
        return usage_error("--simulate-ctl-seed must be an integer in [0, 2^64), not %s", n);
    o->simulate_ctl_strategy = s ? s : "flip";
    static const char *const known[] = {"flip", "anti", "constant0", "constant1", "random", NULL};
    int ok = 0;
    for (int i = 0; known[i]; i++)
        ok |= strcmp(o->simulate_ctl_strategy, known[i]) == 0;
    if (!ok && strcmp(o->simulate_ctl_strategy, "backdoor") == 0) {
        fprintf(stderr, "ldpref: --simulate-ctl-strategy backdoor needs task feature vectors, and "
                        "the tasks served to annotators carry none (use flip, anti, constant0, "
                        "constant1 or random)\n");
        return LDPREF_EINVALID_ARGUMENT;
    }
    if (!ok)
        return usage_error("unknown --simulate-ctl-strategy %s (flip, anti, constant0, "
                           "constant1, random)",
                           o->simulate_ctl_strategy);
    if ((s || n) && !(o->simulate_ctl_alpha > 0))
        fprintf(stderr, "ldpref: note: --simulate-ctl-strategy/--simulate-ctl-seed have no effect "
                        "without --simulate-ctl-alpha > 0\n");
    return LDPREF_OK;
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
    if (argc == 2 && strcmp(argv[1], "--man") == 0) {
        man_page();
        return 0;
    }
    static char default_key[LDPREF_PATH_MAX];
    const char *home = getenv("HOME");
    snprintf(default_key, sizeof default_key, "%s/.config/ldpref/key", home ? home : ".");
    for (int i = 0; i < G_COUNT; i++)
        g_val[i] = getenv(GOPTS[i].env);
    if (!isatty(STDOUT_FILENO)) /* scripts keep their compact JSON */
        g_val[G_FORMAT] = NULL;
    int format_flag = 0; /* --format was given (not only the variable) */

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
                format_flag |= g == G_FORMAT;
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
    /* "--version" in command position (a command's own --version takes a value). */
    if (strcmp(words[0], "version") == 0 || strcmp(words[0], "--version") == 0) {
        printf("ldpref %s\n", ldpref_version());
        free(words);
        return 0;
    }
    /* Find the command: "admin X" is two words, "admin token X" three. */
    const struct cmd *cmd = NULL;
    int skip = 1;
    char name[96];
    if (strcmp(words[0], "admin") == 0) {
        int group = nwords >= 2 && strcmp(words[1], "token") == 0;
        if (nwords < 2 + group) {
            main_help(help ? stdout : stderr);
            free(words);
            return help ? 0 : LDPREF_EINVALID_ARGUMENT;
        }
        snprintf(name, sizeof name, "admin %s%s%s", words[1], group ? " " : "",
                 group ? words[2] : "");
        skip = 2 + group;
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
        cmd_help(cmd, 0);
        free(words);
        return 0;
    }
    /* A command with a --format of its own (admin export: the file format)
     * takes the flag; its output is data, not an answer. */
    for (int f = 0; cmd->flags && cmd->flags[f].flag; f++)
        if (strcmp(cmd->flags[f].flag, "--format") == 0 && g_val[G_FORMAT] != NULL) {
            if (format_flag) {
                c_all[f] = calloc(1, sizeof *c_all[f]);
                if (c_all[f] == NULL) {
                    free(words);
                    return LDPREF_ENO_MEMORY;
                }
                c_all[f][c_seen[f]++] = c_val[f] = g_val[G_FORMAT];
            }
            g_val[G_FORMAT] = NULL;
        }
    if (format_flag && g_val[G_FORMAT] != NULL && cmd->needs < 2) {
        free(words);
        return usage_error("--format applies to admin commands and score, not %s", cmd->name);
    }
    if (g_val[G_FORMAT] != NULL && cli_format_parse(g_val[G_FORMAT], &g_format) != 0) {
        free(words);
        return usage_error("--format must be table, json or jsonl, not %s", g_val[G_FORMAT]);
    }
    /* Second pass over the remaining words: command flags and positionals. */
    char **pos = words + skip;
    int npos = 0, rest = nwords - skip;
    for (int i = 0; i < rest; i++) {
        int matched = 0, used = 0;
        for (int f = 0; cmd->flags && cmd->flags[f].flag && !matched; f++) {
            assert(f < CLI_FLAGS_MAX);
            const char *v;
            int m =
                match_flag(cmd->flags[f].flag, cmd->flags[f].arg != NULL, pos, i, rest, &v, &used);
            if (m < 0) {
                free(words);
                return usage_error("%s needs a value", cmd->flags[f].flag);
            }
            if (m > 0) {
                if (c_all[f] == NULL &&
                    (c_all[f] = calloc((size_t)argc, sizeof *c_all[f])) == NULL) {
                    free(words);
                    return LDPREF_ENO_MEMORY;
                }
                c_all[f][c_seen[f]++] = v;
                c_val[f] = v;
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
    if (rc == LDPREF_OK && cmd->flags == F_SIM)
        rc = simulation_options(cmd, &o);
    o.ledger_path = g_val[G_LEDGER];
    o.operator_token = g_val[G_TOKEN];
    o.ca_file = g_val[G_CA];
    if (o.ca_file && access(o.ca_file, R_OK) != 0)
        rc = usage_error("--ca-file (or LDPREF_CA_FILE) cannot be read: %s", o.ca_file);
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
    if (rc == LDPREF_OK && o.simulate_ctl_alpha > 0) {
        g_simulation =
            json_pack("{s:{s:f, s:s, s:I}}", "ctl", "alpha", o.simulate_ctl_alpha, "strategy",
                      o.simulate_ctl_strategy, "seed", (json_int_t)o.simulate_ctl_seed);
        fprintf(stderr,
                "ldpref: SIMULATION: CTL corruption is ON (alpha %g, strategy %s, seed %llu): "
                "true answers are replaced with probability alpha before randomized response. "
                "For simulated annotators only.\n",
                o.simulate_ctl_alpha, o.simulate_ctl_strategy,
                (unsigned long long)o.simulate_ctl_seed);
    }
    if (cmd->needs == 2 && o.operator_token == NULL) {
        free(words);
        fprintf(stderr, "ldpref: %s needs an operator token (LDPREF_OPERATOR_TOKEN or --token)\n",
                cmd->name);
        return LDPREF_EUNAUTHORIZED;
    }
    long max_task = 0;
    if (g_val[G_MAX_TASK] && parse_long(g_val[G_MAX_TASK], LDPREF_MAX_TASK_BYTES_MIN,
                                        LDPREF_MAX_TASK_BYTES_LIMIT, &max_task) != 0) {
        free(words);
        return usage_error("--max-task-bytes: an integer in [4096, 67108864], not %s",
                           g_val[G_MAX_TASK]);
    }
    ldpref_client *c = NULL;
    if (cmd->needs != 0) {
        rc = ldpref_client_open(&o, &c);
        if (rc == LDPREF_OK && max_task > 0)
            rc = ldpref_set_max_task_bytes(c, (size_t)max_task);
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
    json_decref(g_simulation);
    for (int i = 0; i < CLI_FLAGS_MAX; i++)
        free(c_all[i]);
    free(words);
    fflush(stdout);
    return rc;
}
