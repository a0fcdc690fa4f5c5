/* What the cluster test files share: clients on a cluster, its masters
 * in a fixed order, keys placed on a chosen master.  Each failing step
 * fails the calling test, as the fixture's helpers do. */
#ifndef HL_CLUSTER_UTIL_H
#define HL_CLUSTER_UTIL_H

#include <stddef.h>
#include <stdint.h>

#include "hilock/hilock.h"
#include "redis_cluster.h"

/* A client on url; watchdog_ms and command_ms 0 keep the defaults. */
hilock_client *hl_fx_cluster_client(const char *url, int64_t watchdog_ms,
                                    int64_t command_ms);

/* The master serving slot, as the first node that answers sees it,
 * waiting up to hl_widen(15000) ms for one: a view caught in the middle
 * of a change (a node a busy machine left unscheduled past the node
 * timeout, flagged and cleared again) names none for a moment. */
hl_redis_server *hl_fx_master_of(hl_redis_cluster *c, int slot);

/* Master i of 3, by the slots 0, 8192 and 16383 each serves. */
hl_redis_server *hl_fx_master(hl_redis_cluster *c, int i);

/* A key "<prefix>-<n>" whose slot m serves, into out. */
void hl_fx_key_on(hl_redis_cluster *c, hl_redis_server *m,
                  const char *prefix, char *out, size_t cap);

/* The node's id (CLUSTER MYID). */
void hl_fx_node_id(hl_redis_server *s, char *out, size_t cap);

/* Give slot to master dst at once (CLUSTER SETSLOT NODE), on dst first
 * and then on every other node, so that the slot is never left without
 * a master that takes it.  Moves no keys. */
void hl_fx_assign_slot(hl_redis_cluster *c, int slot, hl_redis_server *dst);

#endif
