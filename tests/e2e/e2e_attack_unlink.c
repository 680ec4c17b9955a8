/*
 * e2e_attack_unlink.c — the database files deleted under a running server
 * (`rm ldpref.db*`). The server must notice: /v1/healthz answers 503
 * storage_unhealthy with reason db_unlinked within a few seconds, and no
 * label (nor any other write) is acknowledged after the deletion, each
 * refused with storage_unhealthy. Restarting must not quietly create an
 * empty database with a new operator token: the marker beside the
 * database refuses the start; --db-must-exist refuses a missing file even
 * without the marker; deleting the marker starts over on purpose. The
 * database, its WAL and shm and the marker are 0600.
 *
 * Options go to the server through its environment (LDPREF_*), which a
 * server without them ignores, so this test also runs against an older
 * build (LDPREF_BUILD) and shows what it gets wrong.
 */
#include "check.h"
#include "clock.h"
#include "label_stream.h"
#include "rr.h"
#include "server_proc.h"

#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define TASKS_PER_WRITER 200
#define HEALTH_BOUND_MS 3000 /* the writer checks once a second */

static server_proc srv;
static label_stream ls;
static char marker[400];

static void db_file(const char *suffix, char *out, size_t outlen)
{
    snprintf(out, outlen, "%s%s", srv.db, suffix);
}

static long mode_of(const char *path)
{
    struct stat st;
    return stat(path, &st) == 0 ? (long)(st.st_mode & 0777) : -1;
}

/* GET /v1/healthz: the status, and the "reason" into reason ("" if none). */
static long healthz(char *reason, size_t len)
{
    http_reply r;
    long status = raw_get(srv.url, "/v1/healthz", NULL, &r);
    json_t *j = json_loads(r.body ? r.body : "", 0, NULL);
    const char *why = json_string_value(json_object_get(j, "reason"));
    snprintf(reason, len, "%s", why ? why : "");
    json_decref(j);
    http_reply_free(&r);
    return status;
}

/* Healthy before: labels acknowledged, healthz 200, every file 0600. */
static void test_healthy_and_private(void)
{
    CHECK_INT(label_stream_run(&ls, 50, 1), 50 * LABEL_STREAM_WRITERS);
    char reason[64], path[400];
    CHECK_INT(healthz(reason, sizeof reason), 200);
    const char *suffixes[] = {"", "-wal", "-shm"};
    for (int i = 0; i < 3; i++) {
        db_file(suffixes[i], path, sizeof path);
        check_record(mode_of(path) == 0600, __FILE__, __LINE__, "%s is 0600 (%lo)", path,
                     mode_of(path));
    }
    check_record(mode_of(marker) == 0600, __FILE__, __LINE__, "the marker %s is 0600 (%lo)", marker,
                 mode_of(marker));
}

/* rm ldpref.db*: every later submission refused, healthz says why. */
static void test_deleted_at_runtime(void)
{
    const char *suffixes[] = {"", "-wal", "-shm"};
    char path[400];
    for (int i = 0; i < 3; i++) {
        db_file(suffixes[i], path, sizeof path);
        CHECK_INT(unlink(path), 0);
    }
    int64_t t0 = lp_now_ms();
    int acked = label_stream_run(&ls, 25, 0);
    check_record(acked == 0, __FILE__, __LINE__,
                 "no label acknowledged after the database was deleted (%d were)", acked);
    CHECK_INT(label_stream_refused_as(&ls, "storage_unhealthy"), ls.refused);
    CHECK_INT(ls.refused, 25 * LABEL_STREAM_WRITERS);

    char reason[64] = "";
    long status = 0;
    int64_t waited = 0;
    while ((status = healthz(reason, sizeof reason)) != 503 && waited < HEALTH_BOUND_MS) {
        usleep(50 * 1000);
        waited = lp_now_ms() - t0;
    }
    CHECK_INT(status, 503);
    CHECK_STR(reason, "db_unlinked");
    if (status == 503)
        printf("healthz 503 %s %lld ms after the deletion\n", reason, (long long)waited);

    /* the same in /metrics */
    http_reply m;
    CHECK_INT(raw_get(srv.url, "/metrics", ls.token, &m), 200);
    CHECK(m.body && strstr(m.body, "ldpref_storage_healthy 0\n") != NULL);
    CHECK(m.body && strstr(m.body, "ldpref_storage_unhealthy{reason=\"db_unlinked\"} 1\n") != NULL);
    http_reply_free(&m);

    /* other writes too: a campaign */
    json_t *camp = json_pack("{s:s}", "name", "after-delete");
    http_reply r;
    CHECK_INT(raw_post_json(srv.url, "/v1/campaigns", camp, ls.token, &r), 503);
    char name[64];
    http_error_name(&r, name, sizeof name);
    CHECK_STR(name, "storage_unhealthy");
    http_reply_free(&r);
    json_decref(camp);

    /* a clean stop leaves no new file at the paths */
    CHECK_INT(server_stop(&srv), 0);
    for (int i = 0; i < 3; i++) {
        db_file(suffixes[i], path, sizeof path);
        check_record(access(path, F_OK) != 0, __FILE__, __LINE__, "no %s after the stop", path);
    }
}

/* 1 when the server's log mentions text. */
static int log_mentions(const char *text)
{
    FILE *f = fopen(srv.log, "r");
    if (f == NULL)
        return 0;
    char line[4096];
    int found = 0;
    while (!found && fgets(line, sizeof line, f) != NULL)
        found = strstr(line, text) != NULL;
    fclose(f);
    return found;
}

/* A start that must be refused: no server, exit status 1, no token. */
static void expect_refused_start(const char *why)
{
    int rc = server_restart(&srv, NULL);
    check_record(rc != 0, __FILE__, __LINE__, "the start is refused (%s)", why);
    if (rc == 0) {
        server_stop(&srv);
        return;
    }
    CHECK_INT(srv.exit_code, 1);
    CHECK_STR(srv.token, "");
    char path[400];
    db_file("", path, sizeof path);
    check_record(access(path, F_OK) != 0, __FILE__, __LINE__, "no database created (%s)", why);
}

/* Restarts: refused by the marker; refused by --db-must-exist without it;
 * deleting the marker starts over with a new database and token. */
static void test_restart(void)
{
    expect_refused_start("the marker");
    CHECK(log_mentions(marker));

    CHECK_INT(unlink(marker), 0);
    setenv("LDPREF_DB_MUST_EXIST", "1", 1);
    expect_refused_start("--db-must-exist");
    CHECK(log_mentions("--db-must-exist"));
    unsetenv("LDPREF_DB_MUST_EXIST");

    CHECK_INT(server_restart(&srv, NULL), 0); /* starting over on purpose */
    CHECK(strncmp(srv.token, "op_", 3) == 0);
    CHECK_INT(mode_of(marker), 0600);
    char reason[64];
    CHECK_INT(healthz(reason, sizeof reason), 200); /* (it also waits out the start) */
    CHECK_INT(server_stop(&srv), 0);
}

int main(void)
{
    lp_rng_init();
    if (server_skip_on_postgresql("e2e_attack_unlink", "the database is not a file to unlink"))
        return check_summary();
    if (server_start(&srv, NULL) != 0) {
        check_record(0, __FILE__, __LINE__, "server starts");
        return check_summary();
    }
    snprintf(marker, sizeof marker, "%s/.ldpref.db.marker", srv.dir);
    if (label_stream_setup(&ls, &srv, "unlink", TASKS_PER_WRITER) == 0) {
        test_healthy_and_private();
        test_deleted_at_runtime();
        test_restart();
    }
    label_stream_free(&ls);
    server_cleanup(&srv);
    return check_summary();
}
