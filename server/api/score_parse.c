/* score_parse.c — see score_parse.h. */
#include "score_parse.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#define NUMBER_TEXT_MAX 64
#define EXACT_DIGITS 15 /* below 2^53: exact as a double */
#define EXACT_POW10 22  /* 10^22 is the largest exact power of ten */

enum { DECLINE = 0, OK = 1, NOMEM = -1 };

typedef struct reader {
    const char *p, *end;
    const lp_score_caps *caps;
    lp_score_arena *a;
} reader;

static const double POW10[EXACT_POW10 + 1] = {1e0,  1e1,  1e2,  1e3,  1e4,  1e5,  1e6,  1e7,
                                              1e8,  1e9,  1e10, 1e11, 1e12, 1e13, 1e14, 1e15,
                                              1e16, 1e17, 1e18, 1e19, 1e20, 1e21, 1e22};

static void skip_ws(reader *r)
{
    while (r->p < r->end && (*r->p == ' ' || *r->p == '\t' || *r->p == '\n' || *r->p == '\r'))
        r->p++;
}

/* The next non-space byte is c: consumes it. */
static int eat(reader *r, char c)
{
    skip_ws(r);
    if (r->p < r->end && *r->p == c) {
        r->p++;
        return 1;
    }
    return 0;
}

static int grow(void **buf, size_t *cap, size_t need, size_t size)
{
    if (need <= *cap)
        return OK;
    size_t n = *cap ? *cap : 256;
    while (n < need)
        n *= 2;
    void *b = realloc(*buf, n * size);
    if (b == NULL)
        return NOMEM;
    *buf = b;
    *cap = n;
    return OK;
}

/* A string of printable ASCII without escapes, at most max bytes, copied
 * (NUL-terminated) into the arena; *off gets its offset. */
static int read_string(reader *r, size_t max, size_t *off)
{
    if (!eat(r, '"'))
        return DECLINE;
    const char *s = r->p;
    while (r->p < r->end && *r->p != '"') {
        unsigned char c = (unsigned char)*r->p;
        if (c < 0x20 || c >= 0x80 || c == '\\')
            return DECLINE;
        r->p++;
    }
    if (r->p >= r->end)
        return DECLINE;
    size_t n = (size_t)(r->p - s);
    r->p++; /* the closing quote */
    if (n > max)
        return DECLINE;
    lp_score_arena *a = r->a;
    if (grow((void **)&a->str, &a->str_cap, a->str_len + n + 1, 1) != OK)
        return NOMEM;
    memcpy(a->str + a->str_len, s, n);
    a->str[a->str_len + n] = '\0';
    *off = a->str_len;
    a->str_len += n + 1;
    return OK;
}

/* A key among names (NULL-terminated): its index into *which. */
static int read_key(reader *r, const char *const *names, int *which)
{
    skip_ws(r);
    if (r->p >= r->end || *r->p != '"')
        return DECLINE;
    const char *s = r->p + 1, *q = memchr(s, '"', (size_t)(r->end - s));
    if (q == NULL)
        return DECLINE;
    size_t n = (size_t)(q - s);
    for (int i = 0; names[i] != NULL; i++)
        if (strlen(names[i]) == n && memcmp(names[i], s, n) == 0) {
            r->p = q + 1;
            *which = i;
            return eat(r, ':') ? OK : DECLINE;
        }
    return DECLINE; /* another key, or one with an escape */
}

/* Digits from *p: appended to *m (wrapping past 19 digits, when *m is not
 * used), their count returned. */
static int digits(const char **p, const char *e, uint64_t *m)
{
    const char *s = *p, *q = s;
    uint64_t v = *m;
    while (q < e && (unsigned char)(*q - '0') < 10)
        v = v * 10 + (uint64_t)(*q++ - '0');
    *m = v;
    *p = q;
    return (int)(q - s);
}

/* A JSON number, read to the double the general reader gets for it. The
 * mantissa m holds every digit (leading zeros too, so their count bounds
 * the significant ones). */
static int read_number(reader *r, double *out)
{
    skip_ws(r);
    const char *s = r->p, *p = s, *e = r->end;
    int neg = p < e && *p == '-';
    p += neg;
    if (p >= e || *p < '0' || *p > '9')
        return DECLINE;
    uint64_t m = 0;
    int n = *p == '0' ? (p++, 1) : digits(&p, e, &m), scale = 0, integer = 1;
    if (p < e && *p == '.') {
        integer = 0;
        p++;
        scale = digits(&p, e, &m);
        if (scale == 0)
            return DECLINE;
        n += scale;
    }
    int exp = 0;
    if (p < e && (*p == 'e' || *p == 'E')) {
        integer = 0;
        p++;
        int eneg = p < e && *p == '-';
        p += p < e && (*p == '-' || *p == '+');
        if (p >= e || *p < '0' || *p > '9')
            return DECLINE;
        for (; p < e && *p >= '0' && *p <= '9'; p++)
            if (exp < 10000)
                exp = exp * 10 + (*p - '0');
        exp = eneg ? -exp : exp;
    }
    r->p = p;
    if (integer) { /* jansson's integer: exact below 10^15; -0 is 0 */
        if (n > EXACT_DIGITS)
            return DECLINE;
        *out = m == 0 ? 0.0 : neg ? -(double)m : (double)m;
        return OK;
    }
    int e10 = exp - scale;
    double v;
    if (n <= EXACT_DIGITS && e10 >= -EXACT_POW10 && e10 <= EXACT_POW10) {
        v = e10 < 0 ? (double)m / POW10[-e10] : (double)m * POW10[e10];
        v = neg ? -v : v;
    } else {
        size_t len = (size_t)(p - s);
        char text[NUMBER_TEXT_MAX + 1];
        if (len > NUMBER_TEXT_MAX)
            return DECLINE;
        memcpy(text, s, len);
        text[len] = '\0';
        v = strtod(text, NULL);
    }
    if (!isfinite(v))
        return DECLINE;
    *out = v;
    return OK;
}

/* [numbers] appended to the arena's numbers; *dim gets their count. */
static int read_features(reader *r, size_t *dim)
{
    lp_score_arena *a = r->a;
    *dim = 0;
    if (!eat(r, '['))
        return DECLINE;
    if (eat(r, ']'))
        return OK;
    do {
        if (*dim >= r->caps->max_features)
            return DECLINE;
        if (grow((void **)&a->num, &a->num_cap, a->num_len + 1, sizeof *a->num) != OK)
            return NOMEM;
        int rc = read_number(r, &a->num[a->num_len]);
        if (rc != OK)
            return rc;
        a->num_len++;
        (*dim)++;
    } while (eat(r, ','));
    return eat(r, ']') ? OK : DECLINE;
}

/* Offsets while reading (the arena may move); pointers at the end. */
typedef struct cand_at {
    size_t text, num, dim;
    int has_text, has_features;
} cand_at;

static int read_candidate(reader *r, lp_score_cand *c, cand_at *at)
{
    static const char *const keys[] = {"text", "features", "ref_logprob", NULL};
    int seen[3] = {0, 0, 0};
    memset(c, 0, sizeof *c);
    memset(at, 0, sizeof *at);
    if (!eat(r, '{'))
        return DECLINE;
    if (eat(r, '}'))
        return OK;
    do {
        int k, rc = read_key(r, keys, &k);
        if (rc != OK || seen[k]++)
            return DECLINE;
        if (k == 0) {
            rc = read_string(r, r->caps->max_text, &at->text);
            at->has_text = 1;
        } else if (k == 1) {
            at->num = r->a->num_len;
            rc = read_features(r, &at->dim);
            at->has_features = 1;
        } else {
            rc = read_number(r, &c->ref_logprob);
            c->has_ref = 1;
        }
        if (rc != OK)
            return rc;
    } while (eat(r, ','));
    return eat(r, '}') ? OK : DECLINE;
}

/* Digits only, 1..10^15: the general reader's integer >= 1. */
static int read_version(reader *r, int64_t *out)
{
    double v;
    const char *s = (skip_ws(r), r->p);
    int rc = read_number(r, &v);
    if (rc != OK)
        return rc;
    for (const char *p = s; p < r->p; p++)
        if (*p < '0' || *p > '9')
            return DECLINE;
    if (v < 1)
        return DECLINE;
    *out = (int64_t)v;
    return OK;
}

static int read_request(reader *r, lp_score_req *out, size_t *prompt_at)
{
    static const char *const keys[] = {"prompt", "candidates", "version", NULL};
    int seen[3] = {0, 0, 0}, has_prompt = 0;
    lp_score_arena *a = r->a;
    if (!eat(r, '{'))
        return DECLINE;
    do {
        int k, rc = read_key(r, keys, &k);
        if (rc != OK || seen[k]++)
            return DECLINE;
        if (k == 0) {
            rc = read_string(r, r->caps->max_text, prompt_at);
            has_prompt = 1;
        } else if (k == 2) {
            rc = read_version(r, &out->version);
        } else if (!eat(r, '[') || eat(r, ']')) { /* candidates: not an array, or empty */
            return DECLINE;
        } else {
            do {
                if (out->k >= r->caps->max_candidates)
                    return DECLINE;
                if (grow((void **)&a->cands, &a->cands_cap, out->k + 1, sizeof *a->cands) != OK ||
                    grow(&a->at, &a->at_cap, out->k + 1, sizeof(cand_at)) != OK)
                    return NOMEM;
                rc = read_candidate(r, &a->cands[out->k], (cand_at *)a->at + out->k);
                out->k++;
            } while (rc == OK && eat(r, ','));
            if (rc == OK && !eat(r, ']'))
                return DECLINE;
        }
        if (rc != OK)
            return rc;
    } while (eat(r, ','));
    if (!eat(r, '}') || !seen[1])
        return DECLINE;
    skip_ws(r);
    if (r->p != r->end)
        return DECLINE;
    out->prompt = has_prompt ? a->str + *prompt_at : NULL;
    return OK;
}

int lp_score_parse(const char *buf, size_t len, const lp_score_caps *caps, lp_score_arena *arena,
                   lp_score_req *out)
{
    memset(out, 0, sizeof *out);
    arena->num_len = arena->str_len = 0;
    reader r = {buf, buf + len, caps, arena};
    size_t prompt_at = 0;
    int rc = read_request(&r, out, &prompt_at);
    if (rc == OK) {
        const cand_at *ats = arena->at;
        out->cands = arena->cands;
        for (size_t i = 0; i < out->k; i++) {
            lp_score_cand *c = &out->cands[i];
            c->text = ats[i].has_text ? arena->str + ats[i].text : NULL;
            /* features present but empty still point somewhere (not NULL) */
            c->features = ats[i].has_features
                              ? (arena->num ? arena->num + ats[i].num : (const double *)arena)
                              : NULL;
            c->dim = ats[i].dim;
        }
    } else {
        memset(out, 0, sizeof *out);
    }
    return rc;
}

void lp_score_arena_free(lp_score_arena *arena)
{
    free(arena->num);
    free(arena->str);
    free(arena->cands);
    free(arena->at);
    memset(arena, 0, sizeof *arena);
}
