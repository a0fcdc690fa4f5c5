/* A master being replaced grants nothing on the word of too few
 * sentinels.  After a failover the old master stays a master until the
 * sentinels reconfigure it (about 11 s after SENTINEL FAILOVER), and a
 * sentinel that lags, or is cut off with it, still names it.  A client
 * that followed the new master must not go back there on that one
 * sentinel's answer, nor may a new client start there on it, though it
 * answer first; and a client on a master that lost a replica must
 * not count a grant from it before the sentinels' word, however many
 * replicas acknowledged it.  The failovers are made by hand, so that
 * which sentinel names what is the test's choice: nodes are promoted
 * with REPLICAOF NO ONE and sentinels moved with SENTINEL REMOVE and
 * MONITOR, which announce nothing.  Its own group: the cases change its
 * roles, each starting where the one before left it. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <setjmp.h>
#include <cmocka.h>
#include <ev.h>

#include "hilock/hilock.h"
#include "support/fixture.h"
#include "support/raw_reads.h"
#include "support/replicated_util.h"
#include "support/loop_call.h"
#include "core/config/option_values.h"
#include "core/runtime/ack.h"
#include "core/runtime/client_state.h"
#include "core/runtime/sentinel.h"

/* ctest-timeout: 180 */

static hl_redis_replicated *group;

/* of has want online replicas, and they have every write it took. */
static bool count_is(void *arg)
{
    hl_online_probe *p = arg;
    char reply[64], want[16], expect[32];
    snprintf(want, sizeof want, "%d", p->want);
    snprintf(expect, sizeof expect, ":%d\r\n", p->want);
    return hl_online_is(p) &&
           hl_redis_server_cmd(p->of, reply, sizeof reply, "WAIT", want,
                               "1000", (char *)NULL) == ':' &&
           strcmp(reply, expect) == 0;
}

static void wait_count(hl_redis_server *of, int want)
{
    hl_online_probe p = {.of = of, .want = want};
    assert_true(hl_wait_until(count_is, &p, hl_widen(30000)));
}

static int setup(void **state)
{
    (void)state;
    group = hl_fixture_replicated();
    if (group == NULL || hl_redis_replicated_master(group) == NULL)
        return -1;
    hl_online_probe p = {.of = hl_redis_replicated_node(group, 0), .want = 2};
    return hl_wait_until(count_is, &p, hl_widen(30000)) ? 0 : -1;
}

static int teardown(void **state)
{
    (void)state;
    hl_redis_replicated_stop(group);
    return 0;
}

static hl_redis_server *sentinel(size_t i)
{
    return hl_redis_replicated_sentinel(group, i);
}

typedef struct acquire_try {
    hilock_lock *lock;
    hl_redis_server *on;
    const char *name;
} acquire_try;

static bool acquired_on(void *arg)
{
    acquire_try *t = arg;
    if (hilock_lock_try_acquire(t->lock, 0, 10000) != HILOCK_OK)
        return false;
    if (hl_raw_exists(t->on, t->name) == 1)
        return true;
    assert_int_equal(hilock_lock_release(t->lock), HILOCK_OK);
    return false;
}

/* The client follows the new master; a sentinel that still names the
 * old one is the only one that answers the round the client asks for
 * when its connections drop.  On that answer alone it stays with the
 * master it follows: before, it went back to the old master, which
 * still calls itself a master and, its replica count read afresh there
 * (0), granted the lock with no WAIT while the new master could grant it
 * to another client. */
static void test_a_lagging_sentinel_moves_nobody_back(void **state)
{
    (void)state;
    hl_redis_server *old = hl_redis_replicated_node(group, 0);
    hl_redis_server *next = hl_redis_replicated_node(group, 1);
    hl_redis_server *other = hl_redis_replicated_node(group, 2);
    hilock_client *c = hl_sentinel_client(group, HILOCK_ACK_MAJORITY, 0, 0);
    const char *name = "stale-sentinel";
    hilock_lock *l;
    assert_int_equal(hilock_lock_create(&l, c, name),
                     HILOCK_OK);
    assert_int_equal(hilock_lock_try_acquire(l, hl_widen(10000), 10000),
                     HILOCK_OK);
    assert_true(hl_raw_exists(old, name) == 1);
    assert_int_equal(hilock_lock_release(l), HILOCK_OK);

    /* next takes over with the other replica; the old master keeps
     * running as a master, and sentinel 2 keeps naming it. */
    hl_replica_of(next, NULL);
    hl_replica_of(other, next);
    wait_count(next, 1);
    hl_sentinel_names(group, 0, next);
    hl_sentinel_names(group, 1, next);
    hl_redis_server *lagging = sentinel(2);

    /* The client moves on the word of the two that know, while the one
     * that lags is silent. */
    hl_fixture_pause(lagging);
    hl_moves_probe m = {c, hl_client_master_moves(c)};
    hl_fixture_client_kill(old, "normal");
    bool went = hl_wait_until(hl_client_has_moved, &m, hl_widen(15000));
    hl_fixture_resume(lagging);
    assert_true(went);
    acquire_try t = {.lock = l, .on = next, .name = name};
    assert_true(hl_wait_until(acquired_on, &t, hl_widen(10000)));
    assert_int_equal(hilock_lock_release(l), HILOCK_OK);

    /* Now only the one that lags answers. */
    hl_fixture_pause(sentinel(0));
    hl_fixture_pause(sentinel(1));
    hl_rounds_probe w = {.client = c,
                         .rounds = hl_client_sentinel_rounds(c)};
    hl_fixture_client_kill(next, "normal");
    bool asked = hl_wait_until(hl_client_has_asked, &w, hl_widen(15000));
    int rc = asked ? hilock_lock_try_acquire(l, hl_widen(10000), 10000)
                   : HILOCK_ETIMEDOUT;
    char detail[512];
    snprintf(detail, sizeof detail, "%s", hilock_last_error());
    bool on_old = hl_raw_exists(old, name) == 1;
    bool on_next = hl_raw_exists(next, name) == 1;
    hl_fixture_resume(sentinel(0));
    hl_fixture_resume(sentinel(1));
    assert_true(asked);
    printf("# after the lagging sentinel's answer: %s (%s), moves %u\n",
           hilock_errname(rc), detail, hl_client_master_moves(c));
    if (on_old)
        fail_msg("the replaced master granted the lock: %s (%s)",
                 hilock_errname(rc), detail);
    if (rc == HILOCK_OK)
        assert_true(on_next);
    else
        assert_int_equal(rc, HILOCK_ENOACK);
    assert_int_equal(hl_client_master_moves(c), m.moves + 1);
    if (rc == HILOCK_OK)
        assert_int_equal(hilock_lock_release(l), HILOCK_OK);
    hilock_lock_destroy(l);
    hilock_client_destroy(c);
}

/* Drives the client's loop (its own) until done(c) or the deadline. */
static bool turn_until(struct ev_loop *loop, hilock_client *c,
                       bool (*done)(hilock_client *c), int ms)
{
    int64_t deadline = hl_now_ms() + hl_widen(ms);
    while (!done(c) && hl_now_ms() < deadline)
        ev_run(loop, EVRUN_ONCE);
    return done(c);
}

static bool one_heard_out(hilock_client *c)
{
    return hl_sentinel_heard_out(c->sentinel) >= 1;
}

static bool master_known(hilock_client *c)
{
    return c->master_known;
}

/* A client made while one sentinel lags: that sentinel answers first,
 * the others being stopped until it has, and names the replaced master,
 * which still calls itself one.  The client starts on the master the
 * majority names once they answer; before, the first answer ended the
 * round and the client started on the replaced master.  The client runs
 * on the test's loop, so that the test sees the first answer come and
 * the round go on.  Runs after the case above, which left sentinel 2
 * naming node 0 and the others node 1. */
static void test_a_new_client_starts_where_the_majority_says(void **state)
{
    (void)state;
    hl_redis_server *old = hl_redis_replicated_node(group, 0);
    hl_redis_server *next = hl_redis_replicated_node(group, 1);
    struct ev_loop *loop = ev_loop_new(EVFLAG_AUTO);
    hilock_options *o;
    hilock_client *c;
    assert_non_null(loop);
    assert_int_equal(hilock_options_create(&o), HILOCK_OK);
    assert_int_equal(
        hilock_options_set_url(o, hl_redis_replicated_sentinel_url(group)),
        HILOCK_OK);
    assert_int_equal(hilock_options_set_loop(o, loop), HILOCK_OK);
    /* The round must outlast the stopped sentinels. */
    assert_int_equal(
        hilock_options_set_connect_timeout_ms(o, hl_widen(10000)),
        HILOCK_OK);
    hl_fixture_pause(sentinel(0));
    hl_fixture_pause(sentinel(1));
    int rc = hilock_client_create(&c, o);
    hilock_options_free(o);
    assert_int_equal(rc, HILOCK_OK);
    hilock_client_set_loop_thread(c);
    bool heard = turn_until(loop, c, one_heard_out, 5000);
    bool known_early = c->master_known;
    hl_fixture_resume(sentinel(0));
    hl_fixture_resume(sentinel(1));
    bool known = turn_until(loop, c, master_known, 10000);
    int port = c->opts->port;
    printf("# the lagging sentinel heard out: %s; the client follows port "
           "%d (the replaced master %d, the new %d)\n",
           heard ? "yes" : "no", port, hl_redis_server_port(old),
           hl_redis_server_port(next));
    hilock_client_destroy(c);
    ev_loop_destroy(loop);
    if (known_early)
        fail_msg("the client followed a master on one sentinel's answer");
    assert_true(heard);
    assert_true(known);
    assert_int_equal(port, hl_redis_server_port(next));
}

/* Under replicas=one a master with two replicas needs one
 * acknowledgement.  One of them is promoted by hand while the other
 * still follows the master, and the sentinels have not noticed (they
 * are stopped): the master's count fell, and the replica that stayed
 * acknowledges the grant.  Enough for the count, but the master is
 * suspect, and without the sentinels' word the grant does not count.
 * Runs after the case above, which left node 1 the master. */
static void test_a_suspect_masters_acknowledged_grant_waits_for_the_word(
    void **state)
{
    (void)state;
    hl_redis_server *master = hl_redis_replicated_node(group, 1);
    hl_redis_server *stays = hl_redis_replicated_node(group, 0);
    hl_redis_server *leaves = hl_redis_replicated_node(group, 2);
    hl_sentinel_names(group, 2, master);
    hl_replica_of(stays, master);
    wait_count(master, 2);
    hilock_client *c = hl_sentinel_client(group, HILOCK_ACK_ONE, 0, 0);
    const char *name = "suspect-acknowledged";
    hilock_lock *l;
    assert_int_equal(hilock_lock_create(&l, c, name),
                     HILOCK_OK);
    assert_int_equal(hilock_lock_try_acquire(l, hl_widen(10000), 10000),
                     HILOCK_OK);
    assert_true(hl_raw_exists(master, name) == 1);
    assert_int_equal(hilock_lock_release(l), HILOCK_OK);
    int64_t counted_at = hl_now_ms();

    for (size_t i = 0; i < hl_redis_replicated_sentinels(group); i++)
        hl_fixture_pause(sentinel(i));
    hl_replica_of(leaves, NULL);
    wait_count(master, 1);
    /* The count the client read must be old enough to be read again. */
    int64_t old = hl_now_ms() - counted_at;
    if (old <= HL_ACK_RECOUNT_MS)
        hl_sleep_ms((int)(HL_ACK_RECOUNT_MS + 100 - old));
    /* A single attempt: nothing could retry a refusal. */
    int rc = hilock_lock_try_acquire(l, 0, 10000);
    char detail[512];
    snprintf(detail, sizeof detail, "%s", hilock_last_error());
    for (size_t i = 0; i < hl_redis_replicated_sentinels(group); i++)
        hl_fixture_resume(sentinel(i));
    printf("# a suspect master's acknowledged grant: %s (%s)\n",
           hilock_errname(rc), detail);
    if (rc != HILOCK_ENOACK)
        fail_msg("a suspect master's grant counted without the sentinels: "
                 "%s (%s)",
                 hilock_errname(rc), detail);
    assert_non_null(strstr(detail, "fewer online replicas"));

    hl_replica_of(leaves, master);
    wait_count(master, 2);
    hilock_lock_destroy(l);
    hilock_client_destroy(c);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_a_lagging_sentinel_moves_nobody_back),
        cmocka_unit_test(test_a_new_client_starts_where_the_majority_says),
        cmocka_unit_test(
            test_a_suspect_masters_acknowledged_grant_waits_for_the_word),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
