/* tokens.c — the operator tokens repository and its live set. See tokens.h. */
#include "tokens.h"

#include "buf.h"
#include "clock.h"
#include "db.h"
#include "error.h"

#include <pthread.h>
#include <sodium.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ------------------------------------------------------------------ */
/* the live set                                                        */

struct live_token {
    int64_t id;
    uint8_t hash[LP_HASH_BYTES];
    unsigned scopes;
};

struct lp_tokens {
    pthread_mutex_t lock;
    struct live_token *live; /* valid: the live tokens as committed */
    size_t n;
    int valid;
    uint64_t gen;      /* bumped by every committed token write */
    int64_t loaded_ns; /* when the copy was read (monotonic) */
};

/* A miss on a copy older than this reads the table again: another process
 * may have added a token (ldpref-server --new-operator-token while the
 * server runs). Another server's revocations drop the copy (coord.c). */
#define LIVE_REFRESH_NS (1000 * (int64_t)1000000)

struct lp_tokens *lp_tokens_new(void)
{
    struct lp_tokens *t = calloc(1, sizeof *t);
    if (t != NULL)
        pthread_mutex_init(&t->lock, NULL);
    return t;
}

void lp_tokens_free(struct lp_tokens *t)
{
    if (t == NULL)
        return;
    free(t->live);
    pthread_mutex_destroy(&t->lock);
    free(t);
}

/* After a token write committed: the copy is stale. */
static void live_drop(struct lp_tokens *t)
{
    pthread_mutex_lock(&t->lock);
    t->gen++;
    t->valid = 0;
    free(t->live);
    t->live = NULL;
    t->n = 0;
    pthread_mutex_unlock(&t->lock);
}

void lp_tokens_drop(struct lp_tokens *t)
{
    live_drop(t);
}

static const char SQL_LIVE[] =
    "SELECT id, hash, scopes FROM operator_tokens WHERE revoked_ms IS NULL ORDER BY id";

/* Every row of sql as an array of elem-byte elements, each filled by read
 * from the current row: *out caller-owned (free()). */
struct rows_query {
    lp_engine *engine;
    const char *sql;
    size_t elem;
    void (*read)(lp_stmt *st, void *out);
    void *v;
    size_t n;
};

static int rows_fn(lp_conn *db, void *ctx)
{
    struct rows_query *q = ctx;
    lp_stmt *st = lp_engine_stmt(q->engine, db, q->sql);
    if (st == NULL)
        return LP_ESTORAGE;
    int rc = LP_OK, step;
    size_t cap = 0;
    while ((step = lp_stmt_step(st)) == LP_SQL_ROW) {
        if ((rc = lp_array_reserve(&q->v, &cap, q->n, q->elem, 8)) != LP_OK)
            break;
        q->read(st, (char *)q->v + q->n++ * q->elem);
    }
    if (rc == LP_OK && step != LP_SQL_DONE)
        rc = lp_engine_fail(db, "operator tokens");
    lp_stmt_reset(st);
    return rc;
}

static int rows_read(lp_store *s, const char *sql, size_t elem,
                     void (*read)(lp_stmt *st, void *out), void **out, size_t *n)
{
    struct rows_query q = {.engine = s->engine, .sql = sql, .elem = elem, .read = read};
    int rc = lp_engine_read(s->engine, rows_fn, &q);
    if (rc != LP_OK) {
        free(q.v);
        q.v = NULL;
        q.n = 0;
    }
    *out = q.v;
    *n = q.n;
    return rc;
}

/* A row of SQL_LIVE (the hash column is 32 bytes: a CHECK of the table). */
static void read_live(lp_stmt *st, void *out)
{
    struct live_token *e = out;
    e->id = lp_stmt_column_int64(st, 0);
    memcpy(e->hash, lp_stmt_column_blob(st, 1), LP_HASH_BYTES);
    e->scopes = (unsigned)lp_stmt_column_int(st, 2);
}

/* What a look-up in the live set finds. */
struct live_find {
    const uint8_t *hash; /* match by hash, or else */
    int64_t id;          /* by id */
    int64_t found_id;
    unsigned scopes;
    int found;
};

/* Every entry is compared, whichever matches: no early exit. */
static void live_search(const struct live_token *v, size_t n, struct live_find *f)
{
    for (size_t i = 0; i < n; i++) {
        int same = f->hash != NULL ? sodium_memcmp(v[i].hash, f->hash, LP_HASH_BYTES) == 0
                                   : v[i].id == f->id;
        f->found_id = same ? v[i].id : f->found_id;
        f->scopes = same ? v[i].scopes : f->scopes;
        f->found |= same;
    }
}

/* Runs f over the live set, reading it from the database when the copy is
 * stale; a copy read is kept only if no write committed meanwhile. */
static int live_lookup(lp_store *s, struct live_find *f)
{
    struct lp_tokens *t = s->tokens;
    pthread_mutex_lock(&t->lock);
    if (t->valid) {
        live_search(t->live, t->n, f);
        if (f->found || lp_mono_ns() - t->loaded_ns < LIVE_REFRESH_NS) {
            pthread_mutex_unlock(&t->lock);
            return LP_OK;
        }
        t->valid = 0; /* a miss on an old copy: read the table again */
        free(t->live);
        t->live = NULL;
        t->n = 0;
    }
    uint64_t gen = t->gen;
    pthread_mutex_unlock(&t->lock);
    void *v = NULL;
    size_t n = 0;
    int rc = rows_read(s, SQL_LIVE, sizeof(struct live_token), read_live, &v, &n);
    if (rc != LP_OK)
        return rc;
    live_search(v, n, f);
    pthread_mutex_lock(&t->lock);
    if (!t->valid && t->gen == gen) {
        t->live = v;
        t->n = n;
        t->valid = 1;
        t->loaded_ns = lp_mono_ns();
        v = NULL;
    }
    pthread_mutex_unlock(&t->lock);
    free(v);
    return LP_OK;
}

int lp_store_op_token_match(lp_store *s, const uint8_t hash[LP_HASH_BYTES], int64_t *id,
                            unsigned *scopes)
{
    struct live_find f = {.hash = hash};
    int rc = live_lookup(s, &f);
    if (rc != LP_OK)
        return rc;
    if (!f.found)
        return LP_EUNAUTHORIZED;
    *id = f.found_id;
    *scopes = f.scopes;
    return LP_OK;
}

int lp_store_op_token_live(lp_store *s, int64_t id, unsigned *scopes)
{
    struct live_find f = {.id = id};
    int rc = live_lookup(s, &f);
    if (rc != LP_OK)
        return rc;
    if (!f.found)
        return LP_EUNAUTHORIZED;
    *scopes = f.scopes;
    return LP_OK;
}

/* ------------------------------------------------------------------ */
/* rows                                                                */

#define ROW_COLUMNS "id, name, scopes, created_ms, revoked_ms"

static const char SQL_INSERT[] =
    "INSERT INTO operator_tokens (hash, name, scopes, created_ms) VALUES (?1, ?2, ?3, ?4) "
    "RETURNING id";
static const char SQL_GET[] = "SELECT " ROW_COLUMNS " FROM operator_tokens WHERE id = ?1";
static const char SQL_LIST[] = "SELECT " ROW_COLUMNS " FROM operator_tokens ORDER BY id";
static const char SQL_COUNT[] = "SELECT count(*) FROM operator_tokens";
static const char SQL_OTHERS_HOLDING[] =
    "SELECT count(*) FROM operator_tokens "
    "WHERE revoked_ms IS NULL AND id <> ?1 AND (scopes & ?2) = ?2";
/* PostgreSQL: the live holders of the scopes locked until commit, in id
 * order (see revoke_fn) */
static const char SQL_LOCK_HOLDERS[] = "SELECT id FROM operator_tokens WHERE revoked_ms IS NULL "
                                       "AND (scopes & ?1) = ?1 ORDER BY id FOR UPDATE";
static const char SQL_REVOKE[] =
    "UPDATE operator_tokens SET revoked_ms = ?2 WHERE id = ?1 AND revoked_ms IS NULL";

static void read_row(lp_stmt *st, void *row)
{
    lp_op_token *out = row;
    memset(out, 0, sizeof *out);
    out->id = lp_stmt_column_int64(st, 0);
    snprintf(out->name, sizeof out->name, "%s", lp_stmt_column_text(st, 1));
    out->scopes = (unsigned)lp_stmt_column_int(st, 2);
    out->created_ms = lp_stmt_column_int64(st, 3);
    out->revoked_ms = lp_stmt_column_int64(st, 4); /* NULL reads as 0 */
}

/* The row of live token id into *out: LP_OK, or LP_EUNKNOWN_TOKEN (none,
 * or revoked). */
static int get_live_row(lp_engine *e, lp_conn *db, int64_t id, lp_op_token *out)
{
    lp_stmt *st = lp_engine_stmt(e, db, SQL_GET);
    if (st == NULL)
        return LP_ESTORAGE;
    lp_stmt_bind_int64(st, 1, id);
    int step = lp_stmt_step(st), rc = LP_OK;
    if (step == LP_SQL_ROW)
        read_row(st, out);
    else
        rc = step == LP_SQL_DONE ? LP_EUNKNOWN_TOKEN : lp_engine_fail(db, "token lookup");
    lp_stmt_reset(st);
    return rc == LP_OK && out->revoked_ms != 0 ? LP_EUNKNOWN_TOKEN : rc;
}

static int insert_row(lp_engine *e, lp_conn *db, const uint8_t *hash, lp_op_token *row)
{
    lp_stmt *st = lp_engine_stmt(e, db, SQL_INSERT);
    if (st == NULL)
        return LP_ESTORAGE;
    lp_stmt_bind_blob(st, 1, hash, LP_HASH_BYTES);
    lp_stmt_bind_text(st, 2, row->name, -1);
    lp_stmt_bind_int64(st, 3, (int)row->scopes);
    lp_stmt_bind_int64(st, 4, row->created_ms);
    if (lp_engine_step_id(st, &row->id) != LP_SQL_DONE)
        return lp_engine_fail(db, "operator token insert");
    row->revoked_ms = 0;
    return LP_OK;
}

static int revoke_row(lp_engine *e, lp_conn *db, int64_t id, int64_t now_ms)
{
    lp_stmt *st = lp_engine_stmt(e, db, SQL_REVOKE);
    if (st == NULL)
        return LP_ESTORAGE;
    lp_stmt_bind_int64(st, 1, id);
    lp_stmt_bind_int64(st, 2, now_ms);
    int step = lp_stmt_step(st);
    lp_stmt_reset(st);
    if (step != LP_SQL_DONE)
        return lp_engine_fail(db, "operator token revoke");
    return lp_conn_changes(db) == 1 ? lp_coord_notify(db, LP_COORD_REVOKED) : LP_EUNKNOWN_TOKEN;
}

/* ------------------------------------------------------------------ */
/* writes                                                              */

struct token_job {
    lp_engine *engine;
    int64_t id; /* the token acted on (revoke, rotate) */
    const uint8_t *hash;
    unsigned keep;
    int64_t now_ms;
    lp_op_token row; /* add: in and out; revoke, rotate: out */
};

static int add_fn(lp_conn *db, void *ctx)
{
    struct token_job *j = ctx;
    return insert_row(j->engine, db, j->hash, &j->row);
}

/* After a committed write: the live copy is stale; give the row. */
static int write_done(lp_store *s, int rc, const struct token_job *j, lp_op_token *out)
{
    if (rc == LP_OK || rc == LP_ESTORAGE)
        live_drop(s->tokens); /* a failed commit may still have been durable */
    if (rc == LP_OK && out != NULL)
        *out = j->row;
    return rc;
}

int lp_store_op_token_add(lp_store *s, const uint8_t hash[LP_HASH_BYTES], const char *name,
                          unsigned scopes, int64_t now_ms, lp_op_token *out)
{
    size_t len = name ? strlen(name) : 0;
    if (len == 0 || len >= LP_TOKEN_NAME_MAX || scopes > 7)
        return LP_EINVALID_ARGUMENT;
    struct token_job j = {
        .engine = s->engine, .hash = hash, .row = {.scopes = scopes, .created_ms = now_ms}};
    memcpy(j.row.name, name, len + 1);
    return write_done(s, lp_engine_write(s->engine, add_fn, &j, 1, 0), &j, out);
}

static int revoke_fn(lp_conn *db, void *ctx)
{
    struct token_job *j = ctx;
    int rc = get_live_row(j->engine, db, j->id, &j->row);
    if (rc != LP_OK)
        return rc;
    if (j->keep != 0 && (j->row.scopes & j->keep) == j->keep) {
        lp_stmt *st;
        /* Several servers (PostgreSQL): the holders locked first, so that
         * two servers revoking the last two holders at once do not both
         * count the other; the count, a statement of its own, then sees
         * what the other committed. SQLite has one writer. */
        if (lp_conn_dialect(db) == LP_SQL_POSTGRESQL) {
            if ((st = lp_engine_stmt(j->engine, db, SQL_LOCK_HOLDERS)) == NULL)
                return LP_ESTORAGE;
            lp_stmt_bind_int64(st, 1, (int)j->keep);
            int step;
            while ((step = lp_stmt_step(st)) == LP_SQL_ROW) {
            }
            lp_stmt_reset(st);
            if (step != LP_SQL_DONE)
                return lp_engine_fail(db, "operator token lock");
        }
        if ((st = lp_engine_stmt(j->engine, db, SQL_OTHERS_HOLDING)) == NULL)
            return LP_ESTORAGE;
        lp_stmt_bind_int64(st, 1, j->id);
        lp_stmt_bind_int64(st, 2, (int)j->keep);
        int step = lp_stmt_step(st);
        int64_t others = step == LP_SQL_ROW ? lp_stmt_column_int64(st, 0) : -1;
        lp_stmt_reset(st);
        if (others < 0)
            return lp_engine_fail(db, "operator token count");
        if (others == 0)
            return LP_ELAST_ADMIN_TOKEN;
    }
    if ((rc = revoke_row(j->engine, db, j->id, j->now_ms)) == LP_OK)
        j->row.revoked_ms = j->now_ms;
    return rc;
}

int lp_store_op_token_revoke(lp_store *s, int64_t id, unsigned keep, int64_t now_ms,
                             lp_op_token *out)
{
    struct token_job j = {.engine = s->engine, .id = id, .keep = keep, .now_ms = now_ms};
    return write_done(s, lp_engine_write(s->engine, revoke_fn, &j, 1, 0), &j, out);
}

static int rotate_fn(lp_conn *db, void *ctx)
{
    struct token_job *j = ctx;
    int rc = get_live_row(j->engine, db, j->id, &j->row);
    if (rc != LP_OK)
        return rc;
    if ((rc = revoke_row(j->engine, db, j->id, j->now_ms)) != LP_OK)
        return rc;
    j->row.created_ms = j->now_ms;
    return insert_row(j->engine, db, j->hash, &j->row);
}

int lp_store_op_token_rotate(lp_store *s, int64_t id, const uint8_t new_hash[LP_HASH_BYTES],
                             int64_t now_ms, lp_op_token *out)
{
    struct token_job j = {.engine = s->engine, .id = id, .hash = new_hash, .now_ms = now_ms};
    return write_done(s, lp_engine_write(s->engine, rotate_fn, &j, 1, 0), &j, out);
}

/* ------------------------------------------------------------------ */
/* reads                                                               */

int lp_store_op_tokens_list(lp_store *s, lp_op_token **out, size_t *n)
{
    void *v = NULL;
    int rc = rows_read(s, SQL_LIST, sizeof(lp_op_token), read_row, &v, n);
    *out = v;
    return rc;
}

struct count_query {
    lp_engine *engine;
    int64_t n;
};

static int count_fn(lp_conn *db, void *ctx)
{
    struct count_query *q = ctx;
    lp_stmt *st = lp_engine_stmt(q->engine, db, SQL_COUNT);
    if (st == NULL)
        return LP_ESTORAGE;
    int step = lp_stmt_step(st);
    q->n = step == LP_SQL_ROW ? lp_stmt_column_int64(st, 0) : 0;
    int rc = step == LP_SQL_ROW ? LP_OK : lp_engine_fail(db, "operator token count");
    lp_stmt_reset(st);
    return rc;
}

int lp_store_op_tokens_count(lp_store *s, int64_t *n)
{
    struct count_query q = {.engine = s->engine};
    int rc = lp_engine_read(s->engine, count_fn, &q);
    *n = q.n;
    return rc;
}
