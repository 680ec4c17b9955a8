/*
 * test_corrupt.c — the server's LTC corruption view (server/service/corrupt.h): a
 * pure, seeded function of (settings, label id). Rates are checked over
 * 200,000 label ids against binomial bounds of 5 standard deviations
 * (a false alarm has probability below 1e-6 per check).
 */
#include "check.h"
#include "corrupt.h"
#include "error.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

#define N 200000

static lp_corruption settings(lp_adversary s, double alpha, uint64_t seed)
{
    lp_corruption c;
    memset(&c, 0, sizeof c);
    c.id = 1;
    c.campaign = 1;
    c.alpha = alpha;
    c.strategy = s;
    c.seed = seed;
    c.feature = 3;
    return c;
}

/* Fraction of labels 1..N changed by c, all with received label z and the
 * given view inputs. */
static double changed_rate(const lp_corruption *c, int z, double margin, double f0, double f1)
{
    long changed = 0, bad = 0;
    for (int64_t i = 1; i <= N; i++) {
        lp_corrupt_input in = {
            .label_id = i, .z = z, .model_margin = margin, .feature0 = f0, .feature1 = f1};
        int ch;
        int v = lp_corrupt_view(c, &in, &ch);
        bad += (v != 0 && v != 1) || ch != (v != z);
        changed += ch;
    }
    check_record(bad == 0, __FILE__, __LINE__, "%ld labels outside {0,1} or misflagged", bad);
    return (double)changed / N;
}

static void check_rate(const char *what, double got, double p)
{
    double sd = sqrt(p * (1 - p) / N);
    check_record(fabs(got - p) <= 5 * sd + 1e-12, __FILE__, __LINE__,
                 "%s: rate %.5f, expected %.5f +- %.5f", what, got, p, 5 * sd);
}

int main(void)
{
    /* no settings, or alpha 0: the received label */
    lp_corrupt_input in = {.label_id = 7, .z = 1};
    int ch = -1;
    CHECK_INT(lp_corrupt_view(NULL, &in, &ch), 1);
    CHECK_INT(ch, 0);
    lp_corruption off = settings(LP_ADV_FLIP, 0.0, 1);
    CHECK(changed_rate(&off, 1, 0, 0, 0) == 0.0);
    lp_corruption none = settings(LP_ADV_FLIP, 0.5, 1);
    none.id = 0; /* "no settings in force" */
    CHECK(changed_rate(&none, 0, 0, 0, 0) == 0.0);

    /* rates per strategy */
    for (int k = 0; k < 3; k++) {
        double alpha = (double[]){0.1, 0.2, 0.5}[k];
        char what[64];
        lp_corruption c = settings(LP_ADV_FLIP, alpha, 42);
        snprintf(what, sizeof what, "flip alpha %.1f", alpha);
        check_rate(what, changed_rate(&c, 0, 0, 0, 0), alpha);
        c = settings(LP_ADV_RANDOM, alpha, 42);
        snprintf(what, sizeof what, "random alpha %.1f", alpha);
        check_rate(what, changed_rate(&c, 1, 0, 0, 0), alpha / 2);
        c = settings(LP_ADV_CONSTANT0, alpha, 42);
        check_rate("constant0 on z=1", changed_rate(&c, 1, 0, 0, 0), alpha);
        CHECK(changed_rate(&c, 0, 0, 0, 0) == 0.0);
        c = settings(LP_ADV_CONSTANT1, alpha, 42);
        check_rate("constant1 on z=0", changed_rate(&c, 0, 0, 0, 0), alpha);
        CHECK(changed_rate(&c, 1, 0, 0, 0) == 0.0);
        /* anti opposes the model: margin > 0 (response 1 preferred) gives 0 */
        c = settings(LP_ADV_ANTI, alpha, 42);
        check_rate("anti against margin > 0", changed_rate(&c, 1, 2.5, 0, 0), alpha);
        CHECK(changed_rate(&c, 0, 2.5, 0, 0) == 0.0);
        check_rate("anti against margin < 0", changed_rate(&c, 0, -1.0, 0, 0), alpha);
        /* a reference preference wins over the model: anti gives 1 - reference
         * whatever the margin says */
        for (int ref = 0; ref < 2; ref++) {
            long to_anti = 0, kept = 0;
            for (int64_t i = 1; i <= N; i++) {
                /* the model prefers the other response: on its own, anti would give ref */
                double margin = ref ? -1.0 : 2.5;
                lp_corrupt_input r = {.label_id = i,
                                      .z = ref,
                                      .has_reference = 1,
                                      .reference = ref,
                                      .model_margin = margin};
                lp_corrupt_input o = r;
                o.z = 1 - ref; /* already the anti label: never changed */
                int changed;
                int v = lp_corrupt_view(&c, &r, &changed);
                to_anti += changed && v == 1 - ref;
                kept += lp_corrupt_view(&c, &o, NULL) == 1 - ref;
            }
            snprintf(what, sizeof what, "anti against reference %d", ref);
            check_rate(what, (double)to_anti / N, alpha);
            CHECK_INT(kept, N);
        }
        /* backdoor prefers the larger feature k; a tie changes nothing */
        c = settings(LP_ADV_BACKDOOR, alpha, 42);
        check_rate("backdoor f1 > f0", changed_rate(&c, 0, 0, 0.1, 0.9), alpha);
        CHECK(changed_rate(&c, 1, 0, 0.1, 0.9) == 0.0);
        check_rate("backdoor f0 > f1", changed_rate(&c, 1, 0, 0.9, 0.1), alpha);
        CHECK(changed_rate(&c, 0, 0, 0.5, 0.5) == 0.0);
    }

    /* deterministic in (seed, label id); seeds give independent coins: two
     * seeds disagree on a fraction 2 alpha (1 - alpha) of labels */
    lp_corruption a = settings(LP_ADV_FLIP, 0.3, 5), b = settings(LP_ADV_FLIP, 0.3, 6);
    long same = 0, differ = 0;
    for (int64_t i = 1; i <= N; i++) {
        lp_corrupt_input x = {.label_id = i, .z = (int)(i & 1)};
        int v1 = lp_corrupt_view(&a, &x, NULL), v2 = lp_corrupt_view(&a, &x, NULL);
        same += v1 == v2;
        differ += v1 != lp_corrupt_view(&b, &x, NULL);
    }
    CHECK_INT(same, N);
    check_rate("seed 5 vs seed 6 disagreement", (double)differ / N, 2 * 0.3 * 0.7);

    /* the coin of label i does not depend on the label's value */
    lp_corruption c = settings(LP_ADV_FLIP, 0.25, 9);
    long agree = 0;
    for (int64_t i = 1; i <= N; i++) {
        int c0, c1;
        lp_corrupt_input x0 = {.label_id = i, .z = 0}, x1 = {.label_id = i, .z = 1};
        lp_corrupt_view(&c, &x0, &c0);
        lp_corrupt_view(&c, &x1, &c1);
        agree += c0 == c1;
    }
    CHECK_INT(agree, N);
    CHECK(lp_corrupt_strategy_valid(LP_ADV_BACKDOOR));
    CHECK(!lp_corrupt_strategy_valid((lp_adversary)LP_ADV_COUNT));
    return check_summary();
}
