/* clock.h — wall-clock and monotonic time in the units the protocol uses. */
#ifndef LP_CLOCK_H
#define LP_CLOCK_H

#include <stdint.h>

/* Unix time in milliseconds (the protocol's timestamp unit). */
int64_t lp_now_ms(void);
/* Monotonic time in nanoseconds, for latencies and timeouts. */
int64_t lp_mono_ns(void);

#endif
