/* The registry of acquires by id; see acquire_ids.h. */
#include <pthread.h>

#include "core/base/map.h"
#include "core/engine/acquire_ids.h"
#include "core/engine/engine_internal.h"

/* Acquires start and end on every loop thread at once; a few tables,
 * picked by id, keep them from queueing on one mutex. */
#define STRIPES 16

typedef struct stripe {
    pthread_mutex_t mu;
    hl_map by_id;
} stripe;

static stripe stripes[STRIPES] = {
#define S {PTHREAD_MUTEX_INITIALIZER, {0}}
    S, S, S, S, S, S, S, S, S, S, S, S, S, S, S, S,
#undef S
};

static stripe *stripe_of(uint64_t id) { return &stripes[id % STRIPES]; }

int hl_acquire_ids_add(hl_acquire_op *op)
{
    uint64_t id = op->op.id;
    stripe *s = stripe_of(id);
    pthread_mutex_lock(&s->mu);
    op->id_entry = hl_map_insert(&s->by_id, &id, sizeof id, op);
    pthread_mutex_unlock(&s->mu);
    return op->id_entry != NULL ? HILOCK_OK : HILOCK_ENOMEM;
}

void hl_acquire_ids_remove(hl_acquire_op *op)
{
    stripe *s = stripe_of(op->op.id);
    pthread_mutex_lock(&s->mu);
    if (op->id_entry != NULL) {
        hl_map_remove(&s->by_id, op->id_entry);
        op->id_entry = NULL;
    }
    pthread_mutex_unlock(&s->mu);
}

hl_acquire_op *hl_acquire_ids_find(const hilock_lock *lock, uint64_t id)
{
    stripe *s = stripe_of(id);
    pthread_mutex_lock(&s->mu);
    hl_map_entry *e = hl_map_find(&s->by_id, &id, sizeof id);
    hl_acquire_op *op = e != NULL ? e->value : NULL;
    /* An id is the caller's to pass, the lock too: one of another lock
     * is not this lock's to cancel. */
    if (op != NULL && (op->lock != lock || !hl_op_ref_if_alive(&op->op)))
        op = NULL;
    pthread_mutex_unlock(&s->mu);
    return op;
}
