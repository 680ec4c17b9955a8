/*
 * train_request.h — the retrain request on the wire (docs/protocol.md,
 * "POST /v1/retrain"): a JSON object parsed and validated into the
 * learner's lp_train_request, and the normalized request rendered back.
 */
#ifndef LP_TRAIN_REQUEST_H
#define LP_TRAIN_REQUEST_H

#include "retrain.h"
#include "store.h"

#include <jansson.h>
#include <stddef.h>

/* Parses and validates a request object (NULL = {}), filling defaults and
 * resolving the campaign by name. Errors (msg names the field):
 * LP_EUNKNOWN_LOSS, LP_EBAD_HYPERPARAMETER, LP_EWRONG_TYPE,
 * LP_EUNKNOWN_FIELD, LP_EUNKNOWN_CAMPAIGN. */
int lp_train_request_parse(lp_store *s, const json_t *obj, int default_threads,
                           lp_train_request *out, char *msg, size_t msglen);
/* The normalized request as JSON (every field explicit; the release fields
 * only for a release); new reference, or NULL when out of memory. */
json_t *lp_train_request_json(const lp_train_request *r);

#endif
