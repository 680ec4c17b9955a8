/*
 * audit.h — the audit log repository: an append-only, hash-chained table
 * of operator actions (schema/011_audit.sql).
 *
 * Each row's hash is BLAKE2b-256 (libsodium crypto_generichash) of the
 * previous row's hash (32 zero bytes before the first row) followed by the
 * row's fields in one unambiguous encoding: every integer as 8 bytes
 * big-endian (two's complement), every text as its length (8 bytes
 * big-endian) and its bytes, in the order id, at_ms, token_id, action,
 * params, status, error, after the tag "ldpref-audit-v1" (length-prefixed
 * too). The chain detects an edited, deleted, inserted or reordered row
 * unless every later row is rewritten as well; the head (the last row's
 * hash), logged at every append, is what exposes such a rewrite.
 *
 * Appends run on the store's writer (the head is read and the row inserted
 * in one transaction, so appends serialize) and join its group commit.
 */
#ifndef LP_AUDIT_H
#define LP_AUDIT_H

#include "store.h"

#include <stddef.h>
#include <stdint.h>

#define LP_AUDIT_ACTION_MAX 128  /* bytes of an action ("POST /v1/campaigns") */
#define LP_AUDIT_PARAMS_MAX 4096 /* bytes of params (the API caps them first) */
#define LP_AUDIT_ERROR_MAX 64    /* bytes of an error name */
#define LP_AUDIT_HEX (2 * LP_HASH_BYTES + 1)

/* One row. Strings are owned by the row when read from the store
 * (lp_audit_rows_free), borrowed when handed to lp_audit_hash. */
typedef struct lp_audit_row {
    int64_t id, at_ms, token_id;
    char *action, *params, *error; /* error "" on success */
    int64_t status;                /* the HTTP status */
    uint8_t prev_hash[LP_HASH_BYTES], hash[LP_HASH_BYTES];
} lp_audit_row;

/* The chain's head: the last row's id and hash (0 and 32 zero bytes when
 * the log is empty). */
typedef struct lp_audit_head {
    int64_t id;
    uint8_t hash[LP_HASH_BYTES];
} lp_audit_head;

/* The hash of row r (its id and fields; r->prev_hash and r->hash are not
 * read) chained after prev. */
void lp_audit_hash(const uint8_t prev[LP_HASH_BYTES], const lp_audit_row *r,
                   uint8_t out[LP_HASH_BYTES]);

/* Appends one row (action, params and error truncated to their caps by the
 * caller; longer ones are LP_EINVALID_ARGUMENT) and logs the new head
 * (event "audit_append": id, head, action, status, token_id). *head (may be
 * NULL) gets the new row's id and hash. LP_OK or LP_ESTORAGE (logged). */
int lp_store_audit_append(lp_store *s, int64_t token_id, const char *action, const char *params,
                          int64_t status, const char *error, int64_t at_ms, lp_audit_head *head);

/* Up to limit rows with id > after_id, in id order, and the head, read in
 * one snapshot. *rows is freed with lp_audit_rows_free. */
int lp_store_audit_page(lp_store *s, int64_t after_id, int64_t limit, lp_audit_row **rows,
                        size_t *n, lp_audit_head *head);
void lp_audit_rows_free(lp_audit_row *rows, size_t n);

/* The outcome of a walk of the chain. */
typedef struct lp_audit_check {
    int intact;         /* 1: every row chains and matches its hash */
    int64_t rows;       /* rows walked (all of them when intact) */
    lp_audit_head head; /* the last row's id and stored hash */
    int64_t bad_id;     /* the first row found broken (0 when the schema is) */
    char problem[256];  /* what is wrong, for people; "" when intact */
} lp_audit_check;

/*
 * Verifies the audit chain of the database file at path, opened read-only
 * (never created or migrated), in one snapshot: ids run 1, 2, 3, ...; each
 * row's prev_hash is the previous row's hash (zero for row 1); each row's
 * hash matches its fields; and the append-only triggers are the schema's
 * own. LP_OK with *out filled (intact or not); LP_ESTORAGE with a message
 * in err when the file cannot be read or has no audit table.
 */
int lp_audit_verify_file(const char *path, lp_audit_check *out, char *err, size_t errlen);

#endif
