/* The reentrant lock's release carrying the attempt of its client's next
 * waiter (core/engine/ride.h) against a real redis-server: one script
 * hands the lock over inside a client, where a release and the woken
 * waiter's attempt were two; a rider whose client is not next in the
 * server's line keeps the line's order; and a ridden release that gets
 * no answer leaves the rider holding exactly once. */
/* ctest-timeout: 120 */
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <setjmp.h>
#include <cmocka.h>

#include "hilock/client.h"
#include "hilock/error.h"
#include "hilock/lock.h"
#include "support/fixture.h"
#include "support/handoff.h"
#include "support/lock_helpers.h"
#include "support/raw_reads.h"

/* Each test's server; see hl_lock_fixture. */
static hl_lock_fixture fx;

#define OWNER 7
/* Owners of a handle whose calling thread holds: no thread's. */
#define RIDER 1007
#define RIDER2 1008

static void field_of(hilock_client *c, uint64_t owner, char *out, size_t cap)
{
    snprintf(out, cap, "%s:%llu", hilock_client_id(c),
             (unsigned long long)owner);
}

/* Owner o's async acquire on lock of client c, with lease_ms, recorded in
 * rec; returns once every acquire pending on lock (n) waits idle. */
static void wait_idle(hilock_client *c, hilock_lock *lock, uint64_t o,
                      int64_t lease_ms, hl_acquire_rec *rec, int n)
{
    hl_acquire_rec_init(rec, c);
    assert_status(hilock_lock_acquire_async(lock, o, HILOCK_WAIT_FOREVER,
                                            lease_ms, 0, hl_record_acquire,
                                            rec, NULL),
                  HILOCK_OK);
    hl_expect_idle(c, lock, n);
}

/* Owner o of lock gives its hold back, and the release says it did. */
static void release_owner(hilock_lock *lock, uint64_t o)
{
    hl_value_rec rel;

    hl_value_rec_init(&rel);
    assert_status(hilock_lock_release_async(lock, o, hl_record_value, &rel),
                  HILOCK_OK);
    assert_int_equal(hl_expect_value(&rel, HILOCK_OK), 0);
}

static void expect_lease_at_least(const char *name, long long ms)
{
    long long ttl = hl_raw_pttl(fx.server, name);
    if (ttl <= ms)
        fail_msg("the hold lasts %lld ms on the server, expected more than "
                 "%lld",
                 ttl, ms);
}

/* Three owners of one handle take turns: each release that frees the lock
 * carries the next waiter's attempt, which takes it in the same script.
 * Before, the release and the woken waiter's attempt, in the same write,
 * were two scripts.  The second waiter is not woken by the first hand-over
 * (the rider took the lock, and its release hands it on): two hand-overs,
 * two scripts.  For a lease of the caller's and for the watchdog's. */
static void expect_releases_carry_attempts(const char *name, int64_t lease_ms)
{
    hilock_client *c = hl_new_client(fx.server, NULL);
    hilock_lock *l = hl_new_lock(c, name);
    static hl_acquire_rec first, second;
    char field[64], field2[64], line[128];

    field_of(c, RIDER, field, sizeof field);
    field_of(c, RIDER2, field2, sizeof field2);
    snprintf(line, sizeof line, "hilock_lock_line:{%s}", name);
    assert_status(hilock_lock_try_acquire(l, 0, 30000), HILOCK_OK);
    wait_idle(c, l, RIDER, lease_ms, &first, 1);
    wait_idle(c, l, RIDER2, lease_ms, &second, 2);

    long long scripts = hl_scripts_run(fx.server);
    assert_status(hilock_lock_release(l), HILOCK_OK);
    assert_status(hl_expect_acquire(&first), HILOCK_OK);
    assert_int_equal(first.got.hold_count, 1);
    assert_int_equal(hl_scripts_run(fx.server) - scripts, 1);
    assert_int_equal(hl_hold_of(fx.server, name, field), 1);
    expect_lease_at_least(name, 20000);
    assert_int_equal(atomic_load(&second.calls), 0);

    release_owner(l, RIDER);
    assert_status(hl_expect_acquire(&second), HILOCK_OK);
    assert_int_equal(hl_scripts_run(fx.server) - scripts, 2);
    assert_int_equal(hl_hold_of(fx.server, name, field), 0);
    assert_int_equal(hl_hold_of(fx.server, name, field2), 1);
    expect_lease_at_least(name, 20000);
    /* One client contending with itself never takes a place in line. */
    assert_int_equal(hl_raw_exists(fx.server, line), 0);

    release_owner(l, RIDER2);
    assert_int_equal(hl_raw_exists(fx.server, name), 0);
    hl_free_lock(l);
    hl_free_client(c);
}

static void test_releases_carry_the_next_attempts(void **state)
{
    (void)state;
    expect_releases_carry_attempts("ride", 30000);
}

static void test_releases_carry_watchdog_attempts(void **state)
{
    (void)state;
    expect_releases_carry_attempts("ride-watchdog", HILOCK_LEASE_WATCHDOG);
}

/* Another client waits in the server's line: the release hands the lock
 * to it, and the rider's attempt, refused in the same script, puts its
 * client in line behind it.  The rider takes the lock when the other
 * client lets go, not before. */
static void test_rider_behind_another_client(void **state)
{
    hilock_client *c = hl_new_client(fx.server, NULL);
    hilock_client *o = hl_new_client(fx.server, NULL);
    hilock_lock *l = hl_new_lock(c, "ride-behind");
    hilock_lock *lo = hl_new_lock(o, "ride-behind");
    static hl_acquire_rec other, rider;
    char other_field[64], rider_field[64], first[64];

    (void)state;
    field_of(o, OWNER, other_field, sizeof other_field);
    field_of(c, RIDER, rider_field, sizeof rider_field);
    assert_status(hilock_lock_try_acquire(l, 0, 30000), HILOCK_OK);
    wait_idle(o, lo, OWNER, 30000, &other, 1);
    wait_idle(c, l, RIDER, 30000, &rider, 1);

    assert_status(hilock_lock_release(l), HILOCK_OK);
    assert_status(hl_expect_acquire(&other), HILOCK_OK);
    hl_expect_idle(c, l, 1);
    assert_int_equal(atomic_load(&rider.calls), 0);
    assert_int_equal(hl_hold_of(fx.server, "ride-behind", other_field), 1);
    assert_int_equal(hl_hold_of(fx.server, "ride-behind", rider_field), 0);
    assert_true(hl_raw_bulk(fx.server, first, sizeof first, "LINDEX",
                            "hilock_lock_line:{ride-behind}", "0",
                            (char *)NULL));
    assert_string_equal(first, hilock_client_id(c));

    release_owner(lo, OWNER);
    assert_status(hl_expect_acquire(&rider), HILOCK_OK);
    assert_int_equal(hl_hold_of(fx.server, "ride-behind", rider_field), 1);
    assert_int_equal(hl_hold_of(fx.server, "ride-behind", other_field), 0);
    release_owner(l, RIDER);
    assert_int_equal(hl_raw_exists(fx.server, "ride-behind"), 0);
    hl_free_lock(lo);
    hl_free_lock(l);
    hl_free_client(o);
    hl_free_client(c);
}

/* A release carrying the rider's attempt is written to a stopped server
 * and gets no answer within the command timeout: the release says
 * HILOCK_EINDOUBT, and the rider's attempt, of unknown outcome, is
 * reconciled and made again.  Once the server runs again the rider
 * holds the lock exactly once. */
static void test_ridden_release_without_answer(void **state)
{
    const hl_client_opts opts = {.command_timeout_ms = hl_widen(300)};
    hilock_client *c = hl_new_client(fx.server, &opts);
    hilock_lock *l = hl_new_lock(c, "ride-stopped");
    static hl_acquire_rec rider;
    char field[64];

    (void)state;
    field_of(c, RIDER, field, sizeof field);
    assert_status(hilock_lock_try_acquire(l, 0, 30000), HILOCK_OK);
    wait_idle(c, l, RIDER, 30000, &rider, 1);

    hl_fixture_pause(fx.server);
    int rc = hilock_lock_release(l);
    hl_fixture_resume(fx.server);
    assert_status(rc, HILOCK_EINDOUBT);
    assert_status(hl_expect_acquire(&rider), HILOCK_OK);
    assert_int_equal(rider.got.hold_count, 1);
    assert_int_equal(hl_hold_of(fx.server, "ride-stopped", field), 1);
    assert_int_equal(
        hl_raw_int(fx.server, "HLEN", "ride-stopped", (char *)NULL), 1);

    release_owner(l, RIDER);
    assert_int_equal(hl_raw_exists(fx.server, "ride-stopped"), 0);
    hl_free_lock(l);
    hl_free_client(c);
}

int main(void)
{
#define T(fn) hl_lock_test(fn, &fx)
    const struct CMUnitTest tests[] = {
        T(test_releases_carry_the_next_attempts),
        T(test_releases_carry_watchdog_attempts),
        T(test_rider_behind_another_client),
        T(test_ridden_release_without_answer),
    };
#undef T
    return cmocka_run_group_tests(tests, NULL, NULL);
}
