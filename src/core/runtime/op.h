/* The operation: the only way work crosses into a loop thread.
 *
 * Every call that needs a loop thread (an acquire, a release, a query, a
 * raw command, a listener change, a member's answer travelling to a
 * multi-lock's coordinator) is an hl_op handed to its home client with
 * hl_op_submit.  From there it lives on the home loop alone: it starts
 * there, is cancelled there, finishes there, and its caller hears of it
 * there, or, for a blocking caller, wakes on the op's own futex word.
 *
 *   NEW --submit--> QUEUED --loop--> STARTED --finish--> FINISHED
 *                     |                    \
 *                     |                     cancel (or home shuts down:
 *                     |                     ECLOSED): type->cancel ends it
 *                     +---- home shuts down: finished with ECLOSED,
 *                           never started
 *
 * An op is reference counted: one reference for the home loop from
 * submit until the kind lets go of it (hl_op_unref after finishing, once
 * no request names it), one for a blocking caller until it has read the
 * result, and one for a cancel on its way to the loop.  See
 * docs/internals/threads.md. */
#ifndef HL_OP_H
#define HL_OP_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include "core/base/error_detail.h"
#include "hilock/client.h"
#include "hilock/reply.h"

typedef struct hl_op hl_op;

/* What an op does; every hook runs on the home loop. */
typedef struct hl_op_type {
    /* Begin the work, with the home open; it ends, now or later, in
     * hl_op_finish. */
    void (*start)(hl_op *op);
    /* End the work soon with hl_op_finish(op, status, ...).  Called only
     * between start and finish.  NULL: the work ends by itself within a
     * command timeout (a request), and a cancel does nothing. */
    void (*cancel)(hl_op *op, int status);
    /* Hand the result to the caller's callback, with the thread's detail
     * set from it and the client's callback guard around it.  NULL when
     * the op is only ever waited on. */
    void (*complete)(hl_op *op);
    /* The last reference went: free what the op owns, and the op. */
    void (*destroy)(hl_op *op);
    /* Counts against the client's max_pending (callers' operations do;
     * the library's own hand-overs do not). */
    bool bounded;
    /* Everything the op does once started is requests it queues under
     * its gate (hl_op_gate_requests) while it starts, so that a blocking
     * caller that gives up may withdraw it until one is written.  Other
     * ops can be withdrawn only before they start.  A blocking caller
     * gives such an op up rather than cancel it, even with a cancel hook
     * (which then serves the client's close). */
    bool withdrawable;
} hl_op_type;

enum {
    HL_OP_NEW,
    HL_OP_QUEUED,
    HL_OP_STARTED,
    HL_OP_FINISHED
};

struct hl_op {
    const hl_op_type *type;
    hl_op *next;           /* in the home's queue of submissions */
    hl_op *next_cancel;    /* in the home's queue of cancels */
    hilock_client *home;   /* referenced from submit to the last unref */
    uint64_t id;           /* unique in the process, from init */
    atomic_int refs;
    int state;             /* HL_OP_*: the home loop's, after submit */
    atomic_bool cancel_queued; /* a cancel from another thread is asked */
    int cancel_status;
    bool cancel_at_start;      /* cancelled on the loop while queued */
    bool counted;          /* holds a place under max_pending */
    hl_op *live_prev;      /* started with a cancel hook, not finished: */
    hl_op *live_next;      /* in the home's live list */
    bool live;
    bool waited;           /* a blocking caller waits: no complete */
    /* The result, written by hl_op_finish. */
    int status;
    int64_t value;
    hilock_reply *reply;
    char detail[HL_DETAIL_MAX];
    /* A blocking caller's wait. */
    _Atomic uint32_t word;
    /* A blocking caller's claim against the loop's (HL_GATE_*, conn.h):
     * started, or a request written, before the caller gave up, or
     * withdrawn by it first. */
    _Atomic int gate;
    int wake_slot;         /* its bit among the wake words, from submit */
    int64_t spin_us;
    /* Set by the blocking call's maker: its caller sleeps rather than
     * spin, since other processes' threads need the cores now. */
    bool stay_asleep;
    /* Set by the home loop while the op waits for something other than
     * an answer to its own request (a wake-up, a timer): its blocking
     * caller then sleeps at once rather than spin (hl_op_park). */
    atomic_bool parked;
};

/* The op's answer is not due soon (parked) or is again: a blocking
 * caller spinning for it stops once it is parked.  Home loop. */
void hl_op_park(hl_op *op, bool parked);
/* How many blocking callers' spins ended with the answer, by their op
 * being parked, or by running out, so far in the process. */
void hl_op_spin_counts(long *answered, long *parked, long *ran_out);

/* Prepare an op (zeroed memory, or any: every field is set). */
void hl_op_init(hl_op *op, const hl_op_type *type);

void hl_op_ref(hl_op *op);
void hl_op_unref(hl_op *op);
/* A reference, unless the last one is gone already (the op is being
 * destroyed): for a lookup that finds op in a table its destroy hook
 * leaves, under the table's lock.  Any thread. */
bool hl_op_ref_if_alive(hl_op *op);

/* Whether the calling thread may wait for a loop thread: not on a thread
 * running any of the library's loops, where the loop waited for may be
 * waiting for this one.  There a call hands its op over with
 * hl_op_submit and returns; elsewhere it may wait (hl_op_call_and_wait,
 * hl_op_run_blocking). */
bool hl_op_caller_may_wait(void);

/* Hand op to home's loop thread: started there in submission order, or
 * now when called on it.  The caller's reference becomes the home
 * loop's: the kind drops it once finished and no request names the op,
 * and the loop drops it itself for an op that never started.  On
 * failure op is untouched and still the caller's.
 *   HILOCK_ECLOSED  home is closed
 *   HILOCK_EFULL    a bounded op, and max_pending of home's operations
 *                   are unfinished already */
int hl_op_submit(hilock_client *home, hl_op *op);
/* hl_op_submit for a caller that has nothing more to do with op: on
 * failure op's reference is dropped too, so that its destroy hook frees
 * it.  Statuses as hl_op_submit. */
int hl_op_submit_or_drop(hilock_client *home, hl_op *op);

/* Set the result and tell the caller: its complete hook, or its blocking
 * caller.  Home loop, once; later calls do nothing.  Takes reply. */
void hl_op_finish(hl_op *op, int status, int64_t value, hilock_reply *reply,
                  const char *detail);

/* hl_op_finish, then drop the home loop's reference: what a kind calls
 * once it is done with op.  Safe for an op whose memory a blocking
 * caller owns (on its stack): the op is not touched after the caller is
 * told. */
void hl_op_done(hl_op *op, int status, int64_t value, hilock_reply *reply,
                const char *detail);

/* Ask op to end with status: from any thread, any time after submit,
 * any number of times.  An op that already finished, or has no cancel
 * hook, is left alone.  HILOCK_OK, or HILOCK_ECLOSED when the home is
 * closing (which ends every op anyway). */
int hl_op_cancel(hl_op *op, int status);

/* Submit op for a blocking caller and wait for its result, at most
 * limit_us.  Past it, an op that can be cancelled is cancelled with
 * HILOCK_ETIMEDOUT and waited for, so nothing it does outlives the call
 * (the wait has no limit of its own: a cancelled op ends on its loop at
 * once, and an op whose loop never runs again cannot be waited out
 * safely).  Any other op is given up: withdrawn when it has not started,
 * or, withdrawable, when none of its requests was written (it then never
 * runs), else left to finish on its own; either way its loop frees it.
 * Returns the op's status with the thread's detail set from it; value
 * and reply (either may be NULL) receive its results.  Consumes the
 * caller's reference: a caller that reads results of the kind's own
 * afterwards takes one more first, and must give the op a cancel hook
 * (an op given up may still be writing them).
 *   HILOCK_EDEADLK   called on the home's loop thread, or on any thread
 *                    running one of the library's loops
 *   HILOCK_ETIMEDOUT the loop thread did not answer in time, and the op
 *                    was cancelled or withdrawn: it never took effect
 *   HILOCK_EINDOUBT  the loop thread did not answer in time, and the op
 *                    had started (a request of it written): it may have
 *                    taken effect, or may still
 *   and whatever hl_op_submit and the op return */
int hl_op_run_blocking(hilock_client *home, hl_op *op, int64_t limit_us,
                       int64_t *value, hilock_reply **reply);

/* Queue the requests this thread sends from now on under op's gate, when
 * a blocking caller waits for op (else under none); returns what to put
 * back with hl_conn_gate_requests afterwards.  Around a withdrawable op's
 * sends only, never around work done for others (a local waiter woken by
 * a release). */
_Atomic int *hl_op_gate_requests(hl_op *op);

/* Run op on home's loop and wait for it without a limit: for ops whose
 * start finishes them at once (settings, teardown), which may then live
 * on the caller's stack (destroy a no-op) and need no memory.  On the
 * loop thread it runs now.  The op's status, or hl_op_submit's error
 * (then it never ran).  Never on the loop thread of another client, where
 * the loop waited for may be waiting for this one: a caller that can run
 * there checks hl_op_caller_may_wait() first and hands over an op that
 * owns its memory instead (docs/internals/threads.md).  It still waits there rather
 * than refuse, since a caller that has not made that check yet would take
 * a refusal for "the loop is gone" and do the loop's work itself. */
int hl_op_call_and_wait(hilock_client *home, hl_op *op);

/* The home's loop: start what was submitted, then the cancels asked for
 * since (the home's wake-up).  Loop thread. */
void hl_op_run_queued(hilock_client *home);
/* The home shuts down: cancel every op started and not finished that
 * has a cancel hook, with HILOCK_ECLOSED, so none is left waiting for an
 * answer that can no longer reach it.  Loop thread, after the home is
 * marked closed and while its connections still exist. */
void hl_op_cancel_live(hilock_client *home);
/* The home shuts down: finish everything still queued with
 * HILOCK_ECLOSED.  Loop thread, after the home is marked closed. */
void hl_op_drain(hilock_client *home);

/* Wake the blocked callers whose ops finished since the last call, with
 * one system call per wake word that has any: after each loop iteration
 * (the home's prepare watcher), and when the home shuts down.  Loop
 * thread. */
void hl_op_wake_sleepers(hilock_client *home);

/* How many threads wait in blocking calls right now (process-wide). */
int hl_op_waiting(void);

#endif
