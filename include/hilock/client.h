/* The client: a few command connections (two by default) and one pub/sub
 * connection to one Redis server, driven by a libev loop that the client
 * runs in its own thread (the default) or that the caller owns
 * (hilock_options_set_loop).  When that server is a Redis Cluster node
 * (found at the first connection), the client also keeps one command
 * connection per master and sends each request to the master of its
 * key's slot (docs/guide/cluster.md).
 *
 * Thread contract.
 * - Sync calls (hilock_client_command, ...) may be made from any thread
 *   except a thread running a loop of the library: the client's own
 *   loop's thread, or any other client's (inside any callback of the
 *   library), where they return HILOCK_EDEADLK, since the loop they
 *   would wait for may be waiting for that one.
 * - Nothing waits on a loop thread: cancels, destroys and settings made
 *   on any client's loop thread hand their work over and return at once
 *   (each function says what it does there).
 * - Async calls may be made from any thread; callbacks always run on the
 *   loop's thread.  Calls made on the loop's thread act at once; calls
 *   from other threads are handed over through a locked queue.
 * - Callback contract: an async call that returns an error never calls its
 *   callback.  One that returns HILOCK_OK calls it exactly once, on the
 *   loop's thread, also when the client is closed first (HILOCK_ECLOSED).
 *   Inside a callback, hilock_last_error() holds the detail of its status. */
#ifndef HILOCK_CLIENT_H
#define HILOCK_CLIENT_H

#include <stddef.h>
#include <stdint.h>

#include "export.h"
#include "options.h"
#include "reply.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct hilock_client hilock_client;

/* Length of a client id without its NUL: a version 4 UUID. */
#define HILOCK_CLIENT_ID_LEN 36

/* Create a client and connect it.
 * With its own loop thread (the default) it waits, at most the connect
 * timeout, until the first connection is ready (TCP, TLS handshake, AUTH,
 * SELECT) and fails if that does not happen.  On the caller's loop it
 * returns at once and connects when the loop runs; requests queue until
 * then.  After the first connection the client reconnects on its own with
 * backoff whenever the connection is lost.
 * With Sentinel, every sentinel is asked at once and has the connect
 * timeout to answer, and the master the first good answer names has the
 * connect timeout to come up: at most twice the connect timeout in all,
 * however many sentinels the options name.  With cluster seeds, each
 * seed that fails costs an attempt and a backoff before the next.
 * @param out   receives the client; NULL on error.
 * @param opts  copied; NULL means the defaults.
 * Blocks (own loop thread only) for at most the connect timeout (see
 * above for Sentinel and seeds).
 * @return HILOCK_OK
 * @return HILOCK_EINVAL     out is NULL or the options are inconsistent;
 *                           also more than HILOCK_MAX_SENTINELS sentinels,
 *                           and (Sentinel) every sentinel knows no master
 *                           of that name
 * @return HILOCK_ENOMEM
 * @return HILOCK_EIO        connection refused, reset or unresolvable host;
 *                           (Sentinel) no sentinel could be reached, or
 *                           the one named is a replica
 * @return HILOCK_EPROTO     (Sentinel) a sentinel answered with anything
 *                           but a host and a port (two bulk strings, the
 *                           port digits in 1..65535), or a reply beyond
 *                           the reply bounds; or the master named answered
 *                           ROLE with anything but a master's reply; the
 *                           detail names the server and what it sent
 * @return HILOCK_ETIMEDOUT  not ready within the connect timeout (over
 *                           TLS, a server that never answers the
 *                           handshake: the detail says it may not speak
 *                           TLS on that port)
 * @return HILOCK_EAUTH      the server refused the user or password
 * @return HILOCK_ETLS       TLS set-up, handshake or verification failed;
 *                           also a ca_file or ca_dir that cannot be read,
 *                           and a server that answers the handshake in
 *                           plaintext (the detail names each)
 * @return HILOCK_EREDIS     the server refused SELECT; (Sentinel) a
 *                           sentinel answered the question with an error
 * @return HILOCK_EPERM      (Sentinel) a sentinel's ACL does not let the
 *                           user ask SENTINEL
 * @return HILOCK_EUNSUPPORTED  the server cannot keep a policy of the
 *                           options: a master with replicas refuses WAIT
 *                           under a replica acknowledgement policy, or
 *                           (fsync=yes) it has no append-only file,
 *                           appendfsync no, refuses CONFIG GET of those
 *                           or WAITAOF; the detail names the server, what
 *                           is missing and the option that goes without
 * @return HILOCK_ERANDOM    the CSPRNG failed: no safe client id
 * @return HILOCK_EDEADLK    with its own loop thread, called on a loop
 *                           thread of the library (inside a callback),
 *                           whose loop the wait would stall */
HILOCK_API int hilock_client_create(hilock_client **out,
                                    const hilock_options *opts);

/* Close a client: every pending request and operation completes with
 * HILOCK_ECLOSED, connections close and the loop thread (if the client owns
 * one) ends.  Later calls on the client return HILOCK_ECLOSED.  Idempotent.
 * May be called from any thread, also inside a callback; from a thread
 * other than the loop's it waits until the loop thread has finished,
 * except on the loop thread of another client (inside any callback of the
 * library), where it never waits: the client's loop thread closes it
 * soon after, and its callbacks may run until then.
 * @return HILOCK_OK
 * @return HILOCK_ECLOSED  closed already, or not a live client (destroyed)
 * @return HILOCK_EINVAL   NULL, or a client on the caller's loop closed
 *                         from another thread */
HILOCK_API int hilock_client_close(hilock_client *client);

/* Close (if needed) and free a client.  Inside a callback the memory is
 * released once the callback returns.  From a thread other than the
 * loop's it waits until the loop thread has finished, except on the loop
 * thread of another client (inside any callback of the library), where
 * it never waits: the client's own loop thread closes and frees it soon
 * after (its callbacks may run until then).  Destroying a handle twice is
 * detected: the second call returns HILOCK_ECLOSED and touches nothing,
 * also with new handles made since, until 64 more handles (of any kind)
 * have been freed; past that it is undefined, as free() twice is.
 * Other calls on a destroyed client are undefined, as for any freed
 * object; a closed but not destroyed client answers HILOCK_ECLOSED.
 * @return HILOCK_OK, HILOCK_ECLOSED (already destroyed), HILOCK_EINVAL (NULL) */
HILOCK_API int hilock_client_destroy(hilock_client *client);

/* The client's id: a random version 4 UUID from OpenSSL's CSPRNG, the
 * first part of every owner id this client writes to Redis.  Owned by the
 * client; valid until it is destroyed.  Any thread. */
HILOCK_API const char *hilock_client_id(const hilock_client *client);

/* The card every client of this library keeps on the server while it
 * runs, for operators asking who holds a lock: the process behind a
 * client id (the first HILOCK_CLIENT_ID_LEN characters of every owner id
 * a client writes, and the ids in a lock's line).  Strings are never
 * NULL ("" when not given); pid is -1 when not given.  Owned by the card;
 * free it with hilock_client_card_free.  See docs/guide/operators.md. */
typedef struct hilock_client_card {
    const char *client_id;
    const char *host;
    int64_t pid;
    const char *program;     /* the process's short name */
    const char *description; /* hilock_options_set_description */
    const char *library;     /* "hilock <version>" */
    /* Leases the client reported lost since it started, as of the card's
     * last writing (every 5 s, and a moment after each loss); -1 when
     * not given. */
    int64_t leases_lost;
    /* Everything the client counted (hilock_client_stats_read), as of the
     * card's last writing; NULL when the card carries none (one of an
     * older version).  hilock_stats_format_prometheus_many prints the
     * stats of many cards as one text. */
    const struct hilock_stats *stats;
    /* How long ago the card was last written, read off its expiry; -1
     * when unknown.  A running client writes it every 5 s: a card not
     * written for much longer is one of a client gone, which lasts a
     * minute after its last writing. */
    int64_t written_ms_ago;
} hilock_client_card;

/* Read the card of the client with client_id through client (on a
 * cluster, from the master of its key's slot).  Blocks; not on a loop
 * thread.  *out is NULL on error.
 * @return HILOCK_OK
 * @return HILOCK_EINVAL    NULL argument, or an id of another length
 * @return HILOCK_ENOTFOUND no card: not a client of this library (a
 *                          Redisson client, say), or one gone for a
 *                          minute, or whose server's ACL refused the card
 * @return HILOCK_EREDIS    the card's key holds another type
 * @return HILOCK_ENOMEM
 * and the connection errors of hilock_client_command. */
HILOCK_API int hilock_client_card_get(hilock_client *client,
                                      const char *client_id,
                                      hilock_client_card **out);

/* Free a card; NULL is fine.  Any thread. */
HILOCK_API void hilock_client_card_free(hilock_client_card *card);

/* When the hold of owner (a holder's owner id, "<client id>:<owner id>",
 * as hilock_lock_status_get gives it) on the lock `name` (name_len
 * bytes) began, from the list of holds each client of this library keeps
 * beside its card (docs/guide/operators.md): *since_ms (may be NULL), in
 * ms since the epoch on the server's clock, and *held_ms (may be NULL),
 * how long it has been held.  The list is written a quarter of a second
 * after a hold begins and every 5 s, with the client's oldest 1,000
 * holds; it costs the acquire nothing.  Blocks; not on a loop thread.
 * Both are -1 on error.
 * @return HILOCK_OK
 * @return HILOCK_EINVAL    NULL client, name or owner, or a name of 0 or
 *                          more than HILOCK_MAX_NAME_LEN bytes
 * @return HILOCK_ENOTFOUND no start listed: a holder of another library
 *                          (Redisson), a hold younger than its client's
 *                          last listing, or a client gone for a minute
 * @return HILOCK_EPROTO    the list holds something that is no age
 * @return HILOCK_ENOMEM
 * and the connection errors of hilock_client_command. */
HILOCK_API int hilock_client_hold_since(hilock_client *client,
                                        const char *name, size_t name_len,
                                        const char *owner, size_t owner_len,
                                        int64_t *since_ms, int64_t *held_ms);

/* What clients of this library used the name as, where the server's data
 * cannot tell (docs/guide/operators.md, "What a name is"): "fair" or
 * "read-write" for a lock granted within a day (one nobody waits for
 * looks like a reentrant lock), "semaphore" or "latch" for a count a
 * client of this library set (the two look alike, and like any integer).
 * *kind is a static string, or NULL when no client of this library left
 * word: a reentrant lock, a name of another library's (Redisson's), or
 * none.  Blocks; not on a loop thread.
 * @return HILOCK_OK
 * @return HILOCK_EINVAL  NULL argument, or a name of 0 or more than
 *                        HILOCK_MAX_NAME_LEN bytes
 * @return HILOCK_EPROTO  the marker's key holds no string
 * @return HILOCK_EREDIS  the server refused the read (an ACL without
 *                        the key, say)
 * @return HILOCK_ENOMEM
 * and the connection errors of hilock_client_command. */
HILOCK_API int hilock_client_name_kind(hilock_client *client,
                                       const char *name, const char **kind);
/* The same for a binary-safe name of name_len bytes. */
HILOCK_API int hilock_client_name_kind_n(hilock_client *client,
                                         const char *name, size_t name_len,
                                         const char **kind);

/* A descriptor that turns readable (POLLIN) when a lease of this client
 * is lost, for a program that polls rather than takes callbacks: read
 * 8 bytes from it (a uint64_t, the losses since the last read) to make
 * it unreadable again, then ask each handle (hilock_lock_lease_lost)
 * which.  An eventfd, non-blocking, made on the first call and the same
 * on every call after; owned by the client, which closes it when
 * destroyed: do not close it.  Losses before the first call are not in
 * it.  Any thread.
 * @return HILOCK_OK
 * @return HILOCK_EINVAL   NULL argument
 * @return HILOCK_ECLOSED  the client is closed
 * @return HILOCK_ENOMEM   no descriptor could be made (EMFILE, ENFILE) */
HILOCK_API int hilock_client_lost_fd(hilock_client *client, int *fd);

/* 1 if the client talks TLS, 0 if not, -1 for NULL.  Any thread. */
HILOCK_API int hilock_client_is_tls(const hilock_client *client);

/* 1 while every command connection is ready, else 0.  Any thread. */
HILOCK_API int hilock_client_is_connected(const hilock_client *client);

/* Completion of an async command.  reply is NULL unless status is
 * HILOCK_OK, HILOCK_EREDIS, HILOCK_EPERM or HILOCK_EREADONLY (then it is
 * the error reply);
 * ownership of the reply passes to the callback, which frees it with
 * hilock_reply_free(). */
typedef void hilock_command_cb(hilock_client *client, int status,
                               hilock_reply *reply, void *user_data);

/* Send one command (binary-safe arguments, copied before the call
 * returns).  Commands issued in one loop iteration leave in one write.
 * On a Redis Cluster the command goes to the master of the slot of its
 * first key: argv[1], or for EVAL, EVALSHA, EVAL_RO, EVALSHA_RO, FCALL
 * and FCALL_RO the first key after numkeys (argv[3]); a command with no
 * argument, a script with no key, and the server commands WAIT, WAITAOF,
 * INFO, PING, ECHO, ROLE, TIME, DBSIZE, CLUSTER, CLIENT, CONFIG, SCRIPT,
 * ACL, COMMAND and FUNCTION go to the seed node.  Keys of
 * other slots in the same command are refused by the server (CROSSSLOT,
 * HILOCK_EREDIS).  MOVED, ASK, TRYAGAIN and CLUSTERDOWN are handled
 * within the command timeout and not seen by the callback, unless they
 * last.
 * The callback gets HILOCK_OK with the reply, HILOCK_EREDIS with an error
 * reply, HILOCK_EPERM with the error reply when the server's ACL refused
 * the command to the user (NOPERM), HILOCK_EREADONLY with the error reply
 * when the server is a replica that refused a write (READONLY; a cluster
 * or Sentinel client then asks where the master is now), HILOCK_ETIMEDOUT
 * after the command
 * timeout, HILOCK_EIO if the connection was lost after the command was
 * written (it may or may not have run), HILOCK_ETOOBIG for a reply beyond
 * the bounds, or HILOCK_ECLOSED.  Commands not yet written survive a reconnect.
 * Any thread; never blocks.
 * @return HILOCK_OK      the callback will fire exactly once
 * argvlen may be NULL for NUL-terminated arguments.
 * @return HILOCK_EINVAL  NULL client or callback, argc < 1, a NULL argument
 * @return HILOCK_ENOMEM
 * @return HILOCK_ECLOSED the client is closed
 * @return HILOCK_EFULL   max_pending operations of the client are
 *                        unfinished (hilock_options_set_max_pending);
 *                        nothing was sent */
HILOCK_API int hilock_client_command_async(hilock_client *client, int argc,
                                           const char *const *argv,
                                           const size_t *argvlen,
                                           hilock_command_cb *cb,
                                           void *user_data);

/* Send one command and wait for its reply (at most the command timeout,
 * plus the reconnect time of commands not yet written).
 * @param reply  receives the reply on HILOCK_OK, HILOCK_EREDIS,
 *               HILOCK_EPERM and HILOCK_EREADONLY, else NULL;
 *               free it with hilock_reply_free().
 * Blocks the calling thread.  Not on the loop's thread, nor on any thread
 * running a loop of the library.  When the loop thread does not answer in
 * time (busy, or a caller's loop not run), the call gives up and leaks
 * nothing: a command not yet written is withdrawn and never runs.
 * @return the statuses of hilock_client_command_async() and of its callback
 * @return HILOCK_EDEADLK    called on the loop's thread, or on the loop
 *                           thread of another client
 * @return HILOCK_ETIMEDOUT  also: the loop thread did not answer in time,
 *                           and the command was withdrawn before it was
 *                           written: it never runs
 * @return HILOCK_EINDOUBT   the loop thread did not answer in time after
 *                           the command was written: it may have run, or
 *                           may still */
HILOCK_API int hilock_client_command(hilock_client *client, int argc,
                                     const char *const *argv,
                                     const size_t *argvlen,
                                     hilock_reply **reply);

/* Counters of a client, for monitoring: the first block of hilock_stats,
 * read with hilock_client_stats_read.  This block never changes; new
 * figures go at the end of hilock_stats, whose size field tells the
 * library how much of it the caller knows. */
typedef struct hilock_client_stats {
    uint64_t leases_active;  /* leases held now (with or without watchdog) */
    uint64_t leases_renewed; /* watchdog renewals confirmed */
    uint64_t leases_lost;    /* leases reported lost */
    uint64_t renew_calls;    /* batched renewal scripts sent */
    uint64_t connects;       /* times a command connection became ready */
    uint64_t writes;         /* write calls on the command connections */
    /* Releases that freed a lock, and semaphore and latch calls that
     * changed a count, but could not wake the waiters, as the server's ACL
     * refused the user the PUBLISH (see hilock_lock_release); waiters on
     * other clients then notice at their next retry. */
    uint64_t publishes_refused;
    /* SUBSCRIBEs to a lock's channel the server's ACL refused: this
     * client's waiters on it are not woken by releases and retry at the
     * lock's ttl instead. */
    uint64_t subscribes_refused;
} hilock_client_stats;

/* Histograms of hilock_stats: the upper bounds of the buckets in µs, the
 * last one open. */
#define HILOCK_STATS_BUCKETS 8
#define HILOCK_STATS_BUCKET_BOUNDS_US                                       \
    {100, 1000, 10000, 100000, 1000000, 10000000, 60000000, INT64_MAX}

/* Everything a client counts, in a struct that may grow: set size to
 * sizeof(hilock_stats) before hilock_client_stats_read, which fills the
 * fields both the caller's and the library's version know. */
typedef struct hilock_stats {
    size_t size;
    hilock_client_stats counters; /* as hilock_client_get_stats */
    /* Now: operations started and not finished, and acquires not
     * finished that have found the lock held at least once. */
    uint64_t ops_pending;
    uint64_t acquires_waiting;
    /* So far: acquires granted, acquires that ran out of wait with the
     * lock held by another (HILOCK_EBUSY), acquires that failed
     * otherwise (cancels included), and holds their owner gave back. */
    uint64_t acquires;
    uint64_t acquires_busy;
    uint64_t acquires_failed;
    uint64_t releases;
    /* Acquires granted, by how long they took from the call (µs), and
     * holds given back with a lease, by how long they were held; bucket
     * i counts those up to HILOCK_STATS_BUCKET_BOUNDS_US[i] and above the
     * bound before it. */
    uint64_t wait_us[HILOCK_STATS_BUCKETS];
    uint64_t hold_us[HILOCK_STATS_BUCKETS];
    uint64_t wait_sum_us; /* the times the histograms count, summed */
    uint64_t hold_sum_us;
    /* Of the acquires granted, those another client's release gave the
     * lock to outright (a direct hand-off, docs/internals/locks.md). */
    uint64_t acquires_handed;
} hilock_stats;

/* Read everything the client counts into out (out->size set by the
 * caller, at least offsetof the counters' end).  Any thread: on the
 * client's loop thread it reads them at once, elsewhere it asks the loop
 * thread and waits briefly (never for a server).  Never blocks a loop: on
 * the loop thread of another client (inside any callback of the
 * library), where waiting for this client's loop could close a cycle of
 * loops waiting on each other, it refuses at once.
 * @return HILOCK_OK
 * @return HILOCK_EINVAL   NULL argument, or out->size too small
 * @return HILOCK_ECLOSED  the client is closed
 * @return HILOCK_EDEADLK  called on the loop thread of another client */
HILOCK_API int hilock_client_stats_read(hilock_client *client,
                                        hilock_stats *out);

/* stats in the Prometheus text format (version 0.0.4), each series
 * labelled client="<label>" (NULL: no label), into buf: counters as
 * hilock_<name>_total, gauges as hilock_<name>, the histograms as
 * hilock_acquire_wait_seconds and hilock_hold_seconds.  *written (may be
 * NULL) gets the length without the NUL, or, when cap is too small, the
 * cap that would do.  Any thread.
 * @return HILOCK_OK
 * @return HILOCK_EINVAL  NULL stats or buf, a label with '"', '\\' or a
 *                        newline, or cap too small (buf then holds "") */
HILOCK_API int hilock_stats_format_prometheus(const hilock_stats *stats,
                                              const char *label, char *buf,
                                              size_t cap, size_t *written);

/* As hilock_stats_format_prometheus, for n clients in one text: each
 * family described once, with every client's series in it, labelled
 * client="labels[i]" (labels NULL, or an entry NULL: no label; two
 * clients should not share one).  n may be 0: the families, no series.
 * @return HILOCK_OK
 * @return HILOCK_EINVAL  NULL stats (or an entry of it) or buf, a label
 *                        with '"', '\\' or a newline, or cap too small */
HILOCK_API int hilock_stats_format_prometheus_many(
    const hilock_stats *const *stats, const char *const *labels, size_t n,
    char *buf, size_t cap, size_t *written);

/* For a client on a caller's loop (hilock_options_set_loop): make the
 * calling thread the client's loop thread, the one that runs the loop
 * (ev_run) from now on.  By default that is the thread that created the
 * client.  A program that creates the client on one thread and runs the
 * loop on another calls this on the running thread, before it runs the
 * loop or from inside one of the client's callbacks; until then the
 * creating thread counts as the loop's, and the running thread's sync
 * calls would not be refused on it.  The loop must run on no other thread
 * from then on.  Afterwards sync calls are refused (HILOCK_EDEADLK) on
 * the new thread and allowed on the old one, and calls that must be made
 * on the loop's thread (hilock_client_close, hilock_client_destroy) are
 * made on the new one.  Never blocks.
 * @return HILOCK_OK
 * @return HILOCK_EINVAL   NULL client, or a client that runs its own loop
 *                         thread
 * @return HILOCK_ECLOSED  the client was destroyed */
HILOCK_API int hilock_client_set_loop_thread(hilock_client *client);

/* The libev loop the client runs on.  Any thread. */
HILOCK_API struct ev_loop *hilock_client_loop(const hilock_client *client);

#ifdef __cplusplus
}
#endif

#endif
