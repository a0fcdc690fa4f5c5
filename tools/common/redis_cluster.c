/* A private Redis Cluster; see redis_cluster.h for the contract. */
#include "redis_cluster.h"
#include "redis_server_internal.h"

#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

struct hl_redis_cluster {
    size_t n;
    hl_redis_server **nodes;
    char *url;
};

/* `redis-cli --cluster create` over every node, answering its question
 * with --cluster-yes; its output goes to a file that is printed only when
 * it fails.  TLS nodes are reached with the identity the command helpers
 * present to them. */
static int hl_rc_create(hl_redis_cluster *c, int replicas,
                        const char *password)
{
    const hl_redis_server *first = c->nodes[0];
    const char *cli = getenv("HILOCK_REDIS_CLI");
    char replicas_arg[16], log_path[] = "/tmp/hilock-cluster-XXXXXX";
    char **argv = calloc(c->n + 16, sizeof *argv);
    int log = mkstemp(log_path), status = -1, rc = -1;
    size_t argc = 0;
    pid_t pid;

    if (argv == NULL || log < 0) {
        hl_rs_fail(0, "cannot prepare redis-cli: %s", strerror(errno));
        goto out;
    }
    if (cli == NULL || *cli == '\0')
        cli = "redis-cli";
    snprintf(replicas_arg, sizeof replicas_arg, "%d", replicas);
    argv[argc++] = (char *)cli;
    argv[argc++] = "--cluster";
    argv[argc++] = "create";
    for (size_t i = 0; i < c->n; i++) {
        argv[argc] = malloc(32);
        if (argv[argc] == NULL)
            goto out;
        snprintf(argv[argc], 32, "127.0.0.1:%d",
                 hl_redis_server_port(c->nodes[i]));
        argc++;
    }
    argv[argc++] = "--cluster-replicas";
    argv[argc++] = replicas_arg;
    argv[argc++] = "--cluster-yes";
    if (first->tls) {
        argv[argc++] = "--tls";
        if (first->tls_ca) {
            argv[argc++] = "--cacert";
            argv[argc++] = first->tls_ca;
        }
        argv[argc++] = "--cert";
        argv[argc++] = first->tls_client_cert;
        argv[argc++] = "--key";
        argv[argc++] = first->tls_client_key;
    }
    argv[argc] = NULL;
    pid = fork();
    if (pid < 0) {
        hl_rs_fail(0, "fork: %s", strerror(errno));
        goto out;
    }
    if (pid == 0) {
        int in = open("/dev/null", O_RDONLY);

        /* The password travels in the environment, never in argv. */
        if (password)
            setenv("REDISCLI_AUTH", password, 1);
        if (in < 0 || dup2(in, 0) < 0 || dup2(log, 1) < 0 ||
            dup2(log, 2) < 0)
            _exit(127);
        execvp(cli, argv);
        _exit(127);
    }
    while (waitpid(pid, &status, 0) < 0 && errno == EINTR)
        ;
    if (WIFEXITED(status) && WEXITSTATUS(status) == 0) {
        rc = 0;
    } else {
        char line[512];
        FILE *f = fopen(log_path, "r");

        hl_rs_fail(0, "%s --cluster create failed (status %d):", cli, status);
        while (f && fgets(line, sizeof line, f))
            fputs(line, stderr);
        if (f)
            fclose(f);
    }
out:
    if (argv)
        for (size_t i = 3; i < 3 + c->n && argv[i]; i++)
            free(argv[i]);
    free(argv);
    if (log >= 0) {
        close(log);
        unlink(log_path);
    }
    return rc;
}

/* A running node's own verdict: cluster_state:ok with every slot
 * assigned and served. */
static bool hl_rc_node_ok(const hl_redis_server *s)
{
    char *buf = hl_rs_ask_text(s, "CLUSTER", "INFO");
    char want[64];
    bool ok;

    if (buf == NULL)
        return false;
    snprintf(want, sizeof want, "cluster_slots_ok:%d", HL_CLUSTER_SLOTS);
    ok = strstr(buf, "cluster_state:ok") != NULL && strstr(buf, want);
    free(buf);
    return ok;
}

static bool hl_rc_masters_run(hl_redis_cluster *c, hl_redis_server *node);

int hl_redis_cluster_wait_ok(hl_redis_cluster *c, int timeout_ms)
{
    int64_t deadline = hl_rs_now_ms() + timeout_ms;

    for (;;) {
        bool all = true;

        for (size_t i = 0; i < c->n && all; i++)
            if (hl_redis_server_is_running(c->nodes[i]))
                all = hl_rc_node_ok(c->nodes[i]) &&
                      hl_rc_masters_run(c, c->nodes[i]);
        if (all)
            return 0;
        if (hl_rs_now_ms() >= deadline) {
            hl_rs_fail(0, "the cluster is not up within %d ms", timeout_ms);
            return -1;
        }
        hl_rs_sleep_ms(50);
    }
}

static char *hl_rc_make_url(const hl_redis_cluster *c)
{
    size_t cap = 16 + c->n * 24, len;
    char *url = malloc(cap);

    if (url == NULL)
        return NULL;
    len = (size_t)snprintf(url, cap, "%s://",
                           hl_redis_server_is_tls(c->nodes[0]) ? "rediss"
                                                               : "redis");
    for (size_t i = 0; i < c->n; i++)
        len += (size_t)snprintf(url + len, cap - len, "%s127.0.0.1:%d",
                                i ? "," : "",
                                hl_redis_server_port(c->nodes[i]));
    return url;
}

hl_redis_cluster *hl_redis_cluster_start(const hl_redis_cluster_config *cfg)
{
    static const hl_redis_cluster_config defaults;
    hl_redis_server_config node = { 0 };
    hl_redis_cluster *c;
    int masters, timeout_ms, node_timeout_ms;
    char *extra = NULL;
    size_t extra_len;

    if (cfg == NULL)
        cfg = &defaults;
    masters = cfg->masters ? cfg->masters : 3;
    timeout_ms = cfg->start_timeout_ms ? cfg->start_timeout_ms : 60000;
    node_timeout_ms = cfg->node_timeout_ms ? cfg->node_timeout_ms : 2000;
    if (masters < 3 || cfg->replicas < 0 || cfg->replicas > 4) {
        hl_rs_fail(0, "a cluster needs 3 or more masters and 0..4 "
                   "replicas each");
        return NULL;
    }
    if (cfg->node)
        node = *cfg->node;
    extra_len = (node.extra_config ? strlen(node.extra_config) : 0) + 320;
    c = calloc(1, sizeof *c);
    extra = malloc(extra_len);
    if (c == NULL || extra == NULL)
        goto fail;
    /* Replicas take over at once; a node restarted empty keeps its
     * identity from nodes.conf in its own directory.  TLS nodes (which
     * have no plain port) also talk TLS on the cluster bus and to their
     * masters, with their own certificate as the client's. */
    snprintf(extra, extra_len,
             "%s%scluster-enabled yes\n"
             "cluster-config-file nodes.conf\n"
             "cluster-node-timeout %d\n"
             "cluster-replica-validity-factor 0\n"
             "cluster-require-full-coverage yes\n%s",
             node.extra_config ? node.extra_config : "",
             node.extra_config ? "\n" : "", node_timeout_ms,
             node.tls_cert_file ? "tls-cluster yes\n"
                                  "tls-replication yes\n"
                                : "");
    node.extra_config = extra;
    c->n = (size_t)masters * (size_t)(1 + cfg->replicas);
    c->nodes = calloc(c->n, sizeof *c->nodes);
    if (c->nodes == NULL)
        goto fail;
    if (node.password) {
        /* Replicas authenticate to their masters with the same
         * password. */
        size_t more = strlen(extra) + strlen(node.password) + 32;
        char *with_auth = malloc(more);

        if (with_auth == NULL)
            goto fail;
        snprintf(with_auth, more, "%smasterauth \"%s\"\n", extra,
                 node.password);
        free(extra);
        extra = with_auth;
        node.extra_config = extra;
    }
    for (size_t i = 0; i < c->n; i++)
        if ((c->nodes[i] = hl_redis_server_start(&node)) == NULL)
            goto fail;
    if (hl_rc_create(c, cfg->replicas, node.password) != 0 ||
        hl_redis_cluster_wait_ok(c, timeout_ms) != 0)
        goto fail;
    if ((c->url = hl_rc_make_url(c)) == NULL)
        goto fail;
    free(extra);
    return c;
fail:
    free(extra);
    hl_redis_cluster_stop(c);
    return NULL;
}

void hl_redis_cluster_stop(hl_redis_cluster *c)
{
    if (c == NULL)
        return;
    for (size_t i = 0; c->nodes && i < c->n; i++)
        hl_redis_server_stop(c->nodes[i]);
    free(c->nodes);
    free(c->url);
    free(c);
}

size_t hl_redis_cluster_size(const hl_redis_cluster *c)
{
    return c->n;
}

hl_redis_server *hl_redis_cluster_node(const hl_redis_cluster *c, size_t i)
{
    return i < c->n ? c->nodes[i] : NULL;
}

const char *hl_redis_cluster_url(const hl_redis_cluster *c)
{
    return c->url;
}

/* Whether a CLUSTER NODES line's slot fields (NUL-terminated; "0-5460",
 * "7", or "[5461->-id]" for a migration) include slot as served; slot -1
 * asks whether it serves any. */
static bool hl_rc_line_serves(const char *fields, int slot)
{
    const char *p = fields;

    while (*p) {
        char *end;
        long lo, hi;

        while (*p == ' ')
            p++;
        if (*p == '[') { /* a slot being moved: not a range it serves */
            while (*p && *p != ' ')
                p++;
            continue;
        }
        lo = strtol(p, &end, 10);
        if (end == p)
            break;
        hi = lo;
        if (*end == '-')
            hi = strtol(end + 1, &end, 10);
        if (slot < 0 || (slot >= lo && slot <= hi))
            return true;
        p = end;
    }
    return false;
}

static hl_redis_server *hl_rc_by_port(const hl_redis_cluster *c, int port)
{
    for (size_t j = 0; j < c->n; j++)
        if (hl_redis_server_port(c->nodes[j]) == port)
            return c->nodes[j];
    return NULL;
}

/* Calls fn for every master that node's CLUSTER NODES lists as serving
 * slot (-1: any slot) and not failed; stops when fn returns false.
 * -1 when the node did not answer. */
static int hl_rc_each_master(hl_redis_cluster *c, hl_redis_server *node,
                             int slot,
                             bool (*fn)(hl_redis_server *, void *),
                             void *arg)
{
    char *buf = hl_rs_ask_text(node, "CLUSTER", "NODES");
    char *line;

    if (buf == NULL)
        return -1;
    for (line = buf; line && *line;) {
        char *next = strchr(line, '\n');
        char addr[64], flags[128];
        int fields_at = 0;

        if (next) /* one line at a time, for sscanf's spaces */
            *next = '\0';
        /* id addr flags master ping pong epoch link slots... */
        if (sscanf(line, "%*s %63s %127s %*s %*s %*s %*s %*s %n", addr,
                   flags, &fields_at) >= 2 &&
            fields_at > 0 && strstr(flags, "master") &&
            !strstr(flags, "fail") &&
            hl_rc_line_serves(line + fields_at, slot)) {
            char *colon = strrchr(strtok(addr, "@"), ':');
            hl_redis_server *m =
                hl_rc_by_port(c, colon ? atoi(colon + 1) : 0);

            if (!fn(m, arg))
                break;
        }
        line = next ? next + 1 : NULL;
    }
    free(buf);
    return 0;
}

static bool hl_rc_found(hl_redis_server *m, void *arg)
{
    *(hl_redis_server **)arg = m;
    return false;
}

hl_redis_server *hl_redis_cluster_master_of(hl_redis_cluster *c, int slot)
{
    for (size_t i = 0; i < c->n; i++) {
        hl_redis_server *found = NULL;

        if (hl_redis_server_pid(c->nodes[i]) > 0 &&
            hl_rc_each_master(c, c->nodes[i], slot, hl_rc_found,
                              &found) == 0)
            return found;
    }
    return NULL;
}

static bool hl_rc_running(hl_redis_server *m, void *arg)
{
    bool *all = arg;

    if (m == NULL || !hl_redis_server_is_running(m))
        *all = false;
    return *all;
}

/* Every master the node sees serving slots is one of ours and runs: a
 * master killed is no longer listed once its replica took over. */
static bool hl_rc_masters_run(hl_redis_cluster *c, hl_redis_server *node)
{
    bool all = true;

    return hl_rc_each_master(c, node, -1, hl_rc_running, &all) == 0 && all;
}
