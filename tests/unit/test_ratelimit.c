/*
 * test_ratelimit.c — the token-bucket table (server/service/ratelimit) with
 * the clock in the test's hands: burst, refill, the cap at the burst, the
 * wait until the next token, looking without spending, classes and kinds
 * of keys that are not limited, address rates, keys and classes kept apart, the fixed
 * table bound under a flood of keys (and which bucket is evicted), address
 * keys (IPv4, IPv6 by /64, IPv4-mapped), and concurrent takers that never
 * get more than the burst.
 */
#include "ratelimit.h"

#include "check.h"

#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>

#define SEC 1000000000LL
#define T0 (1000 * SEC) /* any start: the table never reads the real clock */

/* Every class at (per_s, burst) per credential, factor times that per address. */
static lp_ratelimit *table(double per_s, double burst, double factor, size_t buckets)
{
    lp_ratelimit_opts o = {.buckets = buckets};
    for (int c = 0; c < LP_RATE_CLASSES; c++) {
        o.rates[c][LP_RATE_CREDENTIAL] = (lp_rate){per_s, burst};
        o.rates[c][LP_RATE_ADDRESS] = (lp_rate){per_s * factor, burst * factor};
    }
    lp_ratelimit *rl = lp_ratelimit_new(&o);
    CHECK(rl != NULL);
    return rl;
}

/* How many tokens key k of (cls, kind) yields at `now` before a refusal. */
static int drain(lp_ratelimit *rl, lp_rate_class cls, lp_rate_key kind, const char *k, int64_t now,
                 int64_t *wait)
{
    int n = 0;
    while (n < 100000 && lp_ratelimit_take(rl, cls, kind, k, strlen(k), 1, now, wait))
        n++;
    return n;
}

static void test_burst_and_refill(void)
{
    lp_ratelimit *rl = table(2, 5, 1, 0); /* 2 tokens a second, 5 at most */
    int64_t wait = -1;
    CHECK_INT(drain(rl, LP_RATE_SCORE, LP_RATE_CREDENTIAL, "alice", T0, &wait), 5);
    CHECK_INT(wait, SEC / 2); /* one token takes half a second */
    /* a quarter second later: half a token, a quarter second to go */
    CHECK(!lp_ratelimit_take(rl, LP_RATE_SCORE, LP_RATE_CREDENTIAL, "alice", 5, 1, T0 + SEC / 4,
                             &wait));
    CHECK_INT(wait, SEC / 4);
    /* a refusal spent nothing: at +0.5 s exactly one token */
    CHECK_INT(drain(rl, LP_RATE_SCORE, LP_RATE_CREDENTIAL, "alice", T0 + SEC / 2, &wait), 1);
    CHECK_INT(wait, SEC / 2);
    /* +3 s: 2.5 s of refill is 5 tokens, the burst */
    CHECK_INT(drain(rl, LP_RATE_SCORE, LP_RATE_CREDENTIAL, "alice", T0 + 3 * SEC, &wait), 5);
    /* an hour idle: still only the burst */
    CHECK_INT(drain(rl, LP_RATE_SCORE, LP_RATE_CREDENTIAL, "alice", T0 + 3603 * SEC, &wait), 5);
    /* a clock that steps back refills nothing (and breaks nothing) */
    CHECK_INT(drain(rl, LP_RATE_SCORE, LP_RATE_CREDENTIAL, "alice", T0, &wait), 0);
    CHECK(wait > 0);
    lp_ratelimit_free(rl);
}

static void test_fractional_rate(void)
{
    lp_ratelimit *rl = table(0.1, 1, 1, 0); /* one token per 10 s */
    int64_t wait = 0;
    CHECK_INT(drain(rl, LP_RATE_ENROLL, LP_RATE_CREDENTIAL, "k", T0, &wait), 1);
    CHECK_INT(wait, 10 * SEC);
    CHECK_INT(drain(rl, LP_RATE_ENROLL, LP_RATE_CREDENTIAL, "k", T0 + 9 * SEC, &wait), 0);
    CHECK_INT(wait, SEC);
    CHECK_INT(drain(rl, LP_RATE_ENROLL, LP_RATE_CREDENTIAL, "k", T0 + 10 * SEC, &wait), 1);
    lp_ratelimit_free(rl);
}

static void test_peek_spends_nothing(void)
{
    lp_ratelimit *rl = table(1, 3, 1, 0);
    for (int i = 0; i < 50; i++)
        CHECK(lp_ratelimit_take(rl, LP_RATE_NEXT, LP_RATE_CREDENTIAL, "k", 1, 0, T0, NULL));
    CHECK_INT(lp_ratelimit_used(rl), 0); /* looking creates no bucket */
    CHECK_INT(drain(rl, LP_RATE_NEXT, LP_RATE_CREDENTIAL, "k", T0, NULL), 3);
    int64_t wait = 0;
    CHECK(!lp_ratelimit_take(rl, LP_RATE_NEXT, LP_RATE_CREDENTIAL, "k", 1, 0, T0, &wait));
    CHECK_INT(wait, SEC);
    lp_ratelimit_free(rl);
}

static void test_unlimited_class(void)
{
    /* score: not limited; enrollment: by address only; next: {0, 0}, not limited */
    lp_ratelimit_opts o = {
        .rates = {[LP_RATE_SCORE] = {{0, 10}, {0, 10}}, [LP_RATE_ENROLL] = {{0, 0}, {1, 2}}}};
    lp_ratelimit *rl = lp_ratelimit_new(&o);
    CHECK(!lp_ratelimit_active(rl, LP_RATE_SCORE));
    CHECK(lp_ratelimit_active(rl, LP_RATE_ENROLL));
    CHECK(!lp_ratelimit_active(rl, LP_RATE_NEXT));
    CHECK_INT(drain(rl, LP_RATE_SCORE, LP_RATE_ADDRESS, "a", T0, NULL), 100000);
    CHECK_INT(drain(rl, LP_RATE_NEXT, LP_RATE_CREDENTIAL, "a", T0, NULL), 100000);
    CHECK_INT(drain(rl, LP_RATE_ENROLL, LP_RATE_CREDENTIAL, "a", T0, NULL), 100000);
    CHECK_INT(lp_ratelimit_used(rl), 0);
    CHECK_INT(drain(rl, LP_RATE_ENROLL, LP_RATE_ADDRESS, "a", T0, NULL), 2);
    CHECK(!lp_ratelimit_active(NULL, LP_RATE_SCORE));
    CHECK(lp_ratelimit_take(NULL, LP_RATE_SCORE, LP_RATE_ADDRESS, "a", 1, 1, T0, NULL));
    lp_ratelimit_free(rl);
}

static void test_address_factor_and_separation(void)
{
    lp_ratelimit *rl = table(2, 5, 4, 0);
    int64_t wait = 0;
    /* an address bucket at its own rate: 4 x 5 tokens, refilling at 4 x 2 a second */
    CHECK_INT(drain(rl, LP_RATE_SCORE, LP_RATE_ADDRESS, "x", T0, &wait), 20);
    CHECK_INT(wait, SEC / 8);
    CHECK_INT(drain(rl, LP_RATE_SCORE, LP_RATE_ADDRESS, "x", T0 + SEC, NULL), 8);
    /* the same key bytes as a credential, in another class, or another key: untouched */
    CHECK_INT(drain(rl, LP_RATE_SCORE, LP_RATE_CREDENTIAL, "x", T0, NULL), 5);
    CHECK_INT(drain(rl, LP_RATE_NEXT, LP_RATE_ADDRESS, "x", T0, NULL), 20);
    CHECK_INT(drain(rl, LP_RATE_SCORE, LP_RATE_ADDRESS, "y", T0, NULL), 20);
    /* keys that differ in one byte, or only in length */
    CHECK_INT(drain(rl, LP_RATE_ENROLL, LP_RATE_CREDENTIAL, "ab", T0, NULL), 5);
    CHECK_INT(drain(rl, LP_RATE_ENROLL, LP_RATE_CREDENTIAL, "ac", T0, NULL), 5);
    CHECK_INT(drain(rl, LP_RATE_ENROLL, LP_RATE_CREDENTIAL, "a", T0, NULL), 5);
    /* keys longer than 64 bytes are kept apart too */
    char long1[200], long2[200];
    memset(long1, 'q', sizeof long1 - 1);
    long1[sizeof long1 - 1] = '\0';
    memcpy(long2, long1, sizeof long2);
    long2[150] = 'r';
    CHECK_INT(drain(rl, LP_RATE_ENROLL, LP_RATE_CREDENTIAL, long1, T0, NULL), 5);
    CHECK_INT(drain(rl, LP_RATE_ENROLL, LP_RATE_CREDENTIAL, long2, T0, NULL), 5);
    CHECK_INT(drain(rl, LP_RATE_ENROLL, LP_RATE_CREDENTIAL, long1, T0, NULL), 0);
    lp_ratelimit_free(rl);
}

/* A flood of distinct keys never grows the table past its size, and the
 * buckets it evicts are the fullest: a drained one stays drained. */
static void test_table_bound(void)
{
    lp_ratelimit *rl = table(1, 10, 1, 64); /* 8 sets of 8 */
    CHECK_INT(drain(rl, LP_RATE_ENROLL, LP_RATE_ADDRESS, "drained", T0, NULL), 10);
    char key[32];
    int taken = 0;
    for (int i = 0; i < 100000; i++) {
        snprintf(key, sizeof key, "flood-%d", i);
        taken +=
            lp_ratelimit_take(rl, LP_RATE_ENROLL, LP_RATE_ADDRESS, key, strlen(key), 1, T0, NULL);
    }
    CHECK_INT(taken, 100000); /* every new key starts full */
    CHECK_INT(lp_ratelimit_used(rl), 64);
    /* each flood bucket holds 9 of 10 tokens, the drained one 0: never the one evicted */
    int64_t wait = 0;
    CHECK(!lp_ratelimit_take(rl, LP_RATE_ENROLL, LP_RATE_ADDRESS, "drained", 7, 1, T0, &wait));
    CHECK_INT(wait, SEC);
    /* the flood's keys were evicted in turn: an old one starts full again */
    CHECK_INT(drain(rl, LP_RATE_ENROLL, LP_RATE_ADDRESS, "flood-0", T0, NULL), 10);
    /* a bigger table, the same flood: still at most its size */
    lp_ratelimit *big = table(1, 10, 1, 1000); /* rounded up to 128 sets of 8 */
    for (int i = 0; i < 100000; i++) {
        snprintf(key, sizeof key, "flood-%d", i);
        lp_ratelimit_take(big, LP_RATE_SCORE, LP_RATE_ADDRESS, key, strlen(key), 1, T0, NULL);
    }
    CHECK_INT(lp_ratelimit_used(big), 1024);
    lp_ratelimit_free(big);
    lp_ratelimit_free(rl);
}

static void test_address_keys(void)
{
    uint8_t a[LP_RATELIMIT_ADDRESS_KEY_MAX], b[LP_RATELIMIT_ADDRESS_KEY_MAX];
    size_t na, nb;
#define SAME(x, y)                                                                                 \
    (na = lp_ratelimit_address_key(x, a), nb = lp_ratelimit_address_key(y, b),                     \
     na == nb && memcmp(a, b, na) == 0)
    CHECK(SAME("127.0.0.2", "127.0.0.2"));
    CHECK(!SAME("127.0.0.2", "127.0.0.3"));
    CHECK(SAME("::ffff:127.0.0.2", "127.0.0.2")); /* IPv4-mapped: the IPv4 address */
    CHECK(SAME("2001:db8:1:2::1", "2001:db8:1:2:ffff:ffff:ffff:ffff")); /* one /64 */
    CHECK(!SAME("2001:db8:1:2::1", "2001:db8:1:3::1"));
    CHECK(!SAME("::1", "127.0.0.1"));
    CHECK(SAME(NULL, ""));
    CHECK(!SAME("not an address", "127.0.0.1"));
    CHECK_INT(lp_ratelimit_address_key("a very long text that is no address at all", a),
              LP_RATELIMIT_ADDRESS_KEY_MAX);
#undef SAME
}

struct race {
    lp_ratelimit *rl;
    int got;
};

static void *racer(void *arg)
{
    struct race *r = arg;
    for (int i = 0; i < 20000; i++)
        r->got +=
            lp_ratelimit_take(r->rl, LP_RATE_SCORE, LP_RATE_CREDENTIAL, "shared", 6, 1, T0, NULL);
    return NULL;
}

/* Four threads on one key at one instant: exactly the burst is handed out. */
static void test_concurrent_takers(void)
{
    lp_ratelimit *rl = table(1, 1000, 1, 0);
    struct race r[4];
    pthread_t th[4];
    for (int i = 0; i < 4; i++) {
        r[i] = (struct race){rl, 0};
        pthread_create(&th[i], NULL, racer, &r[i]);
    }
    int total = 0;
    for (int i = 0; i < 4; i++) {
        pthread_join(th[i], NULL);
        total += r[i].got;
    }
    CHECK_INT(total, 1000);
    lp_ratelimit_free(rl);
}

int main(void)
{
    test_burst_and_refill();
    test_fractional_rate();
    test_peek_spends_nothing();
    test_unlimited_class();
    test_address_factor_and_separation();
    test_table_bound();
    test_address_keys();
    test_concurrent_takers();
    return check_summary();
}
