/* train_request.c — the retrain request on the wire. See train_request.h. */
#include "train_request.h"

#include "budget.h"
#include "campaigns.h"
#include "error.h"
#include "wire.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

#define HYPER_MAX 1e6
#define L2_MAX 1e9
#define BOUND_MAX 1e9

typedef struct num_field {
    const char *name;
    double lo, hi; /* inclusive range (lo_open: lo excluded) */
    int lo_open, integer, nullable;
} num_field;

/* Reads an optional number field. *present tells whether it was given;
 * null gives INFINITY when nullable. */
static int get_number(const json_t *obj, const num_field *f, double *out, int *present, char *msg,
                      size_t msglen)
{
    const json_t *v = json_object_get(obj, f->name);
    *present = v != NULL;
    if (v == NULL)
        return LP_OK;
    if (json_is_null(v) && f->nullable) {
        *out = INFINITY;
        return LP_OK;
    }
    if (!json_is_number(v) || (f->integer && !json_is_integer(v)))
        return lp_fail(LP_EWRONG_TYPE, msg, msglen, "\"%s\" must be %s", f->name,
                       f->integer ? "an integer" : "a number");
    double x = json_number_value(v);
    if (!isfinite(x) || (f->lo_open ? !(x > f->lo) : !(x >= f->lo)) || !(x <= f->hi))
        return lp_fail(LP_EBAD_HYPERPARAMETER, msg, msglen, "\"%s\" must be in %s%g, %g]", f->name,
                       f->lo_open ? "(" : "[", f->lo, f->hi);
    *out = x;
    return LP_OK;
}

static int get_bool(const json_t *obj, const char *name, int *out, char *msg, size_t msglen)
{
    const json_t *v = json_object_get(obj, name);
    if (v == NULL)
        return LP_OK;
    if (!json_is_boolean(v))
        return lp_fail(LP_EWRONG_TYPE, msg, msglen, "\"%s\" must be true or false", name);
    *out = json_is_true(v);
    return LP_OK;
}

static int check_fields(const json_t *obj, const char *const *allowed, const char *where, char *msg,
                        size_t msglen)
{
    const char *key;
    const json_t *val;
    json_object_foreach((json_t *)obj, key, val)
    {
        int ok = 0;
        for (size_t k = 0; allowed[k] != NULL && !ok; k++)
            ok = strcmp(key, allowed[k]) == 0;
        if (!ok)
            return lp_fail(LP_EUNKNOWN_FIELD, msg, msglen, "unknown field \"%s\"%s", key, where);
    }
    return LP_OK;
}

static const char *const REQUEST_FIELDS[] = {
    "loss", "method",     "campaign",  "cutoff",    "seed",    "beta",  "rmax",       "tau",
    "l2",   "norm_bound", "optimizer", "max_iter",  "epochs",  "lr",    "batch",      "features",
    "text", "threads",    "activate",  "mechanism", "epsilon", "delta", "candidates", NULL};
static const char *const TEXT_FIELDS[] = {"dim", "bigrams", "cross_prompt", "length", NULL};

static int parse_text(const json_t *t, lp_feat_spec *spec, char *msg, size_t msglen)
{
    if (!json_is_object(t))
        return lp_fail(LP_EWRONG_TYPE, msg, msglen, "\"text\" must be an object");
    int rc = check_fields(t, TEXT_FIELDS, " in \"text\"", msg, msglen);
    double dim;
    int present;
    num_field f = {"dim", 1, LP_FEAT_HASH_MAX, 0, 1, 0};
    if (rc == LP_OK && (rc = get_number(t, &f, &dim, &present, msg, msglen)) == LP_OK && present)
        spec->hash_dim = (uint32_t)dim;
    if (rc == LP_OK)
        rc = get_bool(t, "bigrams", &spec->bigrams, msg, msglen);
    if (rc == LP_OK)
        rc = get_bool(t, "cross_prompt", &spec->cross_prompt, msg, msglen);
    if (rc == LP_OK)
        rc = get_bool(t, "length", &spec->length, msg, msglen);
    return rc;
}

static int parse_string_choice(const json_t *obj, const char *name, const char **out, char *msg,
                               size_t msglen)
{
    const json_t *v = json_object_get(obj, name);
    if (v == NULL)
        return LP_OK;
    if (!json_is_string(v))
        return lp_fail(LP_EWRONG_TYPE, msg, msglen, "\"%s\" must be a string", name);
    *out = json_string_value(v);
    return LP_OK;
}

/* mechanism, epsilon, delta and candidates of a private release of campaign
 * c (central 0 when no campaign or a local one was named), checked against
 * what the campaign's releases have spent (before any work). */
static int parse_release(lp_store *s, const json_t *obj, lp_train_request *r, const lp_campaign *c,
                         char *msg, size_t msglen)
{
    const char *mech = NULL, *cand = NULL;
    int rc;
    /* null is absent: the normalized request (lp_train_request_json) names
     * every field, and a client may send it back */
    if ((!json_is_null(json_object_get(obj, "mechanism")) &&
         (rc = parse_string_choice(obj, "mechanism", &mech, msg, msglen)) != LP_OK) ||
        (!json_is_null(json_object_get(obj, "candidates")) &&
         (rc = parse_string_choice(obj, "candidates", &cand, msg, msglen)) != LP_OK))
        return rc;
    int has_eps = json_object_get(obj, "epsilon") != NULL,
        has_delta =
            json_object_get(obj, "delta") != NULL && !json_is_null(json_object_get(obj, "delta"));
    if (mech == NULL) {
        if (c->central)
            return lp_fail(LP_ECENTRAL_NEEDS_MECHANISM, msg, msglen,
                           "campaign \"%s\" is central: its labels are true answers, and a model "
                           "leaves it only through a private release (\"mechanism\": "
                           "\"exponential\" or \"aup\", with \"epsilon\")",
                           c->name);
        if ((has_eps && !json_is_null(json_object_get(obj, "epsilon"))) || has_delta ||
            cand != NULL)
            return lp_fail(LP_EBAD_HYPERPARAMETER, msg, msglen,
                           "\"epsilon\", \"delta\" and \"candidates\" belong to a release: give "
                           "\"mechanism\"");
        return LP_OK;
    }
    if (strcmp(mech, "exponential") != 0 && strcmp(mech, "aup") != 0)
        return lp_fail(LP_EBAD_HYPERPARAMETER, msg, msglen,
                       "\"mechanism\" must be exponential or aup");
    if (!c->central)
        return lp_fail(LP_EMECHANISM_NEEDS_CENTRAL, msg, msglen,
                       "a private release trains on one central campaign: name it in "
                       "\"campaign\"");
    if (r->general)
        return lp_fail(LP_EBAD_HYPERPARAMETER, msg, msglen,
                       "\"method\": \"general\" has no private release");
    int aup = strcmp(mech, "aup") == 0;
    const json_t *e = json_object_get(obj, "epsilon"), *d = json_object_get(obj, "delta");
    if (!has_eps || !json_is_number(e) || !isfinite(json_number_value(e)) ||
        !(json_number_value(e) > 0))
        return lp_fail(LP_EBAD_EPSILON, msg, msglen,
                       "a release needs \"epsilon\": a finite number > 0 (no release is "
                       "private at infinity)");
    double delta = 0;
    if (has_delta &&
        (!json_is_number(d) || !(json_number_value(d) >= 0) || !(json_number_value(d) < 1)))
        return lp_fail(LP_EBAD_HYPERPARAMETER, msg, msglen, "\"delta\" must be in [0, 1)");
    if (has_delta)
        delta = json_number_value(d);
    if (aup && !(delta > 0))
        return lp_fail(LP_EBAD_HYPERPARAMETER, msg, msglen,
                       "\"mechanism\": \"aup\" is (epsilon, delta)-DP: give \"delta\" in (0, 1)");
    if (!aup && delta != 0)
        return lp_fail(LP_EBAD_HYPERPARAMETER, msg, msglen,
                       "\"mechanism\": \"exponential\" is pure DP: \"delta\" must be 0 or "
                       "absent");
    if (cand != NULL && (aup || strlen(cand) >= sizeof r->candidates))
        return lp_fail(LP_EBAD_HYPERPARAMETER, msg, msglen,
                       "\"candidates\" (the exponential mechanism's set) must be shorter than %zu "
                       "characters",
                       sizeof r->candidates);
    snprintf(r->mechanism, sizeof r->mechanism, "%s", mech);
    snprintf(r->candidates, sizeof r->candidates, "%s", cand ? cand : "");
    r->release_epsilon = json_number_value(e);
    r->release_delta = delta;
    double spent_eps = 0, spent_delta = 0;
    if ((rc = lp_store_release_spent(s, c->id, &spent_eps, &spent_delta)) != LP_OK)
        return lp_fail(rc, msg, msglen, "cannot read the release budget");
    rc = lp_budget_check(c->release_epsilon, c->release_delta, spent_eps, spent_delta,
                         r->release_epsilon, r->release_delta);
    if (rc != LP_OK)
        return lp_fail(rc, msg, msglen,
                       "campaign \"%s\": a release of epsilon %g, delta %g does not fit the budget "
                       "(epsilon %g of %g spent, delta %g of %g spent)",
                       c->name, r->release_epsilon, r->release_delta, spent_eps, c->release_epsilon,
                       spent_delta, c->release_delta);
    return LP_OK;
}

int lp_train_request_parse(lp_store *s, const json_t *obj, int default_threads, lp_train_request *r,
                           char *msg, size_t msglen)
{
    memset(r, 0, sizeof *r);
    json_t *owned = NULL;
    if (obj == NULL)
        obj = owned = json_object();
    int rc = LP_OK;
    if (!json_is_object(obj)) {
        rc = lp_fail(LP_EWRONG_TYPE, msg, msglen, "the request must be a JSON object");
        goto out;
    }
    if ((rc = check_fields(obj, REQUEST_FIELDS, "", msg, msglen)) != LP_OK)
        goto out;
    lp_campaign central = {.central = 0}; /* the named campaign */
    const char *loss = "square-chipo", *optimizer = NULL, *features = "auto", *method = "reward";
    if ((rc = parse_string_choice(obj, "loss", &loss, msg, msglen)) != LP_OK ||
        (rc = parse_string_choice(obj, "method", &method, msg, msglen)) != LP_OK ||
        (rc = parse_string_choice(obj, "optimizer", &optimizer, msg, msglen)) != LP_OK ||
        (rc = parse_string_choice(obj, "features", &features, msg, msglen)) != LP_OK)
        goto out;
    lp_loss_kind kind;
    if (lp_loss_parse(loss, &kind) != LP_OK) {
        rc = lp_fail(LP_EUNKNOWN_LOSS, msg, msglen,
                     "unknown loss \"%.40s\" (square-chipo, chipo, dpo, rdpo, rr-mle, rr-sgd, ipo, "
                     "rr-sgd-last)",
                     loss);
        goto out;
    }
    lp_loss_spec_init(&r->loss, kind);
    r->general = strcmp(method, "general") == 0;
    if (!r->general && strcmp(method, "reward") != 0) {
        rc = lp_fail(LP_EBAD_HYPERPARAMETER, msg, msglen, "\"method\" must be reward or general");
        goto out;
    }
    if (r->general && kind != LP_LOSS_SQUARE_CHIPO) {
        rc = lp_fail(LP_EBAD_HYPERPARAMETER, msg, msglen,
                     "\"method\": \"general\" runs its own rounds; \"loss\" must be omitted or "
                     "square-chipo");
        goto out;
    }
    lp_method method_opt = lp_loss_fit_method(kind);
    if (optimizer != NULL && lp_method_parse(optimizer, &method_opt) != LP_OK) {
        rc = lp_fail(LP_EBAD_HYPERPARAMETER, msg, msglen,
                     "\"optimizer\" must be lbfgs, sgd, adam or sgd-last");
        goto out;
    }
    lp_fit_opts_init(&r->fit, method_opt);
    r->beta = r->general ? LP_GP_DEFAULT_BETA : 1.0;
    r->threads = default_threads > 0 ? default_threads : 1;
    r->activate = 1;
    lp_feat_spec_init(&r->text);
    if (strcmp(features, "auto") == 0)
        r->features = LP_FEATURES_AUTO;
    else if (strcmp(features, "dense") == 0)
        r->features = LP_FEATURES_DENSE;
    else if (strcmp(features, "text") == 0)
        r->features = LP_FEATURES_TEXT;
    else {
        rc = lp_fail(LP_EBAD_HYPERPARAMETER, msg, msglen,
                     "\"features\" must be auto, dense or text");
        goto out;
    }

    const num_field F_CUTOFF = {"cutoff", 1, 9.2e18, 0, 1, 1},
                    F_SEED = {"seed", 0, 9007199254740992.0, 0, 1, 0},
                    F_BETA = {"beta", 0, HYPER_MAX, 1, 0, 0},
                    F_RMAX = {"rmax", 0, HYPER_MAX, 1, 0, 0},
                    F_TAU = {"tau", 0, HYPER_MAX, 1, 0, 0}, F_L2 = {"l2", 0, L2_MAX, 0, 0, 0},
                    F_BOUND = {"norm_bound", 0, BOUND_MAX, 1, 0, 1},
                    F_ITER = {"max_iter", 1, 100000, 0, 1, 0},
                    F_EPOCHS = {"epochs", 1, 1000, 0, 1, 0}, F_LR = {"lr", 0, 1e3, 1, 0, 0},
                    F_BATCH = {"batch", 1, 1000000, 0, 1, 0},
                    F_THREADS = {"threads", 1, 64, 0, 1, 0};
    const json_t *l2 = json_object_get(obj, "l2");
    r->l2_auto = l2 == NULL || json_is_string(l2); /* the default */
    if (l2 != NULL && json_is_string(l2) && strcmp(json_string_value(l2), "auto") != 0) {
        rc = lp_fail(LP_EWRONG_TYPE, msg, msglen, "\"l2\" must be \"auto\" or a number in [0, %g]",
                     L2_MAX);
        goto out;
    }
    struct {
        const num_field *f;
        double *dst;
    } nums[] = {{&F_BETA, &r->beta},
                {&F_RMAX, &r->loss.rmax},
                {&F_TAU, &r->loss.tau},
                {r->l2_auto ? NULL : &F_L2, &r->l2},
                {&F_BOUND, &r->fit.norm_bound},
                {&F_LR, &r->fit.lr}};
    for (size_t k = 0; k < sizeof nums / sizeof nums[0]; k++) {
        int present;
        if (nums[k].f != NULL &&
            (rc = get_number(obj, nums[k].f, nums[k].dst, &present, msg, msglen)) != LP_OK)
            goto out;
    }
    struct {
        const num_field *f;
        double value;
    } ints[] = {{&F_CUTOFF, 0},
                {&F_SEED, 0},
                {&F_ITER, r->fit.max_iter},
                {&F_EPOCHS, r->fit.epochs},
                {&F_BATCH, r->fit.batch},
                {&F_THREADS, r->threads}};
    for (size_t k = 0; k < sizeof ints / sizeof ints[0]; k++) {
        int present;
        if ((rc = get_number(obj, ints[k].f, &ints[k].value, &present, msg, msglen)) != LP_OK)
            goto out;
    }
    r->cutoff = isinf(ints[0].value) ? 0 : (int64_t)ints[0].value;
    r->fit.seed = (uint64_t)ints[1].value;
    r->fit.max_iter = (int)ints[2].value;
    r->fit.epochs = (int)ints[3].value;
    r->fit.batch = (int)ints[4].value;
    r->threads = (int)ints[5].value;
    if ((rc = get_bool(obj, "activate", &r->activate, msg, msglen)) != LP_OK)
        goto out;
    const json_t *text = json_object_get(obj, "text");
    if (text != NULL && (rc = parse_text(text, &r->text, msg, msglen)) != LP_OK)
        goto out;
    const json_t *camp = json_object_get(obj, "campaign");
    if (camp != NULL && !json_is_null(camp)) {
        if (!json_is_string(camp)) {
            rc = lp_fail(LP_EWRONG_TYPE, msg, msglen, "\"campaign\" must be a string or null");
            goto out;
        }
        lp_campaign c;
        if ((rc = lp_store_campaign_by_name(s, json_string_value(camp), &c)) != LP_OK) {
            lp_fail(rc, msg, msglen, "no campaign \"%.64s\"", json_string_value(camp));
            goto out;
        }
        r->campaign = c.id;
        snprintf(r->campaign_name, sizeof r->campaign_name, "%s", c.name);
        central = c;
    }
    rc = parse_release(s, obj, r, &central, msg, msglen);
out:
    json_decref(owned);
    return rc;
}

static json_t *num_or_null(double v)
{
    return isfinite(v) ? json_real(v) : json_null();
}

json_t *lp_train_request_json(const lp_train_request *r)
{
    const char *features = r->features == LP_FEATURES_DENSE  ? "dense"
                           : r->features == LP_FEATURES_TEXT ? "text"
                                                             : "auto";
    json_t *o = json_pack(
        "{s:s, s:s, s:o, s:o, s:I, s:f, s:f, s:f, s:o, s:o, s:s, s:i, s:i, s:f, s:i, "
        "s:s, s:{s:I, s:b, s:b, s:b}, s:i, s:b}",
        "method", r->general ? "general" : "reward", "loss", lp_loss_name(r->loss.kind), "campaign",
        r->campaign ? json_string(r->campaign_name) : json_null(), "cutoff",
        r->cutoff ? json_integer(r->cutoff) : json_null(), "seed", (json_int_t)r->fit.seed, "beta",
        r->beta, "rmax", r->loss.rmax, "tau", r->loss.tau, "l2",
        r->l2_auto ? json_string("auto") : json_real(r->l2), "norm_bound",
        num_or_null(r->fit.norm_bound), "optimizer", lp_method_name(r->fit.method), "max_iter",
        r->fit.max_iter, "epochs", r->fit.epochs, "lr", r->fit.lr, "batch", r->fit.batch,
        "features", features, "text", "dim", (json_int_t)r->text.hash_dim, "bigrams",
        r->text.bigrams, "cross_prompt", r->text.cross_prompt, "length", r->text.length, "threads",
        r->threads, "activate", r->activate);
    if (o != NULL && r->mechanism[0] != '\0') /* a release: its fields too */
        json_object_update_new(
            o, json_pack("{s:s, s:f, s:f, s:o}", "mechanism", r->mechanism, "epsilon",
                         r->release_epsilon, "delta", r->release_delta, "candidates",
                         r->candidates[0] ? json_string(r->candidates) : json_null()));
    return o;
}
