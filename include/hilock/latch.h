/* Count-down latch, Redisson-compatible.
 *
 * A latch handle names one latch on the client's server: a count that
 * workers take down one at a time, and that waiters wait to see reach
 * zero.  A latch that does not exist counts 0 (it is open).
 *
 * In Redis the latch is a string at the latch's name holding the count,
 * with wake-ups published on "redisson_countdownlatch__channel__{NAME}"
 * (braces always): "1" when a count is set or the latch deleted, "0" by
 * the count down that reaches zero, which also deletes the key, exactly
 * as Redisson's RCountDownLatch does, so Java and C services can share
 * latches.  On a Redis Cluster the scripts publish with SPUBLISH and the
 * waiters listen with SSUBSCRIBE: the channel's hash tag is NAME, in the
 * slot of the name, as long as NAME holds no '}' (such names are refused
 * there with HILOCK_EINVAL, see below).
 *
 * Waiting.  An await listens on the channel and reads the count when the
 * subscription is confirmed (also again after a reconnect, which covers a
 * message lost while the connection was down), when any message arrives,
 * and once more at the end of its wait.  It reads nothing on a timer of
 * its own, so waiting awaits cost the server nothing.  A count-down that
 * publishes nothing (a peer that does not, or a PUBLISH refused by the
 * server's ACL, which the counting client counts in
 * hilock_client_stats) wakes nobody: awaits then see the latch open at
 * their next wake-up or at the end of their wait.
 *
 * Callback contract as in client.h: an async call that returns an error
 * never calls back; one that returns HILOCK_OK calls back exactly once on
 * the loop thread, also when the client is closed first (HILOCK_ECLOSED)
 * or the handle destroyed (HILOCK_ECANCELED). */
#ifndef HILOCK_LATCH_H
#define HILOCK_LATCH_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "client.h"
#include "export.h"
#include "lock.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct hilock_latch hilock_latch;

/* The largest count a latch may be set to: 2^53 - 1, the integers the
 * server's Lua counts exactly.  A larger count is refused with
 * HILOCK_EINVAL ("too large"), never clamped. */
#define HILOCK_LATCH_MAX_COUNT INT64_C(9007199254740991)

/* Make a handle for the latch `name` (a C string; the _n twin takes a
 * binary-safe name and its length; 1..HILOCK_MAX_NAME_LEN bytes,
 * copied).  No server round trip.  Any thread.
 * @return HILOCK_OK
 * @return HILOCK_EINVAL  NULL argument, empty or overlong name
 * @return HILOCK_ENOMEM
 * @return HILOCK_ECLOSED the client is closed */
HILOCK_API int hilock_latch_create(hilock_latch **out, hilock_client *client,
                                   const char *name);
HILOCK_API int hilock_latch_create_n(hilock_latch **out,
                                     hilock_client *client, const char *name,
                                     size_t name_len);

/* Free a handle.  Pending awaits complete with HILOCK_ECANCELED before
 * it returns (their callbacks run on the loop thread); other pending
 * calls complete with their result.  Any thread except inside one of this
 * latch's callbacks, where it is deferred until the callback returns.  A
 * second destroy returns HILOCK_ECLOSED as for hilock_lock_destroy.
 * @return HILOCK_OK, HILOCK_EINVAL (NULL), HILOCK_ECLOSED */
HILOCK_API int hilock_latch_destroy(hilock_latch *latch);

/* The name the handle was made with, and its length. */
HILOCK_API const char *hilock_latch_name(const hilock_latch *latch,
                                         size_t *name_len);

/* ---- sync API ----------------------------------------------------------
 * Each blocks the calling thread and must not run on any thread running
 * a loop of the library: the client's own, or inside a callback of
 * another client (HILOCK_EDEADLK).  Connection errors: HILOCK_EIO,
 * HILOCK_ETIMEDOUT (a call that is one request was never sent),
 * HILOCK_EINDOUBT (it was sent, and its answer did not come in time: a
 * count down may have counted), HILOCK_ECLOSED, HILOCK_EPERM (the server's
 * ACL does not allow the user a command the call needs), HILOCK_EREADONLY
 * (the server is a replica; under Sentinel or on a cluster a write is
 * first made again on the master, as a lock's release is, see lock.h,
 * and did not run when this is said), HILOCK_EFULL (max_pending
 * operations of the client are unfinished; nothing was started).  Under a
 * replica acknowledgement policy (hilock_options_set_replica_ack) every
 * call that writes (all but hilock_latch_count and hilock_latch_await)
 * waits for the replicas the policy names, and returns HILOCK_ENOACK
 * when they did not acknowledge in time: the change was made on the
 * master, and a failover before the replicas have it may undo it; it is
 * not to be made again on that account.  Each
 * call that names the latch's channel (all but hilock_latch_count) also
 * returns HILOCK_EINVAL on a Redis Cluster for a name holding a '}',
 * whose channel lies in another slot than its key. */

/* Set the count to `count` when the latch does not exist (is open), and
 * publish "1".  *set (may be NULL) tells whether it was set: false when
 * a count was there already, which is left alone.
 * @return HILOCK_OK
 * @return HILOCK_EINVAL  count below 1 ("a latch counts from 1"), or above
 *                        HILOCK_LATCH_MAX_COUNT ("too large")
 * @return HILOCK_EREDIS  the name holds another type of value
 * and the connection errors above. */
HILOCK_API int hilock_latch_try_set_count(hilock_latch *latch, int64_t count,
                                          bool *set);

/* Take the count down by one.  The count down that reaches zero deletes
 * the latch and publishes "0", which wakes every waiter; one on a latch
 * that does not exist does nothing (as Redisson's).  A PUBLISH refused by
 * the server's ACL does not fail the call: waiters then see the count at
 * their next wake-up or at the end of their wait.  *left (may be NULL)
 * receives the count left, 0 when the latch is open.
 * @return HILOCK_OK
 * @return HILOCK_EREDIS  the name holds another type of value
 * @return HILOCK_EPROTO  the name holds a string that is no count (see
 *                        hilock_latch_count); nothing changed
 * and the connection errors above. */
HILOCK_API int hilock_latch_count_down(hilock_latch *latch, int64_t *left);

/* The count now; 0 when the latch does not exist.  A count some other
 * program wrote is read exactly, up to 2^63 - 1.
 * @return HILOCK_OK
 * @return HILOCK_EREDIS  the name holds another type of value
 * @return HILOCK_EPROTO  the name holds a string that is no count: not a
 *                        decimal 64-bit integer as Redis's INCR keeps one
 *                        ("5.5", 2^63), or a negative one, which neither
 *                        hilock nor Redisson writes; the detail quotes it
 * and the connection errors above. */
HILOCK_API int hilock_latch_count(hilock_latch *latch, int64_t *count);

/* Wait until the count is zero, at most wait_ms (0: look once;
 * HILOCK_WAIT_FOREVER, as is any wait too long to represent).  *opened
 * (may be NULL) is true when the count was seen at zero, false when it
 * was still above zero at the end of the wait (the count is read once
 * more at the deadline).
 * @return HILOCK_OK
 * @return HILOCK_EINVAL  wait_ms negative other than HILOCK_WAIT_FOREVER
 * and the errors of hilock_latch_count. */
HILOCK_API int hilock_latch_await(hilock_latch *latch, int64_t wait_ms,
                                  bool *opened);

/* Whether a client of this library set the latch and it still counts,
 * or a client of this library opened or deleted it within the last day:
 * a latch that counts 0 was opened then, rather than a name nobody set
 * (a typo, say), for which hilock_latch_await returns opened at once, as
 * Redisson's does.  Redisson's clients leave no such word: a latch only
 * they set reads false (hilock_client_name_kind reads the same word).
 * Blocks; not on a loop thread.
 * @return HILOCK_OK
 * @return HILOCK_EINVAL  NULL argument
 * @return HILOCK_EPROTO  the word's key holds no string
 * and the connection errors above. */
HILOCK_API int hilock_latch_was_set(hilock_latch *latch, bool *seen);

/* Delete the latch whatever its count, publishing "1" when there was one
 * (as Redisson's delete does).  A deleted latch counts 0, so our waiters,
 * who read the count on every message, return opened at once; Redisson's
 * own waiters read it only at the end of their wait.  *deleted (may be
 * NULL) tells whether there was anything to delete.
 * @return HILOCK_OK and the connection errors above. */
HILOCK_API int hilock_latch_delete(hilock_latch *latch, bool *deleted);

/* ---- async API: callbacks on the loop thread --------------------------- */

/* value: 1/0 set (try_set_count), the count left (count_down), the count
 * (count), 1/0 opened (await), 1/0 deleted (delete); 0 on error. */
typedef void hilock_latch_cb(hilock_latch *latch, int status, int64_t value,
                             void *user_data);

/* As the sync calls, with the outcome given to cb; statuses in the
 * callback as there, plus HILOCK_ECANCELED (await: the handle was
 * destroyed) and HILOCK_ECLOSED.  Any thread; never block.
 * @return HILOCK_OK      cb fires exactly once
 * @return HILOCK_EINVAL  NULL latch or callback, or a count or wait_ms
 *                        the sync call refuses (nothing was started)
 * @return HILOCK_ENOMEM, HILOCK_ECLOSED
 * @return HILOCK_EFULL   max_pending operations of the client are
 *                        unfinished; nothing was started */
HILOCK_API int hilock_latch_try_set_count_async(hilock_latch *latch,
                                                int64_t count,
                                                hilock_latch_cb *cb,
                                                void *user_data);
HILOCK_API int hilock_latch_count_down_async(hilock_latch *latch,
                                             hilock_latch_cb *cb,
                                             void *user_data);
HILOCK_API int hilock_latch_count_async(hilock_latch *latch,
                                        hilock_latch_cb *cb, void *user_data);
/* op_id (may be NULL) receives the await's id, for hilock_latch_cancel. */
HILOCK_API int hilock_latch_await_async(hilock_latch *latch, int64_t wait_ms,
                                        hilock_latch_cb *cb, void *user_data,
                                        uint64_t *op_id);
HILOCK_API int hilock_latch_delete_async(hilock_latch *latch,
                                         hilock_latch_cb *cb,
                                         void *user_data);

/* Give up a pending await by its id: its callback runs with
 * HILOCK_ECANCELED.  Any thread.
 * @return HILOCK_OK        the await ends
 * @return HILOCK_ENOTFOUND no await of this handle has that id (it ended
 *                          already, or belongs to another handle)
 * @return HILOCK_EINVAL    NULL latch
 * @return HILOCK_ECLOSED   the client or the handle is closed */
HILOCK_API int hilock_latch_cancel(hilock_latch *latch, uint64_t op_id);

#ifdef __cplusplus
}
#endif

#endif
