/*
 * http.h — the client's one HTTP exchange, over libcurl. Knows nothing of
 * JSON or of ldpref's messages: it sends bytes and returns the status and
 * body. TLS, proxies and timeouts come from libcurl; https URLs verify the
 * peer (CURLOPT_CAINFO when a CA file is given).
 */
#ifndef LPC_HTTP_H
#define LPC_HTTP_H

#include <stddef.h>
#include <stdio.h>

typedef struct lpc_http lpc_http;

/* A new transport; freed with lpc_http_free(). Returns LP_OK or LP_ENO_MEMORY. */
int lpc_http_new(long timeout_ms, long connect_timeout_ms, const char *ca_file, lpc_http **out);
void lpc_http_free(lpc_http *h);

typedef struct lpc_http_req {
    const char *method;       /* "GET", "POST" or "PUT" */
    const char *url;          /* full URL */
    const char *content_type; /* for a body; NULL for none */
    const char *body;         /* borrowed; may be NULL */
    size_t body_len;
    FILE *body_file; /* alternative to body: streamed upload (borrowed) */
    long body_file_len;
    const char *bearer; /* operator token or NULL (the header is wiped after use) */
    FILE *sink;         /* when set, a 2xx body is written here instead of returned */
    size_t resp_cap;    /* largest body accepted in memory (also an error body) */
    long *retry_after;  /* when set: the answer's Retry-After in seconds (0: none) */
} lpc_http_req;

/*
 * Performs req. *status gets the HTTP status; *body (NUL-terminated,
 * malloc'ed, caller frees) and *len the body, unless a 2xx answer went to
 * req->sink. Returns LP_OK whenever an HTTP answer arrived (whatever its
 * status), LP_ENETWORK when none did (LP_ECERTIFICATE_UNTRUSTED when the
 * server's certificate is not trusted, LP_ETLS_FAILED when the TLS
 * handshake failed), LP_ERESPONSE_TOO_LARGE when the answer exceeded
 * resp_cap (announced by Content-Length, or while receiving: no more than
 * resp_cap bytes are ever held), LP_EIO when the sink failed. Details in msg.
 */
int lpc_http_do(lpc_http *h, const lpc_http_req *req, long *status, char **body, size_t *len,
                char *msg, size_t msglen);

#endif
