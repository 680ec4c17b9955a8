/*
 * tokens.c — the operator token calls of libldpref (admin scope): create,
 * list, revoke, rotate (POST/GET /v1/tokens...). The answers of create and
 * rotate hold the new token's secret, shown this once.
 */
#include "internal.h"

#include <string.h>

#define TOKEN_NAME_MAX 64
#define TOKEN_ID_MAX 23 /* "tok-" and 19 digits */

static void clear_out(char **json_out)
{
    if (json_out)
        *json_out = NULL;
}

/* "admin,export" (or "" or "none": no scope) as a JSON array of names;
 * the server checks the names. NULL when a name is empty. */
static json_t *scope_list(const char *scopes)
{
    json_t *arr = json_array();
    if (arr == NULL || scopes[0] == '\0' || strcmp(scopes, "none") == 0)
        return arr;
    for (const char *p = scopes;;) {
        size_t len = strcspn(p, ",");
        if (len == 0 || json_array_append_new(arr, json_stringn(p, len)) != 0) {
            json_decref(arr);
            return NULL;
        }
        if (p[len] == '\0')
            return arr;
        p += len + 1;
    }
}

int ldpref_admin_token_create(ldpref_client *c, const char *name, const char *scopes,
                              char **json_out)
{
    clear_out(json_out);
    if (c == NULL || name == NULL || scopes == NULL)
        return LDPREF_EINVALID_ARGUMENT;
    if (name[0] == '\0' || strlen(name) > TOKEN_NAME_MAX)
        return lpc_fail(c, LDPREF_EINVALID_ARGUMENT, "a token name must be 1..%d bytes",
                        TOKEN_NAME_MAX);
    json_t *list = scope_list(scopes);
    if (list == NULL)
        return lpc_fail(c, LDPREF_EINVALID_ARGUMENT,
                        "scopes must be names separated by commas (admin, export, score) or "
                        "none");
    json_t *req = json_pack("{s:s, s:o}", "name", name, "scopes", list), *resp = NULL;
    if (req == NULL)
        return lpc_fail(c, LDPREF_ENO_MEMORY, "out of memory");
    long status = 0;
    int rc = lpc_call_json(c, "POST", "/v1/tokens", req, 1, LPC_RESP_CAP_SMALL, &resp, &status);
    json_decref(req);
    return rc != LDPREF_OK ? rc : lpc_give_json(c, resp, json_out);
}

int ldpref_admin_tokens(ldpref_client *c, char **json_out)
{
    clear_out(json_out);
    if (c == NULL)
        return LDPREF_EINVALID_ARGUMENT;
    json_t *resp = NULL;
    long status = 0;
    int rc = lpc_call_json(c, "GET", "/v1/tokens", NULL, 1, LPC_RESP_CAP_SMALL, &resp, &status);
    return rc != LDPREF_OK ? rc : lpc_give_json(c, resp, json_out);
}

/* POST {"id": id} to path. */
static int token_call(ldpref_client *c, const char *path, const char *id, char **json_out)
{
    clear_out(json_out);
    if (c == NULL || id == NULL)
        return LDPREF_EINVALID_ARGUMENT;
    if (strncmp(id, "tok-", 4) != 0 || strlen(id) > TOKEN_ID_MAX || id[4] == '\0' ||
        id[4 + strspn(id + 4, "0123456789")] != '\0')
        return lpc_fail(c, LDPREF_EINVALID_ARGUMENT, "a token id looks like tok-12");
    json_t *req = json_pack("{s:s}", "id", id), *resp = NULL;
    if (req == NULL)
        return lpc_fail(c, LDPREF_ENO_MEMORY, "out of memory");
    long status = 0;
    int rc = lpc_call_json(c, "POST", path, req, 1, LPC_RESP_CAP_SMALL, &resp, &status);
    json_decref(req);
    return rc != LDPREF_OK ? rc : lpc_give_json(c, resp, json_out);
}

int ldpref_admin_token_revoke(ldpref_client *c, const char *id, char **json_out)
{
    return token_call(c, "/v1/tokens/revoke", id, json_out);
}

int ldpref_admin_token_rotate(ldpref_client *c, const char *id, char **json_out)
{
    return token_call(c, "/v1/tokens/rotate", id, json_out);
}
