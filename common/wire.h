/*
 * wire.h — JSON wire helpers shared by client and server.
 *
 * Parsing is capped (depth, and the callers cap sizes before calling) and
 * strict: duplicate keys, unknown fields, wrong types and out-of-range values
 * are distinct errors from error.h, each with a message naming the field.
 * Binary fields (keys, nonces, signatures) travel as unpadded base64url.
 *
 * Ownership: functions returning json_t* return a new reference the caller
 * releases with json_decref(). Messages are written into caller buffers
 * (msg, msglen); msg may be NULL.
 */
#ifndef LP_WIRE_H
#define LP_WIRE_H

#include "canon.h"

#include <jansson.h>
#include <stddef.h>
#include <stdint.h>

#define LP_JSON_DEPTH_MAX 32 /* default nesting limit */
#define LP_MSG_MAX 256       /* room for any error message */
#define LP_B64_MAX 128       /* room for any base64url field we carry */

/*
 * Parses buf[0..len) as one JSON value with nesting at most max_depth.
 * On success *out holds a new reference. Returns LP_OK, LP_ETOO_DEEP or
 * LP_EMALFORMED_JSON (msg says where).
 */
int lp_json_parse(const char *buf, size_t len, int max_depth, json_t **out, char *msg,
                  size_t msglen);

/* Nesting depth of the JSON text (strings skipped); -1 if brackets never
 * balance in a way a parser would accept is not checked here. */
int lp_json_depth(const char *buf, size_t len);

/* The same scan, also bounding the JSON values the text can make: every
 * value but the first follows a ',' or a ':' outside strings, and every
 * container opens with a bracket, so there are at most 1 + their count.
 * Linear, without allocating: run before a parser to bound its memory.
 * Either pointer may be NULL. */
void lp_json_shape(const char *buf, size_t len, int *max_depth, size_t *values);

/* LP_EUNKNOWN_FIELD if obj has a key not in the NULL-terminated list. */
int lp_json_only_fields(const json_t *obj, const char *const *allowed, char *msg, size_t msglen);

/* Typed field getters. Each returns LP_OK, LP_EMISSING_FIELD (when the key
 * is absent), LP_EWRONG_TYPE, or LP_ETOO_LONG, with a message naming key.
 * Strings are borrowed from obj (valid while obj lives). */
int lp_json_get_string(const json_t *obj, const char *key, size_t max_len, const char **out,
                       char *msg, size_t msglen);
int lp_json_get_int(const json_t *obj, const char *key, int64_t min, int64_t max, int64_t *out,
                    char *msg, size_t msglen);
/* Whether name is a campaign name: 1..max_len characters of [A-Za-z0-9._-].
 * The server accepts no other; the client refuses others in answers, so a
 * hostile server cannot put control sequences on an annotator's terminal. */
int lp_campaign_name_valid(const char *name, size_t max_len);
/* Decodes base64url into exactly n bytes. */
int lp_json_get_bytes(const json_t *obj, const char *key, uint8_t *out, size_t n, char *msg,
                      size_t msglen);
/* Epsilon: a JSON number > 0 and finite, or null for +inf. Anything else is
 * LP_EBAD_EPSILON. Whether +inf is acceptable is the caller's policy. */
int lp_json_get_epsilon(const json_t *obj, const char *key, double *out, char *msg, size_t msglen);

/* Unpadded base64url of n bytes into out (size LP_B64_MAX). */
void lp_b64_encode(const uint8_t *bin, size_t n, char out[LP_B64_MAX]);
/* Decodes exactly n bytes; LP_EWRONG_TYPE if the text is not that. */
int lp_b64_decode(const char *text, uint8_t *out, size_t n);

/* Epsilon as JSON: a real, or null for +inf. New reference. */
json_t *lp_json_epsilon(double eps);

/* Label messages <-> JSON objects:
 *   {"key","task_id","z","epsilon","nonce","timestamp","signature"}
 * decode is strict (no other fields) and validates types and ranges but not
 * the signature. */
json_t *lp_wire_label_encode(const lp_label_msg *msg);
int lp_wire_label_decode(const json_t *obj, lp_label_msg *out, char *msg, size_t msglen);

/*
 * Fast path for the server's hot loop: scans text that is exactly one label
 * object (depth 1) in the plain form every client sends — the seven fields
 * once each in any order, strings without escapes, integers without
 * fraction or exponent, JSON whitespace — without building a JSON tree.
 * Returns 1 with *out filled exactly as lp_json_parse + lp_wire_label_decode
 * would fill it; 0 for anything else, valid or not, which the caller then
 * gives to the full parser (so every error keeps its name and message). *end
 * (may be NULL) gets the position after the closing brace.
 */
int lp_wire_label_scan(const char *buf, size_t len, lp_label_msg *out, const char **end);

/*
 * The same for a whole batch body {"labels": [label, ...]} (depth 2): returns
 * the number of labels (1..max) with out[0..n) filled, or 0 when the body is
 * not entirely in that form (including more than max labels).
 */
size_t lp_wire_batch_scan(const char *buf, size_t len, lp_label_msg *out, size_t max);

/* Enrollment: {"key","token","signature"} */
json_t *lp_wire_enroll_encode(const lp_enroll_msg *msg);
int lp_wire_enroll_decode(const json_t *obj, lp_enroll_msg *out, char *msg, size_t msglen);

/* Next-task request: {"key","count","timestamp","signature"} */
json_t *lp_wire_next_encode(const lp_next_msg *msg);
int lp_wire_next_decode(const json_t *obj, lp_next_msg *out, char *msg, size_t msglen);

/* Skip request: {"key","task_id","timestamp","signature"} */
json_t *lp_wire_skip_encode(const lp_skip_msg *msg);
int lp_wire_skip_decode(const json_t *obj, lp_skip_msg *out, char *msg, size_t msglen);

/* Progress request: {"key","timestamp","signature"} */
json_t *lp_wire_progress_encode(const lp_progress_msg *msg);
int lp_wire_progress_decode(const json_t *obj, lp_progress_msg *out, char *msg, size_t msglen);

/* Writes printf-style text into msg if msg is non-NULL; returns code. */
int lp_fail(int code, char *msg, size_t msglen, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

#endif
