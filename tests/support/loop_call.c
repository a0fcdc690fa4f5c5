/* Running code on a client's loop thread; see loop_call.h. */
#include "support/loop_call.h"

#include <stdarg.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <string.h>

#include <setjmp.h>
#include <cmocka.h>

#include "core/client_internal.h"
#include "hilock/error.h"
#include "support/fixture.h"

typedef struct loop_call {
    hl_task task; /* first: the loop thread hands back this pointer */
    hl_loop_fn *fn;
    void *arg;
    atomic_bool done;
    bool closed;
} loop_call;

static void loop_call_run(hilock_client *c, hl_task *t, bool closed)
{
    loop_call *lc = (loop_call *)t;

    lc->closed = closed;
    if (!closed && lc->fn != NULL)
        lc->fn(c, lc->arg);
    atomic_store(&lc->done, true);
}

void hl_run_on_loop_within(hilock_client *c, hl_loop_fn *fn, void *arg,
                           int timeout_ms)
{
    loop_call lc;

    memset(&lc, 0, sizeof lc);
    lc.task.run = loop_call_run;
    lc.fn = fn;
    lc.arg = arg;
    atomic_init(&lc.done, false);
    assert_int_equal(hl_client_submit(c, &lc.task), HILOCK_OK);
    /* The task sits on the loop's queue: leaving early would leave it a
     * dangling pointer, so this wait has no reason to end but a hang. */
    if (!hl_wait_flag(&lc.done, timeout_ms))
        fail_msg("the loop thread did not run a task within %d ms",
                 timeout_ms);
    assert_false(lc.closed);
}

void hl_run_on_loop(hilock_client *c, hl_loop_fn *fn, void *arg)
{
    hl_run_on_loop_within(c, fn, arg, hl_widen(30000));
}
