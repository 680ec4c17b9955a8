/* walbuf.c — a VFS that writes a commit's WAL frames with one call. See walbuf.h. */
#include "walbuf.h"

#include <pthread.h>
#include <sqlite3.h>
#include <stdlib.h>
#include <string.h>

#define WALBUF_NAME "ldpref-walbuf"
#define WALBUF_MAX (4 << 20) /* a larger run is written in pieces */

struct wb_file {
    sqlite3_file base; /* pMethods: wb_wal_methods or wb_pass_methods */
    char *buf;         /* WAL files only: pending bytes, written at off */
    sqlite3_int64 off;
    int len, cap;
    sqlite3_file *real; /* the wrapped file, stored right after this struct */
};

static sqlite3_vfs wb_vfs;
static sqlite3_vfs *wb_real_vfs;

#define REAL(f) (((struct wb_file *)(f))->real)

/* Writes the buffered run, if any, in pieces of at most WALBUF_PIECE: the
 * unix VFS cannot write 128 KiB or more in one call (it masks the length
 * with 0x1ffff), and SQLite itself never asks it to. */
#define WALBUF_PIECE (64 * 1024)
static int wb_flush(struct wb_file *f)
{
    int rc = SQLITE_OK;
    for (int done = 0; done < f->len && rc == SQLITE_OK; done += WALBUF_PIECE) {
        int n = f->len - done < WALBUF_PIECE ? f->len - done : WALBUF_PIECE;
        rc = f->real->pMethods->xWrite(f->real, f->buf + done, n, f->off + done);
    }
    f->len = 0;
    return rc;
}

/* ---- methods of WAL files: buffer contiguous writes ---- */

static int wb_wal_write(sqlite3_file *pf, const void *data, int amt, sqlite3_int64 off)
{
    struct wb_file *f = (struct wb_file *)pf;
    if (f->len > 0 && off == f->off + f->len && amt <= f->cap - f->len) {
        memcpy(f->buf + f->len, data, (size_t)amt);
        f->len += amt;
        return SQLITE_OK;
    }
    int rc = wb_flush(f);
    if (rc != SQLITE_OK)
        return rc;
    if (amt > WALBUF_PIECE)
        return f->real->pMethods->xWrite(f->real, data, amt, off);
    if (f->buf == NULL) {
        f->buf = malloc(WALBUF_MAX);
        if (f->buf == NULL)
            return f->real->pMethods->xWrite(f->real, data, amt, off);
        f->cap = WALBUF_MAX;
    }
    memcpy(f->buf, data, (size_t)amt);
    f->off = off;
    f->len = amt;
    return SQLITE_OK;
}

/* Every other method of a WAL file first writes what is buffered. */
#define FLUSH_OR_RETURN(pf)                                                                        \
    do {                                                                                           \
        int flush_rc = wb_flush((struct wb_file *)(pf));                                           \
        if (flush_rc != SQLITE_OK)                                                                 \
            return flush_rc;                                                                       \
    } while (0)

static int wb_wal_close(sqlite3_file *pf)
{
    struct wb_file *f = (struct wb_file *)pf;
    int rc = wb_flush(f);
    free(f->buf);
    f->buf = NULL;
    int rc2 = f->real->pMethods->xClose(f->real);
    return rc != SQLITE_OK ? rc : rc2;
}

static int wb_wal_read(sqlite3_file *pf, void *out, int amt, sqlite3_int64 off)
{
    FLUSH_OR_RETURN(pf);
    return REAL(pf)->pMethods->xRead(REAL(pf), out, amt, off);
}

static int wb_wal_truncate(sqlite3_file *pf, sqlite3_int64 size)
{
    FLUSH_OR_RETURN(pf);
    return REAL(pf)->pMethods->xTruncate(REAL(pf), size);
}

static int wb_wal_sync(sqlite3_file *pf, int flags)
{
    FLUSH_OR_RETURN(pf);
    return REAL(pf)->pMethods->xSync(REAL(pf), flags);
}

static int wb_wal_file_size(sqlite3_file *pf, sqlite3_int64 *size)
{
    FLUSH_OR_RETURN(pf);
    return REAL(pf)->pMethods->xFileSize(REAL(pf), size);
}

static int wb_wal_lock(sqlite3_file *pf, int lock)
{
    FLUSH_OR_RETURN(pf);
    return REAL(pf)->pMethods->xLock(REAL(pf), lock);
}

static int wb_wal_unlock(sqlite3_file *pf, int lock)
{
    FLUSH_OR_RETURN(pf);
    return REAL(pf)->pMethods->xUnlock(REAL(pf), lock);
}

static int wb_wal_file_control(sqlite3_file *pf, int op, void *arg)
{
    FLUSH_OR_RETURN(pf);
    return REAL(pf)->pMethods->xFileControl(REAL(pf), op, arg);
}

/* ---- methods that only forward (all files) ---- */

static int wb_close(sqlite3_file *pf)
{
    return REAL(pf)->pMethods->xClose(REAL(pf));
}
static int wb_read(sqlite3_file *pf, void *out, int amt, sqlite3_int64 off)
{
    return REAL(pf)->pMethods->xRead(REAL(pf), out, amt, off);
}
static int wb_write(sqlite3_file *pf, const void *data, int amt, sqlite3_int64 off)
{
    return REAL(pf)->pMethods->xWrite(REAL(pf), data, amt, off);
}
static int wb_truncate(sqlite3_file *pf, sqlite3_int64 size)
{
    return REAL(pf)->pMethods->xTruncate(REAL(pf), size);
}
static int wb_sync(sqlite3_file *pf, int flags)
{
    return REAL(pf)->pMethods->xSync(REAL(pf), flags);
}
static int wb_file_size(sqlite3_file *pf, sqlite3_int64 *size)
{
    return REAL(pf)->pMethods->xFileSize(REAL(pf), size);
}
static int wb_lock(sqlite3_file *pf, int lock)
{
    return REAL(pf)->pMethods->xLock(REAL(pf), lock);
}
static int wb_unlock(sqlite3_file *pf, int lock)
{
    return REAL(pf)->pMethods->xUnlock(REAL(pf), lock);
}
static int wb_check_reserved(sqlite3_file *pf, int *out)
{
    return REAL(pf)->pMethods->xCheckReservedLock(REAL(pf), out);
}
static int wb_file_control(sqlite3_file *pf, int op, void *arg)
{
    return REAL(pf)->pMethods->xFileControl(REAL(pf), op, arg);
}
static int wb_sector_size(sqlite3_file *pf)
{
    return REAL(pf)->pMethods->xSectorSize(REAL(pf));
}
static int wb_device_characteristics(sqlite3_file *pf)
{
    return REAL(pf)->pMethods->xDeviceCharacteristics(REAL(pf));
}
static int wb_shm_map(sqlite3_file *pf, int region, int size, int extend, void volatile **out)
{
    return REAL(pf)->pMethods->xShmMap(REAL(pf), region, size, extend, out);
}
static int wb_shm_lock(sqlite3_file *pf, int offset, int n, int flags)
{
    return REAL(pf)->pMethods->xShmLock(REAL(pf), offset, n, flags);
}
static void wb_shm_barrier(sqlite3_file *pf)
{
    REAL(pf)->pMethods->xShmBarrier(REAL(pf));
}
static int wb_shm_unmap(sqlite3_file *pf, int del)
{
    return REAL(pf)->pMethods->xShmUnmap(REAL(pf), del);
}
static int wb_fetch(sqlite3_file *pf, sqlite3_int64 off, int amt, void **out)
{
    return REAL(pf)->pMethods->xFetch(REAL(pf), off, amt, out);
}
static int wb_unfetch(sqlite3_file *pf, sqlite3_int64 off, void *p)
{
    return REAL(pf)->pMethods->xUnfetch(REAL(pf), off, p);
}

static const sqlite3_io_methods wb_pass_methods = {
    3,
    wb_close,
    wb_read,
    wb_write,
    wb_truncate,
    wb_sync,
    wb_file_size,
    wb_lock,
    wb_unlock,
    wb_check_reserved,
    wb_file_control,
    wb_sector_size,
    wb_device_characteristics,
    wb_shm_map,
    wb_shm_lock,
    wb_shm_barrier,
    wb_shm_unmap,
    wb_fetch,
    wb_unfetch,
};

/* WAL files are never memory-mapped or used for shared memory by SQLite;
 * version 1 keeps it from trying. */
static const sqlite3_io_methods wb_wal_methods = {
    1,
    wb_wal_close,
    wb_wal_read,
    wb_wal_write,
    wb_wal_truncate,
    wb_wal_sync,
    wb_wal_file_size,
    wb_wal_lock,
    wb_wal_unlock,
    wb_check_reserved,
    wb_wal_file_control,
    wb_sector_size,
    wb_device_characteristics,
    NULL,
    NULL,
    NULL,
    NULL,
    NULL,
    NULL,
};

static int wb_open(sqlite3_vfs *vfs, const char *name, sqlite3_file *pf, int flags, int *out_flags)
{
    (void)vfs;
    struct wb_file *f = (struct wb_file *)pf;
    memset(f, 0, sizeof *f);
    f->real = (sqlite3_file *)(f + 1);
    int rc = wb_real_vfs->xOpen(wb_real_vfs, name, f->real, flags, out_flags);
    if (f->real->pMethods == NULL) {
        f->base.pMethods = NULL; /* nothing to close */
        return rc;
    }
    f->base.pMethods = (flags & SQLITE_OPEN_WAL) ? &wb_wal_methods : &wb_pass_methods;
    return rc;
}

/* The rest of the VFS forwards to the default one. */
static int wb_delete(sqlite3_vfs *v, const char *name, int sync_dir)
{
    (void)v;
    return wb_real_vfs->xDelete(wb_real_vfs, name, sync_dir);
}
static int wb_access(sqlite3_vfs *v, const char *name, int flags, int *out)
{
    (void)v;
    return wb_real_vfs->xAccess(wb_real_vfs, name, flags, out);
}
static int wb_full_pathname(sqlite3_vfs *v, const char *name, int n, char *out)
{
    (void)v;
    return wb_real_vfs->xFullPathname(wb_real_vfs, name, n, out);
}
static void *wb_dlopen(sqlite3_vfs *v, const char *name)
{
    (void)v;
    return wb_real_vfs->xDlOpen(wb_real_vfs, name);
}
static void wb_dlerror(sqlite3_vfs *v, int n, char *out)
{
    (void)v;
    wb_real_vfs->xDlError(wb_real_vfs, n, out);
}
static void (*wb_dlsym(sqlite3_vfs *v, void *h, const char *sym))(void)
{
    (void)v;
    return wb_real_vfs->xDlSym(wb_real_vfs, h, sym);
}
static void wb_dlclose(sqlite3_vfs *v, void *h)
{
    (void)v;
    wb_real_vfs->xDlClose(wb_real_vfs, h);
}
static int wb_randomness(sqlite3_vfs *v, int n, char *out)
{
    (void)v;
    return wb_real_vfs->xRandomness(wb_real_vfs, n, out);
}
static int wb_sleep(sqlite3_vfs *v, int us)
{
    (void)v;
    return wb_real_vfs->xSleep(wb_real_vfs, us);
}
static int wb_current_time(sqlite3_vfs *v, double *out)
{
    (void)v;
    return wb_real_vfs->xCurrentTime(wb_real_vfs, out);
}
static int wb_get_last_error(sqlite3_vfs *v, int n, char *out)
{
    (void)v;
    return wb_real_vfs->xGetLastError ? wb_real_vfs->xGetLastError(wb_real_vfs, n, out) : 0;
}
static int wb_current_time_int64(sqlite3_vfs *v, sqlite3_int64 *out)
{
    (void)v;
    return wb_real_vfs->xCurrentTimeInt64(wb_real_vfs, out);
}

static int wb_registered;

static void wb_register(void)
{
    wb_real_vfs = sqlite3_vfs_find(NULL);
    if (wb_real_vfs == NULL || wb_real_vfs->iVersion < 2 || wb_real_vfs->xCurrentTimeInt64 == NULL)
        return;
    wb_vfs = (sqlite3_vfs){
        .iVersion = 2,
        .szOsFile = (int)sizeof(struct wb_file) + wb_real_vfs->szOsFile,
        .mxPathname = wb_real_vfs->mxPathname,
        .zName = WALBUF_NAME,
        .xOpen = wb_open,
        .xDelete = wb_delete,
        .xAccess = wb_access,
        .xFullPathname = wb_full_pathname,
        .xDlOpen = wb_dlopen,
        .xDlError = wb_dlerror,
        .xDlSym = wb_dlsym,
        .xDlClose = wb_dlclose,
        .xRandomness = wb_randomness,
        .xSleep = wb_sleep,
        .xCurrentTime = wb_current_time,
        .xGetLastError = wb_get_last_error,
        .xCurrentTimeInt64 = wb_current_time_int64,
    };
    wb_registered = sqlite3_vfs_register(&wb_vfs, 0) == SQLITE_OK;
}

const char *lp_walbuf_vfs(void)
{
    static pthread_once_t once = PTHREAD_ONCE_INIT;
    pthread_once(&once, wb_register);
    return wb_registered ? WALBUF_NAME : NULL;
}
