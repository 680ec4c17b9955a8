/*
 * api_views.c — the operator's read views (GET, operator only; the router
 * has checked the token): a campaign's progress, labels over time and
 * budget; its annotators; its tasks a page at a time; one task in full.
 * The figures come from the views repository (server/db/views.h).
 */
#include "api_internal.h"

#include "campaigns.h"
#include "clock.h"
#include "error.h"
#include "views.h"
#include "wire.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define BUCKET_S_DEFAULT 3600
#define TASK_PAGE_DEFAULT 100

/* See api_internal.h. */
int lp_api_int_param(const lp_request *req, const char *key, int64_t lo, int64_t hi, int64_t *v,
                     int code, char *msg, size_t ml)
{
    const char *s = lp_api_param(req, key);
    if (s == NULL)
        return LP_OK;
    size_t n = strspn(s, "0123456789");
    int64_t x = n > 0 && n <= 18 && s[n] == '\0' ? (int64_t)strtoll(s, NULL, 10) : -1;
    if (x < lo || x > hi)
        return lp_fail(code, msg, ml, "%s must be an integer in %lld..%lld", key, (long long)lo,
                       (long long)hi);
    *v = x;
    return LP_OK;
}

/* The campaign named by ?campaign= (default "default"). */
static int campaign_param(lp_api *api, const lp_request *req, lp_campaign *c, char *msg, size_t ml)
{
    const char *name = lp_api_param(req, "campaign");
    if (name == NULL)
        name = "default";
    if (strlen(name) > LP_CAMPAIGN_NAME_MAX)
        return lp_fail(LP_EUNKNOWN_CAMPAIGN, msg, ml, "no campaign has a name that long");
    int rc = lp_store_campaign_by_name(api->store, name, c);
    if (rc == LP_EUNKNOWN_CAMPAIGN)
        snprintf(msg, ml, "no campaign named \"%.64s\"", name);
    return rc;
}

static json_t *quota_json(int64_t quota)
{
    return quota > 0 ? json_integer(quota) : json_null();
}

/* ---- GET /v1/campaigns/view ---- */

static json_t *progress_json(const lp_campaign_view *v)
{
    return json_pack(
        "{s:I, s:I, s:I, s:I, s:I, s:o, s:b, s:I}", "tasks", (json_int_t)v->tasks, "tasks_complete",
        (json_int_t)v->tasks_complete, "labels", (json_int_t)v->labels, "labels_needed",
        (json_int_t)v->labels_needed, "labels_per_task", (json_int_t)v->campaign.labels_per_task,
        "quota", quota_json(v->campaign.annotator_quota), "complete",
        v->tasks > 0 && v->tasks_complete >= v->tasks, "assignments", (json_int_t)v->assignments);
}

static json_t *over_time_json(const lp_campaign_view *v)
{
    json_t *points = json_array();
    for (size_t i = 0; i < v->n_points && points; i++)
        if (json_array_append_new(points,
                                  json_pack("{s:I, s:I}", "t_ms", (json_int_t)v->points[i].t_ms,
                                            "labels", (json_int_t)v->points[i].labels)) != 0) {
            json_decref(points);
            points = NULL;
        }
    return json_pack("{s:I, s:o, s:I}", "bucket_s", (json_int_t)v->bucket_s, "points", points,
                     "earlier_labels", (json_int_t)v->earlier_labels);
}

static json_t *epsilon_json(const lp_campaign_view *v)
{
    double budget = v->campaign.epsilon_budget;
    json_t *hist = json_array();
    for (int k = 0; k < LP_EPSILON_BINS && hist; k++)
        json_array_append_new(hist,
                              json_pack("{s:f, s:f, s:I}", "low", budget * k / LP_EPSILON_BINS,
                                        "high", budget * (k + 1) / LP_EPSILON_BINS, "annotators",
                                        (json_int_t)v->histogram[k]));
    return json_pack("{s:f, s:I, s:I, s:o, s:f}", "budget", budget, "annotators",
                     (json_int_t)v->annotators, "exhausted", (json_int_t)v->exhausted, "histogram",
                     hist, "spent_total", v->epsilon_spent);
}

int lp_api_campaign_view(lp_api *api, const lp_request *req, lp_response *resp)
{
    char msg[LP_MSG_MAX] = "";
    int64_t bucket_s = BUCKET_S_DEFAULT;
    int rc = lp_api_int_param(req, "bucket_s", LP_BUCKET_S_MIN, LP_BUCKET_S_MAX, &bucket_s,
                              LP_EBAD_BUCKET, msg, sizeof msg);
    if (rc == LP_OK && bucket_s % 60 != 0)
        rc = lp_fail(LP_EBAD_BUCKET, msg, sizeof msg, "bucket_s must be a multiple of 60");
    const char *name = lp_api_param(req, "campaign");
    if (name == NULL)
        name = "default";
    if (rc == LP_OK && strlen(name) > LP_CAMPAIGN_NAME_MAX)
        rc = lp_fail(LP_EUNKNOWN_CAMPAIGN, msg, sizeof msg, "no campaign has a name that long");
    if (rc != LP_OK)
        return lp_api_error(resp, rc, msg);
    lp_campaign_view v;
    rc = lp_store_campaign_view(api->store, name, bucket_s, lp_now_ms(), &v);
    if (rc == LP_EUNKNOWN_CAMPAIGN)
        snprintf(msg, sizeof msg, "no campaign named \"%.64s\"", name);
    if (rc != LP_OK)
        return lp_api_error(resp, rc, msg[0] ? msg : NULL);
    json_t *o = json_pack("{s:s, s:o, s:o, s:o}", "campaign", v.campaign.name, "progress",
                          progress_json(&v), "labels_over_time", over_time_json(&v), "epsilon",
                          epsilon_json(&v));
    lp_campaign_view_clear(&v);
    return lp_api_json(resp, 200, o);
}

/* ---- GET /v1/annotators, GET /v1/tasks ---- */

static json_t *annotator_json(const lp_annotator_row *r, double budget)
{
    return json_pack("{s:s, s:I, s:f, s:f, s:I, s:b, s:I, s:o}", "pseudonym", r->pseudonym,
                     "labels", (json_int_t)r->labels, "epsilon_spent", r->epsilon_spent,
                     "epsilon_budget", budget, "skips", (json_int_t)r->skips, "revoked", r->revoked,
                     "enrolled_ms", (json_int_t)r->enrolled_ms, "last_label_ms",
                     r->last_label_ms > 0 ? json_integer(r->last_label_ms) : json_null());
}

/* A page of the campaign's annotators or tasks, as JSON objects in arr;
 * *total gets how many the campaign has. */
typedef int (*page_fetch)(lp_api *api, const lp_campaign *c, int64_t offset, int64_t limit,
                          json_t *arr, int64_t *total);

static int fetch_annotators(lp_api *api, const lp_campaign *c, int64_t offset, int64_t limit,
                            json_t *arr, int64_t *total)
{
    lp_annotator_row *rows = NULL;
    size_t n = 0;
    int rc = lp_store_annotator_page(api->store, c->id, offset, limit, &rows, &n, total);
    for (size_t i = 0; rc == LP_OK && i < n; i++)
        if (json_array_append_new(arr, annotator_json(&rows[i], c->epsilon_budget)) != 0)
            rc = LP_ENO_MEMORY;
    free(rows);
    return rc;
}

/* A task's gold answer as the task file names it: "a" (response 0), "b"
 * (response 1), or null. */
static json_t *gold_json(int gold)
{
    return gold < 0 ? json_null() : json_string(gold ? "b" : "a");
}

static int fetch_tasks(lp_api *api, const lp_campaign *c, int64_t offset, int64_t limit,
                       json_t *arr, int64_t *total)
{
    lp_task_row *rows = NULL;
    size_t n = 0;
    int rc = lp_store_task_page(api->store, c->id, offset, limit, &rows, &n, total);
    for (size_t i = 0; rc == LP_OK && i < n; i++)
        if (json_array_append_new(arr, json_pack("{s:I, s:s, s:b, s:I, s:I, s:b, s:o}", "id",
                                                 (json_int_t)rows[i].id, "prompt", rows[i].prompt,
                                                 "prompt_truncated", rows[i].truncated, "labels",
                                                 (json_int_t)rows[i].labels, "labels_needed",
                                                 (json_int_t)c->labels_per_task, "complete",
                                                 rows[i].labels >= c->labels_per_task, "gold",
                                                 gold_json(rows[i].gold))) != 0)
            rc = LP_ENO_MEMORY;
    lp_task_rows_free(rows, n);
    return rc;
}

/* GET ?campaign=&offset=&limit= (limit default def): {"campaign", key:
 * [...], "total", "offset", "limit"}. */
static int list_page(lp_api *api, const lp_request *req, lp_response *resp, int64_t def,
                     const char *key, page_fetch fetch)
{
    char msg[LP_MSG_MAX] = "";
    int64_t offset = 0, limit = def, total = 0;
    lp_campaign c;
    int rc = lp_api_int_param(req, "offset", 0, INT64_C(999999999999999999), &offset, LP_EBAD_PAGE,
                              msg, sizeof msg);
    if (rc == LP_OK)
        rc = lp_api_int_param(req, "limit", 1, LP_PAGE_MAX, &limit, LP_EBAD_PAGE, msg, sizeof msg);
    if (rc == LP_OK)
        rc = campaign_param(api, req, &c, msg, sizeof msg);
    json_t *arr = rc == LP_OK ? json_array() : NULL;
    if (rc == LP_OK)
        rc = arr != NULL ? fetch(api, &c, offset, limit, arr, &total) : LP_ENO_MEMORY;
    if (rc != LP_OK) {
        json_decref(arr);
        return lp_api_error(resp, rc, msg[0] ? msg : NULL);
    }
    return lp_api_json(resp, 200,
                       json_pack("{s:s, s:o, s:I, s:I, s:I}", "campaign", c.name, key, arr, "total",
                                 (json_int_t)total, "offset", (json_int_t)offset, "limit",
                                 (json_int_t)limit));
}

int lp_api_annotator_list(lp_api *api, const lp_request *req, lp_response *resp)
{
    return list_page(api, req, resp, LP_PAGE_MAX, "annotators", fetch_annotators);
}

int lp_api_task_list(lp_api *api, const lp_request *req, lp_response *resp)
{
    return list_page(api, req, resp, TASK_PAGE_DEFAULT, "tasks", fetch_tasks);
}

/* ---- GET /v1/tasks/one ---- */

int lp_api_task_one(lp_api *api, const lp_request *req, lp_response *resp)
{
    char msg[LP_MSG_MAX] = "";
    int64_t id = 0;
    int rc = lp_api_int_param(req, "id", 1, INT64_C(999999999999999999), &id, LP_EBAD_REQUEST, msg,
                              sizeof msg);
    if (rc == LP_OK && id == 0)
        rc = lp_fail(LP_EBAD_REQUEST, msg, sizeof msg, "the task's id is required: ?id=N");
    if (rc != LP_OK)
        return lp_api_error(resp, rc, msg);
    lp_task_detail t;
    if ((rc = lp_store_task_detail(api->store, id, &t)) != LP_OK)
        return lp_api_error(resp, rc, NULL);
    json_t *context = NULL;
    rc = lp_api_context(api, id, &context);
    json_t *o = rc != LP_OK ? NULL
                            : json_pack("{s:I, s:s, s:s, s:I, s:o, s:s, s:[s, s], s:I, s:I, "
                                        "s:b, s:I, s:o}",
                                        "id", (json_int_t)t.id, "campaign", t.campaign, "source_id",
                                        t.source_id, "created_ms", (json_int_t)t.created_ms,
                                        "context", context, "prompt", t.prompt, "responses",
                                        t.response0, t.response1, "labels", (json_int_t)t.labels,
                                        "labels_needed", (json_int_t)t.labels_needed, "complete",
                                        t.labels >= t.labels_needed, "skips", (json_int_t)t.skips,
                                        "gold", gold_json(t.gold));
    lp_task_detail_clear(&t);
    if (rc != LP_OK)
        return lp_api_error(resp, rc, NULL);
    return lp_api_json(resp, 200, o);
}
