/*
 * test_walbuf.c — the WAL-batching VFS on a real file: what is written
 * through it reads back byte for byte (through it, and through the default
 * VFS from another connection while the writer is open), over many small
 * commits, commits larger than its buffer, and checkpoints; integrity_check
 * is ok after all of it, and again after reopening.
 */
#include "check.h"
#include "tmpdir.h"
#include "walbuf.h"

#include <sqlite3.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define SMALL_COMMITS 400
#define ROWS_PER_COMMIT 5
#define BIG_ROWS 24
#define BIG_BYTES (300 * 1024) /* 24 x 300 KiB: one commit beyond the 4 MiB buffer */

static char dir[64];
static char path[256];

/* The content of row k: a deterministic byte stream of its own length. */
static size_t row_len(int64_t k)
{
    return k >= 1000000 ? BIG_BYTES + (size_t)(k % 7) * 13 : 1 + (size_t)((k * 2654435761u) % 6000);
}

static void row_bytes(int64_t k, unsigned char *out, size_t n)
{
    uint64_t x = 0x9E3779B97F4A7C15ull ^ (uint64_t)k;
    for (size_t i = 0; i < n; i++) {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        out[i] = (unsigned char)x;
    }
}

static sqlite3 *open_db(const char *vfs)
{
    sqlite3 *db = NULL;
    if (sqlite3_open_v2(path, &db, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE, vfs) != SQLITE_OK) {
        sqlite3_close(db);
        return NULL;
    }
    sqlite3_busy_timeout(db, 5000);
    sqlite3_exec(db, "PRAGMA journal_mode=WAL; PRAGMA synchronous=FULL;", NULL, NULL, NULL);
    return db;
}

static int insert_rows(sqlite3 *db, int64_t first, int n)
{
    static unsigned char buf[BIG_BYTES + 128];
    sqlite3_stmt *st;
    if (sqlite3_prepare_v2(db, "INSERT INTO r (k, b) VALUES (?1, ?2)", -1, &st, NULL) != SQLITE_OK)
        return 0;
    int ok = sqlite3_exec(db, "BEGIN IMMEDIATE", NULL, NULL, NULL) == SQLITE_OK;
    for (int i = 0; ok && i < n; i++) {
        int64_t k = first + i;
        size_t len = row_len(k);
        row_bytes(k, buf, len);
        sqlite3_bind_int64(st, 1, k);
        sqlite3_bind_blob(st, 2, buf, (int)len, SQLITE_STATIC);
        ok = sqlite3_step(st) == SQLITE_DONE;
        sqlite3_reset(st);
    }
    sqlite3_finalize(st);
    return ok && sqlite3_exec(db, "COMMIT", NULL, NULL, NULL) == SQLITE_OK;
}

/* Every row reads back as written; returns the number of rows. */
static long long verify(sqlite3 *db, int *mismatches)
{
    static unsigned char want[BIG_BYTES + 128];
    sqlite3_stmt *st;
    long long rows = 0;
    *mismatches = 0;
    if (sqlite3_prepare_v2(db, "SELECT k, b FROM r ORDER BY k", -1, &st, NULL) != SQLITE_OK)
        return -1;
    while (sqlite3_step(st) == SQLITE_ROW) {
        int64_t k = sqlite3_column_int64(st, 0);
        size_t len = row_len(k);
        row_bytes(k, want, len);
        const void *got = sqlite3_column_blob(st, 1);
        if ((size_t)sqlite3_column_bytes(st, 1) != len || memcmp(got, want, len) != 0)
            (*mismatches)++;
        rows++;
    }
    sqlite3_finalize(st);
    return rows;
}

static int integrity_ok(sqlite3 *db)
{
    sqlite3_stmt *st;
    int ok = sqlite3_prepare_v2(db, "PRAGMA integrity_check", -1, &st, NULL) == SQLITE_OK &&
             sqlite3_step(st) == SQLITE_ROW &&
             strcmp((const char *)sqlite3_column_text(st, 0), "ok") == 0;
    sqlite3_finalize(st);
    return ok;
}

int main(void)
{
    if (tmpdir_create(dir, sizeof dir, "test-walbuf") != 0)
        return 1;
    snprintf(path, sizeof path, "%s/w.db", dir);
    const char *vfs = lp_walbuf_vfs();
    CHECK(vfs != NULL);
    CHECK(vfs != NULL && lp_walbuf_vfs() == vfs); /* registered once */

    sqlite3 *w = open_db(vfs);
    CHECK(w != NULL);
    if (w == NULL)
        return check_summary();
    CHECK_INT(sqlite3_exec(w, "CREATE TABLE r (k INTEGER PRIMARY KEY, b BLOB NOT NULL)", NULL, NULL,
                           NULL),
              SQLITE_OK);
    sqlite3 *reader = open_db(NULL);
    CHECK(reader != NULL);

    /* many small commits (the default checkpoint runs every 1000 pages) */
    int ok = 1;
    long long expect = 0;
    for (int c = 0; c < SMALL_COMMITS; c++) {
        ok &= insert_rows(w, 1 + (int64_t)c * ROWS_PER_COMMIT, ROWS_PER_COMMIT);
        expect += ROWS_PER_COMMIT;
        if (c % 100 == 99) { /* another connection sees every commit, intact */
            int bad;
            CHECK_INT(verify(reader, &bad), expect);
            CHECK_INT(bad, 0);
        }
    }
    CHECK(ok);

    /* one commit larger than the buffer, then small ones after it */
    CHECK(insert_rows(w, 1000000, BIG_ROWS));
    expect += BIG_ROWS;
    CHECK(insert_rows(w, 900000, 3));
    expect += 3;
    int bad;
    CHECK_INT(verify(w, &bad), expect);
    CHECK_INT(bad, 0);
    CHECK_INT(verify(reader, &bad), expect);
    CHECK_INT(bad, 0);
    CHECK(integrity_ok(w));
    CHECK(integrity_ok(reader));

    /* a checkpoint through the VFS, then more commits on the reset WAL */
    CHECK_INT(sqlite3_exec(w, "PRAGMA wal_checkpoint(TRUNCATE)", NULL, NULL, NULL), SQLITE_OK);
    CHECK(insert_rows(w, 800000, 50));
    expect += 50;
    CHECK_INT(verify(reader, &bad), expect);
    CHECK_INT(bad, 0);
    sqlite3_close(reader);
    sqlite3_close(w); /* the last connection folds the WAL back, reading it through walbuf */

    /* reopened: through the default VFS, then through walbuf again */
    sqlite3 *plain = open_db(NULL);
    CHECK(plain != NULL);
    CHECK_INT(verify(plain, &bad), expect);
    CHECK_INT(bad, 0);
    CHECK(integrity_ok(plain));
    sqlite3_close(plain);
    w = open_db(vfs);
    CHECK(w != NULL);
    CHECK(insert_rows(w, 700000, 10));
    expect += 10;
    CHECK_INT(verify(w, &bad), expect);
    CHECK_INT(bad, 0);
    CHECK(integrity_ok(w));
    sqlite3_close(w);
    plain = open_db(NULL);
    CHECK_INT(verify(plain, &bad), expect);
    CHECK_INT(bad, 0);
    CHECK(integrity_ok(plain));
    sqlite3_close(plain);

    tmpdir_remove(dir);
    return check_summary();
}
