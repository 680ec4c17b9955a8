/*
 * e2e_tls.c — HTTPS in the server, with a certificate authority and a
 * server certificate the test makes with `openssl`:
 *
 *  1. Refusals at start: a key file other users can read (the server names
 *     the file and the fix), --tls-cert without --tls-key, and a key that
 *     does not belong to the certificate.
 *  2. The real client library with ca_file, and the real CLI with
 *     --ca-file (and LDPREF_CA_FILE), over https://: the operator creates
 *     enrollment tokens and loads 3 MB of tasks, annotators enroll, fetch tasks and
 *     submit labels, which are in the database; in both threading models
 *     (the default event loop with workers, whose label requests wait
 *     suspended for the commit, and a thread per connection).
 *  3. Without the CA the client refuses the server by name:
 *     certificate_untrusted (library and CLI exit code), nothing stored.
 *     An https:// URL for a plain HTTP server fails with tls_failed; plain
 *     HTTP sent to the TLS port gets no answer at once (not a hang), and the
 *     server goes on serving HTTPS.
 *  4. The console's session cookie is Secure over HTTPS (and not over plain
 *     HTTP), seen by a real Chromium that signs in (screenshot saved).
 */
#include "annotator_client.h"
#include "cdp.h"
#include "check.h"
#include "error.h"
#include "http_raw.h"
#include "ldpref.h"
#include "server_proc.h"
#include "tmpdir.h"

#include <curl/curl.h>
#include <jansson.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#define BIG_TASKS 8000

static char dir[256], ca[400], cert[400], key[400], other_key[400];

/* Runs a shell command made from fmt; its exit status (-1: not run). */
static int sh(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static int sh(const char *fmt, ...)
{
    char cmd[4096];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(cmd, sizeof cmd, fmt, ap);
    va_end(ap);
    int rc = system(cmd);
    return rc == -1 ? -1 : WEXITSTATUS(rc);
}

/* A CA, and a server certificate it signed for 127.0.0.1 and localhost,
 * with the key 0600; plus a key of no certificate. */
static int make_certificates(void)
{
    snprintf(ca, sizeof ca, "%s/ca.pem", dir);
    snprintf(cert, sizeof cert, "%s/server.pem", dir);
    snprintf(key, sizeof key, "%s/server.key", dir);
    snprintf(other_key, sizeof other_key, "%s/other.key", dir);
    const char *q = "2>/dev/null";
    return sh("cd %s && openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes "
              "-keyout ca.key -out ca.pem -days 2 -subj '/CN=ldpref test CA' %s && "
              "openssl req -newkey rsa:2048 -nodes -keyout server.key -out server.csr "
              "-subj '/CN=localhost' %s && "
              "printf 'subjectAltName=IP:127.0.0.1,DNS:localhost\\nextendedKeyUsage=serverAuth\\n' "
              "> ext.cnf && "
              "openssl x509 -req -in server.csr -CA ca.pem -CAkey ca.key -CAcreateserial "
              "-out server.pem -days 2 -extfile ext.cnf %s && "
              "openssl genpkey -algorithm ec -pkeyopt ec_paramgen_curve:P-256 -out other.key %s && "
              "chmod 600 server.key other.key",
              dir, q, q, q, q);
}

/* The server's log contains text. */
static int log_has(const server_proc *s, const char *text)
{
    FILE *f = fopen(s->log, "r");
    if (f == NULL)
        return 0;
    char line[2048];
    int found = 0;
    while (!found && fgets(line, sizeof line, f))
        found = strstr(line, text) != NULL;
    fclose(f);
    return found;
}

static void test_refusals(void)
{
    server_proc s;
    /* a key every user can read */
    chmod(key, 0644);
    const char *open_key[] = {"--tls-cert", cert, "--tls-key", key, NULL};
    CHECK_INT(server_start(&s, open_key), -1);
    CHECK(log_has(&s, "open to every user") && log_has(&s, "chmod 600"));
    server_cleanup(&s);
    chmod(key, 0600);
    /* a certificate without its key */
    const char *half[] = {"--tls-cert", cert, NULL};
    CHECK_INT(server_start(&s, half), -1);
    server_cleanup(&s);
    /* a key of another certificate */
    const char *mismatch[] = {"--tls-cert", cert, "--tls-key", other_key, NULL};
    CHECK_INT(server_start(&s, mismatch), -1);
    CHECK(log_has(&s, "cannot start serving") && log_has(&s, "TLS certificate and key"));
    server_cleanup(&s);
}

static ldpref_client *open_client(const server_proc *s, const char *token, const char *key_path,
                                  const char *ca_file)
{
    ldpref_options o;
    annotator_options_init(&o, s->url, key_path, 1.0, 1000);
    o.operator_token = token;
    o.ca_file = ca_file;
    ldpref_client *c = NULL;
    CHECK_ERR(ldpref_client_open(&o, &c), LDPREF_OK);
    return c;
}

static char *enrollment_token(ldpref_client *op)
{
    char *json = NULL;
    if (ldpref_admin_enrollment_tokens(op, NULL, 1, &json) != LDPREF_OK)
        return NULL;
    json_t *j = json_loads(json, 0, NULL);
    ldpref_free(json);
    const char *t = json_string_value(json_array_get(json_object_get(j, "tokens"), 0));
    char *out = t ? strdup(t) : NULL;
    json_decref(j);
    return out;
}

/* Runs the CLI through the shell with env (a "K=V ..." prefix): exit
 * status, stdout and stderr together into out (malloc'd, may be NULL). */
static int cli(const char *env, const char *args, char **out)
{
    char bin[512], cmd[4096];
    server_bin_path("ldpref", bin, sizeof bin);
    snprintf(cmd, sizeof cmd, "env %s %s %s 2>&1", env, bin, args);
    FILE *p = popen(cmd, "r");
    if (p == NULL)
        return -1;
    size_t len = 0, cap = 1 << 16;
    char *buf = calloc(1, cap);
    size_t n;
    while (buf && (n = fread(buf + len, 1, cap - len - 1, p)) > 0)
        len += n;
    int rc = pclose(p);
    if (out)
        *out = buf;
    else
        free(buf);
    return rc == -1 ? -1 : WEXITSTATUS(rc);
}

/* Library and CLI over HTTPS; n_labels grows by what they stored. */
static void test_clients(const server_proc *s, const char *tag)
{
    ldpref_client *op = open_client(s, s->token, NULL, ca);
    if (op == NULL)
        return;
    char tasks[500];
    snprintf(tasks, sizeof tasks, "%s/%s.jsonl", dir, tag);
    /* a 3 MB upload: many TLS records through the server's 16 KiB of
     * connection memory */
    FILE *f = fopen(tasks, "w");
    for (int i = 0; i < BIG_TASKS; i++)
        fprintf(f, "{\"id\":\"%s%d\",\"prompt\":\"p%d %0300d\",\"responses\":[\"a%d\",\"b%d\"]}\n",
                tag, i, i, 0, i, i);
    fclose(f);
    char *loaded = NULL;
    CHECK_ERR(ldpref_admin_tasks_load(op, tasks, NULL, &loaded), LDPREF_OK);
    json_t *lj = loaded ? json_loads(loaded, 0, NULL) : NULL;
    CHECK_INT(json_integer_value(json_object_get(lj, "loaded")), BIG_TASKS);
    json_decref(lj);
    ldpref_free(loaded);
    long long labels0 = server_db_count(s, "labels");

    /* the library: enroll, fetch, answer */
    char keyfile[400], name[64];
    snprintf(name, sizeof name, "%s-lib.key", tag);
    CHECK_ERR(annotator_key_ensure(dir, name, keyfile, sizeof keyfile), LDPREF_OK);
    ldpref_client *ann = open_client(s, NULL, keyfile, ca);
    char *token = enrollment_token(op);
    CHECK(token != NULL);
    CHECK_ERR(ldpref_enroll(ann, token ? token : "", NULL), LDPREF_OK);
    free(token);
    ldpref_task *t = NULL;
    size_t n = 0;
    CHECK_ERR(ldpref_next_tasks(ann, 2, &t, &n), LDPREF_OK);
    CHECK_INT(n, 2);
    for (size_t i = 0; i < n; i++) {
        ldpref_receipt r;
        CHECK_ERR(ldpref_answer(ann, &t[i], LDPREF_CHOICE_A, &r), LDPREF_OK);
    }
    ldpref_tasks_free(t, n);
    ldpref_client_close(ann);
    CHECK_INT(server_db_count(s, "labels"), labels0 + 2);

    /* the CLI: --ca-file for one annotator, LDPREF_CA_FILE for another */
    for (int k = 0; k < 2; k++) {
        char cli_key[400], env[1200], args[1200], *out = NULL;
        snprintf(cli_key, sizeof cli_key, "%s/%s-cli%d.key", dir, tag, k);
        snprintf(env, sizeof env, "LDPREF_SERVER=%s LDPREF_KEY=%s%s%s", s->url, cli_key,
                 k ? " LDPREF_CA_FILE=" : "", k ? ca : "");
        const char *ca_flag = k ? "" : "--ca-file ";
        const char *ca_arg = k ? "" : ca;
        CHECK_INT(cli(env, "keygen", NULL), 0);
        token = enrollment_token(op);
        snprintf(args, sizeof args, "%s%s enroll %s", ca_flag, ca_arg, token ? token : "x");
        free(token);
        CHECK_INT(cli(env, args, &out), 0);
        free(out);
        snprintf(args, sizeof args, "%s%s next --count 1", ca_flag, ca_arg);
        CHECK_INT(cli(env, args, &out), 0);
        json_t *task = out ? json_loads(out, JSON_DISABLE_EOF_CHECK, NULL) : NULL;
        long long id = json_integer_value(json_object_get(task, "task_id"));
        json_decref(task);
        free(out);
        CHECK(id > 0);
        snprintf(args, sizeof args, "%s%s answer %lld b", ca_flag, ca_arg, id);
        CHECK_INT(cli(env, args, &out), 0);
        json_t *receipt = out ? json_loads(out, 0, NULL) : NULL;
        CHECK(json_integer_value(json_object_get(receipt, "label_id")) > 0);
        json_decref(receipt);
        free(out);
    }
    CHECK_INT(server_db_count(s, "labels"), labels0 + 4);
    ldpref_client_close(op);
}

/* Without the CA: refused by name, nothing stored. */
static void test_untrusted(const server_proc *s)
{
    long long labels0 = server_db_count(s, "labels");
    long long annotators0 = server_db_count(s, "annotators");
    ldpref_client *op = open_client(s, s->token, NULL, NULL);
    char *json = NULL;
    CHECK_ERR(ldpref_admin_enrollment_tokens(op, NULL, 1, &json), LDPREF_ECERTIFICATE_UNTRUSTED);
    CHECK(strstr(ldpref_errmsg(op), "certificate") != NULL);
    ldpref_free(json);
    ldpref_client_close(op);

    char cli_key[400], env[1200], *out = NULL;
    snprintf(cli_key, sizeof cli_key, "%s/untrusted.key", dir);
    snprintf(env, sizeof env, "LDPREF_SERVER=%s LDPREF_KEY=%s", s->url, cli_key);
    CHECK_INT(cli(env, "keygen", NULL), 0);
    CHECK_INT(cli(env, "enroll et_whatever", &out), LDPREF_ECERTIFICATE_UNTRUSTED);
    check_record(out && strstr(out, "certificate_untrusted") != NULL && strstr(out, "--ca-file"),
                 __FILE__, __LINE__, "the CLI names the refusal and the fix: %s",
                 out ? out : "(nothing)");
    free(out);
    /* a CA file that does not exist: said at once */
    snprintf(env, sizeof env, "LDPREF_SERVER=%s LDPREF_KEY=%s LDPREF_CA_FILE=%s/none.pem", s->url,
             cli_key, dir);
    CHECK_INT(cli(env, "next", &out), LDPREF_EINVALID_ARGUMENT);
    CHECK(out && strstr(out, "none.pem") != NULL);
    free(out);
    CHECK_INT(server_db_count(s, "labels"), labels0);
    CHECK_INT(server_db_count(s, "annotators"), annotators0);
}

/* Plain HTTP to the TLS port, and https:// to a plain server. */
static void test_wrong_protocol(const server_proc *tls, const server_proc *plain)
{
    char url[128];
    snprintf(url, sizeof url, "http://127.0.0.1:%d/v1/healthz", tls->port);
    http_reply r;
    http_raw_opts o = {0};
    http_raw_ex("GET", url, NULL, 0, &o, &r);
    /* an empty reply or a reset, never a timeout */
    check_record(r.status == 0 &&
                     (r.curl_code == CURLE_GOT_NOTHING || r.curl_code == CURLE_RECV_ERROR ||
                      r.curl_code == CURLE_SEND_ERROR),
                 __FILE__, __LINE__, "plain HTTP to the TLS port: status %ld, curl code %d",
                 r.status, r.curl_code);
    http_reply_free(&r);
    char https_url[128];
    snprintf(https_url, sizeof https_url, "https://127.0.0.1:%d", plain->port);
    ldpref_options opt;
    ldpref_options_init(&opt);
    opt.server_url = https_url;
    opt.operator_token = plain->token;
    opt.ca_file = ca;
    ldpref_client *wrong = NULL;
    CHECK_ERR(ldpref_client_open(&opt, &wrong), LDPREF_OK);
    char *json = NULL;
    CHECK_ERR(ldpref_admin_stats(wrong, &json), LDPREF_ETLS_FAILED);
    ldpref_free(json);
    ldpref_client_close(wrong);
    /* the TLS server is still serving */
    snprintf(url, sizeof url, "%s/v1/healthz", tls->url);
    o.ca_file = ca;
    http_raw_ex("GET", url, NULL, 0, &o, &r);
    CHECK_INT(r.status, 200);
    http_reply_free(&r);
}

/* The session cookie's Set-Cookie over the server's own scheme. */
static void sign_in_cookie(const server_proc *s, char *out, size_t outlen)
{
    char url[128], body[256];
    snprintf(url, sizeof url, "%s/v1/console/session", s->url);
    snprintf(body, sizeof body, "{\"token\":\"%s\"}", s->token);
    http_raw_opts o = {.ca_file = ca, .headers = {"Sec-Fetch-Site: same-origin"}};
    http_reply r;
    http_raw_ex("POST", url, body, strlen(body), &o, &r);
    CHECK_INT(r.status, 201);
    snprintf(out, outlen, "%s", r.set_cookie);
    http_reply_free(&r);
}

static void test_console_cookie(const server_proc *tls, const server_proc *plain)
{
    char cookie[512];
    sign_in_cookie(tls, cookie, sizeof cookie);
    CHECK(strstr(cookie, "; Secure;") != NULL && strstr(cookie, "HttpOnly") != NULL);
    sign_in_cookie(plain, cookie, sizeof cookie);
    CHECK(cookie[0] != '\0' && strstr(cookie, "Secure") == NULL);

    /* A real browser signs in over HTTPS and keeps a Secure cookie. The
     * test's CA is not in the browser's store: certificate errors are
     * ignored for this page only (what trusting the CA would do). */
    cdp *b = cdp_start(1280, 800);
    CHECK(b != NULL);
    if (b == NULL)
        return;
    json_decref(
        cdp_call(b, "Security.setIgnoreCertificateErrors", json_pack("{s:b}", "ignore", 1)));
    char url[160], expr[400];
    snprintf(url, sizeof url, "%s/", tls->url);
    CHECK_INT(cdp_navigate(b, url), 0);
    CHECK(cdp_wait_true(b, "!document.getElementById('signin').hidden", 10000));
    snprintf(expr, sizeof expr,
             "(() => { document.getElementById('token').value = '%s'; "
             "document.querySelector('#signin-form button').click(); return true; })()",
             tls->token);
    json_decref(cdp_eval(b, expr));
    CHECK(cdp_wait_true(b, "!document.getElementById('nav').hidden", 10000));
    CHECK(cdp_wait_true(b, "location.protocol === 'https:'", 1000));
    json_t *cookies = cdp_call(b, "Network.getCookies", NULL);
    json_t *c0 = json_array_get(json_object_get(cookies, "cookies"), 0);
    CHECK_STR(json_string_value(json_object_get(c0, "name")), "ldpref_session");
    CHECK(json_is_true(json_object_get(c0, "secure")));
    CHECK(json_is_true(json_object_get(c0, "httpOnly")));
    json_decref(cookies);
    const char *build = getenv("LDPREF_BUILD") ? getenv("LDPREF_BUILD") : "build";
    char shot[512];
    snprintf(shot, sizeof shot, "%s/test-output", build);
    mkdir(shot, 0755);
    snprintf(shot, sizeof shot, "%s/test-output/console-https.png", build);
    CHECK_INT(cdp_screenshot(b, shot), 0);
    cdp_close(b);
}

/* How long a new HTTPS connection takes to be ready (TCP and TLS
 * handshakes), as curl measures it: the median of 20, for the log. */
static void print_handshake(const server_proc *s)
{
    char url[128];
    snprintf(url, sizeof url, "%s/v1/healthz", s->url);
    double t[20];
    for (int i = 0; i < 20; i++) {
        CURL *c = curl_easy_init();
        curl_easy_setopt(c, CURLOPT_URL, url);
        curl_easy_setopt(c, CURLOPT_CAINFO, ca);
        curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, (curl_write_callback)fwrite);
        FILE *null = fopen("/dev/null", "w");
        curl_easy_setopt(c, CURLOPT_WRITEDATA, null);
        curl_easy_perform(c);
        curl_easy_getinfo(c, CURLINFO_APPCONNECT_TIME, &t[i]);
        curl_easy_cleanup(c);
        fclose(null);
    }
    for (int i = 1; i < 20; i++)
        for (int j = i; j > 0 && t[j] < t[j - 1]; j--) {
            double x = t[j];
            t[j] = t[j - 1];
            t[j - 1] = x;
        }
    printf("TLS: a new connection is ready in %.2f ms (median of 20, RSA-2048 certificate)\n",
           t[10] * 1e3);
}

int main(void)
{
    curl_global_init(CURL_GLOBAL_DEFAULT);
    if (tmpdir_create(dir, sizeof dir, "tls") != 0 || sh("command -v openssl >/dev/null") != 0 ||
        make_certificates() != 0) {
        check_record(0, __FILE__, __LINE__,
                     "cannot make the test's certificates (is openssl installed? "
                     "deploy/install-deps.sh installs it)");
        return check_summary();
    }
    test_refusals();
    const char *tls_args[] = {"--tls-cert", cert, "--tls-key", key, NULL};
    const char *tpc_args[] = {"--tls-cert",           cert, "--tls-key", key,
                              "--connection-threads", "64", NULL};
    server_proc tls, tpc, plain;
    CHECK_INT(server_start(&tls, tls_args), 0);
    CHECK(strncmp(tls.url, "https://", 8) == 0);
    CHECK_INT(server_start(&plain, NULL), 0);
    test_clients(&tls, "event-loop");
    test_untrusted(&tls);
    test_wrong_protocol(&tls, &plain);
    test_console_cookie(&tls, &plain);
    print_handshake(&tls);
    server_cleanup(&tls);
    server_cleanup(&plain);
    CHECK_INT(server_start(&tpc, tpc_args), 0);
    test_clients(&tpc, "per-connection");
    server_cleanup(&tpc);
    tmpdir_remove(dir);
    return check_summary();
}
