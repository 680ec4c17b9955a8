/* proc_threads.c — see proc_threads.h. */
#include "proc_threads.h"

#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int proc_threads(pid_t pid, proc_thread *out, int max)
{
    char dir[64];
    snprintf(dir, sizeof dir, "/proc/%d/task", (int)pid);
    DIR *d = opendir(dir);
    if (d == NULL)
        return 0;
    int n = 0;
    struct dirent *e;
    while (n < max && (e = readdir(d)) != NULL) {
        if (e->d_name[0] == '.')
            continue;
        char path[400];
        proc_thread t = {.tid = atol(e->d_name)};
        snprintf(path, sizeof path, "%s/%s/comm", dir, e->d_name);
        FILE *f = fopen(path, "r");
        if (f == NULL)
            continue; /* the thread ended meanwhile */
        if (fgets(t.name, sizeof t.name, f) != NULL)
            t.name[strcspn(t.name, "\n")] = 0;
        fclose(f);
        snprintf(path, sizeof path, "%s/%s/schedstat", dir, e->d_name);
        if ((f = fopen(path, "r")) == NULL)
            continue;
        int ok = fscanf(f, "%lld", &t.cpu_ns) == 1;
        fclose(f);
        if (ok)
            out[n++] = t;
    }
    closedir(d);
    return n;
}

int proc_threads_named(const proc_thread *t, int n, const char *name)
{
    size_t len = strlen(name);
    int prefix = len > 0 && name[len - 1] == '*';
    int count = 0;
    for (int i = 0; i < n; i++)
        count += prefix ? strncmp(t[i].name, name, len - 1) == 0 : strcmp(t[i].name, name) == 0;
    return count;
}
