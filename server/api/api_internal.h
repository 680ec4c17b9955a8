/*
 * api_internal.h — what the api_*.c files share: the api struct, response
 * helpers and the handler signatures. Not part of the server's public API.
 */
#ifndef LP_API_INTERNAL_H
#define LP_API_INTERNAL_H

#include "annotators.h"
#include "api.h"
#include "auth.h"
#include "buf.h"
#include "console_sessions.h"
#include "labels.h"
#include "metrics.h"
#include "ratelimit.h"

#include <jansson.h>
#include <stdatomic.h>

typedef struct lp_quality_cache lp_quality_cache;
typedef struct lp_audit_gate lp_audit_gate;

struct lp_api {
    lp_store *store;
    lp_quality_cache *quality_cache; /* the /metrics quality gauges (api_quality.c) */
    struct lp_learner *learner;      /* NULL: the learning endpoints are unavailable */
    lp_api_opts opts;
    atomic_int draining;
    int64_t started_ms;
    lp_sessions *sessions; /* the console's sign-ins */
    lp_sessions_opts sessions_opts;
    lp_ratelimit *limits;      /* score, enrollment and task-fetch buckets */
    lp_audit_gate *audit_gate; /* the rate of unauthenticated refusals recorded (api_audit.c) */
};

#define LP_CT_JSON "application/json"
#define LP_CT_JSONL "application/x-ndjson"
#define LP_CT_TEXT "text/plain; version=0.0.4"

/* Sets an error response {"error": name, "message": msg}; counts the reject.
 * Returns LP_API_DONE. msg may be NULL (the table's message is used). */
int lp_api_error(lp_response *resp, int code, const char *msg);
/* Sets a JSON response from obj (stolen reference). */
int lp_api_json(lp_response *resp, int status, json_t *obj);
/* Sets a response from a finished buffer (taken). */
int lp_api_buf(lp_response *resp, int status, const char *content_type, lp_buf *b);
/* Parses the body as JSON with the configured depth; on error fills resp. */
int lp_api_parse_body(lp_api *api, const lp_request *req, json_t **out, lp_response *resp);
/* An annotator's signed request, checked in the order of docs/protocol.md:
 * the key is looked up first (a cache hit), so an unknown or revoked key
 * costs no verification; then verify(msg), then the timestamp window.
 * LP_OK with *a filled, or the rejection's code. */
int lp_api_signed_annotator(lp_api *api, const uint8_t key[LP_KEY_BYTES],
                            int (*verify)(const void *msg), const void *msg, int64_t timestamp_ms,
                            lp_annotator *a);
/* Takes one token (take = 1), or only looks (take = 0), from the bucket of
 * (cls, kind, key[0..len)): LP_OK, or LP_ERATE_LIMITED with resp filled
 * (429 with Retry-After) and the refusal counted in the metrics. */
int lp_api_rate_limit(lp_api *api, lp_rate_class cls, lp_rate_key kind, const void *key, size_t len,
                      int take, lp_response *resp);
/* The value of a query parameter, or NULL. */
const char *lp_api_param(const lp_request *req, const char *key);
/* A query parameter that must be a decimal integer in [lo, hi] (at most 18
 * digits, no sign); *v keeps its default when the parameter is absent.
 * code (with msg) when it is not. */
int lp_api_int_param(const lp_request *req, const char *key, int64_t lo, int64_t hi, int64_t *v,
                     int code, char *msg, size_t ml);

/* The context turns of task_id as a new JSON array of {"role", "content"}
 * ([] when it has none) in *out. LP_ESTORAGE, LP_ENO_MEMORY. */
int lp_api_context(lp_api *api, int64_t task_id, json_t **out);

/* Appends a receipt object (without braces' closing when extra is set). */
void lp_api_receipt(lp_buf *b, const lp_receipt *r, int with_status, int status);

/* handlers (api_labels.c) */
int lp_api_labels_begin(lp_api *api, const lp_request *req, const lp_async *async,
                        lp_response *resp, lp_pending **pending, int batch);
void lp_api_labels_finish(lp_api *api, lp_pending *p, lp_response *resp);
void lp_api_labels_pending_free(lp_pending *p);
int lp_api_next(lp_api *api, const lp_request *req, lp_response *resp);
int lp_api_enroll(lp_api *api, const lp_request *req, lp_response *resp);

/* handlers (api_progress.c) */
int lp_api_skip(lp_api *api, const lp_request *req, lp_response *resp);
int lp_api_progress(lp_api *api, const lp_request *req, lp_response *resp);

/* handlers (api_admin.c) */
int lp_api_campaign_create(lp_api *api, const lp_request *req, lp_response *resp);
/* LP_OK unless campaign id (0: none) is central, whose labels are never
 * served: LP_ECENTRAL_LABELS_PRIVATE with msg. */
int lp_api_labels_servable(lp_store *s, int64_t id, char *msg, size_t ml);
int lp_api_campaign_update(lp_api *api, const lp_request *req, lp_response *resp);
int lp_api_campaign_list(lp_api *api, const lp_request *req, lp_response *resp);
int lp_api_enroll_tokens(lp_api *api, const lp_request *req, lp_response *resp);
int lp_api_revoke(lp_api *api, const lp_request *req, lp_response *resp);
int lp_api_tasks_load(lp_api *api, const lp_request *req, lp_response *resp);
int lp_api_stats(lp_api *api, const lp_request *req, lp_response *resp);
int lp_api_export(lp_api *api, const lp_request *req, lp_response *resp);
int lp_api_metrics(lp_api *api, const lp_request *req, lp_response *resp);

/* handlers (api_tokens.c) */
int lp_api_token_create(lp_api *api, const lp_request *req, lp_response *resp);
int lp_api_token_list(lp_api *api, const lp_request *req, lp_response *resp);
int lp_api_token_revoke(lp_api *api, const lp_request *req, lp_response *resp);
int lp_api_token_rotate(lp_api *api, const lp_request *req, lp_response *resp);

/* handlers (api_views.c) */
int lp_api_campaign_view(lp_api *api, const lp_request *req, lp_response *resp);
int lp_api_annotator_list(lp_api *api, const lp_request *req, lp_response *resp);
int lp_api_task_list(lp_api *api, const lp_request *req, lp_response *resp);
int lp_api_task_one(lp_api *api, const lp_request *req, lp_response *resp);

/* label quality (api_quality.c): GET /v1/quality, and the quality gauges
 * of /metrics appended to b: the last rendering, recomputed in a thread of
 * its own when older than 10 s (the first scrape has none yet). The cache is
 * created with the api (NULL when out of memory: no gauges then); freeing it
 * waits for a rendering in progress. */
int lp_api_quality(lp_api *api, const lp_request *req, lp_response *resp);
void lp_api_quality_metrics(lp_api *api, lp_buf *b);
lp_quality_cache *lp_quality_cache_new(lp_api *api);
void lp_quality_cache_free(lp_quality_cache *q); /* accepts NULL */

/*
 * The audit log (api_audit.c). The router records, after the handler has
 * answered or the request was refused (401, 403, 413 included):
 *   LP_AUDIT_ACTION    every operator route (scope != 0) whose method is not
 *                      GET, except POST /v1/score (a read), and GET
 *                      /v1/export (a read that releases the data);
 *   LP_AUDIT_SIGN_IN   POST /v1/console/session;
 *   LP_AUDIT_SIGN_OUT  DELETE /v1/console/session.
 * who is the principal (NULL when the request did not authenticate; for a
 * sign-in the token of its body is looked up here); unauthenticated
 * outcomes are rate-limited (a burst of 60, then one a second; the number
 * left out goes into the next one's params as "suppressed_refusals").
 * body_read: the body was read (lp_api_preauth refuses before it is);
 * upload: the body is recorded as its size and BLAKE2b hash only.
 */
enum { LP_AUDIT_NONE, LP_AUDIT_ACTION, LP_AUDIT_SIGN_IN, LP_AUDIT_SIGN_OUT };
int lp_api_audit_kind(const char *method, const char *path, lp_route id, unsigned scope);
void lp_api_audit_record(lp_api *api, int kind, const char *method, const char *path,
                         const lp_request *req, int body_read, int upload, const lp_principal *who,
                         const lp_response *resp);
lp_audit_gate *lp_audit_gate_new(void);    /* NULL when out of memory */
void lp_audit_gate_free(lp_audit_gate *g); /* accepts NULL */
/* GET /v1/audit?after_id=&limit= */
int lp_api_audit_list(lp_api *api, const lp_request *req, lp_response *resp);

/* handlers (api_learn.c) */
int lp_api_retrain_start(lp_api *api, const lp_request *req, lp_response *resp);
int lp_api_retrain_get(lp_api *api, const lp_request *req, lp_response *resp);
int lp_api_retrain_cancel(lp_api *api, const lp_request *req, lp_response *resp);
int lp_api_schedule_get(lp_api *api, const lp_request *req, lp_response *resp);
int lp_api_schedule_put(lp_api *api, const lp_request *req, lp_response *resp);
int lp_api_models_get(lp_api *api, const lp_request *req, lp_response *resp);
int lp_api_models_activate(lp_api *api, const lp_request *req, lp_response *resp);
int lp_api_score(lp_api *api, const lp_request *req, lp_response *resp);
/* POST /v1/score/batch (api_score_batch.c) */
int lp_api_score_batch(lp_api *api, const lp_request *req, lp_response *resp);
/* Query parameter key as a positive id: 0 when absent, -1 when not one
 * (api_learn.c). */
int64_t lp_api_param_id(const lp_request *req, const char *key);
/* Shared by the two score routes (api_learn.c). Caps of one prompt's request. */
#define SCORE_CANDIDATES_MAX 1024
struct lp_score_arena;
struct lp_score_req;
/* The model a score request of who may use (version 0: the served one;
 * docs/trust-model.md): LP_OK with *out referenced, or the refusal. */
int lp_api_score_model(lp_api *api, const lp_principal *who, int64_t version, lp_served **out);
/* {"model_version", "method", "loss", "link", "beta"} of sv (NULL: no memory). */
json_t *lp_api_score_header(lp_served *sv);
/* The single-pass reader (score_parse.h) with the route's caps: 1 read,
 * 0 declined (parse with jansson), -1 out of memory. */
int lp_api_score_fast_parse(const lp_api *api, const char *body, size_t len,
                            struct lp_score_arena *a, struct lp_score_req *q);
/* One prompt's candidates scored under sv into out ("candidates"): from
 * parsed (the fast reader's) when not NULL, else from root, an object of
 * "prompt" and "candidates" only. LP_OK or an error with msg. */
int lp_api_score_item(lp_served *sv, const struct lp_score_req *parsed, const json_t *root,
                      json_t *out, char *msg, size_t msglen);
int lp_api_corruption_get(lp_api *api, const lp_request *req, lp_response *resp);
int lp_api_corruption_put(lp_api *api, const lp_request *req, lp_response *resp);
/* The label view model `version` was trained on (for the corrupted export):
 * spec's settings and anti model are returned for the caller to free
 * (free(), lp_served_unref). */
struct lp_view_spec;
struct lp_corruption;
struct lp_served;
int lp_api_model_view(lp_api *api, int64_t version, struct lp_view_spec *spec,
                      struct lp_corruption **settings, struct lp_served **anti, char *msg,
                      size_t msglen);

#endif
