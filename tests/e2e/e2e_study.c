/*
 * e2e_study.c — `make reproduce QUICK=1` end to end: runs
 * tests/study/reproduce.sh with QUICK=1 (the real ldpref-train sweep on the
 * quick grid, its report and gnuplot) into $LDPREF_BUILD/study-quick, checks
 * the output files, then checks the papers' qualitative claims where the
 * quick grid has the power to show them.
 *
 * Every claim check compares means with a margin of K_SE standard errors
 * taken from the seed-to-seed spread (differences paired by seed, since
 * all settings of a seed share theta*, data and evaluation draws), plus,
 * where the claim itself has a tolerance ("about -1/2", "about 1"), that
 * tolerance; no check compares with an expected number from a past run.
 */
#include "centralstudy.h"
#include "check.h"
#include "claims.h"
#include "error.h"
#include "confidence.h"
#include "gstudy.h"
#include "pessimismstudy.h"
#include "rr.h"
#include "study.h"
#include "userlevelstudy.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define K_SE 3.0

static lp_study *S;

static lp_study_filter at(const char *block, size_t n, double eps, double alpha, int order, int adv,
                          lp_loss_kind loss)
{
    lp_study_filter f = {block, n, eps, alpha, order, adv, (int)loss};
    return f;
}

static lp_study_stat stat(lp_study_filter f, const char *metric)
{
    return lp_study_stat_of(S, &f, metric);
}

static lp_study_stat paired(lp_study_filter a, lp_study_filter b, const char *metric)
{
    return lp_study_paired(S, &a, &b, metric);
}

/* log(mean) and its standard error (delta method). */
static double log_se(lp_study_stat st)
{
    return st.se / st.mean;
}

static int file_has(const char *path, const char *needle)
{
    FILE *f = fopen(path, "r");
    if (f == NULL)
        return 0;
    static char buf[1 << 20];
    size_t k = fread(buf, 1, sizeof buf - 1, f);
    buf[k] = '\0';
    fclose(f);
    return strstr(buf, needle) != NULL;
}

static void check_outputs(const char *dir, const char *build)
{
    char path[1024], cmd[1024];
    snprintf(path, sizeof path, "%s/README.md", dir);
    CHECK(file_has(path, "## Verdicts"));
    CHECK(file_has(path, "full report (docs/results)"));
    for (int i = 1; i <= 4 + lp_claims_count; i++) {
        char needle[32];
        snprintf(needle, sizeof needle, "## Claim %d", i);
        check_record(file_has(path, needle), __FILE__, __LINE__, "report has '%s'", needle);
    }
    snprintf(path, sizeof path, "%s/verdicts.json", dir);
    for (int i = 0; i < lp_claims_count; i++)
        check_record(file_has(path, lp_claims[i].id), __FILE__, __LINE__,
                     "verdicts.json has claim '%s'", lp_claims[i].id);
    const char *svgs[] = {"error_vs_n", "subopt_vs_n", "norm_ratio_vs_n", "accuracy_vs_alpha_flip",
                          "accuracy_vs_alpha_backdoor"};
    for (size_t i = 0; i < sizeof svgs / sizeof svgs[0]; i++) {
        snprintf(path, sizeof path, "%s/%s.svg", dir, svgs[i]);
        check_record(file_has(path, "</svg>"), __FILE__, __LINE__, "%s is a complete SVG", path);
    }
    /* one row per (setting, seed, loss) of the quick grid */
    int seeds = 0;
    for (size_t i = 0; i < S->n; i++)
        if (S->rows[i].seed + 1 > seeds)
            seeds = S->rows[i].seed + 1;
    CHECK(seeds >= 3);
    snprintf(cmd, sizeof cmd, "%s/ldpref-train sweep --grid quick --seeds %d --count", build,
             seeds);
    FILE *p = popen(cmd, "r");
    long want = -1;
    if (p) {
        if (fscanf(p, "%ld", &want) != 1)
            want = -1;
        pclose(p);
    }
    CHECK_INT(S->n, want);
    int finite = 1;
    for (size_t i = 0; i < S->n; i++) {
        const lp_sweep_row *r = &S->rows[i];
        finite &= isfinite(r->accuracy) && isfinite(r->est_error) && isfinite(r->suboptimality) &&
                  isfinite(r->norm_ratio) && isfinite(r->objective) && r->iterations > 0;
    }
    CHECK(finite);
}

/* Claim 1: error ~ c(eps)/sqrt(n) for the debiased losses. */
static void check_claim1(void)
{
    const lp_loss_kind deb[] = {LP_LOSS_SQUARE_CHIPO, LP_LOSS_RDPO};
    for (int i = 0; i < 2; i++) {
        /* the rate at eps = inf, n = 2,000 -> 20,000 */
        lp_study_stat a = stat(at("privacy", 2000, INFINITY, 0, -1, -1, deb[i]), "est_error");
        lp_study_stat b = stat(at("privacy", 20000, INFINITY, 0, -1, -1, deb[i]), "est_error");
        double slope = log(b.mean / a.mean) / log(10.0);
        double se = hypot(log_se(a), log_se(b)) / log(10.0);
        check_record(fabs(slope + 0.5) <= 0.1 + K_SE * se, __FILE__, __LINE__,
                     "%s: slope %.3f in n is -1/2 +- (0.1 + %g SE = %.3f)", lp_loss_name(deb[i]),
                     slope, K_SE, 0.1 + K_SE * se);
        /* privacy costs: the error at eps = 0.5 is larger, by a factor c(eps)^p */
        lp_study_stat p = stat(at("privacy", 20000, 0.5, 0, -1, -1, deb[i]), "est_error");
        lp_study_stat d = paired(at("privacy", 20000, 0.5, 0, -1, -1, deb[i]),
                                 at("privacy", 20000, INFINITY, 0, -1, -1, deb[i]), "est_error");
        check_record(d.mean > K_SE * d.se, __FILE__, __LINE__,
                     "%s: error at eps 0.5 exceeds eps inf by %.4f > %g SE (%.4f)",
                     lp_loss_name(deb[i]), d.mean, K_SE, d.se);
        if (deb[i] == LP_LOSS_SQUARE_CHIPO) {
            double pw = log(p.mean / b.mean) / log(lp_rr_debias(0.5));
            double pse = hypot(log_se(p), log_se(b)) / log(lp_rr_debias(0.5));
            check_record(fabs(pw - 1) <= 0.25 + K_SE * pse, __FILE__, __LINE__,
                         "square-chipo: error ~ c(eps)^p, p = %.3f within 1 +- (0.25 + %g SE "
                         "= %.3f)",
                         pw, K_SE, 0.25 + K_SE * pse);
        }
    }
}

/* Claim 2: debiased Square chi-PO keeps the scale; chi-PO shrinks and stays suboptimal. */
static void check_claim2(void)
{
    lp_study_filter sq = at("privacy", 20000, 0.5, 0, -1, -1, LP_LOSS_SQUARE_CHIPO);
    lp_study_filter ch = at("privacy", 20000, 0.5, 0, -1, -1, LP_LOSS_CHIPO);
    lp_study_filter ch0 = at("privacy", 2000, 0.5, 0, -1, -1, LP_LOSS_CHIPO);
    lp_study_stat nr = stat(sq, "norm_ratio");
    check_record(fabs(nr.mean - 1) <= 0.1 + K_SE * nr.se, __FILE__, __LINE__,
                 "square-chipo norm ratio %.3f within 1 +- (0.1 + %g SE)", nr.mean, K_SE);
    lp_study_stat dn = paired(sq, ch, "norm_ratio");
    check_record(dn.mean > K_SE * dn.se, __FILE__, __LINE__,
                 "chipo's reward shrinks: norm ratio below square-chipo's by %.3f > %g SE (%.4f)",
                 dn.mean, K_SE, dn.se);
    lp_study_stat ds = paired(ch, sq, "suboptimality");
    check_record(ds.mean > K_SE * ds.se, __FILE__, __LINE__,
                 "chipo's suboptimality exceeds square-chipo's by %.3f > %g SE (%.4f)", ds.mean,
                 K_SE, ds.se);
    lp_study_stat c1 = stat(ch, "suboptimality"), c0 = stat(ch0, "suboptimality");
    check_record(c1.mean >= c0.mean - K_SE * hypot(c0.se, c1.se), __FILE__, __LINE__,
                 "chipo's suboptimality does not vanish: %.3f at n = 20,000 vs %.3f at 2,000",
                 c1.mean, c0.mean);
    lp_study_stat s1 = stat(sq, "suboptimality"), js = stat(sq, "j_star");
    check_record(fabs(s1.mean) <= 0.02 * js.mean + K_SE * s1.se, __FILE__, __LINE__,
                 "square-chipo's suboptimality %.4f is within 2%% of J* (%.3f) + %g SE", s1.mean,
                 js.mean, K_SE);
}

/* Claim 3: backdoor (consistent push): Square chi-PO beats chipo and rdpo; flip: not worse. */
static void check_claim3(void)
{
    const lp_loss_kind peers[] = {LP_LOSS_CHIPO, LP_LOSS_RDPO};
    for (int i = 0; i < 2; i++) {
        lp_study_stat d = paired(
            at("corruption", 0, 0.5, 0.1, LP_ORDER_CTL, LP_ADV_BACKDOOR, LP_LOSS_SQUARE_CHIPO),
            at("corruption", 0, 0.5, 0.1, LP_ORDER_CTL, LP_ADV_BACKDOOR, peers[i]), "accuracy");
        check_record(d.mean > K_SE * d.se, __FILE__, __LINE__,
                     "backdoor CTL: square-chipo beats %s by %.4f > %g SE (%.4f)",
                     lp_loss_name(peers[i]), d.mean, K_SE, d.se);
        d = paired(at("corruption", 0, 0.5, 0.1, LP_ORDER_CTL, LP_ADV_FLIP, LP_LOSS_SQUARE_CHIPO),
                   at("corruption", 0, 0.5, 0.1, LP_ORDER_CTL, LP_ADV_FLIP, peers[i]), "accuracy");
        check_record(d.mean > -K_SE * d.se, __FILE__, __LINE__,
                     "flip CTL: square-chipo not worse than %s (%.4f, SE %.4f)",
                     lp_loss_name(peers[i]), d.mean, d.se);
    }
}

/* Claim 4: LTC worse than CTL; LTC breaks down once its flip rate passes 1/2. */
static void check_claim4(void)
{
    const lp_loss_kind losses[] = {LP_LOSS_SQUARE_CHIPO, LP_LOSS_CHIPO, LP_LOSS_RDPO};
    double q = lp_rr_flip_prob(0.5);
    CHECK(q + 0.1 * (1 - q) < 0.5 && q + 0.3 * (1 - q) > 0.5); /* the grid brackets 1/2 */
    for (int i = 0; i < 3; i++) {
        lp_study_stat d =
            paired(at("corruption", 0, 0.5, 0.1, LP_ORDER_CTL, LP_ADV_FLIP, losses[i]),
                   at("corruption", 0, 0.5, 0.1, LP_ORDER_LTC, LP_ADV_FLIP, losses[i]), "accuracy");
        check_record(d.mean > K_SE * d.se, __FILE__, __LINE__,
                     "%s: CTL beats LTC by %.4f > %g SE (%.4f) at eps 0.5, alpha 0.1",
                     lp_loss_name(losses[i]), d.mean, K_SE, d.se);
        lp_study_stat l =
            stat(at("corruption", 0, 0.5, 0.3, LP_ORDER_LTC, LP_ADV_FLIP, losses[i]), "accuracy");
        lp_study_stat c =
            stat(at("corruption", 0, 0.5, 0.3, LP_ORDER_CTL, LP_ADV_FLIP, losses[i]), "accuracy");
        check_record(l.mean < 0.5 - K_SE * l.se && c.mean > 0.5 + K_SE * c.se, __FILE__, __LINE__,
                     "%s at alpha 0.3: LTC below chance (%.3f, SE %.3f), CTL above (%.3f, SE "
                     "%.3f)",
                     lp_loss_name(losses[i]), l.mean, l.se, c.mean, c.se);
        lp_study_stat fr =
            stat(at("corruption", 0, 0.5, 0.3, LP_ORDER_LTC, LP_ADV_FLIP, losses[i]), "flip_rate");
        check_record(fr.mean > 0.5, __FILE__, __LINE__, "observed LTC flip rate %.4f > 1/2",
                     fr.mean);
    }
}

/* Paper 002 on bounded features: its SGD-RR as written converges; its MLE-RR
 * inside eps > 2LB has the 1/sqrt(n) rate and grows no faster than the
 * paper's factor as eps approaches 2LB. */
static void check_paper002(void)
{
    const double eps[] = {1, 3.5, 8};
    for (int e = 0; e < 3; e++) {
        lp_study_stat d =
            paired(at("paper002", 5000, eps[e], 0, -1, -1, LP_LOSS_RR_SGD_LAST),
                   at("paper002", 20000, eps[e], 0, -1, -1, LP_LOSS_RR_SGD_LAST), "est_error");
        check_record(d.mean > K_SE * d.se, __FILE__, __LINE__,
                     "rr-sgd-last at eps %g: error falls from n = 5,000 to 20,000 by %.4f > %g "
                     "SE (%.4f)",
                     eps[e], d.mean, K_SE, d.se);
    }
    lp_study_stat a = stat(at("paper002", 5000, 8, 0, -1, -1, LP_LOSS_RR_MLE), "est_error");
    lp_study_stat b = stat(at("paper002", 20000, 8, 0, -1, -1, LP_LOSS_RR_MLE), "est_error");
    double slope = log(b.mean / a.mean) / log(4.0), se = hypot(log_se(a), log_se(b)) / log(4.0);
    check_record(fabs(slope + 0.5) <= 0.1 + K_SE * se, __FILE__, __LINE__,
                 "rr-mle at eps 8 (> 2LB): slope %.3f in n is -1/2 +- (0.1 + %g SE = %.3f)", slope,
                 K_SE, 0.1 + K_SE * se);
    const lp_sweep_row *r = NULL;
    for (size_t i = 0; i < S->n && r == NULL; i++)
        if (strcmp(S->rows[i].block, "paper002") == 0)
            r = &S->rows[i];
    CHECK(r != NULL && r->unit_features && 2 * r->norm_bound < 3.5);
    if (r == NULL)
        return;
    lp_study_stat lo = stat(at("paper002", 20000, 3.5, 0, -1, -1, LP_LOSS_RR_MLE), "est_error");
    double ratio = log(lo.mean / b.mean), rse = hypot(log_se(lo), log_se(b));
    double fr = log(lp_claims_paper002_factor(3.5, r->norm_bound) /
                    lp_claims_paper002_factor(8, r->norm_bound));
    check_record(ratio <= fr + K_SE * rse, __FILE__, __LINE__,
                 "rr-mle: log error ratio eps 3.5/8 = %.3f within paper 002's factor's %.3f + "
                 "%g SE",
                 ratio, fr, K_SE);
}

/* IPO keeps the direction but not the scale; the backdoor pulls it more. */
static void check_ipo(void)
{
    lp_study_stat sq = stat(at("ipo", 20000, 1, 0, -1, -1, LP_LOSS_SQUARE_CHIPO), "norm_ratio");
    lp_study_stat ip = stat(at("ipo", 20000, 1, 0, -1, -1, LP_LOSS_IPO), "norm_ratio");
    check_record(fabs(sq.mean - 1) <= 0.1 + K_SE * sq.se, __FILE__, __LINE__,
                 "square-chipo norm ratio %.3f within 1 +- (0.1 + %g SE)", sq.mean, K_SE);
    check_record(fabs(ip.mean - 1) > 0.1 + K_SE * ip.se, __FILE__, __LINE__,
                 "ipo norm ratio %.3f outside 1 +- (0.1 + %g SE)", ip.mean, K_SE);
    lp_study_stat d = paired(at("ipo", 20000, 1, 0.2, -1, -1, LP_LOSS_SQUARE_CHIPO),
                             at("ipo", 20000, 1, 0.2, -1, -1, LP_LOSS_IPO), "accuracy");
    check_record(d.mean > K_SE * d.se, __FILE__, __LINE__,
                 "backdoor alpha 0.2: square-chipo beats ipo by %.4f > %g SE (%.4f)", d.mean, K_SE,
                 d.se);
}

/* eps = 0.1: the privacy cost grows at least like c(eps)^0.75 from eps = 0.5
 * (the quick grid's n is pre-asymptotic at eps = 0.1, where the error
 * exceeds the c(eps)/sqrt(n) rate; the full study judges the rate). */
static void check_eps01(void)
{
    const lp_loss_kind deb[] = {LP_LOSS_SQUARE_CHIPO, LP_LOSS_RDPO};
    double cr = log(lp_rr_debias(0.1) / lp_rr_debias(0.5));
    for (int i = 0; i < 2; i++) {
        lp_study_stat a = stat(at("eps-0.1", 20000, 0.1, 0, -1, -1, deb[i]), "est_error");
        lp_study_stat b = stat(at("eps-0.1", 20000, 0.5, 0, -1, -1, deb[i]), "est_error");
        double p = log(a.mean / b.mean) / cr, pse = hypot(log_se(a), log_se(b)) / cr;
        check_record(p >= 0.75 - K_SE * pse, __FILE__, __LINE__,
                     "%s: error ~ c(eps)^p from eps 0.5 to 0.1 with p = %.3f >= 0.75 - %g SE "
                     "(%.3f)",
                     lp_loss_name(deb[i]), p, K_SE, pse);
    }
}

/* Orders at equal budget: CTL < CLC < LTC at eps 0.5; LTC's excess grows with c(eps). */
static void check_orders(void)
{
    lp_study_filter ctl =
        at("order", 0, 0.5, 0.08, LP_ORDER_CTL, LP_ADV_ANTI, LP_LOSS_SQUARE_CHIPO);
    lp_study_filter clc = ctl, ltc = ctl;
    clc.order = LP_ORDER_CLC;
    ltc.order = LP_ORDER_LTC;
    lp_study_stat d1 = paired(clc, ctl, "est_error"), d2 = paired(ltc, clc, "est_error");
    check_record(d1.mean > K_SE * d1.se && d2.mean > K_SE * d2.se, __FILE__, __LINE__,
                 "error CTL < CLC < LTC at eps 0.5, alpha 0.08: CLC-CTL %.4f (SE %.4f), "
                 "LTC-CLC %.4f (SE %.4f)",
                 d1.mean, d1.se, d2.mean, d2.se);
    /* the LTC-CTL gap is larger where c(eps) is larger */
    lp_study_filter ctl2 = ctl, ltc2 = ltc;
    ctl2.eps = ltc2.eps = 2;
    lp_study_stat g1 = paired(ltc, ctl, "est_error"), g2 = paired(ltc2, ctl2, "est_error");
    check_record(g1.mean - g2.mean > K_SE * hypot(g1.se, g2.se), __FILE__, __LINE__,
                 "LTC - CTL gap %.4f at eps 0.5 exceeds %.4f at eps 2 by > %g SE", g1.mean, g2.mean,
                 K_SE);
}

/* General preferences: on cyclic data (the largest S) Algorithm 3's
 * mixture has a smaller duality gap than Square chi-PO's policy, by more
 * than K_SE paired standard errors, and by more than on transitive data;
 * on transitive data (S = 0) the two prefer the same response on at least
 * 90% of the prompts (within K_SE SE). */
static void check_general(const char *dir)
{
    char path[600], msg[512] = "";
    snprintf(path, sizeof path, "%s/general.jsonl", dir);
    lp_gstudy g;
    CHECK_ERR(lp_gstudy_load(path, &g, msg, sizeof msg), LP_OK);
    lp_gstudy_grid grid;
    CHECK_ERR(lp_gstudy_grid_named("quick", &grid), LP_OK);
    CHECK_INT(g.n, (size_t)(2 * grid.ncycle * grid.neps * grid.seeds));
    double top = grid.cycle[grid.ncycle - 1];
    for (int e = 0; e < grid.neps; e++) {
        lp_study_stat adv = lp_gstudy_advantage(&g, top, grid.eps[e]);
        lp_study_stat adv0 = lp_gstudy_advantage(&g, 0.0, grid.eps[e]);
        lp_study_stat agree = lp_gstudy_agreement(&g, 0.0, grid.eps[e]);
        fprintf(stderr,
                "general eps=%g: S=%g advantage %.4f +- %.4f, S=0 %.4f +- %.4f, agreement "
                "%.3f +- %.3f\n",
                grid.eps[e], top, adv.mean, adv.se, adv0.mean, adv0.se, agree.mean, agree.se);
        CHECK(adv.count == (size_t)grid.seeds && adv.mean > K_SE * adv.se);
        CHECK(adv.mean - adv0.mean > K_SE * sqrt(adv.se * adv.se + adv0.se * adv0.se));
        CHECK(agree.mean + K_SE * agree.se >= 0.9);
    }
    snprintf(path, sizeof path, "%s/README.md", dir);
    CHECK(file_has(path, "## General preferences"));
    lp_gstudy_clear(&g);
}

/* Central DP (the exponential mechanism): one row per cell and seed; in
 * every excess cell the exact probability of exceeding the theorem's bound
 * (8/eps) ln(K/zeta) is at most zeta, and every sampled excess is within
 * [0, 4n]; at every eps the per-label expected excess at the largest n is
 * below that at the smallest by more than K_SE paired standard errors. */
static void check_central(const char *dir)
{
    char path[600], msg[512] = "";
    snprintf(path, sizeof path, "%s/central.jsonl", dir);
    lp_cstudy c;
    CHECK_ERR(lp_cstudy_load(path, &c, msg, sizeof msg), LP_OK);
    lp_cstudy_grid g;
    CHECK_ERR(lp_cstudy_grid_named("quick", &g), LP_OK);
    CHECK_INT(c.n, (size_t)(g.seeds * (g.nn * g.neps + g.nmeps * (1 + g.ladder))));
    for (size_t i = 0; i < c.n; i++) {
        const lp_cstudy_row *r = &c.rows[i];
        if (r->part != LP_CSTUDY_EXCESS)
            continue;
        check_record(r->tail <= g.zeta && r->excess >= 0 && r->excess <= 4.0 * (double)r->n,
                     __FILE__, __LINE__, "n=%zu eps=%g seed %d: tail %.3g, excess %.3g", r->n,
                     r->eps, r->seed, r->tail, r->excess);
    }
    for (int e = 0; e < g.neps; e++) {
        double d[64];
        int k = 0;
        for (size_t i = 0; i < c.n; i++)
            for (size_t j = 0; j < c.n && k < 64; j++) {
                const lp_cstudy_row *a = &c.rows[i], *b = &c.rows[j];
                if (a->part == LP_CSTUDY_EXCESS && b->part == LP_CSTUDY_EXCESS &&
                    a->eps == g.eps[e] && b->eps == g.eps[e] && a->seed == b->seed &&
                    a->n == g.n[0] && b->n == g.n[g.nn - 1])
                    d[k++] = a->expected_excess / (double)a->n - b->expected_excess / (double)b->n;
            }
        lp_study_stat st = lp_study_stat_values(d, (size_t)k);
        fprintf(stderr,
                "central eps=%g: per-label excess falls by %.4g +- %.4g from n=%zu to %zu\n",
                g.eps[e], st.mean, st.se, g.n[0], g.n[g.nn - 1]);
        CHECK(k == g.seeds && st.mean > K_SE * st.se && st.mean > 0);
    }
    snprintf(path, sizeof path, "%s/README.md", dir);
    CHECK(file_has(path, "## Central DP: the exponential mechanism"));
    snprintf(path, sizeof path, "%s/verdicts.json", dir);
    CHECK(file_has(path, "central-excess") && file_has(path, "central-local"));
    snprintf(path, sizeof path, "%s/central_excess.svg", dir);
    CHECK(file_has(path, "</svg>"));
    lp_cstudy_clear(&c);
}

/* Pessimistic scores: one row per (eps, seed); the coverage of the bound
 * grows with Gamma in every row and reaches the nominal 95% at the default
 * Gamma (within K_SE SE) at every eps; the bound is wider along the poorly
 * covered features in every row; the report has the section and its plot. */
static void check_pessimism(const char *dir)
{
    char path[600], msg[512] = "";
    snprintf(path, sizeof path, "%s/pessimism.jsonl", dir);
    lp_pstudy p;
    CHECK_ERR(lp_pstudy_load(path, &p, msg, sizeof msg), LP_OK);
    lp_pstudy_grid grid;
    CHECK_ERR(lp_pstudy_grid_named("quick", &grid), LP_OK);
    CHECK_INT(p.n, (size_t)(grid.neps * grid.seeds));
    int def = -1, monotone = 1, wider = 1;
    for (int j = 0; j < grid.ngamma; j++)
        def = grid.gamma[j] == LP_CONF_DEFAULT_GAMMA ? j : def;
    CHECK(def > 0);
    for (size_t i = 0; i < p.n; i++) {
        for (int j = 1; j < p.rows[i].ngamma; j++)
            monotone &= p.rows[i].coverage[j] >= p.rows[i].coverage[j - 1];
        wider &= p.rows[i].width_poor > 3 * p.rows[i].width_good;
    }
    CHECK(monotone);
    CHECK(wider);
    for (int e = 0; e < grid.neps && def > 0; e++) {
        lp_study_stat c = lp_pstudy_coverage(&p, grid.eps[e], def);
        fprintf(stderr, "pessimism eps=%g: coverage at Gamma %g: %.4f +- %.4f\n", grid.eps[e],
                grid.gamma[def], c.mean, c.se);
        CHECK(c.count == (size_t)grid.seeds && c.mean + K_SE * c.se >= 0.95);
    }
    snprintf(path, sizeof path, "%s/README.md", dir);
    CHECK(file_has(path, "## Pessimistic scores"));
    CHECK(file_has(path, "| P | pessimistic scores"));
    snprintf(path, sizeof path, "%s/pessimism.svg", dir);
    check_record(file_has(path, "</svg>"), __FILE__, __LINE__, "%s is a complete SVG", path);
    lp_pstudy_clear(&p);
}

/* User level: one row per cell, seed and method; every fit has a finite
 * error and every AUP-RLHF release ran; AUP-RLHF's noise scales with tau ~
 * 1/sqrt(m) at a fixed batch (m = 1 and 4 in the quick grid: sigma halves,
 * within the 5% the features' norms move tau); the report's section, the
 * verdict and the plot are there. */
static void check_userlevel(const char *dir)
{
    char path[600], msg[512] = "";
    snprintf(path, sizeof path, "%s/userlevel.jsonl", dir);
    lp_ul_study u;
    CHECK_ERR(lp_ul_load(path, &u, msg, sizeof msg), LP_OK);
    lp_ul_grid g;
    CHECK_ERR(lp_ul_grid_named("quick", &g), LP_OK);
    CHECK_INT(u.n, (size_t)(g.seeds * 2 * (g.nm + g.nusers) * g.neps));
    double s1 = NAN, s4 = NAN;
    int finite = 1;
    for (size_t i = 0; i < u.n; i++) {
        const lp_ul_row *r = &u.rows[i];
        finite &= !r->refused && isfinite(r->error) && (!r->aup || r->steps_run > 0);
        if (r->aup && !r->annotators_part && r->seed == 0)
            *(r->m == 1 ? &s1 : &s4) = r->sigma;
    }
    CHECK(finite);
    fprintf(stderr, "userlevel: AUP-RLHF sigma %.4g at m = 1, %.4g at m = 4\n", s1, s4);
    CHECK(fabs(s4 / s1 - 0.5) < 0.025);
    snprintf(path, sizeof path, "%s/README.md", dir);
    CHECK(file_has(path, "## User-level privacy: randomized response at ε/m against AUP-RLHF"));
    snprintf(path, sizeof path, "%s/verdicts.json", dir);
    CHECK(file_has(path, "\"userlevel\""));
    snprintf(path, sizeof path, "%s/userlevel.svg", dir);
    CHECK(file_has(path, "</svg>"));
    lp_ul_clear(&u);
}

int main(void)
{
    const char *build = getenv("LDPREF_BUILD") ? getenv("LDPREF_BUILD") : "build";
    char dir[512], cmd[1024], msg[512] = "";
    snprintf(dir, sizeof dir, "%s/study-quick", build);
    snprintf(cmd, sizeof cmd,
             "BUILD='%s' QUICK=1 OUT='%s' tests/study/reproduce.sh > '%s/study-quick.log' 2>&1",
             build, dir, build);
    int rc = system(cmd);
    check_record(rc == 0, __FILE__, __LINE__, "%s exits 0 (got %d; see %s/study-quick.log)", cmd,
                 rc, build);
    if (rc != 0)
        return check_summary();
    char path[600];
    snprintf(path, sizeof path, "%s/sweep.jsonl", dir);
    CHECK_ERR(lp_study_load(path, &S, msg, sizeof msg), LP_OK);
    if (S == NULL)
        return check_summary();
    check_outputs(dir, build);
    check_claim1();
    check_claim2();
    check_claim3();
    check_claim4();
    check_paper002();
    check_ipo();
    check_eps01();
    check_orders();
    check_general(dir);
    check_central(dir);
    check_pessimism(dir);
    check_userlevel(dir);
    lp_study_free(S);
    return check_summary();
}
