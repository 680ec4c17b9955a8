/* log.c — one line per event, text or JSON, one write(2) per line. See log.h. */
#include "log.h"

#include <errno.h>
#include <math.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static _Atomic int log_level = LP_LOG_INFO;
static _Atomic int log_format = LP_LOG_TEXT;
static _Atomic int log_fd = 2;

const char *const lp_log_level_names[] = {"debug", "info", "warn", "error", NULL};
const char *const lp_log_format_names[] = {"text", "json", NULL};

void lp_log_configure(lp_log_level level, lp_log_format format)
{
    atomic_store(&log_level, (int)level);
    atomic_store(&log_format, (int)format);
}

void lp_log_set_fd(int fd)
{
    atomic_store(&log_fd, fd);
}

int lp_log_enabled(lp_log_level level)
{
    return (int)level >= atomic_load_explicit(&log_level, memory_order_relaxed);
}

/* The index of name in names[0..n) into *out: 0, or -1 when absent. */
static int parse_name(const char *const *names, int n, const char *name, int *out)
{
    for (int k = 0; name != NULL && k < n; k++)
        if (strcmp(name, names[k]) == 0) {
            *out = k;
            return 0;
        }
    return -1;
}

const char *lp_log_level_name(lp_log_level level)
{
    return (unsigned)level < 4 ? lp_log_level_names[level] : "?";
}

int lp_log_level_parse(const char *name, lp_log_level *out)
{
    int k = 0, rc = parse_name(lp_log_level_names, 4, name, &k);
    *out = rc == 0 ? (lp_log_level)k : *out;
    return rc;
}

const char *lp_log_format_name(lp_log_format format)
{
    return (unsigned)format < 2 ? lp_log_format_names[format] : "?";
}

int lp_log_format_parse(const char *name, lp_log_format *out)
{
    int k = 0, rc = parse_name(lp_log_format_names, 2, name, &k);
    *out = rc == 0 ? (lp_log_format)k : *out;
    return rc;
}

/* ---- escaping ---- */

/* Length of the valid UTF-8 sequence at s (n bytes left), 0 if invalid
 * (overlong forms, surrogates and code points above U+10FFFF are invalid). */
static size_t utf8_len(const unsigned char *s, size_t n)
{
    unsigned char c = s[0];
    size_t len;
    unsigned char lo = 0x80, hi = 0xBF; /* bounds of the second byte */
    if (c >= 0xC2 && c <= 0xDF)
        len = 2;
    else if (c >= 0xE0 && c <= 0xEF) {
        len = 3;
        if (c == 0xE0)
            lo = 0xA0;
        else if (c == 0xED)
            hi = 0x9F;
    } else if (c >= 0xF0 && c <= 0xF4) {
        len = 4;
        if (c == 0xF0)
            lo = 0x90;
        else if (c == 0xF4)
            hi = 0x8F;
    } else
        return 0;
    if (n < len || s[1] < lo || s[1] > hi)
        return 0;
    for (size_t k = 2; k < len; k++)
        if (s[k] < 0x80 || s[k] > 0xBF)
            return 0;
    return len;
}

int lp_log_escape(char *out, size_t cap, size_t *len, const char *s, size_t max)
{
    static const char HEX[] = "0123456789abcdef";
    const unsigned char *p = (const unsigned char *)s;
    size_t n = strlen(s), i = 0, o = *len;
    int cut = 0;
    while (i < n) {
        char esc[8];
        const char *piece = esc;
        size_t plen, in;
        unsigned char c = p[i];
        if (c >= 0x80) {
            in = utf8_len(p + i, n - i);
            if (in == 0) {
                piece = "\xEF\xBF\xBD"; /* U+FFFD for a byte that is not UTF-8 */
                plen = 3;
                in = 1;
            } else {
                piece = (const char *)p + i;
                plen = in;
            }
        } else {
            in = 1;
            plen = 2;
            esc[0] = '\\';
            if (c == '"' || c == '\\')
                esc[1] = (char)c;
            else if (c == '\n')
                esc[1] = 'n';
            else if (c == '\r')
                esc[1] = 'r';
            else if (c == '\t')
                esc[1] = 't';
            else if (c < 0x20 || c == 0x7f) {
                memcpy(esc, "\\u00", 4);
                esc[4] = HEX[c >> 4];
                esc[5] = HEX[c & 15];
                plen = 6;
            } else {
                esc[0] = (char)c;
                plen = 1;
            }
        }
        if (i + in > max) {
            cut = 1;
            break;
        }
        if (o + plen >= cap) {
            *len = o;
            return -1;
        }
        memcpy(out + o, piece, plen);
        o += plen;
        i += in;
    }
    if (cut) {
        if (o + 3 >= cap) {
            *len = o;
            return -1;
        }
        memcpy(out + o, "...", 3);
        o += 3;
    }
    *len = o;
    return 0;
}

/* ---- lines ---- */

/* The line under construction. Fields stop at SOFT_MAX; the closing bytes
 * always fit in the rest. */
#define SOFT_MAX (LP_LOG_LINE_MAX - 8)
#define EVENT_WIDTH 18 /* text: the event column (most names fit) */

typedef struct line {
    char b[LP_LOG_LINE_MAX];
    size_t len;
    int full;
} line;

static void put(line *l, const char *s, size_t n)
{
    if (l->full || l->len + n >= SOFT_MAX) {
        l->full = 1;
        return;
    }
    memcpy(l->b + l->len, s, n);
    l->len += n;
}

static void puts_(line *l, const char *s)
{
    put(l, s, strlen(s));
}

static void put_escaped(line *l, const char *s)
{
    if (!l->full && lp_log_escape(l->b, SOFT_MAX, &l->len, s, LP_LOG_VALUE_MAX) != 0)
        l->full = 1;
}

/* Bare in text when nonempty printable ASCII without ' ', '"', '=', '\'. */
static int text_bare(const char *s)
{
    if (*s == '\0')
        return 0;
    for (const unsigned char *p = (const unsigned char *)s; *p; p++)
        if (*p <= 0x20 || *p >= 0x7f || *p == '"' || *p == '=' || *p == '\\')
            return 0;
    return 1;
}

/* "2026-11-24T11:42:20.123Z"; the seconds part is formatted once per second
 * per thread. */
static void put_time(line *l)
{
    static _Thread_local time_t cached_sec = (time_t)-1;
    static _Thread_local char cached[24];
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    if (ts.tv_sec != cached_sec) {
        struct tm tm;
        gmtime_r(&ts.tv_sec, &tm);
        strftime(cached, sizeof cached, "%Y-%m-%dT%H:%M:%S", &tm);
        cached_sec = ts.tv_sec;
    }
    int ms = (int)(ts.tv_nsec / 1000000);
    char frac[5] = {'.', (char)('0' + ms / 100), (char)('0' + ms / 10 % 10), (char)('0' + ms % 10),
                    'Z'};
    puts_(l, cached);
    put(l, frac, sizeof frac);
}

/* Decimal digits of v into out (at least 21 bytes); returns the length. */
static size_t format_int(char *out, int64_t v)
{
    char tmp[24];
    size_t n = 0, len = 0;
    uint64_t u = v < 0 ? (uint64_t)0 - (uint64_t)v : (uint64_t)v;
    do {
        tmp[n++] = (char)('0' + u % 10);
        u /= 10;
    } while (u != 0);
    if (v < 0)
        out[len++] = '-';
    while (n > 0)
        out[len++] = tmp[--n];
    return len;
}

/* Appends f's value. Returns -1 when nothing usable fit (the caller drops
 * the field); a string that did not fit whole is cut and still closed. */
static int put_value(line *l, const lp_log_field *f, int json)
{
    char num[40];
    int n;
    switch (f->type) {
    case LP_LOG_T_STR:
        if (f->s == NULL) {
            puts_(l, json ? "null" : "-");
        } else if (!json && text_bare(f->s) && strlen(f->s) <= LP_LOG_VALUE_MAX) {
            puts_(l, f->s);
        } else {
            put(l, "\"", 1);
            if (l->full)
                return -1;
            put_escaped(l, f->s);
            l->b[l->len++] = '"'; /* fits: SOFT_MAX leaves room */
            return 0;
        }
        break;
    case LP_LOG_T_INT:
        put(l, num, format_int(num, f->i));
        break;
    case LP_LOG_T_MS: { /* nanoseconds as milliseconds with 3 decimals */
        int64_t us = (f->i >= 0 ? f->i + 500 : f->i - 500) / 1000;
        int64_t whole = us / 1000, frac = us % 1000;
        size_t k = 0;
        if (us < 0 && whole == 0)
            num[k++] = '-';
        k += format_int(num + k, whole);
        frac = frac < 0 ? -frac : frac;
        num[k++] = '.';
        num[k++] = (char)('0' + frac / 100);
        num[k++] = (char)('0' + frac / 10 % 10);
        num[k++] = (char)('0' + frac % 10);
        put(l, num, k);
        break;
    }
    case LP_LOG_T_NUM:
        if (!isfinite(f->d)) {
            puts_(l, json ? "null" : "nan");
            break;
        }
        n = snprintf(num, sizeof num, "%.6g", f->d);
        put(l, num, (size_t)n);
        break;
    case LP_LOG_T_BOOL:
        puts_(l, f->i ? "true" : "false");
        break;
    default:
        puts_(l, json ? "null" : "-");
    }
    return l->full ? -1 : 0;
}

static void write_line(const char *b, size_t len)
{
    int fd = atomic_load_explicit(&log_fd, memory_order_relaxed);
    size_t off = 0;
    while (off < len) {
        ssize_t w = write(fd, b + off, len - off);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0)
            return; /* nowhere to log: drop the line */
        off += (size_t)w;
    }
}

void lp_log_write(lp_log_level level, const char *event, const lp_log_field *fields, size_t n)
{
    if (!lp_log_enabled(level))
        return;
    int json = atomic_load_explicit(&log_format, memory_order_relaxed) == LP_LOG_JSON;
    line l;
    l.len = 0;
    l.full = 0;
    if (json) {
        puts_(&l, "{\"time\":\"");
        put_time(&l);
        puts_(&l, "\",\"level\":\"");
        puts_(&l, lp_log_level_name(level));
        puts_(&l, "\",\"event\":\"");
        put_escaped(&l, event);
        put(&l, "\"", 1);
    } else { /* time, level padded to 5, event padded to EVENT_WIDTH */
        static const char PAD[EVENT_WIDTH + 1] = "                  ";
        put_time(&l);
        const char *name = lp_log_level_name(level);
        size_t nl = strlen(name), ne = strlen(event);
        put(&l, " ", 1);
        put(&l, name, nl);
        put(&l, PAD, 6 - nl);
        put(&l, event, ne);
        if (ne < EVENT_WIDTH)
            put(&l, PAD, EVENT_WIDTH - ne);
    }
    for (size_t k = 0; k < n && !l.full; k++) {
        const lp_log_field *f = &fields[k];
        if (f->key == NULL)
            continue;
        size_t mark = l.len;
        if (json) {
            puts_(&l, ",\"");
            puts_(&l, f->key);
            puts_(&l, "\":");
        } else {
            put(&l, " ", 1);
            puts_(&l, f->key);
            put(&l, "=", 1);
        }
        if (l.full || put_value(&l, f, json) != 0) {
            l.len = mark; /* never half a key or a number */
            l.full = 1;
        }
    }
    if (json)
        l.b[l.len++] = '}';
    l.b[l.len++] = '\n';
    write_line(l.b, l.len);
}
