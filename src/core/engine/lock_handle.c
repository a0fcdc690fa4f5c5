/* Lock handles: creation, naming, holds, teardown. */
#include <inttypes.h>
#include <stddef.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "core/base/alloc.h"
#include "core/base/error_detail.h"
#include "core/base/handle.h"
#include "core/config/option_values.h"
#include "core/engine/engine_internal.h"
#include "core/engine/kept_grants.h"
#include "core/engine/unacked.h"
#include "core/loop/io.h"
#include "core/runtime/ack.h"
#include "core/transport/resp.h"

int hl_lock_channel(const hilock_lock *lock, hl_aux_name *out)
{
    return lock->kind->channel(lock, NULL, 0, out);
}

int hl_owner_channel(const hilock_lock *lock, uint64_t owner,
                     hl_aux_name *out)
{
    if (!lock->kind->channel_per_owner)
        return hl_lock_channel(lock, out);
    char field[HILOCK_CLIENT_ID_LEN + 22];
    size_t flen = hl_owner_field(lock, owner, field, sizeof field);
    return lock->kind->channel(lock, field, flen, out);
}

/* The link from a lock to its client changes on the client's loop thread
 * (closing detaches every lock) and is read from any thread by the entry
 * points.  A few mutexes, picked by the lock's address, guard it: a
 * mutex per handle would cost every handle its size. */
#define LINK_LOCKS 32
static pthread_mutex_t link_locks[LINK_LOCKS] = {
#define L PTHREAD_MUTEX_INITIALIZER
    L, L, L, L, L, L, L, L, L, L, L, L, L, L, L, L,
    L, L, L, L, L, L, L, L, L, L, L, L, L, L, L, L,
#undef L
};

static pthread_mutex_t *link_lock(const hilock_lock *lock)
{
    return &link_locks[((uintptr_t)lock >> 6) % LINK_LOCKS];
}

pthread_mutex_t *hl_lock_link_mutex(const hilock_lock *lock)
{
    return link_lock(lock);
}

static void set_client(hilock_lock *lock, hilock_client *c)
{
    pthread_mutex_lock(link_lock(lock));
    lock->client = c;
    pthread_mutex_unlock(link_lock(lock));
}

hilock_client *hl_lock_client_get(hilock_lock *lock)
{
    pthread_mutex_lock(link_lock(lock));
    hilock_client *c = atomic_load(&lock->destroyed) ? NULL : lock->client;
    if (c != NULL)
        hl_client_ref(c);
    pthread_mutex_unlock(link_lock(lock));
    return c;
}

static void lock_free(hilock_lock *lock)
{
    hl_lock_rare *r = hl_lock_rare_peek(lock);
    if (r != NULL) {
        hl_kept_grants_free(lock);
        hl_free(r->unacked);
        hl_free(r->request_sub);
        hl_free(r->turn_table);
        hl_free(r);
    }
    hl_handle_release(lock);
}

hl_lock_rare *hl_lock_rare_get(hilock_lock *lock)
{
    hl_lock_rare *r = hl_lock_rare_peek(lock);
    if (r != NULL)
        return r;
    hl_lock_rare *mine = hl_calloc(1, sizeof *mine);
    if (mine == NULL)
        return NULL;
    /* A setting on another thread may publish its own first. */
    if (atomic_compare_exchange_strong_explicit(&lock->rare, &r, mine,
                                                memory_order_acq_rel,
                                                memory_order_acquire))
        return mine;
    hl_free(mine);
    return r;
}

void hl_lock_ref(hilock_lock *lock) { atomic_fetch_add(&lock->refs, 1); }

void hl_lock_unref(hilock_lock *lock)
{
    if (atomic_fetch_sub(&lock->refs, 1) == 1)
        lock_free(lock);
}

/* The client closes its handles before it cancels its operations: their
 * pending acquires end with HILOCK_ECLOSED, and their hold listeners end
 * the multi-lock calls coordinated there. */
static const hl_client_part handles_part = {
    .rank = -1,
    .close = hl_locks_client_closed,
    .master_changed = hl_unacked_master_changed};

static void each_hold(hilock_client *c, hl_hold_visit *visit, void *ctx);

int hl_lock_create(hilock_lock **out, hilock_client *client,
                   const hl_kind *kind, const char *name, size_t name_len)
{
    hl_clear_detail();
    if (out == NULL || client == NULL || name == NULL)
        return hl_fail(HILOCK_EINVAL, "NULL argument");
    *out = NULL;
    if (name_len == 0)
        return hl_fail(HILOCK_EINVAL, "the lock name is empty");
    if (name_len > HILOCK_MAX_NAME_LEN)
        return hl_fail(HILOCK_EINVAL,
                       "the lock name is %zu bytes; at most %d are allowed",
                       name_len, HILOCK_MAX_NAME_LEN);
    hl_aux_name key = {.len = 0};
    if (kind->lease_key != NULL && kind->lease_key(name, name_len, &key) != 0) {
        hl_aux_name_done(&key);
        return hl_fail(HILOCK_ENOMEM, "out of memory for a lock");
    }
    hilock_lock *lock =
        hl_calloc(1, sizeof *lock + name_len + 1 + (key.len ? key.len + 1 : 0));
    if (lock == NULL) {
        hl_aux_name_done(&key);
        return hl_fail(HILOCK_ENOMEM, "out of memory for a lock");
    }
    lock->kind = kind;
    atomic_init(&lock->refs, 1);
    atomic_init(&lock->rare, NULL);
    memcpy(lock->name, name, name_len);
    lock->name[name_len] = '\0';
    lock->name_len = (uint32_t)name_len;
    /* The lease key lives as long as the handle's memory, which outlives
     * every lease on it. */
    if (key.len > 0) {
        char *lease_key = lock->name + name_len + 1;
        memcpy(lease_key, key.s, key.len);
        lease_key[key.len] = '\0';
        lock->lease_key_len = (uint32_t)key.len;
    }
    if (kind->lease_key != NULL)
        hl_aux_name_done(&key);
    if (hl_handle_add(lock) != 0) {
        lock_free(lock);
        return hl_fail(HILOCK_ENOMEM, "out of memory for a lock");
    }
    /* Before joining the client's list: a client that closes after this
     * closes its handles, and one that closed before is seen closed
     * below. */
    if (hl_client_attach_part(client, &handles_part) != 0) {
        hl_handle_remove(lock);
        lock_free(lock);
        return hl_fail(HILOCK_ENOMEM, "no room for a lock on the client");
    }
    pthread_mutex_lock(&client->lock);
    bool closed = client->closed;
    if (!closed) {
        set_client(lock, client);
        lock->conn = hl_client_conn_for(client, name, name_len);
        lock->next_in_client = client->locks;
        if (client->locks)
            client->locks->prev_in_client = lock;
        client->locks = lock;
        client->each_hold = each_hold;
    }
    pthread_mutex_unlock(&client->lock);
    if (closed) {
        hl_handle_remove(lock);
        lock_free(lock);
        return hl_fail(HILOCK_ECLOSED, "client is closed");
    }
    *out = lock;
    return HILOCK_OK;
}

hl_conn *hl_lock_conn(const hilock_lock *lock)
{
    if (lock->client == NULL || lock->client->closed)
        return NULL;
    /* On a cluster the master of the name's slot changes with resharding
     * and failover: ask the map each time rather than keep a connection
     * to a node that no longer serves it. */
    if (lock->client->cluster)
        return hl_client_conn_for(lock->client, lock->name, lock->name_len);
    return lock->conn;
}

int hl_lock_write(hilock_lock *lock, hl_write_send_fn *send, void *ctx,
                  hl_request_fn *fn, void *data)
{
    hl_conn *conn = hl_lock_conn(lock);
    if (conn == NULL)
        return HILOCK_ECLOSED;
    return hl_ack_write(lock->client, conn, send, ctx, fn, data);
}

bool hl_lock_on_cluster(const hilock_lock *lock)
{
    return lock->client != NULL && lock->client->cluster != NULL;
}

int hl_lock_gone(const hilock_lock *lock, const char **why)
{
    *why = lock->destroyed ? "lock handle destroyed" : "client closed";
    return lock->destroyed ? HILOCK_ECANCELED : HILOCK_ECLOSED;
}

static bool others_seen_within(hilock_lock *lock, uint32_t ms)
{
    uint32_t seen =
        atomic_load_explicit(&lock->others_seen_ms, memory_order_relaxed);
    return seen != 0 && (uint32_t)(hl_monotime_ms32() - seen) < ms;
}

bool hl_lock_taking_turns(hilock_lock *lock)
{
    /* Modular: callers of a handle last refused a multiple of 49.7 days
     * ago may sleep rather than spin for up to HL_TURNS_LATELY_MS, which
     * costs them a wake-up a call, nothing more. */
    return others_seen_within(lock, HL_TURNS_LATELY_MS);
}

bool hl_lock_contended_lately(hilock_lock *lock)
{
    /* Modular too: such a handle goes in full a few seconds longer. */
    return others_seen_within(lock, HL_CONTENDED_LATELY_MS);
}

void hl_lock_saw_others(hilock_lock *lock)
{
    atomic_store_explicit(&lock->others_seen_ms, hl_monotime_ms32(),
                          memory_order_relaxed);
}

bool hl_lock_writes_plain(const hilock_lock *lock)
{
    hl_conn *conn = hl_lock_conn(lock);
    return conn != NULL && hl_ack_plain(lock->client, conn);
}

bool hl_lock_usable(const hilock_lock *lock)
{
    return !lock->destroyed && hl_lock_conn(lock) != NULL;
}

bool hl_lock_others_wait(const hilock_lock *lock, const hl_waiter *self,
                         bool *known)
{
    hl_aux_name ch;
    if (known)
        *known = false;
    if (lock->client == NULL || hl_lock_channel(lock, &ch) != 0)
        return false;
    hl_waiters *reg = lock->client->waiters;
    bool others = hl_waiters_others(reg, ch.s, ch.len, self);
    if (known)
        *known = hl_waiters_known(reg, ch.s, ch.len);
    hl_aux_name_done(&ch);
    return others;
}

bool hl_lock_owner_listened(const hilock_lock *lock, uint64_t owner)
{
    hl_aux_name ch;
    if (lock->client == NULL || hl_owner_channel(lock, owner, &ch) != 0)
        return false;
    bool known = hl_waiters_known(lock->client->waiters, ch.s, ch.len);
    hl_aux_name_done(&ch);
    return known;
}

void hl_lock_freed_here(hilock_lock *lock)
{
    hl_aux_name ch;
    if (lock->client == NULL || hl_lock_channel(lock, &ch) != 0)
        return;
    hl_waiters_freed_here(lock->client->waiters, ch.s, ch.len);
    hl_aux_name_done(&ch);
}

int64_t hl_lock_waiter_timeout_ms(const hilock_lock *lock)
{
    return lock->client->opts->waiter_timeout_ms;
}

int64_t hl_lock_delay_ms(const hilock_lock *lock)
{
    return lock->client->opts->lock_delay_ms;
}

const char *hl_lock_client_id(const hilock_lock *lock)
{
    return lock->client->id;
}

size_t hl_owner_field(const hilock_lock *lock, uint64_t owner, char *buf,
                      size_t cap)
{
    /* On every attempt and release: no printf. */
    (void)cap; /* HILOCK_CLIENT_ID_LEN + 1 + 20 digits fit by contract */
    memcpy(buf, lock->client->id, HILOCK_CLIENT_ID_LEN);
    buf[HILOCK_CLIENT_ID_LEN] = ':';
    size_t n = HILOCK_CLIENT_ID_LEN + 1 +
               hl_u64_dec(buf + HILOCK_CLIENT_ID_LEN + 1, owner);
    buf[n] = '\0';
    return n;
}

/* The card's list of holds (presence.c): every hold counted held and not
 * lost, of every handle of c.  On the loop thread, where holds change;
 * the client's mutex keeps the list of handles still. */
static void each_hold(hilock_client *c, hl_hold_visit *visit, void *ctx)
{
    pthread_mutex_lock(&c->lock);
    for (hilock_lock *l = c->locks; l != NULL; l = l->next_in_client)
        for (hl_hold *h = l->holds; h != NULL; h = h->next)
            if (h->count > 0 && !h->lost && !h->dropped)
                visit(ctx, l->name, l->name_len, h->owner, h->since);
    pthread_mutex_unlock(&c->lock);
}

/* Holds are a short list: a lock has one holder at a time, plus owners
 * of this client whose release or loss is still being settled. */
hl_hold *hl_hold_find(hilock_lock *lock, uint64_t owner)
{
    for (hl_hold *h = lock->holds; h != NULL; h = h->next)
        if (h->owner == owner)
            return h;
    return NULL;
}

hl_hold *hl_hold_get(hilock_lock *lock, uint64_t owner)
{
    hl_hold *h = hl_hold_find(lock, owner);
    if (h != NULL)
        return h;
    h = hl_calloc(1, sizeof *h);
    if (h == NULL)
        return NULL;
    h->lock = lock;
    h->owner = owner;
    h->next = lock->holds;
    lock->holds = h;
    return h;
}

/* Let go of the hold's lease; true when the engine is done with it. */
static bool hold_stop_lease(hl_hold *h)
{
    if (h->leased) {
        h->leased = false;
        if (hl_lease_stop(&h->lease_mem))
            h->lease_busy = false;
    }
    return !h->lease_busy;
}

void hl_hold_drop(hl_hold *h)
{
    hilock_lock *lock = h->lock;
    hl_hold **pp = &lock->holds;
    while (*pp != NULL && *pp != h)
        pp = &(*pp)->next;
    if (*pp == h)
        *pp = h->next;
    h->dropped = true;
    /* A renewal in flight may still name the lease inside: the engine
     * then gives it back later and the hold is freed there. */
    if (hold_stop_lease(h))
        hl_free(h);
    hl_release_requests_sync(lock);
}

void hl_hold_done(hl_hold *h)
{
    hilock_lock *lock = h->lock;
    uint64_t owner = h->owner;
    bool older_lost = h->older_lost;
    /* A new hold rather than this one without its lease: a renewal in
     * flight may still name the lease inside this one. */
    hl_hold_drop(h);
    if (older_lost) {
        hl_hold *marker = hl_hold_get(lock, owner);
        if (marker != NULL)
            marker->older_lost = true; /* else that release says ENOTOWNER */
    }
}

int hl_lock_hold_once(hilock_lock *lock, uint64_t owner, int64_t *lease_ms,
                      bool *fenced)
{
    hl_hold *h = hl_hold_find(lock, owner);
    if (h != NULL && h->lost)
        return hl_fail(HILOCK_ELEASELOST, "the lease was lost before this "
                                          "wait");
    if (h == NULL || h->count <= 0)
        return hl_fail(HILOCK_ENOTOWNER, "this owner does not hold the "
                                         "lock");
    if (h->count > 1 || h->releases_in_flight > 0)
        return hl_fail(HILOCK_EINVAL,
                       "a condition is waited on with a lock held once, "
                       "and this owner holds it %lld times%s: release the "
                       "others first",
                       (long long)h->count,
                       h->releases_in_flight > 0 ? " (a release under way)"
                                                 : "");
    *lease_ms = h->lease_ms;
    *fenced = h->token != 0;
    return HILOCK_OK;
}

hl_lease_subject hl_hold_lease_subject(const hl_lease *lease)
{
    const hl_hold *h = (const hl_hold *)(const void *)((const char *)lease -
                                           offsetof(hl_hold, lease_mem));
    const hilock_lock *lock = h->lock;
    hl_lease_subject s = {.kind = lock->kind, .owner = h->owner};
    s.key = hl_lock_lease_key(lock, &s.key_len);
    return s;
}

void hl_hold_lease_released(hl_lease *lease)
{
    hl_hold *h = (hl_hold *)(void *)((char *)lease -
                                     offsetof(hl_hold, lease_mem));
    h->lease_busy = false;
    if (h->dropped)
        hl_free(h);
}

int hl_hold_start_lease(hl_hold *h, hl_monotime granted_at, int64_t lease_ms)
{
    hilock_lock *lock = h->lock;
    hl_lease_engine *e = hl_client_leases(lock->client);
    if (e == NULL)
        return HILOCK_ENOMEM;
    hl_lease_start(e, &h->lease_mem, granted_at, lease_ms);
    h->leased = true;
    h->lease_busy = true;
    h->lease_ms = (int32_t)lease_ms;
    return HILOCK_OK;
}

static void drop_all_holds(hilock_lock *lock)
{
    while (lock->holds != NULL)
        hl_hold_drop(lock->holds);
}

/* Detach from the client: no more operations, leases stop unreported. */
static void lock_detach(hilock_lock *lock, int status, const char *detail)
{
    hilock_client *c = lock->client;
    if (c == NULL)
        return;
    hl_lock_cancel_all(lock, status, detail);
    drop_all_holds(lock);
    hl_lock_rare *r = hl_lock_rare_peek(lock);
    if (r != NULL && r->request_sub != NULL)
        hl_pubsub_unsubscribe(r->request_sub);
    hl_kept_grants_forget_all(lock);
    hl_unacked_forget(lock);
    pthread_mutex_lock(&c->lock);
    bool unref = lock->unref_when_detached;
    lock->unref_when_detached = false;
    if (lock->prev_in_client)
        lock->prev_in_client->next_in_client = lock->next_in_client;
    else if (c->locks == lock)
        c->locks = lock->next_in_client;
    if (lock->next_in_client)
        lock->next_in_client->prev_in_client = lock->prev_in_client;
    lock->prev_in_client = lock->next_in_client = NULL;
    pthread_mutex_unlock(&c->lock);
    set_client(lock, NULL);
    if (unref)
        hl_lock_unref(lock);
}

void hl_locks_client_closed(hilock_client *c)
{
    for (;;) {
        pthread_mutex_lock(&c->lock);
        hilock_lock *lock = c->locks;
        pthread_mutex_unlock(&c->lock);
        if (lock == NULL)
            break;
        hl_lock_ref(lock);
        /* Its listeners first, while this thread is still the client's: a
         * group of locks may have to end its own calls here. */
        hl_lock_tell_listeners(lock, 0);
        lock_detach(lock, HILOCK_ECLOSED, "client closed");
        hl_lock_unref(lock);
    }
}

static void lock_teardown(hilock_lock *lock)
{
    atomic_store(&lock->destroyed, true);
    lock_detach(lock, HILOCK_ECANCELED, "lock handle destroyed");
    hl_lock_unref(lock);
}

/* Settings and teardown of a handle: each runs at once on the loop
 * thread, where the handle's state lives, and lives on the calling
 * thread's stack, which waits for it without a deadline, so that none
 * can fail for want of memory there (a listener or a release request
 * callback needs the handle's rare parts, which the calling thread
 * allocates first), and once the call returns the loop thread has taken
 * it. */
typedef struct handle_op {
    hl_op op; /* first */
    hilock_lock *lock;
    hl_hold_listener *listener; /* to add or remove */
    bool add;
    /* Without a listener: the lost callback, or with request the
     * callback for requests to give the lock up. */
    bool request;
    hilock_lost_cb *cb;
    hilock_release_request_cb *request_cb;
    void *data;
    /* What to do once the change is made for good (may be NULL), and
     * whether it ran or will run: not when a handed-over change was
     * refused, which leaves a listener in a list still walked. */
    void (*then)(void *arg);
    void *then_arg;
    bool then_taken;
} handle_op;

static void run_then(handle_op *h)
{
    h->then_taken = true;
    if (h->then != NULL)
        h->then(h->then_arg);
}

static void on_stack(hl_op *op) { (void)op; }

/* A handed-over change: its memory and a reference on the lock are its
 * own, since nobody waits for it. */
static void handed_free(hl_op *op)
{
    handle_op *h = (handle_op *)op;
    if (h->then_taken && h->then != NULL)
        h->then(h->then_arg);
    hl_lock_unref(h->lock);
    hl_free(h);
}

static void destroy_start(hl_op *op)
{
    lock_teardown(((handle_op *)op)->lock);
    hl_op_done(op, HILOCK_OK, 0, NULL, NULL);
}

static const hl_op_type destroy_type = {.start = destroy_start,
                                        .destroy = on_stack};

static const hl_op_type destroy_handed_type = {.start = destroy_start,
                                               .destroy = handed_free};

/* The client is closing: its loop thread detaches every lock and must be
 * left to do so alone; once it has, none is told of anything again. */
static void wait_locks_detached(hilock_client *c)
{
    pthread_mutex_lock(&c->lock);
    while (!c->locks_detached)
        pthread_cond_wait(&c->cond, &c->lock);
    pthread_mutex_unlock(&c->lock);
}

/* The teardown of a lock whose client is closing, asked on the loop
 * thread of another client, which must not wait for the closing one to
 * detach it: whichever of the two comes second drops the user's
 * reference. */
static void teardown_when_detached(hilock_client *c, hilock_lock *lock)
{
    atomic_store(&lock->destroyed, true);
    pthread_mutex_lock(&c->lock);
    bool linked = lock->prev_in_client != NULL || c->locks == lock;
    if (linked)
        lock->unref_when_detached = true;
    pthread_mutex_unlock(&c->lock);
    /* Unlinked, the closing loop has detached it or holds a reference of
     * its own while it does. */
    if (!linked)
        hl_lock_unref(lock);
}

/* hilock_lock_destroy on the loop thread of another client. */
static void destroy_handed_over(hilock_client *c, hilock_lock *lock,
                                handle_op *d)
{
    hl_op_init(&d->op, &destroy_handed_type);
    d->lock = lock;
    hl_lock_ref(lock);
    if (hl_op_submit(c, &d->op) != HILOCK_OK) {
        hl_lock_unref(lock);
        hl_free(d);
        teardown_when_detached(c, lock);
    }
}

int hilock_lock_destroy(hilock_lock *lock)
{
    if (lock == NULL)
        return hl_fail(HILOCK_EINVAL, "lock is NULL");
    /* Taken before anything is done, so that the want of it is the only
     * failure, and a harmless one. */
    handle_op *handed = NULL;
    if (!hl_op_caller_may_wait()) {
        handed = hl_calloc(1, sizeof *handed);
        if (handed == NULL)
            return hl_fail(HILOCK_ENOMEM, "out of memory to hand the "
                                          "teardown to the lock's loop");
    }
    if (!hl_handle_remove(lock)) {
        hl_free(handed);
        return hl_fail(HILOCK_ECLOSED, "lock was destroyed already");
    }
    hilock_client *c = hl_lock_client_get(lock);
    if (c == NULL || hl_client_in_loop(c)) {
        /* On the loop thread, closing or not, nothing else runs. */
        hl_free(handed);
        lock_teardown(lock);
        if (c != NULL)
            hl_client_unref(c);
        return HILOCK_OK;
    }
    if (handed != NULL) {
        destroy_handed_over(c, lock, handed);
        hl_client_unref(c);
        return HILOCK_OK;
    }
    /* Not a loop thread: hl_op_call_and_wait may wait here. */
    handle_op d;
    hl_op_init(&d.op, &destroy_type);
    d.lock = lock;
    if (hl_op_call_and_wait(c, &d.op) != HILOCK_OK) {
        /* Then nothing but the handle is left. */
        wait_locks_detached(c);
        lock_teardown(lock);
    }
    hl_client_unref(c);
    return HILOCK_OK;
}

const char *hilock_lock_name(const hilock_lock *lock, size_t *name_len)
{
    if (lock == NULL)
        return NULL;
    if (name_len)
        *name_len = lock->name_len;
    return lock->name;
}

uint64_t hilock_thread_owner(void)
{
    static atomic_uint_fast64_t next_owner = 1;
    static _Thread_local uint64_t mine;
    if (mine == 0)
        mine = atomic_fetch_add(&next_owner, 1);
    return mine;
}

void hl_lock_tell_listeners(hilock_lock *lock, uint64_t owner)
{
    hl_lock_rare *r = hl_lock_rare_peek(lock);
    for (hl_hold_listener *l = r ? r->listeners : NULL, *next; l != NULL;
         l = next) {
        next = l->next; /* a listener may leave while it is told */
        l->cb(lock, owner, l->data);
    }
}

static void unlink_listener(hilock_lock *lock, hl_hold_listener *l)
{
    hl_lock_rare *r = hl_lock_rare_peek(lock);
    if (r == NULL)
        return;
    for (hl_hold_listener **p = &r->listeners; *p != NULL;
         p = &(*p)->next) {
        if (*p == l) {
            *p = l->next;
            l->next = NULL;
            return;
        }
    }
}

/* Every setting lives in the handle, its rare parts (allocated by the
 * caller, apply_on_loop) or the listener's own storage, so none
 * allocates here. */
static void apply_setting(const handle_op *h)
{
    hilock_lock *lock = h->lock;
    hl_lock_rare *r = hl_lock_rare_peek(lock);
    if (h->listener != NULL) {
        unlink_listener(lock, h->listener);
        if (h->add) {
            h->listener->next = r->listeners;
            r->listeners = h->listener;
        }
        return;
    }
    if (h->request) {
        if (r == NULL)
            return; /* clearing a callback never set */
        r->request_cb = h->request_cb;
        r->request_data = h->data;
        hl_release_requests_sync(lock);
        return;
    }
    lock->lost_cb = h->cb;
    lock->lost_data = h->data;
}

static void setting_start(hl_op *op)
{
    apply_setting((handle_op *)op);
    hl_op_done(op, HILOCK_OK, 0, NULL, NULL);
}

static const hl_op_type setting_type = {.start = setting_start,
                                        .destroy = on_stack};

static const hl_op_type setting_handed_type = {.start = setting_start,
                                               .destroy = handed_free};

/* A setting asked on the loop thread of another client: a copy travels
 * to the lock's loop and takes effect there soon after.  Refused by a
 * closing client, whose loop tells nobody of anything once it has
 * detached the handle, it is dropped: a listener stays in the list,
 * which nobody walks again, and its then runs here. */
static int apply_handed_over(hilock_client *c, handle_op *h)
{
    handle_op *copy = hl_calloc(1, sizeof *copy);
    if (copy == NULL)
        return hl_fail(HILOCK_ENOMEM, "out of memory to hand a setting to "
                                      "the lock's loop");
    *copy = *h;
    hl_op_init(&copy->op, &setting_handed_type);
    copy->then_taken = true;
    hl_lock_ref(copy->lock);
    int rc = hl_op_submit(c, &copy->op);
    if (rc != HILOCK_OK) {
        copy->then_taken = false;
        hl_op_unref(&copy->op);
        return rc;
    }
    h->then_taken = true;
    return HILOCK_OK;
}

static int apply_on_loop(handle_op *h)
{
    if (h->lock == NULL)
        return hl_fail(HILOCK_EINVAL, "lock is NULL");
    hilock_client *c = hl_lock_client_get(h->lock);
    if (c == NULL) {
        /* Detached: the loop thread is done with the handle. */
        if (h->listener != NULL)
            unlink_listener(h->lock, h->listener);
        run_then(h);
        return hl_fail(HILOCK_ECLOSED, "client is closed");
    }
    bool needs_rare = h->listener != NULL ? h->add : h->request_cb != NULL;
    if (needs_rare && hl_lock_rare_get(h->lock) == NULL) {
        hl_client_unref(c);
        run_then(h);
        return hl_fail(HILOCK_ENOMEM, "out of memory for the lock's "
                                      "settings");
    }
    if (hl_client_in_loop(c)) {
        /* Closing or not: a group may let go of its members there. */
        apply_setting(h);
        hl_client_unref(c);
        run_then(h);
        return HILOCK_OK;
    }
    if (!hl_op_caller_may_wait()) {
        int rc = apply_handed_over(c, h);
        hl_client_unref(c);
        return rc;
    }
    /* Not a loop thread: hl_op_call_and_wait may wait here. */
    hl_op_init(&h->op, &setting_type);
    int rc = hl_op_call_and_wait(c, &h->op);
    if (rc != HILOCK_OK && h->listener != NULL) {
        /* Refused by a closing client: once its loop thread has detached
         * the handle, nothing names the listener but the list. */
        wait_locks_detached(c);
        unlink_listener(h->lock, h->listener);
    }
    hl_client_unref(c);
    run_then(h);
    return rc;
}

int hilock_lock_set_lost_callback(hilock_lock *lock, hilock_lost_cb *cb,
                                  void *user_data)
{
    handle_op h = {.lock = lock, .cb = cb, .data = user_data};
    return apply_on_loop(&h);
}

int hilock_lock_set_release_request_callback(hilock_lock *lock,
                                             hilock_release_request_cb *cb,
                                             void *user_data)
{
    if (lock != NULL && lock->kind->request_channel == NULL)
        return hl_fail(HILOCK_EINVAL, "a %s has no holder to ask",
                       lock->kind->name);
    handle_op h = {.lock = lock, .request = true, .request_cb = cb,
                   .data = user_data};
    return apply_on_loop(&h);
}

int hl_lock_listen(hilock_lock *lock, hl_hold_listener *l)
{
    if (l == NULL || l->cb == NULL)
        return hl_fail(HILOCK_EINVAL, "no listener");
    handle_op h = {.lock = lock, .listener = l, .add = true};
    return apply_on_loop(&h);
}

int hl_lock_unlisten(hilock_lock *lock, hl_hold_listener *l)
{
    if (l == NULL)
        return hl_fail(HILOCK_EINVAL, "no listener");
    handle_op h = {.lock = lock, .listener = l, .add = false};
    return apply_on_loop(&h);
}

bool hl_lock_unlisten_then(hilock_lock *lock, hl_hold_listener *l,
                           void (*then)(void *arg), void *arg)
{
    if (lock == NULL || l == NULL)
        return false;
    handle_op h = {.lock = lock, .listener = l, .add = false,
                   .then = then, .then_arg = arg};
    apply_on_loop(&h);
    return h.then_taken;
}

bool hilock_lock_owner_lost(hilock_lock *lock, uint64_t owner)
{
    if (lock == NULL || lock->client == NULL ||
        !hl_client_in_loop(lock->client))
        return false;
    hl_hold *h = hl_hold_find(lock, owner);
    return h != NULL && (h->lost || h->older_lost);
}

int hilock_lock_owner_lost_get(hilock_lock *lock, uint64_t owner, bool *lost)
{
    if (lock == NULL || lost == NULL)
        return hl_fail(HILOCK_EINVAL, "NULL argument");
    if (owner == 0)
        return hl_fail(HILOCK_EINVAL, "owner id 0 is reserved");
    int64_t v = 0;
    int rc = hl_lock_knowledge(lock, CALL_LEASE_LOST, owner, &v);
    if (rc == HILOCK_OK)
        *lost = v != 0;
    return rc;
}

int64_t hl_hold_knowledge(hilock_lock *lock, hl_lock_call_kind kind,
                          uint64_t owner)
{
    hl_hold *h = hl_hold_find(lock, owner);
    bool lost = h != NULL && (h->lost || h->older_lost);
    if (kind == CALL_LEASE_LOST)
        return lost;
    bool good = h != NULL && h->leased && !lost && !h->lease_mem.stopped;
    return good ? h->lease_mem.deadline / 1000 : 0;
}

int hl_lock_knowledge(hilock_lock *lock, hl_lock_call_kind kind,
                      uint64_t owner, int64_t *value)
{
    if (lock == NULL)
        return hl_fail(HILOCK_EINVAL, "NULL lock");
    hilock_client *c = hl_lock_client_get(lock);
    if (c == NULL)
        return hl_fail(HILOCK_ECLOSED, "client closed");
    bool here = hl_client_in_loop(c);
    hl_client_unref(c);
    if (here) {
        *value = hl_hold_knowledge(lock, kind, owner);
        return HILOCK_OK;
    }
    return hl_lock_call(lock, kind, owner, NULL, NULL, value);
}

void hl_lock_stop_renewing_grant(hilock_lock *lock, uint64_t owner)
{
    if (lock->client == NULL)
        return; /* closed: its holds are gone */
    hl_hold *h = hl_hold_find(lock, owner);
    if (h != NULL && h->count == 1 && h->releases_in_flight == 0)
        hl_hold_drop(h);
}

