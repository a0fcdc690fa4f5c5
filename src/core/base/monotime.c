#include "core/base/monotime.h"

#include <stdatomic.h>
#include <time.h>

static hl_monotime system_clock(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (hl_monotime)ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
}

/* Swapped by tests while loop threads read it. */
static _Atomic(hl_clock_fn *) current_clock = system_clock;

hl_monotime hl_monotime_now(void)
{
    hl_clock_fn *fn = atomic_load_explicit(&current_clock,
                                           memory_order_acquire);
    return fn();
}

void hl_monotime_set_clock(hl_clock_fn *fn)
{
    atomic_store_explicit(&current_clock, fn ? fn : system_clock,
                          memory_order_release);
}

hl_monotime hl_drift_margin(int64_t lease_ms)
{
    return hl_sat_add(HL_MS(lease_ms) / 100, HL_MS(2));
}

hl_monotime hl_validity(int64_t lease_ms, hl_monotime sent_at,
                        hl_monotime now)
{
    hl_monotime left = hl_sat_sub(HL_MS(lease_ms), hl_sat_sub(now, sent_at));
    return hl_sat_sub(left, hl_drift_margin(lease_ms));
}

struct timespec hl_monotonic_deadline(int64_t us)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    if (us < 0)
        us = 0;
    /* time_t holds every int64_t / 10^6 seconds past any uptime. */
    t.tv_sec += (time_t)(us / 1000000);
    t.tv_nsec += (long)(us % 1000000) * 1000;
    if (t.tv_nsec >= 1000000000L) {
        t.tv_sec++;
        t.tv_nsec -= 1000000000L;
    }
    return t;
}
