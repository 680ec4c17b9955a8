/*
 * dataset.h — training data for the learners: n labelled pairs as feature
 * differences df_i = f(x_i,a1_i) - f(x_i,a0_i), observed labels z_i in
 * {0,1} (z = 1: a1 reportedly preferred) and per-label eps_i (> 0, or
 * +INFINITY for an unprivatized label).
 *
 * Storage is one of: dense float32 (the fast path: half the memory traffic,
 * accumulation stays double), dense float64 (exact, for small data and the
 * golden tests), or CSR (the text featurizer). Row-major, 64-byte aligned.
 *
 * Input files are JSONL, one label per line, in one of three formats
 * (detected from the first record; all records must agree):
 *   dense   {"x0": [d numbers], "x1": [d numbers], "z": 0|1,
 *            "epsilon": number|null}   (optional "id", "y": clean label,
 *            "prompt": the grouping key's text, "annotator" (or "user"):
 *            who gave the label, an integer or a string)
 *   export  the server's /v1/export lines: {"prompt","chosen","rejected",
 *            "epsilon",..., "chosen_features"?, "rejected_features"?};
 *            chosen is a1 and z = 1 (the export is oriented by the
 *            privatized label); dense if both feature arrays are present.
 *   pairs   {"prompt","chosen","rejected", ...} without "epsilon"
 *            (e.g. OASST pairs): unprivatized, eps = +inf, chosen = a1.
 * The export's "annotator" (the pseudonym) and the dense "annotator"/"user"
 * field group labels by annotator for user-level privacy (aup.h): either
 * every record has one or none does. Integers are kept, strings hashed to
 * 63 bits (FNV-1a); without the field ds->user is NULL (each label its own
 * annotator).
 * Text records are featurized with the caller's lp_featurizer. Every
 * rejection names the line: ragged vectors, non-numbers, values that are
 * not finite (or not representable in float32 storage), z not in {0,1},
 * eps <= 0, missing fields, and an empty file.
 *
 * Ownership: lp_dataset_* constructors return a caller-owned dataset freed
 * with lp_dataset_free (NULL ok).
 */
#ifndef LP_DATASET_H
#define LP_DATASET_H

#include "featurize.h"

#include <stddef.h>
#include <stdint.h>

typedef enum lp_storage { LP_STORE_F32 = 0, LP_STORE_F64 = 1, LP_STORE_CSR = 2 } lp_storage;

typedef enum lp_data_format {
    LP_FMT_DENSE = 0,
    LP_FMT_EXPORT = 1,
    LP_FMT_PAIRS = 2
} lp_data_format;

typedef struct lp_dataset {
    size_t n, d, cap;
    lp_storage storage;
    float *xf;      /* F32: n*d */
    double *xd;     /* F64: n*d */
    size_t *rowptr; /* CSR: n+1 offsets into col/val */
    uint32_t *col;  /* CSR */
    double *val;    /* CSR */
    size_t nnz, nnz_cap;
    uint8_t *z;      /* n observed labels */
    double *eps;     /* n budgets */
    int8_t *y;       /* n clean labels (simulation) or NULL; -1 = unknown */
    uint64_t *group; /* n group keys (hash of the prompt text; 0 for dense
                        records) so that evaluation can split by prompt;
                        NULL for datasets built with lp_dataset_new_dense */
    /* Sums over labels of f(chosen) and f(rejected), chosen per z (for the
     * TRL reward metrics, which are linear in theta); NULL if unknown. */
    double *sum_chosen, *sum_rejected;
    int64_t *user; /* n annotator ids, or NULL when the data has none */
} lp_dataset;

/* "float32", "float64" or "csr". */
const char *lp_storage_name(lp_storage s);

/* Empty dataset of dimension d (>= 1). NULL on bad arguments or no memory. */
lp_dataset *lp_dataset_new(size_t d, lp_storage storage);
/* A dense dataset with n rows allocated and uninitialised (for generators
 * that fill xf/xd, z, eps directly). NULL on failure. */
lp_dataset *lp_dataset_new_dense(size_t n, size_t d, lp_storage storage);
void lp_dataset_free(lp_dataset *ds);

/* Appends one dense label (x0, x1 borrowed, d values each). Returns 0,
 * LP_EINVALID_ARGUMENT (non-finite or not float-representable values,
 * z or eps invalid; msg says which) or LP_ENO_MEMORY. */
int lp_dataset_add_dense(lp_dataset *ds, const double *x0, const double *x1, int z, double eps,
                         int y, char *msg, size_t msglen);
/* Appends one sparse label (CSR storage only). */
int lp_dataset_add_sparse(lp_dataset *ds, const lp_sparse *f0, const lp_sparse *f1, int z,
                          double eps, int y, char *msg, size_t msglen);

/* Loader options. */
typedef struct lp_load_opts {
    lp_featurizer *fz; /* for text records; borrowed; NULL: text rejected */
    int prefer_f32;    /* dense storage: 1 float32, 0 float64, -1 auto
                          (float64 up to 2^24 values, float32 above) */
    size_t max_line;   /* cap on a line's length (default 64 MiB if 0) */
    /* Optional observer of every loaded label (NULL: none), for learners
     * that need the two responses rather than their difference: the
     * prompt's grouping key (0 without a prompt), response 0 and 1 as
     * dense vectors (x0, x1: d values) or sparse ones (f0, f1: text), the
     * label and its eps. A nonzero return (an LP_E* code) stops loading. */
    int (*on_pair)(void *ctx, uint64_t group, const double *x0, const double *x1,
                   const lp_sparse *f0, const lp_sparse *f1, size_t d, int z, double eps);
    void *on_pair_ctx;
} lp_load_opts;

/*
 * Loads a JSONL file (path "-" is stdin). On success *out is a new
 * dataset and *fmt (if non-NULL) the detected format. Errors: LP_EIO
 * (cannot open/read), LP_EMALFORMED_JSON / LP_EWRONG_TYPE /
 * LP_EMISSING_FIELD / LP_EBAD_LABEL / LP_EBAD_EPSILON (msg names the line),
 * LP_EINVALID_ARGUMENT (empty data, inconsistent dimension or format),
 * LP_ENO_MEMORY.
 */
int lp_dataset_load(const char *path, const lp_load_opts *opts, lp_dataset **out,
                    lp_data_format *fmt, char *msg, size_t msglen);

/* New dataset with rows idx[0..k) of ds (copied). NULL on no memory. */
lp_dataset *lp_dataset_subset(const lp_dataset *ds, const size_t *idx, size_t k);

/* The grouping key of a prompt (FNV-1a of its text; nonzero). */
uint64_t lp_dataset_prompt_key(const char *prompt);

/* Row i's difference vector dotted with theta (any storage). */
double lp_dataset_row_dot(const lp_dataset *ds, size_t i, const double *theta);

/* Summary: n, count of z = 1, histogram of distinct eps values (up to
 * max_bins, sorted ascending, +inf last). Returns the number of bins. */
typedef struct lp_eps_bin {
    double eps;
    size_t count;
} lp_eps_bin;
size_t lp_dataset_eps_hist(const lp_dataset *ds, lp_eps_bin *bins, size_t max_bins,
                           size_t *n_other);

#endif
