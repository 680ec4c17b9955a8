/*
 * test_client_ui.c — the local web page server of libldpref (client/lib/ui.c)
 * on its own, without a browser and with no ldpref server behind it (the
 * handle points at a closed port): start/stop and their argument errors,
 * the printed address, the one-time token exchange and its cookies, the
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

/* One request with the page's own Host; extra: header lines or "". */
static void request(int port, socket_reply *r, const char *method, const char *path,
                    const char *extra, const char *body)
{
    char req[16384];
    snprintf(req, sizeof req,
             "%s %s HTTP/1.1\r\nHost: 127.0.0.1:%d\r\n%sContent-Length: %zu\r\n"
             "Connection: close\r\n\r\n%s",
             method, path, port, extra, body ? strlen(body) : 0, body ? body : "");
    http_socket(port, req, r);
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

/* The session cookie header line for raw requests, from a 303's Set-Cookie. */
static void cookie_value(const socket_reply *r, const char *name, char *out, size_t cap)
{
    char prefix[64];
    snprintf(prefix, sizeof prefix, "Set-Cookie: %s=", name);
    const char *c = strstr(r->text, prefix);
    out[0] = '\0';
    if (c)
        snprintf(out, cap, "%.*s", (int)strcspn(c + strlen(prefix), ";\r"), c + strlen(prefix));
}

static void test_session(void)
{
    ldpref_ui_options o;
    ldpref_ui_options_init(&o);
    ldpref_ui *ui = NULL;
    CHECK_ERR(ldpref_ui_start(client, &o, &ui), LP_OK);
    int port = url_port(ui);
    char path[128], name[32], csrf_name[32], session[64], csrf[64];
    snprintf(path, sizeof path, "/?token=%s", url_token(ui));
    snprintf(name, sizeof name, "ldpref_ui_%d", port);
    snprintf(csrf_name, sizeof csrf_name, "ldpref_csrf_%d", port);
    socket_reply r;

    /* The exchange: a redirect home with the two cookies. */
    request(port, &r, "GET", path, "", NULL);
    CHECK_INT(r.status, 303);
    CHECK(socket_reply_has_header(&r, "Location", "/"));
    CHECK(socket_reply_has_header(
        &r, "Content-Security-Policy",
        "default-src 'none'; script-src 'self'; style-src 'self'; connect-src 'self'; "
        "img-src 'self'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'"));
    CHECK(socket_reply_has_header(&r, "X-Content-Type-Options", "nosniff"));
    CHECK(socket_reply_has_header(&r, "Referrer-Policy", "no-referrer"));
    CHECK(socket_reply_has_header(&r, "Cache-Control", "no-store"));
    cookie_value(&r, name, session, sizeof session);
    cookie_value(&r, csrf_name, csrf, sizeof csrf);
    CHECK_INT(strlen(session), 43);
    CHECK_INT(strlen(csrf), 43);
    CHECK(strcmp(session, csrf) != 0);
    char line[160];
    snprintf(line, sizeof line, "%s=%s; Path=/; HttpOnly; SameSite=Strict", name, session);
    CHECK(socket_reply_has_header(&r, "Set-Cookie", line));
    snprintf(line, sizeof line, "%s=%s; Path=/; SameSite=Strict", csrf_name, csrf);
    CHECK(socket_reply_has_header(&r, "Set-Cookie", line));

    /* Spent: the token opens nothing again, but the same browser (with
     * its session) opening the URL again is sent home without cookies. */
    request(port, &r, "GET", path, "", NULL);
    check_error("the spent token", &r, 401, LP_EUNAUTHORIZED);
    char cookie[256], wrong[256], post[512];
    snprintf(cookie, sizeof cookie, "Cookie: %s=%s\r\n", name, session);
    request(port, &r, "GET", path, cookie, NULL);
    CHECK_INT(r.status, 303);
    CHECK(socket_reply_has_header(&r, "Location", "/"));
    CHECK(strstr(r.text, "Set-Cookie") == NULL);
    /* Refused on its headers: a request announcing a large body without a
     * session is answered before any of the body is read (none is sent). */
    char announce[256];
    snprintf(announce, sizeof announce,
             "POST /api/answer HTTP/1.1\r\nHost: 127.0.0.1:%d\r\nContent-Type: "
             "application/json\r\nContent-Length: 1000000\r\n\r\n",
             port);
    http_socket(port, announce, &r);
    check_error("a large body without a session", &r, 401, LP_EUNAUTHORIZED);
    /* The cookie of another port's page is not ours. */
    snprintf(wrong, sizeof wrong, "Cookie: ldpref_ui_1=%s; %s=%s\r\n", session, name, csrf);
    request(port, &r, "GET", "/", wrong, NULL);
    check_error("a wrong session", &r, 401, LP_EUNAUTHORIZED);

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
    snprintf(post, sizeof post, "%sX-CSRF-Token: %s\r\n", cookie, csrf);
    request(port, &r, "POST", "/api/task", post, "{}");
    check_error("POST of a GET endpoint", &r, 405, LP_EMETHOD_NOT_ALLOWED);
    request(port, &r, "POST", "/", post, "{}");
    check_error("POST of a page", &r, 405, LP_EMETHOD_NOT_ALLOWED);
    request(port, &r, "POST", "/api/answer", post, "{\"task_id\": 1, \"choice\": \"a\"}");
    check_error("an answer that is not JSON typed", &r, 400, LP_EBAD_REQUEST);
    request(port, &r, "POST", "/api/answer", cookie, "{}");
    check_error("an answer without the CSRF header", &r, 403, LP_EUNAUTHORIZED);
    snprintf(post, sizeof post, "%sX-CSRF-Token: %s\r\nContent-Type: application/json\r\n", cookie,
             csrf);
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
