/* hilock_stats: what a client counts, read on its loop thread, and the
 * histograms the engine fills. */
#include <stddef.h>
#include <string.h>

#include "core/base/error_detail.h"
#include "core/runtime/client_state.h"
#include "core/runtime/op.h"

static const int64_t bounds_us[HILOCK_STATS_BUCKETS] =
    HILOCK_STATS_BUCKET_BOUNDS_US;

static void count_in(uint64_t *buckets, int64_t us)
{
    int i = 0;
    while (i < HILOCK_STATS_BUCKETS - 1 && us > bounds_us[i])
        i++;
    buckets[i]++;
}

void hl_client_count_wait(hilock_client *c, int64_t wait_us)
{
    c->engine_counts.acquires++;
    if (wait_us < 0)
        wait_us = 0;
    count_in(c->engine_counts.wait_us, wait_us);
    c->engine_counts.wait_sum_us += (uint64_t)wait_us;
}

void hl_client_count_hold(hilock_client *c, int64_t held_us)
{
    c->engine_counts.releases++;
    if (held_us >= 0) {
        count_in(c->engine_counts.hold_us, held_us);
        c->engine_counts.hold_sum_us += (uint64_t)held_us;
    }
}

typedef struct stats_read_op {
    hl_op op; /* first */
    hilock_stats *out;
} stats_read_op;

void hl_client_read_stats(hilock_client *c, hilock_stats *all_out)
{
    hilock_stats all;
    memset(&all, 0, sizeof all);
    all.size = sizeof all;
    hl_client_read_counters(c, &all.counters);
    all.ops_pending = (uint64_t)atomic_load(&c->pending_ops);
    const hl_engine_counts *e = &c->engine_counts;
    all.acquires_waiting = e->acquires_waiting;
    all.acquires = e->acquires;
    all.acquires_busy = e->acquires_busy;
    all.acquires_failed = e->acquires_failed;
    all.releases = e->releases;
    all.acquires_handed = e->acquires_handed;
    memcpy(all.wait_us, e->wait_us, sizeof all.wait_us);
    memcpy(all.hold_us, e->hold_us, sizeof all.hold_us);
    all.wait_sum_us = e->wait_sum_us;
    all.hold_sum_us = e->hold_sum_us;
    *all_out = all;
}

static void read_start(hl_op *op)
{
    hilock_client *c = op->home;
    hilock_stats all;
    hl_client_read_stats(c, &all);
    hilock_stats *out = ((stats_read_op *)op)->out;
    size_t n = out->size < sizeof all ? out->size : sizeof all;
    size_t size = out->size;
    memcpy(out, &all, n);
    out->size = size;
    hl_op_done(op, HILOCK_OK, 0, NULL, NULL);
}

static void read_on_stack(hl_op *op) { (void)op; }

static const hl_op_type read_type = {.start = read_start,
                                     .destroy = read_on_stack};

int hilock_client_stats_read(hilock_client *c, hilock_stats *out)
{
    if (c == NULL || out == NULL)
        return hl_fail(HILOCK_EINVAL, "NULL argument");
    if (out->size < offsetof(hilock_stats, counters) +
                        sizeof out->counters)
        return hl_fail(HILOCK_EINVAL,
                       "stats size %zu is too small: set it to "
                       "sizeof(hilock_stats)",
                       out->size);
    if (!hl_client_in_loop(c) && !hl_op_caller_may_wait())
        return hl_fail(HILOCK_EDEADLK, "stats asked on the loop thread of "
                                       "another client");
    stats_read_op st;
    hl_op_init(&st.op, &read_type);
    st.out = out;
    return hl_op_call_and_wait(c, &st.op);
}
