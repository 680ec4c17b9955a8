/*
 * test_canon.c — canonical signing bytes: fixed layout with a domain tag,
 * signatures that verify, and that any change to any signed field, or the
 * use of a signature for another message kind, fails verification.
 */
#include "canon.h"
#include "check.h"
#include "error.h"
#include "rr.h"

#include <math.h>
#include <sodium.h>
#include <string.h>

static uint8_t pk[LP_KEY_BYTES], sk[LP_SECRET_BYTES];

static lp_label_msg sample_label(void)
{
    lp_label_msg m = {0};
    memcpy(m.key, pk, LP_KEY_BYTES);
    m.task_id = 0x0102030405060708;
    m.z = 1;
    m.epsilon = 1.0;
    memset(m.nonce, 0xAB, LP_NONCE_BYTES);
    m.timestamp_ms = 1763730000123;
    return m;
}

static void test_layout(void)
{
    lp_label_msg m = sample_label();
    uint8_t buf[LP_CANON_MAX];
    size_t n = lp_canon_label(&m, buf);
    CHECK_INT(n, 4 + 15 + 4 + 32 + 4 + 8 + 4 + 1 + 4 + 8 + 4 + 16 + 4 + 8);
    CHECK(memcmp(buf,
                 "\0\0\0\x0f"
                 "ldpref/label/v1",
                 19) == 0);
    CHECK(memcmp(buf + 19, "\0\0\0\x20", 4) == 0);
    CHECK(memcmp(buf + 55, "\0\0\0\x08\x01\x02\x03\x04\x05\x06\x07\x08", 12) == 0);
    CHECK(memcmp(buf + 67, "\0\0\0\x01\x01", 5) == 0);
    /* 1.0 = 0x3FF0000000000000 big-endian */
    CHECK(memcmp(buf + 72, "\0\0\0\x08\x3f\xf0\0\0\0\0\0\0", 12) == 0);
    m.epsilon = INFINITY;
    lp_canon_label(&m, buf);
    CHECK(memcmp(buf + 72, "\0\0\0\x08\x7f\xf0\0\0\0\0\0\0", 12) == 0);
}

static void test_label_signatures(void)
{
    lp_label_msg m = sample_label();
    lp_sign_label(&m, sk);
    CHECK_ERR(lp_verify_label(&m), LP_OK);

    lp_label_msg t = m;
    t.z = 0;
    CHECK_ERR(lp_verify_label(&t), LP_EBAD_SIGNATURE);
    t = m;
    t.epsilon = 1.0000000000000002;
    CHECK_ERR(lp_verify_label(&t), LP_EBAD_SIGNATURE);
    t = m;
    t.task_id++;
    CHECK_ERR(lp_verify_label(&t), LP_EBAD_SIGNATURE);
    t = m;
    t.nonce[15] ^= 1;
    CHECK_ERR(lp_verify_label(&t), LP_EBAD_SIGNATURE);
    t = m;
    t.timestamp_ms++;
    CHECK_ERR(lp_verify_label(&t), LP_EBAD_SIGNATURE);
    t = m;
    t.sig[0] ^= 0x80;
    CHECK_ERR(lp_verify_label(&t), LP_EBAD_SIGNATURE);
    t = m;
    t.key[0] ^= 1;
    CHECK_ERR(lp_verify_label(&t), LP_EBAD_SIGNATURE);
}

static void test_domain_separation(void)
{
    lp_next_msg n = {0};
    memcpy(n.key, pk, LP_KEY_BYTES);
    n.count = 1;
    n.timestamp_ms = 5;
    lp_sign_next(&n, sk);
    CHECK_ERR(lp_verify_next(&n), LP_OK);

    lp_enroll_msg e = {0};
    memcpy(e.key, pk, LP_KEY_BYTES);
    strcpy(e.token, "et_token");
    lp_sign_enroll(&e, sk);
    CHECK_ERR(lp_verify_enroll(&e), LP_OK);
    strcpy(e.token, "et_tokeN");
    CHECK_ERR(lp_verify_enroll(&e), LP_EBAD_SIGNATURE);

    /* A next-request signature is no label signature. */
    lp_label_msg m = sample_label();
    memcpy(m.sig, n.sig, LP_SIG_BYTES);
    CHECK_ERR(lp_verify_label(&m), LP_EBAD_SIGNATURE);
}

/* Skip and progress: every field is signed, each under its own tag. */
static void test_skip_progress(void)
{
    lp_skip_msg s = {.task_id = 42, .timestamp_ms = 1700000000123};
    memcpy(s.key, pk, LP_KEY_BYTES);
    uint8_t buf[LP_CANON_MAX];
    size_t n = lp_canon_skip(&s, buf);
    size_t tag = strlen(LP_TAG_SKIP);
    CHECK_INT(n, 4 + tag + 4 + LP_KEY_BYTES + 4 + 8 + 4 + 8);
    CHECK(memcmp(buf + 4, "ldpref/skip/v1", tag) == 0);
    CHECK_INT(buf[4 + tag + 4 + LP_KEY_BYTES + 4 + 7], 42); /* task id, big-endian */
    lp_sign_skip(&s, sk);
    CHECK_ERR(lp_verify_skip(&s), LP_OK);
    lp_skip_msg t = s;
    t.task_id++;
    CHECK_ERR(lp_verify_skip(&t), LP_EBAD_SIGNATURE);
    t = s;
    t.timestamp_ms++;
    CHECK_ERR(lp_verify_skip(&t), LP_EBAD_SIGNATURE);

    lp_progress_msg p = {.timestamp_ms = s.timestamp_ms};
    memcpy(p.key, pk, LP_KEY_BYTES);
    n = lp_canon_progress(&p, buf);
    CHECK_INT(n, 4 + strlen(LP_TAG_PROGRESS) + 4 + LP_KEY_BYTES + 4 + 8);
    CHECK(memcmp(buf + 4, "ldpref/progress/v1", strlen(LP_TAG_PROGRESS)) == 0);
    lp_sign_progress(&p, sk);
    CHECK_ERR(lp_verify_progress(&p), LP_OK);
    lp_progress_msg q = p;
    q.timestamp_ms--;
    CHECK_ERR(lp_verify_progress(&q), LP_EBAD_SIGNATURE);

    /* no signature serves another kind: next (same key and timestamp) */
    lp_next_msg nx = {.count = 1, .timestamp_ms = p.timestamp_ms};
    memcpy(nx.key, pk, LP_KEY_BYTES);
    memcpy(nx.sig, p.sig, LP_SIG_BYTES);
    CHECK_ERR(lp_verify_next(&nx), LP_EBAD_SIGNATURE);
    memcpy(q.sig, s.sig, LP_SIG_BYTES);
    q.timestamp_ms = s.timestamp_ms;
    CHECK_ERR(lp_verify_progress(&q), LP_EBAD_SIGNATURE);
}

int main(void)
{
    lp_rng_init();
    crypto_sign_keypair(pk, sk);
    test_layout();
    test_label_signatures();
    test_domain_separation();
    test_skip_progress();
    sodium_memzero(sk, sizeof sk);
    return check_summary();
}
