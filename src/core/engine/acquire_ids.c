/* The registry of a lock's acquires by id; see acquire_ids.h. */
#include <pthread.h>

#include "core/base/map.h"
#include "core/engine/acquire_ids.h"
#include "core/engine/engine_internal.h"

/* The table lives in the handle, under the mutex that guards its link to
 * the client: a cancel names the lock anyway, and the table's memory
 * goes with the handle's. */
int hl_acquire_ids_add(hl_acquire_op *op)
{
    hilock_lock *lock = op->lock;
    uint64_t id = op->op.id;
    pthread_mutex_lock(hl_lock_link_mutex(lock));
    op->id_entry = hl_map_insert(&lock->acquires_by_id, &id, sizeof id, op);
    pthread_mutex_unlock(hl_lock_link_mutex(lock));
    return op->id_entry != NULL ? HILOCK_OK : HILOCK_ENOMEM;
}

void hl_acquire_ids_remove(hl_acquire_op *op)
{
    hilock_lock *lock = op->lock;
    pthread_mutex_lock(hl_lock_link_mutex(lock));
    if (op->id_entry != NULL) {
        hl_map_remove(&lock->acquires_by_id, op->id_entry);
        op->id_entry = NULL;
    }
    pthread_mutex_unlock(hl_lock_link_mutex(lock));
}

hl_acquire_op *hl_acquire_ids_find(hilock_lock *lock, uint64_t id)
{
    pthread_mutex_lock(hl_lock_link_mutex(lock));
    hl_map_entry *e = hl_map_find(&lock->acquires_by_id, &id, sizeof id);
    hl_acquire_op *op = e != NULL ? e->value : NULL;
    if (op != NULL && !hl_op_ref_if_alive(&op->op))
        op = NULL;
    pthread_mutex_unlock(hl_lock_link_mutex(lock));
    return op;
}
