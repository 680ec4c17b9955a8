/* annotator_client.c — annotator handles in tests. See annotator_client.h. */
#include "annotator_client.h"

#include "check.h"
#include "operator_client.h"

#include <stdio.h>
#include <stdlib.h>
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

ldpref_client *annotator_enrolled(const server_proc *s, ldpref_client *op, const char *campaign,
                                  const char *name, double cap_label, double cap_total)
{
    char *json = NULL, key[512], file[128];
    CHECK_INT(ldpref_admin_enrollment_tokens(op, campaign, 1, &json), LDPREF_OK);
    char *token = json ? first_enrollment_token(json) : NULL;
    snprintf(file, sizeof file, "%s.key", name);
    CHECK_INT(annotator_key_ensure(s->dir, file, key, sizeof key), LDPREF_OK);
    ldpref_options o;
    annotator_options_init(&o, s->url, key, cap_label, cap_total);
    ldpref_client *c = NULL;
    CHECK_INT(ldpref_client_open(&o, &c), LDPREF_OK);
    int rc = c != NULL && token != NULL ? ldpref_enroll(c, token, NULL) : LDPREF_EINVALID_ARGUMENT;
    CHECK_INT(rc, LDPREF_OK);
    free(token);
    ldpref_free(json);
    if (rc != LDPREF_OK) {
        ldpref_client_close(c);
        return NULL;
    }
    return c;
}
