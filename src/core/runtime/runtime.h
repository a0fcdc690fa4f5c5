/* The client runtime as the layers above it use it (the generic lock,
 * the kinds, src/multi): references, the loop thread, the limits of a
 * blocking call.  Everything else of a client is runtime/client_internal.h,
 * which only this folder includes. */
#ifndef HL_RUNTIME_H
#define HL_RUNTIME_H

#include <stdbool.h>
#include <stdint.h>

#include "core/runtime/op.h"
#include "hilock/client.h"
#include "hilock/options.h"

void hl_client_ref(hilock_client *c);
/* Frees the memory with the last reference. */
void hl_client_unref(hilock_client *c);

/* Is the calling thread the client's loop thread? */
bool hl_client_in_loop(const hilock_client *client);

/* With track_restarts: whether the server restarted, or came up, less
 * than the quarantine time ago (so it may have forgotten keys it
 * granted).  Any thread. */
bool hl_client_quarantined(const hilock_client *client);

/* Whether the client's first connection attempt has ended, one way or
 * the other.  Any thread. */
bool hl_client_first_attempt_done(hilock_client *client);

/* The client's watchdog lease (ms).  Any thread: options never change. */
int64_t hl_client_watchdog_ms(const hilock_client *client);

/* How long a blocking call on the client waits for the loop thread before
 * it gives up: the wait itself plus room for the command and connect
 * timeouts. */
int64_t hl_client_blocking_limit_us(const hilock_client *client,
                                    int64_t wait_ms);

#endif
