-- 015_counters_in_writer.sql — label counters written once per commit
-- (schema_version 15), as SQLite's schema/015_counters_in_writer.sql.
--
-- The label writer (server/db/labels.c) adds up a transaction's labels and
-- writes each counter (task_fill, campaign_fill, annotator_fill,
-- label_minutes, annotators.epsilon_spent) once per commit, inside the
-- transaction that stores the labels, so these per-row triggers go. The
-- triggers on other tables stay.

DROP TRIGGER labels_fill ON labels;
DROP FUNCTION labels_fill();
DROP TRIGGER labels_views ON labels;
DROP FUNCTION labels_views();
DROP TRIGGER annotators_spend ON annotators;
DROP FUNCTION annotators_spend();

INSERT INTO schema_version (version) VALUES (15);
