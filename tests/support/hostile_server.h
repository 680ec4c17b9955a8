/*
 * hostile_server.h — a small real HTTP server (libmicrohttpd, 127.0.0.1, a
 * thread per connection) that plays a hostile ldpref server for tests of
 * the client: its POST /v1/tasks/next answers with what the mode says; POST
 * /v1/labels records each label's task id and z and answers with a receipt
 * (after a delay, if set); GET /v1/export streams 200 MB (chunked, whatever
 * the token); anything else is 404.
 */
#ifndef LP_HOSTILE_SERVER_H
#define LP_HOSTILE_SERVER_H

#include <stddef.h>
#include <stdint.h>

typedef enum hostile_mode {
    HOSTILE_HUGE_LENGTH,  /* a 200 MB list of tasks with its Content-Length */
    HOSTILE_HUGE_CHUNKED, /* the same without a length (chunked) */
    HOSTILE_TRICKLE,      /* the start of an answer, then one byte every 100 ms, forever */
    HOSTILE_DEEP,         /* {"tasks": followed by 100,000 nested lists (200 KB) */
    HOSTILE_MANY_VALUES,  /* {"tasks": [0, 0, ...]}: 400,000 values in 800 KB */
    HOSTILE_TASKS,        /* the next task of the list given to hostile_set_tasks */
} hostile_mode;

#define HOSTILE_HUGE_BYTES (200u << 20)
/* The exact length of the huge answers (whole tasks: a little under 200 MB). */
size_t hostile_huge_size(void);

/* A task the server hands out (strings borrowed until hostile_stop). */
typedef struct hostile_task {
    int64_t task_id;
    const char *prompt, *a, *b;
} hostile_task;

typedef struct hostile_server hostile_server;

/* Starts on a free port of 127.0.0.1. Returns 0 or -1. */
int hostile_start(hostile_mode mode, hostile_server **out);
int hostile_port(const hostile_server *h);
void hostile_set_mode(hostile_server *h, hostile_mode mode);
/* The tasks HOSTILE_TASKS serves, one per request, in order (then none:
 * 404 no_task_available). */
void hostile_set_tasks(hostile_server *h, const hostile_task *tasks, size_t n);
/* Milliseconds POST /v1/labels waits before it answers. */
void hostile_set_label_delay_ms(hostile_server *h, int ms);
/* Labels received so far (task id and z, in arrival order): up to cap into
 * the arrays; returns how many were received. */
size_t hostile_labels(hostile_server *h, int64_t *task_ids, int *z, size_t cap);
/* Stops (ends trickles at once) and frees. Accepts NULL. */
void hostile_stop(hostile_server *h);

#endif
