/* wire.c — strict JSON helpers and message codecs. See wire.h. */
#include "wire.h"

#include "error.h"

#include <ctype.h>
#include <math.h>
#include <sodium.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define LP_MAX_NEXT_COUNT 1000

int lp_fail(int code, char *msg, size_t msglen, const char *fmt, ...)
{
    if (msg != NULL && msglen > 0) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(msg, msglen, fmt, ap);
        va_end(ap);
    }
    return code;
}

void lp_json_shape(const char *buf, size_t len, int *max_depth, size_t *values)
{
    int depth = 0, max = 0, in_string = 0;
    size_t n = 1;
    for (size_t i = 0; i < len; i++) {
        char c = buf[i];
        if (in_string) {
            if (c == '\\')
                i++;
            else if (c == '"')
                in_string = 0;
        } else if (c == '"') {
            in_string = 1;
        } else if (c == '[' || c == '{') {
            n++;
            if (++depth > max)
                max = depth;
        } else if (c == ']' || c == '}') {
            depth--;
        } else if (c == ',' || c == ':') {
            n++;
        }
    }
    if (max_depth)
        *max_depth = max;
    if (values)
        *values = n;
}

int lp_json_depth(const char *buf, size_t len)
{
    int max = 0;
    lp_json_shape(buf, len, &max, NULL);
    return max;
}

int lp_json_parse(const char *buf, size_t len, int max_depth, json_t **out, char *msg,
                  size_t msglen)
{
    *out = NULL;
    if (lp_json_depth(buf, len) > max_depth)
        return lp_fail(LP_ETOO_DEEP, msg, msglen, "JSON nesting deeper than %d", max_depth);
    json_error_t jerr;
    json_t *root = json_loadb(buf, len, JSON_REJECT_DUPLICATES | JSON_DECODE_ANY, &jerr);
    if (root == NULL)
        return lp_fail(LP_EMALFORMED_JSON, msg, msglen, "line %d column %d: %s", jerr.line,
                       jerr.column, jerr.text);
    *out = root;
    return LP_OK;
}

int lp_json_only_fields(const json_t *obj, const char *const *allowed, char *msg, size_t msglen)
{
    const char *key;
    json_t *value;
    json_object_foreach((json_t *)obj, key, value)
    {
        (void)value;
        int known = 0;
        for (const char *const *a = allowed; *a != NULL && !known; a++)
            known = strcmp(*a, key) == 0;
        if (!known)
            return lp_fail(LP_EUNKNOWN_FIELD, msg, msglen, "unknown field \"%.64s\"", key);
    }
    return LP_OK;
}

static const json_t *field(const json_t *obj, const char *key)
{
    return json_is_object(obj) ? json_object_get(obj, key) : NULL;
}

int lp_campaign_name_valid(const char *name, size_t max_len)
{
    size_t n = name ? strlen(name) : 0;
    int ok = n > 0 && n <= max_len;
    for (size_t i = 0; i < n && ok; i++)
        ok = isalnum((unsigned char)name[i]) || name[i] == '-' || name[i] == '_' || name[i] == '.';
    return ok;
}

int lp_json_get_string(const json_t *obj, const char *key, size_t max_len, const char **out,
                       char *msg, size_t msglen)
{
    const json_t *v = field(obj, key);
    if (v == NULL)
        return lp_fail(LP_EMISSING_FIELD, msg, msglen, "missing field \"%s\"", key);
    if (!json_is_string(v))
        return lp_fail(LP_EWRONG_TYPE, msg, msglen, "field \"%s\" must be a string", key);
    if (json_string_length(v) > max_len)
        return lp_fail(LP_ETOO_LONG, msg, msglen, "field \"%s\" is longer than %zu bytes", key,
                       max_len);
    if (strlen(json_string_value(v)) != json_string_length(v))
        return lp_fail(LP_EWRONG_TYPE, msg, msglen, "field \"%s\" contains a NUL byte", key);
    *out = json_string_value(v);
    return LP_OK;
}

int lp_json_get_int(const json_t *obj, const char *key, int64_t min, int64_t max, int64_t *out,
                    char *msg, size_t msglen)
{
    const json_t *v = field(obj, key);
    if (v == NULL)
        return lp_fail(LP_EMISSING_FIELD, msg, msglen, "missing field \"%s\"", key);
    if (!json_is_integer(v))
        return lp_fail(LP_EWRONG_TYPE, msg, msglen, "field \"%s\" must be an integer", key);
    json_int_t i = json_integer_value(v);
    if (i < min || i > max)
        return lp_fail(LP_EWRONG_TYPE, msg, msglen, "field \"%s\" must be in [%lld, %lld]", key,
                       (long long)min, (long long)max);
    *out = (int64_t)i;
    return LP_OK;
}

void lp_b64_encode(const uint8_t *bin, size_t n, char out[LP_B64_MAX])
{
    sodium_bin2base64(out, LP_B64_MAX, bin, n, sodium_base64_VARIANT_URLSAFE_NO_PADDING);
}

int lp_b64_decode(const char *text, uint8_t *out, size_t n)
{
    size_t got = 0;
    const char *end = NULL;
    size_t len = strlen(text);
    if (len != sodium_base64_encoded_len(n, sodium_base64_VARIANT_URLSAFE_NO_PADDING) - 1)
        return LP_EWRONG_TYPE;
    if (sodium_base642bin(out, n, text, len, NULL, &got, &end,
                          sodium_base64_VARIANT_URLSAFE_NO_PADDING) != 0 ||
        got != n || end != text + len)
        return LP_EWRONG_TYPE;
    return LP_OK;
}

int lp_json_get_bytes(const json_t *obj, const char *key, uint8_t *out, size_t n, char *msg,
                      size_t msglen)
{
    const char *text;
    int rc = lp_json_get_string(obj, key, LP_B64_MAX, &text, msg, msglen);
    if (rc != LP_OK)
        return rc;
    if (lp_b64_decode(text, out, n) != LP_OK)
        return lp_fail(LP_EWRONG_TYPE, msg, msglen,
                       "field \"%s\" must be %zu bytes of unpadded base64url", key, n);
    return LP_OK;
}

int lp_json_get_epsilon(const json_t *obj, const char *key, double *out, char *msg, size_t msglen)
{
    const json_t *v = field(obj, key);
    if (v == NULL)
        return lp_fail(LP_EMISSING_FIELD, msg, msglen, "missing field \"%s\"", key);
    if (json_is_null(v)) {
        *out = INFINITY;
        return LP_OK;
    }
    if (!json_is_number(v))
        return lp_fail(LP_EBAD_EPSILON, msg, msglen, "field \"%s\" must be a number > 0 or null",
                       key);
    double eps = json_number_value(v);
    if (!isfinite(eps) || eps <= 0.0)
        return lp_fail(LP_EBAD_EPSILON, msg, msglen, "field \"%s\" must be finite and > 0 (got %g)",
                       key, eps);
    *out = eps;
    return LP_OK;
}

json_t *lp_json_epsilon(double eps)
{
    return isinf(eps) ? json_null() : json_real(eps);
}

static json_t *bytes_string(const uint8_t *bin, size_t n)
{
    char b64[LP_B64_MAX];
    lp_b64_encode(bin, n, b64);
    return json_string(b64);
}

json_t *lp_wire_label_encode(const lp_label_msg *m)
{
    return json_pack("{s:o, s:I, s:i, s:o, s:o, s:I, s:o}", "key",
                     bytes_string(m->key, LP_KEY_BYTES), "task_id", (json_int_t)m->task_id, "z",
                     m->z, "epsilon", lp_json_epsilon(m->epsilon), "nonce",
                     bytes_string(m->nonce, LP_NONCE_BYTES), "timestamp",
                     (json_int_t)m->timestamp_ms, "signature", bytes_string(m->sig, LP_SIG_BYTES));
}

static int require_object(const json_t *obj, char *msg, size_t msglen)
{
    if (!json_is_object(obj))
        return lp_fail(LP_EWRONG_TYPE, msg, msglen, "expected a JSON object");
    return LP_OK;
}

int lp_wire_label_decode(const json_t *obj, lp_label_msg *out, char *msg, size_t msglen)
{
    static const char *const fields[] = {"key",   "task_id",   "z",         "epsilon",
                                         "nonce", "timestamp", "signature", NULL};
    int64_t z;
    int rc;
    memset(out, 0, sizeof *out);
    if ((rc = require_object(obj, msg, msglen)) != LP_OK ||
        (rc = lp_json_only_fields(obj, fields, msg, msglen)) != LP_OK ||
        (rc = lp_json_get_bytes(obj, "key", out->key, LP_KEY_BYTES, msg, msglen)) != LP_OK ||
        (rc = lp_json_get_int(obj, "task_id", 1, INT64_MAX, &out->task_id, msg, msglen)) != LP_OK)
        return rc;
    const json_t *zv = json_object_get(obj, "z");
    if (zv == NULL)
        return lp_fail(LP_EMISSING_FIELD, msg, msglen, "missing field \"z\"");
    if (!json_is_integer(zv))
        return lp_fail(LP_EWRONG_TYPE, msg, msglen, "field \"z\" must be an integer 0 or 1");
    z = json_integer_value(zv);
    if (z != 0 && z != 1)
        return lp_fail(LP_EBAD_LABEL, msg, msglen, "field \"z\" must be 0 or 1");
    out->z = (int)z;
    if ((rc = lp_json_get_epsilon(obj, "epsilon", &out->epsilon, msg, msglen)) != LP_OK ||
        (rc = lp_json_get_bytes(obj, "nonce", out->nonce, LP_NONCE_BYTES, msg, msglen)) != LP_OK ||
        (rc = lp_json_get_int(obj, "timestamp", 0, INT64_MAX, &out->timestamp_ms, msg, msglen)) !=
            LP_OK ||
        (rc = lp_json_get_bytes(obj, "signature", out->sig, LP_SIG_BYTES, msg, msglen)) != LP_OK)
        return rc;
    return LP_OK;
}

/* ---- label fast path (see lp_wire_label_scan) ---- */

struct scan {
    const char *p, *end;
};

static void scan_ws(struct scan *s)
{
    while (s->p < s->end && (*s->p == ' ' || *s->p == '\t' || *s->p == '\n' || *s->p == '\r'))
        s->p++;
}

static int scan_char(struct scan *s, char c)
{
    scan_ws(s);
    if (s->p >= s->end || *s->p != c)
        return 0;
    s->p++;
    return 1;
}

/* 6-bit value of a base64url character, or -1. */
static int b64url_value(unsigned char c)
{
    if (c >= 'A' && c <= 'Z')
        return c - 'A';
    if (c >= 'a' && c <= 'z')
        return c - 'a' + 26;
    if (c >= '0' && c <= '9')
        return c - '0' + 52;
    return c == '-' ? 62 : c == '_' ? 63 : -1;
}

/* A string of exactly the unpadded base64url length of n bytes, decoded as
 * lp_b64_decode does: unused trailing bits must be zero. (These values are
 * public — keys, nonces, signatures — so a table-free, not constant-time
 * decoder is fine.) */
static int scan_b64(struct scan *s, uint8_t *out, size_t n)
{
    size_t chars = (n * 4 + 2) / 3;
    if (!scan_char(s, '"') || (size_t)(s->end - s->p) < chars + 1 || s->p[chars] != '"')
        return 0;
    uint32_t acc = 0;
    unsigned bits = 0;
    size_t o = 0;
    for (size_t i = 0; i < chars; i++) {
        int v = b64url_value((unsigned char)s->p[i]);
        if (v < 0)
            return 0;
        acc = (acc << 6) | (uint32_t)v;
        bits += 6;
        if (bits >= 8) {
            bits -= 8;
            out[o++] = (uint8_t)(acc >> bits);
        }
        acc &= (1u << bits) - 1;
    }
    if (o != n || acc != 0)
        return 0;
    s->p += chars + 1;
    return 1;
}

/* A JSON integer without sign, 1..18 digits, no leading zero: *out. */
static int scan_uint(struct scan *s, int64_t *out)
{
    scan_ws(s);
    const char *q = s->p;
    int64_t v = 0;
    while (q < s->end && *q >= '0' && *q <= '9' && q - s->p < 18) {
        v = v * 10 + (*q - '0');
        q++;
    }
    size_t digits = (size_t)(q - s->p);
    if (digits == 0 || (digits > 1 && *s->p == '0'))
        return 0;
    if (q < s->end && (*q == '.' || *q == 'e' || *q == 'E' || (*q >= '0' && *q <= '9')))
        return 0; /* a real, or too long: the full parser decides */
    s->p = q;
    *out = v;
    return 1;
}

/* epsilon: null, or a positive finite JSON number read as jansson reads it
 * (integers up to 15 digits exactly, reals by strtod). */
static int scan_epsilon(struct scan *s, double *out)
{
    scan_ws(s);
    if (s->end - s->p >= 4 && memcmp(s->p, "null", 4) == 0) {
        s->p += 4;
        *out = INFINITY;
        return 1;
    }
    const char *q = s->p, *int_start = q;
    while (q < s->end && *q >= '0' && *q <= '9')
        q++;
    size_t int_digits = (size_t)(q - int_start);
    if (int_digits == 0 || (int_digits > 1 && *int_start == '0'))
        return 0;
    int real = 0;
    if (q < s->end && *q == '.') {
        const char *f = ++q;
        while (q < s->end && *q >= '0' && *q <= '9')
            q++;
        if (q == f)
            return 0;
        real = 1;
    }
    if (q < s->end && (*q == 'e' || *q == 'E')) {
        q++;
        if (q < s->end && (*q == '+' || *q == '-'))
            q++;
        const char *e = q;
        while (q < s->end && *q >= '0' && *q <= '9')
            q++;
        if (q == e)
            return 0;
        real = 1;
    }
    size_t n = (size_t)(q - s->p);
    if (n >= 64 || (!real && int_digits > 15))
        return 0;
    char tmp[64];
    memcpy(tmp, s->p, n);
    tmp[n] = '\0';
    double v = real ? strtod(tmp, NULL) : (double)strtoll(tmp, NULL, 10);
    if (!isfinite(v) || v <= 0.0)
        return 0;
    s->p = q;
    *out = v;
    return 1;
}

static int scan_label(struct scan *s, lp_label_msg *out)
{
    static const char *const names[] = {"key",   "task_id",   "z",        "epsilon",
                                        "nonce", "timestamp", "signature"};
    unsigned seen = 0;
    memset(out, 0, sizeof *out);
    if (!scan_char(s, '{'))
        return 0;
    for (int i = 0; i < 7; i++) {
        if ((i > 0 && !scan_char(s, ',')) || !scan_char(s, '"'))
            return 0;
        int f = -1;
        for (int k = 0; k < 7 && f < 0; k++) {
            size_t l = strlen(names[k]);
            if ((size_t)(s->end - s->p) > l && memcmp(s->p, names[k], l) == 0 && s->p[l] == '"')
                f = k;
        }
        if (f < 0 || (seen & (1u << f)) != 0) /* unknown or duplicate */
            return 0;
        seen |= 1u << f;
        s->p += strlen(names[f]) + 1;
        if (!scan_char(s, ':'))
            return 0;
        int64_t v;
        int ok;
        switch (f) {
        case 0:
            ok = scan_b64(s, out->key, LP_KEY_BYTES);
            break;
        case 1:
            ok = scan_uint(s, &out->task_id) && out->task_id >= 1;
            break;
        case 2:
            ok = scan_uint(s, &v) && v <= 1;
            out->z = (int)v;
            break;
        case 3:
            ok = scan_epsilon(s, &out->epsilon);
            break;
        case 4:
            ok = scan_b64(s, out->nonce, LP_NONCE_BYTES);
            break;
        case 5:
            ok = scan_uint(s, &out->timestamp_ms);
            break;
        default:
            ok = scan_b64(s, out->sig, LP_SIG_BYTES);
            break;
        }
        if (!ok)
            return 0;
    }
    return scan_char(s, '}');
}

int lp_wire_label_scan(const char *buf, size_t len, lp_label_msg *out, const char **end)
{
    struct scan s = {buf, buf + len};
    if (!scan_label(&s, out))
        return 0;
    if (end != NULL)
        *end = s.p;
    scan_ws(&s);
    return s.p == s.end;
}

size_t lp_wire_batch_scan(const char *buf, size_t len, lp_label_msg *out, size_t max)
{
    struct scan s = {buf, buf + len};
    if (!scan_char(&s, '{') || !scan_char(&s, '"') || s.end - s.p < 7 ||
        memcmp(s.p, "labels\"", 7) != 0)
        return 0;
    s.p += 7;
    if (!scan_char(&s, ':') || !scan_char(&s, '['))
        return 0;
    size_t n = 0;
    do {
        if (n == max || !scan_label(&s, &out[n]))
            return 0;
        n++;
    } while (scan_char(&s, ','));
    if (!scan_char(&s, ']') || !scan_char(&s, '}'))
        return 0;
    scan_ws(&s);
    return s.p == s.end ? n : 0;
}

json_t *lp_wire_enroll_encode(const lp_enroll_msg *m)
{
    return json_pack("{s:o, s:s, s:o}", "key", bytes_string(m->key, LP_KEY_BYTES), "token",
                     m->token, "signature", bytes_string(m->sig, LP_SIG_BYTES));
}

int lp_wire_enroll_decode(const json_t *obj, lp_enroll_msg *out, char *msg, size_t msglen)
{
    static const char *const fields[] = {"key", "token", "signature", NULL};
    const char *token;
    int rc;
    memset(out, 0, sizeof *out);
    if ((rc = require_object(obj, msg, msglen)) != LP_OK ||
        (rc = lp_json_only_fields(obj, fields, msg, msglen)) != LP_OK ||
        (rc = lp_json_get_bytes(obj, "key", out->key, LP_KEY_BYTES, msg, msglen)) != LP_OK ||
        (rc = lp_json_get_string(obj, "token", LP_TOKEN_MAX, &token, msg, msglen)) != LP_OK ||
        (rc = lp_json_get_bytes(obj, "signature", out->sig, LP_SIG_BYTES, msg, msglen)) != LP_OK)
        return rc;
    memcpy(out->token, token, strlen(token) + 1);
    return LP_OK;
}

json_t *lp_wire_next_encode(const lp_next_msg *m)
{
    return json_pack("{s:o, s:I, s:I, s:o}", "key", bytes_string(m->key, LP_KEY_BYTES), "count",
                     (json_int_t)m->count, "timestamp", (json_int_t)m->timestamp_ms, "signature",
                     bytes_string(m->sig, LP_SIG_BYTES));
}

int lp_wire_next_decode(const json_t *obj, lp_next_msg *out, char *msg, size_t msglen)
{
    static const char *const fields[] = {"key", "count", "timestamp", "signature", NULL};
    int64_t count;
    int rc;
    memset(out, 0, sizeof *out);
    if ((rc = require_object(obj, msg, msglen)) != LP_OK ||
        (rc = lp_json_only_fields(obj, fields, msg, msglen)) != LP_OK ||
        (rc = lp_json_get_bytes(obj, "key", out->key, LP_KEY_BYTES, msg, msglen)) != LP_OK ||
        (rc = lp_json_get_int(obj, "count", 1, LP_MAX_NEXT_COUNT, &count, msg, msglen)) != LP_OK ||
        (rc = lp_json_get_int(obj, "timestamp", 0, INT64_MAX, &out->timestamp_ms, msg, msglen)) !=
            LP_OK ||
        (rc = lp_json_get_bytes(obj, "signature", out->sig, LP_SIG_BYTES, msg, msglen)) != LP_OK)
        return rc;
    out->count = (uint32_t)count;
    return LP_OK;
}

json_t *lp_wire_skip_encode(const lp_skip_msg *m)
{
    return json_pack("{s:o, s:I, s:I, s:o}", "key", bytes_string(m->key, LP_KEY_BYTES), "task_id",
                     (json_int_t)m->task_id, "timestamp", (json_int_t)m->timestamp_ms, "signature",
                     bytes_string(m->sig, LP_SIG_BYTES));
}

int lp_wire_skip_decode(const json_t *obj, lp_skip_msg *out, char *msg, size_t msglen)
{
    static const char *const fields[] = {"key", "task_id", "timestamp", "signature", NULL};
    int rc;
    memset(out, 0, sizeof *out);
    if ((rc = require_object(obj, msg, msglen)) != LP_OK ||
        (rc = lp_json_only_fields(obj, fields, msg, msglen)) != LP_OK ||
        (rc = lp_json_get_bytes(obj, "key", out->key, LP_KEY_BYTES, msg, msglen)) != LP_OK ||
        (rc = lp_json_get_int(obj, "task_id", 1, INT64_MAX, &out->task_id, msg, msglen)) != LP_OK ||
        (rc = lp_json_get_int(obj, "timestamp", 0, INT64_MAX, &out->timestamp_ms, msg, msglen)) !=
            LP_OK ||
        (rc = lp_json_get_bytes(obj, "signature", out->sig, LP_SIG_BYTES, msg, msglen)) != LP_OK)
        return rc;
    return LP_OK;
}

json_t *lp_wire_progress_encode(const lp_progress_msg *m)
{
    return json_pack("{s:o, s:I, s:o}", "key", bytes_string(m->key, LP_KEY_BYTES), "timestamp",
                     (json_int_t)m->timestamp_ms, "signature", bytes_string(m->sig, LP_SIG_BYTES));
}

int lp_wire_progress_decode(const json_t *obj, lp_progress_msg *out, char *msg, size_t msglen)
{
    static const char *const fields[] = {"key", "timestamp", "signature", NULL};
    int rc;
    memset(out, 0, sizeof *out);
    if ((rc = require_object(obj, msg, msglen)) != LP_OK ||
        (rc = lp_json_only_fields(obj, fields, msg, msglen)) != LP_OK ||
        (rc = lp_json_get_bytes(obj, "key", out->key, LP_KEY_BYTES, msg, msglen)) != LP_OK ||
        (rc = lp_json_get_int(obj, "timestamp", 0, INT64_MAX, &out->timestamp_ms, msg, msglen)) !=
            LP_OK ||
        (rc = lp_json_get_bytes(obj, "signature", out->sig, LP_SIG_BYTES, msg, msglen)) != LP_OK)
        return rc;
    return LP_OK;
}
