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
 *   coord.h         several servers on one database: the training lock
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
    const char *path; /* database file; created (mode 0600) if missing */
    int sync_full;    /* 1: synchronous=FULL, 0: NORMAL (both in WAL mode) */
    int read_conns;   /* size of the read pool, >= 1 */
    int64_t lease_ms; /* how long an assignment holds its task; 0: LP_LEASE_DEFAULT_MS */
    int must_exist;   /* 1: refuse to open a missing or empty database file */
    /* 1: keep a marker beside the database and refuse to create the
     * database again while it exists (server/db/internal/dbfiles.h) */
    int marker;
    /* writes are refused while the database's filesystem has fewer free
     * bytes than this; 0: no free-space check */
    int64_t disk_free_min;
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
    uint64_t conflicts; /* transactions rolled back by a conflict with another
                         * writer (PostgreSQL: serialization failure or
                         * deadlock), each run again */
    uint64_t hist[LP_STORE_HIST];
} lp_store_writer_stats;
void lp_store_writer_stats_get(lp_store *s, lp_store_writer_stats *out);

/*
 * Storage health. The writer checks the database's files and free space at
 * most once a second (and that the files are still linked before every
 * commit) and refuses every write with LP_ESTORAGE_UNHEALTHY while any of
 * these holds:
 *
 *   db_unlinked    the database or its WAL is no longer the file at its
 *                  path (deleted, renamed or replaced): lasts until restart
 *   commit_failed  a transaction failed to commit; cleared by a successful
 *                  probe write, tried once a second
 *   disk_low       fewer than disk_free_min bytes free; clears by itself
 *
 * Idle, the writer folds the WAL into the database and truncates it.
 */
typedef struct lp_store_health {
    int unlinked, commit_failed, disk_low; /* 1 when that reason holds */
    const char *reason;   /* the first that holds, in the order above, or "ok" (static) */
    const char *backend;  /* "sqlite" or "postgresql" (static); the file checks (unlinked,
                             disk_low, free and WAL bytes) are SQLite's only */
    int64_t free_bytes;   /* at the last check; -1 unknown */
    int64_t free_min;     /* disk_free_min */
    int64_t wal_bytes;    /* the WAL file's size at the last check; -1 unknown */
    int64_t checked_ms;   /* Unix ms of the last check, 0 before the first */
    int64_t failed_ms;    /* Unix ms of the last failed commit, 0 if none */
    int64_t truncated_ms; /* Unix ms of the last truncating checkpoint, 0 if none */
    char failure[128];    /* the last failed commit's SQLite message, "" if none */
} lp_store_health;
void lp_store_health_get(lp_store *s, lp_store_health *out);

#endif
