/* test_error.c — the error table: unique names, round trips, statuses. */
#include "check.h"
#include "error.h"

#include <string.h>

int main(void)
{
    CHECK_STR(lp_error_name(LP_OK), "ok");
    CHECK_STR(lp_error_name(-1), "unknown_error");
    CHECK_STR(lp_error_name(LP_ERROR_COUNT), "unknown_error");
    CHECK_INT(lp_error_http_status(9999), 500);
    CHECK_INT(lp_error_from_name("no_such_error"), -1);
    CHECK_INT(lp_error_from_name(NULL), -1);
    for (int code = 0; code < LP_ERROR_COUNT; code++) {
        /* numbers reserved for codes added elsewhere */
        if (code == 63 || code == 64 ||
            (code >= 71 && code <= 103 && strcmp(lp_error_name(code), "unknown_error") == 0))
            continue;
        const char *name = lp_error_name(code);
        check_record(lp_error_from_name(name) == code, __FILE__, __LINE__,
                     "name %s maps back to %d", name, code);
        int status = lp_error_http_status(code);
        check_record(code == 0 ? status == 200 : (status >= 400 && status <= 599), __FILE__,
                     __LINE__, "status of %s is %d", name, status);
        check_record(strlen(lp_error_message(code)) > 0, __FILE__, __LINE__, "message of %s", name);
        for (const char *p = name; *p; p++)
            check_record((*p >= 'a' && *p <= 'z') || *p == '_', __FILE__, __LINE__,
                         "name %s is snake_case", name);
    }
    CHECK_INT(lp_error_http_status(LP_EBAD_SIGNATURE), 401);
    CHECK_INT(lp_error_http_status(LP_EBODY_TOO_LARGE), 413);
    /* campaigns that finish: fixed numbers, names and statuses */
    CHECK_INT(LP_ECAMPAIGN_COMPLETE, 58);
    CHECK_STR(lp_error_name(58), "campaign_complete");
    CHECK_INT(lp_error_http_status(LP_ECAMPAIGN_COMPLETE), 404);
    CHECK_INT(LP_EQUOTA_REACHED, 59);
    CHECK_STR(lp_error_name(59), "quota_reached");
    CHECK_INT(lp_error_http_status(LP_EQUOTA_REACHED), 403);
    return check_summary();
}
