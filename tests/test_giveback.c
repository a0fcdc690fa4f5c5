/* Give-backs and reconciles remove only the grant they are about.  An
 * acquire that was cancelled while its attempt was in flight, or whose
 * attempt failed on the connection, must undo what that attempt did on
 * the server and nothing else: not a newer grant of the same owner, and
 * not by letting a second attempt of the same acquire slip past the
 * reconcile.  Each test makes the order of requests that used to erase or
 * leak a grant happen on a real server. */
/* ctest-timeout: 120 */
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
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
#include "support/lock_helpers.h"
#include "support/raw_reads.h"

/* Each test's server; see hl_lock_fixture. */
static hl_lock_fixture fx;

/* The count the server has for owner of client c on the lock called
 * name, read with a connection of the test's own (0: none). */
static long long server_count(hilock_client *c, const char *name,
                              uint64_t owner)
{
    char field[96], value[32];

    snprintf(field, sizeof field, "%s:%llu", hilock_client_id(c),
             (unsigned long long)owner);
    if (!hl_raw_bulk(fx.server, value, sizeof value, "HGET", name, field,
                     (char *)NULL))
        return 0;
    return atoll(value);
}

/* ---- a cancelled acquire's grant comes back after a newer one ---------- */

/* The server runs a cancelled acquire's attempt, then a newer acquire of
 * the same owner, which joins the first grant.  Giving the first grant
 * back must leave the newer one standing, and the newer acquire must be
 * told of exactly the one hold it has. */
static void test_cancelled_grant_spares_newer(void **state)
{
    hilock_client *c = hl_new_client(fx.server, NULL);
    hilock_client *other = hl_new_client(fx.server, NULL);
    hilock_lock *l = hl_new_lock(c, "giveback");
    hilock_lock *lo = hl_new_lock(other, "giveback");
    static hl_acquire_rec first, second;
    static hl_value_rec count, rel;
    uint64_t id = 0;

    (void)state;
    hl_acquire_rec_init(&first, c);
    hl_acquire_rec_init(&second, c);
    /* Both attempts wait in the server's socket while it sleeps, so the
     * cancel comes before the first attempt is answered. */
    hl_fixture_debug_sleep(fx.server, 0.3);
    assert_status(hilock_lock_acquire_async(l, 7, 0, HILOCK_LEASE_WATCHDOG,
                                            0, hl_record_acquire, &first,
                                            &id),
                  HILOCK_OK);
    assert_status(hilock_lock_cancel(l, id), HILOCK_OK);
    assert_status(hilock_lock_acquire_async(l, 7, 0, HILOCK_LEASE_WATCHDOG,
                                            0, hl_record_acquire, &second,
                                            NULL),
                  HILOCK_OK);
    assert_status(hl_expect_acquire(&first), HILOCK_ECANCELED);
    assert_status(hl_expect_acquire(&second), HILOCK_OK);
    assert_int_equal(second.got.hold_count, 1);
    /* A query on the same connection runs after any give-back the client
     * sent before it. */
    hl_value_rec_init(&count);
    assert_status(hilock_lock_hold_count_async(l, 7, hl_record_value,
                                               &count),
                  HILOCK_OK);
    assert_int_equal(hl_expect_value(&count, HILOCK_OK), 1);
    assert_int_equal(server_count(c, "giveback", 7), 1);
    /* The hold the client reported is one the server has. */
    assert_status(hilock_lock_try_acquire(lo, 0, 10000), HILOCK_EBUSY);
    hl_value_rec_init(&rel);
    assert_status(hilock_lock_release_async(l, 7, hl_record_value, &rel),
                  HILOCK_OK);
    assert_int_equal(hl_expect_value(&rel, HILOCK_OK), 0);
    assert_int_equal(hl_raw_exists(fx.server, "giveback"), 0);
    hl_free_lock(lo);
    hl_free_lock(l);
    hl_free_client(other);
    hl_free_client(c);
}

/* ---- a reconcile pending while the acquire is woken -------------------- */

/* Owner 2's acquire releases at once when it is granted, from inside its
 * callback, as a service that does a short piece of work would. */
typedef struct release_on_grant {
    hl_acquire_rec acq;
    hl_value_rec rel;
    uint64_t owner;
} release_on_grant;

static void release_at_once(hilock_lock *lock, int status,
                            const hilock_acquired *acquired, void *data)
{
    release_on_grant *r = data;

    if (status == HILOCK_OK &&
        hilock_lock_release_async(lock, r->owner, hl_record_value,
                                  &r->rel) != HILOCK_OK)
        r->rel.status = -2;
    hl_record_acquire(lock, status, acquired, &r->acq);
}

/* The attempt of a waiter rides in the same write as the release it
 * follows (hand-on), and both time out in a sleeping server, so the
 * waiter's outcome is unknown and a reconcile must be answered before it
 * attempts again.  The release's message, published when the server
 * wakes, wakes the waiter while that reconcile is still pending.  One
 * attempt may follow the reconcile, not two: two would both be granted,
 * the waiter would be told of one hold, and its release would leave the
 * other behind for the watchdog to keep forever. */
static void test_wake_during_reconcile_sends_no_second_attempt(void **state)
{
    const hl_client_opts opts = {
        .command_timeout_ms = hl_under_valgrind() ? 1500 : 200 };
    double sleep_s = hl_under_valgrind() ? 4.0 : 1.0;
    hilock_client *c = hl_new_client(fx.server, &opts);
    hilock_client *other = hl_new_client(fx.server, NULL);
    hilock_lock *l = hl_new_lock(c, "leak");
    hilock_lock *lo = hl_new_lock(other, "leak");
    static hl_acquire_rec holder;
    static hl_value_rec holder_rel;
    static release_on_grant waiter;

    (void)state;
    hl_acquire_rec_init(&holder, c);
    assert_status(hilock_lock_acquire_async(l, 1, 0, 30000, 0,
                                            hl_record_acquire, &holder,
                                            NULL),
                  HILOCK_OK);
    assert_status(hl_expect_acquire(&holder), HILOCK_OK);
    memset(&waiter, 0, sizeof waiter);
    hl_acquire_rec_init(&waiter.acq, c);
    hl_value_rec_init(&waiter.rel);
    waiter.owner = 2;
    assert_status(hilock_lock_acquire_async(l, 2, HILOCK_WAIT_FOREVER,
                                            HILOCK_LEASE_WATCHDOG, 0,
                                            release_at_once, &waiter, NULL),
                  HILOCK_OK);
    hl_expect_pending(c, l, 1);
    hl_fixture_debug_sleep(fx.server, sleep_s);
    hl_value_rec_init(&holder_rel);
    assert_status(hilock_lock_release_async(l, 1, hl_record_value,
                                            &holder_rel),
                  HILOCK_OK);
    hl_expect_value(&holder_rel, HILOCK_ETIMEDOUT);
    assert_status(hl_expect_acquire(&waiter.acq), HILOCK_OK);
    assert_int_equal(waiter.acq.got.hold_count, 1);
    /* Its one release frees the lock: the server had one hold of it. */
    assert_int_equal(hl_expect_value(&waiter.rel, HILOCK_OK), 0);
    assert_int_equal(hl_raw_exists(fx.server, "leak"), 0);
    assert_status(hilock_lock_try_acquire(lo, 0, 10000), HILOCK_OK);
    assert_status(hilock_lock_release(lo), HILOCK_OK);
    hl_free_lock(lo);
    hl_free_lock(l);
    hl_free_client(other);
    hl_free_client(c);
}

int main(void)
{
#define T(fn) hl_lock_test(fn, &fx)
    const struct CMUnitTest tests[] = {
        T(test_cancelled_grant_spares_newer),
        T(test_wake_during_reconcile_sends_no_second_attempt),
    };
#undef T

    return cmocka_run_group_tests(tests, NULL, NULL);
}
