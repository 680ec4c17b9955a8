/*
 * store.c — SQLite storage with a group-commit writer thread. See store.h.
 *
 * Layout: connection setup and migrations; the key cache; the read pool;
 * the writer (job queue, transaction loop, one run_* function per job kind);
 * the public functions, which build a job and wait for it (or read).
 *
 * Invariants: only the writer thread touches s->wdb after open; a job is
 * owned by whoever enqueued it and the writer never touches a job after
 * calling its completion; every write happens inside the writer's
 * transaction: a label's as one INSERT statement, any other job's inside
 * its own SAVEPOINT; the writer's annotator copy (struct wcache) equals the
 * annotators rows as the current transaction sees them.
 */
#include "store.h"

#include "buf.h"
#include "clock.h"
#include "error.h"
#include "schema_sql.h"
#include "walbuf.h"

#include <assert.h>
#include <errno.h>
#include <math.h>
#include <pthread.h>
#include <sodium.h>
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* ------------------------------------------------------------------ */
/* statements                                                          */

enum wstmt {
    W_BEGIN,
    W_COMMIT,
    W_ROLLBACK,
    W_SP,
    W_SP_RELEASE,
    W_SP_ROLLBACK,
    W_ANNOT,
    W_LABEL_EXISTING,
    W_ASSIGNED,
    W_TASK_EXISTS,
    W_NONCE,
    W_LABEL_INSERT,
    W_SPEND,
    W_KEY_ID,
    W_ETOKEN_GET,
    W_ANNOT_INSERT,
    W_ETOKEN_USE,
    W_REVOKE,
    W_CAMPAIGN_EXISTS,
    W_CAMPAIGN_INSERT,
    W_OPTOKEN_INSERT,
    W_ETOKEN_INSERT,
    W_TASK_INSERT,
    W_PENDING,
    W_MAX_ASSIGNED,
    W_NEW_TASKS,
    W_ASSIGN_INSERT,
    W_COUNT
};

static const char *const WSQL[W_COUNT] = {
    [W_BEGIN] = "BEGIN IMMEDIATE",
    [W_COMMIT] = "COMMIT",
    [W_ROLLBACK] = "ROLLBACK",
    [W_SP] = "SAVEPOINT job",
    [W_SP_RELEASE] = "RELEASE job",
    [W_SP_ROLLBACK] = "ROLLBACK TO job",
    [W_ANNOT] = "SELECT a.revoked, a.epsilon_spent, a.campaign, c.epsilon_min, c.epsilon_max, "
                "c.allow_infinite, c.epsilon_budget FROM annotators a "
                "JOIN campaigns c ON c.id = a.campaign WHERE a.id = ?1",
    [W_LABEL_EXISTING] = "SELECT id, z, epsilon, received_ms, signature FROM labels "
                         "WHERE annotator = ?1 AND task = ?2",
    [W_ASSIGNED] = "SELECT swapped FROM assignments WHERE annotator = ?1 AND task = ?2",
    [W_TASK_EXISTS] = "SELECT campaign FROM tasks WHERE id = ?1",
    [W_NONCE] = "SELECT 1 FROM labels WHERE annotator = ?1 AND nonce = ?2",
    [W_LABEL_INSERT] = "INSERT INTO labels (annotator, task, z, z_task, epsilon, nonce, "
                       "timestamp_ms, signature, received_ms) "
                       "VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9)",
    [W_SPEND] = "UPDATE annotators SET epsilon_spent = ?2 WHERE id = ?1",
    [W_KEY_ID] = "SELECT id FROM annotators WHERE public_key = ?1",
    [W_ETOKEN_GET] = "SELECT campaign, used_by FROM enrollment_tokens WHERE hash = ?1",
    [W_ANNOT_INSERT] = "INSERT INTO annotators (public_key, pseudonym, campaign, enrolled_ms) "
                       "VALUES (?1, ?2, ?3, ?4)",
    [W_ETOKEN_USE] = "UPDATE enrollment_tokens SET used_by = ?2 "
                     "WHERE hash = ?1 AND used_by IS NULL",
    [W_REVOKE] = "UPDATE annotators SET revoked = 1 WHERE public_key = ?1",
    [W_CAMPAIGN_EXISTS] = "SELECT 1 FROM campaigns WHERE name = ?1",
    [W_CAMPAIGN_INSERT] = "INSERT INTO campaigns (name, epsilon_min, epsilon_max, "
                          "allow_infinite, epsilon_budget, epsilon_default, created_ms) "
                          "VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)",
    [W_OPTOKEN_INSERT] = "INSERT INTO operator_tokens (hash, created_ms) VALUES (?1, ?2)",
    [W_ETOKEN_INSERT] = "INSERT INTO enrollment_tokens (hash, campaign, created_ms) "
                        "VALUES (?1, ?2, ?3)",
    [W_TASK_INSERT] = "INSERT INTO tasks (campaign, source_id, prompt, response0, response1, "
                      "features0, features1, reference_preferred, created_ms) "
                      "VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9) "
                      "ON CONFLICT (campaign, source_id) DO NOTHING",
    [W_PENDING] = "SELECT a.task, a.swapped FROM assignments a WHERE a.annotator = ?1 AND "
                  "NOT EXISTS (SELECT 1 FROM labels l WHERE l.annotator = a.annotator "
                  "AND l.task = a.task) ORDER BY a.task LIMIT ?2",
    [W_MAX_ASSIGNED] = "SELECT COALESCE(MAX(task), 0) FROM assignments WHERE annotator = ?1",
    [W_NEW_TASKS] = "SELECT id FROM tasks WHERE campaign = ?1 AND id > ?2 ORDER BY id LIMIT ?3",
    [W_ASSIGN_INSERT] = "INSERT INTO assignments (annotator, task, swapped, created_ms) "
                        "VALUES (?1, ?2, ?3, ?4)",
};

#define CAMPAIGN_COLS                                                                              \
    "SELECT id, name, epsilon_min, epsilon_max, allow_infinite, epsilon_budget, "                  \
    "epsilon_default FROM campaigns "

enum rstmt { R_KEY, R_CAMPAIGN_NAME, R_CAMPAIGN_ID, R_CAMPAIGN_LIST, R_OPTOKENS, R_TASK, R_COUNT };

static const char *const RSQL[R_COUNT] = {
    [R_KEY] = "SELECT id, campaign, revoked, pseudonym FROM annotators WHERE public_key = ?1",
    [R_CAMPAIGN_NAME] = CAMPAIGN_COLS "WHERE name = ?1",
    [R_CAMPAIGN_ID] = CAMPAIGN_COLS "WHERE id = ?1",
    [R_CAMPAIGN_LIST] = CAMPAIGN_COLS "ORDER BY id",
    [R_OPTOKENS] = "SELECT hash FROM operator_tokens",
    [R_TASK] = "SELECT id, campaign, prompt, response0, response1 FROM tasks WHERE id = ?1",
};

/* ------------------------------------------------------------------ */
/* types                                                               */

struct rconn {
    sqlite3 *db;
    sqlite3_stmt *st[R_COUNT];
    struct rconn *next_free;
};

#define KC_BUCKETS 65536u
#define KC_MAX 1000000u

struct kc_entry {
    uint8_t key[LP_KEY_BYTES];
    lp_annotator a;
    struct kc_entry *next;
};

enum job_kind {
    J_LABELS,
    J_ENROLL,
    J_REVOKE,
    J_CAMPAIGN,
    J_OPTOKEN,
    J_ETOKENS,
    J_TASKS,
    J_ASSIGN,
    J_CALL
};

struct job {
    enum job_kind kind;
    void *arg;
    int rc;       /* job-level result (per-item results live in arg) */
    size_t items; /* for the commit-size statistics */
    void (*complete)(struct job *j);
    void (*user_done)(void *ctx);
    void *user_ctx;
    struct job *next;
};

struct lp_store {
    sqlite3 *wdb;
    sqlite3_stmt *ws[W_COUNT];
    pthread_t writer;
    int writer_started;
    pthread_mutex_t qlock;
    pthread_cond_t qcond;
    struct job *qhead, *qtail;
    int stopping;

    struct rconn *rconns;
    int n_rconns;
    struct rconn *rfree;
    pthread_mutex_t rlock;
    pthread_cond_t rcond;

    pthread_rwlock_t kc_lock;
    struct kc_entry **kc;
    size_t kc_count;
    uint64_t kc_gen; /* bumped by every revocation */

    pthread_mutex_t stats_lock;
    lp_store_writer_stats wstats;
    struct wcache *wc; /* writer thread only */
    char path[4096];
};

/* ------------------------------------------------------------------ */
/* connections and migrations                                          */

static int exec_sql(sqlite3 *db, const char *sql, char *err, size_t errlen)
{
    char *e = NULL;
    if (sqlite3_exec(db, sql, NULL, NULL, &e) != SQLITE_OK) {
        if (err)
            snprintf(err, errlen, "%s", e ? e : sqlite3_errmsg(db));
        sqlite3_free(e);
        return LP_ESTORAGE;
    }
    return LP_OK;
}

/* Opens a connection with the shared pragmas. *out is set even on failure
 * (close it). The writer with sync_full uses the walbuf VFS (walbuf.h: one
 * write per commit to the WAL; it needs synchronous=FULL and one writer). */
static int open_conn(const char *path, int sync_full, int readonly, sqlite3 **out, char *err,
                     size_t errlen)
{
    int flags = SQLITE_OPEN_READWRITE | SQLITE_OPEN_NOMUTEX | (readonly ? 0 : SQLITE_OPEN_CREATE);
    const char *vfs = !readonly && sync_full ? lp_walbuf_vfs() : NULL;
    if (sqlite3_open_v2(path, out, flags, vfs) != SQLITE_OK) {
        snprintf(err, errlen, "cannot open %s: %s", path,
                 *out ? sqlite3_errmsg(*out) : "out of memory");
        return LP_ESTORAGE;
    }
    sqlite3_busy_timeout(*out, 10000);
    char sql[256];
    snprintf(sql, sizeof sql,
             "PRAGMA journal_mode=WAL; PRAGMA synchronous=%s; PRAGMA foreign_keys=ON; %s",
             sync_full ? "FULL" : "NORMAL", readonly ? "PRAGMA query_only=1;" : "");
    return exec_sql(*out, sql, err, errlen);
}

/* The writer connection only. A bigger page cache keeps the indexes that
 * every label touches (labels, assignments, annotators) in memory across
 * transactions. Checkpoints run in the writer, at commit, and fsync both
 * files: every 16384 WAL pages (64 MiB) instead of SQLite's 1000 they are
 * rarer and fold many rewrites of the same hot index pages into one write.
 * journal_size_limit truncates the WAL file back after a checkpoint.
 * Durability is unchanged: the WAL is synced at every commit. */
#define WRITER_PRAGMAS                                                                             \
    "PRAGMA cache_size=-65536; PRAGMA wal_autocheckpoint=16384; "                                  \
    "PRAGMA journal_size_limit=67108864;"

static int migrate(sqlite3 *db, char *err, size_t errlen)
{
    sqlite3_stmt *st = NULL;
    int version = -1;
    if (sqlite3_prepare_v2(db, "PRAGMA user_version", -1, &st, NULL) == SQLITE_OK &&
        sqlite3_step(st) == SQLITE_ROW)
        version = sqlite3_column_int(st, 0);
    sqlite3_finalize(st);
    if (version < 0) {
        snprintf(err, errlen, "cannot read user_version: %s", sqlite3_errmsg(db));
        return LP_ESTORAGE;
    }
    if (version > LP_MIGRATION_COUNT) {
        snprintf(err, errlen, "database schema version %d is newer than this server (%d)", version,
                 LP_MIGRATION_COUNT);
        return LP_ESTORAGE;
    }
    for (int v = version; v < LP_MIGRATION_COUNT; v++) {
        char sql[64];
        snprintf(sql, sizeof sql, "PRAGMA user_version = %d", v + 1);
        if (exec_sql(db, "BEGIN IMMEDIATE", err, errlen) != LP_OK)
            return LP_ESTORAGE;
        if (exec_sql(db, LP_MIGRATIONS[v], err, errlen) != LP_OK ||
            exec_sql(db, sql, err, errlen) != LP_OK ||
            exec_sql(db, "COMMIT", err, errlen) != LP_OK) {
            exec_sql(db, "ROLLBACK", NULL, 0);
            return LP_ESTORAGE;
        }
    }
    return LP_OK;
}

/* ------------------------------------------------------------------ */
/* key cache                                                           */

static uint32_t kc_hash(const uint8_t key[LP_KEY_BYTES])
{
    uint32_t h;
    memcpy(&h, key, sizeof h);
    return h % KC_BUCKETS;
}

static int kc_get(lp_store *s, const uint8_t key[LP_KEY_BYTES], lp_annotator *out, uint64_t *gen)
{
    int found = 0;
    pthread_rwlock_rdlock(&s->kc_lock);
    for (struct kc_entry *e = s->kc[kc_hash(key)]; e != NULL; e = e->next)
        if (memcmp(e->key, key, LP_KEY_BYTES) == 0) {
            *out = e->a;
            found = 1;
            break;
        }
    *gen = s->kc_gen;
    pthread_rwlock_unlock(&s->kc_lock);
    return found;
}

/* Inserts a row read from the database unless a revocation happened since
 * the read started (gen changed): then the row may be stale; skip. */
static void kc_put(lp_store *s, const uint8_t key[LP_KEY_BYTES], const lp_annotator *a,
                   uint64_t gen)
{
    pthread_rwlock_wrlock(&s->kc_lock);
    uint32_t h = kc_hash(key);
    int present = 0;
    for (struct kc_entry *e = s->kc[h]; e != NULL && !present; e = e->next)
        present = memcmp(e->key, key, LP_KEY_BYTES) == 0;
    if (!present && gen == s->kc_gen && s->kc_count < KC_MAX) {
        struct kc_entry *e = malloc(sizeof *e);
        if (e != NULL) {
            memcpy(e->key, key, LP_KEY_BYTES);
            e->a = *a;
            e->next = s->kc[h];
            s->kc[h] = e;
            s->kc_count++;
        }
    }
    pthread_rwlock_unlock(&s->kc_lock);
}

static void kc_revoke(lp_store *s, const uint8_t key[LP_KEY_BYTES])
{
    pthread_rwlock_wrlock(&s->kc_lock);
    s->kc_gen++;
    for (struct kc_entry *e = s->kc[kc_hash(key)]; e != NULL; e = e->next)
        if (memcmp(e->key, key, LP_KEY_BYTES) == 0)
            e->a.revoked = 1;
    pthread_rwlock_unlock(&s->kc_lock);
}

/* ------------------------------------------------------------------ */
/* read pool                                                           */

static struct rconn *r_acquire(lp_store *s)
{
    pthread_mutex_lock(&s->rlock);
    while (s->rfree == NULL)
        pthread_cond_wait(&s->rcond, &s->rlock);
    struct rconn *c = s->rfree;
    s->rfree = c->next_free;
    pthread_mutex_unlock(&s->rlock);
    return c;
}

static void r_release(lp_store *s, struct rconn *c)
{
    pthread_mutex_lock(&s->rlock);
    c->next_free = s->rfree;
    s->rfree = c;
    pthread_cond_signal(&s->rcond);
    pthread_mutex_unlock(&s->rlock);
}

/* The pooled statement, prepared on first use and reset for reuse; NULL on
 * failure (logged). */
static sqlite3_stmt *r_stmt(struct rconn *c, enum rstmt which)
{
    if (c->st[which] == NULL &&
        sqlite3_prepare_v3(c->db, RSQL[which], -1, SQLITE_PREPARE_PERSISTENT, &c->st[which],
                           NULL) != SQLITE_OK) {
        fprintf(stderr, "store: prepare failed: %s\n", sqlite3_errmsg(c->db));
        return NULL;
    }
    sqlite3_reset(c->st[which]);
    sqlite3_clear_bindings(c->st[which]);
    return c->st[which];
}

/* ------------------------------------------------------------------ */
/* writer helpers                                                      */

static sqlite3_stmt *w_stmt(lp_store *s, enum wstmt which)
{
    sqlite3_stmt *st = s->ws[which];
    sqlite3_reset(st);
    sqlite3_clear_bindings(st);
    return st;
}

static int w_exec(lp_store *s, enum wstmt which)
{
    sqlite3_stmt *st = w_stmt(s, which);
    int rc = sqlite3_step(st);
    sqlite3_reset(st);
    if (rc != SQLITE_DONE && rc != SQLITE_ROW) {
        fprintf(stderr, "store: %s: %s\n", WSQL[which], sqlite3_errmsg(s->wdb));
        return LP_ESTORAGE;
    }
    return LP_OK;
}

static int w_fail(lp_store *s, const char *what)
{
    fprintf(stderr, "store: %s: %s\n", what, sqlite3_errmsg(s->wdb));
    return LP_ESTORAGE;
}

/* Runs fn inside its own savepoint: released on LP_OK, rolled back otherwise. */
static int with_savepoint(lp_store *s, int (*fn)(lp_store *, void *), void *arg)
{
    if (w_exec(s, W_SP) != LP_OK)
        return LP_ESTORAGE;
    int rc = fn(s, arg);
    if (rc != LP_OK)
        w_exec(s, W_SP_ROLLBACK);
    if (w_exec(s, W_SP_RELEASE) != LP_OK && rc == LP_OK)
        rc = LP_ESTORAGE;
    return rc;
}

/* ---- label ---- */

/*
 * The writer's copy of the annotator rows that label jobs read and write
 * (revoked flag, epsilon spent, the campaign's epsilon range and budget).
 * The writer is the only connection that writes annotators, so the copy is
 * exactly what a SELECT inside the current transaction would return, as long
 * as: (1) spends are applied to the copy as labels are accepted and written
 * back (one UPDATE per annotator) before COMMIT — see wcache_flush; (2) the
 * copy is dropped after every other kind of job (revocation, enrollment...)
 * and whenever a transaction does not commit. It saves one SELECT and one
 * UPDATE per label; the checks themselves are unchanged and still run in
 * the writer, inside the commit transaction.
 */
#define WC_SLOTS 8192u /* power of two */
#define WC_MAX (WC_SLOTS / 2)

struct wc_entry {
    int64_t id; /* 0: empty slot */
    int revoked, allow_inf, dirty;
    double spent, eps_min, eps_max, budget;
};

struct wcache {
    struct wc_entry slot[WC_SLOTS];
    uint32_t dirty[WC_MAX]; /* slots whose spent must be written back */
    size_t n, n_dirty;
};

static uint32_t wc_hash(int64_t id)
{
    uint64_t h = (uint64_t)id * 0x9E3779B97F4A7C15ull;
    return (uint32_t)(h >> 40) & (WC_SLOTS - 1);
}

static void wcache_clear(struct wcache *c)
{
    memset(c->slot, 0, sizeof c->slot);
    c->n = c->n_dirty = 0;
}

/* Writes every pending spend back (inside the current transaction). */
static int wcache_flush(lp_store *s, struct wcache *c)
{
    int rc = LP_OK;
    for (size_t i = 0; i < c->n_dirty; i++) {
        struct wc_entry *e = &c->slot[c->dirty[i]];
        e->dirty = 0;
        if (rc != LP_OK)
            continue;
        sqlite3_stmt *st = w_stmt(s, W_SPEND);
        sqlite3_bind_int64(st, 1, e->id);
        sqlite3_bind_double(st, 2, e->spent);
        if (sqlite3_step(st) != SQLITE_DONE || sqlite3_changes(s->wdb) != 1)
            rc = w_fail(s, "budget update");
        sqlite3_reset(st);
    }
    c->n_dirty = 0;
    return rc;
}

/* The entry for annotator id, read from the database on a miss. *out is
 * NULL with LP_EUNKNOWN_KEY or a storage error. */
static int wcache_get(lp_store *s, struct wcache *c, int64_t id, struct wc_entry **out)
{
    *out = NULL;
    uint32_t h = wc_hash(id);
    while (c->slot[h].id != 0) {
        if (c->slot[h].id == id) {
            *out = &c->slot[h];
            return LP_OK;
        }
        h = (h + 1) & (WC_SLOTS - 1);
    }
    if (c->n >= WC_MAX) { /* full: write back and start over */
        if (wcache_flush(s, c) != LP_OK)
            return LP_ESTORAGE;
        wcache_clear(c);
        h = wc_hash(id);
    }
    sqlite3_stmt *st = w_stmt(s, W_ANNOT);
    sqlite3_bind_int64(st, 1, id);
    int step = sqlite3_step(st);
    if (step != SQLITE_ROW) {
        sqlite3_reset(st);
        return step == SQLITE_DONE ? LP_EUNKNOWN_KEY : w_fail(s, "annotator lookup");
    }
    struct wc_entry *e = &c->slot[h];
    e->id = id;
    e->revoked = sqlite3_column_int(st, 0);
    e->spent = sqlite3_column_double(st, 1);
    e->eps_min = sqlite3_column_double(st, 3);
    e->eps_max = sqlite3_column_double(st, 4);
    e->allow_inf = sqlite3_column_int(st, 5);
    e->budget = sqlite3_column_double(st, 6);
    e->dirty = 0;
    sqlite3_reset(st);
    c->n++;
    *out = e;
    return LP_OK;
}

struct labels_arg {
    lp_label_item *items;
    size_t n;
};

/* The checks of docs/protocol.md that need the database, in their order,
 * for a label that did not take the fast path of run_label. Returns the
 * rejection, or LP_OK when the label is an identical resend (receipt
 * filled). swapped < 0: not assigned. */
static int label_checks(lp_store *s, lp_label_item *it, const struct wc_entry *a, int swapped,
                        int64_t now)
{
    const lp_label_msg *m = &it->msg;
    /* an existing label for (annotator, task): idempotent resend or conflict */
    sqlite3_stmt *st = w_stmt(s, W_LABEL_EXISTING);
    sqlite3_bind_int64(st, 1, it->annotator);
    sqlite3_bind_int64(st, 2, m->task_id);
    int step = sqlite3_step(st);
    if (step == SQLITE_ROW) {
        const void *sig = sqlite3_column_blob(st, 4);
        int same = sig != NULL && sqlite3_column_bytes(st, 4) == LP_SIG_BYTES &&
                   memcmp(sig, m->sig, LP_SIG_BYTES) == 0;
        if (same) {
            it->existing = 1;
            it->receipt.label_id = sqlite3_column_int64(st, 0);
            it->receipt.task_id = m->task_id;
            it->receipt.z = sqlite3_column_int(st, 1);
            it->receipt.epsilon =
                sqlite3_column_type(st, 2) == SQLITE_NULL ? INFINITY : sqlite3_column_double(st, 2);
            it->receipt.received_ms = sqlite3_column_int64(st, 3);
        }
        sqlite3_reset(st);
        return same ? LP_OK : LP_ECONFLICTING_LABEL;
    }
    sqlite3_reset(st);
    if (step != SQLITE_DONE)
        return w_fail(s, "label lookup");

    /* timestamp window */
    int64_t skew = m->timestamp_ms - now;
    if (skew > it->window_ms || skew < -it->window_ms)
        return LP_ESTALE_TIMESTAMP;

    /* task and assignment */
    if (swapped < 0) {
        st = w_stmt(s, W_TASK_EXISTS);
        sqlite3_bind_int64(st, 1, m->task_id);
        step = sqlite3_step(st);
        sqlite3_reset(st);
        if (step == SQLITE_ROW)
            return LP_ENOT_ASSIGNED;
        if (step == SQLITE_DONE)
            return LP_EUNKNOWN_TASK;
        return w_fail(s, "task lookup");
    }

    /* nonce */
    st = w_stmt(s, W_NONCE);
    sqlite3_bind_int64(st, 1, it->annotator);
    sqlite3_bind_blob(st, 2, m->nonce, LP_NONCE_BYTES, SQLITE_STATIC);
    step = sqlite3_step(st);
    sqlite3_reset(st);
    if (step == SQLITE_ROW)
        return LP_EREPLAYED_NONCE;
    if (step != SQLITE_DONE)
        return w_fail(s, "nonce lookup");

    /* epsilon range, then budget (basic composition; an allowed infinity
     * is outside the accounting: such a campaign has opted out of privacy) */
    int inf = isinf(m->epsilon);
    if (inf && !a->allow_inf)
        return LP_EBAD_EPSILON;
    if (!inf && (m->epsilon < a->eps_min || m->epsilon > a->eps_max))
        return LP_EEPSILON_OUT_OF_RANGE;
    if (!inf && a->spent + m->epsilon > a->budget * (1.0 + 1e-12))
        return LP_EBUDGET_EXCEEDED;
    /* every check passed, yet the insert failed on a constraint */
    return w_fail(s, "label insert");
}

/*
 * One label. Fast path: when the label is assigned and passes the checks
 * that need no lookup (timestamp, epsilon range, budget), insert it at
 * once; the UNIQUE (annotator, task) and (annotator, nonce) constraints
 * then prove there was neither an existing label nor a used nonce, so the
 * outcome is the one the ordered checks would give. Anything else — a
 * resend, a conflict, a rejection — goes through label_checks, which runs
 * the checks in protocol order. Nothing is written for a rejected label
 * (the INSERT is the only write, and a failed statement leaves nothing).
 */
static int run_label(lp_store *s, struct wcache *c, lp_label_item *it, int64_t now)
{
    const lp_label_msg *m = &it->msg;
    struct wc_entry *a;
    int rc = wcache_get(s, c, it->annotator, &a);
    if (rc != LP_OK)
        return rc;
    if (a->revoked) /* the authoritative revocation check */
        return LP_EREVOKED_KEY;

    sqlite3_stmt *st = w_stmt(s, W_ASSIGNED);
    sqlite3_bind_int64(st, 1, it->annotator);
    sqlite3_bind_int64(st, 2, m->task_id);
    int step = sqlite3_step(st);
    int swapped = step == SQLITE_ROW ? sqlite3_column_int(st, 0) : -1;
    sqlite3_reset(st);
    if (step != SQLITE_ROW && step != SQLITE_DONE)
        return w_fail(s, "assignment lookup");

    int inf = isinf(m->epsilon);
    int64_t skew = m->timestamp_ms - now;
    int clean = swapped >= 0 && skew <= it->window_ms && skew >= -it->window_ms &&
                (inf ? a->allow_inf
                     : m->epsilon >= a->eps_min && m->epsilon <= a->eps_max &&
                           a->spent + m->epsilon <= a->budget * (1.0 + 1e-12));
    if (!clean)
        return label_checks(s, it, a, swapped, now);

    st = w_stmt(s, W_LABEL_INSERT);
    sqlite3_bind_int64(st, 1, it->annotator);
    sqlite3_bind_int64(st, 2, m->task_id);
    sqlite3_bind_int(st, 3, m->z);
    sqlite3_bind_int(st, 4, swapped ? 1 - m->z : m->z);
    if (inf)
        sqlite3_bind_null(st, 5);
    else
        sqlite3_bind_double(st, 5, m->epsilon);
    sqlite3_bind_blob(st, 6, m->nonce, LP_NONCE_BYTES, SQLITE_STATIC);
    sqlite3_bind_int64(st, 7, m->timestamp_ms);
    sqlite3_bind_blob(st, 8, m->sig, LP_SIG_BYTES, SQLITE_STATIC);
    sqlite3_bind_int64(st, 9, now);
    step = sqlite3_step(st);
    sqlite3_reset(st);
    if (step != SQLITE_DONE) {
        if ((sqlite3_extended_errcode(s->wdb) & 0xff) != SQLITE_CONSTRAINT ||
            sqlite3_get_autocommit(s->wdb))
            return w_fail(s, "label insert");
        return label_checks(s, it, a, swapped, now);
    }
    it->receipt.label_id = sqlite3_last_insert_rowid(s->wdb);
    it->receipt.task_id = m->task_id;
    it->receipt.z = m->z;
    it->receipt.epsilon = m->epsilon;
    it->receipt.received_ms = now;
    it->existing = 0;
    if (!inf) {
        a->spent += m->epsilon;
        if (!a->dirty) {
            a->dirty = 1;
            c->dirty[c->n_dirty++] = (uint32_t)(a - c->slot);
        }
    }
    return LP_OK;
}

static void run_labels(lp_store *s, struct job *j)
{
    struct labels_arg *a = j->arg;
    int64_t now = lp_now_ms();
    for (size_t i = 0; i < a->n; i++) {
        a->items[i].existing = 0;
        a->items[i].rc = run_label(s, s->wc, &a->items[i], now);
    }
}

/* ---- enrollment and revocation ---- */

struct enroll_arg {
    const uint8_t *key, *token_hash;
    lp_annotator out;
};

static int run_enroll(lp_store *s, void *argp)
{
    struct enroll_arg *a = argp;
    sqlite3_stmt *st = w_stmt(s, W_KEY_ID);
    sqlite3_bind_blob(st, 1, a->key, LP_KEY_BYTES, SQLITE_STATIC);
    int step = sqlite3_step(st);
    sqlite3_reset(st);
    if (step == SQLITE_ROW)
        return LP_EALREADY_ENROLLED;
    if (step != SQLITE_DONE)
        return w_fail(s, "key lookup");

    st = w_stmt(s, W_ETOKEN_GET);
    sqlite3_bind_blob(st, 1, a->token_hash, LP_HASH_BYTES, SQLITE_STATIC);
    step = sqlite3_step(st);
    if (step != SQLITE_ROW) {
        sqlite3_reset(st);
        return step == SQLITE_DONE ? LP_EBAD_ENROLLMENT_TOKEN : w_fail(s, "token lookup");
    }
    int64_t campaign = sqlite3_column_int64(st, 0);
    int used = sqlite3_column_type(st, 1) != SQLITE_NULL;
    sqlite3_reset(st);
    if (used)
        return LP_EBAD_ENROLLMENT_TOKEN;

    for (int attempt = 0;; attempt++) {
        uint8_t rnd[8];
        randombytes_buf(rnd, sizeof rnd);
        memcpy(a->out.pseudonym, "ann-", 4);
        sodium_bin2hex(a->out.pseudonym + 4, sizeof a->out.pseudonym - 4, rnd, sizeof rnd);
        st = w_stmt(s, W_ANNOT_INSERT);
        sqlite3_bind_blob(st, 1, a->key, LP_KEY_BYTES, SQLITE_STATIC);
        sqlite3_bind_text(st, 2, a->out.pseudonym, -1, SQLITE_STATIC);
        sqlite3_bind_int64(st, 3, campaign);
        sqlite3_bind_int64(st, 4, lp_now_ms());
        step = sqlite3_step(st);
        sqlite3_reset(st);
        if (step == SQLITE_DONE)
            break;
        if (attempt >= 3) /* a pseudonym collision is ~2^-64; more is a real error */
            return w_fail(s, "annotator insert");
    }
    a->out.id = sqlite3_last_insert_rowid(s->wdb);
    a->out.campaign = campaign;
    a->out.revoked = 0;
    st = w_stmt(s, W_ETOKEN_USE);
    sqlite3_bind_blob(st, 1, a->token_hash, LP_HASH_BYTES, SQLITE_STATIC);
    sqlite3_bind_int64(st, 2, a->out.id);
    if (sqlite3_step(st) != SQLITE_DONE || sqlite3_changes(s->wdb) != 1)
        return w_fail(s, "token update");
    sqlite3_reset(st);
    return LP_OK;
}

static int run_revoke(lp_store *s, void *argp)
{
    sqlite3_stmt *st = w_stmt(s, W_REVOKE);
    sqlite3_bind_blob(st, 1, argp, LP_KEY_BYTES, SQLITE_STATIC);
    if (sqlite3_step(st) != SQLITE_DONE)
        return w_fail(s, "revoke");
    sqlite3_reset(st);
    return sqlite3_changes(s->wdb) == 1 ? LP_OK : LP_EUNKNOWN_KEY;
}

/* ---- campaigns and tokens ---- */

static int run_campaign(lp_store *s, void *argp)
{
    lp_campaign *c = argp;
    sqlite3_stmt *st = w_stmt(s, W_CAMPAIGN_EXISTS);
    sqlite3_bind_text(st, 1, c->name, -1, SQLITE_STATIC);
    int step = sqlite3_step(st);
    sqlite3_reset(st);
    if (step == SQLITE_ROW)
        return LP_ECAMPAIGN_EXISTS;
    st = w_stmt(s, W_CAMPAIGN_INSERT);
    sqlite3_bind_text(st, 1, c->name, -1, SQLITE_STATIC);
    sqlite3_bind_double(st, 2, c->epsilon_min);
    sqlite3_bind_double(st, 3, c->epsilon_max);
    sqlite3_bind_int(st, 4, c->allow_infinite ? 1 : 0);
    sqlite3_bind_double(st, 5, c->epsilon_budget);
    sqlite3_bind_double(st, 6, c->epsilon_default);
    sqlite3_bind_int64(st, 7, lp_now_ms());
    if (sqlite3_step(st) != SQLITE_DONE)
        return w_fail(s, "campaign insert");
    sqlite3_reset(st);
    c->id = sqlite3_last_insert_rowid(s->wdb);
    return LP_OK;
}

static int run_optoken(lp_store *s, void *argp)
{
    sqlite3_stmt *st = w_stmt(s, W_OPTOKEN_INSERT);
    sqlite3_bind_blob(st, 1, argp, LP_HASH_BYTES, SQLITE_STATIC);
    sqlite3_bind_int64(st, 2, lp_now_ms());
    if (sqlite3_step(st) != SQLITE_DONE)
        return w_fail(s, "operator token insert");
    sqlite3_reset(st);
    return LP_OK;
}

struct etokens_arg {
    int64_t campaign;
    const uint8_t *hashes;
    size_t n;
};

static int run_etokens(lp_store *s, void *argp)
{
    struct etokens_arg *a = argp;
    for (size_t i = 0; i < a->n; i++) {
        sqlite3_stmt *st = w_stmt(s, W_ETOKEN_INSERT);
        sqlite3_bind_blob(st, 1, a->hashes + i * LP_HASH_BYTES, LP_HASH_BYTES, SQLITE_STATIC);
        sqlite3_bind_int64(st, 2, a->campaign);
        sqlite3_bind_int64(st, 3, lp_now_ms());
        if (sqlite3_step(st) != SQLITE_DONE)
            return sqlite3_extended_errcode(s->wdb) == SQLITE_CONSTRAINT_FOREIGNKEY
                       ? LP_EUNKNOWN_CAMPAIGN
                       : w_fail(s, "enrollment token insert");
        sqlite3_reset(st);
    }
    return LP_OK;
}

/* ---- tasks ---- */

struct tasks_arg {
    int64_t campaign;
    const lp_task_in *tasks;
    size_t n, loaded, skipped;
    int64_t first, last;
};

static int run_tasks(lp_store *s, void *argp)
{
    struct tasks_arg *a = argp;
    int64_t now = lp_now_ms();
    a->loaded = a->skipped = 0;
    a->first = a->last = 0;
    for (size_t i = 0; i < a->n; i++) {
        const lp_task_in *t = &a->tasks[i];
        sqlite3_stmt *st = w_stmt(s, W_TASK_INSERT);
        sqlite3_bind_int64(st, 1, a->campaign);
        sqlite3_bind_text(st, 2, t->source_id, -1, SQLITE_STATIC);
        sqlite3_bind_text(st, 3, t->prompt, -1, SQLITE_STATIC);
        sqlite3_bind_text(st, 4, t->response0, -1, SQLITE_STATIC);
        sqlite3_bind_text(st, 5, t->response1, -1, SQLITE_STATIC);
        if (t->features0 != NULL && t->features1 != NULL && t->dim > 0) {
            sqlite3_bind_blob(st, 6, t->features0, (int)(t->dim * sizeof(double)), SQLITE_STATIC);
            sqlite3_bind_blob(st, 7, t->features1, (int)(t->dim * sizeof(double)), SQLITE_STATIC);
        }
        if (t->reference_preferred == 0 || t->reference_preferred == 1)
            sqlite3_bind_int(st, 8, t->reference_preferred);
        sqlite3_bind_int64(st, 9, now);
        if (sqlite3_step(st) != SQLITE_DONE)
            return sqlite3_extended_errcode(s->wdb) == SQLITE_CONSTRAINT_FOREIGNKEY
                       ? LP_EUNKNOWN_CAMPAIGN
                       : w_fail(s, "task insert");
        sqlite3_reset(st);
        if (sqlite3_changes(s->wdb) == 1) {
            int64_t id = sqlite3_last_insert_rowid(s->wdb);
            if (a->loaded++ == 0)
                a->first = id;
            a->last = id;
        } else {
            a->skipped++;
        }
    }
    return LP_OK;
}

/* ---- assignment ---- */

struct assign_arg {
    int64_t annotator;
    uint32_t count;
    lp_assignment *out;
    size_t n;
};

static int run_assign(lp_store *s, void *argp)
{
    struct assign_arg *a = argp;
    sqlite3_stmt *st = w_stmt(s, W_ANNOT);
    sqlite3_bind_int64(st, 1, a->annotator);
    int step = sqlite3_step(st);
    if (step != SQLITE_ROW) {
        sqlite3_reset(st);
        return step == SQLITE_DONE ? LP_EUNKNOWN_KEY : w_fail(s, "annotator lookup");
    }
    int revoked = sqlite3_column_int(st, 0);
    int64_t campaign = sqlite3_column_int64(st, 2);
    sqlite3_reset(st);
    if (revoked)
        return LP_EREVOKED_KEY;

    a->n = 0;
    st = w_stmt(s, W_PENDING);
    sqlite3_bind_int64(st, 1, a->annotator);
    sqlite3_bind_int64(st, 2, a->count);
    while ((step = sqlite3_step(st)) == SQLITE_ROW && a->n < a->count) {
        a->out[a->n].task_id = sqlite3_column_int64(st, 0);
        a->out[a->n].swapped = sqlite3_column_int(st, 1);
        a->n++;
    }
    sqlite3_reset(st);
    if (step != SQLITE_DONE && step != SQLITE_ROW)
        return w_fail(s, "pending assignments");
    if (a->n == a->count)
        return LP_OK;

    st = w_stmt(s, W_MAX_ASSIGNED);
    sqlite3_bind_int64(st, 1, a->annotator);
    if (sqlite3_step(st) != SQLITE_ROW)
        return w_fail(s, "max assignment");
    int64_t after = sqlite3_column_int64(st, 0);
    sqlite3_reset(st);

    size_t first_new = a->n;
    st = w_stmt(s, W_NEW_TASKS);
    sqlite3_bind_int64(st, 1, campaign);
    sqlite3_bind_int64(st, 2, after);
    sqlite3_bind_int64(st, 3, a->count - a->n);
    while ((step = sqlite3_step(st)) == SQLITE_ROW && a->n < a->count) {
        a->out[a->n].task_id = sqlite3_column_int64(st, 0);
        a->out[a->n].swapped = (int)randombytes_uniform(2);
        a->n++;
    }
    sqlite3_reset(st);
    if (step != SQLITE_DONE && step != SQLITE_ROW)
        return w_fail(s, "new tasks");
    int64_t now = lp_now_ms();
    for (size_t i = first_new; i < a->n; i++) {
        st = w_stmt(s, W_ASSIGN_INSERT);
        sqlite3_bind_int64(st, 1, a->annotator);
        sqlite3_bind_int64(st, 2, a->out[i].task_id);
        sqlite3_bind_int(st, 3, a->out[i].swapped);
        sqlite3_bind_int64(st, 4, now);
        if (sqlite3_step(st) != SQLITE_DONE)
            return w_fail(s, "assignment insert");
        sqlite3_reset(st);
    }
    return a->n == 0 ? LP_ENO_TASK : LP_OK;
}

/* ---- a sibling module's write ---- */

struct call_arg {
    int (*fn)(sqlite3 *db, void *ctx);
    void *ctx;
};

static int run_call(lp_store *s, void *argp)
{
    struct call_arg *a = argp;
    return a->fn(s->wdb, a->ctx);
}

/* ------------------------------------------------------------------ */
/* the writer loop                                                     */

static int run_job(lp_store *s, struct job *j)
{
    if (j->kind != J_LABELS) {
        /* the annotator copy may be changed by the job: write it back now
         * (outside the job's savepoint) and re-read it afterwards */
        if (wcache_flush(s, s->wc) != LP_OK)
            return LP_ESTORAGE;
        wcache_clear(s->wc);
    }
    switch (j->kind) {
    case J_LABELS:
        run_labels(s, j);
        j->rc = LP_OK;
        break;
    case J_ENROLL:
        j->rc = with_savepoint(s, run_enroll, j->arg);
        break;
    case J_REVOKE:
        j->rc = with_savepoint(s, run_revoke, j->arg);
        break;
    case J_CAMPAIGN:
        j->rc = with_savepoint(s, run_campaign, j->arg);
        break;
    case J_OPTOKEN:
        j->rc = with_savepoint(s, run_optoken, j->arg);
        break;
    case J_ETOKENS:
        j->rc = with_savepoint(s, run_etokens, j->arg);
        break;
    case J_TASKS:
        j->rc = with_savepoint(s, run_tasks, j->arg);
        break;
    case J_ASSIGN:
        j->rc = with_savepoint(s, run_assign, j->arg);
        break;
    case J_CALL:
        j->rc = with_savepoint(s, run_call, j->arg);
        break;
    }
    if (j->kind != J_LABELS)
        wcache_clear(s->wc);
    /* SQLite rolls a transaction back by itself on some errors (disk full,
     * I/O): then nothing of the group may be reported as stored */
    return sqlite3_get_autocommit(s->wdb) ? LP_ESTORAGE : LP_OK;
}

/* After a failed COMMIT nothing of the batch is stored: every result that
 * claimed success becomes a storage error. */
static void fail_job(struct job *j)
{
    if (j->kind == J_LABELS) {
        struct labels_arg *a = j->arg;
        for (size_t i = 0; i < a->n; i++)
            if (a->items[i].rc == LP_OK)
                a->items[i].rc = LP_ESTORAGE;
    }
    j->rc = LP_ESTORAGE;
}

/* Group commit: while one transaction commits (its fsync takes 1.5-5 ms on
 * the benchmark VM), new jobs queue; the next transaction takes all of them.
 * There is no timed wait for more: measured with a thread per connection, a
 * wait of up to 1 ms per cycle only lengthened every request (single-label
 * ingest 9.8-10.3K labels/s with it, 11.4-14.4K without) and saved no CPU. */
static void *writer_main(void *arg)
{
    lp_store *s = arg;
    for (;;) {
        pthread_mutex_lock(&s->qlock);
        while (s->qhead == NULL && !s->stopping)
            pthread_cond_wait(&s->qcond, &s->qlock);
        struct job *batch = s->qhead;
        s->qhead = s->qtail = NULL;
        pthread_mutex_unlock(&s->qlock);
        if (batch == NULL)
            break; /* stopping, and nothing left */

        size_t items = 0;
        int ok = w_exec(s, W_BEGIN) == LP_OK;
        for (struct job *j = batch; j != NULL; j = j->next) {
            items += j->items;
            if (ok && run_job(s, j) != LP_OK)
                ok = 0;
        }
        if (ok && wcache_flush(s, s->wc) != LP_OK)
            ok = 0;
        if (ok && w_exec(s, W_COMMIT) != LP_OK)
            ok = 0;
        if (!ok) {
            if (!sqlite3_get_autocommit(s->wdb))
                w_exec(s, W_ROLLBACK);
            wcache_clear(s->wc); /* it held uncommitted spends */
        }
        pthread_mutex_lock(&s->stats_lock);
        s->wstats.commits++;
        s->wstats.items += items;
        int b = 0;
        while (b < LP_STORE_HIST - 1 && ((size_t)1 << b) < items)
            b++;
        s->wstats.hist[b]++;
        pthread_mutex_unlock(&s->stats_lock);
        for (struct job *j = batch, *next; j != NULL; j = next) {
            next = j->next; /* j may be gone once completed */
            if (!ok)
                fail_job(j);
            j->complete(j);
        }
    }
    return NULL;
}

static int enqueue(lp_store *s, struct job *j)
{
    j->next = NULL;
    pthread_mutex_lock(&s->qlock);
    if (s->stopping) {
        pthread_mutex_unlock(&s->qlock);
        return LP_EUNAVAILABLE;
    }
    if (s->qtail)
        s->qtail->next = j;
    else
        s->qhead = j;
    s->qtail = j;
    pthread_cond_signal(&s->qcond);
    pthread_mutex_unlock(&s->qlock);
    return LP_OK;
}

struct waiter {
    pthread_mutex_t m;
    pthread_cond_t c;
    int done;
};

static void waiter_complete(struct job *j)
{
    struct waiter *w = j->user_ctx;
    pthread_mutex_lock(&w->m);
    w->done = 1;
    pthread_cond_signal(&w->c);
    pthread_mutex_unlock(&w->m);
}

/* Enqueues a job and blocks until its transaction has committed (or
 * failed). Returns the job's rc. */
static int run_sync(lp_store *s, enum job_kind kind, void *arg, size_t items)
{
    struct waiter w = {.done = 0};
    pthread_mutex_init(&w.m, NULL);
    pthread_cond_init(&w.c, NULL);
    struct job j = {
        .kind = kind, .arg = arg, .items = items, .complete = waiter_complete, .user_ctx = &w};
    int rc = enqueue(s, &j);
    if (rc == LP_OK) {
        pthread_mutex_lock(&w.m);
        while (!w.done)
            pthread_cond_wait(&w.c, &w.m);
        pthread_mutex_unlock(&w.m);
        rc = j.rc;
    }
    pthread_cond_destroy(&w.c);
    pthread_mutex_destroy(&w.m);
    return rc;
}

/* ------------------------------------------------------------------ */
/* open / close                                                        */

int lp_store_open(const lp_store_opts *opts, lp_store **out, char *err, size_t errlen)
{
    *out = NULL;
    if (sodium_init() < 0) {
        snprintf(err, errlen, "libsodium failed to initialize");
        return LP_ERNG;
    }
    lp_store *s = calloc(1, sizeof *s);
    if (s == NULL) {
        snprintf(err, errlen, "out of memory");
        return LP_ENO_MEMORY;
    }
    snprintf(s->path, sizeof s->path, "%s", opts->path);
    pthread_mutex_init(&s->qlock, NULL);
    pthread_cond_init(&s->qcond, NULL);
    pthread_mutex_init(&s->rlock, NULL);
    pthread_cond_init(&s->rcond, NULL);
    pthread_rwlock_init(&s->kc_lock, NULL);
    pthread_mutex_init(&s->stats_lock, NULL);
    s->kc = calloc(KC_BUCKETS, sizeof *s->kc);
    s->wc = calloc(1, sizeof *s->wc);
    int n_read = opts->read_conns < 1 ? 1 : opts->read_conns;
    s->rconns = calloc((size_t)n_read, sizeof *s->rconns);
    if (s->kc == NULL || s->wc == NULL || s->rconns == NULL) {
        snprintf(err, errlen, "out of memory");
        goto fail;
    }
    if (open_conn(opts->path, opts->sync_full, 0, &s->wdb, err, errlen) != LP_OK ||
        migrate(s->wdb, err, errlen) != LP_OK ||
        exec_sql(s->wdb, WRITER_PRAGMAS, err, errlen) != LP_OK)
        goto fail;
    for (int i = 0; i < W_COUNT; i++)
        if (sqlite3_prepare_v3(s->wdb, WSQL[i], -1, SQLITE_PREPARE_PERSISTENT, &s->ws[i], NULL) !=
            SQLITE_OK) {
            snprintf(err, errlen, "prepare: %s", sqlite3_errmsg(s->wdb));
            goto fail;
        }
    for (int i = 0; i < n_read; i++) {
        s->n_rconns++;
        if (open_conn(opts->path, opts->sync_full, 1, &s->rconns[i].db, err, errlen) != LP_OK)
            goto fail;
        s->rconns[i].next_free = s->rfree;
        s->rfree = &s->rconns[i];
    }
    if (pthread_create(&s->writer, NULL, writer_main, s) != 0) {
        snprintf(err, errlen, "cannot start the writer thread");
        goto fail;
    }
    s->writer_started = 1;
    *out = s;
    return LP_OK;
fail:
    lp_store_close(s);
    return LP_ESTORAGE;
}

void lp_store_close(lp_store *s)
{
    if (s == NULL)
        return;
    if (s->writer_started) {
        pthread_mutex_lock(&s->qlock);
        s->stopping = 1;
        pthread_cond_broadcast(&s->qcond);
        pthread_mutex_unlock(&s->qlock);
        pthread_join(s->writer, NULL);
    }
    for (int i = 0; i < s->n_rconns; i++) {
        for (int k = 0; k < R_COUNT; k++)
            sqlite3_finalize(s->rconns[i].st[k]);
        sqlite3_close(s->rconns[i].db);
    }
    for (int i = 0; i < W_COUNT; i++)
        sqlite3_finalize(s->ws[i]);
    if (s->wdb) {
        /* fold the WAL back into the database on a clean shutdown */
        sqlite3_exec(s->wdb, "PRAGMA wal_checkpoint(TRUNCATE)", NULL, NULL, NULL);
        sqlite3_close(s->wdb);
    }
    if (s->kc) {
        for (size_t b = 0; b < KC_BUCKETS; b++)
            for (struct kc_entry *e = s->kc[b], *n; e != NULL; e = n) {
                n = e->next;
                free(e);
            }
        free(s->kc);
    }
    free(s->rconns);
    free(s->wc);
    pthread_mutex_destroy(&s->qlock);
    pthread_cond_destroy(&s->qcond);
    pthread_mutex_destroy(&s->rlock);
    pthread_cond_destroy(&s->rcond);
    pthread_rwlock_destroy(&s->kc_lock);
    pthread_mutex_destroy(&s->stats_lock);
    free(s);
}

void lp_store_writer_stats_get(lp_store *s, lp_store_writer_stats *out)
{
    pthread_mutex_lock(&s->stats_lock);
    *out = s->wstats;
    pthread_mutex_unlock(&s->stats_lock);
}

/* ------------------------------------------------------------------ */
/* public: campaigns and tokens                                        */

int lp_store_campaign_create(lp_store *s, lp_campaign *c)
{
    return run_sync(s, J_CAMPAIGN, c, 1);
}

static void read_campaign(sqlite3_stmt *st, lp_campaign *c)
{
    memset(c, 0, sizeof *c);
    c->id = sqlite3_column_int64(st, 0);
    snprintf(c->name, sizeof c->name, "%s", (const char *)sqlite3_column_text(st, 1));
    c->epsilon_min = sqlite3_column_double(st, 2);
    c->epsilon_max = sqlite3_column_double(st, 3);
    c->allow_infinite = sqlite3_column_int(st, 4);
    c->epsilon_budget = sqlite3_column_double(st, 5);
    c->epsilon_default = sqlite3_column_double(st, 6);
}

static int campaign_get(lp_store *s, const char *name, int64_t id, lp_campaign *out)
{
    struct rconn *c = r_acquire(s);
    sqlite3_stmt *st = r_stmt(c, name ? R_CAMPAIGN_NAME : R_CAMPAIGN_ID);
    int rc = LP_ESTORAGE;
    if (st != NULL) {
        if (name)
            sqlite3_bind_text(st, 1, name, -1, SQLITE_STATIC);
        else
            sqlite3_bind_int64(st, 1, id);
        int step = sqlite3_step(st);
        if (step == SQLITE_ROW) {
            read_campaign(st, out);
            rc = LP_OK;
        } else if (step == SQLITE_DONE) {
            rc = LP_EUNKNOWN_CAMPAIGN;
        }
        sqlite3_reset(st);
    }
    r_release(s, c);
    return rc;
}

int lp_store_campaign_by_name(lp_store *s, const char *name, lp_campaign *out)
{
    return campaign_get(s, name, 0, out);
}

int lp_store_campaign_by_id(lp_store *s, int64_t id, lp_campaign *out)
{
    return campaign_get(s, NULL, id, out);
}

int lp_store_campaign_list(lp_store *s, lp_campaign **out, size_t *n)
{
    *out = NULL;
    *n = 0;
    struct rconn *c = r_acquire(s);
    sqlite3_stmt *st = r_stmt(c, R_CAMPAIGN_LIST);
    int rc = st ? LP_OK : LP_ESTORAGE, step;
    size_t cap = 0;
    while (rc == LP_OK && (step = sqlite3_step(st)) == SQLITE_ROW) {
        if ((rc = lp_array_reserve((void **)out, &cap, *n, sizeof **out, 8)) != LP_OK)
            break;
        read_campaign(st, &(*out)[(*n)++]);
    }
    if (rc == LP_OK && step != SQLITE_DONE)
        rc = LP_ESTORAGE;
    if (st)
        sqlite3_reset(st);
    r_release(s, c);
    if (rc != LP_OK) {
        free(*out);
        *out = NULL;
        *n = 0;
    }
    return rc;
}

int lp_store_operator_token_add(lp_store *s, const uint8_t hash[LP_HASH_BYTES])
{
    return run_sync(s, J_OPTOKEN, (void *)hash, 1);
}

int lp_store_operator_tokens(lp_store *s, uint8_t **out, size_t *n)
{
    *out = NULL;
    *n = 0;
    struct rconn *c = r_acquire(s);
    sqlite3_stmt *st = r_stmt(c, R_OPTOKENS);
    int rc = st ? LP_OK : LP_ESTORAGE, step = SQLITE_DONE;
    size_t cap = 0;
    while (rc == LP_OK && (step = sqlite3_step(st)) == SQLITE_ROW) {
        if (sqlite3_column_bytes(st, 0) != LP_HASH_BYTES)
            continue;
        if ((rc = lp_array_reserve((void **)out, &cap, *n, LP_HASH_BYTES, 4)) != LP_OK)
            break;
        memcpy(*out + *n * LP_HASH_BYTES, sqlite3_column_blob(st, 0), LP_HASH_BYTES);
        (*n)++;
    }
    if (rc == LP_OK && step != SQLITE_DONE)
        rc = LP_ESTORAGE;
    if (st)
        sqlite3_reset(st);
    r_release(s, c);
    if (rc != LP_OK) {
        free(*out);
        *out = NULL;
        *n = 0;
    }
    return rc;
}

int lp_store_enroll_tokens_add(lp_store *s, int64_t campaign, const uint8_t *hashes, size_t n)
{
    struct etokens_arg a = {campaign, hashes, n};
    return run_sync(s, J_ETOKENS, &a, n);
}

/* ------------------------------------------------------------------ */
/* public: annotators                                                  */

int lp_store_annotator_by_key(lp_store *s, const uint8_t key[LP_KEY_BYTES], lp_annotator *out)
{
    uint64_t gen;
    if (kc_get(s, key, out, &gen))
        return LP_OK;
    struct rconn *c = r_acquire(s);
    sqlite3_stmt *st = r_stmt(c, R_KEY);
    int rc = LP_ESTORAGE;
    if (st != NULL) {
        sqlite3_bind_blob(st, 1, key, LP_KEY_BYTES, SQLITE_STATIC);
        int step = sqlite3_step(st);
        if (step == SQLITE_ROW) {
            memset(out, 0, sizeof *out);
            out->id = sqlite3_column_int64(st, 0);
            out->campaign = sqlite3_column_int64(st, 1);
            out->revoked = sqlite3_column_int(st, 2);
            snprintf(out->pseudonym, sizeof out->pseudonym, "%s",
                     (const char *)sqlite3_column_text(st, 3));
            rc = LP_OK;
        } else if (step == SQLITE_DONE) {
            rc = LP_EUNKNOWN_KEY;
        }
        sqlite3_reset(st);
    }
    r_release(s, c);
    if (rc == LP_OK)
        kc_put(s, key, out, gen);
    return rc;
}

int lp_store_enroll(lp_store *s, const uint8_t key[LP_KEY_BYTES],
                    const uint8_t token_hash[LP_HASH_BYTES], lp_annotator *out)
{
    struct enroll_arg a = {.key = key, .token_hash = token_hash};
    int rc = run_sync(s, J_ENROLL, &a, 1);
    if (rc == LP_OK)
        *out = a.out;
    return rc;
}

int lp_store_revoke(lp_store *s, const uint8_t key[LP_KEY_BYTES])
{
    int rc = run_sync(s, J_REVOKE, (void *)key, 1);
    if (rc == LP_OK)
        kc_revoke(s, key);
    return rc;
}

/* ------------------------------------------------------------------ */
/* public: tasks                                                       */

int lp_store_tasks_load(lp_store *s, int64_t campaign, const lp_task_in *tasks, size_t n,
                        size_t *loaded, size_t *skipped, int64_t *first, int64_t *last)
{
    struct tasks_arg a = {.campaign = campaign, .tasks = tasks, .n = n};
    int rc = run_sync(s, J_TASKS, &a, n ? n : 1);
    *loaded = rc == LP_OK ? a.loaded : 0;
    *skipped = rc == LP_OK ? a.skipped : 0;
    *first = rc == LP_OK ? a.first : 0;
    *last = rc == LP_OK ? a.last : 0;
    return rc;
}

static char *dup_column(sqlite3_stmt *st, int col)
{
    const unsigned char *t = sqlite3_column_text(st, col);
    size_t n = (size_t)sqlite3_column_bytes(st, col);
    char *out = malloc(n + 1);
    if (out != NULL) {
        if (n)
            memcpy(out, t, n);
        out[n] = '\0';
    }
    return out;
}

int lp_store_task_get(lp_store *s, int64_t id, lp_task *out)
{
    memset(out, 0, sizeof *out);
    struct rconn *c = r_acquire(s);
    sqlite3_stmt *st = r_stmt(c, R_TASK);
    int rc = LP_ESTORAGE;
    if (st != NULL) {
        sqlite3_bind_int64(st, 1, id);
        int step = sqlite3_step(st);
        if (step == SQLITE_ROW) {
            out->id = sqlite3_column_int64(st, 0);
            out->campaign = sqlite3_column_int64(st, 1);
            out->prompt = dup_column(st, 2);
            out->response0 = dup_column(st, 3);
            out->response1 = dup_column(st, 4);
            rc = out->prompt && out->response0 && out->response1 ? LP_OK : LP_ENO_MEMORY;
        } else if (step == SQLITE_DONE) {
            rc = LP_EUNKNOWN_TASK;
        }
        sqlite3_reset(st);
    }
    r_release(s, c);
    if (rc != LP_OK)
        lp_task_clear(out);
    return rc;
}

void lp_task_clear(lp_task *t)
{
    if (t == NULL)
        return;
    free(t->prompt);
    free(t->response0);
    free(t->response1);
    t->prompt = t->response0 = t->response1 = NULL;
}

int lp_store_assign(lp_store *s, int64_t annotator, uint32_t count, lp_assignment *out, size_t *n)
{
    struct assign_arg a = {.annotator = annotator, .count = count, .out = out};
    int rc = run_sync(s, J_ASSIGN, &a, 1);
    *n = rc == LP_OK ? a.n : 0;
    return rc;
}

/* ------------------------------------------------------------------ */
/* public: labels                                                      */

int lp_store_labels_submit(lp_store *s, lp_label_item *items, size_t n)
{
    struct labels_arg a = {.items = items, .n = n};
    return run_sync(s, J_LABELS, &a, n);
}

struct async_labels {
    struct job job;
    struct labels_arg arg;
};

static void async_complete(struct job *j)
{
    struct async_labels *al = (struct async_labels *)j;
    void (*done)(void *) = j->user_done;
    void *ctx = j->user_ctx;
    free(al);
    done(ctx);
}

int lp_store_labels_submit_async(lp_store *s, lp_label_item *items, size_t n,
                                 void (*done)(void *ctx), void *ctx)
{
    struct async_labels *al = calloc(1, sizeof *al);
    if (al == NULL)
        return LP_ENO_MEMORY;
    al->arg.items = items;
    al->arg.n = n;
    al->job.kind = J_LABELS;
    al->job.arg = &al->arg;
    al->job.items = n;
    al->job.complete = async_complete;
    al->job.user_done = done;
    al->job.user_ctx = ctx;
    int rc = enqueue(s, &al->job);
    if (rc != LP_OK)
        free(al);
    return rc;
}

/* ------------------------------------------------------------------ */
/* public: statistics and export                                       */

static int64_t scalar_int(sqlite3 *db, const char *sql, int *ok)
{
    sqlite3_stmt *st = NULL;
    int64_t v = 0;
    if (sqlite3_prepare_v2(db, sql, -1, &st, NULL) == SQLITE_OK && sqlite3_step(st) == SQLITE_ROW)
        v = sqlite3_column_int64(st, 0);
    else
        *ok = 0;
    sqlite3_finalize(st);
    return v;
}

int lp_store_stats(lp_store *s, lp_stats *out)
{
    memset(out, 0, sizeof *out);
    struct rconn *c = r_acquire(s);
    int ok = 1;
    exec_sql(c->db, "BEGIN", NULL, 0); /* one snapshot for all counts */
    out->tasks = scalar_int(c->db, "SELECT count(*) FROM tasks", &ok);
    out->annotators = scalar_int(c->db, "SELECT count(*) FROM annotators", &ok);
    out->labels = scalar_int(c->db, "SELECT max(id) FROM labels", &ok); /* append-only ids */
    out->assignments = scalar_int(c->db, "SELECT count(*) FROM assignments", &ok);
    sqlite3_stmt *st = NULL;
    if (sqlite3_prepare_v2(c->db, "SELECT coalesce(sum(epsilon_spent), 0) FROM annotators", -1, &st,
                           NULL) == SQLITE_OK &&
        sqlite3_step(st) == SQLITE_ROW)
        out->epsilon_spent = sqlite3_column_double(st, 0);
    else
        ok = 0;
    sqlite3_finalize(st);
    st = NULL;
    static const char per[] =
        "SELECT c.name, "
        "(SELECT count(*) FROM tasks t WHERE t.campaign = c.id), "
        "(SELECT count(*) FROM annotators a WHERE a.campaign = c.id), "
        "(SELECT count(*) FROM labels l JOIN annotators a ON a.id = l.annotator "
        " WHERE a.campaign = c.id), "
        "(SELECT coalesce(sum(epsilon_spent), 0) FROM annotators a WHERE a.campaign = c.id) "
        "FROM campaigns c ORDER BY c.id";
    if (ok && sqlite3_prepare_v2(c->db, per, -1, &st, NULL) == SQLITE_OK) {
        size_t cap = 0;
        while (sqlite3_step(st) == SQLITE_ROW) {
            if (lp_array_reserve((void **)&out->campaigns, &cap, out->n_campaigns,
                                 sizeof *out->campaigns, 8) != LP_OK) {
                ok = 0;
                break;
            }
            lp_campaign_count *cc = &out->campaigns[out->n_campaigns++];
            snprintf(cc->name, sizeof cc->name, "%s", (const char *)sqlite3_column_text(st, 0));
            cc->tasks = sqlite3_column_int64(st, 1);
            cc->annotators = sqlite3_column_int64(st, 2);
            cc->labels = sqlite3_column_int64(st, 3);
            cc->epsilon_spent = sqlite3_column_double(st, 4);
        }
    } else {
        ok = 0;
    }
    sqlite3_finalize(st);
    exec_sql(c->db, "COMMIT", NULL, 0);
    r_release(s, c);
    if (!ok) {
        lp_stats_clear(out);
        return LP_ESTORAGE;
    }
    return LP_OK;
}

void lp_stats_clear(lp_stats *st)
{
    if (st == NULL)
        return;
    free(st->campaigns);
    st->campaigns = NULL;
    st->n_campaigns = 0;
}

int lp_store_write_call(lp_store *s, int (*fn)(sqlite3 *db, void *ctx), void *ctx)
{
    struct call_arg a = {.fn = fn, .ctx = ctx};
    return run_sync(s, J_CALL, &a, 1);
}

int lp_store_read_call(lp_store *s, int (*fn)(sqlite3 *db, void *ctx), void *ctx)
{
    struct rconn *c = r_acquire(s);
    int rc = fn(c->db, ctx);
    r_release(s, c);
    return rc;
}

int lp_store_reader_open(lp_store *s, sqlite3 **out)
{
    char err[256];
    *out = NULL;
    if (open_conn(s->path, 0, 1, out, err, sizeof err) != LP_OK) {
        fprintf(stderr, "store: reader: %s\n", err);
        sqlite3_close(*out);
        *out = NULL;
        return LP_ESTORAGE;
    }
    return LP_OK;
}

struct lp_export {
    sqlite3 *db;
    sqlite3_stmt *st;
};

int lp_store_export_open(lp_store *s, const char *campaign, lp_export **out)
{
    *out = NULL;
    char err[256];
    int64_t cid = 0;
    if (campaign != NULL) {
        lp_campaign c;
        int rc = lp_store_campaign_by_name(s, campaign, &c);
        if (rc != LP_OK)
            return rc;
        cid = c.id;
    }
    lp_export *e = calloc(1, sizeof *e);
    if (e == NULL)
        return LP_ENO_MEMORY;
    static const char sql[] =
        "SELECT l.id, l.task, l.timestamp_ms, l.received_ms, c.name, a.pseudonym, t.prompt, "
        "t.response0, t.response1, l.z_task, l.epsilon, t.features0, t.features1 "
        "FROM labels l JOIN tasks t ON t.id = l.task "
        "JOIN annotators a ON a.id = l.annotator JOIN campaigns c ON c.id = t.campaign "
        "WHERE ?1 = 0 OR t.campaign = ?1 ORDER BY l.id";
    if (open_conn(s->path, 0, 1, &e->db, err, sizeof err) != LP_OK ||
        sqlite3_prepare_v2(e->db, sql, -1, &e->st, NULL) != SQLITE_OK) {
        fprintf(stderr, "store: export: %s\n", e->db ? sqlite3_errmsg(e->db) : err);
        lp_store_export_close(e);
        return LP_ESTORAGE;
    }
    sqlite3_bind_int64(e->st, 1, cid);
    *out = e;
    return LP_OK;
}

int lp_store_export_next(lp_export *e, lp_export_row *row)
{
    int step = sqlite3_step(e->st);
    if (step == SQLITE_DONE)
        return 0;
    if (step != SQLITE_ROW)
        return -1;
    sqlite3_stmt *st = e->st;
    memset(row, 0, sizeof *row);
    row->label_id = sqlite3_column_int64(st, 0);
    row->task_id = sqlite3_column_int64(st, 1);
    row->timestamp_ms = sqlite3_column_int64(st, 2);
    row->received_ms = sqlite3_column_int64(st, 3);
    row->campaign = (const char *)sqlite3_column_text(st, 4);
    row->pseudonym = (const char *)sqlite3_column_text(st, 5);
    row->prompt = (const char *)sqlite3_column_text(st, 6);
    row->response0 = (const char *)sqlite3_column_text(st, 7);
    row->response1 = (const char *)sqlite3_column_text(st, 8);
    row->z_task = sqlite3_column_int(st, 9);
    row->epsilon =
        sqlite3_column_type(st, 10) == SQLITE_NULL ? INFINITY : sqlite3_column_double(st, 10);
    int b0 = sqlite3_column_bytes(st, 11), b1 = sqlite3_column_bytes(st, 12);
    if (b0 > 0 && b0 == b1 && b0 % (int)sizeof(double) == 0) {
        row->features0 = sqlite3_column_blob(st, 11);
        row->features1 = sqlite3_column_blob(st, 12);
        row->dim = (size_t)b0 / sizeof(double);
    }
    return 1;
}

void lp_store_export_close(lp_export *e)
{
    if (e == NULL)
        return;
    sqlite3_finalize(e->st);
    sqlite3_close(e->db);
    free(e);
}
