/*
 * e2e_score_batch.c — scores through the real libldpref, the real ldpref
 * CLI and raw HTTP against the real ldpref-server (127.0.0.1, temporary
 * SQLite database) serving a dense square-chipo model trained from real
 * signed labels:
 *   - the single-pass reader of /v1/score and the general reader (jansson)
 *     answer byte for byte the same on random requests with numbers in
 *     every JSON form (a prompt written with an escape sends the same
 *     request down the general reader);
 *   - POST /v1/score/batch: one line per item in request order, each equal
 *     to the candidates /v1/score gives for that item; per-item errors with
 *     the others still scored; blank lines skipped; the object form; a
 *     streamed (chunked) NDJSON answer for many items; the item cap; a
 *     version that is not served; no token, and a token without the score
 *     scope; `ldpref score --batch FILE` prints the same lines.
 */
#include "check.h"
#include "error.h"
#include "http_raw.h"
#include "http_wire.h"
#include "ldpref.h"
#include "operator_client.h"
#include "raw_annotator.h"
#include "rr.h"
#include "server_proc.h"
#include "wire.h"

#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define DIM 8
#define TASKS 60
#define ANNOTATORS 3

static server_proc srv;
static unsigned seed = 12345;

static double uniform(void)
{
    return ((double)rand_r(&seed) + 0.5) / ((double)RAND_MAX + 1.0);
}

/* ---- the served model ---- */

static void load_tasks(void)
{
    char *body = malloc(TASKS * 512), *p = body;
    for (int t = 0; t < TASKS; t++) {
        p += sprintf(p,
                     "{\"id\":\"t%d\",\"prompt\":\"p%d\",\"responses\":[\"a%d\",\"b%d\"],"
                     "\"features\":[",
                     t, t, t, t);
        for (int r = 0; r < 2; r++) {
            *p++ = '[';
            for (int k = 0; k < DIM; k++)
                p += sprintf(p, "%s%.4f", k ? "," : "", uniform() * 2 - 1);
            *p++ = ']';
            if (r == 0)
                *p++ = ',';
        }
        p += sprintf(p, "]}\n");
    }
    long status = 0;
    json_decref(operator_call(&srv, "POST", "/v1/tasks?campaign=s", body, &status));
    CHECK_INT(status, 200);
    free(body);
}

/* Labels from ANNOTATORS annotators over every task, then a trained and
 * activated model; returns its version. */
static int64_t serve_model(void)
{
    long status = 0;
    json_decref(operator_call(&srv, "POST", "/v1/campaigns",
                              "{\"name\":\"s\",\"epsilon_min\":0.1,\"epsilon_max\":10,"
                              "\"epsilon_budget\":100000,\"labels_per_task\":3}",
                              &status));
    CHECK_INT(status, 201);
    load_tasks();
    for (int a = 0; a < ANNOTATORS; a++) {
        json_t *tok = operator_call(&srv, "POST", "/v1/enrollment-tokens",
                                    "{\"campaign\":\"s\",\"count\":1}", &status);
        raw_annotator ann;
        CHECK_INT(raw_enroll(&ann, srv.url,
                             json_string_value(json_array_get(json_object_get(tok, "tokens"), 0))),
                  201);
        json_decref(tok);
        json_t *tasks = NULL;
        CHECK_INT(raw_next(&ann, TASKS, &tasks), 200);
        for (size_t i = 0; i < json_array_size(tasks); i++) {
            int64_t id = json_integer_value(json_object_get(json_array_get(tasks, i), "task_id"));
            lp_label_msg m = raw_label(&ann, id, rand_r(&seed) & 1, 2.0);
            http_reply r;
            CHECK_INT(raw_post_label(srv.url, &m, &r), 201);
            http_reply_free(&r);
        }
        json_decref(tasks);
    }
    json_t *run =
        operator_call(&srv, "POST", "/v1/retrain", "{\"campaign\":\"s\",\"l2\":1}", &status);
    CHECK_INT(status, 202);
    json_t *done = operator_run_wait(&srv, json_integer_value(json_object_get(run, "run")), 120);
    CHECK_STR(json_string_value(json_object_get(done, "status")) ?: "", "succeeded");
    int64_t v = json_integer_value(json_object_get(done, "model_version"));
    json_decref(run);
    json_decref(done);
    return v;
}

/* ---- requests ---- */

/* A number in one of JSON's forms, near x (written into out). */
static void number(char *out, size_t cap)
{
    double x = uniform() * 4 - 2;
    switch (rand_r(&seed) % 10) {
    case 0:
        snprintf(out, cap, "%d", (int)(x * 1000)); /* integer */
        break;
    case 1:
        snprintf(out, cap, "%s", rand_r(&seed) & 1 ? "-0" : "-0.0");
        break;
    case 2:
        snprintf(out, cap, "%.17g", x); /* 17 significant digits: strtod's path */
        break;
    case 3:
        snprintf(out, cap, "%.6e", x); /* exponent form */
        break;
    case 4:
        snprintf(out, cap, "%.3E", x * 1e-30); /* exponent beyond the exact powers */
        break;
    case 5:
        snprintf(out, cap, "1e-320"); /* subnormal */
        break;
    case 6:
        snprintf(out, cap, "123456789012345678"); /* an integer past 15 digits */
        break;
    case 7:
        snprintf(out, cap, "0.000%d", rand_r(&seed) % 100000);
        break;
    default:
        snprintf(out, cap, "%.5f", x);
    }
}

/* A score request of k candidates of dim numbers each (dim != DIM: an
 * error), with ref_logprob on some, whitespace here and there; prompt
 * written as given (it may hold an escape). */
static char *request(const char *prompt, int k, int dim, int refs)
{
    size_t cap = (size_t)k * (size_t)(dim + 4) * 40 + 256;
    char *b = malloc(cap), num[64];
    size_t n = (size_t)snprintf(b, cap, "{ \"candidates\" : [");
    for (int c = 0; c < k; c++) {
        n += (size_t)snprintf(b + n, cap - n, "%s{\"text\":\"x%d\",\"features\":[", c ? ",\n" : "",
                              c);
        for (int j = 0; j < dim; j++) {
            number(num, sizeof num);
            n += (size_t)snprintf(b + n, cap - n, "%s%s", j ? (j % 3 ? "," : " , ") : "", num);
        }
        n += (size_t)snprintf(b + n, cap - n, "]");
        if (refs) {
            number(num, sizeof num);
            n += (size_t)snprintf(b + n, cap - n, ",\"ref_logprob\":%s", num);
        }
        n += (size_t)snprintf(b + n, cap - n, "}");
    }
    snprintf(b + n, cap - n, "], \"prompt\":\"%s\"}\t", prompt);
    return b;
}

/* The same request text with its prompt "p" written "\u0070". */
static char *escaped(const char *req)
{
    const char *at = strstr(req, "\"prompt\":\"p\"");
    size_t n = strlen(req);
    char *out = malloc(n + 8);
    size_t head = (size_t)(at - req) + 10;
    memcpy(out, req, head);
    memcpy(out + head, "\\u0070", 6);
    strcpy(out + head + 6, at + 11);
    return out;
}

static void test_fast_equals_general(ldpref_client *op)
{
    int compared = 0;
    for (int i = 0; i < 300; i++) {
        int k = 1 + rand_r(&seed) % 6;
        char *a = request("p", k, DIM, (int)(rand_r(&seed) % 3 == 0));
        char *b = escaped(a);
        char *ja = NULL, *jb = NULL;
        int ra = ldpref_score(op, a, &ja), rb = ldpref_score(op, b, &jb);
        CHECK_INT(ra, rb);
        if (ra == LDPREF_OK && rb == LDPREF_OK) {
            check_record(strcmp(ja, jb) == 0, __FILE__, __LINE__,
                         "request %d: fast %s\ngeneral %s\nbody %s", i, ja, jb, a);
            compared++;
        }
        ldpref_free(ja);
        ldpref_free(jb);
        free(a);
        free(b);
    }
    CHECK(compared == 300);
}

/* ---- the batch ---- */

/* The "candidates" of /v1/score for request text req, as compact JSON. */
static char *single_candidates(ldpref_client *op, const char *req)
{
    char *json = NULL;
    if (ldpref_score(op, req, &json) != LDPREF_OK)
        return NULL;
    json_t *j = json_loads(json, 0, NULL);
    char *out = json_dumps(json_object_get(j, "candidates"), JSON_COMPACT);
    json_decref(j);
    ldpref_free(json);
    return out;
}

/* Runs ldpref_score_batch on body; the answer's lines (malloc'd array of
 * parsed objects) and their count; the call's code into *rc. */
static json_t **batch(ldpref_client *c, const char *body, int64_t version, size_t *n, int *rc)
{
    char *text = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&text, &len);
    *rc = ldpref_score_batch(c, body, strlen(body), version, f);
    fclose(f);
    size_t cap = 16;
    json_t **lines = malloc(cap * sizeof *lines);
    *n = 0;
    for (char *s = text, *e; s && *s; s = e + 1) {
        e = strchr(s, '\n');
        check_record(e != NULL, __FILE__, __LINE__, "the last line ends with a newline");
        if (e == NULL)
            break;
        *e = '\0';
        if (*n == cap)
            lines = realloc(lines, (cap *= 2) * sizeof *lines);
        lines[(*n)++] = json_loads(s, 0, NULL);
    }
    free(text);
    return lines;
}

static void free_lines(json_t **lines, size_t n)
{
    for (size_t i = 0; i < n; i++)
        json_decref(lines[i]);
    free(lines);
}

static void test_batch_lines(ldpref_client *op)
{
    enum { N = 200 };
    char *reqs[N];
    size_t cap = 1 << 20, len = 0;
    char *body = malloc(cap);
    for (int i = 0; i < N; i++) {
        int kind = i % 10; /* 3: wrong dimension, 6: malformed, 8: unknown field */
        reqs[i] = kind == 3   ? request("p", 2, DIM - 1, 0)
                  : kind == 6 ? strdup("{\"candidates\": [")
                  : kind == 8 ? strdup("{\"candidates\":[{\"text\":\"x\"}],\"task_ids\":[1]}")
                              : request("p", 1 + i % 4, DIM, i % 2);
        for (char *p = reqs[i]; *p; p++) /* one line each */
            if (*p == '\n')
                *p = ' ';
        len += (size_t)snprintf(body + len, cap - len, "%s\n%s", reqs[i], i % 7 ? "" : "  \n");
    }
    size_t n;
    int rc;
    json_t **lines = batch(op, body, 0, &n, &rc);
    CHECK_ERR(rc, LDPREF_OK);
    CHECK_INT(n, N);
    for (size_t i = 0; i < n && i < N; i++) {
        CHECK_INT(json_integer_value(json_object_get(lines[i], "index")), i);
        const char *err = json_string_value(json_object_get(lines[i], "error"));
        int kind = (int)i % 10;
        const char *want = kind == 3   ? "feature_dimension_mismatch"
                           : kind == 6 ? "malformed_json"
                           : kind == 8 ? "unknown_field"
                                       : NULL;
        if (want != NULL) {
            CHECK_STR(err ?: "(none)", want);
            CHECK(json_string_value(json_object_get(lines[i], "message")) != NULL);
            continue;
        }
        CHECK(err == NULL);
        char *single = single_candidates(op, reqs[i]);
        char *got = json_dumps(json_object_get(lines[i], "candidates"), JSON_COMPACT);
        check_record(single && got && strcmp(single, got) == 0, __FILE__, __LINE__,
                     "item %zu: batch %s, single %s", i, got ?: "-", single ?: "-");
        free(single);
        free(got);
    }
    free_lines(lines, n);

    /* the object form gives the same lines */
    json_t *items = json_array();
    for (int i = 0; i < 20; i++)
        json_array_append_new(items, json_loads(reqs[i % 10 == 6 ? 0 : i], 0, NULL));
    json_t *obj = json_pack("{s:o}", "items", items);
    char *text = json_dumps(obj, JSON_INDENT(2)); /* over many lines */
    json_decref(obj);
    lines = batch(op, text, 0, &n, &rc);
    CHECK_ERR(rc, LDPREF_OK);
    CHECK_INT(n, 20);
    for (size_t i = 0; i < n; i++) {
        CHECK_INT(json_integer_value(json_object_get(lines[i], "index")), i);
        if (i % 10 == 3 || i % 10 == 8)
            CHECK(json_object_get(lines[i], "error") != NULL);
        else
            CHECK(json_object_get(lines[i], "candidates") != NULL);
    }
    free_lines(lines, n);
    free(text);

    /* the CLI prints the same lines as the library */
    char path[400];
    snprintf(path, sizeof path, "%s/batch.jsonl", srv.dir);
    FILE *bf = fopen(path, "w");
    CHECK(bf != NULL && fwrite(body, 1, len, bf) == len);
    if (bf)
        fclose(bf);
    char env_server[128], env_token[256];
    snprintf(env_server, sizeof env_server, "LDPREF_SERVER=%s", srv.url);
    snprintf(env_token, sizeof env_token, "LDPREF_OPERATOR_TOKEN=%s", srv.token);
    const char *env[] = {env_server, env_token, NULL};
    const char *argv[] = {"ldpref", "score", "--batch", path, NULL};
    char *out = NULL, *lib = NULL;
    size_t lib_len = 0;
    CHECK_INT(run_tool(argv, env, &out), 0);
    FILE *f = open_memstream(&lib, &lib_len);
    CHECK_ERR(ldpref_score_batch(op, body, len, 0, f), LDPREF_OK);
    fclose(f);
    CHECK(out != NULL && strcmp(out, lib) == 0);
    free(out);
    free(lib);
    for (int i = 0; i < N; i++)
        free(reqs[i]);
    free(body);
}

/* Many items: every line, in order, over a chunked NDJSON answer. */
static void test_batch_streams(ldpref_client *op)
{
    enum { N = 3000 };
    char *item = request("p", 4, DIM, 0);
    for (char *p = item; *p; p++)
        if (*p == '\n')
            *p = ' ';
    size_t ilen = strlen(item), len = 0;
    char *body = malloc(N * (ilen + 1) + 1);
    for (int i = 0; i < N; i++) {
        memcpy(body + len, item, ilen);
        body[len + ilen] = '\n';
        len += ilen + 1;
    }
    body[len] = '\0';
    char head[512];
    snprintf(head, sizeof head,
             "POST /v1/score/batch HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer %s\r\n"
             "Content-Type: application/x-ndjson\r\nContent-Length: %zu\r\n\r\n",
             srv.token, len);
    int fd = wire_connect(srv.port, 30000);
    CHECK(fd >= 0);
    CHECK(wire_send_str(fd, head) == 0 && wire_send(fd, body, len) == 0);
    wire_reply r;
    CHECK(wire_read_reply(fd, "POST", &r) == 0);
    CHECK_INT(r.status, 200);
    CHECK(r.chunked);
    char ct[128] = "";
    CHECK(wire_header(&r, "Content-Type", ct, sizeof ct));
    CHECK_STR(ct, "application/x-ndjson");
    char *single = single_candidates(op, item);
    size_t lines = 0, in_order = 0, equal = 0;
    for (char *s = r.body, *e; s && *s; s = e + 1) {
        if ((e = strchr(s, '\n')) == NULL)
            break;
        *e = '\0';
        json_t *j = json_loads(s, 0, NULL);
        in_order += json_integer_value(json_object_get(j, "index")) == (json_int_t)lines;
        char *got = json_dumps(json_object_get(j, "candidates"), JSON_COMPACT);
        equal += single && got && strcmp(got, single) == 0;
        free(got);
        json_decref(j);
        lines++;
    }
    CHECK_INT(lines, N);
    CHECK_INT(in_order, N);
    CHECK_INT(equal, N);
    free(single);
    free(r.body);
    close(fd);
    free(body);
    free(item);
}

static void test_batch_refusals(ldpref_client *op, int64_t version)
{
    /* past the item cap: refused whole, nothing written */
    size_t n_items = LDPREF_SCORE_BATCH_MAX + 1;
    const char *line = "{\"candidates\":[{\"text\":\"x\"}]}\n";
    char *body = malloc(n_items * strlen(line) + 1);
    body[0] = '\0';
    for (size_t i = 0, len = 0; i < n_items; i++, len += strlen(line))
        memcpy(body + len, line, strlen(line) + 1);
    size_t n;
    int rc;
    json_t **lines = batch(op, body, 0, &n, &rc);
    CHECK_ERR(rc, LDPREF_ETOO_MANY_CANDIDATES);
    CHECK_INT(n, 0);
    free_lines(lines, n);
    free(body);

    /* the object form with items that are not an array */
    lines = batch(op, "{\"items\": 3}", 0, &n, &rc);
    CHECK_ERR(rc, LDPREF_EWRONG_TYPE);
    free_lines(lines, n);

    /* its own version is fine; a version that is not served needs admin */
    lines = batch(op, line, version, &n, &rc);
    CHECK_ERR(rc, LDPREF_OK);
    CHECK_INT(n, 1);
    free_lines(lines, n);
    char *json = NULL;
    CHECK_ERR(ldpref_admin_token_create(op, "scorer", "score", &json), LDPREF_OK);
    json_t *tok = json_loads(json, 0, NULL);
    ldpref_free(json);
    ldpref_options o;
    ldpref_options_init(&o);
    o.server_url = srv.url;
    o.operator_token = json_string_value(json_object_get(tok, "token"));
    ldpref_client *scorer = NULL;
    CHECK_ERR(ldpref_client_open(&o, &scorer), LDPREF_OK);
    lines = batch(scorer, line, version + 7, &n, &rc);
    CHECK_ERR(rc, LDPREF_EMODEL_NOT_ACTIVE);
    free_lines(lines, n);
    lines = batch(scorer, line, 0, &n, &rc);
    CHECK_ERR(rc, LDPREF_OK);
    free_lines(lines, n);
    ldpref_client_close(scorer);
    json_decref(tok);

    /* no token, and a token without the score scope */
    CHECK_ERR(ldpref_admin_token_create(op, "exporter", "export", &json), LDPREF_OK);
    tok = json_loads(json, 0, NULL);
    ldpref_free(json);
    o.operator_token = json_string_value(json_object_get(tok, "token"));
    ldpref_client *exporter = NULL;
    CHECK_ERR(ldpref_client_open(&o, &exporter), LDPREF_OK);
    lines = batch(exporter, line, 0, &n, &rc);
    CHECK_ERR(rc, LDPREF_EINSUFFICIENT_SCOPE);
    CHECK_INT(n, 0);
    free_lines(lines, n);
    ldpref_client_close(exporter);
    json_decref(tok);
    http_reply r;
    char url[256];
    snprintf(url, sizeof url, "%s/v1/score/batch", srv.url);
    http_raw("POST", url, line, strlen(line), NULL, &r);
    CHECK_INT(r.status, 401);
    char name[64];
    http_error_name(&r, name, sizeof name);
    CHECK_STR(name, "unauthorized");
    http_reply_free(&r);
}

int main(void)
{
    lp_rng_init();
    const char *args[] = {"--score-rate", "0", NULL};
    if (server_start(&srv, args) != 0) {
        fprintf(stderr, "server did not start\n");
        return 1;
    }
    int64_t version = serve_model();
    ldpref_client *op = operator_client_open(&srv);
    test_fast_equals_general(op);
    test_batch_lines(op);
    test_batch_streams(op);
    test_batch_refusals(op, version);
    ldpref_client_close(op);
    CHECK_INT(server_stop(&srv), 0); /* a clean exit (the sanitizers' too) */
    server_cleanup(&srv);
    return check_summary();
}
