/* Holding a client's loop thread busy from a test: an acquire whose
 * callback does not return until the test lets it, so that the test can
 * show a call made meanwhile does not wait for that loop.
 *
 * hl_busy_loop_hold fails the running cmocka test when the loop does not
 * take the callback in time. */
#ifndef HL_BUSY_LOOP_H
#define HL_BUSY_LOOP_H

#include <stdatomic.h>
#include <stdbool.h>

#include "hilock/lock.h"

typedef struct hl_busy_loop {
    atomic_bool busy;    /* the callback holds the loop */
    atomic_bool release; /* set by the test: the callback returns */
    atomic_bool gave_up; /* the callback returned at give_up_ms instead */
    int give_up_ms;
} hl_busy_loop;

/* Holds the loop of spare's client until hl_busy_loop_release, or at
 * most give_up_ms, which only a call that waited for that loop can make
 * pass; returns once the loop is held. */
void hl_busy_loop_hold(hilock_lock *spare, hl_busy_loop *bl, int give_up_ms);

/* Lets the loop go; true when it was still held (nothing waited for it
 * until give_up_ms). */
bool hl_busy_loop_release(hl_busy_loop *bl);

#endif
