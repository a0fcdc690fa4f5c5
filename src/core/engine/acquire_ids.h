/* A lock's pending async acquires by op id, for hilock_lock_cancel: a
 * list in the handle, under the mutex that guards its link to the
 * client, so that a cancel from any thread finds its acquire without
 * asking the loop thread.  Listing one allocates nothing, and an idle
 * handle keeps one pointer for it: every watchdog lease has a handle.
 * A cancel walks the handle's pending async acquires. */
#ifndef HL_ACQUIRE_IDS_H
#define HL_ACQUIRE_IDS_H

#include <stdint.h>

#include "hilock/lock.h"

typedef struct hl_acquire_op hl_acquire_op;

/* List op under its id: before it is submitted, so that its id names it
 * the moment the caller learns the id. */
void hl_acquire_ids_add(hl_acquire_op *op);
/* Unlist op (its acquire ended, or it is freed); again does nothing. */
void hl_acquire_ids_remove(hl_acquire_op *op);
/* The acquire of lock listed under id, with a reference on its op
 * (hl_op_unref when done), or NULL.  Any thread. */
hl_acquire_op *hl_acquire_ids_find(hilock_lock *lock, uint64_t id);

#endif
