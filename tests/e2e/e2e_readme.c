/*
 * e2e_readme.c — the README's walk-through, run as written.
 *
 * Every ```sh block of README.md preceded by a line "<!-- walkthrough -->"
 * is extracted, and its commands run in order, each through /bin/sh, in a
 * fresh directory that stands for the repository root of a fresh machine
 * ("build" and "tests" there link to the real ones; HOME is that directory,
 * stdin is /dev/null, each command has 600 s), against the real
 * ldpref-server on 127.0.0.1 (port 0, temporary database). Every command
 * must exit 0. A command that does not end by itself (a server, an
 * interactive session without input) belongs outside the marked blocks.
 *
 * The text is run as written except for what a reader substitutes:
 *   - the server URL: "http://127.0.0.1:8080" becomes the test server's;
 *   - placeholders "PREFIX..." (op_..., et_...): the latest string
 *     PREFIX[A-Za-z0-9_-]+ printed so far (the server's startup line
 *     "operator token: op_..." counts as printed);
 *   - task ids: the ids in "answer N", "skip N" and "task_id": N, in order
 *     of first appearance, become the task ids printed so far ("task_id" of
 *     the JSON lines on stdout), in the order they were printed.
 * "export NAME=VALUE..." lines set the environment of the later commands.
 * Commands are split at line ends (a trailing backslash or pipe continues
 * the command); comments are dropped. Files named by "--out FILE" must exist
 * and be non-empty afterwards.
 */
#include "check.h"
#include "server_proc.h"

#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <limits.h>
#include <regex.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define README "README.md"
#define MARK "<!-- walkthrough -->"
#define DEFAULT_URL "http://127.0.0.1:8080"
#define COMMAND_TIMEOUT_S 600
#define MAX_COMMANDS 256
#define MAX_IDS 1024

static server_proc srv;
static char work[400];

/* Everything printed so far (stdout of the commands, and the server's
 * operator-token line), and the task ids seen in it. */
static char *printed;
static size_t printed_len;
static long long printed_ids[MAX_IDS], readme_ids[MAX_IDS];
static int n_printed_ids, n_readme_ids;

static char *read_file(const char *path)
{
    FILE *f = fopen(path, "rb");
    if (f == NULL)
        return NULL;
    char *buf = NULL;
    size_t len = 0, cap = 0, n;
    char chunk[4096];
    while ((n = fread(chunk, 1, sizeof chunk, f)) > 0) {
        if (len + n + 1 > cap) {
            cap = (len + n + 1) * 2;
            char *grown = realloc(buf, cap);
            if (grown == NULL) {
                free(buf);
                fclose(f);
                return NULL;
            }
            buf = grown;
        }
        memcpy(buf + len, chunk, n);
        len += n;
    }
    fclose(f);
    if (buf == NULL)
        buf = calloc(1, 1);
    else
        buf[len] = '\0';
    return buf;
}

static void append_printed(const char *text)
{
    size_t n = strlen(text);
    char *grown = realloc(printed, printed_len + n + 2);
    if (grown == NULL)
        return;
    printed = grown;
    memcpy(printed + printed_len, text, n);
    printed_len += n;
    printed[printed_len++] = '\n';
    printed[printed_len] = '\0';
    /* Task ids of JSON lines, in order of first appearance. */
    char *copy = strdup(text);
    for (char *save = NULL, *line = strtok_r(copy, "\n", &save); line;
         line = strtok_r(NULL, "\n", &save)) {
        json_t *j = json_loads(line, 0, NULL);
        json_t *id = json_object_get(j, "task_id");
        if (json_is_integer(id)) {
            long long v = json_integer_value(id);
            int seen = 0;
            for (int i = 0; i < n_printed_ids; i++)
                seen |= printed_ids[i] == v;
            if (!seen && n_printed_ids < MAX_IDS)
                printed_ids[n_printed_ids++] = v;
        }
        json_decref(j);
    }
    free(copy);
}

/* A growable string. */
struct str {
    char *s;
    size_t len, cap;
};

static void str_add(struct str *b, const char *p, size_t n)
{
    if (b->len + n + 1 > b->cap) {
        size_t cap = (b->len + n + 1) * 2;
        char *grown = realloc(b->s, cap);
        if (grown == NULL)
            return;
        b->s = grown;
        b->cap = cap;
    }
    memcpy(b->s + b->len, p, n);
    b->len += n;
    b->s[b->len] = '\0';
}

/* The line without its comment (an unquoted '#' at the start or after a
 * blank) and trailing blanks. */
static void strip_comment(char *line)
{
    char quote = 0;
    for (char *p = line; *p; p++) {
        if (quote) {
            if (*p == quote)
                quote = 0;
        } else if (*p == '\'' || *p == '"') {
            quote = *p;
        } else if (*p == '#' && (p == line || p[-1] == ' ' || p[-1] == '\t')) {
            *p = '\0';
            break;
        }
    }
    size_t n = strlen(line);
    while (n > 0 && (line[n - 1] == ' ' || line[n - 1] == '\t' || line[n - 1] == '\r'))
        line[--n] = '\0';
}

/* The commands of the marked blocks, in order. Returns how many, or -1 if
 * README.md cannot be read; *blocks gets the number of marked blocks. */
static int extract(char **cmds, int max, int *blocks)
{
    char *text = read_file(README);
    if (text == NULL)
        return -1;
    int n = 0, armed = 0, inside = 0;
    struct str cur = {0};
    *blocks = 0;
    for (char *save = NULL, *line = strtok_r(text, "\n", &save); line;
         line = strtok_r(NULL, "\n", &save)) {
        if (!inside) {
            if (strstr(line, MARK) != NULL)
                armed = 1;
            else if (armed && strncmp(line, "```", 3) == 0)
                inside = 1, armed = 0, ++*blocks;
            else if (line[strspn(line, " \t\r")] != '\0')
                armed = 0; /* the mark applies to the block right after it */
            continue;
        }
        if (strncmp(line, "```", 3) == 0) {
            inside = 0;
            continue;
        }
        strip_comment(line);
        size_t len = strlen(line);
        int more = len > 0 && (line[len - 1] == '\\' || line[len - 1] == '|');
        if (len > 0 && line[len - 1] == '\\')
            line[--len] = '\0';
        if (len == 0 && cur.len == 0)
            continue;
        str_add(&cur, line, len);
        if (more) {
            str_add(&cur, " ", 1);
            continue;
        }
        if (n < max)
            cmds[n++] = cur.s;
        else
            free(cur.s);
        memset(&cur, 0, sizeof cur);
    }
    free(cur.s);
    free(text);
    return n;
}

/* The printed task id for a README task id (see the header). Returns 0 and
 * the id, or -1 when nothing printed so far corresponds. */
static int map_task_id(long long readme, long long *out)
{
    int i = 0;
    while (i < n_readme_ids && readme_ids[i] != readme)
        i++;
    if (i == n_readme_ids && n_readme_ids < MAX_IDS)
        readme_ids[n_readme_ids++] = readme;
    if (i >= n_printed_ids)
        return -1;
    *out = printed_ids[i];
    return 0;
}

/* The latest printed PREFIX[A-Za-z0-9_-]+ (prefix: its first plen bytes),
 * into out. */
static int latest_printed(const char *prefix_text, size_t plen, char *out, size_t cap)
{
    char prefix[64];
    if (plen >= sizeof prefix)
        return -1;
    memcpy(prefix, prefix_text, plen);
    prefix[plen] = '\0';
    const char *found = NULL, *p = printed;
    size_t flen = 0;
    while (p && (p = strstr(p, prefix)) != NULL) {
        size_t n = plen;
        while (p[n] && (strchr("-_", p[n]) || (p[n] >= '0' && p[n] <= '9') ||
                        (p[n] >= 'a' && p[n] <= 'z') || (p[n] >= 'A' && p[n] <= 'Z')))
            n++;
        int starts = p == printed || !((p[-1] >= 'a' && p[-1] <= 'z') || p[-1] == '_');
        if (n > plen && starts) {
            found = p;
            flen = n;
        }
        p += n;
    }
    if (found == NULL || flen >= cap)
        return -1;
    memcpy(out, found, flen);
    out[flen] = '\0';
    return 0;
}

/* The command as a reader would type it now; NULL (and *why set) when a
 * value it needs was not printed. Caller frees. */
static char *substitute(const char *cmd, char *why, size_t whylen)
{
    static regex_t re_url, re_placeholder, re_id;
    static int compiled;
    if (!compiled) {
        regcomp(&re_url, "http://127\\.0\\.0\\.1:8080", REG_EXTENDED);
        regcomp(&re_placeholder, "([a-z]+_)\\.\\.\\.", REG_EXTENDED);
        regcomp(&re_id, "((answer|skip)[ \t]+|\"task_id\":[ \t]*)([0-9]+)", REG_EXTENDED);
        compiled = 1;
    }
    struct str out = {0};
    const char *p = cmd;
    while (*p) {
        regmatch_t mu[1], mp[2], mi[4];
        int hu = regexec(&re_url, p, 1, mu, 0) == 0;
        int hp = regexec(&re_placeholder, p, 2, mp, 0) == 0;
        int hi = regexec(&re_id, p, 4, mi, 0) == 0;
        regoff_t best = -1;
        int which = 0;
        if (hu && (best < 0 || mu[0].rm_so < best))
            best = mu[0].rm_so, which = 1;
        if (hp && (best < 0 || mp[0].rm_so < best))
            best = mp[0].rm_so, which = 2;
        if (hi && (best < 0 || mi[0].rm_so < best))
            best = mi[0].rm_so, which = 3;
        if (which == 0) {
            str_add(&out, p, strlen(p));
            break;
        }
        if (which == 1) {
            str_add(&out, p, (size_t)mu[0].rm_so);
            str_add(&out, srv.url, strlen(srv.url));
            p += mu[0].rm_eo;
        } else if (which == 2) {
            char value[512];
            size_t plen = (size_t)(mp[1].rm_eo - mp[1].rm_so);
            if (latest_printed(p + mp[1].rm_so, plen, value, sizeof value) != 0) {
                snprintf(why, whylen, "no %.*s... value was printed before", (int)plen,
                         p + mp[1].rm_so);
                free(out.s);
                return NULL;
            }
            str_add(&out, p, (size_t)mp[0].rm_so);
            str_add(&out, value, strlen(value));
            p += mp[0].rm_eo;
        } else {
            long long id;
            if (map_task_id(strtoll(p + mi[3].rm_so, NULL, 10), &id) != 0) {
                snprintf(why, whylen, "task id %.*s: fewer task ids were printed before",
                         (int)(mi[3].rm_eo - mi[3].rm_so), p + mi[3].rm_so);
                free(out.s);
                return NULL;
            }
            char num[32];
            snprintf(num, sizeof num, "%lld", id);
            if (strtoll(p + mi[3].rm_so, NULL, 10) != id)
                printf("note: README task id %.*s is %s here\n", (int)(mi[3].rm_eo - mi[3].rm_so),
                       p + mi[3].rm_so, num);
            str_add(&out, p, (size_t)mi[3].rm_so);
            str_add(&out, num, strlen(num));
            p += mi[3].rm_eo;
        }
    }
    return out.s ? out.s : strdup("");
}

/* "export A=x B=y": sets each variable. Returns 1 if cmd is an export. */
static int apply_export(const char *cmd)
{
    if (strncmp(cmd, "export ", 7) != 0)
        return 0;
    char *copy = strdup(cmd + 7);
    int ok = 1;
    for (char *save = NULL, *w = strtok_r(copy, " \t", &save); w;
         w = strtok_r(NULL, " \t", &save)) {
        char *eq = strchr(w, '=');
        if (eq == NULL) {
            ok = 0;
            continue;
        }
        *eq = '\0';
        ok &= setenv(w, eq + 1, 1) == 0;
    }
    free(copy);
    check_record(ok, __FILE__, __LINE__, "README: export line: %s", cmd);
    return 1;
}

/* Runs cmd through /bin/sh in the work directory; stdout into *out, the
 * tail of stderr into err. Returns the exit status, or -1. */
static int run_shell(const char *cmd, char **out, char *err, size_t errlen)
{
    char out_path[460], err_path[460];
    snprintf(out_path, sizeof out_path, "%s/.stdout", work);
    snprintf(err_path, sizeof err_path, "%s/.stderr", work);
    pid_t pid = fork();
    if (pid < 0)
        return -1;
    if (pid == 0) {
        int in = open("/dev/null", O_RDONLY);
        int o = open(out_path, O_WRONLY | O_CREAT | O_TRUNC, 0600);
        int e = open(err_path, O_WRONLY | O_CREAT | O_TRUNC, 0600);
        if (in < 0 || o < 0 || e < 0 || chdir(work) != 0)
            _exit(126);
        dup2(in, 0);
        dup2(o, 1);
        dup2(e, 2);
        setpgid(0, 0);
        execl("/bin/sh", "sh", "-c", cmd, (char *)NULL);
        _exit(127);
    }
    int status = 0;
    time_t deadline = time(NULL) + COMMAND_TIMEOUT_S;
    for (;;) {
        pid_t r = waitpid(pid, &status, WNOHANG);
        if (r == pid)
            break;
        if (r < 0 && errno != EINTR)
            return -1;
        if (time(NULL) > deadline) {
            kill(-pid, SIGKILL);
            kill(pid, SIGKILL);
            waitpid(pid, &status, 0);
            snprintf(err, errlen, "timed out after %d s", COMMAND_TIMEOUT_S);
            *out = read_file(out_path);
            return -1;
        }
        usleep(20000);
    }
    *out = read_file(out_path);
    char *e = read_file(err_path);
    size_t n = e ? strlen(e) : 0;
    snprintf(err, errlen, "%s", e ? e + (n > errlen - 1 ? n - (errlen - 1) : 0) : "");
    free(e);
    return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

/* The files named by "--out FILE" exist and are not empty. */
static void check_outputs(const char *cmd)
{
    for (const char *p = strstr(cmd, "--out "); p; p = strstr(p + 1, "--out ")) {
        char name[256], path[700];
        if (sscanf(p + 6, "%255s", name) != 1)
            continue;
        snprintf(path, sizeof path, "%s/%s", work, name);
        struct stat st;
        check_record(stat(path, &st) == 0 && st.st_size > 0, __FILE__, __LINE__,
                     "README: `%s` left no %s", cmd, name);
    }
}

/* Links name in the work directory to target resolved from the repository. */
static int link_into_work(const char *target, const char *name)
{
    char real[PATH_MAX], link[500];
    if (realpath(target, real) == NULL)
        return -1;
    snprintf(link, sizeof link, "%s/%s", work, name);
    return symlink(real, link);
}

static void test_walkthrough(void)
{
    char *cmds[MAX_COMMANDS];
    int blocks = 0;
    int n = extract(cmds, MAX_COMMANDS, &blocks);
    CHECK(n > 0);
    CHECK(blocks >= 3);
    printf("README: %d marked blocks, %d commands\n", blocks, n);
    char line[256];
    snprintf(line, sizeof line, "operator token: %s", srv.token);
    append_printed(line);
    int failed = 0;
    for (int i = 0; i < n; i++) {
        if (failed) {
            check_record(0, __FILE__, __LINE__, "README: not run after a failure: %s", cmds[i]);
            continue;
        }
        char why[4096] = "";
        char *cmd = substitute(cmds[i], why, sizeof why);
        if (cmd == NULL) {
            check_record(0, __FILE__, __LINE__, "README: `%s`: %s", cmds[i], why);
            failed = 1;
            continue;
        }
        if (apply_export(cmd)) {
            free(cmd);
            continue;
        }
        char *out = NULL;
        int rc = run_shell(cmd, &out, why, sizeof why);
        printf("$ %s\n  -> exit %d\n", cmds[i], rc);
        check_record(rc == 0, __FILE__, __LINE__, "README: `%s` (run as `%s`) exited %d: %s",
                     cmds[i], cmd, rc, why);
        failed = rc != 0;
        if (out)
            append_printed(out);
        if (rc == 0)
            check_outputs(cmd);
        free(out);
        free(cmd);
    }
    for (int i = 0; i < n; i++)
        free(cmds[i]);
}

int main(void)
{
    /* Only what the README sets reaches its commands. */
    const char *clear[] = {"LDPREF_SERVER",
                           "LDPREF_OPERATOR_TOKEN",
                           "LDPREF_KEY",
                           "LDPREF_LEDGER",
                           "LDPREF_EPSILON_CAP",
                           "LDPREF_TIMEOUT",
                           "LDPREF_EPSILON_TOTAL_CAP",
                           "LDPREF_CA_FILE"};
    for (size_t i = 0; i < sizeof clear / sizeof *clear; i++)
        unsetenv(clear[i]);
    if (server_start(&srv, NULL) != 0) {
        check_record(0, __FILE__, __LINE__, "server did not start");
        return check_summary();
    }
    snprintf(work, sizeof work, "%s/machine", srv.dir);
    const char *build = getenv("LDPREF_BUILD");
    int ok = mkdir(work, 0700) == 0 &&
             link_into_work(build && *build ? build : "build", "build") == 0 &&
             link_into_work("tests", "tests") == 0 && setenv("HOME", work, 1) == 0;
    CHECK(ok);
    if (ok)
        test_walkthrough();
    free(printed);
    server_cleanup(&srv);
    return check_summary();
}
