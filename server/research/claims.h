/*
 * claims.h — the papers' remaining claims, each judged on its own block of
 * a sweep with a fixed rule (the rule's text is in the report):
 *
 *   paper002  paper 002's SGD-RR as its Algorithm 1 states it (rr-sgd-last)
 *             and its MLE-RR inside the regime eps > 2LB where its
 *             Theorem 3.2 holds, on bounded features (L = 1)
 *   ipo       IPO (a square on the raw implicit reward) vs Square chi-PO
 *             (a square on the probability): paper 000, Remark 3.1
 *   eps-0.1   the privacy cost c(eps) at eps = 0.1
 *   order     the corruption term's scaling in alpha and c(eps) under CTL
 *             and LTC, and paper 001's CLC order
 *
 * A claim whose block is absent is "not tested (no data)".
 */
#ifndef LP_CLAIMS_H
#define LP_CLAIMS_H

#include "study.h"

#include <stdio.h>

typedef struct lp_claim {
    const char *id;    /* stable key in verdicts.json */
    const char *title; /* one line */
    const char *paper; /* what the paper states, and what is tested */
    const char *rule;  /* the verdict rule, fixed before the run */
    void (*judge)(const lp_study *s, lp_study_verdict *v);
    void (*table)(FILE *f, const lp_study *s); /* the evidence, Markdown */
} lp_claim;

/* The remaining claims, in report order. */
extern const lp_claim lp_claims[];
extern const int lp_claims_count;

/* Paper 002's privacy factor of Theorem 3.2 (MLE-RR),
 * (e^{eps+LB} + 1)/(e^{eps-2LB} - 1), for eps > 2LB; INFINITY otherwise. */
double lp_claims_paper002_factor(double eps, double LB);

#endif
