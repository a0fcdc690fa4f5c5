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

static void remove_at(hilock_lock *lock, size_t i)
{
    memmove(&lock->kept[i], &lock->kept[i + 1],
            (lock->kept_n - i - 1) * sizeof lock->kept[0]);
    lock->kept_n--;
}

/* Forget the grants whose time to be taken has passed; they are the
 * oldest, at the front. */
static void forget_stale(hilock_lock *lock, hl_monotime now)
{
    size_t n = 0;
    while (n < lock->kept_n && take_until(lock, &lock->kept[n]) <= now)
        forget(lock, &lock->kept[n++]);
    if (n == 0)
        return;
    memmove(&lock->kept[0], &lock->kept[n],
            (lock->kept_n - n) * sizeof lock->kept[0]);
    lock->kept_n -= n;
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
    if (lock->kept == NULL)
        lock->kept = hl_calloc(HL_KEPT_GRANTS_MAX, sizeof lock->kept[0]);
    if (lock->kept == NULL) {
        forget(lock, &g);
        return;
    }
    forget_stale(lock, hl_monotime_now());
    if (lock->kept_n == HL_KEPT_GRANTS_MAX) {
        forget(lock, &lock->kept[0]);
        remove_at(lock, 0);
    }
    lock->kept[lock->kept_n++] = g;
}

bool hl_kept_grant_take(hilock_lock *lock, int64_t amount, hl_kept_grant *out)
{
    forget_stale(lock, hl_monotime_now());
    for (size_t i = 0; i < lock->kept_n; i++) {
        if (lock->kept[i].amount != amount)
            continue;
        *out = lock->kept[i];
        remove_at(lock, i);
        return true;
    }
    return false;
}

void hl_kept_grants_forget_all(hilock_lock *lock)
{
    for (size_t i = 0; i < lock->kept_n; i++)
        forget(lock, &lock->kept[i]);
    lock->kept_n = 0;
}

void hl_kept_grants_free(hilock_lock *lock)
{
    hl_free(lock->kept);
    lock->kept = NULL;
    lock->kept_n = 0;
}
