/*
 * e2e_label.c — `ldpref label`, the interactive session, end to end: the
 * real CLI in a real terminal (tmux, 200x50 and 80x24) and in plain mode
 * (piped stdin and stdout), against the real server on a temporary database.
 * The test sends keys, reads the screen, and checks what the server stored.
 * Every screen it checks is saved under $LDPREF_BUILD/test-output/label/.
 */
#include "check.h"
#include "error.h"
#include "ldpref.h"
#include "operator_client.h"
#include "server_proc.h"
#include "terminal.h"

#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#define WAIT_MS 10000
#define OASST "tests/data/oasst-en100/en_100.pairs.jsonl"
#define TASKS 10

static server_proc srv;
static ldpref_client *op;
static char out_dir[512], ldpref_bin[512], env_server[128];

/* A long response: several paragraphs, so that it wraps and scrolls. */
static void long_text(char *out, size_t len, const char *marker, int k)
{
    snprintf(out, len,
             "%s-%d opens this response. It is long enough to need wrapping on any terminal, "
             "and it goes on for several paragraphs so that a small terminal must scroll.\\n\\n"
             "Second paragraph of %s-%d: the annotator reads the whole answer before choosing; "
             "words are kept whole where they fit the column.\\n\\n"
             "Third paragraph of %s-%d, with a few more words to fill the lines of a narrow "
             "terminal and push the rest of the screen further down.\\n\\n"
             "Fourth paragraph of %s-%d. The end of %s-%d.",
             marker, k, marker, k, marker, k, marker, k, marker, k);
}

/* Writes count comparisons to campaign (NULL: default); task k has prompt
 * PROMPT-k and responses ALPHA-k and BRAVO-k, and odd tasks a conversation
 * before the prompt (SYSTEM-k, EARLIER-QUESTION-k, EARLIER-REPLY-k). Task
 * 1's BRAVO carries escape sequences that must never reach the terminal.
 * Returns the first task id. */
static long long load_tasks(const char *campaign, int count)
{
    char path[400];
    snprintf(path, sizeof path, "%s/%s.jsonl", srv.dir, campaign ? campaign : "default");
    FILE *f = fopen(path, "w");
    CHECK(f != NULL);
    if (f == NULL)
        return 0;
    for (int k = 1; k <= count; k++) {
        char a[1024], b[1024];
        long_text(a, sizeof a, "ALPHA", k);
        long_text(b, sizeof b, "BRAVO", k);
        char context[512] = "";
        if (k % 2 == 1)
            snprintf(
                context, sizeof context,
                "\"context\": [{\"role\": \"system\", \"content\": \"SYSTEM-%d: be helpful.\"}, "
                "{\"role\": \"user\", \"content\": \"EARLIER-QUESTION-%d: what is this?\"}, "
                "{\"role\": \"assistant\", \"content\": \"EARLIER-REPLY-%d: a comparison.\"}, "
                "{\"role\": \"user\", \"content\": \"PROMPT-%d: which answer is better?\"}], ",
                k, k, k, k);
        fprintf(f,
                "{\"id\": \"%s-%d\", %s\"prompt\": \"PROMPT-%d: which answer is better?\", "
                "\"chosen\": \"%s\", \"rejected\": \"%s%s\"}\n",
                campaign ? campaign : "default", k, context, k, a, b,
                k == 1 ? " ESCAPE\\u001b[2J\\u001b]0;owned\\u0007" : "");
    }
    fclose(f);
    char *json = NULL;
    CHECK_ERR(ldpref_admin_tasks_load(op, path, campaign, &json), LP_OK);
    long long first = 0;
    const char *p = json ? strstr(json, "\"task_ids\":[") : NULL;
    if (p)
        first = atoll(p + strlen("\"task_ids\":["));
    ldpref_free(json);
    return first;
}

/* A new key enrolled in campaign (NULL: default); its path into key. */
static void enroll(const char *name, const char *campaign, char *key, size_t len)
{
    snprintf(key, len, "%s/%s.key", srv.dir, name);
    CHECK_ERR(ldpref_keygen(key, NULL), LP_OK);
    char *json = NULL;
    CHECK_ERR(ldpref_admin_enrollment_tokens(op, campaign, 1, &json), LP_OK);
    char *token = json ? first_enrollment_token(json) : NULL;
    ldpref_free(json);
    ldpref_options o;
    ldpref_options_init(&o);
    o.server_url = srv.url;
    o.key_path = key;
    ldpref_client *c = NULL;
    CHECK_ERR(ldpref_client_open(&o, &c), LP_OK);
    CHECK_ERR(ldpref_enroll(c, token ? token : "none", NULL), LP_OK);
    ldpref_client_close(c);
    free(token);
}

static long long labels_count(void)
{
    return server_db_count(&srv, "labels");
}

/* The labels stored with this epsilon. */
static long long labels_with_epsilon(double eps)
{
    char sql[128];
    snprintf(sql, sizeof sql, "SELECT count(*) FROM labels WHERE abs(epsilon - %.17g) < 1e-12",
             eps);
    return server_db_scalar(&srv, sql, NULL);
}

static void save(const char *screen, const char *name)
{
    char path[700];
    snprintf(path, sizeof path, "%s/%s", out_dir, name);
    CHECK_INT(term_save(screen, path), 0);
}

/* The line of screen that contains text (copied into line), or 0. */
static int line_with(const char *screen, const char *text, char *line, size_t len)
{
    const char *p = screen ? strstr(screen, text) : NULL;
    if (p == NULL)
        return 0;
    const char *start = p;
    while (start > screen && start[-1] != '\n')
        start--;
    size_t n = strcspn(start, "\n");
    snprintf(line, len, "%.*s", (int)n, start);
    return 1;
}

/* The task id in the header line ("| task N |"), or 0. */
static long long task_on_screen(const char *screen)
{
    const char *p = screen ? strstr(screen, "| task ") : NULL;
    return p ? atoll(p + strlen("| task ")) : 0;
}

/* Waits for text; records a check with what the screen showed instead. */
static char *expect_screen(term_session *t, const char *text)
{
    int found;
    char *screen = term_wait_for(t, text, WAIT_MS, &found);
    check_record(found, __FILE__, __LINE__, "the screen shows \"%s\"; it shows:\n%s", text,
                 screen ? screen : "(no capture)");
    return screen;
}

/* Starts `ldpref label` for key in a cols x rows terminal. */
static int start_label(term_session *t, const char *key, int cols, int rows, const char *cap)
{
    char env_key[600], env_cap[64];
    snprintf(env_key, sizeof env_key, "LDPREF_KEY=%s", key);
    snprintf(env_cap, sizeof env_cap, "LDPREF_EPSILON_CAP=%s", cap);
    /* "inf": the annotator opted in to sending true answers (both caps) */
    const char *env[] = {env_server, env_key, env_cap,
                         strcmp(cap, "inf") == 0 ? "LDPREF_EPSILON_TOTAL_CAP=inf" : NULL, NULL};
    const char *argv[] = {ldpref_bin, "label", NULL};
    char dir[400];
    snprintf(dir, sizeof dir, "%s", srv.dir);
    int rc = term_start(t, dir, cols, rows, env, argv);
    CHECK_INT(rc, 0);
    return rc;
}

/* 200x50: side by side, help, answers A and B with the annotator's own cap
 * (epsilon 0.5), quit. */
static void test_wide_terminal(void)
{
    char key[400];
    enroll("wide", NULL, key, sizeof key);
    term_session t;
    if (start_label(&t, key, 200, 50, "0.5") != 0)
        return;
    char *s = expect_screen(&t, "Response B");
    save(s, "label-200x50.txt");
    char line[400];
    CHECK(line_with(s, "Response A", line, sizeof line) && strstr(line, "Response B") != NULL);
    /* The conversation in order: earlier turns, the prompt, the responses. */
    const char *order[] = {"System:",
                           "SYSTEM-1: be helpful.",
                           "User:",
                           "EARLIER-QUESTION-1: what is this?",
                           "Assistant:",
                           "EARLIER-REPLY-1: a comparison.",
                           "User (the prompt):",
                           "PROMPT-1: which answer is better?",
                           "Response A",
                           NULL};
    const char *at = s;
    for (int i = 0; order[i]; i++) {
        const char *next = at ? strstr(at, order[i]) : NULL;
        check_record(next != NULL, __FILE__, __LINE__, "\"%s\" follows the text before it",
                     order[i]);
        at = next;
    }
    CHECK(strstr(s, "ALPHA-1 opens this response.") != NULL);
    CHECK(strstr(s, "BRAVO-1 opens this response.") != NULL);
    CHECK(strstr(s, "The end of ALPHA-1.") != NULL); /* wide: everything fits */
    CHECK(strstr(s, "The end of BRAVO-1.") != NULL);
    CHECK(strstr(s, "0 of 10 in this campaign; 0 answered this session") != NULL);
    CHECK(strstr(s, "ε spent 0, left 100") != NULL);
    /* The escape sequences in the text are shown, not obeyed. */
    CHECK(strstr(s, "ESCAPE\xEF\xBF\xBD[2J\xEF\xBF\xBD]0;owned\xEF\xBF\xBD") != NULL);
    CHECK(strchr(s, '\x1b') == NULL);
    long long first = task_on_screen(s);
    CHECK(first > 0);
    free(s);

    term_key(&t, "?");
    s = expect_screen(&t, "Press any key to go back.");
    save(s, "label-help.txt");
    CHECK(strstr(s, "can't tell") != NULL && strstr(s, "randomized") != NULL);
    free(s);
    term_key(&t, "Space");
    free(expect_screen(&t, "Response A"));

    long long before = labels_count();
    term_key(&t, "a");
    char answered[64];
    snprintf(answered, sizeof answered, "Task %lld answered", first);
    s = expect_screen(&t, answered);
    CHECK(strstr(s, "randomized on this device before sending") != NULL);
    CHECK(strstr(s, "1 answered this session") != NULL);
    CHECK(strstr(s, "ε spent 0.5, left 99.5") != NULL);
    CHECK(task_on_screen(s) != first);
    save(s, "label-200x50-answered.txt");
    free(s);
    CHECK_INT(labels_count(), before + 1);
    CHECK_INT(labels_with_epsilon(0.5), 1);

    term_key(&t, "2");
    free(expect_screen(&t, "2 answered this session"));
    CHECK_INT(labels_count(), before + 2);
    CHECK_INT(labels_with_epsilon(0.5), 2);

    /* Can't tell: a label like any other, with the same epsilon. */
    term_key(&t, "t");
    s = expect_screen(&t, "3 of 10 in this campaign; 3 answered this session");
    CHECK(strstr(s, "randomized on this device before sending") != NULL);
    CHECK(strstr(s, "ε spent 1.5, left 98.5") != NULL);
    long long skipped = task_on_screen(s);
    free(s);
    CHECK_INT(labels_count(), before + 3);
    CHECK_INT(labels_with_epsilon(0.5), 3);

    /* Skip: no label, nothing spent, a different task next. */
    term_key(&t, "s");
    char skipped_note[64];
    snprintf(skipped_note, sizeof skipped_note, "Task %lld skipped", skipped);
    s = expect_screen(&t, skipped_note);
    CHECK(strstr(s, "3 answered this session") != NULL);
    CHECK(strstr(s, "ε spent 1.5, left 98.5") != NULL);
    CHECK(task_on_screen(s) != skipped);
    save(s, "label-200x50-skipped.txt");
    free(s);
    CHECK_INT(labels_count(), before + 3);
    CHECK_INT(server_db_count(&srv, "assignments WHERE skipped = 1"), 1);

    term_key(&t, "q");
    CHECK_INT(term_exit_status(&t, WAIT_MS), 0);
    free(expect_screen(&t, "Session ended: 3 answered, 1 skipped; ε spent 1.5, left 98.5."));
    term_stop(&t);
}

/* 80x24: stacked, scrolling, resize; an answer B. */
static void test_small_terminal(void)
{
    char key[400];
    enroll("small", NULL, key, sizeof key);
    term_session t;
    if (start_label(&t, key, 80, 24, "1") != 0)
        return;
    char *s = expect_screen(&t, "Response A");
    save(s, "label-80x24.txt");
    char line[400];
    CHECK(line_with(s, "Response A", line, sizeof line) && strstr(line, "Response B") == NULL);
    CHECK(strstr(s, "PROMPT-") != NULL);
    CHECK(strstr(s, "more)") != NULL); /* the footer says there is more below */
    int lines = 0, widest = 0;
    for (const char *p = s; p && *p; lines++) {
        size_t n = strcspn(p, "\n");
        int cols = 0;
        for (size_t i = 0; i < n; i++)
            cols += ((unsigned char)p[i] & 0xC0) != 0x80;
        widest = cols > widest ? cols : widest;
        p += n + (p[n] == '\n');
    }
    CHECK(lines <= 24);
    CHECK(widest <= 80);
    free(s);

    /* Scroll down a page at a time until response B shows; the prompt
     * leaves the top. */
    int found = 0;
    for (int i = 0; i < 6 && !found; i++) {
        term_key(&t, "NPage");
        s = term_wait_for(&t, "Response B", 500, &found);
        if (found) {
            CHECK(strstr(s, "PROMPT-") == NULL);
            save(s, "label-80x24-scrolled.txt");
        }
        free(s);
    }
    CHECK(found);
    term_key(&t, "Home");
    free(expect_screen(&t, "PROMPT-"));

    /* Wider: the same task side by side after SIGWINCH. */
    term_resize(&t, 160, 40);
    s = expect_screen(&t, "Response B  [2/b]");
    CHECK(line_with(s, "Response A", line, sizeof line) && strstr(line, "Response B") != NULL);
    free(s);
    /* Too small to be useful: said so; back to 80x24: the task again. */
    term_resize(&t, 24, 8);
    free(expect_screen(&t, "Terminal too small"));
    term_resize(&t, 80, 24);
    free(expect_screen(&t, "Response A"));

    long long before = labels_count(), eps1 = labels_with_epsilon(1);
    term_key(&t, "b");
    free(expect_screen(&t, "1 answered this session"));
    CHECK_INT(labels_count(), before + 1);
    CHECK_INT(labels_with_epsilon(1), eps1 + 1);
    term_key(&t, "q");
    CHECK_INT(term_exit_status(&t, WAIT_MS), 0);
    term_stop(&t);
}

/* The bundled OpenAssistant data: a follow-up turn shows the conversation
 * it follows (the capture in the README comes from here). */
static void test_oasst_conversation(void)
{
    ldpref_campaign spec;
    ldpref_campaign_init(&spec);
    spec.name = "oasst";
    CHECK_ERR(ldpref_admin_campaign_create(op, &spec, NULL), LP_OK);
    CHECK_ERR(ldpref_admin_tasks_load(op, OASST, "oasst", NULL), LP_OK);
    char key[400];
    enroll("oasst", "oasst", key, sizeof key);
    term_session t;
    if (start_label(&t, key, 120, 36, "1") != 0)
        return;
    char *s = expect_screen(&t, "0 of 732 in this campaign; 0 answered this session");
    CHECK(strstr(s, "Prompt:") != NULL); /* the first task starts the conversation */
    free(s);
    term_key(&t, "a");
    s = expect_screen(&t, "1 of 732 in this campaign; 1 answered this session");
    save(s, "label-oasst-120x36.txt");
    const char *order[] = {"User:",
                           "How to protect my eyes",
                           "Assistant:",
                           "User (the prompt):",
                           "Are blue light blocking glasses also effective?",
                           NULL};
    const char *at = s;
    for (int i = 0; order[i]; i++) {
        const char *next = at ? strstr(at, order[i]) : NULL;
        check_record(next != NULL, __FILE__, __LINE__, "\"%s\" follows the text before it",
                     order[i]);
        at = next;
    }
    free(s);
    term_key(&t, "q");
    CHECK_INT(term_exit_status(&t, WAIT_MS), 0);
    term_stop(&t);
}

/* Runs `ldpref label ARGS` for key with input on stdin; stdout into *out. */
static int run_plain(const char *key, const char *input, const char *extra, char **out)
{
    char in_path[400];
    snprintf(in_path, sizeof in_path, "%s/plain-input.txt", srv.dir);
    FILE *f = fopen(in_path, "w");
    if (f == NULL)
        return -1;
    fputs(input, f);
    fclose(f);
    char env_key[600];
    snprintf(env_key, sizeof env_key, "LDPREF_KEY=%s", key);
    int fds[2];
    if (pipe(fds) != 0)
        return -1;
    pid_t pid = fork();
    if (pid == 0) {
        int in = open(in_path, O_RDONLY);
        dup2(in, 0);
        dup2(fds[1], 1);
        close(fds[0]);
        close(fds[1]);
        putenv(env_server);
        putenv(env_key);
        putenv("LANG=C.UTF-8");
        const char *argv[] = {ldpref_bin, "label", extra, extra ? "other" : NULL, NULL};
        execv(ldpref_bin, (char *const *)argv);
        _exit(127);
    }
    close(fds[1]);
    size_t len = 0, cap = 1 << 16;
    char *buf = malloc(cap);
    ssize_t n;
    while (buf && (n = read(fds[0], buf + len, cap - len - 1)) > 0) {
        len += (size_t)n;
        if (cap - len < 2) {
            cap *= 2;
            char *grown = realloc(buf, cap);
            if (grown == NULL)
                break;
            buf = grown;
        }
    }
    close(fds[0]);
    if (buf)
        buf[len] = '\0';
    *out = buf;
    int status;
    while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
    }
    return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

/* Plain mode: the task as text, an unknown line gets the help, an answer,
 * then end of input quits. */
static void test_plain_mode(void)
{
    char key[400];
    enroll("plain", NULL, key, sizeof key);
    long long before = labels_count();
    char *out = NULL;
    CHECK_INT(run_plain(key, "x\na\n", NULL, &out), 0);
    save(out, "label-plain.txt");
    CHECK(out && strstr(out, "=== task ") != NULL);
    CHECK(out && strstr(out, "PROMPT-") != NULL);
    CHECK(out && strstr(out, "Response A  [1/a]") != NULL);
    CHECK(out && strstr(out, "Response B  [2/b]") != NULL);
    CHECK(out && strstr(out, "Your choice [1/a, 2/b, t, s, q, ?]:") != NULL);
    CHECK(out && strstr(out, "1 or a: A is better") != NULL);
    CHECK(out && strstr(out, "answered (ε 1 spent on it)") != NULL);
    CHECK(out && strstr(out, "Session ended: 1 answered") != NULL);
    CHECK(out && strchr(out, '\x1b') == NULL); /* no terminal control in plain mode */
    free(out);
    CHECK_INT(labels_count(), before + 1);

    /* A campaign the key is not enrolled in: said, nothing answered. */
    CHECK_INT(run_plain(key, "a\n", "--campaign", &out), LP_EUNKNOWN_CAMPAIGN);
    free(out);
    CHECK_INT(labels_count(), before + 1);
}

/* Creates campaign name with tasks tasks, labels_per_task and quota. */
static void campaign_with(const char *name, int tasks, int labels_per_task, int64_t quota)
{
    ldpref_campaign spec;
    ldpref_campaign_init(&spec);
    spec.name = name;
    spec.labels_per_task = labels_per_task;
    spec.annotator_quota = quota;
    CHECK_ERR(ldpref_admin_campaign_create(op, &spec, NULL), LP_OK);
    load_tasks(name, tasks);
}

static long long campaign_labels(const char *name)
{
    return server_db_scalar(&srv,
                            "SELECT count(*) FROM labels l JOIN tasks t ON t.id = l.task "
                            "JOIN campaigns c ON c.id = t.campaign WHERE c.name = ?1",
                            name);
}

/* The plain session of a new annotator of campaign that answers input; its
 * output must contain want and it must exit 0. */
static void plain_session_ends(const char *campaign, const char *input, const char *want,
                               const char *capture)
{
    char key[400], name[64];
    static int n;
    snprintf(name, sizeof name, "%s-%d", campaign, ++n);
    enroll(name, campaign, key, sizeof key);
    char *out = NULL;
    CHECK_INT(run_plain(key, input, NULL, &out), 0);
    if (capture)
        save(out, capture);
    check_record(out && strstr(out, want), __FILE__, __LINE__, "the session says \"%s\":\n%s", want,
                 out ? out : "(no output)");
    free(out);
}

/* When nothing is left the session says why and exits 0: the campaign is
 * complete, the quota is reached, or the remaining task is leased to
 * someone else. */
static void test_nothing_left(void)
{
    campaign_with("tiny", 1, 1, 0);
    plain_session_ends("tiny", "b\nb\n", "The campaign is complete", "label-plain-end.txt");
    CHECK_INT(campaign_labels("tiny"), 1);

    campaign_with("quota", 3, 1, 1);
    plain_session_ends("quota", "a\na\n", "You have reached your quota", NULL);
    CHECK_INT(campaign_labels("quota"), 1);

    campaign_with("leased", 1, 1, 0);
    plain_session_ends("leased", "q\n", "Session ended: 0 answered, 0 skipped", NULL);
    plain_session_ends("leased", "a\n", "No task is available for you right now", NULL);
    CHECK_INT(campaign_labels("leased"), 0);
}

/* A central campaign: the notice is on the screen before the first answer;
 * with an infinite cap the true answer is sent (epsilon null), with a
 * finite one the device still randomizes. */
static void test_central_notice(void)
{
    operator_central_campaign(op, "central", 1);
    load_tasks("central", 4);
    const char *caps[] = {"inf", "1"};
    const char *says[] = {"your answer is sent as it is, not randomized",
                          "the server would see your true answer"};
    for (int k = 0; k < 2; k++) {
        char key[400], name[32];
        snprintf(name, sizeof name, "central-%d", k);
        enroll(name, "central", key, sizeof key);
        term_session t;
        if (start_label(&t, key, 120, 36, caps[k]) != 0)
            return;
        char *s = expect_screen(&t, "CENTRAL CAMPAIGN");
        check_record(s && strstr(s, says[k]) != NULL, __FILE__, __LINE__,
                     "the notice says \"%s\":\n%s", says[k], s ? s : "");
        /* before any answer: nothing was sent yet */
        CHECK_INT(campaign_labels("central"), k);
        save(s, k == 0 ? "label-central-true-answer.txt" : "label-central-randomized.txt");
        free(s);
        term_key(&t, "b");
        free(expect_screen(&t, "1 answered this session"));
        term_key(&t, "q");
        CHECK_INT(term_exit_status(&t, WAIT_MS), 0);
        term_stop(&t);
    }
    CHECK_INT(campaign_labels("central"), 2);
    CHECK_INT(server_db_scalar(&srv,
                               "SELECT count(*) FROM labels l JOIN tasks t ON t.id = l.task JOIN "
                               "campaigns c ON c.id = t.campaign WHERE c.name = ?1 AND "
                               "l.epsilon IS NULL",
                               "central"),
              1);
}

int main(void)
{
    if (!term_available()) {
        check_record(0, __FILE__, __LINE__, "tmux is installed (deploy/install-deps.sh)");
        return check_summary();
    }
    const char *build = getenv("LDPREF_BUILD");
    snprintf(out_dir, sizeof out_dir, "%s/test-output", build && *build ? build : "build");
    mkdir(out_dir, 0755);
    strncat(out_dir, "/label", sizeof out_dir - strlen(out_dir) - 1);
    mkdir(out_dir, 0755);
    server_bin_path("ldpref", ldpref_bin, sizeof ldpref_bin);
    char *absolute = realpath(ldpref_bin, NULL); /* tmux runs it from another directory */
    if (absolute && strlen(absolute) < sizeof ldpref_bin)
        strcpy(ldpref_bin, absolute);
    free(absolute);
    if (server_start(&srv, NULL) != 0) {
        check_record(0, __FILE__, __LINE__, "server starts");
        return check_summary();
    }
    snprintf(env_server, sizeof env_server, "LDPREF_SERVER=%s", srv.url);
    op = operator_client_open(&srv);
    CHECK(load_tasks(NULL, TASKS) == 1);
    test_wide_terminal();
    test_small_terminal();
    test_oasst_conversation();
    test_plain_mode();
    test_nothing_left();
    test_central_notice();
    ldpref_client_close(op);
    server_cleanup(&srv);
    return check_summary();
}
