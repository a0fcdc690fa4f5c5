/* Multi-locks and RedLock.
 *
 * A multi-lock takes several locks as one: all of them or none.  Its
 * members are lock handles of any kinds on any clients (one server or
 * many).  Each attempt asks every member at once with a single try; when
 * not all of them grant, the ones that did are given back at once, and
 * the attempt is repeated after a random back-off until the wait runs out.
 * Every member keeps its lease with its own client's watchdog; the group
 * is lost as soon as one member is lost.
 *
 * A RedLock lock is a multi-lock that needs only a quorum: one reentrant
 * lock of the same name on each of N independent masters (N odd, >= 3),
 * held when at least N/2+1 of them granted and time is left.  It follows
 * the Redlock algorithm with the gaps its critiques point at closed:
 * - all N are asked at once, each with the per-node timeout
 *   (hilock_options_set_node_timeout_ms), and the outcome is decided as
 *   soon as a quorum said yes or can no longer say yes (the last attempt
 *   may wait for the rest to learn why not: see
 *   hilock_multilock_try_acquire);
 * - validity = lease - elapsed - (lease * 1% + 2 ms), elapsed measured on
 *   CLOCK_MONOTONIC from sending the attempt; the lock is held only with a
 *   quorum and a positive validity, otherwise every master is released at
 *   once and the attempt repeated after a random delay;
 * - each member's lease is renewed by the watchdog of its master's client
 *   and kept on a local monotonic deadline; once fewer than a quorum of
 *   members are still confirmed, the lock is lost and the holder is told;
 * - restart quarantine: a master that restarted (its run_id changed) or
 *   that has been up for less than the quarantine time
 *   (hilock_options_set_quarantine_ms) does not count toward a quorum, and
 *   a hold on it counts as lost, until the quarantine time has passed
 *   since the restart: a restarted master may have forgotten the keys it
 *   granted.  Set the quarantine at least as long as the longest lease.
 * RedLock gives no fencing token: see docs/internals/redlock.md for why none of the
 * obvious constructions is safe.
 *
 * Ownership and owners work as in lock.h: sync calls act for the calling
 * thread, async calls for the owner id they are given.  A group is
 * reentrant: an owner that holds it may acquire it again at once (no
 * round trip) and holds it until it released it as often; the hold keeps
 * the lease of its first acquire.  Callbacks run on
 * the loop thread of one of the members' clients (for RedLock, the
 * RedLock's own loop thread), exactly once. */
#ifndef HILOCK_MULTI_H
#define HILOCK_MULTI_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "client.h"
#include "export.h"
#include "lock.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct hilock_multilock hilock_multilock;
typedef struct hilock_redlock hilock_redlock;

/* Most members of one multi-lock. */
#define HILOCK_MAX_MEMBERS 64

/* What one member said to the last attempt of an acquire. */
typedef struct hilock_member_result {
    int status;          /* HILOCK_OK granted, HILOCK_EBUSY held by another,
                          * HILOCK_ECANCELED not answered when the outcome
                          * was decided, or the member's error */
    int64_t latency_us;  /* from sending to the answer; -1 when none came */
    bool quarantined;    /* RedLock: its master's vote did not count */
} hilock_member_result;

/* The outcome of an acquire, handed to its callback. */
typedef struct hilock_multi_outcome {
    uint64_t owner;
    int64_t validity_ms;   /* when acquired: time left of the lease after
                            * the attempt (see above); else 0 */
    size_t granted;        /* members that granted in the last attempt */
    size_t attempts;       /* attempts made */
    size_t n;              /* members */
    const hilock_member_result *members; /* n entries, valid during the
                                          * callback */
} hilock_multi_outcome;

/* Group n (1..HILOCK_MAX_MEMBERS) lock handles, all of them needed.  The
 * handles stay the caller's: they must outlive the group and must not be
 * taken or released directly while the group holds them.  A handle may
 * appear once.  Any thread; no round trip.
 * @return HILOCK_OK, HILOCK_EINVAL (NULL, n out of range, a repeated or
 *         closed handle), HILOCK_ENOMEM */
HILOCK_API int hilock_multilock_create(hilock_multilock **out,
                                       hilock_lock *const *locks, size_t n);

/* Free the group (not its members).  Pending acquires complete with
 * HILOCK_ECANCELED; holds are not released (they expire with their
 * leases).  Any thread except inside this group's callbacks; away from
 * loop threads it waits until each member's loop thread has let go of
 * the group (never for a server).  On any client's loop thread (inside
 * any callback of the library) it never waits: each member's loop lets
 * go of the group soon after, and the group's memory goes with the
 * last.  A second destroy returns HILOCK_ECLOSED.
 * @return HILOCK_OK, HILOCK_EINVAL, HILOCK_ECLOSED */
HILOCK_API int hilock_multilock_destroy(hilock_multilock *m);

/* ---- sync API: the owner is the calling thread ------------------------
 * Not on a member's loop thread, nor on any thread running a loop of the
 * library (HILOCK_EDEADLK). */

/* Take all members (or a quorum), waiting at most wait_ms
 * (HILOCK_WAIT_FOREVER; 0: one attempt), with lease_ms
 * (HILOCK_LEASE_WATCHDOG or > 0).  results (may be NULL) receives one
 * entry per member for the last attempt, each result_size bytes apart:
 * pass sizeof *results, so that a struct that grows in a later version
 * is filled as far as both know it (the rest zeroed).  validity_ms (may
 * be NULL) receives the validity left when acquired.
 * The outcome is that of the last attempt, the one that failed with no
 * wait left.  For RedLock, that attempt waits for the masters still
 * asked (at most the node timeout) when their answers decide between the
 * two below; a multi-lock's counts the answers in when it failed.
 * @return HILOCK_OK          acquired
 * @return HILOCK_EBUSY       another owner kept the group out until the
 *                            wait ran out: in the last attempt, members
 *                            held by others, with or without members that
 *                            failed, left too few to grant
 * @return HILOCK_ENOQUORUM   in the last attempt, the members that failed
 *                            (unreachable, timed out, closed, refused by
 *                            an error, quarantined, or granted without
 *                            the acknowledgement of its replicas:
 *                            HILOCK_ENOACK in its result, the grant given
 *                            back) were alone too many
 *                            for the group to be taken by any owner:
 *                            more than n - quorum (any one for a
 *                            multi-lock)
 * @return HILOCK_EEXPIRED    the members granted, but the lease had run
 *                            out by the time they had (validity <= 0)
 * @return HILOCK_EINVAL      results with a result_size below this
 *                            version's sizeof(hilock_member_result);
 *                            bad wait_ms or lease_ms: as for
 *                            hilock_lock_try_acquire (a lease above
 *                            HILOCK_MAX_LEASE_MS is "too large"), and a
 *                            lease too short to outlast its drift
 *                            margin, 1 % + 2 ms: 1..2 ms
 * @return HILOCK_ECLOSED, HILOCK_ENOMEM
 * @return HILOCK_EFULL       max_pending operations of the coordinator's
 *                            client are unfinished; nothing was started
 *                            (a member client that is full fails as that
 *                            member) */
HILOCK_API int hilock_multilock_try_acquire(hilock_multilock *m,
                                            int64_t wait_ms,
                                            int64_t lease_ms,
                                            hilock_member_result *results,
                                            size_t result_size,
                                            int64_t *validity_ms);

/* Take the group, waiting as long as it takes, with the watchdog's
 * lease: hilock_multilock_try_acquire(m, HILOCK_WAIT_FOREVER,
 * HILOCK_LEASE_WATCHDOG, NULL, NULL), as hilock_lock_acquire is for one
 * lock, with the same errors. */
HILOCK_API int hilock_multilock_acquire(hilock_multilock *m);

/* Give back every member the calling thread holds through the group.
 * @return HILOCK_OK, HILOCK_ENOTOWNER (the group is not held by it),
 * @return HILOCK_ELEASELOST  the group had been lost (what was still held
 *                            is released all the same)
 * @return HILOCK_EFULL  as for hilock_multilock_try_acquire
 * @return HILOCK_EINDOUBT  a member's release was sent without an answer
 *                          (as for hilock_lock_release), or the
 *                          coordinator's loop thread did not answer in
 *                          time after the release started: it counts as
 *                          done; do not release again for it
 * @return HILOCK_ETIMEDOUT the coordinator's loop thread did not answer
 *                          in time and the release was withdrawn before
 *                          it started: it never runs
 * and the first member error otherwise. */
HILOCK_API int hilock_multilock_release(hilock_multilock *m);

/* Whether the calling thread's hold of the group was lost.  No round
 * trip. */
HILOCK_API int hilock_multilock_lease_lost(hilock_multilock *m, bool *lost);

/* ---- async API -------------------------------------------------------- */

typedef void hilock_multi_acquire_cb(hilock_multilock *m, int status,
                                     const hilock_multi_outcome *outcome,
                                     void *user_data);
typedef void hilock_multi_cb(hilock_multilock *m, int status,
                             void *user_data);
typedef void hilock_multi_lost_cb(hilock_multilock *m, uint64_t owner,
                                  void *user_data);

/* As hilock_multilock_try_acquire for owner; statuses as there, plus
 * HILOCK_ECANCELED.  outcome is never NULL.  *op_id (may be NULL) names
 * the acquire for hilock_multilock_cancel.  Any thread; never blocks.
 * @return HILOCK_OK, HILOCK_EINVAL, HILOCK_ENOMEM, HILOCK_ECLOSED,
 *         HILOCK_EFULL (as for hilock_multilock_try_acquire) */
HILOCK_API int hilock_multilock_acquire_async(hilock_multilock *m,
                                              uint64_t owner, int64_t wait_ms,
                                              int64_t lease_ms,
                                              hilock_multi_acquire_cb *cb,
                                              void *user_data,
                                              uint64_t *op_id);

/* Release owner's hold; statuses as hilock_multilock_release.
 * @return HILOCK_OK, HILOCK_EINVAL, HILOCK_ENOMEM, HILOCK_ECLOSED,
 *         HILOCK_EFULL */
HILOCK_API int hilock_multilock_release_async(hilock_multilock *m,
                                              uint64_t owner,
                                              hilock_multi_cb *cb,
                                              void *user_data);

/* Cancel a pending acquire: it completes with HILOCK_ECANCELED and gives
 * back whatever was granted.  Any thread, as hilock_lock_cancel: on the
 * group's loop thread it takes effect before it returns; elsewhere it
 * waits until that loop thread has looked the acquire up (never for a
 * server), except on the loop thread of another client (inside any
 * callback of the library), where the cancel is handed over and this
 * returns HILOCK_OK at once, found or not.
 * @return HILOCK_OK, HILOCK_EINVAL, HILOCK_ECLOSED
 * @return HILOCK_ENOTFOUND  no such pending acquire of this group
 *                           (already completed)
 * @return HILOCK_ENOMEM     only on the loop thread of another client */
HILOCK_API int hilock_multilock_cancel(hilock_multilock *m, uint64_t op_id);

/* Called once per lost hold of the group, with the owner.  NULL turns it
 * off.  Any thread: away from loop threads it waits until the
 * coordinator's loop thread has taken the setting, so once it returns the
 * old callback is not called again, and never allocates.  On the loop
 * thread of another client (inside any callback of the library) it never
 * waits: a copy of the setting is handed to the coordinator's loop, which
 * takes it soon after (the old callback may be called until then).
 * @return HILOCK_OK, HILOCK_EINVAL,
 * @return HILOCK_ECLOSED  the coordinator's client is closed (no loss is
 *                         reported any more)
 * @return HILOCK_ENOMEM   only on the loop thread of another client:
 *                         nothing was changed */
HILOCK_API int hilock_multilock_set_lost_callback(hilock_multilock *m,
                                                  hilock_multi_lost_cb *cb,
                                                  void *user_data);

/* ---- RedLock ---------------------------------------------------------- */

/* Connect to n independent masters (odd, 3..HILOCK_MAX_MEMBERS), one
 * client each, all on one loop thread owned by the RedLock.  urls[i] is a
 * redis:// or rediss:// URL (see hilock_options_set_url) applied over
 * base (NULL: defaults), whose node timeout becomes each client's command
 * timeout.  Waits until every master has connected or failed its first
 * attempt (at most the connect timeout); masters that failed keep being
 * retried in the background and simply do not vote meanwhile.
 * @return HILOCK_OK
 * @return HILOCK_EINVAL     NULL, n even or out of range, a bad URL
 * @return HILOCK_ENOQUORUM  fewer than a quorum of masters reachable
 * @return HILOCK_ENOMEM
 * @return HILOCK_ERANDOM    the CSPRNG failed: no safe client ids
 * @return HILOCK_EDEADLK    called on a loop thread of the library
 *                           (inside a callback), whose loop the wait for
 *                           the masters would stall */
HILOCK_API int hilock_redlock_create(hilock_redlock **out,
                                     const char *const *urls, size_t n,
                                     const hilock_options *base);

/* Destroy the RedLock locks still there (hilock_multilock_destroy: their
 * pending acquires end with HILOCK_ECANCELED, their holds are not
 * released and expire with their leases), close every master's client
 * and free the RedLock, as hilock_client_destroy does with a client's
 * locks.  A later destroy of one of those locks returns HILOCK_ECLOSED
 * (within the window hilock_client_destroy describes).  Not from its
 * loop thread (inside one of its callbacks).
 * @return HILOCK_OK, HILOCK_EINVAL, HILOCK_ECLOSED
 * @return HILOCK_EDEADLK  called on the RedLock's loop thread */
HILOCK_API int hilock_redlock_destroy(hilock_redlock *rl);

/* Number of masters, and the client of master i (for its id or raw
 * commands; owned by the RedLock). */
HILOCK_API size_t hilock_redlock_masters(const hilock_redlock *rl);
HILOCK_API hilock_client *hilock_redlock_client(const hilock_redlock *rl,
                                                size_t i);

/* A RedLock lock: a multi-lock over the reentrant lock `name` (a C
 * string; the _n twin takes a binary-safe name and its length) on every
 * master, held with a quorum.  Free it with hilock_multilock_destroy().
 * @return HILOCK_OK, HILOCK_EINVAL, HILOCK_ENOMEM, HILOCK_ECLOSED */
HILOCK_API int hilock_redlock_multilock_create(hilock_multilock **out,
                                               hilock_redlock *rl,
                                               const char *name);
HILOCK_API int hilock_redlock_multilock_create_n(hilock_multilock **out,
                                                 hilock_redlock *rl,
                                                 const char *name,
                                                 size_t name_len);

#ifdef __cplusplus
}
#endif

#endif
