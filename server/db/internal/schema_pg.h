/*
 * schema_pg.h — the PostgreSQL schema (schema/postgresql/NNN_*.sql),
 * embedded at build time (the Makefile generates the table from the files
 * with xxd -i), and its migration.
 *
 * A file NNN_name.sql brings a database to version NNN; the database's
 * version is the largest row of its schema_version table (none: an empty
 * database, version 0). The numbers are SQLite's (schema/NNN_*.sql): the
 * first PostgreSQL file is 014, the whole schema of SQLite version 14.
 */
#ifndef LP_SCHEMA_PG_H
#define LP_SCHEMA_PG_H

#include "sql.h"

#include <stddef.h>
#include <stdint.h>

typedef struct lp_pg_schema_file {
    const char *name;         /* "014_init.sql": its version is the number */
    const unsigned char *sql; /* the file's bytes (not NUL-terminated) */
    size_t len;
} lp_pg_schema_file;

/* Every file, in version order, ended by an entry whose name is NULL. */
extern const lp_pg_schema_file lp_pg_schema_files[];

/* The newest version the files reach. */
int64_t lp_pg_schema_newest(void);

/* Brings the database on c (no transaction open) to the newest version:
 * each missing file in its own transaction, under a transaction-level
 * advisory lock, so that servers starting at once on one database apply
 * each file once (the others wait, then find it applied). *version gets
 * the version the database has afterwards. LP_OK, or LP_ESTORAGE with the
 * reason in err (a file that failed, or a database newer than the files:
 * nothing is changed then). */
int lp_pg_migrate(lp_conn *c, int64_t *version, char *err, size_t errlen);

#endif
