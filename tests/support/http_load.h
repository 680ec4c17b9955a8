/*
 * http_load.h — a lean HTTP/1.1 load generator for benchmarks: one thread,
 * non-blocking keep-alive sockets to 127.0.0.1 driven by epoll, each with
 * one request in flight; requests are whole prepared texts (request line,
 * headers, body), so the generator only copies bytes and finds the end of
 * each answer (Content-Length or chunked). Its own cost per request is a
 * few system calls, so on a machine shared with the server it measures
 * the server rather than the client (bench-score measures its ceiling).
 */
#ifndef LP_HTTP_LOAD_H
#define LP_HTTP_LOAD_H

#include <stddef.h>

typedef struct http_load_result {
    double wall_s;      /* first send to last answer */
    double *latency_s;  /* per request, in request order (malloc'd, n of them) */
    size_t n, failures; /* failures: no answer, or a status other than 2xx */
    size_t bytes_in;    /* answer bytes read (heads and bodies) */
} http_load_result;

/* Sends requests[0..n) (whole texts of lens[i] bytes) over conns keep-alive
 * connections to 127.0.0.1:port, each connection taking the next request
 * when its answer is complete. Returns 0, or -1 when a connection could not
 * be made (out is filled as far as it got either way; free with
 * http_load_result_free). */
int http_load_run(int port, int conns, char *const *requests, const size_t *lens, size_t n,
                  http_load_result *out);

/* p in [0, 1] of the latencies (sorts a copy). */
double http_load_quantile(const http_load_result *r, double p);

void http_load_result_free(http_load_result *r);

/* A POST request text with a JSON body and a bearer token (NULL: none),
 * malloc'd, its length into *len. */
char *http_load_post(const char *path, const char *token, const char *content_type,
                     const char *body, size_t *len);

#endif
