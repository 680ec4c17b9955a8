/* console.c — the operator console's page, assets and sessions. See console.h. */
#include "console.h"

#include "auth.h"
#include "clock.h"
#include "console_assets.h"
#include "console_sessions.h"
#include "error.h"

#include <sodium.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- page and assets ---- */

static const char *content_type(const char *name)
{
    static const struct {
        const char *ext, *type;
    } TYPES[] = {{".html", "text/html; charset=utf-8"},
                 {".js", "text/javascript; charset=utf-8"},
                 {".css", "text/css; charset=utf-8"},
                 {".svg", "image/svg+xml"}};
    const char *dot = strrchr(name, '.');
    for (size_t i = 0; dot && i < sizeof TYPES / sizeof TYPES[0]; i++)
        if (strcmp(dot, TYPES[i].ext) == 0)
            return TYPES[i].type;
    return "application/octet-stream";
}

static int serve_asset(lp_response *resp, const char *name)
{
    for (const lp_console_asset *a = lp_console_assets; a->name != NULL; a++) {
        if (strcmp(a->name, name) != 0)
            continue;
        lp_buf b = {0};
        lp_buf_append(&b, (const char *)a->data, a->len);
        return lp_api_buf(resp, 200, content_type(name), &b);
    }
    return lp_api_error(resp, LP_ENOT_FOUND, NULL);
}

int lp_console_page(lp_api *api, const lp_request *req, lp_response *resp)
{
    return serve_asset(resp, "index.html");
}

int lp_console_file(lp_api *api, const lp_request *req, lp_response *resp)
{
    const char *name = req->path + strlen("/console/");
    if (strcmp(name, "index.html") == 0) /* the page has one address: / */
        return lp_api_error(resp, LP_ENOT_FOUND, NULL);
    return serve_asset(resp, name);
}

/* ---- requests from the page ---- */

/* The session id of the request's Cookie header into id; 0 when absent or
 * not of a session id's size. */
static int session_cookie(const lp_request *req, char id[LP_SESSION_ID_MAX])
{
    const size_t name_len = strlen(LP_CONSOLE_COOKIE);
    for (const char *p = req->cookie; p != NULL && *p != '\0';) {
        while (*p == ' ' || *p == ';')
            p++;
        const char *end = strchr(p, ';');
        size_t len = end ? (size_t)(end - p) : strlen(p);
        if (len > name_len && strncmp(p, LP_CONSOLE_COOKIE, name_len) == 0 && p[name_len] == '=') {
            size_t vlen = len - name_len - 1;
            if (vlen == 0 || vlen >= LP_SESSION_ID_MAX)
                return 0;
            memcpy(id, p + name_len + 1, vlen);
            id[vlen] = '\0';
            return 1;
        }
        p = end;
    }
    return 0;
}

/* 1 unless the browser says the request comes from another site: a
 * Sec-Fetch-Site other than same-origin (none, a typed address or a
 * bookmark, only for GET and HEAD), or an Origin other than this server's
 * own. Clients that send neither (curl, the CLI) are not browsers: they
 * carry no ambient cookie of ours unless given one. */
static int same_origin(const lp_request *req)
{
    int safe = strcmp(req->method, "GET") == 0 || strcmp(req->method, "HEAD") == 0;
    const char *site = req->fetch_site;
    if (site != NULL && strcmp(site, "same-origin") != 0 && !(safe && strcmp(site, "none") == 0))
        return 0;
    if (req->origin == NULL)
        return 1;
    /* https too: behind a TLS proxy the page's origin is https://Host. */
    const char *host = req->origin;
    if (strncmp(host, "http://", 7) == 0)
        host += 7;
    else if (strncmp(host, "https://", 8) == 0)
        host += 8;
    else
        return 0; /* "null" (an opaque origin) and anything else */
    return req->host != NULL && strcmp(host, req->host) == 0;
}

static int state_changing(const lp_request *req)
{
    return strcmp(req->method, "GET") != 0 && strcmp(req->method, "HEAD") != 0;
}

/* Checks session id at now and that the token it was signed in with is
 * still live (a revoked token ends its sessions): LP_OK with *who (may be
 * NULL) and *expires_ms (may be NULL) set, or LP_EUNAUTHORIZED. */
static int live_session(lp_api *api, const char *id, lp_principal *who, int64_t *expires_ms)
{
    lp_principal signed_in;
    int rc = lp_sessions_check(api->sessions, id, lp_now_ms(), NULL, expires_ms, &signed_in);
    if (rc == LP_OK &&
        (rc = lp_auth_operator_live(api->store, signed_in.token_id, who)) == LP_EUNAUTHORIZED)
        lp_sessions_end(api->sessions, id);
    return rc;
}

int lp_console_authorize(lp_api *api, const lp_request *req, lp_principal *who)
{
    char id[LP_SESSION_ID_MAX];
    if (who != NULL)
        *who = (lp_principal){0};
    if (!same_origin(req))
        return LP_ECROSS_SITE;
    int rc = session_cookie(req, id) ? live_session(api, id, who, NULL) : LP_EUNAUTHORIZED;
    if (rc == LP_OK && state_changing(req) && !lp_sessions_csrf_ok(api->sessions, id, req->csrf))
        rc = LP_ECSRF_FAILED;
    sodium_memzero(id, sizeof id);
    return rc;
}

/* ---- sign-in and sign-out ---- */

/* The session cookie's Set-Cookie value: Secure when the server speaks
 * HTTPS (a browser then never sends it over plain HTTP). Behind a TLS proxy
 * the server speaks plain HTTP and the cookie goes without it. */
static char *cookie_header(const lp_api *api, const char *id, int64_t max_age_s)
{
    char *out = NULL;
    if (asprintf(&out, "%s=%s; HttpOnly;%s SameSite=Strict; Path=/; Max-Age=%lld",
                 LP_CONSOLE_COOKIE, id, api->opts.tls ? " Secure;" : "", (long long)max_age_s) < 0)
        return NULL;
    return out;
}

/* {"csrf_token", "expires_ms", "idle_timeout_s"} with the session's cookie. */
static int session_answer(lp_api *api, lp_response *resp, const char *id, const char *csrf,
                          int64_t expires_ms)
{
    char *cookie = cookie_header(api, id, api->sessions_opts.lifetime_ms / 1000);
    if (cookie == NULL)
        return lp_api_error(resp, LP_ENO_MEMORY, NULL);
    lp_api_json(resp, 201,
                json_pack("{s:s, s:I, s:I}", "csrf_token", csrf, "expires_ms",
                          (json_int_t)expires_ms, "idle_timeout_s",
                          (json_int_t)(api->sessions_opts.idle_ms / 1000)));
    if (resp->error)
        free(cookie);
    else
        resp->set_cookie = cookie;
    return LP_API_DONE;
}

int lp_console_sign_in(lp_api *api, const lp_request *req, lp_response *resp)
{
    if (!same_origin(req))
        return lp_api_error(resp, LP_ECROSS_SITE, NULL);
    json_t *body = NULL;
    if (lp_api_parse_body(api, req, &body, resp) != LP_OK)
        return LP_API_DONE;
    const char *token = json_string_value(json_object_get(body, "token"));
    /* One answer for every failure: a missing, malformed or wrong token. */
    lp_principal who;
    int rc = json_object_size(body) == 1 && token != NULL
                 ? lp_auth_operator_check(api->store, token, &who)
                 : LP_EUNAUTHORIZED;
    json_decref(body);
    if (rc != LP_OK)
        return lp_api_error(resp, rc == LP_EUNAUTHORIZED ? rc : LP_ESTORAGE,
                            rc == LP_EUNAUTHORIZED ? "sign-in failed" : NULL);
    char id[LP_SESSION_ID_MAX], csrf[LP_SESSION_CSRF_MAX];
    int64_t expires_ms = 0;
    rc = lp_sessions_create(api->sessions, lp_now_ms(), &who, id, csrf, &expires_ms);
    if (rc != LP_OK)
        return lp_api_error(resp, rc, NULL);
    session_answer(api, resp, id, csrf, expires_ms);
    sodium_memzero(id, sizeof id);
    sodium_memzero(csrf, sizeof csrf);
    return LP_API_DONE;
}

int lp_console_session_get(lp_api *api, const lp_request *req, lp_response *resp)
{
    char id[LP_SESSION_ID_MAX];
    int64_t expires_ms = 0;
    if (!same_origin(req))
        return lp_api_error(resp, LP_ECROSS_SITE, NULL);
    int rc = session_cookie(req, id) ? live_session(api, id, NULL, &expires_ms) : LP_EUNAUTHORIZED;
    sodium_memzero(id, sizeof id);
    if (rc != LP_OK)
        return lp_api_error(resp, LP_EUNAUTHORIZED, "not signed in");
    /* Not the CSRF token: the cookie alone (which browsers also send to
     * other ports of this host) must not be enough to obtain it. */
    return lp_api_json(resp, 200,
                       json_pack("{s:b, s:I, s:I}", "signed_in", 1, "expires_ms",
                                 (json_int_t)expires_ms, "idle_timeout_s",
                                 (json_int_t)(api->sessions_opts.idle_ms / 1000)));
}

int lp_console_sign_out(lp_api *api, const lp_request *req, lp_response *resp)
{
    char id[LP_SESSION_ID_MAX];
    int rc = lp_console_authorize(api, req, NULL);
    if (rc == LP_ECROSS_SITE || rc == LP_ECSRF_FAILED)
        return lp_api_error(resp, rc, NULL);
    if (rc == LP_OK && session_cookie(req, id))
        lp_sessions_end(api->sessions, id);
    /* Signed out either way: the browser forgets the cookie. */
    char *cookie = cookie_header(api, "", 0);
    if (cookie == NULL)
        return lp_api_error(resp, LP_ENO_MEMORY, NULL);
    lp_api_json(resp, 200, json_pack("{s:b}", "signed_in", 0));
    if (resp->error)
        free(cookie);
    else
        resp->set_cookie = cookie;
    return LP_API_DONE;
}
