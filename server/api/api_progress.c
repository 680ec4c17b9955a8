/*
 * api_progress.c — the annotator's campaign endpoints: skipping an assigned
 * task and the campaign's progress. Both are signed by the annotator's key
 * and checked in the order of docs/protocol.md (decoding, key, revocation,
 * signature, timestamp) before they touch the store.
 */
#include "annotators.h"
#include "api_internal.h"

#include "campaigns.h"
#include "clock.h"
#include "error.h"
#include "tasks.h"
#include "wire.h"

static int verify_skip(const void *msg)
{
    return lp_verify_skip(msg);
}

static int verify_progress(const void *msg)
{
    return lp_verify_progress(msg);
}

/* ---- POST /v1/tasks/skip ---- */

int lp_api_skip(lp_api *api, const lp_request *req, lp_response *resp)
{
    char msg[LP_MSG_MAX];
    json_t *root = NULL;
    if (lp_api_parse_body(api, req, &root, resp) != LP_OK)
        return LP_API_DONE;
    lp_skip_msg m;
    int rc = lp_wire_skip_decode(root, &m, msg, sizeof msg);
    json_decref(root);
    if (rc != LP_OK)
        return lp_api_error(resp, rc, msg);
    lp_annotator a;
    if ((rc = lp_api_signed_annotator(api, m.key, verify_skip, &m, m.timestamp_ms, &a)) != LP_OK ||
        (rc = lp_store_skip(api->store, a.id, m.task_id)) != LP_OK)
        return lp_api_error(resp, rc, NULL);
    return lp_api_json(resp, 200,
                       json_pack("{s:I, s:b}", "task_id", (json_int_t)m.task_id, "skipped", 1));
}

/* ---- POST /v1/progress ---- */

int lp_api_progress(lp_api *api, const lp_request *req, lp_response *resp)
{
    char msg[LP_MSG_MAX];
    json_t *root = NULL;
    if (lp_api_parse_body(api, req, &root, resp) != LP_OK)
        return LP_API_DONE;
    lp_progress_msg m;
    int rc = lp_wire_progress_decode(root, &m, msg, sizeof msg);
    json_decref(root);
    if (rc != LP_OK)
        return lp_api_error(resp, rc, msg);
    lp_annotator a;
    lp_progress p;
    if ((rc = lp_api_signed_annotator(api, m.key, verify_progress, &m, m.timestamp_ms, &a)) !=
            LP_OK ||
        (rc = lp_store_progress(api->store, a.id, &p)) != LP_OK)
        return lp_api_error(resp, rc, NULL);
    return lp_api_json(
        resp, 200,
        json_pack("{s:s, s:I, s:I, s:I, s:I, s:I, s:o}", "campaign", p.campaign, "tasks_total",
                  (json_int_t)p.tasks_total, "tasks_complete", (json_int_t)p.tasks_complete,
                  "labels", (json_int_t)p.labels, "labels_needed", (json_int_t)p.labels_needed,
                  "annotator_labels", (json_int_t)p.annotator_labels, "annotator_quota",
                  p.annotator_quota > 0 ? json_integer(p.annotator_quota) : json_null()));
}
