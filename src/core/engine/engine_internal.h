/* Shared between the files that implement the generic lock operations. */
#ifndef HL_ENGINE_INTERNAL_H
#define HL_ENGINE_INTERNAL_H

#include "core/engine/lock_handle.h"
#include "core/engine/compose.h"
#include "core/runtime/client_state.h"
#include "core/engine/waiters.h"

/* Owner turns.  An attempt, a give-back and a reconcile each change an
 * owner's count on the server in a way the client learns only from the
 * answer, and a give-back or reconcile computes what to leave from the
 * count the client knows when it is sent.  So these requests take turns
 * per owner and lock: one is unanswered at a time, the others wait in
 * the order they came.  A give-back or reconcile that follows an attempt
 * takes that attempt's place, ahead of attempts that queued meanwhile.
 * Requests of one lock share a connection and reach the server in the
 * order they are sent, so a reconcile then knows every grant it may
 * remove, and can remove only the one it is about.  Releases take no
 * turn: each removes one hold the client knows of. */
struct hl_turn {
    /* In its owner's line, a ring: the head's prev is the last. */
    hl_turn *prev;
    hl_turn *next;
    /* Heads only: the other lines in the head's bucket of the lock's
     * table, which finds an owner's line without walking the others. */
    hl_turn *chain_prev;
    hl_turn *chain_next;
    uint64_t owner;
    void (*go)(hl_turn *turn); /* its turn came */
    bool active; /* heads its line: its request may be sent, or is
                  * unanswered */
    bool listed;
};

/* Each of these takes constant time, whatever the number of lines and
 * of requests in them. */
/* Join the line of owner's requests on lock; true when it is turn's turn
 * now.  Otherwise go is called when it comes (loop thread). */
bool hl_turn_take(hilock_lock *lock, hl_turn *turn, uint64_t owner,
                  void (*go)(hl_turn *turn));
/* Whether owner has no request in line on lock: hl_turn_take would
 * answer true. */
bool hl_turn_idle(hilock_lock *lock, uint64_t owner);
/* to takes from's place in the line, active or not; from leaves it. */
void hl_turn_pass(hilock_lock *lock, hl_turn *from, hl_turn *to,
                  void (*go)(hl_turn *turn));
/* Leave the line (nothing when not in it); the turn, if it was this one's,
 * passes to the owner's next request, whose go runs before this
 * returns. */
void hl_turn_end(hilock_lock *lock, hl_turn *turn);

/* Reconcile owner's count on the server with the holds the client knows
 * of, after an attempt whose outcome is unknown (nonce names it: it is
 * voided, so it refuses to run should it still arrive), after a grant
 * nobody will take (a cancelled acquire's: nonce NULL), or after a
 * release whose outcome is unknown.  from is the turn of the attempt it
 * follows, whose place it takes, or NULL to queue for a turn of its own.
 * Sent again on every new connection until answered, or until lease_ms
 * (the longest lease the grants it is about may have; 0: the watchdog
 * timeout) has passed, when they have all run out on the server. */
void hl_reconcile_start(hilock_lock *lock, uint64_t owner, hl_turn *from,
                        const char *nonce, size_t nonce_len,
                        int64_t lease_ms);

/* The withdraw of the wish the answered attempt nonce recorded, and of a
 * grant a release made for it (hl_kind.reconcile_withdraws), retried as
 * a reconcile is, for ms. */
void hl_withdraw_start(hilock_lock *lock, uint64_t owner, const char *nonce,
                       size_t nonce_len, int64_t ms);

/* The same for holds a release removed and a failover brought back
 * (engine/unacked.h), in a turn of its own: it leaves the owner every
 * hold the client knows of, those its releases in flight are about
 * included.  On a cluster a release sent before it may reach the new
 * master after it, through a redirection, and must still find its hold;
 * a hold left so is removed at a later master change, or runs out with
 * its lease. */
void hl_reconcile_restored(hilock_lock *lock, uint64_t owner,
                           int64_t lease_ms);

/* Where an acquire is; docs/internals/locks.md draws the moves between states.
 * The flags after state in hl_acquire_op say what it holds (a waiter, a
 * place on the server) or has seen, never where it is. */
typedef enum hl_acquire_state {
    HL_ACQUIRE_NEW,        /* submitted; the loop thread has not started it */
    HL_ACQUIRE_TURN,       /* waits for its owner's earlier request */
    HL_ACQUIRE_ATTEMPTING, /* its attempt is unanswered */
    HL_ACQUIRE_WAITING,    /* waits for a wake-up or its timer to try again */
    HL_ACQUIRE_DONE        /* has called back; a late answer may still name
                            * it (in_flight) */
} hl_acquire_state;

struct hl_acquire_op {
    hl_op op; /* first */
    hl_acquire_state state;
    hilock_lock *lock;
    hl_acquire_op *prev; /* in lock->ops */
    hl_acquire_op *next;
    /* In its lock's list by id (acquire_ids.h) while an async caller may
     * cancel it; under the lock's link mutex. */
    hl_acquire_op *id_prev;
    hl_acquire_op *id_next;
    bool id_listed;
    uint64_t owner;
    int64_t wait_ms;
    int64_t lease_ms;
    int64_t amount;
    unsigned flags;
    hl_monotime deadline; /* INT64_MAX: forever */
    hl_monotime attempt_sent;
    uint64_t seq_at_attempt; /* channel's wake sequence when sent */
    char nonce[HILOCK_CLIENT_ID_LEN + 22]; /* names the last attempt */
    size_t nonce_len;
    hl_turn turn;         /* of its attempt */
    hl_monotime queued_at; /* when it started waiting for its turn */
    int last_status; /* why the last attempt failed, for the deadline */
    char last_detail[HL_DETAIL_MAX];
    hl_waiter waiter;
    hl_timer timer;
    hilock_acquire_cb *cb; /* NULL: a blocking caller waits */
    void *user_data;
    hilock_acquired got;   /* the grant, for the callback */
    hl_monotime retry_floor; /* least wait before a retry of its own */
    int in_flight;      /* requests naming this op */
    int stale_grants;   /* grants that found a released hold back */
    bool linked;        /* in lock->ops, with its timer initialised */
    bool retry_after;   /* a wake-up came while ATTEMPTING */
    bool subscribed;    /* its waiter is registered */
    bool placed;        /* may hold a place on the server to give back */
    bool saw_held;      /* an attempt found the lock held by another */
    bool full_form;     /* a lean attempt was sent back for the full form */
    bool counted_waiting; /* in the client's acquires_waiting */
    hl_monotime started_at; /* when it started, for the wait histogram */
    bool first_in_line; /* the last refusal said the client is first in
                         * the server's line (line_per_client kinds) */
    bool saw_promised;  /* ... and that the lock was free but promised to
                         * another client */
    bool saw_unset;     /* ... and that the name held nothing (a
                         * semaphore never set) */
    /* Direct hand-offs (hl_kind.withdraw): the attempt whose wish the
     * server confirmed recording, and when it was sent, while a grant a
     * release makes for it may be taken (empty: none); whether the last
     * attempt sent asked to record one, which an end without the lock
     * withdraws; whether any did, so that later attempts drop it. */
    char wish[HILOCK_CLIENT_ID_LEN + 22];
    size_t wish_len;
    hl_monotime wish_sent;
    bool wish_out;
    bool wished;
    bool direct; /* granted by a release, not by its own attempt */
};

/* A reconcile of owner's count is starting: grants made for the wishes of
 * its acquires are no longer theirs to take (the reconcile removes them,
 * or the wish is gone before a release can grant it). */
void hl_acquire_forget_wishes(hilock_lock *lock, uint64_t owner);

/* A release that frees the lock is being sent: wake the next local
 * waiter so its attempt follows in the same write (kinds with hand_on).
 * Returns whether a waiter was woken that expects the release's message
 * on the lock's channel (see hl_waiters_hand_on). */
bool hl_lock_hand_on(hilock_lock *lock);

/* The calls of a lock besides acquire (release.c). */
typedef enum hl_lock_call_kind {
    CALL_RELEASE,
    CALL_FORCE,
    CALL_IS_LOCKED,
    CALL_HOLD_COUNT,
    CALL_TTL,
    CALL_LEASE_LOST, /* the client's own knowledge: no request */
    CALL_VALID_UNTIL /* the same */
} hl_lock_call_kind;

/* What the client itself knows of owner's hold on lock, for the calls
 * that need no request: CALL_LEASE_LOST, 1 when its lease was lost, else
 * 0; CALL_VALID_UNTIL, the lease's local deadline in ms on
 * CLOCK_MONOTONIC (from the grant or the last confirmed renewal, less the
 * drift margin, lease.c), 0 when owner holds nothing here or its lease
 * was lost.  Loop thread. */
int64_t hl_hold_knowledge(hilock_lock *lock, hl_lock_call_kind kind,
                          uint64_t owner);

/* The same from any thread: at once on the client's loop thread, else
 * through it (blocking, as the sync calls do).  HILOCK_OK with *value
 * set, or the errors of a blocking call. */
int hl_lock_knowledge(hilock_lock *lock, hl_lock_call_kind kind,
                      uint64_t owner, int64_t *value);

/* Start one for owner: async with cb, or, with cb NULL, blocking, its
 * value stored in *value (may be NULL). */
int hl_lock_call(hilock_lock *lock, hl_lock_call_kind kind, uint64_t owner,
                 hilock_lock_cb *cb, void *user_data, int64_t *value);



/* Holds. */
hl_hold *hl_hold_find(hilock_lock *lock, uint64_t owner);
hl_hold *hl_hold_get(hilock_lock *lock, uint64_t owner); /* creates */
/* Forget a hold: stop its lease and free it (once the engine is done
 * with the lease inside). */
void hl_hold_drop(hl_hold *hold);
/* Every hold the client counts in h is released: drop it, but keep
 * older_lost (in a hold of count 0 without a lease) for the release that
 * is still to come. */
void hl_hold_done(hl_hold *h);
/* Start the hold's lease; HILOCK_OK or HILOCK_ENOMEM (no engine). */
int hl_hold_start_lease(hl_hold *hold, hl_monotime granted_at,
                        int64_t lease_ms);


/* True when the handle can start operations (loop thread). */
bool hl_lock_usable(const hilock_lock *lock);

/* Finish every pending acquire of the lock with status. */
void hl_lock_cancel_all(hilock_lock *lock, int status, const char *detail);
/* Tell the handle's hold listeners that owner's hold was lost (0: that
 * the client is closing).  Loop thread. */
void hl_lock_tell_listeners(hilock_lock *lock, uint64_t owner);

/* Listen for requests to give the lock up, or stop, as the handle's
 * callback and holds now ask (release_request.c): after every change of
 * either.  Loop thread. */
void hl_release_requests_sync(hilock_lock *lock);

#endif
