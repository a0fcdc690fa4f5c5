/* Reconciles: bring an owner's count on the server to the holds the
 * client knows of, after a request whose outcome is unknown or a grant
 * nobody will take.  They take the owner's turn (see hl_turn), so the
 * count they compute when sent accounts for every request of that owner
 * the server has run or will run before them. */
#include <stddef.h>
#include <string.h>

#include "core/base/alloc.h"
#include "core/engine/engine_internal.h"
#include "core/config/option_values.h"

typedef struct hl_reconcile {
    hl_turn turn;
    hilock_lock *lock; /* referenced */
    uint64_t owner;
    hl_monotime give_up_at;
    char nonce[HILOCK_CLIENT_ID_LEN + 22]; /* "" when nothing to void */
    size_t nonce_len;
    bool spares_releases; /* hl_reconcile_restored's */
    bool withdraws;       /* hl_withdraw_start's */
} hl_reconcile;

static void reconcile_done(hl_reconcile *r)
{
    hilock_lock *lock = r->lock;
    hl_turn_end(lock, &r->turn);
    hl_free(r);
    hl_lock_unref(lock);
}

static void reconcile_send(hl_reconcile *r);

static void on_reconciled(void *data, int status, hilock_reply *reply)
{
    hl_reconcile *r = data;
    hilock_reply_free(reply);
    if ((status == HILOCK_EIO || status == HILOCK_ETIMEDOUT ||
         status == HILOCK_EPROTO || status == HILOCK_ETOOBIG) &&
        hl_monotime_now() < r->give_up_at) {
        /* Still unknown: the request waits for the next connection. */
        reconcile_send(r);
        return;
    }
    reconcile_done(r);
}

/* The count the server must be left with: what the client knows, less
 * the releases sent before this request, which the server runs first;
 * or, sparing releases, with them (hl_reconcile_restored). */
static int64_t expected_count(hilock_lock *lock, uint64_t owner,
                              bool spare_releases)
{
    hl_hold *h = hl_hold_find(lock, owner);
    if (h == NULL || h->lost)
        return 0;
    int64_t left =
        spare_releases ? h->count : h->count - h->releases_in_flight;
    return left > 0 ? left : 0;
}

static void reconcile_send(hl_reconcile *r)
{
    hilock_lock *lock = r->lock;
    if (lock->client == NULL) {
        reconcile_done(r);
        return;
    }
    char field[HILOCK_CLIENT_ID_LEN + 22];
    size_t len = hl_owner_field(lock, r->owner, field, sizeof field);
    int rc = lock->kind->reconcile(lock, field, len,
                                   r->withdraws
                                       ? HL_RECONCILE_WITHDRAW
                                       : expected_count(lock, r->owner,
                                                        r->spares_releases),
                                   r->nonce,
                                   r->nonce_len, on_reconciled, r);
    if (rc != HILOCK_OK)
        reconcile_done(r); /* what it would have removed runs out with
                            * its lease */
}

static void reconcile_go(hl_turn *t)
{
    reconcile_send((hl_reconcile *)(void *)((char *)t -
                                            offsetof(hl_reconcile, turn)));
}

static void reconcile_begin(hilock_lock *lock, uint64_t owner,
                            hl_turn *from, const char *nonce,
                            size_t nonce_len, int64_t lease_ms,
                            bool spare_releases, bool withdraws)
{
    /* A reconcile drops the owner's wish on the server, unless it only
     * withdraws the one its attempt recorded. */
    if (!lock->kind->reconcile_withdraws)
        hl_acquire_forget_wishes(lock, owner);
    hl_reconcile *r =
        lock->client != NULL ? hl_calloc(1, sizeof *r) : NULL;
    if (r == NULL) {
        /* Closed, or no memory: a hold left behind runs out with its
         * lease. */
        if (from != NULL)
            hl_turn_end(lock, from);
        return;
    }
    r->lock = lock;
    r->owner = owner;
    r->spares_releases = spare_releases;
    r->withdraws = withdraws;
    /* Once every grant it may be about has run out on the server, a
     * reconcile has nothing left to remove; trying longer would only
     * keep the owner's next acquires waiting for a server that does not
     * answer. */
    if (lease_ms <= 0)
        lease_ms = lock->client->opts->watchdog_timeout_ms;
    r->give_up_at = hl_after_ms(hl_monotime_now(), lease_ms);
    if (nonce != NULL && nonce_len < sizeof r->nonce) {
        memcpy(r->nonce, nonce, nonce_len);
        r->nonce_len = nonce_len;
    }
    hl_lock_ref(lock);
    bool now;
    if (from != NULL) {
        hl_turn_pass(lock, from, &r->turn, reconcile_go);
        now = r->turn.active;
    } else {
        now = hl_turn_take(lock, &r->turn, owner, reconcile_go);
    }
    if (now)
        reconcile_send(r);
}

void hl_reconcile_start(hilock_lock *lock, uint64_t owner, hl_turn *from,
                        const char *nonce, size_t nonce_len,
                        int64_t lease_ms)
{
    reconcile_begin(lock, owner, from, nonce, nonce_len, lease_ms, false,
                    false);
}

void hl_withdraw_start(hilock_lock *lock, uint64_t owner, const char *nonce,
                       size_t nonce_len, int64_t ms)
{
    reconcile_begin(lock, owner, NULL, nonce, nonce_len, ms, false, true);
}

void hl_reconcile_restored(hilock_lock *lock, uint64_t owner,
                           int64_t lease_ms)
{
    reconcile_begin(lock, owner, NULL, NULL, 0, lease_ms, true, false);
}
