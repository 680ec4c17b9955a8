/*
 * ctl.h — simulation of annotator-side corruption before randomized response
 * (CTL, docs/design.md §2.2): for SIMULATED annotators in research experiments
 * only, never on by default (ldpref_options.simulate_ctl_alpha = 0).
 *
 * With probability alpha the annotator's TRUE label is replaced by the
 * strategy's label, and only then privatized by randomized response. The
 * two coins involved (the Huber coin "is this comparison corrupted?" and the
 * random strategy's coin) are deterministic functions of (seed, memo key):
 * each is a Bernoulli draw (lp_bernoulli_from, exact comparison) over the
 * 64-bit words
 *     word_k = first 8 bytes (big-endian) of BLAKE2b-128 keyed with the
 *              memo key over "ldpref/ctl/v1" || purpose (1 byte) ||
 *              seed (u64 BE) || k (u64 BE).
 * Randomized response itself still uses only the OS CSPRNG (common/rr.h).
 * Nothing of this module's state or output reaches the wire: the label
 * message and its signed bytes are the standard ones.
 *
 * Strategies (lp_adversary, common/adversary.h): flip (1 - y); anti
 * (opposes the annotator's own true preference: for one simulated annotator
 * the same label as flip); constant0 / constant1; random (a fair coin,
 * deterministic from seed and memo key). backdoor is refused.
 *
 * Can't tell. A "can't tell" answer enters as y_canon = LPC_CTL_TIE (2, the
 * value of LDPREF_CHOICE_CANT_TELL): it has no preference to oppose, so flip
 * and anti leave it a tie (sent as a fair coin), while constant0/constant1
 * and random replace it like any answer (a corrupted annotator who always
 * says "a" says it for ties as well).
 *
 * Orientation. Labels here are in the memo's canonical orientation
 * (y_canon = choice XOR swapped). flip/anti/random do not depend on
 * orientation; constant0/constant1 are defined in the PRESENTED a/b order
 * (constant0 = "a preferred", constant1 = "b preferred") because the
 * client cannot know the task's own response 0/1 orientation.
 */
#ifndef LPC_CTL_H
#define LPC_CTL_H

#include "adversary.h"
#include "ledger.h"

#include <stddef.h>
#include <stdint.h>

/* The canonical label of a "can't tell" answer (LDPREF_CHOICE_CANT_TELL). */
#define LPC_CTL_TIE 2

/* Coin purposes (the byte after the tag). */
#define LPC_CTL_COIN_HUBER 1
#define LPC_CTL_COIN_RANDOM 2

typedef struct lpc_ctl {
    double alpha;          /* in [0, 0.5]; 0 = off */
    lp_adversary strategy; /* never LP_ADV_BACKDOOR (lpc_ctl_parse_strategy) */
    uint64_t seed;
} lpc_ctl;

/* The strategy for a name (common/adversary.h; its name is lp_adversary_name).
 * LP_OK; LP_EINVALID_ARGUMENT for an unknown name and for "backdoor" (tasks
 * served to annotators carry no feature vectors), with a message in msg and
 * *out untouched. */
int lpc_ctl_parse_strategy(const char *name, lp_adversary *out, char *msg, size_t msglen);

/* Bernoulli(p) from the coin stream of (seed, memo_key, purpose). */
int lpc_ctl_coin(uint64_t seed, const uint8_t memo_key[LPC_MEMO_KEY_BYTES], int purpose, double p);

/*
 * The label to privatize, in canonical orientation: y_canon (0, 1 or
 * LPC_CTL_TIE), or with probability ctl->alpha the strategy's label.
 * swapped is the comparison's canonical orientation as presented
 * (lpc_memo_key). *corrupted (may be NULL) is 1 when the Huber coin came up
 * (even if the strategy's label happens to equal y_canon).
 */
int lpc_ctl_apply(const lpc_ctl *ctl, const uint8_t memo_key[LPC_MEMO_KEY_BYTES], int swapped,
                  int y_canon, int *corrupted);

/* The settings as compact JSON {"ctl":{"alpha":..,"strategy":"..","seed":..}}
 * into out (cap bytes, 128 is enough). */
void lpc_ctl_describe(const lpc_ctl *ctl, char *out, size_t cap);

#endif
