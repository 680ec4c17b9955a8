/*
 * ctl.c — CTL corruption simulation for simulated annotators. See ctl.h.
 */
#include "ctl.h"

#include "error.h"
#include "rr.h"
#include "wire.h"

#include <sodium.h>
#include <stdio.h>
#include <string.h>

#define LPC_CTL_TAG "ldpref/ctl/v1"

int lpc_ctl_parse_strategy(const char *name, lp_adversary *out, char *msg, size_t msglen)
{
    if (name == NULL)
        return lp_fail(LP_EINVALID_ARGUMENT, msg, msglen, "CTL strategy missing");
    lp_adversary a;
    if (lp_adversary_parse(name, &a) != LP_OK)
        return lp_fail(LP_EINVALID_ARGUMENT, msg, msglen,
                       "unknown CTL strategy \"%.40s\" (flip, anti, constant0, constant1, random)",
                       name);
    if (a == LP_ADV_BACKDOOR)
        return lp_fail(LP_EINVALID_ARGUMENT, msg, msglen,
                       "CTL strategy backdoor needs task feature vectors, and the tasks served "
                       "to annotators carry none; use flip, anti, constant0, constant1 or random");
    *out = a;
    return LP_OK;
}

struct coin_stream {
    const uint8_t *key;
    uint8_t purpose;
    uint64_t seed, counter;
};

static void put_be64(uint8_t *p, uint64_t v)
{
    for (int i = 0; i < 8; i++)
        p[i] = (uint8_t)(v >> (56 - 8 * i));
}

static uint64_t coin_next64(void *state)
{
    struct coin_stream *s = state;
    uint8_t in[sizeof LPC_CTL_TAG - 1 + 1 + 8 + 8], out[16];
    size_t off = sizeof LPC_CTL_TAG - 1;
    memcpy(in, LPC_CTL_TAG, off);
    in[off++] = s->purpose;
    put_be64(in + off, s->seed);
    put_be64(in + off + 8, s->counter++);
    crypto_generichash(out, sizeof out, in, sizeof in, s->key, LPC_MEMO_KEY_BYTES);
    uint64_t w = 0;
    for (int i = 0; i < 8; i++)
        w = (w << 8) | out[i];
    return w;
}

int lpc_ctl_coin(uint64_t seed, const uint8_t memo_key[LPC_MEMO_KEY_BYTES], int purpose, double p)
{
    struct coin_stream s = {.key = memo_key, .purpose = (uint8_t)purpose, .seed = seed};
    int bit = 0;
    (void)lp_bernoulli_from(p, coin_next64, &s, &bit); /* p is never NaN here */
    return bit;
}

int lpc_ctl_apply(const lpc_ctl *ctl, const uint8_t memo_key[LPC_MEMO_KEY_BYTES], int swapped,
                  int y_canon, int *corrupted)
{
    int hit = ctl->alpha > 0 && lpc_ctl_coin(ctl->seed, memo_key, LPC_CTL_COIN_HUBER, ctl->alpha);
    if (corrupted)
        *corrupted = hit;
    if (!hit)
        return y_canon;
    switch (ctl->strategy) {
    case LP_ADV_FLIP:
    case LP_ADV_ANTI:
        return y_canon == LPC_CTL_TIE ? y_canon : 1 - y_canon;
    case LP_ADV_CONSTANT0:
        return 0 ^ (swapped != 0);
    case LP_ADV_CONSTANT1:
        return 1 ^ (swapped != 0);
    case LP_ADV_RANDOM:
        return lpc_ctl_coin(ctl->seed, memo_key, LPC_CTL_COIN_RANDOM, 0.5);
    default:
        return y_canon; /* unreachable: strategies are validated at open (no backdoor) */
    }
}

void lpc_ctl_describe(const lpc_ctl *ctl, char *out, size_t cap)
{
    const char *name = lp_adversary_name(ctl->strategy);
    snprintf(out, cap, "{\"ctl\":{\"alpha\":%.17g,\"strategy\":\"%s\",\"seed\":%llu}}", ctl->alpha,
             name ? name : "unknown", (unsigned long long)ctl->seed);
}
