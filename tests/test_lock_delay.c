/* The lock delay against a real redis-server: a hold that ends without a
 * release (its lease ran out, its process was killed, an operator forced
 * the lock open) keeps the lock closed to every hilock client for the
 * delay, a clean release does not, and a waiting acquire is granted once
 * the delay is over.  When a grant came is read off the server: a fenced
 * grant's token is the server's clock in µs at the grant (see
 * HL_LUA_TOKEN), which must lie past the end of the delay key. */
/* ctest-timeout: 120 */
#include <inttypes.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include "hilock/client.h"
#include "hilock/error.h"
#include "hilock/fair.h"
#include "hilock/lock.h"
#include "hilock/multi.h"
#include "hilock/options.h"
#include "support/children.h"
#include "support/fixture.h"
#include "support/lock_helpers.h"
#include "support/raw_reads.h"

static hl_lock_fixture fx;

/* Long enough that a test's few round trips fit well inside it. */
#define DELAY_MS 1500

typedef hilock_lock *make_lock_fn(hilock_client *c, const char *name);

static void delay_key(const char *name, char *out, size_t cap)
{
    snprintf(out, cap, "hilock_lock_delay:{%s}", name);
}

static bool key_gone(void *key)
{
    return hl_raw_exists(fx.server, key) == 0;
}

static void expect_gone(const char *key, int timeout_ms)
{
    if (!hl_wait_until(key_gone, (void *)key, hl_widen(timeout_ms)))
        fail_msg("%s is still there after %d ms", key, timeout_ms);
}

/* The earliest time on the server's clock at which key, which must
 * expire, can be gone: TIME is read before PTTL, so its end is no earlier
 * than this. */
static long long end_of(const char *key)
{
    long long now = hl_raw_server_ms(fx.server);
    long long left = hl_raw_pttl(fx.server, key);
    if (left <= 0)
        fail_msg("%s: PTTL %lld, expected a live key with an expiry", key,
                 left);
    return now + left;
}

static hilock_client *delay_client(void)
{
    const hl_client_opts o = {.lock_delay_ms = DELAY_MS};
    return hl_new_client(fx.server, &o);
}

/* other's single try fails busy while key lives, and the status says why:
 * free, with at most max_ms of the delay left. */
static void expect_closed(hilock_lock *other, const char *key,
                          int64_t max_ms)
{
    assert_status(hilock_lock_try_acquire(other, 0, 10000), HILOCK_EBUSY);
    hilock_lock_status *st = NULL;
    assert_status(hilock_lock_status_get(other, &st), HILOCK_OK);
    assert_false(st->locked);
    if (st->delay_ms <= 0 || st->delay_ms > max_ms)
        fail_msg("status delay_ms %lld", (long long)st->delay_ms);
    hilock_lock_status_free(st);
    /* Both answers came within the delay. */
    assert_int_equal(hl_raw_exists(fx.server, key), 1);
}

/* A waiting acquire of other (owner 7), started while key closes the
 * lock, is granted, and no earlier than the key's end on the server's
 * clock.  Then released. */
static void expect_granted_after(hilock_lock *other, hilock_client *oc,
                                 const char *key, bool other_has_delay)
{
    long long end = end_of(key);
    static hl_acquire_rec rec;
    hl_acquire_rec_init(&rec, oc);
    assert_status(hilock_lock_acquire_async(other, 7, hl_widen(10000), 10000,
                                            HILOCK_ACQUIRE_FENCED,
                                            hl_record_acquire, &rec, NULL),
                  HILOCK_OK);
    assert_status(hl_expect_acquire(&rec), HILOCK_OK);
    long long granted_ms = (long long)(rec.got.token / 1000);
    if (granted_ms < end)
        fail_msg("granted at %lld on the server's clock, %lld ms before the "
                 "delay ended",
                 granted_ms, end - granted_ms);
    /* The old delay is gone; a new holder with a delay has its own. */
    long long left = hl_raw_pttl(fx.server, key);
    if (other_has_delay ? left <= DELAY_MS : left != -2)
        fail_msg("after the grant %s has PTTL %lld", key, left);
    assert_status(hilock_lock_release_as(other, 7), HILOCK_OK);
    assert_int_equal(hl_raw_exists(fx.server, key), 0);
}

/* ---- a fixed lease runs out -------------------------------------------- */

static void run_out(make_lock_fn *make, const char *name,
                    bool other_has_delay)
{
    char key[128];
    delay_key(name, key, sizeof key);
    hilock_client *hc = delay_client();
    hilock_client *oc =
        other_has_delay ? delay_client() : hl_new_client(fx.server, NULL);
    hilock_lock *held = make(hc, name);
    hilock_lock *other = make(oc, name);

    assert_status(hilock_lock_try_acquire(held, 0, 300), HILOCK_OK);
    /* The grant wrote the delay to outlast the lease by the delay. */
    char value[32];
    assert_true(hl_raw_bulk(fx.server, value, sizeof value, "GET", key,
                            (char *)NULL));
    assert_string_equal(value, "1500");
    long long left = hl_raw_pttl(fx.server, key);
    if (left <= DELAY_MS || left > 300 + DELAY_MS)
        fail_msg("%s: PTTL %lld after a grant of 300 ms", key, left);
    /* Nobody releases. */
    expect_gone(name, 5000);
    expect_closed(other, key, DELAY_MS);
    expect_granted_after(other, oc, key, other_has_delay);
    hl_free_lock(other);
    hl_free_lock(held);
    hl_free_client(oc);
    hl_free_client(hc);
}

/* The other client sets no delay: the check is in every acquire. */
static void test_run_out_holds_back_a_client_without_delay(void **state)
{
    (void)state;
    run_out(hl_new_lock, "ran-out", false);
}

static void test_run_out_fair(void **state)
{
    (void)state;
    run_out(hl_new_fair_lock, "ran-out-fair", true);
}

/* ---- a clean release opens the lock at once ---------------------------- */

static void release_opens(make_lock_fn *make, const char *name)
{
    char key[128];
    delay_key(name, key, sizeof key);
    hilock_client *hc = delay_client();
    hilock_client *oc = hl_new_client(fx.server, NULL);
    hilock_lock *held = make(hc, name);
    hilock_lock *other = make(oc, name);

    assert_status(hilock_lock_try_acquire(held, 0, HILOCK_LEASE_WATCHDOG),
                  HILOCK_OK);
    assert_status(hilock_lock_try_acquire(held, 0, HILOCK_LEASE_WATCHDOG),
                  HILOCK_OK);
    /* The watchdog's lease, 30 s, plus the delay. */
    assert_true(hl_raw_pttl(fx.server, key) > 30000);
    assert_status(hilock_lock_release(held), HILOCK_OK);
    assert_int_equal(hl_raw_exists(fx.server, key), 1);
    assert_status(hilock_lock_release(held), HILOCK_OK);
    assert_int_equal(hl_raw_exists(fx.server, key), 0);
    assert_status(hilock_lock_try_acquire(other, 0, 10000), HILOCK_OK);
    assert_status(hilock_lock_release(other), HILOCK_OK);
    hl_free_lock(other);
    hl_free_lock(held);
    hl_free_client(oc);
    hl_free_client(hc);
}

static void test_release_opens_at_once(void **state)
{
    (void)state;
    release_opens(hl_new_lock, "released");
    release_opens(hl_new_fair_lock, "released-fair");
}

/* ---- a holder killed with SIGKILL -------------------------------------- */

typedef struct clock_wait {
    long long until;
} clock_wait;

static bool server_clock_past(void *arg)
{
    return hl_raw_server_ms(fx.server) > ((clock_wait *)arg)->until;
}

static void test_killed_holder(void **state)
{
    (void)state;
    static const char name[] = "killed";
    char key[128], byte = 'h';
    int ready[2];
    delay_key(name, key, sizeof key);
    assert_int_equal(pipe(ready), 0);
    /* Fork before this process has a client (see test_lock_faults.c). */
    if (hl_children_fork(&fx.kids, 0) == 0) {
        const hl_client_opts o = {.watchdog_ms = 600,
                                  .lock_delay_ms = DELAY_MS};
        char why[300];
        hilock_lock *l = NULL;
        close(ready[0]);
        hilock_client *c = hl_open_client(fx.server, &o, why, sizeof why);
        if (c == NULL || hilock_lock_create(&l, c, name) != HILOCK_OK ||
            hilock_lock_try_acquire(l, 0, HILOCK_LEASE_WATCHDOG) !=
                HILOCK_OK ||
            write(ready[1], &byte, 1) != 1)
            _exit(1);
        for (;;)
            pause();
    }
    close(ready[1]);
    if (!hl_read_exact(ready[0], &byte, 1, hl_widen(10000)))
        fail_msg("the child never reported holding the lock");
    close(ready[0]);
    /* Past the lease and delay the grant wrote: only the renewals can
     * have kept the delay key. */
    clock_wait past = {hl_raw_server_ms(fx.server) + 600 + DELAY_MS + 200};
    if (!hl_wait_until(server_clock_past, &past, hl_widen(10000)))
        fail_msg("the server's clock did not move on");
    assert_int_equal(hl_raw_exists(fx.server, name), 1);
    assert_true(hl_raw_pttl(fx.server, key) > DELAY_MS);
    assert_int_equal(hl_children_kill(&fx.kids, 0), 0);

    hilock_client *oc = hl_new_client(fx.server, NULL);
    hilock_lock *other = hl_new_lock(oc, name);
    expect_gone(name, 5000);
    expect_closed(other, key, DELAY_MS);
    expect_granted_after(other, oc, key, false);
    hl_free_lock(other);
    hl_free_client(oc);
}

/* ---- an operator's forced unlock --------------------------------------- */

static void test_forced_unlock_keeps_the_delay(void **state)
{
    (void)state;
    static const char name[] = "forced";
    char key[128];
    delay_key(name, key, sizeof key);
    hilock_client *hc = delay_client();
    hilock_client *oc = hl_new_client(fx.server, NULL);
    hilock_lock *held = hl_new_lock(hc, name);
    hilock_lock *other = hl_new_lock(oc, name);

    assert_status(hilock_lock_try_acquire(held, 0, HILOCK_LEASE_WATCHDOG),
                  HILOCK_OK);
    bool deleted = false;
    assert_status(hilock_lock_force_release(other, &deleted), HILOCK_OK);
    assert_true(deleted);
    /* The holder still thinks it holds: the lock stays closed for the
     * watchdog's lease and the delay, as after its death. */
    long long left = hl_raw_pttl(fx.server, key);
    if (left <= 30000)
        fail_msg("%s: PTTL %lld after the forced unlock", key, left);
    expect_closed(other, key, 30000 + DELAY_MS);
    /* So that the test need not wait 31 s: the key's end is the holder's
     * lease plus the delay, which the waiting acquire waits out. */
    assert_int_equal(
        hl_raw_int(fx.server, "PEXPIRE", key, "1000", (char *)NULL), 1);
    expect_granted_after(other, oc, key, false);
    hl_free_lock(other);
    hl_free_lock(held);
    hl_free_client(oc);
    hl_free_client(hc);
}

/* ---- a multi-lock, through its members --------------------------------- */

/* A group whose fixed lease ran out keeps each member closed; another
 * group over the same names, of a client without a delay, waits it out. */
static void test_multilock(void **state)
{
    (void)state;
    static const char *const names[] = {"group-a", "group-b"};
    hilock_client *hc = delay_client();
    hilock_client *oc = hl_new_client(fx.server, NULL);
    hilock_lock *hl[2], *ol[2];
    for (int i = 0; i < 2; i++) {
        hl[i] = hl_new_lock(hc, names[i]);
        ol[i] = hl_new_lock(oc, names[i]);
    }
    hilock_multilock *held = NULL, *other = NULL;
    assert_status(hilock_multilock_create(&held, hl, 2), HILOCK_OK);
    assert_status(hilock_multilock_create(&other, ol, 2), HILOCK_OK);
    assert_status(hilock_multilock_try_acquire(held, 0, 300, NULL, 0, NULL),
                  HILOCK_OK);
    char key[2][128];
    for (int i = 0; i < 2; i++) {
        delay_key(names[i], key[i], sizeof key[i]);
        assert_true(hl_raw_pttl(fx.server, key[i]) > DELAY_MS);
    }
    expect_gone(names[0], 5000);
    expect_gone(names[1], 5000);
    /* Both names free, both still closed. */
    (void)end_of(key[0]);
    (void)end_of(key[1]);
    assert_status(hilock_multilock_try_acquire(other, 0, 10000, NULL, 0,
                                               NULL),
                  HILOCK_EBUSY);
    assert_int_equal(hl_raw_exists(fx.server, key[0]), 1);
    assert_status(hilock_multilock_try_acquire(other, hl_widen(10000), 10000,
                                               NULL, 0, NULL),
                  HILOCK_OK);
    assert_int_equal(hl_raw_exists(fx.server, key[0]), 0);
    assert_int_equal(hl_raw_exists(fx.server, key[1]), 0);
    assert_status(hilock_multilock_release(other), HILOCK_OK);
    assert_status(hilock_multilock_destroy(other), HILOCK_OK);
    assert_status(hilock_multilock_destroy(held), HILOCK_OK);
    for (int i = 0; i < 2; i++) {
        hl_free_lock(ol[i]);
        hl_free_lock(hl[i]);
    }
    hl_free_client(oc);
    hl_free_client(hc);
}

/* ---- a direct hand-off to a waiting client with a delay ----------------- */

/* The acquires of c that a release handed the lock to. */
static uint64_t handed_to(hilock_client *c)
{
    hilock_stats s = {.size = sizeof s};
    assert_status(hilock_client_stats_read(c, &s), HILOCK_OK);
    return s.acquires_handed;
}

/* A waiting client b records its wish; a's release of a 30 s hold then
 * gives b the lock outright when it can, b's delay (a wish carries it)
 * included: only a releaser with a delay has the delay key at hand, so
 * one without leaves a wish with a delay to a promise and b's own
 * attempt.  The fair lock keeps its wishes by field, the reentrant one
 * by client. */
static void hand_off(const char *name, bool fair, bool a_delay, bool b_delay)
{
    char key[128], want[128], wish[256], wisher[64];
    delay_key(name, key, sizeof key);
    snprintf(want, sizeof want, "%s:{%s}",
             fair ? "hilock_fair_want" : "hilock_lock_want", name);
    hilock_client *ac = a_delay ? delay_client() : hl_new_client(fx.server,
                                                                 NULL);
    hilock_client *bc = b_delay ? delay_client() : hl_new_client(fx.server,
                                                                 NULL);
    hilock_lock *a = fair ? hl_new_fair_lock(ac, name) : hl_new_lock(ac, name);
    hilock_lock *b = fair ? hl_new_fair_lock(bc, name) : hl_new_lock(bc, name);
    snprintf(wisher, sizeof wisher, fair ? "%s:9" : "%s",
             hilock_client_id(bc));

    assert_status(hilock_lock_try_acquire(a, 0, 30000), HILOCK_OK);
    static hl_acquire_rec rec;
    hl_acquire_rec_init(&rec, bc);
    assert_status(hilock_lock_acquire_async(b, 9, HILOCK_WAIT_FOREVER,
                                            HILOCK_LEASE_WATCHDOG, 0,
                                            hl_record_acquire, &rec, NULL),
                  HILOCK_OK);
    hl_expect_idle(bc, b, 1);
    assert_true(hl_raw_bulk(fx.server, wish, sizeof wish, "HGET", want,
                            wisher, (char *)NULL));
    if ((strstr(wish, " 30000,1500") != NULL) != b_delay)
        fail_msg("the wish reads \"%s\"", wish);
    assert_status(hilock_lock_release(a), HILOCK_OK);
    assert_status(hl_expect_acquire(&rec), HILOCK_OK);
    assert_int_equal(handed_to(bc), a_delay || !b_delay ? 1 : 0);
    long long left = hl_raw_pttl(fx.server, key);
    long long held = hl_raw_pttl(fx.server, name);
    if (!b_delay) {
        if (left != -2)
            fail_msg("%s: PTTL %lld after a hand-off to a client without "
                     "a delay", key, left);
    } else if (held <= 0 || left <= DELAY_MS || left > held + DELAY_MS + 5) {
        /* At most b's place (the waiter timeout, 5 s) when handed, its
         * 30 s when b took it itself, and the delay after either. */
        fail_msg("%s: PTTL %lld, the lock's %lld", key, left, held);
    }
    assert_status(hilock_lock_release_as(b, 9), HILOCK_OK);
    assert_int_equal(hl_raw_exists(fx.server, key), 0);
    hl_free_lock(b);
    hl_free_lock(a);
    hl_free_client(bc);
    hl_free_client(ac);
}

static void test_hand_off_writes_the_new_holders_delay(void **state)
{
    (void)state;
    hand_off("handed", false, true, true);
    hand_off("handed-from-plain", false, false, true);
    hand_off("handed-to-plain", false, true, false);
    hand_off("fair-handed", true, true, true);
    hand_off("fair-handed-from-plain", true, false, true);
    hand_off("fair-handed-to-plain", true, true, false);
}

/* ---- bad values --------------------------------------------------------- */

static void test_bad_values(void **state)
{
    (void)state;
    hilock_options *o = NULL;
    assert_status(hilock_options_create(&o), HILOCK_OK);
    static const int64_t bad[] = {-1, INT64_MIN, 3600001, INT64_MAX};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        assert_status(hilock_options_set_lock_delay_ms(o, bad[i]),
                      HILOCK_EINVAL);
        assert_non_null(strstr(hilock_last_error(),
                               "lock delay out of range 0 or 1..3600000 ms"));
    }
    assert_int_equal(hilock_options_lock_delay_ms(o), 0);
    assert_status(hilock_options_set_url(o, "redis://h?lock_delay=-5"),
                  HILOCK_EINVAL);
    assert_non_null(strstr(hilock_last_error(), "lock_delay"));
    assert_status(hilock_options_set_lock_delay_ms(o, 1), HILOCK_OK);
    assert_status(hilock_options_set_lock_delay_ms(o, 0), HILOCK_OK);
    assert_int_equal(hilock_options_lock_delay_ms(o), 0);
    hilock_options_free(o);
}

/* A lock that nobody gave a delay shows none. */
static void test_no_delay_no_key(void **state)
{
    (void)state;
    hilock_client *c = hl_new_client(fx.server, NULL);
    hilock_lock *l = hl_new_lock(c, "plain");
    assert_status(hilock_lock_try_acquire(l, 0, 300), HILOCK_OK);
    hilock_lock_status *st = NULL;
    assert_status(hilock_lock_status_get(l, &st), HILOCK_OK);
    assert_true(st->locked);
    assert_int_equal(st->delay_ms, 0);
    hilock_lock_status_free(st);
    assert_int_equal(hl_raw_exists(fx.server, "hilock_lock_delay:{plain}"),
                     0);
    assert_status(hilock_lock_release(l), HILOCK_OK);
    hl_free_lock(l);
    hl_free_client(c);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        hl_lock_test(test_run_out_holds_back_a_client_without_delay, &fx),
        hl_lock_test(test_run_out_fair, &fx),
        hl_lock_test(test_release_opens_at_once, &fx),
        hl_lock_test(test_killed_holder, &fx),
        hl_lock_test(test_forced_unlock_keeps_the_delay, &fx),
        hl_lock_test(test_multilock, &fx),
        hl_lock_test(test_hand_off_writes_the_new_holders_delay, &fx),
        hl_lock_test(test_bad_values, &fx),
        hl_lock_test(test_no_delay_no_key, &fx),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
