/* A master that stops answering while the sentinels name another, and no
 * announcement reaches the client: the switch is made by hand (a replica
 * promoted with REPLICAOF NO ONE, the sentinels moved with SENTINEL
 * REMOVE and MONITOR, which announce nothing), and the old master is
 * paused with a request written to it.  Its link stays up, so only the
 * request's silence can tell the client to ask the sentinels; the
 * request must end with HILOCK_EIO when the client moves, not at its
 * command timeout.  Its own group: the case changes its roles. */
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

#include <setjmp.h>
#include <cmocka.h>

#include "hilock/hilock.h"
#include "support/fixture.h"
#include "support/loop_call.h"
#include "support/raw_reads.h"
#include "support/replicated_util.h"

/* ctest-timeout: 120 */

/* Far beyond the move: a request that waits it out was never let go. */
#define COMMAND_TIMEOUT_MS 20000

static hl_redis_replicated *group;

static int setup(void **state)
{
    (void)state;
    group = hl_fixture_replicated();
    if (group == NULL)
        return -1;
    hl_online_probe p = {.of = hl_redis_replicated_node(group, 0),
                         .want = 2};
    return hl_wait_until(hl_online_is, &p, hl_widen(30000)) ? 0 : -1;
}

static int teardown(void **state)
{
    (void)state;
    hl_redis_replicated_stop(group);
    return 0;
}

typedef struct answer {
    atomic_bool done;
    atomic_int status;
} answer;

static void on_answer(hilock_client *c, int status, hilock_reply *reply,
                      void *data)
{
    (void)c;
    answer *a = data;
    hilock_reply_free(reply);
    atomic_store(&a->status, status);
    atomic_store(&a->done, true);
}

static void test_a_silent_master_lets_go_when_the_sentinels_name_another(
    void **state)
{
    (void)state;
    hl_redis_server *old = hl_redis_replicated_node(group, 0);
    hl_redis_server *next = hl_redis_replicated_node(group, 1);
    hl_redis_server *other = hl_redis_replicated_node(group, 2);
    hilock_client *c =
        hl_sentinel_client(group, HILOCK_ACK_NONE, 0, COMMAND_TIMEOUT_MS);

    const char *name = "silent-master";
    hilock_lock *l;
    assert_int_equal(hilock_lock_create(&l, c, name),
                     HILOCK_OK);
    assert_int_equal(hilock_lock_try_acquire(l, 0, 10000), HILOCK_OK);
    assert_true(hl_raw_exists(old, name) == 1);
    assert_int_equal(hilock_lock_release(l), HILOCK_OK);

    /* next takes over with the other replica, and every sentinel names
     * it; nobody announces it. */
    hl_replica_of(next, NULL);
    hl_replica_of(other, next);
    hl_online_probe one = {.of = next, .want = 1};
    assert_true(hl_wait_until(hl_online_is, &one, hl_widen(30000)));
    for (size_t i = 0; i < hl_redis_replicated_sentinels(group); i++)
        hl_sentinel_names(group, i, next);

    hl_fixture_pause(old);
    hl_moves_probe m = {c, hl_client_master_moves(c)};
    answer a = {false, 0};
    const char *argv[] = {"INCR", "silent-counter"};
    assert_int_equal(
        hilock_client_command_async(c, 2, argv, NULL, on_answer, &a),
        HILOCK_OK);
    bool done = hl_wait_flag(&a.done, hl_widen(COMMAND_TIMEOUT_MS + 10000));
    bool moved = hl_client_has_moved(&m);
    hl_fixture_resume(old);
    assert_true(done);
    printf("# the request to the paused master: %s; the client moved: %s\n",
           hilock_errname(atomic_load(&a.status)), moved ? "yes" : "no");
    assert_int_equal(atomic_load(&a.status), HILOCK_EIO);
    assert_true(moved);

    /* Locks are taken on the master the sentinels name. */
    assert_int_equal(hilock_lock_try_acquire(l, hl_widen(10000), 10000),
                     HILOCK_OK);
    assert_true(hl_raw_exists(next, name) == 1);
    assert_int_equal(hilock_lock_release(l), HILOCK_OK);
    hilock_lock_destroy(l);
    hilock_client_destroy(c);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(
            test_a_silent_master_lets_go_when_the_sentinels_name_another),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
