/*
 * auth.h — operator tokens and one-time enrollment tokens.
 *
 * Tokens are a prefix ("op_" for operators, "et_" for enrollment) followed
 * by the unpadded base64url of 32 CSPRNG bytes. Only their BLAKE2b-256 hash
 * (crypto_generichash) is stored; operator tokens are compared in constant
 * time (sodium_memcmp) against every live token's hash (server/db/tokens.h
 * keeps them in memory; a revocation is in force at once). A token is shown
 * once, to whoever minted it, and never logged.
 *
 * An operator token has a public id, shown as "tok-<id>" (the row id in
 * operator_tokens; it reveals nothing about the secret), a name, and
 * scopes.
 */
#ifndef LP_AUTH_H
#define LP_AUTH_H

#include "store.h"

#include <stddef.h>
#include <stdint.h>

#define LP_AUTH_TOKEN_MAX 64 /* room for any token we mint, with its NUL */
#define LP_AUTH_BEARER_MAX 256

/* Mints a token with the given prefix into out and its hash into hash.
 * Returns LP_OK or LP_ERNG. */
int lp_auth_token_new(const char *prefix, char out[LP_AUTH_TOKEN_MAX], uint8_t hash[LP_HASH_BYTES]);
/* The stored hash of a token (any string). */
void lp_auth_token_hash(const char *token, size_t len, uint8_t hash[LP_HASH_BYTES]);

/* What an operator credential may do. A route names the one scope it
 * needs; a token holds any set of them (stored as these bits,
 * schema/010_operator_tokens.sql). */
enum {
    LP_SCOPE_ADMIN = 1 << 0,  /* campaigns, tasks, annotators, training, models, views, tokens */
    LP_SCOPE_EXPORT = 1 << 1, /* GET /v1/export */
    LP_SCOPE_SCORE = 1 << 2,  /* POST /v1/score on the served model (others: admin too) */
    LP_SCOPE_ALL = LP_SCOPE_ADMIN | LP_SCOPE_EXPORT | LP_SCOPE_SCORE,
    /* Not a scope a token holds: a route that needs any live operator
     * token, whatever its scopes (GET /metrics). */
    LP_SCOPE_ANY_TOKEN = 1 << 8
};

#define LP_TOKEN_ID_PREFIX "tok-"
#define LP_TOKEN_ID_MAX 24 /* "tok-" + an int64 + NUL */

/* The scope's name ("admin", "export", "score") for one LP_SCOPE_* bit, or
 * NULL. */
const char *lp_scope_name(unsigned bit);
/* The bit of a scope name, or 0 when unknown. */
unsigned lp_scope_bit(const char *name);
/* Scope names separated by commas ("admin,export"; "none": no scope) into
 * *out. LP_OK or LP_EBAD_REQUEST (an unknown name, with it in msg). */
int lp_scopes_parse_list(const char *text, unsigned *out, char *msg, size_t msglen);

/* "tok-<id>" into out. */
void lp_token_id_format(int64_t id, char out[LP_TOKEN_ID_MAX]);
/* The id of "tok-<id>" (id >= 1, decimal without sign or leading zero),
 * or 0 when text is not one. */
int64_t lp_token_id_parse(const char *text);

/* Who a request acts as, once authenticated. */
typedef struct lp_principal {
    int64_t token_id; /* the operator token's id (its row), 0 when unknown */
    unsigned scopes;  /* LP_SCOPE_* bits */
} lp_principal;

/* LP_OK if bearer (may be NULL) is a live operator token, with who (may
 * be NULL) filled in: its id and scopes; else LP_EUNAUTHORIZED (also for
 * a revoked token), or LP_ESTORAGE. */
int lp_auth_operator_check(lp_store *s, const char *bearer, lp_principal *who);

/* Whether token id is still live: LP_OK with who refreshed, or
 * LP_EUNAUTHORIZED (a console session's token revoked since sign-in). */
int lp_auth_operator_live(lp_store *s, int64_t id, lp_principal *who);

/* Mints an operator token named name with scopes and stores its hash; out
 * receives the token, which the caller shows once and then wipes
 * (sodium_memzero); *row (may be NULL) gets the stored row. */
struct lp_op_token;
int lp_auth_operator_mint(lp_store *s, const char *name, unsigned scopes,
                          char out[LP_AUTH_TOKEN_MAX], struct lp_op_token *row);

/* Replaces live token id by a new secret with the same name and scopes
 * (the old one is revoked), as lp_auth_operator_mint. LP_EUNKNOWN_TOKEN. */
int lp_auth_operator_rotate(lp_store *s, int64_t id, char out[LP_AUTH_TOKEN_MAX],
                            struct lp_op_token *row);

/* When the database has never had an operator token, mints one named
 * "operator" with every scope (*created = 1). Otherwise *created = 0 and
 * out is untouched. */
int lp_auth_bootstrap(lp_store *s, char out[LP_AUTH_TOKEN_MAX], int *created);

#endif
