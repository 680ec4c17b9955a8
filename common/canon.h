/*
 * canon.h — canonical signing bytes and Ed25519 signatures for the messages
 * an annotator signs.
 *
 * A signature never covers "the JSON text": it covers a fixed byte string
 * built from a domain tag and every field in a fixed order, each field as a
 * 4-byte big-endian length followed by its bytes. Integers are big-endian,
 * epsilon is its IEEE-754 binary64 bit pattern big-endian (+inf for "not
 * privatized"). The domain tag makes a signature for one message kind
 * useless for any other.
 *
 *   label:  "ldpref/label/v1"  key(32) task_id(8) z(1) epsilon(8) nonce(16) timestamp_ms(8)
 *   enroll: "ldpref/enroll/v1" key(32) token(<=LP_TOKEN_MAX)
 *   next:   "ldpref/next/v1"   key(32) count(4) timestamp_ms(8)
 *   skip:   "ldpref/skip/v1"   key(32) task_id(8) timestamp_ms(8)
 *   progress: "ldpref/progress/v1" key(32) timestamp_ms(8)
 */
#ifndef LP_CANON_H
#define LP_CANON_H

#include <stddef.h>
#include <stdint.h>

#define LP_KEY_BYTES 32    /* Ed25519 public key */
#define LP_SECRET_BYTES 64 /* Ed25519 secret key (seed || public key) */
#define LP_SIG_BYTES 64    /* Ed25519 signature */
#define LP_NONCE_BYTES 16  /* random per-label nonce */
#define LP_TOKEN_MAX 128   /* longest enrollment token accepted */
#define LP_CANON_MAX 256   /* room for any canonical message */

#define LP_TAG_LABEL "ldpref/label/v1"
#define LP_TAG_ENROLL "ldpref/enroll/v1"
#define LP_TAG_NEXT "ldpref/next/v1"
#define LP_TAG_SKIP "ldpref/skip/v1"
#define LP_TAG_PROGRESS "ldpref/progress/v1"

/* A privatized label as it travels from the annotator's device. z is the
 * privatized answer relative to the order in which the task was presented:
 * 1 means the second response shown ("b") was reported preferred. */
typedef struct lp_label_msg {
    uint8_t key[LP_KEY_BYTES];
    int64_t task_id;
    int z;
    double epsilon; /* > 0, +INFINITY when not privatized */
    uint8_t nonce[LP_NONCE_BYTES];
    int64_t timestamp_ms; /* Unix time in milliseconds, set by the client */
    uint8_t sig[LP_SIG_BYTES];
} lp_label_msg;

/* Request to enroll a public key with a one-time token (proof of possession). */
typedef struct lp_enroll_msg {
    uint8_t key[LP_KEY_BYTES];
    char token[LP_TOKEN_MAX + 1];
    uint8_t sig[LP_SIG_BYTES];
} lp_enroll_msg;

/* Request for the annotator's next tasks. */
typedef struct lp_next_msg {
    uint8_t key[LP_KEY_BYTES];
    uint32_t count;
    int64_t timestamp_ms;
    uint8_t sig[LP_SIG_BYTES];
} lp_next_msg;

/* Request to skip an assigned task: no label, no epsilon; the task is never
 * offered to this annotator again. */
typedef struct lp_skip_msg {
    uint8_t key[LP_KEY_BYTES];
    int64_t task_id;
    int64_t timestamp_ms;
    uint8_t sig[LP_SIG_BYTES];
} lp_skip_msg;

/* Request for the progress of the annotator's campaign. */
typedef struct lp_progress_msg {
    uint8_t key[LP_KEY_BYTES];
    int64_t timestamp_ms;
    uint8_t sig[LP_SIG_BYTES];
} lp_progress_msg;

/* Each writes the canonical bytes into out (LP_CANON_MAX bytes) and returns
 * their length. */
size_t lp_canon_label(const lp_label_msg *msg, uint8_t out[LP_CANON_MAX]);
size_t lp_canon_enroll(const lp_enroll_msg *msg, uint8_t out[LP_CANON_MAX]);
size_t lp_canon_next(const lp_next_msg *msg, uint8_t out[LP_CANON_MAX]);
size_t lp_canon_skip(const lp_skip_msg *msg, uint8_t out[LP_CANON_MAX]);
size_t lp_canon_progress(const lp_progress_msg *msg, uint8_t out[LP_CANON_MAX]);

/* Sign with an Ed25519 secret key: fills msg->sig. */
void lp_sign_label(lp_label_msg *msg, const uint8_t sk[LP_SECRET_BYTES]);
void lp_sign_enroll(lp_enroll_msg *msg, const uint8_t sk[LP_SECRET_BYTES]);
void lp_sign_next(lp_next_msg *msg, const uint8_t sk[LP_SECRET_BYTES]);
void lp_sign_skip(lp_skip_msg *msg, const uint8_t sk[LP_SECRET_BYTES]);
void lp_sign_progress(lp_progress_msg *msg, const uint8_t sk[LP_SECRET_BYTES]);

/* Verify msg->sig against msg->key. Returns LP_OK or LP_EBAD_SIGNATURE. */
int lp_verify_label(const lp_label_msg *msg) __attribute__((warn_unused_result));
int lp_verify_enroll(const lp_enroll_msg *msg) __attribute__((warn_unused_result));
int lp_verify_next(const lp_next_msg *msg) __attribute__((warn_unused_result));
int lp_verify_skip(const lp_skip_msg *msg) __attribute__((warn_unused_result));
int lp_verify_progress(const lp_progress_msg *msg) __attribute__((warn_unused_result));

#endif
