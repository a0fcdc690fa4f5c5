/* What the test files on a master with replicas and sentinels share:
 * the replicas a master counts online, moving a replica by hand, and a
 * sentinel made to name another master.  Each failing step fails the
 * calling test, as the fixture's helpers do. */
#ifndef HL_REPLICATED_UTIL_H
#define HL_REPLICATED_UTIL_H

#include <stdbool.h>
#include <stddef.h>

#include "redis_replicated.h"
#include "hilock/hilock.h"

/* The replicas s counts online, as the library reads INFO replication;
 * -1 when s does not answer. */
int hl_online_replicas(const hl_redis_server *s);

/* For hl_wait_until: whether of counts want replicas online. */
typedef struct hl_online_probe {
    const hl_redis_server *of;
    int want;
} hl_online_probe;
bool hl_online_is(void *probe);

/* node becomes a replica of of, or a master with of NULL. */
void hl_replica_of(hl_redis_server *node, const hl_redis_server *of);

/* Sentinel i of g names node as the master from now on, announcing no
 * switch (it monitors the name afresh). */
void hl_sentinel_names(hl_redis_replicated *g, size_t i,
                       const hl_redis_server *node);

/* A client of g's sentinels under policy; a nonzero ack_timeout_ms or
 * command_timeout_ms replaces the default. */
hilock_client *hl_sentinel_client(hl_redis_replicated *g,
                                  hilock_replica_ack policy,
                                  int64_t ack_timeout_ms,
                                  int64_t command_timeout_ms);
/* The same with a nonzero connect_timeout_ms, which also bounds how long
 * a round of the sentinels waits for each one's answer. */
hilock_client *hl_sentinel_client_waiting(hl_redis_replicated *g,
                                          hilock_replica_ack policy,
                                          int64_t connect_timeout_ms);

#endif
