/*
 * quality.h — label quality under randomized response: debiased gold
 * accuracy, debiased agreement, the outlier test, and planning. Pure
 * computation over labels already read (server/db/quality_read.h); the
 * derivations are in docs/operators.md, "Label quality under privacy".
 *
 * A label released with epsilon e by randomized response equals the
 * annotator's answer with probability 1 - q(e), q(e) = 1/(1 + e^e); with
 * c(e) = 1/(1 - 2q(e)) (common/rr.h) and u(e) = c(e)q(e) = 1/(e^e - 1):
 *
 *   gold accuracy  each gold label contributes c*1[z = gold] - u, an
 *                  unbiased estimate of the annotator's accuracy a with
 *                  variance a(1-a) + k(e), k(e) = (c^2 - 1)/4 = u(u + 1);
 *                  the mean over labels gets a score (Wilson-type) interval;
 *   agreement      each pair of labels on one task contributes
 *                  (1 + c1*c2*(2z1-1)(2z2-1))/2, an unbiased estimate of the
 *                  probability that the two true answers agree; the mean
 *                  over pairs gets a percentile bootstrap interval that
 *                  resamples tasks;
 *   outlier        an annotator whose gold accuracy (or, without enough gold
 *                  labels, agreement with the others) is significantly below
 *                  the other annotators': one-sided z-tests (gold:
 *                  variances at the pooled null, continuity-corrected;
 *                  agreement: the bootstrap standard error of the
 *                  difference), Holm's correction over the annotators
 *                  tested (family-wise level LP_QUALITY_ALPHA).
 *
 * epsilon +INFINITY (an unprivatized label) has q = 0, c = 1, u = 0.
 */
#ifndef LP_QUALITY_H
#define LP_QUALITY_H

#include "quality_read.h"

#include <stddef.h>
#include <stdint.h>

#define LP_QUALITY_CONFIDENCE 0.95
#define LP_QUALITY_Z 1.959963984540054 /* the standard normal's 0.975 quantile */
#define LP_QUALITY_ALPHA 0.05          /* family-wise rate of false flags */
#define LP_QUALITY_MIN_LABELS 10       /* gold labels or pairs before a test */
#define LP_QUALITY_BOOTSTRAP 1000      /* bootstrap resamples (fewer on large campaigns) */
#define LP_QUALITY_BOOTSTRAP_WORK 2e7  /* resamples x labels in shared tasks, at most */
#define LP_QUALITY_BOOTSTRAP_DRAWS 1e7 /* resamples x annotators kept, at most */
/* Fewer resamples than this: none, the linearized normal intervals instead. */
#define LP_QUALITY_BOOTSTRAP_MIN 200
#define LP_QUALITY_SEED 0x6c64707265665155ull /* the bootstrap's fixed seed */

/* An estimate with its interval (at LP_QUALITY_CONFIDENCE) and standard
 * error; n == 0: nothing to estimate (the numbers are NaN). The estimate is
 * the unbiased one and may leave [0, 1] by noise; the interval is clipped to
 * [0, 1]. */
typedef struct lp_quality_estimate {
    size_t n; /* gold labels, or label pairs */
    double estimate, low, high, se;
} lp_quality_estimate;

typedef enum lp_quality_basis {
    LP_QUALITY_UNTESTED = 0, /* too few gold labels and pairs to test */
    LP_QUALITY_BY_GOLD,      /* tested on gold accuracy */
    LP_QUALITY_BY_AGREEMENT, /* tested on agreement with the others */
} lp_quality_basis;

typedef struct lp_annotator_quality {
    lp_quality_estimate gold;      /* debiased gold accuracy */
    lp_quality_estimate agreement; /* debiased agreement with the others */
    lp_quality_basis basis;        /* which test ran */
    double reference;              /* the others' figure it was compared with */
    double z, p_value;             /* the one-sided test (NaN when untested) */
    int flagged;                   /* significantly below the others (Holm) */
} lp_annotator_quality;

typedef struct lp_quality_report {
    lp_quality_estimate gold;         /* pooled over every gold label */
    lp_quality_estimate agreement;    /* over every pair of labels on a task */
    size_t tasks_shared;              /* tasks with two labels or more */
    size_t bootstrap;                 /* resamples drawn (0: no pairs) */
    lp_annotator_quality *annotators; /* n_annotators entries, owned */
    size_t n_annotators;
} lp_quality_report;

/* Computes the report over rows (ordered by task; annotator indexes below
 * n_annotators). bootstrap: the resamples wanted (LP_QUALITY_BOOTSTRAP;
 * fewer on large campaigns, see above; fewer than LP_QUALITY_BOOTSTRAP_MIN,
 * asked or so capped: none, and the agreement intervals are normal ones with
 * the linearized (cluster-robust) variances over tasks, report.bootstrap 0);
 * 0 computes the point estimates only (no agreement intervals, no agreement
 * test). The bootstrap is seeded with
 * seed (LP_QUALITY_SEED): the same labels give the same report. LP_OK, LP_EINVALID_ARGUMENT (an
 * index out of range, rows out of task order, an epsilon not > 0) or LP_ENO_MEMORY; on error *out
 * is cleared. */
int lp_quality_compute(const lp_quality_row *rows, size_t n_rows, size_t n_annotators,
                       size_t bootstrap, uint64_t seed, lp_quality_report *out);
/* Frees the annotators; accepts NULL. */
void lp_quality_report_clear(lp_quality_report *r);

/* Planning at one epsilon for both labels: the independent label pairs
 * (tasks with two labels each) that give the agreement interval a
 * half-width of width when the true agreement is agreement (NaN: the worst
 * case 1/2): ceil(z^2 (c^4 - (2A-1)^2) / (4 width^2)). */
double lp_quality_pairs_needed(double epsilon, double width, double agreement);
/* The gold labels one annotator needs for a gold-accuracy half-width of
 * width when the accuracy is accuracy (NaN: the worst case 1/2):
 * ceil(z^2 (a(1-a) + (c^2-1)/4) / width^2). */
double lp_quality_gold_needed(double epsilon, double width, double accuracy);

/* The score (Wilson-type) interval of the mean of n gold-label terms: the
 * accuracies a with (mean - a)^2 <= z^2 (a(1-a) + k) / n, k the mean of the
 * labels' k(e), clipped to [0, 1]. */
void lp_quality_score_interval(double mean, double k, size_t n, double *low, double *high);

#endif
