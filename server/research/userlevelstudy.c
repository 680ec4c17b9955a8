/* userlevelstudy.c — user-level privacy: randomized response at eps/m per
 * label against AUP-RLHF. See userlevelstudy.h. */
#include "userlevelstudy.h"

#include "aup.h"
#include "error.h"
#include "model.h"
#include "prng.h"
#include "rr.h"
#include "simulate.h"
#include "wire.h"

#include <jansson.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

/* The rule's margins, fixed before the run: a difference counts when it
 * exceeds LP_STUDY_K_SE standard errors and this much relative error. */
#define UL_MARGIN 0.05
#define UL_RMAX 2.0   /* both methods' Square chi-PO clip at 4: no true margin is clipped */
#define UL_BOUND 3.0  /* both methods' norm bound on theta (||theta*|| = sqrt 2) */
#define UL_TARGET 0.5 /* the target relative error of the annotators part */

int lp_ul_grid_named(const char *name, lp_ul_grid *g)
{
    memset(g, 0, sizeof *g);
    g->d = 8;
    g->delta = 1e-5;
    g->lr = 1.0;
    if (strcmp(name, "quick") == 0) {
        g->eps[0] = 8;
        g->neps = 1;
        g->total = 6000;
        size_t m[] = {1, 4};
        memcpy(g->m, m, sizeof m);
        g->nm = 2;
        g->users_m = 4;
        size_t u[] = {600, 1500};
        memcpy(g->users, u, sizeof u);
        g->nusers = 2;
        g->seeds = 2;
        g->steps = 20;
        g->batch = 800;
        return LP_OK;
    }
    if (strcmp(name, "default") != 0)
        return LP_EINVALID_ARGUMENT;
    g->eps[0] = 3;
    g->eps[1] = 8;
    g->neps = 2;
    g->total = 24000;
    size_t m[] = {1, 2, 4, 8, 16};
    memcpy(g->m, m, sizeof m);
    g->nm = 5;
    g->users_m = 8;
    size_t u[] = {1500, 3000, 6000, 12000};
    memcpy(g->users, u, sizeof u);
    g->nusers = 4;
    g->seeds = 5;
    g->steps = 20;
    g->batch = 6000;
    return LP_OK;
}

static double rel_error(const double *th, const double *ts, size_t d, double *cosine)
{
    double e = 0, t = 0, ab = 0, aa = 0;
    for (size_t j = 0; j < d; j++) {
        e += (th[j] - ts[j]) * (th[j] - ts[j]);
        t += ts[j] * ts[j];
        ab += th[j] * ts[j];
        aa += th[j] * th[j];
    }
    *cosine = aa > 0 ? ab / sqrt(aa * t) : 0;
    return sqrt(e / t);
}

/* One cell: both methods on data of n annotators x m labels. */
static int run_cell(const lp_ul_grid *g, int part, double eps, size_t m, size_t n, int seed,
                    FILE *out, char *msg, size_t msglen)
{
    double *ts = malloc(g->d * sizeof *ts);
    if (ts == NULL)
        return lp_fail(LP_ENO_MEMORY, msg, msglen, "out of memory");
    uint64_t s = 0x75736572ULL * 1000 + (uint64_t)seed; /* "user" */
    lp_sim_theta_star(g->d, 2.0, s, ts);
    int rc = LP_OK;
    for (int aup = 0; aup < 2 && rc == LP_OK; aup++) {
        lp_sim_opts so;
        lp_sim_opts_init(&so);
        so.n = n * m;
        so.d = g->d;
        so.unit_features = 1;
        so.user_labels = m;
        so.seed = s;
        so.eps = aup ? INFINITY : eps / (double)m;
        lp_dataset *ds = NULL;
        if ((rc = lp_simulate(&so, ts, &ds)) != LP_OK) {
            lp_fail(rc, msg, msglen, "simulation failed");
            break;
        }
        lp_ul_row r = {.annotators_part = part,
                       .aup = aup,
                       .eps = eps,
                       .m = m,
                       .n = n,
                       .seed = seed,
                       .sigma = NAN,
                       .error = NAN,
                       .cosine = NAN};
        lp_model *mod = NULL;
        if (aup) {
            lp_prng pg;
            lp_prng_seed(&pg, s ^ 0x617570ULL);
            lp_aup_opts o;
            lp_aup_opts_init(&o);
            o.epsilon = eps;
            o.delta = g->delta;
            o.user_cap = m;
            o.loss.rmax = UL_RMAX;
            o.norm_bound = UL_BOUND;
            o.steps = g->steps;
            o.lr = g->lr;
            o.batch = g->batch;
            o.rand64 = lp_prng_next64;
            o.rand_state = &pg;
            char m2[256];
            rc = lp_aup_release(ds, ds->user, &o, &mod, m2, sizeof m2);
            if (rc == LP_EINVALID_ARGUMENT) { /* too few annotators: a refused cell */
                r.refused = 1;
                rc = LP_OK;
            }
        } else {
            lp_objective_opts oo;
            lp_objective_opts_init(&oo, LP_LOSS_SQUARE_CHIPO);
            oo.loss.rmax = UL_RMAX;
            oo.l2 = 0;
            oo.threads = 1;
            lp_fit_opts fo;
            lp_fit_opts_init(&fo, LP_OPT_LBFGS);
            fo.norm_bound = UL_BOUND;
            rc = lp_model_fit(ds, &oo, &fo, 1.0, &mod);
        }
        if (rc == LP_OK && mod != NULL) {
            r.error = rel_error(mod->theta, ts, g->d, &r.cosine);
            if (aup) {
                r.sigma = json_number_value(json_object_get(mod->release, "sigma"));
                r.steps_run = (int)json_integer_value(json_object_get(mod->release, "steps_run"));
            }
        } else if (rc != LP_OK)
            lp_fail(rc, msg, msglen, "%s failed", aup ? "aup release" : "fit");
        if (rc == LP_OK) {
            json_t *j = json_pack(
                "{s:s, s:s, s:f, s:I, s:I, s:i, s:b, s:o, s:o, s:o, s:i}", "part",
                part ? "annotators" : "fixed_total", "method", aup ? "aup" : "rr", "eps", eps, "m",
                (json_int_t)m, "n", (json_int_t)n, "seed", seed, "refused", r.refused, "error",
                isfinite(r.error) ? json_real(r.error) : json_null(), "cosine",
                isfinite(r.cosine) ? json_real(r.cosine) : json_null(), "sigma",
                isfinite(r.sigma) ? json_real(r.sigma) : json_null(), "steps_run", r.steps_run);
            if (j == NULL || json_dumpf(j, out, JSON_COMPACT | JSON_REAL_PRECISION(10)) != 0)
                rc = lp_fail(LP_ENO_MEMORY, msg, msglen, "cannot write a row");
            fputc('\n', out);
            json_decref(j);
        }
        lp_model_free(mod);
        lp_dataset_free(ds);
    }
    free(ts);
    return rc;
}

int lp_ul_run(const lp_ul_grid *g, FILE *out, int progress, char *msg, size_t msglen)
{
    int rc = LP_OK;
    for (int e = 0; e < g->neps && rc == LP_OK; e++) {
        for (int k = 0; k < g->nm && rc == LP_OK; k++)
            for (int s = 0; s < g->seeds && rc == LP_OK; s++) {
                if (progress)
                    fprintf(stderr, "userlevel-study: eps %g, m %zu, seed %d\n", g->eps[e], g->m[k],
                            s);
                rc = run_cell(g, 0, g->eps[e], g->m[k], g->total / g->m[k], s, out, msg, msglen);
            }
        for (int k = 0; k < g->nusers && rc == LP_OK; k++)
            for (int s = 0; s < g->seeds && rc == LP_OK; s++) {
                if (progress)
                    fprintf(stderr, "userlevel-study: eps %g, n %zu, seed %d\n", g->eps[e],
                            g->users[k], s);
                rc = run_cell(g, 1, g->eps[e], g->users_m, g->users[k], s, out, msg, msglen);
            }
    }
    return rc;
}

int lp_ul_load(const char *path, lp_ul_study *out, char *msg, size_t msglen)
{
    memset(out, 0, sizeof *out);
    FILE *f = fopen(path, "r");
    if (f == NULL)
        return lp_fail(LP_EIO, msg, msglen, "cannot open %s", path);
    char *line = NULL;
    size_t cap = 0, lineno = 0, rcap = 0;
    int rc = LP_OK;
    while (rc == LP_OK && getline(&line, &cap, f) >= 0) {
        lineno++;
        json_error_t err;
        json_t *o = json_loads(line, 0, &err);
        const char *part = NULL, *method = NULL;
        lp_ul_row r = {0};
        json_int_t m = 0, n = 0;
        int refused = 0;
        json_t *e = NULL, *c = NULL, *sg = NULL;
        if (o == NULL || json_unpack(o, "{s:s, s:s, s:F, s:I, s:I, s:i, s:b, s:o, s:o, s:o, s:i}",
                                     "part", &part, "method", &method, "eps", &r.eps, "m", &m, "n",
                                     &n, "seed", &r.seed, "refused", &refused, "error", &e,
                                     "cosine", &c, "sigma", &sg, "steps_run", &r.steps_run) != 0) {
            rc = lp_fail(LP_EMALFORMED_JSON, msg, msglen, "%s line %zu: not a userlevel-study row",
                         path, lineno);
            json_decref(o);
            break;
        }
        r.annotators_part = strcmp(part, "annotators") == 0;
        r.aup = strcmp(method, "aup") == 0;
        r.m = (size_t)m;
        r.n = (size_t)n;
        r.refused = refused;
        r.error = json_is_number(e) ? json_number_value(e) : NAN;
        r.cosine = json_is_number(c) ? json_number_value(c) : NAN;
        r.sigma = json_is_number(sg) ? json_number_value(sg) : NAN;
        json_decref(o);
        if (out->n == rcap) {
            size_t nc = rcap ? 2 * rcap : 64;
            lp_ul_row *nr = realloc(out->rows, nc * sizeof *nr);
            if (nr == NULL) {
                rc = lp_fail(LP_ENO_MEMORY, msg, msglen, "out of memory");
                break;
            }
            out->rows = nr;
            rcap = nc;
        }
        out->rows[out->n++] = r;
    }
    free(line);
    fclose(f);
    if (rc != LP_OK)
        lp_ul_clear(out);
    return rc;
}

void lp_ul_clear(lp_ul_study *s)
{
    free(s->rows);
    s->rows = NULL;
    s->n = 0;
}

/* Sorted distinct values: eps (what 0), m of part 0 (what 1), n of part 1
 * (what 2). */
static int distinct(const lp_ul_study *s, int what, double *out)
{
    int k = 0;
    for (size_t i = 0; i < s->n; i++) {
        const lp_ul_row *r = &s->rows[i];
        if ((what == 1 && r->annotators_part) || (what == 2 && !r->annotators_part))
            continue;
        double v = what == 0 ? r->eps : what == 1 ? (double)r->m : (double)r->n;
        int j = 0;
        while (j < k && out[j] != v)
            j++;
        if (j == k && k < LP_UL_MAX_VALUES)
            out[k++] = v;
    }
    for (int a = 1; a < k; a++)
        for (int b = a; b > 0 && out[b - 1] > out[b]; b--) {
            double t = out[b];
            out[b] = out[b - 1];
            out[b - 1] = t;
        }
    return k;
}

static int matches(const lp_ul_row *r, int part, int aup, double eps, double x)
{
    return r->annotators_part == part && r->aup == aup && r->eps == eps &&
           (part ? (double)r->n : (double)r->m) == x;
}

/* Mean, sample sd and standard error from a sum, a sum of squares and a count. */
static lp_study_stat stat_from(double sum, double sq, size_t k)
{
    lp_study_stat st = {.count = k, .mean = NAN, .sd = NAN, .se = NAN};
    if (k > 0) {
        st.mean = sum / k;
        st.sd = k > 1 ? sqrt(fmax(0, (sq - k * st.mean * st.mean) / (k - 1))) : 0;
        st.se = st.sd / sqrt((double)k);
    }
    return st;
}

/* A method's error over seeds (refused rows excluded; *refused counts them). */
static lp_study_stat error_stat(const lp_ul_study *s, int part, int aup, double eps, double x,
                                int *refused)
{
    double sum = 0, sq = 0;
    size_t k = 0;
    int rf = 0;
    for (size_t i = 0; i < s->n; i++) {
        const lp_ul_row *r = &s->rows[i];
        if (!matches(r, part, aup, eps, x))
            continue;
        if (r->refused || !isfinite(r->error)) {
            rf++;
            continue;
        }
        sum += r->error;
        sq += r->error * r->error;
        k++;
    }
    if (refused)
        *refused = rf;
    return stat_from(sum, sq, k);
}

static double row_error(const lp_ul_study *s, int part, int aup, double eps, double x, int seed)
{
    for (size_t i = 0; i < s->n; i++) {
        const lp_ul_row *r = &s->rows[i];
        if (matches(r, part, aup, eps, x) && r->seed == seed && !r->refused)
            return r->error;
    }
    return NAN;
}

/* Paired by seed (part 0): error(aup_a, x_a) - error(aup_b, x_b). */
static lp_study_stat paired(const lp_ul_study *s, double eps, int aup_a, double x_a, int aup_b,
                            double x_b)
{
    double sum = 0, sq = 0;
    size_t k = 0;
    int maxseed = -1;
    for (size_t i = 0; i < s->n; i++)
        maxseed = s->rows[i].seed > maxseed ? s->rows[i].seed : maxseed;
    for (int seed = 0; seed <= maxseed; seed++) {
        double a = row_error(s, 0, aup_a, eps, x_a, seed),
               b = row_error(s, 0, aup_b, eps, x_b, seed);
        if (!isfinite(a) || !isfinite(b))
            continue;
        sum += a - b;
        sq += (a - b) * (a - b);
        k++;
    }
    return stat_from(sum, sq, k);
}

static int counts(lp_study_stat d)
{
    return d.count > 0 && d.mean > fmax(LP_STUDY_K_SE * d.se, UL_MARGIN);
}

/*
 * Rule (fixed before the run). At each eps, with m_lo and m_hi the smallest
 * and largest m at fixed N:
 *   (a) RR's error grows with m: error(RR, m_hi) - error(RR, m_lo), paired
 *       by seed, exceeds max(2 SE, 0.05);
 *   (b) AUP-RLHF's error grows less: error(AUP, m_hi)/error(AUP, m_lo) is
 *       below RR's ratio;
 *   (c) at m_hi AUP-RLHF beats RR: error(RR) - error(AUP), paired, exceeds
 *       max(2 SE, 0.05).
 * A refused AUP-RLHF cell (too few annotators) fails (b) and (c).
 * Supported: all three at every eps. Partly: (a) at every eps and (b) or
 * (c) at some eps. Not supported: otherwise.
 */
void lp_ul_verdict(const lp_ul_study *s, lp_study_verdict *v)
{
    memset(v, 0, sizeof *v);
    double E[LP_UL_MAX_VALUES], M[LP_UL_MAX_VALUES];
    int ne = distinct(s, 0, E), nm = distinct(s, 1, M);
    if (ne == 0 || nm < 2) {
        v->level = LP_VERDICT_NO_DATA;
        snprintf(v->text, sizeof v->text, "No data (need two or more m at fixed N).");
        return;
    }
    double lo = M[0], hi = M[nm - 1];
    int all_a = 1, all = 1, some_bc = 0;
    for (int e = 0; e < ne; e++) {
        lp_study_stat rr_growth = paired(s, E[e], 0, hi, 0, lo);
        lp_study_stat adv = paired(s, E[e], 0, hi, 1, hi);
        lp_study_stat r_lo = error_stat(s, 0, 0, E[e], lo, NULL),
                      r_hi = error_stat(s, 0, 0, E[e], hi, NULL);
        int rf_lo, rf_hi;
        lp_study_stat a_lo = error_stat(s, 0, 1, E[e], lo, &rf_lo),
                      a_hi = error_stat(s, 0, 1, E[e], hi, &rf_hi);
        double rr_ratio = r_hi.mean / r_lo.mean, aup_ratio = a_hi.mean / a_lo.mean;
        int a = counts(rr_growth);
        int b = !rf_lo && !rf_hi && a_lo.count && a_hi.count && aup_ratio < rr_ratio;
        int c = !rf_hi && counts(adv);
        all_a &= a;
        all &= a && b && c;
        some_bc |= b || c;
        lp_study_say(v,
                     "%sε = %g: RR's error %.3f at m = %g → %.3f at m = %g (paired growth %.3f ± "
                     "%.3f: %s); AUP-RLHF's %.3f → %.3f%s (ratio %.2f vs RR's %.2f: %s); at m = "
                     "%g RR − AUP-RLHF = %.3f ± %.3f (%s).",
                     e ? " " : "", E[e], r_lo.mean, lo, r_hi.mean, hi, rr_growth.mean, rr_growth.se,
                     a ? "grows" : "does not grow by the margin", a_lo.mean, a_hi.mean,
                     rf_hi ? " (refused at m_hi: too few annotators)" : "", aup_ratio, rr_ratio,
                     b ? "grows less" : "does not grow less", hi, adv.mean, adv.se,
                     c ? "AUP-RLHF better" : "AUP-RLHF not better by the margin");
    }
    v->level = all                ? LP_VERDICT_SUPPORTED
               : all_a && some_bc ? LP_VERDICT_PARTLY
                                  : LP_VERDICT_NOT_SUPPORTED;
}

/* Smallest n of part 1 whose mean error is at most target ("> max" if none). */
static void needed(const lp_ul_study *s, double eps, int aup, double target, char *buf, size_t len)
{
    double N[LP_UL_MAX_VALUES];
    int nn = distinct(s, 2, N);
    for (int i = 0; i < nn; i++) {
        lp_study_stat st = error_stat(s, 1, aup, eps, N[i], NULL);
        if (st.count && st.mean <= target) {
            snprintf(buf, len, "%g", N[i]);
            return;
        }
    }
    snprintf(buf, len, nn ? "> %g" : "–", nn ? N[nn - 1] : 0);
}

static void gp_plot(const char *dir, const lp_ul_study *s)
{
    char path[1024];
    snprintf(path, sizeof path, "%s/gp/userlevel.gp", dir);
    FILE *f = fopen(path, "w");
    if (f == NULL)
        return;
    double E[LP_UL_MAX_VALUES], M[LP_UL_MAX_VALUES];
    int ne = distinct(s, 0, E), nm = distinct(s, 1, M);
    fprintf(f,
            "# userlevel.gp — generated by ldpref-train report; run from the results directory:\n"
            "#   gnuplot gp/userlevel.gp   (writes userlevel.svg)\n"
            "set terminal svg size 900,420 dynamic noenhanced font 'sans,13' background "
            "rgb 'white'\nset output 'userlevel.svg'\nset grid lc rgb '#dddddd'\n"
            "set key top left font 'sans,11' box\nset bars small\nset logscale xy\n"
            "set xlabel 'm (labels per annotator; n m fixed)'\n"
            "set ylabel '|theta - theta*| / |theta*|'\n"
            "set title 'User-level privacy: RR at eps/m vs AUP-RLHF'\n");
    const char *col[] = {"#d62728", "#1f77b4", "#2ca02c", "#9467bd"};
    for (int e = 0; e < ne; e++)
        for (int aup = 0; aup < 2; aup++) {
            fprintf(f, "$d%d%d << EOD\n", e, aup);
            for (int k = 0; k < nm; k++) {
                lp_study_stat st = error_stat(s, 0, aup, E[e], M[k], NULL);
                if (st.count)
                    fprintf(f, "%g %.6g %.6g\n", M[k], st.mean, st.sd);
            }
            fprintf(f, "EOD\n");
        }
    fprintf(f, "plot [%g:%g] ", nm ? M[0] / 1.3 : 0.5, nm ? M[nm - 1] * 1.3 : 2);
    for (int e = 0; e < ne; e++)
        for (int aup = 0; aup < 2; aup++)
            fprintf(f,
                    "%s$d%d%d u 1:2:3 w yerrorlines lw 2 pt 7 ps 0.6 dt %d lc rgb '%s' "
                    "title '%s, eps = %g'",
                    e || aup ? ", " : "", e, aup, aup ? 1 : 2, col[e % 4],
                    aup ? "AUP-RLHF" : "RR at eps/m", E[e]);
    fprintf(f, "\n");
    fclose(f);
}

int lp_ul_section(FILE *f, const char *dir, const lp_ul_study *s, const lp_study_verdict *v)
{
    double E[LP_UL_MAX_VALUES], M[LP_UL_MAX_VALUES], N[LP_UL_MAX_VALUES];
    int ne = distinct(s, 0, E), nm = distinct(s, 1, M), nn = distinct(s, 2, N);
    size_t total = 0, um = 0;
    for (size_t i = 0; i < s->n; i++) {
        if (!s->rows[i].annotators_part)
            total = s->rows[i].m * s->rows[i].n;
        else
            um = s->rows[i].m;
    }
    fprintf(f,
            "\n## User-level privacy: randomized response at ε/m against AUP-RLHF\n\n"
            "Paper 004 (\"Towards User-level Private RLHF\"): when each annotator contributes m "
            "labels, randomized response at ε/m per label has an error that grows with m at a "
            "fixed number of labels, and AUP-RLHF (user-level DP-SGD through a private mean "
            "oracle) does better.\n\n**Verdict: %s.** %s\n\n",
            lp_verdict_name(v->level), v->text);
    fprintf(f,
            "Relative error ‖θ̂ − θ*‖/‖θ*‖ at N = n·m = %zu labels (mean ± sd over seeds; "
            "AUP-RLHF's σ is its noise per coordinate per step):\n\n"
            "| ε | m | n | c(ε/m) | RR at ε/m | AUP-RLHF | AUP-RLHF σ |\n"
            "|---|---|---|---|---|---|---|\n",
            total);
    for (int e = 0; e < ne; e++)
        for (int k = 0; k < nm; k++) {
            int rf;
            lp_study_stat r = error_stat(s, 0, 0, E[e], M[k], NULL);
            lp_study_stat a = error_stat(s, 0, 1, E[e], M[k], &rf);
            double sg = NAN;
            for (size_t i = 0; i < s->n; i++)
                if (matches(&s->rows[i], 0, 1, E[e], M[k]) && isfinite(s->rows[i].sigma))
                    sg = s->rows[i].sigma;
            char ab[64];
            if (a.count)
                snprintf(ab, sizeof ab, "%.3f ± %.3f", a.mean, a.sd);
            else
                snprintf(ab, sizeof ab, "refused (too few annotators)");
            fprintf(f, "| %g | %g | %zu | %.2f | %.3f ± %.3f | %s | %.3g |\n", E[e], M[k],
                    total / (size_t)M[k], lp_rr_debias(E[e] / M[k]), r.mean, r.sd, ab, sg);
        }
    fprintf(f, "\n![error vs m](userlevel.svg)\n\n");
    if (nn > 0) {
        fprintf(f,
                "Annotators needed for a relative error of at most %.2f at m = %zu (the smallest n "
                "of {",
                UL_TARGET, um);
        for (int i = 0; i < nn; i++)
            fprintf(f, "%s%g", i ? ", " : "", N[i]);
        fprintf(f,
                "} whose mean error reaches it):\n\n| ε | RR at ε/m | AUP-RLHF |\n|---|---|---|\n");
        for (int e = 0; e < ne; e++) {
            char a[32], b[32];
            needed(s, E[e], 0, UL_TARGET, a, sizeof a);
            needed(s, E[e], 1, UL_TARGET, b, sizeof b);
            fprintf(f, "| %g | %s | %s |\n", E[e], a, b);
        }
    }
    fprintf(f,
            "\nSet-up: `server/research/userlevelstudy.c`: d = 8 unit-norm features, θ* with "
            "margin sd 2, each annotator m consecutive labels. RR: every label randomized at ε/m "
            "(an annotator's m labels are ε-DP by group privacy), Square χPO debiased with "
            "c(ε/m), L-BFGS, ‖θ‖ ≤ %g. AUP-RLHF: raw labels, (ε, δ = 1e-5) user-level, the "
            "calibration of docs/privacy-mechanisms.md, τ = 2G/√m, batches of at most the grid's "
            "batch size, the same loss and bound. Both clip margins at 2·%g (no true margin is "
            "clipped).\n\nRule (fixed before the run): at every ε, with m_lo and m_hi the "
            "smallest and largest m, (a) RR's error grows: the paired difference error(m_hi) − "
            "error(m_lo) exceeds max(%.0f SE, %.2f); (b) AUP-RLHF's ratio error(m_hi)/error(m_lo) "
            "is below RR's; (c) at m_hi the paired difference RR − AUP-RLHF exceeds max(%.0f SE, "
            "%.2f). A refused AUP-RLHF cell fails (b) and (c). Supported: all three at every ε; "
            "partly: (a) at every ε and (b) or (c) at some ε; not supported: otherwise.\n",
            UL_BOUND, UL_RMAX, LP_STUDY_K_SE, UL_MARGIN, LP_STUDY_K_SE, UL_MARGIN);
    gp_plot(dir, s);
    return LP_OK;
}
