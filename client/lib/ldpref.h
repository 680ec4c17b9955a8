/*
 * ldpref.h — libldpref, the annotator's device side of ldpref. This is the
 * whole public contract of the library and its only installed header.
 *
 * An annotator's true preference never leaves the device: ldpref_answer()
 * applies randomized response (RR) with a per-label epsilon to the true
 * answer, signs the privatized label with the annotator's Ed25519 key and
 * submits it. A local ledger (an SQLite file, mode 0600) remembers
 *   - the randomized answer for each comparison, keyed by a keyed hash of its
 *     normalized content, with a local sketch of it, so re-asking the same
 *     comparison (under another task id, in either A/B order, with other
 *     spacing or invisible characters, or a near-duplicate of it) always
 *     gets the same randomized answer and spends nothing new; the same task
 *     id is never answered twice (LDPREF_EALREADY_ANSWERED);
 *   - the epsilon spent, so the annotator's own caps are never exceeded;
 *   - every signed message before it is sent (the outbox), so a resend is
 *     byte-identical and the server returns the original receipt.
 * What the guarantee covers and does not: see docs/client.md.
 *
 * Conventions (SQLite/curl style):
 *   - every function returns an int error code: LDPREF_OK (0) or one of the
 *     positive LDPREF_E* codes below, whose numbers never change;
 *   - ldpref_errmsg() gives details of the last failure on a handle;
 *   - every function that allocates names the function that frees it; all
 *     free functions accept NULL;
 *   - a handle must not be used by two threads at once (use one per thread).
 */
#ifndef LDPREF_H
#define LDPREF_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#ifdef __cplusplus
extern "C" {
#endif

#if defined(__GNUC__)
#define LDPREF_WUR __attribute__((warn_unused_result))
#else
#define LDPREF_WUR
#endif

/* Error codes. The numbers are those of the wire error table and are
 * checked at compile time against it; a number is never reused. */
typedef enum ldpref_error {
    LDPREF_OK = 0,
    LDPREF_EINVALID_ARGUMENT = 1,
    LDPREF_ENO_MEMORY = 2,
    LDPREF_EIO = 3,
    LDPREF_ERNG = 4,
    LDPREF_EMALFORMED_JSON = 5,
    LDPREF_EWRONG_TYPE = 6,
    LDPREF_EMISSING_FIELD = 7,
    LDPREF_EUNKNOWN_FIELD = 8,
    LDPREF_EBODY_TOO_LARGE = 9,
    LDPREF_ETOO_DEEP = 10,
    LDPREF_ETOO_LONG = 11,
    LDPREF_EBAD_EPSILON = 12,
    LDPREF_EEPSILON_OUT_OF_RANGE = 13,
    LDPREF_EBAD_LABEL = 14,
    LDPREF_EBAD_SIGNATURE = 15,
    LDPREF_EUNKNOWN_KEY = 16,
    LDPREF_EREVOKED_KEY = 17,
    LDPREF_EREPLAYED_NONCE = 18,
    LDPREF_ESTALE_TIMESTAMP = 19,
    LDPREF_EUNKNOWN_TASK = 20,
    LDPREF_ENOT_ASSIGNED = 21,
    LDPREF_ECONFLICTING_LABEL = 22,
    LDPREF_EBUDGET_EXCEEDED = 23,
    LDPREF_ELOCAL_BUDGET_EXCEEDED = 24,
    LDPREF_EUNAUTHORIZED = 25,
    LDPREF_EBAD_ENROLLMENT_TOKEN = 26,
    LDPREF_EALREADY_ENROLLED = 27,
    LDPREF_ENOT_FOUND = 28,
    LDPREF_EMETHOD_NOT_ALLOWED = 29,
    LDPREF_ENO_TASK = 30,
    LDPREF_EBATCH_TOO_LARGE = 31,
    LDPREF_EUNKNOWN_CAMPAIGN = 32,
    LDPREF_ECAMPAIGN_EXISTS = 33,
    LDPREF_EBAD_TASK = 34,
    LDPREF_ENETWORK = 35,
    LDPREF_EPROTOCOL = 36,
    LDPREF_EKEY_FILE = 37,
    LDPREF_ESTORAGE = 38,
    LDPREF_EUNAVAILABLE = 39,
    LDPREF_EINTERNAL = 40,
    LDPREF_ENOT_ENROLLED = 41,
    LDPREF_EBAD_REQUEST = 42,
    LDPREF_EUNKNOWN_LOSS = 43,
    LDPREF_EBAD_HYPERPARAMETER = 44,
    LDPREF_EUNKNOWN_MODEL = 45,
    LDPREF_EUNKNOWN_RUN = 46,
    LDPREF_ENO_ACTIVE_MODEL = 47,
    LDPREF_ERETRAIN_IN_PROGRESS = 48,
    LDPREF_ERUN_FINISHED = 49,
    LDPREF_EDIMENSION_MISMATCH = 50,
    LDPREF_ETOO_MANY_CANDIDATES = 51,
    LDPREF_EEMPTY_TEXT = 52,
    LDPREF_EBAD_CORRUPTION = 53,
    LDPREF_ENO_LABELS = 54,
    LDPREF_ECANCELLED = 55,
    LDPREF_EFEATURES_REQUIRED = 56,
    LDPREF_ETRAINING_FAILED = 57,
    LDPREF_ECAMPAIGN_COMPLETE = 58, /* every task of the campaign has all its labels */
    LDPREF_EQUOTA_REACHED = 59,     /* the annotator's per-campaign quota is reached */
    LDPREF_EALREADY_ANSWERED = 60,
    LDPREF_ECSRF_FAILED = 61,
    LDPREF_ECROSS_SITE = 62,
    LDPREF_EBAD_GOLD = 63,
    LDPREF_EBAD_BUCKET = 65,         /* a view's bucket_s is not 60..2592000 whole minutes */
    LDPREF_EBAD_PAGE = 66,           /* a listing's offset or limit is out of range */
    LDPREF_EINSUFFICIENT_SCOPE = 67, /* the operator token lacks the endpoint's scope */
    LDPREF_ERATE_LIMITED = 68,       /* 429: retry later */
    LDPREF_EBUSY = 69,               /* 503: the server is at a limit; retry later */
    LDPREF_ESTORAGE_UNHEALTHY = 70,  /* 503: the server's storage cannot take writes now */
    LDPREF_ELAST_ADMIN_TOKEN = 71,   /* revoking it would leave no live admin token */
    LDPREF_EUNKNOWN_TOKEN = 72,      /* no live operator token has this id */
    LDPREF_EMODEL_NOT_PUBLIC = 75, /* 403: the model saw unprivatized labels: needs a score token */
    LDPREF_EMODEL_NOT_ACTIVE = 76, /* 403: a model that is not served: needs an admin token */

    /* the server's answer exceeds the client's cap for what was asked; it
     * nests too deep or holds too many JSON values for it */
    LDPREF_ERESPONSE_TOO_LARGE = 79,
    LDPREF_ERESPONSE_TOO_COMPLEX = 80,
    /* https: the server's certificate is not trusted; the TLS handshake failed */
    LDPREF_ECERTIFICATE_UNTRUSTED = 81,
    LDPREF_ETLS_FAILED = 82,
    /* Since 0.5: central campaigns (docs/operators.md "Central campaigns") */
    LDPREF_ECENTRAL_NEEDS_MECHANISM = 89,  /* a central campaign's retrain needs a mechanism */
    LDPREF_ERELEASE_BUDGET_EXHAUSTED = 90, /* the release would exceed the release budget */
    LDPREF_ECENTRAL_LABELS_PRIVATE = 91,   /* a central campaign's labels are never served */
    LDPREF_EBAD_CAMPAIGN_SETTINGS = 92,    /* trust, budgets, cap and epsilons do not fit */
    LDPREF_EMECHANISM_NEEDS_CENTRAL = 93,  /* a mechanism trains on one central campaign */
    /* 409: pessimistic scores asked of a model without a confidence record */
    LDPREF_ENO_CONFIDENCE = 95,
    LDPREF_ERROR_END /* one past the last code; grows when codes are added */
} ldpref_error;

/* A one-line human message for a code. Static storage, never NULL. */
const char *ldpref_strerror(int code);
/* The stable wire name of a code ("bad_signature"); "unknown_error" if the
 * code is not in the table. Static storage, never NULL. */
const char *ldpref_error_name(int code);

/* The library version, "MAJOR.MINOR.PATCH" (e.g. "0.2.0"); MAJOR.MINOR
 * names the newest symbol version the library exports (LDPREF_0.2). Static
 * storage. */
const char *ldpref_version(void);

/* ---------------------------------------------------------------------------
 * Options and handle
 */

/* Longest server URL, path and token the options accept (bytes, without NUL). */
#define LDPREF_PATH_MAX 4096

/*
 * Options for ldpref_client_open(). Fill with ldpref_options_init(), then
 * override fields. String fields are borrowed: they must stay valid until
 * ldpref_client_open() returns (the handle keeps copies).
 */
typedef struct ldpref_options {
    const char *server_url;       /* default "http://127.0.0.1:8080" */
    const char *key_path;         /* Ed25519 secret key file (ldpref_keygen); NULL: no key
                                     (operator-only use) */
    const char *ledger_path;      /* NULL: "<key_path>.ledger" */
    double max_epsilon_per_label; /* own cap on one label's epsilon; default 1.0;
                                     INFINITY allows unprivatized labels */
    double max_epsilon_total;     /* own cap on the sum of epsilons spent; default 100
                                     (1000 before 0.4; docs/client.md "The total cap") */
    long timeout_ms;              /* whole-request timeout; default 30000 */
    long connect_timeout_ms;      /* default 5000 */
    const char *operator_token;   /* bearer token for ldpref_admin_* and ldpref_score* (a
                                     token with just the score scope is enough to score);
                                     NULL for annotators and anonymous scoring */
    const char *ca_file;          /* optional CA bundle for https (CURLOPT_CAINFO) */

    /* CTL corruption SIMULATION (corruption, then LDP; docs/client.md
     * "Simulated annotators"). For simulated annotators in experiments ONLY;
     * off by default. When simulate_ctl_alpha > 0, the TRUE answer of each
     * newly answered comparison is replaced, with probability alpha, by the
     * strategy's answer BEFORE randomized response. Both coins are
     * deterministic functions of (seed, the comparison's memo key); RR still
     * uses only the OS CSPRNG. Nothing of it is sent: the signed label is the
     * standard one. Answers drawn this way are marked simulated in the
     * ledger and in receipts (ldpref_receipt.simulated). */
    double simulate_ctl_alpha;         /* in [0, 0.5]; 0 (default) = off */
    const char *simulate_ctl_strategy; /* NULL = "flip"; "flip", "anti" (opposes the
                                          annotator's own true preference: for one
                                          simulated annotator the same as flip),
                                          "constant0"/"constant1" ("a"/"b" in the
                                          PRESENTED order), "random"; "backdoor" is
                                          rejected (annotator tasks carry no features) */
    uint64_t simulate_ctl_seed;        /* default 0 */
} ldpref_options;

/* Fills *opts with the defaults above. */
void ldpref_options_init(ldpref_options *opts);

typedef struct ldpref_client ldpref_client;

/*
 * Opens a client. Validates the options and loads the key (if key_path is
 * set; LDPREF_EKEY_FILE if it is missing, malformed, or readable by group or
 * others). The ledger is opened (and created, mode 0600) on first use.
 * On success *out is a new handle, freed with ldpref_client_close().
 * On failure *out is NULL.
 */
int ldpref_client_open(const ldpref_options *opts, ldpref_client **out) LDPREF_WUR;

/* Closes a handle and wipes its secrets. Accepts NULL. */
void ldpref_client_close(ldpref_client *c);

/* Details of the last failure on this handle (e.g. the server's error name
 * and message). Borrowed; valid until the next call on the handle. Never NULL. */
const char *ldpref_errmsg(const ldpref_client *c);

/* Frees memory the library returned as char* (JSON text). Accepts NULL. */
void ldpref_free(void *p);

/* ---------------------------------------------------------------------------
 * Keys
 */

/* Room for an unpadded base64url public key plus NUL. */
#define LDPREF_KEY_B64_SIZE 48

/*
 * Generates an Ed25519 key pair. Writes the secret key to key_path (created
 * with O_CREAT|O_EXCL, mode 0600; an existing file is never overwritten:
 * LDPREF_EKEY_FILE) and the public key, base64url text, to "<key_path>.pub".
 * If pub_b64 is non-NULL the public key is also written there.
 */
int ldpref_keygen(const char *key_path, char pub_b64[LDPREF_KEY_B64_SIZE]) LDPREF_WUR;

/* The handle's public key as unpadded base64url. LDPREF_EKEY_FILE if the
 * handle has no key. */
int ldpref_public_key(const ldpref_client *c, char out[LDPREF_KEY_B64_SIZE]);

/* ---------------------------------------------------------------------------
 * Annotator operations
 */

/* Result of POST /v1/annotators. */
typedef struct ldpref_enrollment {
    int64_t annotator_id;
    char pseudonym[64];
    char campaign[129];
    double epsilon_budget; /* the campaign's per-annotator budget */
} ldpref_enrollment;

/* Enrolls the handle's public key with a one-time token from an operator
 * (the request is signed: proof of possession). out may be NULL. */
int ldpref_enroll(ldpref_client *c, const char *token, ldpref_enrollment *out);

/* One earlier turn of a task's conversation: role "system", "user" or
 * "assistant", and its text. */
typedef struct ldpref_turn {
    char *role;
    char *content;
} ldpref_turn;

/* A comparison task as served to this annotator. a/b is the presentation
 * order. All strings (and the context array) are owned by the array they
 * came in. */
typedef struct ldpref_task {
    int64_t task_id;
    char *campaign;
    char *prompt;
    char *a;
    char *b;
    double epsilon_proposed; /* the campaign's proposal (INFINITY for null) */
    double epsilon_min;
    double epsilon_max;
    ldpref_turn *context; /* the conversation before the prompt, oldest first;
                             NULL when n_context is 0 */
    size_t n_context;
} ldpref_task;

/*
 * Fetches up to count (1..1000) tasks (signed request). Each comes with its
 * conversation's earlier turns (context); the comparison the annotator
 * answers, and whose randomized answer is remembered, is the whole
 * conversation with the two responses (docs/client.md "Memo key"). On success *tasks is
 * a new array of *n tasks, freed with ldpref_tasks_free(*tasks, *n). When the
 * server has nothing, returns with *tasks NULL and *n 0:
 * LDPREF_ECAMPAIGN_COMPLETE (every task of the campaign has its labels),
 * LDPREF_EQUOTA_REACHED (this annotator's quota is used up), or
 * LDPREF_ENO_TASK (the open tasks are leased to others, or done by this
 * annotator). A fetched task is leased to this annotator for the server's
 * lease time; answer it, or give it up with ldpref_skip().
 * The tasks are also remembered in the ledger (as keyed hashes of their
 * content, never the text) so that ldpref_answer_id() can answer them later.
 */
int ldpref_next_tasks(ldpref_client *c, int count, ldpref_task **tasks, size_t *n);

/*
 * Since 0.5: trusted-curator (central) campaigns. ldpref_task_central: 1
 * when the server said task t (fetched by this handle) belongs to a central
 * campaign: there the server sees an annotator's true answer and only the
 * models it releases through a differentially private mechanism are
 * private. ldpref_task_sends_true_answer: 1 when answering t from this
 * handle would send the true answer unrandomized: only when the campaign
 * proposes no privatization (epsilon null) AND both of this handle's own
 * caps (max_epsilon_per_label, max_epsilon_total) are infinite; a
 * campaign's setting alone never makes the client send a raw label (with
 * finite caps it randomizes, or refuses with LDPREF_ELOCAL_BUDGET_EXCEEDED
 * when only the total is finite). Show both to the annotator before
 * they answer.
 */
int ldpref_task_central(const ldpref_client *c, const ldpref_task *t);
int ldpref_task_sends_true_answer(const ldpref_client *c, const ldpref_task *t);

/*
 * Since 0.4: the largest task (bytes of its JSON in the server's answer) the
 * handle accepts from ldpref_next_tasks(); default
 * LDPREF_MAX_TASK_BYTES_DEFAULT (1 MiB: the largest task the server accepts,
 * 320 KiB of text, with room for JSON escapes). A tasks/next answer larger
 * than count times this (plus 4 KiB) is refused while it arrives
 * (LDPREF_ERESPONSE_TOO_LARGE), one with more JSON values than count tasks
 * can hold before it is parsed (LDPREF_ERESPONSE_TOO_COMPLEX): a hostile
 * server cannot make the client hold much more than count times this.
 * LDPREF_EINVALID_ARGUMENT outside [LDPREF_MAX_TASK_BYTES_MIN,
 * LDPREF_MAX_TASK_BYTES_LIMIT].
 */
#define LDPREF_MAX_TASK_BYTES_DEFAULT (1 << 20)
#define LDPREF_MAX_TASK_BYTES_MIN 4096
#define LDPREF_MAX_TASK_BYTES_LIMIT (64 << 20)
int ldpref_set_max_task_bytes(ldpref_client *c, size_t bytes);

/* Frees an array from ldpref_next_tasks(). Accepts NULL. */
void ldpref_tasks_free(ldpref_task *tasks, size_t n);

/* The server's acknowledgement of a label. z is the privatized answer as
 * sent (1 = "b" reported preferred), never the true one. */
typedef struct ldpref_receipt {
    int64_t label_id;
    int64_t task_id;
    int z;
    double epsilon;      /* INFINITY for an unprivatized label */
    int64_t received_at; /* server time, Unix ms */
    int resent;          /* 1 if this receipt came back for a resend (HTTP 200) */
    int simulated;       /* 1 if the answer was drawn with CTL simulation on (the
                            ledger's record of this comparison; never sent) */
} ldpref_receipt;

/* The annotator's TRUE answer to a comparison (the choice argument). */
#define LDPREF_CHOICE_A 0         /* a is better */
#define LDPREF_CHOICE_B 1         /* b is better */
#define LDPREF_CHOICE_CANT_TELL 2 /* can't tell: sent as a fair coin, P(z = 1) = 1/2 */

/*
 * Answers a task with the annotator's TRUE choice (LDPREF_CHOICE_A, _B or
 * _CANT_TELL; anything else: LDPREF_EINVALID_ARGUMENT). The true answer
 * stays on the device: the library randomizes it (A/B by randomized
 * response, can't tell as a fair coin; or reuses the memoized randomized
 * answer for the same comparison content under another task id), records
 * the spend and the signed message in the ledger, and only then sends. A
 * can't-tell label spends epsilon like any other and looks the same on the
 * wire. Errors before sending (LDPREF_ELOCAL_BUDGET_EXCEEDED,
 * LDPREF_EEPSILON_OUT_OF_RANGE when the own cap is below the campaign's
 * minimum) send nothing. If sending fails (LDPREF_ENETWORK, ...) the
 * message stays in the outbox for ldpref_resend_pending(). out may be NULL.
 *
 * A task id this ledger answered before gets LDPREF_EALREADY_ANSWERED,
 * whatever the choice (the library never stores the true answer, so it
 * cannot tell a repeat from a change, and a randomized answer must never be
 * changed or drawn again): nothing new is randomized or signed. If the
 * stored message still has no receipt it is resent first, byte for byte;
 * *out gets the receipt when there is one (r.resent = 1), and the error of
 * that resend (LDPREF_ENETWORK, ...) is returned instead when it fails.
 * Check the result.
 */
int ldpref_answer(ldpref_client *c, const ldpref_task *t, int choice,
                  ldpref_receipt *out) LDPREF_WUR;

/* As ldpref_answer() for a task fetched earlier with ldpref_next_tasks() on
 * this ledger and server (LDPREF_EUNKNOWN_TASK if it is not remembered). */
int ldpref_answer_id(ldpref_client *c, int64_t task_id, int choice, ldpref_receipt *out) LDPREF_WUR;

/* One item of a batch answer. */
typedef struct ldpref_batch_item {
    const ldpref_task *task; /* borrowed; NULL: look task_id up in the ledger */
    int64_t task_id;         /* used when task is NULL */
    int choice;              /* the TRUE answer: LDPREF_CHOICE_A, _B or _CANT_TELL */
    int error;               /* out: LDPREF_OK or the item's error code */
    ldpref_receipt receipt;  /* out: valid when error == LDPREF_OK, and when error ==
                                LDPREF_EALREADY_ANSWERED and receipt.label_id > 0 */
    char message[256];       /* out: details when error != LDPREF_OK */
} ldpref_batch_item;

/*
 * Answers n items through the batch endpoint (in chunks of at most 1000).
 * Each item is prepared exactly as by ldpref_answer() (memo, budget, outbox;
 * a task id answered before, also earlier in the same batch, gets
 * LDPREF_EALREADY_ANSWERED);
 * items that fail locally are not sent. Returns LDPREF_OK when every item
 * was processed (look at each item's error), or a whole-call error
 * (e.g. LDPREF_ENETWORK: the prepared messages stay in the outbox).
 */
int ldpref_answer_batch(ldpref_client *c, ldpref_batch_item *items, size_t n) LDPREF_WUR;

/*
 * Resends every outbox message that has no receipt yet. *sent (may be NULL)
 * gets the number acknowledged now, *pending (may be NULL) the number still
 * without a receipt. Returns LDPREF_OK, or the first whole-call error.
 */
int ldpref_resend_pending(ldpref_client *c, size_t *sent, size_t *pending);

/*
 * Skips a task assigned to this annotator (signed request): no label is
 * sent and no epsilon is spent; the server never offers the task to this
 * annotator again, and a later answer to it is refused by the library
 * before anything is randomized, spent or sent (LDPREF_ENOT_ASSIGNED; the
 * ledger remembers the skip). Skipping tells the server that this annotator
 * was shown the task and declined, never a preference. Skipping a task
 * twice succeeds; LDPREF_EUNKNOWN_TASK, LDPREF_ENOT_ASSIGNED,
 * LDPREF_EALREADY_ANSWERED (answered on this device: refused before
 * anything is sent, its label may still be pending for ldpref_resend_pending),
 * LDPREF_ECONFLICTING_LABEL (answered elsewhere with this key).
 */
int ldpref_skip(ldpref_client *c, int64_t task_id);

/* Where the annotator's campaign stands (POST /v1/progress). */
typedef struct ldpref_progress {
    char campaign[129];
    int64_t tasks_total;      /* tasks in the campaign */
    int64_t tasks_complete;   /* tasks with all the labels they need */
    int64_t labels;           /* labels stored in the campaign */
    int64_t labels_needed;    /* tasks_total * labels_per_task */
    int64_t annotator_labels; /* this annotator's labels */
    int64_t annotator_quota;  /* 0: none */
} ldpref_progress;

/* Fetches the progress of this annotator's campaign (signed request). */
int ldpref_progress_get(ldpref_client *c, ldpref_progress *out);

/* Local privacy accounting from the ledger. */
typedef struct ldpref_budget {
    double spent;             /* sum of epsilons spent on this device */
    double max_epsilon_total; /* the handle's caps */
    double max_epsilon_per_label;
    int64_t labels;    /* distinct comparisons answered (memo entries) */
    int64_t pending;   /* outbox messages without a receipt */
    int64_t simulated; /* memo entries drawn with CTL simulation on */
} ldpref_budget;

int ldpref_budget_get(ldpref_client *c, ldpref_budget *out);

/* ---------------------------------------------------------------------------
 * Operator operations (need options.operator_token). Results that are JSON
 * come back as NUL-terminated text in *json_out, freed with ldpref_free().
 */

/* Uploads a JSONL task file (see docs/protocol.md) to campaign (NULL:
 * "default"). *json_out (may be NULL) gets {"loaded", "task_ids",
 * "skipped_duplicates"}. */
int ldpref_admin_tasks_load(ldpref_client *c, const char *jsonl_path, const char *campaign,
                            char **json_out);

/* Creates count (1..1000) one-time enrollment tokens for campaign (NULL:
 * "default"). *json_out gets {"tokens": [...]}. */
int ldpref_admin_enrollment_tokens(ldpref_client *c, const char *campaign, int count,
                                   char **json_out);

/* A campaign to create. Fill with ldpref_campaign_init(). */
typedef struct ldpref_campaign {
    const char *name; /* borrowed */
    double epsilon_min;
    double epsilon_max; /* INFINITY: no upper bound, i.e. every finite epsilon and
                           unprivatized labels (sent as the largest finite
                           epsilon_max with allow_infinite true) */
    int allow_infinite; /* accept unprivatized labels (epsilon infinite) */
    double epsilon_budget;
    double epsilon_default;
    int labels_per_task;     /* labels each task needs (>= 1); 0: the server's default, 1 */
    int64_t annotator_quota; /* labels (plus open leases) per annotator (>= 1); 0: none */
} ldpref_campaign;

/* Defaults of the server's "default" campaign: [0.01, 10], no infinity,
 * budget 1000, proposal 1, one label per task, no quota; name NULL (must
 * be set). */
void ldpref_campaign_init(ldpref_campaign *spec);

/* Creates a campaign. *json_out (may be NULL) gets the server's campaign. */
int ldpref_admin_campaign_create(ldpref_client *c, const ldpref_campaign *spec, char **json_out);
/* Since 0.5: as ldpref_admin_campaign_create, with the fields of extra_json
 * (a JSON object text, NULL: none) added to the request, replacing the
 * spec's: "trust" ("local" | "central"), "release_epsilon",
 * "release_delta", "contribution_cap" (docs/protocol.md "POST
 * /v1/campaigns"). */
int ldpref_admin_campaign_create_with(ldpref_client *c, const ldpref_campaign *spec,
                                      const char *extra_json, char **json_out);
/* Since 0.5: sets a central campaign's model-release budget; NAN leaves a
 * value as it is (POST /v1/campaigns/update). LDPREF_EBAD_CAMPAIGN_SETTINGS
 * for a local campaign or a budget below what was spent. */
int ldpref_admin_campaign_update(ldpref_client *c, const char *name, double release_epsilon,
                                 double release_delta, char **json_out);

/* Revokes an annotator: its key (base64url) or, since 0.4, its pseudonym
 * ("ann-...", as the operator's views show it). LDPREF_EUNKNOWN_KEY when
 * no annotator has it. */
int ldpref_admin_revoke(ldpref_client *c, const char *key_or_pseudonym);

/*
 * Since 0.4: operator tokens (need a token with the admin scope;
 * docs/operators.md "Operator tokens and scopes"). Tokens are named by
 * their public id, "tok-<n>"; a token's secret is in the answer of the call
 * that made it, and never again.
 *
 * ldpref_admin_token_create: a token named name (1..64 bytes) with scopes,
 * names separated by commas ("admin,export,score"; "" or "none": a token
 * that reads /metrics only). *json_out gets {"id", "token", "name",
 * "scopes", "created_ms", "revoked_ms"}.
 * ldpref_admin_tokens: {"tokens": [{"id", "name", "scopes", "created_ms",
 * "revoked_ms" (null while live)}]}, live and revoked, oldest first.
 * ldpref_admin_token_revoke: the revoked token's object.
 * LDPREF_ELAST_ADMIN_TOKEN when it is the last live token with the admin
 * scope; LDPREF_EUNKNOWN_TOKEN when no live token has the id.
 * ldpref_admin_token_rotate: a new secret with the same name and scopes;
 * the old token is revoked at once. *json_out as for create, plus
 * "replaces": the old id. LDPREF_EUNKNOWN_TOKEN.
 */
int ldpref_admin_token_create(ldpref_client *c, const char *name, const char *scopes,
                              char **json_out);
int ldpref_admin_tokens(ldpref_client *c, char **json_out);
int ldpref_admin_token_revoke(ldpref_client *c, const char *id, char **json_out);
int ldpref_admin_token_rotate(ldpref_client *c, const char *id, char **json_out);

/* Server statistics. *json_out gets the server's JSON. */
int ldpref_admin_stats(ldpref_client *c, char **json_out);

/*
 * The operator's views (since 0.3; docs/operators.md "Campaign, annotator
 * and task views"). campaign NULL: "default". A value of 0 leaves a
 * parameter to the server's default; a value out of range comes back as
 * the server's error (LDPREF_EBAD_BUCKET, LDPREF_EBAD_PAGE).
 *
 * ldpref_admin_campaign: progress, labels over time in buckets of bucket_s
 * seconds (a multiple of 60 in 60..2592000; 0: 3600), the epsilon its
 * annotators spent as a histogram, and how many exhausted their budget.
 * ldpref_admin_annotators: a page of the campaign's annotators (pseudonym,
 * labels, epsilon spent, skips, revoked, enrolled, last label).
 * ldpref_admin_tasks: a page of its tasks with a prompt excerpt and their
 * label counts (limit 1..1000; 0: 100).
 * ldpref_admin_task: one task in full (context turns, responses, labels,
 * skips). LDPREF_EUNKNOWN_CAMPAIGN, LDPREF_EUNKNOWN_TASK.
 */
int ldpref_admin_campaign(ldpref_client *c, const char *campaign, int64_t bucket_s,
                          char **json_out);
int ldpref_admin_annotators(ldpref_client *c, const char *campaign, int64_t offset, int64_t limit,
                            char **json_out);
int ldpref_admin_tasks(ldpref_client *c, const char *campaign, int64_t offset, int64_t limit,
                       char **json_out);
int ldpref_admin_task(ldpref_client *c, int64_t id, char **json_out);

/* Since 0.3: label quality under privacy for campaign (NULL: "default"):
 * debiased gold accuracy and agreement with confidence intervals, per
 * annotator too, the outlier flags and the planning figures
 * (GET /v1/quality; docs/operators.md "Label quality under privacy").
 * *json_out gets the server's JSON. LDPREF_EUNKNOWN_CAMPAIGN. */
int ldpref_admin_quality(ldpref_client *c, const char *campaign, char **json_out);

/* Since 0.4: a page of the audit log of operator actions (GET /v1/audit;
 * docs/operators.md "Audit log"): the rows with id > after_id (>= 0), at
 * most limit (1..1000; 0: the server's default, 100), in id order, each
 * with its hash and the previous row's in hex, and the chain's head.
 * *json_out gets {"entries", "head_id", "head_hash", "after_id", "limit"}.
 * LDPREF_EBAD_PAGE. */
int ldpref_admin_audit(ldpref_client *c, int64_t after_id, int64_t limit, char **json_out);

/* Streams the export (JSONL) for campaign (NULL: all) into out (borrowed). */
int ldpref_admin_export(ldpref_client *c, const char *campaign, FILE *out);

/* As ldpref_admin_export() into a file created (mode 0600) at path. */
int ldpref_admin_export_path(ldpref_client *c, const char *campaign, const char *path);

/*
 * As ldpref_admin_export() for a view: NULL or "clean" (the labels as
 * received; version must be 0) or "corrupted": the training view of model
 * version (0: the active one, LDPREF_ENO_ACTIVE_MODEL if none), with
 * chosen/rejected oriented by the corrupted label plus "corrupted" and
 * "corruption_id" per line. The corrupted view has the model's own campaign
 * selection: campaign must be NULL.
 */
int ldpref_admin_export_view(ldpref_client *c, const char *campaign, const char *view,
                             int64_t version, FILE *out);

/* As ldpref_admin_export_view() into a file created (mode 0600) at path. */
int ldpref_admin_export_view_path(ldpref_client *c, const char *campaign, const char *view,
                                  int64_t version, const char *path);

/* Export formats (docs/protocol.md "Export"). */
#define LDPREF_EXPORT_STANDARD                                                                     \
    "standard" /* TRL's standard preference format: text                                           \
                  prompt, chosen, rejected (the default) */
#define LDPREF_EXPORT_CONVERSATIONAL                                                               \
    "conversational" /* TRL's conversational format:                                               \
            "prompt" the list of turns ending with the                                             \
            user's, chosen/rejected one assistant turn */

/* As ldpref_admin_export_view() in format (NULL: LDPREF_EXPORT_STANDARD;
 * anything else but the two: LDPREF_EINVALID_ARGUMENT). Since 0.3. */
int ldpref_admin_export_format(ldpref_client *c, const char *campaign, const char *view,
                               int64_t version, const char *format, FILE *out);

/* As ldpref_admin_export_format() into a file created (mode 0600) at path. */
int ldpref_admin_export_format_path(ldpref_client *c, const char *campaign, const char *view,
                                    int64_t version, const char *format, const char *path);

/*
 * Since 0.5: the export as a Hugging Face dataset directory, which
 * datasets.load_dataset(dir) reads without arguments (docs/client.md
 * "Hugging Face datasets"). dir must not exist or be empty; it gets
 * README.md (a dataset card: YAML front matter naming the configs, the
 * licence and task categories; the privacy model, the user-level epsilon,
 * how to debias, the corruption settings of a corrupted view) and
 * data/<config>/train.jsonl for the configs "all" (the default: every row),
 * "epsilon-<value>" (one per epsilon value, e.g. "epsilon-0.5") and
 * "unprivatized" (epsilon null, when there are such labels). Each row is the
 * export's line in the chosen format with "flip_prob" = 1/(1+e^epsilon) (0
 * when epsilon is null) after "epsilon". Files are created mode 0600. An
 * export without labels is LDPREF_ENO_LABELS; a failure removes what the
 * call wrote. *json_out (may be NULL) gets a summary {"dir", "rows",
 * "annotators", "user_epsilon" (the largest sum of one annotator's epsilons;
 * null when no label was privatized), "unprivatized_annotators", "configs":
 * [{"name", "epsilon", "flip_prob", "rows", "path"}]}.
 */
typedef struct ldpref_hf_options {
    const char *campaign;    /* NULL: every campaign */
    const char *view;        /* NULL/"clean", or "corrupted" (campaign NULL) */
    int64_t version;         /* the corrupted view's model; 0: the active one */
    const char *format;      /* LDPREF_EXPORT_STANDARD (NULL) or LDPREF_EXPORT_CONVERSATIONAL */
    const char *license;     /* the card's licence id (a-z 0-9 . -); NULL: "unknown" */
    const char *pretty_name; /* the card's title; NULL: "ldpref preference labels" */
} ldpref_hf_options;

/* Every field NULL or 0: the defaults above. */
void ldpref_hf_options_init(ldpref_hf_options *o);

int ldpref_admin_export_hf(ldpref_client *c, const char *dir, const ldpref_hf_options *o,
                           char **json_out);

/* ---------------------------------------------------------------------------
 * Learning (docs/protocol.md "Learning endpoints"). All but ldpref_score*
 * need options.operator_token (LDPREF_EUNAUTHORIZED without); ldpref_score*
 * send it when set (see ldpref_score). Every *json_out
 * is set to NULL first, and on success (may be NULL when not wanted) gets
 * the server's JSON as NUL-terminated text, freed with ldpref_free().
 * Server errors come back as their codes (LDPREF_EUNKNOWN_LOSS,
 * LDPREF_EBAD_HYPERPARAMETER, LDPREF_EUNKNOWN_RUN, ...) with the server's
 * message in ldpref_errmsg().
 */

/* Largest request text the learning calls send (the server's body cap). */
#define LDPREF_REQUEST_MAX 65536

/* Starts a training run. request_json (borrowed; NULL means "{}") is a JSON
 * object with the optional fields of POST /v1/retrain (loss, campaign,
 * cutoff, seed, beta, ...). *json_out gets the new run object. */
int ldpref_admin_retrain(ldpref_client *c, const char *request_json, char **json_out);

/* One run object (run >= 1), with its training curve ("curve": [{"iteration",
 * "evaluations", "objective", "grad_norm", "t_ms"}], live while it trains). */
int ldpref_admin_run_get(ldpref_client *c, int64_t run, char **json_out);

/* The newest runs: {"runs": [...]}. limit 1..1000, or 0 for the server's
 * default (20). */
int ldpref_admin_runs(ldpref_client *c, int limit, char **json_out);

/* Requests cancellation of a queued or running run; *json_out gets the run.
 * LDPREF_ERUN_FINISHED if it already ended. */
int ldpref_admin_run_cancel(ldpref_client *c, int64_t run, char **json_out);

/*
 * Polls run every poll_ms (10..3600000; 0 means 500) until its status is
 * succeeded, failed or cancelled. on_progress (may be NULL) is called with
 * every run object polled, including the last (run_json borrowed for the
 * call). Returns LDPREF_OK if the run succeeded; otherwise the run's error
 * code: the code named by its "error" object (e.g. LDPREF_ENO_LABELS), or
 * LDPREF_ECANCELLED / LDPREF_ETRAINING_FAILED when it names none we know.
 * Whenever the run ended, *json_out gets its final run object (also when
 * the return is the run's error). A failure to poll (LDPREF_ENETWORK, ...)
 * is returned as is; the run goes on on the server.
 */
int ldpref_admin_run_wait(ldpref_client *c, int64_t run, long poll_ms,
                          void (*on_progress)(void *ctx, const char *run_json), void *ctx,
                          char **json_out);

/* {"models": [...], "active_version": v or null}, newest first. */
int ldpref_admin_models(ldpref_client *c, char **json_out);

/* One model with its full model file ("model": {..., "theta"}) and the
 * training curve of its run ("curve"); version >= 1, or 0 for the active one
 * (LDPREF_ENO_ACTIVE_MODEL if none). */
int ldpref_admin_model_get(ldpref_client *c, int64_t version, char **json_out);

/* Serves model version (>= 1) from now on (roll back or forward). */
int ldpref_admin_model_activate(ldpref_client *c, int64_t version, char **json_out);

/* The periodic retraining schedule {"interval_s", "every_labels", "request"}. */
int ldpref_admin_schedule_get(ldpref_client *c, char **json_out);

/* Stores a schedule (schedule_json: a JSON object, borrowed); *json_out gets
 * the stored schedule. */
int ldpref_admin_schedule_set(ldpref_client *c, const char *schedule_json, char **json_out);

/* Server-side corruption settings for a campaign (LTC simulation). Fill with
 * ldpref_corruption_init(). Strings are borrowed. */
typedef struct ldpref_corruption {
    const char *campaign; /* NULL: "default" */
    double alpha;         /* [0, 0.5]; 0 disables */
    const char *strategy; /* flip, constant0, constant1, random, anti, backdoor */
    uint64_t seed;        /* 0 .. 2^53 */
    int64_t feature;      /* backdoor's feature index (>= 0); -1: none */
} ldpref_corruption;

/* campaign NULL, alpha 0, strategy "flip", seed 0, feature -1. */
void ldpref_corruption_init(ldpref_corruption *spec);

/* Stores new settings (append-only); *json_out gets them with their "id". */
int ldpref_admin_corruption_set(ldpref_client *c, const ldpref_corruption *spec, char **json_out);

/* The settings in force for campaign (NULL: the server's default). */
int ldpref_admin_corruption_get(ldpref_client *c, const char *campaign, char **json_out);

/* Largest number of candidates one score request may carry (protocol cap). */
#define LDPREF_SCORE_CANDIDATES_MAX 1024

/* POST /v1/score with request_json (a JSON object, borrowed): either
 * {"prompt", "candidates": [{"text", "features"?, "ref_logprob"?}], "version"?}
 * or {"task_ids": [...], "version"?}. Sends options.operator_token when set:
 * the server needs a token with the score scope (a version other than the
 * served one needs the admin scope: LDPREF_EMODEL_NOT_ACTIVE). Without a
 * token the request goes out anonymously: LDPREF_EUNAUTHORIZED, unless the
 * server runs with --public-score, which serves an anonymous caller the
 * active model only when every label it was trained on was privatized
 * (else LDPREF_EMODEL_NOT_PUBLIC; docs/trust-model.md). */
int ldpref_score(ldpref_client *c, const char *request_json, char **json_out);

/* Largest number of prompts one batch may carry (protocol cap). Since 0.5. */
#define LDPREF_SCORE_BATCH_MAX 10000

/* POST /v1/score/batch: many prompts scored in one request. body (len
 * bytes, borrowed) is JSON lines, one {"prompt", "candidates"} per line
 * (as for ldpref_score), or one object {"items": [...]}; version 0 scores
 * with the served model. The answer is written to out as it arrives: one
 * line per item in order, {"index", "candidates"} or, for a bad item,
 * {"index", "error", "message"} (the other items are still scored). The
 * request needs options.operator_token with the score scope; a refusal of
 * the whole batch (LDPREF_ETOO_MANY_CANDIDATES past LDPREF_SCORE_BATCH_MAX
 * items, LDPREF_EMODEL_NOT_ACTIVE, ...) writes nothing. Since 0.5. */
int ldpref_score_batch(ldpref_client *c, const char *body, size_t len, int64_t version, FILE *out);

/*
 * Scores k (1..LDPREF_SCORE_CANDIDATES_MAX) candidate texts for prompt with
 * model version (0: the active one). rewards_out and probs_out (each may be
 * NULL) get k numbers, in the order of texts (rewards are NAN for a
 * general-preference model, which has none: docs/protocol.md); *version_out
 * (may be NULL) the version that answered. Texts are borrowed; each at most 65536 bytes.
 * Sends the operator token as ldpref_score() does.
 */
int ldpref_score_texts(ldpref_client *c, const char *prompt, const char *const *texts, size_t k,
                       int64_t version, double *rewards_out, double *probs_out,
                       int64_t *version_out);

/* ---------------------------------------------------------------------------
 * The local web page for annotators (`ldpref ui`; docs/client.md "The web
 * page"). The library serves a page on 127.0.0.1 that shows one task at a
 * time and answers it through this handle, exactly as ldpref_answer() does:
 * the browser sends the TRUE choice only to this local process, which
 * randomizes, signs and submits it. The page's script exchanges the URL's
 * one-time token for a session secret, which every API request must carry
 * in a header (no cookies are used); requests with a foreign Host or
 * Origin, or from another site, are refused. Since 0.3.
 */

/* Options of ldpref_ui_start(). Fill with ldpref_ui_options_init(). */
typedef struct ldpref_ui_options {
    int port; /* 0 (default): a free port chosen by the system; else 1..65535 */
} ldpref_ui_options;

void ldpref_ui_options_init(ldpref_ui_options *o);

typedef struct ldpref_ui ldpref_ui;

/*
 * Starts serving the page on 127.0.0.1 in a background thread. From then on
 * the handle c belongs to that thread until ldpref_ui_stop(): the caller
 * must not use it meanwhile. *out is a new server (NULL on failure);
 * LDPREF_EINVALID_ARGUMENT for a bad port, LDPREF_EIO when the port cannot
 * be bound, LDPREF_ERNG when no token can be drawn.
 */
int ldpref_ui_start(ldpref_client *c, const ldpref_ui_options *o, ldpref_ui **out) LDPREF_WUR;

/* The page's address with its one-time token,
 * "http://127.0.0.1:PORT/?token=TOKEN" (a secret: whoever opens it first gets
 * the session). Borrowed; valid until ldpref_ui_stop(). */
const char *ldpref_ui_url(const ldpref_ui *ui);

/* Stops serving (waits for the request in progress) and wipes the token and
 * session secrets; the handle is the caller's again. Accepts NULL. */
void ldpref_ui_stop(ldpref_ui *ui);

#ifdef __cplusplus
}
#endif

#endif
