/*
 * expmech.h — the exponential mechanism of Algorithm 2 (Square chi-PO,
 * central DP): a pure eps-DP release of one theta from a finite candidate
 * set fixed before the data is seen (docs/privacy-mechanisms.md).
 *
 * Loss of a candidate theta on n unrandomized labels (margin m_i = theta^T
 * df_i, which is beta h_chiPO,i exactly for the reward-linear class, so beta
 * does not enter; ybar_i = 2 z_i - 1 with no c(eps) debiasing):
 *
 *   L(theta) = sum_i (tanh(clip_{2 rmax}(m_i) / 2) - ybar_i)^2,  each term in [0, 4]
 *
 * Changing one label (or one whole row) changes L by at most 4, so
 * selecting theta_k with probability exp(-eps L_k / 8) / Z is eps-DP
 * (McSherry-Talwar with sensitivity 4). With a contribution cap m per user
 * the same holds per user at exp(-eps L_k / (8 m)).
 *
 * Candidate sets (the spec string, then ":seed=S" optionally for the random
 * ones; S < 2^53 is public, drawn from the CSPRNG when not given):
 *   grid:G     the points of the G-per-axis grid over [-R, R]^d (G >= 2)
 *              inside the ball ||theta|| <= R; for small d (G^d <= 2^20)
 *   net:K      the origin and K-1 points uniform in the ball of radius R
 *   around:K   the center and K-1 points uniform in the ball of radius R
 *              around it (e.g. an earlier released model, or a model fit on
 *              public data); needs the center's d values
 * Candidates are stored in double (float32 data: the GEMM runs in float
 * on the candidates rounded to float; the released theta is the double
 * candidate); at most LP_EXPMECH_MAX_CANDIDATES of them and
 * LP_EXPMECH_MAX_VALUES values (K * d) in all.
 */
#ifndef LP_EXPMECH_H
#define LP_EXPMECH_H

#include "dataset.h"
#include "mechanism.h"

#include <jansson.h>
#include <stddef.h>
#include <stdint.h>

#define LP_EXPMECH_MAX_CANDIDATES ((size_t)1 << 20)
#define LP_EXPMECH_MAX_VALUES ((size_t)1 << 25)
/* Seeds of random nets are below 2^53 (exact as JSON numbers anywhere). */
#define LP_EXPMECH_SEED_LIMIT ((uint64_t)1 << 53)
/* The loss's per-label range: the mechanism's sensitivity. */
#define LP_EXPMECH_SENSITIVITY 4.0

typedef enum lp_cand_kind { LP_CAND_GRID = 0, LP_CAND_NET, LP_CAND_AROUND } lp_cand_kind;

/* A candidate set and its definition (enough to rebuild it exactly). */
typedef struct lp_candset {
    lp_cand_kind kind;
    size_t param;   /* grid: points per axis G; net, around: the count K asked */
    size_t k, d;    /* candidates built (grid: those inside the ball) and dim */
    double radius;  /* R */
    uint64_t seed;  /* net, around (0 for grid) */
    double *theta;  /* k * d values, row-major, owned */
    double *center; /* around: d values (owned copy); else NULL */
} lp_candset;

/* "grid", "net", "around". */
const char *lp_cand_kind_name(lp_cand_kind kind);

/* Parses "KIND:COUNT[:seed=S]". *has_seed says whether S was given.
 * Returns 0 or LP_EINVALID_ARGUMENT (msg says why). */
int lp_candset_parse(const char *spec, lp_cand_kind *kind, size_t *param, uint64_t *seed,
                     int *has_seed, char *msg, size_t msglen);

/* Builds a set (center: d values for around, ignored otherwise). Returns 0,
 * LP_EINVALID_ARGUMENT (size caps, radius not finite and > 0, no center)
 * or LP_ENO_MEMORY. */
int lp_candset_build(lp_cand_kind kind, size_t param, size_t d, double radius, uint64_t seed,
                     const double *center, lp_candset **out, char *msg, size_t msglen);
void lp_candset_free(lp_candset *c);

/* The set's definition as JSON (new reference): {"kind", "count", "size",
 * "radius", "seed" (net, around), "center_sha256" and, for d <= 4096,
 * "center" (around)}. */
json_t *lp_candset_to_json(const lp_candset *c);
/* Rebuilds the set of a definition; center (d values) is used when the
 * definition holds only the center's hash. Checks the size and the center's
 * hash. Returns 0, LP_EINVALID_ARGUMENT or LP_ENO_MEMORY. */
int lp_candset_from_json(const json_t *def, size_t d, const double *center, lp_candset **out,
                         char *msg, size_t msglen);

/* L_k of every candidate (loss: k values): the margins of all candidates
 * on a block of rows in one GEMM (candidates x d times d x rows; CSR data:
 * one axpy per stored value), blocks sized to bound memory. Per-label terms
 * in double; a NaN margin counts as 0. Returns 0 or LP_ENO_MEMORY. */
int lp_expmech_losses(const lp_dataset *ds, const lp_candset *c, double rmax, double *loss);
/* The same loss of one theta by a plain loop over rows (reference). */
double lp_expmech_loss_naive(const lp_dataset *ds, const double *theta, double rmax);
/* One label's term (tanh(clip_{2 rmax}(m)/2) - (2z - 1))^2, in [0, 4]. */
double lp_expmech_term(double margin, int z, double rmax);

/* The index of argmax_k (-scale L_k + G_k), G_k i.i.d. Gumbel(0,1) from 53
 * bits of rand64 each: a draw from exp(-scale L_k) / Z. */
size_t lp_expmech_select(const double *loss, size_t k, double scale, lp_rand64 rand64,
                         void *rand_state);
/* The exact selection probabilities exp(-scale L_k) / Z (p: k values). */
void lp_expmech_probs(const double *loss, size_t k, double scale, double *p);

/* The exponential release (lp_release_fit's case): see mechanism.h. With
 * user != NULL and o->user_cap = m > 0, only each user's first m rows count
 * and the scale is eps / (8 m) (user-level eps-DP). */
int lp_expmech_release(const lp_dataset *ds, const int64_t *user, const lp_release_opts *o,
                       lp_model **out, char *msg, size_t msglen);

#endif
