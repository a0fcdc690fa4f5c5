/* Releases the replicas did not acknowledge.  Such a release stands: it
 * freed what it released on the master, and its caller was told so.  But
 * a failover to a replica that never saw it brings back what it released:
 * a lock's hold that keeps every other owner out until its lease runs
 * out, or a plain semaphore's permits, taken for good.  So a handle keeps
 * each such release for as long as what it released could come back, and
 * makes it again on the master that replaces the one that ran it:
 *
 *   - a release of a hold, by a reconcile of its owner, which leaves the
 *     owner's count at the holds the client knows of, and so removes
 *     what came back and never a newer hold;
 *   - a release by id (a plain semaphore's), by its kind's
 *     release_again under the same id, whose record on the server makes
 *     it give back nothing twice.
 *
 * A release whose acknowledgement is met costs nothing here.  Loop
 * thread only. */
#ifndef HL_UNACKED_H
#define HL_UNACKED_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "core/base/monotime.h"
#include "core/engine/lock_handle.h"
#include "hilock/client.h"

/* How many such releases a handle keeps; past that the one that would
 * be forgotten first goes, and what it released, should it come back,
 * runs out with its lease or stays taken. */
#define HL_UNACKED_MAX 8

typedef struct hl_unacked_set hl_unacked_set;

typedef struct hl_unacked_release {
    hl_monotime until; /* what it released cannot come back after this */
    uint64_t owner;    /* the hold's owner; 0 for a release by id */
    int64_t amount;    /* a release by id: the permits it gave back */
    hl_consume consume; /* a release by id: what of its grant it consumes */
    size_t id_len;
    char id[HILOCK_CLIENT_ID_LEN + 24];
} hl_unacked_release;

/* Keep a release of owner's hold that the replicas did not acknowledge,
 * for lease_ms (the lease of the hold it released; 0: the watchdog
 * timeout).  changes_at_send: the client's master changes when the
 * release was sent; if the master changed since, it is made again at
 * once. */
void hl_unacked_hold_release(hilock_lock *lock, uint64_t owner,
                             int64_t lease_ms, unsigned changes_at_send);

/* The same for a release by id of amount permits, kept until until. */
void hl_unacked_id_release(hilock_lock *lock, const char *id, size_t id_len,
                           int64_t amount, hl_consume consume,
                           hl_monotime until, unsigned changes_at_send);

/* How many times the master behind the lock's client has changed, for
 * the changes_at_send above.  Loop thread, with a client. */
unsigned hl_lock_master_changes(const hilock_lock *lock);

/* The client's master changed: make every kept release again there. */
void hl_unacked_master_changed(hilock_client *client);

/* The handle leaves its client: forget what it keeps. */
void hl_unacked_forget(hilock_lock *lock);

#endif
