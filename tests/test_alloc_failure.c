/* Failure injection: fail the n-th allocation hilock makes, for every n,
 * through a whole acquire / renew / release sequence, and check that each
 * run ends with a clean error or success, never a crash or a leak (the
 * sanitizer and valgrind runs of the suite check the leaks), and that the
 * lock is never left held behind the caller's back. */
/* ctest-timeout: 240 */
#include <setjmp.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "core/client_internal.h"
#include "core/lease.h"
#include "hilock/hilock.h"
#include "support/fixture.h"

/* Counts allocations; the one numbered fail_at (from 1) returns NULL.  The
 * memory still comes from the C library, so swapping the table while
 * objects are alive is safe here. */
static atomic_long alloc_count;
static atomic_long fail_at;
static atomic_long failures;

static bool should_fail(void)
{
    long n = atomic_fetch_add(&alloc_count, 1) + 1;
    if (n == atomic_load(&fail_at)) {
        atomic_fetch_add(&failures, 1);
        return true;
    }
    return false;
}

static void *counting_malloc(size_t n) { return should_fail() ? NULL : malloc(n); }
static void *counting_calloc(size_t c, size_t n)
{
    return should_fail() ? NULL : calloc(c, n);
}
static void *counting_realloc(void *p, size_t n)
{
    return should_fail() ? NULL : realloc(p, n);
}

static const hilock_allocators counting = {counting_malloc, counting_calloc,
                                           counting_realloc, free};

static void arm(long n)
{
    atomic_store(&fail_at, 0);
    atomic_store(&alloc_count, 0);
    atomic_store(&fail_at, n);
}

static int is_expected(int rc)
{
    return rc == HILOCK_OK || rc == HILOCK_ENOMEM || rc == HILOCK_EIO ||
           rc == HILOCK_ETIMEDOUT || rc == HILOCK_ENOTOWNER ||
           rc == HILOCK_ELEASELOST || rc == HILOCK_EPROTO;
}

/* One full sequence: create a lock, acquire fenced with the watchdog,
 * reenter, force a renewal round, release twice, destroy. */
static int sequence(hilock_client *c, const char *name)
{
    hilock_lock *lock = NULL;
    int rc = hilock_lock_create(&lock, c, name, strlen(name));
    if (rc != HILOCK_OK) {
        assert_true(rc == HILOCK_ENOMEM);
        return 1;
    }
    int worst = 0;
    uint64_t token = 0;
    rc = hilock_lock_acquire_fenced(lock, 2000, HILOCK_LEASE_WATCHDOG,
                                    &token);
    if (!is_expected(rc))
        fail_msg("acquire returned %s: %s", hilock_errname(rc),
                 hilock_last_error());
    int held = rc == HILOCK_OK;
    worst |= rc != HILOCK_OK;
    if (held) {
        rc = hilock_lock_try_acquire(lock, 0, HILOCK_LEASE_WATCHDOG);
        if (!is_expected(rc))
            fail_msg("reentry returned %s", hilock_errname(rc));
        held += rc == HILOCK_OK;
        worst |= rc != HILOCK_OK;
    }
    for (int i = 0; i < held; i++) {
        /* A caller whose release failed for want of memory tries again;
         * what must not happen is a hold nobody knows of. */
        do
            rc = hilock_lock_release(lock);
        while (rc == HILOCK_ENOMEM);
        if (!is_expected(rc))
            fail_msg("release returned %s: %s", hilock_errname(rc),
                     hilock_last_error());
        worst |= rc != HILOCK_OK;
    }
    assert_int_equal(hilock_lock_destroy(lock), HILOCK_OK);
    return worst;
}

static void test_every_allocation_fails_once(void **state)
{
    (void)state;
    hl_redis_server *s = hl_fixture_plain();
    char url[128];
    snprintf(url, sizeof url, "redis://127.0.0.1:%d?watchdog_timeout=1000",
             hl_redis_server_port(s));
    hilock_options *o;
    assert_int_equal(hilock_options_create(&o), HILOCK_OK);
    assert_int_equal(hilock_options_set_url(o, url), HILOCK_OK);
    hilock_client *c;
    assert_int_equal(hilock_client_create(&c, o), HILOCK_OK);
    hilock_options_free(o);

    assert_int_equal(hilock_set_allocators(&counting), HILOCK_OK);
    /* How many allocations a clean run makes. */
    arm(0);
    assert_int_equal(sequence(c, "alloc:clean"), 0);
    long clean = atomic_load(&alloc_count);
    assert_true(clean > 10);

    long limit = getenv("HILOCK_TEST_UNDER_VALGRIND") ? clean / 4 + 1
                                                      : clean + 20;
    for (long n = 1; n <= limit; n++) {
        char name[64];
        snprintf(name, sizeof name, "alloc:%ld", n);
        arm(n);
        sequence(c, name);
        arm(0);
        /* Whatever failed, nothing of this owner may stay held: a hold the
         * client does not know of would block everyone until it expires. */
        const char *argv[] = {"EXISTS", name};
        hilock_reply *r = NULL;
        int rc = HILOCK_EIO;
        int64_t deadline = hl_now_ms() + 5000;
        while (rc != HILOCK_OK && hl_now_ms() < deadline)
            rc = hilock_client_command(c, 2, argv, NULL, &r);
        assert_int_equal(rc, HILOCK_OK);
        if (r->integer != 0)
            fail_msg("allocation %ld failing left %s held", n, name);
        hilock_reply_free(r);
    }
    assert_true(atomic_load(&failures) > 0);
    hilock_set_allocators(NULL);
    assert_int_equal(hilock_client_destroy(c), HILOCK_OK);
    hl_redis_server_stop(s);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_every_allocation_fails_once),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
