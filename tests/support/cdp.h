/*
 * cdp.h — a real headless Chromium for tests, driven over the DevTools
 * protocol on a pipe (--remote-debugging-pipe: NUL-terminated JSON messages,
 * the browser reads fd 3 and writes fd 4). One page per browser; every
 * request the page makes is recorded (Network.requestWillBeSent).
 *
 * The browser is Debian's `chromium` (or $LDPREF_CHROMIUM), started with a
 * fresh profile in a temporary directory, no sandbox (tests run as root in
 * CI), no GPU, and Chromium's own background traffic off.
 */
#ifndef LP_CDP_H
#define LP_CDP_H

#include <jansson.h>
#include <stddef.h>

typedef struct cdp cdp;

/* Starts the browser with a width x height window and opens one blank page
 * (Network, Page and Runtime enabled). NULL on failure (message on stderr). */
cdp *cdp_start(int width, int height);
/* Closes the browser (Browser.close, then SIGKILL if it lingers), removes
 * its profile. Accepts NULL. */
void cdp_close(cdp *b);

/* Sends method with params (reference taken; NULL for none) to the page and
 * waits up to 30 s for its answer. Returns the "result" object (new
 * reference) or NULL on error or timeout (message on stderr). */
json_t *cdp_call(cdp *b, const char *method, json_t *params);

/* Navigates the page to url and waits for its load event. 0 or -1. */
int cdp_navigate(cdp *b, const char *url);

/* Evaluates a JavaScript expression in the page (promises awaited); returns
 * its value (new reference; JSON null for undefined) or NULL on an
 * exception. */
json_t *cdp_eval(cdp *b, const char *expr);

/* Polls expr every 50 ms until it evaluates to true, at most timeout_ms.
 * Returns 1 if it did, 0 otherwise. */
int cdp_wait_true(cdp *b, const char *expr, int timeout_ms);

/* Types one printable ASCII character (keyDown with its text, keyUp). 0 or -1. */
int cdp_key(cdp *b, char ch);

/* Saves a PNG screenshot of the page at path. 0 or -1. */
int cdp_screenshot(cdp *b, const char *path);

/* The URLs of the requests the page made, in order (borrowed). */
size_t cdp_request_count(const cdp *b);
const char *cdp_request_url(const cdp *b, size_t i);

#endif
