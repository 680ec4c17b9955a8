/*
 * bench_score.c — policy scoring and ingest-under-training benchmark
 * (make bench-score).
 *
 * Starts the real ldpref-server on 127.0.0.1 with a durable database, loads
 * tasks with 256 dense features, collects labels, trains and activates a
 * square-chipo model over HTTP, then measures:
 *   - score requests/s and p50/p99 latency, 4 candidates x 256 features;
 *   - single-label ingest labels/s while a long retrain runs, against the
 *     mean rate of the phases just before and after it without one (the
 *     ratio shows the interference).
 * Every label is signed before the timed parts. Clients are threads with
 * one keep-alive libcurl handle each. Prints "BENCH <name> <value> <unit>"
 * lines; decides nothing.
 */
#include "canon.h"
#include "clock.h"
#include "featurize.h"
#include "http_load.h"
#include "http_raw.h"
#include "raw_annotator.h"
#include "rr.h"
#include "score_parse.h"
#include "server_proc.h"
#include "wire.h"

#include <curl/curl.h>
#include <jansson.h>
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

#define DIM 256
/* LDPREF_BENCH_QUICK=1 (for profiling under valgrind): fewer tasks and
 * requests, scoring only. */
static int quick;
#define TASKS (quick ? 200 : 2000)
#define ANNOTATORS 16 /* 4 for the model's training labels, 4 per ingest phase */
#define TEXT_(x) #x
#define TEXT(x) TEXT_(x) /* a macro's value as a string literal */
#define CLIENTS 8        /* libcurl threads of the ingest phases */
/* Scoring: the lean generator (tests/support/http_load.h) over SCORE_CONNS
 * keep-alive connections; SCORE_BODIES distinct bodies cycled over
 * SCORE_REQUESTS timed requests after SCORE_WARMUP untimed ones. */
#define SCORE_CONNS 4
#define SCORE_BODIES 1000
#define SCORE_WARMUP (quick ? 100 : 3000)
#define SCORE_REQUESTS (quick ? 1000 : 30000)
#define TEXT_REQUESTS (quick ? 1000 : 10000)
#define CANDS 4
#define BATCH_ITEMS 1000 /* prompts per batch request */
#define BATCH_REQUESTS 20

static server_proc srv;

static void die(const char *what)
{
    fprintf(stderr, "bench_score: %s\n", what);
    server_cleanup(&srv);
    exit(1);
}

static double now_s(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec / 1e9;
}

/* One JSON call with a fresh connection (set-up only). */
static json_t *call(const char *method, const char *path, const char *body, long want)
{
    char url[512];
    snprintf(url, sizeof url, "%s%s", srv.url, path);
    http_reply r;
    http_raw(method, url, body, body ? strlen(body) : 0, srv.token, &r);
    if (r.status != want) {
        fprintf(stderr, "%s %s: %ld %s\n", method, path, r.status, r.body ? r.body : "");
        die("unexpected status");
    }
    json_t *j = r.body ? json_loads(r.body, 0, NULL) : NULL;
    http_reply_free(&r);
    return j;
}

/* ---- a pool of client threads posting prepared bodies ---- */

struct job {
    const char *path;
    char **bodies;
    size_t n;
    double *lat; /* seconds per request */
    size_t next; /* shared cursor */
    pthread_mutex_t lock;
    int failures;
};

static size_t sink(char *p, size_t s, size_t n, void *ud)
{
    return s * n;
}

static void *client_main(void *arg)
{
    struct job *j = arg;
    CURL *h = curl_easy_init();
    char url[512];
    snprintf(url, sizeof url, "%s%s", srv.url, j->path);
    struct curl_slist *hdr = curl_slist_append(NULL, "Content-Type: application/json");
    char auth[sizeof srv.token + 32];
    if (strcmp(j->path, "/v1/score") == 0) { /* the score scope; labels need none */
        snprintf(auth, sizeof auth, "Authorization: Bearer %s", srv.token);
        hdr = curl_slist_append(hdr, auth);
    }
    curl_easy_setopt(h, CURLOPT_URL, url);
    curl_easy_setopt(h, CURLOPT_HTTPHEADER, hdr);
    curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, sink);
    curl_easy_setopt(h, CURLOPT_TCP_NODELAY, 1L);
    for (;;) {
        pthread_mutex_lock(&j->lock);
        size_t i = j->next++;
        pthread_mutex_unlock(&j->lock);
        if (i >= j->n)
            break;
        curl_easy_setopt(h, CURLOPT_POSTFIELDS, j->bodies[i]);
        double t0 = now_s();
        long status = 0;
        if (curl_easy_perform(h) != CURLE_OK ||
            curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, &status) != CURLE_OK ||
            (status != 200 && status != 201)) {
            pthread_mutex_lock(&j->lock);
            j->failures++;
            pthread_mutex_unlock(&j->lock);
        }
        j->lat[i] = now_s() - t0;
    }
    curl_slist_free_all(hdr);
    curl_easy_cleanup(h);
    return NULL;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

/* Runs the bodies through CLIENTS threads; returns the wall time. */
static double drive(const char *path, char **bodies, size_t n, double *p50, double *p99)
{
    struct job j = {.path = path, .bodies = bodies, .n = n, .lat = calloc(n, sizeof(double))};
    pthread_mutex_init(&j.lock, NULL);
    pthread_t th[CLIENTS];
    double t0 = now_s();
    for (int k = 0; k < CLIENTS; k++)
        pthread_create(&th[k], NULL, client_main, &j);
    for (int k = 0; k < CLIENTS; k++)
        pthread_join(th[k], NULL);
    double wall = now_s() - t0;
    if (j.failures)
        die("requests failed during a timed run");
    qsort(j.lat, n, sizeof(double), cmp_double);
    if (p50)
        *p50 = j.lat[n / 2];
    if (p99)
        *p99 = j.lat[(size_t)((double)n * 0.99)];
    free(j.lat);
    pthread_mutex_destroy(&j.lock);
    return wall;
}

/* ---- set-up ---- */

static double gauss(void)
{
    double u = ((double)rand() + 1.0) / ((double)RAND_MAX + 2.0);
    double v = ((double)rand() + 1.0) / ((double)RAND_MAX + 2.0);
    return sqrt(-2.0 * log(u)) * cos(2.0 * M_PI * v);
}

static void load_tasks(void)
{
    size_t cap = (size_t)TASKS * DIM * 2 * 24 + 4096, len = 0;
    char *body = malloc(cap);
    for (int t = 0; t < TASKS; t++) {
        len +=
            (size_t)snprintf(body + len, cap - len,
                             "{\"id\":\"t%d\",\"prompt\":\"p%d\",\"responses\":[\"a%d\",\"b%d\"],"
                             "\"features\":[",
                             t, t, t, t);
        for (int r = 0; r < 2; r++) {
            body[len++] = '[';
            for (int k = 0; k < DIM; k++)
                len += (size_t)snprintf(body + len, cap - len, "%s%.5f", k ? "," : "", gauss());
            body[len++] = ']';
            if (r == 0)
                body[len++] = ',';
        }
        len += (size_t)snprintf(body + len, cap - len, "]}\n");
    }
    char url[256];
    snprintf(url, sizeof url, "%s/v1/tasks?campaign=bench", srv.url);
    http_reply r;
    http_raw("POST", url, body, len, srv.token, &r);
    if (r.status != 200)
        die("task upload failed");
    http_reply_free(&r);
    free(body);
}

/* Enrolls an annotator and signs one label for each of its tasks (ids in
 * presentation order; z drawn at random: the bench measures, it does not
 * learn). Returns the label JSON bodies. */
static char **signed_labels(raw_annotator *a, size_t *n)
{
    json_t *tok =
        call("POST", "/v1/enrollment-tokens", "{\"campaign\":\"bench\",\"count\":1}", 201);
    if (raw_enroll(a, srv.url,
                   json_string_value(json_array_get(json_object_get(tok, "tokens"), 0))) != 201)
        die("enroll failed");
    json_decref(tok);
    json_t *tasks = NULL;
    if (raw_next(a, 1000, &tasks) != 200)
        die("next failed");
    *n = json_array_size(tasks);
    char **out = calloc(*n, sizeof *out);
    for (size_t i = 0; i < *n; i++) {
        int64_t id = json_integer_value(json_object_get(json_array_get(tasks, i), "task_id"));
        lp_label_msg m = raw_label(a, id, rand() & 1, 1.0);
        json_t *j = lp_wire_label_encode(&m);
        out[i] = json_dumps(j, JSON_COMPACT);
        json_decref(j);
    }
    json_decref(tasks);
    return out;
}

/* Concatenates label sets [from, to) of per-annotator arrays. */
static char **gather(char ***sets, size_t *counts, int from, int to, size_t *n)
{
    *n = 0;
    for (int k = from; k < to; k++)
        *n += counts[k];
    char **all = malloc(*n * sizeof *all);
    size_t o = 0;
    for (int k = from; k < to; k++)
        for (size_t i = 0; i < counts[k]; i++)
            all[o++] = sets[k][i];
    return all;
}

static void post_batches(char **labels, size_t n)
{
    for (size_t i = 0; i < n; i += 500) {
        size_t k = n - i < 500 ? n - i : 500, cap = 2048 * k + 64, len = 0;
        char *body = malloc(cap);
        len += (size_t)snprintf(body, cap, "{\"labels\":[");
        for (size_t j = 0; j < k; j++)
            len += (size_t)snprintf(body + len, cap - len, "%s%s", j ? "," : "", labels[i + j]);
        snprintf(body + len, cap - len, "]}");
        json_decref(call("POST", "/v1/labels/batch", body, 200));
        free(body);
    }
}

static const char *run_status(int64_t run)
{
    static char status[32];
    char path[64];
    snprintf(path, sizeof path, "/v1/retrain?run=%lld", (long long)run);
    json_t *j = call("GET", path, NULL, 200);
    snprintf(status, sizeof status, "%s", json_string_value(json_object_get(j, "status")));
    json_decref(j);
    return status;
}

static int64_t start_run(const char *body)
{
    json_t *j = call("POST", "/v1/retrain", body, 202);
    int64_t id = json_integer_value(json_object_get(j, "run"));
    json_decref(j);
    return id;
}

/* ---- scoring ---- */

/* Runs $LDPREF_BENCH_HOOK with "begin PID NAME" / "end PID NAME" around
 * each timed run (e.g. a script attaching perf or zeroing callgrind). */
static void hook(const char *what, const char *name)
{
    const char *h = getenv("LDPREF_BENCH_HOOK");
    if (h == NULL || *h == '\0')
        return;
    char cmd[1024];
    snprintf(cmd, sizeof cmd, "%s %s %d %s", h, what, (int)srv.pid, name);
    if (system(cmd) != 0)
        fprintf(stderr, "bench_score: hook %s failed\n", what);
}

/* The server's CPU seconds so far (user + system, /proc). */
static double server_cpu_s(void)
{
    char path[64], buf[1024];
    snprintf(path, sizeof path, "/proc/%d/stat", (int)srv.pid);
    FILE *f = fopen(path, "r");
    size_t n = f ? fread(buf, 1, sizeof buf - 1, f) : 0;
    if (f)
        fclose(f);
    buf[n] = '\0';
    const char *p = strrchr(buf, ')');
    unsigned long ut = 0, st = 0;
    if (p == NULL ||
        sscanf(p + 2, "%*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %lu %lu", &ut, &st) != 2)
        return 0.0;
    return (double)(ut + st) / (double)sysconf(_SC_CLK_TCK);
}

static double self_cpu_s(void)
{
    struct rusage u;
    getrusage(RUSAGE_SELF, &u);
    return (double)u.ru_utime.tv_sec + (double)u.ru_utime.tv_usec / 1e6 +
           (double)u.ru_stime.tv_sec + (double)u.ru_stime.tv_usec / 1e6;
}

/* n requests cycled from reqs[0..m) through the lean generator; prints
 * BENCH <name>_requests_per_s, _p50, _p99, and the CPU per request of the
 * server and of this generator. Returns the requests/s. */
static double load(const char *name, char **reqs, size_t *lens, size_t m, size_t n, int conns,
                   size_t warmup)
{
    char **seq = malloc(n * sizeof *seq);
    size_t *sl = malloc(n * sizeof *sl);
    for (size_t i = 0; i < n; i++) {
        seq[i] = reqs[i % m];
        sl[i] = lens[i % m];
    }
    http_load_result r;
    if (warmup > 0) {
        if (http_load_run(srv.port, conns, seq, sl, warmup < n ? warmup : n, &r) != 0 || r.failures)
            die("warm-up requests failed");
        http_load_result_free(&r);
    }
    double s0 = server_cpu_s(), c0 = self_cpu_s();
    hook("begin", name);
    int rc = http_load_run(srv.port, conns, seq, sl, n, &r);
    hook("end", name);
    double s1 = server_cpu_s(), c1 = self_cpu_s();
    if (rc != 0 || r.failures) {
        fprintf(stderr, "%s: %zu of %zu failed\n", name, r.failures, n);
        die("requests failed during a timed run");
    }
    double rate = (double)n / r.wall_s;
    printf("BENCH %s_requests_per_s %.0f req/s\n", name, rate);
    printf("BENCH %s_p50 %.3f ms\n", name, http_load_quantile(&r, 0.50) * 1e3);
    printf("BENCH %s_p99 %.3f ms\n", name, http_load_quantile(&r, 0.99) * 1e3);
    printf("BENCH %s_server_cpu_per_request %.1f us\n", name, (s1 - s0) / (double)n * 1e6);
    printf("BENCH %s_loadgen_cpu_per_request %.1f us\n", name, (c1 - c0) / (double)n * 1e6);
    fflush(stdout);
    http_load_result_free(&r);
    free(seq);
    free(sl);
    return rate;
}

/* A JSON array of DIM features rounded to 5 decimals, appended to b. */
static size_t put_features(char *b, size_t cap, double *x)
{
    size_t len = 0;
    b[len++] = '[';
    for (int k = 0; k < DIM; k++) {
        x[k] = round(gauss() * 1e5) / 1e5;
        len += (size_t)snprintf(b + len, cap - len, "%s%.5f", k ? "," : "", x[k]);
    }
    b[len++] = ']';
    b[len] = '\0';
    return len;
}

/* One prompt's score request: CANDS candidates of DIM dense features
 * (their values also into x[CANDS * DIM]). */
static char *dense_item(double *x)
{
    size_t cap = CANDS * DIM * 16 + 256, len = 0;
    char *b = malloc(cap);
    len += (size_t)snprintf(b, cap, "{\"prompt\":\"p\",\"candidates\":[");
    for (int c = 0; c < CANDS; c++) {
        len +=
            (size_t)snprintf(b + len, cap - len, "%s{\"text\":\"x\",\"features\":", c ? "," : "");
        len += put_features(b + len, cap - len, x + (size_t)c * DIM);
        b[len++] = '}';
    }
    snprintf(b + len, cap - len, "]}");
    return b;
}

static const char *const WORDS[] = {
    "the", "answer",  "is",     "clear", "and",   "short", "model",   "reply", "a",     "good",
    "bad", "helpful", "polite", "wrong", "right", "maybe", "because", "data",  "label", "prefer"};

/* A response text of about 40 words. */
static void words(char *out, size_t cap, unsigned *seed)
{
    size_t len = 0;
    for (int w = 0; w < 40 && len + 16 < cap; w++)
        len += (size_t)snprintf(out + len, cap - len, "%s%s", w ? " " : "",
                                WORDS[rand_r(seed) % (sizeof WORDS / sizeof *WORDS)]);
}

/* The single-thread cost of the dot products alone: candidates/s of
 * r = theta . x over the bodies' own features (no parsing, no HTTP). */
static double dot_bound(const double *x, size_t n_cands, const double *theta)
{
    double sink_r = 0.0, t0 = now_s();
    size_t done = 0;
    do {
        for (size_t c = 0; c < n_cands; c++, done++) {
            double r = 0.0;
            for (int k = 0; k < DIM; k++)
                r += theta[k] * x[c * DIM + k];
            sink_r += r;
        }
    } while (now_s() - t0 < 0.5);
    double rate = (double)done / (now_s() - t0);
    if (sink_r == 42.0) /* keeps the loop */
        printf("#\n");
    return rate;
}

/* The single-thread cost of reading the requests alone: candidates/s of
 * the server's single-pass reader over the bodies (no scoring, no HTTP). */
static double parse_bound(char **bodies, size_t n)
{
    static const lp_score_caps caps = {1024, 4096, 65536};
    lp_score_arena arena = {0};
    lp_score_req q;
    size_t done = 0, *lens = malloc(n * sizeof *lens);
    for (size_t i = 0; i < n; i++)
        lens[i] = strlen(bodies[i]);
    double t0 = now_s();
    do
        for (size_t i = 0; i < n; i++)
            if (lp_score_parse(bodies[i], lens[i], &caps, &arena, &q) == 1)
                done += q.k;
    while (now_s() - t0 < 0.5);
    double rate = (double)done / (now_s() - t0);
    lp_score_arena_free(&arena);
    free(lens);
    return rate;
}

/* The single-thread featurizer bound: candidates/s of lp_featurize over
 * texts (the server's default text features) in this process. */
static double featurize_bound(char texts[][512], size_t n)
{
    lp_feat_spec spec;
    lp_feat_spec_init(&spec);
    lp_featurizer *fz = lp_featurizer_new(&spec);
    lp_sparse f = {0};
    size_t done = 0;
    double t0 = now_s();
    do
        for (size_t i = 0; i < n; i++, done++)
            lp_featurize(fz, "p", texts[i], &f);
    while (now_s() - t0 < 0.5);
    double rate = (double)done / (now_s() - t0);
    lp_sparse_free(&f);
    lp_featurizer_free(fz);
    return rate;
}

static int64_t train_model(const char *body)
{
    int64_t run = start_run(body);
    const char *st;
    while (strcmp(st = run_status(run), "succeeded") != 0) {
        if (!strcmp(st, "failed") || !strcmp(st, "cancelled"))
            die("training failed");
        usleep(20000);
    }
    char path[64];
    snprintf(path, sizeof path, "/v1/retrain?run=%lld", (long long)run);
    json_t *j = call("GET", path, NULL, 200);
    int64_t v = json_integer_value(json_object_get(j, "model_version"));
    json_decref(j);
    return v;
}

static void activate(int64_t version)
{
    char body[64];
    snprintf(body, sizeof body, "{\"version\":%lld}", (long long)version);
    json_decref(call("POST", "/v1/models/activate", body, 200));
}

/* 1 if the server has the batch route (an older one answers 404). */
static int batch_route(void)
{
    static int known = -1;
    if (known < 0) {
        char url[512];
        snprintf(url, sizeof url, "%s/v1/score/batch", srv.url);
        http_reply r;
        http_raw("POST", url, "{}", 2, srv.token, &r);
        known = r.status != 404;
        http_reply_free(&r);
    }
    return known;
}

static void score_phase(int64_t dense_version)
{
    /* the generator's own ceiling: a trivial endpoint */
    size_t hl;
    char *health = http_load_post("/v1/healthz", NULL, "application/json", "", &hl);
    memcpy(health, "GET ", 4);
    memmove(health + 3, health + 4, hl - 3);
    hl--;
    load("healthz", &health, &hl, 1, SCORE_REQUESTS, SCORE_CONNS, SCORE_WARMUP);
    free(health);

    /* single requests: CANDS x DIM dense */
    double *x = malloc((size_t)SCORE_BODIES * CANDS * DIM * sizeof *x);
    char **reqs = malloc(SCORE_BODIES * sizeof *reqs);
    size_t *lens = malloc(SCORE_BODIES * sizeof *lens);
    char **bodies = malloc(SCORE_BODIES * sizeof *bodies);
    for (size_t i = 0; i < SCORE_BODIES; i++) {
        bodies[i] = dense_item(x + i * CANDS * DIM);
        reqs[i] = http_load_post("/v1/score", srv.token, "application/json", bodies[i], &lens[i]);
    }
    double pbound = parse_bound(bodies, SCORE_BODIES);
    printf("BENCH score_parse_bound %.0f candidates/s\n", pbound);
    for (size_t i = 0; i < SCORE_BODIES; i++)
        free(bodies[i]);
    free(bodies);
    double theta[DIM];
    for (int k = 0; k < DIM; k++)
        theta[k] = gauss();
    double bound = dot_bound(x, (size_t)SCORE_BODIES * CANDS, theta);
    printf("BENCH score_dot_bound %.0f candidates/s\n", bound);
    load("score", reqs, lens, SCORE_BODIES, SCORE_REQUESTS, SCORE_CONNS, SCORE_WARMUP);

    /* the batch form: BATCH_ITEMS prompts per request, NDJSON lines */
    size_t cap = (size_t)BATCH_ITEMS * CANDS * DIM * 16 + 4096;
    char **breqs = malloc(BATCH_REQUESTS * sizeof *breqs);
    size_t *blens = malloc(BATCH_REQUESTS * sizeof *blens);
    double *bx = malloc((size_t)CANDS * DIM * sizeof *bx);
    for (int r = 0; r < BATCH_REQUESTS && batch_route(); r++) {
        char *body = malloc(cap);
        size_t len = 0;
        for (int i = 0; i < BATCH_ITEMS; i++) {
            char *item = dense_item(bx);
            len += (size_t)snprintf(body + len, cap - len, "%s\n", item);
            free(item);
        }
        breqs[r] =
            http_load_post("/v1/score/batch", srv.token, "application/x-ndjson", body, &blens[r]);
        free(body);
    }
    if (batch_route()) {
        double brate = load("score_batch", breqs, blens, BATCH_REQUESTS, BATCH_REQUESTS, 1, 2);
        double cands = brate * BATCH_ITEMS * CANDS;
        printf("BENCH score_batch_candidates_per_s %.0f candidates/s\n", cands);
        printf("BENCH score_batch_vs_dot_bound %.3f ratio\n", cands / bound);
        printf("BENCH score_batch_vs_parse_bound %.3f ratio\n", cands / pbound);
        for (int r = 0; r < BATCH_REQUESTS; r++)
            free(breqs[r]);
    } else {
        fprintf(stderr, "bench_score: note: this server has no /v1/score/batch\n");
    }

    /* text candidates through the featurizer: a text model */
    int64_t text_version = train_model("{\"campaign\":\"bench\",\"l2\":1,\"features\":\"text\"}");
    activate(text_version);
    static char texts[SCORE_BODIES][512];
    unsigned seed = 7;
    for (size_t i = 0; i < SCORE_BODIES; i++)
        words(texts[i], sizeof texts[i], &seed);
    size_t treqs_n = SCORE_BODIES / CANDS;
    char **treqs = malloc(treqs_n * sizeof *treqs);
    size_t *tlens = malloc(treqs_n * sizeof *tlens);
    for (size_t i = 0; i < treqs_n; i++) {
        char body[4096];
        size_t len = (size_t)snprintf(body, sizeof body, "{\"prompt\":\"p\",\"candidates\":[");
        for (int c = 0; c < CANDS; c++)
            len += (size_t)snprintf(body + len, sizeof body - len, "%s{\"text\":\"%s\"}",
                                    c ? "," : "", texts[i * CANDS + (size_t)c]);
        snprintf(body + len, sizeof body - len, "]}");
        treqs[i] = http_load_post("/v1/score", srv.token, "application/json", body, &tlens[i]);
    }
    double fbound = featurize_bound(texts, SCORE_BODIES);
    printf("BENCH featurize_bound_single_thread %.0f candidates/s\n", fbound);
    double trate =
        load("score_text", treqs, tlens, treqs_n, TEXT_REQUESTS, SCORE_CONNS, SCORE_WARMUP);
    printf("BENCH score_text_candidates_per_s %.0f candidates/s\n", trate * CANDS);
    printf("BENCH score_text_vs_featurize_bound %.3f ratio\n", trate * CANDS / fbound);
    activate(dense_version);

    for (size_t i = 0; i < SCORE_BODIES; i++)
        free(reqs[i]);
    for (size_t i = 0; i < treqs_n; i++)
        free(treqs[i]);
    free(reqs);
    free(lens);
    free(treqs);
    free(tlens);
    free(breqs);
    free(blens);
    free(bx);
    free(x);
}

int main(void)
{
    srand(1);
    lp_rng_init();
    quick = getenv("LDPREF_BENCH_QUICK") != NULL && atoi(getenv("LDPREF_BENCH_QUICK")) == 1;
    curl_global_init(CURL_GLOBAL_DEFAULT);
    const char *args[] = {"--train-threads", "1", SERVER_NO_RATE_LIMITS, NULL};
    if (server_start(&srv, args) != 0)
        die("server does not start");
    json_decref(call("POST", "/v1/campaigns",
                     "{\"name\":\"bench\",\"epsilon_min\":0.1,\"epsilon_max\":10,"
                     "\"epsilon_budget\":100000,\"labels_per_task\":" TEXT(ANNOTATORS) "}",
                     201));
    load_tasks();
    raw_annotator ann[ANNOTATORS];
    char **sets[ANNOTATORS];
    size_t counts[ANNOTATORS];
    for (int k = 0; k < ANNOTATORS; k++)
        sets[k] = signed_labels(&ann[k], &counts[k]);

    /* the model: 4 annotators' labels, square-chipo by L-BFGS */
    size_t n_train;
    char **train = gather(sets, counts, 0, 4, &n_train);
    post_batches(train, n_train);
    int64_t dense_version = train_model("{\"campaign\":\"bench\",\"l2\":1}");
    score_phase(dense_version);
    if (quick) {
        server_stop(&srv);
        server_cleanup(&srv);
        return 0;
    }

    /* ingest without, with, and again without a retrain running: the quiet
     * rate is the mean of the phases before and after, so warm-up and
     * database growth do not bias the ratio */
    size_t n_q1, n_busy, n_q2;
    char **quiet1 = gather(sets, counts, 4, 8, &n_q1);
    char **busy = gather(sets, counts, 8, 12, &n_busy);
    char **quiet2 = gather(sets, counts, 12, 16, &n_q2);
    double p50, p99, p99_q1, p99_q2;
    double rate_q1 = (double)n_q1 / drive("/v1/labels", quiet1, n_q1, &p50, &p99_q1);
    /* a long run: SGD over every label for many epochs */
    int64_t run = start_run("{\"campaign\":\"bench\",\"optimizer\":\"sgd\",\"epochs\":1000,"
                            "\"activate\":false}");
    while (strcmp(run_status(run), "training") != 0)
        usleep(5000);
    double wall = drive("/v1/labels", busy, n_busy, &p50, &p99);
    const char *after = run_status(run);
    double rate_busy = (double)n_busy / wall;
    int still_training = strcmp(after, "training") == 0;
    char body[64];
    snprintf(body, sizeof body, "{\"run\":%lld}", (long long)run);
    json_decref(call("POST", "/v1/retrain/cancel", body, 200));
    while (strcmp(run_status(run), "cancelled") != 0 && strcmp(run_status(run), "succeeded") != 0)
        usleep(5000);
    double rate_q2 = (double)n_q2 / drive("/v1/labels", quiet2, n_q2, &p50, &p99_q2);
    double rate_quiet = (rate_q1 + rate_q2) / 2;
    printf("BENCH ingest_single_no_retrain %.0f labels/s\n", rate_quiet);
    printf("BENCH ingest_single_no_retrain_p99 %.3f ms\n",
           (p99_q1 > p99_q2 ? p99_q1 : p99_q2) * 1e3);
    printf("BENCH ingest_single_during_retrain %.0f labels/s\n", rate_busy);
    printf("BENCH ingest_single_during_retrain_p99 %.3f ms\n", p99 * 1e3);
    printf("BENCH ingest_retrain_ratio %.3f ratio\n", rate_busy / rate_quiet);
    if (!still_training)
        fprintf(stderr, "bench_score: note: the retrain ended (%s) before the timed ingest did\n",
                after);

    server_stop(&srv);
    server_cleanup(&srv);
    for (int k = 0; k < ANNOTATORS; k++) {
        for (size_t i = 0; i < counts[k]; i++)
            free(sets[k][i]);
        free(sets[k]);
    }
    free(train);
    free(quiet1);
    free(quiet2);
    free(busy);
    curl_global_cleanup();
    return 0;
}
