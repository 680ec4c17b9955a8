/*
 * annotators.h — the annotators repository: enrolled keys and their
 * pseudonyms, enrollment with single-use tokens and revocation. Enrollment
 * tokens are stored as hashes only; the store never sees a token. Operator
 * tokens are in tokens.h.
 */
#ifndef LP_ANNOTATORS_H
#define LP_ANNOTATORS_H

#include "canon.h"
#include "store.h"

#include <stddef.h>
#include <stdint.h>

/* ---- tokens ---- */

/* Adds n enrollment token hashes (n*LP_HASH_BYTES bytes) for a campaign, all
 * or none. LP_EUNKNOWN_CAMPAIGN. */
int lp_store_enroll_tokens_add(lp_store *s, int64_t campaign, const uint8_t *hashes, size_t n);

/* ---- annotators ---- */

typedef struct lp_annotator {
    int64_t id;
    int64_t campaign;
    int revoked;
    char pseudonym[LP_PSEUDONYM_MAX];
} lp_annotator;

/* Key -> annotator, served from an in-memory cache that is filled from
 * committed rows and updated when a revocation commits. LP_EUNKNOWN_KEY if
 * no such key. Label ingest re-checks revocation authoritatively. */
int lp_store_annotator_by_key(lp_store *s, const uint8_t key[LP_KEY_BYTES], lp_annotator *out);

/* Enrolls key with the unused enrollment token whose hash is given; the
 * pseudonym is drawn from the CSPRNG. Errors: LP_EALREADY_ENROLLED,
 * LP_EBAD_ENROLLMENT_TOKEN (unknown or used; nothing is consumed). */
int lp_store_enroll(lp_store *s, const uint8_t key[LP_KEY_BYTES],
                    const uint8_t token_hash[LP_HASH_BYTES], lp_annotator *out);
/* Marks the key revoked. LP_EUNKNOWN_KEY if not enrolled. */
int lp_store_revoke(lp_store *s, const uint8_t key[LP_KEY_BYTES]);
/* Marks the key of the annotator with this pseudonym ("ann-...") revoked;
 * key gets it. LP_EUNKNOWN_KEY if no annotator has the pseudonym. */
int lp_store_revoke_pseudonym(lp_store *s, const char *pseudonym, uint8_t key[LP_KEY_BYTES]);

#endif
