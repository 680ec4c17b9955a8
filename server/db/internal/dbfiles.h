/*
 * dbfiles.h — the database's files as the operating system sees them
 * (internal to server/db/): what is checked before SQLite opens them, and
 * what a running server watches.
 *
 * Before opening: a database that must exist (--db-must-exist) or whose
 * marker says it existed is refused when its file is missing or empty,
 * instead of being created empty. A missing file is created here with mode
 * 0600 (SQLite gives the WAL and shm files the mode of the database file).
 *
 * The marker is a small text file beside the database, named after it with
 * a leading dot and a ".marker" suffix ("var/.ldpref.db.marker" for
 * "var/ldpref.db"), so that deleting the database files ("rm
 * var/ldpref.db*") leaves it. It is written once the database is open, if
 * absent; deleting it is how an operator deliberately starts over.
 *
 * While open: a descriptor on the database file and one on its WAL record
 * which files SQLite writes; the database is "unlinked" once its path or its
 * WAL's path no longer leads to those files (deleted, renamed or replaced).
 * The descriptors never hold locks and are closed only after SQLite has
 * closed every connection (closing a descriptor drops the process's POSIX
 * locks on the file).
 */
#ifndef LP_DBFILES_H
#define LP_DBFILES_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#define LP_DBFILES_PATH_MAX 4096

typedef struct lp_dbfiles {
    char path[LP_DBFILES_PATH_MAX];
    char wal[LP_DBFILES_PATH_MAX + 8];
    char marker[LP_DBFILES_PATH_MAX + 16];
    char train_lock[LP_DBFILES_PATH_MAX + 16]; /* coord.h: the training lock's file */
    char dir[LP_DBFILES_PATH_MAX];             /* the folder holding them */
    int db_fd, wal_fd;                         /* -1 when not open */
    dev_t db_dev, wal_dev;
    ino_t db_ino, wal_ino;
} lp_dbfiles;

/* Prepares f for path and, before SQLite opens it: refuses a missing or
 * empty database file when must_exist, or when use_marker and the marker
 * exists; otherwise creates a missing file with mode 0600 and keeps a
 * descriptor on it. LP_OK, or LP_ESTORAGE with the reason in err (f is
 * then closed). */
int lp_dbfiles_open(lp_dbfiles *f, const char *path, int must_exist, int use_marker, char *err,
                    size_t errlen);

/* Once SQLite has opened the database (its WAL exists): keeps a descriptor
 * on the WAL and, with use_marker, writes the marker if it is absent (a
 * failure is logged, not fatal). Warns when the database file can be read
 * by others than its owner. */
void lp_dbfiles_opened(lp_dbfiles *f, int use_marker);

/* 1 while the database's path and its WAL's path lead to the files that
 * are open (a stat per file), 0 once either does not. With full, also
 * 0 when either open file has no link left (fstat). */
int lp_dbfiles_linked(const lp_dbfiles *f, int full);

/* Bytes an unprivileged user may still write on the database's
 * filesystem (statvfs f_bavail), or -1 when unknown. */
int64_t lp_dbfiles_free_bytes(const lp_dbfiles *f);

/* The size of the WAL file, or -1 when unknown. */
int64_t lp_dbfiles_wal_bytes(const lp_dbfiles *f);

/* Closes the descriptors (after every SQLite connection is closed). */
void lp_dbfiles_close(lp_dbfiles *f);

#endif
