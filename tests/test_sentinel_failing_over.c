/* The sentinels keep naming a master while one of them fails it over,
 * until the promoted replica has taken over.  A round that vouches for a
 * suspect master on their names alone would confirm the master being
 * replaced; each sentinel's flags for it (SENTINEL MASTER) say what
 * their names do not.  The failover is held still: the replica the
 * sentinel chooses (the only one it may: the others have priority 0) is
 * stopped, so it never takes the REPLICAOF NO ONE it is sent, and the
 * failover waits in its promotion step for the failover timeout.  Its
 * own group, of 3 replicas: a master that lost one still has an
 * acknowledging replica for replicas=one besides the stopped one. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <setjmp.h>
#include <cmocka.h>

#include "hilock/hilock.h"
#include "support/fixture.h"
#include "support/raw_reads.h"
#include "support/replicated_util.h"
#include "core/runtime/ack.h"

/* ctest-timeout: 180 */

static hl_redis_replicated *group;
static char reply[8192]; /* the main thread's */

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

static void command_ok(hl_redis_server *s, const char *a, const char *b,
                       const char *c, const char *d)
{
    int t = hl_redis_server_cmd(s, reply, sizeof reply, a, b, c, d,
                                (char *)NULL);
    if (t != '+')
        fail_msg("%s %s on port %d: %s", a, b, hl_redis_server_port(s),
                 reply);
}

/* The sentinel has read the priorities of 0 (it reads a replica's at
 * its next INFO, up to 10 s later): it can choose only the other. */
static bool knows_priorities(void *arg)
{
    hl_redis_server *s = arg;
    const char *mname = hl_redis_replicated_master_name(group);
    if (hl_redis_server_cmd(s, reply, sizeof reply, "SENTINEL", "REPLICAS",
                            mname, (char *)NULL) != '*')
        return false;
    int zeros = 0;
    for (const char *p = reply;
         (p = strstr(p, "slave-priority\r\n$1\r\n0\r\n")) != NULL; p++)
        zeros++;
    return zeros == 2;
}

/* The sentinel has chosen the replica to promote: the failover is past
 * its choice, waiting for the promotion. */
static bool chose(void *arg)
{
    hl_redis_server *s = arg;
    const char *mname = hl_redis_replicated_master_name(group);
    return hl_redis_server_cmd(s, reply, sizeof reply, "SENTINEL",
                               "REPLICAS", mname, (char *)NULL) == '*' &&
           strstr(reply, "promoted") != NULL;
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

    command_ok(stays, "CONFIG", "SET", "replica-priority", "0");
    command_ok(leaves, "CONFIG", "SET", "replica-priority", "0");
    assert_true(hl_wait_until(knows_priorities, failing, hl_widen(30000)));
    hl_fixture_pause(chosen);
    command_ok(failing, "SENTINEL", "FAILOVER",
               hl_redis_replicated_master_name(group), NULL);
    bool held = hl_wait_until(chose, failing, hl_widen(10000));
    if (!held) {
        hl_fixture_resume(chosen);
        fail_msg("the sentinel chose no replica to promote");
    }

    command_ok(leaves, "REPLICAOF", "NO", "ONE", NULL);
    hl_online_probe two = {.of = master, .want = 2};
    bool fell = hl_wait_until(hl_online_is, &two, hl_widen(10000));
    int64_t old = hl_now_ms() - counted_at;
    if (fell && old <= HL_ACK_RECOUNT_MS)
        hl_sleep_ms((int)(HL_ACK_RECOUNT_MS + 100 - old));
    /* A single attempt: nothing could retry a refusal. */
    int rc = fell ? hilock_lock_try_acquire(l, 0, 10000) : HILOCK_EIO;
    char detail[512];
    snprintf(detail, sizeof detail, "%s", hilock_last_error());
    hl_fixture_resume(chosen);
    assert_true(fell);
    printf("# a grant while a sentinel fails the master over: %s (%s)\n",
           hilock_errname(rc), detail);
    if (rc != HILOCK_ENOACK)
        fail_msg("a grant vouched for during a failover: %s (%s)",
                 hilock_errname(rc), detail);
    assert_non_null(strstr(detail, "is failing it over"));
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
