/* The generic lock as compositions of locks (src/multi) use it, beside
 * lock_handle.h: argument checks, references, listening to a handle's holds,
 * and the one thing a group does to a member's hold.  The rest of the engine is
 * engine/engine_internal.h, which only this folder includes. */
#ifndef HL_COMPOSE_H
#define HL_COMPOSE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "core/base/monotime.h"
#include "core/engine/lock_handle.h"

/* Check an acquire's owner, wait and lease: HILOCK_OK or HILOCK_EINVAL
 * (with the detail set). */
int hl_check_acquire_args(uint64_t owner, int64_t wait_ms, int64_t lease_ms);
/* The deadline of a wait starting now: 0 for a single try, INT64_MAX for
 * HILOCK_WAIT_FOREVER and for waits too long to represent. */
hl_monotime hl_wait_deadline(int64_t wait_ms);

/* Start an acquire on the engine's state machine: async with cb (its op
 * id in *op_id, may be NULL), or, with cb NULL, blocking, the token in
 * *token (may be NULL).  The statuses of hilock_lock_acquire(_async); a
 * kind whose handle wraps a lock handle (a latch, a semaphore) waits
 * through it. */
int hl_acquire(hilock_lock *lock, uint64_t owner, int64_t wait_ms,
               int64_t lease_ms, unsigned flags, hilock_acquire_cb *cb,
               void *user_data, uint64_t *op_id, uint64_t *token);
/* The same for an attempt that asks for amount (a semaphore's permits,
 * passed to the kind in hl_attempt_args.amount).  An unheld grant
 * (hl_kind.unheld_grants) reports the free permits it left in
 * hilock_acquired.hold_count. */
int hl_acquire_amount(hilock_lock *lock, uint64_t owner, int64_t amount,
                      int64_t wait_ms, int64_t lease_ms, hilock_acquire_cb *cb,
                      void *user_data, uint64_t *op_id);
/* Release one hold of owner through the engine (its hold accounting,
 * lease and reconcile after an unknown outcome): async with cb, or
 * blocking with cb NULL.  The statuses of hilock_lock_release(_async). */
int hl_release_owner(hilock_lock *lock, uint64_t owner, hilock_lock_cb *cb,
                     void *user_data);

/* The same for a release that also puts the waiter of entry in a
 * condition's line (hl_kind.release_into_cond), in one script: async
 * only, on the loop thread.  Besides the statuses of a release, the
 * callback gets HILOCK_EINVAL when the kind has no such release, or
 * when the server counts the owner's hold more than once (then nothing
 * changed).  entry must last until the callback. */
int hl_release_owner_into_cond(hilock_lock *lock, uint64_t owner,
                               const hl_cond_entry *entry,
                               hilock_lock_cb *cb, void *user_data);

/* Whether owner holds the lock exactly once, with no release under way,
 * as a condition's wait needs: HILOCK_OK with the hold's lease (0: the
 * watchdog's) and whether it has a fencing token; else
 * HILOCK_ENOTOWNER, HILOCK_ELEASELOST or HILOCK_EINVAL (held more than
 * once, or a release under way), the detail set.  Loop thread. */
int hl_lock_hold_once(hilock_lock *lock, uint64_t owner, int64_t *lease_ms,
                      bool *fenced);

/* A number for an owner of its own, unique in the process and never 0:
 * what a kind whose every acquire is an owner apart (a semaphore's) takes
 * for each. */
uint64_t hl_fresh_owner(void);

/* A kind's script answers v, or {v, refusal} when the server's ACL
 * refused the PUBLISH it announced its change with (HL_LUA_ANNOUNCE): the
 * change stands, so the caller is told of it and the refusal only counts
 * in hilock_client_stats.  Returns v (reply itself when there is no
 * refusal).  Loop thread.  An acquire's answers are arrays that may end
 * in a string (a count as text): its kind unwraps them itself. */
const hilock_reply *hl_script_answer(hilock_client *client,
                                     const hilock_reply *reply);

/* A script that finds a value no client of the layout writes where it
 * reads a number (a count that is no 64-bit integer) answers, before it
 * changes anything, {HL_FOREIGN_MARK, key, value, what}: what names
 * the number it expected ("a count of permits").  kindkit's
 * HL_LUA_FOREIGN builds it. */
#define HL_FOREIGN_MARK "hilock:foreign"
/* Whether reply (perhaps wrapped with a refusal) is that answer; if so,
 * out receives the detail of the HILOCK_EPROTO it ends the call with,
 * which names the key and quotes the value. */
bool hl_foreign_detail(const hilock_reply *reply, char *out, size_t cap);
/* That detail, for value found at key where what was expected. */
void hl_foreign_format(char *out, size_t cap, const char *key,
                       size_t key_len, const char *value, size_t value_len,
                       const char *what);
/* Room for that detail. */
#define HL_FOREIGN_DETAIL_MAX 256

/* References keep the handle's memory while operations are in flight. */
void hl_lock_ref(hilock_lock *lock);
void hl_lock_unref(hilock_lock *lock);

/* Listen to the handle's holds: l->cb is told, on the loop thread, of
 * every hold whose lease is lost (with its owner), before the user's lost
 * callback, and once with owner 0 when the client closes, before the
 * handle's pending acquires end.  Any thread: each returns once the loop
 * thread has taken it (at once on that thread), so that after
 * hl_lock_unlisten l is never named again.  Neither allocates.
 * HILOCK_OK; HILOCK_EINVAL for NULL; HILOCK_ECLOSED when the client is
 * closed, which leaves l unlinked and never called. */
int hl_lock_listen(hilock_lock *lock, hl_hold_listener *l);
int hl_lock_unlisten(hilock_lock *lock, hl_hold_listener *l);
/* On the loop thread of another client, where nothing may wait (see
 * hl_op_caller_may_wait), the two hand the change to the lock's loop and
 * return at once, HILOCK_ENOMEM when they cannot; the change then takes
 * effect soon after, and l may be named until it has.  A caller that
 * frees l's storage takes it out with hl_lock_unlisten_then: then(arg)
 * runs once l is out of the list for good, now or later, on some
 * thread, and the result says whether it will.  false: the change could
 * not be made without waiting (no memory, or a closing client whose loop
 * still walks the list), and l's storage must be kept for good. */
bool hl_lock_unlisten_then(hilock_lock *lock, hl_hold_listener *l,
                           void (*then)(void *arg), void *arg);

/* Stop renewing owner's hold when it is a single grant with no release
 * under way, so that the server lets it expire within one lease; a newer
 * or deeper hold is left alone.  Loop thread. */
void hl_lock_stop_renewing_grant(hilock_lock *lock, uint64_t owner);

/* The server behind client may have forgotten what it granted (it
 * restarted): report every lease held on it as lost.  Loop thread. */
void hl_client_leases_lost(hilock_client *client);

#endif
