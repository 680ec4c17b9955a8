/* losses.c — per-label losses over margins. See losses.h. */
#include "losses.h"

#include "error.h"
#include "rr.h"

#include <assert.h>
#include <math.h>
#include <string.h>

static const char *const loss_names[LP_LOSS_COUNT] = {
    "square-chipo", "chipo", "dpo", "rdpo", "rr-mle", "rr-sgd", "ipo", "rr-sgd-last",
};

void lp_loss_spec_init(lp_loss_spec *s, lp_loss_kind kind)
{
    s->kind = kind;
    s->rmax = 1.0;
    s->tau = 0.5;
}

const char *lp_loss_name(lp_loss_kind kind)
{
    return (unsigned)kind < LP_LOSS_COUNT ? loss_names[kind] : NULL;
}

int lp_loss_parse(const char *name, lp_loss_kind *out)
{
    char buf[32];
    size_t len = strlen(name);
    if (len == 0 || len >= sizeof buf)
        return LP_EINVALID_ARGUMENT;
    for (size_t i = 0; i <= len; i++)
        buf[i] = name[i] == '_' ? '-' : name[i];
    if (strcmp(buf, "logloss") == 0) {
        *out = LP_LOSS_DPO;
        return LP_OK;
    }
    for (int k = 0; k < LP_LOSS_COUNT; k++)
        if (strcmp(buf, loss_names[k]) == 0) {
            *out = (lp_loss_kind)k;
            return LP_OK;
        }
    return LP_EINVALID_ARGUMENT;
}

lp_link_kind lp_loss_default_link(lp_loss_kind kind)
{
    return kind == LP_LOSS_SQUARE_CHIPO || kind == LP_LOSS_CHIPO ? LP_LINK_CHIMIX : LP_LINK_KL;
}

int lp_loss_uses_epsilon(lp_loss_kind kind)
{
    return kind == LP_LOSS_SQUARE_CHIPO || kind == LP_LOSS_RDPO || kind == LP_LOSS_RR_MLE ||
           kind == LP_LOSS_RR_SGD || kind == LP_LOSS_IPO || kind == LP_LOSS_RR_SGD_LAST;
}

void lp_label_consts_from_eps(double eps, lp_label_consts *out)
{
    assert(eps > 0.0); /* +INFINITY allowed; NaN fails */
    out->c = lp_rr_debias(eps);
    out->q = lp_rr_flip_prob(eps);
    out->eps = eps;
}

double lp_softplus(double x)
{
    return x > 0.0 ? x + log1p(exp(-x)) : log1p(exp(x));
}

double lp_sigmoid(double x)
{
    if (x >= 0.0)
        return 1.0 / (1.0 + exp(-x));
    double e = exp(x);
    return e / (1.0 + e);
}

double lp_loss_point(const lp_loss_spec *s, double m, int zbar, const lp_label_consts *k,
                     double *dldm)
{
    assert(zbar == 1 || zbar == -1);
    double zb = (double)zbar;
    switch (s->kind) {
    case LP_LOSS_SQUARE_CHIPO: {
        double r = 2.0 * s->rmax;
        int inside = fabs(m) < r;
        double mc = inside ? m : (m > 0 ? r : -r);
        double p = tanh(0.5 * mc);
        double e = p - k->c * zb;
        *dldm = inside ? e * (1.0 - p * p) : 0.0;
        return e * e;
    }
    case LP_LOSS_CHIPO: {
        double r = 2.0 * s->rmax;
        int inside = fabs(m) < r;
        double u = zb * (inside ? m : (m > 0 ? r : -r));
        *dldm = inside ? -zb * lp_sigmoid(-u) : 0.0;
        return lp_softplus(-u);
    }
    case LP_LOSS_DPO: {
        double u = zb * m;
        *dldm = -zb * lp_sigmoid(-u);
        return lp_softplus(-u);
    }
    case LP_LOSS_RDPO:
    case LP_LOSS_RR_SGD:
    case LP_LOSS_RR_SGD_LAST: {
        /* [(1-q) sp(-u) - q sp(u)]/(1-2q); d/du = sigma(u) - (1-q)/(1-2q). */
        double u = zb * m, q = k->q, w = 1.0 - 2.0 * q;
        *dldm = zb * (lp_sigmoid(u) - (1.0 - q) / w);
        return ((1.0 - q) * lp_softplus(-u) - q * lp_softplus(u)) / w;
    }
    case LP_LOSS_RR_MLE: {
        /* P(z|m) = q + (1-2q) sigma(u), u = zbar m; in stable form
         * -log P = sp(-u) - sp(-u-eps) + sp(-eps); sp(-inf) = 0. */
        double u = zb * m, eps = k->eps;
        double a = isinf(eps) ? 0.0 : lp_softplus(-u - eps);
        double b = isinf(eps) ? 0.0 : lp_softplus(-eps);
        double sa = isinf(eps) ? 0.0 : lp_sigmoid(-u - eps);
        *dldm = zb * (sa - lp_sigmoid(-u));
        return lp_softplus(-u) - a + b;
    }
    case LP_LOSS_IPO: {
        double e = m - k->c * zb / (2.0 * s->tau);
        *dldm = 2.0 * e;
        return e * e;
    }
    default:
        assert(0 && "unknown loss");
        *dldm = 0.0;
        return 0.0;
    }
}
