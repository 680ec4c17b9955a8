/* taskfile.c — JSONL task upload parsing. See taskfile.h. */
#include "taskfile.h"

#include "error.h"
#include "wire.h"

#include <math.h>
#include <sodium.h>
#include <stdlib.h>
#include <string.h>

/* Everything a parsed line owns. */
struct line_store {
    json_t *doc;
    char id[LP_TASK_ID_MAX + 3]; /* "h:" + 32 hex, or the supplied id */
    double *f0, *f1;
    lp_turn *turns; /* the context; strings borrowed from doc */
};

struct priv {
    struct line_store *lines;
    size_t n, cap;
};

static void priv_free(struct priv *p)
{
    if (p == NULL)
        return;
    for (size_t i = 0; i < p->n; i++) {
        json_decref(p->lines[i].doc);
        free(p->lines[i].f0);
        free(p->lines[i].f1);
        free(p->lines[i].turns);
    }
    free(p->lines);
    free(p);
}

void lp_taskfile_free(lp_taskfile *tf)
{
    if (tf == NULL)
        return;
    priv_free(tf->priv);
    free(tf->tasks);
    memset(tf, 0, sizeof *tf);
}

static int text_field(const json_t *o, const char *key, const char **out, char *why, size_t wl)
{
    return lp_json_get_string(o, key, LP_TASK_TEXT_MAX, out, why, wl);
}

/* A feature vector: 1..LP_FEATURES_MAX finite numbers. New malloc'd array. */
static int features(const json_t *v, const char *name, double **out, size_t *dim, char *why,
                    size_t wl)
{
    if (!json_is_array(v) || json_array_size(v) == 0 || json_array_size(v) > LP_FEATURES_MAX)
        return lp_fail(LP_EBAD_TASK, why, wl, "\"%s\" must be an array of 1..%d numbers", name,
                       LP_FEATURES_MAX);
    size_t n = json_array_size(v);
    double *f = malloc(n * sizeof *f);
    if (f == NULL)
        return LP_ENO_MEMORY;
    for (size_t i = 0; i < n; i++) {
        const json_t *x = json_array_get(v, i);
        if (!json_is_number(x) || !isfinite(json_number_value(x))) {
            free(f);
            return lp_fail(LP_EBAD_TASK, why, wl, "\"%s\"[%zu] is not a finite number", name, i);
        }
        f[i] = json_number_value(x);
    }
    *out = f;
    *dim = n;
    return LP_OK;
}

/* One turn {"role", "content"} of the array `name` at index i. */
static int parse_turn(const json_t *v, const char *name, size_t i, lp_turn *out, char *why,
                      size_t wl)
{
    static const char *const fields[] = {"role", "content", NULL};
    static const char *const roles[] = {LP_ROLE_SYSTEM, LP_ROLE_USER, LP_ROLE_ASSISTANT};
    char m[LP_MSG_MAX];
    const char *role = NULL;
    if (!json_is_object(v))
        return lp_fail(LP_EBAD_TASK, why, wl,
                       "\"%s\"[%zu] must be a {\"role\", \"content\"} object", name, i);
    if (lp_json_only_fields(v, fields, m, sizeof m) != LP_OK ||
        lp_json_get_string(v, "role", 16, &role, m, sizeof m) != LP_OK ||
        lp_json_get_string(v, "content", LP_TASK_TEXT_MAX, &out->content, m, sizeof m) != LP_OK)
        return lp_fail(LP_EBAD_TASK, why, wl, "\"%s\"[%zu]: %s", name, i, m);
    out->role = NULL;
    for (size_t r = 0; r < sizeof roles / sizeof roles[0]; r++)
        if (strcmp(role, roles[r]) == 0)
            out->role = roles[r];
    if (out->role == NULL)
        return lp_fail(LP_EBAD_TASK, why, wl,
                       "\"%s\"[%zu]: role must be system, user or assistant, not \"%.16s\"", name,
                       i, role);
    return LP_OK;
}

/* The turns of array v (named name) into a new array in ls->turns: at
 * most max of them. *n gets their count. */
static int parse_turns(const json_t *v, const char *name, size_t max, struct line_store *ls,
                       size_t *n, char *why, size_t wl)
{
    if (!json_is_array(v))
        return lp_fail(LP_EBAD_TASK, why, wl, "\"%s\" must be an array of turns", name);
    size_t k = json_array_size(v);
    if (k > max)
        return lp_fail(LP_EBAD_TASK, why, wl, "\"%s\" has more than %zu turns", name, max);
    *n = k;
    if (k == 0)
        return LP_OK;
    if ((ls->turns = calloc(k, sizeof *ls->turns)) == NULL)
        return LP_ENO_MEMORY;
    for (size_t i = 0; i < k; i++) {
        int rc = parse_turn(json_array_get(v, i), name, i, &ls->turns[i], why, wl);
        if (rc != LP_OK)
            return rc;
    }
    return LP_OK;
}

/* The one assistant turn of a conversational "chosen" or "rejected". */
static int assistant_reply(const json_t *o, const char *name, const char **out, char *why,
                           size_t wl)
{
    const json_t *v = json_object_get(o, name);
    lp_turn turn;
    if (!json_is_array(v) || json_array_size(v) != 1)
        return lp_fail(LP_EBAD_TASK, why, wl,
                       "\"%s\" must be a list of one assistant turn when \"prompt\" is a list",
                       name);
    int rc = parse_turn(json_array_get(v, 0), name, 0, &turn, why, wl);
    if (rc != LP_OK)
        return rc;
    if (strcmp(turn.role, LP_ROLE_ASSISTANT) != 0)
        return lp_fail(LP_EBAD_TASK, why, wl, "\"%s\"[0] must be an assistant turn, not %s", name,
                       turn.role);
    *out = turn.content;
    return LP_OK;
}

/* TRL's conversational form: "prompt" is a list of turns whose last is the
 * user's; chosen and rejected are one assistant turn each. */
static int parse_conversation(const json_t *o, struct line_store *ls, lp_task_in *t, char *why,
                              size_t wl)
{
    if (json_object_get(o, "context") != NULL || json_object_get(o, "responses") != NULL)
        return lp_fail(LP_EBAD_TASK, why, wl,
                       "a conversational \"prompt\" list carries its own context: no "
                       "\"context\" or \"responses\" beside it");
    size_t n;
    const json_t *prompt = json_object_get(o, "prompt");
    int rc = parse_turns(prompt, "prompt", LP_TASK_TURNS_MAX + 1, ls, &n, why, wl);
    if (rc != LP_OK)
        return rc;
    if (n == 0 || strcmp(ls->turns[n - 1].role, LP_ROLE_USER) != 0)
        return lp_fail(LP_EBAD_TASK, why, wl,
                       "the last turn of \"prompt\" must be the user turn being answered");
    t->prompt = ls->turns[n - 1].content;
    t->context = n > 1 ? ls->turns : NULL;
    t->n_context = n - 1;
    if ((rc = assistant_reply(o, "chosen", &t->response0, why, wl)) != LP_OK ||
        (rc = assistant_reply(o, "rejected", &t->response1, why, wl)) != LP_OK)
        return rc;
    t->reference_preferred = 0;
    return LP_OK;
}

/* An optional "context" beside a text prompt; a last user turn equal to
 * the prompt is the prompt itself and is dropped. */
static int parse_context(const json_t *o, struct line_store *ls, lp_task_in *t, char *why,
                         size_t wl)
{
    const json_t *v = json_object_get(o, "context");
    if (v == NULL || json_is_null(v))
        return LP_OK;
    size_t n;
    int rc = parse_turns(v, "context", LP_TASK_TURNS_MAX + 1, ls, &n, why, wl);
    if (rc != LP_OK)
        return rc;
    if (n > 0 && strcmp(ls->turns[n - 1].role, LP_ROLE_USER) == 0 &&
        strcmp(ls->turns[n - 1].content, t->prompt) == 0)
        n--;
    t->context = n > 0 ? ls->turns : NULL;
    t->n_context = n;
    return LP_OK;
}

/* The caps on a task's context taken together. */
static int check_context_size(const lp_task_in *t, char *why, size_t wl)
{
    if (t->n_context > LP_TASK_TURNS_MAX)
        return lp_fail(LP_EBAD_TASK, why, wl, "more than %d turns before the prompt",
                       LP_TASK_TURNS_MAX);
    size_t bytes = 0;
    for (size_t i = 0; i < t->n_context; i++)
        bytes += strlen(t->context[i].content);
    if (bytes > LP_TASK_CONTEXT_MAX)
        return lp_fail(LP_EBAD_TASK, why, wl,
                       "the turns before the prompt hold more than %d bytes in all",
                       LP_TASK_CONTEXT_MAX);
    return LP_OK;
}

/* The optional "gold" field: the known better response, "a" or 0 for
 * response 0, "b" or 1 for response 1; with chosen/rejected (response 0 is
 * the chosen one) also "chosen" and "rejected". null or absent: none. */
static int parse_gold(const json_t *o, int chosen_rejected, lp_task_in *t, char *why, size_t wl)
{
    const json_t *g = json_object_get(o, "gold");
    t->gold = LP_GOLD_NONE;
    if (g == NULL || json_is_null(g))
        return LP_OK;
    const char *s = json_is_string(g) ? json_string_value(g) : NULL;
    json_int_t i = json_is_integer(g) ? json_integer_value(g) : -1;
    if (i == 0 || (s && strcmp(s, "a") == 0) || (s && chosen_rejected && strcmp(s, "chosen") == 0))
        t->gold = LP_GOLD_RESPONSE0;
    else if (i == 1 || (s && strcmp(s, "b") == 0) ||
             (s && chosen_rejected && strcmp(s, "rejected") == 0))
        t->gold = LP_GOLD_RESPONSE1;
    else
        return lp_fail(LP_EBAD_GOLD, why, wl,
                       chosen_rejected ? "\"gold\" must be \"a\" (0, \"chosen\") or \"b\" (1, "
                                         "\"rejected\")"
                                       : "\"gold\" must be \"a\" (0, the first response) or \"b\" "
                                         "(1, the second)");
    return LP_OK;
}

static int parse_line(const json_t *o, struct line_store *ls, lp_task_in *t, char *why, size_t wl)
{
    memset(t, 0, sizeof *t);
    t->reference_preferred = -1;
    if (!json_is_object(o))
        return lp_fail(LP_EBAD_TASK, why, wl, "not a JSON object");
    int rc;
    const json_t *responses = json_object_get(o, "responses");
    const json_t *fa = NULL, *fb = NULL;
    if (json_is_array(json_object_get(o, "prompt"))) {
        if ((rc = parse_conversation(o, ls, t, why, wl)) != LP_OK)
            return rc;
        fa = json_object_get(o, "chosen_features");
        fb = json_object_get(o, "rejected_features");
        if ((fa == NULL) != (fb == NULL))
            return lp_fail(LP_EBAD_TASK, why, wl,
                           "\"chosen_features\" and \"rejected_features\" go together");
    } else if (text_field(o, "prompt", &t->prompt, why, wl) != LP_OK) {
        return LP_EBAD_TASK;
    } else if ((rc = parse_context(o, ls, t, why, wl)) != LP_OK) {
        return rc;
    } else if (responses != NULL) {
        if (!json_is_array(responses) || json_array_size(responses) != 2 ||
            !json_is_string(json_array_get(responses, 0)) ||
            !json_is_string(json_array_get(responses, 1)))
            return lp_fail(LP_EBAD_TASK, why, wl, "\"responses\" must be two strings");
        for (int k = 0; k < 2; k++) {
            const json_t *r = json_array_get(responses, (size_t)k);
            if (json_string_length(r) > LP_TASK_TEXT_MAX ||
                strlen(json_string_value(r)) != json_string_length(r))
                return lp_fail(LP_EBAD_TASK, why, wl, "response %d is too long or has NUL", k);
        }
        t->response0 = json_string_value(json_array_get(responses, 0));
        t->response1 = json_string_value(json_array_get(responses, 1));
        const json_t *f = json_object_get(o, "features");
        if (f != NULL) {
            if (!json_is_array(f) || json_array_size(f) != 2)
                return lp_fail(LP_EBAD_TASK, why, wl, "\"features\" must be [[...], [...]]");
            fa = json_array_get(f, 0);
            fb = json_array_get(f, 1);
        }
    } else {
        if (text_field(o, "chosen", &t->response0, why, wl) != LP_OK ||
            text_field(o, "rejected", &t->response1, why, wl) != LP_OK)
            return LP_EBAD_TASK;
        t->reference_preferred = 0;
        fa = json_object_get(o, "chosen_features");
        fb = json_object_get(o, "rejected_features");
        if ((fa == NULL) != (fb == NULL))
            return lp_fail(LP_EBAD_TASK, why, wl,
                           "\"chosen_features\" and \"rejected_features\" go together");
    }
    if ((rc = check_context_size(t, why, wl)) != LP_OK ||
        (rc = parse_gold(o, responses == NULL, t, why, wl)) != LP_OK)
        return rc;
    if (fa != NULL) {
        size_t d0, d1;
        if ((rc = features(fa, "features 0", &ls->f0, &d0, why, wl)) != LP_OK ||
            (rc = features(fb, "features 1", &ls->f1, &d1, why, wl)) != LP_OK)
            return rc;
        if (d0 != d1)
            return lp_fail(LP_EBAD_TASK, why, wl, "feature vectors differ in length (%zu, %zu)", d0,
                           d1);
        t->features0 = ls->f0;
        t->features1 = ls->f1;
        t->dim = d0;
    }
    const json_t *id = json_object_get(o, "id");
    if (id == NULL || json_is_null(id)) {
        crypto_generichash_state st;
        uint8_t h[16];
        crypto_generichash_init(&st, NULL, 0, sizeof h);
        const char *parts[3] = {t->prompt, t->response0, t->response1};
        for (int k = 0; k < 3; k++) /* each part with its NUL: unambiguous */
            crypto_generichash_update(&st, (const unsigned char *)parts[k], strlen(parts[k]) + 1);
        for (size_t k = 0; k < t->n_context; k++) { /* nothing more without context */
            const lp_turn *turn = &t->context[k];
            crypto_generichash_update(&st, (const unsigned char *)turn->role,
                                      strlen(turn->role) + 1);
            crypto_generichash_update(&st, (const unsigned char *)turn->content,
                                      strlen(turn->content) + 1);
        }
        crypto_generichash_final(&st, h, sizeof h);
        memcpy(ls->id, "h:", 2);
        sodium_bin2hex(ls->id + 2, sizeof ls->id - 2, h, sizeof h);
    } else if (json_is_string(id)) {
        size_t n = json_string_length(id);
        if (n == 0 || n > LP_TASK_ID_MAX || strlen(json_string_value(id)) != n)
            return lp_fail(LP_EBAD_TASK, why, wl, "\"id\" must be 1..%d bytes", LP_TASK_ID_MAX);
        memcpy(ls->id, json_string_value(id), n + 1);
    } else if (json_is_integer(id)) {
        snprintf(ls->id, sizeof ls->id, "%lld", (long long)json_integer_value(id));
    } else {
        return lp_fail(LP_EBAD_TASK, why, wl, "\"id\" must be a string or an integer");
    }
    return LP_OK; /* t->source_id is set once the lines stop moving */
}

int lp_taskfile_parse(const char *body, size_t len, int max_depth, lp_taskfile *out, char *msg,
                      size_t msglen)
{
    memset(out, 0, sizeof *out);
    struct priv *p = calloc(1, sizeof *p);
    if (p == NULL)
        return LP_ENO_MEMORY;
    size_t tcap = 0;
    int rc = LP_OK;
    size_t lineno = 0;
    for (size_t pos = 0; pos < len && rc == LP_OK;) {
        const char *nl = memchr(body + pos, '\n', len - pos);
        size_t end = nl ? (size_t)(nl - body) : len;
        size_t start = pos;
        pos = end + 1;
        lineno++;
        size_t l = end - start;
        while (l > 0 && (body[start + l - 1] == '\r' || body[start + l - 1] == ' ' ||
                         body[start + l - 1] == '\t'))
            l--;
        size_t lead = 0;
        while (lead < l && (body[start + lead] == ' ' || body[start + lead] == '\t'))
            lead++;
        if (lead == l)
            continue; /* blank line */
        if (p->n >= LP_TASKS_PER_UPLOAD_MAX) {
            rc = lp_fail(LP_EBAD_TASK, msg, msglen, "line %zu: more than %d tasks", lineno,
                         LP_TASKS_PER_UPLOAD_MAX);
            break;
        }
        if (p->n == p->cap) {
            size_t cap = p->cap ? p->cap * 2 : 64;
            struct line_store *g = realloc(p->lines, cap * sizeof *g);
            lp_task_in *tg = g ? realloc(out->tasks, cap * sizeof *tg) : NULL;
            if (g)
                p->lines = g;
            if (tg)
                out->tasks = tg;
            if (!g || !tg) {
                rc = LP_ENO_MEMORY;
                break;
            }
            p->cap = tcap = cap;
        }
        struct line_store *ls = &p->lines[p->n];
        memset(ls, 0, sizeof *ls);
        char why[LP_MSG_MAX] = "";
        int prc = lp_json_parse(body + start, l, max_depth, &ls->doc, why, sizeof why);
        if (prc == LP_OK)
            prc = parse_line(ls->doc, ls, &out->tasks[p->n], why, sizeof why);
        p->n++; /* owned storage is released by priv_free even on failure */
        if (prc == LP_ENO_MEMORY)
            rc = prc;
        else if (prc != LP_OK)
            rc = lp_fail(prc == LP_EBAD_GOLD ? prc : LP_EBAD_TASK, msg, msglen, "line %zu: %s",
                         lineno, why);
    }
    (void)tcap;
    if (rc == LP_OK && p->n == 0)
        rc = lp_fail(LP_EBAD_TASK, msg, msglen, "the upload holds no tasks");
    if (rc != LP_OK) {
        priv_free(p);
        free(out->tasks);
        memset(out, 0, sizeof *out);
        return rc;
    }
    /* p->lines moved while growing: point at the ids only now */
    for (size_t i = 0; i < p->n; i++)
        out->tasks[i].source_id = p->lines[i].id;
    out->n = p->n;
    out->priv = p;
    return LP_OK;
}
