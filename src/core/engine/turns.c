/* Owner turns: the requests that may change an owner's count on the
 * server go one at a time per owner and lock.  See engine_internal.h.
 *
 * Each owner with requests in line has a ring of them, its head being
 * the request whose turn it is.  The heads are kept in a hash table by
 * owner, so that joining a line never walks the others: a lock with many
 * waiting owners would otherwise pay for all of them on every attempt.
 * The table only grows, and only when memory allows; a table short of
 * buckets is slower, never wrong. */
#include <stddef.h>
#include <stdint.h>

#include "core/base/alloc.h"
#include "core/engine/engine_internal.h"

#define FIRST_TABLE 8u

static uint32_t bucket_of(uint64_t owner, uint32_t mask)
{
    /* Owner ids are often sequential: spread them with Fibonacci
     * hashing. */
    return (uint32_t)((owner * UINT64_C(0x9E3779B97F4A7C15)) >> 32) & mask;
}

static hl_turn **bucket(hilock_lock *lock, uint64_t owner)
{
    if (lock->turn_table == NULL)
        return &lock->turns;
    return &lock->turn_table[bucket_of(owner, lock->turn_mask)];
}

static void chain_insert(hl_turn **slot, hl_turn *head)
{
    head->chain_prev = NULL;
    head->chain_next = *slot;
    if (*slot != NULL)
        (*slot)->chain_prev = head;
    *slot = head;
}

/* Put to where head is in its bucket's chain; head leaves it. */
static void chain_replace(hilock_lock *lock, hl_turn *head, hl_turn *to)
{
    to->chain_prev = head->chain_prev;
    to->chain_next = head->chain_next;
    if (to->chain_prev != NULL)
        to->chain_prev->chain_next = to;
    else
        *bucket(lock, head->owner) = to;
    if (to->chain_next != NULL)
        to->chain_next->chain_prev = to;
    head->chain_prev = head->chain_next = NULL;
}

static void chain_remove(hilock_lock *lock, hl_turn *head)
{
    if (head->chain_prev != NULL)
        head->chain_prev->chain_next = head->chain_next;
    else
        *bucket(lock, head->owner) = head->chain_next;
    if (head->chain_next != NULL)
        head->chain_next->chain_prev = head->chain_prev;
    head->chain_prev = head->chain_next = NULL;
}

/* More lines than buckets: double the buckets, if memory allows. */
static void maybe_grow(hilock_lock *lock)
{
    uint32_t buckets = lock->turn_table ? lock->turn_mask + 1 : 1;
    if (lock->turn_lines <= buckets || buckets > UINT32_MAX / 2)
        return;
    uint32_t grown = buckets < FIRST_TABLE ? FIRST_TABLE : 2 * buckets;
    hl_turn **table = hl_calloc(grown, sizeof *table);
    if (table == NULL)
        return;
    for (uint32_t i = 0; i < buckets; i++) {
        hl_turn *h = lock->turn_table ? lock->turn_table[i] : lock->turns;
        while (h != NULL) {
            hl_turn *next = h->chain_next;
            chain_insert(&table[bucket_of(h->owner, grown - 1)], h);
            h = next;
        }
    }
    hl_free(lock->turn_table);
    lock->turns = NULL;
    lock->turn_table = table;
    lock->turn_mask = grown - 1;
}

static hl_turn *line_of(hilock_lock *lock, uint64_t owner)
{
    for (hl_turn *h = *bucket(lock, owner); h != NULL; h = h->chain_next)
        if (h->owner == owner)
            return h;
    return NULL;
}

bool hl_turn_idle(hilock_lock *lock, uint64_t owner)
{
    return line_of(lock, owner) == NULL;
}

bool hl_turn_take(hilock_lock *lock, hl_turn *turn, uint64_t owner,
                  void (*go)(hl_turn *turn))
{
    turn->owner = owner;
    turn->go = go;
    turn->listed = true;
    turn->chain_prev = turn->chain_next = NULL;
    hl_turn *head = line_of(lock, owner);
    if (head != NULL) {
        /* Last in the owner's line: just before its head in the ring. */
        turn->prev = head->prev;
        turn->next = head;
        head->prev->next = turn;
        head->prev = turn;
        turn->active = false;
        return false;
    }
    turn->prev = turn->next = turn;
    turn->active = true;
    chain_insert(bucket(lock, owner), turn);
    lock->turn_lines++;
    maybe_grow(lock);
    return true;
}

void hl_turn_pass(hilock_lock *lock, hl_turn *from, hl_turn *to,
                  void (*go)(hl_turn *turn))
{
    to->owner = from->owner;
    to->go = go;
    to->active = from->active;
    to->listed = true;
    to->chain_prev = to->chain_next = NULL;
    if (from->next == from) {
        to->prev = to->next = to;
    } else {
        to->prev = from->prev;
        to->next = from->next;
        to->prev->next = to;
        to->next->prev = to;
    }
    if (from->active)
        chain_replace(lock, from, to);
    from->prev = from->next = NULL;
    from->active = false;
    from->listed = false;
}

void hl_turn_end(hilock_lock *lock, hl_turn *turn)
{
    if (!turn->listed)
        return;
    bool was_active = turn->active;
    hl_turn *next = turn->next == turn ? NULL : turn->next;
    if (next != NULL) {
        turn->prev->next = turn->next;
        turn->next->prev = turn->prev;
    }
    if (was_active) {
        if (next != NULL) {
            chain_replace(lock, turn, next);
        } else {
            chain_remove(lock, turn);
            lock->turn_lines--;
        }
    }
    turn->prev = turn->next = NULL;
    turn->active = false;
    turn->listed = false;
    if (was_active && next != NULL) {
        next->active = true;
        next->go(next);
    }
}
