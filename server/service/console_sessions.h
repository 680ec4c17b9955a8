/*
 * console_sessions.h — the web console's sign-in sessions, held in memory.
 *
 * A session is created by signing in with an operator token. Its id is 32
 * CSPRNG bytes (unpadded base64url, 43 characters) sent to the browser once,
 * in an HttpOnly cookie; only its BLAKE2b-256 hash is kept, so a copy of the
 * server's memory does not yield a usable cookie. A session ends at its
 * absolute expiry, after an idle period without requests, on sign-out, or
 * when the table is full and a newer sign-in evicts the least recently used
 * one. Sessions do not survive a restart.
 *
 * The session's CSRF token is derived, not stored: a keyed BLAKE2b of the
 * session id under a per-process random key. The page receives it in the
 * sign-in answer only and sends it back in X-CSRF-Token on every
 * state-changing request.
 *
 * A session remembers the principal (operator token id and scopes) it was
 * signed in with; the caller checks that the token is still live.
 *
 * All functions are thread-safe. Times are Unix milliseconds passed in by
 * the caller, so expiry is testable without waiting.
 */
#ifndef LP_CONSOLE_SESSIONS_H
#define LP_CONSOLE_SESSIONS_H

#include "auth.h"

#include <stddef.h>
#include <stdint.h>

#define LP_SESSION_ID_MAX 48 /* 43 characters of base64url and the NUL */
#define LP_SESSION_CSRF_MAX 48

typedef struct lp_sessions lp_sessions;

typedef struct lp_sessions_opts {
    int64_t lifetime_ms; /* absolute: from sign-in */
    int64_t idle_ms;     /* since the last request */
    size_t max_live;     /* sessions held at once */
} lp_sessions_opts;

/* NULL when out of memory or when libsodium cannot start. */
lp_sessions *lp_sessions_new(const lp_sessions_opts *opts);
void lp_sessions_free(lp_sessions *s);

/* A new session at now_ms for who (may be NULL: no token, no scope): its
 * id into id and its CSRF token into csrf, *expires_ms its absolute
 * expiry. LP_OK or LP_ERNG. */
int lp_sessions_create(lp_sessions *s, int64_t now_ms, const lp_principal *who,
                       char id[LP_SESSION_ID_MAX], char csrf[LP_SESSION_CSRF_MAX],
                       int64_t *expires_ms);

/* Checks the session id (may be NULL) at now_ms and, when it is live,
 * refreshes its idle timer. csrf (may be NULL) receives its CSRF token,
 * expires_ms (may be NULL) its absolute expiry and who (may be NULL) the
 * principal it was signed in with. LP_OK, or LP_EUNAUTHORIZED for an
 * unknown, expired or ended session. */
int lp_sessions_check(lp_sessions *s, const char *id, int64_t now_ms,
                      char csrf[LP_SESSION_CSRF_MAX], int64_t *expires_ms, lp_principal *who);

/* 1 when given (may be NULL) is the session's CSRF token, compared in
 * constant time; 0 otherwise. */
int lp_sessions_csrf_ok(const lp_sessions *s, const char *id, const char *given);

/* Ends the session (a no-op for an unknown id). */
void lp_sessions_end(lp_sessions *s, const char *id);

/* Live sessions at now_ms. */
size_t lp_sessions_live(lp_sessions *s, int64_t now_ms);

#endif
