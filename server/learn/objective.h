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
 * float64) is streamed from memory exactly once. Accumulation is in double.
 * Rows are split into `threads` contiguous slices with private
 * accumulators, reduced in slice order: for a fixed thread count the
 * result is bit-for-bit reproducible. Two dense kernels exist: hand-fused
 * loops (AVX2+FMA when the CPU has them, portable C otherwise) and a
 * blocked variant through OpenBLAS (cblas_?gemv per block of rows, float
 * accumulation inside a block for float32 data). CSR data uses loops.
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

typedef struct lp_objective_opts {
    lp_loss_spec loss;
    double l2;      /* >= 0 */
    int threads;    /* >= 1; small problems use 1 regardless */
    lp_kernel kernel;
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

/* Whether the AVX2+FMA kernels are in use on this CPU. */
int lp_objective_simd(void);

#endif
