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

/* Keeps the X-Request-Id header of the reply. */
static size_t header_line(char *data, size_t size, size_t n, void *user)
{
    http_reply *r = user;
    size_t len = size * n;
    static const char NAME[] = "x-request-id:";
    if (len > sizeof NAME - 1 && strncasecmp(data, NAME, sizeof NAME - 1) == 0) {
        size_t i = sizeof NAME - 1, end = len;
        while (i < end && data[i] == ' ')
            i++;
        while (end > i && (data[end - 1] == '\r' || data[end - 1] == '\n' || data[end - 1] == ' '))
            end--;
        snprintf(r->request_id, sizeof r->request_id, "%.*s", (int)(end - i), data + i);
    }
    return len;
}

int http_raw(const char *method, const char *url, const char *body, size_t body_len,
             const char *bearer, http_reply *out)
{
    return http_raw_id(method, url, body, body_len, bearer, NULL, out);
}

int http_raw_id(const char *method, const char *url, const char *body, size_t body_len,
                const char *bearer, const char *request_id, http_reply *out)
{
    memset(out, 0, sizeof *out);
    out->body = calloc(1, 1);
    CURL *curl = curl_easy_init();
    if (curl == NULL)
        return -1;
    struct curl_slist *headers = curl_slist_append(NULL, "Content-Type: application/json");
    headers = curl_slist_append(headers, "Expect:");
    char auth[512];
    if (bearer) {
        snprintf(auth, sizeof auth, "Authorization: Bearer %s", bearer);
        headers = curl_slist_append(headers, auth);
    }
    char rid[256];
    if (request_id) {
        snprintf(rid, sizeof rid, "X-Request-Id: %s", request_id);
        headers = curl_slist_append(headers, rid);
    }
    curl_easy_setopt(curl, CURLOPT_URL, url);
    curl_easy_setopt(curl, CURLOPT_CUSTOMREQUEST, method);
    curl_easy_setopt(curl, CURLOPT_HTTPHEADER, headers);
    curl_easy_setopt(curl, CURLOPT_WRITEFUNCTION, collect);
    curl_easy_setopt(curl, CURLOPT_WRITEDATA, out);
    curl_easy_setopt(curl, CURLOPT_HEADERFUNCTION, header_line);
    curl_easy_setopt(curl, CURLOPT_HEADERDATA, out);
    curl_easy_setopt(curl, CURLOPT_TIMEOUT, 60L);
    if (body) {
        curl_easy_setopt(curl, CURLOPT_POSTFIELDS, body);
        curl_easy_setopt(curl, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)body_len);
    }
    CURLcode rc = curl_easy_perform(curl);
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
