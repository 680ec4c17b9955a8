/*
 * store.h — the server's durable state in SQLite.
 *
 * One writer thread owns the only write connection. Every mutation is a job:
 * the caller enqueues it and (for the synchronous functions) blocks until the
 * transaction holding it has committed. The writer drains every pending job
 * into one transaction (group commit: the jobs that queued while the previous
 * transaction was committing share the next fsync), commits, then completes
 * all the jobs. A failing job leaves the others intact: a label's only write
 * is its INSERT (a failed statement leaves nothing), every other job runs
 * inside its own SAVEPOINT. Stateful checks (existing label, nonce reuse,
 * epsilon budget) run in the writer, inside that transaction, so concurrent
 * requests cannot both pass them. Reads use a small pool of read-only
 * connections.
 *
 * The store knows nothing about JSON or HTTP: it takes and returns C structs
 * and error codes from common/error.h.
 *
 * Thread safety: every function may be called from any thread, except
 * lp_store_close (once, when no other call is running).
 */
#ifndef LP_STORE_H
#define LP_STORE_H

#include "canon.h"

#include <stddef.h>
#include <stdint.h>

#define LP_HASH_BYTES 32
#define LP_CAMPAIGN_NAME_MAX 64
#define LP_PSEUDONYM_MAX 24 /* "ann-" + 16 hex + NUL fits */
#define LP_FEATURES_MAX 4096

typedef struct lp_store lp_store;

typedef struct lp_store_opts {
    const char *path; /* database file; created if missing */
    int sync_full;    /* 1: synchronous=FULL, 0: NORMAL (both in WAL mode) */
    int read_conns;   /* size of the read pool, >= 1 */
} lp_store_opts;

/* Opens (creating and migrating as needed) and starts the writer thread.
 * Returns LP_OK with *out set (free with lp_store_close), or LP_ESTORAGE with
 * a message in err. */
int lp_store_open(const lp_store_opts *opts, lp_store **out, char *err, size_t errlen);
/* Finishes every queued job, stops the writer, closes all connections.
 * Accepts NULL. */
void lp_store_close(lp_store *s);

/* Writer statistics since open (for /metrics). hist[i] counts commits of
 * 2^(i-1) < jobs <= 2^i items (hist[0]: exactly 1); LP_STORE_HIST buckets. */
#define LP_STORE_HIST 12
typedef struct lp_store_writer_stats {
    uint64_t commits;
    uint64_t items;
    uint64_t hist[LP_STORE_HIST];
} lp_store_writer_stats;
void lp_store_writer_stats_get(lp_store *s, lp_store_writer_stats *out);

/* ---- campaigns ---- */

typedef struct lp_campaign {
    int64_t id;
    char name[LP_CAMPAIGN_NAME_MAX + 1];
    double epsilon_min, epsilon_max, epsilon_budget, epsilon_default;
    int allow_infinite;
} lp_campaign;

/* Creates c (id is filled in). LP_ECAMPAIGN_EXISTS if the name is taken. */
int lp_store_campaign_create(lp_store *s, lp_campaign *c);
/* LP_EUNKNOWN_CAMPAIGN if there is no such campaign. */
int lp_store_campaign_by_name(lp_store *s, const char *name, lp_campaign *out);
int lp_store_campaign_by_id(lp_store *s, int64_t id, lp_campaign *out);
/* All campaigns by id; *out is caller-owned (free()). */
int lp_store_campaign_list(lp_store *s, lp_campaign **out, size_t *n);

/* ---- tokens (hashes only; the store never sees a token) ---- */

int lp_store_operator_token_add(lp_store *s, const uint8_t hash[LP_HASH_BYTES]);
/* All operator token hashes; *out caller-owned (free()), n*LP_HASH_BYTES bytes. */
int lp_store_operator_tokens(lp_store *s, uint8_t **out, size_t *n);
int lp_store_enroll_tokens_add(lp_store *s, int64_t campaign, const uint8_t *hashes, size_t n);

/* ---- annotators ---- */

typedef struct lp_annotator {
    int64_t id;
    int64_t campaign;
    int revoked;
    char pseudonym[LP_PSEUDONYM_MAX];
} lp_annotator;

/* Key -> annotator, served from an in-memory cache that is filled from
 * committed rows and updated when a revocation commits. LP_EUNKNOWN_KEY if
 * no such key. The writer re-checks revocation authoritatively. */
int lp_store_annotator_by_key(lp_store *s, const uint8_t key[LP_KEY_BYTES], lp_annotator *out);

/* Enrolls key with the unused enrollment token whose hash is given; the
 * pseudonym is drawn from the CSPRNG. Errors: LP_EALREADY_ENROLLED,
 * LP_EBAD_ENROLLMENT_TOKEN (unknown or used; nothing is consumed). */
int lp_store_enroll(lp_store *s, const uint8_t key[LP_KEY_BYTES],
                    const uint8_t token_hash[LP_HASH_BYTES], lp_annotator *out);
/* Marks the key revoked. LP_EUNKNOWN_KEY if not enrolled. */
int lp_store_revoke(lp_store *s, const uint8_t key[LP_KEY_BYTES]);

/* ---- tasks ---- */

typedef struct lp_task_in {
    const char *source_id, *prompt, *response0, *response1; /* borrowed */
    int reference_preferred;                                /* 0, 1, or -1 unknown */
    const double *features0, *features1;                    /* NULL or dim values */
    size_t dim;
} lp_task_in;

/* Inserts tasks atomically; rows whose (campaign, source_id) exists are
 * skipped. first/last are the ids of the first and last inserted (0 if none). */
int lp_store_tasks_load(lp_store *s, int64_t campaign, const lp_task_in *tasks, size_t n,
                        size_t *loaded, size_t *skipped, int64_t *first, int64_t *last);

typedef struct lp_task {
    int64_t id, campaign;
    char *prompt, *response0, *response1; /* owned; lp_task_clear frees */
} lp_task;
int lp_store_task_get(lp_store *s, int64_t id, lp_task *out); /* LP_EUNKNOWN_TASK */
void lp_task_clear(lp_task *t);

typedef struct lp_assignment {
    int64_t task_id;
    int swapped;
} lp_assignment;

/* Pending assignments of the annotator first (in assignment order), then new
 * ones (presentation order drawn from the CSPRNG), up to count in total;
 * out must hold count entries. LP_ENO_TASK if none; LP_EREVOKED_KEY. */
int lp_store_assign(lp_store *s, int64_t annotator, uint32_t count, lp_assignment *out, size_t *n);

/* ---- labels ---- */

typedef struct lp_receipt {
    int64_t label_id, task_id;
    int z;
    double epsilon; /* +INFINITY when not privatized */
    int64_t received_ms;
} lp_receipt;

/* One label to store. The caller has decoded it, found the annotator and
 * verified the signature; the writer does the remaining, stateful checks in
 * the order of docs/protocol.md and fills rc/existing/receipt. */
typedef struct lp_label_item {
    lp_label_msg msg;   /* in */
    int64_t annotator;  /* in */
    int64_t window_ms;  /* in: accepted |timestamp - now| */
    int rc;             /* out: LP_OK or the rejection */
    int existing;       /* out: 1 if this was an identical resend */
    lp_receipt receipt; /* out when rc == LP_OK */
} lp_label_item;

/* Stores items (each independently) and returns when all are durable.
 * Returns LP_OK (look at each item's rc) or a storage error for all. */
int lp_store_labels_submit(lp_store *s, lp_label_item *items, size_t n);

/* Same, asynchronously: returns at once (LP_OK, or an error and done is
 * never called); done(ctx) is called from the writer thread after the
 * commit. items stay borrowed until then. */
int lp_store_labels_submit_async(lp_store *s, lp_label_item *items, size_t n,
                                 void (*done)(void *ctx), void *ctx);

/* ---- access for the server's other SQL modules (registry.c, snapshot.c) ---- */

struct sqlite3;

/* Runs fn(db, ctx) on the writer connection inside the group transaction, in
 * its own savepoint (rolled back when fn returns nonzero), and returns fn's
 * code once the transaction has committed (LP_ESTORAGE if the commit
 * failed). fn must only use db, and must not block. */
int lp_store_write_call(lp_store *s, int (*fn)(struct sqlite3 *db, void *ctx), void *ctx);
/* Runs fn(db, ctx) on a pooled read-only connection; returns fn's code.
 * Keep it short: the pool is shared with request handlers. */
int lp_store_read_call(lp_store *s, int (*fn)(struct sqlite3 *db, void *ctx), void *ctx);
/* A new read-only connection of its own (for long reads such as training
 * snapshots); close it with sqlite3_close. LP_ESTORAGE on failure. */
int lp_store_reader_open(lp_store *s, struct sqlite3 **out);

/* ---- statistics and export ---- */

typedef struct lp_campaign_count {
    char name[LP_CAMPAIGN_NAME_MAX + 1];
    int64_t tasks, annotators, labels;
    double epsilon_spent;
} lp_campaign_count;

typedef struct lp_stats {
    int64_t tasks, annotators, labels, assignments;
    double epsilon_spent;
    lp_campaign_count *campaigns; /* owned; lp_stats_clear frees */
    size_t n_campaigns;
} lp_stats;
int lp_store_stats(lp_store *s, lp_stats *out);
void lp_stats_clear(lp_stats *st);

/* One exported label, oriented in the task's own order. Strings and feature
 * arrays are borrowed until the next lp_store_export_next or close. */
typedef struct lp_export_row {
    int64_t label_id, task_id, timestamp_ms, received_ms;
    const char *campaign, *pseudonym, *prompt, *response0, *response1;
    int z_task;
    double epsilon;
    const void *features0, *features1; /* dim binary64 each, maybe unaligned: memcpy */
    size_t dim;
} lp_export_row;

typedef struct lp_export lp_export;
/* Opens a cursor over labels in id order (campaign NULL = all) on its own
 * connection. LP_EUNKNOWN_CAMPAIGN. Close with lp_store_export_close. */
int lp_store_export_open(lp_store *s, const char *campaign, lp_export **out);
/* 1 with *row filled, 0 at the end, negative on error. */
int lp_store_export_next(lp_export *e, lp_export_row *row);
void lp_store_export_close(lp_export *e);

#endif
