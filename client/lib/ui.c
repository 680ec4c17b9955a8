/*
 * ui.c — the annotator's local web page (`ldpref ui`): a libmicrohttpd
 * server on 127.0.0.1 that serves the embedded page (ui_assets.h) and a few
 * JSON endpoints, and answers tasks through the same library calls as the
 * CLI (ldpref_next_tasks, ldpref_answer, ldpref_skip, ldpref_progress_get,
 * ldpref_budget_get). The browser sends the TRUE choice only here; it is
 * randomized by ldpref_answer() before anything leaves the device. Our
 * copy of the request body holding it is wiped after use; nothing logs it.
 *
 * Access control (the model of Jupyter's local server, without cookies:
 * a cookie is scoped by host, not port, so any other service on 127.0.0.1
 * that the browser visits would receive it):
 *   - the listening socket is bound to 127.0.0.1 only;
 *   - Host must be 127.0.0.1:PORT or localhost:PORT (defeats DNS
 *     rebinding); an Origin, when sent, must be http:// one of those;
 *   - the page's files hold no secret and are served without a session;
 *     a Sec-Fetch-Site, when sent, must be same-origin or none, except for
 *     a top-level navigation to GET / (the redirect from the file
 *     `ldpref ui` hands the browser, or a link), which any site may make;
 *   - every /api/ call must be same-origin (Sec-Fetch-Site same-origin or
 *     absent);
 *   - the URL's token (32 bytes from the CSPRNG) is exchanged once, by the
 *     page's script, on POST /api/session with the token in X-Ldpref-Token,
 *     for a session secret in the JSON answer; the token is then spent, so
 *     a copy of the URL (shell history, process list) is useless;
 *   - every other /api/ call must carry the secret in X-Ldpref-Session
 *     (else 401). The page keeps it in sessionStorage, which is scoped to
 *     the origin including the port; a custom header is also the CSRF
 *     defence: another origin cannot set it without a CORS preflight, which
 *     this server never grants;
 *   - all of these run on the headers, before any of the body is read;
 *   - every response carries a strict Content-Security-Policy, nosniff,
 *     no-referrer and no-store; no response sets a cookie.
 * Requests are handled one at a time on the server's single thread, which
 * owns the client handle while the server runs.
 */
#include "internal.h"

#include "error.h"
#include "ui_assets.h"

#include <arpa/inet.h>
#include <jansson.h>
#include <math.h>
#include <microhttpd.h>
#include <netinet/in.h>
#include <sodium.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define UI_SECRET_BYTES 32
/* base64url of 32 bytes without padding: 43 characters. */
#define UI_SECRET_TEXT 44
#define UI_BODY_MAX 4096
#define UI_ORIGIN_MAX 64

static const char UI_CSP[] = "default-src 'none'; script-src 'self'; style-src 'self'; "
                             "connect-src 'self'; img-src 'self'; base-uri 'none'; "
                             "form-action 'self'; frame-ancestors 'none'";

struct ldpref_ui {
    ldpref_client *c;
    struct MHD_Daemon *d;
    int port;
    char token[UI_SECRET_TEXT];   /* "" once exchanged */
    char session[UI_SECRET_TEXT]; /* the secret every /api/ call carries in X-Ldpref-Session */
    char hosts[2][UI_ORIGIN_MAX]; /* "127.0.0.1:PORT", "localhost:PORT" */
    char url[128];
    ldpref_task *task; /* the task on screen (one), or NULL */
    size_t ntask;
    int64_t answered, skipped; /* this session */
};

/* One request's body, collected across MHD's calls. */
struct ui_request {
    char body[UI_BODY_MAX + 1];
    size_t len;
    int too_large;
};

void ldpref_ui_options_init(ldpref_ui_options *o)
{
    if (o)
        memset(o, 0, sizeof *o);
}

static int random_text(char out[UI_SECRET_TEXT])
{
    uint8_t raw[UI_SECRET_BYTES];
    randombytes_buf(raw, sizeof raw);
    sodium_bin2base64(out, UI_SECRET_TEXT, raw, sizeof raw,
                      sodium_base64_VARIANT_URLSAFE_NO_PADDING);
    sodium_memzero(raw, sizeof raw);
    return out[0] ? LDPREF_OK : LDPREF_ERNG;
}

/* Constant-time comparison of a presented secret with ours ("" never matches). */
static int secret_equal(const char *presented, const char *ours)
{
    size_t n = strlen(ours);
    return presented && n > 0 && strlen(presented) == n && sodium_memcmp(presented, ours, n) == 0;
}

/* ---- responses -------------------------------------------------------- */

static enum MHD_Result queue(struct MHD_Connection *conn, unsigned status, struct MHD_Response *r)
{
    if (r == NULL)
        return MHD_NO;
    MHD_add_response_header(r, "Content-Security-Policy", UI_CSP);
    MHD_add_response_header(r, "X-Content-Type-Options", "nosniff");
    MHD_add_response_header(r, "Referrer-Policy", "no-referrer");
    MHD_add_response_header(r, "Cache-Control", "no-store");
    MHD_add_response_header(r, "X-Frame-Options", "DENY");
    MHD_add_response_header(r, "Cross-Origin-Opener-Policy", "same-origin");
    MHD_add_response_header(r, "Cross-Origin-Resource-Policy", "same-origin");
    enum MHD_Result ok = MHD_queue_response(conn, status, r);
    MHD_destroy_response(r);
    return ok;
}

/* Sends v (reference taken) as JSON. */
static enum MHD_Result send_json(struct MHD_Connection *conn, unsigned status, json_t *v)
{
    char *text = v ? json_dumps(v, JSON_COMPACT) : NULL;
    json_decref(v);
    if (text == NULL)
        return MHD_NO;
    struct MHD_Response *r =
        MHD_create_response_from_buffer(strlen(text), text, MHD_RESPMEM_MUST_FREE);
    if (r == NULL) {
        free(text);
        return MHD_NO;
    }
    MHD_add_response_header(r, "Content-Type", "application/json");
    return queue(conn, status, r);
}

/* {"error", "message"} with the code's table status, or with status when
 * it is not 0. */
static enum MHD_Result send_error(struct MHD_Connection *conn, unsigned status, int code,
                                  const char *message)
{
    json_t *v = json_pack("{s:s, s:s}", "error", lp_error_name(code), "message",
                          message && message[0] ? message : lp_error_message(code));
    return send_json(conn, status ? status : (unsigned)lp_error_http_status(code), v);
}

static const char *content_type(const char *path)
{
    static const struct {
        const char *ext, *type;
    } types[] = {{".html", "text/html; charset=utf-8"},
                 {".js", "text/javascript; charset=utf-8"},
                 {".css", "text/css; charset=utf-8"},
                 {".svg", "image/svg+xml"}};
    const char *dot = strrchr(path, '.');
    for (size_t i = 0; dot && i < sizeof types / sizeof types[0]; i++)
        if (strcmp(dot, types[i].ext) == 0)
            return types[i].type;
    return "application/octet-stream";
}

static enum MHD_Result send_asset(struct MHD_Connection *conn, const char *path)
{
    for (const lpc_ui_asset *a = lpc_ui_assets; a->path; a++)
        if (strcmp(a->path, path) == 0) {
            struct MHD_Response *r =
                MHD_create_response_from_buffer(a->len, (void *)a->data, MHD_RESPMEM_PERSISTENT);
            if (r)
                MHD_add_response_header(r, "Content-Type", content_type(path));
            return queue(conn, MHD_HTTP_OK, r);
        }
    return send_error(conn, 0, LP_ENOT_FOUND, "no such page");
}

/* ---- access control ----------------------------------------------------- */

static int host_allowed(const ldpref_ui *ui, const char *host)
{
    return host && (strcmp(host, ui->hosts[0]) == 0 || strcmp(host, ui->hosts[1]) == 0);
}

static int origin_allowed(const ldpref_ui *ui, const char *origin)
{
    if (origin == NULL)
        return 1;
    if (strncmp(origin, "http://", 7) != 0)
        return 0;
    return host_allowed(ui, origin + 7);
}

static const char *header(struct MHD_Connection *conn, const char *name)
{
    return MHD_lookup_connection_value(conn, MHD_HEADER_KIND, name);
}

static int header_is(struct MHD_Connection *conn, const char *name, const char *value)
{
    const char *v = header(conn, name);
    return v && strcmp(v, value) == 0;
}

/* Sec-Fetch-Site: /api/ calls must come from the page itself (same-origin,
 * or no such header from a client that is not a browser). The page's files
 * may also be opened from the address bar (none), and GET / by a top-level
 * navigation from anywhere: the redirect from the file:// page that
 * `ldpref ui` hands the browser is cross-site. The page holds no secret. */
static int fetch_site_allowed(struct MHD_Connection *conn, const char *url, const char *method)
{
    const char *site = header(conn, "Sec-Fetch-Site");
    if (site == NULL || strcmp(site, "same-origin") == 0)
        return 1;
    if (strncmp(url, "/api/", 5) == 0)
        return 0;
    if (strcmp(site, "none") == 0)
        return 1;
    return strcmp(method, "GET") == 0 && strcmp(url, "/") == 0 &&
           header_is(conn, "Sec-Fetch-Mode", "navigate") &&
           header_is(conn, "Sec-Fetch-Dest", "document");
}

/* POST /api/session with X-Ldpref-Token: the one-time exchange of the
 * URL's token for the session secret, in the JSON answer. */
static enum MHD_Result api_session(ldpref_ui *ui, struct MHD_Connection *conn)
{
    if (!secret_equal(header(conn, "X-Ldpref-Token"), ui->token))
        return send_error(conn, 0, LP_EUNAUTHORIZED,
                          "this link was already used or is wrong: restart ldpref ui");
    sodium_memzero(ui->token, sizeof ui->token);
    return send_json(conn, MHD_HTTP_OK, json_pack("{s:s}", "session", ui->session));
}

/* ---- the endpoints ------------------------------------------------------ */

static json_t *eps_json(double e)
{
    return isinf(e) ? json_null() : json_real(e);
}

static json_t *budget_json(ldpref_client *c)
{
    ldpref_budget b;
    if (ldpref_budget_get(c, &b) != LDPREF_OK)
        return json_null();
    /* spent is infinite once a true answer was sent (a central campaign) */
    return json_pack("{s:o, s:o, s:o, s:I, s:I}", "spent", eps_json(b.spent), "max_epsilon_total",
                     eps_json(b.max_epsilon_total), "max_epsilon_per_label",
                     eps_json(b.max_epsilon_per_label), "labels", (json_int_t)b.labels, "pending",
                     (json_int_t)b.pending);
}

static void drop_task(ldpref_ui *ui)
{
    ldpref_tasks_free(ui->task, ui->ntask);
    ui->task = NULL;
    ui->ntask = 0;
}

/* After an error that says the task on screen can no longer be answered
 * here (its assignment gone, already labelled), the next GET /api/task
 * fetches another. */
static void drop_task_after(ldpref_ui *ui, int rc)
{
    if (rc == LDPREF_ENOT_ASSIGNED || rc == LDPREF_EUNKNOWN_TASK || rc == LDPREF_ECONFLICTING_LABEL)
        drop_task(ui);
}

/* The task as the page shows it: the earlier turns ("context", oldest
 * first, [] when none), the prompt and the two responses. */
static json_t *task_json(const ldpref_client *c, const ldpref_task *t)
{
    json_t *context = json_array();
    for (size_t i = 0; context && i < t->n_context; i++)
        if (json_array_append_new(context, json_pack("{s:s, s:s}", "role", t->context[i].role,
                                                     "content", t->context[i].content)) != 0) {
            json_decref(context);
            context = NULL;
        }
    return json_pack("{s:I, s:s, s:o, s:s, s:s, s:s, s:o, s:o, s:o, s:s, s:b}", "task_id",
                     (json_int_t)t->task_id, "campaign", t->campaign, "context", context, "prompt",
                     t->prompt, "a", t->a, "b", t->b, "epsilon", eps_json(t->epsilon_proposed),
                     "epsilon_min", eps_json(t->epsilon_min), "epsilon_max",
                     eps_json(t->epsilon_max), "trust",
                     ldpref_task_central(c, t) ? "central" : "local", "sends_true_answer",
                     ldpref_task_sends_true_answer(c, t));
}

/* GET /api/task: the task on screen, fetched from the server when there is
 * none. Nothing to hand out (no task for now, the campaign complete, the
 * quota reached) is not an error for the page:
 * {"task": null, "reason": <error name>, "message"}. */
static enum MHD_Result api_task(ldpref_ui *ui, struct MHD_Connection *conn)
{
    if (ui->task == NULL) {
        int rc = ldpref_next_tasks(ui->c, 1, &ui->task, &ui->ntask);
        if (rc == LDPREF_ENO_TASK || rc == LDPREF_ECAMPAIGN_COMPLETE || rc == LDPREF_EQUOTA_REACHED)
            return send_json(conn, MHD_HTTP_OK,
                             json_pack("{s:n, s:s, s:s}", "task", "reason", lp_error_name(rc),
                                       "message", ldpref_errmsg(ui->c)));
        if (rc != LDPREF_OK)
            return send_error(conn, 0, rc, ldpref_errmsg(ui->c));
    }
    return send_json(conn, MHD_HTTP_OK, json_pack("{s:o}", "task", task_json(ui->c, &ui->task[0])));
}

/* The request body as a JSON object with an integer task_id equal to the
 * task on screen. Returns the object (new reference) or NULL with *code set. */
static json_t *parse_action(ldpref_ui *ui, const struct ui_request *req, int *code,
                            const char **why)
{
    json_error_t jerr;
    json_t *body = json_loadb(req->body, req->len, JSON_REJECT_DUPLICATES, &jerr);
    *why = NULL;
    if (!json_is_object(body)) {
        *code = LP_EMALFORMED_JSON;
        json_decref(body);
        return NULL;
    }
    json_t *id = json_object_get(body, "task_id");
    if (!json_is_integer(id)) {
        *code = id ? LP_EWRONG_TYPE : LP_EMISSING_FIELD;
        *why = "task_id must be an integer";
    } else if (ui->task == NULL || json_integer_value(id) != ui->task[0].task_id) {
        *code = LP_ENOT_ASSIGNED;
        *why = "that task is not the one on screen; reload the page";
    } else {
        return body;
    }
    json_decref(body);
    return NULL;
}

/* POST /api/answer {"task_id", "choice": "a"|"b"|"t"}: the TRUE choice,
 * randomized and sent by ldpref_answer(). The answer names only the
 * receipt (z, the randomized answer as sent), never the choice. */
static enum MHD_Result api_answer(ldpref_ui *ui, struct MHD_Connection *conn,
                                  const struct ui_request *req)
{
    int code;
    const char *why;
    json_t *body = parse_action(ui, req, &code, &why);
    if (body == NULL)
        return send_error(conn, 0, code, why);
    const char *s = json_string_value(json_object_get(body, "choice"));
    int choice = -1;
    if (s && strcmp(s, "a") == 0)
        choice = LDPREF_CHOICE_A;
    else if (s && strcmp(s, "b") == 0)
        choice = LDPREF_CHOICE_B;
    else if (s && strcmp(s, "t") == 0)
        choice = LDPREF_CHOICE_CANT_TELL;
    json_decref(body);
    if (choice < 0)
        return send_error(conn, 0, LP_EWRONG_TYPE, "choice must be \"a\", \"b\" or \"t\"");
    ldpref_receipt r;
    memset(&r, 0, sizeof r);
    int rc = ldpref_answer(ui->c, &ui->task[0], choice, &r);
    choice = -1;
    if (rc != LDPREF_OK && rc != LDPREF_EALREADY_ANSWERED) {
        drop_task_after(ui, rc);
        return send_error(conn, 0, rc, ldpref_errmsg(ui->c));
    }
    if (rc == LDPREF_OK)
        ui->answered++;
    drop_task(ui);
    return send_json(conn, MHD_HTTP_OK,
                     json_pack("{s:{s:I, s:I, s:i, s:o, s:b}, s:o, s:o}", "receipt", "label_id",
                               (json_int_t)r.label_id, "task_id", (json_int_t)r.task_id, "z", r.z,
                               "epsilon", eps_json(r.epsilon), "resent", r.resent,
                               "already_answered", json_boolean(rc == LDPREF_EALREADY_ANSWERED),
                               "budget", budget_json(ui->c)));
}

/* POST /api/skip {"task_id"}: no label, no epsilon; the server will not
 * offer the task to this annotator again. */
static enum MHD_Result api_skip(ldpref_ui *ui, struct MHD_Connection *conn,
                                const struct ui_request *req)
{
    int code;
    const char *why;
    json_t *body = parse_action(ui, req, &code, &why);
    if (body == NULL)
        return send_error(conn, 0, code, why);
    int64_t id = json_integer_value(json_object_get(body, "task_id"));
    json_decref(body);
    int rc = ldpref_skip(ui->c, id);
    if (rc != LDPREF_OK) {
        drop_task_after(ui, rc);
        return send_error(conn, 0, rc, ldpref_errmsg(ui->c));
    }
    ui->skipped++;
    drop_task(ui);
    return send_json(conn, MHD_HTTP_OK,
                     json_pack("{s:I, s:b}", "task_id", (json_int_t)id, "skipped", 1));
}

/* GET /api/progress: the campaign's progress (null when the server cannot
 * say), this device's budget and this session's counts. */
static enum MHD_Result api_progress(ldpref_ui *ui, struct MHD_Connection *conn)
{
    ldpref_progress p;
    json_t *progress = json_null();
    if (ldpref_progress_get(ui->c, &p) == LDPREF_OK)
        progress =
            json_pack("{s:s, s:I, s:I, s:I, s:I, s:I, s:o}", "campaign", p.campaign, "tasks_total",
                      (json_int_t)p.tasks_total, "tasks_complete", (json_int_t)p.tasks_complete,
                      "labels", (json_int_t)p.labels, "labels_needed", (json_int_t)p.labels_needed,
                      "annotator_labels", (json_int_t)p.annotator_labels, "annotator_quota",
                      p.annotator_quota > 0 ? json_integer(p.annotator_quota) : json_null());
    return send_json(conn, MHD_HTTP_OK,
                     json_pack("{s:o, s:o, s:{s:I, s:I}}", "progress", progress, "budget",
                               budget_json(ui->c), "session", "answered", (json_int_t)ui->answered,
                               "skipped", (json_int_t)ui->skipped));
}

/* ---- dispatch ----------------------------------------------------------- */

static enum MHD_Result route(ldpref_ui *ui, struct MHD_Connection *conn, const char *url,
                             const char *method, const struct ui_request *req)
{
    int get = strcmp(method, "GET") == 0, post = strcmp(method, "POST") == 0;
    if (strncmp(url, "/api/", 5) != 0) {
        if (!get)
            return send_error(conn, 0, LP_EMETHOD_NOT_ALLOWED, NULL);
        return send_asset(conn, strcmp(url, "/") == 0 ? "/index.html" : url);
    }
    static const struct {
        const char *path;
        int post;
    } api[] = {{"/api/task", 0}, {"/api/progress", 0}, {"/api/answer", 1}, {"/api/skip", 1}};
    for (size_t i = 0; i < sizeof api / sizeof api[0]; i++) {
        if (strcmp(url, api[i].path) != 0)
            continue;
        if (api[i].post ? !post : !get)
            return send_error(conn, 0, LP_EMETHOD_NOT_ALLOWED, NULL);
        if (!api[i].post)
            return i == 0 ? api_task(ui, conn) : api_progress(ui, conn);
        const char *type = header(conn, "Content-Type");
        if (type == NULL || strncmp(type, "application/json", 16) != 0)
            return send_error(conn, 0, LP_EBAD_REQUEST, "the body must be application/json");
        if (req->too_large)
            return send_error(conn, 0, LP_EBODY_TOO_LARGE, NULL);
        return i == 2 ? api_answer(ui, conn, req) : api_skip(ui, conn, req);
    }
    return send_error(conn, 0, LP_ENOT_FOUND, "no such endpoint");
}

/* The session part of the gate (see gate()): the page's files need none;
 * POST /api/session needs the token, every other /api/ call the session. */
static int session_gate(ldpref_ui *ui, struct MHD_Connection *conn, const char *url,
                        const char *method, enum MHD_Result *ret)
{
    if (strncmp(url, "/api/", 5) != 0)
        return 0;
    if (strcmp(url, "/api/session") == 0)
        *ret = strcmp(method, "POST") == 0 ? api_session(ui, conn)
                                           : send_error(conn, 0, LP_EMETHOD_NOT_ALLOWED, NULL);
    else if (!secret_equal(header(conn, "X-Ldpref-Session"), ui->session))
        *ret = send_error(conn, 0, LP_EUNAUTHORIZED,
                          header(conn, "X-Ldpref-Session")
                              ? "this page's session is not this ldpref ui's: open the address "
                                "ldpref ui printed"
                              : "open the page with the address ldpref ui printed");
    else
        return 0;
    return 1;
}

/* The gate, run on a request's headers before its body is read: checks
 * Host, Origin, Sec-Fetch-Site and then the session (for /api/), answers
 * the token exchange. Returns 1 when it has answered the request (*ret
 * set), 0 to let it through. */
static int gate(ldpref_ui *ui, struct MHD_Connection *conn, const char *url, const char *method,
                enum MHD_Result *ret)
{
    *ret = MHD_YES;
    if (!host_allowed(ui, header(conn, "Host")))
        *ret = send_error(conn, MHD_HTTP_FORBIDDEN, LP_EUNAUTHORIZED,
                          "foreign Host: open the page at the address ldpref ui printed");
    else if (!origin_allowed(ui, header(conn, "Origin")) || !fetch_site_allowed(conn, url, method))
        *ret = send_error(conn, MHD_HTTP_FORBIDDEN, LP_EUNAUTHORIZED,
                          "requests from other sites are refused");
    else
        return session_gate(ui, conn, url, method, ret);
    return 1;
}

static enum MHD_Result on_request(void *cls, struct MHD_Connection *conn, const char *url,
                                  const char *method, const char *version, const char *upload,
                                  size_t *upload_size, void **con_cls)
{
    ldpref_ui *ui = cls;
    struct ui_request *req = *con_cls;
    if (req == NULL) {
        enum MHD_Result ret;
        if (gate(ui, conn, url, method, &ret))
            return ret; /* answered before any of the body is read */
        if ((req = calloc(1, sizeof *req)) == NULL)
            return MHD_NO;
        *con_cls = req;
        return MHD_YES;
    }
    if (*upload_size > 0) {
        if (req->len + *upload_size > UI_BODY_MAX)
            req->too_large = 1;
        else
            memcpy(req->body + req->len, upload, *upload_size);
        if (!req->too_large)
            req->len += *upload_size;
        *upload_size = 0;
        return MHD_YES;
    }
    req->body[req->len] = '\0';
    return route(ui, conn, url, method, req);
}

/* The body may hold a true choice: wiped before it is freed. */
static void on_completed(void *cls, struct MHD_Connection *conn, void **con_cls,
                         enum MHD_RequestTerminationCode toe)
{
    struct ui_request *req = *con_cls;
    if (req) {
        sodium_memzero(req, sizeof *req);
        free(req);
    }
    *con_cls = NULL;
}

/* ---- lifecycle ---------------------------------------------------------- */

int ldpref_ui_start(ldpref_client *c, const ldpref_ui_options *o, ldpref_ui **out)
{
    if (out)
        *out = NULL;
    if (c == NULL || o == NULL || out == NULL)
        return LDPREF_EINVALID_ARGUMENT;
    if (o->port < 0 || o->port > 65535)
        return lpc_fail(c, LDPREF_EINVALID_ARGUMENT, "port must be 0..65535");
    if (sodium_init() < 0)
        return lpc_fail(c, LDPREF_ERNG, "libsodium failed to initialise");
    ldpref_ui *ui = calloc(1, sizeof *ui);
    if (ui == NULL)
        return lpc_fail(c, LDPREF_ENO_MEMORY, "out of memory");
    ui->c = c;
    if (random_text(ui->token) != LDPREF_OK || random_text(ui->session) != LDPREF_OK) {
        ldpref_ui_stop(ui);
        return lpc_fail(c, LDPREF_ERNG, "drawing the page's secrets failed");
    }
    struct sockaddr_in sa;
    memset(&sa, 0, sizeof sa);
    sa.sin_family = AF_INET;
    sa.sin_port = htons((uint16_t)o->port);
    sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    /* One internal thread, no thread per connection: requests are served
     * one at a time, so the client handle is used by one thread only. */
    ui->d = MHD_start_daemon(
        MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_AUTO, (uint16_t)o->port, NULL, NULL, on_request,
        ui, MHD_OPTION_SOCK_ADDR, &sa, MHD_OPTION_NOTIFY_COMPLETED, on_completed, ui,
        MHD_OPTION_CONNECTION_LIMIT, (unsigned int)32, MHD_OPTION_CONNECTION_TIMEOUT,
        (unsigned int)60, MHD_OPTION_CONNECTION_MEMORY_LIMIT, (size_t)65536, MHD_OPTION_END);
    if (ui->d == NULL) {
        ldpref_ui_stop(ui);
        return lpc_fail(c, LDPREF_EIO, "cannot listen on 127.0.0.1:%d", o->port);
    }
    const union MHD_DaemonInfo *info = MHD_get_daemon_info(ui->d, MHD_DAEMON_INFO_BIND_PORT);
    ui->port = info ? info->port : o->port;
    snprintf(ui->hosts[0], sizeof ui->hosts[0], "127.0.0.1:%d", ui->port);
    snprintf(ui->hosts[1], sizeof ui->hosts[1], "localhost:%d", ui->port);
    snprintf(ui->url, sizeof ui->url, "http://127.0.0.1:%d/?token=%s", ui->port, ui->token);
    *out = ui;
    return LDPREF_OK;
}

const char *ldpref_ui_url(const ldpref_ui *ui)
{
    return ui ? ui->url : "";
}

void ldpref_ui_stop(ldpref_ui *ui)
{
    if (ui == NULL)
        return;
    if (ui->d)
        MHD_stop_daemon(ui->d);
    drop_task(ui);
    sodium_memzero(ui, sizeof *ui);
    free(ui);
}
