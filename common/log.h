/*
 * log.h — the server's log: one line per event on stderr, text or JSON.
 *
 * A line is a time (ISO-8601 UTC with milliseconds), a level, an event name
 * and typed fields:
 *
 *   text: 2026-11-24T11:42:20.123Z info  request            method=POST status=200
 *   json: {"time":"2026-11-24T11:42:20.123Z","level":"info","event":"request",...}
 *
 * Each line is built in a stack buffer and written with one write(2) of at
 * most LP_LOG_LINE_MAX bytes (<= PIPE_BUF), so lines from concurrent threads
 * never interleave, on a pipe, a file or a terminal. Nothing is locked;
 * level and format are atomics set once at start. A line below the level
 * costs one atomic load and formats nothing (the lp_log macro tests first).
 *
 * Strings are escaped for JSON in both formats (", \, control characters as
 * \n or \u00XX; bytes that are not valid UTF-8 become U+FFFD) and capped at
 * LP_LOG_VALUE_MAX bytes (a cut value ends in "..."). Text values are
 * written bare when they hold only printable ASCII without space, quote,
 * '=' or backslash, quoted otherwise. Callers pass only what may be seen by
 * whoever reads the log: never a token, a key, a signature, a label value
 * or a request body.
 *
 * Thread safety: every function may be called from any thread.
 */
#ifndef LP_LOG_H
#define LP_LOG_H

#include <stddef.h>
#include <stdint.h>

#define LP_LOG_LINE_MAX 4096 /* bytes of one line, newline included */
#define LP_LOG_VALUE_MAX 512 /* bytes of one string value before escaping */

typedef enum lp_log_level { LP_LOG_DEBUG, LP_LOG_INFO, LP_LOG_WARN, LP_LOG_ERROR } lp_log_level;
typedef enum lp_log_format { LP_LOG_TEXT, LP_LOG_JSON } lp_log_format;

/* Lines below level are dropped; the default is info, text, on fd 2. */
void lp_log_configure(lp_log_level level, lp_log_format format);
/* Where lines go (tests); the default is 2 (stderr). */
void lp_log_set_fd(int fd);
/* 1 when a line at level would be written. */
int lp_log_enabled(lp_log_level level);

/* Names ("debug", "info", "warn", "error"; "text", "json") by value,
 * NULL-terminated, and their parse: 0, or -1 for an unknown name. */
extern const char *const lp_log_level_names[];
extern const char *const lp_log_format_names[];
const char *lp_log_level_name(lp_log_level level);
int lp_log_level_parse(const char *name, lp_log_level *out);
const char *lp_log_format_name(lp_log_format format);
int lp_log_format_parse(const char *name, lp_log_format *out);

typedef enum lp_log_type {
    LP_LOG_T_NONE,
    LP_LOG_T_STR,
    LP_LOG_T_INT,
    LP_LOG_T_NUM,
    LP_LOG_T_BOOL,
    LP_LOG_T_MS
} lp_log_type;

/* A field: key (a static identifier) and a typed value. A NULL string is
 * written as null (JSON) or - (text); a non-finite number as null / nan. */
typedef struct lp_log_field {
    const char *key;
    lp_log_type type;
    const char *s;
    int64_t i;
    double d;
} lp_log_field;

#define LP_LOG_STR(k, v) ((lp_log_field){.key = (k), .type = LP_LOG_T_STR, .s = (v)})
#define LP_LOG_INT(k, v) ((lp_log_field){.key = (k), .type = LP_LOG_T_INT, .i = (int64_t)(v)})
#define LP_LOG_NUM(k, v) ((lp_log_field){.key = (k), .type = LP_LOG_T_NUM, .d = (double)(v)})
/* A duration given in nanoseconds, written in milliseconds with 3 decimals. */
#define LP_LOG_MS(k, ns) ((lp_log_field){.key = (k), .type = LP_LOG_T_MS, .i = (int64_t)(ns)})
#define LP_LOG_BOOL(k, v) ((lp_log_field){.key = (k), .type = LP_LOG_T_BOOL, .i = !!(v)})

/* Writes one line (if level passes) with the fields in order; fields with a
 * NULL key are skipped. */
void lp_log_write(lp_log_level level, const char *event, const lp_log_field *fields, size_t n);

/* lp_log(LP_LOG_INFO, "event", LP_LOG_STR("key", value), ...): the fields
 * are evaluated only when the level passes. */
#define lp_log(level, event, ...)                                                                  \
    do {                                                                                           \
        if (lp_log_enabled(level)) {                                                               \
            const lp_log_field lp_log_f_[] = {{0}, __VA_ARGS__};                                   \
            lp_log_write((level), (event), lp_log_f_, sizeof lp_log_f_ / sizeof lp_log_f_[0]);     \
        }                                                                                          \
    } while (0)

/* Appends s, JSON-escaped and capped at max input bytes (see above), to
 * out[*len..cap); returns 0, or -1 when it did not fit (out is then cut at
 * a character boundary). Exposed for the tests. */
int lp_log_escape(char *out, size_t cap, size_t *len, const char *s, size_t max);

#endif
