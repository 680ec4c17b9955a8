/*
 * bench_soak.c — a soak under mixed load (make soak).
 *
 * Starts the real ldpref-server on 127.0.0.1 with a durable database and,
 * for LDPREF_SOAK_SECONDS (default 60), drives it at once with:
 *   - single labels from SINGLE_THREADS keep-alive clients,
 *   - batches of BATCH labels from one client,
 *   - score requests (4 candidates x DIM features) from SCORE_THREADS
 *     clients with the operator token,
 *   - a retrain every RETRAIN_EVERY_S seconds (activated when it succeeds)
 *     and, between retrains, re-activation of an earlier model version.
 * Annotators are enrolled as they run out of tasks. Every second it samples
 * the server's resident memory, threads and open files from /proc. At the
 * end it checks that every acknowledged label is in the database.
 *
 * Prints "BENCH soak_<name> <value> <unit>" lines and, with LDPREF_SOAK_CSV
 * set, writes the per-second samples there; decides nothing. Extra server
 * options come from LDPREF_SOAK_ARGS (space-separated).
 */
#include "canon.h"
#include "clock.h"
#include "http_raw.h"
#include "raw_annotator.h"
#include "rr.h"
#include "server_proc.h"
#include "wire.h"

#include <curl/curl.h>
#include <dirent.h>
#include <jansson.h>
#include <math.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define DIM 64
#define TASKS 4000
#define LABELS_PER_TASK 200
#define NEXT_COUNT 1000
#define BATCH 100
#define SINGLE_THREADS 2
#define SCORE_THREADS 2
#define RETRAIN_EVERY_S 10
#define ARGS_MAX 32

static server_proc srv;
static _Atomic int stopping;

/* What the load threads did; the soak's figures. */
static _Atomic long acked_labels, single_labels, batch_labels, scores, retrains, activations,
    refused_429, errors;

static void die(const char *what)
{
    fprintf(stderr, "bench_soak: %s\n", what);
    server_cleanup(&srv);
    exit(1);
}

static double now_s(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec / 1e9;
}

static double gauss(unsigned *seed)
{
    double u = ((double)rand_r(seed) + 1.0) / ((double)RAND_MAX + 2.0);
    double v = ((double)rand_r(seed) + 1.0) / ((double)RAND_MAX + 2.0);
    return sqrt(-2.0 * log(u)) * cos(2.0 * M_PI * v);
}

/* One operator call on a fresh connection; the parsed answer, or NULL when
 * the status is not want (counted as an error unless quiet). */
static json_t *call(const char *method, const char *path, const char *body, long want)
{
    char url[512];
    snprintf(url, sizeof url, "%s%s", srv.url, path);
    http_reply r;
    http_raw(method, url, body, body ? strlen(body) : 0, srv.token, &r);
    json_t *j = NULL;
    if (r.status == want)
        j = r.body ? json_loads(r.body, 0, NULL) : json_object();
    else if (r.status == 429)
        atomic_fetch_add(&refused_429, 1);
    else {
        fprintf(stderr, "bench_soak: %s %s: %ld %s\n", method, path, r.status,
                r.body ? r.body : "");
        atomic_fetch_add(&errors, 1);
    }
    http_reply_free(&r);
    return j;
}

/* ---- one keep-alive client per thread ---- */

struct client {
    CURL *h;
    struct curl_slist *hdr;
    long status;
};

static size_t sink(char *p, size_t s, size_t n, void *ud)
{
    (void)p;
    (void)ud;
    return s * n;
}

static void client_open(struct client *c, const char *bearer)
{
    c->h = curl_easy_init();
    c->hdr = curl_slist_append(NULL, "Content-Type: application/json");
    if (bearer != NULL) {
        char auth[256];
        snprintf(auth, sizeof auth, "Authorization: Bearer %s", bearer);
        c->hdr = curl_slist_append(c->hdr, auth);
    }
    curl_easy_setopt(c->h, CURLOPT_HTTPHEADER, c->hdr);
    curl_easy_setopt(c->h, CURLOPT_WRITEFUNCTION, sink);
    curl_easy_setopt(c->h, CURLOPT_TCP_NODELAY, 1L);
    curl_easy_setopt(c->h, CURLOPT_TIMEOUT, 30L);
}

/* POSTs body to path; the status, 0 when the request failed. */
static long client_post(struct client *c, const char *path, const char *body)
{
    char url[512];
    snprintf(url, sizeof url, "%s%s", srv.url, path);
    curl_easy_setopt(c->h, CURLOPT_URL, url);
    curl_easy_setopt(c->h, CURLOPT_POSTFIELDS, body);
    long status = 0;
    if (curl_easy_perform(c->h) != CURLE_OK ||
        curl_easy_getinfo(c->h, CURLINFO_RESPONSE_CODE, &status) != CURLE_OK)
        return 0;
    return status;
}

static void client_close(struct client *c)
{
    curl_slist_free_all(c->hdr);
    curl_easy_cleanup(c->h);
}

/* ---- annotators ---- */

/* A freshly enrolled annotator with its assigned task ids. */
struct annotator {
    raw_annotator a;
    int64_t tasks[NEXT_COUNT];
    size_t n, next;
};

static int annotator_new(struct annotator *an)
{
    json_t *tok = call("POST", "/v1/enrollment-tokens", "{\"campaign\":\"soak\",\"count\":1}", 201);
    if (tok == NULL)
        return -1;
    const char *t = json_string_value(json_array_get(json_object_get(tok, "tokens"), 0));
    long st = t ? raw_enroll(&an->a, srv.url, t) : 0;
    json_decref(tok);
    if (st != 201)
        return -1;
    json_t *tasks = NULL;
    if (raw_next(&an->a, NEXT_COUNT, &tasks) != 200) {
        json_decref(tasks);
        return -1;
    }
    an->n = json_array_size(tasks);
    an->next = 0;
    for (size_t i = 0; i < an->n; i++)
        an->tasks[i] = json_integer_value(json_object_get(json_array_get(tasks, i), "task_id"));
    json_decref(tasks);
    return an->n > 0 ? 0 : -1;
}

/* The next signed label of the thread's annotator, as JSON text (a new
 * annotator when the current one has labelled all its tasks). */
static char *next_label(struct annotator *an)
{
    if (an->next >= an->n && annotator_new(an) != 0)
        return NULL;
    int64_t id = an->tasks[an->next++];
    int z = 0;
    lp_rr_privatize(1, 1.0, &z);
    lp_label_msg m = raw_label(&an->a, id, z, 1.0);
    json_t *j = lp_wire_label_encode(&m);
    char *text = json_dumps(j, JSON_COMPACT);
    json_decref(j);
    return text;
}

static void *single_main(void *arg)
{
    (void)arg;
    struct annotator *an = calloc(1, sizeof *an);
    struct client c;
    client_open(&c, NULL);
    while (!atomic_load(&stopping)) {
        char *body = next_label(an);
        if (body == NULL) {
            atomic_fetch_add(&errors, 1);
            usleep(100000);
            continue;
        }
        long st = client_post(&c, "/v1/labels", body);
        free(body);
        if (st == 201 || st == 200) {
            atomic_fetch_add(&acked_labels, 1);
            atomic_fetch_add(&single_labels, 1);
        } else if (st == 429) {
            atomic_fetch_add(&refused_429, 1);
        } else {
            atomic_fetch_add(&errors, 1);
        }
    }
    client_close(&c);
    free(an);
    return NULL;
}

static void *batch_main(void *arg)
{
    (void)arg;
    struct annotator *an = calloc(1, sizeof *an);
    struct client c;
    client_open(&c, NULL);
    while (!atomic_load(&stopping)) {
        size_t cap = (size_t)BATCH * 1024 + 64, len = 0;
        char *body = malloc(cap);
        len += (size_t)snprintf(body, cap, "{\"labels\":[");
        int k = 0;
        for (; k < BATCH; k++) {
            char *l = next_label(an);
            if (l == NULL)
                break;
            len += (size_t)snprintf(body + len, cap - len, "%s%s", k ? "," : "", l);
            free(l);
        }
        snprintf(body + len, cap - len, "]}");
        long st = k > 0 ? client_post(&c, "/v1/labels/batch", body) : 0;
        free(body);
        if (st == 200) {
            atomic_fetch_add(&acked_labels, k);
            atomic_fetch_add(&batch_labels, k);
        } else {
            atomic_fetch_add(&errors, 1);
            usleep(100000);
        }
    }
    client_close(&c);
    free(an);
    return NULL;
}

static void *score_main(void *arg)
{
    unsigned seed = (unsigned)(uintptr_t)arg;
    struct client c;
    client_open(&c, srv.token);
    size_t cap = 4 * DIM * 24 + 256;
    char *body = malloc(cap);
    while (!atomic_load(&stopping)) {
        size_t len = (size_t)snprintf(body, cap, "{\"prompt\":\"p\",\"candidates\":[");
        for (int k = 0; k < 4; k++) {
            len += (size_t)snprintf(body + len, cap - len, "%s{\"text\":\"c%d\",\"features\":[",
                                    k ? "," : "", k);
            for (int d = 0; d < DIM; d++)
                len +=
                    (size_t)snprintf(body + len, cap - len, "%s%.5f", d ? "," : "", gauss(&seed));
            len += (size_t)snprintf(body + len, cap - len, "]}");
        }
        snprintf(body + len, cap - len, "]}");
        long st = client_post(&c, "/v1/score", body);
        if (st == 200)
            atomic_fetch_add(&scores, 1);
        else if (st == 429)
            atomic_fetch_add(&refused_429, 1);
        else
            atomic_fetch_add(&errors, 1);
    }
    free(body);
    client_close(&c);
    return NULL;
}

/* ---- training ---- */

/* Starts a retrain and waits for it; the new model's version, or 0. */
static int64_t retrain(void)
{
    json_t *j = call("POST", "/v1/retrain", "{\"campaign\":\"soak\",\"l2\":1}", 202);
    if (j == NULL)
        return 0;
    int64_t run = json_integer_value(json_object_get(j, "run"));
    json_decref(j);
    char path[64];
    snprintf(path, sizeof path, "/v1/retrain?run=%lld", (long long)run);
    for (;;) {
        json_t *s = call("GET", path, NULL, 200);
        const char *status = s ? json_string_value(json_object_get(s, "status")) : NULL;
        int64_t version = s ? json_integer_value(json_object_get(s, "model_version")) : 0;
        int done = status == NULL || strcmp(status, "succeeded") == 0 ||
                   strcmp(status, "failed") == 0 || strcmp(status, "cancelled") == 0;
        int ok = status != NULL && strcmp(status, "succeeded") == 0;
        json_decref(s);
        if (done) {
            if (!ok)
                atomic_fetch_add(&errors, 1);
            return ok ? version : 0;
        }
        usleep(50000);
    }
}

static void *train_main(void *arg)
{
    int64_t first = *(int64_t *)arg;
    double next = now_s() + RETRAIN_EVERY_S;
    while (!atomic_load(&stopping)) {
        if (now_s() >= next) {
            if (retrain() > 0)
                atomic_fetch_add(&retrains, 1);
            next = now_s() + RETRAIN_EVERY_S;
            continue;
        }
        /* between retrains: serve the first model for a moment, then the
         * newest again */
        char body[64];
        snprintf(body, sizeof body, "{\"version\":%lld}", (long long)first);
        json_t *j = call("POST", "/v1/models/activate", body, 200);
        if (j != NULL)
            atomic_fetch_add(&activations, 1);
        json_decref(j);
        sleep(2);
    }
    return NULL;
}

/* ---- the server's footprint ---- */

struct sample {
    double t;
    long rss_kib, threads, fds;
};

static long open_files(pid_t pid)
{
    char path[64];
    snprintf(path, sizeof path, "/proc/%d/fd", (int)pid);
    DIR *d = opendir(path);
    long n = 0;
    for (struct dirent *e; d != NULL && (e = readdir(d)) != NULL;)
        n += e->d_name[0] != '.';
    if (d != NULL)
        closedir(d);
    return n;
}

static void load_tasks(void)
{
    unsigned seed = 7;
    size_t cap = (size_t)TASKS * (DIM * 2 * 12 + 128), len = 0;
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
                len +=
                    (size_t)snprintf(body + len, cap - len, "%s%.4f", k ? "," : "", gauss(&seed));
            body[len++] = ']';
            if (r == 0)
                body[len++] = ',';
        }
        len += (size_t)snprintf(body + len, cap - len, "]}\n");
    }
    char url[256];
    snprintf(url, sizeof url, "%s/v1/tasks?campaign=soak", srv.url);
    http_reply r;
    http_raw("POST", url, body, len, srv.token, &r);
    if (r.status != 200)
        die("task upload failed");
    http_reply_free(&r);
    free(body);
}

/* Server options: --train-threads 1 and the words of LDPREF_SOAK_ARGS. */
static void server_args(const char *args[ARGS_MAX], char *words)
{
    int n = 0;
    static const char *const fixed[] = {"--train-threads", "1", SERVER_NO_RATE_LIMITS};
    for (size_t i = 0; i < sizeof fixed / sizeof fixed[0]; i++)
        args[n++] = fixed[i];
    const char *env = getenv("LDPREF_SOAK_ARGS");
    if (env != NULL) {
        snprintf(words, 1024, "%s", env);
        for (char *save = NULL, *w = strtok_r(words, " ", &save); w && n < ARGS_MAX - 1;
             w = strtok_r(NULL, " ", &save))
            args[n++] = w;
    }
    args[n] = NULL;
}

int main(void)
{
    const char *env = getenv("LDPREF_SOAK_SECONDS");
    int seconds = env ? atoi(env) : 60;
    if (seconds <= 0)
        seconds = 60;
    lp_rng_init();
    curl_global_init(CURL_GLOBAL_DEFAULT);
    const char *args[ARGS_MAX];
    char words[1024];
    server_args(args, words);
    if (server_start(&srv, args) != 0)
        die("server does not start");
    char body[256];
    snprintf(body, sizeof body,
             "{\"name\":\"soak\",\"epsilon_min\":0.1,\"epsilon_max\":10,"
             "\"epsilon_budget\":1000000,\"labels_per_task\":%d}",
             LABELS_PER_TASK);
    json_decref(call("POST", "/v1/campaigns", body, 201));
    load_tasks();

    /* a first model to score with: one batch thread's worth of labels */
    struct annotator *seed_an = calloc(1, sizeof *seed_an);
    struct client c;
    client_open(&c, NULL);
    for (int b = 0; b < 10; b++) {
        size_t cap = (size_t)BATCH * 1024 + 64, len = 0;
        char *batch = malloc(cap);
        len += (size_t)snprintf(batch, cap, "{\"labels\":[");
        for (int k = 0; k < BATCH; k++) {
            char *l = next_label(seed_an);
            if (l == NULL)
                die("cannot enroll");
            len += (size_t)snprintf(batch + len, cap - len, "%s%s", k ? "," : "", l);
            free(l);
        }
        snprintf(batch + len, cap - len, "]}");
        if (client_post(&c, "/v1/labels/batch", batch) != 200)
            die("seed batch refused");
        atomic_fetch_add(&acked_labels, BATCH);
        free(batch);
    }
    client_close(&c);
    free(seed_an);
    int64_t first = retrain();
    if (first <= 0)
        die("the first retrain failed");

    long rss0 = server_status_field(srv.pid, "VmRSS");
    pthread_t th[SINGLE_THREADS + SCORE_THREADS + 2];
    int nt = 0;
    for (int i = 0; i < SINGLE_THREADS; i++)
        pthread_create(&th[nt++], NULL, single_main, NULL);
    pthread_create(&th[nt++], NULL, batch_main, NULL);
    for (int i = 0; i < SCORE_THREADS; i++)
        pthread_create(&th[nt++], NULL, score_main, (void *)(uintptr_t)(i + 1));
    pthread_create(&th[nt++], NULL, train_main, &first);

    struct sample *s = calloc((size_t)seconds + 1, sizeof *s);
    double t0 = now_s();
    for (int i = 0; i <= seconds; i++) {
        while (now_s() < t0 + i)
            usleep(10000);
        s[i] = (struct sample){now_s() - t0, server_status_field(srv.pid, "VmRSS"),
                               server_status_field(srv.pid, "Threads"), open_files(srv.pid)};
    }
    atomic_store(&stopping, 1);
    for (int i = 0; i < nt; i++)
        pthread_join(th[i], NULL);
    double wall = now_s() - t0;

    long stored = server_db_count(&srv, "labels");
    long rss_max = rss0, threads_max = 0, fds_max = 0;
    for (int i = 0; i <= seconds; i++) {
        rss_max = s[i].rss_kib > rss_max ? s[i].rss_kib : rss_max;
        threads_max = s[i].threads > threads_max ? s[i].threads : threads_max;
        fds_max = s[i].fds > fds_max ? s[i].fds : fds_max;
    }
    const char *csv = getenv("LDPREF_SOAK_CSV");
    FILE *f = csv ? fopen(csv, "w") : NULL;
    if (f != NULL) {
        fprintf(f, "t_s,rss_kib,threads,fds\n");
        for (int i = 0; i <= seconds; i++)
            fprintf(f, "%.1f,%ld,%ld,%ld\n", s[i].t, s[i].rss_kib, s[i].threads, s[i].fds);
        fclose(f);
    }
    printf("BENCH soak_seconds %.1f s\n", wall);
    printf("BENCH soak_labels_single %ld labels\n", atomic_load(&single_labels));
    printf("BENCH soak_labels_batch %ld labels\n", atomic_load(&batch_labels));
    printf("BENCH soak_label_rate %.0f labels/s\n",
           (double)(atomic_load(&single_labels) + atomic_load(&batch_labels)) / wall);
    printf("BENCH soak_scores %ld requests\n", atomic_load(&scores));
    printf("BENCH soak_score_rate %.0f req/s\n", (double)atomic_load(&scores) / wall);
    printf("BENCH soak_retrains %ld runs\n", atomic_load(&retrains));
    printf("BENCH soak_activations %ld calls\n", atomic_load(&activations));
    printf("BENCH soak_refused_429 %ld requests\n", atomic_load(&refused_429));
    printf("BENCH soak_errors %ld requests\n", atomic_load(&errors));
    printf("BENCH soak_labels_acknowledged %ld labels\n", atomic_load(&acked_labels));
    printf("BENCH soak_labels_stored %ld labels\n", stored);
    printf("BENCH soak_rss_start %.1f MiB\n", rss0 / 1024.0);
    printf("BENCH soak_rss_max %.1f MiB\n", rss_max / 1024.0);
    printf("BENCH soak_rss_end %.1f MiB\n", s[seconds].rss_kib / 1024.0);
    printf("BENCH soak_rss_growth_second_half %.1f MiB\n",
           (s[seconds].rss_kib - s[seconds / 2].rss_kib) / 1024.0);
    printf("BENCH soak_threads_max %ld threads\n", threads_max);
    printf("BENCH soak_open_files_max %ld files\n", fds_max);
    free(s);
    server_stop(&srv);
    server_cleanup(&srv);
    curl_global_cleanup();
    return 0;
}
