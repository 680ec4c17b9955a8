/*
 * sql_pg.h — the PostgreSQL driver of the statement API (sql.h), on libpq
 * (internal to server/db/).
 *
 * A connection is one libpq connection (libpq 14 or newer: pipeline
 * mode). A statement is prepared on the server, under a name of its own,
 * when it is made, with the parameter types the server chooses, so that a
 * wrong statement fails at lp_stmt_prepare; a statement whose types only
 * its bindings can decide (?1 + ?1) waits for its first step. When a run's
 * bindings need other types (an int64 where the server chose integer or
 * text) it is prepared again with the bindings' types: int64 as bigint,
 * double as double precision, blobs as bytea; if the server has no
 * operator for those types, with its own choice for good. int64, double
 * and blob values whose parameter has their type are sent in binary, every
 * other value as text (PostgreSQL text holds no NUL byte: binding one fails
 * the step). ?N becomes $N outside string literals, quoted names and
 * comments; a bare ? is refused. Rows come back as text and are read as
 * sql.h says (a boolean reads as 1 or 0, bytea as its bytes, numeric as a
 * number). A statement runs to completion when first stepped: its rows are
 * held in memory until reset, unless it streams them (lp_sql_pg_stream).
 *
 * Failures: SQLSTATE 23505 is LP_SQL_UNIQUE, 23503 LP_SQL_FOREIGN_KEY,
 * any other of class 23 (integrity constraints, the schema's refusing
 * triggers) LP_SQL_CONSTRAINT; anything else LP_SQL_ERROR. Inside a
 * transaction a statement runs inside a savepoint (SAVEPOINT, the
 * statement and RELEASE sent together in one pipeline), rolled back when it
 * fails, so that a failed statement leaves the transaction going, as with
 * SQLite. A statement marked unguarded (lp_stmt_set_unguarded: one that
 * no constraint can refuse) runs without it, so that it costs no
 * subtransaction: PostgreSQL keeps the ids of 64 subtransactions per
 * session in shared memory, and past that every other session's snapshots
 * read pg_subtrans (a savepoint's statement that writes draws one; the
 * released ones count until the commit). With statement savepoints turned
 * off, or for an unguarded statement, a failed statement inside a
 * transaction rolls the whole transaction back (lp_conn_in_txn says 0).
 * Once a failure ended the caller's transaction, the connection refuses
 * every statement (LP_SQL_ERROR) but one that begins or ends a transaction
 * (BEGIN, START, COMMIT, END, ROLLBACK, ABORT; not ROLLBACK TO), until one
 * runs or the connection is made again: the statements that follow
 * would otherwise commit one by one, outside the transaction their caller
 * believes open.
 * lp_conn_exec runs SQL as it is (several statements, no parameters) and
 * also rolls the transaction back when it fails inside one. A failure that
 * ended the transaction is LP_SQL_ERROR whatever its cause (the message
 * says the transaction was rolled back): a constraint result always means
 * that only the statement was refused.
 *
 * Rows changed (lp_conn_changes) come from the command tag of the last
 * INSERT, UPDATE, DELETE or MERGE; lp_conn_last_insert_id is lastval(),
 * the value most recently drawn from a sequence on the connection (prefer
 * RETURNING id). lp_conn_begin_read starts a REPEATABLE READ, READ ONLY
 * transaction (one snapshot).
 *
 * Opening sets the session to UTF-8, hex bytea output and shortest-exact
 * float output (doubles round-trip exactly), and raises synchronous_commit
 * to on when the server's setting is off (a commit is then durable before
 * it returns; stronger settings such as remote_apply are kept). The
 * server's notices and warnings go to the log (postgresql_notice).
 */
#ifndef LP_SQL_PG_H
#define LP_SQL_PG_H

#include "sql.h"

#include <libpq-fe.h>
#include <stddef.h>

/* Connects to the libpq connection string or URI conninfo
 * ("postgresql://user@host/db?..."). LP_OK with *out set (lp_conn_close),
 * or LP_ESTORAGE / LP_ENO_MEMORY with the reason in err. */
int lp_sql_pg_open(const char *conninfo, lp_conn **out, char *err, size_t errlen);

/* 1 while c's connection is up; 0 once it was lost (a step or exec then
 * failed with LP_SQL_ERROR). */
int lp_sql_pg_connected(lp_conn *c);

/* Connects c again with the same parameters (after a lost connection or a
 * failover): its open transaction is gone, its statements stay valid and
 * are prepared again when next stepped. LP_OK, or LP_ESTORAGE with the
 * reason in err (try again later). */
int lp_sql_pg_reconnect(lp_conn *c, char *err, size_t errlen);

/* The libpq connection under c (a connection of this driver): for what
 * the statement API does not cover (LISTEN/NOTIFY, advisory locks). */
PGconn *lp_sql_pg_conn(lp_conn *c);

/* Streams st's rows (on) or fetches them whole on its first step (off, the
 * default): streamed, each step reads one row from the server (single-row
 * mode), so a long read holds one row in memory, not all. Until its last
 * row is read or it is reset, a streamed run holds the connection: no
 * other statement may run on it (use a connection of its own, such as a
 * private reader). A reset before the end cancels the query outside a
 * transaction and reads the rest inside one (whose snapshot a cancel
 * would end). A streamed statement runs without a savepoint: its failure
 * inside a transaction rolls the transaction back. */
void lp_sql_pg_stream(lp_stmt *st, int on);

/* How many statements or commands on c failed with a serialization
 * failure or a deadlock (SQLSTATE 40001, 40P01) since it was opened: the
 * engine compares it before and after a transaction to run the
 * transaction again. */
uint64_t lp_sql_pg_conflicts(lp_conn *c);

/* Turns the per-statement savepoints inside transactions on (the default)
 * or off; see above. */
void lp_sql_pg_statement_savepoints(lp_conn *c, int on);

#endif
