/* Multi-locks: all members, or a quorum of them (RedLock), taken as one.
 *
 * Everything about a group happens on one loop thread: its coordinator's
 * (the first member's client, or the RedLock's loop).  Members may live on
 * other loops; their callbacks come back to the coordinator as ops.
 * Each attempt asks every member at once with a single try; the outcome
 * is decided as soon as enough members said yes, or too many said no.
 * Members keep their leases with their own clients' watchdogs; the group
 * hears of a member's lost lease through a hold listener on the handle. */
#include <openssl/rand.h>
#include <stdio.h>
#include <string.h>

#include "core/base/alloc.h"
#include "core/base/error_detail.h"
#include "core/base/handle.h"
#include "core/engine/compose.h"
#include "multi_internal.h"

typedef struct acquire_op acquire_op;

/* One owner's hold of the group. */
typedef struct group_hold {
    struct group_hold *next;
    uint64_t owner;
    int64_t count;         /* acquires of the group by this owner */
    uint64_t granted;      /* bit i: member i holds for the owner */
    uint64_t lost_members; /* bit i: member i's lease was lost */
    uint64_t acquire_id;   /* the acquire that made it */
    bool lost;             /* fewer than a quorum left: reported */
} group_hold;

/* An acquire: the caller's operation, at home on the coordinator.  Each
 * member request names it and holds a reference to it, so a member whose
 * answer cannot reach the coordinator lets go of it from its own thread. */
struct acquire_op {
    hl_op op; /* first */
    hilock_multilock *m;
    acquire_op *next; /* in m->acquires */
    acquire_op *prev;
    uint64_t owner;
    int64_t wait_ms;
    int64_t lease_ms;
    hl_monotime deadline; /* INT64_MAX: forever */
    hl_monotime round_start;
    unsigned round;
    size_t yes, busy, errs;
    uint64_t granted;    /* members that granted in this round */
    uint64_t pending;    /* members not yet answered in this round */
    uint64_t member_ops[HILOCK_MAX_MEMBERS];
    hilock_member_result results[HILOCK_MAX_MEMBERS];
    size_t attempts;
    size_t granted_at_end; /* the outcome's count */
    int last_status;
    char last_detail[200];
    hl_timer backoff;
    bool started; /* listed in m->acquires, with its timer */
    bool done;
    bool round_open; /* answers of this round still count */
    bool settling;   /* the last round failed: waiting to learn why */
    hilock_multi_acquire_cb *cb; /* NULL: a blocking caller waits */
    void *user_data;
};

/* A member's answer to a round, on its way to the coordinator. */
typedef struct member_call {
    hl_op op; /* first */
    acquire_op *acq; /* referenced */
    size_t index;
    unsigned round;
    hl_monotime sent_at;
    int status;
    char detail[160];
} member_call;

static void attempt_round(acquire_op *acq);

static uint64_t bit(size_t i) { return (uint64_t)1 << i; }

static size_t popcount(uint64_t x) { return (size_t)__builtin_popcountll(x); }

void hl_multi_ref(hilock_multilock *m) { atomic_fetch_add(&m->refs, 1); }

void hl_multi_unref(hilock_multilock *m)
{
    if (atomic_fetch_sub(&m->refs, 1) != 1)
        return;
    for (group_hold *g = m->holds, *next; g != NULL; g = next) {
        next = g->next;
        hl_free(g);
    }
    hl_client_unref(m->coord);
    /* A stale copy of the handle, passed to destroy again, must find it
     * gone rather than a new group at the same address. */
    hl_handle_release(m);
}

void hl_multi_op_free(hl_op *op, hilock_multilock *m)
{
    hl_free(op);
    hl_multi_unref(m);
}

void hl_multi_finish_at_start(hl_op *op)
{
    hl_op_finish(op, HILOCK_OK, 0, NULL, NULL);
    hl_op_unref(op);
}

static group_hold *hold_find(hilock_multilock *m, uint64_t owner)
{
    for (group_hold *g = m->holds; g != NULL; g = g->next)
        if (g->owner == owner)
            return g;
    return NULL;
}

static void hold_unlink(hilock_multilock *m, group_hold *g)
{
    for (group_hold **p = &m->holds; *p != NULL; p = &(*p)->next) {
        if (*p == g) {
            *p = g->next;
            return;
        }
    }
}

static bool quarantined(const hilock_multilock *m, size_t i)
{
    hilock_client *c = m->members[i]->client;
    return m->redlock && c != NULL && hl_restart_quarantined(c);
}

/* A give-back: member i's grant to owner goes back.  One that fails
 * (an error from the server, or not sent at all) is not retried: the
 * member's client stops renewing the hold instead, so that the server
 * lets the grant expire within one lease rather than keep it for as long
 * as the client runs.  That hold is dropped only when it is this grant
 * alone (one count, no release under way), never a newer one. */
typedef struct give_back_call {
    hl_op op; /* first: when it must reach the member's loop */
    hilock_lock *lock; /* referenced while it travels */
    uint64_t owner;
} give_back_call;


static bool give_back_failed(int status)
{
    /* Released, not held, lost (its lease stopped already), or a closed
     * client (its holds dropped): nothing keeps renewing. */
    return status != HILOCK_OK && status != HILOCK_ENOTOWNER &&
           status != HILOCK_ELEASELOST && status != HILOCK_ECLOSED;
}

static void on_given_back(hilock_lock *lock, int status, int64_t value,
                          void *user_data)
{
    (void)value;
    give_back_call *gb = user_data;
    if (gb == NULL)
        return;
    if (give_back_failed(status))
        hl_lock_stop_renewing_grant(lock, gb->owner);
    hl_free(gb);
}

/* Drained by the member's closing: its holds went with it. */
static void stop_renewing_complete(hl_op *op)
{
    give_back_call *gb = (give_back_call *)op;
    if (op->status == HILOCK_OK)
        hl_lock_stop_renewing_grant(gb->lock, gb->owner);
}

static void stop_renewing_destroy(hl_op *op)
{
    give_back_call *gb = (give_back_call *)op;
    hl_lock_unref(gb->lock);
    hl_free(gb);
}

static const hl_op_type stop_renewing_type = {
    .start = hl_multi_finish_at_start,
    .complete = stop_renewing_complete,
    .destroy = stop_renewing_destroy,
    .bounded = false,
};

static void give_back(hilock_multilock *m, size_t i, uint64_t owner)
{
    hilock_lock *lock = m->members[i];
    give_back_call *gb = hl_calloc(1, sizeof *gb);
    if (gb != NULL) {
        gb->lock = lock;
        gb->owner = owner;
    }
    int rc = hilock_lock_release_async(lock, owner, on_given_back, gb);
    if (!give_back_failed(rc)) {
        if (rc != HILOCK_OK)
            hl_free(gb);
        return;
    }
    /* Not even sent: the member's thread stops renewing the hold.  With
     * no memory left for that either, the hold stays renewed until the
     * owner's next release of the member. */
    hilock_client *c = hl_lock_client_get(lock);
    if (c == NULL || gb == NULL) {
        hl_free(gb);
    } else {
        hl_op_init(&gb->op, &stop_renewing_type);
        hl_lock_ref(lock);
        hl_op_submit_or_drop(c, &gb->op);
    }
    if (c != NULL)
        hl_client_unref(c);
}

/* ---- acquire ----------------------------------------------------------- */

static void acquire_unlink(acquire_op *acq)
{
    hilock_multilock *m = acq->m;
    if (acq->prev)
        acq->prev->next = acq->next;
    else if (m->acquires == acq)
        m->acquires = acq->next;
    if (acq->next)
        acq->next->prev = acq->prev;
    acq->prev = acq->next = NULL;
}

/* Close the round: members that granted go back, members still asked are
 * cancelled (a grant that races the cancel goes back too). */
static void round_close(acquire_op *acq)
{
    hilock_multilock *m = acq->m;
    acq->round_open = false;
    for (size_t i = 0; i < m->n; i++) {
        if (acq->granted & bit(i))
            give_back(m, i, acq->owner);
        else if (acq->pending & bit(i))
            hilock_lock_cancel(m->members[i], acq->member_ops[i]);
    }
    acq->granted = 0;
}

/* The end of an acquire that started: the caller hears of it (its
 * callback, or its blocking wait), and the coordinator lets go of it. */
static void acquire_end(acquire_op *acq, int status, const char *detail)
{
    if (acq->done)
        return;
    acq->done = true;
    hilock_multilock *m = acq->m;
    if (acq->started) {
        acquire_unlink(acq);
        hl_timer_stop(&acq->backoff);
    }
    /* Cancelled members may answer inside round_close: the coordinator's
     * reference keeps acq until the end. */
    if (status != HILOCK_OK && acq->round_open)
        round_close(acq);
    acq->granted_at_end = popcount(acq->granted);
    int64_t validity_ms = 0;
    if (status == HILOCK_OK) {
        group_hold *g = hold_find(m, acq->owner);
        int64_t lease = acq->lease_ms > 0 ? acq->lease_ms : m->watchdog_ms;
        validity_ms =
            hl_validity(lease, acq->round_start, hl_monotime_now()) / 1000;
        if (g != NULL)
            acq->granted_at_end = popcount(g->granted);
    }
    hl_op_finish(&acq->op, status, validity_ms, NULL, detail);
    hl_op_unref(&acq->op);
}

static hl_monotime acquire_remaining(const acquire_op *acq)
{
    if (acq->deadline == INT64_MAX)
        return INT64_MAX;
    return hl_sat_sub(acq->deadline, hl_monotime_now());
}

static void on_backoff(hl_timer *t)
{
    acquire_op *acq = t->data;
    if (!acq->done)
        attempt_round(acq);
}

/* The round cannot succeed: give back, then wait a random while and try
 * again, or give up. */
static void round_failed(acquire_op *acq, int status, const char *detail)
{
    acq->last_status = status;
    snprintf(acq->last_detail, sizeof acq->last_detail, "%s", detail);
    round_close(acq);
    hl_monotime left = acquire_remaining(acq);
    if (acq->wait_ms == 0 || left <= 0) {
        acquire_end(acq, status, acq->last_detail);
        return;
    }
    /* Random back-off, growing with the attempts: contenders that failed
     * together must not all come back together. */
    unsigned shift = acq->attempts < 6 ? (unsigned)acq->attempts : 6;
    hl_monotime cap = HL_MS(5) << shift; /* 10 ms .. 320 ms */
    uint32_t r = 0;
    if (RAND_bytes((unsigned char *)&r, sizeof r) != 1)
        r = (uint32_t)hl_monotime_now();
    hl_monotime delay = cap / 2 + (hl_monotime)(r % (uint32_t)(cap / 2 + 1));
    if (delay > left)
        delay = left;
    hl_timer_arm(&acq->backoff, delay);
}

/* Whether a failed round is the acquire's last. */
static bool last_round(const acquire_op *acq)
{
    return acq->wait_ms == 0 || acquire_remaining(acq) <= 0;
}

/* Grants of a round that can no longer win go back at once: another
 * owner may be waiting for them. */
static void give_back_granted(acquire_op *acq)
{
    hilock_multilock *m = acq->m;
    for (size_t i = 0; i < m->n; i++)
        if (acq->granted & bit(i))
            give_back(m, i, acq->owner);
    acq->granted = 0;
}

/* A failed round's verdict: HILOCK_ENOQUORUM once its failures alone
 * rule out a quorum, HILOCK_EBUSY once they no longer can, 0 while the
 * members still asked could tip it either way. */
static int failed_verdict(const acquire_op *acq)
{
    const hilock_multilock *m = acq->m;
    size_t spare = m->n - m->quorum;
    if (acq->errs > spare)
        return HILOCK_ENOQUORUM;
    if (acq->errs + popcount(acq->pending) <= spare)
        return HILOCK_EBUSY;
    return 0;
}

/* End a round that can no longer win: no quorum when its failures alone
 * rule one out, else busy. */
static void fail_round(acquire_op *acq)
{
    if (acq->errs > acq->m->n - acq->m->quorum)
        round_failed(acq, HILOCK_ENOQUORUM,
                     "too many members failed or are quarantined");
    else
        round_failed(acq, HILOCK_EBUSY, "a member is held by another owner");
}

static void settle(acquire_op *acq)
{
    give_back_granted(acq);
    if (failed_verdict(acq) != 0)
        fail_round(acq);
}

static void decide(acquire_op *acq)
{
    hilock_multilock *m = acq->m;
    if (!acq->round_open)
        return;
    if (acq->settling) {
        settle(acq);
        return;
    }
    if (acq->yes >= m->quorum) {
        int64_t lease = acq->lease_ms > 0 ? acq->lease_ms : m->watchdog_ms;
        if (hl_validity(lease, acq->round_start, hl_monotime_now()) <= 0) {
            round_failed(acq, HILOCK_EEXPIRED,
                         "the members granted, but the lease had run out "
                         "by the time enough of them had");
            return;
        }
        group_hold *g = hl_calloc(1, sizeof *g);
        if (g == NULL) {
            round_failed(acq, HILOCK_ENOMEM, "out of memory");
            return;
        }
        g->owner = acq->owner;
        g->count = 1;
        g->granted = acq->granted;
        g->acquire_id = acq->op.id;
        g->next = m->holds;
        m->holds = g;
        /* Members still asked may grant yet: they join the hold. */
        acq->round_open = false;
        acq->last_status = HILOCK_OK;
        acquire_end(acq, HILOCK_OK, NULL);
        return;
    }
    size_t no = acq->busy + acq->errs;
    if (no <= m->n - m->quorum)
        return;
    if (m->redlock && failed_verdict(acq) == 0 && last_round(acq)) {
        /* "Held by another" came first, but the masters still asked may
         * yet fail in numbers that rule out a quorum whoever holds the
         * lock, and that is what the caller must hear: let them answer,
         * which the node timeout bounds.  A multi-lock's members have no
         * such bound, and its caller would rather not wait. */
        acq->settling = true;
        give_back_granted(acq);
        return;
    }
    fail_round(acq);
}

static void member_answered(member_call *mc)
{
    acquire_op *acq = mc->acq;
    hilock_multilock *m = acq->m;
    size_t i = mc->index;
    bool current = acq->round == mc->round && acq->round_open;
    if (mc->status == HILOCK_OK && quarantined(m, i)) {
        /* The master restarted while the request waited for a connection
         * and granted from a memory that may have lost another holder's
         * key: its vote does not count, and the grant goes back. */
        give_back(m, i, acq->owner);
        mc->status = HILOCK_ENOQUORUM;
        snprintf(mc->detail, sizeof mc->detail, "master quarantined");
        if (!current)
            return;
        acq->results[i].quarantined = true;
    }
    if (current) {
        acq->pending &= ~bit(i);
        acq->results[i].status = mc->status;
        acq->results[i].latency_us = hl_monotime_now() - mc->sent_at;
        if (mc->status == HILOCK_OK) {
            acq->yes++;
            acq->granted |= bit(i);
        } else if (mc->status == HILOCK_EBUSY) {
            acq->busy++;
        } else {
            acq->errs++;
            snprintf(acq->last_detail, sizeof acq->last_detail,
                     "member %zu: %s", i, mc->detail);
        }
        decide(acq);
    } else if (mc->status == HILOCK_OK) {
        /* A grant after the outcome: it joins the owner's hold when that
         * round won, else it goes back. */
        group_hold *g = hold_find(m, acq->owner);
        if (acq->round == mc->round && g != NULL &&
            g->acquire_id == acq->op.id && !g->lost && !(g->granted & bit(i)))
            g->granted |= bit(i);
        else
            give_back(m, i, acq->owner);
    }
}

/* The coordinator's thread.  Drained by its closing (HILOCK_ECLOSED),
 * the answer finds the acquire ended by hl_multi_close_all, and a grant
 * goes back from here. */
static void member_call_complete(hl_op *op)
{
    member_call *mc = (member_call *)op;
    if (op->status != HILOCK_OK && mc->status == HILOCK_OK) {
        give_back(mc->acq->m, mc->index, mc->acq->owner);
        mc->status = HILOCK_ECLOSED;
    }
    member_answered(mc);
}

/* Any thread. */
static void member_call_destroy(hl_op *op)
{
    member_call *mc = (member_call *)op;
    hl_op_unref(&mc->acq->op);
    hl_free(mc);
}

static const hl_op_type member_call_type = {
    .start = hl_multi_finish_at_start,
    .complete = member_call_complete,
    .destroy = member_call_destroy,
    .bounded = false,
};

static void on_member_acquired(hilock_lock *lock, int status,
                               const hilock_acquired *acquired,
                               void *user_data)
{
    (void)lock;
    (void)acquired;
    member_call *mc = user_data;
    mc->status = status;
    snprintf(mc->detail, sizeof mc->detail, "%s",
             status ? hilock_last_error() : "");
    acquire_op *acq = mc->acq;
    if (hl_op_submit(acq->m->coord, &mc->op) != HILOCK_OK) {
        /* The coordinator has closed, and its closing ended the acquire
         * there: nothing waits for this answer, and this is not the
         * thread to touch the group on.  A grant goes back; the member's
         * handle takes that from any thread. */
        if (status == HILOCK_OK)
            give_back(acq->m, mc->index, acq->owner);
        hl_op_unref(&mc->op);
    }
}

static void attempt_round(acquire_op *acq)
{
    hilock_multilock *m = acq->m;
    hl_op_ref(&acq->op); /* answers given at once must not free acq here */
    acq->round++;
    acq->attempts++;
    acq->round_open = true;
    acq->settling = false;
    acq->yes = acq->busy = acq->errs = 0;
    acq->granted = acq->pending = 0;
    acq->round_start = hl_monotime_now();
    for (size_t i = 0; i < m->n; i++) {
        acq->results[i] = (hilock_member_result){HILOCK_ECANCELED, -1, false};
        if (quarantined(m, i)) {
            acq->results[i].status = HILOCK_ENOQUORUM;
            acq->results[i].quarantined = true;
            acq->errs++;
            continue;
        }
        member_call *mc = hl_calloc(1, sizeof *mc);
        if (mc == NULL) {
            acq->results[i].status = HILOCK_ENOMEM;
            acq->errs++;
            continue;
        }
        hl_op_init(&mc->op, &member_call_type);
        mc->acq = acq;
        mc->index = i;
        mc->round = acq->round;
        mc->sent_at = hl_monotime_now();
        acq->pending |= bit(i);
        hl_op_ref(&acq->op);
        int rc = hilock_lock_acquire_async(m->members[i], acq->owner, 0,
                                           acq->lease_ms, 0,
                                           on_member_acquired, mc,
                                           &acq->member_ops[i]);
        if (rc != HILOCK_OK) {
            acq->pending &= ~bit(i);
            acq->results[i].status = rc;
            acq->errs++;
            hl_op_unref(&mc->op);
        }
        if (acq->done || !acq->round_open)
            break; /* decided by an answer given at once */
    }
    decide(acq);
    hl_op_unref(&acq->op);
}

static void acquire_start(hl_op *op)
{
    acquire_op *acq = (acquire_op *)op;
    hilock_multilock *m = acq->m;
    if (atomic_load(&m->destroyed)) {
        /* Pending when the group was destroyed, as far as its caller can
         * tell. */
        acquire_end(acq, HILOCK_ECANCELED, "multi-lock destroyed");
        return;
    }
    acq->started = true;
    hl_timer_init(&acq->backoff, hilock_client_loop(m->coord), on_backoff,
                  acq);
    acq->next = m->acquires;
    if (m->acquires)
        m->acquires->prev = acq;
    m->acquires = acq;
    acq->deadline = hl_wait_deadline(acq->wait_ms);
    group_hold *g = hold_find(m, acq->owner);
    if (g != NULL && !g->lost) {
        /* Reentry: the members are held already. */
        g->count++;
        acq->granted = g->granted;
        acq->round_start = hl_monotime_now();
        acq->last_status = HILOCK_OK;
        acquire_end(acq, HILOCK_OK, NULL);
        return;
    }
    if (g != NULL) {
        /* A lost hold: what is left of it goes back first. */
        hold_unlink(m, g);
        for (size_t i = 0; i < m->n; i++)
            if (g->granted & bit(i))
                give_back(m, i, g->owner);
        hl_free(g);
    }
    acq->last_status = HILOCK_EBUSY;
    attempt_round(acq);
}

static void acquire_cancel(hl_op *op, int status)
{
    acquire_end((acquire_op *)op, status,
                status == HILOCK_ETIMEDOUT
                    ? "the loop thread did not answer in time; the acquire "
                      "was cancelled"
                    : "acquire cancelled");
}

static void acquire_complete(hl_op *op)
{
    acquire_op *acq = (acquire_op *)op;
    hilock_multi_outcome out = {
        .owner = acq->owner,
        .validity_ms = op->value,
        .granted = acq->granted_at_end,
        .attempts = acq->attempts,
        .n = acq->m->n,
        .members = acq->results,
    };
    acq->cb(acq->m, op->status, &out, acq->user_data);
}

static void acquire_destroy(hl_op *op)
{
    hl_multi_op_free(op, ((acquire_op *)op)->m);
}

static const hl_op_type acquire_type = {
    .start = acquire_start,
    .cancel = acquire_cancel,
    .complete = acquire_complete,
    .destroy = acquire_destroy,
    .bounded = true,
};

int hl_multi_acquire_new(hl_op **out, hilock_multilock *m, uint64_t owner,
                         int64_t wait_ms, int64_t lease_ms,
                         hilock_multi_acquire_cb *cb, void *user_data)
{
    int bad = hl_check_acquire_args(owner, wait_ms, lease_ms);
    if (bad != HILOCK_OK)
        return bad;
    if (lease_ms > 0 && hl_validity(lease_ms, 0, 0) <= 0)
        return hl_fail(HILOCK_EINVAL, "a lease of %lld ms does not outlast "
                                      "its drift margin",
                       (long long)lease_ms);
    acquire_op *acq = hl_calloc(1, sizeof *acq);
    if (acq == NULL)
        return hl_fail(HILOCK_ENOMEM, "out of memory for an acquire");
    hl_op_init(&acq->op, &acquire_type);
    acq->m = m;
    acq->owner = owner;
    acq->wait_ms = wait_ms;
    acq->lease_ms = lease_ms;
    acq->cb = cb;
    acq->user_data = user_data;
    /* What an acquire that never asks its members reports. */
    for (size_t i = 0; i < m->n; i++)
        acq->results[i] = (hilock_member_result){HILOCK_ECANCELED, -1, false};
    hl_multi_ref(m);
    *out = &acq->op;
    return HILOCK_OK;
}

const hilock_member_result *hl_multi_acquire_results(const hl_op *op)
{
    return ((const acquire_op *)op)->results;
}

int hilock_multilock_acquire_async(hilock_multilock *m, uint64_t owner,
                                   int64_t wait_ms, int64_t lease_ms,
                                   hilock_multi_acquire_cb *cb,
                                   void *user_data, uint64_t *op_id)
{
    if (m == NULL || cb == NULL)
        return hl_fail(HILOCK_EINVAL, "NULL argument");
    hl_op *op;
    int rc = hl_multi_acquire_new(&op, m, owner, wait_ms, lease_ms, cb,
                                  user_data);
    if (rc != HILOCK_OK)
        return rc;
    if (op_id)
        *op_id = ((acquire_op *)op)->op.id;
    return hl_op_submit_or_drop(m->coord, op);
}

/* ---- cancel ------------------------------------------------------------ */

/* hilock_multilock_cancel's way to the coordinator, where the acquire is
 * found by its id. */
typedef struct cancel_call {
    hl_op op; /* first */
    hilock_multilock *m;
    uint64_t id;
} cancel_call;

/* On the coordinator's loop thread: the acquire ends now with
 * HILOCK_ECANCELED. */
static int cancel_now(hilock_multilock *m, uint64_t id)
{
    for (acquire_op *acq = m->acquires; acq != NULL; acq = acq->next) {
        if (acq->op.id == id) {
            hl_op_cancel(&acq->op, HILOCK_ECANCELED);
            return HILOCK_OK;
        }
    }
    return hl_fail(HILOCK_ENOTFOUND, "no pending acquire with id %llu",
                   (unsigned long long)id);
}

/* Drained by the coordinator's closing, which ended the acquire too. */
static void cancel_call_complete(hl_op *op)
{
    cancel_call *cc = (cancel_call *)op;
    if (op->status == HILOCK_OK)
        (void)cancel_now(cc->m, cc->id);
}

static void cancel_call_destroy(hl_op *op)
{
    hl_multi_op_free(op, ((cancel_call *)op)->m);
}

static const hl_op_type cancel_call_type = {
    .start = hl_multi_finish_at_start,
    .complete = cancel_call_complete,
    .destroy = cancel_call_destroy,
    .bounded = false,
};

/* A cancel looked up on the coordinator while its caller waits, on the
 * caller's stack. */
typedef struct cancel_wait {
    hl_op op; /* first */
    hilock_multilock *m;
    uint64_t id;
} cancel_wait;

static void cancel_wait_start(hl_op *o)
{
    cancel_wait *cw = (cancel_wait *)o;
    int rc = cancel_now(cw->m, cw->id);
    hl_op_done(o, rc, 0, NULL, rc ? hilock_last_error() : NULL);
}

static void cancel_wait_on_stack(hl_op *o) { (void)o; }

static const hl_op_type cancel_wait_type = {
    .start = cancel_wait_start,
    .destroy = cancel_wait_on_stack,
};

int hilock_multilock_cancel(hilock_multilock *m, uint64_t op_id)
{
    if (m == NULL)
        return hl_fail(HILOCK_EINVAL, "multi-lock is NULL");
    if (hl_client_in_loop(m->coord))
        return cancel_now(m, op_id);
    if (hl_op_caller_may_wait()) {
        /* The caller may wait for the coordinator to look the acquire
         * up, which tells whether the cancel came in time. */
        cancel_wait cw = {.m = m, .id = op_id};
        hl_op_init(&cw.op, &cancel_wait_type);
        return hl_op_call_and_wait(m->coord, &cw.op);
    }
    /* On another client's loop thread, which must not wait for the
     * coordinator's: handed over, found there soon after. */
    cancel_call *cc = hl_calloc(1, sizeof *cc);
    if (cc == NULL)
        return hl_fail(HILOCK_ENOMEM, "out of memory");
    hl_op_init(&cc->op, &cancel_call_type);
    cc->m = m;
    cc->id = op_id;
    hl_multi_ref(m);
    return hl_op_submit_or_drop(m->coord, &cc->op);
}

/* ---- release ------------------------------------------------------------ */

/* A release: the caller's operation, at home on the coordinator.  Each
 * member asked holds a reference to it, as for an acquire. */
typedef struct release_call {
    hl_op op; /* first */
    hilock_multilock *m;
    struct release_call *next; /* in m->releases, while members answer */
    struct release_call *prev;
    uint64_t owner;
    int pending;
    int status;      /* first member failure that matters */
    bool lost;
    bool listed;
    bool done;
    char detail[200];
    hilock_multi_cb *cb; /* NULL: a blocking caller waits */
    void *user_data;
} release_call;

static void release_end(release_call *rc)
{
    hilock_multilock *m = rc->m;
    if (rc->done)
        return;
    rc->done = true;
    if (rc->listed) {
        if (rc->prev)
            rc->prev->next = rc->next;
        else
            m->releases = rc->next;
        if (rc->next)
            rc->next->prev = rc->prev;
        rc->listed = false;
    }
    int status = rc->lost ? HILOCK_ELEASELOST : rc->status;
    if (status == HILOCK_ELEASELOST && rc->detail[0] == '\0')
        snprintf(rc->detail, sizeof rc->detail,
                 "the group's lease was lost before this release");
    hl_op_finish(&rc->op, status, 0, NULL, rc->detail);
    hl_op_unref(&rc->op);
}

/* A member's answer to a release, on its way to the coordinator. */
typedef struct member_release {
    hl_op op; /* first */
    release_call *call; /* referenced */
    size_t index;
    int status;
    char detail[160];
} member_release;

/* The coordinator's thread. */
static void member_release_complete(hl_op *op)
{
    member_release *mr = (member_release *)op;
    release_call *rc = mr->call;
    if (rc->done)
        return; /* ended by the coordinator's closing */
    int st = op->status != HILOCK_OK ? op->status : mr->status;
    /* A member that lost its lease or forgot it (a restarted master) is
     * the group's business only if the group is lost, which rc->lost
     * says. */
    if (st != HILOCK_OK && st != HILOCK_ELEASELOST &&
        st != HILOCK_ENOTOWNER && rc->status == HILOCK_OK) {
        rc->status = st;
        snprintf(rc->detail, sizeof rc->detail, "member %zu: %s", mr->index,
                 op->status != HILOCK_OK ? "client closed" : mr->detail);
    }
    if (--rc->pending == 0)
        release_end(rc);
}

/* Any thread. */
static void member_release_destroy(hl_op *op)
{
    member_release *mr = (member_release *)op;
    hl_op_unref(&mr->call->op);
    hl_free(mr);
}

static const hl_op_type member_release_type = {
    .start = hl_multi_finish_at_start,
    .complete = member_release_complete,
    .destroy = member_release_destroy,
    .bounded = false,
};

static void on_member_released(hilock_lock *lock, int status, int64_t value,
                               void *user_data)
{
    (void)lock;
    (void)value;
    member_release *mr = user_data;
    mr->status = status;
    snprintf(mr->detail, sizeof mr->detail, "%s",
             status ? hilock_last_error() : "");
    /* Refused: the coordinator's closing ended the release there. */
    hl_op_submit_or_drop(mr->call->m->coord, &mr->op);
}

static void release_start(hl_op *op)
{
    release_call *rc = (release_call *)op;
    hilock_multilock *m = rc->m;
    if (atomic_load(&m->destroyed)) {
        rc->status = HILOCK_ECLOSED;
        snprintf(rc->detail, sizeof rc->detail, "multi-lock destroyed");
        release_end(rc);
        return;
    }
    group_hold *g = hold_find(m, rc->owner);
    if (g == NULL) {
        rc->status = HILOCK_ENOTOWNER;
        snprintf(rc->detail, sizeof rc->detail,
                 "this owner does not hold the group");
        release_end(rc);
        return;
    }
    rc->lost = g->lost;
    if (g->count > 1 && !g->lost) {
        g->count--;
        release_end(rc);
        return;
    }
    hold_unlink(m, g);
    uint64_t granted = g->granted;
    hl_free(g);
    rc->pending = 1; /* until every member is asked */
    /* Listed until it ends, so that the coordinator's closing can end it
     * on this thread. */
    rc->next = m->releases;
    if (m->releases)
        m->releases->prev = rc;
    m->releases = rc;
    rc->listed = true;
    for (size_t i = 0; i < m->n; i++) {
        if (!(granted & bit(i)))
            continue;
        member_release *mr = hl_calloc(1, sizeof *mr);
        if (mr == NULL) {
            rc->status = HILOCK_ENOMEM;
            snprintf(rc->detail, sizeof rc->detail, "out of memory");
            continue;
        }
        hl_op_init(&mr->op, &member_release_type);
        mr->call = rc;
        mr->index = i;
        rc->pending++;
        hl_op_ref(&rc->op);
        int st = hilock_lock_release_async(m->members[i], rc->owner,
                                           on_member_released, mr);
        if (st != HILOCK_OK) {
            rc->pending--;
            if (rc->status == HILOCK_OK && st != HILOCK_ECLOSED) {
                rc->status = st;
                snprintf(rc->detail, sizeof rc->detail, "member %zu: %s", i,
                         hilock_last_error());
            }
            hl_op_unref(&mr->op);
        }
    }
    if (--rc->pending == 0)
        release_end(rc);
}

/* Its caller stops waiting (a blocking release out of time), or the
 * coordinator closes: members still asked answer to no one. */
static void release_cancel(hl_op *op, int status)
{
    release_call *rc = (release_call *)op;
    rc->status = status;
    rc->lost = false;
    snprintf(rc->detail, sizeof rc->detail, "%s",
             status == HILOCK_ECLOSED ? "client closed"
                                      : "the members did not answer in time");
    release_end(rc);
}

static void release_complete(hl_op *op)
{
    release_call *rc = (release_call *)op;
    rc->cb(rc->m, op->status, rc->user_data);
}

static void release_destroy(hl_op *op)
{
    hl_multi_op_free(op, ((release_call *)op)->m);
}

static const hl_op_type release_type = {
    .start = release_start,
    .cancel = release_cancel,
    .complete = release_complete,
    .destroy = release_destroy,
    .bounded = true,
};

int hl_multi_release_new(hl_op **out, hilock_multilock *m, uint64_t owner,
                         hilock_multi_cb *cb, void *user_data)
{
    if (owner == 0)
        return hl_fail(HILOCK_EINVAL, "owner id 0 is reserved");
    release_call *rc = hl_calloc(1, sizeof *rc);
    if (rc == NULL)
        return hl_fail(HILOCK_ENOMEM, "out of memory");
    hl_op_init(&rc->op, &release_type);
    rc->m = m;
    rc->owner = owner;
    rc->cb = cb;
    rc->user_data = user_data;
    hl_multi_ref(m);
    *out = &rc->op;
    return HILOCK_OK;
}

int hilock_multilock_release_async(hilock_multilock *m, uint64_t owner,
                                   hilock_multi_cb *cb, void *user_data)
{
    if (m == NULL || cb == NULL)
        return hl_fail(HILOCK_EINVAL, "NULL argument");
    hl_op *op = NULL;
    int rc = hl_multi_release_new(&op, m, owner, cb, user_data);
    if (rc != HILOCK_OK)
        return rc;
    return hl_op_submit_or_drop(m->coord, op);
}

/* ---- losses -------------------------------------------------------------- */

/* A member's lost lease, on its way to the coordinator. */
typedef struct member_lost {
    hl_op op; /* first */
    hilock_multilock *m; /* referenced */
    size_t index;
    uint64_t owner;
} member_lost;

/* The coordinator's thread; a notice drained by its closing is moot. */
static void member_lost_complete(hl_op *op)
{
    member_lost *ml = (member_lost *)op;
    hilock_multilock *m = ml->m;
    group_hold *g = op->status == HILOCK_OK ? hold_find(m, ml->owner) : NULL;
    if (g != NULL && (g->granted & bit(ml->index))) {
        g->lost_members |= bit(ml->index);
        size_t alive = popcount(g->granted & ~g->lost_members);
        if (alive < m->quorum && !g->lost) {
            g->lost = true;
            if (m->lost_cb != NULL)
                m->lost_cb(m, ml->owner, m->lost_data);
        }
    }
}

static void member_lost_destroy(hl_op *op)
{
    hl_multi_op_free(op, ((member_lost *)op)->m);
}

static const hl_op_type member_lost_type = {
    .start = hl_multi_finish_at_start,
    .complete = member_lost_complete,
    .destroy = member_lost_destroy,
    .bounded = false,
};

void hl_multi_member_lost(hilock_lock *lock, uint64_t owner, void *data)
{
    hilock_multilock *m = data;
    if (owner == 0) {
        /* A member's client is closing.  When it is the coordinator, this
         * is the group's last time on the coordinator's thread: what is
         * still pending ends here, and answers that come later find the
         * coordinator closed and only let go of their own. */
        if (lock->client == m->coord && hl_client_in_loop(m->coord))
            hl_multi_close_all(m);
        return;
    }
    size_t i = 0;
    while (i < m->n && m->members[i] != lock)
        i++;
    if (i == m->n)
        return;
    member_lost *ml = hl_calloc(1, sizeof *ml);
    if (ml == NULL)
        return; /* the group then learns at its release */
    hl_op_init(&ml->op, &member_lost_type);
    ml->m = m;
    ml->index = i;
    ml->owner = owner;
    hl_multi_ref(m);
    hl_op_submit_or_drop(m->coord, &ml->op);
}

bool hl_multi_owner_lost(hilock_multilock *m, uint64_t owner, bool *held)
{
    group_hold *g = hold_find(m, owner);
    *held = g != NULL;
    return g != NULL && g->lost;
}

void hl_multi_cancel_all(hilock_multilock *m)
{
    while (m->acquires != NULL)
        acquire_end(m->acquires, HILOCK_ECANCELED, "multi-lock destroyed");
}

void hl_multi_close_all(hilock_multilock *m)
{
    /* A callback may destroy the group. */
    hl_multi_ref(m);
    while (m->acquires != NULL)
        acquire_end(m->acquires, HILOCK_ECLOSED, "client closed");
    while (m->releases != NULL) {
        release_call *rc = m->releases;
        rc->status = HILOCK_ECLOSED;
        rc->lost = false;
        snprintf(rc->detail, sizeof rc->detail, "client closed");
        release_end(rc);
    }
    hl_multi_unref(m);
}
