/*
 * http_wire.h — HTTP/1.1 over a plain loopback socket, byte for byte, for
 * tests of the HTTP layer itself: keep-alive and pipelining, requests no
 * client library would send (bad request lines, lying Content-Length,
 * bodies that never come), chunked uploads and chunked answers.
 */
#ifndef LP_HTTP_WIRE_H
#define LP_HTTP_WIRE_H

#include <stddef.h>

typedef struct wire_reply {
    int status;      /* from the status line; 0 if there was none */
    char head[8192]; /* status line and headers, NUL-terminated */
    int chunked;     /* the body came with Transfer-Encoding: chunked */
    char *body;      /* de-chunked body, NUL-terminated (malloc'd) */
    size_t len;
} wire_reply;

/* A socket connected to 127.0.0.1:port, with a receive timeout of
 * timeout_ms (so a test never hangs). Returns the descriptor or -1. */
int wire_connect(int port, int timeout_ms);

/* The same from the local address src (e.g. "127.0.0.2": Linux loopback
 * answers the whole of 127/8), for tests that play many clients. */
int wire_connect_from(const char *src, int port, int timeout_ms);

/* Sends all len bytes. Returns 0, or -1 (peer gone). */
int wire_send(int fd, const void *data, size_t len);
/* wire_send of a NUL-terminated string. */
int wire_send_str(int fd, const char *text);

/* Reads one response: the head, then a body by Content-Length, chunked
 * encoding, or up to the close (no body for HEAD, 204 and 304). Returns 0,
 * or -1 (timeout, close before a full response, malformed). out is filled
 * as far as it got either way; free with wire_reply_free. */
int wire_read_reply(int fd, const char *method, wire_reply *out);

/* The value of header name (case-insensitive) into out; 1 if present. */
int wire_header(const wire_reply *r, const char *name, char *out, size_t outlen);

/* 1 if the peer has closed the connection (read returns 0 within
 * timeout_ms), 0 otherwise (data or still open). */
int wire_closed(int fd, int timeout_ms);

void wire_reply_free(wire_reply *r);

#endif
