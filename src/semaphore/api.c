/* The semaphore API: check the arguments, make the call's operation, and
 * run it for a blocking caller or hand it to the loop (semaphore.c). */
#include <inttypes.h>
#include <string.h>

#include "core/base/alloc.h"
#include "core/base/error_detail.h"
#include "core/engine/compose.h"
#include "semaphore/semaphore_internal.h"

static int check_kind(const hilock_semaphore *sem, sem_call call)
{
    if (sem == NULL)
        return hl_fail(HILOCK_EINVAL, "semaphore is NULL");
    bool permit_call = call == SEM_PERMIT_ACQUIRE ||
                       call == SEM_PERMIT_RELEASE;
    bool plain_call = call == SEM_ACQUIRE || call == SEM_RELEASE;
    /* Only a cast can bring a plain handle here; the base handle of a
     * permit semaphore comes here by hilock_permit_semaphore_base. */
    if (permit_call && !sem->expirable)
        return hl_fail(HILOCK_EINVAL,
                       "a plain semaphore has no permit ids: use "
                       "hilock_semaphore_try_acquire/release");
    if (plain_call && sem->expirable)
        return hl_fail(HILOCK_EINVAL,
                       "a semaphore of expirable permits takes and gives "
                       "back permits by id: use hilock_permit_acquire/"
                       "release");
    return HILOCK_OK;
}

static int check_count(sem_call call, int64_t permits)
{
    int64_t least = call == SEM_TRY_SET || call == SEM_SET ? 0
                    : call == SEM_ADD ? -HILOCK_MAX_PERMITS
                                      : 1;
    if (call == SEM_ADD && permits == 0)
        return hl_fail(HILOCK_EINVAL, "adding 0 permits does nothing");
    if (permits > HILOCK_MAX_PERMITS)
        return hl_fail(HILOCK_EINVAL,
                       "permits is %" PRId64 ": too large, the most is %"
                       PRId64, permits, HILOCK_MAX_PERMITS);
    if (permits < least)
        return hl_fail(HILOCK_EINVAL,
                       "permits is %" PRId64 ": it must be %" PRId64
                       "..%" PRId64, permits, least, HILOCK_MAX_PERMITS);
    return HILOCK_OK;
}

static int call(hilock_semaphore *sem, sem_call what, int64_t n,
                int64_t wait_ms, int64_t lease_ms, const char *id_in,
                const hl_sem_cb *cb, int64_t *value, char *id_out,
                uint64_t *op_id)
{
    hl_clear_detail();
    if (op_id != NULL)
        *op_id = 0;
    int rc = check_kind(sem, what);
    if (rc != HILOCK_OK)
        return rc;
    if (what == SEM_ACQUIRE || what == SEM_PERMIT_ACQUIRE) {
        rc = hl_check_acquire_args(1, wait_ms, lease_ms);
        if (rc != HILOCK_OK)
            return rc;
        return hl_sem_acquire(sem, what == SEM_PERMIT_ACQUIRE ? 1 : n,
                              wait_ms, lease_ms, cb, id_out, op_id);
    }
    size_t id_len = 0;
    if (what == SEM_PERMIT_RELEASE) {
        if (id_in == NULL || (id_len = strlen(id_in)) == 0 ||
            id_len >= HILOCK_PERMIT_ID_MAX)
            return hl_fail(HILOCK_EINVAL, "a permit id is 1..%d bytes",
                           HILOCK_PERMIT_ID_MAX - 1);
        return hl_sem_permit_release(sem, id_in, cb);
    }
    return hl_sem_call(sem, what, n, NULL, cb, value);
}

int hilock_semaphore_try_acquire(hilock_semaphore *sem, int64_t permits,
                                 int64_t wait_ms)
{
    int rc = check_count(SEM_ACQUIRE, permits);
    return rc ? rc
              : call(sem, SEM_ACQUIRE, permits, wait_ms, 0, NULL, NULL, NULL,
                     NULL, NULL);
}

int hilock_semaphore_release(hilock_semaphore *sem, int64_t permits)
{
    int rc = check_count(SEM_RELEASE, permits);
    return rc ? rc
              : call(sem, SEM_RELEASE, permits, 0, 0, NULL, NULL, NULL, NULL,
                     NULL);
}

int hilock_semaphore_try_set(hilock_semaphore *sem, int64_t permits,
                             bool *set)
{
    int64_t v = 0;
    int rc = check_count(SEM_TRY_SET, permits);
    if (rc == HILOCK_OK)
        rc = call(sem, SEM_TRY_SET, permits, 0, 0, NULL, NULL, &v, NULL,
                  NULL);
    if (set != NULL)
        *set = rc == HILOCK_OK && v == 1;
    return rc;
}

int hilock_semaphore_set(hilock_semaphore *sem, int64_t permits)
{
    int rc = check_count(SEM_SET, permits);
    return rc ? rc
              : call(sem, SEM_SET, permits, 0, 0, NULL, NULL, NULL, NULL,
                     NULL);
}

int hilock_semaphore_add(hilock_semaphore *sem, int64_t permits,
                         int64_t *count)
{
    int64_t v = 0;
    int rc = check_count(SEM_ADD, permits);
    if (rc == HILOCK_OK)
        rc = call(sem, SEM_ADD, permits, 0, 0, NULL, NULL, &v, NULL, NULL);
    if (count != NULL)
        *count = rc == HILOCK_OK ? v : 0;
    return rc;
}

int hilock_semaphore_drain(hilock_semaphore *sem, int64_t *drained)
{
    int64_t v = 0;
    int rc = call(sem, SEM_DRAIN, 0, 0, 0, NULL, NULL, &v, NULL, NULL);
    if (drained != NULL)
        *drained = rc == HILOCK_OK ? v : 0;
    return rc;
}

int hilock_semaphore_available(hilock_semaphore *sem, int64_t *available)
{
    int64_t v = 0;
    int rc = call(sem, SEM_AVAILABLE, 0, 0, 0, NULL, NULL, &v, NULL, NULL);
    if (available != NULL)
        *available = rc == HILOCK_OK ? v : 0;
    return rc;
}

int hilock_permit_acquire(hilock_permit_semaphore *ps, int64_t wait_ms,
                          int64_t lease_ms, char id[HILOCK_PERMIT_ID_MAX])
{
    if (id == NULL)
        return hl_fail(HILOCK_EINVAL, "NULL id");
    id[0] = '\0';
    return call((hilock_semaphore *)ps, SEM_PERMIT_ACQUIRE, 1, wait_ms,
                lease_ms, NULL, NULL, NULL, id, NULL);
}

int hilock_permit_release(hilock_permit_semaphore *ps, const char *id)
{
    return call((hilock_semaphore *)ps, SEM_PERMIT_RELEASE, 1, 0, 0, id,
                NULL, NULL, NULL, NULL);
}

/* ---- async ------------------------------------------------------------ */

/* A call on the count, reported to cb. */
static int count_async(hilock_semaphore *sem, sem_call what, int64_t n,
                       int64_t wait_ms, hilock_semaphore_cb *cb,
                       void *user_data, uint64_t *op_id)
{
    if (cb == NULL)
        return hl_fail(HILOCK_EINVAL, "NULL callback");
    bool counted = what != SEM_DRAIN && what != SEM_AVAILABLE;
    int rc = counted ? check_count(what, n) : HILOCK_OK;
    hl_sem_cb to = {.count = cb, .user_data = user_data};
    return rc ? rc
              : call(sem, what, n, wait_ms, 0, NULL, &to, NULL, NULL, op_id);
}

int hilock_semaphore_try_acquire_async(hilock_semaphore *sem,
                                       int64_t permits, int64_t wait_ms,
                                       hilock_semaphore_cb *cb,
                                       void *user_data, uint64_t *op_id)
{
    return count_async(sem, SEM_ACQUIRE, permits, wait_ms, cb, user_data,
                       op_id);
}

int hilock_semaphore_release_async(hilock_semaphore *sem, int64_t permits,
                                   hilock_semaphore_cb *cb, void *user_data)
{
    return count_async(sem, SEM_RELEASE, permits, 0, cb, user_data, NULL);
}

int hilock_semaphore_try_set_async(hilock_semaphore *sem, int64_t permits,
                                   hilock_semaphore_cb *cb, void *user_data)
{
    return count_async(sem, SEM_TRY_SET, permits, 0, cb, user_data, NULL);
}

int hilock_semaphore_set_async(hilock_semaphore *sem, int64_t permits,
                               hilock_semaphore_cb *cb, void *user_data)
{
    return count_async(sem, SEM_SET, permits, 0, cb, user_data, NULL);
}

int hilock_semaphore_add_async(hilock_semaphore *sem, int64_t permits,
                               hilock_semaphore_cb *cb, void *user_data)
{
    return count_async(sem, SEM_ADD, permits, 0, cb, user_data, NULL);
}

int hilock_semaphore_drain_async(hilock_semaphore *sem,
                                 hilock_semaphore_cb *cb, void *user_data)
{
    return count_async(sem, SEM_DRAIN, 0, 0, cb, user_data, NULL);
}

int hilock_semaphore_available_async(hilock_semaphore *sem,
                                     hilock_semaphore_cb *cb,
                                     void *user_data)
{
    return count_async(sem, SEM_AVAILABLE, 0, 0, cb, user_data, NULL);
}

int hilock_permit_acquire_async(hilock_permit_semaphore *ps, int64_t wait_ms,
                                int64_t lease_ms, hilock_permit_cb *cb,
                                void *user_data, uint64_t *op_id)
{
    if (cb == NULL)
        return hl_fail(HILOCK_EINVAL, "NULL callback");
    hl_sem_cb to = {.permit = cb, .user_data = user_data};
    return call((hilock_semaphore *)ps, SEM_PERMIT_ACQUIRE, 1, wait_ms,
                lease_ms, NULL, &to, NULL, NULL, op_id);
}

int hilock_permit_release_async(hilock_permit_semaphore *ps, const char *id,
                                hilock_permit_cb *cb, void *user_data)
{
    if (cb == NULL)
        return hl_fail(HILOCK_EINVAL, "NULL callback");
    hl_sem_cb to = {.permit = cb, .user_data = user_data};
    return call((hilock_semaphore *)ps, SEM_PERMIT_RELEASE, 1, 0, 0, id, &to,
                NULL, NULL, NULL);
}
