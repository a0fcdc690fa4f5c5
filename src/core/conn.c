#include "conn.h"

#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <openssl/rand.h>

#include "alloc.h"
#include "buf.h"
#include "error_detail.h"
#include "io.h"
#include "options_internal.h"
#include "reply.h"
#include "resolve.h"
#include "resp.h"
#include "script.h"
#include "stream.h"

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
};

typedef struct req_queue {
    hl_request *head;
    hl_request *tail;
} req_queue;

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
    int hello_left;
    bool hello_answered; /* the server answered a handshake command */
    hl_server_identity identity; /* from the last handshake, if asked */

    hl_conn_stats stats;
    uint64_t scripts_loaded; /* bits of hl_script.index, this socket */
    int attempt; /* consecutive failed attempts */
    uint64_t rng;
    char err[256];
};

/* ---- small helpers ---------------------------------------------------- */

static void queue_push(req_queue *q, hl_request *r)
{
    r->next = NULL;
    if (q->tail)
        q->tail->next = r;
    else
        q->head = r;
    q->tail = r;
}

static void queue_push_front(req_queue *q, hl_request *r)
{
    r->next = q->head;
    q->head = r;
    if (q->tail == NULL)
        q->tail = r;
}

static hl_request *queue_pop(req_queue *q)
{
    hl_request *r = q->head;
    if (r) {
        q->head = r->next;
        if (q->head == NULL)
            q->tail = NULL;
    }
    return r;
}

static double rng_unit(hl_conn *c)
{
    /* splitmix64: jitter needs spread, not secrecy. */
    uint64_t z = (c->rng += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    z ^= z >> 31;
    return (double)(z >> 11) / 9007199254740992.0;
}

hl_monotime hl_backoff_delay(hl_monotime min, hl_monotime max, int attempt,
                             double unit01)
{
    hl_monotime d = min;
    for (int i = 0; i < attempt && d < max; i++)
        d *= 2;
    if (d > max)
        d = max;
    return d / 2 + (hl_monotime)((double)(d - d / 2) * unit01);
}

/* An average over about the last eight answers: recent enough to follow
 * a change of load, steady enough to ignore one slow answer. */
static void note_rtt(hl_conn *c, hl_monotime took)
{
    int64_t avg = c->rtt_us == 0 ? took : c->rtt_us + (took - c->rtt_us) / 8;
    c->rtt_us = avg > 0 ? avg : 1;
    if (c->cfg.rtt_us)
        atomic_store_explicit(c->cfg.rtt_us, c->rtt_us,
                              memory_order_relaxed);
}

static void complete(hl_request *r, int status, hilock_reply *reply,
                     const char *detail)
{
    if (status != 0)
        hl_set_detail(detail);
    else
        hl_clear_detail();
    if (r->fn)
        r->fn(r->data, status, reply);
    else
        hilock_reply_free(reply);
    hl_free(r->cmd);
    hl_free(r);
}

static void fail_queue(req_queue *q, int status, const char *detail)
{
    hl_request *r;
    while ((r = queue_pop(q)) != NULL) {
        if (r->internal) {
            hl_free(r->cmd);
            hl_free(r);
            continue;
        }
        complete(r, status, NULL, detail);
    }
}

static void conn_unref(hl_conn *c)
{
    if (--c->refs > 0)
        return;
    hl_buf_free(&c->out);
    hl_free(c);
}

static void conn_emit(hl_conn *c, hl_conn_event ev, int status,
                      const char *detail, hilock_reply *reply)
{
    if (c->cfg.on_event && !c->freed)
        c->cfg.on_event(c, ev, status, detail, reply, c->cfg.data);
    else
        hilock_reply_free(reply);
}

/* ---- tear-down and reconnection -------------------------------------- */

static void attempt_start(hl_conn *c);
static void arm_request_timer(hl_conn *c);

static void close_socket(hl_conn *c)
{
    c->epoch++;
    hl_io_clear(&c->io);
    hl_io_clear(&c->resolve_io);
    if (c->resolving) {
        hl_resolve_cancel(c->resolving);
        c->resolving = NULL;
    }
    if (c->addrs) {
        freeaddrinfo(c->addrs);
        c->addrs = c->addr_next = NULL;
    }
    hl_stream_close(&c->stream);
    c->tls_retry_len = 0;
    c->read_wants_write = false;
    if (c->reader) {
        redisReaderFree(c->reader);
        c->reader = NULL;
    }
    c->limits.bytes_so_far = 0;
    c->limits.violated = 0;
    hl_buf_reset(&c->out);
    hl_prepare_stop(&c->flusher);
    c->scripts_loaded = 0;
}

/* The socket is gone (or never came): fail what was written, tell the
 * owner, and come back after a backoff. */
static void conn_drop(hl_conn *c, int status, const char *detail)
{
    if (c->state == ST_CLOSED)
        return;
    char why[sizeof c->err];
    snprintf(why, sizeof why, "%s", detail ? detail : "");
    close_socket(c);
    c->state = ST_BACKOFF;
    hl_monotime delay = hl_backoff_delay(HL_MS(c->o->reconnect_min_ms),
                                         HL_MS(c->o->reconnect_max_ms),
                                         c->attempt, rng_unit(c));
    if (c->attempt < 30)
        c->attempt++;
    hl_timer_arm(&c->attempt_timer, delay);
    fail_queue(&c->sent, status == HILOCK_ETIMEDOUT ? status : HILOCK_EIO,
               why);
    if (c->state != ST_CLOSED)
        conn_emit(c, HL_CONN_DOWN, status, why, NULL);
}

void hl_conn_reset(hl_conn *c, int status, const char *detail)
{
    if (c->state != ST_BACKOFF)
        conn_drop(c, status, detail);
}

/* ---- connect, TLS, hello --------------------------------------------- */

static void hello_start(hl_conn *c);
static void flush(hl_conn *c);
static void read_all(hl_conn *c);

static void tls_step(hl_conn *c)
{
    int r = hl_stream_handshake(&c->stream, c->err, sizeof c->err);
    if (r == 0) {
        hello_start(c);
        return;
    }
    if (r == HL_STREAM_WANT_READ || r == HL_STREAM_WANT_WRITE) {
        hl_io_want_read(&c->io, r == HL_STREAM_WANT_READ);
        hl_io_want_write(&c->io, r == HL_STREAM_WANT_WRITE);
        return;
    }
    conn_drop(c, HILOCK_ETLS, c->err);
}

static void connected(hl_conn *c)
{
    if (c->addrs) {
        freeaddrinfo(c->addrs);
        c->addrs = c->addr_next = NULL;
    }
    if (c->cfg.ssl_ctx == NULL) {
        hello_start(c);
        return;
    }
    const char *name =
        c->o->tls_server_name ? c->o->tls_server_name : c->o->host;
    if (hl_stream_tls_begin(&c->stream, c->cfg.ssl_ctx, name,
                            c->o->tls_verify, c->err, sizeof c->err) != 0) {
        conn_drop(c, HILOCK_ETLS, c->err);
        return;
    }
    c->state = ST_TLS;
    tls_step(c);
}

static void connect_next(hl_conn *c)
{
    char last[160] = "no address";
    while (c->addr_next != NULL) {
        struct addrinfo *a = c->addr_next;
        c->addr_next = a->ai_next;
        int fd = socket(a->ai_family,
                        a->ai_socktype | SOCK_NONBLOCK | SOCK_CLOEXEC,
                        a->ai_protocol);
        if (fd < 0) {
            snprintf(last, sizeof last, "socket: %s", strerror(errno));
            continue;
        }
        int one = 1;
        setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
        setsockopt(fd, SOL_SOCKET, SO_KEEPALIVE, &one, sizeof one);
        c->stream.fd = fd;
        hl_io_set_fd(&c->io, fd);
        if (connect(fd, a->ai_addr, a->ai_addrlen) == 0) {
            connected(c);
            return;
        }
        if (errno == EINPROGRESS) {
            c->state = ST_CONNECTING;
            hl_io_want_write(&c->io, true);
            return;
        }
        snprintf(last, sizeof last, "connect to %s:%d: %s", c->o->host,
                 c->o->port, strerror(errno));
        hl_io_clear(&c->io);
        hl_stream_close(&c->stream);
    }
    conn_drop(c, HILOCK_EIO, last);
}

static void connect_finished(hl_conn *c)
{
    int err = 0;
    socklen_t len = sizeof err;
    if (getsockopt(c->stream.fd, SOL_SOCKET, SO_ERROR, &err, &len) < 0)
        err = errno;
    if (err == 0) {
        hl_io_want_write(&c->io, false);
        connected(c);
        return;
    }
    snprintf(c->err, sizeof c->err, "connect to %s:%d: %s", c->o->host,
             c->o->port, strerror(err));
    hl_io_clear(&c->io);
    hl_stream_close(&c->stream);
    if (c->addr_next != NULL) {
        connect_next(c);
        return;
    }
    conn_drop(c, HILOCK_EIO, c->err);
}

static void on_resolved(hl_io *io, int revents)
{
    hl_conn *c = io->data;
    (void)revents;
    hl_io_clear(&c->resolve_io);
    hl_resolve *r = c->resolving;
    c->resolving = NULL;
    int status = hl_resolve_finish(r, &c->addrs);
    if (status != 0) {
        snprintf(c->err, sizeof c->err, "cannot resolve %s: %s", c->o->host,
                 gai_strerror(status));
        conn_drop(c, HILOCK_EIO, c->err);
        return;
    }
    c->addr_next = c->addrs;
    connect_next(c);
}

static void attempt_start(hl_conn *c)
{
    c->reader = hl_reader_create(&c->limits);
    if (c->reader == NULL) {
        conn_drop(c, HILOCK_ENOMEM, "out of memory for the reply reader");
        return;
    }
    hl_timer_arm(&c->attempt_timer, HL_MS(c->o->connect_timeout_ms));
    if (hl_resolve_numeric(c->o->host, c->o->port, &c->addrs) == 0) {
        c->addr_next = c->addrs;
        connect_next(c);
        return;
    }
    int fd = -1;
    c->resolving = hl_resolve_start(c->o->host, c->o->port, &fd);
    if (c->resolving == NULL) {
        conn_drop(c, HILOCK_ENOMEM, "cannot start host name resolution");
        return;
    }
    c->state = ST_RESOLVING;
    hl_io_set_fd(&c->resolve_io, fd);
    hl_io_want_read(&c->resolve_io, true);
}

static void on_attempt_timer(hl_timer *t)
{
    hl_conn *c = t->data;
    c->refs++;
    if (c->state == ST_BACKOFF) {
        attempt_start(c);
    } else if (c->state != ST_UP && c->state != ST_CLOSED) {
        snprintf(c->err, sizeof c->err,
                 "%s:%d not ready within the connect timeout (%lld ms)",
                 c->o->host, c->o->port, (long long)c->o->connect_timeout_ms);
        conn_drop(c, HILOCK_ETIMEDOUT, c->err);
    }
    conn_unref(c);
}

static void conn_up(hl_conn *c)
{
    c->stats.connects++;
    c->state = ST_UP;
    c->attempt = 0;
    c->err[0] = '\0';
    hl_timer_stop(&c->attempt_timer);
    conn_emit(c, HL_CONN_UP, 0, NULL, NULL);
    if (c->state == ST_UP && c->pending.head)
        hl_prepare_start(&c->flusher);
}

static void hello_reply(void *data, int status, hilock_reply *reply)
{
    hl_conn *c = data;
    if (status != 0) {
        int code = HILOCK_EREDIS;
        const char *text = reply ? reply->str : hilock_last_error();
        if (reply && (hl_reply_is_error_prefix(reply, "WRONGPASS") ||
                      hl_reply_is_error_prefix(reply, "NOAUTH") ||
                      hl_reply_is_error_prefix(reply, "NOPERM") ||
                      (hl_reply_is_error_prefix(reply, "ERR") &&
                       strstr(reply->str, "AUTH") != NULL)))
            code = HILOCK_EAUTH;
        snprintf(c->err, sizeof c->err, "%s", text ? text : "");
        hilock_reply_free(reply);
        conn_drop(c, code, c->err);
        return;
    }
    hilock_reply_free(reply);
    c->hello_answered = true;
    if (--c->hello_left == 0)
        conn_up(c);
}

/* The value of "key:" in an INFO text, or NULL; *len its length. */
static const char *info_field(const char *text, const char *key, size_t *len)
{
    size_t klen = strlen(key);
    for (const char *p = text; p != NULL && *p; ) {
        if (strncmp(p, key, klen) == 0 && p[klen] == ':') {
            const char *v = p + klen + 1;
            *len = strcspn(v, "\r\n");
            return v;
        }
        p = strchr(p, '\n');
        if (p)
            p++;
    }
    return NULL;
}

static void info_reply(void *data, int status, hilock_reply *reply)
{
    hl_conn *c = data;
    if (status == 0 && reply && reply->type == HILOCK_REPLY_STRING) {
        size_t len;
        const char *v = info_field(reply->str, "run_id", &len);
        if (v && len < sizeof c->identity.run_id) {
            memcpy(c->identity.run_id, v, len);
            c->identity.run_id[len] = '\0';
            const char *up = info_field(reply->str, "uptime_in_seconds", &len);
            c->identity.uptime_s = up ? strtoll(up, NULL, 10) : 0;
            c->identity.known = true;
        }
    }
    /* A server that will not say (INFO refused to this user) still
     * serves: without an identity the client treats it as restarted at
     * every connect (see the client). */
    if (status != 0) {
        hilock_reply_free(reply);
        status = 0;
        reply = NULL;
    }
    hello_reply(data, status, reply);
}

int hl_format_command(char **out, size_t *out_len, int argc,
                      const char *const *argv, const size_t *argvlen)
{
    size_t len = hl_resp_size(argc, argvlen);
    char *cmd = hl_malloc(len);
    if (cmd == NULL)
        return HILOCK_ENOMEM;
    hl_resp_write(cmd, argc, argv, argvlen);
    *out = cmd;
    *out_len = len;
    return 0;
}

static int format_request(hl_request **out, int argc, const char *const *argv,
                          const size_t *argvlen)
{
    hl_request *r = hl_calloc(1, sizeof *r);
    if (r == NULL)
        return HILOCK_ENOMEM;
    int rc = hl_format_command(&r->cmd, &r->len, argc, argv, argvlen);
    if (rc != 0) {
        hl_free(r);
        return rc;
    }
    *out = r;
    return 0;
}

static int hello_send_with(hl_conn *c, int argc, const char *const *argv,
                           hl_request_fn *fn)
{
    size_t lens[4];
    for (int i = 0; i < argc; i++)
        lens[i] = strlen(argv[i]);
    hl_request *r;
    if (format_request(&r, argc, argv, lens) != 0)
        return -1;
    if (hl_buf_append(&c->out, r->cmd, r->len) != 0) {
        hl_free(r->cmd);
        hl_free(r);
        return -1;
    }
    hl_free(r->cmd);
    r->cmd = NULL;
    r->internal = true;
    r->fn = fn;
    r->data = c;
    r->deadline = INT64_MAX;
    queue_push(&c->sent, r);
    c->hello_left++;
    return 0;
}

static int hello_send(hl_conn *c, int argc, const char *const *argv)
{
    return hello_send_with(c, argc, argv, hello_reply);
}

static void hello_start(hl_conn *c)
{
    c->state = ST_HELLO;
    c->hello_left = 0;
    c->hello_answered = false;
    hl_io_want_read(&c->io, true);
    hl_io_want_write(&c->io, false);
    const hilock_options *o = c->o;
    int rc = 0;
    if (o->password) {
        const char *auth_user[] = {"AUTH", o->user, o->password};
        const char *auth[] = {"AUTH", o->password};
        rc = o->user ? hello_send(c, 3, auth_user) : hello_send(c, 2, auth);
    }
    if (rc == 0 && o->db != 0) {
        char db[16];
        snprintf(db, sizeof db, "%d", o->db);
        const char *select[] = {"SELECT", db};
        rc = hello_send(c, 2, select);
    }
    /* PING proves the server answers, and that it needs no password we
     * did not give (it replies NOAUTH then). */
    const char *ping[] = {"PING"};
    if (rc == 0)
        rc = hello_send(c, 1, ping);
    c->identity.known = false;
    if (rc == 0 && o->track_restarts) {
        const char *info[] = {"INFO", "server"};
        rc = hello_send_with(c, 2, info, info_reply);
    }
    if (rc != 0) {
        conn_drop(c, HILOCK_ENOMEM, "out of memory in the handshake");
        return;
    }
    flush(c);
}

/* The status for a stream failure.  A TLS server that refuses us after
 * the handshake (a client certificate it requires, under TLS 1.3) sends an
 * alert and closes; depending on timing the alert or only the close
 * reaches us.  A close before the server answered anything on a fresh TLS
 * session is therefore reported as a TLS failure. */
static int stream_failure_status(hl_conn *c, ssize_t n)
{
    if (n == HL_STREAM_TLS_ERROR)
        return HILOCK_ETLS;
    if (n == HL_STREAM_EOF && c->state == ST_HELLO && c->stream.ssl &&
        !c->hello_answered) {
        char was[96];
        size_t len = strnlen(c->err, sizeof was - 1);
        memcpy(was, c->err, len);
        was[len] = '\0';
        snprintf(c->err, sizeof c->err,
                 "the server closed the TLS session before answering; a "
                 "client certificate required by the server would explain "
                 "it (%s)",
                 was);
        return HILOCK_ETLS;
    }
    return HILOCK_EIO;
}

/* ---- writing --------------------------------------------------------- */

/* Put SCRIPT LOAD for r's script in front of it, once per socket.  On
 * failure nothing is queued: the EVALSHA then meets NOSCRIPT and falls
 * back to EVAL. */
static void load_script_first(hl_conn *c, const hl_script *s)
{
    uint64_t bit = (uint64_t)1 << s->index;
    if (c->scripts_loaded & bit)
        return;
    const char *argv[] = {"SCRIPT", "LOAD", s->body};
    size_t lens[] = {6, 4, s->len};
    hl_request *load;
    if (format_request(&load, 3, argv, lens) != 0)
        return;
    if (hl_buf_append(&c->out, load->cmd, load->len) != 0) {
        hl_free(load->cmd);
        hl_free(load);
        return;
    }
    hl_free(load->cmd);
    load->cmd = NULL;
    load->queued_at = hl_monotime_now();
    load->deadline = load->queued_at + HL_MS(c->o->command_timeout_ms);
    queue_push(&c->sent, load);
    c->scripts_loaded |= bit;
}

static void move_pending(hl_conn *c)
{
    hl_request *r;
    while ((r = queue_pop(&c->pending)) != NULL) {
        if (r->script)
            load_script_first(c, r->script);
        if (hl_buf_append(&c->out, r->cmd, r->len) != 0) {
            complete(r, HILOCK_ENOMEM, NULL, "out of memory for output");
            continue;
        }
        hl_free(r->cmd);
        r->cmd = NULL;
        queue_push(&c->sent, r);
    }
}

static void flush(hl_conn *c)
{
    if (c->state == ST_UP)
        move_pending(c);
    while (hl_buf_len(&c->out) > 0) {
        size_t len = hl_buf_len(&c->out);
        if (c->tls_retry_len > 0)
            len = (size_t)c->tls_retry_len;
        ssize_t n = hl_stream_write(&c->stream, hl_buf_head(&c->out), len,
                                    c->err, sizeof c->err);
        if (n > 0) {
            c->tls_retry_len = 0;
            c->stats.writes++;
            c->stats.bytes_written += (uint64_t)n;
            hl_buf_consume(&c->out, (size_t)n);
            continue;
        }
        if (n == HL_STREAM_WANT_WRITE || n == HL_STREAM_WANT_READ) {
            if (c->stream.ssl)
                c->tls_retry_len = (int)(len > INT32_MAX ? INT32_MAX : len);
            /* A write that waits for readability is retried by the read
             * path, which runs on every event. */
            hl_io_want_write(&c->io, n == HL_STREAM_WANT_WRITE);
            hl_prepare_stop(&c->flusher);
            return;
        }
        conn_drop(c, stream_failure_status(c, n), c->err);
        return;
    }
    if (!c->read_wants_write)
        hl_io_want_write(&c->io, false);
    hl_prepare_stop(&c->flusher);
}

static void on_prepare(hl_prepare *p)
{
    hl_conn *c = p->data;
    c->refs++;
    if (c->state == ST_UP || c->state == ST_HELLO)
        flush(c);
    else
        hl_prepare_stop(p);
    conn_unref(c);
}

/* ---- reading --------------------------------------------------------- */

static void dispatch(hl_conn *c)
{
    unsigned epoch = c->epoch;
    for (;;) {
        hilock_reply *reply;
        int r = hl_reader_next(c->reader, &c->limits, &reply);
        if (r == 0)
            return;
        if (r == -1) {
            snprintf(c->err, sizeof c->err, "protocol error: %s",
                     c->reader->errstr);
            conn_drop(c, HILOCK_EPROTO, c->err);
            return;
        }
        if (r == -2) {
            hl_request *head = queue_pop(&c->sent);
            const char *why = "reply exceeds the configured bounds";
            if (head && !head->internal)
                complete(head, HILOCK_ETOOBIG, NULL, why);
            else if (head)
                queue_push_front(&c->sent, head);
            if (c->epoch == epoch)
                conn_drop(c, HILOCK_ETOOBIG, why);
            return;
        }
        if (c->cfg.push_mode && c->state == ST_UP) {
            conn_emit(c, HL_CONN_PUSH, 0, NULL, reply);
        } else {
            hl_request *req = queue_pop(&c->sent);
            if (req == NULL) {
                hilock_reply_free(reply);
                conn_drop(c, HILOCK_EPROTO, "reply without a request");
                return;
            }
            int status = reply->type == HILOCK_REPLY_ERROR ? HILOCK_EREDIS
                                                           : 0;
            if (!req->internal)
                note_rtt(c, hl_monotime_now() - req->queued_at);
            complete(req, status, reply, status ? reply->str : NULL);
            if (c->sent.head == NULL && c->pending.head == NULL)
                hl_timer_stop(&c->request_timer);
        }
        if (c->epoch != epoch || c->state == ST_CLOSED)
            return;
    }
}

static void read_all(hl_conn *c)
{
    char buf[16384];
    unsigned epoch = c->epoch;
    for (int rounds = 0;; rounds++) {
        /* Yield to other watchers after a while; TLS must still drain what
         * it has decrypted, since the socket will not signal it again. */
        if (rounds >= 16 &&
            (c->stream.ssl == NULL || SSL_pending(c->stream.ssl) == 0))
            return;
        ssize_t n =
            hl_stream_read(&c->stream, buf, sizeof buf, c->err, sizeof c->err);
        if (n > 0) {
            if (redisReaderFeed(c->reader, buf, (size_t)n) != REDIS_OK) {
                conn_drop(c, HILOCK_ENOMEM, "out of memory reading a reply");
                return;
            }
            dispatch(c);
            if (c->epoch != epoch || c->state == ST_CLOSED)
                return;
            continue;
        }
        if (n == HL_STREAM_WANT_READ) {
            if (c->read_wants_write) {
                c->read_wants_write = false;
                if (hl_buf_len(&c->out) == 0)
                    hl_io_want_write(&c->io, false);
            }
            return;
        }
        if (n == HL_STREAM_WANT_WRITE) {
            c->read_wants_write = true;
            hl_io_want_write(&c->io, true);
            return;
        }
        conn_drop(c, stream_failure_status(c, n), c->err);
        return;
    }
}

static void on_io(hl_io *io, int revents)
{
    hl_conn *c = io->data;
    c->refs++;
    unsigned epoch = c->epoch;
    switch (c->state) {
    case ST_CONNECTING:
        connect_finished(c);
        break;
    case ST_TLS:
        tls_step(c);
        break;
    case ST_HELLO:
    case ST_UP:
        if (hl_buf_len(&c->out) > 0 || c->tls_retry_len > 0)
            flush(c);
        if (c->epoch == epoch && c->state != ST_CLOSED)
            read_all(c);
        break;
    default:
        break;
    }
    (void)revents;
    conn_unref(c);
}

/* ---- request deadlines ----------------------------------------------- */

static void arm_request_timer(hl_conn *c)
{
    hl_monotime next = INT64_MAX;
    if (c->pending.head)
        next = c->pending.head->deadline;
    for (hl_request *r = c->sent.head; r; r = r->next) {
        if (!r->internal) {
            if (r->deadline < next)
                next = r->deadline;
            break;
        }
    }
    if (next == INT64_MAX) {
        hl_timer_stop(&c->request_timer);
        return;
    }
    hl_timer_arm(&c->request_timer, next - hl_monotime_now());
}

static void on_request_timer(hl_timer *t)
{
    hl_conn *c = t->data;
    c->refs++;
    hl_monotime now = hl_monotime_now();
    while (c->pending.head && c->pending.head->deadline <= now &&
           c->state != ST_CLOSED) {
        hl_request *r = queue_pop(&c->pending);
        char why[sizeof c->err + 64];
        snprintf(why, sizeof why, "not connected within the command timeout"
                                  "%s%s",
                 c->err[0] ? ": " : "", c->err);
        complete(r, HILOCK_ETIMEDOUT, NULL, why);
    }
    hl_request *head = c->sent.head;
    if (head && !head->internal && head->deadline <= now &&
        c->state != ST_CLOSED) {
        char why[128];
        snprintf(why, sizeof why,
                 "no reply within the command timeout (%lld ms); connection "
                 "reset",
                 (long long)c->o->command_timeout_ms);
        conn_drop(c, HILOCK_ETIMEDOUT, why);
    }
    if (c->state != ST_CLOSED)
        arm_request_timer(c);
    conn_unref(c);
}

/* ---- public -------------------------------------------------------- */

hl_conn *hl_conn_create(const hl_conn_config *cfg)
{
    hl_conn *c = hl_calloc(1, sizeof *c);
    if (c == NULL)
        return NULL;
    c->cfg = *cfg;
    c->o = cfg->opts;
    c->refs = 1;
    c->stream.fd = -1;
    c->limits.max_bytes = c->o->max_reply_bytes;
    c->limits.max_elements = c->o->max_reply_elements;
    c->limits.max_depth = c->o->max_reply_depth;
    if (RAND_bytes((unsigned char *)&c->rng, sizeof c->rng) != 1)
        c->rng = (uint64_t)hl_monotime_now();
    hl_io_init(&c->io, cfg->loop, on_io, c);
    hl_io_init(&c->resolve_io, cfg->loop, on_resolved, c);
    hl_timer_init(&c->attempt_timer, cfg->loop, on_attempt_timer, c);
    hl_timer_init(&c->request_timer, cfg->loop, on_request_timer, c);
    hl_prepare_init(&c->flusher, cfg->loop, on_prepare, c);
    /* The first attempt starts from the loop, so no event reaches the
     * owner before it has the handle. */
    c->state = ST_BACKOFF;
    hl_timer_arm(&c->attempt_timer, 0);
    return c;
}

static int enqueue(hl_conn *c, hl_request *r)
{
    hl_monotime timeout = HL_MS(c->o->command_timeout_ms);
    r->queued_at = hl_monotime_now();
    r->deadline = r->queued_at + timeout;
    queue_push(&c->pending, r);
    if (!c->request_timer.armed)
        hl_timer_arm(&c->request_timer, timeout);
    if (c->state == ST_UP)
        hl_prepare_start(&c->flusher);
    if (c->cfg.on_request)
        c->cfg.on_request(c->cfg.data);
    return 0;
}

int hl_conn_command(hl_conn *c, int argc, const char *const *argv,
                    const size_t *argvlen, hl_request_fn *fn, void *data)
{
    if (c->state == ST_CLOSED)
        return HILOCK_ECLOSED;
    hl_request *r;
    int rc = format_request(&r, argc, argv, argvlen);
    if (rc != 0)
        return rc;
    r->fn = fn;
    r->data = data;
    return enqueue(c, r);
}

int hl_conn_command_take(hl_conn *c, char *cmd, size_t len,
                         hl_request_fn *fn, void *data)
{
    return hl_conn_script_take(c, NULL, cmd, len, fn, data);
}

int hl_conn_script_take(hl_conn *c, const hl_script *script, char *cmd,
                        size_t len, hl_request_fn *fn, void *data)
{
    if (c->state == ST_CLOSED) {
        hl_free(cmd);
        return HILOCK_ECLOSED;
    }
    hl_request *r = hl_calloc(1, sizeof *r);
    if (r == NULL) {
        hl_free(cmd);
        return HILOCK_ENOMEM;
    }
    r->cmd = cmd;
    r->len = len;
    r->fn = fn;
    r->data = data;
    r->script = script;
    return enqueue(c, r);
}

void hl_conn_forget_scripts(hl_conn *c) { c->scripts_loaded = 0; }

int hl_conn_send(hl_conn *c, int argc, const char *const *argv,
                 const size_t *argvlen)
{
    if (c->state == ST_CLOSED)
        return HILOCK_ECLOSED;
    if (c->state != ST_UP)
        return HILOCK_EIO;
    hl_request *r;
    int rc = format_request(&r, argc, argv, argvlen);
    if (rc != 0)
        return rc;
    rc = hl_buf_append(&c->out, r->cmd, r->len);
    hl_free(r->cmd);
    hl_free(r);
    if (rc != 0)
        return HILOCK_ENOMEM;
    hl_prepare_start(&c->flusher);
    return 0;
}

void hl_conn_close(hl_conn *c, int status, const char *detail)
{
    if (c->state == ST_CLOSED)
        return;
    c->state = ST_CLOSED;
    close_socket(c);
    hl_timer_stop(&c->attempt_timer);
    hl_timer_stop(&c->request_timer);
    c->refs++;
    fail_queue(&c->sent, status, detail);
    fail_queue(&c->pending, status, detail);
    conn_unref(c);
}

void hl_conn_free(hl_conn *c)
{
    if (c == NULL || c->freed)
        return;
    c->freed = true;
    hl_conn_close(c, HILOCK_ECLOSED, "client closed");
    conn_unref(c);
}

bool hl_conn_busy(const hl_conn *c)
{
    return c->pending.head != NULL || c->sent.head != NULL;
}

hl_conn_stats hl_conn_get_stats(const hl_conn *c) { return c->stats; }

hl_server_identity hl_conn_identity(const hl_conn *c) { return c->identity; }
