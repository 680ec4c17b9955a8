/* cdp.c — headless Chromium over the DevTools pipe. See cdp.h. */
#include "cdp.h"

#include "tmpdir.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sodium.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define CDP_TIMEOUT_MS 30000
#define CDP_MAX_REQUESTS 256

struct cdp {
    pid_t pid;
    int to_browser, from_browser;
    char profile[256];
    char session[128]; /* the page's flat session id */
    long next_id;
    char *buf; /* bytes read, not yet split into messages */
    size_t len, cap;
    char *requests[CDP_MAX_REQUESTS];
    size_t nrequests;
    int loaded; /* a Page.loadEventFired arrived since the last navigation */
};

static long now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1000L + ts.tv_nsec / 1000000L;
}

/* Notes the events the tests look at. */
static void on_event(cdp *b, const json_t *msg)
{
    const char *method = json_string_value(json_object_get(msg, "method"));
    if (method == NULL)
        return;
    if (strcmp(method, "Page.loadEventFired") == 0)
        b->loaded = 1;
    if (strcmp(method, "Network.requestWillBeSent") == 0 && b->nrequests < CDP_MAX_REQUESTS) {
        const char *url = json_string_value(
            json_object_get(json_object_get(json_object_get(msg, "params"), "request"), "url"));
        if (url)
            b->requests[b->nrequests++] = strdup(url);
    }
}

/* The next complete message (new reference), waiting until deadline; NULL
 * on timeout or a closed pipe. */
static json_t *read_message(cdp *b, long deadline)
{
    for (;;) {
        char *nul = b->len ? memchr(b->buf, '\0', b->len) : NULL;
        if (nul) {
            size_t n = (size_t)(nul - b->buf);
            json_t *msg = json_loadb(b->buf, n, 0, NULL);
            memmove(b->buf, nul + 1, b->len - n - 1);
            b->len -= n + 1;
            if (msg)
                return msg;
            continue;
        }
        long left = deadline - now_ms();
        if (left <= 0)
            return NULL;
        struct pollfd p = {b->from_browser, POLLIN, 0};
        if (poll(&p, 1, (int)left) <= 0)
            continue;
        if (b->cap - b->len < 65536) {
            size_t cap = b->cap ? b->cap * 2 : 1 << 20;
            char *nb = realloc(b->buf, cap);
            if (nb == NULL)
                return NULL;
            b->buf = nb;
            b->cap = cap;
        }
        ssize_t got = read(b->from_browser, b->buf + b->len, b->cap - b->len);
        if (got <= 0)
            return NULL;
        b->len += (size_t)got;
    }
}

static json_t *call_in(cdp *b, const char *session, const char *method, json_t *params)
{
    long id = ++b->next_id;
    json_t *msg = json_pack("{s:I, s:s, s:o}", "id", (json_int_t)id, "method", method, "params",
                            params ? params : json_object());
    if (session && session[0])
        json_object_set_new(msg, "sessionId", json_string(session));
    char *text = json_dumps(msg, JSON_COMPACT);
    json_decref(msg);
    if (text == NULL)
        return NULL;
    size_t n = strlen(text) + 1; /* with its NUL */
    for (size_t off = 0; off < n;) {
        ssize_t w = write(b->to_browser, text + off, n - off);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0) {
            free(text);
            return NULL;
        }
        off += (size_t)w;
    }
    free(text);
    long deadline = now_ms() + CDP_TIMEOUT_MS;
    for (;;) {
        json_t *in = read_message(b, deadline);
        if (in == NULL) {
            fprintf(stderr, "cdp: %s: no answer\n", method);
            return NULL;
        }
        if (json_integer_value(json_object_get(in, "id")) != id) {
            on_event(b, in);
            json_decref(in);
            continue;
        }
        json_t *result = json_incref(json_object_get(in, "result"));
        if (result == NULL) {
            char *err = json_dumps(json_object_get(in, "error"), JSON_COMPACT);
            fprintf(stderr, "cdp: %s: %s\n", method, err ? err : "error");
            free(err);
        }
        json_decref(in);
        return result;
    }
}

json_t *cdp_call(cdp *b, const char *method, json_t *params)
{
    return call_in(b, b->session, method, params);
}

/* Reads events for ms milliseconds (or until stop is set). */
static void pump(cdp *b, int ms, const int *stop)
{
    long deadline = now_ms() + ms;
    while (!(stop && *stop) && now_ms() < deadline) {
        json_t *in = read_message(b, deadline);
        if (in == NULL)
            return;
        on_event(b, in);
        json_decref(in);
    }
}

static int ok(json_t *result)
{
    int good = result != NULL;
    json_decref(result);
    return good ? 0 : -1;
}

cdp *cdp_start(int width, int height)
{
    cdp *b = calloc(1, sizeof *b);
    int in[2] = {-1, -1}, out[2] = {-1, -1};
    if (b == NULL || tmpdir_create(b->profile, sizeof b->profile, "chromium") != 0 ||
        pipe2(in, O_CLOEXEC) != 0 || pipe2(out, O_CLOEXEC) != 0) {
        fprintf(stderr, "cdp: cannot prepare the browser\n");
        free(b);
        return NULL;
    }
    const char *bin = getenv("LDPREF_CHROMIUM") ? getenv("LDPREF_CHROMIUM") : "chromium";
    char profile_arg[300], size_arg[64];
    snprintf(profile_arg, sizeof profile_arg, "--user-data-dir=%s", b->profile);
    snprintf(size_arg, sizeof size_arg, "--window-size=%d,%d", width, height);
    const char *argv[] = {bin,
                          "--headless",
                          "--no-sandbox",
                          "--disable-gpu",
                          "--disable-quic",
                          "--no-first-run",
                          "--disable-background-networking",
                          "--disable-component-update",
                          "--disable-sync",
                          "--disable-default-apps",
                          "--disable-extensions",
                          "--disable-dev-shm-usage",
                          "--hide-scrollbars",
                          "--remote-debugging-pipe",
                          profile_arg,
                          size_arg,
                          "about:blank",
                          NULL};
    b->pid = fork();
    if (b->pid == 0) {
        /* The browser reads commands on fd 3 and writes answers on fd 4. */
        int r = dup(in[0]), w = dup(out[1]);
        if (dup2(r, 3) < 0 || dup2(w, 4) < 0)
            _exit(127);
        int devnull = open("/dev/null", O_WRONLY);
        dup2(devnull, 1);
        dup2(devnull, 2);
        execvp(bin, (char *const *)argv);
        _exit(127);
    }
    close(in[0]);
    close(out[1]);
    b->to_browser = in[1];
    b->from_browser = out[0];
    if (b->pid < 0) {
        cdp_close(b);
        return NULL;
    }
    json_t *t = call_in(b, NULL, "Target.createTarget", json_pack("{s:s}", "url", "about:blank"));
    const char *target = json_string_value(json_object_get(t, "targetId"));
    json_t *a = target ? call_in(b, NULL, "Target.attachToTarget",
                                 json_pack("{s:s, s:b}", "targetId", target, "flatten", 1))
                       : NULL;
    const char *session = json_string_value(json_object_get(a, "sessionId"));
    if (session)
        snprintf(b->session, sizeof b->session, "%s", session);
    json_decref(t);
    json_decref(a);
    if (!b->session[0] || ok(cdp_call(b, "Page.enable", NULL)) != 0 ||
        ok(cdp_call(b, "Network.enable", NULL)) != 0 ||
        ok(cdp_call(b, "Runtime.enable", NULL)) != 0) {
        fprintf(stderr, "cdp: cannot start %s with a page (is Debian's chromium installed?)\n",
                bin);
        cdp_close(b);
        return NULL;
    }
    return b;
}

int cdp_navigate(cdp *b, const char *url)
{
    b->loaded = 0;
    json_t *r = cdp_call(b, "Page.navigate", json_pack("{s:s}", "url", url));
    int good = r && json_object_get(r, "errorText") == NULL;
    json_decref(r);
    if (!good)
        return -1;
    pump(b, CDP_TIMEOUT_MS, &b->loaded);
    return b->loaded ? 0 : -1;
}

json_t *cdp_eval(cdp *b, const char *expr)
{
    json_t *r = cdp_call(
        b, "Runtime.evaluate",
        json_pack("{s:s, s:b, s:b}", "expression", expr, "returnByValue", 1, "awaitPromise", 1));
    if (r == NULL || json_object_get(r, "exceptionDetails")) {
        json_decref(r);
        return NULL;
    }
    json_t *v = json_object_get(json_object_get(r, "result"), "value");
    v = v ? json_incref(v) : json_null();
    json_decref(r);
    return v;
}

int cdp_wait_true(cdp *b, const char *expr, int timeout_ms)
{
    long deadline = now_ms() + timeout_ms;
    do {
        json_t *v = cdp_eval(b, expr);
        int yes = json_is_true(v);
        json_decref(v);
        if (yes)
            return 1;
        pump(b, 50, NULL);
    } while (now_ms() < deadline);
    return 0;
}

int cdp_key(cdp *b, char ch)
{
    char text[2] = {ch, '\0'};
    int vk = ch >= 'a' && ch <= 'z' ? ch - 'a' + 'A' : ch == '?' ? 191 : ch;
    const char *types[] = {"keyDown", "keyUp"};
    for (int i = 0; i < 2; i++) {
        json_t *p = json_pack("{s:s, s:s, s:i, s:i}", "type", types[i], "key", text,
                              "windowsVirtualKeyCode", vk, "modifiers", ch == '?' ? 8 : 0);
        if (i == 0)
            json_object_set_new(p, "text", json_string(text));
        if (ok(cdp_call(b, "Input.dispatchKeyEvent", p)) != 0)
            return -1;
    }
    return 0;
}

int cdp_screenshot(cdp *b, const char *path)
{
    json_t *r = cdp_call(b, "Page.captureScreenshot", json_pack("{s:s}", "format", "png"));
    const char *data = json_string_value(json_object_get(r, "data"));
    int rc = -1;
    size_t cap = data ? strlen(data) : 0, n = 0;
    unsigned char *png = data ? malloc(cap) : NULL;
    if (png && sodium_base642bin(png, cap, data, cap, NULL, &n, NULL,
                                 sodium_base64_VARIANT_ORIGINAL) == 0) {
        FILE *f = fopen(path, "wb");
        if (f && fwrite(png, 1, n, f) == n)
            rc = 0;
        if (f && fclose(f) != 0)
            rc = -1;
    }
    free(png);
    json_decref(r);
    return rc;
}

size_t cdp_request_count(const cdp *b)
{
    return b->nrequests;
}

const char *cdp_request_url(const cdp *b, size_t i)
{
    return i < b->nrequests ? b->requests[i] : NULL;
}

void cdp_close(cdp *b)
{
    if (b == NULL)
        return;
    if (b->pid > 0) {
        json_decref(call_in(b, NULL, "Browser.close", NULL));
        int status;
        for (int i = 0; i < 100 && waitpid(b->pid, &status, WNOHANG) == 0; i++)
            usleep(50000);
        if (waitpid(b->pid, &status, WNOHANG) == 0) {
            kill(b->pid, SIGKILL);
            waitpid(b->pid, &status, 0);
        }
    }
    if (b->to_browser > 0)
        close(b->to_browser);
    if (b->from_browser > 0)
        close(b->from_browser);
    for (size_t i = 0; i < b->nrequests; i++)
        free(b->requests[i]);
    free(b->buf);
    tmpdir_remove(b->profile);
    free(b);
}
