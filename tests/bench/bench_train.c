/*
 * bench_train.c — the training benchmark (run by tests/bench/train.sh).
 *
 *   bench_train [--simd auto|avx512|avx2|none] N D DIR [THREADS]
 *
 * Generates N labels x D dense float32 features (differences ~ N(0, 2I),
 * Bradley-Terry labels under a theta* with margin sd 2, privatised by RR at
 * eps = 1), writes them to DIR (X.f32, z.u8, meta.txt) for the NumPy/SciPy
 * peer, then measures in this process: the read bandwidth of the machine
 * over the same matrix, one square-chipo loss+gradient evaluation with the
 * fused kernel at every instruction-set level the CPU can run (AVX-512,
 * AVX2+FMA, portable C) and with the OpenBLAS-blocked kernel, 100 L-BFGS
 * iterations from theta = 0, and peak memory. Each level's evaluations
 * are paired with read passes (21 rounds of: read pass, evaluation), so
 * the bound and each kernel meet the same state of a shared machine; best
 * and median times and the ratios at both are printed, with the median of
 * the per-round ratios (BENCH_TRAIN_ROUNDS overrides the 21 rounds, at
 * most 101), and the same pairs in CPU time per thread (the process's CPU
 * time over the pass divided by the thread count). --simd LEVEL measures that level
 * alone and runs the fit with it (auto: every level, the fit with the
 * best). Prints "BENCH <name> <value> <unit>".
 * Not a test: nothing here passes or fails on time.
 */
#include "dataset.h"
#include "losses.h"
#include "objective.h"
#include "optimize.h"
#include "prng.h"
#include "rr.h"

#include <cblas.h>
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>

#if defined(__x86_64__)
#include <immintrin.h>
#endif

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* CPU seconds used by all of this process's threads so far. */
static double cpu_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

typedef struct gen_job {
    float *x;
    size_t r0, r1, d;
    uint64_t seed;
} gen_job;

static void *gen_rows(void *arg)
{
    gen_job *j = arg;
    lp_prng g;
    lp_prng_seed(&g, j->seed);
    for (size_t k = j->r0 * j->d; k < j->r1 * j->d; k++)
        j->x[k] = (float)(sqrt(2.0) * lp_prng_normal(&g));
    return NULL;
}

typedef struct read_job {
    const float *x;
    size_t a, b;
    double sum;
} read_job;

#if defined(__x86_64__)
__attribute__((target("avx2"))) static double sum_avx2(const float *x, size_t a, size_t b)
{
    __m256 s0 = _mm256_setzero_ps(), s1 = s0, s2 = s0, s3 = s0;
    size_t k = a;
    for (; k + 32 <= b; k += 32) {
        s0 = _mm256_add_ps(s0, _mm256_load_ps(x + k));
        s1 = _mm256_add_ps(s1, _mm256_load_ps(x + k + 8));
        s2 = _mm256_add_ps(s2, _mm256_load_ps(x + k + 16));
        s3 = _mm256_add_ps(s3, _mm256_load_ps(x + k + 24));
    }
    float t[8];
    _mm256_storeu_ps(t, _mm256_add_ps(_mm256_add_ps(s0, s1), _mm256_add_ps(s2, s3)));
    double s = 0;
    for (int i = 0; i < 8; i++)
        s += t[i];
    for (; k < b; k++)
        s += x[k];
    return s;
}
#endif

static void *read_rows(void *arg)
{
    read_job *j = arg;
#if defined(__x86_64__)
    if (lp_objective_simd()) {
        j->sum = sum_avx2(j->x, j->a, j->b);
        return NULL;
    }
#endif
    double s = 0;
    for (size_t k = j->a; k < j->b; k++)
        s += j->x[k];
    j->sum = s;
    return NULL;
}

/* One streaming read of x[0..len) with T threads; returns its seconds. */
static double read_pass(const float *x, size_t len, int T)
{
    pthread_t tid[8];
    read_job j[8];
    double t0 = now();
    for (int t = 0; t < T; t++) {
        size_t a = len * (size_t)t / (size_t)T, b = len * (size_t)(t + 1) / (size_t)T;
        j[t] = (read_job){x, a & ~(size_t)7, t == T - 1 ? len : (b & ~(size_t)7), 0};
        pthread_create(&tid[t], NULL, read_rows, &j[t]);
    }
    double s = 0;
    for (int t = 0; t < T; t++) {
        pthread_join(tid[t], NULL);
        s += j[t].sum;
    }
    double el = now() - t0;
    if (s == 12345.678)
        puts("");
    return el;
}

static int cmp_d(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* Best and median of reps timings in t[] (sorted in place). */
typedef struct timing {
    double best, median;
} timing;

static timing summarize(double *t, int reps)
{
    qsort(t, (size_t)reps, sizeof *t, cmp_d);
    return (timing){t[0], t[reps / 2]};
}

static timing time_eval(lp_objective *ob, const double *theta, double *g, int reps, double *f)
{
    double t[32];
    for (int r = 0; r < reps; r++) {
        double t0 = now();
        *f = lp_objective_eval(ob, theta, g);
        t[r] = now() - t0;
    }
    return summarize(t, reps);
}

int main(int argc, char **argv)
{
    lp_simd forced = LP_SIMD_AUTO;
    if (argc > 2 && strcmp(argv[1], "--simd") == 0) {
        if (lp_simd_parse(argv[2], &forced) != 0 || forced > lp_objective_simd_best()) {
            fprintf(stderr, "bench_train: --simd %s: not a level this CPU runs (best: %s)\n",
                    argv[2], lp_simd_name(lp_objective_simd_best()));
            return 2;
        }
        argc -= 2;
        argv += 2;
    }
    if (argc < 4) {
        fprintf(stderr, "usage: bench_train [--simd auto|avx512|avx2|none] N D DIR [THREADS]\n");
        return 2;
    }
    size_t n = strtoull(argv[1], NULL, 10), d = strtoull(argv[2], NULL, 10);
    const char *dir = argv[3];
    int T = argc > 4 ? atoi(argv[4]) : 2;
    openblas_set_num_threads(T);
    double eps = 1.0;
    lp_dataset *ds = lp_dataset_new_dense(n, d, LP_STORE_F32);
    if (ds == NULL) {
        fprintf(stderr, "bench_train: out of memory\n");
        return 1;
    }
    double t0 = now();
    pthread_t tid[8];
    gen_job gj[8];
    for (int t = 0; t < T; t++) {
        gj[t] = (gen_job){ds->xf, n * (size_t)t / (size_t)T, n * (size_t)(t + 1) / (size_t)T, d,
                          1000 + (uint64_t)t};
        pthread_create(&tid[t], NULL, gen_rows, &gj[t]);
    }
    for (int t = 0; t < T; t++)
        pthread_join(tid[t], NULL);
    double *star = malloc(d * sizeof *star), *theta = calloc(d, sizeof *theta),
           *g = malloc(d * sizeof *g);
    lp_prng rng;
    lp_prng_seed(&rng, 7);
    double ss = 0;
    for (size_t j = 0; j < d; j++) {
        star[j] = lp_prng_normal(&rng);
        ss += star[j] * star[j];
    }
    for (size_t j = 0; j < d; j++) /* margin sd 2 with df ~ N(0, 2I) */
        star[j] *= 2.0 / sqrt(2.0 * ss);
    for (size_t i = 0; i < n; i++) {
        double m = 0;
        for (size_t j = 0; j < d; j++)
            m += star[j] * ds->xf[i * d + j];
        int y = lp_prng_bernoulli(&rng, lp_sigmoid(m));
        int flip = lp_prng_bernoulli(&rng, lp_rr_flip_prob(eps));
        ds->z[i] = (uint8_t)(y ^ flip);
        ds->eps[i] = eps;
    }
    double tgen = now() - t0;
    /* Files for the peer. */
    char path[1024];
    snprintf(path, sizeof path, "%s/X.f32", dir);
    FILE *f = fopen(path, "wb");
    if (!f || fwrite(ds->xf, sizeof(float), n * d, f) != n * d || fclose(f)) {
        fprintf(stderr, "bench_train: cannot write %s\n", path);
        return 1;
    }
    snprintf(path, sizeof path, "%s/z.u8", dir);
    f = fopen(path, "wb");
    if (!f || fwrite(ds->z, 1, n, f) != n || fclose(f)) {
        fprintf(stderr, "bench_train: cannot write %s\n", path);
        return 1;
    }
    double bytes = (double)n * (double)d * sizeof(float);
    printf("BENCH train_data_gen %.3f s\n", tgen);
    printf("BENCH train_data_bytes %.0f bytes\n", bytes);
    lp_objective_opts oo;
    lp_objective_opts_init(&oo, LP_LOSS_SQUARE_CHIPO);
    oo.threads = T;
    /* A point inside the clip band for most rows (margins ~ N(0, 0.5^2)). */
    for (size_t j = 0; j < d; j++)
        theta[j] = 0.25 * star[j];
    double fval = 0;
    /* The levels measured, the fit's first: the forced one, or every level
     * the CPU runs from the best down. */
    lp_simd levels[3];
    int nlev = 0;
    if (forced != LP_SIMD_AUTO)
        levels[nlev++] = forced;
    else
        for (int l = (int)lp_objective_simd_best(); l >= LP_SIMD_NONE; l--)
            levels[nlev++] = (lp_simd)l;
    lp_objective *obl[3];
    for (int l = 0; l < nlev; l++) {
        oo.simd = levels[l];
        obl[l] = lp_objective_new(ds, &oo);
        if (obl[l] == NULL || lp_objective_simd_used(obl[l]) != levels[l]) {
            fprintf(stderr, "bench_train: cannot run level %s\n", lp_simd_name(levels[l]));
            return 1;
        }
    }
    lp_objective *ob = obl[0];
    printf("# fused kernel levels measured:");
    for (int l = 0; l < nlev; l++)
        printf(" %s", lp_simd_name(levels[l]));
    printf(" (best on this CPU: %s)\n", lp_simd_name(lp_objective_simd_best()));
    /* Paired rounds: for each level a read pass (the bound) immediately
     * followed by one evaluation, `rounds` times, so a busy moment of a shared
     * machine slows the bound and the kernel beside it alike. Reported per
     * level: best and median of its evaluations and of the read passes
     * paired with them, the ratios at the best and at the median, and the
     * median of the per-round ratios (each evaluation over the read pass
     * just before it). Noise only ever adds time, so best times are the
     * figures of record; the medians say how typical they are. */
    enum { MAX_ROUNDS = 101 };
    const char *rounds_env = getenv("BENCH_TRAIN_ROUNDS");
    int rounds = rounds_env ? atoi(rounds_env) : 21;
    if (rounds < 1 || rounds > MAX_ROUNDS)
        rounds = 21;
    static double tr[3][MAX_ROUNDS], te[3][MAX_ROUNDS], tq[3][MAX_ROUNDS], trall[3 * MAX_ROUNDS];
    static double cr[3][MAX_ROUNDS], ce[3][MAX_ROUNDS], cq[3][MAX_ROUNDS];
    double fl[3];
    for (int l = 0; l < nlev; l++)
        fl[l] = lp_objective_eval(obl[l], theta, g); /* warm-up */
    for (int r = 0; r < rounds; r++) {
        for (int l = 0; l < nlev; l++) {
            double c0 = cpu_now();
            tr[l][r] = read_pass(ds->xf, n * d, T);
            double c1 = cpu_now(), te0 = now();
            fl[l] = lp_objective_eval(obl[l], theta, g);
            te[l][r] = now() - te0;
            cr[l][r] = (c1 - c0) / T;
            ce[l][r] = (cpu_now() - c1) / T;
            tq[l][r] = te[l][r] / tr[l][r];
            cq[l][r] = ce[l][r] / cr[l][r];
            trall[l * rounds + r] = tr[l][r];
        }
    }
    fval = fl[0];
    timing rd = summarize(trall, nlev * rounds);
    double bound = rd.best, fit_level_best = 0;
    printf("# %d paired rounds (read pass, then evaluation) per level\n", rounds);
    printf("BENCH train_read_bandwidth %.3f GB/s\n", bytes / bound / 1e9);
    printf("BENCH train_read_bandwidth_median %.3f GB/s\n", bytes / rd.median / 1e9);
    printf("BENCH train_eval_bandwidth_bound %.4f s\n", bound);
    printf("BENCH train_eval_bandwidth_bound_median %.4f s\n", rd.median);
    for (int l = 0; l < nlev; l++) {
        printf("# %s per-round ratios (evaluation / read pass before it):",
               lp_simd_name(levels[l]));
        for (int r = 0; r < rounds; r++)
            printf(" %.2f", tq[l][r]);
        printf("\n");
        timing tf = summarize(te[l], rounds), tb = summarize(tr[l], rounds),
               q = summarize(tq[l], rounds);
        if (l == 0)
            fit_level_best = tf.best;
        /* The fit's level also under the unsuffixed names. */
        for (int alias = 0; alias < (l == 0 ? 2 : 1); alias++) {
            char name[64];
            snprintf(name, sizeof name, "train_eval_fused%s%s", alias ? "" : "_",
                     alias ? "" : lp_simd_name(levels[l]));
            printf("BENCH %s %.4f s\n", name, tf.best);
            printf("BENCH %s_median %.4f s\n", name, tf.median);
            printf("BENCH %s_bound %.4f s\n", name, tb.best);
            printf("BENCH %s_bound_median %.4f s\n", name, tb.median);
            printf("BENCH %s_vs_bound %.3f x\n", name, tf.best / tb.best);
            printf("BENCH %s_vs_bound_median %.3f x\n", name, tf.median / tb.median);
            printf("BENCH %s_vs_bound_paired_median %.3f x\n", name, q.median);
            printf("BENCH %s_vs_bound_paired_worst %.3f x\n", name, tq[l][rounds - 1]);
            printf("BENCH %s_effective_bandwidth %.3f GB/s\n", name, bytes / tf.best / 1e9);
        }
        /* The same pairs in CPU time per thread: what a pass costs while it
         * runs, without the time another process held its core. */
        timing cf = summarize(ce[l], rounds), cb = summarize(cr[l], rounds),
               cqs = summarize(cq[l], rounds);
        const char *lv = lp_simd_name(levels[l]);
        printf("BENCH train_eval_fused_%s_cpu %.4f s\n", lv, cf.best);
        printf("BENCH train_eval_fused_%s_cpu_bound %.4f s\n", lv, cb.best);
        printf("BENCH train_eval_fused_%s_cpu_vs_bound %.3f x\n", lv, cf.best / cb.best);
        printf("BENCH train_eval_fused_%s_cpu_vs_bound_paired_median %.3f x\n", lv, cqs.median);
        printf("BENCH train_eval_objective_at_probe_%s %.12f value\n", lv, fl[l]);
    }
    oo.kernel = LP_KERNEL_BLAS;
    lp_objective *obb = lp_objective_new(ds, &oo);
    double fb;
    timing tb = time_eval(obb, theta, g, 5, &fb);
    printf("BENCH train_eval_blas %.4f s\n", tb.best);
    lp_objective_free(obb);
    oo.kernel = LP_KERNEL_FUSED;
    oo.simd = levels[0];
    oo.threads = 1;
    lp_objective *ob1 = lp_objective_new(ds, &oo);
    timing tf1 = time_eval(ob1, theta, g, 5, &fb);
    printf("BENCH train_eval_fused_1thread %.4f s\n", tf1.best);
    lp_objective_free(ob1);
    printf("BENCH train_eval_objective_at_probe %.12f value\n", fval);

    lp_fit_opts fo;
    lp_fit_opts_init(&fo, LP_OPT_LBFGS);
    fo.max_iter = 100;
    fo.gtol = 0.0; /* run all 100 iterations */
    fo.memory = 10;
    lp_fit_result res;
    double tfit0 = now();
    lp_fit(ob, &fo, theta, &res);
    double tfit = now() - tfit0;
    double cos = 0, nh = 0;
    for (size_t j = 0; j < d; j++) {
        cos += theta[j] * star[j];
        nh += theta[j] * theta[j];
    }
    cos /= sqrt(nh * 4.0 / 2.0);
    printf("BENCH train_lbfgs100_time %.3f s\n", tfit);
    printf("BENCH train_lbfgs100_iterations %d count\n", res.iterations);
    printf("BENCH train_lbfgs100_evaluations %d count\n", res.evaluations);
    printf("BENCH train_lbfgs100_objective %.12f value\n", res.objective);
    printf("BENCH train_lbfgs100_grad_norm %.3e value\n", res.grad_norm);
    printf("BENCH train_lbfgs100_cosine_theta_star %.6f value\n", cos);
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    printf("BENCH train_peak_rss %.1f MB\n", (double)ru.ru_maxrss / 1024.0);
    printf("BENCH train_peak_rss_over_data %.3f x\n", (double)ru.ru_maxrss * 1024.0 / bytes);
    snprintf(path, sizeof path, "%s/meta.txt", dir);
    f = fopen(path, "w");
    if (f) {
        fprintf(f, "%zu %zu %.17g %.17g %.17g %.17g\n", n, d, eps, res.objective, fval,
                fit_level_best);
        for (size_t j = 0; j < d; j++)
            fprintf(f, "%.17g\n", 0.25 * star[j]);
        fclose(f);
    }
    fflush(stdout);
    for (int l = 0; l < nlev; l++)
        lp_objective_free(obl[l]);
    lp_dataset_free(ds);
    free(star);
    free(theta);
    free(g);
    return 0;
}
