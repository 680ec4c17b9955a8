/* http_wire.c — HTTP/1.1 on a plain socket. See http_wire.h. */
#include "http_wire.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

int wire_connect(int port, int timeout_ms)
{
    return wire_connect_from(NULL, port, timeout_ms);
}

int wire_connect_from(const char *src, int port, int timeout_ms)
{
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    if (fd < 0)
        return -1;
    struct sockaddr_in local = {.sin_family = AF_INET};
    if (src != NULL && (inet_pton(AF_INET, src, &local.sin_addr) != 1 ||
                        bind(fd, (struct sockaddr *)&local, sizeof local) != 0)) {
        close(fd);
        return -1;
    }
    struct timeval tv = {.tv_sec = timeout_ms / 1000, .tv_usec = (timeout_ms % 1000) * 1000};
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
    struct sockaddr_in a = {.sin_family = AF_INET,
                            .sin_port = htons((uint16_t)port),
                            .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    if (connect(fd, (struct sockaddr *)&a, sizeof a) != 0) {
        close(fd);
        return -1;
    }
    return fd;
}

int wire_send(int fd, const void *data, size_t len)
{
    const char *p = data;
    while (len > 0) {
        ssize_t n = send(fd, p, len, MSG_NOSIGNAL);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            return -1;
        p += n;
        len -= (size_t)n;
    }
    return 0;
}

int wire_send_str(int fd, const char *text)
{
    return wire_send(fd, text, strlen(text));
}

/* Exactly n bytes (n > 0), or -1. */
static int read_exact(int fd, char *buf, size_t n)
{
    while (n > 0) {
        ssize_t k = recv(fd, buf, n, 0);
        if (k < 0 && errno == EINTR)
            continue;
        if (k <= 0)
            return -1;
        buf += k;
        n -= (size_t)k;
    }
    return 0;
}

/* One line ending in CRLF, without it, into buf. Returns its length or -1. */
static long read_line(int fd, char *buf, size_t cap)
{
    size_t n = 0;
    for (;;) {
        char c;
        if (read_exact(fd, &c, 1) != 0 || n + 1 >= cap)
            return -1;
        buf[n++] = c;
        if (n >= 2 && buf[n - 2] == '\r' && buf[n - 1] == '\n') {
            buf[n - 2] = 0;
            return (long)n - 2;
        }
    }
}

static int body_append(wire_reply *r, const char *data, size_t n)
{
    char *grown = realloc(r->body, r->len + n + 1);
    if (grown == NULL)
        return -1;
    r->body = grown;
    memcpy(r->body + r->len, data, n);
    r->len += n;
    r->body[r->len] = 0;
    return 0;
}

static int read_counted(int fd, wire_reply *r, size_t n)
{
    char buf[4096];
    while (n > 0) {
        size_t k = n < sizeof buf ? n : sizeof buf;
        if (read_exact(fd, buf, k) != 0 || body_append(r, buf, k) != 0)
            return -1;
        n -= k;
    }
    return 0;
}

static int read_chunked(int fd, wire_reply *r)
{
    char line[256];
    for (;;) {
        if (read_line(fd, line, sizeof line) < 0)
            return -1;
        char *end = NULL;
        unsigned long size = strtoul(line, &end, 16);
        if (end == line)
            return -1;
        if (size == 0)
            break;
        if (read_counted(fd, r, size) != 0 || read_line(fd, line, sizeof line) != 0)
            return -1;
    }
    while (read_line(fd, line, sizeof line) > 0) { /* trailers */
    }
    return 0;
}

static int read_to_close(int fd, wire_reply *r)
{
    char buf[4096];
    for (;;) {
        ssize_t k = recv(fd, buf, sizeof buf, 0);
        if (k < 0 && errno == EINTR)
            continue;
        if (k < 0)
            return -1;
        if (k == 0 || body_append(r, buf, (size_t)k) != 0)
            return k == 0 ? 0 : -1;
    }
}

int wire_read_reply(int fd, const char *method, wire_reply *out)
{
    memset(out, 0, sizeof *out);
    out->body = calloc(1, 1);
    if (out->body == NULL)
        return -1;
    size_t used = 0;
    char line[2048];
    long n;
    while ((n = read_line(fd, line, sizeof line)) > 0) {
        if (used + (size_t)n + 2 >= sizeof out->head)
            return -1;
        memcpy(out->head + used, line, (size_t)n);
        used += (size_t)n;
        out->head[used++] = '\n';
        out->head[used] = 0;
    }
    if (n < 0 || sscanf(out->head, "HTTP/1.%*d %d", &out->status) != 1)
        return -1;
    if (strcmp(method, "HEAD") == 0 || out->status == 204 || out->status == 304 ||
        out->status / 100 == 1)
        return 0;
    char value[64];
    if (wire_header(out, "Transfer-Encoding", value, sizeof value) &&
        strcasecmp(value, "chunked") == 0) {
        out->chunked = 1;
        return read_chunked(fd, out);
    }
    if (wire_header(out, "Content-Length", value, sizeof value))
        return read_counted(fd, out, strtoul(value, NULL, 10));
    return read_to_close(fd, out);
}

int wire_header(const wire_reply *r, const char *name, char *out, size_t outlen)
{
    size_t nl = strlen(name);
    const char *line = strchr(r->head, '\n'); /* after the status line */
    while (line != NULL && line[1] != 0) {
        line++;
        if (strncasecmp(line, name, nl) == 0 && line[nl] == ':') {
            const char *v = line + nl + 1;
            while (*v == ' ' || *v == '\t')
                v++;
            size_t len = strcspn(v, "\n");
            snprintf(out, outlen, "%.*s", (int)len, v);
            return 1;
        }
        line = strchr(line, '\n');
    }
    out[0] = 0;
    return 0;
}

int wire_closed(int fd, int timeout_ms)
{
    struct pollfd p = {.fd = fd, .events = POLLIN};
    if (poll(&p, 1, timeout_ms) <= 0)
        return 0;
    char c;
    ssize_t k = recv(fd, &c, 1, MSG_PEEK);
    return k == 0 || (k < 0 && errno == ECONNRESET);
}

void wire_reply_free(wire_reply *r)
{
    if (r == NULL)
        return;
    free(r->body);
    r->body = NULL;
    r->len = 0;
}
