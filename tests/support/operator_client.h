/*
 * operator_client.h — the operator's client handle in end-to-end tests:
 * the real client library, pointed at a server started with server_proc.
 */
#ifndef LP_OPERATOR_CLIENT_H
#define LP_OPERATOR_CLIENT_H

#include "ldpref.h"
#include "server_proc.h"

#include <jansson.h>
#include <stdint.h>

/* A handle with s's URL and first operator token (checked: a failure to
 * open counts as a failed check). NULL on failure; close with
 * ldpref_client_close. */
ldpref_client *operator_client_open(const server_proc *s);

/* A request to s with its first operator token (raw HTTP, body sent as
 * given, may be NULL): the answer parsed (new reference; NULL when empty or
 * not JSON); *status gets the HTTP status (0 if the request failed). */
json_t *operator_call(const server_proc *s, const char *method, const char *path, const char *body,
                      long *status);

/* Polls GET /v1/retrain?run=RUN until the run is succeeded, failed or
 * cancelled: its final object (new reference), or NULL and a failed check
 * after timeout_s seconds. */
json_t *operator_run_wait(const server_proc *s, int64_t run, int timeout_s);

/* Creates a central campaign name with the release budget release_epsilon
 * through libldpref (checked). */
void operator_central_campaign(ldpref_client *op, const char *name, double release_epsilon);

/* The first token of an enrollment-token reply ({"tokens": [...]}),
 * malloc'd (the caller frees), or NULL. */
char *first_enrollment_token(const char *json_text);

#endif
