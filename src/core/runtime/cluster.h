/* Redis Cluster routing for a client: the slot map (16384 slots, each to
 * the master that serves it), one command connection per master, the
 * topology read from CLUSTER SHARDS (CLUSTER SLOTS on servers before 7),
 * and the MOVED / ASK redirections the connections follow.  Loop thread
 * only, except where said.
 *
 * The topology is read again every HL_CLUSTER_REFRESH_MS, and soon after
 * a redirection or a lost node connection: both mean the map is stale.
 * While a master's connection is down, or it has stopped answering
 * (HL_CLUSTER_SILENT_MS), the map is read every
 * HL_CLUSTER_FAILOVER_POLL_MS, and each read that names a new master for
 * its slots hands the requests it had not written to that master and
 * fails those it had (HILOCK_EIO) rather than wait for their timeout.
 * Any slot that changes master has every lease checked at once. */
#ifndef HL_CLUSTER_H
#define HL_CLUSTER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "core/transport/conn.h"
#include "core/transport/pubsub.h"

struct hilock_client;
typedef struct hl_cluster hl_cluster;

/* A takeover that leaves the old master running shows in no redirection
 * to a holder that sends nothing: the read is what tells its client the
 * slot moved, and has its leases checked. */
#define HL_CLUSTER_REFRESH_MS 1000
/* The least time between two topology reads, so that a burst of
 * redirections during a resharding costs one read, not one each. */
#define HL_CLUSTER_REFRESH_GAP_MS 100
/* While a master the map names has lost its link: how often the map is
 * read, from another node, until its replica appears as the master. */
#define HL_CLUSTER_FAILOVER_POLL_MS 250
/* A master whose oldest request has gone unanswered this long may have
 * stopped (paused, cut off) with its link up: the map is read at the
 * failover pace meanwhile, and once it names another master for the
 * node's slots, the node's requests end or move at once. */
#define HL_CLUSTER_SILENT_MS 500
/* After a failed read. */
#define HL_CLUSTER_RETRY_MS 1000
/* Masters and former masters the client keeps connections to.  A slot
 * map entry is one byte. */
#define HL_CLUSTER_MAX_NODES 250

/* Start routing for client, whose connections to the seed node stay the
 * way topology is read until node connections are up.  tmpl is how the
 * client makes its own connections; each node gets a copy of the
 * client's options with its own address.  ready is called once, when the
 * first topology read ends (either way).  NULL when memory runs out. */
hl_cluster *hl_cluster_create(struct hilock_client *client,
                              const hl_conn_config *tmpl,
                              void (*ready)(struct hilock_client *client));
/* Close every node connection (their requests end with HILOCK_ECLOSED);
 * the memory goes with hl_cluster_free. */
void hl_cluster_close(hl_cluster *cl);
void hl_cluster_free(hl_cluster *cl);

/* The connection to the master of slot, as far as the map knows; the
 * seed connection while the slot is unknown (its MOVED then teaches the
 * map). */
hl_conn *hl_cluster_conn_for_slot(const hl_cluster *cl, unsigned slot);

/* The redirection hook every connection of a cluster client carries.  A
 * line whose slot, host or port no node can have sets *bad to why (the
 * request then ends with HILOCK_EPROTO). */
hl_conn *hl_cluster_redirect(void *cluster, hl_conn *from, const char *error,
                             bool *asking, const char **bad);

/* Whether pub/sub is sharded (Redis 7 and later): channels are then
 * listened to with hl_cluster_pubsub_for, and the scripts SPUBLISH. */
bool hl_cluster_sharded(const hl_cluster *cl);
/* The sharded pub/sub connection to the master of channel's slot (any
 * master while the slot is unknown; the next topology read moves it), or
 * with sharded false the plain one to that master (SUBSCRIBE, which hears
 * a PUBLISH made on any node).  NULL when memory runs out or the cluster
 * is closed. */
hl_pubsub *hl_cluster_pubsub_for(hl_cluster *cl, const char *channel,
                                 size_t len, bool sharded);
/* Free the pub/sub connections of the nodes; their listeners hear
 * HL_SUB_CLOSED.  With the client's own pub/sub, after the waiters. */
void hl_cluster_free_pubsubs(hl_cluster *cl);

/* Read the topology again soon (at most every HL_CLUSTER_REFRESH_GAP_MS). */
void hl_cluster_refresh_soon(hl_cluster *cl);
/* The same, to learn whether the master conn leads to still is one: a
 * master being replaced may not know it yet, so the read asks another
 * node when there is one.  The verdict goes to hl_ack_topology. */
void hl_cluster_confirm(hl_cluster *cl, const hl_conn *conn);

/* Add the node connections' counters to the client's. */
void hl_cluster_add_stats(const hl_cluster *cl, uint64_t *connects,
                          uint64_t *writes);

/* For tests: how many topology reads completed, redirections followed,
 * and the number of known nodes. */
unsigned hl_cluster_refreshes(const hl_cluster *cl);
unsigned hl_cluster_redirects(const hl_cluster *cl);
int hl_cluster_node_count(const hl_cluster *cl);
/* Why the last topology read or redirection was refused ("" when none
 * was): a reply that names a port or a host no node can have. */
const char *hl_cluster_last_failure(const hl_cluster *cl);
/* For tests: whether the link to the node the map names for slot is
 * down (false while the slot has no node). */
bool hl_cluster_slot_link_down(const hl_cluster *cl, unsigned slot);
/* For tests: point slot at the node at host:port, as a stale map would. */
int hl_cluster_set_slot(hl_cluster *cl, unsigned slot, const char *host,
                        int port);

#endif
