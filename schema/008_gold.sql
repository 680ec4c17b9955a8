-- 008_gold.sql — gold tasks: a task's known better response
-- (PRAGMA user_version = 8).
--
-- gold: the response an operator declared better when uploading the task,
-- in the task's own orientation (0 = response0, 1 = response1), the same
-- orientation as labels.z_task; NULL for a task without a known answer.
-- Written with its task and never changed.

ALTER TABLE tasks ADD COLUMN gold INTEGER CHECK (gold IS NULL OR gold IN (0, 1));
