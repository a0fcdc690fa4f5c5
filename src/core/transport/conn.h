/* One connection to one Redis server: non-blocking connect, optional TLS,
 * AUTH/SELECT, pipelined requests with per-request deadlines, bounded
 * replies, and reconnection with backoff.  Loop thread only.
 *
 * Requests not yet written when the connection drops wait for the next
 * connection; requests written but unanswered fail with HILOCK_EIO, since
 * nobody can tell whether the server ran them. */
#ifndef HL_CONN_H
#define HL_CONN_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <ev.h>
#include <openssl/ssl.h>

#include "hilock/reply.h"
#include "core/base/monotime.h"

struct hilock_options;
typedef struct hl_conn hl_conn;
typedef struct hl_script hl_script;

/* Completion of a request: exactly once.  reply (owned by the callee) is
 * set for HILOCK_OK and HILOCK_EREDIS, else NULL. */
typedef void hl_request_fn(void *data, int status, hilock_reply *reply);

typedef enum hl_conn_event {
    HL_CONN_UP,   /* ready: connected, authenticated, db selected */
    HL_CONN_DOWN, /* an attempt failed or a ready connection was lost */
    HL_CONN_PUSH  /* push mode: a reply from the server after HL_CONN_UP */
} hl_conn_event;

/* status and detail describe HL_CONN_DOWN; reply (owned by the callee)
 * comes with HL_CONN_PUSH. */
typedef void hl_conn_event_fn(hl_conn *conn, hl_conn_event event, int status,
                              const char *detail, hilock_reply *reply,
                              void *data);

typedef struct hl_conn_config {
    struct ev_loop *loop;
    const struct hilock_options *opts; /* must outlive the connection */
    SSL_CTX *ssl_ctx;                  /* NULL: plain TCP */
    bool push_mode;       /* pub/sub: replies after UP are pushes */
    /* Push mode has no request to time out: with keepalive, a connection
     * that heard nothing for a third of the watchdog timeout sends a
     * PING, and one that hears nothing for the command timeout after it
     * is reset (HILOCK_ETIMEDOUT). */
    bool keepalive;
    /* Make no attempt until hl_conn_start (the address is not known). */
    bool paused;
    /* Ask ROLE in the handshake and fail the attempt unless the server
     * is a master: Sentinel named it, and it may have been demoted
     * since.  A replica or a sentinel fails it with HILOCK_EIO; a reply
     * of any shape but a master's ("master", offset, replicas) with
     * HILOCK_EPROTO. */
    bool verify_master;
    /* Send ROLE and WAIT 0 0 in the handshake, as the replica
     * acknowledgement policy will send WAIT after every lock write to a
     * master with replicas: a master with replicas that refuses WAIT (a
     * platform that renamed it away, an ACL without it) fails the
     * attempt with HILOCK_EUNSUPPORTED, at once rather than at every
     * acquire's end.  A master without replicas needs no WAIT, and a
     * replica (which refuses it) may still be read: a refusal costs them
     * nothing. */
    bool probe_wait;
    /* Check in the handshake that a master can keep fsync=yes:
     * appendonly yes, appendfsync not no, and WAITAOF known; otherwise
     * fail the attempt with HILOCK_EUNSUPPORTED. */
    bool probe_fsync;
    hl_conn_event_fn *on_event;
    /* Called whenever a request is queued (may be NULL). */
    void (*on_request)(void *data);
    /* Where to publish a moving average of how long answered requests
     * took, in µs, for threads that wait for answers (may be NULL). */
    _Atomic int64_t *rtt_us;
    void *data;
} hl_conn_config;

/* Where a request refused with a cluster redirection goes next.  error is
 * the server's error line ("MOVED 3999 10.0.0.2:6379", "ASK ...").  The
 * hook returns the connection to send the request to, setting *asking
 * when ASKING must go right before it, or NULL to hand the error to the
 * request's callback.  A line it cannot follow (a port out of range, a
 * host no node can have) sets *bad to why, and the request ends with
 * HILOCK_EPROTO and that detail instead.  It also hears of TRYAGAIN and
 * CLUSTERDOWN, which the connection retries itself (its answer is then
 * ignored). */
typedef hl_conn *hl_redirect_fn(void *data, hl_conn *from, const char *error,
                                bool *asking, const char **bad);

/* How many times one request follows a redirection before its callback
 * gets the last error: a slot moves at most once or twice while a
 * request is in flight, and a longer chain means the nodes disagree. */
#define HL_MAX_REDIRECTS 5
/* The first wait before a request refused with TRYAGAIN or CLUSTERDOWN
 * goes again; it doubles with each retry. */
#define HL_RETRY_FIRST_MS 10

/* A request's send gate: a word its caller shares with the connection,
 * so that a caller that gives up can withdraw what was not written yet.
 * The connection moves it to HL_GATE_SENT when it writes a request that
 * carries it, unless it finds HL_GATE_WITHDRAWN: it then drops the
 * request unwritten and completes it with HILOCK_ECANCELED.  Any other
 * value means "not written yet" (HL_GATE_STARTED is the runtime's). */
enum { HL_GATE_OPEN, HL_GATE_STARTED, HL_GATE_SENT, HL_GATE_WITHDRAWN };

/* Requests this thread queues from now on carry gate (NULL: none), until
 * the next call; returns the gate it replaces, to be put back.  Loop
 * thread. */
_Atomic int *hl_conn_gate_requests(_Atomic int *gate);

/* How the owner of a gate stays alive while requests carry it: hold runs
 * when a request takes the gate, drop when that request is freed, which
 * may come after its caller was answered (a sibling request failed
 * first).  Set once, by the layer whose objects hold the gates; any
 * thread. */
void hl_conn_set_gate_owner(void (*hold)(_Atomic int *gate),
                            void (*drop)(_Atomic int *gate));

/* Create and start connecting.  NULL when memory runs out. */
hl_conn *hl_conn_create(const hl_conn_config *cfg);

/* Start the first attempt of a connection created paused; nothing when
 * it was not paused or has started. */
void hl_conn_start(hl_conn *conn);

/* Queue a command (fn NULL: nobody waits for the answer, which is
 * dropped).  Returns HILOCK_OK (fn will be called exactly once),
 * HILOCK_ENOMEM or HILOCK_ECLOSED (fn is not called). */
int hl_conn_command(hl_conn *conn, int argc, const char *const *argv,
                    const size_t *argvlen, hl_request_fn *fn, void *data);

/* The same with a command formatted by hl_format_command(), whose buffer
 * the connection takes over in every case. */
/* The same for a command that goes after every request queued before the
 * connection next writes, including those queued after it: one that
 * covers what the requests before it did (a WAIT covers their writes).
 * One such command waits at a time; queueing the next turns the one
 * before into an ordinary request, behind the requests queued so far. */
int hl_conn_command_last(hl_conn *conn, int argc, const char *const *argv,
                         const size_t *argvlen, hl_request_fn *fn,
                         void *data);
/* Whether the command waiting to go last is fn(data): a request queued
 * now goes before it. */
bool hl_conn_last_is(const hl_conn *conn, hl_request_fn *fn,
                     const void *data);

int hl_conn_command_take(hl_conn *conn, char *cmd, size_t len,
                         hl_request_fn *fn, void *data);

/* The same for an EVALSHA of script: the connection sends SCRIPT LOAD
 * before it when the script is not known to be loaded on it. */
int hl_conn_script_take(hl_conn *conn, const hl_script *script, char *cmd,
                        size_t len, hl_request_fn *fn, void *data);
/* The server forgot its scripts (NOSCRIPT): load each again before use. */
void hl_conn_forget_scripts(hl_conn *conn);

/* Format a command as RESP into a buffer from hl_malloc.  Any thread.
 * HILOCK_OK or HILOCK_ENOMEM. */
int hl_format_command(char **out, size_t *out_len, int argc,
                      const char *const *argv, const size_t *argvlen);

/* Push mode: send a command whose answers arrive as pushes.  Only while
 * up: returns HILOCK_OK, HILOCK_ENOMEM, or HILOCK_EIO when not up (the
 * owner re-sends its state on the next HL_CONN_UP). */
int hl_conn_send(hl_conn *conn, int argc, const char *const *argv,
                 const size_t *argvlen);

/* Let requests follow MOVED and ASK and retry TRYAGAIN and CLUSTERDOWN
 * (cluster mode): from now on the
 * connection keeps each request's bytes until its reply, so that it can
 * send them again elsewhere.  fn NULL turns this off for requests queued
 * later. */
void hl_conn_set_redirect(hl_conn *conn, hl_redirect_fn *fn, void *data);

/* Where a request not yet written should go instead of conn, given its
 * formatted bytes: another connection, or NULL (or conn) to leave it. */
typedef hl_conn *hl_reroute_fn(void *data, const char *cmd, size_t len);

/* Cluster mode, for a connection that is not up (its node may have died
 * and failed over): hand each request it has not written, queued or
 * parked after a refusal, to the connection where names, with a fresh
 * command timeout, as a redirection would.  Requests written already
 * stay: the server may have run them, and they fail with the
 * connection.  A request that reached HL_MAX_REDIRECTS stays too. */
void hl_conn_reroute(hl_conn *conn, hl_reroute_fn *where, void *data);
/* How the scripts run here publish (hl_script_run).  A cluster with
 * sharded pub/sub SPUBLISHes on hilock's own channels (hl_channel_is_own
 * in pubsub.h) and, as hilock_options_set_redisson_pubsub says, with
 * SPUBLISH, PUBLISH or both on the channels it shares with Redisson. */
typedef enum hl_publish {
    HL_PUBLISH_PLAIN,   /* PUBLISH: one server, or a cluster before 7.0 */
    HL_PUBLISH_SHARDED, /* SPUBLISH on every channel */
    HL_PUBLISH_SHARED_PLAIN, /* PUBLISH on shared channels */
    HL_PUBLISH_SHARED_BOTH   /* SPUBLISH and PUBLISH on shared channels */
} hl_publish;
void hl_conn_set_publish(hl_conn *conn, hl_publish how);
hl_publish hl_conn_publish(const hl_conn *conn);

/* Inside the callback of a request the server answered: the connection
 * the answer came on, which differs from the one the request was queued
 * on when a cluster redirected it.  NULL in callbacks for answers no
 * server gave (timeouts, lost connections, close) and outside callbacks.
 * Per thread. */
hl_conn *hl_conn_answering(void);

/* Fail everything pending with status and stop for good; no more events.
 * Safe inside any callback of this connection. */
void hl_conn_close(hl_conn *conn, int status, const char *detail);
/* Close (with HILOCK_ECLOSED) and release; the memory goes once no
 * callback of this connection is running. */
void hl_conn_free(hl_conn *conn);

/* Whether requests wait to be written or answered. */
bool hl_conn_busy(const hl_conn *conn);
/* How long the oldest request written and not yet answered has waited
 * since it was queued; 0 when none waits.  A server that stopped (a
 * paused or cut-off master) shows here long before any timeout. */
hl_monotime hl_conn_unanswered_for(const hl_conn *conn);

/* Counters for tests and the benchmark. */
typedef struct hl_conn_stats {
    uint64_t writes;        /* successful write calls on the socket */
    uint64_t bytes_written;
    uint64_t connects;      /* times the connection became ready */
} hl_conn_stats;
hl_conn_stats hl_conn_get_stats(const hl_conn *conn);

/* Why a WAIT refused by the server (its error words) leaves the
 * replica acknowledgement policy unkept, and the option that accepts
 * less, in out (cut to cap). */
void hl_conn_wait_refusal(const hl_conn *conn, const char *words,
                          char *out, size_t cap);
/* "host:port" of the server the connection is for, in out (cut to cap). */
void hl_conn_address(const hl_conn *conn, char *out, size_t cap);
/* Drop the connection as if the server had closed it (tests, timeouts). */
void hl_conn_reset(hl_conn *conn, int status, const char *detail);
/* The address in the options changed: drop the connection (requests
 * written on it end with status) and connect to the new one now, even
 * from a backoff, which counted the old address's failures. */
void hl_conn_retarget(hl_conn *conn, int status, const char *detail);

/* Pure backoff rule: a delay in [d/2, d], d = min(max, min * 2^attempt);
 * unit01 is a random number in [0, 1). */
hl_monotime hl_backoff_delay(hl_monotime min, hl_monotime max, int attempt,
                             double unit01);

#endif
