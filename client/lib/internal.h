/*
 * internal.h — the client library's private shared state: the definition of
 * the opaque ldpref_client handle and a few helpers the client modules
 * (client.c, admin.c, keys.c) share. Not installed; not part of the ABI
 * (the version script exports only ldpref_*). Tests include it for the
 * hooks at the bottom.
 */
#ifndef LPC_INTERNAL_H
#define LPC_INTERNAL_H

#include "ldpref.h"

#include "canon.h"
#include "ctl.h"
#include "http.h"
#include "ledger.h"

#include <jansson.h>
#include <stdint.h>

#define LPC_ERRMSG_MAX 512
#define LPC_SERVER_MAX 1024
#define LPC_CAMPAIGN_MAX 128 /* longest campaign name */

struct ldpref_client {
    char server[LPC_SERVER_MAX];           /* server URL without trailing '/' */
    char *key_path;                        /* owned; NULL when there is no key */
    char *ledger_path;                     /* owned; NULL when there is no key and none given */
    char *ca_file;                         /* owned or NULL */
    char operator_token[LP_TOKEN_MAX + 1]; /* secret; wiped on close; "" if none */
    double cap_label, cap_total;
    long timeout_ms, connect_timeout_ms;
    size_t max_task_bytes; /* largest task of a tasks/next answer (ldpref_set_max_task_bytes) */
    int have_key;
    uint8_t pk[LP_KEY_BYTES];
    uint8_t sk[LP_SECRET_BYTES]; /* secret; wiped on close */
    lpc_http *http;              /* owned */
    lpc_ledger *ledger;          /* owned; opened on first use */
    lpc_ctl ctl;                 /* CTL simulation settings; ctl.alpha 0 = off */
    /* the campaign the last fetched tasks said is central ("trust":
     * "central"), "" when none did (ldpref_task_central) */
    char central_campaign[LPC_CAMPAIGN_MAX + 1];
    char errmsg[LPC_ERRMSG_MAX];
};

/* Records a printf-style detail message on c and returns code. */
int lpc_fail(ldpref_client *c, int code, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* LDPREF_OK if the handle has a key, else LDPREF_EKEY_FILE (errmsg set). */
int lpc_need_key(ldpref_client *c);
/* 1 when rc says the request never reached the server (no connection, or a
 * TLS handshake that failed): a signed message stays in the outbox as is. */
int lpc_not_delivered(int rc);

/* Opens the ledger on first use. */
int lpc_use_ledger(ldpref_client *c, lpc_ledger **out);

/* How a call uses options.operator_token (the bearer argument below). */
enum {
    LPC_NO_TOKEN = 0,    /* never sent (annotator and public calls) */
    LPC_TOKEN = 1,       /* sent; LDPREF_EUNAUTHORIZED before sending when unset */
    LPC_TOKEN_IF_SET = 2 /* sent when set, else the call goes out anonymously (score) */
};

/*
 * One JSON request/response exchange with the server. req (borrowed, may be
 * NULL) is sent as the body; bearer (LPC_*TOKEN*) says whether the operator
 * token goes with it. On a 2xx answer
 * *resp gets a new reference (json_decref) and *status the HTTP status. A
 * server error {"error","message"} becomes its code with errmsg
 * "server: <name>: <message>"; transport failures LDPREF_ENETWORK;
 * unparseable answers LDPREF_EPROTOCOL.
 */
int lpc_call_json(ldpref_client *c, const char *method, const char *path, const json_t *req,
                  int bearer, size_t resp_cap, json_t **resp, long *status);

/* POSTs req to path without the operator token (an annotator's or a public
 * request): req is taken (freed here; NULL means its encoding failed:
 * LDPREF_ENO_MEMORY), *resp as for lpc_call_json(). */
int lpc_post(ldpref_client *c, const char *path, json_t *req, size_t resp_cap, json_t **resp);

/* As lpc_call_json() with the request body given as JSON text (borrowed),
 * sent byte for byte: how stored label messages are (re)sent. */
int lpc_call_text(ldpref_client *c, const char *method, const char *path, const char *body,
                  int bearer, size_t resp_cap, json_t **resp, long *status);

/* As lpc_call_text() with the answer's JSON values capped too (counted
 * before parsing): more than values_cap, or nesting deeper than
 * LP_JSON_DEPTH_MAX, is LDPREF_ERESPONSE_TOO_COMPLEX; more than resp_cap
 * bytes LDPREF_ERESPONSE_TOO_LARGE. lpc_call_text() caps values at
 * resp_cap (bytes alone bound them). */
int lpc_call_bounded(ldpref_client *c, const char *method, const char *path, const char *body,
                     int bearer, size_t resp_cap, size_t values_cap, json_t **resp, long *status);

/* Response caps (bytes): a receipt, an error, a skip or a progress answer
 * (ANNOTATOR); operator answers (SMALL, LARGE: listings, models, scores). */
#define LPC_RESP_CAP_ANNOTATOR (64u << 10)
#define LPC_RESP_CAP_SMALL (1u << 20)
/* A call answered 429 rate_limited is sent again after the server's
 * Retry-After, at most this many times and only for waits of at most this
 * many seconds (within the call's timeout); otherwise the 429 is returned. */
#define LPC_RATE_RETRIES 8
#define LPC_RATE_WAIT_MAX_S 5
#define LPC_RESP_CAP_LARGE (256u << 20)
/* Per answered item of a batch: a receipt or an error, bytes and values. */
#define LPC_RESP_CAP_PER_ITEM 2048u
#define LPC_VALUES_PER_ITEM 32u
/* A tasks/next answer: per task at most max_task_bytes and
 * LPC_TASK_VALUES_MAX values (its nine fields and 32 turns of context take
 * about 150), plus the envelope. */
#define LPC_TASK_VALUES_MAX 256u
#define LPC_ENVELOPE_BYTES 4096u
#define LPC_ENVELOPE_VALUES 64u

/* Hands a JSON answer (reference taken) to the caller as compact text in
 * *json_out (NULL: dropped). */
int lpc_give_json(ldpref_client *c, json_t *resp, char **json_out);

/* Checks a campaign name (1..128 bytes) and writes base + "?campaign=<escaped>"
 * (or base alone for NULL) into path. */
int lpc_campaign_query(ldpref_client *c, const char *base, const char *campaign, char *path,
                       size_t cap);

/* Maps a non-2xx answer body to an error code (see lpc_call_json). */
int lpc_server_error(ldpref_client *c, long status, const char *body, size_t len);

/* Key file handling (keys.c). Loads and checks the secret key at path into
 * sk/pk. LDPREF_EKEY_FILE for a missing, malformed or non-private file. */
int lpc_key_load(const char *path, uint8_t sk[LP_SECRET_BYTES], uint8_t pk[LP_KEY_BYTES], char *msg,
                 size_t msglen);

/* ---------------------------------------------------------------------------
 * Test hooks (not exported from the shared library).
 */

/* The memo key, exact key, sketch and epsilons of t (memo.h). LP_OK or
 * LP_ENO_MEMORY. */
int lpc_task_meta_fill(const uint8_t secret[LPC_DEVICE_SECRET_BYTES], const ldpref_task *t,
                       lpc_task_meta *m);

/*
 * Does everything ldpref_answer() does before the network: outbox lookup,
 * memo, budget, CTL simulation, randomization, signing, ledger writes.
 * *msg gets the signed message that would be (re)sent; *existed is 1 if it
 * came from the outbox; *simulated (may be NULL) 1 if the answer was drawn
 * under CTL simulation.
 */
int lpc_answer_prepare(ldpref_client *c, const ldpref_task *t, int choice, lp_label_msg *msg,
                       int *existed, int *simulated);

/*
 * The randomized answer for a choice in canonical orientation: 0/1 by
 * randomized response at eps (lp_rr_privatize), LDPREF_CHOICE_CANT_TELL as a
 * fair coin from the OS CSPRNG whatever eps is. LP_OK, LP_EBAD_LABEL,
 * LP_EBAD_EPSILON or LP_ERNG.
 */
int lpc_randomize_choice(int y_canon, double eps, int *z);

#endif
