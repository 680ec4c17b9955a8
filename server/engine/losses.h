/*
 * losses.h — the per-label preference losses of ldpref, as functions of the
 * margin m = theta^T (f(x,a1) - f(x,a0)) (docs/design.md §3.2).
 *
 * Every loss sees the observed (privatized, possibly corrupted) label as
 * zbar = 2z-1 in {-1,+1} and the label's own privacy budget eps (+INFINITY
 * for an unprivatized label) through c = c(eps) = 1/tanh(eps/2) and
 * q = q(eps) = 1/(1+e^eps) (common/rr.h). The training objective built on
 * these (objective.h) is (1/n)[sum_i loss_i + l2 ||theta||^2].
 *
 *   square-chipo  (tanh(clip_{2Rmax}(m)/2) - c zbar)^2
 *   chipo         -log sigma(zbar clip_{2Rmax}(m))
 *   dpo           -log sigma(zbar m)
 *   rdpo          [(1-q) l(zbar m) - q l(-zbar m)]/(1-2q),  l(u) = -log sigma(u)
 *   rr-mle        -log P(z|m),  P(z=1|m) = q + (1-2q) sigma(m)
 *   rr-sgd        the rdpo loss, minimised by one-pass SGD (paper 002's
 *                 estimator with this project's schedule: shuffled order,
 *                 step lr/sqrt(t), Polyak-averaged iterate)
 *   rr-sgd-last   the rdpo loss by paper 002's Algorithm 1 as written: one
 *                 pass in data order, step lr/t (lr = 1/(gamma kappa)),
 *                 the last iterate
 *   ipo           (m - c zbar/(2 tau))^2
 *
 * Clipped losses have derivative exactly 0 where |m| >= 2Rmax (strict "<"
 * inside), so optimisation starts at theta = 0.
 */
#ifndef LP_LOSSES_H
#define LP_LOSSES_H

typedef enum lp_loss_kind {
    LP_LOSS_SQUARE_CHIPO = 0,
    LP_LOSS_CHIPO,
    LP_LOSS_DPO,
    LP_LOSS_RDPO,
    LP_LOSS_RR_MLE,
    LP_LOSS_RR_SGD,
    LP_LOSS_IPO,
    LP_LOSS_RR_SGD_LAST,
    LP_LOSS_COUNT
} lp_loss_kind;

/* How a fitted theta becomes a policy (policy.h). */
typedef enum lp_link_kind { LP_LINK_CHIMIX = 0, LP_LINK_KL = 1 } lp_link_kind;

typedef struct lp_loss_spec {
    lp_loss_kind kind;
    double rmax; /* square-chipo, chipo: clip at 2*rmax (> 0, may be INFINITY) */
    double tau;  /* ipo: target c zbar / (2 tau) (> 0) */
} lp_loss_spec;

/* Fills the defaults for kind: rmax = 1, tau = 0.5. */
void lp_loss_spec_init(lp_loss_spec *s, lp_loss_kind kind);
/* "square-chipo", ...; NULL for an out-of-range kind. */
const char *lp_loss_name(lp_loss_kind kind);
/* Parses a loss name (also accepts '_' for '-', and "logloss" for dpo).
 * Returns 0 or LP_EINVALID_ARGUMENT. */
int lp_loss_parse(const char *name, lp_loss_kind *out);
/* The link of the loss's family: chi-mix for square-chipo and chipo, KL
 * for the DPO family and the reward estimators. */
lp_link_kind lp_loss_default_link(lp_loss_kind kind);
/* Whether the loss debiases with eps (uses c or q). */
int lp_loss_uses_epsilon(lp_loss_kind kind);

/* Per-label constants derived from the label's eps (> 0 or +INFINITY). */
typedef struct lp_label_consts {
    double c;   /* c(eps) = 1/tanh(eps/2), 1 for +inf */
    double q;   /* q(eps) = 1/(1+e^eps),   0 for +inf */
    double eps; /* eps itself (rr-mle uses it directly) */
} lp_label_consts;

void lp_label_consts_from_eps(double eps, lp_label_consts *out);

/*
 * The loss of one label with margin m, observed zbar in {-1,+1} and
 * constants k; writes dloss/dm to *dldm (non-NULL). Pure function; finite
 * for every finite m and admissible constants.
 */
double lp_loss_point(const lp_loss_spec *s, double m, int zbar, const lp_label_consts *k,
                     double *dldm);

/* Numerically stable log(1+e^x) and 1/(1+e^-x). */
double lp_softplus(double x);
double lp_sigmoid(double x);

#endif
