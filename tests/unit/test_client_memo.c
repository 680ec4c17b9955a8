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
 *   comparison (a new memo entry and a new spend);
 * - normalization: Unicode white space collapsed and trimmed, line endings
 *   unified, invisible characters dropped, NFKC; the memo key of variants
 *   that differ only there is one key;
 * - sketches: exact similarity for small sets, estimates within the
 *   binomial spread for large ones, the A/B pairing, and through the
 *   ledger: near-duplicates (a changed punctuation mark, a changed word,
 *   swapped A/B) reuse the memoized answer in the orientation asked and
 *   spend nothing, a different comparison does not; an entry written
 *   before normalization is found for its exact text, gets a sketch, and
 *   is then found for its variants too.
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

static void normalized(const char *in, const char *want)
{
    char *out = NULL;
    CHECK_ERR(lpc_text_normalize(in, &out), LP_OK);
    check_record(out && strcmp(out, want) == 0, __FILE__, __LINE__,
                 "normalize(\"%s\") == \"%s\" (got \"%s\")", in, want, out ? out : "(null)");
    free(out);
}

static void test_normalize(void)
{
    normalized("", "");
    normalized("   ", "");
    normalized("plain text", "plain text");
    normalized("  lead and trail \t\n", "lead and trail");
    normalized("a  \t b", "a b");
    normalized("line\r\nend", "line end");
    normalized("line\rend", "line end");
    normalized("line\nend", "line end");
    normalized("para\u2029graph\u2028line", "para graph line");
    /* NBSP, the U+2000 block, narrow NBSP, medium math space, ideographic
     * space, Ogham space mark, next line */
    const char *spaces[] = {"\u00a0", "\u2000", "\u2001", "\u2002", "\u2003",  "\u2004",
                            "\u2005", "\u2006", "\u2007", "\u2008", "\u2009",  "\u200a",
                            "\u202f", "\u205f", "\u3000", "\u1680", "\xc2\x85"};
    for (size_t i = 0; i < sizeof spaces / sizeof spaces[0]; i++) {
        char in[32];
        snprintf(in, sizeof in, "a%sb%s", spaces[i], spaces[i]);
        normalized(in, "a b");
    }
    /* invisible: zero-width space, non-joiner, joiner, word joiner, BOM,
     * soft hyphen, variation selector, Mongolian vowel separator */
    const char *invisible[] = {"\u200b", "\u200c", "\u200d", "\u2060",
                               "\ufeff", "\u00ad", "\ufe0f", "\u180e"};
    for (size_t i = 0; i < sizeof invisible / sizeof invisible[0]; i++) {
        char in[32];
        snprintf(in, sizeof in, "%sab%sc%s", invisible[i], invisible[i], invisible[i]);
        normalized(in, "abc");
    }
    normalized("a \u200b b", "a b");              /* an invisible character between spaces */
    normalized("\uff21\uff22", "AB");             /* fullwidth letters (NFKC) */
    normalized("\ufb01ne", "fine");               /* a ligature */
    normalized("e\u0301", "\u00e9");              /* composed */
    normalized("\xff\xfe  raw", "\xff\xfe  raw"); /* not UTF-8: kept as is */
    /* Keys: variants that differ in space and invisible characters share one. */
    uint8_t secret[LPC_DEVICE_SECRET_BYTES] = {1, 2, 3};
    ldpref_task t1 = task(1, NULL, 0, "What is 2+2?", "Four.", "Five.");
    ldpref_task t2 = task(2, NULL, 0, " What\u00a0is  2+2?\r\n", "Fo\u200bur.\u3000", "Five.");
    char h1[65], h2[65];
    int s1 = -1, s2 = -1;
    key_hex(secret, &t1, h1, &s1);
    key_hex(secret, &t2, h2, &s2);
    CHECK_STR(h1, h2);
    CHECK_INT(s1, s2);
    /* The exact key tells them apart (it is the key of earlier ledgers). */
    uint8_t k1[LPC_MEMO_KEY_BYTES], k2[LPC_MEMO_KEY_BYTES];
    lpc_memo_key_exact(secret, &t1, k1, &s1);
    lpc_memo_key_exact(secret, &t2, k2, &s2);
    CHECK(memcmp(k1, k2, sizeof k1) != 0);
    /* ... and equals the key for text normalization leaves alone. */
    uint8_t k3[LPC_MEMO_KEY_BYTES];
    CHECK_ERR(lpc_memo_key(secret, &t1, k3, &s2), LP_OK);
    CHECK(memcmp(k1, k3, sizeof k1) == 0);
}

static lpc_sketch sketch_of(const char *prompt, const char *a, const char *b)
{
    uint8_t secret[LPC_DEVICE_SECRET_BYTES] = {9};
    ldpref_task t = task(1, NULL, 0, prompt, a, b);
    lpc_sketch s;
    CHECK_ERR(lpc_sketch_build(secret, &t, 0, &s), LP_OK);
    return s;
}

/* n words "w0 w1 ...", every step-th replaced by "x<i>" when step > 0. */
static char *words(int n, int step)
{
    char *t = malloc((size_t)n * 12 + 1);
    size_t len = 0;
    for (int i = 0; i < n; i++)
        len += (size_t)sprintf(t + len, "%s%s%d", i ? " " : "",
                               step > 0 && i % step == step / 2 ? "x" : "w", i);
    return t;
}

static void test_sketch(void)
{
    lpc_sketch a = sketch_of("Which is better?", "The cat sat on the mat.", "A dog barked.");
    lpc_sketch b = sketch_of("Which is better ?!", "the CAT sat, on the mat", "A dog  barked!");
    int flip = -1;
    CHECK(lpc_sketch_match(&a, &b, &flip) == 1.0); /* case and punctuation are not words */
    CHECK_INT(flip, 0);
    /* Exact for small sets: 5 bigrams each, 4 shared -> 4/6. */
    lpc_sketch c = sketch_of("Which is better?", "The cat sat on the rug.", "A dog barked.");
    CHECK_NEAR(lpc_sketch_similarity(&a, 1, &c, 1), 4.0 / 6.0, 1e-12);
    CHECK(lpc_sketch_match(&a, &c, &flip) < LPC_SKETCH_THRESHOLD);
    /* A and B swapped: matched the other way round. */
    lpc_sketch d = sketch_of("Which is better?", "A dog barked.", "The cat sat on the mat.");
    CHECK(lpc_sketch_match(&a, &d, &flip) == 1.0);
    CHECK_INT(flip, 1);
    /* One-word texts: the word itself; different words share nothing. */
    lpc_sketch four = sketch_of("2+2?", "4", "5"), five = sketch_of("2+2?", "5", "4");
    CHECK(lpc_sketch_similarity(&four, 1, &five, 1) == 0.0);
    CHECK(lpc_sketch_match(&four, &five, &flip) == 1.0 && flip == 1);
    /* A symbol is a word: 2+2 and 2-2 differ, "2 + 2" is 2+2. */
    lpc_sketch plus = sketch_of("p", "2+2", "z"), minus = sketch_of("p", "2-2", "z"),
               spaced = sketch_of("p", "2 + 2", "z");
    CHECK(lpc_sketch_similarity(&plus, 1, &minus, 1) < 0.5);
    CHECK(lpc_sketch_similarity(&plus, 1, &spaced, 1) == 1.0);
    /* Empty texts are equal to each other only. */
    lpc_sketch e1 = sketch_of("p", "...", "x"), e2 = sketch_of("p", "", "x");
    CHECK(lpc_sketch_similarity(&e1, 1, &e2, 1) == 1.0);
    CHECK(lpc_sketch_similarity(&e1, 1, &a, 1) == 0.0);
    /* Large sets: 2000 words, every 10th replaced: 1999 bigrams, 400 of them
     * changed, J = 1599 / 2399. The bottom-128 estimate has standard
     * deviation about sqrt(J (1 - J) / 128) = 0.042; 6 of them. */
    char *w = words(2000, 0), *x = words(2000, 10);
    lpc_sketch big = sketch_of("p", w, "z"), edited = sketch_of("p", x, "z");
    double j = 1599.0 / 2399.0;
    CHECK_NEAR(lpc_sketch_similarity(&big, 1, &edited, 1), j, 6 * sqrt(j * (1 - j) / 128));
    CHECK(big.n[1] == LPC_SKETCH_K);
    /* Encoding round trip; a damaged blob is refused. */
    uint8_t blob[LPC_SKETCH_BYTES];
    lpc_sketch back;
    memset(&back, 0, sizeof back); /* the struct's padding, which decode leaves alone */
    lpc_sketch_encode(&big, blob);
    CHECK_ERR(lpc_sketch_decode(blob, sizeof blob, &back), LP_OK);
    CHECK(memcmp(&back, &big, sizeof back) == 0);
    CHECK(lpc_sketch_decode(blob, sizeof blob - 1, &back) != LP_OK);
    blob[0] = 0xff;
    CHECK(lpc_sketch_decode(blob, sizeof blob, &back) != LP_OK);
    /* Keyed by the device secret. */
    uint8_t other[LPC_DEVICE_SECRET_BYTES] = {10};
    ldpref_task t =
        task(1, NULL, 0, "Which is better?", "The cat sat on the mat.", "A dog barked.");
    lpc_sketch o;
    CHECK_ERR(lpc_sketch_build(other, &t, 0, &o), LP_OK);
    CHECK(lpc_sketch_similarity(&o, 1, &a, 1) == 0.0);
    free(w);
    free(x);
}

/* Near-duplicates through the ledger. */
static void test_near_duplicates(void)
{
    ldpref_client *c = client("near");
    if (c == NULL)
        return;
    const char *p = "Which summary of the meeting is more accurate?";
    const char *a =
        "The team agreed to ship the release on Friday after the last review, and support "
        "will watch the error reports over the weekend.";
    const char *b = "Nobody agreed on anything and the release date is still open.";
    ldpref_task base = task(1, NULL, 0, p, a, b);
    lp_label_msg m0, m;
    int existed = -1;
    CHECK_ERR(lpc_answer_prepare(c, &base, 1, &m0, &existed, NULL), LP_OK);
    struct {
        const char *a, *b;
        int swapped;
    } same[] = {
        {"The team agreed to ship the release on Friday after the last review, and support "
         "will watch the error reports over the weekend!",
         b, 0},
        /* one word of 22 changed: 19 of 23 bigrams shared, J = 0.83 */
        {"The team agreed to ship the release on Friday after the final review, and support "
         "will watch the error reports over the weekend.",
         b, 0},
        {b,
         "The team agreed, to ship the release on Friday after the last review; and support "
         "will watch the error reports over the weekend.",
         1},
        {"  The team agreed to ship the release on Friday after the last review, and support\r\n"
         "will watch the error reports over the weekend.  ",
         b, 0},
    };
    for (size_t i = 0; i < sizeof same / sizeof same[0]; i++) {
        ldpref_task t = task(2 + (int64_t)i, NULL, 0, p, same[i].a, same[i].b);
        CHECK_ERR(lpc_answer_prepare(c, &t, 0, &m, &existed, NULL), LP_OK);
        CHECK_INT(m.z ^ same[i].swapped, m0.z);
        CHECK(m.epsilon == m0.epsilon);
    }
    int64_t memo = -1, spend = -1;
    counts(c, &memo, &spend);
    CHECK_INT(memo, 1);
    CHECK_INT(spend, 1);
    /* The same prompt with another response is another comparison. */
    ldpref_task other =
        task(20, NULL, 0, p, a, "The meeting was cancelled, so there is no summary.");
    CHECK_ERR(lpc_answer_prepare(c, &other, 0, &m, &existed, NULL), LP_OK);
    counts(c, &memo, &spend);
    CHECK_INT(memo, 2);
    CHECK_INT(spend, 2);
    ldpref_client_close(c);
}

/* An entry written before normalization (under the exact key of a text with
 * a non-breaking space) is found for that text, gets its sketch then, and
 * answers its variants from then on. */
static void test_entry_before_normalization(void)
{
    ldpref_client *c = client("prenorm");
    if (c == NULL)
        return;
    ldpref_task t = task(1, NULL, 0, "Which\u00a0is warmer?", "A wool coat in winter.",
                         "A cotton shirt in the rain.");
    uint8_t key[LPC_MEMO_KEY_BYTES];
    int swapped = -1;
    lpc_memo_key_exact(lpc_ledger_secret(c->ledger), &t, key, &swapped);
    CHECK_ERR(lpc_ledger_begin(c->ledger), LP_OK);
    CHECK_ERR(lpc_ledger_memo_put(c->ledger, key, 0, 0.5, NULL), LP_OK);
    CHECK_ERR(lpc_ledger_commit(c->ledger), LP_OK);
    lp_label_msg m;
    int existed = -1;
    CHECK_ERR(lpc_answer_prepare(c, &t, 1, &m, &existed, NULL), LP_OK);
    CHECK(m.epsilon == 0.5);
    CHECK_INT(m.z, 0 ^ swapped);
    ldpref_task v = task(2, NULL, 0, "Which is warmer?", "A cotton shirt in the rain!",
                         "A wool coat in winter.");
    CHECK_ERR(lpc_answer_prepare(c, &v, 0, &m, &existed, NULL), LP_OK);
    CHECK(m.epsilon == 0.5);
    CHECK_INT(m.z, 1 ^ swapped); /* the same answer, A and B swapped */
    int64_t memo = -1, spend = -1;
    counts(c, &memo, &spend);
    CHECK_INT(memo, 1);
    CHECK_INT(spend, 0);
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
    test_normalize();
    test_sketch();
    test_near_duplicates();
    test_entry_before_normalization();
    CHECK(tmpdir_remove(dir) == 0);
    return check_summary();
}
