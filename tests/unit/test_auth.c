/*
 * test_auth.c — operator and enrollment tokens (server/service/auth) over a
 * real store on a temporary SQLite file: the token format, the stored hash,
 * the operator check (every stored token, exact match only, the bearer
 * length cap), minting, and the bootstrap token of a fresh database, also
 * across a reopen.
 */
#include "auth.h"

#include "annotators.h"
#include "check.h"
#include "error.h"
#include "store.h"
#include "store_fixture.h"
#include "wire.h"

#include <sodium.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define TOKEN_RANDOM_B64 43 /* unpadded base64url of 32 bytes */

static store_fixture fx;

static size_t stored_tokens(void)
{
    uint8_t *hashes = NULL;
    size_t n = 0;
    CHECK_ERR(lp_store_operator_tokens(fx.store, &hashes, &n), LP_OK);
    free(hashes);
    return n;
}

/* 1 if the store holds the hash of token. */
static int stored(const char *token)
{
    uint8_t want[LP_HASH_BYTES], *hashes = NULL;
    size_t n = 0;
    lp_auth_token_hash(token, strlen(token), want);
    int found = 0;
    if (lp_store_operator_tokens(fx.store, &hashes, &n) == LP_OK)
        for (size_t i = 0; i < n; i++)
            found |= memcmp(hashes + i * LP_HASH_BYTES, want, LP_HASH_BYTES) == 0;
    free(hashes);
    return found;
}

static int is_b64url(const char *s)
{
    for (; *s; s++)
        if (!((*s >= 'A' && *s <= 'Z') || (*s >= 'a' && *s <= 'z') || (*s >= '0' && *s <= '9') ||
              *s == '-' || *s == '_'))
            return 0;
    return 1;
}

static void test_token_format(void)
{
    char a[LP_AUTH_TOKEN_MAX], b[LP_AUTH_TOKEN_MAX];
    uint8_t ha[LP_HASH_BYTES], hb[LP_HASH_BYTES], want[LP_HASH_BYTES];
    CHECK_ERR(lp_auth_token_new("op_", a, ha), LP_OK);
    CHECK_ERR(lp_auth_token_new("et_", b, hb), LP_OK);
    CHECK_INT(strlen(a), 3 + TOKEN_RANDOM_B64);
    CHECK_INT(strlen(b), 3 + TOKEN_RANDOM_B64);
    CHECK(strncmp(a, "op_", 3) == 0);
    CHECK(strncmp(b, "et_", 3) == 0);
    CHECK(is_b64url(a + 3));
    CHECK(is_b64url(b + 3));
    /* The random part decodes to 32 bytes. */
    uint8_t raw[32];
    CHECK_ERR(lp_b64_decode(a + 3, raw, sizeof raw), LP_OK);
    /* The hash is BLAKE2b-256 of the whole token, prefix included. */
    crypto_generichash(want, sizeof want, (const uint8_t *)a, strlen(a), NULL, 0);
    CHECK(memcmp(ha, want, LP_HASH_BYTES) == 0);
    lp_auth_token_hash(b, strlen(b), want);
    CHECK(memcmp(hb, want, LP_HASH_BYTES) == 0);
    /* Fresh randomness every time. */
    char c[LP_AUTH_TOKEN_MAX];
    uint8_t hc[LP_HASH_BYTES];
    CHECK_ERR(lp_auth_token_new("op_", c, hc), LP_OK);
    CHECK(strcmp(a + 3, c + 3) != 0);
    CHECK(memcmp(ha, hc, LP_HASH_BYTES) != 0);
    /* An empty prefix is allowed; one that leaves no room is refused. */
    CHECK_ERR(lp_auth_token_new("", c, hc), LP_OK);
    CHECK_INT(strlen(c), TOKEN_RANDOM_B64);
    char long_prefix[LP_AUTH_TOKEN_MAX];
    memset(long_prefix, 'p', sizeof long_prefix - 1);
    long_prefix[sizeof long_prefix - 1] = 0;
    CHECK_ERR(lp_auth_token_new(long_prefix, c, hc), LP_EINVALID_ARGUMENT);
    long_prefix[LP_AUTH_TOKEN_MAX - TOKEN_RANDOM_B64 - 1] = 0; /* just fits with the NUL */
    CHECK_ERR(lp_auth_token_new(long_prefix, c, hc), LP_OK);
    CHECK_INT(strlen(c), LP_AUTH_TOKEN_MAX - 1);
}

static void test_hash(void)
{
    uint8_t h1[LP_HASH_BYTES], h2[LP_HASH_BYTES], want[LP_HASH_BYTES];
    lp_auth_token_hash("op_abc", 6, h1);
    crypto_generichash(want, sizeof want, (const uint8_t *)"op_abc", 6, NULL, 0);
    CHECK(memcmp(h1, want, LP_HASH_BYTES) == 0);
    /* Only len bytes count. */
    lp_auth_token_hash("op_abcdef", 6, h2);
    CHECK(memcmp(h1, h2, LP_HASH_BYTES) == 0);
    lp_auth_token_hash("op_abd", 6, h2);
    CHECK(memcmp(h1, h2, LP_HASH_BYTES) != 0);
    lp_auth_token_hash("", 0, h2);
    crypto_generichash(want, sizeof want, (const uint8_t *)"", 0, NULL, 0);
    CHECK(memcmp(h2, want, LP_HASH_BYTES) == 0);
}

static void test_bootstrap_fresh_database(void)
{
    CHECK_INT(stored_tokens(), 0);
    char tok[LP_AUTH_TOKEN_MAX];
    int created = -1;
    CHECK_ERR(lp_auth_bootstrap(fx.store, tok, &created), LP_OK);
    CHECK_INT(created, 1);
    CHECK(strncmp(tok, "op_", 3) == 0);
    CHECK_INT(strlen(tok), 3 + TOKEN_RANDOM_B64);
    CHECK_INT(stored_tokens(), 1);
    CHECK(stored(tok));
    CHECK_ERR(lp_auth_operator_check(fx.store, tok, NULL), LP_OK);

    /* A second bootstrap mints nothing and leaves out untouched. */
    char again[LP_AUTH_TOKEN_MAX];
    memset(again, 'x', sizeof again);
    CHECK_ERR(lp_auth_bootstrap(fx.store, again, &created), LP_OK);
    CHECK_INT(created, 0);
    CHECK(again[0] == 'x' && again[LP_AUTH_TOKEN_MAX - 1] == 'x');
    CHECK_INT(stored_tokens(), 1);
}

static void test_check_refusals(void)
{
    char tok[LP_AUTH_TOKEN_MAX];
    CHECK_ERR(lp_auth_operator_mint(fx.store, tok), LP_OK);
    CHECK_ERR(lp_auth_operator_check(fx.store, tok, NULL), LP_OK);
    CHECK_ERR(lp_auth_operator_check(fx.store, NULL, NULL), LP_EUNAUTHORIZED);
    CHECK_ERR(lp_auth_operator_check(fx.store, "", NULL), LP_EUNAUTHORIZED);
    /* One character changed, anywhere. */
    size_t len = strlen(tok);
    for (size_t i = 0; i < len; i += 7) {
        char bad[LP_AUTH_TOKEN_MAX];
        memcpy(bad, tok, len + 1);
        bad[i] = bad[i] == 'A' ? 'B' : 'A';
        CHECK_ERR(lp_auth_operator_check(fx.store, bad, NULL), LP_EUNAUTHORIZED);
    }
    /* A prefix of it, and it with one more character. */
    char shorter[LP_AUTH_TOKEN_MAX], longer[LP_AUTH_TOKEN_MAX + 1];
    memcpy(shorter, tok, len - 1);
    shorter[len - 1] = 0;
    CHECK_ERR(lp_auth_operator_check(fx.store, shorter, NULL), LP_EUNAUTHORIZED);
    snprintf(longer, sizeof longer, "%sA", tok);
    CHECK_ERR(lp_auth_operator_check(fx.store, longer, NULL), LP_EUNAUTHORIZED);
    /* The prefix alone, and an enrollment token, are not operator tokens. */
    CHECK_ERR(lp_auth_operator_check(fx.store, "op_", NULL), LP_EUNAUTHORIZED);
    char et[LP_AUTH_TOKEN_MAX];
    uint8_t eh[LP_HASH_BYTES];
    CHECK_ERR(lp_auth_token_new("et_", et, eh), LP_OK);
    CHECK_ERR(lp_auth_operator_check(fx.store, et, NULL), LP_EUNAUTHORIZED);
}

/* Every stored token is accepted, whatever its position among the hashes. */
static void test_check_every_stored_token(void)
{
    enum { MINTED = 5 };
    char toks[MINTED][LP_AUTH_TOKEN_MAX];
    size_t before = stored_tokens();
    for (int i = 0; i < MINTED; i++)
        CHECK_ERR(lp_auth_operator_mint(fx.store, toks[i]), LP_OK);
    CHECK_INT(stored_tokens(), before + MINTED);
    for (int i = 0; i < MINTED; i++) {
        CHECK(stored(toks[i]));
        CHECK_ERR(lp_auth_operator_check(fx.store, toks[i], NULL), LP_OK);
        for (int j = 0; j < i; j++)
            CHECK(strcmp(toks[i], toks[j]) != 0);
    }
}

/* A bearer is hashed up to LP_AUTH_BEARER_MAX bytes; a longer one is
 * refused even if the hash of its bytes were stored. */
static void test_check_bearer_length_cap(void)
{
    char at_cap[LP_AUTH_BEARER_MAX + 1], over[LP_AUTH_BEARER_MAX + 2];
    memset(at_cap, 'k', LP_AUTH_BEARER_MAX);
    at_cap[LP_AUTH_BEARER_MAX] = 0;
    memset(over, 'k', LP_AUTH_BEARER_MAX + 1);
    over[LP_AUTH_BEARER_MAX + 1] = 0;
    uint8_t h[LP_HASH_BYTES];
    CHECK_ERR(lp_auth_operator_check(fx.store, at_cap, NULL), LP_EUNAUTHORIZED);
    lp_auth_token_hash(at_cap, strlen(at_cap), h);
    CHECK_ERR(lp_store_operator_token_add(fx.store, h), LP_OK);
    CHECK_ERR(lp_auth_operator_check(fx.store, at_cap, NULL), LP_OK);
    lp_auth_token_hash(over, strlen(over), h);
    CHECK_ERR(lp_store_operator_token_add(fx.store, h), LP_OK);
    CHECK_ERR(lp_auth_operator_check(fx.store, over, NULL), LP_EUNAUTHORIZED);
}

/* Tokens live in the database: after a reopen the old ones still work and
 * bootstrap mints nothing. */
static void test_tokens_survive_reopen(void)
{
    char tok[LP_AUTH_TOKEN_MAX];
    CHECK_ERR(lp_auth_operator_mint(fx.store, tok), LP_OK);
    size_t before = stored_tokens();
    lp_store_close(fx.store);
    fx.store = NULL;
    char err[256] = "";
    lp_store_opts so = {.path = fx.path, .sync_full = 0, .read_conns = 1};
    CHECK_ERR(lp_store_open(&so, &fx.store, err, sizeof err), LP_OK);
    if (fx.store == NULL)
        return;
    CHECK_INT(stored_tokens(), before);
    CHECK_ERR(lp_auth_operator_check(fx.store, tok, NULL), LP_OK);
    char again[LP_AUTH_TOKEN_MAX] = "untouched";
    int created = -1;
    CHECK_ERR(lp_auth_bootstrap(fx.store, again, &created), LP_OK);
    CHECK_INT(created, 0);
    CHECK_STR(again, "untouched");
    CHECK_INT(stored_tokens(), before);
}

int main(void)
{
    int opened = store_fixture_open(&fx, "test-auth", 1);
    CHECK_INT(opened, LP_OK);
    if (opened != LP_OK)
        return check_summary();
    test_token_format();
    test_hash();
    test_bootstrap_fresh_database();
    test_check_refusals();
    test_check_every_stored_token();
    test_check_bearer_length_cap();
    test_tokens_survive_reopen();
    store_fixture_close(&fx);
    return check_summary();
}
