/* Reentrant distributed lock, Redisson-compatible.
 *
 * A lock handle names one lock on the client's server.  Many threads may
 * share a handle: each sync call acts for the calling thread (its owner id
 * is hilock_thread_owner()), each async call for the owner id it is given.
 * An owner may take the lock again while holding it (reentrancy); it is
 * free again when the owner released it as often as it took it.
 *
 * In Redis the lock is a hash at the lock's name, with one field
 * "<client id>:<owner id>" holding the hold count and a PEXPIRE lease, and
 * release publishes "0" on "redisson_lock__channel:{NAME}", exactly as
 * Redisson's RLock does, so Java and C services can share locks.
 *
 * Leases.  With lease_ms = HILOCK_LEASE_WATCHDOG the client's watchdog
 * keeps the lease alive (watchdog timeout, renewed every third of it)
 * until release; with an explicit lease the lock expires after lease_ms
 * unless released first.  Either way the client keeps a local deadline on
 * the monotonic clock, and a lease that stops being confirmed (the key was
 * deleted behind the holder's back, the server did not answer in time) is
 * reported lost: through the lost callback, hilock_lock_lease_lost(), and
 * HILOCK_ELEASELOST from the next release.
 *
 * Callback contract as in client.h: an async call that returns an error
 * never calls back; one that returns HILOCK_OK calls back exactly once on
 * the loop thread, also when the lock or client is destroyed or closed
 * first (HILOCK_ECANCELED / HILOCK_ECLOSED). */
#ifndef HILOCK_LOCK_H
#define HILOCK_LOCK_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "client.h"
#include "export.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct hilock_lock hilock_lock;

/* wait_ms: 0 means one attempt, HILOCK_WAIT_FOREVER waits until acquired. */
#define HILOCK_WAIT_FOREVER (-1)
/* lease_ms: the watchdog keeps the lease until release. */
#define HILOCK_LEASE_WATCHDOG 0
/* The longest explicit lease, in ms (about 31 years).  A longer lease_ms
 * is refused with HILOCK_EINVAL ("too large"), never clamped. */
#define HILOCK_MAX_LEASE_MS INT64_C(1000000000000)
/* Longest lock name in bytes. */
#define HILOCK_MAX_NAME_LEN 65536

/* Make a handle for the reentrant lock `name`, a C string of
 * 1..HILOCK_MAX_NAME_LEN bytes (copied).  No server round trip.  Any
 * thread.  Every create function of the library takes a C string, and
 * has a twin ending in _n that takes a binary-safe name and its length.
 * @return HILOCK_OK
 * @return HILOCK_EINVAL  NULL argument, empty or overlong name
 * @return HILOCK_ENOMEM
 * @return HILOCK_ECLOSED the client is closed */
HILOCK_API int hilock_lock_create(hilock_lock **out, hilock_client *client,
                                  const char *name);
HILOCK_API int hilock_lock_create_n(hilock_lock **out, hilock_client *client,
                                    const char *name, size_t name_len);

/* Free a handle.  Pending acquires complete with HILOCK_ECANCELED; leases
 * still held are no longer renewed (they expire on the server within the
 * watchdog timeout; release first to free the lock at once).  Any thread
 * except inside one of this lock's callbacks on the loop thread, where it
 * is deferred until the callback returns.  On the lock's loop thread and
 * on other threads it has taken effect when it returns (elsewhere it
 * waits for the lock's loop thread, never for a server); on the loop
 * thread of another client (inside any callback of the library) it never
 * waits: the teardown is handed to the lock's loop, which does it soon
 * after (the handle is unusable from the moment this returns).  A second
 * destroy of the same handle returns HILOCK_ECLOSED, also with new handles
 * made since, until 64 more handles have been freed (see
 * hilock_client_destroy).
 * @return HILOCK_OK, HILOCK_EINVAL (NULL), HILOCK_ECLOSED
 * @return HILOCK_ENOMEM  only on the loop thread of another client, with
 *                        no memory to hand the teardown over: nothing was
 *                        done, the handle is still usable */
HILOCK_API int hilock_lock_destroy(hilock_lock *lock);

/* The name the handle was made with, and its length. */
HILOCK_API const char *hilock_lock_name(const hilock_lock *lock,
                                        size_t *name_len);

/* The owner id sync calls use for the calling thread: unique within the
 * process, never 0.  Any thread. */
HILOCK_API uint64_t hilock_thread_owner(void);

/* ---- sync API: the owner is the calling thread ------------------------
 * Each blocks the calling thread and must not run on the client's loop
 * thread, nor on any thread running a loop of the library, such as
 * inside a callback of another client (HILOCK_EDEADLK).  Connection
 * errors: HILOCK_EIO, HILOCK_ETIMEDOUT,
 * HILOCK_ECLOSED, HILOCK_EREDIS (the name holds another type of value),
 * HILOCK_EPERM (the server's ACL does not allow the user a command the
 * call needs, such as EVALSHA; the detail holds the server's words),
 * HILOCK_EREADONLY (the server is a replica, named by the URL or demoted
 * by a failover; a cluster or Sentinel client asks where the master is
 * now, and the call may be made again.  Such a client makes a release
 * or a force release again itself, every 50 ms for as long as the
 * command timeout from its first refusal, and says this only when no
 * master took it by then: the hold is still held).
 * Each may also return HILOCK_EFULL at once, starting nothing, while the
 * client has max_pending operations unfinished
 * (hilock_options_set_max_pending).
 * A call whose answer does not come in time (the client's loop thread
 * did not answer: it was busy, or a caller's loop was not run; or the
 * server did not answer within the command timeout) leaks nothing and
 * says what became of it:
 * - A release says HILOCK_EINDOUBT when its request was sent (or may have
 *   been) and no answer came: it counts as done, do not release again for
 *   it; and HILOCK_ETIMEDOUT only when it was withdrawn unsent: it never
 *   runs, and releasing again is right (see hilock_lock_release).
 * - The force release and the queries say HILOCK_ETIMEDOUT when the loop
 *   thread did not answer in time and nothing was sent (it never runs),
 *   HILOCK_EINDOUBT when it had been sent; when the server did not answer
 *   in time they say HILOCK_ETIMEDOUT or HILOCK_EIO, and a force release
 *   may then have run. */

/* Take the lock, waiting as long as it takes, with the watchdog.  Under
 * a replica acknowledgement policy it keeps trying while the replicas do
 * not acknowledge; it never returns HILOCK_ENOACK. */
HILOCK_API int hilock_lock_acquire(hilock_lock *lock);

/* Take the lock, waiting at most wait_ms (0: a single attempt;
 * HILOCK_WAIT_FOREVER, as is any wait too long to represent), with a lease
 * of lease_ms (HILOCK_LEASE_WATCHDOG or 1..HILOCK_MAX_LEASE_MS).
 * @return HILOCK_OK      acquired (or acquired again: the hold count grew)
 * @return HILOCK_EBUSY   another owner held it for the whole wait
 * @return HILOCK_ENOACK  under a replica acknowledgement policy
 *                        (hilock_options_set_replica_ack), the master
 *                        granted it but too few replicas acknowledged the
 *                        grant before the wait ran out (or, with wait 0,
 *                        in the one attempt); each such grant was given
 *                        back, and nothing is held.  The detail says how
 *                        many of how many replicas answered.
 * @return HILOCK_EINVAL  bad wait_ms (negative other than
 *                        HILOCK_WAIT_FOREVER) or lease_ms (negative, or
 *                        above HILOCK_MAX_LEASE_MS: "too large"); on a
 *                        Redis Cluster, a name with braces but no hash
 *                        tag of its own ("{}x", "{x", "x}y"), whose keys
 *                        could not share a slot
 * @return HILOCK_EPROTO  the owner's field in the lock's hash holds no
 *                        hold count (a decimal integer from 1 to
 *                        2^53 - 2), which no lock writes: the detail
 *                        quotes it, and nothing was taken
 * and the connection errors above. */
HILOCK_API int hilock_lock_try_acquire(hilock_lock *lock, int64_t wait_ms,
                                       int64_t lease_ms);

/* Acquire flags, for hilock_lock_acquire_as and hilock_lock_acquire_async:
 * HILOCK_ACQUIRE_FENCED draws a fencing token with the grant (as
 * hilock_lock_acquire_fenced describes), at the cost of one more command
 * in the acquire's script. */
#define HILOCK_ACQUIRE_FENCED 1u

/* As hilock_lock_try_acquire, and also returns a fencing token: a number
 * from the counter "redisson_lock_token:{NAME}" that is strictly greater
 * than every token of an earlier hold of this name, also when the server
 * lost the counter (a draw is at least the server's clock in
 * microseconds), as long as the server's clock does not step back past
 * the last token issued.  Reentrant acquires by the same owner return the
 * token of the hold they join.  Hand the token to the resource you
 * protect and have it refuse smaller ones.  Across a failover see the
 * docs/guide/fencing.md.  A counter some other program set is read exactly,
 * past 2^53 too.  Statuses as for hilock_lock_try_acquire, HILOCK_ENOACK
 * included, and
 * @return HILOCK_EPROTO  the counter holds a string that is no decimal
 *                        64-bit integer, which neither hilock nor
 *                        Redisson writes: the detail quotes it, and
 *                        nothing was taken */
HILOCK_API int hilock_lock_acquire_fenced(hilock_lock *lock, int64_t wait_ms,
                                          int64_t lease_ms, uint64_t *token);

/* Release one hold of the calling thread.  A release that frees the lock
 * publishes the wake-up of its waiters; when the server's ACL refuses the
 * user that PUBLISH (no PUBLISH, or no permission for the channel), the
 * lock is freed all the same and the release returns HILOCK_OK: the
 * refusal is counted in hilock_client_stats.publishes_refused, and
 * waiters on other clients take the lock at their next retry (at most the
 * lease they saw left) instead of at once.
 * Under a replica acknowledgement policy a release whose replicas did
 * not acknowledge it still returns HILOCK_OK: the lock is free on the
 * master (a failover before the replicas have it brings the hold back
 * there until its lease runs out; see
 * docs/guide/replicas-and-sentinel.md).
 * @return HILOCK_OK          released (the lock is free if it was the last)
 * @return HILOCK_ENOTOWNER   the calling thread holds no hold of this lock
 * @return HILOCK_ELEASELOST  the lease had been lost; nothing was held
 * @return HILOCK_EINDOUBT    the release was sent but its answer did not
 *                            come (no answer within the command timeout,
 *                            or the connection was lost after it was
 *                            written, or the loop thread did not answer in
 *                            time): it counts as done.  The client dropped
 *                            the hold from its count and brings the
 *                            server's count to the same in the background,
 *                            whether the server ran it or runs it later.
 *                            Do not release again for it: that would drop
 *                            another hold
 * @return HILOCK_ETIMEDOUT   the loop thread did not answer in time, and
 *                            the release was withdrawn before anything of
 *                            it was sent: it never runs, the hold stands,
 *                            and releasing again is right
 * and the connection errors above. */
HILOCK_API int hilock_lock_release(hilock_lock *lock);

/* Delete the lock whoever holds it and wake its waiters.  *deleted (may be
 * NULL) tells whether there was anything to delete.  A wake-up the ACL
 * refuses is counted as for hilock_lock_release.
 * @return HILOCK_OK
 * @return HILOCK_ETIMEDOUT  withdrawn before it was sent: it never runs
 * @return HILOCK_EINDOUBT   the loop thread did not answer in time after
 *                           it was sent: the lock may be deleted, or may
 *                           still be
 * and the connection errors above. */
HILOCK_API int hilock_lock_force_release(hilock_lock *lock, bool *deleted);

/* Whether anyone holds the lock now. */
HILOCK_API int hilock_lock_is_locked(hilock_lock *lock, bool *locked);

/* The calling thread's hold count as the server has it (0: not held).
 * HILOCK_EPROTO when the thread's field holds no decimal 64-bit integer,
 * which no lock writes (the detail quotes it). */
HILOCK_API int hilock_lock_hold_count(hilock_lock *lock, int64_t *count);

/* Whether the calling thread holds the lock, as the server has it. */
HILOCK_API int hilock_lock_is_held_by_me(hilock_lock *lock, bool *held);

/* Remaining lease of the lock in ms; -1 when it is not locked. */
HILOCK_API int hilock_lock_remaining_ttl(hilock_lock *lock, int64_t *ttl_ms);

/* Whether the calling thread's lease on this lock was lost (until it
 * releases or acquires again).  A reentrant acquire whose answer shows
 * the thread's older holds gone reports them lost before it returns: this
 * stays true until the release that is theirs, which returns
 * HILOCK_ELEASELOST.  No round trip. */
HILOCK_API int hilock_lock_lease_lost(hilock_lock *lock, bool *lost);

/* Until when the calling thread's hold is known to stand, without asking
 * the server: the end of its lease as the client counts it, from the
 * grant or the last confirmed renewal, less the margin for clock drift,
 * in ms on CLOCK_MONOTONIC (as clock_gettime gives it).  Work that must
 * end under the lock checks it is well before this.  0 when the thread
 * holds nothing here, or its lease was lost.  No round trip: the loop
 * thread is asked, as for hilock_lock_lease_lost.
 * @return HILOCK_OK
 * @return HILOCK_EINVAL   NULL argument
 * @return HILOCK_ECLOSED  the client is closed
 * @return HILOCK_EDEADLK  called on the loop thread of another client */
HILOCK_API int hilock_lock_valid_until(hilock_lock *lock, int64_t *until_ms);

/* As hilock_lock_valid_until, for owner. */
HILOCK_API int hilock_lock_owner_valid_until(hilock_lock *lock,
                                             uint64_t owner,
                                             int64_t *until_ms);

/* The blocking acquire and release for the owner id given rather than
 * the calling thread's, so that a hold taken on one thread may be
 * released on another: the async API's arguments, blocking.  flags as
 * for hilock_lock_acquire_async; with HILOCK_ACQUIRE_FENCED *token (may
 * be NULL) receives the fencing token, else 0.  As
 * hilock_lock_acquire_fenced and hilock_lock_release, with the same
 * errors, and HILOCK_EINVAL for owner 0 or unknown flags.  Use owner ids
 * of your own making or of hilock_thread_owner(); two owners that share
 * an id share its holds. */
HILOCK_API int hilock_lock_acquire_as(hilock_lock *lock, uint64_t owner,
                                      int64_t wait_ms, int64_t lease_ms,
                                      unsigned flags, uint64_t *token);
HILOCK_API int hilock_lock_release_as(hilock_lock *lock, uint64_t owner);

/* ---- async API: explicit owner ids, callbacks on the loop thread ------ */

typedef struct hilock_acquired {
    uint64_t owner;
    int64_t hold_count; /* after this acquire */
    uint64_t token;     /* with HILOCK_ACQUIRE_FENCED, else 0 */
} hilock_acquired;

/* acquired is set when status is HILOCK_OK, else NULL. */
typedef void hilock_acquire_cb(hilock_lock *lock, int status,
                               const hilock_acquired *acquired,
                               void *user_data);

/* Acquire for owner (any non-zero id the application chooses; the same id
 * on the same lock is the same owner).  Statuses as for
 * hilock_lock_try_acquire (HILOCK_ENOACK included; with HILOCK_WAIT_FOREVER
 * it is never given), plus HILOCK_ECANCELED.  *op_id (may be NULL)
 * receives an id for hilock_lock_cancel().  Any thread; never blocks.
 * @return HILOCK_OK, HILOCK_ENOMEM, HILOCK_ECLOSED
 * @return HILOCK_EINVAL NULL lock or callback, owner 0, unknown flags, or
 *         wait_ms or lease_ms as for hilock_lock_try_acquire
 * @return HILOCK_EFULL  max_pending operations of the client are
 *         unfinished; nothing was started */
HILOCK_API int hilock_lock_acquire_async(hilock_lock *lock, uint64_t owner,
                                         int64_t wait_ms, int64_t lease_ms,
                                         unsigned flags,
                                         hilock_acquire_cb *cb,
                                         void *user_data, uint64_t *op_id);

/* Cancel a pending acquire: its callback fires with HILOCK_ECANCELED (a
 * hold that the server granted meanwhile is given back).  The id is
 * found in constant time.  Never allocates.  Any thread:
 * - on the lock's loop thread it takes effect before it returns;
 * - on the loop thread of another client (inside any callback of the
 *   library) it never waits: the cancel is handed to the lock's loop and
 *   this returns at once.  The callback then fires later, on the lock's
 *   loop, with HILOCK_ECANCELED, or with the acquire's own outcome when
 *   that came first (a grant that came first is the caller's, as for any
 *   acquire that completed before its cancel);
 * - on any other thread it waits until the lock's loop thread has looked
 *   the acquire up (never for a server), and the callback may then run
 *   there before this returns.
 * @return HILOCK_OK, HILOCK_EINVAL, HILOCK_ECLOSED,
 * @return HILOCK_ENOTFOUND  no such pending acquire of this lock (already
 *                           completed) */
HILOCK_API int hilock_lock_cancel(hilock_lock *lock, uint64_t op_id);

/* Completion of release, force release and queries: value is the hold
 * count left (release), 1/0 deleted (force release), 1/0 (is_locked,
 * held by owner), the count (hold_count) or the ttl in ms (ttl). */
typedef void hilock_lock_cb(hilock_lock *lock, int status, int64_t value,
                            void *user_data);

/* Release one hold of owner; statuses as hilock_lock_release.  These
 * and the queries below return HILOCK_OK (the callback will fire exactly
 * once), HILOCK_EINVAL (NULL lock or callback), HILOCK_ENOMEM,
 * HILOCK_ECLOSED, or HILOCK_EFULL (max_pending operations of the client
 * are unfinished; nothing was started).  Any thread; never block. */
HILOCK_API int hilock_lock_release_async(hilock_lock *lock, uint64_t owner,
                                         hilock_lock_cb *cb,
                                         void *user_data);
HILOCK_API int hilock_lock_force_release_async(hilock_lock *lock,
                                               hilock_lock_cb *cb,
                                               void *user_data);
HILOCK_API int hilock_lock_is_locked_async(hilock_lock *lock,
                                           hilock_lock_cb *cb,
                                           void *user_data);
HILOCK_API int hilock_lock_hold_count_async(hilock_lock *lock, uint64_t owner,
                                            hilock_lock_cb *cb,
                                            void *user_data);
HILOCK_API int hilock_lock_remaining_ttl_async(hilock_lock *lock,
                                               hilock_lock_cb *cb,
                                               void *user_data);

/* ---- status: everything the server keeps of a lock --------------------
 * One read of the lock's keys, taken at one instant (a single script on
 * the server), for any kind of lock handle.  Owner ids are the server's
 * field names, "<client id>:<owner id>": bytes, NUL-terminated, that may
 * hold other bytes when another program wrote them. */

typedef struct hilock_lock_owner {
    const char *owner;
    size_t owner_len;
    int64_t count;         /* holds; 0 for a waiter, and for a holder
                            * whose count no lock wrote (not a decimal
                            * 64-bit integer) */
    bool writer;           /* a read-write lock's writer among holders */
    /* A waiter: whether its place has a time on the server, and how long
     * it has left in ms (negative: run out, to be dropped by the next
     * attempt).  A place scored 2^53 ms or more ahead (+inf too),
     * which never runs out, has no time.  false and 0 elsewhere. */
    bool expires;
    int64_t expires_in_ms;
} hilock_lock_owner;

typedef struct hilock_lock_status {
    /* "reentrant", "fair" or "read-write" (for both sides of a read-write
     * lock): the kind of the handle, not a guess from the data. */
    const char *kind;
    /* The server holds data only this kind writes: a read-write lock's
     * mode or waiting writers, a fair lock's line or places.  Never for a
     * reentrant lock, whose hash any kind's looks like; a tool that must
     * tell the kind of a name asks the other kinds first. */
    bool kind_seen;
    bool locked;           /* anyone holds it */
    int64_t ttl_ms;        /* the lease left, -1 when free or unexpiring */
    /* Who holds it, in the server's order: every owner with its count.
     * For a read-write lock, each reader and the writer (whose entry has
     * writer set; an owner that reads and writes is there twice). */
    size_t holders_len;
    const hilock_lock_owner *holders;
    /* Who waits with a place on the server, first first, with the time
     * each place has left: a fair lock's line of owners; the line of
     * clients (client ids, not owners: a client's waiters take turns
     * among themselves) of a reentrant lock and of a read-write lock's
     * writers.  Redisson's waiters keep no place there (see
     * subscribers). */
    size_t waiters_len;
    const hilock_lock_owner *waiters;
    /* Read-write lock: "read", "write", or NULL when free; its readers
     * and its writer (NULL when none).  NULL, 0 and NULL elsewhere. */
    const char *mode;
    size_t readers_len;
    const hilock_lock_owner *readers;
    const hilock_lock_owner *writer;
    /* Reentrant lock: the clients listening on its release channel, or
     * its sharded twin on a cluster (one per waiting client, not per
     * waiting thread; on a cluster, those of the node that has the
     * lock's slot); -1 for other kinds. */
    int64_t subscribers;
    /* Reentrant and fair lock: the lock delay left in ms while the lock
     * is closed after a hold ended without a release, and while a holder
     * whose client sets one holds it (hilock_options_set_lock_delay_ms);
     * -1 for a delay key without an expiry, which hilock never writes; 0
     * when there is none, and for other kinds.  Added at the end: the
     * library allocates the struct, so a program that knows only the
     * fields before it finds them where they were. */
    int64_t delay_ms;
} hilock_lock_status;

/* Read the lock's status into *out, to be freed with
 * hilock_lock_status_free.  Blocks; not on the loop thread.  *out is NULL
 * on error.
 * @return HILOCK_OK
 * @return HILOCK_EINVAL   NULL lock or out
 * @return HILOCK_EREDIS   the name (or one of the lock's keys) holds
 *                         another type of value: not a lock of this kind
 * @return HILOCK_EPROTO   the server's data is not in the lock's layout
 * @return HILOCK_ENOMEM
 * and the connection errors of the sync API above. */
HILOCK_API int hilock_lock_status_get(hilock_lock *lock,
                                      hilock_lock_status **out);

/* status is set when status is HILOCK_OK (else NULL), and is the
 * callback's: free it with hilock_lock_status_free. */
typedef void hilock_lock_status_cb(hilock_lock *lock, int status,
                                   hilock_lock_status *lock_status,
                                   void *user_data);

/* As hilock_lock_status_get, with the result given to cb on the loop
 * thread.  Any thread; never blocks.  Statuses in the callback as
 * hilock_lock_status_get, plus HILOCK_ECANCELED.
 * @return HILOCK_OK (cb fires exactly once), HILOCK_EINVAL (NULL lock or
 *         callback), HILOCK_ENOMEM, HILOCK_ECLOSED, HILOCK_EFULL */
HILOCK_API int hilock_lock_status_async(hilock_lock *lock,
                                        hilock_lock_status_cb *cb,
                                        void *user_data);

/* Free a status; NULL is fine.  Any thread. */
HILOCK_API void hilock_lock_status_free(hilock_lock_status *status);

/* Called on the loop thread when a lease of this lock is lost, with the
 * owner that held it; inside the callback hilock_last_error() says why
 * (the lease ran out unconfirmed, a renewal found the lock gone, a new
 * master lacks the hold, the server restarted).  NULL turns it off.  Any thread: away from loop
 * threads it waits until the lock's loop thread has taken the setting, so
 * once it returns the old callback is not called again (unless it is
 * running on the loop thread right now), and never allocates.  On the
 * loop thread of another client (inside any callback of the library) it
 * never waits: a copy of the setting is handed to the lock's loop, which
 * takes it soon after (the old callback may be called until then).
 * @return HILOCK_OK, HILOCK_EINVAL, HILOCK_ECLOSED
 * @return HILOCK_ENOMEM  only on the loop thread of another client:
 *                        nothing was changed */
typedef void hilock_lost_cb(hilock_lock *lock, uint64_t owner,
                            void *user_data);
HILOCK_API int hilock_lock_set_lost_callback(hilock_lock *lock,
                                             hilock_lost_cb *cb,
                                             void *user_data);

/* ---- asking a holder to give the lock up ---------------------------------
 *
 * Any client may ask whoever holds a lock to release it; nothing is taken
 * by force.  The holder hears the request through a callback of its own
 * and decides: release at once, finish first, or refuse.  A request is a
 * message, not a record: a holder that does not listen at the moment it
 * is sent (no callback set, a client of another library, a connection
 * being made again) never hears it, and the asker is told how many
 * listened.  Every kind of lock: reentrant, fair, and both sides of a
 * read-write lock, whose readers and writer are asked alike. */

/* The longest reason a request carries, in bytes. */
#define HILOCK_REQUEST_REASON_MAX 256

/* Called on the loop thread once for each owner of this handle that
 * holds the lock when a request arrives, with the asker's reason (not
 * NUL-terminated; reason_len may be 0).  The callback may release
 * (hilock_lock_release_async), or do nothing. */
typedef void hilock_release_request_cb(hilock_lock *lock, uint64_t owner,
                                       const char *reason, size_t reason_len,
                                       void *user_data);

/* Listen for requests to give this lock up while the handle holds it (from
 * each grant until its last hold is released or lost, the client
 * subscribes to the lock's request channel); NULL stops listening.  Any
 * thread, with the waiting rules of hilock_lock_set_lost_callback.
 * @return HILOCK_OK
 * @return HILOCK_EINVAL  NULL lock
 * @return HILOCK_ECLOSED the lock or its client is closed
 * @return HILOCK_ENOMEM  setting a callback on a handle that never had
 *                        one (its memory is allocated then), or on the
 *                        loop thread of another client: nothing was
 *                        changed */
HILOCK_API int hilock_lock_set_release_request_callback(
    hilock_lock *lock, hilock_release_request_cb *cb, void *user_data);

/* Ask whoever holds the lock to give it up, with a reason for its
 * callback (NULL: none).  *heard (may be NULL) is the number of the
 * holders' clients that listened, 0 when the holder does not listen, or
 * -1 when nobody holds the lock.  Blocks; not on the loop thread.
 * @return HILOCK_OK
 * @return HILOCK_EINVAL  NULL lock, or a reason over
 *                        HILOCK_REQUEST_REASON_MAX bytes
 * @return HILOCK_EPERM   the server's ACL refused the PUBLISH (the
 *                        detail quotes it)
 * @return HILOCK_EREDIS  the name holds another type of value
 * and the connection errors of the sync API above. */
HILOCK_API int hilock_lock_request_release(hilock_lock *lock,
                                           const char *reason,
                                           int64_t *heard);

/* As hilock_lock_request_release, with *heard as cb's value.  Any thread;
 * never blocks.  Returns as hilock_lock_release_async, plus
 * HILOCK_EINVAL for the arguments above; the callback's statuses are
 * those of hilock_lock_request_release, plus HILOCK_ECANCELED. */
HILOCK_API int hilock_lock_request_release_async(hilock_lock *lock,
                                                 const char *reason,
                                                 hilock_lock_cb *cb,
                                                 void *user_data);

/* Whether owner's lease on this lock was lost (until that owner releases
 * or acquires again; older holds found lost by a reentrant acquire until
 * the release that is theirs).  Loop thread only: elsewhere it cannot
 * look, and returns false, which reads as "not lost"; prefer
 * hilock_lock_owner_lost_get, which says so.  Kept for existing callers. */
HILOCK_API bool hilock_lock_owner_lost(hilock_lock *lock, uint64_t owner);

/* Whether owner's lease on this lock was lost (until that owner releases
 * or acquires again; older holds found lost by a reentrant acquire until
 * the release that is theirs), in *lost.  No round trip.  On the lock's loop thread
 * it reads at once and never blocks; on other threads it asks the loop
 * thread and blocks until it answers (never for a server).
 * @return HILOCK_OK       *lost is set
 * @return HILOCK_EINVAL   NULL lock or lost, or owner 0
 * @return HILOCK_ECLOSED  the lock or its client is closed
 * @return HILOCK_EDEADLK  called on the loop thread of another client
 *                         (inside any callback of the library)
 * @return HILOCK_ENOMEM, HILOCK_EFULL, HILOCK_ETIMEDOUT (the loop thread
 *         did not answer in time) */
HILOCK_API int hilock_lock_owner_lost_get(hilock_lock *lock, uint64_t owner,
                                          bool *lost);

#ifdef __cplusplus
}
#endif

#endif
