/*
 * test_auth.c — operator and enrollment tokens (server/service/auth) over a
 * real store on a temporary SQLite file: the token format, the stored hash,
 * the operator check (every stored token, exact match only, the bearer
 * length cap), minting, and the bootstrap token of a fresh database, also
 * across a reopen; each token's principal (id, scopes), revocation in
 * force at once (also while other threads check tokens), rotation, the
 * last live admin token held back, the table's guards against deletion and
 * edits, scope names and token ids, and the migration of schema 9 tokens.
 */
#include "auth.h"

#include "schema_sql.h"
#include "tokens.h"
#include "check.h"
#include "clock.h"
#include "error.h"
#include "store.h"
#include "store_fixture.h"
#include "wire.h"

#include <pthread.h>
#include <sodium.h>
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define TOKEN_RANDOM_B64 43 /* unpadded base64url of 32 bytes */

static store_fixture fx;

static size_t stored_tokens(void)
{
    int64_t n = -1;
    CHECK_ERR(lp_store_op_tokens_count(fx.store, &n), LP_OK);
    return (size_t)n;
}

/* 1 if a live stored token has the hash of token, read from the file
 * itself (not through the store's in-memory set). */
static int stored(const char *token)
{
    uint8_t want[LP_HASH_BYTES];
    lp_auth_token_hash(token, strlen(token), want);
    sqlite3 *db = NULL;
    sqlite3_stmt *st = NULL;
    int found = 0;
    if (sqlite3_open_v2(fx.path, &db, SQLITE_OPEN_READONLY, NULL) == SQLITE_OK &&
        sqlite3_prepare_v2(db,
                           "SELECT count(*) FROM operator_tokens WHERE hash = ?1 AND "
                           "revoked_ms IS NULL",
                           -1, &st, NULL) == SQLITE_OK) {
        sqlite3_bind_blob(st, 1, want, LP_HASH_BYTES, SQLITE_STATIC);
        found = sqlite3_step(st) == SQLITE_ROW && sqlite3_column_int(st, 0) == 1;
    }
    sqlite3_finalize(st);
    sqlite3_close(db);
    return found;
}

static int mint(const char *name, unsigned scopes, char tok[LP_AUTH_TOKEN_MAX], lp_op_token *row)
{
    return lp_auth_operator_mint(fx.store, name, scopes, tok, row);
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
    CHECK_ERR(mint("t", LP_SCOPE_ALL, tok, NULL), LP_OK);
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
        CHECK_ERR(mint("t", LP_SCOPE_ALL, toks[i], NULL), LP_OK);
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
    CHECK_ERR(lp_store_op_token_add(fx.store, h, "cap", LP_SCOPE_ALL, 1, NULL), LP_OK);
    CHECK_ERR(lp_auth_operator_check(fx.store, at_cap, NULL), LP_OK);
    lp_auth_token_hash(over, strlen(over), h);
    CHECK_ERR(lp_store_op_token_add(fx.store, h, "cap", LP_SCOPE_ALL, 1, NULL), LP_OK);
    CHECK_ERR(lp_auth_operator_check(fx.store, over, NULL), LP_EUNAUTHORIZED);
}

/* Tokens live in the database: after a reopen the old ones still work and
 * bootstrap mints nothing. */
static void test_tokens_survive_reopen(void)
{
    char tok[LP_AUTH_TOKEN_MAX];
    CHECK_ERR(mint("t", LP_SCOPE_ALL, tok, NULL), LP_OK);
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

/* A token's principal is its row id and its scopes; tokens of each scope
 * set are told apart. */
static void test_principal(void)
{
    static const unsigned sets[] = {0,
                                    LP_SCOPE_ADMIN,
                                    LP_SCOPE_EXPORT,
                                    LP_SCOPE_SCORE,
                                    LP_SCOPE_EXPORT | LP_SCOPE_SCORE,
                                    LP_SCOPE_ALL};
    for (size_t i = 0; i < sizeof sets / sizeof sets[0]; i++) {
        char tok[LP_AUTH_TOKEN_MAX];
        lp_op_token row;
        CHECK_ERR(mint("scoped", sets[i], tok, &row), LP_OK);
        CHECK(row.id >= 1);
        CHECK_STR(row.name, "scoped");
        CHECK_INT(row.scopes, sets[i]);
        CHECK_INT(row.revoked_ms, 0);
        lp_principal who = {.token_id = -1, .scopes = 99};
        CHECK_ERR(lp_auth_operator_check(fx.store, tok, &who), LP_OK);
        CHECK_INT(who.token_id, row.id);
        CHECK_INT(who.scopes, sets[i]);
        CHECK_ERR(lp_auth_operator_live(fx.store, row.id, &who), LP_OK);
        CHECK_INT(who.scopes, sets[i]);
    }
    /* A refused bearer leaves an empty principal. */
    lp_principal who = {.token_id = 5, .scopes = LP_SCOPE_ALL};
    CHECK_ERR(lp_auth_operator_check(fx.store, "op_nope", &who), LP_EUNAUTHORIZED);
    CHECK_INT(who.token_id, 0);
    CHECK_INT(who.scopes, 0);
    /* Names and scopes out of range are refused by the store. */
    uint8_t h[LP_HASH_BYTES];
    lp_auth_token_hash("x", 1, h);
    char long_name[LP_TOKEN_NAME_MAX + 1];
    memset(long_name, 'n', LP_TOKEN_NAME_MAX);
    long_name[LP_TOKEN_NAME_MAX] = 0;
    CHECK_ERR(lp_store_op_token_add(fx.store, h, long_name, 1, 1, NULL), LP_EINVALID_ARGUMENT);
    CHECK_ERR(lp_store_op_token_add(fx.store, h, "", 1, 1, NULL), LP_EINVALID_ARGUMENT);
    CHECK_ERR(lp_store_op_token_add(fx.store, h, "n", 8, 1, NULL), LP_EINVALID_ARGUMENT);
}

/* The row of token id from the list. */
static int listed(int64_t id, lp_op_token *out)
{
    lp_op_token *rows = NULL;
    size_t n = 0;
    int found = 0;
    CHECK_ERR(lp_store_op_tokens_list(fx.store, &rows, &n), LP_OK);
    for (size_t i = 0; i < n; i++) {
        if (i > 0)
            CHECK(rows[i].id > rows[i - 1].id); /* in id order */
        if (rows[i].id == id) {
            *out = rows[i];
            found = 1;
        }
    }
    free(rows);
    return found;
}

/* Revocation is in force for the next check, kept in the row, final. */
static void test_revoke(void)
{
    char tok[LP_AUTH_TOKEN_MAX];
    lp_op_token row, seen;
    CHECK_ERR(mint("to-revoke", LP_SCOPE_EXPORT, tok, &row), LP_OK);
    CHECK_ERR(lp_auth_operator_check(fx.store, tok, NULL), LP_OK); /* now in the live set */
    CHECK_ERR(lp_store_op_token_revoke(fx.store, row.id, LP_SCOPE_ADMIN, 12345, &seen), LP_OK);
    CHECK_INT(seen.id, row.id);
    CHECK_INT(seen.revoked_ms, 12345);
    CHECK_ERR(lp_auth_operator_check(fx.store, tok, NULL), LP_EUNAUTHORIZED);
    CHECK_ERR(lp_auth_operator_live(fx.store, row.id, NULL), LP_EUNAUTHORIZED);
    CHECK(!stored(tok));
    CHECK(listed(row.id, &seen));
    CHECK_INT(seen.revoked_ms, 12345);
    CHECK_STR(seen.name, "to-revoke");
    /* Again, and an id that never was: no live token has it. */
    CHECK_ERR(lp_store_op_token_revoke(fx.store, row.id, LP_SCOPE_ADMIN, 2, NULL),
              LP_EUNKNOWN_TOKEN);
    CHECK_ERR(lp_store_op_token_revoke(fx.store, 1 << 30, LP_SCOPE_ADMIN, 2, NULL),
              LP_EUNKNOWN_TOKEN);
    CHECK(listed(row.id, &seen));
    CHECK_INT(seen.revoked_ms, 12345);
}

/* Rotation: a new secret, same name and scopes; the old one refused. */
static void test_rotate(void)
{
    char tok[LP_AUTH_TOKEN_MAX], fresh[LP_AUTH_TOKEN_MAX];
    lp_op_token row, next, seen;
    CHECK_ERR(mint("ci", LP_SCOPE_SCORE | LP_SCOPE_EXPORT, tok, &row), LP_OK);
    CHECK_ERR(lp_auth_operator_rotate(fx.store, row.id, fresh, &next), LP_OK);
    CHECK(next.id > row.id);
    CHECK_STR(next.name, "ci");
    CHECK_INT(next.scopes, LP_SCOPE_SCORE | LP_SCOPE_EXPORT);
    CHECK(strcmp(tok, fresh) != 0 && strncmp(fresh, "op_", 3) == 0);
    lp_principal who;
    CHECK_ERR(lp_auth_operator_check(fx.store, tok, NULL), LP_EUNAUTHORIZED);
    CHECK_ERR(lp_auth_operator_check(fx.store, fresh, &who), LP_OK);
    CHECK_INT(who.token_id, next.id);
    CHECK(listed(row.id, &seen) && seen.revoked_ms > 0);
    /* A rotated-away token cannot be rotated again. */
    char other[LP_AUTH_TOKEN_MAX] = "untouched";
    CHECK_ERR(lp_auth_operator_rotate(fx.store, row.id, other, NULL), LP_EUNKNOWN_TOKEN);
    CHECK(other[0] == '\0'); /* wiped */
}

/* The last live token holding admin cannot be revoked; rotating it keeps
 * one, so it can. */
static void test_last_admin(void)
{
    lp_op_token *rows = NULL;
    size_t n = 0;
    CHECK_ERR(lp_store_op_tokens_list(fx.store, &rows, &n), LP_OK);
    char tok[LP_AUTH_TOKEN_MAX];
    lp_op_token keep;
    CHECK_ERR(mint("last", LP_SCOPE_ADMIN, tok, &keep), LP_OK);
    for (size_t i = 0; i < n; i++) /* every other admin token goes */
        if (rows[i].revoked_ms == 0 && (rows[i].scopes & LP_SCOPE_ADMIN))
            CHECK_ERR(lp_store_op_token_revoke(fx.store, rows[i].id, LP_SCOPE_ADMIN, 3, NULL),
                      LP_OK);
    free(rows);
    CHECK_ERR(lp_store_op_token_revoke(fx.store, keep.id, LP_SCOPE_ADMIN, 4, NULL),
              LP_ELAST_ADMIN_TOKEN);
    CHECK_ERR(lp_auth_operator_check(fx.store, tok, NULL), LP_OK);
    char fresh[LP_AUTH_TOKEN_MAX];
    lp_op_token next;
    CHECK_ERR(lp_auth_operator_rotate(fx.store, keep.id, fresh, &next), LP_OK);
    CHECK_ERR(lp_store_op_token_revoke(fx.store, next.id, LP_SCOPE_ADMIN, 5, NULL),
              LP_ELAST_ADMIN_TOKEN);
    /* With a second admin token either may go, not both. */
    char second[LP_AUTH_TOKEN_MAX];
    lp_op_token two;
    CHECK_ERR(mint("second", LP_SCOPE_ALL, second, &two), LP_OK);
    CHECK_ERR(lp_store_op_token_revoke(fx.store, next.id, LP_SCOPE_ADMIN, 6, NULL), LP_OK);
    CHECK_ERR(lp_store_op_token_revoke(fx.store, two.id, LP_SCOPE_ADMIN, 7, NULL),
              LP_ELAST_ADMIN_TOKEN);
    /* Tokens without admin are never held back. */
    lp_op_token plain;
    CHECK_ERR(mint("plain", LP_SCOPE_EXPORT, tok, &plain), LP_OK);
    CHECK_ERR(lp_store_op_token_revoke(fx.store, plain.id, LP_SCOPE_ADMIN, 8, NULL), LP_OK);
}

/* Checks race with revocations; a check that starts after a revocation
 * returned never accepts the revoked token (the in-memory set is never
 * refilled from a read older than the revocation). */
struct hammer {
    char tok[LP_AUTH_TOKEN_MAX];
    volatile int stop;
    long checks;
};

static void *hammer_fn(void *arg)
{
    struct hammer *h = arg;
    while (!h->stop) {
        lp_auth_operator_check(fx.store, h->tok, NULL);
        h->checks++;
    }
    return NULL;
}

static void test_revoke_races_checks(void)
{
    struct hammer h = {.stop = 0};
    CHECK_ERR(mint("hammer", LP_SCOPE_SCORE, h.tok, NULL), LP_OK);
    pthread_t th[2];
    for (int i = 0; i < 2; i++)
        pthread_create(&th[i], NULL, hammer_fn, &h);
    int accepted_after = 0;
    for (int round = 0; round < 60; round++) {
        char tok[LP_AUTH_TOKEN_MAX];
        lp_op_token row;
        CHECK_ERR(mint("victim", LP_SCOPE_EXPORT, tok, &row), LP_OK);
        CHECK_ERR(lp_auth_operator_check(fx.store, tok, NULL), LP_OK);
        CHECK_ERR(lp_store_op_token_revoke(fx.store, row.id, LP_SCOPE_ADMIN, 9, NULL), LP_OK);
        accepted_after += lp_auth_operator_check(fx.store, tok, NULL) == LP_OK;
    }
    h.stop = 1;
    for (int i = 0; i < 2; i++)
        pthread_join(th[i], NULL);
    CHECK_INT(accepted_after, 0);
    CHECK(h.checks > 0);
    CHECK_ERR(lp_auth_operator_check(fx.store, h.tok, NULL), LP_OK);
}

/* The table is a history: rows are never deleted, and only revoked_ms
 * changes, once. */
static void test_table_guards(void)
{
    sqlite3 *db = NULL;
    CHECK(sqlite3_open(fx.path, &db) == SQLITE_OK);
    sqlite3_busy_timeout(db, 5000);
    static const char *const refused[] = {
        "DELETE FROM operator_tokens",
        "UPDATE operator_tokens SET name = 'x'",
        "UPDATE operator_tokens SET scopes = 7",
        "UPDATE operator_tokens SET hash = randomblob(32) WHERE id = 1",
        "UPDATE operator_tokens SET revoked_ms = 1 WHERE revoked_ms IS NOT NULL",
        "INSERT INTO operator_tokens (hash, name, scopes, created_ms) VALUES "
        "(randomblob(32), 'x', 8, 0)",
        "INSERT INTO operator_tokens (hash, name, scopes, created_ms) VALUES "
        "(randomblob(32), '', 1, 0)"};
    for (size_t i = 0; i < sizeof refused / sizeof refused[0]; i++) {
        int rc = sqlite3_exec(db, refused[i], NULL, NULL, NULL);
        if (rc == SQLITE_OK)
            fprintf(stderr, "accepted: %s\n", refused[i]);
        CHECK(rc != SQLITE_OK);
    }
    sqlite3_close(db);
}

static void test_scope_names_and_ids(void)
{
    unsigned s = 99;
    char msg[128];
    CHECK_ERR(lp_scopes_parse_list("admin,export,score", &s, msg, sizeof msg), LP_OK);
    CHECK_INT(s, LP_SCOPE_ALL);
    CHECK_ERR(lp_scopes_parse_list("score", &s, msg, sizeof msg), LP_OK);
    CHECK_INT(s, LP_SCOPE_SCORE);
    CHECK_ERR(lp_scopes_parse_list("none", &s, msg, sizeof msg), LP_OK);
    CHECK_INT(s, 0);
    static const char *const bad[] = {
        "", "admin,", ",admin", "Admin", "admin,metrics", "adminexport", "none,admin"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
        CHECK_ERR(lp_scopes_parse_list(bad[i], &s, msg, sizeof msg), LP_EBAD_REQUEST);
    CHECK(strstr(msg, "admin,metrics") == NULL); /* names the one unknown scope */
    CHECK_STR(lp_scope_name(LP_SCOPE_EXPORT), "export");
    CHECK(lp_scope_name(LP_SCOPE_ANY_TOKEN) == NULL);
    CHECK_INT(lp_scope_bit("admin"), LP_SCOPE_ADMIN);
    CHECK_INT(lp_scope_bit("all"), 0);

    char id[LP_TOKEN_ID_MAX];
    lp_token_id_format(42, id);
    CHECK_STR(id, "tok-42");
    CHECK_INT(lp_token_id_parse("tok-42"), 42);
    CHECK_INT(lp_token_id_parse("tok-999999999999999999"), 999999999999999999LL);
    static const char *const bad_ids[] = {
        "tok-",   "tok-0", "tok-01", "tok--1", "tok-+1",
        "tok-1x", "42",    "TOK-1",  "tok-1 ", "tok-9999999999999999999"};
    for (size_t i = 0; i < sizeof bad_ids / sizeof bad_ids[0]; i++)
        CHECK_INT(lp_token_id_parse(bad_ids[i]), 0);
    CHECK_INT(lp_token_id_parse(NULL), 0);
}

/* A database of schema 9 (tokens as bare hashes) migrates: each token keeps
 * working with every scope, named "operator", ids in creation order. */
static void test_migration_from_9(void)
{
    store_fixture old;
    CHECK_ERR(store_fixture_open(&old, "test-auth-v9", 1), LP_OK);
    lp_store_close(old.store);
    old.store = NULL;
    remove(old.path);
    sqlite3 *db = NULL;
    CHECK(sqlite3_open(old.path, &db) == SQLITE_OK);
    for (int v = 0; v < 9; v++)
        CHECK(sqlite3_exec(db, LP_MIGRATIONS[v], NULL, NULL, NULL) == SQLITE_OK);
    CHECK(sqlite3_exec(db, "PRAGMA user_version = 9", NULL, NULL, NULL) == SQLITE_OK);
    char toks[2][LP_AUTH_TOKEN_MAX];
    for (int i = 0; i < 2; i++) {
        uint8_t h[LP_HASH_BYTES];
        CHECK_ERR(lp_auth_token_new("op_", toks[i], h), LP_OK);
        sqlite3_stmt *st = NULL;
        CHECK(sqlite3_prepare_v2(db, "INSERT INTO operator_tokens VALUES (?1, ?2)", -1, &st,
                                 NULL) == SQLITE_OK);
        sqlite3_bind_blob(st, 1, h, LP_HASH_BYTES, SQLITE_STATIC);
        sqlite3_bind_int64(st, 2, 1000 + i);
        CHECK(sqlite3_step(st) == SQLITE_DONE);
        sqlite3_finalize(st);
    }
    sqlite3_close(db);
    char err[256] = "";
    lp_store_opts so = {.path = old.path, .sync_full = 0, .read_conns = 1};
    CHECK_ERR(lp_store_open(&so, &old.store, err, sizeof err), LP_OK);
    if (old.store == NULL) {
        store_fixture_close(&old);
        return;
    }
    for (int i = 0; i < 2; i++) {
        lp_principal who;
        CHECK_ERR(lp_auth_operator_check(old.store, toks[i], &who), LP_OK);
        CHECK_INT(who.scopes, LP_SCOPE_ALL);
        CHECK_INT(who.token_id, i + 1);
    }
    lp_op_token *rows = NULL;
    size_t n = 0;
    CHECK_ERR(lp_store_op_tokens_list(old.store, &rows, &n), LP_OK);
    CHECK_INT(n, 2);
    for (size_t i = 0; i < n; i++) {
        CHECK_STR(rows[i].name, "operator");
        CHECK_INT(rows[i].created_ms, 1000 + (int64_t)i);
        CHECK_INT(rows[i].revoked_ms, 0);
    }
    free(rows);
    int created = -1;
    char again[LP_AUTH_TOKEN_MAX];
    CHECK_ERR(lp_auth_bootstrap(old.store, again, &created), LP_OK);
    CHECK_INT(created, 0);
    store_fixture_close(&old);
}

/* A token another process added (ldpref-server --new-operator-token while
 * the server runs) is accepted within about a second: a miss on a copy
 * older than that reads the table again. */
static void test_token_added_elsewhere(void)
{
    char tok[LP_AUTH_TOKEN_MAX];
    CHECK_ERR(mint("here", LP_SCOPE_SCORE, tok, NULL), LP_OK);
    CHECK_ERR(lp_auth_operator_check(fx.store, tok, NULL), LP_OK); /* the copy is filled */
    char other[LP_AUTH_TOKEN_MAX];
    uint8_t h[LP_HASH_BYTES];
    CHECK_ERR(lp_auth_token_new("op_", other, h), LP_OK);
    sqlite3 *db = NULL;
    sqlite3_stmt *st = NULL;
    CHECK(sqlite3_open(fx.path, &db) == SQLITE_OK);
    sqlite3_busy_timeout(db, 5000);
    CHECK(sqlite3_prepare_v2(db,
                             "INSERT INTO operator_tokens (hash, name, scopes, created_ms) "
                             "VALUES (?1, 'elsewhere', 2, 0)",
                             -1, &st, NULL) == SQLITE_OK);
    sqlite3_bind_blob(st, 1, h, LP_HASH_BYTES, SQLITE_STATIC);
    CHECK(sqlite3_step(st) == SQLITE_DONE);
    sqlite3_finalize(st);
    sqlite3_close(db);
    int64_t t0 = lp_mono_ns();
    lp_principal who = {0};
    while (lp_auth_operator_check(fx.store, other, &who) != LP_OK &&
           lp_mono_ns() - t0 < 5 * (int64_t)1000000000) {
        struct timespec ts = {0, 20 * 1000000L};
        nanosleep(&ts, NULL);
    }
    double waited_s = (double)(lp_mono_ns() - t0) / 1e9;
    printf("token added by another connection accepted after %.2f s\n", waited_s);
    CHECK(waited_s < 2.5); /* one refresh period (1 s) and scheduling */
    CHECK_INT(who.scopes, LP_SCOPE_EXPORT);
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
    test_principal();
    test_revoke();
    test_rotate();
    test_last_admin();
    test_revoke_races_checks();
    test_token_added_elsewhere();
    test_table_guards();
    test_scope_names_and_ids();
    test_migration_from_9();
    store_fixture_close(&fx);
    return check_summary();
}
