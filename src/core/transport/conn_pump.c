/* The I/O pump: pending requests into the output buffer and out to the
 * socket (auto-pipelining: one write per loop iteration), and replies in
 * from it to their requests. */
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

/* ---- writing --------------------------------------------------------- */

/* Put SCRIPT LOAD for r's script in front of it, once per socket.  On
 * failure nothing is queued: the EVALSHA then meets NOSCRIPT and falls
 * back to EVAL. */
static void load_script_first(hl_conn *c, const hl_script *s)
{
    uint64_t *word = &c->scripts_loaded[s->index / 64];
    uint64_t bit = (uint64_t)1 << (s->index % 64);
    if (*word & bit)
        return;
    const char *argv[] = {"SCRIPT", "LOAD", s->body};
    size_t lens[] = {6, 4, s->len};
    hl_request *load;
    if (hl_conn_format_request(&load, 3, argv, lens) != 0)
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
    *word |= bit;
}

static bool send_asking(hl_conn *c)
{
    static const char asking[] = "*1\r\n$6\r\nASKING\r\n";
    hl_request *r = hl_calloc(1, sizeof *r);
    if (r == NULL || hl_buf_append(&c->out, asking, sizeof asking - 1) != 0) {
        hl_free(r);
        return false;
    }
    r->queued_at = hl_monotime_now();
    r->deadline = r->queued_at + HL_MS(c->o->command_timeout_ms);
    queue_push(&c->sent, r);
    return true;
}

/* A cluster refused r with MOVED or ASK: send it where the hook says.
 * With TRYAGAIN (keys of a slot in migration) or CLUSTERDOWN (a failover
 * under way), send it again on this connection after a while, doubling
 * from HL_RETRY_FIRST_MS, for as long as its first command timeout
 * lasts; the hook hears of it too, since the map may be stale.  True
 * when r is gone from the caller's hands. */
static bool follow_redirect(hl_conn *c, hl_request *r, hilock_reply *reply)
{
    if (c->redirect == NULL || r->cmd == NULL)
        return false;
    bool asking = false;
    const char *bad = NULL;
    if (hl_reply_is_error_prefix(reply, "TRYAGAIN") ||
        hl_reply_is_error_prefix(reply, "CLUSTERDOWN")) {
        c->redirect(c->redirect_data, c, reply->str, &asking, &bad);
        int shift = r->retries < 6 ? r->retries : 6;
        if (!hl_conn_park(c, r, HL_MS(HL_RETRY_FIRST_MS) << shift))
            return false;
        hilock_reply_free(reply);
        return true;
    }
    if (r->redirects >= HL_MAX_REDIRECTS ||
        !(hl_reply_is_error_prefix(reply, "MOVED ") ||
          hl_reply_is_error_prefix(reply, "ASK ")))
        return false;
    /* The hook reads the line as a C string: one cut short by a NUL
     * would be followed to wherever its first part points. */
    bool nul = memchr(reply->str, '\0', reply->len) != NULL;
    hl_conn *to = nul ? NULL
                      : c->redirect(c->redirect_data, c, reply->str, &asking,
                                    &bad);
    if (nul)
        bad = "a redirection holding a NUL byte";
    if (bad != NULL) {
        hilock_reply_free(reply);
        hl_conn_complete(r, HILOCK_EPROTO, NULL, bad);
        return true;
    }
    if (to == NULL || !hl_conn_requeue(to, r, asking))
        return false;
    hilock_reply_free(reply);
    return true;
}

/* Whether r may be written: its caller may have withdrawn it, and once
 * it is written its caller can no longer. */
static bool pass_gate(hl_request *r)
{
    if (r->gate == NULL)
        return true;
    int g = atomic_load(r->gate);
    while (g != HL_GATE_SENT && g != HL_GATE_WITHDRAWN)
        if (atomic_compare_exchange_weak(r->gate, &g, HL_GATE_SENT))
            return true;
    return g == HL_GATE_SENT;
}

static void move_pending(hl_conn *c)
{
    hl_request *r;
    hl_conn_settle_last(c);
    while ((r = queue_pop(&c->pending)) != NULL) {
        if (!pass_gate(r)) {
            hl_conn_complete(r, HILOCK_ECANCELED, NULL,
                             "withdrawn by its caller before it was "
                             "written: it never ran");
            continue;
        }
        if (r->script)
            load_script_first(c, r->script);
        /* After the script's load: ASKING admits only the command right
         * behind it. */
        if (r->asking && !send_asking(c)) {
            hl_conn_complete(r, HILOCK_ENOMEM, NULL, "out of memory for output");
            continue;
        }
        if (hl_buf_append(&c->out, r->cmd, r->len) != 0) {
            hl_conn_complete(r, HILOCK_ENOMEM, NULL, "out of memory for output");
            continue;
        }
        if (c->redirect == NULL) {
            hl_free(r->cmd);
            r->cmd = NULL;
        }
        queue_push(&c->sent, r);
    }
}

void hl_conn_flush(hl_conn *c)
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
        hl_conn_drop(c, hl_conn_stream_failure_status(c, n), c->err);
        return;
    }
    if (!c->read_wants_write)
        hl_io_want_write(&c->io, false);
    hl_prepare_stop(&c->flusher);
}

void hl_conn_on_prepare(hl_prepare *p)
{
    hl_conn *c = p->data;
    c->refs++;
    if (c->state == ST_UP || c->state == ST_HELLO)
        hl_conn_flush(c);
    else
        hl_prepare_stop(p);
    hl_conn_unref(c);
}

/* ---- reading --------------------------------------------------------- */

/* The connection whose reply is being delivered on this thread. */
static _Thread_local hl_conn *answering;

hl_conn *hl_conn_answering(void) { return answering; }

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
            hl_conn_drop(c, HILOCK_EPROTO, c->err);
            return;
        }
        if (r == -2) {
            hl_request *head = queue_pop(&c->sent);
            char why[160];
            hl_reply_bound_why(&c->limits, why, sizeof why);
            if (head && !head->internal)
                hl_conn_complete(head, HILOCK_ETOOBIG, NULL, why);
            else if (head)
                queue_push_front(&c->sent, head);
            if (c->epoch == epoch)
                hl_conn_drop(c, HILOCK_ETOOBIG, why);
            return;
        }
        c->heard++;
        if (c->cfg.push_mode && c->state == ST_UP) {
            hl_conn_emit(c, HL_CONN_PUSH, 0, NULL, reply);
        } else {
            hl_request *req = queue_pop(&c->sent);
            if (req == NULL) {
                hilock_reply_free(reply);
                hl_conn_drop(c, HILOCK_EPROTO, "reply without a request");
                return;
            }
            int status = reply->type == HILOCK_REPLY_ERROR ? HILOCK_EREDIS
                                                           : 0;
            if (!req->internal)
                hl_conn_note_rtt(c, hl_monotime_now() - req->queued_at);
            if (status == 0 || !follow_redirect(c, req, reply)) {
                hl_conn *outer = answering;
                answering = c;
                hl_conn_complete(req, status, reply,
                                 status ? reply->str : NULL);
                answering = outer;
            }
            if (c->sent.head == NULL && c->pending.head == NULL &&
                c->last == NULL)
                hl_timer_stop(&c->request_timer);
        }
        if (c->epoch != epoch || c->state == ST_CLOSED)
            return;
    }
}

void hl_conn_read_all(hl_conn *c)
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
                hl_conn_drop(c, HILOCK_ENOMEM, "out of memory reading a reply");
                return;
            }
            dispatch(c);
            if (c->epoch != epoch || c->state == ST_CLOSED)
                return;
            /* A short read emptied the socket: the watcher is level
             * triggered and fires again for what comes next, so the read
             * that would only say EAGAIN is saved.  TLS may still hold
             * decrypted bytes the socket will not signal. */
            if ((size_t)n < sizeof buf && !c->read_wants_write &&
                (c->stream.ssl == NULL || SSL_pending(c->stream.ssl) == 0))
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
        hl_conn_drop(c, hl_conn_stream_failure_status(c, n), c->err);
        return;
    }
}

void hl_conn_on_io(hl_io *io, int revents)
{
    hl_conn *c = io->data;
    c->refs++;
    unsigned epoch = c->epoch;
    switch (c->state) {
    case ST_CONNECTING:
        hl_conn_connect_finished(c);
        break;
    case ST_TLS:
        hl_conn_tls_step(c);
        break;
    case ST_HELLO:
    case ST_UP:
        if (hl_buf_len(&c->out) > 0 || c->tls_retry_len > 0)
            hl_conn_flush(c);
        if (c->epoch == epoch && c->state != ST_CLOSED)
            hl_conn_read_all(c);
        break;
    default:
        break;
    }
    (void)revents;
    hl_conn_unref(c);
}
