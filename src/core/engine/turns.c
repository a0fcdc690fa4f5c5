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

/* The table, or NULL while the handle's one bucket serves. */
static hl_lock_rare *table_of(const hilock_lock *lock)
{
    hl_lock_rare *r = hl_lock_rare_peek(lock);
    return r != NULL && r->turn_table != NULL ? r : NULL;
}

static hl_turn **bucket(hilock_lock *lock, uint64_t owner)
{
    hl_lock_rare *r = table_of(lock);
    if (r == NULL)
        return &lock->turns;
    return &r->turn_table[bucket_of(owner, r->turn_mask)];
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

/* More lines than buckets: double the buckets, if memory allows.  Lines
 * are counted once there is a table; before, the one bucket's chain is
 * every line, and a second one asks for a table. */
static void maybe_grow(hilock_lock *lock)
{
    hl_lock_rare *r = table_of(lock);
    uint32_t buckets = r != NULL ? r->turn_mask + 1 : 1;
    bool crowded = r != NULL ? r->turn_lines > buckets
                             : lock->turns != NULL &&
                                   lock->turns->chain_next != NULL;
    if (!crowded || buckets > UINT32_MAX / 2)
        return;
    if (r == NULL && (r = hl_lock_rare_get(lock)) == NULL)
        return;
    uint32_t grown = buckets < FIRST_TABLE ? FIRST_TABLE : 2 * buckets;
    hl_turn **table = hl_calloc(grown, sizeof *table);
    if (table == NULL)
        return;
    uint32_t lines = 0;
    for (uint32_t i = 0; i < buckets; i++) {
        hl_turn *h = r->turn_table ? r->turn_table[i] : lock->turns;
        while (h != NULL) {
            hl_turn *next = h->chain_next;
            chain_insert(&table[bucket_of(h->owner, grown - 1)], h);
            lines++;
            h = next;
        }
    }
    hl_free(r->turn_table);
    lock->turns = NULL;
    r->turn_table = table;
    r->turn_mask = grown - 1;
    r->turn_lines = lines;
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
    hl_lock_rare *r = table_of(lock);
    if (r != NULL)
        r->turn_lines++;
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
            hl_lock_rare *r = table_of(lock);
            if (r != NULL)
                r->turn_lines--;
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
