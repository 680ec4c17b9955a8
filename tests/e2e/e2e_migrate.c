/*
 * e2e_migrate.c — a campaign moved from SQLite to PostgreSQL
 * (docs/postgresql.md "Moving from SQLite", "Back up and restore").
 *
 * The real server on a SQLite file collects labels from real annotators
 * (signed, over HTTP), is stopped, and `ldpref-server --db FILE
 * --migrate-to URI` copies the file into a new database of a private
 * PostgreSQL (tests/support/pg.h). The server started on that database
 * serves the same export and campaign view byte for byte, accepts the
 * operator token minted on SQLite, answers every resend with the original
 * receipt (the label id it had), refuses a reused nonce as on SQLite,
 * takes new labels with ids after the copied ones, and enrolls with a
 * token issued on SQLite, the new annotator labelling a copied task. A second --migrate-to into the
 * same database is refused. Then pg_dump and pg_restore into a new database, and a server on the
 * restored database serves the same export again.
 */
#include "check.h"
#include "clock.h"
#include "error.h"
#include "pg.h"
#include "raw_annotator.h"
#include "rr.h"
#include "server_proc.h"

#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define ANNOTATORS 3
#define TASKS 40

static server_proc srv;
static char op_token[160];

struct annotator {
    raw_annotator ann;
    int64_t tasks[TASKS];
    int ntasks;
    lp_label_msg sent[TASKS];
    int64_t label_id[TASKS]; /* from the receipt on SQLite */
};
static struct annotator a[ANNOTATORS];
static char spare_token[128]; /* an enrollment token left unused on SQLite */

static int64_t receipt_id(const http_reply *r)
{
    json_t *j = json_loads(r->body ? r->body : "", 0, NULL);
    int64_t id = json_integer_value(json_object_get(j, "label_id"));
    json_decref(j);
    return id;
}

static void reply_error(const http_reply *r, char *out, size_t outlen)
{
    json_t *j = json_loads(r->body ? r->body : "", 0, NULL);
    const char *e = json_string_value(json_object_get(j, "error"));
    snprintf(out, outlen, "%s", e ? e : "");
    json_decref(j);
}

/* GET path with the operator token: the body (malloc'd), "" on failure. */
static char *get_body(const char *path)
{
    http_reply r;
    long status = raw_get(srv.url, path, op_token, &r);
    CHECK_INT(status, 200);
    char *body = strdup(status == 200 && r.body ? r.body : "");
    http_reply_free(&r);
    return body;
}

/* Campaign "mig", tasks, ANNOTATORS annotators labelling every task. */
static void collect_on_sqlite(void)
{
    http_reply r;
    json_t *camp = json_pack("{s:s, s:f, s:f, s:b, s:f, s:f, s:i}", "name", "mig", "epsilon_min",
                             0.1, "epsilon_max", 5.0, "allow_infinite", 0, "epsilon_budget", 100.0,
                             "epsilon_default", 1.0, "labels_per_task", ANNOTATORS + 1);
    CHECK_INT(raw_post_json(srv.url, "/v1/campaigns", camp, op_token, &r), 201);
    json_decref(camp);
    http_reply_free(&r);
    char jsonl[TASKS * 80];
    size_t len = 0;
    for (int i = 0; i < TASKS; i++)
        len += (size_t)snprintf(
            jsonl + len, sizeof jsonl - len,
            "{\"id\":\"m%d\",\"prompt\":\"p %d ✓\",\"responses\":[\"a\",\"b\"]}\n", i, i);
    char url[256];
    snprintf(url, sizeof url, "%s/v1/tasks?campaign=mig", srv.url);
    http_raw("POST", url, jsonl, len, op_token, &r);
    CHECK_INT(r.status, 200);
    http_reply_free(&r);
    json_t *tb = json_pack("{s:s, s:i}", "campaign", "mig", "count", ANNOTATORS + 1);
    raw_post_json(srv.url, "/v1/enrollment-tokens", tb, op_token, &r);
    json_decref(tb);
    json_t *doc = json_loads(r.body ? r.body : "", 0, NULL);
    json_t *toks = json_object_get(doc, "tokens");
    http_reply_free(&r);
    for (int i = 0; i < ANNOTATORS; i++) {
        const char *t = json_string_value(json_array_get(toks, (size_t)i));
        CHECK_INT(raw_enroll(&a[i].ann, srv.url, t ? t : ""), 201);
        json_t *tasks;
        CHECK_INT(raw_next(&a[i].ann, TASKS, &tasks), 200);
        a[i].ntasks = (int)json_array_size(tasks);
        for (int k = 0; k < a[i].ntasks; k++)
            a[i].tasks[k] =
                json_integer_value(json_object_get(json_array_get(tasks, (size_t)k), "task_id"));
        json_decref(tasks);
    }
    const char *spare = json_string_value(json_array_get(toks, ANNOTATORS));
    snprintf(spare_token, sizeof spare_token, "%s", spare ? spare : "");
    json_decref(doc);
    /* all but the last task of each annotator, interleaved */
    for (int k = 0; k + 1 < TASKS; k++)
        for (int i = 0; i < ANNOTATORS; i++) {
            if (k >= a[i].ntasks)
                continue;
            a[i].sent[k] = raw_label(&a[i].ann, a[i].tasks[k], (k + i) & 1, 0.5 + 0.25 * i);
            CHECK_INT(raw_post_label(srv.url, &a[i].sent[k], &r), 201);
            a[i].label_id[k] = receipt_id(&r);
            http_reply_free(&r);
        }
    CHECK_INT(a[0].ntasks, TASKS);
}

static int64_t max_label_id(void)
{
    int64_t m = 0;
    for (int i = 0; i < ANNOTATORS; i++)
        for (int k = 0; k + 1 < a[i].ntasks; k++)
            m = a[i].label_id[k] > m ? a[i].label_id[k] : m;
    return m;
}

/* On the migrated database: receipts, nonces, new labels and enrollment. */
static void check_on_postgresql(void)
{
    http_reply r;
    int same = 0, sent = 0;
    for (int i = 0; i < ANNOTATORS; i++)
        for (int k = 0; k + 1 < a[i].ntasks; k++) {
            sent++;
            if (raw_post_label(srv.url, &a[i].sent[k], &r) == 200 &&
                receipt_id(&r) == a[i].label_id[k])
                same++;
            http_reply_free(&r);
        }
    check_record(same == sent && sent > 0, __FILE__, __LINE__,
                 "%d of %d resends answered with the original receipt", same, sent);
    /* a copied nonce on a new task: replayed */
    lp_label_msg m = raw_label(&a[0].ann, a[0].tasks[TASKS - 1], 1, 1.0);
    memcpy(m.nonce, a[0].sent[3].nonce, sizeof m.nonce);
    raw_resign(&a[0].ann, &m);
    char err[64];
    raw_post_label(srv.url, &m, &r);
    reply_error(&r, err, sizeof err);
    CHECK_STR(err, "replayed_nonce");
    http_reply_free(&r);
    /* the same task with a fresh nonce: a new label after the copied ids
     * (PostgreSQL's sequence may skip ids: a refused insert draws one) */
    m = raw_label(&a[0].ann, a[0].tasks[TASKS - 1], 1, 1.0);
    CHECK_INT(raw_post_label(srv.url, &m, &r), 201);
    int64_t first_new = receipt_id(&r);
    CHECK(first_new > max_label_id());
    http_reply_free(&r);
    /* an enrollment token issued on SQLite, a new annotator labelling */
    raw_annotator late;
    CHECK_INT(raw_enroll(&late, srv.url, spare_token), 201);
    json_t *tasks = NULL;
    CHECK_INT(raw_next(&late, 1, &tasks), 200);
    int64_t task = json_integer_value(json_object_get(json_array_get(tasks, 0), "task_id"));
    json_decref(tasks);
    m = raw_label(&late, task, 0, 1.0);
    CHECK_INT(raw_post_label(srv.url, &m, &r), 201);
    CHECK(receipt_id(&r) > first_new);
    http_reply_free(&r);
}

/* ldpref-server --migrate-to: 0 or the exit status; its stdout in *out. */
static int migrate(const char *db, const char *uri, char **out)
{
    const char *argv[] = {"ldpref-server", "--db", db, "--migrate-to", uri, NULL};
    return run_tool(argv, NULL, out);
}

static int dump_restore(pg_cluster *pgc, const char *from, const char *to)
{
    char cmd[4096];
    snprintf(cmd, sizeof cmd,
             "'%s/pg_dump' --format=custom --file='%s/ldpref.dump' '%s' && "
             "'%s/pg_restore' --exit-on-error --single-transaction --no-owner --dbname='%s' "
             "'%s/ldpref.dump'",
             pgc->bin, pgc->dir, from, pgc->bin, to, pgc->dir);
    return system(cmd);
}

int main(void)
{
    /* the scenario starts on SQLite and makes its own PostgreSQL */
    if (server_skip_on_postgresql("e2e_migrate",
                                  "it runs in the SQLite pass (it moves SQLite to PostgreSQL)"))
        return check_summary();
    lp_rng_init();
    pg_cluster pgc;
    if (!pg_cluster_start_for(&pgc, "e2e_migrate"))
        return check_summary();
    char uri[300], restored[300];
    CHECK_INT(pg_cluster_create_db(&pgc, "moved", uri, sizeof uri), 0);
    CHECK_INT(pg_cluster_create_db(&pgc, "restored", restored, sizeof restored), 0);
    if (server_start(&srv, NULL) != 0) {
        check_record(0, __FILE__, __LINE__, "server starts on SQLite");
        pg_cluster_stop(&pgc);
        return check_summary();
    }
    snprintf(op_token, sizeof op_token, "%s", srv.token);
    collect_on_sqlite();
    char *export_sqlite = get_body("/v1/export?campaign=mig");
    char *view_sqlite = get_body("/v1/campaigns/view?campaign=mig&bucket_s=60");
    CHECK(strlen(export_sqlite) > 1000);
    CHECK_INT(server_stop(&srv), 0);

    char sqlite_db[300];
    snprintf(sqlite_db, sizeof sqlite_db, "%s", srv.db);
    char *out = NULL;
    CHECK_INT(migrate(sqlite_db, uri, &out), 0);
    char want[64];
    snprintf(want, sizeof want, "copied labels: %d rows,", ANNOTATORS * (TASKS - 1));
    CHECK(out != NULL && strstr(out, want) != NULL);
    CHECK(out != NULL && strstr(out, "\nmigrated: ") != NULL);
    CHECK(out != NULL && strstr(out, uri) == NULL); /* the URI is not printed */
    free(out);

    /* the server on PostgreSQL */
    snprintf(srv.db, sizeof srv.db, "%s", uri);
    int started = server_restart(&srv, NULL) == 0;
    check_record(started, __FILE__, __LINE__, "server starts on the migrated database");
    if (started) {
        char *export_pg = get_body("/v1/export?campaign=mig");
        char *view_pg = get_body("/v1/campaigns/view?campaign=mig&bucket_s=60");
        CHECK_STR(export_pg, export_sqlite);
        CHECK_STR(view_pg, view_sqlite);
        free(export_pg);
        free(view_pg);
        check_on_postgresql();
        char *export_after = get_body("/v1/export?campaign=mig");
        CHECK_INT(server_stop(&srv), 0);

        /* a second copy into the same, now used, database: refused */
        out = NULL;
        CHECK_INT(migrate(sqlite_db, uri, &out), 1);
        free(out);

        /* backup and restore, a server on the restored database */
        CHECK_INT(dump_restore(&pgc, uri, restored), 0);
        snprintf(srv.db, sizeof srv.db, "%s", restored);
        CHECK_INT(server_restart(&srv, NULL), 0);
        char *export_restored = get_body("/v1/export?campaign=mig");
        CHECK(strlen(export_after) > strlen(export_sqlite));
        CHECK_STR(export_restored, export_after);
        free(export_restored);
        free(export_after);
        CHECK_INT(server_stop(&srv), 0);
    }
    free(export_sqlite);
    free(view_sqlite);
    snprintf(srv.db, sizeof srv.db, "%s", sqlite_db);
    server_cleanup(&srv);
    pg_cluster_stop(&pgc);
    return check_summary();
}
