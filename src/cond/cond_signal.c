/* Signalling a condition: wake its longest waiting waiter, or all. */
#include <stdatomic.h>
#include <stdio.h>

#include "core/base/alloc.h"
#include "core/base/error_detail.h"
#include "core/engine/compose.h"
#include "core/transport/resp.h"
#include "cond/cond_internal.h"
#include "kindkit/kindkit.h"

typedef struct signal_call {
    hl_op op; /* first */
    hilock_cond *cond;
    bool all;
    hilock_cond_cb *cb;
    void *user_data;
} signal_call;

static void on_signalled(void *data, int status, hilock_reply *reply)
{
    signal_call *s = data;
    char why[256] = "";
    int64_t woken = 0;
    if (status == HILOCK_OK) {
        const hilock_reply *r = hl_script_answer(s->op.home, reply);
        if (r != reply) {
            /* The waiters were signalled; only the wake-up was refused. */
            snprintf(why, sizeof why, "the server refused the wake-up "
                                      "PUBLISH: %.*s; the waiters find "
                                      "their signal at their next look",
                     (int)(reply->element[1]->len < 200
                               ? reply->element[1]->len
                               : 200),
                     reply->element[1]->str);
            status = HILOCK_EPERM;
        }
        if (r->type == HILOCK_REPLY_INTEGER)
            woken = r->integer;
        else if (status == HILOCK_OK) {
            status = HILOCK_EPROTO;
            snprintf(why, sizeof why, "unexpected reply to a signal");
        }
    } else {
        snprintf(why, sizeof why, "%s",
                 reply && reply->str ? reply->str : hilock_last_error());
    }
    hilock_reply_free(reply);
    hl_op_done(&s->op, status, woken, NULL, why[0] ? why : NULL);
}

static void signal_start(hl_op *op)
{
    signal_call *s = (signal_call *)op;
    hilock_cond *c = s->cond;
    if (atomic_load(&c->destroyed) || hl_lock_conn(c->lock) == NULL) {
        hl_op_done(op, HILOCK_ECLOSED, 0, NULL, "the condition or its lock "
                                                "is closed");
        return;
    }
    char wt[24];
    const char *args[] = {s->all ? "0" : "1", wt};
    size_t lens[] = {1, hl_i64_dec(wt, hl_lock_waiter_timeout_ms(c->lock))};
    _Atomic int *gate = hl_op_gate_requests(op);
    int rc = hl_cond_run(c, HL_COND_SIGNAL, 2, args, lens, on_signalled, s);
    hl_conn_gate_requests(gate);
    if (rc != HILOCK_OK)
        hl_op_done(op, rc, 0, NULL, hl_send_failure(rc));
}

static void signal_complete(hl_op *op)
{
    signal_call *s = (signal_call *)op;
    s->cb(s->cond, op->status, op->value, s->user_data);
}

static void signal_destroy(hl_op *op)
{
    signal_call *s = (signal_call *)op;
    hl_cond_unref(s->cond);
    hl_free(s);
}

static const hl_op_type signal_type = {
    .start = signal_start,
    .complete = signal_complete,
    .destroy = signal_destroy,
    .bounded = true,
    .withdrawable = true,
};

static int signal_begin(hilock_cond *cond, bool all, hilock_cond_cb *cb,
                        void *user_data, int64_t *woken)
{
    if (woken != NULL)
        *woken = 0;
    if (cond == NULL)
        return hl_fail(HILOCK_EINVAL, "cond is NULL");
    hilock_client *c = hl_lock_client_get(cond->lock);
    if (c == NULL)
        return hl_fail(HILOCK_ECLOSED, "the lock's client is closed");
    signal_call *s = hl_calloc(1, sizeof *s);
    if (s == NULL) {
        hl_client_unref(c);
        return hl_fail(HILOCK_ENOMEM, "out of memory");
    }
    hl_op_init(&s->op, &signal_type);
    s->cond = cond;
    hl_cond_ref(cond);
    s->all = all;
    s->cb = cb;
    s->user_data = user_data;
    int rc = cb == NULL
                 ? hl_op_run_blocking(c, &s->op,
                                      hl_client_blocking_limit_us(c, 0),
                                      woken, NULL)
                 : hl_op_submit_or_drop(c, &s->op);
    hl_client_unref(c);
    return rc;
}

int hilock_cond_signal(hilock_cond *cond, int64_t *woken)
{
    return signal_begin(cond, false, NULL, NULL, woken);
}

int hilock_cond_broadcast(hilock_cond *cond, int64_t *woken)
{
    return signal_begin(cond, true, NULL, NULL, woken);
}

int hilock_cond_signal_async(hilock_cond *cond, bool all, hilock_cond_cb *cb,
                             void *user_data)
{
    if (cb == NULL)
        return hl_fail(HILOCK_EINVAL, "NULL callback");
    return signal_begin(cond, all, cb, user_data, NULL);
}
