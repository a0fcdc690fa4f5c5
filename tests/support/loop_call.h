/* Running code on a client's loop thread from a test.
 *
 * What the loop thread owns (the lease engine, the pub/sub channels, the
 * pending acquires of a handle, the connection counters) may only be
 * read there; so may some internal calls only be made there.  These
 * helpers queue a task with fn on the loop and wait until it has run, so
 * a test reads that state without racing the loop.
 *
 * They fail the running cmocka test when the task cannot be queued, does
 * not run in time or finds the client closed: not for forked children. */
#ifndef HL_LOOP_CALL_H
#define HL_LOOP_CALL_H

#include <stdbool.h>

#include "hilock/client.h"

typedef void hl_loop_fn(hilock_client *c, void *arg);

/* Runs fn(c, arg) on c's loop thread, behind every task already queued
 * there, and returns once it has run.  fn may be NULL: the call then
 * only waits for the tasks ahead of it. */
void hl_run_on_loop(hilock_client *c, hl_loop_fn *fn, void *arg);

/* The same with a deadline of the caller's own; hl_run_on_loop allows
 * hl_widen(30000) ms. */
void hl_run_on_loop_within(hilock_client *c, hl_loop_fn *fn, void *arg,
                           int timeout_ms);

/* How many times c moved to another master Sentinel named, read on its
 * loop thread. */
unsigned hl_client_master_moves(hilock_client *c);

/* For hl_wait_until: whether client has moved since it had moves. */
typedef struct hl_moves_probe {
    hilock_client *client;
    unsigned moves;
} hl_moves_probe;
bool hl_client_has_moved(void *probe);

/* How many rounds of questions c's sentinels have ended, read on its
 * loop thread (c follows Sentinel). */
unsigned hl_client_sentinel_rounds(hilock_client *c);

/* For hl_wait_until: whether client's sentinels ended a round since it
 * had rounds. */
typedef struct hl_rounds_probe {
    hilock_client *client;
    unsigned rounds;
} hl_rounds_probe;
bool hl_client_has_asked(void *probe);

#endif
