/* http_raw.c — see http_raw.h. */
#include "http_raw.h"

#include <curl/curl.h>
#include <jansson.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

static size_t collect(char *data, size_t size, size_t n, void *user)
{
    http_reply *r = user;
    size_t add = size * n;
    char *grown = realloc(r->body, r->len + add + 1);
    if (grown == NULL)
        return 0;
    r->body = grown;
    memcpy(r->body + r->len, data, add);
    r->len += add;
    r->body[r->len] = 0;
    return add;
}

/* The value of header line data (len bytes) into out when its name is
 * name (lower case, with the colon). */
static void keep_header(const char *data, size_t len, const char *name, char *out, size_t outlen)
{
    size_t nlen = strlen(name);
    if (len <= nlen || strncasecmp(data, name, nlen) != 0)
        return;
    size_t i = nlen, end = len;
    while (i < end && data[i] == ' ')
        i++;
    while (end > i && (data[end - 1] == '\r' || data[end - 1] == '\n' || data[end - 1] == ' '))
        end--;
    snprintf(out, outlen, "%.*s", (int)(end - i), data + i);
}

/* Keeps the X-Request-Id, Retry-After and Set-Cookie headers of the reply. */
static size_t header_line(char *data, size_t size, size_t n, void *user)
{
    http_reply *r = user;
    size_t len = size * n;
    keep_header(data, len, "x-request-id:", r->request_id, sizeof r->request_id);
    keep_header(data, len, "retry-after:", r->retry_after, sizeof r->retry_after);
    keep_header(data, len, "set-cookie:", r->set_cookie, sizeof r->set_cookie);
    return len;
}

int http_raw(const char *method, const char *url, const char *body, size_t body_len,
             const char *bearer, http_reply *out)
{
    http_raw_opts o = {.bearer = bearer};
    return http_raw_ex(method, url, body, body_len, &o, out);
}

int http_raw_id(const char *method, const char *url, const char *body, size_t body_len,
                const char *bearer, const char *request_id, http_reply *out)
{
    http_raw_opts o = {.bearer = bearer, .request_id = request_id};
    return http_raw_ex(method, url, body, body_len, &o, out);
}

int http_raw_ex(const char *method, const char *url, const char *body, size_t body_len,
                const http_raw_opts *o, http_reply *out)
{
    memset(out, 0, sizeof *out);
    out->body = calloc(1, 1);
    CURL *curl = curl_easy_init();
    if (curl == NULL)
        return -1;
    struct curl_slist *headers = curl_slist_append(NULL, "Content-Type: application/json");
    headers = curl_slist_append(headers, "Expect:");
    char auth[512];
    if (o->bearer) {
        snprintf(auth, sizeof auth, "Authorization: Bearer %s", o->bearer);
        headers = curl_slist_append(headers, auth);
    }
    char rid[256];
    if (o->request_id) {
        snprintf(rid, sizeof rid, "X-Request-Id: %s", o->request_id);
        headers = curl_slist_append(headers, rid);
    }
    for (size_t i = 0; i < sizeof o->headers / sizeof o->headers[0] && o->headers[i]; i++)
        headers = curl_slist_append(headers, o->headers[i]);
    curl_easy_setopt(curl, CURLOPT_URL, url);
    curl_easy_setopt(curl, CURLOPT_CUSTOMREQUEST, method);
    curl_easy_setopt(curl, CURLOPT_HTTPHEADER, headers);
    curl_easy_setopt(curl, CURLOPT_WRITEFUNCTION, collect);
    curl_easy_setopt(curl, CURLOPT_WRITEDATA, out);
    curl_easy_setopt(curl, CURLOPT_HEADERFUNCTION, header_line);
    curl_easy_setopt(curl, CURLOPT_HEADERDATA, out);
    curl_easy_setopt(curl, CURLOPT_TIMEOUT, 60L);
    if (o->source)
        curl_easy_setopt(curl, CURLOPT_INTERFACE, o->source);
    if (o->ca_file)
        curl_easy_setopt(curl, CURLOPT_CAINFO, o->ca_file);
    if (body) {
        curl_easy_setopt(curl, CURLOPT_POSTFIELDS, body);
        curl_easy_setopt(curl, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)body_len);
    }
    CURLcode rc = curl_easy_perform(curl);
    out->curl_code = (int)rc;
    if (rc == CURLE_OK)
        curl_easy_getinfo(curl, CURLINFO_RESPONSE_CODE, &out->status);
    curl_slist_free_all(headers);
    curl_easy_cleanup(curl);
    return rc == CURLE_OK ? 0 : -1;
}

void http_reply_free(http_reply *r)
{
    free(r->body);
    r->body = NULL;
}

void http_error_name(const http_reply *r, char *out, size_t outlen)
{
    out[0] = 0;
    json_t *j = r->body ? json_loads(r->body, 0, NULL) : NULL;
    const char *name = j ? json_string_value(json_object_get(j, "error")) : NULL;
    if (name)
        snprintf(out, outlen, "%s", name);
    json_decref(j);
}
