/* retrain.c — background training runs, the served model, the scheduler.
 * See retrain.h. */
#include "retrain.h"

#include "campaigns.h"
#include "clock.h"
#include "error.h"
#include "model.h"
#include "objective.h"
#include "wire.h"

#include <math.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* ------------------------------------------------------------------ */
/* requests                                                            */

#define HYPER_MAX 1e6
#define L2_MAX 1e9
#define BOUND_MAX 1e9

typedef struct num_field {
    const char *name;
    double lo, hi; /* inclusive range (lo_open: lo excluded) */
    int lo_open, integer, nullable;
} num_field;

/* Reads an optional number field. *present tells whether it was given;
 * null gives INFINITY when nullable. */
static int get_number(const json_t *obj, const num_field *f, double *out, int *present, char *msg,
                      size_t msglen)
{
    const json_t *v = json_object_get(obj, f->name);
    *present = v != NULL;
    if (v == NULL)
        return LP_OK;
    if (json_is_null(v) && f->nullable) {
        *out = INFINITY;
        return LP_OK;
    }
    if (!json_is_number(v) || (f->integer && !json_is_integer(v)))
        return lp_fail(LP_EWRONG_TYPE, msg, msglen, "\"%s\" must be %s", f->name,
                       f->integer ? "an integer" : "a number");
    double x = json_number_value(v);
    if (!isfinite(x) || (f->lo_open ? !(x > f->lo) : !(x >= f->lo)) || !(x <= f->hi))
        return lp_fail(LP_EBAD_HYPERPARAMETER, msg, msglen, "\"%s\" must be in %s%g, %g]", f->name,
                       f->lo_open ? "(" : "[", f->lo, f->hi);
    *out = x;
    return LP_OK;
}

static int get_bool(const json_t *obj, const char *name, int *out, char *msg, size_t msglen)
{
    const json_t *v = json_object_get(obj, name);
    if (v == NULL)
        return LP_OK;
    if (!json_is_boolean(v))
        return lp_fail(LP_EWRONG_TYPE, msg, msglen, "\"%s\" must be true or false", name);
    *out = json_is_true(v);
    return LP_OK;
}

static int check_fields(const json_t *obj, const char *const *allowed, const char *where, char *msg,
                        size_t msglen)
{
    const char *key;
    const json_t *val;
    json_object_foreach((json_t *)obj, key, val)
    {
        int ok = 0;
        for (size_t k = 0; allowed[k] != NULL && !ok; k++)
            ok = strcmp(key, allowed[k]) == 0;
        if (!ok)
            return lp_fail(LP_EUNKNOWN_FIELD, msg, msglen, "unknown field \"%s\"%s", key, where);
    }
    return LP_OK;
}

static const char *const REQUEST_FIELDS[] = {
    "loss",     "campaign",   "cutoff",    "seed",     "beta",   "rmax", "tau",
    "l2",       "norm_bound", "optimizer", "max_iter", "epochs", "lr",   "batch",
    "features", "text",       "threads",   "activate", NULL};
static const char *const TEXT_FIELDS[] = {"dim", "bigrams", "cross_prompt", "length", NULL};

static int parse_text(const json_t *t, lp_feat_spec *spec, char *msg, size_t msglen)
{
    if (!json_is_object(t))
        return lp_fail(LP_EWRONG_TYPE, msg, msglen, "\"text\" must be an object");
    int rc = check_fields(t, TEXT_FIELDS, " in \"text\"", msg, msglen);
    double dim;
    int present;
    num_field f = {"dim", 1, LP_FEAT_HASH_MAX, 0, 1, 0};
    if (rc == LP_OK && (rc = get_number(t, &f, &dim, &present, msg, msglen)) == LP_OK && present)
        spec->hash_dim = (uint32_t)dim;
    if (rc == LP_OK)
        rc = get_bool(t, "bigrams", &spec->bigrams, msg, msglen);
    if (rc == LP_OK)
        rc = get_bool(t, "cross_prompt", &spec->cross_prompt, msg, msglen);
    if (rc == LP_OK)
        rc = get_bool(t, "length", &spec->length, msg, msglen);
    return rc;
}

static int parse_string_choice(const json_t *obj, const char *name, const char **out, char *msg,
                               size_t msglen)
{
    const json_t *v = json_object_get(obj, name);
    if (v == NULL)
        return LP_OK;
    if (!json_is_string(v))
        return lp_fail(LP_EWRONG_TYPE, msg, msglen, "\"%s\" must be a string", name);
    *out = json_string_value(v);
    return LP_OK;
}

int lp_train_request_parse(lp_store *s, const json_t *obj, int default_threads, lp_train_request *r,
                           char *msg, size_t msglen)
{
    memset(r, 0, sizeof *r);
    json_t *owned = NULL;
    if (obj == NULL)
        obj = owned = json_object();
    int rc = LP_OK;
    if (!json_is_object(obj)) {
        rc = lp_fail(LP_EWRONG_TYPE, msg, msglen, "the request must be a JSON object");
        goto out;
    }
    if ((rc = check_fields(obj, REQUEST_FIELDS, "", msg, msglen)) != LP_OK)
        goto out;
    const char *loss = "square-chipo", *optimizer = NULL, *features = "auto";
    if ((rc = parse_string_choice(obj, "loss", &loss, msg, msglen)) != LP_OK ||
        (rc = parse_string_choice(obj, "optimizer", &optimizer, msg, msglen)) != LP_OK ||
        (rc = parse_string_choice(obj, "features", &features, msg, msglen)) != LP_OK)
        goto out;
    lp_loss_kind kind;
    if (lp_loss_parse(loss, &kind) != LP_OK) {
        rc = lp_fail(LP_EUNKNOWN_LOSS, msg, msglen,
                     "unknown loss \"%.40s\" (square-chipo, chipo, dpo, rdpo, rr-mle, rr-sgd, ipo)",
                     loss);
        goto out;
    }
    lp_loss_spec_init(&r->loss, kind);
    lp_method method = kind == LP_LOSS_RR_SGD ? LP_OPT_SGD : LP_OPT_LBFGS;
    if (optimizer != NULL && lp_method_parse(optimizer, &method) != LP_OK) {
        rc = lp_fail(LP_EBAD_HYPERPARAMETER, msg, msglen,
                     "\"optimizer\" must be lbfgs, sgd or adam");
        goto out;
    }
    lp_fit_opts_init(&r->fit, method);
    r->beta = 1.0;
    r->threads = default_threads > 0 ? default_threads : 1;
    r->activate = 1;
    lp_feat_spec_init(&r->text);
    if (strcmp(features, "auto") == 0)
        r->features = LP_FEATURES_AUTO;
    else if (strcmp(features, "dense") == 0)
        r->features = LP_FEATURES_DENSE;
    else if (strcmp(features, "text") == 0)
        r->features = LP_FEATURES_TEXT;
    else {
        rc = lp_fail(LP_EBAD_HYPERPARAMETER, msg, msglen,
                     "\"features\" must be auto, dense or text");
        goto out;
    }

    const num_field F_CUTOFF = {"cutoff", 1, 9.2e18, 0, 1, 1},
                    F_SEED = {"seed", 0, 9007199254740992.0, 0, 1, 0},
                    F_BETA = {"beta", 0, HYPER_MAX, 1, 0, 0},
                    F_RMAX = {"rmax", 0, HYPER_MAX, 1, 0, 0},
                    F_TAU = {"tau", 0, HYPER_MAX, 1, 0, 0}, F_L2 = {"l2", 0, L2_MAX, 0, 0, 0},
                    F_BOUND = {"norm_bound", 0, BOUND_MAX, 1, 0, 1},
                    F_ITER = {"max_iter", 1, 100000, 0, 1, 0},
                    F_EPOCHS = {"epochs", 1, 1000, 0, 1, 0}, F_LR = {"lr", 0, 1e3, 1, 0, 0},
                    F_BATCH = {"batch", 1, 1000000, 0, 1, 0},
                    F_THREADS = {"threads", 1, 64, 0, 1, 0};
    struct {
        const num_field *f;
        double *dst;
    } nums[] = {{&F_BETA, &r->beta}, {&F_RMAX, &r->loss.rmax},       {&F_TAU, &r->loss.tau},
                {&F_L2, &r->l2},     {&F_BOUND, &r->fit.norm_bound}, {&F_LR, &r->fit.lr}};
    for (size_t k = 0; k < sizeof nums / sizeof nums[0]; k++) {
        int present;
        if ((rc = get_number(obj, nums[k].f, nums[k].dst, &present, msg, msglen)) != LP_OK)
            goto out;
    }
    struct {
        const num_field *f;
        double value;
    } ints[] = {{&F_CUTOFF, 0},
                {&F_SEED, 0},
                {&F_ITER, r->fit.max_iter},
                {&F_EPOCHS, r->fit.epochs},
                {&F_BATCH, r->fit.batch},
                {&F_THREADS, r->threads}};
    for (size_t k = 0; k < sizeof ints / sizeof ints[0]; k++) {
        int present;
        if ((rc = get_number(obj, ints[k].f, &ints[k].value, &present, msg, msglen)) != LP_OK)
            goto out;
    }
    r->cutoff = isinf(ints[0].value) ? 0 : (int64_t)ints[0].value;
    r->fit.seed = (uint64_t)ints[1].value;
    r->fit.max_iter = (int)ints[2].value;
    r->fit.epochs = (int)ints[3].value;
    r->fit.batch = (int)ints[4].value;
    r->threads = (int)ints[5].value;
    if ((rc = get_bool(obj, "activate", &r->activate, msg, msglen)) != LP_OK)
        goto out;
    const json_t *text = json_object_get(obj, "text");
    if (text != NULL && (rc = parse_text(text, &r->text, msg, msglen)) != LP_OK)
        goto out;
    const json_t *camp = json_object_get(obj, "campaign");
    if (camp != NULL && !json_is_null(camp)) {
        if (!json_is_string(camp)) {
            rc = lp_fail(LP_EWRONG_TYPE, msg, msglen, "\"campaign\" must be a string or null");
            goto out;
        }
        lp_campaign c;
        if ((rc = lp_store_campaign_by_name(s, json_string_value(camp), &c)) != LP_OK) {
            lp_fail(rc, msg, msglen, "no campaign \"%.64s\"", json_string_value(camp));
            goto out;
        }
        r->campaign = c.id;
        snprintf(r->campaign_name, sizeof r->campaign_name, "%s", c.name);
    }
out:
    json_decref(owned);
    return rc;
}

static json_t *num_or_null(double v)
{
    return isfinite(v) ? json_real(v) : json_null();
}

json_t *lp_train_request_json(const lp_train_request *r)
{
    const char *features = r->features == LP_FEATURES_DENSE  ? "dense"
                           : r->features == LP_FEATURES_TEXT ? "text"
                                                             : "auto";
    return json_pack("{s:s, s:o, s:o, s:I, s:f, s:f, s:f, s:f, s:o, s:s, s:i, s:i, s:f, s:i, "
                     "s:s, s:{s:I, s:b, s:b, s:b}, s:i, s:b}",
                     "loss", lp_loss_name(r->loss.kind), "campaign",
                     r->campaign ? json_string(r->campaign_name) : json_null(), "cutoff",
                     r->cutoff ? json_integer(r->cutoff) : json_null(), "seed",
                     (json_int_t)r->fit.seed, "beta", r->beta, "rmax", r->loss.rmax, "tau",
                     r->loss.tau, "l2", r->l2, "norm_bound", num_or_null(r->fit.norm_bound),
                     "optimizer", lp_method_name(r->fit.method), "max_iter", r->fit.max_iter,
                     "epochs", r->fit.epochs, "lr", r->fit.lr, "batch", r->fit.batch, "features",
                     features, "text", "dim", (json_int_t)r->text.hash_dim, "bigrams",
                     r->text.bigrams, "cross_prompt", r->text.cross_prompt, "length",
                     r->text.length, "threads", r->threads, "activate", r->activate);
}

/* ------------------------------------------------------------------ */
/* the learner                                                         */

struct lp_learner {
    lp_store *s;
    lp_learner_opts o;
    lp_serving serving;

    pthread_mutex_t lock; /* guards everything below */
    pthread_cond_t wake;  /* worker: a run was queued; scheduler: tick or stop */
    int stopping;
    int has_run; /* run/req hold the queued or active run */
    lp_run run;
    lp_train_request req;
    int64_t last_started_ms, last_cutoff; /* for the scheduler */
    lp_learner_stats stats;

    atomic_int cancel;      /* the active run should stop */
    uint64_t activity_seen; /* worker only: opts.activity at its last check */
    pthread_t worker, scheduler;
    int worker_started, scheduler_started;
};

static void set_status(lp_learner *l, lp_run_status st)
{
    pthread_mutex_lock(&l->lock);
    l->run.status = st;
    pthread_mutex_unlock(&l->lock);
}

/* Persists a copy of the active run (taken under the lock). */
static void persist_run(lp_learner *l)
{
    pthread_mutex_lock(&l->lock);
    lp_run copy = l->run;
    copy.request = NULL;
    pthread_mutex_unlock(&l->lock);
    if (lp_registry_run_update(l->s, &copy) != LP_OK)
        fprintf(stderr, "learner: cannot record run %lld\n", (long long)copy.id);
}

/*
 * Training yields to users. SCHED_IDLE alone is not enough: on machines
 * whose vCPUs share a physical core, a training thread on the idle vCPU
 * still halves the speed of request handling on the other. So between
 * steps (every L-BFGS iteration, every 4096 SGD steps, every 1024 snapshot
 * rows) the worker checks whether requests arrived on the latency-sensitive
 * routes since its last check; if none did it goes on at once, otherwise it
 * waits until a PAUSE_QUIET_MS window passes without one, or PAUSE_MAX_MS
 * at most, so that a run still finishes (slowly) under sustained load.
 */
#define PAUSE_QUIET_MS 5
#define PAUSE_MAX_MS 1000

static void yield_to_requests(void *ctx)
{
    lp_learner *l = ctx; /* activity_seen: the worker thread's own */
    if (l->o.activity == NULL)
        return;
    uint64_t now = l->o.activity(l->o.activity_ctx);
    for (int waited = 0;
         now != l->activity_seen && waited < PAUSE_MAX_MS && !atomic_load(&l->cancel);
         waited += PAUSE_QUIET_MS) {
        l->activity_seen = now;
        struct timespec ts = {0, PAUSE_QUIET_MS * 1000000L};
        nanosleep(&ts, NULL);
        now = l->o.activity(l->o.activity_ctx);
    }
    l->activity_seen = now;
}

static int on_progress(void *ctx, int iteration, int evaluations, double objective,
                       double grad_norm)
{
    lp_learner *l = ctx;
    yield_to_requests(l);
    pthread_mutex_lock(&l->lock);
    l->run.iterations = iteration;
    l->run.evaluations = evaluations;
    if (isfinite(objective)) {
        l->run.objective = objective;
        l->run.grad_norm = grad_norm;
    }
    pthread_mutex_unlock(&l->lock);
    return atomic_load(&l->cancel);
}

/* The settings in force for the request's campaigns, as stored JSON. */
static json_t *corruption_json(const lp_corruption *cs, size_t n, int64_t anti_version)
{
    json_t *arr = json_array();
    for (size_t k = 0; k < n; k++) {
        const lp_corruption *c = &cs[k];
        json_t *o =
            json_pack("{s:I, s:s, s:f, s:s, s:I, s:I, s:I}", "id", (json_int_t)c->id, "campaign",
                      c->campaign_name, "alpha", c->alpha, "strategy",
                      lp_adversary_name(c->strategy), "seed", (json_int_t)c->seed, "feature",
                      (json_int_t)c->feature, "created_at", (json_int_t)c->created_ms);
        if (c->strategy == LP_ADV_ANTI) /* the model consulted for tasks without a
                                            reference preference; null: none was served */
            json_object_set_new(o, "anti_model",
                                anti_version > 0 ? json_integer(anti_version) : json_null());
        json_array_append_new(arr, o);
    }
    return arr;
}

/* Fits the snapshot; *out gets the model (theta owned) or the error. */
static int fit_model(lp_learner *l, const lp_train_request *req, const lp_snapshot *sn,
                     lp_model **out, char *msg, size_t msglen)
{
    lp_objective_opts oo;
    lp_objective_opts_init(&oo, req->loss.kind);
    oo.loss = req->loss;
    oo.l2 = req->l2;
    oo.threads = req->threads;
    lp_fit_opts fo = req->fit;
    fo.progress = 0;
    fo.on_progress = on_progress;
    fo.progress_ctx = l;
    lp_model *m = NULL;
    int rc = lp_model_fit(sn->ds, &oo, &fo, req->beta, &m);
    if (rc == LP_ENO_MEMORY)
        return lp_fail(rc, msg, msglen, "out of memory");
    if (rc != LP_OK)
        return rc == LP_ECANCELLED ? lp_fail(rc, msg, msglen, "cancelled during training")
                                   : lp_fail(LP_ETRAINING_FAILED, msg, msglen,
                                             "the optimizer failed: %s", lp_error_name(rc));
    if (strcmp(m->res.status, "non_finite") == 0) {
        lp_model_free(m);
        return lp_fail(LP_ETRAINING_FAILED, msg, msglen,
                       "the objective is not finite (set a norm_bound or l2)");
    }
    pthread_mutex_lock(&l->lock); /* the run reports the fit's final figures */
    l->run.iterations = m->res.iterations;
    l->run.evaluations = m->res.evaluations;
    l->run.objective = m->res.objective;
    l->run.grad_norm = m->res.grad_norm;
    pthread_mutex_unlock(&l->lock);
    m->text = sn->mode == LP_FEATURES_TEXT;
    m->feat = req->text;
    snprintf(m->source, sizeof m->source, "ldpref-server labels <= %lld, campaign %s",
             (long long)sn->cutoff, req->campaign ? req->campaign_name : "*");
    *out = m;
    return LP_OK;
}

/* Runs the active run to its end. Returns the run's error (0: succeeded). */
static int execute(lp_learner *l, char *msg, size_t msglen)
{
    lp_train_request req = l->req; /* the worker's own copy; req is immutable while queued */
    set_status(l, LP_RUN_SNAPSHOT);
    persist_run(l);

    lp_corruption *cs = NULL;
    size_t ncs = 0;
    int rc = lp_registry_corruption_active(l->s, &cs, &ncs);
    if (rc != LP_OK)
        return lp_fail(rc, msg, msglen, "cannot read the corruption settings");
    if (req.campaign != 0) { /* only the trained campaign's settings are in force */
        size_t kept = 0;
        for (size_t k = 0; k < ncs; k++)
            if (cs[k].campaign == req.campaign)
                cs[kept++] = cs[k];
        ncs = kept;
    }
    lp_served *anti = NULL;
    for (size_t k = 0; k < ncs && anti == NULL; k++)
        if (cs[k].strategy == LP_ADV_ANTI)
            anti = lp_learner_served(l);
    lp_view_spec vs = {.campaign = req.campaign,
                       .cutoff = req.cutoff,
                       .features = req.features,
                       .text = req.text,
                       .settings = cs,
                       .n_settings = ncs,
                       .anti_model = anti,
                       .cancel = &l->cancel,
                       .pause = yield_to_requests,
                       .pause_ctx = l};
    lp_snapshot sn;
    rc = lp_snapshot_build(l->s, &vs, &sn, msg, msglen);
    int64_t anti_version = anti ? lp_served_version(anti) : 0;
    lp_served_unref(anti);
    if (rc != LP_OK) {
        free(cs);
        return rc;
    }
    pthread_mutex_lock(&l->lock);
    l->run.status = LP_RUN_TRAINING;
    l->run.cutoff = sn.cutoff;
    l->run.labels = (int64_t)sn.ds->n;
    l->last_cutoff = sn.cutoff;
    pthread_mutex_unlock(&l->lock);
    persist_run(l);

    int64_t t0 = lp_now_ms();
    lp_model *m = NULL;
    rc = fit_model(l, &req, &sn, &m, msg, msglen);
    int64_t duration = lp_now_ms() - t0;
    if (rc == LP_OK && atomic_load(&l->cancel))
        rc = lp_fail(LP_ECANCELLED, msg, msglen, "cancelled");
    json_t *corr = corruption_json(cs, ncs, anti_version);
    free(cs);
    if (rc != LP_OK) {
        json_decref(corr);
        lp_model_free(m);
        lp_snapshot_clear(&sn);
        return rc;
    }
    set_status(l, LP_RUN_STORING);
    persist_run(l);

    json_t *mj = lp_model_to_json(m);
    char *model_text = mj ? json_dumps(mj, LP_MODEL_JSON_FLAGS) : NULL;
    if (mj != NULL)
        json_object_del(mj, "theta");
    char *summary_text = mj ? json_dumps(mj, JSON_COMPACT | JSON_PRESERVE_ORDER) : NULL;
    char *corr_text = corr ? json_dumps(corr, JSON_COMPACT | JSON_PRESERVE_ORDER) : NULL;
    json_decref(mj);
    json_decref(corr);
    lp_model_record rec = {.run = l->run.id,
                           .campaign = req.campaign,
                           .cutoff = sn.cutoff,
                           .labels = (int64_t)sn.ds->n,
                           .duration_ms = duration,
                           .corruption = corr_text,
                           .summary = summary_text,
                           .model = model_text};
    snprintf(rec.loss, sizeof rec.loss, "%s", lp_loss_name(req.loss.kind));
    lp_model_free(m);
    lp_snapshot_clear(&sn);
    lp_served *sv = NULL;
    if (model_text == NULL || summary_text == NULL || corr_text == NULL)
        rc = lp_fail(LP_ENO_MEMORY, msg, msglen, "out of memory");
    /* Parse before storing, so an activated model is always servable. */
    if (rc == LP_OK)
        rc = lp_served_new(0, model_text, &sv, msg, msglen);
    if (rc == LP_OK && (rc = lp_registry_model_add(l->s, &rec, req.activate)) != LP_OK)
        lp_fail(rc, msg, msglen, "cannot store the model");
    if (rc == LP_OK) {
        lp_served_unref(sv);
        sv = NULL;
        rc = lp_served_new(rec.version, model_text, &sv, msg, msglen);
    }
    if (rc == LP_OK && req.activate)
        lp_serving_swap(&l->serving, sv);
    lp_served_unref(sv);
    free(model_text);
    free(summary_text);
    free(corr_text);
    if (rc == LP_OK) {
        pthread_mutex_lock(&l->lock);
        l->run.model_version = rec.version;
        l->stats.last_duration_s = (double)duration / 1000.0;
        pthread_mutex_unlock(&l->lock);
    }
    return rc;
}

/* Training uses only CPU time that request handling does not want. */
static void lower_priority(void)
{
#ifdef SCHED_IDLE
    struct sched_param p = {0};
    pthread_setschedparam(pthread_self(), SCHED_IDLE, &p);
#endif
}

static void *worker_main(void *arg)
{
    lp_learner *l = arg;
    lower_priority();
    pthread_mutex_lock(&l->lock);
    for (;;) {
        while (!l->stopping && !(l->has_run && l->run.status == LP_RUN_QUEUED))
            pthread_cond_wait(&l->wake, &l->lock);
        if (l->stopping)
            break;
        l->run.started_ms = lp_now_ms();
        l->last_started_ms = l->run.started_ms;
        pthread_mutex_unlock(&l->lock);

        char msg[256] = "";
        int rc = atomic_load(&l->cancel) ? lp_fail(LP_ECANCELLED, msg, sizeof msg, "cancelled")
                                         : execute(l, msg, sizeof msg);
        /* The final state is stored first and published second: once a
         * reader sees the run final, the next run may start. */
        pthread_mutex_lock(&l->lock);
        lp_run fin = l->run;
        fin.request = NULL;
        pthread_mutex_unlock(&l->lock);
        fin.finished_ms = lp_now_ms();
        fin.status = rc == LP_OK           ? LP_RUN_SUCCEEDED
                     : rc == LP_ECANCELLED ? LP_RUN_CANCELLED
                                           : LP_RUN_FAILED;
        fin.error = rc;
        snprintf(fin.message, sizeof fin.message, "%s", rc ? msg : "");
        if (lp_registry_run_update(l->s, &fin) != LP_OK)
            fprintf(stderr, "learner: cannot record run %lld\n", (long long)fin.id);
        if (rc != LP_OK && rc != LP_ECANCELLED)
            fprintf(stderr, "learner: run %lld failed: %s\n", (long long)fin.id, msg);
        pthread_mutex_lock(&l->lock);
        l->stats.runs[fin.status]++;
        l->stats.train_seconds_total += (double)(fin.finished_ms - fin.started_ms) / 1e3;
        lp_run_clear(&l->run);
        l->has_run = 0;
        atomic_store(&l->cancel, 0);
    }
    pthread_mutex_unlock(&l->lock);
    return NULL;
}

/* ---- scheduler ---- */

static void scheduler_tick(lp_learner *l)
{
    lp_schedule sc;
    if (lp_registry_schedule_get(l->s, &sc) != LP_OK)
        return;
    if (sc.interval_s <= 0 && sc.every_labels <= 0) {
        lp_schedule_clear(&sc);
        return;
    }
    json_t *obj = json_loads(sc.request, 0, NULL);
    lp_train_request req;
    char msg[256];
    int rc = lp_train_request_parse(l->s, obj, l->o.threads, &req, msg, sizeof msg);
    json_decref(obj);
    if (rc != LP_OK) {
        fprintf(stderr, "learner: the stored schedule's request is invalid: %s\n", msg);
        lp_schedule_clear(&sc);
        return;
    }
    int64_t newest = 0;
    lp_registry_max_label(l->s, req.campaign, &newest);
    pthread_mutex_lock(&l->lock);
    int busy = l->has_run;
    int64_t since_ms = lp_now_ms() - l->last_started_ms, last_cutoff = l->last_cutoff;
    pthread_mutex_unlock(&l->lock);
    const char *trigger = NULL;
    if (!busy && sc.interval_s > 0 && since_ms >= sc.interval_s * 1000)
        trigger = "interval";
    else if (!busy && sc.every_labels > 0 && newest - last_cutoff >= sc.every_labels)
        trigger = "labels";
    lp_schedule_clear(&sc);
    if (trigger != NULL) {
        lp_run run;
        if (lp_learner_start(l, &req, trigger, &run) == LP_OK)
            lp_run_clear(&run);
    }
}

static void *scheduler_main(void *arg)
{
    lp_learner *l = arg;
    pthread_mutex_lock(&l->lock);
    while (!l->stopping) {
        struct timespec until;
        clock_gettime(CLOCK_REALTIME, &until);
        int64_t ns = until.tv_nsec + (int64_t)l->o.poll_ms * 1000000;
        until.tv_sec += ns / 1000000000;
        until.tv_nsec = ns % 1000000000;
        pthread_cond_timedwait(&l->wake, &l->lock, &until);
        if (l->stopping)
            break;
        pthread_mutex_unlock(&l->lock);
        scheduler_tick(l);
        pthread_mutex_lock(&l->lock);
    }
    pthread_mutex_unlock(&l->lock);
    return NULL;
}

/* ---- public ---- */

int lp_learner_new(lp_store *s, const lp_learner_opts *o, lp_learner **out, char *err,
                   size_t errlen)
{
    *out = NULL;
    lp_learner *l = calloc(1, sizeof *l);
    if (l == NULL)
        return lp_fail(LP_ENO_MEMORY, err, errlen, "out of memory");
    l->s = s;
    l->o = *o;
    if (l->o.threads < 1)
        l->o.threads = 1;
    if (l->o.poll_ms <= 0)
        l->o.poll_ms = 1000;
    lp_serving_init(&l->serving);
    pthread_mutex_init(&l->lock, NULL);
    pthread_cond_init(&l->wake, NULL);
    atomic_init(&l->cancel, 0);
    l->stats.last_duration_s = NAN;
    l->last_started_ms = lp_now_ms();
    int rc = lp_registry_runs_interrupted(s);
    lp_run *runs = NULL;
    size_t n = 0;
    if (rc == LP_OK && (rc = lp_registry_run_list(s, 1, &runs, &n)) == LP_OK && n == 1)
        l->last_cutoff = runs[0].cutoff;
    for (size_t i = 0; i < n; i++)
        lp_run_clear(&runs[i]);
    free(runs);
    int64_t version = 0;
    if (rc == LP_OK)
        rc = lp_registry_active_version(s, &version);
    if (rc == LP_OK && version != 0) {
        lp_served *sv;
        char msg[256];
        if (lp_learner_model(l, version, &sv) == LP_OK) {
            lp_serving_swap(&l->serving, sv);
            lp_served_unref(sv);
        } else {
            snprintf(msg, sizeof msg, "model %lld cannot be loaded", (long long)version);
            fprintf(stderr, "learner: %s; serving nothing\n", msg);
        }
    }
    if (rc != LP_OK) {
        lp_learner_free(l);
        return lp_fail(rc, err, errlen, "cannot read the model registry");
    }
    l->worker_started = pthread_create(&l->worker, NULL, worker_main, l) == 0;
    if (o->scheduler)
        l->scheduler_started = pthread_create(&l->scheduler, NULL, scheduler_main, l) == 0;
    if (!l->worker_started || (o->scheduler && !l->scheduler_started)) {
        lp_learner_free(l);
        return lp_fail(LP_EINTERNAL, err, errlen, "cannot start the learner threads");
    }
    *out = l;
    return LP_OK;
}

void lp_learner_free(lp_learner *l)
{
    if (l == NULL)
        return;
    pthread_mutex_lock(&l->lock);
    l->stopping = 1;
    atomic_store(&l->cancel, 1);
    pthread_cond_broadcast(&l->wake);
    pthread_mutex_unlock(&l->lock);
    if (l->worker_started)
        pthread_join(l->worker, NULL);
    if (l->scheduler_started)
        pthread_join(l->scheduler, NULL);
    if (l->has_run) { /* queued but never started */
        l->run.status = LP_RUN_CANCELLED;
        l->run.error = LP_ECANCELLED;
        snprintf(l->run.message, sizeof l->run.message, "the server stopped");
        l->run.finished_ms = lp_now_ms();
        lp_registry_run_update(l->s, &l->run);
        lp_run_clear(&l->run);
    }
    lp_serving_destroy(&l->serving);
    pthread_cond_destroy(&l->wake);
    pthread_mutex_destroy(&l->lock);
    free(l);
}

static int copy_run(const lp_run *src, lp_run *dst)
{
    *dst = *src;
    dst->request = src->request ? strdup(src->request) : NULL;
    return src->request && dst->request == NULL ? LP_ENO_MEMORY : LP_OK;
}

int lp_learner_start(lp_learner *l, const lp_train_request *req, const char *trigger, lp_run *out)
{
    memset(out, 0, sizeof *out);
    json_t *rj = lp_train_request_json(req);
    char *text = rj ? json_dumps(rj, JSON_COMPACT | JSON_PRESERVE_ORDER) : NULL;
    json_decref(rj);
    if (text == NULL)
        return LP_ENO_MEMORY;
    pthread_mutex_lock(&l->lock);
    if (l->has_run || l->stopping) {
        pthread_mutex_unlock(&l->lock);
        free(text);
        return l->stopping ? LP_EUNAVAILABLE : LP_ERETRAIN_IN_PROGRESS;
    }
    l->has_run = 1; /* reserve the slot (no run id yet) while the record is written */
    memset(&l->run, 0, sizeof l->run);
    l->run.status = LP_RUN_STORING;
    pthread_mutex_unlock(&l->lock);

    lp_run run = {.request = text, .objective = NAN, .grad_norm = NAN};
    snprintf(run.trigger, sizeof run.trigger, "%s", trigger);
    int rc = lp_registry_run_create(l->s, &run);
    pthread_mutex_lock(&l->lock);
    if (rc != LP_OK) {
        l->has_run = 0;
        pthread_mutex_unlock(&l->lock);
        free(text);
        return rc;
    }
    l->run = run;
    l->req = *req;
    atomic_store(&l->cancel, 0);
    rc = copy_run(&l->run, out);
    pthread_cond_broadcast(&l->wake);
    pthread_mutex_unlock(&l->lock);
    return rc;
}

int lp_learner_run_get(lp_learner *l, int64_t id, lp_run *out)
{
    memset(out, 0, sizeof *out);
    pthread_mutex_lock(&l->lock);
    if (l->has_run && l->run.id == id) {
        int rc = copy_run(&l->run, out);
        pthread_mutex_unlock(&l->lock);
        return rc;
    }
    pthread_mutex_unlock(&l->lock);
    return lp_registry_run_get(l->s, id, out);
}

int lp_learner_cancel(lp_learner *l, int64_t id, lp_run *out)
{
    pthread_mutex_lock(&l->lock);
    if (l->has_run && l->run.id == id) {
        atomic_store(&l->cancel, 1);
        int rc = copy_run(&l->run, out);
        pthread_mutex_unlock(&l->lock);
        return rc;
    }
    pthread_mutex_unlock(&l->lock);
    int rc = lp_registry_run_get(l->s, id, out);
    if (rc == LP_OK && lp_run_status_final(out->status))
        return LP_ERUN_FINISHED;
    return rc;
}

int lp_learner_model(lp_learner *l, int64_t version, lp_served **out)
{
    *out = NULL;
    lp_served *cur = lp_serving_acquire(&l->serving);
    if (cur != NULL && lp_served_version(cur) == version) {
        *out = cur;
        return LP_OK;
    }
    lp_served_unref(cur);
    lp_model_record rec;
    int rc = lp_registry_model_get(l->s, version, &rec);
    if (rc != LP_OK)
        return rc;
    char msg[256];
    rc = lp_served_new(version, rec.model, out, msg, sizeof msg);
    if (rc != LP_OK) {
        fprintf(stderr, "learner: %s\n", msg);
        rc = LP_EINTERNAL;
    }
    lp_model_record_clear(&rec);
    return rc;
}

int lp_learner_activate(lp_learner *l, int64_t version)
{
    lp_served *sv;
    int rc = lp_learner_model(l, version, &sv); /* servable before it is recorded */
    if (rc != LP_OK)
        return rc;
    rc = lp_registry_activate(l->s, version);
    if (rc == LP_OK)
        lp_serving_swap(&l->serving, sv);
    lp_served_unref(sv);
    return rc;
}

lp_served *lp_learner_served(lp_learner *l)
{
    return lp_serving_acquire(&l->serving);
}

void lp_learner_schedule_changed(lp_learner *l)
{
    pthread_mutex_lock(&l->lock);
    pthread_cond_broadcast(&l->wake);
    pthread_mutex_unlock(&l->lock);
}

void lp_learner_stats_get(lp_learner *l, lp_learner_stats *out)
{
    pthread_mutex_lock(&l->lock);
    *out = l->stats;
    out->running = l->has_run ? (l->run.id ? l->run.id : -1) : 0;
    pthread_mutex_unlock(&l->lock);
    lp_served *sv = lp_serving_acquire(&l->serving);
    out->active_version = sv ? lp_served_version(sv) : 0;
    lp_served_unref(sv);
}
