/* budget.c — release budget arithmetic. See budget.h. */
#include "budget.h"

#include "error.h"

#include <math.h>

/* a + b within limit, allowing LP_BUDGET_SLACK of the limit for rounding */
static int within(double spent, double add, double limit)
{
    return spent + add <= limit * (1 + LP_BUDGET_SLACK);
}

int lp_budget_check(double budget_epsilon, double budget_delta, double spent_epsilon,
                    double spent_delta, double epsilon, double delta)
{
    if (!isfinite(epsilon) || !(epsilon > 0) || !(delta >= 0) || !(delta < 1))
        return LP_EINVALID_ARGUMENT;
    if (!(budget_epsilon > 0) || !within(spent_epsilon, epsilon, budget_epsilon))
        return LP_ERELEASE_BUDGET_EXHAUSTED;
    if (delta > 0 && !within(spent_delta, delta, budget_delta))
        return LP_ERELEASE_BUDGET_EXHAUSTED;
    return LP_OK;
}

double lp_budget_per_label(double user_budget, long long m)
{
    if (!isfinite(user_budget) || !(user_budget > 0) || m < 1)
        return NAN;
    return user_budget / (double)m;
}
