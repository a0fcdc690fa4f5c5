/* What happens to a client as it happens: connections going down and
 * coming back, a master that changed, a lease lost and why.  For logs
 * and operators; the calls' own results and the lost callback stay what
 * a program acts on. */
#ifndef HILOCK_EVENTS_H
#define HILOCK_EVENTS_H

#include <stdint.h>

#include "export.h"
#include "options.h"

#ifdef __cplusplus
extern "C" {
#endif

struct hilock_client;
struct hilock_lock;

typedef enum hilock_event_type {
    /* A command connection finished its handshake (server). */
    HILOCK_EVENT_CONNECTED = 1,
    /* A command connection went down (server, detail: why); the client
     * reconnects by itself. */
    HILOCK_EVENT_DISCONNECTED = 2,
    /* The master behind some of the client's requests changed, or may
     * have (a failover, a connection back after a break): every lease
     * held through it is being checked there now (detail: why). */
    HILOCK_EVENT_MASTER_CHANGED = 3,
    /* A lease was lost (lock, owner, detail: why), as the lock's lost
     * callback hears it. */
    HILOCK_EVENT_LEASE_LOST = 4,
    /* Too few replicas acknowledged a write the policy asked them to
     * (detail: how many, or why the count is unknown); the call fails
     * with HILOCK_ENOACK. */
    HILOCK_EVENT_ACK_SHORT = 5,
    /* The server's ACL refused the PUBLISH that wakes waiters (detail:
     * its error); the step itself was done. */
    HILOCK_EVENT_PUBLISH_REFUSED = 6,
    /* The server's ACL refused a SUBSCRIBE to a lock's channel (detail:
     * its error); waiters there retry at the lock's ttl. */
    HILOCK_EVENT_SUBSCRIBE_REFUSED = 7
} hilock_event_type;

typedef struct hilock_event {
    hilock_event_type type;
    /* "host:port" of the server, or NULL when it is not one server's. */
    const char *server;
    /* Why, in words, or NULL. */
    const char *detail;
    /* HILOCK_EVENT_LEASE_LOST: the lock and the owner that held it;
     * else NULL and 0. */
    struct hilock_lock *lock;
    uint64_t owner;
} hilock_event;

/* Called on the client's loop thread for each event; everything the
 * event points to lives until the callback returns.  It must not block
 * (a blocking call of this client there fails with HILOCK_EDEADLK).
 * New event types may come in later versions: ignore those you do not
 * know. */
typedef void hilock_event_cb(struct hilock_client *client,
                             const hilock_event *event, void *user_data);

/* Events of the clients made with these options go to cb (NULL: none,
 * the default).  Any thread.
 * @return HILOCK_OK, HILOCK_EINVAL (NULL opts) */
HILOCK_API int hilock_options_set_event_callback(hilock_options *opts,
                                                 hilock_event_cb *cb,
                                                 void *user_data);

/* A short English name of the type ("connected", "lease lost"), or
 * "unknown".  Any thread. */
HILOCK_API const char *hilock_event_name(hilock_event_type type);

#ifdef __cplusplus
}
#endif

#endif
