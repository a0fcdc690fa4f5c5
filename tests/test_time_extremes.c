/* Every public time parameter at its extremes: 0, -1, INT64_MIN and
 * INT64_MAX, and the edges of the longest lease.  Each must give a clear
 * error or its documented behaviour, never a success that is wrong: a
 * hold whose lease is lost at once, a wait that ends before it began, a
 * timeout that wrapped.  Against a real server, so that a success is one
 * the server agrees with. */
/* ctest-timeout: 180 */
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <setjmp.h>
#include <cmocka.h>

#include "hilock/hilock.h"
#include "support/fixture.h"
#include "support/lock_helpers.h"
#include "support/raw_reads.h"

static hl_lock_fixture fx;

/* What a time parameter may be given, and the edges of the lease. */
#define OVER_MAX_LEASE (HILOCK_MAX_LEASE_MS + 1)
#define US_EDGE (INT64_MAX / 1000)

static const int64_t waits[] = {0, -1, INT64_MIN, INT64_MAX, US_EDGE,
                                US_EDGE + 1, INT64_MAX / 4};
static const int64_t leases[] = {0, -1, INT64_MIN, INT64_MAX,
                                 HILOCK_MAX_LEASE_MS, OVER_MAX_LEASE,
                                 US_EDGE, US_EDGE + 1};

static bool wait_ok(int64_t wait_ms)
{
    return wait_ms >= 0 || wait_ms == HILOCK_WAIT_FOREVER;
}

static bool lease_ok(int64_t lease_ms)
{
    return lease_ms >= 0 && lease_ms <= HILOCK_MAX_LEASE_MS;
}

/* A refused lease says why. */
static void expect_refusal(int rc, int64_t wait_ms, int64_t lease_ms)
{
    if (rc != HILOCK_EINVAL)
        fail_msg("wait %lld, lease %lld: %s (%s), expected HILOCK_EINVAL",
                 (long long)wait_ms, (long long)lease_ms, hilock_errname(rc),
                 hilock_last_error());
    if (wait_ok(wait_ms) && lease_ms > HILOCK_MAX_LEASE_MS &&
        strstr(hilock_last_error(), "too large") == NULL)
        fail_msg("lease %lld refused without saying it is too large: %s",
                 (long long)lease_ms, hilock_last_error());
}

/* A granted hold is one the server has, with the lease asked for, and
 * one the client has not given up on. */
static void expect_sound_hold(hilock_lock *l, const char *name, int rc,
                              int64_t wait_ms, int64_t lease_ms)
{
    if (rc != HILOCK_OK)
        fail_msg("wait %lld, lease %lld: %s (%s), expected HILOCK_OK",
                 (long long)wait_ms, (long long)lease_ms, hilock_errname(rc),
                 hilock_last_error());
    bool lost = true;
    assert_status(hilock_lock_lease_lost(l, &lost), HILOCK_OK);
    assert_false(lost);
    long long pttl = hl_raw_pttl(fx.server, name);
    int64_t expect = lease_ms > 0 ? lease_ms
                                  : HILOCK_DEFAULT_WATCHDOG_TIMEOUT_MS;
    if (pttl <= 0 || pttl > expect || pttl < expect - hl_widen(5000))
        fail_msg("lease %lld: the server holds the lock for %lld ms",
                 (long long)lease_ms, pttl);
    assert_status(hilock_lock_release(l), HILOCK_OK);
    assert_status(hilock_lock_lease_lost(l, &lost), HILOCK_OK);
    assert_false(lost);
}

typedef int sync_acquire_fn(hilock_lock *l, int64_t wait_ms,
                            int64_t lease_ms);

static int try_acquire(hilock_lock *l, int64_t wait_ms, int64_t lease_ms)
{
    return hilock_lock_try_acquire(l, wait_ms, lease_ms);
}

static int acquire_fenced(hilock_lock *l, int64_t wait_ms, int64_t lease_ms)
{
    uint64_t token = 0;
    int rc = hilock_lock_acquire_fenced(l, wait_ms, lease_ms, &token);
    assert_true(rc == HILOCK_OK ? token != 0 : token == 0);
    return rc;
}

/* The async form: an argument it refuses is refused at the call, and
 * the callback then never runs. */
static int acquire_async(hilock_lock *l, int64_t wait_ms, int64_t lease_ms)
{
    static hl_acquire_rec rec;
    hl_acquire_rec_init(&rec, NULL);
    int rc = hilock_lock_acquire_async(l, hilock_thread_owner(), wait_ms,
                                       lease_ms, 0, hl_record_acquire, &rec,
                                       NULL);
    if (rc != HILOCK_OK) {
        assert_int_equal(atomic_load(&rec.calls), 0);
        return rc;
    }
    return hl_expect_acquire(&rec);
}

static void every_wait_and_lease(hilock_lock *l, const char *name,
                                 sync_acquire_fn *acquire)
{
    for (size_t w = 0; w < sizeof waits / sizeof waits[0]; w++) {
        for (size_t k = 0; k < sizeof leases / sizeof leases[0]; k++) {
            int64_t wait_ms = waits[w], lease_ms = leases[k];
            int rc = acquire(l, wait_ms, lease_ms);
            if (wait_ok(wait_ms) && lease_ok(lease_ms))
                expect_sound_hold(l, name, rc, wait_ms, lease_ms);
            else
                expect_refusal(rc, wait_ms, lease_ms);
            assert_int_equal(hl_raw_exists(fx.server, name),
                             0); /* nothing left behind */
        }
    }
}

typedef hilock_lock *new_lock_fn(hilock_client *c, const char *name);

static void every_kind(sync_acquire_fn *acquire)
{
    static new_lock_fn *const kinds[] = {hl_new_lock, hl_new_fair_lock,
                                         hl_new_write_lock};
    hilock_client *c = hl_new_client(fx.server, NULL);
    for (size_t i = 0; i < sizeof kinds / sizeof kinds[0]; i++) {
        hilock_lock *l = kinds[i](c, "extremes");
        every_wait_and_lease(l, "extremes", acquire);
        hl_free_lock(l);
    }
    /* A read hold lives in the hash at the name as well. */
    hilock_lock *r = hl_new_read_lock(c, "extremes");
    every_wait_and_lease(r, "extremes", acquire);
    hl_free_lock(r);
    hl_free_client(c);
}

static void test_try_acquire(void **state)
{
    (void)state;
    every_kind(try_acquire);
}

static void test_acquire_fenced(void **state)
{
    (void)state;
    every_kind(acquire_fenced);
}

static void test_acquire_async(void **state)
{
    (void)state;
    every_kind(acquire_async);
}

/* A wait at the edge of the range is a wait, not a deadline that wrapped
 * into the past: on a held lock it is still pending when cancelled. */
static void test_long_waits_wait(void **state)
{
    (void)state;
    static const int64_t long_waits[] = {INT64_MAX, US_EDGE, US_EDGE + 1,
                                         INT64_MAX / 4, -1};
    hilock_client *c = hl_new_client(fx.server, NULL);
    hilock_lock *l = hl_new_lock(c, "extremes");
    assert_status(hilock_lock_try_acquire(l, 0, 0), HILOCK_OK);
    for (size_t i = 0; i < sizeof long_waits / sizeof long_waits[0]; i++) {
        static hl_acquire_rec rec;
        hl_acquire_rec_init(&rec, c);
        assert_status(hilock_lock_acquire_async(l, 77, long_waits[i], 0, 0,
                                                hl_record_acquire, &rec,
                                                &rec.id),
                      HILOCK_OK);
        hl_expect_pending(c, l, 1);
        assert_int_equal(atomic_load(&rec.calls), 0);
        assert_status(hilock_lock_cancel(l, rec.id), HILOCK_OK);
        assert_status(hl_expect_acquire(&rec), HILOCK_ECANCELED);
    }
    assert_status(hilock_lock_release(l), HILOCK_OK);
    hl_free_lock(l);
    hl_free_client(c);
}

/* ---- multi-lock and RedLock ------------------------------------------ */

static void every_group_wait_and_lease(hilock_multilock *m,
                                       hl_redis_server *const *servers,
                                       size_t n, const char *name)
{
    for (size_t w = 0; w < sizeof waits / sizeof waits[0]; w++) {
        for (size_t k = 0; k < sizeof leases / sizeof leases[0]; k++) {
            int64_t wait_ms = waits[w], lease_ms = leases[k];
            int64_t validity = -7;
            int rc = hilock_multilock_try_acquire(m, wait_ms, lease_ms, NULL, 0,
                                                  &validity);
            if (!wait_ok(wait_ms) || !lease_ok(lease_ms)) {
                expect_refusal(rc, wait_ms, lease_ms);
                assert_int_equal(validity, -7);
            } else {
                if (rc != HILOCK_OK)
                    fail_msg("group: wait %lld, lease %lld: %s (%s)",
                             (long long)wait_ms, (long long)lease_ms,
                             hilock_errname(rc), hilock_last_error());
                int64_t lease = lease_ms > 0
                                    ? lease_ms
                                    : HILOCK_DEFAULT_WATCHDOG_TIMEOUT_MS;
                /* Less than the lease by the drift margin and the time the
                 * round took, never more, never negative. */
                assert_true(validity > 0);
                assert_true(validity <= lease - lease / 100 - 2);
                bool lost = true;
                assert_status(hilock_multilock_lease_lost(m, &lost),
                              HILOCK_OK);
                assert_false(lost);
                /* A RedLock holds with a quorum; the rest may come late. */
                size_t holding = 0;
                for (size_t i = 0; i < n; i++)
                    holding += hl_raw_pttl(servers[i], name) > 0;
                assert_true(holding >= n / 2 + 1);
                assert_status(hilock_multilock_release(m), HILOCK_OK);
            }
            for (size_t i = 0; i < n; i++)
                assert_int_equal(hl_raw_exists(servers[i], name), 0);
        }
    }
}

static void never_called(hilock_multilock *m, int status,
                         const hilock_multi_outcome *outcome, void *data)
{
    (void)m;
    (void)status;
    (void)outcome;
    (void)data;
    fail_msg("a refused acquire called back");
}

static void test_multilock(void **state)
{
    (void)state;
    hilock_client *c = hl_new_client(fx.server, NULL);
    hilock_lock *members[2] = {hl_new_lock(c, "extremes:a"),
                               hl_new_lock(c, "extremes:b")};
    hilock_multilock *m = NULL;
    assert_status(hilock_multilock_create(&m, members, 2), HILOCK_OK);
    /* One server holds both members; check the first by name. */
    hl_redis_server *servers[1] = {fx.server};
    every_group_wait_and_lease(m, servers, 1, "extremes:a");
    assert_int_equal(hl_raw_exists(fx.server, "extremes:b"), 0);
    /* The async form refuses at the call. */
    for (size_t k = 0; k < sizeof leases / sizeof leases[0]; k++) {
        if (lease_ok(leases[k]))
            continue;
        int rc = hilock_multilock_acquire_async(m, 5, 0, leases[k],
                                                never_called, NULL, NULL);
        assert_status(rc, HILOCK_EINVAL);
    }
    assert_status(hilock_multilock_destroy(m), HILOCK_OK);
    hl_free_lock(members[0]);
    hl_free_lock(members[1]);
    hl_free_client(c);
}

static void test_redlock(void **state)
{
    (void)state;
    hl_redis_server *masters[3];
    hl_fixture_masters(masters, 3);
    char buf[3][64];
    const char *urls[3];
    for (int i = 0; i < 3; i++) {
        snprintf(buf[i], sizeof buf[i], "redis://127.0.0.1:%d",
                 hl_redis_server_port(masters[i]));
        urls[i] = buf[i];
    }
    hilock_options *o = NULL;
    assert_status(hilock_options_create(&o), HILOCK_OK);
    /* Fresh masters vote at once. */
    assert_status(hilock_options_set_quarantine_ms(o, 1), HILOCK_OK);
    assert_status(hl_set_valgrind_timeouts(o), HILOCK_OK);
    hilock_redlock *rl = NULL;
    assert_status(hilock_redlock_create(&rl, urls, 3, o), HILOCK_OK);
    hilock_options_free(o);
    hilock_multilock *m = NULL;
    assert_status(hilock_redlock_multilock_create(&m, rl, "extremes"),
                  HILOCK_OK);
    /* Past the 1 ms quarantine of masters that just came up. */
    assert_status(hilock_multilock_try_acquire(m, hl_widen(5000), 0, NULL, 0,
                                               NULL),
                  HILOCK_OK);
    assert_status(hilock_multilock_release(m), HILOCK_OK);
    every_group_wait_and_lease(m, masters, 3, "extremes");
    assert_status(hilock_multilock_destroy(m), HILOCK_OK);
    assert_status(hilock_redlock_destroy(rl), HILOCK_OK);
    hl_fixture_stop_masters(masters, 3);
}

/* ---- options ----------------------------------------------------------- */

typedef struct time_option {
    const char *name;
    int (*set)(hilock_options *, int64_t);
    int64_t (*get)(const hilock_options *);
    bool zero_ok; /* 0 is documented: off, or the default */
    int64_t max;
    bool minus_one_ok; /* -1 is documented too (busy poll: never) */
} time_option;

static void test_option_setters(void **state)
{
    (void)state;
    static const time_option opts[] = {
        {"connect", hilock_options_set_connect_timeout_ms,
         hilock_options_connect_timeout_ms, false, 86400000, false},
        {"command", hilock_options_set_command_timeout_ms,
         hilock_options_command_timeout_ms, false, 86400000, false},
        {"watchdog", hilock_options_set_watchdog_timeout_ms,
         hilock_options_watchdog_timeout_ms, false, 86400000, false},
        {"max_hold", hilock_options_set_max_hold_ms,
         hilock_options_max_hold_ms, true, 86400000, false},
        {"lock_delay", hilock_options_set_lock_delay_ms,
         hilock_options_lock_delay_ms, true, 3600000, false},
        {"waiter", hilock_options_set_waiter_timeout_ms,
         hilock_options_waiter_timeout_ms, false, 3600000, false},
        {"node", hilock_options_set_node_timeout_ms,
         hilock_options_node_timeout_ms, false, 86400000, false},
        {"quarantine", hilock_options_set_quarantine_ms,
         hilock_options_quarantine_ms, true, 86400000, false},
        {"busy_poll", hilock_options_set_busy_poll_us,
         hilock_options_busy_poll_us, true, 1000000, true},
    };
    static const int64_t extremes[] = {0, -1, INT64_MIN, INT64_MAX};
    hilock_options *o = NULL;
    assert_status(hilock_options_create(&o), HILOCK_OK);
    for (size_t i = 0; i < sizeof opts / sizeof opts[0]; i++) {
        const time_option *t = &opts[i];
        for (size_t k = 0; k < sizeof extremes / sizeof extremes[0]; k++) {
            int64_t before = t->get(o);
            int rc = t->set(o, extremes[k]);
            bool ok = (extremes[k] == 0 && t->zero_ok) ||
                      (extremes[k] == -1 && t->minus_one_ok);
            if (rc != (ok ? HILOCK_OK : HILOCK_EINVAL))
                fail_msg("%s %lld: %s", t->name, (long long)extremes[k],
                         hilock_errname(rc));
            assert_int_equal(t->get(o), ok ? extremes[k] : before);
        }
        assert_status(t->set(o, t->max), HILOCK_OK);
        assert_status(t->set(o, t->max + 1), HILOCK_EINVAL);
        assert_int_equal(t->get(o), t->max);
    }
    static const int64_t pairs[][2] = {
        {0, 0}, {-1, 1}, {INT64_MIN, INT64_MAX}, {1, INT64_MAX},
        {INT64_MAX, INT64_MAX}, {INT64_MIN, INT64_MIN}, {2, 1}};
    for (size_t k = 0; k < sizeof pairs / sizeof pairs[0]; k++)
        assert_status(hilock_options_set_reconnect_backoff_ms(o, pairs[k][0],
                                                              pairs[k][1]),
                      HILOCK_EINVAL);
    hilock_options_free(o);
}

/* The same values in a URL, including one too long for int64_t. */
static void test_url_time_keys(void **state)
{
    (void)state;
    static const char *keys[] = {"connect_timeout", "command_timeout",
                                 "watchdog_timeout", "max_hold",
                                 "lock_delay", "waiter_timeout",
                                 "node_timeout", "quarantine"};
    static const char *values[] = {"-1", "-9223372036854775808",
                                   "9223372036854775807",
                                   "99999999999999999999", "0"};
    hilock_options *o = NULL;
    assert_status(hilock_options_create(&o), HILOCK_OK);
    for (size_t i = 0; i < sizeof keys / sizeof keys[0]; i++) {
        for (size_t k = 0; k < sizeof values / sizeof values[0]; k++) {
            char url[128];
            snprintf(url, sizeof url, "redis://127.0.0.1:6379/0?%s=%s",
                     keys[i], values[k]);
            bool zero_ok = strcmp(values[k], "0") == 0 &&
                           (strcmp(keys[i], "max_hold") == 0 ||
                            strcmp(keys[i], "lock_delay") == 0 ||
                            strcmp(keys[i], "quarantine") == 0);
            int rc = hilock_options_set_url(o, url);
            if (rc != (zero_ok ? HILOCK_OK : HILOCK_EINVAL))
                fail_msg("%s: %s (%s)", url, hilock_errname(rc),
                         hilock_last_error());
        }
    }
    hilock_options_free(o);
}

/* The longest timeouts a client takes still give a client that works. */
static void test_longest_timeouts_work(void **state)
{
    (void)state;
    hilock_options *o = NULL;
    assert_status(hilock_options_create(&o), HILOCK_OK);
    assert_status(hilock_options_set_host(o, "127.0.0.1"), HILOCK_OK);
    assert_status(hilock_options_set_port(o, hl_redis_server_port(fx.server)),
                  HILOCK_OK);
    assert_status(hilock_options_set_connect_timeout_ms(o, 86400000),
                  HILOCK_OK);
    assert_status(hilock_options_set_command_timeout_ms(o, 86400000),
                  HILOCK_OK);
    assert_status(hilock_options_set_watchdog_timeout_ms(o, 86400000),
                  HILOCK_OK);
    assert_status(hilock_options_set_max_hold_ms(o, 86400000), HILOCK_OK);
    assert_status(hilock_options_set_waiter_timeout_ms(o, 3600000),
                  HILOCK_OK);
    assert_status(hilock_options_set_reconnect_backoff_ms(o, 3600000,
                                                          3600000),
                  HILOCK_OK);
    hilock_client *c = NULL;
    assert_status(hilock_client_create(&c, o), HILOCK_OK);
    hilock_options_free(o);
    hilock_lock *l = hl_new_lock(c, "extremes");
    assert_status(hilock_lock_try_acquire(l, INT64_MAX, 0), HILOCK_OK);
    long long pttl = hl_raw_pttl(fx.server, "extremes");
    assert_true(pttl > 86400000 - hl_widen(5000) && pttl <= 86400000);
    bool lost = true;
    assert_status(hilock_lock_lease_lost(l, &lost), HILOCK_OK);
    assert_false(lost);
    assert_status(hilock_lock_release(l), HILOCK_OK);
    hl_free_lock(l);
    hl_free_client(c);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        hl_lock_test(test_try_acquire, &fx),
        hl_lock_test(test_acquire_fenced, &fx),
        hl_lock_test(test_acquire_async, &fx),
        hl_lock_test(test_long_waits_wait, &fx),
        hl_lock_test(test_multilock, &fx),
        hl_lock_test(test_redlock, &fx),
        hl_lock_test(test_option_setters, &fx),
        hl_lock_test(test_url_time_keys, &fx),
        hl_lock_test(test_longest_timeouts_work, &fx),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
