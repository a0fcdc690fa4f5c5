/* Await: wait for a latch's count to reach zero, on the engine's acquire
 * state machine.  The latch kind's attempt reads the count: zero (or no
 * latch) ends the wait, anything else is "held" with no lease, so the
 * wait goes on until a message on the latch's channel, a (re)confirmed
 * subscription, or the deadline, when the count is read once more.  There
 * is no re-check on a timer of its own: N awaits cost the server nothing
 * while nothing happens. */
#include <stdio.h>

#include "core/base/alloc.h"
#include "core/base/error_detail.h"
#include "core/engine/compose.h"
#include "latch/latch_kind.h"

/* Every await waits as this owner: a latch's attempts only read, so they
 * take no owner turns and keep no holds, and owners never meet. */
#define AWAIT_OWNER 1

static int latch_attempt(hilock_lock *lock, const hl_attempt_args *args,
                         hl_request_fn *fn, void *data)
{
    (void)args;
    int rc = hl_latch_check_slot(lock);
    if (rc != HILOCK_OK)
        return rc;
    return hl_latch_read(lock, fn, data);
}

static void latch_parse_attempt(const hilock_reply *reply,
                                hl_acquire_result *out)
{
    int64_t count = 0;
    if (reply == NULL || hl_latch_parse_count(reply, &count) != HILOCK_OK) {
        out->outcome = HL_ACQ_BAD_REPLY;
    } else if (count == 0) {
        out->outcome = HL_ACQ_ACQUIRED;
        out->count = 1; /* opened */
    } else {
        out->outcome = HL_ACQ_HELD;
        out->ttl_ms = -1; /* no lease bounds the wait: messages do */
    }
}

static int latch_channel_of(const hilock_lock *lock, const char *field,
                            size_t field_len, hl_aux_name *out)
{
    (void)field;
    (void)field_len;
    return hl_latch_channel(lock, out);
}

const hl_kind hl_latch_kind = {
    .name = "latch",
    .channel = latch_channel_of,
    .wake_all = true,
    .reads_only = true,
    .bad_reply_detail = "unexpected reply to a latch's count",
    .attempt = latch_attempt,
    .parse_attempt = latch_parse_attempt,
};

/* What an async await reports to, through the engine's callback. */
typedef struct await_call {
    hilock_latch_cb *cb;
    void *user_data;
} await_call;

/* A wait that ran out with the latch closed is no error of the await's:
 * it answers "not opened". */
static int await_status(int status)
{
    return status == HILOCK_EBUSY ? HILOCK_OK : status;
}

static void on_await_done(hilock_lock *lock, int status,
                          const hilock_acquired *acquired, void *data)
{
    await_call call = *(await_call *)data;
    hl_free(data);
    int64_t opened = status == HILOCK_OK && acquired != NULL;
    status = await_status(status);
    if (status == HILOCK_OK)
        hl_clear_detail();
    call.cb((hilock_latch *)lock, status, opened, call.user_data);
}

int hl_latch_await_start(hilock_latch *latch, int64_t wait_ms,
                         hilock_latch_cb *cb, void *user_data, bool *opened,
                         uint64_t *op_id)
{
    hl_clear_detail();
    if (wait_ms < 0 && wait_ms != HILOCK_WAIT_FOREVER)
        return hl_fail(HILOCK_EINVAL,
                       "wait_ms %lld: a wait is 0 or more, or "
                       "HILOCK_WAIT_FOREVER",
                       (long long)wait_ms);
    hilock_lock *lock = hl_latch_lock(latch);
    if (cb == NULL) {
        int rc = hl_acquire(lock, AWAIT_OWNER, wait_ms, HILOCK_LEASE_WATCHDOG,
                            0, NULL, NULL, NULL, NULL);
        if (opened != NULL)
            *opened = rc == HILOCK_OK;
        if (rc == HILOCK_EBUSY)
            hl_clear_detail();
        return await_status(rc);
    }
    await_call *call = hl_malloc(sizeof *call);
    if (call == NULL)
        return hl_fail(HILOCK_ENOMEM, "out of memory");
    call->cb = cb;
    call->user_data = user_data;
    int rc = hl_acquire(lock, AWAIT_OWNER, wait_ms, HILOCK_LEASE_WATCHDOG, 0,
                        on_await_done, call, op_id, NULL);
    if (rc != HILOCK_OK)
        hl_free(call);
    return rc;
}
