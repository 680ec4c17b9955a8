/* corrupt.c — the deterministic LTC corruption view. See corrupt.h. */
#include "corrupt.h"

#include "prng.h"

#include <assert.h>

/* splitmix64's output function: a bijective mix of the label id. */
static uint64_t mix64(uint64_t x)
{
    x += 0x9e3779b97f4a7c15ULL;
    x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
    x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
    return x ^ (x >> 31);
}

int lp_corrupt_strategy_valid(lp_adversary a)
{
    return (unsigned)a < LP_ADV_COUNT;
}

int lp_corrupt_view(const lp_corruption *c, const lp_corrupt_input *in, int *changed)
{
    int z = in->z;
    if (c != NULL && c->id != 0 && c->alpha > 0.0) {
        lp_prng g;
        lp_prng_seed(&g, c->seed ^ mix64((uint64_t)in->label_id));
        int huber = lp_prng_bernoulli(&g, c->alpha);
        int coin = lp_prng_bernoulli(&g, 0.5);
        if (huber) {
            switch (c->strategy) {
            case LP_ADV_FLIP:
                z = 1 - in->z;
                break;
            case LP_ADV_CONSTANT0:
                z = 0;
                break;
            case LP_ADV_CONSTANT1:
                z = 1;
                break;
            case LP_ADV_RANDOM:
                z = coin;
                break;
            case LP_ADV_ANTI:
                if (in->has_reference) {
                    assert(in->reference == 0 || in->reference == 1);
                    z = 1 - in->reference;
                } else
                    z = in->model_margin > 0.0 ? 0 : 1;
                break;
            case LP_ADV_BACKDOOR:
                if (in->feature1 != in->feature0)
                    z = in->feature1 > in->feature0;
                break;
            default:
                break;
            }
        }
    }
    if (changed != NULL)
        *changed = z != in->z;
    return z;
}
