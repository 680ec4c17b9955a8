-- 006_operator_views.sql — counters for the operator's views and /metrics
-- (PRAGMA user_version = 6).
--
-- Every figure the campaign, annotator and task views and the per-campaign
-- gauges show is read from a counter or through an index, never by a scan
-- over labels. Triggers keep the counters in the transaction of the row
-- they count (as task_fill and campaign_fill of 004 do).
--
-- annotator_fill: per annotator, its labels, its skipped assignments and
-- when its newest label was received (NULL before the first).
-- campaign_fill gains the campaign's annotators, the epsilon they spent
-- (the sum of annotators.epsilon_spent) and its assignments.
-- label_minutes: labels received per campaign per minute (received_ms
-- divided by 60000), the series the labels-over-time view adds up.

CREATE INDEX annotators_by_campaign ON annotators (campaign, id);

CREATE TABLE annotator_fill (
    annotator     INTEGER PRIMARY KEY REFERENCES annotators (id),
    labels        INTEGER NOT NULL DEFAULT 0,
    skips         INTEGER NOT NULL DEFAULT 0,
    last_label_ms INTEGER
);
INSERT INTO annotator_fill (annotator, labels, skips, last_label_ms)
SELECT a.id,
       (SELECT count(*) FROM labels l WHERE l.annotator = a.id),
       (SELECT count(*) FROM assignments s WHERE s.annotator = a.id AND s.skipped = 1),
       (SELECT max(l.received_ms) FROM labels l WHERE l.annotator = a.id)
FROM annotators a;

ALTER TABLE campaign_fill ADD COLUMN annotators INTEGER NOT NULL DEFAULT 0;
ALTER TABLE campaign_fill ADD COLUMN epsilon_spent REAL NOT NULL DEFAULT 0;
ALTER TABLE campaign_fill ADD COLUMN assignments INTEGER NOT NULL DEFAULT 0;
UPDATE campaign_fill
   SET annotators = (SELECT count(*) FROM annotators a WHERE a.campaign = campaign_fill.campaign),
       epsilon_spent = (SELECT coalesce(sum(a.epsilon_spent), 0) FROM annotators a
                         WHERE a.campaign = campaign_fill.campaign),
       assignments = (SELECT count(*) FROM assignments s JOIN task_fill f ON f.task = s.task
                       WHERE f.campaign = campaign_fill.campaign);

CREATE TABLE label_minutes (
    campaign INTEGER NOT NULL REFERENCES campaigns (id),
    minute   INTEGER NOT NULL,
    labels   INTEGER NOT NULL,
    PRIMARY KEY (campaign, minute)
) WITHOUT ROWID;
INSERT INTO label_minutes (campaign, minute, labels)
SELECT f.campaign, l.received_ms / 60000, count(*)
FROM labels l JOIN task_fill f ON f.task = l.task
GROUP BY f.campaign, l.received_ms / 60000;

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

CREATE TRIGGER annotators_views AFTER INSERT ON annotators
BEGIN
    INSERT INTO annotator_fill (annotator) VALUES (NEW.id);
    UPDATE campaign_fill
       SET annotators = annotators + 1, epsilon_spent = epsilon_spent + NEW.epsilon_spent
     WHERE campaign = NEW.campaign;
END;

CREATE TRIGGER annotators_spend AFTER UPDATE OF epsilon_spent ON annotators
BEGIN
    UPDATE campaign_fill SET epsilon_spent = epsilon_spent + (NEW.epsilon_spent - OLD.epsilon_spent)
     WHERE campaign = NEW.campaign;
END;

CREATE TRIGGER assignments_views AFTER INSERT ON assignments
BEGIN
    UPDATE campaign_fill SET assignments = assignments + 1
     WHERE campaign = (SELECT campaign FROM task_fill WHERE task = NEW.task);
END;

CREATE TRIGGER assignments_skip AFTER UPDATE OF skipped ON assignments
WHEN NEW.skipped = 1 AND OLD.skipped = 0
BEGIN
    UPDATE annotator_fill SET skips = skips + 1 WHERE annotator = NEW.annotator;
END;
