/* Expirable permits (RPermitExpirableSemaphore layout) on a real server:
 * ids and their errors, fixed leases that run out and come back, the
 * watchdog keeping a live holder's permit, a killed holder's permit coming
 * back within the watchdog timeout, and a lost permit reported. */
/* ctest-timeout: 120 */
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <setjmp.h>
#include <cmocka.h>

#include "hilock/hilock.h"
#include "support/children.h"
#include "support/fixture.h"
#include "support/lock_helpers.h"
#include "support/plain_sub.h"

static hl_redis_server *server;
static hl_children kids;

static int group_setup(void **state)
{
    (void)state;
    server = hl_fixture_plain();
    return server ? 0 : -1;
}

static int group_teardown(void **state)
{
    (void)state;
    hl_children_kill_all(&kids);
    hl_redis_server_stop(server);
    return 0;
}

/* The handle for the calls on a permit semaphore's count. */
#define BASE(p) hilock_permit_semaphore_base(p)

static hilock_permit_semaphore *new_permits(hilock_client *c, const char *name)
{
    hilock_permit_semaphore *s = NULL;
    assert_status(hilock_permit_semaphore_create(&s, c, name),
                  HILOCK_OK);
    return s;
}

/* ZSCORE "{name}:timeout" id: the reply's bytes. */
static int zscore(const char *name, const char *id, char *out, size_t cap)
{
    char key[128];
    snprintf(key, sizeof key, "{%s}:timeout", name);
    return hl_redis_server_cmd(server, out, cap, "ZSCORE", key, id,
                               (char *)NULL);
}

static void test_ids(void **state)
{
    (void)state;
    hilock_client *c = hl_new_client(server, NULL);
    hilock_permit_semaphore *s = new_permits(c, "pe-ids");
    char a[HILOCK_PERMIT_ID_MAX], b[HILOCK_PERMIT_ID_MAX], raw[128];
    int64_t v;

    assert_status(hilock_semaphore_try_set(BASE(s), 2, NULL), HILOCK_OK);
    assert_status(hilock_permit_acquire(s, 0, HILOCK_LEASE_WATCHDOG, a),
                  HILOCK_OK);
    assert_status(hilock_permit_acquire(s, 0, 60000, b), HILOCK_OK);
    assert_string_not_equal(a, b);
    /* "<client id>:<n>" */
    assert_int_equal(strncmp(a, hilock_client_id(c), 36), 0);
    assert_int_equal(a[36], ':');
    assert_int_equal(zscore("pe-ids", a, raw, sizeof raw), '$');
    assert_status(hilock_permit_acquire(s, 0, 0, raw),
                  HILOCK_EBUSY);
    assert_status(hilock_semaphore_available(BASE(s), &v), HILOCK_OK);
    assert_int_equal(v, 0);
    assert_status(hilock_permit_release(s, a), HILOCK_OK);
    assert_status(hilock_permit_release(s, a), HILOCK_ENOTOWNER);
    assert_status(hilock_permit_release(s, "no-such-permit"),
                  HILOCK_ENOTOWNER);
    assert_status(hilock_permit_release(s, b), HILOCK_OK);
    assert_status(hilock_semaphore_available(BASE(s), &v), HILOCK_OK);
    assert_int_equal(v, 2);

    /* Errors. */
    char longid[HILOCK_PERMIT_ID_MAX + 8];
    memset(longid, 'x', sizeof longid - 1);
    longid[sizeof longid - 1] = '\0';
    assert_status(hilock_permit_release(s, longid), HILOCK_EINVAL);
    assert_status(hilock_permit_release(s, ""), HILOCK_EINVAL);
    assert_status(hilock_permit_release(s, NULL), HILOCK_EINVAL);
    assert_status(hilock_permit_acquire(s, 0, 0, NULL), HILOCK_EINVAL);
    assert_status(hilock_permit_acquire(s, -5, 0, a), HILOCK_EINVAL);
    assert_status(hilock_permit_acquire(s, 0, -1, a), HILOCK_EINVAL);
    assert_status(hilock_permit_acquire(s, 0, HILOCK_MAX_LEASE_MS + 1, a),
                  HILOCK_EINVAL);
    assert_status(hilock_semaphore_try_acquire(BASE(s), 1, 0), HILOCK_EINVAL);
    assert_status(hilock_semaphore_release(BASE(s), 1), HILOCK_EINVAL);
    hilock_permit_semaphore_destroy(s);

    /* A name with a hash tag of its own keeps it: "NAME:timeout". */
    s = new_permits(c, "{t}pe");
    assert_status(hilock_semaphore_set(BASE(s), 1), HILOCK_OK);
    assert_status(hilock_permit_acquire(s, 0, 60000, a), HILOCK_OK);
    assert_int_equal(hl_redis_server_cmd(server, raw, sizeof raw, "ZSCORE",
                                         "{t}pe:timeout", a, (char *)NULL),
                     '$');
    assert_status(hilock_permit_release(s, a), HILOCK_OK);
    hilock_permit_semaphore_destroy(s);
    hl_free_client(c);
}

/* ---- leases ------------------------------------------------------------ */

typedef struct lost_log {
    atomic_int calls;
    char id[HILOCK_PERMIT_ID_MAX];
} lost_log;

static void on_lost(hilock_permit_semaphore *s, const char *id, void *data)
{
    (void)s;
    lost_log *l = data;
    snprintf(l->id, sizeof l->id, "%s", id);
    atomic_fetch_add(&l->calls, 1);
}

/* A fixed lease runs out: the permit is reported lost, a waiter gets it
 * back (taken back by the server's clock), and its release says so. */
static void test_fixed_lease(void **state)
{
    (void)state;
    hilock_client *c = hl_new_client(server, NULL);
    hilock_permit_semaphore *s = new_permits(c, "pe-fixed");
    char a[HILOCK_PERMIT_ID_MAX];
    lost_log lost;
    hl_sem_rec waiter;
    memset(&lost, 0, sizeof lost);
    memset(&waiter, 0, sizeof waiter);

    assert_status(hilock_permit_semaphore_set_lost_callback(s, on_lost, &lost),
                  HILOCK_OK);
    assert_status(hilock_semaphore_set(BASE(s), 1), HILOCK_OK);
    int64_t t0 = hl_now_ms();
    assert_status(hilock_permit_acquire(s, 0, 300, a), HILOCK_OK);
    assert_status(hilock_permit_acquire_async(s, HILOCK_WAIT_FOREVER,
                                              HILOCK_LEASE_WATCHDOG,
                                              hl_record_permit, &waiter, NULL),
                  HILOCK_OK);
    hl_expect_count(&waiter.calls, 1, hl_widen(5000));
    assert_status(waiter.status, HILOCK_OK);
    /* Not before the lease ran out, and soon after: the server told the
     * waiter when the first permit expires. */
    assert_true(waiter.at_ms - t0 >= 290);
    assert_true(waiter.at_ms - t0 < 1000 || hl_under_valgrind());
    assert_string_not_equal(waiter.id, a);
    hl_expect_count(&lost.calls, 1, hl_widen(5000));
    assert_string_equal(lost.id, a);
    assert_status(hilock_permit_release(s, a), HILOCK_ELEASELOST);
    assert_status(hilock_permit_release(s, waiter.id), HILOCK_OK);
    int64_t v;
    assert_status(hilock_semaphore_available(BASE(s), &v), HILOCK_OK);
    assert_int_equal(v, 1);
    hilock_permit_semaphore_destroy(s);
    hl_free_client(c);
}

/* The watchdog keeps a held permit for several watchdog timeouts. */
static void test_watchdog_keeps(void **state)
{
    (void)state;
    const hl_client_opts opts = {.watchdog_ms = 600};
    hilock_client *c = hl_new_client(server, &opts);
    hilock_client *c2 = hl_new_client(server, NULL);
    hilock_permit_semaphore *s = new_permits(c, "pe-keep");
    hilock_permit_semaphore *s2 = new_permits(c2, "pe-keep");
    char a[HILOCK_PERMIT_ID_MAX], b[HILOCK_PERMIT_ID_MAX];
    lost_log lost;
    memset(&lost, 0, sizeof lost);

    assert_status(hilock_permit_semaphore_set_lost_callback(s, on_lost, &lost),
                  HILOCK_OK);
    assert_status(hilock_semaphore_set(BASE(s), 1), HILOCK_OK);
    assert_status(hilock_permit_acquire(s, 0, HILOCK_LEASE_WATCHDOG, a),
                  HILOCK_OK);
    /* Another client waits 3 watchdog timeouts and gets nothing. */
    assert_status(hilock_permit_acquire(s2, 1800, 0, b), HILOCK_EBUSY);
    assert_int_equal(atomic_load(&lost.calls), 0);
    assert_status(hilock_permit_release(s, a), HILOCK_OK);
    assert_status(hilock_permit_acquire(s2, 0, 0, b), HILOCK_OK);
    assert_status(hilock_permit_release(s2, b), HILOCK_OK);
    hilock_permit_semaphore_destroy(s2);
    hilock_permit_semaphore_destroy(s);
    hl_free_client(c2);
    hl_free_client(c);
}

/* The permit deleted behind the holder's back: its next renewal finds it
 * gone, and the holder is told. */
static void test_lost_reported(void **state)
{
    (void)state;
    const hl_client_opts opts = {.watchdog_ms = 600};
    hilock_client *c = hl_new_client(server, &opts);
    hilock_permit_semaphore *s = new_permits(c, "pe-lost");
    char a[HILOCK_PERMIT_ID_MAX], raw[64];
    lost_log lost;
    memset(&lost, 0, sizeof lost);

    assert_status(hilock_permit_semaphore_set_lost_callback(s, on_lost, &lost),
                  HILOCK_OK);
    assert_status(hilock_semaphore_set(BASE(s), 1), HILOCK_OK);
    assert_status(hilock_permit_acquire(s, 0, HILOCK_LEASE_WATCHDOG, a),
                  HILOCK_OK);
    assert_int_equal(hl_redis_server_cmd(server, raw, sizeof raw, "ZREM",
                                         "{pe-lost}:timeout", a,
                                         (char *)NULL),
                     ':');
    assert_string_equal(raw, ":1\r\n");
    hl_expect_count(&lost.calls, 1, hl_widen(5000));
    assert_string_equal(lost.id, a);
    assert_status(hilock_permit_release(s, a), HILOCK_ELEASELOST);
    hilock_permit_semaphore_destroy(s);
    hl_free_client(c);
}

/* A holder killed with SIGKILL: its permit comes back within the
 * watchdog timeout of its last renewal. */
static void test_killed_holder(void **state)
{
    (void)state;
    int ready[2];
    char byte = 0;

    char raw[64];
    assert_true(hl_redis_server_cmd(server, raw, sizeof raw, "SET",
                                    "pe-kill", "1", (char *)NULL) > 0);
    assert_int_equal(pipe(ready), 0);
    /* Fork first: the child must not inherit a client whose threads it
     * does not have. */
    if (hl_children_fork(&kids, 0) == 0) {
        const hl_client_opts opts = {.watchdog_ms = 1000};
        char why[300], id[HILOCK_PERMIT_ID_MAX];
        hilock_permit_semaphore *cs = NULL;
        close(ready[0]);
        hilock_client *hc = hl_open_client(server, &opts, why, sizeof why);
        if (hc == NULL ||
            hilock_permit_semaphore_create(&cs, hc, "pe-kill") != 0 ||
            hilock_permit_acquire(cs, 0, HILOCK_LEASE_WATCHDOG, id) != 0)
            _exit(1);
        byte = 'h';
        if (write(ready[1], &byte, 1) != 1)
            _exit(1);
        for (;;)
            pause();
    }
    close(ready[1]);
    if (!hl_read_exact(ready[0], &byte, 1, hl_widen(10000)))
        fail_msg("the child never reported holding the permit");
    close(ready[0]);
    hilock_client *c = hl_new_client(server, NULL);
    hilock_permit_semaphore *s = new_permits(c, "pe-kill");
    /* Held: the child's watchdog keeps it past its timeout. */
    char id[HILOCK_PERMIT_ID_MAX];
    assert_status(hilock_permit_acquire(s, 1500, 0, id), HILOCK_EBUSY);
    int64_t t_kill = hl_now_ms();
    assert_int_equal(hl_children_kill(&kids, 0), 0);
    assert_status(hilock_permit_acquire(s, hl_widen(10000), 0, id),
                  HILOCK_OK);
    int64_t took = hl_now_ms() - t_kill;
    if (took >= 1500 && !hl_under_valgrind())
        fail_msg("the permit of a killed holder came back %lld ms after the "
                 "kill (watchdog 1000 ms)", (long long)took);
    assert_status(hilock_permit_release(s, id), HILOCK_OK);
    hilock_permit_semaphore_destroy(s);
    hl_free_client(c);
}

/* A handle destroyed while holding: its permit is no longer renewed and
 * comes back within the watchdog timeout.  A client closed while holding:
 * the handle still goes cleanly. */
static void test_destroy_holding(void **state)
{
    (void)state;
    const hl_client_opts opts = {.watchdog_ms = 600};
    hilock_client *c = hl_new_client(server, &opts);
    hilock_client *c2 = hl_new_client(server, NULL);
    hilock_permit_semaphore *s = new_permits(c, "pe-gone");
    hilock_permit_semaphore *s2 = new_permits(c2, "pe-gone");
    char a[HILOCK_PERMIT_ID_MAX], b[HILOCK_PERMIT_ID_MAX];

    assert_status(hilock_semaphore_set(BASE(s), 1), HILOCK_OK);
    assert_status(hilock_permit_acquire(s, 0, HILOCK_LEASE_WATCHDOG, a),
                  HILOCK_OK);
    assert_status(hilock_permit_semaphore_destroy(s), HILOCK_OK);
    int64_t t0 = hl_now_ms();
    assert_status(hilock_permit_acquire(s2, hl_widen(5000), 0, b), HILOCK_OK);
    assert_true(hl_now_ms() - t0 < 1500 || hl_under_valgrind());

    s = new_permits(c, "pe-gone");
    assert_status(hilock_permit_release(s2, b), HILOCK_OK);
    assert_status(hilock_permit_acquire(s, 0, HILOCK_LEASE_WATCHDOG, a),
                  HILOCK_OK);
    assert_status(hilock_client_close(c), HILOCK_OK);
    assert_status(hilock_permit_release(s, a), HILOCK_ECLOSED);
    assert_status(hilock_permit_semaphore_destroy(s), HILOCK_OK);
    hilock_permit_semaphore_destroy(s2);
    hl_free_client(c2);
    hl_free_client(c);
}

/* ---- count changes as Redisson's -------------------------------------- */

/* A peer that changes an expirable semaphore's count the way
 * RPermitExpirableSemaphore does (setPermits: the total, held permits
 * included; addPermits: the amount added is published, only when
 * positive).  KEYS: name, channel, "{name}:timeout"; ARGV: permits. */
static const char peer_set_lua[] =
    "local free = redis.call('get', KEYS[1])\n"
    "local want = tonumber(ARGV[1])\n"
    "if not free then\n"
    "  redis.call('set', KEYS[1], want)\n"
    "  redis.call('publish', KEYS[2], ARGV[1])\n"
    "  return 0\n"
    "end\n"
    "local total = tonumber(free) + redis.call('zcount', KEYS[3], 0, '+inf')\n"
    "if total ~= want then\n"
    "  redis.call('incrby', KEYS[1], want - total)\n"
    "  redis.call('publish', KEYS[2], ARGV[1])\n"
    "end\n"
    "return 0\n";

static const char peer_add_lua[] =
    "local free = tonumber(redis.call('get', KEYS[1]) or '0')\n"
    "redis.call('set', KEYS[1], free + tonumber(ARGV[1]))\n"
    "if tonumber(ARGV[1]) > 0 then\n"
    "  redis.call('publish', KEYS[2], ARGV[1])\n"
    "end\n"
    "return 0\n";

static void peer_run(const char *lua, const char *name, const char *permits)
{
    char chan[96], zkey[96], out[64];
    snprintf(chan, sizeof chan, "redisson_sc:{%s}", name);
    snprintf(zkey, sizeof zkey, "{%s}:timeout", name);
    assert_int_equal(hl_redis_server_cmd(server, out, sizeof out, "EVAL", lua,
                                         "3", name, chan, zkey, permits,
                                         (char *)NULL),
                     ':');
}

static int64_t free_count(const char *name)
{
    char out[64];
    assert_int_equal(
        hl_redis_server_cmd(server, out, sizeof out, "GET", name,
                            (char *)NULL),
        '$');
    const char *body = strstr(out, "\r\n"); /* "$<len>\r\n<count>\r\n" */
    assert_non_null(body);
    return strtoll(body + 2, NULL, 10);
}

/* The next message on both channels: the same, and expected. */
static void expect_both(hl_plain_sub *mine, hl_plain_sub *peer,
                        const char *expected)
{
    char a[64], b[64];
    assert_true(hl_plain_sub_next(mine, a, sizeof a, 5000));
    assert_true(hl_plain_sub_next(peer, b, sizeof b, 5000));
    assert_string_equal(a, expected);
    assert_string_equal(b, expected);
}

/* hilock's set and add on an expirable semaphore leave the count and
 * announce what a Redisson peer's do, step by step, on twin semaphores
 * with one permit held on each. */
static void test_set_and_add_as_redisson(void **state)
{
    (void)state;
    hilock_client *c = hl_new_client(server, NULL);
    hilock_permit_semaphore *s = new_permits(c, "pe-set-mine");
    hilock_permit_semaphore *twin = new_permits(c, "pe-set-peer");
    char a[HILOCK_PERMIT_ID_MAX], b[HILOCK_PERMIT_ID_MAX];
    int64_t v;

    assert_status(hilock_semaphore_try_set(BASE(s), 3, NULL), HILOCK_OK);
    assert_status(hilock_semaphore_try_set(BASE(twin), 3, NULL), HILOCK_OK);
    assert_status(hilock_permit_acquire(s, 0, 60000, a), HILOCK_OK);
    assert_status(hilock_permit_acquire(twin, 0, 60000, b), HILOCK_OK);
    hl_plain_sub *mine = hl_plain_sub_open(server, "redisson_sc:{pe-set-mine}");
    hl_plain_sub *peer = hl_plain_sub_open(server, "redisson_sc:{pe-set-peer}");

    /* With one permit held, a total of 5 leaves 4 free. */
    assert_status(hilock_semaphore_set(BASE(s), 5), HILOCK_OK);
    peer_run(peer_set_lua, "pe-set-peer", "5");
    assert_int_equal(free_count("pe-set-mine"), 4);
    assert_int_equal(free_count("pe-set-peer"), 4);
    expect_both(mine, peer, "5");

    /* The same total again announces nothing: the next message is the
     * add's. */
    assert_status(hilock_semaphore_set(BASE(s), 5), HILOCK_OK);
    peer_run(peer_set_lua, "pe-set-peer", "5");
    assert_status(hilock_semaphore_add(BASE(s), 2, &v), HILOCK_OK);
    assert_int_equal(v, 6);
    peer_run(peer_add_lua, "pe-set-peer", "2");
    expect_both(mine, peer, "2");

    /* Taking permits away announces nothing either. */
    assert_status(hilock_semaphore_add(BASE(s), -3, &v), HILOCK_OK);
    assert_int_equal(v, 3);
    peer_run(peer_add_lua, "pe-set-peer", "-3");
    assert_status(hilock_semaphore_add(BASE(s), 1, &v), HILOCK_OK);
    peer_run(peer_add_lua, "pe-set-peer", "1");
    expect_both(mine, peer, "1");
    assert_int_equal(free_count("pe-set-mine"), 4);
    assert_int_equal(free_count("pe-set-peer"), 4);

    /* A total below the held permits leaves a negative free count, as
     * Redisson's does; the held permit still goes back. */
    assert_status(hilock_semaphore_set(BASE(s), 0), HILOCK_OK);
    peer_run(peer_set_lua, "pe-set-peer", "0");
    assert_int_equal(free_count("pe-set-mine"), -1);
    assert_int_equal(free_count("pe-set-peer"), -1);
    expect_both(mine, peer, "0");
    assert_status(hilock_permit_release(s, a), HILOCK_OK);
    assert_status(hilock_permit_release(twin, b), HILOCK_OK);
    assert_status(hilock_semaphore_available(BASE(s), &v), HILOCK_OK);
    assert_int_equal(v, 0);

    hl_plain_sub_close(mine);
    hl_plain_sub_close(peer);
    hilock_permit_semaphore_destroy(s);
    hilock_permit_semaphore_destroy(twin);
    hl_free_client(c);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_ids),
        cmocka_unit_test(test_fixed_lease),
        cmocka_unit_test(test_watchdog_keeps),
        cmocka_unit_test(test_lost_reported),
        cmocka_unit_test(test_killed_holder),
        cmocka_unit_test(test_destroy_holding),
        cmocka_unit_test(test_set_and_add_as_redisson),
    };
    return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
