/*
 * test_log.c — the log module (common/log.h): hostile strings escaped into
 * valid JSON (quotes, backslashes, every control character, invalid and
 * overlong UTF-8, surrogates, long values capped), the text format's bare
 * and quoted values, level filtering (a filtered line evaluates no field),
 * names parsed both ways, over-long lines cut to valid JSON, and threads
 * writing to one pipe at once never interleaving lines.
 */
#include "check.h"
#include "log.h"

#include <jansson.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* Runs fn with the log pointed at a pipe; returns what it wrote (free()). */
static char *capture(void (*fn)(void *), void *ctx)
{
    int fds[2];
    if (pipe(fds) != 0)
        return NULL;
    lp_log_set_fd(fds[1]);
    fn(ctx);
    lp_log_set_fd(2);
    close(fds[1]);
    size_t cap = 1 << 16, len = 0;
    char *out = malloc(cap);
    for (;;) {
        if (len + 4096 > cap)
            out = realloc(out, cap *= 2);
        ssize_t n = read(fds[0], out + len, cap - len - 1);
        if (n <= 0)
            break;
        len += (size_t)n;
    }
    close(fds[0]);
    out[len] = '\0';
    return out;
}

static const char HOSTILE[] = "a\"b\\c\n\r\t\x01\x1f\x7f"
                              "\xff\xfe"         /* never UTF-8 */
                              "\xc0\xaf"         /* overlong '/' */
                              "\xed\xa0\x80"     /* a surrogate */
                              "\xf4\x90\x80\x80" /* above U+10FFFF */
                              "\xe2\x82"         /* truncated sequence */
                              " \xc3\xa9\xe2\x82\xac\xf0\x9f\x98\x80 end";

static void write_hostile(void *ctx)
{
    (void)ctx;
    lp_log(LP_LOG_INFO, "hostile", LP_LOG_STR("value", HOSTILE), LP_LOG_INT("n", -42),
           LP_LOG_NUM("x", 0.5), LP_LOG_BOOL("ok", 1), LP_LOG_STR("none", NULL),
           LP_LOG_NUM("inf", 1.0 / 0.0));
}

static void test_json_escapes_hostile_strings(void)
{
    lp_log_configure(LP_LOG_INFO, LP_LOG_JSON);
    char *out = capture(write_hostile, NULL);
    CHECK(out != NULL && strchr(out, '\n') == out + strlen(out) - 1); /* one line */
    json_error_t e;
    json_t *j = json_loads(out, 0, &e); /* jansson rejects invalid UTF-8 */
    CHECK(j != NULL);
    CHECK_STR(json_string_value(json_object_get(j, "event")), "hostile");
    CHECK_STR(json_string_value(json_object_get(j, "level")), "info");
    const char *t = json_string_value(json_object_get(j, "time"));
    CHECK(t != NULL && strlen(t) == 24 && t[10] == 'T' && t[19] == '.' && t[23] == 'Z');
    /* what survives: ASCII and controls exactly; each invalid byte -> U+FFFD;
     * valid multibyte characters unchanged */
    const char *want = "a\"b\\c\n\r\t\x01\x1f\x7f"
                       "\xef\xbf\xbd\xef\xbf\xbd"
                       "\xef\xbf\xbd\xef\xbf\xbd"
                       "\xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbd"
                       "\xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbd"
                       "\xef\xbf\xbd\xef\xbf\xbd"
                       " \xc3\xa9\xe2\x82\xac\xf0\x9f\x98\x80 end";
    CHECK_STR(json_string_value(json_object_get(j, "value")), want);
    CHECK_INT(json_integer_value(json_object_get(j, "n")), -42);
    CHECK(json_real_value(json_object_get(j, "x")) == 0.5);
    CHECK(json_is_true(json_object_get(j, "ok")));
    CHECK(json_is_null(json_object_get(j, "none")));
    CHECK(json_is_null(json_object_get(j, "inf")));
    /* no raw control byte reaches the output */
    for (const char *p = out; *p && p[1]; p++)
        CHECK((unsigned char)*p >= 0x20 && *p != 0x7f);
    json_decref(j);
    free(out);
}

static void write_text(void *ctx)
{
    (void)ctx;
    lp_log(LP_LOG_WARN, "request", LP_LOG_STR("method", "POST"), LP_LOG_STR("route", "/v1/labels"),
           LP_LOG_STR("msg", "two words"), LP_LOG_STR("empty", ""), LP_LOG_STR("eq", "a=b"),
           LP_LOG_STR("nl", "x\ny"), LP_LOG_INT("status", 200));
}

static void test_text_format(void)
{
    lp_log_configure(LP_LOG_DEBUG, LP_LOG_TEXT);
    char *out = capture(write_text, NULL);
    CHECK(out != NULL);
    /* time, level padded to 5, event padded to 18, then key=value */
    CHECK(strlen(out) > 24 && out[23] == 'Z' && out[24] == ' ');
    CHECK(strncmp(out + 25, "warn  request            method=POST", 36) == 0);
    CHECK(strstr(out, " route=/v1/labels ") != NULL);
    CHECK(strstr(out, " msg=\"two words\" ") != NULL);
    CHECK(strstr(out, " empty=\"\" ") != NULL);
    CHECK(strstr(out, " eq=\"a=b\" ") != NULL);
    CHECK(strstr(out, " nl=\"x\\ny\" ") != NULL);
    CHECK(strstr(out, " status=200\n") != NULL);
    CHECK(strchr(out, '\n') == out + strlen(out) - 1);
    free(out);
}

static int evaluated;
static const char *counted(const char *s)
{
    evaluated++;
    return s;
}

static void write_levels(void *ctx)
{
    (void)ctx;
    lp_log(LP_LOG_DEBUG, "d", LP_LOG_STR("k", counted("1")));
    lp_log(LP_LOG_INFO, "i", LP_LOG_STR("k", counted("2")));
    lp_log(LP_LOG_WARN, "w", LP_LOG_STR("k", counted("3")));
    lp_log(LP_LOG_ERROR, "e", LP_LOG_STR("k", counted("4")));
}

static void test_levels(void)
{
    lp_log_configure(LP_LOG_WARN, LP_LOG_JSON);
    evaluated = 0;
    char *out = capture(write_levels, NULL);
    CHECK(out != NULL && strstr(out, "\"event\":\"d\"") == NULL &&
          strstr(out, "\"event\":\"i\"") == NULL);
    CHECK(out != NULL && strstr(out, "\"event\":\"w\"") && strstr(out, "\"event\":\"e\""));
    CHECK(out != NULL && strstr(out, "\"level\":\"warn\"") && strstr(out, "\"level\":\"error\""));
    CHECK_INT(evaluated, 2); /* filtered lines evaluate nothing */
    CHECK(!lp_log_enabled(LP_LOG_INFO) && lp_log_enabled(LP_LOG_ERROR));
    free(out);

    lp_log_level lv;
    lp_log_format fm;
    const char *names[] = {"debug", "info", "warn", "error"};
    for (int k = 0; k < 4; k++) {
        CHECK(lp_log_level_parse(names[k], &lv) == 0 && (int)lv == k);
        CHECK_STR(lp_log_level_name(lv), names[k]);
    }
    CHECK(lp_log_level_parse("warning", &lv) == -1 && lp_log_level_parse("", &lv) == -1);
    CHECK(lp_log_level_parse(NULL, &lv) == -1);
    CHECK(lp_log_format_parse("json", &fm) == 0 && fm == LP_LOG_JSON);
    CHECK(lp_log_format_parse("text", &fm) == 0 && fm == LP_LOG_TEXT);
    CHECK(lp_log_format_parse("JSON", &fm) == -1);
}

static char long_value[LP_LOG_VALUE_MAX * 3];

static void write_long(void *ctx)
{
    (void)ctx;
    /* one value past its cap; then enough fields to pass the line cap */
    lp_log(LP_LOG_INFO, "long", LP_LOG_STR("v", long_value));
    lp_log(LP_LOG_INFO, "huge", LP_LOG_STR("a", long_value), LP_LOG_STR("b", long_value),
           LP_LOG_STR("c", long_value), LP_LOG_STR("d", long_value), LP_LOG_STR("e", long_value),
           LP_LOG_STR("f", long_value), LP_LOG_STR("g", long_value), LP_LOG_STR("h", long_value),
           LP_LOG_STR("i", long_value), LP_LOG_INT("last", 7));
}

static void test_caps(void)
{
    /* quotes expand to two bytes each when escaped, é is two bytes: the
     * cap counts input bytes and never splits a character */
    for (size_t i = 0; i + 2 < sizeof long_value; i += 3)
        memcpy(long_value + i, "\"\xc3\xa9", 3);
    long_value[sizeof long_value - 1] = '\0';
    lp_log_configure(LP_LOG_INFO, LP_LOG_JSON);
    char *out = capture(write_long, NULL);
    CHECK(out != NULL);
    char *second = out ? strchr(out, '\n') : NULL;
    CHECK(second != NULL);
    if (second == NULL) {
        free(out);
        return;
    }
    *second++ = '\0';
    json_t *j = json_loads(out, 0, NULL);
    const char *v = json_string_value(json_object_get(j, "v"));
    CHECK(v != NULL && strlen(v) <= LP_LOG_VALUE_MAX + 3);
    CHECK(v != NULL && strlen(v) > 3 && strcmp(v + strlen(v) - 3, "...") == 0);
    json_decref(j);
    CHECK(strlen(second) <= LP_LOG_LINE_MAX);
    CHECK(second[strlen(second) - 1] == '\n');
    j = json_loads(second, 0, NULL); /* cut, yet valid JSON */
    CHECK(j != NULL);
    CHECK_STR(json_string_value(json_object_get(j, "event")), "huge");
    CHECK(json_object_get(j, "last") == NULL); /* dropped, not half written */
    json_decref(j);
    free(out);

    /* the escaper alone: a full buffer cuts at a character boundary */
    char small[8];
    size_t len = 0;
    CHECK(lp_log_escape(small, sizeof small, &len, "\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9", 64) == -1);
    CHECK_INT(len, 6);
    len = 0;
    CHECK(lp_log_escape(small, sizeof small, &len, "\n\n\n\n", 64) == -1);
    CHECK_INT(len, 6);
}

#define THREADS 4
#define LINES 2000

static void *writer(void *arg)
{
    long id = (long)arg;
    char big[300];
    memset(big, 'a' + (int)id, sizeof big - 1);
    big[sizeof big - 1] = '\0';
    for (int i = 0; i < LINES; i++)
        lp_log(LP_LOG_INFO, "concurrent", LP_LOG_INT("thread", id), LP_LOG_INT("i", i),
               LP_LOG_STR("pad", big));
    return NULL;
}

static void write_concurrent(void *ctx)
{
    (void)ctx;
    pthread_t t[THREADS];
    for (long k = 0; k < THREADS; k++)
        pthread_create(&t[k], NULL, writer, (void *)k);
    for (int k = 0; k < THREADS; k++)
        pthread_join(t[k], NULL);
}

/* The pipe's reader must keep up, or writers block: read in a thread. */
struct drain {
    int fd;
    char *out;
    size_t len;
};

static void *drain_main(void *arg)
{
    struct drain *d = arg;
    size_t cap = 1 << 20;
    d->out = malloc(cap);
    for (;;) {
        if (d->len + 65536 > cap)
            d->out = realloc(d->out, cap *= 2);
        ssize_t n = read(d->fd, d->out + d->len, cap - d->len - 1);
        if (n <= 0)
            break;
        d->len += (size_t)n;
    }
    d->out[d->len] = '\0';
    return NULL;
}

static void test_concurrent_lines_never_interleave(void)
{
    lp_log_configure(LP_LOG_INFO, LP_LOG_JSON);
    int fds[2];
    CHECK(pipe(fds) == 0);
    struct drain d = {.fd = fds[0]};
    pthread_t reader;
    pthread_create(&reader, NULL, drain_main, &d);
    lp_log_set_fd(fds[1]);
    write_concurrent(NULL);
    lp_log_set_fd(2);
    close(fds[1]);
    pthread_join(reader, NULL);
    close(fds[0]);
    int per_thread[THREADS] = {0}, bad = 0, lines = 0;
    int next_i[THREADS] = {0};
    for (char *save = NULL, *ln = strtok_r(d.out, "\n", &save); ln;
         ln = strtok_r(NULL, "\n", &save)) {
        lines++;
        json_t *j = json_loads(ln, 0, NULL);
        long id = j ? (long)json_integer_value(json_object_get(j, "thread")) : -1;
        const char *pad = json_string_value(json_object_get(j, "pad"));
        int i = (int)json_integer_value(json_object_get(j, "i"));
        if (j == NULL || id < 0 || id >= THREADS || pad == NULL || strlen(pad) != 299 ||
            pad[0] != 'a' + id || pad[298] != 'a' + id || i != next_i[id])
            bad++;
        else {
            per_thread[id]++;
            next_i[id]++;
        }
        json_decref(j);
    }
    CHECK_INT(lines, THREADS * LINES);
    CHECK_INT(bad, 0);
    for (int k = 0; k < THREADS; k++)
        CHECK_INT(per_thread[k], LINES);
    free(d.out);
}

int main(void)
{
    test_json_escapes_hostile_strings();
    test_text_format();
    test_levels();
    test_caps();
    test_concurrent_lines_never_interleave();
    lp_log_configure(LP_LOG_INFO, LP_LOG_TEXT);
    return check_summary();
}
