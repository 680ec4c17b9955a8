/*
 * e2e_ui.c — `ldpref ui` end to end in a real browser: the real
 * ldpref-server on 127.0.0.1, the real `ldpref ui` process (libldpref's page
 * server) and Debian's headless Chromium driven over the DevTools pipe.
 * The annotator answers with the keyboard (1/a, 2/b, t for can't tell, s
 * to skip, ? for help); the labels must arrive at the server through the
 * library (operator export and the database file), skips must not; a
 * conversation's earlier turns are shown; progress, the end of the
 * campaign and a reached quota are said on the page; the page must request
 * nothing but the local process; task text with HTML and <script> must
 * show as text; the page's script exchanges the URL's one-time token for a
 * session secret kept in sessionStorage (no cookies) and a reload keeps
 * it, another browser does not have it; API requests without the session
 * header (everything a browser would send to another 127.0.0.1 port), with
 * a wrong one, or with a foreign Host or Origin are refused (raw HTTP over
 * a socket, so every header is ours to choose). With a browser, `ldpref
 * ui` hands it a 0600 file that redirects to the address, never the token
 * itself, and Chromium follows it. A screenshot is saved
 * in $LDPREF_BUILD/test-output/ (and at $LDPREF_UI_SCREENSHOT when set).
 */
#include "annotator_client.h"
#include "cdp.h"
#include "check.h"
#include "files.h"
#include "http_socket.h"
#include "error.h"
#include "ldpref.h"
#include "operator_client.h"
#include "server_proc.h"

#include <jansson.h>
#include <math.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

/* The first task carries HTML and scripts that must render as text. */
#define HOSTILE_PROMPT "Render this: <script>window.__pwned = 1</script><h1>big</h1>"
/* As JSON string contents. */
#define HOSTILE_A "Plain **bold** and `code`.\\n\\n- first\\n- second"
#define HOSTILE_B "<img src=\\\"/x.png\\\" onerror=\\\"window.__pwned = 2\\\"><b>not bold</b>"

static const char *const TASKS[] = {
    "{\"prompt\": \"" HOSTILE_PROMPT "\", \"chosen\": \"" HOSTILE_A "\", \"rejected\": \"" HOSTILE_B
    "\"}",
    /* TRL's conversational format: two earlier turns before the prompt. */
    "{\"prompt\": [{\"role\": \"user\", \"content\": \"I am learning Python. Can I ask you about "
    "lists?\"}, {\"role\": \"assistant\", \"content\": \"Of course: lists are ordered, mutable "
    "sequences. What would you like to know?\"}, {\"role\": \"user\", \"content\": \"How do I "
    "reverse a list?\"}], \"chosen\": [{\"role\": \"assistant\", \"content\": \"Use slicing: "
    "`items[::-1]` returns a reversed copy, and `items.reverse()` reverses in place.\\n\\n"
    "```\\nitems = [1, 2, 3]\\nprint(items[::-1])  # [3, 2, 1]\\n```\"}], \"rejected\": "
    "[{\"role\": \"assistant\", \"content\": \"Loop over the list backwards with an index and "
    "append each element to a new list.\"}]}",
    "{\"prompt\": \"Name a prime number above 10.\", \"chosen\": \"11\", \"rejected\": \"12\"}",
    "{\"prompt\": \"What is the boiling point of water at sea level?\", \"chosen\": \"100 "
    "degrees Celsius (212 F).\", \"rejected\": \"About 90 degrees Celsius.\"}",
};
#define NTASKS (sizeof TASKS / sizeof TASKS[0])

static server_proc srv;
static int ui_port;
static char ui_url[256], ui_token[128];

/* ---- raw HTTP ------------------------------------------------------------ */

/* A request to the page server: host and origin (NULL: no Origin header)
 * and any extra header lines ("" for none). */
static void ui_request(socket_reply *r, const char *method, const char *path, const char *host,
                       const char *origin, const char *extra, const char *body)
{
    char req[4096], origin_line[256] = "";
    if (origin)
        snprintf(origin_line, sizeof origin_line, "Origin: %s\r\n", origin);
    snprintf(req, sizeof req,
             "%s %s HTTP/1.1\r\nHost: %s\r\n%s%sContent-Length: %zu\r\nConnection: close\r\n\r\n%s",
             method, path, host, origin_line, extra, body ? strlen(body) : 0, body ? body : "");
    http_socket(ui_port, req, r);
}

/* The JSON error name of a reply ("" if none). */
static const char *reply_error(const socket_reply *r, char *name, size_t cap)
{
    json_t *j = json_loads(socket_reply_body(r), 0, NULL);
    snprintf(name, cap, "%s", json_string_value(json_object_get(j, "error")) ?: "");
    json_decref(j);
    return name;
}

static void check_refused(const char *what, const socket_reply *r, int status)
{
    char name[64];
    check_record(
        r->status == status && strcmp(reply_error(r, name, sizeof name), "unauthorized") == 0,
        __FILE__, __LINE__, "%s: want %d unauthorized, got %d %s", what, status, r->status, name);
}

/* ---- set-up -------------------------------------------------------------- */

/* The tasks into campaign (NULL: default). */
static int load_tasks(ldpref_client *op, const char *campaign)
{
    char path[400];
    snprintf(path, sizeof path, "%s/ui-tasks.jsonl", srv.dir);
    FILE *f = fopen(path, "w");
    if (f == NULL)
        return -1;
    for (size_t i = 0; i < NTASKS; i++)
        fprintf(f, "%s\n", TASKS[i]);
    fclose(f);
    return ldpref_admin_tasks_load(op, path, campaign, NULL);
}

/* An annotator key at dir/name, enrolled in campaign (NULL: default). */
static int enroll(ldpref_client *op, const char *campaign, const char *name, char *key,
                  size_t keylen)
{
    char *json = NULL;
    if (annotator_key_ensure(srv.dir, name, key, keylen) != LDPREF_OK ||
        ldpref_admin_enrollment_tokens(op, campaign, 1, &json) != LDPREF_OK)
        return -1;
    char *token = first_enrollment_token(json);
    ldpref_free(json);
    ldpref_options o;
    annotator_options_init(&o, srv.url, key, 1.0, 1000.0);
    ldpref_client *c = NULL;
    int rc = token && ldpref_client_open(&o, &c) == LDPREF_OK ? ldpref_enroll(c, token, NULL) : -1;
    ldpref_client_close(c);
    free(token);
    return rc;
}

/* Starts `ldpref ui` and reads its one line: with --no-browser when
 * browser is NULL, else with $BROWSER set to it, and with the environment
 * entries more (NULL-terminated; NULL for none) too. Returns the pid or -1. */
static pid_t start_ui(const char *key, const char *browser, const char *const *more)
{
    char bin[512], env_server[128], env_key[512], env_browser[512];
    server_bin_path("ldpref", bin, sizeof bin);
    snprintf(env_server, sizeof env_server, "LDPREF_SERVER=%s", srv.url);
    snprintf(env_key, sizeof env_key, "LDPREF_KEY=%s", key);
    snprintf(env_browser, sizeof env_browser, "BROWSER=%s", browser ? browser : "");
    const char *argv[] = {bin, "ui", browser ? NULL : "--no-browser", NULL};
    const char *env[8] = {env_server, env_key, env_browser, NULL};
    for (size_t i = 0; more && more[i] && i < 4; i++)
        env[3 + i] = more[i];
    int fd = -1;
    pid_t pid = spawn_with_stdout(bin, argv, env, &fd);
    if (pid < 0)
        return -1;
    char line[512];
    size_t len = 0;
    struct pollfd p = {fd, POLLIN, 0};
    while (len < sizeof line - 1 && poll(&p, 1, 10000) > 0) {
        ssize_t got = read(fd, line + len, 1);
        if (got <= 0 || line[len] == '\n')
            break;
        len++;
    }
    line[len] = '\0';
    close(fd);
    /* Exactly "ldpref ui: http://127.0.0.1:PORT/?token=TOKEN". */
    char tail = 0;
    int n = sscanf(line, "ldpref ui: http://127.0.0.1:%d/?token=%127[A-Za-z0-9_-]%c", &ui_port,
                   ui_token, &tail);
    check_record(n == 2 && ui_port > 0 && strlen(ui_token) >= 43, __FILE__, __LINE__,
                 "ldpref ui prints its address: \"%s\"", line);
    snprintf(ui_url, sizeof ui_url, "http://127.0.0.1:%d/?token=%s", ui_port, ui_token);
    return pid;
}

/* ---- the checks ---------------------------------------------------------- */

/* Before the browser: the page (no secret in it) is served, but no API
 * call without the session; the token is refused with a foreign Host or
 * Origin or from another site (and stays unspent), and a wrong one is
 * refused. */
static void test_refused_before_session(void)
{
    char host[64], path[256], token[192], with_token[512];
    socket_reply r;
    snprintf(host, sizeof host, "127.0.0.1:%d", ui_port);
    snprintf(path, sizeof path, "/?token=%s", ui_token);
    snprintf(token, sizeof token, "X-Ldpref-Token: %s\r\n", ui_token);

    ui_request(&r, "GET", "/api/task", host, NULL, "", NULL);
    check_refused("no token, no session", &r, 401);
    ui_request(&r, "GET", "/", host, NULL, "", NULL);
    CHECK_INT(r.status, 200); /* the page itself holds no secret */
    CHECK(strstr(r.text, "Set-Cookie") == NULL);
    ui_request(&r, "GET", path, host, NULL, "", NULL);
    CHECK_INT(r.status, 200); /* loading it does not spend the token */
    ui_request(&r, "POST", "/api/session", host, NULL,
               "X-Ldpref-Token: AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA\r\n", NULL);
    check_refused("a wrong token", &r, 401);

    char evil_host[64];
    snprintf(evil_host, sizeof evil_host, "evil.example:%d", ui_port);
    ui_request(&r, "GET", path, evil_host, NULL, "", NULL);
    check_refused("the page with a foreign Host", &r, 403);
    ui_request(&r, "POST", "/api/session", evil_host, NULL, token, NULL);
    check_refused("the token with a foreign Host", &r, 403);
    ui_request(&r, "POST", "/api/session", "evil.example", NULL, token, NULL);
    check_refused("the token with a rebinding Host", &r, 403);
    ui_request(&r, "POST", "/api/session", host, "http://evil.example", token, NULL);
    check_refused("the token with a foreign Origin", &r, 403);
    snprintf(with_token, sizeof with_token, "Sec-Fetch-Site: cross-site\r\n%s", token);
    ui_request(&r, "POST", "/api/session", host, NULL, with_token, NULL);
    check_refused("the token from another site", &r, 403);
    CHECK(socket_reply_has_header(&r, "X-Content-Type-Options", "nosniff"));
}

static long long eval_int(cdp *b, const char *expr)
{
    json_t *v = cdp_eval(b, expr);
    long long n = json_is_number(v) ? (long long)json_number_value(v) : -1;
    json_decref(v);
    return n;
}

static int eval_true(cdp *b, const char *expr)
{
    json_t *v = cdp_eval(b, expr);
    int yes = json_is_true(v);
    json_decref(v);
    return yes;
}

/* Waits for task `id` on screen, ready for keys (the page ignores keys
 * while it is still busy with the previous answer). */
static int wait_task(cdp *b, long long id)
{
    char expr[200];
    snprintf(expr, sizeof expr,
             "!document.getElementById('task').hidden && "
             "document.getElementById('task-id').textContent === '%lld' && "
             "!document.getElementById('btn-a').disabled",
             id);
    return cdp_wait_true(b, expr, 15000);
}

/* The hostile task: its HTML is text, nothing of it runs or loads. */
static void check_hostile_task(cdp *b)
{
    CHECK_INT(eval_int(b, "document.scripts.length"), 1);
    CHECK(eval_true(b, "document.scripts[0].src.endsWith('/app.js')"));
    CHECK(eval_true(b, "window.__pwned === undefined"));
    CHECK(eval_true(b, "document.querySelector('main h1, .pair img, .pair b') === null"));
    CHECK(eval_true(b, "document.getElementById('conversation').textContent.includes("
                       "'<script>window.__pwned = 1</script><h1>big</h1>')"));
    CHECK(eval_true(b, "document.querySelector('.pair').textContent.includes("
                       "'<img src=\"/x.png\" onerror=')"));
    CHECK(eval_true(b, "document.querySelector('.pair').innerText.includes('<b>not bold</b>')"));
    /* The Markdown-ish renderer builds elements for its own markup only
     * (A and B are shown in either order). */
    CHECK_INT(eval_int(b, "document.querySelectorAll('main strong, main code').length"), 2);
    CHECK_INT(eval_int(b, "document.querySelectorAll('main li').length"), 2);
}

static void save_screenshot(cdp *b)
{
    const char *build = getenv("LDPREF_BUILD") ? getenv("LDPREF_BUILD") : "build";
    char dir[512], path[600];
    snprintf(dir, sizeof dir, "%s/test-output", build);
    mkdir(dir, 0755);
    snprintf(path, sizeof path, "%s/ldpref-ui.png", dir);
    CHECK_INT(cdp_screenshot(b, path), 0);
    struct stat st;
    CHECK(stat(path, &st) == 0 && st.st_size > 1000);
    const char *extra = getenv("LDPREF_UI_SCREENSHOT");
    if (extra && extra[0])
        CHECK_INT(cdp_screenshot(b, extra), 0);
}

/* The session secret the page holds (sessionStorage); the browser holds
 * no cookie at all. */
static void session_secret(cdp *b, char *session, size_t slen)
{
    json_t *v = cdp_eval(b, "sessionStorage.getItem('ldpref_session')");
    snprintf(session, slen, "%s", json_string_value(v) ?: "");
    json_decref(v);
    CHECK_INT(strlen(session), 43);
    CHECK(eval_true(b, "document.cookie === ''"));
    json_t *r = cdp_call(b, "Network.getCookies", NULL);
    CHECK(r != NULL && json_array_size(json_object_get(r, "cookies")) == 0);
    json_decref(r);
}

/* With a valid session: a foreign Host or Origin, or a request from another
 * site, is still refused; an answer without the session header or with a
 * wrong one is refused; the spent token opens nothing. */
static void test_refused_with_session(const char *session)
{
    char host[64], evil_host[64], origin[64], hdr[512], both[1024], wrong[1200];
    socket_reply r;
    snprintf(host, sizeof host, "127.0.0.1:%d", ui_port);
    snprintf(evil_host, sizeof evil_host, "evil.example:%d", ui_port);
    snprintf(origin, sizeof origin, "http://127.0.0.1:%d", ui_port);
    snprintf(hdr, sizeof hdr, "X-Ldpref-Session: %s\r\n", session);
    snprintf(both, sizeof both, "%sContent-Type: application/json\r\n", hdr);

    ui_request(&r, "GET", "/api/progress", host, origin, hdr, NULL);
    CHECK_INT(r.status, 200); /* the control: this session works */
    ui_request(&r, "GET", "/api/progress", evil_host, NULL, hdr, NULL);
    check_refused("session with a foreign Host", &r, 403);
    ui_request(&r, "GET", "/api/progress", host, "http://evil.example", hdr, NULL);
    check_refused("session with a foreign Origin", &r, 403);
    ui_request(&r, "GET", "/api/progress", host, "null", hdr, NULL);
    check_refused("session with an opaque Origin", &r, 403);

    long long labels = server_db_count(&srv, "labels");
    char body[128];
    json_t *task = NULL;
    ui_request(&r, "GET", "/api/task", host, origin, hdr, NULL);
    task = json_loads(socket_reply_body(&r), 0, NULL);
    long long id = json_integer_value(json_object_get(json_object_get(task, "task"), "task_id"));
    json_decref(task);
    CHECK(id > 0);
    snprintf(body, sizeof body, "{\"task_id\": %lld, \"choice\": \"a\"}", id);
    ui_request(&r, "POST", "/api/answer", host, origin, "Content-Type: application/json\r\n", body);
    check_refused("an answer without the session header", &r, 401);
    snprintf(wrong, sizeof wrong, "X-Ldpref-Session: %.42s%c\r\nContent-Type: application/json\r\n",
             session, session[42] == 'A' ? 'B' : 'A');
    ui_request(&r, "POST", "/api/answer", host, origin, wrong, body);
    check_refused("an answer with a wrong session", &r, 401);
    ui_request(&r, "POST", "/api/answer", evil_host, "http://evil.example", both, body);
    check_refused("an answer from another site", &r, 403);
    snprintf(wrong, sizeof wrong, "%sSec-Fetch-Site: cross-site\r\n", both);
    ui_request(&r, "POST", "/api/answer", host, NULL, wrong, body);
    check_refused("an answer sent cross-site", &r, 403);
    CHECK_INT(server_db_count(&srv, "labels"), labels);

    char token[192];
    snprintf(token, sizeof token, "X-Ldpref-Token: %s\r\n", ui_token);
    ui_request(&r, "POST", "/api/session", host, origin, token, NULL);
    check_refused("the spent token", &r, 401);
}

/* Another service on 127.0.0.1 (the ldpref server's port stands in for
 * it), visited by the same browser, gets nothing it could replay: the
 * session is in sessionStorage, scoped to the page's origin with its port,
 * and there are no cookies. Replaying everything a browser would send to
 * that port, to ours, is refused. Then back to the page: it still works
 * (the same tab keeps its sessionStorage). */
static void test_other_port(cdp *b)
{
    char other[160], host[64];
    snprintf(other, sizeof other, "%s/", srv.url);
    CHECK_INT(cdp_navigate(b, other), 0);
    char expr[128];
    snprintf(expr, sizeof expr, "location.hostname === '127.0.0.1' && +location.port !== %d",
             ui_port);
    CHECK(eval_true(b, expr));
    CHECK(eval_true(b, "sessionStorage.getItem('ldpref_session') === null"));
    CHECK(eval_true(b, "document.cookie === ''"));
    json_t *r = cdp_call(b, "Network.getCookies", NULL);
    CHECK(r != NULL && json_array_size(json_object_get(r, "cookies")) == 0);
    json_decref(r);
    socket_reply rep;
    snprintf(host, sizeof host, "127.0.0.1:%d", ui_port);
    ui_request(&rep, "GET", "/api/progress", host, NULL,
               "User-Agent: Mozilla/5.0 (X11; Linux x86_64) Chrome/120.0 Safari/537.36\r\n"
               "Accept: */*\r\nAccept-Language: en-US\r\nAccept-Encoding: gzip\r\n",
               NULL);
    check_refused("a replay of what another port's service received", &rep, 401);
}

/* Every label in the operator's export (JSONL) with its task id. */
static int export_has_tasks(ldpref_client *op, const long long *ids, size_t n)
{
    char *text = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&text, &len);
    int rc = f ? ldpref_admin_export(op, NULL, f) : -1;
    if (f)
        fclose(f);
    size_t lines = 0, found = 0;
    for (char *line = text; rc == LDPREF_OK && line && *line;) {
        char *end = strchr(line, '\n');
        json_t *j = json_loadb(line, end ? (size_t)(end - line) : strlen(line), 0, NULL);
        long long id = json_integer_value(json_object_get(j, "task_id"));
        for (size_t i = 0; i < n; i++)
            found += id == ids[i];
        json_decref(j);
        lines++;
        line = end ? end + 1 : NULL;
    }
    free(text);
    return rc == LDPREF_OK && lines == n && found == n ? 0 : -1;
}

static void test_browser_session(ldpref_client *op, const char *key)
{
    cdp *b = cdp_start(1280, 900);
    CHECK(b != NULL);
    if (b == NULL)
        return;
    CHECK_INT(cdp_navigate(b, ui_url), 0);
    /* The token left the address bar (history.replaceState) once the page
     * read it. */
    char home[64];
    snprintf(home, sizeof home, "http://127.0.0.1:%d/", ui_port);
    json_t *href = cdp_eval(b, "location.href");
    CHECK_STR(json_string_value(href), home);
    json_decref(href);

    CHECK(wait_task(b, 1));
    CHECK(eval_true(b, "document.getElementById('central').hidden")); /* a local campaign */
    check_hostile_task(b);
    CHECK_INT(eval_int(b, "document.querySelectorAll('#conversation .turn').length"), 1);
    CHECK(cdp_wait_true(b,
                        "/answered this session/.test("
                        "document.getElementById('progress').textContent)",
                        5000));

    /* '?' toggles the help. */
    CHECK_INT(cdp_key(b, '?'), 0);
    CHECK(cdp_wait_true(b, "!document.getElementById('help').hidden", 5000));
    CHECK_INT(cdp_key(b, '?'), 0);
    CHECK(cdp_wait_true(b, "document.getElementById('help').hidden", 5000));

    /* '1' answers task 1 (A), '2' task 2 (B); each answer is explained. */
    CHECK_INT(cdp_key(b, '1'), 0);
    CHECK(wait_task(b, 2));
    CHECK(eval_true(b, "/Task 1: your answer was randomized on this device before sending/"
                       ".test(document.getElementById('notice').textContent)"));
    CHECK(cdp_wait_true(b,
                        "/^1 answered this session|; 1 answered this session/.test("
                        "document.getElementById('progress').textContent)",
                        5000));
    CHECK(eval_true(b, "document.getElementById('eps-meter').value === 1"));
    /* Task 2 shows its conversation: the two earlier turns, then the prompt. */
    CHECK_INT(eval_int(b, "document.querySelectorAll('#conversation .turn').length"), 3);
    CHECK(eval_true(b, "[...document.querySelectorAll('#conversation .role')].map(e => "
                       "e.textContent).join() === 'user,assistant,user'"));
    CHECK(eval_true(b, "/lists are ordered, mutable sequences/.test("
                       "document.getElementById('conversation').textContent)"));
    CHECK(eval_true(b, "document.querySelector('#conversation .prompt').textContent.includes("
                       "'How do I reverse a list?')"));
    save_screenshot(b);
    CHECK_INT(cdp_key(b, 'b'), 0);
    CHECK(wait_task(b, 3));
    CHECK_INT(server_db_count(&srv, "labels"), 2);
    long long ids[] = {1, 2};
    CHECK_INT(export_has_tasks(op, ids, 2), 0);
    CHECK_INT(server_db_scalar(&srv, "SELECT count(*) FROM labels WHERE epsilon = 1.0", NULL), 2);

    char session[128];
    session_secret(b, session, sizeof session);
    test_refused_with_session(session);
    test_other_port(b);
    /* Back to the page in the same tab (a reload): its session holds. */
    CHECK_INT(cdp_navigate(b, home), 0);
    CHECK(wait_task(b, 3));
    char again[128];
    session_secret(b, again, sizeof again);
    CHECK_STR(again, session);
    /* Another browser (or tab) opening the spent address has no session:
     * the page says the link was used. */
    cdp *b2 = cdp_start(800, 600);
    CHECK(b2 != NULL);
    if (b2) {
        CHECK_INT(cdp_navigate(b2, ui_url), 0);
        CHECK(cdp_wait_true(b2,
                            "!document.getElementById('error').hidden && /already used/.test("
                            "document.getElementById('error').textContent)",
                            15000));
        CHECK(eval_true(b2, "document.getElementById('task').hidden"));
        CHECK(eval_true(b2, "sessionStorage.getItem('ldpref_session') === null"));
        cdp_close(b2);
    }

    /* 's' skips task 3: nothing reaches the server; 't' answers task 4
     * "can't tell": a label with the same epsilon as any other. */
    CHECK_INT(cdp_key(b, 's'), 0);
    CHECK(wait_task(b, 4));
    CHECK(eval_true(b, "/Task 3 skipped/.test(document.getElementById('notice').textContent)"));
    CHECK_INT(server_db_count(&srv, "labels"), 2);
    CHECK_INT(cdp_key(b, 't'), 0);
    CHECK(cdp_wait_true(b, "!document.getElementById('done').hidden", 15000));
    CHECK(eval_true(b, "/No task is available/.test(document.getElementById('done').textContent)"));
    CHECK_INT(server_db_count(&srv, "labels"), 3);
    CHECK_INT(server_db_scalar(&srv, "SELECT count(*) FROM labels WHERE epsilon = 1.0", NULL), 3);
    CHECK(cdp_wait_true(b,
                        "/^3 of 4 tasks complete in default; 3 answered this session, 1 skipped/"
                        ".test(document.getElementById('progress').textContent)",
                        5000));

    /* Another annotator labels the skipped task: the campaign is complete,
     * and the page says so when asked again. */
    char key2[400];
    CHECK_INT(enroll(op, NULL, "other.key", key2, sizeof key2), LDPREF_OK);
    ldpref_options o;
    annotator_options_init(&o, srv.url, key2, 1.0, 1000.0);
    ldpref_client *other = NULL;
    ldpref_task *tasks = NULL;
    size_t n = 0;
    ldpref_receipt receipt;
    CHECK_INT(ldpref_client_open(&o, &other), LDPREF_OK);
    CHECK_INT(ldpref_next_tasks(other, 1, &tasks, &n), LDPREF_OK);
    CHECK(n == 1 && tasks[0].task_id == 3);
    if (n == 1)
        CHECK_INT(ldpref_answer(other, &tasks[0], LDPREF_CHOICE_A, &receipt), LDPREF_OK);
    ldpref_tasks_free(tasks, n);
    ldpref_client_close(other);
    CHECK(eval_true(b, "document.querySelector('#done button').click() === undefined"));
    CHECK(cdp_wait_true(
        b, "/campaign is complete/.test(document.getElementById('done').textContent)", 15000));
    long long all[] = {1, 2, 3, 4};
    CHECK_INT(export_has_tasks(op, all, 4), 0);

    /* Every request the page made went to the local process. */
    char visited[160];
    snprintf(visited, sizeof visited, "%s/", srv.url); /* the test's own (test_other_port) */
    size_t vlen = strlen(visited);
    size_t local = 0;
    n = cdp_request_count(b);
    for (size_t i = 0; i < n; i++) {
        const char *url = cdp_request_url(b, i);
        int ok = strncmp(url, home, strlen(home)) == 0 || strncmp(url, visited, vlen) == 0;
        if (!ok)
            fprintf(stderr, "the page requested %s\n", url);
        local += ok;
    }
    CHECK(n >= 6); /* page, css, js, favicon, task, progress, ... */
    CHECK_INT(local, n);
    cdp_close(b);
}

/* Stops the `ldpref ui` process pid: SIGTERM, exit status 0. */
static void stop_ui(pid_t pid)
{
    kill(pid, SIGTERM);
    int status = 0;
    CHECK(waitpid(pid, &status, 0) == pid && WIFEXITED(status) && WEXITSTATUS(status) == 0);
}

/* A campaign with a quota of one label per annotator: after one answer the
 * page says the quota is reached, and shows it in the progress line. */
static void test_quota(ldpref_client *op)
{
    ldpref_campaign spec;
    ldpref_campaign_init(&spec);
    spec.name = "quota";
    spec.annotator_quota = 1;
    CHECK_INT(ldpref_admin_campaign_create(op, &spec, NULL), LDPREF_OK);
    CHECK_INT(load_tasks(op, "quota"), LDPREF_OK);
    char key[400];
    CHECK_INT(enroll(op, "quota", "quota.key", key, sizeof key), LDPREF_OK);
    long long labels = server_db_count(&srv, "labels");
    pid_t ui = start_ui(key, NULL, NULL);
    cdp *b = ui > 0 && ui_port > 0 ? cdp_start(1024, 768) : NULL;
    CHECK(b != NULL);
    if (b) {
        CHECK_INT(cdp_navigate(b, ui_url), 0);
        CHECK(cdp_wait_true(b, "!document.getElementById('task').hidden", 15000));
        CHECK_INT(cdp_key(b, 'a'), 0);
        CHECK(cdp_wait_true(b,
                            "/reached your quota/.test(document.getElementById('done')"
                            ".textContent)",
                            15000));
        CHECK(cdp_wait_true(b,
                            "/in quota; 1 answered this session \\(your quota 1 of 1\\)/"
                            ".test(document.getElementById('progress').textContent)",
                            5000));
        cdp_close(b);
    }
    CHECK_INT(server_db_count(&srv, "labels"), labels + 1);
    if (ui > 0)
        stop_ui(ui);
}

/* The argument `ldpref ui` gave $BROWSER (the script writes it to
 * dir/opened), without the newline; NULL if none came. */
static char *browser_argument(const char *opened)
{
    char *text = NULL;
    for (int i = 0; i < 200 && (text = file_read_all(opened, NULL)) == NULL; i++)
        usleep(25000);
    if (text && strchr(text, '\n'))
        *strchr(text, '\n') = '\0';
    return text;
}

/* Without --no-browser, $BROWSER (here a script that writes its argument to
 * a file) gets a file:// URL of a 0600 page in dir that redirects to the
 * address, never the address (its token would be on the command line of
 * the browser, readable by any local user). Chromium opened on that file
 * follows it to the page. The file is removed when ldpref ui stops. With
 * XDG_RUNTIME_DIR usable the file is there, else in a 0700 directory of its
 * own under $TMPDIR. */
static void check_opens_browser(const char *key, const char *const *env, const char *dir,
                                int own_dir)
{
    char script[512], opened[512];
    snprintf(script, sizeof script, "%s/browser.sh", srv.dir);
    snprintf(opened, sizeof opened, "%s/opened", srv.dir);
    unlink(opened);
    FILE *f = fopen(script, "w");
    if (f) {
        fprintf(f, "#!/bin/sh\necho \"$1\" > \"%s.tmp\" && mv \"%s.tmp\" \"%s\"\n", opened, opened,
                opened);
        fclose(f);
    }
    CHECK(chmod(script, 0700) == 0);
    pid_t ui = start_ui(key, script, env);
    CHECK(ui > 0);
    char *arg = browser_argument(opened);
    CHECK(arg != NULL);
    char prefix[600], path[600] = "";
    snprintf(prefix, sizeof prefix, "file://%s/", dir);
    if (arg) {
        check_record(strncmp(arg, prefix, strlen(prefix)) == 0 && strstr(arg, ui_token) == NULL &&
                         strstr(arg, "token") == NULL,
                     __FILE__, __LINE__, "the browser gets a file in %s, not the token: %s", dir,
                     arg);
        snprintf(path, sizeof path, "%s", arg + 7);
    }
    struct stat st;
    CHECK(path[0] && lstat(path, &st) == 0 && S_ISREG(st.st_mode) && (st.st_mode & 07777) == 0600);
    if (own_dir) {
        char parent[600];
        snprintf(parent, sizeof parent, "%s", path);
        if (strrchr(parent, '/'))
            *strrchr(parent, '/') = '\0';
        CHECK(strlen(parent) > strlen(dir) && lstat(parent, &st) == 0 && S_ISDIR(st.st_mode) &&
              (st.st_mode & 07777) == 0700);
    }
    char *html = path[0] ? file_read_all(path, NULL) : NULL;
    char refresh[400];
    snprintf(refresh, sizeof refresh, "<meta http-equiv=\"refresh\" content=\"0;url=%s\">", ui_url);
    CHECK(html != NULL && strstr(html, refresh) != NULL);
    snprintf(refresh, sizeof refresh, "<a href=\"%s\">", ui_url);
    CHECK(html != NULL && strstr(html, refresh) != NULL);
    free(html);

    /* Chromium, opened on the file, lands on the page with a session. */
    cdp *b = arg ? cdp_start(800, 600) : NULL;
    CHECK(b != NULL);
    if (b) {
        char home[64], expr[512];
        snprintf(home, sizeof home, "http://127.0.0.1:%d/", ui_port);
        CHECK_INT(cdp_navigate(b, arg), 0);
        snprintf(expr, sizeof expr,
                 "location.href === '%s' && sessionStorage.getItem('ldpref_session') !== null && "
                 "(!document.getElementById('task').hidden || "
                 "!document.getElementById('done').hidden)",
                 home);
        CHECK(cdp_wait_true(b, expr, 15000));
        CHECK(eval_true(b, "document.getElementById('error').hidden"));
        cdp_close(b);
    }
    free(arg);
    if (ui > 0)
        stop_ui(ui);
    CHECK(path[0] && access(path, F_OK) != 0); /* removed on exit */
    if (own_dir && path[0]) {
        *strrchr(path, '/') = '\0';
        CHECK(access(path, F_OK) != 0);
    }
}

static void test_opens_browser(const char *key)
{
    char run[400], tmp[400], env_run[420], env_tmp[420];
    snprintf(run, sizeof run, "%s/run", srv.dir);
    snprintf(tmp, sizeof tmp, "%s/tmp", srv.dir);
    CHECK(mkdir(run, 0700) == 0 && mkdir(tmp, 0700) == 0);
    snprintf(env_run, sizeof env_run, "XDG_RUNTIME_DIR=%s", run);
    snprintf(env_tmp, sizeof env_tmp, "TMPDIR=%s", tmp);
    const char *in_run[] = {env_run, NULL};
    check_opens_browser(key, in_run, run, 0);
    const char *in_tmp[] = {"XDG_RUNTIME_DIR=", env_tmp, NULL};
    check_opens_browser(key, in_tmp, tmp, 1);
}

/* The command's own errors: a bad port, a missing key. */
static void test_cli_errors(const char *key)
{
    char env_server[128], env_key[512], missing[512];
    snprintf(env_server, sizeof env_server, "LDPREF_SERVER=%s", srv.url);
    snprintf(env_key, sizeof env_key, "LDPREF_KEY=%s", key);
    snprintf(missing, sizeof missing, "LDPREF_KEY=%s/none.key", srv.dir);
    const char *env[] = {env_server, env_key, NULL};
    const char *env_missing[] = {env_server, missing, NULL};
    char *out = NULL;
    const char *bad_port[] = {"ldpref", "ui", "--no-browser", "--port", "65536", NULL};
    CHECK_INT(run_tool(bad_port, env, &out), LDPREF_EINVALID_ARGUMENT);
    CHECK(out != NULL && out[0] == '\0'); /* nothing on stdout */
    free(out);
    const char *no_key[] = {"ldpref", "ui", "--no-browser", NULL};
    CHECK_INT(run_tool(no_key, env_missing, NULL), LDPREF_EKEY_FILE);
    const char *help[] = {"ldpref", "ui", "--help", NULL};
    CHECK_INT(run_tool(help, env, &out), 0);
    CHECK(out != NULL && strstr(out, "ldpref ui: http://127.0.0.1:PORT/?token=TOKEN") != NULL);
    free(out);
}

/* A central campaign: the banner says, before the answer, that the true
 * answer is sent (the annotator opted in with infinite caps), and it is. */
static void test_central_banner(ldpref_client *op)
{
    operator_central_campaign(op, "central", 1);
    char key[400];
    CHECK_INT(load_tasks(op, "central"), LDPREF_OK);
    CHECK_INT(enroll(op, "central", "central.key", key, sizeof key), LDPREF_OK);
    const char *opted_in[] = {"LDPREF_EPSILON_CAP=inf", "LDPREF_EPSILON_TOTAL_CAP=inf", NULL};
    pid_t ui = start_ui(key, NULL, opted_in);
    cdp *b = ui > 0 ? cdp_start(1280, 900) : NULL;
    CHECK(b != NULL);
    if (b != NULL) {
        CHECK_INT(cdp_navigate(b, ui_url), 0);
        CHECK(cdp_wait_true(b,
                            "!document.getElementById('task').hidden && "
                            "!document.getElementById('btn-a').disabled",
                            15000));
        CHECK(eval_true(b, "!document.getElementById('central').hidden"));
        CHECK(eval_true(b, "/your answer is sent as it is, not randomized/.test("
                           "document.getElementById('central').textContent)"));
        CHECK(eval_true(b, "document.getElementById('task-eps').textContent === "
                           "'your true answer is sent'"));
        const char *build = getenv("LDPREF_BUILD") ? getenv("LDPREF_BUILD") : "build";
        char path[600];
        snprintf(path, sizeof path, "%s/test-output/ldpref-ui-central.png", build);
        CHECK_INT(cdp_screenshot(b, path), 0);
        CHECK_INT(server_db_scalar(&srv,
                                   "SELECT count(*) FROM labels l JOIN tasks t ON t.id = l.task "
                                   "JOIN campaigns c ON c.id = t.campaign WHERE c.name = ?1",
                                   "central"),
                  0); /* nothing sent before the answer */
        CHECK(eval_true(b, "(() => { document.getElementById('btn-a').click(); return true; })()"));
        CHECK(cdp_wait_true(b,
                            "/your true answer \"A\" was sent as it is/.test("
                            "document.getElementById('notice').textContent)",
                            10000));
        CHECK_INT(server_db_scalar(&srv,
                                   "SELECT count(*) FROM labels l JOIN tasks t ON t.id = l.task "
                                   "JOIN campaigns c ON c.id = t.campaign WHERE c.name = ?1 AND "
                                   "l.epsilon IS NULL",
                                   "central"),
                  1);
        cdp_close(b);
    }
    if (ui > 0)
        stop_ui(ui);
}

int main(void)
{
    signal(SIGPIPE, SIG_IGN);
    if (server_start(&srv, NULL) != 0) {
        CHECK(!"server starts");
        return check_summary();
    }
    ldpref_client *op = operator_client_open(&srv);
    char key[400];
    CHECK_INT(op ? load_tasks(op, NULL) : -1, LDPREF_OK);
    CHECK_INT(op ? enroll(op, NULL, "ui.key", key, sizeof key) : -1, LDPREF_OK);
    test_cli_errors(key);
    pid_t ui = start_ui(key, NULL, NULL);
    CHECK(ui > 0);
    if (ui > 0 && ui_port > 0) {
        test_refused_before_session();
        test_browser_session(op, key);
        stop_ui(ui);
        test_quota(op);
        test_opens_browser(key);
        test_central_banner(op);
    } else if (ui > 0) {
        kill(ui, SIGKILL);
        waitpid(ui, NULL, 0);
    }
    ldpref_client_close(op);
    server_cleanup(&srv);
    return check_summary();
}
