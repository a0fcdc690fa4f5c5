/* The blocking lock API: each call is its async twin's operation, run for
 * the calling thread's owner id and waited on (see op.h). */
#include "core/base/alloc.h"
#include "core/base/error_detail.h"
#include "core/engine/engine_internal.h"
#include "core/config/option_values.h"

int hilock_lock_acquire_fenced(hilock_lock *lock, int64_t wait_ms,
                               int64_t lease_ms, uint64_t *token)
{
    return hl_acquire(lock, hilock_thread_owner(), wait_ms, lease_ms,
                      token ? HILOCK_ACQUIRE_FENCED : 0, NULL, NULL, NULL,
                      token);
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

int hilock_lock_acquire_as(hilock_lock *lock, uint64_t owner,
                           int64_t wait_ms, int64_t lease_ms, unsigned flags,
                           uint64_t *token)
{
    uint64_t got = 0;
    if (token != NULL)
        *token = 0;
    if (owner == 0)
        return hl_fail(HILOCK_EINVAL, "owner id 0 is reserved");
    if ((flags & ~HILOCK_ACQUIRE_FENCED) != 0)
        return hl_fail(HILOCK_EINVAL, "unknown acquire flags 0x%x", flags);
    int rc = hl_acquire(lock, owner, wait_ms, lease_ms, flags, NULL, NULL,
                        NULL, &got);
    if (token != NULL)
        *token = got;
    return rc;
}

int hilock_lock_release_as(hilock_lock *lock, uint64_t owner)
{
    if (owner == 0)
        return hl_fail(HILOCK_EINVAL, "owner id 0 is reserved");
    return hl_lock_call(lock, CALL_RELEASE, owner, NULL, NULL, NULL);
}

int hilock_lock_release(hilock_lock *lock)
{
    return hl_lock_call(lock, CALL_RELEASE, hilock_thread_owner(), NULL,
                        NULL, NULL);
}

int hilock_lock_force_release(hilock_lock *lock, bool *deleted)
{
    int64_t v = 0;
    int rc = hl_lock_call(lock, CALL_FORCE, 0, NULL, NULL, &v);
    if (deleted)
        *deleted = rc == HILOCK_OK && v == 1;
    return rc;
}

int hilock_lock_is_locked(hilock_lock *lock, bool *locked)
{
    int64_t v = 0;
    int rc = hl_lock_call(lock, CALL_IS_LOCKED, 0, NULL, NULL, &v);
    if (locked)
        *locked = rc == HILOCK_OK && v > 0;
    return rc;
}

int hilock_lock_hold_count(hilock_lock *lock, int64_t *count)
{
    int64_t v = 0;
    int rc = hl_lock_call(lock, CALL_HOLD_COUNT, hilock_thread_owner(), NULL,
                          NULL, &v);
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

int hilock_lock_remaining_ttl(hilock_lock *lock, int64_t *ttl_ms)
{
    int64_t v = -1;
    int rc = hl_lock_call(lock, CALL_TTL, 0, NULL, NULL, &v);
    if (ttl_ms)
        *ttl_ms = rc == HILOCK_OK ? v : -1;
    return rc;
}

int hilock_lock_owner_valid_until(hilock_lock *lock, uint64_t owner,
                                  int64_t *until_ms)
{
    if (until_ms != NULL)
        *until_ms = 0;
    if (lock == NULL || until_ms == NULL)
        return hl_fail(HILOCK_EINVAL, "NULL argument");
    if (owner == 0)
        return hl_fail(HILOCK_EINVAL, "owner id 0 is reserved");
    int64_t v = 0;
    int rc = hl_lock_knowledge(lock, CALL_VALID_UNTIL, owner, &v);
    if (rc == HILOCK_OK)
        *until_ms = v;
    return rc;
}

int hilock_lock_valid_until(hilock_lock *lock, int64_t *until_ms)
{
    return hilock_lock_owner_valid_until(lock, hilock_thread_owner(),
                                         until_ms);
}

int hilock_lock_lease_lost(hilock_lock *lock, bool *lost)
{
    int64_t v = 0;
    int rc = hl_lock_call(lock, CALL_LEASE_LOST, hilock_thread_owner(), NULL,
                          NULL, &v);
    if (lost)
        *lost = rc == HILOCK_OK && v != 0;
    return rc;
}
