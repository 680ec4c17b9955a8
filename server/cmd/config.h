/*
 * config.h — ldpref-server configuration.
 *
 * One table of options (server/cmd/config.c) is the single source of truth: it
 * gives each option's flag name, environment variable (LDPREF_*), type,
 * default, bounds and help text, and feeds --help, validation and defaults.
 * Precedence: built-in defaults < environment < command-line flags.
 */
#ifndef LP_CONFIG_H
#define LP_CONFIG_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#define LP_CONFIG_STR_MAX 1024

typedef enum lp_sync_level {
    LP_SYNC_NORMAL = 0, /* WAL + synchronous=NORMAL: survives a process crash */
    LP_SYNC_FULL = 1    /* WAL + synchronous=FULL: also survives OS crash / power loss */
} lp_sync_level;

typedef struct lp_config {
    char host[LP_CONFIG_STR_MAX];
    int64_t port;
    char db[LP_CONFIG_STR_MAX];
    int64_t threads;            /* event-loop threads; resolved: never 0 after lp_config_load */
    int64_t workers;            /* threads for blocking work; resolved: never 0 */
    int64_t connection_threads; /* > 0: a thread per connection instead of the event loop */
    int64_t connections_max;
    int64_t connections_per_address;
    int64_t body_budget; /* bytes; 0: no cap */
    int64_t body_max;
    int64_t batch_body_max;
    int64_t upload_max;
    int64_t json_depth;
    int64_t batch_max;
    int64_t timestamp_window;   /* seconds */
    int64_t lease_seconds;      /* an assignment's lease */
    int64_t sync;               /* lp_sync_level */
    int64_t connection_timeout; /* seconds */
    int64_t read_connections;
    int64_t db_must_exist; /* flag */
    int64_t disk_free_min; /* bytes; 0: no check */
    int64_t train_threads;
    int64_t learner;                  /* 1: learning endpoints on */
    int64_t log_format;               /* lp_log_format (common/log.h) */
    int64_t log_level;                /* lp_log_level */
    double score_rate, score_burst;   /* per second, per operator token; 0: unlimited */
    double enroll_rate, enroll_burst; /* per second, per client address */
    double next_rate, next_burst;     /* per second, per annotator key */
    double rate_address_factor;       /* an address's share: this many credentials */
    char tls_cert[LP_CONFIG_STR_MAX]; /* PEM file; "" = plain HTTP */
    char tls_key[LP_CONFIG_STR_MAX];
    int64_t console_session_lifetime; /* seconds */
    int64_t console_idle_timeout;     /* seconds */
    int64_t console_sessions;
    int64_t public_score;                 /* flag: anonymous scoring of privatized models */
    int64_t public_metrics;               /* flag: GET /metrics without a token */
    int64_t new_operator_token;           /* flag */
    char token_name[LP_CONFIG_STR_MAX];   /* of the token --new-operator-token mints */
    char token_scopes[LP_CONFIG_STR_MAX]; /* its scopes: "admin,export,score", "none" */
    int64_t verify_audit;                 /* flag */
    char migrate_to[LP_CONFIG_STR_MAX];   /* a PostgreSQL URI; "" = serve */
    int64_t help;                         /* flag */
} lp_config;

/* Looks up an environment variable; returns NULL when unset. */
typedef const char *(*lp_config_getenv_fn)(const char *name);

/* Fills cfg with the built-in defaults (threads resolved to nproc). */
void lp_config_defaults(lp_config *cfg);

/*
 * Loads the configuration: defaults, then environment (via getenv_fn, or the
 * process environment when NULL), then argv[1..argc). Accepts "--name value"
 * and "--name=value"; flags take no value. Every value is validated against
 * the option's type and bounds. Returns 0 on success, -1 with a message in
 * err (errlen bytes) naming the option and the source of the bad value.
 */
int lp_config_load(lp_config *cfg, int argc, char **argv, lp_config_getenv_fn getenv_fn, char *err,
                   size_t errlen);

/* Writes the --help text (generated from the option table) to out. */
void lp_config_usage(FILE *out, const char *prog);
/* The manual page's records (the Makefile's manpage.awk turns them into
 * roff), from the same table: "@tag<TAB>field..." lines. */
void lp_config_man(FILE *out);

/* "full" or "normal". */
const char *lp_config_sync_name(int64_t sync);

#endif
