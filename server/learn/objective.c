/* objective.c — fused loss-and-gradient passes. See objective.h. */
#include "objective.h"

#include <assert.h>
#include <cblas.h>
#include <math.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#include <immintrin.h>
#define LP_HAVE_X86 1
#else
#define LP_HAVE_X86 0
#endif

#define BLAS_BLOCK 256          /* rows per gemv block (256 KiB of float32 at d = 256) */
#define MIN_WORK_PER_THREAD (1u << 18) /* values per thread before threading pays */
#define MAX_THREADS 64

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
}

lp_objective *lp_objective_new(const lp_dataset *ds, const lp_objective_opts *o)
{
    if (ds == NULL || ds->n == 0 || o->threads < 1 || !(o->l2 >= 0.0) ||
        !(o->loss.rmax > 0.0) || !(o->loss.tau > 0.0))
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
#if LP_HAVE_X86
    static int cached = -1;
    if (cached < 0) {
        __builtin_cpu_init();
        cached = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
    }
    return cached;
#else
    return 0;
#endif
}

/* One thread's share: rows [r0, r1), private gradient accumulator. */
typedef struct slice {
    const lp_objective *ob;
    const double *theta;
    const float *theta_f; /* float copy for the BLAS float kernel */
    size_t r0, r1;
    double loss;
    double *grad; /* d, zeroed by the caller */
    float *mbuf;  /* BLAS kernel scratch: BLAS_BLOCK margins */
    double *xbuf; /* fused float32 kernel scratch: 4 rows widened to double */
} slice;

static inline double label_grad(const lp_objective *ob, size_t i, double m, double *g)
{
    return lp_loss_point(&ob->o.loss, m, ob->ds->z[i] ? 1 : -1, &ob->k[i], g);
}

/* Portable fused rows (float32 or float64 dense). */
#define DEFINE_FUSED_PORTABLE(NAME, T, FIELD)                                                  \
    static void NAME(slice *s)                                                                 \
    {                                                                                          \
        const lp_objective *ob = s->ob;                                                        \
        size_t d = ob->ds->d;                                                                  \
        const double *th = s->theta;                                                           \
        double *gr = s->grad, loss = 0.0;                                                      \
        for (size_t i = s->r0; i < s->r1; i++) {                                               \
            const T *x = ob->ds->FIELD + i * d;                                                \
            double a0 = 0, a1 = 0, a2 = 0, a3 = 0;                                             \
            size_t j = 0;                                                                      \
            for (; j + 4 <= d; j += 4) {                                                       \
                a0 += (double)x[j] * th[j];                                                    \
                a1 += (double)x[j + 1] * th[j + 1];                                            \
                a2 += (double)x[j + 2] * th[j + 2];                                            \
                a3 += (double)x[j + 3] * th[j + 3];                                            \
            }                                                                                  \
            for (; j < d; j++)                                                                 \
                a0 += (double)x[j] * th[j];                                                    \
            double g;                                                                          \
            loss += label_grad(ob, i, (a0 + a1) + (a2 + a3), &g);                              \
            if (g != 0.0)                                                                      \
                for (j = 0; j < d; j++)                                                        \
                    gr[j] += g * (double)x[j];                                                 \
        }                                                                                      \
        s->loss = loss;                                                                        \
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

/* AVX2 fused rows, float32 storage. Rows go in blocks of 4: each row is
 * widened to double once (into s->xbuf, L1-resident) while its margin is
 * accumulated, then the block's four g_i x_i are added to the gradient in
 * one sweep, so the gradient is loaded and stored once per 4 rows and no
 * float is converted twice. */
__attribute__((target("avx2,fma"))) static void fused_f32_avx2(slice *s)
{
    const lp_objective *ob = s->ob;
    size_t d = ob->ds->d, d8 = d & ~(size_t)7;
    const double *th = s->theta;
    double *gr = s->grad, loss = 0.0;
    double *xb = s->xbuf; /* 4 * d doubles */
    for (size_t i0 = s->r0; i0 < s->r1; i0 += 4) {
        size_t nb = s->r1 - i0 < 4 ? s->r1 - i0 : 4;
        double g[4] = {0, 0, 0, 0};
        int any = 0;
        for (size_t b = 0; b < nb; b++) {
            const float *x = ob->ds->xf + (i0 + b) * d;
            double *w = xb + b * d;
            __m256d a0 = _mm256_setzero_pd(), a1 = a0;
            for (size_t j = 0; j < d8; j += 8) {
                __m256 f = _mm256_loadu_ps(x + j);
                __m256d lo = _mm256_cvtps_pd(_mm256_castps256_ps128(f));
                __m256d hi = _mm256_cvtps_pd(_mm256_extractf128_ps(f, 1));
                _mm256_storeu_pd(w + j, lo);
                _mm256_storeu_pd(w + j + 4, hi);
                a0 = _mm256_fmadd_pd(lo, _mm256_loadu_pd(th + j), a0);
                a1 = _mm256_fmadd_pd(hi, _mm256_loadu_pd(th + j + 4), a1);
            }
            double m = hsum256(_mm256_add_pd(a0, a1));
            for (size_t j = d8; j < d; j++) {
                w[j] = (double)x[j];
                m += w[j] * th[j];
            }
            loss += label_grad(ob, i0 + b, m, &g[b]);
            any |= g[b] != 0.0;
        }
        if (!any)
            continue;
        const double *w0 = xb, *w1 = xb + d, *w2 = xb + 2 * d, *w3 = xb + 3 * d;
        if (nb < 4) { /* tail block: unused rows contribute g = 0 x (stale) = 0 */
            for (size_t b = nb; b < 4; b++)
                for (size_t j = 0; j < d; j++)
                    xb[b * d + j] = 0.0;
        }
        __m256d g0 = _mm256_set1_pd(g[0]), g1 = _mm256_set1_pd(g[1]);
        __m256d g2 = _mm256_set1_pd(g[2]), g3 = _mm256_set1_pd(g[3]);
        size_t d4 = d & ~(size_t)3;
        for (size_t j = 0; j < d4; j += 4) {
            __m256d acc = _mm256_loadu_pd(gr + j);
            acc = _mm256_fmadd_pd(_mm256_loadu_pd(w0 + j), g0, acc);
            acc = _mm256_fmadd_pd(_mm256_loadu_pd(w1 + j), g1, acc);
            acc = _mm256_fmadd_pd(_mm256_loadu_pd(w2 + j), g2, acc);
            acc = _mm256_fmadd_pd(_mm256_loadu_pd(w3 + j), g3, acc);
            _mm256_storeu_pd(gr + j, acc);
        }
        for (size_t j = d4; j < d; j++)
            gr[j] += w0[j] * g[0] + w1[j] * g[1] + w2[j] * g[2] + w3[j] * g[3];
    }
    s->loss = loss;
}

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
            _mm256_storeu_pd(gr + j, _mm256_fmadd_pd(_mm256_loadu_pd(x + j), gv,
                                                     _mm256_loadu_pd(gr + j)));
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
            cblas_sgemv(CblasRowMajor, CblasNoTrans, (int)b, (int)d, 1.0f, ds->xf + r * d,
                        (int)d, s->theta_f, 1, 0.0f, s->mbuf, 1);
            for (size_t t = 0; t < b; t++)
                mb[t] = s->mbuf[t];
        } else {
            cblas_dgemv(CblasRowMajor, CblasNoTrans, (int)b, (int)d, 1.0, ds->xd + r * d,
                        (int)d, s->theta, 1, 0.0, mb, 1);
        }
        for (size_t t = 0; t < b; t++) {
            double g;
            loss += label_grad(ob, r + t, mb[t], &g);
            gb[t] = (float)g;
            gbd[t] = g;
        }
        if (f32) {
            /* d <= 4096 here (checked by the caller); float accumulation per block. */
            cblas_sgemv(CblasRowMajor, CblasTrans, (int)b, (int)d, 1.0f, ds->xf + r * d, (int)d,
                        gb, 1, 0.0f, gacc_f, 1);
            for (size_t j = 0; j < d; j++)
                s->grad[j] += gacc_f[j];
        } else {
            cblas_dgemv(CblasRowMajor, CblasTrans, (int)b, (int)d, 1.0, ds->xd + r * d, (int)d,
                        gbd, 1, 1.0, s->grad, 1);
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

static void *run_slice(void *arg)
{
    slice *s = arg;
    const lp_objective *ob = s->ob;
    const lp_dataset *ds = ob->ds;
    if (ds->storage == LP_STORE_CSR)
        csr_rows(s);
    else if (ob->o.kernel == LP_KERNEL_BLAS && ds->d <= 4096)
        blas_rows(s);
#if LP_HAVE_X86
    else if (lp_objective_simd() && ds->storage == LP_STORE_F64)
        fused_f64_avx2(s);
    else if (lp_objective_simd() && (s->xbuf = malloc(4 * ds->d * sizeof(double))) != NULL) {
        fused_f32_avx2(s);
        free(s->xbuf);
        s->xbuf = NULL;
    }
#endif
    else
        (ds->storage == LP_STORE_F32 ? fused_f32_portable : fused_f64_portable)(s);
    return NULL;
}

double lp_objective_eval(lp_objective *ob, const double *theta, double *grad)
{
    const lp_dataset *ds = ob->ds;
    size_t n = ds->n, d = ds->d;
    size_t work = ds->storage == LP_STORE_CSR ? ds->nnz : n * d;
    int T = ob->o.threads;
    while (T > 1 && work / (size_t)T < MIN_WORK_PER_THREAD)
        T--;
    if ((size_t)T > n)
        T = (int)n;
    slice sl[MAX_THREADS];
    pthread_t tid[MAX_THREADS];
    double *acc = calloc((size_t)T * d, sizeof *acc);
    float *thf = NULL, *mbuf = NULL;
    int blas = ob->o.kernel == LP_KERNEL_BLAS && ds->storage == LP_STORE_F32;
    if (blas) {
        thf = malloc(d * sizeof *thf);
        mbuf = malloc((size_t)T * BLAS_BLOCK * sizeof *mbuf);
    }
    if (acc == NULL || (blas && (thf == NULL || mbuf == NULL))) {
        free(acc);
        free(thf);
        free(mbuf);
        return NAN; /* out of memory: the optimizer treats NaN as failure */
    }
    if (blas)
        for (size_t j = 0; j < d; j++)
            thf[j] = (float)theta[j];
    /* Our slices are the parallelism: OpenBLAS runs single-threaded inside
     * them and gets its previous thread count back afterwards. */
    int blas_threads = ob->o.kernel == LP_KERNEL_BLAS ? openblas_get_num_threads() : 0;
    if (ob->o.kernel == LP_KERNEL_BLAS && T > 1)
        openblas_set_num_threads(1);
    for (int t = 0; t < T; t++) {
        sl[t] = (slice){.ob = ob,
                        .theta = theta,
                        .theta_f = thf,
                        .r0 = n * (size_t)t / (size_t)T,
                        .r1 = n * (size_t)(t + 1) / (size_t)T,
                        .grad = acc + (size_t)t * d,
                        .mbuf = mbuf ? mbuf + (size_t)t * BLAS_BLOCK : NULL};
    }
    int started = 1;
    for (int t = 1; t < T; t++)
        if (pthread_create(&tid[t], NULL, run_slice, &sl[t]) == 0)
            started++;
        else
            break;
    run_slice(&sl[0]);
    for (int t = started; t < T; t++) /* thread creation failed: run inline */
        run_slice(&sl[t]);
    for (int t = 1; t < started; t++)
        pthread_join(tid[t], NULL);
    if (ob->o.kernel == LP_KERNEL_BLAS && T > 1)
        openblas_set_num_threads(blas_threads);
    double loss = 0.0, reg = 0.0;
    for (int t = 0; t < T; t++)
        loss += sl[t].loss;
    for (size_t j = 0; j < d; j++)
        reg += theta[j] * theta[j];
    double inv_n = 1.0 / (double)n;
    if (grad != NULL) {
        for (size_t j = 0; j < d; j++) {
            double g = 0.0;
            for (int t = 0; t < T; t++)
                g += acc[(size_t)t * d + j];
            grad[j] = (g + 2.0 * ob->o.l2 * theta[j]) * inv_n;
        }
    }
    free(acc);
    free(thf);
    free(mbuf);
    return (loss + ob->o.l2 * reg) * inv_n;
}
