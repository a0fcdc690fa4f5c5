/* The client's state, exported to the engine above the runtime: the
 * parts the engine attaches, the loop, the options.  The kinds and
 * src/multi see a client only through runtime.h. */
#ifndef HL_CLIENT_STATE_H
#define HL_CLIENT_STATE_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>

#include <openssl/ssl.h>

#include "core/base/error_detail.h"
#include "core/loop/io.h"
#include "core/runtime/runtime.h"
#include "core/transport/conn.h"
#include "hilock/client.h"
#include "core/transport/pubsub.h"

/* Blocked callers sleep on HL_WAKE_WORDS process-wide futex words, one
 * bit each (op.c). */
#define HL_WAKE_WORDS 4
/* The handles, the lease engine and the waiter registry, and room. */
#define HL_CLIENT_PARTS 6

/* What the engine counts for hilock_stats. */
typedef struct hl_engine_counts {
    uint64_t acquires;
    uint64_t acquires_busy;
    uint64_t acquires_failed;
    uint64_t acquires_waiting; /* now */
    uint64_t acquires_handed;
    uint64_t releases;
    uint64_t wait_us[HILOCK_STATS_BUCKETS];
    uint64_t hold_us[HILOCK_STATS_BUCKETS];
    uint64_t wait_sum_us;
    uint64_t hold_sum_us;
} hl_engine_counts;

/* A hold of one of the client's handles: the lock's name, the owner, and
 * when the hold began (µs on the monotonic clock). */
typedef void hl_hold_visit(void *ctx, const char *name, size_t name_len,
                           uint64_t owner, int64_t since);

struct hilock_client {
    hilock_options *opts;
    struct ev_loop *loop;
    bool own_loop;
    pthread_t thread;
    /* The thread that runs the loop; a caller's loop may be handed to
     * another thread (hilock_client_set_loop_thread), so any thread reads
     * it atomically. */
    _Atomic(pthread_t) loop_tid;
    bool thread_running; /* own loop: the thread exists and is joinable */

    hl_async wakeup;
    hl_idle spin;               /* busy polling: the loop does not sleep */
    hl_prepare waker;           /* wakes the blocked callers posted to */
    uint32_t wake_mask[HL_WAKE_WORDS]; /* loop thread: whom it wakes */
    _Atomic int64_t spin_until; /* µs: until then */
    /* When the loop last ran operations other threads queued (loop
     * thread only): a thread of the caller's was busy then. */
    int64_t outside_at;
    pthread_mutex_t lock; /* guards the op queues, closed, first_* */
    pthread_cond_t cond;
    struct hl_op *ops_head; /* submitted, not yet started (op.c) */
    struct hl_op *ops_tail;
    struct hl_op *cancels_head; /* cancels asked from other threads */
    struct hl_op *cancels_tail;
    atomic_int pending_ops; /* bounded ops not yet finished */
    struct hl_op *live_ops; /* loop thread: started, cancellable, open */
    /* Written under lock, read without it on the loop thread as well
     * (hl_lock_conn, on every request): atomic so both sides agree. */
    atomic_bool closed;

    SSL_CTX *ssl_ctx;
    hl_conn *conn; /* conns[0]: raw commands and lease renewals */
    hl_conn *conns[HILOCK_MAX_CONNECTIONS];
    int nconns;
    unsigned up_mask; /* bit i: conns[i] is up */
    /* Cluster mode, learnt from the first connection that comes up:
     * until then requests go to the seed node as for a single server. */
    bool mode_known;
    bool mode_asked; /* INFO cluster sent, its answer not lost */
    struct hl_cluster *cluster; /* NULL for a single server */
    hl_conn_config conn_cfg;    /* how the client makes connections */
    /* The URL's other seed nodes, tried in turn while the first attempt
     * fails (options seeds); NULL once none is left. */
    char *seeds;
    const char *next_seed;
    int first_attempts; /* connect timeouts the first attempt may take */
    /* Sentinel: where the master is, and whether it is known yet (the
     * command connections start once it is). */
    struct hl_sentinel *sentinel;
    bool master_known;
    /* Moving the connections to a new master: the drops it causes ask
     * the sentinels nothing. */
    bool moving;
    unsigned master_moves;
    int seed_downs; /* failed attempts on the current seed */
    hl_pubsub *pubsub; /* created on first use */
    /* Replica counts per connection for the acknowledgement policy
     * (ack.c), created on the first lock write that needs one. */
    struct hl_acks *acks;
    /* Created on first use by the engine, which attaches them as parts. */
    struct hl_lease_engine *leases;
    struct hl_waiters *waiters;
    /* Under lock, sorted by rank. */
    const hl_client_part *parts[HL_CLIENT_PARTS];
    int nparts;
    struct hilock_lock *locks;      /* handles made on this client */
    /* Loop thread: the handles that keep releases the replicas did not
     * acknowledge (engine/unacked.h), and how many times the master
     * behind the client changed (hl_client_master_changed). */
    struct hilock_lock *unacked_locks;
    unsigned master_changes;
    struct hl_presence *presence; /* its card on the server, loop thread */
    /* Visits every hold the client's handles have (owner, and since when
     * on the monotonic clock), for the card's list of holds; set by the
     * engine with the first handle, under lock; called on the loop
     * thread. */
    void (*each_hold)(hilock_client *c, hl_hold_visit *visit, void *ctx);
    char id[HILOCK_CLIENT_ID_LEN + 1];
    atomic_bool connected;
    hl_connect_hook_fn *connect_hook;
    void *connect_hook_data;
    hl_conn *hook_conn; /* the connection a running hook was called for */

    bool first_done; /* the first attempt ended, one way or the other */
    int first_status;
    char first_detail[HL_DETAIL_MAX];

    int callback_depth;   /* user callbacks running on the loop thread */
    bool free_when_idle;  /* destroyed inside a callback */
    bool free_on_thread_exit;
    bool loop_exited; /* under lock: the own loop thread left its loop */
    /* The client's memory: one reference for the client itself, and one
     * for each thread that reached it through a lock handle and is still
     * using it (hl_lock_client_get), so a client destroyed meanwhile
     * cannot be freed under that thread. */
    atomic_int mem_refs;
    /* hilock_client_lost_fd's eventfd, made on first asking; -1: none. */
    atomic_int lost_fd;
    /* How long its command connections' answers took of late (µs), for
     * blocking callers to judge how long to wait awake. */
    _Atomic int64_t rtt_us;
    bool locks_detached; /* under lock: closing has let go of its locks */
    /* Loop thread: wake-up PUBLISHes and SUBSCRIBEs the server's ACL
     * refused (hilock_client_stats). */
    uint64_t publishes_refused;
    uint64_t subscribes_refused;
    /* The engine's share of hilock_stats (loop thread). */
    hl_engine_counts engine_counts;
};


/* The longest a sync caller waits awake for its answer (µs).  Putting a
 * thread to sleep and waking it costs more than a round trip to a nearby
 * Redis on many machines, so a short wait is better spent awake; only the
 * caller spins, never the loop thread, which would take a core from the
 * server on a small machine (see docs/internals/transport.md). */
#define HL_SPIN_MAX_US 300
/* What handing work to the loop thread and back adds to a round trip. */
#define HL_HANDOVER_US 30

/* The command connection that carries a lock's scripts: always the same
 * one for a name, so that its requests keep their order. */
hl_conn *hl_client_conn_for(const hilock_client *client, const char *name,
                            size_t len);



#ifdef HILOCK_TEST_HOOKS
/* For tests only, in the hilock_testing library alone: the CSPRNG a new
 * client draws its id from, RAND_bytes unless a test swaps it to make it
 * fail. */
extern int (*hilock__rand_bytes)(unsigned char *buf, int num);
#endif


/* The pub/sub connection, created on first use; NULL when memory runs out
 * or the client is closed.  Loop thread only. */
hl_pubsub *hl_client_pubsub(hilock_client *client);
/* The pub/sub connections to listen to channel on, into out; returns how
 * many, or 0 when memory runs out or the client is closed.  On a cluster
 * with sharded pub/sub, the sharded one to the master of the channel's
 * slot, for a channel shared with Redisson the plain one to that master
 * instead or as well (hilock_options_set_redisson_pubsub); elsewhere the
 * client's pub/sub connection. */
#define HL_CLIENT_MAX_PUBSUBS 2
int hl_client_pubsubs_for(hilock_client *client, const char *channel,
                          size_t len, hl_pubsub *out[HL_CLIENT_MAX_PUBSUBS]);


/* Wrap every call of user code on the loop thread, so a destroy made
 * inside it waits until it returns. */
/* A server answered READONLY: a replica, named by the URL or demoted by
 * a failover.  A cluster or Sentinel client asks where the master is
 * now, as for a connection lost; a client of one server has nowhere else
 * to go.  Loop thread. */
void hl_client_replica_answered(hilock_client *client);
void hl_client_enter_callback(hilock_client *client);
void hl_client_leave_callback(hilock_client *client);

/* The counters of hilock_stats.counters.  Loop thread. */
void hl_client_read_counters(hilock_client *c, hilock_client_stats *out);
/* A lease of c was lost: hilock_client_lost_fd turns readable.  Any
 * thread. */
void hl_client_note_lost(hilock_client *c);

/* Everything of hilock_client_stats_read, size set.  Loop thread. */
void hl_client_read_stats(hilock_client *c, hilock_stats *out);

/* Record a granted acquire that took wait_us, and a hold given back
 * after held_us (negative: not known). */
void hl_client_count_wait(hilock_client *c, int64_t wait_us);
void hl_client_count_hold(hilock_client *c, int64_t held_us);

/* hl_client_event for a command connection of the client going up
 * (HILOCK_EVENT_CONNECTED) or down. */
void hl_client_conn_event(hilock_client *client, const hl_conn *conn,
                          bool up, const char *detail);

/* The spin for an answer over a connection whose answers took rtt_us of
 * late: about twice that plus the hand-over between threads, and none
 * when answers take longer than waiting awake is worth. */
int64_t hl_blocking_spin_for(int64_t rtt_us);
/* The spin for a blocking call on client c: none while its loop thread
 * busy-polls. */
int64_t hl_client_blocking_spin_us(hilock_client *c);
/* How long a blocking call waits for its operation, in µs: the
 * operation's own wait (negative: forever) plus room for its requests.
 * Operations always finish; the limit only guards against a loop thread
 * that stopped answering. */
int64_t hl_blocking_limit_us(const hilock_options *opts, int64_t wait_ms);

#endif
