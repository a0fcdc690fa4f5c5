/* Running code on a client's loop thread; see loop_call.h. */
#include "support/loop_call.h"

#include <stdarg.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <string.h>

#include <setjmp.h>
#include <cmocka.h>

#include "core/runtime/client_state.h"
#include "core/runtime/op.h"
#include "core/runtime/sentinel.h"
#include "hilock/error.h"
#include "support/fixture.h"

typedef struct loop_call {
    hl_op op; /* first: the loop thread hands back this pointer */
    hl_loop_fn *fn;
    void *arg;
    atomic_bool done;
    bool ran;
} loop_call;

static void loop_call_start(hl_op *op)
{
    loop_call *lc = (loop_call *)op;

    if (lc->fn != NULL)
        lc->fn(op->home, lc->arg);
    lc->ran = true;
    hl_op_done(op, HILOCK_OK, 0, NULL, NULL);
}

/* The loop's last touch of the op, which lives on the waiting stack. */
static void loop_call_destroy(hl_op *op)
{
    atomic_store(&((loop_call *)op)->done, true);
}

static const hl_op_type loop_call_type = {
    .start = loop_call_start,
    .destroy = loop_call_destroy,
};

void hl_run_on_loop_within(hilock_client *c, hl_loop_fn *fn, void *arg,
                           int timeout_ms)
{
    loop_call lc;

    hl_op_init(&lc.op, &loop_call_type);
    lc.fn = fn;
    lc.arg = arg;
    lc.ran = false;
    atomic_init(&lc.done, false);
    assert_int_equal(hl_op_submit(c, &lc.op), HILOCK_OK);
    /* The op sits on the loop's queue: leaving early would leave it a
     * dangling pointer, so this wait has no reason to end but a hang. */
    if (!hl_wait_flag(&lc.done, timeout_ms))
        fail_msg("the loop thread did not run a task within %d ms",
                 timeout_ms);
    /* Drained with the client's close instead of run. */
    assert_true(lc.ran);
}

void hl_run_on_loop(hilock_client *c, hl_loop_fn *fn, void *arg)
{
    hl_run_on_loop_within(c, fn, arg, hl_widen(30000));
}

static void read_master_moves(hilock_client *c, void *arg)
{
    *(unsigned *)arg = c->master_moves;
}

unsigned hl_client_master_moves(hilock_client *c)
{
    unsigned n = 0;
    hl_run_on_loop(c, read_master_moves, &n);
    return n;
}

bool hl_client_has_moved(void *probe)
{
    hl_moves_probe *p = probe;
    return hl_client_master_moves(p->client) > p->moves;
}

static void read_sentinel_rounds(hilock_client *c, void *arg)
{
    *(unsigned *)arg = hl_sentinel_rounds(c->sentinel);
}

unsigned hl_client_sentinel_rounds(hilock_client *c)
{
    unsigned n = 0;
    hl_run_on_loop(c, read_sentinel_rounds, &n);
    return n;
}

bool hl_client_has_asked(void *probe)
{
    hl_rounds_probe *p = probe;
    return hl_client_sentinel_rounds(p->client) > p->rounds;
}
