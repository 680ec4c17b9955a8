/*
 * test_release_budget.c — the model-release budget of central campaigns:
 * the arithmetic of basic composition (common/budget.h), and the store's
 * check-and-spend in the model's own transaction (registry.h) on a real
 * SQLite file, with releases stored from many threads at once.
 */
#include "budget.h"
#include "campaigns.h"
#include "check.h"
#include "error.h"
#include "registry.h"
#include "store_fixture.h"

#include <math.h>
#include <pthread.h>
#include <stdlib.h>
#include <stdio.h>
#include <string.h>

static void test_arithmetic(void)
{
    /* pure DP: epsilons add up to the budget, not beyond */
    CHECK_INT(lp_budget_check(3, 0, 0, 0, 3, 0), LP_OK);
    CHECK_INT(lp_budget_check(3, 0, 2, 0, 1, 0), LP_OK);
    CHECK_INT(lp_budget_check(3, 0, 2, 0, 1.01, 0), LP_ERELEASE_BUDGET_EXHAUSTED);
    CHECK_INT(lp_budget_check(3, 0, 3, 0, 1e-6, 0), LP_ERELEASE_BUDGET_EXHAUSTED);
    /* decimal fractions are not refused by rounding: 0.1 + 0.2 of 0.3 */
    CHECK_INT(lp_budget_check(0.3, 0, 0.1, 0, 0.2, 0), LP_OK);
    double spent = 0;
    int fits = 0;
    for (int k = 0; k < 10; k++) /* ten releases of 0.1 fit a budget of 1 */
        if (lp_budget_check(1.0, 0, spent, 0, 0.1, 0) == LP_OK) {
            spent += 0.1;
            fits++;
        }
    CHECK_INT(fits, 10);
    CHECK_INT(lp_budget_check(1.0, 0, spent, 0, 0.1, 0), LP_ERELEASE_BUDGET_EXHAUSTED);
    /* no budget: nothing fits */
    CHECK_INT(lp_budget_check(0, 0, 0, 0, 0.1, 0), LP_ERELEASE_BUDGET_EXHAUSTED);
    /* approximate DP: delta spends from its own total, epsilon still counts */
    CHECK_INT(lp_budget_check(3, 1e-5, 0, 0, 1, 1e-5), LP_OK);
    CHECK_INT(lp_budget_check(3, 1e-5, 1, 1e-5, 1, 1e-6), LP_ERELEASE_BUDGET_EXHAUSTED);
    CHECK_INT(lp_budget_check(3, 0, 0, 0, 1, 1e-9), LP_ERELEASE_BUDGET_EXHAUSTED);
    CHECK_INT(lp_budget_check(3, 1e-5, 2.5, 0, 1, 1e-6), LP_ERELEASE_BUDGET_EXHAUSTED);
    /* a pure release needs no delta budget */
    CHECK_INT(lp_budget_check(3, 0, 1, 0, 1, 0), LP_OK);
    /* no release is private at infinity; delta outside [0, 1) */
    CHECK_INT(lp_budget_check(INFINITY, 0, 0, 0, INFINITY, 0), LP_EINVALID_ARGUMENT);
    CHECK_INT(lp_budget_check(3, 0, 0, 0, 0, 0), LP_EINVALID_ARGUMENT);
    CHECK_INT(lp_budget_check(3, 0, 0, 0, NAN, 0), LP_EINVALID_ARGUMENT);
    CHECK_INT(lp_budget_check(3, 1, 0, 0, 1, 1), LP_EINVALID_ARGUMENT);
    CHECK_INT(lp_budget_check(3, 1, 0, 0, 1, -1e-9), LP_EINVALID_ARGUMENT);
    /* the user-level budget over m labels */
    CHECK_NEAR(lp_budget_per_label(10, 20), 0.5, 0);
    CHECK_NEAR(lp_budget_per_label(1.5, 3), 0.5, 1e-15);
    CHECK(isnan(lp_budget_per_label(10, 0)));
    CHECK(isnan(lp_budget_per_label(INFINITY, 2)));
    CHECK(isnan(lp_budget_per_label(-1, 2)));
}

static store_fixture fx;
static lp_campaign central;
static int64_t run_id;

#define THREADS 8
#define PER_THREAD 5
#define RELEASE_EPS 0.3
#define BUDGET 2.0 /* 6 releases of 0.3 fit (1.8), the 7th does not */

struct adder {
    int stored, refused, other;
};

/* Stores PER_THREAD releases of RELEASE_EPS from the central campaign. */
static void *add_releases(void *arg)
{
    struct adder *a = arg;
    for (int k = 0; k < PER_THREAD; k++) {
        lp_model_record m = {.run = run_id,
                             .campaign = central.id,
                             .cutoff = 1,
                             .labels = 1,
                             .dim = 2,
                             .summary = "{\"d\":2}",
                             .model = "{\"d\":2,\"theta\":[0,0]}",
                             .privacy = {.known = 1,
                                         .labels = 1,
                                         .annotators = 1,
                                         .unprivatized = 1,
                                         .epsilon_min = NAN,
                                         .epsilon_max = NAN,
                                         .epsilon_per_annotator = INFINITY,
                                         .released = 1},
                             .release_epsilon = RELEASE_EPS};
        snprintf(m.loss, sizeof m.loss, "square-chipo");
        snprintf(m.features, sizeof m.features, "dense");
        snprintf(m.mechanism, sizeof m.mechanism, "exponential");
        int rc = lp_registry_model_add(fx.store, &m, 0);
        a->stored += rc == LP_OK;
        a->refused += rc == LP_ERELEASE_BUDGET_EXHAUSTED;
        a->other += rc != LP_OK && rc != LP_ERELEASE_BUDGET_EXHAUSTED;
    }
    return NULL;
}

static void test_concurrent_spend(void)
{
    CHECK_INT(store_fixture_open(&fx, "budget", 2), LP_OK);
    if (fx.store == NULL)
        return;
    memset(&central, 0, sizeof central);
    snprintf(central.name, sizeof central.name, "central");
    central.epsilon_min = 0.01;
    central.epsilon_max = 10;
    central.epsilon_budget = 10;
    central.epsilon_default = INFINITY;
    central.allow_infinite = 1;
    central.central = 1;
    central.release_epsilon = BUDGET;
    CHECK_INT(lp_store_campaign_create(fx.store, &central), LP_OK);
    lp_run run = {.settings = {.campaign = central.id,
                               .beta = 1,
                               .rmax = 1,
                               .tau = 0.5,
                               .norm_bound = INFINITY,
                               .max_iter = 500,
                               .epochs = 1,
                               .lr = 0.5,
                               .batch = 1,
                               .text_dim = 4096,
                               .threads = 1,
                               .release_epsilon = RELEASE_EPS}};
    snprintf(run.settings.mechanism, sizeof run.settings.mechanism, "exponential");
    snprintf(run.settings.loss, sizeof run.settings.loss, "square-chipo");
    snprintf(run.settings.optimizer, sizeof run.settings.optimizer, "lbfgs");
    snprintf(run.settings.features, sizeof run.settings.features, "dense");
    snprintf(run.trigger, sizeof run.trigger, "manual");
    CHECK_INT(lp_registry_run_create(fx.store, &run), LP_OK);
    run_id = run.id;

    pthread_t th[THREADS];
    struct adder a[THREADS];
    memset(a, 0, sizeof a);
    for (int k = 0; k < THREADS; k++)
        pthread_create(&th[k], NULL, add_releases, &a[k]);
    int stored = 0, refused = 0, other = 0;
    for (int k = 0; k < THREADS; k++) {
        pthread_join(th[k], NULL);
        stored += a[k].stored;
        refused += a[k].refused;
        other += a[k].other;
    }
    int fit = (int)floor(BUDGET / RELEASE_EPS + 1e-9);
    CHECK_INT(stored, fit);
    CHECK_INT(refused, THREADS * PER_THREAD - fit);
    CHECK_INT(other, 0);
    double eps = 0, delta = 0;
    CHECK_INT(lp_store_release_spent(fx.store, central.id, &eps, &delta), LP_OK);
    CHECK_NEAR(eps, fit * RELEASE_EPS, 1e-12);
    CHECK(eps <= BUDGET);
    CHECK_NEAR(delta, 0, 0);

    /* the models read back with their release */
    lp_model_record *list = NULL;
    size_t n = 0;
    CHECK_INT(lp_registry_model_list(fx.store, &list, &n), LP_OK);
    CHECK_INT(n, (size_t)fit);
    for (size_t i = 0; i < n; i++) {
        CHECK_STR(list[i].mechanism, "exponential");
        CHECK_NEAR(list[i].release_epsilon, RELEASE_EPS, 0);
        CHECK(list[i].privacy.released);
        CHECK(lp_label_privacy_public(&list[i].privacy));
        CHECK(!lp_label_privacy_all_privatized(&list[i].privacy));
        lp_model_record_clear(&list[i]);
    }
    free(list);

    /* raising the budget lets the next release through */
    central.release_epsilon = BUDGET + RELEASE_EPS;
    CHECK_INT(lp_store_campaign_set_budget(fx.store, &central), LP_OK);
    struct adder more = {0};
    add_releases(&more);
    CHECK_INT(more.stored, 1);
    CHECK_INT(more.refused, PER_THREAD - 1);
    store_fixture_close(&fx);
}

int main(void)
{
    test_arithmetic();
    test_concurrent_spend();
    return check_summary();
}
