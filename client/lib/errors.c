/*
 * errors.c — the public error functions of libldpref, and the compile-time
 * proof that the public enum in ldpref.h carries exactly the numbers of the
 * one error table (common/error.h): ldpref.h cannot include common headers,
 * so the numbers are written out there and checked here.
 */
#include "ldpref.h"

#include "error.h"

#define LDPREF_EOK LDPREF_OK
#define LPC_CHECK_CODE(num, sym, name, status, msg)                                                \
    _Static_assert(LDPREF_E##sym == (num) && LP_E##sym == (num),                                   \
                   "ldpref.h: LDPREF_E" #sym " must be " #num);
LP_ERROR_MAP(LPC_CHECK_CODE)
#undef LPC_CHECK_CODE
_Static_assert((int)LDPREF_ERROR_END == (int)LP_ERROR_COUNT,
               "ldpref.h and common/error.h list different numbers of codes");

const char *ldpref_strerror(int code)
{
    return lp_error_message(code);
}

const char *ldpref_error_name(int code)
{
    return lp_error_name(code);
}

const char *ldpref_version(void)
{
    return LDPREF_VERSION;
}
