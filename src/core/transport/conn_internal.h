/* The connection's parts, shared between its files: the state, the
 * request queues, and the steps one part asks of another.  Nothing
 * outside src/core/transport/conn*.c includes it. */
#ifndef HL_CONN_INTERNAL_H
#define HL_CONN_INTERNAL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "core/transport/conn.h"
#include "core/base/alloc.h"
#include "core/base/buf.h"
#include "core/base/error_detail.h"
#include "core/loop/io.h"
#include "core/config/option_values.h"
#include "core/transport/reply.h"
#include "core/transport/resolve.h"
#include "core/transport/resp.h"
#include "core/transport/script.h"
#include "core/transport/stream.h"

typedef enum conn_state {
    ST_BACKOFF,    /* waiting before the next attempt */
    ST_RESOLVING,  /* host name lookup in its thread */
    ST_CONNECTING, /* TCP connect in progress */
    ST_TLS,        /* TLS handshake */
    ST_HELLO,      /* AUTH / SELECT / PING in flight */
    ST_UP,
    ST_CLOSED
} conn_state;

typedef struct hl_request hl_request;
struct hl_request {
    hl_request *next;
    char *cmd; /* formatted RESP, until it moves to the output buffer */
    size_t len;
    hl_monotime deadline;
    hl_monotime queued_at;
    hl_request_fn *fn;
    void *data;
    const hl_script *script; /* an EVALSHA of it, or NULL */
    bool internal; /* part of the connection handshake */
    bool asking;   /* ASKING goes right before it */
    unsigned char redirects; /* redirections followed so far */
    unsigned char retries;   /* TRYAGAIN / CLUSTERDOWN retries so far */
    hl_monotime retry_until; /* its first deadline: no retry after it */
    hl_monotime not_before;  /* parked: when to send it again */
    _Atomic int *gate;       /* its caller's send gate, or NULL */
};

/* Let go of r's gate (hl_conn_set_gate_owner) before r is freed. */
void hl_request_drop_gate(hl_request *r);

typedef struct req_queue {
    hl_request *head;
    hl_request *tail;
} req_queue;

/* What a node told the handshake's ROLE it is. */
typedef enum hl_hello_role {
    HL_ROLE_UNKNOWN, /* not asked, refused, or an answer of no shape */
    HL_ROLE_MASTER,
    HL_ROLE_OTHER /* a replica, or a sentinel */
} hl_hello_role;

struct hl_conn {
    hl_conn_config cfg;
    int64_t rtt_us; /* published to cfg.rtt_us */
    const hilock_options *o;
    conn_state state;
    int refs;      /* callbacks running, plus one for the owner */
    bool freed;    /* the owner let go; free when refs reach zero */
    unsigned epoch; /* bumped each time a socket is torn down */

    hl_io io;
    hl_io resolve_io;
    hl_timer attempt_timer; /* connect deadline, or backoff wait */
    hl_timer request_timer; /* earliest request deadline */
    hl_timer keepalive_timer;
    hl_prepare flusher;

    hl_resolve *resolving;
    struct addrinfo *addrs;
    struct addrinfo *addr_next;
    hl_stream stream;
    int tls_retry_len; /* length of an SSL_write to repeat, or 0 */
    bool read_wants_write;

    redisReader *reader;
    hl_reply_limits limits;
    hl_buf out;
    req_queue pending; /* not yet in the output buffer */
    req_queue sent;    /* in the output buffer or on the wire */
    req_queue parked;  /* refused for now by a cluster: sent again later */
    /* Goes after pending when the connection writes, however many are
     * queued meanwhile (hl_conn_command_last); also owned by the queues'
     * tear-down and deadlines. */
    hl_request *last;
    hl_timer retry_timer; /* the earliest parked request's time */
    int hello_left;
    bool hello_answered; /* the server answered a handshake command */
    /* Replicas the handshake's ROLE listed, -1 when not asked or not a
     * master's answer. */
    int hello_replicas;
    hl_hello_role hello_role; /* what the handshake's ROLE said */

    hl_redirect_fn *redirect; /* cluster mode: keep cmd until the reply */
    hl_publish publish;
    bool started; /* not paused, or hl_conn_start was called */
    void *redirect_data;

    hl_conn_stats stats;
    uint64_t heard;          /* whole replies read, ever */
    uint64_t heard_at_check; /* heard at the keepalive's last look */
    bool ping_out;           /* the keepalive's PING is unanswered */
    /* Bits of hl_script.index: the scripts loaded on this socket. */
    uint64_t scripts_loaded[HL_SHA_SCRIPTS / 64];
    int attempt; /* consecutive failed attempts */
    uint64_t rng;
    char err[256];
};

static inline void queue_push(req_queue *q, hl_request *r)
{
    r->next = NULL;
    if (q->tail)
        q->tail->next = r;
    else
        q->head = r;
    q->tail = r;
}

static inline void queue_push_front(req_queue *q, hl_request *r)
{
    r->next = q->head;
    q->head = r;
    if (q->tail == NULL)
        q->tail = r;
}

static inline hl_request *queue_pop(req_queue *q)
{
    hl_request *r = q->head;
    if (r) {
        q->head = r->next;
        if (q->head == NULL)
            q->tail = NULL;
    }
    return r;
}

/* its life: tear-down, reconnection, events (conn.c) */
void hl_conn_complete(hl_request *r, int status, hilock_reply *reply,
                      const char *detail);
void hl_conn_drop(hl_conn *c, int status, const char *detail);
void hl_conn_emit(hl_conn *c, hl_conn_event ev, int status,
                  const char *detail, hilock_reply *reply);
void hl_conn_unref(hl_conn *c);

/* connect, TLS, hello, keepalive (conn_handshake.c) */
void hl_conn_attempt_start(hl_conn *c);
void hl_conn_connect_finished(hl_conn *c);
void hl_conn_connected(hl_conn *c);
void hl_conn_on_attempt_timer(hl_timer *t);
void hl_conn_on_keepalive(hl_timer *t);
void hl_conn_on_resolved(hl_io *io, int revents);
int hl_conn_stream_failure_status(hl_conn *c, ssize_t n);
void hl_conn_tls_step(hl_conn *c);
/* Queue a handshake command whose answer goes to fn(c, ...), which must
 * end with hl_conn_hello_reply or drop the connection.  0, or -1 when
 * out of memory. */
int hl_conn_hello_send(hl_conn *c, int argc, const char *const *argv,
                       hl_request_fn *fn);
/* A handshake answer: an error fails the connection, the last answer
 * brings it up. */
void hl_conn_hello_reply(void *c, int status, hilock_reply *reply);
/* What is wrong with a ROLE reply for a master, into why; false when it
 * is a master's. */
bool hl_conn_role_not_master(const hilock_reply *r, char *why, size_t cap);

/* the handshake's probes of what the policies need (conn_probe.c):
 * queue them, with a ROLE of their own when send_role.  0, or -1 when
 * out of memory. */
int hl_conn_probe_send(hl_conn *c, bool send_role);

/* requests: formatting, queueing, deadlines, round trips (conn_requests.c) */
void hl_conn_arm_request_timer(hl_conn *c);
/* Put the request waiting to go last at the tail of pending. */
void hl_conn_settle_last(hl_conn *c);
int hl_conn_format_request(hl_request **out, int argc,
                           const char *const *argv, const size_t *argvlen);
void hl_conn_note_rtt(hl_conn *c, hl_monotime took);
void hl_conn_on_request_timer(hl_timer *t);
/* Send an answered request again on to (a cluster redirection); false
 * when it cannot be queued there, and r is still the caller's. */
bool hl_conn_requeue(hl_conn *to, hl_request *r, bool asking);
/* Send r again on c after delay (after an ASKING again, if it had one),
 * if that is still before its first deadline; false (r still the
 * caller's) when it is not. */
bool hl_conn_park(hl_conn *c, hl_request *r, hl_monotime delay);
void hl_conn_on_retry_timer(hl_timer *t);

/* the I/O pump: writing and reading (conn_pump.c) */
void hl_conn_flush(hl_conn *c);
void hl_conn_on_io(hl_io *io, int revents);
void hl_conn_on_prepare(hl_prepare *p);
void hl_conn_read_all(hl_conn *c);

#endif
