/* Redis Sentinel: a client given the sentinels finds the master, refuses
 * clearly when it cannot, and follows a failover, checking its holds on
 * the new master at once.  One master, two replicas and three sentinels
 * for the whole file; the failover cases come last, since they change
 * which node is the master. */
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <setjmp.h>
#include <cmocka.h>

#include "hilock/hilock.h"
#include "support/fixture.h"
#include "support/hostile_server.h"
#include "support/loop_call.h"
#include "core/runtime/client_state.h"
#include "core/runtime/sentinel.h"

/* ctest-timeout: 240 */

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

static int connect_url(hilock_client **out, const char *url,
                       int64_t watchdog_ms)
{
    hilock_options *o = NULL;
    assert_int_equal(hilock_options_create(&o), HILOCK_OK);
    assert_int_equal(hilock_options_set_url(o, url), HILOCK_OK);
    assert_int_equal(hilock_options_set_connect_timeout_ms(o, 1000),
                     HILOCK_OK);
    if (watchdog_ms > 0)
        assert_int_equal(hilock_options_set_watchdog_timeout_ms(o,
                                                                watchdog_ms),
                         HILOCK_OK);
    int rc = hilock_client_create(out, o);
    hilock_options_free(o);
    return rc;
}

/* Reconnects after 20 s, whatever the attempt: a connection the kill
 * dropped is still waiting to try again when the sentinels name the new
 * master. */
static hilock_client *slow_reconnecting_client(void)
{
    hilock_options *o = NULL;
    hilock_client *c = NULL;
    assert_int_equal(hilock_options_create(&o), HILOCK_OK);
    assert_int_equal(
        hilock_options_set_url(o, hl_redis_replicated_sentinel_url(group)),
        HILOCK_OK);
    assert_int_equal(hilock_options_set_connect_timeout_ms(o, 1000),
                     HILOCK_OK);
    assert_int_equal(hilock_options_set_reconnect_backoff_ms(o, 20000, 20000),
                     HILOCK_OK);
    assert_int_equal(hilock_options_set_command_timeout_ms(o, 10000),
                     HILOCK_OK);
    int rc = hilock_client_create(&c, o);
    hilock_options_free(o);
    if (rc != HILOCK_OK)
        fail_msg("client: %s: %s", hilock_errname(rc), hilock_last_error());
    return c;
}

static hilock_client *sentinel_client(int64_t watchdog_ms)
{
    hilock_client *c = NULL;
    int rc = connect_url(&c, hl_redis_replicated_sentinel_url(group),
                         watchdog_ms);
    if (rc != HILOCK_OK)
        fail_msg("client: %s: %s", hilock_errname(rc), hilock_last_error());
    return c;
}

static void set_key(hilock_client *c, const char *key, const char *value)
{
    const char *argv[] = {"SET", key, value};
    hilock_reply *r = NULL;
    int rc = hilock_client_command(c, 3, argv, NULL, &r);
    if (rc != HILOCK_OK)
        fail_msg("SET: %s: %s", hilock_errname(rc), hilock_last_error());
    hilock_reply_free(r);
}

static bool node_has(hl_redis_server *s, const char *key, const char *value)
{
    char want[128];
    snprintf(want, sizeof want, "$%zu\r\n%s\r\n", strlen(value), value);
    return hl_redis_server_cmd(s, reply, sizeof reply, "GET", key,
                               (char *)NULL) == '$' &&
           strcmp(reply, want) == 0;
}

/* The URL names sentinels only; writes land on the master they name. */
static void test_finds_the_master(void **state)
{
    (void)state;
    hl_redis_server *master = hl_redis_replicated_master(group);
    assert_non_null(master);
    hilock_client *c = sentinel_client(0);
    set_key(c, "sentinel-k", "found");
    assert_true(node_has(master, "sentinel-k", "found"));

    hilock_lock *l = NULL;
    assert_int_equal(hilock_lock_create(&l, c, "sentinel-lock"),
                     HILOCK_OK);
    assert_int_equal(hilock_lock_try_acquire(l, 0, 10000), HILOCK_OK);
    assert_int_equal(hl_redis_server_cmd(master, reply, sizeof reply,
                                         "EXISTS", "sentinel-lock",
                                         (char *)NULL),
                     ':');
    assert_string_equal(reply, ":1\r\n");
    assert_int_equal(hilock_lock_release(l), HILOCK_OK);
    hilock_lock_destroy(l);
    hilock_client_destroy(c);
}

/* valkey-sentinel:// names the same sentinels as redis-sentinel://. */
static void test_valkey_sentinel_scheme(void **state)
{
    (void)state;
    const char *url = hl_redis_replicated_sentinel_url(group);
    const char *rest = strstr(url, "://");
    assert_non_null(rest);
    char vk[1024];
    snprintf(vk, sizeof vk, "valkey-sentinel%s", rest);
    hilock_client *c = NULL;
    assert_int_equal(connect_url(&c, vk, 0), HILOCK_OK);
    set_key(c, "valkey-sentinel-k", "found");
    assert_true(node_has(hl_redis_replicated_master(group),
                         "valkey-sentinel-k", "found"));
    hilock_client_destroy(c);
}

/* The sentinels answer, and none knows the name: a configuration error,
 * said as such, with the name. */
static void test_unknown_master_name(void **state)
{
    (void)state;
    char url[1024];
    snprintf(url, sizeof url, "%s", hl_redis_replicated_sentinel_url(group));
    char *hash = strrchr(url, '#');
    assert_non_null(hash);
    snprintf(hash, sizeof url - (size_t)(hash - url), "#no-such-master");
    hilock_client *c = NULL;
    assert_int_equal(connect_url(&c, url, 0), HILOCK_EINVAL);
    assert_null(c);
    assert_non_null(strstr(hilock_last_error(),
                           "knows a master named 'no-such-master'"));
}

/* Nobody listens on either port: the client says no sentinel answered,
 * and never connects to anything else. */
static void test_every_sentinel_down(void **state)
{
    (void)state;
    int fa, fb;
    int a = hl_refusing_port(&fa), b = hl_refusing_port(&fb);
    char url[256];
    snprintf(url, sizeof url,
             "redis-sentinel://127.0.0.1:%d,127.0.0.1:%d#mymaster", a, b);
    hilock_client *c = NULL;
    assert_int_equal(connect_url(&c, url, 0), HILOCK_EIO);
    assert_null(c);
    assert_non_null(strstr(hilock_last_error(), "no sentinel (of 2)"));
    close(fa);
    close(fb);
}

/* A sentinel whose answer names a replica (stale, or lying): the ROLE
 * check refuses the node instead of writing locks to it. */
static atomic_int stale_port;

static bool stale_sentinel(hl_hostile_conn *conn, const hl_hostile_req *req,
                           void *data)
{
    (void)data;
    if (!hl_hostile_is(req, "SENTINEL"))
        return false;
    char port[16];
    int n = snprintf(port, sizeof port, "%d", atomic_load(&stale_port));
    return hl_hostile_sendf(conn, "*2\r\n$9\r\n127.0.0.1\r\n$%d\r\n%s\r\n",
                            n, port),
           true;
}

static void test_sentinel_names_a_replica(void **state)
{
    (void)state;
    hl_redis_server *master = hl_redis_replicated_master(group);
    hl_redis_server *replica = NULL;
    for (size_t i = 0; i < hl_redis_replicated_nodes(group); i++)
        if (hl_redis_replicated_node(group, i) != master)
            replica = hl_redis_replicated_node(group, i);
    assert_non_null(replica);
    atomic_store(&stale_port, hl_redis_server_port(replica));
    hl_hostile *fake = hl_hostile_start(stale_sentinel, NULL);
    assert_non_null(fake);
    char url[256];
    snprintf(url, sizeof url, "redis-sentinel://127.0.0.1:%d#mymaster",
             hl_hostile_port(fake));
    hilock_client *c = NULL;
    assert_int_equal(connect_url(&c, url, 0), HILOCK_EIO);
    assert_null(c);
    assert_non_null(strstr(hilock_last_error(), "not a master"));
    hl_hostile_stop(fake);
}

/* ---- failover ------------------------------------------------------------ */

typedef struct lost_seen {
    atomic_int count;
} lost_seen;

static void on_lost(hilock_lock *lock, uint64_t owner, void *data)
{
    (void)lock, (void)owner;
    lost_seen *seen = data;
    atomic_fetch_add(&seen->count, 1);
}

static bool lost_once(void *arg)
{
    return atomic_load(&((lost_seen *)arg)->count) > 0;
}

typedef struct sees_priority_zero {
    hl_redis_server *sentinel;
    int port;
} sees_priority_zero;

/* Whether the sentinel lists the replica on port with slave-priority 0.
 * SENTINEL REPLICAS answers one flat field/value array per replica. */
static bool sentinel_sees_priority_zero(void *arg)
{
    sees_priority_zero *w = arg;
    char text[16384];
    if (hl_redis_server_cmd(w->sentinel, text, sizeof text, "SENTINEL",
                            "REPLICAS",
                            hl_redis_replicated_master_name(group),
                            (char *)NULL) != '*')
        return false;
    char port[64];
    snprintf(port, sizeof port, "port\r\n$%d\r\n%d\r\n",
             snprintf(NULL, 0, "%d", w->port), w->port);
    const char *at = strstr(text, port);
    if (at == NULL)
        return false;
    const char *next = strstr(at, "\r\n*");
    const char *zero = strstr(at, "slave-priority\r\n$1\r\n0\r\n");
    return zero != NULL && (next == NULL || zero < next);
}

/* A graceful failover to a replica that lacks a hold (deleted there by
 * hand, as an unreplicated grant would be): the client follows the
 * switch, and the hold is reported lost at once, long before the
 * watchdog's next renewal would have noticed. */
static void test_failover_reports_a_missing_hold_at_once(void **state)
{
    (void)state;
    hl_redis_server *master = hl_redis_replicated_master(group);
    assert_non_null(master);
    hl_redis_server *next = NULL, *other = NULL;
    for (size_t i = 0; i < hl_redis_replicated_nodes(group); i++) {
        hl_redis_server *n = hl_redis_replicated_node(group, i);
        if (n == master)
            continue;
        if (next == NULL)
            next = n;
        else
            other = n;
    }
    /* The sentinels may promote only next, once the one asked to fail
     * over has read other's new priority (it reads replicas' INFO every
     * few seconds). */
    assert_int_equal(hl_redis_server_cmd(other, reply, sizeof reply, "CONFIG",
                                         "SET", "replica-priority", "0",
                                         (char *)NULL),
                     '+');
    sees_priority_zero want = {hl_redis_replicated_sentinel(group, 0),
                               hl_redis_server_port(other)};
    assert_true(hl_wait_until(sentinel_sees_priority_zero, &want, 30000));

    /* A 300 s watchdog: the first regular renewal is 100 s away. */
    hilock_client *c = sentinel_client(300000);
    hilock_lock *kept = NULL, *gone = NULL, *fixed = NULL;
    assert_int_equal(hilock_lock_create(&kept, c, "fo-kept"), HILOCK_OK);
    assert_int_equal(hilock_lock_create(&gone, c, "fo-gone"), HILOCK_OK);
    assert_int_equal(hilock_lock_create(&fixed, c, "fo-fixed"),
                     HILOCK_OK);
    lost_seen kept_lost = {0}, gone_lost = {0}, fixed_lost = {0};
    assert_int_equal(hilock_lock_set_lost_callback(kept, on_lost, &kept_lost),
                     HILOCK_OK);
    assert_int_equal(hilock_lock_set_lost_callback(gone, on_lost, &gone_lost),
                     HILOCK_OK);
    assert_int_equal(hilock_lock_set_lost_callback(fixed, on_lost,
                                                   &fixed_lost),
                     HILOCK_OK);
    assert_int_equal(hilock_lock_acquire(kept), HILOCK_OK);
    assert_int_equal(hilock_lock_acquire(gone), HILOCK_OK);
    /* A fixed lease: never renewed, checked all the same. */
    assert_int_equal(hilock_lock_try_acquire(fixed, 0, 240000), HILOCK_OK);

    /* Both holds reach next; then next alone forgets one. */
    assert_int_equal(hl_redis_server_cmd(master, reply, sizeof reply, "WAIT",
                                         "2", "5000", (char *)NULL),
                     ':');
    assert_string_equal(reply, ":2\r\n");
    assert_int_equal(hl_redis_server_cmd(next, reply, sizeof reply, "CONFIG",
                                         "SET", "replica-read-only", "no",
                                         (char *)NULL),
                     '+');
    assert_int_equal(hl_redis_server_cmd(next, reply, sizeof reply, "DEL",
                                         "fo-gone", "fo-fixed", (char *)NULL),
                     ':');
    assert_string_equal(reply, ":2\r\n");

    hl_moves_probe p = {c, hl_client_master_moves(c)};
    int64_t asked_at = hl_now_ms();
    assert_int_equal(hl_redis_server_cmd(hl_redis_replicated_sentinel(group, 0),
                                         reply, sizeof reply, "SENTINEL",
                                         "FAILOVER",
                                         hl_redis_replicated_master_name(group),
                                         (char *)NULL),
                     '+');
    assert_ptr_equal(hl_redis_replicated_wait_master(group, master, 60000),
                     next);
    assert_true(hl_wait_until(hl_client_has_moved, &p, 60000));
    int64_t moved_at = hl_now_ms();
    /* Reported at the switch, not at the renewal 100 s after the grant. */
    assert_true(hl_wait_until(lost_once, &gone_lost, 30000));
    printf("# SENTINEL FAILOVER to the client's move: %lld ms; move to the "
           "hold reported lost: %lld ms\n",
           (long long)(moved_at - asked_at),
           (long long)(hl_now_ms() - moved_at));
    assert_true(hl_wait_until(lost_once, &fixed_lost, 30000));
    bool lost = false;
    assert_int_equal(hilock_lock_lease_lost(gone, &lost), HILOCK_OK);
    assert_true(lost);
    assert_int_equal(hilock_lock_lease_lost(fixed, &lost), HILOCK_OK);
    assert_true(lost);
    assert_int_equal(atomic_load(&kept_lost.count), 0);

    /* Work goes on, on the new master. */
    set_key(c, "after-failover", "yes");
    assert_true(node_has(next, "after-failover", "yes"));
    assert_int_equal(hilock_lock_release(kept), HILOCK_OK);
    assert_int_equal(hilock_lock_release(gone), HILOCK_ELEASELOST);
    assert_int_equal(hilock_lock_release(fixed), HILOCK_ELEASELOST);
    hilock_lock_destroy(kept);
    hilock_lock_destroy(gone);
    hilock_lock_destroy(fixed);
    hilock_client_destroy(c);
    assert_int_equal(hl_redis_server_cmd(other, reply, sizeof reply, "CONFIG",
                                         "SET", "replica-priority", "100",
                                         (char *)NULL),
                     '+');
}

typedef struct waiter {
    hilock_lock *lock;
    int rc;
    int64_t got_at;
    atomic_bool done;
} waiter;

static void *waiter_main(void *arg)
{
    waiter *w = arg;
    w->rc = hilock_lock_try_acquire(w->lock, 60000, 10000);
    w->got_at = hl_now_ms();
    if (w->rc == HILOCK_OK)
        w->rc = hilock_lock_release(w->lock);
    atomic_store(&w->done, true);
    return NULL;
}

typedef struct listener {
    hl_redis_server *node;
    const char *channel;
} listener;

static bool subscribed(void *arg)
{
    listener *l = arg;
    return hl_fixture_numsub(l->node, l->channel) > 0;
}

/* kill -9 of the master while a lock is held and waited for: the
 * sentinels promote a replica, both clients follow, the hold is still
 * there, the waiter, subscribed again on the new master, wakes at the
 * release rather than at the end of the holder's lease, the holder
 * hears requests to give the lock up there, and a condition's waiter,
 * in line before the kill, is woken by a signal sent after it. */
static void on_asked(hilock_lock *lock, uint64_t owner, const char *reason,
                     size_t len, void *data)
{
    (void)lock, (void)owner, (void)reason, (void)len;
    atomic_fetch_add((atomic_int *)data, 1);
}

static void on_cond_waited(hilock_cond *cond, int status, uint64_t token,
                           void *data)
{
    (void)cond, (void)token;
    atomic_store((atomic_int *)data, status == HILOCK_OK ? 1 : -status);
}

typedef struct llen_probe {
    hl_redis_server *node;
    const char *key;
} llen_probe;

static bool one_in_line(void *arg)
{
    llen_probe *p = arg;
    return hl_redis_server_cmd(p->node, reply, sizeof reply, "LLEN", p->key,
                               (char *)NULL) == ':' &&
           strcmp(reply, ":1\r\n") == 0;
}

static void test_master_killed(void **state)
{
    (void)state;
    hl_redis_server *master = hl_redis_replicated_master(group);
    assert_non_null(master);
    hilock_client *c = sentinel_client(0);
    hilock_client *other = sentinel_client(0);
    hilock_client *slow = slow_reconnecting_client();
    set_key(slow, "slow-before-kill", "1");
    hilock_lock *held = NULL, *wanted = NULL;
    assert_int_equal(hilock_lock_create(&held, c, "killed-lock"),
                     HILOCK_OK);
    assert_int_equal(hilock_lock_create(&wanted, other, "killed-lock"),
                     HILOCK_OK);
    atomic_int asked = 0;
    assert_int_equal(hilock_lock_set_release_request_callback(held, on_asked,
                                                              &asked),
                     HILOCK_OK);
    assert_int_equal(hilock_lock_acquire(held), HILOCK_OK);
    hilock_lock *cv_lock = NULL, *cv_signaller = NULL;
    hilock_cond *cv = NULL, *cv_other = NULL;
    assert_int_equal(hilock_lock_create(&cv_lock, c, "killed-cv"), HILOCK_OK);
    assert_int_equal(hilock_lock_create(&cv_signaller, other, "killed-cv"),
                     HILOCK_OK);
    assert_int_equal(hilock_cond_create(&cv, cv_lock, "go"), HILOCK_OK);
    assert_int_equal(hilock_cond_create(&cv_other, cv_signaller, "go"),
                     HILOCK_OK);
    assert_int_equal(hilock_lock_acquire_as(cv_lock, 31, 0,
                                            HILOCK_LEASE_WATCHDOG, 0, NULL),
                     HILOCK_OK);
    atomic_int cv_woke = 0;
    assert_int_equal(hilock_cond_wait_async(cv, 31, HILOCK_WAIT_FOREVER,
                                            on_cond_waited, &cv_woke, NULL),
                     HILOCK_OK);
    llen_probe in_line = {master, "hilock_cond_line:{killed-cv}:go"};
    assert_true(hl_wait_until(one_in_line, &in_line, 10000));
    waiter w = {.lock = wanted};
    pthread_t t;
    assert_int_equal(pthread_create(&t, NULL, waiter_main, &w), 0);
    listener on_master = {master, "redisson_lock__channel:{killed-lock}"};
    assert_true(hl_wait_until(subscribed, &on_master, 10000));
    set_key(c, "before-kill", "1");
    /* Both replicas have the hold before the master dies. */
    assert_int_equal(hl_redis_server_cmd(master, reply, sizeof reply, "WAIT",
                                         "2", "5000", (char *)NULL),
                     ':');
    assert_string_equal(reply, ":2\r\n");

    hl_moves_probe p = {c, hl_client_master_moves(c)};
    hl_moves_probe q = {other, hl_client_master_moves(other)};
    hl_moves_probe r = {slow, hl_client_master_moves(slow)};
    int64_t killed_at = hl_now_ms();
    hl_redis_server_kill9(master);
    hl_redis_server *now = hl_redis_replicated_wait_master(group, master,
                                                           60000);
    assert_non_null(now);
    assert_true(hl_wait_until(hl_client_has_moved, &p, 30000));
    assert_true(hl_wait_until(hl_client_has_moved, &q, 30000));
    printf("# kill -9 to the client on the new master: %lld ms\n",
           (long long)(hl_now_ms() - killed_at));
    set_key(c, "after-kill", "2");
    assert_true(node_has(now, "after-kill", "2"));
    /* A connection waiting out its backoff after the kill goes to the
     * new master once the sentinels name it, not when the backoff ends
     * (after the command timeout). */
    assert_true(hl_wait_until(hl_client_has_moved, &r, 30000));
    set_key(slow, "slow-after-kill", "3");
    assert_true(node_has(now, "slow-after-kill", "3"));
    hilock_client_destroy(slow);

    listener on_now = {now, "redisson_lock__channel:{killed-lock}"};
    assert_true(hl_wait_until(subscribed, &on_now, 10000));
    assert_false(atomic_load(&w.done));
    listener asks_now = {now, "hilock_release_request:{killed-lock}"};
    assert_true(hl_wait_until(subscribed, &asks_now, 10000));
    hilock_lock *asker = NULL;
    assert_int_equal(hilock_lock_create(&asker, other, "killed-lock"),
                     HILOCK_OK);
    int64_t heard = 0;
    assert_int_equal(hilock_lock_request_release(asker, "failed over",
                                                 &heard),
                     HILOCK_OK);
    assert_int_equal(heard, 1);
    hl_expect_count(&asked, 1, hl_widen(5000));
    hilock_lock_destroy(asker);
    /* The waiter's place came over with the replicas. */
    in_line.node = now;
    assert_true(hl_wait_until(one_in_line, &in_line, 10000));
    int64_t woken = 0;
    assert_int_equal(hilock_cond_signal(cv_other, &woken), HILOCK_OK);
    assert_int_equal(woken, 1);
    hl_expect_count(&cv_woke, 1, hl_widen(10000));
    assert_int_equal(hilock_lock_release_as(cv_lock, 31), HILOCK_OK);
    hilock_cond_destroy(cv);
    hilock_cond_destroy(cv_other);
    hilock_lock_destroy(cv_lock);
    hilock_lock_destroy(cv_signaller);
    int64_t released_at = hl_now_ms();
    assert_int_equal(hilock_lock_release(held), HILOCK_OK);
    assert_true(hl_wait_flag(&w.done, 30000));
    pthread_join(t, NULL);
    assert_int_equal(w.rc, HILOCK_OK);
    assert_true(w.got_at - released_at < 5000);
    hilock_lock_destroy(held);
    hilock_lock_destroy(wanted);
    hilock_client_destroy(other);
    hilock_client_destroy(c);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_finds_the_master),
        cmocka_unit_test(test_valkey_sentinel_scheme),
        cmocka_unit_test(test_unknown_master_name),
        cmocka_unit_test(test_every_sentinel_down),
        cmocka_unit_test(test_sentinel_names_a_replica),
        cmocka_unit_test(test_failover_reports_a_missing_hold_at_once),
        cmocka_unit_test(test_master_killed),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
