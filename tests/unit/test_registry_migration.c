/*
 * test_registry_migration.c — the learning records (server/db/registry.h)
 * after the migration to typed provenance (schema/003_typed_provenance.sql): a
 * version-2 database is built from the 001 and 002 SQL with runs, models,
 * corruption settings and a schedule stored as JSON text the way a version-2
 * server wrote them; opening it with the store migrates it, and every record
 * reads back typed, with the same values, and renders to the same JSON.
 */
#include "check.h"
#include "error.h"
#include "registry.h"
#include "retrain.h"
#include "schema_sql.h"
#include "store.h"
#include "tmpdir.h"
#include "train_request.h"

#include <math.h>
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static char dir[256];

/* Requests as a version-2 server stored them (normalized, compact). */
static const char *const REQUEST_TEXT =
    "{\"loss\":\"dpo\",\"campaign\":\"second\",\"cutoff\":3,\"seed\":11,\"beta\":2.0,"
    "\"rmax\":1.0,\"tau\":0.5,\"l2\":0.01,\"norm_bound\":null,\"optimizer\":\"lbfgs\","
    "\"max_iter\":50,\"epochs\":1,\"lr\":0.5,\"batch\":1,\"features\":\"text\",\"text\":"
    "{\"dim\":64,\"bigrams\":false,\"cross_prompt\":true,\"length\":true},\"threads\":2,"
    "\"activate\":false}";
static const char *const REQUEST_DENSE =
    "{\"loss\":\"rr-sgd\",\"campaign\":null,\"cutoff\":null,\"seed\":0,\"beta\":1.0,"
    "\"rmax\":1.0,\"tau\":0.5,\"l2\":0.0,\"norm_bound\":2.5,\"optimizer\":\"sgd\","
    "\"max_iter\":500,\"epochs\":2,\"lr\":0.25,\"batch\":4,\"features\":\"auto\",\"text\":"
    "{\"dim\":4096,\"bigrams\":true,\"cross_prompt\":false,\"length\":true},\"threads\":1,"
    "\"activate\":true}";
/* A schedule's request: no cutoff, no campaign when it trains on all. */
static const char *const SCHEDULE_REQUEST =
    "{\"loss\":\"ipo\",\"seed\":5,\"beta\":1.0,\"rmax\":1.0,\"tau\":0.25,\"l2\":0.0,"
    "\"norm_bound\":null,\"optimizer\":\"adam\",\"max_iter\":500,\"epochs\":1,\"lr\":0.01,"
    "\"batch\":1,\"features\":\"auto\",\"text\":{\"dim\":4096,\"bigrams\":true,"
    "\"cross_prompt\":false,\"length\":true},\"threads\":1,\"activate\":true}";

static const char *const TEXT_SUMMARY =
    "{\"format\":\"ldpref-model\",\"loss\":\"dpo\",\"features\":{\"kind\":\"text\",\"dim\":"
    "66,\"hash\":\"fnv1a64-v1\",\"hash_dim\":64,\"bigrams\":false,\"cross_prompt\":true,"
    "\"cross_max\":16,\"length\":true}}";
static const char *const DENSE_SUMMARY =
    "{\"format\":\"ldpref-model\",\"loss\":\"rr-sgd\",\"features\":{\"kind\":\"dense\","
    "\"dim\":3}}";

static int exec(sqlite3 *db, const char *sql)
{
    char *err = NULL;
    int rc = sqlite3_exec(db, sql, NULL, NULL, &err);
    if (rc != SQLITE_OK)
        fprintf(stderr, "sql: %s\n", err ? err : "?");
    sqlite3_free(err);
    return rc;
}

static int insert_text(sqlite3 *db, const char *sql, const char *a, const char *b)
{
    sqlite3_stmt *st;
    if (sqlite3_prepare_v2(db, sql, -1, &st, NULL) != SQLITE_OK)
        return SQLITE_ERROR;
    sqlite3_bind_text(st, 1, a, -1, SQLITE_STATIC);
    if (b != NULL)
        sqlite3_bind_text(st, 2, b, -1, SQLITE_STATIC);
    int rc = sqlite3_step(st);
    sqlite3_finalize(st);
    return rc == SQLITE_DONE ? SQLITE_OK : rc;
}

/* A version-2 database with a second campaign, three corruption settings,
 * two runs (a text model trained under anti and backdoor settings, the
 * dense model anti asked), an activation and two schedules. */
static void build_v2(const char *path)
{
    sqlite3 *db;
    CHECK_INT(sqlite3_open(path, &db), SQLITE_OK);
    CHECK_INT(exec(db, "PRAGMA foreign_keys=ON"), SQLITE_OK);
    CHECK_INT(exec(db, LP_MIGRATIONS[0]), SQLITE_OK);
    CHECK_INT(exec(db, LP_MIGRATIONS[1]), SQLITE_OK);
    CHECK_INT(exec(db, "PRAGMA user_version = 2"), SQLITE_OK);
    CHECK_INT(exec(db,
                   "INSERT INTO campaigns (name, epsilon_min, epsilon_max, epsilon_budget, "
                   "epsilon_default, created_ms) VALUES ('second', 0.1, 1, 10, 1, 5);"
                   "INSERT INTO corruption_settings VALUES (1, 1, 0.1, 'flip', 1, 0, 100);"
                   "INSERT INTO corruption_settings VALUES (2, 1, 0.2, 'anti', 7, 0, 101);"
                   "INSERT INTO corruption_settings VALUES (3, 2, 0.3, 'backdoor', 9, 2, 102);"),
              SQLITE_OK);
    CHECK_INT(insert_text(db,
                          "INSERT INTO training_runs (id, trigger_kind, request, status, cutoff, "
                          "labels, iterations, evaluations, objective, grad_norm, created_ms, "
                          "started_ms, finished_ms) VALUES (1, 'manual', ?1, 'succeeded', 3, 3, "
                          "12, 14, 0.25, 1e-9, 1000, 1001, 1002)",
                          REQUEST_DENSE, NULL),
              SQLITE_OK);
    CHECK_INT(insert_text(db,
                          "INSERT INTO models (version, run, loss, campaign, cutoff, labels, "
                          "corruption, duration_ms, summary, model, created_ms) VALUES (1, 1, "
                          "'rr-sgd', NULL, 3, 3, '[]', 7, ?1, '{\"theta\":[1,2,3]}', 1003)",
                          DENSE_SUMMARY, NULL),
              SQLITE_OK);
    CHECK_INT(exec(db, "UPDATE training_runs SET model_version = 1 WHERE id = 1;"
                       "INSERT INTO activations (version, activated_ms) VALUES (1, 1004);"),
              SQLITE_OK);
    CHECK_INT(insert_text(db,
                          "INSERT INTO training_runs (id, trigger_kind, request, status, cutoff, "
                          "labels, created_ms, started_ms, finished_ms) VALUES (2, 'labels', ?1, "
                          "'succeeded', 3, 2, 2000, 2001, 2002)",
                          REQUEST_TEXT, NULL),
              SQLITE_OK);
    CHECK_INT(insert_text(db,
                          "INSERT INTO models (version, run, loss, campaign, cutoff, labels, "
                          "corruption, duration_ms, summary, model, created_ms) VALUES (2, 2, "
                          "'dpo', 2, 3, 2, ?2, 9, ?1, '{\"theta\":[0]}', 2003)",
                          TEXT_SUMMARY,
                          "[{\"id\":2,\"campaign\":\"default\",\"alpha\":0.2,\"strategy\":"
                          "\"anti\",\"seed\":7,\"feature\":0,\"created_at\":101,\"anti_model\":"
                          "1},{\"id\":3,\"campaign\":\"second\",\"alpha\":0.3,\"strategy\":"
                          "\"backdoor\",\"seed\":9,\"feature\":2,\"created_at\":102}]"),
              SQLITE_OK);
    CHECK_INT(exec(db, "UPDATE training_runs SET model_version = 2 WHERE id = 2;"
                       "INSERT INTO training_runs (id, trigger_kind, request, status, error, "
                       "message, created_ms) VALUES (3, 'interval', '{}', 'failed', "
                       "'no_labels', 'none', 3000);"),
              SQLITE_OK);
    CHECK_INT(insert_text(db,
                          "INSERT INTO retrain_schedule (interval_s, every_labels, request, "
                          "created_ms) VALUES (0, 0, ?1, 10)",
                          REQUEST_DENSE, NULL),
              SQLITE_OK);
    CHECK_INT(insert_text(db,
                          "INSERT INTO retrain_schedule (interval_s, every_labels, request, "
                          "created_ms) VALUES (3600, 100, ?1, 20)",
                          SCHEDULE_REQUEST, NULL),
              SQLITE_OK);
    sqlite3_close(db);
}

/* The request JSON of stored settings, compact. */
static char *render(const lp_train_settings *t)
{
    lp_train_request r;
    if (lp_train_request_from_settings(t, &r) != LP_OK)
        return strdup("(unreadable)");
    json_t *j = lp_train_request_json(&r);
    char *text = json_dumps(j, JSON_COMPACT);
    json_decref(j);
    return text;
}

/* Stored settings render as the version-2 request with the "method" that
 * requests carry today (first; a version-2 run was a reward method). */
static void check_render(const lp_train_settings *t, const char *want)
{
    char *got = render(t), full[1024];
    snprintf(full, sizeof full, "{\"method\":\"reward\",%s", want + 1);
    CHECK_STR(got, full);
    free(got);
}

static void test_migrated(lp_store *s)
{
    lp_run r;
    CHECK_INT(lp_registry_run_get(s, 1, &r), LP_OK);
    CHECK_INT(r.status, LP_RUN_SUCCEEDED);
    CHECK_INT(r.iterations, 12);
    CHECK_INT(r.evaluations, 14);
    CHECK(r.objective == 0.25);
    CHECK_INT(r.model_version, 1);
    CHECK_INT(r.finished_ms, 1002);
    CHECK_STR(r.settings.loss, "rr-sgd");
    CHECK_STR(r.settings.optimizer, "sgd");
    CHECK(r.settings.norm_bound == 2.5);
    CHECK_INT(r.settings.batch, 4);
    check_render(&r.settings, REQUEST_DENSE);

    CHECK_INT(lp_registry_run_get(s, 2, &r), LP_OK);
    CHECK_STR(r.trigger, "labels");
    CHECK_INT(r.settings.campaign, 2);
    CHECK_STR(r.settings.campaign_name, "second");
    CHECK_INT(r.settings.cutoff, 3);
    CHECK_INT(r.settings.text_dim, 64);
    CHECK_INT(r.settings.text_bigrams, 0);
    CHECK_INT(r.settings.text_cross_prompt, 1);
    CHECK_INT(r.settings.activate, 0);
    CHECK(isinf(r.settings.norm_bound));
    check_render(&r.settings, REQUEST_TEXT);

    /* a run whose request was "{}" gets the defaults */
    CHECK_INT(lp_registry_run_get(s, 3, &r), LP_OK);
    CHECK_ERR(r.error, LP_ENO_LABELS);
    CHECK_STR(r.settings.loss, "square-chipo");
    CHECK_STR(r.settings.features, "auto");
    CHECK_INT(r.settings.max_iter, 500);
    CHECK_INT(r.settings.threads, 1);

    lp_run *runs;
    size_t n;
    CHECK_INT(lp_registry_run_list(s, 10, &runs, &n), LP_OK);
    CHECK_INT(n, 3);
    if (n == 3)
        CHECK_INT(runs[0].id, 3);
    free(runs);

    lp_model_record m;
    CHECK_INT(lp_registry_model_get(s, 2, &m), LP_OK);
    CHECK_STR(m.loss, "dpo");
    CHECK_INT(m.campaign, 2);
    CHECK_STR(m.campaign_name, "second");
    CHECK_STR(m.features, "text");
    CHECK_INT(m.dim, 66);
    CHECK_INT(m.text_dim, 64);
    CHECK_INT(m.text_bigrams, 0);
    CHECK_INT(m.text_cross_prompt, 1);
    CHECK_INT(m.text_cross_max, 16);
    CHECK_INT(m.text_length, 1);
    CHECK_STR(m.summary, TEXT_SUMMARY);
    CHECK_STR(m.model, "{\"theta\":[0]}");
    check_render(&m.settings, REQUEST_TEXT);
    CHECK_INT(m.n_corruption, 2);
    CHECK_INT(m.anti_model, 1);
    /* trained before the privacy record (schema 012): unknown, not privatized */
    CHECK_INT(m.privacy.known, 0);
    CHECK_INT(lp_label_privacy_all_privatized(&m.privacy), 0);
    if (m.n_corruption == 2) {
        CHECK_INT(m.corruption[0].id, 2);
        CHECK_INT(m.corruption[0].strategy, LP_ADV_ANTI);
        CHECK_STR(m.corruption[0].campaign_name, "default");
        CHECK_INT(m.corruption[0].created_ms, 101);
        CHECK_INT(m.corruption[1].id, 3);
        CHECK_INT(m.corruption[1].strategy, LP_ADV_BACKDOOR);
        CHECK_INT(m.corruption[1].feature, 2);
        CHECK(m.corruption[1].alpha == 0.3);
        CHECK_STR(m.corruption[1].campaign_name, "second");
    }
    lp_model_record_clear(&m);
    lp_model_record_clear(&m);
    lp_model_record_clear(NULL);

    lp_model_record *ms;
    CHECK_INT(lp_registry_model_list(s, &ms, &n), LP_OK);
    CHECK_INT(n, 2);
    if (n == 2) {
        CHECK_INT(ms[0].version, 2);
        CHECK(ms[0].model == NULL);
        CHECK_INT(ms[0].n_corruption, 2);
        CHECK_INT(ms[1].version, 1);
        CHECK_STR(ms[1].features, "dense");
        CHECK_INT(ms[1].dim, 3);
        CHECK_INT(ms[1].text_dim, 0);
        CHECK_INT(ms[1].n_corruption, 0);
        CHECK_INT(ms[1].anti_model, 0);
        CHECK_STR(ms[1].settings.loss, "rr-sgd");
    }
    for (size_t i = 0; i < n; i++)
        lp_model_record_clear(&ms[i]);
    free(ms);
    int64_t active;
    CHECK_INT(lp_registry_active_version(s, &active), LP_OK);
    CHECK_INT(active, 1);

    lp_schedule sc;
    CHECK_INT(lp_registry_schedule_get(s, &sc), LP_OK);
    CHECK_INT(sc.has_settings, 1);
    CHECK_INT(sc.interval_s, 3600);
    CHECK_INT(sc.every_labels, 100);
    CHECK_STR(sc.settings.optimizer, "adam");
    CHECK(sc.settings.tau == 0.25);
    CHECK_INT(sc.settings.campaign, 0);
    CHECK_INT(sc.settings.cutoff, 0);
}

/* New records after the migration: a model with its corruption rows. */
static void test_new_records(lp_store *s)
{
    lp_run run = {0};
    snprintf(run.trigger, sizeof run.trigger, "manual");
    lp_run old;
    CHECK_INT(lp_registry_run_get(s, 2, &old), LP_OK);
    run.settings = old.settings;
    CHECK_INT(lp_registry_run_create(s, &run), LP_OK);
    CHECK_INT(run.id, 4);
    lp_corruption cs[2];
    CHECK_INT(lp_registry_corruption_current(s, 1, &cs[0]), LP_OK);
    CHECK_INT(lp_registry_corruption_current(s, 2, &cs[1]), LP_OK);
    lp_model_record m = {.run = run.id,
                         .campaign = 2,
                         .cutoff = 3,
                         .labels = 2,
                         .dim = 4,
                         .corruption = cs,
                         .n_corruption = 2,
                         .anti_model = 2,
                         .summary = "{}",
                         .model = "{\"theta\":[1,2,3,4]}"};
    snprintf(m.loss, sizeof m.loss, "ipo");
    snprintf(m.features, sizeof m.features, "dense");
    CHECK_INT(lp_registry_model_add(s, &m, 1), LP_OK);
    CHECK_INT(m.version, 3);
    lp_model_record got;
    CHECK_INT(lp_registry_model_get(s, 3, &got), LP_OK);
    CHECK_STR(got.features, "dense");
    CHECK_INT(got.dim, 4);
    CHECK_INT(got.n_corruption, 2);
    CHECK_INT(got.anti_model, 2);
    CHECK_INT(got.settings.text_dim, 64);
    CHECK_INT(got.settings.campaign, 2);
    lp_model_record_clear(&got);
    int64_t active;
    CHECK_INT(lp_registry_active_version(s, &active), LP_OK);
    CHECK_INT(active, 3);
    CHECK_ERR(lp_registry_model_get(s, 99, &got), LP_EUNKNOWN_MODEL);
    CHECK_ERR(lp_registry_run_get(s, 99, &old), LP_EUNKNOWN_RUN);
    CHECK_ERR(lp_registry_activate(s, 99), LP_EUNKNOWN_MODEL);
}

/* The migrated database keeps its append-only rules and its integrity. */
static void test_integrity(const char *path)
{
    sqlite3 *db;
    CHECK_INT(sqlite3_open(path, &db), SQLITE_OK);
    CHECK(sqlite3_exec(db, "UPDATE models SET labels = 0", NULL, NULL, NULL) != SQLITE_OK);
    CHECK(sqlite3_exec(db, "DELETE FROM model_corruption", NULL, NULL, NULL) != SQLITE_OK);
    CHECK(sqlite3_exec(db, "UPDATE train_settings SET seed = 1", NULL, NULL, NULL) != SQLITE_OK);
    sqlite3_stmt *q;
    sqlite3_prepare_v2(db, "PRAGMA integrity_check", -1, &q, NULL);
    CHECK(sqlite3_step(q) == SQLITE_ROW &&
          strcmp((const char *)sqlite3_column_text(q, 0), "ok") == 0);
    sqlite3_finalize(q);
    sqlite3_prepare_v2(db, "PRAGMA foreign_key_check", -1, &q, NULL);
    CHECK(sqlite3_step(q) == SQLITE_DONE); /* no dangling reference */
    sqlite3_finalize(q);
    sqlite3_prepare_v2(db, "PRAGMA user_version", -1, &q, NULL);
    CHECK(sqlite3_step(q) == SQLITE_ROW && sqlite3_column_int(q, 0) == LP_MIGRATION_COUNT);
    sqlite3_finalize(q);
    sqlite3_close(db);
}

int main(void)
{
    if (tmpdir_create(dir, sizeof dir, "test-registry-migration") != 0)
        return 1;
    char path[300], err[256];
    snprintf(path, sizeof path, "%s/v2.db", dir);
    build_v2(path);
    lp_store_opts so = {.path = path, .sync_full = 0, .read_conns = 1};
    lp_store *s = NULL;
    CHECK_INT(lp_store_open(&so, &s, err, sizeof err), LP_OK);
    if (s != NULL) {
        test_migrated(s);
        test_new_records(s);
        lp_store_close(s);
    } else
        fprintf(stderr, "%s\n", err);
    test_integrity(path);
    if (tmpdir_remove(dir) != 0)
        fprintf(stderr, "could not remove %s\n", dir);
    return check_summary();
}
