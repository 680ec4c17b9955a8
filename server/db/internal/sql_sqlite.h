/*
 * sql_sqlite.h — the SQLite driver of the statement API (sql.h), for the
 * engine (internal to server/db/): a connection over an open sqlite3
 * handle, and the handle back.
 */
#ifndef LP_SQL_SQLITE_H
#define LP_SQL_SQLITE_H

#include "sql.h"

#include <sqlite3.h>

/* A connection over db; it owns db from then on (lp_conn_close closes it).
 * NULL when out of memory (db is then still the caller's). */
lp_conn *lp_sqlite_conn(sqlite3 *db);
/* The handle under c (a connection of this driver). */
sqlite3 *lp_sqlite_db(lp_conn *c);
/* As lp_stmt_prepare, for a statement kept long (SQLite's
 * SQLITE_PREPARE_PERSISTENT): the engine's statement cache. */
lp_stmt *lp_sqlite_prepare_persistent(lp_conn *c, const char *sql);

#endif
