-- 013_labels_append.sql — labels without the (annotator, nonce) index
-- (PRAGMA user_version = 13).
--
-- Nonces arrive in random order, so the UNIQUE (annotator, nonce) index
-- took a random page per label, written to the WAL by every commit. The
-- server now answers nonce reuse from an index in memory (server/db/labels.c:
-- a keyed hash of (annotator, nonce) per label id, rebuilt from this table
-- at start, each hit confirmed by reading the row by id). The table keeps
-- UNIQUE (annotator, task): the reads by annotator use it, and it keeps
-- resends and conflicts decided by SQL. Triggers of 001, 004 and 006 on
-- labels are recreated unchanged.

DROP TRIGGER labels_append_only_update;
DROP TRIGGER labels_append_only_delete;
DROP TRIGGER labels_fill;
DROP TRIGGER labels_views;

CREATE TABLE labels_append (
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
    UNIQUE (annotator, task)
);
INSERT INTO labels_append SELECT id, annotator, task, z, z_task, epsilon, nonce, timestamp_ms,
                                 signature, received_ms FROM labels ORDER BY id;
DROP TABLE labels;
ALTER TABLE labels_append RENAME TO labels;

CREATE TRIGGER labels_append_only_update BEFORE UPDATE ON labels
BEGIN
    SELECT RAISE(ABORT, 'labels are append-only');
END;

CREATE TRIGGER labels_append_only_delete BEFORE DELETE ON labels
BEGIN
    SELECT RAISE(ABORT, 'labels are append-only');
END;

CREATE TRIGGER labels_fill AFTER INSERT ON labels
BEGIN
    UPDATE task_fill SET labels = labels + 1 WHERE task = NEW.task;
    UPDATE campaign_fill
       SET labels = labels + 1,
           tasks_complete = tasks_complete +
               (SELECT f.labels = c.labels_per_task FROM task_fill f, campaigns c
                 WHERE f.task = NEW.task AND c.id = f.campaign)
     WHERE campaign = (SELECT campaign FROM task_fill WHERE task = NEW.task);
END;

CREATE TRIGGER labels_views AFTER INSERT ON labels
BEGIN
    UPDATE annotator_fill
       SET labels = labels + 1,
           last_label_ms = max(coalesce(last_label_ms, NEW.received_ms), NEW.received_ms)
     WHERE annotator = NEW.annotator;
    INSERT INTO label_minutes (campaign, minute, labels)
    SELECT campaign, NEW.received_ms / 60000, 1 FROM task_fill WHERE task = NEW.task
    ON CONFLICT (campaign, minute) DO UPDATE SET labels = labels + 1;
END;
