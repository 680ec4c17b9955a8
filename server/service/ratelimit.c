/* ratelimit.c — token buckets in a fixed, set-associative table. See ratelimit.h. */
#include "ratelimit.h"

#include <arpa/inet.h>
#include <math.h>
#include <pthread.h>
#include <sodium.h>
#include <stdlib.h>
#include <string.h>

typedef struct bucket {
    uint64_t tag;  /* keyed hash of (class, kind, key); 0: empty */
    int64_t at_ns; /* when `tokens` was last brought up to date */
    double tokens;
    uint8_t cls, kind;
} bucket;

struct lp_ratelimit {
    lp_rate rates[LP_RATE_CLASSES][LP_RATE_KEYS]; /* burst >= 1 */
    size_t sets;                                  /* a power of two */
    bucket *table;                                /* sets * LP_RATELIMIT_WAYS */
    pthread_mutex_t stripes[LP_RATELIMIT_STRIPES];
    uint8_t hash_key[crypto_shorthash_KEYBYTES];
};

static const char *const CLASS_NAMES[LP_RATE_CLASSES] = {"score", "enrollment", "tasks_next"};

const char *lp_rate_class_name(lp_rate_class cls)
{
    return (unsigned)cls < LP_RATE_CLASSES ? CLASS_NAMES[cls] : "other";
}

lp_ratelimit *lp_ratelimit_new(const lp_ratelimit_opts *opts)
{
    lp_ratelimit *rl = calloc(1, sizeof *rl);
    if (rl == NULL)
        return NULL;
    for (int c = 0; c < LP_RATE_CLASSES; c++)
        for (int k = 0; k < LP_RATE_KEYS; k++) {
            lp_rate r = opts->rates[c][k];
            if (!(r.per_s > 0) || !isfinite(r.per_s))
                r.per_s = 0;
            if (!(r.burst >= 1) || !isfinite(r.burst))
                r.burst = 1;
            rl->rates[c][k] = r;
        }
    size_t want = opts->buckets ? opts->buckets : LP_RATELIMIT_BUCKETS;
    rl->sets = 1;
    while (rl->sets * LP_RATELIMIT_WAYS < want)
        rl->sets *= 2;
    rl->table = calloc(rl->sets * LP_RATELIMIT_WAYS, sizeof *rl->table);
    if (rl->table == NULL) {
        free(rl);
        return NULL;
    }
    for (int s = 0; s < LP_RATELIMIT_STRIPES; s++)
        pthread_mutex_init(&rl->stripes[s], NULL);
    randombytes_buf(rl->hash_key, sizeof rl->hash_key);
    return rl;
}

void lp_ratelimit_free(lp_ratelimit *rl)
{
    if (rl == NULL)
        return;
    for (int s = 0; s < LP_RATELIMIT_STRIPES; s++)
        pthread_mutex_destroy(&rl->stripes[s]);
    free(rl->table);
    free(rl);
}

int lp_ratelimit_active(const lp_ratelimit *rl, lp_rate_class cls)
{
    return rl != NULL && (unsigned)cls < LP_RATE_CLASSES &&
           (rl->rates[cls][LP_RATE_CREDENTIAL].per_s > 0 ||
            rl->rates[cls][LP_RATE_ADDRESS].per_s > 0);
}

/* The tokens of b at now_ns: refilled at r's rate, capped at its burst. */
static double level(const bucket *b, const lp_rate *r, int64_t now_ns)
{
    double dt = now_ns > b->at_ns ? (double)(now_ns - b->at_ns) / 1e9 : 0;
    double t = b->tokens + dt * r->per_s;
    return t < r->burst ? t : r->burst;
}

/* The tag of (cls, kind, key): never 0 (0 marks an empty bucket). */
static uint64_t tag_of(const lp_ratelimit *rl, lp_rate_class cls, lp_rate_key kind, const void *key,
                       size_t len)
{
    uint8_t in[2 + 64];
    in[0] = (uint8_t)cls;
    in[1] = (uint8_t)kind;
    if (len > 64) { /* a long key is first hashed down to 8 bytes */
        crypto_shorthash(in + 2, key, len, rl->hash_key);
        len = crypto_shorthash_BYTES;
    } else if (len > 0) {
        memcpy(in + 2, key, len);
    }
    uint8_t out[crypto_shorthash_BYTES];
    crypto_shorthash(out, in, 2 + len, rl->hash_key);
    uint64_t t;
    memcpy(&t, out, sizeof t);
    return t ? t : 1;
}

int lp_ratelimit_take(lp_ratelimit *rl, lp_rate_class cls, lp_rate_key kind, const void *key,
                      size_t len, int take, int64_t now_ns, int64_t *wait_ns)
{
    if (wait_ns != NULL)
        *wait_ns = 0;
    if (rl == NULL || (unsigned)cls >= LP_RATE_CLASSES)
        return 1;
    const lp_rate *r = &rl->rates[cls][kind == LP_RATE_ADDRESS];
    if (!(r->per_s > 0)) /* this kind of key is not limited in this class */
        return 1;
    uint64_t tag = tag_of(rl, cls, kind, key, len);
    size_t set = (size_t)(tag & (rl->sets - 1));
    bucket *ways = rl->table + set * LP_RATELIMIT_WAYS;
    pthread_mutex_t *m = &rl->stripes[set % LP_RATELIMIT_STRIPES];
    pthread_mutex_lock(m);
    bucket *b = NULL, *victim = NULL;
    double victim_fill = -1;
    for (int w = 0; w < LP_RATELIMIT_WAYS && b == NULL; w++) {
        bucket *e = &ways[w];
        if (e->tag == tag) {
            b = e;
        } else if (victim_fill < 2) { /* 2: an empty way, the best place */
            const lp_rate *er = &rl->rates[e->cls][e->kind];
            double fill = e->tag == 0 ? 2 : level(e, er, now_ns) / er->burst;
            if (fill > victim_fill || (fill == victim_fill && e->at_ns < victim->at_ns)) {
                victim_fill = fill;
                victim = e;
            }
        }
    }
    int ok = 1;
    if (b == NULL) { /* a new key starts full */
        if (take)
            *victim = (bucket){.tag = tag,
                               .at_ns = now_ns,
                               .tokens = r->burst - 1,
                               .cls = (uint8_t)cls,
                               .kind = (uint8_t)kind};
    } else {
        double t = level(b, r, now_ns);
        if (t >= 1) {
            if (take) {
                b->tokens = t - 1;
                b->at_ns = now_ns;
            }
        } else {
            ok = 0;
            if (wait_ns != NULL) {
                double ns = ceil((1 - t) / r->per_s * 1e9);
                *wait_ns = ns < 1 ? 1 : ns > (double)INT64_MAX / 2 ? INT64_MAX / 2 : (int64_t)ns;
            }
        }
    }
    pthread_mutex_unlock(m);
    return ok;
}

size_t lp_ratelimit_address_key(const char *addr, uint8_t out[LP_RATELIMIT_ADDRESS_KEY_MAX])
{
    struct in_addr v4;
    struct in6_addr v6;
    if (addr == NULL)
        addr = "";
    if (inet_pton(AF_INET, addr, &v4) == 1) {
        out[0] = 4;
        memcpy(out + 1, &v4, 4);
        return 5;
    }
    if (inet_pton(AF_INET6, addr, &v6) == 1) {
        if (IN6_IS_ADDR_V4MAPPED(&v6)) {
            out[0] = 4;
            memcpy(out + 1, v6.s6_addr + 12, 4);
            return 5;
        }
        out[0] = 6;
        memcpy(out + 1, v6.s6_addr, 8); /* the /64 */
        return 9;
    }
    size_t n = strlen(addr);
    if (n > LP_RATELIMIT_ADDRESS_KEY_MAX - 1)
        n = LP_RATELIMIT_ADDRESS_KEY_MAX - 1;
    out[0] = 0;
    memcpy(out + 1, addr, n);
    return n + 1;
}

size_t lp_ratelimit_used(lp_ratelimit *rl)
{
    size_t n = 0;
    for (size_t set = 0; set < rl->sets; set++) {
        pthread_mutex_t *m = &rl->stripes[set % LP_RATELIMIT_STRIPES];
        pthread_mutex_lock(m);
        for (int w = 0; w < LP_RATELIMIT_WAYS; w++)
            n += rl->table[set * LP_RATELIMIT_WAYS + w].tag != 0;
        pthread_mutex_unlock(m);
    }
    return n;
}
