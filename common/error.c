/* error.c — lookups into the error table of error.h. */
#include "error.h"

#include <stddef.h>
#include <string.h>

struct error_row {
    const char *name;
    int status;
    const char *message;
};

static const struct error_row error_rows[] = {
#define LP_ERROR_ROW(num, sym, name, status, msg) [num] = {name, status, msg},
    LP_ERROR_MAP(LP_ERROR_ROW)
#undef LP_ERROR_ROW
};

static const struct error_row *error_row(int code)
{
    if (code < 0 || code >= (int)(sizeof error_rows / sizeof error_rows[0]))
        return NULL;
    return error_rows[code].name ? &error_rows[code] : NULL;
}

const char *lp_error_name(int code)
{
    const struct error_row *row = error_row(code);
    return row ? row->name : "unknown_error";
}

const char *lp_error_message(int code)
{
    const struct error_row *row = error_row(code);
    return row ? row->message : "unknown error";
}

int lp_error_http_status(int code)
{
    const struct error_row *row = error_row(code);
    return row ? row->status : 500;
}

int lp_error_from_name(const char *name)
{
    if (name == NULL)
        return -1;
    for (int code = 0; code < LP_ERROR_COUNT; code++) {
        const struct error_row *row = error_row(code);
        if (row && strcmp(row->name, name) == 0)
            return code;
    }
    return -1;
}
