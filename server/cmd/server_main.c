/*
 * main.c — ldpref-server: options, store, first operator token, learner,
 * HTTP, and a graceful shutdown on SIGTERM/SIGINT (stop accepting, finish
 * in-flight requests, cancel a training run, drain the writer, close the
 * database).
 *
 * stdout carries exactly two kinds of lines that tools parse:
 *   "operator token: <token>"   (only when a new database got its first token,
 *                                or with --new-operator-token)
 *   "listening on http://HOST:PORT"  (https:// with --tls-cert and --tls-key)
 * Everything else goes to stderr as log lines (common/log.h; --log-format,
 * --log-level), except an invalid command line, reported before the log is
 * configured; secrets are never logged. --verify-audit prints one result
 * line on stdout ("audit chain intact: ..." or "audit chain broken ...").
 * --migrate-to prints a line per table copied ("copied TABLE: N rows,
 * checksum HEX") and a last line ("migrated: ..."); the URI is not printed
 * (it may hold a password).
 */
#include "api.h"
#include "audit.h"
#include "auth.h"
#include "clock.h"
#include "config.h"
#include "error.h"
#include "http.h"
#include "log.h"
#include "metrics.h"
#include "migrate.h"
#include "retrain.h"
#include "rr.h"
#include "store.h"
#include "tls.h"
#include "tokens.h"

#include <pthread.h>
#include <signal.h>
#include <sodium.h>
#include <stdio.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>

#define SHUTDOWN_GRACE_MS 30000

/* The learner pauses while this counter moves (retrain.h). */
static uint64_t user_activity(void *ctx)
{
    (void)ctx;
    return lp_metrics_activity();
}

/* The thread that waits for SIGTERM/SIGINT (main). A library may start
 * threads before main blocks the signals (OpenBLAS starts its workers when
 * it is loaded), and the kernel may hand a stop signal to one of them; this
 * handler passes it on to the main thread, where it waits, blocked, for
 * sigwait. Without it such a signal killed the server outright when it
 * arrived before main reached sigwait. pthread_kill is async-signal-safe. */
static pthread_t signal_thread;

static void forward_stop_signal(int sig)
{
    pthread_kill(signal_thread, sig);
}

/* Raises the open-file limit to its hard limit and returns the connection
 * cap that fits under it (a few descriptors stay for the database, the
 * listening socket, the event loops and the log). */
#define FDS_RESERVED 64
static int connections_max(int64_t wanted)
{
    struct rlimit rl;
    if (getrlimit(RLIMIT_NOFILE, &rl) != 0)
        return (int)wanted;
    if (rl.rlim_cur < rl.rlim_max) {
        rl.rlim_cur = rl.rlim_max;
        setrlimit(RLIMIT_NOFILE, &rl);
        getrlimit(RLIMIT_NOFILE, &rl);
    }
    if (rl.rlim_cur != RLIM_INFINITY && (rlim_t)wanted + FDS_RESERVED > rl.rlim_cur) {
        int fit = rl.rlim_cur > 2 * FDS_RESERVED ? (int)(rl.rlim_cur - FDS_RESERVED) : FDS_RESERVED;
        lp_log(LP_LOG_WARN, "connections_max_lowered", LP_LOG_INT("requested", wanted),
               LP_LOG_INT("open_file_limit", (int64_t)rl.rlim_cur),
               LP_LOG_INT("connections_max", fit));
        return fit;
    }
    return (int)wanted;
}

/* A reason the server cannot start or go on. */
static void fatal(const char *message)
{
    lp_log(LP_LOG_ERROR, "server_error", LP_LOG_STR("message", message));
}

/* --verify-audit: walks the audit chain of db (read-only) and prints the
 * outcome. 0 intact, 1 broken, 2 unreadable. */
static int verify_audit(const char *db)
{
    lp_audit_check c;
    char err[512], hex[LP_AUDIT_HEX];
    if (lp_audit_verify_file(db, &c, err, sizeof err) != LP_OK) {
        fprintf(stderr, "ldpref-server: --verify-audit: %s\n", err);
        return 2;
    }
    sodium_bin2hex(hex, sizeof hex, c.head.hash, LP_HASH_BYTES);
    if (c.intact) {
        printf("audit chain intact: %lld rows, head %s\n", (long long)c.rows, hex);
        return 0;
    }
    if (c.bad_id > 0)
        printf("audit chain broken at row %lld: %s\n", (long long)c.bad_id, c.problem);
    else
        printf("audit chain broken: %s\n", c.problem);
    printf("rows chained before it: %lld, head %s\n", (long long)c.rows, hex);
    return 1;
}

static void migrated_table(const lp_migrate_table *t, void *ctx)
{
    printf("copied %s: %lld rows, checksum %s\n", t->name, (long long)t->rows, t->checksum);
    fflush(stdout);
}

/* --migrate-to: copies the SQLite database db into the PostgreSQL database
 * at uri (migrate.h). 0 copied, 1 refused or failed, 2 a wrong command. */
static int migrate_to(const char *db, const char *uri)
{
    if (strncmp(uri, "postgresql://", 13) != 0 && strncmp(uri, "postgres://", 11) != 0) {
        fprintf(stderr, "ldpref-server: --migrate-to takes a postgresql:// URI\n");
        return 2;
    }
    if (strncmp(db, "postgresql://", 13) == 0 || strncmp(db, "postgres://", 11) == 0) {
        fprintf(stderr, "ldpref-server: --migrate-to copies a SQLite database: --db FILE\n");
        return 2;
    }
    lp_migrate_report rep;
    char err[1024];
    int64_t start = lp_now_ms();
    if (lp_migrate_to_pg(db, uri, &rep, migrated_table, NULL, err, sizeof err) != LP_OK) {
        fprintf(stderr, "ldpref-server: --migrate-to: %s; nothing was committed\n", err);
        return 1;
    }
    printf("migrated: %d tables, %lld rows, schema version %lld, %.1f s\n", rep.tables,
           (long long)rep.rows, (long long)rep.version, (double)(lp_now_ms() - start) / 1000.0);
    return 0;
}

/* Records a token minted outside the API in the audit log. */
static void audit_mint(lp_store *store, const char *action)
{
    lp_store_audit_append(store, 0, action, "{}", 201, "", lp_now_ms(), NULL);
}

int main(int argc, char **argv)
{
    lp_config cfg;
    char err[512];
    if (argc == 2 && strcmp(argv[1], "--man") == 0) { /* hidden: the build's manual page */
        lp_config_man(stdout);
        return 0;
    }
    if (lp_config_load(&cfg, argc, argv, NULL, err, sizeof err) != 0) {
        fprintf(stderr, "ldpref-server: %s\n", err);
        return 2;
    }
    if (cfg.help) {
        lp_config_usage(stdout, "ldpref-server");
        return 0;
    }
    if (cfg.verify_audit)
        return verify_audit(cfg.db);
    if (cfg.migrate_to[0] != '\0')
        return migrate_to(cfg.db, cfg.migrate_to);
    lp_log_configure((lp_log_level)cfg.log_level, (lp_log_format)cfg.log_format);
    /* Every file the server creates (the database, its WAL and shm, the
     * marker) is for its owner only; the store also asks for 0600 itself. */
    umask(077);
    int tls = cfg.tls_cert[0] != '\0' || cfg.tls_key[0] != '\0';
    if (tls && (cfg.tls_cert[0] == '\0' || cfg.tls_key[0] == '\0')) {
        fprintf(stderr, "ldpref-server: --tls-cert and --tls-key go together\n");
        return 2;
    }
    /* Read before anything else starts: a bad key file stops the server here. */
    lp_tls_pem pem = {0};
    if (tls && !cfg.new_operator_token &&
        lp_tls_pem_load(cfg.tls_cert, cfg.tls_key, &pem, err, sizeof err) != 0) {
        fatal(err);
        return 1;
    }
    if (lp_rng_init() != LP_OK) {
        fatal("the system random number generator is unavailable");
        lp_tls_pem_release(&pem);
        return 1;
    }
    /* Signals are handled by sigwait in this thread only: block them before
     * any thread of ours exists so every one inherits the mask (a library's
     * earlier threads: forward_stop_signal). */
    sigset_t sigs;
    sigemptyset(&sigs);
    sigaddset(&sigs, SIGTERM);
    sigaddset(&sigs, SIGINT);
    pthread_sigmask(SIG_BLOCK, &sigs, NULL);
    signal_thread = pthread_self();
    struct sigaction forward = {.sa_handler = forward_stop_signal};
    sigemptyset(&forward.sa_mask);
    sigaction(SIGTERM, &forward, NULL);
    sigaction(SIGINT, &forward, NULL);
    signal(SIGPIPE, SIG_IGN);

    lp_store_opts so = {.path = cfg.db,
                        .sync_full = cfg.sync == LP_SYNC_FULL,
                        .read_conns = (int)cfg.read_connections,
                        .lease_ms = cfg.lease_seconds * 1000,
                        .must_exist = (int)cfg.db_must_exist,
                        .marker = 1,
                        .disk_free_min = cfg.disk_free_min};
    lp_store *store = NULL;
    if (lp_store_open(&so, &store, err, sizeof err) != LP_OK) {
        fatal(err);
        lp_tls_pem_release(&pem);
        return 1;
    }
    char token[LP_AUTH_TOKEN_MAX];
    if (cfg.new_operator_token) {
        unsigned scopes = 0;
        char msg[128];
        int rc = lp_scopes_parse_list(cfg.token_scopes, &scopes, msg, sizeof msg);
        if (rc != LP_OK) {
            fprintf(stderr, "ldpref-server: --token-scopes: %s\n", msg);
            lp_store_close(store);
            return 2;
        }
        lp_op_token row;
        rc = lp_auth_operator_mint(store, cfg.token_name, scopes, token, &row);
        if (rc == LP_OK) {
            char id[LP_TOKEN_ID_MAX];
            lp_token_id_format(row.id, id);
            printf("operator token: %s\n", token);
            lp_log(LP_LOG_INFO, "token_minted", LP_LOG_STR("id", id), LP_LOG_STR("name", row.name),
                   LP_LOG_STR("scopes", cfg.token_scopes));
            fflush(stdout);
            audit_mint(store, "ldpref-server --new-operator-token");
        } else {
            lp_log(LP_LOG_ERROR, "server_error", LP_LOG_STR("message", "cannot mint a token"),
                   LP_LOG_STR("error", lp_error_name(rc)));
        }
        sodium_memzero(token, sizeof token);
        lp_store_close(store);
        return rc == LP_OK ? 0 : 1;
    }
    int created = 0;
    int rc = lp_auth_bootstrap(store, token, &created);
    if (rc != LP_OK) {
        lp_log(LP_LOG_ERROR, "server_error",
               LP_LOG_STR("message", "cannot create the first operator token"),
               LP_LOG_STR("error", lp_error_name(rc)));
        lp_store_close(store);
        lp_tls_pem_release(&pem);
        return 1;
    }
    if (created) {
        printf("operator token: %s\n", token);
        fflush(stdout);
        sodium_memzero(token, sizeof token);
        audit_mint(store, "ldpref-server first operator token");
    }

    lp_api_opts ao = {.body_max = (size_t)cfg.body_max,
                      .batch_body_max = (size_t)cfg.batch_body_max,
                      .upload_max = (size_t)cfg.upload_max,
                      .json_depth = (int)cfg.json_depth,
                      .batch_max = (size_t)cfg.batch_max,
                      .timestamp_window_ms = cfg.timestamp_window * 1000,
                      .console_lifetime_s = cfg.console_session_lifetime,
                      .console_idle_s = cfg.console_idle_timeout,
                      .console_sessions_max = (size_t)cfg.console_sessions,
                      .score_rate = cfg.score_rate,
                      .score_burst = cfg.score_burst,
                      .next_rate = cfg.next_rate,
                      .next_burst = cfg.next_burst,
                      .enroll_rate = cfg.enroll_rate,
                      .enroll_burst = cfg.enroll_burst,
                      .rate_address_factor = cfg.rate_address_factor,
                      .tls = tls,
                      .public_metrics = (int)cfg.public_metrics,
                      .public_score = cfg.public_score != 0};
    ao.train_threads = (int)cfg.train_threads;
    lp_learner *learner = NULL;
    if (cfg.learner) {
        lp_learner_opts lo = {
            .threads = (int)cfg.train_threads, .scheduler = 1, .activity = user_activity};
        if (lp_learner_new(store, &lo, &learner, err, sizeof err) != LP_OK) {
            fatal(err);
            lp_store_close(store);
            lp_tls_pem_release(&pem);
            return 1;
        }
    }
    lp_api *api = lp_api_new(store, &ao);
    if (api != NULL)
        lp_api_set_learner(api, learner);
    lp_http_opts ho = {.host = cfg.host,
                       .port = (int)cfg.port,
                       .threads = (int)cfg.threads,
                       .workers = (int)cfg.workers,
                       .connection_threads = (int)cfg.connection_threads,
                       .connection_timeout = (int)cfg.connection_timeout,
                       .connections_max = connections_max(cfg.connections_max),
                       .connections_per_address = (int)cfg.connections_per_address,
                       .body_budget = (size_t)cfg.body_budget,
                       .tls_cert = pem.cert,
                       .tls_key = pem.key};
    lp_http *http = NULL;
    int port = 0;
    if (api == NULL || lp_http_start(api, &ho, &http, &port, err, sizeof err) != 0) {
        fatal(api ? err : "out of memory");
        lp_api_free(api);
        lp_learner_free(learner);
        lp_store_close(store);
        lp_tls_pem_release(&pem);
        return 1;
    }
    const char *host = strchr(cfg.host, ':') ? "[%s]" : "%s";
    char hostbuf[LP_CONFIG_STR_MAX + 2];
    snprintf(hostbuf, sizeof hostbuf, host, cfg.host);
    printf("listening on %s://%s:%d\n", tls ? "https" : "http", hostbuf, port);
    fflush(stdout);
    lp_log(LP_LOG_INFO, "server_start", LP_LOG_STR("version", LDPREF_VERSION),
           LP_LOG_STR("address", hostbuf), LP_LOG_INT("port", port), LP_LOG_STR("db", cfg.db),
           LP_LOG_STR("sync", lp_config_sync_name(cfg.sync)),
           LP_LOG_STR("threading", cfg.connection_threads > 0 ? "per_connection" : "event_loop"),
           LP_LOG_INT("threads", cfg.connection_threads > 0 ? cfg.connection_threads : cfg.threads),
           LP_LOG_INT("workers", cfg.workers), LP_LOG_INT("connections_max", ho.connections_max),
           LP_LOG_BOOL("learner", cfg.learner), LP_LOG_BOOL("tls", tls),
           LP_LOG_BOOL("public_score", cfg.public_score),
           LP_LOG_INT("disk_free_min", cfg.disk_free_min));

    int sig = 0;
    sigwait(&sigs, &sig);
    lp_log(LP_LOG_INFO, "server_stopping",
           LP_LOG_STR("signal", sig == SIGTERM ? "SIGTERM" : "SIGINT"));
    lp_http_stop(http, SHUTDOWN_GRACE_MS);
    lp_tls_pem_release(&pem);
    lp_api_free(api);
    lp_learner_free(learner); /* cancels a running training run */
    lp_store_close(store);    /* drains the writer, checkpoints, closes */
    lp_log(LP_LOG_INFO, "server_stop", LP_LOG_STR("version", LDPREF_VERSION),
           LP_LOG_STR("db", cfg.db));
    return 0;
}
