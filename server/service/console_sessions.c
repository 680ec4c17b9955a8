/* console_sessions.c — the console's session table. See console_sessions.h. */
#include "console_sessions.h"

#include "error.h"
#include "wire.h"

#include <pthread.h>
#include <sodium.h>
#include <stdlib.h>
#include <string.h>

#define ID_BYTES 32
#define HASH_BYTES 32
#define SESSION_ID_LEN 43 /* unpadded base64url of 32 bytes */

typedef struct slot {
    int used;
    uint8_t hash[HASH_BYTES];
    int64_t created_ms, last_ms;
    lp_principal who;
} slot;

struct lp_sessions {
    pthread_mutex_t lock;
    lp_sessions_opts opts;
    uint8_t csrf_key[crypto_generichash_KEYBYTES];
    slot *slots;
};

lp_sessions *lp_sessions_new(const lp_sessions_opts *opts)
{
    if (sodium_init() < 0 || opts->max_live == 0)
        return NULL;
    lp_sessions *s = calloc(1, sizeof *s);
    if (s == NULL)
        return NULL;
    s->slots = calloc(opts->max_live, sizeof *s->slots);
    if (s->slots == NULL) {
        free(s);
        return NULL;
    }
    s->opts = *opts;
    randombytes_buf(s->csrf_key, sizeof s->csrf_key);
    pthread_mutex_init(&s->lock, NULL);
    return s;
}

void lp_sessions_free(lp_sessions *s)
{
    if (s == NULL)
        return;
    sodium_memzero(s->csrf_key, sizeof s->csrf_key);
    pthread_mutex_destroy(&s->lock);
    free(s->slots);
    free(s);
}

static int expired(const lp_sessions *s, const slot *e, int64_t now_ms)
{
    return now_ms - e->created_ms >= s->opts.lifetime_ms || now_ms - e->last_ms >= s->opts.idle_ms;
}

/* A well-formed id's hash into hash; 0 when id cannot be one of ours. */
static int id_hash(const char *id, uint8_t hash[HASH_BYTES])
{
    if (id == NULL || strnlen(id, SESSION_ID_LEN + 1) != SESSION_ID_LEN)
        return 0;
    crypto_generichash(hash, HASH_BYTES, (const unsigned char *)id, SESSION_ID_LEN, NULL, 0);
    return 1;
}

/* The live slot whose hash is hash, or NULL; every slot is compared (no
 * early exit), so the time taken does not depend on which one matched.
 * Expired slots are freed on the way. Called with the lock held. */
static slot *find(lp_sessions *s, const uint8_t hash[HASH_BYTES], int64_t now_ms)
{
    slot *found = NULL;
    for (size_t i = 0; i < s->opts.max_live; i++) {
        slot *e = &s->slots[i];
        if (e->used && expired(s, e, now_ms))
            memset(e, 0, sizeof *e);
        int same = sodium_memcmp(e->hash, hash, HASH_BYTES) == 0;
        if (e->used && same)
            found = e;
    }
    return found;
}

static void csrf_of(const lp_sessions *s, const char *id, char csrf[LP_SESSION_CSRF_MAX])
{
    uint8_t mac[ID_BYTES];
    char b64[LP_B64_MAX];
    crypto_generichash(mac, sizeof mac, (const unsigned char *)id, strlen(id), s->csrf_key,
                       sizeof s->csrf_key);
    lp_b64_encode(mac, sizeof mac, b64);
    memcpy(csrf, b64, SESSION_ID_LEN + 1);
}

int lp_sessions_create(lp_sessions *s, int64_t now_ms, const lp_principal *who,
                       char id[LP_SESSION_ID_MAX], char csrf[LP_SESSION_CSRF_MAX],
                       int64_t *expires_ms)
{
    uint8_t rnd[ID_BYTES];
    char b64[LP_B64_MAX];
    randombytes_buf(rnd, sizeof rnd);
    lp_b64_encode(rnd, sizeof rnd, b64);
    sodium_memzero(rnd, sizeof rnd);
    if (strlen(b64) != SESSION_ID_LEN)
        return LP_ERNG;
    memcpy(id, b64, SESSION_ID_LEN + 1);
    sodium_memzero(b64, sizeof b64);
    pthread_mutex_lock(&s->lock);
    slot *free_slot = NULL, *oldest = NULL;
    for (size_t i = 0; i < s->opts.max_live; i++) {
        slot *e = &s->slots[i];
        if (e->used && expired(s, e, now_ms))
            memset(e, 0, sizeof *e);
        if (!e->used && free_slot == NULL)
            free_slot = e;
        if (e->used && (oldest == NULL || e->last_ms < oldest->last_ms))
            oldest = e;
    }
    slot *e = free_slot ? free_slot : oldest; /* full: the least recently used goes */
    e->used = 1;
    crypto_generichash(e->hash, HASH_BYTES, (const unsigned char *)id, SESSION_ID_LEN, NULL, 0);
    e->created_ms = e->last_ms = now_ms;
    e->who = who != NULL ? *who : (lp_principal){0};
    pthread_mutex_unlock(&s->lock);
    csrf_of(s, id, csrf);
    *expires_ms = now_ms + s->opts.lifetime_ms;
    return LP_OK;
}

int lp_sessions_check(lp_sessions *s, const char *id, int64_t now_ms,
                      char csrf[LP_SESSION_CSRF_MAX], int64_t *expires_ms, lp_principal *who)
{
    uint8_t hash[HASH_BYTES];
    if (!id_hash(id, hash))
        return LP_EUNAUTHORIZED;
    pthread_mutex_lock(&s->lock);
    slot *e = find(s, hash, now_ms);
    if (e != NULL) {
        e->last_ms = now_ms;
        if (expires_ms)
            *expires_ms = e->created_ms + s->opts.lifetime_ms;
        if (who)
            *who = e->who;
    }
    pthread_mutex_unlock(&s->lock);
    if (e == NULL)
        return LP_EUNAUTHORIZED;
    if (csrf)
        csrf_of(s, id, csrf);
    return LP_OK;
}

int lp_sessions_csrf_ok(const lp_sessions *s, const char *id, const char *given)
{
    char want[LP_SESSION_CSRF_MAX];
    if (id == NULL || given == NULL || strnlen(id, SESSION_ID_LEN + 1) != SESSION_ID_LEN ||
        strnlen(given, SESSION_ID_LEN + 1) != SESSION_ID_LEN)
        return 0;
    csrf_of(s, id, want);
    return sodium_memcmp(want, given, SESSION_ID_LEN) == 0;
}

void lp_sessions_end(lp_sessions *s, const char *id)
{
    uint8_t hash[HASH_BYTES];
    if (!id_hash(id, hash))
        return;
    pthread_mutex_lock(&s->lock);
    for (size_t i = 0; i < s->opts.max_live; i++)
        if (s->slots[i].used && sodium_memcmp(s->slots[i].hash, hash, HASH_BYTES) == 0)
            memset(&s->slots[i], 0, sizeof s->slots[i]);
    pthread_mutex_unlock(&s->lock);
}

size_t lp_sessions_live(lp_sessions *s, int64_t now_ms)
{
    size_t n = 0;
    pthread_mutex_lock(&s->lock);
    for (size_t i = 0; i < s->opts.max_live; i++)
        n += s->slots[i].used && !expired(s, &s->slots[i], now_ms);
    pthread_mutex_unlock(&s->lock);
    return n;
}
