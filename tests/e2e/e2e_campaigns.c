/*
 * e2e_campaigns.c — campaigns that finish, end to end: the real
 * ldpref-server on 127.0.0.1 (temporary SQLite database) driven through the
 * real client library and CLI. Labels per task, leases that expire, skips,
 * quotas, progress figures checked against what the test itself did, and
 * the exact error names of bad campaign settings and bad signed requests.
 */
#include "annotator_client.h"
#include "check.h"
#include "clock.h"
#include "error.h"
#include "ldpref.h"
#include "operator_client.h"
#include "raw_annotator.h"
#include "server_proc.h"
#include "wire.h"

#include <sodium.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define MAX_TASKS 16

static server_proc srv;
static char env_server[128], env_token[256];

/* Runs the CLI with the server and operator token in its environment. */
static int cli(char **out, const char *const *argv)
{
    const char *env[] = {env_server, env_token, NULL};
    return run_tool(argv, env, out);
}

/* Creates campaign name (labels_per_task k, quota q; 0: the defaults) and
 * uploads n tasks to it; their ids into ids. */
static void campaign_with_tasks(ldpref_client *op, const char *name, int k, int64_t q, int n,
                                int64_t *ids)
{
    ldpref_campaign spec;
    ldpref_campaign_init(&spec);
    spec.name = name;
    spec.labels_per_task = k;
    spec.annotator_quota = q;
    char *json = NULL;
    CHECK_ERR(ldpref_admin_campaign_create(op, &spec, &json), LP_OK);
    json_t *c = json ? json_loads(json, 0, NULL) : NULL;
    CHECK_INT(json_integer_value(json_object_get(c, "labels_per_task")), k ? k : 1);
    if (q)
        CHECK_INT(json_integer_value(json_object_get(c, "annotator_quota")), q);
    else
        CHECK(json_is_null(json_object_get(c, "annotator_quota")));
    json_decref(c);
    ldpref_free(json);

    char path[400];
    snprintf(path, sizeof path, "%s/%s.jsonl", srv.dir, name);
    FILE *f = fopen(path, "w");
    CHECK(f != NULL);
    for (int i = 0; f && i < n; i++)
        fprintf(
            f,
            "{\"id\":\"%s-%d\",\"prompt\":\"question %d\",\"responses\":[\"one %d\",\"two %d\"]}\n",
            name, i, i, i, i);
    if (f)
        fclose(f);
    CHECK_ERR(ldpref_admin_tasks_load(op, path, name, &json), LP_OK);
    c = json ? json_loads(json, 0, NULL) : NULL;
    json_t *range = json_object_get(c, "task_ids");
    int64_t first = json_integer_value(json_array_get(range, 0));
    for (int i = 0; i < n; i++)
        ids[i] = first + i;
    CHECK_INT(json_integer_value(json_array_get(range, 1)), first + n - 1);
    json_decref(c);
    ldpref_free(json);
}

/* A new annotator of campaign with its own key and ledger in srv.dir. */
static ldpref_client *annotator(ldpref_client *op, const char *campaign, const char *name)
{
    char *json = NULL;
    CHECK_ERR(ldpref_admin_enrollment_tokens(op, campaign, 1, &json), LP_OK);
    char *token = json ? first_enrollment_token(json) : NULL;
    ldpref_free(json);
    static char keys[16][400];
    static int used;
    char *key = keys[used++ % 16];
    CHECK_ERR(annotator_key_ensure(srv.dir, name, key, sizeof keys[0]), LP_OK);
    ldpref_options o;
    annotator_options_init(&o, srv.url, key, 10, 1000);
    ldpref_client *c = NULL;
    CHECK_ERR(ldpref_client_open(&o, &c), LP_OK);
    CHECK_ERR(ldpref_enroll(c, token ? token : "x", NULL), LP_OK);
    free(token);
    return c;
}

/* The annotator's progress must be exactly these figures. */
static void check_progress(ldpref_client *c, const char *campaign, int64_t total, int64_t complete,
                           int64_t labels, int64_t needed, int64_t own, int64_t quota)
{
    ldpref_progress p;
    CHECK_ERR(ldpref_progress_get(c, &p), LP_OK);
    CHECK_STR(p.campaign, campaign);
    CHECK_INT(p.tasks_total, total);
    CHECK_INT(p.tasks_complete, complete);
    CHECK_INT(p.labels, labels);
    CHECK_INT(p.labels_needed, needed);
    CHECK_INT(p.annotator_labels, own);
    CHECK_INT(p.annotator_quota, quota);
}

static int index_of(const int64_t *ids, int n, int64_t id)
{
    for (int i = 0; i < n; i++)
        if (ids[i] == id)
            return i;
    return -1;
}

/* labels_per_task = 2, three annotators, ten tasks: annotators take turns
 * fetching one task and answering it until every one of them hears that
 * the campaign is complete. Each task ends with exactly two labels from
 * two different annotators, and progress is exact after every answer. */
static void test_two_labels_per_task(ldpref_client *op)
{
    enum { N = 10, K = 2, A = 3 };
    int64_t ids[N];
    campaign_with_tasks(op, "pairs", K, 0, N, ids);
    ldpref_client *ann[A];
    for (int a = 0; a < A; a++) {
        char name[32];
        snprintf(name, sizeof name, "pairs%d.key", a);
        ann[a] = annotator(op, "pairs", name);
        check_progress(ann[a], "pairs", N, 0, 0, N * K, 0, 0);
    }
    int labels_of[N] = {0}, answered[A][N] = {{0}}, own[A] = {0}, total = 0, complete = 0;
    int done[A] = {0}, rounds = 0;
    while ((!done[0] || !done[1] || !done[2]) && rounds++ < 200) {
        for (int a = 0; a < A; a++) {
            ldpref_task *t = NULL;
            size_t n = 0;
            int rc = ldpref_next_tasks(ann[a], 1, &t, &n);
            done[a] = rc == LDPREF_ECAMPAIGN_COMPLETE;
            if (rc != LDPREF_OK) {
                /* nothing left for this one: either done, or every open
                 * task already carries its label */
                CHECK(rc == LDPREF_ECAMPAIGN_COMPLETE || rc == LDPREF_ENO_TASK);
                continue;
            }
            int i = index_of(ids, N, t[0].task_id);
            CHECK(i >= 0);
            if (i < 0) {
                ldpref_tasks_free(t, n);
                continue;
            }
            CHECK_INT(answered[a][i], 0); /* never a task this annotator answered */
            CHECK(labels_of[i] < K);      /* only tasks that still need labels */
            ldpref_receipt r;
            CHECK_ERR(ldpref_answer(ann[a], &t[0], (int)randombytes_uniform(2), &r), LP_OK);
            ldpref_tasks_free(t, n);
            answered[a][i] = 1;
            own[a]++;
            total++;
            if (++labels_of[i] == K)
                complete++;
            check_progress(ann[a], "pairs", N, complete, total, N * K, own[a], 0);
        }
    }
    CHECK(done[0] && done[1] && done[2]);
    CHECK_INT(total, N * K);
    for (int i = 0; i < N; i++)
        CHECK_INT(labels_of[i], K);
    CHECK_INT(
        server_db_scalar(&srv,
                         "SELECT count(*) FROM (SELECT l.task FROM labels l JOIN tasks t ON "
                         "t.id = l.task JOIN campaigns c ON c.id = t.campaign WHERE c.name = "
                         "?1 GROUP BY l.task HAVING count(DISTINCT l.annotator) = 2) AS pairs",
                         "pairs"),
        N);
    CHECK_INT(server_db_scalar(&srv,
                               "SELECT count(*) FROM labels l JOIN tasks t ON t.id = l.task JOIN "
                               "campaigns c ON c.id = t.campaign WHERE c.name = ?1",
                               "pairs"),
              N * K);
    for (int a = 0; a < A; a++)
        ldpref_client_close(ann[a]);
}

/* /v1/stats and /metrics carry the campaign's progress; the CLI's
 * `progress` and `next` say the campaign is complete. */
static void test_stats_metrics_cli(ldpref_client *op)
{
    char *json = NULL;
    CHECK_ERR(ldpref_admin_stats(op, &json), LP_OK);
    json_t *st = json ? json_loads(json, 0, NULL) : NULL;
    ldpref_free(json);
    json_t *c, *pairs = NULL;
    size_t i;
    json_array_foreach(json_object_get(st, "campaigns"), i, c)
    {
        if (strcmp(json_string_value(json_object_get(c, "name")), "pairs") == 0)
            pairs = c;
    }
    CHECK(pairs != NULL);
    CHECK_INT(json_integer_value(json_object_get(pairs, "labels_per_task")), 2);
    CHECK(json_is_null(json_object_get(pairs, "annotator_quota")));
    CHECK_INT(json_integer_value(json_object_get(pairs, "tasks_complete")), 10);
    CHECK_INT(json_integer_value(json_object_get(pairs, "labels_needed")), 20);
    CHECK_INT(json_integer_value(json_object_get(pairs, "labels")), 20);
    json_decref(st);

    http_reply r;
    CHECK_INT(raw_get(srv.url, "/metrics", srv.token, &r), 200);
    CHECK(r.body && strstr(r.body, "ldpref_campaign_tasks_complete{campaign=\"pairs\"} 10\n"));
    CHECK(r.body && strstr(r.body, "ldpref_campaign_labels_needed{campaign=\"pairs\"} 20\n"));
    http_reply_free(&r);

    char keyarg[440], *out = NULL;
    snprintf(keyarg, sizeof keyarg, "--key=%s/pairs0.key", srv.dir);
    const char *progress[] = {"ldpref", keyarg, "progress", NULL};
    CHECK_INT(cli(&out, progress), 0);
    json_t *p = out ? json_loads(out, 0, NULL) : NULL;
    CHECK_STR(json_string_value(json_object_get(p, "campaign")), "pairs");
    CHECK_INT(json_integer_value(json_object_get(p, "tasks_total")), 10);
    CHECK_INT(json_integer_value(json_object_get(p, "tasks_complete")), 10);
    CHECK_INT(json_integer_value(json_object_get(p, "labels")), 20);
    CHECK_INT(json_integer_value(json_object_get(p, "labels_needed")), 20);
    CHECK(json_is_null(json_object_get(p, "annotator_quota")));
    json_decref(p);
    free(out);
    const char *next[] = {"ldpref", keyarg, "next", NULL};
    CHECK_INT(cli(NULL, next), LP_ECAMPAIGN_COMPLETE);
}

/* A skipped task is never offered to that annotator again, costs nothing,
 * and goes to someone else; skipping is refused where a label would be. */
static void test_skip(ldpref_client *op)
{
    int64_t ids[3];
    campaign_with_tasks(op, "skips", 1, 0, 3, ids);
    ldpref_client *x = annotator(op, "skips", "skipx.key"),
                  *y = annotator(op, "skips", "skipy.key");
    ldpref_task *t = NULL;
    size_t n = 0;
    CHECK_ERR(ldpref_next_tasks(x, 1, &t, &n), LP_OK);
    CHECK_INT(t[0].task_id, ids[0]);
    ldpref_tasks_free(t, n);
    ldpref_budget before, after;
    CHECK_ERR(ldpref_budget_get(x, &before), LP_OK);
    CHECK_ERR(ldpref_skip(x, ids[0]), LP_OK);
    CHECK_ERR(ldpref_skip(x, ids[0]), LP_OK); /* again: still skipped */
    CHECK_ERR(ldpref_budget_get(x, &after), LP_OK);
    CHECK(after.spent == before.spent);
    check_progress(x, "skips", 3, 0, 0, 3, 0, 0);
    CHECK_INT(server_db_count(&srv, "labels"), 20);
    /* answering the skipped task is refused on the device: nothing is
     * randomized, spent, stored or sent */
    ldpref_receipt skipped_r;
    CHECK_ERR(ldpref_answer_id(x, ids[0], LDPREF_CHOICE_B, &skipped_r), LP_ENOT_ASSIGNED);
    CHECK_ERR(ldpref_budget_get(x, &after), LP_OK);
    CHECK(after.spent == before.spent);
    CHECK_INT(after.labels, before.labels);
    CHECK_INT(after.pending, before.pending);
    CHECK_INT(server_db_count(&srv, "labels"), 20);

    /* x never sees it again, however often it asks */
    for (int k = 0; k < 3; k++) {
        CHECK_ERR(ldpref_next_tasks(x, 3, &t, &n), LP_OK);
        CHECK_INT(n, 2);
        for (size_t i = 0; i < n; i++)
            CHECK(t[i].task_id != ids[0]);
        ldpref_tasks_free(t, n);
    }
    /* y gets it: the skip left the task open */
    CHECK_ERR(ldpref_next_tasks(y, 3, &t, &n), LP_OK);
    CHECK_INT(n, 1);
    CHECK_INT(n ? t[0].task_id : 0, ids[0]);
    ldpref_tasks_free(t, n);

    /* refusals: a task of someone else, no such task, an answered task */
    CHECK_ERR(ldpref_skip(y, ids[1]), LP_ENOT_ASSIGNED);
    CHECK_ERR(ldpref_skip(y, ids[2] + 100000), LP_EUNKNOWN_TASK);
    ldpref_receipt r;
    CHECK_ERR(ldpref_answer_id(x, ids[1], 0, &r), LP_OK);
    /* an answered task cannot be skipped: the library refuses before sending
     * (the server would answer conflicting_label), and the assignment stays */
    CHECK_ERR(ldpref_skip(x, ids[1]), LP_EALREADY_ANSWERED);
    char task_arg[32];
    snprintf(task_arg, sizeof task_arg, "%lld", (long long)ids[1]);
    CHECK_INT(server_db_scalar(&srv,
                               "SELECT count(*) FROM assignments WHERE task = ?1 AND skipped = 1",
                               task_arg),
              0);
    /* the CLI: skip the last one, then nothing is left for x */
    char keyarg[440], id[32], *out = NULL;
    snprintf(keyarg, sizeof keyarg, "--key=%s/skipx.key", srv.dir);
    snprintf(id, sizeof id, "%lld", (long long)ids[2]);
    const char *skip[] = {"ldpref", keyarg, "skip", id, NULL};
    CHECK_INT(cli(&out, skip), 0);
    json_t *j = out ? json_loads(out, 0, NULL) : NULL;
    CHECK_INT(json_integer_value(json_object_get(j, "task_id")), ids[2]);
    CHECK(json_is_true(json_object_get(j, "skipped")));
    json_decref(j);
    free(out);
    CHECK_ERR(ldpref_next_tasks(x, 3, &t, &n), LP_ENO_TASK);
    check_progress(x, "skips", 3, 1, 1, 3, 1, 0);
    ldpref_client_close(x);
    ldpref_client_close(y);
}

/* A quota caps labels plus open leases; the campaign's completion is
 * reported before the quota. */
static void test_quota(ldpref_client *op)
{
    int64_t ids[6];
    campaign_with_tasks(op, "quota", 1, 3, 6, ids);
    ldpref_client *p = annotator(op, "quota", "quotap.key"),
                  *q = annotator(op, "quota", "quotaq.key");
    ldpref_task *t = NULL, *t2 = NULL;
    size_t n = 0, n2 = 0;
    CHECK_ERR(ldpref_next_tasks(p, 10, &t, &n), LP_OK);
    CHECK_INT(n, 3); /* leases count against the quota */
    CHECK_ERR(ldpref_next_tasks(p, 10, &t2, &n2), LP_OK);
    CHECK_INT(n2, 3); /* the same pending three, nothing more */
    for (size_t i = 0; i < n && i < n2; i++)
        CHECK_INT(t2[i].task_id, t[i].task_id);
    ldpref_tasks_free(t2, n2);
    for (size_t i = 0; i < n; i++) {
        ldpref_receipt r;
        CHECK_ERR(ldpref_answer(p, &t[i], 1, &r), LP_OK);
        check_progress(p, "quota", 6, (int64_t)i + 1, (int64_t)i + 1, 6, (int64_t)i + 1, 3);
    }
    ldpref_tasks_free(t, n);
    CHECK_ERR(ldpref_next_tasks(p, 1, &t, &n), LP_EQUOTA_REACHED);
    char keyarg[440];
    snprintf(keyarg, sizeof keyarg, "--key=%s/quotap.key", srv.dir);
    const char *next[] = {"ldpref", keyarg, "next", NULL};
    CHECK_INT(cli(NULL, next), LP_EQUOTA_REACHED);

    CHECK_ERR(ldpref_next_tasks(q, 10, &t, &n), LP_OK);
    CHECK_INT(n, 3);
    for (size_t i = 0; i < n; i++) {
        ldpref_receipt r;
        CHECK_ERR(ldpref_answer(q, &t[i], 0, &r), LP_OK);
    }
    ldpref_tasks_free(t, n);
    check_progress(q, "quota", 6, 6, 6, 6, 3, 3);
    CHECK_ERR(ldpref_next_tasks(q, 1, &t, &n), LP_ECAMPAIGN_COMPLETE);
    CHECK_ERR(ldpref_next_tasks(p, 1, &t, &n), LP_ECAMPAIGN_COMPLETE);
    ldpref_client_close(p);
    ldpref_client_close(q);
}

/* Bad labels_per_task and annotator_quota values get their error names and
 * store nothing; the CLI sends its flags. */
static void test_bad_campaign_values(void)
{
    static const struct {
        const char *body;
        int want;
    } cases[] = {
        {"{\"name\":\"b1\",\"labels_per_task\":0}", LP_EWRONG_TYPE},
        {"{\"name\":\"b2\",\"labels_per_task\":-3}", LP_EWRONG_TYPE},
        {"{\"name\":\"b3\",\"labels_per_task\":1.5}", LP_EWRONG_TYPE},
        {"{\"name\":\"b4\",\"labels_per_task\":\"2\"}", LP_EWRONG_TYPE},
        {"{\"name\":\"b5\",\"labels_per_task\":null}", LP_EWRONG_TYPE},
        {"{\"name\":\"b6\",\"annotator_quota\":0}", LP_EWRONG_TYPE},
        {"{\"name\":\"b7\",\"annotator_quota\":-1}", LP_EWRONG_TYPE},
        {"{\"name\":\"b8\",\"annotator_quota\":true}", LP_EWRONG_TYPE},
        {"{\"name\":\"b9\",\"annotator_quota\":2.5}", LP_EWRONG_TYPE},
        {"{\"name\":\"b10\",\"labels_per_tasks\":2}", LP_EUNKNOWN_FIELD},
    };
    long long before = server_db_count(&srv, "campaigns");
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char url[128];
        snprintf(url, sizeof url, "%s/v1/campaigns", srv.url);
        http_reply r;
        http_raw("POST", url, cases[i].body, strlen(cases[i].body), srv.token, &r);
        char name[64];
        http_error_name(&r, name, sizeof name);
        check_record(strcmp(name, lp_error_name(cases[i].want)) == 0 &&
                         r.status == lp_error_http_status(cases[i].want),
                     __FILE__, __LINE__, "%s: want %s, got %ld %s", cases[i].body,
                     lp_error_name(cases[i].want), r.status, r.body ? r.body : "");
        http_reply_free(&r);
    }
    CHECK_INT(server_db_count(&srv, "campaigns"), before);
    CHECK_INT(server_db_count(&srv, "campaign_fill"), before);

    char *out = NULL;
    const char *zero[] = {"ldpref", "admin", "campaign-create", "c0", "--labels-per-task",
                          "0",      NULL};
    CHECK_INT(cli(NULL, zero), LP_EINVALID_ARGUMENT);
    const char *quota[] = {"ldpref", "admin", "campaign-create", "c1", "--quota", "x", NULL};
    CHECK_INT(cli(NULL, quota), LP_EINVALID_ARGUMENT);
    CHECK_INT(server_db_count(&srv, "campaigns"), before);
    const char *ok[] = {
        "ldpref", "admin", "campaign-create", "c2", "--labels-per-task", "3", "--quota",
        "40",     NULL};
    CHECK_INT(cli(&out, ok), 0);
    json_t *c = out ? json_loads(out, 0, NULL) : NULL;
    CHECK_INT(json_integer_value(json_object_get(c, "labels_per_task")), 3);
    CHECK_INT(json_integer_value(json_object_get(c, "annotator_quota")), 40);
    json_decref(c);
    free(out);
}

/* Skip and progress requests are authenticated before anything else:
 * exact error names, nothing stored. */
static void test_bad_signed_requests(ldpref_client *op)
{
    char *json = NULL;
    CHECK_ERR(ldpref_admin_enrollment_tokens(op, "skips", 1, &json), LP_OK);
    char *token = json ? first_enrollment_token(json) : NULL;
    ldpref_free(json);
    raw_annotator a;
    CHECK_INT(raw_enroll(&a, srv.url, token ? token : "x"), 201);
    free(token);
    json_t *tasks = NULL;
    raw_next(&a, 1, &tasks); /* may be empty: the checks below come first */
    json_decref(tasks);

    lp_skip_msg s = {.task_id = 1, .timestamp_ms = 0};
    memcpy(s.key, a.pk, LP_KEY_BYTES);
    int64_t now = lp_now_ms();
    lp_progress_msg p = {.timestamp_ms = now};
    memcpy(p.key, a.pk, LP_KEY_BYTES);
    struct bad_case {
        const char *what;
        json_t *body;
        const char *path;
        int want;
    } cases[6];
    int nc = 0;
    s.timestamp_ms = now;
    lp_sign_skip(&s, a.sk);
    s.sig[0] ^= 1;
    cases[nc++] = (struct bad_case){"skip, bad signature", lp_wire_skip_encode(&s),
                                    "/v1/tasks/skip", LP_EBAD_SIGNATURE};
    s.timestamp_ms = now - 3600 * 1000;
    lp_sign_skip(&s, a.sk);
    cases[nc++] = (struct bad_case){"skip, stale", lp_wire_skip_encode(&s), "/v1/tasks/skip",
                                    LP_ESTALE_TIMESTAMP};
    json_t *missing = lp_wire_skip_encode(&s);
    json_object_del(missing, "task_id");
    cases[nc++] =
        (struct bad_case){"skip, no task_id", missing, "/v1/tasks/skip", LP_EMISSING_FIELD};
    lp_sign_progress(&p, a.sk);
    p.sig[5] ^= 1;
    cases[nc++] = (struct bad_case){"progress, bad signature", lp_wire_progress_encode(&p),
                                    "/v1/progress", LP_EBAD_SIGNATURE};
    lp_progress_msg stranger = p;
    randombytes_buf(stranger.key, LP_KEY_BYTES);
    cases[nc++] = (struct bad_case){"progress, unknown key", lp_wire_progress_encode(&stranger),
                                    "/v1/progress", LP_EUNKNOWN_KEY};
    /* a skip signature is no progress signature: the domain tags differ */
    lp_progress_msg swapped = {.timestamp_ms = now};
    memcpy(swapped.key, a.pk, LP_KEY_BYTES);
    lp_skip_msg s2 = {.task_id = 0, .timestamp_ms = now};
    memcpy(s2.key, a.pk, LP_KEY_BYTES);
    lp_sign_skip(&s2, a.sk);
    memcpy(swapped.sig, s2.sig, LP_SIG_BYTES);
    cases[nc++] =
        (struct bad_case){"progress with a skip signature", lp_wire_progress_encode(&swapped),
                          "/v1/progress", LP_EBAD_SIGNATURE};
    long long skipped =
        server_db_scalar(&srv, "SELECT count(*) FROM assignments WHERE skipped = 1", NULL);
    for (int i = 0; i < nc; i++) {
        http_reply r;
        raw_post_json(srv.url, cases[i].path, cases[i].body, NULL, &r);
        char name[64];
        http_error_name(&r, name, sizeof name);
        check_record(strcmp(name, lp_error_name(cases[i].want)) == 0 &&
                         r.status == lp_error_http_status(cases[i].want),
                     __FILE__, __LINE__, "%s: want %s, got %ld %s", cases[i].what,
                     lp_error_name(cases[i].want), r.status, r.body ? r.body : "");
        http_reply_free(&r);
        json_decref(cases[i].body);
    }
    CHECK_INT(server_db_scalar(&srv, "SELECT count(*) FROM assignments WHERE skipped = 1", NULL),
              skipped);
}

/* On a server with one-second leases: an unanswered assignment returns its
 * task to the pool when its lease expires, and the first annotator's late
 * label is still accepted. */
static void test_lease_expiry(void)
{
    server_proc s2;
    const char *args[] = {"--lease-seconds", "1", NULL};
    if (server_start(&s2, args) != 0) {
        check_record(0, __FILE__, __LINE__, "server with --lease-seconds 1 starts");
        return;
    }
    server_proc saved = srv;
    srv = s2;
    ldpref_client *op = operator_client_open(&srv);
    int64_t ids[2];
    campaign_with_tasks(op, "lease", 1, 0, 2, ids);
    ldpref_client *l1 = annotator(op, "lease", "lease1.key"),
                  *l2 = annotator(op, "lease", "lease2.key");
    ldpref_task *t1 = NULL, *t2 = NULL;
    size_t n1 = 0, n2 = 0;
    CHECK_ERR(ldpref_next_tasks(l1, 2, &t1, &n1), LP_OK);
    CHECK_INT(n1, 2);
    CHECK_ERR(ldpref_next_tasks(l2, 2, &t2, &n2), LP_ENO_TASK); /* both leased to l1 */
    usleep(1300 * 1000);
    CHECK_ERR(ldpref_next_tasks(l2, 2, &t2, &n2), LP_OK); /* expired: back in the pool */
    CHECK_INT(n2, 2);
    ldpref_tasks_free(t2, n2);
    ldpref_receipt r;
    CHECK_ERR(ldpref_answer(l1, &t1[0], 0, &r), LP_OK); /* late, still accepted */
    check_progress(l1, "lease", 2, 1, 1, 2, 1, 0);
    ldpref_task *t3 = NULL;
    size_t n3 = 0;
    CHECK_ERR(ldpref_next_tasks(l2, 2, &t3, &n3), LP_OK); /* the complete one is dropped */
    CHECK_INT(n3, 1);
    CHECK_INT(n3 ? t3[0].task_id : 0, t1[1].task_id);
    CHECK_ERR(ldpref_answer(l2, &t3[0], 1, &r), LP_OK);
    check_progress(l2, "lease", 2, 2, 2, 2, 1, 0);
    CHECK_ERR(ldpref_next_tasks(l1, 2, &t2, &n2), LP_ECAMPAIGN_COMPLETE); /* t2: NULL */
    ldpref_tasks_free(t1, n1);
    ldpref_tasks_free(t3, n3);
    ldpref_client_close(l1);
    ldpref_client_close(l2);
    ldpref_client_close(op);
    CHECK_INT(server_stop(&srv), 0);
    server_cleanup(&srv);
    srv = saved;
}

int main(void)
{
    if (sodium_init() < 0 || server_start(&srv, NULL) != 0) {
        check_record(0, __FILE__, __LINE__, "server starts");
        return check_summary();
    }
    snprintf(env_server, sizeof env_server, "LDPREF_SERVER=%s", srv.url);
    snprintf(env_token, sizeof env_token, "LDPREF_OPERATOR_TOKEN=%s", srv.token);
    ldpref_client *op = operator_client_open(&srv);
    test_two_labels_per_task(op);
    test_stats_metrics_cli(op);
    test_skip(op);
    test_quota(op);
    test_bad_campaign_values();
    test_bad_signed_requests(op);
    ldpref_client_close(op);
    CHECK_INT(server_stop(&srv), 0);
    server_cleanup(&srv);
    test_lease_expiry();
    return check_summary();
}
