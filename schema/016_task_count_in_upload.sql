-- 016_task_count_in_upload.sql — a campaign's task count written once per
-- upload (PRAGMA user_version = 16).
--
-- The tasks_fill trigger of 004 added one to campaign_fill.tasks for every
-- task row, so an upload of n tasks updated its campaign's counter row n
-- times in one transaction. The upload (server/db/tasks.c, the only code
-- that inserts tasks) now adds the number of tasks it inserted once, in
-- the transaction that stores them, so every committed state has
-- campaign_fill.tasks equal to the campaign's tasks. The trigger keeps
-- giving each new task its task_fill row.

DROP TRIGGER tasks_fill;
CREATE TRIGGER tasks_fill AFTER INSERT ON tasks
BEGIN
    INSERT INTO task_fill (task, campaign) VALUES (NEW.id, NEW.campaign);
END;
