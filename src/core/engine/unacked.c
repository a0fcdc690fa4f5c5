#include "core/engine/unacked.h"

#include <string.h>

#include "core/base/alloc.h"
#include "core/config/option_values.h"
#include "core/engine/engine_internal.h"

/* A handle's kept releases, allocated with the first: most handles never
 * keep one, and each handle's memory is a watchdog lease's. */
struct hl_unacked_set {
    /* In the client's list of the handles that keep a release, so that a
     * master change walks those, not every handle. */
    hilock_lock *prev;
    hilock_lock *next;
    bool listed;
    size_t n;
    hl_unacked_release r[HL_UNACKED_MAX];
};

/* The handle's kept releases, or NULL before the first. */
static hl_unacked_set *set_of(const hilock_lock *lock)
{
    hl_lock_rare *r = hl_lock_rare_peek(lock);
    return r != NULL ? r->unacked : NULL;
}

static void list_add(hilock_lock *lock)
{
    hilock_client *c = lock->client;
    hl_unacked_set *u = set_of(lock);
    if (u->listed)
        return;
    u->prev = NULL;
    u->next = c->unacked_locks;
    if (c->unacked_locks != NULL)
        set_of(c->unacked_locks)->prev = lock;
    c->unacked_locks = lock;
    u->listed = true;
}

static void list_remove(hilock_lock *lock)
{
    hilock_client *c = lock->client;
    hl_unacked_set *u = set_of(lock);
    if (u == NULL || !u->listed)
        return;
    if (u->prev != NULL)
        set_of(u->prev)->next = u->next;
    else
        c->unacked_locks = u->next;
    if (u->next != NULL)
        set_of(u->next)->prev = u->prev;
    u->prev = u->next = NULL;
    u->listed = false;
}

static void forget_expired(hl_unacked_set *u, hl_monotime now)
{
    size_t kept = 0;
    for (size_t i = 0; i < u->n; i++)
        if (u->r[i].until > now)
            u->r[kept++] = u->r[i];
    u->n = kept;
}

/* The entry for a new release: owner's own when it has one (a later
 * release of the owner only moves its time on, since a reconcile settles
 * all of them), else a free one, else the one that ends first. */
static hl_unacked_release *slot_for(hilock_lock *lock, uint64_t owner)
{
    hl_lock_rare *rare = hl_lock_rare_get(lock);
    if (rare != NULL && rare->unacked == NULL)
        rare->unacked = hl_calloc(1, sizeof *rare->unacked);
    hl_unacked_set *u = rare != NULL ? rare->unacked : NULL;
    if (u == NULL)
        return NULL;
    forget_expired(u, hl_monotime_now());
    for (size_t i = 0; owner != 0 && i < u->n; i++)
        if (u->r[i].owner == owner)
            return &u->r[i];
    if (u->n < HL_UNACKED_MAX) {
        hl_unacked_release *r = &u->r[u->n++];
        memset(r, 0, sizeof *r);
        return r;
    }
    size_t first = 0;
    for (size_t i = 1; i < u->n; i++)
        if (u->r[i].until < u->r[first].until)
            first = i;
    memset(&u->r[first], 0, sizeof u->r[0]);
    return &u->r[first];
}

static void make_again(hilock_lock *lock, const hl_unacked_release *r,
                       hl_monotime now)
{
    if (r->owner != 0) {
        /* Its give-up time is the release's: once that has passed, the
         * hold it would remove has run out on the server. */
        int64_t left_ms = hl_sat_sub(r->until, now) / HL_MS(1);
        hl_reconcile_restored(lock, r->owner, left_ms > 0 ? left_ms : 1);
    } else if (lock->kind->release_again != NULL) {
        /* Not sent: the next master change tries again. */
        (void)lock->kind->release_again(lock, r->id, r->id_len, r->amount,
                                        r->consume);
    }
}

/* Keep r, already filled in; made again now if the master it ran on is
 * gone already. */
static void keep(hilock_lock *lock, hl_unacked_release *r,
                 unsigned changes_at_send)
{
    list_add(lock);
    if (lock->client->master_changes != changes_at_send)
        make_again(lock, r, hl_monotime_now());
}

unsigned hl_lock_master_changes(const hilock_lock *lock)
{
    return lock->client->master_changes;
}

void hl_unacked_hold_release(hilock_lock *lock, uint64_t owner,
                             int64_t lease_ms, unsigned changes_at_send)
{
    if (lock->client == NULL || lock->destroyed)
        return;
    hl_unacked_release *r = slot_for(lock, owner);
    if (r == NULL)
        return; /* what comes back runs out with its lease */
    if (lease_ms <= 0)
        lease_ms = lock->client->opts->watchdog_timeout_ms;
    hl_monotime until = hl_after_ms(hl_monotime_now(), lease_ms);
    r->owner = owner;
    if (until > r->until)
        r->until = until;
    keep(lock, r, changes_at_send);
}

void hl_unacked_id_release(hilock_lock *lock, const char *id, size_t id_len,
                           int64_t amount, hl_consume consume,
                           hl_monotime until, unsigned changes_at_send)
{
    if (lock->client == NULL || lock->destroyed ||
        id_len > sizeof ((hl_unacked_release *)NULL)->id)
        return;
    hl_unacked_release *r = slot_for(lock, 0);
    if (r == NULL)
        return; /* the permits stay taken, as before */
    r->until = until;
    r->amount = amount;
    r->consume = consume;
    memcpy(r->id, id, id_len);
    r->id_len = id_len;
    keep(lock, r, changes_at_send);
}

/* Every kept release is made again, and kept until its time is up: a
 * second failover before the first's replicas have it brings it back
 * once more, and making it again is harmless either way. */
static void lock_master_changed(hilock_lock *lock, hl_monotime now)
{
    hl_unacked_set *u = set_of(lock);
    forget_expired(u, now);
    for (size_t i = 0; i < u->n; i++)
        make_again(lock, &u->r[i], now);
    if (u->n == 0)
        list_remove(lock);
}

void hl_unacked_master_changed(hilock_client *client)
{
    hl_monotime now = hl_monotime_now();
    hilock_lock *next;
    for (hilock_lock *lock = client->unacked_locks; lock != NULL;
         lock = next) {
        next = set_of(lock)->next;
        lock_master_changed(lock, now);
    }
}

void hl_unacked_forget(hilock_lock *lock)
{
    if (lock->client != NULL)
        list_remove(lock);
    hl_lock_rare *r = hl_lock_rare_peek(lock);
    if (r != NULL) {
        hl_free(r->unacked);
        r->unacked = NULL;
    }
}
