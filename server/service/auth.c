/* auth.c — token minting, hashing and constant-time checks. See auth.h. */
#include "auth.h"

#include "clock.h"
#include "tokens.h"
#include "error.h"
#include "wire.h"

#include <sodium.h>
#include <stdio.h>
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
    int64_t id = 0;
    unsigned scopes = 0;
    int rc = lp_store_op_token_match(s, want, &id, &scopes);
    if (rc == LP_OK && who != NULL)
        *who = (lp_principal){.token_id = id, .scopes = scopes};
    return rc;
}

int lp_auth_operator_live(lp_store *s, int64_t id, lp_principal *who)
{
    unsigned scopes = 0;
    int rc = lp_store_op_token_live(s, id, &scopes);
    if (who != NULL)
        *who = rc == LP_OK ? (lp_principal){.token_id = id, .scopes = scopes} : (lp_principal){0};
    return rc;
}

int lp_auth_operator_mint(lp_store *s, const char *name, unsigned scopes,
                          char out[LP_AUTH_TOKEN_MAX], lp_op_token *row)
{
    uint8_t hash[LP_HASH_BYTES];
    int rc = lp_auth_token_new("op_", out, hash);
    if (rc == LP_OK)
        rc = lp_store_op_token_add(s, hash, name, scopes, lp_now_ms(), row);
    if (rc != LP_OK)
        sodium_memzero(out, LP_AUTH_TOKEN_MAX);
    return rc;
}

int lp_auth_operator_rotate(lp_store *s, int64_t id, char out[LP_AUTH_TOKEN_MAX], lp_op_token *row)
{
    uint8_t hash[LP_HASH_BYTES];
    int rc = lp_auth_token_new("op_", out, hash);
    if (rc == LP_OK)
        rc = lp_store_op_token_rotate(s, id, hash, lp_now_ms(), row);
    if (rc != LP_OK)
        sodium_memzero(out, LP_AUTH_TOKEN_MAX);
    return rc;
}

int lp_auth_bootstrap(lp_store *s, char out[LP_AUTH_TOKEN_MAX], int *created)
{
    int64_t n = 0;
    *created = 0;
    int rc = lp_store_op_tokens_count(s, &n);
    if (rc != LP_OK || n > 0)
        return rc;
    rc = lp_auth_operator_mint(s, "operator", LP_SCOPE_ALL, out, NULL);
    *created = rc == LP_OK;
    return rc;
}

/* ---- scope names and token ids ---- */

static const struct {
    unsigned bit;
    const char *name;
} SCOPES[] = {{LP_SCOPE_ADMIN, "admin"}, {LP_SCOPE_EXPORT, "export"}, {LP_SCOPE_SCORE, "score"}};
#define N_SCOPES (sizeof SCOPES / sizeof SCOPES[0])

const char *lp_scope_name(unsigned bit)
{
    for (size_t i = 0; i < N_SCOPES; i++)
        if (SCOPES[i].bit == bit)
            return SCOPES[i].name;
    return NULL;
}

unsigned lp_scope_bit(const char *name)
{
    for (size_t i = 0; name != NULL && i < N_SCOPES; i++)
        if (strcmp(SCOPES[i].name, name) == 0)
            return SCOPES[i].bit;
    return 0;
}

int lp_scopes_parse_list(const char *text, unsigned *out, char *msg, size_t msglen)
{
    *out = 0;
    if (strcmp(text, "none") == 0)
        return LP_OK;
    for (const char *p = text;;) {
        size_t len = strcspn(p, ",");
        char name[16];
        unsigned bit = 0;
        if (len < sizeof name) {
            memcpy(name, p, len);
            name[len] = '\0';
            bit = lp_scope_bit(name);
        }
        if (bit == 0)
            return lp_fail(LP_EBAD_REQUEST, msg, msglen,
                           "unknown scope \"%.*s\" (admin, export, score; or none)", (int)len, p);
        *out |= bit;
        if (p[len] == '\0')
            return LP_OK;
        p += len + 1;
    }
}

void lp_token_id_format(int64_t id, char out[LP_TOKEN_ID_MAX])
{
    snprintf(out, LP_TOKEN_ID_MAX, LP_TOKEN_ID_PREFIX "%lld", (long long)id);
}

int64_t lp_token_id_parse(const char *text)
{
    size_t plen = strlen(LP_TOKEN_ID_PREFIX);
    if (text == NULL || strncmp(text, LP_TOKEN_ID_PREFIX, plen) != 0)
        return 0;
    const char *d = text + plen;
    size_t n = strspn(d, "0123456789");
    if (n == 0 || n > 18 || d[n] != '\0' || d[0] == '0')
        return 0;
    return strtoll(d, NULL, 10);
}
