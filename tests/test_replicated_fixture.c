/* The private master, replicas and sentinels the replication tests, the
 * demo and the benchmark run on: the replicas must follow the master,
 * and the sentinels must fail over when it dies. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <setjmp.h>
#include <cmocka.h>

#include "support/fixture.h"

/* ctest-timeout: 180 */

static hl_redis_replicated *group;
static char reply[4096];

static int setup(void **state)
{
    (void)state;
    group = hl_fixture_replicated();
    return group ? 0 : -1;
}

static int teardown(void **state)
{
    (void)state;
    hl_redis_replicated_stop(group);
    return 0;
}

static bool has_k(void *arg)
{
    char got[64];

    return hl_redis_server_cmd(arg, got, sizeof got, "GET", "k",
                               (char *)NULL) == '$' &&
           strcmp(got, "$1\r\nv\r\n") == 0;
}

static void test_replicas_follow_the_master(void **state)
{
    hl_redis_server *master = hl_redis_replicated_master(group);

    (void)state;
    assert_int_equal(hl_redis_replicated_nodes(group), 3);
    assert_int_equal(hl_redis_replicated_sentinels(group), 3);
    assert_ptr_equal(master, hl_redis_replicated_node(group, 0));
    assert_int_equal(hl_redis_server_cmd(master, reply, sizeof reply, "SET",
                                         "k", "v", (char *)NULL), '+');
    /* Both replicas acknowledge the write. */
    assert_int_equal(hl_redis_server_cmd(master, reply, sizeof reply, "WAIT",
                                         "2", "5000", (char *)NULL), ':');
    assert_string_equal(reply, ":2\r\n");
    for (size_t i = 1; i < 3; i++) {
        hl_redis_server *r = hl_redis_replicated_node(group, i);

        /* Acknowledged means received; a replica that has just finished
         * its first sync may apply the stream a moment later. */
        if (!hl_wait_until(has_k, r, hl_widen(5000)))
            fail_msg("replica %zu never showed the master's write", i);
        assert_int_equal(hl_redis_server_cmd(r, reply, sizeof reply, "SET",
                                             "k", "w", (char *)NULL), '-');
        assert_int_equal(strncmp(reply, "-READONLY", 9), 0);
    }
}

static void test_sentinel_url(void **state)
{
    const char *url = hl_redis_replicated_sentinel_url(group);
    char want[64];

    (void)state;
    assert_non_null(url);
    assert_int_equal(strncmp(url, "redis-sentinel://127.0.0.1:", 27), 0);
    snprintf(want, sizeof want, "#%s",
             hl_redis_replicated_master_name(group));
    assert_non_null(strstr(url, want));
    /* Every sentinel answers for the master name. */
    for (size_t i = 0; i < 3; i++)
        assert_int_equal(
            hl_redis_server_cmd(hl_redis_replicated_sentinel(group, i), reply,
                                sizeof reply, "SENTINEL",
                                "get-master-addr-by-name",
                                hl_redis_replicated_master_name(group),
                                (char *)NULL),
            '*');
}

/* kill -9 of the master: the sentinels promote a replica, the other one
 * follows it, and the new master takes writes. */
static void test_failover_after_kill9(void **state)
{
    hl_redis_server *was = hl_redis_replicated_master(group);
    hl_redis_server *now;

    (void)state;
    assert_non_null(was);
    hl_fixture_kill9(was);
    now = hl_redis_replicated_wait_master(group, was, 60000);
    assert_non_null(now);
    assert_ptr_not_equal(now, was);
    assert_int_equal(hl_redis_server_cmd(now, reply, sizeof reply, "SET",
                                         "after", "1", (char *)NULL), '+');
    assert_int_equal(hl_redis_server_cmd(now, reply, sizeof reply, "WAIT",
                                         "1", "5000", (char *)NULL), ':');
    assert_string_equal(reply, ":1\r\n");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_replicas_follow_the_master),
        cmocka_unit_test(test_sentinel_url),
        cmocka_unit_test(test_failover_after_kill9),
    };

    return cmocka_run_group_tests(tests, setup, teardown);
}
