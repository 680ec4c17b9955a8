/*
 * store.h — the server's database: open, close, and what the repositories
 * share.
 *
 * A database (lp_store) is one SQLite file behind the storage engine: one
 * writer thread owns the only write connection and commits jobs in groups
 * (every synchronous write returns once durable), reads use a small pool of
 * read-only connections. The repositories take an lp_store and C structs
 * and return error codes from common/error.h; none of them exposes the
 * engine underneath:
 *
 *   campaigns.h     campaigns
 *   annotators.h    annotators, keys, enrollment, revocation, enrollment tokens
 *   tokens.h        operator tokens: scopes, revocation, rotation
 *   tasks.h         tasks and assignments
 *   labels.h        label ingest (the stateful checks and the insert)
 *   label_cursor.h  labels in id order (export, training snapshots)
 *   stats.h         counts for /metrics and /stats
 *   views.h         the operator's views of campaigns, annotators and tasks
 *   quality_read.h  labels with their epsilon, annotator and gold answer (label quality)
 *   registry.h      the learning records
 *   audit.h         the audit log of operator actions (hash-chained)
 *
 * Thread safety: every function may be called from any thread, except
 * lp_store_close (once, when no other call is running).
 */
#ifndef LP_STORE_H
#define LP_STORE_H

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
    int64_t lease_ms; /* how long an assignment holds its task; 0: LP_LEASE_DEFAULT_MS */
} lp_store_opts;

#define LP_LEASE_DEFAULT_MS (3600 * (int64_t)1000)

/* Opens (creating and migrating as needed) and starts the writer thread.
 * Returns LP_OK with *out set (free with lp_store_close), or LP_ESTORAGE
 * (LP_ERNG, LP_ENO_MEMORY) with a message in err. */
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

#endif
