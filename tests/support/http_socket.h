/*
 * http_socket.h — one whole request over a plain socket (connection and
 * sending from http_wire.h), the answer read raw until the server closes,
 * for tests that must choose every header themselves (a foreign Host, a
 * forged Origin): libcurl (http_raw.h) writes Host on its own.
 */
#ifndef LP_HTTP_SOCKET_H
#define LP_HTTP_SOCKET_H

#define HTTP_SOCKET_REPLY_MAX 65536

typedef struct socket_reply {
    int status;                       /* 0 when no HTTP answer came */
    char text[HTTP_SOCKET_REPLY_MAX]; /* status line, headers and body, NUL-terminated */
} socket_reply;

/* Sends request (a whole request text, with "Connection: close") to
 * 127.0.0.1:port and reads the answer until the server closes (at most
 * HTTP_SOCKET_REPLY_MAX - 1 bytes). Returns 0, or -1 with out->status 0. */
int http_socket(int port, const char *request, socket_reply *out);

/* The body of a reply (after the blank line), or "" when there is none. */
const char *socket_reply_body(const socket_reply *r);

/* 1 if the reply has the header line "name: value" exactly (name without
 * regard to case). */
int socket_reply_has_header(const socket_reply *r, const char *name, const char *value);

#endif
