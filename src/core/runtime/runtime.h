/* The client runtime as the layers above it use it (the generic lock,
 * the kinds, src/multi): references, the loop thread, the limits of a
 * blocking call.  Everything else of a client is runtime/client_state.h,
 * which only the core includes. */
#ifndef HL_RUNTIME_H
#define HL_RUNTIME_H

#include <stdbool.h>
#include <stdint.h>

#include "core/loop/io.h"
#include "core/runtime/op.h"
#include "core/transport/pubsub.h"
#include "hilock/client.h"
#include "hilock/events.h"
#include "hilock/options.h"
#include "hilock/reply.h"

void hl_client_ref(hilock_client *c);
/* Frees the memory with the last reference. */
void hl_client_unref(hilock_client *c);

/* Is the calling thread the client's loop thread? */
bool hl_client_in_loop(const hilock_client *client);

/* What a layer above attaches to a client (its handles, lease engine,
 * waiter registry): closed with the client, and asked for its share of
 * the stats.  The runtime knows parts only through this. */
typedef struct hl_client_part {
    /* Negative: closed before the client's operations are cancelled (a
     * part whose calls are still running); else after its connections
     * are gone.  Lower ranks close first. */
    int rank;
    void (*close)(hilock_client *client);
    /* Adds to out on the loop thread; may be NULL. */
    void (*stats)(hilock_client *client, hilock_client_stats *out);
    /* The client's master changed (Sentinel, cluster failover), or a
     * connection came back, perhaps to a server that restarted without
     * its data: what was granted through the old one must be checked on
     * the one there now.  May be NULL. */
    void (*master_changed)(hilock_client *client);
} hl_client_part;

/* The master behind some of the client's requests changed (a Sentinel
 * or cluster failover), or may have (a connection came back), for why:
 * every part's master_changed runs, and the event is told.  Loop
 * thread. */
void hl_client_master_changed(hilock_client *client, const char *why);

/* Tell the client's event callback, if any (events.h); server, detail
 * and lock may be NULL.  Loop thread. */
void hl_client_event(hilock_client *client, int type, const char *server,
                     const char *detail, struct hilock_lock *lock,
                     uint64_t owner);

/* Attach part (static storage) to client; attaching it again does
 * nothing.  Any thread.  0, or -1 when the client's table is full. */
int hl_client_attach_part(hilock_client *client, const hl_client_part *part);

/* Called on the loop thread each time one of the client's command
 * connections finishes its handshake, before the requests queued for it
 * are written.  It may send commands of its own on that connection with
 * hl_client_hook_command. */
typedef void hl_connect_hook_fn(hilock_client *client, void *data);

/* Completion of a hook's command, as for any request: exactly once, on
 * the loop thread; reply (owned by the callee) is set for HILOCK_OK and
 * HILOCK_EREDIS, else NULL. */
typedef void hl_hook_reply_fn(void *data, int status, hilock_reply *reply);

/* Install the hook (fn NULL removes it).  Loop thread, or before the
 * loop of a client made on a caller's loop first runs: a connection that
 * came up before the hook was set is not reported again. */
void hl_client_set_connect_hook(hilock_client *client,
                                hl_connect_hook_fn *fn, void *data);

/* The hook's data when fn is the installed hook, else NULL, so a layer
 * finds the state it attached to a client.  Any thread once the hook is
 * set: it does not change afterwards. */
void *hl_client_connect_hook_data(const hilock_client *client,
                                  hl_connect_hook_fn *fn);

/* Only inside the hook: queue a command on the connection that just came
 * up.  HILOCK_OK (fn will be called exactly once), HILOCK_EINVAL outside
 * the hook, HILOCK_ENOMEM or HILOCK_ECLOSED (fn is not called). */
int hl_client_hook_command(hilock_client *client, int argc,
                           const char *const *argv, const size_t *argvlen,
                           hl_hook_reply_fn *fn, void *data);

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

/* Listen to one of hilock's own channels (HL_OWN_CHANNEL_PREFIX), on
 * the pub/sub connection that hears it: the master of its slot on a
 * cluster.  As hl_pubsub_subscribe, or HILOCK_ENOMEM negated when there
 * is no such connection (no memory, or the client is closing).  Loop
 * thread. */
int hl_client_listen(hilock_client *client, hl_sub *sub, const char *channel,
                     size_t len, hl_sub_fn *fn, void *data);

/* A timer on the client's loop (loop thread). */
void hl_client_timer_init(hilock_client *client, hl_timer *timer,
                          hl_timer_fn *fn, void *data);

#endif
