/* Acquire: one attempt, and if the lock is held, wait for its release
 * message (or its ttl, whichever comes first) and try again, until the
 * wait runs out.  The same state machine serves every kind. */
#include <stdatomic.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>

#include "core/base/alloc.h"
#include "core/base/error_detail.h"
#include "core/engine/acquire_ids.h"
#include "core/engine/engine_internal.h"
#include "core/engine/kept_grants.h"
#include "core/engine/ride.h"
#include "core/config/option_values.h"
#include "core/runtime/client_state.h"
#include "core/runtime/presence.h"

static void attempt(hl_acquire_op *op);
static void send_attempt(hl_acquire_op *op);

static void op_free_if_idle(hl_acquire_op *op)
{
    if (op->state == HL_ACQUIRE_DONE && op->in_flight == 0)
        hl_op_unref(&op->op);
}

static void op_unlink(hl_acquire_op *op)
{
    hilock_lock *lock = op->lock;
    if (op->prev)
        op->prev->next = op->next;
    else if (lock->ops == op)
        lock->ops = op->next;
    if (op->next)
        op->next->prev = op->prev;
    else if (lock->ops_tail == op)
        lock->ops_tail = op->prev;
    op->prev = op->next = NULL;
}

/* Whether the kind's waiters record wishes a release may grant outright
 * (a direct hand-off). */
static bool takes_wishes(const hl_kind *kind)
{
    return kind->withdraw != NULL || kind->reconcile_withdraws;
}

/* ---- the line (hl_kind.in_line) ---------------------------------------- */

/* A wait of a kind whose waiters go in line; single tries stand apart. */
static bool lined(const hl_acquire_op *op)
{
    return op->lock->kind->in_line && op->wait_ms != 0;
}

/* The line is the client's waiters on the channel, oldest first, so it
 * takes in every handle of the name: a waiter joins it when it starts. */
static bool line_head(const hl_acquire_op *op)
{
    return op->subscribed &&
           hl_waiter_line_head(&op->waiter) == &op->waiter;
}

/* A grant left `free`: the waiters behind it whose requests fit attempt
 * now, oldest first, rather than one per round trip.  An attempt in
 * flight counts as taking what it asks for; the first waiter that does
 * not fit stops the walk, so nobody behind it passes it. */
static void let_in(hl_acquire_op *granted, int64_t free)
{
    hl_waiter *w = granted->subscribed
                       ? hl_waiter_line_head(&granted->waiter)
                       : NULL;
    while (w != NULL && free > 0) {
        hl_acquire_op *o = w->data;
        w = w->next; /* o may leave the line in its attempt */
        if (o == granted)
            continue;
        if (o->amount > free)
            break;
        free -= o->amount;
        if (o->state == HL_ACQUIRE_WAITING)
            attempt(o);
    }
}

/* The reconciles of a grant's op try as long as the grant may last on
 * the server: its lease, or the record of an unheld grant. */
static int64_t reconcile_ms(const hl_acquire_op *op)
{
    return op->lock->kind->unheld_grants ? op->lock->kind->record_ms
                                         : op->lease_ms;
}

/* Give back a grant whose attempt ran.  A hold's reconcile names no
 * attempt, since there is none left to void; an unheld grant's names
 * the attempt, whose record is all the server keeps of it. */
static void reconcile_ran(hl_acquire_op *op)
{
    bool named = op->lock->kind->unheld_grants;
    hl_reconcile_start(op->lock, op->owner, &op->turn,
                       named ? op->nonce : NULL, named ? op->nonce_len : 0,
                       reconcile_ms(op));
}

/* Whether an op ending without the lock gives its place on the server
 * back (after its waiter left the channel).  Where the server lines up
 * clients, the client's place is given back by its last waiter, whether
 * or not that one attempted itself: a place nobody of the client waits
 * behind would have a release promise the lock to nobody. */
static bool leaves_line(const hl_acquire_op *op)
{
    hilock_lock *lock = op->lock;
    if (!lock->kind->line_per_client)
        return op->placed;
    if (!op->placed && !op->subscribed)
        return false;
    /* Out of memory, it says none: a leave too many costs a request. */
    return !hl_lock_others_wait(lock, NULL, NULL);
}

/* End the operation and call back; the op lives on while requests that
 * name it are in flight. */
/* The client's counts of acquires (hilock_stats). */
static void count_outcome(hl_acquire_op *op, int status)
{
    hilock_client *c = op->lock->client;
    if (c == NULL)
        return;
    hl_engine_counts *n = &c->engine_counts;
    if (op->counted_waiting) {
        op->counted_waiting = false;
        n->acquires_waiting--;
    }
    if (status == HILOCK_OK && op->direct)
        n->acquires_handed++;
    if (status == HILOCK_OK)
        hl_client_count_wait(c, hl_monotime_now() - op->started_at);
    else if (status == HILOCK_EBUSY)
        n->acquires_busy++;
    else
        n->acquires_failed++;
}

static void op_finish(hl_acquire_op *op, int status,
                      const hilock_acquired *acquired, const char *detail)
{
    if (op->state == HL_ACQUIRE_DONE)
        return;
    /* A turn held by an attempt in flight passes on with its answer. */
    bool attempting = op->state == HL_ACQUIRE_ATTEMPTING;
    op->state = HL_ACQUIRE_DONE;
    hl_acquire_ids_remove(op);
    hilock_lock *lock = op->lock;
    count_outcome(op, status);
    if (!attempting)
        hl_turn_end(lock, &op->turn);
    /* The next in line, whose turn comes when this one leaves it. */
    hl_acquire_op *behind =
        op->linked && lined(op) && line_head(op) && op->waiter.next
            ? op->waiter.next->data
            : NULL;
    if (op->linked) {
        op_unlink(op);
        hl_timer_stop(&op->timer);
        if (lock->client && lock->client->waiters)
            hl_waiter_remove(lock->client->waiters, &op->waiter,
                             status != HILOCK_OK && !lined(op));
    }
    if (status != HILOCK_OK && lock->client != NULL && op->wished &&
        lock->kind->reconcile_withdraws) {
        /* The wishes of the last attempt (behind it, should it be in
         * flight: its answer then takes care of what it took) and of the
         * one the server confirmed, should a grant for it be waiting. */
        hl_withdraw_start(lock, op->owner, op->nonce, op->nonce_len,
                          reconcile_ms(op));
        if (op->wish_len > 0 && (op->wish_len != op->nonce_len ||
                                 memcmp(op->wish, op->nonce, op->wish_len)))
            hl_withdraw_start(lock, op->owner, op->wish, op->wish_len,
                              reconcile_ms(op));
    } else if (status != HILOCK_OK && lock->client != NULL && op->wish_out &&
               lock->kind->withdraw != NULL) {
        /* The wish goes, and a grant a release made for it goes back,
         * behind the attempt that recorded it; should this be lost, the
         * grant runs out with the client's place. */
        char field[HILOCK_CLIENT_ID_LEN + 22];
        size_t len = hl_owner_field(lock, op->owner, field, sizeof field);
        lock->kind->withdraw(lock, field, len, op->nonce, op->nonce_len);
    }
    if (status != HILOCK_OK && lock->client != NULL && leaves_line(op)) {
        /* Give the place back, behind any attempt still in flight on the
         * same connection; should that leave be lost, the place runs out
         * with the waiter timeout. */
        char field[HILOCK_CLIENT_ID_LEN + 22];
        size_t len = hl_owner_field(lock, op->owner, field, sizeof field);
        lock->kind->leave(lock, field, len);
    }
    if (behind != NULL && behind->state == HL_ACQUIRE_WAITING &&
        hl_lock_usable(behind->lock))
        attempt(behind); /* its turn came */
    if (acquired)
        op->got = *acquired;
    op->in_flight++; /* keep op alive across the callback */
    hl_op_finish(&op->op, status, acquired ? (int64_t)acquired->token : 0,
                 NULL, detail);
    op->in_flight--;
    op_free_if_idle(op);
}

void hl_lock_cancel_all(hilock_lock *lock, int status, const char *detail)
{
    while (lock->ops != NULL)
        op_finish(lock->ops, status, NULL, detail);
}

void hl_hold_lease_lost(hl_lease *lease, const char *why)
{
    hl_hold *h = (hl_hold *)(void *)((char *)lease -
                                     offsetof(hl_hold, lease_mem));
    hilock_lock *lock = h->lock;
    /* The engine is inside its own report: it gives the lease back when
     * it returns. */
    h->leased = false;
    hl_lease_stop(lease);
    h->lost = true;
    h->count = 0;
    if (lock->client == NULL)
        return;
    uint64_t owner = h->owner; /* the hold may go in a callback */
    hl_lock_ref(lock);
    hilock_client *c = lock->client;
    hl_client_event(c, HILOCK_EVENT_LEASE_LOST, NULL, why, lock, owner);
    /* Listeners and the callback read why with hilock_last_error(). */
    hl_set_detail(why);
    if (lock->client != NULL)
        hl_lock_tell_listeners(lock, owner);
    if (lock->lost_cb != NULL && lock->client != NULL) {
        hl_set_detail(why);
        hl_client_enter_callback(c);
        lock->lost_cb(lock, owner, lock->lost_data);
        hl_client_leave_callback(c);
    }
    if (lock->client != NULL)
        hl_release_requests_sync(lock);
    hl_lock_unref(lock);
}

/* Tell h's owner that its holds are lost, as a renewal that found them
 * gone would; h may be gone when this returns. */
static void lose_holds(hl_hold *h)
{
    hl_lease *l = hl_hold_lease(h);
    if (l == NULL || l->stopped) {
        /* The lease engine is closing with the client: nobody to tell. */
        h->lost = true;
        h->count = 0;
        return;
    }
    hl_lease_lose(l, "an acquire found the older holds gone from the "
                     "server (the lock expired, was deleted, or the "
                     "server lost it)");
}

/* The server granted the lock: record the hold and its lease. */
static int grant(hl_acquire_op *op, const hl_acquire_result *res,
                 hilock_acquired *out)
{
    hilock_lock *lock = op->lock;
    hl_hold *h = hl_hold_find(lock, op->owner);
    bool older_lost = false;
    if (h != NULL && !h->lost && h->count > 0 && res->count <= h->count) {
        /* The server counts fewer holds than the client knows of plus
         * this one: the older ones went (the key deleted or run out, the
         * server restarted empty) before a renewal found out.  A caller
         * handed the new hold would believe in them, so they are reported
         * lost first, and the new hold counts what the server has.  The
         * op stays ATTEMPTING meanwhile: a wake-up or timer that a lost
         * callback causes must not start another attempt of it. */
        op->state = HL_ACQUIRE_ATTEMPTING;
        lose_holds(h);
        if (op->state == HL_ACQUIRE_DONE)
            return HILOCK_ECANCELED; /* a lost callback ended it */
        op->state = HL_ACQUIRE_WAITING;
        /* Unless a lost callback released the lost holds already. */
        h = hl_hold_find(lock, op->owner);
        older_lost = h != NULL && h->lost;
    }
    h = hl_hold_get(lock, op->owner);
    if (h == NULL)
        return HILOCK_ENOMEM;
    if (h->lost && h->lease_busy) {
        /* A lost hold whose lease a renewal in flight still names: start
         * afresh in a new hold and let that one go. */
        hl_hold_drop(h);
        h = hl_hold_get(lock, op->owner);
        if (h == NULL)
            return HILOCK_ENOMEM;
    } else if (h->lost) {
        h->lost = false;
        h->count = 0;
        h->token = 0;
    }
    if (older_lost)
        h->older_lost = true;
    if (!h->leased) {
        if (hl_hold_start_lease(h, op->attempt_sent, op->lease_ms) !=
            HILOCK_OK) {
            /* Leave the count as it was, so giving the grant back lowers
             * the server to it. */
            if (h->count == 0 && h->releases_in_flight == 0)
                hl_hold_done(h);
            return HILOCK_ENOMEM;
        }
    } else {
        hl_lease_regranted(&h->lease_mem, op->attempt_sent, h->lease_ms);
    }
    if (op->direct) {
        /* A release's grant lasts on the server until this client's
         * place there runs out, at most the waiter timeout after the
         * attempt that recorded the wish ran, unless renewed first. */
        int64_t wt = lock->client->opts->waiter_timeout_ms;
        int64_t wd = hl_lease_engine_watchdog_ms(hl_client_leases(lock->client));
        hl_lease_cap(&h->lease_mem, op->attempt_sent, wt < wd ? wt : wd);
    }
    if (h->count == 0) {
        h->since = op->attempt_sent;
        hl_presence_hold_started(lock->client);
    }
    h->count = res->count;
    if (res->token != 0)
        h->token = res->token;
    out->owner = op->owner;
    out->hold_count = h->count;
    out->token = (op->flags & HILOCK_ACQUIRE_FENCED) ? h->token : 0;
    return HILOCK_OK;
}

static hl_monotime remaining(const hl_acquire_op *op)
{
    if (op->deadline == INT64_MAX)
        return INT64_MAX;
    return hl_sat_sub(op->deadline, hl_monotime_now());
}

static void wait_for(hl_acquire_op *op, hl_monotime delay)
{
    op->state = HL_ACQUIRE_WAITING;
    hl_op_park(&op->op, true);
    hl_monotime left = remaining(op);
    if (delay < 0 || delay > left)
        delay = left;
    if (delay == INT64_MAX) {
        hl_timer_stop(&op->timer);
        return;
    }
    hl_timer_arm(&op->timer, delay);
}

static void granted(hl_acquire_op *op, const hl_acquire_result *res);

/* A release gave the lock to the wish op's attempt recorded: the hold is
 * op's as if that attempt had been granted, its lease counted from when
 * that attempt was sent. */
static void take_direct_grant(hl_acquire_op *op)
{
    hl_acquire_result res = {.outcome = HL_ACQ_ACQUIRED, .count = 1};
    /* An unheld grant is known by the wish's nonce, which a release of
     * its permits names to consume it (HL_CONSUME_HANDED). */
    if (op->lock->kind->unheld_grants) {
        memcpy(op->nonce, op->wish, op->wish_len);
        op->nonce_len = op->wish_len;
    }
    op->attempt_sent = op->wish_sent;
    op->direct = true;
    op->wish_len = 0;
    op->wish_out = false;
    granted(op, &res);
}

void hl_acquire_forget_wishes(hilock_lock *lock, uint64_t owner)
{
    for (hl_acquire_op *op = lock->ops; op != NULL; op = op->next)
        if (op->owner == owner)
            op->wish_len = 0;
}

/* The answer to an attempt that asked to record a wish (wish_out). */
static bool wish_answered(hl_acquire_op *op, const hl_acquire_result *res)
{
    op->wish_len = 0;
    if (!res->wanted) {
        /* Not recorded (the server dropped the field's wish instead). */
        op->wish_out = false;
        return false;
    }
    memcpy(op->wish, op->nonce, op->nonce_len);
    op->wish_len = op->nonce_len;
    op->wish_sent = op->attempt_sent;
    /* A grant for it heard before this answer, perhaps before the waiter
     * was registered on the channel. */
    hl_aux_name ch;
    hilock_lock *lock = op->lock;
    if (lock->client == NULL || lock->client->waiters == NULL ||
        hl_owner_channel(lock, op->owner, &ch) != 0)
        return false;
    bool took = hl_waiters_take_grant(lock->client->waiters, ch.s, ch.len,
                                      op->wish, op->wish_len);
    hl_aux_name_done(&ch);
    return took;
}

static void on_wake(hl_waiter *w, hl_wake_reason why)
{
    hl_acquire_op *op = w->data;
    if (op->state == HL_ACQUIRE_DONE)
        return;
    if (why == HL_WAKE_CLOSED) {
        op_finish(op, HILOCK_ECLOSED, NULL, "client closed");
        return;
    }
    if (why == HL_WAKE_GRANT) {
        /* Only between attempts, and with no other request of the owner
         * in flight: a reconcile may be removing the grant.  An attempt
         * in flight takes it with its answer. */
        if (op->state == HL_ACQUIRE_WAITING && op->wish_len > 0 &&
            hl_turn_idle(op->lock, op->owner) &&
            hl_waiter_take_grant(w, op->wish, op->wish_len))
            take_direct_grant(op);
        return;
    }
    if (op->state == HL_ACQUIRE_ATTEMPTING) {
        op->retry_after = true;
        return;
    }
    if (lined(op) && !line_head(op))
        return; /* the head looks; this one's turn comes after it */
    attempt(op);
}

/* How long a queued op may still wait for its turn: its own wait, and a
 * single try as long as a command may take, since the request it waits
 * for is one. */
static hl_monotime turn_left(const hl_acquire_op *op)
{
    if (op->wait_ms != 0)
        return remaining(op);
    int64_t limit_ms =
        op->lock->client ? op->lock->client->opts->command_timeout_ms : 0;
    return hl_sat_sub(hl_after_ms(op->queued_at, limit_ms),
                      hl_monotime_now());
}

/* Why an op that could not attempt in time ends. */
/* Held to the end of the wait.  A wait that no release could shorten
 * says why, once, to the caller that paid for it. */
static void finish_busy(hl_acquire_op *op)
{
    const hl_kind *kind = op->lock->kind;
    op_finish(op, HILOCK_EBUSY, NULL,
              hl_waiter_refused(&op->waiter)
                  ? "the lock is held by another owner; releases could "
                    "not wake this wait, since the server's ACL refuses "
                    "SUBSCRIBE to the lock's channel, so it only retried "
                    "when the holder's lease ran out"
              : op->saw_unset && kind->unset_detail ? kind->unset_detail
              : op->saw_promised
                  ? (kind->promised_detail
                         ? kind->promised_detail
                         : "the lock is free but promised to a process that "
                           "was waiting for it already, until that one "
                           "takes it or stops waiting")
              : kind->busy_detail ? kind->busy_detail
                                  : "the lock is held by another owner");
}

static void finish_unattempted(hl_acquire_op *op)
{
    if (op->last_status != 0)
        op_finish(op, op->last_status, NULL, op->last_detail);
    else if (op->saw_held)
        finish_busy(op);
    else
        op_finish(op, HILOCK_ETIMEDOUT, NULL,
                  "an earlier request of this owner on this lock is still "
                  "unanswered");
}

static void on_timer(hl_timer *t)
{
    hl_acquire_op *op = t->data;
    if (op->state == HL_ACQUIRE_DONE)
        return;
    if (op->state == HL_ACQUIRE_TURN) {
        hl_monotime left = turn_left(op);
        if (left <= 0)
            finish_unattempted(op);
        else if (left != INT64_MAX)
            hl_timer_arm(&op->timer, left);
        return;
    }
    if (op->state == HL_ACQUIRE_ATTEMPTING) {
        op->retry_after = true;
        return;
    }
    if (lined(op) && !line_head(op)) {
        /* Only its deadline wakes a waiter behind the head. */
        if (remaining(op) <= 0)
            finish_busy(op);
        else
            wait_for(op, -1);
        return;
    }
    attempt(op);
}

/* A retry the client makes on its own, after a ttl ran out or an attempt
 * failed, waits at least the retry floor: 5 ms at first, doubling while
 * the server keeps asking for less than that, up to 1 s.  A real server
 * asks for the holder's remaining lease, which resets it; one that
 * answers "held, ttl 0" (or fails every attempt at once) is asked about
 * once a second instead of once a round trip.  A release message is no
 * retry of the client's own: it wakes a waiter at once, whatever the
 * floor, since each costs the server a message. */
#define HL_RETRY_FLOOR_MIN HL_MS(5)
#define HL_RETRY_FLOOR_MAX HL_MS(1000)

/* The wait before a retry of the op's own that the server's answer asks
 * to wait delay (negative: no timed retry). */
static hl_monotime retry_delay(hl_acquire_op *op, hl_monotime delay)
{
    if (delay < 0)
        return delay;
    if (op->retry_floor < HL_RETRY_FLOOR_MIN)
        op->retry_floor = HL_RETRY_FLOOR_MIN;
    if (delay >= op->retry_floor) {
        op->retry_floor = HL_RETRY_FLOOR_MIN;
        return delay;
    }
    delay = op->retry_floor;
    op->retry_floor = delay < HL_RETRY_FLOOR_MAX / 2 ? 2 * delay
                                                    : HL_RETRY_FLOOR_MAX;
    return delay;
}

/* A client first in the server's line hears the releases other
 * libraries announce on their own channel too (line_per_client kinds). */
static void hear_foreign(hl_acquire_op *op)
{
    hilock_lock *lock = op->lock;
    if (!lock->kind->line_per_client || !op->subscribed)
        return;
    hl_aux_name ch;
    /* Failing that, its own attempts find such a release. */
    if (lock->kind->foreign_channel(lock, &ch) != 0)
        return;
    (void)hl_waiter_foreign(lock->client->waiters, &op->waiter, ch.s, ch.len,
                            lock->kind->foreign_any_message,
                            op->first_in_line);
    hl_aux_name_done(&ch);
}

/* The lock is held by someone else: wait, or give up. */
static void held(hl_acquire_op *op, int64_t ttl_ms)
{
    hilock_client *c = op->lock->client;
    if (!op->counted_waiting && op->wait_ms != 0 && c != NULL) {
        op->counted_waiting = true;
        c->engine_counts.acquires_waiting++;
    }
    if (op->wait_ms == 0 || remaining(op) <= 0) {
        finish_busy(op);
        return;
    }
    hilock_lock *lock = op->lock;
    if (lined(op) && !line_head(op)) {
        /* Let in by a grant, found too little: back to its place. */
        wait_for(op, -1);
        return;
    }
    if (!op->subscribed || !hl_waiter_listening(&op->waiter)) {
        hl_waiters *reg = hl_client_waiters(lock->client);
        int rc = reg != NULL ? 0 : -1;
        bool woken = false;
        if (rc == 0 && op->subscribed) {
            /* The head of a line, told the lock is held: only a release
             * wakes it now, so it listens from here on. */
            woken = hl_waiter_done_trying(&op->waiter) || op->retry_after;
            rc = hl_waiter_listen(reg, &op->waiter);
        } else if (rc == 0) {
            hl_aux_name ch;
            rc = hl_owner_channel(lock, op->owner, &ch) == 0 ? 0 : -1;
            if (rc == 0) {
                rc = hl_waiter_add(reg, &op->waiter, ch.s, ch.len,
                                   lock->kind->wake_all, on_wake, op);
                hl_aux_name_done(&ch);
            }
        }
        uint64_t seq = hl_waiter_seq(&op->waiter);
        if (rc < 0) {
            op_finish(op, HILOCK_ENOMEM, NULL, "out of memory waiting");
            return;
        }
        op->subscribed = true;
        if (woken || (rc == 1 && (op->seq_at_attempt == HL_WAIT_SEQ_NONE ||
                                  op->seq_at_attempt != seq))) {
            /* The channel was not confirmed when the attempt left, or it
             * heard something since: a release may have slipped between
             * the attempt and now, so look again.  Otherwise any release
             * after the attempt wakes a waiter here, and trying again
             * would only jump the queue of waiters that came first. */
            attempt(op);
            return;
        }
        /* HL_WAKE_READY will come; the ttl bounds the wait meanwhile. */
    } else if (hl_waiter_done_trying(&op->waiter) || op->retry_after) {
        op->retry_after = false;
        attempt(op);
        return;
    }
    hl_monotime delay = retry_delay(op, ttl_ms >= 0 ? HL_MS(ttl_ms) : -1);
    if (lock->kind->leave != NULL) {
        /* The next attempt renews this waiter's place on the server. */
        hl_monotime beat = HL_MS(lock->client->opts->waiter_timeout_ms) / 3;
        if (delay < 0 || delay > beat)
            delay = beat;
    }
    hear_foreign(op);
    wait_for(op, delay);
}

/* The attempt failed without telling whether it took the lock: a
 * reconcile voids it and takes its turn, and a next attempt, if the wait
 * goes on, queues behind that reconcile's answer. */
static void unknown_outcome(hl_acquire_op *op, int status, const char *why)
{
    op->last_status = status;
    snprintf(op->last_detail, sizeof op->last_detail, "%s", why ? why : "");
    if (op->subscribed)
        hl_waiter_done_trying(&op->waiter);
    if (!op->lock->kind->reads_only)
        hl_reconcile_start(op->lock, op->owner, &op->turn, op->nonce,
                           op->nonce_len, reconcile_ms(op));
    if (status == HILOCK_ECLOSED || op->wait_ms == 0 || remaining(op) <= 0) {
        op_finish(op, status, NULL, op->last_detail);
        return;
    }
    wait_for(op, retry_delay(op, 0));
}

/* A replica refused the attempt (READONLY: the node was demoted, and
 * the script did not run).  Under Sentinel or on a cluster the client
 * asks where the master is now, and the attempt is made again there
 * while the wait lasts; without either, the node is all there is, and
 * the caller hears at once (HILOCK_EREADONLY).  True when it waits. */
static bool replica_answered(hl_acquire_op *op, const char *why)
{
    hilock_client *c = op->lock->client;
    if (c == NULL || hl_redis_error_status(why) != HILOCK_EREADONLY ||
        (c->sentinel == NULL && c->cluster == NULL) || op->wait_ms == 0 ||
        remaining(op) <= 0)
        return false;
    hl_client_replica_answered(c);
    op->last_status = HILOCK_EREADONLY;
    snprintf(op->last_detail, sizeof op->last_detail, "%.*s",
             (int)sizeof op->last_detail - 1, why);
    hl_turn_end(op->lock, &op->turn);
    if (op->subscribed)
        hl_waiter_done_trying(&op->waiter);
    wait_for(op, retry_delay(op, 0));
    return true;
}

/* The master granted the lock, but fewer replicas than the policy asks
 * for acknowledged it: a failover now could hand the lock to another
 * owner through a replica that never saw this grant.  So the grant goes
 * back at once (a reconcile lowers the owner's count on the master to the
 * holds the client knows of, which leaves out this grant and only it) and
 * the attempt is made again while the wait lasts; the next attempt queues
 * behind that reconcile. */
static void short_ack(hl_acquire_op *op)
{
    op->last_status = HILOCK_ENOACK;
    snprintf(op->last_detail, sizeof op->last_detail, "%s",
             hilock_last_error());
    if (op->subscribed)
        hl_waiter_done_trying(&op->waiter);
    reconcile_ran(op);
    if (op->wait_ms == 0 || remaining(op) <= 0) {
        op_finish(op, HILOCK_ENOACK, NULL, op->last_detail);
        return;
    }
    wait_for(op, retry_delay(op, 0));
}

/* A grant can find a released hold brought back: the server counts
 * more holds of the owner than the client knows of plus this one, as
 * after a failover to a replica that never saw a release.  Joining it
 * would leave the lock held after the owner's last release, renewed by
 * each acquire of the owner.  So the grant does not count: a reconcile
 * lowers the owner's count to the holds the client knows of, in the
 * attempt's turn, and the attempt is made again behind it.  A server
 * that keeps answering so after a few rounds is not believed. */
#define HL_STALE_GRANTS_MAX 3

static bool stale_grant(hl_acquire_op *op, const hl_acquire_result *res)
{
    const hl_hold *h = hl_hold_find(op->lock, op->owner);
    int64_t known = h != NULL && !h->lost ? h->count : 0;
    if (res->count <= known + 1)
        return false;
    reconcile_ran(op);
    if (++op->stale_grants > HL_STALE_GRANTS_MAX)
        op_finish(op, HILOCK_EPROTO, NULL,
                  "the server keeps counting holds of this owner that the "
                  "client released");
    else
        attempt(op);
    return true;
}

/* The master granted the lock and, under a replica acknowledgement
 * policy, the replicas it asks for acknowledged the grant (the WAIT that
 * followed the attempt on its connection, see core/runtime/ack.h): the
 * grant counts from here, and this is the one place where it does. */
static void granted(hl_acquire_op *op, const hl_acquire_result *res)
{
    hilock_lock *lock = op->lock;
    hilock_acquired got;
    if (lock->kind->reads_only) {
        got = (hilock_acquired){.owner = op->owner, .hold_count = res->count};
        op_finish(op, HILOCK_OK, &got, NULL);
        return;
    }
    if (lock->kind->unheld_grants) {
        /* The grant is the caller's now.  The record of the attempt on
         * the server stays a while, for a release of what it took to
         * consume; should its forget be lost, it runs out. */
        hl_kept_grant_add(lock, op->nonce, op->nonce_len, op->amount,
                          op->direct, op->attempt_sent);
        hl_turn_end(lock, &op->turn);
        got = (hilock_acquired){.owner = op->owner, .hold_count = res->free};
    } else {
        if (stale_grant(op, res))
            return;
        op->in_flight++; /* a lost callback in grant may end the op */
        int rc = grant(op, res, &got);
        op->in_flight--;
        if (op->state == HL_ACQUIRE_DONE) {
            /* Nobody takes the grant: it goes back in the turn its
             * attempt kept. */
            hl_reconcile_start(lock, op->owner, &op->turn, NULL, 0,
                               reconcile_ms(op));
            op_free_if_idle(op);
            return;
        }
        if (rc != HILOCK_OK) {
            hl_reconcile_start(lock, op->owner, &op->turn, NULL, 0,
                               reconcile_ms(op));
            op_finish(op, rc, NULL, "out of memory recording a hold");
            return;
        }
    }
    if (lined(op))
        let_in(op, res->free);
    if (lock->kind->mark_grant != NULL)
        lock->kind->mark_grant(lock);
    hl_release_requests_sync(lock);
    op_finish(op, HILOCK_OK, &got, NULL);
}

static void on_attempt_reply(void *data, int status, hilock_reply *reply)
{
    hl_acquire_op *op = data;
    hilock_lock *lock = op->lock;
    op->in_flight--;
    hl_acquire_result res = {0};
    /* The attempt ran; only its acknowledgement fell short. */
    bool unacked = status == HILOCK_ENOACK;
    if (unacked)
        status = HILOCK_OK;
    /* A script that refused a value it found on the server says which. */
    char foreign[HL_FOREIGN_DETAIL_MAX] = "";
    if (status == HILOCK_OK) {
        lock->kind->parse_attempt(reply, &res);
        if (res.outcome == HL_ACQ_BAD_REPLY)
            (void)hl_foreign_detail(reply, foreign, sizeof foreign);
    }
    if (op->state == HL_ACQUIRE_DONE) {
        /* Cancelled or closed meanwhile; a hold it won goes back. */
        hilock_reply_free(reply);
        if (lock->kind->reads_only)
            ; /* it took nothing */
        else if (status != HILOCK_OK && status != HILOCK_EREDIS)
            hl_reconcile_start(lock, op->owner, &op->turn, op->nonce,
                               op->nonce_len, reconcile_ms(op));
        else if (status == HILOCK_OK && res.outcome == HL_ACQ_ACQUIRED)
            reconcile_ran(op);
        else
            hl_turn_end(lock, &op->turn);
        op_free_if_idle(op);
        return;
    }
    /* Answered: what follows ends it, or makes it wait or try again. */
    op->state = HL_ACQUIRE_WAITING;
    if (status == HILOCK_EREDIS) {
        char why[256];
        snprintf(why, sizeof why, "%s", reply ? reply->str : "");
        hilock_reply_free(reply);
        if (!replica_answered(op, why))
            op_finish(op, HILOCK_EREDIS, NULL, why);
        return;
    }
    hilock_reply_free(reply);
    if (status != HILOCK_OK) {
        unknown_outcome(op, status, hilock_last_error());
        return;
    }
    if (res.outcome == HL_ACQ_ACQUIRED && unacked) {
        short_ack(op);
    } else if (res.outcome == HL_ACQ_ACQUIRED) {
        granted(op, &res);
    } else if (res.outcome == HL_ACQ_FULL_FORM && !op->full_form) {
        /* A lean attempt found the lock busy, or a voided attempt's
         * record beside it: it took nothing, and the full form, sent in
         * the same turn, judges.  The handle counts as contended, so
         * that its next calls go in full at once. */
        op->full_form = true;
        hl_lock_saw_others(lock);
        send_attempt(op);
    } else if (res.outcome == HL_ACQ_HELD && op->wish_out &&
               wish_answered(op, &res)) {
        /* Granted in this attempt's turn, as its own grant would be. */
        take_direct_grant(op);
    } else if (res.outcome == HL_ACQ_HELD) {
        hl_turn_end(lock, &op->turn);
        op->saw_held = true;
        hl_lock_saw_others(lock);
        op->first_in_line = res.first_in_line;
        op->saw_promised = res.promised;
        op->saw_unset = res.unset;
        held(op, res.ttl_ms);
    } else if (res.outcome == HL_ACQ_SELF_WAIT) {
        op_finish(op, HILOCK_EUPGRADE, NULL,
                  lock->kind->self_wait_detail
                      ? lock->kind->self_wait_detail
                      : "this owner's own holds would keep it waiting");
    } else {
        const char *why = lock->kind->bad_reply_detail
                              ? lock->kind->bad_reply_detail
                              : "unexpected acquire reply";
        op_finish(op, HILOCK_EPROTO, NULL, foreign[0] ? foreign : why);
    }
}

static void op_turn_go(hl_turn *t)
{
    hl_acquire_op *op =
        (hl_acquire_op *)(void *)((char *)t - offsetof(hl_acquire_op, turn));
    hl_timer_stop(&op->timer);
    if (op->wait_ms != 0 && remaining(op) <= 0) {
        finish_unattempted(op);
        return;
    }
    send_attempt(op);
}

/* Attempt now if it is the owner's turn, else when it comes. */
static void attempt(hl_acquire_op *op)
{
    if (!hl_lock_usable(op->lock)) {
        op_finish(op, HILOCK_ECLOSED, NULL, "client closed");
        return;
    }
    if (op->state == HL_ACQUIRE_TURN)
        return;
    if (!op->lock->kind->reads_only &&
        !hl_turn_take(op->lock, &op->turn, op->owner, op_turn_go)) {
        op->state = HL_ACQUIRE_TURN;
        op->queued_at = hl_monotime_now();
        hl_monotime left = turn_left(op);
        if (left <= 0)
            left = 0;
        if (left != INT64_MAX)
            hl_timer_arm(&op->timer, left);
        else
            hl_timer_stop(&op->timer);
        return;
    }
    send_attempt(op);
}

typedef struct attempt_send {
    hilock_lock *lock;
    const hl_attempt_args *args;
} attempt_send;

static int send_attempt_now(void *ctx, hl_request_fn *fn, void *data)
{
    attempt_send *s = ctx;
    return s->lock->kind->attempt(s->lock, s->args, fn, data);
}

/* Fill args for op's next attempt (field: at least
 * HILOCK_CLIENT_ID_LEN + 22 bytes) and mark the attempt as leaving. */
static void prepare_attempt(hl_acquire_op *op, hl_attempt_args *args,
                            char *field, size_t field_cap)
{
    hilock_lock *lock = op->lock;
    hl_hold *h = hl_hold_find(lock, op->owner);
    bool joining = h != NULL && !h->lost && h->count > 0;
    *args = (hl_attempt_args){0};
    args->field = field;
    args->field_len = hl_owner_field(lock, op->owner, field, field_cap);
    /* A hold keeps the lease mode of its first acquire. */
    int64_t lease = joining ? h->lease_ms : op->lease_ms;
    args->lease_ms = lease == 0 ? hl_lease_engine_watchdog_ms(
                                      hl_client_leases(lock->client))
                                : lease;
    args->fenced = (op->flags & HILOCK_ACQUIRE_FENCED) != 0;
    args->known_token = joining ? h->token : 0;
    static atomic_uint_fast64_t attempts;
    /* "<client id>:<attempt number>", shaped like an owner field. */
    op->nonce_len = hl_owner_field(lock, atomic_fetch_add(&attempts, 1),
                                   op->nonce, sizeof op->nonce);
    args->nonce = op->nonce;
    args->nonce_len = op->nonce_len;
    /* A single try keeps no place on the server. */
    args->waiter_timeout_ms =
        op->wait_ms == 0 ? 0 : lock->client->opts->waiter_timeout_ms;
    args->amount = op->amount;
    bool others = false, known = false;
    if (lock->kind->line_per_client) {
        /* Others of this client waiting behind this one keep the client
         * in the server's line, at its end.  A client none of whose
         * waiters has waited for the lock lately has no place to give
         * up, which spares an uncontended grant the line's upkeep. */
        others = hl_lock_others_wait(
            lock, op->subscribed ? &op->waiter : NULL, &known);
        if (others)
            args->keep_in_line_ms = lock->client->opts->waiter_timeout_ms;
        else
            args->keep_in_line_ms = op->saw_held || known ? 0 : -1;
    } else if (takes_wishes(lock->kind) && op->wait_ms != 0) {
        /* A line of waiters: the owner's own channel, kept a while after
         * its last wait, says the lock was contended lately (a try makes
         * no wish, so it need not ask). */
        known = hl_lock_owner_listened(lock, op->owner);
    }
    if (takes_wishes(lock->kind) && op->wait_ms != 0) {
        /* A wish for a first hold on the watchdog lease, made alone, of
         * a waiter with none of its client's behind it (which would want
         * the client kept in line), where the lock was contended lately:
         * an uncontended attempt spares the server the wish's key and
         * arguments. */
        op->wish_out = !joining && op->lease_ms == 0 && !args->fenced &&
                       !others && (op->saw_held || known) &&
                       hl_lock_writes_plain(lock);
        op->wished = op->wished || op->wish_out;
        args->want = op->wish_out ? HL_WANT_REGISTER
                     : op->wished ? HL_WANT_DROP
                                  : HL_WANT_NONE;
        args->claim = op->wish;
        args->claim_len = op->wish_len;
    }
    args->lean = !joining && args->keep_in_line_ms == -1 &&
                 args->want == HL_WANT_NONE && !op->full_form &&
                 !hl_lock_contended_lately(lock);
    if (op->subscribed) {
        hl_waiter_trying(&op->waiter);
        /* In line without listening: its channel is at hand. */
        if (!hl_waiter_listening(&op->waiter))
            op->seq_at_attempt = hl_waiter_seq(&op->waiter);
    } else {
        hl_aux_name ch;
        op->seq_at_attempt = HL_WAIT_SEQ_NONE;
        if (lock->client->waiters &&
            hl_owner_channel(lock, op->owner, &ch) == 0) {
            op->seq_at_attempt =
                hl_waiters_seq(lock->client->waiters, ch.s, ch.len);
            hl_aux_name_done(&ch);
        }
    }
    op->retry_after = false;
    op->attempt_sent = hl_monotime_now();
}

/* The attempt is on its way: its answer names op. */
static void attempt_sent(hl_acquire_op *op)
{
    hl_timer_stop(&op->timer);
    op->in_flight++;
    op->state = HL_ACQUIRE_ATTEMPTING;
    hl_op_park(&op->op, false);
    if (op->lock->kind->leave != NULL && op->wait_ms != 0)
        op->placed = true;
}

static void send_attempt(hl_acquire_op *op)
{
    hilock_lock *lock = op->lock;
    if (!hl_lock_usable(lock)) {
        op_finish(op, HILOCK_ECLOSED, NULL, "client closed");
        return;
    }
    hl_attempt_args args;
    char field[HILOCK_CLIENT_ID_LEN + 22];
    prepare_attempt(op, &args, field, sizeof field);
    /* Under a replica acknowledgement policy the attempt's answer comes
     * through its WAIT; a read takes nothing to acknowledge. */
    attempt_send s = {lock, &args};
    int rc = lock->kind->reads_only
                 ? send_attempt_now(&s, on_attempt_reply, op)
                 : hl_lock_write(lock, send_attempt_now, &s, on_attempt_reply,
                                 op);
    if (rc != HILOCK_OK) {
        /* A refusal by the kind says why in the thread's detail. */
        op_finish(op, rc, NULL,
                  rc == HILOCK_ECLOSED   ? "client closed"
                  : rc == HILOCK_ENOMEM ? "out of memory"
                                        : hilock_last_error());
        return;
    }
    attempt_sent(op);
}

/* ---- an attempt riding on a release (ride.h) ---------------------------- */

/* The handle's oldest waiter listening on its own channel: the one a
 * channel_per_owner kind's release most likely wakes. */
static hl_acquire_op *oldest_listening(hilock_lock *lock)
{
    hl_acquire_op *op = lock->ops;
    while (op != NULL && !(op->subscribed && op->state == HL_ACQUIRE_WAITING))
        op = op->next;
    return op;
}

/* The waiter pick finds among the client's waiters on lock's channel. */
static hl_waiter *channel_waiter(hilock_lock *lock,
                                 hl_waiter *(*pick)(hl_waiters *,
                                                    const char *, size_t))
{
    hl_waiters *reg = lock->client != NULL ? lock->client->waiters : NULL;
    hl_aux_name ch;
    if (reg == NULL || hl_lock_channel(lock, &ch) != 0)
        return NULL;
    hl_waiter *w = pick(reg, ch.s, ch.len);
    hl_aux_name_done(&ch);
    return w;
}

/* The oldest idle waiter of the client's line on lock's name, as let_in
 * picks: those in flight asked for permits freed before this release,
 * and go their own way; the first idle one that asks for more than the
 * release frees stops the walk, so that nobody behind it passes it. */
static hl_acquire_op *next_in_line(hilock_lock *lock, int64_t amount)
{
    hl_waiter *w = channel_waiter(lock, hl_waiters_head);
    for (; w != NULL && w->fn == on_wake; w = w->next) {
        hl_acquire_op *o = w->data;
        if (o->lock->kind != lock->kind || !lined(o))
            return NULL;
        if (o->state != HL_ACQUIRE_WAITING || w->trying)
            continue;
        return o->amount > amount ? NULL : o;
    }
    return NULL;
}

/* The client's waiter a release would hand the freed lock on to
 * (hl_waiters_hand_on), when it is an acquire of lock's kind, on any
 * handle of the name: a queue_locally kind's waiters take turns across
 * its handles on the client's channel. */
static hl_acquire_op *next_queued(hilock_lock *lock)
{
    hl_waiter *w = channel_waiter(lock, hl_waiters_next_idle);
    if (w == NULL || w->fn != on_wake)
        return NULL;
    hl_acquire_op *o = w->data;
    return o->lock->kind == lock->kind && o->state == HL_ACQUIRE_WAITING
               ? o
               : NULL;
}

hl_acquire_op *hl_lock_ride(hilock_lock *lock, int64_t amount,
                            hl_ride_send_fn *send, void *ctx, int *rc)
{
    *rc = HILOCK_OK;
    if (lock->client == NULL || lock->kind->reads_only)
        return NULL;
    hl_acquire_op *op = lock->kind->in_line ? next_in_line(lock, amount)
                        : lock->kind->channel_per_owner
                            ? oldest_listening(lock)
                        : lock->kind->queue_locally ? next_queued(lock)
                                                    : NULL;
    if (op == NULL || remaining(op) <= 0 || !hl_lock_usable(op->lock) ||
        !hl_turn_idle(op->lock, op->owner))
        return NULL;
    (void)hl_turn_take(op->lock, &op->turn, op->owner, op_turn_go);
    hl_attempt_args args;
    char field[HILOCK_CLIENT_ID_LEN + 22];
    prepare_attempt(op, &args, field, sizeof field);
    *rc = send(ctx, &args);
    if (*rc != HILOCK_OK) {
        /* It waits on as it did; whatever woke it while it seemed to be
         * trying finds it idle again. */
        hl_turn_end(op->lock, &op->turn);
        (void)hl_waiter_done_trying(&op->waiter);
        return NULL;
    }
    attempt_sent(op);
    return op;
}

/* Whether the rider's part of the answer grants it what it asked for. */
static bool ride_takes(const hl_acquire_op *op, int status,
                       const hilock_reply *reply)
{
    if (status != HILOCK_OK || op->state != HL_ACQUIRE_ATTEMPTING)
        return false;
    hl_acquire_result res = {0};
    op->lock->kind->parse_attempt(reply, &res);
    return res.outcome == HL_ACQ_ACQUIRED;
}

/* An error reply's copy, for the rider of a request that failed so. */
static hilock_reply *error_copy(const hilock_reply *r)
{
    if (r == NULL || r->str == NULL)
        return NULL;
    hilock_reply *c = hl_calloc(1, sizeof *c);
    if (c == NULL)
        return NULL;
    c->type = r->type;
    c->len = r->len;
    c->str = hl_memdup(r->str, r->len + 1);
    if (c->str == NULL) {
        hl_free(c);
        return NULL;
    }
    return c;
}

void hl_ride_reply(hl_acquire_op *rider, int status, hilock_reply *reply,
                   const char *what, hl_request_fn *carrier, void *data,
                   bool *took)
{
    bool ran = status == HILOCK_OK || status == HILOCK_ENOACK;
    if (ran && reply != NULL && reply->type == HILOCK_REPLY_ARRAY &&
        reply->elements == 2 &&
        reply->element[1]->type == HILOCK_REPLY_ARRAY) {
        hilock_reply *given = reply->element[0];
        hilock_reply *taken = reply->element[1];
        reply->elements = 0;
        hilock_reply_free(reply);
        if (took != NULL)
            *took = ride_takes(rider, status, taken);
        carrier(data, status, given);
        on_attempt_reply(rider, status, taken);
        return;
    }
    if (ran) {
        /* Neither part can be read: both ran, or neither did, as far as
         * the client can tell. */
        status = hl_fail(HILOCK_EPROTO,
                         "unexpected reply to a %s that carried a waiter's "
                         "attempt",
                         what);
    }
    hilock_reply *theirs = status == HILOCK_EREDIS ? error_copy(reply) : NULL;
    carrier(data, status, reply);
    on_attempt_reply(rider, status, theirs);
}

bool hl_lock_hand_on(hilock_lock *lock)
{
    if (!lock->kind->hand_on || lock->client == NULL)
        return false;
    if (!lock->kind->channel_per_owner) {
        hl_aux_name ch;
        if (hl_lock_channel(lock, &ch) != 0)
            return false;
        bool woken = hl_waiters_hand_on(lock->client->waiters, ch.s, ch.len);
        hl_aux_name_done(&ch);
        return woken;
    }
    /* Each waiter has its own channel, and the release wakes the head of
     * the server's queue on it.  Guess that the oldest local waiter is that
     * head and let its attempt follow the release: the attempt's script
     * grants only to the head, so a wrong guess costs one request. */
    hl_acquire_op *oldest = oldest_listening(lock);
    if (oldest == NULL)
        return false;
    attempt(oldest);
    return false; /* no message is owed to the guess */
}

static void op_start(hl_op *o)
{
    hl_acquire_op *op = (hl_acquire_op *)o;
    hilock_lock *lock = op->lock;
    if (!hl_lock_usable(lock) || hl_client_leases(lock->client) == NULL) {
        const char *why;
        int status = hl_lock_gone(lock, &why);
        op_finish(op, status, NULL, why);
        return;
    }
    op->linked = true;
    op->started_at = hl_monotime_now();
    hl_timer_init(&op->timer, lock->client->loop, on_timer, op);
    op->prev = lock->ops_tail;
    if (lock->ops_tail)
        lock->ops_tail->next = op;
    else
        lock->ops = op;
    lock->ops_tail = op;
    op->deadline = hl_wait_deadline(op->wait_ms);
    if (lined(op)) {
        /* It joins the line; it listens only once the server has told it
         * the lock is held, since until then its turn comes from the
         * waiter before it. */
        hl_waiters *reg = hl_client_waiters(lock->client);
        hl_aux_name ch;
        if (reg == NULL || hl_lock_channel(lock, &ch) != 0) {
            op_finish(op, HILOCK_ENOMEM, NULL, "out of memory waiting");
            return;
        }
        int rc = hl_waiter_join(reg, &op->waiter, ch.s, ch.len,
                                lock->kind->wake_all, on_wake, op);
        hl_aux_name_done(&ch);
        if (rc < 0) {
            op_finish(op, HILOCK_ENOMEM, NULL, "out of memory waiting");
            return;
        }
        op->subscribed = true;
        if (line_head(op))
            attempt(op);
        else
            wait_for(op, -1); /* its turn comes when those before it go */
        return;
    }
    hl_hold *h = hl_hold_find(lock, op->owner);
    bool reentry = h != NULL && !h->lost && h->count > 0;
    hl_waiters *reg = lock->client->waiters;
    hl_aux_name ch;
    if (op->wait_ms != 0 && !reentry && reg != NULL &&
        lock->kind->queue_locally && hl_lock_channel(lock, &ch) == 0) {
        /* Others of this client already wait for this lock: queue behind
         * them rather than race them.  A release wakes the oldest, and a
         * waiter leaving without the lock wakes the next, so the queue
         * always moves. */
        bool queued = hl_waiters_queued(reg, ch.s, ch.len) &&
                      hl_waiter_add(reg, &op->waiter, ch.s, ch.len,
                                    lock->kind->wake_all, on_wake, op) >= 0;
        hl_aux_name_done(&ch);
        if (queued) {
            op->subscribed = true;
            /* Where the server lines up clients, a waiter's attempts keep
             * its client's place there, however long the waiters before
             * it hold. */
            wait_for(op, lock->kind->line_per_client
                             ? HL_MS(lock->client->opts->waiter_timeout_ms) / 3
                             : -1);
            return;
        }
    }
    attempt(op);
}

int hl_check_acquire_args(uint64_t owner, int64_t wait_ms, int64_t lease_ms)
{
    if (owner == 0)
        return hl_fail(HILOCK_EINVAL, "owner id 0 is reserved");
    if (wait_ms < 0 && wait_ms != HILOCK_WAIT_FOREVER)
        return hl_fail(HILOCK_EINVAL, "wait_ms must be >= 0 or "
                                      "HILOCK_WAIT_FOREVER");
    if (lease_ms < 0)
        return hl_fail(HILOCK_EINVAL, "lease_ms must be > 0 or "
                                      "HILOCK_LEASE_WATCHDOG");
    /* Refused rather than clamped: a caller asking for more than three
     * decades most likely meant "until release", which is the watchdog,
     * and a clamp would hand them a lease they did not ask for. */
    if (lease_ms > HILOCK_MAX_LEASE_MS)
        return hl_fail(HILOCK_EINVAL,
                       "lease_ms %lld is too large: at most %lld "
                       "(HILOCK_MAX_LEASE_MS); for a hold until release use "
                       "HILOCK_LEASE_WATCHDOG",
                       (long long)lease_ms, (long long)HILOCK_MAX_LEASE_MS);
    return HILOCK_OK;
}

hl_monotime hl_wait_deadline(int64_t wait_ms)
{
    if (wait_ms == 0)
        return 0;
    /* Waits too long to represent are waits forever. */
    if (wait_ms < 0)
        return INT64_MAX;
    return hl_after_ms(hl_monotime_now(), wait_ms);
}

static void op_cancel(hl_op *o, int status)
{
    op_finish((hl_acquire_op *)o, status, NULL,
              status == HILOCK_ETIMEDOUT
                  ? "the loop thread did not answer in time; the acquire "
                    "was cancelled"
                  : "acquire cancelled");
}

static void op_complete(hl_op *o)
{
    hl_acquire_op *op = (hl_acquire_op *)o;
    op->cb(op->lock, o->status, o->status == HILOCK_OK ? &op->got : NULL,
           op->user_data);
}

static void op_destroy(hl_op *o)
{
    hl_acquire_op *op = (hl_acquire_op *)o;
    hl_acquire_ids_remove(op); /* one that never started */
    hl_lock_unref(op->lock);
    hl_free(op);
}

static const hl_op_type acquire_type = {
    .start = op_start,
    .cancel = op_cancel,
    .complete = op_complete,
    .destroy = op_destroy,
    .bounded = true,
};

static int start_acquire(hilock_lock *lock, uint64_t owner, int64_t amount,
                         int64_t wait_ms, int64_t lease_ms, unsigned flags,
                         hilock_acquire_cb *cb, void *user_data,
                         uint64_t *op_id, uint64_t *token)
{
    if (lock == NULL)
        return hl_fail(HILOCK_EINVAL, "lock is NULL");
    int bad = hl_check_acquire_args(owner, wait_ms, lease_ms);
    if (bad != HILOCK_OK)
        return bad;
    if ((flags & ~HILOCK_ACQUIRE_FENCED) != 0)
        return hl_fail(HILOCK_EINVAL, "unknown acquire flags");
    hilock_client *c = hl_lock_client_get(lock);
    if (c == NULL)
        return hl_fail(HILOCK_ECLOSED, "client closed");
    hl_acquire_op *op = hl_calloc(1, sizeof *op);
    if (op == NULL) {
        hl_client_unref(c);
        return hl_fail(HILOCK_ENOMEM, "out of memory for an acquire");
    }
    hl_op_init(&op->op, &acquire_type);
    op->lock = lock;
    op->owner = owner;
    op->wait_ms = wait_ms;
    op->lease_ms = lease_ms;
    op->amount = amount;
    op->flags = flags;
    op->cb = cb;
    op->user_data = user_data;
    hl_lock_ref(lock);
    int rc;
    if (cb == NULL) {
        int64_t value = 0;
        op->op.stay_asleep = hl_lock_taking_turns(lock);
        rc = hl_op_run_blocking(c, &op->op, hl_blocking_limit_us(c->opts, wait_ms),
                                &value, NULL);
        if (token)
            *token = rc == HILOCK_OK ? (uint64_t)value : 0;
    } else {
        hl_acquire_ids_add(op);
        if (op_id)
            *op_id = op->op.id;
        rc = hl_op_submit_or_drop(c, &op->op);
    }
    hl_client_unref(c);
    return rc;
}

int hl_acquire(hilock_lock *lock, uint64_t owner, int64_t wait_ms,
               int64_t lease_ms, unsigned flags, hilock_acquire_cb *cb,
               void *user_data, uint64_t *op_id, uint64_t *token)
{
    return start_acquire(lock, owner, 1, wait_ms, lease_ms, flags, cb,
                         user_data, op_id, token);
}

int hl_acquire_amount(hilock_lock *lock, uint64_t owner, int64_t amount,
                      int64_t wait_ms, int64_t lease_ms, hilock_acquire_cb *cb,
                      void *user_data, uint64_t *op_id)
{
    return start_acquire(lock, owner, amount, wait_ms, lease_ms, 0, cb,
                         user_data, op_id, NULL);
}

uint64_t hl_fresh_owner(void)
{
    static atomic_uint_fast64_t next_owner = 1;
    return atomic_fetch_add(&next_owner, 1);
}

int hilock_lock_acquire_async(hilock_lock *lock, uint64_t owner,
                              int64_t wait_ms, int64_t lease_ms,
                              unsigned flags, hilock_acquire_cb *cb,
                              void *user_data, uint64_t *op_id)
{
    if (lock == NULL || cb == NULL)
        return hl_fail(HILOCK_EINVAL, "NULL argument");
    return hl_acquire(lock, owner, wait_ms, lease_ms, flags, cb, user_data,
                      op_id, NULL);
}

/* A cancel by id, looked up on the loop thread, on the cancelling
 * thread's stack: not bounded and never allocating, so that a client at
 * max_pending or out of memory can still shed its operations. */
typedef struct cancel_op {
    hl_op op;
    hilock_lock *lock;
    uint64_t id;
} cancel_op;

/* On the loop thread: an acquire still queued there never starts, a
 * started one ends now with HILOCK_ECANCELED. */
static int cancel_now(hilock_lock *lock, uint64_t id)
{
    hl_acquire_op *op = hl_acquire_ids_find(lock, id);
    if (op == NULL)
        return hl_fail(HILOCK_ENOTFOUND, "no pending acquire with id %llu",
                       (unsigned long long)id);
    hl_op_cancel(&op->op, HILOCK_ECANCELED);
    hl_op_unref(&op->op);
    return HILOCK_OK;
}

static void cancel_start(hl_op *o)
{
    cancel_op *c = (cancel_op *)o;
    int rc = cancel_now(c->lock, c->id);
    hl_op_done(o, rc, 0, NULL, rc ? hilock_last_error() : NULL);
}

static void cancel_on_stack(hl_op *o) { (void)o; }

static const hl_op_type cancel_type = {
    .start = cancel_start,
    .destroy = cancel_on_stack,
};

/* On the loop thread of another client, which must not wait for this
 * one's: the cancel travels inside the acquire's own op (no memory, no
 * wait) and the acquire ends on its loop soon after. */
static int cancel_handed_over(hilock_lock *lock, uint64_t id)
{
    hl_acquire_op *op = hl_acquire_ids_find(lock, id);
    if (op == NULL)
        return hl_fail(HILOCK_ENOTFOUND, "no pending acquire with id %llu",
                       (unsigned long long)id);
    int rc = hl_op_cancel(&op->op, HILOCK_ECANCELED);
    hl_op_unref(&op->op);
    return rc;
}

int hilock_lock_cancel(hilock_lock *lock, uint64_t op_id)
{
    if (lock == NULL)
        return hl_fail(HILOCK_EINVAL, "lock is NULL");
    hilock_client *c = hl_lock_client_get(lock);
    if (c == NULL)
        return hl_fail(HILOCK_ECLOSED, "client closed");
    int rc;
    if (hl_client_in_loop(c)) {
        rc = cancel_now(lock, op_id);
    } else if (!hl_op_caller_may_wait()) {
        rc = cancel_handed_over(lock, op_id);
    } else {
        /* Anywhere else the caller may wait for the loop thread to look
         * the acquire up, which tells it whether the cancel came in time
         * and lets the callback run before this returns. */
        cancel_op co;
        hl_op_init(&co.op, &cancel_type);
        co.lock = lock;
        co.id = op_id;
        rc = hl_op_call_and_wait(c, &co.op);
    }
    hl_client_unref(c);
    return rc;
}
