/* Release, force release and the read-only queries of a lock. */
#include <stdio.h>
#include <string.h>

#include "core/base/alloc.h"
#include "core/base/error_detail.h"
#include "core/engine/again.h"
#include "core/engine/compose.h"
#include "core/engine/engine_internal.h"
#include "core/engine/ride.h"
#include "core/engine/unacked.h"
#include "core/config/option_values.h"

typedef struct lock_call {
    hl_op op; /* first */
    hilock_lock *lock;
    hl_lock_call_kind kind;
    uint64_t owner;
    hilock_lock_cb *cb; /* NULL: a blocking caller waits */
    void *user_data;
    bool lease_was_releasing; /* this release set the lease aside */
    bool handed_on;           /* a local waiter was woken with it */
    hl_acquire_op *rider;     /* a local waiter's attempt rides on it */
    bool rider_took;          /* and took the lock it freed */
    bool full_form;           /* a lean release was sent back for it */
    unsigned changes_at_send; /* the client's master changes then */
    /* A release into a condition's line: its waiter's entry. */
    const hl_cond_entry *cond;
    /* A release a replica refused is made again on the master. */
    hl_again again;
} lock_call;

static void release_again(void *data);

static void call_finish(lock_call *call, int status, int64_t value,
                        const char *detail)
{
    hl_op_done(&call->op, status, value, NULL, detail);
}

static void release_done(lock_call *call, int status, hilock_reply *reply)
{
    hilock_lock *lock = call->lock;
    hl_hold *h = hl_hold_find(lock, call->owner);
    if (h)
        h->releases_in_flight--;
    if (call->cond != NULL && (status == HILOCK_OK || status == HILOCK_ENOACK) &&
        reply != NULL && reply->type == HILOCK_REPLY_INTEGER &&
        reply->integer == HL_COND_HELD_TWICE) {
        /* Nothing changed: the hold stands as it was. */
        if (h && call->lease_was_releasing && hl_hold_lease(h))
            hl_lease_set_releasing(hl_hold_lease(h), false);
        hilock_reply_free(reply);
        call_finish(call, HILOCK_EINVAL,
                    0, "the server counts this owner's hold more than "
                       "once: a condition is waited on with one hold");
        return;
    }
    /* A release the replicas did not acknowledge (replica policy) still
     * freed the lock on the master, and the caller cannot undo it: it
     * stands as done.  A failover before the replicas have it brings the
     * hold back on the new master; the handle keeps the release, and
     * makes it again there (unacked.h), so that others do not wait for
     * the hold's lease to run out (docs/guide/replicas-and-sentinel.md, "Replicated Redis and
     * Sentinel"). */
    bool short_of_ack = status == HILOCK_ENOACK;
    int64_t lease_ms = h ? h->lease_ms : 0;
    if (short_of_ack)
        status = HILOCK_OK;
    int64_t left = 0;
    hl_release_outcome out =
        status == HILOCK_OK
            ? lock->kind->parse_release(
                  hl_script_answer(lock->client, reply), &left)
            : HL_REL_BAD_REPLY;
    if (out == HL_REL_FULL_FORM && !call->full_form) {
        /* A lean release found clients in line and changed nothing: the
         * full form serves them.  The handle counts as contended, so that
         * the release made again goes in full. */
        hilock_reply_free(reply);
        if (h && call->lease_was_releasing && hl_hold_lease(h))
            hl_lease_set_releasing(hl_hold_lease(h), false);
        call->lease_was_releasing = false;
        hl_aux_name woken;
        if (call->handed_on && lock->client &&
            hl_lock_channel(lock, &woken) == 0) {
            /* Not freed: the woken waiter must not count on it. */
            hl_waiters_hand_on_undone(lock->client->waiters, woken.s,
                                      woken.len);
            hl_aux_name_done(&woken);
        }
        call->handed_on = false;
        call->full_form = true;
        hl_lock_saw_others(lock);
        release_again(call);
        return;
    }
    /* A script that refused a value it found on the server says which. */
    char foreign[HL_FOREIGN_DETAIL_MAX] = "";
    if (status == HILOCK_OK && out == HL_REL_BAD_REPLY)
        (void)hl_foreign_detail(reply, foreign, sizeof foreign);
    hl_aux_name ch;
    if (call->handed_on && lock->client && out != HL_REL_FREED &&
        hl_lock_channel(lock, &ch) == 0) {
        /* No message will come for the waiter woken with the release: if
         * the lock was freed, its attempt is on its way; if not, the next
         * waiter must not wait for a message either. */
        if (out == HL_REL_FREED_ELSEWHERE || out == HL_REL_FREED_OPEN)
            hl_waiters_hand_on_unheard(lock->client->waiters, ch.s, ch.len);
        else
            hl_waiters_hand_on_undone(lock->client->waiters, ch.s, ch.len);
        hl_aux_name_done(&ch);
    } else if (out == HL_REL_FREED_OPEN && !call->rider_took) {
        /* No message comes: the client's next waiter is woken here,
         * unless the rider took the lock, whose release will. */
        hl_lock_freed_here(lock);
    }
    /* Refused (by the server, or by the script for a value it found),
     * or withdrawn by a blocking caller that gave up before it was
     * written (HILOCK_ECANCELED): it did not run. */
    if (foreign[0])
        status = HILOCK_EPROTO;
    if (status == HILOCK_EREDIS || status == HILOCK_ECLOSED ||
        status == HILOCK_ECANCELED || foreign[0]) {
        char why[HL_DETAIL_MAX];
        snprintf(why, sizeof why, "%s",
                 foreign[0] ? foreign
                 : reply    ? reply->str
                            : hilock_last_error());
        if (h && call->lease_was_releasing && hl_hold_lease(h))
            hl_lease_set_releasing(hl_hold_lease(h), false);
        if (status == HILOCK_EREDIS && !foreign[0] &&
            hl_again_after_refusal(&call->again, lock,
                                   reply ? reply->str : NULL)) {
            call->lease_was_releasing = false;
            call->handed_on = false;
            hilock_reply_free(reply);
            return;
        }
        hilock_reply_free(reply);
        call_finish(call, status, 0, why);
        return;
    }
    if (status != HILOCK_OK) {
        /* Unknown whether the server ran it.  Count it as done, and bring
         * the server's count to the same, so both sides agree, and say so:
         * a caller told only "timed out" would release again, and drop a
         * second hold. */
        char why[HL_DETAIL_MAX];
        snprintf(why, sizeof why, "%s; counted as released (the server "
                                  "is brought to agree): do not release "
                                  "again for it",
                 hilock_last_error());
        status = HILOCK_EINDOUBT;
        if (h) {
            if (h->count > 0)
                h->count--;
            if (h->count <= 0 && h->releases_in_flight == 0)
                hl_hold_done(h);
            else if (hl_hold_lease(h) && call->lease_was_releasing)
                hl_lease_set_releasing(hl_hold_lease(h), false);
            hl_reconcile_start(lock, call->owner, NULL, NULL, 0, lease_ms);
        }
        call_finish(call, status, 0, why);
        return;
    }
    hilock_reply_free(reply);
    switch (out) {
    case HL_REL_NOT_OWNER: {
        bool lost = h != NULL && (h->lost || h->count > 0);
        if (h && h->releases_in_flight == 0)
            hl_hold_drop(h);
        if (lost)
            call_finish(call, HILOCK_ELEASELOST, 0,
                        "the lease was lost before this release");
        else
            call_finish(call, HILOCK_ENOTOWNER, 0,
                        "this owner does not hold the lock");
        return;
    }
    case HL_REL_STILL_HELD:
    case HL_REL_FREED:
    case HL_REL_FREED_ELSEWHERE:
    case HL_REL_FREED_OPEN:
    case HL_REL_OWNER_DONE:
        if (h && h->lost) {
            /* A loss already reported stands, even if a late renewal kept
             * the key alive within the drift margin. */
            if (h->releases_in_flight == 0)
                hl_hold_drop(h);
            call_finish(call, HILOCK_ELEASELOST, 0,
                        "the lease was lost before this release");
            return;
        }
        if (short_of_ack && lock->client)
            hl_unacked_hold_release(lock, call->owner, lease_ms,
                                    call->changes_at_send);
        if (h && out == HL_REL_STILL_HELD) {
            /* The client's own count, not the server's: a grant the
             * server counts but the client does not (a cancelled
             * acquire's) is being given back, and is no hold of the
             * caller's. */
            left = h->count - 1 < left ? h->count - 1 : left;
            if (left <= 0)
                out = HL_REL_OWNER_DONE;
        }
        if (out != HL_REL_STILL_HELD) {
            if (lock->client != NULL)
                hl_client_count_hold(
                    lock->client,
                    h && hl_hold_lease(h)
                        ? hl_monotime_now() - hl_hold_lease(h)->started
                        : -1);
            if (h && h->releases_in_flight == 0)
                hl_hold_done(h);
            else if (h)
                h->count = 0;
            call_finish(call, HILOCK_OK, 0, NULL);
            return;
        }
        if (h) {
            h->count = left;
            if (hl_hold_lease(h) && call->lease_was_releasing)
                hl_lease_set_releasing(hl_hold_lease(h), false);
        }
        call_finish(call, HILOCK_OK, left, NULL);
        return;
    case HL_REL_FULL_FORM:
    case HL_REL_BAD_REPLY:
        call_finish(call, HILOCK_EPROTO, 0, "unexpected release reply");
        return;
    }
}

static void on_reply(void *data, int status, hilock_reply *reply)
{
    lock_call *call = data;
    if (call->kind == CALL_RELEASE) {
        release_done(call, status, reply);
        return;
    }
    /* A force release refused by a demoted master did not run: made
     * again there, as a release is. */
    if (call->kind == CALL_FORCE && status == HILOCK_EREDIS &&
        hl_again_after_refusal(&call->again, call->lock,
                               reply ? reply->str : NULL)) {
        hilock_reply_free(reply);
        return;
    }
    if (status != HILOCK_OK) {
        char why[HL_DETAIL_MAX];
        snprintf(why, sizeof why, "%s",
                 reply ? reply->str : hilock_last_error());
        hilock_reply_free(reply);
        call_finish(call, status, 0, why);
        return;
    }
    int64_t value = 0;
    bool ok = true;
    const hilock_reply *answer;
    switch (call->kind) {
    case CALL_FORCE:
        answer = hl_script_answer(call->lock->client, reply);
        ok = answer->type == HILOCK_REPLY_INTEGER;
        value = answer->integer;
        break;
    case CALL_IS_LOCKED:
        ok = call->lock->kind->parse_query(HL_QUERY_LOCKED, reply, &value);
        break;
    case CALL_HOLD_COUNT:
        ok = call->lock->kind->parse_query(HL_QUERY_HOLD_COUNT, reply,
                                           &value);
        break;
    case CALL_TTL:
        ok = call->lock->kind->parse_query(HL_QUERY_TTL, reply, &value);
        break;
    case CALL_RELEASE:
    case CALL_LEASE_LOST:
    case CALL_VALID_UNTIL:
        break;
    }
    char why[HL_FOREIGN_DETAIL_MAX] = "unexpected reply";
    if (!ok && call->kind == CALL_HOLD_COUNT &&
        reply->type == HILOCK_REPLY_STRING)
        /* A count some other program wrote in the owner's field. */
        hl_foreign_format(why, sizeof why, call->lock->name,
                          call->lock->name_len, reply->str, reply->len,
                          "a hold count");
    hilock_reply_free(reply);
    if (!ok)
        call_finish(call, HILOCK_EPROTO, 0, why);
    else
        call_finish(call, HILOCK_OK, value, NULL);
}

static int send_query(lock_call *call, hl_query q)
{
    hilock_lock *lock = call->lock;
    char field[HILOCK_CLIENT_ID_LEN + 22];
    size_t len = q == HL_QUERY_HOLD_COUNT
                     ? hl_owner_field(lock, call->owner, field, sizeof field)
                     : 0;
    _Atomic int *gate = hl_op_gate_requests(&call->op);
    int rc = lock->kind->query(lock, q, field, len, on_reply, call);
    hl_conn_gate_requests(gate);
    return rc;
}

typedef struct release_send {
    lock_call *call;
    hilock_lock *lock;
    const char *field;
    size_t field_len;
    int64_t lease_ms;
    const hl_cond_entry *cond;
    const hl_attempt_args *rider;
} release_send;

static int send_release_now(void *ctx, hl_request_fn *fn, void *data)
{
    release_send *s = ctx;
    if (s->rider != NULL)
        return s->lock->kind->release_riding(s->lock, s->field, s->field_len,
                                             s->lease_ms, s->rider, fn, data);
    if (s->cond != NULL)
        return s->lock->kind->release_into_cond(s->lock, s->field,
                                                s->field_len, s->lease_ms,
                                                s->cond, fn, data);
    return s->lock->kind->release(s->lock, s->field, s->field_len,
                                  s->lease_ms, fn, data);
}

/* The answer of a release that carried a waiter's attempt.  The release
 * ends first, as the server ran them. */
static void on_reply_with_rider(void *data, int status, hilock_reply *reply)
{
    lock_call *call = data;
    hl_acquire_op *rider = call->rider;
    call->rider = NULL;
    call->rider_took = false;
    hl_ride_reply(rider, status, reply, "release", on_reply, call,
                  &call->rider_took);
}

/* Send the release with the rider's attempt a. */
static int send_with_rider(void *ctx, const hl_attempt_args *a)
{
    release_send *s = ctx;
    s->rider = a;
    int rc = hl_lock_write(s->lock, send_release_now, s, on_reply_with_rider,
                           s->call);
    s->rider = NULL;
    return rc;
}

static void call_start(hl_op *op)
{
    lock_call *call = (lock_call *)op;
    hilock_lock *lock = call->lock;
    hl_conn *conn = hl_lock_conn(lock);
    if (conn == NULL || lock->destroyed) {
        const char *why;
        int status = hl_lock_gone(lock, &why);
        call_finish(call, status, 0, why);
        return;
    }
    int rc = HILOCK_OK;
    switch (call->kind) {
    case CALL_RELEASE: {
        hl_hold *h = hl_hold_find(lock, call->owner);
        char field[HILOCK_CLIENT_ID_LEN + 22];
        size_t len = hl_owner_field(lock, call->owner, field, sizeof field);
        if (h != NULL && h->lost && h->releases_in_flight == 0) {
            /* The loss was reported already: say so now rather than after
             * a round trip to a server that may be down, and clear what
             * may be left of the hold there in the background. */
            int64_t lease_ms = h->lease_ms;
            hl_hold_drop(h);
            hl_reconcile_start(lock, call->owner, NULL, NULL, 0, lease_ms);
            call_finish(call, HILOCK_ELEASELOST, 0,
                        "the lease was lost before this release");
            return;
        }
        if (h != NULL && h->older_lost &&
            h->count - h->releases_in_flight <= 0) {
            /* Every hold the client counts is being released already:
             * this release is of an older one, which an acquire found
             * lost and reported.  The server has nothing of it. */
            h->older_lost = false;
            if (h->count <= 0 && h->releases_in_flight == 0)
                hl_hold_drop(h);
            call_finish(call, HILOCK_ELEASELOST, 0,
                        "the lease was lost before this release");
            return;
        }
        /* The watchdog timeout from the options, not the lease engine: a
         * release before any acquire would have to make the engine, and
         * may find no memory for it. */
        int64_t lease = h && h->lease_ms > 0
                            ? h->lease_ms
                            : lock->client->opts->watchdog_timeout_ms;
        if (h) {
            /* A release of the last hold not already being released may
             * free the lock: renewals must not read the freed key as a
             * lost lease. */
            if (h->count - h->releases_in_flight == 1 && hl_hold_lease(h) &&
                !h->lost) {
                hl_lease_set_releasing(hl_hold_lease(h), true);
                call->lease_was_releasing = true;
            }
            h->releases_in_flight++;
        }
        call->changes_at_send = lock->client->master_changes;
        release_send s = {call, lock, field, len, lease, call->cond, NULL};
        _Atomic int *gate = hl_op_gate_requests(op);
        /* A release that frees the lock takes the next local waiter's
         * attempt along, where the kind's release can carry it: not a
         * holder's with a lock delay, which needs the delayed release's
         * key and words (its client's waiters attempt on their own). */
        if (call->lease_was_releasing && call->cond == NULL &&
            lock->kind->release_riding != NULL &&
            hl_lock_delay_ms(lock) == 0)
            call->rider = hl_lock_ride(lock, 1, send_with_rider, &s, &rc);
        if (call->rider == NULL && rc == HILOCK_OK)
            rc = hl_lock_write(lock, send_release_now, &s, on_reply, call);
        hl_conn_gate_requests(gate);
        if (rc != HILOCK_OK && h) {
            h->releases_in_flight--;
            if (call->lease_was_releasing && hl_hold_lease(h))
                hl_lease_set_releasing(hl_hold_lease(h), false);
        } else if (call->lease_was_releasing && call->rider == NULL) {
            /* This release frees the lock: the next local waiter's
             * attempt can follow it in the same write. */
            call->handed_on = hl_lock_hand_on(lock);
        }
        break;
    }
    case CALL_FORCE: {
        _Atomic int *gate = hl_op_gate_requests(op);
        rc = lock->kind->force_release(lock, on_reply, call);
        hl_conn_gate_requests(gate);
        break;
    }
    case CALL_IS_LOCKED:
        rc = send_query(call, HL_QUERY_LOCKED);
        break;
    case CALL_HOLD_COUNT:
        rc = send_query(call, HL_QUERY_HOLD_COUNT);
        break;
    case CALL_TTL:
        rc = send_query(call, HL_QUERY_TTL);
        break;
    case CALL_LEASE_LOST:
    case CALL_VALID_UNTIL:
        call_finish(call, HILOCK_OK,
                    hl_hold_knowledge(lock, call->kind, call->owner), NULL);
        return;
    }
    if (rc != HILOCK_OK)
        call_finish(call, rc, 0, hl_send_failure(rc));
}

static void release_again(void *data)
{
    lock_call *call = data;
    call_start(&call->op);
}

/* Only at the client's close (the op is live for this alone): a release
 * waiting to be made again ends; one in flight ends with its request. */
static void call_cancel(hl_op *op, int status)
{
    lock_call *call = (lock_call *)op;
    if (hl_again_stop(&call->again))
        call_finish(call, status, 0,
                    call->kind == CALL_FORCE
                        ? HL_AGAIN_CLOSED("force release")
                        : HL_AGAIN_CLOSED("release"));
}

static void call_complete(hl_op *op)
{
    lock_call *call = (lock_call *)op;
    call->cb(call->lock, op->status, op->value, call->user_data);
}

static void call_destroy(hl_op *op)
{
    lock_call *call = (lock_call *)op;
    hl_lock_unref(call->lock);
    hl_free(call);
}

static const hl_op_type lock_call_type = {
    .start = call_start,
    .cancel = call_cancel,
    .complete = call_complete,
    .destroy = call_destroy,
    .bounded = true,
    .withdrawable = true,
};

/* A call of kind for owner, into a condition's line when cond is set:
 * async with cb, else blocking with the value in *value. */
static int lock_call_start(hilock_lock *lock, hl_lock_call_kind kind,
                           uint64_t owner, const hl_cond_entry *cond,
                           hilock_lock_cb *cb, void *user_data,
                           int64_t *value)
{
    hilock_client *c = hl_lock_client_get(lock);
    if (c == NULL)
        return hl_fail(HILOCK_ECLOSED, "client closed");
    lock_call *call = hl_calloc(1, sizeof *call);
    if (call == NULL) {
        hl_client_unref(c);
        return hl_fail(HILOCK_ENOMEM, "out of memory");
    }
    hl_op_init(&call->op, &lock_call_type);
    hl_again_init(&call->again, lock, release_again, call);
    call->lock = lock;
    call->kind = kind;
    call->owner = owner;
    call->cb = cb;
    call->user_data = user_data;
    call->cond = cond;
    hl_lock_ref(lock);
    int rc;
    if (cb == NULL) {
        call->op.stay_asleep = hl_lock_taking_turns(lock);
        rc = hl_op_run_blocking(c, &call->op, hl_blocking_limit_us(c->opts, 0),
                                value, NULL);
    } else {
        rc = hl_op_submit_or_drop(c, &call->op);
    }
    hl_client_unref(c);
    return rc;
}

int hl_lock_call(hilock_lock *lock, hl_lock_call_kind kind, uint64_t owner,
                 hilock_lock_cb *cb, void *user_data, int64_t *value)
{
    if (lock == NULL)
        return hl_fail(HILOCK_EINVAL, "lock is NULL");
    return lock_call_start(lock, kind, owner, NULL, cb, user_data, value);
}

static int submit_call(hilock_lock *lock, hl_lock_call_kind kind,
                       uint64_t owner, hilock_lock_cb *cb, void *user_data)
{
    if (lock == NULL || cb == NULL)
        return hl_fail(HILOCK_EINVAL, "NULL argument");
    return hl_lock_call(lock, kind, owner, cb, user_data, NULL);
}
int hilock_lock_release_async(hilock_lock *lock, uint64_t owner,
                              hilock_lock_cb *cb, void *user_data)
{
    if (owner == 0)
        return hl_fail(HILOCK_EINVAL, "owner id 0 is reserved");
    return submit_call(lock, CALL_RELEASE, owner, cb, user_data);
}

int hilock_lock_force_release_async(hilock_lock *lock, hilock_lock_cb *cb,
                                    void *user_data)
{
    return submit_call(lock, CALL_FORCE, 0, cb, user_data);
}

int hilock_lock_is_locked_async(hilock_lock *lock, hilock_lock_cb *cb,
                                void *user_data)
{
    return submit_call(lock, CALL_IS_LOCKED, 0, cb, user_data);
}

int hilock_lock_hold_count_async(hilock_lock *lock, uint64_t owner,
                                 hilock_lock_cb *cb, void *user_data)
{
    return submit_call(lock, CALL_HOLD_COUNT, owner, cb, user_data);
}

int hilock_lock_remaining_ttl_async(hilock_lock *lock, hilock_lock_cb *cb,
                                    void *user_data)
{
    return submit_call(lock, CALL_TTL, 0, cb, user_data);
}

int hl_release_owner(hilock_lock *lock, uint64_t owner, hilock_lock_cb *cb,
                     void *user_data)
{
    return hl_lock_call(lock, CALL_RELEASE, owner, cb, user_data, NULL);
}

int hl_release_owner_into_cond(hilock_lock *lock, uint64_t owner,
                               const hl_cond_entry *entry,
                               hilock_lock_cb *cb, void *user_data)
{
    if (lock == NULL || entry == NULL || cb == NULL)
        return hl_fail(HILOCK_EINVAL, "NULL argument");
    if (lock->kind->release_into_cond == NULL)
        return hl_fail(HILOCK_EINVAL, "a condition cannot wait on a %s",
                       lock->kind->name);
    return lock_call_start(lock, CALL_RELEASE, owner, entry, cb, user_data,
                           NULL);
}
