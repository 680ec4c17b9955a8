/*
 * files.h — whole-file reads for tests (data sets, corpora, fixtures).
 */
#ifndef LP_FILES_H
#define LP_FILES_H

#include <stddef.h>

/* The whole file, NUL-terminated (malloc'd; the caller frees), its size in
 * *len (may be NULL). NULL if it cannot be opened or read. */
char *file_read_all(const char *path, size_t *len);

#endif
