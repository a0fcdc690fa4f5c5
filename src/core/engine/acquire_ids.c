/* The list of a lock's acquires by id; see acquire_ids.h. */
#include <pthread.h>

#include "core/engine/acquire_ids.h"
#include "core/engine/engine_internal.h"

void hl_acquire_ids_add(hl_acquire_op *op)
{
    hilock_lock *lock = op->lock;
    pthread_mutex_lock(hl_lock_link_mutex(lock));
    op->id_prev = NULL;
    op->id_next = lock->acquires_by_id;
    if (op->id_next != NULL)
        op->id_next->id_prev = op;
    lock->acquires_by_id = op;
    op->id_listed = true;
    pthread_mutex_unlock(hl_lock_link_mutex(lock));
}

void hl_acquire_ids_remove(hl_acquire_op *op)
{
    hilock_lock *lock = op->lock;
    pthread_mutex_lock(hl_lock_link_mutex(lock));
    if (op->id_listed) {
        if (op->id_prev != NULL)
            op->id_prev->id_next = op->id_next;
        else
            lock->acquires_by_id = op->id_next;
        if (op->id_next != NULL)
            op->id_next->id_prev = op->id_prev;
        op->id_prev = op->id_next = NULL;
        op->id_listed = false;
    }
    pthread_mutex_unlock(hl_lock_link_mutex(lock));
}

hl_acquire_op *hl_acquire_ids_find(hilock_lock *lock, uint64_t id)
{
    pthread_mutex_lock(hl_lock_link_mutex(lock));
    hl_acquire_op *op = lock->acquires_by_id;
    while (op != NULL && op->op.id != id)
        op = op->id_next;
    if (op != NULL && !hl_op_ref_if_alive(&op->op))
        op = NULL;
    pthread_mutex_unlock(hl_lock_link_mutex(lock));
    return op;
}
