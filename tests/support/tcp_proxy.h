/*
 * tcp_proxy.h — a loopback TCP relay that records every byte a client sends,
 * so tests can inspect exactly what leaves the annotator's device.
 */
#ifndef LP_TCP_PROXY_H
#define LP_TCP_PROXY_H

#include <jansson.h>
#include <pthread.h>
#include <stddef.h>

typedef struct tcp_proxy {
    int listen_fd;
    int port;        /* the proxy's own port on 127.0.0.1 */
    int target_port; /* where traffic is relayed */
    pthread_t thread;
    pthread_mutex_t lock;
    char *captured; /* client-to-server bytes, NUL-terminated */
    size_t captured_len;
    int stop;
} tcp_proxy;

/* Starts relaying 127.0.0.1:<ephemeral> -> 127.0.0.1:target_port. */
int tcp_proxy_start(tcp_proxy *p, int target_port);
/* The JSON bodies of the captured requests whose request line starts with
 * request (e.g. "POST /v1/labels "), in order: a new array (the bodies that
 * are not JSON left out). */
json_t *tcp_proxy_bodies(tcp_proxy *p, const char *request);
/* Stops, joins, frees the capture. */
void tcp_proxy_stop(tcp_proxy *p);

#endif
