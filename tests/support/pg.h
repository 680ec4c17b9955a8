/*
 * pg.h — a real, private PostgreSQL server for a test.
 *
 * pg_cluster_start runs Debian's initdb in a fresh temporary directory and
 * starts the server (postgres, a child of the test) on it, listening only
 * on a Unix socket in that directory (listen_addresses empty: no TCP port
 * to collide with) with fsync and synchronous_commit on, as durable as a
 * production server. PostgreSQL refuses to run as root: a test running as
 * root runs the server as the unprivileged user "postgres" (created by
 * Debian's postgresql package; "nobody" without it), which owns the
 * directory. Authentication is "trust" on that private socket only; the
 * superuser is "ldpref".
 *
 * The binaries are those of the newest /usr/lib/postgresql/N/bin (or the
 * directory $LDPREF_PG_BIN). pg_cluster_stop stops the server with a fast
 * shutdown (SIGINT, what `pg_ctl stop -m fast` sends), waits for it and
 * removes the directory. A cluster still running when the test exits is
 * stopped by an atexit handler; one whose test crashed gets the same
 * signal from the kernel (the server's parent-death signal).
 */
#ifndef LP_PG_H
#define LP_PG_H

#include <stddef.h>
#include <sys/types.h>

typedef struct pg_cluster {
    pid_t pid;           /* the postmaster, a child of the test; 0 when stopped */
    char dir[256];       /* the temporary directory: data/, the socket, the logs */
    char bin[200];       /* PostgreSQL's bin directory */
    char log[300];       /* the server's log (stderr) */
    char admin_uri[400]; /* the "postgres" database, as superuser */
} pg_cluster;

#define PG_STARTED 0
#define PG_MISSING 1 /* PostgreSQL is not installed (c->log says what was missing) */
#define PG_FAILED (-1)

/* Starts a cluster. PG_STARTED (stop it with pg_cluster_stop),
 * PG_MISSING or PG_FAILED (with the reason on stderr; nothing left). */
int pg_cluster_start(pg_cluster *c);

/* For tests: starts a cluster, or says why not. Returns 1 when it runs.
 * Without PostgreSQL it prints "SKIP <test>: ..." and returns 0, except
 * under CI (CI=true), where a missing PostgreSQL is a recorded failure
 * (check.h); a start that failed is always a recorded failure. */
int pg_cluster_start_for(pg_cluster *c, const char *test);

/* Creates database name (owned by the superuser) and writes its libpq
 * connection URI into uri. 0 or -1 (the reason on stderr). */
int pg_cluster_create_db(pg_cluster *c, const char *name, char *uri, size_t urilen);

/* Fast shutdown, wait, remove the directory. Accepts a stopped cluster. */
void pg_cluster_stop(pg_cluster *c);

#endif
