/* Shared between the files that implement the generic lock operations. */
#ifndef HL_LOCKOBJ_INTERNAL_H
#define HL_LOCKOBJ_INTERNAL_H

#include "lockobj.h"
#include "waiters.h"

struct hl_acquire_op {
    hl_task task; /* first: handed to the loop thread */
    hilock_lock *lock;
    hl_acquire_op *prev; /* in lock->ops */
    hl_acquire_op *next;
    uint64_t id;
    uint64_t owner;
    int64_t wait_ms;
    int64_t lease_ms;
    unsigned flags;
    hl_monotime deadline; /* INT64_MAX: forever */
    hl_monotime attempt_sent;
    uint64_t seq_at_attempt; /* channel's wake sequence when sent */
    char nonce[HILOCK_CLIENT_ID_LEN + 22]; /* names the last attempt */
    size_t nonce_len;
    struct hl_reconcile *reconcile; /* answered before the next attempt */
    int last_status; /* why the last attempt failed, for the deadline */
    char last_detail[200];
    hl_waiter waiter;
    hl_timer timer;
    hilock_acquire_cb *cb;
    void *user_data;
    int in_flight;      /* requests naming this op */
    bool started;       /* linked into the lock, timers initialised */
    bool done;          /* the callback has fired (or is firing) */
    bool retry_after;   /* a wake-up came during an attempt */
    bool subscribed;
    bool placed;        /* may hold a place on the server to give back */
};

/* A release that frees the lock is being sent: wake the next local
 * waiter so its attempt follows in the same write (kinds with hand_on).
 * Returns whether a waiter was woken that expects the release's message
 * on the lock's channel (see hl_waiters_hand_on). */
bool hl_lock_hand_on(hilock_lock *lock);

/* Check an acquire's owner, wait and lease: HILOCK_OK or HILOCK_EINVAL
 * (with the detail set). */
int hl_check_acquire_args(uint64_t owner, int64_t wait_ms, int64_t lease_ms);
/* The deadline of a wait starting now: 0 for a single try, INT64_MAX for
 * HILOCK_WAIT_FOREVER and for waits too long to represent. */
hl_monotime hl_wait_deadline(int64_t wait_ms);

/* Holds. */
hl_hold *hl_hold_find(hilock_lock *lock, uint64_t owner);
hl_hold *hl_hold_get(hilock_lock *lock, uint64_t owner); /* creates */
/* Forget a hold: stop its lease and free it (once the engine is done
 * with the lease inside). */
void hl_hold_drop(hl_hold *hold);
/* Start the hold's lease; HILOCK_OK or HILOCK_ENOMEM (no engine). */
int hl_hold_start_lease(hl_hold *hold, hl_monotime granted_at,
                        int64_t lease_ms);
/* Format "<client id>:<owner>" into buf; returns its length. */
size_t hl_owner_field(const hilock_lock *lock, uint64_t owner, char *buf,
                      size_t cap);

/* References keep the handle's memory while operations are in flight. */
void hl_lock_ref(hilock_lock *lock);
void hl_lock_unref(hilock_lock *lock);

/* True when the handle can start operations (loop thread). */
bool hl_lock_usable(const hilock_lock *lock);

/* Finish every pending acquire of the lock with status. */
void hl_lock_cancel_all(hilock_lock *lock, int status, const char *detail);

/* Fire a user callback with the client's callback guard around it. */
void hl_lock_call_acquire_cb(hilock_lock *lock, hilock_acquire_cb *cb,
                             int status, const hilock_acquired *acquired,
                             void *user_data, const char *detail);
void hl_lock_call_cb(hilock_lock *lock, hilock_lock_cb *cb, int status,
                     int64_t value, void *user_data, const char *detail);

#endif
