/* hilock's word on what a name is, where the data at the name cannot
 * say it (HL_LAYOUT_KIND, docs/guide/operators.md "What a name is"): a count
 * is a latch's or a semaphore's alike, and a fair or read-write lock that
 * nobody waits for looks like a reentrant one.  The marker is written
 * with plain commands on the lock's connection, nobody waiting for the
 * answer: a marker lost costs an operator's view, never a lock. */
#ifndef HL_KIND_MARK_H
#define HL_KIND_MARK_H

#include "core/engine/lock_handle.h"

/* Mark lock's name as kind (an HL_LAYOUT_KIND_* word) for after_s
 * seconds, or with no expiry when after_s is NULL.  Loop thread. */
void hl_kind_mark(hilock_lock *lock, const char *kind, const char *after_s);

/* A grant hook (hl_kind.mark_grant) for the fair and read-write locks:
 * the first grant of a handle, and one an hour after that, marks the
 * name for HL_LAYOUT_KIND_AFTER_S. */
void hl_kind_mark_fair_grant(hilock_lock *lock);
void hl_kind_mark_read_write_grant(hilock_lock *lock);

#endif
