/* http_load.c — see http_load.h. */
#include "http_load.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

struct conn {
    int fd;
    size_t req;  /* index of the request in flight, or SIZE_MAX */
    size_t sent; /* bytes of it sent */
    char *buf;   /* the answer so far */
    size_t len, cap;
    size_t head;    /* length of the head with its blank line, 0 until complete */
    int status;     /* of the answer */
    int chunked;    /* body in chunks */
    size_t body;    /* Content-Length */
    size_t cursor;  /* chunked: offset of the next chunk-size line */
    double started; /* when the request's first byte went out */
};

static double now_s(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec / 1e9;
}

static int connect_to(int port)
{
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    if (fd < 0)
        return -1;
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    int one = 1;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    if (connect(fd, (struct sockaddr *)&a, sizeof a) != 0) {
        close(fd);
        return -1;
    }
    fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK);
    return fd;
}

/* Parses the head once complete: 1 parsed, 0 not yet, -1 malformed. */
static int parse_head(struct conn *c)
{
    char *end = memmem(c->buf, c->len, "\r\n\r\n", 4);
    if (end == NULL)
        return 0;
    c->head = (size_t)(end - c->buf) + 4;
    if (c->len < 12 || memcmp(c->buf, "HTTP/1.", 7) != 0)
        return -1;
    c->status = atoi(c->buf + 9);
    c->chunked = 0;
    c->body = 0;
    for (char *line = strstr(c->buf, "\r\n"); line != NULL && line + 2 < end;
         line = strstr(line + 2, "\r\n")) {
        const char *h = line + 2;
        if (strncasecmp(h, "Content-Length:", 15) == 0)
            c->body = strtoul(h + 15, NULL, 10);
        else if (strncasecmp(h, "Transfer-Encoding:", 18) == 0 && strstr(h, "chunked") != NULL &&
                 strstr(h, "chunked") < strstr(h, "\r\n"))
            c->chunked = 1;
    }
    c->cursor = c->head;
    return 1;
}

/* 1 when the answer is complete, 0 not yet, -1 malformed. */
static int answer_complete(struct conn *c)
{
    if (c->head == 0) {
        int rc = parse_head(c);
        if (rc <= 0)
            return rc;
    }
    if (!c->chunked)
        return c->len >= c->head + c->body;
    for (;;) { /* size line, data, CRLF; the last chunk has size 0 and a blank line */
        char *eol = memmem(c->buf + c->cursor, c->len - c->cursor, "\r\n", 2);
        if (eol == NULL)
            return 0;
        char *stop;
        unsigned long size = strtoul(c->buf + c->cursor, &stop, 16);
        if (stop == c->buf + c->cursor)
            return -1;
        size_t next = (size_t)(eol - c->buf) + 2 + size + 2;
        if (c->len < next)
            return 0;
        c->cursor = next;
        if (size == 0)
            return 1;
    }
}

static void reserve(struct conn *c, size_t more)
{
    if (c->len + more + 1 <= c->cap)
        return;
    size_t cap = c->cap ? c->cap : 65536;
    while (cap < c->len + more + 1)
        cap *= 2;
    char *b = realloc(c->buf, cap);
    if (b == NULL) {
        fprintf(stderr, "http_load: out of memory\n");
        exit(1);
    }
    c->buf = b;
    c->cap = cap;
}

/* Sends what the socket takes of the request in flight. 0, or -1. */
static int pump_send(struct conn *c, char *const *requests, const size_t *lens)
{
    while (c->sent < lens[c->req]) {
        ssize_t k = send(c->fd, requests[c->req] + c->sent, lens[c->req] - c->sent, MSG_NOSIGNAL);
        if (k < 0)
            return errno == EAGAIN || errno == EWOULDBLOCK ? 0 : -1;
        c->sent += (size_t)k;
    }
    return 0;
}

int http_load_run(int port, int conns, char *const *requests, const size_t *lens, size_t n,
                  http_load_result *out)
{
    memset(out, 0, sizeof *out);
    out->n = n;
    out->latency_s = calloc(n ? n : 1, sizeof *out->latency_s);
    struct conn *cs = calloc((size_t)conns, sizeof *cs);
    int ep = epoll_create1(0);
    int rc = 0, open = 0;
    for (int i = 0; i < conns; i++) {
        cs[i].fd = connect_to(port);
        cs[i].req = SIZE_MAX;
        if (cs[i].fd < 0) {
            rc = -1;
            continue;
        }
        struct epoll_event ev = {.events = EPOLLIN | EPOLLOUT | EPOLLET, .data.ptr = &cs[i]};
        epoll_ctl(ep, EPOLL_CTL_ADD, cs[i].fd, &ev);
        open++;
    }
    size_t next = 0, done = 0;
    double t0 = now_s();
    for (int i = 0; i < conns && next < n; i++)
        if (cs[i].fd >= 0) {
            cs[i].req = next++;
            cs[i].sent = 0;
            cs[i].started = now_s();
            if (pump_send(&cs[i], requests, lens) != 0)
                rc = -1;
        }
    struct epoll_event evs[64];
    while (done < n && open > 0 && rc == 0) {
        int k = epoll_wait(ep, evs, 64, 10000);
        if (k <= 0) {
            rc = -1; /* ten seconds without any answer */
            break;
        }
        for (int e = 0; e < k; e++) {
            struct conn *c = evs[e].data.ptr;
            if (c->req == SIZE_MAX)
                continue;
            if (pump_send(c, requests, lens) != 0) {
                rc = -1;
                break;
            }
            int closed = 0, complete = 0;
            for (;;) {
                reserve(c, 65536);
                ssize_t got = recv(c->fd, c->buf + c->len, c->cap - c->len - 1, 0);
                if (got == 0)
                    closed = 1;
                if (got <= 0)
                    break;
                c->len += (size_t)got;
                out->bytes_in += (size_t)got;
                complete = answer_complete(c);
                if (complete != 0)
                    break;
            }
            if (complete == 0 && closed) {
                complete = -1;
            }
            if (complete == 0)
                continue;
            out->latency_s[c->req] = now_s() - c->started;
            if (complete < 0 || c->status < 200 || c->status > 299)
                out->failures++;
            done++;
            size_t extra = complete > 0 ? c->len - (c->chunked ? c->cursor : c->head + c->body) : 0;
            if (extra > 0) /* pipelining is not used: bytes past the answer are an error */
                out->failures++;
            c->len = c->head = 0;
            c->req = SIZE_MAX;
            if (complete < 0 || closed) {
                epoll_ctl(ep, EPOLL_CTL_DEL, c->fd, NULL);
                close(c->fd);
                c->fd = -1;
                open--;
                continue;
            }
            if (next < n) {
                c->req = next++;
                c->sent = 0;
                c->started = now_s();
                if (pump_send(c, requests, lens) != 0)
                    rc = -1;
            }
        }
    }
    out->wall_s = now_s() - t0;
    out->failures += n - done;
    for (int i = 0; i < conns; i++) {
        if (cs[i].fd >= 0)
            close(cs[i].fd);
        free(cs[i].buf);
    }
    free(cs);
    close(ep);
    return rc;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

double http_load_quantile(const http_load_result *r, double p)
{
    if (r->n == 0)
        return 0.0;
    double *s = malloc(r->n * sizeof *s);
    memcpy(s, r->latency_s, r->n * sizeof *s);
    qsort(s, r->n, sizeof *s, cmp_double);
    size_t i = (size_t)(p * (double)r->n);
    double q = s[i < r->n ? i : r->n - 1];
    free(s);
    return q;
}

void http_load_result_free(http_load_result *r)
{
    free(r->latency_s);
    r->latency_s = NULL;
}

char *http_load_post(const char *path, const char *token, const char *content_type,
                     const char *body, size_t *len)
{
    size_t blen = strlen(body);
    size_t cap = blen + strlen(path) + (token ? strlen(token) : 0) + 256;
    char *r = malloc(cap);
    int n = snprintf(r, cap,
                     "POST %s HTTP/1.1\r\nHost: 127.0.0.1\r\n%s%s%sContent-Type: %s\r\n"
                     "Content-Length: %zu\r\n\r\n",
                     path, token ? "Authorization: Bearer " : "", token ? token : "",
                     token ? "\r\n" : "", content_type, blen);
    memcpy(r + n, body, blen);
    *len = (size_t)n + blen;
    return r;
}
