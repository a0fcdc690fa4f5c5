/* Mutual exclusion through Redis Cluster failovers that leave the old
 * master running: holders on two clients contend for one lock (default
 * policy, replicas=majority, the watchdog lease) while the lock's slot
 * moves to the replica, first with CLUSTER FAILOVER TAKEOVER (the
 * replica takes the slots without asking the master, which learns of it
 * from the cluster bus), then with a manual CLUSTER FAILOVER (the master
 * stops writes and hands over once the replica caught up).  The checker
 * must find no two critical sections overlapping, unless the earlier
 * holder was told its hold was lost.  Its own cluster: roles change from
 * case to case, and each case finds the slot's master and replica when
 * it starts. */
/* ctest-timeout: 240 */
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <setjmp.h>
#include <cmocka.h>

#include "core/transport/keyslot.h"
#include "hilock/hilock.h"
#include "support/cluster_util.h"
#include "support/contenders.h"
#include "support/fixture.h"
#include "support/mutex_checker.h"

/* Short, so that the cluster settles in a few seconds; the fixture's
 * default is 2000 ms. */
#define NODE_TIMEOUT_MS 1500
#define LOCK_NAME "exclusion-through-takeover"
#define NCLIENTS 2
#define PER_CLIENT 3
/* Sections before the failover is asked for, and again after the slot's
 * new master is in place. */
#define SECTIONS_EACH_SIDE 150

static hl_redis_cluster *cluster;
static char reply[65536]; /* the main thread's */

static int setup(void **state)
{
    (void)state;
    hl_redis_cluster_config cfg = {.masters = 3,
                                   .replicas = 1,
                                   .node_timeout_ms = NODE_TIMEOUT_MS};
    cluster = hl_redis_cluster_start(&cfg);
    return cluster ? 0 : -1;
}

static int teardown(void **state)
{
    (void)state;
    hl_redis_cluster_stop(cluster);
    return 0;
}

static bool replication_has(hl_redis_server *s, const char *text)
{
    return hl_redis_server_cmd(s, reply, sizeof reply, "INFO", "replication",
                               (char *)NULL) == '$' &&
           strstr(reply, text) != NULL;
}

typedef struct replica_probe {
    hl_redis_server *master;
    hl_redis_server *replica;
} replica_probe;

/* The node that replicates the master with its link up. */
static bool replica_found(void *arg)
{
    replica_probe *p = arg;
    char want[48];
    snprintf(want, sizeof want, "master_port:%d",
             hl_redis_server_port(p->master));
    for (size_t i = 0; i < hl_redis_cluster_size(cluster); i++) {
        hl_redis_server *n = hl_redis_cluster_node(cluster, i);
        if (n != p->master && replication_has(n, want) &&
            strstr(reply, "master_link_status:up") != NULL) {
            p->replica = n;
            return true;
        }
    }
    return false;
}

typedef struct master_probe {
    int slot;
    hl_redis_server *want;
} master_probe;

static bool master_is(void *arg)
{
    master_probe *p = arg;
    return hl_redis_cluster_master_of(cluster, p->slot) == p->want;
}

static bool stepped_down(void *arg)
{
    return replication_has(arg, "role:slave");
}

typedef struct progress {
    hl_mutex_checker *mc;
    size_t want;
} progress;

static bool sections_reached(void *arg)
{
    progress *p = arg;
    return hl_mutex_checker_count(p->mc) >= p->want;
}

static hilock_client *client_on_cluster(void)
{
    hilock_options *o = NULL;
    assert_int_equal(hilock_options_create(&o), HILOCK_OK);
    assert_int_equal(hilock_options_set_url(o, hl_redis_cluster_url(cluster)),
                     HILOCK_OK);
    hl_contenders_policy(o);
    hilock_client *c = NULL;
    int rc = hilock_client_create(&c, o);
    hilock_options_free(o);
    if (rc != HILOCK_OK)
        fail_msg("client: %s: %s", hilock_errname(rc), hilock_last_error());
    return c;
}

static double ms_between(int64_t from_ns, int64_t to_ns)
{
    return (double)(to_ns - from_ns) / 1e6;
}

/* A batch of sections, the failover asked of the slot's replica with
 * the given CLUSTER FAILOVER option (NULL for none), the wait until the
 * cluster names the replica master of the slot, and another batch. */
static void contend_through_failover(const char *option, const char *what)
{
    const int slot = (int)hl_keyslot(LOCK_NAME, strlen(LOCK_NAME));
    hl_redis_server *old = hl_fx_master_of(cluster, slot);
    replica_probe rp = {.master = old};
    if (!hl_wait_until(replica_found, &rp, hl_widen(20000)))
        fail_msg("no replica of port %d in sync", hl_redis_server_port(old));
    hl_redis_server *heir = rp.replica;
    printf("# %s: slot %d, master port %d, replica port %d\n", what, slot,
           hl_redis_server_port(old), hl_redis_server_port(heir));

    hilock_client *clients[NCLIENTS];
    for (int i = 0; i < NCLIENTS; i++)
        clients[i] = client_on_cluster();
    hl_mutex_checker *mc = hl_mutex_checker_create(100000, 200);
    assert_non_null(mc);
    hl_contenders *g = hl_contenders_start(clients, NCLIENTS, PER_CLIENT,
                                           LOCK_NAME, mc);

    progress p = {mc, SECTIONS_EACH_SIDE};
    bool before = hl_wait_until(sections_reached, &p, hl_widen(30000));
    size_t at_ask = hl_mutex_checker_count(mc);
    int answer = 0;
    bool switched = false, down = false, after = false;
    int64_t asked_ns = 0, switched_ns = 0, down_ns = 0;
    size_t at_switch = 0;
    if (before) {
        answer = option != NULL
                     ? hl_redis_server_cmd(heir, reply, sizeof reply,
                                           "CLUSTER", "FAILOVER", option,
                                           (char *)NULL)
                     : hl_redis_server_cmd(heir, reply, sizeof reply,
                                           "CLUSTER", "FAILOVER",
                                           (char *)NULL);
        asked_ns = hl_now_ns();
        hl_contenders_mark_asked(g, asked_ns);
    }
    if (answer == '+') {
        master_probe mp = {.slot = slot, .want = heir};
        switched = hl_wait_until(master_is, &mp, hl_widen(15000));
        switched_ns = hl_now_ns();
        at_switch = hl_mutex_checker_count(mc);
        hl_contenders_mark_switched(g, switched_ns);
    }
    if (switched) {
        /* The old master runs on and becomes the new one's replica. */
        down = hl_wait_until(stepped_down, old, hl_widen(15000));
        down_ns = hl_now_ns();
        p.want = at_switch + SECTIONS_EACH_SIDE;
        after = hl_wait_until(sections_reached, &p, hl_widen(60000));
    }
    hl_contenders_stop(g);

    printf("# %s: %zu sections before the failover was asked for, %zu "
           "before the switch\n",
           what, at_ask, at_switch);
    if (down)
        printf("# %s: the old master called itself a replica %.1f ms "
               "after the failover was asked for\n",
               what, ms_between(asked_ns, down_ns));
    hl_contenders_report(g, what);
    char why[512];
    bool clean = hl_contenders_verdict(g, what, why, sizeof why);
    hl_contenders_free(g);
    for (int i = 0; i < NCLIENTS; i++)
        hilock_client_destroy(clients[i]);
    hl_mutex_checker_free(mc);
    assert_true(before);
    if (answer != '+')
        fail_msg("CLUSTER FAILOVER %s: %s", option ? option : "", reply);
    assert_true(switched);
    assert_true(down);
    assert_true(after);
    if (!clean)
        fail_msg("%s", why);
}

static void test_no_overlap_through_takeover(void **state)
{
    (void)state;
    contend_through_failover("TAKEOVER", "takeover");
}

static void test_no_overlap_through_manual_failover(void **state)
{
    (void)state;
    contend_through_failover(NULL, "manual failover");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_no_overlap_through_takeover),
        cmocka_unit_test(test_no_overlap_through_manual_failover),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
