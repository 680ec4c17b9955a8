-- 011_audit.sql — the audit log of operator actions (PRAGMA user_version = 11).
--
-- One row per operator action: who (token_id, the operator token's id; 0
-- when unknown), what (action: method and route, e.g. "POST /v1/campaigns";
-- params: the request's JSON with secrets redacted, or a size and hash),
-- the outcome (status: the HTTP status; error: the error's name, '' on
-- success) and when (at_ms). server/api/api_audit.c decides which requests
-- are recorded; docs/operators.md "Audit log" lists them.
--
-- Rows are append-only (the triggers below) and hash-chained: hash is
-- BLAKE2b-256 of prev_hash followed by a length-prefixed encoding of id,
-- at_ms, token_id, action, params, status and error (server/db/audit.c);
-- prev_hash is the hash of the row before, 32 zero bytes for the first.
-- `ldpref-server --verify-audit` walks the chain.

CREATE TABLE audit (
    id        INTEGER PRIMARY KEY,
    at_ms     INTEGER NOT NULL,
    token_id  INTEGER NOT NULL CHECK (token_id >= 0),
    action    TEXT NOT NULL,
    params    TEXT NOT NULL,
    status    INTEGER NOT NULL,
    error     TEXT NOT NULL,
    prev_hash BLOB NOT NULL CHECK (length(prev_hash) = 32),
    hash      BLOB NOT NULL CHECK (length(hash) = 32)
);

CREATE TRIGGER audit_no_update BEFORE UPDATE ON audit
BEGIN
    SELECT RAISE(ABORT, 'audit rows are append-only');
END;

CREATE TRIGGER audit_no_delete BEFORE DELETE ON audit
BEGIN
    SELECT RAISE(ABORT, 'audit rows are append-only');
END;
