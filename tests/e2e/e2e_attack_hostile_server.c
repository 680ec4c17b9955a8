/*
 * e2e_attack_hostile_server.c — the client against a hostile server
 * (tests/support/hostile_server: a real HTTP server on 127.0.0.1), through
 * the real CLI and the real library, each in a child process whose peak
 * memory and CPU time come from wait4():
 *
 * - huge answers: tasks/next answering 200 MB (with a Content-Length, and
 *   chunked without one) fails at once with response_too_large (79), the
 *   child's peak RSS under 64 MB and its CPU time under 2 s;
 * - an endless trickle ends at the timeout (network_error, 35) with almost
 *   no CPU; nesting 100,000 deep and 400,000 values in 800 KB fail with
 *   response_too_complex (80);
 * - near-duplicate variants of one comparison (trailing and leading spaces,
 *   NBSP and the other Unicode spaces, CRLF and line separators, zero-width
 *   and other invisible characters, A and B swapped, a changed punctuation
 *   mark, and mixes): over 31 of them, fetched with `ldpref next` and
 *   answered with `ldpref answer ID -` (the true answer on stdin), every
 *   submitted label is the one memoized answer in the orientation asked, so
 *   a majority vote learns no more than one epsilon-LDP draw, and the
 *   ledger was charged one epsilon;
 * - an export of 200 MB streams into its file (created 0600, also over an
 *   existing 0644 file) with the CLI's peak RSS under 64 MB; as a Hugging
 *   Face dataset (--hf) the same answer, one 200 MB line, is refused
 *   (protocol_error, 36) within the same bound and leaves no directory;
 * - while `ldpref answer ID -` waits for the server, /proc/PID/cmdline holds
 *   no choice (and it does hold it for `ldpref answer ID b`: the check can
 *   see one).
 *
 * Run against an older CLI (LDPREF_CLI=path, with E2E_CHOICE_IN_ARGV=1 when
 * it lacks `answer ID -`), it measures the figures before these bounds;
 * E2E_TRIALS=N repeats the variant attack N times with fresh ledgers.
 */
#include "check.h"
#include "hostile_server.h"
#include "ldpref.h"
#include "server_proc.h"
#include "tmpdir.h"

#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/time.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define RSS_MAX_KB (64 * 1024)
#define CPU_MAX_S 2.0

static char dir[128];
static char cli_bin[512];
static char url[64];

struct child {
    int status; /* exit code, or 128 + signal */
    long maxrss_kb;
    double cpu_s, wall_s;
    char out[8192];
};

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec / 1e9;
}

static void reap(pid_t pid, double t0, struct child *r)
{
    int st = 0;
    struct rusage ru;
    memset(&ru, 0, sizeof ru);
    while (wait4(pid, &st, 0, &ru) < 0 && errno == EINTR)
        ;
    r->wall_s = now_s() - t0;
    r->status = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
    r->maxrss_kb = ru.ru_maxrss;
    r->cpu_s = ru.ru_utime.tv_sec + ru.ru_utime.tv_usec / 1e6 + ru.ru_stime.tv_sec +
               ru.ru_stime.tv_usec / 1e6;
}

/* Starts the CLI with args after the global ones; stdin gets input (NULL:
 * /dev/null), stdout goes to dir/out.txt. */
static pid_t cli_start(const char *key, const char *const *args, const char *input)
{
    char out_path[256];
    snprintf(out_path, sizeof out_path, "%s/out.txt", dir);
    int in[2];
    if (pipe(in) != 0)
        return -1;
    pid_t pid = fork();
    if (pid == 0) {
        const char *argv[32] = {cli_bin, "--server", url, "--key", key};
        int n = 5;
        for (int i = 0; args[i] && n < 31; i++)
            argv[n++] = args[i];
        argv[n] = NULL;
        dup2(in[0], 0);
        close(in[0]);
        close(in[1]);
        int fd = open(out_path, O_WRONLY | O_CREAT | O_TRUNC, 0600);
        if (fd >= 0) {
            dup2(fd, 1);
            close(fd);
        }
        int err = open("/dev/null", O_WRONLY);
        if (err >= 0 && getenv("E2E_VERBOSE") == NULL)
            dup2(err, 2);
        execv(cli_bin, (char *const *)argv);
        _exit(127);
    }
    close(in[0]);
    if (input != NULL && pid > 0)
        (void)!write(in[1], input, strlen(input));
    close(in[1]);
    return pid;
}

static void read_out(struct child *r)
{
    char path[256];
    snprintf(path, sizeof path, "%s/out.txt", dir);
    FILE *f = fopen(path, "r");
    size_t n = f ? fread(r->out, 1, sizeof r->out - 1, f) : 0;
    r->out[n] = '\0';
    if (f)
        fclose(f);
}

static struct child cli(const char *key, const char *const *args, const char *input)
{
    struct child r;
    memset(&r, 0, sizeof r);
    double t0 = now_s();
    pid_t pid = cli_start(key, args, input);
    if (pid < 0) {
        r.status = -1;
        return r;
    }
    reap(pid, t0, &r);
    read_out(&r);
    return r;
}

/* ldpref_next_tasks(count 1) in a child process: its result as the status. */
static struct child library_next(const char *key)
{
    struct child r;
    memset(&r, 0, sizeof r);
    double t0 = now_s();
    pid_t pid = fork();
    if (pid == 0) {
        ldpref_options o;
        ldpref_options_init(&o);
        o.server_url = url;
        o.key_path = key;
        o.timeout_ms = 20000;
        ldpref_client *c = NULL;
        int rc = ldpref_client_open(&o, &c);
        ldpref_task *tasks = NULL;
        size_t n = 0;
        if (rc == LDPREF_OK)
            rc = ldpref_next_tasks(c, 1, &tasks, &n);
        ldpref_tasks_free(tasks, n);
        ldpref_client_close(c);
        _exit(rc);
    }
    reap(pid, t0, &r);
    return r;
}

static void figure(const char *what, const struct child *r)
{
    printf("FIGURE %s exit=%d maxrss_kb=%ld cpu_s=%.2f wall_s=%.2f\n", what, r->status,
           r->maxrss_kb, r->cpu_s, r->wall_s);
}

static void make_key(const char *name, char *key, size_t len)
{
    snprintf(key, len, "%s/%s", dir, name);
    CHECK_INT(ldpref_keygen(key, NULL), LDPREF_OK);
}

static void test_huge(hostile_server *h, const char *key)
{
    const char *next[] = {"next", NULL};
    static const struct {
        hostile_mode mode;
        const char *name;
    } modes[] = {{HOSTILE_HUGE_LENGTH, "huge_length"}, {HOSTILE_HUGE_CHUNKED, "huge_chunked"}};
    for (size_t i = 0; i < sizeof modes / sizeof modes[0]; i++) {
        hostile_set_mode(h, modes[i].mode);
        char what[64];
        struct child r = cli(key, next, NULL);
        snprintf(what, sizeof what, "%s cli", modes[i].name);
        figure(what, &r);
        CHECK_INT(r.status, LDPREF_ERESPONSE_TOO_LARGE);
        CHECK(r.maxrss_kb < RSS_MAX_KB);
        CHECK(r.cpu_s < CPU_MAX_S);
        r = library_next(key);
        snprintf(what, sizeof what, "%s library", modes[i].name);
        figure(what, &r);
        CHECK_INT(r.status, LDPREF_ERESPONSE_TOO_LARGE);
        CHECK(r.maxrss_kb < RSS_MAX_KB);
        CHECK(r.cpu_s < CPU_MAX_S);
    }
}

static void test_trickle_and_shapes(hostile_server *h, const char *key)
{
    hostile_set_mode(h, HOSTILE_TRICKLE);
    const char *slow[] = {"--timeout", "2", "next", NULL};
    struct child r = cli(key, slow, NULL);
    figure("trickle cli", &r);
    CHECK_INT(r.status, LDPREF_ENETWORK);
    CHECK(r.wall_s >= 1.5 && r.wall_s < 8);
    CHECK(r.cpu_s < 1.0);

    const char *next[] = {"next", NULL};
    hostile_set_mode(h, HOSTILE_DEEP);
    r = cli(key, next, NULL);
    figure("deep cli", &r);
    CHECK_INT(r.status, LDPREF_ERESPONSE_TOO_COMPLEX);
    CHECK(r.maxrss_kb < RSS_MAX_KB);
    r = library_next(key);
    figure("deep library", &r);
    CHECK_INT(r.status, LDPREF_ERESPONSE_TOO_COMPLEX);

    hostile_set_mode(h, HOSTILE_MANY_VALUES);
    r = cli(key, next, NULL);
    figure("many_values cli", &r);
    CHECK_INT(r.status, LDPREF_ERESPONSE_TOO_COMPLEX);
    CHECK(r.maxrss_kb < RSS_MAX_KB);
}

/* An export is streamed, not held: 200 MB into a file, the CLI staying small. */
static void test_export(const char *key)
{
    char path[256];
    snprintf(path, sizeof path, "%s/export.jsonl", dir);
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (fd >= 0) {
        fchmod(fd, 0644);
        close(fd);
    }
    const char *args[] = {"--token", "op_hostile", "admin", "export", "--out", path, NULL};
    struct child r = cli(key, args, NULL);
    figure("export cli", &r);
    CHECK_INT(r.status, 0);
    CHECK(r.maxrss_kb < RSS_MAX_KB);
    struct stat st;
    CHECK(stat(path, &st) == 0 && (size_t)st.st_size == hostile_huge_size());
    CHECK_INT(st.st_mode & 0777, 0600);
    unlink(path);
}

/* A Hugging Face export of the same 200 MB (one line, not the export's
 * format) is refused as a protocol error with the CLI staying small, and
 * leaves no directory behind. */
static void test_export_hf(const char *key)
{
    char path[256];
    snprintf(path, sizeof path, "%s/dataset", dir);
    const char *args[] = {"--token", "op_hostile", "admin", "export", "--hf", path, NULL};
    struct child r = cli(key, args, NULL);
    figure("export --hf cli", &r);
    CHECK_INT(r.status, LDPREF_EPROTOCOL);
    CHECK(r.maxrss_kb < RSS_MAX_KB);
    struct stat st;
    CHECK(stat(path, &st) != 0 && errno == ENOENT);
}

/* ---- near-duplicates -------------------------------------------------------- */

#define PROMPT "Which reply explains photosynthesis better?"
#define A_TEXT "Plants turn light, water and carbon dioxide into sugar and oxygen.\nThat is all."
#define B_TEXT "Photosynthesis is how plants eat sunlight, more or less."

/* The 31 variants; swapped[i] says whether a and b trade places. */
static const struct variant {
    const char *prompt, *a, *b;
    int swapped;
} VARIANTS[] = {
    {PROMPT, A_TEXT, B_TEXT, 0},
    {PROMPT, A_TEXT "   ", B_TEXT, 0}, /* trailing spaces */
    {"  " PROMPT, A_TEXT, B_TEXT, 0},  /* leading spaces */
    {PROMPT, A_TEXT, "Photosynthesis is how\u00a0plants eat sunlight, more or less.", 0},
    {"Which reply\u2003explains photosynthesis better?", A_TEXT, B_TEXT, 0}, /* em space */
    {PROMPT,
     "Plants turn light,\u3000water and carbon dioxide into sugar and oxygen.\nThat is all.",
     B_TEXT, 0}, /* ideographic space */
    {PROMPT, "Plants turn light, water and carbon dioxide into sugar and oxygen.\r\nThat is all.",
     B_TEXT, 0}, /* CRLF */
    {PROMPT, "Plants turn light, water and carbon dioxide into sugar and oxygen.\u2028That is all.",
     B_TEXT, 0}, /* line separator */
    {PROMPT, A_TEXT, "Photo\u200bsynthesis is how plants eat sunlight, more or less.", 0},
    {"\ufeff" PROMPT, A_TEXT, B_TEXT, 0}, /* BOM */
    {PROMPT, A_TEXT, "Photosynthesis is how plants\u2060 eat sunlight, more or less.", 0},
    {PROMPT,
     "Plants turn light, water and car\u00adbon dioxide into sugar and oxygen.\nThat is all.",
     B_TEXT, 0},                 /* soft hyphen */
    {PROMPT, B_TEXT, A_TEXT, 1}, /* swapped */
    {PROMPT, "Plants turn light, water and carbon dioxide into sugar and oxygen!\nThat is all.",
     B_TEXT, 0}, /* changed punctuation */
    {PROMPT, B_TEXT "  ", A_TEXT, 1},
    {"Which reply\texplains photosynthesis better?", A_TEXT, B_TEXT, 0}, /* tab */
    {PROMPT, A_TEXT, "Photosynthesis is  how plants eat  sunlight, more or less.", 0},
    {PROMPT,
     "\uff30lants turn light, water and carbon dioxide into sugar and oxygen.\nThat is all.",
     B_TEXT, 0}, /* fullwidth letter */
    {PROMPT, A_TEXT, "Photosynthesis is how\u202fplants eat sunlight, more or less.", 0},
    {"Which reply explains\u205fphotosynthesis better?", A_TEXT, B_TEXT, 0},
    {PROMPT, A_TEXT, "Photosynthesis\u200d is how plants eat sunlight, more or less.", 0},
    {PROMPT,
     "Plants\u200c turn light, water and carbon dioxide into sugar and oxygen.\nThat is all.",
     B_TEXT, 0},
    {PROMPT, "Plants turn light water and carbon dioxide into sugar and oxygen.\nThat is all.",
     B_TEXT, 0}, /* a comma removed */
    {"Which reply explains photosynthesis better.", A_TEXT, B_TEXT, 0},
    {PROMPT, "Photosynthesis is how\u00a0plants eat sunlight, more or less.", A_TEXT, 1},
    {PROMPT, "Photo\u200bsynthesis is how plants eat sunlight, more or less.", A_TEXT, 1},
    {PROMPT, A_TEXT, "Photosynthesis is how plants\u2009eat sunlight, more or less.", 0},
    {PROMPT "\n", A_TEXT, B_TEXT, 0},
    {PROMPT, "Plants turn light, water and carbon dioxide into sugar and oxygen.\rThat is all.",
     B_TEXT, 0},
    {PROMPT, A_TEXT, "Photosynthesis\u1680is how plants eat sunlight, more or less.", 0},
    {PROMPT, B_TEXT,
     "Plants turn light, water and carbon dioxide into sugar and oxygen;\r\nThat is all.", 1},
};
#define NVARIANTS (sizeof VARIANTS / sizeof VARIANTS[0])
_Static_assert(NVARIANTS == 31, "31 variants");

/* One attack: every variant fetched and answered with the true answer "b"
 * of the base orientation. Returns the number of labels whose answer in the
 * base orientation is b, or -1 if the attack could not run; *spent gets
 * the ledger's total. */
static int variant_attack(hostile_server *h, const char *key, int64_t first_id, double *spent)
{
    static hostile_task tasks[NVARIANTS];
    for (size_t i = 0; i < NVARIANTS; i++)
        tasks[i] =
            (hostile_task){first_id + (int64_t)i, VARIANTS[i].prompt, VARIANTS[i].a, VARIANTS[i].b};
    hostile_set_mode(h, HOSTILE_TASKS);
    hostile_set_tasks(h, tasks, NVARIANTS);
    int64_t ids0[1];
    int z0[1];
    size_t before = hostile_labels(h, ids0, z0, 0);
    int argv_choice = getenv("E2E_CHOICE_IN_ARGV") != NULL;
    for (size_t i = 0; i < NVARIANTS; i++) {
        const char *next[] = {"next", NULL};
        struct child r = cli(key, next, NULL);
        CHECK_INT(r.status, 0);
        if (r.status != 0)
            return -1;
        char id[32];
        snprintf(id, sizeof id, "%lld", (long long)tasks[i].task_id);
        /* The true answer: b of the base orientation, a where swapped. */
        const char *truth = VARIANTS[i].swapped ? "a" : "b";
        char line[8];
        snprintf(line, sizeof line, "%s\n", truth);
        const char *answer[] = {"answer", id, argv_choice ? truth : "-", NULL};
        r = cli(key, answer, argv_choice ? NULL : line);
        CHECK_INT(r.status, 0);
    }
    static int64_t ids[8192];
    static int z[8192];
    size_t n = hostile_labels(h, ids, z, 8192);
    CHECK_INT(n - before, NVARIANTS);
    int says_b = 0;
    for (size_t k = before; k < n; k++) {
        size_t i = (size_t)(ids[k] - first_id);
        if (i < NVARIANTS)
            says_b += (z[k] ^ VARIANTS[i].swapped) == 1;
    }
    const char *budget[] = {"budget", NULL};
    struct child r = cli(key, budget, NULL);
    json_t *b = json_loads(r.out, 0, NULL);
    *spent = json_number_value(json_object_get(b, "spent"));
    json_decref(b);
    return says_b;
}

static void test_variants(hostile_server *h)
{
    int trials = getenv("E2E_TRIALS") ? atoi(getenv("E2E_TRIALS")) : 1;
    if (trials < 1)
        trials = 1;
    int recovered = 0, unanimous = 0;
    for (int t = 0; t < trials; t++) {
        char key[256], name[32];
        snprintf(name, sizeof name, "variants%d", t);
        make_key(name, key, sizeof key);
        double spent = -1;
        int says_b = variant_attack(h, key, 1000 + 100 * (int64_t)t, &spent);
        if (says_b < 0)
            return;
        printf("FIGURE variants trial %d: %d of %zu labels say the true answer, spent %g\n", t,
               says_b, NVARIANTS, spent);
        recovered += says_b > (int)NVARIANTS / 2;
        unanimous += says_b == 0 || says_b == (int)NVARIANTS;
        /* One memoized answer, in the orientation of each ask, one epsilon. */
        CHECK(says_b == 0 || says_b == (int)NVARIANTS);
        CHECK(spent == 1.0);
    }
    printf("FIGURE variants: majority vote recovered the true answer in %d of %d trials; "
           "%d of %d trials sent one answer throughout\n",
           recovered, trials, unanimous, trials);
}

/* ---- the answer on a command line ------------------------------------------- */

/* Whether an argument of pid's command line is a choice. -1 if unreadable. */
static int cmdline_has_choice(pid_t pid)
{
    char path[64], buf[4096];
    snprintf(path, sizeof path, "/proc/%d/cmdline", (int)pid);
    FILE *f = fopen(path, "r");
    if (f == NULL)
        return -1;
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    buf[n] = '\0';
    int found = 0;
    for (size_t i = 0; i < n; i += strlen(buf + i) + 1) {
        const char *arg = buf + i;
        found |= !strcmp(arg, "a") || !strcmp(arg, "b") || !strcmp(arg, "t") || !strcmp(arg, "tie");
    }
    return found;
}

/* Answers task id while the server holds the label for 1.5 s; returns
 * whether the choice was seen in /proc/PID/cmdline meanwhile (-1 if the
 * label never arrived while the process lived). */
static int answer_seen(hostile_server *h, const char *key, int64_t id, int from_stdin)
{
    char ids[32];
    snprintf(ids, sizeof ids, "%lld", (long long)id);
    const char *answer[] = {"answer", ids, from_stdin ? "-" : "b", NULL};
    int64_t tid[1];
    int z[1];
    size_t before = hostile_labels(h, tid, z, 0);
    double t0 = now_s();
    pid_t pid = cli_start(key, answer, from_stdin ? "b\n" : NULL);
    int seen = -1;
    while (now_s() - t0 < 10) {
        if (hostile_labels(h, tid, z, 0) > before) { /* the client waits for the receipt */
            seen = cmdline_has_choice(pid);
            break;
        }
        struct timespec ts = {0, 5 * 1000 * 1000};
        nanosleep(&ts, NULL);
    }
    struct child r;
    reap(pid, t0, &r);
    CHECK_INT(r.status, 0);
    return seen;
}

static void test_cmdline(hostile_server *h, const char *key)
{
    static const hostile_task tasks[] = {
        {9001, "Which is kinder?", "Thank you so much for asking.", "Go away."},
        {9002, "Which is shorter?", "A long sentence with many words in it.", "Short."},
    };
    hostile_set_mode(h, HOSTILE_TASKS);
    hostile_set_tasks(h, tasks, 2);
    const char *next[] = {"next", NULL}; /* one task per fetch */
    CHECK_INT(cli(key, next, NULL).status, 0);
    CHECK_INT(cli(key, next, NULL).status, 0);
    hostile_set_label_delay_ms(h, 1500);
    CHECK_INT(answer_seen(h, key, 9001, 1), 0);
    /* The check sees a choice given as an argument. */
    CHECK_INT(answer_seen(h, key, 9002, 0), 1);
    hostile_set_label_delay_ms(h, 0);
}

int main(void)
{
    signal(SIGPIPE, SIG_IGN);
    CHECK(tmpdir_create_shm(dir, sizeof dir, "hostile") == 0);
    const char *cli_env = getenv("LDPREF_CLI");
    if (cli_env && *cli_env)
        snprintf(cli_bin, sizeof cli_bin, "%s", cli_env);
    else
        server_bin_path("ldpref", cli_bin, sizeof cli_bin);
    hostile_server *h = NULL;
    CHECK(hostile_start(HOSTILE_TASKS, &h) == 0);
    if (h == NULL)
        return check_summary();
    snprintf(url, sizeof url, "http://127.0.0.1:%d", hostile_port(h));
    char key[256];
    make_key("key", key, sizeof key);
    if (getenv("E2E_ONLY_VARIANTS") == NULL) {
        test_huge(h, key);
        test_trickle_and_shapes(h, key);
        test_export(key);
        test_export_hf(key);
    }
    test_variants(h);
    if (getenv("E2E_CHOICE_IN_ARGV") == NULL)
        test_cmdline(h, key);
    hostile_stop(h);
    tmpdir_remove(dir);
    return check_summary();
}
