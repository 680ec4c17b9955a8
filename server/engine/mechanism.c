/* mechanism.c — the release dispatcher. See mechanism.h. */
#include "mechanism.h"

#include "aup.h"
#include "error.h"
#include "expmech.h"
#include "rr.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

static const char *const mech_names[] = {"none", "exponential", "aup"};

const char *lp_mechanism_name(lp_mechanism m)
{
    if ((unsigned)m >= sizeof mech_names / sizeof mech_names[0])
        return NULL;
    return mech_names[m];
}

int lp_mechanism_parse(const char *name, lp_mechanism *out)
{
    for (size_t i = 0; name != NULL && i < sizeof mech_names / sizeof mech_names[0]; i++)
        if (strcmp(name, mech_names[i]) == 0) {
            *out = (lp_mechanism)i;
            return LP_OK;
        }
    return LP_EINVALID_ARGUMENT;
}

void lp_release_opts_init(lp_release_opts *o, lp_mechanism mechanism, double epsilon)
{
    memset(o, 0, sizeof *o);
    o->mechanism = mechanism;
    o->epsilon = epsilon;
    o->beta = 1.0;
    o->rmax = 1.0;
    o->radius = 1.0;
    o->rand64 = lp_csprng_next64;
}

int lp_release_fit(const lp_dataset *ds, const int64_t *user, const lp_release_opts *o,
                   lp_model **out, char *msg, size_t msglen)
{
    *out = NULL;
    if (!isfinite(o->epsilon) || o->epsilon <= 0.0) {
        snprintf(msg, msglen,
                 "a release needs a finite epsilon > 0 (got %g): epsilon = inf is no privacy",
                 o->epsilon);
        return LP_EINVALID_ARGUMENT;
    }
    if (o->rand64 == NULL) {
        snprintf(msg, msglen, "a release needs a random source");
        return LP_EINVALID_ARGUMENT;
    }
    if (o->rand64 == lp_csprng_next64 && lp_rng_init() != LP_OK) {
        snprintf(msg, msglen, "the OS random source is unavailable");
        return LP_ERNG;
    }
    switch (o->mechanism) {
    case LP_MECH_EXPONENTIAL:
        return lp_expmech_release(ds, user, o, out, msg, msglen);
    case LP_MECH_AUP:
        return lp_aup_release_from(ds, user, o, out, msg, msglen);
    default:
        snprintf(msg, msglen, "a release needs a mechanism (\"exponential\" or \"aup\")");
        return LP_EINVALID_ARGUMENT;
    }
}
