/* Semaphores on a real Redis Cluster (3 masters, 3 replicas): a waiter
 * woken by a release on another client (sharded pub/sub), expirable
 * permits renewed by the watchdog on the name's master, and names whose
 * keys cannot share a slot refused. */
/* ctest-timeout: 240 */
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <setjmp.h>
#include <cmocka.h>

#include "hilock/hilock.h"
#include "support/fixture.h"
#include "support/lock_helpers.h"

static hl_redis_cluster *cluster;

static int setup(void **state)
{
    (void)state;
    cluster = hl_fixture_cluster();
    return cluster ? 0 : -1;
}

static int teardown(void **state)
{
    (void)state;
    hl_redis_cluster_stop(cluster);
    return 0;
}

#define WATCHDOG_MS 900

#define OK(call)                                                            \
    do {                                                                    \
        int rc_ = (call);                                                   \
        if (rc_ != HILOCK_OK)                                               \
            fail_msg("%s: %s (%s)", #call, hilock_errname(rc_),             \
                     hilock_last_error());                                  \
    } while (0)

static hilock_client *client(void)
{
    hilock_options *o = NULL;
    OK(hilock_options_create(&o));
    OK(hilock_options_set_url(o, hl_redis_cluster_url(cluster)));
    OK(hilock_options_set_watchdog_timeout_ms(o, WATCHDOG_MS));
    hilock_client *c = NULL;
    int rc = hilock_client_create(&c, o);
    hilock_options_free(o);
    if (rc != HILOCK_OK)
        fail_msg("client: %s: %s", hilock_errname(rc), hilock_last_error());
    return c;
}

static void test_cluster_semaphores(void **state)
{
    (void)state;
    hilock_client *a = client(), *b = client();
    const char *names[] = {"csem-a", "csem-b", "csem-c", "{tag}csem"};
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
        const char *n = names[i];
        hilock_semaphore *sa, *sb;
        OK(hilock_semaphore_create(&sa, a, n));
        OK(hilock_semaphore_create(&sb, b, n));
        OK(hilock_semaphore_set(sa, 1));
        OK(hilock_semaphore_try_acquire(sa, 1, 0));
        hl_sem_rec r;
        memset(&r, 0, sizeof r);
        OK(hilock_semaphore_try_acquire_async(sb, 1, hl_widen(10000),
                                              hl_record_sem, &r, NULL));
        hl_sleep_ms(100);
        assert_int_equal(atomic_load(&r.calls), 0);
        int64_t t0 = hl_now_ms();
        OK(hilock_semaphore_release(sa, 1));
        hl_expect_count(&r.calls, 1, hl_widen(10000));
        assert_int_equal(r.status, HILOCK_OK);
        /* By the message, not the fallback's second. */
        if (r.at_ms - t0 >= 800 && !hl_under_valgrind())
            fail_msg("%s: the waiter woke %lld ms after the release", n,
                     (long long)(r.at_ms - t0));
        OK(hilock_semaphore_release(sb, 1));
        hl_semaphore_destroy_any(sb);
        hl_semaphore_destroy_any(sa);
    }
    hilock_client_destroy(b);
    hilock_client_destroy(a);
}

static void test_cluster_permits(void **state)
{
    (void)state;
    hilock_client *a = client(), *b = client();
    hilock_permit_semaphore *pa, *pb;
    char id[HILOCK_PERMIT_ID_MAX], other[HILOCK_PERMIT_ID_MAX];
    OK(hilock_permit_semaphore_create(&pa, a, "cperm"));
    OK(hilock_permit_semaphore_create(&pb, b, "cperm"));
    OK(hilock_semaphore_set(hilock_permit_semaphore_base(pa), 1));
    OK(hilock_permit_acquire(pa, 0, HILOCK_LEASE_WATCHDOG, id));
    /* Kept past two watchdog timeouts. */
    assert_int_equal(hilock_permit_acquire(pb, 2 * WATCHDOG_MS, 0, other),
                     HILOCK_EBUSY);
    OK(hilock_permit_release(pa, id));
    OK(hilock_permit_acquire(pb, 0, 0, other));
    OK(hilock_permit_release(pb, other));

    /* Keys that could not share a slot are refused before anything. */
    hilock_semaphore *bad;
    OK(hilock_semaphore_create(&bad, a, "{}x"));
    assert_int_equal(hilock_semaphore_try_acquire(bad, 1, 0), HILOCK_EINVAL);
    hilock_semaphore_destroy(bad);
    hilock_permit_semaphore_destroy(pb);
    hilock_permit_semaphore_destroy(pa);
    hilock_client_destroy(b);
    hilock_client_destroy(a);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_cluster_semaphores),
        cmocka_unit_test(test_cluster_permits),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
