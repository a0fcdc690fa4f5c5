/* The private cluster the cluster tests, the demo and the benchmark run
 * on: it must really be a cluster, serve every slot, and fail over. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <setjmp.h>
#include <cmocka.h>

#include "core/transport/keyslot.h"
#include "support/fixture.h"

/* ctest-timeout: 180 */

static hl_redis_cluster *cluster;
static char reply[65536];

static int setup(void **state)
{
    (void)state;
    cluster = hl_fixture_cluster();
    return cluster ? 0 : -1;
}

static int teardown(void **state)
{
    (void)state;
    hl_redis_cluster_stop(cluster);
    return 0;
}

static int keyslot(const hl_redis_server *any, const char *key)
{
    assert_int_equal(hl_redis_server_cmd(any, reply, sizeof reply,
                                         "CLUSTER", "KEYSLOT", key,
                                         (char *)NULL), ':');
    return atoi(reply + 1);
}

static void test_every_slot_served_by_three_masters(void **state)
{
    hl_redis_server *first = hl_redis_cluster_node(cluster, 0);
    hl_redis_server *owners[3];
    const int probes[3] = { 0, HL_CLUSTER_SLOTS / 2, HL_CLUSTER_SLOTS - 1 };

    (void)state;
    assert_int_equal(hl_redis_cluster_size(cluster), 6);
    assert_int_equal(hl_redis_server_cmd(first, reply, sizeof reply,
                                         "CLUSTER", "INFO", (char *)NULL),
                     '$');
    assert_non_null(strstr(reply, "cluster_state:ok"));
    assert_non_null(strstr(reply, "cluster_slots_assigned:16384"));
    assert_non_null(strstr(reply, "cluster_size:3"));
    assert_non_null(strstr(reply, "cluster_known_nodes:6"));
    for (int i = 0; i < 3; i++) {
        owners[i] = hl_redis_cluster_master_of(cluster, probes[i]);
        assert_non_null(owners[i]);
    }
    /* The three ranges of a fresh cluster belong to three masters. */
    assert_ptr_not_equal(owners[0], owners[1]);
    assert_ptr_not_equal(owners[1], owners[2]);
    assert_ptr_not_equal(owners[0], owners[2]);
    assert_int_equal(strncmp(hl_redis_cluster_url(cluster),
                             "redis://127.0.0.1:", 18), 0);
}

/* A key written where master_of says is accepted; any other master
 * redirects it with MOVED. */
static void test_master_of_matches_the_servers(void **state)
{
    const char *key = "{stock}:42";
    hl_redis_server *first = hl_redis_cluster_node(cluster, 0);
    int slot = keyslot(first, key);
    hl_redis_server *owner = hl_redis_cluster_master_of(cluster, slot);
    int moved = 0;

    (void)state;
    assert_non_null(owner);
    assert_int_equal(hl_redis_server_cmd(owner, reply, sizeof reply, "SET",
                                         key, "1", (char *)NULL), '+');
    for (size_t i = 0; i < hl_redis_cluster_size(cluster); i++) {
        hl_redis_server *n = hl_redis_cluster_node(cluster, i);

        if (n == owner)
            continue;
        if (hl_redis_server_cmd(n, reply, sizeof reply, "SET", key, "2",
                                (char *)NULL) == '-' &&
            strncmp(reply, "-MOVED ", 7) == 0)
            moved++;
    }
    /* Two other masters and three replicas all redirect. */
    assert_int_equal(moved, 5);
}

/* The client's slot function agrees with the servers' CLUSTER KEYSLOT,
 * hash tags and odd braces included. */
static void test_keyslot_matches_the_server(void **state)
{
    /* Around a number: a hash tag, an empty one, nested braces, braces
     * the wrong way round, an unclosed one, and Redisson's channel name. */
    static const char *const around[][2] = {
        { "", "" }, { "{", "}" }, { "a{", "}b" }, { "{}", "" },
        { "{{", "}}" }, { "", "{" }, { "}", "{x}" }, { "{", "}{y}" },
        { "redisson_lock__channel:{lock:", "}" }, { "x{", "" },
    };
    hl_redis_server *first = hl_redis_cluster_node(cluster, 0);
    char key[64];

    (void)state;
    for (int i = 0; i < 200; i++) {
        snprintf(key, sizeof key, "%s%d%s", around[i % 10][0], i * 7919,
                 around[i % 10][1]);
        assert_int_equal(hl_keyslot(key, strlen(key)), keyslot(first, key));
    }
}

/* kill -9 of a master: its replica takes over its slots, and the cluster
 * serves every slot again. */
static void test_failover_after_kill9(void **state)
{
    hl_redis_server *first = hl_redis_cluster_node(cluster, 0);
    int slot = keyslot(first, "failover-probe");
    hl_redis_server *was = hl_redis_cluster_master_of(cluster, slot);
    hl_redis_server *now;

    (void)state;
    assert_non_null(was);
    hl_fixture_kill9(was);
    assert_int_equal(hl_redis_cluster_wait_ok(cluster, 30000), 0);
    now = hl_redis_cluster_master_of(cluster, slot);
    assert_non_null(now);
    assert_ptr_not_equal(now, was);
    assert_int_equal(hl_redis_server_cmd(now, reply, sizeof reply, "SET",
                                         "failover-probe", "1",
                                         (char *)NULL), '+');
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_every_slot_served_by_three_masters),
        cmocka_unit_test(test_master_of_matches_the_servers),
        cmocka_unit_test(test_keyslot_matches_the_server),
        cmocka_unit_test(test_failover_after_kill9),
    };

    return cmocka_run_group_tests(tests, setup, teardown);
}
