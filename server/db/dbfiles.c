/* dbfiles.c — the database's files outside SQLite: the checks before
 * opening, the marker, and the link and free-space checks. See
 * internal/dbfiles.h. */
#include "dbfiles.h"

#include "error.h"
#include "log.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <time.h>
#include <unistd.h>

#define FILE_MODE 0600

/* Splits path into its folder and base name (the folder "." when none). */
static void split_path(const char *path, char *dir, size_t dirlen, const char **base)
{
    const char *slash = strrchr(path, '/');
    if (slash == NULL) {
        snprintf(dir, dirlen, ".");
        *base = path;
    } else if (slash == path) {
        snprintf(dir, dirlen, "/");
        *base = slash + 1;
    } else {
        snprintf(dir, dirlen, "%.*s", (int)(slash - path), path);
        *base = slash + 1;
    }
}

/* 1 when path names a file with content. */
static int has_content(const char *path)
{
    struct stat st;
    return stat(path, &st) == 0 && st.st_size > 0;
}

/* The marker's creation time line, or "" when it cannot be read. */
static void marker_created(const char *marker, char *out, size_t outlen)
{
    out[0] = '\0';
    FILE *m = fopen(marker, "r");
    if (m == NULL)
        return;
    char line[256];
    while (fgets(line, sizeof line, m) != NULL)
        if (strncmp(line, "created: ", 9) == 0) {
            line[strcspn(line, "\n")] = '\0';
            snprintf(out, outlen, "%s", line + 9);
            break;
        }
    fclose(m);
}

int lp_dbfiles_open(lp_dbfiles *f, const char *path, int must_exist, int use_marker, char *err,
                    size_t errlen)
{
    memset(f, 0, sizeof *f);
    f->db_fd = f->wal_fd = -1;
    const char *base;
    if (strlen(path) >= sizeof f->path) {
        snprintf(err, errlen, "the database path is too long");
        return LP_ESTORAGE;
    }
    split_path(path, f->dir, sizeof f->dir, &base);
    snprintf(f->path, sizeof f->path, "%s", path);
    snprintf(f->wal, sizeof f->wal, "%s-wal", path);
    snprintf(f->marker, sizeof f->marker, "%s/.%s.marker", f->dir, base);
    snprintf(f->train_lock, sizeof f->train_lock, "%s/.%s.train-lock", f->dir, base);

    if (!has_content(path)) {
        if (must_exist) {
            snprintf(err, errlen,
                     "the database %s does not exist (or is empty) and --db-must-exist is set",
                     path);
            return LP_ESTORAGE;
        }
        if (use_marker && access(f->marker, F_OK) == 0) {
            char created[256];
            marker_created(f->marker, created, sizeof created);
            snprintf(err, errlen,
                     "the database %s is missing, but %s says one was created there%s%s: "
                     "restore it from a backup, or delete the marker to start over with an "
                     "empty database and a new operator token",
                     path, f->marker, created[0] ? " on " : "", created);
            return LP_ESTORAGE;
        }
    }
    f->db_fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC, FILE_MODE);
    struct stat st;
    if (f->db_fd < 0 || fstat(f->db_fd, &st) != 0) {
        snprintf(err, errlen, "cannot open %s: %s", path, strerror(errno));
        lp_dbfiles_close(f);
        return LP_ESTORAGE;
    }
    f->db_dev = st.st_dev;
    f->db_ino = st.st_ino;
    return LP_OK;
}

/* Writes the marker (new file, mode 0600, synced with its folder). */
static void write_marker(const lp_dbfiles *f)
{
    int fd = open(f->marker, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, FILE_MODE);
    if (fd < 0) {
        if (errno != EEXIST)
            lp_log(LP_LOG_WARN, "storage_warning", LP_LOG_STR("message", "cannot write the marker"),
                   LP_LOG_STR("marker", f->marker), LP_LOG_STR("error", strerror(errno)));
        return;
    }
    char when[32];
    time_t now = time(NULL);
    struct tm tm;
    strftime(when, sizeof when, "%Y-%m-%dT%H:%M:%SZ", gmtime_r(&now, &tm));
    char text[LP_DBFILES_PATH_MAX + 512];
    int n = snprintf(text, sizeof text,
                     "ldpref database marker\n"
                     "database: %s\n"
                     "created: %s\n"
                     "\n"
                     "While this file exists, ldpref-server refuses to start when the database\n"
                     "above is missing, instead of creating an empty one with a new operator\n"
                     "token. Restore the database from a backup, or delete this file to start\n"
                     "over on purpose.\n",
                     f->path, when);
    int ok = n > 0 && (size_t)n < sizeof text && write(fd, text, (size_t)n) == n && fsync(fd) == 0;
    close(fd);
    int dfd = open(f->dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (dfd >= 0) {
        fsync(dfd);
        close(dfd);
    }
    if (!ok)
        lp_log(LP_LOG_WARN, "storage_warning", LP_LOG_STR("message", "cannot write the marker"),
               LP_LOG_STR("marker", f->marker));
}

void lp_dbfiles_opened(lp_dbfiles *f, int use_marker)
{
    struct stat st;
    f->wal_fd = open(f->wal, O_RDONLY | O_CLOEXEC);
    if (f->wal_fd >= 0 && fstat(f->wal_fd, &st) == 0) {
        f->wal_dev = st.st_dev;
        f->wal_ino = st.st_ino;
    } else if (f->wal_fd >= 0) {
        close(f->wal_fd);
        f->wal_fd = -1;
    }
    if (fstat(f->db_fd, &st) == 0 && (st.st_mode & 077) != 0)
        lp_log(LP_LOG_WARN, "storage_warning",
               LP_LOG_STR("message", "the database file can be read by other users than its "
                                     "owner; chmod 600 it and its -wal and -shm files"),
               LP_LOG_STR("db", f->path));
    if (use_marker)
        write_marker(f);
}

/* 1 when path leads to (dev, ino) and, with full, fd still has a link. */
static int same_file(const char *path, int fd, dev_t dev, ino_t ino, int full)
{
    struct stat st;
    if (stat(path, &st) != 0 || st.st_dev != dev || st.st_ino != ino)
        return 0;
    return !full || (fstat(fd, &st) == 0 && st.st_nlink > 0);
}

int lp_dbfiles_linked(const lp_dbfiles *f, int full)
{
    if (f->db_fd >= 0 && !same_file(f->path, f->db_fd, f->db_dev, f->db_ino, full))
        return 0;
    if (f->wal_fd >= 0 && !same_file(f->wal, f->wal_fd, f->wal_dev, f->wal_ino, full))
        return 0;
    return 1;
}

int64_t lp_dbfiles_free_bytes(const lp_dbfiles *f)
{
    struct statvfs sv;
    if (f->db_fd < 0 || fstatvfs(f->db_fd, &sv) != 0)
        return -1;
    return (int64_t)sv.f_bavail * (int64_t)sv.f_frsize;
}

int64_t lp_dbfiles_wal_bytes(const lp_dbfiles *f)
{
    struct stat st;
    if (f->wal_fd < 0 || fstat(f->wal_fd, &st) != 0)
        return -1;
    return (int64_t)st.st_size;
}

void lp_dbfiles_close(lp_dbfiles *f)
{
    if (f->db_fd >= 0)
        close(f->db_fd);
    if (f->wal_fd >= 0)
        close(f->wal_fd);
    f->db_fd = f->wal_fd = -1;
}
