-- 016_task_count_in_upload.sql — a campaign's task count written once per
-- upload (schema_version 16), as SQLite's schema/016_task_count_in_upload.sql.
--
-- The upload (server/db/tasks.c) adds the number of tasks it inserted to
-- campaign_fill.tasks once, inside the transaction that stores them, so the
-- tasks_fill trigger no longer updates the campaign's counter row for every
-- task (each of those updates made a row version that the next one stepped
-- past). The trigger keeps giving each new task its task_fill row.

CREATE OR REPLACE FUNCTION tasks_fill() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO task_fill (task, campaign) VALUES (NEW.id, NEW.campaign);
    RETURN NULL;
END;
$$;

INSERT INTO schema_version (version) VALUES (16);
