/* Requests to give a lock up (hilock_lock_request_release): the asking
 * side's call, and the holding side's subscription and callback.
 *
 * A handle listens only while it holds the lock and has a callback, so
 * that the count of listeners a request answers is a count of holders
 * that heard it, not of waiters or idle handles that happen to listen.
 * The price is a SUBSCRIBE at a grant and an UNSUBSCRIBE at the last
 * release, on the pub/sub connection, which no acquire waits for; a
 * request sent between a grant and its subscription is not heard, and
 * says so (no listener). */
#include <stdio.h>
#include <string.h>

#include "core/base/alloc.h"
#include "core/base/error_detail.h"
#include "core/engine/engine_internal.h"

/* Owners a request is told to without allocating; a handle has one or
 * two holding owners in practice. */
#define OWNERS_ON_STACK 16

static bool hold_is_live(const hl_hold *h)
{
    return h->count > 0 && !h->lost && !h->dropped;
}

static bool holds_any(const hilock_lock *lock)
{
    for (const hl_hold *h = lock->holds; h != NULL; h = h->next)
        if (hold_is_live(h))
            return true;
    return false;
}

static bool holds_owner(const hilock_lock *lock, uint64_t owner)
{
    for (const hl_hold *h = lock->holds; h != NULL; h = h->next)
        if (h->owner == owner && hold_is_live(h))
            return true;
    return false;
}

/* Every owner holding the lock when the request came is told once, each
 * only while it still holds: a callback may release another owner's
 * hold, or destroy the handle, so the owners are read first. */
static void tell_holders(hilock_lock *lock, const char *msg, size_t len)
{
    uint64_t on_stack[OWNERS_ON_STACK], *owners = on_stack;
    size_t n = 0;
    for (const hl_hold *h = lock->holds; h != NULL; h = h->next)
        n += hold_is_live(h);
    if (n > OWNERS_ON_STACK) {
        owners = hl_malloc(n * sizeof *owners);
        if (owners == NULL) {
            /* Out of memory: the first ones are told. */
            owners = on_stack;
            n = OWNERS_ON_STACK;
        }
    }
    size_t k = 0;
    for (const hl_hold *h = lock->holds; h != NULL && k < n; h = h->next)
        if (hold_is_live(h))
            owners[k++] = h->owner;
    hilock_client *c = lock->client;
    hl_lock_rare *r = hl_lock_rare_peek(lock);
    hl_lock_ref(lock);
    for (size_t i = 0; i < k; i++) {
        if (lock->destroyed || lock->client == NULL || r->request_cb == NULL)
            break;
        if (!holds_owner(lock, owners[i]))
            continue;
        hl_client_enter_callback(c);
        r->request_cb(lock, owners[i], msg, len, r->request_data);
        hl_client_leave_callback(c);
    }
    hl_lock_unref(lock);
    if (owners != on_stack)
        hl_free(owners);
}

static void on_request_event(hl_sub *sub, hl_sub_event ev, const char *msg,
                             size_t len)
{
    hilock_lock *lock = sub->data;
    if (lock->client == NULL)
        return;
    if (ev == HL_SUB_REFUSED) {
        char why[256];
        snprintf(why, sizeof why, "%.*s", (int)(len < 255 ? len : 255),
                 msg ? msg : "");
        lock->client->subscribes_refused++;
        hl_client_event(lock->client, HILOCK_EVENT_SUBSCRIBE_REFUSED, NULL,
                        why, lock, 0);
        return;
    }
    if (ev == HL_SUB_MESSAGE && hl_lock_rare_peek(lock)->request_cb != NULL)
        tell_holders(lock, msg, len);
}

void hl_release_requests_sync(hilock_lock *lock)
{
    /* Most handles never set the callback: they have no rare parts. */
    hl_lock_rare *r = hl_lock_rare_peek(lock);
    if (r == NULL)
        return;
    bool want = r->request_cb != NULL && lock->client != NULL &&
                !lock->destroyed && holds_any(lock);
    bool listening = r->request_sub != NULL && r->request_sub->channel != NULL;
    if (want == listening)
        return;
    if (!want) {
        hl_pubsub_unsubscribe(r->request_sub);
        return;
    }
    if (r->request_sub == NULL)
        r->request_sub = hl_calloc(1, sizeof *r->request_sub);
    hl_aux_name ch;
    if (r->request_sub == NULL || lock->kind->request_channel == NULL ||
        lock->kind->request_channel(lock, &ch) != 0)
        return; /* out of memory: the next grant tries again */
    (void)hl_client_listen(lock->client, r->request_sub, ch.s, ch.len,
                           on_request_event, lock);
    hl_aux_name_done(&ch);
}

/* ---- the asking side ----------------------------------------------------- */

typedef struct request_call {
    hl_op op; /* first */
    hilock_lock *lock;
    hilock_lock_cb *cb; /* NULL: a blocking caller waits */
    void *user_data;
    size_t reason_len;
    char reason[HILOCK_REQUEST_REASON_MAX + 1];
} request_call;

/* {held, listeners} or {1, 0, refusal}: -1 for nobody holding, else the
 * listeners. */
static int parse_answer(const hilock_reply *r, int64_t *heard, char *why,
                        size_t cap)
{
    if (r == NULL || r->type != HILOCK_REPLY_ARRAY || r->elements < 2 ||
        r->elements > 3 || r->element[0]->type != HILOCK_REPLY_INTEGER ||
        r->element[1]->type != HILOCK_REPLY_INTEGER)
        return HILOCK_EPROTO;
    if (r->elements == 3) {
        const hilock_reply *e = r->element[2];
        snprintf(why, cap, "the server refused the request's PUBLISH: %.*s",
                 e->type == HILOCK_REPLY_STRING ||
                         e->type == HILOCK_REPLY_ERROR
                     ? (int)(e->len < 200 ? e->len : 200)
                     : 0,
                 e->str ? e->str : "");
        return HILOCK_EPERM;
    }
    *heard = r->element[0]->integer == 0 ? -1 : r->element[1]->integer;
    return HILOCK_OK;
}

static void on_reply(void *data, int status, hilock_reply *reply)
{
    request_call *call = data;
    char why[256] = "";
    int64_t heard = 0;
    if (status == HILOCK_OK) {
        status = parse_answer(reply, &heard, why, sizeof why);
        if (status == HILOCK_EPROTO)
            snprintf(why, sizeof why, "unexpected reply to a request to "
                                      "give the lock up");
    } else {
        snprintf(why, sizeof why, "%s",
                 reply && reply->str ? reply->str : hilock_last_error());
    }
    hilock_reply_free(reply);
    hl_op_done(&call->op, status, heard, NULL, why[0] ? why : NULL);
}

static void call_start(hl_op *op)
{
    request_call *call = (request_call *)op;
    hilock_lock *lock = call->lock;
    if (hl_lock_conn(lock) == NULL || lock->destroyed) {
        const char *why;
        int status = hl_lock_gone(lock, &why);
        hl_op_done(op, status, 0, NULL, why);
        return;
    }
    _Atomic int *gate = hl_op_gate_requests(op);
    int rc = lock->kind->request_release(lock, call->reason, call->reason_len,
                                         on_reply, call);
    hl_conn_gate_requests(gate);
    if (rc != HILOCK_OK)
        hl_op_done(op, rc, 0, NULL, hl_send_failure(rc));
}

static void call_complete(hl_op *op)
{
    request_call *call = (request_call *)op;
    call->cb(call->lock, op->status, op->value, call->user_data);
}

static void call_destroy(hl_op *op)
{
    request_call *call = (request_call *)op;
    hl_lock_unref(call->lock);
    hl_free(call);
}

static const hl_op_type request_call_type = {
    .start = call_start,
    .complete = call_complete,
    .destroy = call_destroy,
    .bounded = true,
    .withdrawable = true,
};

static int check_request(const hilock_lock *lock, const char *reason)
{
    if (lock == NULL)
        return hl_fail(HILOCK_EINVAL, "lock is NULL");
    if (lock->kind->request_release == NULL)
        return hl_fail(HILOCK_EINVAL, "a %s has no holder to ask",
                       lock->kind->name);
    if (reason != NULL && strlen(reason) > HILOCK_REQUEST_REASON_MAX)
        return hl_fail(HILOCK_EINVAL, "a reason is at most %d bytes",
                       HILOCK_REQUEST_REASON_MAX);
    return HILOCK_OK;
}

static int request_start(hilock_lock *lock, const char *reason,
                         hilock_lock_cb *cb, void *user_data,
                         int64_t *heard)
{
    hilock_client *c = hl_lock_client_get(lock);
    if (c == NULL)
        return hl_fail(HILOCK_ECLOSED, "client closed");
    request_call *call = hl_calloc(1, sizeof *call);
    if (call == NULL) {
        hl_client_unref(c);
        return hl_fail(HILOCK_ENOMEM, "out of memory");
    }
    hl_op_init(&call->op, &request_call_type);
    call->lock = lock;
    call->cb = cb;
    call->user_data = user_data;
    if (reason != NULL) {
        call->reason_len = strlen(reason);
        memcpy(call->reason, reason, call->reason_len);
    }
    hl_lock_ref(lock);
    int rc;
    if (cb == NULL)
        rc = hl_op_run_blocking(c, &call->op,
                                hl_blocking_limit_us(c->opts, 0), heard,
                                NULL);
    else
        rc = hl_op_submit_or_drop(c, &call->op);
    hl_client_unref(c);
    return rc;
}

int hilock_lock_request_release(hilock_lock *lock, const char *reason,
                                int64_t *heard)
{
    int64_t got = 0;
    if (heard != NULL)
        *heard = 0;
    int rc = check_request(lock, reason);
    if (rc != HILOCK_OK)
        return rc;
    rc = request_start(lock, reason, NULL, NULL, &got);
    if (rc == HILOCK_OK && heard != NULL)
        *heard = got;
    return rc;
}

int hilock_lock_request_release_async(hilock_lock *lock, const char *reason,
                                      hilock_lock_cb *cb, void *user_data)
{
    if (cb == NULL)
        return hl_fail(HILOCK_EINVAL, "NULL callback");
    int rc = check_request(lock, reason);
    if (rc != HILOCK_OK)
        return rc;
    return request_start(lock, reason, cb, user_data, NULL);
}
