/*
 * registry.h — the learning records in SQLite (schema/002_learn.sql,
 * schema/003_typed_provenance.sql, schema/007_training_curve.sql,
 * schema/012_model_privacy.sql): training
 * runs with their settings and curves,
 * models with the corruption settings and feature plan they were trained
 * with, activations, corruption settings, the retrain schedule. Writes are
 * jobs of the storage engine's writer (engine.h), reads through its read
 * pool, so they share the store's durability and never block label ingest
 * for longer than one small transaction.
 *
 * Records are typed: plain strings and numbers, named as on the wire; the
 * service layer converts them to its own types. Only the model artifact
 * (the model file and its summary) is JSON text. Strings and arrays a record
 * owns are freed by its *_clear (NULL ok).
 */
#ifndef LP_REGISTRY_H
#define LP_REGISTRY_H

#include "adversary.h"
#include "label_cursor.h"
#include "store.h"

#include <stddef.h>
#include <stdint.h>

/* ---- corruption settings ---- */

/* One settings record of a campaign's LTC corruption (server/service/corrupt.h). */
typedef struct lp_corruption {
    int64_t id;       /* settings record id; 0 = no corruption */
    int64_t campaign; /* campaign id */
    char campaign_name[LP_CAMPAIGN_NAME_MAX + 1];
    double alpha; /* [0, 0.5] */
    lp_adversary strategy;
    uint64_t seed;   /* [0, 2^53] so that it survives JSON numbers */
    int64_t feature; /* backdoor: the feature index compared */
    int64_t created_ms;
} lp_corruption;

/* Appends settings (campaign, alpha, strategy, seed, feature set); fills id
 * and created_ms. */
int lp_registry_corruption_add(lp_store *s, lp_corruption *c);
/* The settings in force for a campaign (newest record); id = 0 if none. */
int lp_registry_corruption_current(lp_store *s, int64_t campaign, lp_corruption *out);
/* The settings in force with alpha > 0, one per campaign, by campaign id;
 * *out caller-owned (free()). */
int lp_registry_corruption_active(lp_store *s, lp_corruption **out, size_t *n);

/* ---- training settings ---- */

/* The settings of a retrain request as stored (train_settings), shared by
 * runs and the schedule. Names are the wire names. */
typedef struct lp_train_settings {
    char loss[32];
    int64_t campaign; /* 0: every campaign */
    char campaign_name[LP_CAMPAIGN_NAME_MAX + 1];
    int64_t cutoff; /* 0: the newest label at start */
    uint64_t seed;
    double beta, rmax, tau, l2;
    int l2_auto;       /* 1: "l2": "auto" (l2 is then 0) */
    double norm_bound; /* INFINITY: none */
    char optimizer[16];
    int max_iter, epochs, batch;
    double lr;
    char features[8]; /* "auto", "dense", "text" */
    int64_t text_dim;
    int text_bigrams, text_cross_prompt, text_length;
    int threads;
    int activate;
    /* schema/014: a private release ("" none; "exponential", "aup"), its
     * epsilon and delta, and the exponential mechanism's candidate set */
    char mechanism[16];
    double release_epsilon, release_delta;
    char candidates[64];
} lp_train_settings;

/* ---- training runs ---- */

typedef enum lp_run_status {
    LP_RUN_QUEUED = 0,
    LP_RUN_SNAPSHOT,
    LP_RUN_TRAINING,
    LP_RUN_STORING,
    LP_RUN_SUCCEEDED,
    LP_RUN_FAILED,
    LP_RUN_CANCELLED,
    LP_RUN_STATUS_COUNT
} lp_run_status;

const char *lp_run_status_name(lp_run_status st);
/* Whether the status is final (succeeded, failed, cancelled). */
int lp_run_status_final(lp_run_status st);

typedef struct lp_run {
    int64_t id;
    char trigger[16];           /* "manual", "interval", "labels" */
    lp_train_settings settings; /* the normalized request */
    lp_run_status status;
    int64_t cutoff; /* 0: not yet known */
    int64_t labels;
    int iterations, evaluations;
    double objective, grad_norm; /* NAN when unknown */
    int error;                   /* LP_E* code when failed or cancelled, else 0 */
    char message[256];
    int64_t model_version;                       /* 0: none */
    int64_t created_ms, started_ms, finished_ms; /* 0: not yet */
} lp_run;

/* Inserts a queued run with its settings; fills r->id and created_ms. */
int lp_registry_run_create(lp_store *s, lp_run *r);
/* Stores the run's status, counters, error and times (not its settings). */
int lp_registry_run_update(lp_store *s, const lp_run *r);
/* LP_EUNKNOWN_RUN if there is none. */
int lp_registry_run_get(lp_store *s, int64_t id, lp_run *out);
/* The newest runs first, at most limit; *out caller-owned (free()). */
int lp_registry_run_list(lp_store *s, size_t limit, lp_run **out, size_t *n);
/* Marks runs left unfinished by a previous process as failed. */
int lp_registry_runs_interrupted(lp_store *s);

/* ---- training curves ---- */

/* One observation of the optimizer during a run (schema/007). */
typedef struct lp_curve_point {
    int64_t seq;      /* the observation's number in its run, from 0 */
    int iteration;    /* L-BFGS iterations, or SGD/Adam steps, so far */
    int evaluations;  /* full objective evaluations so far */
    double objective; /* finite */
    double grad_norm; /* NAN: not reported */
    int64_t t_ms;     /* since the fit started */
} lp_curve_point;

/* In one transaction: when thin_stride > 1, deletes the run's stored points
 * whose seq is not a multiple of it; then inserts pts (borrowed). */
int lp_registry_curve_append(lp_store *s, int64_t run, int64_t thin_stride,
                             const lp_curve_point *pts, size_t n);
/* The run's stored points by seq; *out caller-owned (free()), NULL if none. */
int lp_registry_curve_get(lp_store *s, int64_t run, lp_curve_point **out, size_t *n);

/* ---- models ---- */

typedef struct lp_model_record {
    int64_t version;
    int64_t run;
    char loss[32];
    int64_t campaign;                             /* 0: all campaigns */
    char campaign_name[LP_CAMPAIGN_NAME_MAX + 1]; /* "" for all */
    int64_t cutoff, labels, duration_ms, created_ms;
    /* the feature plan: "dense" (dim features per response) or "text" (the
     * featurizer's spec; zero for dense models) */
    char features[8];
    int64_t dim;
    int64_t text_dim;
    int text_bigrams, text_cross_prompt, text_cross_max, text_length;
    lp_train_settings settings; /* of the run that trained it */
    /* the corruption settings in force, by campaign (owned); anti_model:
     * the model strategy anti asked about tasks without a reference
     * preference (0: none was served) */
    lp_corruption *corruption;
    size_t n_corruption;
    int64_t anti_model;
    /* the privacy of the labels it was trained on (known 0: trained before
     * the record existed) */
    lp_label_privacy privacy;
    /* the release that produced it (schema/014): mechanism "" when none */
    char mechanism[16];
    double release_epsilon, release_delta;
    char *summary; /* the model file without theta (JSON text), owned */
    char *model;   /* model file JSON text, owned; NULL when listed */
} lp_model_record;

void lp_model_record_clear(lp_model_record *m);
/* Appends a model with its corruption rows, its privacy record (when
 * known) (everything borrowed) and, when activate is set, its activation,
 * in one transaction; fills version and created_ms. A release (mechanism
 * set) is checked against its campaign's release budget in the same
 * transaction: LP_ERELEASE_BUDGET_EXHAUSTED stores nothing, so concurrent
 * releases never spend more than the budget together. */
int lp_registry_model_add(lp_store *s, lp_model_record *m, int activate);
/* With the model text. LP_EUNKNOWN_MODEL. */
int lp_registry_model_get(lp_store *s, int64_t version, lp_model_record *out);
/* Newest first, without model text; *out caller-owned (clear each, free()). */
int lp_registry_model_list(lp_store *s, lp_model_record **out, size_t *n);
/* Appends an activation. LP_EUNKNOWN_MODEL. */
int lp_registry_activate(lp_store *s, int64_t version);
/* The served version (newest activation); 0 if none. */
int lp_registry_active_version(lp_store *s, int64_t *version);

/* ---- schedule ---- */

typedef struct lp_schedule {
    int64_t interval_s;         /* 0: off */
    int64_t every_labels;       /* 0: off */
    int has_settings;           /* 0: no schedule was ever set */
    lp_train_settings settings; /* the request of scheduled runs (cutoff 0) */
} lp_schedule;

/* Appends a schedule with its settings. */
int lp_registry_schedule_set(lp_store *s, const lp_schedule *sc);
/* The newest schedule; both triggers 0 and has_settings 0 if none. */
int lp_registry_schedule_get(lp_store *s, lp_schedule *out);

/* ---- tasks ---- */

/* A task's stored feature vectors: *f0, *f1 new arrays of *dim values
 * (free()), or NULL and 0 when the task has none. LP_EUNKNOWN_TASK. */
int lp_registry_task_features(lp_store *s, int64_t task, double **f0, double **f1, size_t *dim);

/* ---- label counters for the scheduler ---- */

/* The newest label id (0 if none), optionally of one campaign (0: all). */
int lp_registry_max_label(lp_store *s, int64_t campaign, int64_t *out);

#endif
