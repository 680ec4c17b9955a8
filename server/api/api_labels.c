/*
 * api_labels.c — annotator endpoints: label submission (single and batch),
 * next tasks, enrollment.
 *
 * Label ingest splits the checks of docs/protocol.md in two: the stateless
 * ones (decoding, key lookup, Ed25519 verification — the expensive part) run
 * here, in the request thread, in parallel across requests; the stateful ones
 * (existing label, timestamp, task, nonce, epsilon range, budget) run in the
 * store's writer inside the commit transaction. The split keeps the order:
 * everything done here precedes everything done there.
 */
#include "annotators.h"
#include "api_internal.h"

#include "auth.h"
#include "campaigns.h"
#include "clock.h"
#include "error.h"
#include "log.h"
#include "labels.h"
#include "tasks.h"
#include "wire.h"

#include <sodium.h>
#include <stdlib.h>
#include <string.h>

struct lp_pending {
    lp_api *api;
    int batch;
    size_t n;                 /* items in the request */
    lp_label_item *items;     /* n; rc set here for items rejected before the store */
    char (*msgs)[LP_MSG_MAX]; /* n; messages of early rejections */
    lp_label_item *sub;       /* the items handed to the store, contiguous */
    size_t *sub_idx;          /* sub[k] is items[sub_idx[k]] */
    size_t n_sub;
    int submit_rc;
    lp_async async;
};

void lp_api_labels_pending_free(lp_pending *p)
{
    if (p == NULL)
        return;
    free(p->items);
    free(p->msgs);
    free(p->sub);
    free(p->sub_idx);
    free(p);
}

/* Key and signature: the stateless checks after decoding, in protocol
 * order, on it->msg. Fills it (msg on error) and returns LP_OK or the
 * rejection. */
static int check_signed(lp_api *api, lp_label_item *it, char *msg, size_t msglen)
{
    int rc;
    lp_annotator a;
    rc = lp_store_annotator_by_key(api->store, it->msg.key, &a);
    if (rc != LP_OK)
        return lp_fail(rc, msg, msglen, "%s", lp_error_message(rc));
    if (a.revoked)
        return lp_fail(LP_EREVOKED_KEY, msg, msglen, "%s", lp_error_message(LP_EREVOKED_KEY));
    if (lp_verify_label(&it->msg) != LP_OK)
        return lp_fail(LP_EBAD_SIGNATURE, msg, msglen, "%s", lp_error_message(LP_EBAD_SIGNATURE));
    it->annotator = a.id;
    it->window_ms = api->opts.timestamp_window_ms;
    return LP_OK;
}

/* Decoding, key and signature: the stateless checks, in protocol order. */
static int precheck(lp_api *api, const json_t *obj, lp_label_item *it, char *msg, size_t msglen)
{
    memset(it, 0, sizeof *it);
    int rc = lp_wire_label_decode(obj, &it->msg, msg, msglen);
    if (rc != LP_OK)
        return rc;
    return check_signed(api, it, msg, msglen);
}

/* Allocates the per-item arrays of p (p->n set). */
static int pending_alloc(lp_pending *p)
{
    p->items = calloc(p->n, sizeof *p->items);
    p->msgs = calloc(p->n, sizeof *p->msgs);
    p->sub = calloc(p->n, sizeof *p->sub);
    p->sub_idx = calloc(p->n, sizeof *p->sub_idx);
    return p->items && p->msgs && p->sub && p->sub_idx ? LP_OK : LP_ENO_MEMORY;
}

/*
 * The fast path: a body in the plain form every client sends is decoded by
 * lp_wire_label_scan / lp_wire_batch_scan without a JSON tree (the same
 * values the full parser gives). Returns the pending request with every
 * item decoded, or NULL when the body is not in that form (or on no
 * memory): the caller then takes the full parser, which names every error.
 */
static lp_pending *scan_body(lp_api *api, const lp_request *req, int batch)
{
    if (req->body == NULL || req->body_len == 0 || api->opts.json_depth < (batch ? 2 : 1))
        return NULL;
    lp_pending *p = calloc(1, sizeof *p);
    if (p == NULL)
        return NULL;
    p->batch = batch;
    if (!batch) {
        lp_label_msg m;
        if (lp_wire_label_scan(req->body, req->body_len, &m, NULL) != 1)
            goto fallback;
        p->n = 1;
        if (pending_alloc(p) != LP_OK)
            goto fallback;
        p->items[0].msg = m;
        return p;
    }
    /* every label object is longer than 150 bytes: a bound on the count */
    size_t cap = req->body_len / 150 + 1;
    if (cap > api->opts.batch_max)
        cap = api->opts.batch_max;
    lp_label_msg *msgs = malloc(cap * sizeof *msgs);
    if (msgs == NULL)
        goto fallback;
    p->n = lp_wire_batch_scan(req->body, req->body_len, msgs, cap);
    if (p->n == 0 || pending_alloc(p) != LP_OK) {
        free(msgs);
        goto fallback;
    }
    for (size_t i = 0; i < p->n; i++)
        p->items[i].msg = msgs[i];
    free(msgs);
    return p;
fallback:
    lp_api_labels_pending_free(p);
    return NULL;
}

/* Queues item i for the store if its stateless checks passed. */
static void admit(lp_pending *p, size_t i)
{
    if (p->items[i].rc == LP_OK) {
        p->sub[p->n_sub] = p->items[i];
        p->sub_idx[p->n_sub++] = i;
    }
}

static void pending_done(void *ctx)
{
    lp_pending *p = ctx;
    p->async.resume(p->async.ctx);
}

int lp_api_labels_begin(lp_api *api, const lp_request *req, const lp_async *async,
                        lp_response *resp, lp_pending **pending, int batch)
{
    char msg[LP_MSG_MAX];
    json_t *root = NULL;
    lp_pending *p = scan_body(api, req, batch);
    if (p != NULL) {
        for (size_t i = 0; i < p->n; i++) {
            p->items[i].rc = check_signed(api, &p->items[i], p->msgs[i], LP_MSG_MAX);
            admit(p, i);
        }
        goto submit;
    }
    if (lp_api_parse_body(api, req, &root, resp) != LP_OK)
        return LP_API_DONE;
    p = calloc(1, sizeof *p);
    if (p == NULL) {
        json_decref(root);
        return lp_api_error(resp, LP_ENO_MEMORY, NULL);
    }
    p->batch = batch;
    const json_t *list = NULL;
    if (!batch) {
        p->n = 1;
    } else {
        static const char *const fields[] = {"labels", NULL};
        int rc = LP_OK;
        if (!json_is_object(root))
            rc = lp_fail(LP_EWRONG_TYPE, msg, sizeof msg, "expected a JSON object");
        else if ((rc = lp_json_only_fields(root, fields, msg, sizeof msg)) != LP_OK)
            ;
        else if ((list = json_object_get(root, "labels")) == NULL)
            rc = lp_fail(LP_EMISSING_FIELD, msg, sizeof msg, "missing field \"labels\"");
        else if (!json_is_array(list) || json_array_size(list) == 0)
            rc = lp_fail(LP_EWRONG_TYPE, msg, sizeof msg,
                         "field \"labels\" must be a non-empty array");
        else if (json_array_size(list) > api->opts.batch_max)
            rc = lp_fail(LP_EBATCH_TOO_LARGE, msg, sizeof msg, "at most %zu labels per batch",
                         api->opts.batch_max);
        if (rc != LP_OK) {
            json_decref(root);
            lp_api_labels_pending_free(p);
            return lp_api_error(resp, rc, msg);
        }
        p->n = json_array_size(list);
    }
    if (pending_alloc(p) != LP_OK) {
        json_decref(root);
        lp_api_labels_pending_free(p);
        return lp_api_error(resp, LP_ENO_MEMORY, NULL);
    }
    for (size_t i = 0; i < p->n; i++) {
        const json_t *obj = batch ? json_array_get(list, i) : root;
        p->items[i].rc = precheck(api, obj, &p->items[i], p->msgs[i], LP_MSG_MAX);
        admit(p, i);
    }
    json_decref(root);
submit:
    p->api = api;
    p->async = *async;
    if (!batch && p->items[0].rc != LP_OK) {
        lp_api_error(resp, p->items[0].rc, p->msgs[0]);
        lp_api_labels_pending_free(p);
        return LP_API_DONE;
    }
    if (p->n_sub == 0) { /* a batch where nothing reached the store */
        lp_api_labels_finish(api, p, resp);
        return LP_API_DONE;
    }
    async->suspend(async->ctx);
    p->submit_rc = lp_store_labels_submit_async(api->store, p->sub, p->n_sub, pending_done, p);
    if (p->submit_rc != LP_OK)
        pending_done(p);
    *pending = p;
    return LP_API_PENDING;
}

/* Counts the outcome of one item for /metrics. */
static void count_item(const lp_label_item *it)
{
    if (it->rc != LP_OK)
        lp_metrics_reject(it->rc);
    else if (!it->existing)
        lp_metrics_label(it->msg.epsilon);
}

void lp_api_labels_finish(lp_api *api, lp_pending *p, lp_response *resp)
{
    (void)api;
    for (size_t k = 0; k < p->n_sub; k++) {
        lp_label_item *it = &p->items[p->sub_idx[k]];
        *it = p->sub[k];
        if (p->submit_rc != LP_OK)
            it->rc = p->submit_rc;
        if (it->rc != LP_OK)
            snprintf(p->msgs[p->sub_idx[k]], LP_MSG_MAX, "%s", lp_error_message(it->rc));
    }
    if (!p->batch) {
        lp_label_item *it = &p->items[0];
        if (it->rc != LP_OK) {
            lp_api_error(resp, it->rc, p->msgs[0]); /* counts the reject */
        } else {
            count_item(it);
            lp_buf b = {0};
            lp_api_receipt(&b, &it->receipt, 0, 0);
            lp_api_buf(resp, it->existing ? 200 : 201, LP_CT_JSON, &b);
        }
        lp_api_labels_pending_free(p);
        return;
    }
    lp_buf b = {0};
    lp_buf_puts(&b, "{\"results\":[");
    for (size_t i = 0; i < p->n; i++) {
        lp_label_item *it = &p->items[i];
        count_item(it);
        if (i)
            lp_buf_puts(&b, ",");
        if (it->rc == LP_OK) {
            lp_api_receipt(&b, &it->receipt, 1, it->existing ? 200 : 201);
            continue;
        }
        /* the per-item status is part of the documented batch body */
        json_t *o = json_pack("{s:s, s:s, s:i}", "error", lp_error_name(it->rc), "message",
                              p->msgs[i], "status", lp_error_http_status(it->rc));
        char *text = o ? json_dumps(o, JSON_COMPACT) : NULL;
        if (text == NULL) /* message not UTF-8 (cannot happen with our messages) */
            lp_buf_printf(&b, "{\"error\":\"%s\",\"message\":\"\",\"status\":%d}",
                          lp_error_name(it->rc), lp_error_http_status(it->rc));
        else
            lp_buf_puts(&b, text);
        free(text);
        json_decref(o);
    }
    lp_buf_puts(&b, "]}");
    lp_api_buf(resp, 200, LP_CT_JSON, &b);
    lp_api_labels_pending_free(p);
}

/* ---- POST /v1/tasks/next ---- */

static int verify_next(const void *msg)
{
    return lp_verify_next(msg);
}

int lp_api_next(lp_api *api, const lp_request *req, lp_response *resp)
{
    char msg[LP_MSG_MAX];
    json_t *root = NULL;
    if (lp_api_parse_body(api, req, &root, resp) != LP_OK)
        return LP_API_DONE;
    lp_next_msg m;
    int rc = lp_wire_next_decode(root, &m, msg, sizeof msg);
    json_decref(root);
    if (rc != LP_OK)
        return lp_api_error(resp, rc, msg);
    lp_annotator a;
    if ((rc = lp_api_signed_annotator(api, m.key, verify_next, &m, m.timestamp_ms, &a)) != LP_OK)
        return lp_api_error(resp, rc, NULL);
    /* the key's own bucket, once the signature proves the key is the caller's */
    if (lp_api_rate_limit(api, LP_RATE_NEXT, LP_RATE_CREDENTIAL, m.key, sizeof m.key, 1, resp) !=
        LP_OK)
        return LP_API_DONE;
    lp_campaign c;
    if ((rc = lp_store_campaign_by_id(api->store, a.campaign, &c)) != LP_OK)
        return lp_api_error(resp, LP_ESTORAGE, NULL);
    lp_assignment *as = calloc(m.count, sizeof *as);
    if (as == NULL)
        return lp_api_error(resp, LP_ENO_MEMORY, NULL);
    size_t n = 0;
    rc = lp_store_assign(api->store, a.id, m.count, as, &n);
    if (rc != LP_OK) {
        free(as);
        return lp_api_error(resp, rc, NULL);
    }
    json_t *tasks = json_array();
    for (size_t i = 0; i < n && tasks != NULL; i++) {
        lp_task t;
        if ((rc = lp_store_task_get(api->store, as[i].task_id, &t)) != LP_OK)
            break;
        json_t *o = json_pack(
            "{s:I, s:s, s:s, s:s, s:s, s:o, s:f, s:f, s:s}", "task_id", (json_int_t)t.id,
            "campaign", c.name, "prompt", t.prompt, "a", as[i].swapped ? t.response1 : t.response0,
            "b", as[i].swapped ? t.response0 : t.response1, "epsilon",
            lp_json_epsilon(c.epsilon_default), "epsilon_min", c.epsilon_min, "epsilon_max",
            c.epsilon_max, "trust", c.central ? "central" : "local");
        lp_task_clear(&t);
        json_t *context = NULL;
        if (o != NULL && (rc = lp_api_context(api, as[i].task_id, &context)) == LP_OK)
            json_object_set_new(o, "context", context);
        if (rc != LP_OK) {
            json_decref(o);
            break;
        }
        if (o == NULL || json_array_append_new(tasks, o) != 0) {
            rc = LP_ENO_MEMORY;
            break;
        }
    }
    free(as);
    if (rc != LP_OK || tasks == NULL) {
        json_decref(tasks);
        return lp_api_error(resp, tasks == NULL ? LP_ENO_MEMORY : rc, NULL);
    }
    return lp_api_json(resp, 200, json_pack("{s:o}", "tasks", tasks));
}

/* ---- POST /v1/annotators ---- */

int lp_api_enroll(lp_api *api, const lp_request *req, lp_response *resp)
{
    char msg[LP_MSG_MAX];
    json_t *root = NULL;
    if (lp_api_parse_body(api, req, &root, resp) != LP_OK)
        return LP_API_DONE;
    lp_enroll_msg m;
    int rc = lp_wire_enroll_decode(root, &m, msg, sizeof msg);
    json_decref(root);
    if (rc != LP_OK) {
        sodium_memzero(&m, sizeof m);
        return lp_api_error(resp, rc, msg);
    }
    if (lp_verify_enroll(&m) != LP_OK) {
        sodium_memzero(&m, sizeof m);
        return lp_api_error(resp, LP_EBAD_SIGNATURE, NULL);
    }
    uint8_t hash[LP_HASH_BYTES];
    lp_auth_token_hash(m.token, strlen(m.token), hash);
    lp_annotator a;
    rc = lp_store_enroll(api->store, m.key, hash, &a);
    sodium_memzero(&m, sizeof m);
    if (rc != LP_OK)
        return lp_api_error(resp, rc, NULL);
    lp_campaign c;
    if (lp_store_campaign_by_id(api->store, a.campaign, &c) != LP_OK)
        return lp_api_error(resp, LP_ESTORAGE, NULL);
    /* the pseudonym, never the key or the enrollment token */
    lp_log(LP_LOG_INFO, "enrollment", LP_LOG_STR("request_id", req->request_id),
           LP_LOG_STR("campaign", c.name), LP_LOG_INT("annotator", a.id),
           LP_LOG_STR("pseudonym", a.pseudonym));
    return lp_api_json(resp, 201,
                       json_pack("{s:I, s:s, s:s, s:f}", "annotator_id", (json_int_t)a.id,
                                 "pseudonym", a.pseudonym, "campaign", c.name, "epsilon_budget",
                                 c.epsilon_budget));
}
