/* auth.c — token minting, hashing and constant-time checks. See auth.h. */
#include "auth.h"

#include "annotators.h"
#include "error.h"
#include "wire.h"

#include <sodium.h>
#include <stdlib.h>
#include <string.h>

#define TOKEN_RANDOM_BYTES 32

void lp_auth_token_hash(const char *token, size_t len, uint8_t hash[LP_HASH_BYTES])
{
    crypto_generichash(hash, LP_HASH_BYTES, (const unsigned char *)token, len, NULL, 0);
}

int lp_auth_token_new(const char *prefix, char out[LP_AUTH_TOKEN_MAX], uint8_t hash[LP_HASH_BYTES])
{
    uint8_t rnd[TOKEN_RANDOM_BYTES];
    char b64[LP_B64_MAX];
    if (sodium_init() < 0)
        return LP_ERNG;
    size_t plen = strlen(prefix);
    if (plen + sodium_base64_encoded_len(TOKEN_RANDOM_BYTES,
                                         sodium_base64_VARIANT_URLSAFE_NO_PADDING) >
        LP_AUTH_TOKEN_MAX)
        return LP_EINVALID_ARGUMENT;
    randombytes_buf(rnd, sizeof rnd);
    lp_b64_encode(rnd, sizeof rnd, b64);
    memcpy(out, prefix, plen);
    memcpy(out + plen, b64, strlen(b64) + 1);
    lp_auth_token_hash(out, strlen(out), hash);
    sodium_memzero(rnd, sizeof rnd);
    sodium_memzero(b64, sizeof b64);
    return LP_OK;
}

int lp_auth_operator_check(lp_store *s, const char *bearer, lp_principal *who)
{
    if (who != NULL)
        *who = (lp_principal){0};
    if (bearer == NULL)
        return LP_EUNAUTHORIZED;
    size_t len = strnlen(bearer, LP_AUTH_BEARER_MAX + 1);
    if (len == 0 || len > LP_AUTH_BEARER_MAX)
        return LP_EUNAUTHORIZED;
    uint8_t want[LP_HASH_BYTES];
    lp_auth_token_hash(bearer, len, want);
    uint8_t *hashes = NULL;
    size_t n = 0;
    int rc = lp_store_operator_tokens(s, &hashes, &n);
    if (rc != LP_OK)
        return rc;
    int match = 0;
    for (size_t i = 0; i < n; i++) /* no early exit: every hash is compared */
        match |= sodium_memcmp(hashes + i * LP_HASH_BYTES, want, LP_HASH_BYTES) == 0;
    free(hashes);
    if (match && who != NULL)
        *who = (lp_principal){.token_id = 0, .scopes = LP_SCOPE_ALL};
    return match ? LP_OK : LP_EUNAUTHORIZED;
}

int lp_auth_operator_mint(lp_store *s, char out[LP_AUTH_TOKEN_MAX])
{
    uint8_t hash[LP_HASH_BYTES];
    int rc = lp_auth_token_new("op_", out, hash);
    if (rc == LP_OK)
        rc = lp_store_operator_token_add(s, hash);
    if (rc != LP_OK)
        sodium_memzero(out, LP_AUTH_TOKEN_MAX);
    return rc;
}

int lp_auth_bootstrap(lp_store *s, char out[LP_AUTH_TOKEN_MAX], int *created)
{
    uint8_t *hashes = NULL;
    size_t n = 0;
    *created = 0;
    int rc = lp_store_operator_tokens(s, &hashes, &n);
    free(hashes);
    if (rc != LP_OK || n > 0)
        return rc;
    rc = lp_auth_operator_mint(s, out);
    *created = rc == LP_OK;
    return rc;
}
