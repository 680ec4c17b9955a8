/* featurize.c — signed feature hashing of word n-grams. See featurize.h. */
#include "featurize.h"

#include "buf.h"
#include "error.h"

#include <assert.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

struct lp_featurizer {
    lp_feat_spec spec;
    double *acc;       /* hash_dim accumulators, all zero between calls */
    uint8_t *mark;     /* 1 for indices in touched[] */
    uint32_t *touched; /* indices touched since the last flush */
    size_t ntouched;
};

void lp_sparse_free(lp_sparse *v)
{
    if (v == NULL)
        return;
    free(v->idx);
    free(v->val);
    v->idx = NULL;
    v->val = NULL;
    v->nnz = v->cap = 0;
}

/* Room for cap entries in v's two parallel arrays (buf.h's doubling rule). */
static int sparse_reserve(lp_sparse *v, size_t cap)
{
    if (cap <= v->cap)
        return LP_OK;
    size_t nc = lp_grow_cap(v->cap, cap, 16);
    if (nc == 0 || lp_array_resize((void **)&v->idx, nc, sizeof *v->idx) != LP_OK ||
        lp_array_resize((void **)&v->val, nc, sizeof *v->val) != LP_OK)
        return LP_ENO_MEMORY;
    v->cap = nc;
    return LP_OK;
}

void lp_feat_spec_init(lp_feat_spec *s)
{
    s->hash_dim = 4096;
    s->bigrams = 1;
    s->cross_prompt = 0;
    s->cross_max = 32;
    s->length = 1;
}

size_t lp_feat_dim(const lp_feat_spec *s)
{
    return (size_t)s->hash_dim + (s->length ? 2 : 0);
}

lp_featurizer *lp_featurizer_new(const lp_feat_spec *s)
{
    if (s->hash_dim < 1 || s->hash_dim > LP_FEAT_HASH_MAX || s->cross_max < 0)
        return NULL;
    lp_featurizer *fz = calloc(1, sizeof *fz);
    if (fz == NULL)
        return NULL;
    fz->spec = *s;
    fz->acc = calloc(s->hash_dim, sizeof *fz->acc);
    fz->mark = calloc(s->hash_dim, 1);
    fz->touched = malloc(s->hash_dim * sizeof *fz->touched);
    if (fz->acc == NULL || fz->mark == NULL || fz->touched == NULL) {
        lp_featurizer_free(fz);
        return NULL;
    }
    return fz;
}

void lp_featurizer_free(lp_featurizer *fz)
{
    if (fz == NULL)
        return;
    free(fz->acc);
    free(fz->mark);
    free(fz->touched);
    free(fz);
}

const lp_feat_spec *lp_featurizer_spec(const lp_featurizer *fz)
{
    return &fz->spec;
}

/* FNV-1a over a tag byte and up to three byte strings separated by 0x1f,
 * then the splitmix64 finalizer so that low and high bits are both mixed. */
static uint64_t hash_parts(char tag, const char *a, size_t na, const char *b, size_t nb)
{
    uint64_t h = 0xcbf29ce484222325ULL;
#define FNV_BYTE(c) (h = (h ^ (uint8_t)(c)) * 0x100000001b3ULL)
    FNV_BYTE(tag);
    for (size_t i = 0; i < na; i++)
        FNV_BYTE(a[i]);
    if (b != NULL) {
        FNV_BYTE(0x1f);
        for (size_t i = 0; i < nb; i++)
            FNV_BYTE(b[i]);
    }
#undef FNV_BYTE
    h ^= h >> 30;
    h *= 0xbf58476d1ce4e5b9ULL;
    h ^= h >> 27;
    h *= 0x94d049bb133111ebULL;
    h ^= h >> 31;
    return h;
}

static void add_hashed(lp_featurizer *fz, uint64_t h, double w)
{
    uint32_t k = (uint32_t)((h & 0x7fffffffffffffffULL) % fz->spec.hash_dim);
    double s = (h >> 63) ? -1.0 : 1.0;
    if (!fz->mark[k]) {
        fz->mark[k] = 1;
        fz->touched[fz->ntouched++] = k;
    }
    fz->acc[k] += s * w;
}

/* A token is [start, start+len) of the lower-cased copy. */
typedef struct tok {
    size_t start, len;
} tok;

static int is_word_byte(unsigned char c)
{
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c >= 0x80;
}

/* Lower-cases text into *copy and splits it into tokens (caller frees *copy and *toks). */
static int tokenize(lp_featurizer *fz, const char *text, char **copy, tok **toks, size_t *ntok,
                    size_t *nlines)
{
    size_t len = strlen(text);
    char *c = malloc(len + 1);
    tok *t = malloc((len / 2 + 1) * sizeof *t);
    if (c == NULL || t == NULL) {
        free(c);
        free(t);
        return LP_ENO_MEMORY;
    }
    size_t n = 0, lines = 1;
    for (size_t i = 0; i < len;) {
        unsigned char ch = (unsigned char)text[i];
        if (ch == '\n')
            lines++;
        if (!is_word_byte(ch)) {
            c[i++] = ' ';
            continue;
        }
        size_t s = i;
        while (i < len && is_word_byte((unsigned char)text[i])) {
            unsigned char b = (unsigned char)text[i];
            c[i] = (char)(b >= 'A' && b <= 'Z' ? b - 'A' + 'a' : b);
            i++;
        }
        assert(n < len / 2 + 1);
        t[n].start = s;
        t[n].len = i - s;
        n++;
    }
    c[len] = '\0';
    *copy = c;
    *toks = t;
    *ntok = n;
    *nlines = lines;
    return LP_OK;
}

/* Moves the accumulated block into out (appending), L2-normalised, and
 * clears the accumulators. Indices are offset by 0 (hash space). */
static int flush_block(lp_featurizer *fz, lp_sparse *blk)
{
    double ss = 0.0;
    for (size_t i = 0; i < fz->ntouched; i++)
        ss += fz->acc[fz->touched[i]] * fz->acc[fz->touched[i]];
    double inv = ss > 0.0 ? 1.0 / sqrt(ss) : 0.0;
    if (sparse_reserve(blk, blk->nnz + fz->ntouched) != LP_OK)
        return LP_ENO_MEMORY;
    for (size_t i = 0; i < fz->ntouched; i++) {
        uint32_t k = fz->touched[i];
        if (fz->acc[k] != 0.0) {
            blk->idx[blk->nnz] = k;
            blk->val[blk->nnz++] = fz->acc[k] * inv;
        }
        fz->acc[k] = 0.0;
        fz->mark[k] = 0;
    }
    fz->ntouched = 0;
    return LP_OK;
}

static int cmp64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return (x > y) - (x < y);
}

/* Sorts blk's (idx,val) pairs by index and merges duplicates into out. */
static int sort_merge(lp_sparse *blk, lp_sparse *out)
{
    /* Pack (idx, position) so the sort is by index, then by insertion. */
    size_t n = blk->nnz;
    uint64_t *key = malloc((n ? n : 1) * sizeof *key);
    if (key == NULL)
        return LP_ENO_MEMORY;
    for (size_t i = 0; i < n; i++)
        key[i] = ((uint64_t)blk->idx[i] << 32) | (uint64_t)i;
    qsort(key, n, sizeof *key, cmp64);
    out->nnz = 0;
    if (sparse_reserve(out, n + 2) != LP_OK) {
        free(key);
        return LP_ENO_MEMORY;
    }
    for (size_t i = 0; i < n; i++) {
        uint32_t k = (uint32_t)(key[i] >> 32);
        double v = blk->val[key[i] & 0xffffffffu];
        if (out->nnz > 0 && out->idx[out->nnz - 1] == k)
            out->val[out->nnz - 1] += v;
        else {
            out->idx[out->nnz] = k;
            out->val[out->nnz++] = v;
        }
    }
    free(key);
    return LP_OK;
}

int lp_featurize(lp_featurizer *fz, const char *prompt, const char *response, lp_sparse *out)
{
    const lp_feat_spec *s = &fz->spec;
    char *rc = NULL, *pc = NULL;
    tok *rt = NULL, *pt = NULL;
    size_t rn = 0, pn = 0, rlines = 0, plines = 0;
    lp_sparse blk = {0};
    int rv = tokenize(fz, response, &rc, &rt, &rn, &rlines);
    if (rv != LP_OK)
        goto done;
    for (size_t i = 0; i < rn; i++) {
        add_hashed(fz, hash_parts('u', rc + rt[i].start, rt[i].len, NULL, 0), 1.0);
        if (s->bigrams && i + 1 < rn)
            add_hashed(
                fz,
                hash_parts('b', rc + rt[i].start, rt[i].len, rc + rt[i + 1].start, rt[i + 1].len),
                1.0);
    }
    if ((rv = flush_block(fz, &blk)) != LP_OK)
        goto done;
    if (s->cross_prompt && prompt != NULL && s->cross_max > 0) {
        if ((rv = tokenize(fz, prompt, &pc, &pt, &pn, &plines)) != LP_OK)
            goto done;
        int used = 0;
        for (size_t j = 0; j < pn && used < s->cross_max; j++) {
            int seen = 0; /* first occurrence only */
            for (size_t k = 0; k < j && !seen; k++)
                seen = pt[k].len == pt[j].len &&
                       memcmp(pc + pt[k].start, pc + pt[j].start, pt[j].len) == 0;
            if (seen)
                continue;
            used++;
            for (size_t i = 0; i < rn; i++)
                add_hashed(
                    fz, hash_parts('x', pc + pt[j].start, pt[j].len, rc + rt[i].start, rt[i].len),
                    1.0);
        }
        if ((rv = flush_block(fz, &blk)) != LP_OK)
            goto done;
    }
    if ((rv = sort_merge(&blk, out)) != LP_OK)
        goto done;
    if (s->length) {
        out->idx[out->nnz] = s->hash_dim;
        out->val[out->nnz++] = log1p((double)rn) / 4.0;
        out->idx[out->nnz] = s->hash_dim + 1;
        out->val[out->nnz++] = log1p((double)rlines) / 2.0;
    }
done:
    free(rc);
    free(pc);
    free(rt);
    free(pt);
    lp_sparse_free(&blk);
    assert(fz->ntouched == 0 || rv != LP_OK);
    return rv;
}

int lp_sparse_sub(const lp_sparse *a, const lp_sparse *b, lp_sparse *out)
{
    out->nnz = 0;
    if (sparse_reserve(out, a->nnz + b->nnz + 1) != LP_OK)
        return LP_ENO_MEMORY;
    size_t i = 0, j = 0;
    while (i < a->nnz || j < b->nnz) {
        uint32_t k;
        double v;
        if (j >= b->nnz || (i < a->nnz && a->idx[i] < b->idx[j])) {
            k = a->idx[i];
            v = a->val[i++];
        } else if (i >= a->nnz || b->idx[j] < a->idx[i]) {
            k = b->idx[j];
            v = -b->val[j++];
        } else {
            k = a->idx[i];
            v = a->val[i++] - b->val[j++];
        }
        if (v != 0.0) {
            out->idx[out->nnz] = k;
            out->val[out->nnz++] = v;
        }
    }
    return LP_OK;
}
