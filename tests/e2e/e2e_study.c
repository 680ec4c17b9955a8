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
#include "check.h"
#include "error.h"
#include "gstudy.h"
#include "rr.h"
#include "study.h"

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
    for (int i = 1; i <= 4; i++) {
        char needle[32];
        snprintf(needle, sizeof needle, "## Claim %d", i);
        check_record(file_has(path, needle), __FILE__, __LINE__, "report has '%s'", needle);
    }
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
    check_general(dir);
    lp_study_free(S);
    return check_summary();
}
