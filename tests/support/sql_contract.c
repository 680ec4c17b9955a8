/* sql_contract.c — the statement API's contract on a real connection. See
 * sql_contract.h. */
#include "sql_contract.h"

#include "check.h"

#include <string.h>

static const uint8_t BLOB[4] = {0x00, 0xff, 0x00, 0x41}; /* zero bytes inside */
#define BIG_ID (((int64_t)1 << 40) + 7)                  /* beyond 32 bits */

/* the ids the database gave, set by sql_contract_write */
static int64_t id_alpha, id_beta;

static lp_stmt *prep(lp_conn *c, const char *sql)
{
    lp_stmt *st = lp_stmt_prepare(c, sql);
    check_record(st != NULL, __FILE__, __LINE__, "prepare %s: %s", sql,
                 st ? "ok" : lp_conn_errmsg(c));
    return st;
}

static int64_t count_rows(lp_conn *c)
{
    lp_stmt *st = prep(c, "SELECT count(*) FROM sql_contract");
    int64_t n = st && lp_stmt_step(st) == LP_SQL_ROW ? lp_stmt_column_int64(st, 0) : -1;
    lp_stmt_finalize(st);
    return n;
}

/* An INSERT that a constraint refuses: the result, and that nothing was
 * left and the transaction goes on. */
static void check_refused(lp_conn *c, lp_stmt *st, int want)
{
    int64_t before = count_rows(c);
    int step = lp_stmt_step(st);
    CHECK_INT(step, want);
    CHECK(lp_sql_is_constraint(step));
    CHECK(lp_conn_errmsg(c) != NULL && lp_conn_errmsg(c)[0] != '\0');
    lp_stmt_reset(st);
    CHECK_INT(lp_conn_in_txn(c), 1);
    CHECK_INT(count_rows(c), before);
}

void sql_contract_write(lp_conn *c, const sql_contract_ddl *ddl)
{
    CHECK_INT(lp_conn_exec(c, ddl->create), LP_SQL_DONE);
    CHECK_INT(lp_conn_exec(c, ddl->refuse_delete), LP_SQL_DONE);
    CHECK_INT(lp_conn_in_txn(c), 1);
    CHECK(!lp_sql_is_constraint(LP_SQL_DONE) && !lp_sql_is_constraint(LP_SQL_ROW) &&
          !lp_sql_is_constraint(LP_SQL_ERROR));

    /* every bind type; text by length (a prefix), a blob with zeros */
    lp_stmt *ins =
        prep(c, "INSERT INTO sql_contract (name, score, data, parent) VALUES (?1, ?2, ?3, ?4)");
    if (ins == NULL)
        return;
    CHECK_INT(lp_stmt_bind_text(ins, 1, "alphabet", 5), 0);
    CHECK_INT(lp_stmt_bind_double(ins, 2, 1.5), 0);
    CHECK_INT(lp_stmt_bind_blob(ins, 3, BLOB, sizeof BLOB), 0);
    CHECK_INT(lp_stmt_bind_null(ins, 4), 0);
    CHECK_INT(lp_stmt_bind_int64(ins, 9, 1), LP_SQL_ERROR); /* no ?9: binds nothing */
    CHECK_INT(lp_stmt_step(ins), LP_SQL_DONE);
    CHECK_INT(lp_conn_changes(c), 1);
    id_alpha = lp_conn_last_insert_id(c);
    lp_stmt_reset(ins);
    lp_stmt *get = prep(c, "SELECT id FROM sql_contract WHERE name = ?1");
    if (get != NULL) {
        lp_stmt_bind_text(get, 1, "alpha", -1);
        CHECK_INT(lp_stmt_step(get), LP_SQL_ROW);
        CHECK_INT(lp_stmt_column_int64(get, 0), id_alpha);
        CHECK_INT(lp_stmt_step(get), LP_SQL_DONE);
        lp_stmt_finalize(get);
    }

    /* RETURNING: the new id as a row; NULLs by binding nothing */
    lp_stmt *ret = prep(c, "INSERT INTO sql_contract (name, score, data, parent) "
                           "VALUES (?1, ?2, ?3, ?4) RETURNING id");
    if (ret != NULL) {
        lp_stmt_bind_text(ret, 1, "beta", -1);
        lp_stmt_bind_int64(ret, 4, id_alpha);
        CHECK_INT(lp_stmt_step(ret), LP_SQL_ROW);
        id_beta = lp_stmt_column_int64(ret, 0);
        CHECK(id_beta != id_alpha && id_beta > 0);
        CHECK_INT(lp_stmt_step(ret), LP_SQL_DONE);
        lp_stmt_finalize(ret);
    }

    /* an id of the caller's, beyond 32 bits */
    lp_stmt *with_id = prep(c, "INSERT INTO sql_contract (id, name, score) VALUES (?1, ?2, ?3)");
    if (with_id != NULL) {
        lp_stmt_bind_int64(with_id, 1, BIG_ID);
        lp_stmt_bind_text(with_id, 2, "gamma", -1);
        lp_stmt_bind_double(with_id, 3, 0.0);
        CHECK_INT(lp_stmt_step(with_id), LP_SQL_DONE);
        lp_stmt_finalize(with_id);
    }
    CHECK_INT(count_rows(c), 3);

    /* each kind of refusal; the statement is reused after each */
    lp_stmt_clear_bindings(ins);
    lp_stmt_bind_text(ins, 1, "alpha", -1);
    check_refused(c, ins, LP_SQL_UNIQUE);
    lp_stmt_clear_bindings(ins);
    lp_stmt_bind_text(ins, 1, "orphan", -1);
    lp_stmt_bind_int64(ins, 4, BIG_ID - 1); /* no such row (nor the new row's own id) */
    check_refused(c, ins, LP_SQL_FOREIGN_KEY);
    lp_stmt_clear_bindings(ins);
    lp_stmt_bind_text(ins, 1, "negative", -1);
    lp_stmt_bind_double(ins, 2, -1.0);
    check_refused(c, ins, LP_SQL_CONSTRAINT); /* CHECK */
    lp_stmt_clear_bindings(ins);
    check_refused(c, ins, LP_SQL_CONSTRAINT); /* NOT NULL */
    lp_stmt_finalize(ins);
    lp_stmt *del = prep(c, "DELETE FROM sql_contract WHERE id = ?1");
    if (del != NULL) {
        lp_stmt_bind_int64(del, 1, BIG_ID);
        check_refused(c, del, LP_SQL_CONSTRAINT); /* the trigger */
        lp_stmt_finalize(del);
    }

    /* rows changed by an UPDATE of two rows */
    lp_stmt *upd = prep(c, "UPDATE sql_contract SET score = ?1 WHERE score IS NOT NULL");
    if (upd != NULL) {
        lp_stmt_bind_double(upd, 1, 2.5);
        CHECK_INT(lp_stmt_step(upd), LP_SQL_DONE);
        CHECK_INT(lp_conn_changes(c), 2);
        lp_stmt_finalize(upd);
    }
}

void sql_contract_read(lp_conn *c)
{
    CHECK_INT(lp_conn_in_txn(c), 0);
    CHECK_INT(lp_conn_begin_read(c), LP_SQL_DONE);
    CHECK_INT(lp_conn_in_txn(c), 1);

    lp_stmt *st = prep(c, "SELECT id, name, score, data, parent FROM sql_contract ORDER BY id");
    if (st != NULL) {
        CHECK_INT(lp_stmt_step(st), LP_SQL_ROW); /* alpha */
        CHECK_INT(lp_stmt_column_int64(st, 0), id_alpha);
        CHECK_STR(lp_stmt_column_text(st, 1), "alpha");
        CHECK_INT(lp_stmt_column_bytes(st, 1), 5);
        CHECK(lp_stmt_column_double(st, 2) == 2.5);
        CHECK_INT(lp_stmt_column_bytes(st, 3), sizeof BLOB); /* a blob's bytes before it */
        const void *blob = lp_stmt_column_blob(st, 3);
        CHECK(blob != NULL && memcmp(blob, BLOB, sizeof BLOB) == 0);
        CHECK_INT(lp_stmt_column_bytes(st, 3), sizeof BLOB);
        CHECK_INT(lp_stmt_column_is_null(st, 3), 0);
        CHECK_INT(lp_stmt_column_is_null(st, 4), 1);
        CHECK_INT(lp_stmt_column_int64(st, 4), 0);

        CHECK_INT(lp_stmt_step(st), LP_SQL_ROW); /* beta: NULL reads as 0, 0.0, NULL */
        CHECK_INT(lp_stmt_column_int64(st, 0), id_beta);
        CHECK_INT(lp_stmt_column_is_null(st, 2), 1);
        CHECK(lp_stmt_column_double(st, 2) == 0.0);
        CHECK(lp_stmt_column_blob(st, 3) == NULL);
        CHECK_INT(lp_stmt_column_bytes(st, 3), 0);
        CHECK_INT(lp_stmt_column_int64(st, 4), id_alpha);

        CHECK_INT(lp_stmt_step(st), LP_SQL_ROW); /* gamma */
        CHECK_INT(lp_stmt_column_int64(st, 0), BIG_ID);
        CHECK_INT(lp_stmt_column_int(st, 0), (int)BIG_ID);
        CHECK(lp_stmt_column_text(st, 4) == NULL);
        CHECK_INT(lp_stmt_step(st), LP_SQL_DONE);
        lp_stmt_finalize(st);
    }

    /* booleans read as 1 and 0; ?N used twice; a double exactly */
    st =
        prep(c, "SELECT name = ?1, score IS NULL, ?2 + ?2, ?3, ?4 FROM sql_contract WHERE id = ?5");
    if (st != NULL) {
        lp_stmt_bind_text(st, 1, "beta", -1);
        lp_stmt_bind_int64(st, 2, 21);
        lp_stmt_bind_double(st, 3, 0.1);
        lp_stmt_bind_text(st, 4, "x", -1);
        lp_stmt_bind_int64(st, 5, id_beta);
        CHECK_INT(lp_stmt_step(st), LP_SQL_ROW);
        CHECK_INT(lp_stmt_column_int64(st, 0), 1);
        CHECK_INT(lp_stmt_column_int(st, 1), 1);
        CHECK_INT(lp_stmt_column_int64(st, 2), 42);
        CHECK(lp_stmt_column_double(st, 3) == 0.1);
        CHECK_STR(lp_stmt_column_text(st, 4), "x");
        lp_stmt_finalize(st);
    }

    /* a reset keeps the bindings; cleared ones are NULL */
    st = prep(c, "SELECT name FROM sql_contract WHERE id = ?1");
    if (st != NULL) {
        lp_stmt_bind_int64(st, 1, id_alpha);
        CHECK_INT(lp_stmt_step(st), LP_SQL_ROW);
        lp_stmt_reset(st);
        CHECK_INT(lp_stmt_step(st), LP_SQL_ROW);
        CHECK_STR(lp_stmt_column_text(st, 0), "alpha");
        lp_stmt_reset(st);
        lp_stmt_clear_bindings(st);
        CHECK_INT(lp_stmt_step(st), LP_SQL_DONE);
        lp_stmt_finalize(st);
    }

    CHECK_INT(lp_conn_end_read(c), LP_SQL_DONE);
    CHECK_INT(lp_conn_in_txn(c), 0);

    /* a statement that cannot be prepared says why */
    CHECK(lp_stmt_prepare(c, "SELECT nothing FROM no_such_table") == NULL);
    CHECK(lp_conn_errmsg(c) != NULL && lp_conn_errmsg(c)[0] != '\0');
    lp_stmt_finalize(NULL);
    CHECK_INT(lp_conn_exec(c, "SELECT 1; SELECT 2"), LP_SQL_DONE);
    CHECK(lp_conn_exec(c, "SELECT nothing FROM no_such_table") == LP_SQL_ERROR);
}
