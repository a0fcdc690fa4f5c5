/* An attempt that rides on a release: a kind whose release frees what a
 * waiter of the same client asks for sends that waiter's attempt within
 * the release's own request, so the server runs both in one script and
 * the waiter hears its answer a round trip sooner, at the cost of one
 * request where there were two.  A kind whose server line holds clients
 * (hl_kind.in_line) has the client's oldest waiter on the name ride, the
 * one whose turn comes next, on whatever handle of the kind it waits; a
 * queue_locally kind, the waiter a hand-on would wake (the oldest idle
 * listener on the client's channel); a channel_per_owner kind, the
 * handle's oldest waiter, which the release most likely finds at the
 * head of the server's line.
 * Loop thread only. */
#ifndef HL_RIDE_H
#define HL_RIDE_H

#include <stdbool.h>
#include <stdint.h>

#include "core/engine/lock_handle.h"
#include "hilock/reply.h"

/* Send a request that carries the attempt a (valid during the call
 * only); HILOCK_OK or an error, as a kind's attempt. */
typedef int hl_ride_send_fn(void *ctx, const hl_attempt_args *a);

/* The waiter that rides (above), when it waits idle (for at most amount,
 * in a line_per_client kind's line), attempts through send.  Returns
 * that waiter's op, which the request's answer must reach through
 * hl_ride_reply (the op stays alive until then), or NULL when no waiter
 * rides: none fits, or the request cannot carry it (*rc HILOCK_OK,
 * nothing sent: the caller sends its request alone), or send failed (*rc
 * its error; the waiter waits on as before). */
hl_acquire_op *hl_lock_ride(hilock_lock *lock, int64_t amount,
                            hl_ride_send_fn *send, void *ctx, int *rc);

/* The answer (owned) of a request that carried rider, as the server
 * replies it, {the carrier's part, the rider's}: carrier gets its part
 * with the request's status, then the rider its own, answered as its
 * own attempt would be; *took (when not NULL) tells before carrier runs
 * whether the rider took what it asked for (a semaphore's freed permits
 * are then spoken for, and nobody else of the client needs waking).  An
 * answer not so made fails both, the carrier with HILOCK_EPROTO (what
 * names the request in the detail); the rider's attempt is then of
 * unknown outcome. */
void hl_ride_reply(hl_acquire_op *rider, int status, hilock_reply *reply,
                   const char *what, hl_request_fn *carrier, void *data,
                   bool *took);

#endif
