/* operator_client.c — the operator's handle. See operator_client.h. */
#include "operator_client.h"

#include "check.h"
#include "error.h"
#include "http_raw.h"

#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

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

json_t *operator_call(const server_proc *s, const char *method, const char *path, const char *body,
                      long *status)
{
    char url[1024];
    snprintf(url, sizeof url, "%s%s", s->url, path);
    http_reply r;
    http_raw(method, url, body, body ? strlen(body) : 0, s->token, &r);
    *status = r.status;
    json_t *j = r.body ? json_loads(r.body, 0, NULL) : NULL;
    http_reply_free(&r);
    return j;
}

static int run_final(const json_t *run)
{
    const char *st = json_string_value(json_object_get(run, "status"));
    return st && (!strcmp(st, "succeeded") || !strcmp(st, "failed") || !strcmp(st, "cancelled"));
}

json_t *operator_run_wait(const server_proc *s, int64_t run, int timeout_s)
{
    char path[64];
    snprintf(path, sizeof path, "/v1/retrain?run=%lld", (long long)run);
    for (long i = 0; i < (long)timeout_s * 100; i++) {
        long st;
        json_t *j = operator_call(s, "GET", path, NULL, &st);
        if (j && run_final(j))
            return j;
        json_decref(j);
        usleep(10000);
    }
    check_record(0, __FILE__, __LINE__, "run %lld did not finish in %d s", (long long)run,
                 timeout_s);
    return NULL;
}

void operator_central_campaign(ldpref_client *op, const char *name, double release_epsilon)
{
    ldpref_campaign spec;
    ldpref_campaign_init(&spec);
    spec.name = name;
    spec.allow_infinite = 1;
    spec.epsilon_default = INFINITY; /* true answers */
    char extra[128];
    snprintf(extra, sizeof extra, "{\"trust\":\"central\",\"release_epsilon\":%.17g}",
             release_epsilon);
    CHECK_ERR(ldpref_admin_campaign_create_with(op, &spec, extra, NULL), LDPREF_OK);
}
