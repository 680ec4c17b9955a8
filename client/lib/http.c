/*
 * http.c — libcurl transport for the client. See http.h.
 *
 * One easy handle per client handle (connection reuse across calls). The
 * response body is collected into a growing buffer with a cap, or streamed
 * into a FILE* for large 2xx answers (export); error bodies of a streamed
 * request are still collected so the caller can parse {"error","message"}.
 */
#include "http.h"

#include "buf.h"
#include "error.h"
#include "wire.h"

#include <curl/curl.h>
#include <limits.h>
#include <pthread.h>
#include <sodium.h>
#include <stdlib.h>
#include <string.h>

struct lpc_http {
    CURL *curl;
    long timeout_ms, connect_timeout_ms;
    char *ca_file;
};

static pthread_once_t global_once = PTHREAD_ONCE_INIT;
static int global_ok;

static void global_init(void)
{
    global_ok = curl_global_init(CURL_GLOBAL_DEFAULT) == CURLE_OK;
}

int lpc_http_new(long timeout_ms, long connect_timeout_ms, const char *ca_file, lpc_http **out)
{
    *out = NULL;
    pthread_once(&global_once, global_init);
    if (!global_ok)
        return LP_EINTERNAL;
    lpc_http *h = calloc(1, sizeof *h);
    if (h == NULL)
        return LP_ENO_MEMORY;
    h->curl = curl_easy_init();
    h->timeout_ms = timeout_ms;
    h->connect_timeout_ms = connect_timeout_ms;
    if (h->curl == NULL || (ca_file && (h->ca_file = strdup(ca_file)) == NULL)) {
        lpc_http_free(h);
        return LP_ENO_MEMORY;
    }
    *out = h;
    return LP_OK;
}

void lpc_http_free(lpc_http *h)
{
    if (h == NULL)
        return;
    if (h->curl)
        curl_easy_cleanup(h->curl);
    free(h->ca_file);
    free(h);
}

/* The error code of a failed transfer: an untrusted certificate (or one
 * for another name) and a failed TLS handshake get names of their own. */
static int transport_error(CURLcode cr)
{
    switch (cr) {
    case CURLE_PEER_FAILED_VERIFICATION:
    case CURLE_SSL_ISSUER_ERROR:
    case CURLE_SSL_PINNEDPUBKEYNOTMATCH:
    case CURLE_SSL_INVALIDCERTSTATUS:
        return LP_ECERTIFICATE_UNTRUSTED;
    case CURLE_SSL_CONNECT_ERROR:
    case CURLE_SSL_CERTPROBLEM:
    case CURLE_SSL_CIPHER:
    case CURLE_SSL_CACERT_BADFILE:
    case CURLE_SSL_ENGINE_NOTFOUND:
    case CURLE_SSL_ENGINE_SETFAILED:
    case CURLE_SSL_ENGINE_INITFAILED:
    case CURLE_USE_SSL_FAILED:
    case CURLE_SSL_SHUTDOWN_FAILED:
    case CURLE_SSL_CRL_BADFILE:
    case CURLE_SSL_CLIENTCERT:
        return LP_ETLS_FAILED;
    default:
        return LP_ENETWORK;
    }
}

struct sink {
    lp_buf body; /* collected answer (or error body of a streamed request) */
    size_t limit;
    int over;
    FILE *file; /* 2xx bodies go here when set */
    CURL *curl;
    int file_failed;
};

static size_t on_data(char *data, size_t size, size_t nmemb, void *user)
{
    struct sink *s = user;
    size_t n = size * nmemb;
    if (s->file) {
        long status = 0;
        curl_easy_getinfo(s->curl, CURLINFO_RESPONSE_CODE, &status);
        if (status >= 200 && status < 300) {
            if (fwrite(data, 1, n, s->file) != n) {
                s->file_failed = 1;
                return 0;
            }
            return n;
        }
    }
    /* Checked before anything is kept: the body never grows past the cap,
     * and the transfer stops at the first byte beyond it. */
    if (n > s->limit - s->body.len) {
        s->over = 1;
        return 0;
    }
    lp_buf_append(&s->body, data, n);
    return s->body.oom ? 0 : n;
}

int lpc_http_do(lpc_http *h, const lpc_http_req *req, long *status, char **body, size_t *len,
                char *msg, size_t msglen)
{
    *status = 0;
    *body = NULL;
    *len = 0;
    CURL *c = h->curl;
    struct sink s = {.limit = req->resp_cap, .file = req->sink, .curl = c};
    struct curl_slist *headers = NULL;
    char auth[LP_TOKEN_MAX + 64];
    char errbuf[CURL_ERROR_SIZE] = "";
    int rc = LP_OK;

    curl_easy_reset(c);
    curl_easy_setopt(c, CURLOPT_URL, req->url);
    curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(c, CURLOPT_TIMEOUT_MS, h->timeout_ms);
    curl_easy_setopt(c, CURLOPT_CONNECTTIMEOUT_MS, h->connect_timeout_ms);
    curl_easy_setopt(c, CURLOPT_PROTOCOLS_STR, "http,https");
    curl_easy_setopt(c, CURLOPT_SSL_VERIFYPEER, 1L);
    curl_easy_setopt(c, CURLOPT_SSL_VERIFYHOST, 2L);
    if (h->ca_file)
        curl_easy_setopt(c, CURLOPT_CAINFO, h->ca_file);
    curl_easy_setopt(c, CURLOPT_ERRORBUFFER, errbuf);
    curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, on_data);
    curl_easy_setopt(c, CURLOPT_WRITEDATA, &s);
    curl_easy_setopt(c, CURLOPT_USERAGENT, "libldpref/" LDPREF_VERSION);
    /* An answer whose Content-Length announces more than the cap is refused
     * before its body is read (a streamed 2xx goes to the sink uncapped). */
    if (req->sink == NULL)
        curl_easy_setopt(c, CURLOPT_MAXFILESIZE_LARGE, (curl_off_t)req->resp_cap);
    headers = curl_slist_append(headers, "Accept: application/json");
    /* No "Expect: 100-continue" round trip for uploads. */
    headers = curl_slist_append(headers, "Expect:");
    if (req->content_type) {
        char ct[128];
        snprintf(ct, sizeof ct, "Content-Type: %s", req->content_type);
        headers = curl_slist_append(headers, ct);
    }
    if (req->bearer) {
        snprintf(auth, sizeof auth, "Authorization: Bearer %s", req->bearer);
        headers = curl_slist_append(headers, auth);
        sodium_memzero(auth, sizeof auth);
    }
    curl_easy_setopt(c, CURLOPT_HTTPHEADER, headers);
    if (strcmp(req->method, "POST") == 0 || strcmp(req->method, "PUT") == 0) {
        curl_easy_setopt(c, CURLOPT_POST, 1L);
        if (strcmp(req->method, "PUT") == 0) /* a PUT with a body, sent like a POST */
            curl_easy_setopt(c, CURLOPT_CUSTOMREQUEST, "PUT");
        if (req->body_file) {
            curl_easy_setopt(c, CURLOPT_READDATA, req->body_file);
            curl_easy_setopt(c, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)req->body_file_len);
        } else {
            curl_easy_setopt(c, CURLOPT_POSTFIELDS, req->body ? req->body : "");
            curl_easy_setopt(c, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)req->body_len);
        }
    } else {
        curl_easy_setopt(c, CURLOPT_HTTPGET, 1L);
    }

    CURLcode cr = curl_easy_perform(c);
    curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, status);
    if (req->retry_after) {
        curl_off_t secs = 0;
        curl_easy_getinfo(c, CURLINFO_RETRY_AFTER, &secs);
        *req->retry_after = secs > 0 && secs < LONG_MAX ? (long)secs : 0;
    }
    if (s.over || cr == CURLE_FILESIZE_EXCEEDED) {
        rc = lp_fail(LP_ERESPONSE_TOO_LARGE, msg, msglen,
                     "the server's answer exceeds %zu bytes, the most this request can need",
                     req->resp_cap);
    } else if (s.file_failed) {
        rc = lp_fail(LP_EIO, msg, msglen, "writing the server's answer failed");
    } else if (cr != CURLE_OK) {
        rc = transport_error(cr);
        rc = lp_fail(rc, msg, msglen, "%s: %s%s", req->url,
                     errbuf[0] ? errbuf : curl_easy_strerror(cr),
                     rc == LP_ECERTIFICATE_UNTRUSTED
                         ? " (the server's certificate is not trusted: give the CA that signed "
                           "it with ca_file, --ca-file or LDPREF_CA_FILE)"
                         : "");
    } else if (*status == 0) {
        rc = lp_fail(LP_ENETWORK, msg, msglen, "%s: no HTTP answer", req->url);
    }
    /* The header list held the bearer token: wipe it before freeing. */
    for (struct curl_slist *p = headers; p; p = p->next)
        sodium_memzero(p->data, strlen(p->data));
    curl_slist_free_all(headers);
    curl_easy_setopt(c, CURLOPT_HTTPHEADER, NULL);
    curl_easy_setopt(c, CURLOPT_ERRORBUFFER, NULL);
    if (rc != LP_OK) {
        lp_buf_free(&s.body);
        return rc;
    }
    if ((*body = lp_buf_take(&s.body, len)) == NULL)
        return LP_ENO_MEMORY;
    return LP_OK;
}
