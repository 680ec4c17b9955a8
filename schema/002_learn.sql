-- 002_learn.sql — training runs, models, activations, corruption settings
-- and the retrain schedule (PRAGMA user_version = 2).
--
-- Models, activations and corruption settings are append-only records: the
-- served model is the newest activation, the corruption in force for a
-- campaign is its newest settings row, the schedule is its newest row.
-- Training runs are job records whose status moves forward once.

CREATE TABLE corruption_settings (
    id         INTEGER PRIMARY KEY,
    campaign   INTEGER NOT NULL REFERENCES campaigns (id),
    alpha      REAL NOT NULL CHECK (alpha >= 0 AND alpha <= 0.5),
    strategy   TEXT NOT NULL CHECK (strategy IN ('flip', 'constant0', 'constant1', 'random',
                                                 'anti', 'backdoor')),
    seed       INTEGER NOT NULL,
    feature    INTEGER NOT NULL DEFAULT 0 CHECK (feature >= 0),
    created_ms INTEGER NOT NULL
);
CREATE INDEX corruption_settings_campaign ON corruption_settings (campaign, id);

CREATE TABLE training_runs (
    id            INTEGER PRIMARY KEY,
    trigger_kind  TEXT NOT NULL CHECK (trigger_kind IN ('manual', 'interval', 'labels')),
    request       TEXT NOT NULL,  -- the normalized retrain request (JSON)
    status        TEXT NOT NULL CHECK (status IN ('queued', 'snapshot', 'training', 'storing',
                                                  'succeeded', 'failed', 'cancelled')),
    cutoff        INTEGER,        -- newest label id in the snapshot
    labels        INTEGER NOT NULL DEFAULT 0,
    iterations    INTEGER NOT NULL DEFAULT 0,
    evaluations   INTEGER NOT NULL DEFAULT 0,
    objective     REAL,
    grad_norm     REAL,
    error         TEXT,           -- wire name of the failure
    message       TEXT,
    model_version INTEGER REFERENCES models (version),
    created_ms    INTEGER NOT NULL,
    started_ms    INTEGER,
    finished_ms   INTEGER
);

CREATE TABLE models (
    version     INTEGER PRIMARY KEY,
    run         INTEGER NOT NULL REFERENCES training_runs (id),
    loss        TEXT NOT NULL,
    campaign    INTEGER REFERENCES campaigns (id),  -- NULL: every campaign
    cutoff      INTEGER NOT NULL,
    labels      INTEGER NOT NULL,
    corruption  TEXT NOT NULL,    -- JSON array of the settings in force
    duration_ms INTEGER NOT NULL,
    summary     TEXT NOT NULL,    -- the model file without theta (JSON)
    model       TEXT NOT NULL,    -- the model file (ldpref-train format)
    created_ms  INTEGER NOT NULL
);

CREATE TABLE activations (
    id           INTEGER PRIMARY KEY,
    version      INTEGER NOT NULL REFERENCES models (version),
    activated_ms INTEGER NOT NULL
);

CREATE TABLE retrain_schedule (
    id           INTEGER PRIMARY KEY,
    interval_s   INTEGER NOT NULL CHECK (interval_s >= 0),
    every_labels INTEGER NOT NULL CHECK (every_labels >= 0),
    request      TEXT NOT NULL,
    created_ms   INTEGER NOT NULL
);

CREATE TRIGGER models_append_only_update BEFORE UPDATE ON models
BEGIN
    SELECT RAISE(ABORT, 'models are append-only');
END;

CREATE TRIGGER models_append_only_delete BEFORE DELETE ON models
BEGIN
    SELECT RAISE(ABORT, 'models are append-only');
END;

CREATE TRIGGER corruption_settings_append_only_update BEFORE UPDATE ON corruption_settings
BEGIN
    SELECT RAISE(ABORT, 'corruption settings are append-only');
END;

CREATE TRIGGER activations_append_only_update BEFORE UPDATE ON activations
BEGIN
    SELECT RAISE(ABORT, 'activations are append-only');
END;
