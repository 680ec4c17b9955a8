/* check.c — counters behind check.h. */
#include "check.h"

#include <stdarg.h>
#include <stdio.h>

static int checks_passed, checks_failed;

void check_record(int ok, const char *file, int line, const char *fmt, ...)
{
    if (ok) {
        checks_passed++;
        return;
    }
    checks_failed++;
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, "FAIL %s:%d: ", file, line);
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    va_end(ap);
}

int check_failures(void)
{
    return checks_failed;
}

int check_summary(void)
{
    printf("%d passed, %d failed\n", checks_passed, checks_failed);
    fflush(stdout);
    return checks_failed ? 1 : 0;
}
