/*
 * test_client_ledger.c — the privacy core of libldpref without a server.
 *
 * - the memo is keyed by content: the same comparison with a and b swapped,
 *   or re-issued under a new task id, gets the same randomized answer,
 *   mapped to the presentation order; it spends epsilon once;
 * - 1,000 re-asks of a task give one memo entry, one spend and the
 *   identical signed message;
 * - the local budget is refused before any network activity (server_url
 *   points at a closed 127.0.0.1 port: LOCAL_BUDGET_EXCEEDED, not
 *   NETWORK_ERROR, and the outbox stays empty);
 * - epsilon choice, persistence of the device secret, and that the ledger
 *   file holds neither the content nor the true answer.
 */
#include "ldpref.h"

#include "annotator_client.h"
#include "check.h"
#include "error.h"
#include "internal.h"
#include "ports.h"
#include "rr.h"
#include "tmpdir.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static char dir[64];
static char url[64];

static ldpref_client *client(const char *name, double cap_label, double cap_total)
{
    char key[256];
    if (annotator_key_ensure(dir, name, key, sizeof key) != LDPREF_OK)
        return NULL;
    ldpref_options o;
    annotator_options_init(&o, url, key, cap_label, cap_total);
    o.connect_timeout_ms = 2000;
    o.timeout_ms = 4000;
    ldpref_client *c = NULL;
    CHECK_ERR(ldpref_client_open(&o, &c), LP_OK);
    return c;
}

static ldpref_task task(int64_t id, const char *prompt, const char *a, const char *b, double eps)
{
    ldpref_task t = {.task_id = id,
                     .campaign = "default",
                     .prompt = (char *)prompt,
                     .a = (char *)a,
                     .b = (char *)b,
                     .epsilon_proposed = eps,
                     .epsilon_min = 0.01,
                     .epsilon_max = 10};
    return t;
}

static void counts(ldpref_client *c, int64_t *memo, int64_t *spend, int64_t *outbox)
{
    lpc_ledger *l = NULL;
    CHECK_ERR(lpc_use_ledger(c, &l), LP_OK);
    if (l)
        CHECK_ERR(lpc_ledger_counts(l, memo, spend, outbox, NULL), LP_OK);
}

/* The memo key of a comparison without context. */
static void memo_key(const uint8_t *secret, const char *prompt, const char *a, const char *b,
                     uint8_t key[32], int *swapped)
{
    ldpref_task t = task(1, prompt, a, b, 1.0);
    lpc_memo_key(secret, &t, key, swapped);
}

static void test_memo_key(void)
{
    uint8_t secret[LPC_DEVICE_SECRET_BYTES] = {1, 2, 3}, other[LPC_DEVICE_SECRET_BYTES] = {9};
    uint8_t k1[32], k2[32], k3[32];
    int s1, s2, s3;
    memo_key(secret, "p", "first", "second", k1, &s1);
    memo_key(secret, "p", "second", "first", k2, &s2);
    CHECK(memcmp(k1, k2, 32) == 0);
    CHECK_INT(s1 ^ s2, 1);
    memo_key(secret, "q", "first", "second", k3, &s3);
    CHECK(memcmp(k1, k3, 32) != 0);
    memo_key(other, "p", "first", "second", k3, &s3);
    CHECK(memcmp(k1, k3, 32) != 0); /* keyed by the device secret */
    /* Length prefixes: moving bytes between fields changes the key. */
    memo_key(secret, "ab", "c", "d", k1, &s1);
    memo_key(secret, "a", "bc", "d", k2, &s2);
    CHECK(memcmp(k1, k2, 32) != 0);
    /* Identical responses: orientation is irrelevant and stable. */
    memo_key(secret, "p", "same", "same", k1, &s1);
    CHECK_INT(s1, 0);
}

/* Swapped and re-issued comparisons reuse the randomized answer. */
static void test_content_memo(void)
{
    enum { N = 300 };
    ldpref_client *c = client("memo", 1.0, 1e9);
    if (c == NULL)
        return;
    int consistent = 0, ones = 0;
    for (int k = 0; k < N; k++) {
        char p[64], a[64], b[64];
        snprintf(p, sizeof p, "prompt %d", k);
        snprintf(a, sizeof a, "response A of %d", k);
        snprintf(b, sizeof b, "response B of %d", k);
        ldpref_task orig = task(1 + 3 * k, p, a, b, 1.0);
        ldpref_task swapped = task(2 + 3 * k, p, b, a, 1.0);
        ldpref_task reissued = task(3 + 3 * k, p, a, b, 1.0);
        lp_label_msg m1, m2, m3;
        int existed = 0;
        /* True preference: the response "A of k" (prefer_b = 0 in orig). */
        int ok = lpc_answer_prepare(c, &orig, 0, &m1, &existed, NULL) == LP_OK && !existed;
        ok &= lpc_answer_prepare(c, &swapped, 1, &m2, &existed, NULL) == LP_OK && !existed;
        /* Even a different "true" answer cannot re-randomize. */
        ok &= lpc_answer_prepare(c, &reissued, 1, &m3, &existed, NULL) == LP_OK && !existed;
        ok &= m2.z == 1 - m1.z && m3.z == m1.z;
        ok &= m1.epsilon == 1.0 && m2.epsilon == 1.0 && m3.epsilon == 1.0;
        ok &= lp_verify_label(&m1) == LP_OK && lp_verify_label(&m2) == LP_OK;
        ok &= m1.task_id == orig.task_id && m2.task_id == swapped.task_id;
        consistent += ok;
        ones += m1.z == 0; /* reported the truly preferred "A of k" */
    }
    CHECK_INT(consistent, N);
    int64_t memo = -1, spend = -1, outbox = -1;
    counts(c, &memo, &spend, &outbox);
    CHECK_INT(memo, N);
    CHECK_INT(spend, N);
    CHECK_INT(outbox, 3 * N);
    ldpref_budget b;
    CHECK_ERR(ldpref_budget_get(c, &b), LP_OK);
    CHECK_NEAR(b.spent, N * 1.0, 1e-9);
    CHECK_INT(b.labels, N);
    CHECK_INT(b.pending, 3 * N);
    /* The truth is reported with probability 1 - q(1) = 0.731; the mapping
     * check above is not vacuous: both answers occur. Tolerance: 5 binomial
     * standard deviations. */
    double p = 1 - lp_rr_flip_prob(1.0), sd = sqrt(p * (1 - p) / N);
    CHECK_NEAR((double)ones / N, p, 5 * sd);
    CHECK(ones > 0 && ones < N);
    ldpref_client_close(c);

    /* The device secret persists: after reopening, a re-issued comparison
     * still finds its memo entry and spends nothing. */
    c = client("memo", 1.0, 1e9);
    if (c == NULL)
        return;
    ldpref_task again = task(100000, "prompt 7", "response B of 7", "response A of 7", 1.0);
    ldpref_task first = task(1 + 3 * 7, "prompt 7", "response A of 7", "response B of 7", 1.0);
    lp_label_msg ma, mf;
    int existed = 0;
    CHECK_ERR(lpc_answer_prepare(c, &again, 0, &ma, &existed, NULL), LP_OK);
    CHECK_INT(existed, 0);
    CHECK_ERR(lpc_answer_prepare(c, &first, 0, &mf, &existed, NULL), LP_OK);
    CHECK_INT(existed, 1);
    CHECK_INT(ma.z, 1 - mf.z);
    counts(c, &memo, &spend, &outbox);
    CHECK_INT(memo, N);
    CHECK_INT(spend, N);
    ldpref_client_close(c);
}

/* 1,000 re-asks: one memo entry, one spend, the identical message. */
static void test_reask(void)
{
    ldpref_client *c = client("reask", 1.0, 1e9);
    if (c == NULL)
        return;
    ldpref_task t = task(42, "Which is kinder?", "Yes.", "No.", 1.0);
    lp_label_msg first, m;
    int existed = 0, identical = 0;
    CHECK_ERR(lpc_answer_prepare(c, &t, 1, &first, &existed, NULL), LP_OK);
    for (int i = 0; i < 1000; i++) {
        int rc = lpc_answer_prepare(c, &t, i & 1, &m, &existed, NULL);
        identical += rc == LP_OK && existed && memcmp(&m, &first, sizeof m) == 0;
    }
    CHECK_INT(identical, 1000);
    /* Re-asks under new ids and either orientation: new messages, same z. */
    int same = 0;
    for (int i = 0; i < 1000; i++) {
        ldpref_task r = i & 1 ? task(1000 + i, t.prompt, t.b, t.a, 1.0)
                              : task(1000 + i, t.prompt, t.a, t.b, 1.0);
        int rc = lpc_answer_prepare(c, &r, i & 1, &m, &existed, NULL);
        same += rc == LP_OK && !existed && m.z == ((i & 1) ? 1 - first.z : first.z);
    }
    CHECK_INT(same, 1000);
    int64_t memo = -1, spend = -1, outbox = -1;
    counts(c, &memo, &spend, &outbox);
    CHECK_INT(memo, 1);
    CHECK_INT(spend, 1);
    CHECK_INT(outbox, 1001);

    /* Through the public call: the network is down, the message stays in
     * the outbox unchanged, still one spend. */
    ldpref_receipt r;
    CHECK_ERR(ldpref_answer(c, &t, 0, &r), LP_ENETWORK);
    CHECK(strstr(ldpref_errmsg(c), "127.0.0.1") != NULL);
    CHECK_ERR(lpc_answer_prepare(c, &t, 0, &m, &existed, NULL), LP_OK);
    CHECK(existed && memcmp(&m, &first, sizeof m) == 0);
    size_t sent = 9, pending = 0;
    CHECK_ERR(ldpref_resend_pending(c, &sent, &pending), LP_ENETWORK);
    CHECK_INT(sent, 0);
    counts(c, &memo, &spend, &outbox);
    CHECK_INT(spend, 1);
    ldpref_client_close(c);
}

/* Budget refusals happen before the network and store nothing. */
static void test_local_budget(void)
{
    ldpref_client *c = client("budget", 1.0, 0.5);
    if (c == NULL)
        return;
    ldpref_task t = task(7, "p", "x", "y", 1.0);
    ldpref_receipt r;
    CHECK_ERR(ldpref_answer(c, &t, 1, &r), LP_ELOCAL_BUDGET_EXCEEDED);
    int64_t memo = -1, spend = -1, outbox = -1;
    counts(c, &memo, &spend, &outbox);
    CHECK_INT(outbox, 0);
    CHECK_INT(memo, 0);
    CHECK_INT(spend, 0);
    ldpref_client_close(c);

    /* Cap 2.5 at epsilon 1: two labels fit, the third is refused locally. */
    c = client("budget2", 1.0, 2.5);
    if (c == NULL)
        return;
    ldpref_task t1 = task(1, "p1", "x", "y", 1.0), t2 = task(2, "p2", "x", "y", 1.0),
                t3 = task(3, "p3", "x", "y", 1.0);
    CHECK_ERR(ldpref_answer(c, &t1, 1, &r), LP_ENETWORK);
    CHECK_ERR(ldpref_answer(c, &t2, 0, &r), LP_ENETWORK);
    CHECK_ERR(ldpref_answer(c, &t3, 1, &r), LP_ELOCAL_BUDGET_EXCEEDED);
    /* ... but a smaller proposal still fits, and a re-ask is free. */
    ldpref_task t4 = task(4, "p4", "x", "y", 0.5), t1b = task(11, "p1", "y", "x", 1.0);
    lp_label_msg m;
    int existed;
    CHECK_ERR(lpc_answer_prepare(c, &t4, 1, &m, &existed, NULL), LP_OK);
    CHECK_NEAR(m.epsilon, 0.5, 0);
    CHECK_ERR(lpc_answer_prepare(c, &t1b, 1, &m, &existed, NULL), LP_OK);
    counts(c, &memo, &spend, &outbox);
    CHECK_INT(spend, 3);
    CHECK_INT(outbox, 4);
    ldpref_budget b;
    CHECK_ERR(ldpref_budget_get(c, &b), LP_OK);
    CHECK_NEAR(b.spent, 2.5, 1e-12);
    /* The batch path applies the same checks per item. */
    ldpref_batch_item items[2];
    memset(items, 0, sizeof items);
    ldpref_task t5 = task(5, "p5", "x", "y", 1.0);
    items[0].task = &t5;
    items[1].task_id = 999; /* never fetched */
    CHECK_ERR(ldpref_answer_batch(c, items, 2), LP_OK);
    CHECK_ERR(items[0].error, LP_ELOCAL_BUDGET_EXCEEDED);
    CHECK_ERR(items[1].error, LP_EUNKNOWN_TASK);
    CHECK_ERR(ldpref_answer_id(c, 999, 1, &r), LP_EUNKNOWN_TASK);
    counts(c, &memo, &spend, &outbox);
    CHECK_INT(outbox, 4);
    ldpref_client_close(c);
}

/* epsilon = min(own cap, proposal, campaign max); below the min: refused. */
static void test_epsilon_choice(void)
{
    ldpref_client *c = client("eps", 2.0, 1e9);
    if (c == NULL)
        return;
    lp_label_msg m;
    int existed;
    ldpref_task t = task(1, "e1", "x", "y", 0.5);
    CHECK_ERR(lpc_answer_prepare(c, &t, 1, &m, &existed, NULL), LP_OK);
    CHECK_NEAR(m.epsilon, 0.5, 0);
    t = task(2, "e2", "x", "y", 5.0);
    CHECK_ERR(lpc_answer_prepare(c, &t, 1, &m, &existed, NULL), LP_OK);
    CHECK_NEAR(m.epsilon, 2.0, 0);
    t = task(3, "e3", "x", "y", 5.0);
    t.epsilon_max = 1.5;
    CHECK_ERR(lpc_answer_prepare(c, &t, 1, &m, &existed, NULL), LP_OK);
    CHECK_NEAR(m.epsilon, 1.5, 0);
    t = task(4, "e4", "x", "y", INFINITY); /* a null proposal never means "no privacy" */
    CHECK_ERR(lpc_answer_prepare(c, &t, 1, &m, &existed, NULL), LP_OK);
    CHECK_NEAR(m.epsilon, 2.0, 0);
    t = task(5, "e5", "x", "y", 1.0);
    t.epsilon_min = 3.0;
    ldpref_receipt r;
    CHECK_ERR(ldpref_answer(c, &t, 1, &r), LP_EEPSILON_OUT_OF_RANGE);
    CHECK_ERR(ldpref_answer(c, &t, 3, &r), LP_EINVALID_ARGUMENT);
    CHECK_ERR(ldpref_answer(c, &t, -1, &r), LP_EINVALID_ARGUMENT);
    int64_t memo = -1, spend = -1, outbox = -1;
    counts(c, &memo, &spend, &outbox);
    CHECK_INT(memo, 4);
    CHECK_INT(outbox, 4);
    ldpref_client_close(c);
}

/* The ledger file holds neither the content nor the true answer. */
static void test_ledger_contents(void)
{
    ldpref_client *c = client("plain", 1.0, 1e9);
    if (c == NULL)
        return;
    const char *prompt = "PROMPT-7f3a91-secret", *a = "RESPONSE-A-c0ffee", *b = "RESPONSE-B-beef42";
    ldpref_task t = task(5, prompt, a, b, 1.0);
    lp_label_msg m;
    int existed;
    CHECK_ERR(lpc_answer_prepare(c, &t, 1, &m, &existed, NULL), LP_OK);
    ldpref_client_close(c); /* checkpoints the WAL into the main file */
    char path[300], cmd[700];
    snprintf(path, sizeof path, "%s/plain.ledger", dir);
    struct stat st;
    CHECK(stat(path, &st) == 0 && (st.st_mode & 0777) == 0600);
    for (int i = 0; i < 3; i++) {
        const char *needle = i == 0 ? prompt : i == 1 ? a : b;
        snprintf(cmd, sizeof cmd, "cat '%s'* | grep -c -a '%s' >/dev/null", path, needle);
        CHECK(system(cmd) != 0);
    }
    /* No column could hold a true answer: the schema is fixed. */
    snprintf(cmd, sizeof cmd,
             "sqlite3 '%s' .schema 2>/dev/null | grep -qiE 'true|prefer|truth' && exit 1; exit 0",
             path);
    CHECK(system(cmd) == 0);
}

int main(void)
{
    CHECK(tmpdir_create(dir, sizeof dir, "ledger") == 0);
    int port = closed_port();
    CHECK(port > 0);
    snprintf(url, sizeof url, "http://127.0.0.1:%d", port);
    test_memo_key();
    test_content_memo();
    test_reask();
    test_local_budget();
    test_epsilon_choice();
    test_ledger_contents();
    CHECK(tmpdir_remove(dir) == 0);
    return check_summary();
}
