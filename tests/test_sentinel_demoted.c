/* A master Sentinel named turns into a replica under a client (an
 * operator's REPLICAOF, which no sentinel follows with a CLIENT KILL):
 * the client's connection stays up, and each lock write meets READONLY.
 * An acquire that may wait asks the sentinels where the master is and
 * tries again while its wait lasts, so it is granted once a master is
 * back; one that may not wait says HILOCK_EREADONLY at once.  Its own
 * group: the demotion empties the master's data. */
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

#include <setjmp.h>
#include <cmocka.h>

#include "hilock/hilock.h"
#include "support/fixture.h"
#include "support/raw_reads.h"
#include "support/replicated_util.h"

static hl_redis_replicated *group;

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

typedef struct acquired {
    atomic_bool done;
    int status;
} acquired;

static void on_acquired(hilock_lock *lock, int status,
                        const hilock_acquired *a, void *data)
{
    (void)lock, (void)a;
    acquired *r = data;
    r->status = status;
    atomic_store(&r->done, true);
}

typedef struct refusals {
    hl_redis_server *node;
    long long want;
} refusals;

static bool refused_enough(void *arg)
{
    refusals *r = arg;
    return hl_fixture_errors(r->node, "READONLY") >= r->want;
}

static void test_acquire_waits_out_a_demotion(void **state)
{
    (void)state;
    hl_redis_server *master = hl_redis_replicated_master(group);
    assert_non_null(master);
    hilock_options *o = NULL;
    hilock_client *c = NULL;
    assert_int_equal(hilock_options_create(&o), HILOCK_OK);
    assert_int_equal(
        hilock_options_set_url(o, hl_redis_replicated_sentinel_url(group)),
        HILOCK_OK);
    assert_int_equal(hilock_options_set_replica_ack(o, HILOCK_ACK_NONE),
                     HILOCK_OK);
    assert_int_equal(hilock_client_create(&c, o), HILOCK_OK);
    hilock_options_free(o);
    hilock_lock *l = NULL;
    assert_int_equal(hilock_lock_create(&l, c, "demoted"), HILOCK_OK);
    assert_int_equal(hilock_lock_try_acquire(l, 0, 10000), HILOCK_OK);
    assert_int_equal(hilock_lock_release(l), HILOCK_OK);

    hl_redis_server *elsewhere = hl_fixture_plain();
    assert_non_null(elsewhere);
    hl_replica_of(master, elsewhere);
    hl_online_probe online = {elsewhere, 1};
    if (!hl_wait_until(hl_online_is, &online, hl_widen(15000)))
        fail_msg("the demoted master never synced");

    /* No wait: the replica's word, at once. */
    long long before = hl_fixture_errors(master, "READONLY");
    assert_int_equal(hilock_lock_try_acquire(l, 0, 10000), HILOCK_EREADONLY);
    assert_non_null(strstr(hilock_last_error(), "replica"));

    acquired r = {.status = -1};
    assert_int_equal(hilock_lock_acquire_async(l, hilock_thread_owner(),
                                               hl_widen(30000), 10000, 0,
                                               on_acquired, &r, NULL),
                     HILOCK_OK);
    refusals more = {master, before + 3};
    bool refused = hl_wait_until(refused_enough, &more, hl_widen(15000));
    bool early = atomic_load(&r.done);
    hl_replica_of(master, NULL);
    assert_true(hl_wait_flag(&r.done, hl_widen(30000)));
    if (r.status != HILOCK_OK)
        fail_msg("acquire: %s: %s", hilock_errname(r.status),
                 hilock_last_error());
    assert_true(refused);
    assert_false(early);
    assert_int_equal(hilock_lock_release(l), HILOCK_OK);
    hilock_lock_destroy(l);
    hilock_client_destroy(c);
    hl_redis_server_stop(elsewhere);
}

typedef struct released {
    atomic_bool done;
    int status;
    char why[256];
} released;

static void on_released(hilock_lock *lock, int status, int64_t value,
                        void *data)
{
    (void)lock, (void)value;
    released *r = data;
    r->status = status;
    snprintf(r->why, sizeof r->why, "%s", hilock_last_error());
    atomic_store(&r->done, true);
}

/* A release refused by the demoted master is made again while the
 * command timeout lasts, and frees the lock once a master is back,
 * rather than telling the caller HILOCK_EREADONLY and leaving the lock
 * held.  The node it is demoted under has the hold, so that the master
 * it turns back into has it too. */
static void test_release_waits_out_a_demotion(void **state)
{
    (void)state;
    static const char name[] = "demoted-release";
    /* The demotion before leaves the replicas to link again. */
    hl_redis_server *master =
        hl_redis_replicated_wait_master(group, NULL, hl_widen(30000));
    assert_non_null(master);
    hilock_client *c =
        hl_sentinel_client(group, HILOCK_ACK_NONE, 0, hl_widen(20000));
    assert_non_null(c);
    hilock_lock *l = NULL;
    assert_int_equal(hilock_lock_create(&l, c, name), HILOCK_OK);
    assert_int_equal(hilock_lock_try_acquire(l, 0, 60000), HILOCK_OK);

    hl_redis_server *elsewhere = hl_fixture_plain();
    assert_non_null(elsewhere);
    char field[96];
    uint64_t owner = hilock_thread_owner();
    snprintf(field, sizeof field, "%s:%llu", hilock_client_id(c),
             (unsigned long long)owner);
    assert_int_equal(hl_raw_int(elsewhere, "HSET", name, field, "1",
                                (char *)NULL),
                     1);
    assert_int_equal(hl_raw_int(elsewhere, "PEXPIRE", name, "60000",
                                (char *)NULL),
                     1);
    hl_replica_of(master, elsewhere);
    hl_online_probe online = {elsewhere, 1};
    if (!hl_wait_until(hl_online_is, &online, hl_widen(15000)))
        fail_msg("the demoted master never synced");
    assert_int_equal(hl_raw_exists(master, name), 1);

    long long before = hl_fixture_errors(master, "READONLY");
    released r = {.status = -1};
    assert_int_equal(hilock_lock_release_async(l, owner, on_released, &r),
                     HILOCK_OK);
    refusals more = {master, before + 2};
    bool refused = hl_wait_until(refused_enough, &more, hl_widen(10000));
    bool early = atomic_load(&r.done);
    hl_replica_of(master, NULL);
    assert_true(hl_wait_flag(&r.done, hl_widen(30000)));
    if (early)
        fail_msg("the release ended while the master was a replica: %s: %s",
                 hilock_errname(r.status), r.why);
    assert_true(refused);
    if (r.status != HILOCK_OK)
        fail_msg("release: %s: %s", hilock_errname(r.status), r.why);
    assert_int_equal(hl_raw_exists(master, name), 0);
    hilock_lock_destroy(l);
    hilock_client_destroy(c);
    hl_redis_server_stop(elsewhere);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_acquire_waits_out_a_demotion),
        cmocka_unit_test(test_release_waits_out_a_demotion),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
