/* operator_client.c — the operator's handle. See operator_client.h. */
#include "operator_client.h"

#include "check.h"
#include "error.h"

#include <jansson.h>
#include <stdlib.h>
#include <string.h>

ldpref_client *operator_client_open(const server_proc *s)
{
    ldpref_options o;
    ldpref_options_init(&o);
    o.server_url = s->url;
    o.operator_token = s->token;
    ldpref_client *c = NULL;
    CHECK_ERR(ldpref_client_open(&o, &c), LP_OK);
    return c;
}

char *first_enrollment_token(const char *json_text)
{
    json_t *j = json_text ? json_loads(json_text, 0, NULL) : NULL;
    const char *t = json_string_value(json_array_get(json_object_get(j, "tokens"), 0));
    char *copy = t ? strdup(t) : NULL;
    json_decref(j);
    return copy;
}
