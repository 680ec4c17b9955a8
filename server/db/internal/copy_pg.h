/*
 * copy_pg.h — PostgreSQL's COPY on a connection of the statement API's
 * PostgreSQL driver (sql_pg.h), for bulk copies (migrate.h). Internal to
 * server/db/.
 *
 * COPY IN: lp_pg_copy_in_start sends a `COPY ... FROM STDIN` statement,
 * lp_pg_copy_in_put sends data (any chunking), lp_pg_copy_in_end finishes
 * and says how many rows the server took; lp_pg_copy_in_abort gives up (the
 * server refuses the COPY: inside a transaction, the transaction is then
 * failed and must be rolled back). COPY OUT: lp_pg_copy_out runs a `COPY
 * ... TO STDOUT` statement and hands each piece of data to a sink as it
 * arrives, so neither direction holds more than one piece in memory. No
 * other statement may run on the connection while a COPY IN is open.
 *
 * Each returns LP_OK or LP_ESTORAGE with the server's message in err.
 */
#ifndef LP_COPY_PG_H
#define LP_COPY_PG_H

#include "sql.h"

#include <stddef.h>
#include <stdint.h>

int lp_pg_copy_in_start(lp_conn *c, const char *sql, char *err, size_t errlen);
int lp_pg_copy_in_put(lp_conn *c, const void *data, size_t len, char *err, size_t errlen);
int lp_pg_copy_in_end(lp_conn *c, int64_t *rows, char *err, size_t errlen);
void lp_pg_copy_in_abort(lp_conn *c, const char *why);

typedef void (*lp_pg_copy_sink)(void *ctx, const void *data, size_t len);
int lp_pg_copy_out(lp_conn *c, const char *sql, lp_pg_copy_sink sink, void *ctx, char *err,
                   size_t errlen);

#endif
