/* The operation's life across threads; see op.h. */
#include <linux/futex.h>
#include <pthread.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "core/runtime/client_state.h"
#include "core/base/error_detail.h"
#include "core/base/monotime.h"
#include "core/runtime/op.h"
#include "core/config/option_values.h"

/* A blocking caller's word: the loop thread stores the result and wakes
 * the caller only if it went to sleep, so a caller that waits awake
 * costs the loop thread nothing. */
enum { WORD_EMPTY, WORD_POSTED, WORD_SLEEPING, WORD_ABANDONED };

/* Sleepers do not sleep on their op's word but on one of a few shared
 * futex words, with a bit of their own (FUTEX_WAIT_BITSET), so that the
 * loop thread wakes every caller it answered in one loop iteration with
 * one FUTEX_WAKE_BITSET per word rather than one system call, and one
 * cross-core wake-up, per caller: on a small machine with many blocked
 * callers, those calls were a third of the loop thread's time.  A word
 * counts the wake-ups, so a caller that reads it, finds its op not yet
 * posted and sleeps on the value it read cannot miss one. */
#define WAKE_SLOTS (HL_WAKE_WORDS * 32)
static _Atomic uint32_t wake_words[HL_WAKE_WORDS];

/* The calling thread's slot: threads beyond WAKE_SLOTS share one, which
 * costs a sharer a spurious wake-up, never a lost one. */
static int my_wake_slot(void)
{
    static atomic_int next_slot;
    static _Thread_local int slot = -1;
    if (slot < 0)
        slot = atomic_fetch_add_explicit(&next_slot, 1,
                                         memory_order_relaxed) %
               WAKE_SLOTS;
    return slot;
}

/* Threads waiting in blocking calls, process-wide. */
static atomic_int waiting;

int hl_op_waiting(void)
{
    return atomic_load_explicit(&waiting, memory_order_relaxed);
}

void hl_op_init(hl_op *op, const hl_op_type *type)
{
    static atomic_uint_fast64_t next_id = 1;
    memset(op, 0, sizeof *op);
    op->id = atomic_fetch_add(&next_id, 1);
    op->type = type;
    atomic_init(&op->refs, 1);
    atomic_init(&op->cancel_queued, false);
    atomic_init(&op->word, WORD_EMPTY);
    atomic_init(&op->parked, false);
    atomic_init(&op->gate, HL_GATE_OPEN);
    op->state = HL_OP_NEW;
}

void hl_op_ref(hl_op *op) { atomic_fetch_add(&op->refs, 1); }

bool hl_op_ref_if_alive(hl_op *op)
{
    int refs = atomic_load(&op->refs);
    while (refs > 0)
        if (atomic_compare_exchange_weak(&op->refs, &refs, refs + 1))
            return true;
    return false;
}

bool hl_op_caller_may_wait(void) { return !hl_thread_runs_loop(); }

void hl_op_unref(hl_op *op)
{
    if (atomic_fetch_sub(&op->refs, 1) != 1)
        return;
    hilock_client *home = op->home;
    hilock_reply_free(op->reply);
    op->reply = NULL;
    op->type->destroy(op);
    if (home != NULL)
        hl_client_unref(home);
}

static void give_back_place(hilock_client *home, hl_op *op)
{
    if (op->counted) {
        op->counted = false;
        atomic_fetch_sub_explicit(&home->pending_ops, 1,
                                  memory_order_relaxed);
    }
}

/* A place under max_pending, taken on the caller's thread so that a
 * refusal is the call's own answer rather than a callback. */
static bool take_place(hilock_client *home, hl_op *op)
{
    if (!op->type->bounded)
        return true;
    int max = home->opts->max_pending;
    int was = atomic_fetch_add_explicit(&home->pending_ops, 1,
                                        memory_order_relaxed);
    if (max > 0 && was >= max) {
        atomic_fetch_sub_explicit(&home->pending_ops, 1,
                                  memory_order_relaxed);
        return false;
    }
    op->counted = true;
    return true;
}

/* A request that carries an op's gate keeps the op: should a sibling
 * request fail first and answer the caller, who then frees its
 * reference, the connection still reads the gate of the one left. */
static hl_op *gate_op(_Atomic int *gate)
{
    return (hl_op *)(void *)((char *)gate - offsetof(hl_op, gate));
}

static void gate_hold(_Atomic int *gate) { hl_op_ref(gate_op(gate)); }

static void gate_drop(_Atomic int *gate) { hl_op_unref(gate_op(gate)); }

static pthread_once_t gate_owner_once = PTHREAD_ONCE_INIT;

static void set_gate_owner(void) { hl_conn_set_gate_owner(gate_hold, gate_drop); }

_Atomic int *hl_op_gate_requests(hl_op *op)
{
    pthread_once(&gate_owner_once, set_gate_owner);
    return hl_conn_gate_requests(op->waited ? &op->gate : NULL);
}

/* A blocking caller's op is about to start: false when its caller gave
 * up and withdrew it first. */
static bool claim_start(hl_op *op)
{
    int open = HL_GATE_OPEN;
    return !op->waited ||
           atomic_compare_exchange_strong(&op->gate, &open,
                                          HL_GATE_STARTED);
}

static void start(hl_op *op)
{
    if (!claim_start(op)) {
        op->state = HL_OP_STARTED;
        hl_op_done(op, HILOCK_ETIMEDOUT, 0, NULL,
                   "withdrawn by its caller before it started");
        return;
    }
    if (op->cancel_at_start) {
        /* Cancelled on its loop before it could start: it never does. */
        op->state = HL_OP_STARTED;
        hl_op_done(op, op->cancel_status, 0, NULL,
                   op->cancel_status == HILOCK_ETIMEDOUT
                       ? "the loop thread did not answer in time"
                       : "cancelled");
        return;
    }
    op->state = HL_OP_STARTED;
    if (op->type->cancel != NULL) {
        hilock_client *home = op->home;
        op->live = true;
        op->live_prev = NULL;
        op->live_next = home->live_ops;
        if (home->live_ops)
            home->live_ops->live_prev = op;
        home->live_ops = op;
    }
    op->type->start(op);
}

static void unlink_live(hl_op *op)
{
    hilock_client *home = op->home;
    if (!op->live)
        return;
    op->live = false;
    if (op->live_prev)
        op->live_prev->live_next = op->live_next;
    else
        home->live_ops = op->live_next;
    if (op->live_next)
        op->live_next->live_prev = op->live_prev;
    op->live_prev = op->live_next = NULL;
}

void hl_op_cancel_live(hilock_client *home)
{
    while (home->live_ops != NULL) {
        hl_op *op = home->live_ops;
        unlink_live(op); /* ends the loop even if the hook does not */
        hl_op_ref(op);
        op->type->cancel(op, HILOCK_ECLOSED);
        hl_op_unref(op);
    }
}

/* The op's link in the queue of submissions, or of cancels. */
static hl_op **link_of(hl_op *op, bool cancel)
{
    return cancel ? &op->next_cancel : &op->next;
}

/* Queue op for the loop thread and wake it; under home->lock, so that a
 * shutdown cannot free the loop in between. */
static void push_locked(hilock_client *home, hl_op *op, bool cancel)
{
    hl_op **head = cancel ? &home->cancels_head : &home->ops_head;
    hl_op **tail = cancel ? &home->cancels_tail : &home->ops_tail;
    *link_of(op, cancel) = NULL;
    if (*tail)
        *link_of(*tail, cancel) = op;
    else
        *head = op;
    *tail = op;
    hl_async_send(&home->wakeup);
}

/* Both queues, emptied. */
static void take_queues(hilock_client *home, hl_op **ops, hl_op **cancels)
{
    pthread_mutex_lock(&home->lock);
    *ops = home->ops_head;
    *cancels = home->cancels_head;
    home->ops_head = home->ops_tail = NULL;
    home->cancels_head = home->cancels_tail = NULL;
    pthread_mutex_unlock(&home->lock);
}

int hl_op_submit(hilock_client *home, hl_op *op)
{
    if (!take_place(home, op))
        return hl_fail(HILOCK_EFULL,
                       "%d operations of this client are unfinished "
                       "(max_pending)",
                       home->opts->max_pending);
    op->next = NULL;
    if (hl_client_in_loop(home)) {
        if (atomic_load(&home->closed)) {
            give_back_place(home, op);
            return hl_fail(HILOCK_ECLOSED, "client is closed");
        }
        hl_client_ref(home);
        op->home = home;
        start(op);
        return HILOCK_OK;
    }
    pthread_mutex_lock(&home->lock);
    if (atomic_load(&home->closed)) {
        pthread_mutex_unlock(&home->lock);
        give_back_place(home, op);
        return hl_fail(HILOCK_ECLOSED, "client is closed");
    }
    hl_client_ref(home);
    op->home = home;
    op->state = HL_OP_QUEUED;
    push_locked(home, op, false);
    pthread_mutex_unlock(&home->lock);
    return HILOCK_OK;
}

/* Tell a blocking caller; a sleeping one is woken at the end of this
 * loop iteration.  The caller may read the result and free the op the
 * moment it is posted, so nothing of the op is read after. */
static void post(hl_op *op)
{
    hilock_client *home = op->home;
    int slot = op->wake_slot;
    uint32_t was = atomic_exchange_explicit(&op->word, WORD_POSTED,
                                            memory_order_acq_rel);
    if (was == WORD_ABANDONED) {
        /* The caller gave up and left its reference to the loop. */
        hl_op_unref(op);
        return;
    }
    if (was != WORD_SLEEPING)
        return;
    home->wake_mask[slot / 32] |= 1u << (slot % 32);
    /* A caller's own loop may be run one iteration at a time, and a loop
     * shutting down may not turn again: no waiting for the next turn. */
    if (!home->own_loop || atomic_load(&home->closed))
        hl_op_wake_sleepers(home);
    else
        hl_prepare_start(&home->waker);
}

void hl_op_wake_sleepers(hilock_client *home)
{
    for (int i = 0; i < HL_WAKE_WORDS; i++) {
        uint32_t mask = home->wake_mask[i];
        if (mask == 0)
            continue;
        home->wake_mask[i] = 0;
        /* Published after the posts: a caller that reads the new count
         * sees its op posted. */
        atomic_fetch_add_explicit(&wake_words[i], 1, memory_order_release);
        syscall(SYS_futex, &wake_words[i],
                FUTEX_WAKE_BITSET | FUTEX_PRIVATE_FLAG, INT32_MAX, NULL,
                NULL, mask);
    }
    hl_prepare_stop(&home->waker);
}

void hl_op_finish(hl_op *op, int status, int64_t value, hilock_reply *reply,
                  const char *detail)
{
    if (op->state == HL_OP_FINISHED) {
        hilock_reply_free(reply);
        return;
    }
    op->state = HL_OP_FINISHED;
    /* Every kind hears a refused command as any error reply, which is
     * right for its own bookkeeping; the caller is told which it was,
     * since a missing permission needs an administrator, not a retry. */
    if (status == HILOCK_EREDIS)
        status = hl_redis_error_status(reply && reply->str ? reply->str
                                                           : detail);
    char replica[sizeof op->detail];
    if (status == HILOCK_EREADONLY) {
        snprintf(replica, sizeof replica,
                 "the server is a replica (a URL naming one, or a master "
                 "a failover demoted), which takes no writes: %s",
                 reply && reply->str ? reply->str : detail ? detail : "");
        detail = replica;
        if (hl_client_in_loop(op->home))
            hl_client_replica_answered(op->home);
    }
    unlink_live(op);
    give_back_place(op->home, op);
    op->status = status;
    op->value = value;
    op->reply = reply;
    snprintf(op->detail, sizeof op->detail, "%s",
             status != HILOCK_OK && detail ? detail : "");
    if (op->waited) {
        post(op);
    } else if (op->type->complete != NULL) {
        hilock_client *c = op->home;
        if (status != HILOCK_OK)
            hl_set_detail(op->detail);
        else
            hl_clear_detail();
        hl_client_enter_callback(c);
        op->type->complete(op);
        hl_client_leave_callback(c);
    }
}

void hl_op_done(hl_op *op, int status, int64_t value, hilock_reply *reply,
                const char *detail)
{
    if (op->waited) {
        /* The caller's reference keeps the op until it has read the
         * result, and it may read it, and let go of the op, the moment
         * it is posted: the loop's goes first.  It is never the last: a
         * caller that gave up left its own, which the post drops. */
        atomic_fetch_sub(&op->refs, 1);
        hl_op_finish(op, status, value, reply, detail);
        return;
    }
    hl_op_finish(op, status, value, reply, detail);
    hl_op_unref(op);
}

static void cancel_now(hl_op *op)
{
    if (op->state == HL_OP_STARTED && op->type->cancel != NULL)
        op->type->cancel(op, op->cancel_status);
}

int hl_op_cancel(hl_op *op, int status)
{
    hilock_client *home = op->home;
    if (home == NULL || op->type->cancel == NULL)
        return HILOCK_OK;
    if (hl_client_in_loop(home)) {
        op->cancel_status = status;
        if (op->state == HL_OP_QUEUED) {
            /* Submitted from elsewhere, not yet started: it never will. */
            op->cancel_at_start = true;
            return HILOCK_OK;
        }
        cancel_now(op);
        return HILOCK_OK;
    }
    bool was = false;
    if (!atomic_compare_exchange_strong(&op->cancel_queued, &was, true))
        return HILOCK_OK; /* one cancel is on its way already */
    pthread_mutex_lock(&home->lock);
    if (atomic_load(&home->closed)) {
        pthread_mutex_unlock(&home->lock);
        return hl_fail(HILOCK_ECLOSED, "client is closed");
    }
    /* Read on the loop after the hand-over through the mutex. */
    op->cancel_status = status;
    hl_op_ref(op);
    push_locked(home, op, true);
    pthread_mutex_unlock(&home->lock);
    return HILOCK_OK;
}

void hl_op_run_queued(hilock_client *home)
{
    hl_op *ops, *cancels;
    take_queues(home, &ops, &cancels);
    while (ops != NULL) {
        hl_op *next = ops->next;
        start(ops);
        ops = next;
    }
    while (cancels != NULL) {
        hl_op *next = cancels->next_cancel;
        cancel_now(cancels);
        hl_op_unref(cancels);
        cancels = next;
    }
}

void hl_op_drain(hilock_client *home)
{
    hl_op *ops, *cancels;
    take_queues(home, &ops, &cancels);
    while (ops != NULL) {
        hl_op *next = ops->next;
        ops->state = HL_OP_STARTED;
        hl_op_done(ops, HILOCK_ECLOSED, 0, NULL, "client closed");
        ops = next;
    }
    while (cancels != NULL) {
        hl_op *next = cancels->next_cancel;
        hl_op_unref(cancels);
        cancels = next;
    }
}

/* ---- the blocking caller --------------------------------------------- */

int64_t hl_blocking_spin_for(int64_t rtt_us)
{
    if (rtt_us <= 0)
        return HL_SPIN_MAX_US / 2; /* nothing measured yet */
    if (rtt_us > HL_SPIN_MAX_US)
        return 0;
    int64_t us = 2 * rtt_us + HL_HANDOVER_US;
    return us < HL_SPIN_MAX_US ? us : HL_SPIN_MAX_US;
}

int64_t hl_client_blocking_spin_us(hilock_client *c)
{
    /* A busy-polling loop thread takes a core already; a caller spinning
     * beside it would leave the server none on a two-core machine. */
    if (c->opts->busy_poll_us > 0)
        return 0;
    return hl_blocking_spin_for(atomic_load(&c->rtt_us));
}

int64_t hl_blocking_limit_us(const hilock_options *o, int64_t wait_ms)
{
    int64_t limit_ms = hl_sat_add(
        hl_sat_mul(2, o->command_timeout_ms),
        hl_sat_add(o->connect_timeout_ms, 1000));
    /* Waits too long to represent are waits forever; a quarter of the
     * range leaves room to add the present time. */
    hl_monotime limit = hl_after_ms(HL_MS(limit_ms), wait_ms);
    if (wait_ms < 0 || limit > INT64_MAX / 4)
        return INT64_MAX / 4;
    return limit;
}


void hl_op_park(hl_op *op, bool parked)
{
    atomic_store_explicit(&op->parked, parked, memory_order_relaxed);
}

/* How the blocking callers' spins ended, process-wide: for tests. */
static atomic_long spins_answered, spins_parked, spins_ran_out;

void hl_op_spin_counts(long *answered, long *parked, long *ran_out)
{
    *answered = atomic_load(&spins_answered);
    *parked = atomic_load(&spins_parked);
    *ran_out = atomic_load(&spins_ran_out);
}

/* A lone caller whose answer is due within a short round trip waits for
 * it awake, as long as the spin bound its caller chose.  With more
 * callers waiting the cores are busy anyway, and spinning would only take
 * time from the loop thread and the server.  Nor does it spin on once its
 * op waits for a turn rather than an answer: a lock held elsewhere may
 * take any time, and with many processes in line the spinners would take
 * the cores from the very holders and server they wait for.
 *
 * Past the first HL_SPIN_ALONE_US it still looks between checks, but
 * yields its core to any other thread that can run there: an answer
 * that late is one the server, the loop thread or another process is
 * still working on, and a spinner that keeps the core delays it further.
 * On an otherwise idle core the yield returns at once.  With 8 processes
 * taking turns on 2 cores (W7 N = 8) owner changes went from about 3,900
 * to 7,500 a second, and a lone caller (W1 C = 1 sync) kept its rate and
 * its 23 µs median, where yielding from the start cost it a fifth. */
#define HL_SPIN_ALONE_US 50
static bool spin_for_post(hl_op *op, int64_t timeout_us)
{
    if (op->spin_us <= 0 ||
        atomic_load_explicit(&waiting, memory_order_relaxed) > 1)
        return false;
    int64_t us = timeout_us < op->spin_us ? timeout_us : op->spin_us;
    hl_monotime began = hl_monotime_now();
    hl_monotime end = began + us;
    hl_monotime yield_from = began + HL_SPIN_ALONE_US;
    hl_monotime now;
    do {
        if (atomic_load_explicit(&op->word, memory_order_acquire) ==
            WORD_POSTED) {
            atomic_fetch_add_explicit(&spins_answered, 1,
                                      memory_order_relaxed);
            return true;
        }
        if (atomic_load_explicit(&op->parked, memory_order_relaxed)) {
            atomic_fetch_add_explicit(&spins_parked, 1,
                                      memory_order_relaxed);
            return false;
        }
        now = hl_monotime_now();
        if (now >= yield_from)
            sched_yield();
#if defined(__x86_64__) || defined(__i386__)
        else
            __builtin_ia32_pause();
#endif
    } while (now < end);
    atomic_fetch_add_explicit(&spins_ran_out, 1, memory_order_relaxed);
    return false;
}

static bool passed(const struct timespec *until)
{
    struct timespec now;
    clock_gettime(CLOCK_MONOTONIC, &now);
    return now.tv_sec > until->tv_sec ||
           (now.tv_sec == until->tv_sec && now.tv_nsec >= until->tv_nsec);
}

/* Wait for the result until timeout_us from now: true when it came. */
static bool wait_posted(hl_op *op, int64_t timeout_us)
{
    struct timespec until = hl_monotonic_deadline(timeout_us);
    atomic_fetch_add_explicit(&waiting, 1, memory_order_relaxed);
    bool posted = spin_for_post(op, timeout_us);
    _Atomic uint32_t *wake_word = &wake_words[op->wake_slot / 32];
    uint32_t bit = 1u << (op->wake_slot % 32);
    while (!posted) {
        /* The count first: a wake-up after it changes it. */
        uint32_t count =
            atomic_load_explicit(wake_word, memory_order_acquire);
        uint32_t seen = WORD_EMPTY;
        if (!atomic_compare_exchange_strong_explicit(
                &op->word, &seen, WORD_SLEEPING, memory_order_acq_rel,
                memory_order_acquire) &&
            seen != WORD_SLEEPING)
            break; /* posted meanwhile */
        /* FUTEX_WAIT_BITSET takes an absolute CLOCK_MONOTONIC deadline. */
        syscall(SYS_futex, wake_word,
                FUTEX_WAIT_BITSET | FUTEX_PRIVATE_FLAG, count, &until, NULL,
                bit);
        if (atomic_load_explicit(&op->word, memory_order_acquire) ==
                WORD_POSTED ||
            passed(&until))
            break;
    }
    posted = atomic_load_explicit(&op->word, memory_order_acquire) ==
             WORD_POSTED;
    if (!posted) {
        /* A second wait, after the cancel, may sleep again. */
        uint32_t sleeping = WORD_SLEEPING;
        atomic_compare_exchange_strong(&op->word, &sleeping, WORD_EMPTY);
    }
    atomic_fetch_sub_explicit(&waiting, 1, memory_order_relaxed);
    return posted;
}

/* The result for the blocking caller, the thread's detail set from it;
 * drops the caller's reference. */
static int take_result(hl_op *op, int64_t *value, hilock_reply **reply)
{
    int status = op->status;
    if (status != HILOCK_OK)
        hl_set_detail(op->detail);
    else
        hl_clear_detail();
    if (value)
        *value = op->value;
    if (reply) {
        *reply = op->reply;
        op->reply = NULL;
    }
    hl_op_unref(op);
    return status;
}

int hl_op_submit_or_drop(hilock_client *home, hl_op *op)
{
    int rc = hl_op_submit(home, op);
    if (rc != HILOCK_OK)
        hl_op_unref(op);
    return rc;
}

/* Withdraw op when nothing of it can have run yet: not started, or a
 * withdrawable op none of whose requests was written.  Whether it was. */
static bool withdraw(hl_op *op)
{
    int g = atomic_load(&op->gate);
    for (;;) {
        bool may = g == HL_GATE_OPEN ||
                   (g == HL_GATE_STARTED && op->type->withdrawable);
        if (!may)
            return false;
        if (atomic_compare_exchange_weak(&op->gate, &g, HL_GATE_WITHDRAWN))
            return true;
    }
}

/* The caller of an op without a cancel hook stops waiting for it.  It
 * leaves its reference to the loop, which frees the op when it finishes
 * (a withdrawn one at once, without doing anything), so that nothing
 * leaks and nothing of the caller's is touched afterwards. */
static int give_up(hl_op *op, int64_t *value, hilock_reply **reply)
{
    /* Before the abandon: from then on the loop may free the op. */
    bool withdrawn = withdraw(op);
    if (atomic_exchange(&op->word, WORD_ABANDONED) == WORD_POSTED)
        return take_result(op, value, reply); /* it came meanwhile */
    if (withdrawn)
        return hl_fail(HILOCK_ETIMEDOUT,
                       "the loop thread did not answer in time; the call "
                       "was withdrawn before anything of it was sent, and "
                       "never runs");
    return hl_fail(HILOCK_EINDOUBT,
                   "the loop thread did not answer in time, after the call "
                   "was sent: it may have taken effect, or may still");
}

int hl_op_run_blocking(hilock_client *home, hl_op *op, int64_t limit_us,
                       int64_t *value, hilock_reply **reply)
{
    if (reply)
        *reply = NULL;
    if (hl_client_in_loop(home)) {
        hl_op_unref(op);
        return hl_fail(HILOCK_EDEADLK, "a blocking call on the loop thread");
    }
    if (!hl_op_caller_may_wait()) {
        hl_op_unref(op);
        return hl_fail(HILOCK_EDEADLK, "a blocking call on the loop thread "
                                       "of another client");
    }
    op->waited = true;
    op->wake_slot = my_wake_slot();
    op->spin_us = op->stay_asleep ? 0 : hl_client_blocking_spin_us(home);
    hl_op_ref(op); /* the home loop's */
    int rc = hl_op_submit(home, op);
    if (rc != HILOCK_OK) {
        char why[HL_DETAIL_MAX];
        snprintf(why, sizeof why, "%s", hilock_last_error());
        hl_op_unref(op);
        hl_op_unref(op);
        hl_set_detail(why);
        return rc;
    }
    if (!wait_posted(op, limit_us)) {
        if (op->type->cancel == NULL || op->type->withdrawable)
            return give_up(op, value, reply);
        hl_op_cancel(op, HILOCK_ETIMEDOUT);
        /* Should the cancel not reach the loop, the op still ends at its
         * own deadline, which has passed. */
        wait_posted(op, INT64_MAX / 4);
    }
    return take_result(op, value, reply);
}

int hl_op_call_and_wait(hilock_client *home, hl_op *op)
{
    op->waited = true;
    op->wake_slot = my_wake_slot();
    hl_op_ref(op); /* the home loop's */
    int rc = hl_op_submit(home, op);
    if (rc != HILOCK_OK) {
        atomic_fetch_sub(&op->refs, 2);
        return rc;
    }
    /* On the loop thread it has finished already. */
    if (!hl_client_in_loop(home))
        wait_posted(op, INT64_MAX / 4);
    return take_result(op, NULL, NULL);
}
