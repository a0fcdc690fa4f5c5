/* Monotonic time in microseconds: every lease, deadline, timeout and
 * drift computation uses it.  Wall time only ever goes to Redis. */
#ifndef HL_MONOTIME_H
#define HL_MONOTIME_H

#include <stdint.h>
#include <time.h>

typedef int64_t hl_monotime; /* µs on CLOCK_MONOTONIC */

/* Time arithmetic saturates: a lease, ttl, uptime or wait may come from a
 * caller or a server as any int64_t, and none may wrap around into a
 * deadline in the past or a negative delay.  Results clamp to
 * [INT64_MIN, INT64_MAX], and INT64_MAX reads as "never" wherever a
 * deadline is kept. */
static inline int64_t hl_sat_add(int64_t a, int64_t b)
{
    int64_t r;
    if (__builtin_add_overflow(a, b, &r))
        return b > 0 ? INT64_MAX : INT64_MIN;
    return r;
}

static inline int64_t hl_sat_sub(int64_t a, int64_t b)
{
    int64_t r;
    if (__builtin_sub_overflow(a, b, &r))
        return b < 0 ? INT64_MAX : INT64_MIN;
    return r;
}

static inline int64_t hl_sat_mul(int64_t a, int64_t b)
{
    int64_t r;
    if (__builtin_mul_overflow(a, b, &r))
        return (a < 0) != (b < 0) ? INT64_MIN : INT64_MAX;
    return r;
}

/* Milliseconds as microseconds. */
static inline hl_monotime hl_ms_to_us(int64_t ms)
{
    return hl_sat_mul(ms, 1000);
}

#define HL_MS(ms) hl_ms_to_us(ms)

/* The instant ms after at: a deadline that may be "never" (INT64_MAX) but
 * never one that wrapped into the past. */
static inline hl_monotime hl_after_ms(hl_monotime at, int64_t ms)
{
    return hl_sat_add(at, hl_ms_to_us(ms));
}

/* Now on CLOCK_MONOTONIC, or on the clock a test installed. */
hl_monotime hl_monotime_now(void);

/* Now in ms modulo 2^32, for a time kept in four bytes and compared by
 * unsigned difference: right for spans under 49.7 days. */
static inline uint32_t hl_monotime_ms32(void)
{
    return (uint32_t)(hl_monotime_now() / HL_MS(1));
}

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
 * FUTEX_WAIT_BITSET take; a negative us is now.  Always the real
 * clock. */
struct timespec hl_monotonic_deadline(int64_t us);

/* Tests replace the clock with their own function; NULL restores it. */
typedef hl_monotime hl_clock_fn(void);
void hl_monotime_set_clock(hl_clock_fn *fn);

#endif
