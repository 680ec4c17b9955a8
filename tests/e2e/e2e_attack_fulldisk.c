/*
 * e2e_attack_fulldisk.c — the database's disk fills up under ingest. The
 * database lives on a small tmpfs this test mounts (it needs root; without
 * it the test says so and skips); a ballast file takes all but a little of
 * the space, and annotators submit labels until they are refused.
 *
 *   1. no free-space minimum: the disk fills, a commit fails; labels are
 *      refused with a named error, /v1/healthz answers 503
 *      storage_unhealthy with reason commit_failed;
 *   2. the ballast goes: healthz is 200 again within a few seconds, labels
 *      are accepted, and once ingest stops the WAL is truncated to nothing;
 *   3. a free-space minimum above what is left: labels refused with
 *      storage_unhealthy before the disk is full, healthz reason disk_low;
 *      space returns: 200 and labels accepted again;
 *   4. after a restart every acknowledged label is in the export, and no
 *      refused one is.
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

#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

#define DISK_MIB 32
#define TASKS_PER_WRITER 1500
#define MIB (1024 * 1024LL)
#define RECOVERY_BOUND_MS 5000 /* checks run once a second */

static server_proc srv;
static label_stream ls;
static char disk[320], ballast[360];
static int mounted;

static long long free_bytes(void)
{
    struct statvfs sv;
    return statvfs(disk, &sv) == 0 ? (long long)sv.f_bavail * (long long)sv.f_frsize : -1;
}

/* Sizes the ballast file so that about `left` bytes stay free. */
static void ballast_leave(long long left)
{
    int fd = open(ballast, O_RDWR | O_CREAT, 0600);
    struct stat st;
    if (fd < 0 || fstat(fd, &st) != 0) {
        check_record(0, __FILE__, __LINE__, "ballast %s: %s", ballast, strerror(errno));
        if (fd >= 0)
            close(fd);
        return;
    }
    long long size = (long long)st.st_size + free_bytes() - left;
    CHECK_INT(ftruncate(fd, 0), 0);
    if (size > 0)
        CHECK_INT(posix_fallocate(fd, 0, (off_t)size), 0);
    close(fd);
}

/* GET /v1/healthz: the status; the "reason" into reason and the storage's
 * "reasons" as one comma-separated string into reasons. */
static long healthz(char *reason, char *reasons, size_t len)
{
    http_reply r;
    long status = raw_get(srv.url, "/v1/healthz", NULL, &r);
    json_t *j = json_loads(r.body ? r.body : "", 0, NULL);
    const char *why = json_string_value(json_object_get(j, "reason"));
    snprintf(reason, len, "%s", why ? why : "");
    json_t *list = json_object_get(json_object_get(j, "storage"), "reasons");
    reasons[0] = '\0';
    for (size_t k = 0; k < json_array_size(list); k++) {
        size_t n = strlen(reasons);
        snprintf(reasons + n, len - n, "%s%s", k ? "," : "",
                 json_string_value(json_array_get(list, k)));
    }
    json_decref(j);
    http_reply_free(&r);
    return status;
}

/* Polls healthz until it answers want; the milliseconds it took, or -1. */
static long long healthz_within(long want, long long bound_ms, char *reason, char *reasons,
                                size_t len)
{
    int64_t t0 = lp_now_ms();
    for (;;) {
        long long took = lp_now_ms() - t0;
        if (healthz(reason, reasons, len) == want)
            return took;
        if (took > bound_ms)
            return -1;
        usleep(50 * 1000);
    }
}

static long long wal_size(void)
{
    char wal[400];
    snprintf(wal, sizeof wal, "%s-wal", srv.db);
    struct stat st;
    return stat(wal, &st) == 0 ? (long long)st.st_size : -1;
}

/* Every refusal of the last run was a named storage error. */
static void check_refusals_named(const char *phase)
{
    int named = label_stream_refused_as(&ls, "storage_unhealthy") +
                label_stream_refused_as(&ls, "storage_error");
    check_record(ls.refused > 0 && named == ls.refused, __FILE__, __LINE__,
                 "%s: %d refusals, %d of them storage_unhealthy or storage_error", phase,
                 ls.refused, named);
}

static int start(const char *free_min)
{
    setenv("LDPREF_DISK_FREE_MIN", free_min, 1);
    int rc = server_restart(&srv, NULL);
    check_record(rc == 0, __FILE__, __LINE__, "the server starts with --disk-free-min %s",
                 free_min);
    return rc;
}

/* 1: the disk fills and a commit fails. */
static void test_commit_fails(void)
{
    ballast_leave(1 * MIB);
    int acked = label_stream_run(&ls, TASKS_PER_WRITER, 1);
    printf("full disk: %d labels acknowledged before the first refusal (%d free bytes left)\n",
           acked, (int)free_bytes());
    check_record(acked > 0, __FILE__, __LINE__, "labels were acknowledged before the disk filled");
    check_refusals_named("full disk");
    char reason[64], reasons[128];
    long status = healthz(reason, reasons, sizeof reason);
    CHECK_INT(status, 503);
    CHECK_STR(reason, "commit_failed");
    label_stream_run(&ls, 5, 0);
    CHECK_INT(label_stream_refused_as(&ls, "storage_unhealthy"), 5 * LABEL_STREAM_WRITERS);
}

/* 2 and the end of 3: space returns. */
static void test_space_returns(const char *phase)
{
    char reason[64], reasons[128];
    ballast_leave(DISK_MIB * MIB); /* as much as there is */
    long long took = healthz_within(200, RECOVERY_BOUND_MS, reason, reasons, sizeof reason);
    check_record(took >= 0, __FILE__, __LINE__,
                 "%s: healthz 200 within %d ms of the space returning", phase, RECOVERY_BOUND_MS);
    printf("%s: healthz 200 %lld ms after the space returned\n", phase, took);
    CHECK_INT(label_stream_run(&ls, 20, 1), 20 * LABEL_STREAM_WRITERS);
    long long wal = -1;
    int64_t t0 = lp_now_ms();
    while ((wal = wal_size()) != 0 && lp_now_ms() - t0 < RECOVERY_BOUND_MS)
        usleep(50 * 1000);
    check_record(wal == 0, __FILE__, __LINE__,
                 "%s: the WAL is truncated within %d ms once ingest stops (%lld bytes)", phase,
                 RECOVERY_BOUND_MS, wal);
    printf("%s: WAL %lld bytes %lld ms after ingest stopped\n", phase, wal,
           (long long)(lp_now_ms() - t0));
}

/* 3: a free-space minimum above what is left refuses labels first. */
static void test_disk_low(void)
{
    CHECK_INT(server_stop(&srv), 0);
    if (start("8M") != 0)
        return;
    ballast_leave(10 * MIB);
    int acked = label_stream_run(&ls, TASKS_PER_WRITER, 1);
    printf("low disk: %d labels acknowledged before the first refusal (%lld bytes free)\n", acked,
           free_bytes());
    check_record(acked > 0, __FILE__, __LINE__, "labels were acknowledged before the minimum");
    CHECK_INT(label_stream_refused_as(&ls, "storage_unhealthy"), ls.refused);
    check_refusals_named("low disk");
    char reason[64], reasons[128];
    CHECK_INT(healthz(reason, reasons, sizeof reason), 503);
    check_record(strstr(reasons, "disk_low") != NULL, __FILE__, __LINE__,
                 "healthz reasons \"%s\" include disk_low", reasons);
    test_space_returns("low disk");
}

/* 4: a restart keeps every acknowledged label, and only those. */
static void test_nothing_lost(void)
{
    CHECK_INT(server_stop(&srv), 0);
    if (start("1M") != 0)
        return;
    int stored = 0;
    int missing = label_stream_missing(&ls, &stored);
    check_record(missing == 0, __FILE__, __LINE__,
                 "%d of %d acknowledged labels missing after the restart", missing,
                 label_stream_acked(&ls));
    CHECK_INT(stored, label_stream_acked(&ls));
    CHECK_INT(server_stop(&srv), 0);
}

int main(void)
{
    lp_rng_init();
    if (server_skip_on_postgresql("e2e_attack_fulldisk",
                                  "the database's disk is PostgreSQL's, not the server's"))
        return check_summary();
    if (server_prepare(&srv) != 0) {
        check_record(0, __FILE__, __LINE__, "a temporary directory");
        return check_summary();
    }
    snprintf(disk, sizeof disk, "%s/disk", srv.dir);
    snprintf(ballast, sizeof ballast, "%s/ballast", disk);
    char opts[64];
    snprintf(opts, sizeof opts, "size=%dm,mode=0700", DISK_MIB);
    if (mkdir(disk, 0700) != 0 || mount("tmpfs", disk, "tmpfs", 0, opts) != 0) {
        printf("SKIP e2e_attack_fulldisk: cannot mount a %d MiB tmpfs on %s (%s); the test needs "
               "root\n",
               DISK_MIB, disk, strerror(errno));
        server_cleanup(&srv);
        return check_summary();
    }
    mounted = 1;
    snprintf(srv.db, sizeof srv.db, "%s/disk/ldpref.db", srv.dir);
    if (start("0") == 0 && label_stream_setup(&ls, &srv, "full", TASKS_PER_WRITER) == 0) {
        test_commit_fails();
        test_space_returns("full disk");
        test_disk_low();
        test_nothing_lost();
    }
    unsetenv("LDPREF_DISK_FREE_MIN");
    label_stream_free(&ls);
    if (srv.pid > 0)
        server_stop(&srv);
    if (mounted)
        umount2(disk, MNT_DETACH);
    server_cleanup(&srv);
    return check_summary();
}
