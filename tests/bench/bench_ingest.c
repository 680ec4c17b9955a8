/*
 * bench_ingest.c — load generator for label ingest (make bench-ingest).
 *
 * Starts the real ldpref-server on 127.0.0.1 with a durable database, enrolls
 * annotators, loads tasks and fetches assignments, then signs every label
 * BEFORE the timed part. The timed part drives the server over many keep-
 * alive connections from one epoll loop (raw HTTP/1.1, so the generator costs
 * as little CPU as possible on the shared machine), once with single-label
 * requests and once with batches. In the same run it measures the machine's
 * raw Ed25519 verification rate on all cores before, between and after the
 * timed phases, and compares each phase with the measurements beside it.
 *
 * With --flood-clients N (make bench-flood), the single-label requests are
 * split in three: the first and last thirds are timed alone, the middle one
 * while N anonymous clients (from 127.0.0.10 onwards) post large /v1/score requests
 * (--flood-body bytes of valid JSON each) as fast as the server answers,
 * ignoring Retry-After; the server gets --public-score when it has that
 * option. With --connection-threads N (N > 0) the server runs a thread per
 * connection instead of its event loop and workers, so that both models can
 * be measured in one session, alternating. With --db postgresql the
 * database is a new one on a private PostgreSQL server started for the
 * run (tests/support/pg.h), with fsync and synchronous_commit on; with
 * --servers N, N servers share the database (SQLite: one file) and the
 * connections are spread over them round robin (the CPU and commit
 * figures are the servers' sums; the bound lines, which measure SQLite's
 * own insert cost, are printed for SQLite only). Prints "BENCH <name>
 * <value> <unit>" lines; decides nothing.
 */
#include "canon.h"
#include "clock.h"
#include "http_raw.h"
#include "listener.h"
#include "pg.h"
#include "proc_threads.h"
#include "rr.h"
#include "schema_sql.h"
#include "server_proc.h"
#include "wire.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <microhttpd.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <pthread.h>
#include <sodium.h>
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <signal.h>
#include <sys/epoll.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <sys/uio.h>
#include <sys/wait.h>
#include <stdatomic.h>
#include <unistd.h>

#define TASKS_PER_ANNOTATOR 1000
#define TASKS_PER_UPLOAD 2000
/* the size of the body the server answers a single label with (its receipt) */
#define RECEIPT_BYTES 100
#define BARE_CONNS_MAX 1024 /* the bare server's cap on open connections (its listener) */

struct request {
    char *bytes; /* full HTTP request */
    size_t len;
    int labels;
};

struct bench_cfg {
    int annotators_single, annotators_batch, batch_size, conns;
    int flood_clients;
    size_t flood_body;
};

#define MAX_SERVERS 4

/* srv is the first server (the setup requests go to it), more[] the others
 * on the same database. */
static server_proc srv, more[MAX_SERVERS - 1];
static int nservers = 1;
static int bare_port; /* > 0: drive() connects to the bare HTTP server instead */
static pg_cluster pgc;

static server_proc *server_at(int i)
{
    return i == 0 ? &srv : &more[i - 1];
}

static void stop_all(void)
{
    for (int i = nservers - 1; i >= 0; i--)
        server_cleanup(server_at(i));
    pg_cluster_stop(&pgc);
}

static void die(const char *what)
{
    fprintf(stderr, "bench_ingest: %s\n", what);
    stop_all();
    exit(1);
}

static json_t *post_json(const char *path, json_t *body, const char *bearer, long want)
{
    char url[256];
    snprintf(url, sizeof url, "%s%s", srv.url, path);
    char *text = json_dumps(body, JSON_COMPACT);
    http_reply r;
    if (http_raw("POST", url, text, strlen(text), bearer, &r) != 0 || r.status != want) {
        fprintf(stderr, "POST %s -> %ld %s\n", path, r.status, r.body);
        die("setup request failed");
    }
    free(text);
    json_t *j = json_loads(r.body, 0, NULL);
    http_reply_free(&r);
    json_decref(body);
    return j;
}

struct annotator {
    uint8_t pk[LP_KEY_BYTES], sk[LP_SECRET_BYTES];
    int64_t tasks[TASKS_PER_ANNOTATOR];
    int ntasks;
};

static void enroll(struct annotator *a, const char *token)
{
    crypto_sign_keypair(a->pk, a->sk);
    lp_enroll_msg m = {0};
    memcpy(m.key, a->pk, LP_KEY_BYTES);
    snprintf(m.token, sizeof m.token, "%s", token);
    lp_sign_enroll(&m, a->sk);
    json_decref(post_json("/v1/annotators", lp_wire_enroll_encode(&m), NULL, 201));
    lp_next_msg n = {0};
    memcpy(n.key, a->pk, LP_KEY_BYTES);
    n.count = TASKS_PER_ANNOTATOR;
    n.timestamp_ms = lp_now_ms();
    lp_sign_next(&n, a->sk);
    json_t *got = post_json("/v1/tasks/next", lp_wire_next_encode(&n), NULL, 200);
    json_t *tasks = json_object_get(got, "tasks");
    a->ntasks = (int)json_array_size(tasks);
    for (int i = 0; i < a->ntasks; i++)
        a->tasks[i] = json_integer_value(json_object_get(json_array_get(tasks, i), "task_id"));
    json_decref(got);
}

static json_t *signed_label(struct annotator *a, int i)
{
    lp_label_msg m = {0};
    memcpy(m.key, a->pk, LP_KEY_BYTES);
    m.task_id = a->tasks[i];
    lp_rr_privatize(i & 1, 1.0, &m.z);
    m.epsilon = 1.0;
    randombytes_buf(m.nonce, sizeof m.nonce);
    m.timestamp_ms = lp_now_ms();
    lp_sign_label(&m, a->sk);
    return lp_wire_label_encode(&m);
}

static struct request make_request(const char *path, json_t *body, int labels)
{
    char *text = json_dumps(body, JSON_COMPACT);
    size_t blen = strlen(text);
    struct request r;
    r.bytes = malloc(blen + 256);
    r.len = (size_t)sprintf(r.bytes,
                            "POST %s HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: "
                            "application/json\r\nContent-Length: %zu\r\n\r\n",
                            path, blen);
    memcpy(r.bytes + r.len, text, blen);
    r.len += blen;
    r.labels = labels;
    free(text);
    json_decref(body);
    return r;
}

/* Single-label requests of annotators [first, first + count), interleaved
 * so that concurrent requests come from many keys; *n gets their number. */
static struct request *sign_singles(struct annotator *ann, int first, int count, int *n)
{
    int total = 0;
    for (int a = first; a < first + count; a++)
        total += ann[a].ntasks;
    struct request *reqs = malloc(sizeof *reqs * (size_t)(total > 0 ? total : 1));
    int k = 0;
    for (int i = 0; i < TASKS_PER_ANNOTATOR; i++)
        for (int a = first; a < first + count; a++)
            if (i < ann[a].ntasks)
                reqs[k++] = make_request("/v1/labels", signed_label(&ann[a], i), 1);
    *n = k;
    return reqs;
}

/* Batches of `size` of annotators [first, first + count), each of one
 * annotator; *n gets their number. */
static struct request *sign_batches(struct annotator *ann, int first, int count, int size, int *n)
{
    struct request *reqs = malloc(sizeof *reqs * (size_t)(count * TASKS_PER_ANNOTATOR / size + 1));
    int k = 0;
    for (int a = first; a < first + count; a++)
        for (int i = 0; i + size <= ann[a].ntasks; i += size) {
            json_t *labels = json_array();
            for (int j = 0; j < size; j++)
                json_array_append_new(labels, signed_label(&ann[a], i + j));
            reqs[k++] =
                make_request("/v1/labels/batch", json_pack("{s:o}", "labels", labels), size);
        }
    *n = k;
    return reqs;
}

/* ---- timed driver: one epoll loop, one outstanding request per connection */

struct conn {
    int fd;
    struct request *req;
    size_t sent;
    char buf[1 << 16];
    size_t got;
    int64_t started;
};

/* A connection to server i % nservers. */
static int connect_server(int i)
{
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK, 0);
    int one = 1;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    struct sockaddr_in a = {
        .sin_family = AF_INET,
        .sin_port = htons((uint16_t)(bare_port > 0 ? bare_port : server_at(i % nservers)->port))};
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (connect(fd, (struct sockaddr *)&a, sizeof a) != 0 && errno != EINPROGRESS)
        die("connect");
    return fd;
}

/* Complete response in c->buf? Returns its status, 0 if incomplete. */
static int response_done(struct conn *c)
{
    c->buf[c->got < sizeof c->buf ? c->got : sizeof c->buf - 1] = 0;
    char *end = strstr(c->buf, "\r\n\r\n");
    if (end == NULL)
        return 0;
    const char *cl = strcasestr(c->buf, "content-length:");
    size_t body = cl ? strtoul(cl + 15, NULL, 10) : 0;
    if (c->got < (size_t)(end + 4 - c->buf) + body)
        return 0;
    return atoi(c->buf + 9);
}

static int cmp_i64(const void *a, const void *b)
{
    int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
    return (x > y) - (x < y);
}

struct run_result {
    double labels_per_s, p50_ms, p99_ms;
    int errors;
};

static struct run_result drive(struct request *reqs, int nreq, int nconns)
{
    int ep = epoll_create1(0);
    struct conn *conns = calloc((size_t)nconns, sizeof *conns);
    int64_t *lat = malloc(sizeof *lat * (size_t)nreq);
    int next = 0, done = 0, errors = 0, labels = 0;
    int64_t t0 = lp_mono_ns();
    for (int i = 0; i < nconns && next < nreq; i++) {
        conns[i].fd = connect_server(i);
        conns[i].req = &reqs[next++];
        conns[i].started = lp_mono_ns();
        struct epoll_event ev = {.events = EPOLLIN | EPOLLOUT, .data.ptr = &conns[i]};
        epoll_ctl(ep, EPOLL_CTL_ADD, conns[i].fd, &ev);
    }
    struct epoll_event evs[256];
    while (done < nreq) {
        int n = epoll_wait(ep, evs, 256, 10000);
        if (n <= 0)
            die("timed out waiting for the server");
        for (int i = 0; i < n; i++) {
            struct conn *c = evs[i].data.ptr;
            if ((evs[i].events & EPOLLOUT) && c->req && c->sent < c->req->len) {
                ssize_t w = write(c->fd, c->req->bytes + c->sent, c->req->len - c->sent);
                if (w > 0)
                    c->sent += (size_t)w;
                if (c->sent == c->req->len) {
                    struct epoll_event ev = {.events = EPOLLIN, .data.ptr = c};
                    epoll_ctl(ep, EPOLL_CTL_MOD, c->fd, &ev);
                }
            }
            if (evs[i].events & EPOLLIN) {
                ssize_t r = read(c->fd, c->buf + c->got, sizeof c->buf - 1 - c->got);
                if (r <= 0)
                    die("server closed a connection");
                c->got += (size_t)r;
                int status = response_done(c);
                if (status == 0)
                    continue;
                if (status != 200 && status != 201) {
                    if (errors++ < 3)
                        fprintf(stderr, "status %d: %.300s\n", status, c->buf);
                }
                lat[done++] = lp_mono_ns() - c->started;
                labels += c->req->labels;
                c->got = 0;
                c->sent = 0;
                c->req = next < nreq ? &reqs[next++] : NULL;
                if (c->req) {
                    c->started = lp_mono_ns();
                    struct epoll_event ev = {.events = EPOLLIN | EPOLLOUT, .data.ptr = c};
                    epoll_ctl(ep, EPOLL_CTL_MOD, c->fd, &ev);
                }
            }
        }
    }
    double secs = (lp_mono_ns() - t0) / 1e9;
    qsort(lat, (size_t)nreq, sizeof *lat, cmp_i64);
    struct run_result res = {labels / secs, lat[nreq / 2] / 1e6, lat[(int)(nreq * 0.99)] / 1e6,
                             errors};
    for (int i = 0; i < nconns; i++)
        if (conns[i].fd > 0)
            close(conns[i].fd);
    close(ep);
    free(conns);
    free(lat);
    return res;
}

/* ---- commit groups: jobs per group commit, from /metrics */

struct commit_stats {
    double sum, count;
};

/* Summed over the servers. */
static struct commit_stats commit_stats(void)
{
    struct commit_stats cs = {0, 0};
    for (int i = 0; i < nservers; i++) {
        char url[256];
        snprintf(url, sizeof url, "%s/metrics", server_at(i)->url);
        http_reply r;
        if (http_raw("GET", url, NULL, 0, srv.token, &r) != 0 || r.status != 200)
            die("GET /metrics failed");
        const char *p = strstr(r.body, "ldpref_commit_batch_size_sum ");
        const char *q = strstr(r.body, "ldpref_commit_batch_size_count ");
        if (p != NULL && q != NULL) {
            cs.sum += strtod(p + strlen("ldpref_commit_batch_size_sum "), NULL);
            cs.count += strtod(q + strlen("ldpref_commit_batch_size_count "), NULL);
        }
        http_reply_free(&r);
    }
    return cs;
}

/* Mean jobs per commit between two snapshots. */
static double mean_group(struct commit_stats a, struct commit_stats b)
{
    return b.count > a.count ? (b.sum - a.sum) / (b.count - a.count) : 0;
}

/* ---- CPU time: robust to other load on the machine, unlike throughput */

static double clock_ticks;

/* user+system CPU seconds of process pid (all its threads). */
static double process_cpu_s(pid_t pid)
{
    char path[64], buf[1024];
    snprintf(path, sizeof path, "/proc/%d/stat", (int)pid);
    FILE *f = fopen(path, "r");
    if (f == NULL)
        return 0;
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    buf[n] = 0;
    const char *p = strrchr(buf, ')'); /* fields after the command name */
    unsigned long long ut = 0, st = 0;
    if (p == NULL ||
        sscanf(p + 2, "%*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %llu %llu", &ut, &st) != 2)
        return 0;
    return (double)(ut + st) / clock_ticks;
}

/* The server's CPU by thread role: its writer, its workers, the HTTP
 * library's event loop (threads named MHD-*) and the rest. */
struct cpu_split {
    double writer, workers, event_loop, other;
};

static void add_threads_cpu(pid_t pid, struct cpu_split *out)
{
    proc_thread t[256];
    int n = proc_threads(pid, t, 256);
    for (int i = 0; i < n; i++) {
        double cpu = t[i].cpu_ns / 1e9;
        if (strcmp(t[i].name, "ldpref-writer") == 0)
            out->writer += cpu;
        else if (strcmp(t[i].name, "ldpref-worker") == 0)
            out->workers += cpu;
        else if (strncmp(t[i].name, "MHD-", 4) == 0)
            out->event_loop += cpu;
        else
            out->other += cpu;
    }
}

/* Of every server process. (A PostgreSQL server's own processes are not
 * counted: its CPU per label is not the ldpref server's.) */
static double server_cpu_s(void)
{
    double sum = 0;
    for (int i = 0; i < nservers; i++)
        sum += process_cpu_s(server_at(i)->pid);
    return sum;
}

static struct cpu_split server_cpu_split(void)
{
    struct cpu_split c = {0};
    for (int i = 0; i < nservers; i++)
        add_threads_cpu(server_at(i)->pid, &c);
    return c;
}

/* Prints a phase's CPU by thread role, per label, between two snapshots
 * (the threads of a role sum; a thread that ended in between is lost). */
static void print_split(const char *phase, struct cpu_split a, struct cpu_split b, int labels)
{
    printf("BENCH %s_event_loop_cpu %.1f us/label\n", phase,
           (b.event_loop - a.event_loop) * 1e6 / labels);
    printf("BENCH %s_workers_cpu %.1f us/label\n", phase, (b.workers - a.workers) * 1e6 / labels);
    printf("BENCH %s_writer_cpu %.1f us/label\n", phase, (b.writer - a.writer) * 1e6 / labels);
    printf("BENCH %s_other_threads_cpu %.1f us/label\n", phase, (b.other - a.other) * 1e6 / labels);
}

static double self_cpu_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
    return (double)ts.tv_sec + ts.tv_nsec / 1e9;
}

/* Waits (up to 10 s) until the server used under 2% of a core over 200 ms,
 * so that background work after a phase (a WAL checkpoint) does not run
 * beside a verification measurement. */
static void wait_server_idle(void)
{
    for (int i = 0; i < 50; i++) {
        double c0 = server_cpu_s();
        usleep(200000);
        if (server_cpu_s() - c0 < 0.004)
            return;
    }
}

/* ---- the bare HTTP path: libmicrohttpd alone, and the least ingest ----
 *
 * What any label request path through libmicrohttpd costs besides the
 * label's own work, measured in a child process over the same connections
 * with the same request bytes: the daemon runs with the server's threading
 * (an event loop of `threads` threads fed by the server's listener,
 * suspend/resume, the same connection memory), reads the body, suspends the connection as the
 * server does while the label waits for its commit, and a second thread — the writer's place —
 * takes every waiting connection at once and resumes it; the answer has the
 * size of the server's receipt. No verification, parsing, storage, logging
 * or JSON: the floor of the HTTP library, loopback TCP and the hand-off to
 * the thread that acknowledges durability.
 *
 * With a log file (the least ingest), the child is the least any verified,
 * durable label ingest through the library can do: the event loop also
 * decodes each body with the server's fast path and verifies every label's
 * signature, and the acknowledging thread appends the waiting labels to the
 * file with one write and one fdatasync before it resumes their
 * connections. No key lookup, stateful check, index, counter or SQL: a real
 * store does all of this and more, so its rate is a bound on the server's,
 * measured end to end (idle time and the threads' contention included). */

struct bare_conn {
    struct MHD_Connection *conn;
    struct bare_conn *next;
    int resumed, batch;
    unsigned status;
    char *body; /* least ingest: the body so far, then its decoded labels */
    size_t len, cap;
    lp_label_msg *labels;
    size_t nlabels;
};

static pthread_mutex_t bare_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t bare_cond = PTHREAD_COND_INITIALIZER;
static struct bare_conn *bare_waiting;
static char *bare_answer;
static size_t bare_answer_len;
static int bare_log = -1;        /* >= 0: the least ingest's append-only file */
static int least_single_workers; /* the least ingest verifies single labels on its workers */
static int bare_unsynced;        /* the least ingest without its fdatasync (not durable) */

/* The least ingest's durable step: the group's labels appended with one
 * write, then fdatasync. */
static void bare_append(struct bare_conn *group)
{
    struct iovec iov[64];
    int n = 0;
    for (struct bare_conn *b = group; b != NULL; b = b->next) {
        if (b->nlabels > 0)
            iov[n++] = (struct iovec){b->labels, b->nlabels * sizeof *b->labels};
        if (n == 64 || (b->next == NULL && n > 0)) {
            if (writev(bare_log, iov, n) < 0)
                _exit(1);
            n = 0;
        }
    }
    if (!bare_unsynced && fdatasync(bare_log) != 0)
        _exit(1);
}

static void *bare_acknowledger(void *arg)
{
    (void)arg;
    for (;;) {
        pthread_mutex_lock(&bare_lock);
        while (bare_waiting == NULL)
            pthread_cond_wait(&bare_cond, &bare_lock);
        struct bare_conn *group = bare_waiting;
        bare_waiting = NULL;
        pthread_mutex_unlock(&bare_lock);
        if (bare_log >= 0)
            bare_append(group);
        while (group != NULL) {
            struct bare_conn *next = group->next;
            group->resumed = 1;
            MHD_resume_connection(group->conn);
            group = next;
        }
    }
    return NULL;
}

/* The least ingest's work before the append: decode (the server's fast
 * path) and verify every label; b->status is the answer, and a refused
 * request keeps no labels. */
static void bare_verify(struct bare_conn *b)
{
    size_t cap = b->batch ? b->len / 150 + 1 : 1;
    b->status = 400;
    if ((b->labels = malloc(cap * sizeof *b->labels)) == NULL)
        return;
    b->nlabels = b->batch ? lp_wire_batch_scan(b->body, b->len, b->labels, cap)
                          : (size_t)(lp_wire_label_scan(b->body, b->len, b->labels, NULL) == 1);
    for (size_t i = 0; i < b->nlabels; i++)
        if (lp_verify_label(&b->labels[i]) != 0) {
            b->nlabels = 0;
            return;
        }
    if (b->nlabels > 0)
        b->status = 201;
}

/* Hands a suspended connection to the acknowledger. */
static void bare_wait(struct bare_conn *b)
{
    pthread_mutex_lock(&bare_lock);
    b->next = bare_waiting;
    bare_waiting = b;
    pthread_cond_signal(&bare_cond);
    pthread_mutex_unlock(&bare_lock);
}

/* The least ingest's batches are verified by a pool of threads, as the
 * server's are by its workers (a single label in the event loop, as the
 * server's, unless least_single_workers). */
static pthread_mutex_t pool_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t pool_cond = PTHREAD_COND_INITIALIZER;
static struct bare_conn *pool_head, *pool_tail;

static void *bare_worker(void *arg)
{
    (void)arg;
    for (;;) {
        pthread_mutex_lock(&pool_lock);
        while (pool_head == NULL)
            pthread_cond_wait(&pool_cond, &pool_lock);
        struct bare_conn *b = pool_head;
        if ((pool_head = b->next) == NULL)
            pool_tail = NULL;
        pthread_mutex_unlock(&pool_lock);
        bare_verify(b);
        bare_wait(b);
    }
    return NULL;
}

static void pool_submit(struct bare_conn *b)
{
    b->next = NULL;
    pthread_mutex_lock(&pool_lock);
    if (pool_tail != NULL)
        pool_tail->next = b;
    else
        pool_head = b;
    pool_tail = b;
    pthread_cond_signal(&pool_cond);
    pthread_mutex_unlock(&pool_lock);
}

static enum MHD_Result bare_request(void *cls, struct MHD_Connection *conn, const char *url,
                                    const char *method, const char *version, const char *upload,
                                    size_t *upload_size, void **req_cls)
{
    (void)cls, (void)method, (void)version;
    struct bare_conn *b = *req_cls;
    if (b == NULL) {
        *req_cls = b = calloc(1, sizeof *b);
        if (b == NULL)
            return MHD_NO;
        b->status = 201;
        b->batch = strcmp(url, "/v1/labels/batch") == 0;
        return MHD_YES;
    }
    if (*upload_size > 0) {
        if (bare_log >= 0) {
            if (b->len + *upload_size > b->cap) {
                b->cap = (b->len + *upload_size) * 2;
                if ((b->body = realloc(b->body, b->cap)) == NULL)
                    return MHD_NO;
            }
            memcpy(b->body + b->len, upload, *upload_size);
            b->len += *upload_size;
        }
        *upload_size = 0;
        return MHD_YES;
    }
    if (b->resumed) {
        struct MHD_Response *r =
            MHD_create_response_from_buffer(bare_answer_len, bare_answer, MHD_RESPMEM_PERSISTENT);
        MHD_add_response_header(r, "Content-Type", "application/json");
        enum MHD_Result ok = MHD_queue_response(conn, b->status, r);
        MHD_destroy_response(r);
        return ok;
    }
    b->conn = conn;
    if (bare_log >= 0 && (b->batch || least_single_workers)) {
        MHD_suspend_connection(conn);
        pool_submit(b);
        return MHD_YES;
    }
    if (bare_log >= 0)
        bare_verify(b);
    MHD_suspend_connection(conn);
    bare_wait(b);
    return MHD_YES;
}

static void bare_completed(void *cls, struct MHD_Connection *conn, void **req_cls,
                           enum MHD_RequestTerminationCode toe)
{
    (void)cls, (void)conn, (void)toe;
    struct bare_conn *b = *req_cls;
    if (b != NULL) {
        free(b->body);
        free(b->labels);
        free(b);
    }
    *req_cls = NULL;
}

/* Starts the bare server in a child process answering `answer_len` bytes,
 * the least ingest when log_path is set (its batches verified by `workers`
 * threads); returns its pid and sets *port. */
static pid_t bare_start(int threads, int workers, size_t answer_len, const char *log_path,
                        int *port)
{
    int fds[2];
    if (pipe(fds) != 0)
        die("pipe");
    pid_t pid = fork();
    if (pid < 0)
        die("fork");
    if (pid == 0) {
        prctl(PR_SET_PDEATHSIG, SIGKILL); /* ends with the generator, however it ends */
        close(fds[0]);
        bare_answer_len = answer_len;
        if ((bare_answer = malloc(answer_len + 1)) == NULL)
            _exit(1);
        memset(bare_answer, 'x', answer_len);
        if (log_path != NULL &&
            (bare_log = open(log_path, O_WRONLY | O_CREAT | O_TRUNC | O_APPEND, 0600)) < 0)
            _exit(1);
        pthread_t t;
        pthread_create(&t, NULL, bare_acknowledger, NULL);
        for (int i = 0; i < workers; i++)
            pthread_create(&t, NULL, bare_worker, NULL);
        /* the server's listener (server/http/listener.h) accepts */
        struct sockaddr_in loopback = {.sin_family = AF_INET};
        loopback.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
        lp_listener *l = NULL;
        char err[128];
        int p = 0;
        if (lp_listener_open((struct sockaddr *)&loopback, sizeof loopback, 1024, BARE_CONNS_MAX,
                             &l, &p, err, sizeof err) != 0)
            _exit(1);
        struct MHD_Daemon *d = MHD_start_daemon(
            MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_AUTO | MHD_ALLOW_SUSPEND_RESUME |
                MHD_USE_NO_LISTEN_SOCKET | MHD_USE_ITC,
            0, NULL, NULL, bare_request, NULL, MHD_OPTION_THREAD_POOL_SIZE, (unsigned int)threads,
            MHD_OPTION_CONNECTION_LIMIT, lp_listener_daemon_cap(l, (unsigned)threads),
            MHD_OPTION_NOTIFY_CONNECTION, lp_listener_notify, l, MHD_OPTION_CONNECTION_MEMORY_LIMIT,
            (size_t)(16 * 1024), MHD_OPTION_NOTIFY_COMPLETED, bare_completed, NULL, MHD_OPTION_END);
        if (d == NULL || lp_listener_start(l, d) != 0)
            p = 0;
        if (write(fds[1], &p, sizeof p) != (ssize_t)sizeof p)
            _exit(1);
        close(fds[1]);
        for (;;)
            pause();
    }
    close(fds[1]);
    if (read(fds[0], port, sizeof *port) != (ssize_t)sizeof *port || *port <= 0)
        die("the bare HTTP server did not start");
    close(fds[0]);
    return pid;
}

struct bare_result {
    double server_us, loadgen_us, per_s; /* CPU per request; labels per second */
    double p50_ms, p99_ms;
};

/* Drives `reqs` through the bare server (the least ingest with log_path):
 * CPU per request of the server process and of this generator. */
static struct bare_result bare_measure(struct request *reqs, int nreq, int nconns, int threads,
                                       int workers, size_t answer_len, const char *log_path)
{
    int port;
    pid_t pid = bare_start(threads, workers, answer_len, log_path, &port);
    bare_port = port;
    double s0 = process_cpu_s(pid), g0 = self_cpu_s();
    struct run_result r = drive(reqs, nreq, nconns);
    struct bare_result b = {(process_cpu_s(pid) - s0) * 1e6 / nreq,
                            (self_cpu_s() - g0) * 1e6 / nreq, r.labels_per_s, r.p50_ms, r.p99_ms};
    bare_port = 0;
    kill(pid, SIGKILL);
    waitpid(pid, NULL, 0);
    if (log_path != NULL)
        unlink(log_path);
    if (r.errors > 0)
        die("the bare HTTP server refused requests");
    return b;
}

static double thread_cpu_s(void);

/* Wall µs per append-and-fdatasync of a 4 KiB page to a new file at path
 * (500 of them); *cpu_us gets the thread's CPU µs per sync. */
static double sync_cost_us(const char *path, double *cpu_us)
{
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_APPEND, 0600);
    if (fd < 0)
        die("sync measurement file");
    char page[4096];
    memset(page, 'x', sizeof page);
    enum { N = 500 };
    double c0 = thread_cpu_s();
    int64_t t0 = lp_mono_ns();
    for (int i = 0; i < N; i++)
        if (write(fd, page, sizeof page) != (ssize_t)sizeof page || fdatasync(fd) != 0)
            die("sync measurement");
    double wall = (lp_mono_ns() - t0) / 1e3 / N;
    *cpu_us = (thread_cpu_s() - c0) * 1e6 / N;
    close(fd);
    unlink(path);
    return wall;
}

/* Measures and prints the least ingest over the single-label requests and
 * the batches, each with its phase's connections, its log beside the
 * server's database; ratios to verify_rate. */
static void least_ingest(const struct bench_cfg *cfg, struct request *single, int nsingle,
                         struct request *batch, int nbatch, int threads, int cores,
                         double verify_rate)
{
    char log_path[600];
    snprintf(log_path, sizeof log_path, "%s/least.log", srv.dir);
    int workers = 2 * cores < 4 ? 4 : 2 * cores; /* the server's default */
    struct bare_result r =
        bare_measure(single, nsingle, cfg->conns, threads, workers, RECEIPT_BYTES, log_path);
    printf("BENCH least_ingest_single %.0f labels/s\n", r.per_s);
    printf("BENCH least_ingest_single_p50 %.3f ms\n", r.p50_ms);
    printf("BENCH least_ingest_single_p99 %.3f ms\n", r.p99_ms);
    printf("BENCH least_ingest_single_vs_verify %.3f ratio\n", r.per_s / verify_rate);
    printf("BENCH least_ingest_single_server_cpu %.1f us/label\n", r.server_us);
    printf("BENCH least_ingest_single_loadgen_cpu %.1f us/label\n", r.loadgen_us);
    /* the same without the fdatasync: not durable, so no design; it shows
     * what this machine's sync costs the ratio */
    bare_unsynced = 1;
    r = bare_measure(single, nsingle, cfg->conns, threads, workers, RECEIPT_BYTES, log_path);
    bare_unsynced = 0;
    printf("BENCH least_ingest_single_unsynced %.0f labels/s\n", r.per_s);
    printf("BENCH least_ingest_single_unsynced_p99 %.3f ms\n", r.p99_ms);
    printf("BENCH least_ingest_single_unsynced_vs_verify %.3f ratio\n", r.per_s / verify_rate);
    printf("BENCH least_ingest_single_unsynced_server_cpu %.1f us/label\n", r.server_us);
    /* one fdatasync of a page appended to a file beside the database:
     * its CPU (the calling thread's, kernel included) and wall time */
    double sync_cpu, sync_wall = sync_cost_us(log_path, &sync_cpu);
    printf("BENCH fdatasync_cpu %.1f us/sync\n", sync_cpu);
    printf("BENCH fdatasync_wall %.1f us/sync\n", sync_wall);
    if (nbatch == 0)
        return;
    r = bare_measure(batch, nbatch, cfg->conns < 8 ? cfg->conns : 8, threads, workers,
                     (size_t)cfg->batch_size * (RECEIPT_BYTES + 16), log_path);
    printf("BENCH least_ingest_batch%d %.0f labels/s\n", cfg->batch_size, r.per_s);
    printf("BENCH least_ingest_batch%d_p99 %.3f ms\n", cfg->batch_size, r.p99_ms);
    printf("BENCH least_ingest_batch%d_vs_verify %.3f ratio\n", cfg->batch_size,
           r.per_s / verify_rate);
    printf("BENCH least_ingest_batch%d_server_cpu %.1f us/label\n", cfg->batch_size,
           r.server_us / cfg->batch_size);
}

/* ---- raw verification rate on all cores */

struct verify_job {
    lp_label_msg msgs[64];
    double seconds;
    long count;
    double cpu_s; /* thread CPU time spent verifying */
};

static void *verify_worker(void *arg)
{
    struct verify_job *j = arg;
    int64_t stop = lp_mono_ns() + (int64_t)(j->seconds * 1e9);
    long n = 0;
    while (lp_mono_ns() < stop)
        for (int i = 0; i < 64; i++)
            n += lp_verify_label(&j->msgs[i]) == 0;
    j->count = n;
    struct timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    j->cpu_s = (double)ts.tv_sec + ts.tv_nsec / 1e9;
    return NULL;
}

/* Verifies per second on `threads` threads; *cpu_us gets CPU µs per verify. */
static double raw_verify_rate(int threads, double seconds, double *cpu_us)
{
    struct verify_job *jobs = calloc((size_t)threads, sizeof *jobs);
    pthread_t *tids = calloc((size_t)threads, sizeof *tids);
    uint8_t pk[LP_KEY_BYTES], sk[LP_SECRET_BYTES];
    crypto_sign_keypair(pk, sk);
    for (int t = 0; t < threads; t++) {
        jobs[t].seconds = seconds;
        for (int i = 0; i < 64; i++) {
            lp_label_msg *m = &jobs[t].msgs[i];
            memcpy(m->key, pk, LP_KEY_BYTES);
            m->task_id = i + 1;
            m->epsilon = 1.0;
            randombytes_buf(m->nonce, sizeof m->nonce);
            lp_sign_label(m, sk);
        }
        pthread_create(&tids[t], NULL, verify_worker, &jobs[t]);
    }
    long total = 0;
    double cpu = 0;
    for (int t = 0; t < threads; t++) {
        pthread_join(tids[t], NULL);
        total += jobs[t].count;
        cpu += jobs[t].cpu_s;
    }
    *cpu_us = total ? cpu * 1e6 / (double)total : 0;
    free(jobs);
    free(tids);
    return total / seconds;
}

/* ---- the bound: each unavoidable part of ingest measured alone ---- */

static double thread_cpu_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return (double)ts.tv_sec + ts.tv_nsec / 1e9;
}

/* CPU µs per label to decode the bodies of reqs the way the server's fast
 * path does (lp_wire_label_scan, lp_wire_batch_scan), repeated for at
 * least 0.3 s of CPU. */
static double parse_cpu_us(const struct request *reqs, int n, int batch)
{
    lp_label_msg *out = malloc(sizeof *out * 1024);
    long labels = 0;
    double t0 = thread_cpu_s(), t;
    do {
        for (int i = 0; i < n; i++) {
            const char *body = strstr(reqs[i].bytes, "\r\n\r\n") + 4;
            size_t len = reqs[i].len - (size_t)(body - reqs[i].bytes);
            labels += batch ? (long)lp_wire_batch_scan(body, len, out, 1024)
                            : lp_wire_label_scan(body, len, out, NULL);
        }
    } while ((t = thread_cpu_s()) - t0 < 0.3 && labels > 0);
    free(out);
    return labels > 0 ? (t - t0) * 1e6 / (double)labels : 0;
}

static void sql_ok(sqlite3 *db, const char *sql)
{
    if (sqlite3_exec(db, sql, NULL, NULL, NULL) != SQLITE_OK) {
        fprintf(stderr, "%s: %s\n", sql, sqlite3_errmsg(db));
        die("bound database");
    }
}

/* CPU µs per label of storing label rows alone: the server's schema and
 * pragmas (WAL, synchronous=FULL, foreign keys) on a file beside the
 * server's, `annotators` x `tasks` rows inserted in the bench's order (task
 * i of every annotator, then task i + 1) in transactions of `group` labels
 * with the same INSERT the label writer runs. No checks, counters or HTTP:
 * what any durable store of the rows costs. With arrival_order, the labels
 * table is the same without its UNIQUE (annotator, task) index and foreign
 * keys, rows in arrival order only: the storage layout whose uniqueness
 * lookups would be answered from memory. */
static double insert_cpu_us(int annotators, int tasks, int group, int arrival_order)
{
    char path[600];
    snprintf(path, sizeof path, "%s/bound-%d-%d.db", srv.dir, group, arrival_order);
    sqlite3 *db = NULL;
    if (sqlite3_open(path, &db) != SQLITE_OK)
        die("bound database");
    sql_ok(db, "PRAGMA journal_mode=WAL; PRAGMA synchronous=FULL; PRAGMA foreign_keys=ON; "
               "PRAGMA cache_size=-65536; BEGIN");
    for (int i = 0; i < LP_MIGRATION_COUNT; i++)
        sql_ok(db, LP_MIGRATIONS[i]);
    if (arrival_order)
        sql_ok(db, "DROP TABLE labels; CREATE TABLE labels (id INTEGER PRIMARY KEY, "
                   "annotator INTEGER NOT NULL, task INTEGER NOT NULL, z INTEGER NOT NULL "
                   "CHECK (z IN (0, 1)), z_task INTEGER NOT NULL CHECK (z_task IN (0, 1)), "
                   "epsilon REAL CHECK (epsilon IS NULL OR epsilon > 0), nonce BLOB NOT NULL "
                   "CHECK (length(nonce) = 16), timestamp_ms INTEGER NOT NULL, signature BLOB "
                   "NOT NULL CHECK (length(signature) = 64), received_ms INTEGER NOT NULL)");
    char sql[256];
    for (int t = 1; t <= tasks; t++) {
        snprintf(sql, sizeof sql,
                 "INSERT INTO tasks (id, campaign, source_id, prompt, response0, response1, "
                 "created_ms) VALUES (%d, 1, 's%d', 'p', 'a', 'b', 0)",
                 t, t);
        sql_ok(db, sql);
    }
    for (int a = 1; a <= annotators; a++) {
        snprintf(sql, sizeof sql,
                 "INSERT INTO annotators (id, public_key, pseudonym, campaign, enrolled_ms) "
                 "VALUES (%d, randomblob(32), 'a%d', 1, 0)",
                 a, a);
        sql_ok(db, sql);
    }
    sql_ok(db, "COMMIT");
    sqlite3_stmt *st = NULL;
    if (sqlite3_prepare_v2(db,
                           "INSERT INTO labels (annotator, task, z, z_task, epsilon, nonce, "
                           "timestamp_ms, signature, received_ms) "
                           "VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9)",
                           -1, &st, NULL) != SQLITE_OK)
        die("bound statement");
    uint8_t nonce[16], sig[64];
    long n = 0;
    double t0 = thread_cpu_s();
    for (int t = 1; t <= tasks; t++)
        for (int a = 1; a <= annotators; a++) {
            if (n % group == 0)
                sql_ok(db, "BEGIN IMMEDIATE");
            randombytes_buf(nonce, sizeof nonce);
            randombytes_buf(sig, sizeof sig);
            sqlite3_bind_int64(st, 1, a);
            sqlite3_bind_int64(st, 2, t);
            sqlite3_bind_int(st, 3, t & 1);
            sqlite3_bind_int(st, 4, t & 1);
            sqlite3_bind_double(st, 5, 1.0);
            sqlite3_bind_blob(st, 6, nonce, sizeof nonce, SQLITE_STATIC);
            sqlite3_bind_int64(st, 7, lp_now_ms());
            sqlite3_bind_blob(st, 8, sig, sizeof sig, SQLITE_STATIC);
            sqlite3_bind_int64(st, 9, lp_now_ms());
            if (sqlite3_step(st) != SQLITE_DONE)
                die("bound insert");
            sqlite3_reset(st);
            if (++n % group == 0)
                sql_ok(db, "COMMIT");
        }
    if (n % group != 0)
        sql_ok(db, "COMMIT");
    double cpu = thread_cpu_s() - t0;
    sqlite3_finalize(st);
    sqlite3_close(db);
    return cpu * 1e6 / (double)n;
}

/* Prints the parts of one phase and the ceiling they imply on `cores`:
 * every label costs at least verify + insert + parse of server CPU and
 * loadgen of the generator's, all on the same cores. The ceiling's ratio
 * is to the verification rate of the same cores in CPU terms (cores / the
 * verify CPU), so that it does not move with other load on the machine;
 * ingest_*_server_cpu against the parts shows what else the server spends. */
static void print_bound(const char *phase, int cores, double verify_us, double insert_us,
                        double arrival_us, double parse_us, double loadgen_us, double server_us,
                        double http_us, double bare_us)
{
    double parts = verify_us + insert_us + parse_us + loadgen_us;
    printf("BENCH %s_bound_verify_cpu %.1f us/label\n", phase, verify_us);
    printf("BENCH %s_bound_insert_cpu %.1f us/label\n", phase, insert_us);
    printf("BENCH %s_bound_parse_cpu %.2f us/label\n", phase, parse_us);
    printf("BENCH %s_bound_loadgen_cpu %.1f us/label\n", phase, loadgen_us);
    printf("BENCH %s_bound_ceiling %.0f labels/s\n", phase, cores * 1e6 / parts);
    printf("BENCH %s_bound_ceiling_vs_verify %.3f ratio\n", phase, verify_us / parts);
    /* what the server spends beyond the parts: HTTP, event loop, thread
     * hand-offs, the writer's checks and counters */
    printf("BENCH %s_bound_other_server_cpu %.1f us/label\n", phase,
           server_us - verify_us - insert_us - parse_us);
    /* the ceiling once the server's HTTP floor per label (http_us: the
     * floor per request over the labels a request carries) is added to
     * the parts: no request path through this HTTP server can do better */
    double with_http = parts + http_us;
    printf("BENCH %s_bound_http_floor_cpu %.1f us/label\n", phase, http_us);
    printf("BENCH %s_bound_ceiling_with_http %.0f labels/s\n", phase, cores * 1e6 / with_http);
    printf("BENCH %s_bound_ceiling_with_http_vs_verify %.3f ratio\n", phase, verify_us / with_http);
    /* the same with the bare libmicrohttpd path (http_bare_server_cpu),
     * which any request path through the HTTP library pays */
    double with_bare = parts + bare_us;
    printf("BENCH %s_bound_http_bare_cpu %.1f us/label\n", phase, bare_us);
    printf("BENCH %s_bound_ceiling_with_bare_http %.0f labels/s\n", phase, cores * 1e6 / with_bare);
    printf("BENCH %s_bound_ceiling_with_bare_http_vs_verify %.3f ratio\n", phase,
           verify_us / with_bare);
    /* the same with rows in arrival order (insert_cpu_us) */
    double arrival = with_bare - insert_us + arrival_us;
    printf("BENCH %s_bound_insert_arrival_order_cpu %.1f us/label\n", phase, arrival_us);
    printf("BENCH %s_bound_ceiling_arrival_order_vs_verify %.3f ratio\n", phase,
           verify_us / arrival);
    /* the ratio the measured CPU allows: verify over everything spent */
    printf("BENCH %s_cpu_vs_verify %.3f ratio\n", phase, verify_us / (server_us + loadgen_us));
}

/* ---- the score flood ---- */

struct flood {
    pthread_t tid;
    int index;
    size_t body_len;
    _Atomic int *stop;
    long answered, busy, other, reconnects;
};

static char *flood_request(size_t body_len, size_t *len)
{
    /* {"prompt":"...","candidates":["...", ...]}: valid JSON the handler
     * must parse in full */
    size_t cand = 4096, n_cands = body_len / (cand + 3);
    char *body = malloc(body_len + 64), *p = body;
    p += sprintf(p, "{\"prompt\":\"flood\",\"candidates\":[");
    for (size_t i = 0; i < n_cands; i++) {
        *p++ = i ? ',' : '"';
        if (i)
            *p++ = '"';
        memset(p, 'c', cand);
        p += cand;
        *p++ = '"';
    }
    p += sprintf(p, "]}");
    size_t blen = (size_t)(p - body);
    char *req = malloc(blen + 256);
    *len = (size_t)sprintf(req,
                           "POST /v1/score HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: "
                           "application/json\r\nContent-Length: %zu\r\n\r\n",
                           blen);
    memcpy(req + *len, body, blen);
    *len += blen;
    free(body);
    return req;
}

/* A blocking connection from 127.0.0.(10 + index). */
static int flood_connect(int index)
{
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in local = {.sin_family = AF_INET};
    local.sin_addr.s_addr = htonl(INADDR_LOOPBACK + 10 + (uint32_t)index);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)srv.port)};
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    struct timeval tv = {.tv_sec = 10};
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    if (bind(fd, (struct sockaddr *)&local, sizeof local) != 0 ||
        connect(fd, (struct sockaddr *)&a, sizeof a) != 0) {
        close(fd);
        return -1;
    }
    return fd;
}

static void *flood_main(void *arg)
{
    struct flood *f = arg;
    size_t len;
    char *req = flood_request(f->body_len, &len);
    struct conn *c = calloc(1, sizeof *c);
    int fd = -1;
    while (!atomic_load(f->stop)) {
        if (fd < 0 && (fd = flood_connect(f->index)) < 0) {
            usleep(1000);
            continue;
        }
        size_t sent = 0;
        while (sent < len) {
            ssize_t w = send(fd, req + sent, len - sent, MSG_NOSIGNAL);
            if (w <= 0)
                break;
            sent += (size_t)w;
        }
        c->got = 0;
        int status = 0;
        while (status == 0) {
            ssize_t r = read(fd, c->buf + c->got, sizeof c->buf - 1 - c->got);
            if (r <= 0)
                break;
            c->got += (size_t)r;
            status = response_done(c);
        }
        if (status == 503)
            f->busy++;
        else if (status != 0)
            f->answered++;
        else
            f->other++;
        /* a refusal before the body closes the connection */
        if (status == 0 || status == 503 || strcasestr(c->buf, "connection: close")) {
            close(fd);
            fd = -1;
            f->reconnects++;
        }
    }
    if (fd >= 0)
        close(fd);
    free(c);
    free(req);
    return NULL;
}

/* Trains and activates a model on the labels so far (all privatized, so
 * --public-score serves it to anonymous callers): the flood's requests are
 * then scored in full, text featurized, not refused from their headers. */
static void train_public_model(void)
{
    json_t *run = post_json("/v1/retrain", json_pack("{s:s}", "campaign", "bench"), srv.token, 202);
    char url[256];
    snprintf(url, sizeof url, "%s/v1/retrain?run=%lld", srv.url,
             (long long)json_integer_value(json_object_get(run, "run")));
    json_decref(run);
    for (;;) {
        http_reply r;
        if (http_raw("GET", url, NULL, 0, srv.token, &r) != 0 || r.status != 200)
            die("cannot follow the retrain");
        json_t *j = json_loads(r.body, 0, NULL);
        http_reply_free(&r);
        const char *status = json_string_value(json_object_get(j, "status"));
        int ok = status != NULL && strcmp(status, "succeeded") == 0;
        int done = status == NULL || ok || strcmp(status, "failed") == 0 ||
                   strcmp(status, "cancelled") == 0;
        json_decref(j);
        if (done && !ok)
            die("the retrain before the flood failed");
        if (ok)
            return;
        usleep(20000);
    }
}

/* The flood phase between two more phases alone (see main); prints its
 * figures and adds its errors to *alone. */
static void run_flood(const struct bench_cfg *cfg, struct request *during, int n_during,
                      struct request *after, int n_after, struct run_result *alone)
{
    _Atomic int stop = 0;
    struct flood *fl = calloc((size_t)cfg->flood_clients, sizeof *fl);
    for (int i = 0; i < cfg->flood_clients; i++) {
        fl[i] = (struct flood){.index = i, .body_len = cfg->flood_body, .stop = &stop};
        pthread_create(&fl[i].tid, NULL, flood_main, &fl[i]);
    }
    usleep(500 * 1000); /* the flood is under way */
    double fs0 = server_cpu_s();
    struct run_result rf = drive(during, n_during, cfg->conns);
    double fs1 = server_cpu_s();
    atomic_store(&stop, 1);
    long answered = 0, busy = 0, other = 0, reconnects = 0;
    for (int i = 0; i < cfg->flood_clients; i++) {
        pthread_join(fl[i].tid, NULL);
        answered += fl[i].answered;
        busy += fl[i].busy;
        other += fl[i].other;
        reconnects += fl[i].reconnects;
    }
    free(fl);
    wait_server_idle();
    struct run_result ra = drive(after, n_after, cfg->conns);
    double beside = (alone->labels_per_s + ra.labels_per_s) / 2;
    printf("BENCH flood_ingest_alone_before %.0f labels/s\n", alone->labels_per_s);
    printf("BENCH flood_ingest_alone_after %.0f labels/s\n", ra.labels_per_s);
    printf("BENCH flood_ingest_alone_p99 %.3f ms\n", (alone->p99_ms + ra.p99_ms) / 2);
    printf("BENCH flood_ingest_under_flood %.0f labels/s\n", rf.labels_per_s);
    printf("BENCH flood_ingest_under_flood_p50 %.3f ms\n", rf.p50_ms);
    printf("BENCH flood_ingest_under_flood_p99 %.3f ms\n", rf.p99_ms);
    printf("BENCH flood_ingest_ratio %.3f ratio\n", rf.labels_per_s / beside);
    printf("BENCH flood_server_cpu %.1f us/label\n", (fs1 - fs0) * 1e6 / n_during);
    printf("BENCH flood_score_answered %ld requests\n", answered);
    printf("BENCH flood_score_busy %ld requests\n", busy);
    printf("BENCH flood_score_failed %ld requests\n", other);
    printf("BENCH flood_reconnects %ld connections\n", reconnects);
    alone->errors += rf.errors + ra.errors;
}

/* --least-only: the least ingest alone, without the server: each
 * annotator's labels for tasks 1..TASKS_PER_ANNOTATOR under a local key
 * (the least ingest checks signatures only), beside the verification rate
 * before and after. Quick enough to compare designs of the least ingest:
 * event-loop threads (--server-threads), connections (--conns), where
 * single labels are verified (--least-single-workers 1). */
static int least_only(const struct bench_cfg *cfg, int threads, int cores)
{
    if (server_prepare(&srv) != 0)
        die("temporary directory");
    int total = cfg->annotators_single + cfg->annotators_batch;
    struct annotator *ann = calloc((size_t)total, sizeof *ann);
    for (int a = 0; a < total; a++) {
        crypto_sign_keypair(ann[a].pk, ann[a].sk);
        ann[a].ntasks = TASKS_PER_ANNOTATOR;
        for (int i = 0; i < TASKS_PER_ANNOTATOR; i++)
            ann[a].tasks[i] = i + 1;
    }
    int nsingle, nbatch;
    struct request *single = sign_singles(ann, 0, cfg->annotators_single, &nsingle);
    struct request *batch =
        sign_batches(ann, cfg->annotators_single, cfg->annotators_batch, cfg->batch_size, &nbatch);
    double cpu_us, before = raw_verify_rate(cores, 2.0, &cpu_us);
    printf("BENCH ed25519_verify_all_cores_before %.0f verifies/s\n", before);
    least_ingest(cfg, single, nsingle, batch, nbatch, threads, cores, before);
    printf("BENCH ed25519_verify_all_cores_after %.0f verifies/s\n",
           raw_verify_rate(cores, 2.0, &cpu_us));
    for (int i = 0; i < nsingle; i++)
        free(single[i].bytes);
    for (int i = 0; i < nbatch; i++)
        free(batch[i].bytes);
    free(single);
    free(batch);
    for (int a = 0; a < total; a++)
        sodium_memzero(ann[a].sk, sizeof ann[a].sk);
    free(ann);
    stop_all();
    return 0;
}

/* 1 if the server's --help lists flag. */
static int server_has_option(const char *flag)
{
    const char *argv[] = {"ldpref-server", "--help", NULL};
    char *out = NULL;
    run_tool(argv, NULL, &out);
    int has = out != NULL && strstr(out, flag) != NULL;
    free(out);
    return has;
}

int main(int argc, char **argv)
{
    struct bench_cfg cfg = {.annotators_single = 64,
                            .annotators_batch = 96,
                            .batch_size = 100,
                            .conns = 32,
                            .flood_body = 1 << 20};
    const char *threads = "2";
    const char *connection_threads = "0"; /* > 0: a thread per connection */
    int pg = 0;                           /* --db postgresql */
    int only_least = 0;                   /* --least-only 1 */
    for (int i = 1; i + 1 < argc; i += 2) {
        if (strcmp(argv[i], "--single-annotators") == 0)
            cfg.annotators_single = atoi(argv[i + 1]);
        else if (strcmp(argv[i], "--batch-annotators") == 0)
            cfg.annotators_batch = atoi(argv[i + 1]);
        else if (strcmp(argv[i], "--batch-size") == 0)
            cfg.batch_size = atoi(argv[i + 1]);
        else if (strcmp(argv[i], "--conns") == 0)
            cfg.conns = atoi(argv[i + 1]);
        else if (strcmp(argv[i], "--server-threads") == 0)
            threads = argv[i + 1];
        else if (strcmp(argv[i], "--connection-threads") == 0)
            connection_threads = argv[i + 1];
        else if (strcmp(argv[i], "--flood-clients") == 0)
            cfg.flood_clients = atoi(argv[i + 1]);
        else if (strcmp(argv[i], "--flood-body") == 0)
            cfg.flood_body = strtoul(argv[i + 1], NULL, 10);
        else if (strcmp(argv[i], "--db") == 0)
            pg = strcmp(argv[i + 1], "postgresql") == 0;
        else if (strcmp(argv[i], "--servers") == 0)
            nservers = atoi(argv[i + 1]);
        else if (strcmp(argv[i], "--least-only") == 0)
            only_least = atoi(argv[i + 1]);
        else if (strcmp(argv[i], "--least-single-workers") == 0)
            least_single_workers = atoi(argv[i + 1]);
    }
    if (nservers < 1 || nservers > MAX_SERVERS)
        die("--servers: 1 to 4");
    if (lp_rng_init() != 0)
        die("libsodium");
    int cores = (int)sysconf(_SC_NPROCESSORS_ONLN);

    clock_ticks = (double)sysconf(_SC_CLK_TCK);
    if (only_least)
        return least_only(&cfg, atoi(threads), cores);
    /* The raw verification rate is measured before, between and after the
     * two timed phases (the server idle), and each phase is compared with
     * the mean of the two measurements beside it: on a shared machine the
     * rate drifts, and a ratio should compare like with like. */
    double verify_cpu_us[3], verify_rate[3];
    verify_rate[0] = raw_verify_rate(cores, 2.0, &verify_cpu_us[0]);

    const char *args[] = {"--sync", "full", "--threads", threads, SERVER_NO_RATE_LIMITS,
                          NULL,     NULL,   NULL,        NULL};
    size_t n_args = sizeof args / sizeof args[0] - 4; /* the first NULL */
    if (atoi(connection_threads) > 0) { /* passed only when set: older servers lack it */
        args[n_args++] = "--connection-threads";
        args[n_args++] = connection_threads;
    }
    if (cfg.flood_clients > 0 && server_has_option("--public-score"))
        args[n_args] = "--public-score";
    /* the first server creates the database, the others open it */
    nservers = nservers > 1 ? nservers : 1;
    int want = nservers;
    nservers = 0;
    for (int i = 0; i < want; i++) {
        server_proc *s = server_at(i);
        if (server_prepare(s) != 0)
            die("temporary directory");
        nservers = i + 1;
        if (i > 0)
            snprintf(s->db, sizeof s->db, "%s", srv.db);
        else if (pg) {
            if (pg_cluster_start(&pgc) != PG_STARTED ||
                pg_cluster_create_db(&pgc, "bench", s->db, sizeof s->db) != 0)
                die("could not start PostgreSQL");
        }
        if (server_restart(s, args) != 0)
            die("could not start ldpref-server");
    }
    int total_ann = cfg.annotators_single + cfg.annotators_batch;
    /* every annotator takes the first TASKS_PER_ANNOTATOR tasks: each task
     * asks for a label from each of them */
    json_decref(
        post_json("/v1/campaigns",
                  json_pack("{s:s, s:f, s:f, s:b, s:f, s:f, s:i}", "name", "bench", "epsilon_min",
                            0.01, "epsilon_max", 10.0, "allow_infinite", 0, "epsilon_budget", 1e9,
                            "epsilon_default", 1.0, "labels_per_task", total_ann),
                  srv.token, 201));
    json_t *toks =
        post_json("/v1/enrollment-tokens",
                  json_pack("{s:s, s:i}", "campaign", "bench", "count", total_ann), srv.token, 201);

    /* Tasks: enough for every annotator's share, uploaded in files of
     * TASKS_PER_UPLOAD (each file is one transaction, whose cost on
     * PostgreSQL grows faster than its size). */
    size_t ntasks = (size_t)total_ann * TASKS_PER_ANNOTATOR;
    size_t cap = TASKS_PER_UPLOAD * 80 + 64;
    char *jsonl = malloc(cap);
    char url[256];
    snprintf(url, sizeof url, "%s/v1/tasks?campaign=bench", srv.url);
    for (size_t first = 0; first < ntasks; first += TASKS_PER_UPLOAD) {
        size_t len = 0;
        for (size_t i = first; i < ntasks && i < first + TASKS_PER_UPLOAD; i++)
            len += (size_t)snprintf(
                jsonl + len, cap - len,
                "{\"id\":\"b%zu\",\"prompt\":\"p%zu\",\"responses\":[\"a%zu\",\"b%zu\"]}\n", i, i,
                i, i);
        http_reply r;
        if (http_raw("POST", url, jsonl, len, srv.token, &r) != 0 || r.status != 200) {
            fprintf(stderr, "%ld %s\n", r.status, r.body);
            die("task upload failed");
        }
        http_reply_free(&r);
    }
    free(jsonl);

    struct annotator *ann = calloc((size_t)total_ann, sizeof *ann);
    for (int a = 0; a < total_ann; a++)
        enroll(&ann[a],
               json_string_value(json_array_get(json_object_get(toks, "tokens"), (size_t)a)));
    json_decref(toks);

    /* Sign everything before the clock starts. */
    int nsingle, nbatch;
    struct request *single = sign_singles(ann, 0, cfg.annotators_single, &nsingle);
    struct request *batch =
        sign_batches(ann, cfg.annotators_single, cfg.annotators_batch, cfg.batch_size, &nbatch);

    /* With a flood: a third alone, a third under the flood, a third alone
     * again; the flood phase is compared with the mean of the two beside it. */
    int nalone = cfg.flood_clients > 0 ? nsingle / 3 : nsingle;
    struct commit_stats c0 = commit_stats();
    struct cpu_split split0 = server_cpu_split();
    double s0 = server_cpu_s(), g0 = self_cpu_s();
    struct run_result rs = drive(single, nalone, cfg.conns);
    double s1 = server_cpu_s(), g1 = self_cpu_s();
    struct cpu_split split1 = server_cpu_split();
    struct commit_stats c1 = commit_stats();
    if (cfg.flood_clients > 0) {
        train_public_model();
        run_flood(&cfg, single + nalone, nalone, single + 2 * nalone, nsingle - 2 * nalone, &rs);
    }
    wait_server_idle();
    verify_rate[1] = raw_verify_rate(cores, 2.0, &verify_cpu_us[1]);
    struct cpu_split split1v = server_cpu_split();
    double s1v = server_cpu_s(), g1v = self_cpu_s();
    struct run_result rb = {0};
    if (nbatch > 0)
        rb = drive(batch, nbatch, cfg.conns < 8 ? cfg.conns : 8);
    double s2 = server_cpu_s(), g2 = self_cpu_s();
    struct cpu_split split2 = server_cpu_split();
    struct commit_stats c2 = commit_stats();
    wait_server_idle();
    verify_rate[2] = raw_verify_rate(cores, 2.0, &verify_cpu_us[2]);
    int nbatch_labels = nbatch * cfg.batch_size;
    /* The HTTP floor: what the server and the generator spend on a request
     * that does nothing (GET /v1/healthz, no body) over the same
     * connections. A label request costs at least this besides its own
     * work, so it belongs to the bound. */
    int nfloor = nsingle;
    struct request *floor_reqs = malloc(sizeof *floor_reqs * (size_t)nfloor);
    static char floor_text[] = "GET /v1/healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n";
    for (int i = 0; i < nfloor; i++)
        floor_reqs[i] = (struct request){floor_text, sizeof floor_text - 1, 1};
    double sf0 = server_cpu_s(), gf0 = self_cpu_s();
    struct run_result rf = drive(floor_reqs, nfloor, cfg.conns);
    double http_server_us = (server_cpu_s() - sf0) * 1e6 / nfloor;
    double http_loadgen_us = (self_cpu_s() - gf0) * 1e6 / nfloor;
    free(floor_reqs);
    /* The bare HTTP path with the single-label requests' own bytes. */
    struct bare_result bare =
        bare_measure(single, nalone, cfg.conns, atoi(threads), 0, RECEIPT_BYTES, NULL);
    /* The least ingest, compared with the verification rate measured last. */
    least_ingest(&cfg, single, nalone, batch, nbatch, atoi(threads), cores, verify_rate[2]);
    /* the parts measured alone, with the server idle, in the commit groups
     * the phases had */
    double group_single = mean_group(c0, c1), group_batch = mean_group(c1, c2);
    double parse_single = parse_cpu_us(single, nsingle, 0);
    double parse_batch = nbatch > 0 ? parse_cpu_us(batch, nbatch, 1) : 0;
    int g_single = group_single >= 1 ? (int)(group_single + 0.5) : 1;
    int g_batch = group_batch >= 1 ? (int)(group_batch + 0.5) : 1;
    double insert_single[2] = {0, 0}, insert_batch[2] = {0, 0}; /* indexed, arrival order */
    for (int arrival = 0; arrival < 2 && !pg; arrival++) {
        insert_single[arrival] =
            insert_cpu_us(total_ann, TASKS_PER_ANNOTATOR / 10, g_single, arrival);
        if (nbatch > 0)
            insert_batch[arrival] =
                insert_cpu_us(total_ann, TASKS_PER_ANNOTATOR / 10, g_batch, arrival);
    }
    stop_all();

    double v_single = (verify_rate[0] + verify_rate[1]) / 2;
    double v_batch = (verify_rate[1] + verify_rate[2]) / 2;
    printf("BENCH ed25519_verify_all_cores %.0f verifies/s\n",
           (verify_rate[0] + verify_rate[1] + verify_rate[2]) / 3);
    for (int i = 0; i < 3; i++)
        printf("BENCH ed25519_verify_all_cores_%s %.0f verifies/s\n",
               i == 0   ? "before"
               : i == 1 ? "between"
                        : "after",
               verify_rate[i]);
    printf("BENCH ed25519_verify_cpu %.1f us/verify\n",
           (verify_cpu_us[0] + verify_cpu_us[1] + verify_cpu_us[2]) / 3);
    printf("BENCH http_floor_requests_per_s %.0f req/s\n", rf.labels_per_s);
    printf("BENCH http_floor_server_cpu %.1f us/request\n", http_server_us);
    printf("BENCH http_floor_loadgen_cpu %.1f us/request\n", http_loadgen_us);
    printf("BENCH http_bare_requests_per_s %.0f req/s\n", bare.per_s);
    printf("BENCH http_bare_server_cpu %.1f us/request\n", bare.server_us);
    printf("BENCH http_bare_loadgen_cpu %.1f us/request\n", bare.loadgen_us);
    printf("BENCH ingest_single %.0f labels/s\n", rs.labels_per_s);
    printf("BENCH ingest_single_p50 %.3f ms\n", rs.p50_ms);
    printf("BENCH ingest_single_p99 %.3f ms\n", rs.p99_ms);
    printf("BENCH ingest_single_vs_verify %.3f ratio\n", rs.labels_per_s / v_single);
    printf("BENCH ingest_single_server_cpu %.1f us/label\n", (s1 - s0) * 1e6 / nalone);
    printf("BENCH ingest_single_loadgen_cpu %.1f us/label\n", (g1 - g0) * 1e6 / nalone);
    printf("BENCH ingest_single_commit_group %.1f labels_per_commit\n", group_single);
    print_split("ingest_single", split0, split1, nalone);
    double verify_cpu = (verify_cpu_us[0] + verify_cpu_us[1] + verify_cpu_us[2]) / 3;
    if (!pg)
        print_bound("ingest_single", cores, verify_cpu, insert_single[0], insert_single[1],
                    parse_single, (g1 - g0) * 1e6 / nalone, (s1 - s0) * 1e6 / nalone,
                    http_server_us, bare.server_us);
    if (nbatch > 0) {
        printf("BENCH ingest_batch%d %.0f labels/s\n", cfg.batch_size, rb.labels_per_s);
        printf("BENCH ingest_batch%d_p50 %.3f ms\n", cfg.batch_size, rb.p50_ms);
        printf("BENCH ingest_batch%d_p99 %.3f ms\n", cfg.batch_size, rb.p99_ms);
        printf("BENCH ingest_batch%d_vs_verify %.3f ratio\n", cfg.batch_size,
               rb.labels_per_s / v_batch);
        printf("BENCH ingest_batch%d_server_cpu %.1f us/label\n", cfg.batch_size,
               (s2 - s1v) * 1e6 / nbatch_labels);
        printf("BENCH ingest_batch%d_loadgen_cpu %.1f us/label\n", cfg.batch_size,
               (g2 - g1v) * 1e6 / nbatch_labels);
        printf("BENCH ingest_batch%d_commit_group %.1f labels_per_commit\n", cfg.batch_size,
               group_batch);
        char phase[32];
        snprintf(phase, sizeof phase, "ingest_batch%d", cfg.batch_size);
        print_split(phase, split1v, split2, nbatch_labels);
        if (!pg)
            print_bound(phase, cores, verify_cpu, insert_batch[0], insert_batch[1], parse_batch,
                        (g2 - g1v) * 1e6 / nbatch_labels, (s2 - s1v) * 1e6 / nbatch_labels,
                        http_server_us / cfg.batch_size, bare.server_us / cfg.batch_size);
    }
    printf("BENCH ingest_errors %d requests\n", rs.errors + rb.errors + rf.errors);
    printf("BENCH ingest_servers %d servers\n", nservers);
    for (int i = 0; i < nsingle; i++)
        free(single[i].bytes);
    for (int i = 0; i < nbatch; i++)
        free(batch[i].bytes);
    free(single);
    free(batch);
    for (int a = 0; a < total_ann; a++)
        sodium_memzero(ann[a].sk, sizeof ann[a].sk);
    free(ann);
    return 0;
}
