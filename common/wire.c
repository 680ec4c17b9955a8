/* wire.c — strict JSON helpers and message codecs. See wire.h. */
#include "wire.h"

#include "error.h"

#include <math.h>
#include <sodium.h>
#include <stdarg.h>
#include <stdio.h>
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

int lp_json_depth(const char *buf, size_t len)
{
    int depth = 0, max = 0, in_string = 0;
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
            if (++depth > max)
                max = depth;
        } else if (c == ']' || c == '}') {
            depth--;
        }
    }
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
    json_object_foreach((json_t *)obj, key, value) {
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

int lp_json_get_epsilon(const json_t *obj, const char *key, double *out, char *msg,
                        size_t msglen)
{
    const json_t *v = field(obj, key);
    if (v == NULL)
        return lp_fail(LP_EMISSING_FIELD, msg, msglen, "missing field \"%s\"", key);
    if (json_is_null(v)) {
        *out = INFINITY;
        return LP_OK;
    }
    if (!json_is_number(v))
        return lp_fail(LP_EBAD_EPSILON, msg, msglen,
                       "field \"%s\" must be a number > 0 or null", key);
    double eps = json_number_value(v);
    if (!isfinite(eps) || eps <= 0.0)
        return lp_fail(LP_EBAD_EPSILON, msg, msglen,
                       "field \"%s\" must be finite and > 0 (got %g)", key, eps);
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
                     (json_int_t)m->timestamp_ms, "signature",
                     bytes_string(m->sig, LP_SIG_BYTES));
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
        (rc = lp_json_get_int(obj, "task_id", 1, INT64_MAX, &out->task_id, msg, msglen)) !=
            LP_OK)
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
        (rc = lp_json_get_bytes(obj, "nonce", out->nonce, LP_NONCE_BYTES, msg, msglen)) !=
            LP_OK ||
        (rc = lp_json_get_int(obj, "timestamp", 0, INT64_MAX, &out->timestamp_ms, msg,
                              msglen)) != LP_OK ||
        (rc = lp_json_get_bytes(obj, "signature", out->sig, LP_SIG_BYTES, msg, msglen)) !=
            LP_OK)
        return rc;
    return LP_OK;
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
        (rc = lp_json_get_bytes(obj, "signature", out->sig, LP_SIG_BYTES, msg, msglen)) !=
            LP_OK)
        return rc;
    memcpy(out->token, token, strlen(token) + 1);
    return LP_OK;
}

json_t *lp_wire_next_encode(const lp_next_msg *m)
{
    return json_pack("{s:o, s:I, s:I, s:o}", "key", bytes_string(m->key, LP_KEY_BYTES),
                     "count", (json_int_t)m->count, "timestamp", (json_int_t)m->timestamp_ms,
                     "signature", bytes_string(m->sig, LP_SIG_BYTES));
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
        (rc = lp_json_get_int(obj, "count", 1, LP_MAX_NEXT_COUNT, &count, msg, msglen)) !=
            LP_OK ||
        (rc = lp_json_get_int(obj, "timestamp", 0, INT64_MAX, &out->timestamp_ms, msg,
                              msglen)) != LP_OK ||
        (rc = lp_json_get_bytes(obj, "signature", out->sig, LP_SIG_BYTES, msg, msglen)) !=
            LP_OK)
        return rc;
    out->count = (uint32_t)count;
    return LP_OK;
}
