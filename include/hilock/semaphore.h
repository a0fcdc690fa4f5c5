/* Semaphores, Redisson-compatible: RSemaphore and
 * RPermitExpirableSemaphore.
 *
 * A hilock_semaphore names a plain semaphore (RSemaphore) on the
 * client's server: a count of permits, taken and given back in any
 * number, owned by nobody.  A hilock_permit_semaphore names a semaphore
 * of expirable permits (RPermitExpirableSemaphore): each acquire takes
 * one permit and returns its id, and the permit comes back by itself when
 * its lease runs out.  With HILOCK_LEASE_WATCHDOG the client's watchdog
 * keeps a held permit's lease alive, as it does a lock's, so a permit
 * whose holder died comes back within the watchdog timeout, and a permit
 * whose lease could not be kept is reported lost
 * (hilock_permit_semaphore_set_lost_callback, and HILOCK_ELEASELOST from
 * its release).  The calls on the count (try_set, set, add, drain,
 * available) serve both: a permit semaphore lends its handle for them
 * (hilock_permit_semaphore_base).
 *
 * Counts of permits are int64_t, 1..HILOCK_MAX_PERMITS for a call that
 * takes or gives back, 0..HILOCK_MAX_PERMITS for one that sets; a larger
 * one is refused with HILOCK_EINVAL ("too large"), never clamped.
 *
 * In Redis the count is a string at the name; every release and count
 * change publishes the new count on "redisson_sc:{NAME}", which wakes the
 * waiters of both Java and C clients.  Expirable permits are the members of
 * the zset "{NAME}:timeout", scored with their expiry in ms since the epoch
 * (hilock writes the server's time there; Redisson writes its client's).
 * A score that no client writes is read as the time it says: before the
 * epoch (negative, -inf) a permit has expired, and the next acquire counts
 * it back, as it does any expired permit (Redisson looks from 0 only); 2^53
 * ms or more ahead (+inf) it never expires, as with Redisson's score for a
 * permit without a lease.  On an expirable semaphore, set counts the held
 * permits in the total it sets (with one permit held, setting 5 leaves 4
 * free), and add and drain act on the free permits only, as Redisson's do.
 *
 * Waiting.  An acquire waits on the same engine as the locks: it wakes on
 * the channel's messages, on a (re)confirmed subscription, and, for
 * expirable permits, when the first held permit's lease runs out; it
 * never polls.  An acquire whose answer is lost (a connection dropped, a
 * command timeout) is not a lost permit: the client voids the attempt on
 * the server and gives back whatever it took, and the wait goes on.  A
 * grant that lands after its acquire was cancelled goes back the same
 * way, retried on every new connection until the server confirms it.  To
 * tell what an unanswered plain acquire took, each attempt records it in
 * "hilock_sem_record:{NAME}:<attempt id>" (at most ten minutes), until
 * the client has the answer or, on the handle that took them, until the
 * permits' release; an expirable one is its permit in "{NAME}:timeout".
 *
 * Fairness.  Among the waiters of one handle, first come first served:
 * only the oldest waiter asks the server by itself, so a waiter for many
 * permits is never passed by later waiters for fewer; a grant that leaves
 * permits free lets as many waiters behind it ask at once.  Across
 * handles and clients the server grants to whoever asks when enough
 * permits are free.
 *
 * Sync calls block the calling thread and must not run on any thread
 * running a loop of the library: the client's own, or inside a callback
 * of another client (HILOCK_EDEADLK).  Errors every call may return
 * besides those it lists: HILOCK_EINVAL (NULL handle), HILOCK_EIO,
 * HILOCK_ETIMEDOUT (for a call that is one request: it was never sent,
 * and never runs), HILOCK_EINDOUBT (it was sent and its answer did not
 * come in time: it may have taken effect; a plain release goes on being
 * sent until the server answers, and gives its permits back once, so it
 * is not to be called again), HILOCK_ECLOSED (client or handle closed),
 * HILOCK_EREDIS (the name holds another type of value, or a count would
 * overflow), HILOCK_EPROTO (the name holds a string that is no count of
 * permits, not a decimal 64-bit integer as Redis's INCR keeps one, such
 * as "5.5": neither hilock nor Redisson wrote it; the detail quotes it,
 * and the call changed nothing), HILOCK_EPERM (the server's ACL refuses a
 * command), HILOCK_EREADONLY (the server is a replica; under Sentinel
 * or on a cluster a release, set, add or drain is first made again on
 * the master, as a lock's release is, see lock.h; an acquire waits as
 * its wait allows), HILOCK_EFULL
 * (max_pending operations unfinished),
 * HILOCK_ENOMEM.  Counts are read exactly, beyond 2^53 too.
 *
 * Replicas.  Under a replica acknowledgement policy (see
 * hilock_options_set_replica_ack) every write waits for the replicas the
 * policy names, as a lock's does: an acquire whose grant they do not
 * acknowledge gives it back and tries again within its wait, then fails
 * with HILOCK_ENOACK; a release they do not acknowledge stands (it gave
 * its permits back on the master) and returns HILOCK_OK, as a lock's
 * release does; try_set, set, add and drain return HILOCK_ENOACK: the
 * change was made on the master, and a failover before the replicas have
 * it may undo it.  It is not to be made again on that account.
 *
 * Async calls: the callback contract of client.h.  An error returned
 * means the callback never runs; HILOCK_OK means it runs exactly once on
 * the loop thread, also when the handle is destroyed first
 * (HILOCK_ECANCELED) or the client closes (HILOCK_ECLOSED).  Its status
 * and value are what the sync twin returns and writes. */
#ifndef HILOCK_SEMAPHORE_H
#define HILOCK_SEMAPHORE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "client.h"
#include "export.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct hilock_semaphore hilock_semaphore;
typedef struct hilock_permit_semaphore hilock_permit_semaphore;

/* The most permits one call names: 2^53 - 1, the counts the server's
 * scripts compare exactly. */
#define HILOCK_MAX_PERMITS INT64_C(9007199254740991)

/* Room for a permit id and its NUL: "<client id>:<number>". */
#define HILOCK_PERMIT_ID_MAX 64

/* Make a handle for the semaphore `name` (a C string; the _n twins take
 * a binary-safe name and its length; 1..HILOCK_MAX_NAME_LEN bytes,
 * copied).  No round trip.  Any thread.  A semaphore has no permits
 * until one is set (hilock_semaphore_try_set or _set): an acquire of a
 * semaphore that was never set waits, and its HILOCK_EBUSY says so.
 * @return HILOCK_OK
 * @return HILOCK_EINVAL  NULL argument, empty or overlong name
 * @return HILOCK_ENOMEM
 * @return HILOCK_ECLOSED the client is closed */
HILOCK_API int hilock_semaphore_create(hilock_semaphore **out,
                                       hilock_client *client,
                                       const char *name);
HILOCK_API int hilock_semaphore_create_n(hilock_semaphore **out,
                                         hilock_client *client,
                                         const char *name, size_t name_len);
/* The same for a semaphore of expirable permits. */
HILOCK_API int hilock_permit_semaphore_create(hilock_permit_semaphore **out,
                                              hilock_client *client,
                                              const char *name);
HILOCK_API int hilock_permit_semaphore_create_n(hilock_permit_semaphore **out,
                                                hilock_client *client,
                                                const char *name,
                                                size_t name_len);

/* Free a handle.  Pending acquires complete with HILOCK_ECANCELED (a
 * one-request call in flight completes with its answer); permits still
 * held are no longer renewed (they come back within their lease, at most
 * a watchdog timeout for watchdog-kept ones).  Any thread, also inside
 * this handle's callbacks.
 * @return HILOCK_OK
 * @return HILOCK_EINVAL  NULL
 * @return HILOCK_ECLOSED the handle was destroyed already */
HILOCK_API int hilock_semaphore_destroy(hilock_semaphore *sem);
/* The same for a permit semaphore. */
HILOCK_API int hilock_permit_semaphore_destroy(hilock_permit_semaphore *ps);

/* The handle of ps for the calls on the count (try_set, set, add, drain,
 * available, and their async forms), owned by ps and valid until ps is
 * destroyed.  The plain acquire and release refuse it (HILOCK_EINVAL).
 * NULL for NULL. */
HILOCK_API hilock_semaphore *
hilock_permit_semaphore_base(hilock_permit_semaphore *ps);

/* ---- plain semaphores ------------------------------------------------ */

/* Take `permits` permits at once, waiting at most wait_ms (0: a single
 * try; HILOCK_WAIT_FOREVER).
 * @return HILOCK_OK      taken
 * @return HILOCK_EBUSY   not enough permits were free during the wait;
 *                        the detail says so, and says when the semaphore
 *                        was never set (no count at the name)
 * @return HILOCK_EINVAL  permits out of range, bad wait_ms, the handle of
 *                        a permit semaphore, or on a cluster a name whose
 *                        keys cannot share a slot */
HILOCK_API int hilock_semaphore_try_acquire(hilock_semaphore *sem,
                                            int64_t permits,
                                            int64_t wait_ms);
/* Give back `permits` permits (any client may; nothing checks who took
 * them, as in Redisson).
 * @return HILOCK_OK
 * @return HILOCK_EINVAL  permits out of range, or the handle of a permit
 *                        semaphore */
HILOCK_API int hilock_semaphore_release(hilock_semaphore *sem,
                                        int64_t permits);

/* ---- both kinds ------------------------------------------------------- */

/* Set the count to `permits` when the semaphore does not exist yet
 * (trySetPermits); *set (may be NULL) says whether it did.
 * @return HILOCK_OK, HILOCK_EINVAL (permits out of range) */
HILOCK_API int hilock_semaphore_try_set(hilock_semaphore *sem,
                                        int64_t permits, bool *set);
/* Set the semaphore to `permits` whatever it was (setPermits): on a
 * plain semaphore the free count; on an expirable one the total of free
 * and held permits, so the free count becomes `permits` less the permits
 * held.  The new count is published unless an expirable semaphore's
 * total was `permits` already.
 * @return HILOCK_OK, HILOCK_EINVAL (permits out of range) */
HILOCK_API int hilock_semaphore_set(hilock_semaphore *sem, int64_t permits);
/* Add `permits` (negative: take away) to the free count; *count (may be
 * NULL) receives the new count.  As Redisson's addPermits, a plain
 * semaphore publishes the new count; an expirable one publishes the
 * number added, and nothing when `permits` is negative.
 * @return HILOCK_OK, HILOCK_EINVAL (permits 0, or beyond
 *         +-HILOCK_MAX_PERMITS) */
HILOCK_API int hilock_semaphore_add(hilock_semaphore *sem, int64_t permits,
                                    int64_t *count);
/* Take every free permit; *drained (may be NULL) receives how many.
 * @return HILOCK_OK */
HILOCK_API int hilock_semaphore_drain(hilock_semaphore *sem,
                                      int64_t *drained);
/* The number of free permits (0 when the semaphore does not exist); an
 * expirable semaphore first takes back expired permits.
 * @return HILOCK_OK */
HILOCK_API int hilock_semaphore_available(hilock_semaphore *sem,
                                          int64_t *available);

/* ---- expirable permits ------------------------------------------------ */

/* Take one permit, waiting at most wait_ms, with a lease of lease_ms
 * (HILOCK_LEASE_WATCHDOG: renewed until release; or
 * 1..HILOCK_MAX_LEASE_MS).  id receives the permit's id.
 * @return HILOCK_OK      taken
 * @return HILOCK_EBUSY   no permit was free during the wait (the detail
 *                        says when the semaphore was never set)
 * @return HILOCK_EINVAL  NULL id, bad wait_ms or lease_ms, or on a
 *                        cluster a name whose keys cannot share a slot */
HILOCK_API int hilock_permit_acquire(hilock_permit_semaphore *ps,
                                     int64_t wait_ms, int64_t lease_ms,
                                     char id[HILOCK_PERMIT_ID_MAX]);
/* Give a permit back by its id (one taken through any handle or client).
 * @return HILOCK_OK
 * @return HILOCK_ELEASELOST the permit was taken through this handle and
 *                        its lease ran out or was lost before the release
 *                        (counted back already, or now)
 * @return HILOCK_ENOTOWNER no such permit is held
 * @return HILOCK_EINVAL  NULL, empty or overlong id */
HILOCK_API int hilock_permit_release(hilock_permit_semaphore *ps,
                                     const char *id);

/* Told once, on the loop thread, when a permit's lease is lost (its
 * renewal found it gone or expired, or no renewal was confirmed in time).
 * The id stays valid during the call only. */
typedef void hilock_permit_lost_cb(hilock_permit_semaphore *ps,
                                   const char *id, void *user_data);
/* Set (cb NULL: clear) the handle's lost callback.  Any thread; it
 * takes effect before the call returns, except on the loop thread of
 * another client, where it is handed to this client's loop and returns
 * at once.
 * @return HILOCK_OK, HILOCK_EINVAL, HILOCK_ECLOSED
 * @return HILOCK_ENOMEM  on another client's loop thread: no memory to
 *                        hand the setting over (nothing changed) */
HILOCK_API int
hilock_permit_semaphore_set_lost_callback(hilock_permit_semaphore *ps,
                                          hilock_permit_lost_cb *cb,
                                          void *user_data);

/* ---- async ------------------------------------------------------------
 * value: the count for add and available, the number drained, 1/0 for
 * try_set, 0 otherwise (an acquire's and a release's too: the count is
 * available's to tell). */
typedef void hilock_semaphore_cb(hilock_semaphore *sem, int status,
                                 int64_t value, void *user_data);
/* id: the permit of hilock_permit_acquire_async when status is
 * HILOCK_OK, else NULL (valid during the call only). */
typedef void hilock_permit_cb(hilock_permit_semaphore *ps, int status,
                              const char *id, void *user_data);

/* op_id (may be NULL) receives the acquire's id, for
 * hilock_semaphore_cancel (hilock_permit_cancel for a permit's). */
HILOCK_API int hilock_semaphore_try_acquire_async(hilock_semaphore *sem,
                                                  int64_t permits,
                                                  int64_t wait_ms,
                                                  hilock_semaphore_cb *cb,
                                                  void *user_data,
                                                  uint64_t *op_id);
HILOCK_API int hilock_semaphore_release_async(hilock_semaphore *sem,
                                              int64_t permits,
                                              hilock_semaphore_cb *cb,
                                              void *user_data);
HILOCK_API int hilock_semaphore_try_set_async(hilock_semaphore *sem,
                                              int64_t permits,
                                              hilock_semaphore_cb *cb,
                                              void *user_data);
HILOCK_API int hilock_semaphore_set_async(hilock_semaphore *sem,
                                          int64_t permits,
                                          hilock_semaphore_cb *cb,
                                          void *user_data);
HILOCK_API int hilock_semaphore_add_async(hilock_semaphore *sem,
                                          int64_t permits,
                                          hilock_semaphore_cb *cb,
                                          void *user_data);
HILOCK_API int hilock_semaphore_drain_async(hilock_semaphore *sem,
                                            hilock_semaphore_cb *cb,
                                            void *user_data);
HILOCK_API int hilock_semaphore_available_async(hilock_semaphore *sem,
                                                hilock_semaphore_cb *cb,
                                                void *user_data);
HILOCK_API int hilock_permit_acquire_async(hilock_permit_semaphore *ps,
                                           int64_t wait_ms, int64_t lease_ms,
                                           hilock_permit_cb *cb,
                                           void *user_data, uint64_t *op_id);

/* Give up a pending acquire by its id: its callback runs with
 * HILOCK_ECANCELED, and permits granted to it meanwhile go back.  Any
 * thread.
 * @return HILOCK_OK        the acquire ends
 * @return HILOCK_ENOTFOUND no pending acquire of this handle has that id
 * @return HILOCK_EINVAL    NULL handle
 * @return HILOCK_ECLOSED   the client or the handle is closed */
HILOCK_API int hilock_semaphore_cancel(hilock_semaphore *sem,
                                       uint64_t op_id);
HILOCK_API int hilock_permit_cancel(hilock_permit_semaphore *ps,
                                    uint64_t op_id);
HILOCK_API int hilock_permit_release_async(hilock_permit_semaphore *ps,
                                           const char *id,
                                           hilock_permit_cb *cb,
                                           void *user_data);

#ifdef __cplusplus
}
#endif

#endif
