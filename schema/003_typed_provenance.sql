-- 003_typed_provenance.sql — the learner's records in typed columns
-- (PRAGMA user_version = 3).
--
-- A run's request settings and the schedule's are rows of train_settings
-- (until now JSON text); the corruption settings in force when a model was
-- trained are rows of model_corruption (until now a JSON array), and the
-- model's feature plan is typed columns of models. The rows of a version-2
-- database are converted: every run, model and schedule is kept. The model
-- file and its summary (models.model, models.summary) are the model artifact
-- and stay JSON.

CREATE TABLE train_settings (
    id                INTEGER PRIMARY KEY,
    loss              TEXT NOT NULL,
    campaign          INTEGER REFERENCES campaigns (id),  -- NULL: every campaign
    cutoff            INTEGER,        -- newest label id trained on; NULL: newest at start
    seed              INTEGER NOT NULL CHECK (seed >= 0),
    beta              REAL NOT NULL,
    rmax              REAL NOT NULL,
    tau               REAL NOT NULL,
    l2                REAL NOT NULL,
    norm_bound        REAL,           -- NULL: none
    optimizer         TEXT NOT NULL CHECK (optimizer IN ('lbfgs', 'sgd', 'adam')),
    max_iter          INTEGER NOT NULL,
    epochs            INTEGER NOT NULL,
    lr                REAL NOT NULL,
    batch             INTEGER NOT NULL,
    features          TEXT NOT NULL CHECK (features IN ('auto', 'dense', 'text')),
    text_dim          INTEGER NOT NULL CHECK (text_dim >= 1),
    text_bigrams      INTEGER NOT NULL CHECK (text_bigrams IN (0, 1)),
    text_cross_prompt INTEGER NOT NULL CHECK (text_cross_prompt IN (0, 1)),
    text_length       INTEGER NOT NULL CHECK (text_length IN (0, 1)),
    threads           INTEGER NOT NULL CHECK (threads >= 1),
    activate          INTEGER NOT NULL CHECK (activate IN (0, 1))
);

-- The requests of version 2, runs first (settings id = run id), then the
-- schedules (after the last run id). Missing fields take the defaults.
WITH v2 (id, request) AS (
    SELECT id, request FROM training_runs
    UNION ALL
    SELECT (SELECT COALESCE(MAX(id), 0) FROM training_runs) + id, request FROM retrain_schedule
)
INSERT INTO train_settings (id, loss, campaign, cutoff, seed, beta, rmax, tau, l2, norm_bound,
                            optimizer, max_iter, epochs, lr, batch, features, text_dim,
                            text_bigrams, text_cross_prompt, text_length, threads, activate)
SELECT v2.id,
       COALESCE(json_extract(v2.request, '$.loss'), 'square-chipo'),
       (SELECT c.id FROM campaigns c WHERE c.name = json_extract(v2.request, '$.campaign')),
       json_extract(v2.request, '$.cutoff'),
       COALESCE(json_extract(v2.request, '$.seed'), 0),
       COALESCE(json_extract(v2.request, '$.beta'), 1.0),
       COALESCE(json_extract(v2.request, '$.rmax'), 1.0),
       COALESCE(json_extract(v2.request, '$.tau'), 0.5),
       COALESCE(json_extract(v2.request, '$.l2'), 0.0),
       json_extract(v2.request, '$.norm_bound'),
       COALESCE(json_extract(v2.request, '$.optimizer'), 'lbfgs'),
       COALESCE(json_extract(v2.request, '$.max_iter'), 500),
       COALESCE(json_extract(v2.request, '$.epochs'), 1),
       COALESCE(json_extract(v2.request, '$.lr'), 0.5),
       COALESCE(json_extract(v2.request, '$.batch'), 1),
       COALESCE(json_extract(v2.request, '$.features'), 'auto'),
       COALESCE(json_extract(v2.request, '$.text.dim'), 4096),
       COALESCE(json_extract(v2.request, '$.text.bigrams'), 1),
       COALESCE(json_extract(v2.request, '$.text.cross_prompt'), 0),
       COALESCE(json_extract(v2.request, '$.text.length'), 1),
       COALESCE(json_extract(v2.request, '$.threads'), 1),
       COALESCE(json_extract(v2.request, '$.activate'), 1)
FROM v2;

-- Every run and schedule row written from now on has its settings.
ALTER TABLE training_runs ADD COLUMN settings INTEGER REFERENCES train_settings (id);
UPDATE training_runs SET settings = id;
ALTER TABLE training_runs DROP COLUMN request;

ALTER TABLE retrain_schedule ADD COLUMN settings INTEGER REFERENCES train_settings (id);
UPDATE retrain_schedule SET settings = (SELECT COALESCE(MAX(id), 0) FROM training_runs) + id;
ALTER TABLE retrain_schedule DROP COLUMN request;

-- The corruption settings in force when a model was trained, one row per
-- campaign; anti_model: for strategy anti, the model asked about tasks
-- without a reference preference (NULL: none was served).
CREATE TABLE model_corruption (
    model      INTEGER NOT NULL REFERENCES models (version),
    settings   INTEGER NOT NULL REFERENCES corruption_settings (id),
    anti_model INTEGER REFERENCES models (version),
    PRIMARY KEY (model, settings)
);

INSERT INTO model_corruption (model, settings, anti_model)
SELECT m.version, json_extract(e.value, '$.id'), json_extract(e.value, '$.anti_model')
FROM models m, json_each(m.corruption) e;

-- The feature plan a model was trained with: dense (dim features per
-- response) or text (the featurizer's spec; NULL for dense models).
DROP TRIGGER models_append_only_update;
ALTER TABLE models ADD COLUMN features TEXT NOT NULL DEFAULT 'dense'
    CHECK (features IN ('dense', 'text'));
ALTER TABLE models ADD COLUMN dim INTEGER NOT NULL DEFAULT 0;
ALTER TABLE models ADD COLUMN text_dim INTEGER;
ALTER TABLE models ADD COLUMN text_bigrams INTEGER;
ALTER TABLE models ADD COLUMN text_cross_prompt INTEGER;
ALTER TABLE models ADD COLUMN text_cross_max INTEGER;
ALTER TABLE models ADD COLUMN text_length INTEGER;
UPDATE models SET
    features = COALESCE(json_extract(summary, '$.features.kind'), 'dense'),
    dim = COALESCE(json_extract(summary, '$.features.dim'), 0),
    text_dim = json_extract(summary, '$.features.hash_dim'),
    text_bigrams = json_extract(summary, '$.features.bigrams'),
    text_cross_prompt = json_extract(summary, '$.features.cross_prompt'),
    text_cross_max = json_extract(summary, '$.features.cross_max'),
    text_length = json_extract(summary, '$.features.length');
ALTER TABLE models DROP COLUMN corruption;

CREATE TRIGGER models_append_only_update BEFORE UPDATE ON models
BEGIN
    SELECT RAISE(ABORT, 'models are append-only');
END;

CREATE TRIGGER train_settings_append_only_update BEFORE UPDATE ON train_settings
BEGIN
    SELECT RAISE(ABORT, 'training settings are append-only');
END;

CREATE TRIGGER model_corruption_append_only_update BEFORE UPDATE ON model_corruption
BEGIN
    SELECT RAISE(ABORT, 'a model''s corruption record is append-only');
END;

CREATE TRIGGER model_corruption_append_only_delete BEFORE DELETE ON model_corruption
BEGIN
    SELECT RAISE(ABORT, 'a model''s corruption record is append-only');
END;
