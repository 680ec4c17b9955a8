/* tasks.c — the tasks repository. See tasks.h. */
#include "tasks.h"

#include "clock.h"
#include "db.h"
#include "error.h"

#include <sodium.h>
#include <stdlib.h>
#include <string.h>

static const char SQL_TASK_INSERT[] =
    "INSERT INTO tasks (campaign, source_id, prompt, response0, response1, "
    "features0, features1, reference_preferred, created_ms) "
    "VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9) "
    "ON CONFLICT (campaign, source_id) DO NOTHING";
static const char SQL_TASK_GET[] =
    "SELECT id, campaign, prompt, response0, response1 FROM tasks WHERE id = ?1";
static const char SQL_TURN_INSERT[] =
    "INSERT INTO task_turns (task, position, role, content) VALUES (?1, ?2, ?3, ?4)";
static const char SQL_TURNS[] =
    "SELECT role, content FROM task_turns WHERE task = ?1 ORDER BY position";
static const char SQL_ANNOTATOR[] = "SELECT revoked, campaign FROM annotators WHERE id = ?1";
static const char SQL_PENDING[] =
    "SELECT a.task, a.swapped FROM assignments a WHERE a.annotator = ?1 AND "
    "NOT EXISTS (SELECT 1 FROM labels l WHERE l.annotator = a.annotator "
    "AND l.task = a.task) ORDER BY a.task LIMIT ?2";
static const char SQL_MAX_ASSIGNED[] =
    "SELECT COALESCE(MAX(task), 0) FROM assignments WHERE annotator = ?1";
static const char SQL_NEW_TASKS[] =
    "SELECT id FROM tasks WHERE campaign = ?1 AND id > ?2 ORDER BY id LIMIT ?3";
static const char SQL_ASSIGN_INSERT[] =
    "INSERT INTO assignments (annotator, task, swapped, created_ms) VALUES (?1, ?2, ?3, ?4)";

/* ---- tasks ---- */

struct load_job {
    lp_engine *engine;
    int64_t campaign;
    const lp_task_in *tasks;
    size_t n, loaded, skipped;
    int64_t first, last;
};

/* The context turns of the new task id. */
static int insert_turns(lp_engine *e, sqlite3 *db, int64_t id, const lp_turn *turns, size_t n)
{
    for (size_t k = 0; k < n; k++) {
        sqlite3_stmt *st = lp_engine_stmt(e, db, SQL_TURN_INSERT);
        if (st == NULL)
            return LP_ESTORAGE;
        sqlite3_bind_int64(st, 1, id);
        sqlite3_bind_int64(st, 2, (int64_t)k);
        sqlite3_bind_text(st, 3, turns[k].role, -1, SQLITE_STATIC);
        sqlite3_bind_text(st, 4, turns[k].content, -1, SQLITE_STATIC);
        int step = sqlite3_step(st);
        sqlite3_reset(st);
        if (step != SQLITE_DONE)
            return lp_engine_fail(db, "turn insert");
    }
    return LP_OK;
}

static int load_fn(sqlite3 *db, void *ctx)
{
    struct load_job *a = ctx;
    int64_t now = lp_now_ms();
    a->loaded = a->skipped = 0;
    a->first = a->last = 0;
    for (size_t i = 0; i < a->n; i++) {
        const lp_task_in *t = &a->tasks[i];
        sqlite3_stmt *st = lp_engine_stmt(a->engine, db, SQL_TASK_INSERT);
        if (st == NULL)
            return LP_ESTORAGE;
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
            return sqlite3_extended_errcode(db) == SQLITE_CONSTRAINT_FOREIGNKEY
                       ? LP_EUNKNOWN_CAMPAIGN
                       : lp_engine_fail(db, "task insert");
        sqlite3_reset(st);
        if (sqlite3_changes(db) == 1) {
            int64_t id = sqlite3_last_insert_rowid(db);
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
    return LP_OK;
}

int lp_store_tasks_load(lp_store *s, int64_t campaign, const lp_task_in *tasks, size_t n,
                        size_t *loaded, size_t *skipped, int64_t *first, int64_t *last)
{
    struct load_job a = {.engine = s->engine, .campaign = campaign, .tasks = tasks, .n = n};
    int rc = lp_engine_write(s->engine, load_fn, &a, n ? n : 1, 0);
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

struct get_query {
    lp_engine *engine;
    int64_t id;
    lp_task *out;
};

static int get_fn(sqlite3 *db, void *ctx)
{
    struct get_query *q = ctx;
    sqlite3_stmt *st = lp_engine_stmt(q->engine, db, SQL_TASK_GET);
    if (st == NULL)
        return LP_ESTORAGE;
    sqlite3_bind_int64(st, 1, q->id);
    int rc = LP_ESTORAGE, step = sqlite3_step(st);
    if (step == SQLITE_ROW) {
        lp_task *out = q->out;
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
static int turns_fn(sqlite3 *db, void *ctx)
{
    struct turns_query *q = ctx;
    sqlite3_stmt *st = lp_engine_stmt(q->engine, db, SQL_TURNS);
    if (st == NULL)
        return LP_ESTORAGE;
    sqlite3_bind_int64(st, 1, q->id);
    size_t n = 0, bytes = 0;
    int step;
    while ((step = sqlite3_step(st)) == SQLITE_ROW) {
        n++;
        bytes += (size_t)sqlite3_column_bytes(st, 0) + (size_t)sqlite3_column_bytes(st, 1) + 2;
    }
    sqlite3_reset(st);
    if (step != SQLITE_DONE)
        return lp_engine_fail(db, "context turns");
    if (n == 0)
        return LP_OK;
    lp_turn *turns = malloc(n * sizeof *turns + bytes);
    if (turns == NULL)
        return LP_ENO_MEMORY;
    char *text = (char *)(turns + n), *end = text + bytes;
    size_t k = 0, fields = 0;
    while (k < n && (step = sqlite3_step(st)) == SQLITE_ROW) {
        const char *field[2] = {NULL, NULL};
        for (int col = 0; col < 2; col++) {
            size_t len = (size_t)sqlite3_column_bytes(st, col);
            const unsigned char *v = sqlite3_column_text(st, col);
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
    sqlite3_reset(st);
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

struct assign_job {
    lp_engine *engine;
    int64_t annotator;
    uint32_t count;
    lp_assignment *out;
    size_t n;
};

static int assign_fn(sqlite3 *db, void *ctx)
{
    struct assign_job *a = ctx;
    sqlite3_stmt *st = lp_engine_stmt(a->engine, db, SQL_ANNOTATOR);
    if (st == NULL)
        return LP_ESTORAGE;
    sqlite3_bind_int64(st, 1, a->annotator);
    int step = sqlite3_step(st);
    if (step != SQLITE_ROW) {
        sqlite3_reset(st);
        return step == SQLITE_DONE ? LP_EUNKNOWN_KEY : lp_engine_fail(db, "annotator lookup");
    }
    int revoked = sqlite3_column_int(st, 0);
    int64_t campaign = sqlite3_column_int64(st, 1);
    sqlite3_reset(st);
    if (revoked)
        return LP_EREVOKED_KEY;

    a->n = 0;
    if ((st = lp_engine_stmt(a->engine, db, SQL_PENDING)) == NULL)
        return LP_ESTORAGE;
    sqlite3_bind_int64(st, 1, a->annotator);
    sqlite3_bind_int64(st, 2, a->count);
    while ((step = sqlite3_step(st)) == SQLITE_ROW && a->n < a->count) {
        a->out[a->n].task_id = sqlite3_column_int64(st, 0);
        a->out[a->n].swapped = sqlite3_column_int(st, 1);
        a->n++;
    }
    sqlite3_reset(st);
    if (step != SQLITE_DONE && step != SQLITE_ROW)
        return lp_engine_fail(db, "pending assignments");
    if (a->n == a->count)
        return LP_OK;

    if ((st = lp_engine_stmt(a->engine, db, SQL_MAX_ASSIGNED)) == NULL)
        return LP_ESTORAGE;
    sqlite3_bind_int64(st, 1, a->annotator);
    if (sqlite3_step(st) != SQLITE_ROW)
        return lp_engine_fail(db, "max assignment");
    int64_t after = sqlite3_column_int64(st, 0);
    sqlite3_reset(st);

    size_t first_new = a->n;
    if ((st = lp_engine_stmt(a->engine, db, SQL_NEW_TASKS)) == NULL)
        return LP_ESTORAGE;
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
        return lp_engine_fail(db, "new tasks");
    int64_t now = lp_now_ms();
    for (size_t i = first_new; i < a->n; i++) {
        if ((st = lp_engine_stmt(a->engine, db, SQL_ASSIGN_INSERT)) == NULL)
            return LP_ESTORAGE;
        sqlite3_bind_int64(st, 1, a->annotator);
        sqlite3_bind_int64(st, 2, a->out[i].task_id);
        sqlite3_bind_int(st, 3, a->out[i].swapped);
        sqlite3_bind_int64(st, 4, now);
        if (sqlite3_step(st) != SQLITE_DONE)
            return lp_engine_fail(db, "assignment insert");
        sqlite3_reset(st);
    }
    return a->n == 0 ? LP_ENO_TASK : LP_OK;
}

int lp_store_assign(lp_store *s, int64_t annotator, uint32_t count, lp_assignment *out, size_t *n)
{
    struct assign_job a = {.engine = s->engine, .annotator = annotator, .count = count, .out = out};
    int rc = lp_engine_write(s->engine, assign_fn, &a, 1, 0);
    *n = rc == LP_OK ? a.n : 0;
    return rc;
}
