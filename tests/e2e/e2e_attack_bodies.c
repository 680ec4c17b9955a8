/*
 * e2e_attack_bodies.c — request bodies cost nothing before they are
 * authenticated, are capped per route, and are budgeted across requests.
 *
 * - 32 concurrent uploads of 64 MiB to the operator-only /v1/tasks
 *   without a token: each is answered 401 unauthorized as soon as its
 *   headers arrive, and the server's VmRSS (/proc/PID/status, sampled
 *   every 10 ms while the attackers keep sending) stays within a few tens
 *   of MiB of its resting size.
 * - Anonymous bodies over the caps of the routes anyone may call
 *   (/v1/score, /v1/labels/batch, /v1/labels), declared or chunked: 413
 *   body_too_large.
 * - The body budget (a second server with --body-budget 2M): while one
 *   authenticated upload holds most of it, another is answered 503
 *   server_busy with Retry-After (declared: before its body; chunked: once
 *   its body is read), and is accepted once the first has finished.
 * Nothing is stored from any refused request.
 */
#include "check.h"
#include "http_wire.h"
#include "server_proc.h"

#include <errno.h>
#include <jansson.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#define UPLOADERS 32
#define UPLOAD_BYTES (64L << 20)
#define RSS_GROWTH_MAX_KIB (40 * 1024) /* "a few tens of MiB" */
#define ANSWER_MS_MAX 3000             /* a refusal before the body comes this fast */
#define CHUNK (64 * 1024)

static server_proc srv;

static double now_ms(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec * 1e3 + t.tv_nsec / 1e6;
}

/* VmRSS of the server in KiB, or -1. */
static long server_rss_kib(const server_proc *s)
{
    char path[64], line[256];
    snprintf(path, sizeof path, "/proc/%d/status", (int)s->pid);
    FILE *f = fopen(path, "r");
    if (f == NULL)
        return -1;
    long kib = -1;
    while (fgets(line, sizeof line, f))
        if (strncmp(line, "VmRSS:", 6) == 0)
            kib = strtol(line + 6, NULL, 10);
    fclose(f);
    return kib;
}

/* Sends head, then up to body_len bytes of body in chunks, reading the
 * answer as soon as one comes (an attacker that keeps sending until
 * stopped). *status gets the answer's status (0: none); *ms the time from
 * the first byte sent to the answer. The reply is read into *rep when not
 * NULL. */
static void send_until_answer(int fd, const char *head, long body_len, int *status, double *ms,
                              wire_reply *rep)
{
    static char chunk[CHUNK];
    memset(chunk, 'x', sizeof chunk);
    double t0 = now_ms();
    *status = 0;
    if (wire_send_str(fd, head) != 0)
        return;
    long sent = 0;
    for (;;) {
        struct pollfd p = {.fd = fd, .events = POLLIN | (sent < body_len ? POLLOUT : 0)};
        if (poll(&p, 1, 10000) <= 0)
            break;
        if (p.revents & (POLLIN | POLLHUP | POLLERR)) {
            wire_reply local = {0};
            wire_reply *r = rep ? rep : &local;
            wire_read_reply(fd, "POST", r);
            *status = r->status;
            if (rep == NULL)
                wire_reply_free(&local);
            break;
        }
        long n = body_len - sent < CHUNK ? body_len - sent : CHUNK;
        ssize_t k = send(fd, chunk, (size_t)n, MSG_NOSIGNAL | MSG_DONTWAIT);
        if (k < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR) {
            body_len = sent; /* the server stopped reading: wait for its answer */
            continue;
        }
        if (k > 0)
            sent += k;
    }
    *ms = now_ms() - t0;
}

/* ---- 32 unauthenticated 64 MiB uploads ---- */

struct uploader {
    int status;
    double ms;
};

static void *upload_unauthenticated(void *arg)
{
    struct uploader *u = arg;
    char head[256];
    snprintf(head, sizeof head,
             "POST /v1/tasks?campaign=b HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: %ld\r\n"
             "Content-Type: application/x-ndjson\r\n\r\n",
             UPLOAD_BYTES);
    int fd = wire_connect(srv.port, 15000);
    u->status = 0;
    if (fd < 0)
        return NULL;
    send_until_answer(fd, head, UPLOAD_BYTES, &u->status, &u->ms, NULL);
    close(fd);
    return NULL;
}

static volatile int sampling;
static long rss_peak;

static void *sample_rss(void *arg)
{
    (void)arg;
    while (sampling) {
        long kib = server_rss_kib(&srv);
        if (kib > rss_peak)
            rss_peak = kib;
        usleep(10 * 1000);
    }
    return NULL;
}

static void test_unauthenticated_uploads(void)
{
    long rest = server_rss_kib(&srv);
    CHECK(rest > 0);
    rss_peak = rest;
    sampling = 1;
    pthread_t sampler, t[UPLOADERS];
    struct uploader u[UPLOADERS];
    pthread_create(&sampler, NULL, sample_rss, NULL);
    for (int i = 0; i < UPLOADERS; i++)
        pthread_create(&t[i], NULL, upload_unauthenticated, &u[i]);
    int refused = 0;
    double slowest = 0;
    for (int i = 0; i < UPLOADERS; i++) {
        pthread_join(t[i], NULL);
        refused += u[i].status == 401;
        if (u[i].ms > slowest)
            slowest = u[i].ms;
    }
    usleep(100 * 1000);
    sampling = 0;
    pthread_join(sampler, NULL);
    printf("RSS at rest %ld KiB, peak %ld KiB (+%ld KiB); slowest 401 after %.0f ms\n", rest,
           rss_peak, rss_peak - rest, slowest);
    check_record(refused == UPLOADERS, __FILE__, __LINE__,
                 "%d of %d unauthenticated 64 MiB uploads answered 401", refused, UPLOADERS);
    check_record(slowest < ANSWER_MS_MAX, __FILE__, __LINE__,
                 "every 401 came within %d ms (slowest %.0f ms)", ANSWER_MS_MAX, slowest);
    check_record(rss_peak - rest <= RSS_GROWTH_MAX_KIB, __FILE__, __LINE__,
                 "server RSS grew by %ld KiB (at most %d KiB)", rss_peak - rest,
                 RSS_GROWTH_MAX_KIB);
    CHECK_INT(server_db_count(&srv, "tasks"), 0);
}

/* ---- anonymous bodies over their caps ---- */

/* POST path with a declared body of len bytes (or chunked when chunked):
 * the answer's status; the error name into err. */
static int post_oversized(const char *path, long len, int chunked, char *err, size_t errlen)
{
    char head[512];
    if (chunked)
        snprintf(head, sizeof head,
                 "POST %s HTTP/1.1\r\nHost: 127.0.0.1\r\nTransfer-Encoding: chunked\r\n"
                 "Connection: close\r\n\r\n",
                 path);
    else
        snprintf(head, sizeof head,
                 "POST %s HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: %ld\r\n"
                 "Connection: close\r\n\r\n",
                 path, len);
    int fd = wire_connect(srv.port, 15000);
    int status = 0;
    err[0] = '\0';
    if (fd < 0)
        return 0;
    if (!chunked) {
        double ms;
        wire_reply rep = {0};
        send_until_answer(fd, head, len, &status, &ms, &rep);
        if (rep.body && strstr(rep.body, "\"error\":\""))
            sscanf(strstr(rep.body, "\"error\":\"") + 9, "%63[^\"]", err);
        (void)errlen;
        wire_reply_free(&rep);
        close(fd);
        return status;
    }
    /* chunked: the size is not known until the body has come */
    wire_send_str(fd, head);
    char line[32], *block = malloc(CHUNK);
    memset(block, '{', CHUNK);
    for (long sent = 0; sent < len; sent += CHUNK) {
        snprintf(line, sizeof line, "%x\r\n", CHUNK);
        if (wire_send_str(fd, line) != 0 || wire_send(fd, block, CHUNK) != 0 ||
            wire_send_str(fd, "\r\n") != 0)
            break;
    }
    wire_send_str(fd, "0\r\n\r\n");
    free(block);
    wire_reply rep = {0};
    if (wire_read_reply(fd, "POST", &rep) == 0 || rep.status != 0) {
        status = rep.status;
        if (rep.body && strstr(rep.body, "\"error\":\""))
            sscanf(strstr(rep.body, "\"error\":\"") + 9, "%63[^\"]", err);
    }
    wire_reply_free(&rep);
    close(fd);
    return status;
}

static void test_anonymous_caps(void)
{
    static const struct {
        const char *path;
        long len;
        int status;
        const char *error;
    } cases[] = {
        /* over the 1 MiB batch and score cap; /v1/score needs a token: 401
         * from the headers (docs/trust-model.md) */
        {"/v1/score", 2L << 20, 401, "unauthorized"},
        {"/v1/labels/batch", 2L << 20, 413, "body_too_large"}, /* over the 1 MiB cap */
        {"/v1/labels", 64 * 1024, 413, "body_too_large"}, /* over the 16 KiB of a signed message */
        {"/v1/annotators", 64 * 1024, 413, "body_too_large"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
        for (int chunked = 0; chunked <= 1; chunked++) {
            char err[64];
            int status = post_oversized(cases[i].path, cases[i].len, chunked, err, sizeof err);
            check_record(status == cases[i].status && strcmp(err, cases[i].error) == 0, __FILE__,
                         __LINE__, "anonymous %ld-byte %s body to %s: %d %s (want %d %s)",
                         cases[i].len, chunked ? "chunked" : "declared", cases[i].path, status, err,
                         cases[i].status, cases[i].error);
        }
    CHECK_INT(server_db_count(&srv, "labels"), 0);
    CHECK_INT(server_db_count(&srv, "annotators"), 0);
}

/* ---- the body budget ---- */

/* "POST /v1/tasks?campaign=bud" head with the token, declared length or chunked. */
static void upload_head(char *out, size_t cap, long len, int chunked)
{
    if (chunked)
        snprintf(out, cap,
                 "POST /v1/tasks?campaign=bud HTTP/1.1\r\nHost: 127.0.0.1\r\n"
                 "Authorization: Bearer %s\r\nTransfer-Encoding: chunked\r\n\r\n",
                 srv.token);
    else
        snprintf(out, cap,
                 "POST /v1/tasks?campaign=bud HTTP/1.1\r\nHost: 127.0.0.1\r\n"
                 "Authorization: Bearer %s\r\nContent-Length: %ld\r\n\r\n",
                 srv.token, len);
}

/* n tasks of JSONL, each line padded to about line_bytes; *len its length. */
static char *tasks_jsonl(const char *prefix, int n, int line_bytes, size_t *len)
{
    char *out = malloc((size_t)n * (size_t)(line_bytes + 64));
    size_t k = 0;
    for (int i = 0; i < n; i++) {
        k += (size_t)sprintf(out + k, "{\"id\":\"%s%d\",\"prompt\":\"", prefix, i);
        memset(out + k, 'p', (size_t)line_bytes);
        k += (size_t)line_bytes;
        k += (size_t)sprintf(out + k, "\",\"responses\":[\"a\",\"b\"]}\n");
    }
    *len = k;
    return out;
}

static void test_body_budget(void)
{
    json_t *camp = json_pack("{s:s, s:f, s:f, s:b, s:f, s:f}", "name", "bud", "epsilon_min", 0.1,
                             "epsilon_max", 5.0, "allow_infinite", 0, "epsilon_budget", 1e6,
                             "epsilon_default", 1.0);
    char *text = json_dumps(camp, JSON_COMPACT);
    json_decref(camp);
    char head[1024];
    snprintf(head, sizeof head,
             "POST /v1/campaigns HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer %s\r\n"
             "Content-Length: %zu\r\n\r\n%s",
             srv.token, strlen(text), text);
    free(text);
    int fd = wire_connect(srv.port, 10000);
    wire_reply rep = {0};
    CHECK(fd >= 0 && wire_send_str(fd, head) == 0 && wire_read_reply(fd, "POST", &rep) == 0 &&
          rep.status == 201);
    wire_reply_free(&rep);
    close(fd);

    /* the holder: 1.5 MiB of tasks, all but its last byte sent */
    size_t big_len, small_len;
    char *big = tasks_jsonl("big", 48, 32 * 1024, &big_len);       /* ~1.5 MiB */
    char *small = tasks_jsonl("small", 20, 32 * 1024, &small_len); /* ~0.6 MiB */
    int holder = wire_connect(srv.port, 10000);
    upload_head(head, sizeof head, (long)big_len, 0);
    CHECK(holder >= 0 && wire_send_str(holder, head) == 0 &&
          wire_send(holder, big, big_len - 1) == 0);
    usleep(300 * 1000); /* the server has read it */

    /* declared: refused before its body, with Retry-After */
    int other = wire_connect(srv.port, 10000);
    upload_head(head, sizeof head, (long)small_len, 0);
    int status = 0;
    double ms = 0;
    memset(&rep, 0, sizeof rep);
    send_until_answer(other, head, (long)small_len, &status, &ms, &rep);
    char retry[16] = "";
    check_record(status == 503 && rep.body && strstr(rep.body, "\"server_busy\"") &&
                     wire_header(&rep, "Retry-After", retry, sizeof retry) && atoi(retry) >= 1,
                 __FILE__, __LINE__,
                 "a declared upload past the budget: %d %s, Retry-After \"%s\" (want 503 "
                 "server_busy, Retry-After >= 1)",
                 status, rep.body ? rep.body : "", retry);
    wire_reply_free(&rep);
    close(other);

    /* chunked: the budget is spent while its body grows */
    other = wire_connect(srv.port, 10000);
    upload_head(head, sizeof head, 0, 1);
    char line[32];
    snprintf(line, sizeof line, "%zx\r\n", small_len);
    CHECK(wire_send_str(other, head) == 0 && wire_send_str(other, line) == 0 &&
          wire_send(other, small, small_len) == 0 && wire_send_str(other, "\r\n0\r\n\r\n") == 0);
    memset(&rep, 0, sizeof rep);
    CHECK(wire_read_reply(other, "POST", &rep) == 0);
    retry[0] = '\0';
    check_record(rep.status == 503 && rep.body && strstr(rep.body, "\"server_busy\"") &&
                     wire_header(&rep, "Retry-After", retry, sizeof retry),
                 __FILE__, __LINE__, "a chunked upload past the budget: %d %s, Retry-After \"%s\"",
                 rep.status, rep.body ? rep.body : "", retry);
    wire_reply_free(&rep);
    close(other);
    CHECK_INT(server_db_count(&srv, "tasks"), 0);

    /* the holder finishes: stored; the budget is free again */
    memset(&rep, 0, sizeof rep);
    CHECK(wire_send(holder, big + big_len - 1, 1) == 0 &&
          wire_read_reply(holder, "POST", &rep) == 0 && rep.status == 200);
    wire_reply_free(&rep);
    close(holder);
    CHECK_INT(server_db_count(&srv, "tasks"), 48);
    other = wire_connect(srv.port, 10000);
    upload_head(head, sizeof head, (long)small_len, 0);
    memset(&rep, 0, sizeof rep);
    CHECK(wire_send_str(other, head) == 0 && wire_send(other, small, small_len) == 0 &&
          wire_read_reply(other, "POST", &rep) == 0 && rep.status == 200);
    wire_reply_free(&rep);
    close(other);
    CHECK_INT(server_db_count(&srv, "tasks"), 48 + 20);
    free(big);
    free(small);
}

int main(void)
{
    if (server_start(&srv, NULL) != 0) {
        CHECK(!"server starts");
        return check_summary();
    }
    test_unauthenticated_uploads();
    test_anonymous_caps();
    CHECK_INT(server_stop(&srv), 0);
    server_cleanup(&srv);

    const char *budget[] = {"--body-budget", "2M", NULL};
    if (server_start(&srv, budget) != 0) {
        CHECK(!"server with --body-budget 2M starts");
        return check_summary();
    }
    test_body_budget();
    CHECK_INT(server_stop(&srv), 0);
    server_cleanup(&srv);
    return check_summary();
}
