/*
 * ui.c — `ldpref ui`: a thin front end of ldpref_ui_start(). The page's
 * server, its access control and everything it does with answers live in
 * libldpref (client/lib/ui.c).
 */
#include "ui.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

extern char **environ;

/* Opens url with $BROWSER (its first ':'-separated entry) or xdg-open,
 * without waiting (SIGCHLD is ignored, so it is reaped by the system), with
 * the browser's output discarded, the signal mask mask and default signal
 * actions. */
static void open_browser(const char *url, const sigset_t *mask)
{
    char cmd[256] = "xdg-open";
    const char *env = getenv("BROWSER");
    if (env && env[0]) {
        size_t n = strcspn(env, ":");
        if (n < sizeof cmd)
            snprintf(cmd, sizeof cmd, "%.*s", (int)n, env);
    }
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_addopen(&fa, STDOUT_FILENO, "/dev/null", O_WRONLY, 0);
    posix_spawn_file_actions_addopen(&fa, STDERR_FILENO, "/dev/null", O_WRONLY, 0);
    posix_spawnattr_t at;
    posix_spawnattr_init(&at);
    sigset_t dfl;
    sigemptyset(&dfl);
    sigaddset(&dfl, SIGPIPE);
    sigaddset(&dfl, SIGCHLD);
    posix_spawnattr_setsigmask(&at, mask);
    posix_spawnattr_setsigdefault(&at, &dfl);
    posix_spawnattr_setflags(&at, POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF);
    signal(SIGCHLD, SIG_IGN);
    char *argv[] = {cmd, (char *)url, NULL};
    pid_t pid;
    int rc = posix_spawnp(&pid, cmd, &fa, &at, argv, environ);
    posix_spawnattr_destroy(&at);
    posix_spawn_file_actions_destroy(&fa);
    if (rc != 0)
        fprintf(stderr, "ldpref ui: cannot start %s (%s): open the address above yourself\n", cmd,
                strerror(rc));
}

int cli_ui(ldpref_client *c, const char *port, int no_browser)
{
    ldpref_ui_options o;
    ldpref_ui_options_init(&o);
    if (port) {
        char *end;
        errno = 0;
        long p = strtol(port, &end, 10);
        if (errno || end == port || *end || p < 0 || p > 65535) {
            fprintf(stderr, "ldpref: --port must be 0..65535, not %s\n", port);
            return LDPREF_EINVALID_ARGUMENT;
        }
        o.port = (int)p;
    }
    /* The stop signals are blocked before the server's thread starts (it
     * inherits the mask) and taken here with sigwait; the browser gets the
     * original mask. */
    sigset_t stop, old;
    sigemptyset(&stop);
    sigaddset(&stop, SIGINT);
    sigaddset(&stop, SIGTERM);
    sigaddset(&stop, SIGHUP);
    pthread_sigmask(SIG_BLOCK, &stop, &old);
    signal(SIGPIPE, SIG_IGN);
    ldpref_ui *ui = NULL;
    int rc = ldpref_ui_start(c, &o, &ui);
    if (rc != LDPREF_OK) {
        pthread_sigmask(SIG_SETMASK, &old, NULL);
        fprintf(stderr, "ldpref: ui: %s: %s\n", ldpref_error_name(rc), ldpref_errmsg(c));
        return rc;
    }
    printf("ldpref ui: %s\n", ldpref_ui_url(ui));
    fflush(stdout);
    fprintf(stderr, "ldpref ui: serving the labelling page on this computer only; "
                    "Ctrl-C stops it.\n");
    if (!no_browser)
        open_browser(ldpref_ui_url(ui), &old);
    int sig = 0;
    sigwait(&stop, &sig);
    ldpref_ui_stop(ui);
    fprintf(stderr, "ldpref ui: stopped\n");
    return LDPREF_OK;
}
