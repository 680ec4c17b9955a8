-- 014_central_campaigns.sql — trusted-curator (central) campaigns, their
-- model-release budget, per-annotator contribution caps and the release
-- record of every model (PRAGMA user_version = 14).
--
-- trust: 'local' (labels are randomized on the annotator's device) or
-- 'central' (annotators send their true labels; only models released by a
-- differentially private mechanism leave the server). release_epsilon: the
-- campaign's model-release budget in pure DP (NULL: none, no release);
-- release_delta: the total delta of approximate-DP releases (NULL: 0).
-- contribution_cap: the most labels one annotator gives (m; NULL: none).
-- A model's mechanism, release_epsilon and release_delta: the release that
-- produced it (NULL: none, the model was fitted on the labels directly).
-- The spent totals of a campaign are sums over its models' releases (basic
-- composition), checked and written in the transaction that stores a model.
-- train_settings keep a request's mechanism, epsilon, delta and candidate
-- set so that a stored run or schedule replays the same release.

ALTER TABLE campaigns ADD COLUMN trust TEXT NOT NULL DEFAULT 'local'
    CHECK (trust IN ('local', 'central'));
ALTER TABLE campaigns ADD COLUMN release_epsilon REAL
    CHECK (release_epsilon IS NULL OR release_epsilon > 0);
ALTER TABLE campaigns ADD COLUMN release_delta REAL
    CHECK (release_delta IS NULL OR (release_delta >= 0 AND release_delta < 1));
ALTER TABLE campaigns ADD COLUMN contribution_cap INTEGER
    CHECK (contribution_cap IS NULL OR contribution_cap >= 1);

ALTER TABLE model_privacy ADD COLUMN mechanism TEXT
    CHECK (mechanism IS NULL OR mechanism IN ('exponential', 'aup'));
ALTER TABLE model_privacy ADD COLUMN release_epsilon REAL
    CHECK (release_epsilon IS NULL OR release_epsilon > 0);
ALTER TABLE model_privacy ADD COLUMN release_delta REAL
    CHECK (release_delta IS NULL OR (release_delta >= 0 AND release_delta < 1));

ALTER TABLE train_settings ADD COLUMN mechanism TEXT;
ALTER TABLE train_settings ADD COLUMN release_epsilon REAL;
ALTER TABLE train_settings ADD COLUMN release_delta REAL;
ALTER TABLE train_settings ADD COLUMN candidates TEXT;
