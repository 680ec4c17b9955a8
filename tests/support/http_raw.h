/*
 * http_raw.h — raw HTTP requests for tests that must send what no well-
 * behaved client would (malformed JSON, oversize bodies, forged fields).
 * Uses libcurl; bodies are sent exactly as given.
 */
#ifndef LP_HTTP_RAW_H
#define LP_HTTP_RAW_H

#include <stddef.h>

typedef struct http_reply {
    long status; /* HTTP status, 0 if the request failed */
    char *body;  /* NUL-terminated, malloc'd; free with http_reply_free */
    size_t len;
    char request_id[80];  /* the reply's X-Request-Id header, "" if none */
    char retry_after[32]; /* its Retry-After header, "" if none */
    char set_cookie[512]; /* its Set-Cookie header, "" if none */
    int curl_code;        /* libcurl's result (CURLE_OK = 0) */
} http_reply;

/* What http_raw_ex sends besides the method, URL and body; every field may
 * be NULL. */
typedef struct http_raw_opts {
    const char *bearer;
    const char *request_id; /* an X-Request-Id header */
    const char *source;     /* the client's own address, e.g. "127.0.0.2" (any of 127/8) */
    const char *ca_file;    /* https: the CA to trust (NULL: the system's) */
    const char *headers[4]; /* more "Name: value" lines */
} http_raw_opts;

/* method "GET"/"POST"; body may be NULL; bearer may be NULL. One call is
 * one HTTP request (no retries, no redirects). */
int http_raw(const char *method, const char *url, const char *body, size_t body_len,
             const char *bearer, http_reply *out);
/* The same, sending "X-Request-Id: request_id" (NULL: no such header). */
int http_raw_id(const char *method, const char *url, const char *body, size_t body_len,
                const char *bearer, const char *request_id, http_reply *out);
/* The general form of the two above. */
int http_raw_ex(const char *method, const char *url, const char *body, size_t body_len,
                const http_raw_opts *opts, http_reply *out);
void http_reply_free(http_reply *r);
/* The "error" name of a JSON error body, into out ("" if none). */
void http_error_name(const http_reply *r, char *out, size_t outlen);

#endif
