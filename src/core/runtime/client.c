#include <stdlib.h>
#include <stdio.h>
#include <string.h>

#include <openssl/rand.h>

#include "core/base/alloc.h"
#include "core/runtime/client_state.h"
#include "core/config/hostlist.h"
#include "core/runtime/ack.h"
#include "core/runtime/cluster.h"
#include "core/runtime/sentinel.h"
#include "core/transport/keyslot.h"
#include "core/base/error_detail.h"
#include "core/base/handle.h"
#include "core/base/thread.h"
#include "core/base/map.h"
#include "core/runtime/op.h"
#include "core/runtime/presence.h"
#include "core/config/option_values.h"
#include "core/transport/stream.h"

/* ---- loop-thread plumbing -------------------------------------------- */

bool hl_client_in_loop(const hilock_client *c)
{
    return pthread_equal(pthread_self(), atomic_load(&c->loop_tid)) != 0;
}

static void client_free_memory(hilock_client *c)
{
    hl_cluster_free(c->cluster);
    hl_acks_free(c);
    hl_free(c->seeds);
    if (atomic_load(&c->lost_fd) >= 0)
        close(atomic_load(&c->lost_fd));
    if (c->own_loop && c->loop)
        hl_loop_destroy(c->loop);
    SSL_CTX_free(c->ssl_ctx);
    hilock_options_free(c->opts);
    pthread_mutex_destroy(&c->lock);
    pthread_cond_destroy(&c->cond);
    hl_handle_release(c);
}

void hl_client_ref(hilock_client *c) { atomic_fetch_add(&c->mem_refs, 1); }

void hl_client_unref(hilock_client *c)
{
    if (atomic_fetch_sub(&c->mem_refs, 1) == 1)
        client_free_memory(c);
}

void hl_client_enter_callback(hilock_client *c) { c->callback_depth++; }

void hl_client_leave_callback(hilock_client *c)
{
    if (--c->callback_depth == 0 && c->free_when_idle) {
        c->free_when_idle = false; /* the client's own reference, once */
        hl_client_unref(c);
    }
}

int hl_client_attach_part(hilock_client *c, const hl_client_part *part)
{
    int rc = 0;
    pthread_mutex_lock(&c->lock);
    int i = 0;
    while (i < c->nparts && c->parts[i] != part)
        i++;
    if (i < c->nparts) {
        /* attached already */
    } else if (c->nparts == HL_CLIENT_PARTS) {
        rc = -1;
    } else {
        i = c->nparts++;
        while (i > 0 && c->parts[i - 1]->rank > part->rank) {
            c->parts[i] = c->parts[i - 1];
            i--;
        }
        c->parts[i] = part;
    }
    pthread_mutex_unlock(&c->lock);
    return rc;
}

static int client_parts(hilock_client *c, const hl_client_part **out)
{
    pthread_mutex_lock(&c->lock);
    int n = c->nparts;
    memcpy(out, c->parts, (size_t)n * sizeof *out);
    pthread_mutex_unlock(&c->lock);
    return n;
}

/* Stop everything on the loop thread.  Every pending request, operation
 * and queued task completes with HILOCK_ECLOSED. */
static void client_shutdown(hilock_client *c)
{
    pthread_mutex_lock(&c->lock);
    bool first = c->conn != NULL;
    c->closed = true;
    bool queued = c->ops_head != NULL || c->cancels_head != NULL;
    /* Taken with closed set: a part attached later finds the client
     * closed and has nothing to close. */
    const hl_client_part *parts[HL_CLIENT_PARTS];
    int nparts = c->nparts;
    memcpy(parts, c->parts, sizeof parts);
    pthread_mutex_unlock(&c->lock);
    if (!first && !queued)
        return;
    hl_client_enter_callback(c);
    /* Handles first: their pending acquires end with HILOCK_ECLOSED and
     * their leases stop before the connection that renews them goes, and
     * their hold listeners end the multi-lock calls coordinated here
     * before the ops still queued are drained (hl_op_drain, below). */
    int p = 0;
    for (; p < nparts && parts[p]->rank < 0; p++)
        parts[p]->close(c);
    hl_op_cancel_live(c);
    pthread_mutex_lock(&c->lock);
    c->locks_detached = true;
    pthread_cond_broadcast(&c->cond);
    pthread_mutex_unlock(&c->lock);
    /* Before the seed connections, so that a topology read they fail
     * finds the cluster closed, and no sentinel answer moves them. */
    hl_cluster_close(c->cluster);
    hl_sentinel_free(c->sentinel);
    c->sentinel = NULL;
    int nconns = c->nconns;
    hl_conn *conns[HILOCK_MAX_CONNECTIONS];
    memcpy(conns, c->conns, sizeof conns);
    memset(c->conns, 0, sizeof c->conns);
    c->conn = NULL;
    c->nconns = 0;
    atomic_store(&c->connected, false);
    for (int i = 0; i < nconns; i++)
        if (conns[i])
            hl_conn_free(conns[i]);
    hl_acks_close(c);
    for (; p < nparts; p++)
        parts[p]->close(c);
    hl_pubsub *ps = c->pubsub;
    c->pubsub = NULL;
    if (ps)
        hl_pubsub_free(ps);
    hl_cluster_free_pubsubs(c->cluster);
    hl_op_drain(c);
    hl_op_wake_sleepers(c); /* the loop may not turn again */
    if (first) {
        hl_async_stop(&c->wakeup);
        hl_idle_stop(&c->spin);
        if (c->own_loop)
            hl_loop_break(c->loop);
    }
    hl_client_leave_callback(c);
}

/* Busy polling (busy_poll_us): while the spin watcher is active, libev
 * polls without blocking, so the loop sees an answer the moment it
 * arrives, at the cost of a core.  Fixed (busy_poll_us > 0), it lasts
 * while requests are outstanding and that long after.  By default (0) it
 * is the loop's share of what a blocking caller does for itself: after
 * a request made on the loop's own thread (a callback's), the loop
 * stays awake for about twice the connection's recent round trip, and
 * not at all when answers take longer than HL_SPIN_MAX_US.  Not while a
 * blocking caller waits (that one spins for its own answer), nor within
 * HL_OUTSIDE_BUSY_US of running what another thread asked for: that
 * thread is likely still at work, and a third runnable thread would
 * take the server's core on a small machine.  With -1 the loop always
 * sleeps. */
#define HL_OUTSIDE_BUSY_US 1000
static bool requests_outstanding(const hilock_client *c)
{
    for (int i = 0; i < c->nconns; i++)
        if (hl_conn_busy(c->conns[i]))
            return true;
    return false;
}

static void on_spin(hl_idle *w)
{
    hilock_client *c = w->data;
    hl_monotime now = hl_monotime_now();
    if (c->opts->busy_poll_us > 0 && requests_outstanding(c)) {
        atomic_store_explicit(&c->spin_until, now + c->opts->busy_poll_us,
                              memory_order_relaxed);
        return;
    }
    /* Waiting callers keep the loop busy without help: several of them
     * by their hand-overs, one by its own spin. */
    int callers = hl_op_waiting();
    if (callers > (c->opts->busy_poll_us > 0 ? 1 : 0) ||
        now > atomic_load_explicit(&c->spin_until, memory_order_relaxed) ||
        (c->opts->busy_poll_us == 0 && !requests_outstanding(c)))
        hl_idle_stop(w);
}

static void on_request(void *data)
{
    hilock_client *c = data;
    if (c->opts->busy_poll_us > 0) {
        hl_idle_start(&c->spin);
        return;
    }
    if (c->opts->busy_poll_us < 0 || hl_op_waiting() > 0)
        return;
    hl_monotime now = hl_monotime_now();
    if (now - c->outside_at < HL_OUTSIDE_BUSY_US)
        return;
    int64_t rtt = atomic_load_explicit(&c->rtt_us, memory_order_relaxed);
    int64_t us = rtt > 0 ? hl_blocking_spin_for(rtt) : 0;
    if (us == 0)
        return;
    atomic_store_explicit(&c->spin_until, now + us, memory_order_relaxed);
    hl_idle_start(&c->spin);
}

/* The end of a loop iteration in which blocked callers were answered. */
static void on_loop_turned(hl_prepare *w)
{
    hl_op_wake_sleepers(w->data);
}

static void on_wakeup(hl_async *w)
{
    hilock_client *c = w->data;
    hl_client_enter_callback(c);
    if (atomic_load(&c->closed))
        client_shutdown(c);
    else {
        c->outside_at = hl_monotime_now();
        hl_op_run_queued(c);
    }
    hl_client_leave_callback(c);
}

bool hl_client_first_attempt_done(hilock_client *c)
{
    pthread_mutex_lock(&c->lock);
    bool done = c->first_done;
    pthread_mutex_unlock(&c->lock);
    return done;
}

void hl_client_set_connect_hook(hilock_client *c, hl_connect_hook_fn *fn,
                                void *data)
{
    c->connect_hook = fn;
    c->connect_hook_data = fn ? data : NULL;
}

void *hl_client_connect_hook_data(const hilock_client *c,
                                  hl_connect_hook_fn *fn)
{
    return c->connect_hook == fn ? c->connect_hook_data : NULL;
}

int hl_client_hook_command(hilock_client *c, int argc,
                           const char *const *argv, const size_t *argvlen,
                           hl_hook_reply_fn *fn, void *data)
{
    if (c->hook_conn == NULL)
        return hl_fail(HILOCK_EINVAL, "a hook command outside the hook");
    return hl_conn_command(c->hook_conn, argc, argv, argvlen, fn, data);
}

/* The first connection attempt ends when every connection is up and the
 * client knows whether it talks to a cluster (and, if so, has read its
 * topology once), or at the first failure. */
static void note_first_attempt(hilock_client *c, int status,
                               const char *detail)
{
    pthread_mutex_lock(&c->lock);
    if (!c->first_done) {
        c->first_done = true;
        c->first_status = status;
        snprintf(c->first_detail, sizeof c->first_detail, "%s",
                 detail ? detail : "");
        pthread_cond_broadcast(&c->cond);
    }
    pthread_mutex_unlock(&c->lock);
}

static bool all_conns_up(const hilock_client *c)
{
    return c->up_mask == (1u << c->nconns) - 1;
}

static void on_cluster_ready(hilock_client *c)
{
    c->mode_known = true;
    hl_presence_routed(c);
    if (all_conns_up(c))
        note_first_attempt(c, 0, NULL);
}

static void on_cluster_info(void *data, int status, hilock_reply *reply)
{
    hilock_client *c = data;
    /* A server that refuses INFO (an ACL without it) or answers oddly is
     * taken for a single server: routing needs the answer, and a cluster
     * node would still say where keys live with MOVED. */
    bool cluster = status == HILOCK_OK && reply != NULL &&
                   (reply->type == HILOCK_REPLY_STRING ||
                    reply->type == HILOCK_REPLY_STATUS) &&
                   strstr(reply->str, "cluster_enabled:1") != NULL;
    hilock_reply_free(reply);
    if (c->closed || c->mode_known)
        return;
    if (status == HILOCK_ECLOSED)
        return;
    if (status == HILOCK_EIO || status == HILOCK_ETIMEDOUT) {
        /* Lost with the connection: ask again when one comes up. */
        c->mode_asked = false;
        return;
    }
    if (cluster) {
        c->cluster = hl_cluster_create(c, &c->conn_cfg, on_cluster_ready);
        if (c->cluster != NULL) {
            for (int i = 0; i < c->nconns; i++)
                hl_conn_set_redirect(c->conns[i], hl_cluster_redirect,
                                     c->cluster);
            return; /* on_cluster_ready goes on */
        }
    }
    c->mode_known = true;
    hl_presence_routed(c);
    if (all_conns_up(c))
        note_first_attempt(c, 0, NULL);
}

/* Asked once: mode_asked stays set until the answer is lost with its
 * connection, so that a second connection coming up while the topology
 * is read does not make a second cluster. */
static void ask_cluster_mode(hilock_client *c, hl_conn *conn)
{
    const char *argv[] = {"INFO", "cluster"};
    size_t lens[] = {4, 7};
    if (hl_conn_command(conn, 2, argv, lens, on_cluster_info, c) == 0)
        c->mode_asked = true;
    else
        c->mode_known = true; /* out of memory: route as a single server */
}

/* The first attempt failed on the current seed: point every connection
 * at the next one.  Each connection reads the address when it starts an
 * attempt, so this takes effect at their next retry.  A seed counts as
 * failed once every connection failed on it.  False when no seed is
 * left, and the failure is the client's. */
static bool try_next_seed(hilock_client *c)
{
    if (c->next_seed == NULL)
        return false;
    if (++c->seed_downs < c->nconns)
        return true;
    c->seed_downs = 0;
    char host[256];
    int port;
    for (int got; (got = hl_hostlist_next(&c->next_seed, host, sizeof host,
                                          &port)) >= 0;)
        if (got == 1 && hilock_options_set_host(c->opts, host) == HILOCK_OK &&
            hilock_options_set_port(c->opts, port) == HILOCK_OK)
            return true;
    return false;
}

static void on_conn_event(hl_conn *conn, hl_conn_event ev, int status,
                          const char *detail, hilock_reply *reply, void *data)
{
    hilock_client *c = data;
    hilock_reply_free(reply);
    if (ev == HL_CONN_PUSH)
        return;
    int i = 0;
    while (i < c->nconns && c->conns[i] != conn)
        i++;
    if (i == c->nconns)
        return;
    if (ev == HL_CONN_UP) {
        c->up_mask |= 1u << i;
        /* Once, on the first connection up: the answer comes before any
         * request of the caller, who waits for the first attempt. */
        if (!c->mode_known && !c->mode_asked)
            ask_cluster_mode(c, conn);
        /* Before the connection counts as up, so that whatever the hook
         * learns from its commands is pending before anyone may act on
         * the connection being up. */
        if (c->connect_hook) {
            c->hook_conn = conn;
            c->connect_hook(c, c->connect_hook_data);
            c->hook_conn = NULL;
        }
        /* Back after a break: the server may have restarted without its
         * data (a restarted server is always met on a new connection),
         * and a holder must hear of that now, not at its next renewal,
         * while a waiter elsewhere may already have the lock. */
        hl_client_conn_event(c, conn, true, NULL);
        hl_presence_conn_up(c, conn);
        if (hl_conn_get_stats(conn).connects > 1)
            hl_client_master_changed(c, "a connection came back after a "
                                        "break; the server may have "
                                        "restarted");
    } else {
        c->up_mask &= ~(1u << i);
        hl_client_conn_event(c, conn, false, detail);
        if (c->cluster)
            hl_cluster_refresh_soon(c->cluster);
        /* The master may have failed over, or been demoted; unless the
         * client is leaving it for the master the sentinels named, when
         * another round would only ask again what they just said, and a
         * sentinel that lags could answer first. */
        if (c->sentinel && !c->moving)
            hl_sentinel_ask(c->sentinel);
    }
    bool all_up = all_conns_up(c);
    atomic_store(&c->connected, all_up);
    if (ev == HL_CONN_DOWN && !c->first_done && try_next_seed(c))
        return;
    if (ev == HL_CONN_DOWN)
        note_first_attempt(c, status, detail);
    else if (all_up && c->mode_known)
        note_first_attempt(c, 0, NULL);
}

/* A sentinel named the master (status OK) or a round of sentinels
 * failed.  A new address moves every connection there: requests in
 * flight on the old master end with HILOCK_EIO, queued ones go to the
 * new one, and what was granted through the old one is checked at once.
 * A round names a master other than the one followed only with a
 * majority of the sentinels behind it (sentinel.h); an announced switch
 * is the sentinels' own new configuration. */
static void on_sentinel_answer(hilock_client *c, int status,
                               const char *detail, const char *host,
                               int port, bool vouched)
{
    if (status != HILOCK_OK) {
        char why[320];
        snprintf(why, sizeof why, "the sentinels did not vouch for it (%s)",
                 detail ? detail : hilock_strerror(status));
        hl_ack_topology(c, NULL, HL_ACK_MASTER_UNKNOWN, why, 0);
        if (!c->first_done)
            note_first_attempt(c, status, detail);
        return;
    }
    bool same = c->master_known && c->opts->port == port &&
                strcmp(c->opts->host, host) == 0;
    if (same && vouched)
        hl_ack_topology(c, NULL, HL_ACK_MASTER_CONFIRMED, NULL,
                        hl_sentinel_round_begun(c->sentinel));
    if (same || c->closed)
        return;
    if (c->master_known)
        hl_ack_topology(c, NULL, HL_ACK_MASTER_REPLACED,
                        "the sentinels name another master", 0);
    if (hilock_options_set_host(c->opts, host) != HILOCK_OK ||
        hilock_options_set_port(c->opts, port) != HILOCK_OK)
        return; /* out of memory: the next answer tries again */
    if (!c->master_known) {
        c->master_known = true;
        for (int i = 0; i < c->nconns; i++)
            hl_conn_start(c->conns[i]);
        return;
    }
    c->master_moves++;
    char why[320];
    snprintf(why, sizeof why, "the master moved to %s:%d", host, port);
    c->moving = true;
    for (int i = 0; i < c->nconns; i++)
        hl_conn_retarget(c->conns[i], HILOCK_EIO, why);
    c->moving = false;
    if (c->pubsub)
        hl_pubsub_reconnect(c->pubsub, why);
    hl_client_master_changed(c, why);
}

void hl_client_event(hilock_client *c, int type, const char *server,
                     const char *detail, struct hilock_lock *lock,
                     uint64_t owner)
{
    if (c->opts->event_cb == NULL || c->closed)
        return;
    hilock_event ev = {.type = (hilock_event_type)type,
                       .server = server,
                       .detail = detail,
                       .lock = lock,
                       .owner = owner};
    hl_client_enter_callback(c);
    c->opts->event_cb(c, &ev, c->opts->event_data);
    hl_client_leave_callback(c);
}

void hl_client_conn_event(hilock_client *c, const hl_conn *conn, bool up,
                          const char *detail)
{
    if (c->opts->event_cb == NULL)
        return;
    char server[300];
    hl_conn_address(conn, server, sizeof server);
    hl_client_event(c, up ? HILOCK_EVENT_CONNECTED : HILOCK_EVENT_DISCONNECTED,
                    server, detail, NULL, 0);
}

void hl_client_master_changed(hilock_client *c, const char *why)
{
    c->master_changes++;
    hl_client_event(c, HILOCK_EVENT_MASTER_CHANGED, NULL, why, NULL, 0);
    pthread_mutex_lock(&c->lock);
    const hl_client_part *parts[HL_CLIENT_PARTS];
    int nparts = c->nparts;
    memcpy(parts, c->parts, sizeof parts);
    pthread_mutex_unlock(&c->lock);
    for (int p = 0; p < nparts; p++)
        if (parts[p]->master_changed)
            parts[p]->master_changed(c);
}

hl_conn *hl_client_conn_for(const hilock_client *c, const char *name,
                            size_t len)
{
    if (c->cluster)
        return hl_cluster_conn_for_slot(c->cluster, hl_keyslot(name, len));
    if (c->nconns <= 1)
        return c->conn;
    return c->conns[hl_hash_bytes(name, len) % (uint64_t)c->nconns];
}

hl_pubsub *hl_client_pubsub(hilock_client *c)
{
    if (c->pubsub == NULL && !c->closed) {
        hl_pubsub_config cfg = {
            .loop = c->loop, .opts = c->opts, .ssl_ctx = c->ssl_ctx};
        c->pubsub = hl_pubsub_create(&cfg);
    }
    return c->pubsub;
}

int hl_client_pubsubs_for(hilock_client *c, const char *channel, size_t len,
                          hl_pubsub *out[HL_CLIENT_MAX_PUBSUBS])
{
    if (c->closed)
        return 0;
    if (c->cluster == NULL || !hl_cluster_sharded(c->cluster)) {
        out[0] = hl_client_pubsub(c);
        return out[0] != NULL;
    }
    int mode = hl_channel_is_own(channel, len)
                   ? HILOCK_REDISSON_PUBSUB_SHARDED
                   : c->opts->redisson_pubsub;
    int n = 0;
    if (mode != HILOCK_REDISSON_PUBSUB_PLAIN &&
        (out[n++] = hl_cluster_pubsub_for(c->cluster, channel, len, true)) ==
            NULL)
        return 0;
    if (mode != HILOCK_REDISSON_PUBSUB_SHARDED &&
        (out[n++] = hl_cluster_pubsub_for(c->cluster, channel, len,
                                          false)) == NULL)
        return 0;
    return n;
}

int hl_client_listen(hilock_client *c, hl_sub *sub, const char *channel,
                     size_t len, hl_sub_fn *fn, void *data)
{
    hl_pubsub *ps[HL_CLIENT_MAX_PUBSUBS];
    if (!hl_channel_is_own(channel, len) ||
        hl_client_pubsubs_for(c, channel, len, ps) < 1)
        return -HILOCK_ENOMEM;
    return hl_pubsub_subscribe(ps[0], sub, channel, len, fn, data);
}

void hl_client_timer_init(hilock_client *c, hl_timer *timer, hl_timer_fn *fn,
                          void *data)
{
    hl_timer_init(timer, c->loop, fn, data);
}

static void *loop_main(void *arg)
{
    hilock_client *c = arg;
    atomic_store(&c->loop_tid, pthread_self());
    pthread_mutex_lock(&c->lock);
    pthread_cond_broadcast(&c->cond);
    pthread_mutex_unlock(&c->lock);
    hl_loop_run(c->loop);
    pthread_mutex_lock(&c->lock);
    c->loop_exited = true;
    bool free_me = c->free_on_thread_exit;
    pthread_mutex_unlock(&c->lock);
    if (free_me)
        hl_client_unref(c);
    return NULL;
}

/* ---- create / close / destroy ---------------------------------------- */

#ifdef HILOCK_TEST_HOOKS
int (*hilock__rand_bytes)(unsigned char *buf, int num) = RAND_bytes;
#define rand_bytes hilock__rand_bytes
#else
#define rand_bytes RAND_bytes
#endif

/* A failing CSPRNG fails the client: an id from any weaker source could
 * be guessed or repeated, and two owners sharing an id would each think
 * they hold what the other holds. */
static int make_uuid(char out[HILOCK_CLIENT_ID_LEN + 1])
{
    unsigned char b[16];
    if (rand_bytes(b, sizeof b) != 1)
        return hl_fail(HILOCK_ERANDOM,
                       "the CSPRNG could not make a client id");
    b[6] = (unsigned char)((b[6] & 0x0f) | 0x40);
    b[8] = (unsigned char)((b[8] & 0x3f) | 0x80);
    snprintf(out, HILOCK_CLIENT_ID_LEN + 1,
             "%02x%02x%02x%02x-%02x%02x-%02x%02x-%02x%02x-"
             "%02x%02x%02x%02x%02x%02x",
             b[0], b[1], b[2], b[3], b[4], b[5], b[6], b[7], b[8], b[9],
             b[10], b[11], b[12], b[13], b[14], b[15]);
    return HILOCK_OK;
}

static int wait_first_connect(hilock_client *c)
{
    /* The connection enforces the connect timeout itself; the extra
     * second only guards against a loop thread that never answers.  Each
     * seed may take a whole attempt and a backoff before the next.  With
     * Sentinel, one round asks every sentinel at once, within the connect
     * timeout, and the master's connection then has one more. */
    int64_t attempts = c->first_attempts;
    int64_t wait_ms = attempts * c->opts->connect_timeout_ms + 1000;
    if (c->opts->sentinel_master == NULL)
        wait_ms += (attempts - 1) * c->opts->reconnect_max_ms;
    struct timespec until = hl_monotonic_deadline(HL_MS(wait_ms));
    int rc = 0;
    pthread_mutex_lock(&c->lock);
    while (!c->first_done && rc == 0)
        rc = pthread_cond_timedwait(&c->cond, &c->lock, &until);
    int status = c->first_done ? c->first_status : HILOCK_ETIMEDOUT;
    pthread_mutex_unlock(&c->lock);
    if (status != 0) {
        if (c->first_done)
            hl_set_detail(c->first_detail);
        else
            hl_set_detail("connection not ready within the connect timeout");
    }
    return status;
}

static int start_loop_thread(hilock_client *c)
{
    if (hl_thread_start(&c->thread, false, loop_main, c) != 0)
        return -1;
    c->thread_running = true;
    return 0;
}

static void join_loop_thread(hilock_client *c)
{
    pthread_mutex_lock(&c->lock);
    bool join = c->thread_running;
    c->thread_running = false;
    pthread_mutex_unlock(&c->lock);
    if (join)
        pthread_join(c->thread, NULL);
}

/* Close from a thread other than the loop's (own loop only). */
static void close_from_outside(hilock_client *c)
{
    pthread_mutex_lock(&c->lock);
    c->closed = true;
    if (c->thread_running)
        hl_async_send(&c->wakeup);
    pthread_mutex_unlock(&c->lock);
    join_loop_thread(c);
}

/* Close from the loop thread of another client, which must not wait for
 * this one's (own loop only): the loop thread closes the client by
 * itself, and a later destroy joins it. */
static void close_handed_over(hilock_client *c)
{
    pthread_mutex_lock(&c->lock);
    c->closed = true;
    if (c->thread_running && !c->loop_exited)
        hl_async_send(&c->wakeup);
    pthread_mutex_unlock(&c->lock);
}

/* Destroy from the loop thread of another client: the loop thread, once
 * it has closed the client, frees it as it does when the client is
 * destroyed on it; a thread that has left its loop already is joined at
 * once. */
static void destroy_handed_over(hilock_client *c)
{
    pthread_mutex_lock(&c->lock);
    c->closed = true;
    bool joinable = c->thread_running;
    bool in_its_loop = joinable && !c->loop_exited;
    c->thread_running = false;
    if (in_its_loop) {
        c->free_on_thread_exit = true;
        hl_async_send(&c->wakeup);
    }
    pthread_mutex_unlock(&c->lock);
    if (in_its_loop) {
        pthread_detach(c->thread);
        return;
    }
    if (joinable)
        pthread_join(c->thread, NULL); /* it has ended */
    hl_client_unref(c);
}

int hilock_client_create(hilock_client **out, const hilock_options *opts)
{
    hl_clear_detail();
    if (out == NULL)
        return hl_fail(HILOCK_EINVAL, "out is NULL");
    *out = NULL;
    hilock_client *c = hl_calloc(1, sizeof *c);
    if (c != NULL)
        atomic_init(&c->lost_fd, -1);
    if (c == NULL)
        return hl_fail(HILOCK_ENOMEM, "out of memory for the client");
    atomic_init(&c->mem_refs, 1);
    int rc = opts ? hilock_options_copy(&c->opts, opts)
                  : hilock_options_create(&c->opts);
    if (rc != 0) {
        hl_free(c);
        return hl_fail(HILOCK_ENOMEM, "out of memory for the options");
    }
    pthread_mutex_init(&c->lock, NULL);
    pthread_condattr_t attr;
    pthread_condattr_init(&attr);
    pthread_condattr_setclock(&attr, CLOCK_MONOTONIC);
    pthread_cond_init(&c->cond, &attr);
    pthread_condattr_destroy(&attr);
    /* With a loop thread of its own it waits for the first connection,
     * which would stall the loop of the callback it is called from. */
    if (c->opts->loop == NULL && !hl_op_caller_may_wait()) {
        rc = hl_fail(HILOCK_EDEADLK,
                     "a client with its own loop thread waits for its "
                     "first connection: not on a loop thread of the "
                     "library");
        goto fail;
    }
    rc = make_uuid(c->id);
    if (rc != HILOCK_OK)
        goto fail;

    if (c->opts->user && !c->opts->password) {
        rc = hl_fail(HILOCK_EINVAL, "user '%s' has no password",
                     c->opts->user);
        goto fail;
    }
    if (c->opts->tls) {
        char err[256];
        c->ssl_ctx = hl_tls_context_create(c->opts, err, sizeof err);
        if (c->ssl_ctx == NULL) {
            rc = hl_fail(HILOCK_ETLS, "%s", err);
            goto fail;
        }
    }
    bool sentinel = c->opts->sentinel_master != NULL;
    /* Each round asks them all at once, over a connection each: their
     * number is bounded, and a longer list is refused, never cut. */
    if (sentinel && hl_sentinel_count(c->opts) > HILOCK_MAX_SENTINELS) {
        rc = hl_fail(HILOCK_EINVAL,
                     "the options name %d sentinels; at most %d "
                     "(HILOCK_MAX_SENTINELS)",
                     hl_sentinel_count(c->opts), HILOCK_MAX_SENTINELS);
        goto fail;
    }
    /* The sentinels' round and the master, or each seed in turn. */
    c->first_attempts = sentinel ? 2 : hl_hostlist_count(c->opts->seeds) + 1;
    if (c->opts->seeds && !sentinel) {
        c->seeds = hl_strdup(c->opts->seeds);
        if (c->seeds == NULL) {
            rc = hl_fail(HILOCK_ENOMEM, "out of memory for the seed list");
            goto fail;
        }
        c->next_seed = c->seeds;
    }
    c->own_loop = c->opts->loop == NULL;
    c->loop = c->own_loop ? hl_loop_new() : c->opts->loop;
    if (c->loop == NULL) {
        rc = hl_fail(HILOCK_ENOMEM, "cannot create an event loop");
        goto fail;
    }
    if (!c->own_loop)
        atomic_store(&c->loop_tid, pthread_self());
    hl_async_init(&c->wakeup, c->loop, on_wakeup, c);
    hl_idle_init(&c->spin, c->loop, on_spin, c);
    hl_prepare_init(&c->waker, c->loop, on_loop_turned, c);
    hl_async_start(&c->wakeup);
    hl_conn_config cfg = {.loop = c->loop,
                          .opts = c->opts,
                          .ssl_ctx = c->ssl_ctx,
                          .on_event = on_conn_event,
                          .on_request = on_request,
                          .rtt_us = &c->rtt_us,
                          /* With Sentinel: once a sentinel named the
                           * master, and only while it is one. */
                          .paused = sentinel,
                          .verify_master = sentinel,
                          .probe_wait =
                              c->opts->replica_ack != HILOCK_ACK_NONE,
                          .probe_fsync = c->opts->wait_fsync,
                          .data = c};
    c->conn_cfg = cfg;
    bool made = true;
    for (int i = 0; i < c->opts->connections && made; i++) {
        c->conns[i] = hl_conn_create(&cfg);
        made = c->conns[i] != NULL;
        c->nconns = i + 1;
    }
    c->conn = c->conns[0];
    if (made && sentinel) {
        c->sentinel = hl_sentinel_create(c, c->ssl_ctx, on_sentinel_answer);
        made = c->sentinel != NULL;
    }
    if (!made || hl_handle_add(c) != 0) {
        hl_sentinel_free(c->sentinel);
        c->sentinel = NULL;
        for (int i = 0; i < c->nconns; i++)
            if (c->conns[i])
                hl_conn_free(c->conns[i]);
        memset(c->conns, 0, sizeof c->conns);
        c->nconns = 0;
        c->conn = NULL;
        hl_async_stop(&c->wakeup);
        rc = hl_fail(HILOCK_ENOMEM, "out of memory for the connection");
        goto fail;
    }
    if (!c->own_loop) {
        *out = c;
        return HILOCK_OK;
    }
    if (start_loop_thread(c) != 0) {
        hl_handle_remove(c);
        for (int i = 0; i < c->nconns; i++)
            hl_conn_free(c->conns[i]);
        memset(c->conns, 0, sizeof c->conns);
        c->nconns = 0;
        c->conn = NULL;
        hl_async_stop(&c->wakeup);
        rc = hl_fail(HILOCK_ENOMEM, "cannot start the loop thread");
        goto fail;
    }
    rc = wait_first_connect(c);
    if (rc != 0) {
        char detail[256];
        snprintf(detail, sizeof detail, "%s", hilock_last_error());
        hl_handle_remove(c);
        close_from_outside(c);
        hl_client_unref(c);
        return hl_fail(rc, "%s", detail);
    }
    *out = c;
    return HILOCK_OK;
fail:
    hl_client_unref(c);
    return rc;
}

int hilock_client_close(hilock_client *c)
{
    if (c == NULL)
        return hl_fail(HILOCK_EINVAL, "client is NULL");
    if (!hl_handle_is_live(c))
        return hl_fail(HILOCK_ECLOSED, "not a live client");
    bool in_loop = hl_client_in_loop(c);
    if (!c->own_loop && !in_loop)
        return hl_fail(HILOCK_EINVAL,
                       "a client on the caller's loop closes on that loop's "
                       "thread");
    pthread_mutex_lock(&c->lock);
    bool was_closed = c->closed;
    pthread_mutex_unlock(&c->lock);
    if (in_loop)
        client_shutdown(c);
    else if (!hl_op_caller_may_wait())
        close_handed_over(c);
    else
        close_from_outside(c);
    return was_closed ? hl_fail(HILOCK_ECLOSED, "client was closed already")
                      : HILOCK_OK;
}

int hilock_client_destroy(hilock_client *c)
{
    if (c == NULL)
        return hl_fail(HILOCK_EINVAL, "client is NULL");
    if (!hl_handle_is_live(c))
        return hl_fail(HILOCK_ECLOSED, "client was destroyed already");
    bool in_loop = hl_client_in_loop(c);
    if (!c->own_loop && !in_loop)
        return hl_fail(HILOCK_EINVAL,
                       "a client on the caller's loop is destroyed on that "
                       "loop's thread");
    if (!hl_handle_remove(c))
        return hl_fail(HILOCK_ECLOSED, "client was destroyed already");
    if (!in_loop && !hl_op_caller_may_wait()) {
        destroy_handed_over(c);
        return HILOCK_OK;
    }
    if (!in_loop) {
        close_from_outside(c);
        hl_client_unref(c);
        return HILOCK_OK;
    }
    hl_client_enter_callback(c);
    client_shutdown(c);
    if (c->own_loop) {
        /* The loop thread cannot join itself: it frees the client once
         * its loop has stopped. */
        pthread_mutex_lock(&c->lock);
        c->free_on_thread_exit = true;
        c->thread_running = false;
        pthread_mutex_unlock(&c->lock);
        pthread_detach(pthread_self());
        c->callback_depth--;
        return HILOCK_OK;
    }
    c->free_when_idle = true;
    hl_client_leave_callback(c);
    return HILOCK_OK;
}

const char *hilock_client_id(const hilock_client *c)
{
    return c ? c->id : NULL;
}

int hilock_client_is_tls(const hilock_client *c)
{
    return c ? c->opts->tls != 0 : -1;
}

int hilock_client_is_connected(const hilock_client *c)
{
    return c ? atomic_load(&c->connected) : 0;
}

void hl_client_read_counters(hilock_client *c, hilock_client_stats *out)
{
    memset(out, 0, sizeof *out);
    const hl_client_part *parts[HL_CLIENT_PARTS];
    int n = client_parts(c, parts);
    for (int i = 0; i < n; i++)
        if (parts[i]->stats)
            parts[i]->stats(c, out);
    for (int i = 0; i < c->nconns; i++) {
        hl_conn_stats s = hl_conn_get_stats(c->conns[i]);
        out->connects += s.connects;
        out->writes += s.writes;
    }
    if (c->cluster)
        hl_cluster_add_stats(c->cluster, &out->connects, &out->writes);
    out->publishes_refused = c->publishes_refused;
    out->subscribes_refused = c->subscribes_refused;
}

void hl_client_replica_answered(hilock_client *c)
{
    if (c->cluster)
        hl_cluster_refresh_soon(c->cluster);
    if (c->sentinel && !c->moving)
        hl_sentinel_ask(c->sentinel);
}

int hilock_client_set_loop_thread(hilock_client *c)
{
    if (c == NULL)
        return hl_fail(HILOCK_EINVAL, "client is NULL");
    if (!hl_handle_is_live(c))
        return hl_fail(HILOCK_ECLOSED, "not a live client");
    if (c->own_loop)
        return hl_fail(HILOCK_EINVAL, "the client runs its own loop "
                                      "thread");
    /* Work submitted from here on is queued for the loop, or started at
     * once when it comes from the new thread; the old thread's calls
     * before this one were made while it was the loop's. */
    atomic_store(&c->loop_tid, pthread_self());
    return HILOCK_OK;
}

struct ev_loop *hilock_client_loop(const hilock_client *c)
{
    return c ? c->loop : NULL;
}

int64_t hl_client_watchdog_ms(const hilock_client *client)
{
    return client->opts->watchdog_timeout_ms;
}

int64_t hl_client_blocking_limit_us(const hilock_client *client,
                                    int64_t wait_ms)
{
    return hl_blocking_limit_us(client->opts, wait_ms);
}
