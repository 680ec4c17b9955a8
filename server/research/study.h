/*
 * study.h — the privacy/robustness study report: reads the rows of a
 * sweep (sweep.h), aggregates them over seeds, judges the papers' four
 * claims with fixed, documented rules, and writes a Markdown report with
 * one table per claim plus gnuplot scripts (data inline) for the SVG plots.
 *
 * Blocks used: "privacy" (alpha = 0, n x eps; claims 1-2) and
 * "corruption" (n fixed, eps x alpha x order x adversary; claims 3-4).
 *
 * Ownership: lp_study_load returns a caller-owned study freed with
 * lp_study_free (NULL ok).
 */
#ifndef LP_STUDY_H
#define LP_STUDY_H

#include "sweep.h"

#include <jansson.h>
#include <stddef.h>

typedef struct lp_study {
    lp_sweep_row *rows;
    size_t n, cap;
} lp_study;

/* Loads sweep JSONL. Returns 0, LP_EIO, or a parse error naming the line. */
int lp_study_load(const char *path, lp_study **out, char *msg, size_t msglen);
void lp_study_free(lp_study *s);

/* Which rows to aggregate; lp_study_filter_any sets every field to "any". */
typedef struct lp_study_filter {
    const char *block;    /* NULL: any */
    size_t n;             /* 0: any */
    double eps;           /* NAN: any (INFINITY matches unprivatized) */
    double alpha;         /* < 0: any */
    int order, adv, loss; /* -1: any */
} lp_study_filter;

void lp_study_filter_any(lp_study_filter *f);

typedef struct lp_study_stat {
    size_t count;
    double mean, sd, se; /* sample sd; se = sd / sqrt(count); NAN if count = 0 */
} lp_study_stat;

/* Mean, sample sd and SE of k values (sd 0 for one value; NAN for none). */
lp_study_stat lp_study_stat_values(const double *v, size_t k);
/* qsort comparison of doubles, ascending (+inf last). */
int lp_study_cmp_double(const void *a, const void *b);
/* Whether two eps values are the same (+inf equals +inf). */
int lp_study_same_eps(double a, double b);

/* Reads a JSONL file of study rows: parse fills one row of size bytes from
 * a line's object (nonzero: not a row). *rows (malloc'd, caller frees) and
 * *n hold the rows. 0, LP_EIO, LP_EMALFORMED_JSON (msg names the line) or
 * LP_ENO_MEMORY; nothing is kept on error. */
int lp_study_load_rows(const char *path, size_t size, int (*parse)(const json_t *o, void *row),
                       void **rows, size_t *n, char *msg, size_t msglen);

/* A metric (lp_sweep_row_metric key) over the matching rows. */
lp_study_stat lp_study_stat_of(const lp_study *s, const lp_study_filter *f, const char *metric);

/* Paired by seed: metric(a-row) - metric(b-row) over the seeds that have
 * exactly one row in each. */
lp_study_stat lp_study_paired(const lp_study *s, const lp_study_filter *a, const lp_study_filter *b,
                              const char *metric);

/* How many standard errors a difference must exceed to count. */
#define LP_STUDY_K_SE 2.0
/* Smallest accuracy difference that counts (half a percentage point). */
#define LP_STUDY_ACC_MARGIN 0.005

typedef enum lp_verdict_level {
    LP_VERDICT_SUPPORTED = 0,
    LP_VERDICT_PARTLY,
    LP_VERDICT_NOT_SUPPORTED,
    LP_VERDICT_NO_DATA
} lp_verdict_level;

typedef struct lp_study_verdict {
    lp_verdict_level level;
    char text[1536]; /* one sentence (or two) with the evidence */
} lp_study_verdict;

const char *lp_verdict_name(lp_verdict_level l);

/* The four claims (rules in study.c and in the report). */
void lp_study_claim1(const lp_study *s, lp_study_verdict *v);
void lp_study_claim2(const lp_study *s, lp_study_verdict *v);
void lp_study_claim3(const lp_study *s, lp_study_verdict *v);
void lp_study_claim4(const lp_study *s, lp_study_verdict *v);

/* ---- helpers shared with the claim modules (claims.h) ---- */

/* Sorted distinct values of a numeric key among block's rows (at most
 * LP_SWEEP_MAX_VALUES); which enum values ('l' loss, 'a' adversary,
 * 'o' order) occur in block, in enum order. */
int lp_study_distinct(const lp_study *s, const char *block, const char *key, double *out);
int lp_study_present(const lp_study *s, const char *block, char which, int *out);
/* The unique row matching f with this seed, or NULL. */
const lp_sweep_row *lp_study_row(const lp_study *s, const lp_study_filter *f, int seed);
/* Largest seed index in the rows (-1 if none). */
int lp_study_max_seed(const lp_study *s);
/* Least-squares slope of y on x; *se (NULL ok) from the per-point standard
 * errors sy (NULL: 0; delta method, points independent). */
double lp_study_slope(const double *x, const double *y, const double *sy, int k, double *se);
/* +1 if metric(a) exceeds metric(b) by more than max(K_SE SE, margin),
 * paired by seed, -1 if it falls short by as much, 0 otherwise; *diff the
 * mean difference. */
int lp_study_compare(const lp_study *s, const lp_study_filter *a, const lp_study_filter *b,
                     const char *metric, double margin, double *diff);
/* Appends printf text to v->text. */
void lp_study_say(lp_study_verdict *v, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* "∞" or "%g"; "20,000"; "mean ± sd" (or "–" without data). */
const char *lp_study_eps_str(double eps, char *buf, size_t len);
const char *lp_study_n_str(size_t n, char *buf, size_t len);
const char *lp_study_pm(lp_study_stat st, int digits, char *buf, size_t len);
/* "Supported", "Partly supported", ... (capitalised, for sentences). */
const char *lp_verdict_sentence(lp_verdict_level l);

typedef struct lp_study_report_opts {
    const char *dir;        /* output directory (exists) */
    const char *sweep_name; /* how the JSONL is referred to in the report */
    const char *cv_table;   /* Markdown table from `ldpref-train cv`, or NULL */
    const char *command;    /* the command that produced the run */
    double sweep_seconds;   /* wall time of the sweep (NAN: unknown) */
    double total_seconds;   /* wall time of the whole reproduction (NAN: unknown) */
    const char *machine;    /* free text about the machine, or NULL */
    const char *compare;    /* verdicts.json of the committed full report, or NULL:
                             * each verdict then says whether it agrees with it */
    const char *general;    /* JSONL of the general-preference block (gstudy.h), or NULL */
    const char *userlevel;  /* JSONL of the user-level block (userlevelstudy.h), or NULL */
    const char *central;    /* JSONL of the central-model block (centralstudy.h), or NULL */
    const char *pessimism;  /* JSONL of the pessimistic-scores block (pessimismstudy.h), or NULL */
} lp_study_report_opts;

/* Writes DIR/README.md, DIR/verdicts.json (every claim's id, title and
 * verdict) and DIR/gp/<plot>.gp (gnuplot, data inline, each writing
 * DIR/<plot>.svg when run from DIR). With o->compare, the verdict table
 * has a column saying whether each verdict agrees with that file's, and
 * the disagreements are also printed on stderr. Returns 0 or LP_EIO. */
int lp_study_report(const lp_study *s, const lp_study_report_opts *o, char *msg, size_t msglen);

#endif
