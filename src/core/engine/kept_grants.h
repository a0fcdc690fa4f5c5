/* The answered grants of a kind with unheld grants (a plain semaphore's)
 * whose records the client leaves on the server for a while: a release of
 * what one of them took can then consume that record instead of writing
 * one of its own, and send itself again after a lost answer without
 * giving anything back twice.  A handle keeps a few, on its loop thread;
 * the rest are forgotten at once, as every grant was before. */
#ifndef HL_KEPT_GRANTS_H
#define HL_KEPT_GRANTS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "core/base/monotime.h"
#include "core/engine/lock_handle.h"
#include "hilock/client.h"

/* How many answered grants a handle keeps; older ones are forgotten. */
#define HL_KEPT_GRANTS_MAX 16

typedef struct hl_kept_grant {
    /* When its attempt was sent: the server keeps the record at least
     * record_ms from then, since the attempt ran later. */
    hl_monotime sent;
    int64_t amount;
    /* Granted by a release to the wish nonce names: the grant lives
     * among the kind's grants, not as a record. */
    bool handed;
    size_t nonce_len;
    char nonce[HILOCK_CLIENT_ID_LEN + 22];
} hl_kept_grant;

/* Keep the record of an answered grant, or forget it (kind->forget) when
 * there is no room.  Loop thread. */
void hl_kept_grant_add(hilock_lock *lock, const char *nonce, size_t nonce_len,
                       int64_t amount, bool handed, hl_monotime sent);

/* Take the oldest kept grant of exactly amount into *out, while its
 * record has at least two thirds of record_ms to live: true, or false
 * when there is none.  Grants too old for that are forgotten on the way.
 * Loop thread. */
bool hl_kept_grant_take(hilock_lock *lock, int64_t amount, hl_kept_grant *out);

/* Until when a release that consumes g may send itself again: its record
 * lives past that instant. */
hl_monotime hl_kept_grant_usable_until(const hilock_lock *lock,
                                       const hl_kept_grant *g);

/* Forget every kept grant (the handle goes away).  Loop thread. */
void hl_kept_grants_forget_all(hilock_lock *lock);

/* Free the memory (the handle is freed). */
void hl_kept_grants_free(hilock_lock *lock);

#endif
