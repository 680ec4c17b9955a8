/*
 * e2e_console.c — the operator web console end to end: the real
 * ldpref-server on 127.0.0.1 with a real database, data created through the
 * real client library (a campaign, annotators labelling with randomized
 * response, a trained model), and Debian's headless Chromium driven over
 * the DevTools pipe.
 *
 * In the browser: sign in through the page's form; every page shows the
 * figures of the data the test made (compared with the database and the
 * API, never with constants); a retrain started from the form is followed
 * until it succeeds, another is cancelled from the page; an older model
 * is activated after the confirmation;
 * a task file is uploaded; sign-out returns to the form. Every page is
 * saved as a PNG in $LDPREF_BUILD/test-output/ (and, when
 * $LDPREF_CONSOLE_SCREENSHOTS names a folder, there too: docs/console/).
 *
 * Over raw sockets (every header ours to choose): the page's and assets'
 * content types and security headers; the cookie's attributes; a
 * state-changing request with the cookie but without (or with a wrong)
 * CSRF token is 403 csrf_failed; without the cookie 401; from another site
 * (Origin, Sec-Fetch-Site) 403 cross_site_request; a signed-out or expired
 * session 401; a wrong token signs nobody in. The server's log holds none
 * of the tokens, session ids and CSRF tokens the test saw.
 */
#include "annotator_client.h"
#include "cdp.h"
#include "check.h"
#include "console_page.h"
#include "files.h"
#include "http_socket.h"
#include "ldpref.h"
#include "operator_client.h"
#include "server_proc.h"

#include <jansson.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <unistd.h>

#define CAMPAIGN "survey"
#define BUDGET 3.0 /* per annotator: three labels at epsilon 1 exhaust it */
#define CSP                                                                                        \
    "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; "              \
    "connect-src 'self'; frame-ancestors 'none'; base-uri 'none'; form-action 'self'"

static server_proc srv;
static char host[64], origin[96];

/* The first three are gold tasks (their known answer: the chosen one). */
static const char *const TASKS[] = {
    "{\"prompt\": \"Name a prime number above 10.\", \"chosen\": \"11\", \"rejected\": \"12\", "
    "\"gold\": \"a\"}",
    "{\"prompt\": \"Boiling point of water at sea level?\", \"chosen\": \"100 C\", "
    "\"rejected\": \"90 C\", \"gold\": \"a\"}",
    "{\"prompt\": \"Capital of France?\", \"chosen\": \"Paris\", \"rejected\": \"Lyon\", "
    "\"gold\": \"a\"}",
    "{\"prompt\": \"2 + 2?\", \"chosen\": \"4\", \"rejected\": \"5\"}",
    "{\"prompt\": \"Largest planet?\", \"chosen\": \"Jupiter\", \"rejected\": \"Mars\"}",
    "{\"prompt\": \"Opposite of hot?\", \"chosen\": \"cold\", \"rejected\": \"warm\"}",
};
#define NTASKS (sizeof TASKS / sizeof TASKS[0])
/* Labels given by each annotator (the first exhausts its budget). */
static const int LABELS_BY[] = {3, 2, 1};
#define NANNOTATORS (sizeof LABELS_BY / sizeof LABELS_BY[0])

/* ---- raw HTTP ------------------------------------------------------------ */

/* method path to the server, as from the console's own origin unless
 * origin_line says otherwise; extra header lines ("" for none). */
static void request(socket_reply *r, const char *method, const char *path, const char *extra,
                    const char *body)
{
    char req[8192];
    snprintf(req, sizeof req,
             "%s %s HTTP/1.1\r\nHost: %s\r\n%sContent-Length: %zu\r\nConnection: close\r\n\r\n%s",
             method, path, host, extra, body ? strlen(body) : 0, body ? body : "");
    http_socket(srv.port, req, r);
}

/* The value of header name in r into out ("" when absent). */
static void reply_header(const socket_reply *r, const char *name, char *out, size_t cap)
{
    out[0] = '\0';
    size_t n = strlen(name);
    for (const char *p = strstr(r->text, "\r\n"); p && p[2] != '\r'; p = strstr(p + 2, "\r\n")) {
        const char *line = p + 2;
        if (strncasecmp(line, name, n) == 0 && line[n] == ':') {
            const char *v = line + n + 1;
            while (*v == ' ')
                v++;
            const char *end = strstr(v, "\r\n");
            size_t len = end ? (size_t)(end - v) : strlen(v);
            snprintf(out, cap, "%.*s", (int)(len < cap ? len : cap - 1), v);
            return;
        }
    }
}

static const char *reply_error(const socket_reply *r, char *name, size_t cap)
{
    json_t *j = json_loads(socket_reply_body(r), 0, NULL);
    snprintf(name, cap, "%s", json_string_value(json_object_get(j, "error")) ?: "");
    json_decref(j);
    return name;
}

static void check_refused(const char *what, const socket_reply *r, int status, const char *error)
{
    char name[64];
    reply_error(r, name, sizeof name);
    check_record(r->status == status && strcmp(name, error) == 0, __FILE__, __LINE__,
                 "%s: want %d %s, got %d %s", what, status, error, r->status, name);
}

/* Every secret the test saw (token, session ids, CSRF tokens): none may
 * appear in the server's log. */
#define SECRETS_MAX 16
static char secrets[SECRETS_MAX][128];
static int n_secrets;

static void secret(const char *s)
{
    if (n_secrets < SECRETS_MAX && s != NULL && *s)
        snprintf(secrets[n_secrets++], sizeof secrets[0], "%s", s);
}

static void check_log_has_no_secret(const server_proc *s)
{
    char *log = file_read_all(s->log, NULL);
    CHECK(log != NULL && strstr(log, "/v1/console/session") != NULL); /* requests are logged */
    for (int i = 0; log != NULL && i < n_secrets; i++)
        check_record(strstr(log, secrets[i]) == NULL, __FILE__, __LINE__,
                     "the log holds a secret (%.6s...)", secrets[i]);
    free(log);
}

typedef struct session {
    char id[64], csrf[64], cookie[128]; /* cookie: "Cookie: ldpref_session=...\r\n" */
} session;

/* Signs in over a raw socket with token; 0 and *s filled, or -1. */
static int sign_in(const char *token, session *s)
{
    char body[256], set_cookie[256];
    socket_reply r;
    snprintf(body, sizeof body, "{\"token\": \"%s\"}", token);
    request(&r, "POST", "/v1/console/session",
            "Content-Type: application/json\r\nSec-Fetch-Site: same-origin\r\n", body);
    if (r.status != 201)
        return -1;
    reply_header(&r, "Set-Cookie", set_cookie, sizeof set_cookie);
    json_t *j = json_loads(socket_reply_body(&r), 0, NULL);
    snprintf(s->csrf, sizeof s->csrf, "%s",
             json_string_value(json_object_get(j, "csrf_token")) ?: "");
    json_decref(j);
    if (sscanf(set_cookie, "ldpref_session=%63[A-Za-z0-9_-];", s->id) != 1)
        return -1;
    snprintf(s->cookie, sizeof s->cookie, "Cookie: ldpref_session=%s\r\n", s->id);
    secret(s->id);
    secret(s->csrf);
    return 0;
}

/* A state-changing request that the console may make: saving the schedule
 * with extra headers. Returns its reply in r. */
static void put_schedule(socket_reply *r, const char *headers)
{
    char extra[1024];
    snprintf(extra, sizeof extra, "Content-Type: application/json\r\n%s", headers);
    request(r, "PUT", "/v1/retrain/schedule", extra, "{\"interval_s\": 0, \"every_labels\": 0}");
}

static void test_assets(void)
{
    struct {
        const char *path, *type;
    } assets[] = {{"/", "text/html; charset=utf-8"},
                  {"/console/main.js", "text/javascript; charset=utf-8"},
                  {"/console/plot.js", "text/javascript; charset=utf-8"},
                  {"/console/console.css", "text/css; charset=utf-8"},
                  {"/console/favicon.svg", "image/svg+xml"}};
    socket_reply r;
    char value[512];
    for (size_t i = 0; i < sizeof assets / sizeof assets[0]; i++) {
        request(&r, "GET", assets[i].path, "", NULL);
        CHECK_INT(r.status, 200);
        reply_header(&r, "Content-Type", value, sizeof value);
        CHECK_STR(value, assets[i].type);
        CHECK(socket_reply_has_header(&r, "Content-Security-Policy", CSP));
        CHECK(socket_reply_has_header(&r, "X-Content-Type-Options", "nosniff"));
        CHECK(socket_reply_has_header(&r, "Referrer-Policy", "no-referrer"));
        CHECK(socket_reply_has_header(&r, "Cache-Control", "no-store"));
        reply_header(&r, "Set-Cookie", value, sizeof value);
        CHECK_STR(value, ""); /* the page itself holds no secret */
    }
    /* The page has no inline script or style: every script is a file. */
    request(&r, "GET", "/", "", NULL);
    CHECK(strstr(socket_reply_body(&r), "<script type=\"module\" src=\"/console/main.js\">") !=
          NULL);
    CHECK(strstr(socket_reply_body(&r), "<style") == NULL);
    CHECK(strstr(socket_reply_body(&r), "style=") == NULL);
    request(&r, "GET", "/console/nothing.js", "", NULL);
    CHECK_INT(r.status, 404);
    request(&r, "GET", "/console/../README.md", "", NULL);
    CHECK_INT(r.status, 404);
    /* An API answer carries the headers too. */
    request(&r, "GET", "/v1/healthz", "", NULL);
    CHECK(socket_reply_has_header(&r, "X-Content-Type-Options", "nosniff"));
}

static void test_sessions_raw(void)
{
    socket_reply r;
    char value[512], hdr[1024];
    /* A wrong or missing token signs nobody in and says nothing more. */
    request(&r, "POST", "/v1/console/session", "", "{\"token\": \"op_wrong\"}");
    check_refused("a wrong token", &r, 401, "unauthorized");
    reply_header(&r, "Set-Cookie", value, sizeof value);
    CHECK_STR(value, "");
    request(&r, "POST", "/v1/console/session", "", "{\"other\": 1}");
    check_refused("no token", &r, 401, "unauthorized");
    /* Sign-in from another site is refused, even with the right token. */
    char body[256];
    snprintf(body, sizeof body, "{\"token\": \"%s\"}", srv.token);
    request(&r, "POST", "/v1/console/session", "Origin: http://evil.example\r\n", body);
    check_refused("sign-in from a foreign Origin", &r, 403, "cross_site_request");
    request(&r, "POST", "/v1/console/session", "Sec-Fetch-Site: cross-site\r\n", body);
    check_refused("sign-in sent cross-site", &r, 403, "cross_site_request");

    /* The cookie's attributes. */
    snprintf(hdr, sizeof hdr, "Origin: %s\r\nSec-Fetch-Site: same-origin\r\n", origin);
    request(&r, "POST", "/v1/console/session", hdr, body);
    CHECK_INT(r.status, 201);
    reply_header(&r, "Set-Cookie", value, sizeof value);
    char id[64] = "";
    CHECK(sscanf(value,
                 "ldpref_session=%63[A-Za-z0-9_-]; HttpOnly; SameSite=Strict; Path=/; "
                 "Max-Age=28800",
                 id) == 1);
    CHECK_INT(strlen(id), 43);
    CHECK(strstr(value, "Max-Age=28800") != NULL);
    CHECK(strstr(socket_reply_body(&r), id) == NULL); /* the id is in the cookie only */

    session s;
    CHECK_INT(sign_in(srv.token, &s), 0);
    CHECK_INT(strlen(s.csrf), 43);
    request(&r, "GET", "/v1/campaigns", s.cookie, NULL);
    CHECK_INT(r.status, 200); /* the control: reads need the cookie only */
    request(&r, "GET", "/v1/campaigns", "", NULL);
    check_refused("a read without the cookie", &r, 401, "unauthorized");
    /* The cookie among others is found; a look-alike name or value is not. */
    snprintf(hdr, sizeof hdr, "Cookie: theme=dark; ldpref_session=%s; lang=en\r\n", s.id);
    request(&r, "GET", "/v1/campaigns", hdr, NULL);
    CHECK_INT(r.status, 200);
    snprintf(hdr, sizeof hdr, "Cookie: ldpref_session_old=%s\r\n", s.id);
    request(&r, "GET", "/v1/campaigns", hdr, NULL);
    check_refused("a cookie of another name", &r, 401, "unauthorized");
    snprintf(hdr, sizeof hdr, "Cookie: ldpref_session=%sA\r\n", s.id);
    request(&r, "GET", "/v1/campaigns", hdr, NULL);
    check_refused("a longer session id", &r, 401, "unauthorized");
    snprintf(hdr, sizeof hdr, "Cookie: ldpref_session=%.42s\r\n", s.id);
    request(&r, "GET", "/v1/campaigns", hdr, NULL);
    check_refused("a shorter session id", &r, 401, "unauthorized");
    snprintf(hdr, sizeof hdr, "Cookie: ldpref_session=%s\r\n", s.csrf);
    request(&r, "GET", "/v1/campaigns", hdr, NULL);
    check_refused("the CSRF token as the session", &r, 401, "unauthorized");

    put_schedule(&r, s.cookie);
    check_refused("a write with the cookie, without the CSRF token", &r, 403, "csrf_failed");
    snprintf(hdr, sizeof hdr, "%sX-CSRF-Token: %.42s%c\r\n", s.cookie, s.csrf,
             s.csrf[42] == 'A' ? 'B' : 'A');
    put_schedule(&r, hdr);
    check_refused("a write with a wrong CSRF token", &r, 403, "csrf_failed");
    snprintf(hdr, sizeof hdr, "X-CSRF-Token: %s\r\n", s.csrf);
    put_schedule(&r, hdr);
    check_refused("a CSRF token without the cookie", &r, 401, "unauthorized");
    session other;
    CHECK_INT(sign_in(srv.token, &other), 0);
    snprintf(hdr, sizeof hdr, "%sX-CSRF-Token: %s\r\n", s.cookie, other.csrf);
    put_schedule(&r, hdr);
    check_refused("another session's CSRF token", &r, 403, "csrf_failed");

    char ok[1024];
    snprintf(ok, sizeof ok, "%sX-CSRF-Token: %s\r\nOrigin: %s\r\nSec-Fetch-Site: same-origin\r\n",
             s.cookie, s.csrf, origin);
    put_schedule(&r, ok);
    CHECK_INT(r.status, 200); /* the control: cookie, token, same origin */

    /* From another site: refused whatever else the request has right. */
    snprintf(hdr, sizeof hdr, "%sX-CSRF-Token: %s\r\nOrigin: http://evil.example\r\n", s.cookie,
             s.csrf);
    put_schedule(&r, hdr);
    check_refused("a write from a foreign Origin", &r, 403, "cross_site_request");
    snprintf(hdr, sizeof hdr, "%sX-CSRF-Token: %s\r\nOrigin: null\r\n", s.cookie, s.csrf);
    put_schedule(&r, hdr);
    check_refused("a write from an opaque Origin", &r, 403, "cross_site_request");
    snprintf(hdr, sizeof hdr, "%sX-CSRF-Token: %s\r\nSec-Fetch-Site: cross-site\r\n", s.cookie,
             s.csrf);
    put_schedule(&r, hdr);
    check_refused("a write sent cross-site", &r, 403, "cross_site_request");
    snprintf(hdr, sizeof hdr, "%sX-CSRF-Token: %s\r\nSec-Fetch-Site: same-site\r\n", s.cookie,
             s.csrf);
    put_schedule(&r, hdr);
    check_refused("a write from another port of the host", &r, 403, "cross_site_request");
    snprintf(hdr, sizeof hdr, "%sOrigin: http://evil.example\r\n", s.cookie);
    request(&r, "GET", "/v1/campaigns", hdr, NULL);
    check_refused("a read from a foreign Origin", &r, 403, "cross_site_request");
    snprintf(hdr, sizeof hdr, "%sOrigin: http://%s.evil.example\r\n", s.cookie, host);
    request(&r, "GET", "/v1/campaigns", hdr, NULL);
    check_refused("a read from an Origin that starts like ours", &r, 403, "cross_site_request");
    snprintf(hdr, sizeof hdr, "%sOrigin: ftp://%s\r\n", s.cookie, host);
    request(&r, "GET", "/v1/campaigns", hdr, NULL);
    check_refused("a read from another scheme", &r, 403, "cross_site_request");
    snprintf(hdr, sizeof hdr, "%sOrigin: https://%s\r\n", s.cookie, host);
    request(&r, "GET", "/v1/campaigns", hdr, NULL);
    CHECK_INT(r.status, 200); /* the same host through a TLS proxy */
    /* The bearer token works as before, with or without a browser's headers. */
    snprintf(hdr, sizeof hdr, "Authorization: Bearer %s\r\n", srv.token);
    put_schedule(&r, hdr);
    CHECK_INT(r.status, 200);

    /* Sign-out needs the CSRF token; afterwards the cookie opens nothing. */
    request(&r, "DELETE", "/v1/console/session", s.cookie, NULL);
    check_refused("sign-out without the CSRF token", &r, 403, "csrf_failed");
    request(&r, "DELETE", "/v1/console/session", ok, NULL);
    CHECK_INT(r.status, 200);
    reply_header(&r, "Set-Cookie", value, sizeof value);
    CHECK(strstr(value, "ldpref_session=;") == value && strstr(value, "Max-Age=0") != NULL);
    request(&r, "GET", "/v1/campaigns", s.cookie, NULL);
    check_refused("a signed-out session", &r, 401, "unauthorized");
    put_schedule(&r, ok);
    check_refused("a write with a signed-out session", &r, 401, "unauthorized");
    request(&r, "GET", "/v1/console/session", s.cookie, NULL);
    check_refused("the signed-out session's state", &r, 401, "unauthorized");
    /* The other session is untouched. Its state never includes the CSRF
     * token: the cookie alone (which browsers send to every port of a
     * host) does not lead to it. */
    request(&r, "GET", "/v1/console/session", other.cookie, NULL);
    CHECK_INT(r.status, 200);
    CHECK(strstr(socket_reply_body(&r), "\"signed_in\":true") != NULL);
    CHECK(strstr(socket_reply_body(&r), "csrf") == NULL);
    CHECK(strstr(r.text, other.csrf) == NULL);
}

/* A server whose sessions end after one idle second: an expired session
 * is 401 like no session at all. */
static void test_expiry(void)
{
    server_proc quick;
    const char *args[] = {"--console-idle-timeout", "1", NULL};
    if (server_start(&quick, args) != 0) {
        CHECK(!"a second server starts");
        return;
    }
    server_proc saved = srv;
    char saved_host[64];
    snprintf(saved_host, sizeof saved_host, "%s", host);
    srv = quick;
    snprintf(host, sizeof host, "127.0.0.1:%d", srv.port);
    session s;
    socket_reply r;
    CHECK_INT(sign_in(srv.token, &s), 0);
    request(&r, "GET", "/v1/campaigns", s.cookie, NULL);
    CHECK_INT(r.status, 200);
    usleep(1300 * 1000);
    request(&r, "GET", "/v1/campaigns", s.cookie, NULL);
    check_refused("an expired session", &r, 401, "unauthorized");
    server_cleanup(&quick);
    srv = saved;
    snprintf(host, sizeof host, "%s", saved_host);
}

/* ---- data through the real library ---------------------------------------- */

static int write_tasks(const char *path, const char *const *lines, size_t n)
{
    FILE *f = fopen(path, "w");
    if (f == NULL)
        return -1;
    for (size_t i = 0; i < n; i++)
        fprintf(f, "%s\n", lines[i]);
    return fclose(f);
}

/* An annotator of CAMPAIGN who answers `labels` tasks at epsilon 1. */
static void annotate(ldpref_client *op, const char *name, int labels)
{
    char key[400], *json = NULL;
    CHECK_INT(annotator_key_ensure(srv.dir, name, key, sizeof key), LDPREF_OK);
    CHECK_INT(ldpref_admin_enrollment_tokens(op, CAMPAIGN, 1, &json), LDPREF_OK);
    char *token = first_enrollment_token(json);
    ldpref_free(json);
    ldpref_options o;
    annotator_options_init(&o, srv.url, key, 1.0, 1000.0);
    ldpref_client *c = NULL;
    CHECK_INT(ldpref_client_open(&o, &c), LDPREF_OK);
    CHECK_INT(token && c ? ldpref_enroll(c, token, NULL) : -1, LDPREF_OK);
    free(token);
    for (int i = 0; c && i < labels; i++) {
        ldpref_task *t = NULL;
        size_t n = 0;
        ldpref_receipt rec;
        CHECK_INT(ldpref_next_tasks(c, 1, &t, &n), LDPREF_OK);
        CHECK_INT(n, 1);
        if (n == 1)
            CHECK_INT(ldpref_answer(c, &t[0], i % 2 ? LDPREF_CHOICE_B : LDPREF_CHOICE_A, &rec),
                      LDPREF_OK);
        ldpref_tasks_free(t, n);
    }
    ldpref_client_close(c);
}

static void make_data(ldpref_client *op)
{
    ldpref_campaign spec;
    ldpref_campaign_init(&spec);
    spec.name = CAMPAIGN;
    spec.epsilon_budget = BUDGET;
    spec.labels_per_task = 2;
    CHECK_INT(ldpref_admin_campaign_create(op, &spec, NULL), LDPREF_OK);
    char path[400];
    snprintf(path, sizeof path, "%s/tasks.jsonl", srv.dir);
    CHECK_INT(write_tasks(path, TASKS, NTASKS), 0);
    CHECK_INT(ldpref_admin_tasks_load(op, path, CAMPAIGN, NULL), LDPREF_OK);
    for (size_t i = 0; i < NANNOTATORS; i++) {
        char name[32];
        snprintf(name, sizeof name, "ann%zu.key", i);
        annotate(op, name, LABELS_BY[i]);
    }
    /* Model version 1, trained through the library. */
    char *json = NULL;
    CHECK_INT(ldpref_admin_retrain(op, "{\"seed\": 1, \"l2\": 0.01}", &json), LDPREF_OK);
    json_t *run = json_loads(json ? json : "", 0, NULL);
    long long id = json_integer_value(json_object_get(run, "run"));
    json_decref(run);
    ldpref_free(json);
    json = NULL;
    CHECK_INT(ldpref_admin_run_wait(op, id, 50, NULL, NULL, &json), LDPREF_OK);
    ldpref_free(json);
}

/* ---- the browser ---------------------------------------------------------- */

/* 1 if the server offers GET path (with the bearer token): the views of
 * campaigns, annotators and tasks came to the server after the console,
 * which says so on the page when they are missing. */
static int offered(const char *path)
{
    char hdr[256];
    socket_reply r;
    snprintf(hdr, sizeof hdr, "Authorization: Bearer %s\r\n", srv.token);
    request(&r, "GET", path, hdr, NULL);
    return r.status == 200;
}

static void test_campaigns_page(cdp *b)
{
    CHECK(page_go(b, "campaigns"));
    long long tasks = server_db_scalar(&srv,
                                       "SELECT count(*) FROM tasks t JOIN campaigns c ON "
                                       "c.id = t.campaign WHERE c.name = ?1",
                                       CAMPAIGN);
    long long labels = server_db_scalar(&srv,
                                        "SELECT count(*) FROM labels l JOIN tasks t ON "
                                        "t.id = l.task JOIN campaigns c ON c.id = "
                                        "t.campaign WHERE c.name = ?1",
                                        CAMPAIGN);
    long long complete = server_db_scalar(
        &srv,
        "SELECT count(*) FROM (SELECT t.id FROM tasks t JOIN campaigns c ON c.id = "
        "t.campaign JOIN labels l ON l.task = t.id WHERE c.name = ?1 GROUP BY t.id "
        "HAVING count(*) >= 2) AS complete",
        CAMPAIGN);
    CHECK_INT(tasks, NTASKS);
    CHECK_INT(labels, 6);
    char want[128];
    snprintf(want, sizeof want, "%lld / %lld", complete, tasks);
    page_check_cell(b, "campaign-table", CAMPAIGN, 1, want);
    snprintf(want, sizeof want, "%lld / %lld", labels, tasks * 2);
    page_check_cell(b, "campaign-table", CAMPAIGN, 2, want);
    snprintf(want, sizeof want, "%zu", NANNOTATORS);
    page_check_cell(b, "campaign-table", CAMPAIGN, 3, want);
    page_check_cell(b, "campaign-table", "default", 1, "0 / 0");
    /* Picking the campaign shows its progress. */
    json_decref(
        cdp_eval(b, "(() => { const s = document.getElementById('campaign'); s.value = '" CAMPAIGN
                    "'; s.dispatchEvent(new Event('change')); return true; })()"));
    CHECK(cdp_wait_true(
        b, "/Progress of " CAMPAIGN "/.test(document.getElementById('view').textContent)", 10000));
    CHECK(page_wait(b, "campaigns"));
    snprintf(want, sizeof want, "%lld / %lld (", labels, tasks * 2);
    char expr[300];
    snprintf(expr, sizeof expr,
             "[...document.querySelectorAll('#progress .bar-figure')].map(e => e.textContent)"
             ".some(t => t.startsWith('%s'))",
             want);
    CHECK(page_true(b, expr));
    if (offered("/v1/campaigns/view?campaign=" CAMPAIGN)) {
        /* The budget: the first annotator spent all of it (3 labels at
         * epsilon 1), 6 in all; the histogram has a bar per annotator
         * group, and the labels-per-hour columns add up to the labels. */
        char *budget = page_text(b, "document.getElementById('budget').textContent");
        check_record(strstr(budget, "Budget exhausted1 of 3") && strstr(budget, "ε spent in all6"),
                     __FILE__, __LINE__, "budget facts: %s", budget);
        free(budget);
        CHECK(page_true(b, "document.querySelectorAll('svg.plot').length === 2"));
        CHECK(page_true(b, "[...document.querySelectorAll('svg.plot')[1].querySelectorAll('rect."
                           "bar title')].map(t => +t.textContent.split(': ')[1])"
                           ".reduce((a, x) => a + x, 0) === 3"));
    } else {
        CHECK(page_true(b, "/need GET \\/v1\\/campaigns\\/view/.test(document.getElementById("
                           "'view').textContent)"));
    }
    page_screenshot(b, "campaigns", NULL);
}

static void test_models_and_training(cdp *b, ldpref_client *op)
{
    CHECK(page_go(b, "models"));
    CHECK(page_true(b, "document.querySelectorAll('#model-table tbody tr').length === 1"));
    page_check_cell(b, "model-table", "1", 11, "served");
    char *loss = page_cell(b, "model-table", "1", 2);
    CHECK_STR(loss, "square-chipo");
    free(loss);
    CHECK(page_true(b, "/Model version 1/.test(document.getElementById('view').textContent)"));
    /* The privacy of its labels: every one privatized at epsilon 1, so the
     * most one annotator spent in it is its label count (basic composition). */
    page_check_cell(b, "model-table", "1", 10, "ε ≤ 1 per label");
    char want[64];
    int most = 0, labels = 0;
    for (size_t i = 0; i < NANNOTATORS; i++) {
        most = LABELS_BY[i] > most ? LABELS_BY[i] : most;
        labels += LABELS_BY[i];
    }
    snprintf(want, sizeof want, "%d", most);
    page_check_fact(b, "model-detail", "User-level ε (most per annotator)", want);
    snprintf(want, sizeof want, "%zu", NANNOTATORS);
    page_check_fact(b, "model-detail", "Annotators", want);
    page_check_fact(b, "model-detail", "Label ε (privatized)", "1 – 1");
    CHECK(page_true(b, "/every label privatized/.test(document.getElementById('model-detail')"
                       ".textContent)"));
    char *json = NULL;
    CHECK_INT(ldpref_admin_model_get(op, 1, &json), LDPREF_OK);
    json_t *m1 = json_loads(json ? json : "", 0, NULL), *pv = json_object_get(m1, "privacy");
    CHECK_INT(json_integer_value(json_object_get(pv, "labels")), labels);
    CHECK(json_is_true(json_object_get(pv, "privatized")));
    CHECK_INT(json_integer_value(json_object_get(pv, "unprivatized_labels")), 0);
    CHECK(json_real_value(json_object_get(pv, "epsilon_per_annotator")) == (double)most);
    json_decref(m1);
    ldpref_free(json);
    json = NULL;

    /* A retrain from the form (dpo, seed 7), followed until it succeeds. */
    CHECK(page_go(b, "training"));
    CHECK(page_true(b, "(() => { const f = document.getElementById('retrain-form'); "
                       "f.elements.loss.value = 'dpo'; f.elements.seed.value = '7'; "
                       "f.elements.l2.value = '0.01'; return true; })()"));
    CHECK(page_true(b, "document.getElementById('start-run').click() === undefined"));
    int done = cdp_wait_true(b,
                             "document.getElementById('live-run').dataset.run === '2' && "
                             "document.getElementById('live-run').dataset.status === 'succeeded'",
                             20000);
    if (!done) {
        char *live = page_text(b, "document.getElementById('live-run').textContent + ' | ' + "
                                  "document.getElementById('error').textContent");
        fprintf(stderr, "the run did not succeed: %s\n", live);
        free(live);
    }
    CHECK(done);
    CHECK(page_true(b, "/Run 2 succeeded: model version 2/.test(document.getElementById('notice')"
                       ".textContent)"));
    CHECK_INT(server_db_count(&srv, "models"), 2);
    page_screenshot(b, "training", NULL);
    CHECK_INT(ldpref_admin_run_get(op, 2, &json), LDPREF_OK);
    json_t *run = json_loads(json ? json : "", 0, NULL);
    CHECK_STR(json_string_value(json_object_get(json_object_get(run, "request"), "loss")), "dpo");
    CHECK_INT(json_integer_value(json_object_get(json_object_get(run, "request"), "seed")), 7);
    json_decref(run);
    ldpref_free(json);

    /* Activate the older model: the confirmation first, then the swap. */
    CHECK(page_go(b, "models"));
    page_check_cell(b, "model-table", "2", 11, "served");
    /* Escape takes the question back, the focus returns to the button. */
    CHECK(page_true(b, "document.querySelector('#model-table button[data-version=\"1\"]').click() "
                       "=== undefined"));
    CHECK(cdp_wait_true(b, "document.activeElement.classList.contains('confirm-activate')", 5000));
    CHECK(page_true(b, "document.activeElement.dispatchEvent(new KeyboardEvent('keydown', "
                       "{key: 'Escape', bubbles: true}))"));
    CHECK(page_true(b, "document.querySelector('.confirm-activate') === null && "
                       "document.activeElement.dataset.version === '1'"));
    CHECK(page_true(b, "document.querySelector('#model-table button[data-version=\"1\"]').click() "
                       "=== undefined"));
    CHECK(cdp_wait_true(b, "document.querySelector('.confirm-activate') !== null", 5000));
    CHECK(page_true(b, "/Serve version 1 instead of 2\\?/.test(document.getElementById('model-"
                       "table').textContent)"));
    CHECK_INT(server_db_scalar(&srv, "SELECT count(*) FROM models WHERE version = 2", NULL), 1);
    CHECK(page_true(b, "document.querySelector('.confirm-activate').click() === undefined"));
    CHECK(cdp_wait_true(b,
                        "/Version 1 is now served/.test(document.getElementById('notice')"
                        ".textContent)",
                        10000));
    CHECK(page_wait(b, "models"));
    page_check_cell(b, "model-table", "1", 11, "served");
    CHECK_INT(ldpref_admin_models(op, &json), LDPREF_OK);
    json_t *models = json_loads(json ? json : "", 0, NULL);
    CHECK_INT(json_integer_value(json_object_get(models, "active_version")), 1);
    json_decref(models);
    ldpref_free(json);
    page_screenshot(b, "models", NULL);
}

/* The schedule and the corruption settings, edited on the training page. */
static void test_schedule_and_corruption(cdp *b, ldpref_client *op)
{
    CHECK(page_true(b, "(() => { const f = document.getElementById('schedule-form'); "
                       "f.elements.interval_s.value = '3600'; "
                       "f.querySelector('button[type=submit]').click(); return true; })()"));
    CHECK(cdp_wait_true(b, "/Schedule saved/.test(document.getElementById('notice').textContent)",
                        5000));
    CHECK(page_wait(b, "training")); /* shown again as stored */
    CHECK(page_true(b, "document.getElementById('schedule-form').elements.interval_s.value === "
                       "'3600'"));
    char *json = NULL;
    CHECK_INT(ldpref_admin_schedule_get(op, &json), LDPREF_OK);
    json_t *sched = json_loads(json ? json : "", 0, NULL);
    CHECK_INT(json_integer_value(json_object_get(sched, "interval_s")), 3600);
    json_decref(sched);
    ldpref_free(json);

    /* The experiment is marked as one. */
    CHECK(page_true(b, "/^Experiment: label corruption in " CAMPAIGN
                       "/.test(document.querySelector('#corruption h2').textContent)"));
    CHECK(page_true(b, "(() => { const f = document.getElementById('corruption-form'); "
                       "f.elements.alpha.value = '0.1'; f.elements.strategy.value = 'flip'; "
                       "f.elements.corruption_seed.value = '42'; "
                       "f.querySelector('button[type=submit]').click(); return true; })()"));
    CHECK(cdp_wait_true(b,
                        "/Corruption settings 1 of " CAMPAIGN " saved: α 0.1, flip/"
                        ".test(document.getElementById('notice').textContent)",
                        5000));
    CHECK_INT(server_db_scalar(&srv,
                               "SELECT count(*) FROM corruption_settings s JOIN campaigns c ON "
                               "c.id = s.campaign WHERE c.name = ?1 AND s.alpha = 0.1 AND "
                               "s.strategy = 'flip' AND s.seed = 42",
                               CAMPAIGN),
              1);
    CHECK(cdp_wait_true(b,
                        "/In forcesettings 1, α 0.1, flip/.test(document.getElementById("
                        "'corruption').textContent)",
                        5000));
    CHECK(page_wait(b, "training"));
    page_screenshot(b, "experiment", "#corruption");
    /* A value out of range: the server's message is shown, nothing stored. */
    CHECK(page_true(b, "(() => { const f = document.getElementById('corruption-form'); "
                       "f.elements.alpha.value = '0.9'; f.noValidate = true; "
                       "f.querySelector('button[type=submit]').click(); return true; })()"));
    CHECK(cdp_wait_true(b,
                        "!document.getElementById('error').hidden && /bad_corruption/"
                        ".test(document.getElementById('error').textContent)",
                        5000));
    CHECK_INT(server_db_count(&srv, "corruption_settings"), 1);
}

/* A run started from the form and cancelled from the page: it ends
 * cancelled, stores no model, and the served one stays. */
static void test_cancel(cdp *b)
{
    long long models = server_db_count(&srv, "models");
    CHECK(page_go(b, "training"));
    /* SGD for 1000 epochs over text features of 2^20 buckets: long enough. */
    CHECK(page_true(b,
                    "(() => { const f = document.getElementById('retrain-form'); "
                    "f.elements.seed.value = '3'; f.elements.optimizer.value = 'sgd'; "
                    "f.elements.epochs.value = '1000'; f.elements.features.value = 'text'; "
                    "f.elements.text_dim.value = '1048576'; f.elements.activate.checked = false; "
                    "document.getElementById('start-run').click(); return true; })()"));
    CHECK(cdp_wait_true(b, "document.getElementById('cancel-run') !== null", 10000));
    CHECK(page_true(b, "/Cancel run 3/.test(document.getElementById('cancel-run').textContent)"));
    CHECK(page_true(b, "document.getElementById('cancel-run').click() === undefined"));
    CHECK(cdp_wait_true(b, "document.getElementById('live-run').dataset.status === 'cancelled'",
                        15000));
    CHECK(page_true(b, "/Run 3 cancelled/.test(document.getElementById('notice').textContent)"));
    CHECK(page_true(b, "document.getElementById('cancel-run') === null"));
    CHECK_INT(server_db_scalar(&srv,
                               "SELECT count(*) FROM training_runs r JOIN train_settings s ON "
                               "s.id = r.settings WHERE r.id = 3 AND r.status = 'cancelled' AND "
                               "s.optimizer = 'sgd' AND s.epochs = 1000 AND s.text_dim = 1048576",
                               NULL),
              1);
    CHECK_INT(server_db_count(&srv, "models"), models);
    CHECK_INT(
        server_db_scalar(&srv, "SELECT version FROM activations ORDER BY id DESC LIMIT 1", NULL),
        1);
}

/* Puts path in the file input #task-file (DevTools DOM domain). */
static int set_file(cdp *b, const char *path)
{
    json_t *doc = cdp_call(b, "DOM.getDocument", NULL);
    json_int_t root = json_integer_value(json_object_get(json_object_get(doc, "root"), "nodeId"));
    json_decref(doc);
    json_t *q = cdp_call(b, "DOM.querySelector",
                         json_pack("{s:I, s:s}", "nodeId", root, "selector", "#task-file"));
    json_int_t node = json_integer_value(json_object_get(q, "nodeId"));
    json_decref(q);
    if (node <= 0)
        return -1;
    json_t *r = cdp_call(b, "DOM.setFileInputFiles",
                         json_pack("{s:[s], s:I}", "files", path, "nodeId", node));
    int ok = r != NULL;
    json_decref(r);
    return ok ? 0 : -1;
}

static void test_tasks_page(cdp *b)
{
    CHECK(page_go(b, "tasks"));
    static const char *const upload[] = {
        "{\"prompt\": \"Uploaded from the console: <b>bold?</b>\", \"chosen\": \"yes\", "
        "\"rejected\": \"no\"}",
        "{\"prompt\": \"Second uploaded task\", \"responses\": [\"one\", \"two\"]}",
    };
    char path[400];
    snprintf(path, sizeof path, "%s/upload.jsonl", srv.dir);
    CHECK_INT(write_tasks(path, upload, 2), 0);
    long long before = server_db_count(&srv, "tasks");
    CHECK_INT(set_file(b, path), 0);
    CHECK(page_true(b, "document.querySelector('#upload-form button[type=submit]').click() === "
                       "undefined"));
    CHECK(cdp_wait_true(b, "/Loaded 2 tasks/.test(document.getElementById('notice').textContent)",
                        10000));
    CHECK_INT(server_db_count(&srv, "tasks"), before + 2);
    CHECK_INT(server_db_scalar(&srv,
                               "SELECT count(*) FROM tasks t JOIN campaigns c ON c.id = "
                               "t.campaign WHERE c.name = ?1",
                               CAMPAIGN),
              NTASKS + 2);
    CHECK(page_wait(b, "tasks"));
    /* No HTML from data became markup. */
    CHECK(page_true(b, "document.querySelector('#view b') === null"));
    if (offered("/v1/tasks?campaign=" CAMPAIGN)) {
        /* Every task of the campaign, with its labels of the 2 needed; the
         * uploaded one opens with its prompt as text and its label count. */
        char want[64];
        CHECK(page_true(b, "document.querySelectorAll('#task-table tbody tr').length === 8"));
        long long labels_of_1 =
            server_db_scalar(&srv, "SELECT count(*) FROM labels WHERE task = 1", NULL);
        snprintf(want, sizeof want, "%lld / 2", labels_of_1);
        page_check_cell(b, "task-table", "1", 2, want);
        page_check_cell(b, "task-table", "7", 2, "0 / 2");
        CHECK(page_true(b, "(() => { for (const a of document.querySelectorAll('.task-link')) "
                           "if (a.textContent === '7') { a.click(); return true; } "
                           "return false; })()"));
        CHECK(cdp_wait_true(b, "document.getElementById('task-detail') !== null", 5000));
        CHECK(page_true(b, "document.querySelector('#task-holder .prompt').textContent === "
                           "'Uploaded from the console: <b>bold?</b>'"));
        CHECK(page_true(b, "/Labels0 \\/ 2/.test(document.getElementById('task-detail')"
                           ".textContent)"));
        CHECK(page_true(b, "document.querySelector('#view b') === null"));
    }
    page_screenshot(b, "tasks", NULL);
}

static void test_annotators_page(cdp *b)
{
    CHECK(page_go(b, "annotators"));
    if (offered("/v1/annotators?campaign=" CAMPAIGN)) {
        /* One row per annotator: labels 3, 2, 1 at epsilon 1 of a budget
         * of 3, no skips. */
        char *labels = page_column_text(b, "annotator-table", 1);
        char *eps = page_column_text(b, "annotator-table", 2);
        char *skips = page_column_text(b, "annotator-table", 3);
        int seen[4] = {0};
        int ok = 1, rows = 0;
        for (char *l = labels, *e = eps; l && *l; rows++) {
            int n = atoi(l);
            char want[32];
            snprintf(want, sizeof want, "%d / 3", n);
            ok &= n >= 1 && n <= 3 && strncmp(e, want, strlen(want)) == 0;
            if (n >= 1 && n <= 3)
                seen[n]++;
            l = strchr(l, '|') ? strchr(l, '|') + 1 : NULL;
            e = strchr(e, '|') ? strchr(e, '|') + 1 : e + strlen(e);
        }
        check_record(ok && rows == (int)NANNOTATORS && seen[1] == 1 && seen[2] == 1 && seen[3] == 1,
                     __FILE__, __LINE__, "annotators: labels %s, epsilon %s", labels, eps);
        CHECK_STR(skips, "0|0|0");
        CHECK(page_true(b, "[...document.querySelectorAll('#annotator-table tbody tr')].every("
                           "tr => /^ann-/.test(tr.cells[0].textContent))"));
        free(labels);
        free(eps);
        free(skips);
    }
    if (offered("/v1/quality?campaign=" CAMPAIGN)) {
        /* The gold labels per annotator add up to the labels on gold tasks,
         * which the campaign's figures show too. */
        long long gold = server_db_scalar(&srv,
                                          "SELECT count(*) FROM labels l JOIN tasks t ON t.id = "
                                          "l.task WHERE t.gold IS NOT NULL",
                                          NULL);
        CHECK(gold > 0);
        char expr[400];
        snprintf(expr, sizeof expr,
                 "[...document.querySelectorAll('#annotator-table tbody tr')].map(tr => "
                 "+tr.cells[4].textContent).reduce((a, x) => a + x, 0) === %lld",
                 gold);
        CHECK(page_true(b, expr));
        snprintf(expr, sizeof expr,
                 "document.getElementById('quality').textContent.startsWith('Gold labels%lld')",
                 gold);
        CHECK(page_true(b, expr));
        /* Every estimate is shown with its interval. */
        CHECK(page_true(b, "[...document.querySelectorAll('#annotator-table tbody tr')].every(tr "
                           "=> +tr.cells[4].textContent === 0 || /^-?[0-9.]+ \\[-?[0-9.]+, "
                           "-?[0-9.]+\\]$/.test(tr.cells[5].textContent))"));
    }
    page_screenshot(b, "annotators", NULL);
}

static void test_browser(ldpref_client *op)
{
    cdp *b = cdp_start(1280, 800);
    CHECK(b != NULL);
    if (b == NULL)
        return;
    char url[160];
    snprintf(url, sizeof url, "%s/", srv.url);
    CHECK_INT(cdp_navigate(b, url), 0);
    CHECK(cdp_wait_true(b, "!document.getElementById('signin').hidden", 10000));
    page_screenshot(b, "signin", NULL);
    /* A wrong token: the form says so, nothing else changes. */
    CHECK(page_sign_in(b, "op_wrong"));
    CHECK(cdp_wait_true(b, "/Sign-in failed/.test(document.getElementById('error').textContent)",
                        5000));
    CHECK(page_true(b, "document.getElementById('nav').hidden"));
    CHECK(page_sign_in(b, srv.token));
    CHECK(page_wait(b, "campaigns"));
    /* The session cookie is invisible to the page's scripts; the CSRF
     * token is the tab's (sessionStorage). */
    CHECK(page_true(b, "document.cookie === ''"));
    CHECK(page_true(b, "sessionStorage.getItem('ldpref_console_csrf').length === 43"));
    json_t *cookies = cdp_call(b, "Network.getCookies", NULL);
    json_t *c0 = json_array_get(json_object_get(cookies, "cookies"), 0);
    CHECK_STR(json_string_value(json_object_get(c0, "name")), "ldpref_session");
    CHECK(json_is_true(json_object_get(c0, "httpOnly")));
    CHECK_STR(json_string_value(json_object_get(c0, "sameSite")), "Strict");
    secret(json_string_value(json_object_get(c0, "value")));
    json_decref(cookies);
    char *csrf = page_text(b, "sessionStorage.getItem('ldpref_console_csrf') || ''");
    secret(csrf);
    free(csrf);

    test_campaigns_page(b);
    test_annotators_page(b);
    test_models_and_training(b, op);
    test_cancel(b);
    test_tasks_page(b);

    /* A reload keeps the session (the cookie) and fetches the CSRF token
     * again: writes still work. The address keeps page and campaign. */
    char again[300];
    snprintf(again, sizeof again, "%s#training?campaign=" CAMPAIGN, url);
    CHECK_INT(cdp_navigate(b, "about:blank"), 0); /* a new document, not a fragment change */
    CHECK_INT(cdp_navigate(b, again), 0);
    CHECK(page_wait(b, "training"));
    CHECK(page_true(b, "document.getElementById('campaign').value === '" CAMPAIGN "'"));
    test_schedule_and_corruption(b, op);

    /* A narrow window: the layout holds (no horizontal scrolling of the page). */
    json_decref(cdp_call(b, "Emulation.setDeviceMetricsOverride",
                         json_pack("{s:i, s:i, s:f, s:b}", "width", 420, "height", 800,
                                   "deviceScaleFactor", 1.0, "mobile", 0)));
    CHECK(page_go(b, "campaigns"));
    CHECK(page_true(b, "document.documentElement.scrollWidth <= 420"));
    page_screenshot(b, "narrow", NULL);
    json_decref(cdp_call(b, "Emulation.clearDeviceMetricsOverride", NULL));

    /* Sign out: back to the form, and the cookie is gone. */
    CHECK(page_true(b, "document.getElementById('sign-out').click() === undefined"));
    CHECK(cdp_wait_true(b, "!document.getElementById('signin').hidden", 5000));
    cookies = cdp_call(b, "Network.getCookies", NULL);
    CHECK_INT(json_array_size(json_object_get(cookies, "cookies")), 0);
    json_decref(cookies);
    CHECK(page_true(b, "sessionStorage.getItem('ldpref_console_csrf') === null"));

    /* Every request the page made went to the server itself. */
    size_t n = cdp_request_count(b), local = 0;
    for (size_t i = 0; i < n; i++) {
        const char *u = cdp_request_url(b, i);
        int ok = strncmp(u, url, strlen(url)) == 0;
        if (!ok)
            fprintf(stderr, "the page requested %s\n", u);
        local += ok;
    }
    CHECK(n > 20);
    CHECK_INT(local, n);
    cdp_close(b);
}

int main(void)
{
    signal(SIGPIPE, SIG_IGN);
    if (server_start(&srv, NULL) != 0) {
        CHECK(!"server starts");
        return check_summary();
    }
    snprintf(host, sizeof host, "127.0.0.1:%d", srv.port);
    snprintf(origin, sizeof origin, "http://127.0.0.1:%d", srv.port);
    secret(srv.token);
    test_assets();
    test_sessions_raw();
    test_expiry();
    ldpref_client *op = operator_client_open(&srv);
    if (op != NULL) {
        make_data(op);
        test_browser(op);
    }
    ldpref_client_close(op);
    check_log_has_no_secret(&srv);
    server_cleanup(&srv);
    return check_summary();
}
