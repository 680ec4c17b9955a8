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
#include "http_raw.h"
#include "raw_annotator.h"
#include "rr.h"
#include "server_proc.h"
#include "wire.h"

#include <curl/curl.h>
#include <jansson.h>
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define DIM 256
#define TASKS 2000
#define ANNOTATORS 16 /* 4 for the model's training labels, 4 per ingest phase */
#define TEXT_(x) #x
#define TEXT(x) TEXT_(x) /* a macro's value as a string literal */
#define CLIENTS 8
#define SCORE_REQUESTS 6000

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

int main(void)
{
    srand(1);
    lp_rng_init();
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
    int64_t run = start_run("{\"campaign\":\"bench\",\"l2\":1}");
    while (strcmp(run_status(run), "succeeded") != 0) {
        if (!strcmp(run_status(run), "failed"))
            die("training failed");
        usleep(20000);
    }

    /* score: 4 candidates of 256 dense features */
    char **score = malloc(SCORE_REQUESTS * sizeof *score);
    for (int i = 0; i < SCORE_REQUESTS; i++) {
        json_t *cands = json_array();
        for (int c = 0; c < 4; c++) {
            json_t *f = json_array();
            for (int k = 0; k < DIM; k++)
                json_array_append_new(f, json_real(round(gauss() * 1e5) / 1e5));
            json_array_append_new(cands, json_pack("{s:s, s:o}", "text", "x", "features", f));
        }
        json_t *req = json_pack("{s:s, s:o}", "prompt", "p", "candidates", cands);
        score[i] = json_dumps(req, JSON_COMPACT);
        json_decref(req);
    }
    double p50, p99;
    double wall = drive("/v1/score", score, SCORE_REQUESTS, &p50, &p99);
    printf("BENCH score_requests_per_s %.0f req/s\n", SCORE_REQUESTS / wall);
    printf("BENCH score_p50 %.3f ms\n", p50 * 1e3);
    printf("BENCH score_p99 %.3f ms\n", p99 * 1e3);
    fflush(stdout);

    /* ingest without, with, and again without a retrain running: the quiet
     * rate is the mean of the phases before and after, so warm-up and
     * database growth do not bias the ratio */
    size_t n_q1, n_busy, n_q2;
    char **quiet1 = gather(sets, counts, 4, 8, &n_q1);
    char **busy = gather(sets, counts, 8, 12, &n_busy);
    char **quiet2 = gather(sets, counts, 12, 16, &n_q2);
    double p99_q1, p99_q2;
    double rate_q1 = (double)n_q1 / drive("/v1/labels", quiet1, n_q1, &p50, &p99_q1);
    /* a long run: SGD over every label for many epochs */
    run = start_run("{\"campaign\":\"bench\",\"optimizer\":\"sgd\",\"epochs\":1000,"
                    "\"activate\":false}");
    while (strcmp(run_status(run), "training") != 0)
        usleep(5000);
    wall = drive("/v1/labels", busy, n_busy, &p50, &p99);
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
    for (int i = 0; i < SCORE_REQUESTS; i++)
        free(score[i]);
    free(score);
    free(train);
    free(quiet1);
    free(quiet2);
    free(busy);
    curl_global_cleanup();
    return 0;
}
