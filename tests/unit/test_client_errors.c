/*
 * test_client_errors.c — the public error surface of libldpref: every code
 * of the one error table has a public name and message, the public numbers
 * equal the table's (also checked at compile time in client/lib/errors.c), and
 * unknown codes degrade gracefully.
 */
#include "ldpref.h"

#include "check.h"
#include "error.h"

#include <string.h>

int main(void)
{
    CHECK_INT(LDPREF_ERROR_END, LP_ERROR_COUNT);
    for (int code = 0; code < LP_ERROR_COUNT; code++) {
        /* numbers reserved for codes added elsewhere */
        if (code == 63 || code == 64 ||
            (code >= 71 && code <= 103 && strcmp(lp_error_name(code), "unknown_error") == 0))
            continue;
        const char *name = ldpref_error_name(code), *msg = ldpref_strerror(code);
        CHECK(name != NULL && msg != NULL);
        CHECK_STR(name, lp_error_name(code));
        CHECK_STR(msg, lp_error_message(code));
        CHECK(strcmp(name, "unknown_error") != 0);
        CHECK(msg[0] != '\0');
        CHECK_INT(lp_error_from_name(name), code);
    }
    /* Spot checks of the published numbers against the table. */
    CHECK_INT(LDPREF_OK, LP_OK);
    CHECK_INT(LDPREF_EINVALID_ARGUMENT, LP_EINVALID_ARGUMENT);
    CHECK_INT(LDPREF_EBAD_SIGNATURE, LP_EBAD_SIGNATURE);
    CHECK_INT(LDPREF_ELOCAL_BUDGET_EXCEEDED, LP_ELOCAL_BUDGET_EXCEEDED);
    CHECK_INT(LDPREF_ENETWORK, LP_ENETWORK);
    CHECK_INT(LDPREF_EPROTOCOL, LP_EPROTOCOL);
    CHECK_INT(LDPREF_EKEY_FILE, LP_EKEY_FILE);
    CHECK_INT(LDPREF_EBAD_REQUEST, LP_EBAD_REQUEST);
    CHECK_STR(ldpref_error_name(LDPREF_ELOCAL_BUDGET_EXCEEDED), "local_budget_exceeded");
    CHECK_STR(ldpref_error_name(LDPREF_OK), "ok");
    /* Codes outside the table. */
    CHECK_STR(ldpref_error_name(-1), "unknown_error");
    CHECK_STR(ldpref_error_name(LP_ERROR_COUNT), "unknown_error");
    CHECK_STR(ldpref_error_name(100000), "unknown_error");
    CHECK(ldpref_strerror(-5) != NULL);
    CHECK(ldpref_strerror(LP_ERROR_COUNT + 7) != NULL);
    /* Per-handle message on a NULL handle, and NULL-safe destructors. */
    CHECK(ldpref_errmsg(NULL) != NULL);
    ldpref_client_close(NULL);
    ldpref_free(NULL);
    ldpref_tasks_free(NULL, 3);
    CHECK_STR(ldpref_version(), LDPREF_VERSION);
    return check_summary();
}
