/*
 * e2e_quality.c — label quality under privacy, end to end: the real
 * ldpref-server (temporary SQLite database) and simulated annotators
 * answering through the real client library (randomized response on the
 * device, from the CSPRNG), one campaign per epsilon in {0.5, 1, 2, inf}.
 * Four good annotators (accuracy 0.9), one careless (0.5: random) and one
 * adversarial (0.2) answer every gold task with their true choice, which
 * they find by reading the two responses as served in their own
 * presentation order. Then GET /v1/quality (through ldpref_admin_quality
 * and the CLI) must cover the true accuracies and agreement with its 95%
 * intervals at the rate the binomial distribution allows, flag the careless
 * and adversarial annotators and no good one; /metrics carries the gauges;
 * a bad gold field is refused by name with nothing stored.
 */
#include "annotator_client.h"
#include "binomial.h"
#include "check.h"
#include "error.h"
#include "ldpref.h"
#include "operator_client.h"
#include "prng.h"
#include "rr.h"
#include "http_raw.h"
#include "server_proc.h"
#include "tmpdir.h"

#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define A 6
static const double ACCURACY[A] = {0.9, 0.9, 0.9, 0.9, 0.5, 0.2};
#define CARELESS 4
#define ADVERSARIAL 5
#define TAIL 1e-3 /* each count check fails by chance at most this often */

static server_proc srv;
static char keydir[256];

/*
 * Gold labels per annotator for a flag with power >= 0.999 at epsilon: the
 * careless annotator lies 0.26 below the others' pooled accuracy (0.76),
 * the adversarial one 0.62 below (0.82); a one-sided z-test at alpha/6
 * (Holm is never stricter than Bonferroni) with variance about 1.2 (0.76 *
 * 0.24 + k(e)) / n (the annotator's at the null and the five others') has
 * power 0.999 when n >= ((z(1 - 0.05/6) + z(0.999)) / 0.26)^2 * 1.2 *
 * (0.1824 + k(e)), k(e) = (c(e)^2 - 1) / 4. tests/unit/test_quality.c
 * checks the power over many seeds with the same estimator.
 */
static int gold_tasks_for(double eps)
{
    const double z_level = 2.3940, z_power = 3.0902;
    double c = lp_rr_debias(eps), k = (c * c - 1) / 4, f = (z_level + z_power) / 0.26;
    return (int)ceil(f * f * 1.2 * (0.76 * 0.24 + k));
}

/* Writes n gold tasks for campaign name: the better response is "good i",
 * placed first or second, and the gold field takes every accepted spelling. */
static void write_tasks(const char *path, const char *name, int n)
{
    /* the two responses' fields, whether "good" goes second, the gold value */
    static const struct {
        const char *first, *second;
        int good_second;
        const char *gold;
    } forms[] = {{"\"responses\":[", ",", 0, "\"a\""},
                 {"\"responses\":[", ",", 1, "1"},
                 {"\"chosen\":", ",\"rejected\":", 0, "\"chosen\""},
                 {"\"chosen\":", ",\"rejected\":", 1, "\"b\""}};
    FILE *f = fopen(path, "w");
    CHECK(f != NULL);
    for (int i = 0; f && i < n; i++) {
        int k = i % 4, list = forms[k].first[1] == 'r';
        const char *one = forms[k].good_second ? "bad" : "good";
        const char *two = forms[k].good_second ? "good" : "bad";
        fprintf(f,
                "{\"id\":\"%s-%d\",\"prompt\":\"q %s %d\",%s\"%s %s %d\"%s\"%s %s "
                "%d\"%s,\"gold\":%s}\n",
                name, i, name, i, forms[k].first, one, name, i, forms[k].second, two, name, i,
                list ? "]" : "", forms[k].gold);
    }
    if (f)
        fclose(f);
}

/* A campaign at eps (INFINITY: unprivatized labels) with n gold tasks that
 * every one of the A annotators labels. */
static void make_campaign(ldpref_client *op, const char *name, double eps, int n)
{
    ldpref_campaign spec;
    ldpref_campaign_init(&spec);
    spec.name = name;
    spec.epsilon_min = 0.1;
    spec.epsilon_max = isinf(eps) ? 10 : eps;
    spec.allow_infinite = isinf(eps);
    spec.epsilon_default = eps;
    spec.epsilon_budget = 1e6;
    spec.labels_per_task = A;
    char *json = NULL;
    CHECK_ERR(ldpref_admin_campaign_create(op, &spec, &json), LP_OK);
    ldpref_free(json);
    char path[400];
    snprintf(path, sizeof path, "%s/%s.jsonl", srv.dir, name);
    write_tasks(path, name, n);
    CHECK_ERR(ldpref_admin_tasks_load(op, path, name, &json), LP_OK);
    json_t *o = json ? json_loads(json, 0, NULL) : NULL;
    CHECK_INT(json_integer_value(json_object_get(o, "loaded")), n);
    json_decref(o);
    ldpref_free(json);
}

static ldpref_client *annotator(ldpref_client *op, const char *campaign, int who, double eps)
{
    char *json = NULL;
    CHECK_ERR(ldpref_admin_enrollment_tokens(op, campaign, 1, &json), LP_OK);
    char *token = json ? first_enrollment_token(json) : NULL;
    ldpref_free(json);
    char name[96], key[400];
    snprintf(name, sizeof name, "%s-%d.key", campaign, who);
    CHECK_ERR(annotator_key_ensure(keydir, name, key, sizeof key), LP_OK);
    ldpref_options o;
    annotator_options_init(&o, srv.url, key, eps, isinf(eps) ? INFINITY : 1e9);
    ldpref_client *c = NULL;
    CHECK_ERR(ldpref_client_open(&o, &c), LP_OK);
    CHECK_ERR(ldpref_enroll(c, token ? token : "x", NULL), LP_OK);
    free(token);
    return c;
}

/* The annotator answers every task it is given until the campaign has
 * nothing more for it: its true choice is the good response with
 * probability its accuracy (drawn from g: the simulation's own coin; the
 * library randomizes the answer with the CSPRNG). Returns the labels sent. */
static int label_all(ldpref_client *c, double accuracy, lp_prng *g)
{
    int sent = 0;
    for (;;) {
        ldpref_task *t = NULL;
        size_t n = 0;
        int rc = ldpref_next_tasks(c, 1000, &t, &n);
        if (rc != LDPREF_OK) {
            CHECK(rc == LDPREF_ECAMPAIGN_COMPLETE || rc == LDPREF_ENO_TASK);
            return sent;
        }
        ldpref_batch_item *items = calloc(n, sizeof *items);
        int unreadable = 0, failed = 0;
        for (size_t i = 0; items && i < n; i++) {
            int good_is_b = strncmp(t[i].b, "good ", 5) == 0;
            unreadable += !good_is_b && strncmp(t[i].a, "good ", 5) != 0;
            int correct = lp_prng_bernoulli(g, accuracy);
            items[i].task = &t[i];
            items[i].choice = correct == good_is_b ? LDPREF_CHOICE_B : LDPREF_CHOICE_A;
        }
        CHECK_ERR(ldpref_answer_batch(c, items, n), LP_OK);
        for (size_t i = 0; items && i < n; i++) {
            failed += items[i].error != LDPREF_OK;
            sent += items[i].error == LDPREF_OK;
        }
        CHECK_INT(unreadable, 0);
        CHECK_INT(failed, 0);
        free(items);
        ldpref_tasks_free(t, n);
    }
}

static double num(const json_t *o, const char *key)
{
    const json_t *v = json_object_get(o, key);
    return json_is_number(v) ? json_number_value(v) : NAN;
}

static int covers(const json_t *est, double truth)
{
    return json_is_object(est) && num(est, "low") <= truth && truth <= num(est, "high");
}

struct tally {
    int gold_cover, gold_total, agree_cover, agree_total, flags_wanted, flags_missed, good_flagged;
};

/* One campaign at eps: label, ask for the quality report, tally. */
static void run_campaign(ldpref_client *op, const char *name, double eps, uint64_t seed,
                         struct tally *t)
{
    int n = gold_tasks_for(eps);
    make_campaign(op, name, eps, n);
    lp_prng g;
    lp_prng_seed(&g, seed);
    char pseudonym[A][64];
    for (int a = 0; a < A; a++) {
        ldpref_client *c = annotator(op, name, a, eps);
        CHECK_INT(label_all(c, ACCURACY[a], &g), n);
        ldpref_client_close(c);
    }
    char *json = NULL;
    CHECK_ERR(ldpref_admin_quality(op, name, &json), LP_OK);
    json_t *q = json ? json_loads(json, 0, NULL) : NULL;
    ldpref_free(json);
    CHECK_STR(json_string_value(json_object_get(q, "campaign")), name);
    const json_t *gold = json_object_get(q, "gold");
    CHECK_INT(json_integer_value(json_object_get(gold, "labels")), A * n);
    /* the pooled gold accuracy and the agreement of the campaign */
    double pooled = 0, agree = 0;
    int pairs = 0;
    for (int j = 0; j < A; j++) {
        pooled += ACCURACY[j] / A;
        for (int k = j + 1; k < A; k++, pairs++)
            agree += ACCURACY[j] * ACCURACY[k] + (1 - ACCURACY[j]) * (1 - ACCURACY[k]);
    }
    agree /= pairs;
    t->gold_cover += covers(json_object_get(gold, "accuracy"), pooled);
    t->gold_total++;
    const json_t *ag = json_object_get(q, "agreement");
    CHECK_INT(json_integer_value(json_object_get(ag, "pairs")), (long long)n * A * (A - 1) / 2);
    CHECK_INT(json_integer_value(json_object_get(ag, "tasks")), n);
    t->agree_cover += covers(ag, agree);
    t->agree_total++;
    const json_t *plan = json_object_get(q, "planning");
    CHECK(num(plan, "pairs_needed_worst_case") > 0 && num(plan, "width") == 0.05);
    const json_t *list = json_object_get(q, "annotators");
    CHECK_INT(json_array_size(list), A);
    for (int a = 0; a < A; a++) {
        const json_t *x = json_array_get(list, (size_t)a); /* annotators by id: enrolment order */
        snprintf(pseudonym[a], sizeof pseudonym[a], "%s",
                 json_string_value(json_object_get(x, "pseudonym")) ?: "");
        CHECK(strncmp(pseudonym[a], "ann-", 4) == 0);
        CHECK_INT(json_integer_value(json_object_get(x, "gold_labels")), n);
        t->gold_cover += covers(json_object_get(x, "gold_accuracy"), ACCURACY[a]);
        t->gold_total++;
        int flagged = json_is_true(json_object_get(x, "flagged"));
        if (a == CARELESS || a == ADVERSARIAL) {
            t->flags_wanted++;
            t->flags_missed += !flagged;
            if (flagged)
                CHECK(json_is_string(json_object_get(x, "flag_reason")));
        } else {
            t->good_flagged += flagged;
            CHECK(json_is_null(json_object_get(x, "flag_reason")) == !flagged);
        }
        printf("%s eps=%g annotator %d (accuracy %.1f): gold %.3f [%.3f, %.3f] agreement %.3f "
               "flagged %d\n",
               name, eps, a, ACCURACY[a], num(json_object_get(x, "gold_accuracy"), "estimate"),
               num(json_object_get(x, "gold_accuracy"), "low"),
               num(json_object_get(x, "gold_accuracy"), "high"),
               num(json_object_get(x, "agreement"), "estimate"), flagged);
    }
    json_decref(q);
}

/* A bad gold field is refused by name; nothing of the file is stored. */
static void test_bad_gold(ldpref_client *op)
{
    long long before = server_db_count(&srv, "tasks");
    char path[400];
    snprintf(path, sizeof path, "%s/bad-gold.jsonl", srv.dir);
    FILE *f = fopen(path, "w");
    CHECK(f != NULL);
    if (f) {
        fputs("{\"id\":\"g1\",\"prompt\":\"p\",\"responses\":[\"x\",\"y\"],\"gold\":\"a\"}\n", f);
        fputs("{\"id\":\"g2\",\"prompt\":\"p\",\"responses\":[\"x\",\"y\"],\"gold\":\"chosen\"}\n",
              f);
        fclose(f);
    }
    char *json = NULL;
    CHECK_ERR(ldpref_admin_tasks_load(op, path, NULL, &json), LDPREF_EBAD_GOLD);
    CHECK(strstr(ldpref_errmsg(op), "line 2") != NULL);
    ldpref_free(json);
    CHECK_INT(server_db_count(&srv, "tasks"), before);
    CHECK_INT(server_db_scalar(&srv, "SELECT count(*) FROM tasks WHERE source_id = ?1", "g1"), 0);
    /* the tasks stored earlier carry their gold answer in the task's own
     * orientation: response 0 or 1 is the "good" one */
    CHECK_INT(server_db_scalar(&srv,
                               "SELECT count(*) FROM tasks WHERE gold IS NULL OR (gold = 0) <> "
                               "(response0 LIKE 'good %')",
                               NULL),
              0);
}

/* The operator's task views name each task's gold answer as the file did:
 * the task forms of write_tasks alternate a, b, a, b. */
static void test_views_show_gold(ldpref_client *op, const char *name)
{
    char *json = NULL;
    CHECK_ERR(ldpref_admin_tasks(op, name, 0, 4, &json), LP_OK);
    json_t *o = json ? json_loads(json, 0, NULL) : NULL;
    ldpref_free(json);
    json_t *tasks = json_object_get(o, "tasks");
    CHECK_INT(json_array_size(tasks), 4);
    static const char *const want[] = {"a", "b", "a", "b"};
    for (size_t i = 0; i < json_array_size(tasks) && i < 4; i++)
        CHECK_STR(json_string_value(json_object_get(json_array_get(tasks, i), "gold")), want[i]);
    int64_t id = json_integer_value(json_object_get(json_array_get(tasks, 1), "id"));
    json_decref(o);
    CHECK_ERR(ldpref_admin_task(op, id, &json), LP_OK);
    o = json ? json_loads(json, 0, NULL) : NULL;
    ldpref_free(json);
    CHECK_STR(json_string_value(json_object_get(o, "gold")), "b");
    CHECK(strncmp(json_string_value(json_array_get(json_object_get(o, "responses"), 1)) ?: "",
                  "good ", 5) == 0);
    json_decref(o);
}

/* The CLI prints the same report; an unknown campaign is unknown_campaign;
 * /metrics carries the gauges. */
static void test_cli_and_metrics(const char *name)
{
    char env_server[128], env_token[256];
    snprintf(env_server, sizeof env_server, "LDPREF_SERVER=%s", srv.url);
    snprintf(env_token, sizeof env_token, "LDPREF_OPERATOR_TOKEN=%s", srv.token);
    const char *env[] = {env_server, env_token, NULL};
    char *out = NULL;
    const char *argv[] = {"ldpref", "admin", "quality", "--campaign", name, NULL};
    CHECK_INT(run_tool(argv, env, &out), 0);
    json_t *q = out ? json_loads(out, 0, NULL) : NULL;
    CHECK_STR(json_string_value(json_object_get(q, "campaign")), name);
    CHECK_INT(json_array_size(json_object_get(q, "annotators")), A);
    json_decref(q);
    free(out);
    /* as a table: one row per annotator, the flagged ones marked */
    const char *table[] = {"ldpref",  "--format",   "table", "admin",
                           "quality", "--campaign", name,    NULL};
    CHECK_INT(run_tool(table, env, &out), 0);
    CHECK(out && strstr(out, "pseudonym") && strstr(out, "gold_accuracy.estimate"));
    int rows = 0;
    for (const char *p = out; p && (p = strstr(p, "ann-")) != NULL; p += 4)
        rows++;
    CHECK_INT(rows, A);
    free(out);
    const char *bad[] = {"ldpref", "admin", "quality", "--campaign", "nope", NULL};
    CHECK_INT(run_tool(bad, env, NULL), LDPREF_EUNKNOWN_CAMPAIGN);
    /* the gauges are rendered in the background: the first scrape starts it */
    char url[160], gold[200], agreement[200];
    snprintf(url, sizeof url, "%s/metrics", srv.url);
    snprintf(gold, sizeof gold, "ldpref_campaign_gold_accuracy{campaign=\"%s\"} ", name);
    snprintf(agreement, sizeof agreement, "ldpref_campaign_agreement{campaign=\"%s\"} ", name);
    int found = 0;
    http_reply r;
    for (int tries = 0; tries < 200 && !found; tries++) {
        if (tries > 0)
            usleep(50 * 1000);
        CHECK_INT(http_raw("GET", url, NULL, 0, srv.token, &r), 0);
        CHECK_INT(r.status, 200);
        found = r.body && strstr(r.body, gold) != NULL && strstr(r.body, agreement) != NULL;
        http_reply_free(&r);
    }
    CHECK(found);
    /* operators only */
    snprintf(url, sizeof url, "%s/v1/quality?campaign=%s", srv.url, name);
    CHECK_INT(http_raw("GET", url, NULL, 0, NULL, &r), 0);
    CHECK_INT(r.status, 401);
    http_reply_free(&r);
    snprintf(url, sizeof url, "%s/v1/quality?campaign=%s&width=0", srv.url, name);
    CHECK_INT(http_raw("GET", url, NULL, 0, srv.token, &r), 0);
    char err[64];
    http_error_name(&r, err, sizeof err);
    CHECK_INT(r.status, 400);
    CHECK_STR(err, "bad_request");
    http_reply_free(&r);
}

int main(void)
{
    if (lp_rng_init() != LP_OK || server_start(&srv, NULL) != 0 ||
        tmpdir_create_shm(keydir, sizeof keydir, "quality") != 0) {
        CHECK(0);
        return check_summary();
    }
    ldpref_client *op = operator_client_open(&srv);
    static const double eps[] = {0.5, 1.0, 2.0, INFINITY};
    static const char *const names[] = {"q-eps05", "q-eps1", "q-eps2", "q-inf"};
    struct tally t = {0};
    for (int e = 0; op && e < 4; e++)
        run_campaign(op, names[e], eps[e], 4100 + (uint64_t)e, &t);
    /* Coverage: 4 campaigns x (6 annotators + the pooled figure) gold
     * intervals, each covering with probability >= 0.93 (the claim
     * tests/unit/test_quality.c checks over many seeds), and 4 agreement
     * intervals (>= 0.92). */
    int min_gold = binom_lower(t.gold_total, 0.93, TAIL);
    int min_agree = binom_lower(t.agree_total, 0.92, TAIL);
    printf("gold intervals covering: %d of %d (>= %d); agreement: %d of %d (>= %d)\n", t.gold_cover,
           t.gold_total, min_gold, t.agree_cover, t.agree_total, min_agree);
    CHECK(t.gold_cover >= min_gold);
    CHECK(t.agree_cover >= min_agree);
    /* Flags: each careless or adversarial annotator is flagged with
     * probability >= 0.999 (gold_tasks_for), so missing two of the eight
     * happens with probability <= 28 * 1e-6. A good annotator (0.9) lies
     * above the others' pooled accuracy (0.68), where the one-sided test
     * flags with probability far below its level alpha/6 at the null. */
    printf("flags: %d of %d wanted missed; good annotators flagged: %d\n", t.flags_missed,
           t.flags_wanted, t.good_flagged);
    CHECK_INT(t.flags_wanted, 8);
    CHECK(t.flags_missed <= 1);
    CHECK_INT(t.good_flagged, 0);
    if (op) {
        test_bad_gold(op);
        test_cli_and_metrics(names[3]);
        test_views_show_gold(op, names[3]);
        ldpref_client_close(op);
    }
    server_cleanup(&srv);
    tmpdir_remove(keydir);
    return check_summary();
}
