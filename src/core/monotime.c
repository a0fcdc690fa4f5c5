#include "monotime.h"

#include <time.h>

static hl_monotime system_clock(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (hl_monotime)ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
}

static hl_clock_fn *current_clock = system_clock;

hl_monotime hl_monotime_now(void) { return current_clock(); }

void hl_monotime_set_clock(hl_clock_fn *fn)
{
    current_clock = fn ? fn : system_clock;
}
