/*
 * centralstudy.h — the study block of the central model (Algorithm 2,
 * the exponential mechanism; expmech.h), on synthetic Bradley-Terry data
 * (simulate.h) with a grid of candidates over the norm ball:
 *
 *   excess  the released candidate's loss above the best candidate's,
 *           L(theta^) - min_k L_k, against the theorem's (8/eps) ln(K/zeta)
 *           as n and eps grow (exact under the mechanism's distribution, and
 *           one sampled release per cell);
 *   match   central vs local at equal eps: the exponential mechanism on n_c
 *           clean labels against Algorithm 1 over the same candidates
 *           (argmin of the c(eps)-debiased square loss) on labels randomized
 *           at eps, for n_c, 2 n_c, 4 n_c, ...: how many labels local needs
 *           to match central's error. An L-BFGS Square chi-PO fit over all
 *           of R^d on the same randomized labels is shown beside it.
 *
 * Seeds: seed s fixes theta*, the features, the clean labels and the RR
 * coins; a cell's n is a prefix of the seed's data, so cells are paired by
 * seed. Rows are JSON lines; the verdicts follow fixed rules
 * (centralstudy.c, printed in the report).
 */
#ifndef LP_CENTRALSTUDY_H
#define LP_CENTRALSTUDY_H

#include "study.h"

#include <stddef.h>
#include <stdio.h>

#define LP_CSTUDY_MAX_VALUES 8

typedef struct lp_cstudy_grid {
    size_t d;
    double margin_sd;                  /* sd of the true margin (||theta*|| = margin_sd / sqrt 2) */
    double radius;                     /* the candidates' ball */
    size_t grid;                       /* grid:G points per axis */
    double rmax;                       /* the loss's clip at 2 rmax */
    double zeta;                       /* the theorem's failure probability */
    size_t n[LP_CSTUDY_MAX_VALUES];    /* excess: label counts, ascending */
    double eps[LP_CSTUDY_MAX_VALUES];  /* excess: budgets, ascending, finite */
    double meps[LP_CSTUDY_MAX_VALUES]; /* match: budgets, ascending, finite */
    int nn, neps, nmeps, seeds;
    size_t n_central; /* match: central's labels */
    int ladder;       /* match: local at n_central * 2^j, j < ladder */
} lp_cstudy_grid;

/* "default" (the full study) or "quick" (make test). 0 or LP_EINVALID_ARGUMENT. */
int lp_cstudy_grid_named(const char *name, lp_cstudy_grid *g);

typedef enum lp_cstudy_part {
    LP_CSTUDY_EXCESS = 0,
    LP_CSTUDY_CENTRAL = 1,
    LP_CSTUDY_LOCAL = 2
} lp_cstudy_part;

typedef struct lp_cstudy_row {
    lp_cstudy_part part;
    size_t n, k; /* labels, candidates */
    double eps;
    int seed;
    /* excess: one sampled release's excess, the exact expected excess and
     * the exact probability that the excess exceeds the bound */
    double excess, expected_excess, tail, bound;
    /* central, local: relative error |theta - theta*| / |theta*| and pair
     * accuracy 1 - angle(theta, theta*)/pi (central: expectations under the
     * mechanism; local: the candidate minimising the debiased loss;
     * fit_error: the L-BFGS fit's error) */
    double error, accuracy, fit_error;
} lp_cstudy_row;

/* Runs the grid, one JSON line per row to out. 0 or an error (msg). */
int lp_cstudy_run(const lp_cstudy_grid *g, FILE *out, int progress, char *msg, size_t msglen);

typedef struct lp_cstudy {
    lp_cstudy_row *rows;
    size_t n;
} lp_cstudy;

/* Loads lp_cstudy_run's JSONL. 0, LP_EIO, LP_EMALFORMED_JSON or LP_ENO_MEMORY. */
int lp_cstudy_load(const char *path, lp_cstudy *out, char *msg, size_t msglen);
void lp_cstudy_clear(lp_cstudy *s);

/* The two claims' verdicts (rules in centralstudy.c and in the report). */
void lp_cstudy_verdict_excess(const lp_cstudy *s, lp_study_verdict *v);
void lp_cstudy_verdict_match(const lp_cstudy *s, lp_study_verdict *v);
/* The report's section (tables, verdicts, rules, the plot's image). */
void lp_cstudy_section(FILE *f, const lp_cstudy *s, const lp_study_verdict *excess,
                       const lp_study_verdict *match);
/* DIR/gp/central_excess.gp (writes central_excess.svg when run from DIR). 0 or LP_EIO. */
int lp_cstudy_plot(const lp_cstudy *s, const char *dir, char *msg, size_t msglen);

#endif
