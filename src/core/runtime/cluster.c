#include "core/runtime/cluster.h"

#include <stdarg.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "hilock/error.h"
#include "core/base/alloc.h"
#include "core/base/monotime.h"
#include "core/config/hostlist.h"
#include "core/config/option_values.h"
#include "core/loop/io.h"
#include "core/runtime/ack.h"
#include "core/runtime/client_state.h"
#include "core/transport/command_slot.h"
#include "core/transport/keyslot.h"
#include "core/transport/reply.h"

typedef struct cluster_node {
    char host[256];
    int port;
    hilock_options *opts; /* the client's, with this node's address */
    hl_conn *conn;
    bool down; /* its connection was lost and is not back yet */
    hl_pubsub *ps; /* sharded pub/sub, made on first use */
    /* Plain pub/sub, made on first use, for the channels shared with
     * Redisson when its clients SUBSCRIBE and PUBLISH there. */
    hl_pubsub *plain_ps;
} cluster_node;

struct hl_cluster {
    hilock_client *client;
    hl_conn_config tmpl;
    void (*ready)(hilock_client *client);
    bool announced; /* ready was called */
    bool closed;
    cluster_node *nodes[HL_CLUSTER_MAX_NODES];
    int nnodes;
    /* Node index + 1 per slot, 0 while unknown.  Lock handles are made on
     * any thread and pick their connection here, so entries are atomic;
     * a node is in nodes[] before any entry names it (release/acquire). */
    _Atomic unsigned char slots[HL_CLUSTER_SLOTS];
    hl_timer timer;
    bool reading;    /* a topology read is in flight */
    /* Which read counts: one whose node stopped answering is given up
     * (on_watch) and its late answer ignored. */
    unsigned read_gen;
    hl_monotime read_started;
    bool again;      /* another read was asked for meanwhile */
    bool use_slots;  /* the server has no CLUSTER SHARDS */
    /* Pub/sub is sharded (Redis 7 and later, as CLUSTER SHARDS tells):
     * SSUBSCRIBE on the master of the channel's slot, SPUBLISH in the
     * scripts.  Before 7, PUBLISH reaches every node anyway. */
    bool sharded;
    unsigned asked;  /* reads started: picks the node asked */
    unsigned reads;  /* reads completed */
    unsigned redirects; /* MOVED and ASK followed */
    bool owner_down; /* the last read named a master whose link is down */
    /* A node has stopped answering (node_silent): the map is read at the
     * failover pace until it answers again or is replaced. */
    bool silent_seen;
    hl_timer watch; /* looks for silent nodes between reads */
    /* A master whose word on itself is not wanted: the next read asks
     * another node (hl_cluster_confirm). */
    const hl_conn *suspect;
    hl_monotime last_read;
    char why[256]; /* the last refusal, see hl_cluster_last_failure */
};

static void reroute_waiting(hl_cluster *cl);

/* How scripts publish on this cluster: sharded where it can, and on the
 * channels shared with Redisson the way its clients listen there. */
static hl_publish publish_mode(const hl_cluster *cl)
{
    if (!cl->sharded)
        return HL_PUBLISH_PLAIN;
    switch (cl->client->opts->redisson_pubsub) {
    case HILOCK_REDISSON_PUBSUB_PLAIN:
        return HL_PUBLISH_SHARED_PLAIN;
    case HILOCK_REDISSON_PUBSUB_BOTH:
        return HL_PUBLISH_SHARED_BOTH;
    default:
        return HL_PUBLISH_SHARDED;
    }
}

static void on_node_event(hl_conn *conn, hl_conn_event ev, int status,
                          const char *detail, hilock_reply *reply, void *data)
{
    (void)status;
    hilock_reply_free(reply);
    hl_cluster *cl = data;
    if (ev == HL_CONN_PUSH || cl->closed)
        return;
    hl_client_conn_event(cl->client, conn, ev == HL_CONN_UP, detail);
    for (int i = 0; i < cl->nnodes; i++)
        if (cl->nodes[i]->conn == conn)
            cl->nodes[i]->down = ev == HL_CONN_DOWN;
    /* A lost master may have failed over: its slots have a new owner. */
    if (ev == HL_CONN_DOWN)
        hl_cluster_refresh_soon(cl);
    /* One that came back may have restarted without its data. */
    else if (hl_conn_get_stats(conn).connects > 1)
        hl_client_master_changed(cl->client,
                                 "a node's connection came back after a "
                                 "break; it may have restarted");
}

static int find_node(const hl_cluster *cl, const char *host, size_t hlen,
                     int port)
{
    for (int i = 0; i < cl->nnodes; i++) {
        const cluster_node *n = cl->nodes[i];
        if (n->port == port && strlen(n->host) == hlen &&
            memcmp(n->host, host, hlen) == 0)
            return i;
    }
    return -1;
}

/* The index of the node at host:port, connecting to it when new; -1
 * when the table is full or memory runs out. */
static int node_at(hl_cluster *cl, const char *host, size_t hlen, int port)
{
    if (hlen == 0) {
        /* An empty endpoint means the address the client reached the
         * cluster by (cluster-preferred-endpoint-type unknown-endpoint). */
        host = cl->client->opts->host;
        hlen = strlen(host);
    }
    int i = find_node(cl, host, hlen, port);
    if (i >= 0)
        return i;
    if (cl->closed || cl->nnodes == HL_CLUSTER_MAX_NODES ||
        hlen >= sizeof cl->nodes[0]->host || port <= 0 || port > 65535)
        return -1;
    cluster_node *n = hl_calloc(1, sizeof *n);
    if (n == NULL)
        return -1;
    memcpy(n->host, host, hlen);
    n->port = port;
    if (hilock_options_copy(&n->opts, cl->client->opts) != HILOCK_OK ||
        hilock_options_set_host(n->opts, n->host) != HILOCK_OK ||
        hilock_options_set_port(n->opts, port) != HILOCK_OK)
        goto fail;
    hl_conn_config cfg = cl->tmpl;
    cfg.opts = n->opts;
    cfg.on_event = on_node_event;
    cfg.on_request = NULL;
    cfg.data = cl;
    n->conn = hl_conn_create(&cfg);
    if (n->conn == NULL)
        goto fail;
    hl_conn_set_redirect(n->conn, hl_cluster_redirect, cl);
    hl_conn_set_publish(n->conn, publish_mode(cl));
    cl->nodes[cl->nnodes] = n;
    return cl->nnodes++;
fail:
    hilock_options_free(n->opts);
    hl_free(n);
    return -1;
}

/* ---- addresses the nodes name ------------------------------------------ */

/* Keep why a reply was refused, for hl_cluster_last_failure; false, for
 * the parsers to return. */
static bool refuse(hl_cluster *cl, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
static bool refuse(hl_cluster *cl, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(cl->why, sizeof cl->why, fmt, ap);
    va_end(ap);
    return false;
}

/* Whether a reply's host and port (what names the reply) may name a
 * node.  The port is checked on the value the reply holds: cast to int
 * first, 2^32 + 6379 would pass for 6379.  A host holds no byte a name
 * or an address cannot; a NUL above all, since the node would be kept
 * under the name cut at it, never found again by its whole name, and
 * added anew, with a connection, at every read. */
static bool address_ok(hl_cluster *cl, const char *what, const char *host,
                       size_t hlen, long long port)
{
    char shown[128];
    if (port < 1 || port > 65535)
        return refuse(cl, "%s names port %lld, outside 1..65535", what, port);
    if (hlen >= sizeof cl->nodes[0]->host)
        return refuse(cl, "%s names a host of %zu bytes, more than %zu",
                      what, hlen, sizeof cl->nodes[0]->host - 1);
    for (size_t i = 0; i < hlen; i++) {
        unsigned char c = (unsigned char)host[i];
        if (c <= ' ' || c == 0x7f)
            return refuse(cl, "%s names host '%s', which holds %s", what,
                          hl_reply_quote(shown, sizeof shown, host, hlen),
                          c == 0 ? "a NUL byte" : "a space or control byte");
    }
    return true;
}

/* ---- reading the topology -------------------------------------------- */

static bool str_is(const hilock_reply *r, const char *s)
{
    size_t n = strlen(s);
    return r && (r->type == HILOCK_REPLY_STRING ||
                 r->type == HILOCK_REPLY_STATUS) &&
           r->len == n && memcmp(r->str, s, n) == 0;
}

static bool is_text(const hilock_reply *r)
{
    return r && (r->type == HILOCK_REPLY_STRING ||
                 r->type == HILOCK_REPLY_STATUS);
}

/* The value after key in a flat key/value array (RESP2 maps). */
static const hilock_reply *field(const hilock_reply *map, const char *key)
{
    if (map == NULL || map->type != HILOCK_REPLY_ARRAY)
        return NULL;
    for (size_t i = 0; i + 1 < map->elements; i += 2)
        if (str_is(map->element[i], key))
            return map->element[i + 1];
    return NULL;
}

static bool assign(hl_cluster *cl, const char *what, unsigned char *map,
                   long long lo, long long hi, const char *host, size_t hlen,
                   long long port)
{
    if (lo < 0 || hi >= HL_CLUSTER_SLOTS || lo > hi)
        return refuse(cl, "%s names slots %lld-%lld, outside 0-%d", what, lo,
                      hi, HL_CLUSTER_SLOTS - 1);
    if (!address_ok(cl, what, host, hlen, port))
        return false;
    int i = node_at(cl, host, hlen, (int)port);
    if (i < 0)
        return refuse(cl, "%s names a node the client cannot add (at most "
                          "%d, or out of memory)",
                      what, HL_CLUSTER_MAX_NODES);
    memset(map + lo, i + 1, (size_t)(hi - lo + 1));
    return true;
}

/* CLUSTER SHARDS: per shard a map with "slots" (start, end pairs) and
 * "nodes" (maps with ip, endpoint, port, tls-port, role, health). */
static bool parse_shards(hl_cluster *cl, const hilock_reply *r,
                         unsigned char *map)
{
    const char *what = "CLUSTER SHARDS";
    if (r->type != HILOCK_REPLY_ARRAY)
        return refuse(cl, "%s answered %s, not an array", what,
                      hl_reply_kind(r));
    bool tls = cl->client->opts->tls != 0;
    for (size_t s = 0; s < r->elements; s++) {
        const hilock_reply *slots = field(r->element[s], "slots");
        const hilock_reply *nodes = field(r->element[s], "nodes");
        if (slots == NULL || nodes == NULL ||
            slots->type != HILOCK_REPLY_ARRAY ||
            nodes->type != HILOCK_REPLY_ARRAY)
            return refuse(cl, "%s answered a shard without its slots and "
                              "nodes arrays",
                          what);
        const hilock_reply *master = NULL;
        for (size_t k = 0; k < nodes->elements && master == NULL; k++) {
            const hilock_reply *n = nodes->element[k];
            const hilock_reply *health = field(n, "health");
            if (str_is(field(n, "role"), "master") &&
                (health == NULL || str_is(health, "online")))
                master = n;
        }
        if (master == NULL || slots->elements == 0)
            continue; /* a shard without slots, or failing over */
        /* "?" or nothing: the node does not know its endpoint, and its
         * ip is the way to it. */
        const hilock_reply *host = field(master, "endpoint");
        if (!is_text(host) || host->len == 0 || str_is(host, "?"))
            host = field(master, "ip");
        if (!is_text(host) || host->len == 0)
            return refuse(cl, "%s names a master with no host (neither an "
                              "endpoint nor an ip)",
                          what);
        /* A node lists port, tls-port or both, as it serves them. */
        const hilock_reply *port = tls ? field(master, "tls-port") : NULL;
        if (port == NULL)
            port = field(master, "port");
        if (port == NULL || port->type != HILOCK_REPLY_INTEGER)
            return refuse(cl, "%s names a master whose port is %s, not an "
                              "integer",
                          what, port ? hl_reply_kind(port) : "missing");
        for (size_t k = 0; k + 1 < slots->elements; k += 2) {
            const hilock_reply *lo = slots->element[k];
            const hilock_reply *hi = slots->element[k + 1];
            if (lo->type != HILOCK_REPLY_INTEGER ||
                hi->type != HILOCK_REPLY_INTEGER)
                return refuse(cl, "%s names a slot range that is not two "
                                  "integers",
                              what);
            if (!assign(cl, what, map, lo->integer, hi->integer, host->str,
                        host->len, port->integer))
                return false;
        }
    }
    return true;
}

/* CLUSTER SLOTS: per range start, end, then the master [host, port, id,
 * ...] and its replicas. */
static bool parse_slots(hl_cluster *cl, const hilock_reply *r,
                        unsigned char *map)
{
    const char *what = "CLUSTER SLOTS";
    if (r->type != HILOCK_REPLY_ARRAY)
        return refuse(cl, "%s answered %s, not an array", what,
                      hl_reply_kind(r));
    for (size_t s = 0; s < r->elements; s++) {
        const hilock_reply *e = r->element[s];
        const hilock_reply *m =
            e->type == HILOCK_REPLY_ARRAY && e->elements >= 3 ? e->element[2]
                                                              : NULL;
        if (m == NULL || e->element[0]->type != HILOCK_REPLY_INTEGER ||
            e->element[1]->type != HILOCK_REPLY_INTEGER ||
            m->type != HILOCK_REPLY_ARRAY || m->elements < 2 ||
            !is_text(m->element[0]) ||
            m->element[1]->type != HILOCK_REPLY_INTEGER)
            return refuse(cl, "%s answered a range that is not a start, an "
                              "end and a master's host and port",
                          what);
        /* An empty host is the address the client reached the cluster by
         * (cluster-preferred-endpoint-type unknown-endpoint). */
        if (!assign(cl, what, map, e->element[0]->integer,
                    e->element[1]->integer, m->element[0]->str,
                    m->element[0]->len, m->element[1]->integer))
            return false;
    }
    return true;
}

static void read_topology(hl_cluster *cl);

static void set_sharded(hl_cluster *cl, bool sharded)
{
    cl->sharded = sharded;
    hl_publish how = publish_mode(cl);
    hilock_client *c = cl->client;
    for (int i = 0; i < c->nconns; i++)
        if (c->conns[i])
            hl_conn_set_publish(c->conns[i], how);
    for (int i = 0; i < cl->nnodes; i++)
        hl_conn_set_publish(cl->nodes[i]->conn, how);
}

/* ---- sharded pub/sub --------------------------------------------------- */

static void on_channel_misplaced(void *data)
{
    hl_cluster_refresh_soon(data);
}

static hl_pubsub *node_pubsub(hl_cluster *cl, cluster_node *n, bool sharded)
{
    hl_pubsub **ps = sharded ? &n->ps : &n->plain_ps;
    if (*ps == NULL && !cl->closed) {
        hl_pubsub_config cfg = {.loop = cl->client->loop,
                                .opts = n->opts,
                                .ssl_ctx = cl->client->ssl_ctx,
                                .sharded = sharded,
                                .on_misplaced = on_channel_misplaced,
                                .data = cl};
        *ps = hl_pubsub_create(&cfg);
    }
    return *ps;
}

static hl_pubsub *owner_of(hl_cluster *cl, const char *channel, size_t len,
                           bool sharded)
{
    unsigned i = atomic_load_explicit(&cl->slots[hl_keyslot(channel, len)],
                                      memory_order_acquire);
    return i == 0 ? NULL : node_pubsub(cl, cl->nodes[i - 1], sharded);
}

static hl_pubsub *owner_pubsub(void *data, const char *channel, size_t len)
{
    return owner_of(data, channel, len, true);
}

static hl_pubsub *owner_plain_pubsub(void *data, const char *channel,
                                     size_t len)
{
    return owner_of(data, channel, len, false);
}

/* After a topology read: every channel goes to the master that serves
 * its slot now (a failover or a migration moved it), and one the server
 * dropped or redirected where it still belongs is asked for again.  A
 * plain channel is heard on any node, but one whose node failed would
 * wait there for a connection that may never come back. */
static void place_channels(hl_cluster *cl)
{
    if (!cl->sharded)
        return;
    for (int i = 0; i < cl->nnodes; i++) {
        if (cl->nodes[i]->ps)
            hl_pubsub_move(cl->nodes[i]->ps, owner_pubsub, cl);
        if (cl->nodes[i]->plain_ps)
            hl_pubsub_move(cl->nodes[i]->plain_ps, owner_plain_pubsub, cl);
    }
    for (int i = 0; i < cl->nnodes; i++)
        if (cl->nodes[i]->ps)
            hl_pubsub_resubscribe(cl->nodes[i]->ps);
}

hl_pubsub *hl_cluster_pubsub_for(hl_cluster *cl, const char *channel,
                                 size_t len, bool sharded)
{
    hl_pubsub *ps = owner_of(cl, channel, len, sharded);
    /* A slot nobody has named yet: any node, corrected at the next read
     * (its SSUBSCRIBE draws a MOVED, which asks for that read). */
    if (ps == NULL && cl->nnodes > 0)
        ps = node_pubsub(cl, cl->nodes[0], sharded);
    return ps;
}

bool hl_cluster_sharded(const hl_cluster *cl) { return cl->sharded; }

void hl_cluster_free_pubsubs(hl_cluster *cl)
{
    if (cl == NULL)
        return;
    for (int i = 0; i < cl->nnodes; i++) {
        hl_pubsub *ps = cl->nodes[i]->ps;
        hl_pubsub *plain = cl->nodes[i]->plain_ps;
        cl->nodes[i]->ps = NULL;
        cl->nodes[i]->plain_ps = NULL;
        hl_pubsub_free(ps);
        hl_pubsub_free(plain);
    }
}

static bool node_silent(const cluster_node *n);

static bool any_silent(hl_cluster *cl)
{
    cl->silent_seen = false;
    for (int i = 0; i < cl->nnodes; i++)
        if (node_silent(cl->nodes[i]))
            cl->silent_seen = true;
    return cl->silent_seen;
}

static void read_ended(hl_cluster *cl, bool ok)
{
    cl->reading = false;
    cl->reads += ok;
    cl->last_read = hl_monotime_now();
    if (!cl->announced) {
        cl->announced = true;
        cl->ready(cl->client);
    }
    if (cl->closed)
        return;
    if (!ok) {
        /* A node that cannot answer now (or an ACL without CLUSTER) is
         * asked again at a pace it can bear; the next read asks the next
         * node. */
        cl->again = false;
        hl_timer_arm(&cl->timer, HL_MS(HL_CLUSTER_RETRY_MS));
    } else if (cl->again) {
        cl->again = false;
        hl_cluster_refresh_soon(cl);
    } else if (cl->owner_down || any_silent(cl)) {
        /* Its replica takes over once the others agree it failed; the
         * requests held for its slots go on as soon as a read shows the
         * new master. */
        hl_timer_arm(&cl->timer, HL_MS(HL_CLUSTER_FAILOVER_POLL_MS));
    } else {
        hl_timer_arm(&cl->timer, HL_MS(HL_CLUSTER_REFRESH_MS));
    }
}

/* The map just read (node index + 1 per slot, 0 where no master serves
 * it) vouches for the nodes that serve slots and against those that
 * serve none, for writes waiting on a suspect master. */
static void judge_masters(hl_cluster *cl, const unsigned char *map)
{
    bool serves[HL_CLUSTER_MAX_NODES] = {false};
    for (unsigned s = 0; s < HL_CLUSTER_SLOTS; s++)
        if (map[s] != 0)
            serves[map[s] - 1] = true;
    for (int i = 0; i < cl->nnodes; i++)
        hl_ack_topology(cl->client, cl->nodes[i]->conn,
                        serves[i] ? HL_ACK_MASTER_CONFIRMED
                                  : HL_ACK_MASTER_REPLACED,
                        "the cluster map names another master for its slots",
                        cl->read_started);
    /* The seed connection is the node at the client's own address. */
    const char *host = cl->client->opts->host;
    int seed = find_node(cl, host, strlen(host), cl->client->opts->port);
    if (seed >= 0 && cl->client->conn != NULL)
        hl_ack_topology(cl->client, cl->client->conn,
                        serves[seed] ? HL_ACK_MASTER_CONFIRMED
                                     : HL_ACK_MASTER_REPLACED,
                        "the cluster map names another master for its slots",
                        cl->read_started);
}

/* Whether the node's requests have gone unanswered long enough that it
 * may have stopped (paused, cut off) while its link stays up. */
static bool node_silent(const cluster_node *n)
{
    return hl_conn_unanswered_for(n->conn) > HL_MS(HL_CLUSTER_SILENT_MS);
}

/* Nodes that lost slots in this read (lost[i]) and serve none in map
 * were replaced.  One whose link is down or which has stopped answering
 * lets go of its requests now, not at their command timeout: those it
 * was sent fail with HILOCK_EIO (it may have run them), and those it
 * was not go to the new master with reroute_waiting, in this turn.  One
 * that answers is left to answer MOVED. */
static void drop_replaced(hl_cluster *cl, const unsigned char *map,
                          const bool *lost)
{
    bool serves[HL_CLUSTER_MAX_NODES] = {false};
    for (unsigned s = 0; s < HL_CLUSTER_SLOTS; s++)
        if (map[s] != 0)
            serves[map[s] - 1] = true;
    for (int i = 0; i < cl->nnodes; i++) {
        cluster_node *n = cl->nodes[i];
        if (!lost[i] || serves[i] || !(n->down || node_silent(n)))
            continue;
        hl_conn_reset(n->conn, HILOCK_EIO,
                      "the cluster map names another master for the "
                      "slots of the node this request was sent to");
        n->down = true;
    }
}

/* Between reads: a master that stopped answering is watched at the
 * failover pace, as one whose link is down. */
static void on_watch(hl_timer *t)
{
    hl_cluster *cl = t->data;
    if (cl->closed)
        return;
    hl_timer_arm(t, HL_MS(HL_CLUSTER_SILENT_MS / 2));
    if (cl->reading) {
        /* The node asked may be the one that stopped: ask another. */
        if (hl_sat_sub(hl_monotime_now(), cl->read_started) >
            HL_MS(HL_CLUSTER_SILENT_MS)) {
            cl->read_gen++;
            cl->reading = false;
            read_topology(cl);
        }
        return;
    }
    if (cl->owner_down || cl->silent_seen)
        return;
    for (int i = 0; i < cl->nnodes; i++)
        if (node_silent(cl->nodes[i])) {
            cl->silent_seen = true;
            hl_cluster_refresh_soon(cl);
            return;
        }
}

typedef struct topology_read {
    hl_cluster *cl;
    unsigned gen;
} topology_read;

static void on_topology(void *data, int status, hilock_reply *reply)
{
    topology_read *t = data;
    hl_cluster *cl = t->cl;
    bool given_up = t->gen != cl->read_gen;
    hl_free(t);
    if (given_up) {
        hilock_reply_free(reply);
        return;
    }
    if (cl->closed) {
        hilock_reply_free(reply);
        cl->reading = false;
        return;
    }
    if (status == HILOCK_EREDIS && !cl->use_slots) {
        /* Before Redis 7: no CLUSTER SHARDS, and no sharded pub/sub. */
        hilock_reply_free(reply);
        cl->use_slots = true;
        set_sharded(cl, false);
        cl->reading = false;
        read_topology(cl);
        return;
    }
    bool ok = false;
    bool failed_over = false;
    if (status == HILOCK_OK) {
        unsigned char *map = hl_calloc(1, HL_CLUSTER_SLOTS);
        if (map != NULL) {
            ok = cl->use_slots ? parse_slots(cl, reply, map)
                               : parse_shards(cl, reply, map);
            /* A slot no master serves (a failover under way) keeps its
             * last owner: that node answers with MOVED or an error, which
             * beats sending to the seed at random. */
            if (ok) {
                bool lost[HL_CLUSTER_MAX_NODES] = {false};
                for (unsigned s = 0; s < HL_CLUSTER_SLOTS; s++) {
                    if (map[s] == 0)
                        continue;
                    unsigned was = atomic_load_explicit(
                        &cl->slots[s], memory_order_relaxed);
                    if (was != 0 && was != map[s]) {
                        failed_over = true;
                        lost[was - 1] = true;
                    }
                    atomic_store_explicit(&cl->slots[s], map[s],
                                          memory_order_release);
                }
                drop_replaced(cl, map, lost);
                cl->owner_down = false;
                for (unsigned s = 0; s < HL_CLUSTER_SLOTS; s++) {
                    unsigned i = atomic_load_explicit(&cl->slots[s],
                                                      memory_order_relaxed);
                    if (i != 0 && cl->nodes[i - 1]->down) {
                        cl->owner_down = true;
                        break;
                    }
                }
                reroute_waiting(cl);
                judge_masters(cl, map);
            }
            hl_free(map);
        }
    }
    hilock_reply_free(reply);
    if (ok)
        place_channels(cl);
    /* A slot has a new master: a failover, a takeover, or a slot moved
     * by a resharding.  The new master may lack a grant the old one had
     * not passed on, and a holder must hear of that before a contender
     * enters there, not at its next renewal.  Check them all now. */
    if (failed_over)
        hl_client_master_changed(cl->client,
                                 "a slot has a new master (a failover, a "
                                 "takeover or a resharding)");
    read_ended(cl, ok);
}

/* Ask the seed first, then each node in turn, so that one dead node
 * cannot keep the map from being read; a node whose link is down is
 * passed over, since its read would wait out the command timeout. */
static hl_conn *pick_reader(hl_cluster *cl)
{
    unsigned choices = (unsigned)cl->nnodes + 1;
    for (unsigned k = 0; k < choices; k++) {
        unsigned pick = cl->asked++ % choices;
        hl_conn *conn = pick == 0 ? cl->client->conn
                                  : cl->nodes[pick - 1]->conn;
        if ((conn == cl->suspect && choices > 1) || conn == NULL ||
            hl_conn_unanswered_for(conn) > HL_MS(HL_CLUSTER_SILENT_MS))
            continue;
        if (pick == 0 && ((cl->client->up_mask & 1u) || cl->nnodes == 0))
            return conn;
        if (pick > 0 && !cl->nodes[pick - 1]->down)
            return conn;
    }
    return cl->client->conn; /* all down: the seed's comes back first */
}

static void read_topology(hl_cluster *cl)
{
    if (cl->closed || cl->reading)
        return;
    hl_timer_stop(&cl->timer);
    hl_conn *conn = pick_reader(cl);
    cl->suspect = NULL;
    const char *argv[] = {"CLUSTER", cl->use_slots ? "SLOTS" : "SHARDS"};
    size_t lens[] = {7, cl->use_slots ? 5u : 6u};
    cl->reading = true;
    cl->again = false;
    cl->read_started = hl_monotime_now();
    topology_read *t = hl_calloc(1, sizeof *t);
    if (t != NULL) {
        t->cl = cl;
        t->gen = ++cl->read_gen;
    }
    if (conn == NULL || t == NULL ||
        hl_conn_command(conn, 2, argv, lens, on_topology, t) != 0) {
        hl_free(t);
        read_ended(cl, false);
    }
}

static void on_timer(hl_timer *t) { read_topology(t->data); }

void hl_cluster_confirm(hl_cluster *cl, const hl_conn *conn)
{
    cl->suspect = conn;
    hl_cluster_refresh_soon(cl);
}

void hl_cluster_refresh_soon(hl_cluster *cl)
{
    if (cl->closed)
        return;
    if (cl->reading) {
        cl->again = true;
        return;
    }
    hl_monotime wait = cl->last_read + HL_MS(HL_CLUSTER_REFRESH_GAP_MS) -
                       hl_monotime_now();
    hl_timer_arm(&cl->timer, wait > 0 ? wait : 0);
}

/* ---- routing ----------------------------------------------------------- */

hl_conn *hl_cluster_conn_for_slot(const hl_cluster *cl, unsigned slot)
{
    unsigned i = atomic_load_explicit(&cl->slots[slot % HL_CLUSTER_SLOTS],
                                      memory_order_acquire);
    return i == 0 ? cl->client->conn : cl->nodes[i - 1]->conn;
}

/* "MOVED <slot> <host>:<port>" or "ASK ...", read strictly: a slot or a
 * port that is not all digits or is out of range refuses the whole
 * line, which is then never followed.  The node's index and the slot, or
 * false with why. */
static bool redirect_target(hl_cluster *cl, const char *error, bool moved,
                            int *node, long *slot_out)
{
    char what[160], shown[128];
    snprintf(what, sizeof what, "the redirection '%s'",
             hl_reply_quote(shown, sizeof shown, error, strlen(error)));
    const char *p = error + (moved ? 6 : 4);
    const char *space = strchr(p, ' ');
    uint64_t slot, port;
    if (space == NULL ||
        !hl_decimal_parse(p, (size_t)(space - p), HL_CLUSTER_SLOTS - 1,
                          &slot))
        return refuse(cl, "%s names no slot in 0-%d", what,
                      HL_CLUSTER_SLOTS - 1);
    const char *addr = space + 1;
    const char *colon = strrchr(addr, ':');
    if (colon == NULL ||
        !hl_decimal_parse(colon + 1, strlen(colon + 1), INT64_MAX, &port))
        return refuse(cl, "%s names no port", what);
    size_t hlen = (size_t)(colon - addr);
    /* An IPv6 endpoint may come in brackets. */
    if (hlen >= 2 && addr[0] == '[' && addr[hlen - 1] == ']') {
        addr++;
        hlen -= 2;
    }
    /* An empty host: the node does not know its endpoint
     * (cluster-preferred-endpoint-type unknown-endpoint). */
    if (!address_ok(cl, what, addr, hlen, (long long)port))
        return false;
    *node = node_at(cl, addr, hlen, (int)port);
    if (*node < 0)
        return refuse(cl, "%s names a node the client cannot add (at most "
                          "%d, or out of memory)",
                      what, HL_CLUSTER_MAX_NODES);
    *slot_out = (long)slot;
    return true;
}

hl_conn *hl_cluster_redirect(void *data, hl_conn *from, const char *error,
                             bool *asking, const char **bad)
{
    (void)from;
    hl_cluster *cl = data;
    bool moved = strncmp(error, "MOVED ", 6) == 0;
    if (!moved && strncmp(error, "ASK ", 4) != 0) {
        /* TRYAGAIN or CLUSTERDOWN: the connection retries; a failover
         * may have moved the slot meanwhile. */
        hl_cluster_refresh_soon(cl);
        return NULL;
    }
    long slot;
    int i;
    if (!redirect_target(cl, error, moved, &i, &slot)) {
        *bad = cl->why;
        return NULL;
    }
    cl->redirects++;
    if (moved) {
        atomic_store_explicit(&cl->slots[slot], (unsigned char)(i + 1),
                              memory_order_release);
        reroute_waiting(cl);
        hl_cluster_refresh_soon(cl);
    }
    *asking = !moved;
    return cl->nodes[i]->conn;
}

/* ---- failover ---------------------------------------------------------- */

/* The master the map names for a request's slot, when it knows one. */
static hl_conn *reroute_to(void *data, const char *cmd, size_t len)
{
    hl_cluster *cl = data;
    int slot = hl_command_slot_resp(cmd, len);
    if (slot < 0)
        return NULL;
    unsigned i = atomic_load_explicit(&cl->slots[slot], memory_order_relaxed);
    return i == 0 ? NULL : cl->nodes[i - 1]->conn;
}

/* The map changed: requests still waiting, unwritten, on a lost node's
 * link go to their slot's master now.  A request written before the link
 * went failed with it (HILOCK_EIO) and is never sent again, since its
 * node may have run it: the layers above settle an unknown outcome
 * (an acquire's reconcile), which a silent second run would defeat.
 * Called in the same turn as the map change, before anything new is
 * routed by it, so requests of one slot keep their order. */
static void reroute_waiting(hl_cluster *cl)
{
    if (cl->closed)
        return;
    for (int i = 0; i < cl->nnodes; i++)
        if (cl->nodes[i]->down)
            hl_conn_reroute(cl->nodes[i]->conn, reroute_to, cl);
    hilock_client *c = cl->client;
    for (int i = 0; i < c->nconns; i++)
        if (!(c->up_mask & (1u << i)))
            hl_conn_reroute(c->conns[i], reroute_to, cl);
}

/* ---- life ---------------------------------------------------------------- */

hl_cluster *hl_cluster_create(hilock_client *client, const hl_conn_config *tmpl,
                              void (*ready)(hilock_client *client))
{
    hl_cluster *cl = hl_calloc(1, sizeof *cl);
    if (cl == NULL)
        return NULL;
    cl->client = client;
    cl->tmpl = *tmpl;
    cl->ready = ready;
    set_sharded(cl, true);
    hl_timer_init(&cl->timer, client->loop, on_timer, cl);
    hl_timer_init(&cl->watch, client->loop, on_watch, cl);
    hl_timer_arm(&cl->watch, HL_MS(HL_CLUSTER_SILENT_MS / 2));
    read_topology(cl);
    return cl;
}

void hl_cluster_close(hl_cluster *cl)
{
    if (cl == NULL || cl->closed)
        return;
    cl->closed = true;
    hl_timer_stop(&cl->timer);
    hl_timer_stop(&cl->watch);
    for (int i = 0; i < cl->nnodes; i++)
        hl_conn_free(cl->nodes[i]->conn);
}

void hl_cluster_free(hl_cluster *cl)
{
    if (cl == NULL)
        return;
    hl_cluster_close(cl);
    hl_cluster_free_pubsubs(cl);
    for (int i = 0; i < cl->nnodes; i++) {
        hilock_options_free(cl->nodes[i]->opts);
        hl_free(cl->nodes[i]);
    }
    hl_free(cl);
}

void hl_cluster_add_stats(const hl_cluster *cl, uint64_t *connects,
                          uint64_t *writes)
{
    for (int i = 0; i < cl->nnodes; i++) {
        hl_conn_stats s = hl_conn_get_stats(cl->nodes[i]->conn);
        *connects += s.connects;
        *writes += s.writes;
    }
}

unsigned hl_cluster_refreshes(const hl_cluster *cl) { return cl->reads; }

unsigned hl_cluster_redirects(const hl_cluster *cl) { return cl->redirects; }

int hl_cluster_node_count(const hl_cluster *cl) { return cl->nnodes; }

const char *hl_cluster_last_failure(const hl_cluster *cl) { return cl->why; }

bool hl_cluster_slot_link_down(const hl_cluster *cl, unsigned slot)
{
    unsigned i = atomic_load_explicit(&cl->slots[slot % HL_CLUSTER_SLOTS],
                                      memory_order_acquire);
    return i != 0 && cl->nodes[i - 1]->down;
}

int hl_cluster_set_slot(hl_cluster *cl, unsigned slot, const char *host,
                        int port)
{
    int i = node_at(cl, host, strlen(host), port);
    if (i < 0 || slot >= HL_CLUSTER_SLOTS)
        return -1;
    atomic_store_explicit(&cl->slots[slot], (unsigned char)(i + 1),
                          memory_order_release);
    return 0;
}
