/*
 * test_registry.c — the learning registry on a real file: corruption
 * settings (newest in force, active ones), training runs (create, update,
 * get, list, interrupted runs) with their typed settings, models with
 * their feature plan and corruption rows, activations, the retrain
 * schedule, task features and label counters; append-only tables refuse
 * changes; everything survives a reopen. (The migration of a version-2
 * database: test_registry_migration.c.)
 */
#include "campaigns.h"
#include "check.h"
#include "error.h"
#include "registry.h"
#include "store.h"
#include "tasks.h"
#include "tmpdir.h"

#include <math.h>
#include <sodium.h>
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static char dir[64];
static char path[256];
static lp_store *s;

static void open_store(void)
{
    char err[256];
    lp_store_opts o = {.path = path, .sync_full = 1, .read_conns = 2};
    CHECK_INT(lp_store_open(&o, &s, err, sizeof err), LP_OK);
}

/* An SQL statement run on a connection of its own succeeds (1) or not (0). */
static int sql_ok(const char *sql)
{
    sqlite3 *db;
    if (sqlite3_open(path, &db) != SQLITE_OK)
        return -1;
    int ok = sqlite3_exec(db, sql, NULL, NULL, NULL) == SQLITE_OK;
    sqlite3_close(db);
    return ok;
}

static long long sql_count(const char *sql)
{
    sqlite3 *db;
    sqlite3_stmt *st;
    long long v = -1;
    if (sqlite3_open(path, &db) != SQLITE_OK)
        return -1;
    if (sqlite3_prepare_v2(db, sql, -1, &st, NULL) == SQLITE_OK && sqlite3_step(st) == SQLITE_ROW)
        v = sqlite3_column_int64(st, 0);
    sqlite3_finalize(st);
    sqlite3_close(db);
    return v;
}

/* Request settings as the learner stores them: loss, epochs, the rest
 * defaults. */
static lp_train_settings settings(const char *loss, int epochs)
{
    lp_train_settings t = {.beta = 1,
                           .rmax = 1,
                           .tau = 0.5,
                           .norm_bound = INFINITY,
                           .max_iter = 500,
                           .epochs = epochs,
                           .lr = 0.5,
                           .batch = 1,
                           .text_dim = 4096,
                           .text_bigrams = 1,
                           .text_length = 1,
                           .threads = 1,
                           .activate = 1};
    snprintf(t.loss, sizeof t.loss, "%s", loss);
    snprintf(t.optimizer, sizeof t.optimizer, "lbfgs");
    snprintf(t.features, sizeof t.features, "auto");
    return t;
}

static void test_corruption(int64_t other)
{
    lp_corruption cur;
    CHECK_INT(lp_registry_corruption_current(s, 1, &cur), LP_OK);
    CHECK_INT(cur.id, 0); /* none yet */

    lp_corruption a = {.campaign = 1, .alpha = 0.2, .strategy = LP_ADV_FLIP, .seed = 7};
    CHECK_INT(lp_registry_corruption_add(s, &a), LP_OK);
    CHECK(a.id > 0);
    CHECK(a.created_ms > 0);
    CHECK_INT(lp_registry_corruption_current(s, 1, &cur), LP_OK);
    CHECK_INT(cur.id, a.id);
    CHECK_STR(cur.campaign_name, "default");
    CHECK(cur.alpha == 0.2);
    CHECK_INT(cur.strategy, LP_ADV_FLIP);
    CHECK_INT(cur.seed, 7);

    lp_corruption b = {
        .campaign = other, .alpha = 0.3, .strategy = LP_ADV_BACKDOOR, .seed = 9, .feature = 2};
    CHECK_INT(lp_registry_corruption_add(s, &b), LP_OK);
    lp_corruption *act;
    size_t n;
    CHECK_INT(lp_registry_corruption_active(s, &act, &n), LP_OK);
    CHECK_INT(n, 2);
    if (n == 2) {
        CHECK_INT(act[0].campaign, 1); /* by campaign id */
        CHECK_INT(act[1].campaign, other);
        CHECK_INT(act[1].strategy, LP_ADV_BACKDOOR);
        CHECK_INT(act[1].feature, 2);
    }
    free(act);

    /* newer settings replace the older ones; alpha 0 switches it off */
    lp_corruption off = {.campaign = 1, .alpha = 0.0, .strategy = LP_ADV_FLIP, .seed = 1};
    CHECK_INT(lp_registry_corruption_add(s, &off), LP_OK);
    CHECK(off.id > b.id);
    CHECK_INT(lp_registry_corruption_current(s, 1, &cur), LP_OK);
    CHECK_INT(cur.id, off.id);
    CHECK_INT(lp_registry_corruption_active(s, &act, &n), LP_OK);
    CHECK_INT(n, 1);
    if (n == 1)
        CHECK_INT(act[0].id, b.id);
    free(act);

    /* a bad record is refused and leaves nothing */
    lp_corruption bad = {.campaign = 1, .alpha = 0.7, .strategy = LP_ADV_FLIP};
    CHECK(lp_registry_corruption_add(s, &bad) != LP_OK);
    lp_corruption nocampaign = {.campaign = 999, .alpha = 0.1, .strategy = LP_ADV_FLIP};
    CHECK(lp_registry_corruption_add(s, &nocampaign) != LP_OK);
    CHECK_INT(sql_count("SELECT count(*) FROM corruption_settings"), 3);
    CHECK_INT(sql_ok("UPDATE corruption_settings SET alpha = 0.1"), 0); /* append-only */
}

static void test_runs(void)
{
    lp_run r1 = {.settings = settings("square-chipo", 1)};
    snprintf(r1.trigger, sizeof r1.trigger, "manual");
    CHECK_INT(lp_registry_run_create(s, &r1), LP_OK);
    CHECK(r1.id > 0);
    CHECK_INT(r1.status, LP_RUN_QUEUED);
    lp_run got;
    CHECK_INT(lp_registry_run_get(s, r1.id, &got), LP_OK);
    CHECK_STR(got.trigger, "manual");
    CHECK_STR(got.settings.loss, "square-chipo");
    CHECK_STR(got.settings.optimizer, "lbfgs");
    CHECK(isinf(got.settings.norm_bound));
    CHECK_INT(got.settings.cutoff, 0);
    CHECK_INT(got.status, LP_RUN_QUEUED);
    CHECK(isnan(got.objective) && isnan(got.grad_norm));
    CHECK_INT(got.created_ms, r1.created_ms);
    CHECK_INT(got.started_ms, 0);

    r1.status = LP_RUN_TRAINING;
    r1.cutoff = 40;
    r1.labels = 37;
    r1.iterations = 12;
    r1.evaluations = 15;
    r1.objective = 0.25;
    r1.grad_norm = 1e-7;
    r1.started_ms = r1.created_ms + 5;
    CHECK_INT(lp_registry_run_update(s, &r1), LP_OK);
    CHECK_INT(lp_registry_run_get(s, r1.id, &got), LP_OK);
    CHECK_INT(got.status, LP_RUN_TRAINING);
    CHECK_INT(got.cutoff, 40);
    CHECK_INT(got.labels, 37);
    CHECK_INT(got.iterations, 12);
    CHECK_INT(got.evaluations, 15);
    CHECK(got.objective == 0.25 && got.grad_norm == 1e-7);
    CHECK_INT(got.started_ms, r1.started_ms);
    CHECK_INT(got.error, 0);

    lp_run r2 = {.settings = settings("dpo", 2)}, r3 = {.settings = settings("ipo", 3)};
    snprintf(r2.trigger, sizeof r2.trigger, "interval");
    snprintf(r3.trigger, sizeof r3.trigger, "labels");
    CHECK_INT(lp_registry_run_create(s, &r2), LP_OK);
    CHECK_INT(lp_registry_run_create(s, &r3), LP_OK);
    r3.status = LP_RUN_SUCCEEDED;
    r3.finished_ms = r3.created_ms + 1;
    CHECK_INT(lp_registry_run_update(s, &r3), LP_OK);

    lp_run *list;
    size_t n;
    CHECK_INT(lp_registry_run_list(s, 2, &list, &n), LP_OK);
    CHECK_INT(n, 2);
    if (n == 2) {
        CHECK_INT(list[0].id, r3.id); /* newest first */
        CHECK_INT(list[1].id, r2.id);
        CHECK_STR(list[1].settings.loss, "dpo");
        CHECK_INT(list[1].settings.epochs, 2);
    }
    free(list);
    CHECK_INT(lp_registry_run_get(s, r3.id + 100, &got), LP_EUNKNOWN_RUN);
    CHECK_INT(lp_registry_run_get(s, 0, &got), LP_EUNKNOWN_RUN);

    /* a restart fails the unfinished runs, and only those */
    lp_store_close(s);
    open_store();
    CHECK_INT(lp_registry_runs_interrupted(s), LP_OK);
    CHECK_INT(lp_registry_run_get(s, r1.id, &got), LP_OK);
    CHECK_INT(got.status, LP_RUN_FAILED);
    CHECK_ERR(got.error, LP_ETRAINING_FAILED);
    CHECK(strstr(got.message, "interrupted") != NULL);
    CHECK(got.finished_ms > 0);
    CHECK_INT(got.labels, 37); /* the rest of the record stays */
    CHECK_INT(lp_registry_run_get(s, r2.id, &got), LP_OK);
    CHECK_INT(got.status, LP_RUN_FAILED);
    CHECK_INT(lp_registry_run_get(s, r3.id, &got), LP_OK);
    CHECK_INT(got.status, LP_RUN_SUCCEEDED);
    CHECK_INT(got.finished_ms, r3.finished_ms);
    CHECK_INT(lp_registry_run_get(s, r3.id, &got), LP_OK);
    CHECK(lp_run_status_final(got.status));
    CHECK(!lp_run_status_final(LP_RUN_TRAINING));
    CHECK_STR(lp_run_status_name(LP_RUN_STORING), "storing");
}

static void test_models(int64_t other)
{
    int64_t active;
    CHECK_INT(lp_registry_active_version(s, &active), LP_OK);
    CHECK_INT(active, 0);

    lp_run run = {.settings = settings("square-chipo", 1)};
    snprintf(run.trigger, sizeof run.trigger, "manual");
    CHECK_INT(lp_registry_run_create(s, &run), LP_OK);

    lp_model_record m1 = {.run = run.id,
                          .campaign = 0,
                          .cutoff = 10,
                          .labels = 9,
                          .duration_ms = 33,
                          .dim = 2,
                          .summary = "{\"d\":2}",
                          .model = "{\"d\":2,\"theta\":[1,2]}"};
    snprintf(m1.loss, sizeof m1.loss, "square_chi");
    snprintf(m1.features, sizeof m1.features, "dense");
    CHECK_INT(lp_registry_model_add(s, &m1, 1), LP_OK);
    CHECK(m1.version > 0);
    CHECK_INT(lp_registry_active_version(s, &active), LP_OK);
    CHECK_INT(active, m1.version);

    lp_model_record m2 = m1;
    m2.campaign = other;
    m2.model = "{\"d\":2,\"theta\":[3,4]}";
    lp_corruption in_force; /* the other campaign's backdoor settings */
    CHECK_INT(lp_registry_corruption_current(s, other, &in_force), LP_OK);
    m2.corruption = &in_force;
    m2.n_corruption = 1;
    m2.anti_model = m1.version;                         /* recorded for anti rows only */
    CHECK_INT(lp_registry_model_add(s, &m2, 0), LP_OK); /* stored, not served */
    CHECK(m2.version > m1.version);
    CHECK_INT(lp_registry_active_version(s, &active), LP_OK);
    CHECK_INT(active, m1.version);

    lp_model_record got;
    CHECK_INT(lp_registry_model_get(s, m2.version, &got), LP_OK);
    CHECK_STR(got.model, "{\"d\":2,\"theta\":[3,4]}");
    CHECK_STR(got.summary, "{\"d\":2}");
    CHECK_INT(got.n_corruption, 1);
    if (got.n_corruption == 1) {
        CHECK_INT(got.corruption[0].id, in_force.id);
        CHECK_INT(got.corruption[0].strategy, LP_ADV_BACKDOOR);
        CHECK_STR(got.corruption[0].campaign_name, "other");
    }
    CHECK_INT(got.anti_model, 0);
    CHECK_STR(got.features, "dense");
    CHECK_INT(got.dim, 2);
    CHECK_STR(got.settings.loss, "square-chipo");
    CHECK_STR(got.loss, "square_chi");
    CHECK_STR(got.campaign_name, "other");
    CHECK_INT(got.run, run.id);
    CHECK_INT(got.cutoff, 10);
    CHECK_INT(got.labels, 9);
    CHECK_INT(got.duration_ms, 33);
    lp_model_record_clear(&got);
    CHECK_INT(lp_registry_model_get(s, m1.version, &got), LP_OK);
    CHECK_INT(got.campaign, 0);
    CHECK_STR(got.campaign_name, "");
    CHECK_INT(got.n_corruption, 0);
    lp_model_record_clear(&got);
    CHECK_INT(lp_registry_model_get(s, m2.version + 1, &got), LP_EUNKNOWN_MODEL);

    lp_model_record *list;
    size_t n;
    CHECK_INT(lp_registry_model_list(s, &list, &n), LP_OK);
    CHECK_INT(n, 2);
    if (n == 2) {
        CHECK_INT(list[0].version, m2.version); /* newest first */
        CHECK(list[0].model == NULL);           /* listed without the model text */
        CHECK_STR(list[1].summary, "{\"d\":2}");
    }
    for (size_t i = 0; i < n; i++)
        lp_model_record_clear(&list[i]);
    free(list);

    /* activations append; the newest wins; an unknown model is refused */
    CHECK_INT(lp_registry_activate(s, m2.version), LP_OK);
    CHECK_INT(lp_registry_active_version(s, &active), LP_OK);
    CHECK_INT(active, m2.version);
    CHECK_INT(lp_registry_activate(s, m1.version), LP_OK);
    CHECK_INT(lp_registry_active_version(s, &active), LP_OK);
    CHECK_INT(active, m1.version);
    CHECK_INT(lp_registry_activate(s, m2.version + 50), LP_EUNKNOWN_MODEL);
    CHECK_INT(sql_count("SELECT count(*) FROM activations"), 3);
    lp_model_record nomodel = m1;
    nomodel.model = NULL;
    CHECK_INT(lp_registry_model_add(s, &nomodel, 0), LP_EINVALID_ARGUMENT);

    CHECK_INT(sql_ok("UPDATE models SET labels = 0"), 0); /* append-only */
    CHECK_INT(sql_ok("DELETE FROM models"), 0);
    CHECK_INT(sql_ok("UPDATE activations SET version = 1"), 0);
    CHECK_INT(sql_count("SELECT count(*) FROM models"), 2);
}

static void test_schedule(void)
{
    lp_schedule sc;
    CHECK_INT(lp_registry_schedule_get(s, &sc), LP_OK);
    CHECK_INT(sc.interval_s, 0);
    CHECK_INT(sc.every_labels, 0);
    CHECK_INT(sc.has_settings, 0);

    lp_schedule a = {
        .interval_s = 60, .every_labels = 0, .has_settings = 1, .settings = settings("dpo", 1)};
    lp_schedule b = {
        .interval_s = 0, .every_labels = 500, .has_settings = 1, .settings = settings("dpo", 2)};
    CHECK_INT(lp_registry_schedule_set(s, &a), LP_OK);
    CHECK_INT(lp_registry_schedule_set(s, &b), LP_OK);
    CHECK_INT(lp_registry_schedule_get(s, &sc), LP_OK);
    CHECK_INT(sc.interval_s, 0);
    CHECK_INT(sc.every_labels, 500);
    CHECK_INT(sc.has_settings, 1);
    CHECK_INT(sc.settings.epochs, 2);
    CHECK_INT(sql_count("SELECT count(*) FROM retrain_schedule"), 2); /* appended */
    lp_schedule neg = {.interval_s = -1, .has_settings = 1, .settings = settings("dpo", 1)};
    CHECK(lp_registry_schedule_set(s, &neg) != LP_OK);
    CHECK_INT(sql_count("SELECT count(*) FROM retrain_schedule"), 2);
}

static void test_tasks_and_labels(int64_t other)
{
    double f0[3] = {1.5, -2, 0.25}, f1[3] = {0, 1e300, -1e-300};
    lp_task_in t[2] = {{"with", "p", "a", "b", 1, f0, f1, 3, NULL, 0, LP_GOLD_NONE},
                       {"without", "p", "a", "b", -1, NULL, NULL, 0, NULL, 0, LP_GOLD_NONE}};
    size_t loaded, skipped;
    int64_t first, last;
    CHECK_INT(lp_store_tasks_load(s, other, t, 2, &loaded, &skipped, &first, &last), LP_OK);
    double *g0, *g1;
    size_t dim;
    CHECK_INT(lp_registry_task_features(s, first, &g0, &g1, &dim), LP_OK);
    CHECK_INT(dim, 3);
    CHECK(g0 && g1 && memcmp(g0, f0, sizeof f0) == 0 && memcmp(g1, f1, sizeof f1) == 0);
    free(g0);
    free(g1);
    CHECK_INT(lp_registry_task_features(s, last, &g0, &g1, &dim), LP_OK);
    CHECK(g0 == NULL && g1 == NULL && dim == 0);
    CHECK_INT(lp_registry_task_features(s, last + 10, &g0, &g1, &dim), LP_EUNKNOWN_TASK);

    int64_t max;
    CHECK_INT(lp_registry_max_label(s, 0, &max), LP_OK);
    CHECK_INT(max, 0);
    CHECK_INT(lp_registry_max_label(s, other, &max), LP_OK);
    CHECK_INT(max, 0);
}

int main(void)
{
    if (sodium_init() < 0 || tmpdir_create(dir, sizeof dir, "test-registry") != 0)
        return 1;
    snprintf(path, sizeof path, "%s/r.db", dir);
    open_store();
    lp_campaign other = {
        .epsilon_min = 0.1, .epsilon_max = 2, .epsilon_budget = 10, .epsilon_default = 1};
    snprintf(other.name, sizeof other.name, "other");
    CHECK_INT(lp_store_campaign_create(s, &other), LP_OK);

    test_corruption(other.id);
    test_runs();
    test_models(other.id);
    test_schedule();
    test_tasks_and_labels(other.id);

    /* everything is durable: the same answers after a reopen */
    lp_store_close(s);
    open_store();
    int64_t active;
    CHECK_INT(lp_registry_active_version(s, &active), LP_OK);
    CHECK(active > 0);
    lp_schedule sc;
    CHECK_INT(lp_registry_schedule_get(s, &sc), LP_OK);
    CHECK_INT(sc.every_labels, 500);
    lp_corruption cur;
    CHECK_INT(lp_registry_corruption_current(s, other.id, &cur), LP_OK);
    CHECK_INT(cur.strategy, LP_ADV_BACKDOOR);
    lp_store_close(s);
    CHECK_INT(sql_count("SELECT count(*) FROM pragma_integrity_check WHERE integrity_check = 'ok'"),
              1);

    tmpdir_remove(dir);
    return check_summary();
}
