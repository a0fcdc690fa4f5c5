/* A private master with replicas and sentinels; see redis_replicated.h. */
#include "redis_replicated.h"

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "redis_server_internal.h"

struct hl_redis_replicated {
    size_t nnodes;
    hl_redis_server **nodes;
    size_t nsentinels;
    hl_redis_server **sentinels;
    char *name;
    char *url;
};

/* A field "key:value" or "key=value" of an INFO text, as an integer; -1
 * when absent. */
static long hl_rr_field(const char *text, const char *key)
{
    const char *p = strstr(text, key);

    return p ? strtol(p + strlen(key), NULL, 10) : -1;
}

static hl_redis_server *hl_rr_by_port(const hl_redis_replicated *g,
                                      long port)
{
    for (size_t i = 0; i < g->nnodes; i++)
        if (hl_redis_server_port(g->nodes[i]) == port)
            return g->nodes[i];
    return NULL;
}

/* The running data nodes, and the one of them that calls itself master
 * with every other running node linked to it as a replica. */
static hl_redis_server *hl_rr_linked_master(hl_redis_replicated *g)
{
    hl_redis_server *master = NULL;
    size_t running = 0, linked = 0;

    for (size_t i = 0; i < g->nnodes; i++) {
        char *info;

        if (!hl_redis_server_is_running(g->nodes[i]))
            continue;
        running++;
        info = hl_rs_ask_text(g->nodes[i], "INFO", "replication");
        if (info == NULL)
            return NULL;
        if (strstr(info, "role:master")) {
            if (master != NULL) { /* two masters: still settling */
                free(info);
                return NULL;
            }
            master = g->nodes[i];
        } else if (strstr(info, "master_link_status:up")) {
            linked++;
        }
        free(info);
    }
    return master && linked + 1 == running ? master : NULL;
}

/* The master a sentinel names (INFO sentinel: "address=IP:PORT"). */
static hl_redis_server *hl_rr_sentinel_says(hl_redis_replicated *g,
                                            hl_redis_server *sentinel,
                                            long want_replicas)
{
    char *info = hl_rs_ask_text(sentinel, "INFO", "sentinel");
    hl_redis_server *named = NULL;
    const char *addr;

    if (info == NULL)
        return NULL;
    addr = strstr(info, ",address=");
    if (addr && strstr(info, ",status=ok,") &&
        hl_rr_field(info, ",slaves=") >= want_replicas &&
        hl_rr_field(info, ",sentinels=") == (long)g->nsentinels) {
        const char *colon = strchr(addr + 9, ':');

        if (colon)
            named = hl_rr_by_port(g, strtol(colon + 1, NULL, 10));
    }
    free(info);
    return named;
}

hl_redis_server *hl_redis_replicated_master(hl_redis_replicated *g)
{
    hl_redis_server *master = hl_rr_linked_master(g);
    long replicas = 0;

    if (master == NULL)
        return NULL;
    for (size_t i = 0; i < g->nnodes; i++)
        if (g->nodes[i] != master && hl_redis_server_is_running(g->nodes[i]))
            replicas++;
    for (size_t i = 0; i < g->nsentinels; i++) {
        if (!hl_redis_server_is_running(g->sentinels[i]))
            continue;
        if (hl_rr_sentinel_says(g, g->sentinels[i], replicas) != master)
            return NULL;
    }
    return master;
}

hl_redis_server *hl_redis_replicated_wait_master(hl_redis_replicated *g,
                                                 const hl_redis_server *not_this,
                                                 int timeout_ms)
{
    int64_t deadline = hl_rs_now_ms() + timeout_ms;

    for (;;) {
        hl_redis_server *m = hl_redis_replicated_master(g);

        if (m != NULL && m != not_this)
            return m;
        if (hl_rs_now_ms() >= deadline) {
            hl_rs_fail(0, "no settled master within %d ms", timeout_ms);
            return NULL;
        }
        hl_rs_sleep_ms(50);
    }
}

static char *hl_rr_join(const char *a, const char *b)
{
    size_t la = a ? strlen(a) : 0, lb = strlen(b);
    char *out = malloc(la + lb + 2);

    if (out == NULL)
        return NULL;
    snprintf(out, la + lb + 2, "%s%s%s", a ? a : "", la ? "\n" : "", b);
    return out;
}

static int hl_rr_start_sentinels(hl_redis_replicated *g,
                                 const hl_redis_replicated_config *cfg,
                                 int master_port, const char *password)
{
    char lines[1024];
    hl_redis_server_config sc = { 0 };
    int quorum = (int)g->nsentinels / 2 + 1;
    int n;

    n = snprintf(lines, sizeof lines,
                 "sentinel monitor %s 127.0.0.1 %d %d\n"
                 "sentinel down-after-milliseconds %s %d\n"
                 "sentinel failover-timeout %s %d\n"
                 "sentinel parallel-syncs %s 1\n",
                 g->name, master_port, quorum, g->name,
                 cfg->down_after_ms ? cfg->down_after_ms : 1000, g->name,
                 cfg->failover_timeout_ms ? cfg->failover_timeout_ms
                                          : 5000,
                 g->name);
    if (password && n > 0 && (size_t)n < sizeof lines)
        n += snprintf(lines + n, sizeof lines - (size_t)n,
                      "sentinel auth-pass %s \"%s\"\n", g->name, password);
    if (n < 0 || (size_t)n >= sizeof lines) {
        hl_rs_fail(0, "sentinel configuration too long");
        return -1;
    }
    sc.sentinel = true;
    sc.extra_config = lines;
    for (size_t i = 0; i < g->nsentinels; i++)
        if ((g->sentinels[i] = hl_redis_server_start(&sc)) == NULL)
            return -1;
    return 0;
}

static char *hl_rr_make_url(const hl_redis_replicated *g)
{
    size_t cap = 32 + g->nsentinels * 24 + strlen(g->name), len;
    char *url;

    if (g->nsentinels == 0)
        return NULL;
    url = malloc(cap);
    if (url == NULL)
        return NULL;
    len = (size_t)snprintf(url, cap, "redis-sentinel://");
    for (size_t i = 0; i < g->nsentinels; i++)
        len += (size_t)snprintf(url + len, cap - len, "%s127.0.0.1:%d",
                                i ? "," : "",
                                hl_redis_server_port(g->sentinels[i]));
    snprintf(url + len, cap - len, "#%s", g->name);
    return url;
}

hl_redis_replicated *hl_redis_replicated_start(
    const hl_redis_replicated_config *cfg)
{
    static const hl_redis_replicated_config defaults;
    hl_redis_server_config node = { 0 };
    hl_redis_replicated *g;
    char follow[128], *replica_extra = NULL, *master_extra = NULL;
    int replicas;

    if (cfg == NULL)
        cfg = &defaults;
    replicas = cfg->replicas ? cfg->replicas : 2;
    if (replicas < 1 || replicas > 8 || cfg->sentinels < 0 ||
        cfg->sentinels > 9 || (cfg->node && cfg->node->tls_cert_file)) {
        hl_rs_fail(0, "1..8 plain replicas and 0..9 sentinels");
        return NULL;
    }
    if (cfg->node)
        node = *cfg->node;
    g = calloc(1, sizeof *g);
    if (g == NULL)
        return NULL;
    g->nnodes = (size_t)replicas + 1;
    g->nsentinels = (size_t)cfg->sentinels;
    g->nodes = calloc(g->nnodes, sizeof *g->nodes);
    g->sentinels = calloc(g->nsentinels + 1, sizeof *g->sentinels);
    g->name = strdup(cfg->master_name ? cfg->master_name : "mymaster");
    if (!g->nodes || !g->sentinels || !g->name)
        goto fail;
    /* Every data node may become a replica after a failover, so every one
     * authenticates to its master with the common password. */
    if (node.password) {
        char auth[512];

        snprintf(auth, sizeof auth, "masterauth \"%s\"", node.password);
        master_extra = hl_rr_join(node.extra_config, auth);
        if (master_extra == NULL)
            goto fail;
        node.extra_config = master_extra;
    }
    if ((g->nodes[0] = hl_redis_server_start(&node)) == NULL)
        goto fail;
    snprintf(follow, sizeof follow, "replicaof 127.0.0.1 %d",
             hl_redis_server_port(g->nodes[0]));
    replica_extra = hl_rr_join(node.extra_config, follow);
    if (replica_extra == NULL)
        goto fail;
    node.extra_config = replica_extra;
    for (size_t i = 1; i < g->nnodes; i++)
        if ((g->nodes[i] = hl_redis_server_start(&node)) == NULL)
            goto fail;
    if (hl_rr_start_sentinels(g, cfg, hl_redis_server_port(g->nodes[0]),
                              node.password) != 0)
        goto fail;
    if (hl_redis_replicated_wait_master(
            g, NULL, cfg->start_timeout_ms ? cfg->start_timeout_ms : 30000) !=
        g->nodes[0])
        goto fail;
    g->url = hl_rr_make_url(g);
    if (g->nsentinels && g->url == NULL)
        goto fail;
    free(master_extra);
    free(replica_extra);
    return g;
fail:
    free(master_extra);
    free(replica_extra);
    hl_redis_replicated_stop(g);
    return NULL;
}

void hl_redis_replicated_stop(hl_redis_replicated *g)
{
    if (g == NULL)
        return;
    /* Sentinels first, so that none reconfigures what is being stopped. */
    for (size_t i = 0; g->sentinels && i < g->nsentinels; i++)
        hl_redis_server_stop(g->sentinels[i]);
    for (size_t i = 0; g->nodes && i < g->nnodes; i++)
        hl_redis_server_stop(g->nodes[i]);
    free(g->sentinels);
    free(g->nodes);
    free(g->name);
    free(g->url);
    free(g);
}

size_t hl_redis_replicated_nodes(const hl_redis_replicated *g)
{
    return g->nnodes;
}

hl_redis_server *hl_redis_replicated_node(const hl_redis_replicated *g,
                                          size_t i)
{
    return i < g->nnodes ? g->nodes[i] : NULL;
}

size_t hl_redis_replicated_sentinels(const hl_redis_replicated *g)
{
    return g->nsentinels;
}

hl_redis_server *hl_redis_replicated_sentinel(const hl_redis_replicated *g,
                                              size_t i)
{
    return i < g->nsentinels ? g->sentinels[i] : NULL;
}

const char *hl_redis_replicated_master_name(const hl_redis_replicated *g)
{
    return g->name;
}

const char *hl_redis_replicated_sentinel_url(const hl_redis_replicated *g)
{
    return g->url;
}
