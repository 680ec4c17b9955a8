/*
 * ledger.c — the device's local ledger on SQLite. See ledger.h.
 *
 * The file is created with mode 0600 before SQLite opens it (SQLite gives
 * its -wal and -shm files the database file's permissions); an existing file
 * that is readable by group or others is tightened to 0600. Statements are
 * prepared per call: the ledger is touched a few times per label, never in a
 * hot loop, so clarity wins over caching.
 */
#include "ledger.h"

#include "buf.h"
#include "error.h"
#include "wire.h"

#include <errno.h>
#include <fcntl.h>
#include <sodium.h>
#include <sqlite3.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define LPC_STR_(x) #x
#define LPC_STR(x) LPC_STR_(x)

struct lpc_ledger {
    sqlite3 *db;
    uint8_t secret[LPC_DEVICE_SECRET_BYTES];
};

static const char SCHEMA_V1[] =
    "CREATE TABLE device(id INTEGER PRIMARY KEY CHECK (id = 1), secret BLOB NOT NULL,"
    "  created INTEGER NOT NULL);"
    "CREATE TABLE memo(memo_key BLOB PRIMARY KEY, z_canonical INTEGER NOT NULL"
    "  CHECK (z_canonical IN (0, 1)), epsilon REAL NOT NULL, created INTEGER NOT NULL);"
    "CREATE TABLE spend(id INTEGER PRIMARY KEY, memo_key BLOB NOT NULL, epsilon REAL NOT NULL,"
    "  server TEXT NOT NULL, task_id INTEGER NOT NULL, created INTEGER NOT NULL);"
    "CREATE TABLE outbox(server TEXT NOT NULL, task_id INTEGER NOT NULL, message TEXT NOT NULL,"
    "  receipt TEXT, last_error TEXT, created INTEGER NOT NULL, PRIMARY KEY (server, task_id));"
    "CREATE TABLE task(server TEXT NOT NULL, task_id INTEGER NOT NULL, memo_key BLOB NOT NULL,"
    "  swapped INTEGER NOT NULL CHECK (swapped IN (0, 1)), epsilon_proposed REAL NOT NULL,"
    "  epsilon_min REAL NOT NULL, epsilon_max REAL NOT NULL, fetched INTEGER NOT NULL,"
    "  PRIMARY KEY (server, task_id));";

/* v2: CTL simulation. A memo entry or outbox message drawn with the
 * simulation on records its settings (JSON text); NULL for real answers. */
static const char SCHEMA_V2[] = "ALTER TABLE memo ADD COLUMN simulation TEXT;"
                                "ALTER TABLE outbox ADD COLUMN simulation TEXT;";

/* v3: skipped tasks, so that answering one is refused before anything is
 * randomized or spent. */
static const char SCHEMA_V3[] =
    "CREATE TABLE skipped(server TEXT NOT NULL, task_id INTEGER NOT NULL,"
    "  created INTEGER NOT NULL, PRIMARY KEY (server, task_id));";

/* v4: near-duplicate detection. A memo entry keeps its comparison's sketch
 * (NULL for entries of earlier versions until they are asked again); a
 * fetched task keeps its sketch and, when normalization changed its text,
 * the key of the text as received (exact_key, exact_swapped). */
static const char SCHEMA_V4[] =
    "ALTER TABLE memo ADD COLUMN sketch BLOB;"
    "ALTER TABLE task ADD COLUMN exact_key BLOB;"
    "ALTER TABLE task ADD COLUMN exact_swapped INTEGER;"
    "ALTER TABLE task ADD COLUMN sketch BLOB;"
    /* The smallest sketch values of each response of each entry (memo.h
     * LPC_SKETCH_PROBES), as signed 64-bit integers: where near-duplicates
     * are looked for. */
    "CREATE TABLE memo_probe(value INTEGER NOT NULL, memo_key BLOB NOT NULL);"
    "CREATE INDEX memo_probe_value ON memo_probe(value);";

static int64_t now_s(void)
{
    return (int64_t)time(NULL);
}

static int db_fail(sqlite3 *db, char *msg, size_t msglen, const char *what)
{
    return lp_fail(LP_ESTORAGE, msg, msglen, "ledger: %s: %s", what,
                   db ? sqlite3_errmsg(db) : "cannot open");
}

/* Creates the file 0600 if absent; tightens an existing one. */
static int prepare_file(const char *path, char *msg, size_t msglen)
{
    int fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600);
    if (fd < 0)
        return lp_fail(LP_EIO, msg, msglen, "ledger %s: %s", path, strerror(errno));
    struct stat st;
    int rc = LP_OK;
    if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode))
        rc = lp_fail(LP_EIO, msg, msglen, "ledger %s is not a regular file", path);
    else if ((st.st_mode & 077) != 0 && fchmod(fd, 0600) != 0)
        rc = lp_fail(LP_EIO, msg, msglen, "ledger %s: cannot make it private: %s", path,
                     strerror(errno));
    close(fd);
    return rc;
}

static int exec(lpc_ledger *l, const char *sql)
{
    return sqlite3_exec(l->db, sql, NULL, NULL, NULL) == SQLITE_OK ? LP_OK : LP_ESTORAGE;
}

_Static_assert(LPC_LEDGER_VERSION == 4, "migrate() writes user_version 4");

static int migrate(lpc_ledger *l, char *msg, size_t msglen)
{
    sqlite3_stmt *st = NULL;
    int version = -1;
    if (sqlite3_prepare_v2(l->db, "PRAGMA user_version", -1, &st, NULL) == SQLITE_OK &&
        sqlite3_step(st) == SQLITE_ROW)
        version = sqlite3_column_int(st, 0);
    sqlite3_finalize(st);
    if (version < 0)
        return db_fail(l->db, msg, msglen, "reading the schema version");
    if (version > LPC_LEDGER_VERSION)
        return lp_fail(LP_ESTORAGE, msg, msglen,
                       "ledger schema version %d is newer than this library (%d)", version,
                       LPC_LEDGER_VERSION);
    if (version == LPC_LEDGER_VERSION)
        return LP_OK;
    /* One step per version, all in one transaction: 0 (a new file) -> 1 -> ... -> 4. */
    if (exec(l, "BEGIN IMMEDIATE") != LP_OK)
        return db_fail(l->db, msg, msglen, "starting the migration");
    if ((version < 1 && exec(l, SCHEMA_V1) != LP_OK) ||
        (version < 2 && exec(l, SCHEMA_V2) != LP_OK) ||
        (version < 3 && exec(l, SCHEMA_V3) != LP_OK) ||
        (version < 4 && exec(l, SCHEMA_V4) != LP_OK) ||
        exec(l, "PRAGMA user_version = 4") != LP_OK) {
        int rc = db_fail(l->db, msg, msglen, "migrating the schema");
        exec(l, "ROLLBACK");
        return rc;
    }
    if (exec(l, "COMMIT") != LP_OK)
        return db_fail(l->db, msg, msglen, "committing the migration");
    return LP_OK;
}

/* Loads the device secret, creating it (CSPRNG) on first use. */
static int load_secret(lpc_ledger *l, char *msg, size_t msglen)
{
    sqlite3_stmt *st = NULL;
    int rc = LP_ESTORAGE;
    if (exec(l, "BEGIN IMMEDIATE") != LP_OK)
        return db_fail(l->db, msg, msglen, "reading the device secret");
    if (sqlite3_prepare_v2(l->db, "SELECT secret FROM device WHERE id = 1", -1, &st, NULL) !=
        SQLITE_OK)
        goto out;
    int step = sqlite3_step(st);
    if (step == SQLITE_ROW) {
        if (sqlite3_column_bytes(st, 0) != LPC_DEVICE_SECRET_BYTES) {
            sqlite3_finalize(st);
            exec(l, "ROLLBACK");
            return lp_fail(LP_ESTORAGE, msg, msglen, "ledger: malformed device secret");
        }
        memcpy(l->secret, sqlite3_column_blob(st, 0), LPC_DEVICE_SECRET_BYTES);
        rc = LP_OK;
    } else if (step == SQLITE_DONE) {
        sqlite3_finalize(st);
        st = NULL;
        randombytes_buf(l->secret, sizeof l->secret);
        if (sqlite3_prepare_v2(l->db, "INSERT INTO device(id, secret, created) VALUES (1, ?, ?)",
                               -1, &st, NULL) != SQLITE_OK)
            goto out;
        sqlite3_bind_blob(st, 1, l->secret, sizeof l->secret, SQLITE_TRANSIENT);
        sqlite3_bind_int64(st, 2, now_s());
        if (sqlite3_step(st) == SQLITE_DONE)
            rc = LP_OK;
    }
out:
    sqlite3_finalize(st);
    if (rc == LP_OK && exec(l, "COMMIT") == LP_OK)
        return LP_OK;
    rc = db_fail(l->db, msg, msglen, "device secret");
    exec(l, "ROLLBACK");
    return rc;
}

int lpc_ledger_open(const char *path, lpc_ledger **out, char *msg, size_t msglen)
{
    *out = NULL;
    int rc = prepare_file(path, msg, msglen);
    if (rc != LP_OK)
        return rc;
    lpc_ledger *l = calloc(1, sizeof *l);
    if (l == NULL)
        return lp_fail(LP_ENO_MEMORY, msg, msglen, "out of memory");
    if (sqlite3_open_v2(path, &l->db, SQLITE_OPEN_READWRITE | SQLITE_OPEN_FULLMUTEX, NULL) !=
        SQLITE_OK) {
        rc = db_fail(l->db, msg, msglen, "open");
        goto fail;
    }
    sqlite3_busy_timeout(l->db, 10000);
    /* FULL: a spend must survive a crash before its label is sent. */
    if (exec(l, "PRAGMA journal_mode = WAL") != LP_OK ||
        exec(l, "PRAGMA synchronous = FULL") != LP_OK ||
        exec(l, "PRAGMA secure_delete = ON") != LP_OK) {
        rc = db_fail(l->db, msg, msglen, "configure");
        goto fail;
    }
    if ((rc = migrate(l, msg, msglen)) != LP_OK || (rc = load_secret(l, msg, msglen)) != LP_OK)
        goto fail;
    *out = l;
    return LP_OK;
fail:
    lpc_ledger_close(l);
    return rc;
}

void lpc_ledger_close(lpc_ledger *l)
{
    if (l == NULL)
        return;
    sqlite3_close_v2(l->db);
    sodium_memzero(l->secret, sizeof l->secret);
    free(l);
}

const uint8_t *lpc_ledger_secret(const lpc_ledger *l)
{
    return l->secret;
}

int lpc_ledger_begin(lpc_ledger *l)
{
    return exec(l, "BEGIN IMMEDIATE");
}

int lpc_ledger_commit(lpc_ledger *l)
{
    return exec(l, "COMMIT");
}

void lpc_ledger_rollback(lpc_ledger *l)
{
    if (!sqlite3_get_autocommit(l->db))
        exec(l, "ROLLBACK");
}

/* Prepares sql; on failure returns NULL. */
static sqlite3_stmt *prep(lpc_ledger *l, const char *sql)
{
    sqlite3_stmt *st = NULL;
    if (sqlite3_prepare_v2(l->db, sql, -1, &st, NULL) != SQLITE_OK) {
        sqlite3_finalize(st);
        return NULL;
    }
    return st;
}

/* Steps a write statement to completion and finalizes it. */
static int run(sqlite3_stmt *st)
{
    int rc = sqlite3_step(st) == SQLITE_DONE ? LP_OK : LP_ESTORAGE;
    sqlite3_finalize(st);
    return rc;
}

static char *dup_text(sqlite3_stmt *st, int col)
{
    const unsigned char *t = sqlite3_column_text(st, col);
    return t ? strdup((const char *)t) : NULL;
}

int lpc_ledger_memo_get(lpc_ledger *l, const uint8_t key[LPC_MEMO_KEY_BYTES], int *z_canonical,
                        double *epsilon, char **simulation)
{
    if (simulation)
        *simulation = NULL;
    sqlite3_stmt *st =
        prep(l, "SELECT z_canonical, epsilon, simulation FROM memo WHERE memo_key = ?");
    if (st == NULL)
        return LP_ESTORAGE;
    sqlite3_bind_blob(st, 1, key, LPC_MEMO_KEY_BYTES, SQLITE_STATIC);
    int step = sqlite3_step(st), rc;
    if (step == SQLITE_ROW) {
        *z_canonical = sqlite3_column_int(st, 0);
        *epsilon = sqlite3_column_double(st, 1);
        rc = LP_OK;
        if (simulation && sqlite3_column_type(st, 2) != SQLITE_NULL &&
            (*simulation = dup_text(st, 2)) == NULL)
            rc = LP_ENO_MEMORY;
    } else {
        rc = step == SQLITE_DONE ? LP_ENOT_FOUND : LP_ESTORAGE;
    }
    sqlite3_finalize(st);
    return rc;
}

int lpc_ledger_memo_put(lpc_ledger *l, const uint8_t key[LPC_MEMO_KEY_BYTES], int z_canonical,
                        double epsilon, const char *simulation)
{
    sqlite3_stmt *st = prep(l, "INSERT INTO memo(memo_key, z_canonical, epsilon, created,"
                               " simulation) VALUES (?, ?, ?, ?, ?)");
    if (st == NULL)
        return LP_ESTORAGE;
    sqlite3_bind_blob(st, 1, key, LPC_MEMO_KEY_BYTES, SQLITE_STATIC);
    sqlite3_bind_int(st, 2, z_canonical);
    sqlite3_bind_double(st, 3, epsilon);
    sqlite3_bind_int64(st, 4, now_s());
    if (simulation)
        sqlite3_bind_text(st, 5, simulation, -1, SQLITE_STATIC);
    return run(st);
}

int lpc_ledger_memo_set_sketch(lpc_ledger *l, const uint8_t key[LPC_MEMO_KEY_BYTES],
                               const lpc_sketch *sketch)
{
    uint8_t blob[LPC_SKETCH_BYTES];
    lpc_sketch_encode(sketch, blob);
    sqlite3_stmt *st = prep(l, "UPDATE memo SET sketch = ? WHERE memo_key = ? AND sketch IS NULL");
    if (st == NULL)
        return LP_ESTORAGE;
    sqlite3_bind_blob(st, 1, blob, sizeof blob, SQLITE_TRANSIENT);
    sqlite3_bind_blob(st, 2, key, LPC_MEMO_KEY_BYTES, SQLITE_STATIC);
    int rc = run(st);
    if (rc != LP_OK || sqlite3_changes(l->db) != 1)
        return rc; /* the entry kept the sketch it had */
    for (int part = 1; part <= 2 && rc == LP_OK; part++)
        for (uint32_t k = 0; k < sketch->n[part] && k < LPC_SKETCH_PROBES && rc == LP_OK; k++) {
            if ((st = prep(l, "INSERT INTO memo_probe(value, memo_key) VALUES (?, ?)")) == NULL)
                return LP_ESTORAGE;
            sqlite3_bind_int64(st, 1, (sqlite3_int64)sketch->v[part][k]);
            sqlite3_bind_blob(st, 2, key, LPC_MEMO_KEY_BYTES, SQLITE_STATIC);
            rc = run(st);
        }
    return rc;
}

/* Entries compared in full per lookup, and the count at which a probe
 * value's rarity stops being measured. */
#define LPC_PROBE_CANDIDATES_MAX 64
#define LPC_PROBE_COUNT_CAP 1000

struct probe {
    int64_t value;
    int count; /* entries holding it, up to LPC_PROBE_COUNT_CAP */
};

static int probe_rarer(const void *a, const void *b)
{
    const struct probe *x = a, *y = b;
    return (x->count > y->count) - (x->count < y->count);
}

/*
 * Keys of the entries that may share more than half of asked's p probes.
 * Such an entry misses fewer than p/2 of them, so it holds at least one of
 * any ceil(p/2): the rarest ceil(p/2) are looked up, so a phrase that many
 * entries share costs nothing. Most shared first, at most
 * LPC_PROBE_CANDIDATES_MAX: *n of them in keys.
 */
static int probe_candidates(lpc_ledger *l, const lpc_sketch *asked,
                            uint8_t (*keys)[LPC_MEMO_KEY_BYTES], size_t *n)
{
    *n = 0;
    struct probe probes[2 * LPC_SKETCH_PROBES];
    int p = 0;
    for (int part = 1; part <= 2; part++)
        for (uint32_t k = 0; k < asked->n[part] && k < LPC_SKETCH_PROBES; k++)
            probes[p++].value = (int64_t)asked->v[part][k];
    for (int i = 0; i < p; i++) {
        sqlite3_stmt *st = prep(l, "SELECT count(*) FROM (SELECT 1 FROM memo_probe"
                                   " WHERE value = ? LIMIT " LPC_STR(LPC_PROBE_COUNT_CAP) ")");
        if (st == NULL)
            return LP_ESTORAGE;
        sqlite3_bind_int64(st, 1, probes[i].value);
        int step = sqlite3_step(st);
        probes[i].count = step == SQLITE_ROW ? sqlite3_column_int(st, 0) : 0;
        sqlite3_finalize(st);
        if (step != SQLITE_ROW)
            return LP_ESTORAGE;
    }
    qsort(probes, (size_t)p, sizeof *probes, probe_rarer);
    int h = (p + 1) / 2;
    while (h > 0 && probes[h - 1].count == 0)
        h--; /* values no entry holds find nothing */
    if (h == 0)
        return LP_OK;
    char sql[256 + 2 * 2 * LPC_SKETCH_PROBES];
    int len = snprintf(sql, sizeof sql, "SELECT memo_key FROM memo_probe WHERE value IN (");
    for (int i = 0; i < h; i++)
        len += snprintf(sql + len, sizeof sql - (size_t)len, "%s?", i ? "," : "");
    snprintf(sql + len, sizeof sql - (size_t)len,
             ") GROUP BY memo_key ORDER BY count(*) DESC, min(rowid) LIMIT %d",
             LPC_PROBE_CANDIDATES_MAX);
    sqlite3_stmt *st = prep(l, sql);
    if (st == NULL)
        return LP_ESTORAGE;
    for (int i = 0; i < h; i++)
        sqlite3_bind_int64(st, i + 1, probes[i].value);
    int step;
    while ((step = sqlite3_step(st)) == SQLITE_ROW && *n < LPC_PROBE_CANDIDATES_MAX)
        if (sqlite3_column_bytes(st, 0) == LPC_MEMO_KEY_BYTES)
            memcpy(keys[(*n)++], sqlite3_column_blob(st, 0), LPC_MEMO_KEY_BYTES);
    sqlite3_finalize(st);
    return step == SQLITE_ROW || step == SQLITE_DONE ? LP_OK : LP_ESTORAGE;
}

int lpc_ledger_memo_nearest(lpc_ledger *l, const lpc_sketch *asked, double threshold,
                            uint8_t key_out[LPC_MEMO_KEY_BYTES], int *flip, double *similarity)
{
    uint8_t keys[LPC_PROBE_CANDIDATES_MAX][LPC_MEMO_KEY_BYTES];
    lpc_sketch *stored = malloc(sizeof *stored);
    size_t n = 0;
    int rc = stored ? probe_candidates(l, asked, keys, &n) : LP_ENO_MEMORY;
    double best = -1;
    int64_t best_row = INT64_MAX;
    for (size_t i = 0; i < n && rc == LP_OK; i++) {
        sqlite3_stmt *st = prep(l, "SELECT rowid, sketch FROM memo WHERE memo_key = ?");
        if (st == NULL) {
            rc = LP_ESTORAGE;
            break;
        }
        sqlite3_bind_blob(st, 1, keys[i], LPC_MEMO_KEY_BYTES, SQLITE_STATIC);
        int f = 0;
        if (sqlite3_step(st) == SQLITE_ROW &&
            lpc_sketch_decode(sqlite3_column_blob(st, 1), (size_t)sqlite3_column_bytes(st, 1),
                              stored) == LP_OK) {
            double sim = lpc_sketch_match(stored, asked, &f);
            int64_t row = sqlite3_column_int64(st, 0);
            /* The closest; among equally close ones the oldest. */
            if (sim >= threshold && (sim > best || (sim == best && row < best_row))) {
                best = sim;
                best_row = row;
                memcpy(key_out, keys[i], LPC_MEMO_KEY_BYTES);
                *flip = f;
            }
        }
        sqlite3_finalize(st);
    }
    free(stored);
    if (rc != LP_OK)
        return rc;
    if (similarity)
        *similarity = best;
    return best >= 0 ? LP_OK : LP_ENOT_FOUND;
}

int lpc_ledger_spend(lpc_ledger *l, const uint8_t key[LPC_MEMO_KEY_BYTES], double epsilon,
                     const char *server, int64_t task_id)
{
    sqlite3_stmt *st = prep(l, "INSERT INTO spend(memo_key, epsilon, server, task_id, created)"
                               " VALUES (?, ?, ?, ?, ?)");
    if (st == NULL)
        return LP_ESTORAGE;
    sqlite3_bind_blob(st, 1, key, LPC_MEMO_KEY_BYTES, SQLITE_STATIC);
    sqlite3_bind_double(st, 2, epsilon);
    sqlite3_bind_text(st, 3, server, -1, SQLITE_STATIC);
    sqlite3_bind_int64(st, 4, task_id);
    sqlite3_bind_int64(st, 5, now_s());
    return run(st);
}

int lpc_ledger_spent(lpc_ledger *l, double *sum)
{
    /* Summed in C so that an infinite epsilon stays +inf. */
    sqlite3_stmt *st = prep(l, "SELECT epsilon FROM spend ORDER BY id");
    if (st == NULL)
        return LP_ESTORAGE;
    double s = 0.0;
    int step;
    while ((step = sqlite3_step(st)) == SQLITE_ROW)
        s += sqlite3_column_double(st, 0);
    sqlite3_finalize(st);
    if (step != SQLITE_DONE)
        return LP_ESTORAGE;
    *sum = s;
    return LP_OK;
}

int lpc_ledger_outbox_get(lpc_ledger *l, const char *server, int64_t task_id, char **message,
                          char **receipt, int *simulated)
{
    *message = NULL;
    if (receipt)
        *receipt = NULL;
    sqlite3_stmt *st = prep(l, "SELECT message, receipt, simulation IS NOT NULL FROM outbox"
                               " WHERE server = ? AND task_id = ?");
    if (st == NULL)
        return LP_ESTORAGE;
    sqlite3_bind_text(st, 1, server, -1, SQLITE_STATIC);
    sqlite3_bind_int64(st, 2, task_id);
    int step = sqlite3_step(st), rc = LP_OK;
    if (step == SQLITE_ROW) {
        if (simulated)
            *simulated = sqlite3_column_int(st, 2);
        *message = dup_text(st, 0);
        if (*message == NULL)
            rc = LP_ENO_MEMORY;
        else if (receipt && sqlite3_column_type(st, 1) != SQLITE_NULL &&
                 (*receipt = dup_text(st, 1)) == NULL)
            rc = LP_ENO_MEMORY;
    } else {
        rc = step == SQLITE_DONE ? LP_ENOT_FOUND : LP_ESTORAGE;
    }
    sqlite3_finalize(st);
    if (rc != LP_OK) {
        free(*message);
        *message = NULL;
    }
    return rc;
}

int lpc_ledger_outbox_put(lpc_ledger *l, const char *server, int64_t task_id, const char *message,
                          const char *simulation)
{
    sqlite3_stmt *st = prep(l, "INSERT INTO outbox(server, task_id, message, created, simulation)"
                               " VALUES (?, ?, ?, ?, ?)");
    if (st == NULL)
        return LP_ESTORAGE;
    sqlite3_bind_text(st, 1, server, -1, SQLITE_STATIC);
    sqlite3_bind_int64(st, 2, task_id);
    sqlite3_bind_text(st, 3, message, -1, SQLITE_STATIC);
    sqlite3_bind_int64(st, 4, now_s());
    if (simulation)
        sqlite3_bind_text(st, 5, simulation, -1, SQLITE_STATIC);
    return run(st);
}

static int outbox_update(lpc_ledger *l, const char *sql, const char *server, int64_t task_id,
                         const char *text)
{
    sqlite3_stmt *st = prep(l, sql);
    if (st == NULL)
        return LP_ESTORAGE;
    sqlite3_bind_text(st, 1, text, -1, SQLITE_STATIC);
    sqlite3_bind_text(st, 2, server, -1, SQLITE_STATIC);
    sqlite3_bind_int64(st, 3, task_id);
    int rc = run(st);
    if (rc == LP_OK && sqlite3_changes(l->db) != 1)
        rc = LP_ENOT_FOUND;
    return rc;
}

int lpc_ledger_outbox_replace(lpc_ledger *l, const char *server, int64_t task_id,
                              const char *message)
{
    return outbox_update(l,
                         "UPDATE outbox SET message = ?, last_error = NULL"
                         " WHERE server = ? AND task_id = ? AND receipt IS NULL",
                         server, task_id, message);
}

int lpc_ledger_outbox_set_receipt(lpc_ledger *l, const char *server, int64_t task_id,
                                  const char *receipt)
{
    return outbox_update(l,
                         "UPDATE outbox SET receipt = ?, last_error = NULL"
                         " WHERE server = ? AND task_id = ?",
                         server, task_id, receipt);
}

int lpc_ledger_outbox_set_error(lpc_ledger *l, const char *server, int64_t task_id,
                                const char *error)
{
    return outbox_update(l, "UPDATE outbox SET last_error = ? WHERE server = ? AND task_id = ?",
                         server, task_id, error);
}

int lpc_ledger_outbox_pending(lpc_ledger *l, const char *server, int64_t **ids, size_t *n)
{
    *ids = NULL;
    *n = 0;
    sqlite3_stmt *st = prep(l, "SELECT task_id FROM outbox WHERE server = ? AND receipt IS NULL"
                               " ORDER BY task_id");
    if (st == NULL)
        return LP_ESTORAGE;
    sqlite3_bind_text(st, 1, server, -1, SQLITE_STATIC);
    size_t cap = 0;
    int step, rc = LP_OK;
    while ((step = sqlite3_step(st)) == SQLITE_ROW) {
        if ((rc = lp_array_reserve((void **)ids, &cap, *n, sizeof **ids, 16)) != LP_OK)
            break;
        (*ids)[(*n)++] = sqlite3_column_int64(st, 0);
    }
    if (rc == LP_OK && step != SQLITE_DONE)
        rc = LP_ESTORAGE;
    sqlite3_finalize(st);
    if (rc != LP_OK) {
        free(*ids);
        *ids = NULL;
        *n = 0;
    }
    return rc;
}

int lpc_ledger_task_put(lpc_ledger *l, const char *server, int64_t task_id, const lpc_task_meta *m)
{
    sqlite3_stmt *st =
        prep(l, "INSERT OR REPLACE INTO task(server, task_id, memo_key, swapped, epsilon_proposed,"
                " epsilon_min, epsilon_max, fetched, exact_key, exact_swapped, sketch)"
                " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)");
    if (st == NULL)
        return LP_ESTORAGE;
    if (m->has_exact) {
        sqlite3_bind_blob(st, 9, m->exact_key, LPC_MEMO_KEY_BYTES, SQLITE_STATIC);
        sqlite3_bind_int(st, 10, m->exact_swapped);
    }
    uint8_t blob[LPC_SKETCH_BYTES];
    if (m->has_sketch) {
        lpc_sketch_encode(&m->sketch, blob);
        sqlite3_bind_blob(st, 11, blob, sizeof blob, SQLITE_STATIC);
    }
    sqlite3_bind_text(st, 1, server, -1, SQLITE_STATIC);
    sqlite3_bind_int64(st, 2, task_id);
    sqlite3_bind_blob(st, 3, m->memo_key, LPC_MEMO_KEY_BYTES, SQLITE_STATIC);
    sqlite3_bind_int(st, 4, m->swapped);
    sqlite3_bind_double(st, 5, m->epsilon_proposed);
    sqlite3_bind_double(st, 6, m->epsilon_min);
    sqlite3_bind_double(st, 7, m->epsilon_max);
    sqlite3_bind_int64(st, 8, now_s());
    return run(st);
}

int lpc_ledger_skip_put(lpc_ledger *l, const char *server, int64_t task_id)
{
    sqlite3_stmt *st =
        prep(l, "INSERT OR IGNORE INTO skipped(server, task_id, created) VALUES (?, ?, ?)");
    if (st == NULL)
        return LP_ESTORAGE;
    sqlite3_bind_text(st, 1, server, -1, SQLITE_STATIC);
    sqlite3_bind_int64(st, 2, task_id);
    sqlite3_bind_int64(st, 3, now_s());
    return run(st);
}

int lpc_ledger_skipped(lpc_ledger *l, const char *server, int64_t task_id)
{
    sqlite3_stmt *st = prep(l, "SELECT 1 FROM skipped WHERE server = ? AND task_id = ?");
    if (st == NULL)
        return LP_ESTORAGE;
    sqlite3_bind_text(st, 1, server, -1, SQLITE_STATIC);
    sqlite3_bind_int64(st, 2, task_id);
    int step = sqlite3_step(st);
    sqlite3_finalize(st);
    return step == SQLITE_ROW ? LP_OK : step == SQLITE_DONE ? LP_ENOT_FOUND : LP_ESTORAGE;
}

int lpc_ledger_task_get(lpc_ledger *l, const char *server, int64_t task_id, lpc_task_meta *out)
{
    sqlite3_stmt *st = prep(l, "SELECT memo_key, swapped, epsilon_proposed, epsilon_min,"
                               " epsilon_max, exact_key, exact_swapped, sketch FROM task"
                               " WHERE server = ? AND task_id = ?");
    if (st == NULL)
        return LP_ESTORAGE;
    sqlite3_bind_text(st, 1, server, -1, SQLITE_STATIC);
    sqlite3_bind_int64(st, 2, task_id);
    int step = sqlite3_step(st), rc;
    if (step == SQLITE_ROW && sqlite3_column_bytes(st, 0) == LPC_MEMO_KEY_BYTES) {
        memcpy(out->memo_key, sqlite3_column_blob(st, 0), LPC_MEMO_KEY_BYTES);
        out->swapped = sqlite3_column_int(st, 1) != 0;
        out->epsilon_proposed = sqlite3_column_double(st, 2);
        out->epsilon_min = sqlite3_column_double(st, 3);
        out->epsilon_max = sqlite3_column_double(st, 4);
        out->has_exact = sqlite3_column_bytes(st, 5) == LPC_MEMO_KEY_BYTES;
        if (out->has_exact)
            memcpy(out->exact_key, sqlite3_column_blob(st, 5), LPC_MEMO_KEY_BYTES);
        out->exact_swapped = sqlite3_column_int(st, 6) != 0;
        out->has_sketch =
            lpc_sketch_decode(sqlite3_column_blob(st, 7), (size_t)sqlite3_column_bytes(st, 7),
                              &out->sketch) == LP_OK;
        rc = LP_OK;
    } else {
        rc = step == SQLITE_DONE ? LP_ENOT_FOUND : LP_ESTORAGE;
    }
    sqlite3_finalize(st);
    return rc;
}

static int count(lpc_ledger *l, const char *sql, int64_t *out)
{
    if (out == NULL)
        return LP_OK;
    sqlite3_stmt *st = prep(l, sql);
    if (st == NULL)
        return LP_ESTORAGE;
    int rc = LP_ESTORAGE;
    if (sqlite3_step(st) == SQLITE_ROW) {
        *out = sqlite3_column_int64(st, 0);
        rc = LP_OK;
    }
    sqlite3_finalize(st);
    return rc;
}

int lpc_ledger_count_simulated(lpc_ledger *l, int64_t *memo)
{
    return count(l, "SELECT count(*) FROM memo WHERE simulation IS NOT NULL", memo);
}

int lpc_ledger_counts(lpc_ledger *l, int64_t *memo, int64_t *spend, int64_t *outbox,
                      int64_t *pending)
{
    int rc;
    if ((rc = count(l, "SELECT count(*) FROM memo", memo)) != LP_OK ||
        (rc = count(l, "SELECT count(*) FROM spend", spend)) != LP_OK ||
        (rc = count(l, "SELECT count(*) FROM outbox", outbox)) != LP_OK ||
        (rc = count(l, "SELECT count(*) FROM outbox WHERE receipt IS NULL", pending)) != LP_OK)
        return rc;
    return LP_OK;
}
