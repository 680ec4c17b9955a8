/* canon.c — canonical signing bytes and Ed25519 signing. See canon.h. */
#include "canon.h"

#include "error.h"

#include <assert.h>
#include <sodium.h>
#include <string.h>

struct canon_writer {
    uint8_t *out;
    size_t len;
};

static void put_field(struct canon_writer *w, const void *bytes, size_t n)
{
    assert(w->len + 4 + n <= LP_CANON_MAX);
    uint8_t *p = w->out + w->len;
    p[0] = (uint8_t)(n >> 24);
    p[1] = (uint8_t)(n >> 16);
    p[2] = (uint8_t)(n >> 8);
    p[3] = (uint8_t)n;
    memcpy(p + 4, bytes, n);
    w->len += 4 + n;
}

static void put_u64(struct canon_writer *w, uint64_t v)
{
    uint8_t be[8];
    for (int i = 0; i < 8; i++)
        be[i] = (uint8_t)(v >> (56 - 8 * i));
    put_field(w, be, sizeof be);
}

static void put_u32(struct canon_writer *w, uint32_t v)
{
    uint8_t be[4] = {(uint8_t)(v >> 24), (uint8_t)(v >> 16), (uint8_t)(v >> 8), (uint8_t)v};
    put_field(w, be, sizeof be);
}

static void put_double(struct canon_writer *w, double v)
{
    uint64_t bits;
    memcpy(&bits, &v, sizeof bits);
    put_u64(w, bits);
}

size_t lp_canon_label(const lp_label_msg *msg, uint8_t out[LP_CANON_MAX])
{
    struct canon_writer w = {out, 0};
    uint8_t z = (uint8_t)msg->z;
    put_field(&w, LP_TAG_LABEL, strlen(LP_TAG_LABEL));
    put_field(&w, msg->key, LP_KEY_BYTES);
    put_u64(&w, (uint64_t)msg->task_id);
    put_field(&w, &z, 1);
    put_double(&w, msg->epsilon);
    put_field(&w, msg->nonce, LP_NONCE_BYTES);
    put_u64(&w, (uint64_t)msg->timestamp_ms);
    return w.len;
}

size_t lp_canon_enroll(const lp_enroll_msg *msg, uint8_t out[LP_CANON_MAX])
{
    struct canon_writer w = {out, 0};
    put_field(&w, LP_TAG_ENROLL, strlen(LP_TAG_ENROLL));
    put_field(&w, msg->key, LP_KEY_BYTES);
    put_field(&w, msg->token, strnlen(msg->token, LP_TOKEN_MAX));
    return w.len;
}

size_t lp_canon_next(const lp_next_msg *msg, uint8_t out[LP_CANON_MAX])
{
    struct canon_writer w = {out, 0};
    put_field(&w, LP_TAG_NEXT, strlen(LP_TAG_NEXT));
    put_field(&w, msg->key, LP_KEY_BYTES);
    put_u32(&w, msg->count);
    put_u64(&w, (uint64_t)msg->timestamp_ms);
    return w.len;
}

size_t lp_canon_skip(const lp_skip_msg *msg, uint8_t out[LP_CANON_MAX])
{
    struct canon_writer w = {out, 0};
    put_field(&w, LP_TAG_SKIP, strlen(LP_TAG_SKIP));
    put_field(&w, msg->key, LP_KEY_BYTES);
    put_u64(&w, (uint64_t)msg->task_id);
    put_u64(&w, (uint64_t)msg->timestamp_ms);
    return w.len;
}

size_t lp_canon_progress(const lp_progress_msg *msg, uint8_t out[LP_CANON_MAX])
{
    struct canon_writer w = {out, 0};
    put_field(&w, LP_TAG_PROGRESS, strlen(LP_TAG_PROGRESS));
    put_field(&w, msg->key, LP_KEY_BYTES);
    put_u64(&w, (uint64_t)msg->timestamp_ms);
    return w.len;
}

static void sign_bytes(uint8_t sig[LP_SIG_BYTES], const uint8_t *m, size_t n,
                       const uint8_t sk[LP_SECRET_BYTES])
{
    crypto_sign_detached(sig, NULL, m, n, sk);
}

static int verify_bytes(const uint8_t sig[LP_SIG_BYTES], const uint8_t *m, size_t n,
                        const uint8_t key[LP_KEY_BYTES])
{
    return crypto_sign_verify_detached(sig, m, n, key) == 0 ? LP_OK : LP_EBAD_SIGNATURE;
}

void lp_sign_label(lp_label_msg *msg, const uint8_t sk[LP_SECRET_BYTES])
{
    uint8_t buf[LP_CANON_MAX];
    sign_bytes(msg->sig, buf, lp_canon_label(msg, buf), sk);
}

void lp_sign_enroll(lp_enroll_msg *msg, const uint8_t sk[LP_SECRET_BYTES])
{
    uint8_t buf[LP_CANON_MAX];
    sign_bytes(msg->sig, buf, lp_canon_enroll(msg, buf), sk);
}

void lp_sign_next(lp_next_msg *msg, const uint8_t sk[LP_SECRET_BYTES])
{
    uint8_t buf[LP_CANON_MAX];
    sign_bytes(msg->sig, buf, lp_canon_next(msg, buf), sk);
}

void lp_sign_skip(lp_skip_msg *msg, const uint8_t sk[LP_SECRET_BYTES])
{
    uint8_t buf[LP_CANON_MAX];
    sign_bytes(msg->sig, buf, lp_canon_skip(msg, buf), sk);
}

void lp_sign_progress(lp_progress_msg *msg, const uint8_t sk[LP_SECRET_BYTES])
{
    uint8_t buf[LP_CANON_MAX];
    sign_bytes(msg->sig, buf, lp_canon_progress(msg, buf), sk);
}

int lp_verify_label(const lp_label_msg *msg)
{
    uint8_t buf[LP_CANON_MAX];
    return verify_bytes(msg->sig, buf, lp_canon_label(msg, buf), msg->key);
}

int lp_verify_enroll(const lp_enroll_msg *msg)
{
    uint8_t buf[LP_CANON_MAX];
    return verify_bytes(msg->sig, buf, lp_canon_enroll(msg, buf), msg->key);
}

int lp_verify_next(const lp_next_msg *msg)
{
    uint8_t buf[LP_CANON_MAX];
    return verify_bytes(msg->sig, buf, lp_canon_next(msg, buf), msg->key);
}

int lp_verify_skip(const lp_skip_msg *msg)
{
    uint8_t buf[LP_CANON_MAX];
    return verify_bytes(msg->sig, buf, lp_canon_skip(msg, buf), msg->key);
}

int lp_verify_progress(const lp_progress_msg *msg)
{
    uint8_t buf[LP_CANON_MAX];
    return verify_bytes(msg->sig, buf, lp_canon_progress(msg, buf), msg->key);
}
