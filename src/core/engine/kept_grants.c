#include "core/engine/kept_grants.h"

#include <string.h>

#include "core/base/alloc.h"

/* A kept grant is taken for a release while now is within a third of
 * record_ms of its attempt, and that release is sent again until two
 * thirds: a third of the record's life is left as margin either way. */
static hl_monotime take_until(const hilock_lock *lock, const hl_kept_grant *g)
{
    return hl_after_ms(g->sent, lock->kind->record_ms / 3);
}

hl_monotime hl_kept_grant_usable_until(const hilock_lock *lock,
                                       const hl_kept_grant *g)
{
    return hl_after_ms(g->sent, lock->kind->record_ms / 3 * 2);
}

static void forget(hilock_lock *lock, const hl_kept_grant *g)
{
    /* Lost, it runs out with its TTL. */
    (void)lock->kind->forget(lock, g->nonce, g->nonce_len, g->handed);
}

static void remove_at(hl_lock_rare *r, size_t i)
{
    memmove(&r->kept[i], &r->kept[i + 1],
            (r->kept_n - i - 1) * sizeof r->kept[0]);
    r->kept_n--;
}

/* Forget the grants whose time to be taken has passed; they are the
 * oldest, at the front. */
static void forget_stale(hilock_lock *lock, hl_lock_rare *r, hl_monotime now)
{
    size_t n = 0;
    while (n < r->kept_n && take_until(lock, &r->kept[n]) <= now)
        forget(lock, &r->kept[n++]);
    if (n == 0)
        return;
    memmove(&r->kept[0], &r->kept[n], (r->kept_n - n) * sizeof r->kept[0]);
    r->kept_n -= n;
}

void hl_kept_grant_add(hilock_lock *lock, const char *nonce, size_t nonce_len,
                       int64_t amount, bool handed, hl_monotime sent)
{
    hl_kept_grant g = {.sent = sent, .amount = amount, .handed = handed};
    if (nonce_len >= sizeof g.nonce) {
        (void)lock->kind->forget(lock, nonce, nonce_len, handed);
        return;
    }
    memcpy(g.nonce, nonce, nonce_len);
    g.nonce_len = nonce_len;
    hl_lock_rare *r = hl_lock_rare_get(lock);
    if (r != NULL && r->kept == NULL)
        r->kept = hl_calloc(HL_KEPT_GRANTS_MAX, sizeof r->kept[0]);
    if (r == NULL || r->kept == NULL) {
        forget(lock, &g);
        return;
    }
    forget_stale(lock, r, hl_monotime_now());
    if (r->kept_n == HL_KEPT_GRANTS_MAX) {
        forget(lock, &r->kept[0]);
        remove_at(r, 0);
    }
    r->kept[r->kept_n++] = g;
}

bool hl_kept_grant_take(hilock_lock *lock, int64_t amount, hl_kept_grant *out)
{
    hl_lock_rare *r = hl_lock_rare_peek(lock);
    if (r == NULL)
        return false;
    forget_stale(lock, r, hl_monotime_now());
    for (size_t i = 0; i < r->kept_n; i++) {
        if (r->kept[i].amount != amount)
            continue;
        *out = r->kept[i];
        remove_at(r, i);
        return true;
    }
    return false;
}

void hl_kept_grants_forget_all(hilock_lock *lock)
{
    hl_lock_rare *r = hl_lock_rare_peek(lock);
    if (r == NULL)
        return;
    for (size_t i = 0; i < r->kept_n; i++)
        forget(lock, &r->kept[i]);
    r->kept_n = 0;
}

void hl_kept_grants_free(hilock_lock *lock)
{
    hl_lock_rare *r = hl_lock_rare_peek(lock);
    if (r == NULL)
        return;
    hl_free(r->kept);
    r->kept = NULL;
    r->kept_n = 0;
}
