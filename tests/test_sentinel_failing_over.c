/* The sentinels keep naming a master while one of them fails it over,
 * until the promoted replica has taken over.  A round that vouches for a
 * suspect master on their names alone would confirm the master being
 * replaced; each sentinel's flags for it (SENTINEL MASTER) say what
 * their names do not.  The failover is held still: the replica the
 * sentinel chooses (the only one it may: the others have priority 0) is
 * stopped, so it never takes the REPLICAOF NO ONE it is sent, and the
 * failover waits in its promotion step for the failover timeout.  Its
 * own group, of 3 replicas: a master that lost one still has an
 * acknowledging replica for replicas=one besides the stopped one.
 *
 * The master stays suspect until the sentinels vouch for it: a refusal
 * answers the writes that are waiting for it, and every write after it
 * waits for a word of its own, including one whose acknowledgement came
 * after the refusal; rounds asked back to back come no closer than
 * HL_SENTINEL_REASK_MS. */
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
#include "support/raw_reads.h"
#include "support/replicated_util.h"
#include "support/loop_call.h"
#include "core/runtime/ack.h"
#include "core/runtime/sentinel.h"

/* ctest-timeout: 180 */

static hl_redis_replicated *group;

static int setup(void **state)
{
    (void)state;
    hl_redis_replicated_config cfg;
    memset(&cfg, 0, sizeof cfg);
    cfg.replicas = 3;
    cfg.sentinels = 3;
    /* Longer than the test: the failover held still must not end. */
    cfg.failover_timeout_ms = 120000;
    group = hl_redis_replicated_start(&cfg);
    if (group == NULL || hl_redis_replicated_master(group) == NULL)
        return -1;
    hl_online_probe p = {.of = hl_redis_replicated_node(group, 0), .want = 3};
    return hl_wait_until(hl_online_is, &p, hl_widen(30000)) ? 0 : -1;
}

static int teardown(void **state)
{
    (void)state;
    hl_redis_replicated_stop(group);
    return 0;
}

/* A grant the sentinels' refusal must fail: its status and what it
 * said (rc, detail), whole: the sentinels' reason and the conclusion
 * after it. */
static void expect_refused(const char *which, int rc, const char *detail)
{
    if (rc != HILOCK_ENOACK || strstr(detail, "did not vouch") == NULL ||
        strstr(detail, "acknowledgement is unknown") == NULL)
        fail_msg("%s: %s (%s)", which, hilock_errname(rc), detail);
}

/* Under replicas=one a master with three replicas needs one
 * acknowledgement.  A sentinel fails it over, held still before the
 * promotion, so every sentinel still names the master; then another
 * replica leaves it.  The master is suspect, and the replica that stays
 * acknowledges the grant: the round asked for the sentinels' word must
 * not vouch for the master, as the failing sentinel's flags show the
 * failover. */
static void test_a_master_being_failed_over_is_vouched_for_by_nobody(
    void **state)
{
    (void)state;
    hl_redis_server *master = hl_redis_replicated_node(group, 0);
    hl_redis_server *chosen = hl_redis_replicated_node(group, 2);
    hl_redis_server *stays = hl_redis_replicated_node(group, 1);
    hl_redis_server *leaves = hl_redis_replicated_node(group, 3);
    hl_redis_server *failing = hl_redis_replicated_sentinel(group, 0);

    /* Rounds wait 10 s for each sentinel: the failing sentinel's answer
     * must be heard even when a busy machine runs it late, or the other
     * two, which know nothing of the failover, would vouch on their own
     * (as a round does when a sentinel is down for good). */
    hilock_client *c =
        hl_sentinel_client_waiting(group, HILOCK_ACK_ONE, hl_widen(10000));
    const char *name = "failing-over";
    hilock_lock *l;
    assert_int_equal(hilock_lock_create(&l, c, name),
                     HILOCK_OK);
    assert_int_equal(hilock_lock_try_acquire(l, hl_widen(10000), 10000),
                     HILOCK_OK);
    assert_true(hl_raw_exists(master, name) == 1);
    assert_int_equal(hilock_lock_release(l), HILOCK_OK);
    int64_t counted_at = hl_now_ms();

    hl_command_ok(stays, "CONFIG", "SET", "replica-priority", "0");
    hl_command_ok(leaves, "CONFIG", "SET", "replica-priority", "0");
    hl_failover_probe f = {.group = group, .sentinel = failing, .zeros = 2};
    assert_true(
        hl_wait_until(hl_sentinel_knows_priorities, &f, hl_widen(30000)));
    hl_fixture_pause(chosen);
    hl_command_ok(failing, "SENTINEL", "FAILOVER",
               hl_redis_replicated_master_name(group), NULL);
    bool held = hl_wait_until(hl_sentinel_chose, &f, hl_widen(10000));
    if (!held) {
        hl_fixture_resume(chosen);
        fail_msg("the sentinel chose no replica to promote");
    }

    hl_command_ok(leaves, "REPLICAOF", "NO", "ONE", NULL);
    hl_online_probe two = {.of = master, .want = 2};
    bool fell = hl_wait_until(hl_online_is, &two, hl_widen(10000));
    int64_t old = hl_now_ms() - counted_at;
    if (fell && old <= HL_ACK_RECOUNT_MS)
        hl_sleep_ms((int)(HL_ACK_RECOUNT_MS + 100 - old));
    /* A single attempt: nothing could retry a refusal. */
    int rc = fell ? hilock_lock_try_acquire(l, 0, 10000) : HILOCK_EIO;
    char detail[512];
    snprintf(detail, sizeof detail, "%s", hilock_last_error());
    if (!fell) {
        hl_fixture_resume(chosen);
        fail_msg("the replica that left still counts as online");
    }
    printf("# a grant while a sentinel fails the master over: %s (%s)\n",
           hilock_errname(rc), detail);
    expect_refused("a grant while a sentinel fails the master over", rc,
                   detail);
    if (strstr(detail, "is failing it over") == NULL &&
        strstr(detail, "holds it down") == NULL) {
        hl_fixture_resume(chosen);
        fail_msg("refused for another reason than the failover: %s",
                 detail);
    }

    /* At once, on the count just read: still suspect. */
    rc = hilock_lock_try_acquire(l, 0, 10000);
    snprintf(detail, sizeof detail, "%s", hilock_last_error());
    expect_refused("the next grant, on the same count", rc, detail);

    /* The replica that stays holds the acknowledgement back until the
     * round asked by the fresh count has refused. */
    hl_sleep_ms(HL_ACK_RECOUNT_MS + 100);
    hl_rounds_probe r = {.client = c,
                         .rounds = hl_client_sentinel_rounds(c)};
    hl_grant g = {.lock = l};
    pthread_t t;
    hl_fixture_pause(stays);
    assert_int_equal(pthread_create(&t, NULL, hl_grant_main, &g), 0);
    bool refused = hl_wait_until(hl_client_has_asked, &r, hl_widen(20000));
    hl_fixture_resume(stays);
    assert_int_equal(pthread_join(t, NULL), 0);
    assert_true(refused);
    expect_refused("a grant acknowledged after the refusal", g.rc,
                   g.detail);

    /* Grants asked back to back while the sentinels refuse ask them at
     * most once per HL_SENTINEL_REASK_MS, not once each. */
    unsigned before = hl_client_sentinel_rounds(c);
    int asked = 0;
    int64_t from = hl_now_ms(), took;
    while ((took = hl_now_ms() - from) < 500) {
        rc = hilock_lock_try_acquire(l, 0, 10000);
        snprintf(detail, sizeof detail, "%s", hilock_last_error());
        expect_refused("a grant asked back to back", rc, detail);
        asked++;
    }
    unsigned after = hl_client_sentinel_rounds(c);
    hl_fixture_resume(chosen);
    printf("# %d grants in %lld ms asked %u rounds\n", asked,
           (long long)took, after - before);
    if (after - before > took / HL_SENTINEL_REASK_MS + 2)
        fail_msg("%d grants in %lld ms asked %u rounds", asked,
                 (long long)took, after - before);
    hilock_lock_destroy(l);
    hilock_client_destroy(c);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(
            test_a_master_being_failed_over_is_vouched_for_by_nobody),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
