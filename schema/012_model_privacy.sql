-- 012_model_privacy.sql — the privacy of the labels every model was trained
-- on (PRAGMA user_version = 12).
--
-- One row per model, written in the same transaction as the model and
-- computed from the labels its training snapshot read (in the snapshot's
-- own read transaction): how many labels and distinct annotators, how many
-- labels were not privatized (epsilon NULL: infinite), the smallest and
-- largest epsilon among the privatized labels (NULL when there are none),
-- and the per-annotator total: the largest sum of one annotator's label
-- epsilons (NULL: infinite, when any label was not privatized). A model
-- whose training view consulted another model (corruption strategy "anti")
-- carries that model's labels too. A model without a row was trained before
-- this migration: its privacy is unknown, and it is treated as not
-- privatized (never served to an anonymous caller).

CREATE TABLE model_privacy (
    model                 INTEGER PRIMARY KEY REFERENCES models (version),
    labels                INTEGER NOT NULL CHECK (labels >= 0),
    annotators            INTEGER NOT NULL CHECK (annotators >= 0),
    unprivatized          INTEGER NOT NULL CHECK (unprivatized BETWEEN 0 AND labels),
    epsilon_min           REAL CHECK (epsilon_min IS NULL OR epsilon_min > 0),
    epsilon_max           REAL CHECK (epsilon_max IS NULL OR epsilon_max >= epsilon_min),
    epsilon_per_annotator REAL CHECK (epsilon_per_annotator IS NULL OR epsilon_per_annotator > 0)
) WITHOUT ROWID;
