/*
 * test_client_memo.c — the memo key over a whole conversation (libldpref,
 * client/lib/answer.c), without a server:
 *
 * - test vectors under a fixed device secret, computed independently of the
 *   library (Python's hashlib.blake2b over the encoding of docs/client.md
 *   "Memo key"): a comparison without context keeps the key of ledgers
 *   written before conversations, one with context gets the v2 key;
 * - the key covers every turn (role, content, order, boundaries) and not
 *   the presentation order;
 * - an old ledger's memo entry (written under the pre-conversation key) is
 *   still found for the same comparison without context;
 * - re-asking a comparison with the same context reuses its randomized
 *   answer and spends nothing; with a different context it is a different
 *   comparison (a new memo entry and a new spend).
 */
#include "ldpref.h"

#include "annotator_client.h"
#include "check.h"
#include "error.h"
#include "internal.h"
#include "ports.h"
#include "tmpdir.h"

#include <math.h>
#include <sodium.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static char dir[64];
static char url[64];

static ldpref_task task(int64_t id, ldpref_turn *context, size_t n, const char *prompt,
                        const char *a, const char *b)
{
    ldpref_task t = {.task_id = id,
                     .campaign = "default",
                     .prompt = (char *)prompt,
                     .a = (char *)a,
                     .b = (char *)b,
                     .epsilon_proposed = 1.0,
                     .epsilon_min = 0.01,
                     .epsilon_max = 10,
                     .context = context,
                     .n_context = n};
    return t;
}

static void key_hex(const uint8_t *secret, const ldpref_task *t, char hex[65], int *swapped)
{
    uint8_t key[LPC_MEMO_KEY_BYTES];
    lpc_memo_key(secret, t, key, swapped);
    sodium_bin2hex(hex, 65, key, sizeof key);
}

/* Fixed vectors: secret = bytes 0, 1, ..., 31. */
static void test_vectors(void)
{
    uint8_t secret[LPC_DEVICE_SECRET_BYTES];
    for (int i = 0; i < LPC_DEVICE_SECRET_BYTES; i++)
        secret[i] = (uint8_t)i;
    char hex[65];
    int swapped = -1;

    /* Without context: the pre-conversation key ("ldpref/memo/v1"). */
    ldpref_task t = task(1, NULL, 0, "What is 2+2?", "4", "5");
    key_hex(secret, &t, hex, &swapped);
    CHECK_STR(hex, "6017b473a3d67201b0bbfc45937d28ee4952483eb1a831309601482749014e25");
    CHECK_INT(swapped, 1);
    t = task(2, NULL, 0, "What is 2+2?", "5", "4");
    key_hex(secret, &t, hex, &swapped);
    CHECK_STR(hex, "6017b473a3d67201b0bbfc45937d28ee4952483eb1a831309601482749014e25");
    CHECK_INT(swapped, 0);
    /* An empty context array is no context. */
    ldpref_turn none[1] = {{"user", "ignored"}};
    t = task(3, none, 0, "What is 2+2?", "4", "5");
    key_hex(secret, &t, hex, &swapped);
    CHECK_STR(hex, "6017b473a3d67201b0bbfc45937d28ee4952483eb1a831309601482749014e25");

    /* With context ("ldpref/memo/v2"). */
    ldpref_turn ctx[3] = {
        {"system", "Answer briefly."}, {"user", "Hi"}, {"assistant", "Hello! How can I help?"}};
    t = task(4, ctx, 3, "What is 2+2?", "4", "5");
    key_hex(secret, &t, hex, &swapped);
    CHECK_STR(hex, "8e5b662de86e1e04e7a7250841a6328847f8579c5220b8255a14f54b3de387a5");
    CHECK_INT(swapped, 1);
    ldpref_turn de[2] = {{"user", "What is 2+2?"}, {"assistant", "4"}};
    t = task(5, de, 2, "Und auf Deutsch? \xc3\xa4\xc3\xb6\xc3\xbc", "Vier.", "F\xc3\xbcnf.");
    key_hex(secret, &t, hex, &swapped);
    CHECK_STR(hex, "e2b6126ced5728895582370e04fca04ae7de8e310c3dbb35a9c0acdd1b58cd8a");
    CHECK_INT(swapped, 1);
}

/* Every part of the conversation counts, the presentation order does not. */
static void test_key_covers_the_conversation(void)
{
    uint8_t secret[LPC_DEVICE_SECRET_BYTES] = {7, 7, 7};
    ldpref_turn base[2] = {{"user", "ab"}, {"assistant", "c"}};
    ldpref_turn moved[2] = {{"user", "a"}, {"assistant", "bc"}};
    ldpref_turn role[2] = {{"assistant", "ab"}, {"assistant", "c"}};
    ldpref_turn order[2] = {{"assistant", "c"}, {"user", "ab"}};
    ldpref_turn edited[2] = {{"user", "ab"}, {"assistant", "C"}};
    ldpref_turn into_prompt[1] = {{"user", "ab"}};
    ldpref_task variants[] = {
        task(1, base, 2, "p", "x", "y"),   task(2, moved, 2, "p", "x", "y"),
        task(3, role, 2, "p", "x", "y"),   task(4, order, 2, "p", "x", "y"),
        task(5, edited, 2, "p", "x", "y"), task(6, base, 1, "p", "x", "y"),
        task(7, NULL, 0, "p", "x", "y"),   task(8, into_prompt, 1, "c", "x", "y"),
        task(9, base, 2, "q", "x", "y"),   task(10, base, 2, "p", "x", "z"),
    };
    enum { N = sizeof variants / sizeof variants[0] };
    char hex[N][65];
    int sw[N];
    for (int i = 0; i < N; i++)
        key_hex(secret, &variants[i], hex[i], &sw[i]);
    for (int i = 0; i < N; i++)
        for (int j = i + 1; j < N; j++)
            check_record(strcmp(hex[i], hex[j]) != 0, __FILE__, __LINE__,
                         "variants %d and %d share the key %s", i + 1, j + 1, hex[i]);
    /* The same conversation with a and b swapped: the same key. */
    ldpref_turn copy[2] = {{"user", "ab"}, {"assistant", "c"}};
    ldpref_task swapped = task(11, copy, 2, "p", "y", "x");
    char h[65];
    int s = -1;
    key_hex(secret, &swapped, h, &s);
    CHECK_STR(h, hex[0]);
    CHECK_INT(s ^ sw[0], 1);
    /* Keyed by the device secret. */
    uint8_t other[LPC_DEVICE_SECRET_BYTES] = {8};
    key_hex(other, &variants[0], h, &s);
    CHECK(strcmp(h, hex[0]) != 0);
}

static ldpref_client *client(const char *name)
{
    char key[256];
    if (annotator_key_ensure(dir, name, key, sizeof key) != LDPREF_OK)
        return NULL;
    ldpref_options o;
    annotator_options_init(&o, url, key, 1.0, 1e9);
    ldpref_client *c = NULL;
    CHECK_ERR(ldpref_client_open(&o, &c), LP_OK);
    lpc_ledger *l = NULL;
    if (c != NULL)
        CHECK_ERR(lpc_use_ledger(c, &l), LP_OK);
    return c;
}

static void counts(ldpref_client *c, int64_t *memo, int64_t *spend)
{
    CHECK_ERR(lpc_ledger_counts(c->ledger, memo, spend, NULL, NULL), LP_OK);
}

static void hash_lp(crypto_generichash_state *st, const char *s)
{
    uint8_t be[8];
    uint64_t n = strlen(s);
    for (int i = 0; i < 8; i++)
        be[i] = (uint8_t)(n >> (56 - 8 * i));
    crypto_generichash_update(st, be, sizeof be);
    crypto_generichash_update(st, (const uint8_t *)s, n);
}

/* A memo entry written by a library before conversations (its key computed
 * here from the documented formula) answers the same comparison without
 * context now: its epsilon and z come back, nothing is spent. */
static void test_old_ledger_entry_still_found(void)
{
    ldpref_client *c = client("old");
    if (c == NULL)
        return;
    const char *prompt = "Which is kinder?", *a = "Yes, gladly.", *b = "No.";
    uint8_t ha[32], hb[32], key[LPC_MEMO_KEY_BYTES];
    crypto_generichash(ha, sizeof ha, (const uint8_t *)a, strlen(a), NULL, 0);
    crypto_generichash(hb, sizeof hb, (const uint8_t *)b, strlen(b), NULL, 0);
    int swapped = memcmp(ha, hb, sizeof ha) > 0;
    crypto_generichash_state st;
    crypto_generichash_init(&st, lpc_ledger_secret(c->ledger), LPC_DEVICE_SECRET_BYTES, sizeof key);
    hash_lp(&st, "ldpref/memo/v1");
    hash_lp(&st, prompt);
    hash_lp(&st, swapped ? b : a);
    hash_lp(&st, swapped ? a : b);
    crypto_generichash_final(&st, key, sizeof key);
    CHECK_ERR(lpc_ledger_begin(c->ledger), LP_OK);
    CHECK_ERR(lpc_ledger_memo_put(c->ledger, key, 1, 0.7, NULL), LP_OK);
    CHECK_ERR(lpc_ledger_commit(c->ledger), LP_OK);

    ldpref_task t = task(11, NULL, 0, prompt, a, b);
    lp_label_msg m;
    int existed = -1;
    CHECK_ERR(lpc_answer_prepare(c, &t, 0, &m, &existed, NULL), LP_OK);
    CHECK_INT(existed, 0);
    CHECK(m.epsilon == 0.7); /* a fresh answer would take the proposal, 1 */
    CHECK_INT(m.z, 1 ^ swapped);
    int64_t memo = -1, spend = -1;
    counts(c, &memo, &spend);
    CHECK_INT(memo, 1);
    CHECK_INT(spend, 0);
    /* The same texts after an earlier turn are another comparison. */
    ldpref_turn ctx[1] = {{"user", "Be honest."}};
    ldpref_task conv = task(12, ctx, 1, prompt, a, b);
    CHECK_ERR(lpc_answer_prepare(c, &conv, 0, &m, &existed, NULL), LP_OK);
    CHECK(m.epsilon == 1.0);
    counts(c, &memo, &spend);
    CHECK_INT(memo, 2);
    CHECK_INT(spend, 1);
    ldpref_client_close(c);
}

/* Re-asked conversations: the same context is the same comparison (in
 * either order, under any id), a different one is not. */
static void test_reasked_conversations(void)
{
    enum { N = 200 };
    ldpref_client *c = client("reask");
    if (c == NULL)
        return;
    int same = 0, differ_z = 0, fresh = 0;
    for (int k = 0; k < N; k++) {
        char p[48], a[48], b[48], earlier[48], other[48];
        snprintf(p, sizeof p, "And then? (%d)", k);
        snprintf(a, sizeof a, "reply A %d", k);
        snprintf(b, sizeof b, "reply B %d", k);
        snprintf(earlier, sizeof earlier, "Tell me a story %d.", k);
        snprintf(other, sizeof other, "Tell me a joke %d.", k);
        ldpref_turn ctx[2] = {{"user", earlier}, {"assistant", "Once upon a time..."}};
        ldpref_turn copy[2] = {{"user", earlier}, {"assistant", "Once upon a time..."}};
        ldpref_turn changed[2] = {{"user", other}, {"assistant", "Once upon a time..."}};
        ldpref_task first = task(1 + 3 * k, ctx, 2, p, a, b);
        ldpref_task again = task(2 + 3 * k, copy, 2, p, b, a);
        ldpref_task elsewhere = task(3 + 3 * k, changed, 2, p, a, b);
        lp_label_msg m1, m2, m3;
        int e1 = -1, e2 = -1, e3 = -1;
        int ok = lpc_answer_prepare(c, &first, 0, &m1, &e1, NULL) == LP_OK;
        ok &= lpc_answer_prepare(c, &again, 0, &m2, &e2, NULL) == LP_OK;
        ok &= lpc_answer_prepare(c, &elsewhere, 0, &m3, &e3, NULL) == LP_OK;
        same += ok && !e1 && !e2 && m2.z == 1 - m1.z;
        differ_z += ok && m3.z != m1.z;
        fresh += ok && !e3;
    }
    CHECK_INT(same, N);
    CHECK_INT(fresh, N);
    /* The changed context got its own coin: its z differs from the first
     * one's in some cases (each agrees with probability 1 - 2pq < 1). */
    CHECK(differ_z > 0 && differ_z < N);
    int64_t memo = -1, spend = -1;
    counts(c, &memo, &spend);
    CHECK_INT(memo, 2 * N);
    CHECK_INT(spend, 2 * N);
    ldpref_client_close(c);
}

int main(void)
{
    if (sodium_init() < 0)
        return 1;
    CHECK(tmpdir_create(dir, sizeof dir, "memo") == 0);
    int port = closed_port();
    CHECK(port > 0);
    snprintf(url, sizeof url, "http://127.0.0.1:%d", port);
    test_vectors();
    test_key_covers_the_conversation();
    test_old_ledger_entry_still_found();
    test_reasked_conversations();
    CHECK(tmpdir_remove(dir) == 0);
    return check_summary();
}
