-- 005_conversations.sql — the earlier turns of a task's conversation
-- (PRAGMA user_version = 5).
--
-- A task's context is the conversation before its prompt: turns 0..n-1 in
-- order, each a role and its text. The prompt (the user turn being
-- answered) stays in tasks.prompt and is not repeated here. A task without
-- context has no rows. Turns are written with their task and never change.

CREATE TABLE task_turns (
    task     INTEGER NOT NULL REFERENCES tasks (id),
    position INTEGER NOT NULL CHECK (position >= 0),
    role     TEXT NOT NULL CHECK (role IN ('system', 'user', 'assistant')),
    content  TEXT NOT NULL,
    PRIMARY KEY (task, position)
) WITHOUT ROWID;

CREATE TRIGGER task_turns_append_only_update BEFORE UPDATE ON task_turns
BEGIN
    SELECT RAISE(ABORT, 'task turns are append-only');
END;

CREATE TRIGGER task_turns_append_only_delete BEFORE DELETE ON task_turns
BEGIN
    SELECT RAISE(ABORT, 'task turns are append-only');
END;
