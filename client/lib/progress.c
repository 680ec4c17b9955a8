/*
 * progress.c — the annotator's campaign requests: skipping a task and the
 * campaign's progress (POST /v1/tasks/skip, POST /v1/progress). Both are
 * signed with the handle's key; neither sends or spends anything private.
 */
#include "internal.h"

#include "clock.h"
#include "error.h"
#include "wire.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int ldpref_skip(ldpref_client *c, int64_t task_id)
{
    if (c == NULL)
        return LDPREF_EINVALID_ARGUMENT;
    if (task_id < 1)
        return lpc_fail(c, LDPREF_EINVALID_ARGUMENT, "task id must be >= 1");
    int rc = lpc_need_key(c);
    if (rc != LDPREF_OK)
        return rc;
    /* A task answered on this device stays answered: its label (maybe still
     * unacknowledged) is in the outbox, and a skip would make the server
     * refuse it after its epsilon was spent. */
    lpc_ledger *l;
    if ((rc = lpc_use_ledger(c, &l)) != LDPREF_OK)
        return rc;
    char *stored = NULL;
    rc = lpc_ledger_outbox_get(l, c->server, task_id, &stored, NULL, NULL);
    free(stored);
    if (rc == LP_OK)
        return lpc_fail(c, LDPREF_EALREADY_ANSWERED,
                        "task %lld was answered on this device and cannot be skipped; if its "
                        "label is still pending, `ldpref resend` sends it",
                        (long long)task_id);
    if (rc != LP_ENOT_FOUND)
        return lpc_fail(c, LDPREF_ESTORAGE, "reading the ledger");
    lp_skip_msg m;
    memset(&m, 0, sizeof m);
    memcpy(m.key, c->pk, LP_KEY_BYTES);
    m.task_id = task_id;
    m.timestamp_ms = lp_now_ms();
    lp_sign_skip(&m, c->sk);
    json_t *resp = NULL;
    rc = lpc_post(c, "/v1/tasks/skip", lp_wire_skip_encode(&m), LPC_RESP_CAP_ANNOTATOR, &resp);
    if (rc != LDPREF_OK)
        return rc;
    int64_t got = 0;
    const json_t *skipped = json_object_get(resp, "skipped");
    int ok = lp_json_get_int(resp, "task_id", 1, INT64_MAX, &got, NULL, 0) == LP_OK &&
             got == task_id && json_is_true(skipped);
    json_decref(resp);
    if (!ok)
        return lpc_fail(c, LDPREF_EPROTOCOL, "unexpected skip answer");
    /* Remembered so that answering the task later is refused before any
     * epsilon is spent (the server would refuse the label). */
    if (lpc_ledger_skip_put(l, c->server, task_id) != LP_OK)
        return lpc_fail(c, LDPREF_ESTORAGE, "the server recorded the skip; the ledger did not");
    return LDPREF_OK;
}

int ldpref_progress_get(ldpref_client *c, ldpref_progress *out)
{
    if (c == NULL || out == NULL)
        return LDPREF_EINVALID_ARGUMENT;
    memset(out, 0, sizeof *out);
    int rc = lpc_need_key(c);
    if (rc != LDPREF_OK)
        return rc;
    lp_progress_msg m;
    memset(&m, 0, sizeof m);
    memcpy(m.key, c->pk, LP_KEY_BYTES);
    m.timestamp_ms = lp_now_ms();
    lp_sign_progress(&m, c->sk);
    json_t *resp = NULL;
    rc = lpc_post(c, "/v1/progress", lp_wire_progress_encode(&m), LPC_RESP_CAP_ANNOTATOR, &resp);
    if (rc != LDPREF_OK)
        return rc;
    ldpref_progress p;
    memset(&p, 0, sizeof p);
    const char *campaign = NULL;
    const json_t *quota = json_object_get(resp, "annotator_quota");
    int ok =
        lp_json_get_string(resp, "campaign", sizeof p.campaign - 1, &campaign, NULL, 0) == LP_OK &&
        lp_json_get_int(resp, "tasks_total", 0, INT64_MAX, &p.tasks_total, NULL, 0) == LP_OK &&
        lp_json_get_int(resp, "tasks_complete", 0, INT64_MAX, &p.tasks_complete, NULL, 0) ==
            LP_OK &&
        lp_json_get_int(resp, "labels", 0, INT64_MAX, &p.labels, NULL, 0) == LP_OK &&
        lp_json_get_int(resp, "labels_needed", 0, INT64_MAX, &p.labels_needed, NULL, 0) == LP_OK &&
        lp_json_get_int(resp, "annotator_labels", 0, INT64_MAX, &p.annotator_labels, NULL, 0) ==
            LP_OK &&
        (json_is_null(quota) || lp_json_get_int(resp, "annotator_quota", 1, INT64_MAX,
                                                &p.annotator_quota, NULL, 0) == LP_OK) &&
        lp_campaign_name_valid(campaign, sizeof p.campaign - 1);
    if (ok)
        snprintf(p.campaign, sizeof p.campaign, "%s", campaign);
    json_decref(resp);
    if (!ok)
        return lpc_fail(c, LDPREF_EPROTOCOL, "unexpected progress answer");
    *out = p;
    return LDPREF_OK;
}
