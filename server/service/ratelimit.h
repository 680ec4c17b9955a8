/*
 * ratelimit.h — token buckets keyed by (class, key kind, key), in a table of
 * fixed size.
 *
 * A bucket holds at most `burst` tokens and gains `per_s` tokens a second; a
 * request takes one token, or is refused with the time until one is there.
 * Each class (scoring, enrollment, task fetching) has its own rates, one for
 * each kind of key: a credential (an operator token's id, an annotator's
 * key) or a client address.
 *
 * The table has a fixed number of buckets, set at creation: memory never
 * grows, whatever the number of keys. It is set-associative: a keyed hash
 * (SipHash under a random key of the process, so no client can aim keys at
 * one set) picks a set of LP_RATELIMIT_WAYS buckets; a new key whose set is
 * full takes the place of the fullest bucket there (a full bucket is exactly
 * what a new key starts with, so evicting it changes no answer). Only a
 * client holding more keys than the table has buckets can gain a fresh burst
 * by eviction, and then no more than it gets from its many keys anyway.
 *
 * Thread-safe and cheap: a call locks one of LP_RATELIMIT_STRIPES mutexes
 * (chosen by the set) for a scan of LP_RATELIMIT_WAYS entries. Time is
 * passed in (monotonic nanoseconds), so tests drive a clock of their own.
 */
#ifndef LP_RATELIMIT_H
#define LP_RATELIMIT_H

#include <stddef.h>
#include <stdint.h>

typedef enum lp_rate_class {
    LP_RATE_SCORE,  /* POST /v1/score */
    LP_RATE_ENROLL, /* POST /v1/annotators */
    LP_RATE_NEXT,   /* POST /v1/tasks/next */
    LP_RATE_CLASSES
} lp_rate_class;

typedef enum lp_rate_key { LP_RATE_CREDENTIAL, LP_RATE_ADDRESS, LP_RATE_KEYS } lp_rate_key;

typedef struct lp_rate {
    double per_s; /* tokens gained per second; <= 0: the class is not limited */
    double burst; /* most tokens held (values below 1 count as 1) */
} lp_rate;

typedef struct lp_ratelimit_opts {
    lp_rate rates[LP_RATE_CLASSES][LP_RATE_KEYS]; /* per_s 0: that kind of key is not limited */
    size_t buckets;                               /* table size; 0: LP_RATELIMIT_BUCKETS */
} lp_ratelimit_opts;

#define LP_RATELIMIT_BUCKETS 16384
#define LP_RATELIMIT_WAYS 8
#define LP_RATELIMIT_STRIPES 64
/* The longest key kept apart from others (longer keys are hashed whole). */
#define LP_RATELIMIT_ADDRESS_KEY_MAX 17

typedef struct lp_ratelimit lp_ratelimit;

/* A new table; NULL when out of memory. The bucket count is rounded up to a
 * power of two times LP_RATELIMIT_WAYS. */
lp_ratelimit *lp_ratelimit_new(const lp_ratelimit_opts *opts);
/* Accepts NULL. */
void lp_ratelimit_free(lp_ratelimit *rl);

/* The class's wire name in metrics: "score", "enrollment", "tasks_next". */
const char *lp_rate_class_name(lp_rate_class cls);

/* 1 if the class is limited at all (for either kind of key). */
int lp_ratelimit_active(const lp_ratelimit *rl, lp_rate_class cls);

/*
 * Takes one token from the bucket of (cls, kind, key[0..len)) at now_ns
 * (monotonic). Returns 1 when taken (or the class is not limited), 0 when
 * the bucket is empty, with *wait_ns (may be NULL) the time until it holds
 * a whole token again (> 0). When take is 0 the bucket is only looked at:
 * nothing is spent and no bucket is created.
 */
int lp_ratelimit_take(lp_ratelimit *rl, lp_rate_class cls, lp_rate_key kind, const void *key,
                      size_t len, int take, int64_t now_ns, int64_t *wait_ns);

/*
 * The bucket key of a client's numeric address: an IPv4 address (also an
 * IPv4-mapped IPv6 one) by itself, an IPv6 address by its /64 (one host
 * usually holds a whole /64). Anything else is used as text, cut at
 * LP_RATELIMIT_ADDRESS_KEY_MAX bytes. Returns the key's length.
 */
size_t lp_ratelimit_address_key(const char *addr, uint8_t out[LP_RATELIMIT_ADDRESS_KEY_MAX]);

/* How many buckets hold a key (tests: the table's bound). */
size_t lp_ratelimit_used(lp_ratelimit *rl);

#endif
