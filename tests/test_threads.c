/* Handles used from several threads at once: a lock and its client
 * destroyed at the same moment from two threads, many times over.  Run
 * under ThreadSanitizer and AddressSanitizer (scripts/test does), where a
 * field read on one thread while another frees or writes it is a
 * failure, not luck. */
/* ctest-timeout: 120 */
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <setjmp.h>
#include <cmocka.h>

#include "hilock/client.h"
#include "hilock/error.h"
#include "hilock/lock.h"
#include "support/fixture.h"
#include "support/lock_helpers.h"

static hl_lock_fixture fx;

/* Two threads released together by a barrier: one destroys the lock,
 * the other the client. */
typedef struct race {
    pthread_barrier_t start;
    hilock_client *client;
    hilock_lock *lock;
    int lock_rc;
    int client_rc;
} race;

static void *destroy_lock_main(void *arg)
{
    race *r = arg;

    pthread_barrier_wait(&r->start);
    r->lock_rc = hilock_lock_destroy(r->lock);
    return NULL;
}

static void *destroy_client_main(void *arg)
{
    race *r = arg;

    pthread_barrier_wait(&r->start);
    r->client_rc = hilock_client_destroy(r->client);
    return NULL;
}

static void test_lock_and_client_destroyed_at_once(void **state)
{
    int rounds = hl_scaled(60, 10);

    (void)state;
    for (int i = 0; i < rounds; i++) {
        race r;
        pthread_t a, b;
        char name[32];

        memset(&r, 0, sizeof r);
        snprintf(name, sizeof name, "race:%d", i);
        r.client = hl_new_client(fx.server, NULL);
        r.lock = hl_new_lock(r.client, name);
        /* Half the rounds with a hold, so destroying the lock has a
         * lease to stop while the client goes away. */
        if (i % 2 == 0)
            assert_status(hilock_lock_try_acquire(r.lock, 0,
                                                  HILOCK_LEASE_WATCHDOG),
                          HILOCK_OK);
        assert_int_equal(pthread_barrier_init(&r.start, NULL, 2), 0);
        assert_int_equal(pthread_create(&a, NULL, destroy_lock_main, &r), 0);
        assert_int_equal(pthread_create(&b, NULL, destroy_client_main, &r),
                         0);
        assert_int_equal(pthread_join(a, NULL), 0);
        assert_int_equal(pthread_join(b, NULL), 0);
        pthread_barrier_destroy(&r.start);
        /* Each destroy did its job, whichever came first. */
        assert_status(r.lock_rc, HILOCK_OK);
        assert_status(r.client_rc, HILOCK_OK);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        hl_lock_test(test_lock_and_client_destroyed_at_once, &fx),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
