/*
 * api_quality.c — label quality under privacy: GET /v1/quality and the
 * quality gauges of /metrics (server/service/quality.h does the
 * statistics). The router has already checked the operator token.
 */
#include "api_internal.h"

#include "campaigns.h"
#include "clock.h"
#include "error.h"
#include "quality.h"
#include "rr.h"
#include "wire.h"

#include <math.h>
#include <pthread.h>
#include <stdlib.h>
#include <stdio.h>
#include <string.h>

#define QUALITY_WIDTH_DEFAULT 0.05
#define QUALITY_TTL_MS 10000 /* how long /metrics reuses its quality gauges */

/* The quality gauges of every campaign. A scrape never waits for them: it
 * appends the last rendering and, when that is older than QUALITY_TTL_MS,
 * starts a new one in a thread of its own (one at a time). */
struct lp_quality_cache {
    pthread_mutex_t lock;
    lp_api *api;
    int64_t rendered_ms; /* when the text was rendered; 0: never */
    int refreshing;      /* a rendering thread is running */
    int joinable;        /* thread is to be joined */
    pthread_t thread;
    lp_buf text;
};

lp_quality_cache *lp_quality_cache_new(lp_api *api)
{
    lp_quality_cache *q = calloc(1, sizeof *q);
    if (q != NULL) {
        pthread_mutex_init(&q->lock, NULL);
        q->api = api;
    }
    return q;
}

void lp_quality_cache_free(lp_quality_cache *q)
{
    if (q == NULL)
        return;
    pthread_mutex_lock(&q->lock);
    int join = q->joinable;
    pthread_mutex_unlock(&q->lock);
    if (join)
        pthread_join(q->thread, NULL);
    pthread_mutex_destroy(&q->lock);
    lp_buf_free(&q->text);
    free(q);
}

/* A number for the wire (null for NaN); lp_api_quality prints reals with 6
 * significant digits. */
static json_t *num(double x)
{
    if (!isfinite(x))
        return json_null();
    return json_real(x);
}

static json_t *estimate_json(const lp_quality_estimate *e, int with_n, const char *n_name)
{
    if (e->n == 0)
        return json_null();
    json_t *o = json_pack("{s:o, s:o, s:o, s:o}", "estimate", num(e->estimate), "low", num(e->low),
                          "high", num(e->high), "se", num(e->se));
    if (o != NULL && with_n)
        json_object_set_new(o, n_name, json_integer((json_int_t)e->n));
    return o;
}

static const char *flag_reason(const lp_annotator_quality *q)
{
    if (!q->flagged)
        return NULL;
    return q->basis == LP_QUALITY_BY_GOLD
               ? "gold accuracy significantly below the other annotators' (privacy noise "
                 "accounted for; Holm-corrected)"
               : "agreement with the others significantly below their agreement among "
                 "themselves (privacy noise accounted for; Holm-corrected)";
}

static json_t *annotator_json(const lp_quality_annotator *who, const lp_annotator_quality *q)
{
    static const char *const basis[] = {"none", "gold", "agreement"};
    const char *reason = flag_reason(q);
    json_t *test = q->basis == LP_QUALITY_UNTESTED
                       ? json_null()
                       : json_pack("{s:s, s:o, s:o, s:o}", "basis", basis[q->basis], "reference",
                                   num(q->reference), "z", num(q->z), "p_value", num(q->p_value));
    return json_pack("{s:s, s:I, s:o, s:I, s:o, s:b, s:o, s:o}", "pseudonym", who->pseudonym,
                     "gold_labels", (json_int_t)q->gold.n, "gold_accuracy",
                     estimate_json(&q->gold, 0, NULL), "pairs", (json_int_t)q->agreement.n,
                     "agreement", estimate_json(&q->agreement, 1, "pairs"), "flagged", q->flagged,
                     "flag_reason", reason ? json_string(reason) : json_null(), "test", test);
}

static json_t *planning_json(const lp_campaign *c, const lp_quality_report *r, double width)
{
    double eps = c->epsilon_default, cc = lp_rr_debias(eps);
    double agreement = r->agreement.n > 0 ? r->agreement.estimate : NAN;
    double gold = r->gold.n > 0 ? r->gold.estimate : NAN;
    return json_pack("{s:o, s:f, s:f, s:f, s:f, s:f, s:f, s:f}", "epsilon", lp_json_epsilon(eps),
                     "width", width, "confidence", LP_QUALITY_CONFIDENCE, "variance_factor",
                     cc * cc * cc * cc, "pairs_needed",
                     lp_quality_pairs_needed(eps, width, agreement), "pairs_needed_worst_case",
                     lp_quality_pairs_needed(eps, width, NAN), "gold_labels_needed",
                     lp_quality_gold_needed(eps, width, gold), "gold_labels_needed_worst_case",
                     lp_quality_gold_needed(eps, width, NAN));
}

/* The report of campaign c (bootstrap resamples: see lp_quality_compute),
 * with its annotators. */
static int campaign_report(lp_api *api, const lp_campaign *c, size_t bootstrap,
                           lp_quality_data *data, lp_quality_report *r)
{
    if (c->central) /* true answers: not even their agreement leaves the server */
        return LP_ECENTRAL_LABELS_PRIVATE;
    int rc = lp_store_quality_read(api->store, c->id, data);
    if (rc != LP_OK)
        return rc;
    rc = lp_quality_compute(data->rows, data->n_rows, data->n_annotators, bootstrap,
                            LP_QUALITY_SEED, r);
    if (rc != LP_OK)
        lp_quality_data_clear(data);
    return rc;
}

int lp_api_quality(lp_api *api, const lp_request *req, lp_response *resp)
{
    const char *name = lp_api_param(req, "campaign"), *w = lp_api_param(req, "width");
    double width = QUALITY_WIDTH_DEFAULT;
    if (w != NULL) {
        char *end = NULL;
        width = strtod(w, &end);
        if (end == w || *end != '\0' || !(width > 0 && width <= 0.5))
            return lp_api_error(resp, LP_EBAD_REQUEST,
                                "width (the interval's half-width) must be a number in (0, 0.5]");
    }
    if (name == NULL)
        name = "default";
    lp_campaign c;
    int rc = lp_store_campaign_by_name(api->store, name, &c);
    if (rc != LP_OK) {
        char unknown[LP_MSG_MAX];
        snprintf(unknown, sizeof unknown, "no campaign named \"%.64s\"", name);
        return lp_api_error(resp, rc, rc == LP_EUNKNOWN_CAMPAIGN ? unknown : NULL);
    }
    lp_quality_data data;
    lp_quality_report r;
    char msg[LP_MSG_MAX] = "";
    if ((rc = lp_api_labels_servable(api->store, c.id, msg, sizeof msg)) != LP_OK ||
        (rc = campaign_report(api, &c, LP_QUALITY_BOOTSTRAP, &data, &r)) != LP_OK)
        return lp_api_error(resp, rc, msg[0] ? msg : NULL);
    json_t *list = json_array();
    for (size_t j = 0; j < r.n_annotators && list; j++)
        json_array_append_new(list, annotator_json(&data.annotators[j], &r.annotators[j]));
    json_t *agreement = estimate_json(&r.agreement, 1, "pairs");
    if (json_is_object(agreement))
        json_object_set_new(agreement, "tasks", json_integer((json_int_t)r.tasks_shared));
    json_t *o =
        json_pack("{s:s, s:f, s:{s:I, s:o}, s:o, s:o, s:f, s:I, s:o}", "campaign", c.name,
                  "confidence", LP_QUALITY_CONFIDENCE, "gold", "labels", (json_int_t)r.gold.n,
                  "accuracy", estimate_json(&r.gold, 0, NULL), "agreement", agreement, "planning",
                  planning_json(&c, &r, width), "alpha", LP_QUALITY_ALPHA, "bootstrap",
                  (json_int_t)r.bootstrap, "annotators", list);
    lp_quality_report_clear(&r);
    lp_quality_data_clear(&data);
    char *text = o ? json_dumps(o, JSON_COMPACT | JSON_REAL_PRECISION(6)) : NULL;
    json_decref(o);
    if (text == NULL)
        return lp_api_error(resp, LP_ENO_MEMORY, NULL);
    lp_buf b = {0};
    lp_buf_puts(&b, text);
    free(text);
    return lp_api_buf(resp, 200, LP_CT_JSON, &b);
}

/* Renders the gauges of every campaign into b (point estimates only). */
static void render_gauges(lp_api *api, lp_buf *b)
{
    lp_campaign *cs = NULL;
    size_t n = 0;
    if (lp_store_campaign_list(api->store, &cs, &n) != LP_OK)
        return;
    lp_buf gold = {0}, agree = {0};
    for (size_t i = 0; i < n; i++) {
        lp_quality_data data;
        lp_quality_report r;
        if (campaign_report(api, &cs[i], 0, &data, &r) != LP_OK)
            continue;
        if (r.gold.n > 0)
            lp_buf_printf(&gold, "ldpref_campaign_gold_accuracy{campaign=\"%s\"} %.6f\n",
                          cs[i].name, r.gold.estimate);
        if (r.agreement.n > 0)
            lp_buf_printf(&agree, "ldpref_campaign_agreement{campaign=\"%s\"} %.6f\n", cs[i].name,
                          r.agreement.estimate);
        lp_quality_report_clear(&r);
        lp_quality_data_clear(&data);
    }
    free(cs);
    lp_buf_puts(b,
                "# HELP ldpref_campaign_gold_accuracy Debiased gold accuracy of a campaign's "
                "labels (at most about 10 s old).\n# TYPE ldpref_campaign_gold_accuracy gauge\n");
    if (gold.len > 0)
        lp_buf_append(b, gold.data, gold.len);
    lp_buf_puts(b, "# HELP ldpref_campaign_agreement Debiased agreement of two annotators' true "
                   "answers (at most about 10 s old).\n# TYPE ldpref_campaign_agreement gauge\n");
    if (agree.len > 0)
        lp_buf_append(b, agree.data, agree.len);
    lp_buf_free(&gold);
    lp_buf_free(&agree);
}

static void *refresh_main(void *arg)
{
    lp_quality_cache *q = arg;
    pthread_setname_np(pthread_self(), "ldpref-quality");
    lp_buf text = {0};
    render_gauges(q->api, &text);
    pthread_mutex_lock(&q->lock);
    lp_buf_free(&q->text);
    q->text = text;
    q->rendered_ms = lp_now_ms();
    q->refreshing = 0;
    pthread_mutex_unlock(&q->lock);
    return NULL;
}

void lp_api_quality_metrics(lp_api *api, lp_buf *b)
{
    lp_quality_cache *q = api->quality_cache;
    if (q == NULL)
        return;
    pthread_mutex_lock(&q->lock);
    if (!q->refreshing && (q->rendered_ms == 0 || lp_now_ms() - q->rendered_ms >= QUALITY_TTL_MS)) {
        if (q->joinable) /* the previous rendering has finished */
            pthread_join(q->thread, NULL);
        q->joinable = q->refreshing = pthread_create(&q->thread, NULL, refresh_main, q) == 0;
    }
    if (q->text.len > 0 && !q->text.oom)
        lp_buf_append(b, q->text.data, q->text.len);
    pthread_mutex_unlock(&q->lock);
}
