/* The semaphore API: check the arguments, make the call's operation, and
 * run it for a blocking caller or hand it to the loop (semaphore.c). */
#include <limits.h>
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

static int check_count(sem_call call, int permits)
{
    switch (call) {
    case SEM_ACQUIRE:
    case SEM_RELEASE:
        if (permits < 1)
            return hl_fail(HILOCK_EINVAL,
                           "permits is %d: it must be 1..%d", permits,
                           INT_MAX);
        break;
    case SEM_TRY_SET:
    case SEM_SET:
        if (permits < 0)
            return hl_fail(HILOCK_EINVAL,
                           "permits is %d: a count must be 0..%d", permits,
                           INT_MAX);
        break;
    case SEM_ADD:
        if (permits == 0)
            return hl_fail(HILOCK_EINVAL, "adding 0 permits does nothing");
        break;
    default:
        break;
    }
    return HILOCK_OK;
}

static int call(hilock_semaphore *sem, sem_call what, int64_t n,
                int64_t wait_ms, int64_t lease_ms, const char *id_in,
                hilock_semaphore_cb *cb, void *user_data, int64_t *value,
                char *id_out, uint64_t *op_id)
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
                              wait_ms, lease_ms, cb, user_data, id_out,
                              op_id);
    }
    size_t id_len = 0;
    if (what == SEM_PERMIT_RELEASE) {
        if (id_in == NULL || (id_len = strlen(id_in)) == 0 ||
            id_len >= HILOCK_PERMIT_ID_MAX)
            return hl_fail(HILOCK_EINVAL, "a permit id is 1..%d bytes",
                           HILOCK_PERMIT_ID_MAX - 1);
        return hl_sem_permit_release(sem, id_in, cb, user_data);
    }
    return hl_sem_call(sem, what, n, NULL, cb, user_data, value);
}

int hilock_semaphore_try_acquire(hilock_semaphore *sem, int permits,
                                 int64_t wait_ms)
{
    int rc = check_count(SEM_ACQUIRE, permits);
    return rc ? rc
              : call(sem, SEM_ACQUIRE, permits, wait_ms, 0, NULL, NULL, NULL,
                     NULL, NULL, NULL);
}

int hilock_semaphore_release(hilock_semaphore *sem, int permits)
{
    int rc = check_count(SEM_RELEASE, permits);
    return rc ? rc
              : call(sem, SEM_RELEASE, permits, 0, 0, NULL, NULL, NULL, NULL,
                     NULL, NULL);
}

int hilock_semaphore_try_set(hilock_semaphore *sem, int permits, bool *set)
{
    int64_t v = 0;
    int rc = check_count(SEM_TRY_SET, permits);
    if (rc == HILOCK_OK)
        rc = call(sem, SEM_TRY_SET, permits, 0, 0, NULL, NULL, NULL, &v,
                  NULL, NULL);
    if (set != NULL)
        *set = rc == HILOCK_OK && v == 1;
    return rc;
}

int hilock_semaphore_set(hilock_semaphore *sem, int permits)
{
    int rc = check_count(SEM_SET, permits);
    return rc ? rc
              : call(sem, SEM_SET, permits, 0, 0, NULL, NULL, NULL, NULL,
                     NULL, NULL);
}

int hilock_semaphore_add(hilock_semaphore *sem, int permits, int64_t *count)
{
    int64_t v = 0;
    int rc = check_count(SEM_ADD, permits);
    if (rc == HILOCK_OK)
        rc = call(sem, SEM_ADD, permits, 0, 0, NULL, NULL, NULL, &v, NULL, NULL);
    if (count != NULL)
        *count = rc == HILOCK_OK ? v : 0;
    return rc;
}

int hilock_semaphore_drain(hilock_semaphore *sem, int64_t *drained)
{
    int64_t v = 0;
    int rc = call(sem, SEM_DRAIN, 0, 0, 0, NULL, NULL, NULL, &v, NULL, NULL);
    if (drained != NULL)
        *drained = rc == HILOCK_OK ? v : 0;
    return rc;
}

int hilock_semaphore_available(hilock_semaphore *sem, int64_t *available)
{
    int64_t v = 0;
    int rc = call(sem, SEM_AVAILABLE, 0, 0, 0, NULL, NULL, NULL, &v, NULL, NULL);
    if (available != NULL)
        *available = rc == HILOCK_OK ? v : 0;
    return rc;
}

int hilock_permit_acquire(hilock_semaphore *sem, int64_t wait_ms,
                          int64_t lease_ms, char id[HILOCK_PERMIT_ID_MAX])
{
    if (id == NULL)
        return hl_fail(HILOCK_EINVAL, "NULL id");
    id[0] = '\0';
    return call(sem, SEM_PERMIT_ACQUIRE, 1, wait_ms, lease_ms, NULL, NULL,
                NULL, NULL, id, NULL);
}

int hilock_permit_release(hilock_semaphore *sem, const char *id)
{
    return call(sem, SEM_PERMIT_RELEASE, 1, 0, 0, id, NULL, NULL, NULL,
                NULL, NULL);
}

/* ---- async ------------------------------------------------------------ */

#define NEED_CB(cb)                                                         \
    do {                                                                    \
        if ((cb) == NULL)                                                   \
            return hl_fail(HILOCK_EINVAL, "NULL callback");                 \
    } while (0)

int hilock_semaphore_try_acquire_async(hilock_semaphore *sem, int permits,
                                       int64_t wait_ms,
                                       hilock_semaphore_cb *cb,
                                       void *user_data, uint64_t *op_id)
{
    NEED_CB(cb);
    int rc = check_count(SEM_ACQUIRE, permits);
    return rc ? rc
              : call(sem, SEM_ACQUIRE, permits, wait_ms, 0, NULL, cb,
                     user_data, NULL, NULL, op_id);
}

int hilock_semaphore_release_async(hilock_semaphore *sem, int permits,
                                   hilock_semaphore_cb *cb, void *user_data)
{
    NEED_CB(cb);
    int rc = check_count(SEM_RELEASE, permits);
    return rc ? rc
              : call(sem, SEM_RELEASE, permits, 0, 0, NULL, cb, user_data,
                     NULL, NULL, NULL);
}

int hilock_semaphore_try_set_async(hilock_semaphore *sem, int permits,
                                   hilock_semaphore_cb *cb, void *user_data)
{
    NEED_CB(cb);
    int rc = check_count(SEM_TRY_SET, permits);
    return rc ? rc
              : call(sem, SEM_TRY_SET, permits, 0, 0, NULL, cb, user_data,
                     NULL, NULL, NULL);
}

int hilock_semaphore_set_async(hilock_semaphore *sem, int permits,
                               hilock_semaphore_cb *cb, void *user_data)
{
    NEED_CB(cb);
    int rc = check_count(SEM_SET, permits);
    return rc ? rc
              : call(sem, SEM_SET, permits, 0, 0, NULL, cb, user_data, NULL,
                     NULL, NULL);
}

int hilock_semaphore_add_async(hilock_semaphore *sem, int permits,
                               hilock_semaphore_cb *cb, void *user_data)
{
    NEED_CB(cb);
    int rc = check_count(SEM_ADD, permits);
    return rc ? rc
              : call(sem, SEM_ADD, permits, 0, 0, NULL, cb, user_data, NULL,
                     NULL, NULL);
}

int hilock_semaphore_drain_async(hilock_semaphore *sem,
                                 hilock_semaphore_cb *cb, void *user_data)
{
    NEED_CB(cb);
    return call(sem, SEM_DRAIN, 0, 0, 0, NULL, cb, user_data, NULL, NULL, NULL);
}

int hilock_semaphore_available_async(hilock_semaphore *sem,
                                     hilock_semaphore_cb *cb,
                                     void *user_data)
{
    NEED_CB(cb);
    return call(sem, SEM_AVAILABLE, 0, 0, 0, NULL, cb, user_data, NULL,
                NULL, NULL);
}

int hilock_permit_acquire_async(hilock_semaphore *sem, int64_t wait_ms,
                                int64_t lease_ms, hilock_semaphore_cb *cb,
                                void *user_data, uint64_t *op_id)
{
    NEED_CB(cb);
    return call(sem, SEM_PERMIT_ACQUIRE, 1, wait_ms, lease_ms, NULL, cb,
                user_data, NULL, NULL, op_id);
}

int hilock_permit_release_async(hilock_semaphore *sem, const char *id,
                                hilock_semaphore_cb *cb, void *user_data)
{
    NEED_CB(cb);
    return call(sem, SEM_PERMIT_RELEASE, 1, 0, 0, id, cb, user_data, NULL,
                NULL, NULL);
}
