/*
 * error.h — the one error table of ldpref.
 *
 * Every failure that crosses a module, process or network boundary is one of
 * these codes. Codes are positive, 0 is success, and a number is never reused
 * or renumbered: the same numbers are published in client/lib/ldpref.h (checked at
 * compile time) and the names travel on the wire as {"error": "<name>"}.
 *
 * Columns: number, enum suffix, wire name, HTTP status, message.
 */
#ifndef LP_ERROR_H
#define LP_ERROR_H

#define LP_ERROR_MAP(X)                                                                            \
    X(0, OK, "ok", 200, "success")                                                                 \
    X(1, INVALID_ARGUMENT, "invalid_argument", 400, "invalid argument")                            \
    X(2, NO_MEMORY, "no_memory", 500, "out of memory")                                             \
    X(3, IO, "io_error", 500, "input/output error")                                                \
    X(4, RNG, "rng_failure", 500, "the system random number generator failed")                     \
    X(5, MALFORMED_JSON, "malformed_json", 400, "the request body is not valid JSON")              \
    X(6, WRONG_TYPE, "wrong_type", 400, "a field has the wrong type or value")                     \
    X(7, MISSING_FIELD, "missing_field", 400, "a required field is missing")                       \
    X(8, UNKNOWN_FIELD, "unknown_field", 400, "the request has a field that is not allowed")       \
    X(9, BODY_TOO_LARGE, "body_too_large", 413, "the request body exceeds the size limit")         \
    X(10, TOO_DEEP, "json_too_deep", 400, "the JSON nesting exceeds the depth limit")              \
    X(11, TOO_LONG, "field_too_long", 400, "a field exceeds its length limit")                     \
    X(12, BAD_EPSILON, "bad_epsilon", 400,                                                         \
      "epsilon must be a finite number > 0 (or null for an allowed infinity)")                     \
    X(13, EPSILON_OUT_OF_RANGE, "epsilon_out_of_range", 422,                                       \
      "epsilon is outside the campaign's range")                                                   \
    X(14, BAD_LABEL, "bad_label", 400, "the label must be 0 or 1")                                 \
    X(15, BAD_SIGNATURE, "bad_signature", 401, "the signature does not verify")                    \
    X(16, UNKNOWN_KEY, "unknown_key", 401, "the key is not enrolled")                              \
    X(17, REVOKED_KEY, "revoked_key", 403, "the key has been revoked")                             \
    X(18, REPLAYED_NONCE, "replayed_nonce", 409, "the nonce was already used")                     \
    X(19, STALE_TIMESTAMP, "stale_timestamp", 400, "the timestamp is outside the accepted window") \
    X(20, UNKNOWN_TASK, "unknown_task", 404, "no such task")                                       \
    X(21, NOT_ASSIGNED, "task_not_assigned", 409, "the task was not assigned to this annotator")   \
    X(22, CONFLICTING_LABEL, "conflicting_label", 409,                                             \
      "a different label for this task was already accepted")                                      \
    X(23, BUDGET_EXCEEDED, "budget_exceeded", 403,                                                 \
      "the annotator's privacy budget for the campaign is spent")                                  \
    X(24, LOCAL_BUDGET_EXCEEDED, "local_budget_exceeded", 403,                                     \
      "the label would exceed the annotator's own privacy budget")                                 \
    X(25, UNAUTHORIZED, "unauthorized", 401, "a valid operator token is required")                 \
    X(26, BAD_ENROLLMENT_TOKEN, "bad_enrollment_token", 403,                                       \
      "the enrollment token is unknown or already used")                                           \
    X(27, ALREADY_ENROLLED, "already_enrolled", 409, "the key is already enrolled")                \
    X(28, NOT_FOUND, "not_found", 404, "no such resource")                                         \
    X(29, METHOD_NOT_ALLOWED, "method_not_allowed", 405, "method not allowed on this resource")    \
    X(30, NO_TASK, "no_task_available", 404, "no task is available for this annotator")            \
    X(31, BATCH_TOO_LARGE, "batch_too_large", 413, "the batch has too many items")                 \
    X(32, UNKNOWN_CAMPAIGN, "unknown_campaign", 404, "no such campaign")                           \
    X(33, CAMPAIGN_EXISTS, "campaign_exists", 409, "a campaign with this name exists")             \
    X(34, BAD_TASK, "bad_task", 400, "a task record is malformed")                                 \
    X(35, NETWORK, "network_error", 502, "could not reach the server")                             \
    X(36, PROTOCOL, "protocol_error", 502, "the server's answer could not be understood")          \
    X(37, KEY_FILE, "key_file", 400, "the key file is missing, malformed or not private")          \
    X(38, STORAGE, "storage_error", 500, "the database failed")                                    \
    X(39, UNAVAILABLE, "unavailable", 503, "the server is shutting down")                          \
    X(40, INTERNAL, "internal", 500, "internal error")                                             \
    X(41, NOT_ENROLLED, "not_enrolled", 400, "this client has not enrolled its key")               \
    X(42, BAD_REQUEST, "bad_request", 400, "the request is malformed")                             \
    X(43, UNKNOWN_LOSS, "unknown_loss", 400, "no such loss")                                       \
    X(44, BAD_HYPERPARAMETER, "bad_hyperparameter", 400, "a hyper-parameter is out of range")      \
    X(45, UNKNOWN_MODEL, "unknown_model", 404, "no such model version")                            \
    X(46, UNKNOWN_RUN, "unknown_run", 404, "no such training run")                                 \
    X(47, NO_ACTIVE_MODEL, "no_active_model", 409, "no model is being served yet")                 \
    X(48, RETRAIN_IN_PROGRESS, "retrain_in_progress", 409,                                         \
      "a training run is already in progress")                                                     \
    X(49, RUN_FINISHED, "run_finished", 409, "the training run has already finished")              \
    X(50, DIMENSION_MISMATCH, "feature_dimension_mismatch", 422,                                   \
      "the features do not have the model's dimension")                                            \
    X(51, TOO_MANY_CANDIDATES, "too_many_candidates", 413, "too many candidates or tasks")         \
    X(52, EMPTY_TEXT, "empty_text", 422, "a candidate's text is empty")                            \
    X(53, BAD_CORRUPTION, "bad_corruption", 400, "the corruption settings are invalid")            \
    X(54, NO_LABELS, "no_labels", 422, "there are no labels to train on")                          \
    X(55, CANCELLED, "cancelled", 409, "the operation was cancelled")                              \
    X(56, FEATURES_REQUIRED, "features_required", 422,                                             \
      "the model needs dense features for every candidate")                                        \
    X(57, TRAINING_FAILED, "training_failed", 500, "training failed")                              \
    X(58, CAMPAIGN_COMPLETE, "campaign_complete", 404,                                             \
      "every task of the campaign has its labels")                                                 \
    X(59, QUOTA_REACHED, "quota_reached", 403,                                                     \
      "the annotator has reached the campaign's per-annotator quota")                              \
    X(60, ALREADY_ANSWERED, "already_answered", 409,                                               \
      "this task was already answered on this device; a randomized answer can never be changed "   \
      "or repeated")                                                                               \
    X(61, CSRF_FAILED, "csrf_failed", 403, "the request lacks the console session's CSRF token")   \
    X(62, CROSS_SITE, "cross_site_request", 403, "cross-site requests are refused")                \
    X(63, BAD_GOLD, "bad_gold", 400,                                                               \
      "a task's gold answer must be \"a\" or \"b\" (0 or 1; \"chosen\" or \"rejected\")")          \
    X(65, BAD_BUCKET, "bad_bucket", 400,                                                           \
      "bucket_s must be a whole number of minutes in seconds, from 60 to 2592000")                 \
    X(66, BAD_PAGE, "bad_page", 400, "offset must be an integer >= 0 and limit one in 1..1000")    \
    X(67, INSUFFICIENT_SCOPE, "insufficient_scope", 403,                                           \
      "the credential lacks the scope this endpoint needs")                                        \
    X(68, RATE_LIMITED, "rate_limited", 429,                                                       \
      "too many requests; retry after the number of seconds in Retry-After")                       \
    X(69, BUSY, "server_busy", 503,                                                                \
      "the server is at its limit for requests in progress; retry after the number of seconds "    \
      "in Retry-After")                                                                            \
    X(70, STORAGE_UNHEALTHY, "storage_unhealthy", 503,                                             \
      "the database cannot take writes safely now; nothing was stored")                            \
    X(71, LAST_ADMIN_TOKEN, "last_admin_token", 409,                                               \
      "this is the last live operator token with the admin scope; create another first")           \
    X(72, UNKNOWN_TOKEN, "unknown_token", 404, "no live operator token has this id")               \
    X(75, MODEL_NOT_PUBLIC, "model_not_public", 403,                                               \
      "this model was trained on labels that were not all privatized; scoring with it needs a "    \
      "token with the score scope")                                                                \
    X(76, MODEL_NOT_ACTIVE, "model_not_active", 403,                                               \
      "this version is not the served model; scoring with it needs a token with the admin scope")  \
    X(79, RESPONSE_TOO_LARGE, "response_too_large", 502,                                           \
      "the server's answer is larger than what was asked for can need; nothing of it was used")    \
    X(80, RESPONSE_TOO_COMPLEX, "response_too_complex", 502,                                       \
      "the server's answer nests deeper or holds more JSON values than what was asked for can "    \
      "need; nothing of it was used")                                                              \
    X(81, CERTIFICATE_UNTRUSTED, "certificate_untrusted", 502,                                     \
      "the server's TLS certificate is not trusted or does not name the server (give its CA "      \
      "with --ca-file or LDPREF_CA_FILE)")                                                         \
    X(82, TLS_FAILED, "tls_failed", 502,                                                           \
      "the TLS handshake with the server failed (is it an https:// URL for a plain HTTP "          \
      "server?)")                                                                                  \
    X(89, CENTRAL_NEEDS_MECHANISM, "central_needs_mechanism", 409,                                 \
      "a central campaign's models are released only through a differentially private "            \
      "mechanism: give mechanism and epsilon (and delta for aup)")                                 \
    X(90, RELEASE_BUDGET_EXHAUSTED, "release_budget_exhausted", 409,                               \
      "this release would spend more than the campaign's remaining model-release budget")          \
    X(91, CENTRAL_LABELS_PRIVATE, "central_labels_private", 403,                                   \
      "a central campaign's labels are the annotators' true answers: they are never exported or "  \
      "served, only models released by a private mechanism")                                       \
    X(92, BAD_CAMPAIGN_SETTINGS, "bad_campaign_settings", 400,                                     \
      "the campaign's trust, release budget, contribution cap and epsilon settings do not fit "    \
      "together")                                                                                  \
    X(93, MECHANISM_NEEDS_CENTRAL, "mechanism_needs_central", 400,                                 \
      "a private release (mechanism) trains on one central campaign: name it in campaign")         \
    X(95, NO_CONFIDENCE, "no_confidence", 409,                                                     \
      "the model has no confidence record, so it cannot give pessimistic scores (retrain it)")

/* Codes as an enum: LP_OK, LP_EINVALID_ARGUMENT, ... */
typedef enum lp_error {
#define LP_ERROR_ENUM(num, sym, name, status, msg) LP_E##sym = num,
    LP_ERROR_MAP(LP_ERROR_ENUM)
#undef LP_ERROR_ENUM
        LP_ERROR_COUNT
} lp_error;
#define LP_OK LP_EOK

/* The wire name ("bad_signature"); "unknown_error" for a code not in the table. */
const char *lp_error_name(int code);
/* A one-line human message. Never NULL. */
const char *lp_error_message(int code);
/* The HTTP status a server answers this code with (500 if unknown). */
int lp_error_http_status(int code);
/* The code for a wire name, or -1 if the name is unknown. */
int lp_error_from_name(const char *name);

#endif
