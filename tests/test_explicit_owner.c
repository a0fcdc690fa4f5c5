/* What the blocking API offers beside the calling thread's holds, on a
 * real redis-server: a hold taken on one thread and released on another
 * (an explicit owner); how long a hold is known to stand without asking
 * the server (hilock_lock_valid_until), before and after its lease is
 * lost; and a descriptor to poll for lost leases. */
/* ctest-timeout: 120 */
#include <poll.h>
#include <pthread.h>
#include <unistd.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include <setjmp.h>
#include <cmocka.h>

#include "hilock/hilock.h"
#include "support/fixture.h"
#include "support/lock_helpers.h"
#include "support/raw_reads.h"

static hl_lock_fixture fx;

static int64_t monotonic_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

typedef struct release_arg {
    hilock_lock *lock;
    uint64_t owner;
    int rc;
} release_arg;

static void *release_there(void *p)
{
    release_arg *a = p;
    a->rc = hilock_lock_release_as(a->lock, a->owner);
    return NULL;
}

/* A hold of an owner of the caller's making, taken here and given back
 * on another thread: the blocking API hands a lock between threads. */
static void test_hold_handed_between_threads(void **state)
{
    (void)state;
    hilock_client *c = hl_new_client(fx.server, NULL);
    hilock_lock *lock;
    const uint64_t job = 0x5eed0001;
    uint64_t token = 0;
    assert_status(hilock_lock_create(&lock, c, "handed"), HILOCK_OK);
    assert_status(hilock_lock_acquire_as(lock, job, 1000,
                                         HILOCK_LEASE_WATCHDOG,
                                         HILOCK_ACQUIRE_FENCED, &token),
                  HILOCK_OK);
    assert_true(token > 0);
    /* Not the thread's own hold. */
    assert_status(hilock_lock_release(lock), HILOCK_ENOTOWNER);
    /* Reentrant for that owner, from any thread; without the flag no
     * token is drawn, and the one given is cleared. */
    uint64_t none = 7;
    assert_status(hilock_lock_acquire_as(lock, job, 0, HILOCK_LEASE_WATCHDOG,
                                         0, &none),
                  HILOCK_OK);
    assert_int_equal(none, 0);
    release_arg a = {lock, job, -1};
    pthread_t t;
    assert_int_equal(pthread_create(&t, NULL, release_there, &a), 0);
    assert_int_equal(pthread_join(t, NULL), 0);
    assert_status(a.rc, HILOCK_OK);
    bool locked = false;
    assert_status(hilock_lock_is_locked(lock, &locked), HILOCK_OK);
    assert_true(locked); /* one hold of two given back */
    assert_int_equal(pthread_create(&t, NULL, release_there, &a), 0);
    assert_int_equal(pthread_join(t, NULL), 0);
    assert_status(a.rc, HILOCK_OK);
    assert_status(hilock_lock_is_locked(lock, &locked), HILOCK_OK);
    assert_false(locked);
    assert_status(hilock_lock_release_as(lock, job), HILOCK_ENOTOWNER);

    assert_status(hilock_lock_acquire_as(lock, 0, 0, 1000, 0, NULL),
                  HILOCK_EINVAL);
    assert_status(hilock_lock_acquire_as(lock, job, 0, 1000, 0x80, NULL),
                  HILOCK_EINVAL);
    assert_non_null(strstr(hilock_last_error(), "flags"));
    assert_status(hilock_lock_release_as(lock, 0), HILOCK_EINVAL);
    hilock_lock_destroy(lock);
    hl_free_client(c);
}

static bool renewed(void *client)
{
    hilock_client_stats s;
    return hl_client_counters(client, &s) == HILOCK_OK &&
           s.leases_renewed >= 1;
}

/* Known to stand until its lease's end less the drift margin; 0 for no
 * hold, and 0 once the lease is lost. */
static void test_valid_until(void **state)
{
    (void)state;
    hl_client_opts o = {.watchdog_ms = 900};
    hilock_client *c = hl_new_client(fx.server, &o);
    hilock_lock *lock, *watched;
    int64_t until = -1;
    assert_status(hilock_lock_create(&lock, c, "valid"), HILOCK_OK);
    assert_status(hilock_lock_valid_until(lock, &until), HILOCK_OK);
    assert_int_equal(until, 0);

    int64_t before = monotonic_ms();
    assert_status(hilock_lock_try_acquire(lock, 0, 10000), HILOCK_OK);
    int64_t after = monotonic_ms();
    assert_status(hilock_lock_valid_until(lock, &until), HILOCK_OK);
    /* Counted from when the attempt was sent, less a margin. */
    if (until > after + 10000 || until < before + 9000)
        fail_msg("valid until %lld, the grant came between %lld and %lld",
                 (long long)until, (long long)before, (long long)after);
    int64_t other = -1;
    assert_status(hilock_lock_owner_valid_until(lock, 77, &other),
                  HILOCK_OK);
    assert_int_equal(other, 0);
    assert_status(hilock_lock_release(lock), HILOCK_OK);
    assert_status(hilock_lock_valid_until(lock, &until), HILOCK_OK);
    assert_int_equal(until, 0);

    /* With the watchdog, renewals move it on; a lease lost ends it. */
    static hl_lost_rec rec;
    hl_lost_rec_init(&rec, NULL);
    assert_status(hilock_lock_create(&watched, c, "watched"), HILOCK_OK);
    assert_status(hilock_lock_set_lost_callback(watched, hl_record_lost,
                                                &rec),
                  HILOCK_OK);
    assert_status(hilock_lock_acquire(watched), HILOCK_OK);
    int64_t first = 0;
    assert_status(hilock_lock_valid_until(watched, &first), HILOCK_OK);
    assert_true(first > 0);
    assert_true(hl_wait_until(renewed, c, hl_widen(10000)));
    int64_t later = 0;
    assert_status(hilock_lock_valid_until(watched, &later), HILOCK_OK);
    assert_true(later > first);
    assert_int_equal(hl_raw_int(fx.server, "DEL", "watched", (char *)NULL),
                     1);
    assert_true(hl_wait_until(hl_lost_seen, &rec, hl_widen(10000)));
    assert_status(hilock_lock_valid_until(watched, &later), HILOCK_OK);
    assert_int_equal(later, 0);
    assert_status(hilock_lock_release(watched), HILOCK_ELEASELOST);

    assert_status(hilock_lock_valid_until(NULL, &until), HILOCK_EINVAL);
    assert_status(hilock_lock_valid_until(lock, NULL), HILOCK_EINVAL);
    assert_status(hilock_lock_owner_valid_until(lock, 0, &until),
                  HILOCK_EINVAL);
    hilock_lock_destroy(watched);
    hilock_lock_destroy(lock);
    hl_free_client(c);
}

static bool readable(void *fd)
{
    struct pollfd p = {*(int *)fd, POLLIN, 0};
    return poll(&p, 1, 0) == 1 && (p.revents & POLLIN);
}

/* The descriptor turns readable when a lease is lost, says how many,
 * and is quiet again once read. */
static void test_lost_fd(void **state)
{
    (void)state;
    hl_client_opts o = {.watchdog_ms = 900};
    hilock_client *c = hl_new_client(fx.server, &o);
    int fd = -1, again = -1;
    assert_status(hilock_client_lost_fd(c, &fd), HILOCK_OK);
    assert_true(fd >= 0);
    assert_status(hilock_client_lost_fd(c, &again), HILOCK_OK);
    assert_int_equal(again, fd);
    assert_false(readable(&fd));

    hilock_lock *a, *b;
    assert_status(hilock_lock_create(&a, c, "fd-a"), HILOCK_OK);
    assert_status(hilock_lock_create(&b, c, "fd-b"), HILOCK_OK);
    assert_status(hilock_lock_acquire(a), HILOCK_OK);
    assert_status(hilock_lock_acquire(b), HILOCK_OK);
    /* Held and renewed: nothing to read. */
    assert_true(hl_wait_until(renewed, c, hl_widen(10000)));
    assert_false(readable(&fd));
    assert_int_equal(hl_raw_int(fx.server, "DEL", "fd-a", (char *)NULL), 1);
    assert_true(hl_wait_until(readable, &fd, hl_widen(10000)));
    uint64_t n = 0;
    assert_int_equal(read(fd, &n, sizeof n), (ssize_t)sizeof n);
    assert_int_equal(n, 1);
    assert_false(readable(&fd));
    bool lost = false;
    assert_status(hilock_lock_lease_lost(a, &lost), HILOCK_OK);
    assert_true(lost);
    assert_status(hilock_lock_lease_lost(b, &lost), HILOCK_OK);
    assert_false(lost);
    assert_status(hilock_lock_release(a), HILOCK_ELEASELOST);
    assert_status(hilock_lock_release(b), HILOCK_OK);

    assert_status(hilock_client_lost_fd(NULL, &fd), HILOCK_EINVAL);
    assert_status(hilock_client_lost_fd(c, NULL), HILOCK_EINVAL);
    hilock_lock_destroy(a);
    hilock_lock_destroy(b);
    assert_status(hilock_client_close(c), HILOCK_OK);
    assert_status(hilock_client_lost_fd(c, &again), HILOCK_ECLOSED);
    assert_int_equal(again, -1);
    hl_free_client(c);
}

int main(void)
{
#define T(fn) hl_lock_test(fn, &fx)
    const struct CMUnitTest tests[] = {
        T(test_hold_handed_between_threads),
        T(test_valid_until),
        T(test_lost_fd),
    };
#undef T
    return cmocka_run_group_tests(tests, NULL, NULL);
}
