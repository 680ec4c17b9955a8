/* raw_annotator.c — see raw_annotator.h. */
#include "raw_annotator.h"

#include "clock.h"
#include "wire.h"

#include <sodium.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

long raw_post_json(const char *url, const char *path, json_t *body, const char *bearer,
                   http_reply *r)
{
    char full[512];
    snprintf(full, sizeof full, "%s%s", url, path);
    char *text = json_dumps(body, JSON_COMPACT);
    http_raw("POST", full, text, strlen(text), bearer, r);
    free(text);
    return r->status;
}

long raw_get(const char *url, const char *path, const char *bearer, http_reply *r)
{
    char full[512];
    snprintf(full, sizeof full, "%s%s", url, path);
    http_raw("GET", full, NULL, 0, bearer, r);
    return r->status;
}

long raw_enroll(raw_annotator *a, const char *url, const char *token)
{
    a->url = url;
    crypto_sign_keypair(a->pk, a->sk);
    lp_enroll_msg m = {0};
    memcpy(m.key, a->pk, LP_KEY_BYTES);
    snprintf(m.token, sizeof m.token, "%s", token);
    lp_sign_enroll(&m, a->sk);
    json_t *body = lp_wire_enroll_encode(&m);
    http_reply r;
    long status = raw_post_json(url, "/v1/annotators", body, NULL, &r);
    json_decref(body);
    http_reply_free(&r);
    return status;
}

long raw_next(raw_annotator *a, int count, json_t **tasks)
{
    lp_next_msg m = {0};
    memcpy(m.key, a->pk, LP_KEY_BYTES);
    m.count = (uint32_t)count;
    m.timestamp_ms = lp_now_ms();
    lp_sign_next(&m, a->sk);
    json_t *body = lp_wire_next_encode(&m);
    http_reply r;
    long status = raw_post_json(a->url, "/v1/tasks/next", body, NULL, &r);
    json_decref(body);
    *tasks = NULL;
    if (status == 200) {
        json_t *j = json_loads(r.body, 0, NULL);
        *tasks = json_incref(json_object_get(j, "tasks"));
        json_decref(j);
    }
    http_reply_free(&r);
    return status;
}

lp_label_msg raw_label(const raw_annotator *a, int64_t task_id, int z, double eps)
{
    lp_label_msg m = {0};
    memcpy(m.key, a->pk, LP_KEY_BYTES);
    m.task_id = task_id;
    m.z = z;
    m.epsilon = eps;
    randombytes_buf(m.nonce, sizeof m.nonce);
    m.timestamp_ms = lp_now_ms();
    lp_sign_label(&m, a->sk);
    return m;
}

void raw_resign(const raw_annotator *a, lp_label_msg *m)
{
    lp_sign_label(m, a->sk);
}

long raw_post_label(const char *url, const lp_label_msg *m, http_reply *r)
{
    json_t *body = lp_wire_label_encode(m);
    long status = raw_post_json(url, "/v1/labels", body, NULL, r);
    json_decref(body);
    return status;
}
