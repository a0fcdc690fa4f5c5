/* Monotonic time in microseconds: every lease, deadline, timeout and
 * drift computation uses it.  Wall time only ever goes to Redis. */
#ifndef HL_MONOTIME_H
#define HL_MONOTIME_H

#include <stdint.h>

typedef int64_t hl_monotime; /* µs on CLOCK_MONOTONIC */

#define HL_MS(ms) ((hl_monotime)(ms) * 1000)

/* Now on CLOCK_MONOTONIC, or on the clock a test installed. */
hl_monotime hl_monotime_now(void);

/* Tests replace the clock with their own function; NULL restores it. */
typedef hl_monotime hl_clock_fn(void);
void hl_monotime_set_clock(hl_clock_fn *fn);

#endif
