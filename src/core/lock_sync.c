/* The blocking lock API: each call runs its async twin for the calling
 * thread's owner id and waits for the callback. */
#include "alloc.h"
#include "error_detail.h"
#include "lockobj_internal.h"
#include "options_internal.h"

static void on_acquired(hilock_lock *lock, int status,
                        const hilock_acquired *acquired, void *user_data)
{
    (void)lock;
    hl_sync_post_value(user_data, status, NULL,
                       acquired ? (int64_t)acquired->token : 0,
                       status ? hilock_last_error() : NULL);
}

static void on_value(hilock_lock *lock, int status, int64_t value,
                     void *user_data)
{
    (void)lock;
    hl_sync_post_value(user_data, status, NULL, value,
                       status ? hilock_last_error() : NULL);
}

/* Start an async call with a fresh waiter and wait for its callback.  The
 * async layer always completes; the deadline only guards against a loop
 * thread that stopped answering (a caller's own loop that the caller
 * blocks, say).  An acquire that has not answered by then is cancelled,
 * and the caller waits for it to complete: returning at once would leave
 * a grant that lands later held, and renewed, for a thread that was told
 * it failed. */
typedef int start_fn(hilock_lock *lock, hl_sync *sync, void *args,
                     uint64_t *op_id);

static int run_sync_on(hilock_client *c, hilock_lock *lock, int64_t wait_ms,
                       start_fn *start, void *args, int64_t *value)
{
    int rc;
    const hilock_options *o = c->opts;
    hl_sync *sync =
        hl_sync_new(hl_client_sync_spin_us(c));
    if (sync == NULL)
        return hl_fail(HILOCK_ENOMEM, "out of memory");
    uint64_t op_id = 0;
    rc = start(lock, sync, args, &op_id);
    if (rc != HILOCK_OK) {
        /* The callback will not come: post in its place. */
        hl_sync_post(sync, rc, NULL, hilock_last_error());
        op_id = 0;
    }
    if (op_id != 0)
        hl_sync_ref(sync); /* for a second wait, after a cancel */
    int64_t us = hl_sync_limit_us(o, wait_ms);
    int status = 0;
    char detail[256];
    if (hl_sync_wait(sync, us, &status, NULL, value, detail,
                     sizeof detail) != 0) {
        if (op_id == 0)
            return hl_fail(HILOCK_ETIMEDOUT, "the loop thread did not answer");
        /* Should the cancel not reach the loop, the acquire still ends at
         * its own deadline, which has passed. */
        hilock_lock_cancel(lock, op_id);
        hl_sync_wait(sync, INT64_MAX / 4, &status, NULL, value, detail,
                     sizeof detail);
        if (status == HILOCK_ECANCELED)
            return hl_fail(HILOCK_ETIMEDOUT,
                           "the loop thread did not answer in time; the "
                           "acquire was cancelled");
    } else if (op_id != 0) {
        hl_sync_unref(sync);
    }
    if (status != 0)
        hl_set_detail(detail);
    else
        hl_clear_detail();
    return status;
}

/* The client stays referenced for the whole call: it may be closed from
 * another thread meanwhile, which then answers the call with
 * HILOCK_ECLOSED. */
static int run_sync(hilock_lock *lock, int64_t wait_ms, start_fn *start,
                    void *args, int64_t *value)
{
    if (lock == NULL)
        return hl_fail(HILOCK_EINVAL, "lock is NULL");
    hilock_client *c = hl_lock_client_get(lock);
    if (c == NULL)
        return hl_fail(HILOCK_ECLOSED, "client closed");
    int rc = hl_client_in_loop(c)
                 ? hl_fail(HILOCK_EDEADLK, "sync call on the loop thread")
                 : run_sync_on(c, lock, wait_ms, start, args, value);
    hl_client_unref(c);
    return rc;
}

typedef struct acquire_args {
    int64_t wait_ms;
    int64_t lease_ms;
    unsigned flags;
} acquire_args;

static int start_acquire(hilock_lock *lock, hl_sync *sync, void *p,
                         uint64_t *op_id)
{
    const acquire_args *a = p;
    return hilock_lock_acquire_async(lock, hilock_thread_owner(), a->wait_ms,
                                     a->lease_ms, a->flags, on_acquired,
                                     sync, op_id);
}

int hilock_lock_acquire_fenced(hilock_lock *lock, int64_t wait_ms,
                               int64_t lease_ms, uint64_t *token)
{
    acquire_args a = {wait_ms, lease_ms, token ? HILOCK_ACQUIRE_FENCED : 0};
    int64_t value = 0;
    int rc = run_sync(lock, wait_ms, start_acquire, &a, &value);
    if (rc == HILOCK_OK && token)
        *token = (uint64_t)value;
    return rc;
}

int hilock_lock_try_acquire(hilock_lock *lock, int64_t wait_ms,
                            int64_t lease_ms)
{
    return hilock_lock_acquire_fenced(lock, wait_ms, lease_ms, NULL);
}

int hilock_lock_acquire(hilock_lock *lock)
{
    return hilock_lock_acquire_fenced(lock, HILOCK_WAIT_FOREVER,
                                      HILOCK_LEASE_WATCHDOG, NULL);
}

static int start_release(hilock_lock *lock, hl_sync *sync, void *p,
                            uint64_t *op_id)
{
    (void)p;
    (void)op_id;
    return hilock_lock_release_async(lock, hilock_thread_owner(), on_value,
                                     sync);
}

int hilock_lock_release(hilock_lock *lock)
{
    return run_sync(lock, 0, start_release, NULL, NULL);
}

static int start_force(hilock_lock *lock, hl_sync *sync, void *p,
                            uint64_t *op_id)
{
    (void)p;
    (void)op_id;
    return hilock_lock_force_release_async(lock, on_value, sync);
}

int hilock_lock_force_release(hilock_lock *lock, bool *deleted)
{
    int64_t v = 0;
    int rc = run_sync(lock, 0, start_force, NULL, &v);
    if (deleted)
        *deleted = rc == HILOCK_OK && v == 1;
    return rc;
}

static int start_is_locked(hilock_lock *lock, hl_sync *sync, void *p,
                            uint64_t *op_id)
{
    (void)p;
    (void)op_id;
    return hilock_lock_is_locked_async(lock, on_value, sync);
}

int hilock_lock_is_locked(hilock_lock *lock, bool *locked)
{
    int64_t v = 0;
    int rc = run_sync(lock, 0, start_is_locked, NULL, &v);
    if (locked)
        *locked = rc == HILOCK_OK && v > 0;
    return rc;
}

static int start_hold_count(hilock_lock *lock, hl_sync *sync, void *p,
                            uint64_t *op_id)
{
    (void)p;
    (void)op_id;
    return hilock_lock_hold_count_async(lock, hilock_thread_owner(),
                                        on_value, sync);
}

int hilock_lock_hold_count(hilock_lock *lock, int64_t *count)
{
    int64_t v = 0;
    int rc = run_sync(lock, 0, start_hold_count, NULL, &v);
    if (count)
        *count = rc == HILOCK_OK ? v : 0;
    return rc;
}

int hilock_lock_is_held_by_me(hilock_lock *lock, bool *held)
{
    int64_t count = 0;
    int rc = hilock_lock_hold_count(lock, &count);
    if (held)
        *held = rc == HILOCK_OK && count > 0;
    return rc;
}

static int start_ttl(hilock_lock *lock, hl_sync *sync, void *p,
                            uint64_t *op_id)
{
    (void)p;
    (void)op_id;
    return hilock_lock_remaining_ttl_async(lock, on_value, sync);
}

int hilock_lock_remaining_ttl(hilock_lock *lock, int64_t *ttl_ms)
{
    int64_t v = -1;
    int rc = run_sync(lock, 0, start_ttl, NULL, &v);
    if (ttl_ms)
        *ttl_ms = rc == HILOCK_OK ? v : -1;
    return rc;
}

typedef struct lost_query {
    hl_task task;
    hilock_lock *lock;
    uint64_t owner;
    hl_sync *sync;
} lost_query;

static void run_lost_query(hilock_client *c, hl_task *t, bool closed)
{
    (void)c;
    lost_query *q = (lost_query *)t;
    bool lost = !closed && hilock_lock_owner_lost(q->lock, q->owner);
    hl_sync_post_value(q->sync, closed ? HILOCK_ECLOSED : HILOCK_OK, NULL,
                       lost, closed ? "client closed" : NULL);
    hl_lock_unref(q->lock);
    hl_free(q);
}

static int start_lost_query(hilock_lock *lock, hl_sync *sync, void *p,
                            uint64_t *op_id)
{
    (void)p;
    (void)op_id;
    lost_query *q = hl_calloc(1, sizeof *q);
    if (q == NULL)
        return hl_fail(HILOCK_ENOMEM, "out of memory");
    q->task.run = run_lost_query;
    q->lock = lock;
    q->owner = hilock_thread_owner();
    q->sync = sync;
    hl_lock_ref(lock);
    hilock_client *c = hl_lock_client_get(lock);
    int rc = c != NULL ? hl_client_submit(c, &q->task)
                       : hl_fail(HILOCK_ECLOSED, "client closed");
    if (c != NULL)
        hl_client_unref(c);
    if (rc != HILOCK_OK) {
        hl_lock_unref(lock);
        hl_free(q);
    }
    return rc;
}

int hilock_lock_lease_lost(hilock_lock *lock, bool *lost)
{
    int64_t v = 0;
    int rc = run_sync(lock, 0, start_lost_query, NULL, &v);
    if (lost)
        *lost = rc == HILOCK_OK && v != 0;
    return rc;
}
