/* Getting a connection up: resolve, connect, TLS, the hello commands
 * (AUTH, SELECT, PING, INFO), and the keepalive of push connections. */
#include "core/transport/conn_internal.h"

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

/* ---- connect, TLS, hello --------------------------------------------- */

static void hello_start(hl_conn *c);

void hl_conn_tls_step(hl_conn *c)
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
    hl_conn_drop(c, HILOCK_ETLS, c->err);
}

void hl_conn_connected(hl_conn *c)
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
        hl_conn_drop(c, HILOCK_ETLS, c->err);
        return;
    }
    c->state = ST_TLS;
    hl_conn_tls_step(c);
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
            hl_conn_connected(c);
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
    hl_conn_drop(c, HILOCK_EIO, last);
}

void hl_conn_connect_finished(hl_conn *c)
{
    int err = 0;
    socklen_t len = sizeof err;
    if (getsockopt(c->stream.fd, SOL_SOCKET, SO_ERROR, &err, &len) < 0)
        err = errno;
    if (err == 0) {
        hl_io_want_write(&c->io, false);
        hl_conn_connected(c);
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
    hl_conn_drop(c, HILOCK_EIO, c->err);
}

void hl_conn_on_resolved(hl_io *io, int revents)
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
        hl_conn_drop(c, HILOCK_EIO, c->err);
        return;
    }
    c->addr_next = c->addrs;
    connect_next(c);
}

void hl_conn_attempt_start(hl_conn *c)
{
    c->reader = hl_reader_create(&c->limits);
    if (c->reader == NULL) {
        hl_conn_drop(c, HILOCK_ENOMEM, "out of memory for the reply reader");
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
        hl_conn_drop(c, HILOCK_ENOMEM, "cannot start host name resolution");
        return;
    }
    c->state = ST_RESOLVING;
    hl_io_set_fd(&c->resolve_io, fd);
    hl_io_want_read(&c->resolve_io, true);
}

void hl_conn_on_attempt_timer(hl_timer *t)
{
    hl_conn *c = t->data;
    c->refs++;
    if (c->state == ST_BACKOFF) {
        hl_conn_attempt_start(c);
    } else if (c->state == ST_TLS) {
        /* A plaintext Redis reads a TLS hello as the start of a command
         * line and waits, silent, for its end. */
        snprintf(c->err, sizeof c->err,
                 "%s:%d did not answer the TLS handshake within the connect "
                 "timeout (%lld ms): the server may not speak TLS on this "
                 "port (a plaintext server needs redis://)",
                 c->o->host, c->o->port, (long long)c->o->connect_timeout_ms);
        hl_conn_drop(c, HILOCK_ETIMEDOUT, c->err);
    } else if (c->state != ST_UP && c->state != ST_CLOSED) {
        snprintf(c->err, sizeof c->err,
                 "%s:%d not ready within the connect timeout (%lld ms)",
                 c->o->host, c->o->port, (long long)c->o->connect_timeout_ms);
        hl_conn_drop(c, HILOCK_ETIMEDOUT, c->err);
    }
    hl_conn_unref(c);
}

/* How long a push-mode connection may hear nothing before it is asked: as
 * often as leases are renewed, and no more than ten times a second. */
static hl_monotime keepalive_idle(const hl_conn *c)
{
    hl_monotime idle = HL_MS(c->o->watchdog_timeout_ms) / 3;
    return idle > HL_MS(100) ? idle : HL_MS(100);
}

/* Costs nothing while the server talks: replies only count, and the
 * timer looks at the count once per idle period. */
void hl_conn_on_keepalive(hl_timer *t)
{
    hl_conn *c = t->data;
    if (c->state != ST_UP)
        return;
    c->refs++;
    if (c->heard != c->heard_at_check) {
        c->heard_at_check = c->heard;
        c->ping_out = false;
        hl_timer_arm(t, keepalive_idle(c));
    } else if (!c->ping_out) {
        const char *ping[] = {"PING"};
        size_t len[] = {4};
        /* Out of memory for the PING: its silence resets all the same. */
        (void)hl_conn_send(c, 1, ping, len);
        c->ping_out = true;
        hl_timer_arm(t, HL_MS(c->o->command_timeout_ms));
    } else {
        snprintf(c->err, sizeof c->err,
                 "no answer to a PING within the command timeout (%lld ms); "
                 "connection reset",
                 (long long)c->o->command_timeout_ms);
        hl_conn_drop(c, HILOCK_ETIMEDOUT, c->err);
    }
    hl_conn_unref(c);
}

static void conn_up(hl_conn *c)
{
    c->stats.connects++;
    c->state = ST_UP;
    c->attempt = 0;
    c->err[0] = '\0';
    hl_timer_stop(&c->attempt_timer);
    if (c->cfg.keepalive) {
        c->heard_at_check = c->heard;
        c->ping_out = false;
        hl_timer_arm(&c->keepalive_timer, keepalive_idle(c));
    }
    hl_conn_emit(c, HL_CONN_UP, 0, NULL, NULL);
    if (c->state == ST_UP && (c->pending.head || c->last))
        hl_prepare_start(&c->flusher);
}

void hl_conn_hello_reply(void *data, int status, hilock_reply *reply)
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
        hl_conn_drop(c, code, c->err);
        return;
    }
    hilock_reply_free(reply);
    c->hello_answered = true;
    if (--c->hello_left == 0)
        conn_up(c);
}

static bool bulk_is(const hilock_reply *r, const char *s)
{
    return r->type == HILOCK_REPLY_STRING && r->len == strlen(s) &&
           memcmp(r->str, s, r->len) == 0;
}

/* What is wrong with a ROLE reply for a master, into why; false when it
 * is a master's: exactly the bulk string "master", the replication
 * offset and the array of replicas.  Anything looser would take a reply
 * of any shape (an empty array, a status "+master") for a master, and
 * write locks there. */
bool hl_conn_role_not_master(const hilock_reply *r, char *why, size_t cap)
{
    char shown[96];
    const hilock_reply *name =
        r->type == HILOCK_REPLY_ARRAY && r->elements > 0 ? r->element[0]
                                                         : NULL;
    if (r->type != HILOCK_REPLY_ARRAY)
        snprintf(why, cap, "%s", hl_reply_kind(r));
    else if (name == NULL)
        snprintf(why, cap, "an empty array");
    else if (name->type != HILOCK_REPLY_STRING)
        snprintf(why, cap, "an array starting with %s",
                 hl_reply_kind(name));
    else if (!bulk_is(name, "master"))
        snprintf(why, cap, "role '%s'",
                 hl_reply_quote(shown, sizeof shown, name->str, name->len));
    else if (r->elements != 3 ||
             r->element[1]->type != HILOCK_REPLY_INTEGER ||
             r->element[2]->type != HILOCK_REPLY_ARRAY)
        snprintf(why, cap, "\"master\" and %zu element(s) that are not "
                           "exactly an offset and an array of replicas",
                 r->elements - 1);
    else
        return false;
    return true;
}

static void role_reply(void *data, int status, hilock_reply *reply)
{
    hl_conn *c = data;
    char why[160];
    if (status != 0 || !hl_conn_role_not_master(reply, why, sizeof why)) {
        if (status == 0) {
            c->hello_replicas = (int)reply->element[2]->elements;
            c->hello_role = HL_ROLE_MASTER;
        }
        hl_conn_hello_reply(data, status, reply);
        return;
    }
    const hilock_reply *name = reply->element ? reply->element[0] : NULL;
    if (name && (bulk_is(name, "slave") || bulk_is(name, "sentinel"))) {
        /* A real answer, only not the one wanted: worth another try. */
        snprintf(c->err, sizeof c->err,
                 "%s:%d is a %s, not a master: the sentinels' answer is "
                 "stale or a failover is under way",
                 c->o->host, c->o->port, name->str);
        hilock_reply_free(reply);
        hl_conn_drop(c, HILOCK_EIO, c->err);
        return;
    }
    snprintf(c->err, sizeof c->err,
             "%s:%d answered ROLE with %s, where a master answers "
             "\"master\", its offset and its replicas",
             c->o->host, c->o->port, why);
    hilock_reply_free(reply);
    hl_conn_drop(c, HILOCK_EPROTO, c->err);
}

static int hello_send(hl_conn *c, int argc, const char *const *argv)
{
    return hl_conn_hello_send(c, argc, argv, hl_conn_hello_reply);
}

int hl_conn_hello_send(hl_conn *c, int argc, const char *const *argv,
                       hl_request_fn *fn)
{
    size_t lens[4];
    for (int i = 0; i < argc; i++)
        lens[i] = strlen(argv[i]);
    hl_request *r;
    if (hl_conn_format_request(&r, argc, argv, lens) != 0)
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

static void hello_start(hl_conn *c)
{
    c->state = ST_HELLO;
    c->hello_left = 0;
    c->hello_answered = false;
    c->hello_replicas = -1;
    c->hello_role = HL_ROLE_UNKNOWN;
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
    const char *role[] = {"ROLE"};
    if (rc == 0 && c->cfg.verify_master)
        rc = hl_conn_hello_send(c, 1, role, role_reply);
    if (rc == 0)
        rc = hl_conn_probe_send(c, !c->cfg.verify_master);
    if (rc != 0) {
        hl_conn_drop(c, HILOCK_ENOMEM, "out of memory in the handshake");
        return;
    }
    hl_conn_flush(c);
}

/* The status for a stream failure.  A TLS server that refuses us after
 * the handshake (a client certificate it requires, under TLS 1.3) sends an
 * alert and closes; depending on timing the alert or only the close
 * reaches us.  A close before the server answered anything on a fresh TLS
 * session is therefore reported as a TLS failure. */
int hl_conn_stream_failure_status(hl_conn *c, ssize_t n)
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
