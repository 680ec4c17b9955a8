/*
 * schema_sql.h — the database migrations, embedded. LP_MIGRATIONS[i] brings
 * a database from PRAGMA user_version i to i + 1. The source of truth is
 * schema/00N_*.sql; server/db/schema_sql.c holds the same text.
 */
#ifndef LP_SCHEMA_SQL_H
#define LP_SCHEMA_SQL_H

extern const char *const LP_MIGRATIONS[];
extern const int LP_MIGRATION_COUNT;

#endif
