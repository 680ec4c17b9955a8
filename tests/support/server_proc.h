/*
 * server_proc.h — start the real ldpref-server for end-to-end tests.
 *
 * The server runs as a child process on 127.0.0.1 with --port 0 and a
 * database in a fresh temporary directory; the harness reads the bound port
 * and the first operator token from its stdout. Binaries are found under
 * $LDPREF_BUILD (default "build").
 */
#ifndef LP_SERVER_PROC_H
#define LP_SERVER_PROC_H

#include <stddef.h>
#include <sys/types.h>

typedef struct server_proc {
    pid_t pid;
    int port;
    char url[64];    /* http://127.0.0.1:PORT, or https:// when the server speaks TLS */
    char dir[256];   /* temporary directory (database, keys, ledgers) */
    char db[300];    /* database path inside dir */
    char token[160]; /* first operator token ("" after a restart) */
    char log[300];   /* the server's stderr, inside dir */
    int exit_code;   /* of a start that failed: the server's exit status, -1 if it was killed */
} server_proc;

/* Server flags that turn the rate limits off, for load generators that play
 * many users from one address (benchmarks, the live study). */
#define SERVER_NO_RATE_LIMITS "--score-rate", "0", "--enroll-rate", "0", "--next-rate", "0"

/* Path of a built binary ("ldpref", "ldpref-server", ...) into out. */
void server_bin_path(const char *name, char *out, size_t outlen);

/* Creates a temp dir and starts a server on it. Extra flags may be NULL-
 * terminated argv-style (or NULL). Returns 0 or -1. */
int server_start(server_proc *s, const char *const *extra_args);
/* Creates the temp dir and fills in the paths without starting anything:
 * a test may move s->db (inside dir) before server_restart. Returns 0 or -1. */
int server_prepare(server_proc *s);
/* Starts again on the same directory/database (after server_stop/kill). */
int server_restart(server_proc *s, const char *const *extra_args);
/* SIGTERM and wait; returns the exit status (or -1). */
int server_stop(server_proc *s);
/* SIGKILL and wait. */
void server_kill(server_proc *s);
/* $LDPREF_TEST_DB=postgresql: servers run on PostgreSQL. One private
 * cluster per test process (tests/support/pg.h) is started on the first
 * server_prepare, and each server_prepare creates a fresh database in it:
 * s->db is then its libpq URI (server_restart keeps it). Returns 1 then. */
int server_uses_postgresql(void);
/* 1 when s->db is a PostgreSQL URI. */
int server_db_is_postgresql(const server_proc *s);
/* For a test that is SQLite-file-specific by nature (the database file
 * unlinked, a full disk, the WAL): under $LDPREF_TEST_DB=postgresql prints
 * "SKIP test on PostgreSQL: why" and returns 1; otherwise 0. */
int server_skip_on_postgresql(const char *test, const char *why);
/* Runs a one-number query (e.g. "SELECT count(*) FROM labels") on the
 * server's database (the file read-only, or the PostgreSQL database), with
 * an optional text parameter ?1 (arg may be NULL). The SQL must run on both
 * (a boolean reads as 1 or 0, a numeric is truncated). Returns the number,
 * or -1 on error. */
long long server_db_scalar(const server_proc *s, const char *sql, const char *arg);
/* Runs one writing statement (SQL both backends run) on the server's
 * database, outside the server: the rows it changed, or -1 on error. */
long long server_db_exec(const server_proc *s, const char *sql);
/* server_db_scalar of "SELECT count(*) FROM <table>". */
long long server_db_count(const server_proc *s, const char *table);
/* A number field of /proc/PID/status ("VmRSS" in KiB, "Threads"), or -1. */
long server_status_field(pid_t pid, const char *name);
/* Stops the server if running and removes the temporary directory. */
void server_cleanup(server_proc *s);

/*
 * Runs a command (argv[0] a built binary name, resolved by server_bin_path),
 * with the given environment additions (NULL-terminated "K=V" list or NULL),
 * capturing stdout into *out (malloc'd, caller frees; may be NULL).
 * Returns the exit code, or -1 if it did not exit normally.
 */
int run_tool(const char *const *argv, const char *const *env, char **out);

/* Forks and execs bin with argv (and the "K=V" additions of env, may be
 * NULL), its stdout on a pipe whose read end goes to *out_fd: for tools
 * that keep running (ldpref ui). Returns the child's pid, or -1. */
pid_t spawn_with_stdout(const char *bin, const char *const *argv, const char *const *env,
                        int *out_fd);

#endif
