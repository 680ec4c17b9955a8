/*
 * auth.h — operator tokens and one-time enrollment tokens.
 *
 * Tokens are a prefix ("op_" for operators, "et_" for enrollment) followed
 * by the unpadded base64url of 32 CSPRNG bytes. Only their BLAKE2b-256 hash
 * (crypto_generichash) is stored; operator tokens are compared in constant
 * time (sodium_memcmp) against every stored hash. A token is shown once, to
 * whoever minted it, and never logged.
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
 * needs; a token holds any set of them. */
enum {
    LP_SCOPE_ADMIN = 1 << 0,  /* campaigns, tasks, annotators, training, models, views */
    LP_SCOPE_EXPORT = 1 << 1, /* GET /v1/export */
    LP_SCOPE_SCORE = 1 << 2,  /* POST /v1/score on any model */
    LP_SCOPE_ALL = LP_SCOPE_ADMIN | LP_SCOPE_EXPORT | LP_SCOPE_SCORE
};

/* Who a request acts as, once authenticated. */
typedef struct lp_principal {
    int64_t token_id; /* the operator token's id (its row), 0 when unknown */
    unsigned scopes;  /* LP_SCOPE_* bits */
} lp_principal;

/* LP_OK if bearer (may be NULL) is a valid operator token, with who
 * (may be NULL) filled in; else LP_EUNAUTHORIZED (or LP_ESTORAGE). */
int lp_auth_operator_check(lp_store *s, const char *bearer, lp_principal *who);

/* Mints an operator token and stores its hash; out receives the token,
 * which the caller shows once and then wipes (sodium_memzero). */
int lp_auth_operator_mint(lp_store *s, char out[LP_AUTH_TOKEN_MAX]);

/* When the database has no operator token yet, mints one (*created = 1).
 * Otherwise *created = 0 and out is untouched. */
int lp_auth_bootstrap(lp_store *s, char out[LP_AUTH_TOKEN_MAX], int *created);

#endif
