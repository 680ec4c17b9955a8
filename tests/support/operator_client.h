/*
 * operator_client.h — the operator's client handle in end-to-end tests:
 * the real client library, pointed at a server started with server_proc.
 */
#ifndef LP_OPERATOR_CLIENT_H
#define LP_OPERATOR_CLIENT_H

#include "ldpref.h"
#include "server_proc.h"

/* A handle with s's URL and first operator token (checked: a failure to
 * open counts as a failed check). NULL on failure; close with
 * ldpref_client_close. */
ldpref_client *operator_client_open(const server_proc *s);

/* The first token of an enrollment-token reply ({"tokens": [...]}),
 * malloc'd (the caller frees), or NULL. */
char *first_enrollment_token(const char *json_text);

#endif
