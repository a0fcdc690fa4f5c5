/* Fair lock: a reentrant lock granted first come, first served across
 * every thread, process and host that uses it, Redisson-compatible
 * (RFairLock's layout).
 *
 * A fair lock handle is a hilock_lock: take, release and query it with
 * the functions of lock.h, sync or async, with the watchdog or a lease,
 * fenced or not.  What differs is the order and the waiting:
 *
 * - Waiters line up in "redisson_lock_queue:{NAME}"; the lock goes to the
 *   head of the line only, and its release wakes exactly that waiter on
 *   its own channel "redisson_lock__channel:{NAME}:<client id>:<owner>".
 * - A waiter's place is reserved for the client's waiter timeout
 *   (hilock_options_set_waiter_timeout_ms, default 5 s) on the server's
 *   clock, and every waiting client renews it every third of that.  A
 *   waiter whose process died is passed over once its place runs out; a
 *   live one keeps its place however long it waits.
 * - A try-acquire that times out or is cancelled leaves the line at once.
 *   When the line empties its keys are gone.
 *
 * Errors are those of lock.h. */
#ifndef HILOCK_FAIR_H
#define HILOCK_FAIR_H

#include <stddef.h>

#include "export.h"
#include "lock.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Make a handle for the fair lock `name` (a C string; the _n twin takes
 * a binary-safe name and its length; 1..HILOCK_MAX_NAME_LEN bytes,
 * copied).  No round trip.  Any thread.  Free it with
 * hilock_lock_destroy().
 * @return HILOCK_OK
 * @return HILOCK_EINVAL  NULL argument, empty or overlong name
 * @return HILOCK_ENOMEM
 * @return HILOCK_ECLOSED the client is closed */
HILOCK_API int hilock_fair_lock_create(hilock_lock **out,
                                       hilock_client *client,
                                       const char *name);
HILOCK_API int hilock_fair_lock_create_n(hilock_lock **out,
                                         hilock_client *client,
                                         const char *name, size_t name_len);

#ifdef __cplusplus
}
#endif

#endif
