/* tasks.c — the tasks repository. See tasks.h. */
#include "tasks.h"

#include "clock.h"
#include "db.h"
#include "error.h"

#include <sodium.h>
#include <stdlib.h>
#include <string.h>
#include <unistr.h>

static const char SQL_TASK_INSERT[] =
    "INSERT INTO tasks (campaign, source_id, prompt, response0, response1, "
    "features0, features1, reference_preferred, created_ms, gold) "
    "VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10) "
    "ON CONFLICT (campaign, source_id) DO NOTHING RETURNING id";
/* PostgreSQL: the campaign the tasks reference, kept until commit (the
 * foreign key's own lock) */
static const char SQL_CAMPAIGN_PG[] = "SELECT 1 FROM campaigns WHERE id = ?1 FOR KEY SHARE";
/* the upload's tasks added to its campaign's count, once (schema/016) */
static const char SQL_TASK_COUNT[] =
    "UPDATE campaign_fill SET tasks = tasks + ?2 WHERE campaign = ?1";
static const char SQL_TASK_GET[] =
    "SELECT id, campaign, prompt, response0, response1 FROM tasks WHERE id = ?1";
static const char SQL_TURN_INSERT[] =
    "INSERT INTO task_turns (task, position, role, content) VALUES (?1, ?2, ?3, ?4)";
static const char SQL_TURNS[] =
    "SELECT role, content FROM task_turns WHERE task = ?1 ORDER BY position";
#define ANNOTATOR_READ                                                                             \
    "SELECT a.revoked, a.campaign, c.labels_per_task, coalesce(c.annotator_quota, 0), f.tasks, "   \
    "f.tasks_complete, f.open_from FROM annotators a JOIN campaigns c ON c.id = a.campaign "       \
    "JOIN campaign_fill f ON f.campaign = a.campaign WHERE a.id = ?1"
static const char SQL_ANNOTATOR[] = ANNOTATOR_READ;
/* PostgreSQL: the annotator's row locked until commit, so that requests of
 * one annotator through several servers count its leases one at a time
 * (the quota); label ingest takes the same lock. */
static const char SQL_ANNOTATOR_PG[] = ANNOTATOR_READ " FOR UPDATE OF a";
/* every assignment of the annotator, with whether it is labelled and its
 * task's label count */
static const char SQL_OWN[] =
    "SELECT a.task, a.swapped, a.leased_ms, a.skipped, EXISTS (SELECT 1 FROM labels l "
    "WHERE l.annotator = a.annotator AND l.task = a.task), f.labels FROM assignments a "
    "JOIN task_fill f ON f.task = a.task WHERE a.annotator = ?1 ORDER BY a.task";
/* the campaign's tasks from open_from on, with their label counts */
static const char SQL_CANDIDATES[] =
    "SELECT t.id, f.labels FROM tasks t JOIN task_fill f ON f.task = t.id "
    "WHERE t.campaign = ?1 AND t.id >= ?2 ORDER BY t.id";
static const char SQL_OWN_ONE[] =
    "SELECT a.swapped, a.leased_ms, a.skipped, EXISTS (SELECT 1 FROM labels l "
    "WHERE l.annotator = a.annotator AND l.task = a.task) FROM assignments a "
    "WHERE a.annotator = ?1 AND a.task = ?2";
/* unexpired, unlabelled, unskipped leases of others on a task */
static const char SQL_LEASES[] =
    "SELECT count(*) FROM assignments a WHERE a.task = ?1 AND a.leased_ms > ?3 "
    "AND a.annotator <> ?2 AND a.skipped = 0 AND NOT EXISTS (SELECT 1 FROM labels l "
    "WHERE l.annotator = a.annotator AND l.task = a.task)";
/* PostgreSQL: the task's counter row, locked until commit (see task_open) */
static const char SQL_TASK_LOCK[] =
    "SELECT labels FROM task_fill WHERE task = ?1 FOR UPDATE SKIP LOCKED";
static const char SQL_ASSIGN_INSERT[] = "INSERT INTO assignments (annotator, task, swapped, "
                                        "created_ms, leased_ms) VALUES (?1, ?2, ?3, ?4, ?4)";
static const char SQL_RENEW[] =
    "UPDATE assignments SET leased_ms = ?3 WHERE annotator = ?1 AND task = ?2";
static const char SQL_OPEN_FROM[] =
    "UPDATE campaign_fill SET open_from = ?2 WHERE campaign = ?1 AND open_from < ?2";
static const char SQL_TASK_CAMPAIGN[] = "SELECT campaign FROM tasks WHERE id = ?1";
static const char SQL_SKIP[] =
    "UPDATE assignments SET skipped = 1 WHERE annotator = ?1 AND task = ?2";

/* ---- tasks ---- */

/*
 * An upload is one transaction. Its tasks' count is added to the
 * campaign's campaign_fill row once, after the inserts (schema/016; the
 * tasks_fill trigger gives each task its task_fill row only): a counter
 * row updated once per task would gain a row version per task on
 * PostgreSQL, each update stepping past the ones before it, and the
 * upload would take time in the square of its size. Updated last, the
 * row is locked only for the commit, not for the whole upload.
 *
 * On PostgreSQL the load's statements are unguarded (sql.h): with a
 * savepoint per statement (a subtransaction id per task and per turn)
 * row version checks read pg_subtrans once past the 64 ids a session
 * keeps in shared memory. No constraint can refuse them once load_checks
 * passed: the task insert is ON CONFLICT (campaign, source_id) DO
 * NOTHING; its campaign exists (checked and locked first); its NOT NULL
 * texts are set and valid UTF-8 (the database's encoding);
 * reference_preferred and gold are bound only as 0 or 1; a turn's task is
 * the new row, its position new, its role one of the three the CHECK
 * allows. The trigger's task_fill row is new and the count's
 * campaign_fill row exists. What can still fail them (the storage, a
 * conflict with another writer) ends the transaction, and the engine
 * fails the group or runs it again.
 */

/* Whether s is set and valid UTF-8 (PostgreSQL refuses other text). */
static int text_ok(const char *s)
{
    return s != NULL && u8_check((const uint8_t *)s, strlen(s)) == NULL;
}

static int role_ok(const char *role)
{
    return role != NULL && (strcmp(role, LP_ROLE_SYSTEM) == 0 || strcmp(role, LP_ROLE_USER) == 0 ||
                            strcmp(role, LP_ROLE_ASSISTANT) == 0);
}

/* What the schema's constraints check of the tasks, checked before any is
 * written: LP_OK or LP_EBAD_TASK. */
static int load_checks(const lp_task_in *tasks, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        const lp_task_in *t = &tasks[i];
        if (!text_ok(t->source_id) || !text_ok(t->prompt) || !text_ok(t->response0) ||
            !text_ok(t->response1) || (t->n_context > 0 && t->context == NULL))
            return LP_EBAD_TASK;
        for (size_t k = 0; k < t->n_context; k++)
            if (!role_ok(t->context[k].role) || !text_ok(t->context[k].content))
                return LP_EBAD_TASK;
    }
    return LP_OK;
}

/* PostgreSQL: LP_OK when the campaign exists (locked as its foreign key
 * would), else LP_EUNKNOWN_CAMPAIGN. */
static int campaign_held(lp_engine *e, lp_conn *db, int64_t campaign)
{
    lp_stmt *st = lp_engine_stmt(e, db, SQL_CAMPAIGN_PG);
    if (st == NULL)
        return LP_ESTORAGE;
    lp_stmt_set_unguarded(st);
    lp_stmt_bind_int64(st, 1, campaign);
    int step = lp_stmt_step(st);
    lp_stmt_reset(st);
    if (step == LP_SQL_ROW)
        return LP_OK;
    return step == LP_SQL_DONE ? LP_EUNKNOWN_CAMPAIGN : lp_engine_fail(db, "campaign lookup");
}

/* The load's statement, unguarded on PostgreSQL (see above). */
static lp_stmt *load_stmt(lp_engine *e, lp_conn *db, const char *sql)
{
    lp_stmt *st = lp_engine_stmt(e, db, sql);
    if (st != NULL && lp_conn_dialect(db) == LP_SQL_POSTGRESQL)
        lp_stmt_set_unguarded(st);
    return st;
}

struct load_job {
    lp_engine *engine;
    int64_t campaign;
    const lp_task_in *tasks;
    size_t n, loaded, skipped;
    int64_t first, last;
};

/* The context turns of the new task id. */
static int insert_turns(lp_engine *e, lp_conn *db, int64_t id, const lp_turn *turns, size_t n)
{
    for (size_t k = 0; k < n; k++) {
        lp_stmt *st = load_stmt(e, db, SQL_TURN_INSERT);
        if (st == NULL)
            return LP_ESTORAGE;
        lp_stmt_bind_int64(st, 1, id);
        lp_stmt_bind_int64(st, 2, (int64_t)k);
        lp_stmt_bind_text(st, 3, turns[k].role, -1);
        lp_stmt_bind_text(st, 4, turns[k].content, -1);
        int step = lp_stmt_step(st);
        lp_stmt_reset(st);
        if (step != LP_SQL_DONE)
            return lp_engine_fail(db, "turn insert");
    }
    return LP_OK;
}

/* Adds n tasks to the campaign's campaign_fill.tasks. */
static int count_tasks(lp_engine *e, lp_conn *db, int64_t campaign, int64_t n)
{
    lp_stmt *st = load_stmt(e, db, SQL_TASK_COUNT);
    if (st == NULL)
        return LP_ESTORAGE;
    lp_stmt_bind_int64(st, 1, campaign);
    lp_stmt_bind_int64(st, 2, n);
    int step = lp_stmt_step(st);
    lp_stmt_reset(st);
    return step == LP_SQL_DONE ? LP_OK : lp_engine_fail(db, "task count");
}

static int load_fn(lp_conn *db, void *ctx)
{
    struct load_job *a = ctx;
    int64_t now = lp_now_ms();
    a->loaded = a->skipped = 0;
    a->first = a->last = 0;
    if (lp_conn_dialect(db) == LP_SQL_POSTGRESQL) {
        int rc = campaign_held(a->engine, db, a->campaign);
        if (rc != LP_OK)
            return rc;
    }
    for (size_t i = 0; i < a->n; i++) {
        const lp_task_in *t = &a->tasks[i];
        lp_stmt *st = load_stmt(a->engine, db, SQL_TASK_INSERT);
        if (st == NULL)
            return LP_ESTORAGE;
        lp_stmt_bind_int64(st, 1, a->campaign);
        lp_stmt_bind_text(st, 2, t->source_id, -1);
        lp_stmt_bind_text(st, 3, t->prompt, -1);
        lp_stmt_bind_text(st, 4, t->response0, -1);
        lp_stmt_bind_text(st, 5, t->response1, -1);
        if (t->features0 != NULL && t->features1 != NULL && t->dim > 0) {
            lp_stmt_bind_blob(st, 6, t->features0, (int)(t->dim * sizeof(double)));
            lp_stmt_bind_blob(st, 7, t->features1, (int)(t->dim * sizeof(double)));
        }
        if (t->reference_preferred == 0 || t->reference_preferred == 1)
            lp_stmt_bind_int64(st, 8, t->reference_preferred);
        lp_stmt_bind_int64(st, 9, now);
        if (t->gold != LP_GOLD_NONE)
            lp_stmt_bind_int64(st, 10, t->gold == LP_GOLD_RESPONSE1);
        int64_t id;
        int step = lp_engine_step_id(st, &id);
        if (step != LP_SQL_DONE)
            return step == LP_SQL_FOREIGN_KEY ? LP_EUNKNOWN_CAMPAIGN
                                              : lp_engine_fail(db, "task insert");
        if (id != 0) { /* no row: a task with this source_id was there */
            int rc = insert_turns(a->engine, db, id, t->context, t->n_context);
            if (rc != LP_OK)
                return rc;
            if (a->loaded++ == 0)
                a->first = id;
            a->last = id;
        } else {
            a->skipped++;
        }
    }
    return a->loaded > 0 ? count_tasks(a->engine, db, a->campaign, (int64_t)a->loaded) : LP_OK;
}

int lp_store_tasks_load(lp_store *s, int64_t campaign, const lp_task_in *tasks, size_t n,
                        size_t *loaded, size_t *skipped, int64_t *first, int64_t *last)
{
    struct load_job a = {.engine = s->engine, .campaign = campaign, .tasks = tasks, .n = n};
    int rc = load_checks(tasks, n);
    if (rc == LP_OK)
        rc = lp_engine_write(s->engine, load_fn, &a, n ? n : 1, 0);
    *loaded = rc == LP_OK ? a.loaded : 0;
    *skipped = rc == LP_OK ? a.skipped : 0;
    *first = rc == LP_OK ? a.first : 0;
    *last = rc == LP_OK ? a.last : 0;
    return rc;
}

struct get_query {
    lp_engine *engine;
    int64_t id;
    lp_task *out;
};

static int get_fn(lp_conn *db, void *ctx)
{
    struct get_query *q = ctx;
    lp_stmt *st = lp_engine_stmt(q->engine, db, SQL_TASK_GET);
    if (st == NULL)
        return LP_ESTORAGE;
    lp_stmt_bind_int64(st, 1, q->id);
    int rc = LP_ESTORAGE, step = lp_stmt_step(st);
    if (step == LP_SQL_ROW) {
        lp_task *out = q->out;
        out->id = lp_stmt_column_int64(st, 0);
        out->campaign = lp_stmt_column_int64(st, 1);
        out->prompt = lp_engine_column_dup(st, 2);
        out->response0 = lp_engine_column_dup(st, 3);
        out->response1 = lp_engine_column_dup(st, 4);
        rc = out->prompt && out->response0 && out->response1 ? LP_OK : LP_ENO_MEMORY;
    } else if (step == LP_SQL_DONE) {
        rc = LP_EUNKNOWN_TASK;
    }
    lp_stmt_reset(st);
    return rc;
}

int lp_store_task_get(lp_store *s, int64_t id, lp_task *out)
{
    memset(out, 0, sizeof *out);
    struct get_query q = {s->engine, id, out};
    int rc = lp_engine_read(s->engine, get_fn, &q);
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

/* ---- context turns ---- */

struct turns_query {
    lp_engine *engine;
    int64_t id;
    lp_turn *turns;
    size_t n;
};

/* Two passes over the turns: the sizes, then the copy into one block
 * (the array, then each role and content with its NUL). */
static int turns_fn(lp_conn *db, void *ctx)
{
    struct turns_query *q = ctx;
    lp_stmt *st = lp_engine_stmt(q->engine, db, SQL_TURNS);
    if (st == NULL)
        return LP_ESTORAGE;
    lp_stmt_bind_int64(st, 1, q->id);
    size_t n = 0, bytes = 0;
    int step;
    while ((step = lp_stmt_step(st)) == LP_SQL_ROW) {
        n++;
        bytes += (size_t)lp_stmt_column_bytes(st, 0) + (size_t)lp_stmt_column_bytes(st, 1) + 2;
    }
    lp_stmt_reset(st);
    if (step != LP_SQL_DONE)
        return lp_engine_fail(db, "context turns");
    if (n == 0)
        return LP_OK;
    lp_turn *turns = malloc(n * sizeof *turns + bytes);
    if (turns == NULL)
        return LP_ENO_MEMORY;
    char *text = (char *)(turns + n), *end = text + bytes;
    size_t k = 0, fields = 0;
    while (k < n && (step = lp_stmt_step(st)) == LP_SQL_ROW) {
        const char *field[2] = {NULL, NULL};
        for (int col = 0; col < 2; col++) {
            size_t len = (size_t)lp_stmt_column_bytes(st, col);
            const char *v = lp_stmt_column_text(st, col);
            if (v == NULL || len + 1 > (size_t)(end - text))
                break;
            memcpy(text, v, len);
            text[len] = '\0';
            field[col] = text;
            text += len + 1;
            fields++;
        }
        turns[k].role = field[0];
        turns[k].content = field[1];
        k++;
    }
    lp_stmt_reset(st);
    if (k != n || fields != 2 * n || text != end) { /* the rows changed between the passes */
        free(turns);
        return lp_engine_fail(db, "context turns changed while read");
    }
    q->turns = turns;
    q->n = n;
    return LP_OK;
}

int lp_store_task_context(lp_store *s, int64_t id, lp_turn **turns, size_t *n)
{
    struct turns_query q = {.engine = s->engine, .id = id};
    int rc = lp_engine_read(s->engine, turns_fn, &q);
    *turns = rc == LP_OK ? q.turns : NULL;
    *n = rc == LP_OK ? q.n : 0;
    if (rc != LP_OK)
        free(q.turns);
    return rc;
}

void lp_turns_free(lp_turn *turns)
{
    free(turns);
}

/* ---- assignment ---- */

/* The annotator's row with its campaign's distribution settings. */
struct who {
    int revoked;
    int64_t campaign, labels_per_task, quota, tasks, tasks_complete, open_from;
};

static int who_get(lp_engine *e, lp_conn *db, int64_t annotator, struct who *w)
{
    lp_stmt *st = lp_engine_stmt(
        e, db, lp_conn_dialect(db) == LP_SQL_POSTGRESQL ? SQL_ANNOTATOR_PG : SQL_ANNOTATOR);
    if (st == NULL)
        return LP_ESTORAGE;
    lp_stmt_bind_int64(st, 1, annotator);
    int step = lp_stmt_step(st);
    if (step != LP_SQL_ROW) {
        lp_stmt_reset(st);
        return step == LP_SQL_DONE ? LP_EUNKNOWN_KEY : lp_engine_fail(db, "annotator lookup");
    }
    w->revoked = lp_stmt_column_int(st, 0);
    w->campaign = lp_stmt_column_int64(st, 1);
    w->labels_per_task = lp_stmt_column_int64(st, 2);
    w->quota = lp_stmt_column_int64(st, 3);
    w->tasks = lp_stmt_column_int64(st, 4);
    w->tasks_complete = lp_stmt_column_int64(st, 5);
    w->open_from = lp_stmt_column_int64(st, 6);
    lp_stmt_reset(st);
    return w->revoked ? LP_EREVOKED_KEY : LP_OK;
}

struct assign_job {
    lp_engine *engine;
    int64_t annotator, lease_ms;
    uint32_t count;
    lp_assignment *out;
    size_t n;
    int rc; /* the outcome; the job itself commits whatever it renewed */
};

/* The annotator's pending leases on tasks that still need labels into out
 * (up to count); with a quota, *held gets the labels plus those leases (the
 * quota's measure); without one the walk stops once out is full. */
static int own_pending(struct assign_job *a, lp_conn *db, const struct who *w, int64_t live_after,
                       int64_t *held)
{
    lp_stmt *st = lp_engine_stmt(a->engine, db, SQL_OWN);
    if (st == NULL)
        return LP_ESTORAGE;
    lp_stmt_bind_int64(st, 1, a->annotator);
    int step = LP_SQL_DONE;
    *held = 0;
    while ((w->quota > 0 || a->n < a->count) && (step = lp_stmt_step(st)) == LP_SQL_ROW) {
        int labelled = lp_stmt_column_int(st, 4), skipped = lp_stmt_column_int(st, 3);
        int pending = !labelled && !skipped && lp_stmt_column_int64(st, 2) > live_after &&
                      lp_stmt_column_int64(st, 5) < w->labels_per_task;
        if (labelled || pending)
            (*held)++;
        if (pending && a->n < a->count) {
            a->out[a->n].task_id = lp_stmt_column_int64(st, 0);
            a->out[a->n].swapped = lp_stmt_column_int(st, 1);
            a->n++;
        }
    }
    lp_stmt_reset(st);
    return step == LP_SQL_DONE || step == LP_SQL_ROW ? LP_OK
                                                     : lp_engine_fail(db, "own assignments");
}

/* Whether task (with `labels` labels) is open to the annotator: 1 fresh, 2
 * the annotator's own expired lease (*swapped set), 0 not open, or -error. */
static int task_open(struct assign_job *a, lp_conn *db, int64_t task, int64_t labels, int64_t need,
                     int64_t live_after, int *swapped)
{
    lp_stmt *st;
    int step;
    /* Several servers (PostgreSQL): the reads below and the lease are made
     * under the task's counter row lock, so two servers never both see room
     * for one more lease on a task; a task another server holds right now
     * is passed over (SKIP LOCKED). Each read after the lock is a statement
     * of its own and sees what the previous holder committed. SQLite has
     * one writer. */
    if (lp_conn_dialect(db) == LP_SQL_POSTGRESQL) {
        if ((st = lp_engine_stmt(a->engine, db, SQL_TASK_LOCK)) == NULL)
            return -LP_ESTORAGE;
        lp_stmt_bind_int64(st, 1, task);
        step = lp_stmt_step(st);
        if (step == LP_SQL_ROW)
            labels = lp_stmt_column_int64(st, 0);
        lp_stmt_reset(st);
        if (step == LP_SQL_DONE)
            return 0;
        if (step != LP_SQL_ROW)
            return -lp_engine_fail(db, "task lock");
        if (labels >= need)
            return 0;
    }
    if ((st = lp_engine_stmt(a->engine, db, SQL_OWN_ONE)) == NULL)
        return -LP_ESTORAGE;
    lp_stmt_bind_int64(st, 1, a->annotator);
    lp_stmt_bind_int64(st, 2, task);
    step = lp_stmt_step(st);
    int kind = 1;
    if (step == LP_SQL_ROW) {
        *swapped = lp_stmt_column_int(st, 0);
        int live = lp_stmt_column_int64(st, 1) > live_after;
        kind = lp_stmt_column_int(st, 2) || lp_stmt_column_int(st, 3) || live ? 0 : 2;
    }
    lp_stmt_reset(st);
    if (step != LP_SQL_ROW && step != LP_SQL_DONE)
        return -lp_engine_fail(db, "own assignment");
    if (kind == 0)
        return 0;
    if ((st = lp_engine_stmt(a->engine, db, SQL_LEASES)) == NULL)
        return -LP_ESTORAGE;
    lp_stmt_bind_int64(st, 1, task);
    lp_stmt_bind_int64(st, 2, a->annotator);
    lp_stmt_bind_int64(st, 3, live_after);
    if (lp_stmt_step(st) != LP_SQL_ROW) {
        lp_stmt_reset(st);
        return -lp_engine_fail(db, "task leases");
    }
    int64_t leases = lp_stmt_column_int64(st, 0);
    lp_stmt_reset(st);
    return labels + leases < need ? kind : 0;
}

/* Takes (or renews) the lease of out[i]. */
static int lease(struct assign_job *a, lp_conn *db, size_t i, int renew, int64_t now)
{
    lp_stmt *st = lp_engine_stmt(a->engine, db, renew ? SQL_RENEW : SQL_ASSIGN_INSERT);
    if (st == NULL)
        return LP_ESTORAGE;
    lp_stmt_bind_int64(st, 1, a->annotator);
    lp_stmt_bind_int64(st, 2, a->out[i].task_id);
    if (renew) {
        lp_stmt_bind_int64(st, 3, now);
    } else {
        lp_stmt_bind_int64(st, 3, a->out[i].swapped);
        lp_stmt_bind_int64(st, 4, now);
    }
    int step = lp_stmt_step(st);
    lp_stmt_reset(st);
    return step == LP_SQL_DONE ? LP_OK : lp_engine_fail(db, "assignment lease");
}

/* Walks the campaign's tasks from open_from, leasing open ones into out
 * until a->n reaches limit; moves open_from past the complete prefix. */
static int take_open(struct assign_job *a, lp_conn *db, const struct who *w, size_t limit,
                     int64_t now, int64_t live_after)
{
    lp_stmt *st = lp_engine_stmt(a->engine, db, SQL_CANDIDATES);
    if (st == NULL)
        return LP_ESTORAGE;
    lp_stmt_bind_int64(st, 1, w->campaign);
    lp_stmt_bind_int64(st, 2, w->open_from);
    int64_t open_from = w->open_from;
    int prefix = 1, step = LP_SQL_DONE, rc = LP_OK;
    /* the cursor stays open over the leases: SQLite lets a statement read
     * on while the same connection writes other rows */
    while (a->n < limit && (step = lp_stmt_step(st)) == LP_SQL_ROW) {
        int64_t task = lp_stmt_column_int64(st, 0), labels = lp_stmt_column_int64(st, 1);
        if (labels >= w->labels_per_task) {
            if (prefix)
                open_from = task + 1;
            continue;
        }
        prefix = 0;
        int swapped = 0;
        int kind = task_open(a, db, task, labels, w->labels_per_task, live_after, &swapped);
        if (kind < 0) {
            rc = -kind;
            break;
        }
        if (kind == 0)
            continue;
        a->out[a->n].task_id = task;
        a->out[a->n].swapped = kind == 2 ? swapped : (int)randombytes_uniform(2);
        if ((rc = lease(a, db, a->n, kind == 2, now)) != LP_OK)
            break;
        a->n++;
    }
    if (rc == LP_OK && a->n < limit && step != LP_SQL_DONE)
        rc = lp_engine_fail(db, "open tasks");
    lp_stmt_reset(st);
    if (rc != LP_OK || open_from == w->open_from)
        return rc;
    if ((st = lp_engine_stmt(a->engine, db, SQL_OPEN_FROM)) == NULL)
        return LP_ESTORAGE;
    lp_stmt_bind_int64(st, 1, w->campaign);
    lp_stmt_bind_int64(st, 2, open_from);
    step = lp_stmt_step(st);
    lp_stmt_reset(st);
    return step == LP_SQL_DONE ? LP_OK : lp_engine_fail(db, "open_from update");
}

static int assign_fn(lp_conn *db, void *ctx)
{
    struct assign_job *a = ctx;
    struct who w;
    int rc = who_get(a->engine, db, a->annotator, &w);
    if (rc != LP_OK)
        return rc;
    int64_t now = lp_now_ms(), live_after = now - a->lease_ms, held;
    a->n = 0;
    if ((rc = own_pending(a, db, &w, live_after, &held)) != LP_OK)
        return rc;
    int complete = w.tasks > 0 && w.tasks_complete >= w.tasks;
    size_t limit = a->count;
    if (w.quota > 0) { /* room for new leases under the quota */
        int64_t room = w.quota > held ? w.quota - held : 0;
        if ((int64_t)a->n + room < (int64_t)limit)
            limit = a->n + (size_t)room;
    }
    if (!complete && a->n < limit && (rc = take_open(a, db, &w, limit, now, live_after)) != LP_OK)
        return rc;
    if (a->n > 0)
        a->rc = LP_OK;
    else if (complete)
        a->rc = LP_ECAMPAIGN_COMPLETE;
    else if (w.quota > 0 && held >= w.quota)
        a->rc = LP_EQUOTA_REACHED;
    else
        a->rc = LP_ENO_TASK;
    return LP_OK;
}

int lp_store_assign(lp_store *s, int64_t annotator, uint32_t count, lp_assignment *out, size_t *n)
{
    struct assign_job a = {.engine = s->engine,
                           .annotator = annotator,
                           .lease_ms = s->lease_ms,
                           .count = count,
                           .out = out};
    int rc = lp_engine_write(s->engine, assign_fn, &a, 1, 0);
    if (rc == LP_OK)
        rc = a.rc;
    *n = rc == LP_OK ? a.n : 0;
    return rc;
}

/* ---- skip ---- */

struct skip_job {
    lp_engine *engine;
    int64_t annotator, task;
};

static int skip_fn(lp_conn *db, void *ctx)
{
    struct skip_job *j = ctx;
    struct who w;
    int rc = who_get(j->engine, db, j->annotator, &w);
    if (rc != LP_OK)
        return rc;
    lp_stmt *st = lp_engine_stmt(j->engine, db, SQL_TASK_CAMPAIGN);
    if (st == NULL)
        return LP_ESTORAGE;
    lp_stmt_bind_int64(st, 1, j->task);
    int step = lp_stmt_step(st);
    lp_stmt_reset(st);
    if (step == LP_SQL_DONE)
        return LP_EUNKNOWN_TASK;
    if (step != LP_SQL_ROW)
        return lp_engine_fail(db, "task lookup");
    if ((st = lp_engine_stmt(j->engine, db, SQL_OWN_ONE)) == NULL)
        return LP_ESTORAGE;
    lp_stmt_bind_int64(st, 1, j->annotator);
    lp_stmt_bind_int64(st, 2, j->task);
    step = lp_stmt_step(st);
    int labelled = step == LP_SQL_ROW && lp_stmt_column_int(st, 3);
    lp_stmt_reset(st);
    if (step == LP_SQL_DONE)
        return LP_ENOT_ASSIGNED;
    if (step != LP_SQL_ROW)
        return lp_engine_fail(db, "assignment lookup");
    if (labelled)
        return LP_ECONFLICTING_LABEL;
    if ((st = lp_engine_stmt(j->engine, db, SQL_SKIP)) == NULL)
        return LP_ESTORAGE;
    lp_stmt_bind_int64(st, 1, j->annotator);
    lp_stmt_bind_int64(st, 2, j->task);
    step = lp_stmt_step(st);
    lp_stmt_reset(st);
    return step == LP_SQL_DONE ? LP_OK : lp_engine_fail(db, "skip");
}

int lp_store_skip(lp_store *s, int64_t annotator, int64_t task_id)
{
    struct skip_job j = {s->engine, annotator, task_id};
    return lp_engine_write(s->engine, skip_fn, &j, 1, 0);
}
