/* A wait on a condition: the release into its line, the looks until
 * signalled, and the acquire that takes the lock again (see cond.c). */
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>

#include "core/base/alloc.h"
#include "core/base/error_detail.h"
#include "core/base/monotime.h"
#include "core/engine/compose.h"
#include "core/transport/resp.h"
#include "cond/cond_internal.h"
#include "kindkit/kindkit.h"

typedef enum wait_state {
    W_RELEASING, /* the release into the line is out */
    W_WAITING,   /* in line, between polls */
    W_POLLING,   /* a poll is out */
    W_ACQUIRING, /* signalled: taking the lock again */
    W_LEAVING,   /* the leave is out, then the end */
    W_DONE
} wait_state;

struct cond_wait {
    hl_op op; /* first */
    hilock_cond *cond;
    cond_wait *next; /* in cond->waits */
    uint64_t owner;
    hl_monotime deadline; /* INT64_MAX: none */
    int64_t lease_ms;     /* the hold's, for taking it again */
    bool fenced;
    hilock_cond_wait_cb *cb; /* NULL: a blocking caller waits */
    void *user_data;
    wait_state state;
    bool listed;
    bool poll_again;  /* woken while a poll was out */
    int end_status;   /* a cancel's, to end with once the leave is back */
    int requests;     /* requests out naming the op */
    bool finished;
    bool let_go; /* the home loop's reference is dropped */
    uint64_t acquire_id;
    uint64_t token;
    hl_timer timer;
    hl_cond_entry entry;
    char id[HILOCK_CLIENT_ID_LEN + 24];
};

static void wait_list(cond_wait *w)
{
    hilock_cond *c = w->cond;
    pthread_mutex_lock(&c->mutex);
    w->next = c->waits;
    c->waits = w;
    w->listed = true;
    pthread_mutex_unlock(&c->mutex);
}

static void wait_unlist(cond_wait *w)
{
    hilock_cond *c = w->cond;
    if (!w->listed)
        return;
    pthread_mutex_lock(&c->mutex);
    for (cond_wait **p = &c->waits; *p != NULL; p = &(*p)->next) {
        if (*p == w) {
            *p = w->next;
            break;
        }
    }
    w->listed = false;
    bool none = c->waits == NULL;
    pthread_mutex_unlock(&c->mutex);
    if (none) {
        hl_pubsub_unsubscribe(&c->sub);
        c->ready = false;
    }
}

/* The home loop lets go of the op once it finished and no request names
 * it any more. */
static void wait_release_if_idle(cond_wait *w)
{
    if (w->finished && w->requests == 0 && !w->let_go) {
        w->let_go = true;
        hl_op_unref(&w->op);
    }
}

static void wait_finish(cond_wait *w, int status, const char *detail)
{
    if (w->state == W_DONE)
        return;
    w->state = W_DONE;
    hl_timer_stop(&w->timer);
    wait_unlist(w);
    hl_op_park(&w->op, false);
    hl_op_finish(&w->op, status, (int64_t)w->token, NULL, detail);
    w->finished = true;
    wait_release_if_idle(w);
}

static int64_t waiter_timeout(const cond_wait *w)
{
    return hl_lock_waiter_timeout_ms(w->cond->lock);
}

static void on_left(void *data, int status, hilock_reply *reply)
{
    cond_wait *w = data;
    w->requests--;
    hilock_reply_free(reply);
    (void)status; /* unanswered, the place runs out by itself */
    if (w->state == W_DONE) {
        wait_release_if_idle(w);
        return;
    }
    wait_finish(w, w->end_status,
                w->end_status == HILOCK_ETIMEDOUT
                    ? "not signalled in time; the lock is not held"
                    : "the wait ended; the lock is not held");
}

/* Leave the line (a signal taken passes on), then end with status. */
static void wait_leave(cond_wait *w, int status)
{
    w->state = W_LEAVING;
    w->end_status = status;
    hl_timer_stop(&w->timer);
    char wt[24];
    const char *args[] = {w->id, wt};
    size_t lens[] = {strlen(w->id), hl_i64_dec(wt, waiter_timeout(w))};
    if (hl_cond_run(w->cond, HL_COND_LEAVE, 2, args, lens, on_left, w) ==
        HILOCK_OK)
        w->requests++;
    else
        wait_finish(w, status, "the wait ended; the lock is not held (its "
                               "place in line runs out by itself)");
}

/* A signal taken but not used: the next waiter gets one, nobody waits
 * for the answer. */
static void pass_signal_on(cond_wait *w)
{
    char wt[24];
    const char *args[] = {"1", wt};
    size_t lens[] = {1, hl_i64_dec(wt, waiter_timeout(w))};
    (void)hl_cond_run(w->cond, HL_COND_SIGNAL, 2, args, lens, NULL, NULL);
}

static void on_given_back(hilock_lock *lock, int status, int64_t value,
                          void *user_data)
{
    (void)lock, (void)status, (void)value, (void)user_data;
}

/* A grant that won the race against a cancel is the caller's: the wait
 * ends with it held, as an acquire's cancel does. */
static void on_acquired(hilock_lock *lock, int status,
                        const hilock_acquired *got, void *user_data)
{
    cond_wait *w = user_data;
    w->requests--;
    if (w->state == W_DONE) {
        /* Ended meanwhile: nobody takes the hold. */
        if (status == HILOCK_OK)
            (void)hl_release_owner(lock, w->owner, on_given_back, NULL);
        wait_release_if_idle(w);
        return;
    }
    if (status == HILOCK_OK) {
        w->token = got ? got->token : 0;
        wait_finish(w, HILOCK_OK, NULL);
        return;
    }
    pass_signal_on(w);
    int end = w->end_status != 0      ? w->end_status
              : status == HILOCK_EBUSY ? HILOCK_ETIMEDOUT
                                       : status;
    wait_finish(w, end,
                end == HILOCK_ETIMEDOUT
                    ? "signalled, but the lock was not taken again in "
                      "time; the signal passed on, and the lock is not "
                      "held"
                    : hilock_last_error());
}

static int64_t wait_left_ms(const cond_wait *w)
{
    if (w->deadline == INT64_MAX)
        return HILOCK_WAIT_FOREVER;
    hl_monotime left = w->deadline - hl_monotime_now();
    return left <= 0 ? 0 : (left + 999) / 1000;
}

static void wait_reacquire(cond_wait *w)
{
    w->state = W_ACQUIRING;
    hl_timer_stop(&w->timer);
    hl_op_park(&w->op, false);
    int64_t lease = w->lease_ms > 0 ? w->lease_ms : HILOCK_LEASE_WATCHDOG;
    int rc = hl_acquire(w->cond->lock, w->owner, wait_left_ms(w), lease,
                        w->fenced ? HILOCK_ACQUIRE_FENCED : 0, on_acquired,
                        w, &w->acquire_id, NULL);
    if (rc == HILOCK_OK) {
        w->requests++;
        return;
    }
    pass_signal_on(w);
    wait_finish(w, rc, hilock_last_error());
}

static void wait_poll(cond_wait *w);

static void on_polled(void *data, int status, hilock_reply *reply)
{
    cond_wait *w = data;
    w->requests--;
    const hilock_reply *r =
        status == HILOCK_OK ? hl_script_answer(w->op.home, reply) : NULL;
    long long said = r && r->type == HILOCK_REPLY_INTEGER ? r->integer : -1;
    hilock_reply_free(reply);
    if (w->state == W_DONE) {
        if (said == 1)
            pass_signal_on(w); /* taken after the wait ended */
        wait_release_if_idle(w);
        return;
    }
    if (w->state == W_LEAVING) {
        if (said == 1)
            pass_signal_on(w); /* taken just before the leave */
        return;
    }
    w->state = W_WAITING;
    if (said == 1 || said == 2) {
        wait_reacquire(w);
        return;
    }
    if (w->poll_again) {
        w->poll_again = false;
        wait_poll(w);
    }
}

static void wait_poll(cond_wait *w)
{
    if (w->state == W_POLLING) {
        w->poll_again = true;
        return;
    }
    if (w->state != W_WAITING)
        return;
    char wt[24];
    const char *args[] = {w->id, wt};
    size_t lens[] = {strlen(w->id), hl_i64_dec(wt, waiter_timeout(w))};
    if (hl_cond_run(w->cond, HL_COND_POLL, 2, args, lens, on_polled, w) ==
        HILOCK_OK) {
        w->requests++;
        w->state = W_POLLING;
    }
    /* Not sent (the client closing or out of memory): the timer tries
     * again. */
}

/* Every third of the waiter timeout a poll renews the place; the
 * deadline ends the wait. */
static void wait_arm(cond_wait *w)
{
    hl_monotime every = hl_after_ms(0, waiter_timeout(w) / 3);
    hl_monotime now = hl_monotime_now();
    hl_monotime to_deadline =
        w->deadline == INT64_MAX ? INT64_MAX : w->deadline - now;
    hl_timer_arm(&w->timer, to_deadline < every ? to_deadline : every);
}

static void on_timer(hl_timer *t)
{
    cond_wait *w = t->data;
    if (w->state != W_WAITING && w->state != W_POLLING)
        return;
    if (w->deadline != INT64_MAX && hl_monotime_now() >= w->deadline) {
        wait_leave(w, HILOCK_ETIMEDOUT);
        return;
    }
    wait_poll(w);
    wait_arm(w);
}

/* The condition's channel: a message names a signalled waiter of this
 * client; a confirmation (again after a reconnect) may follow messages
 * lost meanwhile, so every waiter looks. */
static void on_channel(hl_sub *sub, hl_sub_event ev, const char *msg,
                       size_t len)
{
    hilock_cond *c = sub->data;
    if (ev == HL_SUB_READY)
        c->ready = true;
    else if (ev == HL_SUB_CLOSED || ev == HL_SUB_REFUSED)
        c->ready = false;
    if (ev != HL_SUB_READY && ev != HL_SUB_MESSAGE)
        return;
    /* The list changes only on this thread; a poll ends nothing here. */
    for (cond_wait *w = c->waits; w != NULL; w = w->next)
        if (ev == HL_SUB_READY ||
            (strlen(w->id) == len && memcmp(w->id, msg, len) == 0))
            wait_poll(w);
}

static void on_released(hilock_lock *lock, int status, int64_t value,
                        void *user_data)
{
    (void)lock;
    (void)value;
    cond_wait *w = user_data;
    w->requests--;
    if (w->state == W_DONE) {
        wait_release_if_idle(w);
        return;
    }
    if (status != HILOCK_OK) {
        /* Not in line, or in doubt: the place, if any, runs out, and a
         * signal it takes passes on when it does. */
        wait_finish(w, status, hilock_last_error());
        return;
    }
    if (w->end_status != 0) {
        wait_leave(w, w->end_status); /* cancelled meanwhile */
        return;
    }
    w->state = W_WAITING;
    hl_op_park(&w->op, true);
    wait_arm(w);
    if (w->cond->ready)
        wait_poll(w);
}

static void wait_start(hl_op *op)
{
    cond_wait *w = (cond_wait *)op;
    hilock_cond *c = w->cond;
    hilock_lock *lock = c->lock;
    hl_client_timer_init(op->home, &w->timer, on_timer, w);
    if (atomic_load(&c->destroyed) || hl_lock_conn(lock) == NULL) {
        wait_finish(w, HILOCK_ECANCELED, "the condition or its lock is "
                                         "closed");
        return;
    }
    int rc = hl_lock_hold_once(lock, w->owner, &w->lease_ms, &w->fenced);
    if (rc != HILOCK_OK) {
        wait_finish(w, rc, hilock_last_error());
        return;
    }
    snprintf(w->id, sizeof w->id, "%.*s:%llu", HILOCK_CLIENT_ID_LEN,
             hl_lock_client_id(lock), (unsigned long long)op->id);
    w->entry = (hl_cond_entry){
        .line = c->keys[0].s,
        .line_len = c->keys[0].len,
        .alive = c->keys[1].s,
        .alive_len = c->keys[1].len,
        .id = w->id,
        .id_len = strlen(w->id),
        .waiter_timeout_ms = waiter_timeout(w)};
    wait_list(w);
    if (c->sub.channel == NULL &&
        hl_client_listen(op->home, &c->sub, c->channel, c->channel_len,
                         on_channel, c) < 0) {
        wait_finish(w, HILOCK_ENOMEM, "out of memory to listen for "
                                      "signals");
        return;
    }
    w->state = W_RELEASING;
    rc = hl_release_owner_into_cond(lock, w->owner, &w->entry, on_released,
                                    w);
    if (rc != HILOCK_OK) {
        wait_finish(w, rc, hilock_last_error());
        return;
    }
    w->requests++;
}

static void wait_cancel(hl_op *op, int status)
{
    cond_wait *w = (cond_wait *)op;
    switch (w->state) {
    case W_RELEASING:
        w->end_status = status; /* left once the release is back */
        break;
    case W_WAITING:
    case W_POLLING:
        wait_leave(w, status);
        break;
    case W_ACQUIRING:
        w->end_status = status;
        hilock_lock_cancel(w->cond->lock, w->acquire_id);
        break;
    case W_LEAVING:
    case W_DONE:
        break;
    }
}

static void wait_complete(hl_op *op)
{
    cond_wait *w = (cond_wait *)op;
    w->cb(w->cond, op->status, (uint64_t)op->value, w->user_data);
}

static void wait_destroy(hl_op *op)
{
    cond_wait *w = (cond_wait *)op;
    hl_cond_unref(w->cond);
    hl_free(w);
}

static const hl_op_type wait_type = {
    .start = wait_start,
    .cancel = wait_cancel,
    .complete = wait_complete,
    .destroy = wait_destroy,
    .bounded = true,
};

static int wait_begin(hilock_cond *cond, uint64_t owner, int64_t timeout_ms,
                      hilock_cond_wait_cb *cb, void *user_data,
                      uint64_t *op_id, uint64_t *token)
{
    if (cond == NULL)
        return hl_fail(HILOCK_EINVAL, "cond is NULL");
    if (timeout_ms < 0 && timeout_ms != HILOCK_WAIT_FOREVER)
        return hl_fail(HILOCK_EINVAL, "a timeout is 0 or more, or "
                                      "HILOCK_WAIT_FOREVER");
    if (owner == 0)
        return hl_fail(HILOCK_EINVAL, "owner 0 is no owner");
    hilock_client *c = hl_lock_client_get(cond->lock);
    if (c == NULL)
        return hl_fail(HILOCK_ECLOSED, "the lock's client is closed");
    cond_wait *w = hl_calloc(1, sizeof *w);
    if (w == NULL) {
        hl_client_unref(c);
        return hl_fail(HILOCK_ENOMEM, "out of memory");
    }
    hl_op_init(&w->op, &wait_type);
    w->cond = cond;
    hl_cond_ref(cond);
    w->owner = owner;
    w->deadline = timeout_ms == HILOCK_WAIT_FOREVER
                      ? INT64_MAX
                      : hl_after_ms(hl_monotime_now(), timeout_ms);
    w->cb = cb;
    w->user_data = user_data;
    if (op_id != NULL)
        *op_id = w->op.id;
    int rc;
    if (cb == NULL) {
        hl_op_ref(&w->op); /* the token is read after the wait */
        int64_t value = 0;
        rc = hl_op_run_blocking(c, &w->op,
                                hl_client_blocking_limit_us(
                                    c, timeout_ms == HILOCK_WAIT_FOREVER
                                           ? HILOCK_WAIT_FOREVER
                                           : timeout_ms),
                                &value, NULL);
        if (token != NULL)
            *token = rc == HILOCK_OK ? (uint64_t)value : 0;
        hl_op_unref(&w->op);
    } else {
        rc = hl_op_submit_or_drop(c, &w->op);
    }
    hl_client_unref(c);
    return rc;
}

int hilock_cond_wait(hilock_cond *cond, int64_t timeout_ms)
{
    return wait_begin(cond, hilock_thread_owner(), timeout_ms, NULL, NULL,
                      NULL, NULL);
}

int hilock_cond_wait_as(hilock_cond *cond, uint64_t owner, int64_t timeout_ms,
                        uint64_t *token)
{
    if (token != NULL)
        *token = 0;
    return wait_begin(cond, owner, timeout_ms, NULL, NULL, NULL, token);
}

int hilock_cond_wait_async(hilock_cond *cond, uint64_t owner,
                           int64_t timeout_ms, hilock_cond_wait_cb *cb,
                           void *user_data, uint64_t *op_id)
{
    if (cb == NULL)
        return hl_fail(HILOCK_EINVAL, "NULL callback");
    return wait_begin(cond, owner, timeout_ms, cb, user_data, op_id, NULL);
}

int hilock_cond_cancel(hilock_cond *cond, uint64_t op_id)
{
    if (cond == NULL)
        return hl_fail(HILOCK_EINVAL, "cond is NULL");
    hl_op *found = NULL;
    pthread_mutex_lock(&cond->mutex);
    for (cond_wait *w = cond->waits; w != NULL; w = w->next)
        if (w->op.id == op_id && hl_op_ref_if_alive(&w->op)) {
            found = &w->op;
            break;
        }
    pthread_mutex_unlock(&cond->mutex);
    if (found == NULL)
        return hl_fail(HILOCK_ENOTFOUND, "no such wait of this condition "
                                         "(it ended already)");
    (void)hl_op_cancel(found, HILOCK_ECANCELED);
    hl_op_unref(found);
    return HILOCK_OK;
}

/* Every wait ends as a cancel ends it.  Loop thread. */
void hl_cond_cancel_waits(hilock_cond *c)
{
    for (;;) {
        pthread_mutex_lock(&c->mutex);
        cond_wait *w = c->waits;
        while (w != NULL && (w->state == W_LEAVING || w->end_status != 0))
            w = w->next;
        pthread_mutex_unlock(&c->mutex);
        if (w == NULL)
            return;
        /* Each either leaves (W_LEAVING) or keeps the status for when its
         * request is back, so none is met twice. */
        if (w->state == W_RELEASING || w->state == W_ACQUIRING)
            w->end_status = HILOCK_ECANCELED;
        wait_cancel(&w->op, HILOCK_ECANCELED);
    }
}

