/*
 * answer.c — the privacy core of libldpref: turning an annotator's TRUE
 * preference into a signed, privatized label, exactly once per comparison.
 *
 * The true answer is a choice: A (0), B (1) or can't tell (2). Can't tell
 * is randomized as a fair coin (P(z = 1) = 1/2) whatever epsilon is; A and B
 * by randomized response (common/rr.h). docs/client.md has the proof that
 * the three-valued input is still epsilon-LDP.
 *
 * Order of operations for one answer (all ledger writes in one transaction,
 * committed BEFORE anything is sent):
 *   1. outbox: if a message for (server, task_id) exists, the task was
 *      answered already: nothing new is randomized or signed; the stored
 *      message is resent byte for byte (same nonce, timestamp, signature)
 *      when it has no receipt yet, and the answer is
 *      LDPREF_EALREADY_ANSWERED with the stored receipt;
 *   2. memo: the comparison's memo key (keyed BLAKE2b of its normalized
 *      content in canonical order, memo.h), the key of its text as received
 *      (ledgers of earlier versions), or its sketch (a near-duplicate of a
 *      memoized comparison, in either A/B order) finds a stored randomized
 *      answer: reuse it and its epsilon in the matching orientation, spend
 *      nothing;
 *   3. otherwise choose epsilon = min(own per-label cap, server proposal,
 *      campaign max), refuse below the campaign min, refuse if the local
 *      total would exceed the own cap; if CTL simulation is on (simulated
 *      annotators only, ctl.h), replace the true answer with probability
 *      alpha by the strategy's; draw RR over the CSPRNG, store memo (with
 *      the simulation settings, if any) and spend;
 *   4. sign a fresh label (random nonce, lp_now_ms()) and store its JSON in
 *      the outbox;
 * then send, and record the receipt. The true answer exists only in this
 * function's arguments and locals; it is never stored or sent.
 */
#include "internal.h"

#include "clock.h"
#include "error.h"
#include "rr.h"
#include "wire.h"

#include <math.h>
#include <sodium.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

_Static_assert(LPC_CTL_TIE == LDPREF_CHOICE_CANT_TELL, "ctl.h: a tie is LDPREF_CHOICE_CANT_TELL");

#define LPC_BATCH_MAX 1000

int lpc_task_meta_fill(const uint8_t secret[LPC_DEVICE_SECRET_BYTES], const ldpref_task *t,
                       lpc_task_meta *m)
{
    memset(m, 0, sizeof *m);
    if (lpc_memo_key(secret, t, m->memo_key, &m->swapped) != LP_OK ||
        lpc_sketch_build(secret, t, m->swapped, &m->sketch) != LP_OK)
        return LP_ENO_MEMORY;
    m->has_sketch = 1;
    lpc_memo_key_exact(secret, t, m->exact_key, &m->exact_swapped);
    m->has_exact = memcmp(m->exact_key, m->memo_key, LPC_MEMO_KEY_BYTES) != 0;
    m->epsilon_proposed = t->epsilon_proposed;
    m->epsilon_min = t->epsilon_min;
    m->epsilon_max = t->epsilon_max;
    return LP_OK;
}

/*
 * The memo entry that answers the comparison of m, in this order: its own
 * key; the key of its text exactly as received (entries written before
 * normalization), which then also gets the sketch; the nearest entry whose
 * sketch makes it a near-duplicate. On LP_OK, key gets the entry's key, *z
 * and *eps its answer, *flip the orientation of the presented a/b relative
 * to the entry's canonical order (the label sent is *z ^ *flip). LP_ENOT_FOUND
 * when there is none, LP_ESTORAGE / LP_ENO_MEMORY on failure.
 */
static int memo_find(lpc_ledger *l, const lpc_task_meta *m, uint8_t key[LPC_MEMO_KEY_BYTES], int *z,
                     double *eps, char **simulation, int *flip)
{
    int rc = lpc_ledger_memo_get(l, m->memo_key, z, eps, simulation);
    if (rc == LP_OK) {
        memcpy(key, m->memo_key, LPC_MEMO_KEY_BYTES);
        *flip = m->swapped;
        if (m->has_sketch) /* an entry written before sketches gets one */
            rc = lpc_ledger_memo_set_sketch(l, key, &m->sketch);
        return rc;
    }
    if (rc == LP_ENOT_FOUND && m->has_exact) {
        rc = lpc_ledger_memo_get(l, m->exact_key, z, eps, simulation);
        if (rc == LP_OK) {
            memcpy(key, m->exact_key, LPC_MEMO_KEY_BYTES);
            *flip = m->exact_swapped;
            if (m->has_sketch) {
                lpc_sketch oriented = m->sketch;
                if (m->exact_swapped != m->swapped)
                    lpc_sketch_swap(&oriented);
                rc = lpc_ledger_memo_set_sketch(l, key, &oriented);
            }
            return rc;
        }
    }
    if (rc != LP_ENOT_FOUND || !m->has_sketch)
        return rc;
    int rel = 0;
    rc = lpc_ledger_memo_nearest(l, &m->sketch, LPC_SKETCH_THRESHOLD, key, &rel, NULL);
    if (rc == LP_OK && (rc = lpc_ledger_memo_get(l, key, z, eps, simulation)) == LP_OK)
        *flip = m->swapped ^ rel;
    return rc;
}

int ldpref_task_sends_true_answer(const ldpref_client *c, const ldpref_task *t)
{
    return c != NULL && t != NULL && isinf(c->cap_label) && isinf(c->cap_total) &&
           isinf(t->epsilon_proposed) && t->epsilon_proposed > 0;
}

/* The epsilon for a new label: never above the own cap, the proposal or
 * the campaign's max; LDPREF_EEPSILON_OUT_OF_RANGE below the campaign's min.
 * Infinity (no privatization) only when both the own cap and the campaign's
 * proposal are infinite: the server proposes it only for campaigns that
 * allow it, and the annotator must have opted in. */
static int choose_epsilon(ldpref_client *c, const lpc_task_meta *m, double *eps)
{
    double e = fmin(c->cap_label, m->epsilon_proposed);
    if (!isinf(e))
        e = fmin(e, m->epsilon_max);
    if (isnan(e) || !(e >= m->epsilon_min) || lp_epsilon_check(e, 1) != LP_OK)
        return lpc_fail(c, LDPREF_EEPSILON_OUT_OF_RANGE,
                        "own per-label cap %g is below the campaign's minimum epsilon %g",
                        c->cap_label, m->epsilon_min);
    *eps = e;
    return LDPREF_OK;
}

int lpc_randomize_choice(int y_canon, double eps, int *z)
{
    if (y_canon == LDPREF_CHOICE_CANT_TELL) {
        int rc = lp_epsilon_check(eps, 1);
        return rc == LP_OK ? lp_bernoulli(0.5, z) : rc;
    }
    return lp_rr_privatize(y_canon, eps, z);
}

/* The choice in the memo's canonical orientation: a tie has none. */
static int canonical_choice(int choice, int swapped)
{
    return choice == LDPREF_CHOICE_CANT_TELL ? choice : choice ^ (swapped != 0);
}

/* Signs a label for (task_id, z, eps) with a fresh nonce and timestamp and
 * returns its compact JSON (malloc'ed) in *text. */
static int sign_label(ldpref_client *c, int64_t task_id, int z, double eps, lp_label_msg *msg,
                      char **text)
{
    memset(msg, 0, sizeof *msg);
    memcpy(msg->key, c->pk, LP_KEY_BYTES);
    msg->task_id = task_id;
    msg->z = z;
    msg->epsilon = eps;
    randombytes_buf(msg->nonce, LP_NONCE_BYTES);
    msg->timestamp_ms = lp_now_ms();
    lp_sign_label(msg, c->sk);
    json_t *obj = lp_wire_label_encode(msg);
    *text = obj ? json_dumps(obj, JSON_COMPACT) : NULL;
    json_decref(obj);
    return *text ? LDPREF_OK : lpc_fail(c, LDPREF_ENO_MEMORY, "encoding the label");
}

/* Decodes a stored outbox message. */
static int decode_stored(ldpref_client *c, const char *text, lp_label_msg *msg)
{
    json_t *obj = NULL;
    char m[LP_MSG_MAX];
    int rc = lp_json_parse(text, strlen(text), LP_JSON_DEPTH_MAX, &obj, m, sizeof m);
    if (rc == LP_OK)
        rc = lp_wire_label_decode(obj, msg, m, sizeof m);
    json_decref(obj);
    return rc == LP_OK ? LDPREF_OK
                       : lpc_fail(c, LDPREF_ESTORAGE, "ledger: corrupt outbox message: %s", m);
}

/*
 * Steps 1-4 above for a task described by meta. On success *text is the
 * message to send (malloc'ed), *receipt the stored receipt JSON or NULL
 * (malloc'ed), *existed 1 if the message came from the outbox, *simulated
 * 1 if the answer was drawn under CTL simulation (now or when memoized).
 */
static int prepare(ldpref_client *c, int64_t task_id, const lpc_task_meta *meta, int choice,
                   lp_label_msg *msg, char **text, char **receipt, int *existed, int *simulated)
{
    lpc_ledger *l = c->ledger;
    int rc;
    char *simulation = NULL; /* the memo entry's CTL settings, NULL for a real answer */
    *text = NULL;
    *receipt = NULL;
    *existed = 0;
    *simulated = 0;
    if (lpc_ledger_begin(l) != LP_OK)
        return lpc_fail(c, LDPREF_ESTORAGE, "ledger busy or failing");
    rc = lpc_ledger_outbox_get(l, c->server, task_id, text, receipt, simulated);
    if (rc == LP_OK) {
        lpc_ledger_rollback(l);
        *existed = 1;
        rc = decode_stored(c, *text, msg);
        goto done;
    }
    if (rc != LP_ENOT_FOUND)
        goto storage;
    rc = lpc_ledger_skipped(l, c->server, task_id);
    if (rc == LP_OK) {
        rc = lpc_fail(c, LDPREF_ENOT_ASSIGNED,
                      "task %lld was skipped on this device and cannot be answered; nothing was "
                      "spent or sent",
                      (long long)task_id);
        goto refuse;
    }
    if (rc != LP_ENOT_FOUND)
        goto storage;

    int z_canon, flip = meta->swapped;
    double eps;
    uint8_t entry[LPC_MEMO_KEY_BYTES];
    rc = memo_find(l, meta, entry, &z_canon, &eps, &simulation, &flip);
    if (rc == LP_ENOT_FOUND) {
        double spent;
        if ((rc = choose_epsilon(c, meta, &eps)) != LDPREF_OK)
            goto refuse;
        if (lpc_ledger_spent(l, &spent) != LP_OK)
            goto storage;
        /* A relative slack of 1e-12 keeps sums like 10 x 0.1 within a cap of 1. */
        if (!(spent + eps <= c->cap_total * (1.0 + 1e-12))) {
            rc = lpc_fail(c, LDPREF_ELOCAL_BUDGET_EXCEEDED,
                          "spending %g would bring the local total to %g, above the cap %g", eps,
                          spent + eps, c->cap_total);
            goto refuse;
        }
        int y_canon = canonical_choice(choice, meta->swapped);
        if (c->ctl.alpha > 0) {
            /* Simulation only: corruption of the true answer, then LDP (CTL). */
            char settings[160];
            lpc_ctl_describe(&c->ctl, settings, sizeof settings);
            if ((simulation = strdup(settings)) == NULL) {
                rc = lpc_fail(c, LDPREF_ENO_MEMORY, "out of memory");
                goto refuse;
            }
            y_canon = lpc_ctl_apply(&c->ctl, meta->memo_key, meta->swapped, y_canon, NULL);
        }
        rc = lpc_randomize_choice(y_canon, eps, &z_canon);
        y_canon = 0;
        if (rc != LP_OK) {
            rc = lpc_fail(c, LDPREF_ERNG, "randomized response failed");
            goto refuse;
        }
        flip = meta->swapped;
        if (lpc_ledger_memo_put(l, meta->memo_key, z_canon, eps, simulation) != LP_OK ||
            (meta->has_sketch &&
             lpc_ledger_memo_set_sketch(l, meta->memo_key, &meta->sketch) != LP_OK) ||
            lpc_ledger_spend(l, meta->memo_key, eps, c->server, task_id) != LP_OK)
            goto storage;
    } else if (rc != LP_OK) {
        goto storage;
    }
    if ((rc = sign_label(c, task_id, z_canon ^ flip, eps, msg, text)) != LDPREF_OK)
        goto refuse;
    if (lpc_ledger_outbox_put(l, c->server, task_id, *text, simulation) != LP_OK ||
        lpc_ledger_commit(l) != LP_OK)
        goto storage;
    *simulated = simulation != NULL;
    rc = LDPREF_OK;
    goto done;
storage:
    rc = lpc_fail(c, LDPREF_ESTORAGE, "ledger write failed; nothing was sent");
refuse:
    lpc_ledger_rollback(l);
done:
    free(simulation);
    if (rc != LDPREF_OK) {
        free(*text);
        free(*receipt);
        *text = *receipt = NULL;
        *simulated = 0;
    }
    return rc;
}

/* Memo metadata for a task given with its content. */
static int meta_from_task(ldpref_client *c, const ldpref_task *t, lpc_task_meta *m)
{
    if (t->prompt == NULL || t->a == NULL || t->b == NULL || t->task_id < 1)
        return lpc_fail(c, LDPREF_EINVALID_ARGUMENT, "task needs task_id >= 1, prompt, a and b");
    if (t->n_context > 0 && t->context == NULL)
        return lpc_fail(c, LDPREF_EINVALID_ARGUMENT, "task has n_context turns but no context");
    for (size_t k = 0; k < t->n_context; k++)
        if (t->context[k].role == NULL || t->context[k].content == NULL)
            return lpc_fail(c, LDPREF_EINVALID_ARGUMENT, "context turn %zu needs role and content",
                            k);
    if (lpc_task_meta_fill(lpc_ledger_secret(c->ledger), t, m) != LP_OK)
        return lpc_fail(c, LDPREF_ENO_MEMORY, "out of memory");
    return LDPREF_OK;
}

static int meta_from_id(ldpref_client *c, int64_t task_id, lpc_task_meta *m)
{
    int rc = lpc_ledger_task_get(c->ledger, c->server, task_id, m);
    if (rc == LP_ENOT_FOUND)
        return lpc_fail(c, LDPREF_EUNKNOWN_TASK,
                        "task %lld was not fetched through this ledger from %s", (long long)task_id,
                        c->server);
    return rc == LP_OK ? LDPREF_OK : lpc_fail(c, LDPREF_ESTORAGE, "ledger read failed");
}

static int check_choice(ldpref_client *c, int choice)
{
    if (choice != LDPREF_CHOICE_A && choice != LDPREF_CHOICE_B && choice != LDPREF_CHOICE_CANT_TELL)
        return lpc_fail(c, LDPREF_EINVALID_ARGUMENT,
                        "choice must be LDPREF_CHOICE_A, _B or _CANT_TELL (0, 1 or 2)");
    return LDPREF_OK;
}

static int begin_answer(ldpref_client *c, int choice)
{
    if (check_choice(c, choice) != LDPREF_OK)
        return LDPREF_EINVALID_ARGUMENT;
    if (!c->have_key)
        return lpc_fail(c, LDPREF_EKEY_FILE, "no key: set key_path (see ldpref_keygen)");
    lpc_ledger *l;
    return lpc_use_ledger(c, &l);
}

int lpc_answer_prepare(ldpref_client *c, const ldpref_task *t, int choice, lp_label_msg *msg,
                       int *existed, int *simulated)
{
    lpc_task_meta m;
    char *text = NULL, *receipt = NULL;
    int sim = 0;
    int rc = begin_answer(c, choice);
    if (rc == LDPREF_OK && (rc = meta_from_task(c, t, &m)) == LDPREF_OK)
        rc = prepare(c, t->task_id, &m, choice, msg, &text, &receipt, existed, &sim);
    if (simulated)
        *simulated = sim;
    free(text);
    free(receipt);
    return rc;
}

/* Parses a receipt object and checks it acknowledges msg. */
static int parse_receipt(ldpref_client *c, const json_t *obj, const lp_label_msg *msg,
                         ldpref_receipt *r)
{
    int64_t z;
    memset(r, 0, sizeof *r);
    if (lp_json_get_int(obj, "label_id", 1, INT64_MAX, &r->label_id, NULL, 0) != LP_OK ||
        lp_json_get_int(obj, "task_id", 1, INT64_MAX, &r->task_id, NULL, 0) != LP_OK ||
        lp_json_get_int(obj, "z", 0, 1, &z, NULL, 0) != LP_OK ||
        lp_json_get_epsilon(obj, "epsilon", &r->epsilon, NULL, 0) != LP_OK ||
        lp_json_get_int(obj, "received_at", 0, INT64_MAX, &r->received_at, NULL, 0) != LP_OK)
        return lpc_fail(c, LDPREF_EPROTOCOL, "the server's receipt is malformed");
    r->z = (int)z;
    if (r->task_id != msg->task_id || r->z != msg->z ||
        !(r->epsilon == msg->epsilon || fabs(r->epsilon - msg->epsilon) <= 1e-12 * msg->epsilon))
        return lpc_fail(c, LDPREF_EPROTOCOL, "the server's receipt does not match the label sent");
    return LDPREF_OK;
}

/* Parses a stored receipt text. */
static int stored_receipt(ldpref_client *c, const char *text, const lp_label_msg *msg,
                          ldpref_receipt *r)
{
    json_t *obj = NULL;
    int rc = lp_json_parse(text, strlen(text), LP_JSON_DEPTH_MAX, &obj, NULL, 0);
    if (rc == LP_OK)
        rc = parse_receipt(c, obj, msg, r);
    else
        rc = lpc_fail(c, LDPREF_ESTORAGE, "ledger: corrupt receipt");
    json_decref(obj);
    r->resent = 1;
    return rc;
}

/* Records a receipt object for task_id in the outbox. */
static int record_receipt(ldpref_client *c, int64_t task_id, const json_t *obj)
{
    char *text = json_dumps(obj, JSON_COMPACT);
    int rc =
        text ? lpc_ledger_outbox_set_receipt(c->ledger, c->server, task_id, text) : LP_ENO_MEMORY;
    free(text);
    return rc == LP_OK ? LDPREF_OK
                       : lpc_fail(c, LDPREF_ESTORAGE,
                                  "label accepted, but storing its receipt "
                                  "failed (a resend will fetch it again)");
}

static void record_error(ldpref_client *c, int64_t task_id, int code)
{
    (void)lpc_ledger_outbox_set_error(c->ledger, c->server, task_id, lp_error_name(code));
}

/*
 * After the server said stale_timestamp it holds no label for the task (it
 * checks for an existing label first), so a message with a fresh nonce and
 * timestamp, and the SAME z and epsilon, replaces the stored one.
 */
static int refresh_stale(ldpref_client *c, lp_label_msg *msg, char **text)
{
    char *fresh = NULL;
    lp_label_msg m2;
    int rc = sign_label(c, msg->task_id, msg->z, msg->epsilon, &m2, &fresh);
    if (rc != LDPREF_OK)
        return rc;
    if (lpc_ledger_outbox_replace(c->ledger, c->server, msg->task_id, fresh) != LP_OK) {
        free(fresh);
        return lpc_fail(c, LDPREF_ESTORAGE, "ledger: replacing a stale message failed");
    }
    free(*text);
    *text = fresh;
    *msg = m2;
    return LDPREF_OK;
}

/* Sends a stored message, refreshing it once if it went stale; records the
 * receipt or the error in the outbox. */
static int send_one(ldpref_client *c, lp_label_msg *msg, char **text, ldpref_receipt *out)
{
    for (int attempt = 0;; attempt++) {
        json_t *resp = NULL;
        long status = 0;
        int rc = lpc_call_text(c, "POST", "/v1/labels", *text, 0, LPC_RESP_CAP_ANNOTATOR, &resp,
                               &status);
        if (rc == LDPREF_ESTALE_TIMESTAMP && attempt == 0) {
            char saved[LPC_ERRMSG_MAX];
            memcpy(saved, c->errmsg, sizeof saved);
            if (refresh_stale(c, msg, text) == LDPREF_OK)
                continue;
            memcpy(c->errmsg, saved, sizeof saved);
        }
        if (rc != LDPREF_OK) {
            if (!lpc_not_delivered(rc))
                record_error(c, msg->task_id, rc);
            return rc;
        }
        ldpref_receipt r;
        rc = parse_receipt(c, resp, msg, &r);
        if (rc == LDPREF_OK) {
            r.resent = status == 200;
            rc = record_receipt(c, msg->task_id, resp);
            if (out)
                *out = r;
        }
        json_decref(resp);
        return rc;
    }
}

/* The result for a task id answered before: the stored (or now fetched)
 * receipt is delivered with LDPREF_EALREADY_ANSWERED. */
static int already_answered(ldpref_client *c, int64_t task_id)
{
    return lpc_fail(c, LDPREF_EALREADY_ANSWERED,
                    "task %lld was already answered on this device; a randomized answer can "
                    "never be changed, or repeated questions would reveal the true preference",
                    (long long)task_id);
}

/* Answers a task described by meta: prepare, then send; a task id answered
 * before gets its stored message resent if it still lacks a receipt, and
 * LDPREF_EALREADY_ANSWERED (unless that resend failed: its error). */
static int answer_meta(ldpref_client *c, int64_t task_id, const lpc_task_meta *m, int choice,
                       ldpref_receipt *out)
{
    lp_label_msg msg;
    char *text = NULL, *receipt = NULL;
    int existed = 0, simulated = 0;
    int rc = prepare(c, task_id, m, choice, &msg, &text, &receipt, &existed, &simulated);
    if (rc == LDPREF_OK) {
        ldpref_receipt r;
        if (receipt != NULL)
            rc = stored_receipt(c, receipt, &msg, &r);
        else
            rc = send_one(c, &msg, &text, &r);
        r.simulated = simulated;
        if (rc == LDPREF_OK && out)
            *out = r;
        if (rc == LDPREF_OK && existed)
            rc = already_answered(c, task_id);
    }
    free(text);
    free(receipt);
    return rc;
}

int ldpref_answer(ldpref_client *c, const ldpref_task *t, int choice, ldpref_receipt *out)
{
    if (c == NULL || t == NULL)
        return LDPREF_EINVALID_ARGUMENT;
    lpc_task_meta m;
    int rc = begin_answer(c, choice);
    if (rc == LDPREF_OK && (rc = meta_from_task(c, t, &m)) == LDPREF_OK)
        rc = answer_meta(c, t->task_id, &m, choice, out);
    return rc;
}

int ldpref_answer_id(ldpref_client *c, int64_t task_id, int choice, ldpref_receipt *out)
{
    if (c == NULL)
        return LDPREF_EINVALID_ARGUMENT;
    lpc_task_meta m;
    int rc = begin_answer(c, choice);
    if (rc == LDPREF_OK && (rc = meta_from_id(c, task_id, &m)) == LDPREF_OK)
        rc = answer_meta(c, task_id, &m, choice, out);
    return rc;
}

/* Per-item state of a batch. */
struct pending_item {
    size_t index; /* into the caller's items */
    lp_label_msg msg;
    char *text;
    int simulated;
    int existed; /* the task id was answered before: a resend */
};

static void item_fail(ldpref_batch_item *it, int code, const char *message)
{
    size_t n = strnlen(message, sizeof it->message - 1);
    it->error = code;
    memcpy(it->message, message, n);
    it->message[n] = '\0';
}

/* Sends one chunk of prepared messages and fills the items' results. */
static int send_chunk(ldpref_client *c, ldpref_batch_item *items, struct pending_item *p, size_t n)
{
    size_t len = 16;
    for (size_t i = 0; i < n; i++)
        len += strlen(p[i].text) + 1;
    char *body = malloc(len);
    if (body == NULL)
        return lpc_fail(c, LDPREF_ENO_MEMORY, "out of memory");
    /* The stored texts verbatim: the server sees the identical messages. */
    size_t off = (size_t)sprintf(body, "{\"labels\":[");
    for (size_t i = 0; i < n; i++) {
        size_t tl = strlen(p[i].text);
        if (i > 0)
            body[off++] = ',';
        memcpy(body + off, p[i].text, tl);
        off += tl;
    }
    memcpy(body + off, "]}", 3);
    json_t *resp = NULL;
    long status = 0;
    int rc = lpc_call_bounded(c, "POST", "/v1/labels/batch", body, 0,
                              n * LPC_RESP_CAP_PER_ITEM + LPC_ENVELOPE_BYTES,
                              n * LPC_VALUES_PER_ITEM + LPC_ENVELOPE_VALUES, &resp, &status);
    free(body);
    if (rc != LDPREF_OK)
        return rc;
    json_t *results = json_object_get(resp, "results");
    if (!json_is_array(results) || json_array_size(results) != n) {
        json_decref(resp);
        return lpc_fail(c, LDPREF_EPROTOCOL, "the batch answer has no matching \"results\"");
    }
    for (size_t i = 0; i < n; i++) {
        ldpref_batch_item *it = &items[p[i].index];
        json_t *r = json_array_get(results, i);
        json_t *err = json_object_get(r, "error");
        if (err != NULL) {
            const char *name = json_string_value(err);
            const char *message = json_string_value(json_object_get(r, "message"));
            int code = name ? lp_error_from_name(name) : -1;
            if (code <= 0)
                code = LDPREF_EPROTOCOL;
            char buf[256];
            snprintf(buf, sizeof buf, "server: %.60s: %.160s", name ? name : "?",
                     message ? message : "");
            item_fail(it, code, buf);
            record_error(c, p[i].msg.task_id, code);
            continue;
        }
        ldpref_receipt rec;
        int irc = parse_receipt(c, r, &p[i].msg, &rec);
        if (irc == LDPREF_OK) {
            int64_t st = 0;
            rec.resent = lp_json_get_int(r, "status", 0, 999, &st, NULL, 0) == LP_OK && st == 200;
            irc = record_receipt(c, p[i].msg.task_id, r);
        }
        if (irc != LDPREF_OK) {
            item_fail(it, irc, c->errmsg);
        } else {
            it->error = p[i].existed ? LDPREF_EALREADY_ANSWERED : LDPREF_OK;
            it->receipt = rec;
            it->receipt.simulated = p[i].simulated;
            if (p[i].existed)
                item_fail(it, LDPREF_EALREADY_ANSWERED, "already answered on this device");
        }
    }
    json_decref(resp);
    return LDPREF_OK;
}

/* The position among the chunk's n pending items of one for task_id, or n. */
static size_t same_task_pending(const struct pending_item *p, size_t n, int64_t task_id)
{
    size_t k = 0;
    while (k < n && p[k].msg.task_id != task_id)
        k++;
    return k;
}

static size_t *dup_table(size_t n)
{
    size_t *t = malloc(n * sizeof *t);
    for (size_t i = 0; t && i < n; i++)
        t[i] = SIZE_MAX;
    return t;
}

/* A repeated item's outcome from the item it repeats: its receipt with
 * LDPREF_EALREADY_ANSWERED, or its error. */
static void copy_outcome(ldpref_batch_item *repeat, const ldpref_batch_item *first)
{
    if (first->error == LDPREF_OK || first->error == LDPREF_EALREADY_ANSWERED) {
        repeat->receipt = first->receipt;
        repeat->receipt.resent = 1;
    } else {
        item_fail(repeat, first->error, first->message);
    }
}

int ldpref_answer_batch(ldpref_client *c, ldpref_batch_item *items, size_t n)
{
    if (c == NULL || (items == NULL && n > 0))
        return LDPREF_EINVALID_ARGUMENT;
    if (n == 0)
        return LDPREF_OK;
    int rc = begin_answer(c, 0);
    if (rc != LDPREF_OK)
        return rc;
    struct pending_item *p = calloc(n < LPC_BATCH_MAX ? n : LPC_BATCH_MAX, sizeof *p);
    if (p == NULL)
        return lpc_fail(c, LDPREF_ENO_MEMORY, "out of memory");
    size_t np = 0, chunk_start = 0;
    size_t *dup_of = NULL; /* per item: the item of this chunk it repeats, or SIZE_MAX */
    for (size_t i = 0; i < n && rc == LDPREF_OK; i++) {
        ldpref_batch_item *it = &items[i];
        memset(&it->receipt, 0, sizeof it->receipt);
        it->message[0] = '\0';
        lpc_task_meta m;
        int64_t task_id = it->task ? it->task->task_id : it->task_id;
        int irc = check_choice(c, it->choice);
        if (irc == LDPREF_OK)
            irc = it->task ? meta_from_task(c, it->task, &m) : meta_from_id(c, task_id, &m);
        char *receipt = NULL;
        int existed = 0;
        if (irc == LDPREF_OK)
            irc = prepare(c, task_id, &m, it->choice, &p[np].msg, &p[np].text, &receipt, &existed,
                          &p[np].simulated);
        if (irc == LDPREF_OK && receipt != NULL) {
            irc = stored_receipt(c, receipt, &p[np].msg, &it->receipt);
            it->receipt.simulated = p[np].simulated;
            free(p[np].text);
            p[np].text = NULL;
            if (irc == LDPREF_OK)
                irc = LDPREF_EALREADY_ANSWERED; /* existed: only stored messages have receipts */
            item_fail(it, irc,
                      irc == LDPREF_EALREADY_ANSWERED ? "already answered on this device"
                                                      : c->errmsg);
        } else if (irc == LDPREF_OK && existed && same_task_pending(p, np, task_id) < np) {
            /* A repeat of an item of this chunk: not sent twice; it gets that
             * item's receipt once the chunk is answered. */
            if (dup_of == NULL && (dup_of = dup_table(n)) == NULL)
                rc = lpc_fail(c, LDPREF_ENO_MEMORY, "out of memory");
            else
                dup_of[i] = p[same_task_pending(p, np, task_id)].index;
            free(p[np].text);
            p[np].text = NULL;
            item_fail(it, LDPREF_EALREADY_ANSWERED, "already answered on this device");
        } else if (irc == LDPREF_OK) {
            p[np].existed = existed;
            p[np++].index = i;
            it->error = LDPREF_EINTERNAL; /* until the server answers */
        } else {
            item_fail(it, irc, c->errmsg);
            if (irc == LDPREF_ESTORAGE)
                rc = irc; /* the ledger failing stops the batch */
        }
        free(receipt);
        if (rc == LDPREF_OK && (np == LPC_BATCH_MAX || (i + 1 == n && np > 0))) {
            rc = send_chunk(c, items, p, np);
            for (size_t k = 0; k < np; k++) {
                if (rc != LDPREF_OK)
                    item_fail(&items[p[k].index], rc, c->errmsg);
                free(p[k].text);
                p[k].text = NULL;
            }
            for (size_t j = chunk_start; dup_of && j <= i; j++)
                if (dup_of[j] != SIZE_MAX)
                    copy_outcome(&items[j], &items[dup_of[j]]);
            np = 0;
            chunk_start = i + 1;
        }
    }
    for (size_t k = 0; k < np; k++)
        free(p[k].text);
    free(p);
    free(dup_of);
    return rc;
}

int ldpref_resend_pending(ldpref_client *c, size_t *sent, size_t *pending)
{
    if (sent)
        *sent = 0;
    if (pending)
        *pending = 0;
    if (c == NULL)
        return LDPREF_EINVALID_ARGUMENT;
    int rc = begin_answer(c, 0);
    if (rc != LDPREF_OK)
        return rc;
    int64_t *ids = NULL;
    size_t n = 0, ok = 0;
    int first_error = LDPREF_OK;
    char first_msg[LPC_ERRMSG_MAX] = "";
    if (lpc_ledger_outbox_pending(c->ledger, c->server, &ids, &n) != LP_OK)
        return lpc_fail(c, LDPREF_ESTORAGE, "ledger read failed");
    for (size_t i = 0; i < n; i++) {
        char *text = NULL;
        lp_label_msg msg;
        if (lpc_ledger_outbox_get(c->ledger, c->server, ids[i], &text, NULL, NULL) != LP_OK) {
            rc = lpc_fail(c, LDPREF_ESTORAGE, "ledger read failed");
            break;
        }
        rc = decode_stored(c, text, &msg);
        if (rc == LDPREF_OK)
            rc = send_one(c, &msg, &text, NULL);
        free(text);
        if (rc == LDPREF_OK) {
            ok++;
        } else if (lpc_not_delivered(rc) || rc == LDPREF_ESTORAGE || rc == LDPREF_EUNAVAILABLE ||
                   rc == LDPREF_ESTORAGE_UNHEALTHY) {
            break; /* no point trying the rest now */
        } else if (first_error == LDPREF_OK) {
            first_error = rc; /* per-message rejection, recorded in the outbox */
            memcpy(first_msg, c->errmsg, sizeof first_msg);
        }
        rc = LDPREF_OK;
    }
    free(ids);
    if (sent)
        *sent = ok;
    if (pending)
        *pending = n - ok;
    if (rc == LDPREF_OK && first_error != LDPREF_OK)
        rc = lpc_fail(c, first_error, "%zu of %zu pending messages still lack a receipt; first: %s",
                      n - ok, n, first_msg);
    return rc;
}

int ldpref_budget_get(ldpref_client *c, ldpref_budget *out)
{
    if (c == NULL || out == NULL)
        return LDPREF_EINVALID_ARGUMENT;
    lpc_ledger *l;
    int rc = lpc_use_ledger(c, &l);
    if (rc != LDPREF_OK)
        return rc;
    memset(out, 0, sizeof *out);
    out->max_epsilon_per_label = c->cap_label;
    out->max_epsilon_total = c->cap_total;
    if (lpc_ledger_spent(l, &out->spent) != LP_OK ||
        lpc_ledger_counts(l, &out->labels, NULL, NULL, &out->pending) != LP_OK ||
        lpc_ledger_count_simulated(l, &out->simulated) != LP_OK)
        return lpc_fail(c, LDPREF_ESTORAGE, "ledger read failed");
    return LDPREF_OK;
}
