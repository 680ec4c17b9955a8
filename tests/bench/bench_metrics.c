/*
 * bench_metrics.c — the cost of a /metrics scrape and of /v1/stats on a
 * database of 10^6 labels (make bench-metrics).
 *
 * The database is the real server's (created and migrated by a first start
 * of ldpref-server), filled directly with SQL in one transaction, which
 * also computes the counters the label writer keeps at ingest (schema
 * 015) and the upload keeps (schema 016) from the rows: 4 campaigns of 50,000
 * tasks needing 5 labels each, 1,000 annotators per campaign labelling 250
 * tasks each (an assignment per label), received over 30 days. Then the
 * server is started again on it and scraped over HTTP; each request is
 * timed from the client (mean and p99). In the same run, on the same file,
 * the per-campaign statistics queries the server ran before the counters
 * (a join over every label per campaign, counts over tasks, annotators and
 * assignments) are timed directly through SQLite, beside the queries it
 * runs now, timed the same way. Prints "BENCH <name> <value> <unit>"
 * lines; decides nothing.
 */
#include "auth.h"
#include "clock.h"
#include "http_raw.h"
#include "server_proc.h"

#include <math.h>
#include <sodium.h>
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define CAMPAIGNS 4
#define TASKS 50000
#define PER_TASK 5
#define ANNOTATORS 1000
#define PER_ANNOTATOR (TASKS * PER_TASK / ANNOTATORS) /* 250 */
#define DAYS_MS (30 * 86400 * (int64_t)1000)
#define SCRAPES 200

static server_proc srv;

/* The counters the label writer keeps as labels arrive (server/db/labels.c)
 * and the task count each upload adds (server/db/tasks.c, schema 016),
 * computed from the rows written here with SQL. */
static const char COUNTERS[] =
    "UPDATE campaign_fill SET tasks = (SELECT count(*) FROM tasks t "
    "WHERE t.campaign = campaign_fill.campaign);"
    "UPDATE task_fill SET labels = n.c FROM (SELECT task, count(*) AS c FROM labels GROUP BY task) "
    "n WHERE n.task = task_fill.task;"
    "UPDATE annotator_fill SET labels = n.c, last_label_ms = n.last FROM (SELECT annotator, "
    "count(*) AS c, max(received_ms) AS last FROM labels GROUP BY annotator) n "
    "WHERE n.annotator = annotator_fill.annotator;"
    "UPDATE campaign_fill SET labels = n.labels, tasks_complete = n.complete FROM (SELECT "
    "f.campaign, sum(f.labels) AS labels, sum(f.labels >= c.labels_per_task) AS complete "
    "FROM task_fill f JOIN campaigns c ON c.id = f.campaign GROUP BY f.campaign) n "
    "WHERE n.campaign = campaign_fill.campaign;"
    "UPDATE campaign_fill SET epsilon_spent = (SELECT coalesce(sum(a.epsilon_spent), 0) "
    "FROM annotators a WHERE a.campaign = campaign_fill.campaign);"
    "INSERT INTO label_minutes (campaign, minute, labels) SELECT f.campaign, "
    "l.received_ms / 60000, count(*) FROM labels l JOIN task_fill f ON f.task = l.task "
    "GROUP BY 1, 2;";

static void die(const char *what)
{
    fprintf(stderr, "bench_metrics: %s\n", what);
    server_cleanup(&srv);
    exit(1);
}

static void exec(sqlite3 *db, const char *sql)
{
    char *err = NULL;
    if (sqlite3_exec(db, sql, NULL, NULL, &err) != SQLITE_OK) {
        fprintf(stderr, "%s: %s\n", sql, err ? err : sqlite3_errmsg(db));
        die("fixture SQL failed");
    }
}

static sqlite3_stmt *prepare(sqlite3 *db, const char *sql)
{
    sqlite3_stmt *st = NULL;
    if (sqlite3_prepare_v2(db, sql, -1, &st, NULL) != SQLITE_OK) {
        fprintf(stderr, "%s: %s\n", sql, sqlite3_errmsg(db));
        die("prepare failed");
    }
    return st;
}

static void step_done(sqlite3 *db, sqlite3_stmt *st)
{
    if (sqlite3_step(st) != SQLITE_DONE) {
        fprintf(stderr, "%s\n", sqlite3_errmsg(db));
        die("fixture insert failed");
    }
    sqlite3_reset(st);
}

/* Fills the stopped server's database; the operator token's hash is
 * stored so the restarted server accepts token. */
static void fill(const char *token_hash_hex)
{
    sqlite3 *db;
    if (sqlite3_open(srv.db, &db) != SQLITE_OK)
        die("open database");
    exec(db, "PRAGMA synchronous=OFF; PRAGMA foreign_keys=ON; PRAGMA cache_size=-262144; BEGIN");
    char sql[256];
    snprintf(sql, sizeof sql,
             "INSERT INTO operator_tokens (hash, name, scopes, created_ms) VALUES "
             "(x'%s', 'bench', 7, 0)",
             token_hash_hex);
    exec(db, sql);
    sqlite3_stmt *camp = prepare(db, "INSERT INTO campaigns (name, epsilon_min, epsilon_max, "
                                     "epsilon_budget, epsilon_default, created_ms, "
                                     "labels_per_task) VALUES (?1, 0.1, 2, 1e9, 1, 0, ?2)");
    sqlite3_stmt *task = prepare(db, "INSERT INTO tasks (campaign, source_id, prompt, response0, "
                                     "response1, created_ms) VALUES (?1, ?2, ?3, 'one', 'two', 0)");
    sqlite3_stmt *ann = prepare(db, "INSERT INTO annotators (public_key, pseudonym, campaign, "
                                    "enrolled_ms) VALUES (randomblob(32), ?1, ?2, 0)");
    sqlite3_stmt *asg = prepare(db, "INSERT INTO assignments (annotator, task, swapped, "
                                    "created_ms, leased_ms) VALUES (?1, ?2, 0, ?3, ?3)");
    sqlite3_stmt *lab = prepare(db, "INSERT INTO labels (annotator, task, z, z_task, epsilon, "
                                    "nonce, timestamp_ms, signature, received_ms) VALUES "
                                    "(?1, ?2, ?3, ?3, 1.0, randomblob(16), ?4, zeroblob(64), ?4)");
    int64_t start = lp_now_ms() - DAYS_MS, n = 0, total = (int64_t)CAMPAIGNS * TASKS * PER_TASK;
    for (int c = 0; c < CAMPAIGNS; c++) {
        char name[32], text[64];
        snprintf(name, sizeof name, "c%d", c);
        sqlite3_bind_text(camp, 1, name, -1, SQLITE_TRANSIENT);
        sqlite3_bind_int(camp, 2, PER_TASK);
        step_done(db, camp);
        int64_t cid = sqlite3_last_insert_rowid(db), first_task = 0, first_ann = 0;
        for (int t = 0; t < TASKS; t++) {
            snprintf(text, sizeof text, "c%d-t%d", c, t);
            sqlite3_bind_int64(task, 1, cid);
            sqlite3_bind_text(task, 2, text, -1, SQLITE_TRANSIENT);
            sqlite3_bind_text(task, 3, text, -1, SQLITE_TRANSIENT);
            step_done(db, task);
            if (t == 0)
                first_task = sqlite3_last_insert_rowid(db);
        }
        for (int a = 0; a < ANNOTATORS; a++) {
            snprintf(text, sizeof text, "ann-c%d-%d", c, a);
            sqlite3_bind_text(ann, 1, text, -1, SQLITE_TRANSIENT);
            sqlite3_bind_int64(ann, 2, cid);
            step_done(db, ann);
            if (a == 0)
                first_ann = sqlite3_last_insert_rowid(db);
        }
        /* annotator a labels tasks a*250 .. a*250+249 (mod TASKS): the
         * annotators a, a+200, ... share tasks, so each task gets 5 */
        for (int j = 0; j < PER_ANNOTATOR; j++)
            for (int a = 0; a < ANNOTATORS; a++, n++) {
                int64_t t = first_task + ((int64_t)a * PER_ANNOTATOR + j) % TASKS;
                int64_t when = start + n * DAYS_MS / total;
                sqlite3_bind_int64(asg, 1, first_ann + a);
                sqlite3_bind_int64(asg, 2, t);
                sqlite3_bind_int64(asg, 3, when);
                step_done(db, asg);
                sqlite3_bind_int64(lab, 1, first_ann + a);
                sqlite3_bind_int64(lab, 2, t);
                sqlite3_bind_int(lab, 3, (int)(n & 1));
                sqlite3_bind_int64(lab, 4, when);
                step_done(db, lab);
            }
    }
    exec(db, "UPDATE annotators SET epsilon_spent = 250.0 WHERE campaign > 1");
    exec(db, COUNTERS);
    exec(db, "COMMIT");
    sqlite3_finalize(camp);
    sqlite3_finalize(task);
    sqlite3_finalize(ann);
    sqlite3_finalize(asg);
    sqlite3_finalize(lab);
    sqlite3_close(db);
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

/* Times n GETs of path (ms each); prints mean and p99. */
static void time_gets(const char *name, const char *path, const char *bearer, int n)
{
    char url[256];
    snprintf(url, sizeof url, "%s%s", srv.url, path);
    double *ms = calloc((size_t)n, sizeof *ms), sum = 0;
    size_t bytes = 0;
    for (int i = 0; i < n; i++) {
        http_reply r;
        int64_t t0 = (lp_mono_ns() / 1000);
        int rc = http_raw("GET", url, NULL, 0, bearer, &r);
        ms[i] = (double)((lp_mono_ns() / 1000) - t0) / 1000.0;
        if (rc != 0 || r.status != 200) {
            fprintf(stderr, "GET %s -> %ld %s\n", path, r.status, r.body ? r.body : "");
            die("request failed");
        }
        bytes = r.len;
        http_reply_free(&r);
        sum += ms[i];
    }
    qsort(ms, (size_t)n, sizeof *ms, cmp_double);
    printf("BENCH %s_mean %.3f ms\n", name, sum / n);
    printf("BENCH %s_p99 %.3f ms\n", name, ms[(size_t)ceil(0.99 * n) - 1]);
    printf("BENCH %s_bytes %zu bytes\n", name, bytes);
    free(ms);
}

/* The statistics queries before the counters (stats.c as it was). */
static const char *const OLD_STATS[] = {
    "SELECT count(*) FROM tasks",
    "SELECT count(*) FROM annotators",
    "SELECT max(id) FROM labels",
    "SELECT count(*) FROM assignments",
    "SELECT coalesce(sum(epsilon_spent), 0) FROM annotators",
    "SELECT c.name, (SELECT count(*) FROM tasks t WHERE t.campaign = c.id), "
    "(SELECT count(*) FROM annotators a WHERE a.campaign = c.id), "
    "(SELECT count(*) FROM labels l JOIN annotators a ON a.id = l.annotator "
    " WHERE a.campaign = c.id), "
    "(SELECT coalesce(sum(epsilon_spent), 0) FROM annotators a WHERE a.campaign = c.id), "
    "c.labels_per_task, coalesce(c.annotator_quota, 0), f.tasks_complete, "
    "f.tasks * c.labels_per_task FROM campaigns c JOIN campaign_fill f ON f.campaign = c.id "
    "ORDER BY c.id",
    NULL};
/* The same figures now (stats.c). */
static const char *const NEW_STATS[] = {
    "SELECT coalesce(sum(tasks), 0), coalesce(sum(annotators), 0), coalesce(sum(labels), 0), "
    "coalesce(sum(assignments), 0), coalesce(sum(epsilon_spent), 0) FROM campaign_fill",
    "SELECT c.name, f.tasks, f.annotators, f.labels, f.epsilon_spent, c.labels_per_task, "
    "coalesce(c.annotator_quota, 0), f.tasks_complete, f.tasks * c.labels_per_task "
    "FROM campaigns c JOIN campaign_fill f ON f.campaign = c.id ORDER BY c.id",
    NULL};

/* Mean ms of running every query of sqls (all rows) in one read
 * transaction, n times; *labels gets the sum of column 3 of the last
 * query's rows (the per-campaign labels) to check both agree. */
static double time_queries(sqlite3 *db, const char *const *sqls, int n, int64_t *labels)
{
    double total = 0;
    for (int i = 0; i < n; i++) {
        int64_t t0 = (lp_mono_ns() / 1000);
        exec(db, "BEGIN");
        *labels = 0;
        for (int q = 0; sqls[q]; q++) {
            sqlite3_stmt *st = prepare(db, sqls[q]);
            while (sqlite3_step(st) == SQLITE_ROW)
                if (sqls[q + 1] == NULL)
                    *labels += sqlite3_column_int64(st, 3);
            sqlite3_finalize(st);
        }
        exec(db, "COMMIT");
        total += (double)((lp_mono_ns() / 1000) - t0) / 1000.0;
    }
    return total / n;
}

int main(void)
{
    if (sodium_init() < 0)
        die("libsodium");
    if (server_start(&srv, NULL) != 0)
        die("could not start ldpref-server");
    server_stop(&srv); /* the database is migrated once the server listens */
    char token[LP_AUTH_TOKEN_MAX];
    uint8_t hash[LP_HASH_BYTES];
    char hex[2 * LP_HASH_BYTES + 1];
    if (lp_auth_token_new("op_", token, hash) != 0)
        die("token");
    sodium_bin2hex(hex, sizeof hex, hash, sizeof hash);
    int64_t t0 = (lp_mono_ns() / 1000);
    fill(hex);
    int64_t labels = (int64_t)CAMPAIGNS * TASKS * PER_TASK;
    printf("BENCH metrics_labels %lld labels\n", (long long)labels);
    printf("BENCH metrics_fixture_fill %.1f s\n", (double)((lp_mono_ns() / 1000) - t0) / 1e6);
    fflush(stdout);
    if (server_restart(&srv, NULL) != 0)
        die("could not restart ldpref-server");

    /* warm the server's read pool and page cache, then time */
    time_gets("metrics_warmup", "/metrics", token, 5);
    time_gets("metrics_scrape", "/metrics", token, SCRAPES);
    time_gets("stats_request", "/v1/stats", token, SCRAPES);
    time_gets("campaign_view", "/v1/campaigns/view?campaign=c0", token, 50);
    time_gets("annotators_page", "/v1/annotators?campaign=c0&offset=900&limit=100", token, 50);
    time_gets("tasks_page", "/v1/tasks?campaign=c0&offset=49900&limit=100", token, 50);
    fflush(stdout);

    /* the old and new statistics queries, directly, on the same file */
    sqlite3 *db;
    if (sqlite3_open_v2(srv.db, &db, SQLITE_OPEN_READONLY, NULL) != SQLITE_OK)
        die("open database read-only");
    int64_t old_labels = 0, new_labels = 0;
    double old_ms = time_queries(db, OLD_STATS, 5, &old_labels);
    double new_ms = time_queries(db, NEW_STATS, SCRAPES, &new_labels);
    sqlite3_close(db);
    if (old_labels != labels || new_labels != labels) {
        fprintf(stderr, "labels: old %lld, new %lld, want %lld\n", (long long)old_labels,
                (long long)new_labels, (long long)labels);
        die("the old and new queries disagree");
    }
    printf("BENCH stats_queries_old_full_join %.3f ms\n", old_ms);
    printf("BENCH stats_queries_new_counters %.4f ms\n", new_ms);
    printf("BENCH stats_queries_speedup %.0f x\n", old_ms / new_ms);
    server_stop(&srv);
    server_cleanup(&srv);
    return 0;
}
