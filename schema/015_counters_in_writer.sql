-- 015_counters_in_writer.sql — label counters written once per commit
-- (PRAGMA user_version = 15).
--
-- The counters that 004 and 006 kept with triggers on every label row
-- (task_fill.labels, campaign_fill.labels, tasks_complete and epsilon_spent,
-- annotator_fill.labels and last_label_ms, label_minutes) are now written by
-- the label writer (server/db/labels.c): it adds up a transaction's labels
-- in memory and writes each counter once per commit (per task, annotator,
-- campaign and minute), inside the transaction that stores the labels, so
-- every committed state has counters equal to what the labels give. The
-- label writer is the only code that inserts labels or changes
-- annotators.epsilon_spent. The triggers on other tables stay: they fire
-- once per row of a rare write (a campaign, task, annotator, assignment or
-- skip), which no batching would save.

DROP TRIGGER labels_fill;
DROP TRIGGER labels_views;
DROP TRIGGER annotators_spend;
