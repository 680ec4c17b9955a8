/* sweep.c — grids of simulate/fit/evaluate runs. See sweep.h. */
#include "sweep.h"

#include "dataset.h"
#include "error.h"
#include "objective.h"
#include "rr.h"
#include "wire.h"

#include <jansson.h>
#include <math.h>
#include <pthread.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

void lp_sweep_opts_init(lp_sweep_opts *o)
{
    memset(o, 0, sizeof *o);
    o->d = 16;
    o->seeds = 5;
    o->margin_sd = 2.0;
    o->rmax = 3.0;
    o->bound_ratio = 3.0;
    o->max_iter = 500;
    o->K = 4;
    o->beta = 1.0;
    o->eval_pairs = 20000;
    o->eval_prompts = 4000;
    o->jobs = 2;
}

/* ---- grids -------------------------------------------------------------- */

/*
 * The built-in grids, one block per group of claims:
 *   privacy     claims 1-2: alpha = 0, n x eps, every loss
 *   corruption  claims 3-4: n fixed, eps x alpha x order x adversary
 *   paper002    paper 002's estimators on its bounded features (L = 1,
 *               ||theta*|| = 1, B = 1.5: its MLE regime is eps > 2LB = 3)
 *   ipo         IPO vs Square chi-PO, clean and under a backdoor
 *   eps-0.1     the privacy cost at eps = 0.1 (c = 20), against eps = 0.5
 *   order       the corruption term's scaling in alpha and c(eps) for CTL,
 *               LTC and CLC (the anti adversary, small alpha)
 */
static const char *const default_grid[] = {
    "privacy:n=2000,6325,20000,63246,200000;eps=0.5,1,2,inf;alpha=0;order=CTL;adv=flip;"
    "loss=square-chipo,chipo,rdpo,dpo,rr-mle",
    "corruption:n=20000;eps=0.5,1,2,inf;alpha=0,0.1,0.2,0.3,0.4;order=CTL,LTC;"
    "adv=flip,anti,backdoor;loss=square-chipo,chipo,rdpo,dpo,rr-mle",
    "paper002:n=5000,20000,80000;eps=0.5,1,2,3.5,5,8;features=unit;theta=1;bound=1.5;"
    "loss=rr-mle,rdpo,rr-sgd,rr-sgd-last",
    "ipo:n=20000,200000;eps=1,inf;alpha=0,0.2;order=CTL;adv=backdoor;loss=square-chipo,ipo",
    "eps-0.1:n=63246,200000,632456;eps=0.1,0.5;loss=square-chipo,rdpo,chipo",
    "order:n=100000;eps=0.5,1,2;alpha=0,0.01,0.02,0.04;order=CTL,LTC,CLC;adv=anti;"
    "loss=square-chipo,rdpo",
    NULL};
static const char *const quick_grid[] = {
    "privacy:n=2000,20000;eps=0.5,inf;alpha=0;order=CTL;adv=flip;"
    "loss=square-chipo,chipo,rdpo",
    "corruption:n=20000;eps=0.5;alpha=0.1,0.3;order=CTL,LTC;adv=flip,backdoor;"
    "loss=square-chipo,chipo,rdpo",
    "paper002:n=5000,20000;eps=1,3.5,8;features=unit;theta=1;bound=1.5;"
    "loss=rr-mle,rr-sgd,rr-sgd-last",
    "ipo:n=20000;eps=1;alpha=0,0.2;order=CTL;adv=backdoor;loss=square-chipo,ipo",
    "eps-0.1:n=20000;eps=0.1,0.5;loss=square-chipo,rdpo",
    "order:n=20000;eps=0.5,2;alpha=0,0.04,0.08;order=CTL,LTC,CLC;adv=anti;loss=square-chipo",
    NULL};

int lp_sweep_grid_named(const char *name, lp_sweep_grid *g)
{
    const char *const *specs = strcmp(name, "default") == 0 ? default_grid
                               : strcmp(name, "quick") == 0 ? quick_grid
                                                            : NULL;
    if (specs == NULL)
        return LP_EINVALID_ARGUMENT;
    memset(g, 0, sizeof *g);
    for (; *specs; specs++)
        if (lp_sweep_block_parse(*specs, &g->block[g->nblocks++], NULL, 0) != LP_OK)
            return LP_EINVALID_ARGUMENT;
    return LP_OK;
}

/* Parses one comma list of values of key into b. */
static int parse_values(lp_sweep_block *b, const char *key, char *vals, char *msg, size_t msglen)
{
    int cnt = 0;
    for (char *save = NULL, *v = strtok_r(vals, ",", &save); v; v = strtok_r(NULL, ",", &save)) {
        if (cnt >= LP_SWEEP_MAX_VALUES)
            return lp_fail(LP_EINVALID_ARGUMENT, msg, msglen, "too many values for %s", key);
        char *end = NULL;
        int ok = 1;
        if (strcmp(key, "n") == 0) {
            unsigned long long x = strtoull(v, &end, 10);
            ok = *end == '\0' && x >= 2 && *v != '-';
            b->n[cnt] = (size_t)x;
        } else if (strcmp(key, "eps") == 0) {
            double x = strcmp(v, "inf") == 0 ? INFINITY : strtod(v, &end);
            ok = (end == NULL || *end == '\0') && x > 0;
            b->eps[cnt] = x;
        } else if (strcmp(key, "alpha") == 0) {
            double x = strtod(v, &end);
            ok = *end == '\0' && x >= 0 && x <= 0.5;
            b->alpha[cnt] = x;
        } else if (strcmp(key, "order") == 0) {
            ok = cnt < LP_ORDER_COUNT && lp_order_parse(v, &b->order[cnt]) == LP_OK;
            for (int k = 0; ok && k < cnt; k++)
                ok = b->order[k] != b->order[cnt]; /* each order once */
        } else if (strcmp(key, "adv") == 0) {
            ok = cnt < LP_ADV_COUNT && lp_adversary_parse(v, &b->adv[cnt]) == LP_OK;
        } else if (strcmp(key, "loss") == 0) {
            ok = cnt < LP_LOSS_COUNT && lp_loss_parse(v, &b->loss[cnt]) == LP_OK;
        } else {
            return lp_fail(LP_EINVALID_ARGUMENT, msg, msglen, "unknown key '%s'", key);
        }
        if (!ok)
            return lp_fail(LP_EINVALID_ARGUMENT, msg, msglen, "bad value '%s' for %s", v, key);
        cnt++;
    }
    if (cnt == 0)
        return lp_fail(LP_EINVALID_ARGUMENT, msg, msglen, "no values for %s", key);
    int *slot = strcmp(key, "n") == 0       ? &b->nn
                : strcmp(key, "eps") == 0   ? &b->neps
                : strcmp(key, "alpha") == 0 ? &b->nalpha
                : strcmp(key, "order") == 0 ? &b->norder
                : strcmp(key, "adv") == 0   ? &b->nadv
                                            : &b->nloss;
    *slot = cnt;
    return LP_OK;
}

int lp_sweep_block_parse(const char *spec, lp_sweep_block *b, char *msg, size_t msglen)
{
    memset(b, 0, sizeof *b);
    char buf[1024];
    const char *colon = strchr(spec, ':');
    if (strlen(spec) >= sizeof buf || colon == NULL || colon == spec ||
        (size_t)(colon - spec) >= sizeof b->name)
        return lp_fail(LP_EINVALID_ARGUMENT, msg, msglen, "a block is NAME:key=v,v;key=v,...");
    memcpy(b->name, spec, (size_t)(colon - spec));
    snprintf(buf, sizeof buf, "%s", colon + 1);
    for (char *save = NULL, *kv = strtok_r(buf, ";", &save); kv; kv = strtok_r(NULL, ";", &save)) {
        char *eq = strchr(kv, '=');
        if (eq == NULL)
            return lp_fail(LP_EINVALID_ARGUMENT, msg, msglen, "'%s' is not key=values", kv);
        *eq = '\0';
        if (strcmp(kv, "theta") == 0 || strcmp(kv, "bound") == 0) {
            char *end = NULL;
            double x = strtod(eq + 1, &end);
            if (*end != '\0' || !(x > 0) || isinf(x))
                return lp_fail(LP_EINVALID_ARGUMENT, msg, msglen, "bad value '%s' for %s", eq + 1,
                               kv);
            *(strcmp(kv, "theta") == 0 ? &b->theta_norm : &b->bound_ratio) = x;
            continue;
        }
        if (strcmp(kv, "features") == 0) {
            if (strcmp(eq + 1, "unit") != 0 && strcmp(eq + 1, "gauss") != 0)
                return lp_fail(LP_EINVALID_ARGUMENT, msg, msglen, "features must be gauss or unit");
            b->unit_features = strcmp(eq + 1, "unit") == 0;
            continue;
        }
        int rc = parse_values(b, kv, eq + 1, msg, msglen);
        if (rc != LP_OK)
            return rc;
    }
    if (b->nn == 0)
        b->n[b->nn++] = 20000;
    if (b->neps == 0)
        b->eps[b->neps++] = INFINITY;
    if (b->nalpha == 0)
        b->alpha[b->nalpha++] = 0.0;
    if (b->norder == 0)
        b->order[b->norder++] = LP_ORDER_CTL;
    if (b->nadv == 0)
        b->adv[b->nadv++] = LP_ADV_FLIP;
    if (b->nloss == 0)
        b->loss[b->nloss++] = LP_LOSS_SQUARE_CHIPO;
    return LP_OK;
}

/* ---- cells ---------------------------------------------------------------- */

/* One data set: a point of a block's cross product and a seed index. */
typedef struct cell {
    const lp_sweep_block *b;
    size_t n;
    double eps, alpha;
    lp_order order;
    lp_adversary adv;
    int seed;
} cell;

static size_t block_cells(const lp_sweep_block *b, int seeds)
{
    return (size_t)b->nn * b->neps * b->nalpha * b->norder * b->nadv * (size_t)seeds;
}

size_t lp_sweep_rows(const lp_sweep_grid *g, const lp_sweep_opts *o)
{
    size_t r = 0;
    for (int k = 0; k < g->nblocks; k++)
        r += block_cells(&g->block[k], o->seeds) * (size_t)g->block[k].nloss;
    return r;
}

/* Enumerates the cells in grid order (seed innermost). Caller frees. */
static cell *make_cells(const lp_sweep_grid *g, int seeds, size_t *count)
{
    size_t total = 0;
    for (int k = 0; k < g->nblocks; k++)
        total += block_cells(&g->block[k], seeds);
    cell *c = calloc(total ? total : 1, sizeof *c);
    if (c == NULL)
        return NULL;
    size_t i = 0;
    for (int k = 0; k < g->nblocks; k++) {
        const lp_sweep_block *b = &g->block[k];
        for (int a = 0; a < b->nn; a++)
            for (int e = 0; e < b->neps; e++)
                for (int l = 0; l < b->nalpha; l++)
                    for (int r = 0; r < b->norder; r++)
                        for (int v = 0; v < b->nadv; v++)
                            for (int s = 0; s < seeds; s++)
                                c[i++] = (cell){b,           b->n[a],   b->eps[e], b->alpha[l],
                                                b->order[r], b->adv[v], s};
    }
    *count = total;
    return c;
}

static double now_seconds(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* Paper 002's step constant 1/(gamma kappa) for rr-sgd-last (see sweep.h). */
static double paper002_step(size_t d, int unit_features, double B)
{
    double L = unit_features ? 1.0 : sqrt((double)d);
    double kappa = unit_features ? 2.0 / (double)d : 2.0;
    double gamma = 1.0 / (2.0 + exp(-2.0 * L * B) + exp(2.0 * L * B));
    return 1.0 / (gamma * kappa);
}

/*
 * Simulates cell c and fits every loss of its block into rows[0..nloss).
 * Single-threaded and deterministic. Returns 0 or an error code.
 */
static int run_cell(const cell *c, const lp_sweep_opts *o, lp_sweep_row *rows)
{
    size_t d = o->d;
    uint64_t seed = o->seed + (uint64_t)c->seed;
    double *ts = calloc(2 * d, sizeof *ts), *th = ts + d;
    if (ts == NULL)
        return LP_ENO_MEMORY;
    double margin_sd = c->b->theta_norm > 0 ? c->b->theta_norm * sqrt(2.0) : o->margin_sd;
    double bound_ratio = c->b->bound_ratio > 0 ? c->b->bound_ratio : o->bound_ratio;
    lp_sim_theta_star(d, margin_sd, seed, ts);
    double ts_norm = 0;
    for (size_t j = 0; j < d; j++)
        ts_norm += ts[j] * ts[j];
    ts_norm = sqrt(ts_norm);
    lp_sim_opts so;
    lp_sim_opts_init(&so);
    so.n = c->n;
    so.d = d;
    so.eps = c->eps;
    so.alpha = c->alpha;
    so.order = c->order;
    so.adv = c->adv;
    so.backdoor_k = o->backdoor_k;
    so.margin_sd = margin_sd;
    so.unit_features = c->b->unit_features;
    so.seed = seed;
    so.storage = LP_STORE_F64;
    lp_dataset *ds = NULL;
    int rc = lp_simulate(&so, ts, &ds);
    size_t flips = 0;
    for (size_t i = 0; rc == LP_OK && i < ds->n; i++)
        flips += ds->z[i] != (uint8_t)ds->y[i];
    for (int k = 0; rc == LP_OK && k < c->b->nloss; k++) {
        lp_sweep_row *r = &rows[k];
        memset(r, 0, sizeof *r);
        lp_loss_kind kind = c->b->loss[k];
        lp_objective_opts oo;
        lp_objective_opts_init(&oo, kind);
        oo.loss.rmax = o->rmax;
        oo.l2 = o->l2;
        oo.threads = 1;
        lp_fit_opts fo;
        lp_fit_opts_init(&fo, lp_loss_fit_method(kind));
        fo.max_iter = o->max_iter;
        fo.norm_bound = bound_ratio * ts_norm;
        fo.seed = seed;
        if (kind == LP_LOSS_RR_SGD_LAST)
            fo.lr = paper002_step(d, c->b->unit_features, fo.norm_bound);
        lp_fit_result fr;
        double t0 = now_seconds();
        lp_objective *ob = lp_objective_new(ds, &oo);
        memset(th, 0, d * sizeof *th);
        rc = ob ? lp_fit(ob, &fo, th, &fr) : LP_ENO_MEMORY;
        lp_objective_free(ob);
        r->fit_seconds = now_seconds() - t0;
        lp_eval_opts eo;
        lp_eval_opts_init(&eo);
        eo.pairs = o->eval_pairs;
        eo.prompts = o->eval_prompts;
        eo.K = o->K;
        eo.beta = o->beta;
        eo.link = lp_loss_default_link(kind);
        eo.seed = seed;
        lp_eval_result ev;
        if (rc == LP_OK)
            rc = lp_evaluate_truth(th, ts, d, &eo, &ev);
        if (rc != LP_OK)
            break;
        snprintf(r->block, sizeof r->block, "%s", c->b->name);
        r->n = c->n;
        r->d = d;
        r->K = o->K;
        r->seed = c->seed;
        r->beta = o->beta;
        r->eps = c->eps;
        r->c_eps = lp_rr_debias(c->eps);
        r->alpha = c->alpha;
        r->order = c->order;
        r->adv = c->adv;
        r->loss = kind;
        r->link = eo.link;
        r->unit_features = c->b->unit_features;
        r->lr = fo.method == LP_OPT_LBFGS ? NAN : fo.lr;
        r->rmax = o->rmax;
        r->l2 = o->l2;
        r->norm_bound = fo.norm_bound;
        r->flip_rate = (double)flips / (double)c->n;
        r->accuracy = ev.accuracy;
        r->cosine = ev.cosine;
        r->norm_ratio = ev.norm_ratio;
        double e2 = 0;
        for (size_t j = 0; j < d; j++)
            e2 += (th[j] - ts[j]) * (th[j] - ts[j]);
        r->est_error = sqrt(e2) / ts_norm;
        r->suboptimality = ev.suboptimality;
        r->j_star = ev.j_star;
        r->j_hat = ev.j_hat;
        r->objective = fr.objective;
        r->grad_norm = fr.grad_norm;
        r->theta_norm = fr.theta_norm;
        r->iterations = fr.iterations;
        r->evaluations = fr.evaluations;
        r->bound_active = fr.bound_active;
        r->converged = fr.converged;
        snprintf(r->status, sizeof r->status, "%s", fr.status);
    }
    lp_dataset_free(ds);
    free(ts);
    return rc;
}

/* ---- the worker pool -------------------------------------------------------- */

typedef struct pool {
    const lp_sweep_opts *o;
    const cell *cells;
    size_t ncells, next_take;
    lp_sweep_row **rows; /* per cell, nloss rows; NULL until done */
    int rc;
    pthread_mutex_t mu;
    pthread_cond_t done;
} pool;

static void *worker(void *arg)
{
    pool *p = arg;
    for (;;) {
        pthread_mutex_lock(&p->mu);
        size_t i = p->next_take++;
        int stop = p->rc != LP_OK || i >= p->ncells;
        pthread_mutex_unlock(&p->mu);
        if (stop)
            return NULL;
        const cell *c = &p->cells[i];
        lp_sweep_row *rows = calloc((size_t)c->b->nloss, sizeof *rows);
        int rc = rows ? run_cell(c, p->o, rows) : LP_ENO_MEMORY;
        pthread_mutex_lock(&p->mu);
        if (rc != LP_OK) {
            free(rows);
            if (p->rc == LP_OK)
                p->rc = rc;
        } else {
            p->rows[i] = rows;
        }
        pthread_cond_broadcast(&p->done);
        pthread_mutex_unlock(&p->mu);
    }
}

static int check_opts(const lp_sweep_grid *g, const lp_sweep_opts *o, char *msg, size_t msglen)
{
    if (g->nblocks < 1 || o->d < 1 || o->seeds < 1 || o->K < 2 || !(o->margin_sd > 0) ||
        !(o->rmax > 0) || !(o->l2 >= 0) || !(o->bound_ratio > 0) || o->max_iter < 1 ||
        !(o->beta > 0) || isinf(o->beta) || o->eval_pairs < 1 || o->eval_prompts < 1 ||
        o->jobs < 1 || o->jobs > 256)
        return lp_fail(LP_EINVALID_ARGUMENT, msg, msglen,
                       "need a block, d, seeds >= 1, K >= 2, margin-sd, rmax, bound-ratio, "
                       "finite beta > 0, l2 >= 0, eval pairs/prompts >= 1, 1 <= jobs <= 256");
    for (int k = 0; k < g->nblocks; k++)
        for (int v = 0; v < g->block[k].nadv; v++)
            if (g->block[k].adv[v] == LP_ADV_BACKDOOR && o->backdoor_k >= o->d)
                return lp_fail(LP_EINVALID_ARGUMENT, msg, msglen, "backdoor-k must be < d");
    return LP_OK;
}

int lp_sweep_run(const lp_sweep_grid *g, const lp_sweep_opts *o, lp_sweep_sink sink, void *ctx,
                 char *msg, size_t msglen)
{
    int rc = check_opts(g, o, msg, msglen);
    if (rc != LP_OK)
        return rc;
    pool p = {.o = o};
    p.cells = make_cells(g, o->seeds, &p.ncells);
    p.rows = calloc(p.ncells ? p.ncells : 1, sizeof *p.rows);
    pthread_t *tid = calloc((size_t)o->jobs, sizeof *tid);
    if (p.cells == NULL || p.rows == NULL || tid == NULL) {
        free((void *)p.cells);
        free(p.rows);
        free(tid);
        return lp_fail(LP_ENO_MEMORY, msg, msglen, "out of memory");
    }
    pthread_mutex_init(&p.mu, NULL);
    pthread_cond_init(&p.done, NULL);
    int started = 0;
    while (started < o->jobs && pthread_create(&tid[started], NULL, worker, &p) == 0)
        started++;
    if (started == 0)
        p.rc = LP_ENO_MEMORY;
    double t0 = now_seconds(), last = t0;
    size_t emitted = 0;
    /* Emit cells in order as they complete. */
    for (size_t i = 0; i < p.ncells && p.rc == LP_OK; i++) {
        pthread_mutex_lock(&p.mu);
        while (p.rows[i] == NULL && p.rc == LP_OK)
            pthread_cond_wait(&p.done, &p.mu);
        lp_sweep_row *rows = p.rows[i];
        pthread_mutex_unlock(&p.mu);
        if (rows == NULL)
            break;
        for (int k = 0; k < p.cells[i].b->nloss && rc == LP_OK; k++, emitted++)
            rc = sink(ctx, &rows[k]);
        free(rows);
        p.rows[i] = NULL;
        if (rc != LP_OK) {
            pthread_mutex_lock(&p.mu);
            p.rc = rc;
            pthread_mutex_unlock(&p.mu);
        }
        double t = now_seconds();
        if (o->progress && (t - last > 2.0 || i + 1 == p.ncells)) {
            fprintf(stderr, "sweep: %zu/%zu data sets, %zu rows, %.0f s\n", i + 1, p.ncells,
                    emitted, t - t0);
            last = t;
        }
    }
    for (int k = 0; k < started; k++)
        pthread_join(tid[k], NULL);
    if (rc == LP_OK && p.rc != LP_OK)
        rc = lp_fail(p.rc, msg, msglen, "a fit or evaluation failed");
    for (size_t i = 0; i < p.ncells; i++)
        free(p.rows[i]);
    pthread_mutex_destroy(&p.mu);
    pthread_cond_destroy(&p.done);
    free((void *)p.cells);
    free(p.rows);
    free(tid);
    return rc;
}

/* ---- rows as JSON ------------------------------------------------------------ */

static void put_num(FILE *f, const char *key, double v)
{
    if (isfinite(v))
        fprintf(f, ",\"%s\":%.17g", key, v);
    else
        fprintf(f, ",\"%s\":null", key);
}

int lp_sweep_row_write(FILE *f, const lp_sweep_row *r)
{
    fprintf(f, "{\"block\":\"%s\"", r->block);
    fprintf(f, ",\"n\":%zu,\"d\":%zu", r->n, r->d);
    put_num(f, "eps", r->eps);
    put_num(f, "c_eps", r->c_eps);
    put_num(f, "alpha", r->alpha);
    fprintf(f, ",\"order\":\"%s\",\"adversary\":\"%s\",\"loss\":\"%s\",\"link\":\"%s\"",
            lp_order_name(r->order), lp_adversary_name(r->adv), lp_loss_name(r->loss),
            r->link == LP_LINK_KL ? "kl" : "chimix");
    fprintf(f, ",\"features\":\"%s\"", r->unit_features ? "unit" : "gauss");
    fprintf(f, ",\"seed\":%d,\"K\":%d", r->seed, r->K);
    put_num(f, "beta", r->beta);
    put_num(f, "rmax", r->rmax);
    put_num(f, "l2", r->l2);
    put_num(f, "norm_bound", r->norm_bound);
    put_num(f, "lr", r->lr);
    put_num(f, "flip_rate", r->flip_rate);
    put_num(f, "accuracy", r->accuracy);
    put_num(f, "cosine", r->cosine);
    put_num(f, "norm_ratio", r->norm_ratio);
    put_num(f, "est_error", r->est_error);
    put_num(f, "suboptimality", r->suboptimality);
    put_num(f, "j_star", r->j_star);
    put_num(f, "j_hat", r->j_hat);
    put_num(f, "objective", r->objective);
    put_num(f, "grad_norm", r->grad_norm);
    put_num(f, "theta_norm", r->theta_norm);
    fprintf(f, ",\"iterations\":%d,\"evaluations\":%d,\"bound_active\":%s,\"converged\":%s",
            r->iterations, r->evaluations, r->bound_active ? "true" : "false",
            r->converged ? "true" : "false");
    fprintf(f, ",\"status\":\"%s\"", r->status);
    fprintf(f, ",\"fit_seconds\":%.4f}\n", r->fit_seconds);
    return ferror(f) ? LP_EIO : LP_OK;
}

/* Numbers and nulls (null = +inf for eps, NAN otherwise). */
static double get_num(const json_t *o, const char *key, double if_null)
{
    const json_t *v = json_object_get(o, key);
    return json_is_number(v) ? json_number_value(v) : if_null;
}

int lp_sweep_row_parse(const char *line, lp_sweep_row *r, char *msg, size_t msglen)
{
    json_error_t err;
    json_t *o = json_loads(line, 0, &err);
    if (!json_is_object(o)) {
        json_decref(o);
        return lp_fail(LP_EMALFORMED_JSON, msg, msglen, "%s", o ? "not an object" : err.text);
    }
    memset(r, 0, sizeof *r);
    const char *blk = json_string_value(json_object_get(o, "block"));
    const char *ord = json_string_value(json_object_get(o, "order"));
    const char *adv = json_string_value(json_object_get(o, "adversary"));
    const char *loss = json_string_value(json_object_get(o, "loss"));
    const char *link = json_string_value(json_object_get(o, "link"));
    const char *st = json_string_value(json_object_get(o, "status"));
    int rc = LP_OK;
    if (!blk || !ord || !adv || !loss || !link || !st ||
        !json_is_integer(json_object_get(o, "n")) || lp_order_parse(ord, &r->order) ||
        lp_adversary_parse(adv, &r->adv) || lp_loss_parse(loss, &r->loss))
        rc = lp_fail(LP_EMISSING_FIELD, msg, msglen, "not a sweep row");
    if (rc == LP_OK) {
        snprintf(r->block, sizeof r->block, "%s", blk);
        snprintf(r->status, sizeof r->status, "%s", st);
        r->link = strcmp(link, "kl") == 0 ? LP_LINK_KL : LP_LINK_CHIMIX;
        const char *feat = json_string_value(json_object_get(o, "features"));
        r->unit_features = feat != NULL && strcmp(feat, "unit") == 0;
        r->lr = get_num(o, "lr", NAN);
        r->n = (size_t)get_num(o, "n", 0);
        r->d = (size_t)get_num(o, "d", 0);
        r->eps = get_num(o, "eps", INFINITY);
        r->c_eps = get_num(o, "c_eps", NAN);
        r->alpha = get_num(o, "alpha", NAN);
        r->seed = (int)get_num(o, "seed", -1);
        r->K = (int)get_num(o, "K", 0);
        r->beta = get_num(o, "beta", NAN);
        r->rmax = get_num(o, "rmax", INFINITY);
        r->l2 = get_num(o, "l2", NAN);
        r->norm_bound = get_num(o, "norm_bound", INFINITY);
        r->flip_rate = get_num(o, "flip_rate", NAN);
        r->accuracy = get_num(o, "accuracy", NAN);
        r->cosine = get_num(o, "cosine", NAN);
        r->norm_ratio = get_num(o, "norm_ratio", NAN);
        r->est_error = get_num(o, "est_error", NAN);
        r->suboptimality = get_num(o, "suboptimality", NAN);
        r->j_star = get_num(o, "j_star", NAN);
        r->j_hat = get_num(o, "j_hat", NAN);
        r->objective = get_num(o, "objective", NAN);
        r->grad_norm = get_num(o, "grad_norm", NAN);
        r->theta_norm = get_num(o, "theta_norm", NAN);
        r->iterations = (int)get_num(o, "iterations", 0);
        r->evaluations = (int)get_num(o, "evaluations", 0);
        r->bound_active = json_is_true(json_object_get(o, "bound_active"));
        r->converged = json_is_true(json_object_get(o, "converged"));
        r->fit_seconds = get_num(o, "fit_seconds", NAN);
    }
    json_decref(o);
    return rc;
}

double lp_sweep_row_metric(const lp_sweep_row *r, const char *key)
{
    static const struct {
        const char *key;
        size_t off;
    } dbl[] = {
#define F(k) {#k, offsetof(lp_sweep_row, k)}
        F(beta),   F(eps),        F(c_eps),     F(alpha),         F(rmax),
        F(l2),     F(norm_bound), F(lr),        F(flip_rate),     F(accuracy),
        F(cosine), F(norm_ratio), F(est_error), F(suboptimality), F(j_star),
        F(j_hat),  F(objective),  F(grad_norm), F(theta_norm),    F(fit_seconds),
#undef F
    };
    for (size_t i = 0; i < sizeof dbl / sizeof dbl[0]; i++)
        if (strcmp(key, dbl[i].key) == 0)
            return *(const double *)((const char *)r + dbl[i].off);
    if (strcmp(key, "n") == 0)
        return (double)r->n;
    if (strcmp(key, "d") == 0)
        return (double)r->d;
    if (strcmp(key, "seed") == 0)
        return r->seed;
    if (strcmp(key, "iterations") == 0)
        return r->iterations;
    if (strcmp(key, "bound_active") == 0)
        return r->bound_active;
    if (strcmp(key, "converged") == 0)
        return r->converged;
    return NAN;
}
