/*
 * api_score_batch.c — POST /v1/score/batch (docs/protocol.md "Batch
 * scores"): many prompts, each with its candidates, in one request; one
 * NDJSON line per prompt in the order given, streamed.
 *
 * The body is either JSON lines (one score request {"prompt",
 * "candidates"} per line; blank lines are skipped) or one object
 * {"items": [...], "version"?}. The whole request is refused before any
 * scoring when it is not authorized (the router), names a model the caller
 * may not use, or holds more than SCORE_BATCH_ITEMS_MAX items
 * (too_many_candidates); a bad item gets its own error line and the others
 * are scored. The handler keeps a copy of the body and the served model;
 * the items are scored as the response is read, a few per call, so a long
 * batch never holds the event loop for long at a time.
 */
#include "api_internal.h"

#include "error.h"
#include "score_parse.h"
#include "wire.h"

#include <stdlib.h>
#include <string.h>

#define SCORE_BATCH_ITEMS_MAX 10000
#define LINES_PER_READ 16 /* items scored per call of the stream's reader */

typedef struct batch {
    lp_served *sv;
    int json_depth;
    const lp_api *api;
    char *body; /* JSON lines (owned copy), or NULL */
    size_t len, pos;
    json_t *items; /* the object form's items, or NULL */
    size_t index, count;
    lp_score_arena arena;
    lp_buf out; /* lines not yet read */
    size_t out_pos;
} batch;

static void batch_free(void *ctx)
{
    batch *b = ctx;
    lp_served_unref(b->sv);
    free(b->body);
    json_decref(b->items);
    lp_score_arena_free(&b->arena);
    lp_buf_free(&b->out);
    free(b);
}

static int blank(const char *s, const char *e)
{
    for (; s < e; s++)
        if (*s != ' ' && *s != '\t' && *s != '\r')
            return 0;
    return 1;
}

/* Non-blank lines of body[0..len). */
static size_t count_lines(const char *body, size_t len)
{
    size_t n = 0;
    for (const char *s = body, *end = body + len; s < end;) {
        const char *e = memchr(s, '\n', (size_t)(end - s));
        e = e ? e : end;
        n += !blank(s, e);
        s = e + 1;
    }
    return n;
}

/* One prompt's candidates from a line: the single-pass reader, or jansson. */
static int score_line(batch *b, const char *s, size_t n, json_t *out, char *msg, size_t msglen)
{
    lp_score_req q;
    int fast = lp_api_score_fast_parse(b->api, s, n, &b->arena, &q);
    if (fast == 1 && q.version == 0) /* an item has no version: jansson names the field */
        return lp_api_score_item(b->sv, &q, NULL, out, msg, msglen);
    if (fast < 0)
        return lp_fail(LP_ENO_MEMORY, msg, msglen, "out of memory");
    json_t *root = NULL;
    int rc = lp_json_parse(s, n, b->json_depth, &root, msg, msglen);
    if (rc == LP_OK)
        rc = lp_api_score_item(b->sv, NULL, root, out, msg, msglen);
    json_decref(root);
    return rc;
}

/* Scores the next item into b->out as one line; 0 when none is left. */
static int next_line(batch *b)
{
    const json_t *item = NULL;
    const char *s = NULL, *e = NULL;
    if (b->items != NULL) {
        if (b->index >= json_array_size(b->items))
            return 0;
        item = json_array_get(b->items, b->index);
    } else {
        for (;;) {
            if (b->pos >= b->len)
                return 0;
            s = b->body + b->pos;
            e = memchr(s, '\n', b->len - b->pos);
            e = e ? e : b->body + b->len;
            b->pos = (size_t)(e - b->body) + 1;
            if (!blank(s, e))
                break;
        }
    }
    char msg[LP_MSG_MAX] = "";
    json_t *line = json_pack("{s:I}", "index", (json_int_t)b->index);
    int rc = line == NULL ? LP_ENO_MEMORY
             : item       ? lp_api_score_item(b->sv, NULL, item, line, msg, sizeof msg)
                          : score_line(b, s, (size_t)(e - s), line, msg, sizeof msg);
    if (rc != LP_OK) {
        json_decref(line);
        line = json_pack("{s:I, s:s, s:s}", "index", (json_int_t)b->index, "error",
                         lp_error_name(rc), "message", msg[0] ? msg : lp_error_message(rc));
    }
    char *text = line ? json_dumps(line, JSON_COMPACT) : NULL;
    json_decref(line);
    if (text == NULL) {
        lp_buf_printf(&b->out, "{\"index\":%zu,\"error\":\"no_memory\"}\n", b->index);
    } else {
        lp_buf_puts(&b->out, text);
        lp_buf_puts(&b->out, "\n");
        free(text);
    }
    b->index++;
    return 1;
}

static ssize_t batch_read(void *ctx, char *buf, size_t max)
{
    batch *b = ctx;
    for (int n = 0; n < LINES_PER_READ && b->out.len - b->out_pos < max && next_line(b); n++)
        ;
    if (b->out.oom)
        return -1;
    size_t k = b->out.len - b->out_pos;
    k = k < max ? k : max;
    memcpy(buf, b->out.data + b->out_pos, k);
    b->out_pos += k;
    if (b->out_pos == b->out.len)
        b->out_pos = b->out.len = 0;
    return (ssize_t)k;
}

/* 1 when the first non-blank line of body is a request the single-pass
 * reader reads (so the body is JSON lines). */
static int first_line_is_item(batch *b, const char *body, size_t len)
{
    for (const char *s = body, *end = body + len; s < end;) {
        const char *e = memchr(s, '\n', (size_t)(end - s));
        e = e ? e : end;
        if (!blank(s, e)) {
            lp_score_req q;
            return lp_api_score_fast_parse(b->api, s, (size_t)(e - s), &b->arena, &q) == 1;
        }
        s = e + 1;
    }
    return 0;
}

/* The object form {"items": [...], "version"?}: items into b, the version
 * into *version. LP_OK or an error with msg. */
static int object_form(batch *b, json_t *root, int64_t *version, char *msg, size_t msglen)
{
    static const char *const fields[] = {"items", "version", NULL};
    int rc = lp_json_only_fields(root, fields, msg, msglen);
    if (rc == LP_OK && json_object_get(root, "version") != NULL)
        rc = lp_json_get_int(root, "version", 1, INT64_MAX, version, msg, msglen);
    const json_t *items = json_object_get(root, "items");
    if (rc == LP_OK && !json_is_array(items))
        rc = lp_fail(LP_EWRONG_TYPE, msg, msglen, "items must be an array");
    if (rc == LP_OK)
        b->items = json_incref((json_t *)items);
    return rc;
}

int lp_api_score_batch(lp_api *api, const lp_request *req, lp_response *resp)
{
    if (api->learner == NULL)
        return lp_api_error(resp, LP_EUNAVAILABLE, "this server runs without a learner");
    if (req->body == NULL || req->body_len == 0)
        return lp_api_error(resp, LP_EMALFORMED_JSON, "the request body is empty");
    batch *b = calloc(1, sizeof *b);
    if (b == NULL)
        return lp_api_error(resp, LP_ENO_MEMORY, NULL);
    b->api = api;
    b->json_depth = api->opts.json_depth;
    char msg[LP_MSG_MAX] = "";
    int rc = LP_OK;
    int64_t version = lp_api_param_id(req, "version");
    if (version < 0)
        rc = lp_fail(LP_EWRONG_TYPE, msg, sizeof msg, "version must be a positive integer");
    /* JSON lines when the first line reads as one item (no need to look at
     * the rest now); else the object form when the whole body is one, else
     * JSON lines */
    json_t *root = NULL;
    char ignored[LP_MSG_MAX];
    if (rc == LP_OK && !first_line_is_item(b, req->body, req->body_len) &&
        lp_json_parse(req->body, req->body_len, b->json_depth, &root, ignored, sizeof ignored) ==
            LP_OK &&
        json_is_object(root) && json_object_get(root, "items") != NULL) {
        int64_t in_body = 0;
        rc = object_form(b, root, &in_body, msg, sizeof msg);
        if (rc == LP_OK && in_body != 0 && version != 0 && in_body != version)
            rc = lp_fail(LP_EBAD_REQUEST, msg, sizeof msg, "two different versions");
        version = in_body ? in_body : version;
        b->count = b->items ? json_array_size(b->items) : 0;
    } else if (rc == LP_OK) {
        b->count = count_lines(req->body, req->body_len);
        b->body = malloc(req->body_len);
        if (b->body == NULL)
            rc = LP_ENO_MEMORY;
        else
            memcpy(b->body, req->body, req->body_len);
        b->len = req->body_len;
    }
    json_decref(root);
    if (rc == LP_OK && b->count > SCORE_BATCH_ITEMS_MAX)
        rc = lp_fail(LP_ETOO_MANY_CANDIDATES, msg, sizeof msg, "at most %d items in a batch",
                     SCORE_BATCH_ITEMS_MAX);
    if (rc == LP_OK && (rc = lp_api_score_model(api, req->principal, version, &b->sv)) != LP_OK)
        msg[0] = '\0';
    if (rc != LP_OK) {
        batch_free(b);
        return lp_api_error(resp, rc, msg[0] ? msg : NULL);
    }
    memset(resp, 0, sizeof *resp);
    resp->status = 200;
    resp->content_type = "application/x-ndjson";
    resp->stream = (lp_stream){.read = batch_read, .free = batch_free, .ctx = b};
    return LP_API_DONE;
}
