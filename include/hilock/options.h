/* Client options: one object with typed setters, copied by
 * hilock_client_create(), so it may be changed or freed afterwards.
 *
 * Thread contract: an options object belongs to the thread using it; it
 * has no internal locking.  Every setter returns HILOCK_OK, or
 * HILOCK_EINVAL for a NULL object or an out-of-range value (the object is
 * then unchanged), or HILOCK_ENOMEM when a string cannot be copied (the
 * object is then unchanged as well).  String setters copy their argument;
 * an empty string is out of range, NULL clears an optional string. */
#ifndef HILOCK_OPTIONS_H
#define HILOCK_OPTIONS_H

#include <stdbool.h>
#include <stdint.h>

#include "export.h"

#ifdef __cplusplus
extern "C" {
#endif

struct ev_loop;

typedef struct hilock_options hilock_options;

/* Defaults (milliseconds unless named otherwise). */
#define HILOCK_DEFAULT_PORT 6379
#define HILOCK_DEFAULT_SENTINEL_PORT 26379
#define HILOCK_DEFAULT_CONNECT_TIMEOUT_MS 2000
#define HILOCK_DEFAULT_COMMAND_TIMEOUT_MS 3000
#define HILOCK_DEFAULT_WATCHDOG_TIMEOUT_MS 30000
#define HILOCK_DEFAULT_WAITER_TIMEOUT_MS 5000
#define HILOCK_DEFAULT_NODE_TIMEOUT_MS 100
#define HILOCK_DEFAULT_REPLICA_ACK_TIMEOUT_MS 1000
#define HILOCK_DEFAULT_RECONNECT_MIN_MS 50
#define HILOCK_DEFAULT_RECONNECT_MAX_MS 5000
#define HILOCK_DEFAULT_MAX_REPLY_BYTES (64u * 1024 * 1024)
#define HILOCK_DEFAULT_MAX_REPLY_ELEMENTS (1024u * 1024)
#define HILOCK_DEFAULT_MAX_REPLY_DEPTH 7
#define HILOCK_DEFAULT_CONNECTIONS 2
#define HILOCK_MAX_CONNECTIONS 16
/* Sentinels one client may name.  Each question goes to all of them at
 * once, over a connection each, so the list is bounded; a longer one is
 * refused (HILOCK_EINVAL), never cut. */
#define HILOCK_MAX_SENTINELS 16

/* Make an options object holding the defaults: host 127.0.0.1, port 6379,
 * no user, no password, db 0, plain TCP, the timeouts above, TLS peer
 * verification on (when TLS is enabled), the client's own loop thread.
 * @param out  receives the object; set to NULL on error.
 * @return HILOCK_OK
 * @return HILOCK_EINVAL  out is NULL
 * @return HILOCK_ENOMEM  */
HILOCK_API int hilock_options_create(hilock_options **out);

/* Deep copy of an options object.
 * @return HILOCK_OK, HILOCK_EINVAL (NULL argument), HILOCK_ENOMEM */
HILOCK_API int hilock_options_copy(hilock_options **out,
                                   const hilock_options *src);

/* Free an options object and its strings.  NULL is ignored. */
HILOCK_API void hilock_options_free(hilock_options *opts);

/* Apply a URL on top of the current values:
 *   redis://[[user]:password@]host[:port][/db][?query]
 *   rediss://...   (the same, with TLS on)
 * valkey://, valkeys://, valkey-sentinel:// and valkeys-sentinel:// are
 * the same as their redis forms.  The scheme is matched without regard to
 * case and sets TLS on or off.
 * host may be a name, an IPv4 address or an IPv6 address in brackets
 * ("[::1]:6380"; stored without the brackets).  The port defaults to 6379
 * when absent: it goes with the host.  Several hosts joined by ','
 * ("redis://10.0.0.1:7000,10.0.0.2:7000") name seed nodes of a Redis
 * Cluster: the client connects to the first and tries the others, in
 * order, while it cannot reach it; each host has its own port.  User
 * info, db and query apply to every host.  A URL with one host, or
 * hilock_options_set_host, replaces the list.  db, when present, is a decimal
 * 0..INT32_MAX; "/" alone or no path keeps the current db.
 * User info, when present, sets both user and password: it must hold a
 * ':' and a non-empty password (":secret@" means the default user).
 * "secret@host" is refused, since clients disagree on whether it names a
 * user or a password; a raw '@' in the user info is refused too.  Without
 * user info, the current user and password are kept.  User, password and
 * query values are percent-decoded ('+' is not a space; %00 is refused),
 * so write '@', ':', '/', '?', '#', '%' and '&' in them as %XX.
 * Query: key=value pairs joined by '&', keys matched exactly; each key at
 * most once and never with an empty value: connect_timeout,
 * command_timeout, watchdog_timeout, max_hold, lock_delay, waiter_timeout,
 * node_timeout, quarantine, ack_timeout (decimal milliseconds),
 * connections (a count), replicas (none|one|majority|all),
 * redisson_pubsub (sharded|plain|both), fsync (yes|no|true|false|1|0,
 * see hilock_options_set_wait_fsync), description
 * (see hilock_options_set_description), and, with
 * a TLS scheme only, ca_file, ca_dir, cert_file, key_file, sni (server name
 * to verify), verify (yes|no|true|false|1|0, any case).
 * Sentinel: "redis-sentinel://[user:password@]host[:port][,host[:port]...]
 * [/db][?query]#master" (or rediss-sentinel:// for TLS everywhere) names
 * the sentinels (port 26379 by default; at most HILOCK_MAX_SENTINELS, 16,
 * and a URL naming more is refused) and, after '#', the master's name
 * (percent-decoded, required); the user info is the data nodes', see
 * hilock_options_set_sentinel_auth for the sentinels'.  Any other scheme
 * turns Sentinel off.
 * Refused as well: bytes outside printable ASCII (percent-encode them), a
 * fragment ('#') except Sentinel's, anything after the parts above, and URLs longer than
 * 8192 bytes.  On error the object is left unchanged and
 * hilock_last_error() says which part of the URL is wrong, without ever
 * quoting the user info.
 * @return HILOCK_OK
 * @return HILOCK_EINVAL  NULL argument or malformed URL
 * @return HILOCK_ENOMEM  */
HILOCK_API int hilock_options_set_url(hilock_options *opts, const char *url);

/* Server address.  host: a name or numeric address, copied, not empty.
 * port: 1..65535. */
HILOCK_API int hilock_options_set_host(hilock_options *opts,
                                       const char *host);
HILOCK_API int hilock_options_set_port(hilock_options *opts, int port);

/* ACL user (NULL for the default user) and password (NULL for none).
 * A user without a password is an error at connect time. */
HILOCK_API int hilock_options_set_user(hilock_options *opts,
                                       const char *user);
HILOCK_API int hilock_options_set_password(hilock_options *opts,
                                           const char *password);

/* Redis Sentinel.  With a master name set, the host (and the other hosts
 * of the URL) name sentinels, at most HILOCK_MAX_SENTINELS of them
 * (hilock_client_create refuses more), and the client connects to the
 * master they name for it (see docs/guide/replicas-and-sentinel.md, "Replicated Redis and
 * Sentinel").  NULL turns Sentinel off.  The URL form
 * redis-sentinel://...#name sets it.
 * @return HILOCK_OK
 * @return HILOCK_EINVAL  NULL options, or an empty name
 * @return HILOCK_ENOMEM */
HILOCK_API int hilock_options_set_sentinel_master(hilock_options *opts,
                                                  const char *name);
HILOCK_API const char *hilock_options_sentinel_master(
    const hilock_options *opts);
/* The sentinels' own ACL user and password, when they require one: the
 * URL's user info is the data nodes'.  user may be NULL (the default
 * user); a user without a password, or an empty one, is refused.
 * password NULL (with user NULL) clears both.
 * @return HILOCK_OK
 * @return HILOCK_EINVAL
 * @return HILOCK_ENOMEM */
HILOCK_API int hilock_options_set_sentinel_auth(hilock_options *opts,
                                                const char *user,
                                                const char *password);

/* Replica acknowledgement: how many of the replicas its master reports a
 * lock write must reach (WAIT) before it counts.  See
 * docs/guide/replicas-and-sentinel.md,
 * "Replicated Redis and Sentinel".  URL: replicas=none|one|majority|all,
 * and ack_timeout (ms, see hilock_options_set_replica_ack_timeout_ms).
 * Default HILOCK_DEFAULT_REPLICA_ACK (majority).  A grant the replicas do
 * not acknowledge is given back and retried within the wait, then fails
 * with HILOCK_ENOACK; an unacknowledged renewal does not extend the
 * lease locally; an unacknowledged release stands.  none sends nothing.
 * @return HILOCK_OK
 * @return HILOCK_EINVAL  NULL options, or a value outside the enum */
typedef enum hilock_replica_ack {
    HILOCK_ACK_NONE = 0,
    HILOCK_ACK_ONE = 1,
    HILOCK_ACK_MAJORITY = 2,
    HILOCK_ACK_ALL = 3
} hilock_replica_ack;
/* The default: a majority of the replicas the master reports, which for
 * the common one or two replicas is all of them, and for none is no WAIT
 * at all.  See docs/guide/replicas-and-sentinel.md
 * for why. */
#define HILOCK_DEFAULT_REPLICA_ACK HILOCK_ACK_MAJORITY
HILOCK_API int hilock_options_set_replica_ack(hilock_options *opts,
                                              hilock_replica_ack ack);
/* The policy, or -1 for a NULL object. */
HILOCK_API int hilock_options_replica_ack(const hilock_options *opts);
/* Which pub/sub the Java (Redisson) clients of a Redis Cluster use on
 * the channels they share with hilock: the reentrant lock's
 * "redisson_lock__channel:{NAME}", a fair lock waiter's channel, the
 * read-write lock's, the semaphores' and the count-down latch's.
 * Redisson shards them (SSUBSCRIBE, SPUBLISH) when its
 * shardedSubscriptionMode is ON, or AUTO (its default) and its probe
 * PUBSUB SHARDNUMSUB works; with OFF, or an ACL that refuses the probe,
 * it SUBSCRIBEs and PUBLISHes, which a sharded client never hears.
 *   sharded  releases announce there with SPUBLISH and waiters listen
 *            with SSUBSCRIBE (the default);
 *   plain    releases PUBLISH there (from their scripts, which every
 *            node relays) and waiters SUBSCRIBE;
 *   both     releases announce both ways and waiters listen both ways,
 *            for a mixed or unknown fleet: one more message per release
 *            and one more subscription per waited channel.
 * hilock's own channels (each client's wake-up channel) stay sharded.
 * Off a cluster, and on a cluster before Redis 7, pub/sub is plain and
 * this changes nothing.  See docs/guide/cluster.md, "Redisson's pub/sub".
 * URL: redisson_pubsub=sharded|plain|both (any case). */
typedef enum hilock_redisson_pubsub {
    HILOCK_REDISSON_PUBSUB_SHARDED = 0,
    HILOCK_REDISSON_PUBSUB_PLAIN = 1,
    HILOCK_REDISSON_PUBSUB_BOTH = 2
} hilock_redisson_pubsub;
#define HILOCK_DEFAULT_REDISSON_PUBSUB HILOCK_REDISSON_PUBSUB_SHARDED
/* Copied into each client the options create; a client's mode does not
 * change once it exists.
 * @return HILOCK_OK
 * @return HILOCK_EINVAL  NULL options, or a value outside the enum */
HILOCK_API int hilock_options_set_redisson_pubsub(
    hilock_options *opts, hilock_redisson_pubsub mode);
/* The mode, or -1 for a NULL object. */
HILOCK_API int hilock_options_redisson_pubsub(const hilock_options *opts);

/* How long a lock write waits for its acknowledgements, 1..86400000 ms
 * (default 1000).
 * @return HILOCK_OK, HILOCK_EINVAL (NULL options or out of range) */
HILOCK_API int hilock_options_set_replica_ack_timeout_ms(hilock_options *opts,
                                                         int64_t ms);
HILOCK_API int64_t hilock_options_replica_ack_timeout_ms(
    const hilock_options *opts);

/* Durability on disk: with on, a lock write counts only once the master
 * has it in its append-only file on disk, and the replicas the replica
 * policy asks for have it in theirs (WAITAOF, Redis 7.2 and later, in
 * place of WAIT), within the ack timeout; short, it is treated as a
 * write the replicas did not acknowledge (HILOCK_ENOACK).  Each
 * connection checks first that the master can keep it: appendonly yes,
 * appendfsync not no (under which WAITAOF cannot complete), CONFIG GET
 * allowed to read those, and WAITAOF known; otherwise
 * hilock_client_create fails with HILOCK_EUNSUPPORTED, naming what is
 * missing.  URL: fsync=yes|no.  Default off.  See
 * docs/guide/replicas-and-sentinel.md.
 * @return HILOCK_OK, HILOCK_EINVAL (NULL options) */
HILOCK_API int hilock_options_set_wait_fsync(hilock_options *opts, bool on);
/* 1 when on, 0 when off, -1 for a NULL object. */
HILOCK_API int hilock_options_wait_fsync(const hilock_options *opts);

/* Database number, 0..INT32_MAX; SELECTed after each connect when not 0. */
HILOCK_API int hilock_options_set_db(hilock_options *opts, int db);

/* Timeouts in milliseconds, each 1..86400000.
 * connect: TCP connect, TLS handshake and AUTH/SELECT together.
 * command: from submitting a request to its reply.  A request still queued
 *   (not yet written because the client is disconnected) fails with
 *   HILOCK_ETIMEDOUT when it expires; a request already written whose reply
 *   is late fails with HILOCK_ETIMEDOUT and the connection is reset, since
 *   every reply behind it is late as well.
 * watchdog: the lease time the watchdog keeps renewing (renewal every
 *   third of it).  A pub/sub connection that heard nothing for a third of
 *   it (at least 100 ms) sends a PING, and is replaced when the command
 *   timeout passes with no answer. */
HILOCK_API int hilock_options_set_connect_timeout_ms(hilock_options *opts,
                                                     int64_t ms);
HILOCK_API int hilock_options_set_command_timeout_ms(hilock_options *opts,
                                                     int64_t ms);
HILOCK_API int hilock_options_set_watchdog_timeout_ms(hilock_options *opts,
                                                      int64_t ms);

/* Cap on how long the watchdog keeps one hold alive: once a lease has
 * been held this long it is no longer renewed, runs out (at most one
 * watchdog timeout later), and is reported lost, the reason (the lost
 * event's detail, hilock run's message) naming the cap.  A holder that
 * hangs cannot keep the lock for ever, as the Redlock design advises for
 * liveness.  0 (the default) renews until release; else 1..86400000.
 * URL query key: max_hold; hilock run --max-hold. */
HILOCK_API int hilock_options_set_max_hold_ms(hilock_options *opts,
                                              int64_t ms);
HILOCK_API int64_t hilock_options_max_hold_ms(const hilock_options *opts);

/* Lock delay, as Consul has it: after a hold of this client's ends
 * without a release (its lease ran out, its process died, an operator
 * forced it open), the lock stays closed to every hilock client for this
 * long, so that an old holder that was paused or cut off has stopped
 * before a new one starts.  A clean release opens it at once.  Holders
 * keep "hilock_lock_delay:{NAME}" alive for their lease plus the delay;
 * every acquire of a reentrant or fair lock (so of a multi-lock or
 * RedLock) refuses while the lock is free and that key exists, whether or
 * not its own client sets a delay: a single try fails with HILOCK_EBUSY,
 * a waiting one tries again when the delay ends.  Read-write locks and
 * semaphores ignore it.  It binds hilock clients only, and assumes pauses
 * no longer than the delay (docs/guide/lock-delay.md).  0 (the default)
 * is off; else 1..3600000.  URL query key: lock_delay; hilock run
 * --lock-delay.
 * @return HILOCK_OK
 * @return HILOCK_EINVAL  NULL options, or ms negative or above 3600000 */
HILOCK_API int hilock_options_set_lock_delay_ms(hilock_options *opts,
                                                int64_t ms);
/* The lock delay in ms (0: off), or -1 for a NULL object. */
HILOCK_API int64_t hilock_options_lock_delay_ms(const hilock_options *opts);

/* How long a waiter's place stays reserved without a sign of life, in
 * ms, 100..3600000 (default 5000).  A waiter queued in a fair lock, or a
 * writer waiting for a read-write lock (which holds new readers back),
 * confirms its place every third of this; a waiter that stops (its
 * process died, its connection is gone) is passed over once this much
 * time has gone by on the server's clock.  URL query key:
 * waiter_timeout. */
HILOCK_API int hilock_options_set_waiter_timeout_ms(hilock_options *opts,
                                                    int64_t ms);
HILOCK_API int64_t hilock_options_waiter_timeout_ms(
    const hilock_options *opts);

/* How many operations of a client may be unfinished at once: every
 * async call's until its callback has run, every blocking call's until
 * it returns, a waiting acquire's for as long as it waits.  A call past
 * it fails at once with HILOCK_EFULL and starts nothing, so a server
 * that stops answering cannot make the client's queues grow without
 * bound.  The library's own traffic (lease renewals, reconciles) is not
 * counted.  1..HILOCK_MAX_PENDING_LIMIT (default
 * HILOCK_DEFAULT_MAX_PENDING).  URL query key: max_pending. */
#define HILOCK_DEFAULT_MAX_PENDING 100000
#define HILOCK_MAX_PENDING_LIMIT 100000000
HILOCK_API int hilock_options_set_max_pending(hilock_options *opts,
                                              int64_t max);
HILOCK_API int64_t hilock_options_max_pending(const hilock_options *opts);

/* RedLock only (see multi.h).  node: each master's command timeout, small
 * next to the lease so that a stalled master costs little of it;
 * 1..86400000 (default 100).  quarantine: how long a master that
 * restarted does not vote, and how long a master must have been up before
 * it votes at all; at least the longest lease you take.  0 (the default)
 * means the watchdog timeout; else 1..86400000.  URL query keys:
 * node_timeout, quarantine. */
HILOCK_API int hilock_options_set_node_timeout_ms(hilock_options *opts,
                                                  int64_t ms);
HILOCK_API int64_t hilock_options_node_timeout_ms(const hilock_options *opts);
HILOCK_API int hilock_options_set_quarantine_ms(hilock_options *opts,
                                                int64_t ms);
HILOCK_API int64_t hilock_options_quarantine_ms(const hilock_options *opts);

/* Command connections, 1..HILOCK_MAX_CONNECTIONS (default 2).  A lock's
 * requests always use the same connection (chosen by its name), so they
 * keep their order; raw commands use the first.  With two, the server
 * works on one connection's batch while the client answers the other's,
 * which keeps both busy.  URL query key: connections. */
HILOCK_API int hilock_options_set_connections(hilock_options *opts, int n);
HILOCK_API int hilock_options_connections(const hilock_options *opts);

/* Busy polling of the loop thread, -1..1000000 µs.  Waking a sleeping
 * thread costs tens of microseconds on many machines, more than a round
 * trip to a nearby Redis.
 * - 0 (the default): after a request made on the loop thread (from a
 *   callback), the loop thread stays awake for about twice the
 *   connection's recent round trip plus 30 µs while the answer is
 *   outstanding; not while a blocking caller waits (it waits awake for
 *   its own answer instead), nor within 1 ms of running what other
 *   threads asked for, and not at all when answers take longer than
 *   300 µs.  An async caller chaining its calls then gets its answers as
 *   fast as a blocking one; an idle client costs nothing.
 * - n > 0: the loop thread does not sleep while requests are outstanding,
 *   nor for n µs after the last answer: a core's worth of CPU while busy,
 *   for latency.
 * - -1: the loop thread always sleeps until something arrives.
 * A RedLock's clients take -1 when this is left at 0, and blocking
 * callers of its locks sleep rather than spin: its loop waits for every
 * master at once.
 * Values below -1 or above 1000000 are refused with HILOCK_EINVAL. */
HILOCK_API int hilock_options_set_busy_poll_us(hilock_options *opts,
                                               int64_t us);
HILOCK_API int64_t hilock_options_busy_poll_us(const hilock_options *opts);

/* Reconnect backoff: the n-th consecutive failed attempt waits a random
 * time in [d/2, d] with d = min(max_ms, min_ms * 2^n).
 * 1 <= min_ms <= max_ms <= 3600000. */
HILOCK_API int hilock_options_set_reconnect_backoff_ms(hilock_options *opts,
                                                       int64_t min_ms,
                                                       int64_t max_ms);

/* Bounds on one reply: total bytes buffered for an incomplete reply
 * (1 KiB..4 GiB), elements of one array (1..INT32_MAX), array nesting depth
 * (1..7).  A reply beyond them fails with HILOCK_ETOOBIG and the
 * connection is reset; the process is never exposed to it.  Besides,
 * one line of a reply (a status, an error, an integer, a length header)
 * is at most 64 KiB, ended or not, whatever the byte bound. */
HILOCK_API int hilock_options_set_max_reply_bytes(hilock_options *opts,
                                                  uint64_t bytes);
HILOCK_API int hilock_options_set_max_reply_elements(hilock_options *opts,
                                                     int64_t elements);
HILOCK_API int hilock_options_set_max_reply_depth(hilock_options *opts,
                                                  int depth);

/* TLS, off by default.  Files and directory are copied paths (NULL
 * clears).  ca_file/ca_dir: trust anchors; with neither, the system's
 * default store.  They are checked when a client is created: one that
 * cannot be read fails it with HILOCK_ETLS, naming the path.  cert_file/key_file: client certificate and key (both or
 * neither).  server_name: the name sent as SNI and checked against the
 * server certificate; defaults to the host.  verify: true (default)
 * verifies the peer certificate and its name; false turns both off (for
 * tests only). */
HILOCK_API int hilock_options_set_tls(hilock_options *opts, bool enable);
HILOCK_API int hilock_options_set_tls_ca_file(hilock_options *opts,
                                              const char *path);
HILOCK_API int hilock_options_set_tls_ca_dir(hilock_options *opts,
                                             const char *path);
HILOCK_API int hilock_options_set_tls_cert_file(hilock_options *opts,
                                                const char *path);
HILOCK_API int hilock_options_set_tls_key_file(hilock_options *opts,
                                               const char *path);
HILOCK_API int hilock_options_set_tls_server_name(hilock_options *opts,
                                                  const char *name);
HILOCK_API int hilock_options_set_tls_verify(hilock_options *opts,
                                             bool verify);

/* A description of this process for operators, on the client's card
 * (hilock_client_card_get, `hilock status`): what it does with its
 * locks, as "nightly billing close".  At most HILOCK_DESCRIPTION_MAX
 * bytes, no control characters; NULL clears.  URL key: description.
 * @return HILOCK_OK, HILOCK_ENOMEM
 * @return HILOCK_EINVAL  NULL options, empty, too long, or a control
 *                        character */
#define HILOCK_DESCRIPTION_MAX 200
HILOCK_API int hilock_options_set_description(hilock_options *opts,
                                              const char *text);

/* Run the client on the caller's libev loop instead of its own thread.
 * The client then never blocks: sync calls return HILOCK_EDEADLK when made
 * on the loop's thread, and the loop's thread is the one that called
 * hilock_client_create(), unless another thread takes the loop over with
 * hilock_client_set_loop_thread().  NULL restores the default (own loop
 * thread).  The client's socket watchers have libev's highest priority
 * (EV_MAXPRI): in a turn of the loop that finds both ready, the client
 * reads its answers before its timers, and before the loop's other
 * watchers of lower priority, judge them late. */
HILOCK_API int hilock_options_set_loop(hilock_options *opts,
                                       struct ev_loop *loop);

/* Read back values (for diagnostics and tests).  Strings are owned by the
 * object; NULL when unset.  A NULL object reads as NULL or -1. */
HILOCK_API const char *hilock_options_host(const hilock_options *opts);
HILOCK_API int hilock_options_port(const hilock_options *opts);
HILOCK_API const char *hilock_options_user(const hilock_options *opts);
/* Whether a password is set: 1 or 0 (-1 for a NULL object).  No call
 * reads the password back, so that no diagnostic can print it. */
HILOCK_API int hilock_options_has_password(const hilock_options *opts);
HILOCK_API int hilock_options_db(const hilock_options *opts);
HILOCK_API int hilock_options_tls(const hilock_options *opts);
HILOCK_API int hilock_options_tls_verify(const hilock_options *opts);
HILOCK_API const char *hilock_options_tls_ca_file(const hilock_options *opts);
HILOCK_API const char *hilock_options_tls_ca_dir(const hilock_options *opts);
HILOCK_API const char *hilock_options_tls_cert_file(
    const hilock_options *opts);
HILOCK_API const char *hilock_options_tls_key_file(const hilock_options *opts);
HILOCK_API const char *hilock_options_tls_server_name(
    const hilock_options *opts);
HILOCK_API const char *hilock_options_description(const hilock_options *opts);
HILOCK_API int64_t hilock_options_connect_timeout_ms(
    const hilock_options *opts);
HILOCK_API int64_t hilock_options_command_timeout_ms(
    const hilock_options *opts);
HILOCK_API int64_t hilock_options_watchdog_timeout_ms(
    const hilock_options *opts);

#ifdef __cplusplus
}
#endif

#endif
