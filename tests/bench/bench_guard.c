/*
 * bench_guard.c — what the rate limits and TLS cost (make bench-guard).
 *
 *   - lp_ratelimit_take in-process: one hot key, and a flood of distinct
 *     keys through the fixed table (ns per call, one thread and two);
 *   - against the real server, one keep-alive connection sending the same
 *     signed enrollment with an unknown token: the server's CPU time per
 *     request (from /proc/PID/stat) when every guess is looked up (limits
 *     off: parse, signature, hash, lookup, 403) beside when every guess is
 *     refused by its address's bucket (429);
 *   - HTTPS against plain HTTP on the same server build: GET /v1/healthz
 *     over a new connection per request (TCP and, for HTTPS, a TLS
 *     handshake with an RSA-2048 or an ECDSA P-256 certificate) and over one keep-alive
 *     connection, requests per second and the server's CPU per request.
 *
 * The certificate is made with openssl in a temporary directory. Prints
 * "BENCH <name> <value> <unit>" lines; decides nothing.
 */
#include "canon.h"
#include "clock.h"
#include "http_raw.h"
#include "ratelimit.h"
#include "rr.h"
#include "server_proc.h"
#include "tmpdir.h"
#include "wire.h"

#include <curl/curl.h>
#include <jansson.h>
#include <pthread.h>
#include <sodium.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#define TAKES 2000000
#define GUESSES 4000
#define FRESH 400 /* requests on new connections */
#define KEPT 4000 /* requests on one connection */

static double now_s(void)
{
    return (double)lp_mono_ns() / 1e9;
}

/* ---- in-process ---- */

struct taker {
    lp_ratelimit *rl;
    int distinct; /* a new key per call */
    int seed;
};

static void *take_many(void *arg)
{
    struct taker *t = arg;
    char key[32];
    int64_t now = lp_mono_ns();
    size_t len = (size_t)snprintf(key, sizeof key, "hot-%d", t->seed);
    for (int i = 0; i < TAKES; i++) {
        if (t->distinct)
            len = (size_t)snprintf(key, sizeof key, "k%d-%d", t->seed, i);
        lp_ratelimit_take(t->rl, LP_RATE_SCORE, LP_RATE_ADDRESS, key, len, 1, now + i, NULL);
    }
    return NULL;
}

static void bench_table(void)
{
    lp_ratelimit_opts o = {.rates = {[LP_RATE_SCORE] = {{1e9, 1e9}, {1e9, 1e9}}}};
    for (int distinct = 0; distinct < 2; distinct++)
        for (int threads = 1; threads <= 2; threads++) {
            lp_ratelimit *rl = lp_ratelimit_new(&o);
            pthread_t th[2];
            struct taker t[2];
            double t0 = now_s();
            for (int k = 0; k < threads; k++) {
                t[k] = (struct taker){rl, distinct, k};
                pthread_create(&th[k], NULL, take_many, &t[k]);
            }
            for (int k = 0; k < threads; k++)
                pthread_join(th[k], NULL);
            double dt = now_s() - t0;
            printf("BENCH ratelimit_take_%s_%dthread %.0f ns/call\n",
                   distinct ? "distinct_keys" : "hot_key", threads, dt / TAKES * 1e9);
            if (distinct)
                printf("BENCH ratelimit_table_buckets_after_%d_keys %zu buckets\n", TAKES * threads,
                       lp_ratelimit_used(rl));
            lp_ratelimit_free(rl);
        }
}

/* ---- the server's CPU ---- */

/* utime + stime of pid, seconds. */
static double cpu_s(pid_t pid)
{
    char path[64], buf[1024];
    snprintf(path, sizeof path, "/proc/%d/stat", (int)pid);
    FILE *f = fopen(path, "r");
    if (f == NULL)
        return 0;
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    buf[n] = '\0';
    const char *p = strrchr(buf, ')');
    unsigned long ut = 0, st = 0;
    if (p)
        sscanf(p + 2, "%*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %lu %lu", &ut, &st);
    return (double)(ut + st) / (double)sysconf(_SC_CLK_TCK);
}

static size_t discard(char *d, size_t s, size_t n, void *u)
{
    (void)d;
    (void)u;
    return s * n;
}

/* n requests (body NULL: GET) to url over one handle (fresh: a new
 * connection each); *rate requests/s, *cpu_us the server's CPU per request;
 * *last the last status. */
static void run(const server_proc *s, const char *url, const char *body, const char *ca, int n,
                int fresh, double *rate, double *cpu_us, long *last)
{
    CURL *c = curl_easy_init();
    struct curl_slist *h = curl_slist_append(NULL, "Content-Type: application/json");
    h = curl_slist_append(h, "Expect:");
    curl_easy_setopt(c, CURLOPT_URL, url);
    curl_easy_setopt(c, CURLOPT_HTTPHEADER, h);
    curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, discard);
    if (ca)
        curl_easy_setopt(c, CURLOPT_CAINFO, ca);
    if (body)
        curl_easy_setopt(c, CURLOPT_POSTFIELDS, body);
    if (fresh) {
        curl_easy_setopt(c, CURLOPT_FRESH_CONNECT, 1L);
        curl_easy_setopt(c, CURLOPT_FORBID_REUSE, 1L);
    }
    double c0 = cpu_s(s->pid), t0 = now_s();
    for (int i = 0; i < n; i++) {
        curl_easy_perform(c);
        curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, last);
    }
    double dt = now_s() - t0, dc = cpu_s(s->pid) - c0;
    *rate = n / dt;
    *cpu_us = dc / n * 1e6;
    curl_slist_free_all(h);
    curl_easy_cleanup(c);
}

static void bench_refusal(void)
{
    uint8_t pk[LP_KEY_BYTES], sk[LP_SECRET_BYTES];
    crypto_sign_keypair(pk, sk);
    lp_enroll_msg m = {0};
    memcpy(m.key, pk, LP_KEY_BYTES);
    snprintf(m.token, sizeof m.token, "et_%s", "AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA");
    lp_sign_enroll(&m, sk);
    json_t *j = lp_wire_enroll_encode(&m);
    char *body = json_dumps(j, JSON_COMPACT);
    json_decref(j);
    const char *open_args[] = {SERVER_NO_RATE_LIMITS, "--log-level", "warn", NULL};
    const char *shut_args[] = {"--enroll-rate", "0.001", "--enroll-burst", "1", "--log-level",
                               "warn",          NULL};
    const char *const *args[] = {open_args, shut_args};
    const char *names[] = {"looked_up", "refused"};
    for (int k = 0; k < 2; k++) {
        server_proc s;
        if (server_start(&s, args[k]) != 0) {
            fprintf(stderr, "bench_guard: the server does not start\n");
            exit(1);
        }
        char url[128];
        snprintf(url, sizeof url, "%s/v1/annotators", s.url);
        double rate, cpu;
        long st = 0;
        run(&s, url, body, NULL, 50, 0, &rate, &cpu, &st); /* warm-up (spends the burst) */
        run(&s, url, body, NULL, GUESSES, 0, &rate, &cpu, &st);
        printf("BENCH enroll_guess_%s_status %ld http\n", names[k], st);
        printf("BENCH enroll_guess_%s_rate %.0f req/s\n", names[k], rate);
        printf("BENCH enroll_guess_%s_server_cpu %.1f us/req\n", names[k], cpu);
        server_cleanup(&s);
    }
    free(body);
}

/* ---- TLS ---- */

/* HTTPS with a server key of type keyopt (openssl -newkey), named name in
 * the BENCH lines; with plain, plain HTTP first. */
static void bench_tls(const char *keyopt, const char *name, int plain)
{
    char dir[256], cmd[2048], cert[300], key[300], ca[300];
    if (tmpdir_create(dir, sizeof dir, "bench-tls") != 0)
        exit(1);
    snprintf(cmd, sizeof cmd,
             "cd %s && openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes "
             "-keyout ca.key -out ca.pem -days 2 -subj '/CN=bench CA' 2>/dev/null && "
             "openssl req -newkey %s -nodes -keyout server.key -out server.csr "
             "-subj '/CN=localhost' 2>/dev/null && "
             "printf 'subjectAltName=IP:127.0.0.1\\n' > ext.cnf && "
             "openssl x509 -req -in server.csr -CA ca.pem -CAkey ca.key -CAcreateserial "
             "-out server.pem -days 2 -extfile ext.cnf 2>/dev/null && chmod 600 server.key",
             dir, keyopt);
    if (system(cmd) != 0) {
        fprintf(stderr, "bench_guard: openssl could not make the certificate\n");
        exit(1);
    }
    snprintf(cert, sizeof cert, "%s/server.pem", dir);
    snprintf(key, sizeof key, "%s/server.key", dir);
    snprintf(ca, sizeof ca, "%s/ca.pem", dir);
    const char *tls_args[] = {"--tls-cert", cert, "--tls-key", key, "--log-level", "warn", NULL};
    const char *plain_args[] = {"--log-level", "warn", NULL};
    const char *const *args[] = {plain_args, tls_args};
    char https[64];
    snprintf(https, sizeof https, "https_%s", name);
    const char *names[] = {"http", https};
    for (int k = plain ? 0 : 1; k < 2; k++) {
        server_proc s;
        if (server_start(&s, args[k]) != 0) {
            fprintf(stderr, "bench_guard: the server does not start\n");
            exit(1);
        }
        char url[128];
        snprintf(url, sizeof url, "%s/v1/healthz", s.url);
        double rate, cpu;
        long st = 0;
        run(&s, url, NULL, k ? ca : NULL, FRESH, 1, &rate, &cpu, &st);
        printf("BENCH %s_new_connection_rate %.0f req/s\n", names[k], rate);
        printf("BENCH %s_new_connection_latency %.2f ms\n", names[k], 1e3 / rate);
        printf("BENCH %s_new_connection_server_cpu %.0f us/req\n", names[k], cpu);
        run(&s, url, NULL, k ? ca : NULL, KEPT, 0, &rate, &cpu, &st);
        printf("BENCH %s_keepalive_rate %.0f req/s\n", names[k], rate);
        printf("BENCH %s_keepalive_server_cpu %.1f us/req\n", names[k], cpu);
        if (st != 200)
            fprintf(stderr, "bench_guard: %s answered %ld\n", names[k], st);
        server_cleanup(&s);
    }
    tmpdir_remove(dir);
}

int main(void)
{
    lp_rng_init();
    curl_global_init(CURL_GLOBAL_DEFAULT);
    bench_table();
    bench_refusal();
    bench_tls("rsa:2048", "rsa2048", 1);
    bench_tls("ec -pkeyopt ec_paramgen_curve:P-256", "ecdsa_p256", 0);
    return 0;
}
