/* A lock's pending acquires by op id, for hilock_lock_cancel: found in
 * constant time from any thread, so that a cancel neither walks the
 * lock's acquires nor has to ask the loop thread which of them it
 * names. */
#ifndef HL_ACQUIRE_IDS_H
#define HL_ACQUIRE_IDS_H

#include <stdint.h>

#include "hilock/lock.h"

typedef struct hl_acquire_op hl_acquire_op;

/* List op under its id: before it is submitted, so that its id names it
 * the moment the caller learns the id.  HILOCK_OK or HILOCK_ENOMEM. */
int hl_acquire_ids_add(hl_acquire_op *op);
/* Unlist op (its acquire ended, or it is freed); again does nothing. */
void hl_acquire_ids_remove(hl_acquire_op *op);
/* The acquire of lock listed under id, with a reference on its op
 * (hl_op_unref when done), or NULL.  Any thread. */
hl_acquire_op *hl_acquire_ids_find(hilock_lock *lock, uint64_t id);

#endif
