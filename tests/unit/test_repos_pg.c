/*
 * test_repos_pg — the repositories outside label ingest with several
 * stores writing one PostgreSQL database at once, as several servers do:
 * an enrollment token enrolls one annotator, a key enrolls once, a task
 * with room for one label is leased to one annotator, the last holder of
 * a scope is not revoked by two revocations at once. Each race is run by
 * one thread per store, released together; the database then holds what
 * one server would have left; the audit chain stays one chain. And a
 * training cut-off waits for the labels
 * whose ids were drawn before it but not yet committed. A task upload
 * draws no subtransaction per task, whatever the file's size.
 */
#include "annotators.h"
#include "audit.h"
#include "campaigns.h"
#include "check.h"
#include "error.h"
#include "label_cursor.h"
#include "log.h"
#include "pg.h"
#include "store.h"
#include "tasks.h"
#include "tokens.h"

#include <libpq-fe.h>
#include <pthread.h>
#include <sodium.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define STORES 3
#define ROUNDS 10

static lp_store *stores[STORES];
static char db_uri[400];
static pthread_barrier_t start;

/* ---- a race: fn(i) run by one thread per store, released together ---- */

typedef int (*race_fn)(int i, int round);
struct racer {
    race_fn fn;
    int i, round, rc;
};

static void *racer_main(void *arg)
{
    struct racer *r = arg;
    pthread_barrier_wait(&start);
    r->rc = r->fn(r->i, r->round);
    return NULL;
}

/* Runs fn on every store at once; rcs[i] gets store i's result. */
static void race(race_fn fn, int round, int rcs[STORES])
{
    pthread_t t[STORES];
    struct racer r[STORES];
    for (int i = 0; i < STORES; i++) {
        r[i] = (struct racer){fn, i, round, -1};
        pthread_create(&t[i], NULL, racer_main, &r[i]);
    }
    for (int i = 0; i < STORES; i++) {
        pthread_join(t[i], NULL);
        rcs[i] = r[i].rc;
    }
}

static int count_rc(const int rcs[STORES], int rc)
{
    int n = 0;
    for (int i = 0; i < STORES; i++)
        n += rcs[i] == rc;
    return n;
}

static int64_t campaign_new(const char *name, int64_t labels_per_task)
{
    lp_campaign c = {.epsilon_min = 0.1,
                     .epsilon_max = 8,
                     .epsilon_budget = 100,
                     .epsilon_default = 1,
                     .labels_per_task = labels_per_task};
    snprintf(c.name, sizeof c.name, "%s", name);
    CHECK_INT(lp_store_campaign_create(stores[0], &c), LP_OK);
    return c.id;
}

/* ---- enrollment ---- */

static int64_t enroll_campaign;
static uint8_t shared_token[LP_HASH_BYTES];
static uint8_t own_tokens[ROUNDS][STORES][LP_HASH_BYTES];
static uint8_t shared_keys[ROUNDS][LP_KEY_BYTES];

/* every store enrolls its own key with the one token */
static int enroll_one_token(int i, int round)
{
    uint8_t key[LP_KEY_BYTES];
    randombytes_buf(key, sizeof key);
    uint8_t token[LP_HASH_BYTES];
    memcpy(token, shared_token, sizeof token);
    token[0] ^= (uint8_t)round;
    lp_annotator a;
    return lp_store_enroll(stores[i], key, token, &a);
}

/* every store enrolls the one key, each with a token of its own */
static int enroll_one_key(int i, int round)
{
    lp_annotator a;
    return lp_store_enroll(stores[i], shared_keys[round], own_tokens[round][i], &a);
}

static void test_enrollment(void)
{
    enroll_campaign = campaign_new("enroll", 1);
    randombytes_buf(shared_token, sizeof shared_token);
    for (int round = 0; round < ROUNDS; round++) {
        uint8_t token[LP_HASH_BYTES];
        memcpy(token, shared_token, sizeof token);
        token[0] ^= (uint8_t)round;
        CHECK_INT(lp_store_enroll_tokens_add(stores[0], enroll_campaign, token, 1), LP_OK);
        int rcs[STORES];
        race(enroll_one_token, round, rcs);
        CHECK_INT(count_rc(rcs, LP_OK), 1);
        CHECK_INT(count_rc(rcs, LP_EBAD_ENROLLMENT_TOKEN), STORES - 1);
    }
    for (int round = 0; round < ROUNDS; round++) {
        randombytes_buf(shared_keys[round], LP_KEY_BYTES);
        randombytes_buf(own_tokens[round], sizeof own_tokens[round]);
        CHECK_INT(
            lp_store_enroll_tokens_add(stores[0], enroll_campaign, own_tokens[round][0], STORES),
            LP_OK);
        int rcs[STORES];
        race(enroll_one_key, round, rcs);
        CHECK_INT(count_rc(rcs, LP_OK), 1);
        CHECK_INT(count_rc(rcs, LP_EALREADY_ENROLLED), STORES - 1);
    }
    /* one annotator per round of each race; the losers' tokens unused */
    lp_annotator a;
    for (int round = 0; round < ROUNDS; round++)
        CHECK_INT(lp_store_annotator_by_key(stores[1], shared_keys[round], &a), LP_OK);
}

/* ---- leases ---- */

#define TASKS 12
static int64_t lease_annotators[STORES];
static lp_assignment leased[ROUNDS][STORES][TASKS];
static size_t n_leased[ROUNDS][STORES];

static int assign(int i, int round)
{
    return lp_store_assign(stores[i], lease_annotators[i], 2, leased[round][i],
                           &n_leased[round][i]);
}

/* One round: a campaign of TASKS tasks of one label each, three
 * annotators on three stores asking for two tasks each at once, twice. */
static void lease_round(int round)
{
    char name[32];
    snprintf(name, sizeof name, "leases-%d", round);
    int64_t campaign = campaign_new(name, 1);
    lp_task_in tasks[TASKS];
    char ids[TASKS][16];
    for (int k = 0; k < TASKS; k++) {
        snprintf(ids[k], sizeof ids[k], "t%d", k);
        tasks[k] = (lp_task_in){.source_id = ids[k],
                                .prompt = "p",
                                .response0 = "a",
                                .response1 = "b",
                                .reference_preferred = -1};
    }
    size_t loaded, skipped;
    int64_t first, last;
    CHECK_INT(
        lp_store_tasks_load(stores[0], campaign, tasks, TASKS, &loaded, &skipped, &first, &last),
        LP_OK);
    CHECK_INT(loaded, TASKS);
    uint8_t hashes[STORES][LP_HASH_BYTES];
    randombytes_buf(hashes, sizeof hashes);
    CHECK_INT(lp_store_enroll_tokens_add(stores[0], campaign, hashes[0], STORES), LP_OK);
    for (int i = 0; i < STORES; i++) {
        uint8_t key[LP_KEY_BYTES];
        randombytes_buf(key, sizeof key);
        lp_annotator a;
        CHECK_INT(lp_store_enroll(stores[i], key, hashes[i], &a), LP_OK);
        lease_annotators[i] = a.id;
    }
    int held[TASKS] = {0}, rcs[STORES];
    race(assign, 0, rcs);
    for (int i = 0; i < STORES; i++) {
        CHECK_INT(rcs[i], LP_OK);
        CHECK_INT(n_leased[0][i], 2); /* fresh, or a task another store passed over */
        for (size_t k = 0; k < n_leased[0][i]; k++) {
            int64_t t = leased[0][i][k].task_id - first;
            CHECK(t >= 0 && t < TASKS);
            if (t >= 0 && t < TASKS)
                held[t]++;
        }
    }
    for (int k = 0; k < TASKS; k++)
        CHECK(held[k] <= 1); /* no task leased twice */
    /* asked again, each gets its own live leases back, and nothing more */
    race(assign, 1, rcs);
    for (int i = 0; i < STORES; i++) {
        CHECK_INT(rcs[i], LP_OK);
        CHECK_INT(n_leased[1][i], 2);
        for (size_t k = 0; k < n_leased[1][i] && k < n_leased[0][i]; k++)
            CHECK_INT(leased[1][i][k].task_id, leased[0][i][k].task_id);
    }
}

static void test_leases(void)
{
    for (int round = 0; round < ROUNDS; round++)
        lease_round(round);
}

/* One annotator with a quota of two asks three stores for two tasks each
 * at once: two leases in all. */
static int64_t quota_annotator;
static int assign_quota(int i, int round)
{
    return lp_store_assign(stores[i], quota_annotator, 2, leased[round][i], &n_leased[round][i]);
}

static void test_quota(void)
{
    for (int round = 0; round < ROUNDS; round++) {
        char name[32];
        snprintf(name, sizeof name, "quota-%d", round);
        lp_campaign c = {.epsilon_min = 0.1,
                         .epsilon_max = 8,
                         .epsilon_budget = 100,
                         .epsilon_default = 1,
                         .labels_per_task = 3,
                         .annotator_quota = 2};
        snprintf(c.name, sizeof c.name, "%s", name);
        CHECK_INT(lp_store_campaign_create(stores[0], &c), LP_OK);
        lp_task_in tasks[TASKS];
        char ids[TASKS][16];
        for (int k = 0; k < TASKS; k++) {
            snprintf(ids[k], sizeof ids[k], "q%d", k);
            tasks[k] = (lp_task_in){.source_id = ids[k],
                                    .prompt = "p",
                                    .response0 = "a",
                                    .response1 = "b",
                                    .reference_preferred = -1};
        }
        size_t loaded, skipped;
        int64_t first, last;
        CHECK_INT(
            lp_store_tasks_load(stores[0], c.id, tasks, TASKS, &loaded, &skipped, &first, &last),
            LP_OK);
        uint8_t hash[LP_HASH_BYTES], key[LP_KEY_BYTES];
        randombytes_buf(hash, sizeof hash);
        randombytes_buf(key, sizeof key);
        CHECK_INT(lp_store_enroll_tokens_add(stores[0], c.id, hash, 1), LP_OK);
        lp_annotator a;
        CHECK_INT(lp_store_enroll(stores[0], key, hash, &a), LP_OK);
        quota_annotator = a.id;
        int rcs[STORES];
        race(assign_quota, round, rcs);
        int64_t distinct[2 * STORES];
        size_t nd = 0;
        for (int i = 0; i < STORES; i++)
            for (size_t k = 0; rcs[i] == LP_OK && k < n_leased[round][i]; k++) {
                size_t d = 0;
                while (d < nd && distinct[d] != leased[round][i][k].task_id)
                    d++;
                if (d == nd)
                    distinct[nd++] = leased[round][i][k].task_id;
            }
        CHECK_INT(nd, 2);
    }
}

/* ---- operator tokens ---- */

#define ADMIN_SCOPE 1u
static int64_t admin_ids[ROUNDS][STORES];

static int revoke_admin(int i, int round)
{
    lp_op_token row;
    return lp_store_op_token_revoke(stores[i], admin_ids[round][i], ADMIN_SCOPE, 1000 + round,
                                    &row);
}

static void test_last_holder(void)
{
    for (int round = 0; round < ROUNDS; round++) {
        /* every holder of the scope revoked at once: one stays */
        for (int i = 0; i < STORES; i++) {
            uint8_t hash[LP_HASH_BYTES];
            randombytes_buf(hash, sizeof hash);
            char name[32];
            snprintf(name, sizeof name, "admin-%d-%d", round, i);
            lp_op_token row;
            CHECK_INT(lp_store_op_token_add(stores[0], hash, name, ADMIN_SCOPE, 1, &row), LP_OK);
            admin_ids[round][i] = row.id;
        }
        int rcs[STORES];
        race(revoke_admin, round, rcs);
        CHECK_INT(count_rc(rcs, LP_OK), STORES - 1);
        CHECK_INT(count_rc(rcs, LP_ELAST_ADMIN_TOKEN), 1);
        /* the survivor: the next round's tokens do not count it out */
        for (int i = 0; i < STORES; i++)
            if (rcs[i] == LP_ELAST_ADMIN_TOKEN)
                CHECK_INT(lp_store_op_token_revoke(stores[i], admin_ids[round][i], 0, 2, NULL),
                          LP_OK);
    }
}

/* ---- the audit chain ---- */

#define APPENDS 20

static int append_many(int i, int round)
{
    for (int k = 0; k < APPENDS; k++) {
        char params[64];
        snprintf(params, sizeof params, "{\"store\": %d, \"k\": %d}", i, k);
        int rc = lp_store_audit_append(stores[i], 0, "POST /v1/campaigns", params, 201, "",
                                       1000 + k, NULL);
        if (rc != LP_OK)
            return rc;
    }
    return LP_OK;
}

/* Three stores appending at once: every append stored, one intact chain. */
static void test_audit_chain(void)
{
    int rcs[STORES];
    race(append_many, 0, rcs);
    CHECK_INT(count_rc(rcs, LP_OK), STORES);
    lp_audit_check check;
    char err[256];
    CHECK_INT(lp_audit_verify_file(db_uri, &check, err, sizeof err), LP_OK);
    CHECK_INT(check.intact, 1);
    CHECK_INT(check.rows, STORES * APPENDS);
}

/* ---- training cut-offs ---- */

static int64_t cutoff_campaign;
static lp_label_summary cutoff_summary;
static int64_t cutoff_seen;

static void *open_cursor(void *arg)
{
    lp_label_cursor *c = NULL;
    if (lp_label_cursor_open(stores[2], cutoff_campaign, 0, &c) == LP_OK) {
        cutoff_seen = lp_label_cursor_cutoff(c);
        lp_label_cursor_summary(c, &cutoff_summary);
    }
    lp_label_cursor_close(c);
    return NULL;
}

static int64_t sql_int(PGconn *conn, const char *sql)
{
    PGresult *r = PQexec(conn, sql);
    int ok = PQresultStatus(r) == PGRES_TUPLES_OK && PQntuples(r) == 1;
    if (!ok)
        fprintf(stderr, "%s: %s", sql, PQerrorMessage(conn));
    int64_t v = ok ? strtoll(PQgetvalue(r, 0, 0), NULL, 10) : -1;
    PQclear(r);
    return v;
}

/* A label whose id was drawn first commits after one drawn later: the
 * cursor opened in between takes the later one as its cut-off and reads
 * both, the earlier once it has committed. */
static void test_cutoff(void)
{
    cutoff_campaign = campaign_new("cutoff", 2);
    lp_task_in task = {.source_id = "c", .prompt = "p", .response0 = "a", .response1 = "b"};
    size_t loaded, skipped;
    int64_t first, last;
    CHECK_INT(
        lp_store_tasks_load(stores[0], cutoff_campaign, &task, 1, &loaded, &skipped, &first, &last),
        LP_OK);
    uint8_t hashes[2][LP_HASH_BYTES];
    randombytes_buf(hashes, sizeof hashes);
    CHECK_INT(lp_store_enroll_tokens_add(stores[0], cutoff_campaign, hashes[0], 2), LP_OK);
    int64_t annotators[2];
    for (int i = 0; i < 2; i++) {
        uint8_t key[LP_KEY_BYTES];
        randombytes_buf(key, sizeof key);
        lp_annotator a;
        CHECK_INT(lp_store_enroll(stores[0], key, hashes[i], &a), LP_OK);
        annotators[i] = a.id;
    }
    PGconn *slow = PQconnectdb(db_uri), *fast = PQconnectdb(db_uri);
    CHECK(PQstatus(slow) == CONNECTION_OK && PQstatus(fast) == CONNECTION_OK);
    char sql[512];
    const char *insert = "INSERT INTO labels (annotator, task, z, z_task, nonce, timestamp_ms, "
                         "signature, received_ms) VALUES (%lld, %lld, 0, 0, "
                         "decode(repeat('00', 16), 'hex'), 1, decode(repeat('00', 64), 'hex'), 1) "
                         "RETURNING id";
    PQclear(PQexec(slow, "BEGIN"));
    snprintf(sql, sizeof sql, insert, (long long)annotators[0], (long long)first);
    int64_t early = sql_int(slow, sql);
    snprintf(sql, sizeof sql, insert, (long long)annotators[1], (long long)first);
    int64_t late = sql_int(fast, sql); /* committed at once */
    CHECK(early > 0 && late > early);
    pthread_t t;
    pthread_create(&t, NULL, open_cursor, NULL);
    nanosleep(&(struct timespec){0, 300 * 1000000L}, NULL);
    PQclear(PQexec(slow, "COMMIT"));
    pthread_join(t, NULL);
    CHECK_INT(cutoff_seen, late);
    CHECK_INT(cutoff_summary.labels, 2);
    PQfinish(slow);
    PQfinish(fast);
}

/* ---- a task upload's subtransactions ---- */

#define LOAD_MAX 2000

/* Loads n tasks (one context turn each, source ids tag-0..) into campaign
 * through stores[0]; returns the transaction ids the upload drew beyond
 * its own (its subtransactions). */
static int64_t load_subxacts(PGconn *conn, int64_t campaign, const char *tag, size_t n)
{
    static char ids[LOAD_MAX][32];
    static lp_task_in tasks[LOAD_MAX];
    static const lp_turn turn = {.role = LP_ROLE_USER, .content = "earlier"};
    for (size_t i = 0; i < n; i++) {
        snprintf(ids[i], sizeof ids[i], "%s-%zu", tag, i);
        tasks[i] = (lp_task_in){.source_id = ids[i],
                                .prompt = "p",
                                .response0 = "a",
                                .response1 = "b",
                                .reference_preferred = (int)(i % 3) - 1,
                                .context = &turn,
                                .n_context = 1,
                                .gold = i % 2 ? LP_GOLD_RESPONSE1 : LP_GOLD_NONE};
    }
    size_t loaded, skipped;
    int64_t first, last;
    int64_t before = sql_int(conn, "SELECT pg_current_xact_id()::text::bigint");
    CHECK_ERR(lp_store_tasks_load(stores[0], campaign, tasks, n, &loaded, &skipped, &first, &last),
              LP_OK);
    int64_t after = sql_int(conn, "SELECT pg_current_xact_id()::text::bigint");
    CHECK_INT(loaded, n);
    CHECK_INT(skipped, 0);
    int64_t sub = after - before - 2; /* less before's own id and the upload's */
    fprintf(stderr, "upload of %zu tasks: %lld subtransaction ids\n", n, (long long)sub);
    return sub;
}

/*
 * PostgreSQL keeps 64 subtransaction ids per session in shared memory; a
 * transaction that draws more makes every check of the row versions it
 * wrote read pg_subtrans, and an upload that drew one per task (a
 * savepoint per statement) took time in the square of its size. The ids
 * drawn between two pg_current_xact_id() calls on a database nobody else
 * writes are the upload's own plus one per subtransaction that wrote (the
 * engine's job savepoint; a background ANALYZE may add one or two): the
 * same few for 20 and for 2,000 tasks. An upload a constraint would refuse
 * is refused before it is written, and the store goes on.
 */
static void test_load_subxacts(void)
{
    PGconn *conn = PQconnectdb(db_uri);
    CHECK(PQstatus(conn) == CONNECTION_OK);
    int64_t campaign = campaign_new("upload", 1);
    int64_t small = load_subxacts(conn, campaign, "small", 20);
    int64_t large = load_subxacts(conn, campaign, "large", LOAD_MAX);
    CHECK(small >= 0 && small <= 4);
    CHECK(large >= 0 && large <= 4);
    CHECK_INT(sql_int(conn, "SELECT count(*) FROM task_turns t JOIN tasks k ON k.id = t.task "
                            "WHERE k.source_id LIKE 'large-%'"),
              LOAD_MAX);

    lp_turn bad_role = {.role = "narrator", .content = "x"};
    lp_task_in bad[2] = {
        {.source_id = "bad-0", .prompt = "p", .response0 = "a", .response1 = "b"},
        {.source_id = "bad-1",
         .prompt = "p",
         .response0 = "a",
         .response1 = "b",
         .context = &bad_role,
         .n_context = 1},
    };
    size_t loaded, skipped;
    int64_t first, last;
    CHECK_ERR(lp_store_tasks_load(stores[0], campaign, bad, 2, &loaded, &skipped, &first, &last),
              LP_EBAD_TASK);
    bad[1] =
        (lp_task_in){.source_id = "bad-1", .prompt = "\xc3(", .response0 = "a", .response1 = "b"};
    CHECK_ERR(lp_store_tasks_load(stores[0], campaign, bad, 2, &loaded, &skipped, &first, &last),
              LP_EBAD_TASK);
    bad[1].prompt = NULL;
    CHECK_ERR(lp_store_tasks_load(stores[0], campaign, bad, 2, &loaded, &skipped, &first, &last),
              LP_EBAD_TASK);
    CHECK_ERR(
        lp_store_tasks_load(stores[0], campaign + 1000, bad, 1, &loaded, &skipped, &first, &last),
        LP_EUNKNOWN_CAMPAIGN);
    CHECK_INT(sql_int(conn, "SELECT count(*) FROM tasks WHERE source_id LIKE 'bad-%'"), 0);
    /* the store still writes: the refusals ended no transaction */
    CHECK_ERR(lp_store_tasks_load(stores[0], campaign, bad, 1, &loaded, &skipped, &first, &last),
              LP_OK);
    CHECK_INT(loaded, 1);
    char sql[200];
    snprintf(sql, sizeof sql, "SELECT tasks FROM campaign_fill WHERE campaign = %lld",
             (long long)campaign);
    CHECK_INT(sql_int(conn, sql), 20 + LOAD_MAX + 1);
    PQfinish(conn);
}

int main(void)
{
    lp_log_configure(LP_LOG_WARN, LP_LOG_TEXT);
    if (sodium_init() < 0)
        return 1;
    pg_cluster cluster;
    if (!pg_cluster_start_for(&cluster, "test_repos_pg"))
        return check_summary();
    CHECK_INT(pg_cluster_create_db(&cluster, "repos", db_uri, sizeof db_uri), 0);
    for (int i = 0; i < STORES; i++) {
        lp_store_opts so = {.path = db_uri, .read_conns = 2};
        char err[256];
        int rc = lp_store_open(&so, &stores[i], err, sizeof err);
        if (rc != LP_OK)
            fprintf(stderr, "store %d: %s\n", i, err);
        CHECK_INT(rc, LP_OK);
    }
    pthread_barrier_init(&start, NULL, STORES);
    if (check_failures() == 0) {
        test_enrollment();
        test_leases();
        test_quota();
        test_last_holder();
        test_cutoff();
        test_audit_chain();
        test_load_subxacts();
    }
    pthread_barrier_destroy(&start);
    for (int i = 0; i < STORES; i++)
        lp_store_close(stores[i]);
    pg_cluster_stop(&cluster);
    return check_summary();
}
