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
#include <sys/stat.h>
#include <unistd.h>

extern char **environ;

/* The file handed to the browser instead of the address, so the token is
 * never on a command line (xdg-open's, the browser's), which other local
 * users can read in /proc: a 0600 HTML page that redirects to the address,
 * in $XDG_RUNTIME_DIR when it is usable, else in a 0700 directory of its
 * own under $TMPDIR or /tmp. Removed when `ldpref ui` stops. */
struct launch_file {
    char path[4096]; /* "" when none */
    char dir[3072];  /* the directory made for it, "" when none */
};

static int usable_dir(const char *d)
{
    return d && d[0] == '/' && strlen(d) < 3000 && access(d, W_OK | X_OK) == 0;
}

static int launch_file_write(struct launch_file *lf, const char *url)
{
    memset(lf, 0, sizeof *lf);
    const char *run = getenv("XDG_RUNTIME_DIR");
    if (usable_dir(run)) {
        snprintf(lf->path, sizeof lf->path, "%s/ldpref-ui-XXXXXX.html", run);
    } else {
        const char *tmp = getenv("TMPDIR");
        snprintf(lf->dir, sizeof lf->dir, "%s/ldpref-ui-XXXXXX", usable_dir(tmp) ? tmp : "/tmp");
        if (mkdtemp(lf->dir) == NULL) { /* mode 0700 */
            lf->dir[0] = '\0';
            return -1;
        }
        snprintf(lf->path, sizeof lf->path, "%s/open.html", lf->dir);
    }
    int fd = lf->dir[0] ? open(lf->path, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600)
                        : mkstemps(lf->path, 5);
    FILE *f = fd >= 0 && fchmod(fd, 0600) == 0 ? fdopen(fd, "w") : NULL;
    if (f == NULL && fd >= 0)
        close(fd);
    if (f) {
        fprintf(f,
                "<!doctype html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n"
                "<meta http-equiv=\"refresh\" content=\"0;url=%s\">\n"
                "<title>ldpref ui</title>\n</head>\n<body>\n"
                "<p><a href=\"%s\">Open the ldpref labelling page</a></p>\n</body>\n</html>\n",
                url, url);
        if (fclose(f) == 0)
            return 0;
    }
    if (fd >= 0)
        unlink(lf->path);
    if (lf->dir[0])
        rmdir(lf->dir);
    memset(lf, 0, sizeof *lf);
    return -1;
}

static void launch_file_remove(struct launch_file *lf)
{
    if (lf->path[0])
        unlink(lf->path);
    if (lf->dir[0])
        rmdir(lf->dir);
    memset(lf, 0, sizeof *lf);
}

/* Opens url (a file:// URL) with $BROWSER (its first ':'-separated entry) or xdg-open,
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
    struct launch_file lf;
    memset(&lf, 0, sizeof lf);
    if (!no_browser) {
        if (launch_file_write(&lf, ldpref_ui_url(ui)) == 0) {
            char file_url[4200];
            snprintf(file_url, sizeof file_url, "file://%s", lf.path);
            open_browser(file_url, &old);
        } else {
            fprintf(stderr,
                    "ldpref ui: cannot write the page that opens the browser (%s): "
                    "open the address above yourself\n",
                    strerror(errno));
        }
    }
    int sig = 0;
    sigwait(&stop, &sig);
    launch_file_remove(&lf);
    ldpref_ui_stop(ui);
    fprintf(stderr, "ldpref ui: stopped\n");
    return LDPREF_OK;
}
