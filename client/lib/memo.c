/*
 * memo.c — normalized text, memo keys and near-duplicate sketches. See
 * memo.h. Unicode properties, NFKC and case folding come from libunistring.
 */
#include "memo.h"

#include "error.h"

#include <sodium.h>
#include <stdlib.h>
#include <string.h>
#include <unicase.h>
#include <unictype.h>
#include <uninorm.h>
#include <unistr.h>

#define LPC_MEMO_TAG "ldpref/memo/v1"              /* a comparison without context */
#define LPC_MEMO_TAG_CONVERSATION "ldpref/memo/v2" /* one with earlier turns */
#define LPC_SKETCH_TAG "ldpref/sketch/v1"

/* Drops default-ignorable code points, makes every run of white space one
 * ASCII space and trims both ends. s (valid UTF-8, n bytes) -> a new
 * NUL-terminated string in *out. */
static int squeeze(const uint8_t *s, size_t n, char **out)
{
    char *o = malloc(n + 1);
    if (o == NULL)
        return LP_ENO_MEMORY;
    size_t len = 0;
    int space = 0;
    for (size_t i = 0; i < n;) {
        ucs4_t uc;
        int k = u8_mbtouc(&uc, s + i, n - i);
        if (uc_is_property_white_space(uc)) {
            space = len > 0;
        } else if (!uc_is_property_default_ignorable_code_point(uc)) {
            if (space)
                o[len++] = ' ';
            space = 0;
            memcpy(o + len, s + i, (size_t)k);
            len += (size_t)k;
        }
        i += (size_t)k;
    }
    o[len] = '\0';
    *out = o;
    return LP_OK;
}

int lpc_text_normalize(const char *in, char **out)
{
    size_t n = strlen(in);
    *out = NULL;
    if (u8_check((const uint8_t *)in, n) != NULL)
        return (*out = strdup(in)) ? LP_OK : LP_ENO_MEMORY;
    /* Squeezed before NFKC (so ignorables cannot split what it composes)
     * and after (NFKC maps NBSP, U+2000.. and U+3000 to spaces). */
    char *first = NULL;
    if (squeeze((const uint8_t *)in, n, &first) != LP_OK)
        return LP_ENO_MEMORY;
    size_t nf_len = 0;
    uint8_t *nf = u8_normalize(UNINORM_NFKC, (const uint8_t *)first, strlen(first), NULL, &nf_len);
    free(first);
    if (nf == NULL)
        return LP_ENO_MEMORY;
    int rc = squeeze(nf, nf_len, out);
    free(nf);
    return rc;
}

static void hash_update_lp(crypto_generichash_state *st, const void *data, size_t len)
{
    uint8_t be[8];
    for (int i = 0; i < 8; i++)
        be[i] = (uint8_t)((uint64_t)len >> (56 - 8 * i));
    crypto_generichash_update(st, be, sizeof be);
    crypto_generichash_update(st, data, len);
}

/* The key over the given texts (context contents in ctx[], n turns). */
static void key_over(const uint8_t secret[LPC_DEVICE_SECRET_BYTES], const ldpref_task *t,
                     char *const *ctx, const char *prompt, const char *a, const char *b,
                     uint8_t key[LPC_MEMO_KEY_BYTES], int *swapped)
{
    uint8_t ha[32], hb[32];
    size_t la = strlen(a), lb = strlen(b);
    crypto_generichash(ha, sizeof ha, (const uint8_t *)a, la, NULL, 0);
    crypto_generichash(hb, sizeof hb, (const uint8_t *)b, lb, NULL, 0);
    /* Canonical order: the response with the smaller hash first. Equal
     * hashes mean equal texts, where the order does not matter. */
    int sw = memcmp(ha, hb, sizeof ha) > 0;
    const char *first = sw ? b : a, *second = sw ? a : b;
    crypto_generichash_state st;
    crypto_generichash_init(&st, secret, LPC_DEVICE_SECRET_BYTES, LPC_MEMO_KEY_BYTES);
    if (t->n_context == 0) { /* the key of the comparisons before conversations */
        hash_update_lp(&st, LPC_MEMO_TAG, strlen(LPC_MEMO_TAG));
    } else { /* the turn count, then each turn's role and content */
        hash_update_lp(&st, LPC_MEMO_TAG_CONVERSATION, strlen(LPC_MEMO_TAG_CONVERSATION));
        uint8_t be[8];
        for (int i = 0; i < 8; i++)
            be[i] = (uint8_t)((uint64_t)t->n_context >> (56 - 8 * i));
        crypto_generichash_update(&st, be, sizeof be);
        for (size_t k = 0; k < t->n_context; k++) {
            hash_update_lp(&st, t->context[k].role, strlen(t->context[k].role));
            hash_update_lp(&st, ctx[k], strlen(ctx[k]));
        }
    }
    hash_update_lp(&st, prompt, strlen(prompt));
    hash_update_lp(&st, first, strlen(first));
    hash_update_lp(&st, second, strlen(second));
    crypto_generichash_final(&st, key, LPC_MEMO_KEY_BYTES);
    sodium_memzero(&st, sizeof st);
    *swapped = sw;
}

void lpc_memo_key_exact(const uint8_t secret[LPC_DEVICE_SECRET_BYTES], const ldpref_task *t,
                        uint8_t key[LPC_MEMO_KEY_BYTES], int *swapped)
{
    char **ctx = t->n_context ? calloc(t->n_context, sizeof *ctx) : NULL;
    for (size_t k = 0; ctx && k < t->n_context; k++)
        ctx[k] = t->context[k].content;
    if (t->n_context && ctx == NULL) { /* out of memory: a key no comparison has */
        randombytes_buf(key, LPC_MEMO_KEY_BYTES);
        *swapped = 0;
        return;
    }
    key_over(secret, t, ctx, t->prompt, t->a, t->b, key, swapped);
    free(ctx);
}

/* The normalized texts of a task: ctx[n_context], prompt, a, b. */
struct normalized {
    char **ctx;
    char *prompt, *a, *b;
    size_t n;
};

static void normalized_free(struct normalized *nt)
{
    for (size_t k = 0; nt->ctx && k < nt->n; k++)
        free(nt->ctx[k]);
    free(nt->ctx);
    free(nt->prompt);
    free(nt->a);
    free(nt->b);
    memset(nt, 0, sizeof *nt);
}

static int normalize_task(const ldpref_task *t, struct normalized *nt)
{
    memset(nt, 0, sizeof *nt);
    nt->n = t->n_context;
    if (nt->n && (nt->ctx = calloc(nt->n, sizeof *nt->ctx)) == NULL)
        return LP_ENO_MEMORY;
    int rc = LP_OK;
    for (size_t k = 0; k < nt->n && rc == LP_OK; k++)
        rc = lpc_text_normalize(t->context[k].content, &nt->ctx[k]);
    if (rc == LP_OK)
        rc = lpc_text_normalize(t->prompt, &nt->prompt);
    if (rc == LP_OK)
        rc = lpc_text_normalize(t->a, &nt->a);
    if (rc == LP_OK)
        rc = lpc_text_normalize(t->b, &nt->b);
    if (rc != LP_OK)
        normalized_free(nt);
    return rc;
}

int lpc_memo_key(const uint8_t secret[LPC_DEVICE_SECRET_BYTES], const ldpref_task *t,
                 uint8_t key[LPC_MEMO_KEY_BYTES], int *swapped)
{
    struct normalized nt;
    int rc = normalize_task(t, &nt);
    if (rc != LP_OK)
        return rc;
    key_over(secret, t, nt.ctx, nt.prompt, nt.a, nt.b, key, swapped);
    normalized_free(&nt);
    return LP_OK;
}

/* ---- sketches ------------------------------------------------------------ */

/* Adds v to a part's bottom-k set (ascending, distinct). */
static void bottom_k_add(lpc_sketch *s, int part, uint64_t v)
{
    uint64_t *a = s->v[part];
    uint32_t n = s->n[part];
    if (n == LPC_SKETCH_K && v >= a[n - 1])
        return;
    uint32_t lo = 0, hi = n;
    while (lo < hi) {
        uint32_t mid = (lo + hi) / 2;
        if (a[mid] < v)
            lo = mid + 1;
        else
            hi = mid;
    }
    if (lo < n && a[lo] == v)
        return;
    if (n == LPC_SKETCH_K)
        n--; /* the largest falls out */
    memmove(a + lo + 1, a + lo, (n - lo) * sizeof *a);
    a[lo] = v;
    s->n[part] = n + 1;
}

/* Words of one part, fed as bigrams into its bottom-k set. */
struct shingler {
    lpc_sketch *s;
    int part;
    const uint8_t *key; /* crypto_generichash_KEYBYTES */
    const uint8_t *prev;
    size_t prev_len;
    size_t words;
};

static uint64_t shingle_hash(const uint8_t *key, const uint8_t *w1, size_t l1, const uint8_t *w2,
                             size_t l2)
{
    /* w1 0x00 w2: words never hold NUL, so the encoding is unambiguous; a
     * one-word text is w1 0x00 alone (w2 is never empty). */
    uint8_t h[8], zero = 0;
    crypto_generichash_state st;
    crypto_generichash_init(&st, key, crypto_generichash_KEYBYTES, sizeof h);
    crypto_generichash_update(&st, w1, l1);
    crypto_generichash_update(&st, &zero, 1);
    if (w2 != NULL)
        crypto_generichash_update(&st, w2, l2);
    crypto_generichash_final(&st, h, sizeof h);
    uint64_t v = 0;
    for (int i = 0; i < 8; i++)
        v = v << 8 | h[i];
    return v;
}

static void shingler_word(struct shingler *sh, const uint8_t *w, size_t len)
{
    if (sh->prev != NULL)
        bottom_k_add(sh->s, sh->part, shingle_hash(sh->key, sh->prev, sh->prev_len, w, len));
    sh->prev = w;
    sh->prev_len = len;
    sh->words++;
}

/* Feeds one text's words into sh. The words point into the case-folded
 * copy, which must live as long as sh uses them: it is kept in *keep
 * (freed by the caller). */
static int shingler_text(struct shingler *sh, const char *text, uint8_t **keep)
{
    char *norm = NULL;
    if (lpc_text_normalize(text, &norm) != LP_OK)
        return LP_ENO_MEMORY;
    size_t n = 0;
    uint8_t *f = NULL;
    if (u8_check((const uint8_t *)norm, strlen(norm)) == NULL)
        f = u8_casefold((const uint8_t *)norm, strlen(norm), NULL, UNINORM_NFKC, NULL, &n);
    else /* not UTF-8: its bytes as they are (invalid ones are separators) */
        f = (uint8_t *)strdup(norm), n = strlen(norm);
    free(norm);
    if (f == NULL)
        return LP_ENO_MEMORY;
    *keep = f;
    size_t start = 0, i = 0;
    int in_word = 0;
    while (i < n) {
        ucs4_t uc;
        int k = u8_mbtouc(&uc, f + i, n - i);
        int word_char = uc_is_alnum(uc) || uc_is_general_category(uc, UC_CATEGORY_M);
        if (in_word && !word_char) {
            shingler_word(sh, f + start, i - start);
            in_word = 0;
        }
        if (word_char && !in_word) {
            start = i;
            in_word = 1;
        } else if (!word_char && uc_is_general_category(uc, UC_CATEGORY_S)) {
            shingler_word(sh, f + i, (size_t)k); /* a symbol is a word of its own */
        }
        i += (size_t)k;
    }
    if (in_word)
        shingler_word(sh, f + start, n - start);
    return LP_OK;
}

/* One part from its texts (NULL-terminated list, roles and contents). */
static int sketch_part(lpc_sketch *s, int part, const uint8_t *key, const char *const *texts)
{
    struct shingler sh = {.s = s, .part = part, .key = key};
    size_t count = 0;
    while (texts[count] != NULL)
        count++;
    uint8_t **keep = calloc(count + 1, sizeof *keep);
    if (keep == NULL)
        return LP_ENO_MEMORY;
    int rc = LP_OK;
    for (size_t i = 0; i < count && rc == LP_OK; i++)
        rc = shingler_text(&sh, texts[i], &keep[i]);
    if (rc == LP_OK && sh.words == 1)
        bottom_k_add(s, part, shingle_hash(key, sh.prev, sh.prev_len, NULL, 0));
    for (size_t i = 0; i < count; i++)
        free(keep[i]);
    free(keep);
    return rc;
}

int lpc_sketch_build(const uint8_t secret[LPC_DEVICE_SECRET_BYTES], const ldpref_task *t,
                     int swapped, lpc_sketch *out)
{
    memset(out, 0, sizeof *out);
    uint8_t key[crypto_generichash_KEYBYTES];
    crypto_generichash(key, sizeof key, (const uint8_t *)LPC_SKETCH_TAG, strlen(LPC_SKETCH_TAG),
                       secret, LPC_DEVICE_SECRET_BYTES);
    const char **conv = calloc(2 * t->n_context + 2, sizeof *conv);
    if (conv == NULL)
        return LP_ENO_MEMORY;
    for (size_t k = 0; k < t->n_context; k++) {
        conv[2 * k] = t->context[k].role;
        conv[2 * k + 1] = t->context[k].content;
    }
    conv[2 * t->n_context] = t->prompt;
    const char *first[2] = {swapped ? t->b : t->a, NULL};
    const char *second[2] = {swapped ? t->a : t->b, NULL};
    int rc = sketch_part(out, 0, key, conv);
    if (rc == LP_OK)
        rc = sketch_part(out, 1, key, first);
    if (rc == LP_OK)
        rc = sketch_part(out, 2, key, second);
    free(conv);
    sodium_memzero(key, sizeof key);
    return rc;
}

double lpc_sketch_similarity(const lpc_sketch *a, int i, const lpc_sketch *b, int j)
{
    const uint64_t *x = a->v[i], *y = b->v[j];
    uint32_t nx = a->n[i], ny = b->n[j];
    if (nx == 0 || ny == 0)
        return nx == ny ? 1.0 : 0.0;
    /* Both sets are known in full below the smaller of the truncated
     * parts' largest values: the estimate counts the union there. */
    uint64_t limit = UINT64_MAX;
    if (nx == LPC_SKETCH_K)
        limit = x[nx - 1];
    if (ny == LPC_SKETCH_K && y[ny - 1] < limit)
        limit = y[ny - 1];
    uint32_t p = 0, q = 0, both = 0, all = 0;
    while ((p < nx && x[p] <= limit) || (q < ny && y[q] <= limit)) {
        int take_x = p < nx && x[p] <= limit, take_y = q < ny && y[q] <= limit;
        if (take_x && take_y && x[p] == y[q]) {
            both++;
            p++;
            q++;
        } else if (take_x && (!take_y || x[p] < y[q])) {
            p++;
        } else {
            q++;
        }
        all++;
    }
    return all ? (double)both / all : 1.0;
}

static double min3(double a, double b, double c)
{
    double m = a < b ? a : b;
    return m < c ? m : c;
}

double lpc_sketch_match(const lpc_sketch *stored, const lpc_sketch *asked, int *flip)
{
    double prompt = lpc_sketch_similarity(stored, 0, asked, 0);
    double same = min3(prompt, lpc_sketch_similarity(stored, 1, asked, 1),
                       lpc_sketch_similarity(stored, 2, asked, 2));
    double crossed = min3(prompt, lpc_sketch_similarity(stored, 2, asked, 1),
                          lpc_sketch_similarity(stored, 1, asked, 2));
    *flip = crossed > same;
    return crossed > same ? crossed : same;
}

void lpc_sketch_swap(lpc_sketch *s)
{
    lpc_sketch t = *s;
    s->n[1] = t.n[2];
    s->n[2] = t.n[1];
    memcpy(s->v[1], t.v[2], sizeof s->v[1]);
    memcpy(s->v[2], t.v[1], sizeof s->v[2]);
}

void lpc_sketch_encode(const lpc_sketch *s, uint8_t out[LPC_SKETCH_BYTES])
{
    uint8_t *p = out;
    for (int part = 0; part < 3; part++) {
        for (int i = 0; i < 4; i++)
            *p++ = (uint8_t)(s->n[part] >> (8 * i));
        for (int k = 0; k < LPC_SKETCH_K; k++)
            for (int i = 0; i < 8; i++)
                *p++ = (uint8_t)(s->v[part][k] >> (8 * i));
    }
}

int lpc_sketch_decode(const uint8_t *in, size_t len, lpc_sketch *s)
{
    if (in == NULL || len != LPC_SKETCH_BYTES)
        return LP_ESTORAGE;
    const uint8_t *p = in;
    for (int part = 0; part < 3; part++) {
        uint32_t n = 0;
        for (int i = 0; i < 4; i++)
            n |= (uint32_t)*p++ << (8 * i);
        if (n > LPC_SKETCH_K)
            return LP_ESTORAGE;
        s->n[part] = n;
        for (int k = 0; k < LPC_SKETCH_K; k++) {
            uint64_t v = 0;
            for (int i = 0; i < 8; i++)
                v |= (uint64_t)*p++ << (8 * i);
            s->v[part][k] = v;
        }
    }
    return LP_OK;
}
