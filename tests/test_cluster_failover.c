/* Failover on a real Redis Cluster (3 masters, 3 replicas, a short
 * cluster-node-timeout): a master killed with kill -9 while requests wait
 * for it and locks on its slots are held and contended, a manual
 * CLUSTER FAILOVER, and a hold the promoted replica never received.  The
 * client follows each new master, requests it never wrote go there,
 * requests it wrote fail at once, and every hold is either on the new
 * master or reported lost.  Roles change from case to case: each case
 * finds its shard's master and replica when it starts. */
/* ctest-timeout: 240 */
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <setjmp.h>
#include <cmocka.h>

#include "core/engine/engine_internal.h"
#include "core/runtime/client_state.h"
#include "core/runtime/cluster.h"
#include "core/transport/keyslot.h"
#include "hilock/client.h"
#include "hilock/error.h"
#include "hilock/lock.h"
#include "hilock/options.h"
#include "hilock/reply.h"
#include "support/cluster_util.h"
#include "support/fixture.h"
#include "support/lock_helpers.h"
#include "support/loop_call.h"

/* Short, so that a replica takes over in a few seconds; the fixture's
 * default is 2000 ms. */
#define NODE_TIMEOUT_MS 1500

static hl_redis_cluster *cluster;
static char reply[65536];

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

/* ---- what the tests share ---------------------------------------------- */

/* A client whose one seed is node s: the node a case leaves alive, so
 * that what the client keeps on its seed (commands without a key,
 * pub/sub) is not part of the failover. */
static hilock_client *client_on(hl_redis_server *s, int64_t watchdog_ms,
                                int64_t command_timeout_ms)
{
    char url[96];
    snprintf(url, sizeof url, "redis://127.0.0.1:%d",
             hl_redis_server_port(s));
    return hl_fx_cluster_client(url, watchdog_ms, command_timeout_ms);
}

static hl_redis_server *master_of(int slot)
{
    return hl_fx_master_of(cluster, slot);
}

static bool info_has(hl_redis_server *s, const char *section,
                     const char *text)
{
    return hl_redis_server_cmd(s, reply, sizeof reply, "INFO", section,
                               (char *)NULL) == '$' &&
           strstr(reply, text) != NULL;
}

/* The node that replicates m with its link up, or NULL. */
static hl_redis_server *synced_replica_of(hl_redis_server *m)
{
    char want[48];
    snprintf(want, sizeof want, "master_port:%d", hl_redis_server_port(m));
    for (size_t i = 0; i < hl_redis_cluster_size(cluster); i++) {
        hl_redis_server *n = hl_redis_cluster_node(cluster, i);
        if (n != m && hl_redis_server_is_running(n) &&
            info_has(n, "replication", want) &&
            strstr(reply, "master_link_status:up") != NULL)
            return n;
    }
    return NULL;
}

typedef struct replica_probe {
    hl_redis_server *master;
    hl_redis_server *replica;
} replica_probe;

static bool replica_found(void *arg)
{
    replica_probe *p = arg;
    p->replica = synced_replica_of(p->master);
    return p->replica != NULL;
}

/* m's replica, once it is in sync (a restarted node needs a full sync). */
static hl_redis_server *replica_of(hl_redis_server *m)
{
    replica_probe p = {.master = m};
    if (!hl_wait_until(replica_found, &p, hl_widen(20000)))
        fail_msg("no replica of port %d in sync", hl_redis_server_port(m));
    return p.replica;
}

/* A key of the form "<prefix>-<n>" whose slot m serves. */
static void key_on(hl_redis_server *m, const char *prefix, char *out,
                   size_t cap)
{
    hl_fx_key_on(cluster, m, prefix, out, cap);
}

static long long int_on_node(hl_redis_server *s, const char *cmd,
                             const char *key)
{
    assert_int_equal(hl_redis_server_cmd(s, reply, sizeof reply, cmd, key,
                                         (char *)NULL),
                     ':');
    return atoll(reply + 1);
}

typedef struct link_probe {
    hilock_client *client;
    unsigned slot;
    bool down;
} link_probe;

static void read_link(hilock_client *c, void *arg)
{
    link_probe *p = arg;
    p->down = c->cluster && hl_cluster_slot_link_down(c->cluster, p->slot);
}

static bool link_down(void *arg)
{
    link_probe *p = arg;
    hl_run_on_loop(p->client, read_link, p);
    return p->down;
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

static void expect_master(int slot, hl_redis_server *want, int timeout_ms)
{
    master_probe p = {.slot = slot, .want = want};
    if (!hl_wait_until(master_is, &p, timeout_ms))
        fail_msg("port %d is not the master of slot %d",
                 hl_redis_server_port(want), slot);
}

/* A killed node comes back empty and rejoins as a replica of the master
 * that took its slots; the next case may fail over to it. */
static void bring_back(hl_redis_server *killed, hl_redis_server *heir)
{
    hl_fixture_restart(killed);
    assert_int_equal(hl_redis_cluster_wait_ok(cluster, hl_widen(30000)), 0);
    assert_ptr_equal(replica_of(heir), killed);
}

static void report(const char *what, int64_t ms)
{
    printf("    failover: %s %lld ms (cluster-node-timeout %d ms)\n", what,
           (long long)ms, NODE_TIMEOUT_MS);
    fflush(stdout);
}

typedef struct lost_mark {
    atomic_bool lost;
    _Atomic int64_t at; /* hl_now_ms() */
} lost_mark;

static void on_lost(hilock_lock *lock, uint64_t owner, void *data)
{
    (void)lock, (void)owner;
    lost_mark *m = data;
    atomic_store(&m->at, hl_now_ms());
    atomic_store(&m->lost, true);
}

/* ---- requests waiting on a master that dies ----------------------------- */

typedef struct call {
    atomic_bool done;
    int rc;
    int64_t at;
    char value[32]; /* a SET's */
    hilock_reply *reply;
} call;

static void on_call(hilock_client *c, int status, hilock_reply *r, void *data)
{
    (void)c;
    call *k = data;
    k->rc = status;
    k->reply = r;
    k->at = hl_now_ms();
    atomic_store(&k->done, true);
}

static bool blocked_on(void *arg)
{
    return info_has(arg, "clients", "blocked_clients:1\r");
}

/* Requests the client had not written when its master died wait for the
 * replica that takes over, and land there in their order, long before
 * their command timeout; one it had written fails at once with
 * HILOCK_EIO and is not sent again, since the dead master may have run
 * it. */
static void test_queued_requests_follow_the_failover(void **state)
{
    (void)state;
    const int64_t timeout_ms = 10000;
    hl_redis_server *victim = master_of(HL_CLUSTER_SLOTS / 2);
    hl_redis_server *heir = replica_of(victim);
    hilock_client *c = client_on(master_of(0), 0, timeout_ms);
    char key[32], list[32];
    key_on(victim, "queued", key, sizeof key);
    key_on(victim, "blocked", list, sizeof list);
    unsigned slot = hl_keyslot(key, strlen(key));

    /* Written: a BLPOP the master is blocked in when it dies. */
    call pop = {0};
    const char *pop_argv[] = {"BLPOP", list, "8"};
    assert_int_equal(hilock_client_command_async(c, 3, pop_argv, NULL,
                                                 on_call, &pop),
                     HILOCK_OK);
    assert_true(hl_wait_until(blocked_on, victim, 5000));

    int64_t killed_at = hl_now_ms();
    hl_fixture_kill9(victim);
    link_probe lp = {.client = c, .slot = slot};
    assert_true(hl_wait_until(link_down, &lp, 5000));

    /* Not written: queued while the link is down. */
    enum { N = 5 };
    call sets[N];
    memset(sets, 0, sizeof sets);
    for (int i = 0; i < N; i++) {
        snprintf(sets[i].value, sizeof sets[i].value, "v%d", i);
        const char *argv[] = {"SET", key, sets[i].value};
        assert_int_equal(hilock_client_command_async(c, 3, argv, NULL,
                                                     on_call, &sets[i]),
                         HILOCK_OK);
    }

    assert_true(hl_wait_flag(&pop.done, hl_widen(5000)));
    assert_int_equal(pop.rc, HILOCK_EIO);
    assert_null(pop.reply);
    assert_true(pop.at - killed_at < (hl_under_valgrind() ? 5000 : 2000));

    for (int i = 0; i < N; i++) {
        assert_true(hl_wait_flag(&sets[i].done, hl_widen(3 * timeout_ms)));
        if (sets[i].rc != HILOCK_OK)
            fail_msg("SET %d: %s after %lld ms", i, hilock_errname(sets[i].rc),
                     (long long)(sets[i].at - killed_at));
        assert_int_equal(sets[i].reply->type, HILOCK_REPLY_STATUS);
        hilock_reply_free(sets[i].reply);
        /* Well before the command timeout, which they would have waited
         * out on the dead master's link. */
        assert_true(sets[i].at - killed_at < timeout_ms - 2000);
    }
    report("requests queued on the killed master answered after",
           sets[N - 1].at - killed_at);

    assert_int_equal(hl_redis_cluster_wait_ok(cluster, hl_widen(30000)), 0);
    assert_ptr_equal(master_of((int)slot), heir);
    assert_int_equal(hl_redis_server_cmd(heir, reply, sizeof reply, "GET",
                                         key, (char *)NULL),
                     '$');
    /* In the order they were queued: the last one's value stays. */
    assert_string_equal(reply, "$2\r\nv4\r\n");
    /* The BLPOP was not sent again to the new master. */
    assert_true(info_has(heir, "clients", "blocked_clients:0\r"));
    hilock_client_destroy(c);
    bring_back(victim, heir);
}

/* ---- holds the heir never received --------------------------------------- */

/* Take l (named name, on master) with the heir cut off from the grant:
 * paused, its link dropped, so the master counts no replica and sends no
 * WAIT.  The heir stays paused. */
static void hold_kept_from_heir(hilock_lock *l, hl_redis_server *master,
                                hl_redis_server *heir, const char *name)
{
    hl_fixture_pause(heir);
    assert_true(hl_fixture_client_kill(master, "replica") >= 1);
    assert_int_equal(hilock_lock_try_acquire(l, 0, HILOCK_LEASE_WATCHDOG),
                     HILOCK_OK);
    assert_int_equal(int_on_node(master, "EXISTS", name), 1);
}

/* ---- a takeover from a live master --------------------------------------- */

/* CLUSTER FAILOVER TAKEOVER while the old master runs: it steps down at
 * once, and a hold its heir never received is reported
 * lost when the client's map shows the switch, not at the first renewal
 * a third of the watchdog timeout after the grant, while contenders on
 * the new master would find the lock free. */
static void test_takeover_from_a_live_master_checks_the_holds(void **state)
{
    (void)state;
    const int64_t watchdog_ms = 60000;
    const int slot = 1;
    hl_redis_server *old = master_of(slot);
    hl_redis_server *heir = replica_of(old);
    hilock_client *c = client_on(master_of(HL_CLUSTER_SLOTS - 1), watchdog_ms,
                                 0);
    char name[32];
    key_on(old, "live-takeover", name, sizeof name);
    hilock_lock *l = NULL;
    lost_mark lost = {0};
    assert_int_equal(hilock_lock_create(&l, c, name),
                     HILOCK_OK);
    assert_int_equal(hilock_lock_set_lost_callback(l, on_lost, &lost),
                     HILOCK_OK);
    /* Resumed, the heir must not sync again before it takes over: a
     * password the old master does not have makes every attempt fail. */
    assert_int_equal(hl_redis_server_cmd(heir, reply, sizeof reply, "CONFIG",
                                         "SET", "masterauth", "not-the-one",
                                         (char *)NULL),
                     '+');
    hold_kept_from_heir(l, old, heir, name);
    hilock_client_stats before;
    assert_int_equal(hl_client_counters(c, &before), HILOCK_OK);
    hl_fixture_resume(heir);
    int64_t asked_at = hl_now_ms();
    assert_int_equal(hl_redis_server_cmd(heir, reply, sizeof reply,
                                         "CLUSTER", "FAILOVER", "TAKEOVER",
                                         (char *)NULL),
                     '+');
    expect_master(slot, heir, hl_widen(10000));
    assert_int_equal(int_on_node(heir, "EXISTS", name), 0);
    assert_int_equal(hl_redis_server_cmd(heir, reply, sizeof reply, "CONFIG",
                                         "SET", "masterauth", "",
                                         (char *)NULL),
                     '+');

    assert_true(hl_wait_flag(&lost.lost, hl_widen((int)watchdog_ms)));
    int64_t after = atomic_load(&lost.at) - asked_at;
    report("takeover from a live master: a hold the heir lacks reported "
           "lost after",
           after);
    hilock_client_stats st;
    assert_int_equal(hl_client_counters(c, &st), HILOCK_OK);
    /* Found by a check at the switch, not by a renewal. */
    assert_int_equal(st.leases_renewed, before.leases_renewed);
    if (!hl_under_valgrind())
        assert_true(after < watchdog_ms / 3 - 5000);
    assert_int_equal(hilock_lock_release(l), HILOCK_ELEASELOST);
    hilock_lock_destroy(l);
    hilock_client_destroy(c);
    /* The old master follows its heir. */
    assert_int_equal(hl_redis_cluster_wait_ok(cluster, hl_widen(30000)), 0);
    assert_ptr_equal(replica_of(heir), old);
}

/* ---- a master that stops answering ------------------------------------ */

typedef struct detailed_call {
    atomic_bool done;
    int rc;
    int64_t at; /* hl_now_ms() */
    char detail[256];
} detailed_call;

static void on_detailed_call(hilock_client *c, int status, hilock_reply *r,
                             void *data)
{
    (void)c;
    detailed_call *k = data;
    hilock_reply_free(r);
    k->rc = status;
    k->at = hl_now_ms();
    snprintf(k->detail, sizeof k->detail, "%s", hilock_last_error());
    atomic_store(&k->done, true);
}

/* A paused master keeps its link up, so nothing is lost on the client's
 * side: only the map shows that its replica took over.  The request it
 * was sent ends with HILOCK_EIO as soon as a read shows that, not at its
 * command timeout (20 s here), and new requests go to the new master. */
static void test_paused_master_lets_go_at_the_switch(void **state)
{
    (void)state;
    const int64_t timeout_ms = 20000;
    hl_redis_server *victim = master_of(HL_CLUSTER_SLOTS / 2);
    hl_redis_server *heir = replica_of(victim);
    hilock_client *c = client_on(master_of(0), 0, timeout_ms);
    char key[32];
    key_on(victim, "paused", key, sizeof key);
    const char *set_argv[] = {"SET", key, "before"};
    hilock_reply *r = NULL;
    assert_int_equal(hilock_client_command(c, 3, set_argv, NULL, &r),
                     HILOCK_OK);
    hilock_reply_free(r);

    hl_fixture_pause(victim);
    int64_t paused_at = hl_now_ms();
    detailed_call get = {0};
    const char *get_argv[] = {"GET", key};
    assert_int_equal(hilock_client_command_async(c, 2, get_argv, NULL,
                                                 on_detailed_call, &get),
                     HILOCK_OK);
    expect_master((int)hl_keyslot(key, strlen(key)), heir, hl_widen(20000));
    int64_t promoted_after = hl_now_ms() - paused_at;
    /* Well before the command timeout: a read of the map lets it go. */
    bool ended = hl_wait_flag(&get.done, hl_widen(8000));
    hl_fixture_resume(victim);
    assert_true(ended);
    if (get.rc != HILOCK_EIO || strstr(get.detail, "another master") == NULL)
        fail_msg("the request on the paused master ended with %s (%s)",
                 hilock_errname(get.rc), get.detail);
    report("SIGSTOP: the heir seen as master after", promoted_after);
    report("SIGSTOP: the request sent to the paused master ended after",
           get.at - paused_at);

    const char *after_argv[] = {"SET", key, "after"};
    assert_int_equal(hilock_client_command(c, 3, after_argv, NULL, &r),
                     HILOCK_OK);
    hilock_reply_free(r);
    assert_int_equal(hl_redis_server_cmd(heir, reply, sizeof reply, "GET",
                                         key, (char *)NULL),
                     '$');
    assert_string_equal(reply, "$5\r\nafter\r\n");
    hilock_client_destroy(c);
    /* The old master learns it was replaced and follows the heir. */
    assert_int_equal(hl_redis_cluster_wait_ok(cluster, hl_widen(30000)), 0);
    assert_ptr_equal(replica_of(heir), victim);
}

/* ---- a manual failover ------------------------------------------------- */

typedef struct hammer {
    hilock_client *client;
    const char *key;
    atomic_bool stop;
    int ok;
    int failed;
    int first_rc;
    char first_detail[256];
} hammer;

static void *hammer_main(void *arg)
{
    hammer *h = arg;
    while (!atomic_load(&h->stop)) {
        const char *argv[] = {"SET", h->key, "hammered"};
        hilock_reply *r = NULL;
        int rc = hilock_client_command(h->client, 3, argv, NULL, &r);
        hilock_reply_free(r);
        if (rc == HILOCK_OK) {
            h->ok++;
        } else if (h->failed++ == 0) {
            h->first_rc = rc;
            snprintf(h->first_detail, sizeof h->first_detail, "%s",
                     hilock_last_error());
        }
    }
    return NULL;
}

typedef struct renew_probe {
    hilock_client *client;
    uint64_t want;
    hilock_client_stats st;
} renew_probe;

static bool renewed(void *arg)
{
    renew_probe *p = arg;
    assert_int_equal(hl_client_counters(p->client, &p->st), HILOCK_OK);
    return p->st.leases_renewed >= p->want || p->st.leases_lost > 0;
}

typedef struct shard_probe {
    hl_redis_server *m;
    const char *channel;
} shard_probe;

static bool one_shard_listener(void *arg)
{
    shard_probe *p = arg;
    return hl_fixture_shardnumsub(p->m, p->channel) == 1;
}

static void on_asked(hilock_lock *lock, uint64_t owner, const char *reason,
                     size_t len, void *data)
{
    (void)lock, (void)owner, (void)reason, (void)len;
    atomic_fetch_add((atomic_int *)data, 1);
}

/* CLUSTER FAILOVER on a replica: the old master hands over its slots in
 * step with it.  Commands on the shard keep succeeding (MOVED is
 * followed), the holds were replicated and stay held, the watchdog
 * renews them on the new master, and a holder listening for requests to
 * give its lock up listens there. */
static void test_manual_failover_keeps_holds(void **state)
{
    (void)state;
    const int64_t watchdog_ms = 3000;
    const int slot = HL_CLUSTER_SLOTS / 2;
    hl_redis_server *old = master_of(slot);
    hl_redis_server *heir = replica_of(old);
    hilock_client *c = client_on(master_of(0), watchdog_ms, 0);
    enum { N = 3 };
    hilock_lock *locks[N];
    char names[N][32];
    lost_mark lost[N];
    memset(lost, 0, sizeof lost);
    for (int i = 0; i < N; i++) {
        char prefix[16];
        snprintf(prefix, sizeof prefix, "manual%d", i);
        key_on(old, prefix, names[i], sizeof names[i]);
        locks[i] = NULL;
        assert_int_equal(hilock_lock_create(&locks[i], c, names[i]),
                         HILOCK_OK);
        assert_int_equal(hilock_lock_set_lost_callback(locks[i], on_lost,
                                                       &lost[i]),
                         HILOCK_OK);
        assert_int_equal(hilock_lock_try_acquire(locks[i], 0,
                                                 HILOCK_LEASE_WATCHDOG),
                         HILOCK_OK);
    }
    atomic_int asked = 0;
    char channel[64];
    snprintf(channel, sizeof channel, "hilock_release_request:{%s}",
             names[0]);
    assert_int_equal(hilock_lock_set_release_request_callback(locks[0],
                                                              on_asked,
                                                              &asked),
                     HILOCK_OK);
    shard_probe sp = {old, channel};
    assert_true(hl_wait_until(one_shard_listener, &sp, hl_widen(10000)));
    char key[32];
    key_on(old, "hammer", key, sizeof key);
    hammer h = {.client = c, .key = key};
    pthread_t t;
    assert_int_equal(pthread_create(&t, NULL, hammer_main, &h), 0);

    int64_t asked_at = hl_now_ms();
    assert_int_equal(hl_redis_server_cmd(heir, reply, sizeof reply,
                                         "CLUSTER", "FAILOVER",
                                         (char *)NULL),
                     '+');
    expect_master(slot, heir, hl_widen(15000));
    /* A lock taken and given back on the shard: operations go on. */
    hilock_lock *fresh = NULL;
    char fresh_name[32];
    key_on(heir, "manual-fresh", fresh_name, sizeof fresh_name);
    assert_int_equal(hilock_lock_create(&fresh, c, fresh_name),
                     HILOCK_OK);
    assert_int_equal(hilock_lock_try_acquire(fresh, 5000, 10000), HILOCK_OK);
    report("manual failover: a lock on the shard granted by the new "
           "master after",
           hl_now_ms() - asked_at);
    assert_int_equal(int_on_node(heir, "EXISTS", fresh_name), 1);
    assert_int_equal(hilock_lock_release(fresh), HILOCK_OK);
    hilock_lock_destroy(fresh);

    /* Two more rounds of renewals, now on the new master. */
    hilock_client_stats st;
    assert_int_equal(hl_client_counters(c, &st), HILOCK_OK);
    renew_probe rp = {.client = c, .want = st.leases_renewed + 2 * N};
    assert_true(hl_wait_until(renewed, &rp, hl_widen(4 * (int)watchdog_ms)));
    atomic_store(&h.stop, true);
    pthread_join(t, NULL);
    if (h.failed != 0)
        fail_msg("%d of %d commands failed during the failover, first %s: "
                 "%s",
                 h.failed, h.failed + h.ok, hilock_errname(h.first_rc),
                 h.first_detail);
    assert_true(h.ok > 0);
    assert_int_equal(rp.st.leases_lost, 0);
    /* The holder's subscription followed its slot to the new master. */
    sp.m = heir;
    assert_true(hl_wait_until(one_shard_listener, &sp, hl_widen(15000)));
    hilock_client *asker_c = client_on(master_of(0), 0, 0);
    hilock_lock *asker = NULL;
    assert_int_equal(hilock_lock_create(&asker, asker_c, names[0]),
                     HILOCK_OK);
    int64_t heard = 0;
    assert_int_equal(hilock_lock_request_release(asker, "after", &heard),
                     HILOCK_OK);
    assert_int_equal(heard, 1);
    hl_expect_count(&asked, 1, hl_widen(5000));
    hilock_lock_destroy(asker);
    hilock_client_destroy(asker_c);
    for (int i = 0; i < N; i++) {
        assert_false(atomic_load(&lost[i].lost));
        bool gone = true, held = false;
        assert_int_equal(hilock_lock_lease_lost(locks[i], &gone), HILOCK_OK);
        assert_false(gone);
        assert_int_equal(hilock_lock_is_held_by_me(locks[i], &held),
                         HILOCK_OK);
        assert_true(held);
        long long ttl = int_on_node(heir, "PTTL", names[i]);
        assert_true(ttl > 0 && ttl <= watchdog_ms);
        assert_int_equal(hilock_lock_release(locks[i]), HILOCK_OK);
        assert_int_equal(int_on_node(heir, "EXISTS", names[i]), 0);
        hilock_lock_destroy(locks[i]);
    }
    hilock_client_destroy(c);
}

/* ---- kill -9 under held and contended locks ----------------------------- */

typedef struct waiter {
    hilock_lock *lock;
    int rc;
    char detail[256];
    int64_t got_at;
    atomic_bool done;
} waiter;

static void *waiter_main(void *arg)
{
    waiter *w = arg;
    w->rc = hilock_lock_try_acquire(w->lock, 20000, HILOCK_LEASE_WATCHDOG);
    w->got_at = hl_now_ms();
    snprintf(w->detail, sizeof w->detail, "%s",
             w->rc ? hilock_last_error() : "");
    if (w->rc == HILOCK_OK)
        w->rc = hilock_lock_release(w->lock);
    atomic_store(&w->done, true);
    return NULL;
}

typedef struct wait_probe {
    hilock_client *client;
    hilock_lock *lock;
    bool waiting;
} wait_probe;

static void read_waiting(hilock_client *c, void *arg)
{
    (void)c;
    wait_probe *p = arg;
    p->waiting = p->lock->ops != NULL &&
                 p->lock->ops->state == HL_ACQUIRE_WAITING &&
                 p->lock->ops->saw_held;
}

static bool is_waiting(void *arg)
{
    wait_probe *p = arg;
    hl_run_on_loop(p->client, read_waiting, p);
    return p->waiting;
}

/* kill -9 a master while locks on its slots are held with the watchdog
 * and waited for by another client.  Its replica takes over and the
 * client follows: a new acquire on the shard, made right after the kill,
 * succeeds on the new master; each hold is either still on the new
 * master (and the client says so) or reported lost, never kept silently;
 * the waiters end with the lock or a clear error, and none holds a lock
 * while its holder still does. */
static void test_kill9_under_held_and_contended_locks(void **state)
{
    (void)state;
    const int64_t watchdog_ms = 6000;
    hl_redis_server *victim = master_of(0);
    hl_redis_server *heir = replica_of(victim);
    hl_redis_server *seed = master_of(HL_CLUSTER_SLOTS - 1);
    hilock_client *a = client_on(seed, watchdog_ms, 0);
    hilock_client *b = client_on(seed, watchdog_ms, 0);
    enum { N = 3 };
    hilock_lock *held[N], *wanted[N];
    char names[N][32];
    lost_mark lost[N];
    waiter w[N];
    pthread_t threads[N];
    memset(lost, 0, sizeof lost);
    memset(w, 0, sizeof w);
    for (int i = 0; i < N; i++) {
        char prefix[16];
        snprintf(prefix, sizeof prefix, "killed%d", i);
        key_on(victim, prefix, names[i], sizeof names[i]);
        held[i] = wanted[i] = NULL;
        assert_int_equal(hilock_lock_create(&held[i], a, names[i]),
                         HILOCK_OK);
        assert_int_equal(hilock_lock_create(&wanted[i], b, names[i]),
                         HILOCK_OK);
        assert_int_equal(hilock_lock_set_lost_callback(held[i], on_lost,
                                                       &lost[i]),
                         HILOCK_OK);
        assert_int_equal(hilock_lock_try_acquire(held[i], 0,
                                                 HILOCK_LEASE_WATCHDOG),
                         HILOCK_OK);
        w[i].lock = wanted[i];
        assert_int_equal(pthread_create(&threads[i], NULL, waiter_main,
                                        &w[i]),
                         0);
        wait_probe wp = {.client = b, .lock = wanted[i]};
        assert_true(hl_wait_until(is_waiting, &wp, hl_widen(5000)));
    }

    int64_t killed_at = hl_now_ms();
    hl_fixture_kill9(victim);
    /* Operations on the shard resume: an acquire sent now waits for the
     * new master and gets the lock there. */
    hilock_lock *fresh = NULL;
    char fresh_name[32];
    key_on(victim, "killed-fresh", fresh_name, sizeof fresh_name);
    assert_int_equal(hilock_lock_create(&fresh, a, fresh_name),
                     HILOCK_OK);
    int rc = hilock_lock_try_acquire(fresh, 15000, 10000);
    int64_t resumed_at = hl_now_ms();
    if (rc != HILOCK_OK)
        fail_msg("acquire after the kill: %s: %s", hilock_errname(rc),
                 hilock_last_error());
    report("kill -9: a lock on the shard granted again after",
           resumed_at - killed_at);
    assert_true(resumed_at - killed_at < 15000);
    assert_int_equal(hl_redis_cluster_wait_ok(cluster, hl_widen(30000)), 0);
    assert_ptr_equal(master_of(0), heir);
    assert_int_equal(int_on_node(heir, "EXISTS", fresh_name), 1);
    assert_int_equal(hilock_lock_release(fresh), HILOCK_OK);
    hilock_lock_destroy(fresh);

    /* A full renewal round after the failover: every hold has been
     * confirmed on the new master, or reported lost. */
    hilock_client_stats st;
    assert_int_equal(hl_client_counters(a, &st), HILOCK_OK);
    renew_probe rp = {.client = a, .want = st.leases_renewed + N};
    assert_true(hl_wait_until(renewed, &rp, hl_widen(3 * (int)watchdog_ms)));

    int kept = 0;
    int64_t end_of_hold[N];
    for (int i = 0; i < N; i++) {
        bool gone = true;
        assert_int_equal(hilock_lock_lease_lost(held[i], &gone), HILOCK_OK);
        if (gone) {
            /* Reported, through the callback too. */
            assert_true(atomic_load(&lost[i].lost));
            assert_int_equal(hilock_lock_release(held[i]),
                             HILOCK_ELEASELOST);
            end_of_hold[i] = atomic_load(&lost[i].at);
            continue;
        }
        /* Kept: then the new master has it. */
        kept++;
        bool on_server = false;
        assert_int_equal(hilock_lock_is_held_by_me(held[i], &on_server),
                         HILOCK_OK);
        assert_true(on_server);
        assert_int_equal(int_on_node(heir, "HLEN", names[i]), 1);
        end_of_hold[i] = hl_now_ms();
        assert_int_equal(hilock_lock_release(held[i]), HILOCK_OK);
    }
    printf("    failover: %d of %d holds kept through kill -9\n", kept, N);

    int woken = 0;
    for (int i = 0; i < N; i++) {
        assert_true(hl_wait_flag(&w[i].done, hl_widen(25000)));
        pthread_join(threads[i], NULL);
        if (w[i].rc == HILOCK_OK) {
            woken++;
            /* Never while the holder still held it. */
            assert_true(w[i].got_at >= end_of_hold[i]);
            printf("    failover: waiter %d got its lock %lld ms after the "
                   "hold ended\n",
                   i, (long long)(w[i].got_at - end_of_hold[i]));
        } else {
            /* Gave up, saying why. */
            assert_true(w[i].rc == HILOCK_EBUSY ||
                        w[i].rc == HILOCK_ETIMEDOUT);
            assert_true(w[i].detail[0] != '\0');
            printf("    failover: waiter %d: %s: %s\n", i,
                   hilock_errname(w[i].rc), w[i].detail);
        }
        hilock_lock_destroy(wanted[i]);
        hilock_lock_destroy(held[i]);
    }
    printf("    failover: %d of %d waiters got their lock\n", woken, N);
    hilock_client_destroy(b);
    hilock_client_destroy(a);
    bring_back(victim, heir);
}

/* ---- a grant the replica never received -------------------------------- */

/* Asynchronous replication: a grant the master acknowledged and died with
 * before its replica had it.  The replica is stopped and its link cut
 * before the acquire, the master killed, and the replica made master.
 * Once the client's map shows the slot left a dead master, every hold is
 * renewed at once: this one is found missing and reported lost (callback
 * and state), long before its first regular renewal 20 s after the
 * grant; the client never says it holds the lock again, and the lock is
 * free for a new acquire. */
static void test_unreplicated_hold_is_reported_lost(void **state)
{
    (void)state;
    const int64_t watchdog_ms = 60000;
    const int slot = HL_CLUSTER_SLOTS - 1;
    hl_redis_server *victim = master_of(slot);
    hl_redis_server *heir = replica_of(victim);
    hilock_client *c = client_on(master_of(0), watchdog_ms, 0);
    char name[32];
    key_on(victim, "unreplicated", name, sizeof name);
    hilock_lock *l = NULL;
    lost_mark lost = {0};
    assert_int_equal(hilock_lock_create(&l, c, name),
                     HILOCK_OK);
    assert_int_equal(hilock_lock_set_lost_callback(l, on_lost, &lost),
                     HILOCK_OK);

    hold_kept_from_heir(l, victim, heir, name);
    hl_fixture_kill9(victim);
    hl_fixture_resume(heir);
    int64_t promoted_at = hl_now_ms();
    assert_int_equal(hl_redis_server_cmd(heir, reply, sizeof reply,
                                         "CLUSTER", "FAILOVER", "TAKEOVER",
                                         (char *)NULL),
                     '+');
    expect_master(slot, heir, hl_widen(10000));
    assert_int_equal(int_on_node(heir, "EXISTS", name), 0);

    assert_true(hl_wait_flag(&lost.lost, hl_widen((int)watchdog_ms)));
    int64_t after = atomic_load(&lost.at) - promoted_at;
    report("a hold the new master lacks reported lost after", after);
    /* At the failover, not at the first renewal a third of the watchdog
     * timeout after the grant. */
    if (!hl_under_valgrind())
        assert_true(after < watchdog_ms / 3 - 5000);
    bool gone = false, on_server = true;
    assert_int_equal(hilock_lock_lease_lost(l, &gone), HILOCK_OK);
    assert_true(gone);
    assert_int_equal(hilock_lock_is_held_by_me(l, &on_server), HILOCK_OK);
    assert_false(on_server);
    assert_int_equal(hilock_lock_release(l), HILOCK_ELEASELOST);
    /* The shard serves locks again, on the new master. */
    assert_int_equal(hilock_lock_try_acquire(l, 5000, HILOCK_LEASE_WATCHDOG),
                     HILOCK_OK);
    assert_int_equal(int_on_node(heir, "EXISTS", name), 1);
    assert_int_equal(hilock_lock_release(l), HILOCK_OK);
    hilock_lock_destroy(l);
    hilock_client_destroy(c);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_queued_requests_follow_the_failover),
        cmocka_unit_test(test_manual_failover_keeps_holds),
        cmocka_unit_test(test_kill9_under_held_and_contended_locks),
        cmocka_unit_test(test_unreplicated_hold_is_reported_lost),
        cmocka_unit_test(test_takeover_from_a_live_master_checks_the_holds),
        /* Last: a manual failover right after a pause may not complete
         * within its own timeout on the server side. */
        cmocka_unit_test(test_paused_master_lets_go_at_the_switch),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
