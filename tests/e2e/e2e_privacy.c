/*
 * e2e_privacy.c — the privacy promises, checked on the wire and in the
 * server's database, through the real client library:
 *
 *  1. The true answer never leaves the device. Every byte the client sends
 *     is captured by a recording TCP relay. Each label message must carry
 *     exactly the protocol's fields (nothing that could hold the true answer)
 *     and its z must disagree with the true answer at the randomized-
 *     response rate q(eps): with n labels, the number of disagreements must
 *     lie within n*q +- 5.5*sqrt(n*q*(1-q)) — so z is not the true answer.
 *  2. Re-asking cannot average the noise away: answering the same task 1,000
 *     times stores one label and spends epsilon once; the same comparison
 *     re-issued under a new task id, in either order, gets the same
 *     randomized answer.
 *  3. The local budget refuses an over-cap label and nothing is sent.
 */
#include "annotator_client.h"
#include "check.h"
#include "error.h"
#include "ldpref.h"
#include "operator_client.h"
#include "rr.h"
#include "server_proc.h"
#include "tcp_proxy.h"

#include <jansson.h>
#include <math.h>
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define N_LABELS 400
#define EPS 0.5

static server_proc srv;

static char *token(ldpref_client *op, const char *campaign)
{
    char *json = NULL;
    if (ldpref_admin_enrollment_tokens(op, campaign, 1, &json) != LDPREF_OK)
        return NULL;
    json_t *j = json_loads(json, 0, NULL);
    char *t = strdup(json_string_value(json_array_get(json_object_get(j, "tokens"), 0)));
    json_decref(j);
    ldpref_free(json);
    return t;
}

static ldpref_client *annotator(ldpref_client *op, const char *name, const char *url, double cap,
                                double total)
{
    char key[400], file[128];
    snprintf(file, sizeof file, "%s.key", name);
    if (annotator_key_ensure(srv.dir, file, key, sizeof key) != LDPREF_OK)
        return NULL;
    ldpref_options o;
    annotator_options_init(&o, url, key, cap, total);
    ldpref_client *c = NULL;
    if (ldpref_client_open(&o, &c) != LDPREF_OK)
        return NULL;
    char *t = token(op, NULL);
    int rc = ldpref_enroll(c, t, NULL);
    free(t);
    CHECK_ERR(rc, LP_OK);
    return c;
}

/* Loads n tasks "<tag><i>" with prompt "<prefix><i>" and responses
 * "first <i>" and "second <i>" (in the other order when swap). */
static void load_tasks(ldpref_client *op, const char *tag, const char *prefix, int n, int swap)
{
    char path[400];
    snprintf(path, sizeof path, "%s/%s.jsonl", srv.dir, tag);
    FILE *f = fopen(path, "w");
    for (int i = 0; i < n; i++)
        fprintf(f, "{\"id\":\"%s%d\",\"prompt\":\"%s%d\",\"responses\":[\"%s %d\",\"%s %d\"]}\n",
                tag, i, prefix, i, swap ? "second" : "first", i, swap ? "first" : "second", i);
    fclose(f);
    CHECK_ERR(ldpref_admin_tasks_load(op, path, NULL, NULL), LP_OK);
}

static void test_wire_never_carries_truth(ldpref_client *op)
{
    tcp_proxy proxy;
    CHECK(tcp_proxy_start(&proxy, srv.port) == 0);
    char url[64];
    snprintf(url, sizeof url, "http://127.0.0.1:%d", proxy.port);
    ldpref_client *c = annotator(op, "wire", url, EPS, 1e6);
    CHECK(c != NULL);
    if (c == NULL)
        return;

    /* The true answer for every task: "b" is better. */
    ldpref_task *tasks = NULL;
    size_t n = 0;
    CHECK_ERR(ldpref_next_tasks(c, N_LABELS, &tasks, &n), LP_OK);
    CHECK_INT(n, N_LABELS);
    for (size_t i = 0; i < n; i++) {
        ldpref_receipt r;
        CHECK_ERR(ldpref_answer(c, &tasks[i], 1, &r), LP_OK);
    }
    ldpref_tasks_free(tasks, n);
    ldpref_client_close(c);

    json_t *bodies = tcp_proxy_bodies(&proxy, "POST /v1/labels ");
    CHECK_INT(json_array_size(bodies), N_LABELS);

    static const char *const allowed[] = {"key",   "task_id",   "z",        "epsilon",
                                          "nonce", "timestamp", "signature"};
    int disagree = 0, exact_fields = 0;
    size_t i;
    json_t *b;
    json_array_foreach(bodies, i, b)
    {
        int fields_ok = json_object_size(b) == 7;
        for (int k = 0; k < 7; k++)
            fields_ok &= json_object_get(b, allowed[k]) != NULL;
        exact_fields += fields_ok;
        disagree += json_integer_value(json_object_get(b, "z")) != 1;
        fields_ok &= json_real_value(json_object_get(b, "epsilon")) == EPS;
    }
    CHECK_INT(exact_fields, N_LABELS);
    double q = lp_rr_flip_prob(EPS), mean = N_LABELS * q;
    double bound = 5.5 * sqrt(N_LABELS * q * (1 - q));
    check_record(fabs(disagree - mean) <= bound, __FILE__, __LINE__,
                 "z disagrees with the true answer %d times of %d (expected %.1f +- %.1f)",
                 disagree, N_LABELS, mean, bound);
    json_decref(bodies);
    tcp_proxy_stop(&proxy);
}

static void test_reasking(ldpref_client *op)
{
    ldpref_client *c = annotator(op, "reask", srv.url, 1.0, 1e6);
    CHECK(c != NULL);
    if (c == NULL)
        return;
    ldpref_task *tasks = NULL;
    size_t n = 0;
    CHECK_ERR(ldpref_next_tasks(c, 1, &tasks, &n), LP_OK);
    long long before = server_db_count(&srv, "labels");
    ldpref_budget b0, b1;
    CHECK_ERR(ldpref_budget_get(c, &b0), LP_OK);
    int z0 = -1, same = 0, accepted = 0, already = 0;
    for (int i = 0; i < 1000; i++) {
        ldpref_receipt r;
        memset(&r, 0, sizeof r);
        /* Even a changed true answer cannot re-randomize: every repeat is
         * already answered and carries the first receipt. */
        int rc = ldpref_answer(c, &tasks[0], i % 3, &r);
        accepted += rc == LDPREF_OK;
        already += rc == LDPREF_EALREADY_ANSWERED;
        if (rc == LDPREF_OK || rc == LDPREF_EALREADY_ANSWERED) {
            if (z0 < 0)
                z0 = r.z;
            same += r.z == z0 && r.label_id > 0;
        }
    }
    CHECK_INT(accepted, 1);
    CHECK_INT(already, 999);
    CHECK_INT(same, 1000);
    CHECK_INT(server_db_count(&srv, "labels"), before + 1);
    CHECK_ERR(ldpref_budget_get(c, &b1), LP_OK);
    CHECK_NEAR(b1.spent - b0.spent, 1.0, 1e-12);
    CHECK_INT(b1.labels - b0.labels, 1);
    ldpref_tasks_free(tasks, n);
    ldpref_client_close(c);
}

/*
 * The same comparisons re-issued under new task ids, with the responses in
 * the other order: every randomized answer must name the same response.
 * Prompts "r<k>" are used by these tasks only; the true answer is always
 * "first <k> is better".
 */
static int answer_reissue_tasks(ldpref_client *c, char reported[][64], int record)
{
    ldpref_task *tasks = NULL;
    size_t n = 0;
    int answered = 0;
    if (ldpref_next_tasks(c, 1000, &tasks, &n) != LDPREF_OK)
        return 0;
    for (size_t i = 0; i < n; i++) {
        int k;
        if (sscanf(tasks[i].prompt, "r%d", &k) != 1 || k < 0 || k >= 40)
            continue;
        int prefer_b = strncmp(tasks[i].b, "first", 5) == 0;
        ldpref_receipt r;
        if (ldpref_answer(c, &tasks[i], prefer_b, &r) != LDPREF_OK)
            continue;
        const char *named = r.z ? tasks[i].b : tasks[i].a;
        if (record)
            snprintf(reported[k], 64, "%s", named);
        answered += record || strcmp(reported[k], named) == 0;
    }
    ldpref_tasks_free(tasks, n);
    return answered;
}

static void test_reissued_comparison(ldpref_client *op)
{
    ldpref_client *c = annotator(op, "reissue", srv.url, 1.0, 1e6);
    CHECK(c != NULL);
    if (c == NULL)
        return;
    char reported[40][64];
    load_tasks(op, "orig", "r", 40, 0);
    CHECK_INT(answer_reissue_tasks(c, reported, 1), 40);
    ldpref_budget b0, b1;
    CHECK_ERR(ldpref_budget_get(c, &b0), LP_OK);
    load_tasks(op, "again", "r", 40, 1);
    CHECK_INT(answer_reissue_tasks(c, reported, 0), 40);
    CHECK_ERR(ldpref_budget_get(c, &b1), LP_OK);
    CHECK_NEAR(b1.spent, b0.spent, 1e-12); /* a memoized comparison spends nothing new */
    ldpref_client_close(c);
}

static void test_local_budget(ldpref_client *op)
{
    tcp_proxy proxy;
    CHECK(tcp_proxy_start(&proxy, srv.port) == 0);
    char url[64];
    snprintf(url, sizeof url, "http://127.0.0.1:%d", proxy.port);
    ldpref_client *c = annotator(op, "budget", url, 1.0, 2.5);
    CHECK(c != NULL);
    if (c == NULL)
        return;
    ldpref_task *tasks = NULL;
    size_t n = 0;
    CHECK_ERR(ldpref_next_tasks(c, 3, &tasks, &n), LP_OK);
    long long before = server_db_count(&srv, "labels");
    ldpref_receipt r;
    CHECK_ERR(ldpref_answer(c, &tasks[0], 1, &r), LP_OK);
    CHECK_ERR(ldpref_answer(c, &tasks[1], 1, &r), LP_OK);
    CHECK_ERR(ldpref_answer(c, &tasks[2], 1, &r), LP_ELOCAL_BUDGET_EXCEEDED);
    CHECK_INT(server_db_count(&srv, "labels"), before + 2);
    json_t *bodies = tcp_proxy_bodies(&proxy, "POST /v1/labels ");
    CHECK_INT(json_array_size(bodies), 2);
    json_decref(bodies);
    ldpref_budget b;
    CHECK_ERR(ldpref_budget_get(c, &b), LP_OK);
    CHECK_NEAR(b.spent, 2.0, 1e-12);
    ldpref_tasks_free(tasks, n);
    ldpref_client_close(c);
    tcp_proxy_stop(&proxy);
}

int main(void)
{
    lp_rng_init();
    if (server_start(&srv, NULL) != 0) {
        check_record(0, __FILE__, __LINE__, "server starts");
        return check_summary();
    }
    ldpref_client *op = operator_client_open(&srv);
    load_tasks(op, "w", "q", N_LABELS + 20, 0);

    test_wire_never_carries_truth(op);
    test_reasking(op);
    test_local_budget(op);
    test_reissued_comparison(op);

    ldpref_client_close(op);
    server_cleanup(&srv);
    return check_summary();
}
