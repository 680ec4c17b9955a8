/*
 * bench_migrate.c — ldpref-server --migrate-to on a large database (make
 * bench-migrate), beside PostgreSQL's own restore of the same rows.
 *
 * Builds a server database of N labels (--labels, default 10^6; 1,000
 * annotators and N / 1,000 tasks, one label per pair, as a server stores
 * them) on a SQLite file, starts a private PostgreSQL (tests/support/pg.h),
 * and times the migration into a new database, with the peak resident size
 * of the migrating process. Then the peer in the same run: pg_dump of the
 * migrated database and pg_restore of it into another new database — the
 * same rows loaded by PostgreSQL's own tool — timed alike. Prints "BENCH
 * <name> <value> <unit>" lines; decides nothing.
 */
#include "clock.h"
#include "pg.h"
#include "server_proc.h"
#include "tmpdir.h"

#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

static pg_cluster pgc;
static char dir[256];

static void die(const char *what)
{
    fprintf(stderr, "bench_migrate: %s\n", what);
    pg_cluster_stop(&pgc);
    tmpdir_remove(dir);
    exit(1);
}

/* The server's schema (started once on the file), then the rows. */
static void build_source(const char *path, long labels)
{
    server_proc s;
    if (server_prepare(&s) != 0)
        die("temporary directory");
    snprintf(s.db, sizeof s.db, "%s", path);
    if (server_restart(&s, NULL) != 0 || server_stop(&s) != 0)
        die("ldpref-server did not start on the source");
    server_cleanup(&s);
    long tasks = labels / 1000 > 0 ? labels / 1000 : 1;
    char sql[2048];
    snprintf(sql, sizeof sql,
             "BEGIN;"
             "INSERT INTO tasks (id, campaign, source_id, prompt, response0, response1,"
             " created_ms)"
             " WITH RECURSIVE c(n) AS (SELECT 0 UNION ALL SELECT n + 1 FROM c WHERE n < %ld)"
             " SELECT 1 + n, 1, 's' || n, 'a prompt of some length ' || n,"
             " 'the first response ' || n, 'the second response ' || n, n FROM c;"
             "INSERT INTO annotators (id, public_key, pseudonym, campaign, enrolled_ms)"
             " WITH RECURSIVE c(n) AS (SELECT 0 UNION ALL SELECT n + 1 FROM c WHERE n < 999)"
             " SELECT 1 + n, randomblob(32), 'p' || n, 1, n FROM c;"
             "INSERT INTO labels (id, annotator, task, z, z_task, epsilon, nonce, timestamp_ms,"
             " signature, received_ms)"
             " WITH RECURSIVE c(n) AS (SELECT 0 UNION ALL SELECT n + 1 FROM c WHERE n < %ld)"
             " SELECT 1 + n, 1 + n %% 1000, 1 + n / 1000, n %% 2, (n / 2) %% 2, 1.0,"
             " randomblob(16), n, randomblob(64), n FROM c;"
             "COMMIT;",
             tasks - 1, labels - 1);
    sqlite3 *db;
    char *err = NULL;
    if (sqlite3_open(path, &db) != SQLITE_OK ||
        sqlite3_exec(db, sql, NULL, NULL, &err) != SQLITE_OK) {
        fprintf(stderr, "%s\n", err ? err : "");
        die("building the source");
    }
    sqlite3_close(db);
}

/* Runs a shell command; its wall time in seconds, or -1. */
static double timed(const char *cmd)
{
    int64_t t0 = lp_mono_ns();
    int rc = system(cmd);
    return rc == 0 ? (double)(lp_mono_ns() - t0) / 1e9 : -1;
}

/* As timed, in a child of its own, whose children's peak resident size
 * (the command's) goes to *rss_kb. */
static double timed_with_rss(const char *cmd, long *rss_kb)
{
    int fds[2];
    if (pipe(fds) != 0)
        return -1;
    int64_t t0 = lp_mono_ns();
    pid_t pid = fork();
    if (pid == 0) {
        int rc = system(cmd);
        struct rusage ru;
        getrusage(RUSAGE_CHILDREN, &ru);
        long kb = ru.ru_maxrss;
        ssize_t w = write(fds[1], &kb, sizeof kb);
        _exit(rc == 0 && w == (ssize_t)sizeof kb ? 0 : 1);
    }
    int status = 0;
    waitpid(pid, &status, 0);
    double s = (double)(lp_mono_ns() - t0) / 1e9;
    if (read(fds[0], rss_kb, sizeof *rss_kb) != (ssize_t)sizeof *rss_kb)
        *rss_kb = -1;
    close(fds[0]);
    close(fds[1]);
    return pid > 0 && WIFEXITED(status) && WEXITSTATUS(status) == 0 ? s : -1;
}

int main(int argc, char **argv)
{
    long labels = 1000000;
    for (int i = 1; i + 1 < argc; i += 2)
        if (strcmp(argv[i], "--labels") == 0)
            labels = atol(argv[i + 1]);
    if (labels < 1000)
        die("--labels: at least 1000");
    if (tmpdir_create(dir, sizeof dir, "bench-migrate") != 0)
        die("temporary directory");
    char src[300], uri[400], peer[400], bin[512], cmd[4096];
    snprintf(src, sizeof src, "%s/source.db", dir);
    build_source(src, labels);
    if (pg_cluster_start(&pgc) != PG_STARTED ||
        pg_cluster_create_db(&pgc, "migrated", uri, sizeof uri) != 0 ||
        pg_cluster_create_db(&pgc, "restored", peer, sizeof peer) != 0)
        die("could not start PostgreSQL");

    server_bin_path("ldpref-server", bin, sizeof bin);
    snprintf(cmd, sizeof cmd, "'%s' --db '%s' --migrate-to '%s' > '%s/migrate.out' 2>&1", bin, src,
             uri, dir);
    long migrate_rss_kb = 0;
    double migrate_s = timed_with_rss(cmd, &migrate_rss_kb);
    if (migrate_s < 0)
        die("the migration failed");

    snprintf(cmd, sizeof cmd,
             "'%s/pg_dump' --format=custom --compress=0 --file='%s/peer.dump' '%s'", pgc.bin, dir,
             uri);
    double dump_s = timed(cmd);
    snprintf(cmd, sizeof cmd,
             "'%s/pg_restore' --exit-on-error --single-transaction --no-owner --dbname='%s' "
             "'%s/peer.dump'",
             pgc.bin, peer, dir);
    double restore_s = timed(cmd);
    if (dump_s < 0 || restore_s < 0)
        die("pg_dump or pg_restore failed");
    pg_cluster_stop(&pgc);
    tmpdir_remove(dir);

    printf("BENCH migrate_labels %ld labels\n", labels);
    printf("BENCH migrate_seconds %.2f s\n", migrate_s);
    printf("BENCH migrate_labels_per_s %.0f labels/s\n", labels / migrate_s);
    printf("BENCH migrate_max_rss %ld KiB\n", migrate_rss_kb);
    printf("BENCH migrate_peer_pg_dump_seconds %.2f s\n", dump_s);
    printf("BENCH migrate_peer_pg_restore_seconds %.2f s\n", restore_s);
    printf("BENCH migrate_vs_pg_restore %.2f ratio\n", migrate_s / restore_s);
    return 0;
}
