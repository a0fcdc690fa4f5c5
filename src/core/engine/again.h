/* A lock write a replica refused (READONLY: the node was demoted, and the
 * script stopped before its first write, so nothing of it ran).  Under
 * Sentinel or on a cluster the client asks where the master is now, and
 * a write that is no acquire (a release, a count down, permits added) is
 * made again there every HL_AGAIN_EVERY_US for as long as the command
 * timeout from its first refusal: what a release lets go most likely
 * lives on the new master, and a caller told HILOCK_EREADONLY would have
 * to release again, or leave it held.  An acquire waits as its own wait
 * allows instead.  Loop thread only. */
#ifndef HL_AGAIN_H
#define HL_AGAIN_H

#include <stdbool.h>

#include "core/base/monotime.h"
#include "core/engine/lock_handle.h"
#include "core/loop/io.h"

#define HL_AGAIN_EVERY_US HL_MS(50)

typedef void hl_again_fn(void *data);

typedef struct hl_again {
    hl_timer timer;
    hl_again_fn *fn;
    void *data;
    hl_monotime until; /* the last moment to make it again; 0: unset */
    bool waiting;      /* fn is due */
} hl_again;

/* Any thread, before the write is first sent; lock's client is open. */
void hl_again_init(hl_again *a, hilock_lock *lock, hl_again_fn *fn,
                   void *data);

/* The write was answered with the error text why: when a replica refused
 * it and it may be made again, fn(data) is due to make it again, and
 * true; else false, and the caller ends as it would. */
bool hl_again_after_refusal(hl_again *a, hilock_lock *lock, const char *why);

/* The client closes: true when fn was due, which it no longer is. */
bool hl_again_stop(hl_again *a);

/* The detail of a write that ends so, what naming the write. */
#define HL_AGAIN_CLOSED(what)                                               \
    "the client closed while a replica refused the " what ": it did not run"

#endif
