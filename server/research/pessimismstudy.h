/*
 * pessimismstudy.h — the study block for pessimistic scores (paper 001,
 * Algorithm 2 with eta = 1; paper 002's pessimistic policy): on synthetic
 * Bradley-Terry data whose training pairs barely vary along some feature
 * directions, the suboptimality of the pessimistic choice (the candidate
 * with the largest lower bound, confidence.h) against the greedy one (the
 * largest estimated reward) at several eps, and the empirical coverage of
 * the lower bound, for a grid of Gamma values; judged by fixed rules and
 * written as a Markdown section (with a gnuplot plot) of the study report.
 *
 * Seeds: seed s fixes theta*, the training pairs, the labels' coins and the
 * evaluation prompts for every eps, so the cells are paired by seed. One
 * row per (eps, seed), holding every Gamma of the grid.
 */
#ifndef LP_PESSIMISMSTUDY_H
#define LP_PESSIMISMSTUDY_H

#include "study.h"

#include <stddef.h>
#include <stdio.h>

#define LP_PSTUDY_MAX_EPS 8
#define LP_PSTUDY_MAX_GAMMA 12

typedef struct lp_pstudy_grid {
    double eps[LP_PSTUDY_MAX_EPS];
    int neps, seeds, first_seed;       /* seeds first_seed .. first_seed + seeds - 1 */
    double gamma[LP_PSTUDY_MAX_GAMMA]; /* ascending, the first 0 (greedy) */
    int ngamma;
    size_t d, poor;    /* dimension; the last `poor` coordinates are poorly covered */
    double rho;        /* their training scale (1 for the others) */
    double theta_norm; /* ||theta*|| */
    size_t labels;     /* training labels */
    size_t prompts;    /* evaluation prompts */
    int K, K_novel;    /* candidates per prompt; how many vary along the poor directions */
    double l2, rmax;   /* the Square chi-PO fit */
} lp_pstudy_grid;

/* "full" (make reproduce) or "quick" (make reproduce QUICK=1). 0 or
 * LP_EINVALID_ARGUMENT. */
int lp_pstudy_grid_named(const char *name, lp_pstudy_grid *g);

typedef struct lp_pstudy_row {
    double eps;
    int seed;
    int ngamma;
    double gamma[LP_PSTUDY_MAX_GAMMA];
    double subopt[LP_PSTUDY_MAX_GAMMA];   /* mean suboptimality of the choice at gamma[j] */
    double coverage[LP_PSTUDY_MAX_GAMMA]; /* share of candidates whose bound holds */
    double width_good, width_poor;        /* mean ||e_j||_{M^-1} over good / poor coordinates j */
    double err_good, err_poor;            /* ||theta_hat - theta*|| over good / poor coordinates */
    double fit_seconds;
} lp_pstudy_row;

/* Runs the grid, writing one JSON line per row to out. 0 or an error. */
int lp_pstudy_run(const lp_pstudy_grid *g, FILE *out, int progress, char *msg, size_t msglen);

typedef struct lp_pstudy {
    lp_pstudy_row *rows;
    size_t n;
} lp_pstudy;

/* Loads the JSONL of lp_pstudy_run. 0, LP_EIO or a parse error. */
int lp_pstudy_load(const char *path, lp_pstudy *out, char *msg, size_t msglen);
void lp_pstudy_clear(lp_pstudy *s);

/* Suboptimality greedy - pessimistic at gamma[j], paired by seed, at eps. */
lp_study_stat lp_pstudy_advantage(const lp_pstudy *s, double eps, int j);
/* Coverage of the bound at gamma[j], at eps. */
lp_study_stat lp_pstudy_coverage(const lp_pstudy *s, double eps, int j);
/* The smallest Gamma of the grid whose mean coverage reaches the nominal
 * level at every eps (NAN: none). */
double lp_pstudy_calibrated_gamma(const lp_pstudy *s);

/* The block's verdict (rule in pessimismstudy.c and in the report). */
void lp_pstudy_verdict(const lp_pstudy *s, lp_study_verdict *v);
/* The report's section (table, verdict, rule) into f, and the plot
 * dir/gp/pessimism.gp (writes pessimism.svg when run from dir). 0 or
 * LP_EIO. */
int lp_pstudy_section(FILE *f, const char *dir, const lp_pstudy *s, const lp_study_verdict *v,
                      char *msg, size_t msglen);

#define LP_PSTUDY_TITLE                                                                            \
    "pessimistic scores: a lower confidence bound with its nominal coverage, and a pessimistic "   \
    "choice better than the greedy one where the data cover poorly and labels are noisy"

/* The verdict of the JSONL at path. 0 or a load error. */
int lp_pstudy_verdict_file(const char *path, lp_study_verdict *v);

/* The whole block for the study report: loads path, writes the section
 * into f and the plot under dir. 0 or a load / write error. */
int lp_pstudy_report(FILE *f, const char *dir, const char *path, char *msg, size_t msglen);

#endif
