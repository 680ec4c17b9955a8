-- 010_operator_tokens.sql — operator tokens with an id, a name and scopes,
-- revocable (PRAGMA user_version = 10).
--
-- id is the token's public id (shown as "tok-<id>"); the token itself is
-- never stored, only its BLAKE2b-256 hash. scopes is a set of bits: 1 admin,
-- 2 export, 4 score (server/service/auth.h); 0 is a token that may read
-- /metrics only. revoked_ms is set once, when the token is revoked or
-- rotated away, and a revoked token is refused. Rows are never deleted and
-- only revoked_ms ever changes, so the table is the history of every token.
-- Tokens made before this migration keep working with every scope, named
-- "operator".

CREATE TABLE operator_tokens_v10 (
    id         INTEGER PRIMARY KEY,
    hash       BLOB NOT NULL UNIQUE CHECK (length(hash) = 32),
    name       TEXT NOT NULL CHECK (length(name) BETWEEN 1 AND 64),
    scopes     INTEGER NOT NULL CHECK (scopes BETWEEN 0 AND 7),
    created_ms INTEGER NOT NULL,
    revoked_ms INTEGER
);

INSERT INTO operator_tokens_v10 (hash, name, scopes, created_ms)
SELECT hash, 'operator', 7, created_ms FROM operator_tokens ORDER BY created_ms, hash;

DROP TABLE operator_tokens;
ALTER TABLE operator_tokens_v10 RENAME TO operator_tokens;

CREATE TRIGGER operator_tokens_keep BEFORE DELETE ON operator_tokens
BEGIN
    SELECT RAISE(ABORT, 'operator tokens are revoked, never deleted');
END;

CREATE TRIGGER operator_tokens_fixed BEFORE UPDATE OF id, hash, name, scopes, created_ms
ON operator_tokens
BEGIN
    SELECT RAISE(ABORT, 'an operator token only changes when it is revoked');
END;

CREATE TRIGGER operator_tokens_revoke_once BEFORE UPDATE OF revoked_ms ON operator_tokens
WHEN OLD.revoked_ms IS NOT NULL
BEGIN
    SELECT RAISE(ABORT, 'an operator token is revoked once');
END;
