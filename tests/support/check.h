/*
 * check.h — the test harness: value-printing checks and a closing summary.
 *
 * Each test binary calls checks, then returns check_summary(), which prints
 * "N passed, N failed" (the line tests/run.sh and CI read) and returns the
 * exit status.
 */
#ifndef LP_CHECK_H
#define LP_CHECK_H

#include <stdint.h>

void check_record(int ok, const char *file, int line, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
int check_summary(void);
int check_failures(void);

#define CHECK(cond) check_record(!!(cond), __FILE__, __LINE__, "%s", #cond)
#define CHECK_INT(a, b)                                                                            \
    do {                                                                                           \
        long long check_a_ = (long long)(a), check_b_ = (long long)(b);                            \
        check_record(check_a_ == check_b_, __FILE__, __LINE__, "%s == %s (%lld vs %lld)", #a, #b,  \
                     check_a_, check_b_);                                                          \
    } while (0)
#define CHECK_STR(a, b)                                                                            \
    do {                                                                                           \
        const char *check_a_ = (a), *check_b_ = (b);                                               \
        check_record(check_a_ &&check_b_ &&strcmp(check_a_, check_b_) == 0, __FILE__, __LINE__,    \
                     "%s == %s (\"%s\" vs \"%s\")", #a, #b, check_a_ ? check_a_ : "(null)",        \
                     check_b_ ? check_b_ : "(null)");                                              \
    } while (0)
#define CHECK_NEAR(a, b, tol)                                                                      \
    do {                                                                                           \
        double check_a_ = (a), check_b_ = (b), check_t_ = (tol);                                   \
        check_record(fabs(check_a_ - check_b_) <= check_t_, __FILE__, __LINE__,                    \
                     "|%s - %s| <= %s (%.17g vs %.17g, tol %.3g)", #a, #b, #tol, check_a_,         \
                     check_b_, check_t_);                                                          \
    } while (0)
/* Error codes by name, for readable failures. */
#define CHECK_ERR(got, want)                                                                       \
    do {                                                                                           \
        int check_g_ = (got), check_w_ = (want);                                                   \
        check_record(check_g_ == check_w_, __FILE__, __LINE__, "%s is %s (got %s)", #got,          \
                     lp_error_name(check_w_), lp_error_name(check_g_));                            \
    } while (0)

#endif
