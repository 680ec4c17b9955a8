-- 004_campaign_progress.sql — campaigns that finish: labels per task, quotas,
-- leases, skips and progress counts (PRAGMA user_version = 4).
--
-- labels_per_task: the labels each task needs; annotator_quota: the most
-- labels (plus open leases) one annotator may hold, NULL for none.
-- An assignment is a lease: it holds its task while leased_ms plus the
-- server's lease time (--lease-seconds) lies ahead; a skipped assignment
-- holds nothing and its task is never offered to that annotator again.
-- Existing assignments become leases taken when they were created.
-- task_fill and campaign_fill count the labels per task and per campaign;
-- triggers keep them in the transaction of the row they count.
-- campaign_fill.open_from: every task of the campaign with a smaller id has
-- all its labels (labels only grow), so the search for open tasks starts there.

ALTER TABLE campaigns ADD COLUMN labels_per_task INTEGER NOT NULL DEFAULT 1
    CHECK (labels_per_task >= 1);
ALTER TABLE campaigns ADD COLUMN annotator_quota INTEGER
    CHECK (annotator_quota IS NULL OR annotator_quota >= 1);

ALTER TABLE assignments ADD COLUMN leased_ms INTEGER NOT NULL DEFAULT 0;
ALTER TABLE assignments ADD COLUMN skipped INTEGER NOT NULL DEFAULT 0 CHECK (skipped IN (0, 1));
UPDATE assignments SET leased_ms = created_ms;
CREATE INDEX assignments_by_task ON assignments (task, leased_ms);

CREATE TABLE task_fill (
    task     INTEGER PRIMARY KEY REFERENCES tasks (id),
    campaign INTEGER NOT NULL REFERENCES campaigns (id),
    labels   INTEGER NOT NULL DEFAULT 0
);
INSERT INTO task_fill (task, campaign, labels)
SELECT t.id, t.campaign, coalesce(n.labels, 0)
FROM tasks t LEFT JOIN (SELECT task, count(*) AS labels FROM labels GROUP BY task) n
    ON n.task = t.id;

CREATE TABLE campaign_fill (
    campaign       INTEGER PRIMARY KEY REFERENCES campaigns (id),
    tasks          INTEGER NOT NULL DEFAULT 0,
    tasks_complete INTEGER NOT NULL DEFAULT 0,
    labels         INTEGER NOT NULL DEFAULT 0,
    open_from      INTEGER NOT NULL DEFAULT 0
);
INSERT INTO campaign_fill (campaign, tasks, tasks_complete, labels)
SELECT c.id,
       (SELECT count(*) FROM task_fill f WHERE f.campaign = c.id),
       (SELECT count(*) FROM task_fill f WHERE f.campaign = c.id AND f.labels >= 1),
       (SELECT coalesce(sum(f.labels), 0) FROM task_fill f WHERE f.campaign = c.id)
FROM campaigns c;

CREATE TRIGGER campaigns_fill AFTER INSERT ON campaigns
BEGIN
    INSERT INTO campaign_fill (campaign) VALUES (NEW.id);
END;

CREATE TRIGGER tasks_fill AFTER INSERT ON tasks
BEGIN
    INSERT INTO task_fill (task, campaign) VALUES (NEW.id, NEW.campaign);
    UPDATE campaign_fill SET tasks = tasks + 1 WHERE campaign = NEW.campaign;
END;

-- A task is complete when its count reaches the campaign's labels_per_task.
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
