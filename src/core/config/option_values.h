/* The options object's values: what every layer of the core reads of
 * it.  config/ alone writes them, through the setters and the URL. */
#ifndef HL_OPTION_VALUES_H
#define HL_OPTION_VALUES_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "hilock/events.h"
#include "hilock/options.h"

struct hilock_options {
    char *host;
    int port;
    /* Other seed nodes of a cluster, "host:port" joined by ',' (IPv6 in
     * brackets), from a URL naming several hosts; NULL for one host. */
    char *seeds;
    char *user;
    char *password;
    int db;
    /* Sentinel: the monitored master's name, NULL without Sentinel.  host
     * and seeds then name the sentinels, and sentinel_user and
     * sentinel_password are theirs (user and password are the data
     * nodes'). */
    char *sentinel_master;
    char *sentinel_user;
    char *sentinel_password;
    int replica_ack; /* hilock_replica_ack */
    bool wait_fsync; /* lock writes wait for the AOF's fsync (WAITAOF) */
    /* hilock_redisson_pubsub: how the channels a cluster's Redisson
     * clients share are published and listened to (script.c, client.c). */
    int redisson_pubsub;
    int64_t replica_ack_timeout_ms;
    int64_t connect_timeout_ms;
    int64_t command_timeout_ms;
    int64_t watchdog_timeout_ms;
    int64_t waiter_timeout_ms; /* places waiters keep on the server */
    int64_t max_hold_ms; /* 0: the watchdog renews until release */
    int64_t lock_delay_ms; /* 0: a lost hold frees the lock at once */
    int connections;     /* command connections */
    int max_pending;     /* unfinished operations a client takes */
    int64_t busy_poll_us; /* 0: the loop sleeps when it has nothing to do */
    int64_t reconnect_min_ms;
    int64_t reconnect_max_ms;
    uint64_t max_reply_bytes;
    int64_t max_reply_elements;
    int max_reply_depth;
    int tls;
    int tls_verify;
    char *tls_ca_file;
    char *tls_ca_dir;
    char *tls_cert_file;
    char *tls_key_file;
    char *tls_server_name;
    char *description; /* on the client's card (runtime/presence.c) */
    struct ev_loop *loop;

    /* Stored for src/multi, which reads them through the public getters;
     * nothing in the core acts on them. */
    int64_t node_timeout_ms; /* RedLock: a master's command timeout */
    int64_t quarantine_ms;   /* RedLock: 0 means the watchdog timeout */

    hilock_event_cb *event_cb; /* NULL: no events */
    void *event_data;
};

/* A replica acknowledgement policy as the URL names it ("majority"),
 * into out (cap bytes); "?" for a value outside hilock_replica_ack. */
void hl_replica_ack_text(int ack, char *out, size_t cap);

#endif
