/* pg.c — a private PostgreSQL server for tests. See pg.h. */
#include "pg.h"

#include "check.h"
#include "tmpdir.h"

#include <fcntl.h>
#include <glob.h>
#include <grp.h>
#include <libpq-fe.h>
#include <pwd.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define PG_SUPERUSER "ldpref"
#define START_TIMEOUT_MS 60000
#define STOP_TIMEOUT_MS 30000

/* The clusters still running, stopped at exit (copies: a test's
 * pg_cluster may live on main's stack, gone by then). */
#define LIVE_MAX 8
static struct {
    pid_t pid;
    char dir[256];
} live[LIVE_MAX];
static int atexit_set;
static pid_t atexit_owner; /* a forked child exiting leaves the clusters alone */

static void sleep_ms(long ms)
{
    struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
}

/* The newest /usr/lib/postgresql/N/bin holding initdb and postgres, or
 * $LDPREF_PG_BIN. 0, or -1 with what is missing in why. */
static int find_bin(char *out, size_t outlen, char *why, size_t whylen)
{
    const char *env = getenv("LDPREF_PG_BIN");
    if (env != NULL && *env) {
        snprintf(out, outlen, "%s", env);
    } else {
        glob_t g;
        long best = -1;
        if (glob("/usr/lib/postgresql/*/bin/postgres", 0, NULL, &g) == 0) {
            for (size_t i = 0; i < g.gl_pathc; i++) {
                long v = strtol(g.gl_pathv[i] + strlen("/usr/lib/postgresql/"), NULL, 10);
                if (v > best) {
                    best = v;
                    snprintf(out, outlen, "/usr/lib/postgresql/%ld/bin", v);
                }
            }
        }
        globfree(&g);
        if (best < 0) {
            snprintf(why, whylen,
                     "no /usr/lib/postgresql/*/bin/postgres (Debian's postgresql "
                     "package; deploy/install-deps.sh installs it)");
            return -1;
        }
    }
    const char *need[] = {"initdb", "postgres"};
    for (size_t i = 0; i < sizeof need / sizeof need[0]; i++) {
        char path[512];
        snprintf(path, sizeof path, "%s/%s", out, need[i]);
        if (access(path, X_OK) != 0) {
            snprintf(why, whylen, "no executable %.*s", (int)(whylen > 20 ? whylen - 20 : 0), path);
            return -1;
        }
    }
    return 0;
}

/* The user the server runs as: ourselves, or when we are root the
 * unprivileged "postgres" (or "nobody"). */
static int server_user(uid_t *uid, gid_t *gid)
{
    if (geteuid() != 0) {
        *uid = geteuid();
        *gid = getegid();
        return 0;
    }
    const char *names[] = {"postgres", "nobody"};
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
        struct passwd *pw = getpwnam(names[i]);
        if (pw != NULL && pw->pw_uid != 0) {
            *uid = pw->pw_uid;
            *gid = pw->pw_gid;
            return 0;
        }
    }
    fprintf(stderr, "pg: running as root and no unprivileged user postgres or nobody\n");
    return -1;
}

/* Forks a child running argv (argv[0] a path) as uid:gid with stdout and
 * stderr appended to log. A server child gets SIGINT when the test dies. */
static pid_t spawn_as(uid_t uid, gid_t gid, char *const argv[], const char *log, int server)
{
    pid_t parent = getpid();
    pid_t pid = fork();
    if (pid != 0)
        return pid;
    int fd = open(log, O_WRONLY | O_CREAT | O_APPEND, 0600);
    int null = open("/dev/null", O_RDONLY);
    if (fd < 0 || null < 0 || chdir("/") != 0) /* the test's directory may be closed to uid */
        _exit(126);
    dup2(null, 0);
    dup2(fd, 1);
    dup2(fd, 2);
    if (fchown(fd, uid, gid) != 0 && geteuid() == 0)
        _exit(126);
    if (geteuid() == 0 && (setgroups(0, NULL) != 0 || setgid(gid) != 0 || setuid(uid) != 0))
        _exit(126);
    /* after setuid, which clears it */
    if (server && (prctl(PR_SET_PDEATHSIG, SIGINT) != 0 || getppid() != parent))
        _exit(126);
    execv(argv[0], argv);
    _exit(127);
}

/* Prints the last lines of a log to stderr. */
static void print_log(const char *path)
{
    FILE *f = fopen(path, "r");
    if (f == NULL)
        return;
    char buf[4096];
    long size = (fseek(f, 0, SEEK_END) == 0) ? ftell(f) : 0;
    fseek(f, size > (long)sizeof buf - 1 ? size - (long)sizeof buf + 1 : 0, SEEK_SET);
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    buf[n] = 0;
    fclose(f);
    fprintf(stderr, "--- %s ---\n%s\n---\n", path, buf);
}

static int wait_exit(pid_t pid, long timeout_ms, int *status)
{
    for (long waited = 0; waited <= timeout_ms; waited += 20) {
        pid_t r = waitpid(pid, status, WNOHANG);
        if (r == pid || r < 0)
            return 0;
        sleep_ms(20);
    }
    return -1;
}

static void stop_pid(pid_t pid)
{
    int status;
    if (pid <= 0)
        return;
    kill(pid, SIGINT);
    if (wait_exit(pid, STOP_TIMEOUT_MS, &status) != 0) {
        fprintf(stderr, "pg: server %d did not stop in %d ms; killing it\n", (int)pid,
                STOP_TIMEOUT_MS);
        kill(pid, SIGKILL);
        waitpid(pid, &status, 0);
    }
}

static void stop_live_at_exit(void)
{
    if (getpid() != atexit_owner)
        return;
    for (int i = 0; i < LIVE_MAX; i++)
        if (live[i].pid > 0) {
            stop_pid(live[i].pid);
            tmpdir_remove(live[i].dir);
            live[i].pid = 0;
        }
}

static void live_set(pid_t pid, const char *dir, pid_t new_pid)
{
    for (int i = 0; i < LIVE_MAX; i++)
        if (live[i].pid == pid) {
            live[i].pid = new_pid;
            snprintf(live[i].dir, sizeof live[i].dir, "%s", dir);
            return;
        }
}

/* Waits until the server accepts connections; -1 if it exited or timed out. */
static int wait_ready(pg_cluster *c)
{
    for (long waited = 0; waited < START_TIMEOUT_MS; waited += 50) {
        if (PQping(c->admin_uri) == PQPING_OK)
            return 0;
        int status;
        if (waitpid(c->pid, &status, WNOHANG) == c->pid) {
            fprintf(stderr, "pg: the server exited during start-up (status %d)\n", status);
            live_set(c->pid, "", 0);
            c->pid = 0;
            return -1;
        }
        sleep_ms(50);
    }
    fprintf(stderr, "pg: the server did not accept connections within %d ms\n", START_TIMEOUT_MS);
    return -1;
}

int pg_cluster_start(pg_cluster *c)
{
    memset(c, 0, sizeof *c);
    char why[300];
    if (find_bin(c->bin, sizeof c->bin, why, sizeof why) != 0) {
        snprintf(c->log, sizeof c->log, "%s", why);
        return PG_MISSING;
    }
    uid_t uid;
    gid_t gid;
    if (server_user(&uid, &gid) != 0)
        return PG_FAILED;
    if (tmpdir_create(c->dir, sizeof c->dir, "pg") != 0) {
        fprintf(stderr, "pg: cannot create a temporary directory\n");
        return PG_FAILED;
    }
    if (geteuid() == 0 && chown(c->dir, uid, gid) != 0) {
        fprintf(stderr, "pg: cannot give %s to uid %d\n", c->dir, (int)uid);
        tmpdir_remove(c->dir);
        return PG_FAILED;
    }
    char data[300], initdb[300], postgres[300], initdb_log[300], sockdir[300];
    snprintf(data, sizeof data, "%s/data", c->dir);
    snprintf(initdb, sizeof initdb, "%s/initdb", c->bin);
    snprintf(postgres, sizeof postgres, "%s/postgres", c->bin);
    snprintf(initdb_log, sizeof initdb_log, "%s/initdb.log", c->dir);
    snprintf(c->log, sizeof c->log, "%s/postgres.log", c->dir);
    snprintf(sockdir, sizeof sockdir, "%s", c->dir);
    snprintf(c->admin_uri, sizeof c->admin_uri, "postgresql://%s@/postgres?host=%s", PG_SUPERUSER,
             c->dir);

    /* C collation: text sorts by bytes, as SQLite's BINARY does. --no-sync
     * only skips initdb's final flush of the new files; the server runs
     * with fsync on. Page checksums on, as a production cluster should. */
    char *initdb_argv[] = {initdb,
                           "-D",
                           data,
                           "-U",
                           PG_SUPERUSER,
                           "-A",
                           "trust",
                           "-E",
                           "UTF8",
                           "--locale=C",
                           "--no-sync",
                           "--no-instructions",
                           "--data-checksums",
                           NULL};
    int status = -1;
    pid_t pid = spawn_as(uid, gid, initdb_argv, initdb_log, 0);
    if (pid < 0 || waitpid(pid, &status, 0) != pid || !WIFEXITED(status) ||
        WEXITSTATUS(status) != 0) {
        fprintf(stderr, "pg: initdb failed (status %d)\n", status);
        print_log(initdb_log);
        tmpdir_remove(c->dir);
        return PG_FAILED;
    }

    char *server_argv[] = {postgres,
                           "-D",
                           data,
                           "-k",
                           sockdir,
                           "-c",
                           "listen_addresses=",
                           "-c",
                           "fsync=on",
                           "-c",
                           "synchronous_commit=on",
                           "-c",
                           "full_page_writes=on",
                           "-c",
                           "shared_buffers=16MB",
                           "-c",
                           "max_connections=50",
                           NULL};
    c->pid = spawn_as(uid, gid, server_argv, c->log, 1);
    if (c->pid < 0) {
        c->pid = 0;
        tmpdir_remove(c->dir);
        return PG_FAILED;
    }
    if (!atexit_set) {
        atexit(stop_live_at_exit);
        atexit_set = 1;
        atexit_owner = getpid();
    }
    live_set(0, c->dir, c->pid);
    if (wait_ready(c) != 0) {
        print_log(c->log);
        pg_cluster_stop(c);
        return PG_FAILED;
    }
    return PG_STARTED;
}

int pg_cluster_start_for(pg_cluster *c, const char *test)
{
    int rc = pg_cluster_start(c);
    if (rc == PG_STARTED)
        return 1;
    if (rc == PG_MISSING) {
        const char *ci = getenv("CI");
        if (ci != NULL && strcmp(ci, "true") == 0) {
            check_record(0, __FILE__, __LINE__, "%s: PostgreSQL is required under CI: %s", test,
                         c->log);
        } else {
            printf("SKIP %s: PostgreSQL is not installed: %s\n", test, c->log);
            fflush(stdout);
        }
        return 0;
    }
    check_record(0, __FILE__, __LINE__, "%s: the PostgreSQL server did not start", test);
    return 0;
}

int pg_cluster_create_db(pg_cluster *c, const char *name, char *uri, size_t urilen)
{
    for (const char *p = name; *p; p++)
        if (!((*p >= 'a' && *p <= 'z') || (*p >= '0' && *p <= '9') || *p == '_')) {
            fprintf(stderr, "pg: database name %s: use [a-z0-9_]\n", name);
            return -1;
        }
    PGconn *conn = PQconnectdb(c->admin_uri);
    int rc = -1;
    if (PQstatus(conn) != CONNECTION_OK) {
        fprintf(stderr, "pg: cannot connect: %s", PQerrorMessage(conn));
    } else {
        char sql[128];
        snprintf(sql, sizeof sql, "CREATE DATABASE %s", name);
        PGresult *r = PQexec(conn, sql);
        if (PQresultStatus(r) == PGRES_COMMAND_OK)
            rc = 0;
        else
            fprintf(stderr, "pg: %s: %s", sql, PQerrorMessage(conn));
        PQclear(r);
    }
    PQfinish(conn);
    if (rc == 0 && snprintf(uri, urilen, "postgresql://%s@/%s?host=%s", PG_SUPERUSER, name,
                            c->dir) >= (int)urilen)
        rc = -1;
    return rc;
}

void pg_cluster_stop(pg_cluster *c)
{
    if (c->pid > 0) {
        stop_pid(c->pid);
        live_set(c->pid, "", 0);
        c->pid = 0;
    }
    if (c->dir[0]) {
        tmpdir_remove(c->dir);
        c->dir[0] = 0;
    }
}
