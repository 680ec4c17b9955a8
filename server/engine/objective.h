/*
 * objective.h — the training objective over a dataset, and its gradient,
 * in one fused pass over the feature matrix.
 *
 *   F(theta) = (1/n) [ sum_i loss_i(theta^T df_i) + l2 ||theta||^2 ]
 *   grad F   = (1/n) [ sum_i loss_i'(m_i) df_i + 2 l2 theta ]
 *
 * Dense data is walked once per evaluation: each row's margin is computed,
 * the per-label loss derivative g_i evaluated, and g_i df_i added to the
 * gradient while the row is still in L1 cache, so the matrix (float32 or
 * float64) is streamed from memory exactly once. Accumulation is in double
 * (the vector float32 kernels sum each block of 8 rows' gradient terms in
 * float first: at most 10 u_f sum |g_i x_ij| more, u_f = 2^-24).
 * Rows are cut into at most 64 contiguous chunks (their number depends on
 * the data's size only) with private accumulators, reduced in chunk order;
 * `threads` threads claim chunks as they go. The result is bit-for-bit
 * reproducible for a given CPU and kernel, whatever the thread count. Two
 * dense kernels exist: hand-fused loops (AVX-512 for float32 data, else
 * AVX2+FMA, when the CPU has them, chosen at run time; portable C
 * otherwise) and a blocked variant through OpenBLAS (cblas_?gemv per block
 * of rows, float accumulation inside a block for float32 data). CSR data
 * uses loops.
 *
 * Ownership: the objective borrows the dataset (it must outlive the
 * objective and not change, except z/eps through lp_objective_relabel).
 */
#ifndef LP_OBJECTIVE_H
#define LP_OBJECTIVE_H

#include "dataset.h"
#include "losses.h"

#include <stddef.h>

typedef enum lp_kernel { LP_KERNEL_FUSED = 0, LP_KERNEL_BLAS = 1 } lp_kernel;

/* Instruction sets of the fused dense kernels, in increasing order. AVX-512
 * is used for float32 storage only (float64 data runs the AVX2 kernel). */
typedef enum lp_simd {
    LP_SIMD_AUTO = 0, /* the best the CPU has */
    LP_SIMD_NONE = 1, /* portable C */
    LP_SIMD_AVX2 = 2, /* AVX2 + FMA */
    LP_SIMD_AVX512 = 3
} lp_simd;

typedef struct lp_objective_opts {
    lp_loss_spec loss;
    double l2;   /* >= 0 */
    int threads; /* >= 1; small problems use 1 regardless */
    lp_kernel kernel;
    lp_simd simd; /* upper bound on the fused kernels' instruction set (AUTO) */
} lp_objective_opts;

void lp_objective_opts_init(lp_objective_opts *o, lp_loss_kind kind);

typedef struct lp_objective lp_objective;

/* New objective, or NULL on no memory / invalid options. Free with
 * lp_objective_free (NULL ok). */
lp_objective *lp_objective_new(const lp_dataset *ds, const lp_objective_opts *o);
void lp_objective_free(lp_objective *ob);

/* Recomputes the per-label constants after ds->z / ds->eps changed. */
void lp_objective_relabel(lp_objective *ob);

/* F(theta); the gradient into grad (d values) when grad != NULL. */
double lp_objective_eval(lp_objective *ob, const double *theta, double *grad);

/* The per-label constants (borrowed; n entries). */
const lp_label_consts *lp_objective_consts(const lp_objective *ob);
const lp_dataset *lp_objective_data(const lp_objective *ob);
const lp_objective_opts *lp_objective_options(const lp_objective *ob);

/* Whether this CPU has AVX2+FMA. */
int lp_objective_simd(void);
/* The best instruction set this CPU offers the fused kernels. */
lp_simd lp_objective_simd_best(void);
/* The instruction set ob's fused kernels use: its option capped by the CPU. */
lp_simd lp_objective_simd_used(const lp_objective *ob);
/* "auto", "none", "avx2", "avx512"; parse returns 0, or -1 for another name. */
const char *lp_simd_name(lp_simd s);
int lp_simd_parse(const char *name, lp_simd *out);

#endif
