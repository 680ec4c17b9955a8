/*
 * test_sql.c — the statement API (server/db/internal/sql.h) through the
 * real engine, on its SQLite driver with a real file and on its PostgreSQL
 * driver with a real server (tests/support/pg.h): the contract checks of
 * tests/support/sql_contract.h on the writer connection (inside its
 * transaction) and on a pooled read connection; a write on a read-only
 * connection is a storage failure, not a constraint. SQLite's own: a
 * database file opened outside the engine reads the same rows.
 */
#include "check.h"
#include "engine.h"
#include "error.h"
#include "pg.h"
#include "sql_contract.h"
#include "tmpdir.h"

#include <stdio.h>
#include <string.h>

static const char *driver; /* the driver the engine must use */

static int write_fn(lp_conn *c, void *ctx)
{
    CHECK_STR(c->drv->name, driver);
    sql_contract_write(c, ctx);
    return LP_OK;
}

static int read_fn(lp_conn *c, void *ctx)
{
    sql_contract_read(c);
    /* a read connection refuses writes: a failure of the storage */
    lp_stmt *st = lp_stmt_prepare(c, "INSERT INTO sql_contract (name) VALUES ('delta')");
    CHECK(st != NULL);
    if (st != NULL) {
        int step = lp_stmt_step(st);
        CHECK_INT(step, LP_SQL_ERROR);
        CHECK(!lp_sql_is_constraint(step));
        lp_stmt_finalize(st);
    }
    return LP_OK;
}

/* The contract through an engine on where (a path or a libpq URI). */
static void engine_contract(const char *where, const sql_contract_ddl *ddl)
{
    char err[256];
    lp_store_opts o = {.path = where, .sync_full = 1, .read_conns = 1};
    lp_engine *e = NULL;
    CHECK_INT(lp_engine_open(&o, NULL, &e, err, sizeof err), LP_OK);
    if (e == NULL) {
        fprintf(stderr, "%s: %s\n", where, err);
        return;
    }
    CHECK_INT(lp_engine_write(e, write_fn, (void *)ddl, 1, 0), LP_OK);
    CHECK_INT(lp_engine_read(e, read_fn, NULL), LP_OK);
    lp_engine_close(e);
}

static void test_pg(void)
{
    pg_cluster pgc;
    if (!pg_cluster_start_for(&pgc, "test_sql (PostgreSQL)"))
        return;
    char uri[512];
    CHECK_INT(pg_cluster_create_db(&pgc, "contract", uri, sizeof uri), 0);
    driver = "postgresql";
    engine_contract(uri, &SQL_CONTRACT_PG);
    pg_cluster_stop(&pgc);
}

int main(void)
{
    char dir[64], path[256], err[256];
    if (tmpdir_create(dir, sizeof dir, "test-sql") != 0)
        return 1;
    snprintf(path, sizeof path, "%s/s.db", dir);
    driver = "sqlite";
    engine_contract(path, &SQL_CONTRACT_SQLITE);

    /* the file outside the engine */
    lp_conn *c = NULL;
    CHECK_INT(lp_engine_file_open(path, &c, err, sizeof err), LP_OK);
    if (c != NULL) {
        sql_contract_read(c);
        lp_conn_close(c);
    }
    lp_conn_close(NULL);
    char missing[300];
    snprintf(missing, sizeof missing, "%s/missing.db", dir);
    c = NULL;
    CHECK_INT(lp_engine_file_open(missing, &c, err, sizeof err), LP_ESTORAGE);
    CHECK(c == NULL && strstr(err, "cannot open") != NULL);

    tmpdir_remove(dir);

    test_pg();
    return check_summary();
}
