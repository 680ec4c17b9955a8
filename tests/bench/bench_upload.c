/*
 * bench_upload — the time of one task upload (POST /v1/tasks, one file,
 * one transaction) of 2,000, 8,000 and 32,000 tasks through a real server,
 * on SQLite and on PostgreSQL (a private cluster, tests/support/pg.h) in
 * the same run, each size into a fresh campaign. A task has one context
 * turn. Other sizes can be given as arguments (`make bench-upload` passes
 * none; tests/bench/upload.sh 32000 128000 shows how the time grows).
 * Prints "BENCH upload_<db>_<n> <seconds> s"; an upload that failed (the
 * client's 60 s timeout) prints its status and the time it took.
 */
#include "http_raw.h"
#include "server_proc.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static const size_t DEFAULT_SIZES[] = {2000, 8000, 32000};
#define MAX_SIZES 16

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static int campaign(const server_proc *s, const char *name)
{
    char url[128], body[256];
    snprintf(url, sizeof url, "%s/v1/campaigns", s->url);
    int len = snprintf(body, sizeof body,
                       "{\"name\":\"%s\",\"epsilon_min\":0.1,\"epsilon_max\":10,"
                       "\"epsilon_budget\":100,\"epsilon_default\":1}",
                       name);
    http_reply r;
    int ok = http_raw("POST", url, body, (size_t)len, s->token, &r) == 0 && r.status == 201;
    if (!ok)
        fprintf(stderr, "campaign: %ld %s\n", r.status, r.body ? r.body : "");
    http_reply_free(&r);
    return ok ? 0 : -1;
}

/* Uploads n tasks into a fresh campaign; prints the BENCH line. */
static int upload(const server_proc *s, const char *db, size_t n)
{
    char name[32], url[160];
    snprintf(name, sizeof name, "upload%zu", n);
    if (campaign(s, name) != 0)
        return -1;
    size_t cap = n * 160 + 64, len = 0;
    char *jsonl = malloc(cap);
    if (jsonl == NULL)
        return -1;
    for (size_t i = 0; i < n; i++)
        len += (size_t)snprintf(jsonl + len, cap - len,
                                "{\"id\":\"t%zu\",\"prompt\":\"p%zu\",\"responses\":[\"a%zu\","
                                "\"b%zu\"],\"context\":[{\"role\":\"user\",\"content\":\"c\"},"
                                "{\"role\":\"assistant\",\"content\":\"d\"}]}\n",
                                i, i, i, i);
    snprintf(url, sizeof url, "%s/v1/tasks?campaign=%s", s->url, name);
    http_reply r;
    double t0 = now_s();
    int sent = http_raw("POST", url, jsonl, len, s->token, &r);
    double t = now_s() - t0;
    free(jsonl);
    if (sent == 0 && r.status == 200)
        printf("BENCH upload_%s_%zu %.3f s\n", db, n, t);
    else
        printf("BENCH upload_%s_%zu failed (status %ld) after %.3f s\n", db, n,
               sent == 0 ? r.status : -1L, t);
    fflush(stdout);
    http_reply_free(&r);
    return 0;
}

static int run(const char *db, const size_t *sizes, size_t n_sizes)
{
    if (strcmp(db, "postgresql") == 0)
        setenv("LDPREF_TEST_DB", "postgresql", 1);
    else
        unsetenv("LDPREF_TEST_DB");
    server_proc s;
    if (server_start(&s, NULL) != 0) {
        fprintf(stderr, "could not start ldpref-server on %s\n", db);
        return -1;
    }
    int rc = 0;
    for (size_t k = 0; k < n_sizes && rc == 0; k++)
        rc = upload(&s, db, sizes[k]);
    server_stop(&s);
    server_cleanup(&s);
    return rc;
}

int main(int argc, char **argv)
{
    size_t sizes[MAX_SIZES], n_sizes = 0;
    for (int i = 1; i < argc; i++) {
        char *end;
        unsigned long long v = strtoull(argv[i], &end, 10);
        if (*end != '\0' || v == 0 || v > 10000000 || n_sizes == MAX_SIZES) {
            fprintf(stderr, "usage: bench_upload [tasks ...] (at most %d sizes, 1..10^7)\n",
                    MAX_SIZES);
            return 2;
        }
        sizes[n_sizes++] = (size_t)v;
    }
    if (n_sizes == 0) {
        n_sizes = sizeof DEFAULT_SIZES / sizeof DEFAULT_SIZES[0];
        memcpy(sizes, DEFAULT_SIZES, sizeof DEFAULT_SIZES);
    }
    int rc = run("sqlite", sizes, n_sizes);
    if (run("postgresql", sizes, n_sizes) != 0)
        rc = -1;
    return rc == 0 ? 0 : 1;
}
