/*
 * gstudy.h — the study block for general preferences: on synthetic data
 * with a controllable cycle (intransitive.h), the duality gap of Algorithm
 * 3's mixture (general.h) against Square chi-PO's policy (a Bradley-Terry
 * reward), as the cycle strength S grows, at several eps; judged by a
 * fixed rule and written as a Markdown section of the study report.
 *
 * Seeds: seed s fixes theta*, W, the training prompts, the labels' coins
 * and the evaluation prompts for every (S, eps) cell, so the two methods
 * and the cells are paired by seed. One row per (S, eps, seed, method).
 */
#ifndef LP_GSTUDY_H
#define LP_GSTUDY_H

#include "study.h"

#include <stddef.h>
#include <stdio.h>

#define LP_GSTUDY_MAX_VALUES 8

typedef struct lp_gstudy_grid {
    double cycle[LP_GSTUDY_MAX_VALUES]; /* S, ascending, the first 0 */
    double eps[LP_GSTUDY_MAX_VALUES];
    int ncycle, neps, seeds;
    size_t d, prompts, labels, eval_prompts;
    int K, rounds;
    double beta, eta; /* 0: Algorithm 3's defaults (1/sqrt(T), 1/T) */
    double rmax;      /* Square chi-PO's clip */
} lp_gstudy_grid;

/* "default" (the full study) or "quick" (make test). 0 or
 * LP_EINVALID_ARGUMENT. */
int lp_gstudy_grid_named(const char *name, lp_gstudy_grid *g);

typedef struct lp_gstudy_row {
    double cycle, eps;
    int seed;
    int general; /* 1: Algorithm 3's mixture, 0: Square chi-PO */
    double gap;  /* mean duality gap over the evaluation prompts */
    int rounds;
    double beta, eta, cycle_share, fit_seconds;
    double top_agree; /* both rows of a cell: fraction of evaluation prompts
                         where the two policies' most probable responses agree */
} lp_gstudy_row;

/* Runs the grid, writing one JSON line per row to out. 0 or an error. */
int lp_gstudy_run(const lp_gstudy_grid *g, FILE *out, int progress, char *msg, size_t msglen);

typedef struct lp_gstudy {
    lp_gstudy_row *rows;
    size_t n;
} lp_gstudy;

/* Loads the JSONL of lp_gstudy_run. 0, LP_EIO or a parse error. */
int lp_gstudy_load(const char *path, lp_gstudy *out, char *msg, size_t msglen);
void lp_gstudy_clear(lp_gstudy *s);

/* Gap difference Square chi-PO - general paired by seed at (S, eps). */
lp_study_stat lp_gstudy_advantage(const lp_gstudy *s, double cycle, double eps);
/* A method's gap at (S, eps). */
lp_study_stat lp_gstudy_gap(const lp_gstudy *s, double cycle, double eps, int general);
/* How often the two methods' most probable responses agree at (S, eps). */
lp_study_stat lp_gstudy_agreement(const lp_gstudy *s, double cycle, double eps);

/* The claim's verdict (rule in gstudy.c and in the report). */
void lp_gstudy_verdict(const lp_gstudy *s, lp_study_verdict *v);
/* The report's section: table, verdict, rule. */
void lp_gstudy_section(FILE *f, const lp_gstudy *s, const lp_study_verdict *v);

#endif
