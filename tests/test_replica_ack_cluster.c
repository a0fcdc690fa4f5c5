/* Replica acknowledgement on a Redis Cluster is judged per shard: each
 * master's lock writes wait for that master's own replicas, so a shard
 * whose replica stalls refuses grants while the others go on. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <setjmp.h>
#include <cmocka.h>

#include "hilock/hilock.h"
#include "support/fixture.h"
#include "core/transport/keyslot.h"

/* ctest-timeout: 180 */

static hl_redis_cluster *cluster;

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

static long long waits_run(hl_redis_server *s)
{
    static char info[16384];
    assert_int_equal(hl_redis_server_cmd(s, info, sizeof info, "INFO",
                                         "commandstats", (char *)NULL),
                     '$');
    const char *p = strstr(info, "cmdstat_wait:calls=");
    return p ? atoll(p + strlen("cmdstat_wait:calls=")) : 0;
}

/* The replica of master m: the node whose port its INFO names. */
static hl_redis_server *replica_of(hl_redis_server *m)
{
    static char info[4096];
    assert_int_equal(hl_redis_server_cmd(m, info, sizeof info, "INFO",
                                         "replication", (char *)NULL),
                     '$');
    const char *p = strstr(info, "slave0:");
    assert_non_null(p);
    p = strstr(p, "port=");
    assert_non_null(p);
    int port = atoi(p + 5);
    for (size_t i = 0; i < hl_redis_cluster_size(cluster); i++) {
        hl_redis_server *n = hl_redis_cluster_node(cluster, i);
        if (hl_redis_server_port(n) == port)
            return n;
    }
    fail_msg("no node on port %d", port);
    return NULL;
}

/* A replica still in its first sync is no replica the policy counts
 * yet: the cases start once each master's is online. */
static bool replica_online(void *master)
{
    static char info[4096];
    return hl_redis_server_cmd(master, info, sizeof info, "INFO",
                               "replication", (char *)NULL) == '$' &&
           strstr(info, "state=online") != NULL;
}

static bool key_gone_on(hl_redis_server *s, const char *name)
{
    char reply[64];
    return hl_redis_server_cmd(s, reply, sizeof reply, "EXISTS", name,
                               (char *)NULL) == ':' &&
           strcmp(reply, ":0\r\n") == 0;
}

typedef struct key_on {
    hl_redis_server *s;
    const char *name;
} key_on;

static bool key_gone(void *arg)
{
    key_on *k = arg;
    return key_gone_on(k->s, k->name);
}

static void test_per_shard(void **state)
{
    (void)state;
    /* Two names on two different masters. */
    char names[2][32];
    hl_redis_server *masters[2] = {NULL, NULL};
    for (int i = 0, found = 0; found < 2; i++) {
        char n[32];
        snprintf(n, sizeof n, "ack-shard-%d", i);
        hl_redis_server *m =
            hl_redis_cluster_master_of(cluster, (int)hl_keyslot(n, strlen(n)));
        assert_non_null(m);
        if (found == 1 && m == masters[0])
            continue;
        snprintf(names[found], sizeof names[found], "%s", n);
        masters[found++] = m;
    }
    char url[1024];
    snprintf(url, sizeof url, "%s?replicas=all&ack_timeout=150",
             hl_redis_cluster_url(cluster));
    hilock_options *o;
    hilock_client *c;
    assert_int_equal(hilock_options_create(&o), HILOCK_OK);
    assert_int_equal(hilock_options_set_url(o, url), HILOCK_OK);
    assert_int_equal(hilock_client_create(&c, o), HILOCK_OK);
    hilock_options_free(o);
    hilock_lock *l[2];
    for (int i = 0; i < 2; i++)
        assert_int_equal(hilock_lock_create(&l[i], c, names[i],
                                            strlen(names[i])),
                         HILOCK_OK);

    for (int i = 0; i < 2; i++)
        assert_true(hl_wait_until(replica_online, masters[i], hl_widen(10000)));
    /* Healthy: each grant waits for its own master's replica. */
    for (int i = 0; i < 2; i++) {
        long long before = waits_run(masters[i]);
        assert_int_equal(hilock_lock_try_acquire(l[i], 2000, 10000),
                         HILOCK_OK);
        assert_true(waits_run(masters[i]) >= before + 1);
        assert_int_equal(hilock_lock_release(l[i]), HILOCK_OK);
    }

    /* The first shard's replica stalls: that shard refuses, the other
     * grants. */
    hl_redis_server *r = replica_of(masters[0]);
    hl_fixture_pause(r);
    assert_int_equal(hilock_lock_try_acquire(l[0], 400, 10000),
                     HILOCK_ENOACK);
    assert_int_equal(hilock_lock_try_acquire(l[1], 2000, 10000), HILOCK_OK);
    key_on k = {masters[0], names[0]};
    assert_true(hl_wait_until(key_gone, &k, hl_widen(3000)));
    hl_fixture_resume(r);
    assert_int_equal(hilock_lock_release(l[1]), HILOCK_OK);
    assert_int_equal(hilock_lock_try_acquire(l[0], 3000, 10000), HILOCK_OK);
    assert_int_equal(hilock_lock_release(l[0]), HILOCK_OK);

    for (int i = 0; i < 2; i++)
        hilock_lock_destroy(l[i]);
    hilock_client_destroy(c);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_per_shard),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
