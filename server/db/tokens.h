/*
 * tokens.h — the operator tokens repository (schema/010_operator_tokens.sql).
 *
 * A token row has an id (shown as "tok-<id>"), a name, a set of scope bits
 * (their meaning is the caller's: server/service/auth.h), its creation time
 * and, once revoked or rotated away, its revocation time. The store never
 * sees a token, only its hash.
 *
 * The live tokens (id, hash, scopes) are kept in memory: a hash is matched
 * against every live token without a database read, in time that does not
 * depend on which one matched. Every token write drops the copy once it has
 * committed, and a copy read from the database is kept only if no write
 * committed since the read began, so a revocation is in force for every
 * request that starts after it returned. A hash that matches no token of a
 * copy older than a second has the table read again, so a token another
 * process added (ldpref-server --new-operator-token) works within a second;
 * failed checks read the database at most about once a second.
 */
#ifndef LP_TOKENS_H
#define LP_TOKENS_H

#include "store.h"

#include <stddef.h>
#include <stdint.h>

#define LP_TOKEN_NAME_MAX 65 /* 1..64 bytes and the NUL */

typedef struct lp_op_token {
    int64_t id;
    char name[LP_TOKEN_NAME_MAX];
    unsigned scopes;
    int64_t created_ms;
    int64_t revoked_ms; /* 0: live */
} lp_op_token;

/* Stores a new live token (hash of the secret, name of 1..64 bytes, scope
 * bits 0..7) created at now_ms; *out (may be NULL) gets its row. */
int lp_store_op_token_add(lp_store *s, const uint8_t hash[LP_HASH_BYTES], const char *name,
                          unsigned scopes, int64_t now_ms, lp_op_token *out);

/* The live token whose hash is hash: LP_OK with *id and *scopes set, or
 * LP_EUNAUTHORIZED (also for a revoked token). Every live token's hash is
 * compared (sodium_memcmp, no early exit). LP_ESTORAGE when the live set
 * had to be read and could not be. */
int lp_store_op_token_match(lp_store *s, const uint8_t hash[LP_HASH_BYTES], int64_t *id,
                            unsigned *scopes);

/* Whether token id is live (from the same in-memory set): LP_OK with
 * *scopes set, or LP_EUNAUTHORIZED. */
int lp_store_op_token_live(lp_store *s, int64_t id, unsigned *scopes);

/* Every token, live and revoked, in id order; *out caller-owned (free()). */
int lp_store_op_tokens_list(lp_store *s, lp_op_token **out, size_t *n);

/* How many token rows exist, live or not. */
int lp_store_op_tokens_count(lp_store *s, int64_t *n);

/* Revokes live token id at now_ms, unless it is the last live token that
 * holds every bit of keep (LP_ELAST_ADMIN_TOKEN). *out (may be NULL) gets
 * the revoked row. LP_EUNKNOWN_TOKEN when no live token has this id. */
int lp_store_op_token_revoke(lp_store *s, int64_t id, unsigned keep, int64_t now_ms,
                             lp_op_token *out);

/* Replaces live token id by a new one with the same name and scopes and
 * the hash new_hash, in one transaction: the old one is revoked at now_ms.
 * *out gets the new row. LP_EUNKNOWN_TOKEN when no live token has this id. */
int lp_store_op_token_rotate(lp_store *s, int64_t id, const uint8_t new_hash[LP_HASH_BYTES],
                             int64_t now_ms, lp_op_token *out);

#endif
