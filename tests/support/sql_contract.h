/*
 * sql_contract.h — the statement API's contract (server/db/internal/sql.h)
 * checked on a real connection of any driver: binds and columns of every
 * type, NULLs, ?N reuse, booleans read as integers, RETURNING, rows
 * changed and the inserted id, what each kind of constraint refusal
 * returns and that it leaves nothing and keeps the transaction, reset and
 * cleared bindings, errors of prepare and of binding, read transactions.
 *
 * The table's DDL is the driver's dialect: the caller gives it.
 */
#ifndef LP_SQL_CONTRACT_H
#define LP_SQL_CONTRACT_H

#include "sql.h"

typedef struct sql_contract_ddl {
    /* creates table sql_contract: id (an integer key the database assigns
     * when it is not given), name (text NOT NULL UNIQUE), score (a double
     * with CHECK (score >= 0)), data (a blob), parent (an integer
     * REFERENCES sql_contract (id)) */
    const char *create;
    /* creates a trigger that refuses every DELETE on sql_contract */
    const char *refuse_delete;
} sql_contract_ddl;

/* The table in each driver's dialect. */
extern const sql_contract_ddl SQL_CONTRACT_SQLITE;
extern const sql_contract_ddl SQL_CONTRACT_PG;

/* Runs the write checks on c inside a write transaction the caller has
 * open (and commits afterwards): creates the table, fills it. */
void sql_contract_write(lp_conn *c, const sql_contract_ddl *ddl);
/* Runs the read checks on c outside any transaction, once the rows of
 * sql_contract_write are committed. */
void sql_contract_read(lp_conn *c);

#endif
