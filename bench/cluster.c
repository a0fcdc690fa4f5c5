/* The cluster rows' servers: a private Redis Cluster, its masters
 * flushed one by one (FLUSHALL through a cluster client reaches one node
 * only), and the master each of W3's segments lives on, asked of the
 * servers themselves. */
#include <stdlib.h>
#include <string.h>

#include "bench.h"
#include "redis_cluster.h"

int bench_cluster_start(bench_args *a)
{
    hl_redis_cluster_config cfg = {.masters = BENCH_CLUSTER_MASTERS,
                                   .replicas = a->cluster_replicas};
    a->cluster = hl_redis_cluster_start(&cfg);
    if (a->cluster == NULL)
        return -1;
    fprintf(stderr, "hilock-bench: private cluster: %d masters, %d "
                    "replicas each: %s\n",
            BENCH_CLUSTER_MASTERS, a->cluster_replicas,
            hl_redis_cluster_url(a->cluster));
    return 0;
}

/* The masters as created: the first nodes, none failing over in a run. */
static hl_redis_server *master(const bench_args *a, int i)
{
    return hl_redis_cluster_node(a->cluster, (size_t)i);
}

int bench_cluster_flush(const bench_args *a)
{
    char reply[256];
    for (int i = 0; i < BENCH_CLUSTER_MASTERS; i++)
        if (hl_redis_server_cmd(master(a, i), reply, sizeof reply,
                                "FLUSHALL", (char *)NULL) != '+')
            return -1;
    return 0;
}

int bench_cluster_segments(const bench_args *a, hilock_segmented *set,
                           int *per_master)
{
    memset(per_master, 0, BENCH_CLUSTER_MASTERS * sizeof *per_master);
    char reply[256];
    for (unsigned s = 0; s < hilock_segmented_count(set); s++) {
        size_t len;
        const char *name =
            hilock_lock_name(hilock_segmented_lock(set, s), &len);
        char key[256];
        if (len >= sizeof key)
            return -1;
        memcpy(key, name, len);
        key[len] = '\0';
        if (hl_redis_server_cmd(master(a, 0), reply, sizeof reply,
                                "CLUSTER", "KEYSLOT", key,
                                (char *)NULL) != ':')
            return -1;
        hl_redis_server *owner =
            hl_redis_cluster_master_of(a->cluster, atoi(reply + 1));
        int found = -1;
        for (int i = 0; i < BENCH_CLUSTER_MASTERS; i++)
            if (owner == master(a, i))
                found = i;
        if (found < 0)
            return -1;
        per_master[found]++;
    }
    return 0;
}
