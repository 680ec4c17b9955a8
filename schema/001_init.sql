-- 001_init.sql — ldpref-server schema, version 1 (PRAGMA user_version = 1).
--
-- Applied once by server/db/engine.c (embedded as server/db/schema_sql.c,
-- which tests/unit/test_store.c checks byte-for-byte against this file).
-- Received labels are append-only: triggers forbid UPDATE and DELETE.
-- Feature vectors are BLOBs of IEEE-754 binary64 values in host byte order
-- (little-endian on every supported target), one per response, same length.

CREATE TABLE campaigns (
    id              INTEGER PRIMARY KEY,
    name            TEXT NOT NULL UNIQUE,
    epsilon_min     REAL NOT NULL CHECK (epsilon_min > 0),
    epsilon_max     REAL NOT NULL CHECK (epsilon_max >= epsilon_min),
    allow_infinite  INTEGER NOT NULL DEFAULT 0 CHECK (allow_infinite IN (0, 1)),
    epsilon_budget  REAL NOT NULL CHECK (epsilon_budget > 0),
    epsilon_default REAL NOT NULL CHECK (epsilon_default > 0),
    created_ms      INTEGER NOT NULL
);

INSERT INTO campaigns (name, epsilon_min, epsilon_max, allow_infinite, epsilon_budget,
                       epsilon_default, created_ms)
VALUES ('default', 0.01, 10, 0, 1000, 1, 0);

CREATE TABLE tasks (
    id                  INTEGER PRIMARY KEY,
    campaign            INTEGER NOT NULL REFERENCES campaigns (id),
    source_id           TEXT NOT NULL,
    prompt              TEXT NOT NULL,
    response0           TEXT NOT NULL,
    response1           TEXT NOT NULL,
    features0           BLOB,
    features1           BLOB,
    reference_preferred INTEGER CHECK (reference_preferred IN (0, 1)),
    created_ms          INTEGER NOT NULL,
    UNIQUE (campaign, source_id)
);
CREATE INDEX tasks_by_campaign ON tasks (campaign, id);

CREATE TABLE annotators (
    id            INTEGER PRIMARY KEY,
    public_key    BLOB NOT NULL UNIQUE CHECK (length(public_key) = 32),
    pseudonym     TEXT NOT NULL UNIQUE,
    campaign      INTEGER NOT NULL REFERENCES campaigns (id),
    revoked       INTEGER NOT NULL DEFAULT 0 CHECK (revoked IN (0, 1)),
    epsilon_spent REAL NOT NULL DEFAULT 0,
    enrolled_ms   INTEGER NOT NULL
);

CREATE TABLE enrollment_tokens (
    hash       BLOB PRIMARY KEY CHECK (length(hash) = 32),
    campaign   INTEGER NOT NULL REFERENCES campaigns (id),
    created_ms INTEGER NOT NULL,
    used_by    INTEGER REFERENCES annotators (id)
) WITHOUT ROWID;

CREATE TABLE operator_tokens (
    hash       BLOB PRIMARY KEY CHECK (length(hash) = 32),
    created_ms INTEGER NOT NULL
) WITHOUT ROWID;

-- Presentation order per (annotator, task): swapped = 1 means the annotator
-- saw a = response1, b = response0. Tasks are assigned in increasing id order.
CREATE TABLE assignments (
    annotator  INTEGER NOT NULL REFERENCES annotators (id),
    task       INTEGER NOT NULL REFERENCES tasks (id),
    swapped    INTEGER NOT NULL CHECK (swapped IN (0, 1)),
    created_ms INTEGER NOT NULL,
    PRIMARY KEY (annotator, task)
) WITHOUT ROWID;

-- z: the privatized answer as presented (1 = "b" reported preferred);
-- z_task: the same answer in the task's orientation (1 = response1).
-- epsilon NULL means not privatized (epsilon = infinity).
CREATE TABLE labels (
    id           INTEGER PRIMARY KEY,
    annotator    INTEGER NOT NULL REFERENCES annotators (id),
    task         INTEGER NOT NULL REFERENCES tasks (id),
    z            INTEGER NOT NULL CHECK (z IN (0, 1)),
    z_task       INTEGER NOT NULL CHECK (z_task IN (0, 1)),
    epsilon      REAL CHECK (epsilon IS NULL OR epsilon > 0),
    nonce        BLOB NOT NULL CHECK (length(nonce) = 16),
    timestamp_ms INTEGER NOT NULL,
    signature    BLOB NOT NULL CHECK (length(signature) = 64),
    received_ms  INTEGER NOT NULL,
    UNIQUE (annotator, task),
    UNIQUE (annotator, nonce)
);

CREATE TRIGGER labels_append_only_update BEFORE UPDATE ON labels
BEGIN
    SELECT RAISE(ABORT, 'labels are append-only');
END;

CREATE TRIGGER labels_append_only_delete BEFORE DELETE ON labels
BEGIN
    SELECT RAISE(ABORT, 'labels are append-only');
END;
