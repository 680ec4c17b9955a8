/* adversary.c — names of the corruption strategies. See adversary.h. */
#include "adversary.h"

#include "error.h"

#include <string.h>

static const char *const adv_names[LP_ADV_COUNT] = {"flip",      "anti",      "backdoor",
                                                    "constant0", "constant1", "random"};

const char *lp_adversary_name(lp_adversary a)
{
    return (unsigned)a < LP_ADV_COUNT ? adv_names[a] : NULL;
}

int lp_adversary_parse(const char *name, lp_adversary *out)
{
    for (int k = 0; k < LP_ADV_COUNT; k++)
        if (strcmp(name, adv_names[k]) == 0) {
            *out = (lp_adversary)k;
            return LP_OK;
        }
    return LP_EINVALID_ARGUMENT;
}
