/* Owner turns: the requests that may change an owner's count on the
 * server go one at a time per owner and lock.  See engine_internal.h. */
#include <stddef.h>

#include "core/engine/engine_internal.h"

static bool owner_busy(const hilock_lock *lock, uint64_t owner,
                       const hl_turn *before)
{
    for (const hl_turn *t = lock->turns; t != NULL && t != before;
         t = t->next)
        if (t->owner == owner)
            return true;
    return false;
}

bool hl_turn_take(hilock_lock *lock, hl_turn *turn, uint64_t owner,
                  void (*go)(hl_turn *turn))
{
    turn->owner = owner;
    turn->go = go;
    turn->next = NULL;
    hl_turn **pp = &lock->turns;
    while (*pp != NULL)
        pp = &(*pp)->next;
    *pp = turn;
    turn->active = !owner_busy(lock, owner, turn);
    turn->listed = true;
    return turn->active;
}

void hl_turn_pass(hilock_lock *lock, hl_turn *from, hl_turn *to,
                  void (*go)(hl_turn *turn))
{
    hl_turn **pp = &lock->turns;
    while (*pp != from)
        pp = &(*pp)->next;
    to->owner = from->owner;
    to->go = go;
    to->next = from->next;
    to->active = from->active;
    to->listed = true;
    *pp = to;
    from->next = NULL;
    from->active = false;
    from->listed = false;
}

void hl_turn_end(hilock_lock *lock, hl_turn *turn)
{
    if (!turn->listed)
        return;
    hl_turn **pp = &lock->turns;
    while (*pp != turn)
        pp = &(*pp)->next;
    *pp = turn->next;
    bool was_active = turn->active;
    turn->next = NULL;
    turn->active = false;
    turn->listed = false;
    if (!was_active)
        return;
    for (hl_turn *t = lock->turns; t != NULL; t = t->next) {
        if (t->owner == turn->owner) {
            t->active = true;
            t->go(t);
            return;
        }
    }
}
