/* retrain.c — background training runs, the served model, the scheduler.
 * See retrain.h. */
#include "retrain.h"

#include "budget.h"
#include "campaigns.h"
#include "clock.h"
#include "confidence.h"
#include "coord.h"
#include "curve.h"
#include "error.h"
#include "log.h"
#include "mechanism.h"
#include "model.h"
#include "objective.h"
#include "rr.h"
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
/* requests and stored settings                                        */

static const char *const FEATURE_MODES[] = {"auto", "dense", "text"};

void lp_train_settings_from_request(const lp_train_request *r, lp_train_settings *t)
{
    memset(t, 0, sizeof *t);
    snprintf(t->loss, sizeof t->loss, "%s", r->general ? "general" : lp_loss_name(r->loss.kind));
    t->campaign = r->campaign;
    snprintf(t->campaign_name, sizeof t->campaign_name, "%s", r->campaign_name);
    t->cutoff = r->cutoff;
    t->seed = r->fit.seed;
    t->beta = r->beta;
    t->rmax = r->loss.rmax;
    t->tau = r->loss.tau;
    t->l2 = r->l2_auto ? 0.0 : r->l2;
    t->l2_auto = r->l2_auto;
    t->norm_bound = r->fit.norm_bound;
    snprintf(t->optimizer, sizeof t->optimizer, "%s", lp_method_name(r->fit.method));
    t->max_iter = r->fit.max_iter;
    t->epochs = r->fit.epochs;
    t->lr = r->fit.lr;
    t->batch = r->fit.batch;
    snprintf(t->features, sizeof t->features, "%s", FEATURE_MODES[r->features]);
    t->text_dim = r->text.hash_dim;
    t->text_bigrams = r->text.bigrams;
    t->text_cross_prompt = r->text.cross_prompt;
    t->text_length = r->text.length;
    t->threads = r->threads;
    t->activate = r->activate;
    snprintf(t->mechanism, sizeof t->mechanism, "%s", r->mechanism);
    t->release_epsilon = r->release_epsilon;
    t->release_delta = r->release_delta;
    snprintf(t->candidates, sizeof t->candidates, "%s", r->candidates);
}

static int feature_mode_parse(const char *name, lp_feature_mode *out)
{
    for (int k = 0; k < 3; k++)
        if (strcmp(name, FEATURE_MODES[k]) == 0) {
            *out = (lp_feature_mode)k;
            return LP_OK;
        }
    return LP_EINVALID_ARGUMENT;
}

int lp_train_request_from_settings(const lp_train_settings *t, lp_train_request *r)
{
    memset(r, 0, sizeof *r);
    lp_loss_kind kind = LP_LOSS_SQUARE_CHIPO;
    lp_method method;
    r->general = strcmp(t->loss, "general") == 0;
    if ((!r->general && lp_loss_parse(t->loss, &kind) != LP_OK) ||
        lp_method_parse(t->optimizer, &method) != LP_OK ||
        feature_mode_parse(t->features, &r->features) != LP_OK)
        return LP_EINVALID_ARGUMENT;
    lp_loss_spec_init(&r->loss, kind);
    r->loss.rmax = t->rmax;
    r->loss.tau = t->tau;
    r->campaign = t->campaign;
    snprintf(r->campaign_name, sizeof r->campaign_name, "%s", t->campaign_name);
    r->cutoff = t->cutoff;
    r->beta = t->beta;
    r->l2 = t->l2;
    r->l2_auto = t->l2_auto;
    lp_fit_opts_init(&r->fit, method);
    r->fit.seed = t->seed;
    r->fit.norm_bound = t->norm_bound;
    r->fit.max_iter = t->max_iter;
    r->fit.epochs = t->epochs;
    r->fit.lr = t->lr;
    r->fit.batch = t->batch;
    lp_feat_spec_init(&r->text);
    r->text.hash_dim = (uint32_t)t->text_dim;
    r->text.bigrams = t->text_bigrams;
    r->text.cross_prompt = t->text_cross_prompt;
    r->text.length = t->text_length;
    r->threads = t->threads;
    r->activate = t->activate;
    snprintf(r->mechanism, sizeof r->mechanism, "%s", t->mechanism);
    r->release_epsilon = t->release_epsilon;
    r->release_delta = t->release_delta;
    snprintf(r->candidates, sizeof r->candidates, "%s", t->candidates);
    return LP_OK;
}

/* ------------------------------------------------------------------ */
/* stored models                                                       */

void lp_model_view_clear(lp_model_view *v)
{
    if (v == NULL)
        return;
    free(v->corruption);
    free(v->summary);
    free(v->model);
    v->corruption = NULL;
    v->n_corruption = 0;
    v->summary = v->model = NULL;
}

/* Moves a record into a view (the record keeps nothing to free). */
static int model_view_from_record(lp_model_record *m, lp_model_view *v)
{
    memset(v, 0, sizeof *v);
    int text = strcmp(m->features, "text") == 0;
    if (lp_loss_parse(m->loss, &v->loss) != LP_OK ||
        lp_train_request_from_settings(&m->settings, &v->request) != LP_OK ||
        (!text && strcmp(m->features, "dense") != 0)) {
        lp_log(LP_LOG_ERROR, "model_unreadable", LP_LOG_INT("version", m->version));
        return LP_EINTERNAL;
    }
    v->version = m->version;
    v->run = m->run;
    v->created_ms = m->created_ms;
    v->duration_ms = m->duration_ms;
    v->campaign = m->campaign;
    snprintf(v->campaign_name, sizeof v->campaign_name, "%s", m->campaign_name);
    v->cutoff = m->cutoff;
    v->labels = m->labels;
    v->features = text ? LP_FEATURES_TEXT : LP_FEATURES_DENSE;
    v->dim = (size_t)m->dim;
    lp_feat_spec_init(&v->text);
    if (text) {
        v->text.hash_dim = (uint32_t)m->text_dim;
        v->text.bigrams = m->text_bigrams;
        v->text.cross_prompt = m->text_cross_prompt;
        v->text.cross_max = m->text_cross_max;
        v->text.length = m->text_length;
    }
    v->corruption = m->corruption;
    v->n_corruption = m->n_corruption;
    v->anti_model = m->anti_model;
    v->privacy = m->privacy;
    snprintf(v->mechanism, sizeof v->mechanism, "%s", m->mechanism);
    v->release_epsilon = m->release_epsilon;
    v->release_delta = m->release_delta;
    v->summary = m->summary;
    v->model = m->model;
    m->corruption = NULL;
    m->n_corruption = 0;
    m->summary = m->model = NULL;
    return LP_OK;
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

    /* The served model follows the registry's active version: the poll, an
     * activation and its swap are one step under follow_lock, so a poll
     * never swaps back a version read before an activation committed. */
    pthread_mutex_t follow_lock;
    int64_t followed; /* the active version at the last poll or activation */
    int follow_now;   /* under lock: another server announced an activation */

    lp_curve curve;          /* the active run's (or the last run's) curve */
    int64_t fit_start_ms;    /* monotonic ms when the active fit started */
    int64_t curve_stored_ms; /* worker only: monotonic ms of the last curve write */

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
    pthread_mutex_unlock(&l->lock);
    if (lp_registry_run_update(l->s, &copy) != LP_OK)
        lp_log(LP_LOG_ERROR, "retrain_record_failed", LP_LOG_INT("run", copy.id));
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

static int64_t mono_ms(void)
{
    return lp_mono_ns() / 1000000;
}

/*
 * The curve goes to the store in batches, through the storage engine's
 * writer: when CURVE_BATCH points wait or CURVE_PERIOD_MS passed since the
 * last write, and once at the end of the run (final), so a run costs a
 * handful of small transactions, not one per iteration. A failed write is
 * retried with the next batch. Worker thread only.
 */
#define CURVE_BATCH 64
#define CURVE_PERIOD_MS 1000

static void curve_store(lp_learner *l, int final)
{
    int64_t now = mono_ms(), stride;
    const lp_curve_point *pending;
    pthread_mutex_lock(&l->lock);
    if (final && lp_curve_finish(&l->curve) != LP_OK)
        fprintf(stderr, "learner: run %lld: out of memory for its curve\n", (long long)l->run.id);
    size_t n = lp_curve_pending(&l->curve, &stride, &pending);
    int due = final || n >= CURVE_BATCH || now - l->curve_stored_ms >= CURVE_PERIOD_MS;
    lp_curve_point *copy = due && n > 0 ? malloc(n * sizeof *copy) : NULL;
    if (copy != NULL)
        memcpy(copy, pending, n * sizeof *copy);
    int64_t run = l->run.id;
    pthread_mutex_unlock(&l->lock);
    if (!due || (n == 0 && stride == 1) || (n > 0 && copy == NULL)) {
        free(copy);
        return;
    }
    int rc = lp_registry_curve_append(l->s, run, stride, copy, n);
    free(copy);
    l->curve_stored_ms = now;
    if (rc != LP_OK) {
        fprintf(stderr, "learner: cannot record the curve of run %lld\n", (long long)run);
        return;
    }
    pthread_mutex_lock(&l->lock);
    lp_curve_stored(&l->curve);
    pthread_mutex_unlock(&l->lock);
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
        if (lp_curve_add(&l->curve, iteration, evaluations, objective, grad_norm,
                         mono_ms() - l->fit_start_ms) != LP_OK)
            fprintf(stderr, "learner: run %lld: out of memory for its curve\n",
                    (long long)l->run.id);
    }
    pthread_mutex_unlock(&l->lock);
    if (isfinite(objective))
        curve_store(l, 0);
    return atomic_load(&l->cancel);
}

/* Between the cross-validation's fold fits: yields, and says whether to cancel. */
static int cv_step(void *ctx)
{
    lp_learner *l = ctx;
    yield_to_requests(l);
    return atomic_load(&l->cancel);
}

/* Progress of a general fit: one round is one iteration. */
static int on_round(void *ctx, int round, double residual)
{
    return on_progress(ctx, round, round, residual, NAN);
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
    lp_cv_opts co; /* the held-out estimate, and the penalty when l2 is auto */
    lp_cv_opts_init(&co);
    co.auto_l2 = req->l2_auto;
    co.seed = req->fit.seed;
    co.threads = req->threads;
    co.step = cv_step;
    co.step_ctx = l;
    lp_model *m = NULL;
    int rc;
    if (req->general) {
        lp_gp_opts go;
        lp_gp_opts_init(&go);
        go.rounds = LP_GP_DEFAULT_ROUNDS;
        go.beta = req->beta;
        go.l2 = req->l2;
        go.threads = req->threads;
        go.on_round = on_round;
        go.round_ctx = l;
        rc = lp_model_fit_general(sn->general, sn->ds, &go, &m);
        if (rc == LP_ENO_LABELS)
            return lp_fail(LP_ETRAINING_FAILED, msg, msglen,
                           "the general method needs a prompt with two distinct responses");
    } else if ((rc = lp_model_fit_cv(sn->ds, &oo, &fo, req->beta, &co, &m)) == LP_OK &&
               (rc = lp_conf_attach(m, sn->ds)) != LP_OK) /* pessimistic scores' record */
        lp_model_free(m);
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

/* LP_OK when the request's release fits what its campaign has left
 * (checked again when the model is stored: registry.h). */
static int release_fits(lp_learner *l, const lp_train_request *req, char *msg, size_t msglen)
{
    lp_campaign c;
    double eps = 0, delta = 0;
    int rc = lp_store_campaign_by_id(l->s, req->campaign, &c);
    if (rc == LP_OK)
        rc = lp_store_release_spent(l->s, c.id, &eps, &delta);
    if (rc != LP_OK)
        return lp_fail(rc, msg, msglen, "cannot read the release budget");
    rc = lp_budget_check(c.release_epsilon, c.release_delta, eps, delta, req->release_epsilon,
                         req->release_delta);
    return rc == LP_OK ? LP_OK
                       : lp_fail(rc, msg, msglen,
                                 "campaign \"%s\": the release does not fit the budget (epsilon "
                                 "%g of %g spent)",
                                 c.name, eps, c.release_epsilon);
}

/* Releases a model from the snapshot by the request's private mechanism
 * (mechanism.h): the labels are a central campaign's true answers, grouped
 * by annotator; the randomness is the OS CSPRNG's. */
static int release_model(lp_learner *l, const lp_train_request *req, const lp_snapshot *sn,
                         lp_model **out, char *msg, size_t msglen)
{
    lp_mechanism mech;
    if (lp_mechanism_parse(req->mechanism, &mech) != LP_OK)
        return lp_fail(LP_EINVALID_ARGUMENT, msg, msglen, "unknown mechanism \"%s\"",
                       req->mechanism);
    lp_campaign c;
    int rc = lp_store_campaign_by_id(l->s, req->campaign, &c);
    if (rc != LP_OK)
        return lp_fail(rc, msg, msglen, "cannot read the campaign");
    lp_release_opts o;
    lp_release_opts_init(&o, mech, req->release_epsilon);
    o.delta = req->release_delta;
    o.beta = req->beta;
    o.rmax = req->loss.rmax;
    o.candidates = req->candidates[0] ? req->candidates : LP_RELEASE_CANDIDATES_DEFAULT;
    if (isfinite(req->fit.norm_bound)) /* the candidates' ball; aup's projection */
        o.radius = o.norm_bound = req->fit.norm_bound;
    o.user_cap = (size_t)c.contribution_cap; /* m > 0: user-level */
    pthread_mutex_lock(&l->lock);
    l->run.iterations = 0;
    pthread_mutex_unlock(&l->lock);
    char why[LP_MSG_MAX] = "";
    rc = lp_release_fit(sn->ds, sn->user, &o, out, why, sizeof why);
    if (rc == LP_ENO_MEMORY)
        return lp_fail(rc, msg, msglen, "out of memory");
    if (rc != LP_OK)
        return lp_fail(rc == LP_EINVALID_ARGUMENT ? LP_EBAD_HYPERPARAMETER : LP_ETRAINING_FAILED,
                       msg, msglen, "the %s release failed: %s", req->mechanism,
                       why[0] ? why : lp_error_name(rc));
    return LP_OK;
}

/* The privacy of a model trained on labels of privacy own through a view
 * that also consulted another model (corruption strategy "anti"), whose
 * record is other: counted over both sets of labels. Where the two share
 * annotators, annotators and the per-annotator total are upper bounds
 * (basic composition counts a label used twice twice). Unknown if other is. */
static lp_label_privacy privacy_compose(lp_label_privacy own, const lp_label_privacy *other)
{
    if (!other->known) {
        own.known = 0;
        return own;
    }
    own.labels += other->labels;
    own.annotators += other->annotators;
    own.unprivatized += other->unprivatized;
    own.epsilon_min = fmin(own.epsilon_min, other->epsilon_min); /* fmin skips a NAN */
    own.epsilon_max = fmax(own.epsilon_max, other->epsilon_max);
    own.epsilon_per_annotator =
        own.unprivatized > 0 ? INFINITY : own.epsilon_per_annotator + other->epsilon_per_annotator;
    return own;
}

/* Runs the active run to its end. Returns the run's error (0: succeeded). */
static int execute(lp_learner *l, char *msg, size_t msglen)
{
    lp_train_request req = l->req; /* the worker's own copy; req is immutable while queued */
    set_status(l, LP_RUN_SNAPSHOT);
    persist_run(l);
    int rc;
    if (req.mechanism[0] != '\0' && (rc = release_fits(l, &req, msg, msglen)) != LP_OK)
        return rc; /* a scheduled release after the budget ran out: no work */

    lp_corruption *cs = NULL;
    size_t ncs = 0;
    rc = lp_registry_corruption_active(l->s, &cs, &ncs);
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
                       .pause_ctx = l,
                       .general = req.general,
                       .users = req.mechanism[0] != '\0'};
    lp_snapshot sn;
    rc = lp_snapshot_build(l->s, &vs, &sn, msg, msglen);
    int64_t anti_version = anti ? lp_served_version(anti) : 0;
    if (rc == LP_OK && anti != NULL)
        sn.privacy = privacy_compose(sn.privacy, lp_served_privacy(anti));
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
    l->fit_start_ms = mono_ms();
    pthread_mutex_unlock(&l->lock);
    l->curve_stored_ms = mono_ms();
    persist_run(l);

    int64_t t0 = lp_now_ms();
    lp_model *m = NULL;
    rc = req.mechanism[0] ? release_model(l, &req, &sn, &m, msg, msglen)
                          : fit_model(l, &req, &sn, &m, msg, msglen);
    int64_t duration = lp_now_ms() - t0;
    if (rc == LP_OK && atomic_load(&l->cancel))
        rc = lp_fail(LP_ECANCELLED, msg, msglen, "cancelled");
    if (rc != LP_OK) {
        free(cs);
        lp_model_free(m);
        lp_snapshot_clear(&sn);
        return rc;
    }
    set_status(l, LP_RUN_STORING);
    persist_run(l);

    json_t *mj = lp_model_to_json(m);
    char *model_text = mj ? json_dumps(mj, LP_MODEL_JSON_FLAGS) : NULL;
    if (mj != NULL) { /* the summary leaves out the parameters */
        json_object_del(mj, "theta");
        json_t *gen = json_object_get(mj, "general");
        json_object_del(gen, "preference");
        json_object_del(gen, "iterates");
    }
    char *summary_text = mj ? json_dumps(mj, JSON_COMPACT | JSON_PRESERVE_ORDER) : NULL;
    json_decref(mj);
    int text = sn.mode == LP_FEATURES_TEXT;
    lp_model_record rec = {.run = l->run.id,
                           .campaign = req.campaign,
                           .cutoff = sn.cutoff,
                           .labels = (int64_t)sn.ds->n,
                           .duration_ms = duration,
                           .dim = (int64_t)m->d,
                           .text_dim = text ? req.text.hash_dim : 0,
                           .text_bigrams = text && req.text.bigrams,
                           .text_cross_prompt = text && req.text.cross_prompt,
                           .text_cross_max = text ? req.text.cross_max : 0,
                           .text_length = text && req.text.length,
                           .corruption = cs,
                           .n_corruption = ncs,
                           .anti_model = anti_version,
                           .privacy = sn.privacy,
                           .summary = summary_text,
                           .model = model_text};
    snprintf(rec.loss, sizeof rec.loss, "%s", lp_loss_name(req.loss.kind));
    if (req.mechanism[0] != '\0') { /* a release spends from its campaign's budget */
        snprintf(rec.mechanism, sizeof rec.mechanism, "%s", req.mechanism);
        rec.release_epsilon = req.release_epsilon;
        rec.release_delta = req.release_delta;
        rec.privacy.released = 1;
    }
    snprintf(rec.features, sizeof rec.features, "%s", text ? "text" : "dense");
    lp_model_free(m);
    lp_snapshot_clear(&sn);
    lp_served *sv = NULL;
    if (model_text == NULL || summary_text == NULL)
        rc = lp_fail(LP_ENO_MEMORY, msg, msglen, "out of memory");
    /* Parse before storing, so an activated model is always servable. */
    if (rc == LP_OK)
        rc = lp_served_new(0, model_text, &rec.privacy, &sv, msg, msglen);
    if (rc == LP_OK && !lp_coord_train_lock_held(l->s)) /* coord.h: a lost lock records nothing */
        rc = lp_fail(LP_ETRAINING_FAILED, msg, msglen, "the training lock was lost");
    pthread_mutex_lock(&l->follow_lock);
    if (rc == LP_OK && (rc = lp_registry_model_add(l->s, &rec, req.activate)) != LP_OK)
        lp_fail(rc, msg, msglen, "cannot store the model");
    if (rc == LP_OK) {
        lp_served_unref(sv);
        sv = NULL;
        rc = lp_served_new(rec.version, model_text, &rec.privacy, &sv, msg, msglen);
    }
    if (rc == LP_OK && req.activate) {
        lp_serving_swap(&l->serving, sv);
        l->followed = rec.version;
        lp_log(LP_LOG_INFO, "model_activated", LP_LOG_INT("version", rec.version),
               LP_LOG_STR("by", "retrain"), LP_LOG_INT("run", l->run.id));
    }
    pthread_mutex_unlock(&l->follow_lock);
    lp_served_unref(sv);
    free(model_text);
    free(summary_text);
    free(cs);
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

static void log_run_start(const lp_run *r)
{
    const lp_train_settings *t = &r->settings;
    lp_log(LP_LOG_INFO, "retrain_start", LP_LOG_INT("run", r->id),
           LP_LOG_STR("trigger", r->trigger), LP_LOG_STR("loss", t->loss),
           LP_LOG_STR("optimizer", t->optimizer), LP_LOG_STR("features", t->features),
           LP_LOG_STR("campaign", t->campaign ? t->campaign_name : NULL),
           LP_LOG_INT("cutoff", t->cutoff), LP_LOG_BOOL("activate", t->activate));
}

/* A run's end: status, figures, and the reason when it did not succeed. */
static void log_run_end(const lp_run *r)
{
    lp_log_level level = r->status == LP_RUN_FAILED ? LP_LOG_ERROR : LP_LOG_INFO;
    lp_log(level, "retrain_end", LP_LOG_INT("run", r->id), LP_LOG_STR("trigger", r->trigger),
           LP_LOG_STR("status", lp_run_status_name(r->status)),
           LP_LOG_STR("loss", r->settings.loss), LP_LOG_INT("labels", r->labels),
           LP_LOG_INT("cutoff", r->cutoff),
           LP_LOG_INT("duration_ms", r->finished_ms - r->started_ms),
           LP_LOG_INT("iterations", r->iterations), LP_LOG_NUM("objective", r->objective),
           LP_LOG_NUM("grad_norm", r->grad_norm),
           r->model_version ? LP_LOG_INT("model_version", r->model_version) : (lp_log_field){0},
           r->error ? LP_LOG_STR("error", lp_error_name(r->error)) : (lp_log_field){0},
           r->error ? LP_LOG_STR("message", r->message) : (lp_log_field){0});
}

static void *worker_main(void *arg)
{
    lp_learner *l = arg;
    pthread_setname_np(pthread_self(), "ldpref-retrain");
    lower_priority();
    pthread_mutex_lock(&l->lock);
    for (;;) {
        while (!l->stopping && !(l->has_run && l->run.status == LP_RUN_QUEUED))
            pthread_cond_wait(&l->wake, &l->lock);
        if (l->stopping)
            break;
        l->run.started_ms = lp_now_ms();
        l->last_started_ms = l->run.started_ms;
        lp_run started = l->run;
        pthread_mutex_unlock(&l->lock);
        log_run_start(&started);

        char msg[256] = "";
        int rc = atomic_load(&l->cancel) ? lp_fail(LP_ECANCELLED, msg, sizeof msg, "cancelled")
                                         : execute(l, msg, sizeof msg);
        curve_store(l, 1); /* whatever the outcome, before the run is final */
        /* The final state is stored first and published second: once a
         * reader sees the run final, the next run may start. */
        pthread_mutex_lock(&l->lock);
        lp_run fin = l->run;
        pthread_mutex_unlock(&l->lock);
        fin.finished_ms = lp_now_ms();
        fin.status = rc == LP_OK           ? LP_RUN_SUCCEEDED
                     : rc == LP_ECANCELLED ? LP_RUN_CANCELLED
                                           : LP_RUN_FAILED;
        fin.error = rc;
        snprintf(fin.message, sizeof fin.message, "%s", rc ? msg : "");
        if (lp_registry_run_update(l->s, &fin) != LP_OK)
            lp_log(LP_LOG_ERROR, "retrain_record_failed", LP_LOG_INT("run", fin.id));
        lp_coord_train_lock_release(l->s); /* once the final state is stored */
        log_run_end(&fin);
        pthread_mutex_lock(&l->lock);
        l->stats.runs[fin.status]++;
        l->stats.train_seconds_total += (double)(fin.finished_ms - fin.started_ms) / 1e3;
        l->has_run = 0;
        atomic_store(&l->cancel, 0);
    }
    pthread_mutex_unlock(&l->lock);
    return NULL;
}

/* ---- scheduler ---- */

/* The scheduled trigger that is due, or NULL: from the runs every server
 * records (coord.h) and this learner's own start and runs. */
static const char *schedule_due(lp_learner *l, const lp_schedule *sc, int64_t campaign)
{
    int64_t newest = 0;
    lp_coord_runs runs;
    if (lp_registry_max_label(l->s, campaign, &newest) != LP_OK ||
        lp_coord_runs_get(l->s, &runs) != LP_OK)
        return NULL;
    pthread_mutex_lock(&l->lock);
    int64_t started =
        l->last_started_ms > runs.last_start_ms ? l->last_started_ms : runs.last_start_ms;
    int64_t cutoff = l->last_cutoff > runs.last_cutoff ? l->last_cutoff : runs.last_cutoff;
    pthread_mutex_unlock(&l->lock);
    if (sc->interval_s > 0 && lp_now_ms() - started >= sc->interval_s * 1000)
        return "interval";
    if (sc->every_labels > 0 && newest - cutoff >= sc->every_labels)
        return "labels";
    return NULL;
}

static int start_run(lp_learner *l, const lp_train_request *req, const char *trigger,
                     const lp_schedule *sc, lp_run *out);

static void scheduler_tick(lp_learner *l)
{
    lp_schedule sc;
    if (lp_registry_schedule_get(l->s, &sc) != LP_OK)
        return;
    if ((sc.interval_s <= 0 && sc.every_labels <= 0) || !sc.has_settings)
        return;
    lp_train_request req;
    if (lp_train_request_from_settings(&sc.settings, &req) != LP_OK) {
        lp_log(LP_LOG_ERROR, "schedule_unreadable");
        return;
    }
    pthread_mutex_lock(&l->lock);
    int busy = l->has_run;
    pthread_mutex_unlock(&l->lock);
    const char *trigger = busy ? NULL : schedule_due(l, &sc, req.campaign);
    if (trigger != NULL) { /* claimed, or not, under the training lock */
        lp_run run;
        start_run(l, &req, trigger, &sc, &run);
    }
}

/* The served model follows the registry's active version (an activation on
 * another server, or a rollback there). */
static void follow_active(lp_learner *l)
{
    int64_t version = 0;
    pthread_mutex_lock(&l->follow_lock);
    if (lp_registry_active_version(l->s, &version) == LP_OK && version != l->followed) {
        lp_served *sv = NULL;
        if (version == 0 || lp_learner_model(l, version, &sv) == LP_OK) {
            lp_serving_swap(&l->serving, sv); /* else logged; the old model stays */
            lp_log(LP_LOG_INFO, "model_activated", LP_LOG_INT("version", version),
                   LP_LOG_STR("by", "registry"));
        }
        lp_served_unref(sv);
        l->followed = version;
    }
    pthread_mutex_unlock(&l->follow_lock);
}

/* The watcher's call (coord.h) when another server announced an
 * activation: the poll runs now rather than at its next period. */
static void activation_announced(void *ctx)
{
    lp_learner *l = ctx;
    pthread_mutex_lock(&l->lock);
    l->follow_now = 1;
    pthread_cond_broadcast(&l->wake);
    pthread_mutex_unlock(&l->lock);
}

static void *scheduler_main(void *arg)
{
    lp_learner *l = arg;
    pthread_setname_np(pthread_self(), "ldpref-schedule");
    pthread_mutex_lock(&l->lock);
    while (!l->stopping) {
        struct timespec until;
        clock_gettime(CLOCK_REALTIME, &until);
        int64_t ns = until.tv_nsec + (int64_t)l->o.poll_ms * 1000000;
        until.tv_sec += ns / 1000000000;
        until.tv_nsec = ns % 1000000000;
        if (!l->follow_now)
            pthread_cond_timedwait(&l->wake, &l->lock, &until);
        if (l->stopping)
            break;
        l->follow_now = 0;
        pthread_mutex_unlock(&l->lock);
        follow_active(l);
        if (l->o.scheduler)
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
    pthread_mutex_init(&l->follow_lock, NULL);
    lp_curve_init(&l->curve, LP_CURVE_MAX_POINTS);
    atomic_init(&l->cancel, 0);
    l->stats.last_duration_s = NAN;
    l->last_started_ms = lp_now_ms();
    /* Runs left unfinished are marked failed only when no other server
     * holds the training lock (its runs are live). */
    int rc = lp_coord_train_lock_try(s);
    if (rc == LP_OK) {
        rc = lp_registry_runs_interrupted(s);
        lp_coord_train_lock_release(s);
    } else if (rc == LP_ERETRAIN_IN_PROGRESS) {
        rc = LP_OK;
    }
    lp_run *runs = NULL;
    size_t n = 0;
    if (rc == LP_OK && (rc = lp_registry_run_list(s, 1, &runs, &n)) == LP_OK && n == 1)
        l->last_cutoff = runs[0].cutoff;
    free(runs);
    int64_t version = 0;
    if (rc == LP_OK)
        rc = lp_registry_active_version(s, &version);
    l->followed = version;
    if (rc == LP_OK && version != 0) {
        lp_served *sv;
        if (lp_learner_model(l, version, &sv) == LP_OK) {
            lp_serving_swap(&l->serving, sv);
            lp_served_unref(sv);
        } else {
            lp_log(LP_LOG_ERROR, "model_unloadable", LP_LOG_INT("version", version),
                   LP_LOG_STR("message", "the active model cannot be loaded; serving nothing"));
        }
    }
    if (rc != LP_OK) {
        lp_learner_free(l);
        return lp_fail(rc, err, errlen, "cannot read the model registry");
    }
    l->worker_started = pthread_create(&l->worker, NULL, worker_main, l) == 0;
    l->scheduler_started = pthread_create(&l->scheduler, NULL, scheduler_main, l) == 0;
    if (!l->worker_started || !l->scheduler_started) {
        lp_learner_free(l);
        return lp_fail(LP_EINTERNAL, err, errlen, "cannot start the learner threads");
    }
    lp_coord_on_activation(s, activation_announced, l);
    *out = l;
    return LP_OK;
}

void lp_learner_free(lp_learner *l)
{
    if (l == NULL)
        return;
    lp_coord_on_activation(l->s, NULL, NULL);
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
    }
    lp_coord_train_lock_release(l->s);
    lp_serving_destroy(&l->serving);
    lp_curve_clear(&l->curve);
    pthread_cond_destroy(&l->wake);
    pthread_mutex_destroy(&l->follow_lock);
    pthread_mutex_destroy(&l->lock);
    free(l);
}

/* Queues a run once this store holds the training lock (coord.h), which it
 * keeps until the run is final. A scheduled run (sc set) is due again by
 * the runs read under the lock, or it is not started: the trigger fired
 * once, from whichever server holds the lock. */
static int start_run(lp_learner *l, const lp_train_request *req, const char *trigger,
                     const lp_schedule *sc, lp_run *out)
{
    memset(out, 0, sizeof *out);
    pthread_mutex_lock(&l->lock);
    if (l->has_run || l->stopping) {
        pthread_mutex_unlock(&l->lock);
        return l->stopping ? LP_EUNAVAILABLE : LP_ERETRAIN_IN_PROGRESS;
    }
    l->has_run = 1; /* reserve the slot (no run id yet) while the record is written */
    memset(&l->run, 0, sizeof l->run);
    l->run.status = LP_RUN_STORING;
    pthread_mutex_unlock(&l->lock);

    int rc = lp_coord_train_lock_try(l->s);
    if (rc == LP_OK) /* the runs a holder that died left unfinished */
        rc = lp_registry_runs_interrupted(l->s);
    if (rc == LP_OK && sc != NULL && (trigger = schedule_due(l, sc, req->campaign)) == NULL)
        rc = LP_ERETRAIN_IN_PROGRESS; /* another server fired it meanwhile */
    lp_run run = {.objective = NAN, .grad_norm = NAN};
    if (rc == LP_OK) {
        snprintf(run.trigger, sizeof run.trigger, "%s", trigger);
        lp_train_settings_from_request(req, &run.settings);
        rc = lp_registry_run_create(l->s, &run);
    }
    pthread_mutex_lock(&l->lock);
    if (rc != LP_OK) {
        lp_coord_train_lock_release(l->s); /* nothing when another store holds it */
        l->has_run = 0;
        pthread_mutex_unlock(&l->lock);
        return rc;
    }
    l->run = run;
    l->req = *req;
    lp_curve_clear(&l->curve);
    atomic_store(&l->cancel, 0);
    *out = l->run;
    pthread_cond_broadcast(&l->wake);
    pthread_mutex_unlock(&l->lock);
    return LP_OK;
}

int lp_learner_start(lp_learner *l, const lp_train_request *req, const char *trigger, lp_run *out)
{
    return start_run(l, req, trigger, NULL, out);
}

int lp_learner_run_get(lp_learner *l, int64_t id, lp_run *out)
{
    memset(out, 0, sizeof *out);
    pthread_mutex_lock(&l->lock);
    if (l->has_run && l->run.id == id) {
        *out = l->run;
        pthread_mutex_unlock(&l->lock);
        return LP_OK;
    }
    pthread_mutex_unlock(&l->lock);
    return lp_registry_run_get(l->s, id, out);
}

int lp_learner_run_curve(lp_learner *l, int64_t id, lp_run *out, lp_curve_point **curve, size_t *n)
{
    memset(out, 0, sizeof *out);
    *curve = NULL;
    *n = 0;
    pthread_mutex_lock(&l->lock);
    if (l->has_run && l->run.id == id) {
        *out = l->run;
        int rc = lp_curve_copy(&l->curve, curve, n);
        pthread_mutex_unlock(&l->lock);
        return rc;
    }
    pthread_mutex_unlock(&l->lock);
    int rc = lp_registry_run_get(l->s, id, out);
    return rc == LP_OK ? lp_registry_curve_get(l->s, id, curve, n) : rc;
}

int lp_learner_cancel(lp_learner *l, int64_t id, lp_run *out)
{
    pthread_mutex_lock(&l->lock);
    if (l->has_run && l->run.id == id) {
        atomic_store(&l->cancel, 1);
        *out = l->run;
        pthread_mutex_unlock(&l->lock);
        return LP_OK;
    }
    pthread_mutex_unlock(&l->lock);
    int rc = lp_registry_run_get(l->s, id, out);
    if (rc == LP_OK) /* unfinished and not here: another server trains it */
        rc = lp_run_status_final(out->status) ? LP_ERUN_FINISHED : LP_ERETRAIN_IN_PROGRESS;
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
    rc = lp_served_new(version, rec.model, &rec.privacy, out, msg, sizeof msg);
    if (rc != LP_OK) {
        lp_log(LP_LOG_ERROR, "model_unloadable", LP_LOG_INT("version", version),
               LP_LOG_STR("message", msg));
        rc = LP_EINTERNAL;
    }
    lp_model_record_clear(&rec);
    return rc;
}

int lp_learner_model_get(lp_learner *l, int64_t version, lp_model_view *out)
{
    memset(out, 0, sizeof *out);
    lp_model_record rec;
    int rc = lp_registry_model_get(l->s, version, &rec);
    if (rc != LP_OK)
        return rc;
    rc = model_view_from_record(&rec, out);
    lp_model_record_clear(&rec);
    return rc;
}

int lp_learner_model_list(lp_learner *l, lp_model_view **out, size_t *n)
{
    *out = NULL;
    *n = 0;
    lp_model_record *recs;
    size_t nrec;
    int rc = lp_registry_model_list(l->s, &recs, &nrec);
    if (rc != LP_OK)
        return rc;
    lp_model_view *views = calloc(nrec ? nrec : 1, sizeof *views);
    if (views == NULL)
        rc = LP_ENO_MEMORY;
    size_t k = 0;
    for (; k < nrec && rc == LP_OK; k++)
        rc = model_view_from_record(&recs[k], &views[k]);
    for (size_t i = 0; i < nrec; i++)
        lp_model_record_clear(&recs[i]);
    free(recs);
    if (rc != LP_OK) {
        for (size_t i = 0; i < k; i++)
            lp_model_view_clear(&views[i]);
        free(views);
        return rc;
    }
    *out = views;
    *n = nrec;
    return LP_OK;
}

int lp_learner_activate(lp_learner *l, int64_t version)
{
    lp_served *sv;
    int rc = lp_learner_model(l, version, &sv); /* servable before it is recorded */
    if (rc != LP_OK)
        return rc;
    pthread_mutex_lock(&l->follow_lock);
    rc = lp_registry_activate(l->s, version);
    if (rc == LP_OK) {
        lp_serving_swap(&l->serving, sv);
        l->followed = version;
    }
    pthread_mutex_unlock(&l->follow_lock);
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
