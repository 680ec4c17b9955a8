/*
 * labels.c — label ingest in the storage writer. See labels.h.
 *
 * A label job runs bare (engine.h: LP_JOB_BARE): a label's only write is
 * its INSERT, and a failed statement leaves nothing, so it needs no
 * savepoint. The writer's annotator copy (struct lp_label_writer) is the
 * engine's transaction cache: it equals the annotators rows as the current
 * transaction sees them.
 *
 * PostgreSQL (several servers may write one database): the same steps, with
 * a few statements of their own (LSQL_PG). The engine clears the annotator
 * copy at the start of every transaction, and the copy is read with FOR
 * UPDATE, so the annotator's row stays locked until the commit: another
 * server's label job for the same annotator waits for it, then reads the
 * committed row and labels. Every check of one annotator (existing label,
 * nonce, budget, revocation) thus runs as if there were one writer, and the
 * spend written back at the flush is exact. (The alternative, a conditional
 * `epsilon_spent = epsilon_spent + e ... RETURNING` per label, guards the
 * budget only and costs a round trip per label; the lock costs one
 * statement per annotator per transaction, the SELECT the copy needs
 * anyway.) There is no nonce index: label ids are not in commit order, so
 * it could not catch up with other servers by id; the UNIQUE (annotator,
 * nonce) constraint refuses a reused nonce at the insert (no row
 * inserted), which then goes through label_checks like a conflict, and
 * label_checks asks SQL. The
 * counters are written in a fixed order (task_fill by task, campaign_fill
 * by campaign, label_minutes by campaign and minute, each row locked from
 * its first read), so two servers flushing at once wait for each other
 * rather than deadlock. A group rolled back by a conflict runs again whole:
 * labels_fn overwrites every output of its items.
 *
 * On PostgreSQL every statement of the label writer is unguarded (sql.h):
 * none can be refused by a constraint (the insert is ON CONFLICT DO
 * NOTHING; its values passed the checks of the schema's CHECKs before it
 * runs; the rest are reads and counter additions), so none needs the
 * driver's savepoint, and a group of labels draws no subtransaction
 * (PostgreSQL tracks 64 per session; a savepoint per statement drew about
 * 1.5 per label). What can still fail it — a deadlock, a serialization
 * failure, the storage — ends the transaction, and the engine runs the
 * group again (a conflict) or fails it (the storage).
 */
#include "labels.h"

#include "clock.h"
#include "db.h"
#include "error.h"

#include <math.h>
#include <stdint.h>
#include <sodium.h>
#include <stdlib.h>
#include <string.h>

/* The writer's statements, resolved through the engine's statement cache on
 * first use and kept here: the ingest path does no lookup per label. */
enum lstmt {
    L_ANNOT,
    L_EXISTING,
    L_ASSIGNED,
    L_TASK_EXISTS,
    L_NONCE_ROW,
    L_NONCE_USED,
    L_NONCE_ALL,
    L_NONCE_SINCE,
    L_MAX_ID,
    L_INSERT,
    L_SPEND,
    L_ANNOT_FILL,
    L_TASK_COUNT,
    L_TASK_FILL,
    L_LABELS_PER_TASK,
    L_CAMPAIGN_FILL,
    L_MINUTE,
    L_COUNT
};

static const char *const LSQL[L_COUNT] = {
    [L_ANNOT] = "SELECT a.revoked, a.epsilon_spent, a.campaign, c.epsilon_min, c.epsilon_max, "
                "c.allow_infinite, c.epsilon_budget FROM annotators a "
                "JOIN campaigns c ON c.id = a.campaign WHERE a.id = ?1",
    [L_EXISTING] = "SELECT id, z, epsilon, received_ms, signature FROM labels "
                   "WHERE annotator = ?1 AND task = ?2",
    /* a skipped assignment takes no label (task_not_assigned); an expired
     * lease still does (a late label) */
    [L_ASSIGNED] = "SELECT swapped FROM assignments WHERE annotator = ?1 AND task = ?2 "
                   "AND skipped = 0",
    [L_TASK_EXISTS] = "SELECT campaign FROM tasks WHERE id = ?1",
    [L_NONCE_ROW] = "SELECT annotator, nonce FROM labels WHERE id = ?1",
    [L_NONCE_ALL] = "SELECT id, annotator, nonce FROM labels ORDER BY id",
    [L_NONCE_SINCE] = "SELECT id, annotator, nonce FROM labels WHERE id > ?1 ORDER BY id",
    [L_MAX_ID] = "SELECT coalesce(max(id), 0) FROM labels",
    [L_INSERT] = "INSERT INTO labels (annotator, task, z, z_task, epsilon, nonce, "
                 "timestamp_ms, signature, received_ms) "
                 "VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9)",
    [L_SPEND] = "UPDATE annotators SET epsilon_spent = ?2 WHERE id = ?1",
    /* the counters of schemas 004/006, once per commit (schema/015) */
    [L_ANNOT_FILL] = "UPDATE annotator_fill SET labels = labels + ?2, last_label_ms = "
                     "CASE WHEN last_label_ms > ?3 THEN last_label_ms ELSE ?3 END "
                     "WHERE annotator = ?1",
    [L_TASK_COUNT] = "SELECT campaign, labels FROM task_fill WHERE task = ?1",
    [L_TASK_FILL] = "UPDATE task_fill SET labels = labels + ?2 WHERE task = ?1",
    [L_LABELS_PER_TASK] = "SELECT labels_per_task FROM campaigns WHERE id = ?1",
    [L_CAMPAIGN_FILL] = "UPDATE campaign_fill SET labels = labels + ?2, "
                        "tasks_complete = tasks_complete + ?3, epsilon_spent = epsilon_spent + ?4 "
                        "WHERE campaign = ?1",
    [L_MINUTE] = "INSERT INTO label_minutes (campaign, minute, labels) VALUES (?1, ?2, ?3) "
                 "ON CONFLICT (campaign, minute) DO UPDATE "
                 "SET labels = label_minutes.labels + excluded.labels",
};

/* PostgreSQL's own statements (NULL: LSQL's): the annotator and task counter
 * rows locked until the commit; the insert's id returned, or no row when
 * UNIQUE (annotator, task) or (annotator, nonce) refuses it (no error in
 * the server's log for every resend); the nonce asked of the UNIQUE
 * (annotator, nonce) index (SQLite has no such index: its nonce index
 * answers, see below). */
static const char *const LSQL_PG[L_COUNT] = {
    [L_ANNOT] = "SELECT a.revoked, a.epsilon_spent, a.campaign, c.epsilon_min, c.epsilon_max, "
                "c.allow_infinite, c.epsilon_budget FROM annotators a "
                "JOIN campaigns c ON c.id = a.campaign WHERE a.id = ?1 FOR UPDATE OF a",
    [L_NONCE_USED] = "SELECT 1 FROM labels WHERE annotator = ?1 AND nonce = ?2",
    [L_INSERT] = "INSERT INTO labels (annotator, task, z, z_task, epsilon, nonce, "
                 "timestamp_ms, signature, received_ms) "
                 "VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9) ON CONFLICT DO NOTHING RETURNING id",
    [L_TASK_COUNT] = "SELECT campaign, labels FROM task_fill WHERE task = ?1 FOR UPDATE",
};

/*
 * The writer's copy of the annotator rows that label jobs read and write
 * (revoked flag, epsilon spent, the campaign's epsilon range and budget).
 * The writer is the only connection that writes annotators, so the copy is
 * exactly what a SELECT inside the current transaction would return, as long
 * as: (1) spends are applied to the copy as labels are accepted and written
 * back (one UPDATE per annotator) before COMMIT — wc_flush, called by the
 * engine; (2) the copy is dropped after every other kind of job (revocation,
 * enrollment...) and whenever a transaction does not commit — wc_clear,
 * called by the engine. It saves one SELECT and one UPDATE per label; the
 * checks themselves are unchanged and still run in the writer, inside the
 * commit transaction.
 *
 * The same flush writes the label counters (schema/015): each entry keeps
 * its annotator's labels and newest received_ms since the last flush, and
 * the task table below the labels per (task, minute); wc_flush adds them
 * to annotator_fill, task_fill, campaign_fill and label_minutes, one row
 * write per annotator, task, campaign and minute. Flushed before COMMIT
 * and before any other kind of job (which may read the counters), they
 * equal what the labels give at every commit and to every job.
 */
#define WC_SLOTS 8192u /* power of two */
#define WC_MAX (WC_SLOTS / 2)

struct wc_entry {
    int64_t id; /* 0: empty slot */
    int revoked, allow_inf, dirty;
    double spent, eps_min, eps_max, budget;
    double spent_stored; /* annotators.epsilon_spent as the transaction has it */
    int64_t campaign;
    int64_t labels, last_ms; /* labels stored since the last flush, the newest's received_ms */
};

/* Labels per (task, minute of received_ms) since the last flush; n == 0
 * marks an empty slot. */
#define TD_SLOTS 8192u /* power of two */
#define TD_MAX (TD_SLOTS / 2)

struct task_delta {
    int64_t task, minute, n;
};

/* What one flush adds to a campaign, built while flushing. */
struct campaign_delta {
    int64_t campaign, labels, complete, labels_per_task;
    double spent;
};

struct minute_delta {
    int64_t campaign, minute, n;
};

/*
 * The nonce index: which (annotator, nonce) pairs labels already carry,
 * answered without an index in SQL (schema/013). Each label has a slot
 * {h, id}: h a SipHash of (annotator, nonce) under a key drawn at start (so
 * that chosen nonces cannot crowd one part of the table), id its row.
 * Open addressing with linear probing; h == 0 marks an empty slot; at most
 * 3/4 full. A slot whose h matches is confirmed by reading its row by id,
 * so the answer is exact whatever the hash does, and a slot left by a
 * transaction that did not commit (its row gone, or its id reused by
 * another label) is harmless: the row read tells. Invariant: every label
 * of the database, committed or in the open transaction, has its slot.
 * Only the writer thread touches it; it is built from the table when the
 * store opens. Labels that other servers on the same database add are
 * caught up at the start of the writer's next transaction (ni_others):
 * label ids only grow, so they are the rows past `synced`.
 *
 * Growth is incremental, so that no insert pauses the writer for a rehash
 * of the whole table (about 4 s at 12.6M labels): a full table becomes
 * `old`, a table twice its size takes the new slots, and every reservation
 * moves NI_MOVE old slots per slot reserved, in index order; a lookup
 * probes both tables (old from `moved` on, the rest being in the new one).
 * At 4 slots moved per insert the old table is empty after a quarter of
 * its size in inserts, long before the new table is 3/4 full; a growth
 * while one is still moving (only a reservation larger than that) first
 * finishes it.
 */
struct nonce_slot {
    uint64_t h;
    int64_t id;
};

#define NI_MOVE 4

struct nonce_index {
    struct nonce_slot *slot;
    size_t cap, n; /* cap: a power of two, or 0; n: slots in both tables */
    struct nonce_slot *old;
    size_t old_cap, moved; /* old slots [moved, old_cap) are still to move */
    int64_t synced;        /* every committed label up to this id has its slot */
    uint8_t key[crypto_shorthash_KEYBYTES];
};

struct lp_label_writer {
    lp_engine *engine;
    struct nonce_index nonces;
    lp_stmt *st[L_COUNT]; /* owned by the engine's cache */
    struct wc_entry slot[WC_SLOTS];
    uint32_t dirty[WC_MAX]; /* slots whose spent or counters must be written back */
    size_t n, n_dirty;
    struct task_delta task[TD_SLOTS];
    uint32_t task_used[TD_MAX]; /* the slots of task in use */
    size_t n_task;
    /* scratch of wc_flush */
    struct campaign_delta *camp;
    struct minute_delta *minutes;
    size_t n_camp, n_minutes, cap_camp, cap_minutes;
    int broken; /* a flush failed: the transaction must not commit */
    int pg;     /* the database is PostgreSQL (LSQL_PG, no nonce index) */
};

/* The statement, reset and unbound; NULL on failure (logged). */
static lp_stmt *w_stmt(struct lp_label_writer *w, lp_conn *db, enum lstmt which)
{
    lp_stmt *st = w->st[which];
    if (st == NULL) {
        st = w->st[which] =
            lp_engine_stmt(w->engine, db, w->pg && LSQL_PG[which] ? LSQL_PG[which] : LSQL[which]);
        if (st != NULL && w->pg) /* no constraint refuses them there: see the top */
            lp_stmt_set_unguarded(st);
        return st;
    }
    lp_stmt_reset(st);
    lp_stmt_clear_bindings(st);
    return st;
}

static uint32_t wc_hash(int64_t id)
{
    uint64_t h = (uint64_t)id * 0x9E3779B97F4A7C15ull;
    return (uint32_t)(h >> 40) & (WC_SLOTS - 1);
}

static void wc_clear(void *ctx)
{
    struct lp_label_writer *w = ctx;
    memset(w->slot, 0, sizeof w->slot);
    w->n = w->n_dirty = 0;
    for (size_t i = 0; i < w->n_task; i++)
        w->task[w->task_used[i]].n = 0;
    w->n_task = 0;
    w->broken = 0;
}

static uint32_t td_hash(int64_t task, int64_t minute)
{
    uint64_t h =
        ((uint64_t)task * 0x9E3779B97F4A7C15ull) ^ ((uint64_t)minute * 0xC2B2AE3D27D4EB4Full);
    return (uint32_t)(h >> 40) & (TD_SLOTS - 1);
}

/* Counts one stored label of task at minute; room checked beforehand
 * (n_task < TD_MAX). */
static void td_add(struct lp_label_writer *w, int64_t task, int64_t minute)
{
    uint32_t h = td_hash(task, minute);
    while (w->task[h].n != 0 && (w->task[h].task != task || w->task[h].minute != minute))
        h = (h + 1) & (TD_SLOTS - 1);
    if (w->task[h].n == 0) {
        w->task[h] = (struct task_delta){task, minute, 0};
        w->task_used[w->n_task++] = h;
    }
    w->task[h].n++;
}

/* The flush's delta of campaign, added if new; NULL when out of memory. */
static struct campaign_delta *camp_get(struct lp_label_writer *w, int64_t campaign)
{
    for (size_t i = 0; i < w->n_camp; i++)
        if (w->camp[i].campaign == campaign)
            return &w->camp[i];
    if (w->n_camp == w->cap_camp) {
        size_t cap = w->cap_camp ? 2 * w->cap_camp : 8;
        struct campaign_delta *c = realloc(w->camp, cap * sizeof *c);
        if (c == NULL)
            return NULL;
        w->camp = c;
        w->cap_camp = cap;
    }
    w->camp[w->n_camp] = (struct campaign_delta){.campaign = campaign, .labels_per_task = -1};
    return &w->camp[w->n_camp++];
}

static int minute_add(struct lp_label_writer *w, int64_t campaign, int64_t minute, int64_t n)
{
    for (size_t i = 0; i < w->n_minutes; i++)
        if (w->minutes[i].campaign == campaign && w->minutes[i].minute == minute) {
            w->minutes[i].n += n;
            return LP_OK;
        }
    if (w->n_minutes == w->cap_minutes) {
        size_t cap = w->cap_minutes ? 2 * w->cap_minutes : 8;
        struct minute_delta *m = realloc(w->minutes, cap * sizeof *m);
        if (m == NULL)
            return LP_ENO_MEMORY;
        w->minutes = m;
        w->cap_minutes = cap;
    }
    w->minutes[w->n_minutes++] = (struct minute_delta){campaign, minute, n};
    return LP_OK;
}

/* Steps a statement that changes exactly one row. */
static int step_one(lp_conn *db, lp_stmt *st, const char *what)
{
    int ok = lp_stmt_step(st) == LP_SQL_DONE && lp_conn_changes(db) == 1;
    lp_stmt_reset(st);
    return ok ? LP_OK : lp_engine_fail(db, what);
}

/* Orders of the counter rows, for PostgreSQL's lock order (see the top). */
static int cmp_int64(int64_t x, int64_t y)
{
    return (x > y) - (x < y);
}

static int cmp_task_slot(const void *a, const void *b, void *ctx)
{
    const struct task_delta *x = (const struct task_delta *)ctx + *(const uint32_t *)a;
    const struct task_delta *y = (const struct task_delta *)ctx + *(const uint32_t *)b;
    int c = cmp_int64(x->task, y->task);
    return c != 0 ? c : cmp_int64(x->minute, y->minute);
}

static int cmp_campaign(const void *a, const void *b)
{
    return cmp_int64(((const struct campaign_delta *)a)->campaign,
                     ((const struct campaign_delta *)b)->campaign);
}

static int cmp_minute(const void *a, const void *b)
{
    const struct minute_delta *x = a, *y = b;
    int c = cmp_int64(x->campaign, y->campaign);
    return c != 0 ? c : cmp_int64(x->minute, y->minute);
}

/* Adds the task deltas to task_fill and collects what they add to their
 * campaigns (labels, tasks that reached labels_per_task, minutes). */
static int flush_tasks(struct lp_label_writer *w, lp_conn *db)
{
    if (w->pg)
        qsort_r(w->task_used, w->n_task, sizeof *w->task_used, cmp_task_slot, w->task);
    for (size_t i = 0; i < w->n_task; i++) {
        struct task_delta *t = &w->task[w->task_used[i]];
        /* the count before, then the new count (a SELECT and an UPDATE cost
         * a third of one UPDATE ... RETURNING, which SQLite materializes) */
        lp_stmt *st = w_stmt(w, db, L_TASK_COUNT);
        if (st == NULL)
            return LP_ESTORAGE;
        lp_stmt_bind_int64(st, 1, t->task);
        int step = lp_stmt_step(st);
        int64_t campaign = step == LP_SQL_ROW ? lp_stmt_column_int64(st, 0) : 0;
        int64_t before = step == LP_SQL_ROW ? lp_stmt_column_int64(st, 1) : 0;
        lp_stmt_reset(st);
        if (step != LP_SQL_ROW)
            return lp_engine_fail(db, "task counter");
        if ((st = w_stmt(w, db, L_TASK_FILL)) == NULL)
            return LP_ESTORAGE;
        lp_stmt_bind_int64(st, 1, t->task);
        lp_stmt_bind_int64(st, 2, t->n);
        if (step_one(db, st, "task counter") != LP_OK)
            return LP_ESTORAGE;
        struct campaign_delta *c = camp_get(w, campaign);
        if (c == NULL)
            return LP_ENO_MEMORY;
        if (c->labels_per_task < 0) {
            if ((st = w_stmt(w, db, L_LABELS_PER_TASK)) == NULL)
                return LP_ESTORAGE;
            lp_stmt_bind_int64(st, 1, campaign);
            step = lp_stmt_step(st);
            c->labels_per_task = step == LP_SQL_ROW ? lp_stmt_column_int64(st, 0) : -1;
            lp_stmt_reset(st);
            if (step != LP_SQL_ROW)
                return lp_engine_fail(db, "campaign lookup");
        }
        c->labels += t->n;
        c->complete += before < c->labels_per_task && before + t->n >= c->labels_per_task;
        if (minute_add(w, campaign, t->minute, t->n) != LP_OK)
            return LP_ENO_MEMORY;
        t->n = 0;
    }
    w->n_task = 0;
    return LP_OK;
}

/* Writes the campaigns' deltas: campaign_fill (whose completion trigger,
 * engine.c, sees the count cross) and label_minutes. */
static int flush_campaigns(struct lp_label_writer *w, lp_conn *db)
{
    if (w->pg && w->n_camp > 1)
        qsort(w->camp, w->n_camp, sizeof *w->camp, cmp_campaign);
    if (w->pg && w->n_minutes > 1)
        qsort(w->minutes, w->n_minutes, sizeof *w->minutes, cmp_minute);
    for (size_t i = 0; i < w->n_camp; i++) {
        const struct campaign_delta *c = &w->camp[i];
        lp_stmt *st = w_stmt(w, db, L_CAMPAIGN_FILL);
        if (st == NULL)
            return LP_ESTORAGE;
        lp_stmt_bind_int64(st, 1, c->campaign);
        lp_stmt_bind_int64(st, 2, c->labels);
        lp_stmt_bind_int64(st, 3, c->complete);
        lp_stmt_bind_double(st, 4, c->spent);
        if (step_one(db, st, "campaign counter") != LP_OK)
            return LP_ESTORAGE;
    }
    for (size_t i = 0; i < w->n_minutes; i++) {
        const struct minute_delta *m = &w->minutes[i];
        lp_stmt *st = w_stmt(w, db, L_MINUTE);
        if (st == NULL)
            return LP_ESTORAGE;
        lp_stmt_bind_int64(st, 1, m->campaign);
        lp_stmt_bind_int64(st, 2, m->minute);
        lp_stmt_bind_int64(st, 3, m->n);
        if (step_one(db, st, "label minutes") != LP_OK)
            return LP_ESTORAGE;
    }
    return LP_OK;
}

/* One annotator's spend and counters, and its spend's share of its
 * campaign's. */
static int flush_annotator(struct lp_label_writer *w, lp_conn *db, struct wc_entry *e)
{
    lp_stmt *st;
    if (e->spent != e->spent_stored) {
        struct campaign_delta *c = camp_get(w, e->campaign);
        if (c == NULL)
            return LP_ENO_MEMORY;
        c->spent += e->spent - e->spent_stored;
        if ((st = w_stmt(w, db, L_SPEND)) == NULL)
            return LP_ESTORAGE;
        lp_stmt_bind_int64(st, 1, e->id);
        lp_stmt_bind_double(st, 2, e->spent);
        if (step_one(db, st, "budget update") != LP_OK)
            return LP_ESTORAGE;
        e->spent_stored = e->spent;
    }
    if (e->labels > 0) {
        if ((st = w_stmt(w, db, L_ANNOT_FILL)) == NULL)
            return LP_ESTORAGE;
        lp_stmt_bind_int64(st, 1, e->id);
        lp_stmt_bind_int64(st, 2, e->labels);
        lp_stmt_bind_int64(st, 3, e->last_ms);
        if (step_one(db, st, "annotator counter") != LP_OK)
            return LP_ESTORAGE;
        e->labels = 0;
    }
    return LP_OK;
}

/* Writes every pending spend and counter back (inside the current
 * transaction). On failure the transaction is abandoned and the cache
 * cleared by the engine. */
static int wc_flush(lp_conn *db, void *ctx)
{
    struct lp_label_writer *w = ctx;
    if (w->broken)
        return LP_ESTORAGE;
    int rc = LP_OK;
    w->n_camp = w->n_minutes = 0;
    for (size_t i = 0; i < w->n_dirty; i++) {
        struct wc_entry *e = &w->slot[w->dirty[i]];
        e->dirty = 0;
        if (rc == LP_OK)
            rc = flush_annotator(w, db, e);
    }
    w->n_dirty = 0;
    if (rc == LP_OK)
        rc = flush_tasks(w, db);
    if (rc == LP_OK)
        rc = flush_campaigns(w, db);
    w->broken = rc != LP_OK; /* deltas are half written: no commit until cleared */
    return rc;
}

static int ni_load(lp_conn *db, void *ctx);
static int ni_others(lp_conn *db, void *ctx);

struct lp_label_writer *lp_label_writer_new(lp_txn_cache *cache)
{
    struct lp_label_writer *w = calloc(1, sizeof *w);
    if (w != NULL)
        *cache = (lp_txn_cache){
            .flush = wc_flush, .clear = wc_clear, .load = ni_load, .others = ni_others, .ctx = w};
    return w;
}

void lp_label_writer_attach(struct lp_label_writer *w, lp_engine *e)
{
    w->engine = e;
}

void lp_label_writer_free(struct lp_label_writer *w)
{
    if (w != NULL) {
        free(w->nonces.slot);
        free(w->nonces.old);
        free(w->camp);
        free(w->minutes);
    }
    free(w);
}

/* ---- the nonce index ---- */

static uint64_t ni_hash(const struct nonce_index *ni, int64_t annotator, const uint8_t *nonce)
{
    uint8_t in[8 + LP_NONCE_BYTES], out[crypto_shorthash_BYTES];
    uint64_t a = (uint64_t)annotator, h;
    memcpy(in, &a, 8);
    memcpy(in + 8, nonce, LP_NONCE_BYTES);
    crypto_shorthash(out, in, sizeof in, ni->key);
    memcpy(&h, out, sizeof h);
    return h != 0 ? h : 1;
}

static void ni_put(struct nonce_slot *slot, size_t cap, uint64_t h, int64_t id)
{
    size_t i = (size_t)h & (cap - 1);
    while (slot[i].h != 0)
        i = (i + 1) & (cap - 1);
    slot[i] = (struct nonce_slot){h, id};
}

/* Moves up to `count` slots of the old table into the new one; frees the
 * old table once every slot has moved. */
static void ni_move(struct nonce_index *ni, size_t count)
{
    if (ni->old == NULL)
        return;
    size_t end = ni->old_cap - ni->moved < count ? ni->old_cap : ni->moved + count;
    for (; ni->moved < end; ni->moved++)
        if (ni->old[ni->moved].h != 0)
            ni_put(ni->slot, ni->cap, ni->old[ni->moved].h, ni->old[ni->moved].id);
    if (ni->moved == ni->old_cap) {
        free(ni->old);
        ni->old = NULL;
        ni->old_cap = ni->moved = 0;
    }
}

/* Makes room for `more` slots (growing into a larger table as needed). */
static int ni_reserve(struct nonce_index *ni, size_t more)
{
    size_t step = more > SIZE_MAX / NI_MOVE ? SIZE_MAX : more * NI_MOVE;
    if ((ni->n + more) * 4 <= ni->cap * 3) {
        ni_move(ni, step);
        return LP_OK;
    }
    size_t cap = ni->cap ? ni->cap : 1024;
    while ((ni->n + more) * 4 > cap * 3)
        cap *= 2;
    struct nonce_slot *slot = calloc(cap, sizeof *slot);
    if (slot == NULL)
        return LP_ENO_MEMORY;
    ni_move(ni, SIZE_MAX); /* a growth still moving: finish it */
    ni->old = ni->slot;
    ni->old_cap = ni->old != NULL ? ni->cap : 0;
    ni->moved = 0;
    ni->slot = slot;
    ni->cap = cap;
    ni_move(ni, step);
    return LP_OK;
}

/* Records label id's (annotator, nonce) hash; room reserved beforehand. */
static void ni_add(struct nonce_index *ni, uint64_t h, int64_t id)
{
    ni_put(ni->slot, ni->cap, h, id);
    ni->n++;
}

/* 1 when the index has the slot {h, id}. */
static int ni_has(const struct nonce_index *ni, uint64_t h, int64_t id)
{
    for (int t = 0; t < 2; t++) { /* the table, then the one still moving */
        const struct nonce_slot *slot = t == 0 ? ni->slot : ni->old;
        size_t cap = t == 0 ? ni->cap : ni->old_cap, from = t == 0 ? 0 : ni->moved;
        if (slot == NULL)
            continue;
        for (size_t i = (size_t)h & (cap - 1); slot[i].h != 0; i = (i + 1) & (cap - 1))
            if (slot[i].h == h && slot[i].id == id && i >= from)
                return 1;
    }
    return 0;
}

/* Whether row id carries (annotator, nonce): *same 1 or 0. */
static int nonce_row_is(struct lp_label_writer *w, lp_conn *db, int64_t id, int64_t annotator,
                        const uint8_t *nonce, int *same)
{
    lp_stmt *st = w_stmt(w, db, L_NONCE_ROW);
    if (st == NULL)
        return LP_ESTORAGE;
    lp_stmt_bind_int64(st, 1, id);
    int step = lp_stmt_step(st);
    *same = step == LP_SQL_ROW && lp_stmt_column_int64(st, 0) == annotator &&
            lp_stmt_column_bytes(st, 1) == LP_NONCE_BYTES &&
            memcmp(lp_stmt_column_blob(st, 1), nonce, LP_NONCE_BYTES) == 0;
    lp_stmt_reset(st);
    if (step != LP_SQL_ROW && step != LP_SQL_DONE)
        return lp_engine_fail(db, "nonce lookup");
    return LP_OK;
}

/* Whether a label of annotator already carries nonce (*used), as a
 * SELECT inside the current transaction would tell. */
static int nonce_used(struct lp_label_writer *w, lp_conn *db, int64_t annotator,
                      const uint8_t *nonce, uint64_t h, int *used)
{
    const struct nonce_index *ni = &w->nonces;
    *used = 0;
    if (w->pg) { /* the UNIQUE (annotator, nonce) index answers */
        lp_stmt *st = w_stmt(w, db, L_NONCE_USED);
        if (st == NULL)
            return LP_ESTORAGE;
        lp_stmt_bind_int64(st, 1, annotator);
        lp_stmt_bind_blob(st, 2, nonce, LP_NONCE_BYTES);
        int step = lp_stmt_step(st);
        lp_stmt_reset(st);
        *used = step == LP_SQL_ROW;
        return step == LP_SQL_ROW || step == LP_SQL_DONE ? LP_OK
                                                         : lp_engine_fail(db, "nonce lookup");
    }
    for (int t = 0; t < 2; t++) { /* the table, then the one still moving */
        const struct nonce_slot *slot = t == 0 ? ni->slot : ni->old;
        size_t cap = t == 0 ? ni->cap : ni->old_cap, from = t == 0 ? 0 : ni->moved;
        if (slot == NULL)
            continue;
        for (size_t i = (size_t)h & (cap - 1); slot[i].h != 0; i = (i + 1) & (cap - 1)) {
            if (slot[i].h != h || i < from)
                continue;
            int rc = nonce_row_is(w, db, slot[i].id, annotator, nonce, used);
            if (rc != LP_OK || *used)
                return rc;
        }
    }
    return LP_OK;
}

/* Builds the index from the table: the engine's load, on the writer
 * connection at open (engine.h), so with statements of its own. */
#define LOAD_BLOCK 64
static int ni_load(lp_conn *db, void *ctx)
{
    struct lp_label_writer *w = ctx;
    if ((w->pg = lp_conn_dialect(db) == LP_SQL_POSTGRESQL))
        return LP_OK; /* no nonce index (see the top) */
    randombytes_buf(w->nonces.key, sizeof w->nonces.key);
    /* ids only grow and labels are never deleted: the largest id bounds
     * the count, and sizing the table once saves rehashing it as it grows
     * (a hint only: if that much cannot be had, the table grows as rows
     * come) */
    lp_stmt *st = NULL;
    if ((st = lp_stmt_prepare(db, LSQL[L_MAX_ID])) == NULL || lp_stmt_step(st) != LP_SQL_ROW) {
        lp_stmt_finalize(st);
        return lp_engine_fail(db, "nonce index size");
    }
    ni_reserve(&w->nonces, (size_t)lp_stmt_column_int64(st, 0));
    lp_stmt_finalize(st);
    if ((st = lp_stmt_prepare(db, LSQL[L_NONCE_ALL])) == NULL)
        return lp_engine_fail(db, "nonce index load");
    /* rows are hashed a block at a time and their slots prefetched before
     * the block is stored: on a large table every store misses the cache */
    struct nonce_slot block[LOAD_BLOCK];
    size_t n = 0;
    int step, rc = LP_OK;
    do {
        step = lp_stmt_step(st);
        if (step == LP_SQL_ROW)
            w->nonces.synced = lp_stmt_column_int64(st, 0); /* in id order */
        if (step == LP_SQL_ROW && lp_stmt_column_bytes(st, 2) == LP_NONCE_BYTES) {
            uint64_t h =
                ni_hash(&w->nonces, lp_stmt_column_int64(st, 1), lp_stmt_column_blob(st, 2));
            block[n++] = (struct nonce_slot){h, lp_stmt_column_int64(st, 0)};
            if (w->nonces.cap != 0)
                __builtin_prefetch(&w->nonces.slot[h & (w->nonces.cap - 1)], 1);
        }
        if (n == LOAD_BLOCK || (step != LP_SQL_ROW && n > 0)) {
            if ((rc = ni_reserve(&w->nonces, n)) != LP_OK)
                break;
            for (size_t i = 0; i < n; i++)
                ni_add(&w->nonces, block[i].h, block[i].id);
            n = 0;
        }
    } while (step == LP_SQL_ROW);
    if (rc == LP_OK && step != LP_SQL_DONE)
        rc = lp_engine_fail(db, "nonce index load");
    lp_stmt_finalize(st);
    return rc;
}

/* The engine's others hook: the labels past `synced`, committed by other
 * servers (and by this writer since the last catch-up, which already have
 * their slots), get their slots. */
static int ni_others(lp_conn *db, void *ctx)
{
    struct lp_label_writer *w = ctx;
    struct nonce_index *ni = &w->nonces;
    if (w->pg)
        return LP_OK;
    lp_stmt *st = w_stmt(w, db, L_NONCE_SINCE);
    if (st == NULL)
        return LP_ESTORAGE;
    lp_stmt_bind_int64(st, 1, ni->synced);
    int step, rc = LP_OK;
    int64_t synced = ni->synced;
    while (rc == LP_OK && (step = lp_stmt_step(st)) == LP_SQL_ROW) {
        int64_t id = lp_stmt_column_int64(st, 0);
        synced = id;
        if (lp_stmt_column_bytes(st, 2) != LP_NONCE_BYTES)
            continue;
        uint64_t h = ni_hash(ni, lp_stmt_column_int64(st, 1), lp_stmt_column_blob(st, 2));
        if (!ni_has(ni, h, id) && (rc = ni_reserve(ni, 1)) == LP_OK)
            ni_add(ni, h, id);
    }
    if (rc == LP_OK && step != LP_SQL_DONE)
        rc = lp_engine_fail(db, "nonce index catch-up");
    lp_stmt_reset(st);
    if (rc == LP_OK)
        ni->synced = synced;
    return rc;
}

/* Checks the index against the table (a job on the writer). */
struct ni_check {
    struct lp_label_writer *w;
    lp_label_index_check *out;
};

static int ni_check_fn(lp_conn *db, void *ctx)
{
    struct ni_check *c = ctx;
    const struct nonce_index *ni = &c->w->nonces;
    *c->out = (lp_label_index_check){
        .slots = ni->n, .capacity = ni->cap, .moving = ni->old ? ni->old_cap - ni->moved : 0};
    lp_stmt *st = w_stmt(c->w, db, L_NONCE_ALL);
    if (st == NULL)
        return LP_ESTORAGE;
    int step;
    while ((step = lp_stmt_step(st)) == LP_SQL_ROW) {
        int64_t id = lp_stmt_column_int64(st, 0);
        uint64_t h = ni_hash(ni, lp_stmt_column_int64(st, 1), lp_stmt_column_blob(st, 2));
        int found = 0;
        for (size_t i = (size_t)h & (ni->cap - 1); ni->cap && ni->slot[i].h != 0;
             i = (i + 1) & (ni->cap - 1))
            found |= ni->slot[i].h == h && ni->slot[i].id == id;
        for (size_t i = (size_t)h & (ni->old_cap - 1); ni->old && ni->old[i].h != 0;
             i = (i + 1) & (ni->old_cap - 1))
            found |= i >= ni->moved && ni->old[i].h == h && ni->old[i].id == id;
        c->out->rows++;
        c->out->missing += !found && !c->w->pg; /* PostgreSQL has no index */
    }
    lp_stmt_reset(st);
    return step == LP_SQL_DONE ? LP_OK : lp_engine_fail(db, "nonce index check");
}

int lp_store_labels_check_index(lp_store *s, lp_label_index_check *out)
{
    struct ni_check c = {s->labels, out};
    return lp_engine_write(s->engine, ni_check_fn, &c, 0, LP_JOB_BARE);
}

/* The entry for annotator id, read from the database on a miss. *out is
 * NULL with LP_EUNKNOWN_KEY or a storage error. */
static int wc_get(struct lp_label_writer *w, lp_conn *db, int64_t id, struct wc_entry **out)
{
    *out = NULL;
    uint32_t h = wc_hash(id);
    while (w->slot[h].id != 0) {
        if (w->slot[h].id == id) {
            *out = &w->slot[h];
            return LP_OK;
        }
        h = (h + 1) & (WC_SLOTS - 1);
    }
    if (w->n >= WC_MAX) { /* full: write back and start over */
        if (wc_flush(db, w) != LP_OK)
            return LP_ESTORAGE;
        wc_clear(w);
        h = wc_hash(id);
    }
    lp_stmt *st = w_stmt(w, db, L_ANNOT);
    if (st == NULL)
        return LP_ESTORAGE;
    lp_stmt_bind_int64(st, 1, id);
    int step = lp_stmt_step(st);
    if (step != LP_SQL_ROW) {
        lp_stmt_reset(st);
        return step == LP_SQL_DONE ? LP_EUNKNOWN_KEY : lp_engine_fail(db, "annotator lookup");
    }
    struct wc_entry *e = &w->slot[h];
    e->id = id;
    e->revoked = lp_stmt_column_int(st, 0);
    e->spent = e->spent_stored = lp_stmt_column_double(st, 1);
    e->campaign = lp_stmt_column_int64(st, 2);
    e->labels = e->last_ms = 0;
    e->eps_min = lp_stmt_column_double(st, 3);
    e->eps_max = lp_stmt_column_double(st, 4);
    e->allow_inf = lp_stmt_column_int(st, 5);
    e->budget = lp_stmt_column_double(st, 6);
    e->dirty = 0;
    lp_stmt_reset(st);
    w->n++;
    *out = e;
    return LP_OK;
}

/* The checks of docs/protocol.md that need the database, in their order,
 * for a label that did not take the fast path of store_label. Returns the
 * rejection, or LP_OK when the label is an identical resend (receipt
 * filled). swapped < 0: not assigned. */
static int label_checks(struct lp_label_writer *w, lp_conn *db, lp_label_item *it,
                        const struct wc_entry *a, int swapped, int64_t now, uint64_t nonce_h)
{
    const lp_label_msg *m = &it->msg;
    /* an existing label for (annotator, task): idempotent resend or conflict */
    lp_stmt *st = w_stmt(w, db, L_EXISTING);
    if (st == NULL)
        return LP_ESTORAGE;
    lp_stmt_bind_int64(st, 1, it->annotator);
    lp_stmt_bind_int64(st, 2, m->task_id);
    int step = lp_stmt_step(st);
    if (step == LP_SQL_ROW) {
        const void *sig = lp_stmt_column_blob(st, 4);
        int same = sig != NULL && lp_stmt_column_bytes(st, 4) == LP_SIG_BYTES &&
                   memcmp(sig, m->sig, LP_SIG_BYTES) == 0;
        if (same) {
            it->existing = 1;
            it->receipt.label_id = lp_stmt_column_int64(st, 0);
            it->receipt.task_id = m->task_id;
            it->receipt.z = lp_stmt_column_int(st, 1);
            it->receipt.epsilon =
                lp_stmt_column_is_null(st, 2) ? INFINITY : lp_stmt_column_double(st, 2);
            it->receipt.received_ms = lp_stmt_column_int64(st, 3);
        }
        lp_stmt_reset(st);
        return same ? LP_OK : LP_ECONFLICTING_LABEL;
    }
    lp_stmt_reset(st);
    if (step != LP_SQL_DONE)
        return lp_engine_fail(db, "label lookup");

    /* timestamp window */
    int64_t skew = m->timestamp_ms - now;
    if (skew > it->window_ms || skew < -it->window_ms)
        return LP_ESTALE_TIMESTAMP;

    /* task and assignment */
    if (swapped < 0) {
        if ((st = w_stmt(w, db, L_TASK_EXISTS)) == NULL)
            return LP_ESTORAGE;
        lp_stmt_bind_int64(st, 1, m->task_id);
        step = lp_stmt_step(st);
        lp_stmt_reset(st);
        if (step == LP_SQL_ROW)
            return LP_ENOT_ASSIGNED;
        if (step == LP_SQL_DONE)
            return LP_EUNKNOWN_TASK;
        return lp_engine_fail(db, "task lookup");
    }

    /* nonce */
    int used, rc = nonce_used(w, db, it->annotator, m->nonce, nonce_h, &used);
    if (rc != LP_OK)
        return rc;
    if (used)
        return LP_EREPLAYED_NONCE;

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
    return lp_engine_fail(db, "label insert");
}

/*
 * One label. Fast path: when the label is assigned, passes the checks that
 * need no lookup (timestamp, epsilon range, budget) and its nonce is not in
 * the nonce index, insert it at once; the UNIQUE (annotator, task)
 * constraint then proves there was no existing label, so the outcome is the
 * one the ordered checks would give. Anything else — a resend, a conflict,
 * a reused nonce, a rejection — goes through label_checks, which runs the
 * checks in protocol order. Nothing is written for a rejected label (the
 * INSERT is the only write, and a failed statement leaves nothing).
 */
static int store_label(struct lp_label_writer *w, lp_conn *db, lp_label_item *it, int64_t now)
{
    const lp_label_msg *m = &it->msg;
    if (w->n_task >= TD_MAX) { /* the task deltas are full: write them out */
        if (wc_flush(db, w) != LP_OK)
            return LP_ESTORAGE;
    }
    struct wc_entry *a;
    int rc = wc_get(w, db, it->annotator, &a);
    if (rc != LP_OK)
        return rc;
    if (a->revoked) /* the authoritative revocation check */
        return LP_EREVOKED_KEY;

    lp_stmt *st = w_stmt(w, db, L_ASSIGNED);
    if (st == NULL)
        return LP_ESTORAGE;
    lp_stmt_bind_int64(st, 1, it->annotator);
    lp_stmt_bind_int64(st, 2, m->task_id);
    int step = lp_stmt_step(st);
    int swapped = step == LP_SQL_ROW ? lp_stmt_column_int(st, 0) : -1;
    lp_stmt_reset(st);
    if (step != LP_SQL_ROW && step != LP_SQL_DONE)
        return lp_engine_fail(db, "assignment lookup");

    int inf = isinf(m->epsilon);
    int64_t skew = m->timestamp_ms - now;
    int clean = swapped >= 0 && skew <= it->window_ms && skew >= -it->window_ms &&
                (inf ? a->allow_inf
                     : m->epsilon >= a->eps_min && m->epsilon <= a->eps_max &&
                           a->spent + m->epsilon <= a->budget * (1.0 + 1e-12));
    /* PostgreSQL: the insert's UNIQUE (annotator, nonce) refuses a reused
     * nonce (the annotator's row lock keeps that exact) */
    uint64_t nonce_h = w->pg ? 0 : ni_hash(&w->nonces, it->annotator, m->nonce);
    int used = 0;
    if (clean && !w->pg &&
        (rc = nonce_used(w, db, it->annotator, m->nonce, nonce_h, &used)) != LP_OK)
        return rc;
    if (!clean || used)
        return label_checks(w, db, it, a, swapped, now, nonce_h);
    if (!w->pg && ni_reserve(&w->nonces, 1) != LP_OK) /* before the insert: its slot must fit */
        return LP_ENO_MEMORY;

    if ((st = w_stmt(w, db, L_INSERT)) == NULL)
        return LP_ESTORAGE;
    lp_stmt_bind_int64(st, 1, it->annotator);
    lp_stmt_bind_int64(st, 2, m->task_id);
    lp_stmt_bind_int64(st, 3, m->z);
    lp_stmt_bind_int64(st, 4, swapped ? 1 - m->z : m->z);
    if (inf)
        lp_stmt_bind_null(st, 5);
    else
        lp_stmt_bind_double(st, 5, m->epsilon);
    lp_stmt_bind_blob(st, 6, m->nonce, LP_NONCE_BYTES);
    lp_stmt_bind_int64(st, 7, m->timestamp_ms);
    lp_stmt_bind_blob(st, 8, m->sig, LP_SIG_BYTES);
    lp_stmt_bind_int64(st, 9, now);
    step = lp_stmt_step(st);
    int64_t id = step == LP_SQL_ROW ? lp_stmt_column_int64(st, 0) : 0;
    lp_stmt_reset(st);
    /* SQLite: done, or a UNIQUE refusal; PostgreSQL: the row of RETURNING
     * id, or none when a UNIQUE constraint stood in the way */
    int refused = w->pg ? step == LP_SQL_DONE : lp_sql_is_constraint(step);
    if (step != (w->pg ? LP_SQL_ROW : LP_SQL_DONE)) {
        if (!refused || !lp_conn_in_txn(db))
            return lp_engine_fail(db, "label insert");
        return label_checks(w, db, it, a, swapped, now, nonce_h);
    }
    if (w->pg) {
        it->receipt.label_id = id;
    } else {
        it->receipt.label_id = lp_conn_last_insert_id(db);
        ni_add(&w->nonces, nonce_h, it->receipt.label_id);
    }
    it->receipt.task_id = m->task_id;
    it->receipt.z = m->z;
    it->receipt.epsilon = m->epsilon;
    it->receipt.received_ms = now;
    it->existing = 0;
    if (!inf)
        a->spent += m->epsilon;
    a->labels++;
    a->last_ms = now > a->last_ms ? now : a->last_ms;
    td_add(w, m->task_id, now / 60000);
    if (!a->dirty) {
        a->dirty = 1;
        w->dirty[w->n_dirty++] = (uint32_t)(a - w->slot);
    }
    return LP_OK;
}

/* A label job: the engine's job first, so that done gets the whole. */
struct labels_job {
    lp_job job;
    struct lp_label_writer *w;
    lp_label_item *items;
    size_t n;
    void (*user_done)(void *ctx);
    void *user_ctx;
};

static int cmp_item_annotator(const void *a, const void *b, void *ctx)
{
    const lp_label_item *items = ctx;
    size_t x = *(const size_t *)a, y = *(const size_t *)b;
    int c = cmp_int64(items[x].annotator, items[y].annotator);
    return c != 0 ? c : (x > y) - (x < y);
}

/* PostgreSQL: the job's items in the order of their annotators (each
 * annotator's in their own order), so that jobs of several annotators lock
 * their rows in one order on every server; NULL for the items' order. */
static size_t *annotator_order(const lp_label_item *items, size_t n)
{
    size_t *order = n > 1 ? malloc(n * sizeof *order) : NULL;
    if (order == NULL)
        return NULL; /* the items' order: correct, deadlocks are run again */
    for (size_t i = 0; i < n; i++)
        order[i] = i;
    qsort_r(order, n, sizeof *order, cmp_item_annotator, (void *)items);
    return order;
}

static int labels_fn(lp_conn *db, void *ctx)
{
    struct labels_job *lj = ctx;
    int64_t now = lp_now_ms();
    size_t *order = lj->w->pg ? annotator_order(lj->items, lj->n) : NULL;
    for (size_t k = 0; k < lj->n; k++) {
        size_t i = order != NULL ? order[k] : k;
        lj->items[i].existing = 0;
        /* PostgreSQL: an unguarded statement's failure ended the
         * transaction; the engine runs the group again or fails it */
        lj->items[i].rc = lj->w->pg && !lp_conn_in_txn(db)
                              ? LP_ESTORAGE
                              : store_label(lj->w, db, &lj->items[i], now);
    }
    free(order);
    return LP_OK; /* the results are per item */
}

/* After a failed or refused commit nothing of the group is stored: every
 * result that claimed success becomes the job's error. */
static void fail_items(lp_label_item *items, size_t n, int job_rc)
{
    if (job_rc != LP_ESTORAGE && job_rc != LP_ESTORAGE_UNHEALTHY)
        return;
    for (size_t i = 0; i < n; i++)
        if (items[i].rc == LP_OK)
            items[i].rc = job_rc;
}

/* A label job's place in the engine's lock order: it locks its annotators'
 * rows (on PostgreSQL), the smallest first. */
static int64_t lock_order(const lp_label_item *items, size_t n)
{
    int64_t first = n > 0 ? items[0].annotator : 0;
    for (size_t i = 1; i < n; i++)
        if (items[i].annotator < first)
            first = items[i].annotator;
    return first;
}

int lp_store_labels_submit(lp_store *s, lp_label_item *items, size_t n)
{
    struct labels_job lj = {.w = s->labels, .items = items, .n = n};
    int rc =
        lp_engine_write_ordered(s->engine, labels_fn, &lj, n, LP_JOB_BARE, lock_order(items, n));
    fail_items(items, n, rc);
    return rc;
}

static void async_done(lp_job *j)
{
    struct labels_job *lj = (struct labels_job *)j;
    fail_items(lj->items, lj->n, j->rc);
    void (*done)(void *) = lj->user_done;
    void *ctx = lj->user_ctx;
    free(lj);
    done(ctx);
}

int lp_store_labels_submit_async(lp_store *s, lp_label_item *items, size_t n,
                                 void (*done)(void *ctx), void *ctx)
{
    struct labels_job *lj = calloc(1, sizeof *lj);
    if (lj == NULL)
        return LP_ENO_MEMORY;
    *lj = (struct labels_job){.job = {.fn = labels_fn,
                                      .ctx = lj,
                                      .items = n,
                                      .flags = LP_JOB_BARE,
                                      .lock_order = lock_order(items, n),
                                      .done = async_done},
                              .w = s->labels,
                              .items = items,
                              .n = n,
                              .user_done = done,
                              .user_ctx = ctx};
    int rc = lp_engine_write_async(s->engine, &lj->job);
    if (rc != LP_OK)
        free(lj);
    return rc;
}
