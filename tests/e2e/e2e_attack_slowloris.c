/*
 * e2e_attack_slowloris.c — slow and idle connections cannot shut out a
 * legitimate client.
 *
 * The real server runs with its default connection settings. A legitimate
 * annotator on 127.0.0.1 (the real client library's wire protocol over
 * libcurl: enroll, fetch tasks, submit labels) is timed once on a quiet
 * server (the baseline), then again while 1,000 idle connections and 300
 * connections trickling a request one byte every 10 s are held open from
 * 127.0.0.2 onwards (32 per address, under the per-address cap). Every
 * legitimate request must succeed with a median latency close to the
 * baseline's, and the attack's connections must still be open when it is
 * measured (the server served the client beside them, not after dropping
 * them). The per-address cap is checked at its default: that many
 * connections from one address are held, one more is closed at once, and
 * once one of them goes another is let in.
 */
#include "check.h"
#include "http_wire.h"
#include "raw_annotator.h"
#include "server_proc.h"

#include <jansson.h>
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

#define IDLE 1000
#define TRICKLE 300
#define PER_ADDRESS 32     /* attack connections per source address */
#define TRICKLE_EVERY_S 10 /* one byte per connection this often */
#define PER_ADDRESS_CAP 64 /* the server's default --connections-per-address */
#define ROUND_LABELS 20    /* labels per legitimate round */
#define TASKS (4 * ROUND_LABELS)
#define SLOWDOWN_MAX 3.0       /* median latency under attack vs baseline, at most */
#define SLOWDOWN_SLACK_MS 20.0 /* plus this much (scheduling noise on a shared machine) */

static server_proc srv;

static double now_ms(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec * 1e3 + t.tv_nsec / 1e6;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* ---- the legitimate client ---- */

static char enroll_tokens[2][256];

/* Enrollment tokens and tasks for two rounds (baseline and under attack). */
static void setup_campaign(void)
{
    http_reply r;
    json_t *camp =
        json_pack("{s:s, s:f, s:f, s:b, s:f, s:f}", "name", "sl", "epsilon_min", 0.1, "epsilon_max",
                  5.0, "allow_infinite", 0, "epsilon_budget", 1e6, "epsilon_default", 1.0);
    CHECK_INT(raw_post_json(srv.url, "/v1/campaigns", camp, srv.token, &r), 201);
    json_decref(camp);
    http_reply_free(&r);
    char jsonl[TASKS * 80];
    size_t len = 0;
    for (int i = 0; i < TASKS; i++)
        len += (size_t)snprintf(jsonl + len, sizeof jsonl - len,
                                "{\"id\":\"t%d\",\"prompt\":\"p%d\",\"responses\":[\"a\",\"b\"]}\n",
                                i, i);
    char url[128];
    snprintf(url, sizeof url, "%s/v1/tasks?campaign=sl", srv.url);
    CHECK(http_raw("POST", url, jsonl, len, srv.token, &r) == 0 && r.status == 200);
    http_reply_free(&r);
    json_t *req = json_pack("{s:s, s:i}", "campaign", "sl", "count", 2);
    CHECK_INT(raw_post_json(srv.url, "/v1/enrollment-tokens", req, srv.token, &r), 201);
    json_decref(req);
    json_t *got = json_loads(r.body ? r.body : "", 0, NULL);
    json_t *toks = json_object_get(got, "tokens");
    for (size_t i = 0; i < 2; i++) {
        const char *t = json_string_value(json_array_get(toks, i));
        snprintf(enroll_tokens[i], sizeof enroll_tokens[i], "%s", t ? t : "");
    }
    json_decref(got);
    http_reply_free(&r);
}

struct round {
    double lat[ROUND_LABELS + 2]; /* enroll, next, each label */
    int n, ok;
    double median_ms, max_ms;
};

/* One annotator's session: enroll, fetch tasks, label ROUND_LABELS of them;
 * each request timed. */
static void legit_round(const char *token, struct round *out)
{
    memset(out, 0, sizeof *out);
    raw_annotator a;
    double t0 = now_ms();
    long st = raw_enroll(&a, srv.url, token);
    out->lat[out->n++] = now_ms() - t0;
    out->ok += st == 201;
    json_t *tasks = NULL;
    t0 = now_ms();
    st = raw_next(&a, ROUND_LABELS, &tasks);
    out->lat[out->n++] = now_ms() - t0;
    out->ok += st == 200;
    for (size_t i = 0; i < json_array_size(tasks) && i < ROUND_LABELS; i++) {
        int64_t task = json_integer_value(json_object_get(json_array_get(tasks, i), "task_id"));
        lp_label_msg m = raw_label(&a, task, (int)(i & 1), 1.0);
        http_reply r;
        t0 = now_ms();
        st = raw_post_label(srv.url, &m, &r);
        out->lat[out->n++] = now_ms() - t0;
        out->ok += st == 201;
        http_reply_free(&r);
    }
    json_decref(tasks);
    double sorted[ROUND_LABELS + 2];
    memcpy(sorted, out->lat, sizeof(double) * (size_t)out->n);
    qsort(sorted, (size_t)out->n, sizeof *sorted, cmp_double);
    out->median_ms = out->n ? sorted[out->n / 2] : 0;
    out->max_ms = out->n ? sorted[out->n - 1] : 0;
}

/* ---- the attack ---- */

static int attack_fd[IDLE + TRICKLE];
static int n_attack;

/* 127.0.0.(2 + i / PER_ADDRESS) */
static void attack_address(int i, char *out, size_t outlen)
{
    snprintf(out, outlen, "127.0.0.%d", 2 + i / PER_ADDRESS);
}

static void open_attack(void)
{
    static const char first = 'P'; /* a trickled request: "POST /v1/labels ..." */
    for (int i = 0; i < IDLE + TRICKLE; i++) {
        char src[32];
        attack_address(i, src, sizeof src);
        int fd = wire_connect_from(src, srv.port, 2000);
        if (fd < 0)
            continue;
        if (i >= IDLE)
            wire_send(fd, &first, 1);
        attack_fd[n_attack++] = fd;
    }
}

static const char TRICKLED[] = "POST /v1/labels HTTP/1.1\r\nHost: 127.0.0.1\r\n";

/* One more byte of the request on every trickling connection. */
static void trickle(int step)
{
    char c = TRICKLED[1 + step % (int)(sizeof TRICKLED - 2)];
    for (int i = IDLE; i < n_attack; i++)
        wire_send(attack_fd[i], &c, 1);
}

/* Attack connections the server has not closed. */
static int attack_open(void)
{
    int open = 0;
    for (int i = 0; i < n_attack; i++)
        open += !wire_closed(attack_fd[i], 0);
    return open;
}

static void close_attack(void)
{
    for (int i = 0; i < n_attack; i++)
        close(attack_fd[i]);
    n_attack = 0;
}

static void check_round(const char *when, const struct round *r, const struct round *base)
{
    check_record(r->ok == r->n && r->n == ROUND_LABELS + 2, __FILE__, __LINE__,
                 "%s: %d of %d legitimate requests succeeded (want %d)", when, r->ok, r->n,
                 ROUND_LABELS + 2);
    double bound = SLOWDOWN_MAX * base->median_ms + SLOWDOWN_SLACK_MS;
    check_record(r->median_ms <= bound, __FILE__, __LINE__,
                 "%s: median latency %.2f ms (baseline %.2f ms, bound %.2f ms; max %.1f ms)", when,
                 r->median_ms, base->median_ms, bound, r->max_ms);
}

static void test_slow_and_idle_connections(void)
{
    struct round base, under, later;
    legit_round(enroll_tokens[0], &base);
    check_record(base.ok == ROUND_LABELS + 2, __FILE__, __LINE__,
                 "baseline: %d of %d requests succeeded", base.ok, ROUND_LABELS + 2);
    printf("baseline: median %.2f ms, max %.2f ms\n", base.median_ms, base.max_ms);

    open_attack();
    check_record(n_attack == IDLE + TRICKLE, __FILE__, __LINE__, "%d attack connections opened",
                 n_attack);
    usleep(500 * 1000); /* the server has accepted them */
    legit_round(enroll_tokens[1], &under);
    int open_now = attack_open();
    printf("under attack: median %.2f ms, max %.2f ms; %d attack connections open\n",
           under.median_ms, under.max_ms, open_now);
    check_round("under 1000 idle + 300 trickling connections", &under, &base);
    check_record(open_now == n_attack, __FILE__, __LINE__,
                 "the attack's %d connections are still open while the client is served (%d)",
                 n_attack, open_now);

    /* A trickle step later: the trickling connections sent more, the idle
     * ones nothing; the client is still served (a fresh session needs a
     * fresh token: its labels go to tasks the first sessions left). */
    sleep(TRICKLE_EVERY_S);
    trickle(0);
    raw_annotator again;
    json_t *tasks = NULL;
    double t0 = now_ms();
    long st = raw_enroll(&again, srv.url, enroll_tokens[1]); /* used: 409, answered quickly */
    double enroll_ms = now_ms() - t0;
    check_record(st != 0 && enroll_ms < 1000, __FILE__, __LINE__,
                 "after a trickle step: an enrollment is answered (%ld) in %.1f ms", st, enroll_ms);
    memset(&later, 0, sizeof later);
    t0 = now_ms();
    st = raw_next(&again, 1, &tasks);
    later.lat[0] = now_ms() - t0;
    check_record(st != 0 && later.lat[0] < 1000, __FILE__, __LINE__,
                 "after a trickle step: tasks/next is answered (%ld) in %.1f ms", st, later.lat[0]);
    json_decref(tasks);
    http_reply r;
    t0 = now_ms();
    CHECK_INT(raw_get(srv.url, "/v1/healthz", NULL, &r), 200);
    http_reply_free(&r);
    check_record(now_ms() - t0 < 1000, __FILE__, __LINE__, "healthz in %.1f ms", now_ms() - t0);
    close_attack();
}

static void test_per_address_cap(void)
{
    const char *src = "127.0.0.250";
    int fds[PER_ADDRESS_CAP];
    int held = 0;
    for (int i = 0; i < PER_ADDRESS_CAP; i++) {
        fds[i] = wire_connect_from(src, srv.port, 2000);
        if (fds[i] >= 0 && wire_send_str(fds[i], "GET /v1/healthz HTTP/1.1\r\n") == 0)
            held++;
    }
    CHECK_INT(held, PER_ADDRESS_CAP);
    usleep(300 * 1000);
    int open = 0;
    for (int i = 0; i < PER_ADDRESS_CAP; i++)
        open += fds[i] >= 0 && !wire_closed(fds[i], 0);
    check_record(open == PER_ADDRESS_CAP, __FILE__, __LINE__,
                 "%d connections from one address are all held (%d open)", PER_ADDRESS_CAP, open);
    int extra = wire_connect_from(src, srv.port, 2000);
    check_record(extra >= 0 && wire_closed(extra, 2000), __FILE__, __LINE__,
                 "connection %d from the same address is closed by the server",
                 PER_ADDRESS_CAP + 1);
    if (extra >= 0)
        close(extra);
    /* another address is not affected */
    int other = wire_connect_from("127.0.0.251", srv.port, 5000);
    wire_reply rep = {0};
    CHECK(other >= 0 && wire_send_str(other, "GET /v1/healthz HTTP/1.1\r\nHost: x\r\n\r\n") == 0 &&
          wire_read_reply(other, "GET", &rep) == 0 && rep.status == 200);
    wire_reply_free(&rep);
    if (other >= 0)
        close(other);
    /* one of the held connections goes: a new one from that address is served */
    close(fds[0]);
    fds[0] = -1;
    usleep(300 * 1000);
    int again = wire_connect_from(src, srv.port, 5000);
    memset(&rep, 0, sizeof rep);
    CHECK(again >= 0 && wire_send_str(again, "GET /v1/healthz HTTP/1.1\r\nHost: x\r\n\r\n") == 0 &&
          wire_read_reply(again, "GET", &rep) == 0 && rep.status == 200);
    wire_reply_free(&rep);
    if (again >= 0)
        close(again);
    for (int i = 0; i < PER_ADDRESS_CAP; i++)
        if (fds[i] >= 0)
            close(fds[i]);
}

int main(void)
{
    struct rlimit rl; /* this process holds 1,300+ sockets */
    if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < rl.rlim_max) {
        rl.rlim_cur = rl.rlim_max;
        setrlimit(RLIMIT_NOFILE, &rl);
    }
    if (server_start(&srv, NULL) != 0) {
        CHECK(!"server starts");
        return check_summary();
    }
    setup_campaign();
    test_slow_and_idle_connections();
    test_per_address_cap();
    CHECK_INT(server_stop(&srv), 0);
    server_cleanup(&srv);
    return check_summary();
}
