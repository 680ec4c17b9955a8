/*
 * mechanism.h — differentially private model releases (trusted curator).
 *
 * In a central campaign the server sees the raw labels and only the
 * released model is private. A release picks theta through a DP mechanism
 * and records how (the model's "release" object, model.h):
 *
 *   exponential  Algorithm 2 of the Square chi-PO paper: pure eps-DP
 *                selection from a finite candidate set fixed before the data
 *                is seen (expmech.h; docs/privacy-mechanisms.md)
 *   aup          AUP-RLHF, user-level (eps, delta)-DP: DP-SGD over the
 *                annotators' averaged gradients through a private mean
 *                oracle (aup.h; docs/privacy-mechanisms.md)
 *
 * Randomness: the product passes lp_csprng_next64 (common/rr.h, the OS
 * CSPRNG); research and tests a seeded lp_prng through lp_prng_next64.
 */
#ifndef LP_MECHANISM_H
#define LP_MECHANISM_H

#include "dataset.h"
#include "model.h"

#include <stddef.h>
#include <stdint.h>

typedef enum lp_mechanism { LP_MECH_NONE = 0, LP_MECH_EXPONENTIAL, LP_MECH_AUP } lp_mechanism;

/* "none", "exponential", "aup"; NULL for an out-of-range value. */
const char *lp_mechanism_name(lp_mechanism m);
/* Parses one of those names. Returns 0 or LP_EINVALID_ARGUMENT. */
int lp_mechanism_parse(const char *name, lp_mechanism *out);

/* 64 random bits from state. */
typedef uint64_t (*lp_rand64)(void *state);

typedef struct lp_release_opts {
    lp_mechanism mechanism;
    double epsilon;    /* finite, > 0 (INFINITY refused: LP_EINVALID_ARGUMENT) */
    double delta;      /* aup: (0, 1); exponential: 0 */
    double beta, rmax; /* the loss's beta and reward bound (clip 2*rmax) */
    /* exponential: the candidate set, fixed before the data is seen;
     * "grid:G", "net:K" or "around:K", each optionally ":seed=S" (expmech.h) */
    const char *candidates;
    double radius;        /* norm ball radius */
    const double *center; /* d values or NULL (e.g. an earlier released model) */
    /* aup (user level): the per-annotator contribution cap m */
    size_t user_cap;
    lp_rand64 rand64;
    void *rand_state;
    /* aup: the optimizer and the concentration radius; 0 takes aup.h's
     * defaults (100 steps, lr 1, theta norm bound 10, tau from the data's
     * public feature norms, every annotator in each step) */
    int steps;
    double lr, norm_bound, tau;
    size_t batch;
} lp_release_opts;

/* Zeroes o and sets mechanism, epsilon, beta = 1, rmax = 1, radius = 1,
 * rand64 = lp_csprng_next64 (the product's source). */
void lp_release_opts_init(lp_release_opts *o, lp_mechanism mechanism, double epsilon);

/*
 * Releases a model from ds (borrowed) with labels grouped by user[i]
 * (annotator ids parallel to the rows; NULL = one label per user). The
 * returned model has theta, the data summary (only what the release may
 * show: n and the epsilon histogram; no label counts or fitted metrics) and
 * m->release set: {"mechanism", "epsilon", "delta", ... the definition of
 * the candidate set or the noise calibration, enough to reproduce it}.
 * Returns 0, LP_EINVALID_ARGUMENT (msg says why: epsilon not finite and
 * positive, unknown mechanism, bad candidate set, ...), LP_ERNG (the OS
 * CSPRNG cannot be initialized) or LP_ENO_MEMORY.
 */
int lp_release_fit(const lp_dataset *ds, const int64_t *user, const lp_release_opts *o,
                   lp_model **out, char *msg, size_t msglen);

#endif
