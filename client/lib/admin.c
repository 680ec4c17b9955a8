/*
 * admin.c — operator calls of libldpref (bearer token from the options):
 * campaigns, enrollment tokens, task upload, key revocation, stats, the
 * views of a campaign, its annotators and tasks, label quality, export (the
 * clean view or the server-side corruption view).
 * JSON results are returned as text the caller frees with ldpref_free();
 * export streams the server's JSONL into a FILE* without holding it in
 * memory.
 */
#include "internal.h"

#include "error.h"
#include "wire.h"

#include <curl/curl.h>
#include <errno.h>
#include <fcntl.h>
#include <float.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define LPC_UPLOAD_MAX (64L << 20) /* the server's task-upload cap */
#define LPC_NAME_MAX 128
#define LP_PSEUDONYM_TEXT_MAX 23 /* "ann-" and 16 hex digits, with room to spare */

int lpc_give_json(ldpref_client *c, json_t *resp, char **json_out)
{
    int rc = LDPREF_OK;
    if (json_out) {
        *json_out = json_dumps(resp, JSON_COMPACT | JSON_ENCODE_ANY);
        if (*json_out == NULL)
            rc = lpc_fail(c, LDPREF_ENO_MEMORY, "out of memory");
    }
    json_decref(resp);
    return rc;
}

static void clear_out(char **json_out)
{
    if (json_out)
        *json_out = NULL;
}

int lpc_campaign_query(ldpref_client *c, const char *base, const char *campaign, char *path,
                       size_t cap)
{
    if (campaign == NULL) {
        snprintf(path, cap, "%s", base);
        return LDPREF_OK;
    }
    if (campaign[0] == '\0' || strlen(campaign) > LPC_NAME_MAX)
        return lpc_fail(c, LDPREF_EINVALID_ARGUMENT, "campaign name must be 1..%d bytes",
                        LPC_NAME_MAX);
    char *esc = curl_easy_escape(NULL, campaign, 0);
    if (esc == NULL)
        return lpc_fail(c, LDPREF_ENO_MEMORY, "out of memory");
    snprintf(path, cap, "%s?campaign=%s", base, esc);
    curl_free(esc);
    return LDPREF_OK;
}

int ldpref_admin_tasks_load(ldpref_client *c, const char *jsonl_path, const char *campaign,
                            char **json_out)
{
    clear_out(json_out);
    if (c == NULL || jsonl_path == NULL)
        return LDPREF_EINVALID_ARGUMENT;
    char path[512];
    int rc = lpc_campaign_query(c, "/v1/tasks", campaign, path, sizeof path);
    if (rc != LDPREF_OK)
        return rc;
    if (c->operator_token[0] == '\0')
        return lpc_fail(c, LDPREF_EUNAUTHORIZED, "this call needs an operator token");
    FILE *f = fopen(jsonl_path, "rb");
    if (f == NULL)
        return lpc_fail(c, LDPREF_EIO, "%s: %s", jsonl_path, strerror(errno));
    struct stat st;
    if (fstat(fileno(f), &st) != 0 || !S_ISREG(st.st_mode)) {
        fclose(f);
        return lpc_fail(c, LDPREF_EIO, "%s is not a regular file", jsonl_path);
    }
    if (st.st_size > LPC_UPLOAD_MAX) {
        fclose(f);
        return lpc_fail(c, LDPREF_EBODY_TOO_LARGE, "%s is larger than the %ld-byte upload cap",
                        jsonl_path, LPC_UPLOAD_MAX);
    }
    char url[LPC_SERVER_MAX + 512];
    snprintf(url, sizeof url, "%s%s", c->server, path);
    lpc_http_req req = {.method = "POST",
                        .url = url,
                        .content_type = "application/x-ndjson",
                        .body_file = f,
                        .body_file_len = (long)st.st_size,
                        .bearer = c->operator_token,
                        .resp_cap = LPC_RESP_CAP_SMALL};
    long status = 0;
    char *body = NULL;
    size_t len = 0;
    rc = lpc_http_do(c->http, &req, &status, &body, &len, c->errmsg, sizeof c->errmsg);
    fclose(f);
    if (rc != LP_OK)
        return rc;
    json_t *resp = NULL;
    if (status < 200 || status >= 300)
        rc = lpc_server_error(c, status, body, len);
    else if (lp_json_parse(body, len, LP_JSON_DEPTH_MAX, &resp, NULL, 0) != LP_OK)
        rc = lpc_fail(c, LDPREF_EPROTOCOL, "the server's answer is not JSON");
    free(body);
    if (rc != LDPREF_OK)
        return rc;
    return lpc_give_json(c, resp, json_out);
}

int ldpref_admin_enrollment_tokens(ldpref_client *c, const char *campaign, int count,
                                   char **json_out)
{
    clear_out(json_out);
    if (c == NULL)
        return LDPREF_EINVALID_ARGUMENT;
    if (count < 1 || count > 1000)
        return lpc_fail(c, LDPREF_EINVALID_ARGUMENT, "count must be 1..1000");
    if (campaign && (campaign[0] == '\0' || strlen(campaign) > LPC_NAME_MAX))
        return lpc_fail(c, LDPREF_EINVALID_ARGUMENT, "campaign name must be 1..%d bytes",
                        LPC_NAME_MAX);
    json_t *req =
               json_pack("{s:s, s:i}", "campaign", campaign ? campaign : "default", "count", count),
           *resp = NULL;
    if (req == NULL)
        return lpc_fail(c, LDPREF_ENO_MEMORY, "out of memory");
    long status = 0;
    int rc = lpc_call_json(c, "POST", "/v1/enrollment-tokens", req, 1, LPC_RESP_CAP_SMALL, &resp,
                           &status);
    json_decref(req);
    return rc != LDPREF_OK ? rc : lpc_give_json(c, resp, json_out);
}

void ldpref_campaign_init(ldpref_campaign *s)
{
    memset(s, 0, sizeof *s);
    s->epsilon_min = 0.01;
    s->epsilon_max = 10.0;
    s->allow_infinite = 0;
    s->epsilon_budget = 1000.0;
    s->epsilon_default = 1.0;
}

int ldpref_admin_campaign_create(ldpref_client *c, const ldpref_campaign *s, char **json_out)
{
    return ldpref_admin_campaign_create_with(c, s, NULL, json_out);
}

int ldpref_admin_campaign_create_with(ldpref_client *c, const ldpref_campaign *s,
                                      const char *extra_json, char **json_out)
{
    clear_out(json_out);
    if (c == NULL || s == NULL)
        return LDPREF_EINVALID_ARGUMENT;
    if (s->name == NULL || s->name[0] == '\0' || strlen(s->name) > LPC_NAME_MAX)
        return lpc_fail(c, LDPREF_EINVALID_ARGUMENT, "campaign name must be 1..%d bytes",
                        LPC_NAME_MAX);
    if (!isfinite(s->epsilon_min) || !isfinite(s->epsilon_budget) || isnan(s->epsilon_default) ||
        isnan(s->epsilon_max) || s->epsilon_max == -INFINITY)
        return lpc_fail(c, LDPREF_EBAD_EPSILON, "campaign epsilons must be numbers");
    /* No upper bound (epsilon_max INFINITY) is, in the protocol's terms, every
     * finite epsilon (the largest finite epsilon_max) and infinity allowed.
     * An infinite proposal (no privatization) travels as null. */
    int unbounded = s->epsilon_max == INFINITY;
    json_t *req =
               json_pack("{s:s, s:f, s:f, s:b, s:f, s:o}", "name", s->name, "epsilon_min",
                         s->epsilon_min, "epsilon_max", unbounded ? DBL_MAX : s->epsilon_max,
                         "allow_infinite", unbounded || s->allow_infinite != 0, "epsilon_budget",
                         s->epsilon_budget, "epsilon_default", lp_json_epsilon(s->epsilon_default)),
           *resp = NULL;
    /* 0 leaves the server's default; anything else goes as given (the
     * server names a bad value) */
    int oom = req == NULL;
    if (!oom && s->labels_per_task != 0)
        oom = json_object_set_new(req, "labels_per_task", json_integer(s->labels_per_task)) != 0;
    if (!oom && s->annotator_quota != 0)
        oom = json_object_set_new(req, "annotator_quota", json_integer(s->annotator_quota)) != 0;
    if (oom) {
        json_decref(req);
        return lpc_fail(c, LDPREF_ENO_MEMORY, "out of memory");
    }
    if (extra_json != NULL) { /* its fields replace the spec's */
        json_error_t err;
        json_t *extra = json_loads(extra_json, 0, &err);
        int bad = !json_is_object(extra) || json_object_update(req, extra) != 0;
        json_decref(extra);
        if (bad) {
            json_decref(req);
            return lpc_fail(c, LDPREF_EINVALID_ARGUMENT, "extra fields: not a JSON object");
        }
    }
    long status = 0;
    int rc = lpc_call_json(c, "POST", "/v1/campaigns", req, 1, LPC_RESP_CAP_SMALL, &resp, &status);
    json_decref(req);
    return rc != LDPREF_OK ? rc : lpc_give_json(c, resp, json_out);
}

int ldpref_admin_campaign_update(ldpref_client *c, const char *name, double release_epsilon,
                                 double release_delta, char **json_out)
{
    clear_out(json_out);
    if (c == NULL || name == NULL)
        return LDPREF_EINVALID_ARGUMENT;
    json_t *req = json_pack("{s:s}", "name", name), *resp = NULL;
    if (req != NULL && !isnan(release_epsilon))
        json_object_set_new(req, "release_epsilon", json_real(release_epsilon));
    if (req != NULL && !isnan(release_delta))
        json_object_set_new(req, "release_delta", json_real(release_delta));
    if (req == NULL)
        return lpc_fail(c, LDPREF_ENO_MEMORY, "out of memory");
    long status = 0;
    int rc = lpc_call_json(c, "POST", "/v1/campaigns/update", req, 1, LPC_RESP_CAP_SMALL, &resp,
                           &status);
    json_decref(req);
    return rc != LDPREF_OK ? rc : lpc_give_json(c, resp, json_out);
}

int ldpref_admin_revoke(ldpref_client *c, const char *key_or_pseudonym)
{
    if (c == NULL || key_or_pseudonym == NULL)
        return LDPREF_EINVALID_ARGUMENT;
    const char *s = key_or_pseudonym;
    int pseudonym = strncmp(s, "ann-", 4) == 0;
    uint8_t key[LP_KEY_BYTES];
    if (pseudonym && (strlen(s) > LP_PSEUDONYM_TEXT_MAX || strpbrk(s, "\r\n") != NULL))
        return lpc_fail(c, LDPREF_EINVALID_ARGUMENT, "a pseudonym looks like ann-0123456789abcdef");
    if (!pseudonym && lp_b64_decode(s, key, sizeof key) != LP_OK)
        return lpc_fail(c, LDPREF_EINVALID_ARGUMENT,
                        "give the key (32 bytes of unpadded base64url) or the pseudonym "
                        "(ann-...)");
    json_t *req = json_pack("{s:s}", pseudonym ? "pseudonym" : "key", s), *resp = NULL;
    if (req == NULL)
        return lpc_fail(c, LDPREF_ENO_MEMORY, "out of memory");
    long status = 0;
    int rc = lpc_call_json(c, "POST", "/v1/annotators/revoke", req, 1, LPC_RESP_CAP_SMALL, &resp,
                           &status);
    json_decref(req);
    json_decref(resp);
    return rc;
}

int ldpref_admin_stats(ldpref_client *c, char **json_out)
{
    clear_out(json_out);
    if (c == NULL)
        return LDPREF_EINVALID_ARGUMENT;
    json_t *resp = NULL;
    long status = 0;
    int rc = lpc_call_json(c, "GET", "/v1/stats", NULL, 1, LPC_RESP_CAP_SMALL, &resp, &status);
    return rc != LDPREF_OK ? rc : lpc_give_json(c, resp, json_out);
}

/* ---- the operator's views ---- */

/* GETs base?campaign=C (checked as lpc_campaign_query) with the integer
 * parameters whose values are not 0 appended (names[i]=values[i]). */
static int get_campaign_view(ldpref_client *c, const char *base, const char *campaign,
                             const char *const *names, const int64_t *values, size_t n,
                             char **json_out)
{
    clear_out(json_out);
    if (c == NULL)
        return LDPREF_EINVALID_ARGUMENT;
    char path[512];
    int rc = lpc_campaign_query(c, base, campaign, path, sizeof path);
    if (rc != LDPREF_OK)
        return rc;
    for (size_t i = 0; i < n; i++)
        if (values[i] != 0) {
            size_t len = strlen(path);
            snprintf(path + len, sizeof path - len, "%c%s=%lld", strchr(path, '?') ? '&' : '?',
                     names[i], (long long)values[i]);
        }
    json_t *resp = NULL;
    long status = 0;
    rc = lpc_call_json(c, "GET", path, NULL, 1, LPC_RESP_CAP_LARGE, &resp, &status);
    return rc != LDPREF_OK ? rc : lpc_give_json(c, resp, json_out);
}

int ldpref_admin_campaign(ldpref_client *c, const char *campaign, int64_t bucket_s, char **json_out)
{
    static const char *const names[] = {"bucket_s"};
    return get_campaign_view(c, "/v1/campaigns/view", campaign, names, &bucket_s, 1, json_out);
}

int ldpref_admin_annotators(ldpref_client *c, const char *campaign, int64_t offset, int64_t limit,
                            char **json_out)
{
    static const char *const names[] = {"offset", "limit"};
    const int64_t values[] = {offset, limit};
    return get_campaign_view(c, "/v1/annotators", campaign, names, values, 2, json_out);
}

int ldpref_admin_tasks(ldpref_client *c, const char *campaign, int64_t offset, int64_t limit,
                       char **json_out)
{
    static const char *const names[] = {"offset", "limit"};
    const int64_t values[] = {offset, limit};
    return get_campaign_view(c, "/v1/tasks", campaign, names, values, 2, json_out);
}

int ldpref_admin_task(ldpref_client *c, int64_t id, char **json_out)
{
    clear_out(json_out);
    if (c == NULL)
        return LDPREF_EINVALID_ARGUMENT;
    if (id < 1)
        return lpc_fail(c, LDPREF_EINVALID_ARGUMENT, "a task id is >= 1, not %lld", (long long)id);
    char path[64];
    snprintf(path, sizeof path, "/v1/tasks/one?id=%lld", (long long)id);
    json_t *resp = NULL;
    long status = 0;
    int rc = lpc_call_json(c, "GET", path, NULL, 1, LPC_RESP_CAP_LARGE, &resp, &status);
    return rc != LDPREF_OK ? rc : lpc_give_json(c, resp, json_out);
}

int ldpref_admin_quality(ldpref_client *c, const char *campaign, char **json_out)
{
    return get_campaign_view(c, "/v1/quality", campaign, NULL, NULL, 0, json_out);
}

int ldpref_admin_audit(ldpref_client *c, int64_t after_id, int64_t limit, char **json_out)
{
    clear_out(json_out);
    if (c == NULL)
        return LDPREF_EINVALID_ARGUMENT;
    if (after_id < 0 || limit < 0)
        return lpc_fail(c, LDPREF_EINVALID_ARGUMENT, "after_id and limit are >= 0");
    char path[96];
    int n = snprintf(path, sizeof path, "/v1/audit?after_id=%lld", (long long)after_id);
    if (limit > 0)
        snprintf(path + n, sizeof path - (size_t)n, "&limit=%lld", (long long)limit);
    json_t *resp = NULL;
    long status = 0;
    int rc = lpc_call_json(c, "GET", path, NULL, 1, LPC_RESP_CAP_LARGE, &resp, &status);
    return rc != LDPREF_OK ? rc : lpc_give_json(c, resp, json_out);
}

/* The active model's version: LDPREF_ENO_ACTIVE_MODEL when none is served. */
static int active_version(ldpref_client *c, int64_t *version)
{
    json_t *resp = NULL;
    long status = 0;
    int rc = lpc_call_json(c, "GET", "/v1/models", NULL, 1, LPC_RESP_CAP_LARGE, &resp, &status);
    if (rc != LDPREF_OK)
        return rc;
    json_t *v = json_object_get(resp, "active_version");
    if (json_is_null(v))
        rc = lpc_fail(c, LDPREF_ENO_ACTIVE_MODEL, "no model is being served: give a version");
    else if (lp_json_get_int(resp, "active_version", 1, INT64_MAX, version, NULL, 0) != LP_OK)
        rc = lpc_fail(c, LDPREF_EPROTOCOL, "the models answer has no valid active_version");
    json_decref(resp);
    return rc;
}

/* Checks a view name: 0 clean (or NULL), 1 corrupted, -1 invalid. */
static int view_kind(const char *view)
{
    if (view == NULL || strcmp(view, "clean") == 0)
        return 0;
    return strcmp(view, "corrupted") == 0 ? 1 : -1;
}

static int check_view(ldpref_client *c, const char *campaign, const char *view, int64_t version)
{
    int kind = view_kind(view);
    if (kind < 0)
        return lpc_fail(c, LDPREF_EINVALID_ARGUMENT,
                        "export view must be \"clean\" or \"corrupted\", not \"%.40s\"", view);
    if (version < 0 || (kind == 0 && version != 0))
        return lpc_fail(c, LDPREF_EINVALID_ARGUMENT,
                        "version must be 0 (active) or a model version, and only with the "
                        "corrupted view");
    if (kind == 1 && campaign != NULL)
        return lpc_fail(c, LDPREF_EINVALID_ARGUMENT,
                        "the corrupted view is a model's training view, with the model's own "
                        "campaign selection: pass campaign NULL");
    return LDPREF_OK;
}

/* 1 for the conversational format, 0 for the standard one (or NULL). */
static int conversational(const char *format)
{
    return format != NULL && strcmp(format, LDPREF_EXPORT_CONVERSATIONAL) == 0;
}

/* check_view, and the format: NULL, standard or conversational. */
static int check_export(ldpref_client *c, const char *campaign, const char *view, int64_t version,
                        const char *format)
{
    if (format != NULL && !conversational(format) && strcmp(format, LDPREF_EXPORT_STANDARD) != 0)
        return lpc_fail(c, LDPREF_EINVALID_ARGUMENT,
                        "export format must be \"standard\" or \"conversational\", not \"%.40s\"",
                        format);
    return check_view(c, campaign, view, version);
}

int ldpref_admin_export_format(ldpref_client *c, const char *campaign, const char *view,
                               int64_t version, const char *format, FILE *out)
{
    if (c == NULL || out == NULL)
        return LDPREF_EINVALID_ARGUMENT;
    int rc = check_export(c, campaign, view, version, format);
    if (rc != LDPREF_OK)
        return rc;
    char path[512];
    if ((rc = lpc_campaign_query(c, "/v1/export", campaign, path, sizeof path)) != LDPREF_OK)
        return rc;
    if (c->operator_token[0] == '\0')
        return lpc_fail(c, LDPREF_EUNAUTHORIZED, "this call needs an operator token");
    if (view_kind(view) == 1) { /* "clean" is the server's default: sent as no parameter */
        if (version == 0 && (rc = active_version(c, &version)) != LDPREF_OK)
            return rc;
        snprintf(path, sizeof path, "/v1/export?view=corrupted&version=%lld", (long long)version);
    }
    if (conversational(format)) /* "standard" is the server's default: sent as no parameter */
        snprintf(path + strlen(path), sizeof path - strlen(path), "%sformat=conversational",
                 strchr(path, '?') ? "&" : "?");
    char url[LPC_SERVER_MAX + 512];
    snprintf(url, sizeof url, "%s%s", c->server, path);
    lpc_http_req req = {.method = "GET",
                        .url = url,
                        .bearer = c->operator_token,
                        .sink = out,
                        .resp_cap = LPC_RESP_CAP_SMALL};
    long status = 0;
    char *body = NULL;
    size_t len = 0;
    rc = lpc_http_do(c->http, &req, &status, &body, &len, c->errmsg, sizeof c->errmsg);
    if (rc == LP_OK && (status < 200 || status >= 300))
        rc = lpc_server_error(c, status, body, len);
    free(body);
    if (rc == LDPREF_OK && fflush(out) != 0)
        rc = lpc_fail(c, LDPREF_EIO, "writing the export: %s", strerror(errno));
    return rc;
}

int ldpref_admin_export_view(ldpref_client *c, const char *campaign, const char *view,
                             int64_t version, FILE *out)
{
    return ldpref_admin_export_format(c, campaign, view, version, NULL, out);
}

int ldpref_admin_export(ldpref_client *c, const char *campaign, FILE *out)
{
    return ldpref_admin_export_format(c, campaign, NULL, 0, NULL, out);
}

int ldpref_admin_export_format_path(ldpref_client *c, const char *campaign, const char *view,
                                    int64_t version, const char *format, const char *path)
{
    if (c == NULL || path == NULL)
        return LDPREF_EINVALID_ARGUMENT;
    int rc = check_export(c, campaign, view, version, format);
    if (rc != LDPREF_OK)
        return rc;
    /* 0600 also when the file existed with a wider mode (the export holds
     * every label of the campaign); never through a symlink. */
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0600);
    if (fd < 0)
        return lpc_fail(c, LDPREF_EIO, "%s: %s", path, strerror(errno));
    if (fchmod(fd, 0600) != 0) {
        rc = lpc_fail(c, LDPREF_EIO, "%s: %s", path, strerror(errno));
        close(fd);
        return rc;
    }
    FILE *f = fdopen(fd, "wb");
    if (f == NULL) {
        close(fd);
        return lpc_fail(c, LDPREF_EIO, "%s: %s", path, strerror(errno));
    }
    rc = ldpref_admin_export_format(c, campaign, view, version, format, f);
    if (fclose(f) != 0 && rc == LDPREF_OK)
        rc = lpc_fail(c, LDPREF_EIO, "%s: %s", path, strerror(errno));
    return rc;
}

int ldpref_admin_export_view_path(ldpref_client *c, const char *campaign, const char *view,
                                  int64_t version, const char *path)
{
    return ldpref_admin_export_format_path(c, campaign, view, version, NULL, path);
}

int ldpref_admin_export_path(ldpref_client *c, const char *campaign, const char *path)
{
    return ldpref_admin_export_format_path(c, campaign, NULL, 0, NULL, path);
}
