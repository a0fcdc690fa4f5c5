/* Multi-lock handles: creation, teardown, the lost callback, and the
 * blocking calls, each a thin wait on its async twin. */
#include <string.h>

#include "core/alloc.h"
#include "core/error_detail.h"
#include "core/handle.h"
#include "core/lockobj_internal.h"
#include "core/options_internal.h"
#include "multi_internal.h"

int hl_multi_create(hilock_multilock **out, hilock_lock *const *locks,
                    size_t n, size_t quorum, hilock_redlock *rl)
{
    hilock_multilock *m =
        hl_calloc(1, sizeof *m + n * sizeof m->members[0]);
    if (m == NULL)
        return hl_fail(HILOCK_ENOMEM, "out of memory for a multi-lock");
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
        int64_t wd = locks[i]->client->opts->watchdog_timeout_ms;
        if (wd < m->watchdog_ms)
            m->watchdog_ms = wd;
    }
    /* Setting and clearing a listener allocate nothing and are in effect
     * when they return: a rollback leaves no member naming m. */
    for (size_t i = 0; i < n; i++) {
        int rc = hl_lock_set_group_listener(locks[i], hl_multi_member_lost,
                                            m);
        if (rc != HILOCK_OK) {
            for (size_t j = 0; j < i; j++)
                hl_lock_set_group_listener(locks[j], NULL, NULL);
            hl_client_unref(m->coord);
            hl_free(m);
            return hl_fail(rc, "could not watch member %zu", i);
        }
    }
    if (hl_handle_add(m) != 0) {
        for (size_t i = 0; i < n; i++)
            hl_lock_set_group_listener(locks[i], NULL, NULL);
        hl_client_unref(m->coord);
        hl_free(m);
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

/* A task that names a group. */
typedef struct group_task {
    hl_task task;
    hilock_multilock *m;
} group_task;

static void run_teardown(hilock_client *c, hl_task *t, bool closed)
{
    (void)c;
    (void)closed;
    hilock_multilock *m = ((group_task *)t)->m;
    hl_multi_cancel_all(m);
    hl_free(t);
    hl_multi_unref(m);
}

/* Post a task naming m to the coordinator, holding a reference for
 * it. */
static void post_group_task(hilock_multilock *m,
                            void (*run)(hilock_client *, hl_task *, bool))
{
    group_task *g = hl_calloc(1, sizeof *g);
    if (g == NULL)
        return;
    g->task.run = run;
    g->m = m;
    hl_multi_ref(m);
    int rc = hl_multi_post(m, &g->task);
    if (rc != HILOCK_OK) {
        hl_multi_unref(m);
        hl_free(g);
    }
}

int hilock_multilock_destroy(hilock_multilock *m)
{
    if (m == NULL)
        return hl_fail(HILOCK_EINVAL, "multi-lock is NULL");
    if (!hl_handle_remove(m))
        return hl_fail(HILOCK_ECLOSED, "multi-lock destroyed already");
    atomic_store(&m->destroyed, true);
    /* A loss a member's loop reports before the clear takes effect holds
     * a reference of its own; after it, none names m. */
    for (size_t i = 0; i < m->n; i++)
        hl_lock_set_group_listener(m->members[i], NULL, NULL);
    /* Pending acquires end on the coordinator; the memory goes with the
     * last reference. */
    post_group_task(m, run_teardown);
    if (m->rl != NULL) {
        for (size_t i = 0; i < m->n; i++)
            hilock_lock_destroy(m->members[i]);
        hl_redlock_lock_gone(m->rl);
    }
    hl_multi_unref(m);
    return HILOCK_OK;
}

/* ---- lost callback ---------------------------------------------------- */

typedef struct set_lost_task {
    hl_task task;
    hilock_multilock *m;
    hilock_multi_lost_cb *cb;
    void *data;
} set_lost_task;

static void run_set_lost(hilock_client *c, hl_task *t, bool closed)
{
    (void)c;
    set_lost_task *st = (set_lost_task *)t;
    if (!closed) {
        st->m->lost_cb = st->cb;
        st->m->lost_data = st->data;
    }
    hl_multi_unref(st->m);
    hl_free(st);
}

int hilock_multilock_set_lost_callback(hilock_multilock *m,
                                       hilock_multi_lost_cb *cb,
                                       void *user_data)
{
    if (m == NULL)
        return hl_fail(HILOCK_EINVAL, "multi-lock is NULL");
    set_lost_task *st = hl_calloc(1, sizeof *st);
    if (st == NULL)
        return hl_fail(HILOCK_ENOMEM, "out of memory");
    st->task.run = run_set_lost;
    st->m = m;
    st->cb = cb;
    st->data = user_data;
    hl_multi_ref(m);
    int rc = hl_multi_post(m, &st->task);
    if (rc != HILOCK_OK) {
        hl_multi_unref(m);
        hl_free(st);
    }
    return rc;
}

/* ---- blocking calls --------------------------------------------------- */

static int check_sync(hilock_multilock *m)
{
    if (m == NULL)
        return hl_fail(HILOCK_EINVAL, "multi-lock is NULL");
    if (atomic_load(&m->destroyed))
        return hl_fail(HILOCK_ECLOSED, "multi-lock destroyed");
    for (size_t i = 0; i < m->n; i++) {
        hilock_client *c = m->members[i]->client;
        if (c != NULL && hl_client_in_loop(c))
            return hl_fail(HILOCK_EDEADLK,
                           "sync call on a member's loop thread");
    }
    return 0;
}

/* How long a blocking call waits for its op: the op's own wait (negative:
 * forever) plus room for its requests.  The op always ends; the limit
 * only guards against a loop thread that stopped answering. */
static int64_t sync_limit_us(const hilock_multilock *m, int64_t wait_ms)
{
    const hilock_options *o = m->coord->opts;
    int64_t room_ms =
        2 * o->command_timeout_ms + o->connect_timeout_ms + 1000;
    /* Waits too long to represent are waits forever. */
    if (wait_ms < 0 || wait_ms > INT64_MAX / 4 / 1000 - room_ms)
        return INT64_MAX / 4;
    return HL_MS(wait_ms + room_ms);
}

int hilock_multilock_try_acquire(hilock_multilock *m, int64_t wait_ms,
                                 int64_t lease_ms,
                                 hilock_member_result *results,
                                 int64_t *validity_ms)
{
    int rc = check_sync(m);
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
    int64_t validity = 0;
    rc = hl_op_run_blocking(m->coord, op, sync_limit_us(m, wait_ms),
                            &validity, NULL);
    if (results != NULL)
        memcpy(results, hl_multi_acquire_results(op),
               m->n * sizeof *results);
    if (validity_ms != NULL)
        *validity_ms = rc == HILOCK_OK ? validity : 0;
    hl_op_unref(op);
    return rc;
}

int hilock_multilock_release(hilock_multilock *m)
{
    int rc = check_sync(m);
    if (rc != 0)
        return rc;
    hl_op *op;
    rc = hl_multi_release_new(&op, m, hilock_thread_owner(), NULL, NULL);
    if (rc != HILOCK_OK)
        return rc;
    return hl_op_run_blocking(m->coord, op, sync_limit_us(m, 0), NULL, NULL);
}

typedef struct lost_query {
    hl_task task;
    hilock_multilock *m;
    uint64_t owner;
    hl_sync *sync;
} lost_query;

static void run_lost_query(hilock_client *c, hl_task *t, bool closed)
{
    (void)c;
    lost_query *q = (lost_query *)t;
    bool held = false;
    bool lost = !closed && hl_multi_owner_lost(q->m, q->owner, &held);
    hl_sync_post_value(q->sync, closed ? HILOCK_ECLOSED : HILOCK_OK, NULL,
                       lost ? 1 : 0, closed ? "client closed" : NULL);
    hl_multi_unref(q->m);
    hl_free(q);
}

int hilock_multilock_lease_lost(hilock_multilock *m, bool *lost)
{
    if (lost == NULL)
        return hl_fail(HILOCK_EINVAL, "lost is NULL");
    int rc = check_sync(m);
    if (rc != 0)
        return rc;
    hl_sync *sync = hl_sync_new(hl_sync_spin_for(0));
    lost_query *q = hl_calloc(1, sizeof *q);
    if (sync == NULL || q == NULL) {
        hl_free(q);
        if (sync != NULL) {
            hl_sync_post(sync, HILOCK_ENOMEM, NULL, "out of memory");
            hl_sync_wait(sync, 0, &rc, NULL, NULL, NULL, 0);
        }
        return hl_fail(HILOCK_ENOMEM, "out of memory");
    }
    q->task.run = run_lost_query;
    q->m = m;
    q->owner = hilock_thread_owner();
    q->sync = sync;
    hl_multi_ref(m);
    rc = hl_multi_post(m, &q->task);
    if (rc != HILOCK_OK) {
        hl_multi_unref(m);
        hl_free(q);
        hl_sync_post(sync, rc, NULL, hilock_last_error());
    }
    int status = 0;
    int64_t value = 0;
    char detail[256];
    if (hl_sync_wait(sync, HL_MS(10000), &status, NULL, &value, detail,
                     sizeof detail) != 0)
        return hl_fail(HILOCK_ETIMEDOUT, "the loop thread did not answer");
    if (status != 0)
        return hl_fail(status, "%s", detail);
    *lost = value != 0;
    return HILOCK_OK;
}
