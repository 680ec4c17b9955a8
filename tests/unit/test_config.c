/* test_config.c — the option table: defaults, env < flags precedence, bounds,
 * named choices (sync, log format and level), decimal rates and the help
 * text. */
#include "check.h"
#include "config.h"
#include "log.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *env_port = NULL, *env_sync = NULL, *env_lease = NULL, *env_log_level = NULL;

static const char *fake_env(const char *name)
{
    if (strcmp(name, "LDPREF_PORT") == 0)
        return env_port;
    if (strcmp(name, "LDPREF_SYNC") == 0)
        return env_sync;
    if (strcmp(name, "LDPREF_LEASE_SECONDS") == 0)
        return env_lease;
    if (strcmp(name, "LDPREF_LOG_LEVEL") == 0)
        return env_log_level;
    return NULL;
}

static int load(lp_config *c, int argc, const char **argv, char *err)
{
    return lp_config_load(c, argc, (char **)argv, fake_env, err, 256);
}

int main(void)
{
    lp_config c;
    char err[256];
    const char *none[] = {"x"};
    CHECK_INT(load(&c, 1, none, err), 0);
    CHECK_STR(c.host, "127.0.0.1");
    CHECK_INT(c.port, 8080);
    CHECK_STR(c.db, "var/ldpref.db");
    CHECK(c.threads >= 1);
    CHECK_INT(c.body_max, 65536);
    CHECK_INT(c.batch_body_max, 1 << 20);
    CHECK(c.workers >= 4);
    CHECK_INT(c.connections_max, 4096);
    CHECK_INT(c.connections_per_address, 64);
    CHECK_INT(c.body_budget, 128 << 20);
    CHECK_INT(c.upload_max, 64 << 20);
    CHECK_INT(c.batch_max, 1000);
    CHECK_INT(c.timestamp_window, 300);
    CHECK_INT(c.lease_seconds, 3600);
    CHECK_INT(c.sync, LP_SYNC_FULL);
    CHECK_INT(c.new_operator_token, 0);
    CHECK_INT(c.public_score, 0); /* /v1/score needs a token by default */
    CHECK_INT(c.db_must_exist, 0);
    CHECK_INT(c.disk_free_min, 128 << 20);
    const char *storage[] = {"x", "--db-must-exist", "--disk-free-min", "0"};
    CHECK_INT(load(&c, 4, storage, err), 0);
    CHECK_INT(c.db_must_exist, 1);
    CHECK_INT(c.disk_free_min, 0);
    const char *pg_uri[] = {"x", "--db", "postgresql://ldpref@db.example/ldpref"};
    CHECK_INT(load(&c, 3, pg_uri, err), 0); /* the PostgreSQL backend */
    CHECK_STR(c.db, "postgresql://ldpref@db.example/ldpref");
    /* the rate limits of docs/server.md, and no TLS */
    CHECK_NEAR(c.score_rate, 20, 0);
    CHECK_NEAR(c.score_burst, 200, 0);
    CHECK_NEAR(c.enroll_rate, 1, 0);
    CHECK_NEAR(c.enroll_burst, 30, 0);
    CHECK_NEAR(c.next_rate, 10, 0);
    CHECK_NEAR(c.next_burst, 100, 0);
    CHECK_NEAR(c.rate_address_factor, 4, 0);
    CHECK_STR(c.tls_cert, "");
    CHECK_STR(c.tls_key, "");
    const char *rates[] = {"x",   "--enroll-rate", "0.25",  "--score-rate=0", "--next-burst",
                           "1e3", "--tls-cert",    "c.pem", "--tls-key=k.pem"};
    CHECK_INT(load(&c, 9, rates, err), 0);
    CHECK_NEAR(c.enroll_rate, 0.25, 0);
    CHECK_NEAR(c.score_rate, 0, 0);
    CHECK_NEAR(c.next_burst, 1000, 0);
    CHECK_STR(c.tls_cert, "c.pem");
    CHECK_STR(c.tls_key, "k.pem");
    const char *bad_rate[] = {"x", "--enroll-rate", "fast"};
    CHECK_INT(load(&c, 3, bad_rate, err), -1);
    CHECK(strstr(err, "--enroll-rate") && strstr(err, "not a number"));
    const char *neg_rate[] = {"x", "--score-rate", "-1"};
    CHECK_INT(load(&c, 3, neg_rate, err), -1);
    CHECK(strstr(err, "outside"));
    const char *nan_rate[] = {"x", "--next-rate", "nan"};
    CHECK_INT(load(&c, 3, nan_rate, err), -1);
    const char *zero_burst[] = {"x", "--score-burst", "0.5"};
    CHECK_INT(load(&c, 3, zero_burst, err), -1);

    env_port = "9000";
    env_sync = "normal";
    CHECK_INT(load(&c, 1, none, err), 0);
    CHECK_INT(c.port, 9000);
    CHECK_INT(c.sync, LP_SYNC_NORMAL);
    const char *flags[] = {"x",
                           "--port",
                           "0",
                           "--sync=full",
                           "--body-max=128K",
                           "--threads",
                           "3",
                           "--new-operator-token",
                           "--workers=5",
                           "--body-budget=8M",
                           "--connections-per-address=0",
                           "--public-score"};
    CHECK_INT(load(&c, 12, flags, err), 0);
    CHECK_INT(c.workers, 5);
    CHECK_INT(c.body_budget, 8 << 20);
    CHECK_INT(c.connections_per_address, 0);
    CHECK_INT(c.port, 0);
    CHECK_INT(c.sync, LP_SYNC_FULL);
    CHECK_INT(c.body_max, 128 * 1024);
    CHECK_INT(c.threads, 3);
    CHECK_INT(c.new_operator_token, 1);
    CHECK_INT(c.public_score, 1);

    env_port = "70000";
    CHECK_INT(load(&c, 1, none, err), -1);
    CHECK(strstr(err, "LDPREF_PORT") != NULL);
    env_port = NULL;
    const char *bad1[] = {"x", "--port", "abc"};
    CHECK_INT(load(&c, 3, bad1, err), -1);
    const char *bad2[] = {"x", "--nope"};
    CHECK_INT(load(&c, 2, bad2, err), -1);
    const char *bad3[] = {"x", "--sync", "sometimes"};
    CHECK_INT(load(&c, 3, bad3, err), -1);
    const char *bad4[] = {"x", "--port"};
    CHECK_INT(load(&c, 2, bad4, err), -1);
    const char *bad5[] = {"x", "--help=1"};
    CHECK_INT(load(&c, 2, bad5, err), -1);
    const char *bad6[] = {"x", "--body-max", "12Q"};
    CHECK_INT(load(&c, 3, bad6, err), -1);
    const char *bad7[] = {"x", "--batch-max", "0"};
    CHECK_INT(load(&c, 3, bad7, err), -1);
    CHECK_INT(load(&c, 1, none, err), 0);
    CHECK_INT(c.connection_threads, 0); /* the event loop by default */
    const char *tpc[] = {"x", "--connection-threads", "256"};
    CHECK_INT(load(&c, 3, tpc, err), 0);
    CHECK_INT(c.connection_threads, 256);
    /* the lease: environment, then flag; at least one second */
    env_lease = "90";
    CHECK_INT(load(&c, 1, none, err), 0);
    CHECK_INT(c.lease_seconds, 90);
    const char *lease[] = {"x", "--lease-seconds", "5"};
    CHECK_INT(load(&c, 3, lease, err), 0);
    CHECK_INT(c.lease_seconds, 5);
    env_lease = "0";
    CHECK_INT(load(&c, 1, none, err), -1);
    CHECK(strstr(err, "LDPREF_LEASE_SECONDS") != NULL);
    env_lease = NULL;
    const char *bad_lease[] = {"x", "--lease-seconds=-1"};
    CHECK_INT(load(&c, 2, bad_lease, err), -1);
    /* the log: text at info by default; names map to common/log.h's enums */
    CHECK_INT(load(&c, 1, none, err), 0);
    CHECK_INT(c.log_format, LP_LOG_TEXT);
    CHECK_INT(c.log_level, LP_LOG_INFO);
    env_log_level = "warn";
    const char *logs[] = {"x", "--log-format", "json"};
    CHECK_INT(load(&c, 3, logs, err), 0);
    CHECK_INT(c.log_format, LP_LOG_JSON);
    CHECK_INT(c.log_level, LP_LOG_WARN);
    const char *debug[] = {"x", "--log-level=debug"};
    CHECK_INT(load(&c, 2, debug, err), 0);
    CHECK_INT(c.log_level, LP_LOG_DEBUG);
    const char *error[] = {"x", "--log-level", "error"};
    CHECK_INT(load(&c, 3, error, err), 0);
    CHECK_INT(c.log_level, LP_LOG_ERROR);
    env_log_level = "verbose";
    CHECK_INT(load(&c, 1, none, err), -1);
    CHECK(strstr(err, "LDPREF_LOG_LEVEL") != NULL && strstr(err, "debug|info|warn|error"));
    env_log_level = NULL;
    const char *bad_format[] = {"x", "--log-format", "xml"};
    CHECK_INT(load(&c, 3, bad_format, err), -1);
    CHECK(strstr(err, "--log-format") != NULL && strstr(err, "text|json") != NULL);
    CHECK(strstr(err, "sometimes") == NULL);
    const char *bad_sync[] = {"x", "--sync", "sometimes"};
    CHECK_INT(load(&c, 3, bad_sync, err), -1);
    CHECK(strstr(err, "normal|full") != NULL);
    char *usage = NULL;
    size_t usage_len = 0;
    FILE *mem = open_memstream(&usage, &usage_len);
    lp_config_usage(mem, "ldpref-server");
    fclose(mem);
    CHECK(strstr(usage, "--log-format text|json") != NULL);
    CHECK(strstr(usage, "--log-level debug|info|warn|error") != NULL);
    CHECK(strstr(usage, "--sync normal|full") != NULL);
    CHECK(strstr(usage, "(LDPREF_LOG_LEVEL; default info)") != NULL);
    CHECK(strstr(usage, "(LDPREF_DB_MUST_EXIST=1)") != NULL);
    free(usage);
    const char *help[] = {"x", "--help"};
    CHECK_INT(load(&c, 2, help, err), 0);
    CHECK_INT(c.help, 1);
    FILE *devnull = fopen("/dev/null", "w");
    lp_config_usage(devnull, "ldpref-server");
    fclose(devnull);
    return check_summary();
}
