/*
 * test_client_answer.c — the three-valued answer of libldpref (A, B, can't
 * tell) and the already-answered rule, without a server (the ledger is a
 * real SQLite file; the server URL is a closed loopback port).
 *
 * - the mechanism over the OS CSPRNG (lpc_randomize_choice), 200,000 draws
 *   per input and epsilon (0.1, 1, 5, infinity): A and B are reported
 *   flipped at rate q(eps) = 1/(1+e^eps), can't tell is reported "b" at rate
 *   1/2 — each count within EXACT binomial bounds whose two-sided
 *   false-failure probability is below 1e-9 per check (the CSPRNG cannot be
 *   seeded, so the bounds make a false alarm negligible instead);
 * - through the real answer path (memo, budget, ledger, signing): the same
 *   rates on distinct comparisons at eps = 1, every label spends epsilon,
 *   a can't-tell label is the standard message (z 0 or 1, the campaign's
 *   epsilon), and is memoized like any answer;
 * - CTL simulation of a can't-tell answer: flip leaves it a tie (a fair
 *   coin), constant1 replaces it by "b";
 * - a task id answered before sends nothing new and draws nothing new: with
 *   the server unreachable the stored message is what is retried.
 */
#include "ldpref.h"

#include "annotator_client.h"
#include "check.h"
#include "ctl.h"
#include "error.h"
#include "internal.h"
#include "ports.h"
#include "rr.h"
#include "tmpdir.h"
#include "wire.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define DRAWS 200000
#define FALSE_FAILURE 1e-9

static char dir[64];
static char url[64];

/* log P(X = k) for X ~ Binomial(n, p), 0 < p < 1. */
static double binom_logpmf(long k, long n, double p)
{
    return lgamma(n + 1.0) - lgamma(k + 1.0) - lgamma(n - k + 1.0) + k * log(p) +
           (n - k) * log1p(-p);
}

/* The exact acceptance interval [*lo, *hi] of Binomial(n, p): the largest lo
 * with P(X < lo) <= alpha/2 and the smallest hi with P(X > hi) <= alpha/2,
 * from the summed probability mass (p = 0 or 1: the one possible value). */
static void binom_bounds(long n, double p, double alpha, long *lo, long *hi)
{
    if (p <= 0 || p >= 1) {
        *lo = *hi = p <= 0 ? 0 : n;
        return;
    }
    double below = 0;
    long k = 0;
    while (k <= n && below + exp(binom_logpmf(k, n, p)) <= alpha / 2)
        below += exp(binom_logpmf(k++, n, p));
    *lo = k;
    double above = 0;
    k = n;
    while (k >= 0 && above + exp(binom_logpmf(k, n, p)) <= alpha / 2)
        above += exp(binom_logpmf(k--, n, p));
    *hi = k;
}

static void check_binomial(long count, long n, double p, const char *what, double eps)
{
    long lo, hi;
    binom_bounds(n, p, FALSE_FAILURE, &lo, &hi);
    check_record(count >= lo && count <= hi, __FILE__, __LINE__,
                 "%s at eps=%g: %ld of %ld, exact bounds [%ld, %ld] (p = %.6f)", what, eps, count,
                 n, lo, hi, p);
}

static void test_bounds(void)
{
    long lo, hi;
    /* Binomial(10, 1/2): P(X <= 0) = P(X >= 10) = 1/1024. */
    binom_bounds(10, 0.5, 2.0 / 1024, &lo, &hi);
    CHECK_INT(lo, 1);
    CHECK_INT(hi, 9);
    binom_bounds(10, 0.5, 2.0 / 1024 - 1e-12, &lo, &hi);
    CHECK_INT(lo, 0);
    CHECK_INT(hi, 10);
    /* Symmetric and around the mean for the sizes used here. */
    binom_bounds(DRAWS, 0.5, FALSE_FAILURE, &lo, &hi);
    CHECK_INT(lo + hi, DRAWS);
    CHECK(lo < DRAWS / 2 && DRAWS / 2 - lo < 7 * sqrt(DRAWS * 0.25));
}

static void test_choice_values(void)
{
    CHECK_INT(LDPREF_CHOICE_A, 0);
    CHECK_INT(LDPREF_CHOICE_B, 1);
    CHECK_INT(LDPREF_CHOICE_CANT_TELL, 2);
    CHECK_INT(LDPREF_EALREADY_ANSWERED, 60);
    CHECK_STR(ldpref_error_name(LDPREF_EALREADY_ANSWERED), "already_answered");
    int z = -1;
    CHECK_ERR(lpc_randomize_choice(3, 1.0, &z), LP_EBAD_LABEL);
    CHECK_ERR(lpc_randomize_choice(-1, 1.0, &z), LP_EBAD_LABEL);
    CHECK_ERR(lpc_randomize_choice(LDPREF_CHOICE_CANT_TELL, 0.0, &z), LP_EBAD_EPSILON);
    CHECK_ERR(lpc_randomize_choice(LDPREF_CHOICE_CANT_TELL, NAN, &z), LP_EBAD_EPSILON);
    CHECK_INT(z, -1);
    CHECK_ERR(lpc_randomize_choice(LDPREF_CHOICE_CANT_TELL, INFINITY, &z), LP_OK);
    CHECK(z == 0 || z == 1);
}

/* The mechanism's rates for the three inputs at several epsilons. */
static void test_flip_rates(void)
{
    const double eps_list[] = {0.1, 1, 5, INFINITY};
    for (size_t e = 0; e < sizeof eps_list / sizeof *eps_list; e++) {
        double eps = eps_list[e], q = lp_rr_flip_prob(eps);
        long flips_a = 0, flips_b = 0, ones_tie = 0, errors = 0;
        for (long i = 0; i < DRAWS; i++) {
            int za = -1, zb = -1, zt = -1;
            errors += lpc_randomize_choice(LDPREF_CHOICE_A, eps, &za) != LP_OK;
            errors += lpc_randomize_choice(LDPREF_CHOICE_B, eps, &zb) != LP_OK;
            errors += lpc_randomize_choice(LDPREF_CHOICE_CANT_TELL, eps, &zt) != LP_OK;
            flips_a += za == 1;
            flips_b += zb == 0;
            ones_tie += zt == 1;
        }
        CHECK_INT(errors, 0);
        check_binomial(flips_a, DRAWS, q, "A reported as b", eps);
        check_binomial(flips_b, DRAWS, q, "B reported as a", eps);
        check_binomial(ones_tie, DRAWS, 0.5, "can't tell reported as b", eps);
    }
}

static ldpref_client *client(const char *name, double alpha, const char *strategy)
{
    char key[256];
    if (annotator_key_ensure(dir, name, key, sizeof key) != LDPREF_OK)
        return NULL;
    ldpref_options o;
    annotator_options_init(&o, url, key, INFINITY, INFINITY);
    o.connect_timeout_ms = 2000;
    o.timeout_ms = 4000;
    o.simulate_ctl_alpha = alpha;
    o.simulate_ctl_strategy = strategy;
    o.simulate_ctl_seed = 11;
    ldpref_client *c = NULL;
    CHECK_ERR(ldpref_client_open(&o, &c), LP_OK);
    return c;
}

struct texts {
    char prompt[48], a[48], b[48];
};

static ldpref_task task(int64_t id, struct texts *x, const char *tag, long k, double eps)
{
    snprintf(x->prompt, sizeof x->prompt, "%s prompt %ld", tag, k);
    snprintf(x->a, sizeof x->a, "%s first %ld", tag, k);
    snprintf(x->b, sizeof x->b, "%s second %ld", tag, k);
    ldpref_task t = {.task_id = id,
                     .campaign = "default",
                     .prompt = x->prompt,
                     .a = x->a,
                     .b = x->b,
                     .epsilon_proposed = eps,
                     .epsilon_min = 0.01,
                     .epsilon_max = INFINITY};
    return t;
}

static void counts(ldpref_client *c, int64_t *memo, int64_t *spend, int64_t *outbox)
{
    lpc_ledger *l = NULL;
    CHECK_ERR(lpc_use_ledger(c, &l), LP_OK);
    if (l)
        CHECK_ERR(lpc_ledger_counts(l, memo, spend, outbox, NULL), LP_OK);
}

/* The answer path: memo, spend, signing, for the three inputs at eps = 1. */
static void test_answer_path(void)
{
    enum { N = 3000 };
    ldpref_client *c = client("path", 0, NULL);
    if (c == NULL)
        return;
    const int choices[] = {LDPREF_CHOICE_A, LDPREF_CHOICE_B, LDPREF_CHOICE_CANT_TELL};
    long reported_b[3] = {0}, standard = 0, prepared = 0;
    for (int ci = 0; ci < 3; ci++) {
        for (long k = 0; k < N; k++) {
            struct texts x;
            ldpref_task t = task(1 + ci * N + k, &x, "path", ci * N + k, 1.0);
            lp_label_msg m;
            int existed = -1;
            if (lpc_answer_prepare(c, &t, choices[ci], &m, &existed, NULL) != LP_OK)
                continue;
            prepared += !existed;
            reported_b[ci] += m.z == 1;
            standard += (m.z == 0 || m.z == 1) && m.epsilon == 1.0 && m.task_id == t.task_id;
        }
    }
    CHECK_INT(prepared, 3 * N);
    CHECK_INT(standard, 3 * N);
    double q = lp_rr_flip_prob(1.0);
    check_binomial(reported_b[0], N, q, "A through the ledger, reported as b", 1.0);
    check_binomial(reported_b[1], N, 1 - q, "B through the ledger, reported as b", 1.0);
    check_binomial(reported_b[2], N, 0.5, "can't tell through the ledger, reported as b", 1.0);
    ldpref_budget b;
    CHECK_ERR(ldpref_budget_get(c, &b), LP_OK);
    CHECK_NEAR(b.spent, 3.0 * N, 1e-6); /* a can't tell spends like any label */
    CHECK_INT(b.labels, 3 * N);

    /* A can't tell is memoized: the same comparison under a new task id, in
     * the other order, names the same response and spends nothing. */
    long same = 0;
    for (long k = 0; k < 200; k++) {
        struct texts x;
        ldpref_task t = task(1 + 2 * N + k, &x, "path", 2 * N + k, 1.0);
        lp_label_msg first, again;
        int existed = 0;
        if (lpc_answer_prepare(c, &t, LDPREF_CHOICE_CANT_TELL, &first, &existed, NULL) != LP_OK)
            continue;
        ldpref_task r = t;
        r.task_id = 100000 + k;
        r.a = t.b;
        r.b = t.a;
        if (lpc_answer_prepare(c, &r, LDPREF_CHOICE_A, &again, &existed, NULL) == LP_OK)
            same += !existed && again.z == 1 - first.z;
    }
    CHECK_INT(same, 200);
    CHECK_ERR(ldpref_budget_get(c, &b), LP_OK);
    CHECK_NEAR(b.spent, 3.0 * N, 1e-6);
    ldpref_client_close(c);
}

/* CTL simulation with can't-tell answers at eps = infinity (RR is the
 * identity, so z shows the label after corruption). */
static void test_ctl_ties(void)
{
    enum { N = 2000 };
    ldpref_client *flip = client("ctl-flip", 0.5, "flip");
    ldpref_client *const1 = client("ctl-c1", 0.5, "constant1");
    if (flip == NULL || const1 == NULL) {
        ldpref_client_close(flip);
        ldpref_client_close(const1);
        return;
    }
    long flip_b = 0, hits = 0, hit_b = 0, free_n = 0, free_b = 0;
    for (long k = 0; k < N; k++) {
        struct texts x;
        ldpref_task t = task(k + 1, &x, "ctl", k, INFINITY);
        lp_label_msg m;
        int existed = 0, simulated = 0;
        if (lpc_answer_prepare(flip, &t, LDPREF_CHOICE_CANT_TELL, &m, &existed, &simulated) ==
            LP_OK)
            flip_b += m.z == 1;
        if (lpc_answer_prepare(const1, &t, LDPREF_CHOICE_CANT_TELL, &m, &existed, &simulated) !=
            LP_OK)
            continue;
        uint8_t key[LPC_MEMO_KEY_BYTES];
        int swapped, hit = 0;
        lpc_memo_key(lpc_ledger_secret(const1->ledger), &t, key, &swapped);
        (void)lpc_ctl_apply(&const1->ctl, key, swapped, LPC_CTL_TIE, &hit);
        hits += hit;
        hit_b += hit && m.z == 1;
        free_n += !hit;
        free_b += !hit && m.z == 1;
    }
    check_binomial(flip_b, N, 0.5, "CTL flip of can't tell, reported as b", INFINITY);
    check_binomial(hits, N, 0.5, "CTL constant1 hits", INFINITY);
    CHECK_INT(hit_b, hits);
    check_binomial(free_b, free_n, 0.5, "CTL constant1 not hit, reported as b", INFINITY);
    ldpref_client_close(flip);
    ldpref_client_close(const1);
}

/* A repeat of a task id draws and signs nothing new: with the server
 * unreachable, the stored message is retried (network error), whatever the
 * new choice. */
static void test_repeat_offline(void)
{
    ldpref_client *c = client("repeat", 0, NULL);
    if (c == NULL)
        return;
    struct texts x;
    ldpref_task t = task(7, &x, "repeat", 7, 1.0);
    ldpref_receipt r;
    CHECK_ERR(ldpref_answer(c, &t, LDPREF_CHOICE_B, &r), LP_ENETWORK);
    lp_label_msg first;
    int existed = 0;
    CHECK_ERR(lpc_answer_prepare(c, &t, LDPREF_CHOICE_B, &first, &existed, NULL), LP_OK);
    CHECK_INT(existed, 1);
    for (int choice = LDPREF_CHOICE_A; choice <= LDPREF_CHOICE_CANT_TELL; choice++) {
        CHECK_ERR(ldpref_answer(c, &t, choice, &r), LP_ENETWORK);
        lp_label_msg m;
        CHECK_ERR(lpc_answer_prepare(c, &t, choice, &m, &existed, NULL), LP_OK);
        CHECK(existed && memcmp(&m, &first, sizeof m) == 0);
    }
    CHECK_ERR(ldpref_answer(c, &t, 3, &r), LP_EINVALID_ARGUMENT);
    int64_t memo = -1, spend = -1, outbox = -1;
    counts(c, &memo, &spend, &outbox);
    CHECK_INT(memo, 1);
    CHECK_INT(spend, 1);
    CHECK_INT(outbox, 1);
    ldpref_batch_item items[2];
    memset(items, 0, sizeof items);
    items[0].task = &t;
    items[0].choice = LDPREF_CHOICE_A;
    items[1].task = &t;
    items[1].choice = 5;
    CHECK_ERR(ldpref_answer_batch(c, items, 2), LP_ENETWORK);
    CHECK_ERR(items[1].error, LP_EINVALID_ARGUMENT);
    counts(c, &memo, &spend, &outbox);
    CHECK_INT(spend, 1);
    CHECK_INT(outbox, 1);
    ldpref_client_close(c);
}

int main(void)
{
    if (lp_rng_init() != LP_OK)
        return 1;
    if (tmpdir_create_shm(dir, sizeof dir, "answer") != 0)
        return 1;
    snprintf(url, sizeof url, "http://127.0.0.1:%d", closed_port());
    test_bounds();
    test_choice_values();
    test_flip_rates();
    test_answer_path();
    test_ctl_ties();
    test_repeat_offline();
    tmpdir_remove(dir);
    return check_summary();
}
