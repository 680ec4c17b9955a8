/* label_stream.c — labels streamed at a real server. See label_stream.h. */
#include "label_stream.h"

#include "check.h"
#include "http_raw.h"

#include <jansson.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define NEXT_MAX 1000 /* tasks one /v1/tasks/next may hand out */

/* Tasks of campaign: n tasks as JSON lines. */
static int upload_tasks(label_stream *ls, int n)
{
    size_t cap = (size_t)n * 96 + 1, len = 0;
    char *jsonl = malloc(cap);
    if (jsonl == NULL)
        return -1;
    for (int i = 0; i < n; i++)
        len += (size_t)snprintf(
            jsonl + len, cap - len,
            "{\"id\":\"%s-%d\",\"prompt\":\"p%d\",\"responses\":[\"a\",\"b%d\"]}\n", ls->campaign,
            i, i, i);
    char url[256];
    snprintf(url, sizeof url, "%s/v1/tasks?campaign=%s", ls->srv->url, ls->campaign);
    http_reply r;
    http_raw("POST", url, jsonl, len, ls->token, &r);
    free(jsonl);
    long status = r.status;
    http_reply_free(&r);
    return status == 200 ? 0 : -1;
}

/* The enrollment tokens for the writers (new reference), or NULL. */
static json_t *enrollment_tokens(label_stream *ls)
{
    json_t *body = json_pack("{s:s, s:i}", "campaign", ls->campaign, "count", LABEL_STREAM_WRITERS);
    http_reply r;
    long status = raw_post_json(ls->srv->url, "/v1/enrollment-tokens", body, ls->token, &r);
    json_decref(body);
    json_t *j = status == 201 || status == 200 ? json_loads(r.body, 0, NULL) : NULL;
    http_reply_free(&r);
    json_t *tokens = json_incref(json_object_get(j, "tokens"));
    json_decref(j);
    return tokens;
}

/* Fetches more tasks for w, at most NEXT_MAX, up to w->cap in all. The
 * server hands out an annotator's unlabelled leases again before new tasks,
 * so more can be fetched only once the previous ones are labelled; a task
 * already in the list is never added twice. 0 when one was added. */
static int fetch_tasks(label_writer *w)
{
    int want = w->cap - w->ntasks < NEXT_MAX ? w->cap - w->ntasks : NEXT_MAX;
    json_t *tasks = NULL;
    if (want <= 0 || raw_next(&w->ann, want, &tasks) != 200) {
        json_decref(tasks);
        return -1;
    }
    int added = 0;
    for (size_t k = 0; k < json_array_size(tasks) && w->ntasks < w->cap; k++) {
        int64_t id = json_integer_value(json_object_get(json_array_get(tasks, k), "task_id"));
        int seen = 0;
        for (int i = w->next; i < w->ntasks && !seen; i++)
            seen = w->tasks[i] == id;
        if (!seen) {
            w->tasks[w->ntasks++] = id;
            added++;
        }
    }
    json_decref(tasks);
    return added > 0 ? 0 : -1;
}

/* Room for per_writer tasks and the first of them. */
static int writer_init(label_writer *w, int per_writer)
{
    w->cap = per_writer;
    w->tasks = calloc((size_t)per_writer, sizeof *w->tasks);
    w->acked = calloc((size_t)per_writer, sizeof *w->acked);
    if (w->tasks == NULL || w->acked == NULL)
        return -1;
    return fetch_tasks(w);
}

int label_stream_setup(label_stream *ls, const server_proc *srv, const char *campaign,
                       int tasks_per_writer)
{
    memset(ls, 0, sizeof *ls);
    ls->srv = srv;
    snprintf(ls->campaign, sizeof ls->campaign, "%s", campaign);
    snprintf(ls->token, sizeof ls->token, "%s", srv->token);
    json_t *camp = json_pack("{s:s, s:f, s:f, s:b, s:f, s:f}", "name", campaign, "epsilon_min", 0.1,
                             "epsilon_max", 5.0, "allow_infinite", 0, "epsilon_budget", 1e6,
                             "epsilon_default", 1.0);
    http_reply r;
    long status = raw_post_json(srv->url, "/v1/campaigns", camp, ls->token, &r);
    json_decref(camp);
    http_reply_free(&r);
    json_t *tokens = NULL;
    int ok = status == 201 && upload_tasks(ls, LABEL_STREAM_WRITERS * tasks_per_writer) == 0 &&
             (tokens = enrollment_tokens(ls)) != NULL;
    for (int i = 0; ok && i < LABEL_STREAM_WRITERS; i++) {
        const char *t = json_string_value(json_array_get(tokens, (size_t)i));
        ok = raw_enroll(&ls->w[i].ann, srv->url, t ? t : "") == 201 &&
             writer_init(&ls->w[i], tasks_per_writer) == 0;
    }
    json_decref(tokens);
    check_record(ok, __FILE__, __LINE__, "label stream set up: campaign %s, %d annotators",
                 campaign, LABEL_STREAM_WRITERS);
    return ok ? 0 : -1;
}

struct run {
    label_stream *ls;
    label_writer *w;
    int per_writer, stop_at_refusal, acked;
    pthread_mutex_t *lock;
};

static void count_refusal(label_stream *ls, const char *name)
{
    for (int k = 0; k < LABEL_STREAM_NAMES; k++) {
        if (ls->refusals[k].count == 0)
            snprintf(ls->refusals[k].name, sizeof ls->refusals[k].name, "%s", name);
        if (strcmp(ls->refusals[k].name, name) == 0) {
            ls->refusals[k].count++;
            break;
        }
    }
    ls->refused++;
}

static void *run_writer(void *arg)
{
    struct run *run = arg;
    label_writer *w = run->w;
    for (int i = 0; i < run->per_writer; i++) {
        if (w->next == w->ntasks && fetch_tasks(w) != 0)
            break;
        lp_label_msg m = raw_label(&w->ann, w->tasks[w->next], w->next & 1, 1.0);
        http_reply r;
        long status = raw_post_label(run->ls->srv->url, &m, &r);
        if (status == 201) {
            json_t *j = json_loads(r.body, 0, NULL);
            w->acked[w->nacked++] = json_integer_value(json_object_get(j, "label_id"));
            json_decref(j);
            w->next++;
            run->acked++;
        } else {
            char name[48];
            http_error_name(&r, name, sizeof name);
            pthread_mutex_lock(run->lock);
            count_refusal(run->ls, name);
            pthread_mutex_unlock(run->lock);
        }
        http_reply_free(&r);
        if (status != 201 && (run->stop_at_refusal || status == 0))
            break;
    }
    return NULL;
}

int label_stream_run(label_stream *ls, int per_writer, int stop_at_refusal)
{
    memset(ls->refusals, 0, sizeof ls->refusals);
    ls->refused = 0;
    pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
    struct run runs[LABEL_STREAM_WRITERS];
    pthread_t tid[LABEL_STREAM_WRITERS];
    for (int i = 0; i < LABEL_STREAM_WRITERS; i++) {
        runs[i] = (struct run){ls, &ls->w[i], per_writer, stop_at_refusal, 0, &lock};
        pthread_create(&tid[i], NULL, run_writer, &runs[i]);
    }
    int acked = 0;
    for (int i = 0; i < LABEL_STREAM_WRITERS; i++) {
        pthread_join(tid[i], NULL);
        acked += runs[i].acked;
    }
    return acked;
}

int label_stream_refused_as(const label_stream *ls, const char *name)
{
    for (int k = 0; k < LABEL_STREAM_NAMES; k++)
        if (ls->refusals[k].count > 0 && strcmp(ls->refusals[k].name, name) == 0)
            return ls->refusals[k].count;
    return 0;
}

int label_stream_acked(const label_stream *ls)
{
    int n = 0;
    for (int i = 0; i < LABEL_STREAM_WRITERS; i++)
        n += ls->w[i].nacked;
    return n;
}

static int cmp_i64(const void *a, const void *b)
{
    int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
    return (x > y) - (x < y);
}

int label_stream_missing(const label_stream *ls, int *stored)
{
    *stored = 0;
    char path[128];
    snprintf(path, sizeof path, "/v1/export?campaign=%s", ls->campaign);
    http_reply r;
    if (raw_get(ls->srv->url, path, ls->token, &r) != 200) {
        http_reply_free(&r);
        return -1;
    }
    size_t cap = 1024, n = 0;
    int64_t *ids = malloc(cap * sizeof *ids);
    for (char *line = r.body; ids != NULL && line && *line;) {
        char *nl = strchr(line, '\n');
        json_t *j = json_loadb(line, nl ? (size_t)(nl - line) : strlen(line), 0, NULL);
        if (j != NULL && n == cap)
            ids = realloc(ids, (cap *= 2) * sizeof *ids);
        if (j != NULL && ids != NULL)
            ids[n++] = json_integer_value(json_object_get(j, "label_id"));
        json_decref(j);
        line = nl ? nl + 1 : NULL;
    }
    http_reply_free(&r);
    if (ids == NULL)
        return -1;
    qsort(ids, n, sizeof *ids, cmp_i64);
    int missing = 0;
    for (int i = 0; i < LABEL_STREAM_WRITERS; i++)
        for (int k = 0; k < ls->w[i].nacked; k++)
            missing += bsearch(&ls->w[i].acked[k], ids, n, sizeof *ids, cmp_i64) == NULL;
    free(ids);
    *stored = (int)n;
    return missing;
}

void label_stream_free(label_stream *ls)
{
    for (int i = 0; i < LABEL_STREAM_WRITERS; i++) {
        free(ls->w[i].tasks);
        free(ls->w[i].acked);
    }
    memset(ls, 0, sizeof *ls);
}
