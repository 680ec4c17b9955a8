/*
 * retrain.h — the server's learner: training runs in the background, the
 * model registry's served model, and periodic retraining.
 *
 * One worker thread runs one training run at a time: it builds a snapshot
 * of the labels up to a cut-off (snapshot.h), fits the requested loss
 * (server/engine) while recording its training curve, stores the model
 * with its settings, metrics and the corruption in force (registry.h),
 * and — unless asked not to — swaps it
 * in as the served model. The worker runs under SCHED_IDLE (and the
 * objective's helper threads inherit it), so training uses only CPU time
 * that ingest does not want. A failed or cancelled run stores no model and
 * leaves the served model untouched.
 *
 * A scheduler thread starts runs from the stored schedule: every
 * interval_s seconds since the last run started, and/or when every_labels
 * labels arrived after the last run's cut-off; never while a run is active.
 *
 * Several servers on one database (server/db/coord.h): a learner holds the
 * store's training lock from queuing a run until it is final, so one server
 * trains at a time and a retrain asked of another is refused
 * (LP_ERETRAIN_IN_PROGRESS, as for a second run on one server); the
 * schedule reads the runs of every server, and a scheduled run starts only
 * when it is still due under the lock, so it fires once, not once per
 * server. Every poll_ms the same thread reads the registry's active version
 * and serves it when it changed (an activation or rollback on another
 * server): a model activated anywhere is served here within poll_ms plus
 * the time to load it. On PostgreSQL the activation's notification wakes
 * that thread at once (coord.h, lp_coord_on_activation): within a round
 * trip plus the load. Activations on this server are served at once. One
 * learner per store (it owns the store's activation callback).
 *
 * Thread safety: every function may be called from any thread.
 */
#ifndef LP_RETRAIN_H
#define LP_RETRAIN_H

#include "losses.h"
#include "optimize.h"
#include "registry.h"
#include "served.h"
#include "snapshot.h"
#include "store.h"

#include <stdint.h>

/* The exponential mechanism's candidate set when a request names none
 * (server/engine/expmech.h): a random net of 256 points in the ball of
 * radius norm_bound (1 when none). */
#define LP_RELEASE_CANDIDATES_DEFAULT "net:256"

/* A validated retrain request (docs/design.md §3.5; docs/protocol.md); the
 * handler layer parses it from JSON (server/api/train_request.h). */
typedef struct lp_train_request {
    lp_loss_spec loss;
    int general;      /* method "general": Algorithm 3 (general.h) with
                         LP_GP_DEFAULT_ROUNDS rounds and LP_GP_DEFAULT_ETA; stored
                         as the settings' loss "general" */
    int64_t campaign; /* 0: all */
    char campaign_name[LP_CAMPAIGN_NAME_MAX + 1];
    int64_t cutoff; /* 0: newest at start */
    double beta, l2;
    int l2_auto;     /* "l2": "auto": chosen by cross-validation (l2 is then 0) */
    lp_fit_opts fit; /* method, max_iter, norm_bound, lr, batch, epochs, seed */
    lp_feature_mode features;
    lp_feat_spec text;
    int threads;
    int activate;
    /* a private release of one central campaign (schema/014): mechanism ""
     * (none), "exponential" or "aup"; its epsilon (finite, > 0) and delta
     * (aup: (0, 1); exponential: 0); the exponential mechanism's candidate
     * set ("" : the mechanism's default) */
    char mechanism[16];
    double release_epsilon, release_delta;
    char candidates[64];
} lp_train_request;

/* The request as a stored settings record (registry.h). */
void lp_train_settings_from_request(const lp_train_request *r, lp_train_settings *out);
/* A stored settings record as a request. LP_EINVALID_ARGUMENT if it names
 * an unknown loss, optimizer or feature mode. */
int lp_train_request_from_settings(const lp_train_settings *t, lp_train_request *out);

/* A stored model as the handlers see it: its provenance, typed. */
typedef struct lp_model_view {
    int64_t version, run, created_ms, duration_ms;
    lp_loss_kind loss;
    int64_t campaign; /* 0: every campaign */
    char campaign_name[LP_CAMPAIGN_NAME_MAX + 1];
    int64_t cutoff, labels;
    lp_feature_mode features; /* DENSE or TEXT: the plan it was trained with */
    size_t dim;               /* features per response */
    lp_feat_spec text;        /* TEXT: the featurizer's spec */
    lp_train_request request; /* the run's request */
    /* the corruption settings in force, one per campaign (owned); anti_model:
     * the model strategy anti asked about tasks without a reference
     * preference (0: none was served) */
    lp_corruption *corruption;
    size_t n_corruption;
    int64_t anti_model;
    lp_label_privacy privacy; /* of the labels it was trained on (known 0: unknown) */
    char mechanism[16];       /* the release that produced it ("" : none) */
    double release_epsilon, release_delta;
    char *summary; /* the model artifact without theta: link, beta, features,
                      hyper, data, metrics (model.h; JSON text, owned) */
    char *model;   /* the model file (JSON text, owned); NULL in lists */
} lp_model_view;

/* Frees what the view owns (NULL ok). */
void lp_model_view_clear(lp_model_view *v);

typedef struct lp_learner lp_learner;

typedef struct lp_learner_opts {
    int threads;   /* default training threads (>= 1) */
    int scheduler; /* 1: start runs from the stored schedule */
    int poll_ms;   /* period of the schedule's check and of the active-version poll
                      (default 1000) */
    /* A counter of requests on the latency-sensitive routes (labels, next
     * tasks, score), read from the worker thread between training steps: a
     * change means users are waiting and the run pauses. NULL: never pause. */
    uint64_t (*activity)(void *ctx);
    void *activity_ctx;
} lp_learner_opts;

/* Starts the learner: marks runs a previous process left unfinished as
 * failed, loads the active model, starts the threads. LP_ESTORAGE (err). */
int lp_learner_new(lp_store *s, const lp_learner_opts *o, lp_learner **out, char *err,
                   size_t errlen);
/* Cancels a running run, stops the threads, drops the served model. NULL ok. */
void lp_learner_free(lp_learner *l);

/* Queues a run (trigger "manual", "interval" or "labels"); *out gets the
 * queued run. LP_ERETRAIN_IN_PROGRESS while another run is queued or
 * active, here or on another server of the database. */
int lp_learner_start(lp_learner *l, const lp_train_request *req, const char *trigger, lp_run *out);
/* A run with live progress when it is the active one. LP_EUNKNOWN_RUN. */
int lp_learner_run_get(lp_learner *l, int64_t id, lp_run *out);
/* A run with its training curve (registry.h; server/service/curve.h for the
 * cap and thinning): live from memory while the run is active, else as
 * stored. *curve new (free()), NULL when empty. LP_EUNKNOWN_RUN. */
int lp_learner_run_curve(lp_learner *l, int64_t id, lp_run *out, lp_curve_point **curve, size_t *n);
/* Requests cancellation. LP_EUNKNOWN_RUN, LP_ERUN_FINISHED;
 * LP_ERETRAIN_IN_PROGRESS for a run another server of the database trains
 * (it is cancelled there). */
int lp_learner_cancel(lp_learner *l, int64_t id, lp_run *out);
/* A stored model with the model file (clear it). LP_EUNKNOWN_MODEL,
 * LP_EINTERNAL (a record this server cannot read), LP_ESTORAGE. */
int lp_learner_model_get(lp_learner *l, int64_t version, lp_model_view *out);
/* Every stored model, newest first, without the model file; *out
 * caller-owned (clear each, free()). */
int lp_learner_model_list(lp_learner *l, lp_model_view **out, size_t *n);
/* Serves a stored model version (roll back or forward). LP_EUNKNOWN_MODEL. */
int lp_learner_activate(lp_learner *l, int64_t version);
/* A reference to the served model (lp_served_unref it), or NULL. */
lp_served *lp_learner_served(lp_learner *l);
/* A reference to a stored model version (from the served one or the
 * registry). LP_EUNKNOWN_MODEL. */
int lp_learner_model(lp_learner *l, int64_t version, lp_served **out);
/* Wakes the scheduler after the schedule changed. */
void lp_learner_schedule_changed(lp_learner *l);

/* Counters for /metrics and /v1/stats. */
typedef struct lp_learner_stats {
    uint64_t runs[LP_RUN_STATUS_COUNT]; /* finished runs by final status, since start */
    double train_seconds_total;         /* wall time of finished runs */
    double last_duration_s;             /* of the last succeeded run; NAN if none */
    int64_t active_version;             /* 0: none */
    int64_t running;                    /* id of the active run; 0: none; -1: starting */
} lp_learner_stats;
void lp_learner_stats_get(lp_learner *l, lp_learner_stats *out);

#endif
