/* A semaphore handle and its calls.  Acquires are acquires of the engine
 * on the handle's lock (scripts.c holds the kinds): they wait in the
 * handle's line, wake on the channel's messages, are reconciled after an
 * unknown outcome and give back a grant nobody takes, as a lock's do.
 * An expirable permit is a hold of an owner of its own, so the engine's
 * lease keeps it and reports it lost.  The other calls are one request
 * each. */
#include <inttypes.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/base/alloc.h"
#include "core/base/error_detail.h"
#include "core/base/handle.h"
#include "core/engine/again.h"
#include "core/engine/compose.h"
#include "core/engine/kept_grants.h"
#include "core/engine/ride.h"
#include "core/engine/unacked.h"
#include "core/transport/resp.h"
#include "kindkit/kind_mark.h"
#include "kindkit/kindkit.h"
#include "layout/layout.h"
#include "semaphore/semaphore_internal.h"
#include "core/base/cname.h"

/* How long a plain release is sent again while its answer is lost: as
 * long as the server keeps its record. */
#define HL_SEM_RECORD_MS HL_LAYOUT_SEM_RECORD_TTL_MS

void hl_sem_ref(hilock_semaphore *sem)
{
    atomic_fetch_add(&sem->refs, 1);
}

void hl_sem_unref(hilock_semaphore *sem)
{
    if (atomic_fetch_sub(&sem->refs, 1) != 1)
        return;
    hl_lock_unref(sem->lock);
    hl_handle_release(sem);
}

/* "<client id>:<owner>", the permit's id, into id (empty once the
 * client is gone). */
static void permit_id(const hilock_semaphore *sem, uint64_t owner, char *id)
{
    hilock_client *c = hl_lock_client_get(sem->lock);
    id[0] = '\0';
    if (c != NULL) {
        snprintf(id, HILOCK_PERMIT_ID_MAX, "%s:%" PRIu64,
                 hilock_client_id(c), owner);
        hl_client_unref(c);
    }
}

/* The owner of one of this client's permits by its id, or 0. */
static uint64_t own_permit(const hilock_semaphore *sem, const char *id)
{
    hilock_client *c = hl_lock_client_get(sem->lock);
    if (c == NULL)
        return 0;
    const char *mine = hilock_client_id(c);
    size_t n = strlen(mine);
    uint64_t owner = 0;
    if (strncmp(id, mine, n) == 0 && id[n] == ':' && id[n + 1] >= '1' &&
        id[n + 1] <= '9') {
        char *end;
        unsigned long long v = strtoull(id + n + 1, &end, 10);
        if (*end == '\0' && v != ULLONG_MAX)
            owner = v;
    }
    hl_client_unref(c);
    return owner;
}

/* ---- acquire, on the engine -------------------------------------------- */

/* What an async acquire or release reports to. */
typedef struct sem_call_cb {
    hilock_semaphore *sem; /* referenced */
    hl_sem_cb cb;
    bool permit;
} sem_call_cb;

void hl_sem_cb_run(const hl_sem_cb *cb, hilock_semaphore *sem, int status,
                   int64_t value, const char *id)
{
    if (cb->permit != NULL)
        cb->permit((hilock_permit_semaphore *)sem, status, id,
                   cb->user_data);
    else
        cb->count(sem, status, value, cb->user_data);
}

static sem_call_cb *call_cb_new(hilock_semaphore *sem, const hl_sem_cb *cb)
{
    sem_call_cb *c = hl_malloc(sizeof *c);
    if (c == NULL)
        return NULL;
    c->sem = sem;
    c->cb = *cb;
    c->permit = sem->expirable;
    hl_sem_ref(sem);
    return c;
}

static void call_cb_free(sem_call_cb *c)
{
    hl_sem_unref(c->sem);
    hl_free(c);
}

static void on_acquired(hilock_lock *lock, int status,
                        const hilock_acquired *got, void *data)
{
    (void)lock;
    sem_call_cb c = *(sem_call_cb *)data;
    char id[HILOCK_PERMIT_ID_MAX];
    if (status == HILOCK_OK && c.permit)
        permit_id(c.sem, got->owner, id);
    /* Not the free permits the script left: stale once read, and a grant
     * a release handed over comes without them. */
    hl_sem_cb_run(&c.cb, c.sem, status, 0,
                  status == HILOCK_OK && c.permit ? id : NULL);
    call_cb_free(data);
}

int hl_sem_acquire(hilock_semaphore *sem, int64_t n, int64_t wait_ms,
                   int64_t lease_ms, const hl_sem_cb *cb, char *id,
                   uint64_t *op_id)
{
    uint64_t owner = hl_fresh_owner();
    if (!hl_sem_cb_set(cb)) {
        /* Named before the wait, while the client is surely there. */
        char mine[HILOCK_PERMIT_ID_MAX];
        permit_id(sem, owner, mine);
        int rc = hl_acquire_amount(sem->lock, owner, n, wait_ms, lease_ms,
                                   NULL, NULL, NULL);
        if (rc == HILOCK_OK && id != NULL)
            memcpy(id, mine, sizeof mine);
        return rc;
    }
    sem_call_cb *c = call_cb_new(sem, cb);
    if (c == NULL)
        return hl_fail(HILOCK_ENOMEM, "out of memory");
    int rc = hl_acquire_amount(sem->lock, owner, n, wait_ms, lease_ms,
                               on_acquired, c, op_id);
    if (rc != HILOCK_OK)
        call_cb_free(c);
    return rc;
}

static void on_permit_released(hilock_lock *lock, int status, int64_t value,
                               void *data)
{
    (void)lock;
    (void)value;
    sem_call_cb c = *(sem_call_cb *)data;
    hl_sem_cb_run(&c.cb, c.sem, status, 0, NULL);
    call_cb_free(data);
}

/* A permit this client took goes back through the engine, which lets go
 * of its hold and lease and reports a lease lost before the release. */
static int release_own(hilock_semaphore *sem, uint64_t owner,
                       const hl_sem_cb *cb)
{
    if (!hl_sem_cb_set(cb))
        return hl_release_owner(sem->lock, owner, NULL, NULL);
    sem_call_cb *c = call_cb_new(sem, cb);
    if (c == NULL)
        return hl_fail(HILOCK_ENOMEM, "out of memory");
    int rc = hl_release_owner(sem->lock, owner, on_permit_released, c);
    if (rc != HILOCK_OK)
        call_cb_free(c);
    return rc;
}

int hl_sem_permit_release(hilock_semaphore *sem, const char *id,
                          const hl_sem_cb *cb)
{
    uint64_t owner = own_permit(sem, id);
    if (owner != 0)
        return release_own(sem, owner, cb);
    return hl_sem_call(sem, SEM_PERMIT_RELEASE, 1, id, cb, NULL);
}

/* ---- the one-request calls --------------------------------------------- */

static int send_now(void *ctx, hl_request_fn *fn, void *data)
{
    sem_op *op = ctx;
    if (op->ride != NULL)
        return hl_sem_plain_release_to_waiter(op, op->ride, fn, data);
    return op->call == SEM_RELEASE ? hl_sem_plain_release(op, fn, data)
                                   : hl_sem_run(op, fn, data);
}

/* Send op's request: a plain release by its id, the others as they are;
 * a write with the WAIT the replica policy asks for. */
static int send_call(sem_op *op, hl_request_fn *fn)
{
    if (op->call == SEM_AVAILABLE)
        return send_now(op, fn, op);
    return hl_lock_write(op->sem->lock, send_now, op, fn, op);
}

static bool outcome_unknown(int status)
{
    return status == HILOCK_EIO || status == HILOCK_ETIMEDOUT ||
           status == HILOCK_EPROTO || status == HILOCK_ETOOBIG;
}

/* A plain release the replicas did not acknowledge: a failover before
 * they have it would keep its permits taken for good.  Its record stays
 * on the server, and the handle keeps the release, to make it again
 * under the same id on the next master (unacked.h), while the record
 * has a third of its life left, so that the master that ran it still
 * knows it. */
static void keep_unacked(sem_op *op)
{
    hl_monotime until =
        op->consume != HL_CONSUME_NONE
            ? op->give_up_at
            : hl_sat_sub(op->give_up_at, HL_MS(HL_SEM_RECORD_MS / 3));
    hl_unacked_id_release(op->sem->lock, op->id, strlen(op->id), op->n,
                          op->consume, until, op->changes_at_send);
}

static bool made_again(sem_call call)
{
    return call != SEM_ACQUIRE && call != SEM_PERMIT_ACQUIRE &&
           call != SEM_AVAILABLE;
}

static void on_reply(void *data, int status, hilock_reply *reply)
{
    sem_op *op = data;
    if (op->call == SEM_RELEASE && outcome_unknown(status) &&
        hl_monotime_now() < op->give_up_at) {
        /* Whether it ran is unknown: send it again, under the same id,
         * which gives nothing back twice; it waits for the next
         * connection. */
        hilock_reply_free(reply);
        op->resent = true;
        if (send_call(op, on_reply) == HILOCK_OK)
            return;
        status = HILOCK_ECLOSED;
        reply = NULL;
    }
    /* Refused by a demoted master, it did not run: a write that is no
     * acquire is made again there (an acquire waits as its wait says). */
    if (made_again(op->call) && status == HILOCK_EREDIS &&
        hl_again_after_refusal(&op->again, op->sem->lock,
                               reply ? reply->str : NULL)) {
        hilock_reply_free(reply);
        return;
    }
    /* A release the replicas did not acknowledge gave back its permits
     * on the master, and stands, as a lock's release does; any other
     * write so answered says HILOCK_ENOACK (it too stands). */
    bool short_of_ack = status == HILOCK_ENOACK && op->call == SEM_RELEASE;
    if (status == HILOCK_ENOACK &&
        (op->call == SEM_RELEASE || op->call == SEM_PERMIT_RELEASE))
        status = HILOCK_OK;
    if (short_of_ack)
        keep_unacked(op);
    else if (op->call == SEM_RELEASE && status == HILOCK_OK &&
             op->consume == HL_CONSUME_NONE)
        (void)hl_sem_forget(op->sem->lock, op->id, strlen(op->id), false);
    if (status != HILOCK_OK) {
        char why[256];
        snprintf(why, sizeof why, "%s",
                 reply && reply->str ? reply->str : hilock_last_error());
        hilock_reply_free(reply);
        hl_op_done(&op->op, status, 0, NULL, why);
        return;
    }
    /* Counts come as text, exact beyond Lua's 2^53; a count no client
     * of the layout writes, refused by the script, as its words. */
    const hilock_reply *answer =
        hl_script_answer(op->sem->lock->client, reply);
    /* {count, 1}: a plain release of the client first and alone in the
     * semaphore's line, whose own waiters no message wakes. */
    bool open = answer != NULL && answer->type == HILOCK_REPLY_ARRAY &&
                answer->elements == 2 &&
                answer->element[1]->type == HILOCK_REPLY_INTEGER &&
                answer->element[1]->integer == 1;
    if (open)
        answer = answer->element[0];
    char foreign[HL_FOREIGN_DETAIL_MAX];
    bool refused = hl_foreign_detail(reply, foreign, sizeof foreign);
    int64_t v = 0;
    bool ok = !refused && hl_reply_i64(answer, &v);
    hilock_reply_free(reply);
    if (ok && open && !op->rider_took)
        hl_lock_freed_here(op->sem->lock);
    if (!ok) {
        hl_op_done(&op->op, HILOCK_EPROTO, 0, NULL,
                   refused ? foreign
                           : "unexpected reply from a semaphore script");
    } else if (op->call == SEM_PERMIT_RELEASE) {
        /* Another client's permit: 0 none, 1 given back, 2 given back
         * after its lease ran out (its holder is told by its own). */
        hl_op_done(&op->op, v == 0 ? HILOCK_ENOTOWNER : HILOCK_OK, 0, NULL,
                   v == 0 ? "no such permit is held" : NULL);
    } else {
        /* Word that the count is a semaphore's, not a latch's or any
         * integer's, for as long as it lives (HL_LAYOUT_KIND). */
        if (op->call == SEM_TRY_SET ? v == 1
                                    : op->call == SEM_SET ||
                                          op->call == SEM_ADD)
            hl_kind_mark(op->sem->lock, HL_LAYOUT_KIND_SEMAPHORE, NULL);
        /* A release says 0, as an acquire does (on_acquired). */
        hl_op_done(&op->op, HILOCK_OK, op->call == SEM_RELEASE ? 0 : v, NULL,
                   NULL);
    }
}

/* The answer of a release that carried a waiter's attempt: {the
 * release's, the attempt's}.  The release ends first, as the server ran
 * them; when the attempt took the permits, the release wakes nobody. */
static void on_reply_with_rider(void *data, int status, hilock_reply *reply)
{
    sem_op *op = data;
    hl_acquire_op *rider = op->rider;
    op->rider = NULL;
    hl_ride_reply(rider, status, reply, "semaphore release", on_reply, op,
                  &op->rider_took);
}

/* Send the release with the rider's attempt a. */
static int send_with_rider(void *ctx, const hl_attempt_args *a)
{
    sem_op *op = ctx;
    op->ride = a;
    int rc = hl_lock_write(op->sem->lock, send_now, op, on_reply_with_rider,
                           op);
    op->ride = NULL;
    return rc;
}

/* Name a plain release: by the grant it gives back, when this handle
 * kept one of the same size, or by an id of its own, "<client id>:r<n>",
 * beside the attempts' "<client id>:<n>". */
static void name_release(sem_op *op)
{
    hilock_lock *lock = op->sem->lock;
    hl_kept_grant g;
    if (hl_kept_grant_take(lock, op->n, &g)) {
        op->consume = g.handed ? HL_CONSUME_HANDED : HL_CONSUME_RECORD;
        memcpy(op->id, g.nonce, g.nonce_len);
        op->id[g.nonce_len] = '\0';
        op->give_up_at = hl_kept_grant_usable_until(lock, &g);
        return;
    }
    static atomic_uint_fast64_t releases;
    snprintf(op->id, sizeof op->id, "%s:r%" PRIu64,
             hilock_client_id(lock->client),
             (uint64_t)atomic_fetch_add(&releases, 1));
    op->give_up_at = hl_after_ms(hl_monotime_now(), HL_SEM_RECORD_MS);
}

static void op_start(hl_op *o)
{
    sem_op *op = (sem_op *)o;
    hilock_lock *lock = op->sem->lock;
    if (atomic_load(&lock->destroyed)) {
        hl_op_done(o, HILOCK_ECANCELED, 0, NULL,
                   "semaphore handle destroyed");
        return;
    }
    if (hl_lock_conn(lock) == NULL) {
        hl_op_done(o, HILOCK_ECLOSED, 0, NULL, "client closed");
        return;
    }
    if (op->call == SEM_RELEASE)
        name_release(op);
    op->changes_at_send = hl_lock_master_changes(lock);
    _Atomic int *gate = hl_op_gate_requests(o);
    int rc = HILOCK_OK;
    /* A plain release takes this client's next waiter's attempt along. */
    if (op->call == SEM_RELEASE && !op->sem->expirable)
        op->rider = hl_lock_ride(lock, op->n, send_with_rider, op, &rc);
    if (op->rider == NULL && rc == HILOCK_OK)
        rc = send_call(op, on_reply);
    hl_conn_gate_requests(gate);
    if (rc != HILOCK_OK)
        hl_op_done(o, rc, 0, NULL, hl_send_failure(rc));
}

static void release_again(void *data)
{
    sem_op *op = data;
    int rc = send_call(op, on_reply);
    if (rc != HILOCK_OK)
        hl_op_done(&op->op, rc, 0, NULL, hl_send_failure(rc));
}

/* Only at the client's close: a release waiting to be made again ends;
 * a request in flight ends by itself. */
static void op_cancel(hl_op *o, int status)
{
    sem_op *op = (sem_op *)o;
    if (hl_again_stop(&op->again))
        hl_op_done(o, status, 0, NULL, HL_AGAIN_CLOSED("write"));
}

static void op_complete(hl_op *o)
{
    sem_op *op = (sem_op *)o;
    hl_sem_cb_run(&op->cb, op->sem, o->status, o->value, NULL);
}

static void op_destroy(hl_op *o)
{
    sem_op *op = (sem_op *)o;
    hl_sem_unref(op->sem);
    hl_free(op);
}

static const hl_op_type sem_op_type = {
    .start = op_start,
    .cancel = op_cancel,
    .complete = op_complete,
    .destroy = op_destroy,
    .bounded = true,
    .withdrawable = true,
};

int hl_sem_call(hilock_semaphore *sem, sem_call call, int64_t n,
                const char *id, const hl_sem_cb *cb, int64_t *value)
{
    hilock_client *c = hl_lock_client_get(sem->lock);
    if (c == NULL)
        return hl_fail(HILOCK_ECLOSED, "client closed");
    sem_op *op = hl_calloc(1, sizeof *op);
    if (op == NULL) {
        hl_client_unref(c);
        return hl_fail(HILOCK_ENOMEM, "out of memory");
    }
    hl_op_init(&op->op, &sem_op_type);
    op->sem = sem;
    hl_again_init(&op->again, sem->lock, release_again, op);
    hl_sem_ref(sem);
    op->call = call;
    op->n = n;
    if (cb != NULL)
        op->cb = *cb;
    if (id != NULL)
        snprintf(op->id, sizeof op->id, "%s", id);
    int rc;
    if (!hl_sem_cb_set(&op->cb)) {
        int64_t v = 0;
        op->op.stay_asleep = hl_lock_taking_turns(sem->lock);
        rc = hl_op_run_blocking(c, &op->op, hl_client_blocking_limit_us(c, 0),
                                &v, NULL);
        if (value != NULL)
            *value = rc == HILOCK_OK ? v : 0;
    } else {
        rc = hl_op_submit_or_drop(c, &op->op);
    }
    hl_client_unref(c);
    return rc;
}

/* ---- the handle -------------------------------------------------------- */

/* The engine reports a permit's lost lease as its lock's lost hold; the
 * user hears of it by the permit's id. */
static void on_hold_lost(hilock_lock *lock, uint64_t owner, void *data)
{
    (void)lock;
    hilock_semaphore *sem = data;
    if (sem->lost_cb == NULL)
        return;
    char id[HILOCK_PERMIT_ID_MAX];
    permit_id(sem, owner, id);
    sem->lost_cb((hilock_permit_semaphore *)sem, id, sem->lost_data);
}

typedef struct lost_cb_op {
    hl_op op; /* first */
    hilock_semaphore *sem;
    hilock_permit_lost_cb *cb;
    void *data;
} lost_cb_op;

static void lost_cb_start(hl_op *o)
{
    lost_cb_op *h = (lost_cb_op *)o;
    h->sem->lost_cb = h->cb;
    h->sem->lost_data = h->data;
    hl_op_done(o, HILOCK_OK, 0, NULL, NULL);
}

static void on_stack(hl_op *o) { (void)o; }

static const hl_op_type lost_cb_type = {.start = lost_cb_start,
                                        .destroy = on_stack};

/* A setting handed over from another client's loop thread, which must
 * not wait for this one: it owns its memory and a handle reference. */
static void handed_destroy(hl_op *o)
{
    lost_cb_op *h = (lost_cb_op *)o;
    hl_sem_unref(h->sem);
    hl_free(h);
}

static const hl_op_type lost_cb_handed_type = {.start = lost_cb_start,
                                               .destroy = handed_destroy};

static int set_lost_cb(hilock_client *c, hilock_semaphore *sem,
                       hilock_permit_lost_cb *cb, void *user_data)
{
    if (hl_client_in_loop(c)) {
        sem->lost_cb = cb;
        sem->lost_data = user_data;
        return HILOCK_OK;
    }
    if (!hl_op_caller_may_wait()) {
        lost_cb_op *h = hl_calloc(1, sizeof *h);
        if (h == NULL)
            return hl_fail(HILOCK_ENOMEM, "out of memory to hand the "
                                          "setting to the client's loop");
        hl_op_init(&h->op, &lost_cb_handed_type);
        h->sem = sem;
        h->cb = cb;
        h->data = user_data;
        hl_sem_ref(sem);
        return hl_op_submit_or_drop(c, &h->op);
    }
    /* Not a loop thread: hl_op_call_and_wait may wait here. */
    lost_cb_op h = {.sem = sem, .cb = cb, .data = user_data};
    hl_op_init(&h.op, &lost_cb_type);
    return hl_op_call_and_wait(c, &h.op);
}

static int create(hilock_semaphore **out, hilock_client *client,
                  const char *name, size_t name_len, bool expirable)
{
    if (out == NULL)
        return hl_fail(HILOCK_EINVAL, "NULL argument");
    *out = NULL;
    hl_sem_scripts_init();
    hilock_semaphore *sem = hl_calloc(1, sizeof *sem);
    if (sem == NULL)
        return hl_fail(HILOCK_ENOMEM, "out of memory for a semaphore");
    int rc = hl_lock_create(&sem->lock, client,
                            expirable ? &hl_permit_kind : &hl_semaphore_kind,
                            name, name_len);
    if (rc != HILOCK_OK) {
        hl_free(sem);
        return rc;
    }
    if (hl_handle_add(sem) != 0) {
        hilock_lock_destroy(sem->lock);
        hl_free(sem);
        return hl_fail(HILOCK_ENOMEM, "out of memory for a semaphore");
    }
    sem->expirable = expirable;
    atomic_init(&sem->refs, 1);
    /* No operation has seen the lock yet: set on this thread. */
    sem->lock->lost_cb = on_hold_lost;
    sem->lock->lost_data = sem;
    hl_lock_ref(sem->lock); /* the handle's, until its memory goes */
    *out = sem;
    return HILOCK_OK;
}

int hilock_semaphore_create_n(hilock_semaphore **out, hilock_client *client,
                              const char *name, size_t name_len)
{
    return create(out, client, name, name_len, false);
}

int hilock_permit_semaphore_create_n(hilock_permit_semaphore **out,
                                     hilock_client *client, const char *name,
                                     size_t name_len)
{
    hilock_semaphore *sem = NULL;
    if (out == NULL)
        return hl_fail(HILOCK_EINVAL, "NULL argument");
    int rc = create(&sem, client, name, name_len, true);
    *out = (hilock_permit_semaphore *)sem;
    return rc;
}

int hilock_semaphore_create(hilock_semaphore **out, hilock_client *client,
                            const char *name)
{
    return hilock_semaphore_create_n(out, client, name, hl_cname_len(name));
}

int hilock_permit_semaphore_create(hilock_permit_semaphore **out,
                                   hilock_client *client, const char *name)
{
    return hilock_permit_semaphore_create_n(out, client, name,
                                            hl_cname_len(name));
}

static int destroy(hilock_semaphore *sem)
{
    if (!hl_handle_remove(sem))
        return hl_fail(HILOCK_ECLOSED, "semaphore was destroyed already");
    /* Its pending acquires end with HILOCK_ECANCELED; its permits' leases
     * stop, so they come back when their leases run out on the server. */
    hilock_lock_destroy(sem->lock);
    hl_sem_unref(sem);
    return HILOCK_OK;
}

int hilock_semaphore_destroy(hilock_semaphore *sem)
{
    if (sem == NULL)
        return hl_fail(HILOCK_EINVAL, "semaphore is NULL");
    /* A destroyed handle's memory may be gone: its kind is read only
     * while the registry knows the handle. */
    if (hl_handle_is_live(sem) && sem->expirable)
        return hl_fail(HILOCK_EINVAL,
                       "the handle of a permit semaphore is destroyed "
                       "with hilock_permit_semaphore_destroy");
    return destroy(sem);
}

int hilock_permit_semaphore_destroy(hilock_permit_semaphore *ps)
{
    if (ps == NULL)
        return hl_fail(HILOCK_EINVAL, "semaphore is NULL");
    return destroy((hilock_semaphore *)ps);
}

hilock_semaphore *hilock_permit_semaphore_base(hilock_permit_semaphore *ps)
{
    return (hilock_semaphore *)ps;
}

int hilock_permit_cancel(hilock_permit_semaphore *ps, uint64_t op_id)
{
    return hilock_semaphore_cancel((hilock_semaphore *)ps, op_id);
}

int hilock_semaphore_cancel(hilock_semaphore *sem, uint64_t op_id)
{
    if (sem == NULL)
        return hl_fail(HILOCK_EINVAL, "semaphore is NULL");
    return hilock_lock_cancel(sem->lock, op_id);
}

int hilock_permit_semaphore_set_lost_callback(hilock_permit_semaphore *ps,
                                              hilock_permit_lost_cb *cb,
                                              void *user_data)
{
    hilock_semaphore *sem = (hilock_semaphore *)ps;
    if (sem == NULL)
        return hl_fail(HILOCK_EINVAL, "semaphore is NULL");
    hilock_client *c = hl_lock_client_get(sem->lock);
    if (c == NULL)
        return hl_fail(HILOCK_ECLOSED, "client closed");
    int rc = set_lost_cb(c, sem, cb, user_data);
    hl_client_unref(c);
    return rc;
}
