/*
 * tmpdir.h — fresh temporary directories for tests, removed afterwards.
 */
#ifndef LP_TMPDIR_H
#define LP_TMPDIR_H

#include <stddef.h>

/* Creates "/tmp/ldpref-<tag>-XXXXXX" (mkdtemp) and writes its path into
 * out. Returns 0, or -1 (out too small, or mkdtemp failed). */
int tmpdir_create(char *out, size_t outlen, const char *tag);
/* The same under /dev/shm when it is writable (else /tmp): for tests whose
 * files are synced often (ledgers, memos). */
int tmpdir_create_shm(char *out, size_t outlen, const char *tag);

/* Removes dir and everything below it, unless LDPREF_KEEP_TMP is set.
 * Accepts NULL and "". Returns 0, or -1 if anything could not be removed. */
int tmpdir_remove(const char *dir);

#endif
