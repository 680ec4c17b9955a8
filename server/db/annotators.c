/*
 * annotators.c — the annotators repository and its key cache. See
 * annotators.h.
 *
 * The key cache maps public keys to committed annotator rows. A row read
 * from the database is inserted only if no revocation committed since the
 * read began (the generation counter), so the cache never resurrects a
 * revoked key; a revocation marks the cached entry once it has committed,
 * and one on another server empties the cache (lp_keys_drop, coord.c).
 */
#include "annotators.h"

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
/* key cache                                                           */

#define KC_BUCKETS 65536u
#define KC_MAX 1000000u

struct kc_entry {
    uint8_t key[LP_KEY_BYTES];
    lp_annotator a;
    struct kc_entry *next;
};

struct lp_keys {
    pthread_rwlock_t lock;
    struct kc_entry **bucket;
    size_t count;
    uint64_t gen; /* bumped by every revocation */
};

struct lp_keys *lp_keys_new(void)
{
    struct lp_keys *k = calloc(1, sizeof *k);
    if (k == NULL)
        return NULL;
    k->bucket = calloc(KC_BUCKETS, sizeof *k->bucket);
    if (k->bucket == NULL) {
        free(k);
        return NULL;
    }
    pthread_rwlock_init(&k->lock, NULL);
    return k;
}

void lp_keys_free(struct lp_keys *k)
{
    if (k == NULL)
        return;
    for (size_t b = 0; b < KC_BUCKETS; b++)
        for (struct kc_entry *e = k->bucket[b], *n; e != NULL; e = n) {
            n = e->next;
            free(e);
        }
    free(k->bucket);
    pthread_rwlock_destroy(&k->lock);
    free(k);
}

static uint32_t kc_hash(const uint8_t key[LP_KEY_BYTES])
{
    uint32_t h;
    memcpy(&h, key, sizeof h);
    return h % KC_BUCKETS;
}

void lp_keys_drop(struct lp_keys *k)
{
    pthread_rwlock_wrlock(&k->lock);
    k->gen++;
    for (size_t b = 0; b < KC_BUCKETS; b++)
        for (struct kc_entry *e = k->bucket[b], *n; e != NULL; e = n) {
            n = e->next;
            free(e);
        }
    memset(k->bucket, 0, KC_BUCKETS * sizeof *k->bucket);
    k->count = 0;
    pthread_rwlock_unlock(&k->lock);
}

static int kc_get(struct lp_keys *k, const uint8_t key[LP_KEY_BYTES], lp_annotator *out,
                  uint64_t *gen)
{
    int found = 0;
    pthread_rwlock_rdlock(&k->lock);
    for (struct kc_entry *e = k->bucket[kc_hash(key)]; e != NULL; e = e->next)
        if (memcmp(e->key, key, LP_KEY_BYTES) == 0) {
            *out = e->a;
            found = 1;
            break;
        }
    *gen = k->gen;
    pthread_rwlock_unlock(&k->lock);
    return found;
}

/* Inserts a row read from the database unless a revocation happened since
 * the read started (gen changed): then the row may be stale; skip. */
static void kc_put(struct lp_keys *k, const uint8_t key[LP_KEY_BYTES], const lp_annotator *a,
                   uint64_t gen)
{
    pthread_rwlock_wrlock(&k->lock);
    uint32_t h = kc_hash(key);
    int present = 0;
    for (struct kc_entry *e = k->bucket[h]; e != NULL && !present; e = e->next)
        present = memcmp(e->key, key, LP_KEY_BYTES) == 0;
    if (!present && gen == k->gen && k->count < KC_MAX) {
        struct kc_entry *e = malloc(sizeof *e);
        if (e != NULL) {
            memcpy(e->key, key, LP_KEY_BYTES);
            e->a = *a;
            e->next = k->bucket[h];
            k->bucket[h] = e;
            k->count++;
        }
    }
    pthread_rwlock_unlock(&k->lock);
}

static void kc_revoke(struct lp_keys *k, const uint8_t key[LP_KEY_BYTES])
{
    pthread_rwlock_wrlock(&k->lock);
    k->gen++;
    for (struct kc_entry *e = k->bucket[kc_hash(key)]; e != NULL; e = e->next)
        if (memcmp(e->key, key, LP_KEY_BYTES) == 0)
            e->a.revoked = 1;
    pthread_rwlock_unlock(&k->lock);
}

/* ------------------------------------------------------------------ */
/* tokens                                                              */

static const char SQL_ETOKEN_INSERT[] =
    "INSERT INTO enrollment_tokens (hash, campaign, created_ms) "
    "VALUES (?1, ?2, ?3)";

struct etokens_job {
    lp_engine *engine;
    int64_t campaign;
    const uint8_t *hashes;
    size_t n;
};

static int etokens_add_fn(lp_conn *db, void *ctx)
{
    struct etokens_job *j = ctx;
    for (size_t i = 0; i < j->n; i++) {
        lp_stmt *st = lp_engine_stmt(j->engine, db, SQL_ETOKEN_INSERT);
        if (st == NULL)
            return LP_ESTORAGE;
        lp_stmt_bind_blob(st, 1, j->hashes + i * LP_HASH_BYTES, LP_HASH_BYTES);
        lp_stmt_bind_int64(st, 2, j->campaign);
        lp_stmt_bind_int64(st, 3, lp_now_ms());
        int step = lp_stmt_step(st);
        if (step != LP_SQL_DONE)
            return step == LP_SQL_FOREIGN_KEY ? LP_EUNKNOWN_CAMPAIGN
                                              : lp_engine_fail(db, "enrollment token insert");
        lp_stmt_reset(st);
    }
    return LP_OK;
}

int lp_store_enroll_tokens_add(lp_store *s, int64_t campaign, const uint8_t *hashes, size_t n)
{
    struct etokens_job j = {s->engine, campaign, hashes, n};
    return lp_engine_write(s->engine, etokens_add_fn, &j, n, 0);
}

/* ------------------------------------------------------------------ */
/* annotators                                                          */

static const char SQL_BY_KEY[] =
    "SELECT id, campaign, revoked, pseudonym FROM annotators WHERE public_key = ?1";
static const char SQL_KEY_ID[] = "SELECT id FROM annotators WHERE public_key = ?1";
static const char SQL_ETOKEN_GET[] =
    "SELECT campaign, used_by FROM enrollment_tokens WHERE hash = ?1";
static const char SQL_ANNOT_INSERT[] =
    "INSERT INTO annotators (public_key, pseudonym, campaign, enrolled_ms) "
    "VALUES (?1, ?2, ?3, ?4) RETURNING id";
static const char SQL_ETOKEN_USE[] = "UPDATE enrollment_tokens SET used_by = ?2 "
                                     "WHERE hash = ?1 AND used_by IS NULL";
static const char SQL_REVOKE[] = "UPDATE annotators SET revoked = 1 WHERE public_key = ?1";
static const char SQL_KEY_BY_PSEUDONYM[] = "SELECT public_key FROM annotators WHERE pseudonym = ?1";

struct by_key_query {
    lp_engine *engine;
    const uint8_t *key;
    lp_annotator *out;
};

static int by_key_fn(lp_conn *db, void *ctx)
{
    struct by_key_query *q = ctx;
    lp_stmt *st = lp_engine_stmt(q->engine, db, SQL_BY_KEY);
    if (st == NULL)
        return LP_ESTORAGE;
    lp_stmt_bind_blob(st, 1, q->key, LP_KEY_BYTES);
    int rc = LP_ESTORAGE, step = lp_stmt_step(st);
    if (step == LP_SQL_ROW) {
        memset(q->out, 0, sizeof *q->out);
        q->out->id = lp_stmt_column_int64(st, 0);
        q->out->campaign = lp_stmt_column_int64(st, 1);
        q->out->revoked = lp_stmt_column_int(st, 2);
        snprintf(q->out->pseudonym, sizeof q->out->pseudonym, "%s", lp_stmt_column_text(st, 3));
        rc = LP_OK;
    } else if (step == LP_SQL_DONE) {
        rc = LP_EUNKNOWN_KEY;
    }
    lp_stmt_reset(st);
    return rc;
}

int lp_store_annotator_by_key(lp_store *s, const uint8_t key[LP_KEY_BYTES], lp_annotator *out)
{
    uint64_t gen;
    if (kc_get(s->keys, key, out, &gen))
        return LP_OK;
    struct by_key_query q = {s->engine, key, out};
    int rc = lp_engine_read(s->engine, by_key_fn, &q);
    if (rc == LP_OK)
        kc_put(s->keys, key, out, gen);
    return rc;
}

struct enroll_job {
    lp_engine *engine;
    const uint8_t *key, *token_hash;
    lp_annotator out;
};

/* LP_EALREADY_ENROLLED when the key has an annotator, LP_OK when not. */
static int key_free(struct enroll_job *a, lp_conn *db)
{
    lp_stmt *st = lp_engine_stmt(a->engine, db, SQL_KEY_ID);
    if (st == NULL)
        return LP_ESTORAGE;
    lp_stmt_bind_blob(st, 1, a->key, LP_KEY_BYTES);
    int step = lp_stmt_step(st);
    lp_stmt_reset(st);
    if (step == LP_SQL_ROW)
        return LP_EALREADY_ENROLLED;
    return step == LP_SQL_DONE ? LP_OK : lp_engine_fail(db, "key lookup");
}

/* Several servers may enroll at once (PostgreSQL): the unique public key
 * and the token taken by "WHERE used_by IS NULL" (re-checked on the newest
 * row when another server took it meanwhile) decide; the loser's job is
 * rolled back whole and gets the answer a single server would give. */
static int enroll_fn(lp_conn *db, void *ctx)
{
    struct enroll_job *a = ctx;
    int rc = key_free(a, db);
    if (rc != LP_OK)
        return rc;
    lp_stmt *st;
    int step;

    if ((st = lp_engine_stmt(a->engine, db, SQL_ETOKEN_GET)) == NULL)
        return LP_ESTORAGE;
    lp_stmt_bind_blob(st, 1, a->token_hash, LP_HASH_BYTES);
    step = lp_stmt_step(st);
    if (step != LP_SQL_ROW) {
        lp_stmt_reset(st);
        return step == LP_SQL_DONE ? LP_EBAD_ENROLLMENT_TOKEN : lp_engine_fail(db, "token lookup");
    }
    int64_t campaign = lp_stmt_column_int64(st, 0);
    int used = !lp_stmt_column_is_null(st, 1);
    lp_stmt_reset(st);
    if (used)
        return LP_EBAD_ENROLLMENT_TOKEN;

    for (int attempt = 0;; attempt++) {
        uint8_t rnd[8];
        randombytes_buf(rnd, sizeof rnd);
        memcpy(a->out.pseudonym, "ann-", 4);
        sodium_bin2hex(a->out.pseudonym + 4, sizeof a->out.pseudonym - 4, rnd, sizeof rnd);
        if ((st = lp_engine_stmt(a->engine, db, SQL_ANNOT_INSERT)) == NULL)
            return LP_ESTORAGE;
        lp_stmt_bind_blob(st, 1, a->key, LP_KEY_BYTES);
        lp_stmt_bind_text(st, 2, a->out.pseudonym, -1);
        lp_stmt_bind_int64(st, 3, campaign);
        lp_stmt_bind_int64(st, 4, lp_now_ms());
        step = lp_engine_step_id(st, &a->out.id);
        if (step == LP_SQL_DONE)
            break;
        /* the key enrolled meanwhile by another server, or else a
         * pseudonym collision */
        if (step == LP_SQL_UNIQUE && (rc = key_free(a, db)) != LP_OK)
            return rc;
        if (attempt >= 3) /* a pseudonym collision is ~2^-64; more is a real error */
            return lp_engine_fail(db, "annotator insert");
    }
    a->out.campaign = campaign;
    a->out.revoked = 0;
    if ((st = lp_engine_stmt(a->engine, db, SQL_ETOKEN_USE)) == NULL)
        return LP_ESTORAGE;
    lp_stmt_bind_blob(st, 1, a->token_hash, LP_HASH_BYTES);
    lp_stmt_bind_int64(st, 2, a->out.id);
    step = lp_stmt_step(st);
    int64_t taken = step == LP_SQL_DONE ? lp_conn_changes(db) : 0;
    lp_stmt_reset(st);
    if (step == LP_SQL_UNIQUE || (step == LP_SQL_DONE && taken == 0))
        return LP_EBAD_ENROLLMENT_TOKEN; /* another server used it first */
    if (step != LP_SQL_DONE)
        return lp_engine_fail(db, "token update");
    return LP_OK;
}

int lp_store_enroll(lp_store *s, const uint8_t key[LP_KEY_BYTES],
                    const uint8_t token_hash[LP_HASH_BYTES], lp_annotator *out)
{
    struct enroll_job j = {.engine = s->engine, .key = key, .token_hash = token_hash};
    int rc = lp_engine_write(s->engine, enroll_fn, &j, 1, 0);
    if (rc == LP_OK)
        *out = j.out;
    return rc;
}

struct revoke_job {
    lp_engine *engine;
    const char *pseudonym; /* revoke by pseudonym (key is then filled), or else */
    uint8_t key[LP_KEY_BYTES];
};

static int revoke_fn(lp_conn *db, void *ctx)
{
    struct revoke_job *j = ctx;
    lp_stmt *st;
    if (j->pseudonym != NULL) {
        if ((st = lp_engine_stmt(j->engine, db, SQL_KEY_BY_PSEUDONYM)) == NULL)
            return LP_ESTORAGE;
        lp_stmt_bind_text(st, 1, j->pseudonym, -1);
        int step = lp_stmt_step(st);
        int ok = step == LP_SQL_ROW && lp_stmt_column_bytes(st, 0) == LP_KEY_BYTES;
        if (ok)
            memcpy(j->key, lp_stmt_column_blob(st, 0), LP_KEY_BYTES);
        lp_stmt_reset(st);
        if (!ok)
            return step == LP_SQL_ROW || step == LP_SQL_DONE ? LP_EUNKNOWN_KEY
                                                             : lp_engine_fail(db, "pseudonym");
    }
    if ((st = lp_engine_stmt(j->engine, db, SQL_REVOKE)) == NULL)
        return LP_ESTORAGE;
    lp_stmt_bind_blob(st, 1, j->key, LP_KEY_BYTES);
    if (lp_stmt_step(st) != LP_SQL_DONE)
        return lp_engine_fail(db, "revoke");
    lp_stmt_reset(st);
    return lp_conn_changes(db) == 1 ? lp_coord_notify(db, LP_COORD_REVOKED) : LP_EUNKNOWN_KEY;
}

static int revoke_run(lp_store *s, struct revoke_job *j)
{
    int rc = lp_engine_write(s->engine, revoke_fn, j, 1, 0);
    if (rc == LP_OK)
        kc_revoke(s->keys, j->key);
    return rc;
}

int lp_store_revoke(lp_store *s, const uint8_t key[LP_KEY_BYTES])
{
    struct revoke_job j = {.engine = s->engine};
    memcpy(j.key, key, LP_KEY_BYTES);
    return revoke_run(s, &j);
}

int lp_store_revoke_pseudonym(lp_store *s, const char *pseudonym, uint8_t key[LP_KEY_BYTES])
{
    struct revoke_job j = {.engine = s->engine, .pseudonym = pseudonym};
    int rc = revoke_run(s, &j);
    if (rc == LP_OK)
        memcpy(key, j.key, LP_KEY_BYTES);
    return rc;
}
