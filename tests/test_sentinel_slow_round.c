/* A vouching round that one stopped sentinel holds open may have heard
 * another before that one began a failover.  Its word says nothing of
 * a replica count that fell lower after it began: a write judged on such
 * a count waits for the next round, which the failing sentinel's flags
 * then refuse.  The failover is held still as in
 * test_sentinel_failing_over (the one replica it may promote is
 * stopped); the round is begun by a first replica of four killed, and
 * the count falls again when a second is. */
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <setjmp.h>
#include <cmocka.h>

#include "hilock/hilock.h"
#include "support/fixture.h"
#include "support/held_failover.h"
#include "support/loop_call.h"
#include "support/raw_reads.h"
#include "support/replicated_util.h"
#include "core/runtime/ack.h"
#include "core/runtime/client_state.h"
#include "core/runtime/sentinel.h"

/* ctest-timeout: 180 */

static hl_redis_replicated *group;

static int setup(void **state)
{
    (void)state;
    hl_redis_replicated_config cfg;
    memset(&cfg, 0, sizeof cfg);
    cfg.replicas = 4;
    cfg.sentinels = 3;
    cfg.failover_timeout_ms = 120000;
    group = hl_redis_replicated_start(&cfg);
    if (group == NULL || hl_redis_replicated_master(group) == NULL)
        return -1;
    hl_online_probe p = {.of = hl_redis_replicated_node(group, 0), .want = 4};
    return hl_wait_until(hl_online_is, &p, hl_widen(30000)) ? 0 : -1;
}

static int teardown(void **state)
{
    (void)state;
    hl_redis_replicated_stop(group);
    return 0;
}

/* One connection, so that every lock's write is judged by one count;
 * rounds wait 30 s for each sentinel. */
static hilock_client *one_connection_client(void)
{
    hilock_options *o;
    hilock_client *c;
    assert_int_equal(hilock_options_create(&o), HILOCK_OK);
    assert_int_equal(
        hilock_options_set_url(o, hl_redis_replicated_sentinel_url(group)),
        HILOCK_OK);
    assert_int_equal(hilock_options_set_replica_ack(o, HILOCK_ACK_ONE),
                     HILOCK_OK);
    assert_int_equal(hilock_options_set_connections(o, 1), HILOCK_OK);
    assert_int_equal(hilock_options_set_connect_timeout_ms(o, hl_widen(30000)),
                     HILOCK_OK);
    assert_int_equal(hilock_client_create(&c, o), HILOCK_OK);
    hilock_options_free(o);
    return c;
}

static void read_heard_out(hilock_client *c, void *arg)
{
    *(int *)arg = hl_sentinel_heard_out(c->sentinel);
}

/* The round under way has heard two sentinels out. */
static bool two_heard_out(void *arg)
{
    int n = 0;
    hl_run_on_loop(arg, read_heard_out, &n);
    return n >= 2;
}

static bool exists_on(void *arg)
{
    return hl_raw_exists(hl_redis_replicated_node(group, 0), arg) == 1;
}

/* node is killed, and the master's count then reads want; false if it
 * does not within 10 s.  (A replica made a master by hand would be made
 * a replica again by the sentinels.) */
static bool leave(hl_redis_server *node, int want)
{
    hl_fixture_kill9(node);
    hl_online_probe p = {.of = hl_redis_replicated_node(group, 0),
                         .want = want};
    return hl_wait_until(hl_online_is, &p, hl_widen(10000));
}

/* The count the client read last is older than HL_ACK_RECOUNT_MS from
 * since: the next write reads it again. */
static void let_count_age(int64_t since)
{
    int64_t old = hl_now_ms() - since;
    if (old <= HL_ACK_RECOUNT_MS)
        hl_sleep_ms((int)(HL_ACK_RECOUNT_MS + 100 - old));
}

static void test_a_round_begun_before_the_count_fell_does_not_vouch(
    void **state)
{
    (void)state;
    hl_redis_server *stays = hl_redis_replicated_node(group, 1);
    hl_redis_server *chosen = hl_redis_replicated_node(group, 2);
    hl_redis_server *first = hl_redis_replicated_node(group, 3);
    hl_redis_server *second = hl_redis_replicated_node(group, 4);
    hl_redis_server *failing = hl_redis_replicated_sentinel(group, 0);
    hl_redis_server *slow = hl_redis_replicated_sentinel(group, 2);

    hilock_client *c = one_connection_client();
    hilock_lock *counted, *before, *after;
    assert_int_equal(hilock_lock_create(&counted, c, "counted"), HILOCK_OK);
    assert_int_equal(hilock_lock_create(&before, c, "before"), HILOCK_OK);
    assert_int_equal(hilock_lock_create(&after, c, "after"), HILOCK_OK);
    /* The master's count read: 4 replicas. */
    assert_int_equal(hilock_lock_try_acquire(counted, hl_widen(10000), 10000),
                     HILOCK_OK);
    assert_int_equal(hilock_lock_release(counted), HILOCK_OK);
    int64_t counted_at = hl_now_ms();

    /* A first replica dies: a grant on the count of 3 begins a
     * vouching round, which the slow sentinel, stopped, holds open once
     * the other two have answered. */
    bool left = leave(first, 3);
    hl_fixture_pause(slow);
    let_count_age(counted_at);
    hl_grant g1 = {.lock = before};
    pthread_t t1;
    bool open = false;
    if (left) {
        assert_int_equal(pthread_create(&t1, NULL, hl_grant_main, &g1), 0);
        open = hl_wait_until(two_heard_out, c, hl_widen(15000));
    }
    counted_at = hl_now_ms();

    /* Then the failing sentinel begins the failover, held still, and a
     * second replica dies. */
    bool held = false, fell = false;
    if (open) {
        hl_command_ok(stays, "CONFIG", "SET", "replica-priority", "0");
        hl_command_ok(second, "CONFIG", "SET", "replica-priority", "0");
        hl_failover_probe f = {
            .group = group, .sentinel = failing, .zeros = 2};
        bool knows = hl_wait_until(hl_sentinel_knows_priorities, &f,
                                   hl_widen(30000));
        hl_fixture_pause(chosen);
        if (knows)
            hl_command_ok(failing, "SENTINEL", "FAILOVER",
                       hl_redis_replicated_master_name(group), NULL);
        held = knows && hl_wait_until(hl_sentinel_chose, &f, hl_widen(10000));
        fell = held && leave(second, 2);
    }
    /* A grant on the count of 2, asked while the round is still open. */
    hl_grant g2 = {.lock = after};
    pthread_t t2;
    bool asked = false;
    if (fell) {
        let_count_age(counted_at);
        assert_int_equal(pthread_create(&t2, NULL, hl_grant_main, &g2), 0);
        asked = hl_wait_until(exists_on, "after", hl_widen(10000));
    }
    hl_fixture_resume(slow);
    if (left)
        assert_int_equal(pthread_join(t1, NULL), 0);
    if (fell)
        assert_int_equal(pthread_join(t2, NULL), 0);
    hl_fixture_resume(chosen);
    assert_true(left);
    assert_true(open);
    assert_true(held);
    assert_true(fell);
    assert_true(asked);
    printf("# the grant on the count of 3: %s (%s)\n",
           hilock_errname(g1.rc), g1.detail);
    printf("# the grant on the count of 2: %s (%s)\n",
           hilock_errname(g2.rc), g2.detail);
    if (g2.rc != HILOCK_ENOACK || strstr(g2.detail, "did not vouch") == NULL)
        fail_msg("a grant on a count that fell after the round began: %s "
                 "(%s)",
                 hilock_errname(g2.rc), g2.detail);
    hilock_lock_destroy(counted);
    hilock_lock_destroy(before);
    hilock_lock_destroy(after);
    hilock_client_destroy(c);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(
            test_a_round_begun_before_the_count_fell_does_not_vouch),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
