/*
 * client.c — the libldpref handle: options, open/close, error details, the
 * JSON-over-HTTP exchange with the server, enrollment and task fetching.
 * The privacy core (answering) is in answer.c, operator calls in admin.c.
 */
#include "internal.h"

#include "clock.h"
#include "error.h"
#include "rr.h"
#include "wire.h"

#include <math.h>
#include <sodium.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <errno.h>
#include <time.h>
#include <unistd.h>

#define LPC_TEXT_MAX 65536 /* prompt / response / one turn, bytes (protocol cap) */
#define LPC_TURNS_MAX 32   /* context turns of one task (protocol cap) */

void ldpref_options_init(ldpref_options *o)
{
    memset(o, 0, sizeof *o);
    o->server_url = "http://127.0.0.1:8080";
    o->max_epsilon_per_label = 1.0;
    o->max_epsilon_total = 100.0; /* docs/client.md "The total cap" */
    o->timeout_ms = 30000;
    o->connect_timeout_ms = 5000;
}

int ldpref_set_max_task_bytes(ldpref_client *c, size_t bytes)
{
    if (c == NULL)
        return LDPREF_EINVALID_ARGUMENT;
    if (bytes < LDPREF_MAX_TASK_BYTES_MIN || bytes > LDPREF_MAX_TASK_BYTES_LIMIT)
        return lpc_fail(c, LDPREF_EINVALID_ARGUMENT,
                        "the largest task must be %d..%d bytes, not %zu", LDPREF_MAX_TASK_BYTES_MIN,
                        LDPREF_MAX_TASK_BYTES_LIMIT, bytes);
    c->max_task_bytes = bytes;
    return LDPREF_OK;
}

int lpc_fail(ldpref_client *c, int code, const char *fmt, ...)
{
    if (c != NULL) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(c->errmsg, sizeof c->errmsg, fmt, ap);
        va_end(ap);
    }
    return code;
}

const char *ldpref_errmsg(const ldpref_client *c)
{
    return c == NULL ? "no client handle" : c->errmsg;
}

void ldpref_free(void *p)
{
    free(p);
}

static char *dup_or_null(const char *s, int *oom)
{
    if (s == NULL)
        return NULL;
    char *d = strdup(s);
    if (d == NULL)
        *oom = 1;
    return d;
}

int ldpref_client_open(const ldpref_options *opts, ldpref_client **out)
{
    if (out == NULL)
        return LDPREF_EINVALID_ARGUMENT;
    *out = NULL;
    if (opts == NULL)
        return LDPREF_EINVALID_ARGUMENT;
    if (lp_rng_init() != LP_OK)
        return LDPREF_ERNG;
    ldpref_client *c = calloc(1, sizeof *c);
    if (c == NULL)
        return LDPREF_ENO_MEMORY;
    int rc = LDPREF_OK, oom = 0;
    const char *url = opts->server_url;
    size_t ulen = url ? strlen(url) : 0;
    if (url == NULL || ulen == 0 || ulen >= sizeof c->server ||
        (strncmp(url, "http://", 7) != 0 && strncmp(url, "https://", 8) != 0)) {
        rc = lpc_fail(c, LDPREF_EINVALID_ARGUMENT, "server_url must be an http:// or https:// URL");
        goto fail;
    }
    memcpy(c->server, url, ulen + 1);
    while (ulen > 0 && c->server[ulen - 1] == '/')
        c->server[--ulen] = '\0';
    if (isnan(opts->max_epsilon_per_label) || opts->max_epsilon_per_label <= 0 ||
        isnan(opts->max_epsilon_total) || opts->max_epsilon_total <= 0) {
        rc = lpc_fail(c, LDPREF_EBAD_EPSILON, "epsilon caps must be > 0");
        goto fail;
    }
    if (opts->timeout_ms <= 0 || opts->connect_timeout_ms <= 0) {
        rc = lpc_fail(c, LDPREF_EINVALID_ARGUMENT, "timeouts must be > 0 ms");
        goto fail;
    }
    if (opts->operator_token) {
        size_t tlen = strlen(opts->operator_token);
        if (tlen > LP_TOKEN_MAX || strpbrk(opts->operator_token, "\r\n")) {
            rc = lpc_fail(c, LDPREF_EINVALID_ARGUMENT, "operator token is malformed");
            goto fail;
        }
        memcpy(c->operator_token, opts->operator_token, tlen + 1);
    }
    if ((opts->key_path && strlen(opts->key_path) > LDPREF_PATH_MAX) ||
        (opts->ledger_path && strlen(opts->ledger_path) > LDPREF_PATH_MAX)) {
        rc = lpc_fail(c, LDPREF_EINVALID_ARGUMENT, "path too long");
        goto fail;
    }
    /* CTL simulation: validated even when off, so a typo never goes unnoticed. */
    if (isnan(opts->simulate_ctl_alpha) || opts->simulate_ctl_alpha < 0 ||
        opts->simulate_ctl_alpha > 0.5) {
        rc = lpc_fail(c, LDPREF_EINVALID_ARGUMENT, "simulate_ctl_alpha must be in [0, 0.5]");
        goto fail;
    }
    c->ctl.alpha = opts->simulate_ctl_alpha;
    c->ctl.seed = opts->simulate_ctl_seed;
    c->ctl.strategy = LP_ADV_FLIP;
    if (opts->simulate_ctl_strategy &&
        lpc_ctl_parse_strategy(opts->simulate_ctl_strategy, &c->ctl.strategy, c->errmsg,
                               sizeof c->errmsg) != LP_OK) {
        rc = LDPREF_EINVALID_ARGUMENT;
        goto fail;
    }
    c->max_task_bytes = LDPREF_MAX_TASK_BYTES_DEFAULT;
    c->cap_label = opts->max_epsilon_per_label;
    c->cap_total = opts->max_epsilon_total;
    c->timeout_ms = opts->timeout_ms;
    c->connect_timeout_ms = opts->connect_timeout_ms;
    c->key_path = dup_or_null(opts->key_path, &oom);
    if (opts->ca_file && access(opts->ca_file, R_OK) != 0) {
        rc = lpc_fail(c, LDPREF_EINVALID_ARGUMENT, "ca_file %.200s: %s", opts->ca_file,
                      strerror(errno));
        goto fail;
    }
    c->ca_file = dup_or_null(opts->ca_file, &oom);
    if (opts->ledger_path) {
        c->ledger_path = dup_or_null(opts->ledger_path, &oom);
    } else if (opts->key_path) {
        size_t n = strlen(opts->key_path) + sizeof ".ledger";
        if ((c->ledger_path = malloc(n)) != NULL)
            snprintf(c->ledger_path, n, "%s.ledger", opts->key_path);
        else
            oom = 1;
    }
    if (oom) {
        rc = LDPREF_ENO_MEMORY;
        goto fail;
    }
    if (c->key_path) {
        rc = lpc_key_load(c->key_path, c->sk, c->pk, c->errmsg, sizeof c->errmsg);
        if (rc != LDPREF_OK)
            goto fail;
        c->have_key = 1;
    }
    if ((rc = lpc_http_new(c->timeout_ms, c->connect_timeout_ms, c->ca_file, &c->http)) !=
        LDPREF_OK)
        goto fail;
    c->errmsg[0] = '\0';
    *out = c;
    return LDPREF_OK;
fail:
    ldpref_client_close(c);
    return rc;
}

void ldpref_client_close(ldpref_client *c)
{
    if (c == NULL)
        return;
    lpc_ledger_close(c->ledger);
    lpc_http_free(c->http);
    free(c->key_path);
    free(c->ledger_path);
    free(c->ca_file);
    sodium_memzero(c, sizeof *c);
    free(c);
}

int lpc_use_ledger(ldpref_client *c, lpc_ledger **out)
{
    if (c->ledger == NULL) {
        if (c->ledger_path == NULL)
            return lpc_fail(c, LDPREF_EINVALID_ARGUMENT, "no ledger: set key_path or ledger_path");
        int rc = lpc_ledger_open(c->ledger_path, &c->ledger, c->errmsg, sizeof c->errmsg);
        if (rc != LP_OK)
            return rc;
    }
    *out = c->ledger;
    return LDPREF_OK;
}

int ldpref_public_key(const ldpref_client *c, char out[LDPREF_KEY_B64_SIZE])
{
    if (c == NULL || out == NULL)
        return LDPREF_EINVALID_ARGUMENT;
    if (!c->have_key)
        return LDPREF_EKEY_FILE;
    char b64[LP_B64_MAX];
    lp_b64_encode(c->pk, LP_KEY_BYTES, b64);
    _Static_assert(LDPREF_KEY_B64_SIZE > 43, "room for 32 bytes of base64url");
    memcpy(out, b64, strlen(b64) + 1); /* 43 characters */
    return LDPREF_OK;
}

int lpc_server_error(ldpref_client *c, long status, const char *body, size_t len)
{
    json_t *root = NULL;
    const char *name = NULL, *message = NULL;
    if (lp_json_parse(body, len, LP_JSON_DEPTH_MAX, &root, NULL, 0) != LP_OK ||
        lp_json_get_string(root, "error", 64, &name, NULL, 0) != LP_OK) {
        json_decref(root);
        return lpc_fail(c, LDPREF_EPROTOCOL, "server answered HTTP %ld without an error object",
                        status);
    }
    if (lp_json_get_string(root, "message", 4096, &message, NULL, 0) != LP_OK)
        message = "";
    int code = lp_error_from_name(name);
    if (code <= 0)
        code = lpc_fail(c, LDPREF_EPROTOCOL, "server: unknown error \"%.64s\" (HTTP %ld): %.200s",
                        name, status, message);
    else
        lpc_fail(c, code, "server: %s: %.400s", name, message);
    json_decref(root);
    return code;
}

/*
 * Sends body (borrowed text) and returns the raw answer: on a 2xx, *resp is
 * the body (malloc'ed; free()), otherwise the mapped error.
 */
static int call_raw(ldpref_client *c, const char *method, const char *path,
                    const char *content_type, const char *body, size_t body_len, int bearer,
                    size_t resp_cap, char **resp, size_t *resp_len, long *status)
{
    char url[LPC_SERVER_MAX + 512];
    snprintf(url, sizeof url, "%s%s", c->server, path);
    if (bearer == LPC_TOKEN && c->operator_token[0] == '\0')
        return lpc_fail(c, LDPREF_EUNAUTHORIZED, "this call needs an operator token");
    lpc_http_req req = {
        .method = method,
        .url = url,
        .content_type = content_type,
        .body = body,
        .body_len = body_len,
        .bearer = bearer != LPC_NO_TOKEN && c->operator_token[0] != '\0' ? c->operator_token : NULL,
        .resp_cap = resp_cap};
    char *text = NULL;
    size_t len = 0;
    long retry_after = 0, waited_ms = 0;
    req.retry_after = &retry_after;
    int rc;
    /* A 429 means the server did nothing: wait as it asks and send again,
     * while the wait is short and the call's timeout allows it. */
    for (int attempt = 0;; attempt++) {
        rc = lpc_http_do(c->http, &req, status, &text, &len, c->errmsg, sizeof c->errmsg);
        if (rc != LP_OK || *status != 429 || attempt >= LPC_RATE_RETRIES || retry_after < 1 ||
            retry_after > LPC_RATE_WAIT_MAX_S || waited_ms + retry_after * 1000 > c->timeout_ms)
            break;
        free(text);
        text = NULL;
        struct timespec ts = {.tv_sec = retry_after};
        while (nanosleep(&ts, &ts) != 0 && errno == EINTR) {
        }
        waited_ms += retry_after * 1000;
    }
    if (rc != LP_OK)
        return rc;
    if (*status < 200 || *status >= 300) {
        rc = lpc_server_error(c, *status, text, len);
        free(text);
        return rc;
    }
    *resp = text;
    *resp_len = len;
    return LDPREF_OK;
}

/* Parses an answer that passed the byte cap, if its nesting and its number
 * of values are within what the request can need. */
static int parse_bounded(ldpref_client *c, const char *path, const char *text, size_t len,
                         size_t values_cap, json_t **resp)
{
    size_t values = 0;
    lp_json_shape(text, len, NULL, &values); /* before the parser's first allocation */
    if (values > values_cap)
        return lpc_fail(c, LDPREF_ERESPONSE_TOO_COMPLEX,
                        "the server's answer to %s holds up to %zu JSON values, more than the %zu "
                        "this request can need",
                        path, values, values_cap);
    char msg[LP_MSG_MAX];
    int rc = lp_json_parse(text, len, LP_JSON_DEPTH_MAX, resp, msg, sizeof msg);
    if (rc == LP_ETOO_DEEP)
        return lpc_fail(c, LDPREF_ERESPONSE_TOO_COMPLEX, "the server's answer to %s: %s", path,
                        msg);
    if (rc != LP_OK)
        return lpc_fail(c, LDPREF_EPROTOCOL, "server's answer to %s is not JSON: %s", path, msg);
    return LDPREF_OK;
}

int lpc_call_bounded(ldpref_client *c, const char *method, const char *path, const char *body,
                     int bearer, size_t resp_cap, size_t values_cap, json_t **resp, long *status)
{
    char *text = NULL;
    size_t len = 0;
    *resp = NULL;
    int rc = call_raw(c, method, path, body ? "application/json" : NULL, body,
                      body ? strlen(body) : 0, bearer, resp_cap, &text, &len, status);
    if (rc != LDPREF_OK)
        return rc;
    rc = parse_bounded(c, path, text, len, values_cap, resp);
    free(text);
    return rc;
}

int lpc_call_text(ldpref_client *c, const char *method, const char *path, const char *body,
                  int bearer, size_t resp_cap, json_t **resp, long *status)
{
    return lpc_call_bounded(c, method, path, body, bearer, resp_cap, resp_cap, resp, status);
}

int lpc_call_json(ldpref_client *c, const char *method, const char *path, const json_t *req,
                  int bearer, size_t resp_cap, json_t **resp, long *status)
{
    char *body = NULL;
    *resp = NULL;
    if (req != NULL && (body = json_dumps(req, JSON_COMPACT)) == NULL)
        return lpc_fail(c, LDPREF_ENO_MEMORY, "encoding the request");
    int rc = lpc_call_text(c, method, path, body, bearer, resp_cap, resp, status);
    free(body);
    return rc;
}

int lpc_post(ldpref_client *c, const char *path, json_t *req, size_t resp_cap, json_t **resp)
{
    *resp = NULL;
    if (req == NULL)
        return lpc_fail(c, LDPREF_ENO_MEMORY, "encoding the request");
    long status = 0;
    int rc = lpc_call_json(c, "POST", path, req, 0, resp_cap, resp, &status);
    json_decref(req);
    return rc;
}

int lpc_not_delivered(int rc)
{
    return rc == LDPREF_ENETWORK || rc == LDPREF_ECERTIFICATE_UNTRUSTED || rc == LDPREF_ETLS_FAILED;
}

int lpc_need_key(ldpref_client *c)
{
    if (!c->have_key)
        return lpc_fail(c, LDPREF_EKEY_FILE, "no key: set key_path (see ldpref_keygen)");
    return LDPREF_OK;
}

static void copy_str(char *dst, size_t cap, const char *src)
{
    snprintf(dst, cap, "%s", src ? src : "");
}

int ldpref_enroll(ldpref_client *c, const char *token, ldpref_enrollment *out)
{
    if (c == NULL || token == NULL)
        return LDPREF_EINVALID_ARGUMENT;
    int rc = lpc_need_key(c);
    if (rc != LDPREF_OK)
        return rc;
    size_t tlen = strlen(token);
    if (tlen == 0 || tlen > LP_TOKEN_MAX)
        return lpc_fail(c, LDPREF_ETOO_LONG, "enrollment token must be 1..%d bytes", LP_TOKEN_MAX);
    lp_enroll_msg m;
    memset(&m, 0, sizeof m);
    memcpy(m.key, c->pk, LP_KEY_BYTES);
    memcpy(m.token, token, tlen + 1);
    lp_sign_enroll(&m, c->sk);
    json_t *req = lp_wire_enroll_encode(&m), *resp = NULL;
    sodium_memzero(&m, sizeof m);
    rc = lpc_post(c, "/v1/annotators", req, LPC_RESP_CAP_ANNOTATOR, &resp);
    if (rc != LDPREF_OK)
        return rc;
    ldpref_enrollment e;
    memset(&e, 0, sizeof e);
    const char *pseudonym = NULL, *campaign = NULL;
    if (lp_json_get_int(resp, "annotator_id", 0, INT64_MAX, &e.annotator_id, NULL, 0) != LP_OK ||
        lp_json_get_string(resp, "pseudonym", sizeof e.pseudonym - 1, &pseudonym, NULL, 0) !=
            LP_OK ||
        lp_json_get_string(resp, "campaign", sizeof e.campaign - 1, &campaign, NULL, 0) != LP_OK ||
        lp_json_get_epsilon(resp, "epsilon_budget", &e.epsilon_budget, NULL, 0) != LP_OK) {
        json_decref(resp);
        return lpc_fail(c, LDPREF_EPROTOCOL, "unexpected enrollment answer");
    }
    copy_str(e.pseudonym, sizeof e.pseudonym, pseudonym);
    copy_str(e.campaign, sizeof e.campaign, campaign);
    json_decref(resp);
    if (out)
        *out = e;
    return LDPREF_OK;
}

void ldpref_tasks_free(ldpref_task *tasks, size_t n)
{
    if (tasks == NULL)
        return;
    for (size_t i = 0; i < n; i++) {
        free(tasks[i].campaign);
        free(tasks[i].prompt);
        free(tasks[i].a);
        free(tasks[i].b);
        for (size_t k = 0; k < tasks[i].n_context; k++) {
            free(tasks[i].context[k].role);
            free(tasks[i].context[k].content);
        }
        free(tasks[i].context);
    }
    free(tasks);
}

/* The "context" of a task object (absent: none, as from servers before
 * conversations) into t->context (strings copied). */
static int parse_context(const json_t *obj, ldpref_task *t, char *msg, size_t msglen)
{
    static const char *const roles[] = {"system", "user", "assistant", NULL};
    const json_t *arr = json_object_get(obj, "context");
    if (arr == NULL)
        return LP_OK;
    if (!json_is_array(arr) || json_array_size(arr) > LPC_TURNS_MAX)
        return lp_fail(LP_EPROTOCOL, msg, msglen, "\"context\" must be a list of at most %d turns",
                       LPC_TURNS_MAX);
    size_t n = json_array_size(arr);
    if (n == 0)
        return LP_OK;
    if ((t->context = calloc(n, sizeof *t->context)) == NULL)
        return LP_ENO_MEMORY;
    for (size_t k = 0; k < n; k++) {
        const json_t *turn = json_array_get(arr, k);
        const char *role, *content;
        if (lp_json_get_string(turn, "role", 16, &role, msg, msglen) != LP_OK ||
            lp_json_get_string(turn, "content", LPC_TEXT_MAX, &content, msg, msglen) != LP_OK)
            return LP_EPROTOCOL;
        int known = 0;
        for (const char *const *r = roles; *r != NULL && !known; r++)
            known = strcmp(*r, role) == 0;
        if (!known)
            return lp_fail(LP_EPROTOCOL, msg, msglen, "context turn %zu has an unknown role", k);
        t->context[k].role = strdup(role);
        t->context[k].content = strdup(content);
        t->n_context = k + 1; /* freed with the task from here on */
        if (!t->context[k].role || !t->context[k].content)
            return LP_ENO_MEMORY;
    }
    return LP_OK;
}

/* The task's "trust": 1 central, 0 local or absent (a server before 0.5),
 * -1 anything else. */
static int task_trust(const json_t *obj)
{
    const json_t *t = json_object_get(obj, "trust");
    if (t == NULL || (json_is_string(t) && strcmp(json_string_value(t), "local") == 0))
        return 0;
    return json_is_string(t) && strcmp(json_string_value(t), "central") == 0 ? 1 : -1;
}

/* Parses one task object of the next-tasks answer into t (strings copied). */
static int parse_task(const json_t *obj, ldpref_task *t, char *msg, size_t msglen)
{
    const char *campaign, *prompt, *a, *b;
    int rc;
    if (!json_is_object(obj))
        return lp_fail(LP_EPROTOCOL, msg, msglen, "a task is not an object");
    if ((rc = lp_json_get_int(obj, "task_id", 1, INT64_MAX, &t->task_id, msg, msglen)) != LP_OK ||
        (rc = lp_json_get_string(obj, "campaign", LPC_CAMPAIGN_MAX, &campaign, msg, msglen)) !=
            LP_OK ||
        (rc = lp_json_get_string(obj, "prompt", LPC_TEXT_MAX, &prompt, msg, msglen)) != LP_OK ||
        (rc = lp_json_get_string(obj, "a", LPC_TEXT_MAX, &a, msg, msglen)) != LP_OK ||
        (rc = lp_json_get_string(obj, "b", LPC_TEXT_MAX, &b, msg, msglen)) != LP_OK ||
        (rc = lp_json_get_epsilon(obj, "epsilon", &t->epsilon_proposed, msg, msglen)) != LP_OK ||
        (rc = lp_json_get_epsilon(obj, "epsilon_min", &t->epsilon_min, msg, msglen)) != LP_OK ||
        (rc = lp_json_get_epsilon(obj, "epsilon_max", &t->epsilon_max, msg, msglen)) != LP_OK)
        return LP_EPROTOCOL;
    if (!lp_campaign_name_valid(campaign, LPC_CAMPAIGN_MAX))
        return lp_fail(LP_EPROTOCOL, msg, msglen, "a task's campaign name is not [A-Za-z0-9._-]");
    if (task_trust(obj) < 0)
        return lp_fail(LP_EPROTOCOL, msg, msglen, "a task's \"trust\" is not local or central");
    t->campaign = strdup(campaign);
    t->prompt = strdup(prompt);
    t->a = strdup(a);
    t->b = strdup(b);
    if (!t->campaign || !t->prompt || !t->a || !t->b)
        return LP_ENO_MEMORY;
    return parse_context(obj, t, msg, msglen);
}

/* Remembers the fetched tasks (memo key, orientation, epsilon range). */
static int cache_tasks(ldpref_client *c, const ldpref_task *tasks, size_t n)
{
    lpc_ledger *l;
    int rc = lpc_use_ledger(c, &l);
    if (rc != LDPREF_OK)
        return rc;
    if (lpc_ledger_begin(l) != LP_OK)
        return lpc_fail(c, LDPREF_ESTORAGE, "ledger busy or failing");
    lpc_task_meta *m = malloc(sizeof *m);
    if (m == NULL)
        rc = LP_ENO_MEMORY;
    for (size_t i = 0; i < n && rc == LP_OK; i++) {
        rc = lpc_task_meta_fill(lpc_ledger_secret(l), &tasks[i], m);
        if (rc == LP_OK)
            rc = lpc_ledger_task_put(l, c->server, tasks[i].task_id, m);
    }
    free(m);
    if (rc == LP_OK && lpc_ledger_commit(l) == LP_OK)
        return LDPREF_OK;
    lpc_ledger_rollback(l);
    return lpc_fail(c, LDPREF_ESTORAGE, "ledger: storing fetched tasks failed");
}

int ldpref_next_tasks(ldpref_client *c, int count, ldpref_task **tasks, size_t *n)
{
    if (tasks)
        *tasks = NULL;
    if (n)
        *n = 0;
    if (c == NULL || tasks == NULL || n == NULL)
        return LDPREF_EINVALID_ARGUMENT;
    if (count < 1 || count > 1000)
        return lpc_fail(c, LDPREF_EINVALID_ARGUMENT, "count must be 1..1000");
    int rc = lpc_need_key(c);
    if (rc != LDPREF_OK)
        return rc;
    lp_next_msg m;
    memset(&m, 0, sizeof m);
    memcpy(m.key, c->pk, LP_KEY_BYTES);
    m.count = (uint32_t)count;
    m.timestamp_ms = lp_now_ms();
    lp_sign_next(&m, c->sk);
    /* The answer can need count tasks of at most max_task_bytes each, and
     * no more values than count tasks with their fields and turns hold. */
    json_t *resp = NULL, *req = lp_wire_next_encode(&m);
    char *body = req ? json_dumps(req, JSON_COMPACT) : NULL;
    json_decref(req);
    if (body == NULL)
        return lpc_fail(c, LDPREF_ENO_MEMORY, "encoding the request");
    long status = 0;
    rc =
        lpc_call_bounded(c, "POST", "/v1/tasks/next", body, 0,
                         (size_t)count * c->max_task_bytes + LPC_ENVELOPE_BYTES,
                         (size_t)count * LPC_TASK_VALUES_MAX + LPC_ENVELOPE_VALUES, &resp, &status);
    free(body);
    if (rc != LDPREF_OK)
        return rc;
    json_t *arr = json_object_get(resp, "tasks");
    size_t count_got = json_array_size(arr);
    if (!json_is_array(arr) || count_got > (size_t)count) {
        json_decref(resp);
        return lpc_fail(c, LDPREF_EPROTOCOL, "the answer has no valid \"tasks\" array");
    }
    if (count_got == 0) {
        json_decref(resp);
        return lpc_fail(c, LDPREF_ENO_TASK, "no task available");
    }
    ldpref_task *out = calloc(count_got, sizeof *out);
    if (out == NULL) {
        json_decref(resp);
        return lpc_fail(c, LDPREF_ENO_MEMORY, "out of memory");
    }
    char msg[LP_MSG_MAX];
    for (size_t i = 0; i < count_got && rc == LDPREF_OK; i++) {
        rc = parse_task(json_array_get(arr, i), &out[i], msg, sizeof msg);
        if (rc != LP_OK)
            rc = lpc_fail(c, rc, "task %zu of the answer: %s", i, msg);
        else if (task_trust(json_array_get(arr, i)) == 1)
            snprintf(c->central_campaign, sizeof c->central_campaign, "%s", out[i].campaign);
    }
    json_decref(resp);
    if (rc == LDPREF_OK)
        rc = cache_tasks(c, out, count_got);
    if (rc != LDPREF_OK) {
        ldpref_tasks_free(out, count_got);
        return rc;
    }
    *tasks = out;
    *n = count_got;
    return LDPREF_OK;
}

int ldpref_task_central(const ldpref_client *c, const ldpref_task *t)
{
    return c != NULL && t != NULL && t->campaign != NULL && c->central_campaign[0] != '\0' &&
           strcmp(c->central_campaign, t->campaign) == 0;
}
