/* Await: wait for a latch's count to reach zero.  The await listens on
 * the latch's channel through the client's waiter registry and reads the
 * count (GET) when the subscription is confirmed, when any message comes,
 * and at least every HILOCK_LATCH_RECHECK_MS: a latch has no lease whose
 * end would bound a missed message, so the re-check interval does.  The
 * count is read once more at the deadline. */
#include <pthread.h>
#include <stdio.h>

#include "core/base/alloc.h"
#include "core/base/error_detail.h"
#include "core/base/monotime.h"
#include "core/engine/compose.h"
#include "core/engine/waiters.h"
#include "core/loop/io.h"
#include "latch/latch_kind.h"

typedef struct latch_await {
    hl_op op; /* first */
    hilock_lock *lock;
    hilock_latch_cb *cb; /* NULL: a blocking caller waits */
    void *user_data;
    int64_t wait_ms;
    hl_monotime deadline; /* 0: look once */
    hl_waiters *reg;      /* set while waiter is registered */
    hl_waiter waiter;
    hl_timer timer;
    bool timer_ready;
    bool reading; /* a GET is in flight */
    bool again;   /* something happened meanwhile: read again after it */
    bool live;    /* in the live list below */
    struct latch_await *live_prev;
    struct latch_await *live_next;
} latch_await;

/* The awaits that wait, so that destroying a handle ends its awaits at
 * once.  Each is touched only on its client's loop thread; the mutex
 * guards the links, which awaits of every client share. */
static pthread_mutex_t live_mu = PTHREAD_MUTEX_INITIALIZER;
static latch_await *live_head;

static void live_add(latch_await *a)
{
    pthread_mutex_lock(&live_mu);
    a->live_prev = NULL;
    a->live_next = live_head;
    if (live_head != NULL)
        live_head->live_prev = a;
    live_head = a;
    a->live = true;
    pthread_mutex_unlock(&live_mu);
}

static void live_remove(latch_await *a)
{
    pthread_mutex_lock(&live_mu);
    if (a->live) {
        if (a->live_prev != NULL)
            a->live_prev->live_next = a->live_next;
        else
            live_head = a->live_next;
        if (a->live_next != NULL)
            a->live_next->live_prev = a->live_prev;
        a->live = false;
    }
    pthread_mutex_unlock(&live_mu);
}

static void finish(latch_await *a, int status, int64_t value,
                   const char *detail)
{
    if (a->op.state == HL_OP_FINISHED)
        return;
    live_remove(a);
    if (a->timer_ready)
        hl_timer_stop(&a->timer);
    if (a->reg != NULL) {
        hl_waiter_remove(a->reg, &a->waiter, false);
        a->reg = NULL;
    }
    hl_op_done(&a->op, status, value, NULL, detail);
}

static void read_count(latch_await *a);

static void on_count(void *data, int status, hilock_reply *reply)
{
    latch_await *a = data;
    a->reading = false;
    if (a->op.state == HL_OP_FINISHED) {
        hilock_reply_free(reply);
        hl_op_unref(&a->op);
        return;
    }
    int64_t count = 0;
    if (status != HILOCK_OK) {
        char why[256];
        snprintf(why, sizeof why, "%s",
                 reply && reply->str ? reply->str : hilock_last_error());
        finish(a, status, 0, why);
    } else if (hl_latch_parse_count(reply, &count) != HILOCK_OK) {
        finish(a, HILOCK_EPROTO, 0,
               "the name holds a string that is not a latch count");
    } else if (count == 0) {
        finish(a, HILOCK_OK, 1, NULL);
    } else if (hl_monotime_now() >= a->deadline) {
        finish(a, HILOCK_OK, 0, NULL);
    } else if (a->again) {
        a->again = false;
        read_count(a);
    }
    hilock_reply_free(reply);
    hl_op_unref(&a->op);
}

static void read_count(latch_await *a)
{
    if (a->reading) {
        a->again = true;
        return;
    }
    if (a->lock->destroyed) {
        finish(a, HILOCK_ECANCELED, 0, "latch handle destroyed");
        return;
    }
    /* The GET's reply may come after a cancel finished the await. */
    hl_op_ref(&a->op);
    a->reading = true;
    int rc = hl_latch_get(a->lock, on_count, a);
    if (rc != HILOCK_OK) {
        a->reading = false;
        hl_op_unref(&a->op);
        finish(a, rc, 0, "could not send the request");
    }
}

static void arm_recheck(latch_await *a)
{
    hl_monotime now = hl_monotime_now();
    hl_monotime left = a->deadline > now ? a->deadline - now : 0;
    hl_monotime next = HL_MS(HILOCK_LATCH_RECHECK_MS);
    hl_timer_arm(&a->timer, left < next ? left : next);
}

static void on_timer(hl_timer *t)
{
    latch_await *a = t->data;
    /* The read may finish the await, whose last reference may go. */
    hl_op_ref(&a->op);
    read_count(a);
    if (a->op.state != HL_OP_FINISHED && hl_monotime_now() < a->deadline)
        arm_recheck(a);
    hl_op_unref(&a->op);
}

static void on_wake(hl_waiter *w, hl_wake_reason why)
{
    latch_await *a = w->data;
    if (why == HL_WAKE_CLOSED) {
        a->reg = NULL; /* the registry let go of the waiter */
        finish(a, HILOCK_ECLOSED, 0, "client closed");
        return;
    }
    read_count(a);
}

static void await_start(hl_op *op)
{
    latch_await *a = (latch_await *)op;
    hilock_lock *lock = a->lock;
    if (hl_lock_conn(lock) == NULL || lock->destroyed) {
        hl_op_done(op, lock->destroyed ? HILOCK_ECANCELED : HILOCK_ECLOSED,
                   0, NULL,
                   lock->destroyed ? "latch handle destroyed"
                                   : "client closed");
        return;
    }
    a->deadline = hl_wait_deadline(a->wait_ms);
    if (a->wait_ms != 0) {
        int rc = hl_latch_check_slot(lock);
        if (rc != HILOCK_OK) {
            hl_op_done(op, rc, 0, NULL, hilock_last_error());
            return;
        }
        hl_waiters *reg = hl_client_waiters(lock->client);
        hl_aux_name ch;
        if (reg == NULL || hl_latch_channel(lock, &ch) != 0) {
            hl_op_done(op, HILOCK_ENOMEM, 0, NULL, "out of memory");
            return;
        }
        int added = hl_waiter_add(reg, &a->waiter, ch.s, ch.len, true,
                                  on_wake, a);
        hl_aux_name_done(&ch);
        if (added < 0) {
            hl_op_done(op, HILOCK_ENOMEM, 0, NULL, "out of memory");
            return;
        }
        a->reg = reg;
        live_add(a);
        hl_lock_timer_init(lock, &a->timer, on_timer, a);
        a->timer_ready = true;
        arm_recheck(a);
    }
    /* Read at once, as the subscription is being made: a latch open
     * already needs no message, and the confirmation reads again. */
    read_count(a);
}

static void await_cancel(hl_op *op, int status)
{
    finish((latch_await *)op, status, 0,
           status == HILOCK_ECLOSED ? "client closed"
                                    : "the wait was given up");
}

static void await_complete(hl_op *op)
{
    latch_await *a = (latch_await *)op;
    a->cb((hilock_latch *)a->lock, op->status, op->value, a->user_data);
}

static void await_destroy(hl_op *op)
{
    latch_await *a = (latch_await *)op;
    hl_lock_unref(a->lock);
    hl_free(a);
}

static const hl_op_type await_type = {
    .start = await_start,
    .cancel = await_cancel,
    .complete = await_complete,
    .destroy = await_destroy,
    .bounded = true,
};

int hl_latch_await_start(hilock_latch *latch, int64_t wait_ms,
                         hilock_latch_cb *cb, void *user_data, bool *opened)
{
    hl_clear_detail();
    if (wait_ms < 0 && wait_ms != HILOCK_WAIT_FOREVER)
        return hl_fail(HILOCK_EINVAL,
                       "wait_ms %lld: a wait is 0 or more, or "
                       "HILOCK_WAIT_FOREVER",
                       (long long)wait_ms);
    hilock_lock *lock = hl_latch_lock(latch);
    hilock_client *c = hl_lock_client_get(lock);
    if (c == NULL)
        return hl_fail(HILOCK_ECLOSED, "client closed");
    latch_await *a = hl_calloc(1, sizeof *a);
    if (a == NULL) {
        hl_client_unref(c);
        return hl_fail(HILOCK_ENOMEM, "out of memory");
    }
    hl_op_init(&a->op, &await_type);
    a->lock = lock;
    a->cb = cb;
    a->user_data = user_data;
    a->wait_ms = wait_ms;
    hl_lock_ref(lock);
    int rc;
    if (cb == NULL) {
        int64_t value = 0;
        rc = hl_op_run_blocking(c, &a->op,
                                hl_client_blocking_limit_us(c, wait_ms),
                                &value, NULL);
        if (rc == HILOCK_OK && opened != NULL)
            *opened = value == 1;
    } else {
        rc = hl_op_submit_or_drop(c, &a->op);
    }
    hl_client_unref(c);
    return rc;
}

void hl_latch_end_awaits(hilock_lock *lock)
{
    /* One at a time, with the mutex let go: finishing runs the await's
     * callback, which may start or end other awaits. */
    for (;;) {
        pthread_mutex_lock(&live_mu);
        latch_await *a = live_head;
        while (a != NULL && a->lock != lock)
            a = a->live_next;
        if (a != NULL)
            hl_op_ref(&a->op);
        pthread_mutex_unlock(&live_mu);
        if (a == NULL)
            return;
        finish(a, HILOCK_ECANCELED, 0, "latch handle destroyed");
        hl_op_unref(&a->op);
    }
}
