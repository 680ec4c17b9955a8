/*
 * tcp_proxy.c — see tcp_proxy.h. One accept thread; each connection is
 * relayed with poll() in that thread (tests use one connection at a time
 * per client, and curl reuses it).
 */
#include "tcp_proxy.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <unistd.h>

static void record(tcp_proxy *p, const char *buf, size_t n)
{
    pthread_mutex_lock(&p->lock);
    char *grown = realloc(p->captured, p->captured_len + n + 1);
    if (grown != NULL) {
        p->captured = grown;
        memcpy(p->captured + p->captured_len, buf, n);
        p->captured_len += n;
        p->captured[p->captured_len] = 0;
    }
    pthread_mutex_unlock(&p->lock);
}

static int connect_target(int port)
{
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (connect(fd, (struct sockaddr *)&a, sizeof a) != 0) {
        close(fd);
        return -1;
    }
    return fd;
}

static void relay(tcp_proxy *p, int client)
{
    int server = connect_target(p->target_port);
    if (server < 0) {
        close(client);
        return;
    }
    char buf[65536];
    struct pollfd fds[2] = {{client, POLLIN, 0}, {server, POLLIN, 0}};
    while (!p->stop) {
        if (poll(fds, 2, 100) <= 0)
            continue;
        if (fds[0].revents & (POLLIN | POLLHUP)) {
            ssize_t n = read(client, buf, sizeof buf);
            if (n <= 0)
                break;
            record(p, buf, (size_t)n);
            if (write(server, buf, (size_t)n) != n)
                break;
        }
        if (fds[1].revents & (POLLIN | POLLHUP)) {
            ssize_t n = read(server, buf, sizeof buf);
            if (n <= 0)
                break;
            if (write(client, buf, (size_t)n) != n)
                break;
        }
    }
    close(server);
    close(client);
}

static void *accept_loop(void *arg)
{
    tcp_proxy *p = arg;
    while (!p->stop) {
        struct pollfd pf = {p->listen_fd, POLLIN, 0};
        if (poll(&pf, 1, 100) <= 0)
            continue;
        int client = accept(p->listen_fd, NULL, NULL);
        if (client >= 0)
            relay(p, client);
    }
    return NULL;
}

int tcp_proxy_start(tcp_proxy *p, int target_port)
{
    memset(p, 0, sizeof *p);
    p->target_port = target_port;
    pthread_mutex_init(&p->lock, NULL);
    p->listen_fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = 0};
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t len = sizeof a;
    if (bind(p->listen_fd, (struct sockaddr *)&a, sizeof a) != 0 || listen(p->listen_fd, 16) != 0 ||
        getsockname(p->listen_fd, (struct sockaddr *)&a, &len) != 0)
        return -1;
    p->port = ntohs(a.sin_port);
    return pthread_create(&p->thread, NULL, accept_loop, p) == 0 ? 0 : -1;
}

void tcp_proxy_stop(tcp_proxy *p)
{
    p->stop = 1;
    pthread_join(p->thread, NULL);
    close(p->listen_fd);
    free(p->captured);
    p->captured = NULL;
    pthread_mutex_destroy(&p->lock);
}

json_t *tcp_proxy_bodies(tcp_proxy *p, const char *request)
{
    json_t *out = json_array();
    pthread_mutex_lock(&p->lock);
    const char *s = p->captured ? p->captured : "";
    while (out != NULL && (s = strstr(s, request)) != NULL) {
        const char *cl = strcasestr(s, "Content-Length:"), *end = strstr(s, "\r\n\r\n");
        if (cl == NULL || end == NULL)
            break;
        long len = strtol(cl + 15, NULL, 10);
        json_t *j = json_loadb(end + 4, (size_t)len, 0, NULL);
        if (j != NULL)
            json_array_append_new(out, j);
        s = end + 4 + len;
    }
    pthread_mutex_unlock(&p->lock);
    return out;
}
