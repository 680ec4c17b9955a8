/* registry.c — learning records in SQLite. See registry.h. */
#include "registry.h"

#include "budget.h"
#include "buf.h"
#include "clock.h"
#include "db.h"
#include "error.h"
#include "log.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- small statement helpers ---- */

static int prep(lp_conn *db, const char *sql, lp_stmt **st)
{
    if ((*st = lp_stmt_prepare(db, sql)) == NULL) {
        lp_log(LP_LOG_ERROR, "storage_error", LP_LOG_STR("what", "registry prepare"),
               LP_LOG_STR("message", lp_conn_errmsg(db)), LP_LOG_STR("sql", sql));
        return LP_ESTORAGE;
    }
    return LP_OK;
}

/* Steps a statement that returns no rows, then finalizes it. */
static int exec_done(lp_conn *db, lp_stmt *st)
{
    int rc = lp_stmt_step(st);
    if (rc != LP_SQL_DONE)
        lp_engine_fail(db, "registry write");
    lp_stmt_finalize(st);
    return rc == LP_SQL_DONE ? LP_OK : LP_ESTORAGE;
}

/* exec_done of an INSERT ... RETURNING id: the new row's id into *id. */
static int exec_id(lp_conn *db, lp_stmt *st, int64_t *id)
{
    int rc = lp_engine_step_id(st, id);
    if (rc != LP_SQL_DONE)
        lp_engine_fail(db, "registry write");
    lp_stmt_finalize(st);
    return rc == LP_SQL_DONE ? LP_OK : LP_ESTORAGE;
}

static void copy_text(lp_stmt *st, int col, char *dst, size_t cap)
{
    const char *t = lp_stmt_column_text(st, col);
    snprintf(dst, cap, "%s", t ? t : "");
}

static void bind_text_or_null(lp_stmt *st, int i, const char *t)
{
    if (t != NULL && t[0] != '\0')
        lp_stmt_bind_text(st, i, t, -1);
    else
        lp_stmt_bind_null(st, i);
}

static void bind_int_or_null(lp_stmt *st, int i, int64_t v)
{
    if (v != 0)
        lp_stmt_bind_int64(st, i, v);
    else
        lp_stmt_bind_null(st, i);
}

static void bind_real_or_null(lp_stmt *st, int i, double v)
{
    if (isfinite(v))
        lp_stmt_bind_double(st, i, v);
    else
        lp_stmt_bind_null(st, i);
}

/* ---- corruption settings ---- */

/* Settings with their campaign's name (columns 0-7), then column 8: a
 * model's anti_model (NULL unless model_corruption mc is joined). */
#define CORRUPTION_COLS_OF(anti)                                                                   \
    "SELECT s.id, s.campaign, c.name, s.alpha, s.strategy, s.seed, s.feature, s.created_ms, " anti \
    " FROM corruption_settings s JOIN campaigns c ON c.id = s.campaign "
#define CORRUPTION_COLS CORRUPTION_COLS_OF("NULL")

static void read_corruption(lp_stmt *st, lp_corruption *c)
{
    memset(c, 0, sizeof *c);
    c->id = lp_stmt_column_int64(st, 0);
    c->campaign = lp_stmt_column_int64(st, 1);
    copy_text(st, 2, c->campaign_name, sizeof c->campaign_name);
    c->alpha = lp_stmt_column_double(st, 3);
    lp_adversary a = LP_ADV_FLIP;
    const char *name = lp_stmt_column_text(st, 4);
    if (name != NULL)
        lp_adversary_parse(name, &a);
    c->strategy = a;
    c->seed = (uint64_t)lp_stmt_column_int64(st, 5);
    c->feature = lp_stmt_column_int64(st, 6);
    c->created_ms = lp_stmt_column_int64(st, 7);
}

static int corruption_add_fn(lp_conn *db, void *ctx)
{
    lp_corruption *c = ctx;
    lp_stmt *st;
    if (prep(db,
             "INSERT INTO corruption_settings (campaign, alpha, strategy, seed, feature, "
             "created_ms) VALUES (?1, ?2, ?3, ?4, ?5, ?6) RETURNING id",
             &st) != LP_OK)
        return LP_ESTORAGE;
    lp_stmt_bind_int64(st, 1, c->campaign);
    lp_stmt_bind_double(st, 2, c->alpha);
    lp_stmt_bind_text(st, 3, lp_adversary_name(c->strategy), -1);
    lp_stmt_bind_int64(st, 4, (int64_t)c->seed);
    lp_stmt_bind_int64(st, 5, c->feature);
    lp_stmt_bind_int64(st, 6, c->created_ms);
    return exec_id(db, st, &c->id);
}

int lp_registry_corruption_add(lp_store *s, lp_corruption *c)
{
    c->created_ms = lp_now_ms();
    return lp_engine_write(s->engine, corruption_add_fn, c, 1, 0);
}

struct corruption_query {
    int64_t campaign;
    lp_corruption *one;
    lp_corruption *many;
    size_t n;
};

static int corruption_current_fn(lp_conn *db, void *ctx)
{
    struct corruption_query *q = ctx;
    lp_stmt *st;
    if (prep(db, CORRUPTION_COLS "WHERE s.campaign = ?1 ORDER BY s.id DESC LIMIT 1", &st) != LP_OK)
        return LP_ESTORAGE;
    lp_stmt_bind_int64(st, 1, q->campaign);
    int rc = lp_stmt_step(st);
    if (rc == LP_SQL_ROW)
        read_corruption(st, q->one);
    else
        memset(q->one, 0, sizeof *q->one);
    lp_stmt_finalize(st);
    return rc == LP_SQL_ROW || rc == LP_SQL_DONE ? LP_OK : LP_ESTORAGE;
}

int lp_registry_corruption_current(lp_store *s, int64_t campaign, lp_corruption *out)
{
    struct corruption_query q = {.campaign = campaign, .one = out};
    return lp_engine_read(s->engine, corruption_current_fn, &q);
}

static int corruption_active_fn(lp_conn *db, void *ctx)
{
    struct corruption_query *q = ctx;
    lp_stmt *st;
    if (prep(db,
             CORRUPTION_COLS "WHERE s.id IN (SELECT MAX(id) FROM corruption_settings "
                             "GROUP BY campaign) AND s.alpha > 0 ORDER BY s.campaign",
             &st) != LP_OK)
        return LP_ESTORAGE;
    size_t cap = 0;
    int rc;
    while ((rc = lp_stmt_step(st)) == LP_SQL_ROW) {
        if (lp_array_reserve((void **)&q->many, &cap, q->n, sizeof *q->many, 4) != LP_OK) {
            lp_stmt_finalize(st);
            return LP_ENO_MEMORY;
        }
        read_corruption(st, &q->many[q->n++]);
    }
    lp_stmt_finalize(st);
    return rc == LP_SQL_DONE ? LP_OK : LP_ESTORAGE;
}

int lp_registry_corruption_active(lp_store *s, lp_corruption **out, size_t *n)
{
    struct corruption_query q = {0};
    int rc = lp_engine_read(s->engine, corruption_active_fn, &q);
    if (rc != LP_OK) {
        free(q.many);
        q.many = NULL;
        q.n = 0;
    }
    *out = q.many;
    *n = q.n;
    return rc;
}

/* ---- runs ---- */

static const char *const STATUS_NAMES[LP_RUN_STATUS_COUNT] = {
    "queued", "snapshot", "training", "storing", "succeeded", "failed", "cancelled"};

const char *lp_run_status_name(lp_run_status st)
{
    return (unsigned)st < LP_RUN_STATUS_COUNT ? STATUS_NAMES[st] : "unknown";
}

int lp_run_status_final(lp_run_status st)
{
    return st == LP_RUN_SUCCEEDED || st == LP_RUN_FAILED || st == LP_RUN_CANCELLED;
}

static lp_run_status status_parse(const char *t)
{
    for (int k = 0; t != NULL && k < LP_RUN_STATUS_COUNT; k++)
        if (strcmp(t, STATUS_NAMES[k]) == 0)
            return (lp_run_status)k;
    return LP_RUN_FAILED;
}

/* ---- training settings ---- */

#define SETTINGS_FIELDS                                                                            \
    "loss, campaign, cutoff, seed, beta, rmax, tau, l2, norm_bound, optimizer, max_iter, "         \
    "epochs, lr, batch, features, text_dim, text_bigrams, text_cross_prompt, text_length, "        \
    "threads, activate, l2_auto, mechanism, release_epsilon, release_delta, candidates"
/* The columns of train_settings ts read by read_settings, in its order. */
#define SETTINGS_COLS                                                                              \
    "ts.loss, ts.campaign, ts.cutoff, ts.seed, ts.beta, ts.rmax, ts.tau, ts.l2, ts.norm_bound, "   \
    "ts.optimizer, ts.max_iter, ts.epochs, ts.lr, ts.batch, ts.features, ts.text_dim, "            \
    "ts.text_bigrams, ts.text_cross_prompt, ts.text_length, ts.threads, ts.activate, "             \
    "(SELECT name FROM campaigns WHERE id = ts.campaign), ts.l2_auto, ts.mechanism, "              \
    "ts.release_epsilon, ts.release_delta, ts.candidates"

#define SETTINGS_NCOLS 27 /* the columns of SETTINGS_COLS */
/* Reads SETTINGS_COLS starting at column col. */
static void read_settings(lp_stmt *st, int col, lp_train_settings *t)
{
    memset(t, 0, sizeof *t);
    copy_text(st, col, t->loss, sizeof t->loss);
    t->campaign = lp_stmt_column_int64(st, col + 1);
    t->cutoff = lp_stmt_column_int64(st, col + 2);
    t->seed = (uint64_t)lp_stmt_column_int64(st, col + 3);
    t->beta = lp_stmt_column_double(st, col + 4);
    t->rmax = lp_stmt_column_double(st, col + 5);
    t->tau = lp_stmt_column_double(st, col + 6);
    t->l2 = lp_stmt_column_double(st, col + 7);
    t->norm_bound =
        lp_stmt_column_is_null(st, col + 8) ? INFINITY : lp_stmt_column_double(st, col + 8);
    copy_text(st, col + 9, t->optimizer, sizeof t->optimizer);
    t->max_iter = lp_stmt_column_int(st, col + 10);
    t->epochs = lp_stmt_column_int(st, col + 11);
    t->lr = lp_stmt_column_double(st, col + 12);
    t->batch = lp_stmt_column_int(st, col + 13);
    copy_text(st, col + 14, t->features, sizeof t->features);
    t->text_dim = lp_stmt_column_int64(st, col + 15);
    t->text_bigrams = lp_stmt_column_int(st, col + 16);
    t->text_cross_prompt = lp_stmt_column_int(st, col + 17);
    t->text_length = lp_stmt_column_int(st, col + 18);
    t->threads = lp_stmt_column_int(st, col + 19);
    t->activate = lp_stmt_column_int(st, col + 20);
    copy_text(st, col + 21, t->campaign_name, sizeof t->campaign_name);
    t->l2_auto = lp_stmt_column_int(st, col + 22);
    copy_text(st, col + 23, t->mechanism, sizeof t->mechanism);
    t->release_epsilon = lp_stmt_column_double(st, col + 24);
    t->release_delta = lp_stmt_column_double(st, col + 25);
    copy_text(st, col + 26, t->candidates, sizeof t->candidates);
}

/* Appends a train_settings row; *id gets its id. */
static int settings_insert(lp_conn *db, const lp_train_settings *t, int64_t *id)
{
    lp_stmt *st;
    if (prep(db,
             "INSERT INTO train_settings (" SETTINGS_FIELDS ") VALUES (?1, ?2, ?3, ?4, ?5, ?6, "
             "?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15, ?16, ?17, ?18, ?19, ?20, ?21, ?22, ?23, "
             "?24, ?25, ?26) RETURNING id",
             &st) != LP_OK)
        return LP_ESTORAGE;
    lp_stmt_bind_text(st, 1, t->loss, -1);
    bind_int_or_null(st, 2, t->campaign);
    bind_int_or_null(st, 3, t->cutoff);
    lp_stmt_bind_int64(st, 4, (int64_t)t->seed);
    lp_stmt_bind_double(st, 5, t->beta);
    lp_stmt_bind_double(st, 6, t->rmax);
    lp_stmt_bind_double(st, 7, t->tau);
    lp_stmt_bind_double(st, 8, t->l2);
    bind_real_or_null(st, 9, t->norm_bound);
    lp_stmt_bind_text(st, 10, t->optimizer, -1);
    lp_stmt_bind_int64(st, 11, t->max_iter);
    lp_stmt_bind_int64(st, 12, t->epochs);
    lp_stmt_bind_double(st, 13, t->lr);
    lp_stmt_bind_int64(st, 14, t->batch);
    lp_stmt_bind_text(st, 15, t->features, -1);
    lp_stmt_bind_int64(st, 16, t->text_dim);
    lp_stmt_bind_int64(st, 17, t->text_bigrams);
    lp_stmt_bind_int64(st, 18, t->text_cross_prompt);
    lp_stmt_bind_int64(st, 19, t->text_length);
    lp_stmt_bind_int64(st, 20, t->threads);
    lp_stmt_bind_int64(st, 21, t->activate);
    lp_stmt_bind_int64(st, 22, t->l2_auto);
    if (t->mechanism[0] != '\0') {
        lp_stmt_bind_text(st, 23, t->mechanism, -1);
        lp_stmt_bind_double(st, 24, t->release_epsilon);
        lp_stmt_bind_double(st, 25, t->release_delta);
        lp_stmt_bind_text(st, 26, t->candidates, -1);
    }
    return exec_id(db, st, id);
}

/* ---- runs ---- */

#define RUN_COLS                                                                                   \
    "SELECT r.id, r.trigger_kind, r.status, r.cutoff, r.labels, r.iterations, r.objective, "       \
    "r.error, r.message, r.model_version, r.created_ms, r.started_ms, r.finished_ms, "             \
    "r.evaluations, r.grad_norm, " SETTINGS_COLS                                                   \
    " FROM training_runs r LEFT JOIN train_settings ts ON ts.id = r.settings "

static void read_run(lp_stmt *st, lp_run *r)
{
    memset(r, 0, sizeof *r);
    r->id = lp_stmt_column_int64(st, 0);
    copy_text(st, 1, r->trigger, sizeof r->trigger);
    r->status = status_parse(lp_stmt_column_text(st, 2));
    r->cutoff = lp_stmt_column_int64(st, 3);
    r->labels = lp_stmt_column_int64(st, 4);
    r->iterations = lp_stmt_column_int(st, 5);
    r->objective = lp_stmt_column_is_null(st, 6) ? NAN : lp_stmt_column_double(st, 6);
    const char *err = lp_stmt_column_text(st, 7);
    r->error = err ? lp_error_from_name(err) : 0;
    if (r->error < 0)
        r->error = LP_EINTERNAL;
    copy_text(st, 8, r->message, sizeof r->message);
    r->model_version = lp_stmt_column_int64(st, 9);
    r->created_ms = lp_stmt_column_int64(st, 10);
    r->started_ms = lp_stmt_column_int64(st, 11);
    r->finished_ms = lp_stmt_column_int64(st, 12);
    r->evaluations = lp_stmt_column_int(st, 13);
    r->grad_norm = lp_stmt_column_is_null(st, 14) ? NAN : lp_stmt_column_double(st, 14);
    read_settings(st, 15, &r->settings);
}

static int run_create_fn(lp_conn *db, void *ctx)
{
    lp_run *r = ctx;
    int64_t settings;
    int rc = settings_insert(db, &r->settings, &settings);
    if (rc != LP_OK)
        return rc;
    lp_stmt *st;
    if (prep(db,
             "INSERT INTO training_runs (trigger_kind, settings, status, created_ms) "
             "VALUES (?1, ?2, 'queued', ?3) RETURNING id",
             &st) != LP_OK)
        return LP_ESTORAGE;
    lp_stmt_bind_text(st, 1, r->trigger, -1);
    lp_stmt_bind_int64(st, 2, settings);
    lp_stmt_bind_int64(st, 3, r->created_ms);
    return exec_id(db, st, &r->id);
}

int lp_registry_run_create(lp_store *s, lp_run *r)
{
    r->created_ms = lp_now_ms();
    r->status = LP_RUN_QUEUED;
    return lp_engine_write(s->engine, run_create_fn, r, 1, 0);
}

static int run_update_fn(lp_conn *db, void *ctx)
{
    const lp_run *r = ctx;
    lp_stmt *st;
    if (prep(db,
             "UPDATE training_runs SET status = ?2, cutoff = ?3, labels = ?4, iterations = ?5, "
             "objective = ?6, error = ?7, message = ?8, model_version = ?9, started_ms = ?10, "
             "finished_ms = ?11, evaluations = ?12, grad_norm = ?13 WHERE id = ?1",
             &st) != LP_OK)
        return LP_ESTORAGE;
    lp_stmt_bind_int64(st, 1, r->id);
    lp_stmt_bind_text(st, 2, lp_run_status_name(r->status), -1);
    bind_int_or_null(st, 3, r->cutoff);
    lp_stmt_bind_int64(st, 4, r->labels);
    lp_stmt_bind_int64(st, 5, r->iterations);
    bind_real_or_null(st, 6, r->objective);
    bind_text_or_null(st, 7, r->error ? lp_error_name(r->error) : NULL);
    bind_text_or_null(st, 8, r->error ? r->message : NULL);
    bind_int_or_null(st, 9, r->model_version);
    bind_int_or_null(st, 10, r->started_ms);
    bind_int_or_null(st, 11, r->finished_ms);
    lp_stmt_bind_int64(st, 12, r->evaluations);
    bind_real_or_null(st, 13, r->grad_norm);
    return exec_done(db, st);
}

int lp_registry_run_update(lp_store *s, const lp_run *r)
{
    return lp_engine_write(s->engine, run_update_fn, (void *)r, 1, 0);
}

struct run_query {
    int64_t id;
    size_t limit;
    lp_run *runs;
    size_t n;
};

static int run_query_fn(lp_conn *db, void *ctx)
{
    struct run_query *q = ctx;
    lp_stmt *st;
    int rc = q->id ? prep(db, RUN_COLS "WHERE r.id = ?1", &st)
                   : prep(db, RUN_COLS "ORDER BY r.id DESC LIMIT ?1", &st);
    if (rc != LP_OK)
        return rc;
    lp_stmt_bind_int64(st, 1, q->id ? q->id : (int64_t)q->limit);
    size_t cap = q->id ? 1 : q->limit;
    q->runs = calloc(cap ? cap : 1, sizeof *q->runs);
    if (q->runs == NULL) {
        lp_stmt_finalize(st);
        return LP_ENO_MEMORY;
    }
    while (q->n < cap && (rc = lp_stmt_step(st)) == LP_SQL_ROW)
        read_run(st, &q->runs[q->n++]);
    lp_stmt_finalize(st);
    return rc == LP_SQL_ROW || rc == LP_SQL_DONE || q->n == cap ? LP_OK : LP_ESTORAGE;
}

int lp_registry_run_get(lp_store *s, int64_t id, lp_run *out)
{
    struct run_query q = {.id = id};
    int rc = id > 0 ? lp_engine_read(s->engine, run_query_fn, &q) : LP_OK;
    if (rc == LP_OK && q.n == 0)
        rc = LP_EUNKNOWN_RUN;
    if (rc == LP_OK)
        *out = q.runs[0];
    free(q.runs);
    return rc;
}

int lp_registry_run_list(lp_store *s, size_t limit, lp_run **out, size_t *n)
{
    struct run_query q = {.limit = limit ? limit : 1};
    int rc = lp_engine_read(s->engine, run_query_fn, &q);
    if (rc != LP_OK) {
        free(q.runs);
        q.runs = NULL;
        q.n = 0;
    }
    *out = q.runs;
    *n = q.n;
    return rc;
}

static int runs_interrupted_fn(lp_conn *db, void *ctx)
{
    lp_stmt *st;
    if (prep(db,
             "UPDATE training_runs SET status = 'failed', error = 'training_failed', "
             "message = 'interrupted: the server stopped during the run', finished_ms = ?1 "
             "WHERE status NOT IN ('succeeded', 'failed', 'cancelled')",
             &st) != LP_OK)
        return LP_ESTORAGE;
    lp_stmt_bind_int64(st, 1, lp_now_ms());
    return exec_done(db, st);
}

int lp_registry_runs_interrupted(lp_store *s)
{
    return lp_engine_write(s->engine, runs_interrupted_fn, NULL, 1, 0);
}

/* ---- training curves ---- */

struct curve_append {
    int64_t run, thin_stride;
    const lp_curve_point *pts;
    size_t n;
};

static int curve_append_fn(lp_conn *db, void *ctx)
{
    const struct curve_append *a = ctx;
    lp_stmt *st;
    if (a->thin_stride > 1) {
        if (prep(db, "DELETE FROM training_curve WHERE run = ?1 AND seq % ?2 != 0", &st) != LP_OK)
            return LP_ESTORAGE;
        lp_stmt_bind_int64(st, 1, a->run);
        lp_stmt_bind_int64(st, 2, a->thin_stride);
        if (exec_done(db, st) != LP_OK)
            return LP_ESTORAGE;
    }
    if (a->n == 0)
        return LP_OK;
    if (prep(db,
             "INSERT INTO training_curve (run, seq, iteration, evaluations, objective, grad_norm, "
             "t_ms) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)",
             &st) != LP_OK)
        return LP_ESTORAGE;
    int rc = LP_SQL_DONE;
    for (size_t k = 0; k < a->n && rc == LP_SQL_DONE; k++) {
        const lp_curve_point *p = &a->pts[k];
        lp_stmt_reset(st);
        lp_stmt_bind_int64(st, 1, a->run);
        lp_stmt_bind_int64(st, 2, p->seq);
        lp_stmt_bind_int64(st, 3, p->iteration);
        lp_stmt_bind_int64(st, 4, p->evaluations);
        lp_stmt_bind_double(st, 5, p->objective);
        bind_real_or_null(st, 6, p->grad_norm);
        lp_stmt_bind_int64(st, 7, p->t_ms);
        if ((rc = lp_stmt_step(st)) != LP_SQL_DONE)
            fprintf(stderr, "registry: %s\n", lp_conn_errmsg(db));
    }
    lp_stmt_finalize(st);
    return rc == LP_SQL_DONE ? LP_OK : LP_ESTORAGE;
}

int lp_registry_curve_append(lp_store *s, int64_t run, int64_t thin_stride,
                             const lp_curve_point *pts, size_t n)
{
    for (size_t k = 0; k < n; k++)
        if (!isfinite(pts[k].objective))
            return LP_EINVALID_ARGUMENT;
    struct curve_append a = {.run = run, .thin_stride = thin_stride, .pts = pts, .n = n};
    return lp_engine_write(s->engine, curve_append_fn, &a, n ? n : 1, 0);
}

struct curve_query {
    int64_t run;
    lp_curve_point *pts;
    size_t n, cap;
};

static int curve_get_fn(lp_conn *db, void *ctx)
{
    struct curve_query *q = ctx;
    lp_stmt *st;
    if (prep(db,
             "SELECT seq, iteration, evaluations, objective, grad_norm, t_ms FROM training_curve "
             "WHERE run = ?1 ORDER BY seq",
             &st) != LP_OK)
        return LP_ESTORAGE;
    lp_stmt_bind_int64(st, 1, q->run);
    int rc;
    while ((rc = lp_stmt_step(st)) == LP_SQL_ROW) {
        if (lp_array_reserve((void **)&q->pts, &q->cap, q->n, sizeof *q->pts, 64) != LP_OK) {
            lp_stmt_finalize(st);
            return LP_ENO_MEMORY;
        }
        lp_curve_point *p = &q->pts[q->n++];
        p->seq = lp_stmt_column_int64(st, 0);
        p->iteration = lp_stmt_column_int(st, 1);
        p->evaluations = lp_stmt_column_int(st, 2);
        p->objective = lp_stmt_column_double(st, 3);
        p->grad_norm = lp_stmt_column_is_null(st, 4) ? NAN : lp_stmt_column_double(st, 4);
        p->t_ms = lp_stmt_column_int64(st, 5);
    }
    lp_stmt_finalize(st);
    return rc == LP_SQL_DONE ? LP_OK : LP_ESTORAGE;
}

int lp_registry_curve_get(lp_store *s, int64_t run, lp_curve_point **out, size_t *n)
{
    struct curve_query q = {.run = run};
    int rc = lp_engine_read(s->engine, curve_get_fn, &q);
    if (rc != LP_OK) {
        free(q.pts);
        q.pts = NULL;
        q.n = 0;
    }
    *out = q.pts;
    *n = q.n;
    return rc;
}

/* ---- models ---- */

void lp_model_record_clear(lp_model_record *m)
{
    if (m == NULL)
        return;
    free(m->corruption);
    free(m->summary);
    free(m->model);
    m->corruption = NULL;
    m->n_corruption = 0;
    m->summary = m->model = NULL;
}

struct model_add {
    lp_model_record *m;
    int activate;
};

static int activation_insert(lp_conn *db, int64_t version)
{
    lp_stmt *st;
    if (prep(db, "INSERT INTO activations (version, activated_ms) VALUES (?1, ?2)", &st) != LP_OK)
        return LP_ESTORAGE;
    lp_stmt_bind_int64(st, 1, version);
    lp_stmt_bind_int64(st, 2, lp_now_ms());
    int rc = exec_done(db, st);
    return rc == LP_OK ? lp_coord_notify(db, LP_COORD_ACTIVATED) : rc;
}

/* The model's rows of model_corruption. */
static int model_corruption_insert(lp_conn *db, const lp_model_record *m)
{
    lp_stmt *st;
    if (prep(db, "INSERT INTO model_corruption (model, settings, anti_model) VALUES (?1, ?2, ?3)",
             &st) != LP_OK)
        return LP_ESTORAGE;
    int rc = LP_SQL_DONE;
    for (size_t k = 0; k < m->n_corruption && rc == LP_SQL_DONE; k++) {
        const lp_corruption *c = &m->corruption[k];
        lp_stmt_reset(st);
        lp_stmt_bind_int64(st, 1, m->version);
        lp_stmt_bind_int64(st, 2, c->id);
        bind_int_or_null(st, 3, c->strategy == LP_ADV_ANTI ? m->anti_model : 0);
        if ((rc = lp_stmt_step(st)) != LP_SQL_DONE)
            lp_engine_fail(db, "registry write");
    }
    lp_stmt_finalize(st);
    return rc == LP_SQL_DONE ? LP_OK : LP_ESTORAGE;
}

/* The model's row of model_privacy (none when the record is unknown). */
static int model_privacy_insert(lp_conn *db, const lp_model_record *m)
{
    const lp_label_privacy *p = &m->privacy;
    if (!p->known)
        return LP_OK;
    lp_stmt *st;
    if (prep(db,
             "INSERT INTO model_privacy (model, labels, annotators, unprivatized, epsilon_min, "
             "epsilon_max, epsilon_per_annotator, mechanism, release_epsilon, release_delta) "
             "VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10)",
             &st) != LP_OK)
        return LP_ESTORAGE;
    lp_stmt_bind_int64(st, 1, m->version);
    lp_stmt_bind_int64(st, 2, p->labels);
    lp_stmt_bind_int64(st, 3, p->annotators);
    lp_stmt_bind_int64(st, 4, p->unprivatized);
    bind_real_or_null(st, 5, p->epsilon_min);
    bind_real_or_null(st, 6, p->epsilon_max);
    bind_real_or_null(st, 7, p->epsilon_per_annotator); /* NULL: infinite */
    if (m->mechanism[0] != '\0') {
        lp_stmt_bind_text(st, 8, m->mechanism, -1);
        lp_stmt_bind_double(st, 9, m->release_epsilon);
        lp_stmt_bind_double(st, 10, m->release_delta);
    }
    return exec_done(db, st);
}

/* In the model's transaction: LP_ERELEASE_BUDGET_EXHAUSTED when its release
 * does not fit what its campaign has left (budget.h). */
static int release_budget_check(lp_conn *db, const lp_model_record *m)
{
    if (m->mechanism[0] == '\0')
        return LP_OK;
    if (!m->privacy.known || m->campaign == 0)
        return LP_EINVALID_ARGUMENT; /* a release is of one campaign, recorded */
    lp_stmt *st;
    /* Several servers (PostgreSQL): the campaign's row locked until commit,
     * so that releases of one campaign are checked and recorded one at a
     * time; the sums below, a statement of their own, then see every
     * release committed before the lock was granted. SQLite has one writer. */
    if (lp_conn_dialect(db) == LP_SQL_POSTGRESQL) {
        if (prep(db, "SELECT id FROM campaigns WHERE id = ?1 FOR UPDATE", &st) != LP_OK)
            return LP_ESTORAGE;
        lp_stmt_bind_int64(st, 1, m->campaign);
        int step = lp_stmt_step(st);
        lp_stmt_finalize(st);
        if (step == LP_SQL_DONE)
            return LP_EUNKNOWN_CAMPAIGN;
        if (step != LP_SQL_ROW)
            return lp_engine_fail(db, "release budget lock");
    }
    if (prep(db,
             "SELECT coalesce(c.release_epsilon, 0), coalesce(c.release_delta, 0), "
             "(SELECT coalesce(sum(p.release_epsilon), 0) FROM model_privacy p JOIN models x ON "
             "x.version = p.model WHERE x.campaign = c.id AND p.mechanism IS NOT NULL), "
             "(SELECT coalesce(sum(p.release_delta), 0) FROM model_privacy p JOIN models x ON "
             "x.version = p.model WHERE x.campaign = c.id AND p.mechanism IS NOT NULL) "
             "FROM campaigns c WHERE c.id = ?1",
             &st) != LP_OK)
        return LP_ESTORAGE;
    lp_stmt_bind_int64(st, 1, m->campaign);
    int rc = LP_EUNKNOWN_CAMPAIGN;
    if (lp_stmt_step(st) == LP_SQL_ROW)
        rc = lp_budget_check(lp_stmt_column_double(st, 0), lp_stmt_column_double(st, 1),
                             lp_stmt_column_double(st, 2), lp_stmt_column_double(st, 3),
                             m->release_epsilon, m->release_delta);
    lp_stmt_finalize(st);
    return rc;
}

static int model_add_fn(lp_conn *db, void *ctx)
{
    struct model_add *a = ctx;
    lp_model_record *m = a->m;
    lp_stmt *st;
    int rc = release_budget_check(db, m);
    if (rc != LP_OK)
        return rc;
    if (prep(db,
             "INSERT INTO models (run, loss, campaign, cutoff, labels, duration_ms, model, "
             "created_ms, summary, features, dim, text_dim, text_bigrams, text_cross_prompt, "
             "text_cross_max, text_length) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, "
             "?12, ?13, ?14, ?15, ?16) RETURNING version",
             &st) != LP_OK)
        return LP_ESTORAGE;
    int text = strcmp(m->features, "text") == 0;
    lp_stmt_bind_int64(st, 1, m->run);
    lp_stmt_bind_text(st, 2, m->loss, -1);
    bind_int_or_null(st, 3, m->campaign);
    lp_stmt_bind_int64(st, 4, m->cutoff);
    lp_stmt_bind_int64(st, 5, m->labels);
    lp_stmt_bind_int64(st, 6, m->duration_ms);
    lp_stmt_bind_text(st, 7, m->model, -1);
    lp_stmt_bind_int64(st, 8, m->created_ms);
    lp_stmt_bind_text(st, 9, m->summary ? m->summary : "{}", -1);
    lp_stmt_bind_text(st, 10, text ? "text" : "dense", -1);
    lp_stmt_bind_int64(st, 11, m->dim);
    if (text) {
        lp_stmt_bind_int64(st, 12, m->text_dim);
        lp_stmt_bind_int64(st, 13, m->text_bigrams);
        lp_stmt_bind_int64(st, 14, m->text_cross_prompt);
        lp_stmt_bind_int64(st, 15, m->text_cross_max);
        lp_stmt_bind_int64(st, 16, m->text_length);
    }
    if ((rc = exec_id(db, st, &m->version)) != LP_OK)
        return rc;
    if ((rc = model_corruption_insert(db, m)) != LP_OK ||
        (rc = model_privacy_insert(db, m)) != LP_OK)
        return rc;
    return a->activate ? activation_insert(db, m->version) : LP_OK;
}

int lp_registry_model_add(lp_store *s, lp_model_record *m, int activate)
{
    if (m->model == NULL)
        return LP_EINVALID_ARGUMENT;
    m->created_ms = lp_now_ms();
    struct model_add a = {.m = m, .activate = activate};
    return lp_engine_write(s->engine, model_add_fn, &a, 1, 0);
}

#define MODEL_COLS                                                                                 \
    "SELECT m.version, m.run, m.loss, m.campaign, m.cutoff, m.labels, m.duration_ms, "             \
    "m.created_ms, m.summary, c.name, m.features, m.dim, m.text_dim, m.text_bigrams, "             \
    "m.text_cross_prompt, m.text_cross_max, m.text_length, p.model IS NOT NULL, p.labels, "        \
    "p.annotators, p.unprivatized, p.epsilon_min, p.epsilon_max, "                                 \
    "p.epsilon_per_annotator, p.mechanism, p.release_epsilon, p.release_delta, " SETTINGS_COLS     \
    ", "
#define MODEL_FROM                                                                                 \
    " FROM models m LEFT JOIN campaigns c ON c.id = m.campaign "                                   \
    "LEFT JOIN training_runs r ON r.id = m.run LEFT JOIN train_settings ts ON ts.id = r.settings " \
    "LEFT JOIN model_privacy p ON p.model = m.version "
#define MODEL_PRIVACY_COL 17 /* the first privacy column of MODEL_COLS */
#define MODEL_RELEASE_COL (MODEL_PRIVACY_COL + 7)
#define MODEL_SETTINGS_COL (MODEL_RELEASE_COL + 3)

/* The privacy columns of MODEL_COLS; unknown when the model has no row. A
 * NULL epsilon_per_annotator is infinite, NULL bounds are "none". */
static void read_model_privacy(lp_stmt *st, lp_label_privacy *p)
{
    int col = MODEL_PRIVACY_COL;
    memset(p, 0, sizeof *p);
    p->epsilon_min = p->epsilon_max = p->epsilon_per_annotator = NAN;
    if (!lp_stmt_column_int(st, col))
        return;
    p->known = 1;
    p->labels = lp_stmt_column_int64(st, col + 1);
    p->annotators = lp_stmt_column_int64(st, col + 2);
    p->unprivatized = lp_stmt_column_int64(st, col + 3);
    if (!lp_stmt_column_is_null(st, col + 4))
        p->epsilon_min = lp_stmt_column_double(st, col + 4);
    if (!lp_stmt_column_is_null(st, col + 5))
        p->epsilon_max = lp_stmt_column_double(st, col + 5);
    p->epsilon_per_annotator =
        lp_stmt_column_is_null(st, col + 6) ? INFINITY : lp_stmt_column_double(st, col + 6);
}

static void read_model(lp_stmt *st, lp_model_record *m, int with_model)
{
    memset(m, 0, sizeof *m);
    m->version = lp_stmt_column_int64(st, 0);
    m->run = lp_stmt_column_int64(st, 1);
    copy_text(st, 2, m->loss, sizeof m->loss);
    m->campaign = lp_stmt_column_int64(st, 3);
    m->cutoff = lp_stmt_column_int64(st, 4);
    m->labels = lp_stmt_column_int64(st, 5);
    m->duration_ms = lp_stmt_column_int64(st, 6);
    m->created_ms = lp_stmt_column_int64(st, 7);
    m->summary = lp_engine_column_dup(st, 8);
    copy_text(st, 9, m->campaign_name, sizeof m->campaign_name);
    copy_text(st, 10, m->features, sizeof m->features);
    m->dim = lp_stmt_column_int64(st, 11);
    m->text_dim = lp_stmt_column_int64(st, 12);
    m->text_bigrams = lp_stmt_column_int(st, 13);
    m->text_cross_prompt = lp_stmt_column_int(st, 14);
    m->text_cross_max = lp_stmt_column_int(st, 15);
    m->text_length = lp_stmt_column_int(st, 16);
    read_model_privacy(st, &m->privacy);
    copy_text(st, MODEL_RELEASE_COL, m->mechanism, sizeof m->mechanism);
    m->privacy.released = m->privacy.known && m->mechanism[0] != '\0';
    m->release_epsilon = lp_stmt_column_double(st, MODEL_RELEASE_COL + 1);
    m->release_delta = lp_stmt_column_double(st, MODEL_RELEASE_COL + 2);
    read_settings(st, MODEL_SETTINGS_COL, &m->settings);
    if (with_model)
        m->model = lp_engine_column_dup(st, MODEL_SETTINGS_COL + SETTINGS_NCOLS);
}

/* Reads the model's corruption rows, in campaign order. */
static int read_model_corruption(lp_conn *db, lp_model_record *m)
{
    lp_stmt *st;
    if (prep(db,
             CORRUPTION_COLS_OF("mc.anti_model") "JOIN model_corruption mc ON mc.settings = s.id "
                                                 "WHERE mc.model = ?1 ORDER BY s.campaign, s.id",
             &st) != LP_OK)
        return LP_ESTORAGE;
    lp_stmt_bind_int64(st, 1, m->version);
    size_t cap = 0;
    int rc;
    while ((rc = lp_stmt_step(st)) == LP_SQL_ROW) {
        if (lp_array_reserve((void **)&m->corruption, &cap, m->n_corruption, sizeof *m->corruption,
                             2) != LP_OK) {
            lp_stmt_finalize(st);
            return LP_ENO_MEMORY;
        }
        read_corruption(st, &m->corruption[m->n_corruption++]);
        if (!lp_stmt_column_is_null(st, 8))
            m->anti_model = lp_stmt_column_int64(st, 8);
    }
    lp_stmt_finalize(st);
    return rc == LP_SQL_DONE ? LP_OK : LP_ESTORAGE;
}

struct model_query {
    int64_t version; /* 0: list */
    lp_model_record *models;
    size_t n, cap;
};

static int model_query_fn(lp_conn *db, void *ctx)
{
    struct model_query *q = ctx;
    lp_stmt *st;
    int rc = q->version ? prep(db, MODEL_COLS "m.model" MODEL_FROM "WHERE m.version = ?1", &st)
                        : prep(db, MODEL_COLS "NULL" MODEL_FROM "ORDER BY m.version DESC", &st);
    if (rc != LP_OK)
        return rc;
    if (q->version)
        lp_stmt_bind_int64(st, 1, q->version);
    while ((rc = lp_stmt_step(st)) == LP_SQL_ROW) {
        if (lp_array_reserve((void **)&q->models, &q->cap, q->n, sizeof *q->models, 8) != LP_OK) {
            lp_stmt_finalize(st);
            return LP_ENO_MEMORY;
        }
        read_model(st, &q->models[q->n++], q->version != 0);
    }
    lp_stmt_finalize(st);
    if (rc != LP_SQL_DONE)
        return LP_ESTORAGE;
    for (size_t i = 0; i < q->n; i++)
        if ((rc = read_model_corruption(db, &q->models[i])) != LP_OK)
            return rc;
    return LP_OK;
}

static void model_query_free(struct model_query *q)
{
    for (size_t i = 0; i < q->n; i++)
        lp_model_record_clear(&q->models[i]);
    free(q->models);
}

int lp_registry_model_get(lp_store *s, int64_t version, lp_model_record *out)
{
    struct model_query q = {.version = version};
    int rc = version > 0 ? lp_engine_read(s->engine, model_query_fn, &q) : LP_OK;
    if (rc == LP_OK && (q.n == 0 || q.models[0].model == NULL))
        rc = LP_EUNKNOWN_MODEL;
    if (rc != LP_OK) {
        model_query_free(&q);
        return rc;
    }
    *out = q.models[0];
    free(q.models);
    return LP_OK;
}

int lp_registry_model_list(lp_store *s, lp_model_record **out, size_t *n)
{
    struct model_query q = {0};
    int rc = lp_engine_read(s->engine, model_query_fn, &q);
    if (rc != LP_OK) {
        model_query_free(&q);
        q.models = NULL;
        q.n = 0;
    }
    *out = q.models;
    *n = q.n;
    return rc;
}

static int activate_fn(lp_conn *db, void *ctx)
{
    int64_t version = *(int64_t *)ctx;
    lp_stmt *st;
    if (prep(db, "SELECT 1 FROM models WHERE version = ?1", &st) != LP_OK)
        return LP_ESTORAGE;
    lp_stmt_bind_int64(st, 1, version);
    int rc = lp_stmt_step(st);
    lp_stmt_finalize(st);
    if (rc == LP_SQL_DONE)
        return LP_EUNKNOWN_MODEL;
    if (rc != LP_SQL_ROW)
        return LP_ESTORAGE;
    return activation_insert(db, version);
}

int lp_registry_activate(lp_store *s, int64_t version)
{
    return lp_engine_write(s->engine, activate_fn, &version, 1, 0);
}

/* Runs a one-integer query ("SELECT x ...", with has_arg ?1 bound to arg). */
struct scalar_query {
    const char *sql;
    int has_arg;
    int64_t arg;
    int64_t value;
};

static int scalar_fn(lp_conn *db, void *ctx)
{
    struct scalar_query *q = ctx;
    lp_stmt *st;
    if (prep(db, q->sql, &st) != LP_OK)
        return LP_ESTORAGE;
    if (q->has_arg)
        lp_stmt_bind_int64(st, 1, q->arg);
    int rc = lp_stmt_step(st);
    q->value = rc == LP_SQL_ROW ? lp_stmt_column_int64(st, 0) : 0;
    lp_stmt_finalize(st);
    return rc == LP_SQL_ROW || rc == LP_SQL_DONE ? LP_OK : LP_ESTORAGE;
}

int lp_registry_active_version(lp_store *s, int64_t *version)
{
    struct scalar_query q = {.sql = "SELECT version FROM activations ORDER BY id DESC LIMIT 1"};
    int rc = lp_engine_read(s->engine, scalar_fn, &q);
    *version = rc == LP_OK ? q.value : 0;
    return rc;
}

int lp_registry_max_label(lp_store *s, int64_t campaign, int64_t *out)
{
    struct scalar_query q = {
        .sql = campaign ? "SELECT COALESCE(MAX(l.id), 0) FROM labels l JOIN tasks t ON "
                          "t.id = l.task WHERE t.campaign = ?1"
                        : "SELECT COALESCE(MAX(id), 0) FROM labels",
        .has_arg = campaign != 0,
        .arg = campaign};
    int rc = lp_engine_read(s->engine, scalar_fn, &q);
    *out = rc == LP_OK ? q.value : 0;
    return rc;
}

/* ---- schedule ---- */

static int schedule_set_fn(lp_conn *db, void *ctx)
{
    const lp_schedule *sc = ctx;
    int64_t settings;
    int rc = settings_insert(db, &sc->settings, &settings);
    if (rc != LP_OK)
        return rc;
    lp_stmt *st;
    if (prep(db,
             "INSERT INTO retrain_schedule (interval_s, every_labels, settings, created_ms) "
             "VALUES (?1, ?2, ?3, ?4)",
             &st) != LP_OK)
        return LP_ESTORAGE;
    lp_stmt_bind_int64(st, 1, sc->interval_s);
    lp_stmt_bind_int64(st, 2, sc->every_labels);
    lp_stmt_bind_int64(st, 3, settings);
    lp_stmt_bind_int64(st, 4, lp_now_ms());
    return exec_done(db, st);
}

int lp_registry_schedule_set(lp_store *s, const lp_schedule *sc)
{
    return lp_engine_write(s->engine, schedule_set_fn, (void *)sc, 1, 0);
}

static int schedule_get_fn(lp_conn *db, void *ctx)
{
    lp_schedule *sc = ctx;
    lp_stmt *st;
    if (prep(db,
             "SELECT sc.interval_s, sc.every_labels, sc.settings IS NOT NULL, " SETTINGS_COLS
             " FROM retrain_schedule sc LEFT JOIN train_settings ts ON ts.id = sc.settings "
             "ORDER BY sc.id DESC LIMIT 1",
             &st) != LP_OK)
        return LP_ESTORAGE;
    int rc = lp_stmt_step(st);
    if (rc == LP_SQL_ROW) {
        sc->interval_s = lp_stmt_column_int64(st, 0);
        sc->every_labels = lp_stmt_column_int64(st, 1);
        sc->has_settings = lp_stmt_column_int(st, 2);
        read_settings(st, 3, &sc->settings);
    }
    lp_stmt_finalize(st);
    return rc == LP_SQL_ROW || rc == LP_SQL_DONE ? LP_OK : LP_ESTORAGE;
}

int lp_registry_schedule_get(lp_store *s, lp_schedule *out)
{
    memset(out, 0, sizeof *out);
    int rc = lp_engine_read(s->engine, schedule_get_fn, out);
    if (rc != LP_OK)
        memset(out, 0, sizeof *out);
    return rc;
}

/* ---- tasks ---- */

struct task_features {
    int64_t task;
    double *f0, *f1;
    size_t dim;
};

static double *blob_values(lp_stmt *st, int col, size_t dim)
{
    double *v = malloc(dim * sizeof *v);
    if (v != NULL)
        memcpy(v, lp_stmt_column_blob(st, col), dim * sizeof *v); /* may be unaligned */
    return v;
}

static int task_features_fn(lp_conn *db, void *ctx)
{
    struct task_features *q = ctx;
    lp_stmt *st;
    if (prep(db, "SELECT features0, features1 FROM tasks WHERE id = ?1", &st) != LP_OK)
        return LP_ESTORAGE;
    lp_stmt_bind_int64(st, 1, q->task);
    int rc = lp_stmt_step(st), out = LP_OK;
    if (rc == LP_SQL_DONE)
        out = LP_EUNKNOWN_TASK;
    else if (rc != LP_SQL_ROW)
        out = LP_ESTORAGE;
    else {
        size_t n0 = (size_t)lp_stmt_column_bytes(st, 0), n1 = (size_t)lp_stmt_column_bytes(st, 1);
        if (n0 == n1 && n0 >= sizeof(double)) { /* NULL features have 0 bytes */
            q->dim = n0 / sizeof(double);
            q->f0 = blob_values(st, 0, q->dim);
            q->f1 = blob_values(st, 1, q->dim);
            if (q->f0 == NULL || q->f1 == NULL)
                out = LP_ENO_MEMORY;
        }
    }
    lp_stmt_finalize(st);
    return out;
}

int lp_registry_task_features(lp_store *s, int64_t task, double **f0, double **f1, size_t *dim)
{
    struct task_features q = {.task = task};
    int rc = lp_engine_read(s->engine, task_features_fn, &q);
    if (rc != LP_OK) {
        free(q.f0);
        free(q.f1);
        q.f0 = q.f1 = NULL;
        q.dim = 0;
    }
    *f0 = q.f0;
    *f1 = q.f1;
    *dim = q.dim;
    return rc;
}
