/* Read-write lock: many readers or one writer, Redisson-compatible
 * (RReadWriteLock's layout).
 *
 * The two sides of one read-write lock are two hilock_lock handles on the
 * same name, one made with hilock_read_lock_create() and one with
 * hilock_write_lock_create().  Take, release and query each with the
 * functions of lock.h, sync or async, with the watchdog or a lease.
 *
 * - Readers share: any number of owners may hold the read lock at once,
 *   each reentrantly.  The writer excludes everyone else.  Both sides are
 *   reentrant.
 * - Downgrade: the owner holding the write lock may also take the read
 *   lock; once it releases the write lock it keeps reading and writers
 *   wait for it.
 * - Upgrade is refused: an owner holding the read lock that asks for the
 *   write lock gets HILOCK_EUPGRADE at once instead of waiting for itself
 *   (HILOCK_EDEADLK before 0.2.0).
 *   Release the read holds, then take the write lock.
 * - Writers are not starved: once a writer waits, new readers wait behind
 *   it (owners already reading may still take the read lock again).  A
 *   waiting writer's claim is kept like a fair lock's place
 *   (hilock_options_set_waiter_timeout_ms): renewed while it waits, gone
 *   within the waiter timeout after its process died, and given up at
 *   once when its try-acquire times out or is cancelled.
 * - Each read hold has its own lease (a key "{NAME}:<client id>:<owner>:
 *   rwlock_timeout:<n>" per hold), renewed by the client's watchdog, so a
 *   reader that dies stops blocking writers within its lease while the
 *   other readers keep theirs.
 * - Releases wake waiters by message on "redisson_rwlock:{NAME}": "0"
 *   when a read release frees the lock, "1" when a write release does or
 *   lets readers in.
 *
 * - A reader's field whose count no client writes (not an integer from
 *   1 to 2^53 - 2, such as "abc") names no hold: a writer's acquire is
 *   refused with HILOCK_EPROTO, quoting it, since it cannot tell whether
 *   that reader lives; releases count no hold for it.  As for the other
 *   kinds (lock.h), the owner's own field with such a count is refused
 *   too.
 *
 * hilock_lock_is_locked() on either handle tells whether anyone holds the
 * lock in either mode; hilock_lock_hold_count() counts the owner's holds
 * of the handle's side only.  Force release on either handle frees both
 * sides. */
#ifndef HILOCK_RWLOCK_H
#define HILOCK_RWLOCK_H

#include <stddef.h>

#include "export.h"
#include "lock.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Make a handle for the read side, or the write side, of the read-write
 * lock `name` (a C string; the _n twins take a binary-safe name and its
 * length; 1..HILOCK_MAX_NAME_LEN bytes, copied).  No
 * round trip.  Any thread.  Free it with hilock_lock_destroy().
 * @return HILOCK_OK
 * @return HILOCK_EINVAL  NULL argument, empty or overlong name
 * @return HILOCK_ENOMEM
 * @return HILOCK_ECLOSED the client is closed */
HILOCK_API int hilock_read_lock_create(hilock_lock **out,
                                       hilock_client *client,
                                       const char *name);
HILOCK_API int hilock_write_lock_create(hilock_lock **out,
                                        hilock_client *client,
                                        const char *name);
HILOCK_API int hilock_read_lock_create_n(hilock_lock **out,
                                         hilock_client *client,
                                         const char *name, size_t name_len);
HILOCK_API int hilock_write_lock_create_n(hilock_lock **out,
                                          hilock_client *client,
                                          const char *name, size_t name_len);

#ifdef __cplusplus
}
#endif

#endif
