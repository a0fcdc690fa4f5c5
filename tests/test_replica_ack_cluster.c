/* Replica acknowledgement on a Redis Cluster is judged per shard: each
 * master's lock writes wait for that master's own replicas, so a shard
 * whose replica stalls refuses grants while the others go on; and a
 * write the cluster redirected is judged by the replicas of the master
 * that ran it, never by the WAIT that followed it to the old one. */
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <setjmp.h>
#include <cmocka.h>

#include "hilock/hilock.h"
#include "support/fixture.h"
#include "core/runtime/ack.h"
#include "core/runtime/client_state.h"
#include "core/runtime/cluster.h"
#include "core/transport/keyslot.h"
#include "support/cluster_util.h"
#include "support/loop_call.h"

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
        assert_int_equal(hilock_lock_create(&l[i], c, names[i]),
                         HILOCK_OK);

    for (int i = 0; i < 2; i++)
        assert_true(hl_wait_until(replica_online, masters[i], hl_widen(10000)));
    /* Healthy: each grant waits for its own master's replica. */
    for (int i = 0; i < 2; i++) {
        long long before = hl_fixture_calls(masters[i], "wait");
        assert_int_equal(hilock_lock_try_acquire(l[i], 2000, 10000),
                         HILOCK_OK);
        assert_true(hl_fixture_calls(masters[i], "wait") >= before + 1);
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

/* ---- a redirected write ------------------------------------------------ */

static hilock_lock *lock_on(hilock_client *c, const char *name)
{
    hilock_lock *l;
    assert_int_equal(hilock_lock_create(&l, c, name),
                     HILOCK_OK);
    return l;
}

/* Each lock taken and given back: the client then maps its name and
 * knows its master's replica count. */
static void warm_up(hilock_lock **locks, int n)
{
    for (int i = 0; i < n; i++) {
        assert_int_equal(hilock_lock_try_acquire(locks[i], 2000, 10000),
                         HILOCK_OK);
        assert_int_equal(hilock_lock_release(locks[i]), HILOCK_OK);
    }
}

static hilock_lock *stay_lock, *moved_lock;
static atomic_int stay_status = -1, moved_status = -1;

static void on_stay(hilock_lock *l, int status, const hilock_acquired *a,
                    void *data)
{
    (void)l, (void)a, (void)data;
    atomic_store(&stay_status, status);
}

static void on_moved(hilock_lock *l, int status, const hilock_acquired *a,
                     void *data)
{
    (void)l, (void)a, (void)data;
    atomic_store(&moved_status, status);
}

/* On the loop thread: both writes leave in one write, with one WAIT. */
static void start_both(hilock_client *c, int status, hilock_reply *reply,
                       void *data)
{
    (void)c, (void)status, (void)data;
    hilock_reply_free(reply);
    if (hilock_lock_acquire_async(stay_lock, 5, 0, 20000, 0, on_stay, NULL,
                                  NULL) != HILOCK_OK)
        atomic_store(&stay_status, HILOCK_EINVAL);
    if (hilock_lock_acquire_async(moved_lock, 5, 0, 20000, 0, on_moved, NULL,
                                  NULL) != HILOCK_OK)
        atomic_store(&moved_status, HILOCK_EINVAL);
}

static bool key_exists(void *arg)
{
    key_on *k = arg;
    char reply[64];
    return hl_redis_server_cmd(k->s, reply, sizeof reply, "EXISTS", k->name,
                               (char *)NULL) == ':' &&
           strcmp(reply, ":1\r\n") == 0;
}

static bool both_answered(void *arg)
{
    (void)arg;
    return atomic_load(&stay_status) != -1 &&
           atomic_load(&moved_status) != -1;
}

/* Master A serves both names as the client knows; one name's slot has
 * moved to master B.  Both replicas are stopped.  The two acquires leave
 * A's connection in one write with one WAIT; A grants one and answers
 * MOVED for the other, which B then grants.  Once B has, A's replica
 * resumes, so A's WAIT is met.  That WAIT covers A's write only: the
 * grant on B, whose replica is still stopped, must fail with
 * HILOCK_ENOACK, not count by A's acknowledgement. */
static void test_redirected_write_judged_where_it_ran(void **state)
{
    (void)state;
    hl_redis_server *a = hl_fx_master(cluster, 0);
    hl_redis_server *b = hl_fx_master(cluster, 1);
    char stay[32], moved[32];
    hl_fx_key_on(cluster, a, "ack-stay", stay, sizeof stay);
    hl_fx_key_on(cluster, a, "ack-moved", moved, sizeof moved);
    int moved_slot = (int)hl_keyslot(moved, strlen(moved));
    assert_int_not_equal(moved_slot, (int)hl_keyslot(stay, strlen(stay)));
    assert_true(hl_wait_until(replica_online, a, hl_widen(10000)));
    assert_true(hl_wait_until(replica_online, b, hl_widen(10000)));

    char url[1024];
    snprintf(url, sizeof url, "%s?replicas=all&ack_timeout=2000",
             hl_redis_cluster_url(cluster));
    hilock_client *c = hl_fx_cluster_client(url, 0, 8000);
    stay_lock = lock_on(c, stay);
    moved_lock = lock_on(c, moved);
    /* The client maps both names to A and knows A's and B's replica
     * counts. */
    char on_b[32];
    hl_fx_key_on(cluster, b, "ack-on-b", on_b, sizeof on_b);
    hilock_lock *b_lock = lock_on(c, on_b);
    warm_up((hilock_lock *[]){stay_lock, moved_lock, b_lock}, 3);

    hl_fx_assign_slot(cluster, moved_slot, b);
    hl_redis_server *ra = replica_of(a), *rb = replica_of(b);
    hl_fixture_pause(ra);
    hl_fixture_pause(rb);
    atomic_store(&stay_status, -1);
    atomic_store(&moved_status, -1);
    assert_int_equal(hilock_client_command_async(c, 1,
                                                 (const char *[]){"PING"},
                                                 NULL, start_both, NULL),
                     HILOCK_OK);
    key_on ran = {b, moved};
    assert_true(hl_wait_until(key_exists, &ran, hl_widen(5000)));
    hl_fixture_resume(ra);
    assert_true(hl_wait_until(both_answered, NULL, hl_widen(10000)));
    assert_int_equal(atomic_load(&stay_status), HILOCK_OK);
    if (atomic_load(&moved_status) != HILOCK_ENOACK)
        fail_msg("the grant on B came back %s, though B's replica is "
                 "stopped",
                 hilock_errname(atomic_load(&moved_status)));
    /* Given back on B. */
    assert_true(hl_wait_until(key_gone, &ran, hl_widen(3000)));
    hl_fixture_resume(rb);

    bool deleted = false;
    assert_int_equal(hilock_lock_force_release(stay_lock, &deleted),
                     HILOCK_OK);
    assert_true(deleted);
    hl_fx_assign_slot(cluster, moved_slot, a);
    hilock_lock_destroy(stay_lock);
    hilock_lock_destroy(moved_lock);
    hilock_lock_destroy(b_lock);
    hilock_client_destroy(c);
}

/* ---- a redirection away from a master without replicas ----------------- */

typedef struct count_probe {
    unsigned slot;
    int k;
} count_probe;

static void read_count_on_loop(hilock_client *c, void *arg)
{
    count_probe *p = arg;
    hl_conn *conn = c->cluster ? hl_cluster_conn_for_slot(c->cluster, p->slot)
                               : NULL;
    p->k = conn ? hl_ack_replicas(c, conn) : -1;
}

typedef struct no_replica_seen {
    hilock_client *c;
    hilock_lock *probe; /* a lock on the master, to make the client count */
    unsigned slot;
} no_replica_seen;

/* The client has read that the master has no replica. */
static bool client_counts_none(void *arg)
{
    no_replica_seen *s = arg;
    if (hilock_lock_try_acquire(s->probe, 1000, 10000) != HILOCK_OK ||
        hilock_lock_release(s->probe) != HILOCK_OK)
        return false;
    count_probe p = {s->slot, -1};
    hl_run_on_loop(s->c, read_count_on_loop, &p);
    return p.k == 0;
}

static bool no_replica_connected(void *master)
{
    char info[4096];
    return hl_redis_server_cmd(master, info, sizeof info, "INFO",
                               "replication", (char *)NULL) == '$' &&
           strstr(info, "connected_slaves:0") != NULL;
}

/* Master A has no replica, which the client knows, so its writes there
 * need no WAIT.  One name's slot has moved to master B, whose replica is
 * stopped.  The write sent to A is redirected and B grants it: that grant
 * must wait for B's replica, and fail with HILOCK_ENOACK, not count as a
 * write on A would. */
static void test_redirect_from_a_master_without_replicas(void **state)
{
    (void)state;
    hl_redis_server *a = hl_fx_master(cluster, 2);
    hl_redis_server *b = hl_fx_master(cluster, 1);
    char stay[32], moved[32], on_b[32];
    hl_fx_key_on(cluster, a, "ack-lone", stay, sizeof stay);
    hl_fx_key_on(cluster, a, "ack-lone-moved", moved, sizeof moved);
    hl_fx_key_on(cluster, b, "ack-lone-b", on_b, sizeof on_b);
    int moved_slot = (int)hl_keyslot(moved, strlen(moved));
    assert_true(hl_wait_until(replica_online, a, hl_widen(10000)));
    assert_true(hl_wait_until(replica_online, b, hl_widen(10000)));

    char url[1024];
    snprintf(url, sizeof url, "%s?replicas=all&ack_timeout=1500",
             hl_redis_cluster_url(cluster));
    hilock_client *c = hl_fx_cluster_client(url, 0, 8000);
    hilock_lock *stay_l = lock_on(c, stay), *moved_l = lock_on(c, moved);
    hilock_lock *b_l = lock_on(c, on_b);
    warm_up((hilock_lock *[]){moved_l, b_l}, 2);

    /* Every node answers SETSLOT, so the slot moves before any stops. */
    hl_fx_assign_slot(cluster, moved_slot, b);
    /* A loses its replica: stopped, and its link cut. */
    hl_redis_server *ra = replica_of(a), *rb = replica_of(b);
    hl_fixture_pause(ra);
    char reply[256];
    assert_true(hl_redis_server_cmd(a, reply, sizeof reply, "CLIENT", "KILL",
                                    "TYPE", "replica", (char *)NULL) == ':');
    assert_true(hl_wait_until(no_replica_connected, a, hl_widen(5000)));
    no_replica_seen seen = {c, stay_l, hl_keyslot(stay, strlen(stay))};
    assert_true(hl_wait_until(client_counts_none, &seen, hl_widen(10000)));

    hl_fixture_pause(rb);
    int rc = hilock_lock_try_acquire(moved_l, 0, 20000);
    if (rc != HILOCK_ENOACK)
        fail_msg("the grant on B came back %s (%s), though B's replica is "
                 "stopped",
                 hilock_errname(rc), hilock_last_error());
    key_on k = {b, moved};
    assert_true(hl_wait_until(key_gone, &k, hl_widen(3000)));

    hl_fixture_resume(rb);
    hl_fixture_resume(ra);
    hl_fx_assign_slot(cluster, moved_slot, a);
    assert_true(hl_wait_until(replica_online, a, hl_widen(30000)));
    assert_true(hl_wait_until(replica_online, b, hl_widen(10000)));
    hilock_lock_destroy(stay_l);
    hilock_lock_destroy(moved_l);
    hilock_lock_destroy(b_l);
    hilock_client_destroy(c);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_per_shard),
        cmocka_unit_test(test_redirected_write_judged_where_it_ran),
        cmocka_unit_test(test_redirect_from_a_master_without_replicas),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
