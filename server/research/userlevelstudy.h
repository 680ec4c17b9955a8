/*
 * userlevelstudy.h — the user-level privacy study block (paper 004): at a
 * fixed number of labels N = n m, the estimation error of theta* against the
 * contribution m for the randomized-response baseline (each label RR at
 * eps/m, Square chi-PO debiased with c(eps/m)) and for AUP-RLHF (aup.h, raw
 * labels, user-level (eps, delta)); and, at one m, the number of annotators
 * n each needs for a target error. Judged by a rule fixed before the run
 * (userlevelstudy.c and the report) and written as a Markdown section with
 * a gnuplot plot.
 *
 * Seeds: seed s fixes theta*, the features, the labels and the mechanisms'
 * randomness of a cell; both methods of a cell share theta* and features
 * (paired by seed). One JSON row per (part, eps, m, n, seed, method).
 */
#ifndef LP_USERLEVELSTUDY_H
#define LP_USERLEVELSTUDY_H

#include "study.h"

#include <stddef.h>
#include <stdio.h>

#define LP_UL_MAX_VALUES 8

typedef struct lp_ul_grid {
    double eps[LP_UL_MAX_VALUES];
    size_t m[LP_UL_MAX_VALUES];     /* contributions, ascending (part "fixed_total") */
    size_t users[LP_UL_MAX_VALUES]; /* annotators, ascending (part "annotators") */
    int neps, nm, nusers, seeds;
    size_t total;   /* N = n m */
    size_t users_m; /* m of part "annotators" */
    size_t d;
    double delta;
    int steps;    /* AUP-RLHF: T */
    double lr;    /* AUP-RLHF: step */
    size_t batch; /* AUP-RLHF: annotators per step at most */
} lp_ul_grid;

/* "default" (the full study) or "quick". 0 or LP_EINVALID_ARGUMENT. */
int lp_ul_grid_named(const char *name, lp_ul_grid *g);

typedef struct lp_ul_row {
    int annotators_part; /* 0: fixed N, error vs m; 1: error vs n at users_m */
    int aup;             /* 1: AUP-RLHF, 0: RR at eps/m */
    double eps;
    size_t m, n;
    int seed;
    int refused;  /* AUP-RLHF: too few annotators for (eps, delta, T) */
    double error; /* ||theta - theta*|| / ||theta*|| */
    double cosine;
    double sigma; /* AUP-RLHF: noise per coordinate per step */
    int steps_run;
} lp_ul_row;

/* Runs the grid, one JSON line per row to out. 0 or an error. */
int lp_ul_run(const lp_ul_grid *g, FILE *out, int progress, char *msg, size_t msglen);

typedef struct lp_ul_study {
    lp_ul_row *rows;
    size_t n;
} lp_ul_study;

/* Loads the JSONL of lp_ul_run. 0, LP_EIO or a parse error. */
int lp_ul_load(const char *path, lp_ul_study *out, char *msg, size_t msglen);
void lp_ul_clear(lp_ul_study *s);

/* The claim's verdict (rule in userlevelstudy.c and in the report). */
void lp_ul_verdict(const lp_ul_study *s, lp_study_verdict *v);
/* The report's section (table, verdict, rule) and its plot gp/userlevel.gp
 * under dir. */
int lp_ul_section(FILE *f, const char *dir, const lp_ul_study *s, const lp_study_verdict *v);

#endif
