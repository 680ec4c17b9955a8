/* server_proc.c — child-process control for end-to-end tests. */
#include "server_proc.h"

#include "check.h"
#include "pg.h"
#include "tmpdir.h"

#include <errno.h>
#include <libpq-fe.h>
#include <fcntl.h>
#include <signal.h>
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

extern char **environ;

void server_bin_path(const char *name, char *out, size_t outlen)
{
    const char *build = getenv("LDPREF_BUILD");
    snprintf(out, outlen, "%s/%s", build && *build ? build : "build", name);
}

/* spawn_with_stdout, with stderr appended to err_path (NULL: inherited). */
static pid_t spawn_logged(const char *bin, const char *const *argv, const char *const *env,
                          const char *err_path, int *out_fd)
{
    int out_pipe[2];
    if (pipe(out_pipe) != 0)
        return -1;
    pid_t pid = fork();
    if (pid < 0) {
        close(out_pipe[0]);
        close(out_pipe[1]);
        return -1;
    }
    if (pid == 0) {
        dup2(out_pipe[1], 1);
        int err_fd = err_path ? open(err_path, O_WRONLY | O_CREAT | O_APPEND, 0600) : -1;
        if (err_fd >= 0) {
            dup2(err_fd, 2);
            close(err_fd);
        }
        close(out_pipe[0]);
        close(out_pipe[1]);
        for (int i = 0; env && env[i]; i++)
            putenv((char *)env[i]);
        execv(bin, (char *const *)argv);
        _exit(127);
    }
    close(out_pipe[1]);
    *out_fd = out_pipe[0];
    return pid;
}

pid_t spawn_with_stdout(const char *bin, const char *const *argv, const char *const *env,
                        int *out_fd)
{
    return spawn_logged(bin, argv, env, NULL, out_fd);
}

static int spawn(server_proc *s, const char *const *extra_args)
{
    char bin[512];
    server_bin_path("ldpref-server", bin, sizeof bin);
    /* $LDPREF_SERVER_WRAPPER: words run before the server (a profiler,
     * e.g. "valgrind --tool=callgrind"), for benchmarks that attribute
     * costs. */
    const char *argv[48];
    int argc = 0;
    char wrap[512] = "", *save = NULL;
    const char *w = getenv("LDPREF_SERVER_WRAPPER");
    snprintf(wrap, sizeof wrap, "%s", w ? w : "");
    for (char *t = strtok_r(wrap, " ", &save); t != NULL && argc < 12;
         t = strtok_r(NULL, " ", &save))
        argv[argc++] = t;
    const char *exe = argc > 0 ? argv[0] : bin;
    const char *base[] = {bin, "--port", "0", "--db", s->db, "--threads", "4"};
    for (size_t i = 0; i < sizeof base / sizeof *base; i++)
        argv[argc++] = base[i];
    for (int i = 0; extra_args && extra_args[i] && argc < 46; i++)
        argv[argc++] = extra_args[i];
    argv[argc] = NULL;

    int out_fd;
    pid_t pid = spawn_logged(exe, argv, NULL, s->log, &out_fd);
    if (pid < 0)
        return -1;
    s->pid = pid;
    s->port = 0;
    FILE *f = fdopen(out_fd, "r");
    char line[512];
    int https = 0;
    while (s->port == 0 && fgets(line, sizeof line, f) != NULL) {
        char tok[160];
        if (sscanf(line, "operator token: %159s", tok) == 1)
            snprintf(s->token, sizeof s->token, "%s", tok);
        const char *p = strstr(line, "listening on http");
        if (p != NULL) {
            https = strncmp(p, "listening on https://", 21) == 0;
            const char *colon = strrchr(p, ':');
            s->port = colon ? atoi(colon + 1) : 0;
        }
    }
    /* Keep draining stdout so the server never blocks on a full pipe. */
    if (fork() == 0) {
        while (fgets(line, sizeof line, f) != NULL) {
        }
        _exit(0);
    }
    fclose(f);
    if (s->port == 0) {
        int status = 0;
        kill(s->pid, SIGKILL); /* it has most likely exited already */
        while (waitpid(s->pid, &status, 0) < 0 && errno == EINTR) {
        }
        s->pid = 0;
        s->exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
        return -1;
    }
    snprintf(s->url, sizeof s->url, "%s://127.0.0.1:%d", https ? "https" : "http", s->port);
    return 0;
}

int server_uses_postgresql(void)
{
    const char *db = getenv("LDPREF_TEST_DB");
    return db != NULL && strcmp(db, "postgresql") == 0;
}

int server_db_is_postgresql(const server_proc *s)
{
    return strncmp(s->db, "postgresql://", 13) == 0;
}

int server_skip_on_postgresql(const char *test, const char *why)
{
    if (!server_uses_postgresql())
        return 0;
    printf("SKIP %s on PostgreSQL: %s\n", test, why);
    fflush(stdout);
    return 1;
}

/* One private PostgreSQL cluster per test process, started on first use,
 * stopped at exit (pg.c); each server gets a database of its own. */
static pg_cluster test_cluster;
static int test_cluster_state; /* 0 not started, 1 running, -1 failed */

static int create_pg_database(char *uri, size_t len)
{
    if (test_cluster_state == 0)
        test_cluster_state = pg_cluster_start_for(&test_cluster, "server_proc") ? 1 : -1;
    if (test_cluster_state != 1)
        return -1;
    static int count;
    char name[64];
    snprintf(name, sizeof name, "e2e_%d", ++count);
    return pg_cluster_create_db(&test_cluster, name, uri, len);
}

int server_prepare(server_proc *s)
{
    memset(s, 0, sizeof *s);
    if (tmpdir_create(s->dir, sizeof s->dir, "e2e") != 0)
        return -1;
    if (server_uses_postgresql()) {
        snprintf(s->log, sizeof s->log, "%s/server.log", s->dir);
        return create_pg_database(s->db, sizeof s->db);
    }
    snprintf(s->db, sizeof s->db, "%s/ldpref.db", s->dir);
    snprintf(s->log, sizeof s->log, "%s/server.log", s->dir);
    return 0;
}

int server_start(server_proc *s, const char *const *extra_args)
{
    return server_prepare(s) == 0 ? spawn(s, extra_args) : -1;
}

int server_restart(server_proc *s, const char *const *extra_args)
{
    s->token[0] = 0;
    return spawn(s, extra_args);
}

static void print_log_tail(const server_proc *s);

/* Past the server's own drain (30 s) by a margin. */
#define STOP_WAIT_MS 60000

int server_stop(server_proc *s)
{
    if (s->pid <= 0)
        return -1;
    int status = 0;
    kill(s->pid, SIGTERM);
    /* a server that hangs in its shutdown is a failure, not a hung test */
    int waited_ms = 0;
    pid_t r;
    while (((r = waitpid(s->pid, &status, WNOHANG)) == 0 || (r < 0 && errno == EINTR)) &&
           waited_ms < STOP_WAIT_MS) {
        usleep(10 * 1000);
        waited_ms += 10;
    }
    if (r == 0) {
        fprintf(stderr, "server_stop: the server did not stop within %d s of SIGTERM\n",
                STOP_WAIT_MS / 1000);
        print_log_tail(s);
        server_kill(s);
        return -1;
    }
    s->pid = 0;
    if (r < 0)
        return -1;
    if (WIFSIGNALED(status)) { /* a crash during shutdown: say which */
        fprintf(stderr, "server_stop: the server died of signal %d\n", WTERMSIG(status));
        print_log_tail(s);
    }
    return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

void server_kill(server_proc *s)
{
    if (s->pid <= 0)
        return;
    kill(s->pid, SIGKILL);
    while (waitpid(s->pid, NULL, 0) < 0 && errno == EINTR) {
    }
    s->pid = 0;
}

/* The last lines of the server's log on stderr, to explain a failure. */
#define LOG_TAIL_BYTES 4096

static void print_log_tail(const server_proc *s)
{
    FILE *f = s->log[0] ? fopen(s->log, "r") : NULL;
    if (f == NULL)
        return;
    char buf[LOG_TAIL_BYTES + 1];
    fseek(f, 0, SEEK_END);
    long size = ftell(f);
    fseek(f, size > LOG_TAIL_BYTES ? size - LOG_TAIL_BYTES : 0, SEEK_SET);
    size_t n = fread(buf, 1, LOG_TAIL_BYTES, f);
    fclose(f);
    buf[n] = '\0';
    fprintf(stderr, "--- the end of the server's log (%s) ---\n%s--- end ---\n", s->log, buf);
}

void server_cleanup(server_proc *s)
{
    if (s->pid > 0)
        server_stop(s);
    if (check_failures() > 0)
        print_log_tail(s);
    tmpdir_remove(s->dir);
}

int run_tool(const char *const *argv, const char *const *env, char **out)
{
    char bin[512];
    server_bin_path(argv[0], bin, sizeof bin);
    int out_fd;
    pid_t pid = spawn_with_stdout(bin, argv, env, &out_fd);
    if (pid < 0)
        return -1;
    size_t len = 0, cap = 4096;
    char *buf = malloc(cap);
    ssize_t n;
    while ((n = read(out_fd, buf + len, cap - len - 1)) > 0) {
        len += (size_t)n;
        if (cap - len < 2) {
            cap *= 2;
            buf = realloc(buf, cap);
        }
    }
    buf[len] = 0;
    close(out_fd);
    int status;
    while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
    }
    if (out)
        *out = buf;
    else
        free(buf);
    return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

/* sql with SQLite's ?N (or ?) parameters written as PostgreSQL's $N, outside
 * string literals. */
static void pg_placeholders(const char *sql, char *out, size_t len)
{
    size_t o = 0;
    int quoted = 0, next = 1;
    for (const char *p = sql; *p && o + 8 < len; p++) {
        if (*p == '\'')
            quoted = !quoted;
        if (*p != '?' || quoted) {
            out[o++] = *p;
            continue;
        }
        int n = next;
        if (p[1] >= '0' && p[1] <= '9') {
            char *end;
            n = (int)strtol(p + 1, &end, 10);
            p = end - 1;
        }
        next = n + 1;
        o += (size_t)snprintf(out + o, len - o, "$%d", n);
    }
    out[o] = 0;
}

static long long pg_scalar(const char *uri, const char *sql, const char *arg)
{
    char text[4096];
    pg_placeholders(sql, text, sizeof text);
    PGconn *conn = PQconnectdb(uri);
    long long n = -1;
    if (PQstatus(conn) == CONNECTION_OK) {
        const char *params[1] = {arg};
        PGresult *r = PQexecParams(conn, text, arg ? 1 : 0, NULL, params, NULL, NULL, 0);
        if (PQresultStatus(r) == PGRES_TUPLES_OK && PQntuples(r) > 0 && !PQgetisnull(r, 0, 0)) {
            const char *v = PQgetvalue(r, 0, 0);
            n = strcmp(v, "t") == 0 ? 1 : strcmp(v, "f") == 0 ? 0 : (long long)strtod(v, NULL);
        } else if (PQresultStatus(r) != PGRES_TUPLES_OK) {
            fprintf(stderr, "server_db_scalar: %s: %s", text, PQerrorMessage(conn));
        }
        PQclear(r);
    }
    PQfinish(conn);
    return n;
}

long long server_db_scalar(const server_proc *s, const char *sql, const char *arg)
{
    if (server_db_is_postgresql(s))
        return pg_scalar(s->db, sql, arg);
    sqlite3 *db;
    long long n = -1;
    if (sqlite3_open_v2(s->db, &db, SQLITE_OPEN_READONLY, NULL) == SQLITE_OK) {
        /* The server's writer may hold the WAL briefly (a checkpoint). */
        sqlite3_busy_timeout(db, 5000);
        sqlite3_stmt *st;
        if (sqlite3_prepare_v2(db, sql, -1, &st, NULL) == SQLITE_OK) {
            if (arg != NULL)
                sqlite3_bind_text(st, 1, arg, -1, SQLITE_STATIC);
            if (sqlite3_step(st) == SQLITE_ROW)
                n = sqlite3_column_int64(st, 0);
        }
        sqlite3_finalize(st);
    }
    sqlite3_close(db);
    return n;
}

long long server_db_exec(const server_proc *s, const char *sql)
{
    long long n = -1;
    if (server_db_is_postgresql(s)) {
        PGconn *conn = PQconnectdb(s->db);
        PGresult *r = PQstatus(conn) == CONNECTION_OK ? PQexec(conn, sql) : NULL;
        if (PQresultStatus(r) == PGRES_COMMAND_OK)
            n = strtoll(PQcmdTuples(r), NULL, 10);
        else
            fprintf(stderr, "server_db_exec: %s: %s", sql, PQerrorMessage(conn));
        PQclear(r);
        PQfinish(conn);
        return n;
    }
    sqlite3 *db;
    if (sqlite3_open_v2(s->db, &db, SQLITE_OPEN_READWRITE, NULL) == SQLITE_OK) {
        sqlite3_busy_timeout(db, 5000);
        if (sqlite3_exec(db, sql, NULL, NULL, NULL) == SQLITE_OK)
            n = sqlite3_changes(db);
    }
    sqlite3_close(db);
    return n;
}

long long server_db_count(const server_proc *s, const char *table)
{
    char sql[128];
    snprintf(sql, sizeof sql, "SELECT count(*) FROM %s", table);
    return server_db_scalar(s, sql, NULL);
}

long server_status_field(pid_t pid, const char *name)
{
    char path[64], line[256];
    snprintf(path, sizeof path, "/proc/%d/status", (int)pid);
    FILE *f = fopen(path, "r");
    long v = -1;
    size_t n = strlen(name);
    while (f != NULL && fgets(line, sizeof line, f) != NULL)
        if (strncmp(line, name, n) == 0 && line[n] == ':') {
            v = strtol(line + n + 1, NULL, 10);
            break;
        }
    if (f != NULL)
        fclose(f);
    return v;
}
