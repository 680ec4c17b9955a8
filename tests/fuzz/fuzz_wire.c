/*
 * fuzz_wire.c — libFuzzer target for the wire decoder: capped JSON parsing
 * and the label, enroll and next-request codecs. Properties checked besides
 * "no crash, leak or UB": whatever decodes re-encodes to JSON that decodes to
 * the same message; whatever the label fast path (lp_wire_label_scan)
 * accepts, the full parser accepts too, with the same message.
 */
#include "error.h"
#include "rr.h"
#include "wire.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

static void label_round_trip(const json_t *root)
{
    lp_label_msg m, back;
    char msg[LP_MSG_MAX];
    if (lp_wire_label_decode(root, &m, msg, sizeof msg) != LP_OK)
        return;
    json_t *enc = lp_wire_label_encode(&m);
    if (lp_wire_label_decode(enc, &back, msg, sizeof msg) != LP_OK ||
        memcmp(m.key, back.key, sizeof m.key) != 0 || m.task_id != back.task_id || m.z != back.z ||
        m.epsilon != back.epsilon || m.timestamp_ms != back.timestamp_ms ||
        memcmp(m.sig, back.sig, sizeof m.sig) != 0)
        abort();
    json_decref(enc);
}

static void enroll_round_trip(const json_t *root)
{
    lp_enroll_msg m, back;
    char msg[LP_MSG_MAX];
    if (lp_wire_enroll_decode(root, &m, msg, sizeof msg) != LP_OK)
        return;
    json_t *enc = lp_wire_enroll_encode(&m);
    if (lp_wire_enroll_decode(enc, &back, msg, sizeof msg) != LP_OK ||
        memcmp(&m, &back, sizeof m) != 0)
        abort();
    json_decref(enc);
}

static void next_round_trip(const json_t *root)
{
    lp_next_msg m, back;
    char msg[LP_MSG_MAX];
    if (lp_wire_next_decode(root, &m, msg, sizeof msg) != LP_OK)
        return;
    json_t *enc = lp_wire_next_encode(&m);
    if (lp_wire_next_decode(enc, &back, msg, sizeof msg) != LP_OK ||
        memcmp(&m, &back, sizeof m) != 0)
        abort();
    json_decref(enc);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static int ready;
    if (!ready) {
        if (lp_rng_init() != LP_OK)
            abort();
        ready = 1;
    }
    json_t *root;
    char msg[LP_MSG_MAX];
    lp_label_msg fast, full;
    int scanned = lp_wire_label_scan((const char *)data, size, &fast, NULL);
    if (lp_json_parse((const char *)data, size, LP_JSON_DEPTH_MAX, &root, msg, sizeof msg) !=
        LP_OK) {
        if (scanned)
            abort();
        return 0;
    }
    if (scanned && (lp_wire_label_decode(root, &full, msg, sizeof msg) != LP_OK ||
                    memcmp(&fast, &full, sizeof fast) != 0))
        abort();
    label_round_trip(root);
    enroll_round_trip(root);
    next_round_trip(root);
    json_decref(root);
    return 0;
}
