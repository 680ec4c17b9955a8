/*
 * e2e_attack_scopes.c — scoped operator credentials against the real
 * ldpref-server on 127.0.0.1 (temporary SQLite database), tokens managed
 * through the real ldpref CLI.
 *
 * The scope table below is the specification (docs/operators.md "Operator
 * tokens and scopes"): it must equal the server's own route table and the
 * x-scope of every operation in schema/openapi.yaml, so a route added
 * without a line here fails this test. Then every route is called with no
 * credential, with a token of each single scope, a token of no scope, one
 * of every scope, a revoked token, a rotated-away token and the token that
 * replaced it: each answer must be served, 401 unauthorized or 403
 * insufficient_scope exactly as the table says. Also: a console session
 * keeps the scopes of the token it signed in with and ends when that token
 * is revoked; the last admin token cannot be revoked; the token list never
 * shows a secret; no secret reaches the log; a token minted by
 * ldpref-server --new-operator-token while the server runs is accepted;
 * --public-metrics; revoking an annotator by its pseudonym (and still by
 * its key).
 */
#include "annotator_client.h"
#include "api.h"
#include "check.h"
#include "error.h"
#include "files.h"
#include "http_raw.h"
#include "http_socket.h"
#include "ldpref.h"
#include "operator_client.h"
#include "server_proc.h"

#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* What a route needs (server/service/auth.h bits, as in the route table). */
enum { NONE = 0, ADMIN = 1, EXPORT = 2, SCORE = 4, ANY = 1 << 8 };

static const struct want {
    const char *method, *path;
    unsigned need;
} WANT[] = {
    {"GET", "/v1/healthz", NONE},
    {"POST", "/v1/campaigns", ADMIN},
    {"GET", "/v1/campaigns", ADMIN},
    {"POST", "/v1/campaigns/update", ADMIN},
    {"GET", "/v1/campaigns/view", ADMIN},
    {"POST", "/v1/enrollment-tokens", ADMIN},
    {"POST", "/v1/annotators", NONE},
    {"GET", "/v1/annotators", ADMIN},
    {"POST", "/v1/annotators/revoke", ADMIN},
    {"POST", "/v1/tokens", ADMIN},
    {"GET", "/v1/tokens", ADMIN},
    {"GET", "/v1/audit", ADMIN},
    {"POST", "/v1/tokens/revoke", ADMIN},
    {"POST", "/v1/tokens/rotate", ADMIN},
    {"POST", "/v1/tasks", ADMIN},
    {"GET", "/v1/tasks", ADMIN},
    {"GET", "/v1/tasks/one", ADMIN},
    {"POST", "/v1/tasks/next", NONE},
    {"POST", "/v1/tasks/skip", NONE},
    {"POST", "/v1/progress", NONE},
    {"POST", "/v1/labels", NONE},
    {"POST", "/v1/labels/batch", NONE},
    {"GET", "/v1/stats", ADMIN},
    {"GET", "/v1/export", EXPORT},
    {"GET", "/metrics", ANY},
    {"POST", "/v1/retrain", ADMIN},
    {"GET", "/v1/retrain", ADMIN},
    {"POST", "/v1/retrain/cancel", ADMIN},
    {"GET", "/v1/retrain/schedule", ADMIN},
    {"PUT", "/v1/retrain/schedule", ADMIN},
    {"GET", "/v1/models", ADMIN},
    {"POST", "/v1/models/activate", ADMIN},
    {"POST", "/v1/score", SCORE},
    {"POST", "/v1/score/batch", SCORE},
    {"GET", "/v1/corruption", ADMIN},
    {"PUT", "/v1/corruption", ADMIN},
    {"GET", "/", NONE},
    {"GET", "/console/*", NONE},
    {"POST", "/v1/console/session", NONE},
    {"GET", "/v1/console/session", NONE},
    {"DELETE", "/v1/console/session", NONE},
    {"GET", "/v1/quality", ADMIN},
};
#define N_WANT (sizeof WANT / sizeof WANT[0])

static server_proc srv;
static char env_server[128], env_token[256];

/* ---- the table against the server and the OpenAPI document ---- */

static const struct want *want_of(const char *method, const char *path)
{
    for (size_t i = 0; i < N_WANT; i++)
        if (strcmp(WANT[i].method, method) == 0 && strcmp(WANT[i].path, path) == 0)
            return &WANT[i];
    return NULL;
}

static void test_table_is_the_servers(void)
{
    const char *method, *path;
    unsigned scope;
    size_t n = 0;
    for (; lp_api_route_at(n, &method, &path, &scope); n++) {
        const struct want *w = want_of(method, path);
        check_record(w != NULL, __FILE__, __LINE__, "route %s %s has no line in the scope table",
                     method, path);
        if (w != NULL)
            check_record(w->need == scope, __FILE__, __LINE__,
                         "route %s %s needs 0x%x, the table says 0x%x", method, path, scope,
                         w->need);
    }
    CHECK_INT(n, N_WANT); /* and no line for a route that does not exist */
}

static unsigned scope_word(const char *w)
{
    return strcmp(w, "admin") == 0    ? ADMIN
           : strcmp(w, "export") == 0 ? EXPORT
           : strcmp(w, "score") == 0  ? SCORE
           : strcmp(w, "any") == 0    ? ANY
                                      : 0xdead;
}

/* Every operation of schema/openapi.yaml (two-space path lines, four-space
 * method lines, "x-scope: NAME" six spaces in) against the table; a path
 * segment "{file}" is the route's star. */
static void test_table_is_the_documents(void)
{
    char *doc = file_read_all("schema/openapi.yaml", NULL);
    CHECK(doc != NULL);
    if (doc == NULL)
        return;
    char path[128] = "", method[16] = "";
    size_t ops = 0;
    int pending = 0; /* an operation whose x-scope line has not come yet */
    unsigned scope = 0;
    const struct want *cur = NULL;
    for (char *line = strtok(doc, "\n");; line = strtok(NULL, "\n")) {
        int end = line == NULL;
        int new_path = !end && strncmp(line, "  /", 3) == 0;
        int new_op = !end && strncmp(line, "    ", 4) == 0 && line[4] >= 'a' && line[4] <= 'z' &&
                     strchr(line, ':') != NULL && line[strlen(line) - 1] == ':';
        if ((end || new_path || new_op) && pending) {
            check_record(cur != NULL, __FILE__, __LINE__,
                         "openapi.yaml: %s %s is not in the scope table", method, path);
            if (cur != NULL)
                check_record(cur->need == scope, __FILE__, __LINE__,
                             "openapi.yaml: %s %s has x-scope 0x%x, the table 0x%x", method, path,
                             scope, cur->need);
            pending = 0;
        }
        if (end)
            break;
        if (strncmp(line, "components:", 11) == 0 || strncmp(line, "paths:", 6) == 0)
            path[0] = '\0';
        if (new_path) {
            snprintf(path, sizeof path, "%.*s", (int)(strchr(line, ':') - line - 2), line + 2);
            char *brace = strstr(path, "/{");
            if (brace != NULL)
                snprintf(brace, sizeof path - (size_t)(brace - path), "/*");
        } else if (new_op && path[0] != '\0') {
            snprintf(method, sizeof method, "%.*s", (int)(strchr(line, ':') - line - 4), line + 4);
            for (char *p = method; *p; p++)
                *p = (char)(*p - 'a' + 'A');
            cur = want_of(method, path);
            scope = 0;
            pending = 1;
            ops++;
        } else if (pending && strncmp(line, "      x-scope: ", 15) == 0) {
            scope = scope_word(line + 15);
        }
    }
    CHECK_INT(ops, N_WANT); /* every route is documented */
    free(doc);
}

/* ---- tokens through the CLI ---- */

static int cli(char **out, const char *const *argv)
{
    const char *env[] = {env_server, env_token, NULL};
    return run_tool(argv, env, out);
}

/* `ldpref admin token create --name NAME --scope SCOPES`: the new token's
 * secret into secret and its id into id. */
static void create(const char *name, const char *scopes, char secret[128], char id[32])
{
    const char *argv[] = {"ldpref", "admin",   "token", "create", "--name",
                          name,     "--scope", scopes,  NULL};
    char *out = NULL;
    CHECK_INT(cli(&out, argv), 0);
    json_t *j = out ? json_loads(out, 0, NULL) : NULL;
    snprintf(secret, 128, "%s", json_string_value(json_object_get(j, "token")) ?: "");
    snprintf(id, 32, "%s", json_string_value(json_object_get(j, "id")) ?: "");
    CHECK(strncmp(secret, "op_", 3) == 0);
    CHECK(strncmp(id, "tok-", 4) == 0);
    CHECK_STR(json_string_value(json_object_get(j, "name")) ?: "", name);
    CHECK(json_is_null(json_object_get(j, "revoked_ms")));
    json_decref(j);
    free(out);
}

/* A credential of the matrix: its bearer (NULL: none) and what it may do
 * (ALL | ANY: every route; -1: nothing, a refused token). */
typedef struct cred {
    const char *what;
    char secret[160], id[32];
    int scopes; /* -1: refused (revoked, rotated away, or no credential) */
    int none;   /* no credential at all */
} cred;

enum { C_NONE, C_ADMIN, C_EXPORT, C_SCORE, C_BARE, C_ALL, C_REVOKED, C_ROTATED, C_NEW, N_CREDS };
static cred creds[N_CREDS];

/* The secrets seen, to look for in the log and the listings. */
static const char *secrets[N_CREDS + 4];
static char console_secret[128], offline_secret[160];
static int n_secrets;

static void make_credentials(void)
{
    creds[C_NONE] = (cred){.what = "no credential", .scopes = -1, .none = 1};
    creds[C_ADMIN] = (cred){.what = "admin token", .scopes = ADMIN};
    creds[C_EXPORT] = (cred){.what = "export token", .scopes = EXPORT};
    creds[C_SCORE] = (cred){.what = "score token", .scopes = SCORE};
    creds[C_BARE] = (cred){.what = "token of no scope", .scopes = 0};
    creds[C_ALL] = (cred){.what = "token of every scope", .scopes = ADMIN | EXPORT | SCORE};
    creds[C_REVOKED] = (cred){.what = "revoked token", .scopes = -1};
    creds[C_ROTATED] = (cred){.what = "rotated-away token", .scopes = -1};
    creds[C_NEW] = (cred){.what = "token that replaced it", .scopes = ADMIN | EXPORT | SCORE};
    create("admin-only", "admin", creds[C_ADMIN].secret, creds[C_ADMIN].id);
    create("export-only", "export", creds[C_EXPORT].secret, creds[C_EXPORT].id);
    create("score-only", "score", creds[C_SCORE].secret, creds[C_SCORE].id);
    create("prometheus", "none", creds[C_BARE].secret, creds[C_BARE].id);
    snprintf(creds[C_ALL].secret, sizeof creds[C_ALL].secret, "%s", srv.token);
    create("to revoke", "admin,export,score", creds[C_REVOKED].secret, creds[C_REVOKED].id);
    create("to rotate", "score,admin,export", creds[C_ROTATED].secret, creds[C_ROTATED].id);

    char *out = NULL;
    const char *revoke[] = {"ldpref", "admin", "token", "revoke", creds[C_REVOKED].id, NULL};
    CHECK_INT(cli(&out, revoke), 0);
    json_t *j = out ? json_loads(out, 0, NULL) : NULL;
    CHECK_STR(json_string_value(json_object_get(j, "id")) ?: "", creds[C_REVOKED].id);
    CHECK(json_integer_value(json_object_get(j, "revoked_ms")) > 0);
    CHECK(json_object_get(j, "token") == NULL);
    json_decref(j);
    free(out);

    const char *rotate[] = {"ldpref", "admin", "token", "rotate", creds[C_ROTATED].id, NULL};
    CHECK_INT(cli(&out, rotate), 0);
    j = out ? json_loads(out, 0, NULL) : NULL;
    snprintf(creds[C_NEW].secret, sizeof creds[C_NEW].secret, "%s",
             json_string_value(json_object_get(j, "token")) ?: "");
    snprintf(creds[C_NEW].id, sizeof creds[C_NEW].id, "%s",
             json_string_value(json_object_get(j, "id")) ?: "");
    CHECK_STR(json_string_value(json_object_get(j, "replaces")) ?: "", creds[C_ROTATED].id);
    CHECK_STR(json_string_value(json_object_get(j, "name")) ?: "", "to rotate");
    CHECK_INT(json_array_size(json_object_get(j, "scopes")), 3);
    CHECK(strncmp(creds[C_NEW].secret, "op_", 3) == 0);
    CHECK(strcmp(creds[C_NEW].secret, creds[C_ROTATED].secret) != 0);
    CHECK(strcmp(creds[C_NEW].id, creds[C_ROTATED].id) != 0);
    json_decref(j);
    free(out);
    for (int i = 0; i < N_CREDS; i++)
        if (creds[i].secret[0] != '\0')
            secrets[n_secrets++] = creds[i].secret;
}

/* ---- every route with every credential ---- */

/* A concrete request for a route pattern. */
static void concrete_path(const char *pattern, char *out, size_t cap)
{
    size_t n = strlen(pattern);
    if (n >= 2 && strcmp(pattern + n - 2, "/*") == 0)
        snprintf(out, cap, "%.*s/nothing-here.css", (int)(n - 2), pattern);
    else
        snprintf(out, cap, "%s", pattern);
}

/* 'S' served (the handler answered), 'U' 401 unauthorized, 'F' 403
 * insufficient_scope: what the table says for c on an operator route w. */
static char expected(const struct want *w, const cred *c)
{
    if (c->scopes < 0)
        return 'U';
    unsigned need = w->need & (ADMIN | EXPORT | SCORE);
    return ((unsigned)c->scopes & need) == need ? 'S' : 'F';
}

static char observed(const http_reply *r)
{
    char name[64];
    http_error_name(r, name, sizeof name);
    if (r->status == 401 && strcmp(name, "unauthorized") == 0)
        return 'U';
    if (r->status == 403 && strcmp(name, "insufficient_scope") == 0)
        return 'F';
    if (r->status == 0 || strcmp(name, "unauthorized") == 0 ||
        strcmp(name, "insufficient_scope") == 0)
        return '?'; /* no answer, or a refusal with the wrong status */
    return 'S';
}

/* Calls every route with every credential; returns how many calls. A
 * route that needs no credential must answer the same whatever is
 * presented (its own 401 only for the console's session routes, which
 * answer "not signed in" by themselves). */
static int test_matrix(void)
{
    int calls = 0;
    for (size_t i = 0; i < N_WANT; i++) {
        const struct want *w = &WANT[i];
        char path[160], url[300];
        concrete_path(w->path, path, sizeof path);
        snprintf(url, sizeof url, "%s%s", srv.url, path);
        int has_body = strcmp(w->method, "POST") == 0 || strcmp(w->method, "PUT") == 0;
        long baseline = 0;
        for (int k = 0; k < N_CREDS; k++) {
            const cred *c = &creds[k];
            http_reply r;
            /* "[]": a body no handler acts on, so a served call changes nothing */
            http_raw(w->method, url, has_body ? "[]" : NULL, has_body ? 2 : 0,
                     c->none ? NULL : c->secret, &r);
            char got = observed(&r);
            if (w->need == NONE) {
                if (k == C_NONE) {
                    baseline = r.status;
                    check_record(got == 'S' ||
                                     (got == 'U' && strncmp(path, "/v1/console/", 12) == 0),
                                 __FILE__, __LINE__, "%s %s without a credential: %ld %s",
                                 w->method, path, r.status, r.body ? r.body : "");
                }
                check_record(r.status == baseline && got != 'F', __FILE__, __LINE__,
                             "%s %s with a %s: %ld %s, without a credential %ld", w->method, path,
                             c->what, r.status, r.body ? r.body : "", baseline);
            } else {
                char want = expected(w, c);
                check_record(got == want, __FILE__, __LINE__,
                             "%s %s with a %s: want %c, got %c (%ld %s)", w->method, path, c->what,
                             want, got, r.status, r.body ? r.body : "");
            }
            http_reply_free(&r);
            calls++;
        }
    }
    return calls;
}

/* ---- the console session keeps its token's scopes ---- */

static void request(socket_reply *r, const char *method, const char *path, const char *headers,
                    const char *body)
{
    char req[4096];
    snprintf(req, sizeof req,
             "%s %s HTTP/1.1\r\nHost: 127.0.0.1:%d\r\nConnection: close\r\n%s"
             "Content-Length: %zu\r\n\r\n%s",
             method, path, srv.port, headers ? headers : "", body ? strlen(body) : 0,
             body ? body : "");
    http_socket(srv.port, req, r);
}

static void test_console_session(void)
{
    char *secret = console_secret, id[32], body[256], cookie[160] = "";
    create("console reader", "export", secret, id);
    secrets[n_secrets++] = secret;
    socket_reply r;
    snprintf(body, sizeof body, "{\"token\": \"%s\"}", secret);
    request(&r, "POST", "/v1/console/session",
            "Content-Type: application/json\r\nSec-Fetch-Site: same-origin\r\n", body);
    CHECK_INT(r.status, 201);
    const char *set = strstr(r.text, "ldpref_session=");
    char sid[64] = "";
    if (set == NULL || sscanf(set, "ldpref_session=%63[A-Za-z0-9_-]", sid) != 1)
        CHECK(0 && "no session cookie");
    snprintf(cookie, sizeof cookie, "Cookie: ldpref_session=%s\r\n", sid);
    request(&r, "GET", "/v1/export", cookie, NULL);
    CHECK_INT(r.status, 200); /* the token's scope */
    request(&r, "GET", "/v1/stats", cookie, NULL);
    CHECK_INT(r.status, 403); /* not admin */
    CHECK(strstr(socket_reply_body(&r), "insufficient_scope") != NULL);
    request(&r, "GET", "/metrics", cookie, NULL);
    CHECK_INT(r.status, 200); /* any live token */

    const char *revoke[] = {"ldpref", "admin", "token", "revoke", id, NULL};
    CHECK_INT(cli(NULL, revoke), 0);
    request(&r, "GET", "/v1/export", cookie, NULL);
    CHECK_INT(r.status, 401); /* revoking the token ends its sessions at once */
    request(&r, "GET", "/v1/console/session", cookie, NULL);
    CHECK_INT(r.status, 401);
    snprintf(body, sizeof body, "{\"token\": \"%s\"}", secret);
    request(&r, "POST", "/v1/console/session",
            "Content-Type: application/json\r\nSec-Fetch-Site: same-origin\r\n", body);
    CHECK_INT(r.status, 401); /* nor can it sign in again */
}

/* ---- management through the CLI ---- */

static void test_cli_management(void)
{
    /* The list: every token, ids and names, never a secret or a hash. */
    const char *list[] = {"ldpref", "admin", "token", "list", NULL};
    char *out = NULL;
    CHECK_INT(cli(&out, list), 0);
    json_t *j = out ? json_loads(out, 0, NULL) : NULL;
    json_t *tokens = json_object_get(j, "tokens");
    CHECK(json_array_size(tokens) >= N_CREDS - 1);
    size_t i;
    json_t *t;
    int live = 0, revoked = 0;
    json_array_foreach(tokens, i, t)
    {
        CHECK_INT(json_object_size(t), 5); /* id, name, scopes, created_ms, revoked_ms */
        CHECK(json_object_get(t, "token") == NULL && json_object_get(t, "hash") == NULL);
        CHECK(json_integer_value(json_object_get(t, "created_ms")) > 0);
        if (json_is_null(json_object_get(t, "revoked_ms")))
            live++;
        else
            revoked++;
    }
    CHECK_INT(revoked, 3); /* the revoked, the rotated-away and the console's */
    CHECK(live >= 6);
    for (int k = 0; k < n_secrets && out; k++)
        CHECK(strstr(out, secrets[k]) == NULL);
    json_decref(j);
    free(out);

    /* jsonl: one token per line; table: a header and the ids. */
    const char *jsonl[] = {"ldpref", "--format", "jsonl", "admin", "token", "list", NULL};
    CHECK_INT(cli(&out, jsonl), 0);
    int lines = 0;
    for (const char *p = out; p && *p; p = strchr(p, '\n') ? strchr(p, '\n') + 1 : "")
        lines += strncmp(p, "{\"id\":\"tok-", 11) == 0;
    CHECK_INT(lines, live + revoked);
    free(out);
    const char *table[] = {"ldpref", "--format", "table", "admin", "token", "list", NULL};
    CHECK_INT(cli(&out, table), 0);
    CHECK(out && strstr(out, "scopes") && strstr(out, creds[C_EXPORT].id) &&
          strstr(out, "export-only"));
    for (int k = 0; k < n_secrets && out; k++)
        CHECK(strstr(out, secrets[k]) == NULL);
    free(out);

    /* Unknown and malformed ids, a bad scope, a missing flag. */
    const char *unknown[] = {"ldpref", "admin", "token", "revoke", "tok-999999", NULL};
    CHECK_INT(cli(NULL, unknown), LDPREF_EUNKNOWN_TOKEN);
    const char *again[] = {"ldpref", "admin", "token", "rotate", creds[C_REVOKED].id, NULL};
    CHECK_INT(cli(NULL, again), LDPREF_EUNKNOWN_TOKEN);
    const char *malformed[] = {"ldpref", "admin", "token", "revoke", "7", NULL};
    CHECK_INT(cli(NULL, malformed), LDPREF_EINVALID_ARGUMENT);
    const char *bad_scope[] = {"ldpref", "admin",   "token", "create", "--name",
                               "x",      "--scope", "root",  NULL};
    CHECK_INT(cli(NULL, bad_scope), LDPREF_EBAD_REQUEST);
    const char *no_name[] = {"ldpref", "admin", "token", "create", "--scope", "admin", NULL};
    CHECK_INT(cli(NULL, no_name), LDPREF_EINVALID_ARGUMENT);
    /* A token without admin manages no token. */
    char env_export[256];
    snprintf(env_export, sizeof env_export, "LDPREF_OPERATOR_TOKEN=%s", creds[C_EXPORT].secret);
    const char *env[] = {env_server, env_export, NULL};
    CHECK_INT(run_tool(list, env, NULL), LDPREF_EINSUFFICIENT_SCOPE);

    /* The last live admin token stays: revoke every other, then it is refused. */
    const int admins[] = {C_ADMIN, C_NEW};
    for (size_t k = 0; k < sizeof admins / sizeof admins[0]; k++) {
        const char *argv[] = {"ldpref", "admin", "token", "revoke", creds[admins[k]].id, NULL};
        CHECK_INT(cli(NULL, argv), 0);
    }
    long long first = server_db_scalar(&srv,
                                       "SELECT min(id) FROM operator_tokens WHERE "
                                       "revoked_ms IS NULL AND (scopes & 1) = 1",
                                       NULL);
    CHECK_INT(first, 1); /* the bootstrap token is the last admin */
    const char *last[] = {"ldpref", "admin", "token", "revoke", "tok-1", NULL};
    CHECK_INT(cli(&out, last), LDPREF_ELAST_ADMIN_TOKEN);
    free(out);
    http_reply r;
    char url[200];
    snprintf(url, sizeof url, "%s/v1/stats", srv.url);
    CHECK_INT(http_raw("GET", url, NULL, 0, srv.token, &r), 0);
    CHECK_INT(r.status, 200); /* still works */
    http_reply_free(&r);
    snprintf(url, sizeof url, "%s/v1/tokens/revoke", srv.url);
    CHECK_INT(http_raw("POST", url, "{\"id\": \"tok-1\"}", 15, srv.token, &r), 0);
    CHECK_INT(r.status, 409);
    CHECK(r.body && strstr(r.body, "\"last_admin_token\""));
    http_reply_free(&r);

    /* The database holds hashes only. */
    for (int k = 0; k < n_secrets; k++)
        CHECK_INT(server_db_scalar(&srv,
                                   "SELECT count(*) FROM operator_tokens WHERE "
                                   "CAST(hash AS TEXT) = ?1 OR name = ?1",
                                   secrets[k]),
                  0);
}

/* ---- revoking annotators by pseudonym ---- */

static ldpref_client *enrolled(const char *name, ldpref_enrollment *e, char pub[64])
{
    const char *argv[] = {"ldpref", "admin", "enroll-token", NULL};
    char *out = NULL;
    CHECK_INT(cli(&out, argv), 0);
    char *token = first_enrollment_token(out);
    free(out);
    static char keys[4][400];
    static int used;
    char *key = keys[used++ % 4];
    CHECK_ERR(annotator_key_ensure(srv.dir, name, key, sizeof keys[0]), LDPREF_OK);
    ldpref_options o;
    annotator_options_init(&o, srv.url, key, 10, 1000);
    ldpref_client *c = NULL;
    CHECK_ERR(ldpref_client_open(&o, &c), LDPREF_OK);
    CHECK_ERR(ldpref_enroll(c, token ? token : "x", e), LDPREF_OK);
    CHECK_ERR(ldpref_public_key(c, pub), LDPREF_OK);
    free(token);
    return c;
}

/* The annotators view's "revoked" for pseudonym p (-1: not listed). */
static int revoked_in_view(const char *p)
{
    const char *argv[] = {"ldpref", "admin", "annotators", NULL};
    char *out = NULL;
    CHECK_INT(cli(&out, argv), 0);
    json_t *j = out ? json_loads(out, 0, NULL) : NULL;
    int found = -1;
    size_t i;
    json_t *a;
    json_array_foreach(json_object_get(j, "annotators"), i, a)
    {
        if (strcmp(json_string_value(json_object_get(a, "pseudonym")) ?: "", p) == 0)
            found = json_is_true(json_object_get(a, "revoked"));
    }
    json_decref(j);
    free(out);
    return found;
}

static void test_revoke_by_pseudonym(void)
{
    ldpref_enrollment ea, eb;
    char pa[64], pb[64];
    ldpref_client *a = enrolled("ann-a", &ea, pa), *b = enrolled("ann-b", &eb, pb);
    CHECK(strncmp(ea.pseudonym, "ann-", 4) == 0);
    CHECK_INT(revoked_in_view(ea.pseudonym), 0);
    /* By the pseudonym the operator sees. */
    const char *by_name[] = {"ldpref", "admin", "revoke", ea.pseudonym, NULL};
    char *out = NULL;
    CHECK_INT(cli(&out, by_name), 0);
    CHECK(out && strstr(out, "\"pseudonym\"") && strstr(out, ea.pseudonym));
    free(out);
    CHECK_INT(revoked_in_view(ea.pseudonym), 1);
    CHECK_INT(revoked_in_view(eb.pseudonym), 0); /* only that one */
    ldpref_task *tasks = NULL;
    size_t n = 0;
    CHECK_ERR(ldpref_next_tasks(a, 1, &tasks, &n), LDPREF_EREVOKED_KEY);
    /* By the key, as before. */
    const char *by_key[] = {"ldpref", "admin", "revoke", pb, NULL};
    CHECK_INT(cli(NULL, by_key), 0);
    CHECK_INT(revoked_in_view(eb.pseudonym), 1);
    CHECK_ERR(ldpref_next_tasks(b, 1, &tasks, &n), LDPREF_EREVOKED_KEY);
    /* Unknown pseudonym, malformed, both fields at once. */
    const char *unknown[] = {"ldpref", "admin", "revoke", "ann-0000000000000000", NULL};
    CHECK_INT(cli(NULL, unknown), LDPREF_EUNKNOWN_KEY);
    const char *junk[] = {"ldpref", "admin", "revoke", "ann-0123456789abcdef0123456789", NULL};
    CHECK_INT(cli(NULL, junk), LDPREF_EINVALID_ARGUMENT);
    char url[200], body[256];
    snprintf(url, sizeof url, "%s/v1/annotators/revoke", srv.url);
    snprintf(body, sizeof body, "{\"pseudonym\": \"%s\", \"key\": \"%s\"}", eb.pseudonym, pb);
    http_reply r;
    CHECK_INT(http_raw("POST", url, body, strlen(body), srv.token, &r), 0);
    CHECK_INT(r.status, 400);
    http_reply_free(&r);
    /* An admin-scoped action: an export token may not revoke. */
    snprintf(body, sizeof body, "{\"pseudonym\": \"%s\"}", eb.pseudonym);
    CHECK_INT(http_raw("POST", url, body, strlen(body), creds[C_EXPORT].secret, &r), 0);
    CHECK_INT(r.status, 403);
    http_reply_free(&r);
    ldpref_client_close(a);
    ldpref_client_close(b);
}

/* ---- --public-metrics ---- */

static void test_public_metrics(void)
{
    server_stop(&srv);
    const char *args[] = {"--public-metrics", NULL};
    CHECK_INT(server_restart(&srv, args), 0);
    char url[200];
    snprintf(url, sizeof url, "%s/metrics", srv.url);
    http_reply r;
    CHECK_INT(http_raw("GET", url, NULL, 0, NULL, &r), 0);
    CHECK_INT(r.status, 200); /* no credential needed */
    CHECK(r.body && strstr(r.body, "ldpref_labels_total"));
    http_reply_free(&r);
    CHECK_INT(http_raw("GET", url, NULL, 0, creds[C_BARE].secret, &r), 0);
    CHECK_INT(r.status, 200);
    http_reply_free(&r);
    CHECK_INT(http_raw("GET", url, NULL, 0, creds[C_REVOKED].secret, &r), 0);
    CHECK_INT(r.status, 401); /* a credential presented is still checked */
    http_reply_free(&r);
    /* Nothing else became public. */
    snprintf(url, sizeof url, "%s/v1/stats", srv.url);
    CHECK_INT(http_raw("GET", url, NULL, 0, NULL, &r), 0);
    CHECK_INT(r.status, 401);
    http_reply_free(&r);
}

/* ldpref-server --new-operator-token while the server runs: the running
 * server accepts the new token (with the scopes asked for) within a
 * second or so. */
static void test_offline_mint(void)
{
    const char *argv[] = {"ldpref-server",        "--db",         srv.db,
                          "--new-operator-token", "--token-name", "offline",
                          "--token-scopes",       "export",       NULL};
    char *out = NULL;
    CHECK_INT(run_tool(argv, NULL, &out), 0);
    char tok[160] = "";
    const char *p = out ? strstr(out, "operator token: ") : NULL;
    if (p != NULL)
        sscanf(p + 16, "%159s", tok);
    free(out);
    CHECK(strncmp(tok, "op_", 3) == 0);
    secrets[n_secrets++] = strcpy(offline_secret, tok);
    char url[200];
    http_reply r = {0};
    long status = 0;
    for (int tries = 0; tries < 150 && status != 200; tries++) {
        if (tries > 0)
            usleep(20 * 1000);
        snprintf(url, sizeof url, "%s/v1/export", srv.url);
        http_raw("GET", url, NULL, 0, tok, &r);
        status = r.status;
        http_reply_free(&r);
    }
    CHECK_INT(status, 200);
    snprintf(url, sizeof url, "%s/v1/stats", srv.url);
    CHECK_INT(http_raw("GET", url, NULL, 0, tok, &r), 0);
    CHECK_INT(r.status, 403); /* export only */
    http_reply_free(&r);
    CHECK_INT(
        server_db_scalar(&srv, "SELECT scopes FROM operator_tokens WHERE name = ?1", "offline"),
        EXPORT);
}

static void test_no_secret_in_log(void)
{
    char *log = file_read_all(srv.log, NULL);
    CHECK(log != NULL && strstr(log, "/v1/tokens") != NULL); /* the calls are logged */
    for (int k = 0; log != NULL && k < n_secrets; k++)
        check_record(strstr(log, secrets[k]) == NULL, __FILE__, __LINE__,
                     "the log holds a secret (%.8s...)", secrets[k]);
    free(log);
}

int main(void)
{
    test_table_is_the_servers();
    test_table_is_the_documents();
    if (server_start(&srv, NULL) != 0) {
        CHECK(0 && "server did not start");
        return check_summary();
    }
    snprintf(env_server, sizeof env_server, "LDPREF_SERVER=%s", srv.url);
    snprintf(env_token, sizeof env_token, "LDPREF_OPERATOR_TOKEN=%s", srv.token);
    make_credentials();
    int calls = test_matrix();
    printf("scope matrix: %zu routes x %d credentials = %d calls\n", N_WANT, N_CREDS, calls);
    test_console_session();
    test_revoke_by_pseudonym();
    test_offline_mint();
    test_cli_management();
    test_no_secret_in_log();
    test_public_metrics();
    server_cleanup(&srv);
    return check_summary();
}
