/* files.c — whole-file reads. See files.h. */
#include "files.h"

#include <stdio.h>
#include <stdlib.h>

char *file_read_all(const char *path, size_t *len)
{
    FILE *f = fopen(path, "rb");
    if (f == NULL)
        return NULL;
    char *b = NULL;
    long n = -1;
    if (fseek(f, 0, SEEK_END) == 0 && (n = ftell(f)) >= 0 && fseek(f, 0, SEEK_SET) == 0)
        b = malloc((size_t)n + 1);
    if (b != NULL && fread(b, 1, (size_t)n, f) != (size_t)n) {
        free(b);
        b = NULL;
    }
    fclose(f);
    if (b == NULL)
        return NULL;
    b[n] = 0;
    if (len != NULL)
        *len = (size_t)n;
    return b;
}
