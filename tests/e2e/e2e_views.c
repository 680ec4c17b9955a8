/*
 * e2e_views.c — the operator's views of a campaign, its annotators and its
 * tasks, end to end: the real ldpref-server on 127.0.0.1 (temporary SQLite
 * database), annotators labelling through the real client library, and the
 * views read through the library and the CLI. Every figure is checked
 * against what the test itself did: label and skip counts, the epsilon each
 * annotator spent (from its receipts), the histogram and the time buckets
 * adding up, paging, a task in full; the per-campaign /metrics gauges and
 * /v1/stats equal the views; bad parameters get their named errors and a
 * request without the operator token is refused.
 */
#include "annotator_client.h"
#include "check.h"
#include "clock.h"
#include "error.h"
#include "http_raw.h"
#include "ldpref.h"
#include "operator_client.h"
#include "server_proc.h"

#include <jansson.h>
#include <math.h>
#include <sodium.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define N_TASKS 12
#define K 2 /* labels per task */
#define N_ANN 5
#define BUDGET 4.0
#define EPS_MIN 0.5
#define CAMPAIGN "views"

static server_proc srv;
static char env_server[128], env_token[256];

/* What the test did, per annotator and per task. */
static struct truth {
    int64_t first_task;
    int task_labels[N_TASKS], task_skips[N_TASKS];
    int labels[N_ANN], skips[N_ANN], revoked[N_ANN];
    double spent[N_ANN];
    int64_t total_labels, start_ms;
} truth;

static json_t *parse(char *text)
{
    json_t *j = text ? json_loads(text, 0, NULL) : NULL;
    ldpref_free(text);
    CHECK(j != NULL);
    return j;
}

static int64_t jint(const json_t *o, const char *key)
{
    return json_integer_value(json_object_get(o, key));
}

static double jnum(const json_t *o, const char *key)
{
    return json_number_value(json_object_get(o, key));
}

/* Runs the CLI with the server and operator token in its environment;
 * returns its exit status with stdout parsed into *out (NULL if not JSON). */
static int cli_json(json_t **out, const char *const *argv)
{
    const char *env[] = {env_server, env_token, NULL};
    char *text = NULL;
    int rc = run_tool(argv, env, &text);
    *out = text ? json_loads(text, 0, NULL) : NULL;
    free(text);
    return rc;
}

/* The campaign, with a task file whose first task has a conversation
 * before its prompt and whose second has a prompt of 300 two-byte
 * characters. */
static void setup_campaign(ldpref_client *op)
{
    ldpref_campaign spec;
    ldpref_campaign_init(&spec);
    spec.name = CAMPAIGN;
    spec.epsilon_min = EPS_MIN;
    spec.epsilon_max = 2;
    spec.epsilon_default = 2;
    spec.epsilon_budget = BUDGET;
    spec.labels_per_task = K;
    char *json = NULL;
    CHECK_ERR(ldpref_admin_campaign_create(op, &spec, &json), LDPREF_OK);
    ldpref_free(json);
    char path[400];
    snprintf(path, sizeof path, "%s/views.jsonl", srv.dir);
    FILE *f = fopen(path, "w");
    CHECK(f != NULL);
    if (f == NULL)
        return;
    fprintf(f, "{\"id\":\"v0\",\"context\":[{\"role\":\"system\",\"content\":\"be brief\"},"
               "{\"role\":\"user\",\"content\":\"hi\"},{\"role\":\"assistant\",\"content\":"
               "\"hello\"}],\"prompt\":\"and now?\",\"responses\":[\"r0\",\"r1\"]}\n");
    fprintf(f, "{\"id\":\"v1\",\"prompt\":\"");
    for (int i = 0; i < 300; i++)
        fputs("\xc3\xa9", f); /* é */
    fprintf(f, "\",\"responses\":[\"x\",\"y\"]}\n");
    for (int i = 2; i < N_TASKS; i++)
        fprintf(
            f,
            "{\"id\":\"v%d\",\"prompt\":\"question %d\",\"responses\":[\"one %d\",\"two %d\"]}\n",
            i, i, i, i);
    fclose(f);
    CHECK_ERR(ldpref_admin_tasks_load(op, path, CAMPAIGN, &json), LDPREF_OK);
    json_t *r = parse(json);
    truth.first_task = json_integer_value(json_array_get(json_object_get(r, "task_ids"), 0));
    CHECK_INT(json_integer_value(json_array_get(json_object_get(r, "task_ids"), 1)),
              truth.first_task + N_TASKS - 1);
    json_decref(r);
}

static ldpref_client *annotator(ldpref_client *op, int a, double cap)
{
    char *json = NULL, key[400], name[32];
    CHECK_ERR(ldpref_admin_enrollment_tokens(op, CAMPAIGN, 1, &json), LDPREF_OK);
    char *token = json ? first_enrollment_token(json) : NULL;
    ldpref_free(json);
    snprintf(name, sizeof name, "ann%d.key", a);
    CHECK_ERR(annotator_key_ensure(srv.dir, name, key, sizeof key), LDPREF_OK);
    ldpref_options o;
    annotator_options_init(&o, srv.url, key, cap, 1000);
    ldpref_client *c = NULL;
    CHECK_ERR(ldpref_client_open(&o, &c), LDPREF_OK);
    CHECK_ERR(ldpref_enroll(c, token ? token : "x", NULL), LDPREF_OK);
    free(token);
    return c;
}

/* Annotator a fetches `fetch` tasks, skips the first `skip` of them and
 * answers the rest; the truth records it from the receipts. */
static void work(ldpref_client *c, int a, int fetch, int skip)
{
    ldpref_task *t = NULL;
    size_t n = 0;
    CHECK_ERR(ldpref_next_tasks(c, fetch, &t, &n), LDPREF_OK);
    CHECK_INT(n, fetch);
    for (size_t i = 0; i < n; i++) {
        int k = (int)(t[i].task_id - truth.first_task);
        CHECK(k >= 0 && k < N_TASKS);
        if (k < 0 || k >= N_TASKS)
            continue;
        if ((int)i < skip) {
            CHECK_ERR(ldpref_skip(c, t[i].task_id), LDPREF_OK);
            truth.skips[a]++;
            truth.task_skips[k]++;
            continue;
        }
        ldpref_receipt r;
        CHECK_ERR(ldpref_answer(c, &t[i], (int)(i % 2), &r), LDPREF_OK);
        truth.labels[a]++;
        truth.task_labels[k]++;
        truth.spent[a] += r.epsilon;
        truth.total_labels++;
    }
    ldpref_tasks_free(t, n);
}

/* Five annotators: their per-label caps decide the epsilon they spend.
 * 0 and 2 spend the whole budget of 4, 4 labels nothing and is revoked. */
static void label(ldpref_client *op)
{
    static const double caps[N_ANN] = {1, 0.5, 2, 1, 1};
    static const int fetch[N_ANN] = {4, 3, 2, 2, 0}, skip[N_ANN] = {0, 0, 0, 1, 0};
    ldpref_client *ann[N_ANN];
    for (int a = 0; a < N_ANN; a++) {
        ann[a] = annotator(op, a, caps[a]);
        if (fetch[a] > 0)
            work(ann[a], a, fetch[a], skip[a]);
    }
    char key[LDPREF_KEY_B64_SIZE];
    CHECK_ERR(ldpref_public_key(ann[4], key), LDPREF_OK);
    CHECK_ERR(ldpref_admin_revoke(op, key), LDPREF_OK);
    truth.revoked[4] = 1;
    for (int a = 0; a < N_ANN; a++)
        ldpref_client_close(ann[a]);
    CHECK_NEAR(truth.spent[0], 4.0, 1e-9); /* the caps did what the test meant */
    CHECK_NEAR(truth.spent[2], 4.0, 1e-9);
}

static int complete_tasks(void)
{
    int n = 0;
    for (int k = 0; k < N_TASKS; k++)
        n += truth.task_labels[k] >= K;
    return n;
}

/* The bucket points add up to the labels (all inside the window), start
 * on bucket boundaries and follow each other. */
static void check_points(const json_t *lot, int64_t bucket_s)
{
    CHECK_INT(jint(lot, "bucket_s"), bucket_s);
    CHECK_INT(jint(lot, "earlier_labels"), 0);
    json_t *points = json_object_get(lot, "points");
    int64_t sum = 0, prev = -1;
    size_t i;
    json_t *p;
    json_array_foreach(points, i, p)
    {
        int64_t t = jint(p, "t_ms");
        CHECK_INT(t % (bucket_s * 1000), 0);
        if (prev >= 0)
            CHECK_INT(t - prev, bucket_s * 1000);
        prev = t;
        sum += jint(p, "labels");
    }
    CHECK_INT(sum, truth.total_labels);
    CHECK(json_array_size(points) >= 1);
    /* the first bucket holds a label received after the test started */
    CHECK(jint(json_array_get(points, 0), "t_ms") + bucket_s * 1000 > truth.start_ms);
    CHECK(prev <= lp_now_ms());
}

static json_t *check_campaign_view(ldpref_client *op)
{
    char *json = NULL;
    CHECK_ERR(ldpref_admin_campaign(op, CAMPAIGN, 60, &json), LDPREF_OK);
    json_t *v = parse(json);
    CHECK_STR(json_string_value(json_object_get(v, "campaign")), CAMPAIGN);
    json_t *p = json_object_get(v, "progress");
    CHECK_INT(jint(p, "tasks"), N_TASKS);
    CHECK_INT(jint(p, "labels"), truth.total_labels);
    CHECK_INT(jint(p, "labels_needed"), N_TASKS * K);
    CHECK_INT(jint(p, "labels_per_task"), K);
    CHECK_INT(jint(p, "tasks_complete"), complete_tasks());
    CHECK(json_is_null(json_object_get(p, "quota")));
    CHECK(json_is_false(json_object_get(p, "complete")));
    check_points(json_object_get(v, "labels_over_time"), 60);

    json_t *e = json_object_get(v, "epsilon");
    CHECK_NEAR(jnum(e, "budget"), BUDGET, 0);
    CHECK_INT(jint(e, "annotators"), N_ANN);
    double spent = 0;
    int expect_bins[10] = {0}, exhausted = 0;
    for (int a = 0; a < N_ANN; a++) {
        spent += truth.spent[a];
        int bin = (int)(truth.spent[a] / BUDGET * 10);
        expect_bins[bin > 9 ? 9 : bin]++;
        exhausted += truth.spent[a] + EPS_MIN > BUDGET;
    }
    CHECK_INT(exhausted, 2);
    CHECK_INT(jint(e, "exhausted"), exhausted);
    CHECK_NEAR(jnum(e, "spent_total"), spent, 1e-9);
    json_t *hist = json_object_get(e, "histogram");
    CHECK_INT(json_array_size(hist), 10);
    int64_t in_bins = 0;
    for (size_t k = 0; k < json_array_size(hist); k++) {
        json_t *b = json_array_get(hist, k);
        CHECK_NEAR(jnum(b, "low"), BUDGET * (double)k / 10, 1e-12);
        CHECK_NEAR(jnum(b, "high"), BUDGET * (double)(k + 1) / 10, 1e-12);
        CHECK_INT(jint(b, "annotators"), expect_bins[k < 10 ? k : 9]);
        in_bins += jint(b, "annotators");
    }
    CHECK_INT(in_bins, N_ANN);

    /* another bucket size adds up the same */
    CHECK_ERR(ldpref_admin_campaign(op, CAMPAIGN, 3600, &json), LDPREF_OK);
    json_t *hourly = parse(json);
    check_points(json_object_get(hourly, "labels_over_time"), 3600);
    json_decref(hourly);
    return v;
}

static void check_annotators(ldpref_client *op)
{
    char *json = NULL;
    CHECK_ERR(ldpref_admin_annotators(op, CAMPAIGN, 0, 0, &json), LDPREF_OK);
    json_t *r = parse(json);
    json_t *list = json_object_get(r, "annotators");
    CHECK_INT(jint(r, "total"), N_ANN);
    CHECK_INT(json_array_size(list), N_ANN);
    int64_t now = lp_now_ms();
    for (int a = 0; a < N_ANN && a < (int)json_array_size(list); a++) {
        json_t *x = json_array_get(list, (size_t)a); /* enrollment order */
        CHECK(strncmp(json_string_value(json_object_get(x, "pseudonym")), "ann-", 4) == 0);
        CHECK_INT(jint(x, "labels"), truth.labels[a]);
        CHECK_INT(jint(x, "skips"), truth.skips[a]);
        CHECK_NEAR(jnum(x, "epsilon_spent"), truth.spent[a], 1e-9);
        CHECK_NEAR(jnum(x, "epsilon_budget"), BUDGET, 0);
        CHECK(json_is_boolean(json_object_get(x, "revoked")) &&
              json_is_true(json_object_get(x, "revoked")) == truth.revoked[a]);
        int64_t enrolled = jint(x, "enrolled_ms");
        CHECK(enrolled >= truth.start_ms && enrolled <= now);
        json_t *last = json_object_get(x, "last_label_ms");
        if (truth.labels[a] == 0) {
            CHECK(json_is_null(last));
        } else {
            CHECK(json_integer_value(last) >= enrolled && json_integer_value(last) <= now);
        }
    }
    json_decref(r);
    /* a page of two from the second */
    CHECK_ERR(ldpref_admin_annotators(op, CAMPAIGN, 1, 2, &json), LDPREF_OK);
    r = parse(json);
    CHECK_INT(json_array_size(json_object_get(r, "annotators")), 2);
    CHECK_INT(jint(json_array_get(json_object_get(r, "annotators"), 0), "labels"), truth.labels[1]);
    json_decref(r);
}

static void check_tasks(ldpref_client *op)
{
    char *json = NULL;
    int64_t seen = 0, offset = 0;
    /* pages of 5: 5, 5, 2, then none */
    for (int page = 0; page < 4; page++, offset += 5) {
        CHECK_ERR(ldpref_admin_tasks(op, CAMPAIGN, offset, 5, &json), LDPREF_OK);
        json_t *r = parse(json);
        CHECK_INT(jint(r, "total"), N_TASKS);
        CHECK_INT(jint(r, "offset"), offset);
        json_t *list = json_object_get(r, "tasks");
        int64_t want = N_TASKS - offset < 5 ? (N_TASKS - offset > 0 ? N_TASKS - offset : 0) : 5;
        CHECK_INT(json_array_size(list), want);
        size_t i;
        json_t *t;
        json_array_foreach(list, i, t)
        {
            int64_t k = jint(t, "id") - truth.first_task;
            CHECK_INT(k, offset + (int64_t)i);
            if (k < 0 || k >= N_TASKS)
                continue;
            CHECK_INT(jint(t, "labels"), truth.task_labels[k]);
            CHECK_INT(jint(t, "labels_needed"), K);
            CHECK(json_is_true(json_object_get(t, "complete")) == (truth.task_labels[k] >= K));
            const char *prompt = json_string_value(json_object_get(t, "prompt"));
            if (k == 1) { /* 300 "é": cut to 200 characters, 400 bytes */
                CHECK_INT(strlen(prompt), 400);
                CHECK(json_is_true(json_object_get(t, "prompt_truncated")));
            } else if (k >= 2) {
                char want_prompt[32];
                snprintf(want_prompt, sizeof want_prompt, "question %d", (int)k);
                CHECK_STR(prompt, want_prompt);
                CHECK(json_is_false(json_object_get(t, "prompt_truncated")));
            }
            seen++;
        }
        json_decref(r);
    }
    CHECK_INT(seen, N_TASKS);
    /* the default page holds them all */
    CHECK_ERR(ldpref_admin_tasks(op, CAMPAIGN, 0, 0, &json), LDPREF_OK);
    json_t *r = parse(json);
    CHECK_INT(json_array_size(json_object_get(r, "tasks")), N_TASKS);
    CHECK_INT(jint(r, "limit"), 100);
    json_decref(r);
}

static void check_task_detail(ldpref_client *op)
{
    char *json = NULL;
    CHECK_ERR(ldpref_admin_task(op, truth.first_task, &json), LDPREF_OK);
    json_t *t = parse(json);
    CHECK_INT(jint(t, "id"), truth.first_task);
    CHECK_STR(json_string_value(json_object_get(t, "campaign")), CAMPAIGN);
    CHECK_STR(json_string_value(json_object_get(t, "source_id")), "v0");
    CHECK_STR(json_string_value(json_object_get(t, "prompt")), "and now?");
    json_t *ctx = json_object_get(t, "context"), *resp = json_object_get(t, "responses");
    CHECK_INT(json_array_size(ctx), 3);
    CHECK_STR(json_string_value(json_object_get(json_array_get(ctx, 0), "role")), "system");
    CHECK_STR(json_string_value(json_object_get(json_array_get(ctx, 2), "content")), "hello");
    CHECK_STR(json_string_value(json_array_get(resp, 0)), "r0");
    CHECK_STR(json_string_value(json_array_get(resp, 1)), "r1");
    CHECK_INT(jint(t, "labels"), truth.task_labels[0]);
    CHECK_INT(jint(t, "labels_needed"), K);
    CHECK_INT(jint(t, "skips"), truth.task_skips[0]);
    json_decref(t);
    /* every task's skips and labels, and the long prompt in full */
    for (int k = 0; k < N_TASKS; k++) {
        CHECK_ERR(ldpref_admin_task(op, truth.first_task + k, &json), LDPREF_OK);
        t = parse(json);
        CHECK_INT(jint(t, "skips"), truth.task_skips[k]);
        CHECK_INT(jint(t, "labels"), truth.task_labels[k]);
        if (k == 1)
            CHECK_INT(strlen(json_string_value(json_object_get(t, "prompt"))), 600);
        json_decref(t);
    }
    int skipped = 0;
    for (int k = 0; k < N_TASKS; k++)
        skipped += truth.task_skips[k];
    CHECK_INT(skipped, 1);
}

/* The value of `name{campaign="views"}` in the exposition, NAN if absent. */
static double gauge(const char *text, const char *name)
{
    char key[128];
    snprintf(key, sizeof key, "\n%s{campaign=\"" CAMPAIGN "\"} ", name);
    const char *p = text ? strstr(text, key) : NULL;
    return p ? strtod(p + strlen(key), NULL) : NAN;
}

static void check_metrics_and_stats(ldpref_client *op, const json_t *view)
{
    char url[128];
    snprintf(url, sizeof url, "%s/metrics", srv.url);
    http_reply r;
    CHECK(http_raw("GET", url, NULL, 0, srv.token, &r) == 0 && r.status == 200);
    const json_t *p = json_object_get(view, "progress"), *e = json_object_get(view, "epsilon");
    CHECK_NEAR(gauge(r.body, "ldpref_campaign_tasks"), (double)jint(p, "tasks"), 0);
    CHECK_NEAR(gauge(r.body, "ldpref_campaign_tasks_complete"), (double)jint(p, "tasks_complete"),
               0);
    CHECK_NEAR(gauge(r.body, "ldpref_campaign_labels"), (double)jint(p, "labels"), 0);
    CHECK_NEAR(gauge(r.body, "ldpref_campaign_labels_needed"), (double)jint(p, "labels_needed"), 0);
    CHECK_NEAR(gauge(r.body, "ldpref_campaign_annotators"), (double)jint(e, "annotators"), 0);
    /* printed with 6 decimals */
    CHECK_NEAR(gauge(r.body, "ldpref_campaign_epsilon_spent"), jnum(e, "spent_total"), 5e-7);
    http_reply_free(&r);

    char *json = NULL;
    CHECK_ERR(ldpref_admin_stats(op, &json), LDPREF_OK);
    json_t *st = parse(json), *c;
    size_t i;
    int found = 0;
    json_array_foreach(json_object_get(st, "campaigns"), i, c)
    {
        if (strcmp(json_string_value(json_object_get(c, "name")), CAMPAIGN) != 0)
            continue;
        found = 1;
        CHECK_INT(jint(c, "tasks"), jint(p, "tasks"));
        CHECK_INT(jint(c, "labels"), jint(p, "labels"));
        CHECK_INT(jint(c, "annotators"), jint(e, "annotators"));
        CHECK_INT(jint(c, "tasks_complete"), jint(p, "tasks_complete"));
        CHECK_NEAR(jnum(c, "epsilon_spent"), jnum(e, "spent_total"), 0);
    }
    CHECK(found);
    /* only this campaign has anything: the totals are its figures */
    CHECK_INT(jint(st, "labels"), truth.total_labels);
    CHECK_INT(jint(st, "assignments"), jint(p, "assignments"));
    CHECK_INT(jint(p, "assignments"), truth.total_labels + 1); /* + the skipped one */
    json_decref(st);
}

/* The CLI prints what the library returns. */
static void check_cli(ldpref_client *op)
{
    json_t *out = NULL;
    const char *campaign[] = {"ldpref", "admin", "campaign", CAMPAIGN, "--bucket-s", "120", NULL};
    CHECK_INT(cli_json(&out, campaign), 0);
    CHECK_INT(jint(json_object_get(out, "progress"), "labels"), truth.total_labels);
    CHECK_INT(jint(json_object_get(out, "labels_over_time"), "bucket_s"), 120);
    json_decref(out);

    const char *annotators[] = {"ldpref", "admin", "annotators", "--campaign", CAMPAIGN, NULL};
    CHECK_INT(cli_json(&out, annotators), 0);
    char *json = NULL;
    CHECK_ERR(ldpref_admin_annotators(op, CAMPAIGN, 0, 0, &json), LDPREF_OK);
    json_t *lib = parse(json);
    CHECK(out != NULL && json_equal(out, lib));
    json_decref(lib);
    json_decref(out);

    const char *tasks[] = {"ldpref",   "admin", "tasks",   "--campaign", CAMPAIGN,
                           "--offset", "10",    "--limit", "5",          NULL};
    CHECK_INT(cli_json(&out, tasks), 0);
    CHECK_INT(json_array_size(json_object_get(out, "tasks")), 2);
    CHECK_INT(jint(json_array_get(json_object_get(out, "tasks"), 0), "id"), truth.first_task + 10);
    json_decref(out);

    char id[32];
    snprintf(id, sizeof id, "%lld", (long long)truth.first_task);
    const char *task[] = {"ldpref", "admin", "task", id, NULL};
    CHECK_INT(cli_json(&out, task), 0);
    CHECK_STR(json_string_value(json_object_get(out, "source_id")), "v0");
    json_decref(out);

    /* errors: the server's code is the exit status */
    const char *bad_bucket[] = {"ldpref", "admin", "campaign", CAMPAIGN, "--bucket-s", "90", NULL};
    CHECK_INT(cli_json(&out, bad_bucket), LDPREF_EBAD_BUCKET);
    json_decref(out);
    const char *unknown[] = {"ldpref", "admin", "tasks", "--campaign", "nope", NULL};
    CHECK_INT(cli_json(&out, unknown), LDPREF_EUNKNOWN_CAMPAIGN);
    json_decref(out);
    const char *no_task[] = {"ldpref", "admin", "task", "999999", NULL};
    CHECK_INT(cli_json(&out, no_task), LDPREF_EUNKNOWN_TASK);
    json_decref(out);
}

/* GET path with the given bearer (NULL: none): the status and error name. */
static void expect_error(const char *path, const char *bearer, long status, const char *name)
{
    char url[512], got[64];
    snprintf(url, sizeof url, "%s%s", srv.url, path);
    http_reply r;
    CHECK(http_raw("GET", url, NULL, 0, bearer, &r) == 0);
    http_error_name(&r, got, sizeof got);
    check_record(r.status == status && strcmp(got, name) == 0, __FILE__, __LINE__,
                 "GET %s: %ld %s, want %ld %s", path, r.status, got, status, name);
    http_reply_free(&r);
}

static void check_errors(ldpref_client *op)
{
    char *json = NULL;
    CHECK_ERR(ldpref_admin_campaign(op, CAMPAIGN, 61, &json), LDPREF_EBAD_BUCKET);
    CHECK_ERR(ldpref_admin_campaign(op, CAMPAIGN, 30, &json), LDPREF_EBAD_BUCKET);
    CHECK_ERR(ldpref_admin_campaign(op, CAMPAIGN, 31 * 86400, &json), LDPREF_EBAD_BUCKET);
    CHECK_ERR(ldpref_admin_campaign(op, "nope", 0, &json), LDPREF_EUNKNOWN_CAMPAIGN);
    CHECK_ERR(ldpref_admin_tasks(op, CAMPAIGN, 0, 1001, &json), LDPREF_EBAD_PAGE);
    CHECK_ERR(ldpref_admin_tasks(op, CAMPAIGN, -1, 5, &json), LDPREF_EBAD_PAGE);
    CHECK_ERR(ldpref_admin_annotators(op, CAMPAIGN, 0, -3, &json), LDPREF_EBAD_PAGE);
    CHECK_ERR(ldpref_admin_annotators(op, "nope", 0, 0, &json), LDPREF_EUNKNOWN_CAMPAIGN);
    CHECK_ERR(ldpref_admin_task(op, 999999, &json), LDPREF_EUNKNOWN_TASK);
    CHECK(json == NULL);

    const char *tok = srv.token;
    expect_error("/v1/campaigns/view?campaign=" CAMPAIGN "&bucket_s=abc", tok, 400, "bad_bucket");
    expect_error("/v1/campaigns/view?campaign=" CAMPAIGN "&bucket_s=", tok, 400, "bad_bucket");
    expect_error("/v1/campaigns/view?campaign=" CAMPAIGN "&bucket_s=99999999999999999999", tok, 400,
                 "bad_bucket");
    expect_error("/v1/tasks?campaign=" CAMPAIGN "&limit=0", tok, 400, "bad_page");
    expect_error("/v1/tasks?campaign=" CAMPAIGN "&offset=1e3", tok, 400, "bad_page");
    expect_error("/v1/annotators?campaign=" CAMPAIGN "&limit=+5", tok, 400, "bad_page");
    expect_error("/v1/tasks/one", tok, 400, "bad_request");
    expect_error("/v1/tasks/one?id=0", tok, 400, "bad_request");
    expect_error("/v1/tasks/one?id=-4", tok, 400, "bad_request");
    expect_error("/v1/tasks/one?id=12x", tok, 400, "bad_request");
    expect_error("/v1/tasks/one?id=999999", tok, 404, "unknown_task");
    expect_error("/v1/annotators?campaign=nope", tok, 404, "unknown_campaign");
    char longname[200];
    memset(longname, 'a', sizeof longname - 1);
    longname[sizeof longname - 1] = '\0';
    char path[300];
    snprintf(path, sizeof path, "/v1/tasks?campaign=%s", longname);
    expect_error(path, tok, 404, "unknown_campaign");
    /* without the operator token, or with a wrong one, nothing is shown */
    static const char *const paths[] = {"/v1/campaigns/view?campaign=" CAMPAIGN,
                                        "/v1/annotators?campaign=" CAMPAIGN,
                                        "/v1/tasks?campaign=" CAMPAIGN, "/v1/tasks/one?id=1"};
    for (size_t i = 0; i < sizeof paths / sizeof paths[0]; i++) {
        expect_error(paths[i], NULL, 401, "unauthorized");
        expect_error(paths[i], "op_not-a-token", 401, "unauthorized");
    }
}

int main(void)
{
    if (sodium_init() < 0 || server_start(&srv, NULL) != 0) {
        check_record(0, __FILE__, __LINE__, "server starts");
        return check_summary();
    }
    truth.start_ms = lp_now_ms();
    snprintf(env_server, sizeof env_server, "LDPREF_SERVER=%s", srv.url);
    snprintf(env_token, sizeof env_token, "LDPREF_OPERATOR_TOKEN=%s", srv.token);
    ldpref_client *op = operator_client_open(&srv);
    setup_campaign(op);
    label(op);
    json_t *view = check_campaign_view(op);
    check_annotators(op);
    check_tasks(op);
    check_task_detail(op);
    check_metrics_and_stats(op, view);
    check_cli(op);
    check_errors(op);
    json_decref(view);
    ldpref_client_close(op);
    /* the counters the views read agree with the rows they count */
    CHECK_INT(server_db_scalar(&srv,
                               "SELECT sum(labels) FROM label_minutes m JOIN campaigns c "
                               "ON c.id = m.campaign WHERE c.name = ?1",
                               CAMPAIGN),
              server_db_count(&srv, "labels"));
    CHECK_INT(server_db_scalar(&srv, "SELECT sum(labels) FROM annotator_fill", NULL),
              truth.total_labels);
    CHECK_INT(server_db_scalar(&srv, "SELECT sum(assignments) FROM campaign_fill", NULL),
              server_db_count(&srv, "assignments"));
    CHECK_INT(server_stop(&srv), 0);
    server_cleanup(&srv);
    return check_summary();
}
