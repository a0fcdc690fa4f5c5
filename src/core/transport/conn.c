/* A connection's life: creation, tear-down, reconnection with backoff,
 * events to its owner.  The other parts: conn_handshake.c, conn_requests.c,
 * conn_pump.c. */
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

/* ---- small helpers ---------------------------------------------------- */

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

void hl_conn_complete(hl_request *r, int status, hilock_reply *reply,
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
    hl_request_drop_gate(r);
    hl_free(r->cmd);
    hl_free(r);
}

static void fail_queue(req_queue *q, int status, const char *detail)
{
    hl_request *r;
    while ((r = queue_pop(q)) != NULL) {
        if (r->internal) {
            hl_request_drop_gate(r);
            hl_free(r->cmd);
            hl_free(r);
            continue;
        }
        hl_conn_complete(r, status, NULL, detail);
    }
}

void hl_conn_unref(hl_conn *c)
{
    if (--c->refs > 0)
        return;
    hl_buf_free(&c->out);
    hl_free(c);
}

void hl_conn_emit(hl_conn *c, hl_conn_event ev, int status,
                      const char *detail, hilock_reply *reply)
{
    if (c->cfg.on_event && !c->freed)
        c->cfg.on_event(c, ev, status, detail, reply, c->cfg.data);
    else
        hilock_reply_free(reply);
}

/* ---- tear-down and reconnection -------------------------------------- */


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
    c->limits.waiting = 0;
    c->limits.scanned = 0;
    hl_buf_reset(&c->out);
    hl_prepare_stop(&c->flusher);
    hl_timer_stop(&c->keepalive_timer);
    memset(c->scripts_loaded, 0, sizeof c->scripts_loaded);
}

/* The socket is gone (or never came): fail what was written, tell the
 * owner, and come back after a backoff. */
void hl_conn_drop(hl_conn *c, int status, const char *detail)
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
        hl_conn_emit(c, HL_CONN_DOWN, status, why, NULL);
}

void hl_conn_reset(hl_conn *c, int status, const char *detail)
{
    if (c->state != ST_BACKOFF)
        hl_conn_drop(c, status, detail);
}

void hl_conn_retarget(hl_conn *c, int status, const char *detail)
{
    if (c->state == ST_CLOSED)
        return;
    hl_conn_reset(c, status, detail);
    if (c->state != ST_BACKOFF || !c->started)
        return;
    /* The failures behind the backoff were the old address's. */
    c->attempt = 0;
    hl_timer_arm(&c->attempt_timer, 0);
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
    hl_io_init(&c->io, cfg->loop, hl_conn_on_io, c);
    hl_io_init(&c->resolve_io, cfg->loop, hl_conn_on_resolved, c);
    hl_timer_init(&c->attempt_timer, cfg->loop, hl_conn_on_attempt_timer, c);
    hl_timer_init(&c->request_timer, cfg->loop, hl_conn_on_request_timer, c);
    hl_timer_init(&c->keepalive_timer, cfg->loop, hl_conn_on_keepalive, c);
    hl_timer_init(&c->retry_timer, cfg->loop, hl_conn_on_retry_timer, c);
    hl_prepare_init(&c->flusher, cfg->loop, hl_conn_on_prepare, c);
    /* The first attempt starts from the loop, so no event reaches the
     * owner before it has the handle. */
    c->state = ST_BACKOFF;
    if (!cfg->paused)
        hl_timer_arm(&c->attempt_timer, 0);
    c->started = !cfg->paused;
    return c;
}

void hl_conn_start(hl_conn *c)
{
    if (c->started || c->state == ST_CLOSED)
        return;
    c->started = true;
    hl_timer_arm(&c->attempt_timer, 0);
}

void hl_conn_close(hl_conn *c, int status, const char *detail)
{
    if (c->state == ST_CLOSED)
        return;
    c->state = ST_CLOSED;
    close_socket(c);
    hl_timer_stop(&c->attempt_timer);
    hl_timer_stop(&c->request_timer);
    hl_timer_stop(&c->keepalive_timer);
    hl_timer_stop(&c->retry_timer);
    c->refs++;
    fail_queue(&c->sent, status, detail);
    hl_conn_settle_last(c);
    fail_queue(&c->pending, status, detail);
    fail_queue(&c->parked, status, detail);
    hl_conn_unref(c);
}

void hl_conn_free(hl_conn *c)
{
    if (c == NULL || c->freed)
        return;
    c->freed = true;
    hl_conn_close(c, HILOCK_ECLOSED, "client closed");
    hl_conn_unref(c);
}

bool hl_conn_busy(const hl_conn *c)
{
    return c->pending.head != NULL || c->last != NULL ||
           c->sent.head != NULL ||
           c->parked.head != NULL;
}

hl_monotime hl_conn_unanswered_for(const hl_conn *c)
{
    const hl_request *r = c->sent.head;
    return r == NULL ? 0 : hl_sat_sub(hl_monotime_now(), r->queued_at);
}

hl_conn_stats hl_conn_get_stats(const hl_conn *c) { return c->stats; }


void hl_conn_address(const hl_conn *conn, char *out, size_t cap)
{
    const hilock_options *o = conn->cfg.opts;
    bool v6 = o->host != NULL && strchr(o->host, ':') != NULL;
    snprintf(out, cap, "%s%s%s:%d", v6 ? "[" : "", o->host ? o->host : "",
             v6 ? "]" : "", o->port);
}
