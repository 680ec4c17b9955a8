/* hostile_server.c — a hostile ldpref server for client tests. See hostile_server.h. */
#include "hostile_server.h"

#include <arpa/inet.h>
#include <jansson.h>
#include <microhttpd.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define LABELS_MAX 4096

struct hostile_server {
    struct MHD_Daemon *d;
    int port;
    pthread_mutex_t mu;
    hostile_mode mode;
    const hostile_task *tasks;
    size_t ntasks, next_task;
    int label_delay_ms;
    int64_t label_ids[LABELS_MAX];
    int label_z[LABELS_MAX];
    size_t nlabels;
    atomic_int stopping;
};

/* One task of the huge list: every one the same size, so the length is known. */
static const char HUGE_HEAD[] = "{\"tasks\":[";
static const char HUGE_TASK[] =
    "{\"task_id\":1,\"campaign\":\"default\",\"prompt\":\"p\",\"a\":\"x\","
    "\"b\":\"y\",\"epsilon\":1,\"epsilon_min\":0.01,\"epsilon_max\":10},";
#define HUGE_TAIL                                                                                  \
    "{\"task_id\":2,\"campaign\":\"default\",\"prompt\":\"p\",\"a\":\"x\",\"b\":\"y\","            \
    "\"epsilon\":1,\"epsilon_min\":0.01,\"epsilon_max\":10}]}"

size_t hostile_huge_size(void)
{
    size_t body = HOSTILE_HUGE_BYTES - (sizeof HUGE_HEAD - 1) - (sizeof HUGE_TAIL - 1);
    return (sizeof HUGE_HEAD - 1) + body / (sizeof HUGE_TASK - 1) * (sizeof HUGE_TASK - 1) +
           (sizeof HUGE_TAIL - 1);
}

/* The byte at position pos of the huge answer. */
static char huge_byte(uint64_t pos, uint64_t total)
{
    const size_t head = sizeof HUGE_HEAD - 1, task = sizeof HUGE_TASK - 1,
                 tail = sizeof HUGE_TAIL - 1;
    if (pos < head)
        return HUGE_HEAD[pos];
    if (pos >= total - tail)
        return HUGE_TAIL[pos - (total - tail)];
    return HUGE_TASK[(pos - head) % task];
}

struct stream {
    hostile_server *h;
    uint64_t total; /* 0: no end */
    int trickle;
};

static ssize_t stream_read(void *cls, uint64_t pos, char *buf, size_t max)
{
    struct stream *s = cls;
    if (atomic_load(&s->h->stopping))
        return MHD_CONTENT_READER_END_WITH_ERROR;
    if (s->trickle) {
        if (pos > 0) {
            struct timespec ts = {0, 100 * 1000 * 1000};
            nanosleep(&ts, NULL);
        }
        if (atomic_load(&s->h->stopping))
            return MHD_CONTENT_READER_END_WITH_ERROR;
        buf[0] = pos < sizeof HUGE_HEAD - 1 ? HUGE_HEAD[pos] : ' ';
        return 1;
    }
    if (pos >= s->total)
        return MHD_CONTENT_READER_END_OF_STREAM;
    size_t n = 0;
    while (n < max && pos + n < s->total) {
        buf[n] = huge_byte(pos + n, s->total);
        n++;
    }
    return (ssize_t)n;
}

static enum MHD_Result send_text(struct MHD_Connection *c, unsigned status, char *text)
{
    struct MHD_Response *r =
        MHD_create_response_from_buffer(strlen(text), text, MHD_RESPMEM_MUST_FREE);
    MHD_add_response_header(r, "Content-Type", "application/json");
    enum MHD_Result ret = MHD_queue_response(c, status, r);
    MHD_destroy_response(r);
    return ret;
}

static enum MHD_Result send_error(struct MHD_Connection *c, unsigned status, const char *name)
{
    char *text = NULL;
    if (asprintf(&text, "{\"error\":\"%s\",\"message\":\"%s\"}", name, name) < 0)
        return MHD_NO;
    return send_text(c, status, text);
}

static enum MHD_Result send_stream(hostile_server *h, struct MHD_Connection *c, uint64_t total,
                                   int with_length, int trickle)
{
    struct stream *s = calloc(1, sizeof *s);
    if (s == NULL)
        return MHD_NO;
    s->h = h;
    s->total = total;
    s->trickle = trickle;
    struct MHD_Response *r = MHD_create_response_from_callback(
        with_length ? total : MHD_SIZE_UNKNOWN, 64 * 1024, stream_read, s, free);
    MHD_add_response_header(r, "Content-Type", "application/json");
    enum MHD_Result ret = MHD_queue_response(c, MHD_HTTP_OK, r);
    MHD_destroy_response(r);
    return ret;
}

/* A text made by repeating unit n times between head and tail. */
static char *repeat(const char *head, const char *unit, size_t n, const char *tail)
{
    size_t hl = strlen(head), ul = strlen(unit), tl = strlen(tail);
    char *t = malloc(hl + ul * n + tl + 1);
    if (t == NULL)
        return NULL;
    memcpy(t, head, hl);
    for (size_t i = 0; i < n; i++)
        memcpy(t + hl + i * ul, unit, ul);
    memcpy(t + hl + n * ul, tail, tl + 1);
    return t;
}

static enum MHD_Result next_tasks(hostile_server *h, struct MHD_Connection *c)
{
    pthread_mutex_lock(&h->mu);
    hostile_mode mode = h->mode;
    const hostile_task *t = NULL;
    if (mode == HOSTILE_TASKS && h->next_task < h->ntasks)
        t = &h->tasks[h->next_task++];
    pthread_mutex_unlock(&h->mu);
    switch (mode) {
    case HOSTILE_HUGE_LENGTH:
        return send_stream(h, c, hostile_huge_size(), 1, 0);
    case HOSTILE_HUGE_CHUNKED:
        return send_stream(h, c, hostile_huge_size(), 0, 0);
    case HOSTILE_TRICKLE:
        return send_stream(h, c, 0, 0, 1);
    case HOSTILE_DEEP: {
        char *open = repeat("{\"tasks\":", "[", 100000, "");
        char *text = open ? repeat(open, "]", 100000, "}") : NULL;
        free(open);
        return text ? send_text(c, MHD_HTTP_OK, text) : MHD_NO;
    }
    case HOSTILE_MANY_VALUES: {
        char *text = repeat("{\"tasks\":[", "0,", 400000, "0]}");
        return text ? send_text(c, MHD_HTTP_OK, text) : MHD_NO;
    }
    case HOSTILE_TASKS:
        break;
    }
    if (t == NULL)
        return send_error(c, MHD_HTTP_NOT_FOUND, "no_task_available");
    json_t *obj =
        json_pack("{s:[{s:I, s:s, s:s, s:s, s:s, s:f, s:f, s:f, s:[]}]}", "tasks", "task_id",
                  (json_int_t)t->task_id, "campaign", "default", "prompt", t->prompt, "a", t->a,
                  "b", t->b, "epsilon", 1.0, "epsilon_min", 0.01, "epsilon_max", 10.0, "context");
    char *text = obj ? json_dumps(obj, JSON_COMPACT) : NULL;
    json_decref(obj);
    return text ? send_text(c, MHD_HTTP_OK, text) : MHD_NO;
}

static enum MHD_Result label(hostile_server *h, struct MHD_Connection *c, const char *body,
                             size_t len)
{
    json_t *obj = json_loadb(body, len, 0, NULL);
    json_t *id = json_object_get(obj, "task_id"), *z = json_object_get(obj, "z"),
           *eps = json_object_get(obj, "epsilon");
    if (!json_is_integer(id) || !json_is_integer(z)) {
        json_decref(obj);
        return send_error(c, MHD_HTTP_BAD_REQUEST, "bad_request");
    }
    pthread_mutex_lock(&h->mu);
    int delay = h->label_delay_ms;
    size_t k = h->nlabels;
    if (k < LABELS_MAX) {
        h->label_ids[k] = json_integer_value(id);
        h->label_z[k] = (int)json_integer_value(z);
        h->nlabels++;
    }
    pthread_mutex_unlock(&h->mu);
    for (int waited = 0; waited < delay && !atomic_load(&h->stopping); waited += 10) {
        struct timespec ts = {0, 10 * 1000 * 1000};
        nanosleep(&ts, NULL);
    }
    json_t *receipt = json_pack("{s:I, s:O, s:O, s:O, s:I}", "label_id", (json_int_t)(k + 1),
                                "task_id", id, "z", z, "epsilon", eps ? eps : json_null(),
                                "received_at", (json_int_t)time(NULL) * 1000);
    char *text = receipt ? json_dumps(receipt, JSON_COMPACT) : NULL;
    json_decref(receipt);
    json_decref(obj);
    return text ? send_text(c, MHD_HTTP_CREATED, text) : MHD_NO;
}

struct upload {
    char *data;
    size_t len;
};

static enum MHD_Result handle(void *cls, struct MHD_Connection *c, const char *url,
                              const char *method, const char *version, const char *upload_data,
                              size_t *upload_data_size, void **con_cls)
{
    hostile_server *h = cls;
    (void)version;
    struct upload *u = *con_cls;
    if (u == NULL) {
        if ((u = calloc(1, sizeof *u)) == NULL)
            return MHD_NO;
        *con_cls = u;
        return MHD_YES;
    }
    if (*upload_data_size > 0) {
        if (u->len + *upload_data_size > (1u << 20))
            return MHD_NO;
        char *grown = realloc(u->data, u->len + *upload_data_size + 1);
        if (grown == NULL)
            return MHD_NO;
        memcpy(grown + u->len, upload_data, *upload_data_size);
        u->data = grown;
        u->len += *upload_data_size;
        *upload_data_size = 0;
        return MHD_YES;
    }
    if (strcmp(method, "POST") == 0 && strcmp(url, "/v1/tasks/next") == 0)
        return next_tasks(h, c);
    if (strcmp(method, "POST") == 0 && strcmp(url, "/v1/labels") == 0)
        return label(h, c, u->data ? u->data : "", u->len);
    if (strcmp(method, "GET") == 0 && strcmp(url, "/v1/export") == 0)
        return send_stream(h, c, hostile_huge_size(), 0, 0); /* 200 MB, chunked */
    return send_error(c, MHD_HTTP_NOT_FOUND, "not_found");
}

static void completed(void *cls, struct MHD_Connection *c, void **con_cls,
                      enum MHD_RequestTerminationCode toe)
{
    (void)cls;
    (void)c;
    (void)toe;
    struct upload *u = *con_cls;
    if (u != NULL) {
        free(u->data);
        free(u);
    }
    *con_cls = NULL;
}

int hostile_start(hostile_mode mode, hostile_server **out)
{
    *out = NULL;
    hostile_server *h = calloc(1, sizeof *h);
    if (h == NULL)
        return -1;
    pthread_mutex_init(&h->mu, NULL);
    h->mode = mode;
    struct sockaddr_in addr = {.sin_family = AF_INET, .sin_port = 0};
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    h->d = MHD_start_daemon(MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_THREAD_PER_CONNECTION, 0,
                            NULL, NULL, handle, h, MHD_OPTION_SOCK_ADDR, &addr,
                            MHD_OPTION_NOTIFY_COMPLETED, completed, h, MHD_OPTION_END);
    const union MHD_DaemonInfo *info =
        h->d ? MHD_get_daemon_info(h->d, MHD_DAEMON_INFO_BIND_PORT) : NULL;
    if (info == NULL) {
        hostile_stop(h);
        return -1;
    }
    h->port = info->port;
    *out = h;
    return 0;
}

int hostile_port(const hostile_server *h)
{
    return h->port;
}

void hostile_set_mode(hostile_server *h, hostile_mode mode)
{
    pthread_mutex_lock(&h->mu);
    h->mode = mode;
    pthread_mutex_unlock(&h->mu);
}

void hostile_set_tasks(hostile_server *h, const hostile_task *tasks, size_t n)
{
    pthread_mutex_lock(&h->mu);
    h->tasks = tasks;
    h->ntasks = n;
    h->next_task = 0;
    pthread_mutex_unlock(&h->mu);
}

void hostile_set_label_delay_ms(hostile_server *h, int ms)
{
    pthread_mutex_lock(&h->mu);
    h->label_delay_ms = ms;
    pthread_mutex_unlock(&h->mu);
}

size_t hostile_labels(hostile_server *h, int64_t *task_ids, int *z, size_t cap)
{
    pthread_mutex_lock(&h->mu);
    size_t n = h->nlabels;
    for (size_t i = 0; i < n && i < cap; i++) {
        task_ids[i] = h->label_ids[i];
        z[i] = h->label_z[i];
    }
    pthread_mutex_unlock(&h->mu);
    return n;
}

void hostile_stop(hostile_server *h)
{
    if (h == NULL)
        return;
    atomic_store(&h->stopping, 1);
    if (h->d)
        MHD_stop_daemon(h->d);
    pthread_mutex_destroy(&h->mu);
    free(h);
}
