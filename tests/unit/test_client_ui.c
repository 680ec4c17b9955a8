/*
 * test_client_ui.c — the local web page server of libldpref (client/lib/ui.c)
 * on its own, without a browser and with no ldpref server behind it (the
 * handle points at a closed port): start/stop and their argument errors,
 * the printed address, the one-time token exchange for the session secret
 * (no cookies, ever), the gate's Host, Origin and Sec-Fetch-Site checks, the
 * security headers, the embedded files, and the named error of every bad
 * request. Raw HTTP over a socket, so every header is the test's own.
 */
#include "ldpref.h"

#include "annotator_client.h"
#include "check.h"
#include "error.h"
#include "http_socket.h"
#include "ports.h"
#include "tmpdir.h"

#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static char dir[64], key[256], unreachable[64];
static ldpref_client *client;

static ldpref_client *open_client(void)
{
    ldpref_options o;
    annotator_options_init(&o, unreachable, key, 1.0, 1000.0);
    o.timeout_ms = 2000;
    ldpref_client *c = NULL;
    CHECK_ERR(ldpref_client_open(&o, &c), LP_OK);
    return c;
}

static int url_port(const ldpref_ui *ui)
{
    int port = 0;
    sscanf(ldpref_ui_url(ui), "http://127.0.0.1:%d/", &port);
    return port;
}

static const char *url_token(const ldpref_ui *ui)
{
    const char *t = strstr(ldpref_ui_url(ui), "/?token=");
    return t ? t + 8 : "";
}

/* Replies that set a cookie (there must be none). */
static int cookies_set;

static void count_cookies(const socket_reply *r)
{
    const char *end = strstr(r->text, "\r\n\r\n");
    for (const char *c = r->text; (c = strstr(c, "\r\nSet-Cookie")) != NULL && (!end || c < end);
         c++)
        cookies_set++;
}

/* One request with the given Host; extra: header lines or "". */
static void request_host(int port, socket_reply *r, const char *host, const char *method,
                         const char *path, const char *extra, const char *body)
{
    char req[16384];
    snprintf(req, sizeof req,
             "%s %s HTTP/1.1\r\nHost: %s\r\n%sContent-Length: %zu\r\n"
             "Connection: close\r\n\r\n%s",
             method, path, host, extra, body ? strlen(body) : 0, body ? body : "");
    http_socket(port, req, r);
    count_cookies(r);
}

/* One request with the page's own Host. */
static void request(int port, socket_reply *r, const char *method, const char *path,
                    const char *extra, const char *body)
{
    char host[64];
    snprintf(host, sizeof host, "127.0.0.1:%d", port);
    request_host(port, r, host, method, path, extra, body);
}

static void check_error(const char *what, const socket_reply *r, int status, int code)
{
    json_t *j = json_loads(socket_reply_body(r), 0, NULL);
    const char *name = json_string_value(json_object_get(j, "error"));
    int has_message = json_is_string(json_object_get(j, "message"));
    check_record(r->status == status && name && strcmp(name, lp_error_name(code)) == 0 &&
                     has_message,
                 __FILE__, __LINE__, "%s: want %d %s, got %d %s", what, status, lp_error_name(code),
                 r->status, socket_reply_body(r));
    json_decref(j);
}

static void test_start_arguments(void)
{
    ldpref_ui_options o;
    ldpref_ui_options_init(&o);
    CHECK_INT(o.port, 0);
    ldpref_ui *ui = (ldpref_ui *)&o;
    CHECK_ERR(ldpref_ui_start(NULL, &o, &ui), LP_EINVALID_ARGUMENT);
    CHECK(ui == NULL);
    CHECK_ERR(ldpref_ui_start(client, NULL, &ui), LP_EINVALID_ARGUMENT);
    o.port = -1;
    CHECK_ERR(ldpref_ui_start(client, &o, &ui), LP_EINVALID_ARGUMENT);
    o.port = 65536;
    CHECK_ERR(ldpref_ui_start(client, &o, &ui), LP_EINVALID_ARGUMENT);
    CHECK(ui == NULL);
    ldpref_ui_stop(NULL);
    CHECK_STR(ldpref_ui_url(NULL), "");
}

/* A chosen port is used; a port in use is LDPREF_EIO; two servers draw
 * different tokens; a stopped server's port is closed. */
static void test_ports_and_tokens(void)
{
    ldpref_ui_options o;
    ldpref_ui_options_init(&o);
    o.port = closed_port();
    ldpref_ui *one = NULL, *two = NULL;
    CHECK_ERR(ldpref_ui_start(client, &o, &one), LP_OK);
    CHECK_INT(url_port(one), o.port);
    CHECK_INT(strlen(url_token(one)), 43);
    ldpref_client *other = open_client();
    CHECK_ERR(ldpref_ui_start(other, &o, &two), LP_EIO);
    CHECK(two == NULL);
    o.port = 0;
    CHECK_ERR(ldpref_ui_start(other, &o, &two), LP_OK);
    CHECK(url_port(two) > 0 && url_port(two) != url_port(one));
    CHECK(strcmp(url_token(one), url_token(two)) != 0);
    int port = url_port(one);
    ldpref_ui_stop(one);
    socket_reply r;
    request(port, &r, "GET", "/", "", NULL);
    CHECK_INT(r.status, 0);
    ldpref_ui_stop(two);
    ldpref_client_close(other);
}

static void test_session(void)
{
    ldpref_ui_options o;
    ldpref_ui_options_init(&o);
    ldpref_ui *ui = NULL;
    CHECK_ERR(ldpref_ui_start(client, &o, &ui), LP_OK);
    int port = url_port(ui);
    char path[128], token[128], evil[64], session[64] = "";
    snprintf(path, sizeof path, "/?token=%s", url_token(ui));
    snprintf(token, sizeof token, "X-Ldpref-Token: %s\r\n", url_token(ui));
    snprintf(evil, sizeof evil, "evil.example:%d", port);
    socket_reply r;

    /* The page holds no secret: served with or without the token, and the
     * token in its URL is not spent by loading it. */
    request(port, &r, "GET", path, "", NULL);
    CHECK_INT(r.status, 200);
    CHECK(socket_reply_has_header(&r, "Content-Type", "text/html; charset=utf-8"));
    CHECK(socket_reply_has_header(
        &r, "Content-Security-Policy",
        "default-src 'none'; script-src 'self'; style-src 'self'; connect-src 'self'; "
        "img-src 'self'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'"));
    CHECK(socket_reply_has_header(&r, "X-Content-Type-Options", "nosniff"));
    CHECK(socket_reply_has_header(&r, "Referrer-Policy", "no-referrer"));
    CHECK(socket_reply_has_header(&r, "Cache-Control", "no-store"));
    request(port, &r, "GET", "/", "", NULL);
    CHECK_INT(r.status, 200);

    /* Sec-Fetch-Site: the page may be navigated to from anywhere (the
     * file:// redirect is cross-site), nothing else may. */
    static const char nav[] = "Sec-Fetch-Site: cross-site\r\nSec-Fetch-Mode: navigate\r\n"
                              "Sec-Fetch-Dest: document\r\n";
    request(port, &r, "GET", path, nav, NULL);
    CHECK_INT(r.status, 200);
    request(port, &r, "GET", "/", "Sec-Fetch-Site: none\r\n", NULL);
    CHECK_INT(r.status, 200);
    request(port, &r, "GET", "/app.js", nav, NULL);
    check_error("a script loaded by another site", &r, 403, LP_EUNAUTHORIZED);
    request(port, &r, "GET", "/",
            "Sec-Fetch-Site: cross-site\r\nSec-Fetch-Mode: no-cors\r\n"
            "Sec-Fetch-Dest: iframe\r\n",
            NULL);
    check_error("the page in another site's frame", &r, 403, LP_EUNAUTHORIZED);
    char api_nav[512];
    snprintf(api_nav, sizeof api_nav, "%s%s", nav, token);
    request(port, &r, "POST", "/api/session", api_nav, NULL);
    check_error("the exchange from another site", &r, 403, LP_EUNAUTHORIZED);
    snprintf(api_nav, sizeof api_nav, "Sec-Fetch-Site: none\r\n%s", token);
    request(port, &r, "POST", "/api/session", api_nav, NULL);
    check_error("the exchange from the address bar", &r, 403, LP_EUNAUTHORIZED);

    /* The exchange, refused before the token is looked at with a foreign
     * Host or Origin (the token stays unspent), and without or with a
     * wrong token. */
    request_host(port, &r, evil, "POST", "/api/session", token, NULL);
    check_error("the exchange with a foreign Host", &r, 403, LP_EUNAUTHORIZED);
    char foreign[512];
    snprintf(foreign, sizeof foreign, "Origin: http://evil.example\r\n%s", token);
    request(port, &r, "POST", "/api/session", foreign, NULL);
    check_error("the exchange with a foreign Origin", &r, 403, LP_EUNAUTHORIZED);
    request(port, &r, "POST", "/api/session", "", NULL);
    check_error("the exchange without the token", &r, 401, LP_EUNAUTHORIZED);
    request(port, &r, "POST", "/api/session",
            "X-Ldpref-Token: AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA\r\n", NULL);
    check_error("a wrong token", &r, 401, LP_EUNAUTHORIZED);
    request(port, &r, "GET", "/api/session", token, NULL);
    check_error("GET of the exchange", &r, 405, LP_EMETHOD_NOT_ALLOWED);
    char origin[512];
    snprintf(origin, sizeof origin,
             "Origin: http://127.0.0.1:%d\r\nSec-Fetch-Site: same-origin\r\n%s", port, token);
    request(port, &r, "POST", "/api/session", origin, NULL);
    CHECK_INT(r.status, 200);
    CHECK(socket_reply_has_header(&r, "Content-Type", "application/json"));
    CHECK(socket_reply_has_header(&r, "Cache-Control", "no-store"));
    json_t *j = json_loads(socket_reply_body(&r), 0, NULL);
    const char *s = json_string_value(json_object_get(j, "session"));
    snprintf(session, sizeof session, "%s", s ? s : "");
    CHECK_INT(json_object_size(j), 1);
    json_decref(j);
    CHECK_INT(strlen(session), 43);
    CHECK(strcmp(session, url_token(ui)) != 0);

    /* Spent: the token opens nothing again. */
    request(port, &r, "POST", "/api/session", token, NULL);
    check_error("the spent token", &r, 401, LP_EUNAUTHORIZED);
    CHECK(strstr(socket_reply_body(&r), "already used") != NULL);

    /* The session header: required on every API call (401 without, with a
     * wrong one, or with the token instead), and still not enough with a
     * foreign Host or Origin or from another site. */
    char hdr[256], wrong[256], post[512];
    snprintf(hdr, sizeof hdr, "X-Ldpref-Session: %s\r\n", session);
    request(port, &r, "GET", "/api/progress", hdr, NULL);
    CHECK_INT(r.status, 200);
    request(port, &r, "GET", "/api/progress", "", NULL);
    check_error("no session", &r, 401, LP_EUNAUTHORIZED);
    snprintf(wrong, sizeof wrong, "X-Ldpref-Session: %.42s%c\r\n", session,
             session[42] == 'A' ? 'B' : 'A'); /* one character off */
    request(port, &r, "GET", "/api/progress", wrong, NULL);
    check_error("a wrong session", &r, 401, LP_EUNAUTHORIZED);
    snprintf(wrong, sizeof wrong, "X-Ldpref-Session: %s\r\n", url_token(ui));
    request(port, &r, "GET", "/api/task", wrong, NULL);
    check_error("the token as the session", &r, 401, LP_EUNAUTHORIZED);
    request(port, &r, "POST", "/api/skip", "Content-Type: application/json\r\n",
            "{\"task_id\": 1}");
    check_error("a skip without a session", &r, 401, LP_EUNAUTHORIZED);
    request_host(port, &r, evil, "GET", "/api/progress", hdr, NULL);
    check_error("a session with a foreign Host", &r, 403, LP_EUNAUTHORIZED);
    request_host(port, &r, "evil.example", "GET", "/api/progress", hdr, NULL);
    check_error("a session with a rebinding Host", &r, 403, LP_EUNAUTHORIZED);
    snprintf(foreign, sizeof foreign, "%sOrigin: http://evil.example\r\n", hdr);
    request(port, &r, "GET", "/api/progress", foreign, NULL);
    check_error("a session with a foreign Origin", &r, 403, LP_EUNAUTHORIZED);
    snprintf(foreign, sizeof foreign, "%sOrigin: http://127.0.0.1:1\r\n", hdr);
    request(port, &r, "GET", "/api/progress", foreign, NULL);
    check_error("a session with another port's Origin", &r, 403, LP_EUNAUTHORIZED);
    snprintf(foreign, sizeof foreign, "%sSec-Fetch-Site: same-site\r\n", hdr);
    request(port, &r, "GET", "/api/progress", foreign, NULL);
    check_error("a session from another port's page", &r, 403, LP_EUNAUTHORIZED);
    /* Refused on its headers: a request announcing a large body without a
     * session is answered before any of the body is read (none is sent). */
    char announce[256];
    snprintf(announce, sizeof announce,
             "POST /api/answer HTTP/1.1\r\nHost: 127.0.0.1:%d\r\nContent-Type: "
             "application/json\r\nContent-Length: 1000000\r\n\r\n",
             port);
    http_socket(port, announce, &r);
    count_cookies(&r);
    check_error("a large body without a session", &r, 401, LP_EUNAUTHORIZED);
    const char *cookie = hdr;

    /* The embedded files. */
    static const struct {
        const char *path, *type, *contains;
    } files[] = {{"/", "text/html; charset=utf-8", "<script src=\"/app.js\""},
                 {"/index.html", "text/html; charset=utf-8", "Response A"},
                 {"/app.js", "text/javascript; charset=utf-8", "textContent"},
                 {"/app.css", "text/css; charset=utf-8", ".pair"},
                 {"/favicon.svg", "image/svg+xml", "<svg"}};
    for (size_t i = 0; i < sizeof files / sizeof files[0]; i++) {
        request(port, &r, "GET", files[i].path, cookie, NULL);
        check_record(r.status == 200 &&
                         socket_reply_has_header(&r, "Content-Type", files[i].type) &&
                         strstr(socket_reply_body(&r), files[i].contains) != NULL,
                     __FILE__, __LINE__, "%s is served as %s", files[i].path, files[i].type);
    }
    CHECK(strstr(socket_reply_body(&r), "innerHTML") == NULL);
    request(port, &r, "GET", "/app.js", cookie, NULL);
    CHECK(strstr(socket_reply_body(&r), "innerHTML") == NULL);

    /* Named errors. */
    request(port, &r, "GET", "/nope", cookie, NULL);
    check_error("an unknown file", &r, 404, LP_ENOT_FOUND);
    request(port, &r, "GET", "/api/nope", cookie, NULL);
    check_error("an unknown endpoint", &r, 404, LP_ENOT_FOUND);
    request(port, &r, "GET", "/api/answer", cookie, NULL);
    check_error("GET of a POST endpoint", &r, 405, LP_EMETHOD_NOT_ALLOWED);
    snprintf(post, sizeof post, "%s", cookie);
    request(port, &r, "POST", "/api/task", post, "{}");
    check_error("POST of a GET endpoint", &r, 405, LP_EMETHOD_NOT_ALLOWED);
    request(port, &r, "POST", "/", post, "{}");
    check_error("POST of a page", &r, 405, LP_EMETHOD_NOT_ALLOWED);
    request(port, &r, "POST", "/api/answer", post, "{\"task_id\": 1, \"choice\": \"a\"}");
    check_error("an answer that is not JSON typed", &r, 400, LP_EBAD_REQUEST);
    snprintf(post, sizeof post, "%sContent-Type: application/json\r\n", cookie);
    request(port, &r, "POST", "/api/answer", post, "{\"task_id\": ");
    check_error("malformed JSON", &r, 400, LP_EMALFORMED_JSON);
    request(port, &r, "POST", "/api/answer", post, "{\"choice\": \"a\"}");
    check_error("no task_id", &r, 400, LP_EMISSING_FIELD);
    request(port, &r, "POST", "/api/skip", post, "{\"task_id\": \"1\"}");
    check_error("a task_id that is a string", &r, 400, LP_EWRONG_TYPE);
    request(port, &r, "POST", "/api/answer", post, "{\"task_id\": 1, \"choice\": \"a\"}");
    check_error("a task that is not on screen", &r, lp_error_http_status(LP_ENOT_ASSIGNED),
                LP_ENOT_ASSIGNED);
    char *big = malloc(6001);
    memset(big, ' ', 6000);
    big[6000] = '\0';
    request(port, &r, "POST", "/api/answer", post, big);
    free(big);
    check_error("a body over 4 KiB", &r, 413, LP_EBODY_TOO_LARGE);

    /* No server behind the handle: the task fails with the library's code,
     * the progress still reports the device's budget. */
    request(port, &r, "GET", "/api/task", cookie, NULL);
    check_error("the task with the server down", &r, lp_error_http_status(LP_ENETWORK),
                LP_ENETWORK);
    request(port, &r, "GET", "/api/progress", cookie, NULL);
    CHECK_INT(r.status, 200);
    json_t *p = json_loads(socket_reply_body(&r), 0, NULL);
    CHECK(json_is_null(json_object_get(p, "progress")));
    CHECK_INT(json_integer_value(json_object_get(json_object_get(p, "budget"), "labels")), 0);
    CHECK_INT(json_integer_value(json_object_get(json_object_get(p, "session"), "answered")), 0);
    json_decref(p);
    CHECK_INT(cookies_set, 0); /* no reply set a cookie */
    ldpref_ui_stop(ui);
}

int main(void)
{
    CHECK(tmpdir_create(dir, sizeof dir, "client-ui") == 0);
    CHECK_ERR(annotator_key_ensure(dir, "key", key, sizeof key), LP_OK);
    snprintf(unreachable, sizeof unreachable, "http://127.0.0.1:%d", closed_port());
    client = open_client();
    test_start_arguments();
    test_ports_and_tokens();
    test_session();
    ldpref_client_close(client);
    tmpdir_remove(dir);
    return check_summary();
}
