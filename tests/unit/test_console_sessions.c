/*
 * test_console_sessions.c — the console's session table
 * (server/service/console_sessions) with the clock in the test's hands: ids
 * and CSRF tokens (format, distinct), the idle timeout and its refresh, the
 * absolute lifetime that activity does not extend, sign-out, the cap on
 * live sessions (the least recently used goes), and ids or tokens that are
 * malformed, truncated or another session's, and the principal each
 * session was signed in with.
 */
#include "console_sessions.h"

#include "check.h"
#include "error.h"

#include <stdio.h>
#include <string.h>

#define SECOND 1000
#define LIFETIME (8 * 3600 * SECOND)
#define IDLE (30 * 60 * SECOND)

static lp_sessions *table(size_t max_live)
{
    lp_sessions_opts o = {.lifetime_ms = LIFETIME, .idle_ms = IDLE, .max_live = max_live};
    lp_sessions *s = lp_sessions_new(&o);
    CHECK(s != NULL);
    return s;
}

static int base64url(const char *s)
{
    return strspn(s, "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_") ==
           strlen(s);
}

static void test_create_and_check(void)
{
    lp_sessions *s = table(4);
    char id[LP_SESSION_ID_MAX], id2[LP_SESSION_ID_MAX], csrf[LP_SESSION_CSRF_MAX],
        csrf2[LP_SESSION_CSRF_MAX], again[LP_SESSION_CSRF_MAX];
    int64_t expires = 0, exp2 = 0;
    CHECK_ERR(lp_sessions_create(s, 1000, NULL, id, csrf, &expires), LP_OK);
    CHECK_INT(strlen(id), 43);
    CHECK_INT(strlen(csrf), 43);
    CHECK(base64url(id) && base64url(csrf));
    CHECK(strcmp(id, csrf) != 0);
    CHECK_INT(expires, 1000 + LIFETIME);
    lp_principal who2 = {.token_id = 7, .scopes = LP_SCOPE_EXPORT}, seen = {0};
    CHECK_ERR(lp_sessions_create(s, 1000, &who2, id2, csrf2, &exp2), LP_OK);
    CHECK(strcmp(id, id2) != 0 && strcmp(csrf, csrf2) != 0);
    CHECK_INT(lp_sessions_live(s, 1000), 2);

    /* The check gives the same CSRF token back (a reloaded page asks again). */
    int64_t exp_seen = 0;
    CHECK_ERR(lp_sessions_check(s, id, 2000, again, &exp_seen, NULL), LP_OK);
    CHECK_STR(again, csrf);
    CHECK_INT(exp_seen, expires);
    /* Each session remembers the principal it was signed in with. */
    seen.token_id = -1;
    CHECK_ERR(lp_sessions_check(s, id, 2000, NULL, NULL, &seen), LP_OK);
    CHECK_INT(seen.token_id, 0);
    CHECK_INT(seen.scopes, 0);
    CHECK_ERR(lp_sessions_check(s, id2, 2000, NULL, NULL, &seen), LP_OK);
    CHECK_INT(seen.token_id, 7);
    CHECK_INT(seen.scopes, LP_SCOPE_EXPORT);
    CHECK(lp_sessions_csrf_ok(s, id, csrf));
    CHECK(!lp_sessions_csrf_ok(s, id, csrf2)); /* another session's token */
    CHECK(!lp_sessions_csrf_ok(s, id2, csrf));
    CHECK(!lp_sessions_csrf_ok(s, id, NULL));
    CHECK(!lp_sessions_csrf_ok(s, id, ""));
    char cut[LP_SESSION_CSRF_MAX];
    snprintf(cut, sizeof cut, "%.42s", csrf);
    CHECK(!lp_sessions_csrf_ok(s, id, cut));
    char flipped[LP_SESSION_CSRF_MAX];
    snprintf(flipped, sizeof flipped, "%s", csrf);
    flipped[0] = flipped[0] == 'A' ? 'B' : 'A';
    CHECK(!lp_sessions_csrf_ok(s, id, flipped));

    /* Ids that are not a live session. */
    CHECK_ERR(lp_sessions_check(s, NULL, 2000, NULL, NULL, NULL), LP_EUNAUTHORIZED);
    CHECK_ERR(lp_sessions_check(s, "", 2000, NULL, NULL, NULL), LP_EUNAUTHORIZED);
    char bad[LP_SESSION_ID_MAX];
    snprintf(bad, sizeof bad, "%s", id);
    bad[10] = bad[10] == 'x' ? 'y' : 'x';
    CHECK_ERR(lp_sessions_check(s, bad, 2000, NULL, NULL, NULL), LP_EUNAUTHORIZED);
    snprintf(bad, sizeof bad, "%.42s", id);
    CHECK_ERR(lp_sessions_check(s, bad, 2000, NULL, NULL, NULL), LP_EUNAUTHORIZED);
    CHECK_ERR(lp_sessions_check(s, csrf, 2000, NULL, NULL, NULL), LP_EUNAUTHORIZED);

    /* Sign-out ends one session only. */
    lp_sessions_end(s, id);
    CHECK_ERR(lp_sessions_check(s, id, 3000, NULL, NULL, NULL), LP_EUNAUTHORIZED);
    CHECK_ERR(lp_sessions_check(s, id2, 3000, NULL, NULL, NULL), LP_OK);
    lp_sessions_end(s, "unknown");
    lp_sessions_end(s, NULL);
    CHECK_INT(lp_sessions_live(s, 3000), 1);
    lp_sessions_free(s);
}

static void test_expiry(void)
{
    lp_sessions *s = table(4);
    char id[LP_SESSION_ID_MAX], csrf[LP_SESSION_CSRF_MAX];
    int64_t expires = 0, t = 0;
    CHECK_ERR(lp_sessions_create(s, t, NULL, id, csrf, &expires), LP_OK);
    /* Idle: each request restarts the idle clock... */
    for (int i = 0; i < 10; i++) {
        t += IDLE - SECOND;
        CHECK_ERR(lp_sessions_check(s, id, t, NULL, NULL, NULL), LP_OK);
    }
    /* ...but never beyond the absolute lifetime. */
    while (t + IDLE / 2 < LIFETIME) {
        t += IDLE / 2;
        CHECK_ERR(lp_sessions_check(s, id, t, NULL, NULL, NULL), LP_OK);
    }
    CHECK_ERR(lp_sessions_check(s, id, LIFETIME - 1, NULL, NULL, NULL), LP_OK);
    CHECK_ERR(lp_sessions_check(s, id, LIFETIME, NULL, NULL, NULL), LP_EUNAUTHORIZED);
    CHECK_INT(lp_sessions_live(s, LIFETIME), 0);

    /* Idle for the whole timeout: ended, and it stays ended. */
    CHECK_ERR(lp_sessions_create(s, 0, NULL, id, csrf, &expires), LP_OK);
    CHECK_ERR(lp_sessions_check(s, id, IDLE - 1, NULL, NULL, NULL), LP_OK);
    CHECK_ERR(lp_sessions_check(s, id, 2 * IDLE - 1, NULL, NULL, NULL), LP_EUNAUTHORIZED);
    CHECK_ERR(lp_sessions_check(s, id, 2 * IDLE - 2, NULL, NULL, NULL), LP_EUNAUTHORIZED);
    lp_sessions_free(s);
}

static void test_cap(void)
{
    enum { CAP = 3 };
    lp_sessions *s = table(CAP);
    char ids[CAP + 1][LP_SESSION_ID_MAX], csrf[LP_SESSION_CSRF_MAX];
    int64_t expires;
    for (int i = 0; i < CAP; i++)
        CHECK_ERR(lp_sessions_create(s, i, NULL, ids[i], csrf, &expires), LP_OK);
    /* Session 0 is used again, so session 1 is the least recently used. */
    CHECK_ERR(lp_sessions_check(s, ids[0], 10, NULL, NULL, NULL), LP_OK);
    CHECK_ERR(lp_sessions_create(s, 20, NULL, ids[CAP], csrf, &expires), LP_OK);
    CHECK_INT(lp_sessions_live(s, 20), CAP);
    CHECK_ERR(lp_sessions_check(s, ids[1], 21, NULL, NULL, NULL), LP_EUNAUTHORIZED);
    CHECK_ERR(lp_sessions_check(s, ids[0], 21, NULL, NULL, NULL), LP_OK);
    CHECK_ERR(lp_sessions_check(s, ids[2], 21, NULL, NULL, NULL), LP_OK);
    CHECK_ERR(lp_sessions_check(s, ids[CAP], 21, NULL, NULL, NULL), LP_OK);
    /* An ended session frees its place before a live one is evicted. */
    lp_sessions_end(s, ids[2]);
    CHECK_ERR(lp_sessions_create(s, 30, NULL, ids[1], csrf, &expires), LP_OK);
    CHECK_ERR(lp_sessions_check(s, ids[0], 31, NULL, NULL, NULL), LP_OK);
    CHECK_ERR(lp_sessions_check(s, ids[CAP], 31, NULL, NULL, NULL), LP_OK);
    CHECK_ERR(lp_sessions_check(s, ids[1], 31, NULL, NULL, NULL), LP_OK);
    lp_sessions_free(s);
}

/* The CSRF key is per table (per process): a token is no good elsewhere. */
static void test_key_per_table(void)
{
    lp_sessions *a = table(2), *b = table(2);
    char id[LP_SESSION_ID_MAX], csrf[LP_SESSION_CSRF_MAX];
    int64_t expires;
    CHECK_ERR(lp_sessions_create(a, 0, NULL, id, csrf, &expires), LP_OK);
    CHECK(lp_sessions_csrf_ok(a, id, csrf));
    CHECK(!lp_sessions_csrf_ok(b, id, csrf));
    CHECK_ERR(lp_sessions_check(b, id, 0, NULL, NULL, NULL), LP_EUNAUTHORIZED);
    lp_sessions_free(a);
    lp_sessions_free(b);
    lp_sessions_free(NULL);
    lp_sessions_opts none = {.lifetime_ms = 1, .idle_ms = 1, .max_live = 0};
    CHECK(lp_sessions_new(&none) == NULL);
}

int main(void)
{
    test_create_and_check();
    test_expiry();
    test_cap();
    test_key_per_table();
    return check_summary();
}
