-- 007_training_curve.sql — the training curve of every run
-- (PRAGMA user_version = 7).
--
-- One row per recorded observation of the optimizer (server/engine/
-- optimize.h): seq numbers the observations of a run from 0. A run keeps
-- every observation up to a cap and then every 2^k-th one (the learner
-- thins the stored rows as it goes, and always keeps the last one), so a
-- curve has at most a few thousand rows. grad_norm is NULL where the
-- optimizer reports none (an SGD/Adam epoch).

CREATE TABLE training_curve (
    run         INTEGER NOT NULL REFERENCES training_runs (id),
    seq         INTEGER NOT NULL CHECK (seq >= 0),
    iteration   INTEGER NOT NULL CHECK (iteration >= 0),
    evaluations INTEGER NOT NULL CHECK (evaluations >= 0),
    objective   REAL NOT NULL,
    grad_norm   REAL,
    t_ms        INTEGER NOT NULL CHECK (t_ms >= 0),
    PRIMARY KEY (run, seq)
) WITHOUT ROWID;
