/* A private Redis Cluster on loopback, for the demo, the benchmark and
 * the tests: masters and their replicas, each a private server from
 * redis_server.h with cluster mode on, joined with
 * `redis-cli --cluster create` and waited for until every node reports
 * the cluster up.
 *
 * The redis-cli binary is $HILOCK_REDIS_CLI if set, else "redis-cli"
 * found on PATH.  Errors are reported as NULL or -1 with an explaining
 * line on stderr, as in redis_server.h.  A handle belongs to one thread
 * at a time. */
#ifndef HL_REDIS_CLUSTER_H
#define HL_REDIS_CLUSTER_H

#include <stddef.h>

#include "redis_server.h"

#define HL_CLUSTER_SLOTS 16384

typedef struct hl_redis_cluster hl_redis_cluster;

typedef struct hl_redis_cluster_config {
    int masters;             /* 3 when 0; at least 3 */
    int replicas;            /* per master; 0 allowed */
    int node_timeout_ms;     /* cluster-node-timeout; 0 means 2000 */
    int start_timeout_ms;    /* the whole start-up; 0 means 60000 */
    /* Applied to every node (its extra_config gets the cluster lines
     * appended); NULL for plain nodes.  With a TLS certificate every node
     * is TLS-only, on the cluster bus and for replication too
     * (tls-cluster, tls-replication), and redis-cli joins them over TLS
     * with the identity the command helpers present. */
    const hl_redis_server_config *node;
} hl_redis_cluster_config;

hl_redis_cluster *hl_redis_cluster_start(const hl_redis_cluster_config *cfg);

/* Stops every node and frees the handle.  NULL is ignored. */
void hl_redis_cluster_stop(hl_redis_cluster *c);

/* Nodes in start order: the masters first, then the replicas, as
 * created (roles change with failovers). */
size_t hl_redis_cluster_size(const hl_redis_cluster *c);
hl_redis_server *hl_redis_cluster_node(const hl_redis_cluster *c, size_t i);

/* "redis://127.0.0.1:P1,127.0.0.1:P2,..." naming every node, for a
 * client that takes seed nodes ("rediss://" for TLS nodes, with no TLS
 * options: add the CA and client files).  Owned by the handle. */
const char *hl_redis_cluster_url(const hl_redis_cluster *c);

/* The master of slot in the view (CLUSTER NODES) of the first running
 * node that answers; NULL when it names none. */
hl_redis_server *hl_redis_cluster_master_of(hl_redis_cluster *c, int slot);

/* Waits until every running node reports cluster_state:ok with every
 * slot served, and lists only running nodes as the masters serving them:
 * after a kill -9, until a replica has taken over.  0, or -1 on
 * timeout. */
int hl_redis_cluster_wait_ok(hl_redis_cluster *c, int timeout_ms);

#endif
