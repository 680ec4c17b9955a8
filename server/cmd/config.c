/*
 * config.c — the option table and its loader. See config.h.
 *
 * Adding an option means adding one row to OPTIONS and one field to
 * lp_config: help, environment lookup, parsing and bounds checks all come
 * from the row.
 */
#include "config.h"

#include "log.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* The named types (sync, log format, log level) take one of the names of
 * CHOICES[type], stored as its index. */
typedef enum opt_type {
    OPT_STR,
    OPT_INT,
    OPT_SIZE,
    OPT_REAL, /* a decimal number, stored as a double */
    OPT_FLAG,
    OPT_SYNC,
    OPT_LOG_FORMAT,
    OPT_LOG_LEVEL,
    OPT_TYPES
} opt_type;

typedef struct opt_def {
    const char *name; /* flag without the leading "--" */
    const char *env;
    opt_type type;
    size_t offset;
    const char *def; /* default, as text (parsed like any other value) */
    int64_t min, max;
    const char *help;
} opt_def;

#define OFF(f) offsetof(lp_config, f)
#define KIB (int64_t)1024
#define MIB (KIB * 1024)
#define GIB (MIB * 1024)

/* Indexed by lp_sync_level (and lp_log_format, lp_log_level); NULL-terminated. */
static const char *const SYNC_NAMES[] = {"normal", "full", NULL};
static const char *const *const CHOICES[OPT_TYPES] = {[OPT_SYNC] = SYNC_NAMES,
                                                      [OPT_LOG_FORMAT] = lp_log_format_names,
                                                      [OPT_LOG_LEVEL] = lp_log_level_names};

static const opt_def OPTIONS[] = {
    {"host", "LDPREF_HOST", OPT_STR, OFF(host), "127.0.0.1", 0, 0,
     "address to bind (IPv4 or IPv6 literal, or a host name)"},
    {"port", "LDPREF_PORT", OPT_INT, OFF(port), "8080", 0, 65535,
     "TCP port; 0 picks an ephemeral port (printed at start)"},
    {"db", "LDPREF_DB", OPT_STR, OFF(db), "var/ldpref.db", 0, 0, "SQLite database file"},
    {"threads", "LDPREF_THREADS", OPT_INT, OFF(threads), "0", 0, 256,
     "event-loop threads reading and writing connections; 0 = number of CPUs"},
    {"workers", "LDPREF_WORKERS", OPT_INT, OFF(workers), "0", 0, 1024,
     "threads for blocking work (verification, handlers, database reads); a quarter of them "
     "(at least one) serve /v1/score at a lower priority; 0 = 2 x number of CPUs (at least 4)"},
    {"connection-threads", "LDPREF_CONNECTION_THREADS", OPT_INT, OFF(connection_threads), "0", 0,
     4096,
     "0 = the event loop and workers; N > 0 = the previous model, a thread per connection, at "
     "most N connections: not safe against slow clients, and scoring is not put behind ingest"},
    {"connections-max", "LDPREF_CONNECTIONS_MAX", OPT_INT, OFF(connections_max), "4096", 16,
     1000000, "open connections at most (bounded by the open-file limit, raised at start)"},
    {"connections-per-address", "LDPREF_CONNECTIONS_PER_ADDRESS", OPT_INT,
     OFF(connections_per_address), "64", 0, 1000000,
     "open connections per client address at most; 0 = no cap"},
    {"body-budget", "LDPREF_BODY_BUDGET", OPT_SIZE, OFF(body_budget), "134217728", 0, 64 * GIB,
     "request bodies held in memory at once, all requests together, bytes; past it requests "
     "get 503 server_busy with Retry-After; 0 = no cap"},
    {"body-max", "LDPREF_BODY_MAX", OPT_SIZE, OFF(body_max), "65536", 1024, 64 * MIB,
     "request body cap for operator requests other than task uploads, bytes (requests "
     "anyone may send are capped at 16 KiB or this, whichever is smaller)"},
    {"batch-body-max", "LDPREF_BATCH_BODY_MAX", OPT_SIZE, OFF(batch_body_max), "1048576", 1024, GIB,
     "request body cap for /v1/labels/batch and /v1/score, bytes"},
    {"upload-max", "LDPREF_UPLOAD_MAX", OPT_SIZE, OFF(upload_max), "67108864", 1024, 4 * GIB,
     "request body cap for task uploads, bytes"},
    {"json-depth", "LDPREF_JSON_DEPTH", OPT_INT, OFF(json_depth), "32", 2, 1024,
     "maximum JSON nesting depth"},
    {"batch-max", "LDPREF_BATCH_MAX", OPT_INT, OFF(batch_max), "1000", 1, 100000,
     "maximum labels in one batch"},
    {"timestamp-window", "LDPREF_TIMESTAMP_WINDOW", OPT_INT, OFF(timestamp_window), "300", 1,
     86400 * 365, "accepted clock skew of signed timestamps, seconds (+/-)"},
    {"lease-seconds", "LDPREF_LEASE_SECONDS", OPT_INT, OFF(lease_seconds), "3600", 1, 86400 * 365,
     "how long a task handed out by /v1/tasks/next stays reserved for its annotator, seconds; "
     "an expired, unlabelled lease returns the task to the pool"},
    {"sync", "LDPREF_SYNC", OPT_SYNC, OFF(sync), "full", 0, 1,
     "durability: full (fsync each commit; survives power loss) or normal (survives a "
     "process crash; an OS crash may lose the last commits)"},
    {"connection-timeout", "LDPREF_CONNECTION_TIMEOUT", OPT_INT, OFF(connection_timeout), "30", 1,
     3600, "idle connection timeout, seconds"},
    {"db-must-exist", "LDPREF_DB_MUST_EXIST", OPT_FLAG, OFF(db_must_exist), "0", 0, 1,
     "refuse to start when the database file is missing instead of creating it"},
    {"disk-free-min", "LDPREF_DISK_FREE_MIN", OPT_SIZE, OFF(disk_free_min), "128M", 0, 1024 * GIB,
     "refuse writes (503 storage_unhealthy) while the database's filesystem has less free "
     "space than this, bytes; 0 = no check"},
    {"read-connections", "LDPREF_READ_CONNECTIONS", OPT_INT, OFF(read_connections), "4", 1, 64,
     "SQLite read connections in the pool"},
    {"train-threads", "LDPREF_TRAIN_THREADS", OPT_INT, OFF(train_threads), "1", 1, 64,
     "default threads of a training run (runs at idle priority)"},
    {"learner", "LDPREF_LEARNER", OPT_INT, OFF(learner), "1", 0, 1,
     "1: retraining, models and score endpoints on; 0: off"},
    {"score-rate", "LDPREF_SCORE_RATE", OPT_REAL, OFF(score_rate), "20", 0, 1000000,
     "score requests per second per operator token (an address gets --rate-address-factor "
     "times as many); 0 = unlimited"},
    {"score-burst", "LDPREF_SCORE_BURST", OPT_REAL, OFF(score_burst), "200", 1, 1000000,
     "score requests a token may send at once before --score-rate applies"},
    {"enroll-rate", "LDPREF_ENROLL_RATE", OPT_REAL, OFF(enroll_rate), "1", 0, 1000000,
     "enrollment attempts per second per client address (an IPv6 /64); 0 = unlimited"},
    {"enroll-burst", "LDPREF_ENROLL_BURST", OPT_REAL, OFF(enroll_burst), "30", 1, 1000000,
     "enrollment attempts an address may send at once before --enroll-rate applies"},
    {"next-rate", "LDPREF_NEXT_RATE", OPT_REAL, OFF(next_rate), "10", 0, 1000000,
     "task fetches (/v1/tasks/next) per second per annotator key (an address gets "
     "--rate-address-factor times as many); 0 = unlimited"},
    {"next-burst", "LDPREF_NEXT_BURST", OPT_REAL, OFF(next_burst), "100", 1, 1000000,
     "task fetches an annotator may send at once before --next-rate applies"},
    {"rate-address-factor", "LDPREF_RATE_ADDRESS_FACTOR", OPT_REAL, OFF(rate_address_factor), "4",
     1, 100000,
     "a client address (an IPv6 /64) may send this many times the score and next rates and "
     "bursts of one credential (people sharing an address behind a NAT)"},
    {"tls-cert", "LDPREF_TLS_CERT", OPT_STR, OFF(tls_cert), "", 0, 0,
     "PEM certificate chain: serve HTTPS (with --tls-key); unset = plain HTTP"},
    {"tls-key", "LDPREF_TLS_KEY", OPT_STR, OFF(tls_key), "", 0, 0,
     "PEM private key of --tls-cert; must not be readable by other users (mode 0600 or 0640)"},
    {"console-session-lifetime", "LDPREF_CONSOLE_SESSION_LIFETIME", OPT_INT,
     OFF(console_session_lifetime), "28800", 1, 86400 * 30,
     "a web console sign-in lasts at most this long, seconds"},
    {"console-idle-timeout", "LDPREF_CONSOLE_IDLE_TIMEOUT", OPT_INT, OFF(console_idle_timeout),
     "1800", 1, 86400 * 30,
     "a web console sign-in ends after this long without a request, seconds"},
    {"console-sessions", "LDPREF_CONSOLE_SESSIONS", OPT_INT, OFF(console_sessions), "32", 1, 4096,
     "web console sign-ins held at once (a new one ends the least recently used)"},
    {"log-format", "LDPREF_LOG_FORMAT", OPT_LOG_FORMAT, OFF(log_format), "text", 0, 1,
     "log lines on stderr: text (aligned key=value) or json (one object per line)"},
    {"log-level", "LDPREF_LOG_LEVEL", OPT_LOG_LEVEL, OFF(log_level), "info", 0, 3,
     "least severe level logged: debug, info (one line per request and per event), warn "
     "or error"},
    {"public-score", "LDPREF_PUBLIC_SCORE", OPT_FLAG, OFF(public_score), "0", 0, 1,
     "POST /v1/score also serves callers without a token: the active model only, and only when "
     "every label it was trained on was privatized (docs/trust-model.md)"},
    {"public-metrics", "LDPREF_PUBLIC_METRICS", OPT_FLAG, OFF(public_metrics), "0", 0, 1,
     "serve GET /metrics without a token (default: any live operator token, whatever its "
     "scopes)"},
    {"new-operator-token", NULL, OPT_FLAG, OFF(new_operator_token), "0", 0, 1,
     "mint one more operator token, print it, and exit"},
    {"token-name", NULL, OPT_STR, OFF(token_name), "operator", 0, 0,
     "name of the token --new-operator-token mints (1..64 bytes)"},
    {"token-scopes", NULL, OPT_STR, OFF(token_scopes), "admin,export,score", 0, 0,
     "scopes of the token --new-operator-token mints: a comma list of admin, export, score, "
     "or none (reads /metrics only)"},
    {"verify-audit", NULL, OPT_FLAG, OFF(verify_audit), "0", 0, 1,
     "verify the audit log's hash chain in --db, print the result and exit: 0 intact, "
     "1 broken (the first broken row is named), 2 unreadable"},
    {"migrate-to", NULL, OPT_STR, OFF(migrate_to), "", 0, 0,
     "copy the SQLite database --db into this empty PostgreSQL database (a postgresql:// URI), "
     "check the copy, print what was copied and exit: 0 copied, 1 refused or failed "
     "(nothing committed)"},
    {"help", NULL, OPT_FLAG, OFF(help), "0", 0, 1, "print this help and exit"},
};
#define N_OPTIONS (sizeof OPTIONS / sizeof OPTIONS[0])

const char *lp_config_sync_name(int64_t sync)
{
    return sync == LP_SYNC_FULL ? "full" : "normal";
}

/* "a|b|c" for the help text. */
static void choice_list(const char *const *choices, char *out, size_t outlen)
{
    size_t n = 0;
    out[0] = '\0';
    for (size_t k = 0; choices[k] != NULL && n < outlen; k++)
        n += (size_t)snprintf(out + n, outlen - n, "%s%s", k ? "|" : "", choices[k]);
}

static int set_value(lp_config *cfg, const opt_def *o, const char *text, const char *source,
                     char *err, size_t errlen)
{
    char *base = (char *)cfg + o->offset;
    if (o->type == OPT_STR) {
        size_t n = strlen(text);
        if (n == 0 || n >= LP_CONFIG_STR_MAX) {
            snprintf(err, errlen, "--%s (from %s): must be 1..%d bytes", o->name, source,
                     LP_CONFIG_STR_MAX - 1);
            return -1;
        }
        memcpy(base, text, n + 1);
        return 0;
    }
    if (o->type == OPT_REAL) {
        char *end = NULL;
        errno = 0;
        double d = strtod(text, &end);
        if (errno != 0 || end == text || *end != '\0' || !isfinite(d)) {
            snprintf(err, errlen, "--%s (from %s): \"%.64s\" is not a number", o->name, source,
                     text);
            return -1;
        }
        if (d < (double)o->min || d > (double)o->max) {
            snprintf(err, errlen, "--%s (from %s): %g is outside [%lld, %lld]", o->name, source, d,
                     (long long)o->min, (long long)o->max);
            return -1;
        }
        memcpy(base, &d, sizeof d);
        return 0;
    }
    int64_t v;
    const char *const *choices = CHOICES[o->type];
    if (choices != NULL) {
        v = -1;
        for (int64_t k = 0; choices[k] != NULL; k++)
            if (strcmp(text, choices[k]) == 0)
                v = k;
        if (v < 0) {
            char names[128];
            choice_list(choices, names, sizeof names);
            snprintf(err, errlen, "--%s (from %s): \"%.64s\" is not one of %s", o->name, source,
                     text, names);
            return -1;
        }
    } else {
        char *end = NULL;
        errno = 0;
        long long ll = strtoll(text, &end, 10);
        if (errno != 0 || end == text) {
            snprintf(err, errlen, "--%s (from %s): \"%.64s\" is not an integer", o->name, source,
                     text);
            return -1;
        }
        if (o->type == OPT_SIZE && *end != '\0') { /* optional K/M/G suffix */
            int64_t mult = *end == 'K' || *end == 'k'   ? KIB
                           : *end == 'M' || *end == 'm' ? MIB
                           : *end == 'G' || *end == 'g' ? GIB
                                                        : 0;
            if (mult == 0 || end[1] != '\0' || ll > INT64_MAX / mult || ll < 0) {
                snprintf(err, errlen, "--%s (from %s): \"%.64s\" is not a size", o->name, source,
                         text);
                return -1;
            }
            ll *= mult;
        } else if (*end != '\0') {
            snprintf(err, errlen, "--%s (from %s): \"%.64s\" is not an integer", o->name, source,
                     text);
            return -1;
        }
        v = ll;
        if (v < o->min || v > o->max) {
            snprintf(err, errlen, "--%s (from %s): %lld is outside [%lld, %lld]", o->name, source,
                     (long long)v, (long long)o->min, (long long)o->max);
            return -1;
        }
    }
    memcpy(base, &v, sizeof v);
    return 0;
}

static void resolve(lp_config *cfg)
{
    long n = sysconf(_SC_NPROCESSORS_ONLN);
    n = n < 1 ? 1 : n > 256 ? 256 : n;
    if (cfg->threads == 0)
        cfg->threads = n;
    if (cfg->workers == 0)
        cfg->workers = 2 * n < 4 ? 4 : 2 * n;
}

void lp_config_defaults(lp_config *cfg)
{
    char err[256];
    memset(cfg, 0, sizeof *cfg);
    for (size_t i = 0; i < N_OPTIONS; i++) {
        int rc = set_value(cfg, &OPTIONS[i], OPTIONS[i].def, "default", err, sizeof err);
        (void)rc;
    }
    resolve(cfg);
}

static const opt_def *find_option(const char *name, size_t len)
{
    for (size_t i = 0; i < N_OPTIONS; i++)
        if (strlen(OPTIONS[i].name) == len && strncmp(OPTIONS[i].name, name, len) == 0)
            return &OPTIONS[i];
    return NULL;
}

int lp_config_load(lp_config *cfg, int argc, char **argv, lp_config_getenv_fn getenv_fn, char *err,
                   size_t errlen)
{
    lp_config_defaults(cfg);
    cfg->threads = cfg->workers = 0; /* resolved again after env and flags */
    for (size_t i = 0; i < N_OPTIONS; i++) {
        const opt_def *o = &OPTIONS[i];
        if (o->env == NULL)
            continue;
        const char *v = getenv_fn ? getenv_fn(o->env) : getenv(o->env);
        if (v != NULL && set_value(cfg, o, v, o->env, err, errlen) != 0)
            return -1;
    }
    for (int i = 1; i < argc; i++) {
        const char *arg = argv[i];
        if (strncmp(arg, "--", 2) != 0) {
            snprintf(err, errlen, "unexpected argument \"%.64s\" (see --help)", arg);
            return -1;
        }
        const char *name = arg + 2;
        const char *eq = strchr(name, '=');
        size_t nlen = eq ? (size_t)(eq - name) : strlen(name);
        const opt_def *o = find_option(name, nlen);
        if (o == NULL) {
            snprintf(err, errlen, "unknown option \"%.64s\" (see --help)", arg);
            return -1;
        }
        const char *value;
        if (o->type == OPT_FLAG) {
            if (eq != NULL) {
                snprintf(err, errlen, "--%s takes no value", o->name);
                return -1;
            }
            value = "1";
        } else if (eq != NULL) {
            value = eq + 1;
        } else if (i + 1 < argc) {
            value = argv[++i];
        } else {
            snprintf(err, errlen, "--%s needs a value", o->name);
            return -1;
        }
        if (set_value(cfg, o, value, "command line", err, errlen) != 0)
            return -1;
    }
    resolve(cfg);
    return 0;
}

/* "--name ARG" as --help shows it: STR, X, N or the choices. */
static void option_flag(const opt_def *o, char *flag, size_t len)
{
    char names[128] = " ";
    if (CHOICES[o->type] != NULL)
        choice_list(CHOICES[o->type], names + 1, sizeof names - 1);
    snprintf(flag, len, "--%s%s", o->name,
             o->type == OPT_FLAG   ? ""
             : o->type == OPT_STR  ? " STR"
             : o->type == OPT_REAL ? " X"
             : CHOICES[o->type]    ? names
                                   : " N");
}

/* The environment variable and default as --help shows them ("" if none). */
static void option_source(const opt_def *o, char *text, size_t len)
{
    if (o->type != OPT_FLAG)
        snprintf(text, len, "%s; default %s", o->env, *o->def ? o->def : "unset");
    else if (o->env != NULL)
        snprintf(text, len, "%s=1", o->env);
    else
        text[0] = '\0';
}

#define PRECEDENCE                                                                                 \
    "Precedence: defaults < environment < flags. Sizes accept K, M, G; X is a decimal number."

void lp_config_usage(FILE *out, const char *prog)
{
    fprintf(out, "usage: %s [options]\n\nOptions (environment variable; default):\n", prog);
    for (size_t i = 0; i < N_OPTIONS; i++) {
        char flag[64], source[160];
        option_flag(&OPTIONS[i], flag, sizeof flag);
        option_source(&OPTIONS[i], source, sizeof source);
        fprintf(out, "  %-28s %s\n", flag, OPTIONS[i].help);
        if (*source)
            fprintf(out, "  %-28s (%s)\n", "", source);
    }
    fprintf(out, "\n" PRECEDENCE "\n");
}

void lp_config_man(FILE *out)
{
    fprintf(out, "@th\tldpref-server\tthe ldpref collection and training service\n"
                 "@synopsis\tldpref-server [options]\n"
                 "@sh\tDESCRIPTION\n"
                 "@tx\tServes the ldpref HTTP API: enrollment, tasks, signed privatized labels, "
                 "operator requests, retraining and scoring, over one SQLite database. Every "
                 "option can also be set through its environment variable.\n"
                 "@sh\tOPTIONS\n");
    for (size_t i = 0; i < N_OPTIONS; i++) {
        char flag[64], source[160];
        option_flag(&OPTIONS[i], flag, sizeof flag);
        option_source(&OPTIONS[i], source, sizeof source);
        fprintf(out, "@op\t%s\t%s%s%s%s\n", flag, OPTIONS[i].help, *source ? " (" : "", source,
                *source ? ")" : "");
    }
    fprintf(out, "@tx\t" PRECEDENCE "\n"
                 "@sh\tSEE ALSO\n"
                 "@tx\tldpref(1), ldpref-train(1); docs/server.md and docs/operators.md in the "
                 "source tree.\n");
}
