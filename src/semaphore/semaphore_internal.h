/* The semaphore kinds inside src/semaphore: the handle, its calls, and
 * the scripts that run them. */
#ifndef HL_SEMAPHORE_INTERNAL_H
#define HL_SEMAPHORE_INTERNAL_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include "core/base/monotime.h"
#include "core/engine/again.h"
#include "core/engine/lock_handle.h"
#include "hilock/semaphore.h"

typedef enum sem_call {
    SEM_ACQUIRE,
    SEM_RELEASE,
    SEM_TRY_SET,
    SEM_SET,
    SEM_ADD,
    SEM_DRAIN,
    SEM_AVAILABLE,
    SEM_PERMIT_ACQUIRE,
    SEM_PERMIT_RELEASE
} sem_call;

/* A semaphore handle wraps a lock handle of a semaphore kind: the name,
 * the client and its connection, and the engine's acquires, holds (an
 * expirable permit is a hold of an owner of its own) and leases. */
struct hilock_semaphore {
    hilock_lock *lock;
    bool expirable;
    atomic_int refs; /* the user's, plus one per call in flight */
    /* The user's permit-lost callback: the loop thread's. */
    hilock_permit_lost_cb *lost_cb;
    void *lost_data;
};

/* Whom an async call reports to: the user's callback of a call on the
 * count, or of a call on a permit.  A NULL hl_sem_cb pointer, or one with
 * neither set, is a blocking call. */
typedef struct hl_sem_cb {
    hilock_semaphore_cb *count;
    hilock_permit_cb *permit;
    void *user_data;
} hl_sem_cb;

static inline bool hl_sem_cb_set(const hl_sem_cb *cb)
{
    return cb != NULL && (cb->count != NULL || cb->permit != NULL);
}

/* Report to cb: value to a call on the count, id to one on a permit. */
void hl_sem_cb_run(const hl_sem_cb *cb, hilock_semaphore *sem, int status,
                   int64_t value, const char *id);

/* A call that is one request (release, set, add, drain, available, and
 * the release of a permit another client took). */
typedef struct sem_op {
    hl_op op; /* first */
    hilock_semaphore *sem;
    sem_call call;
    int64_t n;
    hl_sem_cb cb; /* none set: a blocking caller waits */
    char id[HILOCK_PERMIT_ID_MAX]; /* a permit's, or a plain release's */
    hl_monotime give_up_at;        /* a plain release: stop resending */
    /* A plain release of what a grant this handle kept took: id is that
     * grant's attempt, whose record the release consumes, or the wish a
     * release granted, whose grant it consumes. */
    hl_consume consume;
    bool resent; /* sent again after a lost answer */
    hl_again again; /* a plain release a replica refused, made again */
    /* A plain release that carries the attempt of this client's next
     * waiter (core/engine/ride.h): ride its arguments while it is being
     * sent, rider its op until the answer came, rider_took whether that
     * attempt took the permits. */
    const hl_attempt_args *ride;
    hl_acquire_op *rider;
    bool rider_took;
    unsigned changes_at_send; /* the client's master changes then */
} sem_op;

/* The kinds under a handle's lock (scripts.c). */
extern const hl_kind hl_semaphore_kind;
extern const hl_kind hl_permit_kind;
void hl_sem_scripts_init(void);

/* Run op's one-request script, with KEYS the name, "{NAME}:timeout" and
 * the channel.  HILOCK_OK or an error (fn not called). */
int hl_sem_run(sem_op *op, hl_request_fn *fn, void *data);
/* Run a plain release, which either consumes the record of the grant it
 * gives back (consume) or writes one of its own under op->id until
 * forgotten: sent again, it gives nothing back twice. */
int hl_sem_plain_release(sem_op *op, hl_request_fn *fn, void *data);
/* Run a plain release as hl_sem_plain_release does, followed in the same
 * script by the attempt a of the client's next waiter; the reply is
 * {the release's answer, the attempt's}. */
int hl_sem_plain_release_to_waiter(sem_op *op, const hl_attempt_args *a,
                                   hl_request_fn *fn, void *data);
/* Drop the record of the attempt or release id, without waiting for the
 * answer. */
int hl_sem_forget(hilock_lock *lock, const char *id, size_t id_len,
                  bool handed);

void hl_sem_ref(hilock_semaphore *sem);
void hl_sem_unref(hilock_semaphore *sem);

/* Start a one-request call with validated arguments (id: a permit's, for
 * SEM_PERMIT_RELEASE); sync when cb is NULL (value, which may be NULL,
 * receives the result). */
int hl_sem_call(hilock_semaphore *sem, sem_call call, int64_t n,
                const char *id, const hl_sem_cb *cb, int64_t *value);

/* Take permits (plain: n of them; expirable: one, id receiving its id)
 * on the engine: sync when cb is NULL, else async with its op id in
 * *op_id (may be NULL).  Arguments validated. */
int hl_sem_acquire(hilock_semaphore *sem, int64_t n, int64_t wait_ms,
                   int64_t lease_ms, const hl_sem_cb *cb, char *id,
                   uint64_t *op_id);

/* Give a permit back by id: one of this client's through the engine,
 * which keeps its hold and lease right; another client's by its script
 * alone.  Sync when cb is NULL. */
int hl_sem_permit_release(hilock_semaphore *sem, const char *id,
                          const hl_sem_cb *cb);

#endif
