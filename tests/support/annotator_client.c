/* annotator_client.c — annotator handles in tests. See annotator_client.h. */
#include "annotator_client.h"

#include <stdio.h>
#include <unistd.h>

int annotator_key_ensure(const char *dir, const char *name, char *key, size_t keylen)
{
    int n = snprintf(key, keylen, "%s/%s", dir, name);
    if (n < 0 || (size_t)n >= keylen)
        return LDPREF_EINVALID_ARGUMENT;
    return access(key, F_OK) == 0 ? LDPREF_OK : ldpref_keygen(key, NULL);
}

void annotator_options_init(ldpref_options *o, const char *url, const char *key, double cap_label,
                            double cap_total)
{
    ldpref_options_init(o);
    o->server_url = url;
    o->key_path = key;
    o->max_epsilon_per_label = cap_label;
    o->max_epsilon_total = cap_total;
}
