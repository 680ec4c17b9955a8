/*
 * adversary.h — the corruption strategies of the Huber contamination model,
 * shared by the client's CTL corruption (client/lib/ctl.c), the server's
 * LTC views (server/service/corrupt.c) and the simulator
 * (server/research/simulate.c).
 *
 * With probability alpha a label is replaced by the strategy's label:
 *   flip       1 - y
 *   anti       opposes the true (or reference, or model) preference
 *   backdoor   prefers the response whose trigger feature is larger
 *   constant0  always response 0 (as presented, on the client)
 *   constant1  always response 1
 *   random     a fair coin
 * The numbers are stable: they may be stored.
 */
#ifndef LP_ADVERSARY_H
#define LP_ADVERSARY_H

typedef enum lp_adversary {
    LP_ADV_FLIP = 0,
    LP_ADV_ANTI,
    LP_ADV_BACKDOOR,
    LP_ADV_CONSTANT0,
    LP_ADV_CONSTANT1,
    LP_ADV_RANDOM,
    LP_ADV_COUNT
} lp_adversary;

/* The wire name ("flip", ...; static storage), or NULL for a bad value. */
const char *lp_adversary_name(lp_adversary a);
/* LP_OK with *out set, or LP_EINVALID_ARGUMENT for an unknown name. */
int lp_adversary_parse(const char *name, lp_adversary *out);

#endif
