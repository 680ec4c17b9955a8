/*
 * test_storage_health.c — the store's files and health on a real file:
 * the database, its WAL and shm and the marker are created 0600 whatever
 * the umask; --db-must-exist and the marker refuse a missing database
 * (and deleting the marker starts over); deleting the database files
 * while open refuses every later write with storage_unhealthy
 * (db_unlinked, for good); a free-space minimum above what the disk has
 * refuses writes (disk_low); an idle writer truncates the WAL to nothing.
 */
#include "campaigns.h"
#include "check.h"
#include "error.h"
#include "store.h"
#include "tmpdir.h"

#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static char dir[64], path[256], marker[300];

static int open_store(lp_store **s, int must_exist, int64_t free_min, char *err, size_t errlen)
{
    lp_store_opts o = {.path = path,
                       .sync_full = 1,
                       .read_conns = 1,
                       .must_exist = must_exist,
                       .marker = 1,
                       .disk_free_min = free_min};
    err[0] = '\0';
    return lp_store_open(&o, s, err, errlen);
}

static int create_campaign(lp_store *s, const char *name)
{
    lp_campaign c = {
        .epsilon_min = 0.1, .epsilon_max = 5, .epsilon_budget = 10, .epsilon_default = 1};
    snprintf(c.name, sizeof c.name, "%s", name);
    return lp_store_campaign_create(s, &c);
}

static long mode_of(const char *p)
{
    struct stat st;
    return stat(p, &st) == 0 ? (long)(st.st_mode & 0777) : -1;
}

static long long size_of(const char *p)
{
    struct stat st;
    return stat(p, &st) == 0 ? (long long)st.st_size : -1;
}

static void remove_db_files(void)
{
    const char *suffix[] = {"", "-wal", "-shm"};
    for (int i = 0; i < 3; i++) {
        char p[300];
        snprintf(p, sizeof p, "%s%s", path, suffix[i]);
        unlink(p);
    }
}

/* Waits up to 5 s for the health's reason to become want. */
static void wait_reason(lp_store *s, const char *want, lp_store_health *h)
{
    for (int waited = 0; waited < 5000; waited += 50) {
        lp_store_health_get(s, h);
        if (strcmp(h->reason, want) == 0)
            return;
        usleep(50 * 1000);
    }
}

/* A new database under a permissive umask: every file is the owner's. */
static void test_modes_and_marker(void)
{
    char err[512];
    lp_store *s = NULL;
    mode_t old = umask(022);
    CHECK_INT(open_store(&s, 0, 0, err, sizeof err), LP_OK);
    umask(old);
    CHECK_INT(create_campaign(s, "first"), LP_OK);
    char wal[300], shm[300];
    snprintf(wal, sizeof wal, "%s-wal", path);
    snprintf(shm, sizeof shm, "%s-shm", path);
    CHECK_INT(mode_of(path), 0600);
    CHECK_INT(mode_of(wal), 0600);
    CHECK_INT(mode_of(shm), 0600);
    CHECK_INT(mode_of(marker), 0600);
    lp_store_health h;
    lp_store_health_get(s, &h);
    CHECK_STR(h.reason, "ok");
    CHECK(h.free_bytes > 0 && h.checked_ms > 0);
    lp_store_close(s);
}

/* The idle writer folds the WAL in and truncates it to nothing. */
static void test_idle_truncate(void)
{
    char err[512], wal[300];
    snprintf(wal, sizeof wal, "%s-wal", path);
    lp_store *s = NULL;
    CHECK_INT(open_store(&s, 1, 0, err, sizeof err), LP_OK);
    CHECK_INT(create_campaign(s, "second"), LP_OK);
    CHECK(size_of(wal) > 0);
    /* the writer truncates the WAL, then records when: wait for both */
    long long size = -1;
    lp_store_health h = {0};
    for (int waited = 0; waited < 5000 && (size != 0 || h.truncated_ms == 0); waited += 50) {
        usleep(50 * 1000);
        size = size_of(wal);
        lp_store_health_get(s, &h);
    }
    CHECK_INT(size, 0);
    CHECK(h.truncated_ms > 0);
    lp_store_close(s);
}

/* A free-space minimum the disk cannot meet: writes refused, nothing
 * stored; with none, the same store takes writes. */
static void test_disk_low(void)
{
    char err[512];
    lp_store *s = NULL;
    CHECK_INT(open_store(&s, 1, INT64_MAX / 2, err, sizeof err), LP_OK);
    CHECK_INT(create_campaign(s, "refused"), LP_ESTORAGE_UNHEALTHY);
    lp_store_health h;
    lp_store_health_get(s, &h);
    CHECK_STR(h.reason, "disk_low");
    CHECK(h.disk_low && h.free_bytes >= 0 && h.free_bytes < h.free_min);
    lp_store_close(s);
    CHECK_INT(open_store(&s, 1, 0, err, sizeof err), LP_OK);
    lp_campaign c;
    CHECK_INT(lp_store_campaign_by_name(s, "refused", &c), LP_EUNKNOWN_CAMPAIGN);
    CHECK_INT(create_campaign(s, "accepted"), LP_OK);
    lp_store_close(s);
}

/* The database files deleted while open: every later write is refused,
 * and stays refused; the health says why within a second. */
static void test_unlinked(void)
{
    char err[512];
    lp_store *s = NULL;
    CHECK_INT(open_store(&s, 1, 0, err, sizeof err), LP_OK);
    CHECK_INT(create_campaign(s, "before"), LP_OK);
    remove_db_files();
    CHECK_INT(create_campaign(s, "after"), LP_ESTORAGE_UNHEALTHY);
    lp_store_health h;
    lp_store_health_get(s, &h);
    CHECK(h.unlinked);
    CHECK_STR(h.reason, "db_unlinked");
    /* a new file at the path does not make the old one linked again */
    FILE *f = fopen(path, "w");
    if (f)
        fclose(f);
    wait_reason(s, "db_unlinked", &h);
    CHECK_INT(create_campaign(s, "later"), LP_ESTORAGE_UNHEALTHY);
    lp_store_close(s);
    CHECK_INT(size_of(path), 0); /* closing left the new file alone */
    unlink(path);
}

/* A missing database: refused with --db-must-exist, refused while the
 * marker exists, created again once the marker is deleted. */
static void test_missing(void)
{
    char err[512];
    lp_store *s = NULL;
    remove_db_files();
    CHECK_INT(open_store(&s, 0, 0, err, sizeof err), LP_ESTORAGE);
    CHECK(s == NULL && strstr(err, marker) != NULL);
    CHECK_INT(size_of(path), -1); /* nothing created */
    CHECK_INT(open_store(&s, 1, 0, err, sizeof err), LP_ESTORAGE);
    CHECK(strstr(err, "--db-must-exist") != NULL);
    CHECK_INT(unlink(marker), 0);
    CHECK_INT(open_store(&s, 1, 0, err, sizeof err), LP_ESTORAGE); /* still must exist */
    CHECK_INT(open_store(&s, 0, 0, err, sizeof err), LP_OK);
    lp_campaign c;
    CHECK_INT(lp_store_campaign_by_name(s, "first", &c), LP_EUNKNOWN_CAMPAIGN); /* a new one */
    CHECK_INT(mode_of(marker), 0600);                                           /* marked again */
    lp_store_close(s);
}

int main(void)
{
    if (tmpdir_create(dir, sizeof dir, "test-health") != 0)
        return 1;
    snprintf(path, sizeof path, "%s/h.db", dir);
    snprintf(marker, sizeof marker, "%s/.h.db.marker", dir);
    test_modes_and_marker();
    test_idle_truncate();
    test_disk_low();
    test_unlinked();
    test_missing();
    tmpdir_remove(dir);
    return check_summary();
}
