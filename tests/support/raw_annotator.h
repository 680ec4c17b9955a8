/*
 * raw_annotator.h — an annotator that speaks the wire protocol directly,
 * for end-to-end tests that must send what the real client never would
 * (conflicting labels, replayed nonces, forged signatures). Real keys, real
 * signatures, real HTTP; only the client library's safeguards are skipped.
 */
#ifndef LP_RAW_ANNOTATOR_H
#define LP_RAW_ANNOTATOR_H

#include "canon.h"
#include "http_raw.h"

#include <jansson.h>

typedef struct raw_annotator {
    const char *url; /* borrowed server URL */
    uint8_t pk[LP_KEY_BYTES], sk[LP_SECRET_BYTES];
} raw_annotator;

/* New key pair; enrolls it with token. Returns the HTTP status. */
long raw_enroll(raw_annotator *a, const char *url, const char *token);
/* Fetches up to count tasks; *tasks gets the "tasks" array (new ref) or NULL.
 * Returns the HTTP status. */
long raw_next(raw_annotator *a, int count, json_t **tasks);
/* A signed label for task_id with fresh nonce and current timestamp. */
lp_label_msg raw_label(const raw_annotator *a, int64_t task_id, int z, double eps);
/* Re-signs m with a's key (after a test changed a field). */
void raw_resign(const raw_annotator *a, lp_label_msg *m);
/* POSTs a label; reply in *r (free with http_reply_free). Returns status. */
long raw_post_label(const char *url, const lp_label_msg *m, http_reply *r);
/* POSTs a JSON value to url+path with an optional bearer token. */
long raw_post_json(const char *url, const char *path, json_t *body, const char *bearer,
                   http_reply *r);
/* GET url+path with an optional bearer token. */
long raw_get(const char *url, const char *path, const char *bearer, http_reply *r);

#endif
