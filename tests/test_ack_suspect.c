/* A master that reports fewer replicas than it had is suspect under
 * Sentinel: a takeover takes a master's replicas before the master hears
 * of it, so a grant judged by the smaller count would go unacknowledged
 * and be lost with the old master.  The grant waits for the sentinels'
 * word: it counts when they still name the master, and fails with
 * HILOCK_ENOACK when they name another.  Its own group: the second case
 * moves the sentinels to another master. */
#include <stdatomic.h>
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
#include "core/runtime/client_state.h"
#include "core/runtime/sentinel.h"

/* ctest-timeout: 180 */

static hl_redis_replicated *group;
static hl_redis_server *master;

static bool all_online(void *arg);

static int setup(void **state)
{
    (void)state;
    group = hl_fixture_replicated();
    if (group == NULL)
        return -1;
    master = hl_redis_replicated_master(group);
    if (master == NULL)
        return -1;
    return hl_wait_until(all_online, NULL, hl_widen(30000)) ? 0 : -1;
}

static int teardown(void **state)
{
    (void)state;
    hl_redis_replicated_stop(group);
    return 0;
}

static int online_replicas(void) { return hl_online_replicas(master); }

static bool all_online(void *arg)
{
    (void)arg;
    char reply[64];
    return online_replicas() == 2 &&
           hl_redis_server_cmd(master, reply, sizeof reply, "WAIT", "2",
                               "1000", (char *)NULL) == ':' &&
           strcmp(reply, ":2\r\n") == 0;
}

static bool online_is(void *n) { return online_replicas() == *(int *)n; }

/* Every sentinel names node as the master from now on; none announces
 * a switch, so a client hears of it only by asking. */
static void sentinels_name(hl_redis_server *node)
{
    for (size_t i = 0; i < hl_redis_replicated_sentinels(group); i++)
        hl_sentinel_names(group, i, node);
}

/* The count the client read is older than HL_ACK_RECOUNT_MS once this
 * returns, so the next write reads it again. */
static void let_count_age(int64_t read_at_ms)
{
    int64_t old = hl_now_ms() - read_at_ms;
    if (old <= HL_ACK_RECOUNT_MS)
        hl_sleep_ms((int)(HL_ACK_RECOUNT_MS + 100 - old));
}

/* A replica that leaves a master the sentinels still name fails nothing:
 * the short grant waits for their answer, which vouches for the master,
 * and is then judged by the one replica left. */
static void test_replica_leaving_is_vouched_for(void **state)
{
    (void)state;
    hilock_client *c = hl_sentinel_client(group, HILOCK_ACK_ALL, 1000, 0);
    hilock_lock *l;
    assert_int_equal(hilock_lock_create(&l, c, "suspect-vouched"),
                     HILOCK_OK);
    assert_int_equal(hilock_lock_try_acquire(l, hl_widen(10000), 10000),
                     HILOCK_OK);
    assert_int_equal(hilock_lock_release(l), HILOCK_OK);
    int64_t counted_at = hl_now_ms();
    unsigned answers = hl_sentinel_answers(c->sentinel);

    hl_redis_server *gone = hl_redis_replicated_node(group, 2);
    hl_replica_of(gone, NULL);
    int one = 1;
    assert_true(hl_wait_until(online_is, &one, hl_widen(5000)));
    let_count_age(counted_at);
    /* A single attempt: nothing could retry a refusal. */
    assert_int_equal(hilock_lock_try_acquire(l, 0, 10000), HILOCK_OK);
    /* The sentinels were asked for their word, and gave it. */
    assert_true(hl_sentinel_answers(c->sentinel) > answers);
    assert_int_equal(hilock_lock_release(l), HILOCK_OK);

    hl_replica_of(gone, master);
    assert_true(hl_wait_until(all_online, NULL, hl_widen(30000)));
    hilock_lock_destroy(l);
    hilock_client_destroy(c);
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
    return hl_raw_exists(t->on, t->name) == 1;
}

/* The recipe of a takeover the old master has not heard of yet: its
 * replicas leave it for a new master, which the sentinels now name,
 * while the old master still takes writes and the client still writes
 * there.  The old master reports no replica; a grant judged by that count
 * would be sent with no WAIT and count.  It must fail instead, and the
 * client must follow the sentinels to the new master. */
static void test_replaced_master_grants_nothing(void **state)
{
    (void)state;
    hilock_client *c = hl_sentinel_client(group, HILOCK_ACK_MAJORITY, 300, 0);
    const char *name = "suspect-replaced";
    hilock_lock *l;
    assert_int_equal(hilock_lock_create(&l, c, name),
                     HILOCK_OK);
    /* With a wait: on a busy machine a WAIT may fall short of its 300 ms
     * before the replicas are the cause of anything. */
    assert_int_equal(hilock_lock_try_acquire(l, hl_widen(10000), 10000),
                     HILOCK_OK);
    assert_int_equal(hilock_lock_release(l), HILOCK_OK);
    int64_t counted_at = hl_now_ms();

    hl_redis_server *next = hl_redis_replicated_node(group, 1);
    hl_redis_server *other = hl_redis_replicated_node(group, 2);
    hl_replica_of(next, NULL);
    hl_replica_of(other, next);
    int none = 0;
    assert_true(hl_wait_until(online_is, &none, hl_widen(5000)));
    sentinels_name(next);
    let_count_age(counted_at);

    int rc = hilock_lock_try_acquire(l, 0, 10000);
    if (rc != HILOCK_ENOACK)
        fail_msg("a grant by the replaced master: %s (%s)",
                 hilock_errname(rc), hilock_last_error());

    acquire_try t = {.lock = l, .on = next, .name = name};
    assert_true(hl_wait_until(acquired_on, &t, hl_widen(10000)));
    assert_int_equal(hilock_lock_release(l), HILOCK_OK);
    hilock_lock_destroy(l);
    hilock_client_destroy(c);
}

typedef struct late_acquire {
    atomic_bool done;
    int rc;
    char detail[512];
} late_acquire;

static void on_late_acquire(hilock_lock *lock, int status,
                            const hilock_acquired *acquired, void *data)
{
    (void)lock, (void)acquired;
    late_acquire *a = data;
    a->rc = status;
    snprintf(a->detail, sizeof a->detail, "%s", hilock_last_error());
    atomic_store(&a->done, true);
}

/* Under replicas=none nothing is waited for, but a master that was
 * paused while the sentinels came to name another runs the requests
 * queued on it when it resumes, and answers grants the new master never
 * saw.  Such a late answer counts only once the sentinels still name the
 * master that gave it: here they do not, and the grant fails.  Two of
 * the sentinels are paused with the master, as if cut off with it, so
 * that the rounds the client asks while the master is silent hear one
 * sentinel name the new master, too few to move the client, and the
 * late answer is what the client has to judge.  Runs after the case
 * above, with the sentinels on node 1. */
static void test_late_grant_of_a_replaced_master_does_not_count(void **state)
{
    (void)state;
    hl_redis_server *paused = hl_redis_replicated_node(group, 1);
    hl_redis_server *next = hl_redis_replicated_node(group, 2);
    hilock_client *c = hl_sentinel_client(group, HILOCK_ACK_NONE, 300, 20000);
    const char *name = "suspect-late";
    hilock_lock *l;
    assert_int_equal(hilock_lock_create(&l, c, name),
                     HILOCK_OK);
    /* The client is on node 1, the master the sentinels name now. */
    assert_int_equal(hilock_lock_try_acquire(l, hl_widen(10000), 10000),
                     HILOCK_OK);
    assert_true(hl_raw_exists(paused, name) == 1);
    assert_int_equal(hilock_lock_release(l), HILOCK_OK);

    hl_replica_of(next, NULL);
    sentinels_name(next);
    hl_redis_server *cut_off[] = {hl_redis_replicated_sentinel(group, 0),
                                  hl_redis_replicated_sentinel(group, 1)};
    hl_fixture_pause(cut_off[0]);
    hl_fixture_pause(cut_off[1]);
    hl_fixture_pause(paused);
    late_acquire a = {0};
    assert_int_equal(hilock_lock_acquire_async(l, 7, 0, 10000, 0,
                                               on_late_acquire, &a, NULL),
                     HILOCK_OK);
    /* The pause is the fault: longer than the ack timeout and the
     * lateness margin, shorter than the command timeout. */
    hl_sleep_ms(300 + HL_ACK_LATE_MS + 800);
    hl_fixture_resume(paused);
    bool done = hl_wait_flag(&a.done, hl_widen(10000));
    hl_fixture_resume(cut_off[0]);
    hl_fixture_resume(cut_off[1]);
    assert_true(done);
    if (a.rc != HILOCK_ENOACK)
        fail_msg("a late grant by the replaced master: %s (%s)",
                 hilock_errname(a.rc), a.detail);
    printf("# the late grant: %s\n", a.detail);

    /* Asked again with every sentinel back, the client follows them, and
     * the lock is free there. */
    hl_fixture_client_kill(paused, "normal");
    acquire_try t = {.lock = l, .on = next, .name = name};
    assert_true(hl_wait_until(acquired_on, &t, hl_widen(10000)));
    assert_int_equal(hilock_lock_release(l), HILOCK_OK);
    hilock_lock_destroy(l);
    hilock_client_destroy(c);
}

/* A failover under way: the master the client is on has lost its
 * replica, one sentinel names another master, the others still name
 * this one.  A round that took the first answer would vouch for the old
 * master, whose count of 0 then asks for no acknowledgement; the
 * sentinels disagree, so nobody is vouched for and the grant fails.  The
 * sentinel that knows is paused while the others answer, as one that
 * heard of the failover last would be.  Runs after the cases above, with
 * every sentinel on node 2. */
static void test_sentinels_that_disagree_vouch_for_nobody(void **state)
{
    (void)state;
    hl_redis_server *old = hl_redis_replicated_node(group, 2);
    hl_redis_server *next = hl_redis_replicated_node(group, 0);
    hl_replica_of(next, old);
    hl_online_probe one = {.of = old, .want = 1};
    assert_true(hl_wait_until(hl_online_is, &one, hl_widen(30000)));
    hilock_client *c = hl_sentinel_client(group, HILOCK_ACK_MAJORITY, 300, 0);
    const char *name = "suspect-disagree";
    hilock_lock *l;
    assert_int_equal(hilock_lock_create(&l, c, name),
                     HILOCK_OK);
    assert_int_equal(hilock_lock_try_acquire(l, hl_widen(10000), 10000),
                     HILOCK_OK);
    assert_true(hl_raw_exists(old, name) == 1);
    assert_int_equal(hilock_lock_release(l), HILOCK_OK);
    int64_t counted_at = hl_now_ms();

    hl_replica_of(next, NULL);
    hl_online_probe none = {.of = old, .want = 0};
    assert_true(hl_wait_until(hl_online_is, &none, hl_widen(5000)));
    hl_sentinel_names(group, 0, next);
    let_count_age(counted_at);

    hl_redis_server *knows = hl_redis_replicated_sentinel(group, 0);
    hl_fixture_pause(knows);
    late_acquire a = {0};
    assert_int_equal(hilock_lock_acquire_async(l, 9, 0, 10000, 0,
                                               on_late_acquire, &a, NULL),
                     HILOCK_OK);
    /* The fault: the sentinel that knows is silent past the ack timeout
     * while the others answer, and well within the connect timeout. */
    hl_sleep_ms(400);
    hl_fixture_resume(knows);
    assert_true(hl_wait_flag(&a.done, hl_widen(10000)));
    if (a.rc != HILOCK_ENOACK || strstr(a.detail, "different masters") == NULL)
        fail_msg("a grant vouched for by sentinels that disagree: %s (%s)",
                 hilock_errname(a.rc), a.detail);
    hilock_lock_destroy(l);
    hilock_client_destroy(c);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_replica_leaving_is_vouched_for),
        cmocka_unit_test(test_replaced_master_grants_nothing),
        cmocka_unit_test(test_late_grant_of_a_replaced_master_does_not_count),
        cmocka_unit_test(test_sentinels_that_disagree_vouch_for_nobody),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
