/* Multi-lock handles: creation, teardown, the lost callback, and the
 * blocking calls, each a wait on the op its async twin submits. */
#include <string.h>

#include "core/base/alloc.h"
#include "core/base/error_detail.h"
#include "core/base/handle.h"
#include "core/engine/compose.h"
#include "multi_internal.h"

static void unref_group(void *m) { hl_multi_unref(m); }

/* Take the group's listener off its first n members; each keeps m until
 * its listener is out for good.  One that cannot be taken out without
 * waiting (no memory on a loop thread) keeps it for good: a member's
 * listener must never name freed memory. */
static void unwatch_members(hilock_multilock *m, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        hl_multi_ref(m);
        (void)hl_lock_unlisten_then(m->members[i], &m->watches[i],
                                    unref_group, m);
    }
}

int hl_multi_create(hilock_multilock **out, hilock_lock *const *locks,
                    size_t n, size_t quorum, hilock_redlock *rl)
{
    /* The members' listeners in the same block, after the members. */
    hilock_multilock *m = hl_calloc(
        1, sizeof *m + n * (sizeof m->members[0] + sizeof *m->watches));
    if (m == NULL)
        return hl_fail(HILOCK_ENOMEM, "out of memory for a multi-lock");
    m->watches = (hl_hold_listener *)(void *)&m->members[n];
    /* The coordinator's memory outlives its closing: the group still asks
     * it whether it is closed, and from which thread. */
    m->coord = hl_lock_client_get(locks[0]);
    if (m->coord == NULL) {
        hl_free(m);
        return hl_fail(HILOCK_ECLOSED, "member 0 is closed");
    }
    m->rl = rl;
    m->n = n;
    m->quorum = quorum;
    m->redlock = rl != NULL;
    m->watchdog_ms = INT64_MAX;
    atomic_init(&m->refs, 1);
    for (size_t i = 0; i < n; i++) {
        m->members[i] = locks[i];
        int64_t wd = hl_client_watchdog_ms(locks[i]->client);
        if (wd < m->watchdog_ms)
            m->watchdog_ms = wd;
    }
    /* Away from loop threads, setting and clearing a listener are in
     * effect when they return, and only a member's first listener
     * allocates (its rare parts); on a loop thread they are handed over,
     * and a rollback frees m once the last is out. */
    for (size_t i = 0; i < n; i++) {
        m->watches[i].cb = hl_multi_member_lost;
        m->watches[i].data = m;
        int rc = hl_lock_listen(locks[i], &m->watches[i]);
        if (rc != HILOCK_OK) {
            unwatch_members(m, i);
            hl_multi_unref(m);
            return hl_fail(rc, "could not watch member %zu", i);
        }
    }
    if (hl_handle_add(m) != 0) {
        unwatch_members(m, n);
        hl_multi_unref(m);
        return hl_fail(HILOCK_ENOMEM, "out of memory for a multi-lock");
    }
    *out = m;
    return HILOCK_OK;
}

int hilock_multilock_create(hilock_multilock **out, hilock_lock *const *locks,
                            size_t n)
{
    if (out == NULL || locks == NULL)
        return hl_fail(HILOCK_EINVAL, "NULL argument");
    *out = NULL;
    if (n < 1 || n > HILOCK_MAX_MEMBERS)
        return hl_fail(HILOCK_EINVAL, "a multi-lock has 1..%d members: %zu",
                       HILOCK_MAX_MEMBERS, n);
    for (size_t i = 0; i < n; i++) {
        if (locks[i] == NULL)
            return hl_fail(HILOCK_EINVAL, "member %zu is NULL", i);
        hilock_client *c = hl_lock_client_get(locks[i]);
        if (c == NULL)
            return hl_fail(HILOCK_EINVAL, "member %zu is closed", i);
        hl_client_unref(c);
        for (size_t j = 0; j < i; j++)
            if (locks[j] == locks[i])
                return hl_fail(HILOCK_EINVAL,
                               "member %zu repeats member %zu", i, j);
    }
    return hl_multi_create(out, locks, n, n, NULL);
}

/* ---- teardown --------------------------------------------------------- */

/* Pending acquires end on the coordinator: cancelled, or closed when its
 * closing drains the teardown. */
static void teardown_complete(hl_op *op)
{
    hilock_multilock *m = ((hl_multi_teardown *)op)->m;
    if (op->status == HILOCK_OK)
        hl_multi_cancel_all(m);
    else
        hl_multi_close_all(m);
}

/* The op's memory is the group's. */
static void teardown_destroy(hl_op *op)
{
    hl_multi_unref(((hl_multi_teardown *)op)->m);
}

static const hl_op_type teardown_type = {
    .start = hl_multi_finish_at_start,
    .complete = teardown_complete,
    .destroy = teardown_destroy,
    .bounded = false,
};

int hilock_multilock_destroy(hilock_multilock *m)
{
    if (m == NULL)
        return hl_fail(HILOCK_EINVAL, "multi-lock is NULL");
    if (!hl_handle_remove(m))
        return hl_fail(HILOCK_ECLOSED, "multi-lock destroyed already");
    atomic_store(&m->destroyed, true);
    /* Before the listeners go: a coordinator closing meanwhile, which
     * refuses the teardown, still ends the group's calls through its
     * member's listener, and one that drains it ends them there.  The
     * memory goes with the last reference. */
    hl_op_init(&m->teardown.op, &teardown_type);
    m->teardown.m = m;
    hl_multi_ref(m);
    hl_op_submit_or_drop(m->coord, &m->teardown.op);
    /* A loss a member's loop reports before the clear takes effect holds
     * a reference of its own; after it, none names m. */
    unwatch_members(m, m->n);
    if (m->rl != NULL) {
        for (size_t i = 0; i < m->n; i++)
            hilock_lock_destroy(m->members[i]);
        hl_redlock_lock_gone(m->rl, m);
    }
    hl_multi_unref(m);
    return HILOCK_OK;
}

/* ---- lost callback ---------------------------------------------------- */

/* On the setting thread's stack, which waits until the coordinator has
 * taken it: a clear never allocates, and once it returns the old
 * callback is not called again. */
typedef struct set_lost_call {
    hl_op op; /* first */
    hilock_multilock *m;
    hilock_multi_lost_cb *cb;
    void *data;
} set_lost_call;

static void apply_lost(hilock_multilock *m, hilock_multi_lost_cb *cb,
                       void *data)
{
    if (!atomic_load(&m->destroyed)) {
        m->lost_cb = cb;
        m->lost_data = data;
    }
}

static void set_lost_start(hl_op *op)
{
    set_lost_call *st = (set_lost_call *)op;
    apply_lost(st->m, st->cb, st->data);
    hl_op_done(op, HILOCK_OK, 0, NULL, NULL);
}

static void set_lost_on_stack(hl_op *op) { (void)op; }

static const hl_op_type set_lost_type = {
    .start = set_lost_start,
    .destroy = set_lost_on_stack,
};

static void set_lost_handed_free(hl_op *op)
{
    hl_multi_op_free(op, ((set_lost_call *)op)->m);
}

/* Asked on the loop thread of another client, which must not wait for
 * the coordinator's: a copy takes the setting there. */
static const hl_op_type set_lost_handed_type = {
    .start = set_lost_start,
    .destroy = set_lost_handed_free,
};

static int set_lost_handed_over(hilock_multilock *m,
                                hilock_multi_lost_cb *cb, void *user_data)
{
    set_lost_call *st = hl_calloc(1, sizeof *st);
    if (st == NULL)
        return hl_fail(HILOCK_ENOMEM, "out of memory to hand the setting "
                                      "to the coordinator's loop");
    hl_op_init(&st->op, &set_lost_handed_type);
    st->m = m;
    st->cb = cb;
    st->data = user_data;
    hl_multi_ref(m);
    return hl_op_submit_or_drop(m->coord, &st->op);
}

int hilock_multilock_set_lost_callback(hilock_multilock *m,
                                       hilock_multi_lost_cb *cb,
                                       void *user_data)
{
    if (m == NULL)
        return hl_fail(HILOCK_EINVAL, "multi-lock is NULL");
    if (hl_client_in_loop(m->coord)) {
        /* Closing or not: nothing else runs there now. */
        apply_lost(m, cb, user_data);
        return HILOCK_OK;
    }
    if (!hl_op_caller_may_wait())
        return set_lost_handed_over(m, cb, user_data);
    /* Not a loop thread: hl_op_call_and_wait may wait here. */
    set_lost_call st;
    hl_op_init(&st.op, &set_lost_type);
    st.m = m;
    st.cb = cb;
    st.data = user_data;
    return hl_op_call_and_wait(m->coord, &st.op);
}

/* ---- blocking calls --------------------------------------------------- */

static int check_blocking(hilock_multilock *m)
{
    if (m == NULL)
        return hl_fail(HILOCK_EINVAL, "multi-lock is NULL");
    for (size_t i = 0; i < m->n; i++) {
        hilock_client *c = m->members[i]->client;
        if (c != NULL && hl_client_in_loop(c))
            return hl_fail(HILOCK_EDEADLK,
                           "sync call on a member's loop thread");
    }
    return 0;
}

int hilock_multilock_try_acquire(hilock_multilock *m, int64_t wait_ms,
                                 int64_t lease_ms,
                                 hilock_member_result *results,
                                 size_t result_size, int64_t *validity_ms)
{
    if (results != NULL && result_size < sizeof *results)
        return hl_fail(HILOCK_EINVAL,
                       "result_size %zu is too small: pass "
                       "sizeof(hilock_member_result)",
                       result_size);
    int rc = check_blocking(m);
    if (rc != 0)
        return rc;
    hl_op *op;
    rc = hl_multi_acquire_new(&op, m, hilock_thread_owner(), wait_ms,
                              lease_ms, NULL, NULL);
    if (rc != HILOCK_OK)
        return rc;
    /* Ours, beside the one the wait consumes: the members' answers are
     * read once it is over.  A wait that runs out cancels the acquire and
     * waits for it to end, so no grant outlives the call. */
    hl_op_ref(op);
    op->stay_asleep = m->redlock; /* as its loop: see master_options */
    int64_t validity = 0;
    rc = hl_op_run_blocking(m->coord, op, hl_client_blocking_limit_us(m->coord, wait_ms),
                            &validity, NULL);
    const hilock_member_result *got = hl_multi_acquire_results(op);
    for (size_t i = 0; results != NULL && i < m->n; i++) {
        /* A caller's struct of a later version keeps the stride it knows,
         * its fields beyond ours zeroed. */
        char *slot = (char *)results + i * result_size;
        memcpy(slot, &got[i], sizeof got[i]);
        memset(slot + sizeof got[i], 0, result_size - sizeof got[i]);
    }
    if (validity_ms != NULL)
        *validity_ms = rc == HILOCK_OK ? validity : 0;
    hl_op_unref(op);
    return rc;
}

int hilock_multilock_acquire(hilock_multilock *m)
{
    return hilock_multilock_try_acquire(m, HILOCK_WAIT_FOREVER,
                                        HILOCK_LEASE_WATCHDOG, NULL, 0, NULL);
}

int hilock_multilock_release(hilock_multilock *m)
{
    int rc = check_blocking(m);
    if (rc != 0)
        return rc;
    hl_op *op;
    rc = hl_multi_release_new(&op, m, hilock_thread_owner(), NULL, NULL);
    if (rc != HILOCK_OK)
        return rc;
    op->stay_asleep = m->redlock;
    return hl_op_run_blocking(m->coord, op, hl_client_blocking_limit_us(m->coord, 0), NULL,
                              NULL);
}

/* Asked on the coordinator, which alone reads the holds. */
typedef struct lost_query {
    hl_op op; /* first */
    hilock_multilock *m;
    uint64_t owner;
} lost_query;

static void lost_query_start(hl_op *op)
{
    lost_query *q = (lost_query *)op;
    bool held = false;
    if (atomic_load(&q->m->destroyed))
        hl_op_finish(op, HILOCK_ECLOSED, 0, NULL, "multi-lock destroyed");
    else
        hl_op_finish(op, HILOCK_OK,
                     hl_multi_owner_lost(q->m, q->owner, &held) ? 1 : 0,
                     NULL, NULL);
    hl_op_unref(op);
}

static void lost_query_destroy(hl_op *op)
{
    hl_multi_op_free(op, ((lost_query *)op)->m);
}

static const hl_op_type lost_query_type = {
    .start = lost_query_start,
    .destroy = lost_query_destroy,
    .bounded = true,
};

int hilock_multilock_lease_lost(hilock_multilock *m, bool *lost)
{
    if (lost == NULL)
        return hl_fail(HILOCK_EINVAL, "lost is NULL");
    int rc = check_blocking(m);
    if (rc != 0)
        return rc;
    lost_query *q = hl_calloc(1, sizeof *q);
    if (q == NULL)
        return hl_fail(HILOCK_ENOMEM, "out of memory");
    hl_op_init(&q->op, &lost_query_type);
    q->m = m;
    q->owner = hilock_thread_owner();
    hl_multi_ref(m);
    int64_t value = 0;
    rc = hl_op_run_blocking(m->coord, &q->op,
                            hl_client_blocking_limit_us(m->coord, 0), &value,
                            NULL);
    if (rc == HILOCK_OK)
        *lost = value != 0;
    return rc;
}
