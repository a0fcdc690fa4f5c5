/* A semaphore's calls on the loop thread: one operation each (op.h),
 * acquires waiting in the client's local line (line.c) for messages on
 * the semaphore's channel through the waiter registry, with a bounded
 * fallback; and the permits an expirable semaphore's handle holds, whose
 * leases the client's lease engine keeps. */
#include <stdlib.h>
#include <stdio.h>
#include <string.h>

#include "core/base/alloc.h"
#include "core/base/error_detail.h"
#include "core/engine/compose.h"
#include "core/transport/resp.h"
#include "kindkit/kindkit.h"
#include "layout/layout.h"
#include "semaphore/semaphore_internal.h"

/* A waiter that heard no message looks again after this long at most (or
 * when the first expirable permit runs out, if sooner): a message lost
 * while a connection was down costs no more. */
#define SEM_FALLBACK_MS 1000

static void attempt(sem_op *op);

void hl_sem_ref(hilock_semaphore *sem)
{
    atomic_fetch_add(&sem->refs, 1);
}

void hl_sem_unref(hilock_semaphore *sem)
{
    if (atomic_fetch_sub(&sem->refs, 1) != 1)
        return;
    hl_lock_unref(sem->lock);
    hl_free(sem->zkey);
    hl_free(sem);
}

/* ---- permits ----------------------------------------------------------- */

static sem_permit *permit_find(hilock_semaphore *sem, const char *id)
{
    for (sem_permit *p = sem->permits; p != NULL; p = p->next)
        if (strcmp(p->id, id) == 0)
            return p;
    return NULL;
}

static void permit_free_if_done(sem_permit *p)
{
    if (p->dropped && !p->lease_busy) {
        hilock_semaphore *sem = p->sem;
        hl_free(p);
        hl_sem_unref(sem);
    }
}

static void permit_drop(sem_permit *p)
{
    sem_permit **pp = &p->sem->permits;
    while (*pp != NULL && *pp != p)
        pp = &(*pp)->next;
    if (*pp == p)
        *pp = p->next;
    p->dropped = true;
    if (p->leased) {
        p->leased = false;
        if (hl_lease_stop(&p->lease))
            p->lease_busy = false;
    }
    permit_free_if_done(p);
}

void hl_sem_permit_lost(hl_lease *lease)
{
    sem_permit *p = (sem_permit *)(void *)lease;
    hilock_semaphore *sem = p->sem;
    /* The engine is inside its own report and gives the lease back when
     * it returns (hl_sem_permit_released). */
    p->leased = false;
    hl_lease_stop(lease);
    p->lost = true;
    if (sem->lost_cb != NULL && !atomic_load(&sem->destroyed)) {
        char id[HILOCK_PERMIT_ID_MAX];
        memcpy(id, p->id, sizeof id);
        hl_sem_ref(sem);
        sem->lost_cb(sem, id, sem->lost_data);
        hl_sem_unref(sem);
    }
}

void hl_sem_permit_released(hl_lease *lease)
{
    sem_permit *p = (sem_permit *)(void *)lease;
    p->lease_busy = false;
    permit_free_if_done(p);
}

static int permit_add(sem_op *op)
{
    hilock_semaphore *sem = op->sem;
    hilock_client *c = sem->lock->client;
    hl_lease_engine *e = c ? hl_client_leases(c) : NULL;
    sem_permit *p = e ? hl_calloc(1, sizeof *p) : NULL;
    if (p == NULL)
        return HILOCK_ENOMEM;
    p->sem = sem;
    hl_sem_ref(sem);
    memcpy(p->id, op->id, sizeof p->id);
    const char *colon = strrchr(p->id, ':');
    p->owner = strtoull(colon + 1, NULL, 10);
    hl_lease_start(e, &p->lease, &hl_semaphore_kind, sem->zkey,
                   sem->zkey_len, p->owner, op->sent_at,
                   op->watchdog ? 0 : op->lease_ms);
    p->leased = p->lease_busy = true;
    p->next = sem->permits;
    sem->permits = p;
    return HILOCK_OK;
}

/* ---- ending a call ----------------------------------------------------- */

static hl_waiters *registry(const hilock_semaphore *sem)
{
    hilock_client *c = sem->lock->client;
    return c ? hl_client_waiters(c) : NULL;
}

static bool is_acquire(const sem_op *op)
{
    return op->call == SEM_ACQUIRE || op->call == SEM_PERMIT_ACQUIRE;
}

/* Take op out of everything that could name it: its timer, the waiter
 * registry, the line, the handle's calls.  Returns the op next in line
 * when op was at its head.  Idempotent. */
static sem_op *detach(sem_op *op)
{
    hilock_semaphore *sem = op->sem;
    if (op->timer_ready)
        hl_timer_stop(&op->timer);
    if (op->registered) {
        /* The registry it joined: the handle may have lost its client by
         * now (the client closing cancels its calls after that). */
        hl_waiter_remove(op->reg, &op->waiter, false);
        op->registered = false;
    }
    sem_op *next = hl_sem_line_head(op) ? hl_sem_line_next(op) : NULL;
    hl_sem_line_leave(op);
    if (op->prev_in_sem)
        op->prev_in_sem->next_in_sem = op->next_in_sem;
    else if (sem->ops == op)
        sem->ops = op->next_in_sem;
    if (op->next_in_sem)
        op->next_in_sem->prev_in_sem = op->prev_in_sem;
    op->prev_in_sem = op->next_in_sem = NULL;
    return next;
}

static void end(sem_op *op, int status, int64_t value, const char *detail)
{
    if (op->ended)
        return;
    op->ended = true;
    sem_op *next = detach(op);
    /* The next in line asks now: its turn came. */
    if (next != NULL && !next->trying && !next->ended)
        attempt(next);
    hl_op_done(&op->op, status, value, NULL, detail);
}

/* ---- acquire ----------------------------------------------------------- */

static void arm(sem_op *op, int64_t hint_ms)
{
    hl_monotime now = hl_monotime_now();
    hl_monotime at = op->deadline;
    if (hl_sem_line_head(op)) {
        int64_t ms = hint_ms >= 0 && hint_ms < SEM_FALLBACK_MS
                         ? hint_ms + 1
                         : SEM_FALLBACK_MS;
        hl_monotime retry = hl_after_ms(now, ms);
        if (retry < at)
            at = retry;
    }
    if (at == INT64_MAX)
        return;
    hl_timer_arm(&op->timer, hl_sat_sub(at, now));
}

static void on_timer(hl_timer *t)
{
    sem_op *op = t->data;
    if (op->ended || op->trying)
        return; /* the attempt's reply looks at the deadline */
    if (hl_monotime_now() >= op->deadline) {
        end(op, HILOCK_EBUSY, 0, op->call == SEM_ACQUIRE
                                     ? "not enough permits came free in time"
                                     : "no permit came free in time");
        return;
    }
    if (hl_sem_line_head(op))
        attempt(op);
    else
        arm(op, -1);
}

static void on_wake(hl_waiter *w, hl_wake_reason why)
{
    sem_op *op = w->data;
    if (why == HL_WAKE_CLOSED) {
        op->registered = false;
        if (op->trying)
            op->cancel_status = HILOCK_ECLOSED;
        else
            end(op, HILOCK_ECLOSED, 0, "client closed");
        return;
    }
    if (!op->trying && !op->ended && hl_sem_line_head(op))
        attempt(op);
}

/* Listen on the channel; 1 when the subscription is confirmed already
 * (look again now: a message may have gone by), 0 when HL_WAKE_READY
 * will come, -1 when out of memory. */
static int listen(sem_op *op)
{
    hl_waiters *reg = registry(op->sem);
    hl_aux_name ch;
    if (reg == NULL || hl_lock_channel(op->sem->lock, &ch) != 0) {
        if (reg != NULL)
            hl_aux_name_done(&ch);
        return -1;
    }
    int rc = hl_waiter_add(reg, &op->waiter, ch.s, ch.len, true, on_wake, op);
    hl_aux_name_done(&ch);
    if (rc >= 0) {
        op->registered = true;
        op->reg = reg;
    }
    return rc;
}

/* Give back what an attempt took for a call that was cancelled meanwhile,
 * without waiting for the answer. */
static void give_back(sem_op *op)
{
    op->call = op->call == SEM_ACQUIRE ? SEM_RELEASE : SEM_PERMIT_RELEASE;
    (void)hl_sem_run(op, NULL);
}

/* A grant left `left` permits free: let that many more of the line ask
 * now, oldest first, rather than one per round trip.  An attempt in
 * flight counts as taking its permits; the first waiter that does not fit
 * stops the walk, so nobody behind it passes it. */
static void kick(sem_op *op, int64_t left)
{
    for (sem_op *o = hl_sem_line_first(op); o != NULL && left > 0;
         o = hl_sem_line_next(o)) {
        if (o == op || o->ended)
            continue;
        if (o->n > left)
            break;
        left -= o->n;
        if (!o->trying)
            attempt(o);
    }
}

static bool parse_pair(const hilock_reply *r, int64_t *a, int64_t *b)
{
    if (r == NULL || r->type != HILOCK_REPLY_ARRAY || r->elements != 2 ||
        r->element[0]->type != HILOCK_REPLY_INTEGER ||
        r->element[1]->type != HILOCK_REPLY_INTEGER)
        return false;
    *a = r->element[0]->integer;
    *b = r->element[1]->integer;
    return true;
}

static void on_attempt(void *data, int status, hilock_reply *reply)
{
    sem_op *op = data;
    op->trying = false;
    bool pending = op->registered && hl_waiter_done_trying(&op->waiter);
    if (status != HILOCK_OK) {
        char why[256];
        snprintf(why, sizeof why, "%s",
                 reply && reply->str ? reply->str : hilock_last_error());
        hilock_reply_free(reply);
        end(op, status, 0, why);
        return;
    }
    int64_t got = 0, v = 0;
    bool ok = parse_pair(hl_script_answer(op->sem->lock->client, reply),
                         &got, &v);
    hilock_reply_free(reply);
    if (!ok) {
        end(op, HILOCK_EPROTO, 0, "unexpected reply to a semaphore acquire");
        return;
    }
    if (got == 1) {
        if (op->cancel_status != 0) {
            give_back(op);
            end(op, op->cancel_status, 0, "canceled");
            return;
        }
        int rc = op->call == SEM_PERMIT_ACQUIRE ? permit_add(op) : HILOCK_OK;
        if (rc != HILOCK_OK)
            give_back(op);
        else
            kick(op, v);
        end(op, rc, rc == HILOCK_OK ? v : 0,
            rc == HILOCK_OK ? NULL : "out of memory for a permit");
        return;
    }
    if (op->cancel_status != 0) {
        end(op, op->cancel_status, 0, "canceled");
        return;
    }
    if (hl_monotime_now() >= op->deadline) {
        end(op, HILOCK_EBUSY, 0, op->call == SEM_ACQUIRE
                                     ? "not enough permits were free"
                                     : "no permit was free");
        return;
    }
    /* Only the head looks again by itself; the others wait for it to
     * let them ask, so that none passes it. */
    bool head = hl_sem_line_head(op);
    if (!op->registered) {
        int rc = listen(op);
        if (rc < 0) {
            end(op, HILOCK_ENOMEM, 0, "out of memory for a waiter");
            return;
        }
        if (rc == 1 && head) {
            attempt(op);
            return;
        }
    } else if (pending && head) {
        attempt(op);
        return;
    }
    arm(op, v);
}

static void attempt(sem_op *op)
{
    op->trying = true;
    if (op->registered)
        hl_waiter_trying(&op->waiter);
    op->sent_at = hl_monotime_now();
    int rc = hl_sem_run(op, on_attempt);
    if (rc != HILOCK_OK) {
        op->trying = false;
        end(op, rc, 0, "could not send the request");
    }
}

/* ---- the other calls --------------------------------------------------- */

static void on_reply(void *data, int status, hilock_reply *reply)
{
    sem_op *op = data;
    hilock_semaphore *sem = op->sem;
    sem_permit *p = op->call == SEM_PERMIT_RELEASE ? permit_find(sem, op->id)
                                                   : NULL;
    if (status != HILOCK_OK) {
        char why[256];
        snprintf(why, sizeof why, "%s",
                 reply && reply->str ? reply->str : hilock_last_error());
        hilock_reply_free(reply);
        if (p != NULL) {
            p->releasing = false;
            if (p->leased)
                hl_lease_set_releasing(&p->lease, false);
        }
        end(op, status, 0, why);
        return;
    }
    const hilock_reply *answer = hl_script_answer(sem->lock->client, reply);
    bool ok = answer->type == HILOCK_REPLY_INTEGER;
    int64_t v = ok ? answer->integer : 0;
    hilock_reply_free(reply);
    if (!ok) {
        end(op, HILOCK_EPROTO, 0, "unexpected reply from a semaphore script");
        return;
    }
    if (op->call != SEM_PERMIT_RELEASE) {
        end(op, HILOCK_OK, v, NULL);
        return;
    }
    if (p == NULL) {
        end(op, v == 0 ? HILOCK_ENOTOWNER : HILOCK_OK, 0,
            v == 0 ? "no such permit is held" : NULL);
        return;
    }
    bool lost = p->lost || v != 1;
    permit_drop(p);
    end(op, lost ? HILOCK_ELEASELOST : HILOCK_OK, 0,
        lost ? "the permit's lease ran out before its release" : NULL);
}

/* ---- the operation ----------------------------------------------------- */

static void op_start(hl_op *o)
{
    sem_op *op = (sem_op *)o;
    hilock_semaphore *sem = op->sem;
    if (atomic_load(&sem->destroyed)) {
        hl_op_done(o, HILOCK_ECANCELED, 0, NULL,
                   "semaphore handle destroyed");
        return;
    }
    if (hl_lock_conn(sem->lock) == NULL) {
        hl_op_done(o, HILOCK_ECLOSED, 0, NULL, "client closed");
        return;
    }
    op->next_in_sem = sem->ops;
    if (sem->ops)
        sem->ops->prev_in_sem = op;
    sem->ops = op;
    if (!is_acquire(op)) {
        if (op->call == SEM_PERMIT_RELEASE) {
            sem_permit *p = permit_find(sem, op->id);
            if (p != NULL && p->releasing) {
                end(op, HILOCK_EBUSY, 0, "the permit is being released");
                return;
            }
            if (p != NULL) {
                p->releasing = true;
                if (p->leased)
                    hl_lease_set_releasing(&p->lease, true);
            }
        }
        int rc = hl_sem_run(op, on_reply);
        if (rc != HILOCK_OK)
            end(op, rc, 0, "could not send the request");
        return;
    }
    if (hl_check_name_slot(sem->lock) != HILOCK_OK) {
        end(op, HILOCK_EINVAL, 0, hilock_last_error());
        return;
    }
    if (op->call == SEM_PERMIT_ACQUIRE) {
        static _Atomic uint64_t next_owner = 1;
        snprintf(op->id, sizeof op->id, "%s:%llu",
                 hilock_client_id(sem->lock->client),
                 (unsigned long long)atomic_fetch_add(&next_owner, 1));
    }
    if (op->watchdog)
        op->lease_ms = hl_client_watchdog_ms(sem->lock->client);
    op->deadline = hl_wait_deadline(op->wait_ms);
    hl_timer_init(&op->timer, hilock_client_loop(sem->lock->client),
                  on_timer, op);
    op->timer_ready = true;
    /* A single try does not queue: it asks at once. */
    if (op->wait_ms != 0 && hl_sem_line_join(op) == NULL) {
        end(op, HILOCK_ENOMEM, 0, "out of memory for a waiter");
        return;
    }
    if (op->wait_ms == 0 || hl_sem_line_head(op))
        attempt(op);
    else
        arm(op, -1);
}

static void op_cancel(hl_op *o, int status)
{
    sem_op *op = (sem_op *)o;
    if (op->trying)
        op->cancel_status = status; /* its reply ends it */
    else
        end(op, status, 0,
            status == HILOCK_ETIMEDOUT ? "timed out" : "canceled");
}

static void op_complete(hl_op *o)
{
    sem_op *op = (sem_op *)o;
    op->cb(op->sem, o->status, o->value,
           o->status == HILOCK_OK && op->call == SEM_PERMIT_ACQUIRE ? op->id
                                                                    : NULL,
           op->user_data);
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
};

int hl_sem_submit(sem_op *op, int64_t *value, char *id)
{
    hl_op_init(&op->op, &sem_op_type);
    hilock_client *c = hl_lock_client_get(op->sem->lock);
    if (c == NULL) {
        hl_sem_unref(op->sem);
        hl_free(op);
        return hl_fail(HILOCK_ECLOSED, "client closed");
    }
    int rc;
    if (op->cb == NULL) {
        int64_t v = 0;
        hl_op_ref(&op->op); /* the results are read after the wait */
        rc = hl_op_run_blocking(
            c, &op->op,
            hl_client_blocking_limit_us(c, is_acquire(op) ? op->wait_ms : 0),
            &v, NULL);
        if (value != NULL)
            *value = rc == HILOCK_OK ? v : 0;
        if (id != NULL && rc == HILOCK_OK)
            memcpy(id, op->id, HILOCK_PERMIT_ID_MAX);
        hl_op_unref(&op->op);
    } else {
        rc = hl_op_submit_or_drop(c, &op->op);
    }
    hl_client_unref(c);
    return rc;
}

/* ---- the handle -------------------------------------------------------- */

/* Loop thread (or none left): end the calls, let the permits go. */
static void teardown(hilock_semaphore *sem)
{
    while (sem->ops != NULL) {
        sem_op *op = sem->ops;
        if (op->trying) {
            /* Its reply ends it (giving back what it got); nothing else
             * names it until then. */
            op->cancel_status = HILOCK_ECANCELED;
            sem_op *next = detach(op);
            if (next != NULL && !next->trying && !next->ended &&
                next->sem != sem)
                attempt(next);
            continue;
        }
        end(op, HILOCK_ECANCELED, 0, "semaphore handle destroyed");
    }
    while (sem->permits != NULL)
        permit_drop(sem->permits);
}

typedef struct handle_op {
    hl_op op; /* first */
    hilock_semaphore *sem;
    bool set_cb;
    hilock_permit_lost_cb *cb;
    void *data;
} handle_op;

static void handle_start(hl_op *o)
{
    handle_op *h = (handle_op *)o;
    if (h->set_cb) {
        h->sem->lost_cb = h->cb;
        h->sem->lost_data = h->data;
    } else {
        teardown(h->sem);
    }
    hl_op_done(o, HILOCK_OK, 0, NULL, NULL);
}

static void on_stack(hl_op *o) { (void)o; }

static const hl_op_type handle_type = {.start = handle_start,
                                       .destroy = on_stack};

static int handle_call(hilock_semaphore *sem, bool set_cb,
                       hilock_permit_lost_cb *cb, void *data)
{
    handle_op h = {.sem = sem, .set_cb = set_cb, .cb = cb, .data = data};
    hl_op_init(&h.op, &handle_type);
    hilock_client *c = hl_lock_client_get(sem->lock);
    int rc = c ? hl_op_call_and_wait(c, &h.op) : HILOCK_ECLOSED;
    if (c != NULL)
        hl_client_unref(c);
    return rc;
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
    int rc = hl_lock_create(&sem->lock, client, &hl_semaphore_kind, name,
                            name_len);
    if (rc != HILOCK_OK) {
        hl_free(sem);
        return rc;
    }
    hl_aux_name z;
    if (hl_layout_suffixed(&z, name, name_len, HL_LAYOUT_PERMIT_TIMEOUT) !=
            0 ||
        (sem->zkey = hl_malloc(z.len + 1)) == NULL) {
        hl_aux_name_done(&z);
        hilock_lock_destroy(sem->lock);
        hl_free(sem);
        return hl_fail(HILOCK_ENOMEM, "out of memory for a semaphore");
    }
    memcpy(sem->zkey, z.s, z.len + 1);
    sem->zkey_len = z.len;
    hl_aux_name_done(&z);
    sem->expirable = expirable;
    atomic_init(&sem->refs, 1);
    atomic_init(&sem->destroyed, false);
    hl_lock_ref(sem->lock); /* the handle's, until its memory goes */
    *out = sem;
    return HILOCK_OK;
}

int hilock_semaphore_create(hilock_semaphore **out, hilock_client *client,
                            const char *name, size_t name_len)
{
    return create(out, client, name, name_len, false);
}

int hilock_permit_semaphore_create(hilock_semaphore **out,
                                   hilock_client *client, const char *name,
                                   size_t name_len)
{
    return create(out, client, name, name_len, true);
}

int hilock_semaphore_destroy(hilock_semaphore *sem)
{
    if (sem == NULL)
        return hl_fail(HILOCK_EINVAL, "semaphore is NULL");
    atomic_store(&sem->destroyed, true);
    hilock_client *c = hl_lock_client_get(sem->lock);
    if (c != NULL && !hl_client_in_loop(c)) {
        if (handle_call(sem, false, NULL, NULL) != HILOCK_OK)
            teardown(sem); /* the loop is gone: nothing else runs */
    } else {
        teardown(sem);
    }
    if (c != NULL)
        hl_client_unref(c);
    hilock_lock_destroy(sem->lock);
    hl_sem_unref(sem);
    return HILOCK_OK;
}

int hilock_semaphore_set_lost_callback(hilock_semaphore *sem,
                                       hilock_permit_lost_cb *cb,
                                       void *user_data)
{
    if (sem == NULL)
        return hl_fail(HILOCK_EINVAL, "semaphore is NULL");
    int rc = handle_call(sem, true, cb, user_data);
    return rc == HILOCK_OK ? rc : hl_fail(rc, "client closed");
}
