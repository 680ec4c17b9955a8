/*
 * corrupt.h — server-side (LTC) label corruption for experiments
 * (docs/design.md §2.2): a deterministic view of the received labels.
 *
 * A received label is never changed. The corrupted view of label i under
 * settings (alpha, strategy, seed) is computed when a training snapshot is
 * built (or a view is exported): a project PRNG (server/engine/prng.h) is
 * seeded with seed XOR mix(i), where mix is the splitmix64 finalizer of i;
 * its first draw is the Huber coin Bernoulli(alpha) (exact comparison), its
 * second the fair coin of the `random` strategy. So the view is a pure
 * function of (settings, label id, what the strategy looks at).
 *
 * Labels are in the task's own orientation: z = 1 means response 1 is
 * preferred. Strategies: flip (1 - z, the flip of the label the server
 * received), constant0 (0), constant1 (1), random (a fair coin), anti (the
 * label opposing the task's reference preference when it has one:
 * reference 0 gives 1, reference 1 gives 0; otherwise opposing a model's
 * preference: 0 if the model's margin r(response1) - r(response0) is > 0,
 * else 1), backdoor (1 if response 1's feature k is larger than response
 * 0's, 0 if smaller; a tie leaves z unchanged).
 *
 * A server never sees an annotator's true label, so it cannot apply the
 * papers' mask-scheme corruption (set the final label to the wrong answer
 * w.r.t. the truth); `flip` flips the privatized label instead. When the
 * task's reference preference is the truth (as in simulations), `anti` is
 * exactly the mask scheme's wrong-vs-truth label.
 */
#ifndef LP_CORRUPT_H
#define LP_CORRUPT_H

#include "adversary.h"
#include "registry.h" /* lp_corruption */

#include <stdint.h>

#define LP_CORRUPT_SEED_MAX 9007199254740992.0 /* 2^53 */

/* What the strategy may look at for one label (only the fields the strategy
 * needs must be set). */
typedef struct lp_corrupt_input {
    int64_t label_id;
    int z;               /* the received label, task orientation */
    int has_reference;   /* anti: the task has a reference preference ... */
    int reference;       /* ... this one (0 or 1: the preferred response); wins over the model */
    double model_margin; /* anti without a reference: the model's r(response1) - r(response0) */
    double feature0, feature1; /* backdoor: feature k of response 0 and 1 */
} lp_corrupt_input;

/* The label in the corrupted view; *changed (may be NULL) tells whether it
 * differs from in->z. c == NULL or alpha == 0 gives in->z. */
int lp_corrupt_view(const lp_corruption *c, const lp_corrupt_input *in, int *changed);

/* Whether the strategy is one the server offers (all six adversaries). */
int lp_corrupt_strategy_valid(lp_adversary a);

#endif
