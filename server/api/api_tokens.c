/*
 * api_tokens.c — the operator tokens endpoints (admin scope): create, list,
 * revoke, rotate. A token's secret is in the answer of the call that made
 * it and nowhere else; the list shows ids, names, scopes and times only.
 */
#include "api_internal.h"

#include "clock.h"
#include "error.h"
#include "tokens.h"
#include "wire.h"

#include <sodium.h>
#include <stdlib.h>
#include <string.h>

/* {"id", "name", "scopes", "created_ms", "revoked_ms"} of a token row. */
static json_t *token_json(const lp_op_token *t)
{
    char id[LP_TOKEN_ID_MAX];
    lp_token_id_format(t->id, id);
    json_t *scopes = json_array();
    for (unsigned bit = 1; bit <= LP_SCOPE_ALL && scopes != NULL; bit <<= 1)
        if ((t->scopes & bit) != 0 &&
            json_array_append_new(scopes, json_string(lp_scope_name(bit))))
            json_decref(scopes), scopes = NULL;
    return json_pack("{s:s, s:s, s:o?, s:I, s:o}", "id", id, "name", t->name, "scopes", scopes,
                     "created_ms", (json_int_t)t->created_ms, "revoked_ms",
                     t->revoked_ms ? json_integer(t->revoked_ms) : json_null());
}

/* The answer of a call that made a token: its row and, this once, its
 * secret (wiped here). */
static int secret_answer(lp_response *resp, const lp_op_token *row, char secret[LP_AUTH_TOKEN_MAX],
                         const char *replaces)
{
    json_t *o = token_json(row);
    int bad = o == NULL || json_object_set_new(o, "token", json_string(secret)) != 0 ||
              (replaces != NULL && json_object_set_new(o, "replaces", json_string(replaces)) != 0);
    sodium_memzero(secret, LP_AUTH_TOKEN_MAX);
    if (bad) {
        json_decref(o);
        return lp_api_error(resp, LP_ENO_MEMORY, NULL);
    }
    return lp_api_json(resp, 201, o);
}

/* A token name: 1..64 bytes of UTF-8 (as parsed) without control
 * characters (C0, DEL, C1), so it prints safely on any terminal. */
static int name_ok(const char *name)
{
    size_t len = strlen(name);
    if (len == 0 || len >= LP_TOKEN_NAME_MAX)
        return 0;
    for (const unsigned char *p = (const unsigned char *)name; *p; p++)
        if (*p < 0x20 || *p == 0x7f || (p[0] == 0xc2 && p[1] >= 0x80 && p[1] <= 0x9f))
            return 0;
    return 1;
}

/* The "scopes" array of names into *out. */
static int scopes_get(const json_t *root, unsigned *out, char *msg, size_t msglen)
{
    const json_t *arr = json_object_get(root, "scopes");
    *out = 0;
    if (arr == NULL)
        return lp_fail(LP_EMISSING_FIELD, msg, msglen,
                       "\"scopes\" is required: a list of admin, export, score (may be empty)");
    if (!json_is_array(arr))
        return lp_fail(LP_EWRONG_TYPE, msg, msglen, "\"scopes\" must be a list of names");
    size_t i;
    const json_t *v;
    json_array_foreach(arr, i, v)
    {
        unsigned bit = lp_scope_bit(json_string_value(v));
        if (bit == 0)
            return lp_fail(LP_EBAD_REQUEST, msg, msglen,
                           "scopes[%zu] is not a scope (admin, export, score)", i);
        *out |= bit;
    }
    return LP_OK;
}

int lp_api_token_create(lp_api *api, const lp_request *req, lp_response *resp)
{
    static const char *const fields[] = {"name", "scopes", NULL};
    char msg[LP_MSG_MAX];
    json_t *root = NULL;
    if (lp_api_parse_body(api, req, &root, resp) != LP_OK)
        return LP_API_DONE;
    const char *name = NULL;
    unsigned scopes = 0;
    int rc = json_is_object(root)
                 ? lp_json_only_fields(root, fields, msg, sizeof msg)
                 : lp_fail(LP_EWRONG_TYPE, msg, sizeof msg, "expected a JSON object");
    if (rc == LP_OK)
        rc = lp_json_get_string(root, "name", LP_TOKEN_NAME_MAX - 1, &name, msg, sizeof msg);
    if (rc == LP_OK && !name_ok(name))
        rc = lp_fail(LP_EBAD_REQUEST, msg, sizeof msg,
                     "\"name\" must be 1..64 bytes without control characters");
    if (rc == LP_OK)
        rc = scopes_get(root, &scopes, msg, sizeof msg);
    char secret[LP_AUTH_TOKEN_MAX];
    lp_op_token row;
    if (rc == LP_OK &&
        (rc = lp_auth_operator_mint(api->store, name, scopes, secret, &row)) != LP_OK)
        msg[0] = '\0';
    json_decref(root);
    if (rc != LP_OK)
        return lp_api_error(resp, rc, msg);
    return secret_answer(resp, &row, secret, NULL);
}

int lp_api_token_list(lp_api *api, const lp_request *req, lp_response *resp)
{
    lp_op_token *rows = NULL;
    size_t n = 0;
    int rc = lp_store_op_tokens_list(api->store, &rows, &n);
    if (rc != LP_OK)
        return lp_api_error(resp, rc, NULL);
    json_t *arr = json_array();
    for (size_t i = 0; i < n && arr != NULL; i++)
        if (json_array_append_new(arr, token_json(&rows[i])) != 0)
            json_decref(arr), arr = NULL;
    free(rows);
    if (arr == NULL)
        return lp_api_error(resp, LP_ENO_MEMORY, NULL);
    return lp_api_json(resp, 200, json_pack("{s:o}", "tokens", arr));
}

/* The token id of a body {"id": "tok-N"} into *id; on error fills resp. */
static int id_body(lp_api *api, const lp_request *req, int64_t *id, char text[LP_TOKEN_ID_MAX],
                   lp_response *resp)
{
    static const char *const fields[] = {"id", NULL};
    char msg[LP_MSG_MAX];
    json_t *root = NULL;
    if (lp_api_parse_body(api, req, &root, resp) != LP_OK)
        return resp->error;
    const char *s = NULL;
    int rc = json_is_object(root)
                 ? lp_json_only_fields(root, fields, msg, sizeof msg)
                 : lp_fail(LP_EWRONG_TYPE, msg, sizeof msg, "expected a JSON object");
    if (rc == LP_OK)
        rc = lp_json_get_string(root, "id", LP_TOKEN_ID_MAX - 1, &s, msg, sizeof msg);
    if (rc == LP_OK && (*id = lp_token_id_parse(s)) == 0)
        rc = lp_fail(LP_EBAD_REQUEST, msg, sizeof msg, "\"id\" must be a token id, \"tok-<n>\"");
    if (rc == LP_OK)
        lp_token_id_format(*id, text);
    json_decref(root);
    if (rc != LP_OK)
        lp_api_error(resp, rc, msg);
    return rc;
}

int lp_api_token_revoke(lp_api *api, const lp_request *req, lp_response *resp)
{
    int64_t id;
    char text[LP_TOKEN_ID_MAX];
    if (id_body(api, req, &id, text, resp) != LP_OK)
        return LP_API_DONE;
    lp_op_token row;
    int rc = lp_store_op_token_revoke(api->store, id, LP_SCOPE_ADMIN, lp_now_ms(), &row);
    if (rc != LP_OK)
        return lp_api_error(resp, rc, NULL);
    return lp_api_json(resp, 200, token_json(&row));
}

int lp_api_token_rotate(lp_api *api, const lp_request *req, lp_response *resp)
{
    int64_t id;
    char text[LP_TOKEN_ID_MAX], secret[LP_AUTH_TOKEN_MAX];
    if (id_body(api, req, &id, text, resp) != LP_OK)
        return LP_API_DONE;
    lp_op_token row;
    int rc = lp_auth_operator_rotate(api->store, id, secret, &row);
    if (rc != LP_OK)
        return lp_api_error(resp, rc, NULL);
    return secret_answer(resp, &row, secret, text);
}
