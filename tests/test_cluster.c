/* The client on a real Redis Cluster (3 masters, 3 replicas): cluster mode
 * found from any node's plain URL, requests routed to the master of their
 * key's slot, MOVED and ASK followed, the reentrant lock and its watchdog
 * on every master.  Each check looks at the master itself, not at what
 * the client says. */
/* ctest-timeout: 240 */
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>

#include <setjmp.h>
#include <cmocka.h>

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
#include "support/hostile_server.h"
#include "support/loop_call.h"

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

/* ---- what the tests share ---------------------------------------------- */

static hilock_client *client_at(const char *url, int64_t watchdog_ms)
{
    return hl_fx_cluster_client(url, watchdog_ms, 0);
}

static hilock_client *client_on_node(const hl_redis_server *s)
{
    char url[64];
    snprintf(url, sizeof url, "redis://127.0.0.1:%d",
             hl_redis_server_port(s));
    return client_at(url, 0);
}

static hl_redis_server *master(int i) { return hl_fx_master(cluster, i); }

/* A key of the form "<prefix>-<n>" whose slot m serves. */
static void key_on(hl_redis_server *m, const char *prefix, char *out,
                   size_t cap)
{
    hl_fx_key_on(cluster, m, prefix, out, cap);
}

static hilock_reply *cmd(hilock_client *c, const char *arg0, ...)
    __attribute__((sentinel));
static hilock_reply *cmd(hilock_client *c, const char *arg0, ...)
{
    const char *argv[8];
    int argc = 0;
    va_list ap;
    va_start(ap, arg0);
    for (const char *a = arg0; a != NULL; a = va_arg(ap, const char *)) {
        assert_true(argc < 8);
        argv[argc++] = a;
    }
    va_end(ap);
    hilock_reply *r = NULL;
    int rc = hilock_client_command(c, argc, argv, NULL, &r);
    if (rc != HILOCK_OK)
        fail_msg("%s %s: %s: %s", argv[0], argc > 1 ? argv[1] : "",
                 hilock_errname(rc), hilock_last_error());
    return r;
}

static void expect_status(hilock_reply *r, const char *text)
{
    assert_non_null(r);
    assert_int_equal(r->type, HILOCK_REPLY_STATUS);
    assert_string_equal(r->str, text);
    hilock_reply_free(r);
}

/* What the server s itself holds under key (GET), as a bulk reply. */
static void expect_on_node(hl_redis_server *s, const char *key,
                           const char *value)
{
    char want[64];
    snprintf(want, sizeof want, "$%zu\r\n%s\r\n", strlen(value), value);
    assert_int_equal(hl_redis_server_cmd(s, reply, sizeof reply, "GET", key,
                                         (char *)NULL), '$');
    assert_string_equal(reply, want);
}

static long long int_on_node(hl_redis_server *s, const char *a0, ...)
    __attribute__((sentinel));
static long long int_on_node(hl_redis_server *s, const char *a0, ...)
{
    const char *argv[8];
    int argc = 0;
    va_list ap;
    va_start(ap, a0);
    for (const char *a = a0; a != NULL; a = va_arg(ap, const char *)) {
        assert_true(argc < 8);
        argv[argc++] = a;
    }
    va_end(ap);
    assert_int_equal(hl_redis_server_command(s, reply, sizeof reply, 0, argc,
                                             argv),
                     ':');
    return atoll(reply + 1);
}

typedef struct map_probe {
    unsigned slot;
    const char *host;
    int port;
    hl_conn *conn;
    int nodes;
    unsigned redirects;
    unsigned refreshes;
    bool cluster;
} map_probe;

static void read_map(hilock_client *c, void *arg)
{
    map_probe *p = arg;
    p->cluster = c->cluster != NULL;
    if (c->cluster) {
        p->conn = hl_cluster_conn_for_slot(c->cluster, p->slot);
        p->nodes = hl_cluster_node_count(c->cluster);
        p->redirects = hl_cluster_redirects(c->cluster);
        p->refreshes = hl_cluster_refreshes(c->cluster);
    }
}

static void point_slot(hilock_client *c, void *arg)
{
    map_probe *p = arg;
    assert_int_equal(hl_cluster_set_slot(c->cluster, p->slot, p->host,
                                         p->port),
                     0);
    p->conn = hl_cluster_conn_for_slot(c->cluster, p->slot);
}

static unsigned redirects(hilock_client *c)
{
    map_probe p = {.slot = 0};
    hl_run_on_loop(c, read_map, &p);
    assert_true(p.cluster);
    return p.redirects;
}

static unsigned refreshes(hilock_client *c)
{
    map_probe p = {.slot = 0};
    hl_run_on_loop(c, read_map, &p);
    return p.refreshes;
}

typedef struct refresh_probe {
    hilock_client *client;
    unsigned after;
} refresh_probe;

static bool refreshed(void *arg)
{
    refresh_probe *p = arg;
    return refreshes(p->client) > p->after;
}

static hl_conn *conn_for_key(hilock_client *c, const char *key)
{
    map_probe p = {.slot = hl_keyslot(key, strlen(key))};
    hl_run_on_loop(c, read_map, &p);
    assert_true(p.cluster);
    return p.conn;
}

/* Make the client's map send slot to s, as a map read before a slot
 * moved would. */
static void stale_slot(hilock_client *c, unsigned slot, hl_redis_server *s)
{
    map_probe p = {.slot = slot,
                   .host = "127.0.0.1",
                   .port = hl_redis_server_port(s)};
    hl_run_on_loop(c, point_slot, &p);
}

static void node_id(hl_redis_server *s, char *out, size_t cap)
{
    hl_fx_node_id(s, out, cap);
}

/* ---- tests --------------------------------------------------------------- */

/* A single node's plain URL is enough, whichever node it names, replicas
 * included; a single server stays a single server. */
static void test_detects_cluster_from_any_node(void **state)
{
    (void)state;
    for (size_t i = 0; i < hl_redis_cluster_size(cluster); i++) {
        hilock_client *c = client_on_node(hl_redis_cluster_node(cluster, i));
        map_probe p = {.slot = 0};
        hl_run_on_loop(c, read_map, &p);
        assert_true(p.cluster);
        assert_int_equal(p.nodes, 3); /* the masters */
        char key[32];
        key_on(master(2), "detect", key, sizeof key);
        expect_status(cmd(c, "SET", key, "seen", (char *)NULL), "OK");
        expect_on_node(master(2), key, "seen");
        hilock_client_destroy(c);
    }
    hilock_client *plain = client_on_node(hl_fixture_plain());
    map_probe p = {.slot = 0};
    hl_run_on_loop(plain, read_map, &p);
    assert_false(p.cluster);
    hilock_client_destroy(plain);
}

/* A loopback port nobody listens on: connecting to it is refused. */
static int dead_port(void)
{
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    assert_true(fd >= 0);
    struct sockaddr_in a = {.sin_family = AF_INET,
                            .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    assert_int_equal(bind(fd, (struct sockaddr *)&a, sizeof a), 0);
    socklen_t len = sizeof a;
    assert_int_equal(getsockname(fd, (struct sockaddr *)&a, &len), 0);
    close(fd);
    return ntohs(a.sin_port);
}

/* Seeds that cannot be reached are passed over, in order, until one
 * answers; when none does, the client fails to start. */
static void test_unreachable_seeds_are_skipped(void **state)
{
    (void)state;
    char url[160];
    snprintf(url, sizeof url,
             "redis://127.0.0.1:%d,127.0.0.1:%d,127.0.0.1:%d?connections=2",
             dead_port(), dead_port(),
             hl_redis_server_port(hl_redis_cluster_node(cluster, 4)));
    hilock_client *c = client_at(url, 0);
    assert_true(hilock_client_is_connected(c));
    map_probe p = {.slot = 0};
    hl_run_on_loop(c, read_map, &p);
    assert_true(p.cluster);
    char key[32];
    key_on(master(1), "seeds", key, sizeof key);
    expect_status(cmd(c, "SET", key, "via-third", (char *)NULL), "OK");
    expect_on_node(master(1), key, "via-third");
    hilock_client_destroy(c);

    snprintf(url, sizeof url, "redis://127.0.0.1:%d,127.0.0.1:%d",
             dead_port(), dead_port());
    hilock_options *o = NULL;
    assert_int_equal(hilock_options_create(&o), HILOCK_OK);
    assert_int_equal(hilock_options_set_url(o, url), HILOCK_OK);
    c = NULL;
    assert_int_equal(hilock_client_create(&c, o), HILOCK_EIO);
    assert_null(c);
    hilock_options_free(o);
}

/* A user and password given once authenticate on every node, the
 * masters the client finds included. */
static void test_acl_user_on_every_node(void **state)
{
    (void)state;
    /* Nobody gets in without the password while this runs. */
    for (size_t i = 0; i < hl_redis_cluster_size(cluster); i++) {
        hl_redis_server *n = hl_redis_cluster_node(cluster, i);
        hl_fixture_acl_user(n, "clus", "clus-pw");
        hl_redis_server_set_auth(n, "clus", "clus-pw");
        assert_int_equal(hl_redis_server_cmd(n, reply, sizeof reply, "ACL",
                                             "SETUSER", "default", "off",
                                             (char *)NULL), '+');
    }
    char url[256];
    const char *seeds = hl_redis_cluster_url(cluster) + strlen("redis://");
    snprintf(url, sizeof url, "redis://clus:clus-pw@%s", seeds);
    hilock_client *c = client_at(url, 0);
    for (int i = 0; i < 3; i++) {
        hl_redis_server *m = master(i);
        char name[32];
        key_on(m, "acl", name, sizeof name);
        hilock_lock *l = NULL;
        assert_int_equal(hilock_lock_create(&l, c, name),
                         HILOCK_OK);
        /* Bounded: a node that refuses the client must fail the test,
         * not hang it. */
        assert_int_equal(hilock_lock_try_acquire(l, 5000,
                                                 HILOCK_LEASE_WATCHDOG),
                         HILOCK_OK);
        assert_int_equal(int_on_node(m, "EXISTS", name, (char *)NULL), 1);
        assert_int_equal(hilock_lock_release(l), HILOCK_OK);
        hilock_lock_destroy(l);
    }
    assert_true(hilock_client_is_connected(c));
    hilock_client_destroy(c);
    /* The wrong password is refused at the seed. */
    snprintf(url, sizeof url, "redis://clus:wrong@%s", seeds);
    hilock_options *o = NULL;
    assert_int_equal(hilock_options_create(&o), HILOCK_OK);
    assert_int_equal(hilock_options_set_url(o, url), HILOCK_OK);
    c = NULL;
    assert_int_equal(hilock_client_create(&c, o), HILOCK_EAUTH);
    hilock_options_free(o);
    for (size_t i = 0; i < hl_redis_cluster_size(cluster); i++) {
        hl_redis_server *n = hl_redis_cluster_node(cluster, i);
        assert_int_equal(hl_redis_server_cmd(n, reply, sizeof reply, "ACL",
                                             "SETUSER", "default", "on",
                                             (char *)NULL), '+');
        hl_redis_server_set_auth(n, NULL, NULL);
    }
}

/* Keys on each master, through the seed list URL: each command lands on
 * the master of its key's slot, scripts too (by their first key). */
static void test_commands_reach_every_master(void **state)
{
    (void)state;
    hilock_client *c = client_at(hl_redis_cluster_url(cluster), 0);
    for (int i = 0; i < 3; i++) {
        hl_redis_server *m = master(i);
        char key[32], value[32];
        key_on(m, "route", key, sizeof key);
        snprintf(value, sizeof value, "v%d", i);
        expect_status(cmd(c, "SET", key, value, (char *)NULL), "OK");
        expect_on_node(m, key, value);
        hilock_reply *r = cmd(c, "EVAL", "return redis.call('GET', KEYS[1])",
                              "1", key, (char *)NULL);
        assert_int_equal(r->type, HILOCK_REPLY_STRING);
        assert_string_equal(r->str, value);
        hilock_reply_free(r);
    }
    /* Straight to each master, never by way of a redirection. */
    assert_int_equal(redirects(c), 0);
    /* The counters take in the masters' connections: the default two to
     * the seed and one per master. */
    hilock_client_stats st;
    assert_int_equal(hl_client_counters(c, &st), HILOCK_OK);
    assert_int_equal(st.connects, 2 + 3);
    hilock_client_destroy(c);
}

/* A reentrant lock whose name lives on each master: its hash is on that
 * master while held, twice entered, and gone after the second release. */
static void test_reentrant_lock_on_every_master(void **state)
{
    (void)state;
    hilock_client *c = client_at(hl_redis_cluster_url(cluster), 0);
    for (int i = 0; i < 3; i++) {
        hl_redis_server *m = master(i);
        char name[32];
        key_on(m, "lock", name, sizeof name);
        hilock_lock *l = NULL;
        assert_int_equal(hilock_lock_create(&l, c, name),
                         HILOCK_OK);
        assert_int_equal(hilock_lock_acquire(l), HILOCK_OK);
        assert_int_equal(hilock_lock_acquire(l), HILOCK_OK);
        assert_int_equal(int_on_node(m, "EXISTS", name, (char *)NULL), 1);
        assert_int_equal(int_on_node(m, "HLEN", name, (char *)NULL), 1);
        assert_true(int_on_node(m, "PTTL", name, (char *)NULL) > 0);
        int64_t count = 0;
        assert_int_equal(hilock_lock_hold_count(l, &count), HILOCK_OK);
        assert_int_equal(count, 2);
        assert_int_equal(hilock_lock_release(l), HILOCK_OK);
        assert_int_equal(int_on_node(m, "EXISTS", name, (char *)NULL), 1);
        assert_int_equal(hilock_lock_release(l), HILOCK_OK);
        assert_int_equal(int_on_node(m, "EXISTS", name, (char *)NULL), 0);
        hilock_lock_destroy(l);
    }
    assert_int_equal(redirects(c), 0);
    hilock_client_destroy(c);
}

/* With a map that sends a slot to the wrong master, the command and the
 * lock's scripts get MOVED, land on the right master, and the map learns
 * the owner. */
static void test_moved_is_followed(void **state)
{
    (void)state;
    hilock_client *c = client_at(hl_redis_cluster_url(cluster), 0);
    hl_redis_server *owner = master(0), *wrong = master(1);
    char key[32], name[32], other[32];
    key_on(owner, "moved", key, sizeof key);
    key_on(owner, "moved-lock", name, sizeof name);
    key_on(owner, "moved-other", other, sizeof other);
    hl_conn *right = conn_for_key(c, other);

    unsigned slot = hl_keyslot(key, strlen(key));
    stale_slot(c, slot, wrong);
    refresh_probe rp = {.client = c, .after = refreshes(c)};
    assert_ptr_not_equal(conn_for_key(c, key), right);
    expect_status(cmd(c, "SET", key, "after-moved", (char *)NULL), "OK");
    expect_on_node(owner, key, "after-moved");
    assert_int_equal(redirects(c), 1);
    assert_ptr_equal(conn_for_key(c, key), right);
    /* A redirection brings the next topology read forward: well before
     * the periodic one, 5 s on. */
    assert_true(hl_wait_until(refreshed, &rp, 1000));

    /* The lock handle takes the stale connection when made. */
    stale_slot(c, hl_keyslot(name, strlen(name)), wrong);
    hilock_lock *l = NULL;
    assert_int_equal(hilock_lock_create(&l, c, name),
                     HILOCK_OK);
    assert_int_equal(hilock_lock_acquire(l), HILOCK_OK);
    assert_int_equal(int_on_node(owner, "EXISTS", name, (char *)NULL), 1);
    char slot_text[16];
    snprintf(slot_text, sizeof slot_text, "%u", hl_keyslot(name, strlen(name)));
    assert_int_equal(int_on_node(wrong, "CLUSTER", "COUNTKEYSINSLOT",
                                 slot_text, (char *)NULL),
                     0);
    bool held = false;
    assert_int_equal(hilock_lock_is_held_by_me(l, &held), HILOCK_OK);
    assert_true(held);
    assert_int_equal(hilock_lock_release(l), HILOCK_OK);
    assert_int_equal(int_on_node(owner, "EXISTS", name, (char *)NULL), 0);
    hilock_lock_destroy(l);
    hilock_client_destroy(c);
}

typedef struct renewals_probe {
    hilock_client *client;
    uint64_t want;
    hilock_client_stats st;
} renewals_probe;

static bool renewed_enough(void *arg)
{
    renewals_probe *p = arg;
    assert_int_equal(hl_client_counters(p->client, &p->st), HILOCK_OK);
    return p->st.leases_renewed >= p->want || p->st.leases_lost > 0;
}

/* The watchdog renews locks of many slots on all masters: one script call
 * per slot, since a cluster refuses keys of several slots in one call. */
static void test_watchdog_renews_on_every_master(void **state)
{
    (void)state;
    const int64_t watchdog_ms = 900;
    hilock_client *c = client_at(hl_redis_cluster_url(cluster), watchdog_ms);
    enum { PER_MASTER = 2, N = 3 * PER_MASTER };
    hilock_lock *locks[N];
    char names[N][32];
    hl_redis_server *owners[N];
    for (int i = 0; i < N; i++) {
        char prefix[32];
        snprintf(prefix, sizeof prefix, "wd%d", i);
        owners[i] = master(i % 3);
        key_on(owners[i], prefix, names[i], sizeof names[i]);
        locks[i] = NULL;
        assert_int_equal(hilock_lock_create(&locks[i], c, names[i]),
                         HILOCK_OK);
        assert_int_equal(hilock_lock_acquire(locks[i]), HILOCK_OK);
    }
    /* Three rounds for every lock outlast the first lease twice over. */
    renewals_probe p = {.client = c, .want = 3 * N};
    assert_true(hl_wait_until(renewed_enough, &p, (int)(20 * watchdog_ms)));
    assert_int_equal(p.st.leases_lost, 0);
    for (int i = 0; i < N; i++) {
        long long ttl = int_on_node(owners[i], "PTTL", names[i],
                                    (char *)NULL);
        assert_true(ttl > 0 && ttl <= watchdog_ms);
        bool lost = true;
        assert_int_equal(hilock_lock_lease_lost(locks[i], &lost), HILOCK_OK);
        assert_false(lost);
        assert_int_equal(hilock_lock_release(locks[i]), HILOCK_OK);
        assert_int_equal(int_on_node(owners[i], "EXISTS", names[i],
                                     (char *)NULL),
                         0);
        hilock_lock_destroy(locks[i]);
    }
    hilock_client_destroy(c);
}

/* A round groups its leases by slot whatever their order by deadline:
 * 200 leases of two slots, taken alternately, renew in two calls of 100
 * each, not in calls split from batches of mixed slots. */
/* A master's connection that comes back has the holds on it checked at
 * once, not at the next renewal, 100 s away. */
static atomic_int lost_calls;

static void count_lost(hilock_lock *lock, uint64_t owner, void *data)
{
    (void)lock, (void)owner, (void)data;
    atomic_fetch_add(&lost_calls, 1);
}

typedef struct renewed_probe {
    hilock_client *client;
    uint64_t at_least;
} renewed_probe;

static bool renewed_at_least(void *arg)
{
    renewed_probe *p = arg;
    hilock_client_stats st;
    return hl_client_counters(p->client, &st) == HILOCK_OK &&
           st.leases_renewed >= p->at_least;
}

static bool lost_seen(void *arg)
{
    (void)arg;
    return atomic_load(&lost_calls) > 0;
}

static void test_reconnected_master_checks_its_holds(void **state)
{
    (void)state;
    hilock_client *c = client_at(hl_redis_cluster_url(cluster), 300000);
    hl_redis_server *m = master(1);
    char name[32];
    key_on(m, "checked", name, sizeof name);
    hilock_lock *l = NULL;
    assert_int_equal(hilock_lock_create(&l, c, name),
                     HILOCK_OK);
    atomic_store(&lost_calls, 0);
    assert_int_equal(hilock_lock_set_lost_callback(l, count_lost, NULL),
                     HILOCK_OK);
    assert_int_equal(hilock_lock_try_acquire(l, 0, HILOCK_LEASE_WATCHDOG),
                     HILOCK_OK);
    /* The data survives a killed connection: the hold is renewed. */
    assert_true(hl_fixture_client_kill(m, "normal") >= 1);
    renewed_probe p = {c, 1};
    if (!hl_wait_until(renewed_at_least, &p, hl_widen(10000)))
        fail_msg("the hold was not checked after the reconnect");
    assert_int_equal(atomic_load(&lost_calls), 0);
    /* Gone behind the holder's back, as with a restart without data: the
     * next reconnect finds out. */
    assert_int_equal(int_on_node(m, "DEL", name, (char *)NULL), 1);
    assert_true(hl_fixture_client_kill(m, "normal") >= 1);
    if (!hl_wait_until(lost_seen, NULL, hl_widen(10000)))
        fail_msg("the hold was not reported lost after the reconnect");
    assert_int_equal(hilock_lock_release(l), HILOCK_ELEASELOST);
    assert_int_equal(hilock_lock_set_lost_callback(l, NULL, NULL),
                     HILOCK_OK);
    hilock_lock_destroy(l);
    hilock_client_destroy(c);
}

static void test_renewal_round_is_one_call_per_slot(void **state)
{
    (void)state;
    const int64_t watchdog_ms = 900;
    hilock_client *c = client_at(hl_redis_cluster_url(cluster), watchdog_ms);
    enum { N = 200 };
    hilock_lock *locks[N];
    for (int i = 0; i < N; i++) {
        char name[32];
        snprintf(name, sizeof name, "{%s}-%d", i % 2 ? "ga" : "gb", i);
        locks[i] = NULL;
        assert_int_equal(hilock_lock_create(&locks[i], c, name),
                         HILOCK_OK);
        assert_int_equal(hilock_lock_acquire(locks[i]), HILOCK_OK);
    }
    renewals_probe p = {.client = c};
    assert_int_equal(hl_client_counters(c, &p.st), HILOCK_OK);
    hilock_client_stats before = p.st;
    p.want = before.leases_renewed + 3 * N;
    assert_true(hl_wait_until(renewed_enough, &p, (int)(30 * watchdog_ms)));
    assert_int_equal(p.st.leases_lost, 0);
    uint64_t calls = p.st.renew_calls - before.renew_calls;
    uint64_t renewed = p.st.leases_renewed - before.leases_renewed;
    /* 100 leases a call; calls sent and not yet answered, at most one
     * round's two, are counted ahead of their renewals. */
    if (calls * 100 > renewed + N)
        fail_msg("%llu renewal calls for %llu renewals",
                 (unsigned long long)calls, (unsigned long long)renewed);
    for (int i = 0; i < N; i++) {
        assert_int_equal(hilock_lock_release(locks[i]), HILOCK_OK);
        hilock_lock_destroy(locks[i]);
    }
    hilock_client_destroy(c);
}

/* A key on m in a slot that holds no key, nor will hold c's card
 * (hilock_client:{<id>}): every client writes a card, in the slot of its
 * random id, and a slot holding one is no empty slot to migrate. */
static void empty_key_on(hl_redis_server *m, hilock_client *c, char *out,
                         size_t cap)
{
    const char *id = hilock_client_id(c);
    int card_slot = (int)hl_keyslot(id, strlen(id));
    char slot_text[16];
    for (int n = 0; n < 1000; n++) {
        snprintf(out, cap, "migrate-%d", n);
        int slot = (int)hl_keyslot(out, strlen(out));
        if (hl_redis_cluster_master_of(cluster, slot) != m || slot == card_slot)
            continue;
        snprintf(slot_text, sizeof slot_text, "%d", slot);
        if (int_on_node(m, "CLUSTER", "COUNTKEYSINSLOT", slot_text,
                        (char *)NULL) == 0)
            return;
    }
    fail_msg("no empty slot on the master");
}

/* A slot in migration answers ASK for a key its source lacks: the write
 * goes to the target after ASKING.  Once the slot has moved, the
 * client's map is stale and MOVED takes the next write there.  Last: it
 * changes which master serves the slot. */
static void test_ask_then_moved_across_a_migration(void **state)
{
    (void)state;
    hilock_client *c = client_at(hl_redis_cluster_url(cluster), 0);
    hl_redis_server *src = master(0), *dst = master(1);
    char key[32], src_id[64], dst_id[64], slot_text[16];
    empty_key_on(src, c, key, sizeof key);
    int slot = (int)hl_keyslot(key, strlen(key));
    snprintf(slot_text, sizeof slot_text, "%d", slot);
    node_id(src, src_id, sizeof src_id);
    node_id(dst, dst_id, sizeof dst_id);
    /* A handle made while src serves the slot: the hash tag puts the
     * lock in the key's slot. */
    char name[48];
    snprintf(name, sizeof name, "{%s}:lock", key);
    hilock_lock *l = NULL;
    assert_int_equal(hilock_lock_create(&l, c, name),
                     HILOCK_OK);
    if (int_on_node(src, "CLUSTER", "COUNTKEYSINSLOT", slot_text,
                    (char *)NULL) != 0) {
        hl_redis_server_cmd(src, reply, sizeof reply, "CLUSTER",
                            "GETKEYSINSLOT", slot_text, "10", (char *)NULL);
        fail_msg("slot %s is not empty: %s", slot_text, reply);
    }
    assert_int_equal(hl_redis_server_cmd(dst, reply, sizeof reply, "CLUSTER",
                                         "SETSLOT", slot_text, "IMPORTING",
                                         src_id, (char *)NULL), '+');
    assert_int_equal(hl_redis_server_cmd(src, reply, sizeof reply, "CLUSTER",
                                         "SETSLOT", slot_text, "MIGRATING",
                                         dst_id, (char *)NULL), '+');

    expect_status(cmd(c, "SET", key, "asked", (char *)NULL), "OK");
    assert_int_equal(redirects(c), 1);
    assert_int_equal(int_on_node(dst, "CLUSTER", "COUNTKEYSINSLOT",
                                 slot_text, (char *)NULL),
                     1);
    assert_int_equal(int_on_node(src, "CLUSTER", "COUNTKEYSINSLOT",
                                 slot_text, (char *)NULL),
                     0);

    assert_int_equal(hl_redis_server_cmd(dst, reply, sizeof reply, "CLUSTER",
                                         "SETSLOT", slot_text, "NODE",
                                         dst_id, (char *)NULL), '+');
    assert_int_equal(hl_redis_server_cmd(src, reply, sizeof reply, "CLUSTER",
                                         "SETSLOT", slot_text, "NODE",
                                         dst_id, (char *)NULL), '+');
    assert_int_equal(hl_redis_cluster_wait_ok(cluster, 30000), 0);
    expect_status(cmd(c, "SET", key, "moved", (char *)NULL), "OK");
    expect_on_node(dst, key, "moved");
    /* MOVED, unless a topology read learnt the new owner first. */
    unsigned before = redirects(c);
    assert_true(before <= 2);

    /* The handle follows the map: straight to the new master. */
    assert_int_equal(hilock_lock_acquire(l), HILOCK_OK);
    assert_int_equal(int_on_node(dst, "EXISTS", name, (char *)NULL), 1);
    assert_int_equal(hilock_lock_release(l), HILOCK_OK);
    assert_int_equal(redirects(c), before);
    hilock_lock_destroy(l);
    hilock_client_destroy(c);
}

typedef struct waiter_arg {
    hilock_lock *lock;
    int rc;
    int64_t got_at;
    atomic_bool done;
} waiter_arg;

static void *waiter_main(void *arg)
{
    waiter_arg *w = arg;
    w->rc = hilock_lock_try_acquire(w->lock, 20000, 30000);
    w->got_at = hl_now_ms();
    /* Held by this thread: it alone may release. */
    if (w->rc == HILOCK_OK)
        w->rc = hilock_lock_release(w->lock);
    atomic_store(&w->done, true);
    return NULL;
}

typedef struct shard_listener {
    hl_redis_server *node;
    const char *channel;
} shard_listener;

static bool shard_subscribed(void *arg)
{
    const shard_listener *l = arg;
    return hl_fixture_shardnumsub(l->node, l->channel) > 0;
}

/* A waiter on another client wakes at the release, not at the end of the
 * holder's 30 s lease: pub/sub is sharded, so the waiter listens with
 * SSUBSCRIBE on the lock's own master, where the release SPUBLISHes, as
 * Redisson's waiters on a cluster do. */
static void test_waiter_wakes_at_release(void **state)
{
    (void)state;
    hilock_client *holder = client_at(hl_redis_cluster_url(cluster), 0);
    hilock_client *other = client_at(hl_redis_cluster_url(cluster), 0);
    char name[32], channel[64];
    key_on(master(2), "wake", name, sizeof name);
    snprintf(channel, sizeof channel, "redisson_lock__channel:{%s}", name);
    hilock_lock *held = NULL, *wanted = NULL;
    assert_int_equal(hilock_lock_create(&held, holder, name),
                     HILOCK_OK);
    assert_int_equal(hilock_lock_create(&wanted, other, name),
                     HILOCK_OK);
    assert_int_equal(hilock_lock_try_acquire(held, 0, 30000), HILOCK_OK);

    waiter_arg w = {.lock = wanted};
    pthread_t t;
    assert_int_equal(pthread_create(&t, NULL, waiter_main, &w), 0);
    shard_listener on_master = {master(2), channel};
    assert_true(hl_wait_until(shard_subscribed, &on_master, 10000));
    /* On that master only, and not with a plain SUBSCRIBE anywhere. */
    for (size_t i = 0; i < hl_redis_cluster_size(cluster); i++) {
        hl_redis_server *node = hl_redis_cluster_node(cluster, i);
        assert_int_equal(hl_fixture_numsub(node, channel), 0);
        if (node != master(2))
            assert_int_equal(hl_fixture_shardnumsub(node, channel), 0);
    }
    int64_t released_at = hl_now_ms();
    assert_int_equal(hilock_lock_release(held), HILOCK_OK);
    assert_true(hl_wait_flag(&w.done, 10000));
    pthread_join(t, NULL);
    assert_int_equal(w.rc, HILOCK_OK);
    assert_true(w.got_at - released_at < 5000);
    hilock_lock_destroy(held);
    hilock_lock_destroy(wanted);
    hilock_client_destroy(other);
    hilock_client_destroy(holder);
}

static void set_slot(hl_redis_server *node, const char *slot, const char *how,
                     const char *id)
{
    assert_int_equal(hl_redis_server_cmd(node, reply, sizeof reply, "CLUSTER",
                                         "SETSLOT", slot, how, id,
                                         (char *)NULL),
                     '+');
}

/* Move slot, with key in it, from src to dst the way a resharding does;
 * every master is told the new owner, src last. */
static void move_slot(int slot, const char *key, hl_redis_server *src,
                      hl_redis_server *dst)
{
    char slot_text[16], src_id[64], dst_id[64], port[16];
    snprintf(slot_text, sizeof slot_text, "%d", slot);
    snprintf(port, sizeof port, "%d", hl_redis_server_port(dst));
    node_id(src, src_id, sizeof src_id);
    node_id(dst, dst_id, sizeof dst_id);
    set_slot(dst, slot_text, "IMPORTING", src_id);
    set_slot(src, slot_text, "MIGRATING", dst_id);
    assert_int_equal(hl_redis_server_cmd(src, reply, sizeof reply, "MIGRATE",
                                         "127.0.0.1", port, "", "0", "5000",
                                         "KEYS", key, (char *)NULL),
                     '+');
    set_slot(dst, slot_text, "NODE", dst_id);
    for (int i = 0; i < 3; i++)
        if (master(i) != src && master(i) != dst)
            set_slot(master(i), slot_text, "NODE", dst_id);
    set_slot(src, slot_text, "NODE", dst_id);
    assert_int_equal(hl_redis_cluster_wait_ok(cluster, 30000), 0);
}

/* A waiter's channel follows its slot to another master: the old master
 * drops the SSUBSCRIBE when the slot leaves it (a SUNSUBSCRIBE nobody
 * asked for), the client reads the topology and subscribes on the new
 * master, and the release there still wakes the waiter at once. */
static void test_waiter_follows_a_migrated_channel(void **state)
{
    (void)state;
    hilock_client *holder = client_at(hl_redis_cluster_url(cluster), 0);
    hilock_client *other = client_at(hl_redis_cluster_url(cluster), 0);
    hl_redis_server *src = master(2), *dst = master(1);
    char name[32], channel[64];
    key_on(src, "follow", name, sizeof name);
    snprintf(channel, sizeof channel, "redisson_lock__channel:{%s}", name);
    hilock_lock *held = NULL, *wanted = NULL;
    assert_int_equal(hilock_lock_create(&held, holder, name),
                     HILOCK_OK);
    assert_int_equal(hilock_lock_create(&wanted, other, name),
                     HILOCK_OK);
    assert_int_equal(hilock_lock_try_acquire(held, 0, 60000), HILOCK_OK);

    waiter_arg w = {.lock = wanted};
    pthread_t t;
    assert_int_equal(pthread_create(&t, NULL, waiter_main, &w), 0);
    shard_listener on_src = {src, channel}, on_dst = {dst, channel};
    assert_true(hl_wait_until(shard_subscribed, &on_src, 10000));

    move_slot((int)hl_keyslot(name, strlen(name)), name, src, dst);
    assert_true(hl_wait_until(shard_subscribed, &on_dst, 10000));
    assert_int_equal(hl_fixture_shardnumsub(src, channel), 0);
    assert_false(atomic_load(&w.done));

    int64_t released_at = hl_now_ms();
    assert_int_equal(hilock_lock_release(held), HILOCK_OK);
    assert_true(hl_wait_flag(&w.done, 20000));
    pthread_join(t, NULL);
    assert_int_equal(w.rc, HILOCK_OK);
    assert_true(w.got_at - released_at < 5000);
    hilock_lock_destroy(held);
    hilock_lock_destroy(wanted);
    hilock_client_destroy(other);
    hilock_client_destroy(holder);
}

/* A Java client on a cluster releases with SPUBLISH on the lock's
 * master: a hilock waiter wakes at that message, not at the lease's end.
 * The holder here is a foreign owner written by hand. */
static void test_foreign_spublish_wakes_waiter(void **state)
{
    (void)state;
    hilock_client *c = client_at(hl_redis_cluster_url(cluster), 0);
    hl_redis_server *m = master(0);
    char name[32], channel[64];
    key_on(m, "java", name, sizeof name);
    snprintf(channel, sizeof channel, "redisson_lock__channel:{%s}", name);
    assert_int_equal(hl_redis_server_cmd(m, reply, sizeof reply, "HSET", name,
                                         "java-uuid:1", "1", (char *)NULL),
                     ':');
    assert_int_equal(hl_redis_server_cmd(m, reply, sizeof reply, "PEXPIRE",
                                         name, "60000", (char *)NULL),
                     ':');
    hilock_lock *wanted = NULL;
    assert_int_equal(hilock_lock_create(&wanted, c, name),
                     HILOCK_OK);
    waiter_arg w = {.lock = wanted};
    pthread_t t;
    assert_int_equal(pthread_create(&t, NULL, waiter_main, &w), 0);
    shard_listener on_m = {m, channel};
    assert_true(hl_wait_until(shard_subscribed, &on_m, 10000));

    int64_t released_at = hl_now_ms();
    assert_int_equal(hl_redis_server_cmd(m, reply, sizeof reply, "DEL", name,
                                         (char *)NULL),
                     ':');
    assert_int_equal(hl_redis_server_cmd(m, reply, sizeof reply, "SPUBLISH",
                                         channel, "0", (char *)NULL),
                     ':');
    assert_true(hl_wait_flag(&w.done, 20000));
    pthread_join(t, NULL);
    assert_int_equal(w.rc, HILOCK_OK);
    assert_true(w.got_at - released_at < 5000);
    hilock_lock_destroy(wanted);
    hilock_client_destroy(c);
}

/* A one-node "cluster" of our own: the refusals a real cluster sends only
 * inside a resharding or a failover window, on demand. */
static atomic_int fake_port;
static atomic_int tryagain_left;
static atomic_bool topology_refused;
static atomic_int pings;

static bool fake_node(hl_hostile_conn *conn, const hl_hostile_req *req,
                      void *data)
{
    (void)data;
    if (hl_hostile_is(req, "INFO"))
        return hl_hostile_sendf(conn, "$28\r\n# Cluster\r\ncluster_enabled:1"
                                      "\r\n"),
               true;
    /* While refusing, the client's second connection comes up only
     * after its first asked INFO, and the refusal takes long enough for
     * it to come up before the topology read ends. */
    if (hl_hostile_is(req, "PING") && atomic_load(&topology_refused) &&
        atomic_fetch_add(&pings, 1) == 1)
        hl_sleep_ms(200);
    if (hl_hostile_is(req, "CLUSTER")) {
        if (atomic_load(&topology_refused))
            return hl_sleep_ms(200), hl_hostile_sendf(conn, "-NOPERM this user has no "
                                          "permissions to run the 'cluster' "
                                          "command\r\n"),
                   true;
        if (req->argc > 1 && strcasecmp(req->argv[1], "SHARDS") == 0)
            return hl_hostile_sendf(conn, "-ERR unknown subcommand\r\n"),
                   true;
        return hl_hostile_sendf(conn,
                                "*1\r\n*3\r\n:0\r\n:16383\r\n*2\r\n"
                                "$9\r\n127.0.0.1\r\n:%d\r\n",
                                atomic_load(&fake_port)),
               true;
    }
    if (!hl_hostile_is(req, "GET") || req->argc < 2)
        return false;
    if (strcmp(req->argv[1], "down") == 0)
        return hl_hostile_sendf(conn, "-CLUSTERDOWN The cluster is down\r\n"),
               true;
    if (atomic_fetch_sub(&tryagain_left, 1) > 0)
        return hl_hostile_sendf(conn, "-TRYAGAIN Multiple keys request "
                                      "during rehashing of slot\r\n"),
               true;
    return hl_hostile_sendf(conn, "$2\r\nok\r\n"), true;
}

/* TRYAGAIN and CLUSTERDOWN are retried after a pause, and only within
 * the command timeout: a refusal that lasts reaches the caller. */
static void test_tryagain_and_clusterdown_are_retried(void **state)
{
    (void)state;
    hl_hostile *h = hl_hostile_start(fake_node, NULL);
    atomic_store(&fake_port, hl_hostile_port(h));
    atomic_store(&tryagain_left, 3);
    char url[96];
    snprintf(url, sizeof url,
             "redis://127.0.0.1:%d?connections=1&command_timeout=600",
             hl_hostile_port(h));
    hilock_client *c = client_at(url, 0);
    map_probe p = {.slot = 0};
    hl_run_on_loop(c, read_map, &p);
    assert_true(p.cluster);
    assert_int_equal(p.nodes, 1);

    hilock_reply *r = cmd(c, "GET", "some-key", (char *)NULL);
    assert_int_equal(r->type, HILOCK_REPLY_STRING);
    assert_string_equal(r->str, "ok");
    hilock_reply_free(r);
    assert_int_equal(hl_hostile_count(h, "GET"), 4);

    long before = hl_hostile_count(h, "GET");
    const char *argv[] = {"GET", "down"};
    int64_t t0 = hl_now_ms();
    r = NULL;
    assert_int_equal(hilock_client_command(c, 2, argv, NULL, &r),
                     HILOCK_EREDIS);
    int64_t took = hl_now_ms() - t0;
    assert_non_null(r);
    assert_non_null(strstr(r->str, "CLUSTERDOWN"));
    hilock_reply_free(r);
    long tries = hl_hostile_count(h, "GET") - before;
    /* 10, 20, 40, 80, 160 ms pauses fit in 600 ms; the next does not. */
    assert_true(tries >= 4 && tries <= 7);
    assert_true(took >= 300 && took < 1500);
    hilock_client_destroy(c);
    hl_hostile_stop(h);
}

/* A node that will not tell the topology (an ACL without CLUSTER) still
 * serves the client through the seed, and is asked again about once a
 * second, not in a loop. */
static void test_refused_topology_is_asked_at_a_pace(void **state)
{
    (void)state;
    atomic_store(&topology_refused, true);
    atomic_store(&tryagain_left, 0);
    atomic_store(&pings, 0);
    hl_hostile *h = hl_hostile_start(fake_node, NULL);
    atomic_store(&fake_port, hl_hostile_port(h));
    char url[64];
    snprintf(url, sizeof url, "redis://127.0.0.1:%d", hl_hostile_port(h));
    hilock_client *c = client_at(url, 0);
    /* Once for the client, whichever of its connections came up first. */
    assert_int_equal(hl_hostile_count(h, "INFO"), 1);
    hilock_reply *r = cmd(c, "GET", "k", (char *)NULL);
    assert_string_equal(r->str, "ok");
    hilock_reply_free(r);
    long asked = hl_hostile_count(h, "CLUSTER");
    hl_sleep_ms(2500);
    long more = hl_hostile_count(h, "CLUSTER") - asked;
    assert_true(more >= 1 && more <= 4);
    hilock_client_destroy(c);
    hl_hostile_stop(h);
    atomic_store(&topology_refused, false);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_detects_cluster_from_any_node),
        cmocka_unit_test(test_unreachable_seeds_are_skipped),
        cmocka_unit_test(test_commands_reach_every_master),
        cmocka_unit_test(test_acl_user_on_every_node),
        cmocka_unit_test(test_reentrant_lock_on_every_master),
        cmocka_unit_test(test_moved_is_followed),
        cmocka_unit_test(test_watchdog_renews_on_every_master),
        cmocka_unit_test(test_renewal_round_is_one_call_per_slot),
        cmocka_unit_test(test_reconnected_master_checks_its_holds),
        cmocka_unit_test(test_waiter_wakes_at_release),
        cmocka_unit_test(test_foreign_spublish_wakes_waiter),
        cmocka_unit_test(test_waiter_follows_a_migrated_channel),
        cmocka_unit_test(test_tryagain_and_clusterdown_are_retried),
        cmocka_unit_test(test_refused_topology_is_asked_at_a_pace),
        cmocka_unit_test(test_ask_then_moved_across_a_migration),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
