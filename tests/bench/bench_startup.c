/*
 * bench_startup.c — what the labels held cost a starting server
 * (make bench-startup).
 *
 * The server builds its nonce index (server/db/labels.c) from the labels
 * table when it opens the database. This starts the real ldpref-server on
 * a database without labels, then writes --labels N labels (default 10^7)
 * into the same file directly with SQL (one transaction; the label
 * triggers dropped meanwhile and restored, so the counters they keep are
 * not maintained: only the table matters here), and starts the server
 * again. Prints the time from spawn to listening and the resident memory
 * after start, both times, and their difference per label, as
 * "BENCH <name> <value> <unit>" lines; decides nothing.
 */
#include "clock.h"
#include "server_proc.h"

#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static server_proc srv;

static void die(const char *what, sqlite3 *db)
{
    fprintf(stderr, "bench_startup: %s%s%s\n", what, db ? ": " : "", db ? sqlite3_errmsg(db) : "");
    server_cleanup(&srv);
    exit(1);
}

/* CPU seconds pid has used (/proc: user + system), or -1. */
static double cpu_seconds(pid_t pid)
{
    char path[64];
    snprintf(path, sizeof path, "/proc/%d/stat", (int)pid);
    FILE *f = fopen(path, "r");
    unsigned long utime = 0, stime = 0;
    int got =
        f != NULL && fscanf(f, "%*d (%*[^)]) %*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %lu %lu",
                            &utime, &stime) == 2;
    if (f != NULL)
        fclose(f);
    return got ? (double)(utime + stime) / (double)sysconf(_SC_CLK_TCK) : -1;
}

/* Starts the server on srv's database: *seconds from spawn to listening,
 * the CPU it used meanwhile (robust to other load on the machine) and its
 * resident memory then. */
static void start(const char *const *args, double *seconds, double *cpu, long *kib)
{
    int64_t t0 = lp_mono_ns();
    if (server_restart(&srv, args) != 0)
        die("could not start ldpref-server", NULL);
    *seconds = (double)(lp_mono_ns() - t0) / 1e9;
    *cpu = cpu_seconds(srv.pid);
    *kib = server_status_field(srv.pid, "VmRSS");
    if (server_stop(&srv) != 0)
        die("ldpref-server did not stop cleanly", NULL);
}

static void exec_or_die(sqlite3 *db, const char *sql)
{
    if (sqlite3_exec(db, sql, NULL, NULL, NULL) != SQLITE_OK)
        die(sql, db);
}

/* Writes n labels of 1000 annotators (enrolled here too) into the database. */
static void fill(long long n)
{
    sqlite3 *db;
    if (sqlite3_open(srv.db, &db) != SQLITE_OK)
        die("open", db);
    exec_or_die(db, "PRAGMA journal_mode=WAL; PRAGMA synchronous=OFF; PRAGMA cache_size=-262144;"
                    "BEGIN");
    /* the label triggers, kept to be restored */
    sqlite3_stmt *st;
    if (sqlite3_prepare_v2(db,
                           "SELECT name, sql FROM sqlite_master WHERE type = 'trigger' AND "
                           "tbl_name = 'labels'",
                           -1, &st, NULL) != SQLITE_OK)
        die("triggers", db);
    char *saved[16], drop[128];
    int n_saved = 0;
    while (sqlite3_step(st) == SQLITE_ROW && n_saved < 16) {
        saved[n_saved++] = strdup((const char *)sqlite3_column_text(st, 1));
        snprintf(drop, sizeof drop, "DROP TRIGGER %s", (const char *)sqlite3_column_text(st, 0));
        exec_or_die(db, drop);
    }
    sqlite3_finalize(st);
    exec_or_die(db,
                "INSERT INTO annotators (id, public_key, pseudonym, campaign, enrolled_ms) "
                "WITH RECURSIVE k(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM k WHERE i < 1000) "
                "SELECT 1000000 + i, randomblob(32), 'bench-' || i, 1, 0 FROM k");
    char sql[1024];
    snprintf(sql, sizeof sql,
             "INSERT INTO labels (annotator, task, z, z_task, epsilon, nonce, timestamp_ms, "
             "signature, received_ms) "
             "WITH RECURSIVE k(i) AS (SELECT 0 UNION ALL SELECT i + 1 FROM k WHERE i < %lld) "
             "SELECT 1000000 + i %% 1000 + 1, i / 1000 + 1, i & 1, i & 1, 1.0, randomblob(16), "
             "i, randomblob(64), i FROM k",
             n - 1);
    exec_or_die(db, sql);
    for (int i = 0; i < n_saved; i++) {
        exec_or_die(db, saved[i]);
        free(saved[i]);
    }
    exec_or_die(db, "COMMIT; PRAGMA wal_checkpoint(TRUNCATE)");
    sqlite3_close(db);
}

int main(int argc, char **argv)
{
    long long labels = 10000000;
    for (int i = 1; i + 1 < argc; i += 2)
        if (strcmp(argv[i], "--labels") == 0)
            labels = atoll(argv[i + 1]);
    if (labels < 1)
        die("--labels must be at least 1", NULL);
    if (server_prepare(&srv) != 0)
        die("no temporary directory", NULL);
    const char *args[] = {"--sync", "full", NULL};
    double s0, s1, c0, c1;
    long k0, k1;
    start(args, &s0, &c0, &k0); /* creates the database */
    start(args, &s0, &c0, &k0);
    int64_t t0 = lp_mono_ns();
    fill(labels);
    double fill_s = (double)(lp_mono_ns() - t0) / 1e9;
    start(args, &s1, &c1, &k1);
    printf("BENCH startup_labels %lld labels\n", labels);
    printf("BENCH startup_fill %.1f s\n", fill_s);
    printf("BENCH startup_empty %.3f s\n", s0);
    printf("BENCH startup_with_labels %.3f s\n", s1);
    printf("BENCH startup_per_million_labels %.3f s\n", (s1 - s0) / ((double)labels / 1e6));
    printf("BENCH startup_cpu_empty %.3f s\n", c0);
    printf("BENCH startup_cpu_with_labels %.3f s\n", c1);
    printf("BENCH startup_rss_empty %.1f MiB\n", k0 / 1024.0);
    printf("BENCH startup_rss_with_labels %.1f MiB\n", k1 / 1024.0);
    printf("BENCH startup_rss_per_label %.1f bytes\n", (double)(k1 - k0) * 1024.0 / (double)labels);
    server_cleanup(&srv);
    return 0;
}
