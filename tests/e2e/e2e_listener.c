/*
 * e2e_listener.c — how the real ldpref-server takes connections.
 *
 *  - A burst of keep-alive connections is spread evenly over the event
 *    loop's threads: 32 connections opened at once to a server with four
 *    event-loop threads, then requests on every connection in turn; each
 *    thread (named MHD-*) spends at least half the CPU of the busiest one
 *    (by /proc/<pid>/task/<tid>/schedstat). Left to libmicrohttpd's own
 *    accept, the thread that woke first took up to ten connections at once,
 *    and single labels, verified in the event loop, all ran on it.
 *  - The per-address connection cap still holds for accepted connections:
 *    with --connections-per-address 4, a fifth connection is closed
 *    without an answer and the four are served.
 *  - A port in use is a clear start-up error, naming the address, and
 *    leaves the server on that port untouched.
 */
#include "check.h"
#include "server_proc.h"

#include <arpa/inet.h>
#include <dirent.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#define CONNS 32
#define ROUNDS 150
#define LOOP_THREADS_MAX 64

static int connect_to(int port)
{
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    struct timeval tv = {.tv_sec = 10};
    int one = 1;
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    if (connect(fd, (struct sockaddr *)&a, sizeof a) != 0) {
        close(fd);
        return -1;
    }
    return fd;
}

/* Sends GET path on fd and reads one whole answer; returns its status (0:
 * the connection closed or timed out first). */
static int get(int fd, const char *path)
{
    char req[256], buf[8192];
    int n = snprintf(req, sizeof req, "GET %s HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n", path);
    if (send(fd, req, (size_t)n, MSG_NOSIGNAL) != n)
        return 0;
    size_t got = 0;
    for (;;) {
        ssize_t r = recv(fd, buf + got, sizeof buf - 1 - got, 0);
        if (r <= 0)
            return 0;
        got += (size_t)r;
        buf[got] = 0;
        char *end = strstr(buf, "\r\n\r\n");
        if (end == NULL)
            continue;
        const char *cl = strcasestr(buf, "content-length:");
        size_t body = cl ? strtoul(cl + 15, NULL, 10) : 0;
        if (got >= (size_t)(end + 4 - buf) + body)
            return atoi(buf + 9);
    }
}

/* CPU nanoseconds of each event-loop thread (named MHD-*) of pid, by
 * thread id; returns how many. */
static int loop_threads_cpu(pid_t pid, long tids[], long long ns[])
{
    char dir[64];
    snprintf(dir, sizeof dir, "/proc/%d/task", (int)pid);
    DIR *d = opendir(dir);
    if (d == NULL)
        return 0;
    int n = 0;
    struct dirent *e;
    while ((e = readdir(d)) != NULL && n < LOOP_THREADS_MAX) {
        if (e->d_name[0] == '.')
            continue;
        char path[400], name[32] = "";
        snprintf(path, sizeof path, "%s/%s/comm", dir, e->d_name);
        FILE *f = fopen(path, "r");
        if (f == NULL)
            continue;
        int loop = fgets(name, sizeof name, f) != NULL && strncmp(name, "MHD-", 4) == 0;
        fclose(f);
        snprintf(path, sizeof path, "%s/%s/schedstat", dir, e->d_name);
        if (!loop || (f = fopen(path, "r")) == NULL)
            continue;
        if (fscanf(f, "%lld", &ns[n]) == 1)
            tids[n++] = atol(e->d_name);
        fclose(f);
    }
    closedir(d);
    return n;
}

static void test_spread(void)
{
    server_proc s;
    const char *args[] = {"--threads", "4", NULL};
    if (server_start(&s, args) != 0) {
        CHECK(0 && "server_start");
        return;
    }
    long tids[LOOP_THREADS_MAX];
    long long before[LOOP_THREADS_MAX], after[LOOP_THREADS_MAX];
    int n = loop_threads_cpu(s.pid, tids, before);
    CHECK_INT(n, 4);
    int fds[CONNS];
    for (int i = 0; i < CONNS; i++) /* all at once, before any request */
        fds[i] = connect_to(s.port);
    int ok = 0;
    for (int r = 0; r < ROUNDS; r++)
        for (int i = 0; i < CONNS; i++)
            ok += fds[i] >= 0 && get(fds[i], "/v1/healthz") == 200;
    CHECK_INT(ok, ROUNDS * CONNS);
    long tids2[LOOP_THREADS_MAX];
    CHECK_INT(loop_threads_cpu(s.pid, tids2, after), n);
    long long least = -1, most = 0;
    for (int t = 0; t < n; t++) {
        CHECK(tids2[t] == tids[t]);
        long long used = after[t] - before[t];
        least = least < 0 || used < least ? used : least;
        most = used > most ? used : most;
    }
    check_record(most > 0 && least * 2 >= most, __FILE__, __LINE__,
                 "event-loop threads: least %lld ns, most %lld ns of CPU", least, most);
    for (int i = 0; i < CONNS; i++)
        if (fds[i] >= 0)
            close(fds[i]);
    server_cleanup(&s);
}

static void test_per_address_cap(void)
{
    server_proc s;
    const char *args[] = {"--connections-per-address", "4", NULL};
    if (server_start(&s, args) != 0) {
        CHECK(0 && "server_start");
        return;
    }
    int fds[4];
    for (int i = 0; i < 4; i++)
        fds[i] = connect_to(s.port);
    int fifth = connect_to(s.port); /* TCP accepts it; the daemon closes it */
    CHECK(fifth >= 0);
    CHECK_INT(get(fifth, "/v1/healthz"), 0);
    for (int i = 0; i < 4; i++)
        CHECK_INT(fds[i] >= 0 ? get(fds[i], "/v1/healthz") : -1, 200);
    if (fifth >= 0)
        close(fifth);
    for (int i = 0; i < 4; i++)
        if (fds[i] >= 0)
            close(fds[i]);
    /* once they are gone, a new connection is served */
    usleep(200 * 1000);
    int again = connect_to(s.port);
    CHECK_INT(again >= 0 ? get(again, "/v1/healthz") : -1, 200);
    if (again >= 0)
        close(again);
    server_cleanup(&s);
}

static void test_port_in_use(void)
{
    server_proc a, b;
    if (server_start(&a, NULL) != 0) {
        CHECK(0 && "server_start");
        return;
    }
    char port[16], want[64];
    snprintf(port, sizeof port, "%d", a.port);
    const char *args[] = {"--port", port, NULL};
    CHECK_INT(server_start(&b, args), -1);
    snprintf(want, sizeof want, "cannot listen on 127.0.0.1:%d", a.port);
    char *log = NULL;
    FILE *f = fopen(b.log, "r");
    if (f != NULL) {
        log = calloc(1, 65536);
        size_t len = fread(log, 1, 65535, f);
        log[len] = 0;
        fclose(f);
    }
    CHECK(log != NULL && strstr(log, want) != NULL && strstr(log, "in use") != NULL);
    free(log);
    server_cleanup(&b);
    /* the first server is untouched */
    int fd = connect_to(a.port);
    CHECK_INT(fd >= 0 ? get(fd, "/v1/healthz") : -1, 200);
    if (fd >= 0)
        close(fd);
    server_cleanup(&a);
}

int main(void)
{
    test_spread();
    test_per_address_cap();
    test_port_in_use();
    return check_summary();
}
