/* Requests: formatting, the queue of pending ones, their deadlines, and
 * the round-trip average blocking callers read. */
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

/* An average over about the last eight answers: recent enough to follow
 * a change of load, steady enough to ignore one slow answer. */
void hl_conn_note_rtt(hl_conn *c, hl_monotime took)
{
    int64_t avg = c->rtt_us == 0 ? took : c->rtt_us + (took - c->rtt_us) / 8;
    c->rtt_us = avg > 0 ? avg : 1;
    if (c->cfg.rtt_us)
        atomic_store_explicit(c->cfg.rtt_us, c->rtt_us,
                              memory_order_relaxed);
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

int hl_conn_format_request(hl_request **out, int argc, const char *const *argv,
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


/* The gate of the requests this thread queues now; see conn.h. */
static _Thread_local _Atomic int *current_gate;

_Atomic int *hl_conn_gate_requests(_Atomic int *gate)
{
    _Atomic int *was = current_gate;
    current_gate = gate;
    return was;
}

static void (*_Atomic gate_hold)(_Atomic int *gate);
static void (*_Atomic gate_drop)(_Atomic int *gate);

void hl_conn_set_gate_owner(void (*hold)(_Atomic int *gate),
                            void (*drop)(_Atomic int *gate))
{
    atomic_store(&gate_hold, hold);
    atomic_store(&gate_drop, drop);
}

void hl_request_drop_gate(hl_request *r)
{
    void (*drop)(_Atomic int *) = atomic_load(&gate_drop);
    if (r->gate != NULL && drop != NULL)
        drop(r->gate);
    r->gate = NULL;
}

/* Into pending, or, with last, into the place after it. */
static int enqueue_at(hl_conn *c, hl_request *r, bool last)
{
    /* A request queued again (redirected, retried) keeps the gate it
     * came with, which it has passed already. */
    if (r->gate == NULL && current_gate != NULL) {
        void (*hold)(_Atomic int *) = atomic_load(&gate_hold);
        r->gate = current_gate;
        if (hold != NULL)
            hold(r->gate);
    }
    hl_monotime timeout = HL_MS(c->o->command_timeout_ms);
    r->queued_at = hl_monotime_now();
    r->deadline = r->queued_at + timeout;
    if (r->retry_until == 0)
        r->retry_until = r->deadline;
    if (last) {
        hl_conn_settle_last(c);
        c->last = r;
    } else {
        queue_push(&c->pending, r);
    }
    if (!c->request_timer.armed)
        hl_timer_arm(&c->request_timer, timeout);
    if (c->state == ST_UP)
        hl_prepare_start(&c->flusher);
    if (c->cfg.on_request)
        c->cfg.on_request(c->cfg.data);
    return 0;
}

static int enqueue(hl_conn *c, hl_request *r)
{
    return enqueue_at(c, r, false);
}

static int command_at(hl_conn *c, int argc, const char *const *argv,
                      const size_t *argvlen, hl_request_fn *fn, void *data,
                      bool last)
{
    if (c->state == ST_CLOSED)
        return HILOCK_ECLOSED;
    hl_request *r;
    int rc = hl_conn_format_request(&r, argc, argv, argvlen);
    if (rc != 0)
        return rc;
    r->fn = fn;
    r->data = data;
    return enqueue_at(c, r, last);
}

int hl_conn_command(hl_conn *c, int argc, const char *const *argv,
                    const size_t *argvlen, hl_request_fn *fn, void *data)
{
    return command_at(c, argc, argv, argvlen, fn, data, false);
}

int hl_conn_command_last(hl_conn *c, int argc, const char *const *argv,
                         const size_t *argvlen, hl_request_fn *fn, void *data)
{
    return command_at(c, argc, argv, argvlen, fn, data, true);
}

bool hl_conn_last_is(const hl_conn *c, hl_request_fn *fn, const void *data)
{
    return c->last != NULL && c->last->fn == fn && c->last->data == data;
}

void hl_conn_settle_last(hl_conn *c)
{
    if (c->last != NULL) {
        queue_push(&c->pending, c->last);
        c->last = NULL;
    }
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

void hl_conn_forget_scripts(hl_conn *c)
{
    memset(c->scripts_loaded, 0, sizeof c->scripts_loaded);
}

bool hl_conn_park(hl_conn *c, hl_request *r, hl_monotime delay)
{
    hl_monotime now = hl_monotime_now();
    if (c->state == ST_CLOSED || r->cmd == NULL ||
        now + delay >= r->retry_until)
        return false;
    r->retries++;
    /* r->asking stays: a TRYAGAIN from the node importing the slot came
     * after an ASKING, and without one that node would send r back to
     * the old master (MOVED), which sends it here again (ASK), until the
     * redirections run out.  Where the slot has settled meanwhile, an
     * ASKING is harmless. */
    r->not_before = now + delay;
    queue_push(&c->parked, r);
    hl_monotime first = INT64_MAX;
    for (hl_request *p = c->parked.head; p; p = p->next)
        if (p->not_before < first)
            first = p->not_before;
    hl_timer_arm(&c->retry_timer, first - now);
    return true;
}

/* Parked requests whose time came go to the back of the queue, each with
 * a fresh command timeout, as redirected ones do. */
void hl_conn_on_retry_timer(hl_timer *t)
{
    hl_conn *c = t->data;
    hl_monotime now = hl_monotime_now();
    hl_monotime first = INT64_MAX;
    req_queue keep = {0};
    hl_request *r;
    while ((r = queue_pop(&c->parked)) != NULL) {
        if (r->not_before <= now) {
            enqueue(c, r);
            continue;
        }
        if (r->not_before < first)
            first = r->not_before;
        queue_push(&keep, r);
    }
    c->parked = keep;
    if (first != INT64_MAX)
        hl_timer_arm(&c->retry_timer, first - now);
}

void hl_conn_set_redirect(hl_conn *c, hl_redirect_fn *fn, void *data)
{
    c->redirect = fn;
    c->redirect_data = fn ? data : NULL;
}

/* The request gets a fresh command timeout on its new node: the hops are
 * bounded by HL_MAX_REDIRECTS, so a caller waits a bounded multiple of
 * the timeout, and the queue stays sorted by deadline, which the single
 * request timer relies on. */
bool hl_conn_requeue(hl_conn *to, hl_request *r, bool asking)
{
    if (to->state == ST_CLOSED || r->cmd == NULL)
        return false;
    r->redirects++;
    r->asking = asking;
    r->next = NULL;
    enqueue(to, r);
    return true;
}

/* Moves the requests of q that where sends elsewhere; the others stay
 * in their order. */
static void reroute_queue(hl_conn *c, req_queue *q, hl_reroute_fn *where,
                          void *data)
{
    req_queue keep = {0};
    hl_request *r;
    while ((r = queue_pop(q)) != NULL) {
        hl_conn *to = r->internal || r->cmd == NULL ||
                              r->redirects >= HL_MAX_REDIRECTS
                          ? NULL
                          : where(data, r->cmd, r->len);
        if (to == NULL || to == c || !hl_conn_requeue(to, r, false))
            queue_push(&keep, r);
    }
    *q = keep;
}

void hl_conn_reroute(hl_conn *c, hl_reroute_fn *where, void *data)
{
    /* An up connection writes what it has within this loop iteration, and
     * its node answers MOVED for a slot it no longer serves. */
    if (c->state == ST_UP || c->state == ST_CLOSED)
        return;
    hl_conn_settle_last(c);
    reroute_queue(c, &c->pending, where, data);
    reroute_queue(c, &c->parked, where, data);
    hl_conn_arm_request_timer(c);
}

int hl_conn_send(hl_conn *c, int argc, const char *const *argv,
                 const size_t *argvlen)
{
    if (c->state == ST_CLOSED)
        return HILOCK_ECLOSED;
    if (c->state != ST_UP)
        return HILOCK_EIO;
    hl_request *r;
    int rc = hl_conn_format_request(&r, argc, argv, argvlen);
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


/* ---- request deadlines ----------------------------------------------- */

void hl_conn_arm_request_timer(hl_conn *c)
{
    hl_monotime next = INT64_MAX;
    if (c->pending.head)
        next = c->pending.head->deadline;
    if (c->last && c->last->deadline < next)
        next = c->last->deadline;
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

void hl_conn_on_request_timer(hl_timer *t)
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
        hl_conn_complete(r, HILOCK_ETIMEDOUT, NULL, why);
    }
    if (c->last && c->last->deadline <= now && c->state != ST_CLOSED) {
        hl_request *r = c->last;
        c->last = NULL;
        hl_conn_complete(r, HILOCK_ETIMEDOUT, NULL,
                         "not connected within the command timeout");
    }
    hl_request *head = c->sent.head;
    if (head && !head->internal && head->deadline <= now &&
        c->state != ST_CLOSED) {
        char why[128];
        snprintf(why, sizeof why,
                 "no reply within the command timeout (%lld ms); connection "
                 "reset",
                 (long long)c->o->command_timeout_ms);
        hl_conn_drop(c, HILOCK_ETIMEDOUT, why);
    }
    if (c->state != ST_CLOSED)
        hl_conn_arm_request_timer(c);
    hl_conn_unref(c);
}

void hl_conn_set_publish(hl_conn *c, hl_publish how) { c->publish = how; }

hl_publish hl_conn_publish(const hl_conn *c) { return c->publish; }
