/*
 * score_parse.h — a single-pass reader of the common score request
 *
 *   {"prompt": "...", "candidates": [{"text": "...", "features": [numbers],
 *    "ref_logprob": number}, ...], "version": integer}
 *
 * (every field optional but candidates, in any order, JSON whitespace
 * anywhere), which reads numbers as it goes instead of building a tree of
 * values. It accepts a body only when the general reader (jansson, then
 * the handler's checks) would read it to the same values: anything else —
 * another field (task_ids, pessimism's gamma), an escape or a non-ASCII
 * byte in a string, a number outside the exactly converted forms, a
 * duplicate key, a value past a cap — is declined, and the caller parses
 * the body with jansson, which answers the request or names the error.
 * Declining is never an error of the request.
 *
 * Numbers: an integer of at most 15 digits is converted exactly (as
 * jansson's integer, -0 read as 0); a real whose significant digits fit
 * 15 digits and whose decimal exponent is within ±22 by one correctly
 * rounded operation (the same double as strtod's); any other real of at
 * most 64 characters by strtod, as jansson does; a result that is not
 * finite is declined.
 */
#ifndef LP_SCORE_PARSE_H
#define LP_SCORE_PARSE_H

#include <stddef.h>
#include <stdint.h>

typedef struct lp_score_cand {
    const char *text;       /* NULL when absent */
    const double *features; /* NULL when absent; else dim numbers (dim may be 0) */
    size_t dim;
    double ref_logprob;
    int has_ref;
} lp_score_cand;

typedef struct lp_score_req {
    const char *prompt; /* NULL when absent */
    int64_t version;    /* 0 when absent */
    size_t k;           /* candidates, 1..max_candidates */
    lp_score_cand *cands;
} lp_score_req;

/* Caps the reader declines past (the handler's own caps). */
typedef struct lp_score_caps {
    size_t max_candidates, max_features, max_text;
} lp_score_caps;

/* Scratch memory of the reader, reused between requests of one thread
 * (what out points into). Zero-initialize; lp_score_arena_free at the end. */
typedef struct lp_score_arena {
    double *num; /* every candidate's features, one after the other */
    size_t num_len, num_cap;
    char *str; /* the strings, each NUL-terminated */
    size_t str_len, str_cap;
    lp_score_cand *cands;
    size_t cands_cap;
    void *at; /* the reader's offsets per candidate */
    size_t at_cap;
} lp_score_arena;

/* Reads buf[0..len) into *out (pointing into arena): 1 when read, 0 when
 * declined (the general reader decides), -1 when out of memory. */
int lp_score_parse(const char *buf, size_t len, const lp_score_caps *caps, lp_score_arena *arena,
                   lp_score_req *out);

void lp_score_arena_free(lp_score_arena *arena);

#endif
