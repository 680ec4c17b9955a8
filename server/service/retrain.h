/*
 * retrain.h — the server's learner: training runs in the background, the
 * model registry's served model, and periodic retraining.
 *
 * One worker thread runs one training run at a time: it builds a snapshot
 * of the labels up to a cut-off (snapshot.h), fits the requested loss
 * (server/engine), stores the model with its settings, metrics and the
 * corruption in force (registry.h), and — unless asked not to — swaps it
 * in as the served model. The worker runs under SCHED_IDLE (and the
 * objective's helper threads inherit it), so training uses only CPU time
 * that ingest does not want. A failed or cancelled run stores no model and
 * leaves the served model untouched.
 *
 * A scheduler thread starts runs from the stored schedule: every
 * interval_s seconds since the last run started, and/or when every_labels
 * labels arrived after the last run's cut-off; never while a run is active.
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

#include <jansson.h>
#include <stdint.h>

/* A validated retrain request (docs/design.md §3.5; docs/protocol.md). */
typedef struct lp_train_request {
    lp_loss_spec loss;
    int64_t campaign; /* 0: all */
    char campaign_name[LP_CAMPAIGN_NAME_MAX + 1];
    int64_t cutoff; /* 0: newest at start */
    double beta, l2;
    lp_fit_opts fit; /* method, max_iter, norm_bound, lr, batch, epochs, seed */
    lp_feature_mode features;
    lp_feat_spec text;
    int threads;
    int activate;
} lp_train_request;

/* Parses and validates a request object (NULL = {}), resolving the campaign
 * by name. Errors (msg names the field): LP_EUNKNOWN_LOSS,
 * LP_EBAD_HYPERPARAMETER, LP_EWRONG_TYPE, LP_EUNKNOWN_FIELD,
 * LP_EUNKNOWN_CAMPAIGN. */
int lp_train_request_parse(lp_store *s, const json_t *obj, int default_threads,
                           lp_train_request *out, char *msg, size_t msglen);
/* The normalized request as JSON (every field explicit); new reference. */
json_t *lp_train_request_json(const lp_train_request *r);

typedef struct lp_learner lp_learner;

typedef struct lp_learner_opts {
    int threads;   /* default training threads (>= 1) */
    int scheduler; /* 1: run the periodic trigger thread */
    int poll_ms;   /* scheduler period (default 1000) */
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
 * queued run (clear it). LP_ERETRAIN_IN_PROGRESS while another run is
 * queued or active. */
int lp_learner_start(lp_learner *l, const lp_train_request *req, const char *trigger, lp_run *out);
/* A run with live progress when it is the active one. LP_EUNKNOWN_RUN. */
int lp_learner_run_get(lp_learner *l, int64_t id, lp_run *out);
/* Requests cancellation. LP_EUNKNOWN_RUN, LP_ERUN_FINISHED. */
int lp_learner_cancel(lp_learner *l, int64_t id, lp_run *out);
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
