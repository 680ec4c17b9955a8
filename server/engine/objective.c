/* objective.c — fused loss-and-gradient passes. See objective.h. */
#include "objective.h"

#include <assert.h>
#include <cblas.h>
#include <math.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#include <immintrin.h>
#define LP_HAVE_X86 1
#else
#define LP_HAVE_X86 0
#endif

#define BLAS_BLOCK 256                 /* rows per gemv block (256 KiB of float32 at d = 256) */
#define MIN_WORK_PER_THREAD (1u << 18) /* values per thread before threading pays */
#define MAX_THREADS 64
#define MAX_CHUNKS 64                 /* row chunks per evaluation */
#define MIN_WORK_PER_CHUNK (1u << 16) /* values per chunk */
#define MAX_ACC_VALUES (1u << 21)     /* chunk accumulators: at most 16 MiB */

struct lp_objective {
    const lp_dataset *ds;
    lp_objective_opts o;
    lp_label_consts *k; /* n */
};

void lp_objective_opts_init(lp_objective_opts *o, lp_loss_kind kind)
{
    lp_loss_spec_init(&o->loss, kind);
    o->l2 = 0.0;
    o->threads = 1;
    o->kernel = LP_KERNEL_FUSED;
    o->simd = LP_SIMD_AUTO;
}

lp_objective *lp_objective_new(const lp_dataset *ds, const lp_objective_opts *o)
{
    if (ds == NULL || ds->n == 0 || o->threads < 1 || !(o->l2 >= 0.0) || !(o->loss.rmax > 0.0) ||
        !(o->loss.tau > 0.0) || o->simd < LP_SIMD_AUTO || o->simd > LP_SIMD_AVX512)
        return NULL;
    lp_objective *ob = calloc(1, sizeof *ob);
    if (ob == NULL)
        return NULL;
    ob->ds = ds;
    ob->o = *o;
    if (ob->o.threads > MAX_THREADS)
        ob->o.threads = MAX_THREADS;
    ob->k = malloc(ds->n * sizeof *ob->k);
    if (ob->k == NULL) {
        free(ob);
        return NULL;
    }
    lp_objective_relabel(ob);
    return ob;
}

void lp_objective_free(lp_objective *ob)
{
    if (ob == NULL)
        return;
    free(ob->k);
    free(ob);
}

void lp_objective_relabel(lp_objective *ob)
{
    const lp_dataset *ds = ob->ds;
    double last = NAN;
    lp_label_consts kk = {0};
    for (size_t i = 0; i < ds->n; i++) {
        if (!(ds->eps[i] == last)) { /* labels usually share eps: reuse */
            lp_label_consts_from_eps(ds->eps[i], &kk);
            last = ds->eps[i];
        }
        ob->k[i] = kk;
    }
}

const lp_label_consts *lp_objective_consts(const lp_objective *ob)
{
    return ob->k;
}
const lp_dataset *lp_objective_data(const lp_objective *ob)
{
    return ob->ds;
}
const lp_objective_opts *lp_objective_options(const lp_objective *ob)
{
    return &ob->o;
}

int lp_objective_simd(void)
{
    return lp_objective_simd_best() >= LP_SIMD_AVX2;
}

lp_simd lp_objective_simd_best(void)
{
#if LP_HAVE_X86
    static lp_simd cached = LP_SIMD_AUTO;
    if (cached == LP_SIMD_AUTO) {
        __builtin_cpu_init();
        if (__builtin_cpu_supports("avx512f"))
            cached = LP_SIMD_AVX512;
        else if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma"))
            cached = LP_SIMD_AVX2;
        else
            cached = LP_SIMD_NONE;
    }
    return cached;
#else
    return LP_SIMD_NONE;
#endif
}

lp_simd lp_objective_simd_used(const lp_objective *ob)
{
    lp_simd best = lp_objective_simd_best();
    return ob->o.simd == LP_SIMD_AUTO || ob->o.simd > best ? best : ob->o.simd;
}

static const char *const simd_names[] = {"auto", "none", "avx2", "avx512"};

const char *lp_simd_name(lp_simd s)
{
    return s >= LP_SIMD_AUTO && s <= LP_SIMD_AVX512 ? simd_names[s] : "?";
}

int lp_simd_parse(const char *name, lp_simd *out)
{
    for (int s = LP_SIMD_AUTO; s <= LP_SIMD_AVX512; s++)
        if (strcmp(name, simd_names[s]) == 0) {
            *out = (lp_simd)s;
            return 0;
        }
    return -1;
}

/* A kernel's input: rows [r0, r1) (one chunk), its own gradient accumulator. */
typedef struct slice {
    const lp_objective *ob;
    const double *theta;
    const float *theta_f; /* float copy for the BLAS float kernel */
    size_t r0, r1;
    double loss;
    double *grad; /* d, zeroed by the caller */
    float *mbuf;  /* BLAS kernel scratch: BLAS_BLOCK margins */
} slice;

static inline double label_grad(const lp_objective *ob, size_t i, double m, double *g)
{
    return lp_loss_point(&ob->o.loss, m, ob->ds->z[i] ? 1 : -1, &ob->k[i], g);
}

/* A vector square-chipo routine over at most `width` labels (sqchipo8,
 * sqchipo4): writes g[0..width), returns the sum of the nb losses. */
typedef double (*sqchipo_fn)(const lp_objective *ob, size_t i0, size_t nb, const double *m,
                             double *g);

/* Loss and derivatives of the nb rows of a block from i0 (margins m[]):
 * square-chipo through sq, `width` labels at a time, the other losses
 * through lp_loss_point. Sets g[0..nb), returns the sum of the losses. */
static double block_losses(const lp_objective *ob, size_t i0, size_t nb, const double *m, double *g,
                           sqchipo_fn sq, size_t width)
{
    double loss = 0.0;
    if (ob->o.loss.kind == LP_LOSS_SQUARE_CHIPO) {
        for (size_t b = 0; b < nb; b += width)
            loss += sq(ob, i0 + b, nb - b < width ? nb - b : width, m + b, g + b);
    } else {
        for (size_t b = 0; b < nb; b++)
            loss += label_grad(ob, i0 + b, m[b], &g[b]);
    }
    return loss;
}

/* Portable fused rows (float32 or float64 dense). */
#define DEFINE_FUSED_PORTABLE(NAME, T, FIELD)                                                      \
    static void NAME(slice *s)                                                                     \
    {                                                                                              \
        const lp_objective *ob = s->ob;                                                            \
        size_t d = ob->ds->d;                                                                      \
        const double *th = s->theta;                                                               \
        double *gr = s->grad, loss = 0.0;                                                          \
        for (size_t i = s->r0; i < s->r1; i++) {                                                   \
            const T *x = ob->ds->FIELD + i * d;                                                    \
            double a0 = 0, a1 = 0, a2 = 0, a3 = 0;                                                 \
            size_t j = 0;                                                                          \
            for (; j + 4 <= d; j += 4) {                                                           \
                a0 += (double)x[j] * th[j];                                                        \
                a1 += (double)x[j + 1] * th[j + 1];                                                \
                a2 += (double)x[j + 2] * th[j + 2];                                                \
                a3 += (double)x[j + 3] * th[j + 3];                                                \
            }                                                                                      \
            for (; j < d; j++)                                                                     \
                a0 += (double)x[j] * th[j];                                                        \
            double g;                                                                              \
            loss += label_grad(ob, i, (a0 + a1) + (a2 + a3), &g);                                  \
            if (g != 0.0)                                                                          \
                for (j = 0; j < d; j++)                                                            \
                    gr[j] += g * (double)x[j];                                                     \
        }                                                                                          \
        s->loss = loss;                                                                            \
    }
DEFINE_FUSED_PORTABLE(fused_f32_portable, float, xf)
DEFINE_FUSED_PORTABLE(fused_f64_portable, double, xd)

#if LP_HAVE_X86
__attribute__((target("avx2,fma"))) static inline double hsum256(__m256d v)
{
    __m128d lo = _mm256_castpd256_pd128(v), hi = _mm256_extractf128_pd(v, 1);
    lo = _mm_add_pd(lo, hi);
    return _mm_cvtsd_f64(lo) + _mm_cvtsd_f64(_mm_unpackhi_pd(lo, lo));
}

/* exp(r) for |r| <= ln2/2: Taylor coefficients of degree 13 down to 0
 * (Horner order), and ln 2 split in two for the range reduction
 * r = x - k ln2. Shared by the AVX-512 and AVX2 tanh. */
static const double exp_taylor[14] = {1.0 / 6227020800.0,
                                      1.0 / 479001600.0,
                                      1.0 / 39916800.0,
                                      1.0 / 3628800.0,
                                      1.0 / 362880.0,
                                      1.0 / 40320.0,
                                      1.0 / 5040.0,
                                      1.0 / 720.0,
                                      1.0 / 120.0,
                                      1.0 / 24.0,
                                      1.0 / 6.0,
                                      0.5,
                                      1.0,
                                      1.0};
#define LN2_HI 6.93147180369123816490e-01
#define LN2_LO 1.90821492927058770002e-10
#define LOG2_E 1.4426950408889634

/* AVX-512: tanh(y) for 8 doubles, via t = exp(-2|y|) and (1-t)/(1+t).
 * |y| is clamped at 20 (tanh = +-1 in double beyond 19.1); exp by
 * range reduction to |r| <= ln2/2 and a degree-13 Taylor polynomial
 * (truncation < 1e-17), scaled by vscalefpd. Absolute error ~2e-16 (the
 * 1 - t cancellation for small |y|; libm's tanh differs from it by less
 * than 4e-16 on [-25, 25]), which is all square-chipo needs: its loss
 * (p - c zbar)^2 and derivative (p - c zbar)(1 - p^2) are then off by a few
 * 1e-16 absolute, like a double rounding. y must not be NaN (the caller
 * clips margins first; a NaN margin is clipped to -2 rmax). */
__attribute__((target("avx512f"))) static inline __m512d tanh8(__m512d y)
{
    const __m512d one = _mm512_set1_pd(1.0);
    __m512d a = _mm512_min_pd(_mm512_abs_pd(y), _mm512_set1_pd(20.0));
    __m512d x = _mm512_mul_pd(a, _mm512_set1_pd(-2.0));
    __m512d k = _mm512_roundscale_pd(_mm512_mul_pd(x, _mm512_set1_pd(LOG2_E)),
                                     _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    __m512d r = _mm512_fnmadd_pd(k, _mm512_set1_pd(LN2_HI), x);
    r = _mm512_fnmadd_pd(k, _mm512_set1_pd(LN2_LO), r);
    __m512d p = _mm512_set1_pd(exp_taylor[0]);
    for (int i = 1; i < 14; i++)
        p = _mm512_fmadd_pd(p, r, _mm512_set1_pd(exp_taylor[i]));
    __m512d t = _mm512_scalef_pd(p, k);
    __m512d th = _mm512_div_pd(_mm512_sub_pd(one, t), _mm512_add_pd(one, t));
    /* copy y's sign bit */
    __m512i sign = _mm512_and_si512(_mm512_castpd_si512(y), _mm512_set1_epi64(INT64_MIN));
    return _mm512_castsi512_pd(_mm512_or_si512(_mm512_castpd_si512(th), sign));
}

/* Square-chipo loss and derivative for nb <= 8 labels (rows i0.., margins
 * m[0..8)), the vector form of lp_loss_point's square-chipo case: same
 * clip rule (inside iff |m| < 2 rmax; NaN is outside, clipped to -2 rmax),
 * tanh8 for tanh. Writes g[0..8) (0 from lane nb on); returns the sum of
 * the nb losses. */
__attribute__((target("avx512f"))) static double sqchipo8(const lp_objective *ob, size_t i0,
                                                          size_t nb, const double *m, double *g)
{
    double cz[8] = {0}, l[8];
    for (size_t b = 0; b < nb; b++)
        cz[b] = ob->ds->z[i0 + b] ? ob->k[i0 + b].c : -ob->k[i0 + b].c;
    __m512d R = _mm512_set1_pd(2.0 * ob->o.loss.rmax), mv = _mm512_loadu_pd(m);
    __mmask8 inside = _mm512_cmp_pd_mask(_mm512_abs_pd(mv), R, _CMP_LT_OQ);
    __mmask8 pos = _mm512_cmp_pd_mask(mv, _mm512_setzero_pd(), _CMP_GT_OQ);
    __m512d out = _mm512_mask_blend_pd(pos, _mm512_sub_pd(_mm512_setzero_pd(), R), R);
    __m512d mc = _mm512_mask_blend_pd(inside, out, mv);
    __m512d p = tanh8(_mm512_mul_pd(mc, _mm512_set1_pd(0.5)));
    __m512d e = _mm512_sub_pd(p, _mm512_loadu_pd(cz));
    __m512d gv = _mm512_mul_pd(e, _mm512_fnmadd_pd(p, p, _mm512_set1_pd(1.0)));
    __mmask8 live = (__mmask8)((1u << nb) - 1u);
    _mm512_storeu_pd(g, _mm512_maskz_mov_pd(inside & live, gv));
    _mm512_storeu_pd(l, _mm512_mul_pd(e, e));
    double loss = 0.0;
    for (size_t b = 0; b < nb; b++)
        loss += l[b];
    return loss;
}

/* AVX2: tanh(y) for 4 doubles, the same computation as tanh8 (same
 * clamp, range reduction and polynomial; 2^k is built in the exponent
 * bits, exact for k in [-58, 0]), so the two agree bit for bit. y must not
 * be NaN. */
__attribute__((target("avx2,fma"))) static inline __m256d tanh4(__m256d y)
{
    const __m256d one = _mm256_set1_pd(1.0), sign = _mm256_set1_pd(-0.0);
    __m256d a = _mm256_min_pd(_mm256_andnot_pd(sign, y), _mm256_set1_pd(20.0));
    __m256d x = _mm256_mul_pd(a, _mm256_set1_pd(-2.0));
    __m256d k = _mm256_round_pd(_mm256_mul_pd(x, _mm256_set1_pd(LOG2_E)),
                                _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    __m256d r = _mm256_fnmadd_pd(k, _mm256_set1_pd(LN2_HI), x);
    r = _mm256_fnmadd_pd(k, _mm256_set1_pd(LN2_LO), r);
    __m256d p = _mm256_set1_pd(exp_taylor[0]);
    for (int i = 1; i < 14; i++)
        p = _mm256_fmadd_pd(p, r, _mm256_set1_pd(exp_taylor[i]));
    __m256i e = _mm256_cvtepi32_epi64(_mm256_cvtpd_epi32(k));
    e = _mm256_slli_epi64(_mm256_add_epi64(e, _mm256_set1_epi64x(1023)), 52);
    __m256d t = _mm256_mul_pd(p, _mm256_castsi256_pd(e));
    __m256d th = _mm256_div_pd(_mm256_sub_pd(one, t), _mm256_add_pd(one, t));
    return _mm256_or_pd(th, _mm256_and_pd(y, sign));
}

/* Square-chipo loss and derivative for nb <= 4 labels, the AVX2 form of
 * sqchipo8 (same clip rule, tanh4). Writes g[0..4) (0 from lane nb on);
 * returns the sum of the nb losses. */
__attribute__((target("avx2,fma"))) static double sqchipo4(const lp_objective *ob, size_t i0,
                                                           size_t nb, const double *m, double *g)
{
    double cz[4] = {0}, l[4], lane[4] = {0, 1, 2, 3};
    for (size_t b = 0; b < nb; b++)
        cz[b] = ob->ds->z[i0 + b] ? ob->k[i0 + b].c : -ob->k[i0 + b].c;
    const __m256d zero = _mm256_setzero_pd();
    __m256d R = _mm256_set1_pd(2.0 * ob->o.loss.rmax), mv = _mm256_loadu_pd(m);
    __m256d absm = _mm256_andnot_pd(_mm256_set1_pd(-0.0), mv);
    __m256d inside = _mm256_cmp_pd(absm, R, _CMP_LT_OQ);
    __m256d pos = _mm256_cmp_pd(mv, zero, _CMP_GT_OQ);
    __m256d out = _mm256_blendv_pd(_mm256_sub_pd(zero, R), R, pos);
    __m256d mc = _mm256_blendv_pd(out, mv, inside);
    __m256d p = tanh4(_mm256_mul_pd(mc, _mm256_set1_pd(0.5)));
    __m256d e = _mm256_sub_pd(p, _mm256_loadu_pd(cz));
    __m256d gv = _mm256_mul_pd(e, _mm256_fnmadd_pd(p, p, _mm256_set1_pd(1.0)));
    __m256d live = _mm256_cmp_pd(_mm256_loadu_pd(lane), _mm256_set1_pd((double)nb), _CMP_LT_OQ);
    _mm256_storeu_pd(g, _mm256_and_pd(gv, _mm256_and_pd(inside, live)));
    _mm256_storeu_pd(l, _mm256_mul_pd(e, e));
    double loss = 0.0;
    for (size_t b = 0; b < nb; b++)
        loss += l[b];
    return loss;
}

/* The float32 kernels of the vector levels share one shape (fused_f32_rows
 * below); a level supplies its width-specific steps:
 *   margin(x, theta, d): one row's margin, summed in double;
 *   sq, width: square-chipo for `width` rows at once (sqchipo8, sqchipo4);
 *   stripes(gr, xb, d, g): for a full block of F32_BLOCK rows xb whose g_b
 *     are 0 or within [2^-100, 2^100], adds sum_b g_b x_bj into gr[j] for
 *     the leading columns it handles, and returns how many it handled. */
typedef double (*margin_fn)(const float *x, const double *theta, size_t d);
typedef size_t (*stripes_fn)(double *gr, const float *xb, size_t d, const double *g);

#define F32_BLOCK 8

/* Adds sum_b g[b] xb[b] over the nb rows of a block into gr: the level's
 * stripes for a full block in float range, double for the columns they
 * leave and for other blocks. A block whose g are all 0 costs nothing. */
static inline __attribute__((always_inline)) void block_gradient(double *gr, const float *xb,
                                                                 size_t d, size_t nb,
                                                                 const double *g,
                                                                 stripes_fn stripes)
{
    int any = 0, in_float_range = 1;
    for (size_t b = 0; b < nb; b++) {
        double a = fabs(g[b]);
        any |= a != 0.0;
        in_float_range &= a == 0.0 || (a >= 0x1p-100 && a <= 0x1p100);
    }
    if (!any)
        return;
    size_t j = nb == F32_BLOCK && in_float_range ? stripes(gr, xb, d, g) : 0;
    for (; j < d; j++) {
        double acc = gr[j];
        for (size_t b = 0; b < nb; b++)
            acc += (double)xb[b * d + j] * g[b];
        gr[j] = acc;
    }
}

/* Vector fused rows, float32 storage: the shape shared by the AVX-512 and
 * AVX2 levels.
 *
 * Contract: rows [s->r0, s->r1) of ds->xf, theta in double; adds
 * sum_i g_i x_i into the double gradient s->grad and sets s->loss. Any d.
 * Rows go in blocks of F32_BLOCK, each row read from memory once, in
 * address order:
 *   1. the block's margins, row after row (margin);
 *   2. its g_i = loss'(m_i) (square-chipo: `width` rows at once through
 *      sq; the other losses: lp_loss_point);
 *   3. its gradient, from the rows still in L1 (block_gradient, stripes).
 * The margins, the loss and every sum over blocks are double; only the 8
 * terms of a block are summed in float (see DEFINE_FUSED_F32). The rows are
 * read strictly in address order: reading two rows at once (to share the
 * loads of theta), taking the previous block's gradient after the next
 * block's margins, and software prefetch one or two blocks ahead all
 * measured slower from memory (1.3-3x). Deterministic: fixed blocks and
 * order. */
static inline __attribute__((always_inline)) void
fused_f32_rows(slice *s, margin_fn margin, sqchipo_fn sq, size_t width, stripes_fn stripes)
{
    const lp_objective *ob = s->ob;
    size_t d = ob->ds->d;
    const float *X = ob->ds->xf;
    double *gr = s->grad, loss = 0.0;
    for (size_t i0 = s->r0; i0 < s->r1; i0 += F32_BLOCK) {
        size_t nb = s->r1 - i0 < F32_BLOCK ? s->r1 - i0 : F32_BLOCK;
        double m[F32_BLOCK] = {0}, g[F32_BLOCK] = {0};
        for (size_t b = 0; b < nb; b++)
            m[b] = margin(X + (i0 + b) * d, s->theta, d);
        loss += block_losses(ob, i0, nb, m, g, sq, width);
        block_gradient(gr, X + i0 * d, d, nb, g, stripes);
    }
    s->loss = loss;
}

/* A level's steps (see fused_f32_rows), written once for both widths over
 * a level's vector primitives, named <op>_<level>: vd_<level> holds W
 * doubles and vf_<level> 2W floats;
 *   vd_zero, vd_load (W doubles), vd_widen (W floats, widened in registers
 *   by vcvtps2pd), vd_fma, vd_add, vd_sum (of the W lanes);
 *   vf_set1, vf_load (2W floats), vf_mul, vf_fma;
 *   vf_add_to(gr, c): gr[0..2W) += the 2W floats of c, widened.
 * The margin: 4W columns per step into 4 accumulators, the columns past
 * the last W-step in scalar double. The stripes: per 4W columns the
 * block's 8 terms g_b x_bj summed in float (g_b rounded to float, x_bj as
 * stored), widened once and added to the double gradient. The 8-term float
 * sums add an error of at most 10 u_f sum_b |g_b x_bj| (u_f = 2^-24), the
 * relative precision of the float32 features themselves; they widen each
 * value once per block instead of once per row. */
#define DEFINE_FUSED_F32(LEVEL, TARGET, W, SQ)                                                     \
    TARGET static inline double margin_##LEVEL(const float *x, const double *th, size_t d)         \
    {                                                                                              \
        vd_##LEVEL a0 = vd_zero_##LEVEL(), a1 = a0, a2 = a0, a3 = a0;                              \
        size_t j = 0;                                                                              \
        for (; j + 4 * (W) <= d; j += 4 * (W)) {                                                   \
            a0 = vd_fma_##LEVEL(vd_widen_##LEVEL(x + j), vd_load_##LEVEL(th + j), a0);             \
            a1 = vd_fma_##LEVEL(vd_widen_##LEVEL(x + j + (W)), vd_load_##LEVEL(th + j + (W)), a1); \
            a2 = vd_fma_##LEVEL(vd_widen_##LEVEL(x + j + 2 * (W)),                                 \
                                vd_load_##LEVEL(th + j + 2 * (W)), a2);                            \
            a3 = vd_fma_##LEVEL(vd_widen_##LEVEL(x + j + 3 * (W)),                                 \
                                vd_load_##LEVEL(th + j + 3 * (W)), a3);                            \
        }                                                                                          \
        for (; j + (W) <= d; j += (W))                                                             \
            a0 = vd_fma_##LEVEL(vd_widen_##LEVEL(x + j), vd_load_##LEVEL(th + j), a0);             \
        double m = vd_sum_##LEVEL(vd_add_##LEVEL(vd_add_##LEVEL(a0, a1), vd_add_##LEVEL(a2, a3))); \
        for (; j < d; j++)                                                                         \
            m += (double)x[j] * th[j];                                                             \
        return m;                                                                                  \
    }                                                                                              \
    TARGET static inline size_t stripes_##LEVEL(double *gr, const float *xb, size_t d,             \
                                                const double *g)                                   \
    {                                                                                              \
        vf_##LEVEL gv[F32_BLOCK];                                                                  \
        for (size_t b = 0; b < F32_BLOCK; b++)                                                     \
            gv[b] = vf_set1_##LEVEL((float)g[b]);                                                  \
        size_t j = 0;                                                                              \
        for (; j + 4 * (W) <= d; j += 4 * (W)) {                                                   \
            vf_##LEVEL c0 = vf_mul_##LEVEL(vf_load_##LEVEL(xb + j), gv[0]);                        \
            vf_##LEVEL c1 = vf_mul_##LEVEL(vf_load_##LEVEL(xb + j + 2 * (W)), gv[0]);              \
            _Pragma("GCC unroll 8") for (size_t b = 1; b < F32_BLOCK; b++)                         \
            {                                                                                      \
                const float *x = xb + b * d + j;                                                   \
                c0 = vf_fma_##LEVEL(vf_load_##LEVEL(x), gv[b], c0);                                \
                c1 = vf_fma_##LEVEL(vf_load_##LEVEL(x + 2 * (W)), gv[b], c1);                      \
            }                                                                                      \
            vf_add_to_##LEVEL(gr + j, c0);                                                         \
            vf_add_to_##LEVEL(gr + j + 2 * (W), c1);                                               \
        }                                                                                          \
        return j;                                                                                  \
    }                                                                                              \
    TARGET static void fused_f32_##LEVEL(slice *s)                                                 \
    {                                                                                              \
        fused_f32_rows(s, margin_##LEVEL, SQ, (W), stripes_##LEVEL);                               \
    }

/* The primitives named alike in both instruction sets (PFX: _mm512 or
 * _mm256). */
#define DEFINE_VECTOR_OPS(LEVEL, TARGET, PFX, VD, VF)                                              \
    typedef VD vd_##LEVEL;                                                                         \
    typedef VF vf_##LEVEL;                                                                         \
    TARGET static inline VD vd_zero_##LEVEL(void)                                                  \
    {                                                                                              \
        return PFX##_setzero_pd();                                                                 \
    }                                                                                              \
    TARGET static inline VD vd_load_##LEVEL(const double *p)                                       \
    {                                                                                              \
        return PFX##_loadu_pd(p);                                                                  \
    }                                                                                              \
    TARGET static inline VD vd_fma_##LEVEL(VD a, VD b, VD c)                                       \
    {                                                                                              \
        return PFX##_fmadd_pd(a, b, c);                                                            \
    }                                                                                              \
    TARGET static inline VD vd_add_##LEVEL(VD a, VD b)                                             \
    {                                                                                              \
        return PFX##_add_pd(a, b);                                                                 \
    }                                                                                              \
    TARGET static inline VF vf_set1_##LEVEL(float v)                                               \
    {                                                                                              \
        return PFX##_set1_ps(v);                                                                   \
    }                                                                                              \
    TARGET static inline VF vf_load_##LEVEL(const float *p)                                        \
    {                                                                                              \
        return PFX##_loadu_ps(p);                                                                  \
    }                                                                                              \
    TARGET static inline VF vf_mul_##LEVEL(VF a, VF b)                                             \
    {                                                                                              \
        return PFX##_mul_ps(a, b);                                                                 \
    }                                                                                              \
    TARGET static inline VF vf_fma_##LEVEL(VF a, VF b, VF c)                                       \
    {                                                                                              \
        return PFX##_fmadd_ps(a, b, c);                                                            \
    }

/* AVX-512 (W = 8). */
#define AVX512 __attribute__((target("avx512f")))
DEFINE_VECTOR_OPS(avx512, AVX512, _mm512, __m512d, __m512)
AVX512 static inline __m512d vd_widen_avx512(const float *p)
{
    return _mm512_cvtps_pd(_mm256_loadu_ps(p));
}
AVX512 static inline double vd_sum_avx512(__m512d v)
{
    return _mm512_reduce_add_pd(v);
}
AVX512 static inline void vf_add_to_avx512(double *gr, __m512 c)
{
    __m256 lo = _mm512_castps512_ps256(c);
    __m256 hi = _mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(c), 1));
    _mm512_storeu_pd(gr, _mm512_add_pd(_mm512_loadu_pd(gr), _mm512_cvtps_pd(lo)));
    _mm512_storeu_pd(gr + 8, _mm512_add_pd(_mm512_loadu_pd(gr + 8), _mm512_cvtps_pd(hi)));
}
DEFINE_FUSED_F32(avx512, AVX512, 8, sqchipo8)

/* AVX2+FMA (W = 4). */
#define AVX2 __attribute__((target("avx2,fma")))
DEFINE_VECTOR_OPS(avx2, AVX2, _mm256, __m256d, __m256)
AVX2 static inline __m256d vd_widen_avx2(const float *p)
{
    return _mm256_cvtps_pd(_mm_loadu_ps(p));
}
AVX2 static inline double vd_sum_avx2(__m256d v)
{
    return hsum256(v);
}
AVX2 static inline void vf_add_to_avx2(double *gr, __m256 c)
{
    __m256d lo = _mm256_cvtps_pd(_mm256_castps256_ps128(c));
    __m256d hi = _mm256_cvtps_pd(_mm256_extractf128_ps(c, 1));
    _mm256_storeu_pd(gr, _mm256_add_pd(_mm256_loadu_pd(gr), lo));
    _mm256_storeu_pd(gr + 4, _mm256_add_pd(_mm256_loadu_pd(gr + 4), hi));
}
DEFINE_FUSED_F32(avx2, AVX2, 4, sqchipo4)

/* AVX2 fused rows, float64 storage. */
__attribute__((target("avx2,fma"))) static void fused_f64_avx2(slice *s)
{
    const lp_objective *ob = s->ob;
    size_t d = ob->ds->d, d8 = d & ~(size_t)7;
    const double *th = s->theta;
    double *gr = s->grad, loss = 0.0;
    for (size_t i = s->r0; i < s->r1; i++) {
        const double *x = ob->ds->xd + i * d;
        __m256d a0 = _mm256_setzero_pd(), a1 = a0;
        for (size_t j = 0; j < d8; j += 8) {
            a0 = _mm256_fmadd_pd(_mm256_loadu_pd(x + j), _mm256_loadu_pd(th + j), a0);
            a1 = _mm256_fmadd_pd(_mm256_loadu_pd(x + j + 4), _mm256_loadu_pd(th + j + 4), a1);
        }
        double m = hsum256(_mm256_add_pd(a0, a1));
        for (size_t j = d8; j < d; j++)
            m += x[j] * th[j];
        double g;
        loss += label_grad(ob, i, m, &g);
        if (g == 0.0)
            continue;
        __m256d gv = _mm256_set1_pd(g);
        for (size_t j = 0; j < d8; j += 8) {
            _mm256_storeu_pd(gr + j,
                             _mm256_fmadd_pd(_mm256_loadu_pd(x + j), gv, _mm256_loadu_pd(gr + j)));
            _mm256_storeu_pd(gr + j + 4, _mm256_fmadd_pd(_mm256_loadu_pd(x + j + 4), gv,
                                                         _mm256_loadu_pd(gr + j + 4)));
        }
        for (size_t j = d8; j < d; j++)
            gr[j] += g * x[j];
    }
    s->loss = loss;
}
#endif

/* Blocked rows through OpenBLAS gemv: margins of a block, then the block's
 * gradient contribution X_b^T g_b. */
static void blas_rows(slice *s)
{
    const lp_objective *ob = s->ob;
    const lp_dataset *ds = ob->ds;
    size_t d = ds->d;
    double loss = 0.0;
    float gb[BLAS_BLOCK], gacc_f[4096];
    double mb[BLAS_BLOCK], gbd[BLAS_BLOCK];
    int f32 = ds->storage == LP_STORE_F32;
    for (size_t r = s->r0; r < s->r1; r += BLAS_BLOCK) {
        size_t b = s->r1 - r < BLAS_BLOCK ? s->r1 - r : BLAS_BLOCK;
        if (f32) {
            cblas_sgemv(CblasRowMajor, CblasNoTrans, (int)b, (int)d, 1.0f, ds->xf + r * d, (int)d,
                        s->theta_f, 1, 0.0f, s->mbuf, 1);
            for (size_t t = 0; t < b; t++)
                mb[t] = s->mbuf[t];
        } else {
            cblas_dgemv(CblasRowMajor, CblasNoTrans, (int)b, (int)d, 1.0, ds->xd + r * d, (int)d,
                        s->theta, 1, 0.0, mb, 1);
        }
        for (size_t t = 0; t < b; t++) {
            double g;
            loss += label_grad(ob, r + t, mb[t], &g);
            gb[t] = (float)g;
            gbd[t] = g;
        }
        if (f32) {
            /* d <= 4096 here (checked by the caller); float accumulation per block. */
            cblas_sgemv(CblasRowMajor, CblasTrans, (int)b, (int)d, 1.0f, ds->xf + r * d, (int)d, gb,
                        1, 0.0f, gacc_f, 1);
            for (size_t j = 0; j < d; j++)
                s->grad[j] += gacc_f[j];
        } else {
            cblas_dgemv(CblasRowMajor, CblasTrans, (int)b, (int)d, 1.0, ds->xd + r * d, (int)d, gbd,
                        1, 1.0, s->grad, 1);
        }
    }
    s->loss = loss;
}

static void csr_rows(slice *s)
{
    const lp_objective *ob = s->ob;
    const lp_dataset *ds = ob->ds;
    double loss = 0.0;
    for (size_t i = s->r0; i < s->r1; i++) {
        double m = 0.0;
        for (size_t k = ds->rowptr[i]; k < ds->rowptr[i + 1]; k++)
            m += ds->val[k] * s->theta[ds->col[k]];
        double g;
        loss += label_grad(ob, i, m, &g);
        if (g != 0.0)
            for (size_t k = ds->rowptr[i]; k < ds->rowptr[i + 1]; k++)
                s->grad[ds->col[k]] += g * ds->val[k];
    }
    s->loss = loss;
}

typedef void (*rows_fn)(slice *s);

/* The kernel for ob's storage, kernel option and instruction set. */
static rows_fn pick_rows(const lp_objective *ob)
{
    const lp_dataset *ds = ob->ds;
    if (ds->storage == LP_STORE_CSR)
        return csr_rows;
    if (ob->o.kernel == LP_KERNEL_BLAS && ds->d <= 4096)
        return blas_rows;
#if LP_HAVE_X86
    lp_simd simd = lp_objective_simd_used(ob);
    if (ds->storage == LP_STORE_F32 && simd >= LP_SIMD_AVX512)
        return fused_f32_avx512;
    if (ds->storage == LP_STORE_F32 && simd >= LP_SIMD_AVX2)
        return fused_f32_avx2;
    if (ds->storage == LP_STORE_F64 && simd >= LP_SIMD_AVX2)
        return fused_f64_avx2;
#endif
    return ds->storage == LP_STORE_F32 ? fused_f32_portable : fused_f64_portable;
}

/* One thread: claims chunks from *next until none is left and runs the
 * kernel on each into the chunk's own accumulator. Which thread runs a
 * chunk does not change its result. */
typedef struct worker {
    slice proto; /* ob, theta, theta_f and this thread's scratch */
    rows_fn rows;
    size_t nchunks;
    atomic_size_t *next;
    double *acc;  /* nchunks x d, zeroed */
    double *loss; /* nchunks */
} worker;

static void *run_worker(void *arg)
{
    worker *w = arg;
    size_t n = w->proto.ob->ds->n, d = w->proto.ob->ds->d, K = w->nchunks;
    for (size_t k; (k = atomic_fetch_add(w->next, 1)) < K;) {
        slice s = w->proto;
        s.r0 = n * k / K;
        s.r1 = n * (k + 1) / K;
        s.grad = w->acc + k * d;
        w->rows(&s);
        w->loss[k] = s.loss;
    }
    return NULL;
}

/* Rows are cut into K chunks, K a function of the data's size only; the
 * chunks' partial sums are added in chunk order, so the result does not
 * depend on the thread count or on scheduling. */
double lp_objective_eval(lp_objective *ob, const double *theta, double *grad)
{
    const lp_dataset *ds = ob->ds;
    size_t n = ds->n, d = ds->d;
    size_t work = ds->storage == LP_STORE_CSR ? ds->nnz : n * d;
    size_t K = work / MIN_WORK_PER_CHUNK;
    if (K > MAX_CHUNKS)
        K = MAX_CHUNKS;
    if (K > MAX_ACC_VALUES / d)
        K = MAX_ACC_VALUES / d;
    if (K > n)
        K = n;
    if (K < 1)
        K = 1;
    int T = ob->o.threads;
    while (T > 1 && work / (size_t)T < MIN_WORK_PER_THREAD)
        T--;
    if ((size_t)T > K)
        T = (int)K;
    rows_fn rows = pick_rows(ob);
    int blas = rows == blas_rows && ds->storage == LP_STORE_F32;
    double *acc = calloc(K * d, sizeof *acc), *closs = malloc(K * sizeof *closs);
    float *thf = blas ? malloc(d * sizeof *thf) : NULL;
    float *mbuf = blas ? malloc((size_t)T * BLAS_BLOCK * sizeof *mbuf) : NULL;
    if (acc == NULL || closs == NULL || (blas && (thf == NULL || mbuf == NULL))) {
        free(acc);
        free(closs);
        free(thf);
        free(mbuf);
        return NAN; /* out of memory: the optimizer treats NaN as failure */
    }
    if (blas)
        for (size_t j = 0; j < d; j++)
            thf[j] = (float)theta[j];
    /* Our chunks are the parallelism: OpenBLAS runs single-threaded inside
     * them and gets its previous thread count back afterwards. */
    int blas_threads = ob->o.kernel == LP_KERNEL_BLAS ? openblas_get_num_threads() : 0;
    if (ob->o.kernel == LP_KERNEL_BLAS && T > 1)
        openblas_set_num_threads(1);
    atomic_size_t next = 0;
    worker w[MAX_THREADS];
    pthread_t tid[MAX_THREADS];
    for (int t = 0; t < T; t++) {
        w[t] = (worker){.proto = {.ob = ob,
                                  .theta = theta,
                                  .theta_f = thf,
                                  .mbuf = mbuf ? mbuf + (size_t)t * BLAS_BLOCK : NULL},
                        .rows = rows,
                        .nchunks = K,
                        .next = &next,
                        .acc = acc,
                        .loss = closs};
    }
    int started = 1; /* a thread that fails to start leaves its chunks to the others */
    for (int t = 1; t < T; t++)
        if (pthread_create(&tid[t], NULL, run_worker, &w[t]) == 0)
            started++;
        else
            break;
    run_worker(&w[0]);
    for (int t = 1; t < started; t++)
        pthread_join(tid[t], NULL);
    if (ob->o.kernel == LP_KERNEL_BLAS && T > 1)
        openblas_set_num_threads(blas_threads);
    double loss = 0.0, reg = 0.0;
    for (size_t k = 0; k < K; k++)
        loss += closs[k];
    for (size_t j = 0; j < d; j++)
        reg += theta[j] * theta[j];
    double inv_n = 1.0 / (double)n;
    if (grad != NULL) {
        for (size_t j = 0; j < d; j++) {
            double g = 0.0;
            for (size_t k = 0; k < K; k++)
                g += acc[k * d + j];
            grad[j] = (g + 2.0 * ob->o.l2 * theta[j]) * inv_n;
        }
    }
    free(acc);
    free(closs);
    free(thf);
    free(mbuf);
    return (loss + ob->o.l2 * reg) * inv_n;
}
