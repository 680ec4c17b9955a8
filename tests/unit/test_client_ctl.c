/*
 * test_client_ctl.c — CTL corruption simulation (client side, no server).
 *
 * - options: off by default; alpha outside [0, 0.5], unknown strategies and
 *   backdoor are refused at open;
 * - the coins follow the construction documented in client/lib/ctl.h (recomputed
 *   here independently with libsodium), are deterministic from (seed, memo
 *   key), depend on the seed, and hit at rate alpha (binomial bounds from
 *   the sample size, fixed keys and seeds, so the counts never change);
 * - every strategy's label, in canonical and presented orientation;
 * - through the answer path with epsilon = infinity (RR is the identity), z
 *   is exactly the corrupted label; with a finite epsilon the report rate
 *   matches alpha(1-q) + (1-alpha)q (CSPRNG, 5-sigma binomial bound);
 * - the memo keeps one answer: a re-ask with the simulation off gets the
 *   simulated answer, still marked simulated;
 * - nothing of the simulation is on the wire: the signed message is the
 *   standard seven-field object, its canonical bytes have the standard
 *   length and verify; the ledger records the settings;
 * - a schema-1 ledger migrates to schema 2.
 */
#include "ldpref.h"

#include "annotator_client.h"
#include "canon.h"
#include "check.h"
#include "ctl.h"
#include "error.h"
#include "internal.h"
#include "ports.h"
#include "rr.h"
#include "tmpdir.h"
#include "wire.h"

#include <math.h>
#include <sodium.h>
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static char dir[64];
static char url[64];

/* |count - n p| <= 5 sd: a binomial count outside fails with probability
 * < 6e-7 (and the coin tests use fixed keys and seeds: they never change). */
static void check_binomial(long count, long n, double p, const char *what)
{
    double sd = sqrt(n * p * (1 - p)), dev = fabs(count - n * p);
    check_record(dev <= 5 * sd, __FILE__, __LINE__, "%s: %ld of %ld, expected %.1f +- %.1f (5 sd)",
                 what, count, n, n * p, 5 * sd);
}

/* Fixed memo keys: BLAKE2b of the index. */
static void fixed_key(long i, uint8_t key[LPC_MEMO_KEY_BYTES])
{
    char in[32];
    int n = snprintf(in, sizeof in, "key %ld", i);
    crypto_generichash(key, LPC_MEMO_KEY_BYTES, (const uint8_t *)in, (size_t)n, NULL, 0);
}

/* word_k of ctl.h, recomputed from its documentation. */
static uint64_t doc_word(const uint8_t key[32], int purpose, uint64_t seed, uint64_t k)
{
    uint8_t in[13 + 1 + 8 + 8], out[16];
    memcpy(in, "ldpref/ctl/v1", 13);
    in[13] = (uint8_t)purpose;
    for (int i = 0; i < 8; i++) {
        in[14 + i] = (uint8_t)(seed >> (56 - 8 * i));
        in[22 + i] = (uint8_t)(k >> (56 - 8 * i));
    }
    crypto_generichash(out, sizeof out, in, sizeof in, key, 32);
    uint64_t w = 0;
    for (int i = 0; i < 8; i++)
        w = (w << 8) | out[i];
    return w;
}

static ldpref_client *open_client(const char *name, double alpha, const char *strategy,
                                  uint64_t seed, double cap, int *rc_out)
{
    char key[128];
    if (annotator_key_ensure(dir, name, key, sizeof key) != LDPREF_OK)
        return NULL;
    ldpref_options o;
    annotator_options_init(&o, url, key, cap, INFINITY);
    o.connect_timeout_ms = 2000;
    o.timeout_ms = 4000;
    o.simulate_ctl_alpha = alpha;
    o.simulate_ctl_strategy = strategy;
    o.simulate_ctl_seed = seed;
    ldpref_client *c = NULL;
    int rc = ldpref_client_open(&o, &c);
    if (rc_out)
        *rc_out = rc;
    return c;
}

static void test_options(void)
{
    ldpref_options o;
    memset(&o, 0x5a, sizeof o);
    ldpref_options_init(&o);
    CHECK(o.simulate_ctl_alpha == 0.0); /* off by default */
    CHECK(o.simulate_ctl_strategy == NULL);
    CHECK_INT(o.simulate_ctl_seed, 0);
    int rc;
    ldpref_client *c;
    const double bad_alpha[] = {-0.01, 0.5000001, 1.0, NAN, INFINITY};
    for (size_t i = 0; i < sizeof bad_alpha / sizeof *bad_alpha; i++) {
        c = open_client("opt", bad_alpha[i], "flip", 1, 1.0, &rc);
        CHECK(c == NULL);
        CHECK_ERR(rc, LP_EINVALID_ARGUMENT);
        ldpref_client_close(c);
    }
    const char *bad_strategy[] = {"backdoor", "bogus", "", "Flip"};
    for (size_t i = 0; i < sizeof bad_strategy / sizeof *bad_strategy; i++) {
        c = open_client("opt", 0.1, bad_strategy[i], 1, 1.0, &rc);
        CHECK(c == NULL);
        CHECK_ERR(rc, LP_EINVALID_ARGUMENT);
        ldpref_client_close(c);
    }
    /* Validated even while off: a typo never goes unnoticed. */
    c = open_client("opt", 0.0, "backdor", 1, 1.0, &rc);
    CHECK_ERR(rc, LP_EINVALID_ARGUMENT);
    ldpref_client_close(c);
    const char *good[] = {"flip", "anti", "constant0", "constant1", "random", NULL};
    for (size_t i = 0; i < sizeof good / sizeof *good; i++) {
        c = open_client("opt", i == 5 ? 0.0 : 0.5, good[i], 7, 1.0, &rc);
        CHECK_ERR(rc, LP_OK);
        if (c) {
            CHECK_STR(lp_adversary_name(c->ctl.strategy), good[i] ? good[i] : "flip");
            CHECK(c->ctl.alpha == (i == 5 ? 0.0 : 0.5));
            CHECK_INT(c->ctl.seed, 7);
        }
        ldpref_client_close(c);
    }
    char msg[256] = "";
    lp_adversary s = LP_ADV_COUNT;
    CHECK_ERR(lpc_ctl_parse_strategy("backdoor", &s, msg, sizeof msg), LP_EINVALID_ARGUMENT);
    CHECK(strstr(msg, "feature") != NULL);
    CHECK_INT(s, LP_ADV_COUNT);
}

static void test_coin_construction(void)
{
    /* p = 1/4 has one bit: the first word decides, u < 2^62, except for
     * u == 2^62 exactly (probability 2^-64). */
    int agree = 0;
    for (long i = 0; i < 2000; i++) {
        uint8_t key[32];
        fixed_key(i, key);
        uint64_t w = doc_word(key, LPC_CTL_COIN_HUBER, 99, 0);
        agree += lpc_ctl_coin(99, key, LPC_CTL_COIN_HUBER, 0.25) == (w < (UINT64_C(1) << 62));
        uint64_t wr = doc_word(key, LPC_CTL_COIN_RANDOM, 99, 0);
        agree += lpc_ctl_coin(99, key, LPC_CTL_COIN_RANDOM, 0.5) == (wr < (UINT64_C(1) << 63));
    }
    CHECK_INT(agree, 4000);
    /* Edges are exact. */
    uint8_t key[32];
    fixed_key(1, key);
    CHECK_INT(lpc_ctl_coin(5, key, LPC_CTL_COIN_HUBER, 0.0), 0);
    CHECK_INT(lpc_ctl_coin(5, key, LPC_CTL_COIN_HUBER, 1.0), 1);
}

static void test_coin_rates(void)
{
    enum { N = 40000 };
    const double alphas[] = {0.5, 0.2, 0.01};
    for (size_t a = 0; a < sizeof alphas / sizeof *alphas; a++) {
        double alpha = alphas[a];
        lpc_ctl ctl = {.alpha = alpha, .strategy = LP_ADV_RANDOM, .seed = 12345};
        lpc_ctl other = ctl;
        other.seed = 12346;
        long hits = 0, ones = 0, same_again = 0, agree_other = 0;
        for (long i = 0; i < N; i++) {
            uint8_t key[32];
            fixed_key(i, key);
            int hit, hit2, hit_o;
            int y = lpc_ctl_apply(&ctl, key, 0, 0, &hit);
            int y2 = lpc_ctl_apply(&ctl, key, 0, 0, &hit2);
            (void)lpc_ctl_apply(&other, key, 0, 0, &hit_o);
            hits += hit;
            ones += hit && y == 1;
            same_again += hit == hit2 && y == y2;
            agree_other += hit == hit_o;
        }
        CHECK_INT(same_again, N); /* deterministic from (seed, key) */
        check_binomial(hits, N, alpha, "Huber coin rate");
        /* The random strategy's coin is independent of the Huber coin. */
        check_binomial(ones, N, alpha / 2, "random strategy: corrupted and 1");
        /* Another seed gives independent coins: agreement a^2 + (1-a)^2, not 1. */
        check_binomial(agree_other, N, alpha * alpha + (1 - alpha) * (1 - alpha),
                       "agreement between two seeds");
    }
    /* alpha 0: never corrupted. */
    lpc_ctl off = {.alpha = 0.0, .strategy = LP_ADV_FLIP, .seed = 1};
    long any = 0;
    for (long i = 0; i < 1000; i++) {
        uint8_t key[32];
        fixed_key(i, key);
        int hit;
        any += lpc_ctl_apply(&off, key, i & 1, (int)(i >> 1) & 1, &hit) != ((i >> 1) & 1) || hit;
    }
    CHECK_INT(any, 0);
}

/* Every strategy's label on corrupted and clean comparisons. */
static void test_strategies(void)
{
    long wrong = 0, corrupted = 0;
    for (lp_adversary s = 0; s < LP_ADV_COUNT; s++) {
        if (s == LP_ADV_BACKDOOR) /* refused at open */
            continue;
        lpc_ctl ctl = {.alpha = 0.5, .strategy = s, .seed = 777};
        for (long i = 0; i < 400; i++) {
            uint8_t key[32];
            fixed_key(i, key);
            int swapped = (int)(i & 1), y = (int)((i >> 1) & 1), hit;
            int got = lpc_ctl_apply(&ctl, key, swapped, y, &hit);
            int want = y;
            if (hit) {
                corrupted++;
                switch (s) {
                case LP_ADV_FLIP:
                case LP_ADV_ANTI:
                    want = 1 - y;
                    break;
                case LP_ADV_CONSTANT0: /* "a" as presented: prefer_b 0 */
                    want = 0 ^ swapped;
                    break;
                case LP_ADV_CONSTANT1: /* "b" as presented: prefer_b 1 */
                    want = 1 ^ swapped;
                    break;
                case LP_ADV_RANDOM:
                    want = lpc_ctl_coin(777, key, LPC_CTL_COIN_RANDOM, 0.5);
                    break;
                default: /* backdoor: skipped above */
                    break;
                }
            }
            wrong += got != want;
        }
    }
    CHECK_INT(wrong, 0);
    CHECK(corrupted > 0);
}

static ldpref_task make_task(int64_t id, const char *p, const char *a, const char *b, double eps)
{
    ldpref_task t = {.task_id = id,
                     .campaign = "default",
                     .prompt = (char *)p,
                     .a = (char *)a,
                     .b = (char *)b,
                     .epsilon_proposed = eps,
                     .epsilon_min = 0.01,
                     .epsilon_max = INFINITY};
    return t;
}

/* epsilon = infinity: RR is the identity, so z is exactly the CTL label. */
static void test_answer_exact(void)
{
    enum { N = 200 };
    ldpref_client *c = open_client("exact", 0.3, "flip", 4242, INFINITY, NULL);
    ldpref_client *plain = open_client("plain", 0.0, NULL, 0, INFINITY, NULL);
    CHECK(c != NULL && plain != NULL);
    if (c == NULL || plain == NULL)
        return;
    long exact = 0, flipped = 0, marked = 0, plain_exact = 0;
    for (int k = 0; k < N; k++) {
        char p[32], a[32], b[32];
        snprintf(p, sizeof p, "prompt %d", k);
        snprintf(a, sizeof a, "first %d", k);
        snprintf(b, sizeof b, "second %d", k);
        ldpref_task t = make_task(k + 1, p, a, b, INFINITY);
        int prefer_b = k % 3 == 0, existed = 0, simulated = -1;
        lp_label_msg m;
        if (lpc_answer_prepare(c, &t, prefer_b, &m, &existed, &simulated) != LP_OK)
            continue;
        uint8_t key[32];
        int swapped;
        lpc_memo_key(lpc_ledger_secret(c->ledger), &t, key, &swapped);
        int want = lpc_ctl_apply(&c->ctl, key, swapped, prefer_b ^ swapped, NULL) ^ swapped;
        exact += m.z == want && isinf(m.epsilon);
        flipped += m.z != prefer_b;
        marked += simulated == 1 && !existed;
        if (lpc_answer_prepare(plain, &t, prefer_b, &m, &existed, &simulated) == LP_OK)
            plain_exact += m.z == prefer_b && simulated == 0;
    }
    CHECK_INT(exact, N);
    CHECK_INT(marked, N);
    CHECK_INT(plain_exact, N);
    check_binomial(flipped, N, 0.3, "flip with epsilon = inf");
    ldpref_budget bud;
    CHECK_ERR(ldpref_budget_get(c, &bud), LP_OK);
    CHECK_INT(bud.simulated, N);
    CHECK_INT(bud.labels, N);
    CHECK_ERR(ldpref_budget_get(plain, &bud), LP_OK);
    CHECK_INT(bud.simulated, 0);
    ldpref_client_close(c);
    ldpref_client_close(plain);
}

/* Finite epsilon: P(report != truth) = alpha (1 - q) + (1 - alpha) q. */
static void test_answer_rate(void)
{
    enum { N = 2000 };
    const double alpha = 0.25, eps = 1.0, q = lp_rr_flip_prob(eps);
    ldpref_client *c = open_client("rate", alpha, "anti", 31337, 1.0, NULL);
    CHECK(c != NULL);
    if (c == NULL)
        return;
    long differ = 0, done = 0;
    for (int k = 0; k < N; k++) {
        char p[32];
        snprintf(p, sizeof p, "rate prompt %d", k);
        ldpref_task t = make_task(k + 1, p, "left", "right", eps);
        int prefer_b = k & 1, existed = 0, simulated = 0;
        lp_label_msg m;
        if (lpc_answer_prepare(c, &t, prefer_b, &m, &existed, &simulated) == LP_OK && simulated) {
            done++;
            differ += m.z != prefer_b;
        }
    }
    CHECK_INT(done, N);
    double p = alpha * (1 - q) + (1 - alpha) * q;
    check_binomial(differ, N, p, "CTL then RR: reports opposing the truth");
    /* Without the corruption the rate would be q: far outside the bound. */
    CHECK(fabs(N * p - N * q) > 10 * sqrt(N * p * (1 - p)));
    ldpref_client_close(c);
}

/* One answer per comparison, whatever the simulation settings later. */
static void test_memo_provenance(void)
{
    ldpref_client *sim = open_client("prov", 0.5, "constant1", 3, INFINITY, NULL);
    CHECK(sim != NULL);
    if (sim == NULL)
        return;
    long same = 0, still_marked = 0;
    lp_label_msg first[50];
    for (int k = 0; k < 50; k++) {
        char p[32];
        snprintf(p, sizeof p, "prov %d", k);
        ldpref_task t = make_task(k + 1, p, "x", "y", INFINITY);
        int existed, simulated;
        CHECK_ERR(lpc_answer_prepare(sim, &t, 0, &first[k], &existed, &simulated), LP_OK);
    }
    ldpref_client_close(sim);
    /* Same ledger, simulation off, comparisons re-issued swapped under new ids. */
    ldpref_client *off = open_client("prov", 0.0, NULL, 0, INFINITY, NULL);
    CHECK(off != NULL);
    if (off == NULL)
        return;
    for (int k = 0; k < 50; k++) {
        char p[32];
        snprintf(p, sizeof p, "prov %d", k);
        ldpref_task t = make_task(1000 + k, p, "y", "x", INFINITY);
        int existed = 1, simulated = 0;
        lp_label_msg m;
        if (lpc_answer_prepare(off, &t, 1, &m, &existed, &simulated) != LP_OK)
            continue;
        same += m.z == 1 - first[k].z && !existed;
        still_marked += simulated;
    }
    CHECK_INT(same, 50);
    CHECK_INT(still_marked, 50);
    int64_t memo = 0, spend = 0;
    CHECK_ERR(lpc_ledger_counts(off->ledger, &memo, &spend, NULL, NULL), LP_OK);
    CHECK_INT(memo, 50);
    CHECK_INT(spend, 50);
    ldpref_client_close(off);
}

/* The stored (to be sent) message of a simulated answer is the standard one. */
static void test_wire_unchanged(void)
{
    ldpref_client *sim = open_client("wire-sim", 0.5, "random", 99, 1.0, NULL);
    ldpref_client *plain = open_client("wire-plain", 0.0, NULL, 0, 1.0, NULL);
    CHECK(sim != NULL && plain != NULL);
    if (sim == NULL || plain == NULL)
        return;
    static const char *const std_keys[] = {"key",   "task_id",   "z",         "epsilon",
                                           "nonce", "timestamp", "signature", NULL};
    for (int k = 0; k < 40; k++) {
        char p[32];
        snprintf(p, sizeof p, "wire %d", k);
        ldpref_task t = make_task(k + 1, p, "aa", "bb", 1.0);
        lp_label_msg ms, mp;
        int existed, simulated = 0, psim = 1;
        if (lpc_answer_prepare(sim, &t, k & 1, &ms, &existed, &simulated) != LP_OK ||
            lpc_answer_prepare(plain, &t, k & 1, &mp, &existed, &psim) != LP_OK) {
            CHECK(0);
            continue;
        }
        char *text = NULL, *receipt = NULL;
        int stored_sim = 0;
        CHECK_ERR(lpc_ledger_outbox_get(sim->ledger, sim->server, t.task_id, &text, &receipt,
                                        &stored_sim),
                  LP_OK);
        int ok = simulated == 1 && psim == 0 && stored_sim == 1 && text != NULL;
        json_t *obj = text ? json_loads(text, JSON_REJECT_DUPLICATES, NULL) : NULL;
        ok &= json_object_size(obj) == 7;
        for (int i = 0; std_keys[i]; i++)
            ok &= json_object_get(obj, std_keys[i]) != NULL;
        /* Byte for byte what the standard encoder makes of the message. */
        json_t *re = lp_wire_label_encode(&ms);
        char *retext = json_dumps(re, JSON_COMPACT);
        ok &= retext && text && strcmp(retext, text) == 0;
        /* (No substring search for "sim"/"ctl": base64 values can contain
         * any short string. The seven keys and the equality above suffice.) */
        ok &= json_integer_value(json_object_get(obj, "task_id")) == t.task_id &&
              json_real_value(json_object_get(obj, "epsilon")) == 1.0;
        /* Standard canonical bytes: same layout and length as a real answer. */
        uint8_t cs[LP_CANON_MAX], cp[LP_CANON_MAX];
        size_t ls = lp_canon_label(&ms, cs), lpl = lp_canon_label(&mp, cp);
        ok &= ls == lpl && ls == 4 + 15 + 4 + 32 + 4 + 8 + 4 + 1 + 4 + 8 + 4 + 16 + 4 + 8;
        ok &= memcmp(cs, cp, 4 + 15) == 0 && memcmp(cs + 4, "ldpref/label/v1", 15) == 0;
        ok &= lp_verify_label(&ms) == LP_OK;
        CHECK(ok);
        free(retext);
        json_decref(re);
        json_decref(obj);
        free(text);
        free(receipt);
    }
    /* The ledger records the settings with the simulated answers only. */
    sqlite3 *db = NULL;
    char path[128];
    snprintf(path, sizeof path, "%s/wire-sim.ledger", dir);
    if (sqlite3_open_v2(path, &db, SQLITE_OPEN_READONLY, NULL) == SQLITE_OK) {
        sqlite3_stmt *st = NULL;
        long rows = 0, described = 0;
        if (sqlite3_prepare_v2(
                db, "SELECT simulation FROM memo UNION ALL SELECT simulation FROM outbox", -1, &st,
                NULL) == SQLITE_OK)
            while (sqlite3_step(st) == SQLITE_ROW) {
                const char *s = (const char *)sqlite3_column_text(st, 0);
                rows++;
                described += s && strstr(s, "\"strategy\":\"random\"") &&
                             strstr(s, "\"seed\":99") && strstr(s, "\"alpha\":0.5");
            }
        sqlite3_finalize(st);
        CHECK_INT(rows, 80);
        CHECK_INT(described, 80);
    } else {
        CHECK(0);
    }
    sqlite3_close(db);
    ldpref_client_close(sim);
    ldpref_client_close(plain);
}

/* A schema-1 ledger (no simulation columns, no skipped table, no sketches) is migrated on
 * open. */
static void test_migration(void)
{
    ldpref_client *c = open_client("migrate", 0.0, NULL, 0, 1.0, NULL);
    CHECK(c != NULL);
    if (c == NULL)
        return;
    ldpref_task t = make_task(1, "old", "a", "b", 1.0);
    lp_label_msg m;
    int existed, simulated;
    CHECK_ERR(lpc_answer_prepare(c, &t, 1, &m, &existed, &simulated), LP_OK);
    ldpref_client_close(c);
    char path[128];
    snprintf(path, sizeof path, "%s/migrate.ledger", dir);
    sqlite3 *db = NULL;
    CHECK(sqlite3_open(path, &db) == SQLITE_OK);
    CHECK(sqlite3_exec(db,
                       "ALTER TABLE memo DROP COLUMN simulation; ALTER TABLE outbox DROP COLUMN "
                       "simulation; DROP TABLE skipped; ALTER TABLE memo DROP COLUMN sketch; "
                       "ALTER TABLE task DROP COLUMN exact_key; ALTER TABLE task DROP COLUMN "
                       "exact_swapped; ALTER TABLE task DROP COLUMN sketch; DROP TABLE memo_probe; "
                       "PRAGMA user_version = 1;",
                       NULL, NULL, NULL) == SQLITE_OK);
    sqlite3_close(db);
    c = open_client("migrate", 0.2, "flip", 1, 1.0, NULL);
    CHECK(c != NULL);
    if (c == NULL)
        return;
    lp_label_msg again;
    CHECK_ERR(lpc_answer_prepare(c, &t, 0, &again, &existed, &simulated), LP_OK);
    CHECK_INT(existed, 1); /* the old outbox row, unchanged */
    CHECK_INT(simulated, 0);
    CHECK_INT(again.z, m.z);
    ldpref_task t2 = make_task(2, "new", "a", "b", 1.0);
    CHECK_ERR(lpc_answer_prepare(c, &t2, 0, &again, &existed, &simulated), LP_OK);
    CHECK_INT(simulated, 1);
    ldpref_client_close(c);
    CHECK(sqlite3_open(path, &db) == SQLITE_OK);
    sqlite3_stmt *st = NULL;
    int version = -1;
    if (sqlite3_prepare_v2(db, "PRAGMA user_version", -1, &st, NULL) == SQLITE_OK &&
        sqlite3_step(st) == SQLITE_ROW)
        version = sqlite3_column_int(st, 0);
    sqlite3_finalize(st);
    CHECK_INT(version, 4);
    sqlite3_close(db);
}

int main(void)
{
    if (lp_rng_init() != LP_OK)
        return 1;
    if (tmpdir_create_shm(dir, sizeof dir, "ctl") != 0)
        return 1;
    snprintf(url, sizeof url, "http://127.0.0.1:%d", closed_port());
    test_options();
    test_coin_construction();
    test_coin_rates();
    test_strategies();
    test_answer_exact();
    test_answer_rate();
    test_memo_provenance();
    test_wire_unchanged();
    test_migration();
    tmpdir_remove(dir);
    return check_summary();
}
