/* A lock's status: the kind's status request, run as an operation like
 * the queries, with a result that is a status, not a number. */
#include <stdio.h>

#include "core/base/alloc.h"
#include "core/base/error_detail.h"
#include "core/engine/engine_internal.h"
#include "core/config/option_values.h"

typedef struct status_call {
    hl_op op; /* first */
    hilock_lock *lock;
    hilock_lock_status_cb *cb; /* NULL: a blocking caller waits */
    void *user_data;
    hilock_lock_status *result; /* until handed on */
} status_call;

static void on_reply(void *data, int status, hilock_reply *reply)
{
    status_call *call = data;
    if (status != HILOCK_OK) {
        char why[HL_DETAIL_MAX];
        snprintf(why, sizeof why, "%s",
                 reply ? reply->str : hilock_last_error());
        hilock_reply_free(reply);
        hl_op_done(&call->op, status, 0, NULL, why);
        return;
    }
    int rc = call->lock->kind->parse_status(reply, &call->result);
    hl_op_done(&call->op, rc, 0, NULL,
               rc == HILOCK_OK       ? NULL
               : rc == HILOCK_ENOMEM ? "out of memory"
                                     : "unexpected status reply");
}

static void call_start(hl_op *op)
{
    status_call *call = (status_call *)op;
    hilock_lock *lock = call->lock;
    if (hl_lock_conn(lock) == NULL || lock->destroyed) {
        const char *why;
        int status = hl_lock_gone(lock, &why);
        hl_op_done(op, status, 0, NULL, why);
        return;
    }
    _Atomic int *gate = hl_op_gate_requests(op);
    int rc = lock->kind->status(lock, on_reply, call);
    hl_conn_gate_requests(gate);
    if (rc != HILOCK_OK)
        hl_op_done(op, rc, 0, NULL, hl_send_failure(rc));
}

static void call_complete(hl_op *op)
{
    status_call *call = (status_call *)op;
    hilock_lock_status *st = op->status == HILOCK_OK ? call->result : NULL;
    call->result = NULL;
    call->cb(call->lock, op->status, st, call->user_data);
}

static void call_destroy(hl_op *op)
{
    status_call *call = (status_call *)op;
    hilock_lock_status_free(call->result);
    hl_lock_unref(call->lock);
    hl_free(call);
}

static const hl_op_type status_call_type = {
    .start = call_start,
    .complete = call_complete,
    .destroy = call_destroy,
    .bounded = true,
    .withdrawable = true,
};

static int status_call_start(hilock_lock *lock, hilock_lock_status_cb *cb,
                             void *user_data, hilock_lock_status **out)
{
    hilock_client *c = hl_lock_client_get(lock);
    if (c == NULL)
        return hl_fail(HILOCK_ECLOSED, "client closed");
    status_call *call = hl_calloc(1, sizeof *call);
    if (call == NULL) {
        hl_client_unref(c);
        return hl_fail(HILOCK_ENOMEM, "out of memory");
    }
    hl_op_init(&call->op, &status_call_type);
    call->lock = lock;
    call->cb = cb;
    call->user_data = user_data;
    hl_lock_ref(lock);
    int rc;
    if (cb == NULL) {
        /* The result is read after the wait, which gives up the caller's
         * reference: keep one more until then. */
        hl_op_ref(&call->op);
        rc = hl_op_run_blocking(c, &call->op, hl_blocking_limit_us(c->opts, 0),
                                NULL, NULL);
        if (rc == HILOCK_OK) {
            *out = call->result;
            call->result = NULL;
        }
        hl_op_unref(&call->op);
    } else {
        rc = hl_op_submit_or_drop(c, &call->op);
    }
    hl_client_unref(c);
    return rc;
}

int hilock_lock_status_get(hilock_lock *lock, hilock_lock_status **out)
{
    if (out != NULL)
        *out = NULL;
    if (lock == NULL || out == NULL)
        return hl_fail(HILOCK_EINVAL, "NULL argument");
    return status_call_start(lock, NULL, NULL, out);
}

int hilock_lock_status_async(hilock_lock *lock, hilock_lock_status_cb *cb,
                             void *user_data)
{
    if (lock == NULL || cb == NULL)
        return hl_fail(HILOCK_EINVAL, "NULL argument");
    return status_call_start(lock, cb, user_data, NULL);
}
