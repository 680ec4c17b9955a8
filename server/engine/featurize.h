/*
 * featurize.h — the built-in text featurizer: signed feature hashing.
 *
 * A response (optionally with its prompt) becomes a sparse vector in
 * R^dim, dim = hash_dim + (length ? 2 : 0):
 *   - lower-cased word unigrams and (optionally) bigrams of the response,
 *     each hashed (FNV-1a 64 + a 64-bit finalizer, under a namespace tag)
 *     to a bucket h mod hash_dim with sign +-1 from an independent hash
 *     bit; the bag is L2-normalised so long texts do not dominate;
 *   - optionally the cross of the first cross_max distinct prompt words
 *     with the response unigrams (its own L2-normalised block), so that
 *     a linear reward can depend on the prompt;
 *   - optionally two length features, log1p(words)/4 and log1p(lines)/2,
 *     in the last two coordinates.
 * Words are maximal runs of ASCII letters/digits or non-ASCII bytes (UTF-8
 * is kept as bytes); ASCII is lower-cased. The hash is part of the model
 * format ("fnv1a64-v1"): changing it changes every text model.
 *
 * Ownership: an lp_featurizer owns scratch memory; one per thread.
 */
#ifndef LP_FEATURIZE_H
#define LP_FEATURIZE_H

#include <stddef.h>
#include <stdint.h>

#define LP_FEAT_HASH_MAX (1u << 24) /* cap on hash_dim */

typedef struct lp_feat_spec {
    uint32_t hash_dim; /* number of hashed buckets, 1..LP_FEAT_HASH_MAX */
    int bigrams;       /* include word bigrams */
    int cross_prompt;  /* include prompt-word x response-word crosses */
    int cross_max;     /* distinct prompt words used for crossing */
    int length;        /* include the two length features */
} lp_feat_spec;

/* A sparse vector with strictly increasing indices. Caller-owned; free
 * with lp_sparse_free (accepts NULL-contents). */
typedef struct lp_sparse {
    size_t nnz, cap;
    uint32_t *idx;
    double *val;
} lp_sparse;

void lp_sparse_free(lp_sparse *v);

/* Defaults: hash_dim 4096, bigrams on, crossing off (cross_max 32), length on. */
void lp_feat_spec_init(lp_feat_spec *s);
/* Total dimension of the feature vectors the spec produces. */
size_t lp_feat_dim(const lp_feat_spec *s);

typedef struct lp_featurizer lp_featurizer;

/* New featurizer for a valid spec, or NULL (bad spec or no memory).
 * Free with lp_featurizer_free (NULL ok). */
lp_featurizer *lp_featurizer_new(const lp_feat_spec *s);
void lp_featurizer_free(lp_featurizer *fz);
const lp_feat_spec *lp_featurizer_spec(const lp_featurizer *fz);

/*
 * Features of (prompt, response) into *out (replacing its contents;
 * out's arrays are grown as needed). prompt may be NULL when crossing is
 * off. Returns 0 or LP_ENO_MEMORY.
 */
int lp_featurize(lp_featurizer *fz, const char *prompt, const char *response, lp_sparse *out);

/* out = a - b (sparse; exact zeros dropped). Returns 0 or LP_ENO_MEMORY. */
int lp_sparse_sub(const lp_sparse *a, const lp_sparse *b, lp_sparse *out);

#endif
