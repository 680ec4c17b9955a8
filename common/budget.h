/*
 * budget.h — the arithmetic of a central campaign's model-release budget
 * and of user-level accounting (docs/trust-model.md "Central campaigns").
 *
 * Releases compose by basic composition: k releases that are (eps_i,
 * delta_i)-DP on the same labels are (sum eps_i, sum delta_i)-DP. A
 * campaign keeps two totals: the pure-DP budget (every release's epsilon
 * counts against it) and the delta total (only approximate releases spend
 * from it). A release fits when both sums stay within their budgets, up to
 * a relative tolerance of LP_BUDGET_SLACK so that budgets written as
 * decimal fractions (0.1 + 0.2 against 0.3) are not refused by rounding.
 */
#ifndef LP_BUDGET_H
#define LP_BUDGET_H

#define LP_BUDGET_SLACK 1e-9

/* LP_OK when a release of (epsilon, delta) fits a campaign that spent
 * (spent_epsilon, spent_delta) of the budget (budget_epsilon,
 * budget_delta); LP_ERELEASE_BUDGET_EXHAUSTED otherwise (also when
 * budget_epsilon is 0: no budget); LP_EINVALID_ARGUMENT when epsilon is not
 * finite and > 0 or delta is not in [0, 1). */
int lp_budget_check(double budget_epsilon, double budget_delta, double spent_epsilon,
                    double spent_delta, double epsilon, double delta);

/* The per-label epsilon of a user-level budget spread over at most m labels
 * (randomized response at budget/m per label, basic composition): budget /
 * m; NAN when budget is not finite and > 0 or m < 1. */
double lp_budget_per_label(double user_budget, long long m);

#endif
