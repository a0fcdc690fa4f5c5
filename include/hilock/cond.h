/* A condition variable bound to a lock, across processes: a waiter
 * releases the lock and enters the condition's line in one script, sleeps
 * until another client signals, and returns holding the lock again.
 *
 *   while (!item_ready())              // under the lock
 *       hilock_cond_wait(not_empty, HILOCK_WAIT_FOREVER);
 *
 * As with any condition variable, check the predicate in a loop: a wait
 * may also end without a signal (a waiter passed over as gone, see
 * docs/guide/conditions.md).  No signal is lost: a signal sent after a
 * waiter's release finds it in line, whenever its client hears of it; a
 * waiter that dies is passed over within the waiter timeout, and a signal
 * it took but never used passes on to the next waiter within the same.
 * Reentrant and fair locks. */
#ifndef HILOCK_COND_H
#define HILOCK_COND_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "export.h"
#include "lock.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct hilock_cond hilock_cond;

/* The longest name of a condition, in bytes. */
#define HILOCK_COND_MAX_NAME_LEN 200

/* A condition called name, bound to the lock of the handle lock (whose
 * name its keys carry, so that they share its cluster slot).  Waits use
 * that handle; any client may signal.  The handle must outlive the
 * condition.  Any thread.
 * @return HILOCK_OK
 * @return HILOCK_EINVAL  NULL argument, a name of 0 or more than
 *                        HILOCK_COND_MAX_NAME_LEN bytes, or a lock kind
 *                        a condition cannot wait on (read-write sides)
 * @return HILOCK_ECLOSED the lock or its client is closed
 * @return HILOCK_ENOMEM */
HILOCK_API int hilock_cond_create(hilock_cond **out, hilock_lock *lock,
                                  const char *name);
/* The same for a name of name_len bytes, which may hold any byte. */
HILOCK_API int hilock_cond_create_n(hilock_cond **out, hilock_lock *lock,
                                    const char *name, size_t name_len);

/* Ends the condition's waits with HILOCK_ECANCELED (each leaves the line,
 * passing on a signal it took; none holds the lock then) and frees it.
 * NULL is fine.  Any thread; on a loop thread it does not wait for the
 * waits to end. */
HILOCK_API void hilock_cond_destroy(hilock_cond *cond);

/* Wait on the condition with the calling thread's hold of the lock
 * (hilock_thread_owner()), which must be held once: release it and enter
 * the line in one script, sleep until signalled, and take the lock again
 * (with the hold's lease, and a new fencing token if the hold had one).
 * timeout_ms bounds the whole of it, the taking again included
 * (HILOCK_WAIT_FOREVER: no bound).  Blocks; not on a loop thread.
 * @return HILOCK_OK         woken, and the lock held again
 * @return HILOCK_ETIMEDOUT  not woken, or the lock not taken again, in
 *                           time: the lock is NOT held (unlike
 *                           pthread_cond_timedwait), and a signal taken
 *                           was passed on to the next waiter
 * @return HILOCK_ENOTOWNER  the owner does not hold the lock
 * @return HILOCK_ELEASELOST the hold was lost before the wait
 * @return HILOCK_EINVAL     NULL cond, a negative timeout, a hold taken
 *                           more than once (release the extra holds
 *                           first)
 * @return HILOCK_ECANCELED  the condition was destroyed meanwhile: the
 *                           lock is not held
 * @return HILOCK_EINDOUBT   the release's answer was lost: the lock is
 *                           counted as released, and not held
 * and the connection errors of the sync API (hilock/lock.h), after which
 * the lock is not held. */
HILOCK_API int hilock_cond_wait(hilock_cond *cond, int64_t timeout_ms);

/* As hilock_cond_wait with an explicit owner of the lock, and the new
 * fencing token in *token (may be NULL; 0 when the hold had none). */
HILOCK_API int hilock_cond_wait_as(hilock_cond *cond, uint64_t owner,
                                   int64_t timeout_ms, uint64_t *token);

/* token: as hilock_cond_wait_as gives it, when status is HILOCK_OK. */
typedef void hilock_cond_wait_cb(hilock_cond *cond, int status,
                                 uint64_t token, void *user_data);

/* As hilock_cond_wait_as, with the outcome given to cb on the loop thread;
 * *op_id (may be NULL) names the wait for hilock_cond_cancel.  Any
 * thread; never blocks.  The callback's statuses are those of
 * hilock_cond_wait.
 * @return HILOCK_OK (cb fires exactly once), HILOCK_EINVAL (NULL cond or
 *         callback, a negative timeout), HILOCK_ENOMEM, HILOCK_ECLOSED,
 *         HILOCK_EFULL */
HILOCK_API int hilock_cond_wait_async(hilock_cond *cond, uint64_t owner,
                                      int64_t timeout_ms,
                                      hilock_cond_wait_cb *cb,
                                      void *user_data, uint64_t *op_id);

/* End the wait op_id with HILOCK_ECANCELED: it leaves the line (passing
 * on a signal it took), or gives up taking the lock again; the lock is
 * not held then.  Any thread.
 * @return HILOCK_OK, HILOCK_EINVAL (NULL cond), HILOCK_ENOTFOUND (no such
 *         wait of this condition: it ended already) */
HILOCK_API int hilock_cond_cancel(hilock_cond *cond, uint64_t op_id);

/* Wake the waiter that has waited longest (signal) or every waiter
 * (broadcast), passing over waiters gone; *woken (may be NULL) is how
 * many were woken.  Holding the lock is not required.  Blocks; not on a
 * loop thread.
 * @return HILOCK_OK, HILOCK_EINVAL (NULL cond), HILOCK_EPERM (the
 *         server's ACL refused the wake-up PUBLISH; the waiters were
 *         signalled, and take the signal at their next look, within a
 *         third of the waiter timeout)
 * and the connection errors of the sync API. */
HILOCK_API int hilock_cond_signal(hilock_cond *cond, int64_t *woken);
HILOCK_API int hilock_cond_broadcast(hilock_cond *cond, int64_t *woken);

/* value: how many were woken. */
typedef void hilock_cond_cb(hilock_cond *cond, int status, int64_t value,
                            void *user_data);

/* hilock_cond_signal (all false) or hilock_cond_broadcast (all true),
 * with the outcome given to cb on the loop thread.  Any thread; never
 * blocks.
 * @return HILOCK_OK (cb fires exactly once), HILOCK_EINVAL (NULL cond or
 *         callback), HILOCK_ENOMEM, HILOCK_ECLOSED, HILOCK_EFULL */
HILOCK_API int hilock_cond_signal_async(hilock_cond *cond, bool all,
                                        hilock_cond_cb *cb, void *user_data);

/* The condition's name (not NUL-terminated when made with _n: use
 * *name_len, which may be NULL). */
HILOCK_API const char *hilock_cond_name(const hilock_cond *cond,
                                        size_t *name_len);

#ifdef __cplusplus
}
#endif

#endif
