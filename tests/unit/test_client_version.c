/*
 * test_client_version.c — one version everywhere. The newest symbol-version
 * node of client/lib/libldpref.map (LDPREF_MAJOR.MINOR) is the MAJOR.MINOR
 * of ldpref_version(); the built shared library exports that node and
 * reports the same version; `ldpref --version`, `ldpref version`,
 * `ldpref-train --version`, the generated ldpref.pc and the installed
 * library's file name (make -n install) all carry the same string.
 */
#include "ldpref.h"

#include "check.h"
#include "server_proc.h"

#include <ctype.h>
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>

#define MAP_PATH "client/lib/libldpref.map"

static const char *build_dir(void)
{
    const char *b = getenv("LDPREF_BUILD");
    return b && b[0] ? b : "build";
}

/* The newest node "LDPREF_<x.y> {" of the map into node (e.g. "0.2"), and
 * the first symbol it names into sym. 0 or -1. */
static int newest_node(char *node, size_t nodelen, char *sym, size_t symlen)
{
    FILE *f = fopen(MAP_PATH, "r");
    if (f == NULL)
        return -1;
    char line[256];
    int in_node = 0, found = -1;
    while (fgets(line, sizeof line, f)) {
        char name[24];
        if (sscanf(line, "LDPREF_%23[0-9.] {", name) == 1) {
            snprintf(node, nodelen, "%s", name);
            sym[0] = '\0';
            in_node = 1;
            found = 0;
            continue;
        }
        char s[128];
        if (in_node && sym[0] == '\0' && sscanf(line, " %127[a-z_0-9];", s) == 1 &&
            strncmp(s, "ldpref_", 7) == 0)
            snprintf(sym, symlen, "%s", s);
    }
    fclose(f);
    return found;
}

/* Runs a shell command; its stdout (trailing newline removed) into out. */
static int shell(const char *cmd, char *out, size_t outlen)
{
    FILE *p = popen(cmd, "r");
    if (p == NULL)
        return -1;
    size_t n = fread(out, 1, outlen - 1, p);
    out[n] = '\0';
    while (n > 0 && (out[n - 1] == '\n' || out[n - 1] == '\r'))
        out[--n] = '\0';
    int st = pclose(p);
    return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

int main(void)
{
    char node[32] = "", sym[128] = "";
    CHECK_INT(newest_node(node, sizeof node, sym, sizeof sym), 0);
    CHECK(strchr(node, '.') != NULL); /* LDPREF_0 is the base node, never the newest */
    CHECK(sym[0] != '\0');

    /* ldpref_version() is MAJOR.MINOR.PATCH with MAJOR.MINOR = the node. */
    const char *v = ldpref_version();
    char prefix[40];
    snprintf(prefix, sizeof prefix, "%s.", node);
    check_record(strncmp(v, prefix, strlen(prefix)) == 0, __FILE__, __LINE__,
                 "ldpref_version() %s starts with %s (newest map node LDPREF_%s)", v, prefix, node);
    const char *patch = v + strlen(prefix);
    int digits = patch[0] != '\0';
    for (const char *p = patch; *p; p++)
        digits &= isdigit((unsigned char)*p) != 0;
    CHECK(digits);

    /* The shared library: exports the node, reports the same version. */
    char so[512], vnode[48];
    snprintf(so, sizeof so, "%s/libldpref.so", build_dir());
    snprintf(vnode, sizeof vnode, "LDPREF_%s", node);
    void *h = dlopen(so, RTLD_NOW | RTLD_LOCAL);
    CHECK(h != NULL);
    if (h) {
        CHECK(dlvsym(h, sym, vnode) != NULL);
        const char *(*so_version)(void) = (const char *(*)(void))dlsym(h, "ldpref_version");
        CHECK(so_version != NULL);
        if (so_version)
            CHECK_STR(so_version(), v);
        dlclose(h);
    }

    /* The CLIs. */
    char want[64], out[4096], cmd[1024];
    snprintf(want, sizeof want, "ldpref %s", v);
    const char *forms[] = {"--version", "version"};
    for (int i = 0; i < 2; i++) {
        const char *argv[] = {"ldpref", forms[i], NULL};
        char *text = NULL;
        CHECK_INT(run_tool(argv, NULL, &text), 0);
        if (text && strchr(text, '\n'))
            *strchr(text, '\n') = '\0';
        CHECK_STR(text, want);
        free(text);
    }
    const char *train[] = {"ldpref-train", "--version", NULL};
    char *text = NULL;
    CHECK_INT(run_tool(train, NULL, &text), 0);
    snprintf(want, sizeof want, "ldpref-train %s\n", v);
    CHECK_STR(text, want);
    free(text);

    /* pkg-config file and installed file name. */
    snprintf(cmd, sizeof cmd, "sed -n 's/^Version: //p' %s/ldpref.pc", build_dir());
    CHECK_INT(shell(cmd, out, sizeof out), 0);
    CHECK_STR(out, v);
    snprintf(cmd, sizeof cmd,
             "make -s -n --no-print-directory install BUILD=%s DESTDIR=/nonexistent 2>/dev/null"
             " | grep -o 'libldpref\\.so\\.[0-9][0-9.]*' | sort -u | paste -sd' '",
             build_dir());
    CHECK_INT(shell(cmd, out, sizeof out), 0);
    snprintf(want, sizeof want, "libldpref.so.0 libldpref.so.%s", v);
    CHECK_STR(out, want);
    return check_summary();
}
