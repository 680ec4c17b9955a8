/*
 * migrate.h — copying a SQLite database of the server into a PostgreSQL
 * database (ldpref-server --db FILE --migrate-to postgresql://...).
 *
 * The source must be at the server's newest schema version (a server
 * started on it once brings it there). The target is brought to the same
 * version by the server's own PostgreSQL migrations and must be empty: no
 * row in any table but the default campaign the schema creates. Then, in
 * one PostgreSQL transaction (all or nothing), every table of the schema is
 * copied with COPY, row by row as stored (ids kept; the schema's triggers
 * do not fire, the counters are copied as they are), the foreign keys are
 * checked over the whole copy, each identity sequence is set past the
 * largest id copied, and each table is read back and compared with what
 * was sent (the row count and a BLAKE2b-256 checksum of the rows in key
 * order). The source is read in one snapshot, one row at a time: a
 * database of any size copies in constant memory.
 *
 * The list of tables is the schema's (the source's tables and the
 * target's must be the same, column for column): a table the schema gains
 * is copied without a change here, and a table one side lacks stops the
 * copy before anything is written.
 */
#ifndef LP_MIGRATE_H
#define LP_MIGRATE_H

#include <stddef.h>
#include <stdint.h>

#define LP_MIGRATE_MAX_TABLES 64

typedef struct lp_migrate_table {
    char name[64];
    int64_t rows;      /* rows copied, equal in the source and the target */
    char checksum[65]; /* BLAKE2b-256 (hex) of the rows as copied, in key order */
} lp_migrate_table;

typedef struct lp_migrate_report {
    int64_t version; /* the schema version of both databases */
    int tables;
    int64_t rows; /* in all tables */
    lp_migrate_table table[LP_MIGRATE_MAX_TABLES];
} lp_migrate_report;

/* Called after each table is copied (before the commit), for progress. */
typedef void (*lp_migrate_progress)(const lp_migrate_table *t, void *ctx);

/* Copies the SQLite database at sqlite_path into the PostgreSQL database
 * at pg_uri (a libpq URI). LP_OK with rep filled, or LP_ESTORAGE with the
 * reason in err and nothing committed to the target (beyond its schema,
 * when it had none). progress may be NULL. */
int lp_migrate_to_pg(const char *sqlite_path, const char *pg_uri, lp_migrate_report *rep,
                     lp_migrate_progress progress, void *ctx, char *err, size_t errlen);

#endif
