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
 *  - The cap on open connections (--connections-max, or --connection-threads
 *    in the thread-per-connection model) holds: past it a connection is
 *    closed at once, the connections held are still served by every
 *    event-loop thread, refusals by the per-address cap do not count
 *    against the cap, and a connection that closes frees its place.
 *    (libmicrohttpd 0.9.75 blocks an event-loop thread for good when it
 *    refuses a handed-over connection at its own limit: listener.h.)
 *  - A port in use is a clear start-up error, naming the address, and
 *    leaves the server on that port untouched.
 */
#include "check.h"
#include "files.h"
#include "http_wire.h"
#include "proc_threads.h"
#include "server_proc.h"

#include <arpa/inet.h>
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
#define THREADS_MAX 256

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

static void test_spread(void)
{
    server_proc s;
    const char *args[] = {"--threads", "4", NULL};
    if (server_start(&s, args) != 0) {
        CHECK(0 && "server_start");
        return;
    }
    proc_thread before[THREADS_MAX], after[THREADS_MAX];
    int n = proc_threads(s.pid, before, THREADS_MAX);
    CHECK_INT(proc_threads_named(before, n, "MHD-*"), 4);
    int fds[CONNS];
    for (int i = 0; i < CONNS; i++) /* all at once, before any request */
        fds[i] = connect_to(s.port);
    int ok = 0;
    for (int r = 0; r < ROUNDS; r++)
        for (int i = 0; i < CONNS; i++)
            ok += fds[i] >= 0 && get(fds[i], "/v1/healthz") == 200;
    CHECK_INT(ok, ROUNDS * CONNS);
    int n2 = proc_threads(s.pid, after, THREADS_MAX);
    /* each event-loop thread's CPU over the requests */
    long long least = -1, most = 0;
    for (int i = 0; i < n; i++) {
        if (strncmp(before[i].name, "MHD-", 4) != 0)
            continue;
        long long used = -1;
        for (int j = 0; j < n2; j++)
            if (after[j].tid == before[i].tid)
                used = after[j].cpu_ns - before[i].cpu_ns;
        CHECK(used >= 0); /* the thread is still there */
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

/* A connection from 127.0.0.<host>, with a short receive timeout: a
 * blocked event-loop thread shows as a timeout, not a hang. */
static int connect_from(int host, int port)
{
    char src[32];
    snprintf(src, sizeof src, "127.0.0.%d", host);
    return wire_connect_from(src, port, 3000);
}

/* How many of the n connections answer GET /v1/healthz with 200. */
static int served(const int *fds, int n)
{
    int ok = 0;
    for (int i = 0; i < n; i++)
        ok += fds[i] >= 0 && get(fds[i], "/v1/healthz") == 200;
    return ok;
}

/* How many of n new connections from host are closed without an answer
 * (TCP accepts them; the server closes them). */
static int refused(int host, int port, int n)
{
    int closed = 0;
    for (int i = 0; i < n; i++) {
        int fd = connect_from(host, port);
        closed += fd >= 0 && get(fd, "/v1/healthz") == 0;
        if (fd >= 0)
            close(fd);
    }
    return closed;
}

static void close_all(int *fds, int n)
{
    for (int i = 0; i < n; i++)
        if (fds[i] >= 0)
            close(fds[i]);
}

/* The server started with args holds at most cap connections, at most
 * per_address from one address (cap a multiple of it, at most 64). */
static void check_connection_cap(const char **args, int cap, int per_address)
{
    server_proc s;
    if (server_start(&s, args) != 0) {
        CHECK(0 && "server_start");
        return;
    }
    int fds[2 * 64], got[2 * 64];
    /* the per-address cap's refusals take no place under the cap */
    for (int i = 0; i < per_address; i++)
        fds[i] = connect_from(2, s.port);
    CHECK_INT(served(fds, per_address), per_address);
    CHECK_INT(refused(2, s.port, 3 * per_address), 3 * per_address);
    close_all(fds, per_address);
    usleep(300 * 1000);
    for (int round = 0; round < 3; round++) {
        /* twice the cap at once, before any request, from addresses under
         * their own cap: the event loop meets the cap in a burst */
        int n = 2 * cap;
        for (int i = 0; i < n; i++)
            fds[i] = connect_from(10 + round * 40 + i / per_address, s.port);
        int held = 0;
        for (int i = 0; i < n; i++) {
            got[i] = fds[i] >= 0 ? get(fds[i], "/v1/healthz") : -1;
            held += got[i] == 200;
        }
        int closed = 0;
        for (int i = 0; i < n; i++)
            closed += got[i] == 0;
        check_record(held == cap && closed == n - cap, __FILE__, __LINE__,
                     "round %d: %d connections at once under a cap of %d: %d served, %d closed",
                     round, n, cap, held, closed);
        /* every held connection, on every event-loop thread, still served */
        for (int i = 0; i < n; i++)
            if (got[i] != 200 && fds[i] >= 0) {
                close(fds[i]);
                fds[i] = -1;
            }
        CHECK_INT(served(fds, n), held);
        /* past the cap, one at a time: closed */
        CHECK_INT(refused(9, s.port, per_address), per_address);
        /* a connection that closes frees its place */
        for (int i = 0; i < n; i++)
            if (fds[i] >= 0) {
                close(fds[i]);
                usleep(300 * 1000);
                fds[i] = connect_from(9, s.port);
                break;
            }
        CHECK_INT(served(fds, n), held);
        close_all(fds, n);
        usleep(300 * 1000);
    }
    char *log = file_read_all(s.log, NULL);
    CHECK(log != NULL && strstr(log, "connections_max_reached") != NULL);
    free(log);
    /* no event-loop thread is left blocked: the server stops */
    CHECK_INT(server_stop(&s), 0);
    server_cleanup(&s);
}

static void test_connection_cap(void)
{
    const char *loop[] = {"--threads", "2", "--connections-max", "16", "--connections-per-address",
                          "4",         NULL};
    check_connection_cap(loop, 16, 4);
    const char *per_connection[] = {"--connection-threads", "8", "--connections-per-address", "4",
                                    NULL};
    check_connection_cap(per_connection, 8, 4);
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
    char *log = file_read_all(b.log, NULL);
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
    test_connection_cap();
    test_port_in_use();
    return check_summary();
}
