/*
 * sql_pg.h — the PostgreSQL driver of the statement API (sql.h), on libpq
 * (internal to server/db/).
 *
 * A connection is one libpq connection. Statements are prepared on the
 * server under a name of their own the first time they run, with the
 * parameter types of that run's bindings: int64 as bigint, double as double
 * precision and blobs as bytea, sent in binary; text and NULL leave the
 * type to the server, text sent as text. A later run whose bindings need
 * other types prepares the statement again. ?N becomes $N outside string
 * literals, quoted names and comments; a bare ? is refused. Rows come back
 * as text and are read as sql.h says (a boolean reads as 1 or 0, bytea as
 * its bytes). A statement runs to completion when first stepped: its rows
 * are held in memory until reset (a long read asks for rows in pieces;
 * see docs/postgresql.md).
 *
 * Failures: SQLSTATE 23505 is LP_SQL_UNIQUE, 23503 LP_SQL_FOREIGN_KEY,
 * any other of class 23 (integrity constraints, the schema's refusing
 * triggers) LP_SQL_CONSTRAINT; anything else LP_SQL_ERROR. Inside a
 * transaction a statement runs inside a savepoint (SAVEPOINT, the
 * statement and RELEASE sent together in one pipeline), rolled back when it
 * fails, so that a failed statement leaves the transaction going, as with
 * SQLite. With statement savepoints turned off, a failed statement inside
 * a transaction rolls the whole transaction back (lp_conn_in_txn says 0).
 * lp_conn_exec runs SQL as it is (several statements, no parameters) and
 * also rolls the transaction back when it fails inside one.
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
 * it returns; stronger settings such as remote_apply are kept).
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

/* The libpq connection under c (a connection of this driver): for what
 * the statement API does not cover (LISTEN/NOTIFY, advisory locks). */
PGconn *lp_sql_pg_conn(lp_conn *c);

/* Turns the per-statement savepoints inside transactions on (the default)
 * or off; see above. */
void lp_sql_pg_statement_savepoints(lp_conn *c, int on);

#endif
