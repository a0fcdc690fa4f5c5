/* A private master with replicas on loopback, optionally watched by
 * Redis Sentinels, for the demo, the benchmark and the tests.  Every
 * process is a private server from redis_server.h; replicas follow the
 * master with "replicaof", sentinels monitor it under one master name.
 * Errors are reported as NULL or -1 with an explaining line on stderr,
 * as in redis_server.h.  A handle belongs to one thread at a time. */
#ifndef HL_REDIS_REPLICATED_H
#define HL_REDIS_REPLICATED_H

#include <stddef.h>

#include "redis_server.h"

typedef struct hl_redis_replicated hl_redis_replicated;

typedef struct hl_redis_replicated_config {
    int replicas;            /* 1..8; 0 means 2 */
    int sentinels;           /* 0..9; a quorum of sentinels/2+1 */
    int down_after_ms;       /* sentinel down-after; 0 means 1000 */
    int failover_timeout_ms; /* sentinel failover-timeout; 0 means 5000 */
    const char *master_name; /* NULL means "mymaster" */
    int start_timeout_ms;    /* the whole start-up; 0 means 30000 */
    /* Applied to the master and the replicas (a password becomes the
     * replicas' masterauth and the sentinels' auth-pass); NULL for plain
     * servers.  TLS is not supported. */
    const hl_redis_server_config *node;
} hl_redis_replicated_config;

hl_redis_replicated *hl_redis_replicated_start(
    const hl_redis_replicated_config *cfg);

/* Stops every process and frees the handle.  NULL is ignored. */
void hl_redis_replicated_stop(hl_redis_replicated *g);

/* The data nodes in start order: 0 is the first master, then the
 * replicas (roles change with failovers). */
size_t hl_redis_replicated_nodes(const hl_redis_replicated *g);
hl_redis_server *hl_redis_replicated_node(const hl_redis_replicated *g,
                                          size_t i);
size_t hl_redis_replicated_sentinels(const hl_redis_replicated *g);
hl_redis_server *hl_redis_replicated_sentinel(const hl_redis_replicated *g,
                                              size_t i);
const char *hl_redis_replicated_master_name(const hl_redis_replicated *g);

/* "redis-sentinel://127.0.0.1:P1,...#NAME" naming every sentinel; NULL
 * without sentinels.  Owned by the handle. */
const char *hl_redis_replicated_sentinel_url(const hl_redis_replicated *g);

/* The node that every running sentinel names as master, that runs, and
 * that calls itself master (ROLE), with as many replicas linked to it as
 * are running; NULL while that is not so (a failover under way).
 * Without sentinels: the running node that calls itself master. */
hl_redis_server *hl_redis_replicated_master(hl_redis_replicated *g);

/* Waits until hl_redis_replicated_master() names a node other than
 * not_this (NULL: any node).  The master, or NULL on timeout. */
hl_redis_server *hl_redis_replicated_wait_master(hl_redis_replicated *g,
                                                 const hl_redis_server *not_this,
                                                 int timeout_ms);

#endif
