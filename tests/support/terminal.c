/* terminal.c — tmux as a real terminal for tests (terminal.h). */
#include "terminal.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define TERM_ARGS_MAX 64
#define TERM_SESSION "t"
#define TERM_POLL_MS 50
#define TERM_EXIT_MARK "[exited with status "

/* Runs `tmux -S sock args...`; its stdout into *out (malloc'd) when out is
 * non-NULL. Returns tmux's exit status, or -1. */
static int tmux_run(const term_session *t, const char *const *args, char **out)
{
    const char *argv[TERM_ARGS_MAX + 4] = {"tmux", "-u", "-S", t->sock};
    int argc = 4;
    for (int i = 0; args[i] && argc < TERM_ARGS_MAX; i++)
        argv[argc++] = args[i];
    argv[argc] = NULL;
    int fds[2];
    if (pipe(fds) != 0)
        return -1;
    pid_t pid = fork();
    if (pid < 0) {
        close(fds[0]);
        close(fds[1]);
        return -1;
    }
    if (pid == 0) {
        int null = open("/dev/null", O_RDWR);
        dup2(null, 0);
        dup2(fds[1], 1);
        dup2(null, 2);
        close(fds[0]);
        close(fds[1]);
        execvp("tmux", (char *const *)argv);
        _exit(127);
    }
    close(fds[1]);
    size_t len = 0, cap = 8192;
    char *buf = malloc(cap);
    ssize_t n;
    while (buf && (n = read(fds[0], buf + len, cap - len - 1)) > 0) {
        len += (size_t)n;
        if (cap - len < 2) {
            char *grown = realloc(buf, cap * 2);
            if (grown == NULL) {
                free(buf);
                buf = NULL;
                break;
            }
            buf = grown;
            cap *= 2;
        }
    }
    close(fds[0]);
    int status;
    while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
    }
    if (buf)
        buf[len] = '\0';
    if (out)
        *out = buf;
    else
        free(buf);
    return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

static void sleep_ms(int ms)
{
    struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
}

int term_available(void)
{
    term_session t = {.sock = "/dev/null"};
    const char *args[] = {"-V", NULL};
    return tmux_run(&t, args, NULL) == 0;
}

int term_start(term_session *t, const char *dir, int cols, int rows, const char *const *env,
               const char *const *argv)
{
    memset(t, 0, sizeof *t);
    if (snprintf(t->sock, sizeof t->sock, "%s/tmux.sock", dir) >= (int)sizeof t->sock)
        return -1;
    char w[16], h[16];
    snprintf(w, sizeof w, "%d", cols);
    snprintf(h, sizeof h, "%d", rows);
    const char *args[TERM_ARGS_MAX] = {
        "-f", "/dev/null", "new-session", "-d", "-s", TERM_SESSION,
        "-x", w,           "-y",          h,    "-e", "LANG=C.UTF-8"};
    int n = 12;
    for (int i = 0; env && env[i] && n < TERM_ARGS_MAX - 8; i++) {
        args[n++] = "-e";
        args[n++] = env[i];
    }
    /* The program's exit status is printed after it (tmux does not keep
     * every status), and the pane stays open (a dead pane's screen is not
     * kept whole) until term_stop(). */
    args[n++] = "/bin/sh";
    args[n++] = "-c";
    args[n++] = "\"$0\" \"$@\"; echo \"" TERM_EXIT_MARK "$?]\"; exec sleep 3600";
    for (int i = 0; argv[i] && n < TERM_ARGS_MAX - 1; i++)
        args[n++] = argv[i];
    args[n] = NULL;
    t->running = 1;
    return tmux_run(t, args, NULL) == 0 ? 0 : -1;
}

int term_key(term_session *t, const char *key)
{
    const char *args[] = {"send-keys", "-t", TERM_SESSION, key, NULL};
    return tmux_run(t, args, NULL) == 0 ? 0 : -1;
}

int term_resize(term_session *t, int cols, int rows)
{
    char w[16], h[16];
    snprintf(w, sizeof w, "%d", cols);
    snprintf(h, sizeof h, "%d", rows);
    const char *args[] = {"resize-window", "-t", TERM_SESSION, "-x", w, "-y", h, NULL};
    return tmux_run(t, args, NULL) == 0 ? 0 : -1;
}

char *term_screen(term_session *t)
{
    char *out = NULL;
    const char *args[] = {"capture-pane", "-p", "-t", TERM_SESSION, NULL};
    if (tmux_run(t, args, &out) != 0) {
        free(out);
        return NULL;
    }
    return out;
}

char *term_wait_for(term_session *t, const char *text, int timeout_ms, int *found)
{
    *found = 0;
    char *screen = NULL;
    for (int waited = 0;; waited += TERM_POLL_MS) {
        char *previous = screen;
        screen = term_screen(t);
        /* found, and the same as the capture before: not a half-drawn screen */
        int done = screen && strstr(screen, text) && previous && strcmp(previous, screen) == 0;
        free(previous);
        if (done) {
            *found = 1;
            return screen;
        }
        if (waited >= timeout_ms)
            return screen;
        sleep_ms(TERM_POLL_MS);
    }
}

int term_exit_status(term_session *t, int timeout_ms)
{
    int found, status = -1;
    char *screen = term_wait_for(t, TERM_EXIT_MARK, timeout_ms, &found);
    if (found)
        status = atoi(strstr(screen, TERM_EXIT_MARK) + strlen(TERM_EXIT_MARK));
    free(screen);
    return status;
}

int term_save(const char *screen, const char *path)
{
    FILE *f = fopen(path, "w");
    if (f == NULL)
        return -1;
    int ok = screen && fputs(screen, f) >= 0;
    return fclose(f) == 0 && ok ? 0 : -1;
}

void term_stop(term_session *t)
{
    if (!t->running)
        return;
    const char *args[] = {"kill-server", NULL};
    tmux_run(t, args, NULL);
    t->running = 0;
}
