/* tmpdir.c — temporary directories. See tmpdir.h. */
#include "tmpdir.h"

#include <ftw.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

static int create_in(const char *base, char *out, size_t outlen, const char *tag)
{
    int n = snprintf(out, outlen, "%s/ldpref-%s-XXXXXX", base, tag);
    if (n < 0 || (size_t)n >= outlen)
        return -1;
    return mkdtemp(out) != NULL ? 0 : -1;
}

int tmpdir_create(char *out, size_t outlen, const char *tag)
{
    return create_in("/tmp", out, outlen, tag);
}

int tmpdir_create_shm(char *out, size_t outlen, const char *tag)
{
    return create_in(access("/dev/shm", W_OK) == 0 ? "/dev/shm" : "/tmp", out, outlen, tag);
}

static int remove_entry(const char *path, const struct stat *sb, int type, struct FTW *ftw)
{
    (void)sb;
    (void)type;
    (void)ftw;
    return remove(path);
}

int tmpdir_remove(const char *dir)
{
    if (dir == NULL || dir[0] == 0 || getenv("LDPREF_KEEP_TMP") != NULL)
        return 0;
    if (nftw(dir, remove_entry, 16, FTW_DEPTH | FTW_PHYS) != 0) {
        fprintf(stderr, "could not remove %s\n", dir);
        return -1;
    }
    return 0;
}
