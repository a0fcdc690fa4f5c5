/* Monotonic time in microseconds: every lease, deadline, timeout and
 * drift computation uses it.  Wall time only ever goes to Redis. */
#ifndef HL_MONOTIME_H
#define HL_MONOTIME_H

#include <stdint.h>
#include <time.h>

typedef int64_t hl_monotime; /* µs on CLOCK_MONOTONIC */

#define HL_MS(ms) ((hl_monotime)(ms) * 1000)

/* Now on CLOCK_MONOTONIC, or on the clock a test installed. */
hl_monotime hl_monotime_now(void);

/* The part of a lease left for clock drift between this host and the
 * server: 1 % of the lease plus 2 ms (the Redlock rule). */
hl_monotime hl_drift_margin(int64_t lease_ms);

/* What is left of a lease whose grant was asked at sent_at, at now: the
 * lease minus the time elapsed minus the drift margin.  Negative once it
 * has run out. */
hl_monotime hl_validity(int64_t lease_ms, hl_monotime sent_at,
                        hl_monotime now);

/* The CLOCK_MONOTONIC instant us from now, as the absolute deadline
 * pthread_cond_timedwait (on a monotonic condition variable) and
 * FUTEX_WAIT_BITSET take.  Always the real clock. */
struct timespec hl_monotonic_deadline(int64_t us);

/* Tests replace the clock with their own function; NULL restores it. */
typedef hl_monotime hl_clock_fn(void);
void hl_monotime_set_clock(hl_clock_fn *fn);

#endif
