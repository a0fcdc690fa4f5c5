/* A master Sentinel named turns into a replica under a client (an
 * operator's REPLICAOF, which no sentinel follows with a CLIENT KILL):
 * the client's connection stays up, and each lock write meets READONLY.
 * An acquire that may wait asks the sentinels where the master is and
 * tries again while its wait lasts, so it is granted once a master is
 * back; one that may not wait says HILOCK_EREADONLY at once.  Every
 * other write (a release, a count down, permits added, a force release)
 * is made again on the master within the command timeout.  Its own
 * group: the demotion empties the master's data. */
/* ctest-timeout: 300 */
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
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

/* The port of the master the first sentinel names now. */
static int named_port(void)
{
    char reply[256], host[64], port[16];
    hl_redis_server *sentinel = hl_redis_replicated_sentinel(group, 0);
    if (hl_raw_cmd(sentinel, reply, sizeof reply, "SENTINEL",
                   "get-master-addr-by-name",
                   hl_redis_replicated_master_name(group), (char *)NULL) != '*')
        return -1;
    const char *p = reply;
    if (hl_raw_parse_array(&p) != 2 ||
        hl_raw_parse_bulk(&p, host, sizeof host) < 0 ||
        hl_raw_parse_bulk(&p, port, sizeof port) < 0)
        return -1;
    return atoi(port);
}

/* Every key with name in it on from, copied to to (MIGRATE COPY). */
static void copy_keys(hl_redis_server *from, const hl_redis_server *to,
                      const char *name)
{
    char pattern[64], reply[HL_RAW_REPLY_CAP], key[128], port[16];
    snprintf(pattern, sizeof pattern, "*%s*", name);
    snprintf(port, sizeof port, "%d", hl_redis_server_port(to));
    assert_int_equal(hl_raw_cmd(from, reply, sizeof reply, "KEYS", pattern,
                                (char *)NULL),
                     '*');
    const char *p = reply;
    long n = hl_raw_parse_array(&p);
    assert_true(n > 0);
    for (long i = 0; i < n; i++) {
        assert_true(hl_raw_parse_bulk(&p, key, sizeof key) >= 0);
        char ok[16];
        assert_int_equal(hl_raw_cmd(from, ok, sizeof ok, "MIGRATE",
                                    "127.0.0.1", port, key, "0", "5000",
                                    "COPY", "REPLACE", (char *)NULL),
                         '+');
    }
}

/* How an async release ended. */
typedef struct released {
    atomic_bool done;
    int status;
    char why[256];
} released;

static void released_with(released *r, int status)
{
    r->status = status;
    snprintf(r->why, sizeof r->why, "%s", hilock_last_error());
    atomic_store(&r->done, true);
}

static void on_lock_released(hilock_lock *lock, int status, int64_t value,
                             void *data)
{
    (void)lock, (void)value;
    released_with(data, status);
}

static void on_permits_released(hilock_semaphore *sem, int status,
                                int64_t value, void *data)
{
    (void)sem, (void)value;
    released_with(data, status);
}

/* Starts the release under test, to report to r. */
typedef void release_fn(void *what, released *r);

/* The master of the group turns into a replica of a node given the keys
 * of name it has, so that the master it turns back into has what the
 * release lets go.  The release starts while it is a replica, and the
 * master comes back once the release has been refused twice.  The
 * release must end with HILOCK_OK: having waited for the master, or on
 * another master the sentinels promoted meanwhile (a loaded machine can
 * miss their down-after), which it found; or, when they named that
 * master while a retry was on its way, with HILOCK_EIO; never with
 * HILOCK_EREADONLY.
 * Says where the release ran. */
typedef enum ran_on {
    RAN_ON_THE_MASTER,   /* the master, back, the sentinels' still */
    RAN_ON_THE_PROMOTED, /* another master the sentinels named, early */
    FAILED_OVER_AFTER,   /* the master, back, but the sentinels name
                          * another one by the end */
    MOVED_IN_FLIGHT      /* the sentinels named another master while a
                          * retry was on its way to the demoted one,
                          * which may have taken it back in time:
                          * HILOCK_EIO, as for any request in flight on
                          * a master left behind */
} ran_on;

static ran_on release_across_demotion(hl_redis_server *master,
                                    const char *name, release_fn *release,
                                    void *what)
{
    hl_redis_server *elsewhere = hl_fixture_plain();
    assert_non_null(elsewhere);
    copy_keys(master, elsewhere, name);
    hl_replica_of(master, elsewhere);
    hl_online_probe online = {elsewhere, 1};
    if (!hl_wait_until(hl_online_is, &online, hl_widen(15000)))
        fail_msg("the demoted master never synced");

    long long before = hl_fixture_errors(master, "READONLY");
    released r = {.status = -1};
    release(what, &r);
    refusals more = {master, before + 2};
    bool refused = hl_wait_until(refused_enough, &more, hl_widen(10000));
    bool early = atomic_load(&r.done);
    int named = named_port();
    hl_replica_of(master, NULL);
    assert_true(hl_wait_flag(&r.done, hl_widen(30000)));
    if (r.status == HILOCK_EIO && strstr(r.why, "the master moved") != NULL) {
        hl_redis_server_stop(elsewhere);
        return MOVED_IN_FLIGHT;
    }
    if (r.status != HILOCK_OK)
        fail_msg("release: %s: %s", hilock_errname(r.status), r.why);
    if (early && named == hl_redis_server_port(master))
        fail_msg("the release ended while the master was a replica");
    if (!early && !refused)
        fail_msg("the release never met the demoted master");
    hl_redis_server_stop(elsewhere);
    if (early)
        return RAN_ON_THE_PROMOTED;
    int now = named_port();
    return now != -1 && now != hl_redis_server_port(master)
               ? FAILED_OVER_AFTER
               : RAN_ON_THE_MASTER;
}

/* What a release let go is let go: on the master at once; on the
 * master the sentinels promoted once the client has followed them there.
 * A release that ran on the old master before the sentinels made it the
 * new one's replica is dropped with its data: under replicas=none (these
 * cases' policy) a failover may lose any write the replicas did not
 * have, so there only the release's answer is the case's to check. */
static void expect_let_go(ran_on where, bool (*check)(void *), void *what,
                          const char *say)
{
    if (where == FAILED_OVER_AFTER) {
        print_message("    failed over after the release: its answer is "
                      "checked, not what the promoted master has\n");
        return;
    }
    if (where == MOVED_IN_FLIGHT) {
        print_message("    failed over while the release was in flight: "
                      "HILOCK_EIO, whose outcome is unknown\n");
        return;
    }
    if (where == RAN_ON_THE_PROMOTED
            ? !hl_wait_until(check, what, hl_widen(30000))
            : !check(what))
        fail_msg("%s after the release", say);
}

static bool lock_free(void *l)
{
    bool locked = true;
    return hilock_lock_is_locked(l, &locked) == HILOCK_OK && !locked;
}

static bool permit_back(void *s)
{
    int64_t left = -1;
    return hilock_semaphore_available(s, &left) == HILOCK_OK && left == 1;
}

/* The group's master, once the demotion before has left its replicas
 * linked again, and a client of its sentinels with a command timeout
 * the release cases can wait within. */
static hilock_client *client_of_settled_group(hl_redis_server **master)
{
    *master = hl_redis_replicated_wait_master(group, NULL, hl_widen(30000));
    assert_non_null(*master);
    hilock_client *c =
        hl_sentinel_client(group, HILOCK_ACK_NONE, 0, hl_widen(20000));
    assert_non_null(c);
    return c;
}

static void release_lock(void *what, released *r)
{
    assert_int_equal(hilock_lock_release_async(what, hilock_thread_owner(),
                                               on_lock_released, r),
                     HILOCK_OK);
}

/* A release refused by the demoted master is made again while the
 * command timeout lasts, and frees the lock once a master is back,
 * rather than telling the caller HILOCK_EREADONLY and leaving the lock
 * held. */
static void test_release_waits_out_a_demotion(void **state)
{
    (void)state;
    hl_redis_server *master;
    hilock_client *c = client_of_settled_group(&master);
    hilock_lock *l = NULL;
    assert_int_equal(hilock_lock_create(&l, c, "demoted-release"),
                     HILOCK_OK);
    assert_int_equal(hilock_lock_try_acquire(l, 0, 60000), HILOCK_OK);
    ran_on where =
        release_across_demotion(master, "demoted-release", release_lock, l);
    expect_let_go(where, lock_free, l, "the lock is still held");
    hilock_lock_destroy(l);
    hilock_client_destroy(c);
}

static void release_permit(void *what, released *r)
{
    assert_int_equal(
        hilock_semaphore_release_async(what, 1, on_permits_released, r),
        HILOCK_OK);
}

/* The same for a plain semaphore's release, whose permit would otherwise
 * stay taken for good. */
static void test_semaphore_release_waits_out_a_demotion(void **state)
{
    (void)state;
    hl_redis_server *master;
    hilock_client *c = client_of_settled_group(&master);
    hilock_semaphore *s = NULL;
    assert_int_equal(hilock_semaphore_create(&s, c, "demoted-permits"),
                     HILOCK_OK);
    assert_int_equal(hilock_semaphore_try_set(s, 1, NULL), HILOCK_OK);
    assert_int_equal(hilock_semaphore_try_acquire(s, 1, 0), HILOCK_OK);
    ran_on where = release_across_demotion(master, "demoted-permits",
                                           release_permit, s);
    expect_let_go(where, permit_back, s, "the permit is not back");
    hilock_semaphore_destroy(s);
    hilock_client_destroy(c);
}

static void on_latch_counted(hilock_latch *latch, int status, int64_t value,
                             void *data)
{
    (void)latch, (void)value;
    released_with(data, status);
}

static void count_down(void *what, released *r)
{
    assert_int_equal(hilock_latch_count_down_async(what, on_latch_counted, r),
                     HILOCK_OK);
}

static bool latch_open(void *l)
{
    int64_t count = -1;
    return hilock_latch_count(l, &count) == HILOCK_OK && count == 0;
}

/* A latch's count down too: lost, it would keep the latch shut for
 * good; told HILOCK_EREADONLY, its caller would have to know whether to
 * count again. */
static void test_latch_count_down_waits_out_a_demotion(void **state)
{
    (void)state;
    hl_redis_server *master;
    hilock_client *c = client_of_settled_group(&master);
    hilock_latch *l = NULL;
    assert_int_equal(hilock_latch_create(&l, c, "demoted-latch"), HILOCK_OK);
    bool set = false;
    assert_int_equal(hilock_latch_try_set_count(l, 1, &set), HILOCK_OK);
    assert_true(set);
    ran_on where = release_across_demotion(master, "demoted-latch",
                                           count_down, l);
    expect_let_go(where, latch_open, l, "the latch is still shut");
    hilock_latch_destroy(l);
    hilock_client_destroy(c);
}

static void add_permit(void *what, released *r)
{
    assert_int_equal(
        hilock_semaphore_add_async(what, 1, on_permits_released, r),
        HILOCK_OK);
}

/* A semaphore's other writes as well: permits added while the master is
 * demoted are added once a master takes them. */
static void test_semaphore_add_waits_out_a_demotion(void **state)
{
    (void)state;
    hl_redis_server *master;
    hilock_client *c = client_of_settled_group(&master);
    hilock_semaphore *s = NULL;
    assert_int_equal(hilock_semaphore_create(&s, c, "demoted-add"),
                     HILOCK_OK);
    assert_int_equal(hilock_semaphore_try_set(s, 1, NULL), HILOCK_OK);
    assert_int_equal(hilock_semaphore_try_acquire(s, 1, 0), HILOCK_OK);
    ran_on where =
        release_across_demotion(master, "demoted-add", add_permit, s);
    expect_let_go(where, permit_back, s, "the permit was not added");
    hilock_semaphore_destroy(s);
    hilock_client_destroy(c);
}

static void force_release(void *what, released *r)
{
    assert_int_equal(
        hilock_lock_force_release_async(what, on_lock_released, r),
        HILOCK_OK);
}

/* And a lock's force release, an operator's way out of a stuck hold. */
static void test_force_release_waits_out_a_demotion(void **state)
{
    (void)state;
    hl_redis_server *master;
    hilock_client *c = client_of_settled_group(&master);
    hilock_lock *l = NULL;
    assert_int_equal(hilock_lock_create(&l, c, "demoted-force"), HILOCK_OK);
    assert_int_equal(hilock_lock_try_acquire(l, 0, 60000), HILOCK_OK);
    ran_on where =
        release_across_demotion(master, "demoted-force", force_release, l);
    expect_let_go(where, lock_free, l, "the lock is still held");
    hilock_lock_destroy(l);
    hilock_client_destroy(c);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_acquire_waits_out_a_demotion),
        cmocka_unit_test(test_release_waits_out_a_demotion),
        cmocka_unit_test(test_semaphore_release_waits_out_a_demotion),
        cmocka_unit_test(test_latch_count_down_waits_out_a_demotion),
        cmocka_unit_test(test_semaphore_add_waits_out_a_demotion),
        cmocka_unit_test(test_force_release_waits_out_a_demotion),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
