/* Lock handles: creation, naming, holds, teardown. */
#include <inttypes.h>
#include <stddef.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "alloc.h"
#include "error_detail.h"
#include "handle.h"
#include "lockobj_internal.h"
#include "resp.h"

/* Write "prefix:{NAME}", or "prefix:NAME" when NAME holds a '{' already
 * (Redisson's rule, so both sides name the same keys), at out. */
static size_t aux_write(char *out, const char *prefix, const char *name,
                        size_t name_len)
{
    size_t plen = strlen(prefix);
    bool braces = memchr(name, '{', name_len) == NULL;
    char *p = out;
    memcpy(p, prefix, plen);
    p += plen;
    *p++ = ':';
    if (braces)
        *p++ = '{';
    memcpy(p, name, name_len);
    p += name_len;
    if (braces)
        *p++ = '}';
    *p = '\0';
    return (size_t)(p - out);
}

int hl_aux_name_make(hl_aux_name *a, const char *prefix,
                     const hilock_lock *lock)
{
    size_t need = strlen(prefix) + lock->name_len + 4;
    a->s = need <= sizeof a->buf ? a->buf : hl_malloc(need);
    if (a->s == NULL)
        return HILOCK_ENOMEM;
    a->len = aux_write(a->s, prefix, lock->name, lock->name_len);
    return 0;
}

int hl_lock_channel(const hilock_lock *lock, hl_aux_name *out)
{
    return hl_aux_name_make(out, lock->kind->channel_prefix, lock);
}

int hl_owner_channel(const hilock_lock *lock, uint64_t owner,
                     hl_aux_name *out)
{
    if (!lock->kind->channel_per_owner)
        return hl_lock_channel(lock, out);
    const char *prefix = lock->kind->channel_prefix;
    char field[HILOCK_CLIENT_ID_LEN + 22];
    size_t flen = hl_owner_field(lock, owner, field, sizeof field);
    size_t need = strlen(prefix) + lock->name_len + 5 + flen;
    out->s = need <= sizeof out->buf ? out->buf : hl_malloc(need);
    if (out->s == NULL)
        return HILOCK_ENOMEM;
    out->len = aux_write(out->s, prefix, lock->name, lock->name_len);
    out->s[out->len++] = ':';
    memcpy(out->s + out->len, field, flen);
    out->len += flen;
    out->s[out->len] = '\0';
    return 0;
}

int hl_aux_names_make(const hilock_lock *lock, int n,
                      const char *const *prefixes, hl_aux_name *out)
{
    for (int i = 0; i < n; i++) {
        const char *prefix =
            prefixes[i] ? prefixes[i] : lock->kind->channel_prefix;
        if (hl_aux_name_make(&out[i], prefix, lock) != 0) {
            hl_aux_names_done(i, out);
            return HILOCK_ENOMEM;
        }
    }
    return 0;
}

void hl_aux_names_done(int n, hl_aux_name *names)
{
    for (int i = 0; i < n; i++)
        hl_aux_name_done(&names[i]);
}

void hl_aux_name_done(hl_aux_name *a)
{
    if (a->s != a->buf)
        hl_free(a->s);
    a->s = NULL;
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
    hl_free(lock->lost);
    hl_handle_release(lock);
}

void hl_lock_ref(hilock_lock *lock) { atomic_fetch_add(&lock->refs, 1); }

void hl_lock_unref(hilock_lock *lock)
{
    if (atomic_fetch_sub(&lock->refs, 1) == 1)
        lock_free(lock);
}

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
    hilock_lock *lock = hl_calloc(1, sizeof *lock + name_len + 1);
    if (lock == NULL)
        return hl_fail(HILOCK_ENOMEM, "out of memory for a lock");
    lock->kind = kind;
    atomic_init(&lock->refs, 1);
    memcpy(lock->name, name, name_len);
    lock->name[name_len] = '\0';
    lock->name_len = name_len;
    if (hl_handle_add(lock) != 0) {
        lock_free(lock);
        return hl_fail(HILOCK_ENOMEM, "out of memory for a lock");
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
    return lock->conn;
}

bool hl_lock_usable(const hilock_lock *lock)
{
    return !lock->destroyed && hl_lock_conn(lock) != NULL;
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
    hl_hold **pp = &h->lock->holds;
    while (*pp != NULL && *pp != h)
        pp = &(*pp)->next;
    if (*pp == h)
        *pp = h->next;
    h->dropped = true;
    /* A renewal in flight may still name the lease inside: the engine
     * then gives it back later and the hold is freed there. */
    if (hold_stop_lease(h))
        hl_free(h);
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
    hl_lease_start(e, &h->lease_mem, lock->kind, lock->name, lock->name_len,
                   h->owner, granted_at, lease_ms);
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

/* Run user code for a lock: the detail for its status set, the handle
 * kept alive, and the client's callback guard around it. */
typedef struct user_call {
    hilock_acquire_cb *acquire_cb;
    const hilock_acquired *acquired;
    hilock_lock_cb *cb;
    int64_t value;
} user_call;

static void call_user(hilock_lock *lock, const user_call *u, int status,
                      void *user_data, const char *detail)
{
    hilock_client *c = lock->client;
    if (status != 0)
        hl_set_detail(detail);
    else
        hl_clear_detail();
    hl_lock_ref(lock);
    if (c)
        hl_client_enter_callback(c);
    if (u->acquire_cb)
        u->acquire_cb(lock, status, u->acquired, user_data);
    else
        u->cb(lock, status, u->value, user_data);
    if (c)
        hl_client_leave_callback(c);
    hl_lock_unref(lock);
}

void hl_lock_call_acquire_cb(hilock_lock *lock, hilock_acquire_cb *cb,
                             int status, const hilock_acquired *acquired,
                             void *user_data, const char *detail)
{
    user_call u = {.acquire_cb = cb, .acquired = acquired};
    call_user(lock, &u, status, user_data, detail);
}

void hl_lock_call_cb(hilock_lock *lock, hilock_lock_cb *cb, int status,
                     int64_t value, void *user_data, const char *detail)
{
    user_call u = {.cb = cb, .value = value};
    call_user(lock, &u, status, user_data, detail);
}

/* Detach from the client: no more operations, leases stop unreported. */
static void lock_detach(hilock_lock *lock, int status, const char *detail)
{
    hilock_client *c = lock->client;
    if (c == NULL)
        return;
    hl_lock_cancel_all(lock, status, detail);
    drop_all_holds(lock);
    pthread_mutex_lock(&c->lock);
    if (lock->prev_in_client)
        lock->prev_in_client->next_in_client = lock->next_in_client;
    else if (c->locks == lock)
        c->locks = lock->next_in_client;
    if (lock->next_in_client)
        lock->next_in_client->prev_in_client = lock->prev_in_client;
    lock->prev_in_client = lock->next_in_client = NULL;
    pthread_mutex_unlock(&c->lock);
    set_client(lock, NULL);
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
        /* Its group first, while this thread is still the client's: the
         * group may have to end its own calls here, on its coordinator. */
        if (lock->group != NULL)
            lock->group->cb(lock, 0, lock->group->data);
        lock_detach(lock, HILOCK_ECLOSED, "client closed");
        hl_lock_unref(lock);
    }
}

/* Lives on the destroying thread's stack, which waits for it without a
 * deadline: destroy must not fail for want of memory. */
typedef struct destroy_task {
    hl_task task;
    hilock_lock *lock;
    pthread_mutex_t m;
    pthread_cond_t cv;
    bool done;
} destroy_task;

static void lock_teardown(hilock_lock *lock)
{
    atomic_store(&lock->destroyed, true);
    lock_detach(lock, HILOCK_ECANCELED, "lock handle destroyed");
    hl_lock_unref(lock);
}

static void run_destroy(hilock_client *c, hl_task *t, bool closed)
{
    (void)c;
    (void)closed;
    destroy_task *d = (destroy_task *)t;
    lock_teardown(d->lock);
    pthread_mutex_lock(&d->m);
    d->done = true;
    pthread_cond_signal(&d->cv);
    pthread_mutex_unlock(&d->m);
}

int hilock_lock_destroy(hilock_lock *lock)
{
    if (lock == NULL)
        return hl_fail(HILOCK_EINVAL, "lock is NULL");
    if (!hl_handle_remove(lock))
        return hl_fail(HILOCK_ECLOSED, "lock was destroyed already");
    hilock_client *c = hl_lock_client_get(lock);
    if (c == NULL || hl_client_in_loop(c)) {
        lock_teardown(lock);
        if (c != NULL)
            hl_client_unref(c);
        return HILOCK_OK;
    }
    destroy_task d = {.task.run = run_destroy, .lock = lock};
    pthread_mutex_init(&d.m, NULL);
    pthread_cond_init(&d.cv, NULL);
    if (hl_client_submit(c, &d.task) != HILOCK_OK) {
        /* The client is closing: its loop thread detaches every lock,
         * this one too, and must be left to do so alone.  Then nothing
         * but the handle is left. */
        pthread_mutex_lock(&c->lock);
        while (!c->locks_detached)
            pthread_cond_wait(&c->cond, &c->lock);
        pthread_mutex_unlock(&c->lock);
        lock_teardown(lock);
    } else {
        pthread_mutex_lock(&d.m);
        while (!d.done)
            pthread_cond_wait(&d.cv, &d.m);
        pthread_mutex_unlock(&d.m);
    }
    pthread_mutex_destroy(&d.m);
    pthread_cond_destroy(&d.cv);
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

static void run_set_lost(hilock_client *c, hl_task *t, bool closed)
{
    (void)c;
    struct hl_lost_cb *l = (struct hl_lost_cb *)t;
    hilock_lock *lock = l->lock;
    if (closed || l->cb == NULL) {
        hl_free(l);
        l = NULL;
    }
    if (!closed) {
        hl_free(lock->lost);
        lock->lost = l;
    }
    hl_lock_unref(lock);
}

int hilock_lock_set_lost_callback(hilock_lock *lock, hilock_lost_cb *cb,
                                  void *user_data)
{
    if (lock == NULL)
        return hl_fail(HILOCK_EINVAL, "lock is NULL");
    hilock_client *c = hl_lock_client_get(lock);
    if (c == NULL)
        return hl_fail(HILOCK_ECLOSED, "client is closed");
    struct hl_lost_cb *t = hl_calloc(1, sizeof *t);
    if (t == NULL) {
        hl_client_unref(c);
        return hl_fail(HILOCK_ENOMEM, "out of memory");
    }
    t->task.run = run_set_lost;
    t->lock = lock;
    t->cb = cb;
    t->data = user_data;
    hl_lock_ref(lock);
    int rc = hl_client_submit(c, &t->task);
    hl_client_unref(c);
    if (rc != 0) {
        hl_lock_unref(lock);
        hl_free(t);
    }
    return rc;
}

/* Lives on the setting thread's stack, which waits for it: a multi-lock
 * freed right after clearing its listener must never be named by a
 * listener still queued, nor fail to clear it for want of memory. */
typedef struct group_set {
    hl_task task;
    hilock_lock *lock;
    hilock_lost_cb *cb;
    void *data;
    pthread_mutex_t m;
    pthread_cond_t cv;
    bool done;
} group_set;

static void apply_group(hilock_lock *lock, hilock_lost_cb *cb, void *data)
{
    lock->group_mem.lock = lock;
    lock->group_mem.cb = cb;
    lock->group_mem.data = data;
    lock->group = cb != NULL ? &lock->group_mem : NULL;
}

static void run_set_group(hilock_client *c, hl_task *t, bool closed)
{
    (void)c;
    group_set *g = (group_set *)t;
    /* Closed: the lock is detached already and reports to no one. */
    if (!closed)
        apply_group(g->lock, g->cb, g->data);
    pthread_mutex_lock(&g->m);
    g->done = true;
    pthread_cond_signal(&g->cv);
    pthread_mutex_unlock(&g->m);
}

int hl_lock_set_group_listener(hilock_lock *lock, hilock_lost_cb *cb,
                               void *data)
{
    if (lock == NULL)
        return hl_fail(HILOCK_EINVAL, "lock is NULL");
    hilock_client *c = hl_lock_client_get(lock);
    if (c == NULL)
        return hl_fail(HILOCK_ECLOSED, "client is closed");
    if (hl_client_in_loop(c)) {
        apply_group(lock, cb, data);
        hl_client_unref(c);
        return HILOCK_OK;
    }
    group_set g = {.task.run = run_set_group, .lock = lock, .cb = cb,
                   .data = data};
    pthread_mutex_init(&g.m, NULL);
    pthread_cond_init(&g.cv, NULL);
    int rc = hl_client_submit(c, &g.task);
    if (rc != HILOCK_OK) {
        /* The client is closing: once its loop thread has let go of its
         * locks (telling their listeners last), none is called again. */
        pthread_mutex_lock(&c->lock);
        while (!c->locks_detached)
            pthread_cond_wait(&c->cond, &c->lock);
        pthread_mutex_unlock(&c->lock);
    } else {
        pthread_mutex_lock(&g.m);
        while (!g.done)
            pthread_cond_wait(&g.cv, &g.m);
        pthread_mutex_unlock(&g.m);
    }
    pthread_mutex_destroy(&g.m);
    pthread_cond_destroy(&g.cv);
    hl_client_unref(c);
    return rc;
}

bool hilock_lock_owner_lost(hilock_lock *lock, uint64_t owner)
{
    if (lock == NULL || lock->client == NULL ||
        !hl_client_in_loop(lock->client))
        return false;
    hl_hold *h = hl_hold_find(lock, owner);
    return h != NULL && h->lost;
}
