/*
 * replay_main.c — replays a fuzz target's corpus under the normal compiler,
 * so every input a fuzzer ever found stays a regression test. Usage:
 * replay_<target> DIR... ; prints "N passed, 0 failed" (a crash fails the run).
 */
#include "files.h"

#include <dirent.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static int replay_file(const char *path)
{
    size_t n = 0;
    char *buf = file_read_all(path, &n);
    if (buf == NULL)
        return -1;
    LLVMFuzzerTestOneInput((const uint8_t *)buf, n);
    free(buf);
    return 0;
}

int main(int argc, char **argv)
{
    int passed = 0, failed = 0;
    for (int i = 1; i < argc; i++) {
        DIR *d = opendir(argv[i]);
        if (d == NULL) {
            fprintf(stderr, "cannot open corpus %s\n", argv[i]);
            failed++;
            continue;
        }
        struct dirent *e;
        while ((e = readdir(d)) != NULL) {
            if (e->d_name[0] == '.')
                continue;
            char path[4096];
            snprintf(path, sizeof path, "%s/%s", argv[i], e->d_name);
            if (replay_file(path) == 0)
                passed++;
            else
                failed++;
        }
        closedir(d);
    }
    printf("%d passed, %d failed\n", passed, failed);
    return failed ? 1 : 0;
}
